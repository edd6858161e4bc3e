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
//! # In a durable run
//! A fan-out or parallel-branches node runs inside one step, which a crash (or a resume after
//! an interrupt) runs again. So that finished work is not repeated, each instance's final state
//! (each branch's update) is journaled as JSON as soon as it finishes, under a key of its own
//! (`{task}/i{index}/done`, `{task}/b:{name}/done`); when the node runs again, a recorded
//! instance or branch is not run: its recorded result takes its place, in its place in the
//! order. A fan-out also journals its instance count when it starts (`{task}/count`); run
//! again with another count (its input list changed meanwhile), it fails before any instance
//! runs with [`FanOutError::CountChanged`] (`checkpoint_record_invalid`, OpenArmature §10.11):
//! the recorded instances cannot be matched to the new ones. Failed instances are not recorded
//! (they run again). This is why a fan-out's instance state, and a parallel-branches node's
//! update, must convert to and from JSON.
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
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;
use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::task::Poll;

/// A question from an instance or a branch: passed up as it is (the run suspends, or, outside
/// a durable run, fails as `interrupt_outside_durable_run`), or, when the node collects errors
/// in a durable run, an [`UnsupportedSuspension`](crate::UnsupportedSuspension).
fn unsupported(cx: &Context, error: BoxError, collects: bool) -> BoxError {
    match error.downcast::<crate::effect::Interrupted>() {
        Ok(interrupt) if collects && cx.is_durable() => {
            Box::new(crate::effect::UnsupportedSuspension {
                node: cx.node().to_owned(),
                interrupt: *interrupt,
            })
        }
        Ok(interrupt) => interrupt,
        Err(error) => error,
    }
}

/// The journal records of a fan-out's or parallel-branches node's progress in a durable run
/// (see the [module docs](self)): where they go, under the node's task key.
struct Progress {
    journal: Arc<dyn crate::effect::Journal>,
    task: String,
}

/// The names of the progress records (the `name` a [`Journal`](crate::effect::Journal) keeps
/// with each record).
const COUNT_RECORD: &str = "fan_out_count";
const INSTANCE_RECORD: &str = "fan_out_instance";
const BRANCH_RECORD: &str = "parallel_branch";

impl Progress {
    /// The node's progress records, in a durable run.
    fn of(cx: &Context) -> Option<Progress> {
        cx.scope_base()
            .map(|(journal, task)| Progress { journal, task })
    }

    fn key(&self, part: &str) -> String {
        format!("{}/{part}", self.task)
    }

    /// The recorded value of `key`, if it was recorded as a `name` record.
    fn recorded(&self, key: &str, name: &str) -> Result<Option<Value>, FanOutError> {
        match self.journal.recorded(key) {
            None => Ok(None),
            Some((recorded, value)) if recorded == name => Ok(Some(value)),
            Some((recorded, _)) => Err(FanOutError::RecordInvalid {
                key: key.to_owned(),
                reason: format!(
                    "it is a `{recorded}` record where a `{name}` record was expected (the graph changed since it was recorded)"
                ),
            }),
        }
    }

    /// Journals `value` under `key`; the node goes on only once it is.
    async fn record(&self, key: String, name: &str, value: Value) -> Result<(), FanOutError> {
        self.journal
            .record(key.clone(), name.to_owned(), value)
            .await
            .map_err(|error| FanOutError::RecordFailed { key, error })
    }

    /// Journals `value` as JSON under `key`.
    async fn record_json<T: Serialize>(
        &self,
        key: String,
        name: &str,
        value: &T,
    ) -> Result<(), FanOutError> {
        match serde_json::to_value(value) {
            Ok(value) => self.record(key, name, value).await,
            Err(error) => Err(FanOutError::RecordFailed {
                key,
                error: Box::new(error),
            }),
        }
    }

    /// The instance count recorded when the fan-out first started.
    fn count(&self) -> Result<Option<usize>, FanOutError> {
        let key = self.key("count");
        let Some(value) = self.recorded(&key, COUNT_RECORD)? else {
            return Ok(None);
        };
        match value.as_u64().and_then(|n| usize::try_from(n).ok()) {
            Some(n) => Ok(Some(n)),
            None => Err(FanOutError::RecordInvalid {
                key,
                reason: format!("the count {value} is not a number of instances"),
            }),
        }
    }

    /// Journals the instance count.
    async fn record_count(&self, count: usize) -> Result<(), FanOutError> {
        self.record_json(self.key("count"), COUNT_RECORD, &count)
            .await
    }

    /// The recorded final state of instance `index`, read as `initial` (its initial state)
    /// was made.
    fn instance<C: DeserializeOwned + 'static>(
        &self,
        index: usize,
        initial: &C,
    ) -> Result<Option<C>, FanOutError> {
        let key = self.key(&format!("i{index}/done"));
        let Some(value) = self.recorded(&key, INSTANCE_RECORD)? else {
            return Ok(None);
        };
        decode_like(initial, value)
            .map(Some)
            .map_err(|error| FanOutError::RecordInvalid {
                key,
                reason: format!("the instance's recorded state does not deserialize: {error}"),
            })
    }

    /// Journals instance `index`'s final state.
    async fn record_instance<C: Serialize>(
        &self,
        index: usize,
        done: &C,
    ) -> Result<(), FanOutError> {
        self.record_json(self.key(&format!("i{index}/done")), INSTANCE_RECORD, done)
            .await
    }

    /// The recorded output of the branch `segment` (`b:{name}`).
    fn branch<U: DeserializeOwned>(
        &self,
        segment: &str,
    ) -> Result<Option<NodeOutput<U>>, FanOutError> {
        let key = self.key(&format!("{segment}/done"));
        let Some(value) = self.recorded(&key, BRANCH_RECORD)? else {
            return Ok(None);
        };
        if value.is_null() {
            return Ok(Some(NodeOutput::Nothing));
        }
        serde_json::from_value(value)
            .map(|update| Some(NodeOutput::Update(update)))
            .map_err(|error| FanOutError::RecordInvalid {
                key,
                reason: format!("the branch's recorded update does not deserialize: {error}"),
            })
    }

    /// Journals the branch `segment`'s update (`None`: it wrote nothing).
    async fn record_branch<U: Serialize>(
        &self,
        segment: &str,
        update: Option<&U>,
    ) -> Result<(), FanOutError> {
        self.record_json(self.key(&format!("{segment}/done")), BRANCH_RECORD, &update)
            .await
    }
}

/// `value` as a `T`, read as `like` was made: a [`JsonState`](crate::json::JsonState)'s JSON
/// holds only its values, so it is read under `like`'s schema.
fn decode_like<T: DeserializeOwned + 'static>(
    like: &T,
    value: Value,
) -> Result<T, serde_json::Error> {
    match (like as &dyn std::any::Any).downcast_ref::<crate::json::JsonState>() {
        Some(json) => {
            let schema = Arc::clone(json.schema_ref());
            crate::json::JsonState::reading(&schema, || serde_json::from_value(value))
        }
        None => serde_json::from_value(value),
    }
}

/// What finished next in a fan-out or parallel-branches node: an instance's (branch's) run, or
/// the journal record of one that finished.
enum Next<R, D> {
    Ran(R),
    Recorded(D),
}

/// The next of the runs and records to finish (records first); `None` once both are empty.
async fn next_of<R: Future, D: Future>(
    running: &mut FuturesUnordered<R>,
    recording: &mut FuturesUnordered<D>,
) -> Option<Next<R::Output, D::Output>> {
    std::future::poll_fn(|task| {
        if !recording.is_empty() {
            if let Poll::Ready(Some(recorded)) = recording.poll_next_unpin(task) {
                return Poll::Ready(Some(Next::Recorded(recorded)));
            }
        }
        if !running.is_empty() {
            if let Poll::Ready(Some(ran)) = running.poll_next_unpin(task) {
                return Poll::Ready(Some(Next::Ran(ran)));
            }
        }
        if running.is_empty() && recording.is_empty() {
            Poll::Ready(None)
        } else {
            Poll::Pending
        }
    })
    .await
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
    /// Run again in a durable run (resumed after a crash or an interrupt), the fan-out has
    /// another number of instances than it recorded when it first started
    /// (`checkpoint_record_invalid`, OpenArmature §10.11): its input changed meanwhile, and
    /// the recorded instances' results cannot be matched to the new instances. Nothing ran.
    CountChanged {
        /// The count recorded when the fan-out first started.
        recorded: usize,
        /// The count now.
        count: usize,
    },
    /// A record of the fan-out's progress in the run's journal does not read back (an
    /// instance's recorded state does not deserialize, or the key holds another kind of
    /// record) (`checkpoint_record_invalid`). Nothing ran.
    RecordInvalid {
        /// The record's key in the journal.
        key: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A finished instance's or branch's result could not be journaled (the run's thread was
    /// taken over, the database failed, or the result does not serialize)
    /// (`checkpoint_save_failed`): the node stops rather than go on with work that a crash
    /// would repeat.
    RecordFailed {
        /// The record's key in the journal.
        key: String,
        /// Why.
        error: BoxError,
    },
}

impl FanOutError {
    /// The OpenArmature category: `fan_out_empty`, `node_exception` for a failed instance,
    /// `parallel_branches_branch_failed` for a failed branch, `checkpoint_record_invalid` for
    /// a recorded progress that does not match or read back, `checkpoint_save_failed` for a
    /// result that could not be journaled.
    ///
    /// The node's [`RunError::category`] is `node_exception` for the first three (the node
    /// failed) and this category for the last two (the run's journal is at fault, not the
    /// node).
    ///
    /// ```
    /// use agentstate_graph::parallel::FanOutError;
    ///
    /// let drift = FanOutError::CountChanged { recorded: 5, count: 3 };
    /// assert_eq!(drift.category(), "checkpoint_record_invalid");
    /// assert_eq!(
    ///     drift.to_string(),
    ///     "the fan-out recorded 5 instances when it first started, and has 3 now that it runs again: its input changed since, and the recorded instances' results cannot be matched to the new ones (checkpoint_record_invalid); start a new run for the new input"
    /// );
    /// ```
    pub fn category(&self) -> &'static str {
        match self {
            FanOutError::Empty => "fan_out_empty",
            FanOutError::InstanceFailed { .. } => "node_exception",
            FanOutError::BranchFailed { .. } => "parallel_branches_branch_failed",
            FanOutError::CountChanged { .. } | FanOutError::RecordInvalid { .. } => {
                "checkpoint_record_invalid"
            }
            FanOutError::RecordFailed { .. } => "checkpoint_save_failed",
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
            FanOutError::CountChanged { recorded, count } => write!(
                f,
                "the fan-out recorded {recorded} instances when it first started, and has {count} now that it runs again: its input changed since, and the recorded instances' results cannot be matched to the new ones (checkpoint_record_invalid); start a new run for the new input"
            ),
            FanOutError::RecordInvalid { key, reason } => write!(
                f,
                "the journal's record `{key}` of the node's progress does not read back: {reason} (checkpoint_record_invalid)"
            ),
            FanOutError::RecordFailed { key, error } => write!(
                f,
                "the result recorded as `{key}` could not be journaled: {error} (checkpoint_save_failed)"
            ),
        }
    }
}

impl std::error::Error for FanOutError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            FanOutError::Empty
            | FanOutError::CountChanged { .. }
            | FanOutError::RecordInvalid { .. } => None,
            FanOutError::InstanceFailed { error, .. }
            | FanOutError::BranchFailed { error, .. }
            | FanOutError::RecordFailed { error, .. } => Some(error.as_ref()),
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
/// The instances' state converts to and from JSON (serde): in a durable run each finished
/// instance's final state is journaled, so that a crash does not run it again (see the
/// [module docs](self)); an instance keeps its place among those running at once until its
/// record is made, so a crash catches at most the concurrency limit's worth of instances
/// finished and not yet journaled.
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

impl<P, C, KC> FanOut<P, C, KC>
where
    P: GraphState,
    C: GraphState + Serialize + DeserializeOwned,
    KC: NodeKey,
{
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

impl<P, C, KC> Node<P> for FanOut<P, C, KC>
where
    P: GraphState,
    C: GraphState + Serialize + DeserializeOwned,
    KC: NodeKey,
{
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
        let progress = Progress::of(&cx);
        Box::pin(async move {
            let instances = instances?;
            let count = instances.len();
            // Run again in a durable run: the count must be the one recorded, and the
            // instances recorded as finished are not run again.
            let recorded = match &progress {
                Some(progress) => progress.count()?,
                None => None,
            };
            if let Some(recorded) = recorded.filter(|&r| r != count) {
                return Err(Box::new(FanOutError::CountChanged { recorded, count }) as BoxError);
            }
            if count == 0 && on_empty == OnEmpty::Raise {
                return Err(Box::new(FanOutError::Empty) as BoxError);
            }
            let mut slots: Vec<Option<Result<C, RunError<C>>>> =
                std::iter::repeat_with(|| None).take(count).collect();
            let mut to_run = Vec::with_capacity(count);
            for (index, child) in instances.into_iter().enumerate() {
                match progress.as_ref().map(|p| p.instance(index, &child)) {
                    Some(Ok(Some(done))) => slots[index] = Some(Ok(done)),
                    Some(Err(error)) => return Err(Box::new(error) as BoxError),
                    Some(Ok(None)) | None => to_run.push((index, child)),
                }
            }
            if let (Some(progress), None, true) = (&progress, recorded, count > 0) {
                progress.record_count(count).await?;
            }
            let mut pending = to_run.into_iter();
            let mut running = FuturesUnordered::new();
            // The journal records of finished instances, made while the others run.
            let mut recording = FuturesUnordered::new();
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
            let progress = progress.as_ref();
            let record = |index: usize, done: C| async move {
                let recorded = match progress {
                    Some(progress) => progress.record_instance(index, &done).await,
                    None => Ok(()),
                };
                (index, done, recorded)
            };
            // The node's error, once an instance failed: the other instances are cancelled
            // (dropped), but the records under way are finished first, so that a crash does
            // not run their instances again.
            let mut failure: Option<BoxError> = None;
            running.extend(pending.by_ref().take(limit).map(start));
            while let Some(next) = next_of(&mut running, &mut recording).await {
                let (index, result) = match next {
                    // A journaled instance frees its place for the next one (so that no more
                    // than the limit are ever finished and not yet journaled).
                    Next::Recorded((index, done, Ok(()))) => {
                        slots[index] = Some(Ok(done));
                        if let (None, Some(next)) = (&failure, pending.next()) {
                            running.push(start(next));
                        }
                        continue;
                    }
                    Next::Recorded((_, _, Err(error))) => {
                        failure.get_or_insert(Box::new(error));
                        running.clear();
                        continue;
                    }
                    Next::Ran(ran) => ran,
                };
                match result {
                    // A finished instance counts once it is journaled.
                    Ok(done) if progress.is_some() => {
                        recording.push(record(index, done));
                        continue;
                    }
                    Ok(done) => slots[index] = Some(Ok(done)),
                    // An instance's question suspends the durable run, unless the others'
                    // results would be merged without it (collect).
                    Err(error) if error.is_interrupt() => {
                        failure = Some(unsupported(
                            cx,
                            error.into_node_error(),
                            on_errors.is_some(),
                        ));
                        running.clear();
                    }
                    Err(error) if on_errors.is_none() => {
                        failure = Some(Box::new(FanOutError::InstanceFailed {
                            index,
                            error: Box::new(error),
                        }));
                        running.clear();
                    }
                    Err(error) => slots[index] = Some(Err(error)),
                }
                if failure.is_none() {
                    if let Some(next) = pending.next() {
                        running.push(start(next));
                    }
                }
            }
            if let Some(error) = failure {
                return Err(error);
            }
            let mut done = Vec::with_capacity(count);
            let mut failed = Vec::new();
            for (index, slot) in slots.into_iter().enumerate() {
                match slot.expect("every instance ran or was recorded") {
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

impl<P> Node<P> for ParallelBranches<P>
where
    P: GraphState<Update: Serialize + DeserializeOwned>,
{
    fn call(&self, state: Arc<P>, cx: Context) -> NodeFuture<P::Update> {
        let progress = Progress::of(&cx);
        let mut slots: Vec<Option<Result<NodeOutput<P::Update>, BoxError>>> =
            std::iter::repeat_with(|| None)
                .take(self.branches.len())
                .collect();
        let mut invalid = None;
        let mut running = FuturesUnordered::new();
        for (index, (name, node, when)) in self.branches.iter().enumerate() {
            if !when.as_ref().is_none_or(|when| when(&state)) {
                continue;
            }
            // Each branch's effects and questions are its own (`b:{name}`), and so is its
            // record in a durable run: a recorded branch is not run again.
            let segment = format!("b:{name}");
            if let Some(progress) = &progress {
                match progress.branch(&segment) {
                    Ok(Some(output)) => {
                        slots[index] = Some(Ok(output));
                        continue;
                    }
                    Ok(None) => {}
                    Err(error) => {
                        invalid.get_or_insert(error);
                        continue;
                    }
                }
            }
            let future = node.call(Arc::clone(&state), cx.nested(&segment));
            running.push(async move { (index, segment, future.await) });
        }
        drop(state);
        let names: Vec<Arc<str>> = self
            .branches
            .iter()
            .map(|(n, _, _)| Arc::clone(n))
            .collect();
        let on_errors = self.on_errors.clone();
        Box::pin(async move {
            if let Some(error) = invalid {
                return Err(Box::new(error) as BoxError);
            }
            // The journal records of finished branches, made while the others run.
            let mut recording = FuturesUnordered::new();
            let progress = progress.as_ref();
            let record = |index: usize, segment: String, update: Option<P::Update>| async move {
                let recorded = match progress {
                    Some(progress) => progress.record_branch(&segment, update.as_ref()).await,
                    None => Ok(()),
                };
                (index, update, recorded)
            };
            // The node's error, once a branch failed: the other branches are cancelled, but
            // the records under way are finished first.
            let mut failure: Option<BoxError> = None;
            while let Some(next) = next_of(&mut running, &mut recording).await {
                let (index, segment, result) = match next {
                    Next::Recorded((index, update, Ok(()))) => {
                        let output = Option::<P::Update>::map_or(
                            update,
                            NodeOutput::Nothing,
                            NodeOutput::Update,
                        );
                        slots[index] = Some(Ok(output));
                        continue;
                    }
                    Next::Recorded((_, _, Err(error))) => {
                        failure.get_or_insert(Box::new(error));
                        running.clear();
                        continue;
                    }
                    Next::Ran(ran) => ran,
                };
                match (result, &on_errors, progress) {
                    // A branch's question suspends the durable run, unless the others'
                    // results would be merged without it (collect).
                    (Err(error), policy, _) if error.is::<crate::effect::Interrupted>() => {
                        failure = Some(unsupported(&cx, error, policy.is_some()));
                        running.clear();
                    }
                    (Err(error), None, _) => {
                        failure = Some(Box::new(FanOutError::BranchFailed {
                            branch: names[index].to_string(),
                            error,
                        }));
                        running.clear();
                    }
                    // A finished branch counts once its update is journaled; an output that
                    // does not fold into one update fails the node (as it does below when it
                    // is not journaled).
                    (Ok(output), _, Some(_)) => match output.into_update(P::compose) {
                        Ok(update) => recording.push(record(index, segment, update)),
                        Err(error) => {
                            failure.get_or_insert(Box::new(error));
                            running.clear();
                        }
                    },
                    (result, _, _) => slots[index] = Some(result),
                }
            }
            if let Some(error) = failure {
                return Err(error);
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
