//! The fold: `(ChatState, &Event) -> ChatState`, a pure function of the state and the event.
//!
//! [`fold`] takes the state by value and returns the next one; [`ChatState::apply`] is the same
//! step in place. Neither does I/O or reads anything but its arguments, so the same events
//! always give the same state, and a run can be replayed and stepped through ([`Timeline`]).
//!
//! What each event does follows the official AG-UI client (`@ag-ui/client` 1.0), with three
//! differences the seed asks for: a `STATE_DELTA` that cannot apply surfaces a
//! [`StateConflict`] instead of a console warning; a `RUN_ERROR` puts a
//! typed error on the state; and an event that breaks the ordering rules is ignored with a
//! [`ProtocolError`] on the state, where the official client aborts the
//! whole stream. The ordering rules are the official client's: the first event is
//! `RUN_STARTED`; after `RUN_ERROR` only `RUN_STARTED`; after `RUN_FINISHED` only
//! `RUN_STARTED` (or `RUN_ERROR`); no `RUN_STARTED` while a run is active; `*_CONTENT`, `*_ARGS`
//! and `*_END` need an open `*_START` with the same id, and a `*_START` may not reopen an open
//! id; `STEP_FINISHED` needs its `STEP_STARTED`; `RUN_FINISHED` may not arrive while a step,
//! message, reasoning span or tool call is open.
//!
//! Chunk events (`TEXT_MESSAGE_CHUNK`, `TOOL_CALL_CHUNK`, `REASONING_MESSAGE_CHUNK`) expand as
//! the protocol defines: one chunk stream is open at a time; a chunk of another kind or id closes
//! it (with its END) and opens a new one (with a START); continuation chunks may omit the id,
//! the first may not; every other event except `RAW`, `ACTIVITY_*`, `REASONING_ENCRYPTED_VALUE`
//! and `SUBAGENT_*` closes the open chunk stream before it applies.
//!
//! Streaming costs O(delta): `TEXT_MESSAGE_CONTENT` and `TOOL_CALL_ARGS` find their message
//! through a hash index and append to its `String`.

use super::chat::{
    ChatError, ChatMessage, ChatState, OpenChunk, Phase, ProtocolError, RunError, RunInfo,
    RunStatus, StateConflict, StreamStatus,
};
use super::event::*;
use super::message::{
    ActivityMessage, AguiMessage, AssistantMessage, ReasoningMessage, ToolMessage,
};
use json_patch::PatchOperation;
use serde::Deserialize;
use serde_json::{Map, Value};
use std::collections::{HashMap, HashSet};

/// One step of the fold: the state after `event`.
///
/// ```
/// use agentstate::agui::{fold, ChatState, Event};
/// use serde_json::json;
///
/// let events = [
///     Event::run_started("t", "r"),
///     Event::state_snapshot(json!({"count": 1})),
///     Event::state_delta(vec![json!({"op": "replace", "path": "/count", "value": 2})]),
/// ];
/// let chat = events.iter().fold(ChatState::new(), fold);
/// assert_eq!(chat.agent_state(), &json!({"count": 2}));
/// ```
pub fn fold(state: ChatState, event: &Event) -> ChatState {
    let mut state = state;
    state.apply(event);
    state
}

/// Folds every event, from `initial`.
pub fn fold_all<'a>(initial: ChatState, events: impl IntoIterator<Item = &'a Event>) -> ChatState {
    events.into_iter().fold(initial, fold)
}

/// A run's events with the state after each of them, for time travel: step back and forth,
/// inspect any past state, replay.
///
/// ```
/// use agentstate::agui::{ChatState, Event, Timeline};
///
/// let mut timeline = Timeline::new(ChatState::new());
/// timeline.push(Event::run_started("t", "r"));
/// timeline.push(Event::text_start("m"));
/// timeline.push(Event::text_content("m", "Hi"));
/// timeline.push(Event::text_end("m"));
/// assert_eq!(timeline.len(), 4);
/// assert!(timeline.state_at(0).messages().is_empty()); // before any event
/// assert!(timeline.state_at(3).messages()[0].is_streaming()); // after the CONTENT
/// assert!(!timeline.latest().messages()[0].is_streaming());
/// assert_eq!(timeline.replay(), *timeline.latest());
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Timeline {
    events: Vec<Event>,
    states: Vec<ChatState>,
}

impl Timeline {
    /// A timeline with no events, starting at `initial`.
    pub fn new(initial: ChatState) -> Self {
        Timeline {
            events: Vec::new(),
            states: vec![initial],
        }
    }

    /// Folds every event of `events`, keeping each state.
    pub fn from_events(initial: ChatState, events: impl IntoIterator<Item = Event>) -> Self {
        let mut timeline = Timeline::new(initial);
        for event in events {
            timeline.push(event);
        }
        timeline
    }

    /// Folds `event` onto the latest state and keeps the result (one clone of the state).
    pub fn push(&mut self, event: Event) -> &ChatState {
        let next = fold(self.latest().clone(), &event);
        self.events.push(event);
        self.states.push(next);
        self.latest()
    }

    /// The number of events.
    pub fn len(&self) -> usize {
        self.events.len()
    }

    /// True when no event was pushed.
    pub fn is_empty(&self) -> bool {
        self.events.is_empty()
    }

    /// The state after the first `step` events (`0` is the initial state); the latest state when
    /// `step` is past the end.
    pub fn state_at(&self, step: usize) -> &ChatState {
        &self.states[step.min(self.states.len() - 1)]
    }

    /// The state after every event.
    pub fn latest(&self) -> &ChatState {
        &self.states[self.states.len() - 1]
    }

    /// The events, in order.
    pub fn events(&self) -> &[Event] {
        &self.events
    }

    /// Every state, the initial one first: `states()[k]` is the state after `k` events.
    pub fn states(&self) -> &[ChatState] {
        &self.states
    }

    /// Drops every event after the first `step` (and their states), to branch from there.
    pub fn truncate(&mut self, step: usize) {
        self.events.truncate(step);
        self.states.truncate(step + 1);
    }

    /// Folds the events again from the initial state; equal to [`latest`](Timeline::latest),
    /// since the fold is deterministic.
    pub fn replay(&self) -> ChatState {
        fold_all(self.states[0].clone(), &self.events)
    }
}

/// The first failing operation of a patch, and why.
struct PatchFailure {
    operation: Option<usize>,
    reason: String,
}

/// Applies RFC 6902 `ops` to `doc` all or nothing: on error `doc` is unchanged.
fn apply_patch(doc: &mut Value, ops: &[Value]) -> Result<(), PatchFailure> {
    let ops = ops
        .iter()
        .enumerate()
        .map(|(i, op)| {
            PatchOperation::deserialize(op).map_err(|e| PatchFailure {
                operation: Some(i),
                reason: format!("operation {i} is not a JSON Patch operation: {e}"),
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let failure = |e: json_patch::PatchError| {
        let name = match ops.get(e.operation) {
            Some(PatchOperation::Add(_)) => "add",
            Some(PatchOperation::Remove(_)) => "remove",
            Some(PatchOperation::Replace(_)) => "replace",
            Some(PatchOperation::Move(_)) => "move",
            Some(PatchOperation::Copy(_)) => "copy",
            Some(PatchOperation::Test(_)) | None => "test",
        };
        PatchFailure {
            operation: Some(e.operation),
            reason: format!(
                "operation {} ({name} at `{}`) failed: {}",
                e.operation, e.path, e.kind
            ),
        }
    };
    // json_patch::patch undoes the applied operations on failure, in place: O(patch). Its undo
    // of a `move` can itself fail (and panic) when the target is an ancestor of the source, so a
    // patch with a `move` is applied to a copy instead.
    if ops.iter().any(|op| matches!(op, PatchOperation::Move(_))) {
        let mut copy = doc.clone();
        json_patch::patch_unsafe(&mut copy, &ops).map_err(failure)?;
        *doc = copy;
        Ok(())
    } else {
        json_patch::patch(doc, &ops).map_err(failure)
    }
}

/// `MESSAGES_SNAPSHOT` metadata may list the activity types the snapshot is authoritative for
/// (`metadata["@ag-ui/client"].authoritativeActivityTypes`), as the official client reads it.
enum ActivityAuthority {
    Unspecified,
    All,
    Types(Vec<String>),
}

fn activity_authority(metadata: Option<&Map<String, Value>>) -> ActivityAuthority {
    let Some(entry) = metadata.and_then(|m| m.get("@ag-ui/client")) else {
        return ActivityAuthority::Unspecified;
    };
    let Some(entry) = entry.as_object() else {
        return ActivityAuthority::Types(Vec::new());
    };
    match entry.get("authoritativeActivityTypes") {
        None => ActivityAuthority::Unspecified,
        Some(Value::Null) => ActivityAuthority::All,
        Some(Value::Array(types)) if types.iter().all(Value::is_string) => {
            ActivityAuthority::Types(
                types
                    .iter()
                    .filter_map(|t| t.as_str().map(str::to_owned))
                    .collect(),
            )
        }
        Some(_) => ActivityAuthority::Types(Vec::new()),
    }
}

fn contains(list: &[String], id: &str) -> bool {
    list.iter().any(|x| x == id)
}

fn remove(list: &mut Vec<String>, id: &str) {
    if let Some(i) = list.iter().position(|x| x == id) {
        list.remove(i);
    }
}

impl ChatState {
    /// Folds one event into the state, in place (see the [module docs](self) for what each
    /// event does).
    pub fn apply(&mut self, event: &Event) {
        match event {
            Event::TextMessageChunk(chunk) => self.text_chunk(chunk),
            Event::ToolCallChunk(chunk) => self.tool_chunk(chunk),
            Event::ReasoningMessageChunk(chunk) => self.reasoning_chunk(chunk),
            // The official client drops events it does not know; they change nothing here either
            // (user reducers may read them).
            Event::Unknown(_) => {}
            Event::Raw(_)
            | Event::ActivitySnapshot(_)
            | Event::ActivityDelta(_)
            | Event::ReasoningEncryptedValue(_)
            | Event::SubagentStarted(_)
            | Event::SubagentFinished(_)
            | Event::SubagentError(_) => self.apply_one(event),
            _ => {
                self.close_chunk();
                self.apply_one(event);
            }
        }
    }

    /// Marks the run cancelled by the client: open messages and tool calls keep what arrived
    /// and become [`Interrupted`](StreamStatus::Interrupted), the phase becomes
    /// [`Cancelled`](Phase::Cancelled), and later events of that run are protocol errors until
    /// the next `RUN_STARTED`. Returns false (and changes nothing) when no run is active.
    ///
    /// ```
    /// use agentstate::agui::{ChatState, Event, Phase, StreamStatus};
    ///
    /// let mut chat = ChatState::new();
    /// for event in [Event::run_started("t", "r"), Event::text_start("m"), Event::text_content("m", "Par")] {
    ///     chat.apply(&event);
    /// }
    /// assert!(chat.cancel());
    /// assert_eq!(chat.phase(), &Phase::Cancelled);
    /// assert_eq!(chat.messages()[0].status(), StreamStatus::Interrupted);
    /// assert_eq!(chat.messages()[0].text(), "Par");
    /// ```
    pub fn cancel(&mut self) -> bool {
        if self.run != RunStatus::Active {
            return false;
        }
        self.interrupt_open_streams();
        self.run = RunStatus::Cancelled;
        self.phase = Phase::Cancelled;
        true
    }

    fn protocol_error(&mut self, event_type: &str, reason: String) {
        self.errors.push(ChatError::Protocol(ProtocolError {
            event_type: event_type.to_owned(),
            reason,
        }));
    }

    fn interrupt_open_streams(&mut self) {
        for id in std::mem::take(&mut self.open_text)
            .into_iter()
            .chain(std::mem::take(&mut self.open_reasoning))
        {
            if let Some(&pos) = self.by_id.get(&id) {
                self.messages[pos].status = StreamStatus::Interrupted;
            }
        }
        for id in std::mem::take(&mut self.open_calls) {
            if let Some(&(pos, index)) = self.by_call.get(&id) {
                if let Some(status) = self.messages[pos].call_status.get_mut(index) {
                    *status = StreamStatus::Interrupted;
                }
            }
        }
        self.open_spans.clear();
        self.steps.clear();
        self.chunk = None;
    }

    // ----- chunks -----

    fn close_chunk(&mut self) {
        let end = match self.chunk.take() {
            None => return,
            Some(OpenChunk::Text(id)) => Event::text_end(id),
            Some(OpenChunk::Tool(id)) => Event::tool_end(id),
            Some(OpenChunk::Reasoning(id)) => {
                Event::ReasoningMessageEnd(ReasoningMessageEndEvent {
                    message_id: id,
                    ..Default::default()
                })
            }
        };
        self.apply_one(&end);
    }

    fn text_chunk(&mut self, chunk: &TextMessageChunkEvent) {
        let current = match &self.chunk {
            Some(OpenChunk::Text(id)) => Some(id.clone()),
            _ => None,
        };
        let id = match (&chunk.message_id, current) {
            (None, None) => {
                return self.protocol_error(
                    "TEXT_MESSAGE_CHUNK",
                    "the first chunk of a text message needs a messageId".to_owned(),
                )
            }
            (None, Some(current)) => current,
            (Some(id), Some(current)) if *id == current => current,
            (Some(id), _) => {
                self.close_chunk();
                let errors = self.errors.len();
                self.apply_one(&Event::TextMessageStart(TextMessageStartEvent {
                    message_id: id.clone(),
                    role: Some(chunk.role.unwrap_or_default()),
                    name: chunk.name.clone(),
                    base: chunk.base.clone(),
                }));
                if self.errors.len() > errors {
                    return; // the START was refused (and reported): the chunk goes no further
                }
                self.chunk = Some(OpenChunk::Text(id.clone()));
                id.clone()
            }
        };
        if let Some(delta) = &chunk.delta {
            self.apply_one(&Event::text_content(id, delta.as_str()));
        }
    }

    fn tool_chunk(&mut self, chunk: &ToolCallChunkEvent) {
        let current = match &self.chunk {
            Some(OpenChunk::Tool(id)) => Some(id.clone()),
            _ => None,
        };
        let id = match (&chunk.tool_call_id, current) {
            (None, None) => {
                return self.protocol_error(
                    "TOOL_CALL_CHUNK",
                    "the first chunk of a tool call needs a toolCallId".to_owned(),
                )
            }
            (None, Some(current)) => current,
            (Some(id), Some(current)) if *id == current => current,
            (Some(id), _) => {
                let Some(name) = &chunk.tool_call_name else {
                    return self.protocol_error(
                        "TOOL_CALL_CHUNK",
                        format!("the first chunk of tool call `{id}` needs a toolCallName"),
                    );
                };
                self.close_chunk();
                let errors = self.errors.len();
                self.apply_one(&Event::ToolCallStart(ToolCallStartEvent {
                    tool_call_id: id.clone(),
                    tool_call_name: name.clone(),
                    parent_message_id: chunk.parent_message_id.clone(),
                    base: chunk.base.clone(),
                }));
                if self.errors.len() > errors {
                    return; // the START was refused (and reported): the chunk goes no further
                }
                self.chunk = Some(OpenChunk::Tool(id.clone()));
                id.clone()
            }
        };
        if let Some(delta) = &chunk.delta {
            self.apply_one(&Event::tool_args(id, delta.as_str()));
        }
    }

    fn reasoning_chunk(&mut self, chunk: &ReasoningMessageChunkEvent) {
        let current = match &self.chunk {
            Some(OpenChunk::Reasoning(id)) => Some(id.clone()),
            _ => None,
        };
        let id = match (&chunk.message_id, current) {
            (None, None) => {
                return self.protocol_error(
                    "REASONING_MESSAGE_CHUNK",
                    "the first chunk of a reasoning message needs a messageId".to_owned(),
                )
            }
            (None, Some(current)) => current,
            (Some(id), Some(current)) if *id == current => current,
            (Some(id), _) => {
                self.close_chunk();
                let errors = self.errors.len();
                self.apply_one(&Event::ReasoningMessageStart(ReasoningMessageStartEvent {
                    message_id: id.clone(),
                    role: "reasoning".to_owned(),
                    base: chunk.base.clone(),
                }));
                if self.errors.len() > errors {
                    return; // the START was refused (and reported): the chunk goes no further
                }
                self.chunk = Some(OpenChunk::Reasoning(id.clone()));
                id.clone()
            }
        };
        if let Some(delta) = &chunk.delta {
            self.apply_one(&Event::ReasoningMessageContent(
                ReasoningMessageContentEvent {
                    message_id: id,
                    delta: delta.clone(),
                    ..Default::default()
                },
            ));
        }
    }

    // ----- ordering -----

    /// Checks the ordering rules; `Err` says why the event must be ignored.
    fn check_order(&self, event: &Event) -> Result<(), String> {
        let starts_run = matches!(event, Event::RunStarted(_));
        let errors_run = matches!(event, Event::RunError(_));
        match self.run {
            RunStatus::Errored if !starts_run => {
                return Err(
                    "the run already failed with RUN_ERROR; only RUN_STARTED may follow".to_owned(),
                )
            }
            RunStatus::NotStarted if !starts_run && !errors_run => {
                return Err("no run has started; the first event must be RUN_STARTED".to_owned())
            }
            RunStatus::Finished if !starts_run && !errors_run => {
                return Err(
                    "the run has already finished; a new run must begin with RUN_STARTED"
                        .to_owned(),
                )
            }
            RunStatus::Cancelled if !starts_run && !errors_run => {
                return Err(
                    "the run was cancelled; a new run must begin with RUN_STARTED".to_owned(),
                )
            }
            RunStatus::Active if starts_run => {
                return Err(
                    "a run is already active; it must end with RUN_FINISHED or RUN_ERROR first"
                        .to_owned(),
                )
            }
            _ => {}
        }
        let start_twice = |kind: &str, id: &str, end: &str| {
            Err(format!(
                "{kind} `{id}` is already open; it must be closed with {end} first"
            ))
        };
        let not_open = |kind: &str, id: &str, start: &str| {
            Err(format!(
                "no {kind} `{id}` is open; it needs a {start} first"
            ))
        };
        match event {
            Event::TextMessageStart(e) if contains(&self.open_text, &e.message_id) => {
                start_twice("text message", &e.message_id, "TEXT_MESSAGE_END")
            }
            Event::TextMessageContent(TextMessageContentEvent { message_id, .. })
            | Event::TextMessageEnd(TextMessageEndEvent { message_id, .. })
                if !contains(&self.open_text, message_id) =>
            {
                not_open("text message", message_id, "TEXT_MESSAGE_START")
            }
            Event::ToolCallStart(e) if contains(&self.open_calls, &e.tool_call_id) => {
                start_twice("tool call", &e.tool_call_id, "TOOL_CALL_END")
            }
            Event::ToolCallArgs(ToolCallArgsEvent { tool_call_id, .. })
            | Event::ToolCallEnd(ToolCallEndEvent { tool_call_id, .. })
                if !contains(&self.open_calls, tool_call_id) =>
            {
                not_open("tool call", tool_call_id, "TOOL_CALL_START")
            }
            Event::ReasoningStart(e) if contains(&self.open_spans, &e.message_id) => {
                start_twice("reasoning span", &e.message_id, "REASONING_END")
            }
            Event::ReasoningEnd(e) if !contains(&self.open_spans, &e.message_id) => {
                not_open("reasoning span", &e.message_id, "REASONING_START")
            }
            Event::ReasoningMessageStart(e) if contains(&self.open_reasoning, &e.message_id) => {
                start_twice("reasoning message", &e.message_id, "REASONING_MESSAGE_END")
            }
            Event::ReasoningMessageContent(ReasoningMessageContentEvent { message_id, .. })
            | Event::ReasoningMessageEnd(ReasoningMessageEndEvent { message_id, .. })
                if !contains(&self.open_reasoning, message_id) =>
            {
                not_open("reasoning message", message_id, "REASONING_MESSAGE_START")
            }
            Event::StepStarted(e) if contains(&self.steps, &e.step_name) => {
                Err(format!("step `{}` is already running", e.step_name))
            }
            Event::StepFinished(e) if !contains(&self.steps, &e.step_name) => {
                Err(format!("step `{}` was never started", e.step_name))
            }
            Event::RunFinished(_) => {
                let open = [
                    ("step", "steps", &self.steps),
                    ("text message", "text messages", &self.open_text),
                    (
                        "reasoning message",
                        "reasoning messages",
                        &self.open_reasoning,
                    ),
                    ("reasoning span", "reasoning spans", &self.open_spans),
                    ("tool call", "tool calls", &self.open_calls),
                ];
                match open.iter().find(|(_, _, ids)| !ids.is_empty()) {
                    Some((one, many, ids)) => Err(format!(
                        "it arrived while {} {} {} still open",
                        if ids.len() == 1 { one } else { many },
                        ids.iter()
                            .map(|id| format!("`{id}`"))
                            .collect::<Vec<_>>()
                            .join(", "),
                        if ids.len() == 1 { "is" } else { "are" }
                    )),
                    None => Ok(()),
                }
            }
            _ => Ok(()),
        }
    }

    // ----- one event -----

    fn apply_one(&mut self, event: &Event) {
        if let Err(reason) = self.check_order(event) {
            return self.protocol_error(event.event_type(), reason);
        }
        match event {
            Event::RunStarted(e) => self.run_started(e),
            Event::RunFinished(e) => {
                self.run = RunStatus::Finished;
                self.phase = if e.outcome == Some(RunOutcome::Cancelled) {
                    Phase::Cancelled
                } else {
                    Phase::Idle
                };
                let info = self.run_info.get_or_insert_with(RunInfo::default);
                info.result = e.result.clone();
                info.outcome = e.outcome.clone();
            }
            Event::RunError(e) => {
                self.interrupt_open_streams();
                self.run = RunStatus::Errored;
                self.phase = Phase::Error;
                self.errors.push(ChatError::Run(RunError {
                    message: e.message.clone(),
                    code: e.code.clone(),
                }));
            }
            Event::StepStarted(e) => {
                self.steps.push(e.step_name.clone());
                self.phase = Phase::StepRunning(e.step_name.clone());
            }
            Event::StepFinished(e) => {
                remove(&mut self.steps, &e.step_name);
                self.phase = match self.steps.last() {
                    Some(step) => Phase::StepRunning(step.clone()),
                    None => Phase::Running,
                };
            }
            Event::TextMessageStart(e) => self.text_start(e),
            Event::TextMessageContent(e) => {
                self.push_text("TEXT_MESSAGE_CONTENT", &e.message_id, &e.delta)
            }
            Event::TextMessageEnd(e) => {
                remove(&mut self.open_text, &e.message_id);
                self.set_status(&e.message_id, StreamStatus::Complete);
            }
            Event::ToolCallStart(e) => self.tool_start(e),
            Event::ToolCallArgs(e) => match self.by_call.get(&e.tool_call_id) {
                Some(&(pos, index)) => {
                    if let AguiMessage::Assistant(m) = &mut self.messages[pos].message {
                        if let Some(call) = m.tool_calls.as_mut().and_then(|c| c.get_mut(index)) {
                            call.function.arguments.push_str(&e.delta);
                        }
                    }
                }
                None => self.protocol_error(
                    "TOOL_CALL_ARGS",
                    format!(
                        "tool call `{}` is no longer in the conversation (a MESSAGES_SNAPSHOT dropped it)",
                        e.tool_call_id
                    ),
                ),
            },
            Event::ToolCallEnd(e) => {
                remove(&mut self.open_calls, &e.tool_call_id);
                if let Some(&(pos, index)) = self.by_call.get(&e.tool_call_id) {
                    if let Some(status) = self.messages[pos].call_status.get_mut(index) {
                        *status = StreamStatus::Complete;
                    }
                }
            }
            Event::ToolCallResult(e) => self.tool_result(e),
            Event::StateSnapshot(e) => self.agent_state = e.snapshot.clone(),
            Event::StateDelta(e) => {
                if let Err(failure) = apply_patch(&mut self.agent_state, &e.delta) {
                    self.errors.push(ChatError::StateConflict(StateConflict {
                        patch: e.delta.clone(),
                        state: self.agent_state.clone(),
                        operation: failure.operation,
                        reason: failure.reason,
                        activity_id: None,
                    }));
                }
            }
            Event::MessagesSnapshot(e) => self.messages_snapshot(e),
            Event::ActivitySnapshot(e) => self.activity_snapshot(e),
            Event::ActivityDelta(e) => self.activity_delta(e),
            Event::ReasoningStart(e) => self.open_spans.push(e.message_id.clone()),
            Event::ReasoningEnd(e) => remove(&mut self.open_spans, &e.message_id),
            Event::ReasoningMessageStart(e) => self.reasoning_start(e),
            Event::ReasoningMessageContent(e) => {
                self.push_text("REASONING_MESSAGE_CONTENT", &e.message_id, &e.delta)
            }
            Event::ReasoningMessageEnd(e) => {
                remove(&mut self.open_reasoning, &e.message_id);
                self.set_status(&e.message_id, StreamStatus::Complete);
            }
            Event::ReasoningEncryptedValue(e) => self.encrypted_value(e),
            // Chunks are expanded by `apply`; a chunk reaching here came from nowhere.
            Event::TextMessageChunk(_)
            | Event::ToolCallChunk(_)
            | Event::ReasoningMessageChunk(_)
            | Event::Raw(_)
            | Event::Custom(_)
            | Event::SubagentStarted(_)
            | Event::SubagentFinished(_)
            | Event::SubagentError(_)
            | Event::Unknown(_) => {}
        }
    }

    fn run_started(&mut self, e: &RunStartedEvent) {
        self.run = RunStatus::Active;
        self.phase = Phase::Running;
        self.open_text.clear();
        self.open_reasoning.clear();
        self.open_spans.clear();
        self.open_calls.clear();
        self.steps.clear();
        self.run_errors_from = self.errors.len();
        self.run_info = Some(RunInfo {
            thread_id: e.thread_id.clone(),
            run_id: e.run_id.clone(),
            parent_run_id: e.parent_run_id.clone(),
            result: None,
            outcome: None,
        });
        if let Some(input) = &e.input {
            for message in &input.messages {
                if !self.by_id.contains_key(message.id()) {
                    self.push_message(ChatMessage::complete(message.clone()));
                }
            }
        }
    }

    fn set_status(&mut self, id: &str, status: StreamStatus) {
        if let Some(&pos) = self.by_id.get(id) {
            if !matches!(self.messages[pos].message, AguiMessage::Activity(_)) {
                self.messages[pos].status = status;
            }
        }
    }

    fn is_activity(&self, id: &str) -> bool {
        self.by_id
            .get(id)
            .is_some_and(|&pos| matches!(self.messages[pos].message, AguiMessage::Activity(_)))
    }

    fn text_start(&mut self, e: &TextMessageStartEvent) {
        if self.is_activity(&e.message_id) {
            return self.protocol_error(
                "TEXT_MESSAGE_START",
                format!(
                    "message `{}` is an activity message; text and activity messages need distinct ids",
                    e.message_id
                ),
            );
        }
        match self.by_id.get(&e.message_id) {
            // The official client streams into an existing message with this id (for example
            // the assistant message a TOOL_CALL_START created).
            Some(&pos) => self.messages[pos].status = StreamStatus::Streaming,
            None => self.push_message(ChatMessage {
                message: AguiMessage::empty_text(
                    &e.message_id,
                    e.role.unwrap_or_default(),
                    e.name.clone(),
                ),
                status: StreamStatus::Streaming,
                call_status: Vec::new(),
            }),
        }
        self.open_text.push(e.message_id.clone());
    }

    fn reasoning_start(&mut self, e: &ReasoningMessageStartEvent) {
        if self.is_activity(&e.message_id) {
            return self.protocol_error(
                "REASONING_MESSAGE_START",
                format!(
                    "message `{}` is an activity message; reasoning and activity messages need distinct ids",
                    e.message_id
                ),
            );
        }
        match self.by_id.get(&e.message_id) {
            Some(&pos) => self.messages[pos].status = StreamStatus::Streaming,
            None => self.push_message(ChatMessage {
                message: AguiMessage::Reasoning(ReasoningMessage {
                    id: e.message_id.clone(),
                    ..Default::default()
                }),
                status: StreamStatus::Streaming,
                call_status: Vec::new(),
            }),
        }
        self.open_reasoning.push(e.message_id.clone());
    }

    /// Appends a text delta to a message: O(delta).
    fn push_text(&mut self, event_type: &str, id: &str, delta: &str) {
        let Some(&pos) = self.by_id.get(id) else {
            return self.protocol_error(
                event_type,
                format!(
                    "message `{id}` is no longer in the conversation (a MESSAGES_SNAPSHOT dropped it)"
                ),
            );
        };
        if !self.messages[pos].message.push_text(delta) {
            self.protocol_error(
                event_type,
                format!("message `{id}` is an activity message, which has no text"),
            );
        }
    }

    fn tool_start(&mut self, e: &ToolCallStartEvent) {
        let id = &e.tool_call_id;
        if let Some(&(pos, index)) = self.by_call.get(id) {
            // A call that already exists is reopened; the official client renames it.
            let message = &mut self.messages[pos];
            if let AguiMessage::Assistant(m) = &mut message.message {
                if let Some(call) = m.tool_calls.as_mut().and_then(|c| c.get_mut(index)) {
                    call.function.name.clone_from(&e.tool_call_name);
                }
            }
            if let Some(status) = message.call_status.get_mut(index) {
                *status = StreamStatus::Streaming;
            }
            self.open_calls.push(id.clone());
            return;
        }
        // The owner: the parent when it is an assistant message; otherwise a new assistant
        // message named after the parent (or after the call, when there is no parent or the
        // parent is not an assistant message).
        let existing = e
            .parent_message_id
            .as_ref()
            .and_then(|p| self.by_id.get(p).copied());
        let owner = match (existing, &e.parent_message_id) {
            (Some(pos), _) if matches!(self.messages[pos].message, AguiMessage::Assistant(_)) => {
                pos
            }
            (existing, parent) => {
                let new_id = match (existing, parent) {
                    (None, Some(parent)) => parent.clone(),
                    _ => id.clone(),
                };
                self.push_message(ChatMessage::complete(AguiMessage::Assistant(
                    AssistantMessage {
                        id: new_id,
                        tool_calls: Some(Vec::new()),
                        ..Default::default()
                    },
                )));
                self.messages.len() - 1
            }
        };
        let message = &mut self.messages[owner];
        let AguiMessage::Assistant(assistant) = &mut message.message else {
            return; // the owner is an assistant message by construction
        };
        let calls = assistant.tool_calls.get_or_insert_with(Vec::new);
        calls.push(super::message::AguiToolCall::new(
            id.clone(),
            e.tool_call_name.clone(),
            String::new(),
        ));
        let index = calls.len() - 1;
        message.call_status.resize(index, StreamStatus::Complete);
        message.call_status.push(StreamStatus::Streaming);
        self.by_call.insert(id.clone(), (owner, index));
        self.open_calls.push(id.clone());
    }

    fn tool_result(&mut self, e: &ToolCallResultEvent) {
        let message = ChatMessage::complete(AguiMessage::Tool(ToolMessage {
            id: e.message_id.clone(),
            content: e.content.clone(),
            tool_call_id: e.tool_call_id.clone(),
            ..Default::default()
        }));
        // Right after the assistant message that owns the call (and after the tool messages
        // already there), so the provider contract "a tool call is followed by its result"
        // holds; at the end when no message owns the call.
        let at = match self.by_call.get(&e.tool_call_id) {
            None => self.messages.len(),
            Some(&(owner, _)) => {
                let mut at = owner + 1;
                while at < self.messages.len()
                    && matches!(self.messages[at].message, AguiMessage::Tool(_))
                {
                    at += 1;
                }
                at
            }
        };
        self.insert_message(at, message);
    }

    fn messages_snapshot(&mut self, e: &MessagesSnapshotEvent) {
        let authority = activity_authority(e.base.metadata.as_ref());
        let mut incoming: HashMap<&str, &AguiMessage> = HashMap::new();
        for message in &e.messages {
            incoming.insert(message.id(), message); // the last one with an id wins
        }
        let has_activity = e
            .messages
            .iter()
            .any(|m| matches!(m, AguiMessage::Activity(_)));
        let has_reasoning = e
            .messages
            .iter()
            .any(|m| matches!(m, AguiMessage::Reasoning(_)));
        // Client-only messages the snapshot does not speak for are kept.
        let preserved = |m: &AguiMessage| match m {
            AguiMessage::Activity(a) => match &authority {
                ActivityAuthority::Types(types) => !types.contains(&a.activity_type),
                ActivityAuthority::All => false,
                ActivityAuthority::Unspecified => !has_activity,
            },
            AguiMessage::Reasoning(_) => !has_reasoning,
            _ => false,
        };
        let mut next: Vec<ChatMessage> = std::mem::take(&mut self.messages)
            .into_iter()
            .filter(|m| incoming.contains_key(m.id()) || preserved(&m.message))
            .map(|m| match incoming.get(m.id()) {
                Some(&replacement) => ChatMessage::complete(replacement.clone()),
                None => m,
            })
            .collect();
        let present: HashSet<String> = next.iter().map(|m| m.id().to_owned()).collect();
        for message in &e.messages {
            if !present.contains(message.id()) {
                next.push(ChatMessage::complete(message.clone()));
            }
        }
        // What is still open keeps streaming into the snapshot's version.
        for message in &mut next {
            let id = message.message.id();
            if contains(&self.open_text, id) || contains(&self.open_reasoning, id) {
                message.status = StreamStatus::Streaming;
            }
            let open: Vec<bool> = message
                .message
                .tool_calls()
                .iter()
                .map(|c| contains(&self.open_calls, &c.id))
                .collect();
            for (status, open) in message.call_status.iter_mut().zip(open) {
                if open {
                    *status = StreamStatus::Streaming;
                }
            }
        }
        self.messages = next;
        self.reindex();
    }

    fn activity_snapshot(&mut self, e: &ActivitySnapshotEvent) {
        let replace = e.replace.unwrap_or(true);
        match self.by_id.get(&e.message_id).copied() {
            None => self.push_message(ChatMessage::complete(AguiMessage::Activity(
                ActivityMessage {
                    id: e.message_id.clone(),
                    activity_type: e.activity_type.clone(),
                    content: e.content.clone(),
                    metadata: None,
                },
            ))),
            Some(_) if !replace => {}
            Some(pos) => {
                if let AguiMessage::Activity(activity) = &mut self.messages[pos].message {
                    activity.activity_type.clone_from(&e.activity_type);
                    activity.content = e.content.clone();
                } else {
                    // The official client replaces a non-activity message with this id.
                    self.messages[pos] =
                        ChatMessage::complete(AguiMessage::Activity(ActivityMessage {
                            id: e.message_id.clone(),
                            activity_type: e.activity_type.clone(),
                            content: e.content.clone(),
                            metadata: None,
                        }));
                    self.reindex();
                }
            }
        }
    }

    fn activity_delta(&mut self, e: &ActivityDeltaEvent) {
        let Some(&pos) = self.by_id.get(&e.message_id) else {
            return self.protocol_error(
                "ACTIVITY_DELTA",
                format!(
                    "no activity message `{}` exists; it needs an ACTIVITY_SNAPSHOT first",
                    e.message_id
                ),
            );
        };
        let AguiMessage::Activity(activity) = &mut self.messages[pos].message else {
            return self.protocol_error(
                "ACTIVITY_DELTA",
                format!("message `{}` is not an activity message", e.message_id),
            );
        };
        // The official client patches `content ?? {}`.
        let was_null = activity.content.is_null();
        if was_null {
            activity.content = Value::Object(Map::new());
        }
        match apply_patch(&mut activity.content, &e.patch) {
            Ok(()) => activity.activity_type.clone_from(&e.activity_type),
            Err(failure) => {
                if was_null {
                    activity.content = Value::Null;
                }
                let state = activity.content.clone();
                self.errors.push(ChatError::StateConflict(StateConflict {
                    patch: e.patch.clone(),
                    state,
                    operation: failure.operation,
                    reason: failure.reason,
                    activity_id: Some(e.message_id.clone()),
                }));
            }
        }
    }

    fn encrypted_value(&mut self, e: &ReasoningEncryptedValueEvent) {
        match e.subtype {
            EncryptedValueSubtype::ToolCall => {
                if let Some(&(pos, index)) = self.by_call.get(&e.entity_id) {
                    if let AguiMessage::Assistant(m) = &mut self.messages[pos].message {
                        if let Some(call) = m.tool_calls.as_mut().and_then(|c| c.get_mut(index)) {
                            call.encrypted_value = Some(e.encrypted_value.clone());
                        }
                    }
                }
            }
            EncryptedValueSubtype::Message => {
                if let Some(&pos) = self.by_id.get(&e.entity_id) {
                    self.messages[pos]
                        .message
                        .set_encrypted_value(&e.encrypted_value);
                }
            }
        }
    }
}
