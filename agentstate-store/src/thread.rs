//! A thread handle: a typed state at a known version, written one step at a time.

use crate::backend::Backend;
use crate::error::StoreError;
use crate::lease::Lease;
use crate::record::{
    check_owner, fingerprint, now_ms, EntryKind, Head, LeaseChange, NewEntry, StepMeta,
};
use crate::store::{to_json, CatchUp, LoadedState, Store, StoredState};
use agentstate::NodeOutput;
use agentstate::{Combine, FanIn};
use serde_json::Value;
use std::future::Future;
use std::hash::{BuildHasher, Hasher};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How [`Thread::merge_with`] retries after a conflict: at most
/// [`max_attempts`](ConflictRetry::max_attempts) runs of the step, and before each retry a pause
/// that doubles from an initial one up to a cap, with full jitter (a random fraction of it), so
/// that writers racing on one thread spread out instead of colliding again.
///
/// The default: 32 attempts, pauses from 5 ms doubling up to 500 ms (about 6 s in all on
/// average if every attempt fails, which takes a thread other writers keep saturated: with 16
/// writers appending to one thread as fast as they can, a call needs about 2 attempts on
/// average and 12 at most on PostgreSQL, 5 at most on SQLite; without the pauses, up to 64).
/// Pauses sleep on tokio's timer, which the runtime must have enabled (`#[tokio::main]`,
/// `Runtime::new` and `enable_all` do); with [`no_backoff`](ConflictRetry::no_backoff) nothing
/// sleeps.
///
/// ```
/// use agentstate_store::ConflictRetry;
/// use std::time::Duration;
///
/// let policy = ConflictRetry::default()
///     .max_attempts(5)
///     .backoff(Duration::from_millis(10), Duration::from_millis(40));
/// assert_eq!(policy.attempts(), 5);
/// assert!(policy.pause_before_retry(1) <= Duration::from_millis(10));
/// assert!(policy.pause_before_retry(9) <= Duration::from_millis(40));
/// // Without jitter the pauses are exactly the doubling ones.
/// let exact = policy.jitter(false);
/// assert_eq!(exact.pause_before_retry(2), Duration::from_millis(20));
/// assert_eq!(exact.pause_before_retry(4), Duration::from_millis(40));
/// assert_eq!(ConflictRetry::default().no_backoff().pause_before_retry(3), Duration::ZERO);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConflictRetry {
    attempts: u32,
    initial: Duration,
    cap: Duration,
    jitter: bool,
}

impl Default for ConflictRetry {
    fn default() -> Self {
        ConflictRetry {
            attempts: 32,
            initial: Duration::from_millis(5),
            cap: Duration::from_millis(500),
            jitter: true,
        }
    }
}

impl ConflictRetry {
    /// Runs the step at most `n` times (at least 1: then a conflict is not retried).
    #[must_use]
    pub fn max_attempts(mut self, n: u32) -> Self {
        self.attempts = n.max(1);
        self
    }

    /// Pauses `initial` before the first retry, doubling before each next one up to `cap`.
    #[must_use]
    pub fn backoff(mut self, initial: Duration, cap: Duration) -> Self {
        self.initial = initial;
        self.cap = cap.max(initial);
        self
    }

    /// Retries at once, without pausing (nor using tokio's timer).
    #[must_use]
    pub fn no_backoff(self) -> Self {
        self.backoff(Duration::ZERO, Duration::ZERO)
    }

    /// Whether each pause is a random fraction of the doubling one (default on).
    #[must_use]
    pub fn jitter(mut self, on: bool) -> Self {
        self.jitter = on;
        self
    }

    /// The most times the step runs.
    pub fn attempts(&self) -> u32 {
        self.attempts
    }

    /// The pause before retry `n` (1 for the first retry); random with jitter.
    pub fn pause_before_retry(&self, n: u32) -> Duration {
        let doubled = self
            .initial
            .saturating_mul(1u32 << n.saturating_sub(1).min(31))
            .min(self.cap);
        if !self.jitter || doubled.is_zero() {
            return doubled;
        }
        // A random fraction in [0, 1] from std's randomly keyed hasher (no generator needed
        // for a pause).
        let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
        hasher.write_u32(n);
        let fraction = (hasher.finish() >> 11) as f64 / (1u64 << 53) as f64;
        doubled.mul_f64(fraction)
    }
}

/// A thread's state at a version, and the way to append to it, one step at a time. Get one from
/// [`Store::create`], [`Store::thread`] or [`Store::thread_or_create`].
///
/// Each step is checked against the local state, appended at the version the handle read (so a
/// stale writer gets [`StoreError::Conflict`] and writes nothing), and only then merged locally.
///
/// ```
/// use agentstate::message::{Message, Role};
/// use agentstate::state::{AgentState, AgentStateUpdate};
/// use agentstate_store::{SqliteStore, StepMeta};
///
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let store = SqliteStore::open_in_memory()?;
/// let mut thread = store.create("chat-1", AgentState::default()).await?;
/// let hello = AgentStateUpdate::default().context(vec![Message::text_message("hi", Role::User)]);
/// assert_eq!(thread.merge(hello, StepMeta::node("user")).await?, 1);
///
/// // A second writer that read version 0 is refused, and writes nothing.
/// let mut stale = store.thread::<AgentState>("chat-1").await?;
/// thread.merge(AgentStateUpdate::default().context_summary(Some("greeting".into())), StepMeta::default()).await?;
/// let err = stale.merge(AgentStateUpdate::default(), StepMeta::default()).await.unwrap_err();
/// assert_eq!(err.category(), "state_write_conflict");
///
/// let chat = store.load::<AgentState>("chat-1").await?;
/// assert_eq!((chat.state.context.len(), chat.version), (1, 2));
/// # Ok::<(), agentstate_store::StoreError>(())
/// # }).unwrap();
/// ```
#[derive(Debug)]
pub struct Thread<S, B> {
    store: Store<B>,
    id: String,
    /// The state, shared with readers once [`shared_state`](Thread::shared_state) was called.
    state: Arc<S>,
    /// How a merge gets the state to write: alone (`Arc::get_mut`, the state was never
    /// shared), or copying it if a reader still holds it (`Arc::make_mut`, once shared).
    unshare: fn(&mut Arc<S>) -> &mut S,
    /// Steps merged into `state` and not appended yet ([`stage`](Thread::stage)), in order.
    staged: Vec<Staged>,
    version: u64,
    since_snapshot: u64,
    bytes_since: u64,
    snapshot_bytes: u64,
    /// The thread's fingerprint when this handle read it.
    thread_fingerprint: u64,
    retry: ConflictRetry,
    /// `S`'s fingerprint, if it is not the thread's (then each entry records it).
    own_fingerprint: Option<u64>,
    /// The thread's incarnation when this handle read it.
    incarnation: i64,
    /// The lease owner every append is fenced by ([`fence`](Thread::fence)).
    fence: Option<String>,
}

/// A staged step: its entry but for the version it will take.
#[derive(Debug)]
struct Staged {
    kind: EntryKind,
    body: String,
    meta: StepMeta,
}

/// The state of a thread that was never shared: nothing else holds the `Arc`.
fn alone<S>(state: &mut Arc<S>) -> &mut S {
    Arc::get_mut(state).expect("a state that was never shared has one owner")
}

impl<S: StoredState, B: Backend> Thread<S, B> {
    pub(crate) fn new(store: Store<B>, id: &str, loaded: LoadedState<S>) -> Self {
        Thread {
            id: id.to_owned(),
            state: Arc::new(loaded.state),
            unshare: alone::<S>,
            staged: Vec::new(),
            version: loaded.version,
            since_snapshot: loaded.replayed,
            bytes_since: loaded.replayed_bytes,
            snapshot_bytes: loaded.base_bytes,
            thread_fingerprint: loaded.fingerprint,
            own_fingerprint: Some(fingerprint::<S>()).filter(|f| *f != loaded.fingerprint),
            incarnation: loaded.incarnation,
            retry: store.config.retry,
            fence: None,
            store,
        }
    }

    /// Replaces the handle's state and version by a fresh load, keeping its own settings (retry
    /// policy, fence, how it shares its state).
    fn refresh(&mut self, loaded: LoadedState<S>) {
        let mut fresh = Thread::new(self.store.clone(), &self.id, loaded);
        fresh.retry = self.retry;
        fresh.unshare = self.unshare;
        fresh.fence = self.fence.take();
        *self = fresh;
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

    /// The state, dropping the handle (copied only if a reader of
    /// [`shared_state`](Thread::shared_state) still holds it).
    pub fn into_state(self) -> S
    where
        S: Clone,
    {
        Arc::unwrap_or_clone(self.state)
    }

    /// The state at [`version`](Thread::version) as a shared pointer, for readers that outlive
    /// a borrow (a graph's nodes running concurrently). The next merge writes the state in
    /// place if every reader dropped its pointer by then, and copies it otherwise.
    ///
    /// ```
    /// use agentstate::message::{Message, Role};
    /// use agentstate::state::AgentState;
    /// use agentstate_store::{SqliteStore, StepMeta};
    ///
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// let store = SqliteStore::open_in_memory()?;
    /// let mut chat = store.create("chat", AgentState::default()).await?;
    /// let before = chat.shared_state();
    /// chat.merge(Message::text_message("hi", Role::User), StepMeta::node("user")).await?;
    /// // The reader still sees the state it took; the handle moved on.
    /// assert_eq!((before.context.len(), chat.state().context.len()), (0, 1));
    /// # Ok::<(), agentstate_store::StoreError>(())
    /// # }).unwrap();
    /// ```
    pub fn shared_state(&mut self) -> Arc<S>
    where
        S: Clone,
    {
        self.unshare = Arc::<S>::make_mut;
        Arc::clone(&self.state)
    }

    /// The state to write: alone, or a copy if a reader holds it.
    fn state_mut(&mut self) -> &mut S {
        (self.unshare)(&mut self.state)
    }

    /// Fences every later append of this handle ([`merge`](Thread::merge),
    /// [`merge_parallel`](Thread::merge_parallel), [`merge_with`](Thread::merge_with),
    /// [`flush`](Thread::flush)) by `lease`: an append is written only if the thread's lease is
    /// still `lease`'s owner's and has not expired, checked in the append's own statement or
    /// transaction (by the database's clock on PostgreSQL). Otherwise nothing is written, the
    /// append fails with [`StoreError::LeaseLost`] (`lease_lost`, naming who holds the lease
    /// now) and the handle is left as a refused append leaves it. A worker that stalled past its
    /// lease's ttl while another took the thread over thus commits nothing. The fence is the
    /// owner's name: renewing the lease (or a clone of it) keeps the fence good. A lease of
    /// another thread fences by its owner too, so the appends then need this thread's lease
    /// held by the same owner.
    ///
    /// ```
    /// use agentstate::message::{Message, Role};
    /// use agentstate::state::AgentState;
    /// use agentstate_store::{SqliteStore, StepMeta};
    /// use std::time::Duration;
    ///
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let store = SqliteStore::open_in_memory()?;
    /// let mut chat = store.create("chat", AgentState::default()).await?;
    /// let lease = store.lease("chat", "worker-1", Duration::from_millis(300)).await?;
    /// chat.fence(&lease);
    /// assert_eq!(chat.fenced_by(), Some("worker-1"));
    /// chat.merge(Message::text_message("hi", Role::User), StepMeta::node("user")).await?;
    ///
    /// // worker-1 stalls past its ttl, and worker-2 takes the thread over: worker-1's next
    /// // append is refused, and nothing is written.
    /// tokio::time::sleep(Duration::from_millis(400)).await;
    /// let _theirs = store.lease("chat", "worker-2", Duration::from_secs(30)).await?;
    /// let err = chat
    ///     .merge(Message::text_message("late", Role::Assistant), StepMeta::node("bot"))
    ///     .await
    ///     .unwrap_err();
    /// assert_eq!(err.category(), "lease_lost");
    /// assert_eq!((chat.version(), chat.state().context.len()), (1, 1));
    /// assert_eq!(store.load::<AgentState>("chat").await?.version, 1);
    ///
    /// // Unfenced, the handle appends at its version as before (the lease is the runner's rule).
    /// chat.unfence();
    /// assert_eq!(chat.merge(Message::text_message("hi", Role::User), StepMeta::node("user")).await?, 2);
    /// # Ok::<(), agentstate_store::StoreError>(())
    /// # }).unwrap();
    /// ```
    pub fn fence(&mut self, lease: &Lease<B>) {
        self.fence = Some(lease.owner().to_owned());
    }

    /// Removes the [`fence`](Thread::fence): later appends are checked against the thread's
    /// version only.
    pub fn unfence(&mut self) {
        self.fence = None;
    }

    /// The lease owner this handle's appends are fenced by, if any.
    pub fn fenced_by(&self) -> Option<&str> {
        self.fence.as_deref()
    }

    /// Whether this handle is at the thread's head as `lease` saw it when it was acquired or
    /// last renewed: same thread, version, incarnation (not deleted and created again since)
    /// and schema (not migrated since). A worker that keeps handles between runs takes the
    /// lease, and reuses a handle for which this is true without reading the thread again (no
    /// one can append meanwhile if every writer is fenced); otherwise it calls
    /// [`reload`](Thread::reload). Staged steps are not looked at.
    ///
    /// ```
    /// use agentstate::message::{Message, Role};
    /// use agentstate::state::AgentState;
    /// use agentstate_store::{SqliteStore, StepMeta};
    /// use std::time::Duration;
    ///
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let store = SqliteStore::open_in_memory()?;
    /// let mut warm = store.create("chat", AgentState::default()).await?;
    /// let ttl = Duration::from_secs(30);
    ///
    /// let lease = store.lease("chat", "worker-1", ttl).await?;
    /// assert!(warm.is_current(&lease));
    /// warm.merge(Message::text_message("hi", Role::User), StepMeta::node("user")).await?;
    /// lease.release().await?;
    ///
    /// // Another worker runs a turn meanwhile.
    /// let mut other = store.thread::<AgentState>("chat").await?;
    /// other.merge(Message::text_message("hello", Role::Assistant), StepMeta::node("bot")).await?;
    ///
    /// let lease = store.lease("chat", "worker-1", ttl).await?;
    /// assert!(!warm.is_current(&lease));
    /// warm.reload().await?;
    /// assert!(warm.is_current(&lease));
    /// assert_eq!(warm.state().context.len(), 2);
    /// # Ok::<(), agentstate_store::StoreError>(())
    /// # }).unwrap();
    /// ```
    pub fn is_current(&self, lease: &Lease<B>) -> bool {
        let head = lease.head();
        lease.thread() == self.id
            && head.version == self.version
            && head.incarnation == self.incarnation
            && head.fingerprint == self.thread_fingerprint
    }

    /// How [`merge_with`](Thread::merge_with) retries on a conflict (the store's, unless set here).
    pub fn conflict_retry(&self) -> ConflictRetry {
        self.retry
    }

    /// Uses `policy` for this handle's [`merge_with`](Thread::merge_with).
    pub fn set_conflict_retry(&mut self, policy: ConflictRetry) {
        self.retry = policy;
    }

    /// Merges a step's output and appends it as one step; returns the new version. The output
    /// is an update, or anything a node returns ([`NodeOutput`]: messages, a tool result,
    /// several outputs, `()` for nothing), folded into one update as
    /// [`State::apply_output`](agentstate::State::apply_output) does; an output of nothing
    /// appends an empty step (the history still shows the node ran).
    ///
    /// Nothing changes, locally or in the database, if the update does not merge or if another
    /// writer appended since this handle read the thread ([`StoreError::Conflict`]:
    /// [`reload`](Thread::reload) and decide again, or use [`merge_with`](Thread::merge_with)).
    ///
    /// ```
    /// use agentstate::message::{Message, Role};
    /// use agentstate::{NodeOutput, ToolResult};
    /// use agentstate::state::{AgentState, AgentStateUpdate};
    /// use agentstate_store::{SqliteStore, StepMeta};
    ///
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// let store = SqliteStore::open_in_memory()?;
    /// let mut chat = store.create("chat", AgentState::default()).await?;
    /// // An update, a message, a tool result, or a node's output of several.
    /// chat.merge(AgentStateUpdate::default().context_summary(Some("new".into())), StepMeta::node("init")).await?;
    /// chat.merge(Message::text_message("2 + 2?", Role::User), StepMeta::node("user")).await?;
    /// let out: Vec<NodeOutput<AgentStateUpdate>> = vec![
    ///     ToolResult::message_only(Message::tool_result("call_1", "4")).into(),
    ///     Message::text_message("It is 4.", Role::Assistant).into(),
    /// ];
    /// assert_eq!(chat.merge(out, StepMeta::node("agent")).await?, 3);
    /// assert_eq!(chat.state().context.len(), 3);
    /// assert_eq!(store.load::<AgentState>("chat").await?.state, *chat.state());
    /// # Ok::<(), agentstate_store::StoreError>(())
    /// # }).unwrap();
    /// ```
    pub async fn merge(
        &mut self,
        output: impl Into<NodeOutput<S::Update>>,
        meta: StepMeta,
    ) -> Result<u64, StoreError> {
        if !self.staged.is_empty() {
            self.stage(output, |_| meta)?;
            return self.flush().await;
        }
        // Appended first, merged locally only once committed: a refused append leaves the
        // handle as it was.
        let (body, plan) = self.prepare(output)?;
        let step = Staged {
            kind: EntryKind::Update,
            body,
            meta,
        };
        self.commit(step, plan).await
    }

    /// Merges the outputs of a step's parallel branches (see `State::merge_parallel`; each an
    /// update or any [`NodeOutput`], as in [`merge`](Thread::merge); branches that output
    /// nothing are left out) and appends them as one entry holding every branch update and the
    /// fan-in mode, so a replay is exact.
    ///
    /// ```
    /// use agentstate::message::{Message, Role};
    /// use agentstate::{NodeOutput, ToolResult};
    /// use agentstate::state::{AgentState, AgentStateUpdate};
    /// use agentstate::FanIn;
    /// use agentstate_store::{SqliteStore, StepMeta};
    ///
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// let store = SqliteStore::open_in_memory()?;
    /// let mut chat = store.create("chat", AgentState::default()).await?;
    /// let branches: Vec<NodeOutput<AgentStateUpdate>> = vec![
    ///     ToolResult::message_only(Message::tool_result("call_1", "sunny")).into(),
    ///     ToolResult::message_only(Message::tool_result("call_2", "12 °C")).into(),
    ///     ().into(), // a branch with nothing to say
    /// ];
    /// assert_eq!(chat.merge_parallel(branches, FanIn::Ordered, StepMeta::node("tools")).await?, 1);
    /// assert_eq!(chat.state().context.len(), 2);
    /// assert_eq!(store.load::<AgentState>("chat").await?.state, *chat.state());
    /// # Ok::<(), agentstate_store::StoreError>(())
    /// # }).unwrap();
    /// ```
    pub async fn merge_parallel(
        &mut self,
        outputs: impl IntoIterator<Item = impl Into<NodeOutput<S::Update>>>,
        mode: FanIn,
        meta: StepMeta,
    ) -> Result<u64, StoreError> {
        if !self.staged.is_empty() {
            self.stage_parallel(outputs, mode, |_| meta)?;
            return self.flush().await;
        }
        let (kind, body, plan) = self.prepare_parallel(outputs, mode)?;
        self.commit(Staged { kind, body, meta }, Some(plan)).await
    }

    /// Merges a step's output into the handle's state now and appends it at the next
    /// [`flush`](Thread::flush), with the metadata `meta` gives from the merged state (what a
    /// runner decides from it: where the run goes next). The state is then ahead of the
    /// journal by the staged steps ([`staged`](Thread::staged)); [`merge`](Thread::merge) is
    /// `stage` and `flush` at once. An output that does not merge stages nothing.
    ///
    /// Staging lets a writer go on from a step before its append is done (and append several
    /// in a row); until the flush, a crash loses the staged steps.
    ///
    /// ```
    /// use agentstate::message::{Message, Role};
    /// use agentstate::state::AgentState;
    /// use agentstate_store::{SqliteStore, StepMeta};
    ///
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// let store = SqliteStore::open_in_memory()?;
    /// let mut chat = store.create("chat", AgentState::default()).await?;
    /// chat.stage(Message::text_message("hi", Role::User), |state| {
    ///     StepMeta::node("user").with("messages", state.context.len().into())
    /// })?;
    /// assert_eq!((chat.state().context.len(), chat.version(), chat.staged()), (1, 0, 1));
    /// assert_eq!(chat.flush().await?, 1);
    /// let history = store.history("chat", Default::default()).await?;
    /// assert_eq!(history[0].extra["messages"], 1);
    /// # Ok::<(), agentstate_store::StoreError>(())
    /// # }).unwrap();
    /// ```
    pub fn stage(
        &mut self,
        output: impl Into<NodeOutput<S::Update>>,
        meta: impl FnOnce(&S) -> StepMeta,
    ) -> Result<(), StoreError> {
        let (body, plan) = self.prepare(output)?;
        // Nothing to merge: the state is left alone (not even copied from its readers).
        if let Some(plan) = plan {
            self.state_mut().apply(plan);
        }
        let meta = meta(&self.state);
        self.staged.push(Staged {
            kind: EntryKind::Update,
            body,
            meta,
        });
        Ok(())
    }

    /// [`stage`](Thread::stage) for the outputs of a step's parallel branches, as
    /// [`merge_parallel`](Thread::merge_parallel) merges them.
    pub fn stage_parallel(
        &mut self,
        outputs: impl IntoIterator<Item = impl Into<NodeOutput<S::Update>>>,
        mode: FanIn,
        meta: impl FnOnce(&S) -> StepMeta,
    ) -> Result<(), StoreError> {
        let (kind, body, plan) = self.prepare_parallel(outputs, mode)?;
        self.state_mut().apply(plan);
        let meta = meta(&self.state);
        self.staged.push(Staged { kind, body, meta });
        Ok(())
    }

    /// A step's entry body and its merge plan on the current state (none for an output of
    /// nothing); nothing changes yet.
    fn prepare(
        &self,
        output: impl Into<NodeOutput<S::Update>>,
    ) -> Result<(String, Option<S::Plan>), StoreError> {
        Ok(match output.into().into_update(S::compose)? {
            Some(update) => {
                let body = to_json(&self.id, &update)?;
                (body, Some(self.state.plan(update)?))
            }
            None => (to_json(&self.id, &S::Update::default())?, None),
        })
    }

    /// [`prepare`](Thread::prepare) for a parallel step's outputs.
    fn prepare_parallel(
        &self,
        outputs: impl IntoIterator<Item = impl Into<NodeOutput<S::Update>>>,
        mode: FanIn,
    ) -> Result<(EntryKind, String, S::Plan), StoreError> {
        let mut updates = Vec::new();
        for output in outputs {
            updates.extend(output.into().into_update(S::compose)?);
        }
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
        Ok((kind, body, plan))
    }

    /// Drops the last staged step (a step that turned out not to stand: say, the edge after
    /// it failed): the handle reads the thread afresh and stages the steps before it again, so
    /// that its state is as if the dropped step had never been staged. Nothing is written; with
    /// nothing staged, nothing changes.
    ///
    /// ```
    /// use agentstate::message::{Message, Role};
    /// use agentstate::state::AgentState;
    /// use agentstate_store::{SqliteStore, StepMeta};
    ///
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// let store = SqliteStore::open_in_memory()?;
    /// let mut chat = store.create("chat", AgentState::default()).await?;
    /// chat.stage(Message::text_message("kept", Role::User), |_| StepMeta::node("user"))?;
    /// chat.stage(Message::text_message("dropped", Role::Assistant), |_| StepMeta::node("agent"))?;
    /// chat.unstage_last().await?;
    /// assert_eq!((chat.staged(), chat.state().context.len()), (1, 1));
    /// assert_eq!(chat.flush().await?, 1);
    /// assert_eq!(store.load::<AgentState>("chat").await?.state.context[0].text(), "kept");
    /// # Ok::<(), agentstate_store::StoreError>(())
    /// # }).unwrap();
    /// ```
    pub async fn unstage_last(&mut self) -> Result<(), StoreError> {
        let mut staged = std::mem::take(&mut self.staged);
        if staged.pop().is_none() {
            return Ok(());
        }
        let fresh = self.store.load_state::<S>(&self.id, None).await?;
        self.refresh(fresh);
        let id = self.id.clone();
        let corrupt = |e: serde_json::Error| StoreError::corrupt(&id, "a staged step", e);
        for step in staged {
            let update = match step.kind {
                EntryKind::Update => {
                    serde_json::from_str::<S::Update>(&step.body).map_err(corrupt)?
                }
                EntryKind::Parallel | EntryKind::ParallelStrict => {
                    let mode = if step.kind == EntryKind::Parallel {
                        FanIn::Ordered
                    } else {
                        FanIn::Strict
                    };
                    let updates: Vec<S::Update> =
                        serde_json::from_str(&step.body).map_err(corrupt)?;
                    let mut combined: Option<S::Update> = None;
                    for update in updates {
                        combined = Some(match combined {
                            None => update,
                            Some(acc) => S::compose(acc, update, Combine::Parallel(mode))?,
                        });
                    }
                    combined.unwrap_or_default()
                }
            };
            let plan = self.state.plan(update)?;
            self.state_mut().apply(plan);
            self.staged.push(step);
        }
        Ok(())
    }

    /// The steps staged and not appended yet.
    pub fn staged(&self) -> usize {
        self.staged.len()
    }

    /// Appends the staged steps in order, each at the version the previous one made, in one
    /// transaction (all of them or none), and returns the thread's version. If the append is
    /// refused (another writer appended since this handle read the thread:
    /// [`StoreError::Conflict`]; the [`fence`](Thread::fence)'s lease was lost:
    /// [`StoreError::LeaseLost`]), no staged step is written, they are dropped, and the handle
    /// reads the thread afresh, so its state is again the journal's.
    ///
    /// ```
    /// use agentstate::message::{Message, Role};
    /// use agentstate::state::AgentState;
    /// use agentstate_store::{SqliteStore, StepMeta};
    ///
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// let store = SqliteStore::open_in_memory()?;
    /// let mut chat = store.create("chat", AgentState::default()).await?;
    /// let mut stale = store.thread::<AgentState>("chat").await?;
    /// for (text, node) in [("hi", "user"), ("hello", "bot")] {
    ///     chat.stage(Message::text_message(text, Role::User), |_| StepMeta::node(node))?;
    /// }
    /// assert_eq!(chat.flush().await?, 2); // versions 1 and 2, one transaction
    ///
    /// // A stale writer's staged steps are refused together; it then holds the journal's state.
    /// stale.stage(Message::text_message("a", Role::User), |_| StepMeta::default())?;
    /// stale.stage(Message::text_message("b", Role::User), |_| StepMeta::default())?;
    /// assert_eq!(stale.flush().await.unwrap_err().category(), "state_write_conflict");
    /// assert_eq!((stale.version(), stale.staged(), stale.state().context.len()), (2, 0, 2));
    /// # Ok::<(), agentstate_store::StoreError>(())
    /// # }).unwrap();
    /// ```
    pub async fn flush(&mut self) -> Result<u64, StoreError> {
        self.flush_changing(None).await
    }

    /// [`merge`](Thread::merge) and [`Store::lease`] in one: appends `output` and takes the
    /// thread's lease for `owner` in the same statement or transaction, and fences the handle
    /// by it ([`fence`](Thread::fence)). A worker that holds the thread's handle from its last
    /// run (and so knows its version) starts the next run with one write instead of two. If
    /// another worker holds the lease, nothing is written and it fails with
    /// [`StoreError::Leased`]; if the thread moved since this handle read it,
    /// [`StoreError::Conflict`] (or [`StoreError::Recreated`], [`StoreError::Migrated`]), the
    /// handle left as it was. Steps staged before it are appended with it.
    ///
    /// ```
    /// use agentstate::message::{Message, Role};
    /// use agentstate::state::AgentState;
    /// use agentstate_store::{SqliteStore, StepMeta};
    /// use std::time::Duration;
    ///
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let store = SqliteStore::open_in_memory()?;
    /// let mut chat = store.create("chat", AgentState::default()).await?;
    /// let ttl = Duration::from_secs(30);
    /// let hi = Message::text_message("hi", Role::User);
    /// let lease = chat.merge_leasing(hi, StepMeta::node("user"), "worker-1", ttl).await?;
    /// assert_eq!((lease.version(), chat.fenced_by()), (1, Some("worker-1")));
    /// assert_eq!(store.lease_info("chat").await?.unwrap().owner, "worker-1");
    ///
    /// // Held: another worker's handle cannot take it.
    /// let mut theirs = store.thread::<AgentState>("chat").await?;
    /// let again = Message::text_message("again", Role::User);
    /// let err = theirs.merge_leasing(again, StepMeta::node("user"), "worker-2", ttl).await.unwrap_err();
    /// assert_eq!(err.category(), "thread_leased");
    ///
    /// // The run's last append gives it back.
    /// let bye = Message::text_message("bye", Role::Assistant);
    /// chat.stage(bye, |_| StepMeta::node("agent"))?;
    /// assert_eq!(chat.flush_releasing(&lease).await?, 2);
    /// assert!(store.lease_info("chat").await?.is_none());
    /// # Ok::<(), agentstate_store::StoreError>(())
    /// # }).unwrap();
    /// ```
    pub async fn merge_leasing(
        &mut self,
        output: impl Into<NodeOutput<S::Update>>,
        meta: StepMeta,
        owner: &str,
        ttl: Duration,
    ) -> Result<Lease<B>, StoreError> {
        check_owner(owner)?;
        let ttl_ms = Lease::<B>::ttl_ms(ttl);
        let change = (owner.to_owned(), LeaseChange::Take { ttl_ms });
        let asked = Instant::now();
        if self.staged.is_empty() {
            let (body, plan) = self.prepare(output)?;
            let step = Staged {
                kind: EntryKind::Update,
                body,
                meta,
            };
            self.commit_changing(step, plan, Some(change)).await?;
        } else {
            self.stage(output, |_| meta)?;
            self.flush_changing(Some(change)).await?;
        }
        self.fence = Some(owner.to_owned());
        Ok(Lease::taken(
            Arc::clone(&self.store.backend),
            &self.id,
            owner,
            ttl_ms,
            asked,
            Head {
                version: self.version,
                incarnation: self.incarnation,
                fingerprint: self.thread_fingerprint,
            },
        ))
    }

    /// [`flush`](Thread::flush) and [`Lease::release`] in one: appends the staged steps
    /// fenced by `lease` and releases it in the same statement or transaction, so a run's last
    /// step and its lease's release are one write. With nothing staged, just releases it. If
    /// the append is refused (the lease was lost: [`StoreError::LeaseLost`]; or as
    /// [`flush`](Thread::flush) says), nothing is written and the lease is left as it is (so
    /// the caller may still release it). Once it succeeded, `lease` (and its clones) is no
    /// longer held, and the handle no longer fenced. An example:
    /// [`merge_leasing`](Thread::merge_leasing).
    pub async fn flush_releasing(&mut self, lease: &Lease<B>) -> Result<u64, StoreError> {
        if self.staged.is_empty() {
            lease.clone().release().await?;
        } else {
            let change = (lease.owner().to_owned(), LeaseChange::Release);
            self.flush_changing(Some(change)).await?;
        }
        self.fence = None;
        Ok(self.version)
    }

    /// [`flush`](Thread::flush), with a lease change ridden by the first entry (a take) or
    /// the last (a release).
    async fn flush_changing(
        &mut self,
        change: Option<(String, LeaseChange)>,
    ) -> Result<u64, StoreError> {
        let mut staged = std::mem::take(&mut self.staged);
        let done = match staged.len() {
            0 => return Ok(self.version),
            1 => match staged.pop() {
                Some(step) => self.commit_changing(step, None, change).await,
                None => return Ok(self.version),
            },
            _ => self.commit_all(staged, change).await,
        };
        if done.is_err() {
            if let Ok(fresh) = self.store.load_state::<S>(&self.id, None).await {
                self.refresh(fresh);
            }
        }
        done
    }

    /// Runs `step` on the current state and appends the output it returns (as
    /// [`merge`](Thread::merge)); on a conflict, pauses, reloads the thread and runs `step`
    /// again, as the [`ConflictRetry`] says ([`Store::with_conflict_retry`],
    /// [`set_conflict_retry`](Thread::set_conflict_retry)). After the last attempt it fails with
    /// [`StoreError::RetriesExhausted`], naming the thread and the number of attempts; a step's
    /// own error ends it at once. `step` must decide from the state it is given, since it may
    /// see a newer one each time.
    ///
    /// `step` is an async closure in two parts: it reads what it needs from the state (which it
    /// borrows only until it returns), then returns a future that does the awaiting (a model, a
    /// tool) and must own what it uses (`async move`), so that it can run while the handle
    /// reloads and the whole call stays `Send`. Dropping the call's future cancels it: an
    /// attempt whose append was not committed writes nothing, and the handle reloads on its
    /// next use if it is behind. For a step that does not await:
    /// [`merge_with_sync`](Thread::merge_with_sync).
    ///
    /// ```
    /// use agentstate::message::{Message, Role};
    /// use agentstate::state::{AgentState, AgentStateUpdate};
    /// use agentstate_store::{ConflictRetry, SqliteStore, StepMeta, StoreError};
    ///
    /// /// The "model": a reply to the messages it is given.
    /// async fn model(messages: &[Message]) -> Result<Message, StoreError> {
    ///     tokio::task::yield_now().await;
    ///     Ok(Message::text_message(&format!("I have read {} messages", messages.len()), Role::Assistant))
    /// }
    ///
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let store = SqliteStore::open_in_memory()?;
    /// let mut chat = store.create("chat", AgentState::default()).await?;
    /// let mut other = store.thread::<AgentState>("chat").await?;
    /// other.merge(Message::text_message("hi", Role::User), StepMeta::node("user")).await?;
    ///
    /// // `chat` is stale: its first attempt conflicts, the second sees the user's message.
    /// chat.set_conflict_retry(ConflictRetry::default().max_attempts(3));
    /// let version = chat
    ///     .merge_with(StepMeta::node("agent"), |state| {
    ///         let messages = state.context.clone();
    ///         async move { model(&messages).await }
    ///     })
    ///     .await?;
    /// assert_eq!(version, 2);
    /// assert_eq!(chat.state().context[1].text(), "I have read 1 messages");
    /// # Ok::<(), agentstate_store::StoreError>(())
    /// # }).unwrap();
    /// ```
    pub async fn merge_with<F, Fut, O>(
        &mut self,
        meta: StepMeta,
        mut step: F,
    ) -> Result<u64, StoreError>
    where
        F: FnMut(&S) -> Fut,
        Fut: Future<Output = Result<O, StoreError>>,
        O: Into<NodeOutput<S::Update>>,
    {
        let policy = self.retry;
        let mut attempt = 1;
        loop {
            let output = step(&self.state).await?;
            match self.merge(output, meta.clone()).await {
                Err(err) if err.is_conflict() => {
                    if attempt >= policy.attempts() {
                        return Err(StoreError::RetriesExhausted {
                            thread: self.id.clone(),
                            attempts: attempt,
                            last: Box::new(err),
                        });
                    }
                    let pause = policy.pause_before_retry(attempt);
                    if !pause.is_zero() {
                        tokio::time::sleep(pause).await;
                    }
                    self.reload().await?;
                    attempt += 1;
                }
                other => return other,
            }
        }
    }

    /// [`merge_with`](Thread::merge_with) for a step that does not await.
    ///
    /// ```
    /// use agentstate::message::{Message, Role};
    /// use agentstate::state::AgentState;
    /// use agentstate_store::{SqliteStore, StepMeta};
    ///
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let store = SqliteStore::open_in_memory()?;
    /// let mut chat = store.create("chat", AgentState::default()).await?;
    /// chat.merge_with_sync(StepMeta::node("count"), |state| {
    ///     Ok(Message::text_message(&format!("{} before me", state.context.len()), Role::User))
    /// })
    /// .await?;
    /// assert_eq!(chat.state().context[0].text(), "0 before me");
    /// # Ok::<(), agentstate_store::StoreError>(())
    /// # }).unwrap();
    /// ```
    pub async fn merge_with_sync<F, O>(
        &mut self,
        meta: StepMeta,
        mut step: F,
    ) -> Result<u64, StoreError>
    where
        F: FnMut(&S) -> Result<O, StoreError>,
        O: Into<NodeOutput<S::Update>>,
    {
        self.merge_with(meta, |state| std::future::ready(step(state)))
            .await
    }

    /// Brings the handle to the thread's latest version: replays the entries appended since
    /// its version (or loads the thread afresh if they were compacted away).
    pub async fn reload(&mut self) -> Result<(), StoreError> {
        self.catch_up().await
    }

    async fn catch_up(&mut self) -> Result<(), StoreError> {
        match self
            .store
            .catch_up::<S>(
                &self.id,
                (self.unshare)(&mut self.state),
                self.version,
                self.incarnation,
            )
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
            Ok(CatchUp::Fresh(loaded)) => self.refresh(loaded),
            Err(err) => {
                // The state may be part way through the replay: read it afresh, or, if that
                // fails too, keep the error (appends from this handle then conflict, since its
                // version is behind).
                let fresh = self
                    .store
                    .load_state::<S>(&self.id, None)
                    .await
                    .map_err(|_| err)?;
                self.refresh(fresh);
            }
        }
        Ok(())
    }

    /// The journal entry of a staged step.
    fn entry(&self, step: Staged) -> NewEntry {
        let Staged { kind, body, meta } = step;
        NewEntry {
            kind,
            body,
            time_ms: now_ms(),
            node: meta.node,
            run_id: meta.run_id,
            extra: (!meta.extra.is_empty()).then(|| Value::Object(meta.extra).to_string()),
            fingerprint: self.own_fingerprint,
            thread_fingerprint: self.thread_fingerprint,
            thread_incarnation: self.incarnation,
            lease: self.fence.clone(),
            lease_change: None,
        }
    }

    /// Appends one step at the handle's version, then merges `plan` (a step not staged:
    /// merged only once committed), and takes a snapshot if one is due.
    async fn commit(&mut self, step: Staged, plan: Option<S::Plan>) -> Result<u64, StoreError> {
        self.commit_changing(step, plan, None).await
    }

    /// [`commit`](Thread::commit), the entry fenced by `change`'s owner and changing its lease.
    async fn commit_changing(
        &mut self,
        step: Staged,
        plan: Option<S::Plan>,
        change: Option<(String, LeaseChange)>,
    ) -> Result<u64, StoreError> {
        let mut entry = self.entry(step);
        if let Some((owner, change)) = change {
            entry.lease = Some(owner);
            entry.lease_change = Some(change);
        }
        let bytes = entry.body.len() as u64;
        let seq = self
            .store
            .backend
            .append(&self.id, self.version, entry)
            .await?;
        if let Some(plan) = plan {
            self.state_mut().apply(plan);
        }
        self.committed(seq, 1, bytes).await;
        Ok(seq)
    }

    /// Appends staged steps (already merged into the state) in one transaction, and takes a
    /// snapshot if one is due.
    async fn commit_all(
        &mut self,
        steps: Vec<Staged>,
        change: Option<(String, LeaseChange)>,
    ) -> Result<u64, StoreError> {
        let mut entries: Vec<NewEntry> = steps.into_iter().map(|step| self.entry(step)).collect();
        if let Some((owner, change)) = change {
            // Every entry fenced by the lease; a take rides on the first, a release on the last.
            for entry in &mut entries {
                entry.lease = Some(owner.clone());
            }
            let at = match change {
                LeaseChange::Take { .. } => entries.first_mut(),
                LeaseChange::Release => entries.last_mut(),
            };
            if let Some(entry) = at {
                entry.lease_change = Some(change);
            }
        }
        let (n, bytes) = (
            entries.len() as u64,
            entries.iter().map(|e| e.body.len() as u64).sum(),
        );
        let seq = self
            .store
            .backend
            .append_all(&self.id, self.version, entries)
            .await?;
        self.committed(seq, n, bytes).await;
        Ok(seq)
    }

    /// Moves the handle to version `seq` after `n` entries of `bytes` bytes were committed,
    /// and writes a snapshot if the policy says one is due.
    async fn committed(&mut self, seq: u64, n: u64, bytes: u64) {
        self.version = seq;
        self.since_snapshot += n;
        self.bytes_since += bytes;
        let policy = self.store.config.policy;
        if policy.is_due(self.since_snapshot, self.bytes_since, self.snapshot_bytes) {
            // The steps are committed whatever happens here: a failed snapshot is retried after
            // the next step (the counters are reset only on success).
            if let Ok(json) = to_json(&self.id, &*self.state) {
                let len = json.len() as u64;
                let put = self
                    .store
                    .backend
                    .put_snapshot(
                        &self.id,
                        seq,
                        self.incarnation,
                        fingerprint::<S>(),
                        json,
                        policy.kept(),
                    )
                    .await;
                if put.is_ok() {
                    self.since_snapshot = 0;
                    self.bytes_since = 0;
                    self.snapshot_bytes = len;
                }
            }
        }
    }
}
