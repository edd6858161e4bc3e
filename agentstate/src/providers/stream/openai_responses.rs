//! The OpenAI Responses stream: semantic events into the message
//! [`from_openai_responses`] gives for the same answer.

use super::{error_parts, Accumulator, Delta, Events, StreamError};
use crate::providers::{from_openai_responses, ParsedResponse};
use serde::de::IgnoredAny;
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
/// the message is read from. `response.failed` and `error` (its code and message flat, or
/// nested under `error`) are errors. The other event types of the official SDK are skipped
/// (the final response has what they carry, whatever the shape of their `delta`); an event of
/// a type it does not list is skipped with a note ([`Issue::UnknownEvent`]).
///
/// [`Issue::UnknownEvent`]: crate::providers::Issue::UnknownEvent
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

/// An event: its type, and the fields the accumulator reads, each of any JSON type (an event
/// this version does not know, or a known one whose `delta` is an object, as a shell call's
/// output delta is, is skipped rather than refused).
#[derive(Deserialize)]
struct Event<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    #[serde(default)]
    output_index: Option<Value>,
    #[serde(borrow, default)]
    delta: Option<Field<'a>>,
    #[serde(default)]
    item: Option<Value>,
    #[serde(default)]
    response: Option<Value>,
    #[serde(default)]
    code: Option<Value>,
    #[serde(default)]
    message: Option<Value>,
    #[serde(default)]
    error: Option<Value>,
}

/// A field that is a string where the accumulator reads it, and may be anything elsewhere.
#[derive(Deserialize)]
#[serde(untagged)]
enum Field<'a> {
    Text(#[serde(borrow)] Cow<'a, str>),
    Other(IgnoredAny),
}

impl<'a> Field<'a> {
    fn text(self) -> Option<Cow<'a, str>> {
        match self {
            Field::Text(text) => Some(text),
            Field::Other(_) => None,
        }
    }
}

/// The event types of the Responses stream (the official SDK's `ResponseStreamEvent`): those
/// the accumulator does not read carry nothing the final response lacks.
const KNOWN: &[&str] = &[
    "error",
    "response.audio.delta",
    "response.audio.done",
    "response.audio.transcript.delta",
    "response.audio.transcript.done",
    "response.code_interpreter_call.completed",
    "response.code_interpreter_call.in_progress",
    "response.code_interpreter_call.interpreting",
    "response.code_interpreter_call_code.delta",
    "response.code_interpreter_call_code.done",
    "response.compaction.compacting",
    "response.completed",
    "response.content_part.added",
    "response.content_part.done",
    "response.created",
    "response.custom_tool_call_input.delta",
    "response.custom_tool_call_input.done",
    "response.failed",
    "response.file_search_call.completed",
    "response.file_search_call.in_progress",
    "response.file_search_call.searching",
    "response.function_call_arguments.delta",
    "response.function_call_arguments.done",
    "response.image_generation_call.completed",
    "response.image_generation_call.generating",
    "response.image_generation_call.in_progress",
    "response.image_generation_call.partial_image",
    "response.in_progress",
    "response.incomplete",
    "response.mcp_call.completed",
    "response.mcp_call.failed",
    "response.mcp_call.in_progress",
    "response.mcp_call_arguments.delta",
    "response.mcp_call_arguments.done",
    "response.mcp_list_tools.completed",
    "response.mcp_list_tools.failed",
    "response.mcp_list_tools.in_progress",
    "response.output_item.added",
    "response.output_item.done",
    "response.output_text.annotation.added",
    "response.output_text.delta",
    "response.output_text.done",
    "response.queued",
    "response.reasoning_summary_part.added",
    "response.reasoning_summary_part.done",
    "response.reasoning_summary_text.delta",
    "response.reasoning_summary_text.done",
    "response.reasoning_text.delta",
    "response.reasoning_text.done",
    "response.refusal.delta",
    "response.refusal.done",
    "response.shell_call_command.added",
    "response.shell_call_command.delta",
    "response.shell_call_command.done",
    "response.shell_call_output_content.delta",
    "response.shell_call_output_content.done",
    "response.web_search_call.completed",
    "response.web_search_call.in_progress",
    "response.web_search_call.searching",
];

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
                let delta = text(parsed.delta).ok_or_else(|| missing(self, "delta` string"))?;
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
                    let index = index(&parsed.output_index).unwrap_or(self.calls.len() as u64);
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
                let delta = text(parsed.delta).ok_or_else(|| missing(self, "delta` string"))?;
                let index =
                    index(&parsed.output_index).ok_or_else(|| missing(self, "output_index"))?;
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
                let index = index(&parsed.output_index).unwrap_or(self.items.len() as u64);
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
                // Flat (`{"type": "error", "code", "message"}`, as the SDK's type has it) or
                // nested under `error`, as the API also sends it.
                let nested = parsed.error.as_ref().filter(|e| e.is_object());
                let (code, message) = match nested {
                    Some(error) => (
                        error.get("code").or(error.get("type")),
                        error.get("message"),
                    ),
                    None => (parsed.code.as_ref(), parsed.message.as_ref()),
                };
                let code = match code {
                    Some(Value::String(code)) => code.clone(),
                    Some(Value::Number(code)) => code.to_string(),
                    _ => "error".to_owned(),
                };
                let message = message.and_then(Value::as_str).unwrap_or("no message");
                return Err(self.events.provider_error(PROVIDER, code, message));
            }
            // Content parts, `.done` events, annotations, built-in tools' progress: the final
            // response has what they carry.
            kind if KNOWN.contains(&kind) => {}
            kind => self.events.skip_unknown(kind),
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

/// A string field's text (`None` when absent or not a string).
fn text(field: Option<Field<'_>>) -> Option<Cow<'_, str>> {
    field.and_then(Field::text)
}

/// An `output_index` (`None` when absent or not an index).
fn index(value: &Option<Value>) -> Option<u64> {
    value.as_ref().and_then(Value::as_u64)
}
