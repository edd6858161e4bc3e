//! Durable runs: a graph run on a thread of an [`agentstate_store`] store (feature `store`),
//! resumed after a crash, suspended for a person's answer, its side effects run once.
//!
//! [`Graph::durable`] binds a graph to a store; [`DurableGraph::start`] runs it on a new
//! thread, [`DurableGraph::run`] starts a new run on an existing thread with an input, and
//! [`DurableGraph::resume`] continues a thread's run from where it stands (after a crash, in a
//! new process or on another machine) or, with [`Answers`], after an interrupt.
//!
//! A durable run is the same run loop as [`Graph::invoke`]'s (the same steps, merges, routes
//! and errors); what differs is that each step is committed to the thread's journal, and the
//! run streams the same events ([`DurableGraph::stream`]) with what durability adds.
//!
//! # What a run stores
//! Every entry a run appends to the thread's journal is a [`JournalEntry`] (its input, each
//! step, each finished task of a parallel step, effects, suspensions, answers, a failure, the
//! end): the stored contract, documented there. A run is always resumed from its thread alone.
//!
//! # One run per thread
//! A run takes the thread's lease ([`Store::lease`]) before any node body runs, renews it
//! every third of [`lease_ttl`](DurableGraph::lease_ttl) (30 s by default) from a thread of
//! the process's own (`agentstate-heartbeat`: a node that blocks its thread, even on a
//! current-thread runtime, does not starve the renewal, so a long node is never run twice),
//! and releases it when the run ends or suspends. A second worker that tries to run the
//! thread meanwhile is refused with `thread_leased` before anything runs; a worker that died
//! (or was paused past its ttl) is taken over once its lease expired, and a run whose lease
//! was revoked ([`Store::revoke_lease`]) stops.
//!
//! Every append a run makes (a step, a task, an effect, a suspension, answers, a failure, the
//! end) is fenced by the lease in the same statement: it is written only if the run still
//! holds the lease (owner and expiry, judged by the database's clock on PostgreSQL) and the
//! thread is at the version the run read. A worker that was paused past its lease (a stop, a
//! long stall) and taken over commits nothing more: it stops before its next node, or at its
//! next append, with `lease_lost`, and the thread's history never forks.
//!
//! # Resume
//! Steps committed before a crash are not run again. Of the step in flight, the tasks that
//! finished (in a step of several: parallel nodes, `Send`s) are not run again either, their
//! updates journaled as they finished (LangGraph's pending writes); the others run again from
//! their start, and their recorded effects return their recorded results instead of running.
//!
//! # Warm workers
//! A [`DurableGraph`] keeps the handles of the threads it ran last (bounded:
//! [`keep_threads`](DurableGraph::keep_threads)), so that the next run on one of them (a chat
//! turn) costs its steps, not a load of the thread: it catches up with what other workers
//! appended since, if anything.
//!
//! # Interrupts
//! A node that calls [`Context::interrupt`](crate::Context::interrupt) without an answer
//! ends the run suspended ([`Outcome::Suspended`]) with every interrupt of the step (parallel
//! nodes may ask at once, each with its own id). [`DurableGraph::resume`] with [`Answers`] for
//! some or all of them runs the step again: the nodes that finished are not run again, the
//! asking nodes run from their start and their `interrupt` call returns the answer. An answer
//! for an unknown id, or for one already answered, is refused before anything runs
//! (`interrupt_unknown`, `interrupt_answered`).
//!
//! # Breakpoints
//! Static breakpoints ([`GraphBuilder::interrupt_before`](crate::GraphBuilder::interrupt_before)
//! and `interrupt_after`, or [`DurableGraph::interrupt_before`] and `interrupt_after` for one
//! worker's runs) suspend a run before a step that would run one of the nodes, or after a
//! step that ran one, with an interrupt per node, resumed like any question.
//!
//! # Checkpoints, time travel and forks
//! Each committed step is a checkpoint ([`DurableGraph::checkpoints`]: the thread's version
//! after it, the step, its nodes and the next ones). [`DurableGraph::state_at`] reads the
//! state at a checkpoint's version; [`DurableGraph::fork_at`] copies the thread up to it into
//! a new thread (the original history stays as it is), whose run then stands where it stood
//! there: [`resume`](DurableGraph::resume) runs on from it, as LangGraph's invoke from a
//! `checkpoint_id` does. [`DurableGraph::update_as`] writes an update as if a node had made
//! it (LangGraph's `update_state(as_node=...)`), the run continuing from that node's edge.
//!
//! # Durability modes
//! - [`Durability::Sync`] (the default): each step is committed before the next starts (the
//!   run's last step with the run's end, in one transaction); a crash loses at most the step
//!   in flight, which runs again.
//! - [`Durability::Async`]: a step's append runs while the next step's nodes run; a crash
//!   loses at most the last committed step too (it runs again on resume). Effects and
//!   interrupts are always journaled at once.
//! - [`Durability::Exit`]: the steps are appended when the run ends, suspends or fails; a
//!   crash loses the whole run so far (it starts again from its last commit).
//!
//! ```
//! use agentstate::{AgentState, State};
//! use agentstate_graph::durable::{Answers, Outcome};
//! use agentstate_graph::{Context, Graph, END};
//! use agentstate_store::SqliteStore;
//! use std::sync::Arc;
//!
//! #[derive(AgentState, Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
//! struct Refund { amount: u32, approved: Option<bool>, #[reducer(append)] log: Vec<String> }
//!
//! let graph = Graph::builder()
//!     .node("approve", |s: Arc<Refund>, cx: Context| async move {
//!         let answer = cx.interrupt(serde_json::json!({ "refund": s.amount }))?;
//!         Ok::<_, agentstate_graph::BoxError>(RefundUpdate::default().approved(answer.as_bool()))
//!     })
//!     .node("pay", |s: Arc<Refund>, cx: Context| async move {
//!         let receipt: String = cx.effect("pay", |_key| async { Ok::<_, std::io::Error>("r-1".to_owned()) }).await?;
//!         Ok::<_, agentstate_graph::BoxError>(RefundUpdate::default().log(vec![receipt]))
//!     })
//!     .entry("approve")
//!     .edge("approve", "pay")
//!     .edge("pay", END)
//!     .build()?;
//!
//! # tokio::runtime::Builder::new_current_thread().enable_all().build()?.block_on(async {
//! let store = SqliteStore::open_in_memory()?;
//! let durable = graph.durable(&store);
//! let Outcome::Suspended { interrupts, .. } = durable.start("refund-7", Refund { amount: 30, ..Default::default() }).await? else {
//!     panic!("the run waits for an answer")
//! };
//! let answers = Answers::new().answer(&interrupts[0].id, serde_json::json!(true));
//! let Outcome::Finished { state, .. } = durable.resume_with("refund-7", answers).await? else {
//!     panic!("the run finishes")
//! };
//! assert_eq!((state.approved, &state.log[..]), (Some(true), &["r-1".to_owned()][..]));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! # })?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub use crate::journal::{JournalEntry, SendRecord, JOURNAL_VERSION, META_KEY};

use crate::effect::{Interrupt, Journal, Scope};
use crate::error::{RunError, RunErrorKind};
use crate::event::{Event, EventFilter, Outbox};
use crate::graph::{Graph, RunConfig};
use crate::heartbeat::Heartbeat;
use crate::journal::{Position, ReadError};
use crate::name::NodeKey;
use crate::node::{BoxError, NodeFuture};
use crate::run::{drive, Commit, Committed, Run, Setup, Stop};
use crate::step::Composed;
use crate::stream::{Driven, Driver, Next};
use crate::GraphState;
use agentstate::Combine;
use agentstate::NodeOutput;
use agentstate_store::backend::Backend;
use agentstate_store::{HistoryQuery, Lease, StepMeta, Store, StoreError, StoredState, Thread};
use futures_core::Stream;
use futures_util::lock::Mutex as AsyncMutex;
use serde_json::{Map, Value};
use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context as TaskContext, Poll};
use std::time::Duration;
use tracing::Instrument;

/// A state a durable run can keep: a [`GraphState`] the store can keep.
pub trait DurableState: GraphState + StoredState {}

impl<S: GraphState + StoredState> DurableState for S {}

/// When a durable run's steps are committed; see the [module docs](self).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Durability {
    /// Each step committed before the next starts (at most the step in flight is lost).
    #[default]
    Sync,
    /// A step's append runs while the next step runs (at most one committed step more is lost).
    Async,
    /// Steps appended when the run ends, suspends or fails (the run so far is lost on a crash).
    Exit,
}

/// A graph bound to a store: runs on its threads, durably. From [`Graph::durable`]. Cheap to
/// clone; `Send + Sync`.
pub struct DurableGraph<S, K, B> {
    graph: Graph<S, K>,
    store: Store<B>,
    worker: Arc<str>,
    lease_ttl: Duration,
    durability: Durability,
    config: RunConfig,
    /// Breakpoints of this worker's runs (node indices), beyond the graph's.
    before: Vec<usize>,
    after: Vec<usize>,
    /// The handles of the threads this worker ran last, shared by its clones.
    warm: Arc<Mutex<Warm<S, B>>>,
    /// The threads this worker (any of its clones) is running now.
    running: Arc<Mutex<HashSet<String>>>,
}

impl<S, K, B> Clone for DurableGraph<S, K, B> {
    fn clone(&self) -> Self {
        DurableGraph {
            graph: self.graph.clone(),
            store: self.store.clone(),
            worker: Arc::clone(&self.worker),
            lease_ttl: self.lease_ttl,
            durability: self.durability,
            config: self.config.clone(),
            before: self.before.clone(),
            after: self.after.clone(),
            warm: Arc::clone(&self.warm),
            running: Arc::clone(&self.running),
        }
    }
}

impl<S, K: NodeKey, B> std::fmt::Debug for DurableGraph<S, K, B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DurableGraph")
            .field("worker", &self.worker)
            .field("lease_ttl", &self.lease_ttl)
            .field("durability", &self.durability)
            .finish_non_exhaustive()
    }
}

impl<S: DurableState, K: NodeKey> Graph<S, K> {
    /// This graph's runs on the threads of `store` (see [`durable`](crate::durable)).
    pub fn durable<B: Backend>(&self, store: &Store<B>) -> DurableGraph<S, K, B> {
        DurableGraph {
            graph: self.clone(),
            store: store.clone(),
            worker: Arc::from(format!("worker-{}", uuid::Uuid::new_v4())),
            lease_ttl: Duration::from_secs(30),
            durability: Durability::Sync,
            config: RunConfig::default(),
            before: Vec::new(),
            after: Vec::new(),
            warm: Arc::new(Mutex::new(Warm::new(DEFAULT_KEEP_THREADS))),
            running: Arc::default(),
        }
    }
}

/// How a durable run ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome<S> {
    /// The run reached `END`.
    Finished {
        /// The final state (shared with the worker's handle of the thread: drop it, or
        /// `Arc::unwrap_or_clone` it, before the thread's next run, or that run copies it).
        state: Arc<S>,
        /// The thread's version.
        version: u64,
    },
    /// The run waits for answers ([`DurableGraph::resume_with`]).
    Suspended {
        /// The state before the suspended step.
        state: Arc<S>,
        /// The thread's version.
        version: u64,
        /// The questions, in the step's node order.
        interrupts: Vec<Interrupt>,
    },
}

impl<S> Outcome<S> {
    /// The state, however the run ended.
    pub fn state(&self) -> &S {
        match self {
            Outcome::Finished { state, .. } | Outcome::Suspended { state, .. } => state,
        }
    }

    /// The pending interrupts (none if the run finished).
    pub fn interrupts(&self) -> &[Interrupt] {
        match self {
            Outcome::Finished { .. } => &[],
            Outcome::Suspended { interrupts, .. } => interrupts,
        }
    }
}

/// Answers to interrupts, by id, for [`DurableGraph::resume_with`].
///
/// ```
/// use agentstate_graph::durable::Answers;
/// let answers = Answers::new().answer("approve:3.0:0", true).answer("approve:3.1:0", false);
/// assert_eq!(answers.len(), 2);
/// ```
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Answers(Vec<(String, Value)>);

impl Answers {
    /// No answers.
    pub fn new() -> Self {
        Answers::default()
    }

    /// Adds the answer to interrupt `id`.
    #[must_use]
    pub fn answer(mut self, id: impl Into<String>, value: impl Into<Value>) -> Self {
        self.0.push((id.into(), value.into()));
        self
    }

    /// The number of answers.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// A committed step of a thread's runs ([`DurableGraph::checkpoints`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Checkpoint {
    /// The thread's version after it: read the state there with
    /// [`state_at`](DurableGraph::state_at), or fork there with
    /// [`fork_at`](DurableGraph::fork_at).
    pub version: u64,
    /// The step (0: a run's input).
    pub step: u64,
    /// The run it belongs to.
    pub run_id: Option<String>,
    /// The nodes that ran (none for an input).
    pub nodes: Vec<String>,
    /// The nodes that were to run next (none: the run ended there).
    pub next: Vec<String>,
    /// When it was committed, in milliseconds since the Unix epoch.
    pub time_ms: i64,
}

/// Where a thread's run stands ([`DurableGraph::status`]).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum RunStatus {
    /// No run was ever made on the thread, or the last one finished.
    Idle {
        /// The last step of the last run (0 if none).
        step: u64,
    },
    /// A run is in progress or was cut short (a crash): [`resume`](DurableGraph::resume)
    /// continues it with `next`.
    Running {
        /// The last committed step.
        step: u64,
        /// The nodes of the next step.
        next: Vec<String>,
    },
    /// The run waits for answers.
    Suspended {
        /// The suspended step.
        step: u64,
        /// The interrupts not answered yet.
        interrupts: Vec<Interrupt>,
    },
}

/// Why a durable run failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DurableError<S> {
    /// The graph failed (a node, an edge, a merge, the recursion limit); the steps before
    /// are committed, and resuming runs the failed step again.
    #[error("{0}")]
    Run(#[source] RunError<S>),
    /// The store failed, or refused: `thread_leased` (another worker runs the thread),
    /// `lease_lost` (another worker took the thread over), `state_write_conflict`,
    /// `thread_not_found`...
    #[error("{0}")]
    Store(#[from] StoreError),
    /// An answer names an interrupt the thread's run does not wait for.
    #[error("thread `{thread}` has no pending interrupt `{id}`{pending}")]
    UnknownInterrupt {
        /// The thread.
        thread: String,
        /// The id answered.
        id: String,
        /// The pending ids, as text.
        pending: String,
    },
    /// An answer names an interrupt answered before.
    #[error(
        "interrupt `{id}` of thread `{thread}` was already answered; an interrupt is answered once"
    )]
    AlreadyAnswered {
        /// The thread.
        thread: String,
        /// The id.
        id: String,
    },
    /// The thread's run is not where the call needs it: answers for a run that is not
    /// suspended, a new run while one is unfinished, a resume with nothing to resume.
    #[error("thread `{thread}`: {reason}")]
    State {
        /// The thread.
        thread: String,
        /// What is wrong.
        reason: String,
    },
    /// The thread's journal holds run metadata this graph cannot read (a node it does not
    /// have, malformed entries).
    #[error("thread `{thread}`, entry {seq}: {reason}")]
    Journal {
        /// The thread.
        thread: String,
        /// The entry's version.
        seq: u64,
        /// What is wrong.
        reason: String,
    },
}

impl<S> DurableError<S> {
    /// The category: the run's or the store's own, or `interrupt_unknown`,
    /// `interrupt_answered`, `run_state_invalid`, `run_journal_invalid`.
    pub fn category(&self) -> &'static str {
        match self {
            DurableError::Run(error) => error.category(),
            DurableError::Store(error) => error.category(),
            DurableError::UnknownInterrupt { .. } => "interrupt_unknown",
            DurableError::AlreadyAnswered { .. } => "interrupt_answered",
            DurableError::State { .. } => "run_state_invalid",
            DurableError::Journal { .. } => "run_journal_invalid",
        }
    }
}

/// How many threads' handles a worker keeps warm by default
/// ([`DurableGraph::keep_threads`]).
pub const DEFAULT_KEEP_THREADS: usize = 64;

/// How a durable run begins: a new run with an input (and the run's id, if the caller chose
/// it), or the thread's run resumed.
enum Begin<U> {
    Input(NodeOutput<U>, Option<String>),
    /// A new run even if the thread's last did not finish (that one is abandoned).
    Supersede(NodeOutput<U>, Option<String>),
    /// A new run (superseding, as `Supersede`) whose first step runs these nodes (indices;
    /// `usize::MAX` for a name the graph does not have), not the entry.
    Goto(NodeOutput<U>, Option<String>, Vec<usize>),
    /// The answers, and an update committed with them (nothing, but for
    /// [`DurableGraph::stream_resume_updating`]).
    Resume(Answers, NodeOutput<U>),
}

/// A run with its lease taken: begun warm (its input committed with the lease, the thread's
/// handle and the run's start at hand), or to begin from the thread as it is.
enum Begun<S: agentstate::State, B> {
    Warm(Box<(Thread<S, B>, Position)>),
    Cold(Begin<<S as agentstate::State>::Update>),
}

/// The key of a thread's metadata that names the run [`DurableGraph::start`] created it for,
/// so that a worker that resumes the thread before its run's input was committed starts that
/// run, with its id.
pub const START_RUN_KEY: &str = "agentstate_graph_run";

impl<S, K, B> DurableGraph<S, K, B>
where
    S: DurableState,
    K: NodeKey,
    B: Backend,
{
    /// Names this worker (the lease's owner; `worker-{uuid}` by default). Clones of a
    /// `DurableGraph` are one worker: they never run one thread at once (the second is refused
    /// with `thread_leased`); a run of theirs cut short in this process (its future dropped) is
    /// resumed by any of them at once, without waiting for the lease to expire. Give each
    /// process its own name.
    #[must_use]
    pub fn worker(mut self, id: impl Into<String>) -> Self {
        self.worker = Arc::from(id.into());
        self
    }

    /// How long a worker holds a thread without renewing (30 s by default); a worker that died
    /// is taken over after at most this long. Renewed every third of it while a run goes on.
    #[must_use]
    pub fn lease_ttl(mut self, ttl: Duration) -> Self {
        self.lease_ttl = ttl;
        self
    }

    /// When steps are committed ([`Durability::Sync`] by default).
    #[must_use]
    pub fn durability(mut self, durability: Durability) -> Self {
        self.durability = durability;
        self
    }

    /// The recursion limit of each run (the graph's by default).
    #[must_use]
    pub fn recursion_limit(mut self, limit: usize) -> Self {
        self.config.recursion_limit = Some(limit);
        self
    }

    /// Keeps the handles of at most `n` threads this worker ran last
    /// ([`DEFAULT_KEEP_THREADS`] by default; 0 keeps none), so that the next run on one of
    /// them does not load the thread again. Applies to this worker's clones too.
    #[must_use]
    pub fn keep_threads(self, n: usize) -> Self {
        lock(&self.warm).resize(n);
        self
    }

    /// This worker's runs suspend before each step that would run one of `nodes`, beyond the
    /// graph's own breakpoints ([`GraphBuilder::interrupt_before`](crate::GraphBuilder::interrupt_before)).
    /// A node the graph does not have is refused when a run starts (`run_state_invalid`).
    #[must_use]
    pub fn interrupt_before(mut self, nodes: impl IntoIterator<Item = K>) -> Self {
        let indices = self.indices(nodes);
        self.before.extend(indices);
        self
    }

    /// This worker's runs suspend after each step that ran one of `nodes`
    /// ([`GraphBuilder::interrupt_after`](crate::GraphBuilder::interrupt_after)).
    #[must_use]
    pub fn interrupt_after(mut self, nodes: impl IntoIterator<Item = K>) -> Self {
        let indices = self.indices(nodes);
        self.after.extend(indices);
        self
    }

    fn indices(&self, nodes: impl IntoIterator<Item = K>) -> Vec<usize> {
        // An unknown node is kept as an index past the graph's nodes, refused when a run
        // starts (a builder method cannot fail).
        nodes
            .into_iter()
            .map(|k| self.graph.index_of(k.name()).unwrap_or(usize::MAX))
            .collect()
    }

    /// This worker's name: the owner of the leases its runs take ([`worker`](DurableGraph::worker)).
    pub fn worker_id(&self) -> &str {
        &self.worker
    }

    /// The graph.
    pub fn graph(&self) -> &Graph<S, K> {
        &self.graph
    }

    /// The store.
    pub fn store(&self) -> &Store<B> {
        &self.store
    }

    /// Creates thread `thread` with `state` and runs the graph on it from its entry. The run's
    /// id is recorded with the thread when it is created, so the start is one run whoever
    /// carries it out: a worker that resumes the thread before this call took its lease starts
    /// that same run. To start a run a caller may retry, give its id:
    /// [`start_as`](DurableGraph::start_as).
    pub async fn start(&self, thread: &str, state: S) -> Result<Outcome<S>, DurableError<S>> {
        self.start_as(thread, &uuid::Uuid::new_v4().to_string(), state)
            .await
    }

    /// [`start`](DurableGraph::start) with the run's id `run_id`, chosen by the caller:
    /// idempotent. If the thread exists and its current run is `run_id`, nothing new starts:
    /// the run is resumed where it stands (after a crash), or its outcome is returned (it
    /// finished, or waits for answers). So a caller that lost the answer (a timeout, a
    /// `thread_leased` while another worker ran it) calls this again safely.
    ///
    /// ```
    /// use agentstate::AgentState;
    /// use agentstate_graph::durable::Outcome;
    /// use agentstate_graph::{Context, Graph, END};
    /// use agentstate_store::SqliteStore;
    /// use std::sync::Arc;
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    ///
    /// #[derive(AgentState, Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
    /// struct Job { done: bool }
    ///
    /// static RUNS: AtomicUsize = AtomicUsize::new(0);
    /// let graph = Graph::builder()
    ///     .node("work", |_: Arc<Job>, _: Context| async move {
    ///         RUNS.fetch_add(1, Ordering::SeqCst);
    ///         Ok::<_, std::convert::Infallible>(JobUpdate::default().done(true))
    ///     })
    ///     .entry("work")
    ///     .edge("work", END)
    ///     .build()?;
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build()?.block_on(async {
    /// let store = SqliteStore::open_in_memory()?;
    /// let durable = graph.durable(&store);
    /// let first = durable.start_as("job-1", "run-1", Job::default()).await?;
    /// let again = durable.start_as("job-1", "run-1", Job::default()).await?; // a retry
    /// assert_eq!(first, again);
    /// assert_eq!(RUNS.load(Ordering::SeqCst), 1);
    /// assert_eq!(durable.run_id("job-1").await?.as_deref(), Some("run-1"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # })?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub async fn start_as(
        &self,
        thread: &str,
        run_id: &str,
        state: S,
    ) -> Result<Outcome<S>, DurableError<S>> {
        let mut metadata = Map::new();
        metadata.insert(START_RUN_KEY.to_owned(), Value::from(run_id));
        match self.store.create_with(thread, state, metadata).await {
            Ok(_) => {}
            Err(StoreError::ThreadExists { .. })
                if self.run_id(thread).await?.as_deref() == Some(run_id)
                    || self.start_run(thread).await?.as_deref() == Some(run_id) => {}
            Err(error) => return Err(error.into()),
        }
        self.run_as(thread, run_id, ()).await
    }

    /// The id of thread `thread`'s current run (its last, finished or not), if a run started on
    /// it.
    pub async fn run_id(&self, thread: &str) -> Result<Option<String>, DurableError<S>> {
        Ok(self.position(thread).await?.run_id)
    }

    /// The run [`start`](DurableGraph::start) created thread `thread` for.
    async fn start_run(&self, thread: &str) -> Result<Option<String>, DurableError<S>> {
        let info = self.store.info(thread).await?;
        Ok(info
            .metadata
            .get(START_RUN_KEY)
            .and_then(Value::as_str)
            .map(str::to_owned))
    }

    /// Starts a new run on thread `thread` from the graph's entry, `input` merged first (a
    /// user's message); the thread's last run must have finished. The input is committed as
    /// the run's first entry, before any node runs (so that the run, and its effects'
    /// idempotency keys, are the same when it is resumed after a crash).
    pub async fn run(
        &self,
        thread: &str,
        input: impl Into<NodeOutput<S::Update>>,
    ) -> Result<Outcome<S>, DurableError<S>> {
        let input = input.into();
        let run: Driver<'_, _> = Box::pin(async move {
            self.execute(thread, Begin::Input(input, None), &mut Outbox::off())
                .await
        });
        run.await
    }

    /// [`run`](DurableGraph::run) with the run's id `run_id`, chosen by the caller: idempotent.
    /// If the thread's current run is `run_id`, nothing new starts: it is resumed where it
    /// stands, or its outcome is returned (see [`start_as`](DurableGraph::start_as)).
    pub async fn run_as(
        &self,
        thread: &str,
        run_id: &str,
        input: impl Into<NodeOutput<S::Update>>,
    ) -> Result<Outcome<S>, DurableError<S>> {
        let begin = Begin::Input(input.into(), Some(run_id.to_owned()));
        let run: Driver<'_, _> =
            Box::pin(async move { self.execute(thread, begin, &mut Outbox::off()).await });
        run.await
    }

    /// Waits until thread `thread`'s run `run_id` is no longer in progress (no worker holds
    /// the thread's lease), checking every `every`, and returns where it stands: idle (it
    /// finished), suspended, or running (it was cut short: a crash; resume it). Fails with
    /// `run_state_invalid` if the thread's current run is another one (it never started, or a
    /// newer run followed).
    pub async fn wait(
        &self,
        thread: &str,
        run_id: &str,
        every: Duration,
    ) -> Result<RunStatus, DurableError<S>> {
        loop {
            if self.store.lease_info(thread).await?.is_none() {
                break;
            }
            tokio::time::sleep(every).await;
        }
        let current = self.run_id(thread).await?;
        if current.as_deref() != Some(run_id) {
            return Err(DurableError::State {
                thread: thread.to_owned(),
                reason: format!(
                    "its current run is {}, not `{run_id}`",
                    current.map_or("none".to_owned(), |c| format!("`{c}`"))
                ),
            });
        }
        self.status(thread).await
    }

    /// Continues thread `thread`'s run from where it stands: after a crash, the step in flight
    /// runs again (committed steps, and the step's finished tasks, are not). A suspended run
    /// needs answers ([`resume_with`](DurableGraph::resume_with)): without them its pending
    /// questions are returned again; a finished one has nothing to resume (its state is
    /// returned as finished).
    pub async fn resume(&self, thread: &str) -> Result<Outcome<S>, DurableError<S>> {
        self.resume_with(thread, Answers::new()).await
    }

    /// Resumes a suspended run with `answers` (some or all of its interrupts, by id): the
    /// answers are committed, then the step runs again; a node whose question is still
    /// unanswered suspends the run again. An answer already given is refused
    /// (`interrupt_answered`), unless every question of the step was answered and the step
    /// then failed (on an answer that does not fit the state, say: give a better one).
    pub async fn resume_with(
        &self,
        thread: &str,
        answers: Answers,
    ) -> Result<Outcome<S>, DurableError<S>> {
        let run: Driver<'_, _> = Box::pin(async move {
            self.execute(
                thread,
                Begin::Resume(answers, NodeOutput::Nothing),
                &mut Outbox::off(),
            )
            .await
        });
        run.await
    }

    /// [`run`](DurableGraph::run) as a stream of [`Event`]s: the events of a run in memory
    /// ([`Graph::stream`]), with [`Event::StepCommitted`] after each commit, and as its last
    /// item [`Event::RunFinished`], [`Event::RunSuspended`] or the run's error. Dropping the
    /// stream cancels the run as a crash would (the lease expires; a resume continues it).
    ///
    /// ```
    /// use agentstate::{AgentState, State};
    /// use agentstate_graph::{Context, Event, Graph, END};
    /// use agentstate_store::SqliteStore;
    /// use futures_util::StreamExt;
    /// use std::sync::Arc;
    ///
    /// #[derive(AgentState, Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
    /// struct Chat { #[reducer(append)] said: Vec<String> }
    ///
    /// let graph = Graph::builder()
    ///     .node("model", |_: Arc<Chat>, cx: Context| async move {
    ///         cx.text_delta("m1", "Hel");
    ///         cx.text_delta("m1", "lo");
    ///         Ok::<_, std::convert::Infallible>(ChatUpdate::default().said(vec!["Hello".to_owned()]))
    ///     })
    ///     .entry("model")
    ///     .edge("model", END)
    ///     .build()?;
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build()?.block_on(async {
    /// let store = SqliteStore::open_in_memory()?;
    /// store.create("chat-1", Chat::default()).await?;
    /// let durable = graph.durable(&store);
    /// let mut kinds = Vec::new();
    /// let mut run = durable.stream("chat-1", ChatUpdate::default().said(vec!["Hi".to_owned()]));
    /// while let Some(event) = run.next().await {
    ///     kinds.push(event?.kind());
    /// }
    /// // The state it starts from (the input merged) first; the run's one step is committed
    /// // with its end: `step_committed` comes last.
    /// assert_eq!(kinds, ["run_started", "step_finished", "step_started", "node_started",
    ///                    "emitted", "emitted", "node_finished", "step_finished",
    ///                    "step_committed", "run_finished"]);
    /// assert_eq!(store.load::<Chat>("chat-1").await?.state.said, ["Hi", "Hello"]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # })?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn stream(
        &self,
        thread: &str,
        input: impl Into<NodeOutput<S::Update>>,
    ) -> DurableStream<S, K> {
        self.streamed(thread, Begin::Input(input.into(), None))
    }

    /// [`stream`](DurableGraph::stream) with the run's id `run_id`, chosen by the caller (a
    /// server's run record names it): the stream's [`Event::RunStarted`] carries it, and so do
    /// the run's journal entries. Idempotent as [`run_as`](DurableGraph::run_as) is.
    ///
    /// ```
    /// use agentstate::AgentState;
    /// use agentstate_graph::{Context, Event, Graph, END};
    /// use agentstate_store::SqliteStore;
    /// use futures_util::StreamExt;
    /// use std::sync::Arc;
    ///
    /// #[derive(AgentState, Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
    /// struct Count { n: u32 }
    ///
    /// let graph = Graph::builder()
    ///     .node("add", |s: Arc<Count>, _: Context| async move {
    ///         Ok::<_, std::convert::Infallible>(CountUpdate::default().n(s.n + 1))
    ///     })
    ///     .entry("add")
    ///     .edge("add", END)
    ///     .build()?;
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build()?.block_on(async {
    /// let store = SqliteStore::open_in_memory()?;
    /// store.create("c-1", Count::default()).await?;
    /// let durable = graph.durable(&store);
    /// let mut run = durable.stream_as("c-1", "run-42", CountUpdate::default());
    /// let Some(Ok(Event::RunStarted { run_id })) = run.next().await else { panic!("a start") };
    /// assert_eq!(run_id, "run-42");
    /// while run.next().await.is_some() {}
    /// assert_eq!(durable.run_id("c-1").await?.as_deref(), Some("run-42"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # })?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn stream_as(
        &self,
        thread: &str,
        run_id: &str,
        input: impl Into<NodeOutput<S::Update>>,
    ) -> DurableStream<S, K> {
        self.streamed(thread, Begin::Input(input.into(), Some(run_id.to_owned())))
    }

    /// [`stream_as`](DurableGraph::stream_as), but the new run starts even if the thread's last
    /// run did not finish (it was cut short, failed, or waits for answers), as a new input does
    /// in LangGraph: that run is abandoned where it stood. Its committed steps stay in the
    /// state; its step in flight, its questions and their answers are dropped. Idempotent as `stream_as` is. Another worker's
    /// run in progress still refuses it (`thread_leased`): stop that run first.
    ///
    /// ```
    /// use agentstate::AgentState;
    /// use agentstate_graph::durable::{Answers, Outcome, RunStatus};
    /// use agentstate_graph::{BoxError, Context, Graph, END};
    /// use agentstate_store::SqliteStore;
    /// use futures_util::StreamExt;
    /// use std::sync::Arc;
    ///
    /// #[derive(AgentState, Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
    /// struct Chat { #[reducer(append)] said: Vec<String> }
    ///
    /// let graph = Graph::builder()
    ///     .node("ask", |_: Arc<Chat>, cx: Context| async move {
    ///         let answer = cx.interrupt(serde_json::json!("sure?"))?;
    ///         Ok::<_, BoxError>(ChatUpdate::default().said(vec![answer.to_string()]))
    ///     })
    ///     .entry("ask")
    ///     .edge("ask", END)
    ///     .build()?;
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build()?.block_on(async {
    /// let store = SqliteStore::open_in_memory()?;
    /// let durable = graph.durable(&store);
    /// let Outcome::Suspended { .. } = durable.start("c-1", Chat::default()).await? else {
    ///     panic!("the run asks")
    /// };
    /// // A new message instead of an answer: a new run, which asks again.
    /// let mut run = durable.stream_superseding("c-1", "run-2", ChatUpdate::default().said(vec!["hi".into()]));
    /// while run.next().await.is_some() {}
    /// assert_eq!(durable.run_id("c-1").await?.as_deref(), Some("run-2"));
    /// let RunStatus::Suspended { interrupts, .. } = durable.status("c-1").await? else { panic!("asks") };
    /// let done = durable.resume_with("c-1", Answers::new().answer(&interrupts[0].id, true)).await?;
    /// assert_eq!(done.state().said, ["hi", "true"]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # })?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn stream_superseding(
        &self,
        thread: &str,
        run_id: &str,
        input: impl Into<NodeOutput<S::Update>>,
    ) -> DurableStream<S, K> {
        self.streamed(
            thread,
            Begin::Supersede(input.into(), Some(run_id.to_owned())),
        )
    }

    /// [`stream_superseding`](DurableGraph::stream_superseding), but the run's first step runs
    /// the nodes `goto` instead of the graph's entry (LangGraph's `Command(goto=...)` as a
    /// run's input), `input` merged first. With no nodes the input is merged and the run ends
    /// there, having run none (LangGraph's `Command(update=...)` on a thread whose run
    /// finished). The input is committed with the nodes it goes to, so a run cut short
    /// resumes there. A node the graph does not have is refused when the run starts
    /// (`run_state_invalid`).
    ///
    /// ```
    /// use agentstate::AgentState;
    /// use agentstate_graph::{Context, Graph, END};
    /// use agentstate_store::SqliteStore;
    /// use futures_util::StreamExt;
    /// use std::sync::Arc;
    ///
    /// #[derive(AgentState, Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
    /// struct Log { #[reducer(append)] ran: Vec<String> }
    ///
    /// let step = |name: &'static str| move |_: Arc<Log>, _: Context| async move {
    ///     Ok::<_, std::convert::Infallible>(LogUpdate::default().ran(vec![name.to_owned()]))
    /// };
    /// let graph = Graph::builder()
    ///     .node("first", step("first"))
    ///     .node("second", step("second"))
    ///     .entry("first")
    ///     .edge("first", "second")
    ///     .edge("second", END)
    ///     .build()?;
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build()?.block_on(async {
    /// let store = SqliteStore::open_in_memory()?;
    /// store.create("t-1", Log::default()).await?;
    /// let durable = graph.durable(&store);
    /// let input = LogUpdate::default().ran(vec!["input".to_owned()]);
    /// let mut run = durable.stream_goto("t-1", "run-1", input, ["second"]);
    /// while run.next().await.is_some() {}
    /// assert_eq!(store.load::<Log>("t-1").await?.state.ran, ["input", "second"]);
    ///
    /// // No nodes: the update alone.
    /// let mut run = durable.stream_goto("t-1", "run-2", LogUpdate::default().ran(vec!["note".to_owned()]), []);
    /// while run.next().await.is_some() {}
    /// assert_eq!(store.load::<Log>("t-1").await?.state.ran, ["input", "second", "note"]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # })?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn stream_goto(
        &self,
        thread: &str,
        run_id: &str,
        input: impl Into<NodeOutput<S::Update>>,
        goto: impl IntoIterator<Item = K>,
    ) -> DurableStream<S, K> {
        let goto = self.indices(goto);
        self.streamed(
            thread,
            Begin::Goto(input.into(), Some(run_id.to_owned()), goto),
        )
    }

    /// [`resume_with`](DurableGraph::resume_with) as a stream of [`Event`]s, as
    /// [`stream`](DurableGraph::stream) gives them (`Answers::new()` to resume after a
    /// crash).
    pub fn stream_resume(&self, thread: &str, answers: Answers) -> DurableStream<S, K> {
        self.streamed(thread, Begin::Resume(answers, NodeOutput::Nothing))
    }

    /// [`stream_resume`](DurableGraph::stream_resume) with `update` merged into the state with
    /// the answers, in the same commit, before the suspended step runs again (LangGraph's
    /// `Command(resume=..., update=...)`). Refused, writing nothing, without answers
    /// (`run_state_invalid`) and as the answers alone are.
    ///
    /// ```
    /// use agentstate::AgentState;
    /// use agentstate_graph::durable::{Answers, Outcome, RunStatus};
    /// use agentstate_graph::{BoxError, Context, Graph, END};
    /// use agentstate_store::SqliteStore;
    /// use futures_util::StreamExt;
    /// use std::sync::Arc;
    ///
    /// #[derive(AgentState, Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
    /// struct Draft { text: String, sent: Option<String> }
    ///
    /// let graph = Graph::builder()
    ///     .node("send", |s: Arc<Draft>, cx: Context| async move {
    ///         cx.interrupt(serde_json::json!("send it?"))?;
    ///         Ok::<_, BoxError>(DraftUpdate::default().sent(Some(s.text.clone())))
    ///     })
    ///     .entry("send")
    ///     .edge("send", END)
    ///     .build()?;
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build()?.block_on(async {
    /// let store = SqliteStore::open_in_memory()?;
    /// let durable = graph.durable(&store);
    /// let Outcome::Suspended { interrupts, .. } = durable.start("d-1", Draft { text: "helo".into(), sent: None }).await? else {
    ///     panic!("it asks")
    /// };
    /// // Approved, with the text corrected: the step runs again on the corrected state.
    /// let answers = Answers::new().answer(&interrupts[0].id, true);
    /// let fixed = DraftUpdate::default().text("hello".to_owned());
    /// let mut run = durable.stream_resume_updating("d-1", answers, fixed);
    /// while run.next().await.is_some() {}
    /// assert_eq!(store.load::<Draft>("d-1").await?.state.sent.as_deref(), Some("hello"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # })?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn stream_resume_updating(
        &self,
        thread: &str,
        answers: Answers,
        update: impl Into<NodeOutput<S::Update>>,
    ) -> DurableStream<S, K> {
        self.streamed(thread, Begin::Resume(answers, update.into()))
    }

    fn streamed(&self, thread: &str, begin: Begin<S::Update>) -> DurableStream<S, K> {
        let this = self.clone();
        let thread = thread.to_owned();
        DurableStream {
            driven: Driven::new(move |mut out| {
                Box::pin(async move { this.execute(&thread, begin, &mut out).await })
            }),
        }
    }

    /// Every run: takes the lease, opens the thread (warm, or loaded), runs, releases.
    async fn execute(
        &self,
        thread: &str,
        begin: Begin<S::Update>,
        out: &mut Outbox<S, K>,
    ) -> Result<Outcome<S>, DurableError<S>> {
        if self
            .before
            .iter()
            .chain(&self.after)
            .any(|&at| at == usize::MAX)
        {
            return Err(DurableError::State {
                thread: thread.to_owned(),
                reason: "a breakpoint of this worker names a node the graph does not have"
                    .to_owned(),
            });
        }
        // One run of a thread at a time in this worker too (the lease is the worker's, so its
        // clones would otherwise share it); dropped with the run, cut short or not.
        let _running = Running::claim(&self.running, thread, &self.worker)?;
        let (lease, begun) = match self.begin_warm(thread, begin).await? {
            Ok(begun) => begun,
            Err(begin) => {
                let lease = self
                    .store
                    .lease(thread, &self.worker, self.lease_ttl)
                    .await?;
                (lease, Begun::Cold(begin))
            }
        };
        let heartbeat = Heartbeat::start(&lease);
        // The run's last commit releases the lease with it, when it can (then `None`).
        let mut lease = Some(lease);
        let result = self
            .leased(thread, begun, &mut lease, &heartbeat, out)
            .await;
        heartbeat.stop();
        let released = match lease {
            Some(lease) => lease.release().await,
            None => Ok(()),
        };
        let outcome = result?;
        released?;
        Ok(outcome)
    }

    /// A new run on a thread this worker ran last, whose run it knows to be over: its input
    /// is committed and the lease taken in one write. `Ok(Err(begin))`: not such a run, or the
    /// thread moved since (another worker wrote): begin it the usual way.
    #[allow(clippy::type_complexity)]
    async fn begin_warm(
        &self,
        thread: &str,
        begin: Begin<S::Update>,
    ) -> Result<Result<(Lease<B>, Begun<S, B>), Begin<S::Update>>, DurableError<S>> {
        let Begin::Input(input, id) = begin else {
            return Ok(Err(begin));
        };
        let warm = lock(&self.warm).take(thread);
        let (mut handle, position) = match warm {
            Some((handle, Some(position)))
                if position.started
                    && position.ended()
                    && position.interrupts.is_none()
                    && (id.is_none() || position.run_id != id) =>
            {
                (handle, position)
            }
            Some((handle, position)) => {
                lock(&self.warm).put(thread, handle, position);
                return Ok(Err(Begin::Input(input, id)));
            }
            None => return Ok(Err(Begin::Input(input, id))),
        };
        let run_id = id
            .clone()
            .unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
        let meta = self.input_meta(&run_id);
        match handle
            .merge_leasing(input.clone(), meta, &self.worker, self.lease_ttl)
            .await
        {
            Ok(lease) => {
                let position = Position {
                    started: true,
                    run_id: Some(run_id),
                    ..Position::default()
                };
                Ok(Ok((lease, Begun::Warm(Box::new((handle, position))))))
            }
            // Another worker wrote since: the usual way catches up with it.
            Err(
                StoreError::Conflict { .. }
                | StoreError::Recreated { .. }
                | StoreError::Migrated { .. },
            ) => {
                self.keep(thread, handle, None);
                Ok(Err(Begin::Input(input, id)))
            }
            Err(error) => {
                self.keep(thread, handle, Some(position));
                Err(error.into())
            }
        }
    }

    async fn leased(
        &self,
        thread: &str,
        begun: Begun<S, B>,
        lease_slot: &mut Option<Lease<B>>,
        heartbeat: &Heartbeat,
        out: &mut Outbox<S, K>,
    ) -> Result<Outcome<S>, DurableError<S>> {
        let lease = lease_slot.as_ref().expect("the run holds its lease");
        let (mut handle, mut position, begin) = match begun {
            Begun::Warm(warm) => (warm.0, warm.1, None),
            Begun::Cold(begin) => {
                let (handle, position) = self.open(thread, lease).await?;
                let position = match position {
                    Some(position) => position,
                    None => self.position(thread).await?,
                };
                (handle, position, Some(begin))
            }
        };
        // Begun warm: the input is committed.
        let Some(begin) = begin else {
            return self
                .drive_leased(thread, handle, position, true, lease_slot, heartbeat, out)
                .await;
        };
        let mut started = false;
        // A run the caller names that is already the thread's: resumed, not started again.
        let begin = match begin {
            Begin::Input(_, Some(id))
            | Begin::Supersede(_, Some(id))
            | Begin::Goto(_, Some(id), _)
                if position.run_id.as_deref() == Some(id.as_str()) =>
            {
                Begin::Resume(Answers::new(), NodeOutput::Nothing)
            }
            begin => begin,
        };
        match begin {
            Begin::Resume(answers, _) if !position.started && answers.is_empty() => {
                // No run was started on the thread (a `start` cut short between creating the
                // thread and its run's input): start it now, as the run it was created for.
                let id = self.start_run(thread).await?;
                self.input(&mut handle, &mut position, NodeOutput::Nothing, id)
                    .await?;
                started = true;
            }
            // The new input is the newest run's start: what the abandoned run left after its
            // last commit (a step in flight, questions, answers) is behind it, never read again.
            Begin::Supersede(input, id) => {
                self.input(&mut handle, &mut position, input, id).await?;
                started = true;
            }
            Begin::Goto(input, id, goto) => {
                if goto.contains(&usize::MAX) {
                    return Err(DurableError::State {
                        thread: thread.to_owned(),
                        reason: "the run goes to a node the graph does not have".to_owned(),
                    });
                }
                let next = self.graph.names(&goto);
                let run_id = id.unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
                let meta = self.input_meta_to(&run_id, next.clone());
                handle.merge(input, meta).await?;
                position = Position {
                    started: true,
                    seq: handle.version(),
                    run_id: Some(run_id),
                    next,
                    ..Position::default()
                };
                // Not `started`: the run takes its first step from `next`, not the entry (or
                // with no nodes, ends below).
            }
            Begin::Input(input, id) => {
                if !position.ended() || position.interrupts.is_some() {
                    return Err(DurableError::State {
                        thread: thread.to_owned(),
                        reason: format!(
                            "its run is not finished (it stands after step {} with {} next); resume it, or fork the thread",
                            position.step,
                            position.next.join(", ")
                        ),
                    });
                }
                self.input(&mut handle, &mut position, input, id).await?;
                started = true;
            }
            Begin::Resume(answers, update) => {
                if answers.is_empty() && !matches!(update, NodeOutput::Nothing) {
                    return Err(DurableError::State {
                        thread: thread.to_owned(),
                        reason:
                            "an update to commit with the answers of a resume came without answers"
                                .to_owned(),
                    });
                }
                if !answers.is_empty() {
                    let given = self.check_answers(thread, &position, answers)?;
                    let entry = JournalEntry::Answers {
                        step: position.step + 1,
                        answers: given.clone(),
                    };
                    let meta =
                        entry_meta(position.run_id.as_deref().unwrap_or_default(), None, &entry);
                    handle.merge(update, meta).await?;
                    position.answers.extend(given);
                } else {
                    let open = position.open();
                    if !open.is_empty() {
                        let outcome = Outcome::Suspended {
                            version: handle.version(),
                            state: handle.shared_state(),
                            interrupts: open,
                        };
                        self.keep(thread, handle, Some(position));
                        return Ok(outcome);
                    }
                }
            }
        }
        // A run resumed (or gone to no node) that has nothing left to run.
        if !started && position.ended() {
            let outcome = Outcome::Finished {
                version: handle.version(),
                state: handle.shared_state(),
            };
            self.keep(thread, handle, Some(position));
            return Ok(outcome);
        }
        self.drive_leased(
            thread, handle, position, started, lease_slot, heartbeat, out,
        )
        .await
    }

    /// Runs the thread's run from `position` under its lease (`started`: from its input).
    #[allow(clippy::too_many_arguments)]
    async fn drive_leased(
        &self,
        thread: &str,
        handle: Thread<S, B>,
        mut position: Position,
        started: bool,
        lease_slot: &mut Option<Lease<B>>,
        heartbeat: &Heartbeat,
        out: &mut Outbox<S, K>,
    ) -> Result<Outcome<S>, DurableError<S>> {
        let mut run = Run::new(
            &self.graph,
            RunConfig {
                run_id: position.run_id.clone(),
                ..self.config.clone()
            },
        )
        .on_thread(Some(Arc::from(thread)));
        run.breakpoints(self.before.clone(), self.after.clone());
        if !started {
            let (active, inputs) = self.tasks_at(thread, &position)?;
            let last = self.nodes_at(thread, &position, &position.nodes)?;
            run.resume_at(position.step, active, inputs, last);
        }
        let journal = Arc::new(LiveJournal {
            effects: Mutex::new(std::mem::take(&mut position.effects)),
            answers: Mutex::new(std::mem::take(&mut position.answers)),
            writer: AsyncMutex::new(None),
            run_id: run.run_id.to_string(),
            lease: heartbeat.clone(),
        });
        let mut commit = Durable {
            handle: Some(handle),
            reading: None,
            journal,
            done: std::mem::take(&mut position.done),
            durability: self.durability,
            heartbeat: heartbeat.clone(),
            lease: lease_slot.take(),
            flushed: None,
            thread: thread.to_owned(),
            _graph: std::marker::PhantomData,
        };
        let span = crate::trace::run(&run.run_id, Some(thread), None);
        let outcome = drive(&mut run, &mut commit, out)
            .instrument(span.clone())
            .await;
        *lease_slot = commit.lease.take();
        if let Err(error) = &outcome {
            crate::trace::failed(&span, error.category());
        }
        if let (Ok(Outcome::Finished { .. }), Some(handle)) = (&outcome, commit.handle.take()) {
            let position = Position {
                started: true,
                seq: handle.version(),
                step: run.step,
                nodes: run.graph().names(&run.last),
                run_id: Some(run.run_id.to_string()),
                ..Position::default()
            };
            self.keep(thread, handle, Some(position));
        } else if let (Ok(_), Some(handle)) = (&outcome, commit.handle.take()) {
            self.keep(thread, handle, None);
        }
        outcome
    }

    /// The thread's handle (warm, caught up with what other workers appended since, or
    /// loaded) and where its run stands, if known without reading the journal.
    async fn open(
        &self,
        thread: &str,
        lease: &Lease<B>,
    ) -> Result<(Thread<S, B>, Option<Position>), DurableError<S>> {
        let warm = lock(&self.warm).take(thread);
        let (mut handle, position) = match warm {
            // What the lease saw of the thread is what the handle holds: nothing to read.
            Some((handle, position)) if handle.is_current(lease) => (handle, position),
            // Another worker appended since: catch up with its entries (or read afresh, if
            // the thread was re-created or migrated).
            Some((mut handle, _)) => match handle.reload().await {
                Ok(()) => (handle, None),
                Err(_) => (self.store.thread::<S>(thread).await?, None),
            },
            None => (self.store.thread::<S>(thread).await?, None),
        };
        // Every append of the run is fenced by its lease.
        handle.fence(lease);
        Ok((handle, position))
    }

    /// Keeps the thread's handle warm for its next run.
    fn keep(&self, thread: &str, mut handle: Thread<S, B>, position: Option<Position>) {
        // The next run fences it with its own lease.
        handle.unfence();
        if handle.staged() == 0 {
            lock(&self.warm).put(thread, handle, position);
        }
    }

    /// The metadata of run `run_id`'s input entry.
    fn input_meta(&self, run_id: &str) -> StepMeta {
        let entry_node = self.graph.inner().nodes[self.graph.inner().entry]
            .name
            .to_string();
        self.input_meta_to(run_id, vec![entry_node])
    }

    /// The metadata of run `run_id`'s input entry, its first step running `next`.
    fn input_meta_to(&self, run_id: &str, next: Vec<String>) -> StepMeta {
        let entry = JournalEntry::Input { step: 0, next };
        entry_meta(run_id, Some("__input__"), &entry)
    }

    /// Commits a new run's input, and puts `position` at the run's start.
    async fn input(
        &self,
        handle: &mut Thread<S, B>,
        position: &mut Position,
        input: NodeOutput<S::Update>,
        run_id: Option<String>,
    ) -> Result<(), DurableError<S>> {
        let run_id = run_id.unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
        let meta = self.input_meta(&run_id);
        handle.merge(input, meta).await?;
        *position = Position {
            started: true,
            run_id: Some(run_id),
            ..Position::default()
        };
        Ok(())
    }

    /// Checks answers against the thread's pending questions; the answers to commit.
    fn check_answers(
        &self,
        thread: &str,
        position: &Position,
        answers: Answers,
    ) -> Result<Map<String, Value>, DurableError<S>> {
        let Some(interrupts) = &position.interrupts else {
            return Err(DurableError::State {
                thread: thread.to_owned(),
                reason: "its run is not suspended: there is nothing to answer".to_owned(),
            });
        };
        // Once every question was answered and the step still did not commit (its run failed
        // on an answer, or was cut short), the answers may be given again: the newest are used.
        let retry = position.failed_last
            && interrupts
                .iter()
                .all(|i| position.answers.contains_key(&i.id));
        let mut given = Map::new();
        for (id, value) in answers.0 {
            if (position.answers.contains_key(&id) && !retry) || given.contains_key(&id) {
                return Err(DurableError::AlreadyAnswered {
                    thread: thread.to_owned(),
                    id,
                });
            }
            if !interrupts.iter().any(|i| i.id == id) {
                let pending: Vec<String> = position.open().into_iter().map(|i| i.id).collect();
                return Err(DurableError::UnknownInterrupt {
                    thread: thread.to_owned(),
                    id,
                    pending: if pending.is_empty() {
                        String::new()
                    } else {
                        format!(" (pending: {})", pending.join(", "))
                    },
                });
            }
            given.insert(id, value);
        }
        Ok(given)
    }

    /// The node indices of `names`, which the journal at `position` names.
    fn nodes_at(
        &self,
        thread: &str,
        position: &Position,
        names: &[String],
    ) -> Result<Vec<usize>, DurableError<S>> {
        names
            .iter()
            .map(|name| {
                self.graph
                    .index_of(name)
                    .ok_or_else(|| DurableError::Journal {
                        thread: thread.to_owned(),
                        seq: position.seq,
                        reason: format!(
                            "the run names node `{name}`, which this graph does not have"
                        ),
                    })
            })
            .collect()
    }

    /// The tasks of the next step of the run at `position`.
    #[allow(clippy::type_complexity)]
    fn tasks_at(
        &self,
        thread: &str,
        position: &Position,
    ) -> Result<(Vec<usize>, Vec<Option<Arc<S>>>), DurableError<S>> {
        let mut active = self.nodes_at(thread, position, &position.next)?;
        let mut inputs: Vec<Option<Arc<S>>> = vec![None; active.len()];
        for send in &position.sends {
            active.extend(self.nodes_at(thread, position, std::slice::from_ref(&send.node))?);
            let input: S =
                serde_json::from_value(send.input.clone()).map_err(|e| DurableError::Journal {
                    thread: thread.to_owned(),
                    seq: position.seq,
                    reason: format!(
                        "the input of a `Send` to `{}` does not read: {e}",
                        send.node
                    ),
                })?;
            inputs.push(Some(Arc::new(input)));
        }
        Ok((active, inputs))
    }

    /// Where thread `thread`'s run stands, read from its journal.
    async fn position(&self, thread: &str) -> Result<Position, DurableError<S>> {
        Position::read(&self.store, thread)
            .await
            .map_err(|error| match error {
                ReadError::Store(error) => error.into(),
                ReadError::Entry { seq, reason } => DurableError::Journal {
                    thread: thread.to_owned(),
                    seq,
                    reason,
                },
            })
    }

    /// Where thread `thread`'s run stands.
    pub async fn status(&self, thread: &str) -> Result<RunStatus, DurableError<S>> {
        let position = self.position(thread).await?;
        let open = position.open();
        Ok(match open.is_empty() {
            false => RunStatus::Suspended {
                step: position.step + 1,
                interrupts: open,
            },
            true if position.ended() => RunStatus::Idle {
                step: position.step,
            },
            true => RunStatus::Running {
                step: position.step,
                next: position
                    .next
                    .into_iter()
                    .chain(position.sends.into_iter().map(|s| s.node))
                    .collect(),
            },
        })
    }

    /// The committed steps of thread `thread`'s runs, oldest first: each run's input and each
    /// step, with the version to read its state at ([`state_at`](DurableGraph::state_at)) and
    /// the nodes that were to run next (a fork at that version resumes there).
    pub async fn checkpoints(&self, thread: &str) -> Result<Vec<Checkpoint>, DurableError<S>> {
        let mut checkpoints = Vec::new();
        let mut after = 0;
        loop {
            let page = self
                .store
                .history(thread, HistoryQuery::oldest(1000).after(after))
                .await?;
            let Some(last) = page.last() else { break };
            after = last.seq;
            for entry in &page {
                let read = JournalEntry::of(entry).map_err(|reason| DurableError::Journal {
                    thread: thread.to_owned(),
                    seq: entry.seq,
                    reason,
                })?;
                let (step, nodes, next) = match read {
                    Some(JournalEntry::Input { step, next }) => (step, Vec::new(), next),
                    Some(JournalEntry::Step {
                        step,
                        nodes,
                        mut next,
                        sends,
                    }) => {
                        next.extend(sends.into_iter().map(|s| s.node));
                        (step, nodes, next)
                    }
                    _ => continue,
                };
                checkpoints.push(Checkpoint {
                    version: entry.seq,
                    step,
                    run_id: entry.run_id.clone(),
                    nodes,
                    next,
                    time_ms: entry.time_ms,
                });
            }
            if page.len() < 1000 {
                break;
            }
        }
        Ok(checkpoints)
    }

    /// The state of thread `thread` at `version` (a [`Checkpoint`]'s).
    pub async fn state_at(&self, thread: &str, version: u64) -> Result<S, DurableError<S>> {
        Ok(self.store.load_at::<S>(thread, version).await?.state)
    }

    /// Forks thread `thread` at `version` (a [`Checkpoint`]'s) into `new_thread`, whose run
    /// then stands where it stood at that step: [`resume`](DurableGraph::resume) it to run on
    /// from there. The original thread and its history stay as they are.
    pub async fn fork_at(
        &self,
        thread: &str,
        version: u64,
        new_thread: &str,
    ) -> Result<RunStatus, DurableError<S>> {
        self.store.fork(thread, version, new_thread).await?;
        self.status(new_thread).await
    }

    /// Applies `update` to thread `thread` as if node `node` had produced it, as a step of the
    /// thread's run, which then continues from `node`'s outgoing edge (routed on the updated
    /// state): LangGraph's `update_state(as_node=...)`. A suspended run's pending step is
    /// replaced (its interrupts are dropped). Returns the run's status after it;
    /// [`resume`](DurableGraph::resume) continues.
    pub async fn update_as(
        &self,
        thread: &str,
        node: K,
        update: impl Into<NodeOutput<S::Update>>,
    ) -> Result<RunStatus, DurableError<S>> {
        let Some(at) = self.graph.index_of(node.name()) else {
            return Err(DurableError::State {
                thread: thread.to_owned(),
                reason: format!("the graph has no node `{}`", node.name()),
            });
        };
        let _running = Running::claim(&self.running, thread, &self.worker)?;
        let lease = self
            .store
            .lease(thread, &self.worker, self.lease_ttl)
            .await?;
        let result = async {
            let (mut handle, _) = self.open(thread, &lease).await?;
            let position = self.position(thread).await?;
            let step = position.step + 1;
            let active = [at];
            let mut routed = None;
            let graph = &self.graph;
            let run_id = position.run_id.clone().unwrap_or_default();
            handle.stage(update, |state: &S| {
                let route = graph.route(state, &active);
                let meta = step_meta(graph, &run_id, step, &active, route.as_ref().ok());
                routed = Some(route);
                meta
            })?;
            if let Some(Err(kind)) = routed {
                return Err(DurableError::Run(RunError::new(
                    kind,
                    step,
                    handle.into_state(),
                )));
            }
            handle.flush().await?;
            self.keep(thread, handle, None);
            Ok::<_, DurableError<S>>(())
        }
        .await;
        let released = lease.release().await;
        result?;
        released?;
        self.status(thread).await
    }
}

/// A durable run as a stream of [`Event`]s, its last item the run's end or its error; from
/// [`DurableGraph::stream`]. Polling it runs the graph; dropping it cancels the run.
#[must_use = "a stream does nothing unless polled"]
pub struct DurableStream<S: DurableState, K: NodeKey> {
    driven: Driven<S, K, Result<Outcome<S>, DurableError<S>>>,
}

impl<S: DurableState, K: NodeKey> DurableStream<S, K> {
    /// Carries only the events of `filter` (with the run's start and end); see
    /// [`RunStream::only`](crate::RunStream::only). Call it before polling.
    pub fn only(mut self, filter: EventFilter) -> Self {
        self.driven.only(filter);
        self
    }
}

// The stream never pins its fields (the run's future is boxed).
impl<S: DurableState, K: NodeKey> Unpin for DurableStream<S, K> {}

impl<S: DurableState, K: NodeKey> Stream for DurableStream<S, K> {
    type Item = Result<Event<S, K>, DurableError<S>>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<Option<Self::Item>> {
        self.get_mut().driven.poll_next(cx).map(|next| {
            next.map(|next| match next {
                Next::Event(event) => Ok(event),
                Next::End(Ok(Outcome::Finished { state, .. })) => Ok(Event::RunFinished { state }),
                Next::End(Ok(Outcome::Suspended {
                    state, interrupts, ..
                })) => Ok(Event::RunSuspended { state, interrupts }),
                Next::End(Err(error)) => Err(error),
            })
        })
    }
}

/// The handles of the threads a worker ran last, each with where its run stood if known: at
/// most `capacity`, the least recently used dropped first.
struct Warm<S, B> {
    capacity: usize,
    threads: HashMap<String, (Thread<S, B>, Option<Position>)>,
    order: VecDeque<String>,
}

impl<S, B> Warm<S, B> {
    fn new(capacity: usize) -> Self {
        Warm {
            capacity,
            threads: HashMap::new(),
            order: VecDeque::new(),
        }
    }

    fn resize(&mut self, capacity: usize) {
        self.capacity = capacity;
        self.evict();
    }

    fn take(&mut self, thread: &str) -> Option<(Thread<S, B>, Option<Position>)> {
        let taken = self.threads.remove(thread)?;
        self.order.retain(|t| t != thread);
        Some(taken)
    }

    fn put(&mut self, thread: &str, handle: Thread<S, B>, position: Option<Position>) {
        if self.capacity == 0 {
            return;
        }
        if self
            .threads
            .insert(thread.to_owned(), (handle, position))
            .is_some()
        {
            self.order.retain(|t| t != thread);
        }
        self.order.push_back(thread.to_owned());
        self.evict();
    }

    fn evict(&mut self) {
        while self.order.len() > self.capacity {
            if let Some(oldest) = self.order.pop_front() {
                self.threads.remove(&oldest);
            }
        }
    }
}

/// A thread a worker is running, claimed among its clones until dropped.
struct Running<'a> {
    running: &'a Mutex<HashSet<String>>,
    thread: String,
}

impl<'a> Running<'a> {
    fn claim(
        running: &'a Mutex<HashSet<String>>,
        thread: &str,
        worker: &str,
    ) -> Result<Self, StoreError> {
        if !lock(running).insert(thread.to_owned()) {
            return Err(StoreError::Leased {
                thread: thread.to_owned(),
                owner: format!("{worker} (another run of this worker)"),
                expires_in_ms: 0,
            });
        }
        Ok(Running {
            running,
            thread: thread.to_owned(),
        })
    }
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        lock(self.running).remove(&self.thread);
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The error of a run that lost its lease.
fn lease_lost(thread: &str, worker: &str) -> StoreError {
    StoreError::LeaseLost {
        thread: thread.to_owned(),
        owner: worker.to_owned(),
        now_held_by: None,
    }
}

/// What a step's nodes see of the durable run: the recorded effects and answers of the step in
/// flight, and the thread's handle, lent while the step runs, to journal new ones.
struct LiveJournal<S, B> {
    effects: Mutex<HashMap<String, (String, Value)>>,
    answers: Mutex<Map<String, Value>>,
    writer: AsyncMutex<Option<Thread<S, B>>>,
    run_id: String,
    lease: Heartbeat,
}

impl<S: DurableState, B: Backend> LiveJournal<S, B> {
    /// Appends `entry` (an empty update) with the lent handle, after what is staged.
    async fn append(&self, entry: &JournalEntry) -> Result<(), BoxError> {
        let mut writer = self.writer.lock().await;
        let handle = writer.as_mut().ok_or("the run's thread is not open")?;
        if !self.lease.held() {
            return Err(Box::new(lease_lost(handle.id(), self.lease.owner())));
        }
        handle
            .merge((), entry_meta(&self.run_id, None, entry))
            .await?;
        Ok(())
    }

    /// Stages `entry` (an empty update) on the lent handle.
    async fn stage(&self, entry: &JournalEntry) -> Result<(), BoxError> {
        let mut writer = self.writer.lock().await;
        let handle = writer.as_mut().ok_or("the run's thread is not open")?;
        handle.stage((), |_| entry_meta(&self.run_id, None, entry))?;
        Ok(())
    }
}

impl<S: DurableState, B: Backend> Journal for LiveJournal<S, B> {
    fn recorded(&self, key: &str) -> Option<(String, Value)> {
        lock(&self.effects).get(key).cloned()
    }

    fn record(
        &self,
        key: String,
        name: String,
        value: Value,
    ) -> Pin<Box<dyn Future<Output = Result<(), BoxError>> + Send + '_>> {
        Box::pin(async move {
            let step = key
                .split('.')
                .next()
                .and_then(|s| s.parse::<u64>().ok())
                .unwrap_or(0);
            let entry = JournalEntry::Effect {
                step,
                key,
                name,
                value,
            };
            self.append(&entry).await?;
            if let JournalEntry::Effect {
                key, name, value, ..
            } = entry
            {
                lock(&self.effects).insert(key, (name, value));
            }
            Ok(())
        })
    }

    fn answer(&self, id: &str) -> Option<Value> {
        lock(&self.answers).get(id).cloned()
    }
}

/// The commit of a durable run: each step staged on the thread's handle and flushed as the
/// durability mode says; its tasks' outputs, effects and questions journaled.
struct Durable<S, K, B> {
    /// The thread's handle; lent to the journal while a step runs.
    handle: Option<Thread<S, B>>,
    /// The state the running step's nodes read (while the handle is lent).
    reading: Option<Arc<S>>,
    journal: Arc<LiveJournal<S, B>>,
    /// Outputs of the step in flight's tasks that finished before (by index): not run again.
    done: BTreeMap<usize, Value>,
    durability: Durability,
    heartbeat: Heartbeat,
    /// The run's lease, until its last commit released it.
    lease: Option<Lease<B>>,
    thread: String,
    /// The thread's version after the last flush of `finish` or `suspend`, not reported yet.
    flushed: Option<u64>,
    _graph: std::marker::PhantomData<fn() -> K>,
}

impl<S: DurableState, K: NodeKey, B: Backend> Durable<S, K, B> {
    /// Takes the handle back from the journal after a step.
    async fn take_back(&mut self) {
        if self.handle.is_none() {
            self.handle = self.journal.writer.lock().await.take();
        }
        self.reading = None;
    }

    fn handle(&mut self) -> &mut Thread<S, B> {
        self.handle
            .as_mut()
            .expect("the handle is back between steps")
    }

    /// The run's last commit: what is staged, releasing the lease in the same write.
    async fn flush_last(&mut self) -> Result<Option<u64>, StoreError> {
        if !self.heartbeat.held() {
            return Err(lease_lost(&self.thread, self.heartbeat.owner()));
        }
        let Some(lease) = self.lease.take() else {
            return self.flush().await;
        };
        // Renewals stop first: the lease is about to be given up.
        self.heartbeat.stop();
        let handle = self
            .handle
            .as_mut()
            .expect("the handle is back between steps");
        let staged = handle.staged();
        match handle.flush_releasing(&lease).await {
            Ok(version) => Ok((staged > 0).then_some(version)),
            Err(error) => {
                self.lease = Some(lease);
                Err(error)
            }
        }
    }

    /// Commits what is staged, if the lease is still held.
    async fn flush(&mut self) -> Result<Option<u64>, StoreError> {
        if !self.heartbeat.held() {
            return Err(lease_lost(&self.thread, self.heartbeat.owner()));
        }
        let handle = self.handle();
        if handle.staged() == 0 {
            return Ok(None);
        }
        handle.flush().await.map(Some)
    }

    /// The state's `ExecutionState` update, if it has one: its current value with the thread's
    /// id, changed by `change`.
    fn execution(&mut self, change: impl FnOnce(&mut Map<String, Value>)) -> Option<S::Update> {
        let thread = self.thread.clone();
        let handle = self.handle.as_ref()?;
        execution_update(handle.state(), &thread, change)
    }
}

impl<S: DurableState, K: NodeKey, B: Backend> Commit<S, K> for Durable<S, K, B> {
    type Output = Outcome<S>;
    type Error = DurableError<S>;
    const SUSPENDS: bool = true;

    fn state(&mut self) -> Arc<S> {
        match (&mut self.handle, &self.reading) {
            (Some(handle), _) => handle.shared_state(),
            (None, Some(reading)) => Arc::clone(reading),
            (None, None) => unreachable!("a durable run's state is its handle's or lent"),
        }
    }

    fn answered(&self, id: &str) -> bool {
        self.journal.answer(id).is_some()
    }

    fn take_committed(&mut self) -> Option<u64> {
        self.flushed.take()
    }

    async fn before_step(&mut self, _: &Run<S, K>) -> Result<(), DurableError<S>> {
        // A run whose lease was taken over stops before its next node.
        if !self.heartbeat.held() {
            return Err(lease_lost(&self.thread, self.heartbeat.owner()).into());
        }
        // The handle is lent to the step's journal (effects, finished tasks) while it runs.
        let mut handle = self
            .handle
            .take()
            .expect("the handle is back between steps");
        self.reading = Some(handle.shared_state());
        *self.journal.writer.lock().await = Some(handle);
        Ok(())
    }

    fn task(&mut self, run: &Run<S, K>, index: usize, _: usize) -> Setup<S::Update> {
        let journal: Arc<dyn Journal> = Arc::clone(&self.journal) as Arc<dyn Journal>;
        Setup {
            scope: Some(Arc::new(Scope::new(
                journal,
                format!("{}.{index}", run.step),
            ))),
            done: self
                .done
                .remove(&index)
                .and_then(|v| serde_json::from_value::<S::Update>(v).ok())
                .map(NodeOutput::from),
        }
    }

    fn wrap(
        &mut self,
        run: &Run<S, K>,
        index: usize,
        task: NodeFuture<S::Update>,
    ) -> NodeFuture<S::Update> {
        // A task of a step of several keeps its output as it finishes: a crash then reruns
        // only the step's unfinished tasks.
        if run.active.len() < 2 {
            return task;
        }
        let journal = Arc::clone(&self.journal);
        let step = run.step;
        let node = run.graph().inner().nodes[run.active[index]]
            .name
            .to_string();
        let at_once = self.durability == Durability::Sync;
        Box::pin(async move {
            // One output is journaled as the update it is and passed on as that update (no
            // copy, composed once); several are composed for the journal and again at the
            // barrier, which reports the failure if they do not compose.
            let (output, json) = match task.await? {
                NodeOutput::Nothing => (
                    NodeOutput::Nothing,
                    serde_json::to_value(S::Update::default()).ok(),
                ),
                NodeOutput::Update(update) => {
                    let json = serde_json::to_value(&update).ok();
                    (NodeOutput::Update(update), json)
                }
                NodeOutput::ToolResult(result) => {
                    let update = result.into_update();
                    let json = serde_json::to_value(&update).ok();
                    (NodeOutput::Update(update), json)
                }
                many => {
                    let json = output_json::<S>(&many);
                    (many, json)
                }
            };
            if let Some(update) = json {
                let entry = JournalEntry::Task {
                    step,
                    index,
                    node,
                    update,
                };
                if at_once {
                    journal.append(&entry).await?;
                } else {
                    journal.stage(&entry).await?;
                }
            }
            Ok(output)
        })
    }

    async fn meanwhile(&mut self) -> Result<Option<u64>, DurableError<S>> {
        if self.durability != Durability::Async {
            return Ok(None);
        }
        // The last step's append, as any: not once the lease may have been taken over (the
        // step's nodes run first, and one may have blocked the thread past the lease).
        if !self.heartbeat.held() {
            return Err(lease_lost(&self.thread, self.heartbeat.owner()).into());
        }
        let mut writer = self.journal.writer.lock().await;
        match writer.as_mut() {
            Some(handle) if handle.staged() > 0 => Ok(Some(handle.flush().await?)),
            _ => Ok(None),
        }
    }

    async fn commit(
        &mut self,
        run: &Run<S, K>,
        update: Option<Composed<S::Update>>,
    ) -> Result<Committed<S>, Stop<DurableError<S>>> {
        self.take_back().await;
        // The state's `ExecutionState`, if it has one, follows the run (as AgentFlow's).
        let graph = run.graph();
        let names = graph.names(&run.active);
        let step = run.step;
        let execution = self.execution(|e| {
            e.insert("current_node".into(), Value::String(names.join(",")));
            e.insert("step".into(), Value::from(step));
            e.insert("status".into(), Value::from("running"));
            for key in ["interrupted_node", "interrupt_reason", "interrupt_data"] {
                e.insert(key.into(), Value::Null);
            }
        });
        let (update, from) = match update {
            Some(Composed { update, from }) => (Some(update), from),
            None => (None, None),
        };
        let update = match (update, execution) {
            (Some(update), Some(execution)) => Some(
                S::compose(update, execution, Combine::Sequence)
                    .map_err(|error| Stop::Run(graph.merge_error(&run.active, from, error)))?,
            ),
            (update, execution) => update.or(execution),
        };
        let run_id = run.run_id.to_string();
        let mut routed = None;
        let staged = self.handle().stage(
            update.map_or(NodeOutput::Nothing, NodeOutput::from),
            |state: &S| {
                let route = graph.route(state, &run.active);
                let meta = step_meta(graph, &run_id, step, &run.active, route.as_ref().ok());
                routed = Some(route);
                meta
            },
        );
        if let Err(error) = staged {
            return Err(match error {
                StoreError::Merge(error) => Stop::Run(graph.merge_error(&run.active, from, error)),
                other => Stop::Commit(other.into()),
            });
        }
        let next = match routed.expect("the step was described") {
            Ok(next) => next,
            Err(kind) => {
                // Nothing of the step may stay (the steps staged before it do).
                self.handle()
                    .unstage_last()
                    .await
                    .map_err(|e| Stop::Commit(e.into()))?;
                return Err(Stop::Run(kind));
            }
        };
        // The run's last step (nothing next) is committed with the run's end, in one
        // transaction: a chat turn of one step is one write.
        let last = next.0.is_empty();
        let version = match self.durability {
            Durability::Sync if !last => self.flush().await.map_err(|e| Stop::Commit(e.into()))?,
            Durability::Sync | Durability::Async | Durability::Exit => None,
        };
        lock(&self.journal.effects).clear();
        lock(&self.journal.answers).clear();
        Ok(Committed { next, version })
    }

    async fn finish(&mut self, run: &Run<S, K>) -> Result<Outcome<S>, DurableError<S>> {
        self.take_back().await;
        let execution = self.execution(|e| {
            e.insert("status".into(), Value::from("completed"));
        });
        let handle = self.handle();
        if let Some(execution) = execution {
            let entry = JournalEntry::End { step: run.step };
            let meta = entry_meta(&run.run_id, None, &entry);
            handle.stage(execution, |_| meta)?;
        }
        self.flushed = self.flush_last().await?;
        let handle = self.handle();
        Ok(Outcome::Finished {
            version: handle.version(),
            state: handle.shared_state(),
        })
    }

    async fn suspend(
        &mut self,
        run: &Run<S, K>,
        interrupts: Vec<Interrupt>,
    ) -> Result<Outcome<S>, DurableError<S>> {
        self.take_back().await;
        let first = &interrupts[0];
        let (node, id) = (first.node.clone(), first.id.clone());
        let data = serde_json::json!({ "interrupts": interrupts });
        let execution = self.execution(|e| {
            e.insert("current_node".into(), Value::String(node.clone()));
            e.insert("status".into(), Value::from("interrupted_before"));
            e.insert("interrupted_node".into(), Value::String(node));
            e.insert(
                "interrupt_reason".into(),
                Value::String(format!("interrupt {id}")),
            );
            e.insert("interrupt_data".into(), data);
        });
        // The suspended step: the one whose nodes asked, or the next for a breakpoint.
        let step = interrupts.iter().map(|i| i.step).max().unwrap_or(run.step);
        let entry = JournalEntry::Suspend {
            step,
            interrupts,
            done: BTreeMap::new(),
        };
        let meta = entry_meta(&run.run_id, None, &entry);
        let handle = self.handle();
        match execution {
            Some(execution) => handle.stage(execution, |_| meta)?,
            None => handle.stage((), |_| meta)?,
        }
        self.flushed = self.flush_last().await?;
        let JournalEntry::Suspend { interrupts, .. } = entry else {
            unreachable!("the entry written above")
        };
        let handle = self.handle();
        Ok(Outcome::Suspended {
            version: handle.version(),
            state: handle.shared_state(),
            interrupts,
        })
    }

    async fn fail(&mut self, run: &Run<S, K>, kind: RunErrorKind) -> DurableError<S> {
        self.take_back().await;
        if let Err(error) = self.flush().await {
            return error.into();
        }
        // The failure is journaled (with the state's `ExecutionState` marked failed, if it has
        // one): a resume runs the step again, and answers it failed on may be given anew.
        let error = run.error(kind, ());
        let message = error.to_string();
        let entry = JournalEntry::Failed {
            step: run.step,
            category: error.category().to_owned(),
            error: message.clone(),
        };
        let meta = entry_meta(&run.run_id, None, &entry);
        let execution = self.execution(|e| {
            e.insert("status".into(), Value::from("error"));
            let mut internal = e
                .get("internal_data")
                .and_then(Value::as_object)
                .cloned()
                .unwrap_or_default();
            internal.insert("error".into(), Value::String(message));
            e.insert("internal_data".into(), Value::Object(internal));
        });
        if !self.heartbeat.held() {
            return lease_lost(&self.thread, self.heartbeat.owner()).into();
        }
        let handle = self.handle();
        let written = match execution {
            Some(execution) => handle.merge(execution, meta).await,
            None => handle.merge((), meta).await,
        };
        if let Err(error) = written {
            return error.into();
        }
        DurableError::Run(error.with_state(handle.state().clone()))
    }
}

/// Journal metadata of `entry`, of run `run_id`, naming `node`.
fn entry_meta(run_id: &str, node: Option<&str>, entry: &JournalEntry) -> StepMeta {
    let mut meta = StepMeta::default()
        .run_id(run_id)
        .with(META_KEY, entry.to_meta());
    meta.node = node.map(str::to_owned);
    meta
}

/// The metadata of step `step` of `active`, routed to `next` (none if routing failed).
fn step_meta<S: DurableState, K: NodeKey>(
    graph: &Graph<S, K>,
    run_id: &str,
    step: u64,
    active: &[usize],
    next: Option<&crate::step::Next<S>>,
) -> StepMeta {
    let nodes = graph.names(active);
    let mut plain = Vec::new();
    let mut sends = Vec::new();
    if let Some((next, inputs)) = next {
        for (&at, input) in next.iter().zip(inputs) {
            let name = graph.inner().nodes[at].name.to_string();
            match input {
                None => plain.push(name),
                Some(input) => sends.push(SendRecord {
                    node: name,
                    input: serde_json::to_value(&**input).unwrap_or(Value::Null),
                }),
            }
        }
    }
    let node = nodes.join(",");
    let entry = JournalEntry::Step {
        step,
        nodes,
        next: plain,
        sends,
    };
    entry_meta(run_id, Some(&node), &entry)
}

/// An update of the state's `ExecutionState` field (none if it has none): its current value
/// as JSON, with the thread's id, changed by `change`.
fn execution_update<S: DurableState>(
    state: &S,
    thread: &str,
    change: impl FnOnce(&mut Map<String, Value>),
) -> Option<S::Update> {
    let (name, current) = state.execution()?;
    let Ok(Value::Object(mut execution)) = serde_json::to_value(current) else {
        return None;
    };
    if execution.get("thread_id").is_none_or(Value::is_null) {
        execution.insert("thread_id".into(), Value::String(thread.to_owned()));
    }
    change(&mut execution);
    let mut update = Map::new();
    update.insert(name.to_owned(), Value::Object(execution));
    serde_json::from_value(Value::Object(update)).ok()
}

/// A finished node's output as the JSON of its update (kept so that it is not run again).
fn output_json<S: DurableState>(output: &NodeOutput<S::Update>) -> Option<Value> {
    let update = output.clone().into_update(S::compose).ok()?;
    serde_json::to_value(update.unwrap_or_default()).ok()
}
