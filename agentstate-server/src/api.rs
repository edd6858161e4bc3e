//! The routes of the LangGraph Agent Server API and their handlers.

use crate::branches;
use crate::checkpoints::{
    self, checkpoint_json, empty_state, interrupt_json, CheckpointId, Checkpoints,
};
use crate::error::ApiError;
use crate::metadata::{run_json, task_id};
use crate::record::{iso8601, now_ms, Record, RunRecord, RunStatus, ThreadRecord, ThreadStatus};
use crate::runs::{stored_frames, Frame, Live, Stop};
use crate::service::{missing_checkpoint, Cancelled, Created, Served, Service};
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

type Api = State<Arc<Service>>;
type Answer = Result<Response, ApiError>;

/// Every route.
pub(crate) fn routes() -> Router<Arc<Service>> {
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

fn served<'a>(service: &'a Service, id: &str) -> Result<&'a Served, ApiError> {
    service
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

async fn search_assistants(State(service): Api, bytes: Bytes) -> Answer {
    let query: AssistantSearch = body(&bytes, "an assistant search")?;
    // The newest first, as LangGraph's server lists the assistants it made for its graphs, in
    // their order: the last served first.
    let found: Vec<Value> = service
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

async fn get_assistant(State(service): Api, Path(id): Path<String>) -> Answer {
    match service.assistant(&id) {
        Some(served) => ok(assistant_json(served)),
        // As LangGraph's server answers it.
        None => Err(ApiError::not_found("Not Found")),
    }
}

/// The graph as LangGraph draws it: its nodes between `__start__` and `__end__`, and every
/// edge, sorted (a conditional one marked so).
async fn assistant_graph(State(service): Api, Path(id): Path<String>) -> Answer {
    let served = served(&service, &id)?;
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

async fn assistant_schemas(State(service): Api, Path(id): Path<String>) -> Answer {
    if uuid::Uuid::parse_str(&id).is_err() {
        // LangGraph's server reads schemas by assistant id only.
        return Err(ApiError::unprocessable(
            "Invalid assistant ID: must be a UUID",
        ));
    }
    let served = served(&service, &id)?;
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
async fn thread_json(service: &Service, thread: &ThreadRecord) -> Result<Value, ApiError> {
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
    if let Some(s) = service.snapshot(thread, None).await? {
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

async fn create_thread(State(service): Api, bytes: Bytes) -> Answer {
    let create: ThreadCreate = body(&bytes, "a thread creation")?;
    let id = create
        .thread_id
        .unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
    agentstate_store::check_id(&id)
        .map_err(|e| ApiError::unprocessable(format!("thread id `{id}` is not valid: {e}")))?;
    if let Some(existing) = service.records.thread(&id).await? {
        return match create.if_exists.as_deref() {
            Some("do_nothing") => ok(thread_json(&service, &existing).await?),
            _ => Err(ApiError::conflict(format!(
                "Thread with ID {id} already exists"
            ))),
        };
    }
    let thread = ThreadRecord::new(&id, create.metadata.unwrap_or_default(), now_ms());
    service.records.put(Record::Thread(thread.clone())).await?;
    ok(thread_json(&service, &thread).await?)
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
    async fn find(&self, service: &Service) -> Result<Vec<ThreadRecord>, ApiError> {
        let mut threads = service.records.threads().await?;
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
                let state = service.snapshot(&thread, None).await?;
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

async fn search_threads(State(service): Api, bytes: Bytes) -> Answer {
    let search: ThreadSearch = body(&bytes, "a thread search")?;
    let threads = search.find(&service).await?;
    let mut found = Vec::new();
    for thread in threads
        .iter()
        .skip(search.offset.unwrap_or(0))
        .take(search.limit.unwrap_or(10))
    {
        found.push(thread_json(&service, thread).await?);
    }
    ok(Value::from(found))
}

/// How many threads a search finds (`POST /threads/count`).
async fn count_threads(State(service): Api, bytes: Bytes) -> Answer {
    let search: ThreadSearch = body(&bytes, "a thread count")?;
    ok(Value::from(search.find(&service).await?.len()))
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

async fn get_thread(State(service): Api, Path(id): Path<String>) -> Answer {
    let thread = service.thread_record(&id).await?;
    ok(thread_json(&service, &thread).await?)
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct ThreadPatch {
    metadata: Option<Map<String, Value>>,
}

async fn patch_thread(State(service): Api, Path(id): Path<String>, bytes: Bytes) -> Answer {
    let patch: ThreadPatch = body(&bytes, &format!("the patch of thread `{id}`"))?;
    let mut thread = service.thread_record(&id).await?;
    thread.metadata.extend(patch.metadata.unwrap_or_default());
    thread.updated_ms = now_ms();
    service.records.put(Record::Thread(thread.clone())).await?;
    ok(thread_json(&service, &thread).await?)
}

async fn delete_thread(State(service): Api, Path(id): Path<String>) -> Answer {
    service.delete_thread(&id).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// LangGraph's thread copy: a new thread (a new UUID) with the source's metadata, graph,
/// status, state and history, whose rows are its own; not its runs. A thread no run made a
/// state for yet is copied as its record alone. Refused (409) while a run is in progress on
/// the source.
async fn copy_thread(State(service): Api, Path(id): Path<String>) -> Answer {
    let source = service.thread_record(&id).await?;
    if let Some(running) = service.running_on(&id).await? {
        return Err(ApiError::conflict(format!(
            "thread `{id}` is busy with run `{running}`; it cannot be copied until it ends"
        )));
    }
    let new_id = uuid::Uuid::new_v4().to_string();
    let mut kept = Vec::new();
    if let Some(graph) = &source.graph_id {
        let served = service.graph(graph)?;
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
    if let Err(error) = service.records.put(Record::Thread(copy.clone())).await {
        // Not recorded: no thread of the API holds the copied state.
        let _ = service.records.delete_state(&copy.thread_id).await;
        return Err(error.into());
    }
    // As LangGraph's server answers a copy: the new thread's record, without its state.
    let mut answer = thread_json(&service, &copy).await?;
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
async fn state_json(service: &Service, id: &str, at: Option<CheckpointId>) -> Answer {
    let thread = service.thread_record(id).await?;
    let Some(graph) = &thread.graph_id else {
        return match at {
            None => ok(empty_state()),
            Some(at) => Err(missing_checkpoint(id, at)),
        };
    };
    let served = service.graph(graph)?;
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
    let api_url = service.api_url();
    let mut checkpoints =
        Checkpoints::new(assistant, &*service.records, &thread, api_url.as_deref());
    let mut entry = match found.head {
        false => checkpoints.entry(found, &[]).await?,
        // The head: where the thread's run stands now (its next nodes, its questions).
        true => {
            let mut found = found.clone();
            let interrupts = match service.snapshot(&thread, None).await? {
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

async fn thread_state(State(service): Api, Path(id): Path<String>) -> Answer {
    state_json(&service, &id, None).await
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
async fn update_state(State(service): Api, Path(id): Path<String>, bytes: Bytes) -> Answer {
    let update: StateUpdate = body(&bytes, &format!("the state update of thread `{id}`"))?;
    let checkpoint = match (&update.checkpoint_id, &update.checkpoint) {
        (Some(c), _) => Some(c.clone()),
        (None, Some(c)) => c["checkpoint_id"].as_str().map(str::to_owned),
        (None, None) => None,
    };
    let checkpoint = checkpoint.map(|c| checkpoint_id(&id, &c)).transpose()?;
    let mut thread = service.thread_record(&id).await?;
    let Some(graph) = thread.graph_id.clone() else {
        return Err(ApiError::unprocessable(format!(
            "thread `{id}` has no state yet (no run made it), so it cannot be updated"
        )));
    };
    let served = service.graph(&graph)?;
    if let Some(running) = service.running_on(&id).await? {
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
            &*service.records,
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
    service.records.put(Record::Thread(thread)).await?;
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
    State(service): Api,
    Path((id, checkpoint)): Path<(String, String)>,
) -> Answer {
    let at = checkpoint_id(&id, &checkpoint)?;
    state_json(&service, &id, Some(at)).await
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct HistoryQuery {
    limit: Option<usize>,
}

/// Thread `id`'s checkpoints on every branch, the newest first, at most `limit` (10 by
/// default); the head with the questions the thread waits for there.
async fn history(service: &Service, id: &str, limit: Option<usize>) -> Answer {
    let thread = service.thread_record(id).await?;
    let Some(graph) = &thread.graph_id else {
        return ok(json!([]));
    };
    let served = service.graph(graph)?;
    let assistant = &*served.assistant;
    let listed = checkpoints::list(assistant, &thread).await?;
    let api_url = service.api_url();
    let mut checkpoints =
        Checkpoints::new(assistant, &*service.records, &thread, api_url.as_deref());
    let mut states = Vec::new();
    for entry in listed.iter().take(limit.unwrap_or(10)) {
        let interrupts = match entry.head {
            true => service
                .snapshot(&thread, None)
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
    State(service): Api,
    Path(id): Path<String>,
    Query(query): Query<HashMap<String, String>>,
) -> Answer {
    let limit = query.get("limit").and_then(|l| l.parse().ok());
    history(&service, &id, limit).await
}

async fn history_post(State(service): Api, Path(id): Path<String>, bytes: Bytes) -> Answer {
    let query: HistoryQuery = body(&bytes, &format!("the history query of thread `{id}`"))?;
    history(&service, &id, query.limit).await
}

// ---- runs ----

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
    service: Arc<Service>,
    run: RunRecord,
    live: Option<Arc<Live>>,
}

impl CancelOnDrop {
    /// The guard of `created`, if its request asked to cancel it on disconnect.
    fn of(service: &Arc<Service>, created: &Created) -> Option<Self> {
        let asked = created
            .run
            .kwargs
            .get("on_disconnect")
            .and_then(Value::as_str);
        (asked == Some("cancel")).then(|| CancelOnDrop {
            service: Arc::clone(service),
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
                let (service, run_id) = (Arc::clone(&self.service), self.run.run_id.clone());
                if let Ok(handle) = tokio::runtime::Handle::try_current() {
                    handle.spawn(async move { service.cancel_if_open(&run_id).await });
                }
            }
        }
    }
}

/// The SSE response of a run just created.
fn created_stream(service: &Arc<Service>, created: Created) -> Response {
    let guard = CancelOnDrop::of(service, &created);
    let frames: futures_util::stream::BoxStream<'static, (usize, Frame)> = match created.live {
        Some(live) => live.frames(0).boxed(),
        None => stored_frames(Arc::clone(&service.records), created.run.run_id.clone(), 0).boxed(),
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
async fn created_wait(service: &Arc<Service>, created: Created) -> Answer {
    let _guard = CancelOnDrop::of(service, &created);
    match created.live {
        Some(live) => Ok(wait_response(live, created.stateless).await),
        None => {
            let (thread, run) = (&created.run.thread_id, &created.run.run_id);
            let mut response = Json(service.ended(thread, run).await?).into_response();
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

async fn create_stream(State(service): Api, Path(id): Path<String>, bytes: Bytes) -> Answer {
    let created = service
        .create_run(Some(&id), body(&bytes, "a run request")?)
        .await?;
    Ok(created_stream(&service, created))
}

async fn create_wait(State(service): Api, Path(id): Path<String>, bytes: Bytes) -> Answer {
    let created = service
        .create_run(Some(&id), body(&bytes, "a run request")?)
        .await?;
    created_wait(&service, created).await
}

/// The answer to a background run's creation: the run.
fn run_answer(service: &Service, created: &Created) -> Response {
    let run = &created.run;
    let shown = run_json(
        run,
        &service.assistant_id_of(run),
        service.api_url().as_deref(),
    );
    let mut response = Json(shown).into_response();
    response.headers_mut().insert(
        header::CONTENT_LOCATION,
        location(&run.thread_id, &run.run_id, created.stateless),
    );
    response
}

async fn create_background(State(service): Api, Path(id): Path<String>, bytes: Bytes) -> Answer {
    let created = service
        .create_run(Some(&id), body(&bytes, "a run request")?)
        .await?;
    Ok(run_answer(&service, &created))
}

async fn stateless_stream(State(service): Api, bytes: Bytes) -> Answer {
    let created = service
        .create_run(None, body(&bytes, "a run request")?)
        .await?;
    Ok(created_stream(&service, created))
}

async fn stateless_wait(State(service): Api, bytes: Bytes) -> Answer {
    let created = service
        .create_run(None, body(&bytes, "a run request")?)
        .await?;
    created_wait(&service, created).await
}

async fn stateless_background(State(service): Api, bytes: Bytes) -> Answer {
    let created = service
        .create_run(None, body(&bytes, "a run request")?)
        .await?;
    Ok(run_answer(&service, &created))
}

async fn get_run(State(service): Api, Path((id, rid)): Path<(String, String)>) -> Answer {
    let run = service.run_record(&id, &rid).await?;
    ok(run_json(
        &run,
        &service.assistant_id_of(&run),
        service.api_url().as_deref(),
    ))
}

async fn list_runs(
    State(service): Api,
    Path(id): Path<String>,
    Query(query): Query<HashMap<String, String>>,
) -> Answer {
    service.thread_record(&id).await?;
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
    let mut runs = service.records.runs(&id).await?;
    runs.reverse();
    let api_url = service.api_url();
    let found: Vec<Value> = runs
        .iter()
        .filter(|r| status.is_none_or(|s| s == r.status))
        .skip(number("offset", 0))
        .take(number("limit", 10))
        .map(|r| run_json(r, &service.assistant_id_of(r), api_url.as_deref()))
        .collect();
    ok(Value::from(found))
}

async fn delete_run(State(service): Api, Path((id, rid)): Path<(String, String)>) -> Answer {
    service.delete_run(&id, &rid).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

async fn join_run(State(service): Api, Path((id, rid)): Path<(String, String)>) -> Answer {
    ok(service.join(&id, &rid).await?)
}

/// A run's stream joined: from its first event, or after the one a reconnecting client names
/// in `Last-Event-ID` (`-1`: from the first).
async fn join_stream(
    State(service): Api,
    Path((id, rid)): Path<(String, String)>,
    headers: HeaderMap,
) -> Answer {
    let run = service.run_record(&id, &rid).await?;
    // A client that reconnects with `Last-Event-ID` gets the ids to reconnect with again.
    let asked = headers.contains_key("last-event-id");
    let ids = resumable(&run) || asked;
    let from = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<usize>().ok())
        .map_or(0, |seen| seen + 1);
    Ok(match service.runs.get(&rid) {
        Some(live) => stream_response(live, false, from, ids),
        // Ended, not resumable, no event asked for again: LangGraph's server has nothing more
        // of it to stream.
        None if run.status.is_final() && !ids && !asked => {
            let none = futures_util::stream::empty();
            sse_response(none, location(&id, &rid, false), false, false)
        }
        // Carried out by another server on the database, or ended: its event log.
        None => {
            let frames = stored_frames(Arc::clone(&service.records), rid.clone(), from);
            sse_response(frames, location(&id, &rid, false), false, ids)
        }
    })
}

async fn cancel_run(
    State(service): Api,
    Path((id, rid)): Path<(String, String)>,
    Query(query): Query<HashMap<String, String>>,
) -> Answer {
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
    // As LangGraph's server answers: `{}` once a waited cancel is done, else 202 at once.
    match service.cancel(&id, &rid, why, wait).await? {
        Cancelled::Done => ok(json!({})),
        Cancelled::Asked => Ok(StatusCode::ACCEPTED.into_response()),
    }
}
