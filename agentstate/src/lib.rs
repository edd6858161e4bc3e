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
//! fields declare their reducers.
//!
//! Start with the [`_tutorial`]; [`_derive`] is the derive's reference (the attribute grammar,
//! the reducers and the field types each accepts, the compile-time checks).
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
#![warn(unreachable_pub)]

pub mod _derive;
pub mod _tutorial;

// Lets the derive's generated `::agentstate::...` paths resolve inside this crate too.
extern crate self as agentstate;

#[cfg(feature = "ag-ui")]
pub mod agui;
mod collections;
pub mod context;
mod error;
mod fields;
mod journal;
mod keys;
pub mod message;
mod output;
pub mod providers;
pub mod reducers;
pub mod schema;
pub mod state;
mod update;

pub use collections::{KeyedList, MessageList};
pub use error::{did_you_mean, Cause, Error, ReduceError};
pub use journal::Journal;
pub use output::{MessagesUpdate, NodeOutput, ToolResult};
pub use state::{AgentState, State};
pub use update::{
    present, Combine, Extends, Extensible, FanIn, IntoField, Update, MAX_DEPTH, OVERWRITE_SUFFIX,
};

/// `#[derive(AgentState)]`: implements [`State`] for a struct whose fields declare their
/// reducers, and generates its `<Name>Update` type. The full reference, with running examples,
/// is [`_derive`]; the grammar in brief follows.
#[cfg(feature = "derive")]
pub use agentstate_derive::AgentState;

/// What generated code calls; not a stable API. One flat module, so that the generated code
/// names everything through one short path (`use ::agentstate::__private as __p;`).
#[doc(hidden)]
pub mod __private {
    pub use crate::error::Error;
    pub use crate::fields::*;
    pub use crate::message::Message;
    pub use crate::output::MessagesUpdate;
    pub use crate::reducers::{
        by_value, Add, AddMessages, Append, AppendItems, BoundedAppend, ConcatFlatten,
        DedupeAppend, FnReducer, Identity, InOrder, LastWriteWins, ListField, Merge, MergeAll,
        MergeByKey, Merges, MessageUpdate, Nested, Reducer, ReplaceMessages, ReplaceValue, Steps,
        UpsertMessages,
    };
    pub use crate::schema::Schema;
    pub use crate::state::{
        deserialize_state, deserialize_value, missing_field, DeserializeFields, ExecutionState,
        Shape, State,
    };
    pub use crate::update::{Combine, Extends, Extensible, FieldPlan, IntoField, Update};
    pub use core::clone::Clone;
    pub use core::cmp::PartialEq;
    pub use core::convert::Into;
    pub use core::default::Default;
    pub use core::fmt::{Debug, Formatter, Result as FmtResult};
    pub use core::iter::{Extend, FromIterator, IntoIterator, Iterator};
    pub use core::marker::PhantomData;
    pub use core::ops::{Deref, DerefMut};
    pub use core::option::Option::{self, None, Some};
    pub use core::result::Result::{self, Ok};
    pub use serde::de::{DeserializeOwned, Error as DeError, MapAccess};
    pub use serde::{Deserialize, Deserializer, Serialize, Serializer};
    pub use serde_json;
    pub use std::string::String;
    pub use std::vec::Vec;
}
