//! Keys and ids: what the keyed collections and the keyed reducers compare items by.

use crate::error::ReduceError;
use crate::message::{Message, MessageId};
use std::fmt::Debug;
use std::hash::Hash;
use std::marker::PhantomData;

/// Something with an id, for AgentFlow's `append_items` (which dedupes by `item.id`) and for
/// id lookups in a [`KeyedList`](crate::collections::KeyedList).
///
/// ```
/// use agentstate::reducers::HasId;
///
/// struct Finding { id: u32, text: String }
///
/// impl HasId for Finding {
///     type Id = u32;
///     fn id(&self) -> &u32 { &self.id }
/// }
/// ```
pub trait HasId {
    /// The id's type.
    type Id: Hash + Eq + Debug;
    /// The item's id.
    fn id(&self) -> &Self::Id;
}

/// A key function: maps a list item to the key a keyed reducer compares.
///
/// Build one with [`by_field`] (a closure returning a reference into the item, e.g.
/// `|t: &Task| &t.id`), [`by_value`] (a closure or function returning an owned key), or use
/// [`Identity`] (the item itself) and [`ById`] (the item's [`HasId`] id). Its [`KeyLabel`] is how
/// it shows in a schema.
pub trait KeyFn<T>: KeyLabel {
    /// The key's type; it may borrow from the item.
    type Key<'a>: Hash + Eq
    where
        T: 'a,
        Self: 'a;

    /// The key of `item`. Fails only for keys that can be missing (a JSON item without the key
    /// field); the keyed reducers report that as a `reducer_error`.
    fn key<'a>(&'a self, item: &'a T) -> Result<Self::Key<'a>, ReduceError>;
}

/// The item itself is its key (`dedupe_append()` with no key).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Identity;

impl<T: Hash + Eq> KeyFn<T> for Identity {
    type Key<'a>
        = &'a T
    where
        T: 'a;
    fn key<'a>(&'a self, item: &'a T) -> Result<&'a T, ReduceError> {
        Ok(item)
    }
}

/// The item's [`HasId`] id is its key.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ById;

impl<T: HasId> KeyFn<T> for ById {
    type Key<'a>
        = &'a T::Id
    where
        T: 'a;
    fn key<'a>(&'a self, item: &'a T) -> Result<&'a T::Id, ReduceError> {
        Ok(item.id())
    }
}

/// What a key borrowed by [`KeyRef`] needs: `Hash + Eq`, under a message that names the
/// requirement (what `#[derive(AgentState)]`'s `key = field` reports).
#[doc(hidden)]
#[diagnostic::on_unimplemented(
    message = "the key `{Self}` cannot key a keyed reducer: it must implement Hash and Eq",
    label = "not Hash + Eq",
    note = "floats are neither (NaN != NaN): key by another field, or by a function returning an owned key that is, e.g. `key = |r: &Reading| r.at.to_bits()`"
)]
pub trait KeyType: Hash + Eq {}
// Not looked through: a key missing both traits (a float) is one error, under the message.
#[diagnostic::do_not_recommend]
impl<K: ?Sized + Hash + Eq> KeyType for K {}

/// A key borrowed from the item, built by [`by_field`].
pub struct KeyRef<F, K: ?Sized> {
    f: F,
    label: Option<&'static str>,
    _key: PhantomData<fn(&K)>,
}

impl<F, K: ?Sized> KeyRef<F, K> {
    /// Names the item field this key reads, for schemas.
    pub fn named(mut self, label: &'static str) -> Self {
        self.label = Some(label);
        self
    }
}

impl<F: Clone, K: ?Sized> Clone for KeyRef<F, K> {
    fn clone(&self) -> Self {
        KeyRef {
            f: self.f.clone(),
            label: self.label,
            _key: PhantomData,
        }
    }
}

impl<F, K: ?Sized> Debug for KeyRef<F, K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyRef")
            .field("label", &self.label)
            .finish()
    }
}

impl<T, K, F> KeyFn<T> for KeyRef<F, K>
where
    K: ?Sized + KeyType,
    F: Fn(&T) -> &K,
{
    type Key<'a>
        = &'a K
    where
        T: 'a,
        Self: 'a;
    fn key<'a>(&'a self, item: &'a T) -> Result<&'a K, ReduceError> {
        Ok((self.f)(item))
    }
}

/// A key computed from the item as an owned value, built by [`by_value`].
pub struct KeyValue<F, K> {
    f: F,
    label: Option<&'static str>,
    _key: PhantomData<fn() -> K>,
}

impl<F, K> KeyValue<F, K> {
    /// Names the key for schemas (for example the function's path).
    pub fn named(mut self, label: &'static str) -> Self {
        self.label = Some(label);
        self
    }
}

impl<F: Clone, K> Clone for KeyValue<F, K> {
    fn clone(&self) -> Self {
        KeyValue {
            f: self.f.clone(),
            label: self.label,
            _key: PhantomData,
        }
    }
}

impl<F, K> Debug for KeyValue<F, K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyValue")
            .field("label", &self.label)
            .finish()
    }
}

impl<T, K, F> KeyFn<T> for KeyValue<F, K>
where
    K: Hash + Eq,
    F: Fn(&T) -> K,
{
    type Key<'a>
        = K
    where
        T: 'a,
        Self: 'a;
    fn key<'a>(&'a self, item: &'a T) -> Result<K, ReduceError> {
        Ok((self.f)(item))
    }
}

/// A key that borrows a part of the item: `by_field(|task: &Task| &task.id)`.
///
/// This is the form `#[reducer(merge_by_key(key = id))]` generates. Going through this function
/// is what lets the closure return a reference into its argument.
pub fn by_field<T, K: ?Sized, F: Fn(&T) -> &K>(f: F) -> KeyRef<F, K> {
    KeyRef {
        f,
        label: None,
        _key: PhantomData,
    }
}

/// A key computed as an owned value: `by_value(|m: &Msg| m.tool_call_id.clone())`.
pub fn by_value<T, K, F: Fn(&T) -> K>(f: F) -> KeyValue<F, K> {
    KeyValue {
        f,
        label: None,
        _key: PhantomData,
    }
}

/// How a key function shows in a schema and tells its index apart: the name of the item field it
/// reads, or a function's path, when there is one. It does not depend on the item type, so a
/// reducer can describe itself without knowing the field it runs on.
pub trait KeyLabel {
    /// The label, if any.
    fn key_label(&self) -> Option<&str>;
}

impl KeyLabel for Identity {
    fn key_label(&self) -> Option<&str> {
        None
    }
}
impl KeyLabel for ById {
    fn key_label(&self) -> Option<&str> {
        Some("id")
    }
}
impl<F, K: ?Sized> KeyLabel for KeyRef<F, K> {
    fn key_label(&self) -> Option<&str> {
        self.label
    }
}
impl<F, K> KeyLabel for KeyValue<F, K> {
    fn key_label(&self) -> Option<&str> {
        self.label
    }
}

/// A list-shaped field type, naming its item type. The derive uses it to type key closures.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a list, so a keyed reducer (`merge_by_key`, `dedupe_append` with a key) cannot merge into it",
    label = "not a list",
    note = "keyed reducers merge into `Vec<T>`, `KeyedList<T>` or a JSON array"
)]
pub trait ListField {
    /// The type of the list's items.
    type Item;
}

impl<T> ListField for Vec<T> {
    type Item = T;
}

impl<T> ListField for std::collections::VecDeque<T> {
    type Item = T;
}

impl HasId for Message {
    type Id = MessageId;
    fn id(&self) -> &MessageId {
        &self.message_id
    }
}
