//! Every AG-UI 1.0 event as a serde type: camelCase fields, `type` in SCREAMING_SNAKE_CASE.

use super::input::RunAgentInput;
use super::message::{AguiMessage, MessageContent, TextRole};
use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Number, Value};

/// The fields every event may carry.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EventBase {
    /// When the event was produced (milliseconds since the epoch, by convention).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timestamp: Option<Number>,
    /// The event this one was translated from, for debugging.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw_event: Option<Value>,
    /// Free-form metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Map<String, Value>>,
    /// The subagent invocation that produced the event, when a subagent did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subagent_run_id: Option<String>,
}

macro_rules! event_struct {
    ($(#[$doc:meta])* $name:ident { $($(#[$fdoc:meta])* $field:ident : $ty:ty),* $(,)? }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
        #[serde(rename_all = "camelCase")]
        pub struct $name {
            $($(#[$fdoc])* pub $field: $ty,)*
            /// The fields every event may carry.
            #[serde(flatten)]
            pub base: EventBase,
        }
    };
}

event_struct!(
    /// `RUN_STARTED`: a run begins. Its `input`, when present, carries the run's messages.
    RunStartedEvent {
        /// The conversation thread.
        thread_id: String,
        /// The run.
        run_id: String,
        /// The run this one was started from.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        parent_run_id: Option<String>,
        /// The protocol version the server speaks.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        protocol_version: Option<String>,
        /// The input the run was started with (boxed: it is large and rare).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        input: Option<Box<RunAgentInput>>,
    }
);

event_struct!(
    /// `RUN_FINISHED`: the run ended normally (or was interrupted or cancelled, by `outcome`).
    RunFinishedEvent {
        /// The conversation thread.
        thread_id: String,
        /// The run.
        run_id: String,
        /// The run's result.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        result: Option<Value>,
        /// How the run ended.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        outcome: Option<RunOutcome>,
        /// Token usage reports.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        usage: Option<Vec<Value>>,
    }
);

event_struct!(
    /// `RUN_ERROR`: the run failed.
    RunErrorEvent {
        /// What went wrong.
        message: String,
        /// A machine-readable error code.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        code: Option<String>,
        /// Token usage reports.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        usage: Option<Vec<Value>>,
    }
);

event_struct!(
    /// `STEP_STARTED`: a named step of the run begins.
    StepStartedEvent {
        /// The step.
        step_name: String,
    }
);

event_struct!(
    /// `STEP_FINISHED`: a named step ends.
    StepFinishedEvent {
        /// The step.
        step_name: String,
    }
);

event_struct!(
    /// `TEXT_MESSAGE_START`: a streamed text message begins (role assistant unless given).
    TextMessageStartEvent {
        /// The message id.
        message_id: String,
        /// Who writes it; `None` means assistant.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        role: Option<TextRole>,
        /// An optional author name.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        name: Option<String>,
    }
);

event_struct!(
    /// `TEXT_MESSAGE_CONTENT`: a piece of an open text message.
    TextMessageContentEvent {
        /// The message id.
        message_id: String,
        /// The text to append.
        delta: String,
    }
);

event_struct!(
    /// `TEXT_MESSAGE_END`: the text message is complete.
    TextMessageEndEvent {
        /// The message id.
        message_id: String,
    }
);

event_struct!(
    /// `TEXT_MESSAGE_CHUNK`: shorthand that expands to START / CONTENT / END (see the fold).
    TextMessageChunkEvent {
        /// The message id; continuation chunks may omit it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        message_id: Option<String>,
        /// Who writes it; `None` means assistant.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        role: Option<TextRole>,
        /// The text to append.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        delta: Option<String>,
        /// An optional author name.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        name: Option<String>,
    }
);

event_struct!(
    /// `TOOL_CALL_START`: a tool call begins, attached to `parent_message_id` when given.
    ToolCallStartEvent {
        /// The call id.
        tool_call_id: String,
        /// The tool's name.
        tool_call_name: String,
        /// The assistant message the call belongs to.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        parent_message_id: Option<String>,
    }
);

event_struct!(
    /// `TOOL_CALL_ARGS`: a piece of the call's JSON arguments.
    ToolCallArgsEvent {
        /// The call id.
        tool_call_id: String,
        /// The argument text to append.
        delta: String,
    }
);

event_struct!(
    /// `TOOL_CALL_END`: the call's arguments are complete.
    ToolCallEndEvent {
        /// The call id.
        tool_call_id: String,
    }
);

event_struct!(
    /// `TOOL_CALL_CHUNK`: shorthand that expands to START / ARGS / END (see the fold).
    ToolCallChunkEvent {
        /// The call id; continuation chunks may omit it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tool_call_id: Option<String>,
        /// The tool's name (required on the first chunk of a call).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tool_call_name: Option<String>,
        /// The assistant message the call belongs to.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        parent_message_id: Option<String>,
        /// The argument text to append.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        delta: Option<String>,
    }
);

event_struct!(
    /// `TOOL_CALL_RESULT`: the tool's result, as a tool message.
    ToolCallResultEvent {
        /// The id of the tool message that carries the result.
        message_id: String,
        /// The call this answers.
        tool_call_id: String,
        /// The result.
        content: MessageContent,
        /// Always `"tool"` when present.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        role: Option<String>,
    }
);

event_struct!(
    /// `STATE_SNAPSHOT`: the agent's whole shared state.
    StateSnapshotEvent {
        /// The new state.
        snapshot: Value,
    }
);

event_struct!(
    /// `STATE_DELTA`: an RFC 6902 JSON Patch against the shared state. The operations are kept
    /// as JSON so that a malformed one reaches the fold (and surfaces as a conflict) instead of
    /// failing the whole stream's parse.
    StateDeltaEvent {
        /// The patch operations.
        delta: Vec<Value>,
    }
);

event_struct!(
    /// `MESSAGES_SNAPSHOT`: the conversation as the server holds it.
    MessagesSnapshotEvent {
        /// The messages.
        messages: Vec<AguiMessage>,
    }
);

event_struct!(
    /// `ACTIVITY_SNAPSHOT`: creates or replaces an activity message.
    ActivitySnapshotEvent {
        /// The activity message's id.
        message_id: String,
        /// What kind of activity it is.
        activity_type: String,
        /// The activity's data.
        content: Value,
        /// Whether to replace an existing message with this id (default true).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        replace: Option<bool>,
    }
);

event_struct!(
    /// `ACTIVITY_DELTA`: an RFC 6902 JSON Patch against an activity message's content.
    ActivityDeltaEvent {
        /// The activity message's id.
        message_id: String,
        /// What kind of activity it is.
        activity_type: String,
        /// The patch operations.
        patch: Vec<Value>,
    }
);

event_struct!(
    /// `RAW`: an event from another system, passed through.
    RawEvent {
        /// The original event.
        event: Value,
        /// Where it came from.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        source: Option<String>,
    }
);

event_struct!(
    /// `CUSTOM`: an application-defined event, for user reducers.
    CustomEvent {
        /// The custom event's name.
        name: String,
        /// Its payload.
        value: Value,
    }
);

event_struct!(
    /// `REASONING_START`: a reasoning span begins.
    ReasoningStartEvent {
        /// The span id.
        message_id: String,
    }
);

event_struct!(
    /// `REASONING_MESSAGE_START`: a streamed reasoning message begins.
    ReasoningMessageStartEvent {
        /// The message id.
        message_id: String,
        /// Always `"reasoning"`.
        #[serde(default = "reasoning_role")]
        role: String,
    }
);

fn reasoning_role() -> String {
    "reasoning".to_owned()
}

event_struct!(
    /// `REASONING_MESSAGE_CONTENT`: a piece of an open reasoning message.
    ReasoningMessageContentEvent {
        /// The message id.
        message_id: String,
        /// The text to append.
        delta: String,
    }
);

event_struct!(
    /// `REASONING_MESSAGE_END`: the reasoning message is complete.
    ReasoningMessageEndEvent {
        /// The message id.
        message_id: String,
    }
);

event_struct!(
    /// `REASONING_MESSAGE_CHUNK`: shorthand that expands to START / CONTENT / END.
    ReasoningMessageChunkEvent {
        /// The message id; continuation chunks may omit it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        message_id: Option<String>,
        /// The text to append.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        delta: Option<String>,
    }
);

event_struct!(
    /// `REASONING_END`: the reasoning span ends.
    ReasoningEndEvent {
        /// The span id.
        message_id: String,
    }
);

/// What a `REASONING_ENCRYPTED_VALUE` is attached to.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum EncryptedValueSubtype {
    /// A tool call (`"tool-call"`).
    #[serde(rename = "tool-call")]
    ToolCall,
    /// A message (`"message"`).
    #[default]
    #[serde(rename = "message")]
    Message,
}

event_struct!(
    /// `REASONING_ENCRYPTED_VALUE`: attaches an encrypted payload to a message or a tool call.
    ReasoningEncryptedValueEvent {
        /// What the value is attached to.
        subtype: EncryptedValueSubtype,
        /// The message or tool call id.
        entity_id: String,
        /// The payload.
        encrypted_value: String,
    }
);

event_struct!(
    /// `SUBAGENT_STARTED`: a subagent invocation begins (its id is `base.subagent_run_id`).
    SubagentStartedEvent {
        /// The subagent's name.
        name: String,
        /// What it does.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        description: Option<String>,
        /// The subagent invocation that started this one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        parent_subagent_run_id: Option<String>,
        /// The tool call that started it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        parent_tool_call_id: Option<String>,
        /// The message that started it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        parent_message_id: Option<String>,
    }
);

event_struct!(
    /// `SUBAGENT_FINISHED`: a subagent invocation ends.
    SubagentFinishedEvent {
        /// Its result.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        result: Option<Value>,
        /// How it ended (`{"type": "success"}` or `{"type": "suspended", ...}`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        outcome: Option<Value>,
    }
);

event_struct!(
    /// `SUBAGENT_ERROR`: a subagent invocation failed.
    SubagentErrorEvent {
        /// What went wrong.
        message: String,
        /// A machine-readable error code.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        code: Option<String>,
    }
);

/// How a run ended (`RUN_FINISHED.outcome`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum RunOutcome {
    /// The run completed.
    Success {
        /// Tool calls the client is expected to answer.
        #[serde(
            rename = "pendingToolCallIds",
            default,
            skip_serializing_if = "Option::is_none"
        )]
        pending_tool_call_ids: Option<Vec<String>>,
    },
    /// The run paused, waiting for answers to its interrupts.
    Interrupt {
        /// The interrupts, as JSON objects (`id`, `reason`, ...).
        interrupts: Vec<Value>,
    },
    /// The run was cancelled.
    Cancelled,
}

macro_rules! events {
    ($($(#[$doc:meta])* $variant:ident($ty:ident) = $name:literal,)*) => {
        /// One AG-UI event. Serializes to and from the protocol's JSON.
        #[derive(Debug, Clone, PartialEq)]
        pub enum Event {
            $($(#[$doc])* $variant($ty),)*
            /// An event of a type this crate does not know, kept as it arrived.
            Unknown(Value),
        }

        #[derive(Deserialize)]
        #[serde(tag = "type")]
        enum Tagged {
            $(#[serde(rename = $name)] $variant($ty),)*
        }

        #[derive(Serialize)]
        #[serde(tag = "type")]
        enum TaggedRef<'a> {
            $(#[serde(rename = $name)] $variant(&'a $ty),)*
        }

        /// The `type` of every event this crate knows, in the protocol's order.
        pub const EVENT_TYPES: &[&str] = &[$($name),*];

        impl Event {
            /// The event's `type`, e.g. `"TEXT_MESSAGE_CONTENT"` (for an unknown event, its own
            /// `type` field).
            pub fn event_type(&self) -> &str {
                match self {
                    $(Event::$variant(_) => $name,)*
                    Event::Unknown(value) => value.get("type").and_then(Value::as_str).unwrap_or(""),
                }
            }

            /// The fields every event may carry; `None` for an unknown event.
            pub fn base(&self) -> Option<&EventBase> {
                match self {
                    $(Event::$variant(e) => Some(&e.base),)*
                    Event::Unknown(_) => None,
                }
            }
        }

        impl From<Tagged> for Event {
            fn from(tagged: Tagged) -> Self {
                match tagged {
                    $(Tagged::$variant(e) => Event::$variant(e),)*
                }
            }
        }

        impl Serialize for Event {
            fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                match self {
                    $(Event::$variant(e) => TaggedRef::$variant(e).serialize(serializer),)*
                    Event::Unknown(value) => value.serialize(serializer),
                }
            }
        }

        $(
            impl From<$ty> for Event {
                fn from(event: $ty) -> Self {
                    Event::$variant(event)
                }
            }
        )*
    };
}

events! {
    /// `RUN_STARTED`
    RunStarted(RunStartedEvent) = "RUN_STARTED",
    /// `RUN_FINISHED`
    RunFinished(RunFinishedEvent) = "RUN_FINISHED",
    /// `RUN_ERROR`
    RunError(RunErrorEvent) = "RUN_ERROR",
    /// `STEP_STARTED`
    StepStarted(StepStartedEvent) = "STEP_STARTED",
    /// `STEP_FINISHED`
    StepFinished(StepFinishedEvent) = "STEP_FINISHED",
    /// `TEXT_MESSAGE_START`
    TextMessageStart(TextMessageStartEvent) = "TEXT_MESSAGE_START",
    /// `TEXT_MESSAGE_CONTENT`
    TextMessageContent(TextMessageContentEvent) = "TEXT_MESSAGE_CONTENT",
    /// `TEXT_MESSAGE_END`
    TextMessageEnd(TextMessageEndEvent) = "TEXT_MESSAGE_END",
    /// `TEXT_MESSAGE_CHUNK`
    TextMessageChunk(TextMessageChunkEvent) = "TEXT_MESSAGE_CHUNK",
    /// `TOOL_CALL_START`
    ToolCallStart(ToolCallStartEvent) = "TOOL_CALL_START",
    /// `TOOL_CALL_ARGS`
    ToolCallArgs(ToolCallArgsEvent) = "TOOL_CALL_ARGS",
    /// `TOOL_CALL_END`
    ToolCallEnd(ToolCallEndEvent) = "TOOL_CALL_END",
    /// `TOOL_CALL_CHUNK`
    ToolCallChunk(ToolCallChunkEvent) = "TOOL_CALL_CHUNK",
    /// `TOOL_CALL_RESULT`
    ToolCallResult(ToolCallResultEvent) = "TOOL_CALL_RESULT",
    /// `STATE_SNAPSHOT`
    StateSnapshot(StateSnapshotEvent) = "STATE_SNAPSHOT",
    /// `STATE_DELTA`
    StateDelta(StateDeltaEvent) = "STATE_DELTA",
    /// `MESSAGES_SNAPSHOT`
    MessagesSnapshot(MessagesSnapshotEvent) = "MESSAGES_SNAPSHOT",
    /// `ACTIVITY_SNAPSHOT`
    ActivitySnapshot(ActivitySnapshotEvent) = "ACTIVITY_SNAPSHOT",
    /// `ACTIVITY_DELTA`
    ActivityDelta(ActivityDeltaEvent) = "ACTIVITY_DELTA",
    /// `RAW`
    Raw(RawEvent) = "RAW",
    /// `CUSTOM`
    Custom(CustomEvent) = "CUSTOM",
    /// `REASONING_START`
    ReasoningStart(ReasoningStartEvent) = "REASONING_START",
    /// `REASONING_MESSAGE_START`
    ReasoningMessageStart(ReasoningMessageStartEvent) = "REASONING_MESSAGE_START",
    /// `REASONING_MESSAGE_CONTENT`
    ReasoningMessageContent(ReasoningMessageContentEvent) = "REASONING_MESSAGE_CONTENT",
    /// `REASONING_MESSAGE_END`
    ReasoningMessageEnd(ReasoningMessageEndEvent) = "REASONING_MESSAGE_END",
    /// `REASONING_MESSAGE_CHUNK`
    ReasoningMessageChunk(ReasoningMessageChunkEvent) = "REASONING_MESSAGE_CHUNK",
    /// `REASONING_END`
    ReasoningEnd(ReasoningEndEvent) = "REASONING_END",
    /// `REASONING_ENCRYPTED_VALUE`
    ReasoningEncryptedValue(ReasoningEncryptedValueEvent) = "REASONING_ENCRYPTED_VALUE",
    /// `SUBAGENT_STARTED`
    SubagentStarted(SubagentStartedEvent) = "SUBAGENT_STARTED",
    /// `SUBAGENT_FINISHED`
    SubagentFinished(SubagentFinishedEvent) = "SUBAGENT_FINISHED",
    /// `SUBAGENT_ERROR`
    SubagentError(SubagentErrorEvent) = "SUBAGENT_ERROR",
}

impl<'de> Deserialize<'de> for Event {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(deserializer)?;
        let Some(kind) = value.get("type") else {
            return Err(D::Error::custom(
                "an AG-UI event needs a `type` field, and this one has none",
            ));
        };
        let Some(kind) = kind.as_str() else {
            return Err(D::Error::custom(format!(
                "an AG-UI event's `type` must be a string, got {kind}"
            )));
        };
        if !EVENT_TYPES.contains(&kind) {
            return Ok(Event::Unknown(value));
        }
        let kind = kind.to_owned();
        serde_json::from_value::<Tagged>(value)
            .map(Event::from)
            .map_err(|e| D::Error::custom(format!("invalid {kind} event: {e}")))
    }
}

impl Event {
    /// Parses a JSON array of events (as the example's fixtures hold them).
    ///
    /// ```
    /// let events = agentstate::agui::Event::parse_array(
    ///     r#"[{"type":"RUN_STARTED","threadId":"t","runId":"r"},{"type":"RUN_FINISHED","threadId":"t","runId":"r"}]"#,
    /// )?;
    /// assert_eq!(events.len(), 2);
    /// # Ok::<(), serde_json::Error>(())
    /// ```
    pub fn parse_array(json: &str) -> Result<Vec<Event>, serde_json::Error> {
        serde_json::from_str(json)
    }

    /// `RUN_STARTED` for `thread_id` / `run_id`.
    pub fn run_started(thread_id: impl Into<String>, run_id: impl Into<String>) -> Self {
        Event::RunStarted(RunStartedEvent {
            thread_id: thread_id.into(),
            run_id: run_id.into(),
            ..Default::default()
        })
    }

    /// `RUN_FINISHED` for `thread_id` / `run_id`.
    pub fn run_finished(thread_id: impl Into<String>, run_id: impl Into<String>) -> Self {
        Event::RunFinished(RunFinishedEvent {
            thread_id: thread_id.into(),
            run_id: run_id.into(),
            ..Default::default()
        })
    }

    /// `RUN_ERROR` with `message` and an optional code.
    pub fn run_error(message: impl Into<String>, code: Option<String>) -> Self {
        Event::RunError(RunErrorEvent {
            message: message.into(),
            code,
            ..Default::default()
        })
    }

    /// `TEXT_MESSAGE_START` of an assistant message.
    pub fn text_start(message_id: impl Into<String>) -> Self {
        Event::TextMessageStart(TextMessageStartEvent {
            message_id: message_id.into(),
            ..Default::default()
        })
    }

    /// `TEXT_MESSAGE_CONTENT`.
    pub fn text_content(message_id: impl Into<String>, delta: impl Into<String>) -> Self {
        Event::TextMessageContent(TextMessageContentEvent {
            message_id: message_id.into(),
            delta: delta.into(),
            ..Default::default()
        })
    }

    /// `TEXT_MESSAGE_END`.
    pub fn text_end(message_id: impl Into<String>) -> Self {
        Event::TextMessageEnd(TextMessageEndEvent {
            message_id: message_id.into(),
            ..Default::default()
        })
    }

    /// `TOOL_CALL_START`, attached to `parent_message_id` when given.
    pub fn tool_start(
        tool_call_id: impl Into<String>,
        name: impl Into<String>,
        parent_message_id: Option<String>,
    ) -> Self {
        Event::ToolCallStart(ToolCallStartEvent {
            tool_call_id: tool_call_id.into(),
            tool_call_name: name.into(),
            parent_message_id,
            ..Default::default()
        })
    }

    /// `TOOL_CALL_ARGS`.
    pub fn tool_args(tool_call_id: impl Into<String>, delta: impl Into<String>) -> Self {
        Event::ToolCallArgs(ToolCallArgsEvent {
            tool_call_id: tool_call_id.into(),
            delta: delta.into(),
            ..Default::default()
        })
    }

    /// `TOOL_CALL_END`.
    pub fn tool_end(tool_call_id: impl Into<String>) -> Self {
        Event::ToolCallEnd(ToolCallEndEvent {
            tool_call_id: tool_call_id.into(),
            ..Default::default()
        })
    }

    /// `TOOL_CALL_RESULT`: the tool message `message_id` answering `tool_call_id`.
    pub fn tool_result(
        message_id: impl Into<String>,
        tool_call_id: impl Into<String>,
        content: impl Into<MessageContent>,
    ) -> Self {
        Event::ToolCallResult(ToolCallResultEvent {
            message_id: message_id.into(),
            tool_call_id: tool_call_id.into(),
            content: content.into(),
            role: Some("tool".to_owned()),
            ..Default::default()
        })
    }

    /// `STATE_SNAPSHOT`.
    pub fn state_snapshot(snapshot: Value) -> Self {
        Event::StateSnapshot(StateSnapshotEvent {
            snapshot,
            ..Default::default()
        })
    }

    /// `STATE_DELTA` with the given operations.
    pub fn state_delta(delta: Vec<Value>) -> Self {
        Event::StateDelta(StateDeltaEvent {
            delta,
            ..Default::default()
        })
    }

    /// `CUSTOM`.
    pub fn custom(name: impl Into<String>, value: Value) -> Self {
        Event::Custom(CustomEvent {
            name: name.into(),
            value,
            ..Default::default()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// One example of every event type, as a server would send it.
    fn one_of_each() -> Value {
        json!([
            {"type": "RUN_STARTED", "threadId": "t", "runId": "r", "parentRunId": "p",
             "input": {"threadId": "t", "runId": "r", "messages": [{"id": "u", "role": "user", "content": "hi"}], "tools": [], "context": []}},
            {"type": "RUN_FINISHED", "threadId": "t", "runId": "r", "result": {"ok": true}, "outcome": {"type": "success"}},
            {"type": "RUN_ERROR", "message": "boom", "code": "E1"},
            {"type": "STEP_STARTED", "stepName": "plan"},
            {"type": "STEP_FINISHED", "stepName": "plan"},
            {"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "assistant", "name": "bot"},
            {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "x"},
            {"type": "TEXT_MESSAGE_END", "messageId": "m"},
            {"type": "TEXT_MESSAGE_CHUNK", "messageId": "m", "role": "user", "delta": "y"},
            {"type": "TOOL_CALL_START", "toolCallId": "c", "toolCallName": "f", "parentMessageId": "m"},
            {"type": "TOOL_CALL_ARGS", "toolCallId": "c", "delta": "{}"},
            {"type": "TOOL_CALL_END", "toolCallId": "c"},
            {"type": "TOOL_CALL_CHUNK", "toolCallId": "c", "toolCallName": "f", "delta": "{"},
            {"type": "TOOL_CALL_RESULT", "messageId": "t1", "toolCallId": "c", "content": "42", "role": "tool"},
            {"type": "STATE_SNAPSHOT", "snapshot": {"n": 1}},
            {"type": "STATE_DELTA", "delta": [{"op": "replace", "path": "/n", "value": 2}]},
            {"type": "MESSAGES_SNAPSHOT", "messages": [{"id": "a", "role": "assistant", "content": "hello"}]},
            {"type": "ACTIVITY_SNAPSHOT", "messageId": "act", "activityType": "plan", "content": {"steps": []}, "replace": false},
            {"type": "ACTIVITY_DELTA", "messageId": "act", "activityType": "plan", "patch": [{"op": "add", "path": "/steps/-", "value": "a"}]},
            {"type": "RAW", "event": {"anything": 1}, "source": "openai"},
            {"type": "CUSTOM", "name": "confetti", "value": {"count": 3}},
            {"type": "REASONING_START", "messageId": "rs"},
            {"type": "REASONING_MESSAGE_START", "messageId": "rm", "role": "reasoning"},
            {"type": "REASONING_MESSAGE_CONTENT", "messageId": "rm", "delta": "think"},
            {"type": "REASONING_MESSAGE_END", "messageId": "rm"},
            {"type": "REASONING_MESSAGE_CHUNK", "messageId": "rm", "delta": "more"},
            {"type": "REASONING_END", "messageId": "rs"},
            {"type": "REASONING_ENCRYPTED_VALUE", "subtype": "tool-call", "entityId": "c", "encryptedValue": "zzz"},
            {"type": "SUBAGENT_STARTED", "subagentRunId": "s1", "name": "researcher"},
            {"type": "SUBAGENT_FINISHED", "subagentRunId": "s1", "outcome": {"type": "success"}},
            {"type": "SUBAGENT_ERROR", "subagentRunId": "s1", "message": "lost"}
        ])
    }

    #[test]
    fn every_event_type_parses_and_serializes_back_to_the_same_json() {
        let wire = one_of_each();
        let events: Vec<Event> = serde_json::from_value(wire.clone()).unwrap();
        let types: Vec<&str> = events.iter().map(Event::event_type).collect();
        assert_eq!(types, EVENT_TYPES, "one fixture per known type, in order");
        assert!(events.iter().all(|e| !matches!(e, Event::Unknown(_))));
        assert_eq!(serde_json::to_value(&events).unwrap(), wire);
    }

    #[test]
    fn base_fields_are_kept_and_unknown_fields_ignored() {
        let event: Event = serde_json::from_value(json!({
            "type": "STEP_STARTED", "stepName": "s", "timestamp": 1700000000123u64,
            "rawEvent": {"src": 1}, "metadata": {"k": "v"}, "futureField": [1, 2]
        }))
        .unwrap();
        let base = event.base().unwrap();
        assert_eq!(
            base.timestamp.as_ref().unwrap().as_u64(),
            Some(1700000000123)
        );
        assert_eq!(base.raw_event, Some(json!({"src": 1})));
        let back = serde_json::to_value(&event).unwrap();
        assert_eq!(back["timestamp"], json!(1700000000123u64));
        assert!(back.get("futureField").is_none());
    }

    #[test]
    fn unknown_types_are_kept_raw_and_serialize_unchanged() {
        let raw = json!({"type": "THINKING_START", "title": "hmm"});
        let event: Event = serde_json::from_value(raw.clone()).unwrap();
        assert_eq!(event, Event::Unknown(raw.clone()));
        assert_eq!(event.event_type(), "THINKING_START");
        assert!(event.base().is_none());
        assert_eq!(serde_json::to_value(&event).unwrap(), raw);
    }

    #[test]
    fn malformed_events_are_readable_errors() {
        let err = serde_json::from_value::<Event>(
            json!({"type": "TEXT_MESSAGE_CONTENT", "messageId": "m"}),
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("invalid TEXT_MESSAGE_CONTENT event") && err.contains("delta"),
            "{err}"
        );
        let err = serde_json::from_value::<Event>(json!({"delta": "x"}))
            .unwrap_err()
            .to_string();
        assert!(err.contains("needs a `type` field"), "{err}");
        let err = serde_json::from_value::<Event>(json!({"type": 7}))
            .unwrap_err()
            .to_string();
        assert!(err.contains("must be a string, got 7"), "{err}");
        let err = serde_json::from_value::<Event>(
            json!({"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "tool"}),
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("tool"), "{err}");
    }

    #[test]
    fn run_finished_outcomes() {
        let cancelled: Event = serde_json::from_value(json!({
            "type": "RUN_FINISHED", "threadId": "t", "runId": "r", "outcome": {"type": "cancelled"}
        }))
        .unwrap();
        let Event::RunFinished(finished) = cancelled else {
            panic!("not RUN_FINISHED")
        };
        assert_eq!(finished.outcome, Some(RunOutcome::Cancelled));
        let interrupt: RunOutcome = serde_json::from_value(
            json!({"type": "interrupt", "interrupts": [{"id": "i1", "reason": "approve"}]}),
        )
        .unwrap();
        assert!(
            matches!(interrupt, RunOutcome::Interrupt { ref interrupts } if interrupts.len() == 1)
        );
    }

    #[test]
    fn constructors_build_the_wire_shape() {
        let json = serde_json::to_value([
            Event::text_start("m"),
            Event::tool_start("c", "f", Some("m".into())),
            Event::tool_result("t", "c", "ok"),
        ])
        .unwrap();
        assert_eq!(
            json,
            json!([
                {"type": "TEXT_MESSAGE_START", "messageId": "m"},
                {"type": "TOOL_CALL_START", "toolCallId": "c", "toolCallName": "f", "parentMessageId": "m"},
                {"type": "TOOL_CALL_RESULT", "messageId": "t", "toolCallId": "c", "content": "ok", "role": "tool"}
            ])
        );
    }
}
