//! Errors of building and running a graph.

use crate::node::BoxError;
use std::fmt;

/// Why a graph could not be built. [`category`](CompileError::category) gives the
/// OpenArmature category.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum CompileError {
    /// No entry node was declared (`no_declared_entry`).
    #[error("the graph declares no entry node; call `entry(..)` with the node the run starts at")]
    NoDeclaredEntry,
    /// A node cannot be reached from the entry (`unreachable_node`).
    #[error(
        "node `{node}` cannot be reached from the entry `{entry}`; add an edge to it or remove it"
    )]
    UnreachableNode {
        /// The unreachable node.
        node: String,
        /// The entry.
        entry: String,
    },
    /// An edge, the entry or a closed name set names a node that was not added (`dangling_edge`).
    #[error("{place} names node `{target}`, which the graph does not have{hint}")]
    DanglingEdge {
        /// Where the name appears (`the edge from \`a\``, `the entry`, ...).
        place: String,
        /// The missing node's name.
        target: String,
        /// ` ; did you mean ...` or empty.
        hint: String,
    },
    /// A node has more than one outgoing edge declaration (`multiple_outgoing_edges`).
    #[error("node `{node}` has more than one outgoing edge; route with one conditional edge, or declare its parallel targets at once with `edges(..)`")]
    MultipleOutgoingEdges {
        /// The node.
        node: String,
    },
    /// A node has no outgoing edge (category `dangling_edge`: the run would not know where to
    /// go; OpenArmature gives every node exactly one).
    #[error("node `{node}` has no outgoing edge; add one (to END to end the run there)")]
    NoOutgoingEdge {
        /// The node.
        node: String,
    },
    /// Two nodes have one name (`duplicate_node`, an addition of this crate).
    #[error("node `{node}` is added twice; names must be unique")]
    DuplicateNode {
        /// The name.
        node: String,
    },
    /// A subgraph projection names a field its schema does not declare
    /// (`mapping_references_undeclared_field`).
    #[error("the projection of subgraph node `{node}` names {side} field `{field}`, which its state does not declare")]
    MappingReferencesUndeclaredField {
        /// The subgraph node.
        node: String,
        /// `parent` or `subgraph`.
        side: &'static str,
        /// The field.
        field: String,
    },
    /// A subgraph node declares both same-name sets and explicit maps
    /// (`conflicting_projection_forms`).
    #[error("subgraph node `{node}` declares both same-name projection sets and explicit inputs/outputs maps; use one form")]
    ConflictingProjectionForms {
        /// The subgraph node.
        node: String,
    },
    /// The state's schema is invalid (`conflicting_reducers`, `reducer_configuration_invalid`).
    #[error(transparent)]
    State(#[from] agentstate::Error),
}

impl CompileError {
    /// The OpenArmature category name.
    pub fn category(&self) -> &'static str {
        match self {
            CompileError::NoDeclaredEntry => "no_declared_entry",
            CompileError::UnreachableNode { .. } => "unreachable_node",
            CompileError::DanglingEdge { .. } | CompileError::NoOutgoingEdge { .. } => {
                "dangling_edge"
            }
            CompileError::MultipleOutgoingEdges { .. } => "multiple_outgoing_edges",
            CompileError::DuplicateNode { .. } => "duplicate_node",
            CompileError::MappingReferencesUndeclaredField { .. } => {
                "mapping_references_undeclared_field"
            }
            CompileError::ConflictingProjectionForms { .. } => "conflicting_projection_forms",
            CompileError::State(error) => error.category(),
        }
    }
}

/// A warning found when the graph was built; it changes nothing at run time.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum CompileWarning {
    /// A subgraph projection copies a parent field in and merges it back out through a reducer
    /// that is not round-trip idempotent (`projection_reducer_round_trip`): the value would be
    /// merged twice (an `append` list doubles).
    ProjectionReducerRoundTrip {
        /// The subgraph node.
        node: String,
        /// The parent field.
        field: String,
        /// Its reducer.
        reducer: String,
    },
}

impl CompileWarning {
    /// The OpenArmature category name.
    pub fn category(&self) -> &'static str {
        match self {
            CompileWarning::ProjectionReducerRoundTrip { .. } => "projection_reducer_round_trip",
        }
    }
}

impl fmt::Display for CompileWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CompileWarning::ProjectionReducerRoundTrip {
                node,
                field,
                reducer,
            } => write!(
                f,
                "subgraph node `{node}` projects field `{field}` in and back out through its reducer `{reducer}`, which is not round-trip idempotent: the value is merged twice; give the field an idempotent reducer or do not project it both ways"
            ),
        }
    }
}

/// What went wrong in a run (see [`RunError::kind`]).
#[derive(Debug)]
#[non_exhaustive]
pub enum RunErrorKind {
    /// A node returned an error (`node_exception`).
    Node {
        /// The node.
        node: String,
        /// Its error.
        error: BoxError,
    },
    /// A conditional edge returned an error (`edge_exception`).
    Edge {
        /// The node the edge leaves.
        node: String,
        /// Its error.
        error: BoxError,
    },
    /// Merging the step's updates failed (`reducer_error` or `state_validation_error`, as the
    /// state's error says).
    Merge {
        /// The nodes whose updates were merged, in merge order.
        nodes: Vec<String>,
        /// The state's error (a `reducer_error` names the field, the reducer and the node).
        error: Box<agentstate::Error>,
    },
    /// Two parallel branches of one step wrote a field whose reducer keeps one value
    /// (`state_validation_error`; LangGraph's `INVALID_CONCURRENT_GRAPH_UPDATE`).
    ConcurrentWrite {
        /// The field.
        field: String,
        /// The first branch that wrote it.
        first: String,
        /// The second branch.
        second: String,
        /// The state's error.
        error: Box<agentstate::Error>,
    },
    /// A conditional edge routed to a node the graph does not have (`routing_error`).
    Routing {
        /// The node the edge leaves.
        node: String,
        /// The name it returned.
        target: String,
    },
    /// The run took as many steps as its recursion limit allows (`recursion_limit`, an
    /// addition of this crate: LangGraph's `GraphRecursionError`).
    RecursionLimit {
        /// The limit.
        limit: usize,
        /// The nodes of the last step that ran.
        last: Vec<String>,
        /// The nodes that would have run next.
        next: Vec<String>,
    },
    /// A step's nodes ran longer than the graph's step timeout
    /// ([`GraphBuilder::step_timeout`](crate::GraphBuilder::step_timeout)); `step_timeout`, as
    /// LangGraph's `step_timeout`. Nothing of the step is merged (a durable run keeps the
    /// tasks of the step that finished).
    StepTimeout {
        /// The step timeout.
        timeout: std::time::Duration,
        /// The step's nodes.
        nodes: Vec<String>,
    },
}

/// A run that failed: what went wrong ([`category`](RunError::category): its OpenArmature
/// category), in which step, and the state at the point of failure ([`state`](RunError::state)):
/// the state as it was after the last step that merged, since a step whose nodes, merge or
/// routing fail merges nothing.
///
/// One pointer wide (what it holds is boxed), so that results and events carrying it stay small.
pub struct RunError<S>(Box<Failure<S>>);

struct Failure<S> {
    kind: RunErrorKind,
    step: u64,
    state: S,
}

impl<S> RunError<S> {
    pub(crate) fn new(kind: RunErrorKind, step: u64, state: S) -> Self {
        RunError(Box::new(Failure { kind, step, state }))
    }

    /// The same error with `state` as the state at the failure.
    #[cfg_attr(not(feature = "store"), allow(dead_code))] // durable runs
    pub(crate) fn with_state<T>(self, state: T) -> RunError<T> {
        let Failure { kind, step, .. } = *self.0;
        RunError(Box::new(Failure { kind, step, state }))
    }

    /// What went wrong.
    pub fn kind(&self) -> &RunErrorKind {
        &self.0.kind
    }

    /// The step that failed, from 1.
    pub fn step(&self) -> u64 {
        self.0.step
    }

    /// The state at the point of failure: after the last step that merged (a failing step
    /// merges nothing).
    pub fn state(&self) -> &S {
        &self.0.state
    }

    /// The state at the point of failure, by value.
    pub fn into_state(self) -> S {
        self.0.state
    }

    /// Whether a node's question ([`Interrupted`](crate::Interrupted)) stopped the run.
    pub(crate) fn is_interrupt(&self) -> bool {
        matches!(&self.0.kind, RunErrorKind::Node { error, .. } if error.is::<crate::effect::Interrupted>())
    }

    /// The run's error as the error of the node that ran it (a subgraph, a fan-out): a child
    /// node's question ([`Interrupted`](crate::Interrupted)) passes up as it is, so
    /// that the parent's durable run suspends on it; any other error is this `RunError`.
    pub(crate) fn into_node_error(self) -> crate::node::BoxError
    where
        S: Send + Sync + 'static,
    {
        if let RunErrorKind::Node { error, .. } = &self.0.kind {
            if error.is::<crate::effect::Interrupted>() {
                if let RunErrorKind::Node { error, .. } = self.0.kind {
                    return error;
                }
            }
        }
        Box::new(self)
    }

    /// The node the error comes from, when there is one.
    pub fn node(&self) -> Option<&str> {
        match &self.0.kind {
            RunErrorKind::Node { node, .. }
            | RunErrorKind::Edge { node, .. }
            | RunErrorKind::Routing { node, .. } => Some(node),
            RunErrorKind::ConcurrentWrite { second, .. } => Some(second),
            RunErrorKind::Merge { error, nodes } => match &**error {
                agentstate::Error::Reducer { node: Some(n), .. } => Some(n),
                _ => nodes.first().map(String::as_str),
            },
            RunErrorKind::RecursionLimit { .. } | RunErrorKind::StepTimeout { .. } => None,
        }
    }

    /// The OpenArmature category: `node_exception`, `edge_exception`, `reducer_error`,
    /// `routing_error`, `state_validation_error`, `recursion_limit`, or, for a node's error
    /// that is the run's doing rather than the node's (found anywhere in the node's error's
    /// chain of sources):
    /// - `suspension_in_unsupported_context`: a question asked where the run cannot suspend
    ///   ([`UnsupportedSuspension`](crate::UnsupportedSuspension));
    /// - `interrupt_outside_durable_run`: a question
    ///   ([`Context::interrupt`](crate::Context::interrupt)) asked in a run that is not
    ///   durable, which nothing can answer;
    /// - `checkpoint_record_invalid`, `checkpoint_save_failed`: a fan-out's or parallel
    ///   branches' progress in a durable run's journal that does not match, or could not be
    ///   journaled ([`FanOutError`](crate::parallel::FanOutError));
    /// - `run_panicked`: the node panicked (caught: the run fails, durably as on any node's
    ///   error, and the caller's task goes on).
    ///
    /// ```
    /// use agentstate::AgentState;
    /// use agentstate_graph::{Context, Graph, END};
    /// use std::sync::Arc;
    ///
    /// #[derive(AgentState, Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
    /// struct Refund { approved: Option<bool> }
    ///
    /// let graph = Graph::builder()
    ///     .node("approve", |_: Arc<Refund>, cx: Context| async move {
    ///         let answer = cx.interrupt("refund 30?")?;
    ///         Ok::<_, agentstate_graph::BoxError>(RefundUpdate::default().approved(answer.as_bool()))
    ///     })
    ///     .entry("approve")
    ///     .edge("approve", END)
    ///     .build()?;
    /// let runtime = tokio::runtime::Builder::new_current_thread().build()?;
    /// // In memory, nothing can answer: the run fails and says why.
    /// let error = runtime.block_on(graph.invoke(Refund::default())).unwrap_err();
    /// assert_eq!(error.category(), "interrupt_outside_durable_run");
    /// assert!(error.to_string().contains("graph.durable(&store)"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn category(&self) -> &'static str {
        match &self.0.kind {
            RunErrorKind::Node { error, .. } => node_category(error.as_ref()),
            RunErrorKind::Edge { .. } => "edge_exception",
            RunErrorKind::Merge { error, .. } => error.category(),
            RunErrorKind::ConcurrentWrite { .. } => "state_validation_error",
            RunErrorKind::Routing { .. } => "routing_error",
            RunErrorKind::RecursionLimit { .. } => "recursion_limit",
            RunErrorKind::StepTimeout { .. } => "step_timeout",
        }
    }
}

/// The category of a node's error: `node_exception`, or that of the first error in its chain
/// of sources that is the run's doing rather than the node's (see [`RunError::category`]).
pub(crate) fn node_category(error: &(dyn std::error::Error + 'static)) -> &'static str {
    run_category(error).unwrap_or("node_exception")
}

/// The category of a node's error that is the run's doing, not the node's: the first such
/// error in its chain of sources.
fn run_category(error: &(dyn std::error::Error + 'static)) -> Option<&'static str> {
    let mut next = Some(error);
    while let Some(error) = next {
        if error.is::<crate::node::Panicked>() {
            return Some("run_panicked");
        }
        if error.is::<crate::effect::UnsupportedSuspension>() {
            return Some("suspension_in_unsupported_context");
        }
        if error.is::<crate::effect::Interrupted>() {
            return Some(INTERRUPT_OUTSIDE_DURABLE_RUN);
        }
        if let Some(fan_out) = error.downcast_ref::<crate::parallel::FanOutError>() {
            let category = fan_out.category();
            if category.starts_with("checkpoint_") {
                return Some(category);
            }
        }
        next = error.source();
    }
    None
}

const INTERRUPT_OUTSIDE_DURABLE_RUN: &str = "interrupt_outside_durable_run";

impl<S> fmt::Display for RunError<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let step = self.0.step;
        match &self.0.kind {
            RunErrorKind::Node { node, error } if error.is::<crate::effect::Interrupted>() => {
                let id = error
                    .downcast_ref::<crate::effect::Interrupted>()
                    .map_or("", |asked| &asked.id);
                write!(
                    f,
                    "node `{node}` asked for an answer (interrupt `{id}`) in step {step}, but the run is not durable, so nothing can answer it ({INTERRUPT_OUTSIDE_DURABLE_RUN}); run the graph durably, with `graph.durable(&store)` (feature `store`), to suspend the run and resume it with the answer"
                )
            }
            RunErrorKind::Node { node, error } if error.is::<crate::node::Panicked>() => {
                write!(f, "node `{node}` panicked in step {step}: {error}")
            }
            RunErrorKind::Node { node, error } => {
                write!(f, "node `{node}` failed in step {step}: {error}")
            }
            RunErrorKind::Edge { node, error } => write!(
                f,
                "the conditional edge from node `{node}` failed in step {step}: {error}"
            ),
            RunErrorKind::Merge { error, .. } => {
                write!(f, "step {step}'s updates could not be merged: {error}")
            }
            RunErrorKind::ConcurrentWrite {
                field,
                first,
                second,
                ..
            } => write!(
                f,
                "field `{field}` was written by nodes `{first}` and `{second}` in step {step}, and its reducer keeps one value; give it a reducer that combines writes (append, merge, add_messages, ...) or write it from one branch"
            ),
            RunErrorKind::Routing { node, target } => write!(
                f,
                "the conditional edge from node `{node}` routed to `{target}` in step {step}, which is neither a node of the graph nor END"
            ),
            RunErrorKind::RecursionLimit { limit, last, next } => write!(
                f,
                "the run reached its recursion limit of {limit} steps; the last step ran {} and would have gone on to {}; raise the limit or add a route to END",
                names(last),
                names(next)
            ),
            RunErrorKind::StepTimeout { timeout, nodes } => write!(
                f,
                "step {step} ran {} for longer than the graph's step timeout of {} s; nothing of it was merged",
                names(nodes),
                timeout.as_secs_f64()
            ),
        }
    }
}

fn names(nodes: &[String]) -> String {
    let quoted: Vec<String> = nodes.iter().map(|n| format!("`{n}`")).collect();
    quoted.join(", ")
}

impl<S> fmt::Debug for RunError<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RunError")
            .field("category", &self.category())
            .field("step", &self.0.step)
            .field("kind", &self.0.kind)
            .finish_non_exhaustive()
    }
}

impl<S> std::error::Error for RunError<S> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.0.kind {
            RunErrorKind::Node { error, .. } | RunErrorKind::Edge { error, .. } => {
                Some(error.as_ref())
            }
            RunErrorKind::Merge { error, .. } | RunErrorKind::ConcurrentWrite { error, .. } => {
                Some(&**error)
            }
            _ => None,
        }
    }
}
