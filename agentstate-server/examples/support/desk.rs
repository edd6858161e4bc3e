//! The help desk graph the `serve` example serves and the SDK tests drive: three nodes,
//! `triage` (a custom event), `draft` (a model's answer, streamed as message deltas: a scripted
//! echo, or a provider's model) and `approve` (an interrupt: a person approves the answer).
//!
//! A question `fail` fails `triage`, `panic` panics in it (a bug in a node); a question
//! starting with `slow` makes `draft` take two seconds (something to cancel), one starting
//! with `block` makes it block its thread for five (a bug: a synchronous wait in an async
//! node, which no cancellation reaches).

use agentstate::message::{Message, Role};
use agentstate::model::{ChatModel, ScriptedModel};
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

/// The help desk graph, its answers from a scripted model (`You asked: ...`).
#[allow(dead_code)] // the tests' graph; the `serve` example calls `graph_with`
pub fn graph() -> Result<Graph<Desk, &'static str>, agentstate_graph::CompileError> {
    graph_with(None)
}

/// The help desk graph, its answers from `model` (a client and the model's name) if given, else
/// from a scripted model.
pub fn graph_with(
    model: Option<(Arc<dyn ChatModel>, String)>,
) -> Result<Graph<Desk, &'static str>, agentstate_graph::CompileError> {
    let name = model.as_ref().map_or("scripted", |(_, name)| name.as_str());
    let request = Arc::new(
        ModelRequest::builder(name)
            .build()
            .expect("a model request"),
    );
    let provider = model.map(|(client, _)| client);
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
            let (request, provider) = (Arc::clone(&request), provider.clone());
            async move {
                let asked = question(&state);
                if asked.starts_with("slow") {
                    tokio::time::sleep(Duration::from_secs(2)).await;
                }
                if asked.starts_with("block") {
                    std::thread::sleep(Duration::from_secs(5));
                }
                let answer = match provider {
                    Some(model) => cx.complete(&*model, &request, &state.messages).await?,
                    None => {
                        // A new scripted model per call: one answer, streamed in pieces of 4
                        // characters.
                        let model = ScriptedModel::from_texts([format!("You asked: {asked}")])
                            .chunk_size(4);
                        cx.complete(&model, &request, &state.messages).await?
                    }
                };
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
