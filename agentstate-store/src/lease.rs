//! Run leases: one worker at a time runs a thread.

use crate::backend::Backend;
use crate::error::StoreError;
use crate::record::{Head, LeaseOp, MAX_LEASE_TTL_MS};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A held lease on a thread: its owner runs the thread until
/// [`expires_at`](Lease::expires_at). From [`Store::lease`](crate::Store::lease).
///
/// One worker at a time runs a thread: another worker asking for the lease meanwhile is refused
/// with [`StoreError::Leased`], and takes it over once it has expired (a worker that died).
///
/// The lease (owner, expiry) is changed by one statement or transaction per call, so any
/// number of tasks, processes and machines sharing the database agree on who holds it. Expiry
/// is judged by the database's clock on PostgreSQL (workers on several machines need not agree
/// on the time) and by the local clock on SQLite. A thread deleted while leased takes its lease
/// with it.
///
/// A lease also fences writes: a [`Thread`](crate::Thread) handle
/// [`fence`](crate::Thread::fence)d by a lease appends only while that lease is its owner's and
/// has not expired, checked in the append's own statement or transaction; otherwise nothing is
/// written and the append fails with [`StoreError::LeaseLost`] (`lease_lost`). So a worker that
/// stalled past its ttl while another took the thread over commits nothing.
///
/// Each acquisition and renewal also reports the thread's [`Head`] (version, incarnation,
/// schema) as the same statement saw it: a worker that keeps a thread handle between runs tells
/// with [`Thread::is_current`](crate::Thread::is_current) whether it is still the thread's
/// latest, without another query.
///
/// A `Lease` does not renew itself: a worker that runs longer than its `ttl` calls
/// [`renew`](Lease::renew) before it expires (a heartbeat, e.g. every third of the `ttl`), and
/// stops running the thread when renewing fails with [`StoreError::LeaseLost`] (another worker
/// took it over). Dropping a `Lease` does nothing: the lease stays in the database until it
/// expires, so a worker that dies holds the thread for at most its `ttl`. Give it up with
/// [`release`](Lease::release) when done, so the next worker need not wait. Clones are the
/// same lease (a heartbeat task can hold one).
///
/// ```
/// use agentstate::state::AgentState;
/// use agentstate_store::SqliteStore;
/// use std::time::Duration;
///
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// let store = SqliteStore::open_in_memory()?;
/// store.create("t", AgentState::default()).await?;
///
/// let mut lease = store.lease("t", "worker-1", Duration::from_secs(30)).await?;
/// assert_eq!((lease.thread(), lease.owner()), ("t", "worker-1"));
/// assert!(lease.remaining() <= Duration::from_secs(30));
///
/// // Another worker is refused while it is held.
/// let err = store.lease("t", "worker-2", Duration::from_secs(30)).await.unwrap_err();
/// assert_eq!(err.category(), "thread_leased");
///
/// lease.renew().await?; // 30 s from now again
/// lease.release().await?;
/// let next = store.lease("t", "worker-2", Duration::from_secs(30)).await?;
/// assert_eq!(store.lease_info("t").await?.unwrap().owner, "worker-2");
/// # Ok::<(), agentstate_store::StoreError>(())
/// # }).unwrap();
/// ```
#[derive(Debug)]
pub struct Lease<B> {
    backend: Arc<B>,
    thread: String,
    owner: String,
    ttl: Duration,
    expires_at: Instant,
    head: Head,
}

impl<B> Clone for Lease<B> {
    fn clone(&self) -> Self {
        Lease {
            backend: Arc::clone(&self.backend),
            thread: self.thread.clone(),
            owner: self.owner.clone(),
            ttl: self.ttl,
            expires_at: self.expires_at,
            head: self.head,
        }
    }
}

/// The lease a successful acquisition or renewal returned.
fn granted(thread: &str, info: Option<crate::record::LeaseInfo>) -> Result<Head, StoreError> {
    info.map(|info| info.head).ok_or_else(|| {
        StoreError::backend(
            "the store",
            format!("taking the lease on thread `{thread}`"),
            "the backend granted it without saying so",
        )
    })
}

/// A lease's ttl in whole milliseconds, at most [`MAX_LEASE_TTL_MS`].
fn ttl_ms(ttl: Duration) -> u64 {
    u64::try_from(ttl.as_millis())
        .unwrap_or(u64::MAX)
        .min(MAX_LEASE_TTL_MS)
}

impl<B: Backend> Lease<B> {
    /// Acquires the lease (see [`Store::lease`](crate::Store::lease)).
    pub(crate) async fn acquire(
        backend: Arc<B>,
        thread: &str,
        owner: &str,
        ttl: Duration,
    ) -> Result<Self, StoreError> {
        crate::record::check_lookup(thread)?;
        crate::record::check_owner(owner)?;
        let ms = ttl_ms(ttl);
        let asked = Instant::now();
        let info = backend.lease(thread, owner, ms, LeaseOp::Acquire).await?;
        Ok(Lease {
            head: granted(thread, info)?,
            backend,
            thread: thread.to_owned(),
            owner: owner.to_owned(),
            ttl: Duration::from_millis(ms),
            expires_at: asked + Duration::from_millis(ms),
        })
    }

    /// The lease an append took ([`Thread::merge_leasing`](crate::Thread::merge_leasing)),
    /// asked for at `asked`, leaving the thread at `head`.
    pub(crate) fn taken(
        backend: Arc<B>,
        thread: &str,
        owner: &str,
        ttl_ms: u64,
        asked: Instant,
        head: Head,
    ) -> Self {
        Lease {
            backend,
            thread: thread.to_owned(),
            owner: owner.to_owned(),
            ttl: Duration::from_millis(ttl_ms),
            expires_at: asked + Duration::from_millis(ttl_ms),
            head,
        }
    }

    /// A lease's ttl in whole milliseconds, as it is recorded (at most a year).
    pub(crate) fn ttl_ms(ttl: Duration) -> u64 {
        ttl_ms(ttl)
    }

    /// The thread.
    pub fn thread(&self) -> &str {
        &self.thread
    }

    /// The worker holding it.
    pub fn owner(&self) -> &str {
        &self.owner
    }

    /// How long each acquisition or renewal lasts (whole milliseconds, at most a year).
    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    /// When the lease expires unless renewed, by this process's clock: the time the last
    /// successful acquire or renew was sent plus the `ttl`, so never later than the expiry the
    /// database recorded (which counts from when it ran the statement).
    pub fn expires_at(&self) -> Instant {
        self.expires_at
    }

    /// How long until [`expires_at`](Lease::expires_at) (zero once it has passed).
    pub fn remaining(&self) -> Duration {
        self.expires_at.saturating_duration_since(Instant::now())
    }

    /// The thread's head (version, incarnation, schema) as the database saw it in the
    /// statement that last acquired or renewed this lease. A handle at this head is current
    /// ([`Thread::is_current`](crate::Thread::is_current)).
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
    /// chat.merge(Message::text_message("hi", Role::User), StepMeta::node("user")).await?;
    /// let lease = store.lease("chat", "worker-1", Duration::from_secs(30)).await?;
    /// assert_eq!(lease.version(), 1);
    /// assert_eq!(lease.head().incarnation, store.info("chat").await?.incarnation);
    /// # Ok::<(), agentstate_store::StoreError>(())
    /// # }).unwrap();
    /// ```
    pub fn head(&self) -> Head {
        self.head
    }

    /// The thread's version as the database saw it when this lease was last acquired or
    /// renewed (see [`head`](Lease::head)).
    pub fn version(&self) -> u64 {
        self.head.version
    }

    /// The thread's incarnation as the database saw it when this lease was last acquired or
    /// renewed (see [`head`](Lease::head)).
    pub fn incarnation(&self) -> i64 {
        self.head.incarnation
    }

    /// Extends the lease to `ttl` from now, in one statement. Fails with
    /// [`StoreError::LeaseLost`] if it is no longer this owner's (it expired and another worker
    /// took it, or it was released); a lease that expired but was not taken by another is
    /// renewed. A deleted thread is [`StoreError::ThreadNotFound`]. Also reads the thread's
    /// [`head`](Lease::head) anew.
    pub async fn renew(&mut self) -> Result<(), StoreError> {
        let ms = self.ttl.as_millis() as u64;
        let asked = Instant::now();
        let info = self
            .backend
            .lease(&self.thread, &self.owner, ms, LeaseOp::Renew)
            .await?;
        self.head = granted(&self.thread, info)?;
        self.expires_at = asked + self.ttl;
        Ok(())
    }

    /// Gives the lease up, so that another worker can take the thread at once. A lease that is
    /// still this owner's is released even if it has just expired (no one took it since). Fails
    /// with [`StoreError::LeaseLost`] if it is not this owner's any more (another worker holds
    /// it, or it was released already or taken over and released since), naming who holds it
    /// now, if anyone: the work done under it may have been done twice. A deleted thread is
    /// [`StoreError::ThreadNotFound`].
    ///
    /// ```
    /// use agentstate::state::AgentState;
    /// use agentstate_store::SqliteStore;
    /// use std::time::Duration;
    ///
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let store = SqliteStore::open_in_memory()?;
    /// store.create("t", AgentState::default()).await?;
    /// let lease = store.lease("t", "worker-1", Duration::from_millis(20)).await?;
    /// let copy = lease.clone();
    /// tokio::time::sleep(Duration::from_millis(30)).await;
    /// let theirs = store.lease("t", "worker-2", Duration::from_secs(30)).await?; // took it over
    /// let err = lease.release().await.unwrap_err();
    /// assert_eq!(err.category(), "lease_lost");
    /// assert!(err.to_string().contains("worker `worker-2` holds it now"), "{err}");
    /// theirs.release().await?;
    /// assert_eq!(copy.release().await.unwrap_err().category(), "lease_lost"); // no one holds it
    /// # Ok::<(), agentstate_store::StoreError>(())
    /// # }).unwrap();
    /// ```
    pub async fn release(self) -> Result<(), StoreError> {
        self.backend
            .lease(&self.thread, &self.owner, 0, LeaseOp::Release)
            .await?;
        Ok(())
    }
}
