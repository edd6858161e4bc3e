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
