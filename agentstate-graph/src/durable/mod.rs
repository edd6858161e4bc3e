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
//! updates journaled as they finished (LangGraph's pending writes: each written before the
//! task ends in [`Durability::Sync`], just after in `Async`; see the durability modes); the
//! others run again from their start, and their recorded effects return their recorded results
//! instead of running.
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
//! (`interrupt_unknown`, `interrupt_answered`). An id is unique to its run (it ends with the
//! run's id) and stable across the run's resumes: a later run on the thread asking at the same
//! place has another id, and an answer to the earlier run's is refused.
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
//!   loses at most the last committed step too (it runs again on resume). The finished tasks
//!   of a step of several are written as they finish, while the others run, without the step
//!   waiting for it (what finished before a crash, bar the last moments, is not run again).
//!   Effects and interrupts are always journaled at once.
//! - [`Durability::Exit`]: the steps (and the finished tasks of the step in flight) are
//!   appended when the run ends, suspends or fails; a crash loses the whole run so far (it
//!   starts again from its last commit).
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

mod begin;
mod commit;
mod history;
mod lease;
mod runs;
mod warm;

pub use history::{Checkpoint, RunStatus};
pub use runs::{DurableStream, START_RUN_KEY};
pub use warm::DEFAULT_KEEP_THREADS;

use crate::effect::Interrupt;
use crate::error::RunError;
use crate::graph::{Graph, RunConfig};
use crate::name::NodeKey;
use crate::GraphState;
use agentstate_store::backend::Backend;
use agentstate_store::{Store, StoreError, StoredState};
use serde_json::Value;
use std::collections::HashSet;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use warm::Warm;

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
/// let answers = Answers::new()
///     .answer("approve:3.0:0@run-7", true)
///     .answer("approve:3.1:0@run-7", false);
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

/// Why a durable run failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DurableError<S> {
    /// The graph failed (a node's error or panic, `run_panicked`; an edge, a merge, the
    /// recursion limit); the steps before are committed, the failure is journaled, the lease
    /// released, and resuming runs the failed step again.
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
}

/// Locks `mutex`, also after a panic while it was held (what it guards stays whole).
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
