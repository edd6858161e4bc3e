//! The AG-UI endpoint: `POST /agui/{assistant}` takes a `RunAgentInput` and streams the run as
//! AG-UI events (see the crate docs, "The AG-UI endpoint").

use crate::assistant::{AssistantError, RunEvent, RunOptions, Start};
use crate::error::ApiError;
use crate::record::{now_ms, Record, RunRecord};
use crate::runs::{new_thread, Job, Live};
use crate::server::{Served, Shared};
use agentstate::agui::{
    message_events, messages_from_agui, messages_to_agui, state_delta, Event,
    MessagesSnapshotEvent, OpenStreams, ResumeStatus, RunAgentInput, RunFinishedEvent, RunOutcome,
    RunStartedEvent,
};
use agentstate::message::Message;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::Router;
use futures_util::StreamExt;
use serde_json::{json, Map, Value};
use std::collections::HashSet;
use std::convert::Infallible;
use std::sync::{Arc, Mutex, PoisonError};

/// The name of the frames of a run's AG-UI events (beside the LangGraph ones of other runs).
pub(crate) const FRAME: &str = "agui";

/// The state field the client's tools go to, if the state has it.
const TOOLS_FIELD: &str = "tools";

/// The AG-UI route.
pub(crate) fn routes() -> Router<Arc<Shared>> {
    Router::new().route("/agui/{assistant}", post(run))
}

/// One run's AG-UI events from its [`RunEvent`]s: what the client has (its messages, the state
/// as the events so far make it), what is streaming, and whether the run's last event went.
pub(crate) struct AguiRun {
    thread_id: String,
    run_id: String,
    parent_run_id: Option<String>,
    messages_field: Option<String>,
    /// The state as the server shows it ([`Assistant::wire_values`](crate::Assistant::wire_values)).
    wire: Wire,
    /// The state as the client has it (as the server shows it).
    json: Value,
    /// Ids of the messages the client has.
    seen: HashSet<String>,
    /// The text messages and tool calls streamed, and those open (by node).
    streams: OpenStreams,
    ended: bool,
}

/// How the server shows a state's JSON.
type Wire = Arc<dyn Fn(Value) -> Value + Send + Sync>;

/// A run's AG-UI translation, shared by its task and its watcher.
pub(crate) type SharedAguiRun = Arc<Mutex<AguiRun>>;

impl AguiRun {
    /// `RUN_STARTED` (with the run the client started this one from) and the state the run
    /// starts from.
    fn started(&self) -> Vec<Event> {
        vec![
            Event::RunStarted(RunStartedEvent {
                thread_id: self.thread_id.clone(),
                run_id: self.run_id.clone(),
                parent_run_id: self.parent_run_id.clone(),
                ..Default::default()
            }),
            Event::state_snapshot(self.json.clone()),
        ]
    }

    /// The AG-UI events of `event`; nothing once the run's last event went.
    pub(crate) fn event(&mut self, event: &RunEvent) -> Vec<Event> {
        let mut out = Vec::new();
        if self.ended {
            return out;
        }
        match event {
            RunEvent::MessageDelta {
                node,
                message_id,
                delta,
                ..
            } => self.streams.text(node, message_id, delta, &mut out),
            RunEvent::ToolCallDelta {
                node,
                message_id,
                tool_call_id,
                name,
                delta,
            } => self
                .streams
                .tool_call(node, message_id, tool_call_id, name, delta, &mut out),
            RunEvent::Update { node, .. } => self.streams.close(Some(node), &mut out),
            RunEvent::Custom { name, value, .. } => out.push(Event::custom(name, value.clone())),
            RunEvent::Values(values) => {
                self.streams.close(None, &mut out);
                self.sync(values, &mut out);
            }
            RunEvent::Finished { values } => {
                self.streams.close(None, &mut out);
                self.sync(values, &mut out);
                out.push(self.finished(RunOutcome::Success {
                    pending_tool_call_ids: None,
                }));
            }
            RunEvent::Suspended { values, interrupts } => {
                self.streams.close(None, &mut out);
                self.sync(values, &mut out);
                let interrupts = interrupts
                    .iter()
                    .map(agentstate_graph::agui::interrupt)
                    .collect();
                out.push(self.finished(RunOutcome::Interrupt { interrupts }));
            }
            RunEvent::Failed(error) => out = self.failed(error),
            // Tasks and checkpoints have no AG-UI events of their own.
            RunEvent::TaskStarted { .. } | RunEvent::Committed { .. } => {}
        }
        out
    }

    /// `RUN_ERROR` for `error`, unless the run's last event went.
    pub(crate) fn failed(&mut self, error: &AssistantError) -> Vec<Event> {
        if std::mem::replace(&mut self.ended, true) {
            return Vec::new();
        }
        // What is open stays so: the client marks it cut short.
        self.streams.forget();
        vec![Event::run_error(
            &error.message,
            Some(error.category.clone()),
        )]
    }

    fn finished(&mut self, outcome: RunOutcome) -> Event {
        self.ended = true;
        Event::RunFinished(RunFinishedEvent {
            thread_id: self.thread_id.clone(),
            run_id: self.run_id.clone(),
            outcome: Some(outcome),
            ..Default::default()
        })
    }

    /// Sends what the client does not have of `values`: its new messages, then `STATE_DELTA`.
    fn sync(&mut self, values: &Value, out: &mut Vec<Event>) {
        let messages = messages_of(self.messages_field.as_deref(), values);
        let mut snapshot = false;
        for message in &messages {
            if !self.seen.insert(message.message_id.to_string()) {
                continue;
            }
            for agui in agentstate::agui::to_agui(message) {
                snapshot |= !message_events(agui, self.streams.streamed(), out);
            }
        }
        if snapshot {
            // A user or system message has no streaming event: the whole list, as it is.
            out.push(Event::MessagesSnapshot(MessagesSnapshotEvent {
                messages: messages_to_agui(&messages),
                ..Default::default()
            }));
        }
        let shown = (self.wire)(values.clone());
        if shown != self.json {
            out.push(state_delta(&self.json, &shown));
            self.json = shown;
        }
    }
}

/// The messages in `values`' field `field` (none if it has none or they do not read as
/// messages).
fn messages_of(field: Option<&str>, values: &Value) -> Vec<Message> {
    field
        .and_then(|f| values.get(f))
        .and_then(|list| serde_json::from_value(list.clone()).ok())
        .unwrap_or_default()
}

/// `POST /agui/{assistant}`: a run on thread `threadId`, streamed as AG-UI events.
async fn run(
    State(shared): State<Arc<Shared>>,
    Path(assistant): Path<String>,
    bytes: Bytes,
) -> Result<Response, ApiError> {
    let input: RunAgentInput = serde_json::from_slice(&bytes).map_err(|e| {
        ApiError::unprocessable(format!(
            "the body of an AG-UI run of assistant `{assistant}` is not a RunAgentInput: {e}"
        ))
    })?;
    let served = shared
        .assistant(&assistant)
        .ok_or_else(|| ApiError::not_found(format!("assistant `{assistant}` does not exist")))?;
    let (thread_id, run_id) = (input.thread_id.as_str(), input.run_id.as_str());
    for (what, id) in [("thread id", thread_id), ("run id", run_id)] {
        agentstate_store::check_id(id).map_err(|e| {
            ApiError::unprocessable(format!(
                "the {what} `{id}` of an AG-UI run of assistant `{assistant}` is not valid: {e}"
            ))
        })?;
    }
    let existing = match shared.runs.get(run_id) {
        Some(live) => Some(live.thread_id.clone()),
        None => shared.records.run(run_id).await?.map(|run| run.thread_id),
    };
    if let Some(thread) = existing {
        return Err(ApiError::conflict(format!(
            "run `{run_id}` exists already (on thread `{thread}`); an AG-UI run needs a new `runId`"
        )));
    }
    let mut record = shared
        .records
        .thread(thread_id)
        .await?
        .unwrap_or_else(|| new_thread(thread_id));
    if let Some(graph) = record.graph_id.as_deref().filter(|g| *g != served.graph_id) {
        return Err(ApiError::unprocessable(format!(
            "thread `{thread_id}` holds the state of graph `{graph}`, so assistant `{assistant}` (graph `{}`) cannot run on it",
            served.graph_id
        )));
    }
    let live = Live::new(run_id, thread_id);
    // One run per thread: a busy thread refuses the run before its stream starts.
    shared.runs.register(&live, |running| match running.first() {
        Some(other) => Err(ApiError::conflict(format!(
            "thread `{thread_id}` is busy with run `{}`; AG-UI run `{run_id}` was refused (retry when it ends)",
            other.run_id
        ))),
        None => Ok(()),
    })?;
    let prepared = async {
        let (start, agui) = prepare(served, &input).await?;
        record.graph_id = Some(served.graph_id.clone());
        record.updated_ms = now_ms();
        let kwargs = json!({"agui": {"run_id": run_id, "parent_run_id": input.parent_run_id}});
        let run = RunRecord::new(run_id, thread_id, &served.graph_id, kwargs, now_ms());
        shared.records.put(Record::Thread(record)).await?;
        shared.records.put(Record::Run(run.clone())).await?;
        Ok::<_, ApiError>((start, agui, run))
    };
    let (start, agui, run) = match prepared.await {
        Ok(prepared) => prepared,
        Err(error) => {
            shared.runs.abandon(&live);
            return Err(error);
        }
    };
    for event in agui.started() {
        live.push(FRAME, agui_json(&event));
    }
    Job {
        records: Arc::clone(&shared.records),
        runs: Arc::clone(&shared.runs),
        assistant: Arc::clone(&served.assistant),
        live: Arc::clone(&live),
        run,
        start,
        options: RunOptions::new(),
        modes: Vec::new(),
        stateless: false,
        agui: Some(Arc::new(Mutex::new(agui))),
        worker: None,
        api_url: shared.api_url(),
    }
    .spawn();
    let events = live
        .frames(0)
        .filter(|(_, frame)| std::future::ready(frame.event == FRAME))
        .map(|(_, frame)| Ok::<_, Infallible>(SseEvent::default().data(frame.data.to_string())));
    // Comments (`:`) while nothing happens keep proxies from closing a quiet stream; AG-UI
    // clients read `data:` lines only.
    Ok(Sse::new(events)
        .keep_alive(KeepAlive::default())
        .into_response())
}

/// An AG-UI event's JSON, stamped with the time it was sent (`timestamp`, milliseconds since
/// the epoch) unless it has one. (An event serializes: its fields are JSON already.)
pub(crate) fn agui_json(event: &Event) -> Value {
    let mut json = serde_json::to_value(event).unwrap_or(Value::Null);
    if let Value::Object(map) = &mut json {
        map.entry("timestamp")
            .or_insert_with(|| Value::from(now_ms()));
    }
    json
}

/// The run's start (its input: the client's new messages, and its tools; or its answers) and
/// its translation, from the thread's state.
async fn prepare(served: &Served, input: &RunAgentInput) -> Result<(Start, AguiRun), ApiError> {
    let assistant = &served.assistant;
    let (thread, run) = (&input.thread_id, &input.run_id);
    assistant.ensure_thread(thread).await?;
    let snapshot = assistant.snapshot(thread, None).await?;
    let field = assistant.messages_field();
    let start = match input.resume.as_deref() {
        Some(resume) if !resume.is_empty() => {
            let mut answers = Map::new();
            for entry in resume {
                let id = &entry.interrupt_id;
                if !snapshot.interrupts.iter().any(|i| &i.id == id) {
                    let open: Vec<&str> =
                        snapshot.interrupts.iter().map(|i| i.id.as_str()).collect();
                    return Err(ApiError::unprocessable(format!(
                        "AG-UI run `{run}` on thread `{thread}` answers interrupt `{id}`, which the thread does not wait for (it waits for: {})",
                        if open.is_empty() { "nothing".to_owned() } else { open.join(", ") }
                    )));
                }
                // A cancelled interrupt is answered with `null`.
                let answer = match entry.status {
                    ResumeStatus::Resolved => entry.payload.clone().unwrap_or(Value::Null),
                    ResumeStatus::Cancelled => Value::Null,
                };
                answers.insert(id.clone(), answer);
            }
            Start::Resume(Value::Object(answers))
        }
        _ => {
            let mut update = Map::new();
            let known: HashSet<String> = messages_of(field.as_deref(), &snapshot.values)
                .iter()
                .map(|m| m.message_id.to_string())
                .collect();
            let new: Vec<_> = input
                .messages
                .iter()
                .filter(|m| !known.contains(m.id()))
                .collect();
            if let Some(field) = field.as_ref().filter(|_| !new.is_empty()) {
                let messages = messages_from_agui(new);
                update.insert(
                    field.clone(),
                    serde_json::to_value(messages).unwrap_or_default(),
                );
            }
            let has_tools = assistant.state_schema()["properties"]
                .get(TOOLS_FIELD)
                .is_some();
            if has_tools {
                let tools = serde_json::to_value(&input.tools).unwrap_or_default();
                update.insert(TOOLS_FIELD.to_owned(), tools);
            }
            Start::Input(Some(Value::Object(update)))
        }
    };
    let agui = AguiRun {
        thread_id: thread.clone(),
        run_id: run.clone(),
        parent_run_id: input.parent_run_id.clone(),
        messages_field: field,
        json: assistant.wire_values(snapshot.values),
        wire: {
            let assistant = Arc::clone(assistant);
            Arc::new(move |values| assistant.wire_values(values))
        },
        seen: input.messages.iter().map(|m| m.id().to_owned()).collect(),
        streams: OpenStreams::default(),
        ended: false,
    };
    Ok((start, agui))
}

/// Locks a run's translation (a poisoned lock is still the translation).
pub(crate) fn lock(agui: &SharedAguiRun) -> std::sync::MutexGuard<'_, AguiRun> {
    agui.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentstate::agui::ChatState;

    fn run() -> AguiRun {
        AguiRun {
            thread_id: "t".into(),
            run_id: "r".into(),
            parent_run_id: Some("r-0".into()),
            messages_field: Some("messages".into()),
            wire: Arc::new(|values| values),
            json: json!({"messages": []}),
            seen: HashSet::new(),
            streams: OpenStreams::default(),
            ended: false,
        }
    }

    fn delta(node: &str, id: &str, text: &str) -> RunEvent {
        RunEvent::MessageDelta {
            node: node.into(),
            step: 1,
            message_id: id.into(),
            delta: text.into(),
        }
    }

    fn assistant(id: &str, text: &str) -> Value {
        let message = Message::text_message(text, agentstate::message::Role::Assistant);
        serde_json::to_value(message.with_id(id)).unwrap()
    }

    /// Two nodes of a step stream at once: a node's end ends its own message only, and what
    /// the client folds is the step's state.
    #[test]
    fn parallel_nodes_stream_balanced_messages() {
        let mut agui = run();
        let mut events = agui.started();
        let values = json!({"messages": [assistant("a", "Hi"), assistant("b", "Yo!")]});
        for event in [
            delta("left", "a", "H"),
            delta("right", "b", "Yo"),
            delta("left", "a", "i"),
            RunEvent::Update {
                node: "left".into(),
                update: Value::Null,
            },
            delta("right", "b", "!"),
            RunEvent::Values(values.clone()),
            RunEvent::Finished {
                values: values.clone(),
            },
        ] {
            events.extend(agui.event(&event));
        }
        let mut chat = ChatState::new();
        for event in &events {
            assert!(chat.apply(event).is_applied(), "{event:?}");
        }
        // `b` streams on after `a`'s node ended; the fold (the official client's rules) takes
        // every event, and the state is the thread's.
        let Event::RunStarted(started) = &events[0] else {
            panic!("{events:?}")
        };
        assert_eq!(started.parent_run_id.as_deref(), Some("r-0"));
        assert_eq!(chat.errors().len(), 0, "{:?}", chat.errors());
        assert_eq!(chat.agent_state(), &values);
        let texts: Vec<String> = chat.messages().iter().map(|m| m.text().into()).collect();
        assert_eq!(texts, ["Hi", "Yo!"]);
    }

    /// After the last event, nothing more: a failure that follows is not a second end.
    #[test]
    fn one_end_only() {
        let mut agui = run();
        let end = agui.event(&RunEvent::Finished {
            values: json!({"messages": []}),
        });
        assert_eq!(end.last().map(Event::event_type), Some("RUN_FINISHED"));
        let error = AssistantError::new("run_cancelled", "run `r` on thread `t` was cancelled");
        assert!(agui.failed(&error).is_empty());
        assert!(agui.event(&delta("n", "m", "late")).is_empty());
    }
}
