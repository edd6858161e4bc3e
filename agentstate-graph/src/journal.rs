//! The stored contract of durable runs: [`JournalEntry`], what each entry a run appends to its
//! thread says it is (documented there, and nowhere else), and [`Position`], where a run
//! stands as its journal says.

use crate::effect::Interrupt;
use agentstate_store::backend::Backend;
use agentstate_store::EntryInfo;
use agentstate_store::{HistoryQuery, Store, StoreError};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::collections::{BTreeMap, HashMap};

/// The metadata key of a run's journal entries.
pub const META_KEY: &str = "agentstate_graph";

/// The version of the journal format this build writes (`v` in each entry), and the newest it
/// reads: an entry of a newer version is refused (`run_journal_invalid`) rather than
/// misread.
pub const JOURNAL_VERSION: u32 = 1;

/// One entry of a durable run's journal: the stored contract of durable runs.
///
/// Every entry a run appends to its thread carries, in its metadata
/// ([`EntryInfo::extra`](agentstate_store::EntryInfo::extra)) under the key
/// [`META_KEY`] (`"agentstate_graph"`), one `JournalEntry` as a JSON object tagged by `entry`
/// (`{"entry": "step", "step": 3, ...}`), with the format's version `v` ([`JOURNAL_VERSION`];
/// an entry without one is version 1). The entry's own update (its body) is the state change:
/// the run's input for [`Input`](JournalEntry::Input), the step's composed update for
/// [`Step`](JournalEntry::Step), nothing for the others (but an update of the state's
/// `ExecutionState` field, when it has one, which follows the run as AgentFlow's does). The
/// entry's run id is the run's.
///
/// A run is always resumed from its thread alone: the newest `Input` or `Step` says where it
/// stands, and the entries after it (effects, finished tasks, a suspension, answers, a
/// failure) what its step in flight already did.
///
/// ```
/// use agentstate_graph::durable::JournalEntry;
/// use serde_json::json;
///
/// let entry = JournalEntry::Step { step: 2, nodes: vec!["agent".into()], next: vec!["tools".into()], sends: vec![] };
/// assert_eq!(serde_json::to_value(&entry)?, json!({"entry": "step", "step": 2, "nodes": ["agent"], "next": ["tools"]}));
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "entry", rename_all = "snake_case")]
#[non_exhaustive]
pub enum JournalEntry {
    /// A run's input: its own update ("step 0"), committed before its first step.
    Input {
        /// Always 0.
        step: u64,
        /// The first step's nodes (the entry).
        next: Vec<String>,
    },
    /// A committed step: its merged update is the entry's body.
    Step {
        /// The step, from 1.
        step: u64,
        /// Its nodes, in merge order.
        nodes: Vec<String>,
        /// The next step's nodes (none: the run ended there).
        next: Vec<String>,
        /// The next step's `Send` tasks, after `next`, with their inputs.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        sends: Vec<SendRecord>,
    },
    /// A task of a step of several that finished: its update, kept so that a resumed step
    /// does not run it again.
    Task {
        /// The step.
        step: u64,
        /// The task's index in the step.
        index: usize,
        /// Its node.
        node: String,
        /// Its update, as JSON.
        update: Value,
    },
    /// The result of a node's [`Context::effect`](crate::Context::effect) (or a fan-out
    /// instance's final state), recorded before the node went on.
    Effect {
        /// The step.
        step: u64,
        /// Where in the step (`"{step}.{task}/e{n}"`, nested runs adding segments).
        key: String,
        /// The effect's name.
        name: String,
        /// Its result.
        value: Value,
    },
    /// The step in flight suspended: its questions.
    Suspend {
        /// The suspended step.
        step: u64,
        /// The questions, in the step's node order.
        interrupts: Vec<Interrupt>,
        /// Outputs of the step's finished tasks, by index (written by earlier builds; tasks
        /// are now kept as [`Task`](JournalEntry::Task) entries).
        #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
        done: BTreeMap<String, Value>,
    },
    /// Answers a resume gave, by interrupt id, committed before any node ran again.
    Answers {
        /// The step they answer.
        step: u64,
        /// The answers.
        answers: Map<String, Value>,
    },
    /// The step in flight failed; a resume runs it again.
    Failed {
        /// The step.
        step: u64,
        /// The error's category.
        category: String,
        /// The error's message.
        error: String,
    },
    /// The run reached its end (written when the state has an `ExecutionState` to mark
    /// completed).
    End {
        /// The last step.
        step: u64,
    },
}

/// A `Send` task of a run's next step: the node and its input (the state it reads).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SendRecord {
    /// The node.
    pub node: String,
    /// Its input, as JSON.
    pub input: Value,
}

impl JournalEntry {
    /// The entry as the JSON object kept under [`META_KEY`], with its version.
    pub(crate) fn to_meta(&self) -> Value {
        let mut value = serde_json::to_value(self).unwrap_or(Value::Null);
        if let Value::Object(map) = &mut value {
            if JOURNAL_VERSION != 1 {
                map.insert("v".into(), Value::from(JOURNAL_VERSION));
            }
        }
        value
    }

    /// The entry kept in `entry`'s metadata: `None` for an entry no run wrote, an error for
    /// one that does not read (or comes from a newer format).
    pub(crate) fn of(entry: &EntryInfo) -> Result<Option<Self>, String> {
        let Some(meta) = entry.extra.get(META_KEY) else {
            return Ok(None);
        };
        let version = meta.get("v").and_then(Value::as_u64).unwrap_or(1);
        if version > u64::from(JOURNAL_VERSION) {
            return Err(format!(
                "it was written in journal format {version}, and this build reads up to {JOURNAL_VERSION}; upgrade agentstate-graph"
            ));
        }
        serde_json::from_value(meta.clone())
            .map(Some)
            .map_err(|e| format!("its run entry does not read: {e}"))
    }
}

/// Where a thread's run stands, read from its journal.
#[derive(Debug, Default, Clone)]
pub(crate) struct Position {
    /// Whether a run was ever started on the thread (its journal holds an input or a step).
    pub(crate) started: bool,
    /// Whether the step in flight failed after its last answers were given.
    pub(crate) failed_last: bool,
    /// The version of the last committed step's entry.
    pub(crate) seq: u64,
    /// The last committed step.
    pub(crate) step: u64,
    /// Its nodes (none for an input).
    pub(crate) nodes: Vec<String>,
    pub(crate) run_id: Option<String>,
    pub(crate) next: Vec<String>,
    pub(crate) sends: Vec<SendRecord>,
    /// The step in flight's recorded effects, by key: (name, value).
    pub(crate) effects: HashMap<String, (String, Value)>,
    /// The step in flight's finished tasks' updates, by index.
    pub(crate) done: BTreeMap<usize, Value>,
    pub(crate) answers: Map<String, Value>,
    /// The questions of the step in flight, if it suspended.
    pub(crate) interrupts: Option<Vec<Interrupt>>,
}

/// An error reading a thread's journal: the entry's version and what is wrong.
pub(crate) enum ReadError {
    Store(StoreError),
    Entry { seq: u64, reason: String },
}

impl From<StoreError> for ReadError {
    fn from(error: StoreError) -> Self {
        ReadError::Store(error)
    }
}

impl Position {
    /// Reads where thread `thread`'s run stands from the newest entries of its journal, back
    /// to its last committed step.
    pub(crate) async fn read<B: Backend>(
        store: &Store<B>,
        thread: &str,
    ) -> Result<Position, ReadError> {
        // A run's newest entries say where it stands (its last step, then its end): a small
        // first page, larger ones after it.
        let mut page_size: u32 = 4;
        let mut position = Position::default();
        let mut before: Option<u64> = None;
        let mut suspensions: Vec<Vec<Interrupt>> = Vec::new();
        'pages: loop {
            let asked = page_size;
            page_size = (page_size * 4).min(256);
            let mut query = HistoryQuery::newest(asked);
            if let Some(b) = before {
                query = query.before(b);
            }
            let page = store.history(thread, query).await?;
            for entry in &page {
                before = Some(entry.seq);
                let read = JournalEntry::of(entry).map_err(|reason| ReadError::Entry {
                    seq: entry.seq,
                    reason,
                })?;
                let Some(read) = read else { continue };
                if position.run_id.is_none() {
                    position.run_id = entry.run_id.clone();
                }
                match read {
                    JournalEntry::Input { step, next } => {
                        position.committed(entry, step, Vec::new(), next, Vec::new());
                        break 'pages;
                    }
                    JournalEntry::Step {
                        step,
                        nodes,
                        next,
                        sends,
                    } => {
                        position.committed(entry, step, nodes, next, sends);
                        break 'pages;
                    }
                    JournalEntry::Effect {
                        key, name, value, ..
                    } => {
                        position.effects.entry(key).or_insert((name, value));
                    }
                    JournalEntry::Task { index, update, .. } => {
                        position.done.entry(index).or_insert(update);
                    }
                    JournalEntry::Answers { answers, .. } => {
                        for (id, value) in answers {
                            position.answers.entry(id).or_insert(value);
                        }
                    }
                    JournalEntry::Suspend {
                        interrupts, done, ..
                    } => {
                        for (index, update) in done {
                            if let Ok(index) = index.parse::<usize>() {
                                position.done.entry(index).or_insert(update);
                            }
                        }
                        suspensions.push(interrupts);
                    }
                    // A failure newer than every answer: the answers may be given anew.
                    JournalEntry::Failed { .. } if position.answers.is_empty() => {
                        position.failed_last = true;
                    }
                    JournalEntry::Failed { .. } | JournalEntry::End { .. } => {}
                }
            }
            if page.len() < asked as usize {
                break;
            }
        }
        // The newest suspension holds the step's questions.
        position.interrupts = suspensions.into_iter().next();
        Ok(position)
    }

    fn committed(
        &mut self,
        entry: &EntryInfo,
        step: u64,
        nodes: Vec<String>,
        next: Vec<String>,
        sends: Vec<SendRecord>,
    ) {
        self.seq = entry.seq;
        self.started = true;
        self.step = step;
        self.nodes = nodes;
        self.run_id = entry.run_id.clone();
        self.next = next;
        self.sends = sends;
    }

    /// Whether the run is at its end (nothing to run next).
    pub(crate) fn ended(&self) -> bool {
        self.next.is_empty() && self.sends.is_empty()
    }

    /// The questions of the step in flight not answered yet.
    pub(crate) fn open(&self) -> Vec<Interrupt> {
        self.interrupts
            .iter()
            .flatten()
            .filter(|i| !self.answers.contains_key(&i.id))
            .cloned()
            .collect()
    }
}
