//! AG-UI messages as the protocol puts them on the wire (`MESSAGES_SNAPSHOT`, a run's input) and
//! as the official client holds them: tagged by `role`, camelCase fields.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::borrow::Cow;

/// One AG-UI message, tagged by its `role`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "lowercase")]
pub enum AguiMessage {
    /// A developer instruction (`role: "developer"`).
    Developer(DeveloperMessage),
    /// A system instruction (`role: "system"`).
    System(SystemMessage),
    /// The model's reply, possibly with tool calls (`role: "assistant"`).
    Assistant(AssistantMessage),
    /// The human (`role: "user"`).
    User(UserMessage),
    /// A tool's result (`role: "tool"`).
    Tool(ToolMessage),
    /// A client-side activity (`role: "activity"`), built by `ACTIVITY_SNAPSHOT` / `ACTIVITY_DELTA`.
    Activity(ActivityMessage),
    /// The model's visible reasoning (`role: "reasoning"`).
    Reasoning(ReasoningMessage),
}

/// The role names of AG-UI messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AguiRole {
    /// `developer`
    Developer,
    /// `system`
    System,
    /// `assistant`
    Assistant,
    /// `user`
    User,
    /// `tool`
    Tool,
    /// `activity`
    Activity,
    /// `reasoning`
    Reasoning,
}

impl AguiRole {
    /// The role's wire name, e.g. `"assistant"`.
    pub fn as_str(self) -> &'static str {
        match self {
            AguiRole::Developer => "developer",
            AguiRole::System => "system",
            AguiRole::Assistant => "assistant",
            AguiRole::User => "user",
            AguiRole::Tool => "tool",
            AguiRole::Activity => "activity",
            AguiRole::Reasoning => "reasoning",
        }
    }
}

/// The content of a user or tool message: a string, or a list of content parts (text, image,
/// audio, video, document), kept as JSON.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum MessageContent {
    /// Plain text.
    Text(String),
    /// Multimodal content parts, each an object with a `type`.
    Parts(Vec<Value>),
}

impl Default for MessageContent {
    fn default() -> Self {
        MessageContent::Text(String::new())
    }
}

impl MessageContent {
    /// The text: the string itself, or the `text` of the `text` parts, concatenated.
    /// Borrows a plain string; only multimodal parts are concatenated into a new string.
    pub fn text(&self) -> Cow<'_, str> {
        match self {
            MessageContent::Text(text) => Cow::Borrowed(text),
            MessageContent::Parts(parts) => Cow::Owned(
                parts
                    .iter()
                    .filter(|p| p.get("type").and_then(Value::as_str) == Some("text"))
                    .filter_map(|p| p.get("text").and_then(Value::as_str))
                    .collect(),
            ),
        }
    }

    /// Appends streamed text. Parts are replaced by the text, as the official client does
    /// (it treats non-string content as `""` before appending).
    pub(crate) fn push_str(&mut self, delta: &str) {
        match self {
            MessageContent::Text(text) => text.push_str(delta),
            MessageContent::Parts(_) => *self = MessageContent::Text(delta.to_owned()),
        }
    }
}

impl From<&str> for MessageContent {
    fn from(text: &str) -> Self {
        MessageContent::Text(text.to_owned())
    }
}

impl From<String> for MessageContent {
    fn from(text: String) -> Self {
        MessageContent::Text(text)
    }
}

/// A developer message.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeveloperMessage {
    /// The message id.
    pub id: String,
    /// The text.
    pub content: String,
    /// An optional author name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// An encrypted payload attached by `REASONING_ENCRYPTED_VALUE`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encrypted_value: Option<String>,
    /// The subagent invocation that produced the message, when a subagent did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subagent_run_id: Option<String>,
    /// Free-form metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Map<String, Value>>,
}

/// A system message.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SystemMessage {
    /// The message id.
    pub id: String,
    /// The text.
    pub content: String,
    /// An optional author name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// An encrypted payload attached by `REASONING_ENCRYPTED_VALUE`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encrypted_value: Option<String>,
    /// The subagent invocation that produced the message, when a subagent did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subagent_run_id: Option<String>,
    /// Free-form metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Map<String, Value>>,
}

/// An assistant message: text (absent when the message only carries tool calls) and tool calls.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AssistantMessage {
    /// The message id.
    pub id: String,
    /// The text, when the message has any (a message created by `TOOL_CALL_START` has none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    /// An optional author name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The tool calls, in OpenAI shape.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<Vec<AguiToolCall>>,
    /// An encrypted payload attached by `REASONING_ENCRYPTED_VALUE`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encrypted_value: Option<String>,
    /// The subagent invocation that produced the message, when a subagent did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subagent_run_id: Option<String>,
    /// Free-form metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Map<String, Value>>,
}

/// A user message.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UserMessage {
    /// The message id.
    pub id: String,
    /// The text or content parts.
    pub content: MessageContent,
    /// An optional author name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// An encrypted payload attached by `REASONING_ENCRYPTED_VALUE`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encrypted_value: Option<String>,
    /// The subagent invocation that produced the message, when a subagent did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subagent_run_id: Option<String>,
    /// Free-form metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Map<String, Value>>,
}

/// A tool message: the result of the tool call `tool_call_id`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolMessage {
    /// The message id.
    pub id: String,
    /// The result.
    pub content: MessageContent,
    /// The call this message answers.
    pub tool_call_id: String,
    /// The tool's error, when it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// An encrypted payload attached by `REASONING_ENCRYPTED_VALUE`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encrypted_value: Option<String>,
    /// The subagent invocation that produced the message, when a subagent did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subagent_run_id: Option<String>,
    /// Free-form metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Map<String, Value>>,
}

/// An activity message: structured, client-rendered progress (a plan, a search, a form).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ActivityMessage {
    /// The message id.
    pub id: String,
    /// What kind of activity this is; the UI picks a renderer by it.
    pub activity_type: String,
    /// The activity's data (normally a JSON object).
    pub content: Value,
    /// The subagent invocation that produced the message, when a subagent did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subagent_run_id: Option<String>,
    /// Free-form metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Map<String, Value>>,
}

/// A reasoning message.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReasoningMessage {
    /// The message id.
    pub id: String,
    /// The reasoning text.
    pub content: String,
    /// An encrypted payload attached by `REASONING_ENCRYPTED_VALUE`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encrypted_value: Option<String>,
    /// The subagent invocation that produced the message, when a subagent did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subagent_run_id: Option<String>,
    /// Free-form metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Map<String, Value>>,
}

/// A tool call in OpenAI shape: `{id, type: "function", function: {name, arguments}}`, where
/// `arguments` is the JSON text streamed by `TOOL_CALL_ARGS`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AguiToolCall {
    /// The call id.
    pub id: String,
    /// Always `"function"` in AG-UI 1.0.
    #[serde(rename = "type", default = "function_type")]
    pub call_type: String,
    /// The function and its arguments.
    pub function: AguiFunctionCall,
    /// An encrypted payload attached by `REASONING_ENCRYPTED_VALUE`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encrypted_value: Option<String>,
    /// Free-form metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Map<String, Value>>,
}

fn function_type() -> String {
    "function".to_owned()
}

impl AguiToolCall {
    /// A function call with its arguments as JSON text.
    pub fn new(
        id: impl Into<String>,
        name: impl Into<String>,
        arguments: impl Into<String>,
    ) -> Self {
        AguiToolCall {
            id: id.into(),
            call_type: function_type(),
            function: AguiFunctionCall {
                name: name.into(),
                arguments: arguments.into(),
            },
            encrypted_value: None,
            metadata: None,
        }
    }

    /// The arguments parsed as JSON, or `None` while they are incomplete or not JSON.
    pub fn parsed_arguments(&self) -> Option<Value> {
        serde_json::from_str(&self.function.arguments).ok()
    }
}

/// The function part of a tool call.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct AguiFunctionCall {
    /// The tool's name.
    pub name: String,
    /// The arguments as JSON text (possibly partial while streaming).
    pub arguments: String,
}

impl AguiMessage {
    /// The message id.
    pub fn id(&self) -> &str {
        match self {
            AguiMessage::Developer(m) => &m.id,
            AguiMessage::System(m) => &m.id,
            AguiMessage::Assistant(m) => &m.id,
            AguiMessage::User(m) => &m.id,
            AguiMessage::Tool(m) => &m.id,
            AguiMessage::Activity(m) => &m.id,
            AguiMessage::Reasoning(m) => &m.id,
        }
    }

    /// The message's role.
    pub fn role(&self) -> AguiRole {
        match self {
            AguiMessage::Developer(_) => AguiRole::Developer,
            AguiMessage::System(_) => AguiRole::System,
            AguiMessage::Assistant(_) => AguiRole::Assistant,
            AguiMessage::User(_) => AguiRole::User,
            AguiMessage::Tool(_) => AguiRole::Tool,
            AguiMessage::Activity(_) => AguiRole::Activity,
            AguiMessage::Reasoning(_) => AguiRole::Reasoning,
        }
    }

    /// The message's text: its content string, the text parts of multimodal content, or the
    /// empty string (an assistant message without content, an activity). Borrowed, except for
    /// multimodal content, whose text parts are concatenated.
    pub fn text(&self) -> Cow<'_, str> {
        match self {
            AguiMessage::Developer(m) => Cow::Borrowed(&m.content),
            AguiMessage::System(m) => Cow::Borrowed(&m.content),
            AguiMessage::Assistant(m) => Cow::Borrowed(m.content.as_deref().unwrap_or("")),
            AguiMessage::User(m) => m.content.text(),
            AguiMessage::Tool(m) => m.content.text(),
            AguiMessage::Activity(_) => Cow::Borrowed(""),
            AguiMessage::Reasoning(m) => Cow::Borrowed(&m.content),
        }
    }

    /// The message's metadata.
    pub fn metadata(&self) -> Option<&Map<String, Value>> {
        match self {
            AguiMessage::Developer(m) => m.metadata.as_ref(),
            AguiMessage::System(m) => m.metadata.as_ref(),
            AguiMessage::Assistant(m) => m.metadata.as_ref(),
            AguiMessage::User(m) => m.metadata.as_ref(),
            AguiMessage::Tool(m) => m.metadata.as_ref(),
            AguiMessage::Activity(m) => m.metadata.as_ref(),
            AguiMessage::Reasoning(m) => m.metadata.as_ref(),
        }
    }

    pub(crate) fn metadata_mut(&mut self) -> &mut Option<Map<String, Value>> {
        match self {
            AguiMessage::Developer(m) => &mut m.metadata,
            AguiMessage::System(m) => &mut m.metadata,
            AguiMessage::Assistant(m) => &mut m.metadata,
            AguiMessage::User(m) => &mut m.metadata,
            AguiMessage::Tool(m) => &mut m.metadata,
            AguiMessage::Activity(m) => &mut m.metadata,
            AguiMessage::Reasoning(m) => &mut m.metadata,
        }
    }

    /// The subagent invocation that produced the message, when a subagent did.
    pub fn subagent_run_id(&self) -> Option<&str> {
        match self {
            AguiMessage::Developer(m) => m.subagent_run_id.as_deref(),
            AguiMessage::System(m) => m.subagent_run_id.as_deref(),
            AguiMessage::Assistant(m) => m.subagent_run_id.as_deref(),
            AguiMessage::User(m) => m.subagent_run_id.as_deref(),
            AguiMessage::Tool(m) => m.subagent_run_id.as_deref(),
            AguiMessage::Activity(m) => m.subagent_run_id.as_deref(),
            AguiMessage::Reasoning(m) => m.subagent_run_id.as_deref(),
        }
    }

    /// The tool calls of an assistant message; empty for every other message.
    pub fn tool_calls(&self) -> &[AguiToolCall] {
        match self {
            AguiMessage::Assistant(m) => m.tool_calls.as_deref().unwrap_or(&[]),
            _ => &[],
        }
    }

    /// A text message of `role` (developer, system, assistant or user) with empty content, as
    /// `TEXT_MESSAGE_START` creates it.
    pub(crate) fn empty_text(
        id: &str,
        role: TextRole,
        name: Option<String>,
        subagent_run_id: Option<String>,
    ) -> Self {
        let id = id.to_owned();
        match role {
            TextRole::Developer => AguiMessage::Developer(DeveloperMessage {
                id,
                name,
                subagent_run_id,
                ..Default::default()
            }),
            TextRole::System => AguiMessage::System(SystemMessage {
                id,
                name,
                subagent_run_id,
                ..Default::default()
            }),
            TextRole::Assistant => AguiMessage::Assistant(AssistantMessage {
                id,
                name,
                subagent_run_id,
                content: Some(String::new()),
                ..Default::default()
            }),
            TextRole::User => AguiMessage::User(UserMessage {
                id,
                name,
                subagent_run_id,
                ..Default::default()
            }),
        }
    }

    /// Appends streamed text to the message's content. Returns false for an activity message,
    /// which has no text.
    pub(crate) fn push_text(&mut self, delta: &str) -> bool {
        match self {
            AguiMessage::Developer(m) => m.content.push_str(delta),
            AguiMessage::System(m) => m.content.push_str(delta),
            AguiMessage::Assistant(m) => m.content.get_or_insert_with(String::new).push_str(delta),
            AguiMessage::User(m) => m.content.push_str(delta),
            AguiMessage::Tool(m) => m.content.push_str(delta),
            AguiMessage::Reasoning(m) => m.content.push_str(delta),
            AguiMessage::Activity(_) => return false,
        }
        true
    }

    /// Writes every integral float of the message's free-form JSON (metadata, tool calls'
    /// metadata, an activity's content, content parts) as an integer: `2.0` as `2`, as the
    /// official client (JavaScript, whose numbers are all doubles) holds and writes it.
    pub(crate) fn write_numbers_as_javascript(&mut self) {
        if let Some(metadata) = self.metadata_mut() {
            metadata.values_mut().for_each(javascript_number);
        }
        match self {
            AguiMessage::Assistant(m) => {
                for call in m.tool_calls.iter_mut().flatten() {
                    if let Some(metadata) = &mut call.metadata {
                        metadata.values_mut().for_each(javascript_number);
                    }
                }
            }
            AguiMessage::Activity(m) => javascript_number(&mut m.content),
            AguiMessage::User(UserMessage {
                content: MessageContent::Parts(parts),
                ..
            })
            | AguiMessage::Tool(ToolMessage {
                content: MessageContent::Parts(parts),
                ..
            }) => parts.iter_mut().for_each(javascript_number),
            _ => {}
        }
    }

    /// Sets the encrypted value; false for an activity message, which has none.
    pub(crate) fn set_encrypted_value(&mut self, value: &str) -> bool {
        let slot = match self {
            AguiMessage::Developer(m) => &mut m.encrypted_value,
            AguiMessage::System(m) => &mut m.encrypted_value,
            AguiMessage::Assistant(m) => &mut m.encrypted_value,
            AguiMessage::User(m) => &mut m.encrypted_value,
            AguiMessage::Tool(m) => &mut m.encrypted_value,
            AguiMessage::Reasoning(m) => &mut m.encrypted_value,
            AguiMessage::Activity(_) => return false,
        };
        *slot = Some(value.to_owned());
        true
    }
}

/// An integral float (`2.0`, `-0.0`, `1e3`) within JavaScript's exact integers as an integer,
/// everywhere in `value`.
fn javascript_number(value: &mut Value) {
    match value {
        Value::Number(n) => {
            if let Some(f) = n.as_f64().filter(|f| n.is_f64() && f.fract() == 0.0) {
                if f.abs() <= 9_007_199_254_740_992.0 {
                    *value = Value::from(f as i64);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(javascript_number),
        Value::Object(map) => map.values_mut().for_each(javascript_number),
        _ => {}
    }
}

/// The roles a streamed text message may take (`TEXT_MESSAGE_START.role`); `tool`, `activity`
/// and `reasoning` messages are built by other events.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TextRole {
    /// `developer`
    Developer,
    /// `system`
    System,
    /// `assistant`, the default.
    #[default]
    Assistant,
    /// `user`
    User,
}

impl TextRole {
    /// The role's wire name, e.g. `"assistant"`.
    pub fn as_str(self) -> &'static str {
        match self {
            TextRole::Developer => "developer",
            TextRole::System => "system",
            TextRole::Assistant => "assistant",
            TextRole::User => "user",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_role_round_trips_with_camel_case_fields() {
        let wire = json!([
            {"id": "d", "role": "developer", "content": "be brief"},
            {"id": "s", "role": "system", "content": "you are helpful", "name": "sys"},
            {"id": "u", "role": "user", "content": [{"type": "text", "text": "hi"}, {"type": "image", "source": {"type": "url", "value": "http://x"}}]},
            {"id": "a", "role": "assistant", "toolCalls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
            {"id": "t", "role": "tool", "content": "42", "toolCallId": "c", "error": "late"},
            {"id": "v", "role": "activity", "activityType": "plan", "content": {"steps": []}},
            {"id": "r", "role": "reasoning", "content": "hmm", "encryptedValue": "xyz"}
        ]);
        let messages: Vec<AguiMessage> = serde_json::from_value(wire.clone()).unwrap();
        let roles: Vec<_> = messages.iter().map(|m| m.role().as_str()).collect();
        assert_eq!(
            roles,
            [
                "developer",
                "system",
                "user",
                "assistant",
                "tool",
                "activity",
                "reasoning"
            ]
        );
        assert_eq!(messages[2].text(), "hi");
        assert_eq!(
            messages[3].tool_calls()[0].parsed_arguments(),
            Some(json!({}))
        );
        assert_eq!(serde_json::to_value(&messages).unwrap(), wire);
    }

    #[test]
    fn text_borrows_unless_parts_must_be_joined() {
        let messages: Vec<AguiMessage> = serde_json::from_value(json!([
            {"id": "a", "role": "assistant", "content": "hi"},
            {"id": "b", "role": "assistant", "toolCalls": []},
            {"id": "u", "role": "user", "content": "plain"},
            {"id": "t", "role": "tool", "content": "out", "toolCallId": "c"},
            {"id": "v", "role": "activity", "activityType": "plan", "content": {}},
            {"id": "p", "role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}
        ]))
        .unwrap();
        let texts: Vec<Cow<'_, str>> = messages.iter().map(AguiMessage::text).collect();
        assert!(
            texts[..5].iter().all(|t| matches!(t, Cow::Borrowed(_))),
            "{texts:?}"
        );
        assert_eq!(texts, ["hi", "", "plain", "out", "", "ab"]);
        assert!(matches!(texts[5], Cow::Owned(_)));
    }

    #[test]
    fn integral_floats_are_written_as_javascript_writes_them() {
        let mut messages: Vec<AguiMessage> = serde_json::from_value(json!([
            {"id": "a", "role": "assistant", "metadata": {"n": 2.0, "x": [1.5, -0.0, 1e3, 1e300]},
             "toolCalls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{\"n\": 2.0}"},
                            "metadata": {"t": 12.0}}]},
            {"id": "v", "role": "activity", "activityType": "plan", "content": {"done": [0.0, 3]}},
            {"id": "u", "role": "user", "content": [{"type": "text", "text": "x", "w": 4.0}]}
        ]))
        .unwrap();
        messages
            .iter_mut()
            .for_each(AguiMessage::write_numbers_as_javascript);
        // `Value` equality tells `2` from `2.0`.
        assert_eq!(
            serde_json::to_value(&messages).unwrap(),
            json!([
                {"id": "a", "role": "assistant", "toolCalls": [{"id": "c", "type": "function",
                    "function": {"name": "f", "arguments": "{\"n\": 2.0}"}, "metadata": {"t": 12}}],
                 "metadata": {"n": 2, "x": [1.5, 0, 1000, 1e300]}},
                {"id": "v", "role": "activity", "activityType": "plan", "content": {"done": [0, 3]}},
                {"id": "u", "role": "user", "content": [{"type": "text", "text": "x", "w": 4}]}
            ])
        );
    }

    #[test]
    fn subagent_and_metadata_round_trip() {
        let wire = json!({"id": "a", "role": "assistant", "content": "x", "subagentRunId": "s1", "metadata": {"k": 2.0}});
        let message: AguiMessage = serde_json::from_value(wire.clone()).unwrap();
        assert_eq!(message.subagent_run_id(), Some("s1"));
        assert_eq!(message.metadata().unwrap()["k"], json!(2.0));
        assert_eq!(serde_json::to_value(&message).unwrap(), wire);
    }

    #[test]
    fn unknown_fields_are_tolerated_and_a_bad_role_is_an_error() {
        let m: AguiMessage =
            serde_json::from_value(json!({"id": "u", "role": "user", "content": "x", "extra": 1}))
                .unwrap();
        assert_eq!(m.text(), "x");
        let err = serde_json::from_value::<AguiMessage>(
            json!({"id": "u", "role": "robot", "content": ""}),
        )
        .unwrap_err();
        assert!(err.to_string().contains("robot"), "{err}");
    }
}
