//! The warm-handle cache: a worker keeps the handles of the threads it ran last (and where
//! their runs stood), so that the next run on one of them costs its steps, not a load.

use super::{lock, DurableError, DurableGraph, DurableState};
use crate::journal::Position;
use crate::name::NodeKey;
use agentstate_store::backend::Backend;
use agentstate_store::{Lease, Thread};
use std::collections::{HashMap, VecDeque};

/// How many threads' handles a worker keeps warm by default
/// ([`DurableGraph::keep_threads`]).
pub const DEFAULT_KEEP_THREADS: usize = 64;

impl<S, K, B> DurableGraph<S, K, B>
where
    S: DurableState,
    K: NodeKey,
    B: Backend,
{
    /// The thread's handle (warm, caught up with what other workers appended since, or
    /// loaded) and where its run stands, if known without reading the journal.
    pub(super) async fn open(
        &self,
        thread: &str,
        lease: &Lease<B>,
    ) -> Result<(Thread<S, B>, Option<Position>), DurableError<S>> {
        let warm = lock(&self.warm).take(thread);
        let (mut handle, position) = match warm {
            // What the lease saw of the thread is what the handle holds: nothing to read.
            Some((handle, position)) if handle.is_current(lease) => (handle, position),
            // Another worker appended since: catch up with its entries (or read afresh, if
            // the thread was re-created or migrated).
            Some((mut handle, _)) => match handle.reload().await {
                Ok(()) => (handle, None),
                Err(_) => (self.store.thread::<S>(thread).await?, None),
            },
            None => (self.store.thread::<S>(thread).await?, None),
        };
        // Every append of the run is fenced by its lease.
        handle.fence(lease);
        Ok((handle, position))
    }

    /// Keeps the thread's handle warm for its next run.
    pub(super) fn keep(&self, thread: &str, mut handle: Thread<S, B>, position: Option<Position>) {
        // The next run fences it with its own lease.
        handle.unfence();
        if handle.staged() == 0 {
            lock(&self.warm).put(thread, handle, position);
        }
    }
}

/// The handles of the threads a worker ran last, each with where its run stood if known: at
/// most `capacity`, the least recently used dropped first.
pub(super) struct Warm<S, B> {
    capacity: usize,
    threads: HashMap<String, (Thread<S, B>, Option<Position>)>,
    order: VecDeque<String>,
}

impl<S, B> Warm<S, B> {
    pub(super) fn new(capacity: usize) -> Self {
        Warm {
            capacity,
            threads: HashMap::new(),
            order: VecDeque::new(),
        }
    }

    pub(super) fn resize(&mut self, capacity: usize) {
        self.capacity = capacity;
        self.evict();
    }

    pub(super) fn take(&mut self, thread: &str) -> Option<(Thread<S, B>, Option<Position>)> {
        let taken = self.threads.remove(thread)?;
        self.order.retain(|t| t != thread);
        Some(taken)
    }

    pub(super) fn put(&mut self, thread: &str, handle: Thread<S, B>, position: Option<Position>) {
        if self.capacity == 0 {
            return;
        }
        if self
            .threads
            .insert(thread.to_owned(), (handle, position))
            .is_some()
        {
            self.order.retain(|t| t != thread);
        }
        self.order.push_back(thread.to_owned());
        self.evict();
    }

    fn evict(&mut self) {
        while self.order.len() > self.capacity {
            if let Some(oldest) = self.order.pop_front() {
                self.threads.remove(&oldest);
            }
        }
    }
}
