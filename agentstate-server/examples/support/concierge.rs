//! The concierge graph the `chat` example serves for CopilotKit's chat (`examples/web`'s
//! CopilotKit page, over AG-UI): one `model` node, a scripted model that streams
//! `You said: ...`; `refund` goes to `approve`, which asks a person (an interrupt, which
//! CopilotKit's `useInterrupt` renders); `theme ...`, when the client offers its frontend tool
//! `set_theme`, is a call of that tool that ends the run (the browser runs it and sends the
//! result, which the next run answers).

use agentstate::message::{Message, Role, ToolCall};
use agentstate::model::ScriptedModel;
use agentstate::providers::ModelRequest;
use agentstate::AgentState;
use agentstate_graph::{BoxError, Context, Graph, END};
use serde_json::{json, Value};
use std::sync::Arc;

/// The concierge's state.
#[derive(AgentState, Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Concierge {
    /// The conversation: the client's new messages come in here.
    #[reducer(add_messages)]
    pub messages: Vec<Message>,
    /// The client's frontend tools (AG-UI `tools`), as each run's input gives them.
    pub tools: Vec<Value>,
    /// The person's answer to the refund question.
    pub approved: Option<bool>,
}

/// The last message's text if a user wrote it.
fn asked(state: &Concierge) -> Option<String> {
    state
        .messages
        .last()
        .filter(|m| m.role == Role::User)
        .map(Message::text)
}

/// The concierge graph.
pub fn graph() -> Result<Graph<Concierge, &'static str>, agentstate_graph::CompileError> {
    let request = Arc::new(
        ModelRequest::builder("scripted")
            .build()
            .expect("a model request"),
    );
    Graph::builder()
        .node("model", move |state: Arc<Concierge>, cx: Context| {
            let request = Arc::clone(&request);
            async move {
                let offered = |name: &str| state.tools.iter().any(|t| t["name"] == name);
                let answer = match (asked(&state), state.messages.last()) {
                    (Some(q), _) if q.trim() == "refund" => return Ok(ConciergeUpdate::default()),
                    (Some(q), _) if q.starts_with("theme ") && offered("set_theme") => {
                        let color = q["theme ".len()..].trim().to_owned();
                        let n = state.messages.len();
                        let call = ToolCall::new(
                            format!("call-{n}"),
                            "set_theme",
                            json!({ "color": color }),
                        );
                        let asking = Message::text_message("", Role::Assistant)
                            .with_id(format!("theme-{n}"))
                            .with_tool_calls(vec![call]);
                        return Ok(ConciergeUpdate::default().messages(vec![asking]));
                    }
                    (Some(q), _) => format!("You said: {q}"),
                    (None, Some(m)) if m.role == Role::Tool => {
                        format!("The page says: {}", m.text())
                    }
                    (None, _) => "Nothing to answer.".to_owned(),
                };
                let model = ScriptedModel::from_texts([answer]).chunk_size(4);
                let reply = cx.complete(&model, &request, &state.messages).await?;
                Ok::<_, BoxError>(ConciergeUpdate::default().messages(vec![reply]))
            }
        })
        .node("approve", |_: Arc<Concierge>, cx: Context| async move {
            let yes = cx.interrupt(json!("Refund 30 EUR?"))?.as_bool() == Some(true);
            let text = if yes { "Refunded." } else { "Not refunded." };
            Ok::<_, BoxError>(
                ConciergeUpdate::default()
                    .approved(Some(yes))
                    .messages(vec![Message::text_message(text, Role::Assistant)]),
            )
        })
        .entry("model")
        .route("model", |state: &Concierge| {
            match asked(state).as_deref().map(str::trim) {
                Some("refund") => "approve".into(),
                _ => END.into(),
            }
        })
        .edge("approve", END)
        .build()
}
