//! The compiled [`Graph`] and its runs.

use crate::error::{CompileWarning, RunError};
use crate::event::Outbox;
use crate::name::{NodeKey, Routes};
use crate::node::{BoxError, Node};
use crate::run::{drive, unwrap_state, Memory, Run};
use crate::GraphState;
use std::collections::HashMap;
use std::sync::Arc;
use tracing::Instrument;

/// A conditional edge's function.
pub(crate) type RouteFn<S, K> = Arc<dyn Fn(&S) -> Result<Routes<K>, BoxError> + Send + Sync>;

/// A dynamic fan-out edge's function.
pub(crate) type SendFn<S, K> =
    Arc<dyn Fn(&S) -> Result<crate::name::Sends<K, S>, BoxError> + Send + Sync>;

/// An edge of a graph as drawn ([`Graph::edges`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Edge<'a, K> {
    /// The node it leaves.
    pub from: &'a K,
    /// The node it goes to; `None`: [`END`](crate::END).
    pub to: Option<&'a K>,
    /// Whether a route picks it (a conditional or `Send` edge) rather than always taken.
    pub conditional: bool,
}

/// A node's outgoing edge, its targets resolved to node indices (`None` is END).
pub(crate) enum GraphEdge<S, K> {
    Static(Vec<Option<usize>>),
    Conditional {
        route: RouteFn<S, K>,
        declared: Option<Vec<Option<usize>>>,
    },
    Send {
        send: SendFn<S, K>,
        declared: Option<Vec<Option<usize>>>,
    },
}

pub(crate) struct NodeEntry<S, K> {
    pub(crate) key: K,
    pub(crate) name: Arc<str>,
    pub(crate) node: Arc<dyn Node<S>>,
    pub(crate) edge: GraphEdge<S, K>,
}

/// The nodes a run suspends before, and after (by node index), as the graph was built with
/// them ([`GraphBuilder::interrupt_before`](crate::GraphBuilder::interrupt_before)).
#[derive(Default)]
pub(crate) struct Breakpoints {
    pub(crate) before: Vec<bool>,
    pub(crate) after: Vec<bool>,
}

pub(crate) struct Inner<S, K> {
    pub(crate) nodes: Vec<NodeEntry<S, K>>,
    pub(crate) breakpoints: Breakpoints,
    pub(crate) index: HashMap<K, usize>,
    pub(crate) entry: usize,
    pub(crate) recursion_limit: usize,
    /// How long a step's nodes may run, if limited.
    pub(crate) step_timeout: Option<std::time::Duration>,
    pub(crate) warnings: Vec<CompileWarning>,
}

/// A compiled graph: immutable, `Send + Sync`, cheap to clone (an `Arc`), shared by any number
/// of runs. Build it with [`Graph::builder`].
///
/// A run is a sequence of supersteps whose nodes read the state shared and whose updates merge
/// at the step's barrier, in place, in node order.
///
/// # A step
/// 1. Every node of the step runs, concurrently, on the same `Arc<S>` (no copy). Their futures
///    are polled in the run's own task: dropping the run drops them, and nothing is merged.
/// 2. If any node failed, the run stops with the first failure in node order (`node_exception`),
///    and nothing of the step is merged.
/// 3. The updates merge at the barrier, atomically, in the step's node order (never completion
///    order): one update merges as it is; several compose as parallel writes
///    ([`Combine::Parallel`](agentstate::Combine::Parallel) with [`FanIn::Strict`](agentstate::FanIn::Strict)), so a field whose reducer keeps one value
///    written by two nodes is an error naming the field and both nodes, and nothing is merged.
///    The state is mutated in place (`Arc::make_mut`: it copies only if a node kept its `Arc`,
///    or, in memory, when the step has a conditional or `Send` edge, whose failure must leave
///    the state as it was before the step; a durable run drops the step from its thread's
///    handle instead of copying).
/// 4. Each node's outgoing edge picks the next step's nodes, conditional edges reading the
///    merged state; an edge that fails, or names a node the graph lacks, fails the step, and
///    nothing of it is merged (as in LangGraph). A node reached by several edges runs once; the next step's nodes run in the
///    graph's node order (the order they were added), then the `Send`s of dynamic fan-out edges
///    ([`route_send`](crate::GraphBuilder::route_send),
///    [`route_send_to`](crate::GraphBuilder::route_send_to)), each a task of its own with its
///    own input, in the order they were returned (LangGraph merges edge-triggered tasks before
///    `Send` tasks too).
///
/// LangGraph evaluates a conditional edge after a parallel step on the step's start state plus
/// its own node's update only; this crate evaluates it on the merged state, as OpenArmature's
/// "post-update state" says and without copying the state per branch.
///
/// The run ends when a step routes nowhere but [`END`](crate::END). A run that would need
/// `limit` steps or more stops after step `limit` (its merge applied) with a `recursion_limit`
/// error naming the last step's nodes and the next ones.
///
/// ```
/// use agentstate_graph::{Context, Graph, END};
/// use agentstate::{AgentState, State};
/// use std::sync::Arc;
///
/// #[derive(AgentState, Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
/// struct Counter {
///     n: u32,
///     #[reducer(append)]
///     log: Vec<String>,
/// }
///
/// let graph = Graph::builder()
///     .node("count", |s: Arc<Counter>, cx: Context| async move {
///         Ok::<_, std::convert::Infallible>(CounterUpdate::default().n(s.n + 1).log(vec![format!("step {}", cx.step())]))
///     })
///     .entry("count")
///     .route("count", |s: &Counter| if s.n < 3 { "count".into() } else { END.into() })
///     .build()?;
///
/// let state = futures_executor_block_on(graph.invoke(Counter::default()))?;
/// assert_eq!(state.n, 3);
/// assert_eq!(state.log, ["step 1", "step 2", "step 3"]);
/// # fn futures_executor_block_on<F: std::future::Future>(f: F) -> F::Output {
/// #     tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(f)
/// # }
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Graph<S, K = &'static str> {
    inner: Arc<Inner<S, K>>,
}

impl<S, K> Clone for Graph<S, K> {
    fn clone(&self) -> Self {
        Graph {
            inner: Arc::clone(&self.inner),
        }
    }
}

impl<S, K: NodeKey> std::fmt::Debug for Graph<S, K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Graph")
            .field(
                "nodes",
                &self.inner.nodes.iter().map(|n| &n.key).collect::<Vec<_>>(),
            )
            .field("entry", &self.inner.nodes[self.inner.entry].key)
            .field("recursion_limit", &self.inner.recursion_limit)
            .finish()
    }
}

/// Options of one run.
#[derive(Debug, Clone, Default)]
pub struct RunConfig {
    /// The run's id (a new UUID v4 when `None`).
    pub run_id: Option<String>,
    /// The recursion limit (the graph's when `None`).
    pub recursion_limit: Option<usize>,
}

/// What one step did: the value a durable runner journals per step.
#[derive(Debug, Clone, PartialEq)]
pub struct StepRecord<K> {
    /// The step's number, from 1.
    pub step: u64,
    /// The nodes that ran, in merge order.
    pub nodes: Nodes<K>,
    /// The nodes of the next step (empty when the run ends).
    pub next: Nodes<K>,
}

/// The nodes of a step, in merge order: a slice (it derefs to `[K]`) that holds one node
/// inline and several shared, so that the events of a step pass it around without allocating
/// or counting references in the common case of one node.
///
/// ```
/// use agentstate_graph::Nodes;
///
/// let one = Nodes::from(vec!["model"]);
/// let two = Nodes::from(vec!["web", "papers"]);
/// assert_eq!(&one[..], ["model"]);
/// assert_eq!(two.len(), 2);
/// assert_eq!(two.clone(), two); // a clone of several shares them
/// assert!(Nodes::<&str>::from(vec![]).is_empty());
/// ```
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Nodes<K>(NodesRepr<K>);

#[derive(Clone, PartialEq, Eq, Hash)]
enum NodesRepr<K> {
    None,
    One(K),
    Many(Arc<[K]>),
}

impl<K> std::ops::Deref for Nodes<K> {
    type Target = [K];

    fn deref(&self) -> &[K] {
        match &self.0 {
            NodesRepr::None => &[],
            NodesRepr::One(key) => std::slice::from_ref(key),
            NodesRepr::Many(keys) => keys,
        }
    }
}

impl<K> From<Vec<K>> for Nodes<K> {
    fn from(mut keys: Vec<K>) -> Self {
        Nodes(match keys.len() {
            0 => NodesRepr::None,
            1 => NodesRepr::One(keys.pop().expect("one key")),
            _ => NodesRepr::Many(Arc::from(keys)),
        })
    }
}

impl<K: std::fmt::Debug> std::fmt::Debug for Nodes<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl<S: GraphState, K: NodeKey> Graph<S, K> {
    /// Starts building a graph.
    pub fn builder() -> crate::builder::GraphBuilder<S, K> {
        crate::builder::GraphBuilder::default()
    }

    pub(crate) fn from_inner(inner: Inner<S, K>) -> Self {
        Graph {
            inner: Arc::new(inner),
        }
    }

    pub(crate) fn inner(&self) -> &Inner<S, K> {
        &self.inner
    }

    /// The nodes' keys, in the order they were added.
    pub fn nodes(&self) -> impl Iterator<Item = &K> {
        self.inner.nodes.iter().map(|n| &n.key)
    }

    /// The entry node.
    pub fn entry(&self) -> &K {
        &self.inner.nodes[self.inner.entry].key
    }

    /// The warnings found when the graph was built.
    pub fn warnings(&self) -> &[CompileWarning] {
        &self.inner.warnings
    }

    /// The graph's edges as drawn (LangGraph's `get_graph()`): each node's outgoing edges, in
    /// the order the nodes were added, to a node or to [`END`](crate::END) (`to: None`). A
    /// conditional edge or a `Send` edge is one edge per node it may go to: those it declared,
    /// or, when it declared none, every node and `END`.
    ///
    /// ```
    /// use agentstate_graph::{Context, Edge, Graph, END};
    /// use std::sync::Arc;
    ///
    /// #[derive(agentstate::AgentState, Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
    /// struct Count { n: u32 }
    ///
    /// let graph = Graph::builder()
    ///     .node("add", |s: Arc<Count>, _: Context| async move {
    ///         Ok::<_, std::convert::Infallible>(CountUpdate::default().n(s.n + 1))
    ///     })
    ///     .entry("add")
    ///     .edge("add", END)
    ///     .build()?;
    /// assert_eq!(graph.edges(), [Edge { from: &"add", to: None, conditional: false }]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn edges(&self) -> Vec<Edge<'_, K>> {
        let nodes = &self.inner.nodes;
        let mut edges = Vec::new();
        for entry in nodes {
            let (targets, conditional) = match &entry.edge {
                GraphEdge::Static(to) => (to.clone(), false),
                GraphEdge::Conditional { declared, .. } | GraphEdge::Send { declared, .. } => {
                    let every = || (0..nodes.len()).map(Some).chain([None]).collect();
                    (declared.clone().unwrap_or_else(every), true)
                }
            };
            for to in targets {
                edges.push(Edge {
                    from: &entry.key,
                    to: to.map(|i| &nodes[i].key),
                    conditional,
                });
            }
        }
        edges
    }

    /// Runs the graph from `state` to its end, and returns the final state.
    pub async fn invoke(&self, state: S) -> Result<S, RunError<S>> {
        self.invoke_with(state, RunConfig::default()).await
    }

    /// Runs the graph with `config`.
    pub async fn invoke_with(&self, state: S, config: RunConfig) -> Result<S, RunError<S>> {
        // Boxed where `K` is still generic, so that the run's future is `Send` for any key
        // (the compiler cannot prove it for a `&'static str` key through the run loop's
        // futures otherwise).
        let run: crate::stream::Driver<Result<Arc<S>, RunError<S>>> = Box::pin(async move {
            let mut run = Run::new(self, config);
            let span = crate::trace::run(&run.run_id, None, None);
            let result = drive(&mut run, &mut Memory::new(state), &mut Outbox::off())
                .instrument(span.clone())
                .await;
            if let Err(error) = &result {
                crate::trace::failed(&span, error.category());
            }
            result
        });
        run.await.map(unwrap_state)
    }

    pub(crate) fn names(&self, at: &[usize]) -> Vec<String> {
        at.iter()
            .map(|&i| self.inner.nodes[i].name.to_string())
            .collect()
    }

    /// The keys of the nodes `at`.
    pub(crate) fn keys(&self, at: &[usize]) -> Nodes<K> {
        Nodes(match at {
            [] => NodesRepr::None,
            [one] => NodesRepr::One(self.inner.nodes[*one].key.clone()),
            _ => NodesRepr::Many(
                at.iter()
                    .map(|&i| self.inner.nodes[i].key.clone())
                    .collect(),
            ),
        })
    }

    /// Runs the graph as part of the node whose context is `parent` (a subgraph, a fan-out
    /// instance: `segment` names it among the node's runs): in a durable run, the child's
    /// nodes journal their effects and ask their questions under the parent task's key, so
    /// that they are not repeated, and are answered, when the parent node runs again. A child
    /// node's interrupt fails the child run with it as the node's error
    /// ([`RunError::into_node_error`]).
    pub(crate) async fn invoke_nested(
        &self,
        state: S,
        parent: &crate::Context,
        segment: &str,
    ) -> Result<S, RunError<S>> {
        let config = RunConfig {
            run_id: Some(parent.run_id().to_owned()),
            ..RunConfig::default()
        };
        let mut commit = match parent.scope_base() {
            None => Memory::new(state),
            Some((journal, base)) => Memory::nested(state, journal, format!("{base}/{segment}")),
        };
        let graph = self.clone();
        let thread = parent.thread().map(Arc::from);
        let mut out = Outbox::nested(parent.sink());
        let run: crate::stream::Driver<Result<Arc<S>, RunError<S>>> = Box::pin(async move {
            let mut run = Run::new(&graph, config).on_thread(thread);
            drive(&mut run, &mut commit, &mut out).await
        });
        run.await.map(unwrap_state)
    }

    /// The index of the node named `name`.
    #[cfg_attr(not(feature = "store"), allow(dead_code))] // durable runs
    pub(crate) fn index_of(&self, name: &str) -> Option<usize> {
        self.inner.nodes.iter().position(|n| &*n.name == name)
    }
}
