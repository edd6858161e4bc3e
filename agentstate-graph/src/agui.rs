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
//! | step committed (durable runs) | nothing (AG-UI has no checkpoint event; the version is in the run event) |
//! | run finished | what the client does not have yet of the final state (as after a step), then `RUN_FINISHED` |
//! | run suspended (durable runs) | `TEXT_MESSAGE_END` / `TOOL_CALL_END` / `STEP_FINISHED` for what is still open, what the client does not have yet of the state, then `RUN_FINISHED` whose `outcome` is `{"type": "interrupt", "interrupts": [...]}` (AG-UI's interrupt outcome; see [`interrupt`]) |
//! | run failed | `RUN_ERROR` (code: the error's category) |
//! | a durable stream's error ([`AguiAdapter::failed`], feature `store`; [`AguiAdapter::error`] for any other) | `RUN_ERROR` (code: the error's category) |
//!
//! One adapter follows one client through a run; a durable run that suspends and is resumed
//! ([`DurableGraph::stream_resume`](crate::durable::DurableGraph::stream_resume)) may go on
//! through the same adapter, or through a new one made from the thread's stored state (then
//! the resumed run begins with a snapshot of it). A node that streams text and then asks its
//! question runs again from its start on resume, and streams its text again under the same
//! message id: ask before streaming.
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
//!
//! A durable run (feature `store`) streams the same way: its stream's items are
//! `Result<Event, DurableError>`, an error mapped by [`AguiAdapter::failed`]. A run that waits
//! for a person ends with `RUN_FINISHED` carrying the questions; the run resumed with the
//! answers, by id, streams the rest:
//!
//! ```
//! # #[cfg(feature = "store")] {
//! use agentstate::agui::RunOutcome;
//! use agentstate::agui::{ChatState, Event as Agui};
//! use agentstate::message::{Message, Role};
//! use agentstate::state::{AgentState, AgentStateUpdate};
//! use agentstate_graph::agui::AguiAdapter;
//! use agentstate_graph::durable::{Answers, DurableStream};
//! use agentstate_graph::{BoxError, Context, Graph, END};
//! use agentstate_store::SqliteStore;
//! use futures_util::StreamExt;
//! use std::sync::Arc;
//!
//! let graph = Graph::builder()
//!     .node("approve", |_: Arc<AgentState>, cx: Context| async move {
//!         let yes = cx.interrupt(serde_json::json!("Refund 30 EUR?"))?.as_bool() == Some(true);
//!         let text = if yes { "Refunded." } else { "Not refunded." };
//!         let reply = Message::text_message(text, Role::Assistant).with_id("m1");
//!         Ok::<_, BoxError>(AgentStateUpdate::default().context(vec![reply]))
//!     })
//!     .entry("approve")
//!     .edge("approve", END)
//!     .build()?;
//! /// Streams a durable run to AG-UI: every event, and an error as `RUN_ERROR`.
//! async fn to_agui(mut run: DurableStream<AgentState, &'static str>,
//!                  adapter: &mut AguiAdapter<AgentState>) -> Vec<Agui> {
//!     let mut agui = Vec::new();
//!     while let Some(item) = run.next().await {
//!         agui.extend(match item {
//!             Ok(event) => adapter.events(&event),
//!             Err(error) => adapter.failed(&error),
//!         });
//!     }
//!     agui
//! }
//!
//! tokio::runtime::Builder::new_current_thread().enable_all().build()?.block_on(async {
//!     let store = SqliteStore::open_in_memory()?;
//!     store.create("t-1", AgentState::default()).await?;
//!     let durable = graph.durable(&store);
//!     let start = store.load::<AgentState>("t-1").await?.state;
//!     let mut adapter = AguiAdapter::new("t-1", &start, |s: &AgentState| s.context.as_slice())?;
//!     let asked = to_agui(durable.stream("t-1", ()), &mut adapter).await;
//!     let Some(Agui::RunFinished(finished)) = asked.last() else { panic!("{asked:?}") };
//!     let Some(RunOutcome::Interrupt { interrupts }) = &finished.outcome else { panic!() };
//!     assert_eq!(interrupts[0]["message"], "Refund 30 EUR?");
//!
//!     // The person says yes: a new run on the thread, answering the question by its id.
//!     let id = interrupts[0]["id"].as_str().unwrap();
//!     let answers = Answers::new().answer(id, true);
//!     let rest = to_agui(durable.stream_resume("t-1", answers), &mut adapter).await;
//!     let mut chat = ChatState::new();
//!     for event in asked.iter().chain(&rest) {
//!         chat.apply(event);
//!     }
//!     assert_eq!(chat.messages()[0].text(), "Refunded.");
//!     Ok::<(), Box<dyn std::error::Error>>(())
//! })?;
//! # }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#[cfg(feature = "store")]
use crate::durable::DurableError;
use crate::effect::Interrupt;
use crate::event::Event;
use crate::name::NodeKey;
use crate::node::Emitted;
use crate::GraphState;
use agentstate::agui::{message_events, state_delta, AguiMessage, Event as Agui, OpenStreams};
use agentstate::agui::{
    MessagesSnapshotEvent, RunFinishedEvent, RunOutcome, StepFinishedEvent, StepStartedEvent,
};
use agentstate::message::Message;
use serde::Serialize;
use serde_json::{Map, Value};
use std::collections::HashSet;

/// AG-UI's `Interrupt` object of one of a durable run's questions, as `RUN_FINISHED`'s
/// interrupt outcome carries it: `id` (what the answer names: `resume[].interruptId` in AG-UI,
/// [`Answers::answer`](crate::durable::Answers::answer) here), `reason` (`"breakpoint"` for a
/// static breakpoint, `"interrupt"` for a node's
/// [`Context::interrupt`](crate::Context::interrupt)), `message` (the payload, when it is a
/// string) and `metadata`: the asking `node`, its `step`, the `payload` as the node gave it,
/// and where inside the step's node it was asked (`fan_out_index`, `branch_name`), if inside one.
///
/// ```
/// use agentstate_graph::agui::interrupt;
/// use agentstate_graph::Interrupt;
/// use serde_json::json;
///
/// let asked: Interrupt = serde_json::from_value(json!({
///     "id": "approve:2.0:0@run-1", "node": "approve", "step_node": "approve", "step": 2,
///     "payload": {"refund": 30}
/// }))?;
/// assert_eq!(interrupt(&asked), json!({
///     "id": "approve:2.0:0@run-1",
///     "reason": "interrupt",
///     "metadata": {"node": "approve", "step": 2, "payload": {"refund": 30}}
/// }));
/// # Ok::<(), serde_json::Error>(())
/// ```
pub fn interrupt(asked: &Interrupt) -> Value {
    let breakpoint = matches!(&asked.payload, Value::Object(map)
        if map.len() == 1 && map.get("breakpoint").is_some_and(Value::is_string));
    let mut metadata = Map::new();
    metadata.insert("node".into(), Value::from(asked.node.as_str()));
    metadata.insert("step".into(), Value::from(asked.step));
    metadata.insert("payload".into(), asked.payload.clone());
    metadata.extend(asked.metadata.clone());
    let mut object = Map::new();
    object.insert("id".into(), Value::from(asked.id.as_str()));
    let reason = if breakpoint {
        "breakpoint"
    } else {
        "interrupt"
    };
    object.insert("reason".into(), Value::from(reason));
    if let Value::String(message) = &asked.payload {
        object.insert("message".into(), Value::from(message.as_str()));
    }
    object.insert("metadata".into(), Value::Object(metadata));
    Value::Object(object)
}

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
    /// Text messages and tool calls streamed, and those still open (by node).
    streams: OpenStreams,
    /// The nodes started and not finished (`STEP_STARTED` sent, `STEP_FINISHED` not yet).
    steps: Vec<String>,
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
            streams: OpenStreams::default(),
            steps: Vec::new(),
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
            Event::NodeStarted { node, .. } => {
                self.steps.push(node.name().to_owned());
                out.push(Agui::StepStarted(StepStartedEvent {
                    step_name: node.name().to_owned(),
                    ..Default::default()
                }));
            }
            Event::Emitted { node, emitted, .. } => self.emitted(node, emitted, &mut out),
            Event::NodeFinished { node, .. } => {
                let name = node.name();
                self.streams.close(Some(name), &mut out);
                if let Some(at) = self.steps.iter().position(|step| step == name) {
                    self.steps.remove(at);
                }
                out.push(step_finished(name));
            }
            // The state the run starts from (no node made it): AG-UI's `RUN_STARTED` and
            // snapshots said it already.
            Event::StepFinished { record, .. } if record.nodes.is_empty() => {}
            Event::StepFinished { state, .. } => self.sync(state, true, &mut out),
            Event::RunFinished { state } => {
                self.close(&mut out);
                self.sync(state, false, &mut out);
                out.push(Agui::run_finished(&self.thread_id, &self.run_id));
            }
            Event::RunSuspended { state, interrupts } => {
                self.close(&mut out);
                self.sync(state, false, &mut out);
                out.push(Agui::RunFinished(RunFinishedEvent {
                    thread_id: self.thread_id.clone(),
                    run_id: self.run_id.clone(),
                    outcome: Some(RunOutcome::Interrupt {
                        interrupts: interrupts.iter().map(interrupt).collect(),
                    }),
                    ..Default::default()
                }));
            }
            Event::RunFailed { error } => {
                self.forget_open();
                out.push(Agui::run_error(
                    error.to_string(),
                    Some(error.category().to_owned()),
                ));
            }
            // Nothing: AG-UI has no checkpoint event, and a step's start is its nodes'.
            Event::StepStarted { .. } | Event::StepCommitted { .. } => {}
        }
        out
    }

    /// `RUN_ERROR` for a run that failed other than through its own events (a durable
    /// stream's error is [`failed`](AguiAdapter::failed)'s): `message`, with `code` as the
    /// error's machine-readable category. What the run streamed stays open, as for
    /// [`Event::RunFailed`]: AG-UI has no event to withdraw it, and a client marks it cut short.
    ///
    /// ```
    /// use agentstate::state::AgentState;
    /// use agentstate_graph::agui::AguiAdapter;
    ///
    /// let mut adapter = AguiAdapter::new("t-1", &AgentState::default(), |s: &AgentState| s.context.as_slice())?;
    /// let events = adapter.error("the model provider is down", "provider_unavailable");
    /// let json = serde_json::to_value(&events[0])?;
    /// assert_eq!((json["type"].as_str(), json["code"].as_str()), (Some("RUN_ERROR"), Some("provider_unavailable")));
    /// # Ok::<(), serde_json::Error>(())
    /// ```
    pub fn error(&mut self, message: impl Into<String>, code: impl Into<String>) -> Vec<Agui> {
        self.forget_open();
        vec![Agui::run_error(message, Some(code.into()))]
    }

    /// The AG-UI events of a durable stream's error (its last item,
    /// [`DurableStream`](crate::durable::DurableStream)): `RUN_ERROR`, its code the error's
    /// [category](DurableError::category) (`node_exception`, `thread_leased`, `lease_lost`,
    /// `interrupt_unknown`...). An error that came before the run started (the thread is
    /// leased, an answer names no pending question) is the stream's only event: AG-UI accepts
    /// `RUN_ERROR` as a stream's first event.
    #[cfg(feature = "store")]
    pub fn failed(&mut self, error: &DurableError<S>) -> Vec<Agui> {
        self.error(error.to_string(), error.category())
    }

    /// Forgets what is open, left so (a failed run): the client marks it cut short.
    fn forget_open(&mut self) {
        self.streams.forget();
        self.steps.clear();
    }

    /// Closes what is still open: text messages and tool calls, then steps (nodes that did not
    /// finish: a suspended step's).
    fn close(&mut self, out: &mut Vec<Agui>) {
        self.streams.close(None, out);
        for step in self.steps.drain(..) {
            out.push(step_finished(&step));
        }
    }

    /// Sends what the client does not have of `state`: its new messages, then `STATE_DELTA`
    /// (`always`: even an empty one, as after every step).
    fn sync(&mut self, state: &S, always: bool, out: &mut Vec<Agui>) {
        self.new_messages(state, out);
        match serde_json::to_value(state) {
            Ok(json) => {
                if always || json != self.json {
                    out.push(state_delta(&self.json, &json));
                    self.json = json;
                }
            }
            Err(error) => out.push(Agui::run_error(
                format!("the state could not be serialized to JSON: {error}"),
                Some("state_serialization".to_owned()),
            )),
        }
    }

    fn emitted(&mut self, node: &str, emitted: &Emitted, out: &mut Vec<Agui>) {
        match emitted {
            Emitted::Custom { name, value } => out.push(Agui::custom(name, value.clone())),
            Emitted::TextDelta { message_id, delta } => {
                self.streams.text(node, message_id, delta, out);
            }
            Emitted::ToolCallDelta {
                message_id,
                tool_call_id,
                name,
                delta,
            } => self
                .streams
                .tool_call(node, message_id, tool_call_id, name, delta, out),
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
                snapshot |= !message_events(agui, self.streams.streamed(), out);
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

fn step_finished(name: &str) -> Agui {
    Agui::StepFinished(StepFinishedEvent {
        step_name: name.to_owned(),
        ..Default::default()
    })
}

fn messages_snapshot(messages: Vec<AguiMessage>) -> Agui {
    Agui::MessagesSnapshot(MessagesSnapshotEvent {
        messages,
        ..Default::default()
    })
}
