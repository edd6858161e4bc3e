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

/// Events appended to one event log in a [`RecordWrites`]: `bodies`, numbered from `first`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EventBatch {
    /// The log (a run's id, say).
    pub log: String,
    /// The number of the first of `bodies`.
    pub first: u64,
    /// The events' JSON texts; one whose number is in the log already is left as it is.
    pub bodies: Vec<String>,
}

/// Records and events written together, in one transaction: all of them or none
/// ([`RecordBackend::write_records`]; with a change to the run queue,
/// [`RecordBackend::enqueue_run`] and [`RecordBackend::finish_run`]).
///
/// ```
/// use agentstate_store::{EventBatch, RecordBackend, RecordRow, RecordWrites, SqliteStore};
///
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// let store = SqliteStore::open_in_memory()?;
/// let row = |kind: &str, id: &str, body: &str| RecordRow {
///     kind: kind.into(), id: id.into(), thread: Some("t-1".into()), body: body.into(), created_ms: 0,
/// };
/// let writes = RecordWrites {
///     records: vec![row("run", "r-1", r#"{"status":"running"}"#), row("thread", "t-1", r#"{"status":"busy"}"#)],
///     events: vec![EventBatch { log: "r-1".into(), first: 0, bodies: vec!["\"metadata\"".into()] }],
///     ..RecordWrites::default()
/// };
/// assert!(store.backend().write_records(writes, None).await?);
/// let run: Option<serde_json::Value> = store.record("run", "r-1").await?;
/// assert_eq!(run.unwrap()["status"], "running");
/// assert_eq!(store.events::<String>("r-1", 0, 10).await?, [(0, "metadata".to_owned())]);
/// # Ok::<(), agentstate_store::StoreError>(())
/// # }).unwrap();
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecordWrites {
    /// Records inserted or replaced (a replaced record keeps its `created_ms`).
    pub records: Vec<RecordRow>,
    /// Records changed in place, after `records`, without being read first.
    pub patches: Vec<RecordPatch>,
    /// Event batches appended.
    pub events: Vec<EventBatch>,
}

impl RecordWrites {
    /// Whether it writes nothing.
    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
            && self.patches.is_empty()
            && self.events.iter().all(|e| e.bodies.is_empty())
    }
}

/// A change to a record in place ([`RecordWrites::patches`]): its JSON object's top-level
/// members named in `fields` set to their values there (a `null` sets `null`), the others
/// kept; nothing if there is no such record. A writer that changes a record's status this way
/// keeps what another wrote to its other members meanwhile, and reads nothing first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordPatch {
    /// The record's kind.
    pub kind: String,
    /// Its id.
    pub id: String,
    /// A JSON object's text: the members to set.
    pub fields: String,
}

impl RecordPatch {
    /// `fields` set on the record's JSON object `body` (a body that is not an object, or
    /// fields that are not one, leave it as it was).
    pub fn apply(&self, body: &str) -> String {
        let (Ok(serde_json::Value::Object(mut record)), Ok(serde_json::Value::Object(fields))) = (
            serde_json::from_str::<serde_json::Value>(body),
            serde_json::from_str::<serde_json::Value>(&self.fields),
        ) else {
            return body.to_owned();
        };
        record.extend(fields);
        serde_json::Value::Object(record).to_string()
    }
}

/// A worker's hold on a run it claimed from the queue ([`RecordBackend::claim_run`]): the
/// writes it fences ([`RecordBackend::write_records`], [`RecordBackend::finish_run`]) are
/// made only while this attempt of the run is still the worker's (running, claimed by
/// `owner`, this attempt), so a worker that was paused past its lease, and whose run was put
/// back and claimed again, writes nothing more (the journal is fenced by the thread's lease
/// in the same way).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunClaim {
    /// The run's id.
    pub run: String,
    /// The worker that claimed it.
    pub owner: String,
    /// The attempt it claimed ([`ClaimedRun::attempt`]).
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
    /// Run `0`'s events were appended to: a stream that follows it from another server reads
    /// them.
    Appended(String),
    /// Run `0` left the queue (it ended): what waits for its end from another server reads
    /// its record.
    Ended(String),
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

    /// The records of `kind` whose JSON object's member `member` is one of the strings
    /// `values`, oldest first (by creation, then id): picked by the database, so that a
    /// reader of a few (a server's unfinished runs) does not read them all.
    fn find_records(
        &self,
        kind: &str,
        member: &str,
        values: &[&str],
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

    /// Makes `writes` in one transaction, fenced by `claim` if given: `false`, and nothing
    /// written, if the claim is no longer held (see [`RunClaim`]; only a backend with a run
    /// queue takes a claim).
    fn write_records(
        &self,
        writes: RecordWrites,
        claim: Option<&RunClaim>,
    ) -> impl Future<Output = Result<bool, StoreError>> + Send;

    /// Whether it keeps a run queue that workers in several processes claim runs from (the
    /// methods below; PostgreSQL's: `FOR UPDATE SKIP LOCKED`, `LISTEN/NOTIFY`). Without one
    /// (SQLite), they fail and runs are carried out where they are created.
    fn has_run_queue(&self) -> bool {
        false
    }

    /// Puts run `run` of thread `thread` in the queue, pending, with `writes` (its records,
    /// its first events), in one transaction, and wakes the workers. `alone`: unless the
    /// thread has a run in the queue already (pending or running): then `false`, and nothing
    /// is queued or written. Checked and queued at once, whichever process asks (the `reject`
    /// multitask strategy: of two runs asked at once on an idle thread, one is queued).
    fn enqueue_run(
        &self,
        run: &str,
        thread: &str,
        alone: bool,
        writes: RecordWrites,
    ) -> impl Future<Output = Result<bool, StoreError>> + Send {
        let _ = (run, thread, alone, writes);
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

    /// Takes run `run` out of the queue (it ended) with `writes` (its last events, its
    /// records), in one transaction, fenced by `claim` if given (`false`, and nothing written
    /// or taken out, if it is no longer held); tells those who wait for the run's end
    /// ([`RunNotice::Ended`]), and wakes the workers if its thread, now free, has a run
    /// pending.
    fn finish_run(
        &self,
        run: &str,
        writes: RecordWrites,
        claim: Option<&RunClaim>,
    ) -> impl Future<Output = Result<bool, StoreError>> + Send {
        let _ = (run, writes, claim);
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

    /// The records of `kind` whose JSON member `member` is one of the strings `values`,
    /// oldest first, each read as a `T` (see [`RecordBackend::find_records`]).
    ///
    /// ```
    /// use agentstate_store::SqliteStore;
    /// use serde_json::{json, Value};
    ///
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let store = SqliteStore::open_in_memory()?;
    /// store.put_record("run", "r-1", None, &json!({"status": "success"})).await?;
    /// store.put_record("run", "r-2", None, &json!({"status": "running"})).await?;
    /// let open: Vec<Value> = store.find_records("run", "status", &["pending", "running"]).await?;
    /// assert_eq!(open, [json!({"status": "running"})]);
    /// # Ok::<(), agentstate_store::StoreError>(())
    /// # }).unwrap();
    /// ```
    pub async fn find_records<T: DeserializeOwned>(
        &self,
        kind: &str,
        member: &str,
        values: &[&str],
    ) -> Result<Vec<T>, StoreError> {
        let rows = self.backend().find_records(kind, member, values).await?;
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
        let n4: Vec<Value> = store.find_records("run", "n", &["4"]).await.unwrap();
        assert!(n4.is_empty(), "a number is not the string `4`");
        store
            .put_record("run", "s", None, &json!({"n": "4", "m": "x"}))
            .await
            .unwrap();
        let found: Vec<Value> = store.find_records("run", "n", &["4", "5"]).await.unwrap();
        assert_eq!(found, [json!({"n": "4", "m": "x"})]);
        assert!(store
            .find_records::<Value>("run", "n", &[])
            .await
            .unwrap()
            .is_empty());
        assert!(store.delete_record("run", "s").await.unwrap());
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
        // Written together: records (one written twice: the last stands) and events of two
        // logs; none of them when one cannot be written.
        let row = |id: &str, n: u32| crate::RecordRow {
            kind: "run".into(),
            id: id.into(),
            thread: Some("t3".into()),
            body: json!({ "n": n }).to_string(),
            created_ms: 7,
        };
        let batch = |log: &str, first, bodies: &[&str]| crate::EventBatch {
            log: log.into(),
            first,
            bodies: bodies.iter().map(|b| b.to_string()).collect(),
        };
        let together = crate::RecordWrites {
            records: vec![row("c", 1), row("d", 2), row("c", 5)],
            events: vec![batch("x", 0, &["1", "2"]), batch("y", 4, &["3"])],
            ..crate::RecordWrites::default()
        };
        assert!(store.backend().write_records(together, None).await.unwrap());
        let t3: Vec<Value> = store.records("run", Some("t3")).await.unwrap();
        assert_eq!(t3, [json!({"n": 5}), json!({"n": 2})]);
        assert_eq!(
            store.events::<u32>("x", 0, 9).await.unwrap(),
            [(0, 1), (1, 2)]
        );
        assert_eq!(store.events::<u32>("y", 0, 9).await.unwrap(), [(4, 3)]);
        // Patched in place: the members named set, the others kept; a missing record stays
        // missing.
        let patch = |id: &str, fields: Value| crate::RecordPatch {
            kind: "run".into(),
            id: id.into(),
            fields: fields.to_string(),
        };
        let patched = crate::RecordWrites {
            patches: vec![patch("d", json!({"m": 1})), patch("gone", json!({"m": 1}))],
            ..crate::RecordWrites::default()
        };
        assert!(store.backend().write_records(patched, None).await.unwrap());
        let d: Option<Value> = store.record("run", "d").await.unwrap();
        assert_eq!(d, Some(json!({"n": 2, "m": 1})));
        assert_eq!(store.record::<Value>("run", "gone").await.unwrap(), None);
        let broken = crate::RecordWrites {
            records: vec![row("e", 1)],
            events: vec![batch("z", 0, &["not json"])],
            ..crate::RecordWrites::default()
        };
        if store.backend().has_run_queue() {
            // PostgreSQL reads an event's text as JSON: this batch fails, and its record with it.
            assert!(store.backend().write_records(broken, None).await.is_err());
            assert_eq!(store.record::<Value>("run", "e").await.unwrap(), None);
        } else {
            let claim = crate::RunClaim {
                run: "c".into(),
                owner: "w".into(),
                attempt: 1,
            };
            let refused = store
                .backend()
                .write_records(crate::RecordWrites::default(), Some(&claim))
                .await
                .unwrap_err();
            assert!(refused.to_string().contains("no run queue"), "{refused}");
        }
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
        use crate::{ClaimedRun, EventBatch, RecordRow, RecordWrites, RunClaim, RunNotice};
        use std::time::Duration;
        let q = store.backend();
        assert!(q.has_run_queue());
        let mut notices = q.listen_runs().await.unwrap();
        // A run's records and first event, written with it.
        let writes = |run: &str, status: &str| RecordWrites {
            records: vec![RecordRow {
                kind: "run".into(),
                id: run.into(),
                thread: None,
                body: json!({ "status": status }).to_string(),
                created_ms: 1,
            }],
            events: vec![EventBatch {
                log: run.into(),
                first: 0,
                bodies: vec![json!(status).to_string()],
            }],
            ..RecordWrites::default()
        };
        let status = |run: &'static str| async move {
            let record: Option<Value> = store.record("run", run).await.unwrap();
            record.map(|r| r["status"].as_str().unwrap().to_owned())
        };
        for (run, thread) in [("a1", "ta"), ("a2", "ta"), ("b1", "tb")] {
            let queued = q.enqueue_run(run, thread, false, writes(run, "pending"));
            assert!(queued.await.unwrap());
        }
        assert_eq!(status("a2").await.as_deref(), Some("pending"));
        assert_eq!(store.events::<String>("a2", 0, 9).await.unwrap().len(), 1);
        // Its first events' followers are told, and the workers.
        let mut told = Vec::new();
        while let Ok(Some(notice)) =
            tokio::time::timeout(Duration::from_secs(5), notices.recv()).await
        {
            told.push(notice);
            if told.contains(&RunNotice::Ready) {
                break;
            }
        }
        assert!(told.contains(&RunNotice::Appended("a1".into())), "{told:?}");
        assert!(told.contains(&RunNotice::Ready), "{told:?}");
        // An event log appended to is notified, with its name.
        q.append_events("log-x", 0, vec!["{}".to_owned()])
            .await
            .unwrap();
        let mut changed = None;
        while let Ok(Some(notice)) =
            tokio::time::timeout(Duration::from_secs(5), notices.recv()).await
        {
            match notice {
                RunNotice::Appended(log) if log == "log-x" => {
                    changed = Some(log);
                    break;
                }
                _ => {}
            }
        }
        assert_eq!(changed.as_deref(), Some("log-x"));
        // Alone: not on a thread with a run queued, and queued on one without.
        // Alone: not on a thread with a run queued (and nothing of it written), and queued on
        // one without.
        assert!(!q
            .enqueue_run("a3", "ta", true, writes("a3", "pending"))
            .await
            .unwrap());
        assert_eq!(status("a3").await, None);
        assert!(store.events::<String>("a3", 0, 9).await.unwrap().is_empty());
        assert!(q
            .enqueue_run("d1", "td", true, writes("d1", "pending"))
            .await
            .unwrap());
        assert!(!q
            .enqueue_run("d2", "td", true, writes("d2", "pending"))
            .await
            .unwrap());
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
        // Fenced: what a worker that no longer holds the run's claim (its first owner, or
        // an earlier attempt) writes is not written, and the run stays queued.
        let claim = |owner: &str, attempt| RunClaim {
            run: "a1".into(),
            owner: owner.into(),
            attempt,
        };
        for stale in [claim("w1", 1), claim("w2", 2)] {
            let finished = q.finish_run("a1", writes("a1", "error"), Some(&stale));
            assert!(!finished.await.unwrap());
            let written = q.write_records(writes("a1", "error"), Some(&stale));
            assert!(!written.await.unwrap());
        }
        assert_eq!(status("a1").await.as_deref(), Some("pending"));
        assert_eq!(q.claim_run("w1", 3).await.unwrap(), None);
        let held = claim("w2", 1);
        assert!(q
            .write_records(writes("a1", "running"), Some(&held))
            .await
            .unwrap());
        assert_eq!(status("a1").await.as_deref(), Some("running"));
        assert!(q
            .finish_run("a1", writes("a1", "success"), Some(&held))
            .await
            .unwrap());
        assert_eq!(status("a1").await.as_deref(), Some("success"));
        let mut ended = None;
        while let Ok(Some(notice)) =
            tokio::time::timeout(Duration::from_secs(5), notices.recv()).await
        {
            if let RunNotice::Ended(run) = notice {
                ended = Some(run);
                break;
            }
        }
        assert_eq!(ended.as_deref(), Some("a1"));
        // Out of the queue: its claim fences nothing more in.
        assert!(!q
            .write_records(writes("a1", "error"), Some(&held))
            .await
            .unwrap());
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
        assert!(q
            .enqueue_run("c1", "tc", false, RecordWrites::default())
            .await
            .unwrap());
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
