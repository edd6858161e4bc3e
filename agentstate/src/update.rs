//! Partial updates: what a node returns and a state merges.

use crate::collections::KeyedList;
use crate::error::{did_you_mean, Error, ReduceError};
use crate::reducers::Reducer;
use crate::state::State;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer};
use serde_json::{Map, Value};
use std::collections::VecDeque;

/// Deserializes an update entry that is present in the JSON: `null` becomes `Some(None)` for an
/// `Option` field, where serde alone would read it as "absent". Use it with
/// `#[serde(default, deserialize_with = "agentstate::present")]`.
///
/// ```
/// #[derive(serde::Deserialize)]
/// struct Update {
///     #[serde(default, deserialize_with = "agentstate::present")]
///     summary: Option<Option<String>>,
/// }
/// let cleared: Update = serde_json::from_str(r#"{"summary": null}"#)?;
/// assert_eq!(cleared.summary, Some(None));
/// let untouched: Update = serde_json::from_str("{}")?;
/// assert_eq!(untouched.summary, None);
/// # Ok::<(), serde_json::Error>(())
/// ```
pub fn present<'de, D, T>(deserializer: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    T::deserialize(deserializer).map(Some)
}

/// Whether a `serde_path_to_error` path says nothing (the root, or lost in a flattened part).
fn path_is_lost(path: &str) -> bool {
    path.is_empty() || path == "." || path == "?"
}

/// What a generated setter takes for a field of type `T`: the field's type itself, or a value
/// that converts into it.
///
/// Setters could take `impl Into<T>`, but `u64` converts from eight other types, so `Into` would
/// leave an integer literal's type open and fall back to `i32` (`.tokens_used(120)` would not
/// compile). This trait has one implementation per target type shape, so a literal takes the
/// field's type: `120` is a `u64` for a `u64` field and `Some(120)` an `Option<u64>`.
///
/// Besides `T` itself it takes a `&str`, `&String` or `Cow<str>` for a `String`, a `&str` for an
/// `Option<String>`, a `T` for an `Option<T>`, a `Vec<T>` or an array for a `Vec<T>`,
/// `VecDeque<T>` or [`KeyedList<T>`](crate::collections::KeyedList) (so for a `MessageList`),
/// and an array of `&str` for a `Vec<String>` or `VecDeque<String>` (`.log(["a", "b"])`).
/// Implement it for your own field types to let their setters take more.
///
/// A setter sets its field's entry: called again on one update, it replaces the value set
/// before. To combine two values through the field's reducer, compose two updates:
/// `a.then(b)` ([`Update::then`]) appends both lists, adds both numbers, runs a `with = f`
/// function on both in turn.
///
/// An array for a list of `String`s may then hold `String`s or `&str`s, so an array whose
/// element type is left open is ambiguous there: write `vec![]` rather than `[]`, and
/// `vec!["a".into()]` rather than `["a".into()]`. A `Vec<&str>` is not taken, for the same
/// reason (`vec![]` would be ambiguous).
///
/// ```
/// use agentstate::{AgentState, State};
///
/// #[derive(AgentState, Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
/// pub struct Usage {
///     tokens_used: u64,
///     model: Option<String>,
///     #[reducer(bounded_append(max_len = 3))]
///     latencies: std::collections::VecDeque<u32>,
///     #[reducer(append)]
///     log: Vec<String>,
/// }
///
/// let mut usage = Usage::default();
/// usage.merge(
///     UsageUpdate::default().tokens_used(120).model("gpt").latencies([40, 52]).log(["a", "b"]),
/// )?;
/// assert_eq!(usage.tokens_used, 120);
/// assert_eq!(usage.model.as_deref(), Some("gpt"));
/// assert_eq!(usage.log, ["a", "b"]);
/// # Ok::<(), agentstate::Error>(())
/// ```
#[diagnostic::on_unimplemented(
    message = "a setter of a field of type `{T}` cannot take a `{Self}`",
    label = "expected `{T}`",
    note = "setters take the field's type; also a `&str` for a `String`, a `T` for an `Option<T>`, a `Vec` or an array for a `Vec`, `VecDeque` or `KeyedList`, and `&str`s for `String`s in a list (see agentstate::IntoField)"
)]
pub trait IntoField<T> {
    /// The field's value.
    fn into_field(self) -> T;
}

impl<T> IntoField<T> for T {
    #[inline]
    fn into_field(self) -> T {
        self
    }
}

impl<T> IntoField<Option<T>> for T {
    #[inline]
    fn into_field(self) -> Option<T> {
        Some(self)
    }
}

impl IntoField<String> for &str {
    #[inline]
    fn into_field(self) -> String {
        self.to_owned()
    }
}

impl IntoField<Option<String>> for &str {
    #[inline]
    fn into_field(self) -> Option<String> {
        Some(self.to_owned())
    }
}

impl IntoField<String> for &String {
    #[inline]
    fn into_field(self) -> String {
        self.clone()
    }
}

impl IntoField<String> for std::borrow::Cow<'_, str> {
    #[inline]
    fn into_field(self) -> String {
        self.into_owned()
    }
}

impl<T, const N: usize> IntoField<Vec<T>> for [T; N] {
    #[inline]
    fn into_field(self) -> Vec<T> {
        self.into()
    }
}

impl<T> IntoField<VecDeque<T>> for Vec<T> {
    #[inline]
    fn into_field(self) -> VecDeque<T> {
        self.into()
    }
}

impl<T, const N: usize> IntoField<VecDeque<T>> for [T; N] {
    #[inline]
    fn into_field(self) -> VecDeque<T> {
        self.into()
    }
}

/// One update of a user reducer's field (`#[reducer(with = f)]`), whose update holds
/// [`Steps`](crate::reducers::Steps).
impl<U> IntoField<crate::reducers::Steps<U>> for U {
    #[inline]
    fn into_field(self) -> crate::reducers::Steps<U> {
        crate::reducers::Steps::from(self)
    }
}

/// Lists of `&str` for lists of `String`: `.notes(["a", "b"])`. One implementation per list
/// shape, as for the other lists, so that an integer literal in an array still takes the
/// element type of the field (`.latencies([40, 52])` on a `Vec<u32>`).
macro_rules! str_lists {
    ($($list:ident),*) => {$(
        impl<const N: usize> IntoField<$list<String>> for [&str; N] {
            #[inline]
            fn into_field(self) -> $list<String> {
                self.into_iter().map(str::to_owned).collect()
            }
        }
    )*};
}

str_lists!(Vec, VecDeque);

impl<T> IntoField<KeyedList<T>> for Vec<T> {
    #[inline]
    fn into_field(self) -> KeyedList<T> {
        self.into()
    }
}

impl<T, const N: usize> IntoField<KeyedList<T>> for [T; N] {
    #[inline]
    fn into_field(self) -> KeyedList<T> {
        Vec::from(self).into()
    }
}

/// Implemented by a state that other states may extend (`#[agent_state(base)]`): the derive
/// implements it for a struct marked `#[agent_state(extensible)]`, and generates with it the
/// setters trait of the struct's update, `<Update>Setters`, through which an extending state's
/// update sets the base's fields. A state that is not marked does not pay for that trait (it
/// repeats every setter), and extending it is a compile error saying to mark it.
///
/// ```
/// use agentstate::{AgentState, State};
///
/// #[derive(AgentState, Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
/// #[agent_state(extensible)] // other states may extend this one
/// struct Research {
///     #[reducer(append)]
///     notes: Vec<String>,
/// }
///
/// #[derive(AgentState, Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
/// struct Review {
///     #[agent_state(base)]
///     #[serde(flatten)]
///     research: Research,
///     verdict: String,
/// }
///
/// // The base's setters (from `ResearchUpdateSetters`) on the extending state's update:
/// let update = ReviewUpdate::default()
///     .notes(vec!["checked".to_string()])
///     .verdict("ok".to_string());
/// let mut review = Review::default();
/// review.merge(update)?;
/// assert_eq!(review.notes, ["checked"]);
/// assert_eq!(review.verdict, "ok");
/// # Ok::<(), agentstate::Error>(())
/// ```
#[diagnostic::on_unimplemented(
    message = "the base state `{Self}` is not extensible",
    label = "`{Self}` is not marked #[agent_state(extensible)]",
    note = "add #[agent_state(extensible)] to `{Self}`: it generates the setters trait through which this state's update sets the base's fields"
)]
pub trait Extensible {}

/// Implemented by the update of a state that extends another (`#[agent_state(base)]`), for the
/// base state's update type `U`: gives access to the base's part of the update, so that the
/// base's generated setters trait (`<U>Setters`, e.g. `AgentStateUpdateSetters`, generated for a
/// base marked `#[agent_state(extensible)]`, see [`Extensible`]) works on the extended update.
pub trait Extends<U> {
    /// The base state's part of this update.
    fn base_update(&mut self) -> &mut U;
}

/// The update type of a state: implemented by `#[derive(AgentState)]`. Gives JSON parsing with
/// field-level errors and composition.
///
/// An update has one optional entry per state field; `None` leaves the field alone. Beside the
/// entries, every update has an *overwrite* slot per field (`update.overwrite.<field>`, or the
/// `overwrite_<field>` setter) that replaces the field's value, bypassing its reducer: clear a
/// list whose reducer is `append`, reset a bounded buffer, drop the context.
///
/// Updates compose: `a.then(b)` is one update whose effect equals merging `a` then `b`.
///
/// In JSON an absent key leaves the field alone, `null` for an `Option` field sets it to `None`,
/// and `{"field": {"__overwrite__": value}}` is an Overwrite (LangGraph's form). [`Update::from_json`]
/// rejects unknown keys with a "did you mean" hint, and names the field and the JSON path of a
/// value that does not fit.
///
/// ```
/// use agentstate::state::{AgentState, AgentStateUpdate};
/// use agentstate::message::{Message, Role};
/// use agentstate::Update;
/// use agentstate::State;
///
/// let mut state = AgentState::default();
/// state.merge(AgentStateUpdate::default().context(vec![Message::text_message("hi", Role::User)]))?;
///
/// // `add_messages` never removes; an Overwrite does.
/// state.merge(AgentStateUpdate::from_json(serde_json::json!({"context": {"__overwrite__": []}}))?)?;
/// assert!(state.context.is_empty());
///
/// let err = AgentStateUpdate::from_json(serde_json::json!({"contxt": []})).unwrap_err();
/// assert_eq!(err.to_string(), "field `contxt` is not a field of this state; did you mean `context`?");
/// # Ok::<(), agentstate::Error>(())
/// ```
///
/// ## Details
///
/// - **JSON errors**: a value that does not fit names the field and the JSON path
///   (``field `cart` has a value that does not fit at `cart[1].qty`: ...``; when several values
///   fail, the error is one value's); a value nested deeper than [`MAX_DEPTH`] arrays and objects
///   is refused without recursing into it; a non-object is rejected. `from_json_lenient` /
///   `apply_json_lenient`, chosen explicitly, ignore unknown keys and return them. On any error
///   the state is unchanged.
/// - **Overwrite forms**: typed `update.overwrite_<field>(value)`, JSON
///   `{"field": {"__overwrite__": value}}` (LangGraph's) or `"field.__overwrite__": value` (the
///   serialized form); both forms for one field in one update is an error. On a field without a
///   reducer an Overwrite sets the value; LangGraph (1.2.22) stores the `Overwrite(value=...)`
///   wrapper itself there, a departure we keep.
/// - **Messages in JSON**: an `add_messages` or `replace_messages` update gets its messages' ids
///   and timestamps when it is made (setters and `from_json` call
///   [`Reducer::prepare`]), not at each merge: merging it twice
///   adds nothing the second time, and a journal replays it exactly.
/// - **Composition**: `a.then(b)` works for every reducer of the crate; a user reducer
///   (`with = f`) cannot combine two updates, and `then` says so.
/// - **Fan-in** ([`State::merge_parallel`]): branches apply
///   atomically in branch order; two Overwrites of one field are always an error, and an
///   Overwrite wins over other branches' writes to its field. Checked against steps of a real
///   LangGraph graph (`tests/data/langgraph_fan_in.json`, made by
///   `tests/data/generate_langgraph_fan_in.py`).
pub trait Update: Sized + Default {
    /// The state this updates.
    type State: State<Update = Self>;

    /// Parses a JSON update strictly: the value must be an object; a key that is not a field is
    /// a `state_validation_error` naming it (with a "did you mean" hint when one is close); a
    /// value that does not fit its field is a `state_validation_error` naming the field and the
    /// JSON path. `{"field": {"__overwrite__": value}}` is an Overwrite of the field.
    fn from_json(value: Value) -> Result<Self, Error>
    where
        Self: DeserializeOwned,
    {
        parse::<Self>(value, Strictness::Strict).map(|(update, _)| update)
    }

    /// Fills in what merging this update would otherwise make up: the ids and timestamps of
    /// messages in its JSON (`serde_json::Value`) `add_messages` and `replace_messages` fields
    /// ([`Reducer::prepare`]). The generated setters and
    /// [`from_json`](Update::from_json) call it, so that merging the update twice, or replaying
    /// it from a journal, gives the same state; call it yourself on an update built otherwise
    /// (a struct literal, plain serde). Preparing twice changes nothing.
    fn prepare(&mut self) {}

    /// Parses a JSON update leniently, as chosen explicitly: keys that are not fields are
    /// ignored and returned; everything else is checked as in [`from_json`](Update::from_json).
    fn from_json_lenient(value: Value) -> Result<(Self, Vec<String>), Error>
    where
        Self: DeserializeOwned,
    {
        parse::<Self>(value, Strictness::Lenient)
    }

    /// One update whose effect equals merging `self` then `next`. Fails only when a field both
    /// set has two updates its reducer cannot combine into one: an integer `add` whose sum is
    /// out of range, an `upsert_messages` removal followed by the same id, JSON values of the
    /// wrong kinds. (A user function's updates combine by running it on each in turn.)
    fn then(self, next: Self) -> Result<Self, Error> {
        <Self::State as State>::compose(self, next, Combine::Sequence)
    }
}

/// How two updates combine (see [`State::compose`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Combine {
    /// One after the other: the result merges like the first then the second.
    Sequence,
    /// Writes of parallel branches in one step, in branch order.
    Parallel(FanIn),
}

/// How strictly parallel writes are checked (see [`State::merge_parallel`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum FanIn {
    /// Writes fold through each field's reducer in branch order; for a `last_write_wins` field
    /// the last branch wins.
    #[default]
    Ordered,
    /// As `Ordered`, but two branches writing one `last_write_wins` field is an error.
    Strict,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Strictness {
    Strict,
    Lenient,
}

/// The JSON key of an Overwrite of `field` in an update's serialized form.
#[doc(hidden)]
pub const OVERWRITE_SUFFIX: &str = ".__overwrite__";

/// How deeply a JSON update may nest arrays and objects (the update object itself counts as
/// one level). serde_json's parser stops at 128 levels, so every update it parsed fits; a
/// `Value` built in code could nest deeper than the stack can deserialize.
pub const MAX_DEPTH: usize = 128;

/// Parses a JSON update. Only the deserialization itself depends on `U`; checking, normalizing
/// and explaining errors happen in [`normalize`] and [`explain`], compiled once in this crate
/// rather than once per update type in the user's.
fn parse<U: Update + DeserializeOwned>(
    value: Value,
    strictness: Strictness,
) -> Result<(U, Vec<String>), Error> {
    let state = (<U::State as State>::FIELDS, <U::State as State>::MESSAGES);
    let (value, ignored) = normalize(value, state, strictness)?;
    match deserialize::<U>(&value) {
        Ok(mut update) => {
            update.prepare();
            Ok((update, ignored))
        }
        Err(failure) => Err(explain(&value, failure, &mut |alone| {
            deserialize::<U>(alone).err()
        })),
    }
}

/// Where a value did not fit (`serde_path_to_error`'s path; empty when serde lost it) and why.
struct Failure {
    path: String,
    message: String,
}

fn deserialize<U: DeserializeOwned>(value: &Value) -> Result<U, Failure> {
    serde_path_to_error::deserialize::<_, U>(value).map_err(|err| Failure {
        path: err.path().to_string(),
        message: err.into_inner().to_string(),
    })
}

/// Checks an update's JSON against the state's field names (and its messages field's, for the
/// hint) and puts both Overwrite spellings into the serialized one (`"field.__overwrite__"`).
/// Returns the object and, when lenient, the ignored keys.
fn normalize(
    value: Value,
    (fields, messages): (&[&str], Option<&str>),
    strictness: Strictness,
) -> Result<(Value, Vec<String>), Error> {
    let Value::Object(object) = value else {
        return Err(Error::validation(
            "(update)",
            format!(
                "must be a JSON object of field values, got {}",
                crate::reducers::json::kind_of(&value)
            ),
        ));
    };
    let mut ignored = Vec::new();
    let mut normalized = Map::with_capacity(object.len());
    for (key, value) in object {
        let field = key.strip_suffix(OVERWRITE_SUFFIX).unwrap_or(&key);
        if !fields.contains(&field) {
            match strictness {
                Strictness::Lenient => {
                    ignored.push(key);
                    continue;
                }
                Strictness::Strict => {
                    return Err(Error::validation(
                        field,
                        format!(
                            "is not a field of this state{}",
                            hint(field, fields, messages)
                        ),
                    ));
                }
            }
        }
        if too_deep(&value, MAX_DEPTH - 1) {
            drop_iteratively(value);
            return Err(Error::validation(
                field,
                format!(
                    "has a value nested deeper than {MAX_DEPTH} levels of arrays and objects (the update included), more than a JSON update may have"
                ),
            ));
        }
        let (key, value) = match value {
            Value::Object(mut inner) if inner.len() == 1 && inner.contains_key("__overwrite__") => {
                let overwrite = inner.remove("__overwrite__").unwrap_or(Value::Null);
                (format!("{field}{OVERWRITE_SUFFIX}"), overwrite)
            }
            other => (key, other),
        };
        if key.ends_with(OVERWRITE_SUFFIX) && normalized.contains_key(&key) {
            let field = key.trim_end_matches(OVERWRITE_SUFFIX);
            return Err(Error::validation(
                field,
                format!(
                    "has two Overwrites in one update (`{{\"{field}\": {{\"__overwrite__\": ...}}}}` and `\"{field}{OVERWRITE_SUFFIX}\"`); give one"
                ),
            ));
        }
        normalized.insert(key, value);
    }
    Ok((Value::Object(normalized), ignored))
}

/// The names other systems give the messages field (LangGraph's `MessagesState` has `messages`).
const MESSAGES_NAMES: &[&str] = &[
    "messages",
    "message",
    "history",
    "chat_history",
    "conversation",
];

/// The hint after "is not a field of this state": the closest field's name when one is close,
/// else the messages field when the key is another system's name for it.
fn hint(key: &str, fields: &[&str], messages: Option<&str>) -> String {
    if let Some(close) = did_you_mean(key, fields.iter().copied()) {
        return format!("; did you mean `{close}`?");
    }
    match messages {
        Some(messages) if MESSAGES_NAMES.contains(&key) => {
            format!("; this state's messages are in `{messages}`")
        }
        _ => String::new(),
    }
}

/// Whether `value` nests more than `limit` levels of arrays and objects. Iterative, so that a
/// value too deep for the stack is measured without recursion.
fn too_deep(value: &Value, limit: usize) -> bool {
    let mut stack = vec![(value, 1usize)];
    while let Some((value, depth)) = stack.pop() {
        match value {
            Value::Array(items) => {
                if depth > limit {
                    return true;
                }
                stack.extend(items.iter().map(|child| (child, depth + 1)));
            }
            Value::Object(map) => {
                if depth > limit {
                    return true;
                }
                stack.extend(map.values().map(|child| (child, depth + 1)));
            }
            _ => {}
        }
    }
    false
}

/// Drops a value without recursion (dropping a `Value` recurses once per level).
fn drop_iteratively(value: Value) {
    let mut stack = vec![value];
    while let Some(value) = stack.pop() {
        match value {
            Value::Array(items) => stack.extend(items),
            Value::Object(map) => stack.extend(map.into_iter().map(|(_, child)| child)),
            _ => {}
        }
    }
}

/// Turns a deserialization failure into an error naming the field whose value failed and the
/// JSON path inside it. In a flattened part (the base's fields, the Overwrites) serde loses the
/// path, and the failure may come from any of the flattened entries; so the entries are
/// deserialized one at a time, and the error is the first failing entry's own, pairing its
/// name with its message by construction.
fn explain(
    object: &Value,
    failure: Failure,
    alone: &mut dyn FnMut(&Value) -> Option<Failure>,
) -> Error {
    if !path_is_lost(&failure.path) {
        let field = failure.path.split(['.', '[']).next().unwrap_or_default();
        return not_fitting(field, &failure.path, &failure.message);
    }
    let entries = object.as_object().into_iter().flatten();
    let found = entries.into_iter().find_map(|(key, value)| {
        let single = Value::Object(Map::from_iter([(key.clone(), value.clone())]));
        alone(&single).map(|failure| (key, failure))
    });
    let Some((key, failure)) = found else {
        // No entry fails alone: report the failure as it came.
        return not_fitting("(update)", "(update)", &failure.message);
    };
    let field = key.trim_end_matches(OVERWRITE_SUFFIX);
    if !path_is_lost(&failure.path) {
        return not_fitting(field, &failure.path, &failure.message);
    }
    // The path that `flattened` / `present_flattened` put in the message: relative (`[1]`,
    // `.key`) inside an Overwrite's value, absolute (`context[1].role`) for a base's field.
    match failure
        .message
        .strip_prefix("at `")
        .and_then(|rest| rest.split_once("`: "))
    {
        Some((at, rest)) if at.starts_with(['[', '.']) => {
            not_fitting(field, &format!("{field}{at}"), rest)
        }
        Some((at, rest)) => not_fitting(field, at, rest),
        None => not_fitting(field, field, &failure.message),
    }
}

fn not_fitting(field: &str, path: &str, message: &str) -> Error {
    Error::validation(
        field.trim_end_matches(OVERWRITE_SUFFIX),
        format!(
            "has a value that does not fit at `{}`: {message}",
            path.replace(OVERWRITE_SUFFIX, "")
        ),
    )
}

/// A field's part of a state plan: leave it, reduce it, or overwrite it (then reduce the
/// update's ordinary entry, if any, on top of the new value).
#[doc(hidden)]
#[derive(Debug)]
pub enum FieldPlan<T, P> {
    Keep,
    Reduce(P),
    Overwrite(T, Option<P>),
}

/// Plans one field: an Overwrite replaces the value, a present entry goes through the reducer
/// (against the overwritten value when both are given); a failure names the field.
#[doc(hidden)]
pub(crate) fn plan_field<T, R: Reducer<T>>(
    field: &str,
    reducer: &R,
    current: &T,
    overwrite: Option<T>,
    update: Option<R::Update>,
) -> Result<FieldPlan<T, R::Plan>, Error> {
    let fail = |e: ReduceError| e.into_error(field, reducer.name());
    Ok(match (overwrite, update) {
        (None, None) => FieldPlan::Keep,
        (None, Some(u)) => FieldPlan::Reduce(reducer.plan(current, u).map_err(fail)?),
        (Some(v), u) => {
            let plan = u.map(|u| reducer.plan(&v, u)).transpose().map_err(fail)?;
            FieldPlan::Overwrite(v, plan)
        }
    })
}

/// Applies one field's plan.
#[doc(hidden)]
pub(crate) fn apply_field<T, R: Reducer<T>>(
    reducer: &R,
    current: &mut T,
    plan: FieldPlan<T, R::Plan>,
) {
    match plan {
        FieldPlan::Keep => {}
        FieldPlan::Reduce(plan) => reducer.apply(current, plan),
        FieldPlan::Overwrite(value, plan) => {
            *current = value;
            if let Some(plan) = plan {
                reducer.apply(current, plan);
            }
        }
    }
}

/// Plans a nested state field (`#[reducer(nested)]`): the inner state's own merge, with the
/// inner field names of any error prefixed by the outer field (`research.notes`).
#[doc(hidden)]
pub(crate) fn plan_nested<S: State>(
    field: &str,
    current: &S,
    overwrite: Option<S>,
    update: Option<S::Update>,
) -> Result<FieldPlan<S, S::Plan>, Error> {
    let nest = |e: Error| e.nested_in(field);
    Ok(match (overwrite, update) {
        (None, None) => FieldPlan::Keep,
        (None, Some(u)) => FieldPlan::Reduce(current.plan(u).map_err(nest)?),
        (Some(v), u) => {
            let plan = u.map(|u| v.plan(u)).transpose().map_err(nest)?;
            FieldPlan::Overwrite(v, plan)
        }
    })
}

/// Applies a nested state field's plan.
#[doc(hidden)]
pub(crate) fn apply_nested<S: State>(current: &mut S, plan: FieldPlan<S, S::Plan>) {
    match plan {
        FieldPlan::Keep => {}
        FieldPlan::Reduce(plan) => current.apply(plan),
        FieldPlan::Overwrite(value, plan) => {
            *current = value;
            if let Some(plan) = plan {
                current.apply(plan);
            }
        }
    }
}

/// A field's overwrite and ordinary entry, as combined by [`compose_field`].
#[doc(hidden)]
pub(crate) type Entry<T, U> = (Option<T>, Option<U>);

/// Combines two updates' entries for one field.
#[doc(hidden)]
pub(crate) fn compose_field<T, U>(
    field: &str,
    reducer: &'static str,
    last_write_wins: bool,
    how: Combine,
    first: Entry<T, U>,
    second: Entry<T, U>,
    combine: impl FnOnce(U, U) -> Result<U, Error>,
) -> Result<Entry<T, U>, Error> {
    let ((ow1, u1), (ow2, u2)) = (first, second);
    let both = |u1: Option<U>, u2: Option<U>| -> Result<Option<U>, Error> {
        Ok(match (u1, u2) {
            (Some(a), Some(b)) => Some(combine(a, b)?),
            (a, b) => a.or(b),
        })
    };
    match how {
        Combine::Sequence => match ow2 {
            Some(v) => Ok((Some(v), u2)),
            None => Ok((ow1, both(u1, u2)?)),
        },
        Combine::Parallel(mode) => match (ow1, ow2) {
            (Some(_), Some(_)) => Err(Error::validation(
                field,
                "got two Overwrites in one step; only one branch may overwrite a field",
            )),
            // An Overwrite wins over the other branches' ordinary writes.
            (Some(v), None) => Ok((Some(v), u1)),
            (None, Some(v)) => Ok((Some(v), u2)),
            (None, None) => {
                if mode == FanIn::Strict && last_write_wins && u1.is_some() && u2.is_some() {
                    return Err(Error::validation(
                        field,
                        format!(
                            "was written by two parallel branches in one step, and its reducer `{reducer}` cannot combine them (INVALID_CONCURRENT_GRAPH_UPDATE); give it a reducer or write it from one branch"
                        ),
                    ));
                }
                Ok((None, both(u1, u2)?))
            }
        },
    }
}

/// Combines two updates of a field through its reducer.
#[doc(hidden)]
pub(crate) fn compose_with<'a, T, R: Reducer<T>>(
    field: &'a str,
    reducer: &'a R,
) -> impl FnOnce(R::Update, R::Update) -> Result<R::Update, Error> + 'a {
    move |a, b| {
        reducer.compose(a, b).ok_or_else(|| {
            ReduceError::msg(
                "this reducer cannot combine two updates into one; merge them one at a time",
            )
            .into_error(field, reducer.name())
        })
    }
}

/// Combines two updates of a nested state field.
#[doc(hidden)]
pub(crate) fn compose_nested<S: State>(
    field: &str,
    how: Combine,
) -> impl FnOnce(S::Update, S::Update) -> Result<S::Update, Error> {
    let field = field.to_owned();
    move |a, b| S::compose(a, b, how).map_err(|e| e.nested_in(&field))
}

#[cfg(test)]
mod tests {
    use crate::state::AgentStateUpdate;
    use serde_json::json;

    #[test]
    fn an_error_inside_an_overwrite_names_its_path() {
        // The Overwrites are a flattened part of the update, where serde loses the path.
        let err = AgentStateUpdate::from_json(json!({
            "context": {"__overwrite__": [{"role": "user", "content": []}, {"role": "robot", "content": []}]}
        }))
        .unwrap_err();
        assert_eq!(err.field(), Some("context"));
        assert!(
            err.to_string()
                .starts_with("field `context` has a value that does not fit at `context[1].role`: unknown variant `robot`"),
            "{err}"
        );
        let err =
            AgentStateUpdate::from_json(json!({"execution_meta": {"__overwrite__": {"step": -1}}}))
                .unwrap_err();
        assert!(
            err.to_string().contains("at `execution_meta.step`"),
            "{err}"
        );
        // At the value itself: the field.
        let err = AgentStateUpdate::from_json(json!({"context_summary": {"__overwrite__": 5}}))
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "field `context_summary` has a value that does not fit at `context_summary`: invalid type: integer `5`, expected a string"
        );
    }
}
