//! The server's records in the store's database, the store's backend erased.

use crate::assistant::BoxFuture;
use crate::record::{Record, RunRecord, ThreadRecord, RUN, THREAD};
use agentstate_store::{RecordBackend, Store, StoreError};

/// The records the server reads and writes, on any store that keeps records.
pub(crate) trait Records: Send + Sync + 'static {
    /// Puts `record` (replacing the one of its kind and id).
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
}
