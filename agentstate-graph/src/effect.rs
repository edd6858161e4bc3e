//! Effects and interrupts: what a node asks of a durable run through its [`Context`](crate::Context)
//! (told in the crate's documentation).

use crate::node::BoxError;
use serde_json::{Map, Value};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

/// What a durable run keeps for its nodes: effects' recorded results, and interrupts' answers.
pub(crate) trait Journal: Send + Sync {
    /// The recorded result of the effect `key`, with the name it was recorded under.
    fn recorded(&self, key: &str) -> Option<(String, Value)>;
    /// Journals an effect's result; the node goes on only once this is done.
    fn record(
        &self,
        key: String,
        name: String,
        value: Value,
    ) -> Pin<Box<dyn Future<Output = Result<(), BoxError>> + Send + '_>>;
    /// The answer to the interrupt `id`, if it was given.
    fn answer(&self, id: &str) -> Option<Value>;
    /// Whether a new effect may start: an error saying why not if the run no longer holds
    /// its thread's lease (it was taken over, or revoked): what it would start could not be
    /// journaled, and another worker may be running the thread.
    fn may_start(&self) -> Result<(), BoxError>;
}

/// One task of a durable step: where its effects and interrupts are keyed.
pub(crate) struct Scope {
    pub(crate) journal: Arc<dyn Journal>,
    /// The task's place in the run: `"{step}.{index}"` (index in the step's tasks).
    pub(crate) task: String,
    effects: AtomicU32,
    interrupts: AtomicU32,
}

impl Scope {
    pub(crate) fn new(journal: Arc<dyn Journal>, task: String) -> Self {
        Scope {
            journal,
            task,
            effects: AtomicU32::new(0),
            interrupts: AtomicU32::new(0),
        }
    }

    /// The key of the task's next effect.
    pub(crate) fn next_effect(&self) -> String {
        let n = self.effects.fetch_add(1, Ordering::SeqCst);
        format!("{}/e{n}", self.task)
    }

    /// The number of the task's next interrupt.
    pub(crate) fn next_interrupt(&self) -> u32 {
        self.interrupts.fetch_add(1, Ordering::SeqCst)
    }
}

/// A node asked for input that no one has given yet: return it from the node (`?`), and the
/// durable run ends suspended with the interrupt's [`id`](Interrupted::id) and payload.
///
/// The id is stable and unique: the same node in the same step of the same run asking its
/// n-th question gets the same id when it runs again (a resumed run finds its answer by it),
/// two nodes of one step (parallel tool approvals) get different ones, and so do two runs of
/// one thread (the id ends with the run's id).
#[derive(Debug, Clone, PartialEq)]
pub struct Interrupted {
    /// The interrupt's id (`"{node}:{step}.{task}:{n}@{run_id}"`), which the answer must name.
    pub id: String,
    /// The node that asked.
    pub node: String,
    /// Where it asked: the task's place in the run (`"{step}.{task}"`, then for each nested
    /// run its segment: `i{n}` for fan-out instance n, `b:{name}` for a parallel branch,
    /// `t{n}` for the n-th tool call a [`ToolSet`](crate::ToolSet) runs, `sub` for a subgraph,
    /// and the nested step's `"{step}.{task}"`).
    pub task: String,
    /// What the node asked, for the person who answers.
    pub payload: Value,
}

impl std::fmt::Display for Interrupted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "node `{}` is waiting for an answer to interrupt `{}`",
            self.node, self.id
        )
    }
}

impl std::error::Error for Interrupted {}

/// A question a durable run waits for an answer to: a node's
/// [`Context::interrupt`](crate::Context::interrupt), or a static breakpoint
/// ([`GraphBuilder::interrupt_before`](crate::GraphBuilder::interrupt_before) and `_after`).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Interrupt {
    /// Its id, which an answer names.
    pub id: String,
    /// The node that asked.
    pub node: String,
    /// The node of the run's step it was asked in (the asking node itself, or the subgraph,
    /// fan-out or parallel-branches node it runs inside).
    pub step_node: String,
    /// The step it was asked in.
    pub step: u64,
    /// What it asked (for a breakpoint: `{"breakpoint": "before"}` or `"after"`).
    pub payload: Value,
    /// Where inside the step's node it was asked: `fan_out_index` (the fan-out instance),
    /// `branch_name` (the parallel branch) and `tool_call_index` (the place of the tool call in
    /// its message, for a question a tool run by a [`ToolSet`](crate::ToolSet) asked), when it
    /// was asked inside one (the innermost).
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub metadata: Map<String, Value>,
}

impl Interrupt {
    /// The interrupt of a node's question, asked in step `step` by the task of node
    /// `step_node`.
    pub(crate) fn asked(asked: Interrupted, step: u64, step_node: &str) -> Self {
        let mut metadata = Map::new();
        for segment in asked.task.split('/') {
            if let Some(n) = segment
                .strip_prefix('i')
                .and_then(|n| n.parse::<u64>().ok())
            {
                metadata.insert("fan_out_index".into(), Value::from(n));
            } else if let Some(name) = segment.strip_prefix("b:") {
                metadata.insert("branch_name".into(), Value::from(name));
            } else if let Some(n) = segment
                .strip_prefix('t')
                .and_then(|n| n.parse::<u64>().ok())
            {
                metadata.insert("tool_call_index".into(), Value::from(n));
            }
        }
        Interrupt {
            id: asked.id,
            node: asked.node,
            step_node: step_node.to_owned(),
            step,
            payload: asked.payload,
            metadata,
        }
    }

    /// Whether this is a static breakpoint ([`GraphBuilder::interrupt_before`](crate::GraphBuilder::interrupt_before)
    /// or `_after`, or a durable worker's), not a node's question: its payload is
    /// `{"breakpoint": "before"}` or `{"breakpoint": "after"}`. Any answer lets the run go on.
    ///
    /// ```
    /// use agentstate_graph::Interrupt;
    ///
    /// let asked: Interrupt = serde_json::from_value(serde_json::json!({
    ///     "id": "approve:2.0:0@run-1", "node": "approve", "step_node": "approve", "step": 2,
    ///     "payload": {"question": "send?"}
    /// }))?;
    /// assert!(!asked.is_breakpoint());
    /// let stop: Interrupt = serde_json::from_value(serde_json::json!({
    ///     "id": "approve:2.before@run-1", "node": "approve", "step_node": "approve", "step": 2,
    ///     "payload": {"breakpoint": "before"}
    /// }))?;
    /// assert!(stop.is_breakpoint());
    /// # Ok::<(), serde_json::Error>(())
    /// ```
    pub fn is_breakpoint(&self) -> bool {
        let Value::Object(payload) = &self.payload else {
            return false;
        };
        let when = payload.get("breakpoint").and_then(Value::as_str);
        payload.len() == 1
            && when.is_some_and(|when| {
                let place = breakpoint_place(&self.node, self.step, when);
                (when == "before" || when == "after")
                    && self
                        .id
                        .strip_prefix(place.as_str())
                        .is_some_and(|run| run.is_empty() || run.starts_with('@'))
            })
    }

    /// A static breakpoint (`when`: `before` or `after`) at node `node` of step `step` of run
    /// `run_id`.
    pub(crate) fn breakpoint(node: &str, step: u64, when: &str, run_id: &str) -> Self {
        let mut payload = Map::new();
        payload.insert("breakpoint".into(), Value::from(when));
        Interrupt {
            id: format!("{}@{run_id}", breakpoint_place(node, step, when)),
            node: node.to_owned(),
            step_node: node.to_owned(),
            step,
            payload: Value::Object(payload),
            metadata: Map::new(),
        }
    }
}

/// Where a breakpoint stops a run (`"{node}:{step}.{when}"`): its id without the run's, as
/// threads suspended by earlier builds name it.
pub(crate) fn breakpoint_place(node: &str, step: u64, when: &str) -> String {
    format!("{node}:{step}.{when}")
}

/// A question asked where a run cannot be suspended: inside a fan-out instance or a parallel
/// branch whose errors are collected ([`ErrorPolicy::Collect`](crate::parallel::ErrorPolicy)),
/// where the other instances' results would be merged without the asking one's
/// (OpenArmature's `suspension_in_unsupported_context`). The node fails with it.
#[derive(Debug, Clone, PartialEq)]
pub struct UnsupportedSuspension {
    /// The fan-out or parallel-branches node.
    pub node: String,
    /// The question that was asked.
    pub interrupt: Interrupted,
}

impl std::fmt::Display for UnsupportedSuspension {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "node `{}` collects its instances' errors, so the question `{}` asked inside it cannot suspend the run; use the fail-fast error policy to ask questions there",
            self.node, self.interrupt.id
        )
    }
}

impl std::error::Error for UnsupportedSuspension {}

/// Why [`Context::effect`](crate::Context::effect) failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EffectError<E> {
    /// The effect itself failed (nothing was recorded: it runs again next time).
    #[error("effect `{name}` failed: {error}")]
    Failed {
        /// The effect's name.
        name: String,
        /// Its error.
        #[source]
        error: E,
    },
    /// The effect ran but its result could not be journaled (the run's thread was taken over,
    /// or the database failed): the node must not go on as if it were recorded.
    #[error("effect `{name}` ran but its result could not be journaled: {error}")]
    Journal {
        /// The effect's name.
        name: String,
        /// Why.
        #[source]
        error: BoxError,
    },
    /// The effect was not started: its run no longer holds its thread's lease (a worker paused
    /// past it and taken over, or a run stopped from outside): what it would do could not be
    /// journaled, and another worker may be running the thread.
    #[error("effect `{name}` was not started: {error}")]
    NotStarted {
        /// The effect's name.
        name: String,
        /// Why.
        #[source]
        error: BoxError,
    },
    /// The recorded result does not read as the type asked for, or the result does not
    /// serialize.
    #[error("the result of effect `{name}` does not convert to or from JSON: {error}")]
    Json {
        /// The effect's name.
        name: String,
        /// The serde error.
        #[source]
        error: serde_json::Error,
    },
    /// The node asked for its effects in another order than when they were recorded (a node
    /// must ask for the same effects in the same order each time it runs).
    #[error("effect `{name}` was asked for where effect `{recorded}` was recorded: a node must run its effects in the same order each time")]
    OutOfOrder {
        /// The effect asked for.
        name: String,
        /// The effect recorded at that place.
        recorded: String,
    },
}

impl<E> EffectError<E> {
    /// The category: `effect_failed`, `effect_journal_failed`, `effect_json` or
    /// `effect_out_of_order`.
    pub fn category(&self) -> &'static str {
        match self {
            EffectError::Failed { .. } => "effect_failed",
            EffectError::Journal { .. } => "effect_journal_failed",
            EffectError::NotStarted { .. } => "lease_lost",
            EffectError::Json { .. } => "effect_json",
            EffectError::OutOfOrder { .. } => "effect_out_of_order",
        }
    }
}
