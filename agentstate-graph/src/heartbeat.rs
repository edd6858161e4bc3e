//! The leases of a process's running durable runs, renewed from a thread of their own.
//!
//! One thread per process (`agentstate-heartbeat`, started when first needed) runs a
//! current-thread runtime with one task that renews each run's lease every third of its ttl.
//! A node that blocks its thread, even the only thread of a current-thread runtime, cannot
//! starve a renewal, so a long node keeps its lease and is never run twice; the renewals use
//! the store's connections for them (on PostgreSQL, connections whose tasks live on this
//! runtime). Starting and stopping a run's heartbeat is a lock and a map insert or removal:
//! the thread is woken only when a lease is due sooner than anything it waits for.

use agentstate_store::backend::Backend;
use agentstate_store::{Lease, StoreError};
use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError, Weak};
use std::time::{Duration, Instant};
use tokio::sync::Notify;

/// A run's lease, renewed until [`stop`](Heartbeat::stop)ped or dropped. Says whether the
/// lease is still held, by this process's clock: renewed in time, and no renewal refused.
#[derive(Clone)]
pub(crate) struct Heartbeat {
    shared: Arc<Beat>,
}

struct Beat {
    /// The lease's owner.
    owner: String,
    /// When this heartbeat began: expiries count from it.
    origin: Instant,
    /// When the lease expires, in milliseconds after `origin`.
    expires_ms: AtomicU64,
    /// Whether a renewal was refused (another worker took the thread, or it was revoked).
    lost: AtomicBool,
    /// Whether the run ended: its lease is renewed no more.
    stopped: AtomicBool,
    /// Its renewal's place in the schedule, while one is scheduled.
    key: Mutex<Option<Key>>,
}

impl Heartbeat {
    /// Starts renewing `lease` (a clone of it) every third of its ttl.
    pub(crate) fn start<B: Backend>(lease: &Lease<B>) -> Self {
        let origin = Instant::now();
        let shared = Arc::new(Beat {
            owner: lease.owner().to_owned(),
            origin,
            expires_ms: AtomicU64::new(millis(
                lease.expires_at().saturating_duration_since(origin),
            )),
            lost: AtomicBool::new(false),
            stopped: AtomicBool::new(false),
            key: Mutex::new(None),
        });
        if let Some(beats) = beats() {
            let period = (lease.ttl() / 3).max(Duration::from_millis(1));
            let renewal = Renewal {
                beat: Arc::downgrade(&shared),
                lease: Box::new(lease.clone()),
                period,
            };
            beats.schedule(origin + period, renewal);
        }
        Heartbeat { shared }
    }

    /// Stops renewing (the run ended; a node's context kept past it must not hold the lease).
    pub(crate) fn stop(&self) {
        self.shared.stop();
    }

    /// The lease's owner.
    pub(crate) fn owner(&self) -> &str {
        &self.shared.owner
    }

    /// Whether the lease is still this run's.
    pub(crate) fn held(&self) -> bool {
        let beat = &self.shared;
        !beat.lost.load(Ordering::Acquire)
            && millis(beat.origin.elapsed()) < beat.expires_ms.load(Ordering::Acquire)
    }
}

impl Beat {
    fn stop(&self) {
        self.stopped.store(true, Ordering::Release);
        // Not under the key's lock: `Beats::schedule` takes the schedule's, then the key's.
        let key = lock(&self.key).take();
        if let (Some(key), Some(beats)) = (key, beats()) {
            lock(&beats.schedule).due.remove(&key);
        }
    }
}

impl Drop for Beat {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A renewal's place in the schedule: when it is due, and a number that tells apart renewals
/// due at the same instant.
type Key = (Instant, u64);

/// A lease to renew, for its run's heartbeat.
struct Renewal {
    beat: Weak<Beat>,
    lease: Box<dyn Renew>,
    period: Duration,
}

/// A lease of any backend, renewed: the renewal gives the lease back with its new expiry.
trait Renew: Send + 'static {
    fn renew(self: Box<Self>) -> RenewFuture;
}

type RenewFuture =
    Pin<Box<dyn Future<Output = (Box<dyn Renew>, Result<Instant, StoreError>)> + Send>>;

impl<B: Backend> Renew for Lease<B> {
    fn renew(mut self: Box<Self>) -> RenewFuture {
        Box::pin(async move {
            let renewed = Lease::renew(&mut self).await.map(|()| self.expires_at());
            (self as Box<dyn Renew>, renewed)
        })
    }
}

/// The process's heartbeats: the schedule of renewals, and the runtime that runs them.
struct Beats {
    schedule: Mutex<Schedule>,
    /// Wakes the renewing task when a renewal is due sooner than it waits for.
    wake: Notify,
    runtime: tokio::runtime::Handle,
}

struct Schedule {
    due: BTreeMap<Key, Renewal>,
    /// The next key's number.
    next: u64,
    /// When the renewing task looks at the schedule next (`None`: when woken).
    looks_at: Option<Instant>,
}

/// The process's heartbeats, started when first needed; `None` if the thread could not be
/// started (then leases are not renewed, and a run longer than its ttl stops with
/// `lease_lost`: safe, never a double run).
fn beats() -> Option<&'static Beats> {
    static BEATS: OnceLock<Option<&'static Beats>> = OnceLock::new();
    *BEATS.get_or_init(|| {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .ok()?;
        // Once per process, for its lifetime.
        let beats: &'static Beats = Box::leak(Box::new(Beats {
            schedule: Mutex::new(Schedule {
                due: BTreeMap::new(),
                next: 0,
                looks_at: None,
            }),
            wake: Notify::new(),
            runtime: runtime.handle().clone(),
        }));
        std::thread::Builder::new()
            .name("agentstate-heartbeat".into())
            .spawn(move || runtime.block_on(beats.run()))
            .ok()?;
        Some(beats)
    })
}

impl Beats {
    /// Schedules `renewal` at `at`, unless its run has stopped.
    fn schedule(&'static self, at: Instant, renewal: Renewal) {
        let Some(beat) = renewal.beat.upgrade() else {
            return;
        };
        let mut schedule = lock(&self.schedule);
        // Checked under the schedule's lock, which `Beat::stop` takes after setting it.
        if beat.stopped.load(Ordering::Acquire) {
            return;
        }
        let key = (at, schedule.next);
        schedule.next += 1;
        schedule.due.insert(key, renewal);
        *lock(&beat.key) = Some(key);
        if schedule.looks_at.is_none_or(|looks| at < looks) {
            schedule.looks_at = Some(at);
            self.wake.notify_one();
        }
    }

    /// The renewing task: renews what is due, then waits for the next renewal or a wake-up.
    async fn run(&'static self) {
        loop {
            let now = Instant::now();
            let (due, next) = {
                let mut schedule = lock(&self.schedule);
                let later = schedule.due.split_off(&(now, u64::MAX));
                let due = std::mem::replace(&mut schedule.due, later);
                let next = schedule.due.keys().next().map(|(at, _)| *at);
                schedule.looks_at = next;
                (due, next)
            };
            for (_, renewal) in due {
                match renewal.beat.upgrade() {
                    Some(beat) if !beat.stopped.load(Ordering::Acquire) => {
                        lock(&beat.key).take();
                        self.runtime.spawn(self.renew(renewal));
                    }
                    _ => {}
                }
            }
            match next {
                Some(at) => {
                    let _ = tokio::time::timeout_at(
                        tokio::time::Instant::from_std(at),
                        self.wake.notified(),
                    )
                    .await;
                }
                None => self.wake.notified().await,
            }
        }
    }

    /// Renews one lease, and schedules its next renewal, or marks it lost.
    async fn renew(&'static self, renewal: Renewal) {
        let Renewal {
            beat,
            lease,
            period,
        } = renewal;
        let (lease, renewed) = lease.renew().await;
        let Some(shared) = beat.upgrade() else {
            return;
        };
        match renewed {
            Ok(expires_at) => {
                shared.expires_ms.store(
                    millis(expires_at.saturating_duration_since(shared.origin)),
                    Ordering::Release,
                );
                let renewal = Renewal {
                    beat,
                    lease,
                    period,
                };
                self.schedule(Instant::now() + period, renewal);
            }
            Err(_) => shared.lost.store(true, Ordering::Release),
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::Heartbeat;
    use agentstate::state::AgentState;
    use agentstate_store::SqliteStore;
    use std::time::Duration;

    /// Leases are renewed while this runtime's only thread is blocked, until stopped; a
    /// revoked lease is told lost at its next renewal.
    #[test]
    fn renews_until_stopped_or_revoked() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            let store = SqliteStore::open_in_memory().unwrap();
            let ttl = Duration::from_millis(300);
            let mut beats = Vec::new();
            for id in ["kept", "stopped", "revoked"] {
                store.create(id, AgentState::default()).await.unwrap();
                let lease = store.lease(id, "w", ttl).await.unwrap();
                beats.push(Heartbeat::start(&lease));
            }
            beats[1].stop();
            std::thread::sleep(ttl * 3);
            assert!(beats[0].held() && beats[2].held());
            assert!(!beats[1].held(), "a stopped heartbeat renews nothing");
            assert!(store.lease_info("kept").await.unwrap().is_some());
            assert!(store.lease_info("stopped").await.unwrap().is_none());

            store.revoke_lease("revoked").await.unwrap();
            std::thread::sleep(ttl);
            assert!(!beats[2].held(), "a revoked lease is lost");
            assert!(beats[0].held());
            assert_eq!(beats[0].owner(), "w");
        });
    }
}
