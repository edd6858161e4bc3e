//! [`ChatState`]: what a chat UI renders, the fold of an agent run's AG-UI events.

use super::chunks::Lanes;
use super::event::RunOutcome;
use super::message::{AguiMessage, AguiRole, AguiToolCall, ToolMessage};
use super::order::Order;
use serde_json::{Map, Value};
use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt;

/// Where the run stands.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub enum Phase {
    /// No run is going on: none started yet, or the last one finished.
    #[default]
    Idle,
    /// A run is going on, outside any step.
    Running,
    /// A run is going on inside the named step (the innermost one when steps nest).
    StepRunning(String),
    /// The run failed with `RUN_ERROR`; [`ChatState::error`] says why.
    Error,
    /// The run was cancelled: by the client ([`ChatState::cancel`]) or by a `RUN_FINISHED`
    /// whose outcome is `cancelled`.
    Cancelled,
}

impl fmt::Display for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Phase::Idle => f.write_str("idle"),
            Phase::Running => f.write_str("running"),
            Phase::StepRunning(step) => write!(f, "running step `{step}`"),
            Phase::Error => f.write_str("error"),
            Phase::Cancelled => f.write_str("cancelled"),
        }
    }
}

/// Whether a message or a tool call is still being streamed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum StreamStatus {
    /// Its START arrived and its END has not: more content may come.
    Streaming,
    /// Complete: its END arrived, or it was never streamed (a snapshot, a tool result).
    #[default]
    Complete,
    /// Its stream was cut by `RUN_ERROR` or a cancellation before its END: it holds what arrived.
    Interrupted,
}

/// One message of the conversation, with its streaming status (and its tool calls').
#[derive(Debug, Clone, PartialEq)]
pub struct ChatMessage {
    pub(crate) message: AguiMessage,
    pub(crate) status: StreamStatus,
    /// Parallel to the assistant message's tool calls.
    pub(crate) call_status: Vec<StreamStatus>,
}

impl ChatMessage {
    /// A complete message (tool calls complete too).
    pub(crate) fn complete(message: AguiMessage) -> Self {
        let calls = message.tool_calls().len();
        ChatMessage {
            message,
            status: StreamStatus::Complete,
            call_status: vec![StreamStatus::Complete; calls],
        }
    }

    /// The message as AG-UI has it.
    pub fn message(&self) -> &AguiMessage {
        &self.message
    }

    /// Whether the message is still being streamed, complete, or was interrupted.
    pub fn status(&self) -> StreamStatus {
        self.status
    }

    /// True while the message is being streamed.
    pub fn is_streaming(&self) -> bool {
        self.status == StreamStatus::Streaming
    }

    /// The message id.
    pub fn id(&self) -> &str {
        self.message.id()
    }

    /// The message's role.
    pub fn role(&self) -> AguiRole {
        self.message.role()
    }

    /// The message's text so far (see [`AguiMessage::text`]), borrowed.
    pub fn text(&self) -> Cow<'_, str> {
        self.message.text()
    }

    /// The tool calls of an assistant message (arguments as streamed so far).
    pub fn tool_calls(&self) -> &[AguiToolCall] {
        self.message.tool_calls()
    }

    /// The status of the `index`-th tool call.
    pub fn tool_call_status(&self, index: usize) -> Option<StreamStatus> {
        self.call_status.get(index).copied()
    }
}

/// A tool call with what the fold knows about it: its message, status and result.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ToolCallView<'a> {
    /// The call: id, name and arguments as streamed so far.
    pub call: &'a AguiToolCall,
    /// The assistant message the call is attached to.
    pub message: &'a ChatMessage,
    /// Whether the arguments are still streaming.
    pub status: StreamStatus,
    /// The tool's result, once `TOOL_CALL_RESULT` has arrived.
    pub result: Option<&'a ToolMessage>,
}

impl ToolCallView<'_> {
    /// The call id.
    pub fn id(&self) -> &str {
        &self.call.id
    }

    /// The tool's name.
    pub fn name(&self) -> &str {
        &self.call.function.name
    }

    /// The arguments parsed as JSON, `None` while incomplete or not JSON.
    pub fn arguments(&self) -> Option<Value> {
        self.call.parsed_arguments()
    }
}

/// The run a state is (or was last) in.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunInfo {
    /// The conversation thread.
    pub thread_id: String,
    /// The run.
    pub run_id: String,
    /// The run this one was started from.
    pub parent_run_id: Option<String>,
    /// The result `RUN_FINISHED` carried.
    pub result: Option<Value>,
    /// The outcome `RUN_FINISHED` carried.
    pub outcome: Option<RunOutcome>,
}

/// An error the fold put on the state. None of them leaves the state half-changed: the event
/// that caused it was not applied (or, for [`ChatError::Run`], it is the event's whole meaning).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ChatError {
    /// The agent reported `RUN_ERROR`.
    #[error(transparent)]
    Run(#[from] AgentRunError),
    /// A `STATE_DELTA` (or `ACTIVITY_DELTA`) patch could not be applied.
    #[error(transparent)]
    StateConflict(#[from] StateConflict),
    /// An event broke the protocol's ordering rules, or referred to something that does not
    /// exist; it was ignored.
    #[error(transparent)]
    Protocol(#[from] ProtocolError),
}

/// The agent's own error, from `RUN_ERROR`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the run failed: {message}{}", code.as_ref().map(|c| format!(" (code `{c}`)")).unwrap_or_default())]
pub struct AgentRunError {
    /// What went wrong, as the agent said it.
    pub message: String,
    /// The agent's error code.
    pub code: Option<String>,
}

/// A JSON Patch that could not be applied, with what is needed to resolve it: the incoming
/// patch, and the state it failed against (which is still the state, unchanged).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error(
    "event {event_index}: {} could not be applied, so {} was left unchanged: {reason}",
    activity_id.as_ref().map(|id| format!("ACTIVITY_DELTA for activity `{id}`")).unwrap_or_else(|| "STATE_DELTA".to_owned()),
    if activity_id.is_some() { "its content" } else { "the shared state" }
)]
pub struct StateConflict {
    /// The incoming patch operations, as they arrived.
    pub patch: Vec<Value>,
    /// The state the patch failed against.
    pub state: Value,
    /// The index of the operation that failed, when one did.
    pub operation: Option<usize>,
    /// Why, e.g. ``operation 0 (test at `/count`) failed: value did not match``.
    pub reason: String,
    /// For an `ACTIVITY_DELTA`, the activity message's id; `None` for the shared state.
    pub activity_id: Option<String>,
    /// The position of the event in the stream (0 for the first event this state folded).
    pub event_index: usize,
}

/// An event that broke the protocol and was ignored, or whose content had nowhere to go.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("event {event_index}: {event_type} was ignored: {reason}")]
pub struct ProtocolError {
    /// The offending event's type.
    pub event_type: String,
    /// What was wrong with it.
    pub reason: String,
    /// The position of the event in the stream (0 for the first event this state folded).
    pub event_index: usize,
}

/// What [`ChatState::apply`] did with one event.
///
/// ```
/// use agentstate::agui::{ChatState, Event, ApplyOutcome};
///
/// let mut chat = ChatState::new();
/// assert_eq!(chat.apply(&Event::run_started("t", "r")), ApplyOutcome::Applied);
/// let ApplyOutcome::Ignored(error) = chat.apply(&Event::text_content("m", "Hi")) else { panic!() };
/// assert_eq!(error.event_index, 1);
/// assert_eq!(
///     error.to_string(),
///     "event 1: TEXT_MESSAGE_CONTENT was ignored: no text message `m` is open; it needs a TEXT_MESSAGE_START first"
/// );
/// ```
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum ApplyOutcome {
    /// The event was folded.
    Applied,
    /// The event broke the protocol's ordering or attribution rules (the official client aborts
    /// the run on it) and was ignored: nothing changed but the error, recorded in
    /// [`ChatState::errors`].
    Ignored(ProtocolError),
    /// The event was accepted, but what it carried had nowhere to go (text for a message a
    /// `MESSAGES_SNAPSHOT` dropped or that is an activity, a delta for a missing activity); the
    /// official client drops it with a warning. What it opens or closes is opened or closed.
    /// The error is recorded in [`ChatState::errors`].
    Dropped(ProtocolError),
    /// A `STATE_DELTA` or `ACTIVITY_DELTA` patch could not be applied: the state (or the
    /// activity's content) was left unchanged and the conflict recorded in
    /// [`ChatState::errors`].
    Conflict(StateConflict),
}

impl ApplyOutcome {
    /// True when the event was folded without trouble.
    pub fn is_applied(&self) -> bool {
        matches!(self, ApplyOutcome::Applied)
    }
}

/// Whether a run is going on, for the ordering rules.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) enum RunStatus {
    #[default]
    NotStarted,
    Active,
    Finished,
    Cancelled,
    Errored,
}

/// A chat's state: the fold of an agent run's AG-UI event stream.
///
/// It holds the conversation (committed messages, and the messages being streamed, visible
/// mid-stream and committed on their END event), the tool calls built from their streamed
/// arguments and attached to their assistant message with their result once it arrives, the
/// agent's shared state (JSON), the run's [`Phase`] and the [`ChatError`]s the fold surfaced.
/// [`ChatState::apply`] (in `fold.rs`) is the fold.
///
/// ```
/// use agentstate::agui::{ChatState, Event, Phase};
///
/// let mut chat = ChatState::new();
/// chat.apply(&Event::run_started("thread", "run-1"));
/// chat.apply(&Event::text_start("m1"));
/// chat.apply(&Event::text_content("m1", "Hello"));
/// // Visible mid-stream:
/// assert_eq!(chat.messages()[0].text(), "Hello");
/// assert!(chat.messages()[0].is_streaming());
/// assert_eq!(chat.committed_messages().count(), 0);
/// chat.apply(&Event::text_end("m1"));
/// chat.apply(&Event::run_finished("thread", "run-1"));
/// assert_eq!(chat.committed_messages().count(), 1);
/// assert_eq!(chat.phase(), &Phase::Idle);
/// assert!(chat.errors().is_empty());
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct ChatState {
    pub(crate) messages: Vec<ChatMessage>,
    /// Message id -> position of the first message with that id.
    pub(crate) by_id: HashMap<String, usize>,
    /// Tool call id -> (position of the first message holding it, index among its calls).
    pub(crate) by_call: HashMap<String, (usize, usize)>,
    /// Tool call id -> position of the first tool message answering it.
    pub(crate) by_result: HashMap<String, usize>,
    /// The ordering and attribution rules' state: what is open, who owns what.
    pub(crate) order: Order,
    /// The open chunk streams.
    pub(crate) lanes: Lanes,
    /// The names of the running steps, outermost first.
    pub(crate) steps: Vec<String>,
    /// How many events were folded (the index of the next one).
    pub(crate) events_seen: usize,
    pub(crate) agent_state: Value,
    pub(crate) phase: Phase,
    pub(crate) run_info: Option<RunInfo>,
    pub(crate) errors: Vec<ChatError>,
    pub(crate) run_errors_from: usize,
    pub(crate) extras: Map<String, Value>,
}

impl Default for ChatState {
    fn default() -> Self {
        ChatState {
            messages: Vec::new(),
            by_id: HashMap::new(),
            by_call: HashMap::new(),
            by_result: HashMap::new(),
            order: Order::default(),
            lanes: Lanes::default(),
            steps: Vec::new(),
            events_seen: 0,
            agent_state: Value::Object(Map::new()),
            phase: Phase::Idle,
            run_info: None,
            errors: Vec::new(),
            run_errors_from: 0,
            extras: Map::new(),
        }
    }
}

impl ChatState {
    /// An empty chat: no messages, shared state `{}`, idle.
    pub fn new() -> Self {
        ChatState::default()
    }

    /// Starts from an existing conversation (all complete), as a client that loaded a thread.
    pub fn with_messages(mut self, messages: impl IntoIterator<Item = AguiMessage>) -> Self {
        for message in messages {
            self.push_message(ChatMessage::complete(message));
        }
        self
    }

    /// Starts from an existing shared state.
    pub fn with_agent_state(mut self, state: Value) -> Self {
        self.agent_state = state;
        self
    }

    /// Every message, in conversation order, streaming ones included.
    pub fn messages(&self) -> &[ChatMessage] {
        &self.messages
    }

    /// The messages that are not being streamed (complete, or interrupted by an error).
    pub fn committed_messages(&self) -> impl Iterator<Item = &ChatMessage> {
        self.messages.iter().filter(|m| !m.is_streaming())
    }

    /// The messages being streamed right now (usually none or one).
    pub fn streaming_messages(&self) -> impl Iterator<Item = &ChatMessage> {
        self.messages.iter().filter(|m| m.is_streaming())
    }

    /// The first message with this id.
    pub fn message(&self, id: &str) -> Option<&ChatMessage> {
        self.by_id.get(id).map(|&i| &self.messages[i])
    }

    /// A tool call by id, with its message, status and result.
    ///
    /// ```
    /// use agentstate::agui::{ChatState, Event, StreamStatus};
    ///
    /// let mut chat = ChatState::new();
    /// for event in [
    ///     Event::run_started("t", "r"),
    ///     Event::tool_start("c1", "weather", None),
    ///     Event::tool_args("c1", r#"{"city":"#),
    ///     Event::tool_args("c1", r#""Oslo"}"#),
    ///     Event::tool_end("c1"),
    ///     Event::tool_result("res1", "c1", "-3°C"),
    /// ] {
    ///     chat.apply(&event);
    /// }
    /// let call = chat.tool_call("c1").unwrap();
    /// assert_eq!(call.name(), "weather");
    /// assert_eq!(call.arguments(), Some(serde_json::json!({"city": "Oslo"})));
    /// assert_eq!(call.status, StreamStatus::Complete);
    /// assert_eq!(call.result.unwrap().content.text(), "-3°C");
    /// ```
    pub fn tool_call(&self, id: &str) -> Option<ToolCallView<'_>> {
        let &(pos, index) = self.by_call.get(id)?;
        self.view(pos, index)
    }

    /// Every tool call, in conversation order.
    pub fn tool_calls(&self) -> impl Iterator<Item = ToolCallView<'_>> {
        self.messages.iter().enumerate().flat_map(move |(pos, m)| {
            (0..m.tool_calls().len()).filter_map(move |index| self.view(pos, index))
        })
    }

    fn view(&self, pos: usize, index: usize) -> Option<ToolCallView<'_>> {
        let message = self.messages.get(pos)?;
        let call = message.tool_calls().get(index)?;
        let result = self
            .by_result
            .get(&call.id)
            .and_then(|&r| match &self.messages[r].message {
                AguiMessage::Tool(tool) => Some(tool),
                _ => None,
            });
        Some(ToolCallView {
            call,
            message,
            status: message.tool_call_status(index).unwrap_or_default(),
            result,
        })
    }

    /// The agent's shared state, as `STATE_SNAPSHOT` and `STATE_DELTA` built it.
    pub fn agent_state(&self) -> &Value {
        &self.agent_state
    }

    /// Where the run stands.
    pub fn phase(&self) -> &Phase {
        &self.phase
    }

    /// True while a run is going on (phase running or step running).
    pub fn is_running(&self) -> bool {
        matches!(self.phase, Phase::Running | Phase::StepRunning(_))
    }

    /// The current (or last) run: ids, and the result and outcome once it finished.
    pub fn run(&self) -> Option<&RunInfo> {
        self.run_info.as_ref()
    }

    /// The steps running right now, outermost first.
    pub fn active_steps(&self) -> &[String] {
        &self.steps
    }

    /// The latest error of the current (or last) run: the run's own error, a state conflict or
    /// a protocol error. A new `RUN_STARTED` clears it (the history stays in
    /// [`errors`](ChatState::errors)).
    pub fn error(&self) -> Option<&ChatError> {
        self.run_errors().last()
    }

    /// The errors of the current (or last) run, oldest first.
    pub fn run_errors(&self) -> &[ChatError] {
        &self.errors[self.run_errors_from.min(self.errors.len())..]
    }

    /// Every error the fold surfaced, across runs, oldest first.
    pub fn errors(&self) -> &[ChatError] {
        &self.errors
    }

    /// Application data, for user reducers (see [`ComposedReducer`](super::ComposedReducer)).
    /// The default fold never reads or writes it.
    pub fn extras(&self) -> &Map<String, Value> {
        &self.extras
    }

    /// Mutable application data, for user reducers.
    pub fn extras_mut(&mut self) -> &mut Map<String, Value> {
        &mut self.extras
    }

    /// The message list as the official AG-UI TypeScript client holds it after the same
    /// events: assistant messages with `toolCalls`, each tool message right after the
    /// assistant message that owns its call, streaming messages with their text so far, and
    /// numbers as JavaScript holds them (an integral float such as `2.0` in metadata or an
    /// activity's content is the integer `2`; [`messages`](ChatState::messages) keep the
    /// spelling that was read).
    ///
    /// ```
    /// use agentstate::agui::{ChatState, Event};
    /// use serde_json::json;
    ///
    /// let mut chat = ChatState::new();
    /// for event in [
    ///     Event::run_started("t", "r"),
    ///     Event::tool_start("c1", "search", Some("a1".into())),
    ///     Event::tool_args("c1", "{}"),
    ///     Event::tool_end("c1"),
    ///     Event::text_start("a2"),
    ///     Event::text_content("a2", "Searching..."),
    ///     Event::text_end("a2"),
    ///     Event::tool_result("t1", "c1", "3 hits"),
    /// ] {
    ///     chat.apply(&event);
    /// }
    /// assert_eq!(
    ///     serde_json::to_value(chat.to_agui_messages())?,
    ///     json!([
    ///         {"id": "a1", "role": "assistant", "toolCalls": [
    ///             {"id": "c1", "type": "function", "function": {"name": "search", "arguments": "{}"}}]},
    ///         {"id": "t1", "role": "tool", "toolCallId": "c1", "content": "3 hits"},
    ///         {"id": "a2", "role": "assistant", "content": "Searching..."}
    ///     ])
    /// );
    /// # Ok::<(), serde_json::Error>(())
    /// ```
    pub fn to_agui_messages(&self) -> Vec<AguiMessage> {
        self.messages
            .iter()
            .map(|m| {
                let mut message = m.message.clone();
                message.write_numbers_as_javascript();
                message
            })
            .collect()
    }

    /// Appends a message, keeping the indexes. O(1) apart from the message's tool calls.
    pub(crate) fn push_message(&mut self, message: ChatMessage) {
        let pos = self.messages.len();
        self.index_message(pos, &message.message);
        self.messages.push(message);
    }

    /// Inserts a message at `pos`; re-indexes when it is not at the end. O(n) then.
    pub(crate) fn insert_message(&mut self, pos: usize, message: ChatMessage) {
        if pos >= self.messages.len() {
            self.push_message(message);
        } else {
            self.messages.insert(pos, message);
            self.reindex();
        }
    }

    fn index_message(&mut self, pos: usize, message: &AguiMessage) {
        self.by_id.entry(message.id().to_owned()).or_insert(pos);
        for (index, call) in message.tool_calls().iter().enumerate() {
            self.by_call.entry(call.id.clone()).or_insert((pos, index));
        }
        if let AguiMessage::Tool(tool) = message {
            self.by_result
                .entry(tool.tool_call_id.clone())
                .or_insert(pos);
        }
    }

    /// Rebuilds every index from the message list. O(n).
    pub(crate) fn reindex(&mut self) {
        self.by_id.clear();
        self.by_call.clear();
        self.by_result.clear();
        let messages = std::mem::take(&mut self.messages);
        for (pos, message) in messages.iter().enumerate() {
            self.index_message(pos, &message.message);
        }
        self.messages = messages;
    }
}
