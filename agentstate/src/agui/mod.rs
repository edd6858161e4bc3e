//! AG-UI (protocol 1.0): a chat's state as the pure fold of an agent run's event stream, and
//! the server side that streams a typed state to an AG-UI front end. Behind the `ag-ui` feature.
//!
//! - [Events](#events): every AG-UI event as a serde type ([`Event`], and one `*Event` struct
//!   per type, such as [`TextMessageContentEvent`]); unknown event types are kept raw.
//! - [Messages](#messages): AG-UI messages ([`AguiMessage`]) as they travel and as the official
//!   client holds them.
//! - [`ChatState`]: committed and streaming messages, tool calls with their results, the shared
//!   agent state, the run's [`Phase`], and the [`ChatError`]s surfaced on the way.
//! - [`fold()`](fn@fold) / [`ChatState::apply`]: the fold, `(ChatState, &Event) -> ChatState`, wire
//!   compatible with the official TypeScript client (event metadata, subagent attribution, chunk
//!   streams per subagent, its ordering rules); `apply` returns the event's [`ApplyOutcome`];
//!   [`Timeline`] keeps every state for time travel.
//! - [`ComposedReducer`]: the default fold, then your reducers (for `CUSTOM` events).
//! - [The server side](#the-server-side): `STATE_SNAPSHOT` / `STATE_DELTA` from a
//!   [`State`](crate::State) and an update ([`state_snapshot`], [`state_delta`],
//!   [`merge_with_events`], [`StateStream`]).
//! - [`RunAgentInput`]: what a client sends to start a run (its thread, messages, state, tools
//!   [`AguiTool`], context, and `resume` answers [`ResumeEntry`]).
//! - [Converting messages](#converting-messages): AG-UI messages to and from agentstate's
//!   [`Message`](crate::message::Message) ([`to_agui`], [`from_agui`]).
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
//! [`ChatState::apply`] returns what it did with the event, an [`ApplyOutcome`]: `Applied`,
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
//! use agentstate::agui::{ApplyOutcome, ChatState, Event};
//!
//! let mut chat = ChatState::new();
//! for event in [Event::run_started("t", "r"), Event::text_start("m"), Event::text_content("m", "Hi")] {
//!     assert!(chat.apply(&event).is_applied());
//! }
//! assert!(chat.messages()[0].is_streaming());
//! assert_eq!(chat.messages()[0].text(), "Hi");
//! // A CONTENT for a message that is not open is ignored.
//! let ApplyOutcome::Ignored(error) = chat.apply(&Event::text_content("x", "?")) else { panic!() };
//! assert_eq!(error.event_index, 3);
//! ```
//!
//! ## Events
//!
//! Every AG-UI 1.0 event as a serde type: camelCase fields, `type` in SCREAMING_SNAKE_CASE.
//!
//! An event whose `type` this crate does not know is kept whole as [`Event::Unknown`] rather
//! than rejected, and fields an event does not declare are ignored, so a newer server does not
//! break an older client. An event of a known type with a missing or mistyped required field is
//! a parse error naming the field.
//!
//! ```
//! use agentstate::agui::Event;
//!
//! let event: Event = serde_json::from_str(
//!     r#"{"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":"Hel","timestamp":1700000000000}"#,
//! )?;
//! assert_eq!(event.event_type(), "TEXT_MESSAGE_CONTENT");
//! let Event::TextMessageContent(content) = &event else { unreachable!() };
//! assert_eq!(content.delta, "Hel");
//!
//! let future: Event = serde_json::from_str(r#"{"type":"HOLOGRAM_START","beam":1}"#)?;
//! assert!(matches!(future, Event::Unknown(_)));
//! assert_eq!(future.event_type(), "HOLOGRAM_START");
//! # Ok::<(), serde_json::Error>(())
//! ```
//!
//! ## Messages
//!
//! AG-UI messages as the protocol puts them on the wire (`MESSAGES_SNAPSHOT`, a run's input) and
//! as the official client holds them: tagged by `role`, camelCase fields.
//!
//! ```
//! use agentstate::agui::AguiMessage;
//!
//! let json = r#"{"id":"a1","role":"assistant","content":"Let me look.",
//!   "toolCalls":[{"id":"c1","type":"function","function":{"name":"search","arguments":"{\"q\":\"rust\"}"}}]}"#;
//! let message: AguiMessage = serde_json::from_str(json)?;
//! assert_eq!(message.id(), "a1");
//! assert_eq!(message.text(), "Let me look.");
//! let AguiMessage::Assistant(assistant) = &message else { unreachable!() };
//! assert_eq!(assistant.tool_calls.as_ref().unwrap()[0].function.name, "search");
//! # Ok::<(), serde_json::Error>(())
//! ```
//!
//! ## Converting messages
//!
//! Conversions between agentstate's (AgentFlow's) [`Message`](crate::message::Message) and AG-UI messages.
//!
//! | AgentFlow | AG-UI |
//! |---|---|
//! | `user` / `system` message | `user` / `system` message with the text blocks' text |
//! | `assistant` message | `assistant` message: text blocks as `content`, `tools_calls` (or, when absent, `tool_call` blocks) as `toolCalls` |
//! | `tool` message | one `tool` message per `tool_result` block: `toolCallId` = `call_id`, `content` = the output (a string as is, other JSON written as AgentFlow writes it), `error` when `is_error` |
//!
//! Back from AG-UI, a `developer` message becomes a `system` message and a `reasoning` message an
//! `assistant` message holding one reasoning block, both marked with
//! `metadata["ag_ui_role"]` so that converting back restores the AG-UI role; an `activity`
//! message has no AgentFlow counterpart and converts to `None`. A tool message's error becomes
//! `is_error`, status `failed`, and `metadata["ag_ui_error"]`.
//!
//! What does not survive the trip: integer ids become strings (`1` and `"1"` meet); media,
//! annotation and error blocks, `reasoning`, `usages`, `raw` and `parsed_content` have no AG-UI
//! field and are left out; multimodal AG-UI content parts other than text are left out. Messages
//! converted from AG-UI carry no timestamp (the conversion is a pure function).
//!
//! ```
//! use agentstate::agui::{from_agui, to_agui};
//! use agentstate::message::{Message, Role, ToolCall};
//! use serde_json::json;
//!
//! let asked = Message::text_message("Checking.", Role::Assistant)
//!     .with_id("a1")
//!     .with_tool_calls(vec![ToolCall::new("c1", "weather", json!({"city": "Oslo"}))]);
//! let agui = to_agui(&asked);
//! assert_eq!(
//!     serde_json::to_value(&agui)?,
//!     json!([{"id": "a1", "role": "assistant", "content": "Checking.", "toolCalls": [
//!         {"id": "c1", "type": "function", "function": {"name": "weather", "arguments": "{\"city\": \"Oslo\"}"}}]}])
//! );
//! let back = from_agui(&agui[0]).unwrap();
//! assert_eq!((back.role, back.text()), (Role::Assistant, "Checking.".to_owned()));
//! assert_eq!(back.tool_calls(), asked.tool_calls());
//!
//! let answered = Message::tool_result("c1", json!({"temp_c": -3})).with_id("t1");
//! assert_eq!(
//!     serde_json::to_value(to_agui(&answered))?,
//!     json!([{"id": "t1", "role": "tool", "toolCallId": "c1", "content": "{\"temp_c\": -3}"}])
//! );
//! # Ok::<(), serde_json::Error>(())
//! ```
//!
//! ## The server side
//!
//! The server side: stream a typed agent state to an AG-UI front end.
//!
//! A Rust agent merges its nodes' updates into a [`State`](crate::State); each merge becomes a `STATE_DELTA`
//! (the RFC 6902 patch from the state's JSON before to its JSON after), and a `STATE_SNAPSHOT`
//! carries the whole state when a client (re)connects. Folding those events on the client
//! ([`ChatState`]) reproduces the server's state exactly.
//!
//! ## The fold
//!
//! The fold: `(ChatState, &Event) -> ChatState`, a pure function of the state and the event.
//!
//! [`fold`](fn@fold) takes the state by value and returns the next one; [`ChatState::apply`] is the same
//! step in place. Neither does I/O or reads anything but its arguments, so the same events
//! always give the same state, and a run can be replayed and stepped through ([`Timeline`]).
//!
//! What each event does follows the official AG-UI client (`@ag-ui/client` 1.0: its
//! `transformChunks`, `verifyEvents` and `defaultApplyEvents`), with three differences the seed
//! asks for: a `STATE_DELTA` that cannot apply surfaces a [`StateConflict`] instead of a console
//! warning; a `RUN_ERROR` puts a typed error on the state; and an event that breaks the
//! ordering or attribution rules (see `order.rs`) is ignored with a [`ProtocolError`] on the
//! state, where the official client aborts the whole stream. An ignored event changes nothing
//! else: the stream folds exactly as if it had not been sent. [`ChatState::apply`] returns an
//! [`ApplyOutcome`] saying which of these happened, and every error carries the index of its event.
//!
//! Streaming costs O(delta): `TEXT_MESSAGE_CONTENT` and `TOOL_CALL_ARGS` find their message
//! through a hash index and append to its `String`.

mod chat;
mod chunks;
mod compose;
mod convert;
mod event;
mod fold;
mod input;
mod message;
mod order;
mod patch;
mod server;

pub use chat::{
    AgentRunError, ApplyOutcome, ChatError, ChatMessage, ChatState, Phase, ProtocolError, RunInfo,
    StateConflict, StreamStatus, ToolCallView,
};
pub use compose::{ComposedReducer, DefaultReducer, EventReducer};
pub use convert::{from_agui, messages_from_agui, messages_to_agui, to_agui, ERROR_KEY, ROLE_KEY};
pub use event::{
    ActivityDeltaEvent, ActivitySnapshotEvent, CustomEvent, EncryptedValueSubtype, Event,
    EventBase, MessagesSnapshotEvent, RawEvent, ReasoningEncryptedValueEvent, ReasoningEndEvent,
    ReasoningMessageChunkEvent, ReasoningMessageContentEvent, ReasoningMessageEndEvent,
    ReasoningMessageStartEvent, ReasoningStartEvent, RunErrorEvent, RunFinishedEvent, RunOutcome,
    RunStartedEvent, StateDeltaEvent, StateSnapshotEvent, StepFinishedEvent, StepStartedEvent,
    SubagentErrorEvent, SubagentFinishedEvent, SubagentStartedEvent, TextMessageChunkEvent,
    TextMessageContentEvent, TextMessageEndEvent, TextMessageStartEvent, ToolCallArgsEvent,
    ToolCallChunkEvent, ToolCallEndEvent, ToolCallResultEvent, ToolCallStartEvent, EVENT_TYPES,
};
pub use fold::{fold, fold_all, Timeline};
pub use input::{AguiContext, AguiTool, ResumeEntry, ResumeStatus, RunAgentInput};
pub use message::{
    ActivityMessage, AguiFunctionCall, AguiMessage, AguiRole, AguiToolCall, AssistantMessage,
    DeveloperMessage, MessageContent, ReasoningMessage, SystemMessage, TextRole, ToolMessage,
    UserMessage,
};
pub use server::{
    merge_with_events, message_events, state_delta, state_snapshot, OpenStreams, StateEvents,
    StateStream, StateStreamError,
};

/// The `json-patch` crate the fold applies `STATE_DELTA`s with, re-exported to build and inspect
/// patches with the same version.
pub use json_patch;
