//! Durable runs: a graph run on a thread of an [`agentstate_store`] store (feature `store`),
//! resumed after a crash, suspended for a person's answer, its side effects run once.
//!
//! [`Graph::durable`] binds a graph to a store; [`DurableGraph::start`] runs it on a new
//! thread, [`DurableGraph::run`] starts a new run on an existing thread with an input, and
//! [`DurableGraph::resume`] continues a thread's run from where it stands (after a crash, in a
//! new process or on another machine) or, with [`Answers`], after an interrupt.
//!
//! # What a run stores
//! Every entry a run appends to the thread's journal carries, in its metadata under the key
//! `"agentstate_graph"`, what it is:
//! - `input`: the run's input (its own update, "step 0"), with the run id and the entry node;
//! - `step`: one completed step: its number, its nodes, its merged update (the entry's body,
//!   several nodes' updates as one parallel entry) and the nodes of the next step (with the
//!   inputs of `Send` tasks). A run can always be resumed from its thread alone;
//! - `effect`: the result of one [`Context::effect`](crate::Context::effect) of the step in
//!   flight, appended before the node goes on (the entry's update is empty);
//! - `suspend`: the interrupts of a suspended step (ids and payloads) and the outputs of the
//!   step's nodes that finished, which are not run again;
//! - `answers`: the answers a resume gave, appended before any node runs again.
//!
//! # One run per thread
//! A run takes the thread's lease ([`Store::lease`]) before any node body runs, renews it
//! while the step runs (every third of [`lease_ttl`](DurableGraph::lease_ttl), 30 s by
//! default), and releases it when the run ends or suspends. A second worker that tries to run
//! the thread meanwhile is refused with `thread_leased` before anything runs; a worker that
//! died is taken over once its lease expired. Every append is made at the version the run
//! read, so even a worker that was paused past its lease cannot commit a step (it stops with
//! `state_write_conflict` or `thread_lease_lost`): the thread's history never forks.
//!
//! # Resume
//! Steps committed before a crash are not run again; the step in flight runs again from its
//! start, and its nodes' recorded effects return their recorded results instead of running.
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
//! # Durability modes
//! - [`Durability::Sync`] (the default): each step is committed before the next starts; a
//!   crash loses at most the step in flight, which runs again.
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
//! assert_eq!((state.approved, state.log), (Some(true), vec!["r-1".to_owned()]));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! # })?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use crate::effect::{Interrupted, Journal, Scope};
use crate::error::{RunError, RunErrorKind};
use crate::graph::{Graph, RunConfig};
use crate::name::NodeKey;
use crate::node::BoxError;
use crate::run::{Results, Run, Setup};
use crate::GraphState;
use agentstate::FanIn;
use agentstate::NodeOutput;
use agentstate_store::backend::Backend;
use agentstate_store::lease::Lease;
use agentstate_store::store::StoredState;
use agentstate_store::{HistoryQuery, StepMeta, Store, StoreError, Thread};
use futures_util::lock::Mutex as AsyncMutex;
use serde_json::{json, Map, Value};
use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The metadata key of a run's journal entries.
pub const META_KEY: &str = "agentstate_graph";

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
        }
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
        }
    }
}

/// How a durable run ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome<S> {
    /// The run reached `END`.
    Finished {
        /// The final state.
        state: S,
        /// The thread's version.
        version: u64,
    },
    /// The run waits for answers ([`DurableGraph::resume_with`]).
    Suspended {
        /// The state before the suspended step.
        state: S,
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

/// A question a node asked ([`Context::interrupt`](crate::Context::interrupt)).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Interrupt {
    /// Its id, which an answer names.
    pub id: String,
    /// The node that asked.
    pub node: String,
    /// The node of the run's step it was asked in (the asking node itself, or the subgraph,
    /// fan-out or parallel-branches node it runs inside).
    pub step_node: String,
    /// The step it was asked in.
    pub step: u64,
    /// What it asked.
    pub payload: Value,
    /// Where inside the step's node it was asked: `fan_out_index` (the fan-out instance) and
    /// `branch_name` (the parallel branch), when it was asked inside one (the innermost).
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub metadata: Map<String, Value>,
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
    /// `thread_lease_lost` or `state_write_conflict` (another worker took the thread over),
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
    /// Names this worker (the lease's owner; a new UUID by default). Two `DurableGraph`s with
    /// the same name are the same worker: give each process or task its own.
    #[must_use]
    pub fn worker(mut self, id: impl Into<String>) -> Self {
        self.worker = Arc::from(id.into());
        self
    }

    /// How long a worker holds a thread without renewing (30 s by default); a worker that died
    /// is taken over after at most this long. Renewed every third of it while a step runs.
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

    /// The graph.
    pub fn graph(&self) -> &Graph<S, K> {
        &self.graph
    }

    /// The store.
    pub fn store(&self) -> &Store<B> {
        &self.store
    }

    /// Creates thread `thread` with `state` and runs the graph on it from its entry.
    pub async fn start(&self, thread: &str, state: S) -> Result<Outcome<S>, DurableError<S>> {
        self.store.create(thread, state).await?;
        self.run(thread, ()).await
    }

    /// Starts a new run on thread `thread` from the graph's entry, `input` merged first (a
    /// user's message); the thread's last run must have finished. The input is committed as
    /// the run's first entry.
    pub async fn run(
        &self,
        thread: &str,
        input: impl Into<NodeOutput<S::Update>>,
    ) -> Result<Outcome<S>, DurableError<S>> {
        let lease = self
            .store
            .lease(thread, &self.worker, self.lease_ttl)
            .await?;
        let result = self.run_leased(thread, input.into(), &lease).await;
        finish(lease, result).await
    }

    async fn run_leased(
        &self,
        thread: &str,
        input: NodeOutput<S::Update>,
        lease: &Lease<B>,
    ) -> Result<Outcome<S>, DurableError<S>> {
        let mut handle = self.store.thread::<S>(thread).await?;
        let position = self.position(thread).await?;
        if !position.next.is_empty() || !position.sends.is_empty() || position.suspended.is_some() {
            return Err(DurableError::State {
                thread: thread.to_owned(),
                reason: format!(
                    "its run is not finished (it stands after step {} with {} next); resume it, or fork the thread",
                    position.step,
                    position.next.join(", ")
                ),
            });
        }
        let run_id = uuid::Uuid::new_v4().to_string();
        let entry = self.graph.inner().nodes[self.graph.inner().entry]
            .name
            .to_string();
        let meta = run_meta(
            &run_id,
            Some("__input__"),
            json!({"entry": "input", "step": 0, "next": [entry]}),
        );
        handle.merge(input, meta).await?;
        let mut run = Run::new(
            &self.graph,
            RunConfig {
                run_id: Some(run_id),
                ..self.config.clone()
            },
            None,
        );
        let journal = StepJournal::new(Default::default(), Default::default());
        self.drive(&mut run, handle, lease, journal, BTreeMap::new())
            .await
    }

    /// Continues thread `thread`'s run from where it stands: after a crash, the step in flight
    /// runs again (committed steps are not). A suspended run needs answers
    /// ([`resume_with`](DurableGraph::resume_with)); a finished one has nothing to resume
    /// (its state is returned as finished).
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
        let lease = self
            .store
            .lease(thread, &self.worker, self.lease_ttl)
            .await?;
        let result = self.resume_leased(thread, answers, &lease).await;
        finish(lease, result).await
    }

    async fn resume_leased(
        &self,
        thread: &str,
        answers: Answers,
        lease: &Lease<B>,
    ) -> Result<Outcome<S>, DurableError<S>> {
        let mut handle = self.store.thread::<S>(thread).await?;
        let mut position = self.position(thread).await?;
        if !position.started && answers.is_empty() {
            // No run was started on the thread (a `start` cut short between creating the
            // thread and its run's input): start it now.
            drop(handle);
            return self.run_leased(thread, NodeOutput::Nothing, lease).await;
        }
        if !answers.is_empty() {
            let Some(suspended) = &position.suspended else {
                return Err(DurableError::State {
                    thread: thread.to_owned(),
                    reason: "its run is not suspended: there is nothing to answer".to_owned(),
                });
            };
            // Once every question was answered and the step still did not commit (its run
            // failed on an answer, or was cut short), the answers may be given again: the
            // newest are used.
            let retry = position.failed_last
                && suspended
                    .interrupts
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
                if !suspended.interrupts.iter().any(|i| i.id == id) {
                    let pending: Vec<&str> = suspended
                        .interrupts
                        .iter()
                        .filter(|i| !position.answers.contains_key(&i.id))
                        .map(|i| i.id.as_str())
                        .collect();
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
            let meta = run_meta(
                position.run_id.as_deref().unwrap_or_default(),
                None,
                json!({"entry": "answers", "step": position.step + 1, "answers": given.clone()}),
            );
            handle.merge((), meta).await?;
            position.answers.extend(given);
        } else if let Some(suspended) = &position.suspended {
            let open: Vec<Interrupt> = suspended
                .interrupts
                .iter()
                .filter(|i| !position.answers.contains_key(&i.id))
                .cloned()
                .collect();
            if !open.is_empty() {
                return Ok(Outcome::Suspended {
                    version: handle.version(),
                    state: handle.into_state(),
                    interrupts: open,
                });
            }
        }
        if position.next.is_empty() && position.sends.is_empty() {
            return Ok(Outcome::Finished {
                version: handle.version(),
                state: handle.into_state(),
            });
        }
        let mut run = Run::new(
            &self.graph,
            RunConfig {
                run_id: position.run_id.clone(),
                ..self.config.clone()
            },
            None,
        );
        let at = |name: &str| {
            self.graph
                .index_of(name)
                .ok_or_else(|| DurableError::Journal {
                    thread: thread.to_owned(),
                    seq: position.seq,
                    reason: format!(
                        "the run goes next to node `{name}`, which this graph does not have"
                    ),
                })
        };
        let mut active = Vec::new();
        for name in &position.next {
            active.push(at(name)?);
        }
        let mut inputs: Vec<Option<Arc<S>>> = vec![None; active.len()];
        for (name, input) in &position.sends {
            active.push(at(name)?);
            let input: S =
                serde_json::from_value(input.clone()).map_err(|e| DurableError::Journal {
                    thread: thread.to_owned(),
                    seq: position.seq,
                    reason: format!("the input of a `Send` to `{name}` does not read: {e}"),
                })?;
            inputs.push(Some(Arc::new(input)));
        }
        run.resume_at(position.step, active, inputs);
        let done = position.suspended.map(|s| s.done).unwrap_or_default();
        let journal = StepJournal::new(position.effects, position.answers);
        self.drive(&mut run, handle, lease, journal, done).await
    }

    /// Where thread `thread`'s run stands.
    pub async fn status(&self, thread: &str) -> Result<RunStatus, DurableError<S>> {
        let position = self.position(thread).await?;
        let open: Vec<Interrupt> = position
            .suspended
            .map(|s| {
                s.interrupts
                    .into_iter()
                    .filter(|i| !position.answers.contains_key(&i.id))
                    .collect()
            })
            .unwrap_or_default();
        Ok(match open.is_empty() {
            false => RunStatus::Suspended {
                step: position.step + 1,
                interrupts: open,
            },
            true if position.next.is_empty() && position.sends.is_empty() => RunStatus::Idle {
                step: position.step,
            },
            true => RunStatus::Running {
                step: position.step,
                next: position
                    .next
                    .into_iter()
                    .chain(position.sends.into_iter().map(|(n, _)| n))
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
                let Some(meta) = entry.extra.get(META_KEY) else {
                    continue;
                };
                let kind = meta.get("entry").and_then(Value::as_str);
                if !matches!(kind, Some("step" | "input")) {
                    continue;
                }
                let mut next = names(meta.get("next")).unwrap_or_default();
                if let Some(sends) = meta.get("sends").and_then(Value::as_array) {
                    next.extend(
                        sends
                            .iter()
                            .filter_map(|s| s.get("node").and_then(Value::as_str))
                            .map(str::to_owned),
                    );
                }
                checkpoints.push(Checkpoint {
                    version: entry.seq,
                    step: meta.get("step").and_then(Value::as_u64).unwrap_or(0),
                    run_id: entry.run_id.clone(),
                    nodes: names(meta.get("nodes")).unwrap_or_default(),
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
        let lease = self
            .store
            .lease(thread, &self.worker, self.lease_ttl)
            .await?;
        let result = async {
            let mut handle = self.store.thread::<S>(thread).await?;
            let position = self.position(thread).await?;
            let mut run = Run::new(
                &self.graph,
                RunConfig {
                    run_id: position.run_id.clone(),
                    ..self.config.clone()
                },
                None,
            );
            run.resume_at(position.step + 1, vec![at], vec![None]);
            let active = [at];
            let mut routed = None;
            handle.stage(update, |state: &S| {
                let route = self.graph.route(state, &active);
                let meta = match &route {
                    Ok((next, inputs)) => step_meta(&run, &active, next, inputs),
                    Err(_) => step_meta(&run, &active, &[], &[]),
                };
                routed = Some(route);
                meta
            })?;
            if let Some(Err(kind)) = routed {
                return Err(DurableError::Run(
                    run.fail(kind, Arc::new(handle.into_state())),
                ));
            }
            handle.flush().await?;
            Ok::<_, DurableError<S>>(())
        }
        .await;
        let released = lease.release().await;
        result?;
        released?;
        self.status(thread).await
    }

    /// Runs steps until the end, a suspension or a failure, committing as the durability mode
    /// says.
    async fn drive(
        &self,
        run: &mut Run<S, K>,
        mut handle: Thread<S, B>,
        lease: &Lease<B>,
        journal: StepJournal,
        mut done: BTreeMap<usize, Value>,
    ) -> Result<Outcome<S>, DurableError<S>> {
        let journal = Arc::new(journal);
        let thread_id = handle.id().to_owned();
        let mut lease = lease.clone();
        loop {
            let state = handle.shared_state();
            // The journal of the step's effects: the thread, for the step's duration.
            let writer = Arc::new(AsyncMutex::new(None::<Thread<S, B>>));
            let step_journal = Arc::new(LiveJournal {
                journal: Arc::clone(&journal),
                writer: Arc::clone(&writer),
                run_id: run.run_id.to_string(),
            });
            let next_step = run.step + 1;
            let mut keep = std::mem::take(&mut done);
            let begun = run.begin_with(&state, None, |index, _node| Setup {
                scope: Some(Arc::new(Scope::new(
                    Arc::clone(&step_journal) as Arc<dyn Journal>,
                    format!("{next_step}.{index}"),
                ))),
                done: keep
                    .remove(&index)
                    .and_then(|v| serde_json::from_value::<S::Update>(v).ok())
                    .map(NodeOutput::from),
            });
            drop(state);
            let tasks = match begun {
                Ok(Some(tasks)) => tasks,
                Ok(None) => {
                    let execution = execution_update(handle.state(), &thread_id, |e| {
                        e.insert("status".into(), json!("completed"));
                    });
                    if let Some(execution) = execution {
                        let meta =
                            run_meta(&run.run_id, None, json!({"entry": "end", "step": run.step}));
                        handle.stage(execution, |_| meta)?;
                    }
                    handle.flush().await?;
                    return Ok(Outcome::Finished {
                        version: handle.version(),
                        state: handle.into_state(),
                    });
                }
                Err(kind) => {
                    handle.flush().await?;
                    return Err(DurableError::Run(
                        run.fail(kind, Arc::new(handle.into_state())),
                    ));
                }
            };
            // The nodes run; meanwhile the lease is renewed, and (Async) the last step is
            // appended, by the thread's handle lent to the effects' journal.
            *writer.lock().await = Some(handle);
            let in_background = self.durability == Durability::Async;
            let results = {
                let work = async {
                    let flush = async {
                        if in_background {
                            if let Some(h) = writer.lock().await.as_mut() {
                                h.flush().await?;
                            }
                        }
                        Ok::<_, StoreError>(())
                    };
                    let (flushed, results) = futures_util::future::join(flush, tasks).await;
                    flushed.map(|()| results)
                };
                with_heartbeat(work, &mut lease, self.lease_ttl).await?
            };
            handle = writer
                .lock()
                .await
                .take()
                .expect("the handle comes back after the step");
            // Interrupts end the step suspended; the finished nodes' outputs are kept.
            let step_nodes = run.graph().names(run.active());
            let (results, interrupts) = split_interrupts(results, run.step, &step_nodes);
            if !interrupts.is_empty() {
                let mut kept = Map::new();
                if results.len() > 1 {
                    for (index, result) in results.iter().enumerate() {
                        if let Some(Ok(output)) = result {
                            if let Some(update) = output_json::<S>(output) {
                                kept.insert(index.to_string(), update);
                            }
                        }
                    }
                }
                let meta = run_meta(
                    &run.run_id,
                    None,
                    json!({"entry": "suspend", "step": run.step, "interrupts": interrupts, "done": kept}),
                );
                let first = &interrupts[0];
                let execution = execution_update(handle.state(), &thread_id, |e| {
                    e.insert("current_node".into(), Value::String(first.node.clone()));
                    e.insert("status".into(), json!("interrupted_before"));
                    e.insert("interrupted_node".into(), Value::String(first.node.clone()));
                    e.insert(
                        "interrupt_reason".into(),
                        Value::String(format!("interrupt {}", first.id)),
                    );
                    e.insert("interrupt_data".into(), json!({"interrupts": interrupts}));
                });
                match execution {
                    Some(execution) => handle.merge(execution, meta).await?,
                    None => handle.merge((), meta).await?,
                };
                return Ok(Outcome::Suspended {
                    version: handle.version(),
                    state: handle.into_state(),
                    interrupts,
                });
            }
            let mut results: Vec<_> = results.into_iter().flatten().collect();
            let results = if results.len() == 1 {
                Results::One(results.pop().expect("one result"))
            } else {
                Results::Many(results)
            };
            let updates = match run.collect(results, None) {
                Ok(updates) => updates,
                Err(kind) => return Err(self.failed(run, kind, handle).await),
            };
            // A field two nodes wrote that cannot take both: the run's own error, naming both.
            if let Err(kind) = run.graph().check_parallel(run.active(), &updates) {
                return Err(self.failed(run, kind, handle).await);
            }
            let active = run.active().to_vec();
            let mut routed = None;
            let describe = |state: &S| {
                let route = run.graph().route(state, &active);
                let meta = match &route {
                    Ok((next, inputs)) => step_meta(run, &active, next, inputs),
                    Err(_) => step_meta(run, &active, &[], &[]),
                };
                routed = Some(route);
                meta
            };
            // The state's `ExecutionState`, if it has one, follows the run (as AgentFlow's).
            let names = run.graph().names(&active);
            let step = run.step;
            let execution = execution_update(handle.state(), &thread_id, |e| {
                e.insert("current_node".into(), Value::String(names.join(",")));
                e.insert("step".into(), json!(step));
                e.insert("status".into(), json!("running"));
                for key in ["interrupted_node", "interrupt_reason", "interrupt_data"] {
                    e.insert(key.into(), Value::Null);
                }
            });
            let mut outputs: Vec<NodeOutput<S::Update>> = updates
                .into_iter()
                .map(|u| u.map_or(NodeOutput::Nothing, NodeOutput::from))
                .collect();
            let staged = if outputs.len() == 1 {
                let output = outputs.pop().expect("one output");
                match execution {
                    Some(execution) => handle.stage(vec![output, execution.into()], describe),
                    None => handle.stage(output, describe),
                }
            } else {
                outputs.extend(execution.map(NodeOutput::from));
                handle.stage_parallel(outputs, FanIn::Strict, describe)
            };
            if let Err(error) = staged {
                let kind = RunErrorKind::Merge {
                    nodes: run.graph().names(&active),
                    error: Box::new(match error {
                        StoreError::Merge(error) => error,
                        other => return Err(other.into()),
                    }),
                };
                return Err(self.failed(run, kind, handle).await);
            }
            let (next, inputs) = match routed.expect("the step was described") {
                Ok(route) => route,
                Err(kind) => return Err(self.failed(run, kind, handle).await),
            };
            if self.durability == Durability::Sync {
                handle.flush().await?;
            }
            let state = handle.shared_state();
            run.advance(&state, next, inputs, None);
            drop(state);
        }
    }

    /// Commits what is staged and reports `kind`, with the state at the failure.
    async fn failed(
        &self,
        run: &Run<S, K>,
        kind: RunErrorKind,
        mut handle: Thread<S, B>,
    ) -> DurableError<S> {
        if let Err(error) = handle.flush().await {
            return error.into();
        }
        // The failure is journaled (with the state's `ExecutionState` marked failed, if it has
        // one): a resume runs the step again, and answers it failed on may be given anew.
        // The error is described before the state it carries is taken out of the handle.
        let error = RunError::new(kind, run.step, ());
        let meta = run_meta(
            &run.run_id,
            None,
            json!({"entry": "failed", "step": run.step, "category": error.category(), "error": error.to_string()}),
        );
        let message = error.to_string();
        let execution = execution_update(handle.state(), handle.id(), |e| {
            e.insert("status".into(), json!("error"));
            let mut internal = e
                .get("internal_data")
                .and_then(Value::as_object)
                .cloned()
                .unwrap_or_default();
            internal.insert("error".into(), Value::String(message));
            e.insert("internal_data".into(), Value::Object(internal));
        });
        let written = match execution {
            Some(execution) => handle.merge(execution, meta).await,
            None => handle.merge((), meta).await,
        };
        if let Err(error) = written {
            return error.into();
        }
        DurableError::Run(error.with_state(handle.into_state()))
    }

    /// Reads where the thread's run stands from the newest entries of its journal.
    async fn position(&self, thread: &str) -> Result<Position, DurableError<S>> {
        let mut position = Position::default();
        let mut before: Option<u64> = None;
        let mut suspensions: Vec<(u64, Value)> = Vec::new();
        'pages: loop {
            let mut query = HistoryQuery::newest(64);
            if let Some(b) = before {
                query = query.before(b);
            }
            let page = self.store.history(thread, query).await?;
            if page.is_empty() {
                break;
            }
            for entry in &page {
                before = Some(entry.seq);
                let Some(meta) = entry.extra.get(META_KEY) else {
                    continue;
                };
                let bad = |reason: &str| DurableError::Journal {
                    thread: thread.to_owned(),
                    seq: entry.seq,
                    reason: reason.to_owned(),
                };
                match meta.get("entry").and_then(Value::as_str) {
                    Some("step") | Some("input") => {
                        position.seq = entry.seq;
                        position.started = true;
                        position.step = meta
                            .get("step")
                            .and_then(Value::as_u64)
                            .ok_or_else(|| bad("a step without its number"))?;
                        position.run_id = entry.run_id.clone();
                        position.next = names(meta.get("next"))
                            .ok_or_else(|| bad("a step without its next nodes"))?;
                        if let Some(sends) = meta.get("sends").and_then(Value::as_array) {
                            for send in sends {
                                let node = send
                                    .get("node")
                                    .and_then(Value::as_str)
                                    .ok_or_else(|| bad("a `Send` without its node"))?;
                                position.sends.push((
                                    node.to_owned(),
                                    send.get("input").cloned().unwrap_or(Value::Null),
                                ));
                            }
                        }
                        break 'pages;
                    }
                    Some("effect") => {
                        if let (Some(key), Some(name)) = (
                            meta.get("key").and_then(Value::as_str),
                            meta.get("name").and_then(Value::as_str),
                        ) {
                            position.effects.entry(key.to_owned()).or_insert((
                                name.to_owned(),
                                meta.get("value").cloned().unwrap_or(Value::Null),
                            ));
                        }
                    }
                    Some("answers") => {
                        if let Some(answers) = meta.get("answers").and_then(Value::as_object) {
                            for (id, value) in answers {
                                position
                                    .answers
                                    .entry(id.clone())
                                    .or_insert_with(|| value.clone());
                            }
                        }
                    }
                    Some("suspend") => suspensions.push((entry.seq, meta.clone())),
                    // A failure newer than every answer: the answers may be given anew.
                    Some("failed") if position.answers.is_empty() => position.failed_last = true,
                    _ => {}
                }
                if position.run_id.is_none() {
                    position.run_id = entry.run_id.clone();
                }
            }
            if page.len() < 64 {
                break;
            }
        }
        // The newest suspension holds the step's interrupts; the outputs kept by every one.
        if let Some((seq, newest)) = suspensions.first() {
            let interrupts: Vec<Interrupt> =
                serde_json::from_value(newest.get("interrupts").cloned().unwrap_or(Value::Null))
                    .map_err(|e| DurableError::Journal {
                        thread: thread.to_owned(),
                        seq: *seq,
                        reason: format!("its interrupts do not read: {e}"),
                    })?;
            let mut done = BTreeMap::new();
            for (_, suspension) in suspensions.iter().rev() {
                if let Some(kept) = suspension.get("done").and_then(Value::as_object) {
                    for (index, update) in kept {
                        if let Ok(index) = index.parse::<usize>() {
                            done.insert(index, update.clone());
                        }
                    }
                }
            }
            position.suspended = Some(Suspension { interrupts, done });
        }
        Ok(position)
    }
}

/// Releases the lease after a run (whatever its result), keeping the run's result.
async fn finish<S, B: Backend>(
    lease: Lease<B>,
    result: Result<Outcome<S>, DurableError<S>>,
) -> Result<Outcome<S>, DurableError<S>> {
    let released = lease.release().await;
    let outcome = result?;
    released?;
    Ok(outcome)
}

/// Runs `work` while renewing `lease` every third of `ttl`; a failed renewal stops the work
/// (dropping it cancels the step's nodes).
async fn with_heartbeat<T, B: Backend>(
    work: impl Future<Output = Result<T, StoreError>>,
    lease: &mut Lease<B>,
    ttl: Duration,
) -> Result<T, StoreError> {
    let beat = async {
        loop {
            tokio::time::sleep(ttl / 3).await;
            lease.renew().await?;
        }
    };
    futures_util::pin_mut!(work);
    futures_util::pin_mut!(beat);
    match futures_util::future::select(work, beat).await {
        futures_util::future::Either::Left((result, _)) => result,
        futures_util::future::Either::Right((Err(error), _)) => Err(error),
        futures_util::future::Either::Right((Ok(()), _)) => unreachable!("the heartbeat loops"),
    }
}

/// A step's results in node order, `None` in place of a node that asked a question, and the
/// questions.
#[allow(clippy::type_complexity)]
fn split_interrupts<U>(
    results: Results<U>,
    step: u64,
    nodes: &[String],
) -> (Vec<Option<crate::run::NodeResult<U>>>, Vec<Interrupt>) {
    let mut interrupts = Vec::new();
    let mut take = |(index, result): (usize, crate::run::NodeResult<U>)| match result {
        Err(error) => match error.downcast::<Interrupted>() {
            Ok(asked) => {
                let mut metadata = Map::new();
                for segment in asked.task.split('/') {
                    if let Some(n) = segment
                        .strip_prefix('i')
                        .and_then(|n| n.parse::<u64>().ok())
                    {
                        metadata.insert("fan_out_index".into(), json!(n));
                    } else if let Some(name) = segment.strip_prefix("b:") {
                        metadata.insert("branch_name".into(), json!(name));
                    }
                }
                interrupts.push(Interrupt {
                    id: asked.id,
                    node: asked.node,
                    step_node: nodes.get(index).cloned().unwrap_or_default(),
                    step,
                    payload: asked.payload,
                    metadata,
                });
                None
            }
            Err(error) => Some(Err(error)),
        },
        ok => Some(ok),
    };
    let results = match results {
        Results::One(r) => vec![take((0, r))],
        Results::Many(rs) => rs.into_iter().enumerate().map(take).collect(),
    };
    (results, interrupts)
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

/// A finished node's output as the JSON of its update (kept across a suspension).
fn output_json<S: DurableState>(output: &NodeOutput<S::Update>) -> Option<Value> {
    let update = output.clone().into_update(S::compose).ok()?;
    serde_json::to_value(update.unwrap_or_default()).ok()
}

fn names(value: Option<&Value>) -> Option<Vec<String>> {
    value?
        .as_array()?
        .iter()
        .map(|v| v.as_str().map(str::to_owned))
        .collect()
}

fn run_meta(run_id: &str, node: Option<&str>, entry: Value) -> StepMeta {
    let mut meta = StepMeta::default().run_id(run_id).with(META_KEY, entry);
    meta.node = node.map(str::to_owned);
    meta
}

fn step_meta<S: DurableState, K: NodeKey>(
    run: &Run<S, K>,
    active: &[usize],
    next: &[usize],
    inputs: &[Option<Arc<S>>],
) -> StepMeta {
    let graph = run.graph();
    let nodes = graph.names(active);
    let mut plain = Vec::new();
    let mut sends = Vec::new();
    for (&at, input) in next.iter().zip(inputs) {
        let name = graph.names(&[at]).remove(0);
        match input {
            None => plain.push(Value::String(name)),
            Some(input) => sends.push(json!({"node": name, "input": serde_json::to_value(&**input).unwrap_or(Value::Null)})),
        }
    }
    let mut entry = json!({"entry": "step", "step": run.step, "nodes": nodes, "next": plain});
    if !sends.is_empty() {
        entry["sends"] = Value::Array(sends);
    }
    run_meta(&run.run_id, Some(&nodes.join(",")), entry)
}

/// Where a thread's run stands, read from its journal.
#[derive(Debug, Default)]
struct Position {
    /// Whether a run was ever started on the thread (its journal holds an input or a step).
    started: bool,
    /// Whether the step in flight failed after its last answers were given.
    failed_last: bool,
    /// The entry of the last committed step.
    seq: u64,
    step: u64,
    run_id: Option<String>,
    next: Vec<String>,
    sends: Vec<(String, Value)>,
    effects: HashMap<String, (String, Value)>,
    answers: Map<String, Value>,
    suspended: Option<Suspension>,
}

#[derive(Debug)]
struct Suspension {
    interrupts: Vec<Interrupt>,
    done: BTreeMap<usize, Value>,
}

/// The step in flight's recorded effects and answers.
struct StepJournal {
    effects: Mutex<HashMap<String, (String, Value)>>,
    answers: Map<String, Value>,
}

impl StepJournal {
    fn new(effects: HashMap<String, (String, Value)>, answers: Map<String, Value>) -> Self {
        StepJournal {
            effects: Mutex::new(effects),
            answers,
        }
    }
}

/// The journal a step's nodes see: the recorded effects, and the thread to record new ones.
struct LiveJournal<S, B> {
    journal: Arc<StepJournal>,
    writer: Arc<AsyncMutex<Option<Thread<S, B>>>>,
    run_id: String,
}

impl<S: DurableState, B: Backend> Journal for LiveJournal<S, B> {
    fn recorded(&self, key: &str) -> Option<(String, Value)> {
        self.journal
            .effects
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(key)
            .cloned()
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
            let meta = run_meta(
                &self.run_id,
                None,
                json!({"entry": "effect", "step": step, "key": key, "name": name, "value": value}),
            );
            let mut writer = self.writer.lock().await;
            let handle = writer.as_mut().ok_or("the run's thread is not open")?;
            handle.merge((), meta).await?;
            self.journal
                .effects
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .insert(key, (name, value));
            Ok(())
        })
    }

    fn answer(&self, id: &str) -> Option<Value> {
        self.journal.answers.get(id).cloned()
    }
}
