//! The server side: stream a typed agent state to an AG-UI front end.

use super::event::Event;
use super::message::{AguiMessage, MessageContent};
use crate::state::State;
use serde::Serialize;
use serde_json::Value;
use std::collections::HashSet;

/// Why state events could not be produced.
#[derive(Debug, thiserror::Error)]
pub enum StateStreamError {
    /// The update did not merge (the state is unchanged).
    // Not named `Merge`: a second item of that name in the crate graph makes rustc print the
    // `Merge` reducer by its full path in the derive's diagnostics (tests/ui).
    #[error("the update could not be merged: {0}")]
    Update(#[from] crate::Error),
    /// The state does not serialize to JSON (for example a map with non-string keys).
    #[error("the state could not be serialized to JSON: {0}")]
    Serialize(#[from] serde_json::Error),
}

/// A `STATE_SNAPSHOT` of `state`.
pub fn state_snapshot<S: Serialize + ?Sized>(state: &S) -> Result<Event, serde_json::Error> {
    Ok(Event::state_snapshot(serde_json::to_value(state)?))
}

/// The `STATE_DELTA` that takes `old` to `new`: a JSON Patch computed by `json_patch::diff`.
///
/// ```
/// use agentstate::agui::{state_delta, Event};
/// use serde_json::json;
///
/// let Event::StateDelta(delta) = state_delta(&json!({"n": 1, "tags": []}), &json!({"n": 2, "tags": ["a"]})) else {
///     unreachable!()
/// };
/// assert_eq!(delta.delta, vec![
///     json!({"op": "replace", "path": "/n", "value": 2}),
///     json!({"op": "add", "path": "/tags/0", "value": "a"}),
/// ]);
/// ```
pub fn state_delta(old: &Value, new: &Value) -> Event {
    let patch = json_patch::diff(old, new);
    Event::state_delta(
        patch
            .0
            .iter()
            // A patch operation is plain JSON: serializing it cannot fail.
            .filter_map(|op| serde_json::to_value(op).ok())
            .collect(),
    )
}

/// The events describing one merge.
#[derive(Debug, Clone, PartialEq)]
pub struct StateEvents {
    /// `STATE_DELTA` from the state before the merge to the state after.
    pub delta: Event,
    /// `STATE_SNAPSHOT` of the state after the merge.
    pub snapshot: Event,
}

/// Merges `update` into `state` and returns the `STATE_DELTA` and `STATE_SNAPSHOT` describing
/// it. Serializes the state twice; to stream many updates, [`StateStream`] keeps the last JSON
/// sent instead.
///
/// On a merge error the state is unchanged. If the merged state cannot be serialized, the merge
/// stays and the error is returned.
///
/// ```
/// use agentstate::agui::{merge_with_events, ChatState, Event};
/// use agentstate::state::{AgentState, AgentStateUpdate};
///
/// let mut state = AgentState::default();
/// let events = merge_with_events(
///     &mut state,
///     AgentStateUpdate::default().context_summary(Some("greeting".to_owned())),
/// )?;
/// let mut client = ChatState::new().with_agent_state(serde_json::to_value(AgentState::default())?);
/// client.apply(&Event::run_started("t", "r"));
/// client.apply(&events.delta);
/// assert_eq!(client.agent_state(), &serde_json::to_value(&state)?);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn merge_with_events<S: State + Serialize>(
    state: &mut S,
    update: S::Update,
) -> Result<StateEvents, StateStreamError> {
    let before = serde_json::to_value(&*state)?;
    state.merge(update)?;
    let after = serde_json::to_value(&*state)?;
    Ok(StateEvents {
        delta: state_delta(&before, &after),
        snapshot: Event::state_snapshot(after),
    })
}

/// A typed state and the JSON last sent for it: each [`update`](StateStream::update) merges and
/// returns the `STATE_DELTA` from what the client has to the new state.
///
/// ```
/// use agentstate::agui::{ChatState, Event, StateStream};
/// use agentstate::message::{Message, Role};
/// use agentstate::state::{AgentState, AgentStateUpdate};
///
/// let mut server = StateStream::new(AgentState::default())?;
/// let mut client = ChatState::new();
/// client.apply(&Event::run_started("thread", "run"));
/// client.apply(&server.snapshot());
/// for text in ["Hi", "How can I help?"] {
///     let message = Message::text_message(text, Role::Assistant);
///     client.apply(&server.update(AgentStateUpdate::default().context(vec![message]))?);
/// }
/// assert_eq!(client.agent_state(), server.json());
/// assert_eq!(server.state().context.len(), 2);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone)]
pub struct StateStream<S> {
    state: S,
    sent: Value,
}

impl<S: State + Serialize> StateStream<S> {
    /// Starts streaming `state`.
    pub fn new(state: S) -> Result<Self, serde_json::Error> {
        let sent = serde_json::to_value(&state)?;
        Ok(StateStream { state, sent })
    }

    /// A `STATE_SNAPSHOT` of the state, for a client that (re)connects.
    pub fn snapshot(&self) -> Event {
        Event::state_snapshot(self.sent.clone())
    }

    /// Merges `update` and returns the `STATE_DELTA` from the last JSON sent to the new state.
    /// On a merge error nothing changes. If the new state cannot be serialized, the merge stays
    /// and the next successful update's delta covers it (deltas always start from what was
    /// sent).
    pub fn update(&mut self, update: S::Update) -> Result<Event, StateStreamError> {
        self.state.merge(update)?;
        let now = serde_json::to_value(&self.state)?;
        let delta = state_delta(&self.sent, &now);
        self.sent = now;
        Ok(delta)
    }

    /// The typed state.
    pub fn state(&self) -> &S {
        &self.state
    }

    /// The state's JSON as the client has it after every event produced so far.
    pub fn json(&self) -> &Value {
        &self.sent
    }

    /// The typed state, ending the stream.
    pub fn into_inner(self) -> S {
        self.state
    }
}

/// Appends to `out` the events that give a client `message`, which it does not have yet, as a
/// stream would have given it: an assistant message's text as `TEXT_MESSAGE_START` / `CONTENT`
/// / `END` (unless `streamed` holds the message's id: its text was streamed already), its tool
/// calls (those whose ids `streamed` does not hold) as `TOOL_CALL_START` / `ARGS` / `END` with
/// the message as their parent, a tool message as `TOOL_CALL_RESULT`. A message no event
/// carries (user, system, developer, reasoning, activity) adds nothing and returns `false`: a
/// `MESSAGES_SNAPSHOT` gives it.
///
/// ```
/// use agentstate::agui::{message_events, AguiMessage, ChatState, Event};
/// use std::collections::HashSet;
///
/// let answer: AguiMessage = serde_json::from_value(serde_json::json!({
///     "id": "a1", "role": "assistant", "content": "Let me check.",
///     "toolCalls": [{"id": "c1", "type": "function", "function": {"name": "weather", "arguments": "{}"}}]
/// }))?;
/// let mut events = vec![Event::run_started("t", "r")];
/// assert!(message_events(answer.clone(), &HashSet::new(), &mut events));
/// let mut chat = ChatState::new();
/// for event in &events {
///     assert!(chat.apply(event).is_applied());
/// }
/// assert_eq!(chat.to_agui_messages(), vec![answer]);
/// # Ok::<(), serde_json::Error>(())
/// ```
pub fn message_events(
    message: AguiMessage,
    streamed: &HashSet<String>,
    out: &mut Vec<Event>,
) -> bool {
    match message {
        AguiMessage::Assistant(m) => {
            let text = m.content.unwrap_or_default();
            if !streamed.contains(&m.id) && !text.is_empty() {
                out.push(Event::text_start(&m.id));
                out.push(Event::text_content(&m.id, text));
                out.push(Event::text_end(&m.id));
            }
            for call in m.tool_calls.unwrap_or_default() {
                if streamed.contains(&call.id) {
                    continue;
                }
                out.push(Event::tool_start(
                    &call.id,
                    &call.function.name,
                    Some(m.id.clone()),
                ));
                out.push(Event::tool_args(&call.id, call.function.arguments));
                out.push(Event::tool_end(&call.id));
            }
            true
        }
        AguiMessage::Tool(m) => {
            out.push(Event::tool_result(
                m.id,
                m.tool_call_id,
                MessageContent::Text(m.content.text().into_owned()),
            ));
            true
        }
        _ => false,
    }
}

/// What a server has streamed to an AG-UI client of the text messages and tool calls its
/// nodes (or any owners: subagents, branches) produce piece by piece: the first piece of a
/// message or call starts it (`TEXT_MESSAGE_START`, `TOOL_CALL_START` under its message), each
/// piece is a `TEXT_MESSAGE_CONTENT` or `TOOL_CALL_ARGS`, and [`close`](OpenStreams::close)
/// ends what an owner (or everyone) left open. The ids streamed are what
/// [`message_events`] skips when the whole message arrives.
///
/// ```
/// use agentstate::agui::{ChatState, Event, OpenStreams};
///
/// let mut streams = OpenStreams::default();
/// let mut events = vec![Event::run_started("t", "r")];
/// streams.text("writer", "m1", "Hel", &mut events);
/// streams.tool_call("planner", "m2", "c1", "search", "{\"q\":", &mut events);
/// streams.text("writer", "m1", "lo", &mut events);
/// streams.close(Some("writer"), &mut events); // the writer is done: m1 ends, c1 stays open
/// streams.tool_call("planner", "m2", "c1", "search", "\"rust\"}", &mut events);
/// streams.close(None, &mut events);
/// events.push(Event::run_finished("t", "r"));
///
/// let mut chat = ChatState::new();
/// for event in &events {
///     assert!(chat.apply(event).is_applied(), "{event:?}");
/// }
/// assert_eq!(chat.messages()[0].text(), "Hello");
/// assert!(streams.streamed().contains("c1"));
/// ```
#[derive(Debug, Clone, Default)]
pub struct OpenStreams {
    streamed: HashSet<String>,
    /// Open ones, in the order they started: owner, id, whether a tool call.
    open: Vec<(String, String, bool)>,
}

impl OpenStreams {
    /// A piece of text message `message_id`, from `owner`.
    pub fn text(&mut self, owner: &str, message_id: &str, delta: &str, out: &mut Vec<Event>) {
        if self.streamed.insert(message_id.to_owned()) {
            out.push(Event::text_start(message_id));
            self.open
                .push((owner.to_owned(), message_id.to_owned(), false));
        }
        out.push(Event::text_content(message_id, delta));
    }

    /// A piece of the arguments of call `tool_call_id` of tool `name`, which message
    /// `message_id` makes, from `owner`.
    pub fn tool_call(
        &mut self,
        owner: &str,
        message_id: &str,
        tool_call_id: &str,
        name: &str,
        delta: &str,
        out: &mut Vec<Event>,
    ) {
        if self.streamed.insert(tool_call_id.to_owned()) {
            out.push(Event::tool_start(
                tool_call_id,
                name,
                Some(message_id.to_owned()),
            ));
            self.open
                .push((owner.to_owned(), tool_call_id.to_owned(), true));
        }
        out.push(Event::tool_args(tool_call_id, delta));
    }

    /// Ends (`TEXT_MESSAGE_END`, `TOOL_CALL_END`) what `owner` left open; with `None`,
    /// everything open.
    pub fn close(&mut self, owner: Option<&str>, out: &mut Vec<Event>) {
        self.open.retain(|(by, id, tool)| {
            if owner.is_some_and(|o| o != by) {
                return true;
            }
            out.push(if *tool {
                Event::tool_end(id)
            } else {
                Event::text_end(id)
            });
            false
        });
    }

    /// Forgets what is open without ending it (a run that failed: AG-UI has no event to
    /// withdraw it, and a client marks it cut short).
    pub fn forget(&mut self) {
        self.open.clear();
    }

    /// The ids of the text messages and tool calls streamed so far.
    pub fn streamed(&self) -> &HashSet<String> {
        &self.streamed
    }
}
