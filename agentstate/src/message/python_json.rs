//! A writer that formats a [`serde_json::Value`] exactly like Python's `json.dumps(value)` with
//! its default settings, the way AgentFlow writes tool-call arguments and non-string tool
//! outputs in [`Message::text`](super::Message::text).
//!
//! The defaults it reproduces: separators `", "` and `": "`, `ensure_ascii=True` (every
//! character outside printable ASCII becomes `\uXXXX` in lowercase hex, with a surrogate pair
//! above U+FFFF), Python's float `repr` (`1.0`, `1e+16`, `1e-05`) and integers as they are.
//! `NaN` and infinities cannot occur: a `Value` cannot hold them.
//!
//! [`text_to_string`] rewrites JSON text held by a [`Json`](super::Json) instead, which keeps
//! the keys in the order they were read (as a Python dict does) and integers of any size.

use serde_json::{Map, Number, Value};
use std::fmt::Write;

/// `json.dumps(value)` of Python, as a `String`.
pub(crate) fn to_string(value: &Value) -> String {
    let mut out = String::new();
    write_value(&mut out, value);
    out
}

/// `json.dumps` of the value whose compact JSON text is `text` (valid JSON without whitespace
/// between tokens, as a [`Json`](super::Json) holds it): keys in the text's order, integers
/// digit for digit, floats as Python's `repr`, strings with `ensure_ascii`.
pub(crate) fn text_to_string(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + text.len() / 4);
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'"' => {
                let start = i;
                i += 1;
                while i < bytes.len() && bytes[i] != b'"' {
                    i += if bytes[i] == b'\\' { 2 } else { 1 };
                }
                i += 1;
                let token = text.get(start..i.min(text.len())).unwrap_or_default();
                match serde_json::from_str::<String>(token) {
                    Ok(s) => write_str(&mut out, &s),
                    Err(_) => out.push_str(token),
                }
                continue;
            }
            b',' => out.push_str(", "),
            b':' => out.push_str(": "),
            b'-' | b'0'..=b'9' => {
                let start = i;
                while i < bytes.len()
                    && matches!(bytes[i], b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9')
                {
                    i += 1;
                }
                let token = &text[start..i];
                if token.contains(['.', 'e', 'E']) {
                    match token.parse::<f64>() {
                        Ok(f) => write_float(&mut out, f),
                        Err(_) => out.push_str(token),
                    }
                } else if token == "-0" {
                    out.push('0');
                } else {
                    out.push_str(token);
                }
                continue;
            }
            b => out.push(b as char),
        }
        i += 1;
    }
    out
}

fn write_value(out: &mut String, value: &Value) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(true) => out.push_str("true"),
        Value::Bool(false) => out.push_str("false"),
        Value::Number(n) => write_number(out, n),
        Value::String(s) => write_str(out, s),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_value(out, item);
            }
            out.push(']');
        }
        Value::Object(map) => write_object(out, map),
    }
}

fn write_object(out: &mut String, map: &Map<String, Value>) {
    out.push('{');
    for (i, (key, item)) in map.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        write_str(out, key);
        out.push_str(": ");
        write_value(out, item);
    }
    out.push('}');
}

fn write_number(out: &mut String, n: &Number) {
    if let Some(i) = n.as_i64() {
        let _ = write!(out, "{i}");
    } else if let Some(u) = n.as_u64() {
        let _ = write!(out, "{u}");
    } else if let Some(f) = n.as_f64() {
        write_float(out, f);
    } else {
        // Unreachable without serde_json's `arbitrary_precision`; keep serde_json's text.
        let _ = write!(out, "{n}");
    }
}

/// Python's `float.__repr__`: the shortest digits that round-trip, in positional notation when
/// the decimal exponent is in `-4 < decpt <= 16`, else `d.ddde±XX`.
fn write_float(out: &mut String, f: f64) {
    if !f.is_finite() {
        // Not representable in a `serde_json::Value`; Python would write these names.
        out.push_str(if f.is_nan() {
            "NaN"
        } else if f > 0.0 {
            "Infinity"
        } else {
            "-Infinity"
        });
        return;
    }
    write_shortest(out, f, -4..16, 2);
}

/// A finite float with the shortest digits that round-trip: positional (`0.0001`, `1.0`) when
/// its scientific exponent is in `positional`, else `d.ddde±X` with the exponent written with
/// at least `exponent_digits` digits. Python's `repr` and pydantic differ only in those two.
pub(crate) fn write_shortest<W: Write>(
    out: &mut W,
    f: f64,
    positional: std::ops::Range<i32>,
    exponent_digits: usize,
) {
    // Rust's `{:e}` gives the shortest round-trip digits: `-1.2345e-7`, `1e16`, `0e0`.
    let mut sci = StackText::default();
    let _ = write!(sci, "{:e}", f.abs());
    let (mantissa, exponent) = sci.as_str().split_once('e').unwrap_or((sci.as_str(), "0"));
    let exp: i32 = exponent.parse().unwrap_or(0);
    if f.is_sign_negative() {
        let _ = out.write_char('-');
    }
    if !positional.contains(&exp) {
        let sign = if exp < 0 { '-' } else { '+' };
        let _ = write!(out, "{mantissa}e{sign}{:0exponent_digits$}", exp.abs());
        return;
    }
    let (int_digit, frac_digits) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let ndigits = 1 + frac_digits.len() as i32;
    let _ = if exp < 0 {
        write!(
            out,
            "0.{:0>zeros$}{int_digit}{frac_digits}",
            "",
            zeros = (-exp - 1) as usize
        )
    } else if exp + 1 >= ndigits {
        let zeros = (exp + 1 - ndigits) as usize;
        write!(out, "{int_digit}{frac_digits}{:0>zeros$}.0", "")
    } else {
        let (int, frac) = frac_digits.split_at(exp as usize);
        write!(out, "{int_digit}{int}.{frac}")
    };
}

/// A short text written without a heap allocation (a float's digits).
#[derive(Default)]
pub(crate) struct StackText {
    bytes: [u8; 32],
    len: usize,
}

impl StackText {
    pub(crate) fn as_str(&self) -> &str {
        // Only whole `str`s are written.
        std::str::from_utf8(&self.bytes[..self.len]).unwrap_or_default()
    }
}

impl Write for StackText {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        let end = self.len + s.len();
        let slot = self.bytes.get_mut(self.len..end).ok_or(std::fmt::Error)?;
        slot.copy_from_slice(s.as_bytes());
        self.len = end;
        Ok(())
    }
}

/// A JSON string with `ensure_ascii=True`.
fn write_str(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{08}' => out.push_str("\\b"),
            '\u{0c}' => out.push_str("\\f"),
            ' '..='~' => out.push(c),
            _ => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    let _ = write!(out, "\\u{unit:04x}");
                }
            }
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::{text_to_string, to_string};
    use serde_json::json;

    fn float(f: f64) -> String {
        to_string(&json!(f))
    }

    #[test]
    fn separators_are_python_defaults() {
        assert_eq!(to_string(&json!({"city": "Paris"})), r#"{"city": "Paris"}"#);
        assert_eq!(
            to_string(&json!({"a": [1, 2, {"b": null}], "c": true, "d": false})),
            r#"{"a": [1, 2, {"b": null}], "c": true, "d": false}"#
        );
        assert_eq!(to_string(&json!([])), "[]");
        assert_eq!(to_string(&json!({})), "{}");
        assert_eq!(to_string(&json!([[], {}])), "[[], {}]");
    }

    #[test]
    fn scalars() {
        assert_eq!(to_string(&json!(null)), "null");
        assert_eq!(to_string(&json!(0)), "0");
        assert_eq!(to_string(&json!(-42)), "-42");
        assert_eq!(to_string(&json!(u64::MAX)), "18446744073709551615");
        assert_eq!(to_string(&json!(i64::MIN)), "-9223372036854775808");
        assert_eq!(to_string(&json!("x")), r#""x""#);
    }

    #[test]
    fn floats_use_python_repr() {
        // Each expected string is what Python 3 prints for repr(float).
        assert_eq!(float(1.0), "1.0");
        assert_eq!(float(0.0), "0.0");
        assert_eq!(float(-0.0), "-0.0");
        assert_eq!(float(-2.5), "-2.5");
        assert_eq!(float(0.1), "0.1");
        assert_eq!(float(1.5e-7), "1.5e-07");
        assert_eq!(float(1e-5), "1e-05");
        assert_eq!(float(0.0001), "0.0001");
        assert_eq!(float(0.00012345), "0.00012345");
        assert_eq!(float(1e15), "1000000000000000.0");
        assert_eq!(float(1e16), "1e+16");
        assert_eq!(float(1.2345e16), "1.2345e+16");
        assert_eq!(float(9999999999999998.0), "9999999999999998.0");
        assert_eq!(float(123456789012345678.0), "1.2345678901234568e+17");
        assert_eq!(float(1700000000.0), "1700000000.0");
        assert_eq!(float(1e100), "1e+100");
        assert_eq!(float(-1e-100), "-1e-100");
        assert_eq!(float(f64::MAX), "1.7976931348623157e+308");
        assert_eq!(float(5e-324), "5e-324");
        assert_eq!(float(22.25), "22.25");
        assert_eq!(float(1.0 / 3.0), "0.3333333333333333");
    }

    #[test]
    fn strings_are_ensure_ascii() {
        assert_eq!(to_string(&json!("22°C")), r#""22\u00b0C""#);
        assert_eq!(to_string(&json!("Zürich")), r#""Z\u00fcrich""#);
        assert_eq!(to_string(&json!("日本")), r#""\u65e5\u672c""#);
        // Above U+FFFF: a UTF-16 surrogate pair, lowercase hex.
        assert_eq!(to_string(&json!("😀")), r#""\ud83d\ude00""#);
        assert_eq!(
            to_string(&json!("a\"b\\c\n\r\t\u{8}\u{c}")),
            r#""a\"b\\c\n\r\t\b\f""#
        );
        assert_eq!(
            to_string(&json!("\u{0}\u{1f}\u{7f}")),
            r#""\u0000\u001f\u007f""#
        );
        assert_eq!(to_string(&json!("/ ~")), r#""/ ~""#);
        assert_eq!(to_string(&json!({"clé": "é"})), r#"{"cl\u00e9": "\u00e9"}"#);
    }

    #[test]
    fn text_keeps_order_and_big_integers() {
        assert_eq!(
            text_to_string(
                r#"{"z":1,"a":[1e-05,1.0,-0,1180591620717411303424],"é":"a:b,c","n":null}"#
            ),
            r#"{"z": 1, "a": [1e-05, 1.0, 0, 1180591620717411303424], "\u00e9": "a:b,c", "n": null}"#
        );
        assert_eq!(text_to_string(r#""x\"y""#), r#""x\"y""#);
        assert_eq!(
            text_to_string("[[],{},true,false]"),
            "[[], {}, true, false]"
        );
    }
}
