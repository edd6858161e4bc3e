//! The [`State`] trait every agent state implements, and AgentFlow's [`AgentState`] base with
//! its [`ExecutionState`].
//!
//! A state merges a partial update atomically: each field's reducer first *plans* its merge
//! (everything that can fail, reading only), and only when every field planned successfully are
//! the plans applied. A failed merge leaves the state exactly as it was, without cloning it.
//!
//! [`DeserializeFields`] reads a state's JSON object one key at a time, so that a state
//! extending a base reads the base's keys as they come instead of buffering them
//! (`#[agent_state(deserialize)]`).

use crate::collections::MessageList;
use crate::error::Error;
use crate::message::{JsonObject, MessageId};
use crate::schema::Schema;
use crate::update::{Combine, FanIn};
use serde::de::{self, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;

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

    /// The version of the state's schema its author declared
    /// (`#[agent_state(version = 3)]`), or 0 when none is. A durable store records it with
    /// every row, and looks up migrations by it when a state of another version is loaded;
    /// bump it when an edit of the type is not compatible with what was stored (a field's type
    /// changed, a required field added).
    ///
    /// ```
    /// use agentstate::{AgentState, State};
    ///
    /// #[derive(AgentState, Debug, Clone, Default, PartialEq)]
    /// #[agent_state(version = 3)]
    /// struct Notes { lines: Vec<String> }
    ///
    /// assert_eq!(Notes::SCHEMA_VERSION, 3);
    /// assert_eq!(agentstate::state::AgentState::SCHEMA_VERSION, 0);
    /// ```
    const SCHEMA_VERSION: u32 = 0;

    /// The Rust types of the fields, as written in the struct (`Option<u64>`), in the order of
    /// [`FIELDS`](State::FIELDS); empty when not known (a hand-written state). A durable store
    /// records them with the schema, to name a field whose type was changed.
    ///
    /// ```
    /// use agentstate::{AgentState, State};
    ///
    /// #[derive(AgentState, Debug, Clone, Default, PartialEq)]
    /// struct Notes { lines: Vec<String>, last: Option<u64> }
    ///
    /// assert_eq!(Notes::FIELD_TYPES, ["Vec<String>", "Option<u64>"]);
    /// ```
    const FIELD_TYPES: &'static [&'static str] = &[];

    /// The JSON key of the field that receives messages (see
    /// [`MessagesUpdate`](crate::output::MessagesUpdate)), when the state has one: `context`
    /// for [`AgentState`] and the states extending it. An update's unknown key such as
    /// `messages` is answered with a hint toward it.
    const MESSAGES: Option<&'static str> = None;

    /// Checks `update` against the state and prepares every field's merge, reading only. On
    /// error nothing is changed.
    fn plan(&self, update: Self::Update) -> Result<Self::Plan, Error>;

    /// Plans `update` taken from where it lies: [`plan`](State::plan) of a base's part of an
    /// extension's update, without copying it out. Leaves the update's entries empty (as its
    /// default, which must not hold allocations: the caller may forget it). The derive
    /// implements it on states marked `#[agent_state(extensible)]`, the only bases; the default
    /// takes the update and plans it.
    #[doc(hidden)]
    fn plan_in(&self, update: &mut Self::Update) -> Result<Self::Plan, Error> {
        self.plan(core::mem::take(update))
    }

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

    /// The field that holds AgentFlow's [`ExecutionState`] (its JSON name and value), if the
    /// state has one: what a graph runner keeps up to date (the current node, the step, an
    /// interrupt). `#[derive(AgentState)]` finds it: the first field whose type is named
    /// `ExecutionState`, else the base's ([`AgentState`]'s `execution_meta`).
    ///
    /// ```
    /// use agentstate::state::AgentState;
    /// use agentstate::State;
    ///
    /// let state = AgentState::default();
    /// let (name, execution) = state.execution().expect("AgentState has one");
    /// assert_eq!((name, execution.step), ("execution_meta", 0));
    /// ```
    fn execution(&self) -> Option<(&'static str, &ExecutionState)> {
        None
    }

    /// Prepares `update` for merging, as
    /// [`Update::prepare`](crate::update::Update::prepare) does: what the derive calls on the
    /// part of an update that belongs to a base or a nested state, so that their JSON messages
    /// fields get their ids when the update is made. Does nothing unless overridden; a derived
    /// state forwards to its update's `prepare`.
    fn prepare_update(update: &mut Self::Update) {
        let _ = update;
    }

    /// Combines two updates into one. With [`Combine::Sequence`] merging the result equals
    /// merging `first` then `second`; with [`Combine::Parallel`] the two are writes of parallel
    /// branches in one step (see [`State::merge_parallel`]). Fails for a field both updates set
    /// when its reducer cannot combine the two (see [`Update::then`](crate::update::Update::then)),
    /// and on the parallel-step rules.
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

/// A state whose JSON object can be read one key at a time: what a state extending it
/// (`#[agent_state(base)]`) needs to read the base's keys as they come, in one pass, instead of
/// serde's `#[serde(flatten)]`, which buffers every key the extension does not name (the whole
/// conversation) and parses it a second time.
///
/// `#[derive(AgentState)]` with `#[agent_state(deserialize)]` implements it, together with the
/// state's `serde::Deserialize` (so the state must not also derive serde's `Deserialize`: rustc
/// would report E0119, conflicting implementations). [`AgentState`] implements it. The
/// generated `Deserialize` offers each key first to the state's own fields, then to its base's
/// `deserialize_field`, and ignores a key no one takes (or refuses it under
/// `#[serde(deny_unknown_fields)]`); `finish` then builds the base and the state.
///
/// ```
/// use agentstate::state::DeserializeFields;
/// use agentstate::AgentState; // the base state and the derive
///
/// #[derive(AgentState, Debug, Default, Clone, PartialEq, serde::Serialize)]
/// #[agent_state(deserialize)] // generates Deserialize: do not derive serde's as well
/// struct Order {
///     #[agent_state(base)]
///     #[serde(flatten)]
///     base: AgentState,
///     order_id: Option<String>,
///     confirmed: bool,
/// }
///
/// let order: Order = serde_json::from_str(r#"{"context": [], "confirmed": true, "extra": 1}"#)?;
/// assert!(order.confirmed && order.order_id.is_none() && order.context.is_empty());
///
/// // The same errors as serde's derive.
/// let missing = serde_json::from_str::<Order>(r#"{"order_id": "o-1"}"#).unwrap_err();
/// assert!(missing.to_string().starts_with("missing field `confirmed`"));
/// let twice = serde_json::from_str::<Order>(r#"{"confirmed": true, "confirmed": false}"#);
/// assert!(twice.unwrap_err().to_string().starts_with("duplicate field `confirmed`"));
///
/// // The trait by hand: `AgentState` takes its own keys and declines the others.
/// let mut fields = <AgentState as DeserializeFields>::Fields::default();
/// let mut map = serde::de::value::MapDeserializer::<_, serde_json::Error>::new(
///     [("context_summary", serde_json::json!("a trip")), ("order_id", serde_json::json!(1))].into_iter(),
/// );
/// use serde::de::MapAccess;
/// assert_eq!(map.next_key::<String>()?.as_deref(), Some("context_summary"));
/// assert!(AgentState::deserialize_field(&mut fields, "context_summary", &mut map)?);
/// assert_eq!(map.next_key::<String>()?.as_deref(), Some("order_id"));
/// assert!(!AgentState::deserialize_field(&mut fields, "order_id", &mut map)?); // not its key
/// let state: AgentState = AgentState::finish::<serde_json::Error>(fields)?;
/// assert_eq!(state.context_summary.as_deref(), Some("a trip"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[diagnostic::on_unimplemented(
    message = "the base state `{Self}` cannot be read key by key, which `#[agent_state(deserialize)]` needs",
    label = "`{Self}` does not implement `DeserializeFields`",
    note = "add #[agent_state(deserialize)] to `{Self}` (and drop its serde `Deserialize` derive), or drop #[agent_state(deserialize)] from this state to use serde's derive"
)]
pub trait DeserializeFields<'de>: Sized {
    /// The values of the fields read so far (each `None` until its key comes).
    type Fields: Default;

    /// Reads `key`'s value from `map` into `fields` if `key` is one of this state's keys (its
    /// own or its base's) and returns `Ok(true)`; returns `Ok(false)` without reading the value
    /// otherwise. A key read twice is serde's "duplicate field `x`" error.
    fn deserialize_field<A: MapAccess<'de>>(
        fields: &mut Self::Fields,
        key: &str,
        map: &mut A,
    ) -> Result<bool, A::Error>;

    /// Builds the state from the fields read; a missing required field is serde's
    /// "missing field `x`" error.
    fn finish<E: de::Error>(fields: Self::Fields) -> Result<Self, E>;
}

/// What `#[agent_state(deserialize)]`'s `Deserialize` needs to know of the state.
#[doc(hidden)]
pub struct Shape {
    /// The struct's serde name.
    pub name: &'static str,
    /// Its own fields' keys, in order (without skipped fields and the base).
    pub fields: &'static [&'static str],
    /// Whether it has a base: then it reads a map, as serde's derive does for a struct with a
    /// flattened field; otherwise a struct (an object, or an array of the values in order).
    pub base: bool,
    /// `#[serde(deny_unknown_fields)]`.
    pub deny_unknown_fields: bool,
    /// What errors say was expected (`struct Name`).
    pub expecting: &'static str,
}

/// The `Deserialize` of a state with `#[agent_state(deserialize)]`: one pass over the object.
#[doc(hidden)]
#[inline]
pub fn deserialize_state<'de, T, D>(deserializer: D, shape: &'static Shape) -> Result<T, D::Error>
where
    T: DeserializeFields<'de>,
    D: Deserializer<'de>,
{
    let visitor = FieldsVisitor {
        shape,
        state: PhantomData,
    };
    if shape.base {
        deserializer.deserialize_map(visitor)
    } else {
        deserializer.deserialize_struct(shape.name, shape.fields, visitor)
    }
}

struct FieldsVisitor<T> {
    shape: &'static Shape,
    state: PhantomData<fn() -> T>,
}

impl<'de, T: DeserializeFields<'de>> Visitor<'de> for FieldsVisitor<T> {
    type Value = T;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(self.shape.expecting)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<T, A::Error> {
        let mut fields = T::Fields::default();
        let mut unknown: Option<String> = None;
        while let Some(FieldKey(key)) = map.next_key()? {
            if T::deserialize_field(&mut fields, &key, &mut map)? {
                continue;
            }
            if self.shape.deny_unknown_fields {
                if !self.shape.base {
                    return Err(de::Error::unknown_field(&key, self.shape.fields));
                }
                // serde's derive reports it after reading the whole object and the base.
                if unknown.is_none() {
                    unknown = Some(key.into_owned());
                }
            }
            map.next_value::<IgnoredAny>()?;
        }
        let state = T::finish(fields)?;
        match unknown {
            Some(key) => Err(de::Error::custom(format_args!("unknown field `{key}`"))),
            None => Ok(state),
        }
    }

    /// A state without a base from the values of its fields in order, as serde's derive reads
    /// a struct from an array. A shorter array leaves the remaining fields missing.
    fn visit_seq<A: de::SeqAccess<'de>>(self, seq: A) -> Result<T, A::Error> {
        if self.shape.base {
            return Err(de::Error::invalid_type(de::Unexpected::Seq, &self));
        }
        let mut fields = T::Fields::default();
        let mut values = SeqFields { seq, done: false };
        for name in self.shape.fields {
            match T::deserialize_field(&mut fields, name, &mut values) {
                Ok(_) => {}
                // The array ended: this field and the next ones are missing.
                Err(_) if values.done => break,
                Err(error) => return Err(error),
            }
        }
        T::finish(fields)
    }
}

/// The elements of a sequence, read as the values of a map whose keys the caller knows.
struct SeqFields<A> {
    seq: A,
    done: bool,
}

impl<'de, A: de::SeqAccess<'de>> MapAccess<'de> for SeqFields<A> {
    type Error = A::Error;

    fn next_key_seed<K: de::DeserializeSeed<'de>>(
        &mut self,
        _: K,
    ) -> Result<Option<K::Value>, A::Error> {
        Ok(None)
    }

    fn next_value_seed<V: de::DeserializeSeed<'de>>(
        &mut self,
        seed: V,
    ) -> Result<V::Value, A::Error> {
        match self.seq.next_element_seed(seed)? {
            Some(value) => Ok(value),
            None => {
                // Not an error of the input: `visit_seq` stops at it, leaving the field
                // missing (its default, `None`, or serde's "missing field" error).
                self.done = true;
                Err(de::Error::custom("end of the array"))
            }
        }
    }
}

/// A key of a state's object, borrowed from the input when it can be.
pub(crate) struct FieldKey<'de>(pub(crate) Cow<'de, str>);

impl<'de> Deserialize<'de> for FieldKey<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_identifier(FieldKeyVisitor)
    }
}

struct FieldKeyVisitor;

impl<'de> Visitor<'de> for FieldKeyVisitor {
    type Value = FieldKey<'de>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("field identifier")
    }

    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(FieldKey(Cow::Borrowed(v)))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok(FieldKey(Cow::Owned(v.to_owned())))
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
        Ok(FieldKey(Cow::Owned(v)))
    }

    fn visit_bytes<E: de::Error>(self, v: &[u8]) -> Result<Self::Value, E> {
        // A key that is not UTF-8 names no field: an unknown key.
        Ok(FieldKey(String::from_utf8_lossy(v).into_owned().into()))
    }
}

/// Reads a field's value into its slot; a second value for it is serde's "duplicate field".
#[doc(hidden)]
#[inline]
pub fn deserialize_value<'de, T: Deserialize<'de>, A: MapAccess<'de>>(
    slot: &mut Option<T>,
    name: &'static str,
    map: &mut A,
) -> Result<bool, A::Error> {
    if slot.is_some() {
        return Err(de::Error::duplicate_field(name));
    }
    *slot = Some(map.next_value()?);
    Ok(true)
}

/// The value of a field absent from the object, as serde's derive makes it: `None` for an
/// `Option`, serde's "missing field `x`" error otherwise.
#[doc(hidden)]
#[inline]
pub fn missing_field<'de, T: Deserialize<'de>, E: de::Error>(name: &'static str) -> Result<T, E> {
    T::deserialize(MissingField(name, PhantomData))
}

/// The deserializer [`missing_field`] reads an absent field's value from (for the derive's
/// field values, read through `FieldValue`).
#[doc(hidden)]
#[inline]
pub fn missing_field_deserializer<E: de::Error>(name: &'static str) -> MissingField<E> {
    MissingField(name, PhantomData)
}

#[doc(hidden)]
pub struct MissingField<E>(&'static str, PhantomData<E>);

impl<'de, E: de::Error> Deserializer<'de> for MissingField<E> {
    type Error = E;

    fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, E> {
        Err(de::Error::missing_field(self.0))
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, E> {
        visitor.visit_none()
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        unit unit_struct newtype_struct seq tuple tuple_struct map struct enum identifier
        ignored_any
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

/// Execution metadata of a run (AgentFlow's `ExecutionState`): written by the graph runner, read
/// by nodes. Serializes exactly as AgentFlow does.
///
/// The runner is the crate that executes a graph of nodes over a state, `agentstate-graph`
/// (agentstate itself runs no graph); its durable runs (the next step of that crate) are what
/// will keep these fields up to date, and its in-memory runs do not write them yet. A runner
/// calls the methods that move a run forward: [`advance_step`](ExecutionState::advance_step) and
/// [`set_current_node`](ExecutionState::set_current_node) on each transition,
/// [`set_interrupt`](ExecutionState::set_interrupt) when it pauses before or after a node,
/// [`clear_interrupt`](ExecutionState::clear_interrupt) when it resumes,
/// [`complete`](ExecutionState::complete) and [`error`](ExecutionState::error) when the run
/// ends. Until then, call them yourself where your own loop does these things; a node never
/// needs to (it returns an update instead).
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
    /// `InterruptedBefore` or `InterruptedAfter`). The graph runner calls it when it pauses a
    /// run before or after `node` (a human approval, a breakpoint); call it yourself only if
    /// you drive the nodes with your own loop.
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

    /// Clears the interrupt and sets the status back to running. The graph runner calls it
    /// when it resumes an interrupted run.
    pub fn clear_interrupt(&mut self) {
        self.interrupted_node = None;
        self.interrupt_reason = None;
        self.interrupt_data = None;
        self.status = ExecutionStatus::Running;
    }

    /// Increments the step counter. The graph runner calls it once per node transition (before
    /// running the next node); your own loop would do the same.
    pub fn advance_step(&mut self) {
        self.step += 1;
    }

    /// Moves the current-node pointer. The graph runner calls it when it moves to another node.
    pub fn set_current_node(&mut self, node: impl Into<String>) {
        self.current_node = node.into();
    }

    /// Marks the run completed. The graph runner calls it when the run reaches its end node;
    /// your own loop would call it after its last node.
    pub fn complete(&mut self) {
        self.status = ExecutionStatus::Completed;
    }

    /// Marks the run failed, keeping the message under `internal_data["error"]`. The graph
    /// runner calls it when a node or a merge fails.
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
#[derive(Debug, Clone, Default, PartialEq, Serialize, agentstate_derive::AgentState)]
#[serde(default)]
#[agent_state(messages = context, deserialize, extensible)]
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
    /// Execution metadata, written by the graph runner (see [`ExecutionState`]).
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

    /// Records an interrupt at `node` ([`ExecutionState::set_interrupt`]): called by the graph
    /// runner, or by your own loop when it pauses a run.
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

    /// Clears the interrupt, allowing execution to resume ([`ExecutionState::clear_interrupt`]):
    /// called by the graph runner, or by your own loop, when it resumes.
    pub fn clear_interrupt(&mut self) {
        self.execution_meta.clear_interrupt();
    }

    /// Increments the step counter ([`ExecutionState::advance_step`]): called by the graph runner,
    /// or by your own loop, once per node transition.
    pub fn advance_step(&mut self) {
        self.execution_meta.advance_step();
    }

    /// Updates the current-node pointer ([`ExecutionState::set_current_node`]): called by the
    /// graph runner, or by your own loop, when it moves to another node.
    pub fn set_current_node(&mut self, node: impl Into<String>) {
        self.execution_meta.set_current_node(node);
    }

    /// Marks execution completed ([`ExecutionState::complete`]): called by the graph runner, or
    /// by your own loop, after the last node.
    pub fn complete(&mut self) {
        self.execution_meta.complete();
    }

    /// Records an error ([`ExecutionState::error`]): called by the graph runner, or by your own
    /// loop, when a node or a merge fails.
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
