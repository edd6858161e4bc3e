//! The typed store: threads of a state type, created, loaded, forked, copied, listed, rewound
//! and deleted.

use crate::backend::Backend;
use crate::error::StoreError;
use crate::lease::Lease;
use crate::migrate::{Migration, Migrations, Plan, SchemaCache, Target};
use crate::record::{
    fingerprint, now_ms, Base, EntryInfo, EntryKind, LeaseInfo, LeaseOp, Loaded, NewThread,
    Rewriter, SchemaRecord, StoredEntry, StoredRow, ThreadInfo, ThreadQuery,
};
use crate::thread::{ConflictRetry, Thread};
use agentstate::State;
use agentstate::{FanIn, Update, OVERWRITE_SUFFIX};
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::{Map, Value};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

/// A state the store can keep: serializable, with a serializable update, and sendable between
/// tasks. Every `#[derive(AgentState)]` state with `Serialize`/`Deserialize` is one.
pub trait StoredState:
    State<Update: Update + Serialize + DeserializeOwned + Send + 'static, Plan: Send>
    + Serialize
    + DeserializeOwned
    + Send
    + Sync
    + 'static
{
}

impl<S> StoredState for S where
    S: State<Update: Update + Serialize + DeserializeOwned + Send + 'static, Plan: Send>
        + Serialize
        + DeserializeOwned
        + Send
        + Sync
        + 'static
{
}

/// When a writer also stores a snapshot of the state it just appended: after `every` entries
/// since the last snapshot, or (if `when_journal_outgrows`) once the entries' JSON since then is
/// larger than the last snapshot's. Loading the latest state then replays at most `every`
/// entries.
///
/// Writing a snapshot also deletes the thread's older ones beyond the newest
/// [`keep`](SnapshotPolicy::keep) (default 1), in the same transaction: each snapshot holds the
/// whole state, so keeping them all would make a growing thread's storage grow with the square
/// of its length (a chat of 100k messages would hold about a hundred snapshots of up to 68 MB).
/// The journal is never touched, so every version stays loadable; a version before the kept
/// snapshots replays from the thread's start. The snapshot a compaction left as the thread's
/// base is always kept, and so is the one a fork loads its start from (the newest at or before
/// its fork point).
///
/// ```
/// use agentstate_store::SnapshotPolicy;
///
/// let policy = SnapshotPolicy::every(100).when_journal_outgrows(true);
/// assert!(policy.is_due(100, 10, 1_000));
/// assert!(policy.is_due(5, 2_000, 1_000));
/// assert!(!policy.is_due(5, 10, 1_000));
/// assert_eq!(policy.kept(), 1);
/// assert_eq!(policy.keep(3).kept(), 3); // faster time travel to older versions, more space
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SnapshotPolicy {
    every: u64,
    journal_outgrows: bool,
    keep: u32,
}

impl Default for SnapshotPolicy {
    /// Every 1,000 entries; the size rule off. In a chat, whose updates *are* the state,
    /// replaying costs one to two times what reading a snapshot would, and snapshots would
    /// double the space.
    fn default() -> Self {
        SnapshotPolicy {
            every: 1_000,
            journal_outgrows: false,
            keep: 1,
        }
    }
}

impl SnapshotPolicy {
    /// A snapshot after every `k` entries (at least 1).
    pub fn every(k: u64) -> Self {
        SnapshotPolicy {
            every: k.max(1),
            journal_outgrows: false,
            keep: 1,
        }
    }

    /// Also a snapshot when the entries since the last snapshot are larger than it (for states
    /// whose fields are overwritten more than appended to).
    #[must_use]
    pub fn when_journal_outgrows(mut self, on: bool) -> Self {
        self.journal_outgrows = on;
        self
    }

    /// Keep the newest `n` snapshots of a thread (at least 1; default 1) when writing a new one;
    /// older ones are deleted (see the type's docs). `u32::MAX` keeps them all.
    #[must_use]
    pub fn keep(mut self, n: u32) -> Self {
        self.keep = n.max(1);
        self
    }

    /// How many of a thread's newest snapshots are kept.
    pub fn kept(&self) -> u32 {
        self.keep
    }

    /// The most entries a load replays.
    pub fn max_replays(&self) -> u64 {
        self.every
    }

    /// Whether a snapshot is due after `entries` entries of `bytes` bytes since the last
    /// snapshot, which was `snapshot_bytes` long.
    pub fn is_due(&self, entries: u64, bytes: u64, snapshot_bytes: u64) -> bool {
        entries >= self.every || (self.journal_outgrows && bytes > snapshot_bytes)
    }
}

#[derive(Debug, Clone, Default)]
pub(crate) struct Config {
    pub(crate) policy: SnapshotPolicy,
    pub(crate) retry: ConflictRetry,
    pub(crate) migrations: Migrations,
    /// Shared by the store's clones and by stores derived with another policy or migration.
    pub(crate) schemas: Arc<SchemaCache>,
}

/// A state as loaded, with its version: what [`Store::load`] and [`Store::load_at`] return.
///
/// ```
/// use agentstate::state::AgentState;
/// use agentstate_store::SqliteStore;
///
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let store = SqliteStore::open_in_memory()?;
/// store.create("t", AgentState::default()).await?;
/// let loaded = store.load::<AgentState>("t").await?;
/// assert_eq!(loaded.version, 0);
/// let agentstate_store::Versioned { state, version } = loaded; // or destructure
/// assert!(state.context.is_empty() && version == 0);
/// # Ok::<(), agentstate_store::StoreError>(())
/// # }).unwrap();
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Versioned<S> {
    /// The state.
    pub state: S,
    /// Its version: the number of the last entry merged into it (0: the initial state).
    pub version: u64,
}

/// Which entries [`Store::history`] lists: those between two versions (both exclusive), at
/// most [`limit`](HistoryQuery::limit) of them, oldest or newest first.
///
/// Page forward with [`after`](HistoryQuery::after) the last version of a page, backward
/// (newest first) with [`before`](HistoryQuery::before) it.
///
/// ```
/// use agentstate_store::HistoryQuery;
///
/// let first = HistoryQuery::oldest(50);              // versions 1, 2, ... 50
/// let next = HistoryQuery::oldest(50).after(50);     // 51 ... 100
/// let latest = HistoryQuery::newest(20);             // the newest 20, newest first
/// let older = HistoryQuery::newest(20).before(981);  // 980, 979, ... 961
/// assert_eq!((first.limit, next.after, older.before), (50, 50, Some(981)));
/// assert!(latest.newest_first && !first.newest_first);
/// assert_eq!(HistoryQuery::default(), HistoryQuery::oldest(100));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HistoryQuery {
    /// Only entries after this version (0: from the start).
    pub after: u64,
    /// Only entries before this version (`None`: up to the newest).
    pub before: Option<u64>,
    /// At most this many entries.
    pub limit: u32,
    /// Newest first (`true`) or oldest first.
    pub newest_first: bool,
}

impl Default for HistoryQuery {
    /// The oldest 100 entries.
    fn default() -> Self {
        HistoryQuery::oldest(100)
    }
}

impl HistoryQuery {
    /// At most `limit` entries, oldest first.
    pub fn oldest(limit: u32) -> Self {
        HistoryQuery {
            after: 0,
            before: None,
            limit,
            newest_first: false,
        }
    }

    /// At most `limit` entries, newest first.
    pub fn newest(limit: u32) -> Self {
        HistoryQuery {
            newest_first: true,
            ..HistoryQuery::oldest(limit)
        }
    }

    /// Only entries after version `seq`.
    #[must_use]
    pub fn after(mut self, seq: u64) -> Self {
        self.after = seq;
        self
    }

    /// Only entries before version `seq`.
    #[must_use]
    pub fn before(mut self, seq: u64) -> Self {
        self.before = Some(seq);
        self
    }
}

/// Threads of typed states in a database `B` (`SqliteStore`, `PostgresStore`, or
/// [`AnyStore`](crate::AnyStore) for a backend chosen at run time): created, loaded (latest or
/// at any version), forked, copied, listed, snapshotted, compacted, rewound and deleted;
/// writing goes through a [`Thread`] handle. Cheap to clone; clones share the database. Every operation's
/// future is `Send`; dropping it cancels the operation, and each write is one transaction, so a
/// cancelled write is either whole or absent.
#[derive(Debug)]
pub struct Store<B> {
    pub(crate) backend: Arc<B>,
    pub(crate) config: Arc<Config>,
}

impl<B> Clone for Store<B> {
    fn clone(&self) -> Self {
        Store {
            backend: Arc::clone(&self.backend),
            config: Arc::clone(&self.config),
        }
    }
}

/// A state as loaded, with what the writer needs to keep to its snapshot policy.
pub(crate) struct LoadedState<S> {
    pub(crate) state: S,
    pub(crate) version: u64,
    pub(crate) replayed: u64,
    pub(crate) replayed_bytes: u64,
    pub(crate) base_bytes: u64,
    /// The fingerprint recorded with the thread (entries of another type record theirs).
    pub(crate) fingerprint: u64,
    /// The thread's incarnation.
    pub(crate) incarnation: i64,
}

/// What [`Store::catch_up`] did.
pub(crate) enum CatchUp<S> {
    /// Replayed the entries after the caller's version into its state.
    Continued {
        version: u64,
        replayed: u64,
        bytes: u64,
        /// The thread's fingerprint now.
        fingerprint: u64,
    },
    /// Loaded the thread afresh.
    Fresh(LoadedState<S>),
}

/// What a compaction did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Compaction {
    /// The version whose snapshot was stored.
    pub snapshot: u64,
    /// How many entries were dropped.
    pub dropped: u64,
}

impl<B: Backend> Store<B> {
    /// A store over `backend`, with the default snapshot policy and no migrations.
    pub fn new(backend: B) -> Self {
        Store {
            backend: Arc::new(backend),
            config: Arc::new(Config::default()),
        }
    }

    /// The backend.
    pub fn backend(&self) -> &B {
        &self.backend
    }

    /// Uses `policy` for the snapshots written by this store's thread handles.
    #[must_use]
    pub fn with_snapshot_policy(mut self, policy: SnapshotPolicy) -> Self {
        Arc::make_mut(&mut self.config).policy = policy;
        self
    }

    /// Uses `policy` for [`Thread::merge_with`] on this store's thread handles (see
    /// [`ConflictRetry`]; a handle can override it with [`Thread::set_conflict_retry`]).
    #[must_use]
    pub fn with_conflict_retry(mut self, policy: ConflictRetry) -> Self {
        Arc::make_mut(&mut self.config).retry = policy;
        self
    }

    /// How [`Thread::merge_with`] retries on a conflict on this store's handles.
    pub fn conflict_retry(&self) -> ConflictRetry {
        self.config.retry
    }

    /// Registers a migration, applied when rows of version `from` are loaded as a type of
    /// version `to` (chains of steps are followed; see [`migrate`](crate::migrate)). A version
    /// pair registered twice makes every load that needs a migration fail with
    /// [`StoreError::MigrationAmbiguous`].
    #[must_use]
    pub fn with_migration(mut self, step: Migration) -> Self {
        // A duplicate is remembered by the registry and reported by every resolution.
        let _ = Arc::make_mut(&mut self.config).migrations.add(step);
        self
    }

    /// The snapshot policy.
    pub fn snapshot_policy(&self) -> SnapshotPolicy {
        self.config.policy
    }

    /// Creates thread `id` starting at `initial` (version 0) and returns its handle. Fails with
    /// [`StoreError::ThreadExists`] if there is one. With metadata to find it by:
    /// [`create_with`](Store::create_with).
    pub async fn create<S: StoredState>(
        &self,
        id: &str,
        initial: S,
    ) -> Result<Thread<S, B>, StoreError> {
        self.create_with(id, initial, Map::new()).await
    }

    /// As [`create`](Store::create), with user metadata (a JSON object) that
    /// [`list`](Store::list) filters by.
    ///
    /// ```
    /// use agentstate::state::AgentState;
    /// use agentstate_store::{SqliteStore, ThreadQuery};
    /// use serde_json::json;
    ///
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// let store = SqliteStore::open_in_memory()?;
    /// let owner = |user: &str| json!({ "user": user }).as_object().cloned().unwrap();
    /// store.create_with("a", AgentState::default(), owner("ann")).await?;
    /// store.create_with("b", AgentState::default(), owner("bob")).await?;
    /// store.create("c", AgentState::default()).await?; // no metadata
    ///
    /// let anns = store.list(ThreadQuery::first(10).with("user", json!("ann"))).await?;
    /// assert_eq!(anns.len(), 1);
    /// assert_eq!(anns[0].metadata, owner("ann"));
    /// # Ok::<(), agentstate_store::StoreError>(())
    /// # }).unwrap();
    /// ```
    pub async fn create_with<S: StoredState>(
        &self,
        id: &str,
        initial: S,
        metadata: Map<String, Value>,
    ) -> Result<Thread<S, B>, StoreError> {
        let json = serde_json::to_string(&initial)
            .map_err(|e| StoreError::corrupt(id, "initial state", e))?;
        let base_bytes = json.len() as u64;
        crate::record::check_id(id)?;
        self.record_schema::<S>().await?;
        let info = self
            .backend
            .create(NewThread {
                id: id.to_owned(),
                fingerprint: fingerprint::<S>(),
                initial: Some(json),
                parent: None,
                metadata: Value::Object(metadata).to_string(),
                created_ms: now_ms(),
            })
            .await?;
        Ok(Thread::new(
            self.clone(),
            id,
            LoadedState {
                state: initial,
                version: 0,
                replayed: 0,
                replayed_bytes: 0,
                base_bytes,
                fingerprint: fingerprint::<S>(),
                incarnation: info.incarnation,
            },
        ))
    }

    /// The handle of thread `id` at its latest version.
    pub async fn thread<S: StoredState>(&self, id: &str) -> Result<Thread<S, B>, StoreError> {
        let loaded = self.load_state::<S>(id, None).await?;
        // The handle's entries record `S`'s fingerprint when it is not the thread's.
        self.record_schema::<S>().await?;
        Ok(Thread::new(self.clone(), id, loaded))
    }

    /// The handle of thread `id`, created with `initial()` if it does not exist yet (another
    /// process creating it at the same time is fine: then it is opened).
    pub async fn thread_or_create<S: StoredState>(
        &self,
        id: &str,
        initial: impl FnOnce() -> S,
    ) -> Result<Thread<S, B>, StoreError> {
        match self.thread::<S>(id).await {
            Err(StoreError::ThreadNotFound { .. }) => match self.create(id, initial()).await {
                Err(StoreError::ThreadExists { .. }) => self.thread::<S>(id).await,
                other => other,
            },
            other => other,
        }
    }

    /// The latest state of thread `id`, with its version.
    pub async fn load<S: StoredState>(&self, id: &str) -> Result<Versioned<S>, StoreError> {
        let loaded = self.load_state::<S>(id, None).await?;
        Ok(Versioned {
            state: loaded.state,
            version: loaded.version,
        })
    }

    /// The state of thread `id` at version `seq` (time travel): what it was right after entry
    /// `seq` was merged (0: the initial state), with its version (`seq`).
    pub async fn load_at<S: StoredState>(
        &self,
        id: &str,
        seq: u64,
    ) -> Result<Versioned<S>, StoreError> {
        let loaded = self.load_state::<S>(id, Some(seq)).await?;
        Ok(Versioned {
            state: loaded.state,
            version: loaded.version,
        })
    }

    /// The thread's row: version, parent, metadata.
    pub async fn info(&self, id: &str) -> Result<ThreadInfo, StoreError> {
        crate::record::check_lookup(id)?;
        self.backend.info(id).await
    }

    /// A page of the thread's history: the metadata of the entries `query` selects (versions
    /// between its bounds, at most its limit, oldest or newest first). Never reads a state or
    /// an update.
    ///
    /// The history of a fork is that of the versions it was built from, like `git log` of a
    /// branch: its parent's entries up to the fork point (and theirs, for a fork of a fork;
    /// each with [`inherited_from`](EntryInfo::inherited_from) naming the thread that holds
    /// it), then its own. Paging goes straight through the fork point. A fork's own entries
    /// alone are those after its fork point: `HistoryQuery::oldest(n).after(fork_seq)`.
    /// Entries compacted away (in the thread or, before a fork point, in an ancestor) are not
    /// listed.
    ///
    /// ```
    /// use agentstate::state::{AgentState, AgentStateUpdate};
    /// use agentstate_store::{HistoryQuery, SqliteStore, StepMeta};
    ///
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// let store = SqliteStore::open_in_memory()?;
    /// let mut main = store.create("main", AgentState::default()).await?;
    /// for node in ["plan", "search", "answer"] {
    ///     main.merge(AgentStateUpdate::default(), StepMeta::node(node)).await?;
    /// }
    /// store.fork("main", 2, "retry").await?;
    /// let mut retry = store.thread::<AgentState>("retry").await?;
    /// retry.merge(AgentStateUpdate::default(), StepMeta::node("answer-again")).await?;
    ///
    /// let log = store.history("retry", HistoryQuery::oldest(10)).await?;
    /// let nodes: Vec<_> = log.iter().map(|e| e.node.as_deref().unwrap()).collect();
    /// assert_eq!(nodes, ["plan", "search", "answer-again"]);
    /// assert_eq!(log[0].inherited_from.as_deref(), Some("main"));
    /// assert_eq!(log[2].inherited_from, None);
    /// // Its own entries; the newest two, newest first; the page before those.
    /// assert_eq!(store.history("retry", HistoryQuery::oldest(10).after(2)).await?.len(), 1);
    /// let latest = store.history("retry", HistoryQuery::newest(2)).await?;
    /// assert_eq!(latest.iter().map(|e| e.seq).collect::<Vec<_>>(), [3, 2]);
    /// let older = store.history("retry", HistoryQuery::newest(2).before(2)).await?;
    /// assert_eq!(older[0].node.as_deref(), Some("plan"));
    /// # Ok::<(), agentstate_store::StoreError>(())
    /// # }).unwrap();
    /// ```
    pub async fn history(
        &self,
        id: &str,
        query: HistoryQuery,
    ) -> Result<Vec<EntryInfo>, StoreError> {
        crate::record::check_lookup(id)?;
        let HistoryQuery {
            after,
            before,
            limit,
            newest_first,
        } = query;
        // The thread's own page, then its ancestors' up to each fork point, as long as the
        // range reaches before that fork point (newest first: only until the page is full);
        // each is read after the one it precedes is known.
        let mut levels: Vec<Vec<EntryInfo>> = Vec::new();
        let mut found = 0;
        let (mut thread, mut until) = (
            id.to_owned(),
            before.map_or(u64::MAX, |b| b.saturating_sub(1)),
        );
        let mut visited = vec![id.to_owned()];
        loop {
            let want = if newest_first { limit - found } else { limit };
            let page = self
                .backend
                .history(&thread, after, until, want, newest_first)
                .await?;
            let mut entries = page.entries;
            entries.truncate(want as usize);
            // A journal has no holes (compaction drops a prefix): one is corrupt data, as a
            // load of those versions would report.
            if let Some(gap) = entries
                .windows(2)
                .find(|w| w[0].seq.abs_diff(w[1].seq) != 1)
            {
                let (low, high) = (gap[0].seq.min(gap[1].seq), gap[0].seq.max(gap[1].seq));
                return Err(StoreError::corrupt(
                    &thread,
                    format!("journal before entry {high}"),
                    format!("entry {} is missing", low + 1),
                ));
            }
            if thread != id {
                for entry in &mut entries {
                    entry.inherited_from = Some(thread.clone());
                }
            }
            found += entries.len() as u32;
            levels.push(entries);
            if newest_first && found >= limit {
                break;
            }
            match page.parent {
                Some((parent, fork)) if fork > after => {
                    if visited.contains(&parent) {
                        return Err(StoreError::corrupt(
                            id,
                            "fork chain",
                            format!(
                                "it is a cycle of forks: {} -> `{parent}`",
                                visited
                                    .iter()
                                    .map(|t| format!("`{t}`"))
                                    .collect::<Vec<_>>()
                                    .join(" -> ")
                            ),
                        ));
                    }
                    visited.push(parent.clone());
                    (thread, until) = (parent, until.min(fork));
                }
                _ => break,
            }
        }
        if newest_first {
            return Ok(levels.into_iter().flatten().collect());
        }
        let mut out = levels.pop().unwrap_or_default();
        while let Some(level) = levels.pop() {
            if out.len() >= limit as usize {
                break;
            }
            out.extend(level);
        }
        out.truncate(limit as usize);
        Ok(out)
    }

    /// A page of threads, ordered by id, filtered by metadata.
    pub async fn list(&self, query: ThreadQuery) -> Result<Vec<ThreadInfo>, StoreError> {
        self.backend.list(query).await
    }

    /// Deletes thread `id` with its journal and snapshots; false if there was none.
    pub async fn delete(&self, id: &str) -> Result<bool, StoreError> {
        crate::record::check_lookup(id)?;
        self.backend.delete(id).await
    }

    /// Takes the run lease on thread `id` for `owner` (a string naming the worker or run) for
    /// `ttl`, in one statement: one worker at a time runs a thread (see
    /// [`Lease`]). Succeeds if no one holds the lease, it has expired (its holder
    /// died: this takes it over), or it is already `owner`'s (then it is extended to `ttl` from
    /// now). Otherwise fails with [`StoreError::Leased`] (`thread_leased`), naming the holder
    /// and how long its lease still has. A missing thread is [`StoreError::ThreadNotFound`]; an
    /// empty owner, or one with a control character, [`StoreError::InvalidLeaseOwner`].
    ///
    /// The returned [`Lease`] does not renew itself, and dropping it does nothing (the lease
    /// then expires): renew it while running, release it when done.
    ///
    /// ```
    /// use agentstate::state::AgentState;
    /// use agentstate_store::{SqliteStore, StoreError};
    /// use std::time::Duration;
    ///
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let store = SqliteStore::open_in_memory()?;
    /// store.create("t", AgentState::default()).await?;
    /// let _dead = store.lease("t", "worker-1", Duration::from_millis(50)).await?;
    /// match store.lease("t", "worker-2", Duration::from_secs(30)).await {
    ///     Err(StoreError::Leased { owner, .. }) => assert_eq!(owner, "worker-1"),
    ///     other => panic!("{other:?}"),
    /// }
    /// // worker-1 never renews: once its lease has expired, worker-2 takes the thread over.
    /// tokio::time::sleep(Duration::from_millis(60)).await;
    /// let lease = store.lease("t", "worker-2", Duration::from_secs(30)).await?;
    /// assert_eq!(lease.owner(), "worker-2");
    /// # Ok::<(), agentstate_store::StoreError>(())
    /// # }).unwrap();
    /// ```
    pub async fn lease(
        &self,
        id: &str,
        owner: &str,
        ttl: Duration,
    ) -> Result<Lease<B>, StoreError> {
        Lease::acquire(Arc::clone(&self.backend), id, owner, ttl).await
    }

    /// Takes thread `id`'s lease away from whoever holds it, and returns it (`None` if no one
    /// held it, or it had expired). The holder's next renewal and every append of a handle
    /// fenced by it fail with `lease_lost`, so a run that is stuck or must stop (an operator's
    /// decision, a cancelled run) commits nothing more once this returned; the thread is free
    /// for another worker at once. A missing thread is [`StoreError::ThreadNotFound`].
    ///
    /// ```
    /// use agentstate::state::AgentState;
    /// use agentstate_store::{SqliteStore, StepMeta};
    /// use std::time::Duration;
    ///
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let store = SqliteStore::open_in_memory()?;
    /// let mut chat = store.create("chat", AgentState::default()).await?;
    /// let mut lease = store.lease("chat", "stuck-worker", Duration::from_secs(3600)).await?;
    /// chat.fence(&lease);
    ///
    /// let revoked = store.revoke_lease("chat").await?;
    /// assert_eq!(revoked.map(|l| l.owner).as_deref(), Some("stuck-worker"));
    /// assert_eq!(lease.renew().await.unwrap_err().category(), "lease_lost");
    /// let note = agentstate::state::AgentStateUpdate::default().context_summary(Some("late".into()));
    /// assert_eq!(chat.merge(note, StepMeta::default()).await.unwrap_err().category(), "lease_lost");
    /// // Free for another worker at once.
    /// assert_eq!(store.lease("chat", "worker-2", Duration::from_secs(30)).await?.owner(), "worker-2");
    /// # Ok::<(), agentstate_store::StoreError>(())
    /// # }).unwrap();
    /// ```
    pub async fn revoke_lease(&self, id: &str) -> Result<Option<LeaseInfo>, StoreError> {
        crate::record::check_lookup(id)?;
        self.backend.lease(id, "", 0, LeaseOp::Revoke).await
    }

    /// Who holds the run lease on thread `id`, until when, and how long it still has (by the
    /// database's clock); `None` if no one holds it or it has expired. A missing thread is
    /// [`StoreError::ThreadNotFound`].
    pub async fn lease_info(&self, id: &str) -> Result<Option<LeaseInfo>, StoreError> {
        crate::record::check_lookup(id)?;
        self.backend.lease_info(id).await
    }

    /// Creates thread `new_id` as a fork of `id` at version `seq`, in O(1): it refers to its
    /// parent, nothing is copied. Its version starts at `seq`. With metadata:
    /// [`fork_with`](Store::fork_with).
    ///
    /// ```
    /// use agentstate::state::{AgentState, AgentStateUpdate};
    /// use agentstate_store::{SqliteStore, StepMeta};
    ///
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// let store = SqliteStore::open_in_memory()?;
    /// let mut main = store.create("main", AgentState::default()).await?;
    /// main.merge(AgentStateUpdate::default().context_summary(Some("v1".into())), StepMeta::default()).await?;
    /// main.merge(AgentStateUpdate::default().context_summary(Some("v2".into())), StepMeta::default()).await?;
    ///
    /// let info = store.fork("main", 1, "what-if").await?;
    /// assert_eq!((info.version, info.parent), (1, Some(("main".to_string(), 1))));
    /// let fork = store.load::<AgentState>("what-if").await?;
    /// assert_eq!(fork.state.context_summary.as_deref(), Some("v1"));
    /// # Ok::<(), agentstate_store::StoreError>(())
    /// # }).unwrap();
    /// ```
    pub async fn fork(&self, id: &str, seq: u64, new_id: &str) -> Result<ThreadInfo, StoreError> {
        self.fork_with(id, seq, new_id, Map::new()).await
    }

    /// As [`fork`](Store::fork), with user metadata (a JSON object) for the new thread.
    pub async fn fork_with(
        &self,
        id: &str,
        seq: u64,
        new_id: &str,
        metadata: Map<String, Value>,
    ) -> Result<ThreadInfo, StoreError> {
        crate::record::check_id(new_id)?;
        self.backend
            .create(NewThread {
                id: new_id.to_owned(),
                fingerprint: 0, // the parent's
                initial: None,
                parent: Some((id.to_owned(), seq)),
                metadata: Value::Object(metadata).to_string(),
                created_ms: now_ms(),
            })
            .await
    }

    /// Creates thread `new_id` as an independent copy of thread `id` (LangGraph's thread copy):
    /// the same states at the same versions, the same history, and nothing shared. Unlike a
    /// [`fork`](Store::fork), which refers to its parent (which then cannot be deleted, nor
    /// rewound before the fork point), the copy holds its own rows: in one transaction that
    /// keeps the source's writers out, it copies the source's initial state, every entry still
    /// in its journal (the same versions, nodes, run ids, metadata and times) and every
    /// snapshot. Deleting, rewinding, compacting or appending to either thread afterwards does
    /// not change the other. With metadata of its own: [`copy_with`](Store::copy_with) (this
    /// one gives the copy none). Returns the copy's row.
    ///
    /// The copy has the source's version, [`oldest`](ThreadInfo::oldest) version (versions a
    /// compaction dropped are not in the copy either) and schema, so
    /// [`load_at`](Store::load_at) of any of the source's versions, [`history`](Store::history),
    /// appends, the snapshot policy and compaction behave on it as on the source. A copy of a
    /// fork is a fork of the same parent at the same version (its history reads the same), so
    /// that parent keeps the limits a fork puts on it. The copy is a new
    /// [`incarnation`](ThreadInfo::incarnation), without the source's lease.
    ///
    /// Refused, writing nothing, in this order: a `new_id` that [`check_id`](crate::check_id)
    /// refuses ([`StoreError::InvalidId`]); a missing source ([`StoreError::ThreadNotFound`]);
    /// a thread `new_id` that exists ([`StoreError::ThreadExists`]).
    ///
    /// ```
    /// use agentstate::state::{AgentState, AgentStateUpdate};
    /// use agentstate_store::{HistoryQuery, SqliteStore, StepMeta};
    ///
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// let store = SqliteStore::open_in_memory()?;
    /// let mut main = store.create("main", AgentState::default()).await?;
    /// let note = |text: &str| AgentStateUpdate::default().context_summary(Some(text.into()));
    /// main.merge(note("v1"), StepMeta::node("plan")).await?;
    /// main.merge(note("v2"), StepMeta::node("answer")).await?;
    ///
    /// let info = store.copy("main", "main-copy").await?;
    /// assert_eq!((info.version, info.parent), (2, None)); // its own rows, no parent
    /// let log = store.history("main-copy", HistoryQuery::oldest(10)).await?;
    /// assert_eq!(log.iter().map(|e| e.node.as_deref().unwrap()).collect::<Vec<_>>(), ["plan", "answer"]);
    ///
    /// // The source goes; the copy stays, every version of it.
    /// store.delete("main").await?;
    /// let v1 = store.load_at::<AgentState>("main-copy", 1).await?;
    /// assert_eq!(v1.state.context_summary.as_deref(), Some("v1"));
    /// let mut copy = store.thread::<AgentState>("main-copy").await?;
    /// assert_eq!(copy.merge(note("v3"), StepMeta::node("answer")).await?, 3);
    /// # Ok::<(), agentstate_store::StoreError>(())
    /// # }).unwrap();
    /// ```
    pub async fn copy(&self, id: &str, new_id: &str) -> Result<ThreadInfo, StoreError> {
        self.copy_with(id, new_id, Map::new()).await
    }

    /// As [`copy`](Store::copy), with user metadata (a JSON object) for the new thread (the
    /// source's is not copied: pass it, from [`info`](Store::info), to keep it).
    pub async fn copy_with(
        &self,
        id: &str,
        new_id: &str,
        metadata: Map<String, Value>,
    ) -> Result<ThreadInfo, StoreError> {
        crate::record::check_id(new_id)?;
        crate::record::check_lookup(id)?;
        self.backend
            .copy(id, new_id, Value::Object(metadata).to_string(), now_ms())
            .await
    }

    /// Stores a snapshot of the thread's latest version; returns that version. (If the thread
    /// was rewound or deleted and created again while its state was read, no snapshot is
    /// stored: it would be of a history that is gone.)
    pub async fn snapshot<S: StoredState>(&self, id: &str) -> Result<u64, StoreError> {
        let loaded = self.load_state::<S>(id, None).await?;
        self.record_schema::<S>().await?;
        let json = to_json(id, &loaded.state)?;
        self.backend
            .put_snapshot(
                id,
                loaded.version,
                loaded.incarnation,
                fingerprint::<S>(),
                json,
                self.config.policy.kept(),
            )
            .await?;
        Ok(loaded.version)
    }

    /// Compacts the thread: stores a snapshot of its latest version and drops, in the same
    /// transaction, the entries and snapshots before it (keeping what forks of it still start
    /// from). Versions before the snapshot can no longer be loaded. If the thread was rewound
    /// or deleted and created again while its state was read, nothing is written and it fails
    /// with [`StoreError::Recreated`].
    pub async fn compact<S: StoredState>(&self, id: &str) -> Result<Compaction, StoreError> {
        let loaded = self.load_state::<S>(id, None).await?;
        self.record_schema::<S>().await?;
        let json = to_json(id, &loaded.state)?;
        let dropped = self
            .backend
            .compact(
                id,
                loaded.version,
                loaded.incarnation,
                fingerprint::<S>(),
                json,
            )
            .await?;
        Ok(Compaction {
            snapshot: loaded.version,
            dropped,
        })
    }

    /// Takes thread `id` back to version `seq`, as if nothing after it had been written (a run
    /// rolled back). In one transaction that keeps writers out, it deletes the thread's entries
    /// and snapshots after `seq` and sets its version to `seq`: the next append is version
    /// `seq + 1`, loads and [`history`](Store::history) see only the versions up to `seq`, and
    /// loading a later version is [`StoreError::VersionOutOfRange`], as for any version the
    /// thread does not have. Forks starting at or before `seq` are untouched. Returns the
    /// thread's row after it.
    ///
    /// The thread gets a new [`incarnation`](ThreadInfo::incarnation), since the versions after
    /// `seq` will be written again with other updates: a [`Thread`] handle that read the thread
    /// before is refused on its next append with [`StoreError::Recreated`]
    /// (`state_write_conflict`) instead of appending on top of a history that is gone, and is
    /// not [`is_current`](Thread::is_current) with a lease taken since; its
    /// [`reload`](Thread::reload), or a new handle from [`thread`](Store::thread), reads the
    /// thread afresh.
    ///
    /// Refused, writing nothing, in this order: a missing thread
    /// ([`StoreError::ThreadNotFound`]); `seq` after the thread's version, or before its oldest
    /// version (compacted away, or for a fork, before the version it starts at)
    /// ([`StoreError::VersionOutOfRange`], naming the versions there are); a lease on the
    /// thread that has not expired, whoever holds it ([`StoreError::Leased`]: the worker
    /// running the thread would go on from the history taken back; take the lease away first
    /// with [`revoke_lease`](Store::revoke_lease)); a fork of the thread that starts after
    /// `seq` ([`StoreError::HasForks`]: delete the fork first). With `seq` the thread's
    /// version, once these checks pass, it writes nothing and the incarnation stays.
    ///
    /// ```
    /// use agentstate::state::{AgentState, AgentStateUpdate};
    /// use agentstate_store::{HistoryQuery, SqliteStore, StepMeta, StoreError};
    /// use std::time::Duration;
    ///
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let store = SqliteStore::open_in_memory()?;
    /// let mut chat = store.create("chat", AgentState::default()).await?;
    /// let note = |text: &str| AgentStateUpdate::default().context_summary(Some(text.into()));
    /// chat.merge(note("kept"), StepMeta::node("user")).await?;
    ///
    /// // A run writes two steps, then is cancelled: its lease is taken away, its steps back.
    /// let lease = store.lease("chat", "run-2", Duration::from_secs(30)).await?;
    /// chat.fence(&lease);
    /// chat.merge(note("run-2, step 1"), StepMeta::node("bot")).await?;
    /// chat.merge(note("run-2, step 2"), StepMeta::node("bot")).await?;
    /// assert_eq!(store.rewind("chat", 1).await.unwrap_err().category(), "thread_leased");
    /// store.revoke_lease("chat").await?;
    /// assert_eq!(store.rewind("chat", 1).await?.version, 1);
    /// let now = store.load::<AgentState>("chat").await?;
    /// assert_eq!((now.state.context_summary.as_deref(), now.version), (Some("kept"), 1));
    /// assert_eq!(store.history("chat", HistoryQuery::oldest(10)).await?.len(), 1);
    ///
    /// // The run's handle read the history taken back: refused until it reloads.
    /// chat.unfence();
    /// let err = chat.merge(note("late"), StepMeta::node("bot")).await.unwrap_err();
    /// assert!(matches!(err, StoreError::Recreated { .. }), "{err}");
    /// chat.reload().await?;
    /// assert_eq!(chat.merge(note("next"), StepMeta::node("user")).await?, 2);
    /// # Ok::<(), agentstate_store::StoreError>(())
    /// # }).unwrap();
    /// ```
    pub async fn rewind(&self, id: &str, seq: u64) -> Result<ThreadInfo, StoreError> {
        crate::record::check_lookup(id)?;
        self.backend.rewind(id, seq).await
    }

    /// Writes a migration back: rewrites the thread's own rows (its initial state, every entry
    /// still in the journal, every snapshot) in `S`'s schema, through the registered
    /// [`Migration`]s, and records `S`'s fingerprint as the thread's, in one transaction that
    /// keeps writers out; returns the thread's version, which does not change. Loads as `S`
    /// then read the rows directly, without the migration. If any row fails to migrate (or to
    /// read as `S`), nothing is written and the error names the thread and the row. Each row is
    /// read as `S` and written as `S` writes it, so it costs one pass over the thread, with the
    /// thread in memory.
    ///
    /// Writers holding the thread from before get a conflict
    /// ([`StoreError::Migrated`], `state_write_conflict`) on their next append, so no entry of
    /// the old schema is ever recorded as one of the new; [`Thread::merge_with`] reloads and
    /// retries. A fork starts from its parent's rows: migrate the parent too (until then,
    /// loading the fork still uses the migration for the parent's part), and the parent's other
    /// forks, which keep their own schema until migrated, read the parent's part through a
    /// migration from the parent's new schema.
    ///
    /// ```
    /// use agentstate::AgentState;
    /// use agentstate_store::migrate::{fingerprint, Migration};
    /// use agentstate_store::{SqliteStore, StepMeta};
    /// use serde::{Deserialize, Serialize};
    ///
    /// #[derive(AgentState, Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
    /// #[agent_state(version = 1)]
    /// struct V1 { #[reducer(append)] notes: Vec<String> }
    /// #[derive(AgentState, Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
    /// #[agent_state(version = 2)]
    /// struct V2 { #[reducer(append)] lines: Vec<String> }
    ///
    /// fn rename(mut value: serde_json::Value) -> Result<serde_json::Value, String> {
    ///     let map = value.as_object_mut().ok_or("not an object")?;
    ///     if let Some(notes) = map.remove("notes") {
    ///         map.insert("lines".into(), notes);
    ///     }
    ///     Ok(value)
    /// }
    ///
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// let store = SqliteStore::open_in_memory()?;
    /// let mut t = store.create("t", V1::default()).await?;
    /// t.merge(V1Update::default().notes(vec!["hi".to_string()]), StepMeta::default()).await?;
    ///
    /// let store = store.with_migration(Migration::new(1, 2, rename, rename));
    /// assert_eq!(store.migrate_thread::<V2>("t").await?, 1);
    /// assert_eq!(store.info("t").await?.fingerprint, fingerprint::<V2>());
    /// assert_eq!(store.load::<V2>("t").await?.state.lines, ["hi"]);
    /// # Ok::<(), agentstate_store::StoreError>(())
    /// # }).unwrap();
    /// ```
    pub async fn migrate_thread<S: StoredState>(&self, id: &str) -> Result<u64, StoreError> {
        self.record_schema::<S>().await?;
        // Every schema the rows may name, read now: the rewrite runs without awaiting.
        self.config.schemas.fill(self.backend.schemas().await?);
        let store = self.clone();
        let thread = id.to_owned();
        let target = Arc::new(Target::of::<S>());
        let rewrite: Rewriter = Box::new(move |row| {
            store
                .rewrite_row::<S>(&thread, &target, row)
                .map_err(|err| match err {
                    // Name the row that failed.
                    StoreError::Migration {
                        thread,
                        from,
                        to,
                        reason,
                    } => StoreError::Migration {
                        thread,
                        from,
                        to,
                        reason: format!("{}: {reason}", row.describe()),
                    },
                    other => other,
                })
        });
        self.backend.rewrite(id, fingerprint::<S>(), rewrite).await
    }

    /// Records `S`'s schema in the database, once per store (see [`migrate`](crate::migrate)).
    async fn record_schema<S: StoredState>(&self) -> Result<(), StoreError> {
        let fingerprint = fingerprint::<S>();
        if self.config.schemas.is_recorded(fingerprint) {
            return Ok(());
        }
        self.backend.put_schema(SchemaRecord::of::<S>()).await?;
        self.config.schemas.set_recorded(fingerprint);
        Ok(())
    }

    /// The recorded schema of fingerprint `stored`: from the store's cache, or, when the cache
    /// does not know it yet, after reading every recorded schema once more.
    async fn recorded(&self, stored: u64) -> Result<Option<Arc<SchemaRecord>>, StoreError> {
        if let Some(record) = self.config.schemas.get(stored) {
            return Ok(Some(record));
        }
        self.config.schemas.fill(self.backend.schemas().await?);
        Ok(self.config.schemas.get(stored))
    }

    /// How rows of schema `stored` are read as `target`: from the plans made already for this
    /// load, or decided now (reading the recorded schemas once if `stored` is not known yet).
    async fn plan<'p>(
        &self,
        thread: &str,
        target: &Target,
        stored: u64,
        plans: &'p mut HashMap<u64, Plan>,
    ) -> Result<&'p Plan, StoreError> {
        use std::collections::hash_map::Entry;
        match plans.entry(stored) {
            Entry::Occupied(known) => Ok(known.into_mut()),
            Entry::Vacant(slot) => {
                let plan = if stored == target.fingerprint {
                    Plan::Direct
                } else {
                    let record = self.recorded(stored).await?;
                    Plan::of(&self.config.migrations, thread, target, stored, record)?
                };
                Ok(slot.insert(plan))
            }
        }
    }

    /// `err`, a row of schema `stored` that did not read as `target`: if it is a row of the
    /// target's own schema (read directly) that reads as corrupt data, and the recorded schema
    /// shows fields whose Rust type changed since, the incompatible edit it is.
    async fn explain(&self, err: StoreError, target: &Target, stored: u64) -> StoreError {
        let StoreError::Corrupt {
            thread,
            what,
            reason,
        } = &err
        else {
            return err;
        };
        if stored != target.fingerprint {
            return err;
        }
        // An error reading the schemas leaves the original error as it was.
        self.recorded(stored)
            .await
            .ok()
            .flatten()
            .and_then(|r| crate::migrate::retyped(thread, target, &r, what, reason))
            .unwrap_or(err)
    }

    /// One row of thread `id` in `S`'s schema, as `S` writes it (the schemas it names are in
    /// the cache).
    fn rewrite_row<S: StoredState>(
        &self,
        id: &str,
        target: &Target,
        row: StoredRow<'_>,
    ) -> Result<String, StoreError> {
        let plan = |stored: u64| {
            if stored == target.fingerprint {
                return Ok(Plan::Direct);
            }
            let record = self.config.schemas.get(stored);
            Plan::of(&self.config.migrations, id, target, stored, record)
        };
        match row {
            StoredRow::Initial { fingerprint, json } => to_json(
                id,
                &decode_state::<S>(id, target, "initial state", json, &plan(fingerprint)?)?,
            ),
            StoredRow::Snapshot {
                seq,
                fingerprint,
                json,
            } => to_json(
                id,
                &decode_state::<S>(
                    id,
                    target,
                    &format!("snapshot at version {seq}"),
                    json,
                    &plan(fingerprint)?,
                )?,
            ),
            StoredRow::Entry {
                seq,
                kind,
                fingerprint,
                json,
            } => {
                let what = format!("entry {seq}");
                let plan = plan(fingerprint)?;
                let value: Value =
                    serde_json::from_str(json).map_err(|e| StoreError::corrupt(id, &what, e))?;
                match (EntryKind::from_code(kind), value) {
                    (Some(EntryKind::Update), value) => {
                        to_json(id, &decode_update::<S>(id, target, &what, value, &plan)?)
                    }
                    (Some(_), Value::Array(branches)) => to_json(
                        id,
                        &branches
                            .into_iter()
                            .map(|b| decode_update::<S>(id, target, &what, b, &plan))
                            .collect::<Result<Vec<_>, _>>()?,
                    ),
                    (Some(_), _) => Err(StoreError::corrupt(
                        id,
                        what,
                        "a parallel step is not a JSON array of updates",
                    )),
                    (None, _) => Err(StoreError::corrupt(
                        id,
                        what,
                        format!("unknown entry kind {kind}"),
                    )),
                }
            }
        }
    }

    /// Builds version `seq` (latest if `None`) of thread `id` as an `S`, following forks to
    /// their parents and migrating rows of older schemas.
    pub(crate) async fn load_state<S: StoredState>(
        &self,
        id: &str,
        seq: Option<u64>,
    ) -> Result<LoadedState<S>, StoreError> {
        crate::record::check_lookup(id)?;
        let first = self.backend.load(id, seq, None).await?;
        self.build(id, first).await
    }

    /// Brings `held`, the state of thread `id` at `version` in its life `incarnation`, to the
    /// latest version by replaying only the entries after it; if they were compacted away, or
    /// the thread was deleted and created again, loads the thread afresh.
    pub(crate) async fn catch_up<S: StoredState>(
        &self,
        id: &str,
        held: &mut S,
        version: u64,
        incarnation: i64,
    ) -> Result<CatchUp<S>, StoreError> {
        let first = self.backend.load(id, None, Some(version)).await?;
        if !matches!(first.base, Base::Continue(_)) || first.thread.incarnation != incarnation {
            let first = if matches!(first.base, Base::Continue(_)) {
                self.backend.load(id, None, None).await?
            } else {
                first
            };
            return self.build(id, first).await.map(CatchUp::Fresh);
        }
        let target = Target::of::<S>();
        let mut plans = HashMap::new();
        let mut first = first;
        let (mut replayed, mut bytes) = (0, 0);
        let own = self
            .plan(id, &target, first.thread.fingerprint, &mut plans)
            .await?
            .clone();
        while let Some(entry) = first.entries.next().await? {
            let stored = entry.fingerprint.unwrap_or(first.thread.fingerprint);
            // Most entries are in the thread's own schema: no lookup for them.
            let plan = match entry.fingerprint {
                None => &own,
                Some(_) => self.plan(id, &target, stored, &mut plans).await?,
            };
            if let Err(err) = replay_entry(&first.thread, &target, &entry, plan, held) {
                return Err(self.explain(err, &target, stored).await);
            }
            replayed += 1;
            bytes += entry.body.len() as u64;
        }
        Ok(CatchUp::Continued {
            version: first.seq,
            replayed,
            bytes,
            fingerprint: first.thread.fingerprint,
        })
    }

    async fn build<S: StoredState>(
        &self,
        id: &str,
        first: Loaded,
    ) -> Result<LoadedState<S>, StoreError> {
        let target = Target::of::<S>();
        let mut plans: HashMap<u64, Plan> = HashMap::new();
        let mut segments: Vec<Loaded> = Vec::new();
        let mut next = first;
        loop {
            let parent = match &next.base {
                Base::Parent { thread, seq } => Some((thread.clone(), *seq)),
                _ => None,
            };
            segments.push(next);
            match parent {
                Some((parent, _)) if segments.iter().any(|s| s.thread.id == parent) => {
                    return Err(fork_cycle(id, &segments, &parent));
                }
                Some((parent, seq)) => match self.backend.load(&parent, Some(seq), None).await {
                    Ok(loaded) => next = loaded,
                    // The store checks a fork point when it forks: out of its parent's range,
                    // the fork chain was edited (a cycle of forks, most likely).
                    Err(StoreError::VersionOutOfRange { oldest, head, .. }) => {
                        return Err(self
                            .bad_fork_point(id, &segments, &parent, seq, oldest, head)
                            .await);
                    }
                    Err(err) => return Err(err),
                },
                None => break,
            }
        }
        // Decide how each segment's rows are read before reading any (a missing migration
        // fails here, not after a partial replay).
        for segment in &segments {
            self.plan(
                &segment.thread.id,
                &target,
                segment.thread.fingerprint,
                &mut plans,
            )
            .await?;
        }
        let version = segments[0].seq;
        let thread_fingerprint = segments[0].thread.fingerprint;
        let incarnation = segments[0].thread.incarnation;
        let root = segments.last().expect("at least one segment");
        let (mut state, base_bytes): (S, u64) = match &root.base {
            Base::Initial(json) => {
                let plan = self
                    .plan(
                        &root.thread.id,
                        &target,
                        root.thread.fingerprint,
                        &mut plans,
                    )
                    .await?;
                match decode_state(&root.thread.id, &target, "initial state", json, plan) {
                    Ok(state) => (state, json.len() as u64),
                    Err(err) => {
                        return Err(self.explain(err, &target, root.thread.fingerprint).await)
                    }
                }
            }
            Base::Snapshot {
                seq,
                fingerprint,
                json,
            } => {
                let plan = self
                    .plan(&root.thread.id, &target, *fingerprint, &mut plans)
                    .await?;
                let what = format!("snapshot at version {seq}");
                match decode_state(&root.thread.id, &target, &what, json, plan) {
                    Ok(state) => (state, json.len() as u64),
                    Err(err) => return Err(self.explain(err, &target, *fingerprint).await),
                }
            }
            Base::Parent { .. } | Base::Continue(_) => {
                return Err(StoreError::corrupt(
                    id,
                    "thread",
                    "its load did not start from a state",
                ))
            }
        };
        let (mut replayed, mut replayed_bytes) = (0, 0);
        for segment in segments.iter_mut().rev() {
            let own = plans[&segment.thread.fingerprint].clone();
            while let Some(entry) = segment.entries.next().await? {
                let stored = entry.fingerprint.unwrap_or(segment.thread.fingerprint);
                // Most entries are in the thread's own schema: no lookup for them.
                let plan = match entry.fingerprint {
                    None => &own,
                    Some(_) => {
                        self.plan(&segment.thread.id, &target, stored, &mut plans)
                            .await?
                    }
                };
                if let Err(err) = replay_entry(&segment.thread, &target, &entry, plan, &mut state) {
                    return Err(self.explain(err, &target, stored).await);
                }
                replayed += 1;
                replayed_bytes += entry.body.len() as u64;
            }
        }
        Ok(LoadedState {
            state,
            version,
            replayed,
            replayed_bytes,
            base_bytes,
            fingerprint: thread_fingerprint,
            incarnation,
        })
    }
}

impl<B: Backend> Store<B> {
    /// The error for a fork chain whose last thread starts at version `seq` of `parent`, which
    /// has no such version: a cycle of forks if `parent`'s own chain comes back to one of
    /// `segments`' threads, else a fork point out of range.
    async fn bad_fork_point(
        &self,
        id: &str,
        segments: &[Loaded],
        parent: &str,
        seq: u64,
        oldest: u64,
        head: u64,
    ) -> StoreError {
        let mut chain: Vec<String> = segments.iter().map(|s| s.thread.id.clone()).collect();
        let mut at = parent.to_owned();
        while !chain.contains(&at) && chain.len() <= segments.len() + 1_000 {
            chain.push(at.clone());
            match self.backend.info(&at).await {
                Ok(ThreadInfo {
                    parent: Some((next, _)),
                    ..
                }) => at = next,
                _ => break,
            }
        }
        if chain.contains(&at) && chain.last() != Some(&at) {
            let chain: Vec<String> = chain.iter().map(|t| format!("`{t}`")).collect();
            return StoreError::corrupt(
                id,
                "fork chain",
                format!("it is a cycle of forks: {} -> `{at}`", chain.join(" -> ")),
            );
        }
        let child = &segments.last().expect("at least one segment").thread.id;
        StoreError::corrupt(
            id,
            "fork chain",
            format!("`{child}` starts at version {seq} of `{parent}`, whose versions are {oldest} to {head}"),
        )
    }
}

/// The error for a fork chain that comes back to `parent`, one of `segments`' threads.
fn fork_cycle(id: &str, segments: &[Loaded], parent: &str) -> StoreError {
    let chain: Vec<&str> = segments.iter().map(|s| s.thread.id.as_str()).collect();
    StoreError::corrupt(
        id,
        "fork chain",
        format!(
            "it is a cycle of forks: {} -> `{parent}`",
            chain
                .iter()
                .map(|t| format!("`{t}`"))
                .collect::<Vec<_>>()
                .join(" -> ")
        ),
    )
}

/// Reads a stored state as `S` through `plan`.
fn decode_state<S: StoredState>(
    thread: &str,
    target: &Target,
    what: &str,
    json: &str,
    plan: &Plan,
) -> Result<S, StoreError> {
    if let Plan::Direct = plan {
        return serde_json::from_str(json).map_err(|e| {
            // On failure only: read it again, to name the field.
            let reason = match serde_json::from_str::<Value>(json) {
                Ok(value) => state_misfit::<S>(&value, e),
                Err(_) => e.to_string(),
            };
            StoreError::corrupt(thread, what, reason)
        });
    }
    let value: Value =
        serde_json::from_str(json).map_err(|e| StoreError::corrupt(thread, what, e))?;
    let value = plan.state(thread, value)?;
    match serde_json::from_value::<S>(value.clone()) {
        Ok(state) => Ok(state),
        Err(e) => Err(plan.incompatible(thread, target, what, state_misfit::<S>(&value, e))),
    }
}

/// Why `value` is not an `S`, naming the field: serde names a missing one; for a value of the
/// wrong type, the field is found by reading each one alone as an update (whose reader names
/// the field, the stored value and the expected type).
fn state_misfit<S: StoredState>(value: &Value, err: serde_json::Error) -> String {
    if let Some(map) = value.as_object() {
        for (key, field) in map {
            if !S::FIELDS.contains(&key.as_str()) {
                continue;
            }
            let alone = Value::Object([(key.clone(), field.clone())].into_iter().collect());
            if let Err(e) = <S::Update as Update>::from_json(alone) {
                return format!("field `{key}` holds {}: {e}", shape(field));
            }
        }
    }
    let text = err.to_string();
    match text.strip_prefix("missing field ") {
        Some(rest) => format!(
            "field {} is required by the type but the stored state has none",
            rest.split(' ').next().unwrap_or(rest)
        ),
        None => text,
    }
}

/// A short description of a stored JSON value: its kind and (cut) text.
fn shape(value: &Value) -> String {
    let kind = match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    };
    let mut text = value.to_string();
    if text.len() > 60 {
        let cut = (0..=60)
            .rev()
            .find(|i| text.is_char_boundary(*i))
            .unwrap_or(0);
        text.truncate(cut);
        text.push_str("...");
    }
    format!("{kind} ({text})")
}

/// Reads a stored update (one, or one branch of a parallel step) as `S`'s through `plan`.
fn decode_update<S: StoredState>(
    thread: &str,
    target: &Target,
    what: &str,
    value: Value,
    plan: &Plan,
) -> Result<S::Update, StoreError> {
    let direct = matches!(plan, Plan::Direct);
    let value = plan.update(thread, value)?;
    <S::Update as Update>::from_json(value).map_err(|e| {
        if direct {
            StoreError::corrupt(thread, what, e)
        } else {
            plan.incompatible(thread, target, what, e.to_string())
        }
    })
}

/// Replays one journal entry into `state`, reading it through `plan`.
fn replay_entry<S: StoredState>(
    thread: &ThreadInfo,
    target: &Target,
    entry: &StoredEntry,
    plan: &Plan,
    state: &mut S,
) -> Result<(), StoreError> {
    let what = || format!("entry {}", entry.seq);
    let corrupt = |reason: String| StoreError::corrupt(&thread.id, what(), reason);
    let kind = EntryKind::from_code(entry.kind)
        .ok_or_else(|| corrupt(format!("unknown entry kind {}", entry.kind)))?;
    let mode = match kind {
        EntryKind::Update => None,
        EntryKind::Parallel => Some(FanIn::Ordered),
        EntryKind::ParallelStrict => Some(FanIn::Strict),
    };
    let merged = if let Plan::Direct = plan {
        // Written in this schema: read directly, as strictly as `Update::from_json`.
        match mode {
            None => state.merge(strict::<S>(&entry.body).map_err(corrupt)?),
            Some(mode) => {
                state.merge_parallel(strict_branches::<S>(&entry.body).map_err(corrupt)?, mode)
            }
        }
    } else {
        let value: Value = serde_json::from_str(&entry.body).map_err(|e| corrupt(e.to_string()))?;
        match (mode, value) {
            (None, value) => state.merge(decode_update::<S>(
                &thread.id,
                target,
                &what(),
                value,
                plan,
            )?),
            (Some(mode), Value::Array(branches)) => {
                let updates = branches
                    .into_iter()
                    .map(|b| decode_update::<S>(&thread.id, target, &what(), b, plan))
                    .collect::<Result<Vec<_>, _>>()?;
                state.merge_parallel(updates, mode)
            }
            (Some(_), _) => {
                return Err(corrupt(
                    "a parallel step is not a JSON array of updates".into(),
                ))
            }
        }
    };
    merged.map_err(|e| corrupt(format!("it no longer merges: {e}")))
}

/// The keys of a JSON object, its values skipped: what [`strict_branches`] checks before
/// reading a parallel step's updates.
struct Keys(Vec<String>);

impl<'de> serde::Deserialize<'de> for Keys {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = Keys;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a JSON object of field values")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Keys, A::Error> {
                let mut keys = Vec::new();
                while let Some(key) = map.next_key::<String>()? {
                    map.next_value::<serde::de::IgnoredAny>()?;
                    keys.push(key);
                }
                Ok(Keys(keys))
            }
        }
        deserializer.deserialize_map(Visitor)
    }
}

/// Fails on a key that is not a field of `S` (nor a field's Overwrite). A state without a
/// static field list (`FIELDS` empty: a runtime-schema state, whose update reads and checks its
/// own keys) is not checked here.
fn check_keys<S: StoredState>(keys: &Keys) -> Result<(), String> {
    if S::FIELDS.is_empty() {
        return Ok(());
    }
    for key in &keys.0 {
        let field = key.strip_suffix(OVERWRITE_SUFFIX).unwrap_or(key);
        if !S::FIELDS.contains(&field) {
            return Err(format!("field `{field}` is not a field of this state"));
        }
    }
    Ok(())
}

/// Reads an update written by `S` itself: directly (no intermediate `Value`), in one pass that
/// checks its keys as it goes ([`checked`](crate::checked)); on failure, the error
/// `Update::from_json` gives (field and path).
fn strict<S: StoredState>(json: &str) -> Result<S::Update, String> {
    if S::FIELDS.is_empty() {
        // No static field list (see `check_keys`): the update reads its own keys.
        return serde_json::from_str(json).map_err(|e| e.to_string());
    }
    let mut de = serde_json::Deserializer::from_str(json);
    crate::checked::deserialize::<S::Update, _>(&mut de, S::FIELDS)
        .and_then(|update| de.end().map(|()| update))
        .map_err(|e| explain::<S>(json).unwrap_or(e.to_string()))
}

/// Reads the branch updates of a parallel step written by `S` itself (see [`strict`]).
fn strict_branches<S: StoredState>(json: &str) -> Result<Vec<S::Update>, String> {
    let branches: Vec<Keys> = serde_json::from_str(json)
        .map_err(|e| format!("a parallel step is not a JSON array of updates: {e}"))?;
    branches.iter().try_for_each(check_keys::<S>)?;
    serde_json::from_str(json).map_err(|e| e.to_string())
}

/// `Update::from_json`'s error for `json`, which names the field and the path.
fn explain<S: StoredState>(json: &str) -> Option<String> {
    let value: Value = serde_json::from_str(json).ok()?;
    <S::Update as Update>::from_json(value)
        .err()
        .map(|e| e.to_string())
}

pub(crate) fn to_json<T: Serialize>(thread: &str, value: &T) -> Result<String, StoreError> {
    serde_json::to_string(value).map_err(|e| StoreError::corrupt(thread, "value to write", e))
}
