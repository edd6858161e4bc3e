//! The server's records in the store's database, the store's backend erased.

use crate::assistant::BoxFuture;
use crate::record::{EventRecord, Record, RunRecord, ThreadRecord, EVENT, RUN, THREAD};
use agentstate_store::{ClaimedRun, RecordBackend, RunNotice, Store, StoreError, Swept};
use std::time::Duration;
use tokio::sync::mpsc::UnboundedReceiver;

/// The records the server reads and writes, on any store that keeps records.
pub(crate) trait Records: Send + Sync + 'static {
    /// Puts `record` (replacing the one of its kind and id; an event is appended to its run's
    /// event log, at its number, unless one is there).
    fn put<'a>(&'a self, record: Record) -> BoxFuture<'a, Result<(), StoreError>>;

    /// Run `id`.
    fn run<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Option<RunRecord>, StoreError>>;

    /// The runs of `thread`, oldest first.
    fn runs<'a>(&'a self, thread: &'a str) -> BoxFuture<'a, Result<Vec<RunRecord>, StoreError>>;

    /// Thread `id`.
    fn thread<'a>(&'a self, id: &'a str)
        -> BoxFuture<'a, Result<Option<ThreadRecord>, StoreError>>;

    /// Every thread, oldest first.
    fn threads(&self) -> BoxFuture<'_, Result<Vec<ThreadRecord>, StoreError>>;

    /// Deletes the record `(kind, id)`.
    fn delete<'a>(&'a self, kind: &'a str, id: &'a str) -> BoxFuture<'a, Result<bool, StoreError>>;

    /// Deletes the store's thread `id` (its state and journal), if there is one.
    fn delete_state<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<bool, StoreError>>;

    /// Appends `events` (numbered from `first`) to run `run`'s event log.
    fn append_events<'a>(
        &'a self,
        run: &'a str,
        first: u64,
        events: Vec<Record>,
    ) -> BoxFuture<'a, Result<(), StoreError>>;

    /// The events of run `run` numbered `from` and later (at most `limit`).
    fn events<'a>(
        &'a self,
        run: &'a str,
        from: u64,
        limit: usize,
    ) -> BoxFuture<'a, Result<Vec<EventRecord>, StoreError>>;

    /// Deletes run `run`'s event log.
    fn delete_events<'a>(&'a self, run: &'a str) -> BoxFuture<'a, Result<u64, StoreError>>;

    /// Whether the database keeps a run queue (PostgreSQL: see
    /// [`RecordBackend::claim_run`](agentstate_store::RecordBackend::claim_run) and the
    /// methods beside it, which the following erase).
    fn has_queue(&self) -> bool;

    /// Queues run `run` of thread `thread`.
    fn enqueue<'a>(
        &'a self,
        run: &'a str,
        thread: &'a str,
    ) -> BoxFuture<'a, Result<(), StoreError>>;

    /// Queues run `run` unless its thread has a run queued (`false`), at once.
    fn enqueue_alone<'a>(
        &'a self,
        run: &'a str,
        thread: &'a str,
    ) -> BoxFuture<'a, Result<bool, StoreError>>;

    /// Claims a run for worker `owner`.
    fn claim<'a>(
        &'a self,
        owner: &'a str,
        max_attempts: u32,
    ) -> BoxFuture<'a, Result<Option<ClaimedRun>, StoreError>>;

    /// Takes run `run` out of the queue.
    fn finish_queued<'a>(&'a self, run: &'a str) -> BoxFuture<'a, Result<(), StoreError>>;

    /// Puts run `run` back in the queue.
    fn release<'a>(&'a self, run: &'a str, owner: &'a str)
        -> BoxFuture<'a, Result<(), StoreError>>;

    /// Cancels queued run `run` (`rollback`: and undoes what it did).
    fn cancel_queued<'a>(
        &'a self,
        run: &'a str,
        rollback: bool,
    ) -> BoxFuture<'a, Result<Option<bool>, StoreError>>;

    /// Sweeps the queue.
    fn sweep(&self, grace: Duration, max_attempts: u32)
        -> BoxFuture<'_, Result<Swept, StoreError>>;

    /// The queue's notices.
    fn listen(&self) -> BoxFuture<'_, Result<UnboundedReceiver<RunNotice>, StoreError>>;

    /// Takes thread `thread`'s lease from whoever holds it (a run cancelled or handed back
    /// by this process: nothing more of it is committed, and the next worker need not wait
    /// for the lease to expire).
    fn revoke_lease<'a>(&'a self, thread: &'a str) -> BoxFuture<'a, Result<(), StoreError>>;
}

fn wrong(kind: &str, id: &str) -> StoreError {
    // A record put under one kind always holds that kind's variant; another is a corrupt row.
    StoreError::Record {
        kind: kind.to_owned(),
        id: id.to_owned(),
        reason: format!("it holds a record of another kind than `{kind}`"),
    }
}

impl<B: RecordBackend> Records for Store<B> {
    fn put<'a>(&'a self, record: Record) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            let (id, thread) = match &record {
                Record::Run(run) => (run.run_id.clone(), Some(run.thread_id.clone())),
                Record::Thread(thread) => (thread.thread_id.clone(), None),
                Record::Event(event) => {
                    let (run, seq) = (event.run_id.clone(), event.seq);
                    return Store::append_events(self, &run, seq, &[record]).await;
                }
            };
            self.put_record(record.kind(), &id, thread.as_deref(), &record)
                .await
        })
    }

    fn run<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Option<RunRecord>, StoreError>> {
        Box::pin(async move {
            match self.record::<Record>(RUN, id).await? {
                None => Ok(None),
                Some(Record::Run(run)) => Ok(Some(run)),
                Some(_) => Err(wrong(RUN, id)),
            }
        })
    }

    fn runs<'a>(&'a self, thread: &'a str) -> BoxFuture<'a, Result<Vec<RunRecord>, StoreError>> {
        Box::pin(async move {
            self.records::<Record>(RUN, Some(thread))
                .await?
                .into_iter()
                .map(|r| match r {
                    Record::Run(run) => Ok(run),
                    Record::Thread(t) => Err(wrong(RUN, &t.thread_id)),
                    Record::Event(e) => Err(wrong(RUN, &e.run_id)),
                })
                .collect()
        })
    }

    fn thread<'a>(
        &'a self,
        id: &'a str,
    ) -> BoxFuture<'a, Result<Option<ThreadRecord>, StoreError>> {
        Box::pin(async move {
            match self.record::<Record>(THREAD, id).await? {
                None => Ok(None),
                Some(Record::Thread(thread)) => Ok(Some(thread)),
                Some(_) => Err(wrong(THREAD, id)),
            }
        })
    }

    fn threads(&self) -> BoxFuture<'_, Result<Vec<ThreadRecord>, StoreError>> {
        Box::pin(async move {
            self.records::<Record>(THREAD, None)
                .await?
                .into_iter()
                .map(|r| match r {
                    Record::Thread(thread) => Ok(thread),
                    Record::Run(run) => Err(wrong(THREAD, &run.run_id)),
                    Record::Event(e) => Err(wrong(THREAD, &e.run_id)),
                })
                .collect()
        })
    }

    fn delete<'a>(&'a self, kind: &'a str, id: &'a str) -> BoxFuture<'a, Result<bool, StoreError>> {
        Box::pin(self.delete_record(kind, id))
    }

    fn delete_state<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<bool, StoreError>> {
        Box::pin(Store::delete(self, id))
    }

    fn append_events<'a>(
        &'a self,
        run: &'a str,
        first: u64,
        events: Vec<Record>,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move { Store::append_events(self, run, first, &events).await })
    }

    fn events<'a>(
        &'a self,
        run: &'a str,
        from: u64,
        limit: usize,
    ) -> BoxFuture<'a, Result<Vec<EventRecord>, StoreError>> {
        Box::pin(async move {
            Store::events::<Record>(self, run, from, limit)
                .await?
                .into_iter()
                .map(|(seq, record)| match record {
                    Record::Event(event) => Ok(event),
                    _ => Err(wrong(EVENT, &format!("{run}/{seq}"))),
                })
                .collect()
        })
    }

    fn delete_events<'a>(&'a self, run: &'a str) -> BoxFuture<'a, Result<u64, StoreError>> {
        Box::pin(Store::delete_events(self, run))
    }

    fn has_queue(&self) -> bool {
        self.backend().has_run_queue()
    }

    /// Queues run `run` of thread `thread`.
    fn enqueue<'a>(
        &'a self,
        run: &'a str,
        thread: &'a str,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(self.backend().enqueue_run(run, thread))
    }

    fn enqueue_alone<'a>(
        &'a self,
        run: &'a str,
        thread: &'a str,
    ) -> BoxFuture<'a, Result<bool, StoreError>> {
        Box::pin(self.backend().enqueue_run_alone(run, thread))
    }

    fn claim<'a>(
        &'a self,
        owner: &'a str,
        max_attempts: u32,
    ) -> BoxFuture<'a, Result<Option<ClaimedRun>, StoreError>> {
        Box::pin(self.backend().claim_run(owner, max_attempts))
    }

    fn finish_queued<'a>(&'a self, run: &'a str) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(self.backend().finish_run(run))
    }

    fn release<'a>(
        &'a self,
        run: &'a str,
        owner: &'a str,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(self.backend().release_run(run, owner))
    }

    fn cancel_queued<'a>(
        &'a self,
        run: &'a str,
        rollback: bool,
    ) -> BoxFuture<'a, Result<Option<bool>, StoreError>> {
        Box::pin(self.backend().cancel_run(run, rollback))
    }

    fn sweep(
        &self,
        grace: Duration,
        max_attempts: u32,
    ) -> BoxFuture<'_, Result<Swept, StoreError>> {
        Box::pin(self.backend().sweep_runs(grace, max_attempts))
    }

    fn listen(&self) -> BoxFuture<'_, Result<UnboundedReceiver<RunNotice>, StoreError>> {
        Box::pin(self.backend().listen_runs())
    }

    fn revoke_lease<'a>(&'a self, thread: &'a str) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            match Store::revoke_lease(self, thread).await {
                Ok(_) | Err(StoreError::ThreadNotFound { .. }) => Ok(()),
                Err(e) => Err(e),
            }
        })
    }
}
