//! AgentFlow's chat message model, wire-compatible with AgentFlow 0.10.1.
//!
//! A [`Message`] has a [`Role`], a list of typed [`ContentBlock`]s and AgentFlow's other fields
//! (`tools_calls` in OpenAI shape, `reasoning`, `timestamp`, `metadata`, [`TokenUsages`],
//! `raw`, `parsed_content`). Its JSON is AgentFlow's `model_dump`: the same keys in the same
//! order, every field present (`null` when empty), so messages move between a Python
//! AgentFlow graph and a Rust one unchanged.
//!
//! ```
//! use agentstate::message::{ContentBlock, Message, Role, ToolCall};
//! use serde_json::json;
//!
//! // The model asks for a tool; the tool answers; the model concludes.
//! let ask = Message::text_message("Let me check.", Role::Assistant)
//!     .with_tool_calls(vec![ToolCall::new("call_1", "get_weather", json!({"city": "Paris"}))]);
//! let call = &ask.tool_calls()[0];
//! assert_eq!((call.id(), call.name()), ("call_1", "get_weather"));
//! assert_eq!(call.arguments::<serde_json::Value>()?, json!({"city": "Paris"}));
//! assert_eq!(ask.tool_call_blocks().count(), 1);
//!
//! let answer = Message::tool_result(call.id(), "Sunny, 22C");
//! assert_eq!(answer.role, Role::Tool);
//! assert_eq!(answer.text(), "Sunny, 22C");
//!
//! // The JSON is AgentFlow's.
//! let wire = serde_json::to_value(&ask)?;
//! assert_eq!(wire["tools_calls"][0]["function"]["arguments"], r#"{"city": "Paris"}"#);
//! assert_eq!(wire["content"][1]["type"], "tool_call");
//! let back: Message = serde_json::from_value(wire)?;
//! assert_eq!(back, ask);
//!
//! // Content is a list of blocks: a plain string is rejected, as AgentFlow does, with what to
//! // write instead.
//! let err = serde_json::from_value::<Message>(json!({"role": "user", "content": "hi"})).unwrap_err();
//! assert!(err.to_string().contains(r#"for text write "content": [{"type": "text", "text": "..."}]"#));
//! let hi: Message = serde_json::from_value(json!({"role": "user", "content": [{"type": "text", "text": "hi"}]}))?;
//! assert_eq!(hi.text(), "hi");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! ## The wire, byte for byte
//!
//! A message read from AgentFlow 0.10.1's JSON is written back unchanged (the tests check the 20
//! messages of the shared wire fixtures and 400 random messages dumped by the real package,
//! `tests/data/agentflow_corpus.json`: every one parses, gives AgentFlow's `text()`, and
//! re-serializes byte for byte to what `model_dump_json()` wrote).
//!
//! - **Free-form values keep their JSON text.** `metadata`, `raw`, `parsed_content`, tool-call
//!   `args`, tool-result `output` and error `data` are Python dicts and values:
//!   insertion-ordered, integers unbounded. They are held as [`JsonObject`] / [`Json`], the
//!   value's compact JSON text exactly as read, parsed on demand (`meta.get("model")`,
//!   `args.parse::<MyArgs>()`, `output.to_value()`). Equality compares the texts, then the
//!   values, as Python compares dicts. serde_json's `preserve_order` and `arbitrary_precision`
//!   features would do this too, but change every other crate's maps and numbers (features are
//!   unified across a build); `raw_value`, which this crate enables, is additive.
//! - **Ids are never changed.** [`MessageId::Int`] holds every id AgentFlow's generators make
//!   (`bigint` ids reach 2^64) and [`MessageId::BigInt`] the digits of any larger Python int.
//!   `1` and `"1"` stay different ids.
//! - **Tool calls** (`tools_calls`) are written back in the key order read; a call built with
//!   [`ToolCall::new`] is written in the OpenAI SDK's `model_dump` order.
//! - **Floats** are spelled as pydantic writes them (`0.00001`, `1e-7`, `1e+16`, `1.0`); non-ASCII
//!   is written raw, as pydantic does.
//!
//! Deliberate differences: NaN and infinities are written `null` (as pydantic does); free-form
//! values read through serde's buffering (an untagged enum, a `#[serde(flatten)]` base without
//! `#[agent_state(deserialize)]`) or from a `serde_json::Value` see what those hold (integers
//! beyond 64 bits as floats, a `Value`'s keys sorted): read messages from text to keep them
//! exact; free-form JSON not written by pydantic (`"\u00e9"`, `1E5`, repeated keys) is kept as
//! read, minus whitespace; typed integer fields (`usages`, media sizes) are `i64`, and a larger
//! value is refused with an error naming the field; other serde formats than JSON receive a
//! [`Json`]'s text as a string.

mod block;
mod json;
mod media;
pub(crate) mod python_json;
mod tool_call;
mod usage;

pub use block::{
    AnnotationBlock, AnnotationKind, AudioBlock, ContentBlock, DataBlock, DocumentBlock,
    ErrorBlock, ImageBlock, ReasoningBlock, RemoteToolCallBlock, TextBlock, ToolCallBlock,
    ToolResultBlock, ToolResultStatus, VideoBlock,
};
pub use json::{Json, JsonObject};
pub use media::{AnnotationRef, MediaKind, MediaRef};
pub use tool_call::{ArgumentsError, FunctionCall, ToolCall};
pub use usage::TokenUsages;

use serde::de::{self, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;
use std::time::{SystemTime, UNIX_EPOCH};

/// A message id: AgentFlow accepts a string or an integer, and `1` and `"1"` are different ids.
///
/// Integers are Python's, of any size: AgentFlow's `bigint` ids (`uuid4().int >> 64`) go up to
/// 2^64, beyond an `i64`. An integer id is never changed: one within `i128` is an
/// [`Int`](MessageId::Int), a larger one a [`BigInt`](MessageId::BigInt) holding its digits.
///
/// ```
/// use agentstate::message::MessageId;
///
/// let int: MessageId = serde_json::from_str("1")?;
/// let string: MessageId = serde_json::from_str(r#""1""#)?;
/// assert_eq!(int, MessageId::Int(1));
/// assert_ne!(int, string);
/// assert_eq!(format!("{int} {string}"), "1 1", "Display writes the id without quotes");
/// assert_eq!(format!("{int:?} {string:?}"), r#"Int(1) Str("1")"#);
/// assert_eq!(serde_json::to_string(&string)?, r#""1""#);
///
/// let bigint: MessageId = serde_json::from_str("18446744073709551615")?;
/// assert_eq!(bigint, MessageId::Int(18446744073709551615));
/// let huge: MessageId = serde_json::from_str("-1701411834604692317316873037158841057280")?;
/// assert_eq!(serde_json::to_string(&huge)?, "-1701411834604692317316873037158841057280");
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum MessageId {
    /// An integer id within `i128`.
    Int(i128),
    /// A string id (generated ids are uuid v4 strings).
    Str(String),
    /// An integer id beyond `i128`: its decimal digits, with a leading `-` if negative and no
    /// leading zero.
    BigInt(Box<str>),
}

impl MessageId {
    /// A new uuid v4 string id, as AgentFlow generates when a message has none.
    pub fn generate() -> Self {
        MessageId::Str(uuid::Uuid::new_v4().to_string())
    }

    /// The id if it is a string.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            MessageId::Str(s) => Some(s),
            MessageId::Int(_) | MessageId::BigInt(_) => None,
        }
    }

    /// The id if it is an integer within `i128`.
    pub fn as_int(&self) -> Option<i128> {
        match self {
            MessageId::Int(i) => Some(*i),
            MessageId::Str(_) | MessageId::BigInt(_) => None,
        }
    }

    /// The integer id whose decimal digits are `digits` (an optional `-`, then digits).
    fn from_digits(digits: &str) -> Option<Self> {
        let (negative, magnitude) = match digits.strip_prefix('-') {
            Some(rest) => (true, rest),
            None => (false, digits),
        };
        if magnitude.is_empty() || !magnitude.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let magnitude = magnitude.trim_start_matches('0');
        if magnitude.is_empty() {
            return Some(MessageId::Int(0));
        }
        let canonical = if negative {
            format!("-{magnitude}")
        } else {
            magnitude.to_owned()
        };
        Some(match canonical.parse::<i128>() {
            Ok(i) => MessageId::Int(i),
            Err(_) => MessageId::BigInt(canonical.into_boxed_str()),
        })
    }
}

impl Serialize for MessageId {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            MessageId::Int(i) => match (i64::try_from(*i), u64::try_from(*i)) {
                (Ok(i), _) => serializer.serialize_i64(i),
                (_, Ok(u)) => serializer.serialize_u64(u),
                _ => json::serialize_raw(&i.to_string(), serializer),
            },
            MessageId::BigInt(digits) => json::serialize_raw(digits, serializer),
            MessageId::Str(s) => serializer.serialize_str(s),
        }
    }
}

impl<'de> Deserialize<'de> for MessageId {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        // The exact text of a number from serde_json (integers beyond 64 bits included), any
        // other deserializer's value otherwise.
        json::deserialize_raw(deserializer, MessageIdVisitor)
    }
}

impl MessageId {
    /// The id whose JSON text is `text`.
    fn from_json_text<E: de::Error>(text: &str) -> Result<Self, E> {
        match text.as_bytes().first() {
            Some(b'"') => match text.get(1..text.len() - 1) {
                Some(inner) if !inner.contains('\\') => Ok(MessageId::Str(inner.to_owned())),
                _ => serde_json::from_str(text)
                    .map(MessageId::Str)
                    .map_err(E::custom),
            },
            Some(b'-' | b'0'..=b'9') => match MessageId::from_digits(text) {
                Some(id) => Ok(id),
                None => match text.parse::<f64>() {
                    Ok(f) => MessageIdVisitor.visit_f64(f),
                    Err(_) => Err(E::invalid_value(
                        de::Unexpected::Other(text),
                        &MessageIdVisitor,
                    )),
                },
            },
            Some(b'n') => Err(E::invalid_type(de::Unexpected::Unit, &MessageIdVisitor)),
            Some(b't' | b'f') => Err(E::invalid_type(
                de::Unexpected::Bool(text == "true"),
                &MessageIdVisitor,
            )),
            Some(b'[') => Err(E::invalid_type(de::Unexpected::Seq, &MessageIdVisitor)),
            _ => Err(E::invalid_type(de::Unexpected::Map, &MessageIdVisitor)),
        }
    }
}

struct MessageIdVisitor;

impl<'de> Visitor<'de> for MessageIdVisitor {
    type Value = MessageId;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a message id: a string or an integer")
    }

    fn visit_map<A: de::MapAccess<'de>>(self, map: A) -> Result<MessageId, A::Error> {
        json::raw_text(map, MessageId::from_json_text)
    }

    fn visit_newtype_struct<D: Deserializer<'de>>(self, d: D) -> Result<MessageId, D::Error> {
        d.deserialize_any(self)
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<MessageId, E> {
        Ok(MessageId::Int(v.into()))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<MessageId, E> {
        Ok(MessageId::Int(v.into()))
    }

    fn visit_i128<E: de::Error>(self, v: i128) -> Result<MessageId, E> {
        Ok(MessageId::Int(v))
    }

    fn visit_u128<E: de::Error>(self, v: u128) -> Result<MessageId, E> {
        Ok(MessageId::from_digits(&v.to_string()).unwrap_or(MessageId::Int(0)))
    }

    /// Like pydantic's lax `int`, a float without fraction (`7.0`) is the integer id `7`.
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<MessageId, E> {
        if v.is_finite() && v.fract() == 0.0 {
            MessageId::from_digits(&format!("{v:.0}"))
                .ok_or_else(|| E::invalid_value(de::Unexpected::Float(v), &self))
        } else {
            Err(E::invalid_value(de::Unexpected::Float(v), &self))
        }
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<MessageId, E> {
        Ok(MessageId::Str(v.to_owned()))
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<MessageId, E> {
        Ok(MessageId::Str(v))
    }
}

impl From<&str> for MessageId {
    fn from(s: &str) -> Self {
        MessageId::Str(s.to_owned())
    }
}

impl From<String> for MessageId {
    fn from(s: String) -> Self {
        MessageId::Str(s)
    }
}

macro_rules! int_id {
    ($($ty:ty),*) => {$(
        impl From<$ty> for MessageId {
            fn from(i: $ty) -> Self {
                MessageId::Int(i.into())
            }
        }
    )*};
}

int_id!(i128, i64, u64, i32, u32);

impl fmt::Display for MessageId {
    /// The id as written: an integer's digits (`7`), a string's text (`m1`), without quotes,
    /// as it goes into a message or another id. The integer `1` and the string `"1"` then
    /// display alike; `Debug` (`Int(1)`, `Str("1")`) tells them apart.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MessageId::Int(i) => write!(f, "{i}"),
            MessageId::BigInt(digits) => f.write_str(digits),
            MessageId::Str(s) => f.write_str(s),
        }
    }
}

/// Who wrote a message; lowercase on the wire (`"user"`...).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// The human.
    User,
    /// The model.
    Assistant,
    /// A system instruction.
    System,
    /// A tool's result.
    Tool,
}

/// One chat message, AgentFlow's `Message`.
///
/// Fields are in AgentFlow's JSON order and always serialized. When deserializing, a missing
/// `message_id` becomes a new uuid v4 string and a missing `timestamp` the current time (an
/// explicit `null` stays `None`); `role` and `content` are required; unknown keys are ignored.
///
/// ```
/// use agentstate::message::{Message, MessageId, Role};
///
/// let m: Message = serde_json::from_str(
///     r#"{"message_id": 7, "role": "user", "content": [{"type": "text", "text": "Hi"}], "timestamp": 1.5}"#,
/// )?;
/// assert_eq!(m.message_id, MessageId::Int(7));
/// assert_eq!(m.text(), "Hi");
/// assert_eq!(
///     serde_json::to_string(&m)?,
///     r#"{"message_id":7,"role":"user","content":[{"type":"text","text":"Hi","annotations":[]}],"delta":false,"tools_calls":null,"reasoning":null,"timestamp":1.5,"metadata":{},"usages":null,"raw":null,"parsed_content":null}"#
/// );
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    /// The id (default: a new uuid v4 string).
    #[serde(default = "MessageId::generate")]
    pub message_id: MessageId,
    /// Who wrote it.
    pub role: Role,
    /// The content blocks.
    #[serde(deserialize_with = "block::deserialize_content")]
    pub content: Vec<ContentBlock>,
    /// A streaming intermediate (default false); `add_messages` drops these.
    #[serde(default)]
    pub delta: bool,
    /// The tool calls in OpenAI shape (AgentFlow's spelling `tools_calls`).
    #[serde(default)]
    pub tools_calls: Option<Vec<ToolCall>>,
    /// The model's reasoning trace.
    #[serde(default)]
    pub reasoning: Option<String>,
    /// Seconds since the Unix epoch (default: now), written back exactly as held.
    #[serde(default = "now", serialize_with = "json::serialize_float")]
    pub timestamp: Option<f64>,
    /// Free-form metadata (default `{}`), in the order it was read.
    #[serde(default)]
    pub metadata: JsonObject,
    /// Token usage of the response (boxed: most messages have none).
    #[serde(default)]
    pub usages: Option<Box<TokenUsages>>,
    /// The provider's raw response, in the order it was read.
    #[serde(default)]
    pub raw: Option<JsonObject>,
    /// Structured output parsed from the response, in the order it was read.
    #[serde(default)]
    pub parsed_content: Option<JsonObject>,
}

/// The current time in seconds since the Unix epoch, as Python's `datetime.now().timestamp()`.
fn now() -> Option<f64> {
    Some(match SystemTime::now().duration_since(UNIX_EPOCH) {
        Ok(since) => since.as_secs_f64(),
        Err(before) => -before.duration().as_secs_f64(),
    })
}

impl Message {
    /// A message with these blocks, a new uuid v4 id, the current time and every other field
    /// at its default.
    pub fn new(role: Role, content: Vec<ContentBlock>) -> Self {
        Message {
            message_id: MessageId::generate(),
            role,
            content,
            delta: false,
            tools_calls: None,
            reasoning: None,
            timestamp: now(),
            metadata: JsonObject::new(),
            usages: None,
            raw: None,
            parsed_content: None,
        }
    }

    /// A message with one text block, like AgentFlow's `Message.text_message`.
    ///
    /// ```
    /// use agentstate::message::{Message, Role};
    ///
    /// let m = Message::text_message("Hello!", Role::User).with_id("msg-1");
    /// assert_eq!(m.text(), "Hello!");
    /// assert_eq!(m.content.len(), 1);
    /// assert!(m.timestamp.is_some());
    /// ```
    pub fn text_message(text: impl Into<String>, role: Role) -> Self {
        Message::new(role, vec![ContentBlock::text(text)])
    }

    /// A `tool` message with these blocks, like AgentFlow's `Message.tool_message`.
    pub fn tool_message(content: Vec<ContentBlock>) -> Self {
        Message::new(Role::Tool, content)
    }

    /// A `tool` message answering call `call_id` with one completed [`ToolResultBlock`].
    ///
    /// ```
    /// use agentstate::message::{ContentBlock, Message, Role};
    /// use serde_json::json;
    ///
    /// let m = Message::tool_result("call_1", json!({"temp": 22}));
    /// assert_eq!(m.role, Role::Tool);
    /// assert_eq!(m.text(), r#"{"temp": 22}"#);
    /// assert!(matches!(&m.content[0], ContentBlock::ToolResult(r) if r.call_id == "call_1"));
    /// ```
    pub fn tool_result(call_id: impl Into<String>, output: impl Into<Json>) -> Self {
        Message::tool_message(vec![ContentBlock::tool_result(call_id, output)])
    }

    /// Builder: the id.
    pub fn with_id(mut self, id: impl Into<MessageId>) -> Self {
        self.message_id = id.into();
        self
    }

    /// Builder: adds tool calls, both to `tools_calls` (OpenAI shape) and as one `tool_call`
    /// block each at the end of `content`, as AgentFlow's assistant messages carry them.
    /// `tools_calls` becomes `Some` even for an empty list.
    pub fn with_tool_calls(mut self, calls: Vec<ToolCall>) -> Self {
        self.content.extend(
            calls
                .iter()
                .map(|call| ContentBlock::ToolCall(call.to_block())),
        );
        self.tools_calls.get_or_insert_with(Vec::new).extend(calls);
        self
    }

    /// Builder: appends a content block.
    pub fn with_block(mut self, block: impl Into<ContentBlock>) -> Self {
        self.content.push(block.into());
        self
    }

    /// Builder: sets one metadata key.
    pub fn with_metadata(mut self, key: impl Into<String>, value: impl Into<Json>) -> Self {
        self.metadata.insert(key.into(), value.into());
        self
    }

    /// Builder: the timestamp, in seconds since the Unix epoch.
    pub fn with_timestamp(mut self, timestamp: f64) -> Self {
        self.timestamp = Some(timestamp);
        self
    }

    /// Builder: the token usage.
    pub fn with_usages(mut self, usages: TokenUsages) -> Self {
        self.usages = Some(Box::new(usages));
        self
    }

    /// Builder: the reasoning trace.
    pub fn with_reasoning(mut self, reasoning: impl Into<String>) -> Self {
        self.reasoning = Some(reasoning.into());
        self
    }

    /// Builder: marks the message as a streaming intermediate (or not).
    pub fn with_delta(mut self, delta: bool) -> Self {
        self.delta = delta;
        self
    }

    /// Builder: the provider's raw response.
    pub fn with_raw(mut self, raw: impl Into<JsonObject>) -> Self {
        self.raw = Some(raw.into());
        self
    }

    /// Builder: the parsed structured output.
    pub fn with_parsed_content(mut self, parsed: impl Into<JsonObject>) -> Self {
        self.parsed_content = Some(parsed.into());
        self
    }

    /// The OpenAI-shaped tool calls (`tools_calls`), empty when there are none.
    pub fn tool_calls(&self) -> &[ToolCall] {
        self.tools_calls.as_deref().unwrap_or_default()
    }

    /// Whether `tools_calls` holds at least one call: AgentFlow's test for "this assistant
    /// message calls tools" (`tool_call` blocks in `content` do not count).
    pub fn has_tool_calls(&self) -> bool {
        !self.tool_calls().is_empty()
    }

    /// The `tool_call` blocks of `content`.
    pub fn tool_call_blocks(&self) -> impl Iterator<Item = &ToolCallBlock> {
        self.content.iter().filter_map(|block| match block {
            ContentBlock::ToolCall(call) => Some(call),
            _ => None,
        })
    }

    /// The `tool_result` blocks of `content`.
    pub fn tool_results(&self) -> impl Iterator<Item = &ToolResultBlock> {
        self.content.iter().filter_map(|block| match block {
            ContentBlock::ToolResult(result) => Some(result),
            _ => None,
        })
    }

    /// The message's text, as AgentFlow's `Message.text()`: the `text` of every text block
    /// and the `output` of every tool-result block, concatenated without separator. A string
    /// output is taken as is; any other output (`null` included) is written as Python's
    /// `json.dumps` writes it. Other blocks contribute nothing.
    ///
    /// ```
    /// use agentstate::message::{ContentBlock, Message, Role};
    /// use serde_json::json;
    ///
    /// let m = Message::new(Role::Assistant, vec![
    ///     ContentBlock::text("Hello "),
    ///     ContentBlock::reasoning("not shown"),
    ///     ContentBlock::text("world"),
    ///     ContentBlock::tool_result("c1", json!({"ok": true, "n": 1.0})),
    ///     ContentBlock::tool_result("c2", json!(null)),
    /// ]);
    /// assert_eq!(m.text(), r#"Hello world{"n": 1.0, "ok": true}null"#);
    /// ```
    pub fn text(&self) -> String {
        let mut out = String::new();
        for block in &self.content {
            match block {
                ContentBlock::Text(text) => out.push_str(&text.text),
                ContentBlock::ToolResult(result) => out.push_str(&result.output_text()),
                _ => {}
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    fn parse(value: Value) -> Result<Message, serde_json::Error> {
        serde_json::from_value(value)
    }

    #[test]
    fn a_plain_string_content_is_refused_with_what_to_write_instead() {
        let err = parse(json!({"role": "user", "content": "hi"})).unwrap_err();
        assert_eq!(
            err.to_string(),
            r#"invalid type: string "hi", expected a list of content blocks; for text write "content": [{"type": "text", "text": "..."}] (AgentFlow refuses a plain string too), in Rust Message::text_message(text, role)"#
        );
        let err =
            serde_json::from_str::<Message>(r#"{"role": "user", "content": "hi"}"#).unwrap_err();
        assert!(
            err.to_string()
                .contains(r#"for text write "content": [{"type": "text""#),
            "{err}"
        );
        // In a state's JSON update, the error names the field and the path.
        let err = crate::state::AgentStateUpdate::from_json(
            json!({"context": [{"role": "user", "content": "hi"}]}),
        )
        .unwrap_err();
        assert!(
            err.to_string().starts_with(
                r#"field `context` has a value that does not fit at `context[0].content`: invalid type: string "hi", expected a list of content blocks; for text write"#
            ),
            "{err}"
        );
    }

    #[test]
    fn ids_one_and_string_one_differ() {
        let a = parse(json!({"message_id": 1, "role": "user", "content": []})).unwrap();
        let b = parse(json!({"message_id": "1", "role": "user", "content": []})).unwrap();
        assert_eq!(a.message_id, MessageId::Int(1));
        assert_eq!(b.message_id, MessageId::Str("1".into()));
        assert_ne!(a.message_id, b.message_id);
        assert_eq!(serde_json::to_value(&a).unwrap()["message_id"], json!(1));
        assert_eq!(serde_json::to_value(&b).unwrap()["message_id"], json!("1"));
        assert_eq!(a.message_id.to_string(), "1");
        // Display writes ids without quotes; Debug tells the two apart.
        assert_eq!(b.message_id.to_string(), "1");
        assert_eq!(format!("{:?}", b.message_id), "Str(\"1\")");
    }

    #[test]
    fn message_id_edges() {
        let id = |v: Value| serde_json::from_value::<MessageId>(v);
        assert_eq!(id(json!(-5)).unwrap(), MessageId::Int(-5));
        assert_eq!(
            id(json!(i64::MAX)).unwrap(),
            MessageId::Int(i64::MAX.into())
        );
        assert_eq!(id(json!(7.0)).unwrap(), MessageId::Int(7));
        assert!(id(json!(7.5)).is_err());
        assert_eq!(
            id(json!(u64::MAX)).unwrap(),
            MessageId::Int(u64::MAX.into())
        );
        assert!(id(json!(null)).is_err());
        assert!(id(json!(true)).is_err());
        assert!(id(json!(["a"])).is_err());
        // From a string, not only from a Value.
        assert_eq!(
            serde_json::from_str::<MessageId>("42").unwrap(),
            MessageId::Int(42)
        );
        assert_eq!(MessageId::from(3i32), MessageId::Int(3));
        assert_eq!(MessageId::from(3u32), MessageId::Int(3));
        assert_eq!(MessageId::from("x").as_str(), Some("x"));
        assert_eq!(MessageId::from(9i64).as_int(), Some(9));
        // A null message_id is an error, not a fresh id.
        assert!(parse(json!({"message_id": null, "role": "user", "content": []})).is_err());
    }

    #[test]
    fn integer_ids_of_any_size_are_kept_exactly() {
        // AgentFlow's bigint ids reach 2^64; Python ints have no bound.
        for text in [
            "9223372036854775808",
            "18446744073709551615",
            "18446744073709551616",
            "-9223372036854775809",
            "-170141183460469231731687303715884105728",
            "170141183460469231731687303715884105728",
            "-99999999999999999999999999999999999999999999999999",
        ] {
            let id: MessageId = serde_json::from_str(text).unwrap();
            assert_eq!(serde_json::to_string(&id).unwrap(), text);
            assert_eq!(id.to_string(), text);
            let wire = format!(r#"{{"message_id":{text},"role":"user","content":[]}}"#);
            let m: Message = serde_json::from_str(&wire).unwrap();
            assert_eq!(m.message_id, id, "{text}");
        }
        // Below i64::MIN stays distinct from i64::MIN (it used to saturate).
        let low: MessageId = serde_json::from_str("-9223372036854775809").unwrap();
        assert_ne!(low, MessageId::Int(i64::MIN.into()));
        assert_eq!(low, MessageId::Int(-9223372036854775809));
        let beyond: MessageId =
            serde_json::from_str("340282366920938463463374607431768211456").unwrap();
        assert_eq!(
            beyond,
            MessageId::BigInt("340282366920938463463374607431768211456".into())
        );
        assert_eq!(beyond.as_int(), None);
        // `-0` is 0; a whole float is its integer, also beyond i128.
        assert_eq!(
            serde_json::from_str::<MessageId>("-0").unwrap(),
            MessageId::Int(0)
        );
        assert_eq!(
            serde_json::from_str::<MessageId>("1e40").unwrap(),
            MessageId::BigInt("10000000000000000303786028427003666890752".into())
        );
        // The same ids through a `Value` and through serde's buffering (an untagged enum).
        assert_eq!(
            serde_json::from_value::<MessageId>(json!(18446744073709551615u64)).unwrap(),
            MessageId::Int(18446744073709551615)
        );
        #[derive(serde::Deserialize)]
        #[serde(untagged)]
        enum Buffered {
            Id(MessageId),
        }
        let Buffered::Id(id) = serde_json::from_str("18446744073709551615").unwrap();
        assert_eq!(id, MessageId::Int(18446744073709551615));
        let Buffered::Id(id) = serde_json::from_str(r#""7""#).unwrap();
        assert_eq!(id, MessageId::from("7"));
    }

    #[test]
    fn parsed_messages_hold_no_spare_room() {
        let m: Message =
            serde_json::from_str(r#"{"role":"user","content":[{"type":"text","text":"hi"}]}"#)
                .unwrap();
        assert_eq!(m.content.capacity(), 1);
        // Usages are boxed: a message without them does not carry their eight counters.
        assert!(
            std::mem::size_of::<Message>() <= 192,
            "{}",
            std::mem::size_of::<Message>()
        );
    }

    #[test]
    fn defaults() {
        let m = parse(json!({"role": "assistant", "content": []})).unwrap();
        let id = m.message_id.as_str().expect("a generated string id");
        let uuid = uuid::Uuid::parse_str(id).expect("a uuid");
        assert_eq!(uuid.get_version_num(), 4);
        assert!(!m.delta);
        assert_eq!(m.tools_calls, None);
        assert_eq!(m.reasoning, None);
        let ts = m.timestamp.expect("now");
        assert!(ts > 1_700_000_000.0, "{ts}");
        assert!(m.metadata.is_empty());
        assert_eq!(m.usages, None);
        assert_eq!(m.raw, None);
        assert_eq!(m.parsed_content, None);

        let other = parse(json!({"role": "assistant", "content": []})).unwrap();
        assert_ne!(
            m.message_id, other.message_id,
            "each message gets its own id"
        );
    }

    #[test]
    fn explicit_null_timestamp_stays_null() {
        let m = parse(json!({"role": "user", "content": [], "timestamp": null})).unwrap();
        assert_eq!(m.timestamp, None);
        assert_eq!(serde_json::to_value(&m).unwrap()["timestamp"], json!(null));
        let m = parse(json!({"role": "user", "content": [], "timestamp": 12})).unwrap();
        assert_eq!(m.timestamp, Some(12.0));
        let text = serde_json::to_string(&m).unwrap();
        assert!(text.contains(r#""timestamp":12.0,"#), "{text}");
    }

    #[test]
    fn long_timestamps_are_written_back_as_read() {
        // Python reprs with 17 significant digits: beyond the fast float path of a parser that
        // is not correctly rounded.
        for ts in [
            "1795364150.1073453",
            "1723604808.9737434",
            "1710316603.4230716",
            "1740159101.4485075",
            "0.30000000000000004",
        ] {
            let text = format!(r#"{{"role":"user","content":[],"timestamp":{ts}}}"#);
            let m: Message = serde_json::from_str(&text).unwrap();
            let back = serde_json::to_string(&m).unwrap();
            assert!(back.contains(&format!(r#""timestamp":{ts},"#)), "{back}");
        }
    }

    #[test]
    fn string_content_is_rejected() {
        let err = parse(json!({"role": "user", "content": "hello"})).unwrap_err();
        assert!(err.to_string().contains("invalid type: string"), "{err}");
        assert!(
            parse(json!({"role": "user"})).is_err(),
            "content is required"
        );
        assert!(parse(json!({"content": []})).is_err(), "role is required");
        assert!(parse(json!({"role": "user", "content": null})).is_err());
    }

    #[test]
    fn roles_are_lowercase_and_closed() {
        for (role, text) in [
            (Role::User, "user"),
            (Role::Assistant, "assistant"),
            (Role::System, "system"),
            (Role::Tool, "tool"),
        ] {
            assert_eq!(serde_json::to_value(role).unwrap(), json!(text));
        }
        let err = parse(json!({"role": "developer", "content": []})).unwrap_err();
        assert!(err.to_string().contains("developer"), "{err}");
        assert!(parse(json!({"role": "User", "content": []})).is_err());
    }

    #[test]
    fn block_errors_surface_through_the_message() {
        let err =
            parse(json!({"role": "user", "content": [{"type": "gif", "url": "x"}]})).unwrap_err();
        assert!(err.to_string().contains("gif"), "{err}");
        let err = parse(json!({"role": "user", "content": [{"text": "x"}]})).unwrap_err();
        assert!(err.to_string().contains("type"), "{err}");
    }

    #[test]
    fn unknown_keys_are_ignored_and_metadata_must_be_an_object() {
        let m = parse(json!({"role": "user", "content": [], "name": "bob", "extra": {"a": 1}}))
            .unwrap();
        assert!(m.metadata.is_empty());
        assert!(parse(json!({"role": "user", "content": [], "metadata": null})).is_err());
        assert!(parse(json!({"role": "user", "content": [], "metadata": [1]})).is_err());
        assert!(parse(json!({"role": "user", "content": [], "delta": "yes"})).is_err());
    }

    #[test]
    fn every_field_is_written_in_agentflow_order() {
        let m = Message::text_message("Bonjour", Role::User)
            .with_id("greeting")
            .with_timestamp(1_650_000_000.25);
        assert_eq!(
            serde_json::to_string(&m).unwrap(),
            r#"{"message_id":"greeting","role":"user","content":[{"type":"text","text":"Bonjour","annotations":[]}],"delta":false,"tools_calls":null,"reasoning":null,"timestamp":1650000000.25,"metadata":{},"usages":null,"raw":null,"parsed_content":null}"#
        );
    }

    #[test]
    fn text_rules() {
        let m = Message::new(
            Role::Assistant,
            vec![
                ContentBlock::text("a"),
                ContentBlock::image(MediaRef::url("https://x")),
                ContentBlock::tool_result("c", "b"),
                ContentBlock::error("not text"),
                ContentBlock::tool_result("c", json!(null)),
                ContentBlock::tool_result("c", json!([1, "é", 2.0])),
                ContentBlock::tool_result("c", json!(5)),
                ContentBlock::tool_result("c", json!(false)),
                ContentBlock::reasoning("hidden"),
                ContentBlock::tool_call("c", "f", JsonObject::new()),
                ContentBlock::text(""),
                ContentBlock::text("z"),
            ],
        );
        assert_eq!(m.text(), r#"abnull[1, "\u00e9", 2.0]5falsez"#);
        assert_eq!(Message::new(Role::User, vec![]).text(), "");
        // Document text and reasoning summaries are not part of text().
        let doc = Message::new(
            Role::User,
            vec![DocumentBlock {
                text: Some("inside".into()),
                ..DocumentBlock::new(MediaRef::file_id("d"))
            }
            .into()],
        );
        assert_eq!(doc.text(), "");
    }

    #[test]
    fn tool_call_builders_fill_both_places() {
        let m = Message::text_message("Checking.", Role::Assistant).with_tool_calls(vec![
            ToolCall::new("c1", "weather", json!({"city": "Oslo"})),
            ToolCall::new("c2", "time", json!({})),
        ]);
        assert!(m.has_tool_calls());
        let ids: Vec<&str> = m.tool_calls().iter().map(ToolCall::id).collect();
        assert_eq!(ids, ["c1", "c2"]);
        let names: Vec<&str> = m.tool_call_blocks().map(|b| b.name.as_str()).collect();
        assert_eq!(names, ["weather", "time"]);
        assert_eq!(m.content.len(), 3);
        assert_eq!(m.text(), "Checking.");

        let more = m.with_tool_calls(vec![ToolCall::new("c3", "x", json!({}))]);
        assert_eq!(more.tool_calls().len(), 3);
        assert_eq!(more.tool_call_blocks().count(), 3);

        let empty = Message::text_message("", Role::Assistant).with_tool_calls(vec![]);
        assert_eq!(empty.tools_calls, Some(vec![]));
        assert!(!empty.has_tool_calls());
        assert!(!Message::text_message("", Role::Assistant).has_tool_calls());
    }

    #[test]
    fn tool_messages() {
        let m = Message::tool_result("c9", "done");
        assert_eq!(m.role, Role::Tool);
        let results: Vec<&ToolResultBlock> = m.tool_results().collect();
        assert_eq!(results.len(), 1);
        assert_eq!(results[0].status, Some(ToolResultStatus::Completed));
        assert!(!results[0].is_error);
        let failed = Message::tool_message(vec![ToolResultBlock::failed("c9", "boom").into()]);
        assert_eq!(failed.role, Role::Tool);
        assert_eq!(failed.text(), "boom");
    }

    #[test]
    fn builders() {
        let m = Message::text_message("ok", Role::Assistant)
            .with_id(5i64)
            .with_metadata("model", "m-1")
            .with_usages(TokenUsages::new(3, 4))
            .with_reasoning("because")
            .with_delta(true)
            .with_raw(JsonObject::from_iter([("id", "r")]))
            .with_parsed_content(JsonObject::from_iter([("answer", 1)]))
            .with_block(ReasoningBlock::new("because"));
        assert_eq!(m.message_id, MessageId::Int(5));
        assert_eq!(m.metadata.get("model"), Some(json!("m-1")));
        assert_eq!(m.usages.as_ref().map(|u| u.total_tokens), Some(7));
        assert_eq!(m.reasoning.as_deref(), Some("because"));
        assert!(m.delta);
        assert_eq!(m.content.len(), 2);
        let back: Message = serde_json::from_str(&serde_json::to_string(&m).unwrap()).unwrap();
        assert_eq!(back, m);
    }

    /// Messages in the project's own words, one per block type, written as AgentFlow would
    /// dump them; each must read, write back identically and give the expected text.
    #[test]
    fn own_messages_cover_every_block_type() {
        let media = |kind: &str, extra: Value| {
            let mut m = json!({
                "kind": kind, "url": null, "file_id": null, "data_base64": null, "mime_type": null,
                "size_bytes": null, "sha256": null, "filename": null, "width": null,
                "height": null, "duration_ms": null, "page": null
            });
            for (k, v) in extra.as_object().into_iter().flatten() {
                m[k] = v.clone();
            }
            m
        };
        let envelope = |id: Value, role: &str, content: Value| {
            json!({
                "message_id": id, "role": role, "content": content, "delta": false,
                "tools_calls": null, "reasoning": null, "timestamp": 1712345678.5,
                "metadata": {}, "usages": null, "raw": null, "parsed_content": null
            })
        };
        let cases = [
            (
                envelope(
                    json!("u-1"),
                    "user",
                    json!([
                        {"type": "text", "text": "Which bird is this?", "annotations": []},
                        {"type": "image", "media": media("url", json!({"url": "https://birds.example/robin.jpg", "width": 800})),
                         "alt_text": "a small bird", "bbox": [0.5, 1.0, 99.0, 120.75]}
                    ]),
                ),
                "Which bird is this?",
            ),
            (
                envelope(
                    json!(17),
                    "user",
                    json!([
                        {"type": "audio", "media": media("data", json!({"data_base64": "T2dnUw==", "mime_type": "audio/ogg"})),
                         "transcript": "good morning", "sample_rate": 48000, "channels": 2},
                        {"type": "video", "media": media("file_id", json!({"file_id": "clip-2", "duration_ms": 9000})),
                         "thumbnail": media("url", json!({"url": "https://v.example/t.png"}))}
                    ]),
                ),
                "",
            ),
            (
                envelope(
                    json!("u-3"),
                    "user",
                    json!([
                        {"type": "document", "media": media("file_id", json!({"file_id": "contract"})),
                         "text": "Clause 1", "pages": [1], "excerpt": null},
                        {"type": "data", "mime_type": "text/csv", "data_base64": "YSxiCg==", "media": null},
                        {"type": "text", "text": "Compare them, søn.", "annotations": []}
                    ]),
                ),
                "Compare them, søn.",
            ),
            (
                envelope(
                    json!("a-4"),
                    "assistant",
                    json!([
                        {"type": "reasoning", "summary": "need the catalogue", "details": ["look up"]},
                        {"type": "tool_call", "id": "k1", "name": "catalogue", "args": {"sku": 12}, "tool_type": null},
                        {"type": "remote_tool_call", "id": "k2", "name": "confirm", "args": {}, "tool_type": "remote"}
                    ]),
                ),
                "",
            ),
            (
                envelope(
                    json!("t-5"),
                    "tool",
                    json!([
                        {"type": "tool_result", "call_id": "k1", "output": {"price": 9.5, "stock": 3}, "is_error": false, "status": "completed"},
                        {"type": "tool_result", "call_id": "k2", "output": "declined", "is_error": true, "status": "failed"}
                    ]),
                ),
                r#"{"price": 9.5, "stock": 3}declined"#,
            ),
            (
                envelope(
                    json!("a-6"),
                    "assistant",
                    json!([
                        {"type": "text", "text": "Robins sing at dawn.", "annotations": [
                            {"url": "https://birds.example", "file_id": null, "page": null, "index": 0, "title": "Birds"}]},
                        {"type": "annotation", "kind": "citation", "refs": [
                            {"url": null, "file_id": "f-1", "page": 4, "index": null, "title": null}], "spans": [[0, 6], [13, 20]]},
                        {"type": "error", "message": "partial answer", "code": null, "data": {"missing": ["sources"]}}
                    ]),
                ),
                "Robins sing at dawn.",
            ),
        ];
        let mut seen = std::collections::BTreeSet::new();
        for (wire, text) in cases {
            let m = parse(wire.clone()).unwrap();
            assert_eq!(serde_json::to_value(&m).unwrap(), wire);
            assert_eq!(m.text(), text);
            seen.extend(m.content.iter().map(ContentBlock::kind));
        }
        assert_eq!(seen.len(), 12, "{seen:?}");
    }
}
