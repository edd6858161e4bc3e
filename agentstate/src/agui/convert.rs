//! Conversions between agentstate's (AgentFlow's) [`Message`] and AG-UI messages.

use super::chat::ChatState;
use super::message::{
    AguiMessage, AguiToolCall, AssistantMessage, DeveloperMessage, MessageContent,
    ReasoningMessage, SystemMessage, ToolMessage, UserMessage,
};
use crate::message::{
    ContentBlock, FunctionCall, Message, MessageId, ReasoningBlock, Role, ToolCall,
    ToolResultBlock, ToolResultStatus,
};
use serde_json::Value;

/// The metadata key that keeps an AG-UI role AgentFlow does not have.
pub const ROLE_KEY: &str = "ag_ui_role";
/// The metadata key that keeps a tool message's AG-UI `error`.
pub const ERROR_KEY: &str = "ag_ui_error";

/// The id as AG-UI's string ids hold it: a string id as it is, an integer id in decimal
/// (every digit, whatever its size).
fn id_string(id: &MessageId) -> String {
    match id {
        MessageId::Str(s) => s.clone(),
        MessageId::Int(i) => i.to_string(),
        MessageId::BigInt(digits) => digits.to_string(),
    }
}

/// The text of the text blocks, concatenated.
fn block_text(message: &Message) -> String {
    message
        .content
        .iter()
        .filter_map(|block| match block {
            ContentBlock::Text(text) => Some(text.text.as_str()),
            _ => None,
        })
        .collect()
}

impl From<&ToolCall> for AguiToolCall {
    fn from(call: &ToolCall) -> Self {
        AguiToolCall::new(
            call.id.clone(),
            call.function.name.clone(),
            call.function.arguments.clone(),
        )
    }
}

impl From<&AguiToolCall> for ToolCall {
    /// The arguments are kept as the exact text that was streamed.
    fn from(call: &AguiToolCall) -> Self {
        let mut tool_call = ToolCall::from_function(
            call.id.clone(),
            FunctionCall::new(call.function.name.clone(), call.function.arguments.clone()),
        );
        tool_call.kind = call.call_type.clone();
        tool_call
    }
}

/// The AG-UI messages for one AgentFlow message: one, except for a tool message with several
/// results (one each, the first keeping the message id, the next ones `{id}-{n}`).
pub fn to_agui(message: &Message) -> Vec<AguiMessage> {
    let id = id_string(&message.message_id);
    let role = message.metadata.get(ROLE_KEY);
    let role = role.as_ref().and_then(Value::as_str);
    match message.role {
        Role::System if role == Some("developer") => {
            vec![AguiMessage::Developer(DeveloperMessage {
                id,
                content: block_text(message),
                ..Default::default()
            })]
        }
        Role::System => vec![AguiMessage::System(SystemMessage {
            id,
            content: block_text(message),
            ..Default::default()
        })],
        Role::User => vec![AguiMessage::User(UserMessage {
            id,
            content: MessageContent::Text(block_text(message)),
            ..Default::default()
        })],
        Role::Assistant if role == Some("reasoning") => {
            let content = message
                .content
                .iter()
                .filter_map(|block| match block {
                    ContentBlock::Reasoning(r) => Some(r.summary.as_str()),
                    _ => None,
                })
                .collect();
            vec![AguiMessage::Reasoning(ReasoningMessage {
                id,
                content,
                ..Default::default()
            })]
        }
        Role::Assistant => {
            let calls: Vec<AguiToolCall> = match &message.tools_calls {
                Some(calls) => calls.iter().map(AguiToolCall::from).collect(),
                None => message
                    .tool_call_blocks()
                    .map(|block| AguiToolCall::from(&ToolCall::from(block)))
                    .collect(),
            };
            let text = block_text(message);
            vec![AguiMessage::Assistant(AssistantMessage {
                id,
                content: (!text.is_empty() || calls.is_empty()).then_some(text),
                tool_calls: (!calls.is_empty()).then_some(calls),
                ..Default::default()
            })]
        }
        Role::Tool => {
            let results: Vec<&ToolResultBlock> = message.tool_results().collect();
            if results.is_empty() {
                return vec![AguiMessage::Tool(ToolMessage {
                    id,
                    content: MessageContent::Text(message.text()),
                    ..Default::default()
                })];
            }
            let error = message.metadata.get(ERROR_KEY);
            let error = error.as_ref().and_then(Value::as_str);
            results
                .into_iter()
                .enumerate()
                .map(|(n, result)| {
                    let content = result.output_text();
                    AguiMessage::Tool(ToolMessage {
                        id: if n == 0 {
                            id.clone()
                        } else {
                            format!("{id}-{n}")
                        },
                        error: result
                            .is_error
                            .then(|| error.map(str::to_owned).unwrap_or_else(|| content.clone())),
                        content: MessageContent::Text(content),
                        tool_call_id: result.call_id.clone(),
                        ..Default::default()
                    })
                })
                .collect()
        }
    }
}

/// The AG-UI messages for a list of AgentFlow messages, in order.
pub fn messages_to_agui<'a>(messages: impl IntoIterator<Item = &'a Message>) -> Vec<AguiMessage> {
    messages.into_iter().flat_map(to_agui).collect()
}

fn bare(role: Role, id: &str, content: Vec<ContentBlock>) -> Message {
    let mut message = Message::new(role, content).with_id(id);
    message.timestamp = None;
    message
}

/// The AgentFlow message for an AG-UI message; `None` for an activity message.
pub fn from_agui(message: &AguiMessage) -> Option<Message> {
    let text = |t: &str| {
        if t.is_empty() {
            Vec::new()
        } else {
            vec![ContentBlock::text(t)]
        }
    };
    Some(match message {
        AguiMessage::Developer(m) => {
            bare(Role::System, &m.id, text(&m.content)).with_metadata(ROLE_KEY, "developer")
        }
        AguiMessage::System(m) => bare(Role::System, &m.id, text(&m.content)),
        AguiMessage::User(m) => bare(Role::User, &m.id, text(&m.content.text())),
        AguiMessage::Assistant(m) => {
            let message = bare(
                Role::Assistant,
                &m.id,
                text(m.content.as_deref().unwrap_or("")),
            );
            match &m.tool_calls {
                Some(calls) => message.with_tool_calls(calls.iter().map(ToolCall::from).collect()),
                None => message,
            }
        }
        AguiMessage::Tool(m) => {
            let failed = m.error.is_some();
            let result = ToolResultBlock {
                call_id: m.tool_call_id.clone(),
                output: Value::String(m.content.text().into_owned()).into(),
                is_error: failed,
                status: Some(if failed {
                    ToolResultStatus::Failed
                } else {
                    ToolResultStatus::Completed
                }),
            };
            let message = bare(Role::Tool, &m.id, vec![ContentBlock::ToolResult(result)]);
            match &m.error {
                Some(error) => message.with_metadata(ERROR_KEY, error.as_str()),
                None => message,
            }
        }
        AguiMessage::Reasoning(m) => bare(
            Role::Assistant,
            &m.id,
            vec![ContentBlock::Reasoning(ReasoningBlock::new(
                m.content.clone(),
            ))],
        )
        .with_metadata(ROLE_KEY, "reasoning"),
        AguiMessage::Activity(_) => return None,
    })
}

/// The AgentFlow messages for a list of AG-UI messages, activity messages left out.
pub fn messages_from_agui<'a>(messages: impl IntoIterator<Item = &'a AguiMessage>) -> Vec<Message> {
    messages.into_iter().filter_map(from_agui).collect()
}

impl ChatState {
    /// The conversation as agentstate messages (streaming ones with their text so far, activity
    /// messages left out), for example to merge into an [`AgentState`](crate::state::AgentState)'s
    /// `context`.
    ///
    /// ```
    /// use agentstate::agui::{ChatState, Event};
    /// use agentstate::message::Role;
    ///
    /// let mut chat = ChatState::new();
    /// for event in [Event::run_started("t", "r"), Event::text_start("m"), Event::text_content("m", "Hi")] {
    ///     chat.apply(&event);
    /// }
    /// let messages = chat.to_messages();
    /// assert_eq!((messages[0].role, messages[0].text()), (Role::Assistant, "Hi".to_owned()));
    /// ```
    pub fn to_messages(&self) -> Vec<Message> {
        messages_from_agui(self.messages().iter().map(|m| m.message()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_agentflow_role_converts_and_comes_back() {
        let messages = vec![
            Message::text_message("be brief", Role::System).with_id("s"),
            Message::text_message("hi", Role::User).with_id(7),
            Message::text_message("calling", Role::Assistant)
                .with_id("a")
                .with_tool_calls(vec![
                    ToolCall::new("c1", "f", json!({"x": 1})),
                    ToolCall::new("c2", "g", json!({})),
                ]),
            Message::tool_message(vec![
                ContentBlock::ToolResult(ToolResultBlock::completed("c1", "ok")),
                ContentBlock::ToolResult(ToolResultBlock::failed("c2", json!({"error": "boom"}))),
            ])
            .with_id("t"),
        ];
        let agui = messages_to_agui(&messages);
        assert_eq!(
            serde_json::to_value(&agui).unwrap(),
            json!([
                {"id": "s", "role": "system", "content": "be brief"},
                {"id": "7", "role": "user", "content": "hi"},
                {"id": "a", "role": "assistant", "content": "calling", "toolCalls": [
                    {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{\"x\": 1}"}},
                    {"id": "c2", "type": "function", "function": {"name": "g", "arguments": "{}"}}]},
                {"id": "t", "role": "tool", "toolCallId": "c1", "content": "ok"},
                {"id": "t-1", "role": "tool", "toolCallId": "c2", "content": "{\"error\": \"boom\"}",
                 "error": "{\"error\": \"boom\"}"}
            ])
        );
        let back = messages_from_agui(&agui);
        assert_eq!(back.len(), 5);
        assert_eq!(back[1].message_id, MessageId::Str("7".into()));
        assert_eq!(back[2].tool_calls(), messages[2].tool_calls());
        assert_eq!(back[2].tool_call_blocks().count(), 2);
        let failed = back[4].tool_results().next().unwrap();
        assert!(failed.is_error);
        assert_eq!(failed.status, Some(ToolResultStatus::Failed));
        assert!(back.iter().all(|m| m.timestamp.is_none()));
        // AG-UI -> AgentFlow -> AG-UI is the identity on these.
        assert_eq!(messages_to_agui(&back), agui);
    }

    #[test]
    fn agui_only_roles_survive_a_round_trip_or_are_left_out() {
        let agui: Vec<AguiMessage> = serde_json::from_value(json!([
            {"id": "d", "role": "developer", "content": "use tools"},
            {"id": "r", "role": "reasoning", "content": "thinking"},
            {"id": "v", "role": "activity", "activityType": "plan", "content": {}},
            {"id": "a", "role": "assistant", "toolCalls": [
                {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{\"partial"}}]},
            {"id": "t", "role": "tool", "toolCallId": "c", "content": "", "error": "timed out"}
        ]))
        .unwrap();
        let back = messages_from_agui(&agui);
        assert_eq!(back.len(), 4, "the activity is left out");
        assert_eq!(back[0].role, Role::System);
        assert_eq!(back[1].role, Role::Assistant);
        // Partial arguments are kept verbatim.
        assert_eq!(back[2].tool_calls()[0].function.arguments, "{\"partial");
        let mut expected = agui.clone();
        expected.remove(2);
        assert_eq!(messages_to_agui(&back), expected);
    }
}
