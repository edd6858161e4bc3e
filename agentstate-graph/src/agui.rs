//! AG-UI: a run's [`Event`]s as AG-UI events (feature `ag-ui`), which an AG-UI client folds
//! back into the run's messages and state ([`ChatState`](agentstate::agui::ChatState)).
//!
//! [`AguiAdapter`] turns each run event into AG-UI events:
//!
//! | run event | AG-UI events |
//! |---|---|
//! | run started | `RUN_STARTED`, `STATE_SNAPSHOT`, `MESSAGES_SNAPSHOT` (the state's messages, if any) |
//! | node started / finished | `STEP_STARTED` / `STEP_FINISHED` named by the node (after closing what it streamed) |
//! | a node's text delta | `TEXT_MESSAGE_START` (first delta of a message id), `TEXT_MESSAGE_CONTENT`; `TEXT_MESSAGE_END` when the node finishes |
//! | a node's tool call delta | `TOOL_CALL_START` (first delta), `TOOL_CALL_ARGS`; `TOOL_CALL_END` when the node finishes |
//! | a node's custom event | `CUSTOM` |
//! | step finished | the messages the step added that were not streamed (`TEXT_MESSAGE_*`, `TOOL_CALL_*` with the assistant message as parent, `TOOL_CALL_RESULT`; a `MESSAGES_SNAPSHOT` for a user or system message), then `STATE_DELTA` from the state before the step (through [`agentstate::agui::state_delta`]) |
//! | run finished / failed | `RUN_FINISHED` / `RUN_ERROR` (code: the error's category) |
//!
//! ```
//! use agentstate::agui::ChatState;
//! use agentstate::message::{Message, Role};
//! use agentstate::state::{AgentState, AgentStateUpdate};
//! use agentstate_graph::agui::AguiAdapter;
//! use agentstate_graph::{Context, Graph, END};
//! use futures_util::StreamExt;
//! use std::sync::Arc;
//!
//! let graph = Graph::builder()
//!     .node("model", |_: Arc<AgentState>, cx: Context| async move {
//!         cx.text_delta("m1", "Hel");
//!         cx.text_delta("m1", "lo!");
//!         let reply = Message::text_message("Hello!", Role::Assistant).with_id("m1");
//!         Ok::<_, std::convert::Infallible>(AgentStateUpdate::default().context(vec![reply]))
//!     })
//!     .entry("model")
//!     .edge("model", END)
//!     .build()?;
//! let start = AgentState::default();
//! let mut adapter = AguiAdapter::new("thread-1", &start, |s: &AgentState| s.context.as_slice())?;
//! let mut chat = ChatState::new();
//! tokio::runtime::Builder::new_current_thread().build()?.block_on(async {
//!     let mut run = graph.stream(start);
//!     while let Some(event) = run.next().await {
//!         for agui in adapter.events(&event) {
//!             chat.apply(&agui);
//!         }
//!     }
//! });
//! assert_eq!(chat.messages()[0].text(), "Hello!");
//! assert_eq!(chat.agent_state()["context"][0]["content"][0]["text"], "Hello!");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use crate::event::Event;
use crate::name::NodeKey;
use crate::node::Emitted;
use crate::GraphState;
use agentstate::agui::MessageContent;
use agentstate::agui::{state_delta, AguiMessage, Event as Agui};
use agentstate::agui::{MessagesSnapshotEvent, StepFinishedEvent, StepStartedEvent};
use agentstate::message::Message;
use serde::Serialize;
use serde_json::Value;
use std::collections::HashSet;

/// Reads a state's messages.
pub type MessagesOf<S> = fn(&S) -> &[Message];

/// Turns a run's events into AG-UI events; see the [module docs](self).
pub struct AguiAdapter<S> {
    thread_id: String,
    run_id: String,
    messages: MessagesOf<S>,
    /// The state's JSON as the client last received it.
    json: Value,
    initial: Vec<AguiMessage>,
    /// Ids of the messages the client has.
    seen: HashSet<String>,
    /// Text messages and tool calls streamed, and those still open (node, id, is a tool call).
    streamed: HashSet<String>,
    open: Vec<(String, String, bool)>,
}

impl<S: GraphState + Serialize> AguiAdapter<S> {
    /// An adapter for a run of thread `thread_id` starting from `initial`, whose messages
    /// `messages` reads. Fails if the state does not serialize to JSON.
    pub fn new(
        thread_id: impl Into<String>,
        initial: &S,
        messages: MessagesOf<S>,
    ) -> Result<Self, serde_json::Error> {
        let initial_messages = messages(initial);
        Ok(AguiAdapter {
            thread_id: thread_id.into(),
            run_id: String::new(),
            messages,
            json: serde_json::to_value(initial)?,
            initial: agentstate::agui::messages_to_agui(initial_messages),
            seen: initial_messages
                .iter()
                .map(|m| m.message_id.to_string())
                .collect(),
            streamed: HashSet::new(),
            open: Vec::new(),
        })
    }

    /// The AG-UI events of one run event, in order.
    pub fn events<K: NodeKey>(&mut self, event: &Event<S, K>) -> Vec<Agui> {
        let mut out = Vec::new();
        match event {
            Event::RunStarted { run_id } => {
                self.run_id = run_id.clone();
                out.push(Agui::run_started(&self.thread_id, run_id));
                out.push(Agui::state_snapshot(self.json.clone()));
                if !self.initial.is_empty() {
                    out.push(messages_snapshot(std::mem::take(&mut self.initial)));
                }
            }
            Event::NodeStarted { node, .. } => out.push(Agui::StepStarted(StepStartedEvent {
                step_name: node.name().to_owned(),
                ..Default::default()
            })),
            Event::Emitted { node, emitted, .. } => self.emitted(node, emitted, &mut out),
            Event::NodeFinished { node, .. } => {
                let name = node.name();
                self.open.retain(|(owner, id, tool)| {
                    if owner != name {
                        return true;
                    }
                    out.push(if *tool {
                        Agui::tool_end(id)
                    } else {
                        Agui::text_end(id)
                    });
                    false
                });
                out.push(Agui::StepFinished(StepFinishedEvent {
                    step_name: name.to_owned(),
                    ..Default::default()
                }));
            }
            Event::StepFinished { state, .. } => {
                self.new_messages(state, &mut out);
                match serde_json::to_value(&**state) {
                    Ok(json) => {
                        out.push(state_delta(&self.json, &json));
                        self.json = json;
                    }
                    Err(error) => out.push(Agui::run_error(
                        format!("the state could not be serialized to JSON: {error}"),
                        Some("state_serialization".to_owned()),
                    )),
                }
            }
            Event::RunFinished { .. } => {
                out.push(Agui::run_finished(&self.thread_id, &self.run_id));
            }
            Event::RunFailed { error } => {
                out.push(Agui::run_error(
                    error.to_string(),
                    Some(error.category().to_owned()),
                ));
            }
            _ => {}
        }
        out
    }

    fn emitted(&mut self, node: &str, emitted: &Emitted, out: &mut Vec<Agui>) {
        match emitted {
            Emitted::Custom { name, value } => out.push(Agui::custom(name, value.clone())),
            Emitted::TextDelta { message_id, delta } => {
                if self.streamed.insert(message_id.clone()) {
                    out.push(Agui::text_start(message_id));
                    self.open.push((node.to_owned(), message_id.clone(), false));
                }
                out.push(Agui::text_content(message_id, delta));
            }
            Emitted::ToolCallDelta {
                message_id,
                tool_call_id,
                name,
                delta,
            } => {
                if self.streamed.insert(tool_call_id.clone()) {
                    out.push(Agui::tool_start(
                        tool_call_id,
                        name,
                        Some(message_id.clone()),
                    ));
                    self.open
                        .push((node.to_owned(), tool_call_id.clone(), true));
                }
                out.push(Agui::tool_args(tool_call_id, delta));
            }
        }
    }

    /// The events of the messages the client does not have yet.
    fn new_messages(&mut self, state: &S, out: &mut Vec<Agui>) {
        let messages = (self.messages)(state);
        let mut snapshot = false;
        for message in messages {
            if !self.seen.insert(message.message_id.to_string()) {
                continue;
            }
            for agui in agentstate::agui::to_agui(message) {
                match agui {
                    AguiMessage::Assistant(m) => {
                        let text = m.content.unwrap_or_default();
                        if !self.streamed.contains(&m.id) && !text.is_empty() {
                            out.push(Agui::text_start(&m.id));
                            out.push(Agui::text_content(&m.id, text));
                            out.push(Agui::text_end(&m.id));
                        }
                        for call in m.tool_calls.unwrap_or_default() {
                            if self.streamed.contains(&call.id) {
                                continue;
                            }
                            out.push(Agui::tool_start(
                                &call.id,
                                &call.function.name,
                                Some(m.id.clone()),
                            ));
                            out.push(Agui::tool_args(&call.id, call.function.arguments));
                            out.push(Agui::tool_end(&call.id));
                        }
                    }
                    AguiMessage::Tool(m) => {
                        out.push(Agui::tool_result(
                            m.id,
                            m.tool_call_id,
                            MessageContent::Text(m.content.text().into_owned()),
                        ));
                    }
                    _ => snapshot = true,
                }
            }
        }
        if snapshot {
            // A user or system message has no streaming event: the whole list, as it is.
            out.push(messages_snapshot(agentstate::agui::messages_to_agui(
                messages,
            )));
        }
    }
}

fn messages_snapshot(messages: Vec<AguiMessage>) -> Agui {
    Agui::MessagesSnapshot(MessagesSnapshotEvent {
        messages,
        ..Default::default()
    })
}
