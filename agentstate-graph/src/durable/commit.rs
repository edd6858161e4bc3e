//! The commit of a durable run: each step staged on the thread's handle and flushed as the
//! durability mode says, the finished tasks of a step of several journaled as they finish,
//! effects and answers recorded as the step's nodes go ([`LiveJournal`]), and the run's end,
//! suspension or failure written with the lease's release.

use super::lease::lease_lost;
use super::{lock, Durability, DurableError, DurableState, Outcome};
use crate::effect::{Interrupt, Journal, Scope};
use crate::error::RunErrorKind;
use crate::graph::Graph;
use crate::heartbeat::Heartbeat;
use crate::journal::{JournalEntry, Position, SendRecord, META_KEY};
use crate::name::NodeKey;
use crate::node::{BoxError, NodeFuture};
use crate::run::{Commit, Committed, Run, Setup, Stop};
use crate::step::Composed;
use agentstate::Combine;
use agentstate::NodeOutput;
use agentstate_store::backend::Backend;
use agentstate_store::{Lease, StepMeta, StoreError, Thread};
use futures_util::lock::Mutex as AsyncMutex;
use serde_json::{Map, Value};
use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context as TaskContext, Poll, Waker};

/// What a step's nodes see of the durable run: the recorded effects and answers of the step in
/// flight, and the thread's handle, lent while the step runs, to journal new ones.
pub(super) struct LiveJournal<S, B> {
    effects: Mutex<HashMap<String, (String, Value)>>,
    answers: Mutex<Map<String, Value>>,
    writer: AsyncMutex<Option<Thread<S, B>>>,
    /// The step's finished tasks not journaled yet (`Async`, `Exit`).
    finished: Mutex<Finished>,
    run_id: String,
    /// The run's thread.
    thread: String,
    lease: Heartbeat,
}

/// The finished tasks of the step in flight whose entries a task does not write itself (in
/// `Async` and `Exit`): queued as they finish, written while the others run (`Async`), and
/// staged before the step's own commit whatever is left.
#[derive(Default)]
struct Finished {
    entries: Vec<JournalEntry>,
    /// The step's tasks that may still queue an entry.
    running: usize,
    /// The step's writer, waiting for entries or for the last task.
    waiting: Option<Waker>,
}

impl<S: DurableState, B: Backend> LiveJournal<S, B> {
    /// Appends `entry` (an empty update) with the lent handle, after what is staged.
    async fn append(&self, entry: &JournalEntry) -> Result<(), BoxError> {
        let mut writer = self.writer.lock().await;
        let handle = writer.as_mut().ok_or("the run's thread is not open")?;
        if !self.lease.held() {
            return Err(Box::new(lease_lost(handle.id(), self.lease.owner())));
        }
        handle
            .merge((), entry_meta(&self.run_id, None, entry))
            .await?;
        Ok(())
    }

    /// Stages the queued entries of finished tasks on `handle` (in the order they finished).
    fn stage_finished(&self, handle: &mut Thread<S, B>) -> Result<(), StoreError> {
        let entries = std::mem::take(&mut lock(&self.finished).entries);
        for entry in &entries {
            handle.stage((), |_| entry_meta(&self.run_id, None, entry))?;
        }
        Ok(())
    }

    /// Whether finished tasks' entries are queued (`Ready(true)`), or the step's tasks all
    /// finished (`Ready(false)`: what they queued last is staged with the step's commit).
    fn poll_finished(&self, cx: &mut TaskContext<'_>) -> Poll<bool> {
        let mut finished = lock(&self.finished);
        if finished.running == 0 {
            return Poll::Ready(false);
        }
        if !finished.entries.is_empty() {
            return Poll::Ready(true);
        }
        finished.waiting = Some(cx.waker().clone());
        Poll::Pending
    }
}

/// A task of the step in flight whose entry is queued, not written by the task: counted among
/// the running tasks until dropped, when it queues its entry, if it finished with one.
struct Queued<S, B> {
    journal: Arc<LiveJournal<S, B>>,
    entry: Option<JournalEntry>,
}

impl<S, B> Queued<S, B> {
    fn new(journal: Arc<LiveJournal<S, B>>) -> Self {
        lock(&journal.finished).running += 1;
        Queued {
            journal,
            entry: None,
        }
    }
}

impl<S, B> Drop for Queued<S, B> {
    fn drop(&mut self) {
        let mut finished = lock(&self.journal.finished);
        finished.running -= 1;
        finished.entries.extend(self.entry.take());
        if let Some(writer) = finished.waiting.take() {
            writer.wake();
        }
    }
}

impl<S: DurableState, B: Backend> Journal for LiveJournal<S, B> {
    fn recorded(&self, key: &str) -> Option<(String, Value)> {
        lock(&self.effects).get(key).cloned()
    }

    fn may_start(&self) -> Result<(), BoxError> {
        match self.lease.held() {
            true => Ok(()),
            false => Err(Box::new(lease_lost(&self.thread, self.lease.owner()))),
        }
    }

    fn record(
        &self,
        key: String,
        name: String,
        value: Value,
    ) -> Pin<Box<dyn Future<Output = Result<(), BoxError>> + Send + '_>> {
        Box::pin(async move {
            let step = key
                .split('.')
                .next()
                .and_then(|s| s.parse::<u64>().ok())
                .unwrap_or(0);
            let entry = JournalEntry::Effect {
                step,
                key,
                name,
                value,
            };
            self.append(&entry).await?;
            if let JournalEntry::Effect {
                key, name, value, ..
            } = entry
            {
                lock(&self.effects).insert(key, (name, value));
            }
            Ok(())
        })
    }

    fn answer(&self, id: &str) -> Option<Value> {
        lock(&self.answers).get(id).cloned()
    }
}

/// The commit of a durable run: each step staged on the thread's handle and flushed as the
/// durability mode says; its tasks' outputs, effects and questions journaled.
pub(super) struct Durable<S, K, B> {
    /// The thread's handle; lent to the journal while a step runs.
    pub(super) handle: Option<Thread<S, B>>,
    /// The state the running step's nodes read (while the handle is lent).
    reading: Option<Arc<S>>,
    journal: Arc<LiveJournal<S, B>>,
    /// Outputs of the step in flight's tasks that finished before (by index): not run again.
    done: BTreeMap<usize, Value>,
    durability: Durability,
    heartbeat: Heartbeat,
    /// The run's lease, until its last commit released it.
    pub(super) lease: Option<Lease<B>>,
    thread: String,
    /// The thread's version after the last flush of `finish` or `suspend`, not reported yet.
    flushed: Option<u64>,
    _graph: std::marker::PhantomData<fn() -> K>,
}

impl<S: DurableState, K: NodeKey, B: Backend> Durable<S, K, B> {
    /// The commit of run `run_id` on thread `thread`, its handle `handle`, from `position`
    /// (its step in flight's recorded effects, answers and finished tasks taken from it).
    pub(super) fn new(
        thread: &str,
        handle: Thread<S, B>,
        position: &mut Position,
        run_id: String,
        durability: Durability,
        heartbeat: &Heartbeat,
        lease: Option<Lease<B>>,
    ) -> Self {
        let journal = Arc::new(LiveJournal {
            effects: Mutex::new(std::mem::take(&mut position.effects)),
            answers: Mutex::new(std::mem::take(&mut position.answers)),
            writer: AsyncMutex::new(None),
            finished: Mutex::default(),
            run_id,
            thread: thread.to_owned(),
            lease: heartbeat.clone(),
        });
        Durable {
            handle: Some(handle),
            reading: None,
            journal,
            done: std::mem::take(&mut position.done),
            durability,
            heartbeat: heartbeat.clone(),
            lease,
            flushed: None,
            thread: thread.to_owned(),
            _graph: std::marker::PhantomData,
        }
    }

    /// Takes the handle back from the journal after a step, the step's finished tasks not
    /// written yet staged on it (before the step's own commit).
    async fn take_back(&mut self) -> Result<(), StoreError> {
        if self.handle.is_none() {
            self.handle = self.journal.writer.lock().await.take();
        }
        self.reading = None;
        match self.handle.as_mut() {
            Some(handle) => self.journal.stage_finished(handle),
            None => Ok(()),
        }
    }

    fn handle(&mut self) -> &mut Thread<S, B> {
        self.handle
            .as_mut()
            .expect("the handle is back between steps")
    }

    /// The run's last commit: what is staged, releasing the lease in the same write.
    async fn flush_last(&mut self) -> Result<Option<u64>, StoreError> {
        if !self.heartbeat.held() {
            return Err(lease_lost(&self.thread, self.heartbeat.owner()));
        }
        let Some(lease) = self.lease.take() else {
            return self.flush().await;
        };
        // Renewals stop first: the lease is about to be given up.
        self.heartbeat.stop();
        let handle = self
            .handle
            .as_mut()
            .expect("the handle is back between steps");
        let staged = handle.staged();
        match handle.flush_releasing(&lease).await {
            Ok(version) => Ok((staged > 0).then_some(version)),
            Err(error) => {
                self.lease = Some(lease);
                Err(error)
            }
        }
    }

    /// Commits what is staged, if the lease is still held.
    async fn flush(&mut self) -> Result<Option<u64>, StoreError> {
        if !self.heartbeat.held() {
            return Err(lease_lost(&self.thread, self.heartbeat.owner()));
        }
        let handle = self.handle();
        if handle.staged() == 0 {
            return Ok(None);
        }
        handle.flush().await.map(Some)
    }

    /// The state's `ExecutionState` update, if it has one: its current value with the thread's
    /// id, changed by `change`.
    fn execution(&mut self, change: impl FnOnce(&mut Map<String, Value>)) -> Option<S::Update> {
        let thread = self.thread.clone();
        let handle = self.handle.as_ref()?;
        execution_update(handle.state(), &thread, change)
    }
}

impl<S: DurableState, K: NodeKey, B: Backend> Commit<S, K> for Durable<S, K, B> {
    type Output = Outcome<S>;
    type Error = DurableError<S>;
    const SUSPENDS: bool = true;

    fn state(&mut self) -> Arc<S> {
        match (&mut self.handle, &self.reading) {
            (Some(handle), _) => handle.shared_state(),
            (None, Some(reading)) => Arc::clone(reading),
            (None, None) => unreachable!("a durable run's state is its handle's or lent"),
        }
    }

    fn answered(&self, id: &str) -> bool {
        self.journal.answer(id).is_some()
    }

    fn take_committed(&mut self) -> Option<u64> {
        self.flushed.take()
    }

    async fn before_step(&mut self, _: &Run<S, K>) -> Result<(), DurableError<S>> {
        // A run whose lease was taken over stops before its next node.
        if !self.heartbeat.held() {
            return Err(lease_lost(&self.thread, self.heartbeat.owner()).into());
        }
        // The handle is lent to the step's journal (effects, finished tasks) while it runs.
        let mut handle = self
            .handle
            .take()
            .expect("the handle is back between steps");
        self.reading = Some(handle.shared_state());
        *self.journal.writer.lock().await = Some(handle);
        Ok(())
    }

    fn task(&mut self, run: &Run<S, K>, index: usize, _: usize) -> Setup<S::Update> {
        let journal: Arc<dyn Journal> = Arc::clone(&self.journal) as Arc<dyn Journal>;
        Setup {
            scope: Some(Arc::new(Scope::new(
                journal,
                format!("{}.{index}", run.step),
            ))),
            done: self
                .done
                .remove(&index)
                .and_then(|v| serde_json::from_value::<S::Update>(v).ok())
                .map(NodeOutput::from),
        }
    }

    fn wrap(
        &mut self,
        run: &Run<S, K>,
        index: usize,
        task: NodeFuture<S::Update>,
    ) -> NodeFuture<S::Update> {
        // A task of a step of several keeps its output as it finishes: a crash then reruns
        // only the step's unfinished tasks. In `Sync` the task writes its entry itself; in
        // `Async` and `Exit` it queues it and goes on (the step's writer writes it in `Async`).
        if run.active.len() < 2 {
            return task;
        }
        let journal = Arc::clone(&self.journal);
        let mut queued =
            (self.durability != Durability::Sync).then(|| Queued::new(Arc::clone(&self.journal)));
        let step = run.step;
        let node = run.graph().inner().nodes[run.active[index]]
            .name
            .to_string();
        Box::pin(async move {
            // One output is journaled as the update it is and passed on as that update (no
            // copy, composed once); several are composed for the journal and again at the
            // barrier, which reports the failure if they do not compose.
            let (output, json) = match task.await? {
                NodeOutput::Nothing => (
                    NodeOutput::Nothing,
                    serde_json::to_value(S::Update::default()).ok(),
                ),
                NodeOutput::Update(update) => {
                    let json = serde_json::to_value(&update).ok();
                    (NodeOutput::Update(update), json)
                }
                NodeOutput::ToolResult(result) => {
                    let update = result.into_update();
                    let json = serde_json::to_value(&update).ok();
                    (NodeOutput::Update(update), json)
                }
                many => {
                    let json = output_json::<S>(&many);
                    (many, json)
                }
            };
            if let Some(update) = json {
                let entry = JournalEntry::Task {
                    step,
                    index,
                    node,
                    update,
                };
                match queued.as_mut() {
                    Some(queued) => queued.entry = Some(entry),
                    None => journal.append(&entry).await?,
                }
            }
            Ok(output)
        })
    }

    async fn meanwhile(&mut self) -> Result<Option<u64>, DurableError<S>> {
        if self.durability != Durability::Async {
            return Ok(None);
        }
        // The last step's append, with the entries of the tasks that finished already, then
        // each finished task's as it comes, while the others run: what finished is not run
        // again after a crash. None is awaited by the step: what the last tasks queued is
        // staged before the step's commit. No append once the lease may have been taken over
        // (the step's nodes run first, and one may have blocked the thread past the lease).
        let mut committed = None;
        let mut first = true;
        loop {
            if !first && !std::future::poll_fn(|cx| self.journal.poll_finished(cx)).await {
                break;
            }
            if !self.heartbeat.held() {
                return Err(lease_lost(&self.thread, self.heartbeat.owner()).into());
            }
            let mut writer = self.journal.writer.lock().await;
            let Some(handle) = writer.as_mut() else {
                break;
            };
            let last_step = first && handle.staged() > 0;
            self.journal.stage_finished(handle)?;
            if handle.staged() > 0 {
                let version = handle.flush().await?;
                if last_step {
                    committed = Some(version);
                }
            }
            first = false;
        }
        Ok(committed)
    }

    async fn commit(
        &mut self,
        run: &Run<S, K>,
        update: Option<Composed<S::Update>>,
    ) -> Result<Committed<S>, Stop<DurableError<S>>> {
        self.take_back().await.map_err(|e| Stop::Commit(e.into()))?;
        // The state's `ExecutionState`, if it has one, follows the run (as AgentFlow's).
        let graph = run.graph();
        let names = graph.names(&run.active);
        let step = run.step;
        let execution = self.execution(|e| {
            e.insert("current_node".into(), Value::String(names.join(",")));
            e.insert("step".into(), Value::from(step));
            e.insert("status".into(), Value::from("running"));
            for key in ["interrupted_node", "interrupt_reason", "interrupt_data"] {
                e.insert(key.into(), Value::Null);
            }
        });
        let (update, from) = match update {
            Some(Composed { update, from }) => (Some(update), from),
            None => (None, None),
        };
        let update = match (update, execution) {
            (Some(update), Some(execution)) => Some(
                S::compose(update, execution, Combine::Sequence)
                    .map_err(|error| Stop::Run(graph.merge_error(&run.active, from, error)))?,
            ),
            (update, execution) => update.or(execution),
        };
        let run_id = run.run_id.to_string();
        let mut routed = None;
        let staged = self.handle().stage(
            update.map_or(NodeOutput::Nothing, NodeOutput::from),
            |state: &S| {
                let route = graph.route(state, &run.active);
                let meta = step_meta(graph, &run_id, step, &run.active, route.as_ref().ok());
                routed = Some(route);
                meta
            },
        );
        if let Err(error) = staged {
            return Err(match error {
                StoreError::Merge(error) => Stop::Run(graph.merge_error(&run.active, from, error)),
                other => Stop::Commit(other.into()),
            });
        }
        let next = match routed.expect("the step was described") {
            Ok(next) => next,
            Err(kind) => {
                // Nothing of the step may stay (the steps staged before it do).
                self.handle()
                    .unstage_last()
                    .await
                    .map_err(|e| Stop::Commit(e.into()))?;
                return Err(Stop::Run(kind));
            }
        };
        // The run's last step (nothing next) is committed with the run's end, in one
        // transaction: a chat turn of one step is one write.
        let last = next.0.is_empty();
        let version = match self.durability {
            Durability::Sync if !last => self.flush().await.map_err(|e| Stop::Commit(e.into()))?,
            Durability::Sync | Durability::Async | Durability::Exit => None,
        };
        lock(&self.journal.effects).clear();
        lock(&self.journal.answers).clear();
        Ok(Committed { next, version })
    }

    async fn finish(&mut self, run: &Run<S, K>) -> Result<Outcome<S>, DurableError<S>> {
        self.take_back().await?;
        let execution = self.execution(|e| {
            e.insert("status".into(), Value::from("completed"));
        });
        let handle = self.handle();
        if let Some(execution) = execution {
            let entry = JournalEntry::End { step: run.step };
            let meta = entry_meta(&run.run_id, None, &entry);
            handle.stage(execution, |_| meta)?;
        }
        self.flushed = self.flush_last().await?;
        let handle = self.handle();
        Ok(Outcome::Finished {
            version: handle.version(),
            state: handle.shared_state(),
        })
    }

    async fn suspend(
        &mut self,
        run: &Run<S, K>,
        interrupts: Vec<Interrupt>,
    ) -> Result<Outcome<S>, DurableError<S>> {
        self.take_back().await?;
        let first = &interrupts[0];
        let (node, id) = (first.node.clone(), first.id.clone());
        let data = serde_json::json!({ "interrupts": interrupts });
        let execution = self.execution(|e| {
            e.insert("current_node".into(), Value::String(node.clone()));
            e.insert("status".into(), Value::from("interrupted_before"));
            e.insert("interrupted_node".into(), Value::String(node));
            e.insert(
                "interrupt_reason".into(),
                Value::String(format!("interrupt {id}")),
            );
            e.insert("interrupt_data".into(), data);
        });
        // The suspended step: the one whose nodes asked, or the next for a breakpoint.
        let step = interrupts.iter().map(|i| i.step).max().unwrap_or(run.step);
        let entry = JournalEntry::Suspend {
            step,
            interrupts,
            done: BTreeMap::new(),
        };
        let meta = entry_meta(&run.run_id, None, &entry);
        let handle = self.handle();
        match execution {
            Some(execution) => handle.stage(execution, |_| meta)?,
            None => handle.stage((), |_| meta)?,
        }
        self.flushed = self.flush_last().await?;
        let JournalEntry::Suspend { interrupts, .. } = entry else {
            unreachable!("the entry written above")
        };
        let handle = self.handle();
        Ok(Outcome::Suspended {
            version: handle.version(),
            state: handle.shared_state(),
            interrupts,
        })
    }

    async fn fail(&mut self, run: &Run<S, K>, kind: RunErrorKind) -> DurableError<S> {
        if let Err(error) = self.take_back().await {
            return error.into();
        }
        if let Err(error) = self.flush().await {
            return error.into();
        }
        // The failure is journaled (with the state's `ExecutionState` marked failed, if it has
        // one): a resume runs the step again, and answers it failed on may be given anew.
        let error = run.error(kind, ());
        let message = error.to_string();
        let entry = JournalEntry::Failed {
            step: run.step,
            category: error.category().to_owned(),
            error: message.clone(),
        };
        let meta = entry_meta(&run.run_id, None, &entry);
        let execution = self.execution(|e| {
            e.insert("status".into(), Value::from("error"));
            let mut internal = e
                .get("internal_data")
                .and_then(Value::as_object)
                .cloned()
                .unwrap_or_default();
            internal.insert("error".into(), Value::String(message));
            e.insert("internal_data".into(), Value::Object(internal));
        });
        if !self.heartbeat.held() {
            return lease_lost(&self.thread, self.heartbeat.owner()).into();
        }
        let handle = self.handle();
        let written = match execution {
            Some(execution) => handle.merge(execution, meta).await,
            None => handle.merge((), meta).await,
        };
        if let Err(error) = written {
            return error.into();
        }
        DurableError::Run(error.with_state(handle.state().clone()))
    }
}

/// Journal metadata of `entry`, of run `run_id`, naming `node`.
pub(super) fn entry_meta(run_id: &str, node: Option<&str>, entry: &JournalEntry) -> StepMeta {
    let mut meta = StepMeta::default()
        .run_id(run_id)
        .with(META_KEY, entry.to_meta());
    meta.node = node.map(str::to_owned);
    meta
}

/// The metadata of step `step` of `active`, routed to `next` (none if routing failed).
pub(super) fn step_meta<S: DurableState, K: NodeKey>(
    graph: &Graph<S, K>,
    run_id: &str,
    step: u64,
    active: &[usize],
    next: Option<&crate::step::Next<S>>,
) -> StepMeta {
    let nodes = graph.names(active);
    let mut plain = Vec::new();
    let mut sends = Vec::new();
    if let Some((next, inputs)) = next {
        for (&at, input) in next.iter().zip(inputs) {
            let name = graph.inner().nodes[at].name.to_string();
            match input {
                None => plain.push(name),
                Some(input) => sends.push(SendRecord {
                    node: name,
                    input: serde_json::to_value(&**input).unwrap_or(Value::Null),
                }),
            }
        }
    }
    let node = nodes.join(",");
    let entry = JournalEntry::Step {
        step,
        nodes,
        next: plain,
        sends,
    };
    entry_meta(run_id, Some(&node), &entry)
}

/// An update of the state's `ExecutionState` field (none if it has none): its current value
/// as JSON, with the thread's id, changed by `change`.
fn execution_update<S: DurableState>(
    state: &S,
    thread: &str,
    change: impl FnOnce(&mut Map<String, Value>),
) -> Option<S::Update> {
    let (name, current) = state.execution()?;
    let Ok(Value::Object(mut execution)) = serde_json::to_value(current) else {
        return None;
    };
    if execution.get("thread_id").is_none_or(Value::is_null) {
        execution.insert("thread_id".into(), Value::String(thread.to_owned()));
    }
    change(&mut execution);
    let mut update = Map::new();
    update.insert(name.to_owned(), Value::Object(execution));
    serde_json::from_value(Value::Object(update)).ok()
}

/// A finished node's output as the JSON of its update (kept so that it is not run again).
fn output_json<S: DurableState>(output: &NodeOutput<S::Update>) -> Option<Value> {
    let update = output.clone().into_update(S::compose).ok()?;
    serde_json::to_value(update.unwrap_or_default()).ok()
}
