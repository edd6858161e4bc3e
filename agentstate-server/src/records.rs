//! The server's records in the store's database, the store's backend erased.

use crate::assistant::BoxFuture;
use crate::record::{now_ms, EventRecord, Record, RunRecord, ThreadRecord, EVENT, RUN, THREAD};
use agentstate_store::{
    ClaimedRun, EventBatch, RecordBackend, RecordPatch, RecordRow, RecordWrites, RunClaim,
    RunNotice, Store, StoreError, Swept,
};
use serde_json::{Map, Value};
use std::time::Duration;
use tokio::sync::mpsc::UnboundedReceiver;

/// A write of [`Records::write`] and its siblings, made with the others at once.
#[derive(Debug, Clone)]
pub(crate) enum Write {
    /// A record put whole (an event: appended to its run's event log).
    Put(Record),
    /// Thread `0`'s record's members `1` set (its status, say), its others kept: what a run
    /// changes of its thread, without reading it first or undoing what another wrote to it
    /// meanwhile (its metadata).
    Thread(String, Map<String, Value>),
}

impl From<Record> for Write {
    fn from(record: Record) -> Self {
        Write::Put(record)
    }
}

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

    /// The runs not ended (pending or running), oldest first, picked by the database.
    fn open_runs(&self) -> BoxFuture<'_, Result<Vec<RunRecord>, StoreError>>;

    /// Deletes the record `(kind, id)`.
    fn delete<'a>(&'a self, kind: &'a str, id: &'a str) -> BoxFuture<'a, Result<bool, StoreError>>;

    /// Deletes the store's thread `id` (its state and journal), if there is one.
    fn delete_state<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<bool, StoreError>>;

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

    /// Writes `records` (runs, threads, events) in one transaction, fenced by `claim` if
    /// given: `false`, and nothing written, if the worker no longer holds it.
    fn write<'a>(
        &'a self,
        records: Vec<Write>,
        claim: Option<&'a RunClaim>,
    ) -> BoxFuture<'a, Result<bool, StoreError>>;

    /// Queues run `run` of thread `thread` with `records` (its own, its thread's, its first
    /// events), in one transaction; `alone`: unless its thread has a run queued (`false`,
    /// and nothing written).
    fn enqueue<'a>(
        &'a self,
        run: &'a str,
        thread: &'a str,
        alone: bool,
        records: Vec<Write>,
    ) -> BoxFuture<'a, Result<bool, StoreError>>;

    /// Claims a run for worker `owner`.
    fn claim<'a>(
        &'a self,
        owner: &'a str,
        max_attempts: u32,
    ) -> BoxFuture<'a, Result<Option<ClaimedRun>, StoreError>>;

    /// Takes run `run` out of the queue with `records` (its last events, its final record,
    /// its thread's), in one transaction, fenced by `claim` if given (`false`: nothing done).
    fn finish_queued<'a>(
        &'a self,
        run: &'a str,
        records: Vec<Write>,
        claim: Option<&'a RunClaim>,
    ) -> BoxFuture<'a, Result<bool, StoreError>>;

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

/// `records`, read as runs: each must be one.
fn runs_of(records: Vec<Record>) -> Result<Vec<RunRecord>, StoreError> {
    records
        .into_iter()
        .map(|r| match r {
            Record::Run(run) => Ok(run),
            Record::Thread(t) => Err(wrong(RUN, &t.thread_id)),
            Record::Event(e) => Err(wrong(RUN, &e.run_id)),
        })
        .collect()
}

/// `records` as the store writes them together: runs and threads as rows, events as batches
/// (one per run of consecutive numbers), thread changes as patches.
fn writes_of(records: Vec<Write>) -> Result<RecordWrites, StoreError> {
    let mut writes = RecordWrites::default();
    for write in records {
        let record = match write {
            Write::Put(record) => record,
            Write::Thread(id, fields) => {
                writes.patches.push(RecordPatch {
                    kind: THREAD.to_owned(),
                    id,
                    fields: Value::Object(fields).to_string(),
                });
                continue;
            }
        };
        let body = |id: &str| {
            serde_json::to_string(&record).map_err(|e| StoreError::Record {
                kind: record.kind().to_owned(),
                id: id.to_owned(),
                reason: e.to_string(),
            })
        };
        let (id, thread) = match &record {
            Record::Run(run) => (run.run_id.clone(), Some(run.thread_id.clone())),
            Record::Thread(thread) => (thread.thread_id.clone(), None),
            Record::Event(event) => {
                let text = body(&format!("{}/{}", event.run_id, event.seq))?;
                match writes.events.last_mut() {
                    Some(batch)
                        if batch.log == event.run_id
                            && batch.first + batch.bodies.len() as u64 == event.seq =>
                    {
                        batch.bodies.push(text)
                    }
                    _ => writes.events.push(EventBatch {
                        log: event.run_id.clone(),
                        first: event.seq,
                        bodies: vec![text],
                    }),
                }
                continue;
            }
        };
        writes.records.push(RecordRow {
            kind: record.kind().to_owned(),
            body: body(&id)?,
            id,
            thread,
            created_ms: now_ms(),
        });
    }
    Ok(writes)
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
        Box::pin(async move { runs_of(self.records::<Record>(RUN, Some(thread)).await?) })
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

    fn open_runs(&self) -> BoxFuture<'_, Result<Vec<RunRecord>, StoreError>> {
        Box::pin(async move {
            runs_of(
                self.find_records::<Record>(RUN, "status", &["pending", "running"])
                    .await?,
            )
        })
    }

    fn delete<'a>(&'a self, kind: &'a str, id: &'a str) -> BoxFuture<'a, Result<bool, StoreError>> {
        Box::pin(self.delete_record(kind, id))
    }

    fn delete_state<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<bool, StoreError>> {
        Box::pin(Store::delete(self, id))
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

    fn write<'a>(
        &'a self,
        records: Vec<Write>,
        claim: Option<&'a RunClaim>,
    ) -> BoxFuture<'a, Result<bool, StoreError>> {
        Box::pin(async move {
            let writes = writes_of(records)?;
            self.backend().write_records(writes, claim).await
        })
    }

    fn enqueue<'a>(
        &'a self,
        run: &'a str,
        thread: &'a str,
        alone: bool,
        records: Vec<Write>,
    ) -> BoxFuture<'a, Result<bool, StoreError>> {
        Box::pin(async move {
            let writes = writes_of(records)?;
            self.backend().enqueue_run(run, thread, alone, writes).await
        })
    }

    fn claim<'a>(
        &'a self,
        owner: &'a str,
        max_attempts: u32,
    ) -> BoxFuture<'a, Result<Option<ClaimedRun>, StoreError>> {
        Box::pin(self.backend().claim_run(owner, max_attempts))
    }

    fn finish_queued<'a>(
        &'a self,
        run: &'a str,
        records: Vec<Write>,
        claim: Option<&'a RunClaim>,
    ) -> BoxFuture<'a, Result<bool, StoreError>> {
        Box::pin(async move {
            let writes = writes_of(records)?;
            self.backend().finish_run(run, writes, claim).await
        })
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
