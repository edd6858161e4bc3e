//! AG-UI (protocol 1.0): a chat's state as the pure fold of an agent run's event stream, and
//! the server side that streams a typed state to an AG-UI front end. Behind the `ag-ui` feature.
//!
//! - [`event`]: every AG-UI event as a serde type ([`Event`]); unknown event types are kept raw.
//! - [`message`]: AG-UI messages ([`AguiMessage`]) as they travel and as the official client
//!   holds them.
//! - [`ChatState`]: committed and streaming messages, tool calls with their results, the shared
//!   agent state, the run's [`Phase`], and the [`ChatError`]s surfaced on the way.
//! - [`fold()`](fn@fold) / [`ChatState::apply`]: the fold, `(ChatState, &Event) -> ChatState`, wire
//!   compatible with the official TypeScript client (event metadata, subagent attribution, chunk
//!   streams per subagent, its ordering rules); `apply` returns the event's [`Outcome`];
//!   [`Timeline`] keeps every state for time travel.
//! - [`ComposedReducer`]: the default fold, then your reducers (for `CUSTOM` events).
//! - [`server`]: `STATE_SNAPSHOT` / `STATE_DELTA` from a [`State`](crate::State) and an update.
//! - [`convert`]: AG-UI messages to and from agentstate's [`Message`](crate::message::Message).
//!
//! ## Compatibility with the official client
//!
//! [`ChatState::to_agui_messages`] gives the message list the official TypeScript client
//! (`@ag-ui/client` 1.0.0) holds after the same events, corners included:
//!
//! - **Event metadata** is kept where that client keeps it: text and reasoning START / CONTENT /
//!   END merge theirs into the message, tool-call START / ARGS / END into the tool call
//!   (`toolCalls[].metadata`), `TOOL_CALL_RESULT` and `ACTIVITY_*` into the message they build;
//!   key by key, the last write winning. A message created by an event attributed to a subagent
//!   keeps its `subagentRunId`.
//! - **Chunks** (`*_CHUNK`) expand to START / CONTENT / END, with one open chunk stream per
//!   subagent; an event closes only its own agent's stream (run events and `MESSAGES_SNAPSHOT`
//!   close all).
//! - **Ordering and attribution** are checked as the client's verifier checks them (first event
//!   `RUN_STARTED`, no CONTENT without its START, no `RUN_FINISHED` while anything is open, a
//!   continuation may not name another subagent than its opener, a tool call belongs to its
//!   parent message's agent, subagents start and finish once).
//! - **Shared state**: `STATE_SNAPSHOT` replaces it; `STATE_DELTA` (RFC 6902) patches all or
//!   nothing, in place, in O(delta). `test` operations compare numbers by value (RFC 6902
//!   §4.6): `2.0` passes a test for `2`.
//!
//! [`ChatState::apply`] returns what it did with the event, an [`Outcome`]: `Applied`,
//! `Ignored(ProtocolError)` (the event broke a rule; nothing changed), `Dropped(ProtocolError)`
//! (accepted, but its content had nowhere to go, as the client drops it with a warning) or
//! `Conflict(StateConflict)` (a delta that cannot apply: the state is unchanged, and the
//! conflict holds the patch and the state it failed against). Every error also lands in
//! [`ChatState::errors`] with `event_index`, the event's position in the stream.
//!
//! Deliberate departures from the official client: typed errors and `StateConflict`s; an event
//! that breaks a rule is ignored (the rest of the stream folds as if it had not been sent) where
//! the client aborts the run; and the shared state keeps the spelling its numbers were read with
//! (`2.0` stays `2.0` in [`ChatState::agent_state`], where the client, whose numbers are all
//! doubles, holds `2`). `to_agui_messages()` writes numbers as the client does, so its JSON equals
//! the client's exactly.
//!
//! The fixtures in `examples/data/` carry the official client's result beside each stream (how
//! they were made and how to check fresh random streams: `examples/data/README.md`), and the
//! tests compare messages, shared state and the events ignored.
//!
//! ```
//! use agentstate::agui::{ChatError, ChatState, Event, Phase};
//!
//! let events = Event::parse_array(r#"[
//!   {"type": "RUN_STARTED", "threadId": "t", "runId": "r"},
//!   {"type": "STATE_SNAPSHOT", "snapshot": {"todos": []}},
//!   {"type": "TEXT_MESSAGE_CHUNK", "messageId": "m1", "delta": "On it."},
//!   {"type": "STATE_DELTA", "delta": [{"op": "add", "path": "/todos/-", "value": "buy milk"}]},
//!   {"type": "STATE_DELTA", "delta": [{"op": "test", "path": "/todos/0", "value": "walk dog"}]},
//!   {"type": "RUN_FINISHED", "threadId": "t", "runId": "r"}
//! ]"#)?;
//! let mut chat = ChatState::new();
//! for event in &events {
//!     chat.apply(event);
//! }
//! assert_eq!(chat.messages()[0].text(), "On it.");
//! assert_eq!(chat.agent_state()["todos"][0], "buy milk");
//! // The failing delta left the state alone and says so.
//! let Some(ChatError::StateConflict(conflict)) = chat.error() else { panic!("no conflict") };
//! assert_eq!(conflict.state, serde_json::json!({"todos": ["buy milk"]}));
//! assert_eq!(chat.phase(), &Phase::Idle);
//! # Ok::<(), serde_json::Error>(())
//! ```
//!
//! Streaming text is visible mid-stream, and a rule broken says which event broke it:
//!
//! ```
//! use agentstate::agui::{ChatState, Event, Outcome};
//!
//! let mut chat = ChatState::new();
//! for event in [Event::run_started("t", "r"), Event::text_start("m"), Event::text_content("m", "Hi")] {
//!     assert!(chat.apply(&event).is_applied());
//! }
//! assert!(chat.messages()[0].is_streaming());
//! assert_eq!(chat.messages()[0].text(), "Hi");
//! // A CONTENT for a message that is not open is ignored.
//! let Outcome::Ignored(error) = chat.apply(&Event::text_content("x", "?")) else { panic!() };
//! assert_eq!(error.event_index, 3);
//! ```

pub mod chat;
mod chunks;
pub mod compose;
pub mod convert;
pub mod event;
pub mod fold;
pub mod message;
mod order;
mod patch;
pub mod server;

pub use chat::{
    ChatError, ChatMessage, ChatState, Outcome, Phase, ProtocolError, RunError, RunInfo,
    StateConflict, StreamStatus, ToolCallView,
};
pub use compose::{ComposedReducer, DefaultReducer, EventReducer};
pub use event::Event;
pub use fold::{fold, fold_all, Timeline};
pub use message::{AguiMessage, AguiRole, AguiToolCall};
pub use server::{StateStream, StreamError};

/// The `json-patch` crate the fold applies `STATE_DELTA`s with, re-exported to build and inspect
/// patches with the same version.
pub use json_patch;
