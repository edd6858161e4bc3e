//! PLACEHOLDER: the AgentFlow message model. The real module replaces this file.

use serde::{Deserialize, Serialize};

/// A message id: AgentFlow accepts a string or an integer, and `1` and `"1"` are different ids.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(untagged)]
pub enum MessageId {
    /// An integer id.
    Int(i64),
    /// A string id (generated ids are uuid v4 strings).
    Str(String),
}

/// Who wrote a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// The human.
    User,
    /// The model.
    Assistant,
    /// A system instruction.
    System,
    /// A tool's result.
    Tool,
}

/// One message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    /// The id.
    pub message_id: MessageId,
    /// The role.
    pub role: Role,
    /// Streaming intermediate.
    #[serde(default)]
    pub delta: bool,
    /// Tool calls in OpenAI shape.
    #[serde(default)]
    pub tools_calls: Option<Vec<serde_json::Value>>,
    /// Text (placeholder for the content blocks).
    #[serde(default)]
    pub text: String,
}

impl Message {
    /// A text message.
    pub fn text_message(text: impl Into<String>, role: Role) -> Self {
        Message {
            message_id: MessageId::Str(uuid::Uuid::new_v4().to_string()),
            role,
            delta: false,
            tools_calls: None,
            text: text.into(),
        }
    }
    /// Builder: the id.
    pub fn with_id(mut self, id: impl Into<MessageId>) -> Self {
        self.message_id = id.into();
        self
    }
}

impl From<&str> for MessageId {
    fn from(s: &str) -> Self {
        MessageId::Str(s.to_owned())
    }
}
impl From<String> for MessageId {
    fn from(s: String) -> Self {
        MessageId::Str(s)
    }
}
impl From<i64> for MessageId {
    fn from(i: i64) -> Self {
        MessageId::Int(i)
    }
}

impl std::fmt::Display for MessageId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MessageId::Int(i) => write!(f, "{i}"),
            MessageId::Str(s) => write!(f, "{s:?}"),
        }
    }
}

/// A tool call (placeholder).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    /// id
    pub id: String,
}
impl ToolCall {
    /// new
    pub fn new(id: &str, _name: &str, _args: serde_json::Value) -> Self {
        ToolCall { id: id.into() }
    }
}
impl Message {
    /// text
    pub fn text(&self) -> String {
        self.text.clone()
    }
    /// tool calls
    pub fn with_tool_calls(mut self, calls: Vec<ToolCall>) -> Self {
        self.tools_calls = Some(
            calls
                .into_iter()
                .map(|c| serde_json::json!({"id": c.id}))
                .collect(),
        );
        self
    }
}
