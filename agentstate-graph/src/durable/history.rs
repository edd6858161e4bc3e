//! A thread's run as its journal tells it: where it stands ([`RunStatus`]), its checkpoints
//! (each committed step), the state at one, a fork there, and an update written as if a node
//! had made it (time travel).

use super::commit::step_meta;
use super::lease::Running;
use super::{DurableError, DurableGraph, DurableState};
use crate::effect::Interrupt;
use crate::error::RunError;
use crate::journal::{JournalEntry, Position, ReadError};
use crate::name::NodeKey;
use agentstate::NodeOutput;
use agentstate_store::backend::Backend;
use agentstate_store::HistoryQuery;

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

impl<S, K, B> DurableGraph<S, K, B>
where
    S: DurableState,
    K: NodeKey,
    B: Backend,
{
    /// Where thread `thread`'s run stands, read from its journal.
    pub(super) async fn position(&self, thread: &str) -> Result<Position, DurableError<S>> {
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
