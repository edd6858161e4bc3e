//! Content blocks: the parts of a message's `content`, tagged by `"type"` on the wire exactly
//! as AgentFlow's twelve block models are.
//!
//! Every field is always serialized (optional ones as `null`), in AgentFlow's order, so a
//! block written here reads the same as one dumped by AgentFlow.

use super::json::{serialize_floats, Json, JsonObject};
use super::media::{AnnotationRef, MediaRef};
use super::python_json;
use serde::de::value::MapAccessDeserializer;
use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::{Deserialize, Serialize};
use std::fmt;

/// One part of a message's content.
///
/// On the wire the variant is the `"type"` key; an unknown type is an error that names it, and
/// a block without `"type"` is an error. When `"type"` is the first key, as AgentFlow writes
/// it, the block is read in one pass; otherwise its other keys are kept aside first.
///
/// ```
/// use agentstate::message::{ContentBlock, TextBlock};
///
/// let block: ContentBlock = serde_json::from_str(r#"{"type": "text", "text": "hi"}"#)?;
/// assert_eq!(block, ContentBlock::text("hi"));
/// assert_eq!(block.kind(), "text");
/// assert_eq!(serde_json::to_string(&block)?, r#"{"type":"text","text":"hi","annotations":[]}"#);
///
/// let err = serde_json::from_str::<ContentBlock>(r#"{"type": "hologram"}"#).unwrap_err();
/// assert!(err.to_string().contains("hologram"));
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ContentBlock {
    /// `"text"`: text, with optional annotations.
    Text(TextBlock),
    /// `"image"`: an image.
    Image(ImageBlock),
    /// `"audio"`: an audio clip.
    Audio(AudioBlock),
    /// `"video"`: a video.
    Video(VideoBlock),
    /// `"document"`: a document (PDF and the like).
    Document(DocumentBlock),
    /// `"data"`: any other bytes.
    Data(DataBlock),
    /// `"tool_call"`: the model asks for a tool call.
    ToolCall(ToolCallBlock),
    /// `"remote_tool_call"`: a tool call the client executes.
    RemoteToolCall(RemoteToolCallBlock),
    /// `"tool_result"`: the result of a tool call.
    ToolResult(ToolResultBlock),
    /// `"reasoning"`: a reasoning summary.
    Reasoning(ReasoningBlock),
    /// `"annotation"`: citations or notes.
    Annotation(AnnotationBlock),
    /// `"error"`: an error.
    Error(ErrorBlock),
}

impl ContentBlock {
    /// A text block without annotations.
    pub fn text(text: impl Into<String>) -> Self {
        ContentBlock::Text(TextBlock::new(text))
    }

    /// An image block.
    pub fn image(media: MediaRef) -> Self {
        ContentBlock::Image(ImageBlock::new(media))
    }

    /// A tool-call block.
    pub fn tool_call(
        id: impl Into<String>,
        name: impl Into<String>,
        args: impl Into<JsonObject>,
    ) -> Self {
        ContentBlock::ToolCall(ToolCallBlock::new(id, name, args))
    }

    /// A completed tool-result block (see [`ToolResultBlock::completed`]).
    pub fn tool_result(call_id: impl Into<String>, output: impl Into<Json>) -> Self {
        ContentBlock::ToolResult(ToolResultBlock::completed(call_id, output))
    }

    /// A reasoning block with this summary.
    pub fn reasoning(summary: impl Into<String>) -> Self {
        ContentBlock::Reasoning(ReasoningBlock::new(summary))
    }

    /// An error block with this message.
    pub fn error(message: impl Into<String>) -> Self {
        ContentBlock::Error(ErrorBlock::new(message))
    }

    /// The block's wire `"type"`: `"text"`, `"tool_result"`...
    pub fn kind(&self) -> &'static str {
        match self {
            ContentBlock::Text(_) => "text",
            ContentBlock::Image(_) => "image",
            ContentBlock::Audio(_) => "audio",
            ContentBlock::Video(_) => "video",
            ContentBlock::Document(_) => "document",
            ContentBlock::Data(_) => "data",
            ContentBlock::ToolCall(_) => "tool_call",
            ContentBlock::RemoteToolCall(_) => "remote_tool_call",
            ContentBlock::ToolResult(_) => "tool_result",
            ContentBlock::Reasoning(_) => "reasoning",
            ContentBlock::Annotation(_) => "annotation",
            ContentBlock::Error(_) => "error",
        }
    }

    /// The text of a text block, `None` for every other block.
    pub fn as_text(&self) -> Option<&str> {
        match self {
            ContentBlock::Text(block) => Some(&block.text),
            _ => None,
        }
    }
}

/// The wire names of the block types, for the unknown-type error.
const VARIANTS: &[&str] = &[
    "text",
    "image",
    "audio",
    "video",
    "document",
    "data",
    "tool_call",
    "remote_tool_call",
    "tool_result",
    "reasoning",
    "annotation",
    "error",
];

impl<'de> Deserialize<'de> for ContentBlock {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(BlockVisitor)
    }
}

/// The index of the block type named `tag` in [`VARIANTS`].
fn variant<E: de::Error>(tag: &str) -> Result<usize, E> {
    VARIANTS
        .iter()
        .position(|v| *v == tag)
        .ok_or_else(|| E::unknown_variant(tag, VARIANTS))
}

/// Reads the block of type `VARIANTS[index]` from the rest of a map.
fn read_block<'de, D: Deserializer<'de>>(index: usize, d: D) -> Result<ContentBlock, D::Error> {
    Ok(match index {
        0 => ContentBlock::Text(TextBlock::deserialize(d)?),
        1 => ContentBlock::Image(ImageBlock::deserialize(d)?),
        2 => ContentBlock::Audio(AudioBlock::deserialize(d)?),
        3 => ContentBlock::Video(VideoBlock::deserialize(d)?),
        4 => ContentBlock::Document(DocumentBlock::deserialize(d)?),
        5 => ContentBlock::Data(DataBlock::deserialize(d)?),
        6 => ContentBlock::ToolCall(ToolCallBlock::deserialize(d)?),
        7 => ContentBlock::RemoteToolCall(RemoteToolCallBlock::deserialize(d)?),
        8 => ContentBlock::ToolResult(ToolResultBlock::deserialize(d)?),
        9 => ContentBlock::Reasoning(ReasoningBlock::deserialize(d)?),
        10 => ContentBlock::Annotation(AnnotationBlock::deserialize(d)?),
        _ => ContentBlock::Error(ErrorBlock::deserialize(d)?),
    })
}

struct BlockVisitor;

impl<'de> Visitor<'de> for BlockVisitor {
    type Value = ContentBlock;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a content block: an object with a \"type\"")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<ContentBlock, A::Error> {
        match map.next_key::<Key>()? {
            None => Err(de::Error::missing_field("type")),
            // AgentFlow writes `type` first: read the rest of the map as that block.
            Some(Key::Type) => {
                let tag = map.next_value::<Tag>()?;
                read_block(tag.0, MapAccessDeserializer::new(map))
            }
            Some(Key::Other(first)) => {
                // Keep the entries until the type is known, then read them as that block.
                let mut tag = None;
                let mut text = String::from("{");
                let mut push = |key: &str, value: &Json| {
                    if text.len() > 1 {
                        text.push(',');
                    }
                    text.push_str(&serde_json::to_string(key).unwrap_or_default());
                    text.push(':');
                    text.push_str(value.as_json());
                };
                push(&first, &map.next_value::<Json>()?);
                while let Some(key) = map.next_key::<Key>()? {
                    match key {
                        Key::Type => tag = Some(map.next_value::<Tag>()?.0),
                        Key::Other(key) => push(&key, &map.next_value::<Json>()?),
                    }
                }
                text.push('}');
                let index = tag.ok_or_else(|| de::Error::missing_field("type"))?;
                let mut reader = serde_json::Deserializer::from_str(&text);
                read_block(index, &mut reader).map_err(|e| {
                    let message = e.to_string();
                    let message = match message.rfind(" at line ") {
                        Some(at) => &message[..at],
                        None => &message,
                    };
                    de::Error::custom(message)
                })
            }
        }
    }
}

/// Reads a message's `content`: a list of blocks, allocated for exactly as many blocks as it
/// holds (most messages hold one).
pub(crate) fn deserialize_content<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Vec<ContentBlock>, D::Error> {
    struct ContentVisitor;
    impl<'de> Visitor<'de> for ContentVisitor {
        type Value = Vec<ContentBlock>;
        /// Also what to write instead of a plain string (what every provider writes, and
        /// AgentFlow refuses): serde's error shows the string given, then this.
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str(
                r#"a list of content blocks; for text write "content": [{"type": "text", "text": "..."}] (AgentFlow refuses a plain string too), in Rust Message::text_message(text, role)"#,
            )
        }
        fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
            let mut blocks = Vec::with_capacity(seq.size_hint().unwrap_or(1).min(64));
            while let Some(block) = seq.next_element()? {
                blocks.push(block);
            }
            blocks.shrink_to_fit();
            Ok(blocks)
        }
    }
    deserializer.deserialize_seq(ContentVisitor)
}

/// A key of a block object: `type` or another.
enum Key {
    Type,
    Other(String),
}

impl<'de> Deserialize<'de> for Key {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl Visitor<'_> for KeyVisitor {
            type Value = Key;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a key")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Key, E> {
                Ok(if v == "type" {
                    Key::Type
                } else {
                    Key::Other(v.to_owned())
                })
            }
        }
        deserializer.deserialize_identifier(KeyVisitor)
    }
}

/// A block's `type`, as its index in [`VARIANTS`].
struct Tag(usize);

impl<'de> Deserialize<'de> for Tag {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct TagVisitor;
        impl Visitor<'_> for TagVisitor {
            type Value = Tag;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a content block type")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Tag, E> {
                variant(v).map(Tag)
            }
        }
        deserializer.deserialize_identifier(TagVisitor)
    }
}

macro_rules! into_block {
    ($($variant:ident($ty:ty)),* $(,)?) => {$(
        impl From<$ty> for ContentBlock {
            fn from(block: $ty) -> Self {
                ContentBlock::$variant(block)
            }
        }
    )*};
}

into_block!(
    Text(TextBlock),
    Image(ImageBlock),
    Audio(AudioBlock),
    Video(VideoBlock),
    Document(DocumentBlock),
    Data(DataBlock),
    ToolCall(ToolCallBlock),
    RemoteToolCall(RemoteToolCallBlock),
    ToolResult(ToolResultBlock),
    Reasoning(ReasoningBlock),
    Annotation(AnnotationBlock),
    Error(ErrorBlock),
);

/// `"text"`: text and the sources it cites.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TextBlock {
    /// The text (required).
    pub text: String,
    /// Sources cited by the text (default empty).
    #[serde(default)]
    pub annotations: Vec<AnnotationRef>,
}

impl TextBlock {
    /// A text block without annotations.
    pub fn new(text: impl Into<String>) -> Self {
        TextBlock {
            text: text.into(),
            annotations: Vec::new(),
        }
    }
}

/// `"image"`: an image, with optional alt text and bounding box.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ImageBlock {
    /// The image (required; boxed, as every block's media, to keep blocks small).
    pub media: Box<MediaRef>,
    /// Alternative text.
    pub alt_text: Option<String>,
    /// A bounding box `[x1, y1, x2, y2]`.
    #[serde(serialize_with = "serialize_floats")]
    pub bbox: Option<Vec<f64>>,
}

impl ImageBlock {
    /// An image block with only its media.
    pub fn new(media: MediaRef) -> Self {
        ImageBlock {
            media: Box::new(media),
            alt_text: None,
            bbox: None,
        }
    }
}

/// `"audio"`: an audio clip.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AudioBlock {
    /// The audio (required).
    pub media: Box<MediaRef>,
    /// A transcript.
    pub transcript: Option<String>,
    /// The sample rate in Hz.
    pub sample_rate: Option<i64>,
    /// The number of channels.
    pub channels: Option<i64>,
}

impl AudioBlock {
    /// An audio block with only its media.
    pub fn new(media: MediaRef) -> Self {
        AudioBlock {
            media: Box::new(media),
            transcript: None,
            sample_rate: None,
            channels: None,
        }
    }
}

/// `"video"`: a video and an optional thumbnail.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VideoBlock {
    /// The video (required).
    pub media: Box<MediaRef>,
    /// A thumbnail image.
    pub thumbnail: Option<Box<MediaRef>>,
}

impl VideoBlock {
    /// A video block with only its media.
    pub fn new(media: MediaRef) -> Self {
        VideoBlock {
            media: Box::new(media),
            thumbnail: None,
        }
    }
}

/// `"document"`: a document, with optional extracted text, pages and excerpt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DocumentBlock {
    /// The document (required).
    pub media: Box<MediaRef>,
    /// Extracted text.
    pub text: Option<String>,
    /// Page numbers.
    pub pages: Option<Vec<i64>>,
    /// A short excerpt.
    pub excerpt: Option<String>,
}

impl DocumentBlock {
    /// A document block with only its media.
    pub fn new(media: MediaRef) -> Self {
        DocumentBlock {
            media: Box::new(media),
            text: None,
            pages: None,
            excerpt: None,
        }
    }
}

/// `"data"`: bytes of any other MIME type, inline or by reference.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DataBlock {
    /// The MIME type (required).
    pub mime_type: String,
    /// Base64-encoded bytes.
    pub data_base64: Option<String>,
    /// A reference to the bytes.
    pub media: Option<Box<MediaRef>>,
}

impl DataBlock {
    /// A data block with only its MIME type.
    pub fn new(mime_type: impl Into<String>) -> Self {
        DataBlock {
            mime_type: mime_type.into(),
            data_base64: None,
            media: None,
        }
    }
}

/// `"tool_call"`: the model asks for a call of tool `name`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCallBlock {
    /// The call id (required).
    pub id: String,
    /// The tool's name (required).
    pub name: String,
    /// The arguments (default `{}`), in the order they were read.
    #[serde(default)]
    pub args: JsonObject,
    /// A provider tool type such as `"web_search"`, `None` for a function tool.
    pub tool_type: Option<String>,
    /// A provider's opaque signature of the call (Gemini's `thought_signature`, base64), to be
    /// sent back unchanged to the same provider. Not an AgentFlow field: written only when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<Box<str>>,
    /// Provider-specific fields of the call (`"provider"`: who made it, `"id"`: an OpenAI
    /// Responses item id). Not an AgentFlow field: written only when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extra: Option<Box<serde_json::Map<String, serde_json::Value>>>,
}

impl ToolCallBlock {
    /// A function-tool call block.
    pub fn new(
        id: impl Into<String>,
        name: impl Into<String>,
        args: impl Into<JsonObject>,
    ) -> Self {
        ToolCallBlock {
            id: id.into(),
            name: name.into(),
            args: args.into(),
            tool_type: None,
            signature: None,
            extra: None,
        }
    }
}

/// `"remote_tool_call"`: a tool call that the client, not the graph, executes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RemoteToolCallBlock {
    /// The call id (required).
    pub id: String,
    /// The tool's name (required).
    pub name: String,
    /// The arguments (default `{}`), in the order they were read.
    #[serde(default)]
    pub args: JsonObject,
    /// The tool type (default `"remote"`; never null).
    #[serde(default = "remote")]
    pub tool_type: String,
}

fn remote() -> String {
    "remote".to_owned()
}

impl RemoteToolCallBlock {
    /// A remote call block with `tool_type` `"remote"`.
    pub fn new(
        id: impl Into<String>,
        name: impl Into<String>,
        args: impl Into<JsonObject>,
    ) -> Self {
        RemoteToolCallBlock {
            id: id.into(),
            name: name.into(),
            args: args.into(),
            tool_type: remote(),
        }
    }
}

/// The `status` of a [`ToolResultBlock`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolResultStatus {
    /// `"completed"`.
    Completed,
    /// `"failed"`.
    Failed,
}

/// `"tool_result"`: what a tool returned for the call `call_id`.
///
/// ```
/// use agentstate::message::{ToolResultBlock, ToolResultStatus};
/// use serde_json::json;
///
/// let ok = ToolResultBlock::completed("call_1", "Sunny");
/// assert_eq!(ok.status, Some(ToolResultStatus::Completed));
/// let failed = ToolResultBlock::failed("call_2", json!({"error": "timeout"}));
/// assert!(failed.is_error);
///
/// let bare: ToolResultBlock = serde_json::from_value(json!({"call_id": "c"}))?;
/// assert!(bare.output.is_null());
/// assert_eq!(bare.output_text(), "null");
/// assert!(!bare.is_error);
/// assert_eq!(bare.status, None);
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolResultBlock {
    /// The id of the call this answers (required).
    pub call_id: String,
    /// The tool's output: any JSON value (default `null`), kept as read.
    #[serde(default)]
    pub output: Json,
    /// Whether the output is an error (default false).
    #[serde(default)]
    pub is_error: bool,
    /// The call's status, if known.
    pub status: Option<ToolResultStatus>,
}

impl ToolResultBlock {
    /// A result with no status and `is_error` false.
    pub fn new(call_id: impl Into<String>, output: impl Into<Json>) -> Self {
        ToolResultBlock {
            call_id: call_id.into(),
            output: output.into(),
            is_error: false,
            status: None,
        }
    }

    /// A successful result: status `completed`, `is_error` false.
    pub fn completed(call_id: impl Into<String>, output: impl Into<Json>) -> Self {
        ToolResultBlock {
            status: Some(ToolResultStatus::Completed),
            ..ToolResultBlock::new(call_id, output)
        }
    }

    /// A failed result: status `failed`, `is_error` true.
    pub fn failed(call_id: impl Into<String>, output: impl Into<Json>) -> Self {
        ToolResultBlock {
            is_error: true,
            status: Some(ToolResultStatus::Failed),
            ..ToolResultBlock::new(call_id, output)
        }
    }

    /// The output as AgentFlow's `Message.text()` writes it: a string as is, any other value
    /// (`null` included) as Python's `json.dumps` writes it, keys in the order read.
    ///
    /// ```
    /// use agentstate::message::ToolResultBlock;
    /// use serde_json::json;
    ///
    /// assert_eq!(ToolResultBlock::new("c", "Sunny").output_text(), "Sunny");
    /// let read: ToolResultBlock =
    ///     serde_json::from_str(r#"{"call_id": "c", "output": {"temp": 22.0, "city": "Zürich"}}"#)?;
    /// assert_eq!(read.output_text(), r#"{"temp": 22.0, "city": "Z\u00fcrich"}"#);
    /// # Ok::<(), serde_json::Error>(())
    /// ```
    pub fn output_text(&self) -> String {
        match self.output.as_string() {
            Some(text) => text,
            None => python_json::text_to_string(self.output.as_json()),
        }
    }
}

/// `"reasoning"`: a summary of the model's reasoning and optional detailed steps.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReasoningBlock {
    /// The summary (required).
    pub summary: String,
    /// Detailed steps.
    pub details: Option<Vec<String>>,
    /// The provider's signature of this reasoning (Anthropic's thinking `signature`, Gemini's
    /// `thought_signature`, OpenAI's `encrypted_content`), to be sent back unchanged to the
    /// same provider. Not an AgentFlow field: written only when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<Box<str>>,
    /// Provider-specific fields (`"provider"`: who made it; `"id"`: an OpenAI Responses item
    /// id; `"redacted"`: an Anthropic `redacted_thinking` block). Not an AgentFlow field:
    /// written only when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extra: Option<Box<serde_json::Map<String, serde_json::Value>>>,
}

impl ReasoningBlock {
    /// A reasoning block with only a summary.
    pub fn new(summary: impl Into<String>) -> Self {
        ReasoningBlock {
            summary: summary.into(),
            details: None,
            signature: None,
            extra: None,
        }
    }
}

/// The `kind` of an [`AnnotationBlock`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AnnotationKind {
    /// `"citation"` (the default).
    #[default]
    Citation,
    /// `"note"`.
    Note,
}

/// `"annotation"`: citations or notes about spans of the message's text.
///
/// ```
/// use agentstate::message::{AnnotationBlock, AnnotationKind, AnnotationRef};
///
/// let cite = AnnotationBlock {
///     refs: vec![AnnotationRef::url("https://example.com")],
///     spans: Some(vec![(0, 5)]),
///     ..AnnotationBlock::default()
/// };
/// assert_eq!(cite.kind, AnnotationKind::Citation);
/// let json = serde_json::to_value(&cite)?;
/// assert_eq!(json["spans"], serde_json::json!([[0, 5]]));
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AnnotationBlock {
    /// Citation or note (default citation).
    #[serde(default)]
    pub kind: AnnotationKind,
    /// The sources (default empty).
    #[serde(default)]
    pub refs: Vec<AnnotationRef>,
    /// The annotated spans, as `[start, end]` pairs.
    pub spans: Option<Vec<(i64, i64)>>,
}

/// `"error"`: an error, with an optional code and data.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorBlock {
    /// The error message (required).
    pub message: String,
    /// An error code (a string, e.g. `"429"`).
    pub code: Option<String>,
    /// Extra data, in the order read.
    pub data: Option<JsonObject>,
}

impl ErrorBlock {
    /// An error block with only a message.
    pub fn new(message: impl Into<String>) -> Self {
        ErrorBlock {
            message: message.into(),
            code: None,
            data: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    fn parse(value: Value) -> Result<ContentBlock, serde_json::Error> {
        serde_json::from_value(value)
    }

    fn dump(block: &ContentBlock) -> Value {
        serde_json::to_value(block).unwrap()
    }

    #[test]
    fn unknown_tag_is_an_error_naming_it() {
        let err = parse(json!({"type": "sticker", "text": "x"})).unwrap_err();
        assert!(err.to_string().contains("sticker"), "{err}");
    }

    #[test]
    fn missing_or_non_string_tag_is_an_error() {
        let err = parse(json!({"text": "x"})).unwrap_err();
        assert!(err.to_string().contains("type"), "{err}");
        assert!(parse(json!({"type": null, "text": "x"})).is_err());
        assert!(parse(json!({"type": 1, "text": "x"})).is_err());
        assert!(parse(json!("text")).is_err());
    }

    #[test]
    fn required_fields_are_required() {
        for (tag, field) in [
            ("text", "text"),
            ("image", "media"),
            ("audio", "media"),
            ("video", "media"),
            ("document", "media"),
            ("data", "mime_type"),
            ("tool_call", "id"),
            ("remote_tool_call", "id"),
            ("tool_result", "call_id"),
            ("reasoning", "summary"),
            ("error", "message"),
        ] {
            let err = parse(json!({"type": tag})).unwrap_err();
            assert!(err.to_string().contains(field), "{tag}: {err}");
        }
        // The annotation block has no required field.
        assert_eq!(
            parse(json!({"type": "annotation"})).unwrap(),
            ContentBlock::Annotation(AnnotationBlock::default())
        );
    }

    #[test]
    fn defaults_of_every_block() {
        let media = json!({"url": "https://e.x/a"});
        let cases = [
            (
                json!({"type": "text", "text": "t"}),
                json!({"type": "text", "text": "t", "annotations": []}),
            ),
            (
                json!({"type": "image", "media": media}),
                json!({"type": "image", "media": MediaRef::url("https://e.x/a"), "alt_text": null, "bbox": null}),
            ),
            (
                json!({"type": "audio", "media": media}),
                json!({"type": "audio", "media": MediaRef::url("https://e.x/a"), "transcript": null, "sample_rate": null, "channels": null}),
            ),
            (
                json!({"type": "video", "media": media}),
                json!({"type": "video", "media": MediaRef::url("https://e.x/a"), "thumbnail": null}),
            ),
            (
                json!({"type": "document", "media": media}),
                json!({"type": "document", "media": MediaRef::url("https://e.x/a"), "text": null, "pages": null, "excerpt": null}),
            ),
            (
                json!({"type": "data", "mime_type": "application/zip"}),
                json!({"type": "data", "mime_type": "application/zip", "data_base64": null, "media": null}),
            ),
            (
                json!({"type": "tool_call", "id": "c", "name": "f"}),
                json!({"type": "tool_call", "id": "c", "name": "f", "args": {}, "tool_type": null}),
            ),
            (
                json!({"type": "remote_tool_call", "id": "c", "name": "f"}),
                json!({"type": "remote_tool_call", "id": "c", "name": "f", "args": {}, "tool_type": "remote"}),
            ),
            (
                json!({"type": "tool_result", "call_id": "c"}),
                json!({"type": "tool_result", "call_id": "c", "output": null, "is_error": false, "status": null}),
            ),
            (
                json!({"type": "reasoning", "summary": "s"}),
                json!({"type": "reasoning", "summary": "s", "details": null}),
            ),
            (
                json!({"type": "annotation"}),
                json!({"type": "annotation", "kind": "citation", "refs": [], "spans": null}),
            ),
            (
                json!({"type": "error", "message": "m"}),
                json!({"type": "error", "message": "m", "code": null, "data": null}),
            ),
        ];
        for (input, expected) in cases {
            let block = parse(input.clone()).unwrap();
            assert_eq!(dump(&block), expected, "{input}");
            assert_eq!(block.kind(), input["type"], "{input}");
        }
    }

    #[test]
    fn enumerated_fields_are_closed() {
        assert!(parse(json!({"type": "tool_result", "call_id": "c", "status": "error"})).is_err());
        assert!(parse(json!({"type": "annotation", "kind": "footnote"})).is_err());
        // A remote call's tool_type is a string, never null.
        assert!(parse(
            json!({"type": "remote_tool_call", "id": "c", "name": "f", "tool_type": null})
        )
        .is_err());
        // args is an object.
        assert!(parse(json!({"type": "tool_call", "id": "c", "name": "f", "args": [1]})).is_err());
        assert!(parse(json!({"type": "tool_call", "id": "c", "name": "f", "args": null})).is_err());
        // spans are pairs.
        assert!(parse(json!({"type": "annotation", "spans": [[1, 2, 3]]})).is_err());
        // an error code is a string.
        assert!(parse(json!({"type": "error", "message": "m", "code": 429})).is_err());
    }

    #[test]
    fn type_may_come_anywhere_with_the_same_errors() {
        let first = r#"{"type":"tool_call","id":"c","name":"f","args":{"z":1,"a":[2]}}"#;
        let last = r#"{"id":"c","name":"f","args":{"z":1,"a":[2]},"type":"tool_call"}"#;
        let a: ContentBlock = serde_json::from_str(first).unwrap();
        let b: ContentBlock = serde_json::from_str(last).unwrap();
        assert_eq!(a, b);
        let ContentBlock::ToolCall(call) = &b else {
            panic!("{b:?}")
        };
        assert_eq!(call.args.as_json(), r#"{"z":1,"a":[2]}"#);
        // The messages serde gives for an internally tagged enum, wherever `type` is.
        let expected = "unknown variant `sticker`, expected one of `text`, `image`, `audio`, \
                        `video`, `document`, `data`, `tool_call`, `remote_tool_call`, \
                        `tool_result`, `reasoning`, `annotation`, `error`";
        for text in [r#"{"type":"sticker"}"#, r#"{"x":1,"type":"sticker"}"#] {
            let err = serde_json::from_str::<ContentBlock>(text).unwrap_err();
            assert!(err.to_string().starts_with(expected), "{err}");
        }
        for text in [r#"{}"#, r#"{"text":"x"}"#] {
            let err = serde_json::from_str::<ContentBlock>(text).unwrap_err();
            assert!(err.to_string().starts_with("missing field `type`"), "{err}");
        }
        let err = serde_json::from_str::<ContentBlock>(r#"{"annotations":[],"type":"text"}"#)
            .unwrap_err();
        assert!(err.to_string().starts_with("missing field `text`"), "{err}");
        assert!(!err.to_string().contains("at line 1 column 1 at"), "{err}");
        // Through serde's buffering too (an untagged enum).
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Buffered {
            Block(ContentBlock),
        }
        let Buffered::Block(c) = serde_json::from_str(last).unwrap();
        assert_eq!(c, a);
    }

    #[test]
    fn content_is_allocated_for_its_blocks_and_blocks_are_small() {
        let content = deserialize_content(&mut serde_json::Deserializer::from_str(
            r#"[{"type":"text","text":"a"}]"#,
        ))
        .unwrap();
        assert_eq!((content.len(), content.capacity()), (1, 1));
        let three = r#"[{"type":"text","text":"a"},{"type":"reasoning","summary":"b"},{"type":"text","text":"c"}]"#;
        let content = deserialize_content(&mut serde_json::Deserializer::from_str(three)).unwrap();
        assert_eq!((content.len(), content.capacity()), (3, 3));
        // Media are boxed: a block is at most a tool call's size (with its boxed provider
        // signature and fields), not a media reference's.
        let size = std::mem::size_of::<ContentBlock>();
        assert!(size <= 112, "{size}");
    }

    #[test]
    fn unknown_keys_are_ignored() {
        let block = parse(json!({"type": "text", "text": "t", "lang": "fr"})).unwrap();
        assert_eq!(block, ContentBlock::text("t"));
    }

    #[test]
    fn every_block_round_trips_in_field_order() {
        let blocks: Vec<ContentBlock> = vec![
            TextBlock {
                text: "See the map".into(),
                annotations: vec![AnnotationRef::url("https://maps.example").with_title("Map")],
            }
            .into(),
            ImageBlock {
                alt_text: Some("a harbour".into()),
                bbox: Some(vec![1.0, 2.5, 30.0, 40.0]),
                ..ImageBlock::new(MediaRef::url("https://img.example/h.jpg"))
            }
            .into(),
            AudioBlock {
                transcript: Some("bonjour".into()),
                sample_rate: Some(44100),
                channels: Some(2),
                ..AudioBlock::new(MediaRef::data("AAAA", "audio/ogg"))
            }
            .into(),
            VideoBlock {
                thumbnail: Some(Box::new(MediaRef::url("https://vid.example/t.png"))),
                ..VideoBlock::new(MediaRef::file_id("vid-7"))
            }
            .into(),
            DocumentBlock {
                text: Some("Chapter one".into()),
                pages: Some(vec![4, 5]),
                excerpt: Some("Chapter".into()),
                ..DocumentBlock::new(MediaRef::file_id("doc-3"))
            }
            .into(),
            DataBlock {
                data_base64: Some("e30=".into()),
                ..DataBlock::new("application/json")
            }
            .into(),
            ToolCallBlock {
                tool_type: Some("file_search".into()),
                ..ToolCallBlock::new(
                    "t1",
                    "find",
                    Json::from(json!({"q": "invoices"}))
                        .parse::<JsonObject>()
                        .unwrap(),
                )
            }
            .into(),
            RemoteToolCallBlock::new("r1", "open_tab", JsonObject::new()).into(),
            ToolResultBlock::failed("t1", json!({"code": 3})).into(),
            ReasoningBlock {
                details: Some(vec!["first".into(), "second".into()]),
                ..ReasoningBlock::new("two steps")
            }
            .into(),
            AnnotationBlock {
                kind: AnnotationKind::Note,
                refs: vec![],
                spans: Some(vec![(2, 9)]),
            }
            .into(),
            ErrorBlock {
                code: Some("E42".into()),
                data: Some(JsonObject::from_iter([("retry", false)])),
                ..ErrorBlock::new("quota exceeded")
            }
            .into(),
        ];
        let kinds: Vec<&str> = blocks.iter().map(ContentBlock::kind).collect();
        assert_eq!(kinds, VARIANTS);
        for block in &blocks {
            let text = serde_json::to_string(block).unwrap();
            let back: ContentBlock = serde_json::from_str(&text).unwrap();
            assert_eq!(&back, block, "{text}");
        }
        // Field order is AgentFlow's declaration order, `type` first.
        assert_eq!(
            serde_json::to_string(&blocks[8]).unwrap(),
            r#"{"type":"tool_result","call_id":"t1","output":{"code":3},"is_error":true,"status":"failed"}"#
        );
        assert_eq!(
            serde_json::to_string(&blocks[4]).unwrap(),
            r#"{"type":"document","media":{"kind":"file_id","url":null,"file_id":"doc-3","data_base64":null,"mime_type":null,"size_bytes":null,"sha256":null,"filename":null,"width":null,"height":null,"duration_ms":null,"page":null},"text":"Chapter one","pages":[4,5],"excerpt":"Chapter"}"#
        );
        assert_eq!(
            serde_json::to_string(&blocks[10]).unwrap(),
            r#"{"type":"annotation","kind":"note","refs":[],"spans":[[2,9]]}"#
        );
    }

    #[test]
    fn as_text() {
        assert_eq!(ContentBlock::text("a").as_text(), Some("a"));
        assert_eq!(ContentBlock::reasoning("a").as_text(), None);
    }
}
