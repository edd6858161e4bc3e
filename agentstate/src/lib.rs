//! # agentstate
//!
//! Typed, compile-time-checked agent state for Rust agent graphs.
//!
//! An agent graph's state is a struct whose fields each declare how a node's partial update
//! merges into them: with a *reducer*. agentstate has the reducers of AgentFlow, OpenArmature
//! and LangGraph with their exact semantics ([`reducers`]), the error categories of
//! OpenArmature ([`error`]), AgentFlow's chat [`message`] model with its JSON wire format,
//! AgentFlow's [`AgentState`](struct@state::AgentState) base, indexed [`collections`] that keep merges
//! O(k) in long-lived states, runtime [`schema`]s for configuration-driven agents, partial
//! [`update`]s (JSON, Overwrite, composition, fan-in), node [`output`]s and tool results, a
//! [`journal`] for replay, the [`context`] window (pairing-safe views of the history for each
//! model call, token counting, summaries), [`providers`]' request formats (OpenAI Chat and
//! Responses, Anthropic, Gemini, and their responses back into messages), the [`keys`] items are
//! compared by, and (feature `ag-ui`) the AG-UI event-stream fold in `agui`.
//!
//! `#[derive(AgentState)]` (default feature `derive`) implements [`State`] for a struct whose
//! fields declare their reducers; see the README for the attribute grammar.
//!
//! ```
//! use agentstate::message::{Message, Role};
//! use agentstate::state::{AgentState, AgentStateUpdate};
//! use agentstate::State;
//!
//! let mut state = AgentState::default();
//! state.merge(AgentStateUpdate::default().context(vec![Message::text_message("Hello!", Role::User)]))?;
//! assert_eq!(state.context.len(), 1);
//! assert_eq!(state.context[0].text(), "Hello!");
//! # Ok::<(), agentstate::Error>(())
//! ```

#![warn(missing_docs)]

// Lets the derive's generated `::agentstate::...` paths resolve inside this crate too.
extern crate self as agentstate;

#[cfg(feature = "ag-ui")]
pub mod agui;
pub mod collections;
pub mod context;
pub mod error;
pub mod journal;
pub mod keys;
pub mod message;
pub mod output;
pub mod providers;
pub mod reducers;
pub mod schema;
mod ser;
pub mod state;
pub mod update;

pub use error::Error;
pub use state::{AgentState, State};

/// `#[derive(AgentState)]`: implements [`State`] for a struct whose fields declare their
/// reducers, and generates its `<Name>Update` type. See the crate's README for the attribute
/// grammar.
#[cfg(feature = "derive")]
pub use agentstate_derive::AgentState;

/// What generated code calls; not a stable API.
#[doc(hidden)]
pub mod __private {
    pub use crate::ser::{serialize_entry, serialize_field, serialize_flattened};
    pub use crate::state::{deserialize_state, deserialize_value, missing_field, Shape};
    pub use crate::update::{
        apply_field, apply_nested, compose_field, compose_nested, compose_with, plan_field,
        plan_nested, FieldPlan,
    };
    pub use serde;
    pub use serde_json;

    /// What every field an update can carry needs: the update stores it, compares, clones,
    /// prints and (de)serializes it. `#[derive(AgentState)]` asserts it per field, on the field.
    #[diagnostic::on_unimplemented(
        message = "the field type `{Self}` must implement Clone, PartialEq, Debug, Serialize and Deserialize",
        label = "a field that updates can carry must be Clone + PartialEq + Debug + Serialize + Deserialize",
        note = "derive the missing traits on `{Self}`, or mark the field #[agent_state(skip)] if updates never touch it"
    )]
    ///
    /// Its methods are the traits' methods that an update's generated impls use: those impls
    /// assume `T: FieldValue` (the requirement reported once) rather than each trait, so a type
    /// missing one is not reported again by every impl that would use it.
    pub trait FieldValue {
        /// `PartialEq::eq`.
        fn field_eq(&self, other: &Self) -> bool;
        /// `Serialize::serialize`.
        fn field_serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error>;
        /// `Deserialize::deserialize`.
        fn field_deserialize<'de, D: serde::Deserializer<'de>>(
            deserializer: D,
        ) -> Result<Self, D::Error>
        where
            Self: Sized;
    }
    // Not looked through: a type missing several of the traits is one error, under the message.
    #[diagnostic::do_not_recommend]
    impl<T> FieldValue for T
    where
        T: Clone + PartialEq + core::fmt::Debug + serde::Serialize + serde::de::DeserializeOwned,
    {
        #[inline]
        fn field_eq(&self, other: &Self) -> bool {
            self == other
        }
        #[inline]
        fn field_serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
            self.serialize(serializer)
        }
        #[inline]
        fn field_deserialize<'de, D: serde::Deserializer<'de>>(
            deserializer: D,
        ) -> Result<Self, D::Error> {
            T::deserialize(deserializer)
        }
    }

    /// Two optional field values compared through [`FieldValue`].
    #[inline]
    pub fn option_eq<T: FieldValue>(a: &Option<T>, b: &Option<T>) -> bool {
        match (a, b) {
            (Some(a), Some(b)) => a.field_eq(b),
            (None, None) => true,
            _ => false,
        }
    }

    /// A field value serialized through [`FieldValue`].
    pub struct Value<'a, T>(pub &'a T);

    impl<T: FieldValue> serde::Serialize for Value<'_, T> {
        #[inline]
        fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
            self.0.field_serialize(serializer)
        }
    }

    /// An optional field value serialized through [`FieldValue`] (as the `Option` itself).
    #[inline]
    pub fn value<T: FieldValue>(value: &Option<T>) -> Option<Value<'_, T>> {
        value.as_ref().map(Value)
    }

    /// The seed that reads a field value through [`FieldValue`].
    pub struct ValueSeed<T>(core::marker::PhantomData<T>);

    impl<'de, T: FieldValue> serde::de::DeserializeSeed<'de> for ValueSeed<T> {
        type Value = T;
        #[inline]
        fn deserialize<D: serde::Deserializer<'de>>(self, deserializer: D) -> Result<T, D::Error> {
            T::field_deserialize(deserializer)
        }
    }

    /// [`missing_field`](crate::state::missing_field) for a field value read through
    /// [`FieldValue`].
    #[inline]
    pub fn missing_field_value<T: FieldValue, E: serde::de::Error>(
        name: &'static str,
    ) -> Result<T, E> {
        T::field_deserialize(crate::state::missing_field_deserializer::<E>(name))
    }

    /// [`deserialize_value`](crate::state::deserialize_value) for a field value read through
    /// [`FieldValue`].
    #[inline]
    pub fn deserialize_field_value<'de, T: FieldValue, A: serde::de::MapAccess<'de>>(
        slot: &mut Option<T>,
        name: &'static str,
        map: &mut A,
    ) -> Result<bool, A::Error> {
        if slot.is_some() {
            return Err(serde::de::Error::duplicate_field(name));
        }
        *slot = Some(map.next_value_seed(ValueSeed(core::marker::PhantomData))?);
        Ok(true)
    }

    /// [`FieldValue`]'s traits as supertraits, so that assuming it (in the derive's `for<'_>`
    /// where clauses) gives each of them. (`FieldValue` itself has none, so that an unmet
    /// requirement is reported under its message, not under one supertrait's.)
    pub trait FieldTraits:
        Clone + PartialEq + core::fmt::Debug + serde::Serialize + serde::de::DeserializeOwned
    {
    }
    impl<T> FieldTraits for T where
        T: Clone + PartialEq + core::fmt::Debug + serde::Serialize + serde::de::DeserializeOwned
    {
    }

    pub use crate::keys::KeyType;

    /// [`by_field`](crate::reducers::by_field), requiring the key's traits under a message that
    /// names them (the derive's `key = field`).
    pub fn by_field<T, K: ?Sized + KeyType, F: Fn(&T) -> &K>(
        f: F,
    ) -> crate::reducers::KeyRef<F, K> {
        crate::reducers::by_field(f)
    }

    /// Whether `names` contains `name` (usable in constants).
    pub const fn contains(names: &[&str], name: &str) -> bool {
        let mut i = 0;
        while i < names.len() {
            if str_eq(names[i], name) {
                return true;
            }
            i += 1;
        }
        false
    }

    const fn str_eq(a: &str, b: &str) -> bool {
        let (a, b) = (a.as_bytes(), b.as_bytes());
        if a.len() != b.len() {
            return false;
        }
        let mut i = 0;
        while i < a.len() {
            if a[i] != b[i] {
                return false;
            }
            i += 1;
        }
        true
    }

    /// `a` followed by `b`, as an array of `N = a.len() + b.len()` names.
    pub const fn concat_fields<const N: usize>(
        a: &[&'static str],
        b: &[&'static str],
    ) -> [&'static str; N] {
        let mut out = [""; N];
        let mut i = 0;
        while i < a.len() && i < N {
            out[i] = a[i];
            i += 1;
        }
        let mut j = 0;
        while j < b.len() && i + j < N {
            out[i + j] = b[j];
            j += 1;
        }
        out
    }
}
