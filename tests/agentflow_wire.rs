//! Wire compatibility with AgentFlow 0.10.1: the 20 messages that the real Python package
//! dumped (`agentflow-messages.json`, from the directory in `AGENTSTATE_WIRE_DIR`) must read,
//! write back to the same JSON and give the same `Message.text()`.
//!
//! Byte-exactness: serde_json's `Map` keeps keys sorted, while Python keeps a dict's insertion
//! order, so a user map such as `metadata` may come back reordered. The test therefore compares
//! the text byte for byte after aligning only the objects whose key order differs *and* which
//! serde_json wrote sorted (a `Map`); every other object, and every scalar, must match exactly.
//! Messages that need no alignment at all are compared as raw strings.

use agentstate::message::Message;
use serde_json::Value;
use std::io::Write as _;
use std::path::PathBuf;

const EXPECTED_MESSAGES: usize = 20;

#[test]
fn agentflow_messages_round_trip() {
    let Some(dir) = std::env::var_os("AGENTSTATE_WIRE_DIR") else {
        // Written to the process's stderr, not through `println!`, so that the test harness
        // does not capture it: a skipped conformance check should be visible.
        let _ = writeln!(
            std::io::stderr(),
            "agentflow wire fixtures: AGENTSTATE_WIRE_DIR is not set; skipping"
        );
        return;
    };
    let path = PathBuf::from(dir).join("agentflow-messages.json");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let file: Value = serde_json::from_str(&text).expect("the fixture file is JSON");
    let messages = file["messages"].as_array().expect("a `messages` array");
    assert_eq!(messages.len(), EXPECTED_MESSAGES);

    let mut verbatim = 0;
    let mut aligned = 0;
    for case in messages {
        let name = case["name"].as_str().expect("a name");
        let dump = &case["dump"];
        let json_string = case["json_string"].as_str().expect("a json_string");
        let expected_text = case["text"].as_str().expect("a text");

        let message: Message = serde_json::from_value(dump.clone())
            .unwrap_or_else(|e| panic!("{name}: dump does not deserialize: {e}"));
        let from_text: Message = serde_json::from_str(json_string)
            .unwrap_or_else(|e| panic!("{name}: json_string does not deserialize: {e}"));
        assert_eq!(from_text, message, "{name}: dump and json_string disagree");

        assert_eq!(
            &serde_json::to_value(&message).unwrap(),
            dump,
            "{name}: value round trip"
        );
        assert_eq!(message.text(), expected_text, "{name}: text()");

        let ours = serde_json::to_string(&message).unwrap();
        let expected = raw::parse(json_string);
        assert_eq!(expected.render(), json_string, "{name}: tokenizer sanity");
        let mut reordered = 0;
        let expected = raw::align(expected, &raw::parse(&ours), &mut reordered, name);
        if reordered == 0 {
            assert_eq!(ours, json_string, "{name}: compact text differs");
            verbatim += 1;
        } else {
            assert_eq!(ours, expected.render(), "{name}: compact text differs");
            aligned += 1;
        }
    }
    println!(
        "agentflow wire fixtures: {verbatim} messages byte-identical, \
         {aligned} byte-identical after sorting user-map keys"
    );
    assert_eq!(verbatim + aligned, EXPECTED_MESSAGES);
    assert!(verbatim > 0);
}

/// A minimal JSON reader that keeps every token's text and every object's key order.
mod raw {
    use std::collections::HashSet;

    #[derive(Debug, Clone)]
    pub enum Raw {
        /// Entries with their decoded key, raw key text and value.
        Object(Vec<(String, String, Raw)>),
        Array(Vec<Raw>),
        /// A string, number or literal, exactly as written.
        Scalar(String),
    }

    pub fn parse(text: &str) -> Raw {
        let mut reader = Reader {
            s: text.as_bytes(),
            i: 0,
        };
        let value = reader.value();
        reader.ws();
        assert_eq!(reader.i, text.len(), "trailing text in {text}");
        value
    }

    struct Reader<'a> {
        s: &'a [u8],
        i: usize,
    }

    impl Reader<'_> {
        fn ws(&mut self) {
            while self.i < self.s.len() && self.s[self.i].is_ascii_whitespace() {
                self.i += 1;
            }
        }

        fn eat(&mut self, byte: u8) -> bool {
            self.ws();
            if self.s.get(self.i) == Some(&byte) {
                self.i += 1;
                true
            } else {
                false
            }
        }

        fn text(&self, start: usize) -> String {
            String::from_utf8(self.s[start..self.i].to_vec()).expect("UTF-8")
        }

        fn string(&mut self) -> String {
            let start = self.i;
            assert_eq!(self.s[self.i], b'"');
            self.i += 1;
            while self.s[self.i] != b'"' {
                self.i += if self.s[self.i] == b'\\' { 2 } else { 1 };
            }
            self.i += 1;
            self.text(start)
        }

        fn value(&mut self) -> Raw {
            self.ws();
            match self.s[self.i] {
                b'{' => {
                    self.i += 1;
                    let mut entries = Vec::new();
                    if !self.eat(b'}') {
                        loop {
                            self.ws();
                            let key = self.string();
                            let decoded: String = serde_json::from_str(&key).expect("a key");
                            assert!(self.eat(b':'));
                            entries.push((decoded, key, self.value()));
                            if self.eat(b'}') {
                                break;
                            }
                            assert!(self.eat(b','));
                        }
                    }
                    Raw::Object(entries)
                }
                b'[' => {
                    self.i += 1;
                    let mut items = Vec::new();
                    if !self.eat(b']') {
                        loop {
                            items.push(self.value());
                            if self.eat(b']') {
                                break;
                            }
                            assert!(self.eat(b','));
                        }
                    }
                    Raw::Array(items)
                }
                b'"' => Raw::Scalar(self.string()),
                _ => {
                    let start = self.i;
                    while self.i < self.s.len()
                        && !matches!(self.s[self.i], b',' | b']' | b'}')
                        && !self.s[self.i].is_ascii_whitespace()
                    {
                        self.i += 1;
                    }
                    Raw::Scalar(self.text(start))
                }
            }
        }
    }

    impl Raw {
        /// Compact JSON text.
        pub fn render(&self) -> String {
            let mut out = String::new();
            self.write(&mut out);
            out
        }

        fn write(&self, out: &mut String) {
            match self {
                Raw::Scalar(text) => out.push_str(text),
                Raw::Array(items) => {
                    out.push('[');
                    for (i, item) in items.iter().enumerate() {
                        if i > 0 {
                            out.push(',');
                        }
                        item.write(out);
                    }
                    out.push(']');
                }
                Raw::Object(entries) => {
                    out.push('{');
                    for (i, (_, key, value)) in entries.iter().enumerate() {
                        if i > 0 {
                            out.push(',');
                        }
                        out.push_str(key);
                        out.push(':');
                        value.write(out);
                    }
                    out.push('}');
                }
            }
        }
    }

    /// `expected` with each object whose key order differs from `ours` put in `ours`' order,
    /// allowed only where `ours` has its keys sorted (a serde_json `Map`). Counts the objects
    /// it reordered. Scalars are left untouched: the caller compares them byte for byte.
    pub fn align(expected: Raw, ours: &Raw, reordered: &mut usize, name: &str) -> Raw {
        match (expected, ours) {
            (Raw::Object(mut exp), Raw::Object(got)) => {
                let exp_keys: Vec<&str> = exp.iter().map(|e| e.0.as_str()).collect();
                let got_keys: Vec<&str> = got.iter().map(|e| e.0.as_str()).collect();
                if exp_keys != got_keys {
                    let exp_set: HashSet<&str> = exp_keys.iter().copied().collect();
                    let got_set: HashSet<&str> = got_keys.iter().copied().collect();
                    assert_eq!(exp_set, got_set, "{name}: keys differ");
                    assert!(
                        got_keys.windows(2).all(|w| w[0] < w[1]),
                        "{name}: key order {got_keys:?} differs from AgentFlow's \
                         {exp_keys:?} and is not a sorted map"
                    );
                    exp.sort_by(|a, b| a.0.cmp(&b.0));
                    *reordered += 1;
                }
                Raw::Object(
                    exp.into_iter()
                        .zip(got)
                        .map(|((k, raw_key, v), (_, _, g))| {
                            let v = align(v, g, reordered, name);
                            (k, raw_key, v)
                        })
                        .collect(),
                )
            }
            (Raw::Array(exp), Raw::Array(got)) => {
                assert_eq!(exp.len(), got.len(), "{name}: array lengths differ");
                Raw::Array(
                    exp.into_iter()
                        .zip(got)
                        .map(|(e, g)| align(e, g, reordered, name))
                        .collect(),
                )
            }
            (expected, _) => expected,
        }
    }
}
