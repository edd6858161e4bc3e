//! OpenAI Chat Completions: messages to the request's `messages`, and a `chat.completion`
//! response back to a [`Message`].
//!
//! The request is a borrowed serde type ([`ChatRequest`]): serialize it with `serde_json`
//! (it borrows the messages' text, so a conversion allocates little). A message's text
//! becomes a string `content` (AgentFlow's `Message.text()`), content parts when it has
//! media. Tool results are one `tool` message each, with text only: media in a tool result
//! moves to a user message after the turn's tool results. Chat Completions takes no
//! reasoning back, so reasoning and tool-call signatures are dropped with a note.

use super::report::{Action, Issue, Report};
use super::request::{
    Conversation, Effort, ModelRequest, OutputSchema, Param, RequestError, ToolChoice,
};
use super::strict::Dialect;
use super::{
    calls_of, check_pairing, data_url, first, is_call, leading_system, note_annotations,
    note_dropped, note_error_flag, note_reasoning, note_reasoning_string, note_signature,
    openai_reasoning, openai_usage, out_of_place, output_blocks, output_text, placeholder,
    response_message, source, str_at, Converted, ParsedResponse, Reply, ResponseError, Source,
};
use crate::message::{
    ContentBlock, Message, Role, TextBlock, ToolCall, ToolCallBlock, ToolResultBlock,
};
use serde::Serialize;
use serde_json::{Map, Value};
use std::borrow::Cow;

/// The conversation part of a Chat Completions request: `{"messages": [...]}`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ChatRequest<'a> {
    /// The messages, in order.
    pub messages: Vec<ChatRequestMessage<'a>>,
}

/// One Chat Completions message, tagged by `role`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "role", rename_all = "lowercase")]
pub enum ChatRequestMessage<'a> {
    /// `{"role": "system", "content"}`.
    System {
        /// The text.
        content: ChatContent<'a>,
    },
    /// `{"role": "user", "content"}`.
    User {
        /// Text or parts.
        content: ChatContent<'a>,
    },
    /// `{"role": "assistant", "content", "refusal"?, "tool_calls"?}`.
    Assistant {
        /// The text (`""` when there is none).
        content: Cow<'a, str>,
        /// The model's refusal (an `error` block with code
        /// [`REFUSAL_CODE`](super::REFUSAL_CODE)), absent when none.
        #[serde(skip_serializing_if = "Option::is_none")]
        refusal: Option<&'a str>,
        /// The tool calls (absent when none).
        #[serde(skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<ChatToolCall<'a>>,
    },
    /// `{"role": "tool", "content", "tool_call_id"}`.
    Tool {
        /// The result as text (parts with media only in the Responses conversion, whose
        /// outputs take them).
        content: ChatContent<'a>,
        /// The call it answers.
        tool_call_id: &'a str,
    },
}

/// A message's `content`: a string, or parts when it has media.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum ChatContent<'a> {
    /// A string.
    Text(Cow<'a, str>),
    /// Content parts.
    Parts(Vec<ChatPart<'a>>),
}

/// A content part, tagged by `type`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ChatPart<'a> {
    /// `{"type": "text", "text"}`.
    Text {
        /// The text.
        text: Cow<'a, str>,
    },
    /// `{"type": "image_url", "image_url": {"url"}}`.
    ImageUrl {
        /// The image's URL or `data:` URL.
        image_url: ImageUrl<'a>,
    },
    /// `{"type": "input_audio", "input_audio": {"data", "format"}}`.
    InputAudio {
        /// The audio.
        input_audio: InputAudio<'a>,
    },
    /// `{"type": "file", "file": {...}}`.
    File {
        /// The file.
        file: FilePart<'a>,
    },
}

impl ChatPart<'_> {
    /// The part, owning its text.
    fn into_owned(self) -> ChatPart<'static> {
        let own = |text: Cow<'_, str>| Cow::Owned(text.into_owned());
        match self {
            ChatPart::Text { text } => ChatPart::Text { text: own(text) },
            ChatPart::ImageUrl { image_url } => ChatPart::ImageUrl {
                image_url: ImageUrl {
                    url: own(image_url.url),
                },
            },
            ChatPart::InputAudio { input_audio } => ChatPart::InputAudio {
                input_audio: InputAudio {
                    data: own(input_audio.data),
                    format: own(input_audio.format),
                },
            },
            ChatPart::File { file } => ChatPart::File {
                file: FilePart {
                    file_data: file.file_data,
                    file_id: file.file_id.map(own),
                    filename: file.filename.map(own),
                },
            },
        }
    }
}

/// An image part's `image_url`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ImageUrl<'a> {
    /// A URL or a `data:` URL.
    pub url: Cow<'a, str>,
}

/// An audio part's `input_audio`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct InputAudio<'a> {
    /// Base64 bytes.
    pub data: Cow<'a, str>,
    /// The format (`wav`, `mp3`): the MIME type's subtype.
    pub format: Cow<'a, str>,
}

/// A file part's `file`: inline data or a file id.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FilePart<'a> {
    /// A `data:` URL of the bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file_data: Option<String>,
    /// An uploaded file's id.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file_id: Option<Cow<'a, str>>,
    /// The file name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub filename: Option<Cow<'a, str>>,
}

/// A tool call: `{"id", "type": "function", "function": {"name", "arguments"}}`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ChatToolCall<'a> {
    /// The call id.
    pub id: &'a str,
    /// Always `"function"`.
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// The function and its arguments.
    pub function: ChatFunction<'a>,
}

/// A tool call's `function`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ChatFunction<'a> {
    /// The tool's name.
    pub name: &'a str,
    /// The arguments as a JSON string.
    pub arguments: Cow<'a, str>,
}

/// Converts a conversation to a Chat Completions request's `messages`.
///
/// The `context_summary` becomes a system message after the leading system messages.
///
/// ```
/// use agentstate::message::{ContentBlock, MediaRef, Message, Role, ToolCall};
/// use agentstate::providers::openai_chat::to_openai_chat;
/// use agentstate::providers::{Action, Issue};
/// use serde_json::json;
///
/// let messages = vec![
///     Message::text_message("Weather in Paris?", Role::User),
///     Message::text_message("", Role::Assistant)
///         .with_tool_calls(vec![ToolCall::new("call_1", "get_weather", json!({"city": "Paris"}))]),
///     Message::tool_result("call_1", "Sunny").with_block(ContentBlock::image(MediaRef::url("https://x/map.png"))),
/// ];
/// let converted = to_openai_chat(&messages, None);
/// let body = serde_json::to_value(&converted.request)?;
/// assert_eq!(body["messages"][1]["tool_calls"][0]["function"]["arguments"], r#"{"city": "Paris"}"#);
/// assert_eq!(body["messages"][2], json!({"role": "tool", "content": "Sunny", "tool_call_id": "call_1"}));
/// // Tool results are text only: the image moves to a user message, with a note.
/// assert_eq!(body["messages"][3]["content"][0]["image_url"]["url"], "https://x/map.png");
/// let note = &converted.report.notes()[0];
/// assert_eq!((note.message, note.block, &note.action), (Some(2), Some(1), &Action::MovedToUserMessage));
/// # Ok::<(), serde_json::Error>(())
/// ```
pub fn to_openai_chat<'a>(
    messages: &'a [Message],
    context_summary: Option<&'a str>,
) -> Converted<ChatRequest<'a>> {
    let (out, mut report) = convert(messages, context_summary, false);
    super::note_empty_conversation(out.messages.len(), &mut report);
    Converted::new(
        ChatRequest {
            messages: out.messages,
        },
        report,
    )
}

/// The Chat messages being built, with the index of the message each came from (`None` for
/// the context summary), which the Responses converter reads.
pub(super) struct Out<'a> {
    pub(super) messages: Vec<ChatRequestMessage<'a>>,
    pub(super) origins: Vec<Option<usize>>,
    at: Option<usize>,
    moved: Vec<ChatPart<'a>>,
    moved_from: Option<usize>,
    /// Whether OpenAI reasoning blocks are taken (by the Responses converter) rather than
    /// noted as dropped.
    pub(super) keep_reasoning: bool,
    /// Whether the media of tool results made of content blocks stay in the result (the
    /// Responses converter) rather than moving after the turn's tool results.
    media_in_results: bool,
}

impl<'a> Out<'a> {
    fn push(&mut self, message: ChatRequestMessage<'a>) {
        self.messages.push(message);
        self.origins.push(self.at);
    }

    fn summary(&mut self, summary: Option<&'a str>) {
        if let Some(summary) = summary {
            let at = self.at.take();
            self.push(ChatRequestMessage::System {
                content: ChatContent::Text(Cow::Borrowed(summary)),
            });
            self.at = at;
        }
    }

    fn moved(&mut self, part: Option<ChatPart<'a>>) {
        self.moved_from = self.at;
        self.moved.extend(part);
    }

    /// The content of the tool message of a result at `block` of message `index`, with the
    /// text of the blocks beside it (`beside`): its output as text. An output of content
    /// blocks gives their text, and their media either as parts (Responses, whose
    /// `function_call_output` takes them) or moved after the turn's tool results, noted.
    fn result_content(
        &mut self,
        result: &'a ToolResultBlock,
        beside: Option<String>,
        index: usize,
        block: usize,
        report: &mut Report,
    ) -> ChatContent<'a> {
        let Some(blocks) = output_blocks(&result.output) else {
            return ChatContent::Text(match beside {
                Some(beside) => Cow::Owned(output_text(&result.output).into_owned() + &beside),
                None => output_text(&result.output),
            });
        };
        let mut text = String::new();
        let mut parts = Vec::new();
        for content in &blocks {
            if let ContentBlock::Text(t) = content {
                text.push_str(&t.text);
                if !t.text.is_empty() {
                    parts.push(ChatPart::Text {
                        text: Cow::Owned(t.text.clone()),
                    });
                }
                continue;
            }
            let Some(part) = part(content, index, block, report).map(ChatPart::into_owned) else {
                continue;
            };
            if self.media_in_results {
                parts.push(part);
            } else {
                let kind = content.kind();
                report.push(
                    Some(index),
                    Some(block),
                    Issue::ToolResultNonText { kind },
                    Action::MovedToUserMessage,
                );
                self.moved(Some(part));
            }
        }
        if let Some(beside) = beside.filter(|b| !b.is_empty()) {
            text.push_str(&beside);
            parts.push(ChatPart::Text {
                text: Cow::Owned(beside),
            });
        }
        let media = parts.iter().any(|p| !matches!(p, ChatPart::Text { .. }));
        if self.media_in_results && media {
            ChatContent::Parts(parts)
        } else {
            ChatContent::Text(Cow::Owned(text))
        }
    }

    /// Sends the media moved out of tool results as one user message.
    fn flush(&mut self) {
        if !self.moved.is_empty() {
            let at = std::mem::replace(&mut self.at, self.moved_from);
            let parts = std::mem::take(&mut self.moved);
            self.push(ChatRequestMessage::User {
                content: ChatContent::Parts(parts),
            });
            self.at = at;
        }
    }
}

/// The Chat conversion, shared with the Responses converter.
pub(super) fn convert<'a>(
    messages: &'a [Message],
    context_summary: Option<&'a str>,
    keep_reasoning: bool,
) -> (Out<'a>, Report) {
    let mut report = Report::default();
    check_pairing(messages, &mut report);
    let mut out = Out {
        messages: Vec::with_capacity(messages.len() + 1),
        origins: Vec::with_capacity(messages.len() + 1),
        at: None,
        moved: Vec::new(),
        moved_from: None,
        keep_reasoning,
        media_in_results: keep_reasoning,
    };
    let leading = leading_system(messages);
    for (index, message) in messages.iter().enumerate() {
        if index == leading {
            out.summary(context_summary);
        }
        out.at = Some(index);
        match message.role {
            Role::System => {
                out.flush();
                let content = content(message, index, Role::System, &mut report);
                out.push(ChatRequestMessage::System { content });
            }
            Role::User => {
                tool_messages(message, index, &mut out, &mut report);
                out.flush();
                if message
                    .content
                    .iter()
                    .any(|b| !matches!(b, ContentBlock::ToolResult(_)))
                {
                    let content = content(message, index, Role::User, &mut report);
                    out.push(ChatRequestMessage::User { content });
                }
            }
            Role::Assistant => {
                out.flush();
                let assistant = assistant(message, index, out.keep_reasoning, &mut report);
                out.push(assistant);
            }
            Role::Tool => tool(message, index, &mut out, &mut report),
        }
    }
    if leading == messages.len() {
        out.summary(context_summary);
    }
    out.flush();
    (out, report)
}

/// The content of a system or user message: a string without media (AgentFlow's
/// `Message.text()`), parts with it. Tool results of a user message are left to
/// [`tool_messages`].
fn content<'a>(
    message: &'a Message,
    index: usize,
    role: Role,
    report: &mut Report,
) -> ChatContent<'a> {
    if let [ContentBlock::Text(text)] = message.content.as_slice() {
        note_annotations(text, index, 0, report);
        return ChatContent::Text(Cow::Borrowed(&text.text));
    }
    let media = role != Role::System
        && message.content.iter().any(|b| {
            matches!(
                b,
                ContentBlock::Image(_)
                    | ContentBlock::Audio(_)
                    | ContentBlock::Video(_)
                    | ContentBlock::Document(_)
            )
        });
    if media {
        let mut parts = Vec::with_capacity(message.content.len());
        for (block, content) in message.content.iter().enumerate() {
            if let Some(part) = part(content, index, block, report) {
                parts.push(part);
            }
        }
        return ChatContent::Parts(parts);
    }
    let mut text = String::new();
    for (block, content) in message.content.iter().enumerate() {
        match content {
            ContentBlock::Text(t) => {
                note_annotations(t, index, block, report);
                text.push_str(&t.text);
            }
            ContentBlock::ToolResult(result) => {
                if role == Role::System {
                    text.push_str(&out_of_place(result, index, block, report));
                }
            }
            other => {
                let kind = other.kind();
                let issue = match other {
                    ContentBlock::Reasoning(r) => {
                        note_reasoning(r, index, block, report);
                        continue;
                    }
                    ContentBlock::Image(_)
                    | ContentBlock::Audio(_)
                    | ContentBlock::Video(_)
                    | ContentBlock::Document(_) => Issue::SystemNonText { kind },
                    _ => Issue::UnsupportedBlock { kind },
                };
                report.push(Some(index), Some(block), issue, Action::Dropped);
            }
        }
    }
    ChatContent::Text(Cow::Owned(text))
}

/// One content part of a user message (or of media moved out of a tool result); `None`, with
/// a note, when Chat Completions has no part for it.
fn part<'a>(
    content: &'a ContentBlock,
    index: usize,
    block: usize,
    report: &mut Report,
) -> Option<ChatPart<'a>> {
    let text = |text: String| ChatPart::Text {
        text: Cow::Owned(text),
    };
    let replace = |replacement: String, report: &mut Report| {
        report.push(
            Some(index),
            Some(block),
            Issue::UnsupportedSource {
                kind: content.kind(),
            },
            Action::ReplacedWithText(replacement.clone()),
        );
        Some(text(replacement))
    };
    match content {
        ContentBlock::Text(t) => {
            note_annotations(t, index, block, report);
            (!t.text.is_empty()).then(|| ChatPart::Text {
                text: Cow::Borrowed(&t.text),
            })
        }
        ContentBlock::Image(image) => {
            let url = match source(&image.media) {
                Source::Url(url) => Cow::Borrowed(url),
                Source::Data(data) => Cow::Owned(data_url(
                    image.media.mime_type.as_deref().unwrap_or("image/png"),
                    data,
                )),
                Source::FileId(_) | Source::Missing => {
                    report.push(
                        Some(index),
                        Some(block),
                        Issue::UnsupportedSource { kind: "image" },
                        Action::Dropped,
                    );
                    return None;
                }
            };
            Some(ChatPart::ImageUrl {
                image_url: ImageUrl { url },
            })
        }
        ContentBlock::Audio(audio) => match source(&audio.media) {
            Source::Data(data) => Some(ChatPart::InputAudio {
                input_audio: InputAudio {
                    data: Cow::Borrowed(data),
                    format: Cow::Borrowed(
                        audio
                            .media
                            .mime_type
                            .as_deref()
                            .and_then(|m| m.rsplit('/').next())
                            .unwrap_or("wav"),
                    ),
                },
            }),
            _ => replace(placeholder("audio", &audio.media), report),
        },
        ContentBlock::Document(doc) => match source(&doc.media) {
            Source::Data(data) => Some(ChatPart::File {
                file: FilePart {
                    file_data: Some(data_url(
                        doc.media.mime_type.as_deref().unwrap_or("application/pdf"),
                        data,
                    )),
                    file_id: None,
                    filename: Some(Cow::Borrowed(
                        doc.media.filename.as_deref().unwrap_or("document.pdf"),
                    )),
                },
            }),
            Source::FileId(id) => Some(ChatPart::File {
                file: FilePart {
                    file_data: None,
                    file_id: Some(Cow::Borrowed(id)),
                    filename: None,
                },
            }),
            Source::Url(_) | Source::Missing => replace(
                doc.text
                    .clone()
                    .or_else(|| doc.excerpt.clone())
                    .unwrap_or_else(|| placeholder("document", &doc.media)),
                report,
            ),
        },
        ContentBlock::Video(video) => replace(placeholder("video", &video.media), report),
        ContentBlock::Reasoning(r) => {
            note_reasoning(r, index, block, report);
            None
        }
        ContentBlock::ToolResult(_) => None, // sent as a tool message
        other => {
            note_dropped(other.kind(), index, block, report);
            None
        }
    }
}

/// An assistant message: its text, and its tool calls with their arguments strings.
/// Reasoning, signatures and media are dropped with a note.
fn assistant<'a>(
    message: &'a Message,
    index: usize,
    keep_reasoning: bool,
    report: &mut Report,
) -> ChatRequestMessage<'a> {
    let mut refusal = None;
    let content = match message.content.as_slice() {
        [ContentBlock::Text(text)] => {
            note_annotations(text, index, 0, report);
            Cow::Borrowed(text.text.as_str())
        }
        blocks => {
            let mut text = String::new();
            for (block, content) in blocks.iter().enumerate() {
                if let Some(refused) = super::refusal_of(content) {
                    if refusal.is_none() {
                        refusal = Some(refused);
                    } else {
                        super::note_refusal(index, block, report);
                        text.push_str(refused);
                    }
                    continue;
                }
                match content {
                    ContentBlock::Text(t) => {
                        note_annotations(t, index, block, report);
                        text.push_str(&t.text);
                    }
                    ContentBlock::ToolResult(result) => {
                        text.push_str(&out_of_place(result, index, block, report));
                    }
                    ContentBlock::Reasoning(r) => {
                        if !(keep_reasoning && openai_reasoning(r).is_some()) {
                            note_reasoning(r, index, block, report);
                        }
                    }
                    ContentBlock::ToolCall(_) | ContentBlock::RemoteToolCall(_) => {}
                    other => note_dropped(other.kind(), index, block, report),
                }
            }
            Cow::Owned(text)
        }
    };
    note_reasoning_string(message, index, report);
    let tool_calls = if message.has_tool_calls() || message.content.iter().any(is_call) {
        calls_of(message)
            .into_iter()
            .map(|call| {
                note_signature(&call, index, report);
                ChatToolCall {
                    id: call.id,
                    kind: "function",
                    function: ChatFunction {
                        name: call.name,
                        arguments: call.json_string(index, report),
                    },
                }
            })
            .collect()
    } else {
        Vec::new()
    };
    ChatRequestMessage::Assistant {
        content,
        refusal,
        tool_calls,
    }
}

/// The tool results of a user message, as tool messages.
fn tool_messages<'a>(message: &'a Message, index: usize, out: &mut Out<'a>, report: &mut Report) {
    for (block, content) in message.content.iter().enumerate() {
        if let ContentBlock::ToolResult(result) = content {
            note_error_flag(result, index, block, report);
            let content = out.result_content(result, None, index, block, report);
            out.push(ChatRequestMessage::Tool {
                content,
                tool_call_id: &result.call_id,
            });
        }
    }
}

/// A tool message: one `tool` message per result. With one result its content is the
/// message's text (AgentFlow's); with several, text beside them moves to the user message
/// after the tool results, as media does.
fn tool<'a>(message: &'a Message, index: usize, out: &mut Out<'a>, report: &mut Report) {
    if let [ContentBlock::ToolResult(result)] = message.content.as_slice() {
        note_error_flag(result, index, 0, report);
        let content = out.result_content(result, None, index, 0, report);
        out.push(ChatRequestMessage::Tool {
            content,
            tool_call_id: &result.call_id,
        });
        return;
    }
    let results = message
        .content
        .iter()
        .filter(|b| matches!(b, ContentBlock::ToolResult(_)))
        .count();
    if results == 0 {
        report.push(
            Some(index),
            None,
            Issue::ToolMessageWithoutResult,
            Action::SentAsUserMessage,
        );
        out.flush();
        let content = content(message, index, Role::User, report);
        out.push(ChatRequestMessage::User { content });
        return;
    }
    // With one result, its content is the message's text (AgentFlow's): the result's and
    // the text beside it.
    let mut beside = String::new();
    let mut single = None;
    for (block, content) in message.content.iter().enumerate() {
        match content {
            ContentBlock::ToolResult(result) => {
                note_error_flag(result, index, block, report);
                if results == 1 {
                    single = Some((result, block, beside.len()));
                } else {
                    let content = out.result_content(result, None, index, block, report);
                    out.push(ChatRequestMessage::Tool {
                        content,
                        tool_call_id: &result.call_id,
                    });
                }
            }
            ContentBlock::Text(t) if results == 1 => {
                note_annotations(t, index, block, report);
                beside.push_str(&t.text);
            }
            ContentBlock::Text(_) => {
                report.push(
                    Some(index),
                    Some(block),
                    Issue::ToolMessageText,
                    Action::MovedToUserMessage,
                );
                out.moved(part(content, index, block, report));
            }
            ContentBlock::Image(_)
            | ContentBlock::Audio(_)
            | ContentBlock::Video(_)
            | ContentBlock::Document(_) => {
                report.push(
                    Some(index),
                    Some(block),
                    Issue::ToolResultNonText {
                        kind: content.kind(),
                    },
                    Action::MovedToUserMessage,
                );
                out.moved(part(content, index, block, report));
            }
            ContentBlock::Reasoning(r) => note_reasoning(r, index, block, report),
            other => note_dropped(other.kind(), index, block, report),
        }
    }
    if let Some((result, block, before)) = single {
        // The text before the result leads, as in the message's text.
        let after = beside.split_off(before);
        let content = out.result_content(result, Some(after), index, block, report);
        let content = match content {
            ChatContent::Text(text) if !beside.is_empty() => {
                ChatContent::Text(Cow::Owned(beside + &text))
            }
            ChatContent::Parts(mut parts) if !beside.is_empty() => {
                parts.insert(
                    0,
                    ChatPart::Text {
                        text: Cow::Owned(beside),
                    },
                );
                ChatContent::Parts(parts)
            }
            content => content,
        };
        out.push(ChatRequestMessage::Tool {
            content,
            tool_call_id: &result.call_id,
        });
    }
}

/// Reads a Chat Completions response (`chat.completion` JSON) into an assistant message:
/// the first choice's text (its `url_citation` annotations as the text's annotations, url
/// and title; on an empty text when there is none, as beside a refusal), refusal (as an `error` block with code [`REFUSAL_CODE`](super::REFUSAL_CODE),
/// which goes back to Chat as `refusal`) and tool calls (their arguments strings kept as
/// sent), `reasoning_content` (DeepSeek and other compatible servers) as a reasoning block,
/// usage with cached and reasoning tokens, and the whole response as `raw`. The report notes
/// what the message cannot hold (an `audio` reply), which stays in `raw` only.
///
/// ```
/// use agentstate::message::ContentBlock;
/// use agentstate::providers::openai_chat::{from_openai_chat, to_openai_chat};
/// use serde_json::json;
///
/// let response = json!({
///     "id": "chatcmpl-1", "object": "chat.completion", "model": "gpt-4o",
///     "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
///         "role": "assistant", "content": null,
///         "tool_calls": [{"id": "call_1", "type": "function",
///                         "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}}]}}],
///     "usage": {"prompt_tokens": 20, "completion_tokens": 5, "total_tokens": 25,
///               "prompt_tokens_details": {"cached_tokens": 8}}
/// });
/// let parsed = from_openai_chat(&response)?;
/// assert!(parsed.report.is_empty());
/// let message = parsed.message;
/// assert_eq!(message.tool_calls()[0].function.arguments, r#"{"city":"Paris"}"#);
/// assert_eq!(message.tool_call_blocks().next().unwrap().args.get("city"), Some("Paris".into()));
/// assert_eq!(message.usages.as_ref().unwrap().cache_read_input_tokens, 8);
/// assert_eq!(message.metadata.get("finish_reason"), Some("tool_calls".into()));
///
/// // A refusal is kept as a refusal, and sent back as one.
/// let refused = json!({"choices": [{"message": {"role": "assistant", "content": null,
///                                               "refusal": "I can't help with that."}}]});
/// let message = from_openai_chat(&refused)?.message;
/// let ContentBlock::Error(block) = &message.content[0] else { panic!() };
/// assert_eq!((block.message.as_str(), block.code.as_deref()), ("I can't help with that.", Some("refusal")));
/// let body = serde_json::to_value(to_openai_chat(&[message], None).request).unwrap();
/// assert_eq!(body["messages"][0], json!({"role": "assistant", "content": "",
///                                        "refusal": "I can't help with that."}));
/// # Ok::<(), agentstate::providers::ResponseError>(())
/// ```
pub fn from_openai_chat(response: &Value) -> Result<ParsedResponse, ResponseError> {
    let error = |reason: &str| ResponseError::new("OpenAI Chat", reason);
    let choice = first(response, "choices").ok_or_else(|| error("it has no `choices`"))?;
    let message = choice
        .get("message")
        .filter(|m| m.is_object())
        .ok_or_else(|| error("its first choice has no `message` object"))?;
    let mut content = Vec::new();
    if let Some(reasoning) = str_at(message, "reasoning_content").filter(|r| !r.is_empty()) {
        content.push(ContentBlock::reasoning(reasoning));
    }
    let annotations: Vec<_> = message
        .get("annotations")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|a| a.get("url_citation").and_then(super::url_annotation))
        .collect();
    // Without text (beside a refusal), the citations are kept on an empty text.
    let text = str_at(message, "content").or((!annotations.is_empty()).then_some(""));
    if let Some(text) = text {
        content.push(ContentBlock::Text(TextBlock {
            annotations,
            ..TextBlock::new(text)
        }));
    }
    if let Some(refusal) = str_at(message, "refusal") {
        content.push(super::refusal_block(refusal));
    }
    let mut report = Report::default();
    if message.get("audio").is_some_and(|a| !a.is_null()) {
        super::note_output(0, "audio", &mut report);
    }
    let mut calls = Vec::new();
    for call in message
        .get("tool_calls")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let mut call: ToolCall = serde_json::from_value(call.clone())
            .map_err(|e| error(&format!("a tool call is not in OpenAI's shape: {e}")))?;
        let args = match call.arguments::<Value>() {
            Ok(Value::Object(args)) => args,
            _ => Map::new(),
        };
        content.push(ContentBlock::ToolCall(ToolCallBlock::new(
            call.id.clone(),
            call.function.name.clone(),
            args,
        )));
        call.extra.remove("index");
        calls.push(call);
    }
    let usage = openai_usage(
        response,
        ["prompt_tokens", "completion_tokens"],
        ["prompt_tokens_details", "completion_tokens_details"],
    );
    let message = response_message(
        response,
        content,
        calls,
        Reply {
            provider: "openai",
            id: str_at(response, "id"),
            model: str_at(response, "model"),
            finish_reason: str_at(choice, "finish_reason"),
            usage,
            created: response.get("created").and_then(Value::as_f64),
        },
    );
    Ok(ParsedResponse::new(message, report))
}

/// A whole Chat Completions request body, from [`ModelRequest::to_openai_chat`]: in the API
/// reference's order (`messages`, `model`, then the optional parameters alphabetically), each
/// optional one written only when set. It borrows the request and the messages.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ChatBody<'a> {
    /// The conversation.
    pub messages: Vec<ChatRequestMessage<'a>>,
    /// The model.
    pub model: &'a str,
    /// `frequency_penalty`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub frequency_penalty: Option<f64>,
    /// `max_completion_tokens`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_completion_tokens: Option<u32>,
    /// `presence_penalty`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub presence_penalty: Option<f64>,
    /// `reasoning_effort`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reasoning_effort: Option<Effort>,
    /// `response_format`: a JSON Schema.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub response_format: Option<ChatResponseFormat<'a>>,
    /// `seed`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seed: Option<i64>,
    /// `stop` sequences.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stop: Option<&'a [String]>,
    /// `temperature`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    /// `tool_choice`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<OpenAiToolChoice<'a>>,
    /// `tools`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<ChatTool<'a>>,
    /// `top_p`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub top_p: Option<f64>,
}

/// A Chat tool: `{"type": "function", "function": {"name", "description", "parameters", "strict"}}`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ChatTool<'a> {
    /// Always `"function"`.
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// The function.
    pub function: ChatFunctionDef<'a>,
}

/// A Chat tool's `function`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ChatFunctionDef<'a> {
    /// The name.
    pub name: &'a str,
    /// What it does.
    pub description: &'a str,
    /// The arguments' JSON Schema (rewritten for OpenAI's strict mode when the tool is
    /// strict).
    pub parameters: Cow<'a, Value>,
    /// Whether the arguments must follow the schema exactly.
    pub strict: bool,
}

/// An OpenAI `tool_choice` (Chat's; the Responses body has its own shape of the named one):
/// `"auto"`, `"none"`, `"required"` or a named function.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum OpenAiToolChoice<'a> {
    /// `"auto"`, `"none"` or `"required"`.
    Mode(&'static str),
    /// `{"type": "function", "function": {"name"}}`.
    Function {
        /// Always `"function"`.
        #[serde(rename = "type")]
        kind: &'static str,
        /// The tool.
        function: NamedFunction<'a>,
    },
}

/// A named function: `{"name"}`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NamedFunction<'a> {
    /// The tool's name.
    pub name: &'a str,
}

/// `{"type": "json_schema", "json_schema": {"name", "description"?, "schema", "strict"}}`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ChatResponseFormat<'a> {
    /// Always `"json_schema"`.
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// The schema.
    pub json_schema: JsonSchemaFormat<'a>,
}

/// A structured output's schema in OpenAI's shape: `{"name", "description"?, "schema",
/// "strict"}` (Responses' `text.format` adds `"type": "json_schema"` first).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JsonSchemaFormat<'a> {
    /// `"json_schema"` in Responses' `text.format`; absent in Chat's `json_schema`.
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    pub kind: Option<&'static str>,
    /// The schema's name.
    pub name: &'a str,
    /// What the answer is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<&'a str>,
    /// The JSON Schema (rewritten for OpenAI's strict mode when strict).
    pub schema: Cow<'a, Value>,
    /// Whether the answer must follow it exactly.
    pub strict: bool,
}

/// The schema of a request's structured output in OpenAI's shape, for `provider`.
pub(super) fn json_schema_format<'a>(
    output: &'a OutputSchema,
    kind: Option<&'static str>,
    provider: &'static str,
) -> Result<JsonSchemaFormat<'a>, RequestError> {
    Ok(JsonSchemaFormat {
        kind,
        name: &output.name,
        description: output.description.as_deref(),
        schema: output.schema_for(Dialect::OpenAi, provider, false)?,
        strict: output.strict,
    })
}

/// OpenAI takes an effort, not a budget: the request's effort, refused when it has only a
/// budget.
pub(super) fn openai_effort(
    request: &ModelRequest,
    provider: &'static str,
) -> Result<Option<Effort>, RequestError> {
    match (request.reasoning_effort(), request.thinking_budget()) {
        (None, Some(_)) => Err(RequestError::Unsupported {
            provider,
            parameter: "thinking_budget",
            hint: "OpenAI takes a reasoning effort: set `reasoning_effort`",
        }),
        (effort, _) => Ok(effort),
    }
}

const CHAT: &str = "OpenAI Chat Completions";

impl ModelRequest {
    /// The whole OpenAI Chat Completions body of this request and a conversation (see
    /// [`ModelRequest`] for where each parameter goes and what is refused).
    ///
    /// ```
    /// use agentstate::message::{Message, Role};
    /// use agentstate::providers::{ModelRequest, Tool, ToolChoice};
    /// use serde_json::json;
    ///
    /// let request = ModelRequest::builder("gpt-4o")
    ///     .tool(Tool::new("now", "The time.", json!({"type": "object", "properties": {}})))
    ///     .tool_choice(ToolChoice::Tool("now".into()))
    ///     .seed(7)
    ///     .build()?;
    /// let messages = [Message::text_message("Time?", Role::User)];
    /// let body = request.to_openai_chat(&messages)?.request;
    /// assert_eq!(serde_json::to_string(&body).unwrap(), concat!(
    ///     r#"{"messages":[{"role":"user","content":"Time?"}],"model":"gpt-4o","seed":7,"#,
    ///     r#""tool_choice":{"type":"function","function":{"name":"now"}},"#,
    ///     r#""tools":[{"type":"function","function":{"name":"now","description":"The time.","#,
    ///     r#""parameters":{"properties":{},"type":"object"},"strict":false}}]}"#));
    /// # Ok::<(), agentstate::providers::RequestError>(())
    /// ```
    pub fn to_openai_chat<'a>(
        &'a self,
        conversation: impl Into<Conversation<'a>>,
    ) -> Result<Converted<ChatBody<'a>>, RequestError> {
        self.refuse(CHAT, &[Param::TopK])?;
        self.refuse_tool_choice_without_tools(CHAT)?;
        let reasoning_effort = openai_effort(self, CHAT)?;
        let conversation = conversation.into();
        let converted = to_openai_chat(conversation.messages, conversation.summary);
        let mut report = converted.report;
        self.note_cache(&mut report);
        let s = self.sampling();
        let body = ChatBody {
            messages: converted.request.messages,
            model: self.model(),
            frequency_penalty: s.frequency_penalty,
            max_completion_tokens: self.max_output_tokens(),
            presence_penalty: s.presence_penalty,
            reasoning_effort,
            response_format: self
                .output_schema()
                .map(|output| {
                    Ok::<_, RequestError>(ChatResponseFormat {
                        kind: "json_schema",
                        json_schema: json_schema_format(output, None, CHAT)?,
                    })
                })
                .transpose()?,
            seed: s.seed,
            stop: (!s.stop.is_empty()).then_some(s.stop.as_slice()),
            temperature: s.temperature,
            tool_choice: self.tool_choice().map(|choice| match choice {
                ToolChoice::Tool(name) => OpenAiToolChoice::Function {
                    kind: "function",
                    function: NamedFunction { name },
                },
                other => OpenAiToolChoice::Mode(openai_mode(other)),
            }),
            tools: self
                .tools()
                .iter()
                .map(|tool| {
                    Ok(ChatTool {
                        kind: "function",
                        function: ChatFunctionDef {
                            name: &tool.name,
                            description: &tool.description,
                            parameters: tool.schema_for(Dialect::OpenAi, CHAT)?,
                            strict: tool.strict,
                        },
                    })
                })
                .collect::<Result<_, RequestError>>()?,
            top_p: s.top_p,
        };
        Ok(Converted::new(body, report))
    }
}

/// OpenAI's name of a tool choice other than a named tool.
pub(super) fn openai_mode(choice: &ToolChoice) -> &'static str {
    match choice {
        ToolChoice::Auto | ToolChoice::Tool(_) => "auto",
        ToolChoice::None => "none",
        ToolChoice::Required => "required",
    }
}

#[cfg(feature = "async-openai")]
impl TryFrom<&ChatBody<'_>> for async_openai::types::chat::CreateChatCompletionRequest {
    type Error = serde_json::Error;

    /// The body as async-openai's request (feature `async-openai`), to send with its client.
    /// It fails only where async-openai's type lacks something the body has.
    fn try_from(body: &ChatBody<'_>) -> Result<Self, Self::Error> {
        serde_json::from_value(serde_json::to_value(body)?)
    }
}
