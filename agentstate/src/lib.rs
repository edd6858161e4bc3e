//! # agentstate
//!
//! Typed, compile-time-checked agent state for Rust agent graphs.
//!
//! An agent graph's state is a struct whose fields each declare how a node's partial update
//! merges into them: with a *reducer*. agentstate has the reducers of AgentFlow, OpenArmature
//! and LangGraph with their exact semantics ([`reducers`]), the error categories of
//! OpenArmature ([`error`]), AgentFlow's chat [`message`] model with its JSON wire format,
//! AgentFlow's [`AgentState`](state::AgentState) base, indexed [`collections`] that keep merges
//! O(k) in long-lived states, and runtime [`schema`]s for configuration-driven agents.
//!
//! ```
//! use agentstate::message::{Message, Role};
//! use agentstate::state::{AgentState, AgentStateUpdate};
//! use agentstate::State;
//!
//! let mut state = AgentState::default();
//! state.merge(AgentStateUpdate {
//!     context: Some(vec![Message::text_message("Hello!", Role::User)]),
//!     ..Default::default()
//! })?;
//! assert_eq!(state.context.len(), 1);
//! assert_eq!(state.context[0].text(), "Hello!");
//! # Ok::<(), agentstate::Error>(())
//! ```

#![warn(missing_docs)]

#[cfg(feature = "ag-ui")]
pub mod agui;
pub mod collections;
pub mod error;
pub mod message;
pub mod reducers;
pub mod schema;
pub mod state;
pub mod update;

pub use error::Error;
pub use state::State;
