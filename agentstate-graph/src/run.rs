//! A run as a state machine: where it stands (the state, the next step's tasks, the step
//! number) and the two halves of a step, [`Run::begin`] (start the step's nodes) and
//! [`Run::finish`] (collect their outputs, merge at the barrier, route).
//!
//! [`Graph::invoke`] awaits the nodes between the two halves; the stream
//! ([`RunStream`](crate::stream::RunStream)) polls them itself and writes the events of each
//! half straight into a buffer it owns: no lock and no dynamic call per event, and the next
//! step begins only when the stream is polled after the consumer took the last step's events
//! (so a consumer that drops a step's state before asking for more never makes the run copy
//! it).

use crate::effect::Scope;
use crate::error::{RunError, RunErrorKind};
use crate::event::{Event, EventFilter};
use crate::graph::{Graph, Nodes, RunConfig, StepRecord};
use crate::name::NodeKey;
use crate::node::{BoxError, Context, NodeFuture, Sink};
use crate::GraphState;
use agentstate::NodeOutput;
use futures_util::future::JoinAll;
use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context as TaskContext, Poll};

/// A node's result, as its future gives it.
pub(crate) type NodeResult<U> = Result<NodeOutput<U>, BoxError>;

/// The running nodes of a step: one future (most steps), or all of them joined.
pub(crate) enum Tasks<U> {
    One(NodeFuture<U>),
    Many(JoinAll<NodeFuture<U>>),
}

/// What a step's nodes returned, in node order.
pub(crate) enum Results<U> {
    One(NodeResult<U>),
    Many(Vec<NodeResult<U>>),
}

impl<U> Future for Tasks<U> {
    type Output = Results<U>;

    fn poll(self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<Results<U>> {
        // Both variants are `Unpin` (boxed futures, and a join of them).
        match self.get_mut() {
            Tasks::One(future) => future.as_mut().poll(cx).map(Results::One),
            Tasks::Many(join) => Pin::new(join).poll(cx).map(Results::Many),
        }
    }
}

/// How a task of a step is started ([`Run::begin_with`]).
pub(crate) struct Setup<U> {
    /// Where its effects and interrupts go (durable runs).
    pub(crate) scope: Option<Arc<Scope>>,
    /// Its output, if it already ran.
    pub(crate) done: Option<NodeOutput<U>>,
}

impl<U> Default for Setup<U> {
    fn default() -> Self {
        Setup {
            scope: None,
            done: None,
        }
    }
}

/// Where a run's events go: the stream's own buffer (`None` when the run is not streamed).
pub(crate) type Events<'a, S, K> = Option<&'a mut VecDeque<Event<S, K>>>;

/// A run between two steps (or inside one, while its [`Tasks`] run): where it stands, but not
/// its state, which its driver holds (in memory, or a stored thread's) and passes in.
pub(crate) struct Run<S: GraphState, K> {
    graph: Graph<S, K>,
    pub(crate) run_id: Arc<str>,
    limit: usize,
    /// The next step's nodes (indices into the graph's nodes).
    pub(crate) active: Vec<usize>,
    /// The inputs of the next step's `Send` tasks (`None`: the node reads the state).
    pub(crate) inputs: Vec<Option<Arc<S>>>,
    /// The last step's nodes (named by a recursion-limit error).
    last: Vec<usize>,
    /// The step that ran last (0 before the first).
    pub(crate) step: u64,
    /// Where nodes' emissions go (streamed runs only).
    sink: Option<Sink>,
    /// The current step's node keys, shared by its events and its record (streamed runs only).
    keys: Option<Nodes<K>>,
    /// The events a streamed run writes.
    filter: EventFilter,
}

impl<S: GraphState, K: NodeKey> Run<S, K> {
    /// A run of `graph` at its entry.
    pub(crate) fn new(graph: &Graph<S, K>, config: RunConfig, sink: Option<Sink>) -> Self {
        let inner = graph.inner();
        let run_id: Arc<str> = match config.run_id {
            Some(id) => Arc::from(id),
            None => Arc::from(uuid::Uuid::new_v4().to_string()),
        };
        Run {
            graph: graph.clone(),
            run_id,
            limit: config.recursion_limit.unwrap_or(inner.recursion_limit),
            active: vec![inner.entry],
            inputs: vec![None],
            last: Vec::new(),
            step: 0,
            sink,
            keys: None,
            filter: EventFilter::ALL,
        }
    }

    /// Whether the run writes the events of `filter`.
    pub(crate) fn wants(&self, filter: EventFilter) -> bool {
        self.filter.contains(filter)
    }

    /// Sends nodes' emissions to `sink` from the next step on.
    pub(crate) fn set_sink(&mut self, sink: Sink) {
        self.sink = Some(sink);
    }

    /// Writes only the events of `filter` from now on (and drops nodes' emissions unless it
    /// has [`EventFilter::EMITTED`]).
    pub(crate) fn filter(&mut self, filter: EventFilter) {
        self.filter = filter;
        if !filter.contains(EventFilter::EMITTED) {
            self.sink = None;
        }
    }

    /// The run's start event.
    pub(crate) fn started(&self) -> Event<S, K> {
        Event::RunStarted {
            run_id: self.run_id.to_string(),
        }
    }

    /// Starts the next step: its nodes' futures, or `None` when the run is at its end. Fails
    /// on the recursion limit.
    pub(crate) fn begin(
        &mut self,
        state: &Arc<S>,
        events: Events<'_, S, K>,
    ) -> Result<Option<Tasks<S::Update>>, RunErrorKind> {
        self.begin_with(state, events, |_, _| Setup::default())
    }

    /// [`begin`](Run::begin), with `setup` saying for each task (its index in the step, its
    /// node's name) where its effects and interrupts go, and whether it already ran (a task of
    /// a suspended step whose output was kept: it is not called again).
    pub(crate) fn begin_with(
        &mut self,
        state: &Arc<S>,
        events: Events<'_, S, K>,
        mut setup: impl FnMut(usize, &Arc<str>) -> Setup<S::Update>,
    ) -> Result<Option<Tasks<S::Update>>, RunErrorKind> {
        if self.step as usize >= self.limit {
            return Err(RunErrorKind::RecursionLimit {
                limit: self.limit,
                last: self.graph.names(&self.last),
                next: self.graph.names(&self.active),
            });
        }
        if self.active.is_empty() {
            return Ok(None);
        }
        self.step += 1;
        let step = self.step;
        let nodes = &self.graph.inner().nodes;
        if let Some(events) = events {
            if self.filter.contains(EventFilter::STEP_STARTED) {
                let keys = match self.keys.take() {
                    Some(keys) => keys,
                    None => self.graph.keys(&self.active),
                };
                events.push_back(Event::StepStarted {
                    step,
                    nodes: keys.clone(),
                });
                self.keys = Some(keys);
            }
            if self.filter.contains(EventFilter::NODE_STARTED) {
                for &at in &self.active {
                    events.push_back(Event::NodeStarted {
                        step,
                        node: nodes[at].key.clone(),
                    });
                }
            }
        }
        let mut index = 0;
        let mut call = |(&at, input): (&usize, &Option<Arc<S>>)| {
            let entry = &nodes[at];
            let Setup { scope, done } = setup(index, &entry.name);
            index += 1;
            if let Some(output) = done {
                let future: NodeFuture<S::Update> = Box::pin(std::future::ready(Ok(output)));
                return future;
            }
            let cx = Context::new(
                Arc::clone(&self.run_id),
                Arc::clone(&entry.name),
                step,
                self.sink.clone(),
            )
            .with_scope(scope);
            entry
                .node
                .call(Arc::clone(input.as_ref().unwrap_or(state)), cx)
        };
        Ok(Some(match (&self.active[..], &self.inputs[..]) {
            ([at], [input]) => Tasks::One(call((at, input))),
            _ => Tasks::Many(futures_util::future::join_all(
                self.active.iter().zip(&self.inputs).map(call),
            )),
        }))
    }

    /// Ends the step `begin` started: its nodes' outputs become updates (the first failure in
    /// node order stops the run, nothing merged), merge into `state` at the barrier in node
    /// order, and the edges pick the next step's nodes.
    pub(crate) fn finish(
        &mut self,
        state: &mut Arc<S>,
        results: Results<S::Update>,
        mut events: Events<'_, S, K>,
    ) -> Result<(), RunErrorKind> {
        let updates = self.collect(results, events.as_deref_mut())?;
        self.graph.merge(state, &self.active, updates)?;
        let (next, inputs) = self.graph.route(state, &self.active)?;
        self.advance(state, next, inputs, events);
        Ok(())
    }

    /// A step's nodes' outputs as their updates, in node order; the first failure in node
    /// order is the step's error.
    pub(crate) fn collect(
        &mut self,
        results: Results<S::Update>,
        mut events: Events<'_, S, K>,
    ) -> Result<Vec<Option<S::Update>>, RunErrorKind> {
        let graph = &self.graph;
        let step = self.step;
        let node_events = self.filter.contains(EventFilter::NODE_FINISHED);
        let mut finish = |at: usize, result: NodeResult<S::Update>| {
            let update = graph.node_update(at, result)?;
            if let Some(events) = events.as_deref_mut().filter(|_| node_events) {
                events.push_back(Event::NodeFinished {
                    step,
                    node: graph.inner().nodes[at].key.clone(),
                    update: update.as_ref().map(|update| Box::new(update.clone())),
                });
            }
            Ok::<_, RunErrorKind>(update)
        };
        Ok(match results {
            Results::One(result) => vec![finish(self.active[0], result)?],
            Results::Many(results) => {
                let mut updates = Vec::with_capacity(results.len());
                for (&at, result) in self.active.iter().zip(results) {
                    updates.push(finish(at, result)?);
                }
                updates
            }
        })
    }

    /// Moves the run to its next step (`next`, with the inputs of its `Send` tasks), once the
    /// step merged into `state`.
    pub(crate) fn advance(
        &mut self,
        state: &Arc<S>,
        next: Vec<usize>,
        inputs: Vec<Option<Arc<S>>>,
        events: Events<'_, S, K>,
    ) {
        let keys = self.keys.take();
        if let Some(events) = events.filter(|_| self.filter.contains(EventFilter::STEP_FINISHED)) {
            let next_keys = self.graph.keys(&next);
            self.keys = Some(next_keys.clone());
            events.push_back(Event::StepFinished {
                record: StepRecord {
                    step: self.step,
                    nodes: keys.unwrap_or_else(|| self.graph.keys(&self.active)),
                    next: next_keys,
                },
                state: Arc::clone(state),
            });
        }
        self.last = std::mem::replace(&mut self.active, next);
        self.inputs = inputs;
    }

    /// The next step's nodes (the current step's, between `begin` and `advance`).
    #[cfg_attr(not(feature = "store"), allow(dead_code))] // durable runs
    pub(crate) fn active(&self) -> &[usize] {
        &self.active
    }

    /// Puts the run after step `step`, its next step's nodes `active` (with the inputs of
    /// their `Send` tasks): where a stored run stands.
    #[cfg_attr(not(feature = "store"), allow(dead_code))] // durable runs
    pub(crate) fn resume_at(&mut self, step: u64, active: Vec<usize>, inputs: Vec<Option<Arc<S>>>) {
        self.step = step;
        self.active = active;
        self.inputs = inputs;
    }

    /// The graph the run runs.
    #[cfg_attr(not(feature = "store"), allow(dead_code))] // durable runs
    pub(crate) fn graph(&self) -> &Graph<S, K> {
        &self.graph
    }

    /// The run's error `kind`, at its current step, with `state`.
    pub(crate) fn fail(&self, kind: RunErrorKind, state: Arc<S>) -> RunError<S> {
        RunError::new(kind, self.step, unwrap_state(state))
    }

    /// [`complete`](Run::complete) for a run nested in a durable task: each of its tasks gets
    /// a scope under `base` in `journal`.
    pub(crate) async fn complete_nested(
        mut self,
        state: S,
        journal: Arc<dyn crate::effect::Journal>,
        base: String,
    ) -> Result<S, RunError<S>> {
        let mut state = Arc::new(state);
        loop {
            let step = self.step + 1;
            let begun = self.begin_with(&state, None, |index, _| Setup {
                scope: Some(Arc::new(Scope::new(
                    Arc::clone(&journal),
                    format!("{base}/{step}.{index}"),
                ))),
                done: None,
            });
            let tasks = match begun {
                Ok(Some(tasks)) => tasks,
                Ok(None) => return Ok(unwrap_state(state)),
                Err(kind) => return Err(self.fail(kind, state)),
            };
            let results = tasks.await;
            if let Err(kind) = self.finish(&mut state, results, None) {
                return Err(self.fail(kind, state));
            }
        }
    }

    /// Runs to the end from `state`, awaiting each step's nodes.
    pub(crate) async fn complete(mut self, state: S) -> Result<S, RunError<S>> {
        let mut state = Arc::new(state);
        loop {
            let tasks = match self.begin(&state, None) {
                Ok(Some(tasks)) => tasks,
                Ok(None) => return Ok(unwrap_state(state)),
                Err(kind) => return Err(self.fail(kind, state)),
            };
            let results = tasks.await;
            if let Err(kind) = self.finish(&mut state, results, None) {
                return Err(self.fail(kind, state));
            }
        }
    }
}

/// The state out of its `Arc`, copied only if something still holds it.
pub(crate) fn unwrap_state<S: Clone>(state: Arc<S>) -> S {
    Arc::try_unwrap(state).unwrap_or_else(|shared| (*shared).clone())
}
