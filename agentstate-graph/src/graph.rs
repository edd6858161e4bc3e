//! The compiled [`Graph`] and its runs: supersteps whose nodes read the state shared and whose
//! updates merge at the step's barrier, in place, in node order.
//!
//! # A step
//! 1. Every node of the step runs, concurrently, on the same `Arc<S>` (no copy). Their futures
//!    are polled in the run's own task: dropping the run drops them, and nothing is merged.
//! 2. If any node failed, the run stops with the first failure in node order (`node_exception`),
//!    and nothing of the step is merged.
//! 3. The updates merge at the barrier, atomically, in the step's node order (never completion
//!    order): one update merges as it is; several compose as parallel writes
//!    ([`Combine::Parallel`] with [`FanIn::Strict`]), so a field whose reducer keeps one value
//!    written by two nodes is an error naming the field and both nodes, and nothing is merged.
//!    The state is mutated in place (`Arc::make_mut`: it copies only if a node kept its `Arc`).
//! 4. Each node's outgoing edge picks the next step's nodes, conditional edges reading the
//!    merged state. A node reached by several edges runs once; the next step's nodes run in the
//!    graph's node order (the order they were added), then the `Send`s of dynamic fan-out edges
//!    ([`route_send`](crate::GraphBuilder::route_send)), each a task of its own with its own
//!    input, in the order they were returned (LangGraph merges edge-triggered tasks before
//!    `Send` tasks too).
//!
//! LangGraph evaluates a conditional edge after a parallel step on the step's start state plus
//! its own node's update only; this crate evaluates it on the merged state, as OpenArmature's
//! "post-update state" says and without copying the state per branch.
//!
//! The run ends when a step routes nowhere but [`END`](crate::END). A run that would need
//! `limit` steps or more stops after step `limit` (its merge applied) with a `recursion_limit`
//! error naming the last step's nodes and the next ones.

use crate::error::{CompileWarning, RunError, RunErrorKind};
use crate::event::{Observer, Queued};
use crate::name::{NodeKey, Routes};
use crate::node::{BoxError, Context, Node, Sink};
use crate::GraphState;
use agentstate::update::{Combine, FanIn};
use std::collections::HashMap;
use std::sync::Arc;

/// A conditional edge's function.
pub(crate) type RouteFn<S, K> = Arc<dyn Fn(&S) -> Result<Routes<K>, BoxError> + Send + Sync>;

/// A dynamic fan-out edge's function.
pub(crate) type SendFn<S, K> =
    Arc<dyn Fn(&S) -> Result<Vec<crate::name::Dispatch<K, S>>, BoxError> + Send + Sync>;

/// A node's outgoing edge, its targets resolved to node indices (`None` is END).
pub(crate) enum Edge<S, K> {
    Static(Vec<Option<usize>>),
    Conditional {
        route: RouteFn<S, K>,
        declared: Option<Vec<Option<usize>>>,
    },
    Send(SendFn<S, K>),
}

pub(crate) struct NodeEntry<S, K> {
    pub(crate) key: K,
    pub(crate) name: Arc<str>,
    pub(crate) node: Arc<dyn Node<S>>,
    pub(crate) edge: Edge<S, K>,
}

pub(crate) struct Inner<S, K> {
    pub(crate) nodes: Vec<NodeEntry<S, K>>,
    pub(crate) index: HashMap<K, usize>,
    pub(crate) entry: usize,
    pub(crate) recursion_limit: usize,
    pub(crate) warnings: Vec<CompileWarning>,
}

/// A compiled graph: immutable, `Send + Sync`, cheap to clone (an `Arc`), shared by any number
/// of runs. Build it with [`Graph::builder`].
///
/// ```
/// use agentstate_graph::{node::Context, Graph, END};
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
    /// The nodes that ran, in merge order (shared with the step's
    /// [`StepStarted`](crate::event::Event::StepStarted) event).
    pub nodes: Arc<[K]>,
    /// The nodes of the next step (empty when the run ends; shared with that step's events).
    pub next: Arc<[K]>,
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

    /// Runs the graph from `state` to its end, and returns the final state.
    pub async fn invoke(&self, state: S) -> Result<S, RunError<S>> {
        self.invoke_with(state, RunConfig::default()).await
    }

    /// Runs the graph with `config`.
    pub async fn invoke_with(&self, state: S, config: RunConfig) -> Result<S, RunError<S>> {
        self.run(state, config, None).await
    }

    /// Runs the graph with `config`, telling `observer` what happens (the stream's source).
    pub(crate) async fn run(
        &self,
        state: S,
        config: RunConfig,
        observer: Option<Arc<dyn Observer<S, K>>>,
    ) -> Result<S, RunError<S>> {
        let inner = &*self.inner;
        let run_id: Arc<str> = match config.run_id {
            Some(id) => Arc::from(id),
            None => Arc::from(uuid::Uuid::new_v4().to_string()),
        };
        let limit = config.recursion_limit.unwrap_or(inner.recursion_limit);
        let sink: Option<Sink> = observer.as_ref().map(|o| {
            let o = Arc::clone(o);
            let sink: Sink =
                Arc::new(move |node: &str, step, emitted| o.emitted(node, step, emitted));
            sink
        });
        if let Some(o) = &observer {
            o.event(Queued::RunStarted {
                run_id: Arc::clone(&run_id),
            });
        }
        let mut state = Arc::new(state);
        let mut active: Vec<usize> = vec![inner.entry];
        // The inputs of the step's `Send` tasks (`None`: the node reads the state).
        let mut inputs: Vec<Option<Arc<S>>> = vec![None];
        let mut last: Vec<usize> = Vec::new();
        // The step's node keys, made once per step and shared by its events (streaming only).
        let mut keys: Option<Arc<[K]>> = observer.as_ref().map(|_| self.keys(&active));
        let mut step: u64 = 0;
        loop {
            if step as usize >= limit {
                let kind = RunErrorKind::RecursionLimit {
                    limit,
                    last: self.names(&last),
                    next: self.names(&active),
                };
                return Err(RunError::new(kind, step, unwrap_state(state)));
            }
            if active.is_empty() {
                break;
            }
            step += 1;
            if let (Some(o), Some(nodes)) = (&observer, &keys) {
                o.event(Queued::StepStarted {
                    step,
                    nodes: Arc::clone(nodes),
                });
            }
            let outcome = self
                .run_nodes(
                    &state,
                    &active,
                    &inputs,
                    step,
                    Scope {
                        run_id: &run_id,
                        sink: sink.as_ref(),
                        observer: observer.as_deref(),
                    },
                )
                .await;
            let updates = match outcome {
                Ok(updates) => updates,
                Err(kind) => return Err(RunError::new(kind, step, unwrap_state(state))),
            };
            if let Err(kind) = self.merge(&mut state, &active, updates) {
                return Err(RunError::new(kind, step, unwrap_state(state)));
            }
            let (next, next_inputs) = match self.route(&state, &active) {
                Ok(next) => next,
                Err(kind) => return Err(RunError::new(kind, step, unwrap_state(state))),
            };
            if let (Some(o), Some(nodes)) = (&observer, &mut keys) {
                let next_keys = self.keys(&next);
                o.event(Queued::StepFinished {
                    record: StepRecord {
                        step,
                        nodes: std::mem::replace(nodes, Arc::clone(&next_keys)),
                        next: next_keys,
                    },
                    state: Arc::clone(&state),
                });
                // Lets the stream hand the state out before the next merge needs it alone.
                crate::event::yield_now().await;
            }
            last = std::mem::replace(&mut active, next);
            inputs = next_inputs;
        }
        Ok(unwrap_state(state))
    }

    fn names(&self, at: &[usize]) -> Vec<String> {
        at.iter()
            .map(|&i| self.inner.nodes[i].name.to_string())
            .collect()
    }

    fn keys(&self, at: &[usize]) -> Arc<[K]> {
        at.iter()
            .map(|&i| self.inner.nodes[i].key.clone())
            .collect()
    }

    /// Runs a step's nodes on the shared state; their updates in node order.
    async fn run_nodes(
        &self,
        state: &Arc<S>,
        active: &[usize],
        inputs: &[Option<Arc<S>>],
        step: u64,
        scope: Scope<'_, S, K>,
    ) -> Result<Vec<Option<S::Update>>, RunErrorKind> {
        let Scope {
            run_id,
            sink,
            observer,
        } = scope;
        let nodes = &self.inner.nodes;
        let call = |(at, input): (usize, &Option<Arc<S>>)| {
            let entry = &nodes[at];
            if let Some(o) = observer {
                o.event(Queued::NodeStarted {
                    step,
                    node: entry.key.clone(),
                });
            }
            let cx = Context::new(
                Arc::clone(run_id),
                Arc::clone(&entry.name),
                step,
                sink.cloned(),
            );
            entry
                .node
                .call(Arc::clone(input.as_ref().unwrap_or(state)), cx)
        };
        let finish =
            |at: usize, result: Result<agentstate::output::NodeOutput<S::Update>, BoxError>| {
                let entry = &nodes[at];
                let output = result.map_err(|error| RunErrorKind::Node {
                    node: entry.name.to_string(),
                    error,
                })?;
                let update =
                    output
                        .into_update(S::compose)
                        .map_err(|error| RunErrorKind::Merge {
                            nodes: vec![entry.name.to_string()],
                            error: Box::new(error.from_node(&entry.name)),
                        })?;
                if let Some(o) = observer {
                    o.event(Queued::NodeFinished {
                        step,
                        node: entry.key.clone(),
                        update: update.as_ref().map(|update| Box::new(update.clone())),
                    });
                }
                Ok(update)
            };
        if let ([at], [input]) = (active, inputs) {
            let at = *at;
            let result = call((at, input)).await;
            return Ok(vec![finish(at, result)?]);
        }
        let futures: Vec<_> = active.iter().copied().zip(inputs).map(call).collect();
        let results = futures_util::future::join_all(futures).await;
        // The first failure in node order, not in completion order.
        let mut updates = Vec::with_capacity(results.len());
        for (&at, result) in active.iter().zip(results) {
            updates.push(finish(at, result)?);
        }
        Ok(updates)
    }

    /// Merges a step's updates at the barrier, atomically, in node order.
    fn merge(
        &self,
        state: &mut Arc<S>,
        active: &[usize],
        updates: Vec<Option<S::Update>>,
    ) -> Result<(), RunErrorKind> {
        let nodes = &self.inner.nodes;
        let written: Vec<(usize, S::Update)> = active
            .iter()
            .zip(updates)
            .filter_map(|(&at, u)| u.map(|u| (at, u)))
            .collect();
        let (update, from) = match written.len() {
            0 => return Ok(()),
            1 => {
                let (at, update) = written.into_iter().next().expect("one update");
                (update, Some(at))
            }
            _ => (combine_parallel::<S, K>(nodes, written)?, None),
        };
        let merge_error = |error: agentstate::Error| RunErrorKind::Merge {
            nodes: active.iter().map(|&i| nodes[i].name.to_string()).collect(),
            error: Box::new(match from {
                Some(at) => error.from_node(&nodes[at].name),
                None => error,
            }),
        };
        // Plan on the shared state first: a failing merge must not copy a state a node kept.
        let plan = state.plan(update).map_err(merge_error)?;
        Arc::make_mut(state).apply(plan);
        Ok(())
    }

    /// The next step's tasks: the targets of the step's nodes' edges, each once, in node
    /// order, then the `Send`s with their inputs, in the order they were returned.
    #[allow(clippy::type_complexity)]
    fn route(
        &self,
        state: &S,
        active: &[usize],
    ) -> Result<(Vec<usize>, Vec<Option<Arc<S>>>), RunErrorKind> {
        let inner = &*self.inner;
        let mut sends: Vec<(usize, Arc<S>)> = Vec::new();
        let mut next: Vec<usize> = Vec::new();
        let mut push = |at: usize| {
            if !next.contains(&at) {
                next.push(at);
            }
        };
        for &at in active {
            let entry = &inner.nodes[at];
            match &entry.edge {
                Edge::Static(targets) => targets.iter().flatten().for_each(|&t| push(t)),
                Edge::Send(send) => {
                    let targets = send(state).map_err(|error| RunErrorKind::Edge {
                        node: entry.name.to_string(),
                        error,
                    })?;
                    for crate::name::Dispatch { node, input } in targets {
                        let Some(&t) = inner.index.get(&node) else {
                            return Err(RunErrorKind::Routing {
                                node: entry.name.to_string(),
                                target: node.name().to_owned(),
                            });
                        };
                        sends.push((t, Arc::new(input)));
                    }
                }
                Edge::Conditional { route, declared } => {
                    let routes = route(state).map_err(|error| RunErrorKind::Edge {
                        node: entry.name.to_string(),
                        error,
                    })?;
                    for target in routes.targets() {
                        let crate::name::Target::Node(key) = target else {
                            continue;
                        };
                        let found =
                            inner.index.get(key).copied().filter(|t| {
                                declared.as_ref().is_none_or(|d| d.contains(&Some(*t)))
                            });
                        match found {
                            Some(t) => push(t),
                            None => {
                                return Err(RunErrorKind::Routing {
                                    node: entry.name.to_string(),
                                    target: key.name().to_owned(),
                                })
                            }
                        }
                    }
                }
            }
        }
        if next.len() > 1 {
            next.sort_unstable();
        }
        let mut inputs: Vec<Option<Arc<S>>> = vec![None; next.len()];
        for (at, input) in sends {
            next.push(at);
            inputs.push(Some(input));
        }
        Ok((next, inputs))
    }
}

/// Composes parallel updates in node order; a field two nodes wrote that cannot take both is
/// reported naming both nodes.
fn combine_parallel<S: GraphState, K>(
    nodes: &[NodeEntry<S, K>],
    written: Vec<(usize, S::Update)>,
) -> Result<S::Update, RunErrorKind> {
    let how = Combine::Parallel(FanIn::Strict);
    let mut acc: Option<S::Update> = None;
    for (i, (at, update)) in written.iter().enumerate() {
        let combined = match acc.take() {
            None => Ok(update.clone()),
            Some(prev) => S::compose(prev, update.clone(), how),
        };
        match combined {
            Ok(c) => acc = Some(c),
            Err(error) => {
                // Which earlier node's update clashes with this one.
                let first = written[..i]
                    .iter()
                    .find(|(_, earlier)| S::compose(earlier.clone(), update.clone(), how).is_err());
                let nodes_named = |at: usize| nodes[at].name.to_string();
                return Err(match (first, error.field()) {
                    (Some(&(first, _)), Some(field))
                        if error.category() == "state_validation_error" =>
                    {
                        RunErrorKind::ConcurrentWrite {
                            field: field.to_owned(),
                            first: nodes_named(first),
                            second: nodes_named(*at),
                            error: Box::new(error),
                        }
                    }
                    _ => RunErrorKind::Merge {
                        nodes: written.iter().map(|(at, _)| nodes_named(*at)).collect(),
                        error: Box::new(error.from_node(&nodes[*at].name)),
                    },
                });
            }
        }
    }
    Ok(acc.expect("at least two updates"))
}

/// What every node of a run shares.
struct Scope<'a, S, K> {
    run_id: &'a Arc<str>,
    sink: Option<&'a Sink>,
    observer: Option<&'a dyn Observer<S, K>>,
}

/// The state out of its `Arc`, copied only if something still holds it.
fn unwrap_state<S: Clone>(state: Arc<S>) -> S {
    Arc::try_unwrap(state).unwrap_or_else(|shared| (*shared).clone())
}
