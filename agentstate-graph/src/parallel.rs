//! Parallel work inside one node: a [`FanOut`] runs a subgraph per item (or per count), and
//! [`ParallelBranches`] runs heterogeneous branches at once (OpenArmature pipeline-utilities §9
//! and §11). Both collect their results in input order (never completion order) into one
//! update of the parent, which the runner merges at the step's barrier through the reducers.
//!
//! Branches and instances read the parent state shared (`Arc`), never copied. With
//! [`ErrorPolicy::FailFast`] (the default) the first failure, in completion order, cancels the
//! others (their futures are dropped) and fails the node, so nothing is merged; with
//! [`ErrorPolicy::Collect`] every branch runs to its end, the failures are omitted from the
//! results and given to the error function, whose update is merged after the results'.
//!
//! OpenArmature and LangGraph disagree on two branches writing a `last_write_wins` field:
//! inside a [`ParallelBranches`] node this crate follows OpenArmature (the last-listed branch
//! wins, §11.4); between parallel nodes of a superstep it follows LangGraph (an error).

use crate::error::RunError;
use crate::graph::Graph;
use crate::name::NodeKey;
use crate::node::{BoxError, Context, Node, NodeFuture};
use crate::GraphState;
use agentstate::NodeOutput;
use agentstate::State;
use agentstate::{Combine, FanIn};
use futures_util::stream::{FuturesUnordered, StreamExt};
use std::fmt;
use std::sync::Arc;

/// A question from an instance or a branch: passed up as it is (the run suspends), or, when
/// the node collects errors, an [`UnsupportedSuspension`](crate::effect::UnsupportedSuspension).
fn unsupported(cx: &Context, error: BoxError, collects: bool) -> BoxError {
    match error.downcast::<crate::effect::Interrupted>() {
        Ok(interrupt) if collects => Box::new(crate::effect::UnsupportedSuspension {
            node: cx.node().to_owned(),
            interrupt: *interrupt,
        }),
        Ok(interrupt) => interrupt,
        Err(error) => error,
    }
}

/// What a fan-out or a parallel-branches node does when a branch fails.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ErrorPolicy {
    /// The first failure cancels the other branches and fails the node (`node_exception`).
    #[default]
    FailFast,
    /// Every branch runs; failures are left out of the results and reported to the error
    /// function.
    Collect,
}

/// What a fan-out does with no instances.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum OnEmpty {
    /// Fails the node with [`FanOutError::Empty`] (`fan_out_empty`).
    #[default]
    Raise,
    /// Runs nothing; the results are empty.
    Noop,
}

/// Why a fan-out or parallel-branches node failed: the source of its `node_exception`.
#[derive(Debug)]
#[non_exhaustive]
pub enum FanOutError {
    /// The fan-out had no instances and [`OnEmpty::Raise`] (`fan_out_empty`).
    Empty,
    /// An instance failed under [`ErrorPolicy::FailFast`].
    InstanceFailed {
        /// The instance's index.
        index: usize,
        /// Its error.
        error: BoxError,
    },
    /// A branch failed under [`ErrorPolicy::FailFast`] (`parallel_branches_branch_failed`).
    BranchFailed {
        /// The branch's name.
        branch: String,
        /// Its error.
        error: BoxError,
    },
}

impl FanOutError {
    /// The OpenArmature category: `fan_out_empty`, `node_exception` for a failed instance,
    /// `parallel_branches_branch_failed` for a failed branch.
    pub fn category(&self) -> &'static str {
        match self {
            FanOutError::Empty => "fan_out_empty",
            FanOutError::InstanceFailed { .. } => "node_exception",
            FanOutError::BranchFailed { .. } => "parallel_branches_branch_failed",
        }
    }
}

impl fmt::Display for FanOutError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FanOutError::Empty => f.write_str(
                "the fan-out has no instances (fan_out_empty); use OnEmpty::Noop if an empty input is expected",
            ),
            FanOutError::InstanceFailed { index, error } => {
                write!(f, "fan-out instance {index} failed: {error}")
            }
            FanOutError::BranchFailed { branch, error } => {
                write!(f, "branch `{branch}` failed: {error}")
            }
        }
    }
}

impl std::error::Error for FanOutError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            FanOutError::Empty => None,
            FanOutError::InstanceFailed { error, .. } | FanOutError::BranchFailed { error, .. } => {
                Some(error.as_ref())
            }
        }
    }
}

/// A failed instance of a fan-out under [`ErrorPolicy::Collect`].
#[derive(Debug)]
pub struct InstanceError<C> {
    /// The instance's index (its item's position).
    pub index: usize,
    /// Its run's error, with the instance's state at the failure.
    pub error: RunError<C>,
}

/// A failed branch of a [`ParallelBranches`] node under [`ErrorPolicy::Collect`].
#[derive(Debug)]
pub struct BranchError {
    /// The branch's name.
    pub branch: String,
    /// Its error.
    pub error: BoxError,
}

type Instances<P, C> = Arc<dyn Fn(&P) -> Result<Vec<C>, BoxError> + Send + Sync>;
type Collect<P, C> = Arc<dyn Fn(Vec<C>) -> <P as State>::Update + Send + Sync>;
type OnErrors<P, E> = Arc<dyn Fn(Vec<E>) -> <P as State>::Update + Send + Sync>;

/// A fan-out node: a subgraph run once per instance, concurrently up to a limit, the instances'
/// final states collected in instance order into one update of the parent.
///
/// `instances` makes each instance's initial state from the parent (one per item of a list
/// field, or `count` of them); `collect` turns the finished instances into the parent's update,
/// typically the target field's entry, merged through its reducer (`append`, `concat_flatten`,
/// `merge_all`, ...).
///
/// ```
/// use agentstate_graph::parallel::FanOut;
/// use agentstate_graph::{Context, Graph, END};
/// use agentstate::AgentState;
/// use std::sync::Arc;
///
/// #[derive(AgentState, Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
/// struct Job { x: i64, result: i64 }
/// #[derive(AgentState, Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
/// struct Batch { items: Vec<i64>, #[reducer(append)] results: Vec<i64> }
///
/// let double = Graph::builder()
///     .node("double", |s: Arc<Job>, _: Context| async move {
///         Ok::<_, std::convert::Infallible>(JobUpdate::default().result(s.x * 2))
///     })
///     .entry("double")
///     .edge("double", END)
///     .build()?;
/// let fan_out = FanOut::new(
///     double,
///     |b: &Batch| b.items.iter().map(|&x| Job { x, result: 0 }).collect(),
///     |done: Vec<Job>| BatchUpdate::default().results(done.into_iter().map(|j| j.result).collect::<Vec<_>>()),
/// )
/// .concurrency(Some(2));
/// let graph = Graph::builder().node("process", fan_out).entry("process").edge("process", END).build()?;
/// let runtime = tokio::runtime::Builder::new_current_thread().build()?;
/// let state = runtime.block_on(graph.invoke(Batch { items: vec![1, 2, 3], results: vec![] }))?;
/// assert_eq!(state.results, [2, 4, 6]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct FanOut<P: State, C, KC> {
    graph: Graph<C, KC>,
    instances: Instances<P, C>,
    collect: Collect<P, C>,
    on_errors: Option<OnErrors<P, InstanceError<C>>>,
    concurrency: Concurrency<P>,
    on_empty: OnEmpty,
    retry: Option<crate::layer::RetryPolicy<C>>,
}

type Limit<P> = Arc<dyn Fn(&P) -> Option<usize> + Send + Sync>;

enum Concurrency<P> {
    Fixed(Option<usize>),
    FromState(Limit<P>),
}

/// OpenArmature's default concurrency of a fan-out.
pub const DEFAULT_CONCURRENCY: usize = 10;

impl<P: GraphState, C: GraphState, KC: NodeKey> FanOut<P, C, KC> {
    /// A fan-out of `graph` over the instances `instances` makes, collected by `collect`.
    pub fn new(
        graph: Graph<C, KC>,
        instances: impl Fn(&P) -> Vec<C> + Send + Sync + 'static,
        collect: impl Fn(Vec<C>) -> P::Update + Send + Sync + 'static,
    ) -> Self {
        FanOut {
            graph,
            instances: Arc::new(move |p: &P| Ok(instances(p))),
            collect: Arc::new(collect),
            on_errors: None,
            concurrency: Concurrency::Fixed(Some(DEFAULT_CONCURRENCY)),
            on_empty: OnEmpty::Raise,
            retry: None,
        }
    }

    /// A fan-out whose instances are computed fallibly (an error fails the node).
    pub fn try_new<E: Into<BoxError>>(
        graph: Graph<C, KC>,
        instances: impl Fn(&P) -> Result<Vec<C>, E> + Send + Sync + 'static,
        collect: impl Fn(Vec<C>) -> P::Update + Send + Sync + 'static,
    ) -> Self {
        let mut fan_out = FanOut::new(graph, |_: &P| Vec::new(), collect);
        fan_out.instances = Arc::new(move |p: &P| instances(p).map_err(Into::into));
        fan_out
    }

    /// At most `limit` instances run at once (`None`: all of them). Default
    /// [`DEFAULT_CONCURRENCY`]. Instances start in index order.
    pub fn concurrency(mut self, limit: Option<usize>) -> Self {
        self.concurrency = Concurrency::Fixed(limit.map(|l| l.max(1)));
        self
    }

    /// The concurrency limit read from the parent state at the fan-out's entry.
    pub fn concurrency_from(
        mut self,
        limit: impl Fn(&P) -> Option<usize> + Send + Sync + 'static,
    ) -> Self {
        self.concurrency = Concurrency::FromState(Arc::new(limit));
        self
    }

    /// Re-runs a failed instance as a whole by `policy` (OpenArmature's instance middleware),
    /// from its initial state.
    pub fn retry_instances(mut self, policy: crate::layer::RetryPolicy<C>) -> Self {
        self.retry = Some(policy);
        self
    }

    /// What to do with no instances (default [`OnEmpty::Raise`]).
    pub fn on_empty(mut self, on_empty: OnEmpty) -> Self {
        self.on_empty = on_empty;
        self
    }

    /// Switches to [`ErrorPolicy::Collect`]: failed instances are left out of the results and
    /// given, in index order, to `on_errors`, whose update merges after the results'.
    pub fn collect_errors(
        mut self,
        on_errors: impl Fn(Vec<InstanceError<C>>) -> P::Update + Send + Sync + 'static,
    ) -> Self {
        self.on_errors = Some(Arc::new(on_errors));
        self
    }
}

impl<P: GraphState, C: GraphState, KC: NodeKey> Node<P> for FanOut<P, C, KC> {
    fn call(&self, state: Arc<P>, cx: Context) -> NodeFuture<P::Update> {
        let instances = (self.instances)(&state);
        let limit = match &self.concurrency {
            Concurrency::Fixed(limit) => *limit,
            Concurrency::FromState(limit) => limit(&state),
        }
        .map_or(usize::MAX, |l| l.max(1));
        drop(state);
        let graph = self.graph.clone();
        let collect = Arc::clone(&self.collect);
        let on_errors = self.on_errors.clone();
        let retry = self.retry.clone();
        let on_empty = self.on_empty;
        Box::pin(async move {
            let instances = instances?;
            let count = instances.len();
            if count == 0 && on_empty == OnEmpty::Raise {
                return Err(Box::new(FanOutError::Empty) as BoxError);
            }
            let mut pending = instances.into_iter().enumerate();
            let mut running = FuturesUnordered::new();
            let mut slots: Vec<Option<Result<C, RunError<C>>>> =
                std::iter::repeat_with(|| None).take(count).collect();
            let cx = &cx;
            let start = |(index, child): (usize, C)| {
                let graph = graph.clone();
                let retry = retry.clone();
                async move {
                    // Each instance's effects and questions are its own (`i{index}`).
                    let segment = format!("i{index}");
                    let Some(policy) = retry else {
                        return (index, graph.invoke_nested(child, cx, &segment).await);
                    };
                    let mut attempt = 0;
                    loop {
                        let error = match graph.invoke_nested(child.clone(), cx, &segment).await {
                            Ok(done) => return (index, Ok(done)),
                            // A question is not a failure to retry.
                            Err(error) if error.is_interrupt() => return (index, Err(error)),
                            Err(error) => Box::new(error) as BoxError,
                        };
                        if !policy.should_retry(attempt, &error, &child) {
                            let error = error.downcast::<RunError<C>>().expect("a run error");
                            return (index, Err(*error));
                        }
                        policy.wait(attempt).await;
                        attempt += 1;
                    }
                }
            };
            running.extend(pending.by_ref().take(limit).map(start));
            while let Some((index, result)) = running.next().await {
                let result = match result {
                    // An instance's question suspends the durable run, unless the others'
                    // results would be merged without it (collect).
                    Err(error) if error.is_interrupt() => {
                        return Err(unsupported(
                            cx,
                            error.into_node_error(),
                            on_errors.is_some(),
                        ))
                    }
                    // Returning drops `running`, which cancels the other instances.
                    Err(error) if on_errors.is_none() => {
                        return Err(Box::new(FanOutError::InstanceFailed {
                            index,
                            error: Box::new(error),
                        }) as BoxError)
                    }
                    result => result,
                };
                slots[index] = Some(result);
                if let Some(next) = pending.next() {
                    running.push(start(next));
                }
            }
            let mut done = Vec::with_capacity(count);
            let mut failed = Vec::new();
            for (index, slot) in slots.into_iter().enumerate() {
                match slot.expect("every instance ran") {
                    Ok(state) => done.push(state),
                    Err(error) => failed.push(InstanceError { index, error }),
                }
            }
            let mut update = collect(done);
            if let (Some(on_errors), false) = (on_errors, failed.is_empty()) {
                update = P::compose(update, on_errors(failed), Combine::Sequence)?;
            }
            Ok(NodeOutput::Update(update))
        })
    }
}

type When<P> = Arc<dyn Fn(&P) -> bool + Send + Sync>;
/// A branch: its name, its work, and the condition it runs on.
type Branch<P> = (Arc<str>, Arc<dyn Node<P>>, Option<When<P>>);

/// A parallel-branches node: heterogeneous branches, each any [`Node`] of the parent state (a
/// closure reading the parent, or a [`Subgraph`](crate::subgraph::Subgraph) with its
/// projections), run at once on the shared parent state; their updates are combined in branch
/// order, each field through its reducer (a `last_write_wins` field: the last-listed branch
/// wins, as OpenArmature §11.4 says).
///
/// ```
/// use agentstate_graph::parallel::ParallelBranches;
/// use agentstate_graph::{Context, Graph, END};
/// use agentstate::AgentState;
/// use std::sync::Arc;
///
/// #[derive(AgentState, Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
/// struct Search { query: String, #[reducer(append)] hits: Vec<String> }
///
/// let branches = ParallelBranches::new()
///     .branch("sql", |s: Arc<Search>, _: Context| async move {
///         Ok::<_, std::convert::Infallible>(SearchUpdate::default().hits(vec![format!("sql:{}", s.query)]))
///     })
///     .branch("vector", |s: Arc<Search>, _: Context| async move {
///         Ok::<_, std::convert::Infallible>(SearchUpdate::default().hits(vec![format!("vec:{}", s.query)]))
///     });
/// let graph = Graph::builder().node("recall", branches).entry("recall").edge("recall", END).build()?;
/// let runtime = tokio::runtime::Builder::new_current_thread().build()?;
/// let state = runtime.block_on(graph.invoke(Search { query: "q".into(), hits: vec![] }))?;
/// assert_eq!(state.hits, ["sql:q", "vec:q"]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct ParallelBranches<P: State> {
    branches: Vec<Branch<P>>,
    on_errors: Option<OnErrors<P, BranchError>>,
}

impl<P: GraphState> Default for ParallelBranches<P> {
    fn default() -> Self {
        ParallelBranches {
            branches: Vec::new(),
            on_errors: None,
        }
    }
}

impl<P: GraphState> ParallelBranches<P> {
    /// A node without branches yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a branch; branches merge in the order they are added.
    pub fn branch(mut self, name: &str, node: impl Node<P>) -> Self {
        self.branches.push((Arc::from(name), Arc::new(node), None));
        self
    }

    /// Adds a branch that runs only when `when` holds on the parent state at dispatch
    /// (OpenArmature §11.10); a skipped branch contributes nothing.
    pub fn branch_when(
        mut self,
        name: &str,
        when: impl Fn(&P) -> bool + Send + Sync + 'static,
        node: impl Node<P>,
    ) -> Self {
        self.branches
            .push((Arc::from(name), Arc::new(node), Some(Arc::new(when))));
        self
    }

    /// Switches to [`ErrorPolicy::Collect`]: failed branches contribute nothing and are given, in
    /// branch order, to `on_errors`, whose update merges after the branches'.
    pub fn collect_errors(
        mut self,
        on_errors: impl Fn(Vec<BranchError>) -> P::Update + Send + Sync + 'static,
    ) -> Self {
        self.on_errors = Some(Arc::new(on_errors));
        self
    }
}

impl<P: GraphState> Node<P> for ParallelBranches<P> {
    fn call(&self, state: Arc<P>, cx: Context) -> NodeFuture<P::Update> {
        let mut running: FuturesUnordered<_> = self
            .branches
            .iter()
            .enumerate()
            .filter(|(_, (_, _, when))| when.as_ref().is_none_or(|when| when(&state)))
            .map(|(index, (name, node, _))| {
                // Each branch's effects and questions are its own (`b:{name}`).
                let future = node.call(Arc::clone(&state), cx.nested(&format!("b:{name}")));
                async move { (index, future.await) }
            })
            .collect();
        drop(state);
        let names: Vec<Arc<str>> = self
            .branches
            .iter()
            .map(|(n, _, _)| Arc::clone(n))
            .collect();
        let on_errors = self.on_errors.clone();
        Box::pin(async move {
            let mut slots: Vec<Option<Result<NodeOutput<P::Update>, BoxError>>> =
                std::iter::repeat_with(|| None).take(names.len()).collect();
            while let Some((index, result)) = running.next().await {
                match (result, &on_errors) {
                    // A branch's question suspends the durable run, unless the others'
                    // results would be merged without it (collect).
                    (Err(error), policy) if error.is::<crate::effect::Interrupted>() => {
                        return Err(unsupported(&cx, error, policy.is_some()))
                    }
                    (Err(error), None) => {
                        return Err(Box::new(FanOutError::BranchFailed {
                            branch: names[index].to_string(),
                            error,
                        }) as BoxError)
                    }
                    (result, _) => slots[index] = Some(result),
                }
            }
            let mut update: Option<P::Update> = None;
            let mut failed = Vec::new();
            for (index, slot) in slots.into_iter().enumerate() {
                // A branch skipped by its condition has no slot.
                let Some(slot) = slot else { continue };
                match slot {
                    Ok(output) => {
                        if let Some(next) = output.into_update(P::compose)? {
                            update = Some(match update {
                                None => next,
                                Some(prev) => {
                                    P::compose(prev, next, Combine::Parallel(FanIn::Ordered))?
                                }
                            });
                        }
                    }
                    Err(error) => failed.push(BranchError {
                        branch: names[index].to_string(),
                        error,
                    }),
                }
            }
            if let (Some(on_errors), false) = (on_errors, failed.is_empty()) {
                let errors = on_errors(failed);
                update = Some(match update {
                    None => errors,
                    Some(prev) => P::compose(prev, errors, Combine::Sequence)?,
                });
            }
            Ok(update.map_or(NodeOutput::Nothing, NodeOutput::Update))
        })
    }
}
