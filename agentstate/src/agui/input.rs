//! What an AG-UI client sends to start a run: [`RunAgentInput`] and its parts.

use super::message::AguiMessage;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Map, Value};

/// A JSON field that may be absent (`None`) or present, `null` included (`Some(Value::Null)`),
/// as TypeScript's `z.any().optional()` tells them apart.
fn present<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(deserializer).map(Some)
}

/// The input of a run, as an AG-UI client (`@ag-ui/client`'s `HttpAgent`) POSTs it to an agent,
/// and as `RUN_STARTED.input` carries it: the thread and run, the conversation, the shared
/// state, the client's tools and context, and the answers to the interrupts the thread's last
/// run ended with (`resume`).
///
/// It serializes as the TypeScript `RunAgentInput` does (camelCase, optional fields left out);
/// reading it, `threadId` and `runId` are required, absent `messages`, `tools` and `context` are
/// empty, and `"state": null` is no state (the protocol's rule: null and absent are the same).
///
/// ```
/// use agentstate::agui::{ResumeStatus, RunAgentInput};
///
/// let input: RunAgentInput = serde_json::from_str(r#"{
///   "threadId": "t-1", "runId": "r-2", "state": null,
///   "messages": [{"id": "u1", "role": "user", "content": "Refund me"}],
///   "tools": [{"name": "confirm", "description": "Asks the user", "parameters": {"type": "object"}}],
///   "context": [{"description": "locale", "value": "en-GB"}],
///   "forwardedProps": {},
///   "resume": [{"interruptId": "approve:1.0:0", "status": "resolved", "payload": true}]
/// }"#)?;
/// assert_eq!((input.thread_id.as_str(), input.state), ("t-1", None));
/// assert_eq!(input.tools[0].name, "confirm");
/// let resume = input.resume.as_deref().unwrap_or_default();
/// assert_eq!(resume[0].status, ResumeStatus::Resolved);
/// assert_eq!(resume[0].payload, Some(serde_json::json!(true)));
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunAgentInput {
    /// The conversation thread.
    pub thread_id: String,
    /// The run.
    pub run_id: String,
    /// The run this one was started from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_run_id: Option<String>,
    /// The protocol version the client speaks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol_version: Option<String>,
    /// The shared state as the client holds it (`null` reads as none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<Value>,
    /// The conversation as the client holds it.
    #[serde(default)]
    pub messages: Vec<AguiMessage>,
    /// The tools the client offers (frontend tools: the client executes them).
    #[serde(default)]
    pub tools: Vec<AguiTool>,
    /// Context the client gives the agent.
    #[serde(default)]
    pub context: Vec<AguiContext>,
    /// Properties forwarded to the agent as they are.
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub forwarded_props: Option<Value>,
    /// Answers to the interrupts the thread's last run ended with, one per interrupt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resume: Option<Vec<ResumeEntry>>,
}

/// A tool the client offers (`RunAgentInput.tools`): its name, what it does, and its
/// parameters' JSON Schema.
///
/// ```
/// use agentstate::agui::AguiTool;
///
/// let tool: AguiTool = serde_json::from_str(r#"{"name": "confirm", "description": "Asks the user"}"#)?;
/// assert_eq!(tool.parameters, None);
/// assert_eq!(serde_json::to_string(&tool)?, r#"{"name":"confirm","description":"Asks the user"}"#);
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AguiTool {
    /// The tool's name, as a model calls it.
    pub name: String,
    /// What it does.
    pub description: String,
    /// The JSON Schema of its arguments.
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub parameters: Option<Value>,
    /// Free-form metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Map<String, Value>>,
}

/// A piece of context the client gives the agent (`RunAgentInput.context`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct AguiContext {
    /// What it is.
    pub description: String,
    /// Its value.
    pub value: String,
}

/// An answer to one interrupt (`RunAgentInput.resume[]`): the interrupt's id, whether it was
/// answered or cancelled, and the answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResumeEntry {
    /// The id of the interrupt answered (`RUN_FINISHED.outcome.interrupts[].id`).
    pub interrupt_id: String,
    /// Answered or cancelled.
    pub status: ResumeStatus,
    /// The answer (absent and `null` told apart).
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub payload: Option<Value>,
    /// Data about the answer (signatures, routing keys), not the answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Map<String, Value>>,
}

/// Whether an interrupt was answered or cancelled ([`ResumeEntry::status`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ResumeStatus {
    /// Answered, with the entry's payload.
    Resolved,
    /// Cancelled: the user declined to answer.
    Cancelled,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The body `@ag-ui/client` 1.0.0's `HttpAgent` POSTs (captured from it).
    const HTTP_AGENT_BODY: &str = r#"{"threadId":"t-1","runId":"r-2","protocolVersion":"1.0","state":{"n":1},"messages":[{"id":"u1","role":"user","content":"Refund me"}],"tools":[{"name":"confirm","description":"Asks the user","parameters":{"type":"object","properties":{}}}],"context":[{"description":"locale","value":"en-GB"}],"forwardedProps":{},"resume":[{"interruptId":"approve:1.0:0","status":"resolved","payload":true}]}"#;

    #[test]
    fn the_http_agents_body_reads_and_writes_back_as_the_same_json() {
        let input: RunAgentInput = serde_json::from_str(HTTP_AGENT_BODY).unwrap();
        assert_eq!(input.protocol_version.as_deref(), Some("1.0"));
        assert_eq!(input.messages[0].id(), "u1");
        assert_eq!(input.context[0].value, "en-GB");
        assert_eq!(input.forwarded_props, Some(serde_json::json!({})));
        // The same JSON (keys of maps and tagged messages in their own order).
        let body: Value = serde_json::from_str(HTTP_AGENT_BODY).unwrap();
        assert_eq!(serde_json::to_value(&input).unwrap(), body);
    }

    #[test]
    fn null_state_is_no_state_and_a_null_payload_is_kept() {
        let input: RunAgentInput = serde_json::from_str(
            r#"{"threadId":"t","runId":"r","state":null,"resume":[{"interruptId":"i","status":"cancelled","payload":null}]}"#,
        )
        .unwrap();
        assert_eq!(input.state, None);
        assert!(input.messages.is_empty() && input.tools.is_empty() && input.context.is_empty());
        let entry = &input.resume.as_ref().unwrap()[0];
        assert_eq!(
            (entry.status, entry.payload.clone()),
            (ResumeStatus::Cancelled, Some(Value::Null))
        );
        assert_eq!(
            serde_json::to_value(&input).unwrap(),
            serde_json::json!({"threadId":"t","runId":"r","messages":[],"tools":[],"context":[],
                "resume":[{"interruptId":"i","status":"cancelled","payload":null}]})
        );
    }

    #[test]
    fn a_missing_thread_or_a_wrong_status_is_an_error_naming_the_field() {
        let missing = serde_json::from_str::<RunAgentInput>(r#"{"runId":"r"}"#).unwrap_err();
        assert!(missing.to_string().contains("threadId"), "{missing}");
        let status = serde_json::from_str::<RunAgentInput>(
            r#"{"threadId":"t","runId":"r","resume":[{"interruptId":"i","status":"maybe"}]}"#,
        )
        .unwrap_err();
        assert!(status.to_string().contains("maybe"), "{status}");
    }
}
