//! The run service: what both HTTP fronts (the LangGraph API and AG-UI) and the workers ask of
//! runs, above the stores of records and events and below HTTP. It creates a run (its request
//! read, its multitask strategy applied to the runs its thread has not ended) and starts its
//! task here or queues it for the workers; it cancels, joins and deletes runs, reads threads'
//! state, and ends the runs a stopped server left (`recover`). How a run's task ends, in this
//! process or a worker's, is decided in one place: [`Job`]'s end.

use crate::assistant::{Assistant, RunOptions, Snapshot, Start};
use crate::auth::{Action, Caller, Identity, Resource};
use crate::branches;
use crate::checkpoints::{self, with_interrupts, CheckpointId};
use crate::error::ApiError;
use crate::metadata::run_metadata;
use crate::record::{
    now_ms, EventRecord, Record, RunFailure, RunRecord, RunStatus, ThreadRecord, ThreadStatus, RUN,
    THREAD,
};
use crate::records::Records;
use crate::runs::{final_record, metadata_json, Followers, Following, Job, Live, Mode, Runs, Stop};
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use std::sync::Arc;
use std::time::Duration;

/// A served graph.
pub(crate) struct Served {
    pub(crate) graph_id: String,
    pub(crate) assistant_id: String,
    pub(crate) assistant: Arc<dyn Assistant>,
    /// Its runs' deadline, if it has its own.
    pub(crate) timeout: Option<Duration>,
}

impl Served {
    /// Its assistant's metadata: `{"created_by": "system"}`, as LangGraph's server marks the
    /// assistants it made for its graphs (what rules on assistants filter).
    pub(crate) fn metadata(&self) -> Map<String, Value> {
        let mut metadata = Map::new();
        metadata.insert("created_by".into(), "system".into());
        metadata
    }
}

/// The run service: the stores, the served graphs, and the runs in progress in this process.
pub(crate) struct Service {
    pub(crate) records: Arc<dyn Records>,
    pub(crate) assistants: Vec<Served>,
    pub(crate) runs: Arc<Runs>,
    /// Runs on threads are queued in the database for the workers (of any process), not
    /// carried out where they are created.
    pub(crate) queued: bool,
    /// The URL it serves at, once [`Server::serve`](crate::Server::serve) knows it
    /// (`langgraph_api_url` in runs' metadata).
    pub(crate) api_url: std::sync::OnceLock<Arc<str>>,
    /// What follows runs carried out by other processes.
    pub(crate) followers: Arc<Followers>,
    /// A run's deadline unless its assistant or its request gives one.
    pub(crate) run_timeout: Duration,
}

/// A run just created: in progress in this process (`live`), or queued for the workers on the
/// database.
pub(crate) struct Created {
    pub(crate) run: RunRecord,
    pub(crate) live: Option<Arc<Live>>,
    pub(crate) stateless: bool,
}

/// How a cancel went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Cancelled {
    /// The run ended (a cancel that waited).
    Done,
    /// The run was asked to stop.
    Asked,
}

/// The sentence of a run refused on a busy thread (`reject`), as LangGraph's server says it.
const BUSY: &str = "Thread is already running a task. Wait for it to finish or choose a different multitask strategy.";

/// What multitask strategy `strategy` does to the runs a thread has not ended (`busy`: it has
/// some) when a new run comes: refuses the new run, leaves them (`None`: the new run waits its
/// turn), or stops them (the new run runs after them). The one place that decides it, for runs
/// carried out here and for queued runs.
fn multitask(strategy: &str, busy: bool) -> Result<Option<Stop>, ApiError> {
    match strategy {
        "reject" if busy => Err(ApiError::conflict(BUSY)),
        "reject" | "enqueue" => Ok(None),
        // The running run stops where it is (its committed steps stay); the new one runs
        // after it, from its input.
        "interrupt" => Ok(Some(Stop::Cancel)),
        // The running run stops and what it did is removed; the new one runs after it.
        "rollback" => Ok(Some(Stop::Rollback)),
        other => Err(ApiError::unprocessable(format!(
            "multitask_strategy `{other}` is not one of `reject`, `interrupt`, `rollback` and `enqueue`"
        ))),
    }
}

impl Service {
    /// The URL it serves at, if known.
    pub(crate) fn api_url(&self) -> Option<Arc<str>> {
        self.api_url.get().cloned()
    }

    /// The assistant named `id` (its graph id or its assistant id).
    pub(crate) fn assistant(&self, id: &str) -> Option<&Served> {
        self.assistants
            .iter()
            .find(|a| a.graph_id == id || a.assistant_id == id)
    }

    /// The assistant of graph `graph_id`.
    pub(crate) fn graph(&self, graph_id: &str) -> Result<&Served, ApiError> {
        self.assistants
            .iter()
            .find(|a| a.graph_id == graph_id)
            .ok_or_else(|| {
                ApiError::unprocessable(format!(
                    "graph `{graph_id}` is no longer served by this server"
                ))
            })
    }

    /// A follower of run `run_id` (carried out by another process, or ended).
    pub(crate) fn follow(&self, run_id: &str) -> Following {
        self.followers.follow(&self.records, run_id)
    }

    /// The assistant id of the graph run `run` ran (its graph id if no longer served).
    pub(crate) fn assistant_id_of(&self, run: &RunRecord) -> String {
        self.assistant(&run.graph_id)
            .map_or_else(|| run.graph_id.clone(), |a| a.assistant_id.clone())
    }

    /// Thread `id`'s record.
    pub(crate) async fn thread_record(&self, id: &str) -> Result<ThreadRecord, ApiError> {
        self.records
            .thread(id)
            .await?
            .ok_or_else(|| thread_missing(id))
    }

    /// Thread `id`'s record, if `caller` may `action` it: one the rules hide is answered as a
    /// missing one (404), as LangGraph's server answers it.
    pub(crate) async fn thread_for(
        &self,
        caller: &Caller,
        id: &str,
        action: Action,
    ) -> Result<ThreadRecord, ApiError> {
        let filter = caller.decide(Resource::Threads, action, Some(id), &mut Map::new())?;
        let thread = self.thread_record(id).await?;
        match filter {
            Some(filter) if !filter.matches(&thread.metadata) => Err(thread_missing(id)),
            _ => Ok(thread),
        }
    }

    /// Refuses, as LangGraph's server refuses it, with 404 `missing`, what `caller` may not
    /// `action` on thread `id`: a thread the rules hide, or, when they filter, one that is
    /// missing (403 if the rules refuse the action). Without a filter the thread is not read.
    pub(crate) async fn check_thread(
        &self,
        caller: &Caller,
        id: &str,
        action: Action,
        missing: &str,
    ) -> Result<(), ApiError> {
        let Some(filter) = caller.decide(Resource::Threads, action, Some(id), &mut Map::new())?
        else {
            return Ok(());
        };
        match self.records.thread(id).await? {
            Some(thread) if filter.matches(&thread.metadata) => Ok(()),
            _ => Err(ApiError::not_found(missing)),
        }
    }

    /// The assistant named `id` (its graph id or its assistant id), if `caller` may `action`
    /// it.
    pub(crate) fn assistant_for(
        &self,
        caller: &Caller,
        id: &str,
        action: Action,
    ) -> Result<Option<&Served>, ApiError> {
        let Some(served) = self.assistant(id) else {
            return Ok(None);
        };
        let metadata = served.metadata();
        let seen = caller.sees(
            Resource::Assistants,
            action,
            &served.assistant_id,
            &metadata,
        )?;
        Ok(seen.then_some(served))
    }

    /// Thread `thread`'s state now, or at version `at` (`None`: no run made it yet).
    pub(crate) async fn snapshot(
        &self,
        thread: &ThreadRecord,
        at: Option<u64>,
    ) -> Result<Option<Snapshot>, ApiError> {
        let Some(graph) = &thread.graph_id else {
            return Ok(None);
        };
        let served = self.graph(graph)?;
        match served.assistant.snapshot(&thread.thread_id, at).await {
            Ok(mut snapshot) => {
                snapshot.values = served.assistant.wire_values(snapshot.values);
                Ok(Some(snapshot))
            }
            // Its first run has not made the store's thread yet.
            Err(e) if e.category == "thread_not_found" => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// Run `run_id` of thread `thread`.
    pub(crate) async fn run_record(
        &self,
        thread: &str,
        run_id: &str,
    ) -> Result<RunRecord, ApiError> {
        match self.records.run(run_id).await? {
            Some(run) if run.thread_id == thread => Ok(run),
            // As LangGraph's server answers it.
            _ => Err(ApiError::not_found("Not Found")),
        }
    }

    /// The task of run `run` of `served`, in progress as `live`, from `start` (its options,
    /// modes and the rest as a plain run on a thread has them).
    pub(crate) fn job(
        &self,
        served: &Served,
        live: &Arc<Live>,
        run: RunRecord,
        start: Start,
    ) -> Job {
        // Checked when the run was created: a queued run's, again by its worker.
        let timeout = timeout_of(&run.kwargs)
            .ok()
            .flatten()
            .or(served.timeout)
            .unwrap_or(self.run_timeout);
        Job {
            records: Arc::clone(&self.records),
            runs: Arc::clone(&self.runs),
            assistant: Arc::clone(&served.assistant),
            live: Arc::clone(live),
            timeout,
            run,
            start,
            options: RunOptions::new(),
            modes: Vec::new(),
            stateless: false,
            translate: None,
            claim: None,
            api_url: self.api_url(),
        }
    }

    /// Creates a run on thread `thread` (`None`: a stateless run, on a temporary thread) from
    /// its request `kwargs`, and starts its task, or queues it for the workers (a run on a
    /// thread, on a database with a run queue, when the server has workers: see
    /// [`ServerBuilder::workers`](crate::ServerBuilder::workers)).
    ///
    /// What `caller` may do decides: a run on a thread the rules hide is refused as on a missing
    /// one (404, whether or not the request asks to create it); the run's metadata, and that of
    /// a thread it creates, is as the rules stamp it; its `config.configurable` names its user.
    pub(crate) async fn create_run(
        &self,
        caller: &Caller,
        thread: Option<&str>,
        mut kwargs: Value,
    ) -> Result<Created, ApiError> {
        if let Some(user) = caller.user() {
            user_configurable(&mut kwargs, user);
        }
        let create: RunCreate = serde_json::from_value(kwargs.clone()).map_err(|e| {
            ApiError::unprocessable(format!("the body of a run request is not valid: {e}"))
        })?;
        let assistant_id = create
            .assistant_id
            .as_deref()
            .ok_or_else(|| ApiError::unprocessable("a run request needs an `assistant_id`"))?;
        let served = self.assistant_for(caller, assistant_id, Action::Read)?.ok_or_else(|| {
            let graphs: Vec<&str> = self.assistants.iter().map(|a| a.graph_id.as_str()).collect();
            ApiError::unprocessable(format!(
                "Invalid assistant: '{assistant_id}'. Must be either:\n- A valid assistant UUID, or\n- One of the registered graphs: {}",
                graphs.join(", ")
            ))
        })?;
        let modes = Mode::parse(create.stream_mode.as_ref()).map_err(ApiError::unprocessable)?;
        timeout_of(&kwargs).map_err(|why| {
            ApiError::unprocessable(format!("the run request is not valid: {why}"))
        })?;
        let options = options_of(&create).map_err(|why| {
            ApiError::unprocessable(format!("the run request is not valid: {why}"))
        })?;
        let known = served.assistant.nodes();
        if let Some(name) = options
            .interrupt_before
            .iter()
            .chain(&options.interrupt_after)
            .chain(options.goto.iter().flatten())
            .find(|n| *n != "*" && !known.contains(n))
        {
            return Err(ApiError::unprocessable(format!(
                "the run request names node `{name}`, which graph `{}` does not have (its nodes: {})",
                served.graph_id,
                known.join(", ")
            )));
        }
        let run_id = uuid::Uuid::new_v4().to_string();
        let stateless = thread.is_none();
        let mut metadata = create.metadata.clone().unwrap_or_default();
        let filter = caller.decide(Resource::Threads, Action::CreateRun, thread, &mut metadata)?;
        let mut record = match thread {
            Some(id) => match self.records.thread(id).await? {
                Some(record) if filter.as_ref().is_none_or(|f| f.matches(&record.metadata)) => {
                    record
                }
                // Another user's: as if it were missing, but not to be created.
                Some(_) => return Err(ApiError::not_found(NO_RUN_THREAD)),
                None if create.if_not_exists.as_deref() == Some("create") => {
                    agentstate_store::check_id(id).map_err(|e| {
                        ApiError::unprocessable(format!("thread id `{id}` is not valid: {e}"))
                    })?;
                    new_thread(id, &metadata)
                }
                None => return Err(ApiError::not_found(NO_RUN_THREAD)),
            },
            None => new_thread(&uuid::Uuid::new_v4().to_string(), &metadata),
        };
        let metadata = Some(metadata);
        let thread_id = record.thread_id.clone();
        // Any graph runs on any thread, as on LangGraph's server: its state is read as the graph's
        // (the fields of both of the same names; see the store's schema evolution).
        if let Some(at) = checkpoints::checkpoint_of(&kwargs) {
            let found = match record.graph_id {
                Some(_) => checkpoints::list(&*served.assistant, &record)
                    .await?
                    .iter()
                    .any(|l| l.point.id == at),
                None => false,
            };
            if !found {
                return Err(missing_checkpoint(&thread_id, at));
            }
        }
        let start = start_of(&create);
        // LangGraph's servers enqueue a run on a busy thread unless told otherwise.
        let strategy = create.multitask_strategy.as_deref().unwrap_or("enqueue");
        if self.queued && !stateless {
            let run = queue_run(self, record, &run_id, served, strategy, kwargs, metadata).await?;
            return Ok(Created {
                run,
                live: None,
                stateless,
            });
        }
        let live = Live::new(&run_id, &thread_id);
        self.runs.register(&live, |running| {
            if let Some(stop) = multitask(strategy, !running.is_empty())? {
                running.iter().for_each(|l| l.stop(stop));
            }
            Ok::<_, ApiError>(())
        })?;
        record.graph_id = Some(served.graph_id.clone());
        mark_thread(&mut record, served);
        let mut run = RunRecord::new(&run_id, &thread_id, &served.graph_id, kwargs, now_ms());
        run.metadata = run_metadata(metadata, &served.assistant_id, &served.graph_id);
        // Two rows of their own, written at once (on PostgreSQL, on two connections: one round
        // trip less before the stream's first event).
        let stored = tokio::try_join!(
            self.records.put(Record::Thread(record)),
            self.records.put(Record::Run(run.clone())),
        );
        if let Err(error) = stored {
            self.runs.abandon(&live);
            return Err(error.into());
        }
        let job = Job {
            options,
            modes,
            stateless,
            ..self.job(served, &live, run.clone(), start)
        };
        job.spawn();
        Ok(Created {
            run,
            live: Some(live),
            stateless,
        })
    }

    /// The id of a run in progress on thread `id`: in this process, or (with workers) a queued
    /// run not yet ended, on any process.
    pub(crate) async fn running_on(&self, id: &str) -> Result<Option<String>, ApiError> {
        // Queued runs: the database is the one answer (a run's final record and its queue row
        // are written at once; this process's registry lets it go a moment later).
        if !self.queued {
            return Ok(self.runs.on_thread(id));
        }
        let runs = self.records.runs(id).await?;
        Ok(runs
            .into_iter()
            .find(|r| !r.status.is_final())
            .map(|r| r.run_id))
    }

    /// Deletes thread `id`, its runs (stopped first, wherever they are carried out), their
    /// events, its state and its branches.
    pub(crate) async fn delete_thread(&self, id: &str) -> Result<(), ApiError> {
        let thread = self.thread_record(id).await?;
        for run in self.records.runs(id).await? {
            // Queued: stopped by its worker, wherever it is, before its thread goes.
            if self.queued && !run.status.is_final() {
                let rid = run.run_id.clone();
                if cancel_queued(self, run.clone(), false).await? {
                    final_record(&*self.records, self.follow(&rid)).await?;
                }
            }
            if let Some(live) = self.runs.get(&run.run_id) {
                live.cancel();
                live.result().await;
            }
            self.records.delete_events(&run.run_id).await?;
            self.records.delete(RUN, &run.run_id).await?;
        }
        branches::delete_all(&*self.records, &thread).await;
        self.records.delete_state(id).await?;
        self.records.delete(THREAD, id).await?;
        Ok(())
    }

    /// Cancels run `run_id` of thread `thread` (`rollback`: and removes what it did; `wait`:
    /// once it ended).
    pub(crate) async fn cancel(
        &self,
        thread: &str,
        run_id: &str,
        why: Stop,
        wait: bool,
    ) -> Result<Cancelled, ApiError> {
        let Ok(run) = self.run_record(thread, run_id).await else {
            return Err(ApiError::not_found("No runs found to cancel."));
        };
        // Queued: marked cancelled in the queue, its worker (here or elsewhere) told by
        // `NOTIFY` (a run cancelled only here could be swept back to the queue).
        if self.queued
            && !run.status.is_final()
            && cancel_queued(self, run, why == Stop::Rollback).await?
        {
            if wait {
                final_record(&*self.records, self.follow(run_id)).await?;
                return Ok(Cancelled::Done);
            }
            return Ok(Cancelled::Asked);
        }
        let Some(live) = self.runs.get(run_id) else {
            return Err(ApiError::not_found(
                "No matching runs to cancel. Please verify the thread ID and run IDs are correct, and the runs haven't been deleted or completed.",
            ));
        };
        live.stop(why);
        if wait {
            live.result().await;
            return Ok(Cancelled::Done);
        }
        Ok(Cancelled::Asked)
    }

    /// Cancels run `run` (not in progress here: queued, or carried out by a worker) if it has
    /// not ended: what a client's disconnect asks (`on_disconnect: "cancel"`).
    pub(crate) async fn cancel_if_open(&self, run_id: &str) {
        if let Ok(Some(run)) = self.records.run(run_id).await {
            if !run.status.is_final() {
                let _ = cancel_queued(self, run, false).await;
            }
        }
    }

    /// Deletes run `run_id` of thread `thread` and its events; refused while it is in
    /// progress.
    pub(crate) async fn delete_run(&self, thread: &str, run_id: &str) -> Result<(), ApiError> {
        let run = self.run_record(thread, run_id).await?;
        if self.runs.get(run_id).is_some() || (self.queued && !run.status.is_final()) {
            return Err(ApiError::conflict(format!(
                "run `{run_id}` of thread `{thread}` is in progress; cancel it before deleting it"
            )));
        }
        self.records.delete_events(run_id).await?;
        self.records.delete(RUN, run_id).await?;
        Ok(())
    }

    /// What a join of run `run_id` of thread `thread` answers: its result once it ended (its
    /// thread's values, with its questions; or its error).
    pub(crate) async fn join(&self, thread: &str, run_id: &str) -> Result<Value, ApiError> {
        if self.run_record(thread, run_id).await.is_err() {
            // LangGraph's server answers a join of a run it does not have (or deleted, as a
            // rollback does) with the error as the run's result.
            return Ok(
                json!({"__error__": {"error": "HTTPException", "message": "404: Run not found"}}),
            );
        }
        if let Some(live) = self.runs.get(run_id) {
            return Ok(live.result().await);
        }
        self.ended(thread, run_id).await
    }

    /// What a join answers for run `run_id` of thread `thread` (carried out by another
    /// process, or ended), once it ended.
    pub(crate) async fn ended(&self, thread: &str, run_id: &str) -> Result<Value, ApiError> {
        let run = final_record(&*self.records, self.follow(run_id))
            .await?
            .ok_or_else(|| ApiError::not_found("Not Found"))?;
        if let Some(failure) = run.error {
            return Ok(json!({"__error__": failure}));
        }
        let thread = self.thread_record(thread).await?;
        Ok(match self.snapshot(&thread, None).await? {
            Some(s) if s.interrupts.is_empty() => s.values,
            Some(s) => with_interrupts(&s.values, &s.interrupts),
            None => json!({}),
        })
    }

    /// Ends the runs of the records that are pending or running here but not in progress in this
    /// process (see [`Server::recover`](crate::Server::recover)).
    pub(crate) async fn recover(&self) -> Result<usize, ApiError> {
        // Only the runs not ended, picked by the database, and their threads.
        let mut by_thread: std::collections::BTreeMap<String, Vec<RunRecord>> =
            std::collections::BTreeMap::new();
        for run in self.records.open_runs().await? {
            if self.runs.get(&run.run_id).is_none() {
                by_thread
                    .entry(run.thread_id.clone())
                    .or_default()
                    .push(run);
            }
        }
        let mut ended = 0;
        for (thread_id, orphans) in by_thread {
            for mut run in orphans {
                let was = if run.status == RunStatus::Pending {
                    "pending"
                } else {
                    "running"
                };
                run.error = Some(RunFailure {
                    error: "run_orphaned".to_owned(),
                    message: format!(
                        "the server stopped while run `{}` of thread `{}` was {was}; a run without `input` continues the thread",
                        run.run_id, run.thread_id
                    ),
                });
                run.status = RunStatus::Error;
                run.updated_ms = now_ms();
                self.records.put(Record::Run(run)).await?;
                ended += 1;
            }
            let Some(mut thread) = self.records.thread(&thread_id).await? else {
                continue;
            };
            let cut_short = match thread.graph_id.as_deref().and_then(|g| self.assistant(g)) {
                Some(served) => match served.assistant.snapshot(&thread.thread_id, None).await {
                    Ok(snapshot) => !snapshot.next.is_empty(),
                    Err(_) => false,
                },
                None => false,
            };
            thread.status = if cut_short {
                ThreadStatus::Interrupted
            } else {
                ThreadStatus::Idle
            };
            thread.updated_ms = now_ms();
            self.records.put(Record::Thread(thread)).await?;
        }
        Ok(ended)
    }
}

/// A run request (LangGraph's `RunCreate`): the fields this server reads; the others are kept
/// in the run's `kwargs`.
#[derive(Deserialize, Default, utoipa::ToSchema)]
#[serde(default)]
pub(crate) struct RunCreate {
    /// The assistant to run: its id or its graph id.
    #[schema(required = true)]
    assistant_id: Option<String>,
    /// The run's input: an update of the state (`null`: the run continues the thread's last).
    input: Option<Value>,
    /// What to resume the thread's interrupts with, an update, where to go.
    command: Option<Command>,
    /// The run's metadata.
    metadata: Option<Map<String, Value>>,
    /// What to stream: a mode (`values`, the default; `updates`, `messages`, `messages-tuple`,
    /// `custom`, `tasks`, `checkpoints`, `debug`, `events`) or a list of them.
    stream_mode: Option<Value>,
    /// What a run on a busy thread does: `enqueue` (the default), `reject`, `interrupt` or
    /// `rollback`.
    multitask_strategy: Option<String>,
    /// `create`: a missing thread is created (`reject`, the default: 404).
    if_not_exists: Option<String>,
    /// The checkpoint the run starts from.
    checkpoint_id: Option<String>,
    /// How long the run may run once started, in seconds (this server's; by default its
    /// assistant's, or the server's: [`ServerBuilder::run_timeout`](crate::ServerBuilder::run_timeout)):
    /// past it, it ends `timeout`.
    #[schema(value_type = Option<f64>)]
    #[allow(dead_code)]
    timeout: Option<Value>,
    /// The checkpoint the run starts from, as its config (`{"checkpoint_id": ...}`).
    checkpoint: Option<Value>,
    /// Nodes to stop before (names, or `*`).
    interrupt_before: Option<Value>,
    /// Nodes to stop after (names, or `*`).
    interrupt_after: Option<Value>,
    // Read from the run's `kwargs` where they take effect; here for the spec (any JSON reads,
    // so a request is accepted as before).
    /// The run's config: its `configurable` is added to the run's own, shown in its config and
    /// its checkpoints' metadata (the graph's nodes do not read it).
    #[schema(value_type = Option<Object>)]
    #[allow(dead_code)]
    config: Option<Value>,
    /// The run's context, shown in its checkpoints' metadata.
    #[schema(value_type = Option<Object>)]
    #[allow(dead_code)]
    context: Option<Value>,
    /// Accepted: a subgraph's events are streamed as the graph's own.
    #[schema(value_type = Option<bool>)]
    #[allow(dead_code)]
    stream_subgraphs: Option<Value>,
    /// Whether the run's events are numbered (their SSE `id`) and kept, to be streamed again
    /// after it ended (`GET .../runs/{run_id}/stream` with `Last-Event-ID`).
    #[schema(value_type = Option<bool>)]
    #[allow(dead_code)]
    stream_resumable: Option<Value>,
    /// `cancel`: the run is cancelled when the client that streams or waits for it goes away
    /// (`continue`, the default, lets it run).
    #[schema(value_type = Option<String>)]
    #[allow(dead_code)]
    on_disconnect: Option<Value>,
    /// The run waits this many seconds (`pending`) before it starts.
    #[schema(value_type = Option<f64>)]
    #[allow(dead_code)]
    after_seconds: Option<Value>,
    /// Shown in the run's metadata (`async` by default); every step is committed either way.
    #[schema(value_type = Option<String>)]
    #[allow(dead_code)]
    durability: Option<Value>,
}

/// A run's command (LangGraph's `Command`). `Serialize`: the spec shows its default (`null`).
#[derive(Serialize, Deserialize, Default, utoipa::ToSchema)]
#[serde(default)]
pub(crate) struct Command {
    /// The answers to the thread's interrupts.
    resume: Option<Value>,
    /// An update merged as the run's input.
    update: Option<Value>,
    /// The node (or nodes) the run's first step goes to.
    goto: Option<Value>,
}

/// Node names: a name, `*`, or a list of names (`interrupt_before`, `goto`).
fn node_names(value: &Value, what: &str) -> Result<Vec<String>, String> {
    let one = |v: &Value| {
        match v {
        Value::String(name) => Ok(name.clone()),
        Value::Object(send) if send.contains_key("node") => Err(format!(
            "`{what}` sends to node {} with an input of its own (a `Send`); this server goes to nodes by name only",
            send["node"]
        )),
        other => Err(format!("`{what}` names nodes by their names, not {other}")),
    }
    };
    match value {
        Value::Null => Ok(Vec::new()),
        Value::Array(list) => list.iter().map(one).collect(),
        single => Ok(vec![one(single)?]),
    }
}

/// What a run request asks beyond its start: breakpoints, `command.update` and `goto`.
/// A run request's own deadline (`timeout`, in seconds), if it gives one.
pub(crate) fn timeout_of(kwargs: &Value) -> Result<Option<Duration>, String> {
    match kwargs.get("timeout") {
        None | Some(Value::Null) => Ok(None),
        Some(seconds) => seconds
            .as_f64()
            .filter(|s| s.is_finite() && *s > 0.0)
            .and_then(|s| Duration::try_from_secs_f64(s).ok())
            .map(Some)
            .ok_or_else(|| {
                format!("`timeout` is {seconds}, not a number of seconds greater than 0")
            }),
    }
}

fn options_of(create: &RunCreate) -> Result<RunOptions, String> {
    let mut options = RunOptions::new();
    if let Some(before) = &create.interrupt_before {
        options.interrupt_before = node_names(before, "interrupt_before")?;
    }
    if let Some(after) = &create.interrupt_after {
        options.interrupt_after = node_names(after, "interrupt_after")?;
    }
    let checkpoint = match (&create.checkpoint_id, &create.checkpoint) {
        (Some(id), _) => Some(id.clone()),
        (None, Some(checkpoint)) => checkpoint["checkpoint_id"].as_str().map(str::to_owned),
        (None, None) => None,
    };
    if let Some(id) = checkpoint {
        let at = CheckpointId::parse(&id).ok_or_else(|| {
            format!(
                "checkpoint `{id}` is not one of the thread's checkpoint ids (`5`, or `5-input` for a run's input)"
            )
        })?;
        options.checkpoint = Some(at.version());
    }
    if let Some(command) = &create.command {
        options.update = command.update.clone().filter(|u| !u.is_null());
        if let Some(goto) = command.goto.as_ref().filter(|g| !g.is_null()) {
            options.goto = Some(node_names(goto, "command.goto")?);
        }
    }
    Ok(options)
}

/// How a run goes, from its request.
pub(crate) struct Plan {
    pub(crate) start: Start,
    pub(crate) options: RunOptions,
    pub(crate) modes: Vec<Mode>,
}

/// What a queued run starts with and streams, from its request (`kwargs`): what a worker
/// reads back (the request was checked when the run was created).
pub(crate) fn plan(kwargs: &Value) -> Result<Plan, String> {
    let create: RunCreate = serde_json::from_value(kwargs.clone())
        .map_err(|e| format!("its request is not valid: {e}"))?;
    Ok(Plan {
        start: start_of(&create),
        options: options_of(&create)?,
        modes: Mode::parse(create.stream_mode.as_ref())?,
    })
}

/// How a run begins: answering interrupts (`command.resume`), or from its `input` (a
/// `command`'s `update` and `goto` take the place of the input).
fn start_of(create: &RunCreate) -> Start {
    match create.command.as_ref().and_then(|c| c.resume.clone()) {
        Some(resume) => Start::Resume(resume),
        None => Start::Input(create.input.clone()),
    }
}

/// Thread `thread`'s record as a run of `served` leaves it: its metadata names the assistant
/// and the graph (as LangGraph's server marks a thread a run is created on).
fn mark_thread(thread: &mut ThreadRecord, served: &Served) {
    let metadata = &mut thread.metadata;
    metadata.insert("graph_id".into(), Value::from(served.graph_id.as_str()));
    metadata.insert(
        "assistant_id".into(),
        Value::from(served.assistant_id.as_str()),
    );
    thread.updated_ms = now_ms();
}

/// Writes run `run_id` (pending) and its thread's record, and queues it, after `strategy` said
/// what to do with the thread's runs not yet ended (on any server).
async fn queue_run(
    shared: &Service,
    mut thread: ThreadRecord,
    run_id: &str,
    served: &Served,
    strategy: &str,
    kwargs: Value,
    metadata: Option<Map<String, Value>>,
) -> Result<RunRecord, ApiError> {
    let graph_id = served.graph_id.as_str();
    let thread_id = thread.thread_id.clone();
    // `interrupt` and `rollback` stop the thread's open runs; `enqueue` queues behind them,
    // and `reject` is answered by the queue itself, below.
    if let Some(stop) = multitask(strategy, false)? {
        let open = shared.records.runs(&thread_id).await?;
        for run in open.into_iter().filter(|r| !r.status.is_final()) {
            cancel_queued(shared, run, stop == Stop::Rollback).await?;
        }
    }
    thread.graph_id = Some(graph_id.to_owned());
    mark_thread(&mut thread, served);
    let mut run = RunRecord::new(run_id, &thread_id, graph_id, kwargs, now_ms());
    run.metadata = run_metadata(metadata, &served.assistant_id, graph_id);
    // Its stream's first event written with its records and queued with them, in one
    // transaction: a stream of it has its `metadata` at once, as a run carried out here has
    // (its worker's events follow). `reject`: queued, and written, only if the thread has no
    // run queued, whichever server another run of the thread came through meanwhile.
    let metadata = Record::Event(EventRecord {
        run_id: run_id.to_owned(),
        seq: 0,
        event: "metadata".to_owned(),
        data: metadata_json(run_id, 1),
    });
    let records = vec![
        Record::Thread(thread).into(),
        Record::Run(run.clone()).into(),
        metadata.into(),
    ];
    let alone = strategy == "reject";
    match shared
        .records
        .enqueue(run_id, &thread_id, alone, records)
        .await
    {
        Ok(true) => Ok(run),
        Ok(false) => Err(ApiError::conflict(BUSY)),
        Err(error) => Err(error.into()),
    }
}

/// Cancels queued run `run` (`rollback`: and removes what it did): a pending one ends
/// `interrupted` at once (rolled back: is deleted); a running one is stopped by its worker,
/// told by `NOTIFY` (the notice says whether to roll it back: its record, which its worker
/// writes, is not written here). False if it had already ended.
async fn cancel_queued(
    shared: &Service,
    mut run: RunRecord,
    rollback: bool,
) -> Result<bool, ApiError> {
    match shared.records.cancel_queued(&run.run_id, rollback).await? {
        Some(true) => Ok(true),
        Some(false) if rollback => {
            shared.records.delete_events(&run.run_id).await?;
            shared.records.delete(RUN, &run.run_id).await?;
            Ok(true)
        }
        Some(false) => {
            run.status = RunStatus::Interrupted;
            run.updated_ms = now_ms();
            shared.records.put(Record::Run(run)).await?;
            Ok(true)
        }
        None => Ok(false),
    }
}

/// The refusal of a checkpoint thread `thread` does not have.
pub(crate) fn missing_checkpoint(thread: &str, at: CheckpointId) -> ApiError {
    ApiError::not_found(format!(
        "checkpoint `{at}` of thread `{thread}` does not exist"
    ))
}

/// A new thread record for a run request's thread, with the run's `metadata` (as LangGraph's
/// server gives a thread a run creates its run's metadata).
pub(crate) fn new_thread(id: &str, metadata: &Map<String, Value>) -> ThreadRecord {
    ThreadRecord::new(id, metadata.clone(), now_ms())
}

/// The refusal of a run on a thread that is missing (or hidden), as LangGraph's server says it.
pub(crate) const NO_RUN_THREAD: &str = "Thread or assistant not found.";

/// The refusal of thread `id`, missing (or hidden), as LangGraph's server says it.
pub(crate) fn thread_missing(id: &str) -> ApiError {
    ApiError::not_found(format!("Thread with ID {id} not found"))
}

/// Run request `kwargs` with its user in its `config.configurable`, as LangGraph's server puts
/// them there (`langgraph_auth_user`: the user's JSON, `langgraph_auth_user_id` and `user_id`:
/// its identity, `langgraph_auth_permissions`: its permissions), in place of any the request
/// sent (a `config` or `configurable` that is no object is replaced).
pub(crate) fn user_configurable(kwargs: &mut Value, user: &Identity) {
    let configurable = kwargs
        .as_object_mut()
        .and_then(|kwargs| object_at(kwargs, "config"))
        .and_then(|config| object_at(config, "configurable"));
    let Some(configurable) = configurable else {
        return;
    };
    let identity = Value::from(user.identity.as_str());
    configurable.insert("langgraph_auth_user".into(), user.to_json());
    configurable.insert("langgraph_auth_user_id".into(), identity.clone());
    let permissions = Value::from(user.permissions.clone());
    configurable.insert("langgraph_auth_permissions".into(), permissions);
    configurable.insert("user_id".into(), identity);
}

/// `map`'s object under `key`, made an empty one if it is missing or no object.
fn object_at<'a>(map: &'a mut Map<String, Value>, key: &str) -> Option<&'a mut Map<String, Value>> {
    if !map.get(key).is_some_and(Value::is_object) {
        map.insert(key.to_owned(), Value::Object(Map::new()));
    }
    map.get_mut(key).and_then(Value::as_object_mut)
}
