//! The Anthropic Messages stream: `message_start`, `content_block_start` / `_delta` / `_stop`,
//! `message_delta` and `message_stop` into the message [`from_anthropic`] gives for the same
//! answer.

use super::{error_parts, Accumulator, Delta, Events, StreamError};
use crate::providers::{from_anthropic, ParsedResponse, ToolIds};
use serde::Deserialize;
use serde_json::{Map, Value};
use std::borrow::Cow;

const PROVIDER: &str = "Anthropic";

/// The accumulator of an Anthropic Messages stream.
///
/// The Anthropic Messages stream: `message_start`, `content_block_start` / `_delta` / `_stop`,
/// `message_delta` and `message_stop` into the message [`from_anthropic`] gives for the same
/// answer.
///
/// A block's deltas build it: `text_delta` its text, `thinking_delta` its thinking and
/// `signature_delta` its signature, `input_json_delta` a tool call's input as JSON text (read
/// when the block stops: an empty text is `{}`), `citations_delta` a text's citations. The
/// usage of `message_start` is updated by each `message_delta`'s (its counts are cumulative).
/// `ping` is skipped; `error` is an error, and so is any event but `ping` after `message_stop`
/// (the message is finished: nothing is merged into it); an event of another type is skipped
/// with a note
/// ([`Issue::UnknownEvent`](crate::providers::Issue::UnknownEvent)). Blocks of server tools (`server_tool_use`,
/// `web_search_tool_result`...) are kept whole, as [`from_anthropic`] notes them.
///
/// Give the accumulator the [`ToolIds`] of the request (from
/// [`to_anthropic`](crate::providers::to_anthropic)) to map rewritten tool call ids back, in
/// the deltas as in the message.
///
/// ```
/// use agentstate::providers::stream::{Accumulator, AnthropicStream, Delta};
///
/// let mut stream = AnthropicStream::new(None);
/// let mut deltas = Vec::new();
/// for (event, data) in [
///     ("message_start", r#"{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"model":"claude-opus-4-6","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":25,"output_tokens":1}}}"#),
///     ("content_block_start", r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#),
///     ("ping", r#"{"type": "ping"}"#),
///     ("content_block_delta", r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello!"}}"#),
///     ("content_block_stop", r#"{"type":"content_block_stop","index":0}"#),
///     ("message_delta", r#"{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":15}}"#),
///     ("message_stop", r#"{"type":"message_stop"}"#),
/// ] {
///     stream.push_event(event, data, &mut deltas)?;
/// }
/// let message = stream.finish()?.message;
/// assert_eq!(deltas, [Delta::Text { message_id: message.message_id.to_string(), delta: "Hello!".into() }]);
/// assert_eq!(message.metadata.get("response_id"), Some("msg_1".into()));
/// assert_eq!(message.usages.as_ref().unwrap().completion_tokens, 15);
/// # Ok::<(), agentstate::providers::stream::StreamError>(())
/// ```
#[derive(Debug, Clone, Default)]
pub struct AnthropicStream {
    events: Events,
    tool_ids: Option<ToolIds>,
    /// `message_start`'s message, without its content.
    message: Option<Map<String, Value>>,
    blocks: Vec<Block>,
    stopped: bool,
}

#[derive(Debug, Clone)]
struct Block {
    index: u64,
    /// The block as `content_block_start` gave it.
    start: Map<String, Value>,
    /// The text, thinking or input JSON text built by the deltas.
    text: String,
    signature: Option<String>,
    citations: Vec<Value>,
    /// The tool call's original id and name (tool_use blocks).
    call: Option<(String, String)>,
}

#[derive(Deserialize)]
struct Event<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    #[serde(default)]
    index: Option<u64>,
    #[serde(borrow, default)]
    delta: Option<EventDelta<'a>>,
    #[serde(default)]
    content_block: Option<Map<String, Value>>,
    #[serde(default)]
    message: Option<Map<String, Value>>,
    #[serde(default)]
    usage: Option<Map<String, Value>>,
    #[serde(default)]
    error: Option<Value>,
}

/// An event's type alone.
#[derive(Deserialize)]
struct Kind<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
}

/// The event types of the Messages stream.
const KNOWN: &[&str] = &[
    "message_start",
    "content_block_start",
    "content_block_delta",
    "content_block_stop",
    "message_delta",
    "message_stop",
    "ping",
    "error",
];

#[derive(Deserialize)]
struct EventDelta<'a> {
    #[serde(rename = "type", borrow, default)]
    kind: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    text: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    partial_json: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    thinking: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    signature: Option<Cow<'a, str>>,
    #[serde(default)]
    citation: Option<Value>,
    #[serde(default)]
    stop_reason: Option<Value>,
    #[serde(default)]
    stop_sequence: Option<Value>,
    #[serde(default)]
    stop_details: Option<Value>,
}

impl AnthropicStream {
    /// An accumulator at the start of a stream; `tool_ids` maps the response's tool call ids
    /// back to the conversation's (see [`ToolIds`]).
    pub fn new(tool_ids: Option<ToolIds>) -> Self {
        AnthropicStream {
            tool_ids,
            ..AnthropicStream::default()
        }
    }

    /// The response Anthropic would have sent without streaming.
    fn response(&self) -> Result<Value, StreamError> {
        let mut message = self.message.clone().unwrap_or_default();
        let mut content = Vec::with_capacity(self.blocks.len());
        for block in &self.blocks {
            let mut out = block.start.clone();
            match out.get("type").and_then(Value::as_str) {
                Some("text") => {
                    out.insert("text".into(), Value::from(block.text.as_str()));
                    if !block.citations.is_empty() {
                        out.insert("citations".into(), Value::Array(block.citations.clone()));
                    }
                }
                Some("thinking") => {
                    out.insert("thinking".into(), Value::from(block.text.as_str()));
                    if let Some(signature) = &block.signature {
                        out.insert("signature".into(), Value::from(signature.as_str()));
                    }
                }
                Some("tool_use" | "server_tool_use") if !block.text.trim().is_empty() => {
                    let input: Value =
                        serde_json::from_str(&block.text).map_err(|e| StreamError::Malformed {
                            provider: PROVIDER,
                            event: self.events.count,
                            name: "content_block_stop".into(),
                            reason: format!(
                                "the input of tool call block {} is not valid JSON ({e})",
                                block.index
                            ),
                        })?;
                    out.insert("input".into(), input);
                }
                _ => {}
            }
            content.push(Value::Object(out));
        }
        message.insert("content".into(), Value::Array(content));
        Ok(Value::Object(message))
    }
}

impl Accumulator for AnthropicStream {
    const PROVIDER: &'static str = PROVIDER;

    fn push_event(
        &mut self,
        event: &str,
        data: &str,
        deltas: &mut Vec<Delta>,
    ) -> Result<(), StreamError> {
        self.events.count += 1;
        let parsed: Event<'_> = match serde_json::from_str(data) {
            Ok(parsed) => parsed,
            Err(e) => {
                // An event this version does not know may have fields of any shape.
                return match serde_json::from_str::<Kind<'_>>(data) {
                    Ok(Kind { kind }) if !KNOWN.contains(&&*kind) => {
                        self.events.skip_unknown(&kind);
                        Ok(())
                    }
                    _ => Err(self.events.malformed(PROVIDER, event, e)),
                };
            }
        };
        let malformed = |this: &Self, reason: &str| this.events.malformed(PROVIDER, event, reason);
        if self.stopped && parsed.kind != "ping" {
            // Nothing follows the answer's last event: merging it would change a finished
            // message.
            return Err(malformed(
                self,
                "it comes after `message_stop`, which ends the message",
            ));
        }
        match &*parsed.kind {
            "message_start" => {
                let mut message = parsed
                    .message
                    .ok_or_else(|| malformed(self, "it has no `message`"))?;
                message.remove("content");
                self.message = Some(message);
            }
            "content_block_start" => {
                let start = parsed
                    .content_block
                    .ok_or_else(|| malformed(self, "it has no `content_block`"))?;
                let index = parsed.index.unwrap_or(self.blocks.len() as u64);
                let mut block = Block {
                    index,
                    text: String::new(),
                    signature: None,
                    citations: Vec::new(),
                    call: None,
                    start,
                };
                match block.start.get("type").and_then(Value::as_str) {
                    Some("text") => {
                        block.text = str_of(&block.start, "text");
                    }
                    Some("thinking") => {
                        block.text = str_of(&block.start, "thinking");
                        block.signature = block
                            .start
                            .get("signature")
                            .and_then(Value::as_str)
                            .filter(|s| !s.is_empty())
                            .map(str::to_owned);
                    }
                    Some("tool_use") => {
                        let (Some(id), Some(name)) = (
                            block.start.get("id").and_then(Value::as_str),
                            block.start.get("name").and_then(Value::as_str),
                        ) else {
                            return Err(malformed(
                                self,
                                "its tool_use block has no `id` or `name`",
                            ));
                        };
                        let id = self
                            .tool_ids
                            .as_ref()
                            .map_or(id, |ids| ids.original(id))
                            .to_owned();
                        let name = name.to_owned();
                        block.call = Some((id.clone(), name.clone()));
                        let message_id = self.events.message_id();
                        deltas.push(Delta::ToolCall {
                            message_id,
                            tool_call_id: id,
                            name,
                            delta: String::new(),
                        });
                    }
                    _ => {}
                }
                if !block.text.is_empty() {
                    let message_id = self.events.message_id();
                    let delta = block.text.clone();
                    deltas.push(
                        if block.start.get("type").and_then(Value::as_str) == Some("text") {
                            Delta::Text { message_id, delta }
                        } else {
                            Delta::Reasoning { message_id, delta }
                        },
                    );
                }
                self.blocks.push(block);
            }
            "content_block_delta" => {
                let delta = parsed
                    .delta
                    .ok_or_else(|| malformed(self, "it has no `delta`"))?;
                let index = parsed
                    .index
                    .ok_or_else(|| malformed(self, "it has no `index`"))?;
                let Some(at) = self.blocks.iter().rposition(|b| b.index == index) else {
                    return Err(self.events.malformed(
                        PROVIDER,
                        event,
                        format_args!("no content block was started at index {index}"),
                    ));
                };
                let message_id = self.events.message_id();
                let block = &mut self.blocks[at];
                match delta.kind.as_deref() {
                    Some("text_delta") => {
                        let text = delta.text.unwrap_or_default();
                        block.text.push_str(&text);
                        if !text.is_empty() {
                            deltas.push(Delta::Text {
                                message_id,
                                delta: text.into_owned(),
                            });
                        }
                    }
                    Some("thinking_delta") => {
                        let text = delta.thinking.unwrap_or_default();
                        block.text.push_str(&text);
                        if !text.is_empty() {
                            deltas.push(Delta::Reasoning {
                                message_id,
                                delta: text.into_owned(),
                            });
                        }
                    }
                    Some("signature_delta") => {
                        let signature = delta.signature.unwrap_or_default();
                        block
                            .signature
                            .get_or_insert_with(String::new)
                            .push_str(&signature);
                    }
                    Some("input_json_delta") => {
                        let json = delta.partial_json.unwrap_or_default();
                        block.text.push_str(&json);
                        if let (Some((id, name)), false) = (&block.call, json.is_empty()) {
                            deltas.push(Delta::ToolCall {
                                message_id,
                                tool_call_id: id.clone(),
                                name: name.clone(),
                                delta: json.into_owned(),
                            });
                        }
                    }
                    Some("citations_delta") => {
                        block.citations.extend(delta.citation);
                    }
                    _ => {} // a delta type this version does not know
                }
            }
            "message_delta" => {
                let message = self.message.get_or_insert_with(Map::new);
                if let Some(delta) = parsed.delta {
                    if let Some(reason) = delta.stop_reason {
                        message.insert("stop_reason".into(), reason);
                    }
                    if let Some(sequence) = delta.stop_sequence {
                        message.insert("stop_sequence".into(), sequence);
                    }
                    if let Some(details) = delta.stop_details {
                        message.insert("stop_details".into(), details);
                    }
                }
                if let Some(usage) = parsed.usage {
                    let total = message
                        .entry("usage")
                        .or_insert_with(|| Value::Object(Map::new()));
                    if let Value::Object(total) = total {
                        for (key, value) in usage {
                            if !value.is_null() {
                                total.insert(key, value);
                            }
                        }
                    }
                }
            }
            "message_stop" => self.stopped = true,
            "error" => {
                let (code, message) = error_parts(parsed.error.as_ref());
                return Err(self.events.provider_error(PROVIDER, code, message));
            }
            "ping" | "content_block_stop" => {}
            kind => self.events.skip_unknown(kind),
        }
        Ok(())
    }

    fn finish(self) -> Result<ParsedResponse, StreamError> {
        if !self.stopped {
            return Err(StreamError::Incomplete {
                provider: PROVIDER,
                events: self.events.count,
                expected: "`message_stop`",
            });
        }
        let response = self.response()?;
        let parsed = from_anthropic(&response, self.tool_ids.as_ref())?;
        Ok(self.events.stamp(parsed))
    }
}

/// A string field of a block, `""` when absent.
fn str_of(block: &Map<String, Value>, key: &str) -> String {
    block
        .get(key)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}
