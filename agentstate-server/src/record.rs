//! What the server keeps in the store's database, beside the threads' journals: one
//! serde-tagged, versioned type, [`Record`].

use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

/// Everything the server stores, as records of the store's database
/// ([`Store::put_record`](agentstate_store::Store::put_record)): the kind of a record's row is
/// [`Record::kind`], its id the run's or thread's, and its JSON this enum, tagged by `record`
/// with the variant's name and version (`"run/1"`, `"thread/1"`, `"event/1"`). A run's
/// streamed events are [`Record::Event`]s in the store's event log of the run
/// ([`Store::append_events`](agentstate_store::Store::append_events), numbered from 0 as the
/// SSE ids), so that any server on the database replays and follows them. A later version is a new
/// variant beside the old, read and rewritten as the new one, so a database written by an older
/// server keeps reading.
///
/// ```
/// use agentstate_server::record::{Record, RunRecord, RunStatus};
///
/// let run = RunRecord::new("r-1", "t-1", "agent", serde_json::json!({}), 5);
/// let json = serde_json::to_value(Record::Run(run.clone()))?;
/// assert_eq!(json["record"], "run/1");
/// assert_eq!(json["status"], "pending");
/// let read: Record = serde_json::from_value(json)?;
/// assert_eq!(read, Record::Run(run));
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "record")]
pub enum Record {
    /// A run (LangGraph's `Run`).
    #[serde(rename = "run/1")]
    Run(RunRecord),
    /// A thread's bookkeeping (LangGraph's `Thread`, its state aside: that is the store's
    /// thread of the same id, created by the first run).
    #[serde(rename = "thread/1")]
    Thread(ThreadRecord),
    /// An event a run streamed (an SSE event: `metadata`, `values`, `error`, ...).
    #[serde(rename = "event/1")]
    Event(EventRecord),
}

impl Record {
    /// The kind of its row in the records table: `"run"` or `"thread"`; `"event"` for an
    /// event, kept in its run's event log instead.
    pub fn kind(&self) -> &'static str {
        match self {
            Record::Run(_) => RUN,
            Record::Thread(_) => THREAD,
            Record::Event(_) => EVENT,
        }
    }
}

/// An event a run streamed (version 1), the `seq`th of its run's event log (its SSE `id`).
///
/// ```
/// use agentstate_server::record::{EventRecord, Record};
///
/// let event = EventRecord { run_id: "r-1".into(), seq: 0, event: "metadata".into(), data: serde_json::json!({"run_id": "r-1"}) };
/// let json = serde_json::to_value(Record::Event(event.clone()))?;
/// assert_eq!((&json["record"], &json["event"]), (&serde_json::json!("event/1"), &serde_json::json!("metadata")));
/// assert_eq!(serde_json::from_value::<Record>(json)?, Record::Event(event));
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EventRecord {
    /// Its run.
    pub run_id: String,
    /// Its number in the run's stream (the first, `metadata`, is 0).
    pub seq: u64,
    /// The SSE event's name.
    pub event: String,
    /// Its JSON.
    pub data: Value,
}

/// The row kind of runs.
pub(crate) const RUN: &str = "run";
/// The row kind of threads.
pub(crate) const THREAD: &str = "thread";
/// The kind of events (kept in event logs, not in the records table).
pub(crate) const EVENT: &str = "event";

/// Where a run stands (LangGraph's run statuses).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    /// Created, waiting for the thread.
    Pending,
    /// Running.
    Running,
    /// Finished, or suspended at an interrupt (the thread is then `interrupted`).
    Success,
    /// Failed.
    Error,
    /// Ran out of time.
    Timeout,
    /// Cancelled.
    Interrupted,
}

impl RunStatus {
    /// Whether the run is over.
    pub fn is_final(self) -> bool {
        !matches!(self, RunStatus::Pending | RunStatus::Running)
    }
}

/// Where a thread stands (LangGraph's thread statuses).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ThreadStatus {
    /// No run in progress; the last finished.
    Idle,
    /// A run is in progress.
    Busy,
    /// The last run suspended at an interrupt or was cancelled.
    Interrupted,
    /// The last run failed.
    Error,
}

/// A run (version 1).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    /// Its id.
    pub run_id: String,
    /// Its thread.
    pub thread_id: String,
    /// The graph it runs (the assistant's graph id).
    pub graph_id: String,
    /// Its status.
    pub status: RunStatus,
    /// The request's `metadata`.
    pub metadata: Value,
    /// What the request asked (`input`, `command`, `stream_mode`, `config`, ...).
    pub kwargs: Value,
    /// The attempt (1 for a run carried out once).
    pub attempt: u32,
    /// Why it failed, if it did: the error's category and its sentence.
    pub error: Option<RunFailure>,
    /// When it was created, in milliseconds since the Unix epoch.
    pub created_ms: i64,
    /// When it last changed.
    pub updated_ms: i64,
    /// It started running (absent in the JSON when false, and in records written before it:
    /// false).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub started: bool,
}

/// Why a run failed (the `__error__` of a `wait` or `join`), as the API shows it
/// ([`AssistantError::name`](crate::AssistantError::name) and
/// [`detail`](crate::AssistantError::detail): a failed node's error's type and text, as
/// `{"error": "ValueError", "message": "boom"}`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunFailure {
    /// The error's name (a failed node's error's type, else its category: `run_orphaned`, ...).
    pub error: String,
    /// What it says.
    pub message: String,
}

impl RunRecord {
    /// A pending run `run_id` of graph `graph_id` on thread `thread_id`, created at `now_ms`.
    pub fn new(run_id: &str, thread_id: &str, graph_id: &str, kwargs: Value, now_ms: i64) -> Self {
        RunRecord {
            run_id: run_id.to_owned(),
            thread_id: thread_id.to_owned(),
            graph_id: graph_id.to_owned(),
            status: RunStatus::Pending,
            metadata: json!({}),
            kwargs,
            attempt: 1,
            error: None,
            created_ms: now_ms,
            updated_ms: now_ms,
            started: false,
        }
    }
}

/// A thread's bookkeeping (version 1).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ThreadRecord {
    /// Its id (the store thread's).
    pub thread_id: String,
    /// Its metadata.
    pub metadata: Map<String, Value>,
    /// Its status.
    pub status: ThreadStatus,
    /// The graph whose state it holds, once a run made it (a thread holds one state type).
    pub graph_id: Option<String>,
    /// Why its last run failed, if it did (absent in the JSON when it did not, and in records
    /// written before it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<RunFailure>,
    /// Its branches: the timelines runs from earlier checkpoints (and state updates at them)
    /// left behind, in the order they were made (absent in the JSON when it has none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub branches: Vec<Branch>,
    /// When it was created, in milliseconds since the Unix epoch.
    pub created_ms: i64,
    /// When it last changed.
    pub updated_ms: i64,
}

impl ThreadRecord {
    /// A new idle thread `thread_id`.
    pub fn new(thread_id: &str, metadata: Map<String, Value>, now_ms: i64) -> Self {
        ThreadRecord {
            thread_id: thread_id.to_owned(),
            metadata,
            status: ThreadStatus::Idle,
            graph_id: None,
            error: None,
            branches: Vec::new(),
            created_ms: now_ms,
            updated_ms: now_ms,
        }
    }
}

/// A branch of a thread: a timeline a run from an earlier checkpoint (or a state update at
/// one) left behind, kept in a store thread of its own, as LangGraph keeps the abandoned
/// branch of a fork.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Branch {
    /// The store thread that holds it (every version of it, its shared ones too).
    pub store_id: String,
    /// The last version it shares with the timeline it forks from.
    pub fork: u64,
    /// The branch it forks from (its index in the thread's branches); `None`: the thread's
    /// head.
    pub parent: Option<usize>,
}

/// Milliseconds since the Unix epoch now.
pub(crate) fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// `ms` (since the Unix epoch) as an ISO 8601 UTC timestamp, `2026-11-28T07:16:28.123Z`.
pub(crate) fn iso8601(ms: i64) -> String {
    let (days, rem) = (ms.div_euclid(86_400_000), ms.rem_euclid(86_400_000));
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3_600_000,
        rem / 60_000 % 60,
        rem / 1000 % 60,
        rem % 1000
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_iso8601_utc() {
        assert_eq!(iso8601(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(iso8601(1_795_850_188_123), "2026-11-28T07:16:28.123Z");
        assert_eq!(iso8601(951_782_400_000), "2000-02-29T00:00:00.000Z");
    }

    #[test]
    fn a_thread_record_reads_back_with_its_tag() {
        let thread = ThreadRecord::new("t", Map::new(), 1);
        let json = serde_json::to_value(Record::Thread(thread.clone())).unwrap();
        assert_eq!(json["record"], "thread/1");
        assert_eq!(json["status"], "idle");
        assert_eq!(
            serde_json::from_value::<Record>(json).unwrap(),
            Record::Thread(thread)
        );
    }
}
