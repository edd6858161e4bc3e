//! # agentstate-graph
//!
//! A graph runner over [`agentstate`] states: named nodes that read the state and return its
//! typed update, static and conditional edges, supersteps whose parallel nodes merge through
//! the state's reducers at a barrier in a deterministic order, a recursion limit, OpenArmature's
//! error categories, and runs as streams of events.
//!
//! ```
//! use agentstate_graph::{node::Context, node_names, Graph, END};
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
//! fn note(text: &'static str) -> impl agentstate_graph::node::Node<Research> {
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
//! Modules: [`name`] (node names, routes, `END`), [`node`] (nodes and their context),
//! [`builder`] (building and its checks), [`graph`] (the compiled graph and its runs),
//! [`event`] (streaming), [`subgraph`] (graphs as nodes, with projections), [`json`] (states
//! known at run time, for graphs built from configuration), [`error`].

#![warn(missing_docs)]

#[cfg(feature = "ag-ui")]
pub mod agui;
pub mod builder;
pub mod error;
pub mod event;
pub mod graph;
pub mod json;
pub mod layer;
pub mod name;
pub mod node;
pub mod parallel;
pub mod subgraph;

pub use builder::{GraphBuilder, DEFAULT_RECURSION_LIMIT};
pub use error::{CompileError, CompileWarning, RunError, RunErrorKind};
pub use event::{Event, RunStream};
pub use graph::{Graph, RunConfig, StepRecord};
pub use name::{Dispatch, End, NodeKey, Routes, Target, END};
pub use node::{BoxError, BoxNode, Context, Node};

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
