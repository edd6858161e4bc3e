//! The workspace's root package: it owns the top-level `tests/`, `examples/` and `benches/` so
//! that `cargo test --workspace` runs them and `cargo run --example NAME` works from the root.
//! It has no API of its own; its doctests are the README's code.
//!
//! The API is in the runtime crate [`agentstate`] (reducers, states, updates, messages, AG-UI)
//! and in `agentstate-derive`, whose `#[derive(AgentState)]` is re-exported as
//! [`agentstate::AgentState`](macro@agentstate::AgentState). Document them all with
//! `cargo doc --workspace --all-features --open`.

/// The README, whose Rust code blocks run as this package's doctests
/// (`cargo test --doc -p agentstate-suite`), so that its quick start compiles as written.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
