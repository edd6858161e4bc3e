//! Streaming a run: [`Graph::stream`] gives the run as a [`Stream`] of [`Event`]s, as they
//! happen.
//!
//! The stream drives the run itself (nothing is spawned): polling it runs the graph, dropping it
//! cancels the run with no partial merge. The state after each step is shared with the run
//! (`Arc<S>`, not a copy); the run waits until the stream has handed each step's event out, so
//! a consumer that drops the event before asking for the next one never makes the run copy the
//! state.
//!
//! ```
//! use agentstate_graph::{event::Event, node::Context, Graph, END};
//! use agentstate::{AgentState, State};
//! use futures_util::StreamExt;
//! use std::sync::Arc;
//!
//! #[derive(AgentState, Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
//! struct Doc { text: String }
//!
//! let graph = Graph::builder()
//!     .node("write", |_: Arc<Doc>, cx: Context| async move {
//!         cx.text_delta("m1", "Hel");
//!         cx.text_delta("m1", "lo");
//!         Ok::<_, std::convert::Infallible>(DocUpdate::default().text("Hello"))
//!     })
//!     .entry("write")
//!     .edge("write", END)
//!     .build()?;
//!
//! let events: Vec<Event<Doc, &str>> = tokio::runtime::Builder::new_current_thread()
//!     .build()?
//!     .block_on(graph.stream(Doc::default()).collect());
//! let kinds: Vec<&str> = events.iter().map(Event::kind).collect();
//! assert_eq!(kinds, ["run_started", "step_started", "node_started", "emitted", "emitted",
//!                    "node_finished", "step_finished", "run_finished"]);
//! let Some(Event::RunFinished { state }) = events.last() else { unreachable!() };
//! assert_eq!(state.text, "Hello");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use crate::error::RunError;
use crate::graph::{Graph, RunConfig, StepRecord};
use crate::name::NodeKey;
use crate::node::Emitted;
use crate::GraphState;
use agentstate::State;
use futures_core::Stream;
use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context as TaskContext, Poll};

/// What happens in a run, in order.
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
        /// Its nodes, in merge order (shared with the step's [`StepRecord`]).
        nodes: Arc<[K]>,
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
        node: String,
        /// What it emitted.
        emitted: Emitted,
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
    /// A step merged and routed.
    StepFinished {
        /// What the step did.
        record: StepRecord<K>,
        /// The state after the step (shared with the run: drop it before polling on, or the
        /// next merge copies the state).
        state: Arc<S>,
    },
    /// The run ended; the last event of a successful run.
    RunFinished {
        /// The final state.
        state: S,
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
            Event::RunFinished { .. } => "run_finished",
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
            Event::RunFinished { state } => {
                f.debug_struct("RunFinished").field("state", state).finish()
            }
            Event::RunFailed { error } => {
                f.debug_struct("RunFailed").field("error", error).finish()
            }
        }
    }
}

/// An event as the run queues it for the stream (the run's end is not queued, it is kept
/// aside), turned into an [`Event`] only when the stream hands it out.
pub(crate) enum Queued<S: State, K> {
    RunStarted {
        run_id: Arc<str>,
    },
    StepStarted {
        step: u64,
        nodes: Arc<[K]>,
    },
    NodeStarted {
        step: u64,
        node: K,
    },
    Emitted {
        step: u64,
        node: String,
        emitted: Emitted,
    },
    NodeFinished {
        step: u64,
        node: K,
        update: Option<Box<S::Update>>,
    },
    StepFinished {
        record: StepRecord<K>,
        state: Arc<S>,
    },
}

impl<S: State, K> From<Queued<S, K>> for Event<S, K> {
    fn from(queued: Queued<S, K>) -> Self {
        match queued {
            Queued::RunStarted { run_id } => Event::RunStarted {
                run_id: run_id.to_string(),
            },
            Queued::StepStarted { step, nodes } => Event::StepStarted { step, nodes },
            Queued::NodeStarted { step, node } => Event::NodeStarted { step, node },
            Queued::Emitted {
                step,
                node,
                emitted,
            } => Event::Emitted {
                step,
                node,
                emitted,
            },
            Queued::NodeFinished { step, node, update } => {
                Event::NodeFinished { step, node, update }
            }
            Queued::StepFinished { record, state } => Event::StepFinished { record, state },
        }
    }
}

/// Receives a run's events (the stream's queue).
pub(crate) trait Observer<S: State, K>: Send + Sync {
    fn event(&self, event: Queued<S, K>);
    fn emitted(&self, node: &str, step: u64, emitted: Emitted);
}

/// The run's queue, shared by the run (as its observer) and the stream.
type Queue<S, K> = Arc<QueueObserver<S, K>>;

struct QueueObserver<S: State, K>(Mutex<VecDeque<Queued<S, K>>>);

impl<S: GraphState, K: NodeKey> Observer<S, K> for QueueObserver<S, K> {
    fn event(&self, event: Queued<S, K>) {
        lock(&self.0).push_back(event);
    }

    fn emitted(&self, node: &str, step: u64, emitted: Emitted) {
        lock(&self.0).push_back(Queued::Emitted {
            step,
            node: node.to_owned(),
            emitted,
        });
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A panic while the queue was locked left it consistent (a push either happened or not).
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

type RunFuture<S> = Pin<Box<dyn Future<Output = Result<S, RunError<S>>> + Send>>;

/// A run as a stream of [`Event`]s; see the [module docs](self).
#[must_use = "a stream does nothing unless polled"]
pub struct RunStream<S: State, K> {
    /// Where the run puts its events.
    queue: Queue<S, K>,
    /// The events taken from `queue` and not handed out yet: the stream drains the shared queue
    /// with one lock (swapping the two buffers, so both keep their slots for the next events)
    /// and hands out from here without locking.
    ready: VecDeque<Queued<S, K>>,
    run: Option<RunFuture<S>>,
    /// The last event, once the run has ended.
    end: Option<Event<S, K>>,
}

impl<S: GraphState, K: NodeKey> Graph<S, K> {
    /// Runs the graph as a stream of events; the last is [`Event::RunFinished`] or
    /// [`Event::RunFailed`].
    pub fn stream(&self, state: S) -> RunStream<S, K> {
        self.stream_with(state, RunConfig::default())
    }

    /// [`stream`](Graph::stream) with `config`.
    pub fn stream_with(&self, state: S, config: RunConfig) -> RunStream<S, K> {
        let queue: Queue<S, K> = Arc::new(QueueObserver(Mutex::new(VecDeque::new())));
        let observer: Arc<dyn Observer<S, K>> = Arc::clone(&queue) as _;
        let graph = self.clone();
        let run = Box::pin(async move { graph.run(state, config, Some(observer)).await });
        RunStream {
            queue,
            ready: VecDeque::new(),
            run: Some(run),
            end: None,
        }
    }
}

// The stream never pins its fields (the run is boxed), so it moves freely whatever `S` and `K` are.
impl<S: State, K> Unpin for RunStream<S, K> {}

impl<S: GraphState, K: NodeKey> RunStream<S, K> {
    /// Moves what the run queued into `ready` (which is empty), in one lock.
    fn take_queued(&mut self) {
        std::mem::swap(&mut *lock(&self.queue.0), &mut self.ready);
    }
}

impl<S: GraphState, K: NodeKey> Stream for RunStream<S, K> {
    type Item = Event<S, K>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<Option<Event<S, K>>> {
        let this = self.get_mut();
        loop {
            if let Some(queued) = this.ready.pop_front() {
                return Poll::Ready(Some(queued.into()));
            }
            // The run queues events while it is polled, and everything it queued in a poll is
            // taken right after it, so the queue is looked at again only once the run ended.
            let Some(run) = this.run.as_mut() else {
                this.take_queued();
                return match this.ready.pop_front() {
                    Some(queued) => Poll::Ready(Some(queued.into())),
                    None => Poll::Ready(this.end.take()),
                };
            };
            match run.as_mut().poll(cx) {
                // What the run queued in its last poll goes out first, then its end.
                Poll::Ready(result) => {
                    this.run = None;
                    this.end = Some(match result {
                        Ok(state) => Event::RunFinished { state },
                        Err(error) => Event::RunFailed { error },
                    });
                    this.take_queued();
                }
                Poll::Pending => {
                    this.take_queued();
                    return match this.ready.pop_front() {
                        Some(queued) => Poll::Ready(Some(queued.into())),
                        None => Poll::Pending,
                    };
                }
            }
        }
    }
}

/// Returns `Pending` once (waking the task at once), so that the stream hands out what is
/// queued before the run goes on.
pub(crate) fn yield_now() -> impl Future<Output = ()> {
    let mut yielded = false;
    std::future::poll_fn(move |cx| {
        if yielded {
            Poll::Ready(())
        } else {
            yielded = true;
            cx.waker().wake_by_ref();
            Poll::Pending
        }
    })
}
