//! The run loop, one for every kind of run: [`Graph::invoke`] (in memory), a run nested in a
//! node (a subgraph, a fan-out instance), a streamed run ([`RunStream`](crate::RunStream)) and
//! a durable one ([`durable`](crate::durable)) all go through [`drive`].
//!
//! A step: the run checks its recursion limit and its breakpoints, starts the step's tasks
//! (each node's future, polled in the run's own task), waits for them, turns their results
//! into updates (the first failure in node order stops the run, nothing merged), composes
//! them into the one update of the step ([`step`](crate::step)), commits it and routes, then
//! hands the step's events to the stream, if any, before the next step begins.
//!
//! What differs between kinds of runs is how a step is committed: applied to the run's own
//! state ([`Memory`]), or staged on a stored thread and flushed by the durability mode (the
//! durable runs' commit). That is the [`Commit`] a run is driven with.

use crate::effect::{breakpoint_place, Interrupt, Interrupted, Journal, Scope};
use crate::error::{RunError, RunErrorKind};
use crate::event::{Event, EventFilter, Outbox};
use crate::graph::{Graph, Nodes, RunConfig, StepRecord};
use crate::name::NodeKey;
use crate::node::{BoxError, Context, NodeFuture, Sink};
use crate::step::{Composed, Next};
use crate::GraphState;
use agentstate::NodeOutput;
use std::future::Future;
use std::sync::Arc;
use tracing::Instrument;

/// A node's result, as its future gives it.
pub(crate) type NodeResult<U> = Result<NodeOutput<U>, BoxError>;

/// How a task of a step is started.
pub(crate) struct Setup<U> {
    /// Where its effects and interrupts go (durable runs).
    pub(crate) scope: Option<Arc<Scope>>,
    /// Its output, if it already ran (a finished task of an unfinished step: not run again).
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

/// Why a commit did not go through: the run's own error (a merge or routing failure, which the
/// commit reports with [`Commit::fail`]), or the commit's (a store's).
pub(crate) enum Stop<E> {
    Run(RunErrorKind),
    #[cfg_attr(not(feature = "store"), allow(dead_code))] // durable runs
    Commit(E),
}

impl<E> From<RunErrorKind> for Stop<E> {
    fn from(kind: RunErrorKind) -> Self {
        Stop::Run(kind)
    }
}

/// A committed step: the next step's tasks, and the thread's version if the commit wrote it.
pub(crate) struct Committed<S> {
    pub(crate) next: Next<S>,
    pub(crate) version: Option<u64>,
}

/// How a run's steps are committed, and how it ends: the part of a run that differs between
/// an in-memory run and a durable one. Its futures are `Send`, so that runs are.
pub(crate) trait Commit<S: GraphState, K: NodeKey>: Send {
    /// What a run gives when it ends well (finished, or suspended).
    type Output: Send;
    /// What it gives when it fails.
    type Error: Send;
    /// Whether a node's question suspends the run (durable runs); otherwise it fails the
    /// node, as any error does.
    const SUSPENDS: bool;

    /// The state the next step's nodes read (shared with the commit, not copied).
    fn state(&mut self) -> Arc<S>;

    /// Whether interrupt `id` was answered (a breakpoint then lets the run go on).
    fn answered(&self, id: &str) -> bool;

    /// The thread's version after what the run's end ([`finish`](Commit::finish),
    /// [`suspend`](Commit::suspend)) committed, if it committed something not reported yet.
    fn take_committed(&mut self) -> Option<u64> {
        None
    }

    /// Checks that the run may begin its next step (a durable run that lost its lease may
    /// not).
    fn before_step(
        &mut self,
        run: &Run<S, K>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send;

    /// How task `index` (node `at`) of the step about to run starts.
    fn task(&mut self, run: &Run<S, K>, index: usize, at: usize) -> Setup<S::Update>;

    /// The future of a started task (the node's own, or one that also records its output).
    fn wrap(
        &mut self,
        run: &Run<S, K>,
        index: usize,
        task: NodeFuture<S::Update>,
    ) -> NodeFuture<S::Update> {
        let _ = (run, index);
        task
    }

    /// Runs while the step's nodes run (a durable run commits its last step meanwhile);
    /// gives the thread's version if it committed something.
    fn meanwhile(&mut self) -> impl Future<Output = Result<Option<u64>, Self::Error>> + Send;

    /// Commits the step's update (`None`: no node wrote) and routes on the committed state. A
    /// step that fails to merge or route commits nothing.
    fn commit(
        &mut self,
        run: &Run<S, K>,
        update: Option<Composed<S::Update>>,
    ) -> impl Future<Output = Result<Committed<S>, Stop<Self::Error>>> + Send;

    /// The run reached its end.
    fn finish(
        &mut self,
        run: &Run<S, K>,
    ) -> impl Future<Output = Result<Self::Output, Self::Error>> + Send;

    /// The run waits for answers to `interrupts` (only when [`SUSPENDS`](Commit::SUSPENDS)).
    fn suspend(
        &mut self,
        run: &Run<S, K>,
        interrupts: Vec<Interrupt>,
    ) -> impl Future<Output = Result<Self::Output, Self::Error>> + Send;

    /// The run failed with `kind` in its current step.
    fn fail(
        &mut self,
        run: &Run<S, K>,
        kind: RunErrorKind,
    ) -> impl Future<Output = Self::Error> + Send;
}

/// Where a run stands: its graph, its id, the next step's tasks and the step number. Its
/// state is its [`Commit`]'s.
pub(crate) struct Run<S: GraphState, K> {
    graph: Graph<S, K>,
    pub(crate) run_id: Arc<str>,
    limit: usize,
    /// The next step's nodes (indices into the graph's nodes): the current step's while it
    /// runs.
    pub(crate) active: Vec<usize>,
    /// The inputs of the next step's `Send` tasks (`None`: the node reads the state).
    pub(crate) inputs: Vec<Option<Arc<S>>>,
    /// The last step's nodes (named by a recursion-limit error, and by breakpoints after).
    pub(crate) last: Vec<usize>,
    /// The step that ran last (0 before the first): the current step while it runs.
    pub(crate) step: u64,
    /// The durable run's thread (on its spans and its nodes' contexts); a nested run's is its
    /// parent's.
    pub(crate) thread: Option<Arc<str>>,
    /// Breakpoints of this run beyond the graph's: nodes to suspend before, and after.
    before: Vec<usize>,
    after: Vec<usize>,
    /// The current step's node keys, shared by its events and its record (streamed runs).
    keys: Option<Nodes<K>>,
}

impl<S: GraphState, K: NodeKey> Run<S, K> {
    /// A run of `graph` at its entry.
    pub(crate) fn new(graph: &Graph<S, K>, config: RunConfig) -> Self {
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
            thread: None,
            before: Vec::new(),
            after: Vec::new(),
            keys: None,
        }
    }

    /// The run of thread `thread` (a durable run's, or a nested run's parent's).
    pub(crate) fn on_thread(mut self, thread: Option<Arc<str>>) -> Self {
        self.thread = thread;
        self
    }

    /// Adds breakpoints (node indices) to this run's.
    #[cfg_attr(not(feature = "store"), allow(dead_code))] // durable runs
    pub(crate) fn breakpoints(&mut self, before: Vec<usize>, after: Vec<usize>) {
        self.before = before;
        self.after = after;
    }

    /// The graph the run runs.
    pub(crate) fn graph(&self) -> &Graph<S, K> {
        &self.graph
    }

    /// Puts the run after step `step`, its next step's tasks `active` (with the inputs of
    /// their `Send`s), the step before's nodes `last`: where a stored run stands.
    #[cfg_attr(not(feature = "store"), allow(dead_code))] // durable runs
    pub(crate) fn resume_at(
        &mut self,
        step: u64,
        active: Vec<usize>,
        inputs: Vec<Option<Arc<S>>>,
        last: Vec<usize>,
    ) {
        self.step = step;
        self.active = active;
        self.inputs = inputs;
        self.last = last;
    }

    /// The run's error `kind`, at its current step, with `state`.
    pub(crate) fn error<T>(&self, kind: RunErrorKind, state: T) -> RunError<T> {
        RunError::new(kind, self.step, state)
    }

    /// The breakpoints due before the next step (the graph's and the run's), not answered:
    /// after a node of the last step, before a node of the next.
    fn breakpoints_due(&self, answered: impl Fn(&str) -> bool) -> Vec<Interrupt> {
        let inner = self.graph.inner();
        let mut due = Vec::new();
        let mut check = |nodes: &[usize], step: u64, set: &[usize], graph_set: &[bool], when| {
            for &at in nodes {
                if set.contains(&at) || graph_set.get(at).copied().unwrap_or(false) {
                    let name = &inner.nodes[at].name;
                    let interrupt = Interrupt::breakpoint(name, step, when, &self.run_id);
                    // A thread suspended by an earlier build answered it without the run's id.
                    let place = breakpoint_place(name, step, when);
                    if !answered(&interrupt.id)
                        && !answered(&place)
                        && !due.iter().any(|d: &Interrupt| d.id == interrupt.id)
                    {
                        due.push(interrupt);
                    }
                }
            }
        };
        check(
            &self.last,
            self.step,
            &self.after,
            &inner.breakpoints.after,
            "after",
        );
        check(
            &self.active,
            self.step + 1,
            &self.before,
            &inner.breakpoints.before,
            "before",
        );
        due
    }

    /// Moves the run to its next step.
    fn advance(&mut self, next: Next<S>) {
        let (next, inputs) = next;
        self.last = std::mem::replace(&mut self.active, next);
        self.inputs = inputs;
    }
}

/// Runs `run` until it ends, suspends or fails, committing each step with `commit` and writing
/// its events to `out`; see the [module docs](self).
pub(crate) async fn drive<S, K, C>(
    run: &mut Run<S, K>,
    commit: &mut C,
    out: &mut Outbox<S, K>,
) -> Result<C::Output, C::Error>
where
    S: GraphState,
    K: NodeKey,
    C: Commit<S, K>,
{
    let sink: Option<Sink> = out.sink();
    if out.is_on() {
        out.push(Event::RunStarted {
            run_id: run.run_id.to_string(),
        });
    }
    if out.wants(EventFilter::STEP_FINISHED) {
        // The state the run starts from (its input merged; a resumed run's where it stands):
        // LangGraph's first `values`. No node of the run made it: its record has none.
        out.push(Event::StepFinished {
            record: StepRecord {
                step: run.step,
                nodes: Nodes::from(Vec::new()),
                next: run.graph.keys(&run.active),
            },
            state: commit.state(),
        });
        // Taken (and its state let go) before the first step merges, which would copy the
        // state otherwise.
        out.handed_out().await;
    }
    loop {
        if run.step as usize >= run.limit {
            let kind = RunErrorKind::RecursionLimit {
                limit: run.limit,
                last: run.graph.names(&run.last),
                next: run.graph.names(&run.active),
            };
            return Err(commit.fail(run, kind).await);
        }
        // Breakpoints first: one after a node that ends the run suspends it there too.
        let due = run.breakpoints_due(|id| commit.answered(id));
        if !due.is_empty() {
            let suspended = commit.suspend(run, due).await;
            return ended(run, commit, out, suspended);
        }
        if run.active.is_empty() {
            let finished = commit.finish(run).await;
            return ended(run, commit, out, finished);
        }
        commit.before_step(run).await?;
        run.step += 1;
        let step = run.step;
        let inner = run.graph.inner();
        if out.wants(EventFilter::STEP_STARTED) {
            let keys = run.graph.keys(&run.active);
            out.push(Event::StepStarted {
                step,
                nodes: keys.clone(),
            });
            run.keys = Some(keys);
        }
        if out.wants(EventFilter::NODE_STARTED) {
            for &at in &run.active {
                out.push(Event::NodeStarted {
                    step,
                    node: inner.nodes[at].key.clone(),
                });
            }
        }
        out.send();

        // The step's tasks, on the state as it stands, started inside the step's span.
        let span = crate::trace::step(
            &run.run_id,
            run.thread.as_deref(),
            step,
            &run.graph.names(&run.active),
        );
        let entered = span.enter();
        let state = commit.state();
        let mut tasks = Vec::with_capacity(run.active.len());
        for (index, (&at, input)) in run.active.iter().zip(&run.inputs).enumerate() {
            let entry = &inner.nodes[at];
            let Setup { scope, done } = commit.task(run, index, at);
            let task: NodeFuture<S::Update> = match done {
                Some(output) => Box::pin(std::future::ready(Ok(output))),
                None => {
                    let cx = Context::new(
                        Arc::clone(&run.run_id),
                        Arc::clone(&entry.name),
                        step,
                        sink.clone(),
                    )
                    .with_scope(scope)
                    .with_thread(run.thread.clone())
                    .with_recursion_limit(run.limit);
                    let task = crate::trace::call_node(
                        &*entry.node,
                        Arc::clone(input.as_ref().unwrap_or(&state)),
                        cx,
                    );
                    commit.wrap(run, index, task)
                }
            };
            tasks.push(task);
        }
        drop(state);
        drop(entered);
        // The step's tasks, within the graph's step timeout if it has one (the last step's
        // background commit, `meanwhile`, is never cut short).
        let limit = inner.step_timeout;
        let results: Option<Vec<NodeResult<S::Update>>> = match tasks.len() {
            1 => {
                let task = within(limit, tasks.pop().expect("one task"));
                let (result, meanwhile) = futures_util::future::join(task, commit.meanwhile())
                    .instrument(span.clone())
                    .await;
                if let Some(version) = meanwhile? {
                    committed(out, step - 1, version);
                }
                result.map(|result| vec![result])
            }
            _ => {
                let all = within(limit, futures_util::future::join_all(tasks));
                let (results, meanwhile) = futures_util::future::join(all, commit.meanwhile())
                    .instrument(span.clone())
                    .await;
                if let Some(version) = meanwhile? {
                    committed(out, step - 1, version);
                }
                results
            }
        };
        let Some(results) = results else {
            let kind = RunErrorKind::StepTimeout {
                timeout: limit.unwrap_or_default(),
                nodes: run.graph.names(&run.active),
            };
            out.send();
            return Err(commit.fail(run, kind).await);
        };

        // Questions end the step suspended; the other tasks' outputs are kept by the commit.
        let results = if C::SUSPENDS {
            let mut asked = Vec::new();
            let mut rest = Vec::with_capacity(results.len());
            for (index, result) in results.into_iter().enumerate() {
                match result {
                    Err(error) if error.is::<Interrupted>() => {
                        let error = error.downcast::<Interrupted>().expect("an interrupt");
                        let node = &inner.nodes[run.active[index]].name;
                        asked.push(Interrupt::asked(*error, step, node));
                        rest.push(None);
                    }
                    result => rest.push(Some(result)),
                }
            }
            if !asked.is_empty() {
                let suspended = commit.suspend(run, asked).await;
                return ended(run, commit, out, suspended);
            }
            rest.into_iter().flatten().collect()
        } else {
            results
        };

        // The nodes' updates, in node order; the first failure is the step's.
        let node_events = out.wants(EventFilter::NODE_FINISHED);
        let mut updates = Vec::with_capacity(results.len());
        for (&at, result) in run.active.iter().zip(results) {
            let update = match run.graph.node_update(at, result) {
                Ok(update) => update,
                Err(kind) => {
                    out.send();
                    return Err(commit.fail(run, kind).await);
                }
            };
            if node_events {
                out.push(Event::NodeFinished {
                    step,
                    node: inner.nodes[at].key.clone(),
                    update: update.as_ref().map(|update| Box::new(update.clone())),
                });
            }
            updates.push(update);
        }
        let composed = match run.graph.compose(&run.active, updates) {
            Ok(composed) => composed,
            Err(kind) => {
                out.send();
                return Err(commit.fail(run, kind).await);
            }
        };
        let Committed { next, version } = match commit.commit(run, composed).await {
            Ok(committed) => committed,
            Err(Stop::Run(kind)) => {
                out.send();
                return Err(commit.fail(run, kind).await);
            }
            Err(Stop::Commit(error)) => return Err(error),
        };
        if let Some(version) = version {
            committed(out, step, version);
        }
        if out.wants(EventFilter::STEP_FINISHED) {
            let nodes = run
                .keys
                .take()
                .unwrap_or_else(|| run.graph.keys(&run.active));
            out.push(Event::StepFinished {
                record: StepRecord {
                    step,
                    nodes,
                    next: run.graph.keys(&next.0),
                },
                state: commit.state(),
            });
        }
        run.advance(next);
        out.handed_out().await;
    }
}

/// A run's end: what its end committed, reported before the end itself.
fn ended<S: GraphState, K: NodeKey, C: Commit<S, K>>(
    run: &Run<S, K>,
    commit: &mut C,
    out: &mut Outbox<S, K>,
    end: Result<C::Output, C::Error>,
) -> Result<C::Output, C::Error> {
    if let Some(version) = commit.take_committed() {
        committed(out, run.step, version);
    }
    out.send();
    end
}

/// Writes a [`Event::StepCommitted`], if the stream carries them.
fn committed<S: GraphState, K>(out: &mut Outbox<S, K>, step: u64, version: u64) {
    if out.wants(EventFilter::STEP_COMMITTED) {
        out.push(Event::StepCommitted { step, version });
    }
}

/// The commit of a run in memory: each step's update merges into the run's own state. A run
/// nested in a durable task keeps its nodes' effects and questions under that task's key.
pub(crate) struct Memory<S> {
    /// The state (taken out when the run fails).
    state: Option<Arc<S>>,
    nested: Option<(Arc<dyn Journal>, String)>,
}

impl<S> Memory<S> {
    fn shared(&mut self) -> &mut Arc<S> {
        self.state
            .as_mut()
            .expect("a run's state is taken only when it fails")
    }

    /// A run from `state`.
    pub(crate) fn new(state: S) -> Self {
        Memory {
            state: Some(Arc::new(state)),
            nested: None,
        }
    }

    /// A run from `state` nested in a durable task: its tasks' effects and questions are
    /// journaled in `journal` under `base`.
    pub(crate) fn nested(state: S, journal: Arc<dyn Journal>, base: String) -> Self {
        Memory {
            state: Some(Arc::new(state)),
            nested: Some((journal, base)),
        }
    }
}

impl<S: GraphState, K: NodeKey> Commit<S, K> for Memory<S> {
    type Output = Arc<S>;
    type Error = RunError<S>;
    const SUSPENDS: bool = false;

    fn state(&mut self) -> Arc<S> {
        Arc::clone(self.shared())
    }

    fn answered(&self, id: &str) -> bool {
        self.nested
            .as_ref()
            .is_some_and(|(journal, _)| journal.answer(id).is_some())
    }

    async fn before_step(&mut self, _: &Run<S, K>) -> Result<(), RunError<S>> {
        Ok(())
    }

    fn task(&mut self, run: &Run<S, K>, index: usize, _: usize) -> Setup<S::Update> {
        Setup {
            scope: self.nested.as_ref().map(|(journal, base)| {
                Arc::new(Scope::new(
                    Arc::clone(journal),
                    format!("{base}/{}.{index}", run.step),
                ))
            }),
            done: None,
        }
    }

    async fn meanwhile(&mut self) -> Result<Option<u64>, RunError<S>> {
        Ok(None)
    }

    async fn commit(
        &mut self,
        run: &Run<S, K>,
        update: Option<Composed<S::Update>>,
    ) -> Result<Committed<S>, Stop<RunError<S>>> {
        let graph = run.graph();
        // A routing failure must leave the state as it was before the step: keep it when the
        // step's edges run code that may fail (the merge then copies the state).
        let state = self.shared();
        let before = graph
            .routing_may_fail(&run.active)
            .then(|| Arc::clone(state));
        if let Some(Composed { update, from }) = update {
            // Plan on the shared state first: a failing merge must not copy a state a node
            // kept.
            let plan = state
                .plan(update)
                .map_err(|error| graph.merge_error(&run.active, from, error))?;
            Arc::make_mut(state).apply(plan);
        }
        match graph.route(state, &run.active) {
            Ok(next) => Ok(Committed {
                next,
                version: None,
            }),
            Err(kind) => {
                if let Some(before) = before {
                    *state = before;
                }
                Err(Stop::Run(kind))
            }
        }
    }

    async fn finish(&mut self, _: &Run<S, K>) -> Result<Arc<S>, RunError<S>> {
        Ok(Arc::clone(self.shared()))
    }

    /// Never called (an in-memory run's questions fail their nodes); fails the run with the
    /// first question as its node's error.
    async fn suspend(
        &mut self,
        run: &Run<S, K>,
        interrupts: Vec<Interrupt>,
    ) -> Result<Arc<S>, RunError<S>> {
        let first = interrupts.into_iter().next();
        let kind = RunErrorKind::Node {
            node: first.as_ref().map(|i| i.node.clone()).unwrap_or_default(),
            error: match first {
                Some(i) => Box::new(Interrupted {
                    id: i.id,
                    node: i.node,
                    task: format!("{}.0", i.step),
                    payload: i.payload,
                }),
                None => "the run was asked to suspend with no question".into(),
            },
        };
        Err(Commit::<S, K>::fail(self, run, kind).await)
    }

    async fn fail(&mut self, run: &Run<S, K>, kind: RunErrorKind) -> RunError<S> {
        let state = self.state.take().expect("a run fails once");
        run.error(kind, unwrap_state(state))
    }
}

/// The state out of its `Arc`, copied only if something still holds it.
/// `work`'s output, or `None` if it ran past `limit` (then dropped).
async fn within<T>(limit: Option<std::time::Duration>, work: impl Future<Output = T>) -> Option<T> {
    match limit {
        Some(limit) => tokio::time::timeout(limit, work).await.ok(),
        None => Some(work.await),
    }
}

pub(crate) fn unwrap_state<S: Clone>(state: Arc<S>) -> S {
    Arc::try_unwrap(state).unwrap_or_else(|shared| (*shared).clone())
}
