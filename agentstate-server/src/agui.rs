//! The AG-UI endpoint: `POST /agui/{assistant}` takes a `RunAgentInput` and streams the run as
//! AG-UI events (see the crate docs, "The AG-UI endpoint").

use crate::assistant::{AssistantError, RunEvent, Start};
use crate::auth::{Action, Caller, Resource};
use crate::error::ApiError;
use crate::record::{now_ms, Record, RunRecord};
use crate::runs::{Frame, Job, Live, Translate};
use crate::service::{new_thread, user_configurable, Served, Service, NO_RUN_THREAD};
use agentstate::agui::{
    message_events, messages_from_agui, messages_to_agui, AguiMessage, Event,
    MessagesSnapshotEvent, OpenStreams, ResumeStatus, RunAgentInput, RunFinishedEvent, RunOutcome,
    RunStartedEvent, StepFinishedEvent, StepStartedEvent, TextRole,
};
use agentstate::message::Message;
use agentstate_graph::Interrupt;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt;
use serde_json::{json, Map, Value};
use std::collections::HashSet;
use std::convert::Infallible;
use std::sync::{Arc, Mutex, PoisonError};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

/// The name of the frames of a run's AG-UI events (beside the LangGraph ones of other runs).
const FRAME: &str = "agui";

/// The state field the client's tools go to, if the state has it.
const TOOLS_FIELD: &str = "tools";

/// The state field the client's tools and context go to (`{"tools", "context"}`), if the state
/// has it (ag-ui-langgraph's).
const AGUI_FIELD: &str = "ag-ui";

/// The state field whose `actions` the client's tools go to, if the state has it (CopilotKit's
/// `CopilotKitState`, as ag-ui-langgraph fills it).
const COPILOTKIT_FIELD: &str = "copilotkit";

/// The AG-UI route, with its entry in the spec.
pub(crate) fn routes() -> OpenApiRouter<Arc<Service>> {
    OpenApiRouter::new().routes(routes!(run))
}

/// One run's AG-UI events from its [`RunEvent`]s, framed as ag-ui-langgraph frames a LangGraph
/// run: each node a step (`STEP_STARTED` / `STEP_FINISHED`), the state after each step as
/// `STATE_SNAPSHOT`, and the thread's state and whole conversation (`STATE_SNAPSHOT`,
/// `MESSAGES_SNAPSHOT`) before the run's last event.
struct AguiRun {
    thread_id: String,
    run_id: String,
    parent_run_id: Option<String>,
    messages_field: Option<String>,
    /// How the server shows a state ([`Assistant::wire_values`](crate::Assistant::wire_values)).
    wire: Wire,
    /// Ids of the messages the client or the thread had when the run started, and of those
    /// the run sent since.
    seen: HashSet<String>,
    /// The text messages and tool calls streamed, and those open (by node).
    streams: OpenStreams,
    /// The node whose step is open.
    step: Option<String>,
    ended: bool,
}

/// How the server shows a state's JSON.
type Wire = Arc<dyn Fn(Value) -> Value + Send + Sync>;

/// A run's AG-UI translation, as its task uses it (its task and its watcher share it).
struct Translation(Mutex<AguiRun>);

impl Translate for Translation {
    fn event(&self, event: &RunEvent) -> Vec<Frame> {
        let events = self
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .event(event);
        events.iter().map(frame).collect()
    }

    fn failed(&self, error: &AssistantError) -> Vec<Frame> {
        let events = self
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .failed(error);
        events.iter().map(frame).collect()
    }
}

/// AG-UI event `event` as a frame of its run.
fn frame(event: &Event) -> Frame {
    Frame {
        event: FRAME.to_owned(),
        data: agui_json(event),
    }
}

/// The name of the `CUSTOM` event that gives an interrupt's payload before the run ends
/// (ag-ui-langgraph's, which CopilotKit's `useInterrupt` reads).
const ON_INTERRUPT: &str = "on_interrupt";

impl AguiRun {
    /// `RUN_STARTED`, with the run the client started this one from.
    fn started(&self) -> Vec<Event> {
        vec![Event::RunStarted(RunStartedEvent {
            thread_id: self.thread_id.clone(),
            run_id: self.run_id.clone(),
            parent_run_id: self.parent_run_id.clone(),
            ..Default::default()
        })]
    }

    /// The AG-UI events of `event`; nothing once the run's last event went.
    fn event(&mut self, event: &RunEvent) -> Vec<Event> {
        let mut out = Vec::new();
        if self.ended {
            return out;
        }
        match event {
            RunEvent::TaskStarted { node, .. } => self.step_to(node, &mut out),
            RunEvent::MessageDelta {
                node,
                message_id,
                delta,
                ..
            } => {
                self.step_to(node, &mut out);
                self.streams.text(node, message_id, delta, &mut out);
            }
            RunEvent::ToolCallDelta {
                node,
                message_id,
                tool_call_id,
                name,
                delta,
            } => {
                self.step_to(node, &mut out);
                self.streams
                    .tool_call(node, message_id, tool_call_id, name, delta, &mut out);
            }
            RunEvent::Update { node, .. } => self.streams.close(Some(node), &mut out),
            RunEvent::Custom { name, value, .. } => out.push(Event::custom(name, value.clone())),
            RunEvent::Values(values) => {
                self.streams.close(None, &mut out);
                self.new_messages(values, &mut out);
                out.push(Event::state_snapshot((self.wire)(values.clone())));
            }
            RunEvent::Finished { values } => {
                self.streams.close(None, &mut out);
                self.new_messages(values, &mut out);
                self.step_end(&mut out);
                self.snapshots(values, &mut out);
                out.push(self.finished(None));
            }
            RunEvent::Suspended { values, interrupts } => {
                self.streams.close(None, &mut out);
                self.new_messages(values, &mut out);
                self.snapshots(values, &mut out);
                self.step_end(&mut out);
                out.extend(asking(interrupts));
                out.push(self.finished(Some(interrupt_outcome(interrupts))));
            }
            RunEvent::Failed(error) => out = self.failed(error),
            // Checkpoints have no AG-UI events of their own.
            // The state the run starts from: `RUN_STARTED` said it (ag-ui-langgraph sends nothing
            // for it).
            RunEvent::Committed { .. } | RunEvent::Start { .. } => {}
        }
        // A streamed message says whose it is, as ag-ui-langgraph's do.
        for event in &mut out {
            if let Event::TextMessageStart(start) = event {
                start.role.get_or_insert(TextRole::Assistant);
            }
        }
        out
    }

    /// `RUN_ERROR` for `error`, unless the run's last event went; the text messages and tool
    /// calls still streaming are ended first (what they hold is all there will be).
    fn failed(&mut self, error: &AssistantError) -> Vec<Event> {
        if std::mem::replace(&mut self.ended, true) {
            return Vec::new();
        }
        let mut out = Vec::new();
        self.streams.close(None, &mut out);
        out.push(Event::run_error(
            &error.message,
            Some(error.category.clone()),
        ));
        out
    }

    /// `RUN_FINISHED`, with `outcome` (none: a plain success, as ag-ui-langgraph sends it; the
    /// client derives the tool calls left pending).
    fn finished(&mut self, outcome: Option<RunOutcome>) -> Event {
        self.ended = true;
        Event::RunFinished(RunFinishedEvent {
            thread_id: self.thread_id.clone(),
            run_id: self.run_id.clone(),
            outcome,
            ..Default::default()
        })
    }

    /// Makes `node`'s step the open one: the open step (another node's) finishes, `node`'s
    /// starts.
    fn step_to(&mut self, node: &str, out: &mut Vec<Event>) {
        if self.step.as_deref() == Some(node) {
            return;
        }
        self.step_end(out);
        out.push(Event::StepStarted(StepStartedEvent {
            step_name: node.to_owned(),
            ..Default::default()
        }));
        self.step = Some(node.to_owned());
    }

    /// Finishes the open step, if there is one.
    fn step_end(&mut self, out: &mut Vec<Event>) {
        if let Some(step_name) = self.step.take() {
            out.push(Event::StepFinished(StepFinishedEvent {
                step_name,
                ..Default::default()
            }));
        }
    }

    /// The events of the tool calls and tool results of the messages of `values` that the
    /// run added and did not stream (`TOOL_CALL_START` / `ARGS` / `END`, `TOOL_CALL_RESULT`:
    /// what a client runs a frontend tool on); their text, and the other messages, come with
    /// the run's `MESSAGES_SNAPSHOT` (as ag-ui-langgraph sends a message a node writes).
    fn new_messages(&mut self, values: &Value, out: &mut Vec<Event>) {
        for message in messages_of(self.messages_field.as_deref(), values) {
            if !self.seen.insert(message.message_id.to_string()) {
                continue;
            }
            for mut agui in agentstate::agui::to_agui(&message) {
                if let AguiMessage::Assistant(assistant) = &mut agui {
                    assistant.content = None;
                }
                message_events(agui, self.streams.streamed(), out);
            }
        }
    }

    /// The thread's state and its whole conversation, as the run leaves them.
    fn snapshots(&self, values: &Value, out: &mut Vec<Event>) {
        out.push(Event::state_snapshot((self.wire)(values.clone())));
        out.push(messages_snapshot(self.messages_field.as_deref(), values));
    }
}

/// `MESSAGES_SNAPSHOT` of the messages in `values`' field `field` (an assistant's message
/// without text has the empty text, as a LangChain message's).
fn messages_snapshot(field: Option<&str>, values: &Value) -> Event {
    let mut messages = messages_to_agui(&messages_of(field, values));
    for message in &mut messages {
        if let AguiMessage::Assistant(assistant) = message {
            assistant.content.get_or_insert_with(String::new);
        }
    }
    Event::MessagesSnapshot(MessagesSnapshotEvent {
        messages,
        ..Default::default()
    })
}

/// `CUSTOM` `on_interrupt` with each question's payload, as ag-ui-langgraph sends them before
/// an interrupted run's end.
fn asking(interrupts: &[Interrupt]) -> Vec<Event> {
    interrupts
        .iter()
        .filter(|i| !i.is_breakpoint())
        .map(|i| Event::custom(ON_INTERRUPT, i.payload.clone()))
        .collect()
}

/// AG-UI's interrupt outcome for `interrupts`.
fn interrupt_outcome(interrupts: &[Interrupt]) -> RunOutcome {
    RunOutcome::Interrupt {
        interrupts: interrupts
            .iter()
            .map(agentstate_graph::agui::interrupt)
            .collect(),
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
#[utoipa::path(
    post,
    path = "/agui/{assistant}",
    tag = "AG-UI",
    summary = "Run an AG-UI Agent",
    description = "A durable run of the assistant on thread `threadId` (created if missing), with the client's `runId` (an interrupted run's, to resume it), streamed as AG-UI events (`data: <event JSON>` frames).",
    params(("assistant" = String, Path, description = "The assistant's graph id or assistant id.")),
    request_body = crate::openapi::RunAgentInput,
    responses(
        (status = 200, description = "Success: the run's AG-UI events, as server-sent events", content_type = "text/event-stream", body = crate::openapi::EventStream),
        (status = 404, description = "Not Found", body = crate::error::ErrorResponse),
        (status = 409, description = "Conflict", body = crate::error::ErrorResponse),
        (status = 422, description = "Validation Error", body = crate::error::ErrorResponse),
    )
)]
async fn run(
    State(service): State<Arc<Service>>,
    caller: Caller,
    Path(assistant): Path<String>,
    bytes: Bytes,
) -> Result<Response, ApiError> {
    let input: RunAgentInput = serde_json::from_slice(&bytes).map_err(|e| {
        ApiError::unprocessable(format!(
            "the body of an AG-UI run of assistant `{assistant}` is not a RunAgentInput: {e}"
        ))
    })?;
    let served = service
        .assistant_for(&caller, &assistant, Action::Read)?
        .ok_or_else(|| ApiError::not_found(format!("assistant `{assistant}` does not exist")))?;
    let (thread_id, run_id) = (input.thread_id.as_str(), input.run_id.as_str());
    for (what, id) in [("thread id", thread_id), ("run id", run_id)] {
        agentstate_store::check_id(id).map_err(|e| {
            ApiError::unprocessable(format!(
                "the {what} `{id}` of an AG-UI run of assistant `{assistant}` is not valid: {e}"
            ))
        })?;
    }
    // A run of the thread, as a run the API creates: on another user's thread, refused as on a
    // missing one; the run's metadata, and a new thread's, as the rules stamp it.
    let mut metadata = Map::new();
    let filter = caller.decide(
        Resource::Threads,
        Action::CreateRun,
        Some(thread_id),
        &mut metadata,
    )?;
    let found = service.records.thread(thread_id).await?;
    if let (Some(filter), Some(thread)) = (&filter, &found) {
        if !filter.matches(&thread.metadata) {
            return Err(ApiError::not_found(NO_RUN_THREAD));
        }
    }
    let existing = match service.runs.get(run_id) {
        Some(live) => Some(live.thread_id.clone()),
        None => service.records.run(run_id).await?.map(|run| run.thread_id),
    };
    if let Some(thread) = existing.as_deref().filter(|t| *t != thread_id) {
        return Err(ApiError::conflict(format!(
            "run `{run_id}` exists already (on thread `{thread}`); an AG-UI run needs a new `runId`"
        )));
    }
    let mut record = found.unwrap_or_else(|| new_thread(thread_id, &metadata));
    if let Some(graph) = record.graph_id.as_deref().filter(|g| *g != served.graph_id) {
        return Err(ApiError::unprocessable(format!(
            "thread `{thread_id}` holds the state of graph `{graph}`, so assistant `{assistant}` (graph `{}`) cannot run on it",
            served.graph_id
        )));
    }
    // A run id used before on this thread (CopilotKit's `useInterrupt` resumes with the
    // interrupted run's own): this run's events follow that run's in its event log.
    let live = match existing {
        Some(_) => {
            let base = service.records.events(run_id, 0, usize::MAX).await?.len();
            Live::attempt(run_id, thread_id, 1, base)
        }
        None => Live::new(run_id, thread_id),
    };
    // One run per thread: a busy thread refuses the run before its stream starts.
    service.runs.register(&live, |running| match running.first() {
        Some(other) => Err(ApiError::conflict(format!(
            "thread `{thread_id}` is busy with run `{}`; AG-UI run `{run_id}` was refused (retry when it ends)",
            other.run_id
        ))),
        None => Ok(()),
    })?;
    let prepared = async {
        let prepared = prepare(served, &input, existing.is_some()).await?;
        let Prepared::Run(start, agui) = prepared else {
            return Ok(Err(prepared));
        };
        record.graph_id = Some(served.graph_id.clone());
        record.updated_ms = now_ms();
        let mut kwargs = json!({"agui": {"run_id": run_id, "parent_run_id": input.parent_run_id}});
        if let Some(user) = caller.user() {
            user_configurable(&mut kwargs, user);
        }
        let mut run = RunRecord::new(run_id, thread_id, &served.graph_id, kwargs, now_ms());
        run.metadata = Value::Object(metadata);
        service.records.put(Record::Thread(record)).await?;
        service.records.put(Record::Run(run.clone())).await?;
        Ok::<_, ApiError>(Ok((start, *agui, run)))
    };
    let (start, agui, run) = match prepared.await {
        Ok(Ok(prepared)) => prepared,
        Ok(Err(Prepared::Asking(events))) => {
            // Nothing runs: the thread's questions, again.
            service.runs.abandon(&live);
            let frames = events.into_iter().map(|event| {
                Ok::<_, Infallible>(SseEvent::default().data(agui_json(&event).to_string()))
            });
            return Ok(Sse::new(futures_util::stream::iter(frames)).into_response());
        }
        Ok(Err(Prepared::Run(..))) => unreachable!("a run to start is prepared as one"),
        Err(error) => {
            service.runs.abandon(&live);
            return Err(error);
        }
    };
    for event in agui.started() {
        live.push(FRAME, agui_json(&event));
    }
    Job {
        translate: Some(Arc::new(Translation(Mutex::new(agui)))),
        ..service.job(served, &live, run, start)
    }
    .spawn();
    let events = live
        .frames(Arc::clone(&service.records), 0)
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
fn agui_json(event: &Event) -> Value {
    let mut json = serde_json::to_value(event).unwrap_or(Value::Null);
    if let Value::Object(map) = &mut json {
        map.entry("timestamp")
            .or_insert_with(|| Value::from(now_ms()));
    }
    json
}

/// What a run's input asks for.
enum Prepared {
    /// A run: its start, and its translation.
    Run(Start, Box<AguiRun>),
    /// No run: the thread waits for answers the input does not give, so the answer is its
    /// questions again (ag-ui-langgraph's): `RUN_STARTED`, `CUSTOM` `on_interrupt`s and
    /// `RUN_FINISHED` with the interrupt outcome.
    Asking(Vec<Event>),
}

/// The run's start (its input: the client's new messages, its state and its tools; or its
/// answers) and its translation, from the thread's state; or, on a thread waiting for answers
/// that the input does not give, the questions again. `reused`: the run id names an earlier
/// run of the thread, which only a run answering the thread's questions may take.
async fn prepare(
    served: &Served,
    input: &RunAgentInput,
    reused: bool,
) -> Result<Prepared, ApiError> {
    let assistant = &served.assistant;
    let (thread, run) = (&input.thread_id, &input.run_id);
    assistant.ensure_thread(thread).await?;
    let mut snapshot = assistant.snapshot(thread, None).await?;
    let field = assistant.messages_field();
    let mut answers = Map::new();
    for entry in input.resume.as_deref().unwrap_or_default() {
        let id = &entry.interrupt_id;
        if !snapshot.interrupts.iter().any(|i| &i.id == id) {
            let open: Vec<&str> = snapshot.interrupts.iter().map(|i| i.id.as_str()).collect();
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
    if answers.is_empty() {
        // ag-ui-langgraph's older way (CopilotKit's `useInterrupt` after `on_interrupt`):
        // `forwardedProps.command.resume` answers every question the thread waits for.
        if let Some(resume) = legacy_resume(input) {
            for asked in &snapshot.interrupts {
                answers.insert(asked.id.clone(), resume.clone());
            }
        }
    }
    let start = if !answers.is_empty() {
        Start::Resume(Value::Object(answers))
    } else {
        // A user message the thread has, edited (its id, other text): the conversation from it
        // on is done again (ag-ui-langgraph's time travel, before anything else): the thread
        // goes back to where it was before that message came, and the run's input is the
        // edited message.
        let edited = match edited_message(field.as_deref(), &snapshot.values, input) {
            Some(message) => version_before(assistant, thread, field.as_deref(), message.id())
                .await?
                .map(|version| (version, message)),
            None => None,
        };
        if edited.is_none() && snapshot.interrupts.iter().any(|i| !i.is_breakpoint()) {
            let run = AguiRun::new(served, input, field, HashSet::new());
            let mut events = run.started();
            events.extend(asking(&snapshot.interrupts));
            events.push(Event::RunFinished(RunFinishedEvent {
                thread_id: thread.clone(),
                run_id: run.run_id.clone(),
                outcome: Some(interrupt_outcome(&snapshot.interrupts)),
                ..Default::default()
            }));
            return Ok(Prepared::Asking(events));
        }
        if reused {
            return Err(ApiError::conflict(format!(
                "run `{run}` exists already on thread `{thread}`; only a run answering the thread's interrupts may take an earlier run's `runId`"
            )));
        }
        let mut redo = None;
        if let Some((version, message)) = edited {
            assistant.rewind(thread, version).await?;
            snapshot = assistant.snapshot(thread, None).await?;
            redo = Some(RunAgentInput {
                messages: vec![message.clone()],
                state: None,
                ..input.clone()
            });
        }
        let shown = assistant.wire_values(snapshot.values.clone());
        let schema = assistant.state_schema();
        let taken = redo.as_ref().unwrap_or(input);
        let update = run_input(&schema, field.as_deref(), &snapshot.values, &shown, taken);
        Start::Input(Some(Value::Object(update)))
    };
    // The run's new messages are those neither the client nor the thread has.
    let seen = input
        .messages
        .iter()
        .map(|m| m.id().to_owned())
        .chain(
            messages_of(field.as_deref(), &snapshot.values)
                .iter()
                .map(|m| m.message_id.to_string()),
        )
        .collect();
    Ok(Prepared::Run(
        start,
        Box::new(AguiRun::new(served, input, field, seen)),
    ))
}

impl AguiRun {
    fn new(
        served: &Served,
        input: &RunAgentInput,
        messages_field: Option<String>,
        seen: HashSet<String>,
    ) -> Self {
        let assistant = Arc::clone(&served.assistant);
        AguiRun {
            thread_id: input.thread_id.clone(),
            run_id: input.run_id.clone(),
            parent_run_id: input.parent_run_id.clone(),
            messages_field,
            wire: Arc::new(move |values| assistant.wire_values(values)),
            seen,
            streams: OpenStreams::default(),
            step: None,
            ended: false,
        }
    }
}

/// The first of the client's user messages that the thread has (by id) with another text.
fn edited_message<'a>(
    field: Option<&str>,
    values: &Value,
    input: &'a RunAgentInput,
) -> Option<&'a AguiMessage> {
    let thread = messages_of(field, values);
    input.messages.iter().find(|m| {
        let AguiMessage::User(_) = m else {
            return false;
        };
        let Some(now) = messages_from_agui([*m]).pop() else {
            return false;
        };
        thread.iter().any(|had| {
            had.message_id.to_string() == m.id() && had.role == now.role && had.text() != now.text()
        })
    })
}

/// The thread's version just before message `id` came into its messages field `field` (none if
/// no checkpoint of the thread has it).
async fn version_before(
    assistant: &Arc<dyn crate::Assistant>,
    thread: &str,
    field: Option<&str>,
    id: &str,
) -> Result<Option<u64>, ApiError> {
    let checkpoints = assistant.checkpoints(thread, usize::MAX).await?;
    // Newest first: the oldest that has the message is where it came.
    let came = checkpoints.iter().rev().find(|c| {
        messages_of(field, &c.values)
            .iter()
            .any(|m| m.message_id.to_string() == id)
    });
    Ok(came.map(|c| c.checkpoint.version.saturating_sub(1)))
}

/// `forwardedProps.command.resume`, if the input has one (not `null`; a string holding JSON
/// is read as that JSON, as ag-ui-langgraph reads it).
fn legacy_resume(input: &RunAgentInput) -> Option<Value> {
    let resume = input
        .forwarded_props
        .as_ref()?
        .get("command")?
        .get("resume")?;
    match resume {
        Value::Null => None,
        Value::String(text) => Some(serde_json::from_str(text).unwrap_or_else(|_| resume.clone())),
        other => Some(other.clone()),
    }
}

/// A new run's input (ag-ui-langgraph's): the client's `state`, each of its keys the state has
/// as a field (`schema`'s properties) and whose value is not the thread's already (`shown`: the
/// thread's state `values` as the server shows it), the messages field aside; the client's
/// messages the thread does not have (by id) in the messages field `field`; and the client's
/// tools, then those of its `state.tools` of other names, in the field `tools`, in `ag-ui` (with
/// the client's context: `{"tools", "context"}`) and in `copilotkit.actions` (the client's
/// `state.copilotkit` otherwise kept), those of the three the state has.
fn run_input(
    schema: &Value,
    field: Option<&str>,
    values: &Value,
    shown: &Value,
    input: &RunAgentInput,
) -> Map<String, Value> {
    let properties = schema.get("properties");
    let has = |key: &str| properties.and_then(|p| p.get(key)).is_some();
    let mut update = Map::new();
    if let Some(Value::Object(state)) = &input.state {
        for (key, value) in state {
            let ours = [TOOLS_FIELD, AGUI_FIELD, COPILOTKIT_FIELD].contains(&key.as_str());
            let applied = has(key) && Some(key.as_str()) != field && !ours;
            if applied && shown.get(key) != Some(value) {
                update.insert(key.clone(), value.clone());
            }
        }
    }
    if let Some(field) = field {
        let known: HashSet<String> = messages_of(Some(field), values)
            .iter()
            .map(|m| m.message_id.to_string())
            .collect();
        let new: Vec<_> = input
            .messages
            .iter()
            .filter(|m| !known.contains(m.id()))
            .collect();
        if !new.is_empty() {
            let messages = messages_from_agui(new);
            update.insert(
                field.to_owned(),
                serde_json::to_value(messages).unwrap_or_default(),
            );
        }
    }
    let mut tools: Vec<Value> = input
        .tools
        .iter()
        .filter_map(|t| serde_json::to_value(t).ok())
        .collect();
    let offered = input.state.as_ref().and_then(|s| s.get(TOOLS_FIELD));
    for tool in offered.and_then(Value::as_array).into_iter().flatten() {
        if !tools.iter().any(|t| t.get("name") == tool.get("name")) {
            tools.push(tool.clone());
        }
    }
    if has(AGUI_FIELD) {
        let context = serde_json::to_value(&input.context).unwrap_or_default();
        update.insert(
            AGUI_FIELD.to_owned(),
            json!({"tools": tools, "context": context}),
        );
    }
    if has(COPILOTKIT_FIELD) {
        let mut copilotkit = match input.state.as_ref().and_then(|s| s.get(COPILOTKIT_FIELD)) {
            Some(Value::Object(given)) => given.clone(),
            _ => Map::new(),
        };
        copilotkit.insert("actions".to_owned(), Value::Array(tools.clone()));
        update.insert(COPILOTKIT_FIELD.to_owned(), Value::Object(copilotkit));
    }
    if has(TOOLS_FIELD) {
        update.insert(TOOLS_FIELD.to_owned(), Value::Array(tools));
    }
    update
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
            seen: HashSet::new(),
            streams: OpenStreams::default(),
            step: None,
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

    /// The client's state goes in as ag-ui-langgraph's does: the state's fields only, those
    /// whose value is new, never the messages field; its tools after the input's.
    #[test]
    fn a_runs_input_takes_the_clients_new_state_messages_and_tools() {
        let schema = json!({"properties": {"messages": {}, "note": {}, "count": {}, "tools": {},
            "ag-ui": {}, "copilotkit": {}}});
        let values = json!({"messages": [assistant("a1", "Hi")], "note": "old", "count": 1});
        let shown = values.clone();
        let input: RunAgentInput = serde_json::from_value(json!({
            "threadId": "t", "runId": "r",
            "state": {"note": "new", "count": 1, "unknown": true, "messages": [],
                "copilotkit": {"kept": 1, "actions": []},
                "tools": [{"name": "a", "description": "from state"},
                    {"name": "b", "description": "from state"}]},
            "messages": [{"id": "a1", "role": "assistant", "content": "Hi"},
                {"id": "u1", "role": "user", "content": "hello"}],
            "tools": [{"name": "a", "description": "from input", "parameters": {}}],
            "context": [{"description": "locale", "value": "en-GB"}],
        }))
        .unwrap();
        let update = run_input(&schema, Some("messages"), &values, &shown, &input);
        let keys: Vec<&str> = update.keys().map(String::as_str).collect();
        assert_eq!(keys, ["ag-ui", "copilotkit", "messages", "note", "tools"]);
        assert_eq!(update["ag-ui"]["context"][0]["value"], "en-GB");
        assert_eq!(update["ag-ui"]["tools"], update["tools"]);
        assert_eq!(update["copilotkit"]["actions"], update["tools"]);
        assert_eq!(update["copilotkit"]["kept"], 1);
        assert_eq!(update["note"], "new");
        let messages: Vec<Message> = serde_json::from_value(update["messages"].clone()).unwrap();
        assert_eq!(messages.len(), 1);
        assert_eq!(messages[0].text(), "hello");
        let tools: Vec<&str> = update["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["description"].as_str().unwrap())
            .collect();
        assert_eq!(tools, ["from input", "from state"]);
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
