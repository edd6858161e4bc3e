//! What a conversion to a provider's request could not express, and what it did instead.
//!
//! Every converter returns a [`Report`] next to the request body: one [`Note`] per block or
//! message that was dropped, moved, rewritten or sent although the provider will likely reject
//! it. Nothing is dropped without a note.

use std::fmt;

/// One thing a provider's request could not carry as it was, and what was done with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Note {
    /// The index of the message in the converted slice, `None` for the context summary.
    pub message: Option<usize>,
    /// The index of the block in that message's `content`, `None` for the whole message (or
    /// a `tools_calls` entry without a block).
    pub block: Option<usize>,
    /// What could not be expressed.
    pub issue: Issue,
    /// What the converter did with it.
    pub action: Action,
}

/// What a provider's request could not express.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Issue {
    /// A block of this kind (`"video"`, `"data"`, `"annotation"`...) has no equivalent in the
    /// provider's request, in this role or place.
    UnsupportedBlock {
        /// The block's wire type.
        kind: &'static str,
    },
    /// A media block whose reference the provider cannot take (an image by file id in OpenAI
    /// Chat, a document by URL...).
    UnsupportedSource {
        /// The block's wire type.
        kind: &'static str,
    },
    /// A text block's citations (`annotations`): no provider takes them in a request.
    Annotations,
    /// Reasoning that the provider cannot take back: made by another provider (`from`), or
    /// without the signature or id the provider needs.
    Reasoning {
        /// The provider that made it, if recorded.
        from: Option<String>,
    },
    /// A tool call's provider signature (Gemini's `thought_signature`) sent to another
    /// provider.
    Signature,
    /// A system message after the conversation started, where the provider has no system
    /// role inside the conversation.
    SystemInConversation,
    /// Non-text content in a system message (system prompts are text only).
    SystemNonText {
        /// The block's wire type.
        kind: &'static str,
    },
    /// Non-text content in a tool result, where the provider takes text only.
    ToolResultNonText {
        /// The block's wire type.
        kind: &'static str,
    },
    /// A tool result's `is_error` flag: the provider has no such flag.
    ToolResultErrorFlag,
    /// A tool result inside an assistant or system message.
    ToolResultOutOfPlace,
    /// A text block inside a tool message with several results.
    ToolMessageText,
    /// A `tool` message without any `tool_result` block (so without a call id).
    ToolMessageWithoutResult,
    /// A tool call's arguments are not valid JSON.
    InvalidArguments {
        /// The parse error.
        error: String,
    },
    /// A tool call's arguments are valid JSON but not an object.
    ArgumentsNotObject,
    /// A tool call no tool result answers before the next turn.
    UnansweredToolCall {
        /// The call id.
        id: String,
    },
    /// A tool result whose call id no preceding assistant turn made.
    UnmatchedToolResult {
        /// The call id.
        id: String,
    },
    /// Two tool calls of one assistant turn share an id.
    DuplicateToolCallId {
        /// The call id.
        id: String,
    },
    /// A message with nothing the provider can take (it rejects empty turns).
    EmptyMessage,
    /// An assistant message last in the conversation: the provider takes it as a prefill,
    /// which current models reject.
    TrailingAssistant,
}

/// What a converter did with something it could not express.
#[derive(Debug, Clone, PartialEq, Eq)]
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
        }
    }
}

impl fmt::Display for Note {
    /// `message 3, block 1: <issue>; <action>`.
    ///
    /// ```
    /// use agentstate::providers::report::{Action, Issue, Note};
    ///
    /// let note = Note { message: Some(3), block: Some(1), issue: Issue::UnsupportedBlock { kind: "video" }, action: Action::Dropped };
    /// assert_eq!(note.to_string(), "message 3, block 1: the provider has no `video` block here; dropped");
    /// ```
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.message, self.block) {
            (None, _) => f.write_str("context summary")?,
            (Some(m), None) => write!(f, "message {m}")?,
            (Some(m), Some(b)) => write!(f, "message {m}, block {b}")?,
        }
        write!(f, ": {}; {}", self.issue, self.action)
    }
}

/// Everything a conversion could not express, in the order met.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
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
