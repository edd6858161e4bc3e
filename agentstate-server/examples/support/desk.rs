//! The help desk graph the `serve` example serves and the JS SDK test drives: three nodes,
//! `triage` (a custom event), `draft` (the scripted model's answer, streamed as message deltas)
//! and `approve` (an interrupt: a person approves the answer).
//!
//! A question `fail` fails `triage`, `panic` panics in it (a bug in a node); a question
//! starting with `slow` makes `draft` take two seconds (something to cancel).

use agentstate::message::{Message, Role};
use agentstate::model::ScriptedModel;
use agentstate::providers::ModelRequest;
use agentstate::AgentState;
use agentstate_graph::{BoxError, Context, Graph, END};
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;

/// The desk's state.
#[derive(AgentState, Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Desk {
    /// The conversation (a user's question comes in as a message).
    #[reducer(add_messages)]
    pub messages: Vec<Message>,
    /// What the nodes did, in order.
    #[reducer(append)]
    pub log: Vec<String>,
    /// The person's verdict on the answer.
    pub approved: Option<bool>,
}

/// The last user message's text.
fn question(state: &Desk) -> String {
    state
        .messages
        .iter()
        .rev()
        .find(|m| m.role == Role::User)
        .map(Message::text)
        .unwrap_or_default()
}

/// The help desk graph.
pub fn graph() -> Result<Graph<Desk, &'static str>, agentstate_graph::CompileError> {
    let request = Arc::new(
        ModelRequest::builder("scripted")
            .build()
            .expect("a model request"),
    );
    Graph::builder()
        .node("triage", |state: Arc<Desk>, cx: Context| async move {
            let asked = question(&state);
            if asked == "panic" {
                panic!("triage met a question it was never meant to see");
            }
            if asked == "fail" {
                return Err(BoxError::from(format!(
                    "triage cannot route the question `{asked}`"
                )));
            }
            cx.custom("triage", json!({"topic": "general", "question": asked}));
            Ok(DeskUpdate::default().log(vec!["triage".to_owned()]))
        })
        .node("draft", move |state: Arc<Desk>, cx: Context| {
            let request = Arc::clone(&request);
            async move {
                let asked = question(&state);
                if asked.starts_with("slow") {
                    tokio::time::sleep(Duration::from_secs(2)).await;
                }
                // A new scripted model per call: one answer, streamed in pieces of 4 characters.
                let model =
                    ScriptedModel::from_texts([format!("You asked: {asked}")]).chunk_size(4);
                let answer = cx.complete(&model, &request, &state.messages).await?;
                Ok::<_, BoxError>(
                    DeskUpdate::default()
                        .messages(vec![answer])
                        .log(vec!["draft".to_owned()]),
                )
            }
        })
        .node("approve", |_: Arc<Desk>, cx: Context| async move {
            let verdict = cx.interrupt(json!({"question": "Send this answer?"}))?;
            Ok::<_, BoxError>(
                DeskUpdate::default()
                    .approved(verdict.as_bool())
                    .log(vec!["approve".to_owned()]),
            )
        })
        .entry("triage")
        .edge("triage", "draft")
        .edge("draft", "approve")
        .edge("approve", END)
        .build()
}
