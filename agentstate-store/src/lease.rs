//! Run leases: one worker at a time runs a thread. A [`Lease`] (from
//! [`Store::lease`](crate::store::Store::lease)) says that its owner runs the thread until it
//! expires; another worker asking for it meanwhile is refused with [`StoreError::Leased`], and
//! takes it over once it has expired (a worker that died).
//!
//! The lease is a pair of columns of the thread's row (owner, expiry), changed by one
//! statement or transaction per call, so any number of tasks, processes and machines sharing
//! the database agree on who holds it. Expiry is judged by the database's clock on PostgreSQL
//! (workers on several machines need not agree on the time) and by the local clock on SQLite.
//! A thread deleted while leased takes its lease with it.

use crate::backend::Backend;
use crate::error::StoreError;
use crate::record::{LeaseOp, MAX_LEASE_TTL_MS};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A held lease on a thread: its owner runs the thread until
/// [`expires_at`](Lease::expires_at). From [`Store::lease`](crate::store::Store::lease).
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
}

impl<B> Clone for Lease<B> {
    fn clone(&self) -> Self {
        Lease {
            backend: Arc::clone(&self.backend),
            thread: self.thread.clone(),
            owner: self.owner.clone(),
            ttl: self.ttl,
            expires_at: self.expires_at,
        }
    }
}

/// A lease's ttl in whole milliseconds, at most [`MAX_LEASE_TTL_MS`].
fn ttl_ms(ttl: Duration) -> u64 {
    u64::try_from(ttl.as_millis())
        .unwrap_or(u64::MAX)
        .min(MAX_LEASE_TTL_MS)
}

impl<B: Backend> Lease<B> {
    /// Acquires the lease (see [`Store::lease`](crate::store::Store::lease)).
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
        backend.lease(thread, owner, ms, LeaseOp::Acquire).await?;
        Ok(Lease {
            backend,
            thread: thread.to_owned(),
            owner: owner.to_owned(),
            ttl: Duration::from_millis(ms),
            expires_at: asked + Duration::from_millis(ms),
        })
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

    /// Extends the lease to `ttl` from now, in one statement. Fails with
    /// [`StoreError::LeaseLost`] if it is no longer this owner's (it expired and another worker
    /// took it, or it was released); a lease that expired but was not taken by another is
    /// renewed. A deleted thread is [`StoreError::ThreadNotFound`].
    pub async fn renew(&mut self) -> Result<(), StoreError> {
        let ms = self.ttl.as_millis() as u64;
        let asked = Instant::now();
        self.backend
            .lease(&self.thread, &self.owner, ms, LeaseOp::Renew)
            .await?;
        self.expires_at = asked + self.ttl;
        Ok(())
    }

    /// Gives the lease up, so that another worker can take the thread at once. Does nothing if
    /// it is no longer this owner's, or the thread is gone.
    pub async fn release(self) -> Result<(), StoreError> {
        self.backend
            .lease(&self.thread, &self.owner, 0, LeaseOp::Release)
            .await?;
        Ok(())
    }
}
