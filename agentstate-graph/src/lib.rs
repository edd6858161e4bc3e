//! # agentstate-graph
//!
//! A graph runner over [`agentstate`] states: named nodes that read the state and return its
//! typed update, static and conditional edges, supersteps whose parallel nodes merge through
//! the state's reducers at a barrier in a deterministic order, a recursion limit, OpenArmature's
//! error categories, and runs as streams of events.
//!
//! ```
//! use agentstate_graph::{node_names, Context, Graph, END};
//! use agentstate::{AgentState, State};
//! use std::sync::Arc;
//!
//! #[derive(AgentState, Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
//! struct Research {
//!     question: String,
//!     #[reducer(append)]
//!     notes: Vec<String>,
//!     answer: Option<String>,
//! }
//!
//! node_names! {
//!     enum Step { Plan = "plan", Web = "web", Papers = "papers", Write = "write" }
//! }
//!
//! fn note(text: &'static str) -> impl agentstate_graph::Node<Research> {
//!     move |_: Arc<Research>, _: Context| async move {
//!         Ok::<_, std::convert::Infallible>(ResearchUpdate::default().notes(vec![text.to_owned()]))
//!     }
//! }
//!
//! let graph = Graph::builder()
//!     .node(Step::Plan, note("plan"))
//!     .node(Step::Web, note("web"))
//!     .node(Step::Papers, note("papers"))
//!     .node(Step::Write, |s: Arc<Research>, _: Context| async move {
//!         Ok::<_, std::convert::Infallible>(ResearchUpdate::default().answer(s.notes.join(", ")))
//!     })
//!     .entry(Step::Plan)
//!     // `web` and `papers` run in one step, in parallel; their notes merge through `append`
//!     // in node order, whichever finishes first.
//!     .edges(Step::Plan, [Step::Web, Step::Papers])
//!     .edge(Step::Web, Step::Write)
//!     .edge(Step::Papers, Step::Write) // `write` runs once, after both
//!     .route(Step::Write, |s: &Research| if s.answer.is_some() { END.into() } else { Step::Plan.into() })
//!     .build()?;
//!
//! let runtime = tokio::runtime::Builder::new_current_thread().build()?;
//! let state = runtime.block_on(graph.invoke(Research { question: "why?".into(), ..Default::default() }))?;
//! assert_eq!(state.notes, ["plan", "web", "papers"]);
//! assert_eq!(state.answer.as_deref(), Some("plan, web, papers"));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Semantics, and where OpenArmature and LangGraph disagree
//!
//! Runs are LangGraph's supersteps: every node triggered in a step runs (concurrently, on the
//! same shared state), their updates merge at the step's barrier in node order, then the edges
//! of all of them pick the next step's nodes, a node reached twice running once. OpenArmature
//! runs one node at a time outside fan-out and parallel-branches nodes; a graph without
//! parallel edges runs the same under both. Where the two differ, this crate follows:
//!
//! | question | OpenArmature | LangGraph | this crate |
//! |---|---|---|---|
//! | several static edges from one node | `multiple_outgoing_edges` | parallel branches | the error, unless declared at once with [`GraphBuilder::edges`] (parallel branches) |
//! | a node without an outgoing edge | (every node has one) | the branch ends | `dangling_edge` at build |
//! | a node no edge reaches from the entry | `unreachable_node` | allowed (it never runs) | `unreachable_node` at build |
//! | the state a conditional edge reads after a parallel step | (no parallel steps) | the step's start state plus its own node's update | the merged state (no copy per branch) |
//! | the order of a step's merges | (one node) | edge-triggered tasks sorted by node name, then `Send`s as returned | nodes in the order they were added to the graph, then [`Dispatch`]es as returned |
//! | two branches of a step writing a `last_write_wins` field | last-listed branch wins (§11.4) | `InvalidUpdateError` | between a step's nodes: the error, naming the field and both nodes, nothing merged; inside a [`parallel::ParallelBranches`] node: the last-listed branch wins |
//! | a failing node in a parallel step | (one node) | the error, nothing of the step merged | the first failure in node order, nothing merged |
//! | a conditional edge that fails, or routes to an unknown node | the error; the recoverable state has the step's writes | the error; nothing of the step is written (the edge is part of its node's task) | LangGraph: the error's state is the state before the step |
//! | a crash in a step of several tasks | (one node; a fan-out keeps its finished instances) | the finished tasks' writes are kept; only the others run again | LangGraph (and OpenArmature for fan-out instances) |
//! | static breakpoints | — | `interrupt_before` / `interrupt_after` | the same ([`GraphBuilder::interrupt_before`]), durable runs only |
//! | recursion limit | — | 25; a run needing L steps or more runs L (merged) then fails | the same (`recursion_limit`, [`DEFAULT_RECURSION_LIMIT`]) |
//! | a conditional edge returning an unknown node | `routing_error` | `KeyError` if targets were declared, else a warning and the run ends | `routing_error` (for enum names it cannot compile) |
//! | a subgraph as a node | projections (default: nothing in, same names out) | the parent's whole state in, the whole final state out | OpenArmature ([`subgraph`]) |
//!
//! The steps themselves, in order, are told in [`Graph`]'s documentation.
//!
//! # Effects and interrupts
//!
//! What a node asks of a durable run through its [`Context`]:
//!
//! - [`Context::effect`] runs a side effect (a payment, an email, a model call worth keeping)
//!   and, in a durable run, journals its result before the node goes on; when the node runs
//!   again (after a crash, or on resume after an interrupt) the recorded result is returned and
//!   the effect does not run again.
//! - [`Context::interrupt`] asks for a person's answer: the first time it returns
//!   [`Interrupted`], which the node returns with `?`; the durable run then ends suspended, and
//!   when it is resumed with an answer for the interrupt's id the node runs again from its start
//!   and `interrupt` returns the answer.
//!
//! Outside a durable run an effect simply runs, and an interrupt fails the node, and the run
//! with `interrupt_outside_durable_run` (there is no thread to keep the question in).
//!
//! # What is where
//!
//! The root holds the graph and its runs:
//!
//! - building: [`Graph::builder`] gives a [`GraphBuilder`], whose checks fail with a
//!   [`CompileError`] or warn with [`CompileWarning`]s; [`DEFAULT_RECURSION_LIMIT`];
//!   [`GraphState`] (the states a graph runs);
//! - names and routes: [`NodeKey`] and [`node_names!`], [`END`] ([`End`]), a route's
//!   [`Target`] or [`Routes`], a dynamic fan-out's [`Dispatch`]es ([`Sends`]);
//! - nodes: [`Node`], the [`Context`] a node is given and what it [`Emitted`], [`BoxNode`],
//!   [`BoxError`], [`NodeFuture`]; a model call whose deltas stream into the run's events:
//!   [`Context::complete`] with any [`ChatModel`](agentstate::model::ChatModel);
//! - runs: [`Graph::invoke`] with a [`RunConfig`]; [`Graph::stream`] gives a [`RunStream`] of
//!   [`Event`]s (picked by an [`EventFilter`]; a step's [`StepRecord`] and its [`Nodes`]); a run
//!   that fails gives a [`RunError`] (its [`RunErrorKind`]) carrying the state at the point of
//!   failure; errors of building and running each have their OpenArmature category;
//! - effects and interrupts: [`Interrupt`] (a question a durable run waits for), [`Interrupted`],
//!   [`EffectError`], [`UnsupportedSuspension`].
//! - tools: a [`ToolSet`] of typed tools (each a [`ToolFn`] over an argument type whose JSON
//!   Schema and doc comment define the tool; [`ToolFuture`]), run in parallel by a message's
//!   calls (at most [`DEFAULT_TOOL_CONCURRENCY`] at once by default), every failure a result the
//!   model reads ([`ToolFailure`]); in a durable run each call is an effect keyed by its call
//!   id, run once, its idempotency key given to the tool ([`Context::idempotency_key`]).
//!
//! The rest is in namespaces:
//!
//! | module | what it holds |
//! |---|---|
//! | [`layer`] | nodes that wrap a node, in tower's sense: retries ([`RetryPolicy`](layer::RetryPolicy)) and timeouts |
//! | [`parallel`] | parallel work inside one node: a [`FanOut`](parallel::FanOut) (a subgraph per item) and [`ParallelBranches`](parallel::ParallelBranches), their error policies and errors |
//! | [`subgraph`] | graphs as nodes, with projections |
//! | [`prebuilt`] | LangGraph's prebuilt agent: a [`ToolNode`](prebuilt::ToolNode) (with approval before chosen tools), [`tools_condition`](prebuilt::tools_condition), and [`ReactAgent`](prebuilt::ReactAgent) (`create_react_agent`: system prompt, context window, recursion limit, structured answer) |
//! | [`json`] | [`JsonState`](json::JsonState): states known at run time, for graphs built from configuration |
//! | `durable` (feature `store`) | runs kept on a stored thread, resumed after a crash, suspended for an answer, streamed (`cargo run --example approval` shows one); the journal's stored contract |
//! | `agui` (feature `ag-ui`) | a run's events as AG-UI events |
//!
//! The public modules are namespaces, not files: the files behind them are private and their
//! items re-exported, so a file can move without breaking an import.
//!
//! Every kind of run goes through one run loop. Runs, steps, nodes, effects and questions are
//! `tracing` spans (target `agentstate_graph`), their fields named as OpenTelemetry's GenAI
//! conventions name them.

#![warn(missing_docs)]
#![warn(unreachable_pub)]

#[cfg(feature = "ag-ui")]
pub mod agui;
mod builder;
#[cfg(feature = "store")]
pub mod durable;
mod effect;
mod error;
mod event;
mod graph;
#[cfg(feature = "store")]
mod heartbeat;
#[cfg(feature = "store")]
mod journal;
pub mod json;
pub mod layer;
mod model;
mod name;
mod node;
pub mod parallel;
pub mod prebuilt;
mod run;
mod step;
mod stream;
pub mod subgraph;
mod tool;
mod trace;

pub use builder::{GraphBuilder, DEFAULT_RECURSION_LIMIT};
pub use effect::{EffectError, Interrupt, Interrupted, UnsupportedSuspension};
pub use error::{CompileError, CompileWarning, RunError, RunErrorKind};
pub use event::{Event, EventFilter};
pub use graph::{Edge, Graph, Nodes, RunConfig, StepRecord};
pub use name::{Dispatch, End, NodeKey, Routes, Sends, Target, END};
pub use node::{BoxError, BoxNode, Context, Emitted, Node, NodeFuture};
pub use stream::RunStream;
pub use tool::{ToolFailure, ToolFn, ToolFuture, ToolSet, DEFAULT_TOOL_CONCURRENCY};

/// A state a graph can run: a [`State`](agentstate::State) that is `Clone` (copied only when
/// something keeps a step's state past the step), shared between threads, with a cloneable
/// update (cloned when two parallel nodes' updates are composed, and for streamed events).
/// Every `#[derive(AgentState)]` state that derives `Clone` is one.
pub trait GraphState:
    agentstate::State<Update: Clone + Send + Sync + 'static> + Clone + Send + Sync + 'static
{
}

impl<S> GraphState for S where
    S: agentstate::State<Update: Clone + Send + Sync + 'static> + Clone + Send + Sync + 'static
{
}
