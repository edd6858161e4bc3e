//! The store for synchronous programs: [`BlockingStore`], [`BlockingThread`] and
//! [`BlockingLease`] have the methods of [`Store`], [`Thread`] and [`Lease`], each running to completion on a current-thread tokio
//! runtime the store owns (shared by its clones and thread handles). Open one with
//! [`BlockingStore::open`], [`open_in_memory`](BlockingStore::open_in_memory),
//! `connect_with` (PostgreSQL), [`open_url`](BlockingStore::open_url) (the backend a URL names)
//! or [`new`](BlockingStore::new) (around an async store).
//!
//! Call them from plain threads, not from async code: inside a tokio runtime they fail with
//! [`StoreError::Backend`] instead of blocking that runtime's thread (use the async [`Store`]
//! there; [`BlockingStore::store`] gives it). Creating, cloning and dropping a blocking store or
//! thread handle is fine anywhere, inside a runtime too: the last one dropped shuts the owned
//! runtime down without waiting when it is inside another runtime (where waiting would block).
//!
//! ```
//! use agentstate::message::{Message, Role};
//! use agentstate::state::{AgentState, AgentStateUpdate};
//! use agentstate_store::blocking::BlockingStore;
//! use agentstate_store::{HistoryQuery, StepMeta};
//!
//! let store = BlockingStore::open_in_memory()?;
//! let mut chat = store.thread_or_create("chat-1", AgentState::default)?;
//! assert_eq!(chat.merge(Message::text_message("Hello!", Role::User), StepMeta::node("user"))?, 1);
//! chat.merge_with(StepMeta::node("bot"), |state| {
//!     Ok(AgentStateUpdate::default().context_summary(Some(format!("{} message", state.context.len()))))
//! })?;
//!
//! let chat = store.load::<AgentState>("chat-1")?;
//! assert_eq!((chat.state.context.len(), chat.version), (1, 2));
//! assert_eq!(store.load_at::<AgentState>("chat-1", 1)?.state.context_summary, None);
//! assert_eq!(store.history("chat-1", HistoryQuery::newest(1))?[0].node.as_deref(), Some("bot"));
//! # Ok::<(), agentstate_store::StoreError>(())
//! ```

use crate::backend::Backend;
use crate::error::StoreError;
use crate::lease::Lease;
use crate::migrate::Migration;
use crate::record::{EntryInfo, LeaseInfo, StepMeta, ThreadInfo, ThreadQuery};
use crate::store::{Compaction, HistoryQuery, SnapshotPolicy, Store, StoredState, Versioned};
use crate::thread::{ConflictRetry, Thread};
use agentstate::FanIn;
use agentstate::NodeOutput;
use serde_json::{Map, Value};
use std::future::Future;
use std::sync::Arc;
use tokio::runtime::Runtime;

/// A [`Store`] with blocking methods. Cheap to clone (for any backend, as [`Store`]); clones
/// share the database and the runtime.
///
/// ```
/// use agentstate::state::AgentState;
/// use agentstate_store::blocking::BlockingStore;
///
/// let store = BlockingStore::open_in_memory()?;
/// let other = store.clone();
/// let worker = std::thread::spawn(move || other.create("t", AgentState::default()).map(|_| ()));
/// worker.join().unwrap()?;
/// assert_eq!(store.load::<AgentState>("t")?.version, 0);
/// # Ok::<(), agentstate_store::StoreError>(())
/// ```
#[derive(Debug)]
pub struct BlockingStore<B> {
    store: Store<B>,
    runtime: Arc<OwnedRuntime>,
}

impl<B> Clone for BlockingStore<B> {
    fn clone(&self) -> Self {
        BlockingStore {
            store: self.store.clone(),
            runtime: Arc::clone(&self.runtime),
        }
    }
}

/// A [`Thread`] handle with blocking methods, from [`BlockingStore`].
#[derive(Debug)]
pub struct BlockingThread<S, B> {
    thread: Thread<S, B>,
    runtime: Arc<OwnedRuntime>,
}

/// The runtime a blocking store owns. Dropping a tokio runtime waits for its blocking tasks,
/// which tokio refuses (with a panic) inside another runtime; there it is shut down without
/// waiting instead.
#[derive(Debug)]
struct OwnedRuntime(Option<Runtime>);

impl Drop for OwnedRuntime {
    fn drop(&mut self) {
        if let Some(runtime) = self.0.take() {
            if tokio::runtime::Handle::try_current().is_ok() {
                runtime.shutdown_background();
            }
        }
    }
}

/// Runs `future` on `runtime`, unless the caller is itself inside a tokio runtime.
fn run<F: Future>(runtime: &OwnedRuntime, future: F) -> Result<F::Output, StoreError> {
    match &runtime.0 {
        Some(runtime) if tokio::runtime::Handle::try_current().is_err() => {
            Ok(runtime.block_on(future))
        }
        _ => Err(StoreError::backend(
            "tokio",
            "running a blocking store call",
            "it was called inside an async runtime, whose thread it would block; use the async Store there",
        )),
    }
}

fn runtime() -> Result<Arc<OwnedRuntime>, StoreError> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map(|runtime| Arc::new(OwnedRuntime(Some(runtime))))
        .map_err(|e| StoreError::backend("tokio", "starting the blocking store's runtime", e))
}

#[cfg(feature = "sqlite")]
impl BlockingStore<crate::sqlite::Sqlite> {
    /// Opens (creating if needed) the SQLite database file at `path`; see
    /// [`SqliteStore::open`](crate::SqliteStore::open).
    pub fn open(path: impl AsRef<std::path::Path>) -> Result<Self, StoreError> {
        Self::new(crate::SqliteStore::open(path)?)
    }

    /// A private SQLite database in memory.
    pub fn open_in_memory() -> Result<Self, StoreError> {
        Self::new(crate::SqliteStore::open_in_memory()?)
    }
}

#[cfg(feature = "postgres")]
impl BlockingStore<crate::postgres::Postgres> {
    /// Connects to a PostgreSQL database; see
    /// [`PostgresStore::connect_with`](crate::PostgresStore::connect_with). The pool's
    /// connections run on the store's runtime, during its calls.
    pub fn connect_with(
        url: &str,
        options: crate::postgres::PostgresOptions,
    ) -> Result<Self, StoreError> {
        let runtime = runtime()?;
        let store = run(&runtime, crate::PostgresStore::connect_with(url, options))??;
        Ok(BlockingStore { store, runtime })
    }
}

#[cfg(any(feature = "sqlite", feature = "postgres"))]
impl BlockingStore<crate::any::AnyBackend> {
    /// Opens the store `url` names (`sqlite:PATH`, `sqlite::memory:`, `postgres://...`); see
    /// [`AnyStore::open`](crate::AnyStore::open). A PostgreSQL pool's connections run on the
    /// store's runtime, during its calls.
    ///
    /// ```
    /// use agentstate::state::AgentState;
    /// use agentstate_store::blocking::BlockingStore;
    ///
    /// let store = BlockingStore::open_url("sqlite::memory:")?;
    /// store.create("t", AgentState::default())?;
    /// assert_eq!(store.load::<AgentState>("t")?.version, 0);
    /// # Ok::<(), agentstate_store::StoreError>(())
    /// ```
    pub fn open_url(url: &str) -> Result<Self, StoreError> {
        let runtime = runtime()?;
        let store = run(&runtime, crate::AnyStore::open(url))??;
        Ok(BlockingStore { store, runtime })
    }
}

impl<B: Backend> BlockingStore<B> {
    /// Wraps an async store, with a runtime of its own.
    pub fn new(store: Store<B>) -> Result<Self, StoreError> {
        Ok(BlockingStore {
            store,
            runtime: runtime()?,
        })
    }

    /// The async store underneath.
    pub fn store(&self) -> &Store<B> {
        &self.store
    }

    /// See [`Store::with_snapshot_policy`].
    #[must_use]
    pub fn with_snapshot_policy(mut self, policy: SnapshotPolicy) -> Self {
        self.store = self.store.with_snapshot_policy(policy);
        self
    }

    /// See [`Store::with_conflict_retry`].
    #[must_use]
    pub fn with_conflict_retry(mut self, policy: ConflictRetry) -> Self {
        self.store = self.store.with_conflict_retry(policy);
        self
    }

    /// See [`Store::with_migration`].
    #[must_use]
    pub fn with_migration(mut self, step: Migration) -> Self {
        self.store = self.store.with_migration(step);
        self
    }

    fn handle<S>(&self, thread: Thread<S, B>) -> BlockingThread<S, B> {
        BlockingThread {
            thread,
            runtime: Arc::clone(&self.runtime),
        }
    }

    /// See [`Store::create`].
    pub fn create<S: StoredState>(
        &self,
        id: &str,
        initial: S,
    ) -> Result<BlockingThread<S, B>, StoreError> {
        let thread = run(&self.runtime, self.store.create(id, initial))??;
        Ok(self.handle(thread))
    }

    /// See [`Store::create_with`].
    pub fn create_with<S: StoredState>(
        &self,
        id: &str,
        initial: S,
        metadata: Map<String, Value>,
    ) -> Result<BlockingThread<S, B>, StoreError> {
        let thread = run(&self.runtime, self.store.create_with(id, initial, metadata))??;
        Ok(self.handle(thread))
    }

    /// See [`Store::thread`].
    pub fn thread<S: StoredState>(&self, id: &str) -> Result<BlockingThread<S, B>, StoreError> {
        let thread = run(&self.runtime, self.store.thread(id))??;
        Ok(self.handle(thread))
    }

    /// See [`Store::thread_or_create`].
    pub fn thread_or_create<S: StoredState>(
        &self,
        id: &str,
        initial: impl FnOnce() -> S,
    ) -> Result<BlockingThread<S, B>, StoreError> {
        let thread = run(&self.runtime, self.store.thread_or_create(id, initial))??;
        Ok(self.handle(thread))
    }

    /// See [`Store::load`].
    pub fn load<S: StoredState>(&self, id: &str) -> Result<Versioned<S>, StoreError> {
        run(&self.runtime, self.store.load(id))?
    }

    /// See [`Store::load_at`].
    pub fn load_at<S: StoredState>(&self, id: &str, seq: u64) -> Result<Versioned<S>, StoreError> {
        run(&self.runtime, self.store.load_at(id, seq))?
    }

    /// See [`Store::info`].
    pub fn info(&self, id: &str) -> Result<ThreadInfo, StoreError> {
        run(&self.runtime, self.store.info(id))?
    }

    /// See [`Store::history`].
    pub fn history(&self, id: &str, query: HistoryQuery) -> Result<Vec<EntryInfo>, StoreError> {
        run(&self.runtime, self.store.history(id, query))?
    }

    /// See [`Store::list`].
    pub fn list(&self, query: ThreadQuery) -> Result<Vec<ThreadInfo>, StoreError> {
        run(&self.runtime, self.store.list(query))?
    }

    /// See [`Store::delete`].
    pub fn delete(&self, id: &str) -> Result<bool, StoreError> {
        run(&self.runtime, self.store.delete(id))?
    }

    /// See [`Store::fork`].
    pub fn fork(&self, id: &str, seq: u64, new_id: &str) -> Result<ThreadInfo, StoreError> {
        run(&self.runtime, self.store.fork(id, seq, new_id))?
    }

    /// See [`Store::fork_with`].
    pub fn fork_with(
        &self,
        id: &str,
        seq: u64,
        new_id: &str,
        metadata: Map<String, Value>,
    ) -> Result<ThreadInfo, StoreError> {
        run(
            &self.runtime,
            self.store.fork_with(id, seq, new_id, metadata),
        )?
    }

    /// See [`Store::copy`].
    pub fn copy(&self, id: &str, new_id: &str) -> Result<ThreadInfo, StoreError> {
        run(&self.runtime, self.store.copy(id, new_id))?
    }

    /// See [`Store::copy_with`].
    pub fn copy_with(
        &self,
        id: &str,
        new_id: &str,
        metadata: Map<String, Value>,
    ) -> Result<ThreadInfo, StoreError> {
        run(&self.runtime, self.store.copy_with(id, new_id, metadata))?
    }

    /// See [`Store::snapshot`].
    pub fn snapshot<S: StoredState>(&self, id: &str) -> Result<u64, StoreError> {
        run(&self.runtime, self.store.snapshot::<S>(id))?
    }

    /// See [`Store::compact`].
    pub fn compact<S: StoredState>(&self, id: &str) -> Result<Compaction, StoreError> {
        run(&self.runtime, self.store.compact::<S>(id))?
    }

    /// See [`Store::rewind`].
    pub fn rewind(&self, id: &str, seq: u64) -> Result<ThreadInfo, StoreError> {
        run(&self.runtime, self.store.rewind(id, seq))?
    }

    /// See [`Store::migrate_thread`].
    pub fn migrate_thread<S: StoredState>(&self, id: &str) -> Result<u64, StoreError> {
        run(&self.runtime, self.store.migrate_thread::<S>(id))?
    }

    /// See [`Store::lease`].
    ///
    /// ```
    /// use agentstate::state::AgentState;
    /// use agentstate_store::blocking::BlockingStore;
    /// use std::time::Duration;
    ///
    /// let store = BlockingStore::open_in_memory()?;
    /// store.create("t", AgentState::default())?;
    /// let mut lease = store.lease("t", "worker-1", Duration::from_secs(30))?;
    /// assert_eq!(store.lease("t", "worker-2", Duration::from_secs(30)).unwrap_err().category(), "thread_leased");
    /// lease.renew()?;
    /// lease.release()?;
    /// assert!(store.lease_info("t")?.is_none());
    /// # Ok::<(), agentstate_store::StoreError>(())
    /// ```
    pub fn lease(
        &self,
        id: &str,
        owner: &str,
        ttl: std::time::Duration,
    ) -> Result<BlockingLease<B>, StoreError> {
        let lease = run(&self.runtime, self.store.lease(id, owner, ttl))??;
        Ok(BlockingLease {
            lease,
            runtime: Arc::clone(&self.runtime),
        })
    }

    /// See [`Store::revoke_lease`].
    pub fn revoke_lease(&self, id: &str) -> Result<Option<LeaseInfo>, StoreError> {
        run(&self.runtime, self.store.revoke_lease(id))?
    }

    /// See [`Store::lease_info`].
    pub fn lease_info(&self, id: &str) -> Result<Option<LeaseInfo>, StoreError> {
        run(&self.runtime, self.store.lease_info(id))?
    }
}

/// A [`Lease`] with blocking methods, from [`BlockingStore::lease`]. As a `Lease`, it does not
/// renew itself, and dropping it does nothing (the lease expires).
#[derive(Debug)]
pub struct BlockingLease<B> {
    lease: Lease<B>,
    runtime: Arc<OwnedRuntime>,
}

impl<B> Clone for BlockingLease<B> {
    fn clone(&self) -> Self {
        BlockingLease {
            lease: self.lease.clone(),
            runtime: Arc::clone(&self.runtime),
        }
    }
}

impl<B: Backend> BlockingLease<B> {
    /// See [`Lease::thread`].
    pub fn thread(&self) -> &str {
        self.lease.thread()
    }

    /// See [`Lease::owner`].
    pub fn owner(&self) -> &str {
        self.lease.owner()
    }

    /// See [`Lease::ttl`].
    pub fn ttl(&self) -> std::time::Duration {
        self.lease.ttl()
    }

    /// See [`Lease::expires_at`].
    pub fn expires_at(&self) -> std::time::Instant {
        self.lease.expires_at()
    }

    /// See [`Lease::remaining`].
    pub fn remaining(&self) -> std::time::Duration {
        self.lease.remaining()
    }

    /// See [`Lease::head`].
    pub fn head(&self) -> crate::record::Head {
        self.lease.head()
    }

    /// See [`Lease::version`].
    pub fn version(&self) -> u64 {
        self.lease.version()
    }

    /// See [`Lease::renew`].
    pub fn renew(&mut self) -> Result<(), StoreError> {
        run(&self.runtime, self.lease.renew())?
    }

    /// See [`Lease::release`].
    pub fn release(self) -> Result<(), StoreError> {
        run(&self.runtime, self.lease.release())?
    }

    /// The async lease underneath.
    pub fn into_async(self) -> Lease<B> {
        self.lease
    }
}

impl<S: StoredState, B: Backend> BlockingThread<S, B> {
    /// The thread's id.
    pub fn id(&self) -> &str {
        self.thread.id()
    }

    /// The state at [`version`](BlockingThread::version).
    pub fn state(&self) -> &S {
        self.thread.state()
    }

    /// The version this handle read or last wrote.
    pub fn version(&self) -> u64 {
        self.thread.version()
    }

    /// The async handle underneath.
    pub fn into_async(self) -> Thread<S, B> {
        self.thread
    }

    /// See [`Thread::merge`].
    pub fn merge(
        &mut self,
        output: impl Into<NodeOutput<S::Update>>,
        meta: StepMeta,
    ) -> Result<u64, StoreError> {
        run(&self.runtime, self.thread.merge(output, meta))?
    }

    /// See [`Thread::merge_parallel`].
    pub fn merge_parallel(
        &mut self,
        outputs: impl IntoIterator<Item = impl Into<NodeOutput<S::Update>>>,
        mode: FanIn,
        meta: StepMeta,
    ) -> Result<u64, StoreError> {
        run(
            &self.runtime,
            self.thread.merge_parallel(outputs, mode, meta),
        )?
    }

    /// See [`Thread::merge_with`]; here `step` is a plain closure (as
    /// [`Thread::merge_with_sync`]).
    pub fn merge_with<F, O>(&mut self, meta: StepMeta, step: F) -> Result<u64, StoreError>
    where
        F: FnMut(&S) -> Result<O, StoreError>,
        O: Into<NodeOutput<S::Update>>,
    {
        run(&self.runtime, self.thread.merge_with_sync(meta, step))?
    }

    /// See [`Thread::stage`].
    pub fn stage(
        &mut self,
        output: impl Into<NodeOutput<S::Update>>,
        meta: impl FnOnce(&S) -> StepMeta,
    ) -> Result<(), StoreError> {
        self.thread.stage(output, meta)
    }

    /// See [`Thread::stage_parallel`].
    pub fn stage_parallel(
        &mut self,
        outputs: impl IntoIterator<Item = impl Into<NodeOutput<S::Update>>>,
        mode: FanIn,
        meta: impl FnOnce(&S) -> StepMeta,
    ) -> Result<(), StoreError> {
        self.thread.stage_parallel(outputs, mode, meta)
    }

    /// See [`Thread::staged`].
    pub fn staged(&self) -> usize {
        self.thread.staged()
    }

    /// See [`Thread::flush`].
    pub fn flush(&mut self) -> Result<u64, StoreError> {
        run(&self.runtime, self.thread.flush())?
    }

    /// See [`Thread::merge_leasing`]: appends `output` and takes the thread's lease for
    /// `owner` in one write.
    ///
    /// ```
    /// use agentstate::message::{Message, Role};
    /// use agentstate::state::AgentState;
    /// use agentstate_store::blocking::BlockingStore;
    /// use agentstate_store::StepMeta;
    /// use std::time::Duration;
    ///
    /// let store = BlockingStore::open_in_memory()?;
    /// let mut chat = store.create("chat", AgentState::default())?;
    /// let hi = Message::text_message("hi", Role::User);
    /// let lease = chat.merge_leasing(hi, StepMeta::node("user"), "worker-1", Duration::from_secs(30))?;
    /// assert_eq!(store.lease_info("chat")?.unwrap().owner, "worker-1");
    /// chat.stage(Message::text_message("hello", Role::Assistant), |_| StepMeta::node("bot"))?;
    /// // The last step and the lease's release: one write.
    /// assert_eq!(chat.flush_releasing(&lease)?, 2);
    /// assert!(store.lease_info("chat")?.is_none());
    /// # Ok::<(), agentstate_store::StoreError>(())
    /// ```
    pub fn merge_leasing(
        &mut self,
        output: impl Into<NodeOutput<S::Update>>,
        meta: StepMeta,
        owner: &str,
        ttl: std::time::Duration,
    ) -> Result<BlockingLease<B>, StoreError> {
        let lease = run(
            &self.runtime,
            self.thread.merge_leasing(output, meta, owner, ttl),
        )??;
        Ok(BlockingLease {
            lease,
            runtime: Arc::clone(&self.runtime),
        })
    }

    /// See [`Thread::flush_releasing`].
    pub fn flush_releasing(&mut self, lease: &BlockingLease<B>) -> Result<u64, StoreError> {
        run(&self.runtime, self.thread.flush_releasing(&lease.lease))?
    }

    /// See [`Thread::fence`].
    ///
    /// ```
    /// use agentstate::message::{Message, Role};
    /// use agentstate::state::AgentState;
    /// use agentstate_store::blocking::BlockingStore;
    /// use agentstate_store::StepMeta;
    /// use std::time::Duration;
    ///
    /// let store = BlockingStore::open_in_memory()?;
    /// let mut chat = store.create("chat", AgentState::default())?;
    /// let lease = store.lease("chat", "worker-1", Duration::from_secs(30))?;
    /// chat.fence(&lease);
    /// assert!(chat.is_current(&lease));
    /// chat.merge(Message::text_message("hi", Role::User), StepMeta::node("user"))?;
    /// lease.release()?;
    /// // Released: the fenced handle writes nothing.
    /// let err = chat.merge(Message::text_message("again", Role::User), StepMeta::node("user")).unwrap_err();
    /// assert_eq!(err.category(), "lease_lost");
    /// # Ok::<(), agentstate_store::StoreError>(())
    /// ```
    pub fn fence(&mut self, lease: &BlockingLease<B>) {
        self.thread.fence(&lease.lease);
    }

    /// See [`Thread::unfence`].
    pub fn unfence(&mut self) {
        self.thread.unfence();
    }

    /// See [`Thread::is_current`].
    pub fn is_current(&self, lease: &BlockingLease<B>) -> bool {
        self.thread.is_current(&lease.lease)
    }

    /// See [`Thread::conflict_retry`].
    pub fn conflict_retry(&self) -> ConflictRetry {
        self.thread.conflict_retry()
    }

    /// See [`Thread::set_conflict_retry`].
    pub fn set_conflict_retry(&mut self, policy: ConflictRetry) {
        self.thread.set_conflict_retry(policy);
    }

    /// See [`Thread::reload`].
    pub fn reload(&mut self) -> Result<(), StoreError> {
        run(&self.runtime, self.thread.reload())?
    }
}
