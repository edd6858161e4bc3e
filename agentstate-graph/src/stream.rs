//! Streaming a run: [`Graph::stream`] gives the run as a [`Stream`] of [`Event`]s, as they
//! happen.
//!
//! The stream drives the run itself (nothing is spawned): polling it runs the graph, dropping it
//! cancels the run with no partial merge. The run writes each step's events straight into a
//! buffer the stream owns (no lock, no dynamic call per event; nodes' emissions, which may
//! come from other threads, are the exception), and the next step begins only when the
//! consumer has taken every event of the last one. The state after each step is shared with
//! the run (`Arc<S>`, not a copy), so a consumer that drops it before asking for the next event
//! never makes the run copy the state.
//!
//! A stream carries every event unless [`RunStream::only`] picks some
//! ([`EventFilter`]): events left out are never built. Streaming every event costs about four
//! small events per step (0.1 to 0.2 µs on trivial nodes, nothing next to a model call); the
//! state after each step alone ([`EventFilter::STEP_FINISHED`]) costs one.
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

use crate::event::{Event, EventFilter};
use crate::graph::{Graph, RunConfig};
use crate::name::NodeKey;
use crate::node::{Emitted, Sink};
use crate::run::{Run, Tasks};
use crate::GraphState;
use agentstate::State;
use futures_core::Stream;
use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context as TaskContext, Poll, Waker};

/// Nodes' emissions on their way to the stream: they may come from any thread (a node may
/// hand its context to a task of its own), so they wait behind a lock, which is taken only
/// when something was emitted (`any`) or the stream is about to wait.
struct Emissions<S: State, K> {
    queue: Mutex<Pending<S, K>>,
    any: AtomicBool,
}

struct Pending<S: State, K> {
    events: VecDeque<Event<S, K>>,
    /// The stream's waker while it waits for its nodes.
    waker: Option<Waker>,
}

impl<S: GraphState, K: NodeKey> Emissions<S, K> {
    fn push(&self, node: &Arc<str>, step: u64, emitted: Emitted) {
        let waker = {
            let mut queue = lock(&self.queue);
            queue.events.push_back(Event::Emitted {
                step,
                node: Arc::clone(node),
                emitted: Box::new(emitted),
            });
            self.any.store(true, Ordering::Release);
            queue.waker.take()
        };
        if let Some(waker) = waker {
            waker.wake();
        }
    }

    /// Moves what was emitted into `events`; with `waker`, when nothing was, registers it.
    fn take(&self, events: &mut VecDeque<Event<S, K>>, waker: Option<&Waker>) {
        if waker.is_none() && !self.any.load(Ordering::Acquire) {
            return;
        }
        let mut queue = lock(&self.queue);
        self.any.store(false, Ordering::Relaxed);
        if queue.events.is_empty() {
            if let Some(waker) = waker {
                if !queue.waker.as_ref().is_some_and(|w| w.will_wake(waker)) {
                    queue.waker = Some(waker.clone());
                }
            }
        } else {
            events.append(&mut queue.events);
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A panic while the queue was locked left it consistent (a push either happened or not).
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A run as a stream of [`Event`]s; see the [module docs](self).
#[must_use = "a stream does nothing unless polled"]
pub struct RunStream<S: GraphState, K: NodeKey> {
    /// The run, between its steps or inside one, with its state; `None` once it ended.
    run: Option<(Run<S, K>, Arc<S>)>,
    /// The current step's running nodes.
    tasks: Option<Tasks<S::Update>>,
    /// The events not handed out yet, written by the run without a lock.
    events: VecDeque<Event<S, K>>,
    /// Where nodes' emissions wait: made when the first step begins, if the stream carries
    /// them.
    emissions: Option<Arc<Emissions<S, K>>>,
}

impl<S: GraphState, K: NodeKey> Graph<S, K> {
    /// Runs the graph as a stream of events; the last is [`Event::RunFinished`] or
    /// [`Event::RunFailed`].
    pub fn stream(&self, state: S) -> RunStream<S, K> {
        self.stream_with(state, RunConfig::default())
    }

    /// [`stream`](Graph::stream) with `config`.
    pub fn stream_with(&self, state: S, config: RunConfig) -> RunStream<S, K> {
        let run = Run::new(self, config, None);
        let mut events = VecDeque::with_capacity(8);
        events.push_back(run.started());
        RunStream {
            run: Some((run, Arc::new(state))),
            tasks: None,
            events,
            emissions: None,
        }
    }
}

// The stream never pins its fields (the node futures are boxed), so it moves freely whatever
// `S` and `K` are.
impl<S: GraphState, K: NodeKey> Unpin for RunStream<S, K> {}

impl<S: GraphState, K: NodeKey> RunStream<S, K> {
    /// Carries only the events of `filter` (with the run's start and end), from the next step
    /// on: call it before polling. Events left out are never built; without
    /// [`EventFilter::EMITTED`], nodes' emissions are dropped where they are made.
    ///
    /// ```
    /// use agentstate_graph::{event::{Event, EventFilter}, node::Context, Graph, END};
    /// use agentstate::{AgentState, State};
    /// use futures_util::StreamExt;
    /// use std::sync::Arc;
    ///
    /// #[derive(AgentState, Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
    /// struct Count { n: u32 }
    ///
    /// let graph = Graph::builder()
    ///     .node("add", |s: Arc<Count>, _: Context| async move {
    ///         Ok::<_, std::convert::Infallible>(CountUpdate::default().n(s.n + 1))
    ///     })
    ///     .entry("add")
    ///     .route("add", |s: &Count| if s.n < 3 { "add".into() } else { END.into() })
    ///     .build()?;
    ///
    /// // The state after each step, as LangGraph's "values" stream mode gives it.
    /// let values: Vec<u32> = tokio::runtime::Builder::new_current_thread().build()?.block_on(
    ///     graph
    ///         .stream(Count::default())
    ///         .only(EventFilter::STEP_FINISHED)
    ///         .filter_map(|event| async move {
    ///             match event {
    ///                 Event::StepFinished { state, .. } => Some(state.n),
    ///                 _ => None,
    ///             }
    ///         })
    ///         .collect(),
    /// );
    /// assert_eq!(values, [1, 2, 3]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn only(mut self, filter: EventFilter) -> Self {
        if let Some((run, _)) = self.run.as_mut() {
            run.filter(filter);
        }
        self
    }

    /// Ends the run with `kind`'s error as its last event.
    fn fail(&mut self, kind: crate::error::RunErrorKind) {
        if let Some((run, state)) = self.run.take() {
            self.events.push_back(Event::RunFailed {
                error: run.fail(kind, state),
            });
        }
        self.tasks = None;
    }
}

impl<S: GraphState, K: NodeKey> Stream for RunStream<S, K> {
    type Item = Event<S, K>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<Option<Event<S, K>>> {
        let this = self.get_mut();
        loop {
            if let Some(event) = this.events.pop_front() {
                return Poll::Ready(Some(event));
            }
            let Some((run, state)) = this.run.as_mut() else {
                return Poll::Ready(None);
            };
            if let Some(tasks) = this.tasks.as_mut() {
                match Pin::new(tasks).poll(cx) {
                    Poll::Pending => {
                        if let Some(emissions) = &this.emissions {
                            emissions.take(&mut this.events, Some(cx.waker()));
                        }
                        if this.events.is_empty() {
                            return Poll::Pending;
                        }
                    }
                    Poll::Ready(results) => {
                        this.tasks = None;
                        // What the nodes emitted goes out before they finish.
                        if let Some(emissions) = &this.emissions {
                            emissions.take(&mut this.events, None);
                        }
                        if let Err(kind) = run.finish(state, results, Some(&mut this.events)) {
                            this.fail(kind);
                        }
                    }
                }
                continue;
            }
            // The consumer took every event of the last step: the next one begins.
            if run.step == 0 && this.emissions.is_none() && run.wants(EventFilter::EMITTED) {
                let emissions = Arc::new(Emissions {
                    queue: Mutex::new(Pending {
                        events: VecDeque::new(),
                        waker: None,
                    }),
                    any: AtomicBool::new(false),
                });
                let to = Arc::clone(&emissions);
                let sink: Sink =
                    Arc::new(move |node: &Arc<str>, step, emitted| to.push(node, step, emitted));
                run.set_sink(sink);
                this.emissions = Some(emissions);
            }
            match run.begin(state, Some(&mut this.events)) {
                Ok(Some(tasks)) => this.tasks = Some(tasks),
                Ok(None) => {
                    if let Some((_, state)) = this.run.take() {
                        this.events.push_back(Event::RunFinished {
                            state: Box::new(crate::run::unwrap_state(state)),
                        });
                    }
                }
                Err(kind) => this.fail(kind),
            }
        }
    }
}
