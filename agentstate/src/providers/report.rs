//! What a conversion to a provider's request could not express, and what it did instead.

use serde::Serialize;
use std::fmt;

/// How much a note matters: what the model will not see, or whether the provider will refuse
/// the request. Ordered: `Info < Warning < Refused`.
///
/// ```
/// use agentstate::providers::{Issue, Severity};
///
/// assert_eq!(Issue::EmptyConversation.severity(), Severity::Refused);
/// assert_eq!(Issue::SystemInConversation.severity(), Severity::Info);
/// assert!(Severity::Info < Severity::Warning && Severity::Warning < Severity::Refused);
/// assert_eq!(serde_json::to_string(&Severity::Warning)?, r#""warning""#);
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    /// Moved, rewritten or left out without loss to the model: the request is valid and the
    /// model sees everything it would have seen (in another place or shape).
    Info,
    /// Something the model would have seen is dropped or replaced (by a placeholder text or
    /// `{}`); the request is valid.
    Warning,
    /// Sent although the provider will refuse the request (an HTTP 400).
    Refused,
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Severity::Info => "info",
            Severity::Warning => "warning",
            Severity::Refused => "refused",
        })
    }
}

/// One thing a provider's request could not carry as it was, and what was done with it.
///
/// Serialized flat, with its severity: `{"message": 3, "block": 1, "issue":
/// "unsupported_block", "kind": "video", "action": "dropped", "severity": "warning"}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Note {
    /// The index of the message in the converted slice; `None` for the context summary, the
    /// whole conversation ([`Issue::EmptyConversation`]), a request parameter
    /// ([`Issue::NotApplicable`]), a stream's event ([`Issue::UnknownEvent`]) and the notes of
    /// the `from_*` functions (about a response).
    pub message: Option<usize>,
    /// The index of the block in that message's `content`, `None` for the whole message (or
    /// a `tools_calls` entry without a block). In the notes of the `from_*` functions: the
    /// index of the item in the response's list (`output`, `content`, `parts`).
    pub block: Option<usize>,
    /// What could not be expressed.
    pub issue: Issue,
    /// What the converter did with it.
    pub action: Action,
}

/// What a provider's request (or, for the `from_*` functions, a message) could not express.
///
/// Serialized with its kind under `"issue"` (`{"issue": "unsupported_block", "kind":
/// "video"}`). Each kind's [`Severity`] is given in its doc ([`Issue::severity`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "issue", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Issue {
    /// A block of this kind (`"video"`, `"data"`, `"annotation"`...) has no equivalent in the
    /// provider's request, in this role or place. [`Severity::Warning`].
    UnsupportedBlock {
        /// The block's wire type.
        kind: &'static str,
    },
    /// A media block whose reference the provider cannot take (an image by file id in OpenAI
    /// Chat, a document by URL...). [`Severity::Warning`].
    UnsupportedSource {
        /// The block's wire type.
        kind: &'static str,
    },
    /// A media block by file id, sent to Gemini as `file_data.file_uri`, but the id is not a
    /// URI (Gemini takes the `uri` of an uploaded file, `https://...`, or `gs://...`).
    /// [`Severity::Refused`].
    FileIdNotUri {
        /// The file id.
        id: String,
    },
    /// A text block's citations (`annotations`): no provider takes them in a request.
    /// [`Severity::Info`].
    Annotations,
    /// Reasoning that the provider cannot take back: made by another provider (`from`), or
    /// without the signature or id the provider needs. [`Severity::Info`]: the provider did
    /// not make it, so it would not use it.
    Reasoning {
        /// The provider that made it, if recorded.
        from: Option<String>,
    },
    /// A tool call's provider signature (Gemini's `thought_signature`) sent to another
    /// provider. [`Severity::Info`].
    Signature,
    /// A system message after the conversation started, where the provider has no system
    /// role inside the conversation. [`Severity::Info`].
    SystemInConversation,
    /// Non-text content in a system message (system prompts are text only).
    /// [`Severity::Warning`].
    SystemNonText {
        /// The block's wire type.
        kind: &'static str,
    },
    /// Non-text content in a tool result, where the provider takes text only (it is moved
    /// after the tool results). [`Severity::Info`].
    ToolResultNonText {
        /// The block's wire type.
        kind: &'static str,
    },
    /// A tool result's `is_error` flag: the provider has no such flag. [`Severity::Info`].
    ToolResultErrorFlag,
    /// A tool result inside an assistant or system message. [`Severity::Info`].
    ToolResultOutOfPlace,
    /// A text block inside a tool message with several results. [`Severity::Info`].
    ToolMessageText,
    /// A `tool` message without any `tool_result` block (so without a call id).
    /// [`Severity::Info`].
    ToolMessageWithoutResult,
    /// A tool call id the provider does not accept (Anthropic's ids match
    /// `^[a-zA-Z0-9_-]+$`), sent as `sent` instead; every use of the id in the conversation
    /// is rewritten the same way (see [`ToolIds`](super::ToolIds)). [`Severity::Info`].
    ToolCallIdRewritten {
        /// The original id.
        id: String,
        /// The id sent.
        sent: String,
    },
    /// A tool call's arguments are not valid JSON. [`Severity::Warning`].
    InvalidArguments {
        /// The parse error.
        error: String,
    },
    /// A tool call's arguments are valid JSON but not an object. [`Severity::Warning`].
    ArgumentsNotObject,
    /// A tool call no tool result answers before the next turn. [`Severity::Refused`]
    /// (OpenAI and Anthropic refuse it).
    UnansweredToolCall {
        /// The call id.
        id: String,
    },
    /// A tool result whose call id no preceding assistant turn made. [`Severity::Refused`]
    /// (OpenAI and Anthropic refuse it).
    UnmatchedToolResult {
        /// The call id.
        id: String,
    },
    /// Two tool calls of one assistant turn share an id. [`Severity::Refused`].
    DuplicateToolCallId {
        /// The call id.
        id: String,
    },
    /// A message with nothing the provider can take (it rejects empty turns).
    /// [`Severity::Info`]: nothing is lost.
    EmptyMessage,
    /// No message left to send (an empty conversation, or only system messages): the
    /// provider refuses a request without messages. The note's `message` is `None`.
    /// [`Severity::Refused`].
    EmptyConversation,
    /// An assistant message last in the conversation: the provider takes it as a prefill,
    /// which current models reject. [`Severity::Warning`].
    TrailingAssistant,
    /// A refusal (an `error` block with code `"refusal"`, as the `from_*` functions read one)
    /// sent to a provider that has no refusal in its requests. [`Severity::Info`].
    Refusal,
    /// The way back (`from_*`): an item of the response that a [`Message`] has no block for
    /// (`"web_search_call"`, `"server_tool_use"`, `"web_search_tool_result"`...); it stays
    /// in the message's `raw`. [`Severity::Warning`].
    ///
    /// [`Message`]: crate::message::Message
    UnsupportedOutput {
        /// The item's or block's type.
        kind: String,
    },
    /// The way back, streamed: an event of a type this version does not know, skipped (once
    /// per type; what it carried is in the final response's `raw` when the provider puts it
    /// there). [`Severity::Warning`].
    UnknownEvent {
        /// The event's type.
        event: String,
    },
    /// A request parameter that does not apply to the provider and changes nothing there
    /// (prompt-cache breakpoints, where the provider caches prefixes by itself); the note's
    /// `message` and `block` are `None`. [`Severity::Info`].
    NotApplicable {
        /// The parameter (`"cache_breakpoints"`).
        parameter: &'static str,
        /// Why (`"the provider caches prompt prefixes by itself"`).
        reason: &'static str,
    },
}

impl Issue {
    /// How much this kind of issue matters (given in each variant's doc).
    ///
    /// ```
    /// use agentstate::providers::{Issue, Severity};
    ///
    /// assert_eq!(Issue::UnansweredToolCall { id: "c1".into() }.severity(), Severity::Refused);
    /// assert_eq!(Issue::UnsupportedBlock { kind: "video" }.severity(), Severity::Warning);
    /// assert_eq!(Issue::Annotations.severity(), Severity::Info);
    /// ```
    pub fn severity(&self) -> Severity {
        match self {
            Issue::FileIdNotUri { .. }
            | Issue::UnansweredToolCall { .. }
            | Issue::UnmatchedToolResult { .. }
            | Issue::DuplicateToolCallId { .. }
            | Issue::EmptyConversation => Severity::Refused,
            Issue::UnsupportedBlock { .. }
            | Issue::UnsupportedSource { .. }
            | Issue::SystemNonText { .. }
            | Issue::InvalidArguments { .. }
            | Issue::ArgumentsNotObject
            | Issue::TrailingAssistant
            | Issue::UnsupportedOutput { .. }
            | Issue::UnknownEvent { .. } => Severity::Warning,
            Issue::Annotations
            | Issue::Reasoning { .. }
            | Issue::Signature
            | Issue::SystemInConversation
            | Issue::ToolResultNonText { .. }
            | Issue::ToolResultErrorFlag
            | Issue::ToolResultOutOfPlace
            | Issue::ToolMessageText
            | Issue::ToolMessageWithoutResult
            | Issue::ToolCallIdRewritten { .. }
            | Issue::EmptyMessage
            | Issue::Refusal
            | Issue::NotApplicable { .. } => Severity::Info,
        }
    }
}

/// What a converter did with something it could not express.
///
/// Serialized with its name under `"action"` and a replacement text under `"text"`
/// (`{"action": "replaced_with_text", "text": "[Video: v.mp4]"}`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "action", content = "text", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Action {
    /// Left out of the request.
    Dropped,
    /// Replaced by this text.
    ReplacedWithText(String),
    /// Moved into the provider's system prompt.
    MovedToSystem,
    /// Moved to a user message right after the tool results of the turn.
    MovedToUserMessage,
    /// Sent as an empty object `{}`.
    SentAsEmptyObject,
    /// Sent as text, in the message's text.
    SentAsText,
    /// Sent as a user message.
    SentAsUserMessage,
    /// Sent as it is: the provider will likely reject the request.
    SentAsIs,
    /// Sent rewritten (a tool call id the provider does not accept).
    Rewritten,
    /// Not read into the message: it is only in the message's `raw` (the way back).
    KeptInRawOnly,
}

impl fmt::Display for Issue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Issue::UnsupportedBlock { kind } => {
                write!(f, "the provider has no `{kind}` block here")
            }
            Issue::UnsupportedSource { kind } => {
                write!(
                    f,
                    "the provider cannot take this `{kind}` block's reference"
                )
            }
            Issue::Annotations => f.write_str("text annotations have no place in a request"),
            Issue::Reasoning { from: Some(from) } => {
                write!(f, "reasoning made by `{from}` cannot be sent back here")
            }
            Issue::Reasoning { from: None } => {
                f.write_str("reasoning without a provider signature cannot be sent back here")
            }
            Issue::Signature => f.write_str("a tool call's signature belongs to another provider"),
            Issue::SystemInConversation => {
                f.write_str("the provider has no system message inside the conversation")
            }
            Issue::SystemNonText { kind } => {
                write!(f, "a system prompt is text only, not `{kind}`")
            }
            Issue::ToolResultNonText { kind } => {
                write!(f, "a tool result is text only here, not `{kind}`")
            }
            Issue::ToolResultErrorFlag => f.write_str("the provider has no tool-error flag"),
            Issue::ToolResultOutOfPlace => {
                f.write_str("a tool result inside an assistant or system message")
            }
            Issue::ToolMessageText => {
                f.write_str("text beside several tool results of one tool message")
            }
            Issue::ToolMessageWithoutResult => {
                f.write_str("a tool message without a tool_result block has no call id")
            }
            Issue::InvalidArguments { error } => {
                write!(f, "the tool call's arguments are not valid JSON ({error})")
            }
            Issue::ArgumentsNotObject => {
                f.write_str("the tool call's arguments are not a JSON object")
            }
            Issue::UnansweredToolCall { id } => {
                write!(f, "no tool result answers the call `{id}`")
            }
            Issue::UnmatchedToolResult { id } => {
                write!(f, "no preceding tool call has the id `{id}` of this result")
            }
            Issue::DuplicateToolCallId { id } => {
                write!(f, "two tool calls of one turn share the id `{id}`")
            }
            Issue::EmptyMessage => f.write_str("the message has nothing the provider can take"),
            Issue::TrailingAssistant => {
                f.write_str("a final assistant message would be taken as a prefill")
            }
            Issue::FileIdNotUri { id } => {
                write!(f, "the file id `{id}` is not a URI, which Gemini needs")
            }
            Issue::ToolCallIdRewritten { id, sent } => {
                write!(
                    f,
                    "the provider does not accept the tool call id `{id}`; sent as `{sent}`"
                )
            }
            Issue::EmptyConversation => {
                f.write_str("no message to send: the provider refuses an empty conversation")
            }
            Issue::Refusal => f.write_str("the provider has no refusal in its requests"),
            Issue::UnsupportedOutput { kind } => {
                write!(f, "a message has no block for the response's `{kind}`")
            }
            Issue::UnknownEvent { event } => {
                write!(
                    f,
                    "the stream's `{event}` event is not one this version reads"
                )
            }
            Issue::NotApplicable { parameter, reason } => {
                write!(f, "`{parameter}` does not apply ({reason})")
            }
        }
    }
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Action::Dropped => f.write_str("dropped"),
            Action::ReplacedWithText(text) => write!(f, "replaced with the text {text:?}"),
            Action::MovedToSystem => f.write_str("moved into the system prompt"),
            Action::MovedToUserMessage => {
                f.write_str("moved to a user message after the tool results")
            }
            Action::SentAsEmptyObject => f.write_str("sent as {}"),
            Action::SentAsText => f.write_str("sent as text"),
            Action::SentAsUserMessage => f.write_str("sent as a user message"),
            Action::SentAsIs => f.write_str("sent as it is (the provider will likely reject it)"),
            Action::Rewritten => f.write_str("rewritten"),
            Action::KeptInRawOnly => f.write_str("kept in the message's `raw` only"),
        }
    }
}

impl Note {
    /// The severity of the note's issue ([`Issue::severity`]).
    ///
    /// ```
    /// use agentstate::providers::{Action, Issue, Note, Severity};
    ///
    /// let note = Note { message: Some(3), block: Some(1), issue: Issue::UnsupportedBlock { kind: "video" }, action: Action::Dropped };
    /// assert_eq!(note.severity(), Severity::Warning);
    /// assert_eq!(serde_json::to_value(&note)?, serde_json::json!({"message": 3, "block": 1,
    ///     "issue": "unsupported_block", "kind": "video", "action": "dropped", "severity": "warning"}));
    /// # Ok::<(), serde_json::Error>(())
    /// ```
    pub fn severity(&self) -> Severity {
        self.issue.severity()
    }
}

impl Serialize for Note {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Wire<'a> {
            message: Option<usize>,
            block: Option<usize>,
            #[serde(flatten)]
            issue: &'a Issue,
            #[serde(flatten)]
            action: &'a Action,
            severity: Severity,
        }
        Wire {
            message: self.message,
            block: self.block,
            issue: &self.issue,
            action: &self.action,
            severity: self.severity(),
        }
        .serialize(serializer)
    }
}

impl fmt::Display for Note {
    /// `message 3, block 1: <issue>; <action>`.
    ///
    /// ```
    /// use agentstate::providers::{Action, Issue, Note};
    ///
    /// let note = Note { message: Some(3), block: Some(1), issue: Issue::UnsupportedBlock { kind: "video" }, action: Action::Dropped };
    /// assert_eq!(note.to_string(), "message 3, block 1: the provider has no `video` block here; dropped");
    /// ```
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.message, self.block) {
            (None, _) if self.issue == Issue::EmptyConversation => f.write_str("conversation")?,
            (None, _) if matches!(self.issue, Issue::NotApplicable { .. }) => {
                f.write_str("request")?
            }
            (None, None) if matches!(self.issue, Issue::UnknownEvent { .. }) => {
                f.write_str("stream")?
            }
            (None, None) if matches!(self.issue, Issue::UnsupportedOutput { .. }) => {
                f.write_str("response")?
            }
            (None, Some(item)) => write!(f, "response item {item}")?,
            (None, None) => f.write_str("context summary")?,
            (Some(m), None) => write!(f, "message {m}")?,
            (Some(m), Some(b)) => write!(f, "message {m}, block {b}")?,
        }
        write!(f, ": {}; {}", self.issue, self.action)
    }
}

/// Everything a conversion could not express, in the order met. Serialized as the list of
/// its notes.
///
/// Every converter returns a [`Report`] next to the request body: one [`Note`] per block or
/// message that was dropped, moved, rewritten or sent although the provider will likely reject
/// it. Nothing is dropped without a note. Each note has a [`Severity`]: whether the model
/// still sees everything ([`Severity::Info`]), something it would have seen is lost
/// ([`Severity::Warning`]), or the provider will refuse the request ([`Severity::Refused`]).
/// Notes, reports and severities serialize to JSON (for logs and traces).
///
/// ```
/// use agentstate::message::{Message, Role};
/// use agentstate::providers::anthropic::to_anthropic;
/// use agentstate::providers::Severity;
/// use serde_json::json;
///
/// // Only a system prompt: Anthropic refuses a request without messages.
/// let converted = to_anthropic(&[Message::text_message("Be brief.", Role::System)], None);
/// assert_eq!(converted.report.worst(), Some(Severity::Refused));
/// assert_eq!(serde_json::to_value(&converted.report)?, json!([{"message": null, "block": null,
///     "issue": "empty_conversation", "action": "sent_as_is", "severity": "refused"}]));
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct Report {
    notes: Vec<Note>,
}

impl Report {
    /// Whether the conversion was lossless.
    pub fn is_empty(&self) -> bool {
        self.notes.is_empty()
    }

    /// The notes, in the order met.
    pub fn notes(&self) -> &[Note] {
        &self.notes
    }

    /// The highest severity of the notes, `None` when there is none.
    ///
    /// ```
    /// use agentstate::message::{Message, Role, ToolCall};
    /// use agentstate::providers::openai_chat::to_openai_chat;
    /// use agentstate::providers::Severity;
    /// use serde_json::json;
    ///
    /// let unanswered = [
    ///     Message::text_message("Weather?", Role::User),
    ///     Message::text_message("", Role::Assistant)
    ///         .with_tool_calls(vec![ToolCall::new("c1", "get_weather", json!({}))]),
    ///     Message::text_message("Well?", Role::User),
    /// ];
    /// assert_eq!(to_openai_chat(&unanswered, None).report.worst(), Some(Severity::Refused));
    /// assert_eq!(to_openai_chat(&unanswered[..1], None).report.worst(), None);
    /// ```
    pub fn worst(&self) -> Option<Severity> {
        self.notes.iter().map(Note::severity).max()
    }

    /// Adds a note.
    pub fn push(
        &mut self,
        message: Option<usize>,
        block: Option<usize>,
        issue: Issue,
        action: Action,
    ) {
        self.notes.push(Note {
            message,
            block,
            issue,
            action,
        });
    }
}

impl fmt::Display for Report {
    /// One note per line; `lossless` when there is none.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.notes.is_empty() {
            return f.write_str("lossless");
        }
        for (i, note) in self.notes.iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            write!(f, "{note}")?;
        }
        Ok(())
    }
}
