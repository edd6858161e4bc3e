//! The OpenAI Responses stream: semantic events into the message
//! [`from_openai_responses`] gives for the same answer.

use super::{error_parts, Accumulator, Delta, Events, StreamError};
use crate::providers::{from_openai_responses, ParsedResponse};
use serde::Deserialize;
use serde_json::Value;
use std::borrow::Cow;

const PROVIDER: &str = "OpenAI Responses";

/// The accumulator of an OpenAI Responses stream.
///
/// The OpenAI Responses stream: semantic events into the message
/// [`from_openai_responses`] gives for the same answer.
///
/// `response.created` gives the response's id; `response.output_item.added` announces each
/// output item (a tool call's delta starts with its name); `response.output_text.delta`,
/// `response.reasoning_summary_text.delta` and `response.function_call_arguments.delta` give
/// the deltas; `response.output_item.done` gives each finished item; `response.completed` (or
/// `response.incomplete`) carries the whole response, the non-streamed body, which is what
/// the message is read from. `response.failed` and `error` are errors.
///
/// ```
/// use agentstate::providers::stream::{Accumulator, Delta, OpenAiResponsesStream};
///
/// let mut stream = OpenAiResponsesStream::new();
/// let mut deltas = Vec::new();
/// for (event, data) in [
///     ("response.created", r#"{"type":"response.created","response":{"id":"resp_1","object":"response","created_at":1,"status":"in_progress","model":"gpt-4o","output":[]}}"#),
///     ("response.output_text.delta", r#"{"type":"response.output_text.delta","item_id":"msg_1","output_index":0,"content_index":0,"delta":"Hi"}"#),
///     ("response.completed", r#"{"type":"response.completed","response":{"id":"resp_1","object":"response","created_at":1,"status":"completed","model":"gpt-4o","output":[{"id":"msg_1","type":"message","role":"assistant","status":"completed","content":[{"type":"output_text","text":"Hi","annotations":[]}]}]}}"#),
/// ] {
///     stream.push_event(event, data, &mut deltas)?;
/// }
/// let message = stream.finish()?.message;
/// assert_eq!(deltas, [Delta::Text { message_id: message.message_id.to_string(), delta: "Hi".into() }]);
/// assert_eq!(message.text(), "Hi");
/// # Ok::<(), agentstate::providers::stream::StreamError>(())
/// ```
#[derive(Debug, Clone, Default)]
pub struct OpenAiResponsesStream {
    events: Events,
    /// The function calls announced, by output index: (index, call id, name).
    calls: Vec<(u64, String, String)>,
    /// The finished items (`response.output_item.done`), by output index: the output when
    /// the final response has none (as some compatible servers send it).
    items: Vec<(u64, Value)>,
    /// The final response (`response.completed` or `response.incomplete`).
    response: Option<Value>,
}

#[derive(Deserialize)]
struct Event<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    #[serde(default)]
    output_index: Option<u64>,
    #[serde(borrow, default)]
    delta: Option<Cow<'a, str>>,
    #[serde(default)]
    item: Option<Value>,
    #[serde(default)]
    response: Option<Value>,
    #[serde(borrow, default)]
    code: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    message: Option<Cow<'a, str>>,
}

impl OpenAiResponsesStream {
    /// An accumulator at the start of a stream.
    pub fn new() -> Self {
        OpenAiResponsesStream::default()
    }
}

impl Accumulator for OpenAiResponsesStream {
    const PROVIDER: &'static str = PROVIDER;

    fn push_event(
        &mut self,
        event: &str,
        data: &str,
        deltas: &mut Vec<Delta>,
    ) -> Result<(), StreamError> {
        self.events.count += 1;
        let parsed: Event<'_> =
            serde_json::from_str(data).map_err(|e| self.events.malformed(PROVIDER, event, e))?;
        let missing = |this: &Self, field: &str| {
            this.events
                .malformed(PROVIDER, &parsed.kind, format_args!("it has no `{field}`"))
        };
        match &*parsed.kind {
            "response.output_text.delta" | "response.reasoning_summary_text.delta" => {
                let delta = parsed.delta.ok_or_else(|| missing(self, "delta"))?;
                if !delta.is_empty() {
                    let message_id = self.events.message_id();
                    let delta = delta.into_owned();
                    deltas.push(if parsed.kind == "response.output_text.delta" {
                        Delta::Text { message_id, delta }
                    } else {
                        Delta::Reasoning { message_id, delta }
                    });
                }
            }
            "response.output_item.added" => {
                let item = parsed.item.as_ref().ok_or_else(|| missing(self, "item"))?;
                if item.get("type").and_then(Value::as_str) == Some("function_call") {
                    let (Some(call_id), Some(name)) = (
                        item.get("call_id").and_then(Value::as_str),
                        item.get("name").and_then(Value::as_str),
                    ) else {
                        return Err(missing(self, "item.call_id` or `item.name"));
                    };
                    let index = parsed.output_index.unwrap_or(self.calls.len() as u64);
                    self.calls
                        .push((index, call_id.to_owned(), name.to_owned()));
                    let message_id = self.events.message_id();
                    deltas.push(Delta::ToolCall {
                        message_id,
                        tool_call_id: call_id.to_owned(),
                        name: name.to_owned(),
                        delta: String::new(),
                    });
                }
            }
            "response.function_call_arguments.delta" => {
                let delta = parsed.delta.ok_or_else(|| missing(self, "delta"))?;
                let index = parsed
                    .output_index
                    .ok_or_else(|| missing(self, "output_index"))?;
                let Some((_, id, name)) = self.calls.iter().find(|(i, _, _)| *i == index) else {
                    return Err(self.events.malformed(
                        PROVIDER,
                        &parsed.kind,
                        format_args!("no function call was added at output index {index}"),
                    ));
                };
                let (tool_call_id, name) = (id.clone(), name.clone());
                if !delta.is_empty() {
                    let message_id = self.events.message_id();
                    deltas.push(Delta::ToolCall {
                        message_id,
                        tool_call_id,
                        name,
                        delta: delta.into_owned(),
                    });
                }
            }
            "response.output_item.done" => {
                let item = parsed.item.ok_or_else(|| missing(self, "item"))?;
                let index = parsed.output_index.unwrap_or(self.items.len() as u64);
                self.items.push((index, item));
            }
            "response.completed" | "response.incomplete" => {
                let response = parsed.response.ok_or_else(|| missing(self, "response"))?;
                self.response = Some(response);
            }
            "response.failed" => {
                let error = parsed.response.as_ref().and_then(|r| r.get("error"));
                let (code, message) = error_parts(error);
                return Err(self.events.provider_error(PROVIDER, code, message));
            }
            "error" => {
                return Err(self.events.provider_error(
                    PROVIDER,
                    parsed.code.as_deref().unwrap_or("error"),
                    parsed.message.as_deref().unwrap_or("no message"),
                ));
            }
            _ => {} // content parts, `.done` events, annotations, built-in tools' progress
        }
        Ok(())
    }

    fn finish(self) -> Result<ParsedResponse, StreamError> {
        let Some(mut response) = self.response else {
            return Err(StreamError::Incomplete {
                provider: PROVIDER,
                events: self.events.count,
                expected: "`response.completed`",
            });
        };
        let empty = response
            .get("output")
            .and_then(Value::as_array)
            .is_none_or(Vec::is_empty);
        if empty && !self.items.is_empty() {
            let mut items = self.items;
            items.sort_by_key(|(index, _)| *index);
            response["output"] = Value::Array(items.into_iter().map(|(_, item)| item).collect());
        }
        let parsed = from_openai_responses(&response)?;
        Ok(self.events.stamp(parsed))
    }
}
