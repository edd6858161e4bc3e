//! The events of a run, in the order they happen, and the [`EventFilter`] that picks which of
//! them a stream carries. [`Graph::stream`](crate::Graph::stream) gives them
//! ([`stream`](crate::stream)).

use crate::error::RunError;
use crate::graph::{Nodes, StepRecord};
use crate::node::Emitted;
use agentstate::State;
use std::sync::Arc;

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
        /// The final state (boxed: see [`NodeFinished`](Event::NodeFinished)).
        state: Box<S>,
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

/// Which of a run's events a stream carries (its start and its end always): a set of kinds,
/// combined with `|`. A stream carries [`ALL`](EventFilter::ALL) unless told otherwise with
/// [`RunStream::only`](crate::RunStream::only); the events left out are never built, and
/// without [`EMITTED`](EventFilter::EMITTED) a node's [`Context::is_streamed`](crate::Context::is_streamed)
/// is false, so it need not build its deltas either.
///
/// ```
/// use agentstate_graph::event::EventFilter;
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
    /// A step's start and end.
    pub const STEPS: Self = EventFilter(1 | 16);
    /// A node's start and end.
    pub const NODES: Self = EventFilter(2 | 8);
    /// Every event.
    pub const ALL: Self = EventFilter(31);
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
