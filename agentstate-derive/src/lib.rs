//! `#[derive(AgentState)]`: the derive macro of [agentstate](https://docs.rs/agentstate).
//!
//! Use it through the runtime crate (`agentstate::AgentState`, default feature `derive`); the
//! macro's documentation gives the attribute grammar, and the runtime's documentation module
//! `agentstate::_derive` the full reference with running examples. This crate is laid out in the steps of the
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
/// `#[reducer(...)]`, and generates its `<Name>Update` type (an optional entry, a setter and an
/// Overwrite per field).
///
/// The attribute grammar in brief. The full reference, with the field types each reducer
/// accepts, the compile-time checks and running examples (doctests), is the documentation
/// module `agentstate::_derive`
/// (<https://docs.rs/agentstate/latest/agentstate/_derive/index.html>); this crate cannot run
/// examples that need the runtime, so the example below is `ignore`d here and runs, identical, as the first
/// example there.
///
/// ```text
/// field attribute  := #[reducer(REDUCER)] | #[agent_state(base)] | #[agent_state(skip)]
///                     (no attribute: last_write_wins)
/// REDUCER          := last_write_wins | append | merge | concat_flatten | merge_all
///                   | add_messages | replace_messages | append_items | replace_value
///                   | upsert_messages | nested
///                   | bounded_append(max_len = N) | bounded_append(N)   N: literal or const, >= 1
///                   | dedupe_append | dedupe_append(key = KEY)
///                   | merge_by_key(key = KEY)
///                   | with = path::to::function [, update = Type] [, idempotent]
///                                                  fn(&T, U) -> Result<T, E>
/// KEY              := field_of_the_items           (borrowed)
///                   | path::to::function           (two segments or more, owned key)
///                   | |item: &Item| expression     (owned key)
/// struct attribute := #[agent_state(OPTION, ...)]
/// OPTION           := update = Name                (default <Name>Update)
///                   | crate = path                 (a re-exported runtime)
///                   | messages = field             (where node outputs' messages go)
///                   | extensible                   (other states may use it as their base)
///                   | deserialize                  (generate Deserialize, one pass over a base)
/// ```
///
/// A base field (`#[agent_state(base)]`) also needs `#[serde(flatten)]`, and its type must be
/// marked `#[agent_state(extensible)]`. Every field updates can touch must be
/// `Clone + PartialEq + Debug + Serialize + Deserialize`; a keyed reducer's key `Hash + Eq`.
/// Mistakes are compile errors naming the field and the reducer, each starting with its
/// OpenArmature category (`conflicting_reducers`, `reducer_configuration_invalid`,
/// `state_declaration_invalid`).
///
/// ```ignore
/// use agentstate::{AgentState, State};
/// use serde::{Deserialize, Serialize};
///
/// #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
/// pub struct Finding { id: u32, claim: String }
///
/// #[derive(AgentState, Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
/// pub struct Research {
///     #[reducer(append)]
///     notes: Vec<String>,
///     #[reducer(bounded_append(max_len = 3))]
///     recent: Vec<u32>,
///     #[reducer(merge_by_key(key = id))]
///     findings: Vec<Finding>,
///     title: String, // no attribute: last_write_wins
/// }
///
/// let mut state = Research::default();
/// state.merge(ResearchUpdate::default().notes(vec!["first".into()]).recent(vec![1, 2, 3, 4]))?;
/// state.merge(ResearchUpdate::default().findings(vec![Finding { id: 1, claim: "a".into() }]))?;
/// state.merge(ResearchUpdate::default().findings(vec![Finding { id: 1, claim: "b".into() }]))?;
/// assert_eq!(state.recent, [2, 3, 4]);
/// assert_eq!(state.findings.len(), 1);
/// assert_eq!(state.findings[0].claim, "b");
/// # Ok::<(), agentstate::Error>(())
/// ```
#[proc_macro_derive(AgentState, attributes(reducer, agent_state))]
pub fn derive_agent_state(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    expand::derive(&input).into()
}
