//! Records a layer above the store keeps beside its threads, in the same database (a server's
//! runs and its threads' bookkeeping): JSON documents by kind and id, each optionally tied to a
//! thread id, written whole.
//!
//! The store does not read a record's JSON: its type, and the version of that type, are the
//! owner's (`agentstate-server`'s run record is one serde-tagged, versioned type). The table,
//! `agentstate_records`, is created by the first record operation on an SQLite database (one
//! that keeps no record has none) and when a PostgreSQL store connects; it is not part of the
//! threads' tables' version, and deleting a thread does not delete its records.
//!
//! Beside the records, numbered event logs (a run's streamed events, so that any process on
//! the database can replay and follow them): [`Store::append_events`], [`Store::events`],
//! [`Store::delete_events`], in the table `agentstate_events` (`log`, `seq`, `body`), created
//! with the records table.

use crate::backend::Backend;
use crate::error::StoreError;
use crate::store::Store;
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::future::Future;

/// A record's row: what a [`RecordBackend`] moves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordRow {
    /// What it is (`"run"`, say): records of different kinds may share ids.
    pub kind: String,
    /// Its id, unique within its kind.
    pub id: String,
    /// The thread it belongs to, if any (to list a thread's records).
    pub thread: Option<String>,
    /// Its JSON text.
    pub body: String,
    /// When it was first put, in milliseconds since the Unix epoch.
    pub created_ms: i64,
}

/// An entry of an event log ([`Store::events`]): its number in the log and its JSON text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventRow {
    /// Its number in its log (the first event is 0).
    pub seq: u64,
    /// Its JSON text.
    pub body: String,
}

/// A run taken from the run queue ([`RecordBackend::claim_run`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimedRun {
    /// The run's id.
    pub run: String,
    /// Its thread.
    pub thread: String,
    /// Which attempt this is (1 for the first claim).
    pub attempt: u32,
}

/// What a sweep of the run queue did ([`RecordBackend::sweep_runs`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Swept {
    /// The runs put back in the queue (their workers stopped: their threads' leases expired).
    pub requeued: Vec<ClaimedRun>,
    /// The runs taken out of the queue because their attempts were used up (each with its
    /// last attempt): their workers stopped each time.
    pub exhausted: Vec<ClaimedRun>,
    /// The runs taken out of the queue that were cancelled while their worker was stopping.
    pub cancelled: Vec<ClaimedRun>,
}

/// A notice of the run queue ([`RecordBackend::listen_runs`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunNotice {
    /// A run can be claimed (a new one, one put back, or a thread freed).
    Ready,
    /// Run `0`'s events were appended to, or it left the queue (it ended): a stream that
    /// follows it from another server reads again.
    Changed(String),
    /// Run `run` was cancelled: its worker stops it (`rollback`: and takes its thread back to
    /// where it stood before the run).
    Cancel {
        /// The run's id.
        run: String,
        /// Whether what the run did is to be undone.
        rollback: bool,
    },
}

fn no_queue(doing: &str) -> StoreError {
    StoreError::Backend {
        backend: "this backend",
        doing: doing.to_owned(),
        source: "it keeps no run queue (runs are carried out by the process that creates them; the queue is PostgreSQL's)".into(),
    }
}

/// A backend that keeps records beside its threads (implemented by `Sqlite`, `Postgres` and
/// `AnyBackend`).
pub trait RecordBackend: Backend {
    /// Inserts or replaces the record `(row.kind, row.id)`; a replaced record keeps its
    /// `created_ms`.
    fn put_record(&self, row: RecordRow) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// The record `(kind, id)`, if there is one.
    fn get_record(
        &self,
        kind: &str,
        id: &str,
    ) -> impl Future<Output = Result<Option<RecordRow>, StoreError>> + Send;

    /// The records of `kind` (those of `thread` only, if given), oldest first (by creation,
    /// then id).
    fn list_records(
        &self,
        kind: &str,
        thread: Option<&str>,
    ) -> impl Future<Output = Result<Vec<RecordRow>, StoreError>> + Send;

    /// Deletes the record `(kind, id)`; false if there was none.
    fn delete_record(
        &self,
        kind: &str,
        id: &str,
    ) -> impl Future<Output = Result<bool, StoreError>> + Send;

    /// Appends `bodies` to event log `log`, numbered from `first`; an event whose number is
    /// already in the log is left as it is (appending a batch again changes nothing).
    fn append_events(
        &self,
        log: &str,
        first: u64,
        bodies: Vec<String>,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// The events of log `log` numbered `from` and later, in order, at most `limit`.
    fn list_events(
        &self,
        log: &str,
        from: u64,
        limit: usize,
    ) -> impl Future<Output = Result<Vec<EventRow>, StoreError>> + Send;

    /// Deletes event log `log`; returns how many events it had.
    fn delete_events(&self, log: &str) -> impl Future<Output = Result<u64, StoreError>> + Send;

    /// Whether it keeps a run queue that workers in several processes claim runs from (the
    /// methods below; PostgreSQL's: `FOR UPDATE SKIP LOCKED`, `LISTEN/NOTIFY`). Without one
    /// (SQLite), they fail and runs are carried out where they are created.
    fn has_run_queue(&self) -> bool {
        false
    }

    /// Puts run `run` of thread `thread` in the queue, pending, and wakes the workers, unless
    /// the thread has a run in the queue already (pending or running): then `false`, and
    /// nothing is queued. Checked and queued at once, whichever process asks (the
    /// `reject` multitask strategy: of two runs asked at once on an idle thread, one is
    /// queued).
    fn enqueue_run_alone(
        &self,
        run: &str,
        thread: &str,
    ) -> impl Future<Output = Result<bool, StoreError>> + Send {
        let _ = (run, thread);
        async { Err(no_queue("queueing a run")) }
    }

    /// Puts run `run` of thread `thread` in the queue, pending, and wakes the workers.
    fn enqueue_run(
        &self,
        run: &str,
        thread: &str,
    ) -> impl Future<Output = Result<(), StoreError>> + Send {
        let _ = (run, thread);
        async { Err(no_queue("queueing a run")) }
    }

    /// Takes the oldest pending run whose thread runs nothing and has no older pending run,
    /// for worker `owner`, unless it was attempted `max_attempts` times; `None` if there is
    /// none. Never two running runs of one thread, whatever the number of claimers.
    fn claim_run(
        &self,
        owner: &str,
        max_attempts: u32,
    ) -> impl Future<Output = Result<Option<ClaimedRun>, StoreError>> + Send {
        let _ = (owner, max_attempts);
        async { Err(no_queue("claiming a run")) }
    }

    /// Takes run `run` out of the queue (it ended); wakes the workers (its thread is free).
    fn finish_run(&self, run: &str) -> impl Future<Output = Result<(), StoreError>> + Send {
        let _ = run;
        async { Err(no_queue("taking a run out of the queue")) }
    }

    /// Puts run `run`, claimed by `owner`, back in the queue (a worker that stops gracefully,
    /// having stopped the run), this attempt not counted, and revokes its thread's lease in the
    /// same statement; wakes the workers.
    fn release_run(
        &self,
        run: &str,
        owner: &str,
    ) -> impl Future<Output = Result<(), StoreError>> + Send {
        let _ = (run, owner);
        async { Err(no_queue("putting a run back in the queue")) }
    }

    /// Cancels run `run`: a pending run leaves the queue (`Some(false)`), a running one stays
    /// and its worker is told to stop it (`Some(true)`), and whether to undo what it did
    /// (`rollback`, in the same notice: nothing the worker writes meanwhile can lose it);
    /// `None` if it is not queued.
    fn cancel_run(
        &self,
        run: &str,
        rollback: bool,
    ) -> impl Future<Output = Result<Option<bool>, StoreError>> + Send {
        let _ = (run, rollback);
        async { Err(no_queue("cancelling a queued run")) }
    }

    /// Puts back in the queue every running run claimed more than `grace` ago whose thread's
    /// lease is not live (its worker stopped: a live run renews its lease, so a long node is
    /// never swept); one that used `max_attempts` attempts leaves the queue instead.
    fn sweep_runs(
        &self,
        grace: std::time::Duration,
        max_attempts: u32,
    ) -> impl Future<Output = Result<Swept, StoreError>> + Send {
        let _ = (grace, max_attempts);
        async { Err(no_queue("sweeping the run queue")) }
    }

    /// The queue's notices, as they come, on a connection of their own (`LISTEN`).
    fn listen_runs(
        &self,
    ) -> impl Future<Output = Result<tokio::sync::mpsc::UnboundedReceiver<RunNotice>, StoreError>> + Send
    {
        async { Err(no_queue("listening to the run queue")) }
    }
}

impl<B: RecordBackend> Store<B> {
    /// Puts `value` as record `(kind, id)` (replacing it), tied to `thread` if given.
    ///
    /// ```
    /// use agentstate_store::SqliteStore;
    ///
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let store = SqliteStore::open_in_memory()?;
    /// store.put_record("run", "r-1", Some("t-1"), &serde_json::json!({"status": "pending"})).await?;
    /// store.put_record("run", "r-1", Some("t-1"), &serde_json::json!({"status": "success"})).await?;
    /// let run: Option<serde_json::Value> = store.record("run", "r-1").await?;
    /// assert_eq!(run.unwrap()["status"], "success");
    /// assert_eq!(store.records::<serde_json::Value>("run", Some("t-1")).await?.len(), 1);
    /// assert!(store.delete_record("run", "r-1").await?);
    /// # Ok::<(), agentstate_store::StoreError>(())
    /// # }).unwrap();
    /// ```
    pub async fn put_record<T: Serialize>(
        &self,
        kind: &str,
        id: &str,
        thread: Option<&str>,
        value: &T,
    ) -> Result<(), StoreError> {
        let body = serde_json::to_string(value).map_err(|e| StoreError::Record {
            kind: kind.to_owned(),
            id: id.to_owned(),
            reason: e.to_string(),
        })?;
        self.backend()
            .put_record(RecordRow {
                kind: kind.to_owned(),
                id: id.to_owned(),
                thread: thread.map(str::to_owned),
                body,
                created_ms: crate::record::now_ms(),
            })
            .await
    }

    /// The record `(kind, id)` read as a `T`, if there is one.
    pub async fn record<T: DeserializeOwned>(
        &self,
        kind: &str,
        id: &str,
    ) -> Result<Option<T>, StoreError> {
        match self.backend().get_record(kind, id).await? {
            Some(row) => read(&row).map(Some),
            None => Ok(None),
        }
    }

    /// The records of `kind` (of `thread` only, if given), oldest first, each read as a `T`.
    pub async fn records<T: DeserializeOwned>(
        &self,
        kind: &str,
        thread: Option<&str>,
    ) -> Result<Vec<T>, StoreError> {
        let rows = self.backend().list_records(kind, thread).await?;
        rows.iter().map(read).collect()
    }

    /// Deletes the record `(kind, id)`; false if there was none.
    pub async fn delete_record(&self, kind: &str, id: &str) -> Result<bool, StoreError> {
        self.backend().delete_record(kind, id).await
    }
}

impl<B: RecordBackend> Store<B> {
    /// Appends `events` to event log `log` (a run's id, say), numbered from `first`: each is
    /// written once (a number already in the log keeps its event), so a writer that retries a
    /// batch, or two that write the same events, leave one copy.
    ///
    /// ```
    /// use agentstate_store::SqliteStore;
    ///
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let store = SqliteStore::open_in_memory()?;
    /// store.append_events("run-1", 0, &["metadata", "values"]).await?;
    /// store.append_events("run-1", 1, &["values", "end"]).await?;
    /// let later: Vec<(u64, String)> = store.events("run-1", 1, 10).await?;
    /// assert_eq!(later, [(1, "values".to_owned()), (2, "end".to_owned())]);
    /// assert_eq!(store.delete_events("run-1").await?, 3);
    /// # Ok::<(), agentstate_store::StoreError>(())
    /// # }).unwrap();
    /// ```
    pub async fn append_events<T: Serialize>(
        &self,
        log: &str,
        first: u64,
        events: &[T],
    ) -> Result<(), StoreError> {
        let bodies = events
            .iter()
            .enumerate()
            .map(|(i, event)| {
                serde_json::to_string(event).map_err(|e| StoreError::Record {
                    kind: "event".to_owned(),
                    id: format!("{log}/{}", first + i as u64),
                    reason: e.to_string(),
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        if bodies.is_empty() {
            return Ok(());
        }
        self.backend().append_events(log, first, bodies).await
    }

    /// The events of log `log` numbered `from` and later, at most `limit`, each with its
    /// number and read as a `T`.
    pub async fn events<T: DeserializeOwned>(
        &self,
        log: &str,
        from: u64,
        limit: usize,
    ) -> Result<Vec<(u64, T)>, StoreError> {
        let rows = self.backend().list_events(log, from, limit).await?;
        rows.iter()
            .map(|row| {
                serde_json::from_str(&row.body)
                    .map(|event| (row.seq, event))
                    .map_err(|e| StoreError::Record {
                        kind: "event".to_owned(),
                        id: format!("{log}/{}", row.seq),
                        reason: e.to_string(),
                    })
            })
            .collect()
    }

    /// Deletes event log `log`; returns how many events it had.
    pub async fn delete_events(&self, log: &str) -> Result<u64, StoreError> {
        self.backend().delete_events(log).await
    }
}

fn read<T: DeserializeOwned>(row: &RecordRow) -> Result<T, StoreError> {
    serde_json::from_str(&row.body).map_err(|e| StoreError::Record {
        kind: row.kind.clone(),
        id: row.id.clone(),
        reason: e.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use crate::{RecordBackend, Store};
    use serde_json::{json, Value};

    /// Puts, replaces, lists, reads and deletes records on `store`; `reopen` gives a second
    /// store on the same database (the records outlive the first).
    async fn records_behave<B: RecordBackend>(store: Store<B>, reopen: impl FnOnce() -> Store<B>) {
        store
            .put_record("run", "a", Some("t1"), &json!({"n": 1}))
            .await
            .unwrap();
        store
            .put_record("run", "b", Some("t2"), &json!({"n": 2}))
            .await
            .unwrap();
        store
            .put_record("thread", "a", None, &json!({"n": 3}))
            .await
            .unwrap();
        drop(store);
        let store = reopen();
        let row = |store: &Store<B>| {
            let store = store.clone();
            async move {
                store
                    .backend()
                    .get_record("run", "a")
                    .await
                    .unwrap()
                    .unwrap()
            }
        };
        let before = row(&store).await;
        store
            .put_record("run", "a", Some("t1"), &json!({"n": 4}))
            .await
            .unwrap();
        let after = row(&store).await;
        assert_eq!(
            before.created_ms, after.created_ms,
            "a replaced record keeps its creation"
        );
        assert_eq!(
            serde_json::from_str::<Value>(&after.body).unwrap(),
            json!({"n": 4})
        );
        let t1: Vec<Value> = store.records("run", Some("t1")).await.unwrap();
        assert_eq!(t1, [json!({"n": 4})]);
        let all: Vec<Value> = store.records("run", None).await.unwrap();
        assert_eq!(all.len(), 2);
        assert_eq!(
            store.record::<Value>("thread", "a").await.unwrap(),
            Some(json!({"n": 3}))
        );
        assert_eq!(store.record::<Value>("thread", "b").await.unwrap(), None);
        assert!(store.delete_record("run", "b").await.unwrap());
        assert!(!store.delete_record("run", "b").await.unwrap());
        store.append_events("r", 0, &[1, 2]).await.unwrap();
        // A batch written again, overlapping: each number keeps its first event.
        store.append_events("r", 1, &[20, 3]).await.unwrap();
        store.append_events("other", 0, &[9]).await.unwrap();
        let events: Vec<(u64, u32)> = store.events("r", 0, 100).await.unwrap();
        assert_eq!(events, [(0, 1), (1, 2), (2, 3)]);
        let some: Vec<(u64, u32)> = store.events("r", 1, 1).await.unwrap();
        assert_eq!(some, [(1, 2)]);
        assert_eq!(store.delete_events("r").await.unwrap(), 3);
        assert!(store.events::<u32>("r", 0, 100).await.unwrap().is_empty());
        assert_eq!(
            store.events::<u32>("other", 0, 100).await.unwrap(),
            [(0, 9)]
        );
        let wrong = store.record::<u32>("thread", "a").await.unwrap_err();
        assert_eq!(wrong.category(), "store_corrupt_data");
        assert!(
            wrong
                .to_string()
                .starts_with("thread record `a` does not read"),
            "{wrong}"
        );
    }

    #[cfg(feature = "sqlite")]
    #[tokio::test]
    async fn records_on_sqlite() {
        let dir = std::env::temp_dir().join(format!("agentstate-records-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("records.db");
        let _ = std::fs::remove_file(&path);
        let store = crate::SqliteStore::open(&path).unwrap();
        records_behave(store, || crate::SqliteStore::open(&path).unwrap()).await;
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// The run queue: claims in order per thread, one running run per thread, release,
    /// cancel, and a sweep that puts back only runs whose thread's lease is not live.
    #[cfg(feature = "postgres")]
    async fn queue_behaves(store: &crate::PostgresStore) {
        use crate::{ClaimedRun, RunNotice};
        use std::time::Duration;
        let q = store.backend();
        assert!(q.has_run_queue());
        let mut notices = q.listen_runs().await.unwrap();
        for (run, thread) in [("a1", "ta"), ("a2", "ta"), ("b1", "tb")] {
            q.enqueue_run(run, thread).await.unwrap();
        }
        let notice = tokio::time::timeout(Duration::from_secs(5), notices.recv()).await;
        assert_eq!(notice.unwrap(), Some(RunNotice::Ready));
        // An event log appended to is notified, with its name.
        q.append_events("log-x", 0, vec!["{}".to_owned()])
            .await
            .unwrap();
        let mut changed = None;
        while let Ok(Some(notice)) =
            tokio::time::timeout(Duration::from_secs(5), notices.recv()).await
        {
            if let RunNotice::Changed(log) = notice {
                changed = Some(log);
                break;
            }
        }
        assert_eq!(changed.as_deref(), Some("log-x"));
        // Alone: not on a thread with a run queued, and queued on one without.
        assert!(!q.enqueue_run_alone("a3", "ta").await.unwrap());
        assert!(q.enqueue_run_alone("d1", "td").await.unwrap());
        assert!(!q.enqueue_run_alone("d2", "td").await.unwrap());
        assert_eq!(q.cancel_run("d1", false).await.unwrap(), Some(false));
        let claimed = |run: &str, thread: &str, attempt| ClaimedRun {
            run: run.into(),
            thread: thread.into(),
            attempt,
        };
        assert_eq!(
            q.claim_run("w1", 3).await.unwrap(),
            Some(claimed("a1", "ta", 1))
        );
        // `a2` waits for `a1`, its thread's running run.
        assert_eq!(
            q.claim_run("w2", 3).await.unwrap(),
            Some(claimed("b1", "tb", 1))
        );
        assert_eq!(q.claim_run("w2", 3).await.unwrap(), None);
        q.release_run("a1", "w1").await.unwrap();
        assert_eq!(
            q.claim_run("w2", 3).await.unwrap(),
            Some(claimed("a1", "ta", 1))
        );
        q.finish_run("a1").await.unwrap();
        assert_eq!(
            q.claim_run("w1", 3).await.unwrap(),
            Some(claimed("a2", "ta", 1))
        );
        // `ta`'s lease is live (its worker renews it): never swept; `tb` has no lease.
        store
            .create("ta", agentstate::state::AgentState::default())
            .await
            .unwrap();
        let lease = store
            .lease("ta", "w1", Duration::from_secs(30))
            .await
            .unwrap();
        let swept = q.sweep_runs(Duration::ZERO, 3).await.unwrap();
        assert_eq!(swept.requeued, [claimed("b1", "tb", 1)]);
        assert!(swept.exhausted.is_empty() && swept.cancelled.is_empty());
        lease.release().await.unwrap();
        assert_eq!(q.cancel_run("b1", false).await.unwrap(), Some(false));
        assert_eq!(q.cancel_run("a2", true).await.unwrap(), Some(true));
        let mut cancels = Vec::new();
        while let Ok(Some(notice)) =
            tokio::time::timeout(Duration::from_secs(5), notices.recv()).await
        {
            if let RunNotice::Cancel { run, rollback } = notice {
                cancels.push((run, rollback));
                break;
            }
        }
        assert_eq!(cancels, [("a2".to_owned(), true)]);
        assert_eq!(q.cancel_run("nope", false).await.unwrap(), None);
        let swept = q.sweep_runs(Duration::ZERO, 3).await.unwrap();
        assert_eq!(swept.cancelled, [claimed("a2", "ta", 1)]);
        // Attempts are capped: the third claim's run is taken out when its worker stops.
        q.enqueue_run("c1", "tc").await.unwrap();
        for attempt in 1..=3 {
            assert_eq!(
                q.claim_run("w", 3).await.unwrap(),
                Some(claimed("c1", "tc", attempt))
            );
            let swept = q.sweep_runs(Duration::ZERO, 3).await.unwrap();
            let (back, out) = (swept.requeued.len(), swept.exhausted.len());
            assert_eq!((back, out), if attempt < 3 { (1, 0) } else { (0, 1) });
        }
        assert_eq!(q.claim_run("w", 3).await.unwrap(), None);
    }

    #[cfg(feature = "postgres")]
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn records_on_postgres() {
        use crate::postgres::PostgresOptions;
        let Ok(url) = std::env::var("AGENTSTATE_POSTGRES_URL") else {
            println!("records on PostgreSQL skipped: AGENTSTATE_POSTGRES_URL is not set");
            return;
        };
        let schema = format!("agentstate_records_{}", std::process::id());
        let options = PostgresOptions {
            schema: schema.clone(),
            ..PostgresOptions::default()
        };
        let store = crate::PostgresStore::connect_with(&url, options.clone())
            .await
            .unwrap();
        // A second pool on the same schema, opened while the first is still up.
        let again = crate::PostgresStore::connect_with(&url, options)
            .await
            .unwrap();
        records_behave(store, move || again).await;
        let store = crate::PostgresStore::connect_with(
            &url,
            PostgresOptions {
                schema: schema.clone(),
                ..PostgresOptions::default()
            },
        )
        .await
        .unwrap();
        queue_behaves(&store).await;
        drop(store);
        let (admin, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
            .await
            .unwrap();
        let connection = tokio::spawn(connection);
        admin
            .batch_execute(&format!("DROP SCHEMA IF EXISTS \"{schema}\" CASCADE"))
            .await
            .unwrap();
        drop(admin);
        let _ = connection.await;
    }
}
