//! `#[derive(AgentState)]`: the derive macro of [agentstate](https://docs.rs/agentstate).
//!
//! Use it through the runtime crate (`agentstate::AgentState`, default feature `derive`); its
//! documentation describes the attributes. This crate is laid out in the steps of the
//! expansion: the model (`ast.rs`), reading attributes (`attr.rs`), checking them (`check.rs`),
//! and generating code (`expand.rs`, written as text with the user's tokens spliced in,
//! `code.rs`).

mod ast;
mod attr;
mod check;
mod code;
mod expand;

use proc_macro::TokenStream;
use syn::{parse_macro_input, DeriveInput};

/// Derives `agentstate::State` for a struct whose fields declare their reducers with
/// `#[reducer(...)]`, and generates its `<Name>Update` type. See the `agentstate` crate docs.
#[proc_macro_derive(AgentState, attributes(reducer, agent_state))]
pub fn derive_agent_state(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    expand::derive(&input).into()
}
