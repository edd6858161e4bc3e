//! The OpenAI Chat Completions stream: `chat.completion.chunk`s into the message
//! [`from_openai_chat`] gives for the same answer.

use super::{error_parts, Accumulator, Delta, Events, StreamError};
use crate::providers::{from_openai_chat, ParsedResponse};
use serde::Deserialize;
use serde_json::{json, Map, Number, Value};
use std::borrow::Cow;

const PROVIDER: &str = "OpenAI Chat";

/// The accumulator of an OpenAI Chat Completions stream.
///
/// The OpenAI Chat Completions stream: `chat.completion.chunk`s into the message
/// [`from_openai_chat`] gives for the same answer.
///
/// Only the first choice (`index` 0) is read, as [`from_openai_chat`] reads the first one.
/// Tool calls arrive as fragments keyed by their `index`: the first has the id and the name,
/// the others pieces of the arguments' JSON text. With `stream_options.include_usage`, a last
/// chunk without choices carries the usage, and every chunk before it has `"usage": null`: a
/// stream whose chunks had it and that ends without `[DONE]` and without the usage chunk (cut
/// in or before it) is [`StreamError::Incomplete`], not an answer without usage. A refusal is
/// kept (as a refusal block) but gives no delta.
///
/// ```
/// use agentstate::providers::stream::{Accumulator, Delta, OpenAiChatStream};
///
/// let mut stream = OpenAiChatStream::new();
/// let mut deltas = Vec::new();
/// for data in [
///     r#"{"id":"c1","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"get_weather","arguments":""}}]}}]}"#,
///     r#"{"id":"c1","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\":\"Paris\"}"}}]}}]}"#,
///     r#"{"id":"c1","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}"#,
///     "[DONE]",
/// ] {
///     stream.push_event("message", data, &mut deltas)?;
/// }
/// let message = stream.finish()?.message;
/// assert_eq!(deltas[1], Delta::ToolCall { message_id: message.message_id.to_string(),
///     tool_call_id: "call_1".into(), name: "get_weather".into(), delta: r#"{"city":"Paris"}"#.into() });
/// assert_eq!(message.tool_calls()[0].function.arguments, r#"{"city":"Paris"}"#);
/// # Ok::<(), agentstate::providers::stream::StreamError>(())
/// ```
#[derive(Debug, Clone, Default)]
pub struct OpenAiChatStream {
    events: Events,
    id: Option<String>,
    created: Option<Number>,
    model: Option<String>,
    system_fingerprint: Option<String>,
    service_tier: Option<String>,
    content: String,
    reasoning: String,
    refusal: String,
    calls: Vec<Call>,
    finish_reason: Option<String>,
    usage: Option<Value>,
    /// Whether a chunk had a `usage` field: the usage was asked, and its chunk must come.
    usage_asked: bool,
    done: bool,
}

#[derive(Debug, Clone)]
struct Call {
    index: u64,
    id: String,
    name: String,
    arguments: String,
}

#[derive(Deserialize)]
struct Chunk<'a> {
    #[serde(borrow, default)]
    id: Option<Cow<'a, str>>,
    #[serde(default)]
    created: Option<Number>,
    #[serde(borrow, default)]
    model: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    system_fingerprint: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    service_tier: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    choices: Vec<Choice<'a>>,
    /// `Some(null)` when the chunk has `"usage": null` (every chunk but the last one has it
    /// when `stream_options.include_usage` was asked).
    #[serde(default, deserialize_with = "present")]
    usage: Option<Value>,
    #[serde(default)]
    error: Option<Value>,
}

#[derive(Deserialize)]
struct Choice<'a> {
    #[serde(default)]
    index: u64,
    #[serde(borrow, default)]
    delta: Option<ChunkDelta<'a>>,
    #[serde(borrow, default)]
    finish_reason: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct ChunkDelta<'a> {
    #[serde(borrow, default)]
    content: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    reasoning_content: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    refusal: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    tool_calls: Option<Vec<CallFragment<'a>>>,
}

#[derive(Deserialize)]
struct CallFragment<'a> {
    #[serde(default)]
    index: u64,
    #[serde(borrow, default)]
    id: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    function: Option<FunctionFragment<'a>>,
}

#[derive(Deserialize)]
struct FunctionFragment<'a> {
    #[serde(borrow, default)]
    name: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    arguments: Option<Cow<'a, str>>,
}

impl OpenAiChatStream {
    /// An accumulator at the start of a stream.
    pub fn new() -> Self {
        OpenAiChatStream::default()
    }

    /// The response Chat Completions would have sent without streaming.
    fn response(&self) -> Value {
        let mut message = Map::new();
        message.insert("role".into(), "assistant".into());
        let text = |s: &str| {
            if s.is_empty() {
                Value::Null
            } else {
                Value::from(s)
            }
        };
        message.insert("content".into(), text(&self.content));
        message.insert("refusal".into(), text(&self.refusal));
        if !self.reasoning.is_empty() {
            message.insert("reasoning_content".into(), text(&self.reasoning));
        }
        if !self.calls.is_empty() {
            let calls = self
                .calls
                .iter()
                .map(|c| {
                    json!({"id": c.id, "type": "function",
                           "function": {"name": c.name, "arguments": c.arguments}})
                })
                .collect();
            message.insert("tool_calls".into(), Value::Array(calls));
        }
        let mut response = Map::new();
        let mut put = |key: &str, value: Option<Value>| {
            if let Some(value) = value {
                response.insert(key.into(), value);
            }
        };
        put("id", self.id.clone().map(Value::from));
        put("object", Some("chat.completion".into()));
        put("created", self.created.clone().map(Value::Number));
        put("model", self.model.clone().map(Value::from));
        put(
            "choices",
            Some(json!([{"index": 0, "message": message, "logprobs": null,
                         "finish_reason": self.finish_reason}])),
        );
        put("usage", self.usage.clone());
        put("service_tier", self.service_tier.clone().map(Value::from));
        put(
            "system_fingerprint",
            self.system_fingerprint.clone().map(Value::from),
        );
        Value::Object(response)
    }
}

impl Accumulator for OpenAiChatStream {
    const PROVIDER: &'static str = PROVIDER;

    fn push_event(
        &mut self,
        event: &str,
        data: &str,
        deltas: &mut Vec<Delta>,
    ) -> Result<(), StreamError> {
        self.events.count += 1;
        if data.trim() == "[DONE]" {
            self.done = true;
            return Ok(());
        }
        let chunk: Chunk<'_> =
            serde_json::from_str(data).map_err(|e| self.events.malformed(PROVIDER, event, e))?;
        if chunk.error.is_some() {
            let (code, message) = error_parts(chunk.error.as_ref());
            return Err(self.events.provider_error(PROVIDER, code, message));
        }
        if self.id.is_none() {
            self.id = chunk.id.map(Cow::into_owned);
        }
        if self.created.is_none() {
            self.created = chunk.created;
        }
        if self.model.is_none() {
            self.model = chunk.model.map(Cow::into_owned);
        }
        // Usually the same in every chunk: copied only when it changes.
        if let Some(f) = chunk.system_fingerprint {
            if self.system_fingerprint.as_deref() != Some(&*f) {
                self.system_fingerprint = Some(f.into_owned());
            }
        }
        if let Some(t) = chunk.service_tier {
            if self.service_tier.as_deref() != Some(&*t) {
                self.service_tier = Some(t.into_owned());
            }
        }
        if let Some(usage) = chunk.usage {
            self.usage_asked = true;
            if !usage.is_null() {
                self.usage = Some(usage);
            }
        }
        for choice in chunk.choices {
            if choice.index != 0 {
                continue;
            }
            if let Some(reason) = choice.finish_reason {
                self.finish_reason = Some(reason.into_owned());
            }
            let Some(delta) = choice.delta else { continue };
            if let Some(text) = delta.reasoning_content.filter(|t| !t.is_empty()) {
                self.reasoning.push_str(&text);
                let message_id = self.events.message_id();
                deltas.push(Delta::Reasoning {
                    message_id,
                    delta: text.into_owned(),
                });
            }
            if let Some(text) = delta.content.filter(|t| !t.is_empty()) {
                self.content.push_str(&text);
                let message_id = self.events.message_id();
                deltas.push(Delta::Text {
                    message_id,
                    delta: text.into_owned(),
                });
            }
            if let Some(refusal) = delta.refusal {
                self.refusal.push_str(&refusal);
            }
            for fragment in delta.tool_calls.into_iter().flatten() {
                let (name, arguments) = match fragment.function {
                    Some(f) => (f.name, f.arguments),
                    None => (None, None),
                };
                let arguments = arguments.unwrap_or_default();
                let at = match self.calls.iter().position(|c| c.index == fragment.index) {
                    Some(at) => {
                        self.calls[at].arguments.push_str(&arguments);
                        if arguments.is_empty() {
                            continue;
                        }
                        at
                    }
                    None => {
                        let Some(id) = fragment.id else {
                            return Err(self.events.malformed(
                                PROVIDER,
                                event,
                                format_args!(
                                    "the first fragment of tool call {} has no `id`",
                                    fragment.index
                                ),
                            ));
                        };
                        self.calls.push(Call {
                            index: fragment.index,
                            id: id.into_owned(),
                            name: name.map(Cow::into_owned).unwrap_or_default(),
                            arguments: arguments.clone().into_owned(),
                        });
                        self.calls.len() - 1
                    }
                };
                let message_id = self.events.message_id();
                let call = &self.calls[at];
                deltas.push(Delta::ToolCall {
                    message_id,
                    tool_call_id: call.id.clone(),
                    name: call.name.clone(),
                    delta: arguments.into_owned(),
                });
            }
        }
        Ok(())
    }

    fn finish(self) -> Result<ParsedResponse, StreamError> {
        if !self.done && self.finish_reason.is_none() {
            return Err(StreamError::Incomplete {
                provider: PROVIDER,
                events: self.events.count,
                expected: "a `finish_reason` or `[DONE]`",
            });
        }
        if !self.done && self.usage_asked && self.usage.is_none() {
            // Cut in or before the last chunk, which carries the usage that was asked.
            return Err(StreamError::Incomplete {
                provider: PROVIDER,
                events: self.events.count,
                expected: "the usage chunk (its chunks had `\"usage\": null`)",
            });
        }
        let parsed = from_openai_chat(&self.response())?;
        Ok(self.events.stamp(parsed))
    }
}

/// A field read as present even when `null` (`Some(Value::Null)`).
fn present<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(deserializer).map(Some)
}
