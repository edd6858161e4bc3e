//! Anthropic Messages: messages to the request's `system` and `messages`, and a `message`
//! response back to a [`Message`].
//!
//! System messages become `system` text blocks (the `context_summary` one more, after the
//! leading ones). Tool results, from `tool` messages and from user messages, are gathered
//! into one user turn, `tool_result` blocks first, with their media inside. Tool calls are
//! `tool_use` blocks with their arguments as an object. Thinking made by Anthropic (a
//! reasoning block with `extra["provider"] == "anthropic"` and a signature) goes back as
//! `thinking` (or `redacted_thinking`) unchanged; other reasoning is dropped with a note. A
//! final assistant turn, which Anthropic would take as a prefill, is dropped with a note
//! (made a user turn when it is the only one), as AgentFlow does.

use super::report::{Action, Issue, Report};
use super::request::{
    invalid_for, CacheAt, CacheControl, Conversation, Effort, ModelRequest, Param, RequestError,
    ToolChoice,
};
use super::strict::Dialect;
use super::{
    calls_of, check_pairing, has_media, is_call, leading_system, media_of, note_annotations,
    note_dropped, note_empty_conversation, note_reasoning, note_reasoning_string, note_signature,
    note_system_moved, out_of_place, output_blocks, output_text, parse_data_url, placeholder,
    provider_extra, reasoning_provider, response_message, source, str_at, system_text, usages,
    Converted, ParsedResponse, Provider, Reply, ResponseError, Source, ToolIds,
};
use crate::message::{
    ContentBlock, Message, ReasoningBlock, Role, TextBlock, ToolCall, ToolCallBlock,
};
use serde::Serialize;
use serde_json::{Map, Value};
use std::borrow::Cow;

/// Converts a conversation to an Anthropic Messages request's `system` and `messages`.
///
/// The `context_summary` becomes a `system` text block after the leading system messages.
///
/// ```
/// use agentstate::message::{ContentBlock, Message, ReasoningBlock, Role};
/// use agentstate::providers::anthropic::to_anthropic;
/// use serde_json::json;
///
/// let thinking = ReasoningBlock {
///     signature: Some("sig-1".into()),
///     extra: json!({"provider": "anthropic"}).as_object().cloned().map(Box::new),
///     ..ReasoningBlock::new("The user wants a greeting.")
/// };
/// let messages = vec![
///     Message::text_message("Say hi", Role::User),
///     Message::new(Role::Assistant, vec![thinking.into(), ContentBlock::text("Hi!")]),
///     Message::text_message("Again", Role::User),
/// ];
/// let converted = to_anthropic(&messages, Some("Earlier: the user said hello."));
/// let body = converted.request;
/// assert_eq!(body["system"][0]["text"], "Earlier: the user said hello.");
/// assert_eq!(body["messages"][1]["content"][0],
///     json!({"type": "thinking", "thinking": "The user wants a greeting.", "signature": "sig-1"}));
/// assert!(converted.report.is_empty());
/// ```
pub fn to_anthropic(messages: &[Message], context_summary: Option<&str>) -> Converted<Value> {
    let parts = conversation(messages, context_summary);
    let mut request = Map::new();
    if !parts.system.is_empty() {
        request.insert("system".into(), to_value(&parts.system));
    }
    request.insert("messages".into(), to_value(&parts.turns));
    Converted {
        request: Value::Object(request),
        report: parts.report,
        tool_ids: parts.ids,
    }
}

/// A typed part of a body as a JSON value (serializing these types cannot fail).
fn to_value<T: Serialize>(part: &T) -> Value {
    serde_json::to_value(part).unwrap_or_default()
}

/// A turn: `{"role", "content"}`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AnthropicTurn<'a> {
    /// `"user"` or `"assistant"`.
    pub role: &'static str,
    /// A string, or blocks.
    pub content: AnthropicContent<'a>,
}

/// A turn's or a tool result's `content`: one string when it is all text (as AgentFlow sends
/// it), else blocks.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum AnthropicContent<'a> {
    /// A string.
    Text(Cow<'a, str>),
    /// Content blocks.
    Blocks(Vec<AnthropicBlock<'a>>),
}

/// A content block, tagged by `type`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum AnthropicBlock<'a> {
    /// `{"type": "text", "text"}`.
    Text {
        /// The text.
        text: Cow<'a, str>,
        /// A cache breakpoint.
        #[serde(skip_serializing_if = "Option::is_none")]
        cache_control: Option<CacheControl>,
    },
    /// `{"type": "image", "source"}`.
    Image {
        /// Where the image is.
        source: AnthropicSource<'a>,
        /// A cache breakpoint.
        #[serde(skip_serializing_if = "Option::is_none")]
        cache_control: Option<CacheControl>,
    },
    /// `{"type": "document", "source"}`.
    Document {
        /// Where the document is.
        source: AnthropicSource<'a>,
        /// A cache breakpoint.
        #[serde(skip_serializing_if = "Option::is_none")]
        cache_control: Option<CacheControl>,
    },
    /// `{"type": "tool_use", "id", "name", "input"}`.
    ToolUse {
        /// The call id (rewritten when Anthropic would refuse it).
        id: Cow<'a, str>,
        /// The tool.
        name: &'a str,
        /// The arguments, an object.
        input: Value,
        /// A cache breakpoint.
        #[serde(skip_serializing_if = "Option::is_none")]
        cache_control: Option<CacheControl>,
    },
    /// `{"type": "tool_result", "tool_use_id", "content", "is_error"?}`.
    ToolResult {
        /// The call it answers.
        tool_use_id: Cow<'a, str>,
        /// The result.
        content: AnthropicContent<'a>,
        /// `true` for a failed call (absent otherwise).
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        is_error: bool,
        /// A cache breakpoint.
        #[serde(skip_serializing_if = "Option::is_none")]
        cache_control: Option<CacheControl>,
    },
    /// `{"type": "thinking", "thinking", "signature"}`.
    Thinking {
        /// The thinking text.
        thinking: &'a str,
        /// Anthropic's signature.
        signature: &'a str,
    },
    /// `{"type": "redacted_thinking", "data"}`.
    RedactedThinking {
        /// The encrypted thinking.
        data: &'a str,
    },
}

/// A media source, tagged by `type`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum AnthropicSource<'a> {
    /// `{"type": "base64", "media_type", "data"}`.
    Base64 {
        /// The MIME type.
        media_type: Cow<'a, str>,
        /// The bytes, base64.
        data: Cow<'a, str>,
    },
    /// `{"type": "url", "url"}`.
    Url {
        /// The URL.
        url: Cow<'a, str>,
    },
    /// `{"type": "file", "file_id"}`.
    File {
        /// An uploaded file's id.
        file_id: Cow<'a, str>,
    },
}

fn own(text: Cow<'_, str>) -> Cow<'static, str> {
    Cow::Owned(text.into_owned())
}

impl AnthropicSource<'_> {
    fn into_owned(self) -> AnthropicSource<'static> {
        match self {
            AnthropicSource::Base64 { media_type, data } => AnthropicSource::Base64 {
                media_type: own(media_type),
                data: own(data),
            },
            AnthropicSource::Url { url } => AnthropicSource::Url { url: own(url) },
            AnthropicSource::File { file_id } => AnthropicSource::File {
                file_id: own(file_id),
            },
        }
    }
}

impl<'a> AnthropicBlock<'a> {
    /// A text block without cache breakpoint.
    fn text(text: impl Into<Cow<'a, str>>) -> Self {
        AnthropicBlock::Text {
            text: text.into(),
            cache_control: None,
        }
    }

    /// The text of a plain text block (without cache breakpoint).
    fn plain_text(&self) -> Option<&str> {
        match self {
            AnthropicBlock::Text {
                text,
                cache_control: None,
            } => Some(text),
            _ => None,
        }
    }

    /// A block of a user turn, owning its text (the blocks of a tool's output, which are
    /// read from its JSON, are media and text only).
    fn into_owned(self) -> AnthropicBlock<'static> {
        match self {
            AnthropicBlock::Text {
                text,
                cache_control,
            } => AnthropicBlock::Text {
                text: own(text),
                cache_control,
            },
            AnthropicBlock::Image {
                source,
                cache_control,
            } => AnthropicBlock::Image {
                source: source.into_owned(),
                cache_control,
            },
            AnthropicBlock::Document {
                source,
                cache_control,
            } => AnthropicBlock::Document {
                source: source.into_owned(),
                cache_control,
            },
            // Not in a user turn: sent as empty text (never met).
            _ => AnthropicBlock::text(""),
        }
    }

    /// Puts a cache breakpoint on the block, where Anthropic takes one (not on thinking).
    fn set_cache(&mut self) {
        match self {
            AnthropicBlock::Text { cache_control, .. }
            | AnthropicBlock::Image { cache_control, .. }
            | AnthropicBlock::Document { cache_control, .. }
            | AnthropicBlock::ToolUse { cache_control, .. }
            | AnthropicBlock::ToolResult { cache_control, .. } => {
                *cache_control = Some(CacheControl::EPHEMERAL);
            }
            AnthropicBlock::Thinking { .. } | AnthropicBlock::RedactedThinking { .. } => {}
        }
    }
}

/// Joins adjacent plain text blocks into one, as AgentFlow sends a message's text.
fn merge_texts(blocks: &mut Vec<AnthropicBlock<'_>>) {
    blocks.dedup_by(|next, prev| {
        let (Some(next), Some(_)) = (next.plain_text(), prev.plain_text()) else {
            return false;
        };
        let next = next.to_owned();
        if let AnthropicBlock::Text { text, .. } = prev {
            text.to_mut().push_str(&next);
        }
        true
    });
}

/// One string when all blocks are plain text, else the blocks.
fn text_or_blocks(blocks: Vec<AnthropicBlock<'_>>) -> AnthropicContent<'_> {
    if blocks.iter().all(|b| b.plain_text().is_some()) {
        let mut text = String::new();
        for block in &blocks {
            text.push_str(block.plain_text().unwrap_or_default());
        }
        AnthropicContent::Text(Cow::Owned(text))
    } else {
        AnthropicContent::Blocks(blocks)
    }
}

/// A tool call id as sent: borrowed unless rewritten.
fn sent_id<'a>(ids: &ToolIds, id: &'a str) -> Cow<'a, str> {
    match ids.sent(id) {
        sent if sent == id => Cow::Borrowed(id),
        sent => Cow::Owned(sent.to_owned()),
    }
}

/// A conversation in Anthropic's shape.
struct Parts<'a> {
    system: Vec<AnthropicBlock<'a>>,
    turns: Vec<AnthropicTurn<'a>>,
    /// The index of the first message of each turn.
    firsts: Vec<Option<usize>>,
    report: Report,
    ids: ToolIds,
}

fn conversation<'a>(messages: &'a [Message], context_summary: Option<&'a str>) -> Parts<'a> {
    let mut report = Report::default();
    check_pairing(messages, &mut report);
    let ids = ToolIds::anthropic(messages, &mut report);
    let mut system: Vec<AnthropicBlock<'a>> = Vec::new();
    let mut turns = Turns::default();
    let leading = leading_system(messages);
    for (index, message) in messages.iter().enumerate() {
        if index == leading {
            summary(&mut system, context_summary);
        }
        match message.role {
            Role::System => {
                note_system_moved(index, leading, &mut report);
                let text = system_text(message, index, &mut report);
                if !text.is_empty() {
                    system.push(AnthropicBlock::text(text));
                }
            }
            Role::Tool => {
                turns.first.get_or_insert(index);
                tool(message, index, &mut turns, &ids, &mut report);
            }
            Role::User => {
                turns.first.get_or_insert(index);
                for (block, content) in message.content.iter().enumerate() {
                    match content {
                        ContentBlock::ToolResult(_) => {
                            let result =
                                tool_result(message, index, block, None, &ids, &mut report);
                            turns.results.extend(result);
                        }
                        other => {
                            if let Some(part) = user_block(other, index, block, &mut report) {
                                turns.after.push(part);
                            }
                        }
                    }
                }
                turns.user_from = Some(index);
                turns.list |= has_media(message);
                turns.flush(&mut report);
            }
            Role::Assistant => {
                turns.flush(&mut report);
                let mut blocks = assistant(message, index, &ids, &mut report);
                merge_texts(&mut blocks);
                turns.push(index, "assistant", blocks, &mut report);
            }
        }
    }
    if leading == messages.len() {
        summary(&mut system, context_summary);
    }
    turns.flush(&mut report);
    let mut out = turns.out;
    if out.last().is_some_and(|(_, turn)| turn.role == "assistant") {
        if let Some((index, mut turn)) = out.pop() {
            if out.is_empty() {
                report.push(
                    index,
                    None,
                    Issue::TrailingAssistant,
                    Action::SentAsUserMessage,
                );
                turn.role = "user";
                out.push((index, turn));
            } else {
                report.push(index, None, Issue::TrailingAssistant, Action::Dropped);
            }
        }
    }
    note_empty_conversation(out.len(), &mut report);
    let mut firsts = turns.firsts;
    firsts.truncate(out.len());
    Parts {
        system,
        turns: out.into_iter().map(|(_, turn)| turn).collect(),
        firsts,
        report,
        ids,
    }
}

fn summary<'a>(system: &mut Vec<AnthropicBlock<'a>>, context_summary: Option<&'a str>) {
    if let Some(summary) = context_summary.filter(|s| !s.is_empty()) {
        system.push(AnthropicBlock::text(summary));
    }
}

/// The turns built so far, and the user turn being gathered: tool results first, then the
/// rest.
#[derive(Default)]
struct Turns<'a> {
    out: Vec<(Option<usize>, AnthropicTurn<'a>)>,
    /// The index of the first message of each turn of `out`.
    firsts: Vec<Option<usize>>,
    /// The first message of the user turn being gathered.
    first: Option<usize>,
    results: Vec<AnthropicBlock<'a>>,
    after: Vec<AnthropicBlock<'a>>,
    user_from: Option<usize>,
    /// Whether the user turn's content must be a list (a user message with media).
    list: bool,
}

impl<'a> Turns<'a> {
    fn flush(&mut self, report: &mut Report) {
        if self.results.is_empty() && self.after.is_empty() {
            self.first = None;
            if let Some(index) = self.user_from.take() {
                report.push(Some(index), None, Issue::EmptyMessage, Action::Dropped);
            }
            return;
        }
        let mut blocks = std::mem::take(&mut self.results);
        blocks.append(&mut self.after);
        let from = self.user_from.take();
        let list = std::mem::take(&mut self.list);
        let first = self.first.take().or(from);
        self.push_blocks(from, "user", blocks, list);
        self.firsts.push(first);
    }

    fn push(
        &mut self,
        index: usize,
        role: &'static str,
        blocks: Vec<AnthropicBlock<'a>>,
        report: &mut Report,
    ) {
        if blocks.is_empty() {
            report.push(Some(index), None, Issue::EmptyMessage, Action::Dropped);
        } else {
            self.push_blocks(Some(index), role, blocks, false);
            self.firsts.push(Some(index));
        }
    }

    /// A turn; text-only content is one string (unless `list`), as AgentFlow sends it.
    fn push_blocks(
        &mut self,
        index: Option<usize>,
        role: &'static str,
        blocks: Vec<AnthropicBlock<'a>>,
        list: bool,
    ) {
        let content = if list {
            AnthropicContent::Blocks(blocks)
        } else {
            text_or_blocks(blocks)
        };
        self.out.push((index, AnthropicTurn { role, content }));
    }
}

/// A media source: `{"type": "base64" | "url" | "file", ...}`.
fn media_source<'a>(
    media: Source<'a>,
    mime: Option<&'a str>,
    default_mime: &'static str,
) -> Option<AnthropicSource<'a>> {
    Some(match media {
        Source::Url(url) => match parse_data_url(url) {
            Some((mime, data)) => AnthropicSource::Base64 {
                media_type: Cow::Borrowed(mime),
                data: Cow::Borrowed(data),
            },
            None => AnthropicSource::Url {
                url: Cow::Borrowed(url),
            },
        },
        Source::Data(data) => AnthropicSource::Base64 {
            media_type: Cow::Borrowed(mime.unwrap_or(default_mime)),
            data: Cow::Borrowed(data),
        },
        Source::FileId(id) => AnthropicSource::File {
            file_id: Cow::Borrowed(id),
        },
        Source::Missing => return None,
    })
}

/// A block of a user turn (or of a tool result's content); `None`, with a note, when
/// Anthropic has no block for it.
fn user_block<'a>(
    content: &'a ContentBlock,
    index: usize,
    block: usize,
    report: &mut Report,
) -> Option<AnthropicBlock<'a>> {
    let unsupported = |report: &mut Report, action: Action| {
        report.push(
            Some(index),
            Some(block),
            Issue::UnsupportedSource {
                kind: content.kind(),
            },
            action,
        );
    };
    match content {
        ContentBlock::Text(t) => {
            note_annotations(t, index, block, report);
            (!t.text.is_empty()).then(|| AnthropicBlock::text(t.text.as_str()))
        }
        ContentBlock::Image(_) | ContentBlock::Document(_) => {
            let media = media_of(content)?;
            let image = content.kind() == "image";
            let default = if image {
                "image/png"
            } else {
                "application/pdf"
            };
            match media_source(source(media), media.mime_type.as_deref(), default) {
                Some(source) if image => Some(AnthropicBlock::Image {
                    source,
                    cache_control: None,
                }),
                Some(source) => Some(AnthropicBlock::Document {
                    source,
                    cache_control: None,
                }),
                None => {
                    unsupported(report, Action::Dropped);
                    None
                }
            }
        }
        ContentBlock::Audio(_) | ContentBlock::Video(_) => {
            let media = media_of(content)?;
            let inline = matches!(
                (content, source(media)),
                (ContentBlock::Audio(_), Source::Data(_))
                    | (ContentBlock::Video(_), Source::Data(_) | Source::Url(_))
            );
            if inline {
                report.push(
                    Some(index),
                    Some(block),
                    Issue::UnsupportedBlock {
                        kind: content.kind(),
                    },
                    Action::Dropped,
                );
                None
            } else {
                let text = placeholder(content.kind(), media);
                unsupported(report, Action::ReplacedWithText(text.clone()));
                Some(AnthropicBlock::text(text))
            }
        }
        ContentBlock::Reasoning(r) => {
            note_reasoning(r, index, block, report);
            None
        }
        other => {
            note_dropped(other.kind(), index, block, report);
            None
        }
    }
}

/// A `tool_result` block for the result at `block` of `message` (message `index`). With
/// `extra` (the media of a tool message with one result), its content is the message's whole
/// text (as AgentFlow sends it) and that media. An output of content blocks is sent as
/// blocks (text, images and documents; other media as [`user_block`] sends them).
fn tool_result<'a>(
    message: &'a Message,
    index: usize,
    block: usize,
    extra: Option<Vec<AnthropicBlock<'a>>>,
    ids: &ToolIds,
    report: &mut Report,
) -> Option<AnthropicBlock<'a>> {
    let ContentBlock::ToolResult(result) = &message.content[block] else {
        return None;
    };
    let content = match (output_blocks(&result.output), extra) {
        (Some(parts), extra) => {
            let mut blocks: Vec<AnthropicBlock<'a>> = parts
                .iter()
                .filter_map(|part| user_block(part, index, block, report))
                .map(AnthropicBlock::into_owned)
                .collect();
            if let Some(media) = extra {
                let beside = message.content.iter().filter_map(|b| match b {
                    ContentBlock::Text(t) if !t.text.is_empty() => {
                        Some(AnthropicBlock::text(t.text.as_str()))
                    }
                    _ => None,
                });
                blocks.extend(beside);
                blocks.extend(media);
            }
            text_or_blocks(blocks)
        }
        (None, Some(mut blocks)) => {
            let text = message.text();
            if blocks.iter().all(|b| b.plain_text().is_some()) {
                AnthropicContent::Text(Cow::Owned(text))
            } else {
                if !text.is_empty() {
                    blocks.insert(0, AnthropicBlock::text(text));
                }
                AnthropicContent::Blocks(blocks)
            }
        }
        (None, None) => AnthropicContent::Text(output_text(&result.output)),
    };
    Some(AnthropicBlock::ToolResult {
        tool_use_id: sent_id(ids, &result.call_id),
        content,
        is_error: result.is_error,
        cache_control: None,
    })
}

/// A tool message: its results into the user turn being gathered.
fn tool<'a>(
    message: &'a Message,
    index: usize,
    turns: &mut Turns<'a>,
    ids: &ToolIds,
    report: &mut Report,
) {
    let results: Vec<usize> = message
        .content
        .iter()
        .enumerate()
        .filter(|(_, b)| matches!(b, ContentBlock::ToolResult(_)))
        .map(|(i, _)| i)
        .collect();
    if results.is_empty() {
        report.push(
            Some(index),
            None,
            Issue::ToolMessageWithoutResult,
            Action::SentAsUserMessage,
        );
    }
    let mut media = Vec::new();
    for (block, content) in message.content.iter().enumerate() {
        match content {
            ContentBlock::ToolResult(_) => {}
            ContentBlock::Text(t) if results.len() <= 1 => {
                note_annotations(t, index, block, report);
                if results.is_empty() && !t.text.is_empty() {
                    turns.after.push(AnthropicBlock::text(t.text.as_str()));
                }
            }
            ContentBlock::Text(t) => {
                report.push(
                    Some(index),
                    Some(block),
                    Issue::ToolMessageText,
                    Action::MovedToUserMessage,
                );
                if !t.text.is_empty() {
                    turns.after.push(AnthropicBlock::text(t.text.as_str()));
                }
            }
            ContentBlock::Image(_) | ContentBlock::Document(_) if results.len() == 1 => {
                media.extend(user_block(content, index, block, report));
            }
            other => {
                let part = user_block(other, index, block, report);
                if !results.is_empty() && part.is_some() {
                    report.push(
                        Some(index),
                        Some(block),
                        Issue::ToolResultNonText { kind: other.kind() },
                        Action::MovedToUserMessage,
                    );
                }
                turns.after.extend(part);
            }
        }
    }
    match results.as_slice() {
        [] => {}
        [only] => {
            let result = tool_result(message, index, *only, Some(media), ids, report);
            turns.results.extend(result);
        }
        several => {
            for &block in several {
                let result = tool_result(message, index, block, None, ids, report);
                turns.results.extend(result);
            }
        }
    }
    if turns.user_from.is_none() {
        turns.user_from = Some(index);
    }
}

/// An assistant turn's blocks: thinking made by Anthropic, text, then `tool_use` blocks.
fn assistant<'a>(
    message: &'a Message,
    index: usize,
    ids: &ToolIds,
    report: &mut Report,
) -> Vec<AnthropicBlock<'a>> {
    note_reasoning_string(message, index, report);
    let mut blocks = Vec::with_capacity(message.content.len());
    for (block, content) in message.content.iter().enumerate() {
        match content {
            ContentBlock::Text(t) => {
                note_annotations(t, index, block, report);
                if !t.text.is_empty() {
                    blocks.push(AnthropicBlock::text(t.text.as_str()));
                }
            }
            ContentBlock::Reasoning(r) => match thinking(r) {
                Some(thinking) => blocks.push(thinking),
                None => note_reasoning(r, index, block, report),
            },
            ContentBlock::ToolResult(result) => {
                let text = out_of_place(result, index, block, report);
                blocks.push(AnthropicBlock::text(text));
            }
            c if is_call(c) => {}
            other => match super::refusal_of(other) {
                Some(refusal) => {
                    super::note_refusal(index, block, report);
                    blocks.push(AnthropicBlock::text(refusal));
                }
                None => note_dropped(other.kind(), index, block, report),
            },
        }
    }
    for call in calls_of(message) {
        note_signature(&call, index, report);
        let input = call.object(index, report);
        blocks.push(AnthropicBlock::ToolUse {
            id: sent_id(ids, call.id),
            name: call.name,
            input,
            cache_control: None,
        });
    }
    blocks
}

/// A `thinking` or `redacted_thinking` block, for reasoning Anthropic made and signed.
fn thinking(reasoning: &ReasoningBlock) -> Option<AnthropicBlock<'_>> {
    if reasoning_provider(reasoning) != Some(Provider::Anthropic.as_str()) {
        return None;
    }
    let signature = reasoning.signature.as_deref()?;
    let redacted = reasoning
        .extra
        .as_ref()
        .and_then(|e| e.get("redacted"))
        .and_then(Value::as_bool)
        .unwrap_or(false);
    Some(if redacted {
        AnthropicBlock::RedactedThinking { data: signature }
    } else {
        AnthropicBlock::Thinking {
            thinking: &reasoning.summary,
            signature,
        }
    })
}

/// Reads an Anthropic Messages response (a `message` object) into an assistant message:
/// `thinking` blocks as reasoning with their signature (`redacted_thinking` as reasoning with
/// `extra["redacted"]` and the data as signature), `text` blocks (their citations with a URL
/// as the text's annotations), `tool_use` blocks as tool calls, a `stop_reason` of `refusal`
/// as a refusal block after them (an `error` block with code
/// [`REFUSAL_CODE`](super::REFUSAL_CODE), as OpenAI's refusal is read: its message the
/// `stop_details`' explanation, its data the `stop_details`), usage with cache tokens, and
/// the whole response as `raw`. Other blocks (`server_tool_use`, `web_search_tool_result`...)
/// have no block in a message: each is noted in the report, and stays in `raw` only.
///
/// With the [`ToolIds`] of the request ([`Converted::tool_ids`]), a tool call id that
/// was rewritten for Anthropic is mapped back to the original.
///
/// ```
/// use agentstate::message::ContentBlock;
/// use agentstate::providers::anthropic::from_anthropic;
/// use serde_json::json;
///
/// let response = json!({
///     "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
///     "stop_reason": "tool_use",
///     "content": [
///         {"type": "thinking", "thinking": "Need the weather.", "signature": "EqQB"},
///         {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}}
///     ],
///     "usage": {"input_tokens": 50, "output_tokens": 20, "cache_read_input_tokens": 40}
/// });
/// let parsed = from_anthropic(&response, None)?;
/// assert!(parsed.report.is_empty());
/// let message = parsed.message;
/// let ContentBlock::Reasoning(thinking) = &message.content[0] else { panic!() };
/// assert_eq!(thinking.signature.as_deref(), Some("EqQB"));
/// assert_eq!(message.tool_calls()[0].function.arguments, r#"{"city": "Paris"}"#);
/// assert_eq!(message.usages.unwrap().cache_read_input_tokens, 40);
///
/// // Server tools have no block in a message: noted, and kept in `raw`.
/// let response = json!({"content": [
///     {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "Paris"}},
///     {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": []},
///     {"type": "text", "text": "Sunny.", "citations": [{"type": "web_search_result_location",
///      "url": "https://w.example", "title": "W", "cited_text": "sunny", "encrypted_index": "x"}]}
/// ]});
/// let parsed = from_anthropic(&response, None)?;
/// let kinds: Vec<_> = parsed.report.notes().iter().map(|n| n.issue.to_string()).collect();
/// assert_eq!(kinds, ["a message has no block for the response's `server_tool_use`",
///                    "a message has no block for the response's `web_search_tool_result`"]);
/// let ContentBlock::Text(text) = &parsed.message.content[0] else { panic!() };
/// assert_eq!(text.annotations[0].title.as_deref(), Some("W"));
/// # Ok::<(), agentstate::providers::ResponseError>(())
/// ```
pub fn from_anthropic(
    response: &Value,
    tool_ids: Option<&ToolIds>,
) -> Result<ParsedResponse, ResponseError> {
    let error = |reason: &str| ResponseError::new("Anthropic", reason);
    let blocks = response
        .get("content")
        .and_then(Value::as_array)
        .ok_or_else(|| error("it has no `content` list"))?;
    let mut content = Vec::new();
    let mut calls = Vec::new();
    let mut report = Report::default();
    for (at, block) in blocks.iter().enumerate() {
        match str_at(block, "type") {
            Some("text") => {
                let annotations = block
                    .get("citations")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(super::url_annotation)
                    .collect();
                content.push(ContentBlock::Text(TextBlock {
                    annotations,
                    ..TextBlock::new(str_at(block, "text").unwrap_or(""))
                }));
            }
            Some("thinking") => content.push(ContentBlock::Reasoning(ReasoningBlock {
                signature: str_at(block, "signature").map(Into::into),
                extra: provider_extra(Provider::Anthropic, &[]),
                ..ReasoningBlock::new(str_at(block, "thinking").unwrap_or(""))
            })),
            Some("redacted_thinking") => content.push(ContentBlock::Reasoning(ReasoningBlock {
                signature: str_at(block, "data").map(Into::into),
                extra: provider_extra(Provider::Anthropic, &[("redacted", Value::Bool(true))]),
                ..ReasoningBlock::new("")
            })),
            Some("tool_use") => {
                let (Some(id), Some(name)) = (str_at(block, "id"), str_at(block, "name")) else {
                    return Err(error("a tool_use block has no `id` or `name`"));
                };
                let id = tool_ids.map_or(id, |ids| ids.original(id));
                let input = block.get("input").cloned().unwrap_or(Value::Null);
                let args = match &input {
                    Value::Object(args) => args.clone(),
                    _ => Map::new(),
                };
                content.push(ContentBlock::ToolCall(ToolCallBlock {
                    extra: provider_extra(Provider::Anthropic, &[]),
                    ..ToolCallBlock::new(id, name, args)
                }));
                calls.push(ToolCall::new(id, name, input));
            }
            other => super::note_output(at, other.unwrap_or("unknown"), &mut report),
        }
    }
    if str_at(response, "stop_reason") == Some("refusal") {
        let details = response.get("stop_details").filter(|d| d.is_object());
        let data = details
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        content.push(super::stop_refusal(
            details.and_then(|d| str_at(d, "explanation")),
            "The model refused to continue (Anthropic `stop_reason`: `refusal`).",
            data,
        ));
    }
    let usage = response.get("usage").filter(|u| u.is_object()).map(|u| {
        let mut usage = usages(
            super::count(u, &["input_tokens"]),
            super::count(u, &["output_tokens"]),
            None,
            super::count(u, &["cache_read_input_tokens"]),
            0,
        );
        usage.cache_creation_input_tokens = super::count(u, &["cache_creation_input_tokens"]);
        usage
    });
    let message = response_message(
        response,
        content,
        calls,
        Reply {
            provider: "anthropic",
            id: str_at(response, "id"),
            model: str_at(response, "model"),
            finish_reason: str_at(response, "stop_reason"),
            usage,
            created: None,
        },
    );
    Ok(ParsedResponse::new(message, report))
}

/// A whole Anthropic Messages request body, from [`ModelRequest::to_anthropic`]: in the API
/// reference's order (`max_tokens`, `messages`, `model`, then the optional parameters
/// alphabetically), each optional one written only when set, and every block with its `type`
/// first.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AnthropicBody<'a> {
    /// `max_tokens` (required: Anthropic has no default).
    pub max_tokens: u32,
    /// The conversation's turns.
    pub messages: Vec<AnthropicTurn<'a>>,
    /// The model.
    pub model: &'a str,
    /// `output_config`: the effort and the structured output's format.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_config: Option<AnthropicOutputConfig<'a>>,
    /// `stop_sequences`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stop_sequences: Option<&'a [String]>,
    /// The system prompt's text blocks.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub system: Vec<AnthropicBlock<'a>>,
    /// `thinking`: `{"type": "enabled", "budget_tokens"}`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub thinking: Option<AnthropicThinking>,
    /// `tool_choice`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<AnthropicToolChoice<'a>>,
    /// `tools`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<AnthropicTool<'a>>,
}

/// `{"effort"?, "format"?}`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AnthropicOutputConfig<'a> {
    /// The effort (`low` to `max`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub effort: Option<Effort>,
    /// `{"type": "json_schema", "schema"}`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub format: Option<AnthropicFormat<'a>>,
}

/// `{"type": "json_schema", "schema"}`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AnthropicFormat<'a> {
    /// Always `"json_schema"`.
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// The schema, rewritten for Anthropic's strict mode (structured outputs always are).
    pub schema: Cow<'a, Value>,
}

/// `{"type": "enabled", "budget_tokens"}`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AnthropicThinking {
    /// Always `"enabled"`.
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// The thinking budget.
    pub budget_tokens: u32,
}

/// `{"type": "auto" | "none" | "any"}` or `{"type": "tool", "name"}`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AnthropicToolChoice<'a> {
    /// `auto`, `none`, `any` or `tool`.
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// The tool, for `tool`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<&'a str>,
}

/// A tool: `{"name", "description", "input_schema", "cache_control"?, "strict"?}`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AnthropicTool<'a> {
    /// The name.
    pub name: &'a str,
    /// What it does.
    pub description: &'a str,
    /// The arguments' JSON Schema (rewritten for Anthropic's strict mode when the tool is
    /// strict).
    pub input_schema: Cow<'a, Value>,
    /// A cache breakpoint (on the last tool, when asked).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cache_control: Option<CacheControl>,
    /// `true` when the tool is strict (absent otherwise).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub strict: bool,
}

const ANTHROPIC: &str = "Anthropic Messages";

impl ModelRequest {
    /// The whole Anthropic Messages body of this request and a conversation (see
    /// [`ModelRequest`] for where each parameter goes and what is refused), with
    /// the tool call ids rewritten for Anthropic in the result's `tool_ids`. Refused without
    /// [`max_output_tokens`](super::request::ModelRequestBuilder::max_output_tokens), which
    /// Anthropic requires and has no default for.
    ///
    /// ```
    /// use agentstate::message::{Message, Role};
    /// use agentstate::providers::{CacheAt, ModelRequest};
    /// use serde_json::json;
    ///
    /// let messages = [
    ///     Message::text_message("Be brief.", Role::System),
    ///     Message::text_message("A long document...", Role::User),
    /// ];
    /// let request = ModelRequest::builder("claude-sonnet-4-5").cache_message(CacheAt::Last).build()?;
    /// let error = request.to_anthropic(&messages).unwrap_err();
    /// assert_eq!(error.to_string(),
    ///     "Anthropic Messages requires `max_tokens` and has no default; set it with `max_output_tokens`");
    ///
    /// let request = ModelRequest::builder("claude-sonnet-4-5")
    ///     .max_output_tokens(1024)
    ///     .cache_message(CacheAt::Last)
    ///     .build()?;
    /// let body = serde_json::to_value(request.to_anthropic(&messages)?.request).unwrap();
    /// assert_eq!(body["messages"][0]["content"], json!([{"type": "text", "text": "A long document...",
    ///     "cache_control": {"type": "ephemeral"}}]));
    /// # Ok::<(), agentstate::providers::RequestError>(())
    /// ```
    pub fn to_anthropic<'a>(
        &'a self,
        conversation: impl Into<Conversation<'a>>,
    ) -> Result<Converted<AnthropicBody<'a>>, RequestError> {
        self.refuse(
            ANTHROPIC,
            &[
                Param::Temperature,
                Param::TopP,
                Param::TopK,
                Param::Seed,
                Param::FrequencyPenalty,
                Param::PresencePenalty,
            ],
        )?;
        let max_tokens = self.max_output_tokens().ok_or(RequestError::Missing {
            provider: ANTHROPIC,
            parameter: "max_tokens",
            setter: "max_output_tokens",
        })?;
        let effort = match self.reasoning_effort() {
            Some(effort @ (Effort::Off | Effort::Minimal)) => {
                return Err(invalid_for(
                    ANTHROPIC,
                    "reasoning_effort",
                    format_args!(
                        "`{}` is not one of low, medium, high, xhigh, max",
                        effort.as_str()
                    ),
                ))
            }
            effort => effort,
        };
        let thinking = match self.thinking_budget() {
            Some(budget) if budget < 1024 => {
                return Err(invalid_for(
                    ANTHROPIC,
                    "thinking_budget",
                    format_args!("{budget} tokens is under the minimum of 1024"),
                ))
            }
            Some(budget) if budget >= max_tokens => {
                return Err(invalid_for(
                    ANTHROPIC,
                    "thinking_budget",
                    format_args!("{budget} tokens is not under max_tokens ({max_tokens})"),
                ))
            }
            Some(_)
                if matches!(
                    self.tool_choice(),
                    Some(ToolChoice::Required | ToolChoice::Tool(_))
                ) =>
            {
                return Err(invalid_for(
                    ANTHROPIC,
                    "tool_choice",
                    "thinking takes only `auto` or `none`: a forced tool call is refused",
                ))
            }
            budget => budget.map(|budget_tokens| AnthropicThinking {
                kind: "enabled",
                budget_tokens,
            }),
        };
        let conversation = conversation.into();
        let mut parts = self::conversation(conversation.messages, conversation.summary);
        let cache = self.cache();
        if cache.system {
            match parts.system.last_mut() {
                Some(block) => block.set_cache(),
                None => parts.report.push(
                    None,
                    None,
                    super::report::Issue::NotApplicable {
                        parameter: "cache_breakpoints.system",
                        reason: "the request has no system prompt",
                    },
                    Action::Dropped,
                ),
            }
        }
        if let Some(at) = cache.message {
            let turn = match at {
                CacheAt::Last => parts.turns.len().checked_sub(1),
                CacheAt::Message(i) => parts.firsts.iter().rposition(|f| f.is_some_and(|f| f <= i)),
            };
            if let Some(turn) = turn {
                mark_turn(&mut parts.turns[turn]);
            }
        }
        let tools_len = self.tools().len();
        if cache.tools && tools_len == 0 {
            parts.report.push(
                None,
                None,
                super::report::Issue::NotApplicable {
                    parameter: "cache_breakpoints.tools",
                    reason: "the request has no tools",
                },
                Action::Dropped,
            );
        }
        let format = self
            .output_schema()
            .map(|output| output.schema_for(Dialect::Anthropic, ANTHROPIC, true))
            .transpose()?;
        let tool_schemas = self
            .tools()
            .iter()
            .map(|tool| tool.schema_for(Dialect::Anthropic, ANTHROPIC))
            .collect::<Result<Vec<_>, _>>()?;
        let body = AnthropicBody {
            max_tokens,
            messages: parts.turns,
            model: self.model(),
            output_config: (effort.is_some() || self.output_schema().is_some()).then(|| {
                AnthropicOutputConfig {
                    effort,
                    format: format.map(|schema| AnthropicFormat {
                        kind: "json_schema",
                        schema,
                    }),
                }
            }),
            stop_sequences: (!self.sampling().stop.is_empty())
                .then_some(self.sampling().stop.as_slice()),
            system: parts.system,
            thinking,
            tool_choice: self.tool_choice().map(|choice| match choice {
                ToolChoice::Auto => AnthropicToolChoice {
                    kind: "auto",
                    name: None,
                },
                ToolChoice::None => AnthropicToolChoice {
                    kind: "none",
                    name: None,
                },
                ToolChoice::Required => AnthropicToolChoice {
                    kind: "any",
                    name: None,
                },
                ToolChoice::Tool(name) => AnthropicToolChoice {
                    kind: "tool",
                    name: Some(name),
                },
            }),
            tools: self
                .tools()
                .iter()
                .zip(tool_schemas)
                .enumerate()
                .map(|(i, (tool, input_schema))| AnthropicTool {
                    name: &tool.name,
                    description: &tool.description,
                    input_schema,
                    cache_control: (cache.tools && i + 1 == tools_len)
                        .then_some(CacheControl::EPHEMERAL),
                    strict: tool.strict,
                })
                .collect(),
        };
        Ok(Converted {
            request: body,
            report: parts.report,
            tool_ids: parts.ids,
        })
    }
}

/// Puts a cache breakpoint on a turn's last block (a string content becomes one text block).
fn mark_turn(turn: &mut AnthropicTurn<'_>) {
    if let AnthropicContent::Text(text) = &mut turn.content {
        let text = std::mem::take(text);
        turn.content = AnthropicContent::Blocks(vec![AnthropicBlock::text(text)]);
    }
    if let AnthropicContent::Blocks(blocks) = &mut turn.content {
        if let Some(last) = blocks.last_mut() {
            last.set_cache();
        }
    }
}
