//! A thread handle: a typed state at a known version, written one step at a time. Each step is
//! checked against the local state, appended at the version the handle read (so a stale writer
//! gets [`StoreError::Conflict`] and writes nothing), and only then merged locally.

use crate::backend::Backend;
use crate::error::StoreError;
use crate::record::{fingerprint, now_ms, EntryKind, NewEntry, StepMeta};
use crate::store::{to_json, CatchUp, LoadedState, Store, StoredState};
use agentstate::update::{Combine, FanIn};
use serde_json::Value;

/// How many times [`Thread::merge_with`] reloads and retries after a conflict before giving up
/// with the last conflict.
pub const MAX_RETRIES: u32 = 64;

/// A thread's state at a version, and the way to append to it. Get one from
/// [`Store::create`], [`Store::thread`] or [`Store::thread_or_create`].
///
/// ```
/// use agentstate::message::{Message, Role};
/// use agentstate::state::{AgentState, AgentStateUpdate};
/// use agentstate_store::{SqliteStore, StepMeta};
///
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let store = SqliteStore::open_in_memory()?;
/// let mut thread = store.create("chat-1", AgentState::default(), Default::default()).await?;
/// let hello = AgentStateUpdate::default().context(vec![Message::text_message("hi", Role::User)]);
/// assert_eq!(thread.merge(hello, StepMeta::node("user")).await?, 1);
///
/// // A second writer that read version 0 is refused, and writes nothing.
/// let mut stale = store.thread::<AgentState>("chat-1").await?;
/// thread.merge(AgentStateUpdate::default().context_summary(Some("greeting".into())), StepMeta::default()).await?;
/// let err = stale.merge(AgentStateUpdate::default(), StepMeta::default()).await.unwrap_err();
/// assert_eq!(err.category(), "state_write_conflict");
///
/// let (state, version) = store.load::<AgentState>("chat-1").await?;
/// assert_eq!((state.context.len(), version), (1, 2));
/// # Ok::<(), agentstate_store::StoreError>(())
/// # }).unwrap();
/// ```
#[derive(Debug)]
pub struct Thread<S, B> {
    store: Store<B>,
    id: String,
    state: S,
    version: u64,
    since_snapshot: u64,
    bytes_since: u64,
    snapshot_bytes: u64,
    /// The thread's fingerprint when this handle read it.
    thread_fingerprint: u64,
    /// `S`'s fingerprint, if it is not the thread's (then each entry records it).
    own_fingerprint: Option<u64>,
    /// The thread's incarnation when this handle read it.
    incarnation: i64,
}

impl<S: StoredState, B: Backend> Thread<S, B> {
    pub(crate) fn new(store: Store<B>, id: &str, loaded: LoadedState<S>) -> Self {
        Thread {
            store,
            id: id.to_owned(),
            state: loaded.state,
            version: loaded.version,
            since_snapshot: loaded.replayed,
            bytes_since: loaded.replayed_bytes,
            snapshot_bytes: loaded.base_bytes,
            thread_fingerprint: loaded.fingerprint,
            own_fingerprint: Some(fingerprint::<S>()).filter(|f| *f != loaded.fingerprint),
            incarnation: loaded.incarnation,
        }
    }

    /// The thread's id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The state at [`version`](Thread::version).
    pub fn state(&self) -> &S {
        &self.state
    }

    /// The version this handle read or last wrote.
    pub fn version(&self) -> u64 {
        self.version
    }

    /// The state, dropping the handle.
    pub fn into_state(self) -> S {
        self.state
    }

    /// Merges `update` and appends it as one step; returns the new version. Nothing changes,
    /// locally or in the database, if the update does not merge or if another writer appended
    /// since this handle read the thread ([`StoreError::Conflict`]: [`reload`](Thread::reload)
    /// and decide again, or use [`merge_with`](Thread::merge_with)).
    pub async fn merge(&mut self, update: S::Update, meta: StepMeta) -> Result<u64, StoreError> {
        let body = to_json(&self.id, &update)?;
        let plan = self.state.plan(update)?;
        self.commit(EntryKind::Update, body, meta, plan).await
    }

    /// Merges the updates of a step's parallel branches (see `State::merge_parallel`) and
    /// appends them as one entry holding every branch update and the fan-in mode, so a replay
    /// is exact.
    pub async fn merge_parallel(
        &mut self,
        updates: Vec<S::Update>,
        mode: FanIn,
        meta: StepMeta,
    ) -> Result<u64, StoreError> {
        let body = to_json(&self.id, &updates)?;
        let mut combined: Option<S::Update> = None;
        for update in updates {
            combined = Some(match combined {
                None => update,
                Some(acc) => S::compose(acc, update, Combine::Parallel(mode))?,
            });
        }
        let plan = self.state.plan(combined.unwrap_or_default())?;
        let kind = match mode {
            FanIn::Ordered => EntryKind::Parallel,
            FanIn::Strict => EntryKind::ParallelStrict,
        };
        self.commit(kind, body, meta, plan).await
    }

    /// Runs `step` on the current state and appends the update it returns; on a conflict,
    /// reloads the thread and runs `step` again (at most [`MAX_RETRIES`] times). `step` must
    /// decide from the state it is given, since it may see a newer one each time.
    pub async fn merge_with<F>(&mut self, meta: StepMeta, mut step: F) -> Result<u64, StoreError>
    where
        F: FnMut(&S) -> Result<S::Update, StoreError>,
    {
        let mut attempt = 0;
        loop {
            let update = step(&self.state)?;
            match self.merge(update, meta.clone()).await {
                Err(err) if err.is_conflict() && attempt < MAX_RETRIES => {
                    attempt += 1;
                    self.reload().await?;
                }
                other => return other,
            }
        }
    }

    /// Brings the handle to the thread's latest version: replays the entries appended since
    /// its version (or loads the thread afresh if they were compacted away).
    pub async fn reload(&mut self) -> Result<(), StoreError> {
        match self
            .store
            .catch_up::<S>(&self.id, &mut self.state, self.version, self.incarnation)
            .await
        {
            Ok(CatchUp::Continued {
                version,
                replayed,
                bytes,
                fingerprint: thread_fingerprint,
            }) => {
                self.thread_fingerprint = thread_fingerprint;
                self.own_fingerprint =
                    Some(fingerprint::<S>()).filter(|f| *f != thread_fingerprint);
                self.version = version;
                self.since_snapshot += replayed;
                self.bytes_since += bytes;
            }
            Ok(CatchUp::Fresh(loaded)) => *self = Thread::new(self.store.clone(), &self.id, loaded),
            Err(err) => {
                // The state may be part way through the replay: read it afresh, or, if that
                // fails too, keep the error (appends from this handle then conflict, since its
                // version is behind).
                let fresh = self
                    .store
                    .load_state::<S>(&self.id, None)
                    .await
                    .map_err(|_| err)?;
                *self = Thread::new(self.store.clone(), &self.id, fresh);
            }
        }
        Ok(())
    }

    async fn commit(
        &mut self,
        kind: EntryKind,
        body: String,
        meta: StepMeta,
        plan: S::Plan,
    ) -> Result<u64, StoreError> {
        let bytes = body.len() as u64;
        let entry = NewEntry {
            kind,
            body,
            time_ms: now_ms(),
            node: meta.node,
            run_id: meta.run_id,
            extra: (!meta.extra.is_empty()).then(|| Value::Object(meta.extra).to_string()),
            fingerprint: self.own_fingerprint,
            thread_fingerprint: self.thread_fingerprint,
            thread_incarnation: self.incarnation,
        };
        let seq = self
            .store
            .backend
            .append(&self.id, self.version, entry)
            .await?;
        self.state.apply(plan);
        self.version = seq;
        self.since_snapshot += 1;
        self.bytes_since += bytes;
        let policy = self.store.config.policy;
        if policy.is_due(self.since_snapshot, self.bytes_since, self.snapshot_bytes) {
            // The step is committed whatever happens here: a failed snapshot is retried after
            // the next step (the counters are reset only on success).
            if let Ok(json) = to_json(&self.id, &self.state) {
                let len = json.len() as u64;
                let put = self
                    .store
                    .backend
                    .put_snapshot(&self.id, seq, fingerprint::<S>(), json, policy.kept())
                    .await;
                if put.is_ok() {
                    self.since_snapshot = 0;
                    self.bytes_since = 0;
                    self.snapshot_bytes = len;
                }
            }
        }
        Ok(seq)
    }
}
