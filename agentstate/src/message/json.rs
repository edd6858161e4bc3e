//! Free-form JSON of a message (`metadata`, `raw`, tool arguments and outputs...), kept as the
//! compact text that was read: keys stay in the order they came, integers of any size stay
//! exact, numbers keep their spelling.
//!
//! AgentFlow's free-form fields are Python dicts, which keep insertion order, and Python ints,
//! which have no size limit. A `serde_json::Value` can keep neither (without features that
//! change serde_json for the whole program), so these fields hold a [`Json`] (any value) or a
//! [`JsonObject`] (an object), which store the value's compact JSON text and parse it on
//! demand.
//!
//! Reading from serde_json's own deserializers (`from_str`, `from_slice`, `from_reader`,
//! `from_value`) takes the value's exact text through serde_json's raw-value support
//! (feature `raw_value`); any other deserializer (serde's buffering of `#[serde(flatten)]`,
//! another format) is transcoded event by event, which keeps key order but sees integers
//! beyond 64 bits as the floats that deserializer made of them.

use super::python_json;
use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::ser::{SerializeStruct, Serializer};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{Map, Value};
use std::fmt;

/// serde_json's name for a raw value: serializing or deserializing a struct of this name makes
/// serde_json's own (de)serializers pass the JSON text through untouched.
const RAW_TOKEN: &str = "$serde_json::private::RawValue";

/// The nesting limit of a transcoded value, serde_json's own, so that every text held here
/// parses again.
const MAX_DEPTH: usize = 127;

/// Any JSON value, kept as its compact text in the order it was read.
///
/// Equality first compares the texts, then the parsed values, so `{"a":1,"b":2}` equals
/// `{"b":2,"a":1}` as Python dicts do.
///
/// ```
/// use agentstate::message::Json;
/// use serde_json::json;
///
/// // Integers beyond 64 bits and key order survive a round trip.
/// let big: Json = serde_json::from_str(r#"{"z": 1, "a": 340282366920938463463374607431768211457}"#)?;
/// assert_eq!(big.as_json(), r#"{"z":1,"a":340282366920938463463374607431768211457}"#);
/// assert_eq!(serde_json::to_string(&big)?, big.as_json());
///
/// let hello = Json::from("hello");
/// assert_eq!(hello.as_json(), r#""hello""#);
/// assert_eq!(hello.as_string().as_deref(), Some("hello"));
/// assert_eq!(hello, json!("hello"));
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Clone)]
pub struct Json(Box<str>);

impl Json {
    /// JSON `null`.
    pub fn null() -> Self {
        Json("null".into())
    }

    /// The compact JSON text.
    pub fn as_json(&self) -> &str {
        &self.0
    }

    /// Whether the value is `null`.
    pub fn is_null(&self) -> bool {
        &*self.0 == "null"
    }

    /// Whether the value is a string.
    pub fn is_string(&self) -> bool {
        self.0.starts_with('"')
    }

    /// Whether the value is an object.
    pub fn is_object(&self) -> bool {
        self.0.starts_with('{')
    }

    /// The string, if the value is one.
    pub fn as_string(&self) -> Option<String> {
        if self.is_string() {
            serde_json::from_str(&self.0).ok()
        } else {
            None
        }
    }

    /// The value parsed into a `T`.
    ///
    /// ```
    /// use agentstate::message::Json;
    ///
    /// let args: Json = serde_json::from_str(r#"{"city": "Paris", "days": 3}"#)?;
    /// #[derive(serde::Deserialize)]
    /// struct Args { city: String, days: u8 }
    /// let args: Args = args.parse()?;
    /// assert_eq!((args.city.as_str(), args.days), ("Paris", 3));
    /// # Ok::<(), serde_json::Error>(())
    /// ```
    pub fn parse<'a, T: Deserialize<'a>>(&'a self) -> Result<T, serde_json::Error> {
        serde_json::from_str(&self.0)
    }

    /// The value as a `serde_json::Value` (whose maps sort their keys, and which holds
    /// integers beyond 64 bits as floats).
    pub fn to_value(&self) -> Value {
        // The text is valid JSON within serde_json's nesting limit by construction.
        self.parse().unwrap_or(Value::Null)
    }

    /// The value of text that is already compact, valid JSON (a sub-value of a held text).
    fn from_compact(text: &str) -> Self {
        Json(text.into())
    }
}

impl Default for Json {
    /// JSON `null`.
    fn default() -> Self {
        Json::null()
    }
}

impl fmt::Debug for Json {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Display for Json {
    /// The compact JSON text.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl PartialEq for Json {
    fn eq(&self, other: &Json) -> bool {
        self.0 == other.0 || self.to_value() == other.to_value()
    }
}

impl Eq for Json {}

impl PartialEq<Value> for Json {
    fn eq(&self, other: &Value) -> bool {
        self.to_value() == *other
    }
}

impl From<Value> for Json {
    fn from(value: Value) -> Self {
        Json::from(&value)
    }
}

impl From<&Value> for Json {
    /// The value's compact text, with floats spelled as pydantic writes them.
    fn from(value: &Value) -> Self {
        let mut out = Vec::new();
        // A `Value` built in code can nest deeper than serde_json parses; keep what parses.
        match value.deserialize_any(Transcoder::new(&mut out, 0)) {
            Ok(()) => Json(into_string(out)),
            Err(_) => Json::null(),
        }
    }
}

macro_rules! json_from {
    ($($ty:ty),*) => {$(
        impl From<$ty> for Json {
            fn from(value: $ty) -> Self {
                Json::from(Value::from(value))
            }
        }
    )*};
}

json_from!(&str, String, bool, i64, i32, u64, u32, f64);

impl From<Map<String, Value>> for Json {
    fn from(map: Map<String, Value>) -> Self {
        Json::from(Value::Object(map))
    }
}

impl From<JsonObject> for Json {
    fn from(object: JsonObject) -> Self {
        object.0
    }
}

impl Serialize for Json {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serialize_raw(&self.0, serializer)
    }
}

/// Writes `text`, which is valid JSON, as a raw value: verbatim to serde_json's serializer,
/// parsed by serde_json's `Value` serializer.
pub(crate) fn serialize_raw<S: Serializer>(text: &str, serializer: S) -> Result<S::Ok, S::Error> {
    let mut s = serializer.serialize_struct(RAW_TOKEN, 1)?;
    s.serialize_field(RAW_TOKEN, text)?;
    s.end()
}

impl<'de> Deserialize<'de> for Json {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let mut out = Vec::new();
        deserializer.deserialize_newtype_struct(RAW_TOKEN, Transcoder::top(&mut out))?;
        Ok(Json(into_string(out)))
    }
}

fn into_string(out: Vec<u8>) -> Box<str> {
    // Only whole UTF-8 strings and ASCII are ever written.
    String::from_utf8(out)
        .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
        .into_boxed_str()
}

/// A JSON object, kept as its compact text in the order it was read: a message's `metadata`,
/// a tool call's `args`, a provider's `raw` response.
///
/// Reading a key parses the text; [`insert`](JsonObject::insert) rewrites it, keeping the
/// other keys in place, as a Python dict does.
///
/// ```
/// use agentstate::message::JsonObject;
/// use serde_json::json;
///
/// let mut meta: JsonObject = serde_json::from_str(r#"{"provider": "openai", "model": "gpt-4o"}"#)?;
/// assert_eq!(meta.get("model").unwrap(), json!("gpt-4o"));
/// meta.insert("provider", "azure");
/// meta.insert("finish_reason", "stop");
/// assert_eq!(meta.as_json(), r#"{"provider":"azure","model":"gpt-4o","finish_reason":"stop"}"#);
/// assert_eq!(meta.keys(), ["provider", "model", "finish_reason"]);
/// assert!(serde_json::from_str::<JsonObject>("[1]").is_err());
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct JsonObject(Json);

impl Default for JsonObject {
    /// An empty object.
    fn default() -> Self {
        JsonObject::new()
    }
}

impl JsonObject {
    /// An empty object.
    pub fn new() -> Self {
        JsonObject(Json("{}".into()))
    }

    /// The compact JSON text.
    pub fn as_json(&self) -> &str {
        self.0.as_json()
    }

    /// Whether the object has no key.
    pub fn is_empty(&self) -> bool {
        self.as_json() == "{}"
    }

    /// The entries in order, each value as a [`Json`].
    pub fn entries(&self) -> Vec<(String, Json)> {
        self.raw_entries()
            .into_iter()
            .map(|(key, value)| (key, Json::from_compact(value.get())))
            .collect()
    }

    /// The keys in order.
    pub fn keys(&self) -> Vec<String> {
        self.raw_entries().into_iter().map(|(key, _)| key).collect()
    }

    /// The number of entries.
    pub fn len(&self) -> usize {
        self.raw_entries().len()
    }

    /// The value of `key` (the last one, if the text repeats it), parsed.
    pub fn get(&self, key: &str) -> Option<Value> {
        self.get_json(key).map(|value| value.to_value())
    }

    /// The value of `key` as a [`Json`].
    pub fn get_json(&self, key: &str) -> Option<Json> {
        self.raw_entries()
            .into_iter()
            .rev()
            .find(|(k, _)| k == key)
            .map(|(_, value)| Json::from_compact(value.get()))
    }

    /// Whether `key` is present.
    pub fn contains_key(&self, key: &str) -> bool {
        self.raw_entries().iter().any(|(k, _)| k == key)
    }

    /// Sets `key` to `value`: in place if the key is present, else at the end.
    pub fn insert(&mut self, key: impl Into<String>, value: impl Into<Json>) {
        let key = key.into();
        let value = value.into();
        let entries = self.raw_entries();
        let mut out = String::with_capacity(self.as_json().len() + key.len() + 8);
        out.push('{');
        let mut found = false;
        for (k, v) in &entries {
            if !out.ends_with('{') {
                out.push(',');
            }
            push_key(&mut out, k);
            if *k == key {
                found = true;
                out.push_str(value.as_json());
            } else {
                out.push_str(v.get());
            }
        }
        if !found {
            if !out.ends_with('{') {
                out.push(',');
            }
            push_key(&mut out, &key);
            out.push_str(value.as_json());
        }
        out.push('}');
        self.0 = Json(out.into_boxed_str());
    }

    /// Removes `key`, returning its value if it was present; the other keys keep their order.
    ///
    /// ```
    /// use agentstate::message::JsonObject;
    ///
    /// let mut object: JsonObject = serde_json::from_str(r#"{"b": 1, "a": 2, "c": 3}"#)?;
    /// assert_eq!(object.remove("a").map(|v| v.to_value()), Some(serde_json::json!(2)));
    /// assert_eq!(object.as_json(), r#"{"b":1,"c":3}"#);
    /// assert!(object.remove("a").is_none());
    /// # Ok::<(), serde_json::Error>(())
    /// ```
    pub fn remove(&mut self, key: &str) -> Option<Json> {
        let entries = self.raw_entries();
        let mut removed = None;
        let mut out = String::with_capacity(self.as_json().len());
        out.push('{');
        for (k, v) in &entries {
            if removed.is_none() && *k == key {
                removed = Some(Json(v.get().into()));
                continue;
            }
            if !out.ends_with('{') {
                out.push(',');
            }
            push_key(&mut out, k);
            out.push_str(v.get());
        }
        out.push('}');
        if removed.is_some() {
            self.0 = Json(out.into_boxed_str());
        }
        removed
    }

    /// The object as a `serde_json::Map` (whose keys are sorted).
    pub fn to_map(&self) -> Map<String, Value> {
        self.parse().unwrap_or_default()
    }

    /// The object parsed into a `T`.
    pub fn parse<'a, T: Deserialize<'a>>(&'a self) -> Result<T, serde_json::Error> {
        self.0.parse()
    }

    /// The object as a `serde_json::Value`.
    pub fn to_value(&self) -> Value {
        self.0.to_value()
    }

    /// The object as a [`Json`].
    pub fn as_value(&self) -> &Json {
        &self.0
    }

    fn raw_entries(&self) -> Vec<(String, &RawValue)> {
        serde_json::from_str::<Entries<'_>>(self.as_json())
            .map(|entries| entries.0)
            .unwrap_or_default()
    }
}

fn push_key(out: &mut String, key: &str) {
    // Writing a `str` to a `String` cannot fail.
    out.push_str(&serde_json::to_string(key).unwrap_or_default());
    out.push(':');
}

/// An object's entries in order, values borrowed as raw text.
struct Entries<'a>(Vec<(String, &'a RawValue)>);

impl<'de> Deserialize<'de> for Entries<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct EntriesVisitor;
        impl<'de> Visitor<'de> for EntriesVisitor {
            type Value = Entries<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Entries<'de>, A::Error> {
                let mut entries = Vec::new();
                while let Some(entry) = map.next_entry()? {
                    entries.push(entry);
                }
                Ok(Entries(entries))
            }
        }
        deserializer.deserialize_map(EntriesVisitor)
    }
}

impl fmt::Debug for JsonObject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_json())
    }
}

impl fmt::Display for JsonObject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_json())
    }
}

impl PartialEq<Value> for JsonObject {
    fn eq(&self, other: &Value) -> bool {
        self.to_value() == *other
    }
}

impl From<Map<String, Value>> for JsonObject {
    fn from(map: Map<String, Value>) -> Self {
        JsonObject(Json::from(Value::Object(map)))
    }
}

impl TryFrom<Json> for JsonObject {
    type Error = Json;

    /// The object, or the value back if it is not an object.
    fn try_from(value: Json) -> Result<Self, Json> {
        if value.is_object() {
            Ok(JsonObject(value))
        } else {
            Err(value)
        }
    }
}

impl<K: Into<String>, V: Into<Json>> FromIterator<(K, V)> for JsonObject {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Self {
        let mut object = JsonObject::new();
        for (key, value) in iter {
            object.insert(key, value);
        }
        object
    }
}

impl Serialize for JsonObject {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for JsonObject {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = Json::deserialize(deserializer)?;
        JsonObject::try_from(value)
            .map_err(|value| de::Error::invalid_type(unexpected(&value), &"a JSON object"))
    }
}

fn unexpected(value: &Json) -> de::Unexpected<'_> {
    match value.as_json().as_bytes().first() {
        Some(b'"') => de::Unexpected::Other("string"),
        Some(b'[') => de::Unexpected::Seq,
        Some(b'n') => de::Unexpected::Unit,
        Some(b't') => de::Unexpected::Bool(true),
        Some(b'f') => de::Unexpected::Bool(false),
        _ => de::Unexpected::Other("number"),
    }
}

/// Writes what a deserializer produces as compact JSON text. At the top (`raw`), it accepts
/// serde_json's raw value and copies its text.
struct Transcoder<'a> {
    out: &'a mut Vec<u8>,
    depth: usize,
    raw: bool,
}

impl<'a> Transcoder<'a> {
    fn new(out: &'a mut Vec<u8>, depth: usize) -> Self {
        Transcoder {
            out,
            depth,
            raw: false,
        }
    }

    fn top(out: &'a mut Vec<u8>) -> Self {
        Transcoder {
            out,
            depth: 0,
            raw: true,
        }
    }

    fn nested<E: de::Error>(&mut self) -> Result<Transcoder<'_>, E> {
        if self.depth >= MAX_DEPTH {
            return Err(E::custom("the JSON value is nested too deeply"));
        }
        Ok(Transcoder::new(self.out, self.depth + 1))
    }

    fn string(&mut self, s: &str) {
        // Writing to a `Vec` cannot fail.
        let _ = serde_json::to_writer(&mut *self.out, s);
    }
}

impl<'de> DeserializeSeed<'de> for Transcoder<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Transcoder<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<(), E> {
        self.out
            .extend_from_slice(if v { b"true" } else { b"false" });
        Ok(())
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<(), E> {
        self.out.extend_from_slice(v.to_string().as_bytes());
        Ok(())
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<(), E> {
        self.out.extend_from_slice(v.to_string().as_bytes());
        Ok(())
    }

    fn visit_i128<E: de::Error>(self, v: i128) -> Result<(), E> {
        self.out.extend_from_slice(v.to_string().as_bytes());
        Ok(())
    }

    fn visit_u128<E: de::Error>(self, v: u128) -> Result<(), E> {
        self.out.extend_from_slice(v.to_string().as_bytes());
        Ok(())
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<(), E> {
        let mut text = python_json::StackText::default();
        write_pydantic_float(&mut text, v);
        self.out.extend_from_slice(text.as_str().as_bytes());
        Ok(())
    }

    fn visit_str<E: de::Error>(mut self, v: &str) -> Result<(), E> {
        self.string(v);
        Ok(())
    }

    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        self.out.extend_from_slice(b"null");
        Ok(())
    }

    fn visit_none<E: de::Error>(self) -> Result<(), E> {
        self.visit_unit()
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(Transcoder::new(self.out, self.depth))
    }

    fn visit_newtype_struct<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(Transcoder::new(self.out, self.depth))
    }

    fn visit_seq<A: SeqAccess<'de>>(mut self, mut seq: A) -> Result<(), A::Error> {
        self.out.push(b'[');
        let mut first = true;
        loop {
            if !first {
                self.out.push(b',');
            }
            let len = self.out.len();
            if seq.next_element_seed(self.nested()?)?.is_none() {
                if !first {
                    self.out.truncate(len - 1);
                }
                break;
            }
            first = false;
        }
        self.out.push(b']');
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(mut self, mut map: A) -> Result<(), A::Error> {
        let Some(first) = map.next_key::<String>()? else {
            self.out.extend_from_slice(b"{}");
            return Ok(());
        };
        if self.raw && first == RAW_TOKEN {
            return map.next_value_seed(RawText(self.out));
        }
        self.out.push(b'{');
        self.string(&first);
        self.out.push(b':');
        map.next_value_seed(self.nested()?)?;
        while let Some(key) = map.next_key::<String>()? {
            self.out.push(b',');
            self.string(&key);
            self.out.push(b':');
            map.next_value_seed(self.nested()?)?;
        }
        self.out.push(b'}');
        Ok(())
    }
}

/// The text of a serde_json raw value, appended without insignificant whitespace.
struct RawText<'a>(&'a mut Vec<u8>);

impl<'de> DeserializeSeed<'de> for RawText<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl Visitor<'_> for RawText<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("raw JSON text")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<(), E> {
        push_minified(self.0, v);
        Ok(())
    }
}

/// Deserializes through serde_json's raw value when `deserializer` is serde_json's: `visitor`
/// then receives a map whose one entry holds the JSON text, which [`raw_text`] reads. Other
/// deserializers call `visit_newtype_struct`.
pub(crate) fn deserialize_raw<'de, D: Deserializer<'de>, V: Visitor<'de>>(
    deserializer: D,
    visitor: V,
) -> Result<V::Value, D::Error> {
    deserializer.deserialize_newtype_struct(RAW_TOKEN, visitor)
}

/// In `visit_map` of a visitor given to [`deserialize_raw`]: `read` applied to the JSON text,
/// or an error if the map is not serde_json's raw value.
pub(crate) fn raw_text<'de, A, T, F>(mut map: A, read: F) -> Result<T, A::Error>
where
    A: MapAccess<'de>,
    F: FnOnce(&str) -> Result<T, A::Error>,
{
    struct IsToken;
    impl<'de> DeserializeSeed<'de> for IsToken {
        type Value = bool;
        fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<bool, D::Error> {
            deserializer.deserialize_str(self)
        }
    }
    impl Visitor<'_> for IsToken {
        type Value = bool;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a key")
        }
        fn visit_str<E: de::Error>(self, v: &str) -> Result<bool, E> {
            Ok(v == RAW_TOKEN)
        }
    }
    struct Read<F>(F);
    impl<'de, T, E: de::Error, F: FnOnce(&str) -> Result<T, E>> DeserializeSeed<'de> for Read<F> {
        type Value = Result<T, E>;
        fn deserialize<D: Deserializer<'de>>(
            self,
            deserializer: D,
        ) -> Result<Self::Value, D::Error> {
            deserializer.deserialize_str(self)
        }
    }
    impl<T, E: de::Error, F: FnOnce(&str) -> Result<T, E>> Visitor<'_> for Read<F> {
        type Value = Result<T, E>;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("raw JSON text")
        }
        fn visit_str<E2: de::Error>(self, v: &str) -> Result<Self::Value, E2> {
            Ok((self.0)(v))
        }
    }
    if map.next_key_seed(IsToken)? != Some(true) {
        return Err(de::Error::invalid_type(
            de::Unexpected::Map,
            &"raw JSON text",
        ));
    }
    map.next_value_seed(Read(read))?
}

/// Appends valid JSON `text` without the whitespace between its tokens.
fn push_minified(out: &mut Vec<u8>, text: &str) {
    let bytes = text.as_bytes();
    out.reserve_exact(bytes.len());
    if !bytes
        .iter()
        .any(|b| matches!(b, b' ' | b'\n' | b'\r' | b'\t'))
    {
        out.extend_from_slice(bytes);
        return;
    }
    let mut in_string = false;
    let mut escaped = false;
    for &b in bytes {
        if in_string {
            out.push(b);
            if escaped {
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                in_string = false;
            }
        } else if !matches!(b, b' ' | b'\n' | b'\r' | b'\t') {
            in_string = b == b'"';
            out.push(b);
        }
    }
}

/// A float as pydantic's `model_dump_json` writes it: the shortest digits that round-trip, in
/// positional notation when the decimal exponent is in `-5..16` (`0.00001`, `1.0`), else as
/// `1e-7` / `1.2345e+16`; `null` for NaN and infinities.
pub(crate) fn write_pydantic_float<W: fmt::Write>(out: &mut W, f: f64) {
    if f.is_finite() {
        python_json::write_shortest(out, f, -5..16, 1);
    } else {
        let _ = out.write_str("null");
    }
}

/// An `f64` that serializes as pydantic writes it (see [`write_pydantic_float`]).
struct PyFloat(f64);

impl Serialize for PyFloat {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut text = python_json::StackText::default();
        write_pydantic_float(&mut text, self.0);
        serialize_raw(text.as_str(), serializer)
    }
}

/// Serializes an optional `f64` field as pydantic writes it.
pub(crate) fn serialize_float<S: Serializer>(
    f: &Option<f64>,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    match f {
        Some(f) => serializer.serialize_some(&PyFloat(*f)),
        None => serializer.serialize_none(),
    }
}

/// Serializes an optional list of `f64` as pydantic writes it.
pub(crate) fn serialize_floats<S: Serializer>(
    floats: &Option<Vec<f64>>,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    match floats {
        Some(floats) => serializer.collect_seq(floats.iter().map(|f| PyFloat(*f))),
        None => serializer.serialize_none(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn float(f: f64) -> String {
        let mut out = String::new();
        write_pydantic_float(&mut out, f);
        out
    }

    #[test]
    fn floats_are_spelled_as_pydantic_writes_them() {
        // Each expected string is what pydantic_core 2.50 `to_json` wrote for the float.
        for (f, text) in [
            (1e-7, "1e-7"),
            (1.5e-7, "1.5e-7"),
            (1e-5, "0.00001"),
            (1.2345e-5, "0.000012345"),
            (0.0001, "0.0001"),
            (1e15, "1000000000000000.0"),
            (1e16, "1e+16"),
            (1.2345e16, "1.2345e+16"),
            (123456789012345678.0, "1.2345678901234568e+17"),
            (9999999999999998.0, "9999999999999998.0"),
            (5e-324, "5e-324"),
            (1e22, "1e+22"),
            (-0.0, "-0.0"),
            (0.0, "0.0"),
            (1.0, "1.0"),
            (2.5, "2.5"),
            (1.0 / 3.0, "0.3333333333333333"),
            (1795364150.1073453, "1795364150.1073453"),
            (f64::MAX, "1.7976931348623157e+308"),
            (1e-6, "1e-6"),
            (1.23e-18, "1.23e-18"),
            (-1e300, "-1e+300"),
            (f64::NAN, "null"),
            (f64::INFINITY, "null"),
        ] {
            assert_eq!(float(f), text, "{f:e}");
        }
    }

    #[test]
    fn text_is_read_exactly_in_order() {
        let text = r#"{"z":1,"a":{"y":1180591620717411303424,"b":1e-05,"c":-0.0},"e":"é\u001f"}"#;
        let value: Json = serde_json::from_str(text).unwrap();
        assert_eq!(value.as_json(), text);
        assert_eq!(serde_json::to_string(&value).unwrap(), text);
        // Whitespace between tokens goes, whitespace inside strings stays.
        let value: Json = serde_json::from_str("{ \"a b\" : [ 1 , \"x \\\" y\" ]\n}").unwrap();
        assert_eq!(value.as_json(), r#"{"a b":[1,"x \" y"]}"#);
        // From bytes and readers too.
        let value: Json = serde_json::from_slice(br#"{"b":1,"a":2}"#).unwrap();
        assert_eq!(value.as_json(), r#"{"b":1,"a":2}"#);
        let value: Json = serde_json::from_reader(&br#"[{"b":1,"a":2}]"#[..]).unwrap();
        assert_eq!(value.as_json(), r#"[{"b":1,"a":2}]"#);
    }

    #[test]
    fn other_deserializers_are_transcoded_in_order() {
        // A `Value` (sorted keys) and serde's buffered content behind an untagged enum.
        let value: Json =
            serde_json::from_value(json!({"b": [1, 2.5, null, true], "a": "é"})).unwrap();
        assert_eq!(value.as_json(), r#"{"a":"é","b":[1,2.5,null,true]}"#);
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Either {
            Json(Json),
        }
        let Either::Json(value) =
            serde_json::from_str(r#"{"z": {"y": [], "x": {}}, "a": 1e16}"#).unwrap();
        assert_eq!(value.as_json(), r#"{"z":{"y":[],"x":{}},"a":1e+16}"#);
        // To a `Value` through serde_json's value serializer.
        assert_eq!(
            serde_json::to_value(&value).unwrap(),
            json!({"z": {"y": [], "x": {}}, "a": 1e16})
        );
    }

    #[test]
    fn objects_keep_insertion_order() {
        let mut object: JsonObject = serde_json::from_str(r#"{"b":1,"a":2}"#).unwrap();
        object.insert("c", json!([1]));
        object.insert("b", "x");
        assert_eq!(object.as_json(), r#"{"b":"x","a":2,"c":[1]}"#);
        assert_eq!(object.len(), 3);
        assert!(object.contains_key("a") && !object.contains_key("d"));
        assert_eq!(object.get_json("c").unwrap().as_json(), "[1]");
        assert_eq!(object, json!({"a": 2, "b": "x", "c": [1]}));
        let built: JsonObject = [("k", Json::from(1)), ("j", Json::null())]
            .into_iter()
            .collect();
        assert_eq!(built.as_json(), r#"{"k":1,"j":null}"#);
        assert!(JsonObject::new().is_empty());
        for bad in ["null", "[]", "1", "\"x\""] {
            assert!(serde_json::from_str::<JsonObject>(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn equality_is_by_value() {
        let a: Json = serde_json::from_str(r#"{"a":1,"b":2}"#).unwrap();
        let b: Json = serde_json::from_str(r#"{"b":2,"a":1}"#).unwrap();
        assert_eq!(a, b);
        assert_ne!(a, Json::from(1));
    }

    #[test]
    fn too_deep_values_are_refused() {
        let mut deep = json!(1);
        for _ in 0..200 {
            deep = json!([deep]);
        }
        assert!(Json::from(&deep).is_null());
    }
}
