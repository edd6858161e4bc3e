//! The [`State`] trait every agent state implements, and AgentFlow's [`AgentState`] base with
//! its [`ExecutionState`].
//!
//! A state merges a partial update atomically: each field's reducer first *plans* its merge
//! (everything that can fail, reading only), and only when every field planned successfully are
//! the plans applied. A failed merge leaves the state exactly as it was, without cloning it.

use crate::collections::MessageList;
use crate::error::Error;
use crate::message::{JsonObject, MessageId};
use crate::schema::Schema;
use crate::update::{Combine, FanIn};
use serde::{Deserialize, Serialize};

/// A state that merges partial updates field by field, each through its reducer.
///
/// `#[derive(AgentState)]` implements it; it can also be written by hand, as
/// [`AgentState`]'s implementation shows.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a state, so it cannot be a `nested` field or a base",
    label = "not a state",
    note = "derive AgentState on `{Self}`, or give the field another reducer (no attribute: last_write_wins)"
)]
pub trait State {
    /// The partial update: one optional entry per field.
    type Update: Default;

    /// A checked update, ready to apply (see [`plan`](State::plan)).
    type Plan;

    /// The JSON keys of the state's fields (including those of a base state), in order.
    const FIELDS: &'static [&'static str];

    /// Checks `update` against the state and prepares every field's merge, reading only. On
    /// error nothing is changed.
    fn plan(&self, update: Self::Update) -> Result<Self::Plan, Error>;

    /// Applies a plan made by [`plan`](State::plan) on the same, unchanged state. Cannot fail.
    fn apply(&mut self, plan: Self::Plan);

    /// Merges `update` atomically: every field present in it through its reducer, or, if any
    /// reducer fails, nothing at all. Reducers of fields absent from the update are not called.
    fn merge(&mut self, update: Self::Update) -> Result<(), Error> {
        let plan = self.plan(update)?;
        self.apply(plan);
        Ok(())
    }

    /// Each field's name, reducer, parameters and round-trip idempotence.
    fn schema() -> Schema;

    /// Combines two updates into one. With [`Combine::Sequence`] merging the result equals
    /// merging `first` then `second`; with [`Combine::Parallel`] the two are writes of parallel
    /// branches in one step (see [`State::merge_parallel`]). Fails for a field both updates set
    /// when its reducer cannot combine updates (a user function), and on the parallel-step rules.
    fn compose(
        first: Self::Update,
        second: Self::Update,
        how: Combine,
    ) -> Result<Self::Update, Error>;

    /// Applies the updates of parallel branches atomically, folded in the order given (branch
    /// order, never completion order). Two Overwrites of one field are an error; an Overwrite
    /// wins over the other branches' ordinary writes to its field; in [`FanIn::Strict`] two
    /// writes to one `last_write_wins` field are an error (LangGraph's
    /// `INVALID_CONCURRENT_GRAPH_UPDATE`). On error the state is unchanged.
    fn merge_parallel(
        &mut self,
        updates: impl IntoIterator<Item = Self::Update>,
        mode: FanIn,
    ) -> Result<(), Error> {
        let mut combined: Option<Self::Update> = None;
        for update in updates {
            combined = Some(match combined {
                None => update,
                Some(acc) => Self::compose(acc, update, Combine::Parallel(mode))?,
            });
        }
        match combined {
            Some(update) => self.merge(update),
            None => Ok(()),
        }
    }

    /// Merges a JSON update strictly (see [`Update::from_json`](crate::update::Update::from_json)):
    /// an unknown key, a non-object or a value that does not fit is a `state_validation_error`
    /// and changes nothing.
    fn apply_json(&mut self, json: serde_json::Value) -> Result<(), Error>
    where
        Self::Update: crate::update::Update + serde::de::DeserializeOwned,
    {
        let update = <Self::Update as crate::update::Update>::from_json(json)?;
        self.merge(update)
    }

    /// Merges a JSON update leniently, as chosen explicitly: unknown keys are ignored and
    /// returned; everything else is checked as in [`apply_json`](State::apply_json).
    fn apply_json_lenient(&mut self, json: serde_json::Value) -> Result<Vec<String>, Error>
    where
        Self::Update: crate::update::Update + serde::de::DeserializeOwned,
    {
        let (update, ignored) = <Self::Update as crate::update::Update>::from_json_lenient(json)?;
        self.merge(update)?;
        Ok(ignored)
    }

    /// Applies a node's output: its updates, messages and tool results, atomically, in order.
    fn apply_output(
        &mut self,
        output: crate::output::NodeOutput<Self::Update>,
    ) -> Result<(), Error> {
        match output.into_update(Self::compose)? {
            Some(update) => self.merge(update),
            None => Ok(()),
        }
    }
}

/// Where a run stands (AgentFlow's `ExecutionStatus`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExecutionStatus {
    /// The graph is executing.
    #[default]
    Running,
    /// Paused before a node ran.
    InterruptedBefore,
    /// Paused after a node ran.
    InterruptedAfter,
    /// Finished.
    Completed,
    /// Failed.
    Error,
}

/// Whether someone asked the run to stop (AgentFlow's `StopRequestStatus`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopRequestStatus {
    /// No stop was requested.
    #[default]
    None,
    /// A stop was requested and not yet honoured.
    StopRequested,
    /// The run stopped on request.
    Stopped,
}

/// The node every run starts at.
pub const START: &str = "__start__";

/// Execution metadata of a run (AgentFlow's `ExecutionState`): managed by the framework, read by
/// nodes. Serializes exactly as AgentFlow does.
///
/// ```
/// use agentstate::state::{ExecutionState, ExecutionStatus};
///
/// let mut meta = ExecutionState::default();
/// assert_eq!(meta.current_node, "__start__");
/// meta.set_interrupt("approve", "needs a human", ExecutionStatus::InterruptedBefore, None);
/// assert!(meta.is_interrupted());
/// meta.clear_interrupt();
/// assert!(meta.is_running());
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ExecutionState {
    /// The node currently executing.
    pub current_node: String,
    /// Number of node transitions so far.
    pub step: u64,
    /// Where the run stands.
    pub status: ExecutionStatus,
    /// The node where the last interrupt happened.
    pub interrupted_node: Option<String>,
    /// Why the run was interrupted.
    pub interrupt_reason: Option<String>,
    /// Data attached to the interrupt, its keys in the order they were written or read.
    pub interrupt_data: Option<JsonObject>,
    /// The thread this run belongs to.
    pub thread_id: Option<String>,
    /// Whether a stop was requested.
    pub stop_current_execution: StopRequestStatus,
    /// Framework-internal data (AgentFlow keeps the error message under `"error"`), its keys in
    /// the order they were written or read, as AgentFlow's dict keeps them.
    pub internal_data: JsonObject,
}

impl Default for ExecutionState {
    fn default() -> Self {
        ExecutionState::new(START)
    }
}

impl ExecutionState {
    /// A running execution at `current_node`, step 0.
    pub fn new(current_node: impl Into<String>) -> Self {
        ExecutionState {
            current_node: current_node.into(),
            step: 0,
            status: ExecutionStatus::Running,
            interrupted_node: None,
            interrupt_reason: None,
            interrupt_data: None,
            thread_id: None,
            stop_current_execution: StopRequestStatus::None,
            internal_data: JsonObject::new(),
        }
    }

    /// True while the status is `running`.
    pub fn is_running(&self) -> bool {
        self.status == ExecutionStatus::Running
    }

    /// True when the run is paused before or after a node.
    pub fn is_interrupted(&self) -> bool {
        matches!(
            self.status,
            ExecutionStatus::InterruptedBefore | ExecutionStatus::InterruptedAfter
        )
    }

    /// True when a stop was requested and not yet honoured.
    pub fn is_stopped_requested(&self) -> bool {
        self.stop_current_execution == StopRequestStatus::StopRequested
    }

    /// Records an interrupt at `node`. As in AgentFlow, `status` is stored as given (normally
    /// `InterruptedBefore` or `InterruptedAfter`).
    pub fn set_interrupt(
        &mut self,
        node: impl Into<String>,
        reason: impl Into<String>,
        status: ExecutionStatus,
        data: Option<JsonObject>,
    ) {
        self.interrupted_node = Some(node.into());
        self.interrupt_reason = Some(reason.into());
        self.status = status;
        self.interrupt_data = data;
    }

    /// Clears the interrupt and sets the status back to running.
    pub fn clear_interrupt(&mut self) {
        self.interrupted_node = None;
        self.interrupt_reason = None;
        self.interrupt_data = None;
        self.status = ExecutionStatus::Running;
    }

    /// Increments the step counter.
    pub fn advance_step(&mut self) {
        self.step += 1;
    }

    /// Moves the current-node pointer.
    pub fn set_current_node(&mut self, node: impl Into<String>) {
        self.current_node = node.into();
    }

    /// Marks the run completed.
    pub fn complete(&mut self) {
        self.status = ExecutionStatus::Completed;
    }

    /// Marks the run failed, keeping the message under `internal_data["error"]`.
    pub fn error(&mut self, message: impl Into<String>) {
        self.status = ExecutionStatus::Error;
        self.internal_data
            .insert("error", serde_json::Value::String(message.into()));
    }

    /// The error message recorded by [`error`](ExecutionState::error), if any.
    pub fn error_message(&self) -> Option<String> {
        self.internal_data.get_json("error")?.as_string()
    }
}

/// AgentFlow's default state: the conversation, an optional summary and execution metadata.
///
/// Extend it the way a Python subclass would, with `#[agent_state(base)]` in a derived state.
///
/// ```
/// use agentstate::message::{Message, Role};
/// use agentstate::state::{AgentState, AgentStateUpdate};
/// use agentstate::State;
///
/// let mut state = AgentState::default();
/// let hello = Message::text_message("Hello", Role::User).with_id("m1");
/// state.merge(AgentStateUpdate::default().context(vec![hello.clone()]))?;
/// // add_messages: the same id again is dropped.
/// state.merge(AgentStateUpdate::default().context(vec![hello]).context_summary(Some("greeting".into())))?;
/// assert_eq!(state.context.len(), 1);
/// assert_eq!(state.context_summary.as_deref(), Some("greeting"));
/// assert!(state.is_running());
/// # Ok::<(), agentstate::Error>(())
/// ```
#[derive(
    Debug, Clone, Default, PartialEq, Serialize, Deserialize, agentstate_derive::AgentState,
)]
#[serde(default)]
#[agent_state(messages = context)]
pub struct AgentState {
    /// The conversation, merged with `add_messages`.
    #[reducer(add_messages)]
    pub context: MessageList,
    /// An optional rolling summary of trimmed-out context.
    pub context_summary: Option<String>,
    /// The id of the last message of `context` that `context_summary` covers, when the summary
    /// was recorded by [`agentstate::context`](crate::context): views never send the messages
    /// up to it again. Not an AgentFlow field: it is left out of the JSON while `None`, so the
    /// state serializes exactly as AgentFlow's, and AgentFlow ignores it when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_summary_through: Option<MessageId>,
    /// Execution metadata (framework-managed).
    pub execution_meta: ExecutionState,
}

impl AgentState {
    /// True while the graph is executing.
    pub fn is_running(&self) -> bool {
        self.execution_meta.is_running()
    }

    /// True when execution paused at an interrupt.
    pub fn is_interrupted(&self) -> bool {
        self.execution_meta.is_interrupted()
    }

    /// True when a stop was requested for this thread.
    pub fn is_stopped_requested(&self) -> bool {
        self.execution_meta.is_stopped_requested()
    }

    /// Records an interrupt at `node` (framework use).
    pub fn set_interrupt(
        &mut self,
        node: impl Into<String>,
        reason: impl Into<String>,
        status: ExecutionStatus,
        data: Option<JsonObject>,
    ) {
        self.execution_meta
            .set_interrupt(node, reason, status, data);
    }

    /// Clears the interrupt, allowing execution to resume (framework use).
    pub fn clear_interrupt(&mut self) {
        self.execution_meta.clear_interrupt();
    }

    /// Increments the step counter (framework use).
    pub fn advance_step(&mut self) {
        self.execution_meta.advance_step();
    }

    /// Updates the current-node pointer (framework use).
    pub fn set_current_node(&mut self, node: impl Into<String>) {
        self.execution_meta.set_current_node(node);
    }

    /// Marks execution completed (framework use).
    pub fn complete(&mut self) {
        self.execution_meta.complete();
    }

    /// Records an error (framework use).
    pub fn error(&mut self, message: impl Into<String>) {
        self.execution_meta.error(message);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::{Message, Role};
    use serde_json::json;

    #[test]
    fn execution_state_serializes_like_agentflow() {
        let meta = ExecutionState::default();
        assert_eq!(
            serde_json::to_value(&meta).unwrap(),
            json!({
                "current_node": "__start__", "step": 0, "status": "running",
                "interrupted_node": null, "interrupt_reason": null, "interrupt_data": null,
                "thread_id": null, "stop_current_execution": "none", "internal_data": {}
            })
        );
        let back: ExecutionState = serde_json::from_value(json!({
            "current_node": "tools", "step": 3, "status": "interrupted_after",
            "stop_current_execution": "stop_requested"
        }))
        .unwrap();
        assert_eq!(back.status, ExecutionStatus::InterruptedAfter);
        assert!(back.is_interrupted() && back.is_stopped_requested() && !back.is_running());
    }

    #[test]
    fn execution_state_keeps_free_form_data_as_read() {
        // AgentFlow's dicts keep insertion order and pydantic spells floats its own way; a
        // sorted map would write `{"a":..,"error":..,"z":..}` and `1e+16` as `1e16`.
        let wire = r#"{"current_node":"tools","step":2,"status":"interrupted_before","interrupted_node":"approve","interrupt_reason":"review","interrupt_data":{"zeta":1,"alpha":[1.5,1e+16],"mid":{"b":1,"a":2}},"thread_id":"t-1","stop_current_execution":"none","internal_data":{"z":true,"error":"boom","a":null}}"#;
        let meta: ExecutionState = serde_json::from_str(wire).unwrap();
        assert_eq!(serde_json::to_string(&meta).unwrap(), wire);
        assert_eq!(meta.error_message().as_deref(), Some("boom"));
        assert_eq!(
            meta.interrupt_data.as_ref().map(JsonObject::keys),
            Some(vec!["zeta".into(), "alpha".into(), "mid".into()])
        );
    }

    #[test]
    fn lifecycle_methods() {
        let mut state = AgentState::default();
        state.set_current_node("agent");
        state.advance_step();
        state.advance_step();
        assert_eq!(state.execution_meta.current_node, "agent");
        assert_eq!(state.execution_meta.step, 2);
        let data = JsonObject::from_iter([("q", json!("ok?"))]);
        state.set_interrupt(
            "approve",
            "human review",
            ExecutionStatus::InterruptedAfter,
            Some(data.clone()),
        );
        assert!(state.is_interrupted() && !state.is_running());
        assert_eq!(state.execution_meta.interrupt_data, Some(data));
        state.clear_interrupt();
        assert!(state.is_running());
        assert_eq!(state.execution_meta.interrupted_node, None);
        state.complete();
        assert_eq!(state.execution_meta.status, ExecutionStatus::Completed);
        state.error("boom");
        assert_eq!(state.execution_meta.status, ExecutionStatus::Error);
        assert_eq!(
            state.execution_meta.error_message().as_deref(),
            Some("boom")
        );
        state.execution_meta.stop_current_execution = StopRequestStatus::StopRequested;
        assert!(state.is_stopped_requested());
    }

    #[test]
    fn merge_touches_only_present_fields() {
        let mut state = AgentState {
            context_summary: Some("keep me".into()),
            ..AgentState::default()
        };
        let m = Message::text_message("hi", Role::User).with_id("1");
        state
            .merge(AgentStateUpdate::default().context(vec![m.clone(), m.clone()]))
            .unwrap();
        assert_eq!(
            state.context.len(),
            2,
            "duplicates inside one update are kept"
        );
        assert_eq!(state.context_summary.as_deref(), Some("keep me"));
        state
            .merge(AgentStateUpdate::default().context_summary(None))
            .unwrap();
        assert_eq!(state.context_summary, None);
    }

    #[test]
    fn update_json_tells_null_from_absent() {
        let clear: AgentStateUpdate =
            serde_json::from_value(json!({"context_summary": null})).unwrap();
        assert_eq!(clear.context_summary, Some(None));
        let absent: AgentStateUpdate = serde_json::from_value(json!({})).unwrap();
        assert_eq!(absent.context_summary, None);
        let err = serde_json::from_value::<AgentStateUpdate>(json!({"context": "hi"})).unwrap_err();
        assert!(err.to_string().contains("invalid type"), "{err}");
    }

    #[test]
    fn schema_lists_the_fields() {
        let schema = AgentState::schema();
        let names: Vec<_> = schema
            .fields()
            .iter()
            .map(|f| (f.name.as_str(), f.reducer.name.as_str()))
            .collect();
        assert_eq!(
            names,
            [
                ("context", "add_messages"),
                ("context_summary", "last_write_wins"),
                ("context_summary_through", "last_write_wins"),
                ("execution_meta", "last_write_wins")
            ]
        );
    }
}
