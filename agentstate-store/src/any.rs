//! One store type for whichever backend a program picks at run time.

use crate::backend::Backend;
use crate::error::StoreError;
use crate::record::{
    HistoryPage, LeaseInfo, LeaseOp, Loaded, NewEntry, NewThread, Rewriter, SchemaRecord,
    ThreadInfo, ThreadQuery,
};
use crate::store::Store;
use std::sync::Arc;

/// A store over whichever backend a program picks at run time ([`AnyStore::open`] finds it in
/// its URL): a [`Store`] over [`AnyBackend`], which forwards each operation to the SQLite or
/// PostgreSQL backend it holds (as sqlx's `Any` does). The typed stores (`SqliteStore`,
/// `PostgresStore`) are unchanged and pay nothing for it; either converts into an `AnyStore`
/// with `.into()`.
///
/// ```
/// use agentstate::message::{Message, Role};
/// use agentstate::state::AgentState;
/// use agentstate_store::{AnyStore, StepMeta};
///
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// // From the configuration: `sqlite:path/to/file.db`, `sqlite::memory:`, `postgres://...`.
/// let url = std::env::var("MY_APP_DATABASE").unwrap_or("sqlite::memory:".into());
/// let store: AnyStore = AnyStore::open(&url).await?;
/// assert_eq!(store.backend().name(), "SQLite");
///
/// let mut chat = store.create("chat", AgentState::default()).await?;
/// chat.merge(Message::text_message("hi", Role::User), StepMeta::node("user")).await?;
/// assert_eq!(store.load::<AgentState>("chat").await?.version, 1);
/// # Ok::<(), agentstate_store::StoreError>(())
/// # }).unwrap();
/// ```
pub type AnyStore = Store<AnyBackend>;

/// The backend of an [`AnyStore`]: one of the backends compiled in (features `sqlite`,
/// `postgres`). Each operation is forwarded to it.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum AnyBackend {
    /// SQLite.
    #[cfg(feature = "sqlite")]
    Sqlite(Arc<crate::sqlite::Sqlite>),
    /// PostgreSQL.
    #[cfg(feature = "postgres")]
    Postgres(Arc<crate::postgres::Postgres>),
}

/// Runs `$call` on the backend `$self` holds, bound to `$b`.
macro_rules! dispatch {
    ($self:expr, $b:ident => $call:expr) => {
        match *$self {
            #[cfg(feature = "sqlite")]
            AnyBackend::Sqlite(ref $b) => $call,
            #[cfg(feature = "postgres")]
            AnyBackend::Postgres(ref $b) => $call,
        }
    };
}

impl AnyBackend {
    /// The backend's name: `SQLite` or `PostgreSQL`.
    pub fn name(&self) -> &'static str {
        match *self {
            #[cfg(feature = "sqlite")]
            AnyBackend::Sqlite(_) => "SQLite",
            #[cfg(feature = "postgres")]
            AnyBackend::Postgres(_) => "PostgreSQL",
        }
    }
}

impl Backend for AnyBackend {
    async fn create(&self, thread: NewThread) -> Result<ThreadInfo, StoreError> {
        dispatch!(self, b => b.create(thread).await)
    }

    async fn append(
        &self,
        thread: &str,
        expected: u64,
        entry: NewEntry,
    ) -> Result<u64, StoreError> {
        dispatch!(self, b => b.append(thread, expected, entry).await)
    }

    async fn append_all(
        &self,
        thread: &str,
        expected: u64,
        entries: Vec<NewEntry>,
    ) -> Result<u64, StoreError> {
        dispatch!(self, b => b.append_all(thread, expected, entries).await)
    }

    async fn put_snapshot(
        &self,
        thread: &str,
        seq: u64,
        incarnation: i64,
        fingerprint: u64,
        json: String,
        keep: u32,
    ) -> Result<(), StoreError> {
        dispatch!(self, b => b.put_snapshot(thread, seq, incarnation, fingerprint, json, keep).await)
    }

    async fn load(
        &self,
        thread: &str,
        seq: Option<u64>,
        after: Option<u64>,
    ) -> Result<Loaded, StoreError> {
        dispatch!(self, b => b.load(thread, seq, after).await)
    }

    async fn info(&self, thread: &str) -> Result<ThreadInfo, StoreError> {
        dispatch!(self, b => b.info(thread).await)
    }

    async fn history(
        &self,
        thread: &str,
        after: u64,
        until: u64,
        limit: u32,
        newest_first: bool,
    ) -> Result<HistoryPage, StoreError> {
        dispatch!(self, b => b.history(thread, after, until, limit, newest_first).await)
    }

    async fn list(&self, query: ThreadQuery) -> Result<Vec<ThreadInfo>, StoreError> {
        dispatch!(self, b => b.list(query).await)
    }

    async fn delete(&self, thread: &str) -> Result<bool, StoreError> {
        dispatch!(self, b => b.delete(thread).await)
    }

    async fn rewrite(
        &self,
        thread: &str,
        fingerprint: u64,
        rewrite: Rewriter,
    ) -> Result<u64, StoreError> {
        dispatch!(self, b => b.rewrite(thread, fingerprint, rewrite).await)
    }

    async fn compact(
        &self,
        thread: &str,
        seq: u64,
        incarnation: i64,
        fingerprint: u64,
        json: String,
    ) -> Result<u64, StoreError> {
        dispatch!(self, b => b.compact(thread, seq, incarnation, fingerprint, json).await)
    }

    async fn rewind(&self, thread: &str, seq: u64) -> Result<ThreadInfo, StoreError> {
        dispatch!(self, b => b.rewind(thread, seq).await)
    }

    async fn copy(
        &self,
        thread: &str,
        new_id: &str,
        metadata: String,
        created_ms: i64,
    ) -> Result<ThreadInfo, StoreError> {
        dispatch!(self, b => b.copy(thread, new_id, metadata, created_ms).await)
    }

    async fn put_schema(&self, schema: SchemaRecord) -> Result<(), StoreError> {
        dispatch!(self, b => b.put_schema(schema).await)
    }

    async fn schemas(&self) -> Result<Vec<SchemaRecord>, StoreError> {
        dispatch!(self, b => b.schemas().await)
    }

    async fn lease(
        &self,
        thread: &str,
        owner: &str,
        ttl_ms: u64,
        op: LeaseOp,
    ) -> Result<Option<LeaseInfo>, StoreError> {
        dispatch!(self, b => b.lease(thread, owner, ttl_ms, op).await)
    }

    async fn lease_info(&self, thread: &str) -> Result<Option<LeaseInfo>, StoreError> {
        dispatch!(self, b => b.lease_info(thread).await)
    }
}

/// A URL [`AnyStore::open`] does not take, named by its scheme only (a PostgreSQL URL may hold
/// a password).
fn unsupported(url: &str, why: &str) -> StoreError {
    let scheme = url.split_once(':').map_or("", |(scheme, _)| scheme);
    StoreError::backend(
        "agentstate-store",
        format!("opening a store from a URL of scheme `{scheme}`"),
        why.to_owned(),
    )
}

impl Store<AnyBackend> {
    /// Opens the store `url` names:
    ///
    /// - `sqlite::memory:`: a private SQLite database in memory;
    /// - `sqlite:PATH` or `sqlite://PATH`: the SQLite database file at `PATH` (created if
    ///   needed; see [`SqliteStore::open`](crate::SqliteStore::open));
    /// - `postgres://...` or `postgresql://...`: a PostgreSQL database, with the default
    ///   options (see [`PostgresStore::connect`](crate::PostgresStore::connect)).
    ///
    /// A backend whose feature is off, another scheme, or options in a SQLite URL (`?mode=...`)
    /// are a [`StoreError::Backend`] naming the scheme. For a backend's own options (durability, a schema, a pool size), open the
    /// typed store and convert it: `AnyStore::from(PostgresStore::connect_with(..).await?)`.
    ///
    /// ```
    /// use agentstate_store::AnyStore;
    ///
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let dir = std::env::temp_dir().join(format!("agentstate-any-{}", std::process::id()));
    /// std::fs::create_dir_all(&dir).unwrap();
    /// let store = AnyStore::open(&format!("sqlite:{}", dir.join("threads.db").display())).await?;
    /// assert_eq!(store.backend().name(), "SQLite");
    ///
    /// let err = AnyStore::open("mysql://user:secret@host/db").await.unwrap_err();
    /// assert!(err.to_string().contains("`mysql`") && !err.to_string().contains("secret"), "{err}");
    /// # Ok::<(), agentstate_store::StoreError>(())
    /// # }).unwrap();
    /// ```
    pub async fn open(url: &str) -> Result<Self, StoreError> {
        if let Some(rest) = url.strip_prefix("sqlite:") {
            #[cfg(feature = "sqlite")]
            {
                let store = match rest.strip_prefix("//").unwrap_or(rest) {
                    ":memory:" => crate::SqliteStore::open_in_memory()?,
                    "" => return Err(unsupported(url, "it names no database file")),
                    path if path.contains('?') => {
                        return Err(unsupported(
                            url,
                            "SQLite URLs take no options (`?...`): open a SqliteStore with its options and convert it",
                        ))
                    }
                    path => crate::SqliteStore::open(path)?,
                };
                return Ok(store.into());
            }
            #[cfg(not(feature = "sqlite"))]
            {
                let _ = rest;
                return Err(unsupported(
                    url,
                    "this build has no SQLite (feature `sqlite`)",
                ));
            }
        }
        if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            #[cfg(feature = "postgres")]
            return Ok(crate::PostgresStore::connect(url).await?.into());
            #[cfg(not(feature = "postgres"))]
            return Err(unsupported(
                url,
                "this build has no PostgreSQL (feature `postgres`)",
            ));
        }
        Err(unsupported(
            url,
            "it names no backend: use `sqlite:PATH`, `sqlite::memory:` or `postgres://...`",
        ))
    }
}

#[cfg(feature = "sqlite")]
impl From<Store<crate::sqlite::Sqlite>> for Store<AnyBackend> {
    /// The same store (its database, snapshot, retry and migration settings), as an `AnyStore`.
    fn from(store: Store<crate::sqlite::Sqlite>) -> Self {
        Store {
            backend: Arc::new(AnyBackend::Sqlite(store.backend)),
            config: store.config,
        }
    }
}

#[cfg(feature = "postgres")]
impl From<Store<crate::postgres::Postgres>> for Store<AnyBackend> {
    /// The same store (its database, snapshot, retry and migration settings), as an `AnyStore`.
    fn from(store: Store<crate::postgres::Postgres>) -> Self {
        Store {
            backend: Arc::new(AnyBackend::Postgres(store.backend)),
            config: store.config,
        }
    }
}

impl crate::RecordBackend for AnyBackend {
    async fn put_record(&self, row: crate::RecordRow) -> Result<(), StoreError> {
        dispatch!(self, b => b.put_record(row).await)
    }

    async fn get_record(
        &self,
        kind: &str,
        id: &str,
    ) -> Result<Option<crate::RecordRow>, StoreError> {
        dispatch!(self, b => b.get_record(kind, id).await)
    }

    async fn list_records(
        &self,
        kind: &str,
        thread: Option<&str>,
    ) -> Result<Vec<crate::RecordRow>, StoreError> {
        dispatch!(self, b => b.list_records(kind, thread).await)
    }

    async fn find_records(
        &self,
        kind: &str,
        member: &str,
        values: &[&str],
    ) -> Result<Vec<crate::RecordRow>, StoreError> {
        dispatch!(self, b => b.find_records(kind, member, values).await)
    }

    async fn delete_record(&self, kind: &str, id: &str) -> Result<bool, StoreError> {
        dispatch!(self, b => b.delete_record(kind, id).await)
    }

    async fn append_events(
        &self,
        log: &str,
        first: u64,
        bodies: Vec<String>,
    ) -> Result<(), StoreError> {
        dispatch!(self, b => b.append_events(log, first, bodies).await)
    }

    async fn list_events(
        &self,
        log: &str,
        from: u64,
        limit: usize,
    ) -> Result<Vec<crate::EventRow>, StoreError> {
        dispatch!(self, b => b.list_events(log, from, limit).await)
    }

    async fn delete_events(&self, log: &str) -> Result<u64, StoreError> {
        dispatch!(self, b => b.delete_events(log).await)
    }

    fn has_run_queue(&self) -> bool {
        dispatch!(self, b => b.has_run_queue())
    }

    async fn write_records(
        &self,
        writes: crate::RecordWrites,
        claim: Option<&crate::RunClaim>,
    ) -> Result<bool, StoreError> {
        dispatch!(self, b => b.write_records(writes, claim).await)
    }

    async fn enqueue_run(
        &self,
        run: &str,
        thread: &str,
        alone: bool,
        writes: crate::RecordWrites,
    ) -> Result<bool, StoreError> {
        dispatch!(self, b => b.enqueue_run(run, thread, alone, writes).await)
    }

    async fn claim_run(
        &self,
        owner: &str,
        max_attempts: u32,
    ) -> Result<Option<crate::ClaimedRun>, StoreError> {
        dispatch!(self, b => b.claim_run(owner, max_attempts).await)
    }

    async fn finish_run(
        &self,
        run: &str,
        writes: crate::RecordWrites,
        claim: Option<&crate::RunClaim>,
    ) -> Result<bool, StoreError> {
        dispatch!(self, b => b.finish_run(run, writes, claim).await)
    }

    async fn release_run(&self, run: &str, owner: &str) -> Result<(), StoreError> {
        dispatch!(self, b => b.release_run(run, owner).await)
    }

    async fn cancel_run(&self, run: &str, rollback: bool) -> Result<Option<bool>, StoreError> {
        dispatch!(self, b => b.cancel_run(run, rollback).await)
    }

    async fn sweep_runs(
        &self,
        grace: std::time::Duration,
        max_attempts: u32,
    ) -> Result<crate::Swept, StoreError> {
        dispatch!(self, b => b.sweep_runs(grace, max_attempts).await)
    }

    async fn listen_runs(
        &self,
    ) -> Result<tokio::sync::mpsc::UnboundedReceiver<crate::RunNotice>, StoreError> {
        dispatch!(self, b => b.listen_runs().await)
    }
}
