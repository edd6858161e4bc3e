//! Reducers: how a node's partial update merges into one field of the state.
//!
//! Every reducer of the three systems agentstate matches is here, with its exact semantics:
//!
//! | reducer | from | field types | update | round-trip idempotent |
//! |---|---|---|---|---|
//! | [`last_write_wins`](LastWriteWins) (default) | OpenArmature | any `T` | `T` | yes |
//! | [`append`](Append) | OpenArmature | `Vec<T>`, `VecDeque<T>`, JSON array | the field type | no |
//! | [`merge`](Merge) | OpenArmature | `HashMap`, `BTreeMap`, `serde_json::Map`, JSON object | the field type | yes |
//! | [`bounded_append(max_len)`](BoundedAppend) | OpenArmature | `Vec<T>`, `VecDeque<T>`, JSON array | the field type | no |
//! | [`dedupe_append(key?)`](DedupeAppend) | OpenArmature | `Vec<T>`, [`KeyedList<T>`], JSON array | the field type | yes |
//! | [`merge_by_key(key)`](MergeByKey) | OpenArmature | `Vec<T>`, [`KeyedList<T>`], JSON array | the field type | yes |
//! | [`concat_flatten`](ConcatFlatten) | OpenArmature | `Vec<T>`, `VecDeque<T>`, JSON array | `Vec<field type>` | no |
//! | [`merge_all`](MergeAll) | OpenArmature | the maps of `merge`, JSON object | `Vec<field type>` | no |
//! | [`add_messages`](AddMessages) | AgentFlow | `Vec<Message>`, [`MessageList`] | the field type | yes |
//! | [`replace_messages`](ReplaceMessages) | AgentFlow | `Vec<Message>`, [`MessageList`] | the field type | yes |
//! | [`append_items`](AppendItems) | AgentFlow | `Vec<T: HasId>`, [`KeyedList<T: HasId>`] | the field type | yes |
//! | [`replace_value`](ReplaceValue) | AgentFlow | any `T` | `T` | yes |
//! | [`upsert_messages`](UpsertMessages) | LangGraph | `Vec<Message>`, [`MessageList`] | `Vec<MessageUpdate>` | yes |
//! | [`nested`](Nested) | agentstate | a derived state | its update | when all its fields are |
//! | [`add`](Add) | LangGraph (`operator.add` on numbers) | integers, `f32`, `f64`, JSON number | the field type | no |
//!
//! LangGraph's `Annotated[list, operator.add]` concatenates lists: that is [`append`](Append).
//!
//! A list field's update has the field's own type (a `VecDeque` field takes a `VecDeque`, a
//! `KeyedList` field a `KeyedList`; `Vec::into()` converts), so the derive can name every update
//! type from the field type alone. Updates also *compose* ([`Reducer::compose`]): `a.then(b)`
//! merges like `a` then `b`.
//!
//! A reducer is a value implementing [`Reducer<T>`] for the field type `T`. Merging is split in
//! two steps so that a state can merge several fields atomically without cloning itself:
//! [`Reducer::plan`] does everything that can fail while only reading the field, and
//! [`Reducer::apply`] commits the plan and cannot fail. [`Reducer::reduce`] does both.
//!
//! The functions of this module carry the names of the seeds: the AgentFlow reducers are pure
//! functions of `(left, right)` (as in Python), the OpenArmature factories return a reducer.
//!
//! ```
//! use agentstate::reducers::{self, Reducer};
//!
//! // AgentFlow style: a pure function.
//! assert_eq!(reducers::append(vec![1, 2], vec![3]), vec![1, 2, 3]);
//!
//! // OpenArmature style: a factory checked when it is built, then used on a field.
//! let bounded = reducers::bounded_append(3)?;
//! let mut recent = vec![1, 2];
//! bounded.reduce(&mut recent, vec![3, 4])?;
//! assert_eq!(recent, vec![2, 3, 4]);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! ## Keys
//!
//! The keyed reducers and [`KeyedList`](crate::KeyedList) compare items by a key: [`HasId`] (an
//! item's id, as AgentFlow's `append_items` and `add_messages` use it), [`KeyFn`] (a key
//! function: [`Identity`], [`ById`], [`by_field`], [`by_value`]), [`KeyLabel`] (how a key
//! function shows in a schema) and [`ListField`] (a list-shaped field type).
//!
//! ```
//! use agentstate::reducers::{by_field, KeyFn};
//!
//! struct Task { id: u32 }
//! let key = by_field(|t: &Task| &t.id);
//! assert_eq!(key.key(&Task { id: 7 })?, &7);
//! # Ok::<(), agentstate::ReduceError>(())
//! ```
//!
//! [`KeyedList<T>`]: crate::KeyedList
//! [`KeyedList<T: HasId>`]: crate::KeyedList
//! [`MessageList`]: crate::MessageList

mod basic;
mod bounded;
mod custom;
pub(crate) mod json;
mod keyed;
mod messages;
mod nested;
mod numeric;

pub use crate::keys::{
    by_field, by_value, ById, HasId, Identity, KeyFn, KeyLabel, KeyRef, KeyType, KeyValue,
    ListField,
};
pub use basic::{Append, ConcatFlatten, LastWriteWins, Merge, MergeAll, ReplaceValue};
pub use bounded::BoundedAppend;
pub use custom::{FnReducer, InOrder, Steps};
pub use json::{JsonField, JsonValue};
pub use keyed::{DedupeAppend, KeyedPlan, MergeByKey};
pub use messages::{
    remove_tool_messages, AddMessages, AppendItems, MessageUpdate, ReplaceMessages, UpsertMessages,
    UpsertPlan, REMOVE_ALL_MESSAGES,
};
pub use nested::Nested;
pub use numeric::Add;

use crate::error::ReduceError;
use serde_json::{Map, Value};

/// What every reducer tells about itself, independent of the field type it runs on.
pub trait ReducerInfo {
    /// The reducer's name, as in the seeds (`append`, `bounded_append`, `add_messages`, ...).
    fn name(&self) -> &'static str;

    /// The reducer's parameters, as JSON (`{"max_len": 3}` for `bounded_append(max_len = 3)`).
    fn params(&self) -> Map<String, Value> {
        Map::new()
    }

    /// Whether merging an already merged value again changes nothing (OpenArmature's
    /// round-trip idempotence).
    fn round_trip_idempotent(&self) -> bool;
}

/// The types a reducer merges a field of type `T` with: what an update carries for the field,
/// and the checked plan between [`Reducer::plan`] and [`Reducer::apply`].
///
/// It is separate from [`Reducer`] so that the types can be named without the reducer's key
/// function (a closure's type cannot be written down): `MergeByKey<K>` merges a `Vec<T>` with a
/// `Vec<T>` update whatever `K` is. The derive names update fields this way.
#[diagnostic::on_unimplemented(
    message = "the reducer `{Self}` cannot merge into a field of type `{T}`",
    label = "`{Self}` does not merge into `{T}`",
    note = "the agentstate::reducers docs list the field types each reducer accepts"
)]
pub trait Merges<T> {
    /// What an update carries for a field with this reducer.
    type Update;

    /// The checked, ready-to-commit result of [`Reducer::plan`].
    type Plan;
}

/// A reducer that merges updates into a field of type `T`.
///
/// Implement it (with [`Merges`] and [`ReducerInfo`]) to write a reducer of your own; the
/// simplest route is a function `fn(&T, U) -> Result<T, E>` wrapped in [`FnReducer`].
///
/// ```
/// use agentstate::ReduceError;
/// use agentstate::reducers::{Merges, Reducer, ReducerInfo};
///
/// /// Adds the update to a counter; fails on overflow.
/// struct Sum;
///
/// impl ReducerInfo for Sum {
///     fn name(&self) -> &'static str { "sum" }
///     fn round_trip_idempotent(&self) -> bool { false }
/// }
///
/// impl Merges<u32> for Sum {
///     type Update = u32;
///     type Plan = u32;
/// }
///
/// impl Reducer<u32> for Sum {
///     fn plan(&self, current: &u32, update: u32) -> Result<u32, ReduceError> {
///         current.checked_add(update).ok_or_else(|| ReduceError::msg("the sum overflows u32"))
///     }
///     fn apply(&self, current: &mut u32, plan: u32) {
///         *current = plan;
///     }
/// }
///
/// let mut total = 40;
/// Sum.reduce(&mut total, 2)?;
/// assert_eq!(total, 42);
/// assert!(Sum.reduce(&mut total, u32::MAX).is_err());
/// assert_eq!(total, 42, "a failed reduce leaves the field unchanged");
/// # Ok::<(), ReduceError>(())
/// ```
#[diagnostic::on_unimplemented(
    message = "the reducer `{Self}` cannot merge into a field of type `{T}`",
    label = "`{Self}` does not merge into `{T}`",
    note = "the agentstate::reducers docs list the field types each reducer accepts"
)]
pub trait Reducer<T>: ReducerInfo + Merges<T> {
    /// Checks `update` against the current value and prepares the merge. Everything that can
    /// fail happens here; the field is only read.
    fn plan(&self, current: &T, update: Self::Update) -> Result<Self::Plan, ReduceError>;

    /// Commits a plan made by [`plan`](Reducer::plan) against the same, unchanged value.
    fn apply(&self, current: &mut T, plan: Self::Plan);

    /// One update with the same effect as merging `first` then `second`, computed without the
    /// field: what `a.then(b)`, parallel fan-in and several node outputs use. `None` when the
    /// two cannot be one update (an integer [`Add`] out of range, JSON values of the wrong
    /// kinds); the default, for reducers written by hand, is `None`. A function reducer is
    /// wrapped in [`InOrder`], whose updates ([`Steps`]) combine by being applied in turn.
    fn compose(&self, first: Self::Update, second: Self::Update) -> Option<Self::Update> {
        let _ = (first, second);
        None
    }

    /// Fills in what a merge would otherwise make up, when the update is made rather than when
    /// it is merged: the ids and timestamps of messages in a JSON `add_messages` or
    /// `replace_messages` update. Merging a prepared update twice, or replaying it from a
    /// journal, then gives the same state. The derive's setters and `from_json` call it; the
    /// default does nothing, which is right for every reducer whose merge makes nothing up.
    ///
    /// ```
    /// use agentstate::reducers::{AddMessages, Reducer};
    /// use serde_json::json;
    ///
    /// let mut update = json!([{"role": "user", "content": [{"type": "text", "text": "hi"}]}]);
    /// Reducer::<serde_json::Value>::prepare(&AddMessages, &mut update);
    /// assert!(update[0]["message_id"].is_string());
    ///
    /// let mut history = json!([]);
    /// AddMessages.reduce(&mut history, update.clone())?;
    /// AddMessages.reduce(&mut history, update)?; // the same message again: nothing added
    /// assert_eq!(history.as_array().unwrap().len(), 1);
    /// # Ok::<(), agentstate::ReduceError>(())
    /// ```
    fn prepare(&self, update: &mut Self::Update) {
        let _ = update;
    }

    /// Plans and applies in one step. On error `current` is unchanged.
    fn reduce(&self, current: &mut T, update: Self::Update) -> Result<(), ReduceError> {
        let plan = self.plan(current, update)?;
        self.apply(current, plan);
        Ok(())
    }
}

/// `last_write_wins`: the default reducer; the update replaces the value.
pub fn last_write_wins<T>(left: T, right: T) -> T {
    let _ = left;
    right
}

/// `append`: the update's items after the existing ones.
///
/// ```
/// assert_eq!(agentstate::reducers::append(vec!["a"], vec!["b", "c"]), ["a", "b", "c"]);
/// ```
pub fn append<T>(mut left: Vec<T>, right: Vec<T>) -> Vec<T> {
    left.extend(right);
    left
}

/// `merge`: a shallow merge of two maps; keys of `right` win.
///
/// ```
/// use std::collections::BTreeMap;
/// let left = BTreeMap::from([("a", 1), ("b", 2)]);
/// let right = BTreeMap::from([("b", 20), ("c", 30)]);
/// let merged = agentstate::reducers::merge(left, right);
/// assert_eq!(merged, BTreeMap::from([("a", 1), ("b", 20), ("c", 30)]));
/// ```
pub fn merge<M: Extend<(K, V)> + IntoIterator<Item = (K, V)>, K, V>(mut left: M, right: M) -> M {
    left.extend(right);
    left
}

/// `bounded_append(max_len)`: builds the reducer; `max_len` must be at least 1
/// (`reducer_configuration_invalid` otherwise). See [`BoundedAppend`].
pub fn bounded_append(max_len: i64) -> Result<BoundedAppend, crate::Error> {
    BoundedAppend::new(max_len)
}

/// `dedupe_append()`: append items not seen before, keyed by the item itself.
/// See [`DedupeAppend`]; [`DedupeAppend::by`] takes a key function.
pub fn dedupe_append() -> DedupeAppend<Identity> {
    DedupeAppend::new()
}

/// `merge_by_key(key)`: keyed merge of a list of records. See [`MergeByKey`].
///
/// ```
/// use agentstate::reducers::{self, Reducer};
///
/// #[derive(Debug, PartialEq)]
/// struct Task { id: u32, status: &'static str }
///
/// let by_id = reducers::merge_by_key(reducers::by_field(|t: &Task| &t.id));
/// let mut tasks = vec![Task { id: 1, status: "pending" }, Task { id: 2, status: "pending" }];
/// by_id.reduce(&mut tasks, vec![Task { id: 2, status: "done" }, Task { id: 3, status: "new" }])?;
/// assert_eq!(tasks.iter().map(|t| (t.id, t.status)).collect::<Vec<_>>(),
///            [(1, "pending"), (2, "done"), (3, "new")]);
/// # Ok::<(), agentstate::ReduceError>(())
/// ```
pub fn merge_by_key<K>(key: K) -> MergeByKey<K> {
    MergeByKey::new(key)
}

/// `concat_flatten`: flatten one level of a list of lists onto the list.
///
/// ```
/// let flat = agentstate::reducers::concat_flatten(vec![1], vec![vec![2, 3], vec![], vec![4]]);
/// assert_eq!(flat, [1, 2, 3, 4]);
/// ```
pub fn concat_flatten<T>(mut left: Vec<T>, right: Vec<Vec<T>>) -> Vec<T> {
    left.extend(right.into_iter().flatten());
    left
}

/// `merge_all`: fold a list of maps onto the map, last write wins.
///
/// ```
/// use std::collections::BTreeMap;
/// let merged = agentstate::reducers::merge_all(
///     BTreeMap::from([("a", 1)]),
///     vec![BTreeMap::from([("b", 2)]), BTreeMap::from([("a", 3)])],
/// );
/// assert_eq!(merged, BTreeMap::from([("a", 3), ("b", 2)]));
/// ```
pub fn merge_all<M: Extend<(K, V)> + IntoIterator<Item = (K, V)>, K, V>(
    mut left: M,
    right: Vec<M>,
) -> M {
    for map in right {
        left.extend(map);
    }
    left
}

/// `add_messages` (AgentFlow): append the messages of `right` whose id is not among `left`'s
/// ids and that are not deltas. See [`AddMessages`] for the exact rules.
pub fn add_messages(
    mut left: Vec<crate::message::Message>,
    right: Vec<crate::message::Message>,
) -> Vec<crate::message::Message> {
    let fresh = messages::fresh_messages(&left, right);
    left.extend(fresh);
    left
}

/// `replace_messages` (AgentFlow): the new list replaces the old one.
pub fn replace_messages(
    left: Vec<crate::message::Message>,
    right: Vec<crate::message::Message>,
) -> Vec<crate::message::Message> {
    let _ = left;
    right
}

/// `append_items` (AgentFlow): append the items of `right` whose id is not among `left`'s ids.
/// Duplicates inside `right` are all kept, as in AgentFlow. See [`AppendItems`].
pub fn append_items<T: HasId>(mut left: Vec<T>, right: Vec<T>) -> Vec<T> {
    let fresh = messages::fresh_items(&left, right);
    left.extend(fresh);
    left
}

/// `replace_value` (AgentFlow): the new value replaces the old one.
pub fn replace_value<T>(left: T, right: T) -> T {
    let _ = left;
    right
}

/// `upsert_messages` (LangGraph's `add_messages`): replace by id in place, append new ids,
/// delete with [`MessageUpdate::Remove`], clear with [`MessageUpdate::RemoveAll`].
/// See [`UpsertMessages`].
pub fn upsert_messages(
    mut left: Vec<crate::message::Message>,
    right: Vec<MessageUpdate>,
) -> Result<Vec<crate::message::Message>, ReduceError> {
    UpsertMessages.reduce(&mut left, right)?;
    Ok(left)
}
