//! The events of a run and the filter that picks them.

use crate::effect::Interrupt;
use crate::error::RunError;
use crate::graph::{Nodes, StepRecord};
use crate::node::{Emitted, Sink};
use agentstate::State;
use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context as TaskContext, Poll, Waker};

/// What happens in a run, in order. [`Graph::stream`](crate::Graph::stream) gives them (a
/// [`RunStream`](crate::RunStream)), as many as its [`EventFilter`] picks.
#[non_exhaustive]
pub enum Event<S: State, K> {
    /// The run started.
    RunStarted {
        /// The run's id.
        run_id: String,
    },
    /// A step started; its nodes run now.
    StepStarted {
        /// The step, from 1.
        step: u64,
        /// Its nodes, in merge order (as the step's [`StepRecord`] names them).
        nodes: Nodes<K>,
    },
    /// A node started.
    NodeStarted {
        /// The step.
        step: u64,
        /// The node.
        node: K,
    },
    /// A node emitted something through its context.
    Emitted {
        /// The step.
        step: u64,
        /// The node's name.
        node: Arc<str>,
        /// What it emitted (boxed, as the other large parts of events are: events are moved
        /// several times on their way out, and a small event moves fast).
        emitted: Box<Emitted>,
    },
    /// A node finished; its update (`None` for no change) merges at the step's barrier.
    NodeFinished {
        /// The step.
        step: u64,
        /// The node.
        node: K,
        /// A copy of its update, boxed so that an event stays small whatever the update's size
        /// (events are moved several times on their way out; an `AgentState` update is 640
        /// bytes).
        update: Option<Box<S::Update>>,
    },
    /// A step merged and routed. The first, right after [`RunStarted`](Event::RunStarted), is
    /// the state the run starts from (its input merged; a resumed run's state where it
    /// stands), LangGraph's first `values`: its record names no nodes, the run's step so far
    /// (0 for a new run) and the nodes its first step runs.
    StepFinished {
        /// What the step did.
        record: StepRecord<K>,
        /// The state after the step (shared with the run: drop it before polling on, or the
        /// next merge copies the state).
        state: Arc<S>,
    },
    /// A durable run committed its steps up to `step` to its thread, which is now at
    /// `version` (durable runs only: when this comes follows the
    /// [`Durability`](crate::durable::Durability) mode).
    StepCommitted {
        /// The last step committed.
        step: u64,
        /// The thread's version after it.
        version: u64,
    },
    /// The run ended; the last event of a successful run.
    RunFinished {
        /// The final state (shared, not copied: `Arc::unwrap_or_clone` takes it out).
        state: Arc<S>,
    },
    /// A durable run suspended: it waits for answers to `interrupts`; the last event of such a
    /// run (durable runs only; resume it with
    /// [`DurableGraph::resume_with`](crate::durable::DurableGraph::resume_with)).
    RunSuspended {
        /// The state before the suspended step.
        state: Arc<S>,
        /// The questions, in the step's node order.
        interrupts: Vec<Interrupt>,
    },
    /// The run failed; the last event of a failed run.
    RunFailed {
        /// Why, with the state at the point of failure.
        error: RunError<S>,
    },
}

impl<S: State, K> Event<S, K> {
    /// The event's kind in snake case (`run_started`, `node_finished`, ...).
    pub fn kind(&self) -> &'static str {
        match self {
            Event::RunStarted { .. } => "run_started",
            Event::StepStarted { .. } => "step_started",
            Event::NodeStarted { .. } => "node_started",
            Event::Emitted { .. } => "emitted",
            Event::NodeFinished { .. } => "node_finished",
            Event::StepFinished { .. } => "step_finished",
            Event::StepCommitted { .. } => "step_committed",
            Event::RunFinished { .. } => "run_finished",
            Event::RunSuspended { .. } => "run_suspended",
            Event::RunFailed { .. } => "run_failed",
        }
    }
}

impl<S: State + std::fmt::Debug, K: std::fmt::Debug> std::fmt::Debug for Event<S, K>
where
    S::Update: std::fmt::Debug,
{
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Event::RunStarted { run_id } => f
                .debug_struct("RunStarted")
                .field("run_id", run_id)
                .finish(),
            Event::StepStarted { step, nodes } => f
                .debug_struct("StepStarted")
                .field("step", step)
                .field("nodes", nodes)
                .finish(),
            Event::NodeStarted { step, node } => f
                .debug_struct("NodeStarted")
                .field("step", step)
                .field("node", node)
                .finish(),
            Event::Emitted {
                step,
                node,
                emitted,
            } => f
                .debug_struct("Emitted")
                .field("step", step)
                .field("node", node)
                .field("emitted", emitted)
                .finish(),
            Event::NodeFinished { step, node, update } => f
                .debug_struct("NodeFinished")
                .field("step", step)
                .field("node", node)
                .field("update", update)
                .finish(),
            Event::StepFinished { record, state } => f
                .debug_struct("StepFinished")
                .field("record", record)
                .field("state", state)
                .finish(),
            Event::StepCommitted { step, version } => f
                .debug_struct("StepCommitted")
                .field("step", step)
                .field("version", version)
                .finish(),
            Event::RunFinished { state } => {
                f.debug_struct("RunFinished").field("state", state).finish()
            }
            Event::RunSuspended { state, interrupts } => f
                .debug_struct("RunSuspended")
                .field("state", state)
                .field("interrupts", interrupts)
                .finish(),
            Event::RunFailed { error } => {
                f.debug_struct("RunFailed").field("error", error).finish()
            }
        }
    }
}

/// Which of a run's events a stream carries (its start and its end always: [`Event::RunStarted`],
/// and [`Event::RunFinished`], [`Event::RunSuspended`] or [`Event::RunFailed`]): a set of kinds,
/// combined with `|`. A stream carries [`ALL`](EventFilter::ALL) unless told otherwise with
/// [`RunStream::only`](crate::RunStream::only); the events left out are never built, and
/// without [`EMITTED`](EventFilter::EMITTED) a node's [`Context::is_streamed`](crate::Context::is_streamed)
/// is false, so it need not build its deltas either.
///
/// ```
/// use agentstate_graph::EventFilter;
///
/// let values = EventFilter::STEP_FINISHED; // the state after each step (LangGraph's "values")
/// let ui = EventFilter::NODES | EventFilter::EMITTED;
/// assert!(ui.contains(EventFilter::NODE_FINISHED) && !ui.contains(values));
/// assert!(EventFilter::ALL.contains(ui | values));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct EventFilter(u8);

impl EventFilter {
    /// [`Event::StepStarted`].
    pub const STEP_STARTED: Self = EventFilter(1);
    /// [`Event::NodeStarted`].
    pub const NODE_STARTED: Self = EventFilter(2);
    /// [`Event::Emitted`].
    pub const EMITTED: Self = EventFilter(4);
    /// [`Event::NodeFinished`] (each node's update: LangGraph's "updates").
    pub const NODE_FINISHED: Self = EventFilter(8);
    /// [`Event::StepFinished`] (the state after each step: LangGraph's "values").
    pub const STEP_FINISHED: Self = EventFilter(16);
    /// [`Event::StepCommitted`] (durable runs: the thread's version after a commit).
    pub const STEP_COMMITTED: Self = EventFilter(32);
    /// A step's start and end.
    pub const STEPS: Self = EventFilter(1 | 16);
    /// A node's start and end.
    pub const NODES: Self = EventFilter(2 | 8);
    /// Every event.
    pub const ALL: Self = EventFilter(63);
    /// No event but the run's start and end.
    pub const NONE: Self = EventFilter(0);

    /// Whether every kind of `other` is in this set.
    pub const fn contains(self, other: EventFilter) -> bool {
        self.0 & other.0 == other.0
    }
}

impl Default for EventFilter {
    fn default() -> Self {
        EventFilter::ALL
    }
}

impl std::ops::BitOr for EventFilter {
    type Output = EventFilter;

    fn bitor(self, other: EventFilter) -> EventFilter {
        EventFilter(self.0 | other.0)
    }
}

/// Where a run writes its events on their way to a stream: a batch the run fills without a
/// lock, handed to the stream's queue ([`Queue`]) once per half step. A run that is not
/// streamed has none ([`Outbox::off`]) and builds no event.
pub(crate) struct Outbox<S: State, K> {
    filter: EventFilter,
    batch: VecDeque<Event<S, K>>,
    queue: Option<Arc<Queue<S, K>>>,
    /// Where a nested run's nodes' emissions go: its parent node's stream.
    parent: Option<Sink>,
}

impl<S: State, K> Outbox<S, K> {
    /// No events (a run that is awaited, not streamed).
    pub(crate) fn off() -> Self {
        Outbox {
            filter: EventFilter::NONE,
            batch: VecDeque::new(),
            queue: None,
            parent: None,
        }
    }

    /// No events but the nodes' emissions, which go to `parent` (a run nested in a node: a
    /// subgraph, a fan-out instance, whose nodes' text reaches the parent run's stream).
    pub(crate) fn nested(parent: Option<Sink>) -> Self {
        Outbox {
            parent,
            ..Outbox::off()
        }
    }

    /// Events of `filter` (with the run's start and end) to `queue`.
    pub(crate) fn to(queue: Arc<Queue<S, K>>, filter: EventFilter) -> Self {
        Outbox {
            filter,
            batch: VecDeque::with_capacity(8),
            queue: Some(queue),
            parent: None,
        }
    }

    /// Whether the run writes the events of `filter`.
    #[inline]
    pub(crate) fn wants(&self, filter: EventFilter) -> bool {
        self.queue.is_some() && self.filter.contains(filter)
    }

    /// Whether the run is streamed at all.
    #[inline]
    pub(crate) fn is_on(&self) -> bool {
        self.queue.is_some()
    }

    /// Adds an event to the batch (dropped when the run is not streamed).
    #[inline]
    pub(crate) fn push(&mut self, event: Event<S, K>) {
        if self.queue.is_some() {
            self.batch.push_back(event);
        }
    }

    /// Hands the batch to the stream's queue.
    pub(crate) fn send(&mut self) {
        if let (Some(queue), false) = (&self.queue, self.batch.is_empty()) {
            queue.append(&mut self.batch);
        }
    }

    /// Where nodes' emissions go: the queue, if the stream carries them.
    pub(crate) fn sink(&self) -> Option<Sink>
    where
        S: Send + Sync + 'static,
        S::Update: Send + Sync,
        K: Send + Sync + 'static,
    {
        if self.parent.is_some() {
            return self.parent.clone();
        }
        let queue = self
            .queue
            .as_ref()
            .filter(|_| self.filter.contains(EventFilter::EMITTED))?;
        let queue = Arc::clone(queue);
        Some(Arc::new(move |node: &Arc<str>, step, emitted| {
            queue.emit(Event::Emitted {
                step,
                node: Arc::clone(node),
                emitted: Box::new(emitted),
            })
        }))
    }

    /// Hands the batch to the stream and waits until the consumer asked for the event after
    /// it: the next step begins only then.
    pub(crate) fn handed_out(&mut self) -> HandedOut<'_, S, K> {
        self.send();
        HandedOut {
            queue: self.queue.as_deref(),
        }
    }
}

/// The future of [`Outbox::handed_out`]: pending once while the queue holds events (the
/// stream, which polls the run, then hands them out before it polls the run again).
pub(crate) struct HandedOut<'a, S: State, K> {
    queue: Option<&'a Queue<S, K>>,
}

impl<S: State, K> Future for HandedOut<'_, S, K> {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, _: &mut TaskContext<'_>) -> Poll<()> {
        match self.queue.take() {
            Some(queue) if queue.any.load(Ordering::Acquire) => Poll::Pending,
            _ => Poll::Ready(()),
        }
    }
}

/// A streamed run's events between the run and the stream: the run's batches, and nodes'
/// emissions, which may come from any thread (a node may hand its context to a task of its
/// own). Behind a lock taken once per batch, per emission, and when the stream is about to
/// wait; `any` says without the lock whether something waits.
pub(crate) struct Queue<S: State, K> {
    inner: Mutex<Waiting<S, K>>,
    any: AtomicBool,
}

struct Waiting<S: State, K> {
    events: VecDeque<Event<S, K>>,
    /// The stream's waker while it waits for its run.
    waker: Option<Waker>,
}

impl<S: State, K> Queue<S, K> {
    pub(crate) fn new() -> Arc<Self> {
        Arc::new(Queue {
            inner: Mutex::new(Waiting {
                events: VecDeque::new(),
                waker: None,
            }),
            any: AtomicBool::new(false),
        })
    }

    fn lock(&self) -> MutexGuard<'_, Waiting<S, K>> {
        // A panic while the queue was locked left it consistent (a push happened or not).
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The run's batch (the stream is polling the run: no one to wake).
    fn append(&self, batch: &mut VecDeque<Event<S, K>>) {
        let mut waiting = self.lock();
        waiting.events.append(batch);
        self.any.store(true, Ordering::Release);
    }

    /// A node's emission, from any thread: wakes the stream if it waits.
    fn emit(&self, event: Event<S, K>) {
        let waker = {
            let mut waiting = self.lock();
            waiting.events.push_back(event);
            self.any.store(true, Ordering::Release);
            waiting.waker.take()
        };
        if let Some(waker) = waker {
            waker.wake();
        }
    }

    /// Moves what waits into `events`; with `waker`, when nothing waits, registers it.
    pub(crate) fn take(&self, events: &mut VecDeque<Event<S, K>>, waker: Option<&Waker>) {
        if waker.is_none() && !self.any.load(Ordering::Acquire) {
            return;
        }
        let mut waiting = self.lock();
        self.any.store(false, Ordering::Relaxed);
        if waiting.events.is_empty() {
            if let Some(waker) = waker {
                if !waiting.waker.as_ref().is_some_and(|w| w.will_wake(waker)) {
                    waiting.waker = Some(waker.clone());
                }
            }
        } else {
            events.append(&mut waiting.events);
        }
    }
}
