//! One run per thread: a run takes its thread's lease before any node runs, renews it from
//! the heartbeat while it goes on ([`Heartbeat`]), and releases it when it ends or suspends;
//! clones of one worker are kept apart by [`Running`] too.

use super::begin::{Begin, Begun};
use super::{lock, DurableError, DurableGraph, DurableState, Outcome, RunStatus};
use crate::event::Outbox;
use crate::heartbeat::Heartbeat;
use crate::name::NodeKey;
use agentstate_store::backend::Backend;
use agentstate_store::StoreError;
use std::collections::HashSet;
use std::sync::Mutex;
use std::time::Duration;

impl<S, K, B> DurableGraph<S, K, B>
where
    S: DurableState,
    K: NodeKey,
    B: Backend,
{
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

    /// Every run: takes the lease, opens the thread (warm, or loaded), runs, releases.
    pub(super) async fn execute(
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
}

/// A thread a worker is running, claimed among its clones until dropped.
pub(super) struct Running<'a> {
    running: &'a Mutex<HashSet<String>>,
    thread: String,
}

impl<'a> Running<'a> {
    pub(super) fn claim(
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

/// The error of a run that lost its lease.
pub(super) fn lease_lost(thread: &str, worker: &str) -> StoreError {
    StoreError::LeaseLost {
        thread: thread.to_owned(),
        owner: worker.to_owned(),
        now_held_by: None,
    }
}
