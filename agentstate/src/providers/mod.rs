//! Provider request formats: a conversation of [`Message`]s into the request body of OpenAI
//! Chat Completions, OpenAI Responses, Anthropic Messages and Gemini `generateContent`, and a
//! provider's (non-streaming) response body back into a [`Message`], with a report of what
//! the message cannot keep (a web search call, a server tool's result...).
//!
//! A whole request is a [`ModelRequest`] (model, tools, tool choice, structured
//! output, sampling, maximum output tokens, reasoning, prompt-cache breakpoints) converted with
//! the conversation by [`ModelRequest::to_openai_chat`], [`to_openai_responses`](ModelRequest::to_openai_responses),
//! [`to_anthropic`](ModelRequest::to_anthropic) or [`to_gemini`](ModelRequest::to_gemini)
//! into the provider's typed body, ready to serialize and send; a parameter the provider
//! lacks is refused with a [`RequestError`], not dropped. The `to_*` functions of each module
//! convert the conversation alone (its `messages`, `input` or `contents` and system prompt).
//!
//! Both return a [`Converted`]: the body and a [`Report`] that lists, with message and block
//! indices, everything the provider could not take as it was and what was done with it.
//! Nothing is dropped without a note. The same request and messages always give the same
//! bytes (provider prompt caches depend on it).
//!
//! The rules every converter follows:
//! - System messages go where the provider wants them (OpenAI Chat: in place; Responses:
//!   `instructions`; Anthropic: `system`; Gemini: `system_instruction`); except for OpenAI
//!   Chat, one met after the conversation started is moved there with a note.
//! - The `context_summary` (AgentFlow's `AgentState.context_summary`) goes into the system
//!   prompt, after the leading system messages: never as an assistant message, which
//!   Anthropic would take as a prefill.
//! - A tool call is read from `tools_calls` and from `tool_call`/`remote_tool_call` blocks (a
//!   block and the `tools_calls` entry of its id are one call); arguments are a JSON string for OpenAI and an object for Anthropic
//!   and Gemini, and invalid argument JSON is noted. Tool calls and results are paired by id
//!   and every unanswered call or unmatched result is noted.
//! - Consecutive tool results become one user turn for Anthropic and Gemini.
//! - A tool result whose output is a list of content blocks (text and media, as a tool that
//!   returns an image gives it) is sent as what the provider takes: Anthropic `tool_result`
//!   content blocks (text, image, document), a Gemini `function_response` with the text as
//!   its result and the media as its `parts`, a Responses `function_call_output` list of
//!   `input_text`/`input_image`/`input_file`; OpenAI Chat's tool messages are text only, so
//!   the media moves to a user message after the turn's tool results, with a note. Any other
//!   output is sent as its text (a JSON value as Python's `json.dumps` writes it), but for
//!   Gemini, whose function response is a JSON object: a JSON value other than a string goes
//!   as its value (an object as the `response` itself, another value under `result`).
//! - Tool call ids Anthropic does not accept are rewritten, consistently and both ways
//!   ([`ToolIds`]).
//! - Reasoning (and its signature) goes back only to the provider that made it (recorded in
//!   [`ReasoningBlock::extra`]`["provider"]` by the `from_*` functions); elsewhere it is
//!   dropped with a note.
//!
//! # Where we differ from AgentFlow
//!
//! `tests/providers_differential.rs` compares the four bodies with what AgentFlow 0.10.1's own
//! builders produce (`utils/converter.py`, then its Anthropic `split_system`,
//! `merge_tool_results`, `drop_trailing_assistant`, its Gemini `_convert_to_google_format` and
//! its Responses call) for the 20 real AgentFlow messages (alone and together), 60 random
//! conversations and 4 hand-written ones; `tests/data/providers_agentflow.py` wrote the
//! expectations (`tests/data/providers_agentflow.json`), so CI needs no Python. 267 of the 340
//! bodies are equal; the others run into one of these deliberate differences, each named in
//! the test by its reason:
//!
//! - `remote_tool_call`: AgentFlow drops every message holding a `remote_tool_call` block,
//!   text and call. We send the call as a tool call.
//! - `document`: AgentFlow sends a document's excerpt instead of the document, or a
//!   `document` part OpenAI Chat rejects. We send the document (a `file` part, a `document`
//!   source, inline data), or its text when the provider has no way to take it.
//! - `video`: AgentFlow sends OpenAI Chat a `video` part, which Chat rejects, and downloads it
//!   for Gemini. We send a `[Video: ref]` text with a note to OpenAI and a `file_data` part to
//!   Gemini.
//! - `empty_message` (Anthropic, Gemini): AgentFlow sends an empty text, which both reject. We
//!   drop the message with a note.
//! - `responses_audio`: AgentFlow sends Responses a flattened `input_audio` part that the API
//!   does not define. We drop it with a note.
//! - `gemini_media_url`: AgentFlow downloads http(s) images and media while building the
//!   request (in the differential, with the network cut, it sends `[Failed to load image]`),
//!   and sends audio by URL as `[Audio: ref]`. We never touch the network: the URI goes in a
//!   `file_data` part.
//! - `gemini_data`: a `data` block goes to Gemini as `inline_data`; AgentFlow sends an empty
//!   text.
//! - `file_id`: media by file id. AgentFlow puts an image's file id where a URL goes (OpenAI's
//!   `image_url`, Anthropic's `url` source) and tries to download it for Gemini; it sends a
//!   document by file id as a `[Document file_id: ...]` text. We send Anthropic images and
//!   documents by file id as a `{"type": "file", "file_id"}` source and Gemini any media by
//!   file id as `file_data.file_uri`, reported as refused when the id is not a URI (Gemini
//!   takes only an uploaded file's `uri`); OpenAI gets no image by file id (dropped, noted).
//! - `user_after_tool_results` (Anthropic, Gemini): a user message right after tool results
//!   joins their user turn (results first). AgentFlow sends it as a second user turn.
//! - `tool_output_blocks`: a tool result whose output is content blocks (text and an image) is
//!   sent as what each provider takes (see the rules above). AgentFlow sends the blocks' JSON
//!   text, base64 and all.
//! - `anthropic_tool_id`: a tool call id Anthropic does not accept (`functions.get_weather:0`)
//!   is rewritten ([`ToolIds`]). AgentFlow sends it unchanged, which Anthropic refuses.
//!
//! Four more are normalised away before comparing, so the rest of those bodies is still
//! compared: Anthropic `tool_result` blocks carry `is_error` (AgentFlow reads it from a key its
//! own dicts never have, so never sends it); Gemini function calls and responses carry the
//! call `id` (pairing parallel calls of one function) and a failed result under `error`
//! (Gemini's documented key; AgentFlow: `result`); a Gemini result that is JSON other than a
//! string goes as that value (AgentFlow: its JSON text under `result`); Responses `input_image` parts carry
//! `"detail": "auto"` (the official SDK's type requires it; AgentFlow leaves it out). Outside
//! the differential's reach, we also differ where AgentFlow loses data: the `context_summary`
//! goes into the system prompt (AgentFlow: an assistant message, which Anthropic takes as a
//! prefill); reasoning and signatures go back to the provider that made them (AgentFlow has no
//! field for them); tool results in a user message become tool messages before it (AgentFlow
//! folds them into the user's text); a tool message with several results gives one result
//! each (AgentFlow: the first call id with all outputs); media beside a tool result is moved
//! or kept (AgentFlow drops it); a refusal read from a response goes back to OpenAI Chat as
//! `refusal` (AgentFlow: as text); an empty conversation (or one of only system messages) is
//! reported as refused (AgentFlow sends it without a word).
//!
//! Every body of those conversations, and of 500 random ones, is valid for the official SDKs'
//! request types (`openai`, `anthropic`, `google-genai`; `tests/providers_sdk_types.rs`, when
//! `AGENTSTATE_SDK_PYTHON` names a Python with them, as `.ci/run` sets it), and the OpenAI ones
//! also deserialize into `async-openai`'s (`tests/providers_openai_types.rs`).
//!
//! Message envelope fields no provider request has (`message_id`, `timestamp`, `metadata`,
//! `usages`, `raw`, `parsed_content`, `delta`), media details (`alt_text`, `bbox`, sizes,
//! hashes) and a duplicate `Message::reasoning` string beside reasoning blocks are not
//! noted.
//!
//! ```
//! use agentstate::message::{Message, Role, ToolCall};
//! use agentstate::providers::anthropic::to_anthropic;
//! use serde_json::json;
//!
//! let messages = vec![
//!     Message::text_message("Be brief.", Role::System),
//!     Message::text_message("Weather in Paris?", Role::User),
//!     Message::text_message("", Role::Assistant)
//!         .with_tool_calls(vec![ToolCall::new("call_1", "get_weather", json!({"city": "Paris"}))]),
//!     Message::tool_result("call_1", "Sunny"),
//! ];
//! let converted = to_anthropic(&messages, None);
//! assert!(converted.report.is_empty(), "{}", converted.report);
//! let body = converted.request;
//! assert_eq!(body["system"], json!([{"type": "text", "text": "Be brief."}]));
//! assert_eq!(body["messages"][1]["content"][0]["input"], json!({"city": "Paris"}));
//! assert_eq!(body["messages"][2]["content"][0]["tool_use_id"], "call_1");
//! ```
//!
//! ## Where each part of a message goes
//!
//! "noted": with a note in the report.
//!
//! | message part | OpenAI Chat | OpenAI Responses | Anthropic | Gemini |
//! |---|---|---|---|---|
//! | leading `system` messages | `system` messages | `instructions` (joined by newlines) | `system` text blocks | `system_instruction` (joined by newlines) |
//! | a later `system` message | in place | moved to `instructions` (noted) | moved to `system` (noted) | moved to `system_instruction` (noted) |
//! | `context_summary` argument | a `system` message after the leading ones | appended to `instructions` | a `system` block after the leading ones | appended to `system_instruction` |
//! | `text` | string `content` (`text` parts beside media) | string or `input_text` | string or `text` block | `text` part |
//! | text `annotations`, `annotation` and `error` blocks | dropped (noted) | dropped (noted) | dropped (noted) | dropped (noted) |
//! | `image` by URL / inline / file id | `image_url` URL / `data:` URL / dropped (noted) | `input_image` URL / `data:` URL / dropped (noted) | `image` source `url` / `base64` / `file` | `file_data` / `inline_data` / `file_data` |
//! | `audio` inline / by reference | `input_audio` / `[Audio: ref]` text (noted) | dropped (noted) | dropped (noted) / `[Audio: ref]` text (noted) | `inline_data` / `file_data` |
//! | `video` | `[Video: ref]` text (noted) | `[Video: ref]` text (noted) | dropped (noted) | `inline_data` / `file_data` |
//! | `document` inline / file id / URL | `file` part / `file` part / its text, excerpt or `[Document: url]` (noted) | `input_file` / `input_file` / as Chat (noted) | `document` source `base64` / `file` / `url` | `inline_data` / `file_data` / `file_data` |
//! | `data` | dropped (noted) | dropped (noted) | dropped (noted) | `inline_data` |
//! | `reasoning` | dropped (noted) | a `reasoning` item (id, summary, `encrypted_content`) if OpenAI made it, else dropped (noted) | `thinking` (or `redacted_thinking`) with its signature if Anthropic made it, else dropped (noted) | a `thought` part with its `thought_signature` if Gemini made it, else dropped (noted) |
//! | tool calls (`tools_calls`, `tool_call` and `remote_tool_call` blocks, one per id) | `tool_calls`, arguments a JSON string | `function_call` items | `tool_use` blocks, `input` an object | `function_call` parts with `id`, `args` an object |
//! | invalid argument JSON | sent as is (noted) | sent as is (noted) | `{}` (noted) | `{}` (noted) |
//! | a call's `thought_signature` | dropped (noted) | dropped (noted) | dropped (noted) | sent; a turn's first call without one gets Google's placeholder |
//! | a tool result whose output is content blocks | text in the tool message, media moved after the results (noted) | a `function_call_output` list | `tool_result` content blocks | `function_response` with `parts` |
//! | `tool_result` (in a `tool` message) | one `tool` message per result, text | `function_call_output` items | `tool_result` blocks (with `is_error`), all consecutive ones in one user turn | `function_response` parts (`result`, or `error` when failed; a JSON object result as the `response` itself), all in one user turn |
//! | media beside a tool result | moved to a user message after the turn's tool results (noted) | as Chat (noted) | inside the `tool_result` (images, documents) | after the function responses in the same turn (noted) |
//! | `tool_result` in a user message | a `tool` message before the user message | a `function_call_output` before it | first in the user turn | first in the user turn |
//! | a final assistant message | sent | sent | dropped (noted; a user turn when it is the only one) | sent |
//! | a message with nothing to send | sent (`""`) | sent | dropped (noted) | dropped (noted) |
//!
//! The way back, [`from_openai_chat`], [`from_openai_responses`], [`from_anthropic`] and
//! [`from_gemini`], reads a response into a [`ParsedResponse`], an assistant [`Message`] (its
//! `message`) and a report of what it could not keep: text, tool calls (in
//! `tools_calls` with the arguments string as sent, and as `tool_call` blocks), reasoning with
//! its signature, usage (prompt, completion, cached and reasoning tokens), AgentFlow's
//! `metadata` (`provider`, `model`, `finish_reason`), the response's id in
//! `metadata["response_id"]` ([`RESPONSE_ID`]; the message's own id is a fresh uuid) and the
//! whole response as `raw`. A refusal is an `error` block with code [`REFUSAL_CODE`] whichever
//! way the provider says it (OpenAI's `refusal` text, Anthropic's `refusal` stop reason,
//! Gemini's content-filter finish reasons), and citations and search sources (OpenAI's
//! `url_citation`s, Anthropic's web search citations, Gemini's grounding and citation
//! metadata) are the text's annotations. A round
//! trip (message, request, a response built from it, message) keeps text, tool calls, ids and
//! signatures. The OpenAI bodies deserialize into `async-openai`'s request types (a test checks
//! it); with the feature `async-openai`, [`ChatBody`](openai_chat::ChatBody) and
//! [`ResponsesBody`](openai_responses::ResponsesBody) convert into them (`TryFrom`). `cargo run --example providers` prints the four bodies of one conversation.

pub mod anthropic;
pub mod gemini;
pub mod openai_chat;
pub mod openai_responses;
mod report;
mod request;
pub mod stream;
mod strict;
mod tool_ids;

pub use anthropic::{from_anthropic, to_anthropic};
pub use gemini::{from_gemini, to_gemini};
pub use openai_chat::{from_openai_chat, to_openai_chat};
pub use openai_responses::{from_openai_responses, to_openai_responses};
pub use report::{Action, Issue, Note, Report, Severity};
pub use request::{
    CacheAt, CacheBreakpoints, CacheControl, Conversation, Effort, ModelRequest,
    ModelRequestBuilder, OutputError, OutputSchema, RequestError, Sampling, Tool, ToolChoice,
};
pub use tool_ids::ToolIds;

use crate::message::python_json;
use crate::message::{
    AnnotationRef, ContentBlock, ErrorBlock, Json, JsonObject, MediaKind, MediaRef, Message,
    ReasoningBlock, Role, TextBlock, TokenUsages, ToolCall, ToolCallBlock, ToolResultBlock,
};
use serde_json::{Map, Value};
use std::borrow::Cow;

/// A provider's request body and what it could not express, from the `to_*` functions and
/// [`ModelRequest`]'s conversions (the way back, a response read into a message, is a
/// [`ParsedResponse`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Converted<T> {
    /// The request body: `messages`/`input`/`contents` and the system prompt.
    pub request: T,
    /// Everything that could not be expressed, and what was done with it.
    pub report: Report,
    /// The tool call ids rewritten for the provider (Anthropic only; empty when none was):
    /// give them to [`from_anthropic`] to map a response's ids back.
    pub tool_ids: ToolIds,
}

impl<T> Converted<T> {
    /// A conversion without rewritten ids.
    fn new(request: T, report: Report) -> Self {
        Converted {
            request,
            report,
            tool_ids: ToolIds::default(),
        }
    }
}

/// A provider's response read into an assistant message, by the `from_*` functions and the
/// [`stream`] accumulators, with what the message could not keep.
///
/// ```
/// use agentstate::providers::from_openai_chat;
/// use serde_json::json;
///
/// let response = json!({"id": "chatcmpl-1", "model": "gpt-4o",
///     "choices": [{"message": {"role": "assistant", "content": "Hi"}, "finish_reason": "stop"}]});
/// let parsed = from_openai_chat(&response)?;
/// assert!(parsed.report.is_empty());
/// assert_eq!(parsed.message.text(), "Hi");
/// # Ok::<(), agentstate::providers::ResponseError>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct ParsedResponse {
    /// The assistant message.
    pub message: Message,
    /// What the message could not keep (each such part stays in its `raw`).
    pub report: Report,
}

impl ParsedResponse {
    fn new(message: Message, report: Report) -> Self {
        ParsedResponse { message, report }
    }
}

/// The `error` block `code` that marks a model's refusal (OpenAI's `refusal`), as the `from_*`
/// functions read one.
pub const REFUSAL_CODE: &str = "refusal";

/// The text of a refusal block (an `error` block with code [`REFUSAL_CODE`]).
fn refusal_of(block: &ContentBlock) -> Option<&str> {
    match block {
        ContentBlock::Error(e) if e.code.as_deref() == Some(REFUSAL_CODE) => Some(&e.message),
        _ => None,
    }
}

/// A refusal block: `{"type": "error", "message": text, "code": "refusal"}`.
fn refusal_block(text: &str) -> ContentBlock {
    ContentBlock::Error(ErrorBlock {
        code: Some(REFUSAL_CODE.to_owned()),
        ..ErrorBlock::new(text)
    })
}

/// A refusal a provider gives as a stop reason rather than a text (Anthropic's `refusal`,
/// Gemini's `SAFETY`...): a refusal block with the provider's explanation (or `default`) and
/// what the provider said about it as `data`.
fn stop_refusal(
    explanation: Option<&str>,
    default: &str,
    data: Map<String, Value>,
) -> ContentBlock {
    ContentBlock::Error(ErrorBlock {
        code: Some(REFUSAL_CODE.to_owned()),
        data: (!data.is_empty()).then(|| data.into()),
        ..ErrorBlock::new(explanation.filter(|e| !e.is_empty()).unwrap_or(default))
    })
}

/// A refusal sent as assistant text to a provider without refusals in its requests, noted.
fn note_refusal(message: usize, block: usize, report: &mut Report) {
    report.push(
        Some(message),
        Some(block),
        Issue::Refusal,
        Action::SentAsText,
    );
}

/// A response item or block the message has no place for: noted (it stays in `raw`).
fn note_output(item: usize, kind: &str, report: &mut Report) {
    push_output_note(Some(item), kind, report);
}

/// A part of a response the message has no place for (an item, or with `None` a field of the
/// whole response): noted (it stays in `raw`).
fn push_output_note(item: Option<usize>, kind: &str, report: &mut Report) {
    report.push(
        None,
        item,
        Issue::UnsupportedOutput {
            kind: kind.to_owned(),
        },
        Action::KeptInRawOnly,
    );
}

/// A citation with a `url` and a `title` (OpenAI's `url_citation`, Anthropic's
/// `web_search_result_location`) as an annotation of the text; its position in the text is
/// not kept (it is in `raw`).
fn url_annotation(citation: &Value) -> Option<AnnotationRef> {
    source_annotation(citation, "url")
}

/// A source with a URL under `key` and a `title` as an annotation of the text.
fn source_annotation(source: &Value, key: &str) -> Option<AnnotationRef> {
    let url = str_at(source, key)?;
    Some(AnnotationRef {
        title: str_at(source, "title").map(str::to_owned),
        ..AnnotationRef::url(url)
    })
}

/// Notes a request without any message, which the provider refuses.
fn note_empty_conversation(sent: usize, report: &mut Report) {
    if sent == 0 {
        report.push(None, None, Issue::EmptyConversation, Action::SentAsIs);
    }
}

/// A provider, as recorded in a reasoning block's or tool call's `extra["provider"]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Provider {
    /// OpenAI (Chat Completions and Responses): `"openai"`.
    OpenAi,
    /// Anthropic Messages: `"anthropic"`.
    Anthropic,
    /// Google Gemini: `"gemini"`.
    Gemini,
}

impl Provider {
    /// The name recorded in `extra["provider"]`.
    pub fn as_str(self) -> &'static str {
        match self {
            Provider::OpenAi => "openai",
            Provider::Anthropic => "anthropic",
            Provider::Gemini => "gemini",
        }
    }
}

/// A provider response that is not what the provider sends.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cannot read this {provider} response: {reason}")]
pub struct ResponseError {
    provider: &'static str,
    reason: String,
}

impl ResponseError {
    fn new(provider: &'static str, reason: impl Into<String>) -> Self {
        ResponseError {
            provider,
            reason: reason.into(),
        }
    }
}

// ---------------------------------------------------------------------------------------
// The only places that read the message model's provider fields (`extra` maps), so that a
// change of their type touches these lines only.

/// `extra[key]` of a block's provider fields, if a string.
fn extra_str<'a>(extra: &'a Option<Box<Map<String, Value>>>, key: &str) -> Option<&'a str> {
    extra.as_ref()?.get(key)?.as_str()
}

/// Provider fields `{"provider": provider, key: value...}`.
fn provider_extra(provider: Provider, fields: &[(&str, Value)]) -> Option<Box<Map<String, Value>>> {
    let mut map = Map::new();
    map.insert("provider".into(), Value::from(provider.as_str()));
    for (key, value) in fields {
        map.insert((*key).into(), value.clone());
    }
    Some(Box::new(map))
}

/// The provider that made a reasoning block.
fn reasoning_provider(block: &ReasoningBlock) -> Option<&str> {
    extra_str(&block.extra, "provider")
}

/// The OpenAI Responses item id of a reasoning block made by OpenAI.
fn openai_reasoning(block: &ReasoningBlock) -> Option<&str> {
    (reasoning_provider(block) == Some(Provider::OpenAi.as_str()))
        .then(|| extra_str(&block.extra, "id"))
        .flatten()
}

/// A `tools_calls` entry's `thought_signature` (where AgentFlow keeps Gemini's).
fn call_signature(call: &ToolCall) -> Option<Cow<'static, str>> {
    match call.extra.get("thought_signature")? {
        Value::String(signature) => Some(Cow::Owned(signature)),
        _ => None,
    }
}

/// A `tools_calls` entry carrying Gemini's `thought_signature` as AgentFlow does.
fn signed_call(mut call: ToolCall, signature: Option<&str>) -> ToolCall {
    if let Some(signature) = signature {
        call.extra
            .insert("thought_signature", Value::from(signature));
    }
    call
}

// ---------------------------------------------------------------------------------------

/// A tool call of a message, from `tools_calls` or a call block (one per id).
struct Call<'a> {
    id: &'a str,
    name: &'a str,
    args: Args<'a>,
    /// Gemini's `thought_signature` (base64).
    signature: Option<Cow<'a, str>>,
    /// The block's provider fields.
    extra: &'a Option<Box<Map<String, Value>>>,
    /// The block's index in `content`, if the call has a block.
    block: Option<usize>,
}

enum Args<'a> {
    /// OpenAI's JSON string (from `tools_calls`).
    Text(&'a str),
    /// A block's object.
    Object(&'a JsonObject),
}

const NO_EXTRA: &Option<Box<Map<String, Value>>> = &None;

impl<'a> Call<'a> {
    fn from_entry(call: &'a ToolCall, block: Option<(usize, &'a ToolCallBlock)>) -> Self {
        Call {
            id: &call.id,
            name: call.name(),
            args: Args::Text(&call.function.arguments),
            signature: block
                .and_then(|(_, b)| b.signature.as_deref().map(Cow::Borrowed))
                .or_else(|| call_signature(call)),
            extra: block.map_or(NO_EXTRA, |(_, b)| &b.extra),
            block: block.map(|(i, _)| i),
        }
    }

    /// The arguments as a JSON string, for OpenAI; invalid JSON is noted and sent as is.
    fn json_string(&self, message: usize, report: &mut Report) -> Cow<'a, str> {
        match self.args {
            Args::Text(text) => {
                if !text.is_empty() {
                    if let Err(error) = serde_json::from_str::<serde::de::IgnoredAny>(text) {
                        report.push(
                            Some(message),
                            self.block,
                            Issue::InvalidArguments {
                                error: error.to_string(),
                            },
                            Action::SentAsIs,
                        );
                    }
                }
                Cow::Borrowed(text)
            }
            Args::Object(object) => Cow::Borrowed(object.as_json()),
        }
    }

    /// The arguments as an object, for Anthropic and Gemini: invalid JSON or a JSON value
    /// that is not an object is noted and sent as `{}`; an empty string is `{}`.
    fn object(&self, message: usize, report: &mut Report) -> Value {
        match self.args {
            Args::Object(object) => object.to_value(),
            Args::Text(text) if text.trim().is_empty() => Value::Object(Map::new()),
            Args::Text(text) => match serde_json::from_str::<Value>(text) {
                Ok(object @ Value::Object(_)) => object,
                Ok(_) => {
                    report.push(
                        Some(message),
                        self.block,
                        Issue::ArgumentsNotObject,
                        Action::SentAsEmptyObject,
                    );
                    Value::Object(Map::new())
                }
                Err(error) => {
                    report.push(
                        Some(message),
                        self.block,
                        Issue::InvalidArguments {
                            error: error.to_string(),
                        },
                        Action::SentAsEmptyObject,
                    );
                    Value::Object(Map::new())
                }
            },
        }
    }
}

/// The tool calls of a message: its call blocks in content order (each with the first unused
/// `tools_calls` entry of the same id, whose arguments string is the original), then the
/// `tools_calls` entries without a block. Duplicate ids are kept (and noted by
/// [`check_pairing`]).
fn calls_of(message: &Message) -> Vec<Call<'_>> {
    let entries = message.tool_calls();
    let mut calls = Vec::with_capacity(entries.len());
    let mut used = 0u64; // entries matched to a block (the first 64)
    for (index, block) in message.content.iter().enumerate() {
        let (id, name, args, signature, extra) = match block {
            ContentBlock::ToolCall(b) => (
                &b.id,
                &b.name,
                &b.args,
                b.signature.as_deref().map(Cow::Borrowed),
                &b.extra,
            ),
            ContentBlock::RemoteToolCall(b) => (&b.id, &b.name, &b.args, None, NO_EXTRA),
            _ => continue,
        };
        let entry = entries
            .iter()
            .enumerate()
            .find(|(j, e)| e.id == *id && (*j >= 64 || used & (1 << j) == 0));
        match entry {
            Some((j, entry)) => {
                if j < 64 {
                    used |= 1 << j;
                }
                let mut call = Call::from_entry(entry, None);
                call.signature = signature.or(call.signature);
                call.extra = extra;
                call.block = Some(index);
                calls.push(call);
            }
            None => calls.push(Call {
                id,
                name,
                args: Args::Object(args),
                signature,
                extra,
                block: Some(index),
            }),
        }
    }
    for (j, entry) in entries.iter().enumerate() {
        // Entries past the 64th are matched by id (a turn that long is not seen in practice).
        if (j < 64 && used & (1 << j) != 0) || (j >= 64 && calls.iter().any(|c| c.id == entry.id)) {
            continue;
        }
        calls.push(Call::from_entry(entry, None));
    }
    calls
}

/// Notes every unanswered tool call, unmatched tool result and duplicate call id of the
/// conversation. A turn's calls must be answered by the tool messages (or the tool results
/// of the user message) right after it.
fn check_pairing(messages: &[Message], report: &mut Report) {
    let mut open: Vec<(&str, usize, Option<usize>)> = Vec::new();
    let close = |open: &mut Vec<(&str, usize, Option<usize>)>, report: &mut Report| {
        for (id, message, block) in open.drain(..) {
            report.push(
                Some(message),
                block,
                Issue::UnansweredToolCall { id: id.to_owned() },
                Action::SentAsIs,
            );
        }
    };
    for (index, message) in messages.iter().enumerate() {
        match message.role {
            Role::Assistant => {
                close(&mut open, report);
                for call in calls_of(message) {
                    if open.iter().any(|(id, _, _)| *id == call.id) {
                        report.push(
                            Some(index),
                            call.block,
                            Issue::DuplicateToolCallId {
                                id: call.id.to_owned(),
                            },
                            Action::SentAsIs,
                        );
                    } else {
                        open.push((call.id, index, call.block));
                    }
                }
            }
            Role::Tool | Role::User => {
                for (block, content) in message.content.iter().enumerate() {
                    if let ContentBlock::ToolResult(result) = content {
                        match open.iter().position(|(id, _, _)| *id == result.call_id) {
                            Some(at) => {
                                open.remove(at);
                            }
                            None => report.push(
                                Some(index),
                                Some(block),
                                Issue::UnmatchedToolResult {
                                    id: result.call_id.clone(),
                                },
                                Action::SentAsIs,
                            ),
                        }
                    }
                }
                if message.role == Role::User {
                    close(&mut open, report);
                }
            }
            Role::System => {}
        }
    }
    close(&mut open, report);
}

/// Where a media block's bytes are, read as AgentFlow reads a `MediaRef`: by its `kind`,
/// then any reference it has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Source<'a> {
    Url(&'a str),
    Data(&'a str),
    FileId(&'a str),
    Missing,
}

fn source(media: &MediaRef) -> Source<'_> {
    let (url, file_id, data) = (
        media.url.as_deref().filter(|s| !s.is_empty()),
        media.file_id.as_deref().filter(|s| !s.is_empty()),
        media.data_base64.as_deref().filter(|s| !s.is_empty()),
    );
    match (media.kind, url, file_id, data) {
        (MediaKind::Data, _, _, Some(data)) => Source::Data(data),
        (MediaKind::Url, Some(url), _, _) => Source::Url(url),
        (MediaKind::FileId, _, Some(id), _) => Source::FileId(id),
        (_, Some(url), _, _) => Source::Url(url),
        (_, _, Some(id), _) => Source::FileId(id),
        (_, _, _, Some(data)) => Source::Data(data),
        _ => Source::Missing,
    }
}

/// `data:{mime};base64,{data}`.
fn data_url(mime: &str, data: &str) -> String {
    let mut url = String::with_capacity(data.len() + mime.len() + 13);
    url.push_str("data:");
    url.push_str(mime);
    url.push_str(";base64,");
    url.push_str(data);
    url
}

/// The MIME type and base64 payload of a `data:<mime>;base64,<payload>` URL.
fn parse_data_url(url: &str) -> Option<(&str, &str)> {
    let rest = url.strip_prefix("data:")?;
    let (header, payload) = rest.split_once(',')?;
    let mime = header.strip_suffix(";base64")?;
    Some((
        if mime.is_empty() {
            "application/octet-stream"
        } else {
            mime
        },
        payload,
    ))
}

/// A tool result's output as text: a string as is, anything else as Python's `json.dumps`
/// writes it (AgentFlow's `Message.text()`).
fn output_text(output: &Json) -> Cow<'static, str> {
    Cow::Owned(match output.as_string() {
        Some(text) => text,
        None => python_json::text_to_string(output.as_json()),
    })
}

/// A tool result's output when it is a list of content blocks of text and media (`text`,
/// `image`, `audio`, `video`, `document`, `data`), as a tool that returns an image gives it;
/// `None` for any other output, which is sent as its text.
fn output_blocks(output: &Json) -> Option<Vec<ContentBlock>> {
    if !output.as_json().starts_with('[') {
        return None;
    }
    let blocks: Vec<ContentBlock> = serde_json::from_str(output.as_json()).ok()?;
    let content = |b: &ContentBlock| {
        matches!(
            b,
            ContentBlock::Text(_)
                | ContentBlock::Image(_)
                | ContentBlock::Audio(_)
                | ContentBlock::Video(_)
                | ContentBlock::Document(_)
                | ContentBlock::Data(_)
        )
    };
    (!blocks.is_empty() && blocks.iter().all(content)).then_some(blocks)
}

/// The text of content blocks: their text blocks' texts, concatenated (as AgentFlow's
/// `Message.text()` joins a message's).
fn blocks_text(blocks: &[ContentBlock]) -> String {
    blocks
        .iter()
        .filter_map(|b| match b {
            ContentBlock::Text(t) => Some(t.text.as_str()),
            _ => None,
        })
        .collect()
}

/// The text AgentFlow's converters put for media they cannot send.
fn placeholder(kind: &str, media: &MediaRef) -> String {
    let label = match kind {
        "audio" => "Audio",
        "video" => "Video",
        "document" => "Document",
        _ => "Media",
    };
    let reference = media
        .url
        .as_deref()
        .or(media.file_id.as_deref())
        .unwrap_or("unknown");
    format!("[{label}: {reference}]")
}

/// Notes a text block's citations, which no request takes.
fn note_annotations(text: &TextBlock, message: usize, block: usize, report: &mut Report) {
    if !text.annotations.is_empty() {
        report.push(
            Some(message),
            Some(block),
            Issue::Annotations,
            Action::Dropped,
        );
    }
}

/// Notes reasoning that `provider` cannot take back, dropped.
fn note_reasoning(block: &ReasoningBlock, message: usize, index: usize, report: &mut Report) {
    report.push(
        Some(message),
        Some(index),
        Issue::Reasoning {
            from: reasoning_provider(block).map(str::to_owned),
        },
        Action::Dropped,
    );
}

/// Notes a message's `reasoning` string when no reasoning block holds it (none of the
/// providers takes reasoning without its signature), dropped.
fn note_reasoning_string(message: &Message, index: usize, report: &mut Report) {
    let blocks = message
        .content
        .iter()
        .any(|b| matches!(b, ContentBlock::Reasoning(_)));
    if !blocks && message.reasoning.as_deref().is_some_and(|r| !r.is_empty()) {
        report.push(
            Some(index),
            None,
            Issue::Reasoning { from: None },
            Action::Dropped,
        );
    }
}

/// Notes the blocks no provider request has in any message: `annotation` and `error`.
fn note_dropped(kind: &'static str, message: usize, block: usize, report: &mut Report) {
    report.push(
        Some(message),
        Some(block),
        Issue::UnsupportedBlock { kind },
        Action::Dropped,
    );
}

/// Whether a `tools_calls` entry or a call block carries a signature that `provider` would
/// not take, noted as dropped.
fn note_signature(call: &Call<'_>, message: usize, report: &mut Report) {
    if call.signature.is_some() {
        report.push(Some(message), call.block, Issue::Signature, Action::Dropped);
    }
}

/// Whether a block is a tool call (`tool_call` or `remote_tool_call`).
fn is_call(block: &ContentBlock) -> bool {
    matches!(
        block,
        ContentBlock::ToolCall(_) | ContentBlock::RemoteToolCall(_)
    )
}

/// The number of system messages the conversation starts with.
fn leading_system(messages: &[Message]) -> usize {
    messages
        .iter()
        .take_while(|m| m.role == Role::System)
        .count()
}

/// Notes a system message after the leading ones, moved into the system prompt.
fn note_system_moved(index: usize, leading: usize, report: &mut Report) {
    if index > leading {
        report.push(
            Some(index),
            None,
            Issue::SystemInConversation,
            Action::MovedToSystem,
        );
    }
}

/// The first item of the list at `key` of a response.
fn first<'a>(response: &'a Value, key: &str) -> Option<&'a Value> {
    response.get(key)?.as_array()?.first()
}

/// The media of an image, audio, video or document block.
fn media_of(block: &ContentBlock) -> Option<&MediaRef> {
    match block {
        ContentBlock::Image(b) => Some(&b.media),
        ContentBlock::Audio(b) => Some(&b.media),
        ContentBlock::Video(b) => Some(&b.media),
        ContentBlock::Document(b) => Some(&b.media),
        _ => None,
    }
}

/// A tool result inside an assistant or system message: noted, and sent as its text (as
/// AgentFlow's `Message.text()` has it).
fn out_of_place<'a>(
    result: &'a ToolResultBlock,
    message: usize,
    block: usize,
    report: &mut Report,
) -> Cow<'a, str> {
    report.push(
        Some(message),
        Some(block),
        Issue::ToolResultOutOfPlace,
        Action::SentAsText,
    );
    output_text(&result.output)
}

/// Notes a failed result's `is_error` flag, which OpenAI cannot carry.
fn note_error_flag(result: &ToolResultBlock, message: usize, block: usize, report: &mut Report) {
    if result.is_error {
        report.push(
            Some(message),
            Some(block),
            Issue::ToolResultErrorFlag,
            Action::Dropped,
        );
    }
}

/// The text of a system message, for a provider whose system prompt is text only; other
/// blocks are noted.
fn system_text(message: &Message, index: usize, report: &mut Report) -> String {
    let mut text = String::new();
    for (block, content) in message.content.iter().enumerate() {
        match content {
            ContentBlock::Text(t) => {
                note_annotations(t, index, block, report);
                text.push_str(&t.text);
            }
            ContentBlock::ToolResult(result) => {
                text.push_str(&out_of_place(result, index, block, report));
            }
            ContentBlock::Reasoning(r) => note_reasoning(r, index, block, report),
            other => report.push(
                Some(index),
                Some(block),
                Issue::SystemNonText { kind: other.kind() },
                Action::Dropped,
            ),
        }
    }
    text
}

/// Token usage in OpenAI's shape (Chat's `prompt_tokens`... or Responses' `input_tokens`...):
/// `keys` are the prompt and completion counts' names, `details` their details objects'.
fn openai_usage(response: &Value, keys: [&str; 2], details: [&str; 2]) -> Option<TokenUsages> {
    let usage = response.get("usage").filter(|u| u.is_object())?;
    Some(usages(
        count(usage, &[keys[0]]),
        count(usage, &[keys[1]]),
        usage.get("total_tokens").and_then(Value::as_i64),
        count(usage, &[details[0], "cached_tokens"]),
        count(usage, &[details[1], "reasoning_tokens"]),
    ))
}

/// Whether a message has media blocks (image, audio, video, document), which make AgentFlow
/// send its content as parts rather than one text.
fn has_media(message: &Message) -> bool {
    message.content.iter().any(|b| media_of(b).is_some())
}

/// Token usage from the counts a provider reports.
fn usages(
    prompt: i64,
    completion: i64,
    total: Option<i64>,
    cached: i64,
    reasoning: i64,
) -> TokenUsages {
    TokenUsages {
        total_tokens: total.unwrap_or(prompt.saturating_add(completion)),
        reasoning_tokens: reasoning,
        cache_read_input_tokens: cached,
        ..TokenUsages::new(completion, prompt)
    }
}

/// An integer at `path` in a response, 0 when absent.
fn count(value: &Value, path: &[&str]) -> i64 {
    let mut at = value;
    for key in path {
        match at.get(key) {
            Some(next) => at = next,
            None => return 0,
        }
    }
    at.as_i64().unwrap_or(0)
}

/// A string at `key`, if any.
fn str_at<'a>(value: &'a Value, key: &str) -> Option<&'a str> {
    value.get(key).and_then(Value::as_str)
}

/// What a provider's response says about itself.
struct Reply<'a> {
    /// AgentFlow's `metadata["provider"]`.
    provider: &'static str,
    id: Option<&'a str>,
    model: Option<&'a str>,
    finish_reason: Option<&'a str>,
    usage: Option<TokenUsages>,
    /// When the provider made the response, in seconds (the message's timestamp; now without).
    created: Option<f64>,
}

/// The `metadata` key under which the `from_*` functions and the stream accumulators keep the
/// provider's response id (Chat's and Responses' `id`, Anthropic's message `id`, Gemini's
/// `responseId`), when the response has one. The message's own `message_id` is a fresh uuid:
/// a server that repeats response ids would otherwise give two answers one id, and
/// [`add_messages`](crate::reducers::add_messages) keeps only the first.
///
/// ```
/// use agentstate::providers::{from_anthropic, RESPONSE_ID};
/// use serde_json::json;
///
/// let response = json!({"id": "msg_1", "content": [{"type": "text", "text": "Hi"}]});
/// let first = from_anthropic(&response, None)?.message;
/// let again = from_anthropic(&response, None)?.message;
/// assert_eq!(first.metadata.get(RESPONSE_ID), Some("msg_1".into()));
/// assert_ne!(first.message_id, again.message_id);
/// # Ok::<(), agentstate::providers::ResponseError>(())
/// ```
pub const RESPONSE_ID: &str = "response_id";

/// An assistant message from a provider's response: these blocks and calls, a fresh
/// `message_id`, the response's id in `metadata[RESPONSE_ID]`, its creation time as
/// `timestamp`, `metadata` as AgentFlow's converters write it (`provider`, `model`,
/// `finish_reason`) and the whole response as `raw`.
fn response_message(
    response: &Value,
    content: Vec<ContentBlock>,
    calls: Vec<ToolCall>,
    reply: Reply<'_>,
) -> Message {
    let Reply {
        provider,
        id,
        model,
        finish_reason,
        usage,
        created,
    } = reply;
    let mut message = Message::new(Role::Assistant, content);
    if !calls.is_empty() {
        message.tools_calls = Some(calls);
    }
    let reasoning: Vec<&str> = message
        .content
        .iter()
        .filter_map(|b| match b {
            ContentBlock::Reasoning(r) if !r.summary.is_empty() => Some(r.summary.as_str()),
            _ => None,
        })
        .collect();
    if !reasoning.is_empty() {
        message.reasoning = Some(reasoning.join("\n"));
    }
    message = message
        .with_metadata("provider", provider)
        .with_metadata("model", model.unwrap_or_default())
        .with_metadata("finish_reason", finish_reason.unwrap_or("UNKNOWN"));
    if let Some(id) = id {
        message = message.with_metadata(RESPONSE_ID, id);
    }
    message.usages = usage.map(Box::new);
    if let Some(created) = created {
        message = message.with_timestamp(created);
    }
    if let Value::Object(raw) = response {
        message = message.with_raw(raw.clone());
    }
    message
}
