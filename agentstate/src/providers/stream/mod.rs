//! Streamed responses: an accumulator per provider takes the stream's events as they come,
//! yields the text, reasoning and tool-call [`Delta`]s as they arrive, and at the end gives
//! the finished [`Message`](crate::message::Message) with usage and the same report as the non-streamed
//! `from_*` function: equal to what that function gives for the same answer.
//!
//! | provider | accumulator | events read | its final event |
//! |---|---|---|---|
//! | OpenAI Chat Completions | [`OpenAiChatStream`] | `chat.completion.chunk`s: content, `reasoning_content`, refusal, tool-call fragments by `index`, the usage chunk, `[DONE]` | a `finish_reason` or `[DONE]` (and the usage chunk when the chunks have `"usage": null`) |
//! | OpenAI Responses | [`OpenAiResponsesStream`] | `response.created`, `response.output_item.added`/`done`, `response.output_text.delta`, `response.reasoning_summary_text.delta`, `response.function_call_arguments.delta`, `response.completed`/`incomplete`/`failed`, `error` | `response.completed` or `response.incomplete` |
//! | Anthropic Messages | [`AnthropicStream`] | `message_start`, `content_block_start`/`delta` (`text_delta`, `input_json_delta`, `thinking_delta`, `signature_delta`, `citations_delta`)/`stop`, `message_delta`, `message_stop`, `ping`, `error` | `message_stop` |
//! | Gemini `streamGenerateContent?alt=sse` | [`GeminiStream`] | each chunk's first candidate's parts (text, thoughts, function calls, their streamed arguments (`partialArgs`), signatures), grounding and citations, `finishReason`, `usageMetadata`, an `error` | a `finishReason` |
//!
//! Each accumulator keeps only what the answer needs while the stream runs (the texts, the
//! arguments' JSON text, the ids), reading each event into borrowed serde types; at the end
//! it writes the response the provider would have sent without streaming and reads it with
//! the `from_*` function, so the two paths cannot drift apart. The message's `raw` is that
//! assembled response (OpenAI Responses: the `response.completed` event's response, which
//! is the non-streamed body). The message's id is a fresh uuid, made by the accumulator when
//! the first delta needs it, so that the deltas and the message agree; the provider's
//! response id goes to the message's `metadata["response_id"]`
//! ([`RESPONSE_ID`](super::RESPONSE_ID)), as the `from_*` functions put it.
//! `tests/provider_streams.rs` checks the equality on recorded streams of each provider
//! (`tests/data/streams/`, from their documentation) split at random bytes and events; an
//! accumulator costs under 1 µs per event, decoding included (`benches/README.md`).
//!
//! Bytes go through [`Sse`], which decodes server-sent events ([`SseDecoder`]) from
//! chunks split anywhere. An `error` event, malformed JSON, or a stream that ends before its
//! final event is one [`StreamError`] naming the provider and the event. An event of a type
//! the accumulator does not know (OpenAI Responses, Anthropic) is skipped, with a note in the
//! report ([`Issue::UnknownEvent`]).
//!
//! ```
//! use agentstate::providers::stream::{Delta, OpenAiChatStream, Sse};
//!
//! let body = concat!(
//!     "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"gpt-4o\",",
//!     "\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"Hel\"},\"finish_reason\":null}]}\n\n",
//!     "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"gpt-4o\",",
//!     "\"choices\":[{\"index\":0,\"delta\":{\"content\":\"lo\"},\"finish_reason\":\"stop\"}]}\n\n",
//!     "data: [DONE]\n\n",
//! );
//! let mut stream = Sse::new(OpenAiChatStream::new());
//! let mut deltas = Vec::new();
//! // The bytes may arrive split anywhere.
//! for chunk in body.as_bytes().chunks(7) {
//!     stream.push(chunk, &mut deltas)?;
//! }
//! let message = stream.finish()?.message;
//! assert_eq!(deltas[0], Delta::Text { message_id: message.message_id.to_string(), delta: "Hel".into() });
//! assert_eq!(message.text(), "Hello");
//! assert_eq!(message.metadata.get("response_id"), Some("chatcmpl-1".into()));
//! # Ok::<(), agentstate::providers::stream::StreamError>(())
//! ```
//!
//! # Deltas in a graph run and in AG-UI
//!
//! A [`Delta`] carries the message id (the final message's), the tool call id and name, so
//! a node of `agentstate-graph` maps it in one line onto its `Emitted` events:
//!
//! ```text
//! Delta::Text { message_id, delta } => Emitted::TextDelta { message_id, delta },
//! Delta::ToolCall { message_id, tool_call_id, name, delta } =>
//!     Emitted::ToolCallDelta { message_id, tool_call_id, name, delta },
//! Delta::Reasoning { .. } => {} // the runner has no reasoning event
//! ```
//!
//! With the `ag-ui` feature, [`AguiDeltas`] turns them into AG-UI's `TEXT_MESSAGE_START` /
//! `_CONTENT` / `_END`, `TOOL_CALL_START` / `_ARGS` / `_END` and `REASONING_MESSAGE_*` events.

mod anthropic;
mod gemini;
mod openai_chat;
mod openai_responses;
mod sse;

pub use anthropic::AnthropicStream;
pub use gemini::GeminiStream;
pub use openai_chat::OpenAiChatStream;
pub use openai_responses::OpenAiResponsesStream;
pub use sse::SseDecoder;

use super::{Action, Issue, ParsedResponse, ResponseError};
use crate::message::MessageId;
use std::fmt;

/// A piece of the answer, as it arrives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Delta {
    /// A piece of the answer's text.
    Text {
        /// The id the final message has.
        message_id: String,
        /// The text to append.
        delta: String,
    },
    /// A piece of the model's reasoning (thinking, a reasoning summary, a thought).
    Reasoning {
        /// The id the final message has.
        message_id: String,
        /// The text to append.
        delta: String,
    },
    /// A piece of a tool call's arguments (JSON text); the first delta of a call may be empty,
    /// to announce the call as soon as its name is known.
    ToolCall {
        /// The id the final message has.
        message_id: String,
        /// The call's id, as the final message has it.
        tool_call_id: String,
        /// The tool's name.
        name: String,
        /// The arguments' JSON text to append.
        delta: String,
    },
}

impl Delta {
    /// The id of the message the delta belongs to.
    ///
    /// ```
    /// use agentstate::providers::stream::Delta;
    ///
    /// let delta = Delta::Text { message_id: "m1".into(), delta: "Hi".into() };
    /// assert_eq!(delta.message_id(), "m1");
    /// ```
    pub fn message_id(&self) -> &str {
        match self {
            Delta::Text { message_id, .. }
            | Delta::Reasoning { message_id, .. }
            | Delta::ToolCall { message_id, .. } => message_id,
        }
    }
}

/// A stream that cannot be read into a message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StreamError {
    /// An event is not what the provider sends (malformed JSON, a missing field).
    #[error("cannot read event {event} (`{name}`) of the {provider} stream: {reason}")]
    Malformed {
        /// The provider, e.g. `Anthropic`.
        provider: &'static str,
        /// The event's number in the stream, from 1.
        event: usize,
        /// The event's type (its SSE `event:` or the JSON `type`).
        name: String,
        /// What was wrong.
        reason: String,
    },
    /// The provider sent an error in the stream.
    #[error("the {provider} stream failed at event {event}: {code}: {message}")]
    Provider {
        /// The provider.
        provider: &'static str,
        /// The event's number in the stream, from 1.
        event: usize,
        /// The provider's error type or code, e.g. `overloaded_error`.
        code: String,
        /// The provider's message.
        message: String,
    },
    /// The stream ended before its final event.
    #[error(
        "the {provider} stream ended after {events} events without its final event ({expected})"
    )]
    Incomplete {
        /// The provider.
        provider: &'static str,
        /// How many events were read.
        events: usize,
        /// The final event that did not come.
        expected: &'static str,
    },
    /// The assembled response could not be read (see [`ResponseError`]).
    #[error(transparent)]
    Response(#[from] ResponseError),
}

impl StreamError {
    /// The OpenArmature llm-provider error category: `provider_rate_limit`,
    /// `provider_unavailable`, `provider_authentication` or `provider_invalid_request` for a
    /// provider's error of that kind, `provider_invalid_response` for everything else.
    ///
    /// ```
    /// use agentstate::providers::stream::{Accumulator, AnthropicStream};
    ///
    /// let mut stream = AnthropicStream::new(None);
    /// let err = stream.push_event("error",
    ///     r#"{"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}"#,
    ///     &mut Vec::new()).unwrap_err();
    /// assert_eq!(err.category(), "provider_unavailable");
    /// assert_eq!(err.to_string(), "the Anthropic stream failed at event 1: overloaded_error: Overloaded");
    /// ```
    pub fn category(&self) -> &'static str {
        match self {
            StreamError::Provider { code, .. } => {
                let code = code.to_ascii_lowercase();
                if code.contains("rate_limit") || code == "429" || code == "resource_exhausted" {
                    "provider_rate_limit"
                } else if code.contains("overloaded")
                    || code == "api_error"
                    || code == "server_error"
                    || code == "unavailable"
                    || code == "internal"
                    || code.starts_with('5')
                {
                    "provider_unavailable"
                } else if code.contains("authentication")
                    || code.contains("permission")
                    || code == "401"
                    || code == "403"
                {
                    "provider_authentication"
                } else if code.contains("invalid_request") || code == "400" {
                    "provider_invalid_request"
                } else {
                    "provider_invalid_response"
                }
            }
            _ => "provider_invalid_response",
        }
    }
}

/// What every provider's accumulator does: take events, yield deltas, give the message.
pub trait Accumulator {
    /// The provider's name in errors, e.g. `OpenAI Chat`.
    const PROVIDER: &'static str;

    /// Reads one event: its SSE type (`message` when it has none) and its data. Deltas it
    /// completes are appended to `deltas`.
    fn push_event(
        &mut self,
        event: &str,
        data: &str,
        deltas: &mut Vec<Delta>,
    ) -> Result<(), StreamError>;

    /// The finished message, with the report of what it could not keep: what the `from_*`
    /// function gives for the same answer. An error when the stream stopped before its final
    /// event.
    fn finish(self) -> Result<ParsedResponse, StreamError>;
}

/// An accumulator fed with bytes: server-sent events decoded from chunks split anywhere.
#[derive(Debug, Clone)]
pub struct Sse<A> {
    decoder: sse::SseDecoder,
    accumulator: A,
}

impl<A: Accumulator> Sse<A> {
    /// Reads the server-sent events of `accumulator`'s provider.
    pub fn new(accumulator: A) -> Self {
        Sse {
            decoder: sse::SseDecoder::new(),
            accumulator,
        }
    }

    /// Reads a chunk of the response body; deltas it completes are appended to `deltas`.
    pub fn push(&mut self, bytes: &[u8], deltas: &mut Vec<Delta>) -> Result<(), StreamError> {
        let accumulator = &mut self.accumulator;
        self.decoder.push(bytes, &mut |event: &str, data: &str| {
            accumulator.push_event(event, data, deltas)
        })
    }

    /// The accumulator.
    pub fn accumulator(&self) -> &A {
        &self.accumulator
    }

    /// The finished message (see [`Accumulator::finish`]).
    pub fn finish(self) -> Result<ParsedResponse, StreamError> {
        self.accumulator.finish()
    }
}

/// The counter and names every accumulator uses to name an event in its errors, and the id
/// of the message being streamed.
#[derive(Debug, Clone, Default)]
struct Events {
    /// Events read so far (the current one's number).
    count: usize,
    /// The message's id, made when the first delta needs it (or at the end).
    message_id: Option<String>,
    /// The types of the events skipped as unknown, each once.
    unknown: Vec<String>,
}

impl Events {
    /// The id of the message being streamed: a fresh uuid, the same for every delta and the
    /// final message (the provider's response id goes to its metadata, as the `from_*`
    /// functions put it).
    fn message_id(&mut self) -> String {
        self.message_id
            .get_or_insert_with(|| MessageId::generate().to_string())
            .clone()
    }

    /// Skips an event of a type this version does not know, to note it at the end (once per
    /// type).
    fn skip_unknown(&mut self, event: &str) {
        if !self.unknown.iter().any(|e| e == event) {
            self.unknown.push(event.to_owned());
        }
    }

    /// The finished message, given the id its deltas carried, with a note for each type of
    /// event skipped as unknown.
    fn stamp(mut self, mut parsed: ParsedResponse) -> ParsedResponse {
        parsed.message.message_id = self.message_id().into();
        for event in self.unknown {
            parsed
                .report
                .push(None, None, Issue::UnknownEvent { event }, Action::Dropped);
        }
        parsed
    }

    fn malformed(
        &self,
        provider: &'static str,
        name: &str,
        reason: impl fmt::Display,
    ) -> StreamError {
        StreamError::Malformed {
            provider,
            event: self.count,
            name: name.to_owned(),
            reason: reason.to_string(),
        }
    }

    fn provider_error(
        &self,
        provider: &'static str,
        code: impl Into<String>,
        message: impl Into<String>,
    ) -> StreamError {
        StreamError::Provider {
            provider,
            event: self.count,
            code: code.into(),
            message: message.into(),
        }
    }
}

/// The code and message of a provider's error object (`{"type"|"code"|"status", "message"}`).
fn error_parts(error: Option<&serde_json::Value>) -> (String, String) {
    let Some(error) = error else {
        return ("error".into(), "no details".into());
    };
    let code = ["type", "code", "status"]
        .iter()
        .find_map(|key| match error.get(key) {
            Some(serde_json::Value::String(s)) => Some(s.clone()),
            Some(serde_json::Value::Number(n)) => Some(n.to_string()),
            _ => None,
        })
        .unwrap_or_else(|| "error".into());
    let message = error
        .get("message")
        .and_then(serde_json::Value::as_str)
        .unwrap_or("no message")
        .to_owned();
    (code, message)
}

#[cfg(feature = "ag-ui")]
pub use agui::AguiDeltas;

#[cfg(feature = "ag-ui")]
mod agui {
    use super::Delta;
    use crate::agui::{
        Event, ReasoningMessageContentEvent, ReasoningMessageEndEvent, ReasoningMessageStartEvent,
    };

    /// Turns [`Delta`]s into AG-UI events: a message's first text delta opens it
    /// (`TEXT_MESSAGE_START`) and each gives a `TEXT_MESSAGE_CONTENT`; a call's first delta
    /// gives `TOOL_CALL_START` (with the message as parent) and each a `TOOL_CALL_ARGS`;
    /// reasoning gives `REASONING_MESSAGE_*` events under the id `{message_id}.reasoning`.
    /// Opening one closes the one open before it (`..._END`), and [`AguiDeltas::end`] closes
    /// the last.
    ///
    /// ```
    /// use agentstate::agui::Event;
    /// use agentstate::providers::stream::{AguiDeltas, Delta};
    ///
    /// let mut agui = AguiDeltas::default();
    /// let mut events = Vec::new();
    /// agui.push(&Delta::Text { message_id: "m1".into(), delta: "Let me look.".into() }, &mut events);
    /// agui.push(&Delta::ToolCall { message_id: "m1".into(), tool_call_id: "c1".into(),
    ///                              name: "search".into(), delta: "{}".into() }, &mut events);
    /// agui.end(&mut events);
    /// let types: Vec<&str> = events.iter().map(Event::event_type).collect();
    /// assert_eq!(types, ["TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END",
    ///                    "TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_END"]);
    /// ```
    #[derive(Debug, Clone, Default)]
    pub struct AguiDeltas {
        open: Option<Open>,
    }

    #[derive(Debug, Clone, PartialEq, Eq)]
    enum Open {
        Text(String),
        Reasoning(String),
        ToolCall(String),
    }

    impl AguiDeltas {
        /// Appends the events of one delta to `out`.
        pub fn push(&mut self, delta: &Delta, out: &mut Vec<Event>) {
            match delta {
                Delta::Text { message_id, delta } => {
                    self.open(Open::Text(message_id.clone()), None, out);
                    out.push(Event::text_content(message_id, delta));
                }
                Delta::Reasoning { message_id, delta } => {
                    let id = format!("{message_id}.reasoning");
                    self.open(Open::Reasoning(id.clone()), None, out);
                    out.push(Event::ReasoningMessageContent(
                        ReasoningMessageContentEvent {
                            message_id: id,
                            delta: delta.clone(),
                            base: Default::default(),
                        },
                    ));
                }
                Delta::ToolCall {
                    message_id,
                    tool_call_id,
                    name,
                    delta,
                } => {
                    self.open(
                        Open::ToolCall(tool_call_id.clone()),
                        Some((name, message_id)),
                        out,
                    );
                    if !delta.is_empty() {
                        out.push(Event::tool_args(tool_call_id, delta));
                    }
                }
            }
        }

        /// Closes what is open (at the end of the stream).
        pub fn end(&mut self, out: &mut Vec<Event>) {
            match self.open.take() {
                Some(Open::Text(id)) => out.push(Event::text_end(id)),
                Some(Open::Reasoning(id)) => {
                    out.push(Event::ReasoningMessageEnd(ReasoningMessageEndEvent {
                        message_id: id,
                        base: Default::default(),
                    }))
                }
                Some(Open::ToolCall(id)) => out.push(Event::tool_end(id)),
                None => {}
            }
        }

        fn open(&mut self, open: Open, call: Option<(&String, &String)>, out: &mut Vec<Event>) {
            if self.open.as_ref() == Some(&open) {
                return;
            }
            self.end(out);
            match &open {
                Open::Text(id) => out.push(Event::text_start(id)),
                Open::Reasoning(id) => {
                    out.push(Event::ReasoningMessageStart(ReasoningMessageStartEvent {
                        message_id: id.clone(),
                        role: "reasoning".into(),
                        base: Default::default(),
                    }))
                }
                Open::ToolCall(id) => {
                    let (name, parent) =
                        call.map_or((String::new(), None), |(n, p)| (n.clone(), Some(p.clone())));
                    out.push(Event::tool_start(id, name, parent));
                }
            }
            self.open = Some(open);
        }
    }
}
