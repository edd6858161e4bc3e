//! Runs carried out in this process: each a tokio task that drives its assistant's run, keeps
//! its records, and buffers the frames its streams read, which it also writes to the run's
//! event log in the database (batched: what came while the last batch was written), so that
//! other servers on the database can stream them ([`stored_frames`]).

use crate::assistant::{Assistant, AssistantError, RunEvent, RunOptions, Start};
use crate::checkpoints::{
    checkpoint_of, head, questions, streamed_interrupt_json, with_interrupts, Checkpoints,
};
use crate::metadata::{config_metadata, node_metadata, task_id};
use crate::record::{now_ms, EventRecord, Record, RunFailure, RunRecord, RunStatus, ThreadStatus};
use crate::records::{Records, Write};
use agentstate_graph::Interrupt;
use agentstate_store::RunClaim;
use futures_util::{Stream, StreamExt};
use serde_json::{json, Map, Value};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use tokio::sync::watch;

/// A stream mode the server streams (`stream_mode` of a run request).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    Values,
    Updates,
    Custom,
    MessagesTuple,
    Tasks,
    Checkpoints,
    Debug,
    Events,
    Messages,
}

impl Mode {
    /// The modes of a request's `stream_mode` (a name or a list; `values` if absent).
    pub(crate) fn parse(value: Option<&Value>) -> Result<Vec<Mode>, String> {
        let names: Vec<&Value> = match value {
            None | Some(Value::Null) => return Ok(vec![Mode::Values]),
            Some(Value::Array(list)) => list.iter().collect(),
            Some(one) => vec![one],
        };
        names
            .into_iter()
            .map(|name| match name.as_str() {
                Some("values") => Ok(Mode::Values),
                Some("updates") => Ok(Mode::Updates),
                Some("custom") => Ok(Mode::Custom),
                Some("messages-tuple") => Ok(Mode::MessagesTuple),
                Some("tasks") => Ok(Mode::Tasks),
                Some("checkpoints") => Ok(Mode::Checkpoints),
                Some("debug") => Ok(Mode::Debug),
                Some("events") => Ok(Mode::Events),
                Some("messages") => Ok(Mode::Messages),
                Some(other @ "tools") => Err(format!(
                    "stream mode `{other}` is not served yet (this server streams `values`, `updates`, `custom`, `messages`, `messages-tuple`, `tasks`, `checkpoints`, `debug` and `events`)"
                )),
                _ => Err(format!(
                    "stream mode {name} is not one of `values`, `updates`, `custom`, `messages-tuple`, `messages`, `events`, `debug`, `tasks`, `checkpoints`, `tools`"
                )),
            })
            .collect()
    }
}

/// An SSE event of a run: its name and its JSON.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Frame {
    pub(crate) event: String,
    pub(crate) data: Value,
}

/// The `metadata` event that begins each attempt of a run's stream.
pub(crate) fn metadata_json(run_id: &str, attempt: u32) -> Value {
    json!({"run_id": run_id, "attempt": attempt})
}

/// How often a server follows a run that another server carries out (its event log and its
/// record).
const FOLLOW_EVERY: std::time::Duration = std::time::Duration::from_millis(50);

/// The most events read from an event log at once.
const EVENTS_PAGE: usize = 256;

/// How many of a run's last frames stay in memory once they are in its event log (for readers
/// a little behind; those further behind read the log): a run's memory does not grow with
/// the events it emits, whoever reads them.
const KEPT_FRAMES: usize = 512;

/// A run in progress in this process: the frames streamed so far, its result once it ended,
/// and its cancellation.
pub(crate) struct Live {
    pub(crate) run_id: String,
    pub(crate) thread_id: String,
    state: Mutex<LiveState>,
    changed: watch::Sender<u64>,
    cancel: watch::Sender<Stop>,
    /// How many of its frames are in its event log (held while a batch is written).
    stored: tokio::sync::Mutex<usize>,
    /// The number of its first frame in its event log (the events of its earlier attempts
    /// come before).
    base: usize,
    /// Its thread's version when it started (where a rollback takes the thread back to).
    started_at: std::sync::OnceLock<u64>,
    /// Whether its end is being written (by its task, or from outside it): once only.
    ending: std::sync::atomic::AtomicBool,
    /// Its hold on its thread's turn while it runs, kept here so that a run ended from
    /// outside its task lets the thread's next run start once its task is done.
    turn: Mutex<Option<tokio::sync::OwnedMutexGuard<()>>>,
    /// When it began (its thread's turn came): its deadline counts from then.
    begun: std::sync::OnceLock<tokio::time::Instant>,
    /// Whether it ended: what its watcher waits for (not `changed`, which each frame wakes).
    done: watch::Sender<bool>,
}

/// Why a run in progress is asked to stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stop {
    /// It is not.
    No,
    /// Cancelled: it ends `interrupted`.
    Cancel,
    /// Its worker stops: it goes back to the queue, for another worker.
    HandBack,
    /// Rolled back: stopped, what it committed removed, its record deleted (the
    /// `rollback` strategy and cancel action).
    Rollback,
    /// Its worker no longer holds its claim (it was paused past its thread's lease, and the
    /// run was put back in the queue for another): it stops, and writes nothing more.
    Lost,
    /// It passed its deadline: it ends `timeout`.
    Timeout,
}

/// How long a run asked to stop (cancelled, or past its deadline) has to end by itself before
/// it is ended from outside its task (a node that blocks its thread, or never returns).
const STOP_GRACE: std::time::Duration = std::time::Duration::from_secs(2);

#[derive(Default)]
struct LiveState {
    /// Its frames from the `dropped`th on: those before are in its event log only.
    frames: std::collections::VecDeque<Frame>,
    /// How many of its first frames were let go (written to its event log before).
    dropped: usize,
    /// What `wait` and `join` answer, once the run ended.
    result: Option<Value>,
}

impl Live {
    pub(crate) fn new(run_id: &str, thread_id: &str) -> Arc<Self> {
        Live::attempt(run_id, thread_id, 1, 0)
    }

    /// Attempt `attempt` of a run whose event log holds `base` events already.
    pub(crate) fn attempt(run_id: &str, thread_id: &str, attempt: u32, base: usize) -> Arc<Self> {
        let live = Live::announced(run_id, thread_id, base);
        live.push("metadata", metadata_json(run_id, attempt));
        live
    }

    /// A run whose event log holds `base` events already, the last its `metadata` (the
    /// server that queued it announced it): its frames come after.
    pub(crate) fn announced(run_id: &str, thread_id: &str, base: usize) -> Arc<Self> {
        Arc::new(Live {
            run_id: run_id.to_owned(),
            thread_id: thread_id.to_owned(),
            state: Mutex::default(),
            changed: watch::Sender::new(0),
            cancel: watch::Sender::new(Stop::No),
            stored: tokio::sync::Mutex::new(0),
            base,
            started_at: std::sync::OnceLock::new(),
            ending: std::sync::atomic::AtomicBool::new(false),
            turn: Mutex::new(None),
            begun: std::sync::OnceLock::new(),
            done: watch::Sender::new(false),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, LiveState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Streams event `event` with its JSON `data`.
    pub(crate) fn push(&self, event: &str, data: Value) {
        self.push_frame(Frame {
            event: event.to_owned(),
            data,
        });
    }

    /// Streams `frame`.
    pub(crate) fn push_frame(&self, frame: Frame) {
        self.lock().frames.push_back(frame);
        self.changed.send_modify(|n| *n += 1);
    }

    /// The last frame it streamed, if it is still in memory.
    fn last_frame_is(&self, event: &str) -> bool {
        self.lock().frames.back().is_some_and(|f| f.event == event)
    }

    /// Writes the frames not yet in the run's event log there, in one batch, with `then`
    /// (its records) after them, in one transaction fenced by `claim` (a queued run's
    /// worker's); `end`: and takes the run out of the queue. False, and nothing written, if
    /// the worker no longer holds the claim: the run is then stopped ([`Stop::Lost`]).
    async fn store(
        &self,
        records: &dyn Records,
        claim: Option<&RunClaim>,
        then: Vec<Write>,
        end: bool,
    ) -> Result<bool, agentstate_store::StoreError> {
        let mut stored = self.stored.lock().await;
        let mut batch: Vec<Write> = {
            let state = self.lock();
            let unstored = state.frames.range(*stored - state.dropped..);
            unstored.cloned().collect::<Vec<_>>()
        }
        .into_iter()
        .enumerate()
        .map(|(i, f)| {
            Write::Put(Record::Event(EventRecord {
                run_id: self.run_id.clone(),
                seq: (self.base + *stored + i) as u64,
                event: f.event,
                data: f.data,
            }))
        })
        .collect();
        let n = batch.len();
        if n == 0 && then.is_empty() && !end {
            return Ok(true);
        }
        batch.extend(then);
        let written = match end {
            true => records.finish_queued(&self.run_id, batch, claim).await?,
            false => records.write(batch, claim).await?,
        };
        if written {
            *stored += n;
            // What is in the event log need not stay in memory but for the last few (a reader
            // a little behind): a reader further behind reads the log.
            let mut state = self.lock();
            while state.dropped + KEPT_FRAMES < *stored {
                state.frames.pop_front();
                state.dropped += 1;
            }
        } else {
            self.stop(Stop::Lost);
        }
        Ok(written)
    }

    /// Writes its frames to the event log as they come, a batch at a time, fenced by `claim`,
    /// until it ended (the run's end writes the last ones) or its claim was lost.
    fn store_as_they_come(self: &Arc<Self>, records: Arc<dyn Records>, claim: Option<RunClaim>) {
        let live = Arc::clone(self);
        let mut rx = self.changed.subscribe();
        tokio::spawn(async move {
            loop {
                if live.lock().result.is_some() {
                    return;
                }
                // A failed write is retried with the next batch (and at the run's end).
                if let Ok(false) = live
                    .store(&*records, claim.as_ref(), Vec::new(), false)
                    .await
                {
                    return;
                }
                if rx.changed().await.is_err() {
                    return;
                }
            }
        });
    }

    /// Whether the run ended.
    pub(crate) fn ended(&self) -> bool {
        self.lock().result.is_some()
    }

    fn finish(&self, result: Value) {
        self.lock().result = Some(result);
        self.changed.send_modify(|n| *n += 1);
        self.done.send_replace(true);
    }

    /// Asks the run to stop (it ends `interrupted`).
    pub(crate) fn cancel(&self) {
        self.stop(Stop::Cancel);
    }

    /// Asks the run to stop for `why` (the first reason given stands).
    pub(crate) fn stop(&self, why: Stop) {
        self.cancel.send_if_modified(|now| {
            let first = *now == Stop::No;
            if first {
                *now = why;
            }
            first
        });
    }

    fn stopped(&self) -> Stop {
        *self.cancel.borrow()
    }

    /// Its frames from the one numbered `from` (the first is 0: `metadata`), each with its
    /// number, then as they come, until it ended: from memory, or, for those it let go (in
    /// its event log already), from `records`.
    pub(crate) fn frames(
        self: Arc<Self>,
        records: Arc<dyn Records>,
        from: usize,
    ) -> impl Stream<Item = (usize, Frame)> + Send + 'static {
        let base = self.base;
        let rx = self.changed.subscribe();
        let from = from.saturating_sub(base);
        let state = (self, records, from, rx, std::collections::VecDeque::new());
        futures_util::stream::unfold(
            state,
            move |(live, records, i, mut rx, mut read)| async move {
                loop {
                    if let Some(frame) = read.pop_front() {
                        let next = (live, records, i + 1, rx, read);
                        return Some(((base + i, frame), next));
                    }
                    rx.borrow_and_update();
                    let dropped = {
                        let state = live.lock();
                        match i.checked_sub(state.dropped) {
                            Some(at) => {
                                if let Some(frame) = state.frames.get(at) {
                                    let frame = frame.clone();
                                    drop(state);
                                    return Some((
                                        (base + i, frame),
                                        (live, records, i + 1, rx, read),
                                    ));
                                }
                                if state.result.is_some() {
                                    return None;
                                }
                                false
                            }
                            None => true,
                        }
                    };
                    if dropped {
                        // Let go: a page from the event log, where it is.
                        let page = records
                            .events(&live.run_id, (base + i) as u64, EVENTS_PAGE)
                            .await
                            .unwrap_or_default();
                        for (seq, event) in ((base + i) as u64..).zip(page) {
                            if event.seq != seq {
                                break;
                            }
                            read.push_back(Frame {
                                event: event.event,
                                data: event.data,
                            });
                        }
                        if read.is_empty() {
                            return None; // the log lost what memory let go: nothing to stream
                        }
                        continue;
                    }
                    if rx.changed().await.is_err() {
                        return None;
                    }
                }
            },
        )
    }

    /// The number of its first frame in its event log.
    pub(crate) fn base(&self) -> usize {
        self.base
    }

    /// Waits for the run's end and gives what `wait` and `join` answer.
    pub(crate) async fn result(&self) -> Value {
        let mut rx = self.changed.subscribe();
        loop {
            rx.borrow_and_update();
            if let Some(result) = self.lock().result.clone() {
                return result;
            }
            if rx.changed().await.is_err() {
                return Value::Null;
            }
        }
    }

    async fn cancelled(&self) {
        let mut rx = self.cancel.subscribe();
        // The sender lives as long as `self`: `wait_for` ends only when cancelled.
        let _ = rx.wait_for(|c| *c != Stop::No).await;
    }
}

/// The runs in progress in this process, and the per-thread locks that order them.
#[derive(Default)]
pub(crate) struct Runs {
    live: Mutex<Registry>,
    locks: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
}

/// The runs in progress here, and the stops asked of runs before they were (a worker's claimed
/// run is cancelled before its task registered it): both under one lock, so a stop is never
/// asked between a run's registration and its check for one.
#[derive(Default)]
struct Registry {
    live: HashMap<String, Arc<Live>>,
    early: HashMap<String, Stop>,
}

/// The most stops kept for runs not (yet) in progress here: a cancel notice reaches every
/// worker process, and most never carry the run out.
const EARLY_STOPS: usize = 1024;

impl Runs {
    fn registry(&self) -> std::sync::MutexGuard<'_, Registry> {
        self.live.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Run `run_id`, if it is in progress here.
    pub(crate) fn get(&self, run_id: &str) -> Option<Arc<Live>> {
        self.registry().live.get(run_id).cloned()
    }

    /// Every run in progress here.
    pub(crate) fn all(&self) -> Vec<Arc<Live>> {
        self.registry().live.values().cloned().collect()
    }

    /// The id of a run in progress on `thread`, if there is one.
    pub(crate) fn on_thread(&self, thread: &str) -> Option<String> {
        let registry = self.registry();
        registry
            .live
            .values()
            .find(|l| l.thread_id == thread)
            .map(|l| l.run_id.clone())
    }

    /// Asks run `run_id` to stop for `why`: at once if it is in progress here, else when it is
    /// registered here (a run a worker here claimed and is about to start).
    pub(crate) fn stop(&self, run_id: &str, why: Stop) {
        let mut registry = self.registry();
        if let Some(live) = registry.live.get(run_id) {
            live.stop(why);
            return;
        }
        if registry.early.len() >= EARLY_STOPS {
            registry.early.clear();
        }
        registry.early.insert(run_id.to_owned(), why);
    }

    /// Registers `live` unless `refuse` says no to the runs in progress on its thread (checked
    /// and registered at once, so two requests cannot both find the thread free).
    pub(crate) fn register<E>(
        &self,
        live: &Arc<Live>,
        refuse: impl FnOnce(&[Arc<Live>]) -> Result<(), E>,
    ) -> Result<(), E> {
        let mut registry = self.registry();
        let on_thread: Vec<Arc<Live>> = registry
            .live
            .values()
            .filter(|l| l.thread_id == live.thread_id)
            .cloned()
            .collect();
        refuse(&on_thread)?;
        if let Some(why) = registry.early.remove(&live.run_id) {
            live.stop(why);
        }
        registry.live.insert(live.run_id.clone(), Arc::clone(live));
        Ok(())
    }

    /// Forgets `live`, registered but never started (its records could not be written), and
    /// ends its streams.
    pub(crate) fn abandon(&self, live: &Live) {
        self.remove(&live.run_id);
        live.finish(Value::Null);
    }

    fn remove(&self, run_id: &str) {
        self.registry().live.remove(run_id);
    }

    fn lock_of(&self, thread: &str) -> Arc<tokio::sync::Mutex<()>> {
        let mut locks = self.locks.lock().unwrap_or_else(PoisonError::into_inner);
        // Locks of threads nobody holds or waits for are dropped as new ones are made.
        locks.retain(|_, l| Arc::strong_count(l) > 1);
        Arc::clone(locks.entry(thread.to_owned()).or_default())
    }
}

/// A run's events as the frames of another protocol than the stream modes' (AG-UI's): what
/// the front that speaks it gives the run's [`Job`].
pub(crate) trait Translate: Send + Sync {
    /// The frames of `event`.
    fn event(&self, event: &RunEvent) -> Vec<Frame>;
    /// The frames that tell the client why the run ended other than by its last event
    /// (`error`: it failed, or was cancelled).
    fn failed(&self, error: &AssistantError) -> Vec<Frame>;
}

/// What the task of a run needs.
#[derive(Clone)]
pub(crate) struct Job {
    pub(crate) records: Arc<dyn Records>,
    pub(crate) runs: Arc<Runs>,
    pub(crate) assistant: Arc<dyn Assistant>,
    pub(crate) live: Arc<Live>,
    pub(crate) run: RunRecord,
    pub(crate) start: Start,
    /// Its breakpoints and command.
    pub(crate) options: RunOptions,
    pub(crate) modes: Vec<Mode>,
    /// A stateless run: its thread and records are deleted when it ends.
    pub(crate) stateless: bool,
    /// A run of another protocol (AG-UI): its frames are what `translate` makes of its
    /// events, not the stream modes'.
    pub(crate) translate: Option<Arc<dyn Translate>>,
    /// The claim of the worker that took it from the run queue, if one did: what fences its
    /// writes.
    pub(crate) claim: Option<RunClaim>,
    /// The server's URL, if it knows it (its config metadata's `langgraph_api_url`).
    pub(crate) api_url: Option<Arc<str>>,
    /// How long it may run once started: past it, it ends `timeout`.
    pub(crate) timeout: std::time::Duration,
}

/// What a run's stream has seen so far, for the `tasks`, `checkpoints`, `debug` and `events`
/// modes.
#[derive(Default)]
struct Seen {
    /// The step of the newest checkpoint pushed.
    checkpoint: Option<i64>,
    /// The thread's version after the newest commit the run's events reported.
    committed: Option<u64>,
    /// The state after the last step (a task's input).
    values: Option<Value>,
    /// The step each node's task runs in.
    steps: HashMap<String, u64>,
    /// The messages each node's model is streaming.
    models: HashMap<String, Vec<String>>,
    /// Whether the graph's `on_chain_start` was pushed.
    started: bool,
    /// The text of each message streamed so far, by id (`messages` mode).
    texts: HashMap<String, String>,
    /// The ids of the messages streamed as pieces (`messages-tuple` mode: not sent again
    /// whole when their node's update has them).
    streamed: std::collections::HashSet<String>,
    /// The run's config metadata (what its tasks' and streamed messages' metadata start
    /// from).
    config: Map<String, Value>,
}

/// How long a rollback waits for the thread's lease that the stopped run left.
const ROLLBACK_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// How a run's task ended.
enum End {
    Finished(Value),
    Suspended(Value, Vec<Interrupt>),
    Failed(AssistantError),
    /// Cancelled before it started (`false`) or while it ran (`true`).
    Cancelled(bool),
}

impl Job {
    /// Carries the run out in a task of its own, watched: a task that panics (a node that
    /// panicked) ends the run `error`, saying so, rather than leaving it running.
    pub(crate) fn spawn(self) {
        if !self.stateless {
            self.live
                .store_as_they_come(Arc::clone(&self.records), self.claim.clone());
        }
        let watcher = self.clone();
        // Spawned here, not from the run's task: a task spawned by one that then blocks its
        // thread could wait for that thread.
        tokio::spawn(self.clone().watch());
        let task = tokio::spawn(self.execute());
        tokio::spawn(async move {
            let Err(error) = task.await else { return };
            let panic = error.try_into_panic().ok();
            let why = panic
                .as_ref()
                .and_then(|p| {
                    p.downcast_ref::<&str>()
                        .map(|s| s.to_string())
                        .or_else(|| p.downcast_ref::<String>().cloned())
                })
                .unwrap_or_else(|| "its task was aborted".to_owned());
            let message = format!(
                "run `{}` on thread `{}` panicked: {why}",
                watcher.run.run_id, watcher.run.thread_id
            );
            watcher
                .finish(End::Failed(AssistantError::new("run_panicked", message)))
                .await;
        });
    }

    /// How long the run waits before it starts: its request's `after_seconds`, counted from
    /// its creation.
    fn delay(&self) -> std::time::Duration {
        let seconds = self.run.kwargs.get("after_seconds").and_then(Value::as_f64);
        let Some(seconds) = seconds.filter(|s| s.is_finite() && *s > 0.0) else {
            return std::time::Duration::ZERO;
        };
        let start = self
            .run
            .created_ms
            .saturating_add((seconds * 1000.0) as i64);
        let wait = start.saturating_sub(now_ms()).max(0);
        std::time::Duration::from_millis(wait as u64)
    }

    /// Carries the run out, then updates its records and ends its streams.
    async fn execute(self) {
        let delay = self.delay();
        if !delay.is_zero() {
            // Pending until its time (`after_seconds`); a cancel ends it at once.
            tokio::select! {
                () = tokio::time::sleep(delay) => {}
                () = self.live.cancelled() => {
                    self.finish(End::Cancelled(false)).await;
                    return;
                }
            }
        }
        let lock = self.runs.lock_of(&self.run.thread_id);
        let end = tokio::select! {
            guard = lock.lock_owned() => {
                *self.live.turn.lock().unwrap_or_else(PoisonError::into_inner) = Some(guard);
                let _ = self.live.begun.set(tokio::time::Instant::now());
                let mut end = self.drive().await;
                if self.live.ending.swap(true, std::sync::atomic::Ordering::AcqRel) {
                    // Ended from outside while it ran: the thread's next run may start now.
                    self.live.turn.lock().unwrap_or_else(PoisonError::into_inner).take();
                    return;
                }
                if self.live.stopped() == Stop::Rollback {
                    // Undone before the thread's next run may start; a run that could not be
                    // undone ends `error`, saying why.
                    if let Err(error) = self.roll_back().await {
                        end = End::Failed(error);
                    }
                }
                self.live.turn.lock().unwrap_or_else(PoisonError::into_inner).take();
                end
            }
            () = self.live.cancelled() => {
                if self.live.ending.swap(true, std::sync::atomic::Ordering::AcqRel) {
                    return;
                }
                End::Cancelled(false)
            }
        };
        self.write_end(end).await;
    }

    /// Watches the run from outside its task once it started: past its deadline it is asked
    /// to stop ([`Stop::Timeout`]); asked to stop (that, or a cancel), it has [`STOP_GRACE`]
    /// to end by itself, after which it is ended from here, as it would have ended itself,
    /// whatever its node does (one that blocks its thread, or never returns): its records
    /// and its thread's status written, its thread's lease revoked (its heartbeat stops
    /// renewing it; whatever the node commits later is refused, and another process may run
    /// the thread), its streams ended. The thread's next run here starts once the node
    /// returns (a thread's runs in a process are one at a time).
    async fn watch(self) {
        let live = Arc::clone(&self.live);
        // Nothing the run's task does while it runs wakes this one (its frames, its start): a
        // task woken by one that then blocks its thread waits for that thread (tokio's LIFO
        // slot). Its deadline is read from the clock, its end from `done`.
        let mut done = live.done.subscribe();
        let mut ended = live.done.subscribe();
        let deadline = async {
            loop {
                let from = live.begun.get().copied();
                let until = from
                    .unwrap_or_else(tokio::time::Instant::now)
                    .checked_add(self.timeout);
                let Some(until) = until else {
                    return std::future::pending().await; // past any clock: none
                };
                tokio::time::sleep_until(until).await;
                if from.is_some() {
                    return;
                }
            }
        };
        tokio::select! {
            () = async { let _ = done.wait_for(|d| *d).await; } => return,
            () = deadline => live.stop(Stop::Timeout),
            () = live.cancelled() => {}
        }
        tokio::select! {
            () = async { let _ = ended.wait_for(|d| *d).await; } => {}
            () = tokio::time::sleep(STOP_GRACE) => self.end_from_outside().await,
        }
    }

    /// Ends the run from outside its task (see [`Job::watch`]).
    async fn end_from_outside(self) {
        if self
            .live
            .ending
            .swap(true, std::sync::atomic::Ordering::AcqRel)
        {
            return;
        }
        // Its future still runs: its lease is taken from it, so that it commits nothing more
        // (a rollback's rewind first).
        let _ = self.records.revoke_lease(&self.run.thread_id).await;
        let mut end = End::Cancelled(true);
        if self.live.stopped() == Stop::Rollback {
            if let Err(error) = self.roll_back().await {
                end = End::Failed(error);
            }
        }
        self.write_end(end).await;
    }

    /// Takes the thread back to where it stood when the run started (the run's future was
    /// dropped: nothing more of it is committed), and its record back to that state's status.
    async fn roll_back(&self) -> Result<(), AssistantError> {
        let thread = &self.run.thread_id;
        let Some(&version) = self.live.started_at.get() else {
            return Ok(()); // it never started
        };
        // The run's future was dropped, but what it started may hold the thread's lease a
        // moment longer (its lease taken, or renewed, as it was dropped): the rewind, which
        // takes back this worker's own lease, is tried again until it is free.
        let mut rewound = self.assistant.rewind(thread, version).await;
        let deadline = tokio::time::Instant::now() + ROLLBACK_WAIT;
        while matches!(&rewound, Err(e) if e.category == "thread_leased")
            && tokio::time::Instant::now() < deadline
        {
            tokio::time::sleep(std::time::Duration::from_millis(25)).await;
            rewound = self.assistant.rewind(thread, version).await;
        }
        if let Err(error) = rewound {
            return Err(AssistantError::new(
                error.category,
                format!(
                    "run `{}` on thread `{thread}` was stopped but could not be rolled back: {}",
                    self.run.run_id, error.message
                ),
            ));
        }
        let status = match self.assistant.snapshot(thread, None).await {
            Ok(s) if !s.interrupts.is_empty() || !s.next.is_empty() => ThreadStatus::Interrupted,
            _ => ThreadStatus::Idle,
        };
        let failure = stopped_by("UserRollback", "rollback");
        self.set_thread_failed(status, Some(failure)).await;
        Ok(())
    }

    /// `error` with its sentence naming the run and its thread.
    fn named(&self, mut error: AssistantError) -> AssistantError {
        let (run, thread) = (&self.run.run_id, &self.run.thread_id);
        if error.category == "run_panicked" && !error.message.contains(run.as_str()) {
            // As a run whose task panicked says it (`Job::spawn`).
            let message = format!(
                "run `{run}` on thread `{thread}` panicked: {}",
                error.message
            );
            return AssistantError::new("run_panicked", message);
        }
        if !error.message.contains(run.as_str()) {
            error.message = format!("run `{run}` on thread `{thread}` failed: {}", error.message);
        }
        error
    }

    /// Sets the thread's status, and the error of its last run (`None`: it did not fail).
    async fn set_thread_failed(&self, status: ThreadStatus, error: Option<RunFailure>) {
        let thread = self.thread_as(status, error);
        let _ = self.records.write(vec![thread], self.claim.as_ref()).await;
    }

    /// The change of the thread's record to `status` and the error of its last run (`None`:
    /// it did not fail), to be written (its other members, its metadata, kept as they are).
    fn thread_as(&self, status: ThreadStatus, error: Option<RunFailure>) -> Write {
        let mut fields = Map::new();
        fields.insert("status".to_owned(), json!(status));
        fields.insert("error".to_owned(), json!(error));
        fields.insert("updated_ms".to_owned(), json!(now_ms()));
        Write::Thread(self.run.thread_id.clone(), fields)
    }

    /// Marks the run `running` and its thread `busy`: once its first event came, its input
    /// committed (a run seen running has its input in its thread, as on LangGraph's server).
    /// Both at once, fenced by its worker's claim: a run whose claim was lost stops.
    async fn mark_running(&self) -> Result<(), AssistantError> {
        let mut run = self.run.clone();
        run.status = RunStatus::Running;
        run.started = true;
        run.updated_ms = now_ms();
        let records = vec![
            Record::Run(run).into(),
            self.thread_as(ThreadStatus::Busy, None),
        ];
        if !self.records.write(records, self.claim.as_ref()).await? {
            self.live.stop(Stop::Lost);
        }
        Ok(())
    }

    async fn drive(&self) -> End {
        let thread = &self.run.thread_id;
        match self.assistant.ensure_thread(thread).await {
            Ok(version) => {
                let _ = self.live.started_at.set(version);
            }
            Err(e) => return End::Failed(self.named(e)),
        }
        let mut options = self.options.clone();
        if let Some(at) = checkpoint_of(&self.run.kwargs) {
            // From an earlier checkpoint: the thread goes on from there, what came after kept
            // as a branch (a branch's checkpoint: that branch becomes the head).
            let forked = match self.records.thread(thread).await {
                Ok(Some(mut record)) => {
                    crate::branches::fork_at(&*self.records, &*self.assistant, &mut record, at)
                        .await
                }
                Ok(None) => Err(AssistantError::new(
                    "thread_not_found",
                    format!("thread `{thread}` was deleted"),
                )),
                Err(e) => Err(e.into()),
            };
            match forked {
                Ok(version) => options.checkpoint = Some(version),
                Err(e) => return End::Failed(self.named(e)),
            }
        }
        let started = self
            .assistant
            .run(thread, &self.run.run_id, self.start.clone(), options);
        let mut events = tokio::select! {
            started = started => match started {
                Ok(events) => events,
                Err(e) => return End::Failed(self.named(e)),
            },
            // Cancelled while it started: its thread, marked busy, is left as a cancelled
            // run leaves it.
            () = self.live.cancelled() => return End::Cancelled(true),
        };
        let mut last_values = None;
        let mut seen = Seen {
            config: config_metadata(&self.run, self.api_url.as_deref()),
            ..Seen::default()
        };
        let mut running = false;
        loop {
            let event = tokio::select! {
                biased;
                () = self.live.cancelled() => return End::Cancelled(true),
                event = events.next() => event,
            };
            if !running {
                running = true;
                if let Err(e) = self.mark_running().await {
                    return End::Failed(e);
                }
            }
            let Some(event) = event else {
                return End::Failed(AssistantError::new(
                    "run_ended_early",
                    format!("run `{}` on thread `{thread}` ended without finishing, suspending or failing", self.run.run_id),
                ));
            };
            let event = match event {
                RunEvent::Failed(error) => RunEvent::Failed(self.named(error)),
                event => event,
            };
            if self.wants_checkpoints() {
                // The checkpoints committed since the last seen: the run's input before its
                // first task, each step's after it, any left at its end.
                // The run may have gone further than its events say: only what they reported
                // committed (the run's input before its first commit; all at its end).
                let upto = match &event {
                    RunEvent::Committed { version, .. } => {
                        seen.committed = Some(*version);
                        Some(Some(*version))
                    }
                    RunEvent::TaskStarted { .. } => Some(seen.committed),
                    RunEvent::Finished { .. } | RunEvent::Suspended { .. } => Some(Some(u64::MAX)),
                    _ => None,
                };
                if let Some(upto) = upto {
                    self.emit_checkpoints(&mut seen, upto).await;
                }
            }
            if let RunEvent::TaskStarted { node, step } = &event {
                seen.steps.insert(node.clone(), *step);
            }
            self.emit_events(&event, &mut seen);
            self.emit(&event, &mut last_values, &mut seen);
            match event {
                RunEvent::Finished { values } => return End::Finished(values),
                RunEvent::Suspended { values, interrupts } => {
                    return End::Suspended(values, interrupts)
                }
                RunEvent::Failed(error) => return End::Failed(error),
                _ => {}
            }
        }
    }

    fn wants_checkpoints(&self) -> bool {
        self.translate.is_none()
            && (self.modes.contains(&Mode::Checkpoints) || self.modes.contains(&Mode::Debug))
    }

    /// Pushes the thread's checkpoints of this run not pushed yet (`checkpoints` and `debug`),
    /// those of entries up to version `upto` (`None`: its input's only).
    async fn emit_checkpoints(&self, seen: &mut Seen, upto: Option<u64>) {
        let thread = &self.run.thread_id;
        let Ok(Some(record)) = self.records.thread(thread).await else {
            return;
        };
        let Ok(listed) = head(&*self.assistant, &record).await else {
            return;
        };
        let mut checkpoints = Checkpoints::new(
            &*self.assistant,
            &*self.records,
            &record,
            self.api_url.as_deref(),
        );
        let first = listed
            .iter()
            .find(|l| l.point.run_id.as_deref() == Some(self.run.run_id.as_str()))
            .map(|l| l.point.id.entry);
        let upto = upto.or(first).unwrap_or(0);
        for entry in &listed {
            let point = &entry.point;
            let mine = point.run_id.as_deref() == Some(self.run.run_id.as_str());
            let reported = point.id.entry <= upto;
            if !mine || !reported || seen.checkpoint.is_some_and(|s| s >= point.step) {
                continue;
            }
            let Ok(payload) = checkpoints.event(entry, &self.run).await else {
                return;
            };
            if self.modes.contains(&Mode::Checkpoints) {
                self.live.push("checkpoints", payload.clone());
            }
            if self.modes.contains(&Mode::Debug) {
                // The debug mode's checkpoint also names itself and its parent.
                let mut payload = payload;
                let named = |config: &Value| match &config["configurable"] {
                    Value::Object(c) => json!({
                        "checkpoint_id": c["checkpoint_id"],
                        "checkpoint_ns": "",
                        "thread_id": c["thread_id"],
                    }),
                    _ => Value::Null,
                };
                payload["checkpoint"] = named(&payload["config"]);
                payload["parent_checkpoint"] = named(&payload["parent_config"]);
                self.live.push(
                    "debug",
                    json!({
                        "type": "checkpoint",
                        "timestamp": crate::record::iso8601(now_ms()),
                        "step": point.step,
                        "payload": payload,
                    }),
                );
            }
            seen.checkpoint = Some(point.step);
        }
    }

    /// Pushes the frames of `event` in the `tasks`, `debug` and `events` modes.
    fn emit_events(&self, event: &RunEvent, seen: &mut Seen) {
        if self.translate.is_some() {
            return;
        }
        if self.modes.contains(&Mode::Messages) {
            self.emit_messages(event, seen);
        }
        let (tasks, debug, events) = (
            self.modes.contains(&Mode::Tasks),
            self.modes.contains(&Mode::Debug),
            self.modes.contains(&Mode::Events),
        );
        if !(tasks || debug || events) {
            return;
        }
        let live = &self.live;
        let run_id = &self.run.run_id;
        let wire = |values: &Value| self.assistant.wire_values(values.clone());
        let task = |kind: &str, step: u64, payload: Value| {
            if tasks {
                live.push("tasks", payload.clone());
            }
            if debug {
                live.push(
                    "debug",
                    json!({
                        "type": kind,
                        "timestamp": crate::record::iso8601(now_ms()),
                        "step": step,
                        "payload": payload,
                    }),
                );
            }
        };
        let chain = |event: &str, name: &str, id: &str, data: Value, metadata: Value| {
            if events {
                let parents = if id == run_id.as_str() {
                    json!([])
                } else {
                    json!([run_id])
                };
                live.push(
                    "events",
                    json!({
                        "event": event,
                        "name": name,
                        "run_id": id,
                        "tags": [],
                        "metadata": metadata,
                        "data": data,
                        "parent_ids": parents,
                    }),
                );
            }
        };
        let thread = self.run.thread_id.as_str();
        let graph_meta = json!({"thread_id": thread, "run_id": run_id});
        if !seen.started {
            seen.started = true;
            chain(
                "on_chain_start",
                "LangGraph",
                run_id,
                json!({"input": self.input_json()}),
                graph_meta.clone(),
            );
        }
        let node_meta = |node: &str, step: u64| node_metadata(&seen.config, thread, node, step);
        match event {
            RunEvent::TaskStarted { node, step } => {
                let id = task_id(node, *step);
                let input = seen.values.clone().unwrap_or(Value::Null);
                task(
                    "task",
                    *step,
                    json!({"id": id, "name": node, "input": input, "triggers": [format!("branch:to:{node}")], "metadata": seen.config}),
                );
                chain(
                    "on_chain_start",
                    node,
                    &id,
                    json!({"input": input}),
                    node_meta(node, *step),
                );
                seen.steps.insert(node.clone(), *step);
            }
            RunEvent::Update { node, update } => {
                let step = seen.steps.get(node).copied().unwrap_or_default();
                let id = task_id(node, step);
                let output = wire(update);
                task(
                    "task_result",
                    step,
                    json!({"id": id, "name": node, "error": null, "result": output, "interrupts": []}),
                );
                for message in seen.models.remove(node).unwrap_or_default() {
                    chain(
                        "on_chat_model_end",
                        "model",
                        &message,
                        json!({"output": {"type": "AIMessageChunk", "id": message}}),
                        node_meta(node, step),
                    );
                }
                chain(
                    "on_chain_end",
                    node,
                    &id,
                    json!({"output": output}),
                    node_meta(node, step),
                );
                chain(
                    "on_chain_stream",
                    "LangGraph",
                    run_id,
                    json!({"chunk": {node.as_str(): output}}),
                    graph_meta.clone(),
                );
            }
            RunEvent::MessageDelta {
                node,
                step,
                message_id,
                delta,
            } => {
                let open = seen.models.entry(node.clone()).or_default();
                if !open.contains(message_id) {
                    open.push(message_id.clone());
                    chain(
                        "on_chat_model_start",
                        "model",
                        message_id,
                        json!({"input": {}}),
                        node_meta(node, *step),
                    );
                }
                let chunk = json!({"type": "AIMessageChunk", "id": message_id, "content": delta});
                chain(
                    "on_chat_model_stream",
                    "model",
                    message_id,
                    json!({"chunk": chunk}),
                    node_meta(node, *step),
                );
            }
            RunEvent::Values(values) | RunEvent::Start { values } => {
                seen.values = Some(wire(values))
            }
            RunEvent::Finished { values } | RunEvent::Suspended { values, .. } => {
                chain(
                    "on_chain_end",
                    "LangGraph",
                    run_id,
                    json!({"output": wire(values)}),
                    graph_meta,
                );
            }
            _ => {}
        }
    }

    /// Pushes the frames of `event` in the `messages` mode: a message's `messages/metadata`
    /// when it first shows, each piece of a model's text as `messages/partial` (the message so
    /// far), and each message a node's update adds as `messages/complete`.
    fn emit_messages(&self, event: &RunEvent, seen: &mut Seen) {
        let live = &self.live;
        let thread = self.run.thread_id.as_str();
        let metadata = |node: &str, step: u64| json!({"metadata": node_metadata(&seen.config, thread, node, step)});
        match event {
            RunEvent::TaskStarted { node, step } => {
                seen.steps.insert(node.clone(), *step);
            }
            RunEvent::MessageDelta {
                node,
                step,
                message_id,
                delta,
            } => {
                if !seen.texts.contains_key(message_id) {
                    live.push(
                        "messages/metadata",
                        json!({ message_id.as_str(): metadata(node, *step) }),
                    );
                }
                let text = seen.texts.entry(message_id.clone()).or_default();
                text.push_str(delta);
                let message = json!({
                    "type": "ai",
                    "id": message_id,
                    "content": text,
                    "tool_calls": [],
                    "invalid_tool_calls": [],
                    "additional_kwargs": {},
                    "response_metadata": {},
                });
                live.push("messages/partial", json!([message]));
            }
            RunEvent::Update { node, update } => {
                let Some(field) = self.assistant.messages_field() else {
                    return;
                };
                let update = self.assistant.wire_values(update.clone());
                let Some(Value::Array(messages)) = update.get(&field) else {
                    return;
                };
                let step = seen.steps.get(node).copied().unwrap_or_default();
                for message in messages {
                    let id = message["id"].as_str().unwrap_or_default().to_owned();
                    if let std::collections::hash_map::Entry::Vacant(new) = seen.texts.entry(id) {
                        live.push(
                            "messages/metadata",
                            json!({ new.key().as_str(): metadata(node, step) }),
                        );
                        new.insert(String::new());
                    }
                    live.push("messages/complete", json!([message]));
                }
            }
            _ => {}
        }
    }

    /// The run's input as the `events` mode's first event shows it.
    fn input_json(&self) -> Value {
        match &self.start {
            Start::Input(Some(input)) => input.clone(),
            Start::Resume(resume) => json!({"resume": resume}),
            _ => Value::Null,
        }
    }

    /// The messages of node `node`'s update `update` (its messages field's, as LangChain's
    /// dicts).
    fn messages_of(&self, update: &Value) -> Vec<Value> {
        let Some(field) = self.assistant.messages_field() else {
            return Vec::new();
        };
        let Value::Object(mut update) = self.assistant.wire_values(update.clone()) else {
            return Vec::new();
        };
        match update.remove(&field) {
            Some(Value::Array(messages)) => messages,
            _ => Vec::new(),
        }
    }

    /// Pushes the frames of `event` in the run's stream modes.
    fn emit(&self, event: &RunEvent, last_values: &mut Option<Value>, seen: &mut Seen) {
        let live = &self.live;
        if let Some(translate) = &self.translate {
            for frame in translate.event(event) {
                live.push_frame(frame);
            }
            return;
        }
        let on = |mode| self.modes.contains(&mode);
        let wire = |values: &Value| self.assistant.wire_values(values.clone());
        match event {
            RunEvent::Values(values) | RunEvent::Start { values } if on(Mode::Values) => {
                live.push("values", wire(values));
                *last_values = Some(values.clone());
            }
            RunEvent::Update { node, update } if on(Mode::Updates) => {
                live.push("updates", json!({ node.as_str(): wire(update) }));
            }
            RunEvent::Custom { value, .. } if on(Mode::Custom) => {
                live.push("custom", value.clone());
            }
            _ => {}
        }
        // A message a node writes whole (not streamed in pieces) is one `messages` tuple, as
        // LangGraph's stream sends it when the node's update has it.
        if let (RunEvent::Update { node, update }, true) = (event, on(Mode::MessagesTuple)) {
            let step = seen.steps.get(node).copied().unwrap_or_default();
            for message in self.messages_of(update) {
                let id = message["id"].as_str().unwrap_or_default();
                if seen.streamed.contains(id) {
                    continue;
                }
                let metadata = node_metadata(&seen.config, &self.run.thread_id, node, step);
                live.push("messages", json!([message, metadata]));
            }
        }
        match event {
            RunEvent::MessageDelta {
                node,
                step,
                message_id,
                delta,
            } if on(Mode::MessagesTuple) => {
                let chunk = json!({
                    "type": "AIMessageChunk",
                    "id": message_id,
                    "content": delta,
                    "tool_calls": [],
                    "tool_call_chunks": [],
                    "additional_kwargs": {},
                    "response_metadata": {},
                });
                seen.streamed.insert(message_id.clone());
                let metadata = node_metadata(&seen.config, &self.run.thread_id, node, *step);
                live.push("messages", json!([chunk, metadata]));
            }
            RunEvent::Suspended { values, interrupts } => {
                let asked = questions(interrupts);
                if on(Mode::Updates) && !asked.is_empty() {
                    let list: Vec<Value> = asked.into_iter().map(streamed_interrupt_json).collect();
                    live.push("updates", json!({ "__interrupt__": list }));
                }
                if on(Mode::Values) {
                    live.push("values", with_interrupts(&wire(values), interrupts));
                }
            }
            // The final state, unless the last step's values were it.
            RunEvent::Finished { values }
                if on(Mode::Values) && last_values.as_ref() != Some(values) =>
            {
                live.push("values", wire(values));
            }
            RunEvent::Failed(error) => {
                live.push(
                    "error",
                    json!({"error": error.name, "message": error.detail}),
                );
            }
            _ => {}
        }
    }

    /// Writes the run's end (once: not if it was ended from outside its task already).
    async fn finish(self, end: End) {
        if self
            .live
            .ending
            .swap(true, std::sync::atomic::Ordering::AcqRel)
        {
            return; // ended already, from outside its task
        }
        self.write_end(end).await;
    }

    /// Writes the run's end `end`: its last events, its record and its thread's status (or,
    /// rolled back, their removal; handed back, its return to the queue), and ends its
    /// streams.
    async fn write_end(self, end: End) {
        // Past its deadline: it ends `timeout`, saying so (its thread `error`, as LangGraph's
        // server leaves it).
        let timed_out = matches!(end, End::Cancelled(true)) && self.live.stopped() == Stop::Timeout;
        let end = match end {
            End::Cancelled(true) if timed_out => End::Failed(
                AssistantError::new(
                    "run_timeout",
                    format!(
                        "run `{}` on thread `{}` ran past its deadline of {} s and was stopped",
                        self.run.run_id,
                        self.run.thread_id,
                        self.timeout.as_secs_f64()
                    ),
                )
                .shown_as("TimeoutError", "Background run timed out."),
            ),
            end => end,
        };
        let mut run = self.run.clone();
        // Cancelled before it started is the one end of a run that never ran.
        run.started = !matches!(end, End::Cancelled(false));
        let thread = &run.thread_id;
        let claim = self.claim.as_ref();
        // Its worker no longer holds it (another attempt carries it on): this one writes
        // nothing more, fenced as the thread's journal is.
        if self.live.stopped() == Stop::Lost {
            self.runs.remove(&self.live.run_id);
            self.live.finish(Value::Null);
            return;
        }
        if let Some(claim) = claim {
            // Its worker stops (its future dropped: nothing more of it is committed), or lost
            // the thread's lease while it still held the run (paused past the lease, the run
            // not yet put back): back in the queue, its lease revoked with it, for the next
            // attempt, which goes on from what the thread committed.
            let handed_back = match &end {
                End::Cancelled(_) => self.live.stopped() == Stop::HandBack,
                End::Failed(e) => e.category == "lease_lost" && self.live.stopped() == Stop::No,
                _ => false,
            };
            if handed_back {
                run.status = RunStatus::Pending;
                run.updated_ms = now_ms();
                let pending = vec![Record::Run(run).into()];
                if let Ok(true) = self
                    .live
                    .store(&*self.records, Some(claim), pending, false)
                    .await
                {
                    let _ = self.records.release(&self.run.run_id, &claim.owner).await;
                }
                self.runs.remove(&self.live.run_id);
                self.live.finish(Value::Null);
                return;
            }
            if matches!(end, End::Cancelled(_)) {
                // Cancelled: the next run of its thread takes the lease at once.
                let _ = self.records.revoke_lease(thread).await;
            }
        }
        if matches!(end, End::Cancelled(_)) && self.live.stopped() == Stop::Rollback {
            // As if it had never run: no record, no events (its thread was taken back).
            let _ = self.records.delete_events(&run.run_id).await;
            let _ = self.records.delete(crate::record::RUN, &run.run_id).await;
            if claim.is_some() {
                let _ = self
                    .records
                    .finish_queued(&self.run.run_id, Vec::new(), claim)
                    .await;
            }
            self.runs.remove(&self.live.run_id);
            self.live.finish(Value::Null);
            return;
        }
        if let Some(translate) = &self.translate {
            // A run that ended other than by its last event: the client hears why.
            let why = match &end {
                End::Failed(error) => Some(error.clone()),
                End::Cancelled(_) => Some(AssistantError::new(
                    "run_cancelled",
                    format!("run `{}` on thread `{thread}` was cancelled", run.run_id),
                )),
                End::Finished(_) | End::Suspended(..) => None,
            };
            for frame in why.map(|e| translate.failed(&e)).unwrap_or_default() {
                self.live.push_frame(frame);
            }
        }
        let wire = |values: Value| self.assistant.wire_values(values);
        let (status, thread_status, result) = match end {
            End::Finished(values) => (RunStatus::Success, Some(ThreadStatus::Idle), wire(values)),
            End::Suspended(values, interrupts) => (
                RunStatus::Success,
                Some(ThreadStatus::Interrupted),
                with_interrupts(&wire(values), &interrupts),
            ),
            End::Failed(error) => {
                if !self.live.last_frame_is("error") {
                    self.live.push(
                        "error",
                        json!({"error": error.name, "message": error.detail}),
                    );
                }
                let failure = RunFailure {
                    error: error.name,
                    message: error.detail,
                };
                let result = json!({"__error__": failure});
                run.error = Some(failure);
                (RunStatus::Error, Some(ThreadStatus::Error), result)
            }
            End::Cancelled(started) => {
                let values = match self.assistant.snapshot(thread, None).await {
                    Ok(snapshot) => wire(snapshot.values),
                    Err(_) => json!({}),
                };
                (
                    RunStatus::Interrupted,
                    started.then_some(ThreadStatus::Interrupted),
                    values,
                )
            }
        };
        run.status = match status {
            RunStatus::Error if timed_out => RunStatus::Timeout,
            status => status,
        };
        run.updated_ms = now_ms();
        if self.stateless {
            let _ = self.records.delete_events(&run.run_id).await;
            let _ = self.records.delete(crate::record::RUN, &run.run_id).await;
            let _ = self.records.delete(crate::record::THREAD, thread).await;
            let _ = self.records.delete_state(thread).await;
        } else {
            // Its last events, its final status and its thread's, and (a queued run) its
            // queue row out, in one transaction fenced by its worker's claim: a server
            // following it from the database stops at that status, having read them.
            let failure = match run.status {
                // What LangGraph's server leaves on a thread whose run was cancelled.
                RunStatus::Interrupted => Some(stopped_by("UserInterrupt", "interrupt")),
                _ => run.error.clone(),
            };
            let mut last = vec![Record::Run(run).into()];
            if let Some(status) = thread_status {
                last.push(self.thread_as(status, failure));
            }
            let _ = self
                .live
                .store(&*self.records, claim, last, claim.is_some())
                .await;
        }
        self.runs.remove(&self.live.run_id);
        self.live.finish(result);
    }
}

/// The error LangGraph's server leaves on a thread whose run was stopped: `name`
/// (`UserInterrupt`, `UserRollback`), saying which `action` was asked.
fn stopped_by(name: &str, action: &str) -> RunFailure {
    RunFailure {
        error: name.to_owned(),
        message: format!(
            "{action} requested via POST /threads/{{thread_id}}/runs/{{run_id}}/cancel"
        ),
    }
}

/// What follows runs carried out by other processes (their streams read from the event log,
/// waits for their end), woken by the database's notices (a run's events appended, the run
/// out of the queue) as they come rather than at the next poll; the poll stays, for a notice
/// lost (before the listener listens, or with its connection).
#[derive(Default)]
pub(crate) struct Followers {
    runs: Mutex<HashMap<String, watch::Sender<Change>>>,
    listening: std::sync::OnceLock<()>,
}

/// One follower of a run: changes when the run does; forgets the run when the last follower
/// of it is dropped.
pub(crate) struct Following {
    followers: Arc<Followers>,
    run_id: String,
    changed: watch::Receiver<Change>,
}

/// What the notices said of a followed run (each notice wakes its followers): whether one
/// said it ended.
#[derive(Debug, Clone, Copy, Default)]
struct Change {
    ended: bool,
}

impl Followers {
    /// A follower of run `run_id` in `records`; the first on a database with a run queue
    /// starts the listener.
    pub(crate) fn follow(self: &Arc<Self>, records: &Arc<dyn Records>, run_id: &str) -> Following {
        if records.has_queue() {
            self.listening.get_or_init(|| {
                tokio::spawn(listen(Arc::downgrade(self), Arc::clone(records)));
            });
        }
        let mut runs = self.runs.lock().unwrap_or_else(PoisonError::into_inner);
        let changed = runs
            .entry(run_id.to_owned())
            .or_insert_with(|| watch::Sender::new(Change::default()))
            .subscribe();
        Following {
            followers: Arc::clone(self),
            run_id: run_id.to_owned(),
            changed,
        }
    }

    /// A notice came of run `run_id`: its events were appended to, or it `ended`.
    fn changed(&self, run_id: &str, ended: bool) {
        let runs = self.runs.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(sender) = runs.get(run_id) {
            sender.send_modify(|c| c.ended |= ended);
        }
    }
}

/// Wakes the followers of the runs the database's notices name, as long as they are kept.
async fn listen(followers: std::sync::Weak<Followers>, records: Arc<dyn Records>) {
    loop {
        let Ok(mut notices) = records.listen().await else {
            tokio::time::sleep(std::time::Duration::from_secs(1)).await;
            if followers.strong_count() == 0 {
                return;
            }
            continue;
        };
        loop {
            let notice = tokio::select! {
                notice = notices.recv() => notice,
                // Now and then: whether anyone still keeps the followers.
                () = tokio::time::sleep(std::time::Duration::from_secs(5)) => {
                    if followers.strong_count() == 0 {
                        return;
                    }
                    continue;
                }
            };
            let Some(followers) = followers.upgrade() else {
                return;
            };
            match notice {
                Some(agentstate_store::RunNotice::Appended(run)) => followers.changed(&run, false),
                Some(agentstate_store::RunNotice::Ended(run)) => followers.changed(&run, true),
                Some(_) => {}
                None => break,
            }
        }
    }
}

impl Following {
    /// Waits until the run changed since last seen, or the poll's time passed: whether its
    /// record is worth reading (a notice said it ended, or the poll's time passed: a notice
    /// may have been lost; appended events alone leave it as it was).
    async fn changed(&mut self) -> bool {
        match tokio::time::timeout(FOLLOW_EVERY, self.changed.changed()).await {
            Ok(Ok(())) => self.changed.borrow().ended,
            _ => true,
        }
    }

    /// Marks what is known of the run seen (before it is read again).
    fn seen(&mut self) {
        self.changed.borrow_and_update();
    }
}

impl Drop for Following {
    fn drop(&mut self) {
        let mut runs = self
            .followers
            .runs
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        // This follower's receiver is the last one.
        if runs
            .get(&self.run_id)
            .is_some_and(|s| s.receiver_count() <= 1)
        {
            runs.remove(&self.run_id);
        }
    }
}

/// Run `run_id`'s frames from its event log, from the one numbered `from`, then as another
/// server (or this one) stores them (`following` it), until the run's record is final and
/// every event was read.
///
/// `open`: the run is known not to have ended (just queued): its record is not read before
/// its first events.
pub(crate) fn stored_frames(
    records: Arc<dyn Records>,
    following: Following,
    from: usize,
    open: bool,
) -> impl Stream<Item = (usize, Frame)> + Send + 'static {
    let state = Reading {
        records,
        following,
        next: from as u64,
        page: std::collections::VecDeque::new(),
        check: !open,
        ended: false,
        caught_up: false,
    };
    futures_util::stream::unfold(state, |mut r| async move {
        loop {
            if let Some(event) = r.page.pop_front() {
                let EventRecord {
                    seq, event, data, ..
                } = event;
                return Some(((seq as usize, Frame { event, data }), r));
            }
            if r.caught_up {
                if r.ended {
                    return None;
                }
                r.check = r.following.changed().await;
            }
            r.following.seen();
            let run_id = r.following.run_id.clone();
            // Its status before its events: a run is final only once its last events are in.
            if r.check && !r.ended {
                r.ended = match r.records.run(&run_id).await {
                    Ok(Some(run)) => run.status.is_final(),
                    Ok(None) | Err(_) => true,
                };
            }
            let read = r
                .records
                .events(&run_id, r.next, EVENTS_PAGE)
                .await
                .unwrap_or_default();
            // Less than a page: every event stored when it was read (a later one is noticed).
            r.caught_up = read.len() < EVENTS_PAGE;
            if let Some(last) = read.last() {
                r.next = last.seq + 1;
                r.page.extend(read);
            }
        }
    })
}

/// Where [`stored_frames`] stands in a run's event log.
struct Reading {
    records: Arc<dyn Records>,
    following: Following,
    /// The number of the next event to read.
    next: u64,
    /// Events read, not yet streamed.
    page: std::collections::VecDeque<EventRecord>,
    /// Whether to read the run's record (whether it ended) before its next events.
    check: bool,
    /// Whether its record was final: the events read after it are its last.
    ended: bool,
    /// Whether the last read had every event stored then.
    caught_up: bool,
}

/// Waits until the record of the run `following` follows is final (a run another server
/// carries out) and returns it (`None`: it was deleted).
pub(crate) async fn final_record(
    records: &dyn Records,
    mut following: Following,
) -> Result<Option<RunRecord>, agentstate_store::StoreError> {
    loop {
        following.seen();
        match records.run(&following.run_id).await? {
            // Read again once it ended (or the poll's time passed), not at each event.
            Some(run) if !run.status.is_final() => while !following.changed().await {},
            done => return Ok(done),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stop_asked_before_a_run_is_registered_stops_it_when_it_is() {
        let runs = Runs::default();
        runs.stop("r1", Stop::Rollback);
        let (r1, r2) = (Live::new("r1", "t1"), Live::new("r2", "t2"));
        runs.register(&r2, |_| Ok::<_, ()>(())).unwrap();
        assert_eq!(r2.stopped(), Stop::No);
        runs.register(&r1, |_| Ok::<_, ()>(())).unwrap();
        assert_eq!(r1.stopped(), Stop::Rollback);
        // Asked once: a later run of the same id (another attempt) starts unstopped.
        runs.remove("r1");
        let again = Live::new("r1", "t1");
        runs.register(&again, |_| Ok::<_, ()>(())).unwrap();
        assert_eq!(again.stopped(), Stop::No);
        // A run in progress stops at once.
        runs.stop("r2", Stop::Cancel);
        assert_eq!(r2.stopped(), Stop::Cancel);
    }

    /// A run's frames, once in its event log, leave memory but its last few: its memory does
    /// not grow with what it emits, and a reader from any point (a slow one, one that comes
    /// late) still gets every frame in order, those let go read from the log.
    #[tokio::test]
    async fn a_runs_memory_is_bounded_and_its_readers_get_every_frame() {
        let store = agentstate_store::SqliteStore::open_in_memory().unwrap();
        let records: Arc<dyn Records> = Arc::new(store);
        let live = Live::new("r1", "t1");
        let total = KEPT_FRAMES * 6;
        for n in 1..total {
            live.push("custom", json!({ "n": n, "pad": "x".repeat(1024) }));
            if n % 100 == 0 {
                assert!(live
                    .store(&*records, None, Vec::new(), false)
                    .await
                    .unwrap());
                assert!(live.lock().frames.len() <= KEPT_FRAMES + 100);
            }
        }
        assert!(live
            .store(&*records, None, Vec::new(), false)
            .await
            .unwrap());
        assert!(live.lock().frames.len() <= KEPT_FRAMES);
        live.finish(json!({}));
        for from in [0, 7, total - KEPT_FRAMES - 1, total - 3] {
            let read: Vec<(usize, Frame)> = Arc::clone(&live)
                .frames(Arc::clone(&records), from)
                .collect()
                .await;
            let numbers: Vec<usize> = read.iter().map(|(i, _)| *i).collect();
            assert_eq!(numbers, (from..total).collect::<Vec<_>>(), "from {from}");
            for (i, frame) in read.iter().skip(1) {
                assert_eq!(frame.data["n"], *i, "frame {i}");
            }
        }
    }

    #[test]
    fn early_stops_are_bounded() {
        let runs = Runs::default();
        for i in 0..EARLY_STOPS * 3 {
            runs.stop(&format!("r{i}"), Stop::Cancel);
        }
        assert!(runs.registry().early.len() <= EARLY_STOPS);
    }
}
