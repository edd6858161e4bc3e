//! Google Gemini (`generateContent`): messages to the request's `system_instruction` and
//! `contents`, and a `GenerateContentResponse` back to a [`Message`].
//!
//! Field names are the API's proto names (`system_instruction`, `function_call`,
//! `inline_data`...), which the REST API takes as the camelCase ones. System messages join
//! `system_instruction`'s text (the `context_summary` after the leading ones). Tool results
//! are `function_response` parts, all consecutive ones in one user turn, named after their
//! call and carrying its id. Tool calls are `function_call` parts with their arguments as an
//! object and their `thought_signature`; the first call of a turn without one gets Google's
//! documented placeholder (`skip_thought_signature_validator`), as AgentFlow sends it.
//! Thoughts made by Gemini go back as `thought` parts with their signature; other reasoning
//! is dropped with a note.

use super::report::{Action, Issue, Report};
use super::request::{Conversation, ModelRequest, Param, RequestError, ToolChoice};
use super::{
    blocks_text, calls_of, check_pairing, first, has_media, is_call, leading_system,
    note_annotations, note_dropped, note_reasoning, note_reasoning_string, note_signature,
    note_system_moved, out_of_place, output_blocks, output_text, parse_data_url, provider_extra,
    reasoning_provider, response_message, signed_call, source, system_text, Converted,
    ParsedResponse, Provider, Reply, ResponseError, Source,
};
use crate::message::{
    AnnotationRef, ContentBlock, MediaRef, Message, ReasoningBlock, Role, ToolCall, ToolCallBlock,
    ToolResultBlock,
};
use serde::Serialize;
use serde_json::{Map, Value};
use std::borrow::Cow;
use std::collections::HashMap;

/// Google's documented placeholder signature, base64 (`skip_thought_signature_validator`).
const SKIP_SIGNATURE: &str = "c2tpcF90aG91Z2h0X3NpZ25hdHVyZV92YWxpZGF0b3I=";

/// Converts a conversation to a Gemini request's `system_instruction` and `contents`.
///
/// The `context_summary` joins `system_instruction`'s text, after the leading system
/// messages.
///
/// ```
/// use agentstate::message::{Message, Role, ToolCall};
/// use agentstate::providers::gemini::to_gemini;
/// use serde_json::json;
///
/// let messages = vec![
///     Message::text_message("Weather in Paris and Rome?", Role::User),
///     Message::text_message("", Role::Assistant).with_tool_calls(vec![
///         ToolCall::new("c1", "get_weather", json!({"city": "Paris"})),
///         ToolCall::new("c2", "get_weather", json!({"city": "Rome"})),
///     ]),
///     Message::tool_result("c1", "Sunny"),
///     Message::tool_result("c2", "Rain"),
/// ];
/// let body = to_gemini(&messages, None).request;
/// assert_eq!(body["contents"][1]["parts"][1]["function_call"]["args"], json!({"city": "Rome"}));
/// // Both results in one user turn.
/// let results = &body["contents"][2];
/// assert_eq!(results["role"], "user");
/// assert_eq!(results["parts"][1]["function_response"],
///     json!({"id": "c2", "name": "get_weather", "response": {"result": "Rain"}}));
/// ```
pub fn to_gemini(messages: &[Message], context_summary: Option<&str>) -> Converted<Value> {
    let (contents, system, report) = conversation(messages, context_summary);
    let mut request = Map::new();
    request.insert("contents".into(), to_value(&contents));
    if let Some(system) = system {
        request.insert("system_instruction".into(), to_value(&system));
    }
    Converted::new(Value::Object(request), report)
}

/// A typed part of a body as a JSON value (serializing these types cannot fail).
fn to_value<T: Serialize>(part: &T) -> Value {
    serde_json::to_value(part).unwrap_or_default()
}

/// A turn: `{"role": "user" | "model", "parts"}`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GeminiContent<'a> {
    /// `"user"` or `"model"`.
    pub role: &'static str,
    /// The parts.
    pub parts: Vec<GeminiPart<'a>>,
}

/// The system prompt: `{"parts": [{"text"}]}`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SystemInstruction<'a> {
    /// One text part.
    pub parts: Vec<GeminiPart<'a>>,
}

/// A part: one of `text` (with `thought` for a thought), `inline_data`, `file_data`,
/// `function_call` and `function_response`, and a `thought_signature`.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct GeminiPart<'a> {
    /// Text (or a thought's summary).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub text: Option<Cow<'a, str>>,
    /// `true` for a thought.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub thought: bool,
    /// Bytes: `{"mime_type", "data"}`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub inline_data: Option<Blob<'a>>,
    /// A file: `{"mime_type", "file_uri"}`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file_data: Option<FileData<'a>>,
    /// A function call: `{"id", "name", "args"}`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub function_call: Option<GeminiFunctionCall<'a>>,
    /// A function's response.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub function_response: Option<FunctionResponse<'a>>,
    /// Gemini's signature of the part.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub thought_signature: Option<Cow<'a, str>>,
}

/// `{"mime_type", "data"}`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Blob<'a> {
    /// The MIME type.
    pub mime_type: Cow<'a, str>,
    /// The bytes, base64.
    pub data: Cow<'a, str>,
}

/// `{"mime_type", "file_uri"}`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FileData<'a> {
    /// The MIME type.
    pub mime_type: Cow<'a, str>,
    /// The file's URI.
    pub file_uri: Cow<'a, str>,
}

/// `{"id", "name", "args"}`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GeminiFunctionCall<'a> {
    /// The call id.
    pub id: &'a str,
    /// The function.
    pub name: &'a str,
    /// The arguments, an object.
    pub args: Value,
}

/// `{"id", "name", "response": {"result" | "error": value} or the result object, "parts"?}`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FunctionResponse<'a> {
    /// The call id.
    pub id: &'a str,
    /// The function.
    pub name: &'a str,
    /// The result or the error.
    pub response: ResponseValue<'a>,
    /// The result's media.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub parts: Vec<GeminiPart<'a>>,
}

/// A function response's `response`: Gemini takes a JSON object, the result itself when it
/// is one.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum ResponseValue<'a> {
    /// `{"result": value}` or `{"error": value}`.
    Keyed(ResponseText<'a>),
    /// A result that is a JSON object, as it is.
    Object(Map<String, Value>),
}

/// `{"result": value}` or `{"error": value}`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ResponseText<'a> {
    /// The result of a call that succeeded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result: Option<Output<'a>>,
    /// The error of a failed call.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<Output<'a>>,
}

/// A result or error: text, or the JSON value a tool returned.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Output<'a> {
    /// A string output, or the text of one that is not JSON.
    Text(Cow<'a, str>),
    /// A JSON value other than a string, as it is.
    Json(Value),
}

fn own(text: Cow<'_, str>) -> Cow<'static, str> {
    Cow::Owned(text.into_owned())
}

impl<'a> GeminiPart<'a> {
    fn text(text: impl Into<Cow<'a, str>>) -> Self {
        GeminiPart {
            text: Some(text.into()),
            ..GeminiPart::default()
        }
    }

    /// Whether it is a text part and nothing else.
    fn is_plain_text(&self) -> bool {
        self.text.is_some()
            && !self.thought
            && self.inline_data.is_none()
            && self.file_data.is_none()
            && self.function_call.is_none()
            && self.function_response.is_none()
            && self.thought_signature.is_none()
    }

    /// A media part owning its data (the media of a tool's output, read from its JSON).
    fn into_owned(self) -> GeminiPart<'static> {
        GeminiPart {
            text: self.text.map(own),
            thought: self.thought,
            inline_data: self.inline_data.map(|b| Blob {
                mime_type: own(b.mime_type),
                data: own(b.data),
            }),
            file_data: self.file_data.map(|f| FileData {
                mime_type: own(f.mime_type),
                file_uri: own(f.file_uri),
            }),
            function_call: None,
            function_response: None,
            thought_signature: self.thought_signature.map(own),
        }
    }
}

/// Joins adjacent plain text parts into one, as AgentFlow sends a message's text.
fn merge_texts(parts: &mut Vec<GeminiPart<'_>>) {
    parts.dedup_by(|next, prev| {
        if !(next.is_plain_text() && prev.is_plain_text()) {
            return false;
        }
        if let (Some(text), Some(next)) = (prev.text.as_mut(), next.text.as_deref()) {
            text.to_mut().push_str(next);
        }
        true
    });
}

/// A conversation's `contents` and `system_instruction`.
fn conversation<'a>(
    messages: &'a [Message],
    context_summary: Option<&'a str>,
) -> (
    Vec<GeminiContent<'a>>,
    Option<SystemInstruction<'a>>,
    Report,
) {
    let mut report = Report::default();
    check_pairing(messages, &mut report);
    let names: HashMap<&str, &str> = messages
        .iter()
        .filter(|m| m.role == Role::Assistant)
        .flat_map(calls_of)
        .map(|call| (call.id, call.name))
        .collect();
    let mut system: Vec<String> = Vec::new();
    let mut contents: Vec<GeminiContent<'a>> = Vec::new();
    let mut turn = UserTurn::default();
    let leading = leading_system(messages);
    for (index, message) in messages.iter().enumerate() {
        if index == leading {
            system.extend(context_summary.map(str::to_owned));
        }
        match message.role {
            Role::System => {
                note_system_moved(index, leading, &mut report);
                system.push(system_text(message, index, &mut report));
            }
            Role::Tool => {
                tool(message, index, &names, &mut turn, &mut report);
            }
            Role::User => {
                let mut parts = Vec::with_capacity(message.content.len());
                for (block, content) in message.content.iter().enumerate() {
                    match content {
                        ContentBlock::ToolResult(result) => {
                            let response =
                                result_part(result, None, index, block, &names, &mut report);
                            turn.responses.push(response);
                        }
                        other => parts.extend(part(other, index, block, &mut report)),
                    }
                }
                if !has_media(message) {
                    merge_texts(&mut parts);
                }
                turn.after.append(&mut parts);
                turn.from = Some(index);
                turn.flush(&mut contents, &mut report);
            }
            Role::Assistant => {
                turn.flush(&mut contents, &mut report);
                let mut parts = model_parts(message, index, &mut report);
                merge_texts(&mut parts);
                if parts.is_empty() {
                    report.push(Some(index), None, Issue::EmptyMessage, Action::Dropped);
                } else {
                    contents.push(GeminiContent {
                        role: "model",
                        parts,
                    });
                }
            }
        }
    }
    if leading == messages.len() {
        system.extend(context_summary.map(str::to_owned));
    }
    turn.flush(&mut contents, &mut report);
    super::note_empty_conversation(contents.len(), &mut report);
    let system = (!system.is_empty()).then(|| SystemInstruction {
        parts: vec![GeminiPart::text(system.join("\n"))],
    });
    (contents, system, report)
}

/// The user turn being gathered: function responses first, then the rest.
#[derive(Default)]
struct UserTurn<'a> {
    responses: Vec<GeminiPart<'a>>,
    after: Vec<GeminiPart<'a>>,
    from: Option<usize>,
}

impl<'a> UserTurn<'a> {
    fn flush(&mut self, contents: &mut Vec<GeminiContent<'a>>, report: &mut Report) {
        let from = self.from.take();
        if self.responses.is_empty() && self.after.is_empty() {
            if let Some(index) = from {
                report.push(Some(index), None, Issue::EmptyMessage, Action::Dropped);
            }
            return;
        }
        let mut parts = std::mem::take(&mut self.responses);
        parts.append(&mut self.after);
        contents.push(GeminiContent {
            role: "user",
            parts,
        });
    }
}

/// `{"function_response": {"id", "name", "response": {"result" | "error": output}, "parts"?}}`
/// (a result that is a JSON object is the `response` itself); the name is the call's (the
/// call id when no call has it, as AgentFlow does).
fn response_part<'a>(
    call_id: &'a str,
    is_error: bool,
    output: Output<'a>,
    names: &HashMap<&'a str, &'a str>,
    parts: Vec<GeminiPart<'a>>,
) -> GeminiPart<'a> {
    let name = names
        .get(call_id)
        .copied()
        .unwrap_or(if call_id.is_empty() {
            "unknown_function"
        } else {
            call_id
        });
    let response = match (is_error, output) {
        (false, Output::Json(Value::Object(object))) => ResponseValue::Object(object),
        (true, output) => ResponseValue::Keyed(ResponseText {
            result: None,
            error: Some(output),
        }),
        (false, output) => ResponseValue::Keyed(ResponseText {
            result: Some(output),
            error: None,
        }),
    };
    GeminiPart {
        function_response: Some(FunctionResponse {
            id: call_id,
            name,
            response,
            parts,
        }),
        ..GeminiPart::default()
    }
}

/// The function response of a tool result at `block` of message `index`: a JSON output that
/// is not a string as its value (with `single`, the tool message holding only this result,
/// when no text is beside it), else its output as text (with `single`: the message's whole
/// text, as AgentFlow sends it). An output of content blocks gives their text, and their
/// media as the response's `parts` (inline data or file data).
fn result_part<'a>(
    result: &'a ToolResultBlock,
    single: Option<&'a Message>,
    index: usize,
    block: usize,
    names: &HashMap<&'a str, &'a str>,
    report: &mut Report,
) -> GeminiPart<'a> {
    let Some(blocks) = output_blocks(&result.output) else {
        let beside = single.is_some_and(|m| {
            m.content
                .iter()
                .any(|b| matches!(b, ContentBlock::Text(t) if !t.text.is_empty()))
        });
        let output = match single {
            _ if !result.output.is_string() && !beside => Output::Json(result.output.to_value()),
            Some(message) => Output::Text(Cow::Owned(message.text())),
            None => Output::Text(output_text(&result.output)),
        };
        return response_part(&result.call_id, result.is_error, output, names, Vec::new());
    };
    let mut text = blocks_text(&blocks);
    for content in single.into_iter().flat_map(|m| &m.content) {
        if let ContentBlock::Text(t) = content {
            text.push_str(&t.text);
        }
    }
    let media = blocks
        .iter()
        .filter(|b| !matches!(b, ContentBlock::Text(_)))
        .filter_map(|b| part(b, index, block, report))
        .map(GeminiPart::into_owned)
        .collect();
    response_part(
        &result.call_id,
        result.is_error,
        Output::Text(Cow::Owned(text)),
        names,
        media,
    )
}

/// `inline_data` for bytes, `file_data` for a URI or file id.
fn media_part<'a>(media: &'a MediaRef, default_mime: &'a str) -> Option<GeminiPart<'a>> {
    let mime = media.mime_type.as_deref().unwrap_or(default_mime);
    let inline = |mime: &'a str, data: &'a str| GeminiPart {
        inline_data: Some(Blob {
            mime_type: Cow::Borrowed(mime),
            data: Cow::Borrowed(data),
        }),
        ..GeminiPart::default()
    };
    let file = |uri: &'a str| GeminiPart {
        file_data: Some(FileData {
            mime_type: Cow::Borrowed(mime),
            file_uri: Cow::Borrowed(uri),
        }),
        ..GeminiPart::default()
    };
    Some(match source(media) {
        Source::Data(data) => inline(mime, data),
        Source::Url(url) => match parse_data_url(url) {
            Some((mime, data)) => inline(mime, data),
            None => file(url),
        },
        Source::FileId(id) => file(id),
        Source::Missing => return None,
    })
}

/// Whether a file reference is a URI (`https://...`, `gs://...`): a scheme, then `:`.
/// Gemini's `file_uri` takes nothing else (a bare file id such as `file-abc` or `files/abc`
/// is refused).
fn is_uri(reference: &str) -> bool {
    match reference.split_once(':') {
        Some((scheme, rest)) => {
            !rest.is_empty()
                && scheme.starts_with(|c: char| c.is_ascii_alphabetic())
                && scheme
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
        }
        None => false,
    }
}

/// One part of a user or model turn; `None`, with a note, when Gemini has no part for it.
fn part<'a>(
    content: &'a ContentBlock,
    index: usize,
    block: usize,
    report: &mut Report,
) -> Option<GeminiPart<'a>> {
    let media = match content {
        ContentBlock::Text(t) => {
            note_annotations(t, index, block, report);
            return (!t.text.is_empty()).then(|| GeminiPart::text(t.text.as_str()));
        }
        ContentBlock::Image(image) => media_part(&image.media, "image/png"),
        ContentBlock::Audio(audio) => media_part(&audio.media, "audio/wav"),
        ContentBlock::Video(video) => media_part(&video.media, "video/mp4"),
        ContentBlock::Document(doc) => media_part(&doc.media, "application/pdf"),
        ContentBlock::Data(data) => match (&data.data_base64, &data.media) {
            (Some(bytes), _) => Some(GeminiPart {
                inline_data: Some(Blob {
                    mime_type: Cow::Borrowed(&data.mime_type),
                    data: Cow::Borrowed(bytes),
                }),
                ..GeminiPart::default()
            }),
            (None, Some(media)) => media_part(media, &data.mime_type),
            (None, None) => None,
        },
        ContentBlock::Reasoning(r) => {
            note_reasoning(r, index, block, report);
            return None;
        }
        other => {
            note_dropped(other.kind(), index, block, report);
            return None;
        }
    };
    let file_uri = media
        .as_ref()
        .and_then(|m| Some(m.file_data.as_ref()?.file_uri.as_ref()));
    if let Some(id) = file_uri.filter(|uri| !is_uri(uri)) {
        report.push(
            Some(index),
            Some(block),
            Issue::FileIdNotUri { id: id.to_owned() },
            Action::SentAsIs,
        );
    }
    if media.is_none() {
        report.push(
            Some(index),
            Some(block),
            Issue::UnsupportedSource {
                kind: content.kind(),
            },
            Action::Dropped,
        );
    }
    media
}

/// A tool message: its results as function responses of the user turn being gathered, its
/// other content after them.
fn tool<'a>(
    message: &'a Message,
    index: usize,
    names: &HashMap<&'a str, &'a str>,
    turn: &mut UserTurn<'a>,
    report: &mut Report,
) {
    let results = message.tool_results().count();
    if results == 0 {
        report.push(
            Some(index),
            None,
            Issue::ToolMessageWithoutResult,
            Action::SentAsUserMessage,
        );
    }
    // With one result, the response is the message's whole text, as AgentFlow sends it.
    let single = (results == 1).then_some(message);
    for (block, content) in message.content.iter().enumerate() {
        match content {
            ContentBlock::ToolResult(result) => {
                let response = result_part(result, single, index, block, names, report);
                turn.responses.push(response);
            }
            ContentBlock::Text(t) if results == 1 => note_annotations(t, index, block, report),
            other => {
                let part = part(other, index, block, report);
                if results > 0 && part.is_some() {
                    let issue = match other {
                        ContentBlock::Text(_) => Issue::ToolMessageText,
                        _ => Issue::ToolResultNonText { kind: other.kind() },
                    };
                    report.push(Some(index), Some(block), issue, Action::MovedToUserMessage);
                }
                turn.after.extend(part);
            }
        }
    }
    if turn.from.is_none() {
        turn.from = Some(index);
    }
}

/// A model turn's parts: thoughts made by Gemini, text and media, then function calls.
fn model_parts<'a>(message: &'a Message, index: usize, report: &mut Report) -> Vec<GeminiPart<'a>> {
    note_reasoning_string(message, index, report);
    let mut parts: Vec<GeminiPart<'a>> = Vec::with_capacity(message.content.len());
    for (block, content) in message.content.iter().enumerate() {
        match content {
            ContentBlock::Reasoning(r) => match thought(r) {
                // An empty signed thought after a text part is that part's signature.
                Some(thought) if r.summary.is_empty() && r.signature.is_some() => {
                    match parts.last_mut() {
                        Some(last) if last.text.is_some() && last.thought_signature.is_none() => {
                            last.thought_signature = thought.thought_signature;
                        }
                        _ => parts.push(thought),
                    }
                }
                Some(thought) => parts.push(thought),
                None => note_reasoning(r, index, block, report),
            },
            ContentBlock::ToolResult(result) => {
                let text = out_of_place(result, index, block, report);
                parts.push(GeminiPart::text(text));
            }
            c if is_call(c) => {}
            other => match super::refusal_of(other) {
                Some(refusal) => {
                    super::note_refusal(index, block, report);
                    parts.push(GeminiPart::text(refusal));
                }
                None => parts.extend(part(other, index, block, report)),
            },
        }
    }
    for (i, call) in calls_of(message).into_iter().enumerate() {
        let gemini =
            super::extra_str(call.extra, "provider").is_none_or(|p| p == Provider::Gemini.as_str());
        if !gemini {
            note_signature(&call, index, report);
        }
        let args = call.object(index, report);
        let thought_signature = match call.signature.clone().filter(|_| gemini) {
            Some(signature) => Some(signature),
            None if i == 0 => Some(Cow::Borrowed(SKIP_SIGNATURE)),
            None => None,
        };
        parts.push(GeminiPart {
            function_call: Some(GeminiFunctionCall {
                id: call.id,
                name: call.name,
                args,
            }),
            thought_signature,
            ..GeminiPart::default()
        });
    }
    parts
}

/// A `thought` part, for reasoning Gemini made.
fn thought(reasoning: &ReasoningBlock) -> Option<GeminiPart<'_>> {
    if reasoning_provider(reasoning) != Some(Provider::Gemini.as_str()) {
        return None;
    }
    Some(GeminiPart {
        text: Some(Cow::Borrowed(&reasoning.summary)),
        thought: true,
        thought_signature: reasoning.signature.as_deref().map(Cow::Borrowed),
        ..GeminiPart::default()
    })
}

/// A key in the REST API's camelCase or the proto's snake_case.
fn get<'a>(value: &'a Value, camel: &str, snake: &str) -> Option<&'a Value> {
    value.get(camel).or_else(|| value.get(snake))
}

fn get_str<'a>(value: &'a Value, camel: &str, snake: &str) -> Option<&'a str> {
    get(value, camel, snake).and_then(Value::as_str)
}

fn get_count(value: &Value, camel: &str, snake: &str) -> i64 {
    get(value, camel, snake)
        .and_then(Value::as_i64)
        .unwrap_or(0)
}

/// Reads a Gemini `GenerateContentResponse` (REST camelCase or proto snake_case) into an
/// assistant message: the first candidate's `thought` parts as reasoning with their
/// signature, text parts, `functionCall` parts as tool calls (their signature on the block
/// and, as AgentFlow keeps it, in the `tools_calls` entry's `thought_signature`; a call
/// without an id gets `call_<n>`), the sources of `groundingMetadata` (a search's) and
/// `citationMetadata` as the text's annotations (URL and title; the search queries are noted
/// and stay in `raw`), a finish reason of its content filters (`SAFETY`,
/// `PROHIBITED_CONTENT`, `BLOCKLIST`, `SPII`...) as a refusal block (an `error` block with code
/// [`REFUSAL_CODE`](super::REFUSAL_CODE), as OpenAI's refusal is read: its message the
/// `finishMessage`, its data the reason and `safetyRatings`), usage with cached and thought
/// tokens, and the whole response as `raw`. The metadata's `provider` is AgentFlow's `"google_genai"`. Other parts
/// (`inlineData`, `executableCode`, `codeExecutionResult`...) are noted in the report and stay
/// in `raw` only.
///
/// ```
/// use agentstate::providers::gemini::from_gemini;
/// use serde_json::json;
///
/// let response = json!({
///     "candidates": [{"content": {"role": "model", "parts": [
///         {"functionCall": {"name": "get_weather", "args": {"city": "Paris"}}, "thoughtSignature": "CiQB"}
///     ]}, "finishReason": "STOP"}],
///     "usageMetadata": {"promptTokenCount": 30, "candidatesTokenCount": 9, "totalTokenCount": 51,
///                       "thoughtsTokenCount": 12},
///     "modelVersion": "gemini-2.5-flash", "responseId": "r-1"
/// });
/// let parsed = from_gemini(&response)?;
/// assert!(parsed.report.is_empty());
/// let message = parsed.message;
/// let call = message.tool_call_blocks().next().unwrap();
/// assert_eq!(call.signature.as_deref(), Some("CiQB"));
/// assert_eq!(message.tool_calls()[0].extra.get("thought_signature"), Some("CiQB".into()));
/// assert_eq!(message.usages.unwrap().reasoning_tokens, 12);
/// # Ok::<(), agentstate::providers::ResponseError>(())
/// ```
pub fn from_gemini(response: &Value) -> Result<ParsedResponse, ResponseError> {
    let error = |reason: &str| ResponseError::new("Gemini", reason);
    let candidate = first(response, "candidates").ok_or_else(|| error("it has no `candidates`"))?;
    let parts = candidate
        .get("content")
        .and_then(|c| c.get("parts"))
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let mut content = Vec::new();
    let mut calls = Vec::new();
    let mut report = Report::default();
    // The content index of each text part's block, by part index.
    let mut texts: Vec<(usize, usize)> = Vec::new();
    for (at, part) in parts.iter().enumerate() {
        let signature = get_str(part, "thoughtSignature", "thought_signature");
        if let Some(call) = get(part, "functionCall", "function_call") {
            let name = call
                .get("name")
                .and_then(Value::as_str)
                .ok_or_else(|| error("a function call has no `name`"))?;
            let id = match call.get("id").and_then(Value::as_str) {
                Some(id) => id.to_owned(),
                None => format!("call_{}", calls.len()),
            };
            let input = call
                .get("args")
                .cloned()
                .unwrap_or(Value::Object(Map::new()));
            let args = match &input {
                Value::Object(args) => args.clone(),
                _ => Map::new(),
            };
            content.push(ContentBlock::ToolCall(ToolCallBlock {
                signature: signature.map(Into::into),
                extra: provider_extra(Provider::Gemini, &[]),
                ..ToolCallBlock::new(id.clone(), name, args)
            }));
            calls.push(signed_call(ToolCall::new(id, name, input), signature));
        } else if let Some(text) = part.get("text").and_then(Value::as_str) {
            if part.get("thought").and_then(Value::as_bool) == Some(true) {
                content.push(ContentBlock::Reasoning(ReasoningBlock {
                    signature: signature.map(Into::into),
                    extra: provider_extra(Provider::Gemini, &[]),
                    ..ReasoningBlock::new(text)
                }));
            } else {
                texts.push((at, content.len()));
                content.push(ContentBlock::text(text));
                if let Some(signature) = signature {
                    // A signature on a text part: kept as an empty signed thought after it.
                    content.push(ContentBlock::Reasoning(ReasoningBlock {
                        signature: Some(signature.into()),
                        extra: provider_extra(Provider::Gemini, &[]),
                        ..ReasoningBlock::new("")
                    }));
                }
            }
        } else {
            let kind = part
                .as_object()
                .and_then(|p| {
                    p.keys().find(|k| {
                        !matches!(
                            k.as_str(),
                            "thought" | "thoughtSignature" | "thought_signature"
                        )
                    })
                })
                .map_or("unknown", String::as_str);
            super::note_output(at, kind, &mut report);
        }
    }
    sources(candidate, &texts, &mut content, &mut report);
    let finish_reason = get_str(candidate, "finishReason", "finish_reason");
    if let Some(reason) = finish_reason.filter(|r| BLOCKED.contains(r)) {
        let mut data = Map::new();
        data.insert("finishReason".into(), Value::from(reason));
        if let Some(ratings) = get(candidate, "safetyRatings", "safety_ratings") {
            data.insert("safetyRatings".into(), ratings.clone());
        }
        content.push(super::stop_refusal(
            get_str(candidate, "finishMessage", "finish_message"),
            &format!("The response was blocked (Gemini `finishReason`: `{reason}`)."),
            data,
        ));
    }
    let usage = get(response, "usageMetadata", "usage_metadata").map(|u| {
        super::usages(
            get_count(u, "promptTokenCount", "prompt_token_count"),
            get_count(u, "candidatesTokenCount", "candidates_token_count"),
            get(u, "totalTokenCount", "total_token_count").and_then(Value::as_i64),
            get_count(u, "cachedContentTokenCount", "cached_content_token_count"),
            get_count(u, "thoughtsTokenCount", "thoughts_token_count"),
        )
    });
    let message = response_message(
        response,
        content,
        calls,
        Reply {
            provider: "google_genai",
            id: get_str(response, "responseId", "response_id"),
            model: get_str(response, "modelVersion", "model_version"),
            finish_reason,
            usage,
            created: None,
        },
    );
    Ok(ParsedResponse::new(message, report))
}

/// The finish reasons of a candidate its content filters blocked: read as a refusal.
const BLOCKED: &[&str] = &[
    "SAFETY",
    "PROHIBITED_CONTENT",
    "BLOCKLIST",
    "SPII",
    "IMAGE_SAFETY",
    "IMAGE_PROHIBITED_CONTENT",
];

/// A candidate's sources as annotations of its text, as Anthropic's and OpenAI's web search
/// citations are read: each grounding chunk with a URI (`web`, `retrievedContext`, `maps`...)
/// on the text part its first grounding support cites it from (the first text otherwise),
/// and each `citationMetadata` citation with a URI on the first text. The rest of
/// `groundingMetadata` (the search queries, the search entry point), and the sources when
/// there is no text to hold them, are noted: they stay in `raw`.
fn sources(
    candidate: &Value,
    texts: &[(usize, usize)],
    content: &mut [ContentBlock],
    report: &mut Report,
) {
    let mut add = |part: Option<usize>, annotation: Option<AnnotationRef>| -> bool {
        let Some(annotation) = annotation else {
            return true;
        };
        let at = part
            .and_then(|p| texts.iter().find(|(at, _)| *at == p))
            .or(texts.first());
        match at.map(|(_, block)| &mut content[*block]) {
            Some(ContentBlock::Text(text)) => {
                if !text.annotations.contains(&annotation) {
                    text.annotations.push(annotation);
                }
                true
            }
            _ => false,
        }
    };
    let list = |value: Option<&Value>| value.and_then(Value::as_array).cloned().unwrap_or_default();
    if let Some(grounding) = get(candidate, "groundingMetadata", "grounding_metadata") {
        let supports = list(get(grounding, "groundingSupports", "grounding_supports"));
        let mut kept = true;
        for (i, chunk) in list(get(grounding, "groundingChunks", "grounding_chunks"))
            .iter()
            .enumerate()
        {
            let part = supports
                .iter()
                .find(|s| {
                    list(get(s, "groundingChunkIndices", "grounding_chunk_indices"))
                        .iter()
                        .any(|c| c.as_u64() == Some(i as u64))
                })
                .and_then(|s| s.get("segment"))
                .map(|segment| get_count(segment, "partIndex", "part_index") as usize);
            let source = chunk
                .as_object()
                .and_then(|c| c.values().find_map(|v| super::source_annotation(v, "uri")));
            kept &= add(Some(part.unwrap_or(0)), source);
        }
        let searched = [
            ("webSearchQueries", "web_search_queries"),
            ("searchEntryPoint", "search_entry_point"),
            ("retrievalQueries", "retrieval_queries"),
        ]
        .iter()
        .any(|(camel, snake)| get(grounding, camel, snake).is_some_and(|v| !v.is_null()));
        if searched || !kept {
            super::push_output_note(None, "groundingMetadata", report);
        }
    }
    if let Some(citations) = get(candidate, "citationMetadata", "citation_metadata") {
        let list = list(
            citations
                .get("citations")
                .or(citations.get("citationSources")),
        );
        let mut kept = true;
        for citation in &list {
            kept &= add(None, super::source_annotation(citation, "uri"));
        }
        if !kept {
            super::push_output_note(None, "citationMetadata", report);
        }
    }
}

/// A whole Gemini `generateContent` body, from [`ModelRequest::to_gemini`], with the REST
/// API's proto field names in the order of its `GenerateContentRequest` (`model`, `contents`,
/// `tools`, `tool_config`, `system_instruction`, `generation_config`), each optional one
/// written only when set. `model` is also the URL's (`models/{model}:generateContent`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GeminiBody<'a> {
    /// The model.
    pub model: &'a str,
    /// The conversation's turns.
    pub contents: Vec<GeminiContent<'a>>,
    /// `[{"function_declarations": [...]}]`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<GeminiTools<'a>>,
    /// `{"function_calling_config": {"mode", "allowed_function_names"?}}`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_config: Option<GeminiToolConfig<'a>>,
    /// `{"parts": [{"text"}]}`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub system_instruction: Option<SystemInstruction<'a>>,
    /// Sampling, output and thinking parameters.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub generation_config: Option<GenerationConfig<'a>>,
}

/// `{"function_declarations"}`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GeminiTools<'a> {
    /// The functions.
    pub function_declarations: Vec<FunctionDeclaration<'a>>,
}

/// `{"name", "description", "parameters_json_schema"}`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FunctionDeclaration<'a> {
    /// The name.
    pub name: &'a str,
    /// What it does.
    pub description: &'a str,
    /// The arguments' JSON Schema.
    pub parameters_json_schema: &'a Value,
}

/// `{"function_calling_config"}`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GeminiToolConfig<'a> {
    /// The mode and the allowed functions.
    pub function_calling_config: FunctionCallingConfig<'a>,
}

/// `{"mode": "AUTO" | "NONE" | "ANY", "allowed_function_names"?}`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FunctionCallingConfig<'a> {
    /// The mode.
    pub mode: &'static str,
    /// The one tool a named tool choice allows.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allowed_function_names: Option<[&'a str; 1]>,
}

/// `generation_config`, in the proto's field order.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct GenerationConfig<'a> {
    /// `stop_sequences`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stop_sequences: Option<&'a [String]>,
    /// `max_output_tokens`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_output_tokens: Option<u32>,
    /// `temperature`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    /// `top_p`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub top_p: Option<f64>,
    /// `top_k`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub top_k: Option<u32>,
    /// `seed`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seed: Option<i64>,
    /// `presence_penalty`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub presence_penalty: Option<f64>,
    /// `frequency_penalty`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub frequency_penalty: Option<f64>,
    /// `"application/json"` with a structured output.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub response_mime_type: Option<&'static str>,
    /// The structured output's JSON Schema.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub response_json_schema: Option<&'a Value>,
    /// `{"thinking_budget"}`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub thinking_config: Option<ThinkingConfig>,
}

/// `{"thinking_budget"}`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ThinkingConfig {
    /// The budget in tokens.
    pub thinking_budget: u32,
}

const GEMINI: &str = "Gemini generateContent";

impl ModelRequest {
    /// The whole Gemini `generateContent` body of this request and a conversation (see
    /// [`ModelRequest`] for where each parameter goes and what is refused: Gemini
    /// has no strict tools, and takes reasoning as a thinking budget only).
    ///
    /// ```
    /// use agentstate::message::{Message, Role};
    /// use agentstate::providers::{ModelRequest, Tool, ToolChoice};
    /// use serde_json::json;
    ///
    /// let request = ModelRequest::builder("gemini-2.5-flash")
    ///     .tool(Tool::new("now", "The time.", json!({"type": "object"})))
    ///     .tool_choice(ToolChoice::Tool("now".into()))
    ///     .temperature(0.5)
    ///     .thinking_budget(512)
    ///     .build()?;
    /// let messages = [Message::text_message("Time?", Role::User)];
    /// let body = serde_json::to_value(request.to_gemini(&messages)?.request).unwrap();
    /// assert_eq!(body["tool_config"], json!({"function_calling_config": {"mode": "ANY", "allowed_function_names": ["now"]}}));
    /// assert_eq!(body["generation_config"], json!({"temperature": 0.5, "thinking_config": {"thinking_budget": 512}}));
    /// # Ok::<(), agentstate::providers::RequestError>(())
    /// ```
    pub fn to_gemini<'a>(
        &'a self,
        conversation: impl Into<Conversation<'a>>,
    ) -> Result<Converted<GeminiBody<'a>>, RequestError> {
        self.refuse(GEMINI, &[Param::ToolStrict])?;
        self.refuse_tool_choice_without_tools(GEMINI)?;
        let thinking_config = match (self.reasoning_effort(), self.thinking_budget()) {
            (Some(_), None) => {
                return Err(RequestError::Unsupported {
                    provider: GEMINI,
                    parameter: "reasoning_effort",
                    hint: "Gemini takes a thinking budget: set `thinking_budget`",
                })
            }
            (_, budget) => budget.map(|thinking_budget| ThinkingConfig { thinking_budget }),
        };
        let conversation = conversation.into();
        let (contents, system_instruction, mut report) =
            self::conversation(conversation.messages, conversation.summary);
        self.note_cache(&mut report);
        let s = self.sampling();
        let output = self.output_schema();
        let config = GenerationConfig {
            stop_sequences: (!s.stop.is_empty()).then_some(s.stop.as_slice()),
            max_output_tokens: self.max_output_tokens(),
            temperature: s.temperature,
            top_p: s.top_p,
            top_k: s.top_k,
            seed: s.seed,
            presence_penalty: s.presence_penalty,
            frequency_penalty: s.frequency_penalty,
            response_mime_type: output.map(|_| "application/json"),
            response_json_schema: output.map(|o| &o.schema),
            thinking_config,
        };
        let tools = self.tools();
        let body = GeminiBody {
            model: self.model(),
            contents,
            tools: if tools.is_empty() {
                Vec::new()
            } else {
                vec![GeminiTools {
                    function_declarations: tools
                        .iter()
                        .map(|tool| FunctionDeclaration {
                            name: &tool.name,
                            description: &tool.description,
                            parameters_json_schema: &tool.parameters,
                        })
                        .collect(),
                }]
            },
            tool_config: self.tool_choice().map(|choice| GeminiToolConfig {
                function_calling_config: match choice {
                    ToolChoice::Auto => FunctionCallingConfig {
                        mode: "AUTO",
                        allowed_function_names: None,
                    },
                    ToolChoice::None => FunctionCallingConfig {
                        mode: "NONE",
                        allowed_function_names: None,
                    },
                    ToolChoice::Required => FunctionCallingConfig {
                        mode: "ANY",
                        allowed_function_names: None,
                    },
                    ToolChoice::Tool(name) => FunctionCallingConfig {
                        mode: "ANY",
                        allowed_function_names: Some([name.as_str()]),
                    },
                },
            }),
            system_instruction,
            generation_config: (config != GenerationConfig::default()).then_some(config),
        };
        Ok(Converted::new(body, report))
    }
}
