//! # agentstate
//!
//! Typed, compile-time-checked agent state for Rust agent graphs.
//!
//! An agent graph's state is a struct whose fields each declare how a node's partial update
//! merges into them: with a *reducer*. `#[derive(AgentState)]` (default feature `derive`)
//! implements [`State`] for such a struct and generates its update type. agentstate has the
//! reducers of AgentFlow, OpenArmature and LangGraph with their exact semantics, and around the
//! state: AgentFlow's message model, the context window, the providers' request formats and the
//! AG-UI event-stream fold.
//!
//! Start with the [`_tutorial`]; [`_derive`] is the derive's reference (the attribute grammar,
//! the reducers and the field types each accepts, the compile-time checks).
//!
//! ## What is where
//!
//! The root holds the core every state uses:
//!
//! - [`State`] and `#[derive(AgentState)]`; [`AgentState`](struct@AgentState), AgentFlow's base
//!   state (also in [`state`], with its update);
//! - [`Update`]: partial updates (JSON, Overwrite, composition with [`Combine`], fan-in of
//!   parallel branches with [`FanIn`]), [`IntoField`] (what a setter takes), [`Extends`] and
//!   [`Extensible`] (a state that extends a base), [`present`] (a serde helper);
//! - [`NodeOutput`] and [`ToolResult`]: what a node returns; [`MessagesUpdate`];
//! - [`Error`] and [`ReduceError`]: errors in OpenArmature's categories;
//! - [`Journal`]: replay; [`KeyedList`] and [`MessageList`]: indexed lists that keep merges
//!   O(k) in long-lived states.
//!
//! The rest is in namespaces:
//!
//! | module | what it holds |
//! |---|---|
//! | [`state`] | AgentFlow's state model: [`AgentState`](struct@state::AgentState) and its update, [`ExecutionState`](state::ExecutionState) |
//! | [`reducers`] | every reducer, and the keys the keyed reducers compare items by |
//! | [`message`] | AgentFlow's chat [`Message`](message::Message) and its JSON wire format |
//! | [`model`] | calling a model: the [`ChatModel`](model::ChatModel) trait, its streamed events and errors, a scripted model for tests; the providers' HTTP clients (feature `client`) |
//! | [`schema`] | runtime schemas, for configuration-driven agents |
//! | [`context`] | the context window: pairing-safe views of the history for each model call, token counts, summaries |
//! | [`providers`] | a [`ModelRequest`](providers::ModelRequest) and a conversation into OpenAI Chat, OpenAI Responses, Anthropic or Gemini bodies, and responses back; each provider's wire types in its own module |
//! | [`providers::stream`] | streamed responses: text and tool-call deltas as they arrive, then the message |
//! | `agui` (feature `ag-ui`) | AG-UI: a chat's state as the fold of an agent run's events, and the server side |
//! | [`_tutorial`], [`_derive`] | documentation only |
//!
//! The public modules are namespaces, not files: the files behind them are private and their
//! items re-exported, so a file can move without breaking an import.
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
pub mod model;
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
