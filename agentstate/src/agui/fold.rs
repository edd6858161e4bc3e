//! The fold: `(ChatState, &Event) -> ChatState`, a pure function of the state and the event.

use super::chat::{
    AgentRunError, ApplyOutcome, ChatError, ChatMessage, ChatState, Phase, ProtocolError, RunInfo,
    RunStatus, StateConflict, StreamStatus,
};
use super::event::*;
use super::message::{
    ActivityMessage, AguiMessage, AguiToolCall, AssistantMessage, ReasoningMessage, ToolMessage,
};
use super::order::Bracket;
use super::patch::apply_patch;
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

/// Folds `incoming` metadata into `target` key by key, the last write winning (the official
/// client's `mergeMetadata`). False when the event carries none (the streaming case: no call).
#[inline(always)]
fn merge_metadata(
    target: &mut Option<Map<String, Value>>,
    incoming: &Option<Map<String, Value>>,
) -> bool {
    match incoming {
        None => false,
        Some(incoming) => {
            merge_into(target.get_or_insert_with(Map::new), incoming);
            true
        }
    }
}

fn merge_into(target: &mut Map<String, Value>, incoming: &Map<String, Value>) {
    for (key, value) in incoming {
        target.insert(key.clone(), value.clone());
    }
}

/// A reason an accepted event's content was dropped.
type Dropped = Option<String>;

impl ChatState {
    /// Folds one event into the state, in place (see [the fold](crate::agui#the-fold) for what each
    /// event does), and says what it did: [`ApplyOutcome::Applied`], or why not entirely. Every
    /// error is also recorded in [`errors`](ChatState::errors), with the event's index.
    ///
    /// ```
    /// use agentstate::agui::{ChatState, Event, ApplyOutcome};
    ///
    /// let mut chat = ChatState::new();
    /// assert!(chat.apply(&Event::run_started("t", "r")).is_applied());
    /// assert!(chat.apply(&Event::text_start("m")).is_applied());
    /// // A second START for an open message breaks the protocol: ignored, nothing changed.
    /// let before = chat.messages().to_vec();
    /// assert!(matches!(chat.apply(&Event::text_start("m")), ApplyOutcome::Ignored(_)));
    /// assert_eq!(chat.messages(), &before[..]);
    /// ```
    pub fn apply(&mut self, event: &Event) -> ApplyOutcome {
        let index = self.events_seen;
        self.events_seen += 1;
        // Streaming, the hot path: a CONTENT or ARGS (or a chunk continuing its stream with
        // one) appends to its message or call, with no event built and one hash lookup.
        if self.lanes.is_empty() {
            match event {
                Event::TextMessageContent(e) => {
                    return self.stream(
                        index,
                        event,
                        Bracket::Text,
                        &e.message_id,
                        &e.delta,
                        &e.base,
                    )
                }
                Event::ToolCallArgs(e) => {
                    return self.stream(
                        index,
                        event,
                        Bracket::Tool,
                        &e.tool_call_id,
                        &e.delta,
                        &e.base,
                    )
                }
                Event::ReasoningMessageContent(e) => {
                    return self.stream(
                        index,
                        event,
                        Bracket::Reasoning,
                        &e.message_id,
                        &e.delta,
                        &e.base,
                    )
                }
                _ => {}
            }
        } else if let Some(c) = self.lanes.continuation(event) {
            if let Err(reason) = self.order.check_continuation(c.kind, &c.id, &c.owner) {
                let step = match c.kind {
                    Bracket::Text => "TEXT_MESSAGE_CONTENT",
                    Bracket::Tool => "TOOL_CALL_ARGS",
                    Bracket::Reasoning => "REASONING_MESSAGE_CONTENT",
                };
                return self.ignore(
                    index,
                    event,
                    format!("the {step} it expands to was refused: {reason}"),
                );
            }
            let dropped = self.append(c.kind, &c.id, c.delta, c.metadata);
            return self.outcome(dropped, index, event);
        }
        let expansion = match self.lanes.expand(event) {
            Ok(expansion) => expansion,
            Err(reason) => return self.ignore(index, event, reason),
        };
        match expansion {
            None => {
                if let Err(reason) = self.order.admit_one(event) {
                    return self.ignore(index, event, reason);
                }
                self.effect(event, event, index)
            }
            Some(expansion) => {
                let admitted = self.order.admit(expansion.events.iter().map(|e| &**e));
                if let Err((failed, reason)) = admitted {
                    let reason = if std::ptr::eq(failed, event) {
                        reason
                    } else {
                        format!(
                            "the {} it expands to was refused: {reason}",
                            failed.event_type()
                        )
                    };
                    return self.ignore(index, event, reason);
                }
                self.lanes.commit(expansion.changes);
                let mut outcome = ApplyOutcome::Applied;
                for step in &expansion.events {
                    let result = self.effect(step, event, index);
                    if outcome.is_applied() {
                        outcome = result;
                    }
                }
                outcome
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
        if self.order.run != RunStatus::Active {
            return false;
        }
        self.interrupt_open_streams();
        self.order.run = RunStatus::Cancelled;
        self.phase = Phase::Cancelled;
        true
    }

    fn protocol_error(&self, index: usize, event: &Event, reason: String) -> ProtocolError {
        ProtocolError {
            event_type: event.event_type().to_owned(),
            reason,
            event_index: index,
        }
    }

    fn ignore(&mut self, index: usize, event: &Event, reason: String) -> ApplyOutcome {
        let error = self.protocol_error(index, event, reason);
        self.errors.push(ChatError::Protocol(error.clone()));
        ApplyOutcome::Ignored(error)
    }

    fn interrupt_open_streams(&mut self) {
        for id in std::mem::take(&mut self.order.open_text)
            .into_iter()
            .chain(std::mem::take(&mut self.order.open_reasoning))
        {
            if let Some(&pos) = self.by_id.get(&id) {
                self.messages[pos].status = StreamStatus::Interrupted;
            }
        }
        for id in std::mem::take(&mut self.order.open_calls) {
            if let Some(&(pos, index)) = self.by_call.get(&id) {
                if let Some(status) = self.messages[pos].call_status.get_mut(index) {
                    *status = StreamStatus::Interrupted;
                }
            }
        }
        self.order.open_spans.clear();
        self.order.steps.clear();
        self.steps.clear();
        self.lanes.clear();
    }

    // ----- one admitted event -----

    /// What an admitted event (`event`, possibly expanded from `original`) does to the
    /// conversation and the shared state.
    fn effect(&mut self, event: &Event, original: &Event, index: usize) -> ApplyOutcome {
        let dropped: Dropped = match event {
            Event::RunStarted(e) => {
                self.run_started(e);
                None
            }
            Event::RunFinished(e) => {
                self.phase = if e.outcome == Some(RunOutcome::Cancelled) {
                    Phase::Cancelled
                } else {
                    Phase::Idle
                };
                let info = self.run_info.get_or_insert_with(RunInfo::default);
                info.result = e.result.clone();
                info.outcome = e.outcome.clone();
                None
            }
            Event::RunError(e) => {
                self.interrupt_open_streams();
                self.phase = Phase::Error;
                self.errors.push(ChatError::Run(AgentRunError {
                    message: e.message.clone(),
                    code: e.code.clone(),
                }));
                None
            }
            Event::StepStarted(_) | Event::StepFinished(_) => {
                self.steps = self.order.steps.iter().map(|(_, n)| n.clone()).collect();
                self.phase = match self.steps.last() {
                    Some(step) => Phase::StepRunning(step.clone()),
                    None => Phase::Running,
                };
                None
            }
            Event::TextMessageStart(e) => self.text_start(e),
            Event::TextMessageContent(e) => {
                self.push_text(&e.message_id, &e.delta, &e.base.metadata)
            }
            Event::TextMessageEnd(e) => self.end_text(&e.message_id, &e.base.metadata),
            Event::ToolCallStart(e) => {
                self.tool_start(e);
                None
            }
            Event::ToolCallArgs(e) => self.tool_args(&e.tool_call_id, &e.delta, &e.base.metadata),
            Event::ToolCallEnd(e) => self.tool_end(e),
            Event::ToolCallResult(e) => {
                self.tool_result(e);
                None
            }
            Event::StateSnapshot(e) => {
                self.agent_state = e.snapshot.clone();
                None
            }
            Event::StateDelta(e) => {
                if let Err(failure) = apply_patch(&mut self.agent_state, &e.delta) {
                    return self.conflict(StateConflict {
                        patch: e.delta.clone(),
                        state: self.agent_state.clone(),
                        operation: failure.operation,
                        reason: failure.reason,
                        activity_id: None,
                        event_index: index,
                    });
                }
                None
            }
            Event::MessagesSnapshot(e) => {
                self.messages_snapshot(e);
                None
            }
            Event::ActivitySnapshot(e) => {
                self.activity_snapshot(e);
                None
            }
            Event::ActivityDelta(e) => return self.activity_delta(e, index),
            Event::ReasoningMessageStart(e) => self.reasoning_start(e),
            Event::ReasoningMessageContent(e) => {
                self.push_text(&e.message_id, &e.delta, &e.base.metadata)
            }
            Event::ReasoningMessageEnd(e) => self.end_text(&e.message_id, &e.base.metadata),
            Event::ReasoningEncryptedValue(e) => {
                self.encrypted_value(e);
                None
            }
            // Chunks reach here expanded; the rest only open or close what `Order` tracks
            // (or nothing the default fold keeps: user reducers may read them).
            Event::ReasoningStart(_)
            | Event::ReasoningEnd(_)
            | Event::TextMessageChunk(_)
            | Event::ToolCallChunk(_)
            | Event::ReasoningMessageChunk(_)
            | Event::Raw(_)
            | Event::Custom(_)
            | Event::SubagentStarted(_)
            | Event::SubagentFinished(_)
            | Event::SubagentError(_)
            | Event::Unknown(_) => None,
        };
        self.outcome(dropped, index, original)
    }

    #[inline]
    fn outcome(&mut self, dropped: Dropped, index: usize, event: &Event) -> ApplyOutcome {
        match dropped {
            None => ApplyOutcome::Applied,
            Some(reason) => self.dropped(reason, index, event),
        }
    }

    #[cold]
    fn dropped(&mut self, reason: String, index: usize, event: &Event) -> ApplyOutcome {
        let error = self.protocol_error(index, event, reason);
        self.errors.push(ChatError::Protocol(error.clone()));
        ApplyOutcome::Dropped(error)
    }

    /// An explicit CONTENT / ARGS while no chunk stream is open.
    #[inline]
    fn stream(
        &mut self,
        index: usize,
        event: &Event,
        kind: Bracket,
        id: &str,
        delta: &str,
        base: &EventBase,
    ) -> ApplyOutcome {
        if let Err(reason) = self
            .order
            .check_continuation(kind, id, &base.subagent_run_id)
        {
            return self.ignore(index, event, reason);
        }
        let dropped = self.append(kind, id, delta, &base.metadata);
        self.outcome(dropped, index, event)
    }

    /// Appends streamed text or arguments.
    #[inline]
    fn append(
        &mut self,
        kind: Bracket,
        id: &str,
        delta: &str,
        metadata: &Option<Map<String, Value>>,
    ) -> Dropped {
        match kind {
            Bracket::Tool => self.tool_args(id, delta, metadata),
            Bracket::Text | Bracket::Reasoning => self.push_text(id, delta, metadata),
        }
    }

    fn conflict(&mut self, conflict: StateConflict) -> ApplyOutcome {
        self.errors.push(ChatError::StateConflict(conflict.clone()));
        ApplyOutcome::Conflict(conflict)
    }

    fn run_started(&mut self, e: &RunStartedEvent) {
        self.phase = Phase::Running;
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

    fn activity_at(&self, id: &str) -> Option<usize> {
        self.by_id
            .get(id)
            .copied()
            .filter(|&pos| matches!(self.messages[pos].message, AguiMessage::Activity(_)))
    }

    fn activity_reuse(id: &str) -> Dropped {
        Some(format!(
            "message `{id}` is an activity message; text and activity messages need distinct ids"
        ))
    }

    fn text_start(&mut self, e: &TextMessageStartEvent) -> Dropped {
        self.start_message(&e.message_id, &e.base, || {
            AguiMessage::empty_text(
                &e.message_id,
                e.role.unwrap_or_default(),
                e.name.clone(),
                e.base.subagent_run_id.clone(),
            )
        })
    }

    fn reasoning_start(&mut self, e: &ReasoningMessageStartEvent) -> Dropped {
        self.start_message(&e.message_id, &e.base, || {
            AguiMessage::Reasoning(ReasoningMessage {
                id: e.message_id.clone(),
                subagent_run_id: e.base.subagent_run_id.clone(),
                ..Default::default()
            })
        })
    }

    /// A text or reasoning START: streams into the message `id` (the official client reuses
    /// an existing one, for example the assistant message a TOOL_CALL_START created), created
    /// by `create` when there is none.
    fn start_message(
        &mut self,
        id: &str,
        base: &EventBase,
        create: impl FnOnce() -> AguiMessage,
    ) -> Dropped {
        if self.activity_at(id).is_some() {
            // The official client leaves the activity alone; the id is open all the same, so
            // a MESSAGES_SNAPSHOT that turns it into a text message can be streamed into.
            return Self::activity_reuse(id);
        }
        let pos = match self.by_id.get(id) {
            Some(&pos) => pos,
            None => {
                self.push_message(ChatMessage {
                    message: create(),
                    status: StreamStatus::Streaming,
                    call_status: Vec::new(),
                });
                self.messages.len() - 1
            }
        };
        let message = &mut self.messages[pos];
        message.status = StreamStatus::Streaming;
        merge_metadata(message.message.metadata_mut(), &base.metadata);
        None
    }

    /// Appends a text delta to a message: O(delta).
    fn push_text(
        &mut self,
        id: &str,
        delta: &str,
        metadata: &Option<Map<String, Value>>,
    ) -> Dropped {
        let Some(&pos) = self.by_id.get(id) else {
            return Some(format!(
                "message `{id}` is no longer in the conversation (a MESSAGES_SNAPSHOT dropped it)"
            ));
        };
        let message = &mut self.messages[pos].message;
        if !message.push_text(delta) {
            return Some(format!(
                "message `{id}` is an activity message, which has no text"
            ));
        }
        merge_metadata(message.metadata_mut(), metadata);
        None
    }

    fn end_text(&mut self, id: &str, metadata: &Option<Map<String, Value>>) -> Dropped {
        let Some(&pos) = self.by_id.get(id) else {
            return Some(format!(
                "message `{id}` is no longer in the conversation (a MESSAGES_SNAPSHOT dropped it)"
            ));
        };
        let message = &mut self.messages[pos];
        if matches!(message.message, AguiMessage::Activity(_)) {
            return Some(format!(
                "message `{id}` is an activity message, which has no text"
            ));
        }
        message.status = StreamStatus::Complete;
        merge_metadata(message.message.metadata_mut(), metadata);
        None
    }

    /// The tool call `id`, with its status.
    fn call_mut(&mut self, id: &str) -> Option<(&mut AguiToolCall, &mut StreamStatus)> {
        let &(pos, index) = self.by_call.get(id)?;
        let message = &mut self.messages[pos];
        let AguiMessage::Assistant(m) = &mut message.message else {
            return None;
        };
        let call = m.tool_calls.as_mut()?.get_mut(index)?;
        Some((call, message.call_status.get_mut(index)?))
    }

    fn tool_start(&mut self, e: &ToolCallStartEvent) {
        let id = &e.tool_call_id;
        if let Some((call, status)) = self.call_mut(id) {
            // A call that already exists is reopened; the official client renames it.
            call.function.name.clone_from(&e.tool_call_name);
            merge_metadata(&mut call.metadata, &e.base.metadata);
            *status = StreamStatus::Streaming;
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
                // Attributed to the call's subagent when the message is new.
                let subagent_run_id = if self.by_id.contains_key(&new_id) {
                    None
                } else {
                    e.base.subagent_run_id.clone()
                };
                self.push_message(ChatMessage::complete(AguiMessage::Assistant(
                    AssistantMessage {
                        id: new_id,
                        tool_calls: Some(Vec::new()),
                        subagent_run_id,
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
        let mut call = AguiToolCall::new(id.clone(), e.tool_call_name.clone(), String::new());
        merge_metadata(&mut call.metadata, &e.base.metadata);
        calls.push(call);
        let index = calls.len() - 1;
        message.call_status.resize(index, StreamStatus::Complete);
        message.call_status.push(StreamStatus::Streaming);
        self.by_call.entry(id.clone()).or_insert((owner, index));
    }

    fn missing_call(id: &str) -> Dropped {
        Some(format!(
            "tool call `{id}` is no longer in the conversation (a MESSAGES_SNAPSHOT dropped it)"
        ))
    }

    fn tool_args(
        &mut self,
        id: &str,
        delta: &str,
        metadata: &Option<Map<String, Value>>,
    ) -> Dropped {
        let Some((call, _)) = self.call_mut(id) else {
            return Self::missing_call(id);
        };
        call.function.arguments.push_str(delta);
        merge_metadata(&mut call.metadata, metadata);
        None
    }

    fn tool_end(&mut self, e: &ToolCallEndEvent) -> Dropped {
        let Some((call, status)) = self.call_mut(&e.tool_call_id) else {
            return Self::missing_call(&e.tool_call_id);
        };
        merge_metadata(&mut call.metadata, &e.base.metadata);
        *status = StreamStatus::Complete;
        None
    }

    fn tool_result(&mut self, e: &ToolCallResultEvent) {
        let mut message = ToolMessage {
            id: e.message_id.clone(),
            content: e.content.clone(),
            tool_call_id: e.tool_call_id.clone(),
            subagent_run_id: e.base.subagent_run_id.clone(),
            ..Default::default()
        };
        merge_metadata(&mut message.metadata, &e.base.metadata);
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
        self.insert_message(at, ChatMessage::complete(AguiMessage::Tool(message)));
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
        let order = &self.order;
        for message in &mut next {
            let id = message.message.id();
            if contains(&order.open_text, id) || contains(&order.open_reasoning, id) {
                message.status = StreamStatus::Streaming;
            }
            let open: Vec<bool> = message
                .message
                .tool_calls()
                .iter()
                .map(|c| contains(&order.open_calls, &c.id))
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
        let fresh = || {
            let mut activity = ActivityMessage {
                id: e.message_id.clone(),
                activity_type: e.activity_type.clone(),
                content: e.content.clone(),
                subagent_run_id: e.base.subagent_run_id.clone(),
                metadata: None,
            };
            merge_metadata(&mut activity.metadata, &e.base.metadata);
            ChatMessage::complete(AguiMessage::Activity(activity))
        };
        match self.by_id.get(&e.message_id).copied() {
            None => self.push_message(fresh()),
            Some(pos) => match &mut self.messages[pos].message {
                AguiMessage::Activity(activity) => {
                    // A replacing snapshot re-mints the activity (with the event's
                    // attribution) but keeps the metadata gathered so far.
                    if replace {
                        activity.activity_type.clone_from(&e.activity_type);
                        activity.content = e.content.clone();
                        activity.subagent_run_id.clone_from(&e.base.subagent_run_id);
                    }
                    merge_metadata(&mut activity.metadata, &e.base.metadata);
                }
                // The official client replaces a non-activity message with this id.
                _ if replace => {
                    self.messages[pos] = fresh();
                    self.reindex();
                }
                _ => {}
            },
        }
    }

    fn activity_delta(&mut self, e: &ActivityDeltaEvent, index: usize) -> ApplyOutcome {
        let dropped = |reason: String| ProtocolError {
            event_type: "ACTIVITY_DELTA".to_owned(),
            reason,
            event_index: index,
        };
        let Some(&pos) = self.by_id.get(&e.message_id) else {
            let error = dropped(format!(
                "no activity message `{}` exists; it needs an ACTIVITY_SNAPSHOT first",
                e.message_id
            ));
            self.errors.push(ChatError::Protocol(error.clone()));
            return ApplyOutcome::Dropped(error);
        };
        let AguiMessage::Activity(activity) = &mut self.messages[pos].message else {
            let error = dropped(format!(
                "message `{}` is not an activity message",
                e.message_id
            ));
            self.errors.push(ChatError::Protocol(error.clone()));
            return ApplyOutcome::Dropped(error);
        };
        // The metadata does not depend on the patch: the official client merges it first.
        merge_metadata(&mut activity.metadata, &e.base.metadata);
        // The official client patches `content ?? {}`.
        let was_null = activity.content.is_null();
        if was_null {
            activity.content = Value::Object(Map::new());
        }
        match apply_patch(&mut activity.content, &e.patch) {
            Ok(()) => {
                activity.activity_type.clone_from(&e.activity_type);
                ApplyOutcome::Applied
            }
            Err(failure) => {
                if was_null {
                    activity.content = Value::Null;
                }
                let state = activity.content.clone();
                self.conflict(StateConflict {
                    patch: e.patch.clone(),
                    state,
                    operation: failure.operation,
                    reason: failure.reason,
                    activity_id: Some(e.message_id.clone()),
                    event_index: index,
                })
            }
        }
    }

    fn encrypted_value(&mut self, e: &ReasoningEncryptedValueEvent) {
        match e.subtype {
            EncryptedValueSubtype::ToolCall => {
                if let Some((call, _)) = self.call_mut(&e.entity_id) {
                    call.encrypted_value = Some(e.encrypted_value.clone());
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

fn contains(list: &[String], id: &str) -> bool {
    list.iter().any(|x| x == id)
}
