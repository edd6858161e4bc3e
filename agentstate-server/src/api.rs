//! The routes of the LangGraph Agent Server API and their handlers.

use crate::assistant::{RunOptions, Snapshot, Start};
use crate::branches;
use crate::checkpoints::{
    self, checkpoint_json, empty_state, interrupt_json, with_interrupts, CheckpointId, Checkpoints,
};
use crate::error::ApiError;
use crate::metadata::{run_json, run_metadata, task_id};
use crate::record::{iso8601, now_ms, Record, RunRecord, RunStatus, ThreadRecord, ThreadStatus};
use crate::runs::{final_record, new_thread, stored_frames, Frame, Job, Live, Mode, Stop};
use crate::server::{Served, Shared};
use agentstate_graph::Interrupt;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use futures_util::StreamExt;
use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::{json, Map, Value};
use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::Arc;

type Api = State<Arc<Shared>>;
type Answer = Result<Response, ApiError>;

/// Every route.
pub(crate) fn routes() -> Router<Arc<Shared>> {
    Router::new()
        .route("/ok", get(|| async { Json(json!({"ok": true})) }))
        .route("/info", get(info))
        .route("/assistants/search", post(search_assistants))
        .route("/assistants/{id}", get(get_assistant))
        .route("/assistants/{id}/graph", get(assistant_graph))
        .route("/assistants/{id}/schemas", get(assistant_schemas))
        .route("/threads", post(create_thread))
        .route("/threads/search", post(search_threads))
        .route("/threads/count", post(count_threads))
        .route("/runs/crons", axum::routing::any(not_served))
        .route("/runs/crons/{*rest}", axum::routing::any(not_served))
        .route("/threads/{id}/runs/crons", axum::routing::any(not_served))
        .route("/store/{*rest}", axum::routing::any(not_served))
        .route(
            "/threads/{id}",
            get(get_thread).patch(patch_thread).delete(delete_thread),
        )
        .route("/threads/{id}/copy", post(copy_thread))
        .route("/threads/{id}/state", get(thread_state).post(update_state))
        .route("/threads/{id}/state/{checkpoint}", get(thread_state_at))
        .route("/threads/{id}/history", get(history_get).post(history_post))
        .route("/threads/{id}/runs", get(list_runs).post(create_background))
        .route("/threads/{id}/runs/stream", post(create_stream))
        .route("/threads/{id}/runs/wait", post(create_wait))
        .route("/threads/{id}/runs/{rid}", get(get_run).delete(delete_run))
        .route("/threads/{id}/runs/{rid}/join", get(join_run))
        .route("/threads/{id}/runs/{rid}/stream", get(join_stream))
        .route("/threads/{id}/runs/{rid}/cancel", post(cancel_run))
        .route("/runs", post(stateless_background))
        .route("/runs/stream", post(stateless_stream))
        .route("/runs/wait", post(stateless_wait))
        .merge(crate::agui::routes())
        .fallback(|| async { ApiError::not_found("Not Found") })
}

/// A JSON body as `T`; an empty body is `T::default()`.
fn body<T: DeserializeOwned + Default>(bytes: &Bytes, what: &str) -> Result<T, ApiError> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(T::default());
    }
    serde_json::from_slice(bytes)
        .map_err(|e| ApiError::unprocessable(format!("the body of {what} is not valid: {e}")))
}

fn ok(value: Value) -> Answer {
    Ok(Json(value).into_response())
}

async fn info() -> Json<Value> {
    Json(json!({
        "version": env!("CARGO_PKG_VERSION"),
        "langgraph_js_version": null,
        "flags": {"assistants": true, "crons": false, "langsmith": false, "langsmith_tracing_replicas": false},
    }))
}

// ---- assistants ----

fn assistant_json(served: &Served) -> Value {
    let epoch = iso8601(0);
    json!({
        "assistant_id": served.assistant_id,
        "graph_id": served.graph_id,
        "name": served.graph_id,
        "description": null,
        "config": {},
        "context": {},
        "metadata": {"created_by": "system"},
        "version": 1,
        "created_at": epoch,
        "updated_at": epoch,
    })
}

fn served<'a>(shared: &'a Shared, id: &str) -> Result<&'a Served, ApiError> {
    shared
        .assistant(id)
        .ok_or_else(|| ApiError::not_found(format!("assistant `{id}` does not exist")))
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct AssistantSearch {
    graph_id: Option<String>,
    limit: Option<usize>,
    offset: Option<usize>,
}

async fn search_assistants(State(shared): Api, bytes: Bytes) -> Answer {
    let query: AssistantSearch = body(&bytes, "an assistant search")?;
    // The newest first, as LangGraph's server lists the assistants it made for its graphs, in
    // their order: the last served first.
    let found: Vec<Value> = shared
        .assistants
        .iter()
        .rev()
        .filter(|a| query.graph_id.as_ref().is_none_or(|g| *g == a.graph_id))
        .skip(query.offset.unwrap_or(0))
        .take(query.limit.unwrap_or(10))
        .map(assistant_json)
        .collect();
    ok(Value::from(found))
}

async fn get_assistant(State(shared): Api, Path(id): Path<String>) -> Answer {
    match shared.assistant(&id) {
        Some(served) => ok(assistant_json(served)),
        // As LangGraph's server answers it.
        None => Err(ApiError::not_found("Not Found")),
    }
}

/// The graph as LangGraph draws it: its nodes between `__start__` and `__end__`, and every
/// edge, sorted (a conditional one marked so).
async fn assistant_graph(State(shared): Api, Path(id): Path<String>) -> Answer {
    let served = served(&shared, &id)?;
    let node = |id: &str| json!({"id": id, "type": "runnable", "data": {"name": id}});
    let mut nodes = vec![node("__start__")];
    nodes.extend(served.assistant.nodes().iter().map(|n| node(n)));
    nodes.push(json!({"id": "__end__"}));
    let mut edges: Vec<(String, String, bool)> = served
        .assistant
        .edges()
        .into_iter()
        .map(|(from, to, conditional)| {
            (
                from,
                to.unwrap_or_else(|| "__end__".to_owned()),
                conditional,
            )
        })
        .collect();
    edges.push(("__start__".to_owned(), served.assistant.entry(), false));
    edges.sort();
    let edges: Vec<Value> = edges
        .into_iter()
        .map(|(source, target, conditional)| match conditional {
            true => json!({"source": source, "target": target, "conditional": true}),
            false => json!({"source": source, "target": target}),
        })
        .collect();
    ok(json!({"nodes": nodes, "edges": edges}))
}

async fn assistant_schemas(State(shared): Api, Path(id): Path<String>) -> Answer {
    if uuid::Uuid::parse_str(&id).is_err() {
        // LangGraph's server reads schemas by assistant id only.
        return Err(ApiError::unprocessable(
            "Invalid assistant ID: must be a UUID",
        ));
    }
    let served = served(&shared, &id)?;
    let state = served.assistant.state_schema();
    ok(json!({
        "graph_id": served.graph_id,
        "input_schema": state,
        "output_schema": state,
        "state_schema": state,
        "config_schema": null,
        "context_schema": null,
    }))
}

// ---- threads ----

async fn thread_record(shared: &Shared, id: &str) -> Result<ThreadRecord, ApiError> {
    shared
        .records
        .thread(id)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("Thread with ID {id} not found")))
}

/// Thread `thread`'s state now (`None`: no run made it yet).
async fn snapshot(
    shared: &Shared,
    thread: &ThreadRecord,
    at: Option<u64>,
) -> Result<Option<Snapshot>, ApiError> {
    let Some(graph) = &thread.graph_id else {
        return Ok(None);
    };
    let served = shared.graph(graph)?;
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

/// The interrupts by task id.
fn interrupts_by_task(interrupts: &[Interrupt]) -> Map<String, Value> {
    let mut map = Map::new();
    for i in interrupts {
        let entry = map
            .entry(task_id(&i.step_node, i.step))
            .or_insert_with(|| Value::Array(Vec::new()));
        if let Value::Array(list) = entry {
            list.push(interrupt_json(i));
        }
    }
    map
}

/// A thread as LangGraph shows it: once a run made its state, with its values, its
/// questions by task, its config and its last run's error.
async fn thread_json(shared: &Shared, thread: &ThreadRecord) -> Result<Value, ApiError> {
    let mut json = json!({
        "thread_id": thread.thread_id,
        "created_at": iso8601(thread.created_ms),
        "updated_at": iso8601(thread.updated_ms),
        "state_updated_at": iso8601(thread.updated_ms),
        "metadata": thread.metadata,
        "status": thread.status,
        "values": null,
        "config": {},
    });
    if let Some(s) = snapshot(shared, thread, None).await? {
        json["values"] = s.values;
        json["interrupts"] = Value::Object(interrupts_by_task(&s.interrupts));
        json["config"] = json!({"configurable": {}});
        json["error"] = serde_json::to_value(&thread.error).unwrap_or(Value::Null);
    }
    Ok(json)
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct ThreadCreate {
    thread_id: Option<String>,
    metadata: Option<Map<String, Value>>,
    if_exists: Option<String>,
}

async fn create_thread(State(shared): Api, bytes: Bytes) -> Answer {
    let create: ThreadCreate = body(&bytes, "a thread creation")?;
    let id = create
        .thread_id
        .unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
    agentstate_store::check_id(&id)
        .map_err(|e| ApiError::unprocessable(format!("thread id `{id}` is not valid: {e}")))?;
    if let Some(existing) = shared.records.thread(&id).await? {
        return match create.if_exists.as_deref() {
            Some("do_nothing") => ok(thread_json(&shared, &existing).await?),
            _ => Err(ApiError::conflict(format!(
                "Thread with ID {id} already exists"
            ))),
        };
    }
    let thread = ThreadRecord::new(&id, create.metadata.unwrap_or_default(), now_ms());
    shared.records.put(Record::Thread(thread.clone())).await?;
    ok(thread_json(&shared, &thread).await?)
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct ThreadSearch {
    metadata: Option<Map<String, Value>>,
    values: Option<Map<String, Value>>,
    status: Option<ThreadStatus>,
    ids: Option<Vec<String>>,
    limit: Option<usize>,
    offset: Option<usize>,
    sort_by: Option<String>,
    sort_order: Option<String>,
}

impl ThreadSearch {
    /// The threads it finds, in its order (LangGraph's: the last updated first), before its
    /// offset and limit; those filtered by values read their state.
    async fn find(&self, shared: &Shared) -> Result<Vec<ThreadRecord>, ApiError> {
        let mut threads = shared.records.threads().await?;
        threads.retain(|t| {
            self.status.is_none_or(|s| s == t.status)
                && self
                    .ids
                    .as_ref()
                    .is_none_or(|ids| ids.contains(&t.thread_id))
                && self
                    .metadata
                    .as_ref()
                    .is_none_or(|m| m.iter().all(|(k, v)| t.metadata.get(k) == Some(v)))
        });
        if let Some(values) = self.values.as_ref().filter(|v| !v.is_empty()) {
            let mut kept = Vec::new();
            for thread in threads {
                let state = snapshot(shared, &thread, None).await?;
                let holds =
                    state.is_some_and(|s| values.iter().all(|(k, v)| s.values.get(k) == Some(v)));
                if holds {
                    kept.push(thread);
                }
            }
            threads = kept;
        }
        let key = self.sort_by.as_deref().unwrap_or("updated_at");
        let by = |t: &ThreadRecord| -> (i64, String) {
            match key {
                "created_at" => (t.created_ms, t.thread_id.clone()),
                "thread_id" => (0, t.thread_id.clone()),
                "status" => (0, format!("{:?}", t.status).to_lowercase()),
                _ => (t.updated_ms, t.thread_id.clone()),
            }
        };
        match key {
            "thread_id" | "status" | "created_at" | "updated_at" | "state_updated_at" => {}
            other => {
                return Err(ApiError::unprocessable(format!(
                    "a thread search cannot sort by `{other}` (it sorts by `thread_id`, `status`, `created_at`, `updated_at` or `state_updated_at`)"
                )))
            }
        }
        threads.sort_by_key(by);
        match self.sort_order.as_deref() {
            None | Some("desc") => threads.reverse(),
            Some("asc") => {}
            Some(other) => {
                return Err(ApiError::unprocessable(format!(
                    "a thread search's sort order is `asc` or `desc`, not `{other}`"
                )))
            }
        }
        Ok(threads)
    }
}

async fn search_threads(State(shared): Api, bytes: Bytes) -> Answer {
    let search: ThreadSearch = body(&bytes, "a thread search")?;
    let threads = search.find(&shared).await?;
    let mut found = Vec::new();
    for thread in threads
        .iter()
        .skip(search.offset.unwrap_or(0))
        .take(search.limit.unwrap_or(10))
    {
        found.push(thread_json(&shared, thread).await?);
    }
    ok(Value::from(found))
}

/// How many threads a search finds (`POST /threads/count`).
async fn count_threads(State(shared): Api, bytes: Bytes) -> Answer {
    let search: ThreadSearch = body(&bytes, "a thread count")?;
    ok(Value::from(search.find(&shared).await?.len()))
}

/// The routes of what this server does not serve yet: LangGraph's crons and its store API.
async fn not_served(uri: axum::http::Uri) -> ApiError {
    let what = if uri.path().starts_with("/store") {
        "the store API (long-term memory)"
    } else {
        "crons"
    };
    ApiError::unprocessable(format!(
        "`{}` is not served: this server does not serve {what} yet",
        uri.path()
    ))
}

async fn get_thread(State(shared): Api, Path(id): Path<String>) -> Answer {
    let thread = thread_record(&shared, &id).await?;
    ok(thread_json(&shared, &thread).await?)
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct ThreadPatch {
    metadata: Option<Map<String, Value>>,
}

async fn patch_thread(State(shared): Api, Path(id): Path<String>, bytes: Bytes) -> Answer {
    let patch: ThreadPatch = body(&bytes, &format!("the patch of thread `{id}`"))?;
    let mut thread = thread_record(&shared, &id).await?;
    thread.metadata.extend(patch.metadata.unwrap_or_default());
    thread.updated_ms = now_ms();
    shared.records.put(Record::Thread(thread.clone())).await?;
    ok(thread_json(&shared, &thread).await?)
}

/// The id of a run in progress on thread `id`: in this process, or (with workers) a queued run
/// not yet ended, on any process.
async fn running_on(shared: &Shared, id: &str) -> Result<Option<String>, ApiError> {
    if let Some(running) = shared.runs.on_thread(id) {
        return Ok(Some(running));
    }
    if !shared.queued {
        return Ok(None);
    }
    let runs = shared.records.runs(id).await?;
    Ok(runs
        .into_iter()
        .find(|r| !r.status.is_final())
        .map(|r| r.run_id))
}

async fn delete_thread(State(shared): Api, Path(id): Path<String>) -> Answer {
    let thread = thread_record(&shared, &id).await?;
    for run in shared.records.runs(&id).await? {
        // Queued: stopped by its worker, wherever it is, before its thread goes.
        if shared.queued && !run.status.is_final() {
            let rid = run.run_id.clone();
            if cancel_queued(&shared, run.clone(), false).await? {
                final_record(&*shared.records, &rid).await?;
            }
        }
        if let Some(live) = shared.runs.get(&run.run_id) {
            live.cancel();
            live.result().await;
        }
        shared.records.delete_events(&run.run_id).await?;
        shared
            .records
            .delete(crate::record::RUN, &run.run_id)
            .await?;
    }
    branches::delete_all(&*shared.records, &thread).await;
    shared.records.delete_state(&id).await?;
    shared.records.delete(crate::record::THREAD, &id).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// LangGraph's thread copy: a new thread (a new UUID) with the source's metadata, graph,
/// status, state and history, whose rows are its own; not its runs. A thread no run made a
/// state for yet is copied as its record alone. Refused (409) while a run is in progress on
/// the source.
async fn copy_thread(State(shared): Api, Path(id): Path<String>) -> Answer {
    let source = thread_record(&shared, &id).await?;
    if let Some(running) = running_on(&shared, &id).await? {
        return Err(ApiError::conflict(format!(
            "thread `{id}` is busy with run `{running}`; it cannot be copied until it ends"
        )));
    }
    let new_id = uuid::Uuid::new_v4().to_string();
    let mut kept = Vec::new();
    if let Some(graph) = &source.graph_id {
        let served = shared.graph(graph)?;
        match served.assistant.copy(&id, &new_id).await {
            Ok(()) => {}
            // Its first run has not made the store's thread yet.
            Err(e) if e.category == "thread_not_found" => {}
            Err(e) => return Err(e.into()),
        }
        kept = branches::copy_all(&*served.assistant, &source, &new_id).await?;
    }
    let now = now_ms();
    let copy = ThreadRecord {
        thread_id: new_id,
        created_ms: now,
        updated_ms: now,
        branches: kept,
        ..source
    };
    if let Err(error) = shared.records.put(Record::Thread(copy.clone())).await {
        // Not recorded: no thread of the API holds the copied state.
        let _ = shared.records.delete_state(&copy.thread_id).await;
        return Err(error.into());
    }
    // As LangGraph's server answers a copy: the new thread's record, without its state.
    let mut answer = thread_json(&shared, &copy).await?;
    if let Value::Object(map) = &mut answer {
        for key in ["values", "interrupts", "error"] {
            map.remove(key);
        }
        map.insert("config".into(), json!({}));
    }
    ok(answer)
}

/// Thread `id`'s state now, or at checkpoint `at` (of its head or of a branch), as LangGraph
/// shows it.
async fn state_json(shared: &Shared, id: &str, at: Option<CheckpointId>) -> Answer {
    let thread = thread_record(shared, id).await?;
    let Some(graph) = &thread.graph_id else {
        return match at {
            None => ok(empty_state()),
            Some(at) => Err(missing_checkpoint(id, at)),
        };
    };
    let served = shared.graph(graph)?;
    let assistant = &*served.assistant;
    let listed = match at {
        None => checkpoints::head(assistant, &thread).await?,
        Some(_) => checkpoints::list(assistant, &thread).await?,
    };
    let found = match at {
        None => listed.last(),
        Some(at) => Some(
            listed
                .iter()
                .find(|l| l.point.id == at)
                .ok_or_else(|| missing_checkpoint(id, at))?,
        ),
    };
    let Some(found) = found else {
        return ok(empty_state());
    };
    let api_url = shared.api_url();
    let mut checkpoints =
        Checkpoints::new(assistant, &*shared.records, &thread, api_url.as_deref());
    let mut entry = match found.head {
        false => checkpoints.entry(found, &[]).await?,
        // The head: where the thread's run stands now (its next nodes, its questions).
        true => {
            let mut found = found.clone();
            let interrupts = match snapshot(shared, &thread, None).await? {
                Some(now) => {
                    found.point.next = now.next;
                    now.interrupts
                }
                None => Vec::new(),
            };
            checkpoints.entry(&found, &interrupts).await?
        }
    };
    if at.is_some() {
        // As LangGraph's server answers a state read at a checkpoint.
        if let Some(checkpoint) = entry["checkpoint"].as_object_mut() {
            checkpoint.remove("checkpoint_ns");
        }
    }
    ok(entry)
}

/// The refusal of a checkpoint thread `thread` does not have.
fn missing_checkpoint(thread: &str, at: CheckpointId) -> ApiError {
    ApiError::not_found(format!(
        "checkpoint `{at}` of thread `{thread}` does not exist"
    ))
}

async fn thread_state(State(shared): Api, Path(id): Path<String>) -> Answer {
    state_json(&shared, &id, None).await
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct StateUpdate {
    values: Option<Value>,
    as_node: Option<String>,
    checkpoint_id: Option<String>,
    checkpoint: Option<Value>,
}

/// LangGraph's `update_state`: the values as a node's update, on a thread with no run in
/// progress.
async fn update_state(State(shared): Api, Path(id): Path<String>, bytes: Bytes) -> Answer {
    let update: StateUpdate = body(&bytes, &format!("the state update of thread `{id}`"))?;
    let checkpoint = match (&update.checkpoint_id, &update.checkpoint) {
        (Some(c), _) => Some(c.clone()),
        (None, Some(c)) => c["checkpoint_id"].as_str().map(str::to_owned),
        (None, None) => None,
    };
    let checkpoint = checkpoint.map(|c| checkpoint_id(&id, &c)).transpose()?;
    let mut thread = thread_record(&shared, &id).await?;
    let Some(graph) = thread.graph_id.clone() else {
        return Err(ApiError::unprocessable(format!(
            "thread `{id}` has no state yet (no run made it), so it cannot be updated"
        )));
    };
    let served = shared.graph(&graph)?;
    if let Some(running) = running_on(&shared, &id).await? {
        return Err(ApiError::conflict(format!(
            "thread `{id}` is busy with run `{running}`; its state cannot be updated until it ends"
        )));
    }
    if let Some(checkpoint) = checkpoint {
        // An update at an earlier checkpoint: the thread goes on from there (what came after
        // kept as a branch), as a run from a checkpoint does.
        let listed = checkpoints::list(&*served.assistant, &thread).await?;
        if !listed.iter().any(|l| l.point.id == checkpoint) {
            return Err(missing_checkpoint(&id, checkpoint));
        }
        let version = branches::fork_at(
            &*shared.records,
            &*served.assistant,
            &mut thread,
            checkpoint,
        )
        .await?;
        served
            .assistant
            .rewind(&id, version)
            .await
            .map_err(ApiError::from)?;
    }
    let values = update.values.unwrap_or(Value::Null);
    let version = served
        .assistant
        .update(&id, values, update.as_node.as_deref())
        .await
        .map_err(ApiError::from)?;
    thread.updated_ms = now_ms();
    shared.records.put(Record::Thread(thread)).await?;
    let checkpoint = CheckpointId::version_of_head(version);
    ok(json!({
        "checkpoint": checkpoint_json(&id, checkpoint),
        "checkpoint_id": checkpoint.to_string(),
        "configurable": {"thread_id": id, "checkpoint_ns": "", "checkpoint_id": checkpoint.to_string()},
    }))
}

/// Checkpoint id `checkpoint` of thread `thread`, read.
fn checkpoint_id(thread: &str, checkpoint: &str) -> Result<CheckpointId, ApiError> {
    CheckpointId::parse(checkpoint).ok_or_else(|| {
        ApiError::unprocessable(format!(
            "checkpoint `{checkpoint}` of thread `{thread}` is not one of its checkpoint ids (`5`, or `5-input` for a run's input)"
        ))
    })
}

async fn thread_state_at(
    State(shared): Api,
    Path((id, checkpoint)): Path<(String, String)>,
) -> Answer {
    let at = checkpoint_id(&id, &checkpoint)?;
    state_json(&shared, &id, Some(at)).await
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct HistoryQuery {
    limit: Option<usize>,
}

/// Thread `id`'s checkpoints on every branch, the newest first, at most `limit` (10 by
/// default); the head with the questions the thread waits for there.
async fn history(shared: &Shared, id: &str, limit: Option<usize>) -> Answer {
    let thread = thread_record(shared, id).await?;
    let Some(graph) = &thread.graph_id else {
        return ok(json!([]));
    };
    let served = shared.graph(graph)?;
    let assistant = &*served.assistant;
    let listed = checkpoints::list(assistant, &thread).await?;
    let api_url = shared.api_url();
    let mut checkpoints =
        Checkpoints::new(assistant, &*shared.records, &thread, api_url.as_deref());
    let mut states = Vec::new();
    for entry in listed.iter().take(limit.unwrap_or(10)) {
        let interrupts = match entry.head {
            true => snapshot(shared, &thread, None)
                .await?
                .map(|s| s.interrupts)
                .unwrap_or_default(),
            false => Vec::new(),
        };
        states.push(checkpoints.entry(entry, &interrupts).await?);
    }
    ok(Value::from(states))
}

async fn history_get(
    State(shared): Api,
    Path(id): Path<String>,
    Query(query): Query<HashMap<String, String>>,
) -> Answer {
    let limit = query.get("limit").and_then(|l| l.parse().ok());
    history(&shared, &id, limit).await
}

async fn history_post(State(shared): Api, Path(id): Path<String>, bytes: Bytes) -> Answer {
    let query: HistoryQuery = body(&bytes, &format!("the history query of thread `{id}`"))?;
    history(&shared, &id, query.limit).await
}

// ---- runs ----

/// A run request (LangGraph's `RunCreate`): the fields this server reads; the others are kept
/// in the run's `kwargs`.
#[derive(Deserialize, Default)]
#[serde(default)]
struct RunCreate {
    assistant_id: Option<String>,
    input: Option<Value>,
    command: Option<Command>,
    metadata: Option<Map<String, Value>>,
    stream_mode: Option<Value>,
    multitask_strategy: Option<String>,
    if_not_exists: Option<String>,
    checkpoint_id: Option<String>,
    checkpoint: Option<Value>,
    interrupt_before: Option<Value>,
    interrupt_after: Option<Value>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct Command {
    resume: Option<Value>,
    update: Option<Value>,
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

/// A run just created: in progress in this process (`live`), or queued for the workers on the
/// database.
struct Created {
    run: RunRecord,
    live: Option<Arc<Live>>,
    stateless: bool,
}

/// Creates a run on thread `thread` (`None`: a stateless run, on a temporary thread) and
/// starts its task, or queues it for the workers (a run on a thread, on a database with a run
/// queue, when the server has workers: see [`ServerBuilder::workers`](crate::ServerBuilder::workers)).
async fn create_run(
    shared: &Arc<Shared>,
    thread: Option<&str>,
    bytes: &Bytes,
) -> Result<Created, ApiError> {
    let kwargs: Value = body(bytes, "a run request")?;
    let create: RunCreate = serde_json::from_value(kwargs.clone()).map_err(|e| {
        ApiError::unprocessable(format!("the body of a run request is not valid: {e}"))
    })?;
    let assistant_id = create
        .assistant_id
        .as_deref()
        .ok_or_else(|| ApiError::unprocessable("a run request needs an `assistant_id`"))?;
    let served = shared.assistant(assistant_id).ok_or_else(|| {
        let graphs: Vec<&str> = shared.assistants.iter().map(|a| a.graph_id.as_str()).collect();
        ApiError::unprocessable(format!(
            "Invalid assistant: '{assistant_id}'. Must be either:\n- A valid assistant UUID, or\n- One of the registered graphs: {}",
            graphs.join(", ")
        ))
    })?;
    let modes = Mode::parse(create.stream_mode.as_ref()).map_err(ApiError::unprocessable)?;
    let options = options_of(&create)
        .map_err(|why| ApiError::unprocessable(format!("the run request is not valid: {why}")))?;
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
    let mut record = match thread {
        Some(id) => match shared.records.thread(id).await? {
            Some(record) => record,
            None if create.if_not_exists.as_deref() == Some("create") => {
                agentstate_store::check_id(id).map_err(|e| {
                    ApiError::unprocessable(format!("thread id `{id}` is not valid: {e}"))
                })?;
                new_thread(id)
            }
            None => return Err(ApiError::not_found("Thread or assistant not found.")),
        },
        None => new_thread(&uuid::Uuid::new_v4().to_string()),
    };
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
    if shared.queued && !stateless {
        let run = queue_run(
            shared,
            record,
            &run_id,
            served,
            strategy,
            kwargs,
            create.metadata,
        )
        .await?;
        return Ok(Created {
            run,
            live: None,
            stateless,
        });
    }
    let live = Live::new(&run_id, &thread_id);
    shared.runs.register(&live, |running| match strategy {
        "reject" if !running.is_empty() => Err(ApiError::conflict(
            "Thread is already running a task. Wait for it to finish or choose a different multitask strategy.",
        )),
        "reject" | "enqueue" => Ok(()),
        // The running run stops where it is (its committed steps stay); the new one runs
        // after it, from its input.
        "interrupt" => {
            running.iter().for_each(|l| l.cancel());
            Ok(())
        }
        // The running run stops and what it did is removed; the new one runs after it.
        "rollback" => {
            running.iter().for_each(|l| l.stop(Stop::Rollback));
            Ok(())
        }
        other => Err(unserved_strategy(other)),
    })?;
    record.graph_id = Some(served.graph_id.clone());
    mark_thread(&mut record, served);
    let mut run = RunRecord::new(&run_id, &thread_id, &served.graph_id, kwargs, now_ms());
    run.metadata = run_metadata(
        create.metadata.clone(),
        &served.assistant_id,
        &served.graph_id,
    );
    // Two rows of their own, written at once (on PostgreSQL, on two connections: one round
    // trip less before the stream's first event).
    let stored = tokio::try_join!(
        shared.records.put(Record::Thread(record)),
        shared.records.put(Record::Run(run.clone())),
    );
    if let Err(error) = stored {
        shared.runs.abandon(&live);
        return Err(error.into());
    }
    let job = Job {
        records: Arc::clone(&shared.records),
        runs: Arc::clone(&shared.runs),
        assistant: Arc::clone(&served.assistant),
        live: Arc::clone(&live),
        run: run.clone(),
        start,
        options,
        modes,
        stateless,
        agui: None,
        worker: None,
        api_url: shared.api_url(),
    };
    job.spawn();
    Ok(Created {
        run,
        live: Some(live),
        stateless,
    })
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

fn unserved_strategy(other: &str) -> ApiError {
    ApiError::unprocessable(format!(
        "multitask_strategy `{other}` is not one of `reject`, `interrupt`, `rollback` and `enqueue`"
    ))
}

/// Writes run `run_id` (pending) and its thread's record, and queues it, after `strategy` said
/// what to do with the thread's runs not yet ended (on any server).
async fn queue_run(
    shared: &Shared,
    mut thread: ThreadRecord,
    run_id: &str,
    served: &Served,
    strategy: &str,
    kwargs: Value,
    metadata: Option<Map<String, Value>>,
) -> Result<RunRecord, ApiError> {
    let graph_id = served.graph_id.as_str();
    let thread_id = thread.thread_id.clone();
    let open: Vec<RunRecord> = shared
        .records
        .runs(&thread_id)
        .await?
        .into_iter()
        .filter(|r| !r.status.is_final())
        .collect();
    match strategy {
        "reject" if !open.is_empty() => {
            return Err(ApiError::conflict(
                "Thread is already running a task. Wait for it to finish or choose a different multitask strategy.",
            ))
        }
        "reject" | "enqueue" => {}
        "interrupt" | "rollback" => {
            for run in open {
                cancel_queued(shared, run, strategy == "rollback").await?;
            }
        }
        other => return Err(unserved_strategy(other)),
    }
    thread.graph_id = Some(graph_id.to_owned());
    mark_thread(&mut thread, served);
    let mut run = RunRecord::new(run_id, &thread_id, graph_id, kwargs, now_ms());
    run.metadata = run_metadata(metadata, &served.assistant_id, graph_id);
    shared.records.put(Record::Thread(thread)).await?;
    shared.records.put(Record::Run(run.clone())).await?;
    if let Err(error) = shared.records.enqueue(run_id, &thread_id).await {
        // Not queued: no worker would ever end it.
        let _ = shared.records.delete(crate::record::RUN, run_id).await;
        return Err(error.into());
    }
    Ok(run)
}

/// Cancels queued run `run` (`rollback`: and removes what it did): a pending one ends
/// `interrupted` at once (rolled back: is deleted); a running one is stopped by its worker,
/// told by `NOTIFY` (which reads from its record whether to roll it back). False if it had
/// already ended.
async fn cancel_queued(
    shared: &Shared,
    mut run: RunRecord,
    rollback: bool,
) -> Result<bool, ApiError> {
    if rollback {
        run.rollback = true;
        run.updated_ms = now_ms();
        shared.records.put(Record::Run(run.clone())).await?;
    }
    match shared.records.cancel_queued(&run.run_id).await? {
        Some(true) => Ok(true),
        Some(false) if rollback => {
            shared.records.delete_events(&run.run_id).await?;
            shared
                .records
                .delete(crate::record::RUN, &run.run_id)
                .await?;
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

/// Where a run is read: `/threads/{t}/runs/{r}` (`/runs/{r}` for a stateless run).
fn location(thread: &str, run: &str, stateless: bool) -> HeaderValue {
    let path = match stateless {
        true => format!("/runs/{run}"),
        false => format!("/threads/{thread}/runs/{run}"),
    };
    // Ids are checked store ids or UUIDs: printable ASCII.
    HeaderValue::from_str(&path).unwrap_or(HeaderValue::from_static("/runs"))
}

/// Whether run `run` was created resumable (`stream_resumable`): its streams give each event
/// its number as its SSE `id`, and its events are streamed again after it ended.
fn resumable(run: &RunRecord) -> bool {
    run.kwargs.get("stream_resumable").and_then(Value::as_bool) == Some(true)
}

/// The SSE response of a run's frames from the one numbered `from` (`ids`: each with its
/// number as its `id`).
fn stream_response(live: Arc<Live>, stateless: bool, from: usize, ids: bool) -> Response {
    let where_ = location(&live.thread_id, &live.run_id, stateless);
    sse_response(live.frames(from), where_, stateless, ids)
}

/// The SSE response of `frames` of the run at `where_` (`ids`: each with its number as its
/// `id`, as LangGraph's server numbers a resumable run's events).
fn sse_response(
    frames: impl futures_util::Stream<Item = (usize, Frame)> + Send + 'static,
    where_: HeaderValue,
    stateless: bool,
    ids: bool,
) -> Response {
    let events = frames.map(move |(i, f)| {
        let mut event = SseEvent::default().event(f.event);
        if ids {
            event = event.id(i.to_string());
        }
        Ok::<_, Infallible>(event.data(f.data.to_string()))
    });
    let mut response = Sse::new(events)
        .keep_alive(KeepAlive::default())
        .into_response();
    if !stateless {
        // Where a client that lost the stream reconnects (with `Last-Event-ID`).
        if let Ok(stream) =
            HeaderValue::from_str(&format!("{}/stream", where_.to_str().unwrap_or_default()))
        {
            response.headers_mut().insert(header::LOCATION, stream);
        }
    }
    response
        .headers_mut()
        .insert(header::CONTENT_LOCATION, where_);
    response
}

/// Cancels a run when dropped before it ended: what a run created with `on_disconnect:
/// "cancel"` holds in its response, which the server drops when the client goes away.
struct CancelOnDrop {
    shared: Arc<Shared>,
    run: RunRecord,
    live: Option<Arc<Live>>,
}

impl CancelOnDrop {
    /// The guard of `created`, if its request asked to cancel it on disconnect.
    fn of(shared: &Arc<Shared>, created: &Created) -> Option<Self> {
        let asked = created
            .run
            .kwargs
            .get("on_disconnect")
            .and_then(Value::as_str);
        (asked == Some("cancel")).then(|| CancelOnDrop {
            shared: Arc::clone(shared),
            run: created.run.clone(),
            live: created.live.clone(),
        })
    }
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        match &self.live {
            Some(live) => {
                if !live.ended() {
                    live.cancel();
                }
            }
            None => {
                let (shared, run) = (Arc::clone(&self.shared), self.run.clone());
                if let Ok(handle) = tokio::runtime::Handle::try_current() {
                    handle.spawn(async move {
                        if let Ok(Some(run)) = shared.records.run(&run.run_id).await {
                            if !run.status.is_final() {
                                let _ = cancel_queued(&shared, run, false).await;
                            }
                        }
                    });
                }
            }
        }
    }
}

/// The SSE response of a run just created.
fn created_stream(shared: &Arc<Shared>, created: Created) -> Response {
    let guard = CancelOnDrop::of(shared, &created);
    let frames: futures_util::stream::BoxStream<'static, (usize, Frame)> = match created.live {
        Some(live) => live.frames(0).boxed(),
        None => stored_frames(Arc::clone(&shared.records), created.run.run_id.clone(), 0).boxed(),
    };
    // The guard lives as long as the response's stream.
    let frames = frames.map(move |frame| {
        let _held = &guard;
        frame
    });
    let (thread, run) = (&created.run.thread_id, &created.run.run_id);
    sse_response(
        frames,
        location(thread, run, created.stateless),
        created.stateless,
        resumable(&created.run),
    )
}

/// What `wait` answers for a run just created, once it ended.
async fn created_wait(shared: &Arc<Shared>, created: Created) -> Answer {
    let _guard = CancelOnDrop::of(shared, &created);
    match created.live {
        Some(live) => Ok(wait_response(live, created.stateless).await),
        None => {
            let (thread, run) = (&created.run.thread_id, &created.run.run_id);
            let mut response = ended(shared, thread, run).await?;
            response
                .headers_mut()
                .insert(header::CONTENT_LOCATION, location(thread, run, false));
            Ok(response)
        }
    }
}

async fn wait_response(live: Arc<Live>, stateless: bool) -> Response {
    let where_ = location(&live.thread_id, &live.run_id, stateless);
    let result = live.result().await;
    let mut response = Json(result).into_response();
    response
        .headers_mut()
        .insert(header::CONTENT_LOCATION, where_);
    response
}

async fn create_stream(State(shared): Api, Path(id): Path<String>, bytes: Bytes) -> Answer {
    let created = create_run(&shared, Some(&id), &bytes).await?;
    Ok(created_stream(&shared, created))
}

async fn create_wait(State(shared): Api, Path(id): Path<String>, bytes: Bytes) -> Answer {
    let created = create_run(&shared, Some(&id), &bytes).await?;
    created_wait(&shared, created).await
}

/// The answer to a background run's creation: the run.
fn run_answer(shared: &Shared, created: &Created) -> Response {
    let run = &created.run;
    let shown = run_json(
        run,
        &assistant_id_of(shared, run),
        shared.api_url().as_deref(),
    );
    let mut response = Json(shown).into_response();
    response.headers_mut().insert(
        header::CONTENT_LOCATION,
        location(&run.thread_id, &run.run_id, created.stateless),
    );
    response
}

async fn create_background(State(shared): Api, Path(id): Path<String>, bytes: Bytes) -> Answer {
    let created = create_run(&shared, Some(&id), &bytes).await?;
    Ok(run_answer(&shared, &created))
}

async fn stateless_stream(State(shared): Api, bytes: Bytes) -> Answer {
    let created = create_run(&shared, None, &bytes).await?;
    Ok(created_stream(&shared, created))
}

async fn stateless_wait(State(shared): Api, bytes: Bytes) -> Answer {
    let created = create_run(&shared, None, &bytes).await?;
    created_wait(&shared, created).await
}

async fn stateless_background(State(shared): Api, bytes: Bytes) -> Answer {
    let created = create_run(&shared, None, &bytes).await?;
    Ok(run_answer(&shared, &created))
}

fn assistant_id_of(shared: &Shared, run: &RunRecord) -> String {
    shared
        .assistant(&run.graph_id)
        .map_or_else(|| run.graph_id.clone(), |a| a.assistant_id.clone())
}

async fn run_record(shared: &Shared, thread: &str, run_id: &str) -> Result<RunRecord, ApiError> {
    match shared.records.run(run_id).await? {
        Some(run) if run.thread_id == thread => Ok(run),
        // As LangGraph's server answers it.
        _ => Err(ApiError::not_found("Not Found")),
    }
}

async fn get_run(State(shared): Api, Path((id, rid)): Path<(String, String)>) -> Answer {
    let run = run_record(&shared, &id, &rid).await?;
    ok(run_json(
        &run,
        &assistant_id_of(&shared, &run),
        shared.api_url().as_deref(),
    ))
}

async fn list_runs(
    State(shared): Api,
    Path(id): Path<String>,
    Query(query): Query<HashMap<String, String>>,
) -> Answer {
    thread_record(&shared, &id).await?;
    let status: Option<RunStatus> = match query.get("status") {
        None => None,
        Some(s) => Some(serde_json::from_value(Value::from(s.as_str())).map_err(|_| {
            ApiError::unprocessable(format!("`{s}` is not a run status (pending, running, success, error, timeout, interrupted)"))
        })?),
    };
    let number = |key: &str, default: usize| {
        query
            .get(key)
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    };
    let mut runs = shared.records.runs(&id).await?;
    runs.reverse();
    let api_url = shared.api_url();
    let found: Vec<Value> = runs
        .iter()
        .filter(|r| status.is_none_or(|s| s == r.status))
        .skip(number("offset", 0))
        .take(number("limit", 10))
        .map(|r| run_json(r, &assistant_id_of(&shared, r), api_url.as_deref()))
        .collect();
    ok(Value::from(found))
}

async fn delete_run(State(shared): Api, Path((id, rid)): Path<(String, String)>) -> Answer {
    let run = run_record(&shared, &id, &rid).await?;
    if shared.runs.get(&rid).is_some() || (shared.queued && !run.status.is_final()) {
        return Err(ApiError::conflict(format!(
            "run `{rid}` of thread `{id}` is in progress; cancel it before deleting it"
        )));
    }
    shared.records.delete_events(&rid).await?;
    shared.records.delete(crate::record::RUN, &rid).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

async fn join_run(State(shared): Api, Path((id, rid)): Path<(String, String)>) -> Answer {
    if run_record(&shared, &id, &rid).await.is_err() {
        // LangGraph's server answers a join of a run it does not have (or deleted, as a
        // rollback does) with the error as the run's result.
        return ok(
            json!({"__error__": {"error": "HTTPException", "message": "404: Run not found"}}),
        );
    }
    if let Some(live) = shared.runs.get(&rid) {
        return ok(live.result().await);
    }
    ended(&shared, &id, &rid).await
}

/// What `join` answers for run `rid` of thread `id` (carried out by another process, or
/// ended), once it ended.
async fn ended(shared: &Shared, id: &str, rid: &str) -> Answer {
    let run = final_record(&*shared.records, rid)
        .await?
        .ok_or_else(|| ApiError::not_found("Not Found"))?;
    if let Some(failure) = run.error {
        return ok(json!({"__error__": failure}));
    }
    let thread = thread_record(shared, id).await?;
    match snapshot(shared, &thread, None).await? {
        Some(s) if s.interrupts.is_empty() => ok(s.values),
        Some(s) => ok(with_interrupts(&s.values, &s.interrupts)),
        None => ok(json!({})),
    }
}

/// A run's stream joined: from its first event, or after the one a reconnecting client names
/// in `Last-Event-ID` (`-1`: from the first).
async fn join_stream(
    State(shared): Api,
    Path((id, rid)): Path<(String, String)>,
    headers: HeaderMap,
) -> Answer {
    let run = run_record(&shared, &id, &rid).await?;
    // A client that reconnects with `Last-Event-ID` gets the ids to reconnect with again.
    let asked = headers.contains_key("last-event-id");
    let ids = resumable(&run) || asked;
    let from = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<usize>().ok())
        .map_or(0, |seen| seen + 1);
    Ok(match shared.runs.get(&rid) {
        Some(live) => stream_response(live, false, from, ids),
        // Ended, not resumable, no event asked for again: LangGraph's server has nothing more
        // of it to stream.
        None if run.status.is_final() && !ids && !asked => {
            let none = futures_util::stream::empty();
            sse_response(none, location(&id, &rid, false), false, false)
        }
        // Carried out by another server on the database, or ended: its event log.
        None => {
            let frames = stored_frames(Arc::clone(&shared.records), rid.clone(), from);
            sse_response(frames, location(&id, &rid, false), false, ids)
        }
    })
}

async fn cancel_run(
    State(shared): Api,
    Path((id, rid)): Path<(String, String)>,
    Query(query): Query<HashMap<String, String>>,
) -> Answer {
    let Ok(run) = run_record(&shared, &id, &rid).await else {
        return Err(ApiError::not_found("No runs found to cancel."));
    };
    let why = match query.get("action").map(String::as_str) {
        None | Some("interrupt") => Stop::Cancel,
        Some("rollback") => Stop::Rollback,
        Some(other) => {
            return Err(ApiError::unprocessable(format!(
                "cancel action `{other}` of run `{rid}` is not one of `interrupt` and `rollback`"
            )))
        }
    };
    let wait = matches!(query.get("wait").map(String::as_str), Some("1" | "true"));
    // Queued: marked cancelled in the queue, its worker (here or elsewhere) told by `NOTIFY`
    // (a run cancelled only here could be swept back to the queue).
    let rollback = why == Stop::Rollback;
    // As LangGraph's server answers: `{}` once a waited cancel is done, else 202 at once.
    let done = || ok(json!({}));
    if shared.queued
        && !run.status.is_final()
        && cancel_queued(&shared, run.clone(), rollback).await?
    {
        if wait {
            final_record(&*shared.records, &rid).await?;
            return done();
        }
        return Ok(StatusCode::ACCEPTED.into_response());
    }
    let Some(live) = shared.runs.get(&rid) else {
        return Err(ApiError::not_found(
            "No matching runs to cancel. Please verify the thread ID and run IDs are correct, and the runs haven't been deleted or completed.",
        ));
    };
    live.stop(why);
    if wait {
        live.result().await;
        return done();
    }
    Ok(StatusCode::ACCEPTED.into_response())
}
