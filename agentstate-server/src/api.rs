//! The routes of the LangGraph Agent Server API and their handlers.

use crate::auth::{Action, Caller, Resource};
use crate::branches;
use crate::checkpoints::{
    self, empty_state, interrupt_json, CheckpointConfig, CheckpointId, Checkpoints,
};
use crate::error::{ApiError, ErrorResponse};
use crate::metadata::{run_json, task_id};
use crate::openapi::{
    AssistantPath, CancelParams, CheckpointPath, EventStream, HistoryParams, Run, RunPath,
    RunResult, RunsParams, StreamHeaders, Thread, ThreadPath, ThreadState,
};
use crate::record::{iso8601, now_ms, Record, RunRecord, RunStatus, ThreadRecord, ThreadStatus};
use crate::runs::{metadata_json, stored_frames, Frame, Live, Stop};
use crate::service::{
    missing_checkpoint, thread_missing, Cancelled, Created, RunCreate, Served, Service,
};
use agentstate_graph::Interrupt;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::any;
use axum::Json;
use futures_util::StreamExt;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::Arc;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

type Api = State<Arc<Service>>;
type Answer = Result<Response, ApiError>;

/// Every route, each with its entry in the spec (its `#[utoipa::path]`), but those of what is
/// not served (crons, the store API), which only refuse.
pub(crate) fn routes() -> OpenApiRouter<Arc<Service>> {
    OpenApiRouter::new()
        .routes(routes!(health))
        .routes(routes!(info))
        .routes(routes!(search_assistants))
        .routes(routes!(get_assistant))
        .routes(routes!(assistant_graph))
        .routes(routes!(assistant_schemas))
        .routes(routes!(create_thread))
        .routes(routes!(search_threads))
        .routes(routes!(count_threads))
        .route("/runs/crons", any(not_served))
        .route("/runs/crons/{*rest}", any(not_served))
        .route("/threads/{thread_id}/runs/crons", any(not_served))
        .route("/store/{*rest}", any(not_served))
        .routes(routes!(get_thread, patch_thread, delete_thread))
        .routes(routes!(copy_thread))
        .routes(routes!(thread_state, update_state))
        .routes(routes!(thread_state_at))
        .routes(routes!(history_get, history_post))
        .routes(routes!(list_runs, create_background))
        .routes(routes!(create_stream))
        .routes(routes!(create_wait))
        .routes(routes!(get_run, delete_run))
        .routes(routes!(join_run))
        .routes(routes!(join_stream))
        .routes(routes!(cancel_run))
        .routes(routes!(stateless_background))
        .routes(routes!(stateless_stream))
        .routes(routes!(stateless_wait))
}

/// A JSON body as `T`; an empty body is `T::default()`.
/// A JSON object body as `T`; an empty body is `T::default()`. Anything but an object is
/// refused (serde would read a struct from a JSON array too: `[]` is no thread creation).
fn body<T: DeserializeOwned + Default>(bytes: &Bytes, what: &str) -> Result<T, ApiError> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(T::default());
    }
    let invalid = |e: serde_json::Error| {
        ApiError::unprocessable(format!("the body of {what} is not valid: {e}"))
    };
    match serde_json::from_slice::<Value>(bytes).map_err(invalid)? {
        object @ Value::Object(_) => serde_json::from_value(object).map_err(invalid),
        other => Err(ApiError::unprocessable(format!(
            "the body of {what} is not a JSON object but {}",
            json_kind(&other)
        ))),
    }
}

/// What kind of JSON value `value` is, as a sentence names it.
fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn ok(value: Value) -> Answer {
    Ok(Json(value).into_response())
}

#[utoipa::path(
    get,
    path = "/ok",
    tag = "System",
    summary = "Health Check",
    description = "Whether the server is up (never behind the API key).",
    responses((status = 200, description = "Success", body = Health))
)]
async fn health() -> Json<Health> {
    Json(Health { ok: true })
}

/// `GET /ok`'s answer.
#[derive(Serialize, ToSchema)]
#[schema(as = HealthResponse)]
struct Health {
    /// Indicates the server is healthy.
    ok: bool,
}

/// `GET /info`'s answer (its fields by name, as a JSON object writes them).
#[derive(Serialize, ToSchema)]
#[schema(as = ServerInfo)]
struct Info {
    /// Enabled features and capabilities.
    flags: Flags,
    /// Always `null`: no graph here is LangGraph JS's.
    langgraph_js_version: Option<String>,
    /// This server's version.
    version: &'static str,
}

/// The features `GET /info` says the server has.
#[derive(Serialize, ToSchema)]
struct Flags {
    /// Assistants are served.
    assistants: bool,
    /// No crons.
    crons: bool,
    /// No LangSmith.
    langsmith: bool,
    /// No LangSmith tracing replicas.
    langsmith_tracing_replicas: bool,
}

#[utoipa::path(
    get,
    path = "/info",
    tag = "System",
    summary = "Server Information",
    description = "The server's version and feature flags.",
    responses((status = 200, description = "Success", body = Info))
)]
async fn info() -> Json<Info> {
    Json(Info {
        flags: Flags {
            assistants: true,
            crons: false,
            langsmith: false,
            langsmith_tracing_replicas: false,
        },
        langgraph_js_version: None,
        version: env!("CARGO_PKG_VERSION"),
    })
}

// ---- assistants ----

/// An assistant, as LangGraph's server shows the one it made for a graph (its fields by name,
/// as a JSON object writes them).
#[derive(Serialize, ToSchema)]
struct Assistant {
    /// The assistant's id: the UUID v5 of its graph id.
    assistant_id: String,
    /// Its config (none).
    config: Map<String, Value>,
    /// Its context (none).
    context: Map<String, Value>,
    /// When it was made (never: the epoch).
    created_at: String,
    /// Its description (none).
    description: Option<String>,
    /// Its graph.
    graph_id: String,
    /// Its metadata: `{"created_by": "system"}`.
    metadata: Map<String, Value>,
    /// Its name: its graph id.
    name: String,
    /// When it was last updated (the epoch).
    updated_at: String,
    /// Its version: 1.
    version: u32,
}

impl Assistant {
    /// The assistant of `served`.
    fn of(served: &Served) -> Self {
        let epoch = iso8601(0);
        Assistant {
            assistant_id: served.assistant_id.clone(),
            config: Map::new(),
            context: Map::new(),
            created_at: epoch.clone(),
            description: None,
            graph_id: served.graph_id.clone(),
            metadata: served.metadata(),
            name: served.graph_id.clone(),
            updated_at: epoch,
            version: 1,
        }
    }
}

/// Assistant `id`, if `caller` may read it (one the rules hide is missing).
fn served<'a>(service: &'a Service, caller: &Caller, id: &str) -> Result<&'a Served, ApiError> {
    service
        .assistant_for(caller, id, Action::Read)?
        .ok_or_else(|| ApiError::not_found(format!("assistant `{id}` does not exist")))
}

/// An assistant search: the fields this server reads.
#[derive(Deserialize, Default, ToSchema)]
#[serde(default)]
#[schema(as = AssistantSearchRequest)]
struct AssistantSearch {
    /// Only the assistant of this graph.
    graph_id: Option<String>,
    /// At most this many (10 by default).
    limit: Option<usize>,
    /// After skipping this many.
    offset: Option<usize>,
}

#[utoipa::path(
    post,
    path = "/assistants/search",
    tag = "Assistants",
    summary = "Search Assistants",
    description = "The assistants of the served graphs (one each), the last served first.",
    request_body = AssistantSearch,
    responses(
        (status = 200, description = "Success", body = Vec<Assistant>),
        (status = 422, description = "Validation Error", body = ErrorResponse),
    )
)]
async fn search_assistants(State(service): Api, caller: Caller, bytes: Bytes) -> Answer {
    let query: AssistantSearch = body(&bytes, "an assistant search")?;
    let filter = caller.decide(Resource::Assistants, Action::Search, None, &mut Map::new())?;
    // The newest first, as LangGraph's server lists the assistants it made for its graphs, in
    // their order: the last served first.
    let found: Vec<Assistant> = service
        .assistants
        .iter()
        .rev()
        .filter(|a| query.graph_id.as_ref().is_none_or(|g| *g == a.graph_id))
        .filter(|a| filter.as_ref().is_none_or(|f| f.matches(&a.metadata())))
        .skip(query.offset.unwrap_or(0))
        .take(query.limit.unwrap_or(10))
        .map(Assistant::of)
        .collect();
    Ok(Json(found).into_response())
}

#[utoipa::path(
    get,
    path = "/assistants/{assistant_id}",
    tag = "Assistants",
    summary = "Get Assistant",
    description = "An assistant, by its id or its graph id.",
    params(AssistantPath),
    responses(
        (status = 200, description = "Success", body = Assistant),
        (status = 404, description = "Not Found", body = ErrorResponse),
    )
)]
async fn get_assistant(State(service): Api, caller: Caller, Path(id): Path<String>) -> Answer {
    match service.assistant_for(&caller, &id, Action::Read)? {
        Some(served) => Ok(Json(Assistant::of(served)).into_response()),
        // As LangGraph's server answers it.
        None => Err(ApiError::not_found("Not Found")),
    }
}

/// The graph as LangGraph draws it: its nodes between `__start__` and `__end__`, and every
/// edge, sorted (a conditional one marked so).
#[utoipa::path(
    get,
    path = "/assistants/{assistant_id}/graph",
    tag = "Assistants",
    summary = "Get Assistant Graph",
    description = "The assistant's graph: its nodes (`__start__` and `__end__` included) and its edges.",
    params(AssistantPath),
    responses(
        (status = 200, description = "Success", body = Object),
        (status = 404, description = "Not Found", body = ErrorResponse),
    )
)]
async fn assistant_graph(State(service): Api, caller: Caller, Path(id): Path<String>) -> Answer {
    let served = served(&service, &caller, &id)?;
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

/// A graph's schemas (its state's, as its input, output and state).
#[derive(Serialize, ToSchema)]
struct GraphSchema {
    /// Its config's schema (none).
    config_schema: Option<Value>,
    /// Its context's schema (none).
    context_schema: Option<Value>,
    /// The graph.
    graph_id: String,
    /// Its input's schema: its state's.
    input_schema: Value,
    /// Its output's schema: its state's.
    output_schema: Value,
    /// Its state's schema.
    state_schema: Value,
}

#[utoipa::path(
    get,
    path = "/assistants/{assistant_id}/schemas",
    tag = "Assistants",
    summary = "Get Assistant Schemas",
    description = "The JSON Schemas of the assistant's graph (by assistant id only, as LangGraph's server reads them).",
    params(AssistantPath),
    responses(
        (status = 200, description = "Success", body = GraphSchema),
        (status = 404, description = "Not Found", body = ErrorResponse),
        (status = 422, description = "Validation Error", body = ErrorResponse),
    )
)]
async fn assistant_schemas(State(service): Api, caller: Caller, Path(id): Path<String>) -> Answer {
    if uuid::Uuid::parse_str(&id).is_err() {
        // LangGraph's server reads schemas by assistant id only.
        return Err(ApiError::unprocessable(
            "Invalid assistant ID: must be a UUID",
        ));
    }
    let served = served(&service, &caller, &id)?;
    let state = served.assistant.state_schema();
    let schemas = GraphSchema {
        config_schema: None,
        context_schema: None,
        graph_id: served.graph_id.clone(),
        input_schema: state.clone(),
        output_schema: state.clone(),
        state_schema: state,
    };
    Ok(Json(schemas).into_response())
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

/// A thread's creation: the fields this server reads.
#[derive(Deserialize, Default, ToSchema)]
#[serde(default)]
struct ThreadCreate {
    /// The thread's id (a new UUID by default).
    thread_id: Option<String>,
    /// Its metadata.
    metadata: Option<Map<String, Value>>,
    /// `raise` (the default: 409) or `do_nothing` (answers the existing thread) when it
    /// exists.
    if_exists: Option<String>,
}

#[utoipa::path(
    post,
    path = "/threads",
    tag = "Threads",
    summary = "Create Thread",
    description = "Creates a thread (`if_exists: do_nothing`: answers the existing one).",
    request_body = ThreadCreate,
    responses(
        (status = 200, description = "Success", body = Thread),
        (status = 409, description = "Conflict", body = ErrorResponse),
        (status = 422, description = "Validation Error", body = ErrorResponse),
    )
)]
async fn create_thread(State(service): Api, caller: Caller, bytes: Bytes) -> Answer {
    let create: ThreadCreate = body(&bytes, "a thread creation")?;
    let id = create
        .thread_id
        .unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
    agentstate_store::check_id(&id)
        .map_err(|e| ApiError::unprocessable(format!("thread id `{id}` is not valid: {e}")))?;
    let mut metadata = create.metadata.unwrap_or_default();
    let filter = caller.decide(Resource::Threads, Action::Create, Some(&id), &mut metadata)?;
    if let Some(existing) = service.records.thread(&id).await? {
        // Another user's is not given, whatever `if_exists` says (as LangGraph's server).
        let theirs = filter.is_some_and(|f| !f.matches(&existing.metadata));
        return match create.if_exists.as_deref() {
            Some("do_nothing") if !theirs => ok(thread_json(&service, &existing).await?),
            _ => Err(ApiError::conflict(format!(
                "Thread with ID {id} already exists"
            ))),
        };
    }
    let thread = ThreadRecord::new(&id, metadata, now_ms());
    service.records.put(Record::Thread(thread.clone())).await?;
    ok(thread_json(&service, &thread).await?)
}

/// A thread search or count: the fields this server reads.
#[derive(Deserialize, Default, ToSchema)]
#[serde(default)]
#[schema(as = ThreadSearchRequest)]
struct ThreadSearch {
    /// Only the threads whose metadata has these keys and values.
    metadata: Option<Map<String, Value>>,
    /// Only the threads whose state's values have these keys and values.
    values: Option<Map<String, Value>>,
    /// Only the threads of this status.
    #[schema(value_type = Option<crate::openapi::ThreadStatus>)]
    status: Option<ThreadStatus>,
    /// Only these threads.
    ids: Option<Vec<String>>,
    /// At most this many (10 by default; a count counts them all).
    limit: Option<usize>,
    /// After skipping this many.
    offset: Option<usize>,
    /// `thread_id`, `status`, `created_at`, `updated_at` (the default) or `state_updated_at`.
    sort_by: Option<String>,
    /// `desc` (the default) or `asc`.
    sort_order: Option<String>,
}

impl ThreadSearch {
    /// The threads it finds of those `caller` may search, in its order (LangGraph's: the last
    /// updated first), before its offset and limit; those filtered by values read their state.
    async fn find(
        &self,
        service: &Service,
        caller: &Caller,
    ) -> Result<Vec<ThreadRecord>, ApiError> {
        let mine = caller.decide(Resource::Threads, Action::Search, None, &mut Map::new())?;
        let mut threads = service.records.threads().await?;
        threads.retain(|t| {
            mine.as_ref().is_none_or(|f| f.matches(&t.metadata))
                && self.status.is_none_or(|s| s == t.status)
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

#[utoipa::path(
    post,
    path = "/threads/search",
    tag = "Threads",
    summary = "Search Threads",
    description = "The threads whose metadata, values, status and ids match, sorted and paged.",
    request_body = ThreadSearch,
    responses(
        (status = 200, description = "Success", body = Vec<Thread>),
        (status = 422, description = "Validation Error", body = ErrorResponse),
    )
)]
async fn search_threads(State(service): Api, caller: Caller, bytes: Bytes) -> Answer {
    let search: ThreadSearch = body(&bytes, "a thread search")?;
    let threads = search.find(&service, &caller).await?;
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
#[utoipa::path(
    post,
    path = "/threads/count",
    tag = "Threads",
    summary = "Count Threads",
    description = "How many threads a search finds.",
    request_body = ThreadSearch,
    responses(
        (status = 200, description = "Success", content_type = "application/json", body = usize),
        (status = 422, description = "Validation Error", body = ErrorResponse),
    )
)]
async fn count_threads(State(service): Api, caller: Caller, bytes: Bytes) -> Answer {
    let search: ThreadSearch = body(&bytes, "a thread count")?;
    ok(Value::from(search.find(&service, &caller).await?.len()))
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

#[utoipa::path(
    get,
    path = "/threads/{thread_id}",
    tag = "Threads",
    summary = "Get Thread",
    description = "A thread.",
    params(ThreadPath),
    responses(
        (status = 200, description = "Success", body = Thread),
        (status = 404, description = "Not Found", body = ErrorResponse),
    )
)]
async fn get_thread(State(service): Api, caller: Caller, Path(id): Path<String>) -> Answer {
    let thread = service.thread_for(&caller, &id, Action::Read).await?;
    ok(thread_json(&service, &thread).await?)
}

/// A thread's patch.
#[derive(Deserialize, Default, ToSchema)]
#[serde(default)]
struct ThreadPatch {
    /// Metadata merged into the thread's (key by key).
    metadata: Option<Map<String, Value>>,
}

#[utoipa::path(
    patch,
    path = "/threads/{thread_id}",
    tag = "Threads",
    summary = "Patch Thread",
    description = "Merges metadata into a thread's.",
    params(ThreadPath),
    request_body = ThreadPatch,
    responses(
        (status = 200, description = "Success", body = Thread),
        (status = 404, description = "Not Found", body = ErrorResponse),
        (status = 422, description = "Validation Error", body = ErrorResponse),
    )
)]
async fn patch_thread(
    State(service): Api,
    caller: Caller,
    Path(id): Path<String>,
    bytes: Bytes,
) -> Answer {
    let patch: ThreadPatch = body(&bytes, &format!("the patch of thread `{id}`"))?;
    let mut merged = patch.metadata.unwrap_or_default();
    let filter = caller.decide(Resource::Threads, Action::Update, Some(&id), &mut merged)?;
    let mut thread = service.thread_record(&id).await?;
    if filter.is_some_and(|f| !f.matches(&thread.metadata)) {
        return Err(thread_missing(&id));
    }
    thread.metadata.extend(merged);
    thread.updated_ms = now_ms();
    service.records.put(Record::Thread(thread.clone())).await?;
    ok(thread_json(&service, &thread).await?)
}

#[utoipa::path(
    delete,
    path = "/threads/{thread_id}",
    tag = "Threads",
    summary = "Delete Thread",
    description = "Deletes a thread, its runs (stopped first), their events, its state and its branches.",
    params(ThreadPath),
    responses(
        (status = 204, description = "Deleted"),
        (status = 404, description = "Not Found", body = ErrorResponse),
    )
)]
async fn delete_thread(State(service): Api, caller: Caller, Path(id): Path<String>) -> Answer {
    service.thread_for(&caller, &id, Action::Delete).await?;
    service.delete_thread(&id).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// LangGraph's thread copy: a new thread (a new UUID) with the source's metadata, graph,
/// status, state and history, whose rows are its own; not its runs. A thread no run made a
/// state for yet is copied as its record alone. Refused (409) while a run is in progress on
/// the source.
#[utoipa::path(
    post,
    path = "/threads/{thread_id}/copy",
    tag = "Threads",
    summary = "Copy Thread",
    description = "A new thread with the thread's metadata, status, state, history and branches (not its runs).",
    params(ThreadPath),
    responses(
        (status = 200, description = "Success", body = Thread),
        (status = 404, description = "Not Found", body = ErrorResponse),
        (status = 409, description = "Conflict", body = ErrorResponse),
    )
)]
async fn copy_thread(State(service): Api, caller: Caller, Path(id): Path<String>) -> Answer {
    let source = service.thread_for(&caller, &id, Action::Read).await?;
    // The copy is a creation of its user's: its metadata as the rules stamp it.
    let new_id = uuid::Uuid::new_v4().to_string();
    let mut metadata = source.metadata.clone();
    caller.decide(
        Resource::Threads,
        Action::Create,
        Some(&new_id),
        &mut metadata,
    )?;
    if let Some(running) = service.running_on(&id).await? {
        return Err(ApiError::conflict(format!(
            "thread `{id}` is busy with run `{running}`; it cannot be copied until it ends"
        )));
    }
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
        metadata,
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
async fn state_json(
    service: &Service,
    caller: &Caller,
    id: &str,
    at: Option<CheckpointId>,
) -> Answer {
    let thread = service.thread_for(caller, id, Action::Read).await?;
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

#[utoipa::path(
    get,
    path = "/threads/{thread_id}/state",
    tag = "Threads",
    summary = "Get Thread State",
    description = "The thread's state now: its values, next nodes, tasks with their interrupts, and checkpoint.",
    params(ThreadPath),
    responses(
        (status = 200, description = "Success", body = ThreadState),
        (status = 404, description = "Not Found", body = ErrorResponse),
    )
)]
async fn thread_state(State(service): Api, caller: Caller, Path(id): Path<String>) -> Answer {
    state_json(&service, &caller, &id, None).await
}

/// A state update (LangGraph's `update_state`).
#[derive(Deserialize, Default, ToSchema)]
#[serde(default)]
#[schema(as = ThreadStateUpdate)]
struct StateUpdate {
    /// The update, merged through the state's reducers.
    values: Option<Value>,
    /// The node it is made as (where the thread goes on from).
    as_node: Option<String>,
    /// The checkpoint to update at (an earlier one: a fork).
    checkpoint_id: Option<String>,
    /// The checkpoint to update at, as its config (`{"checkpoint_id": ...}`).
    checkpoint: Option<Value>,
}

/// LangGraph's `update_state`: the values as a node's update, on a thread with no run in
/// progress.
#[utoipa::path(
    post,
    path = "/threads/{thread_id}/state",
    tag = "Threads",
    summary = "Update Thread State",
    description = "Merges values into the thread's state as a node's update (`as_node`), at its head or at an earlier checkpoint (a fork).",
    params(ThreadPath),
    request_body = StateUpdate,
    responses(
        (status = 200, description = "Success", body = ThreadStateUpdateResponse),
        (status = 404, description = "Not Found", body = ErrorResponse),
        (status = 409, description = "Conflict", body = ErrorResponse),
        (status = 422, description = "Validation Error", body = ErrorResponse),
    )
)]
async fn update_state(
    State(service): Api,
    caller: Caller,
    Path(id): Path<String>,
    bytes: Bytes,
) -> Answer {
    let update: StateUpdate = body(&bytes, &format!("the state update of thread `{id}`"))?;
    let checkpoint = match (&update.checkpoint_id, &update.checkpoint) {
        (Some(c), _) => Some(c.clone()),
        (None, Some(c)) => c["checkpoint_id"].as_str().map(str::to_owned),
        (None, None) => None,
    };
    let checkpoint = checkpoint.map(|c| checkpoint_id(&id, &c)).transpose()?;
    let mut thread = service.thread_for(&caller, &id, Action::Update).await?;
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
    let made = ThreadStateUpdateResponse {
        checkpoint: CheckpointConfig::at(&id, checkpoint),
        checkpoint_id: checkpoint.to_string(),
        configurable: CheckpointConfig::at(&id, checkpoint),
    };
    Ok(Json(made).into_response())
}

/// What a state update made (its fields by name, as a JSON object writes them).
#[derive(Serialize, ToSchema)]
struct ThreadStateUpdateResponse {
    /// The checkpoint it made.
    checkpoint: CheckpointConfig,
    /// Its id.
    checkpoint_id: String,
    /// Its address, as a run's `configurable`.
    configurable: CheckpointConfig,
}

/// Checkpoint id `checkpoint` of thread `thread`, read.
fn checkpoint_id(thread: &str, checkpoint: &str) -> Result<CheckpointId, ApiError> {
    CheckpointId::parse(checkpoint).ok_or_else(|| {
        ApiError::unprocessable(format!(
            "checkpoint `{checkpoint}` of thread `{thread}` is not one of its checkpoint ids (`5`, or `5-input` for a run's input)"
        ))
    })
}

#[utoipa::path(
    get,
    path = "/threads/{thread_id}/state/{checkpoint_id}",
    tag = "Threads",
    summary = "Get Thread State At Checkpoint",
    description = "The thread's state at a checkpoint, of its head or of a branch.",
    params(CheckpointPath),
    responses(
        (status = 200, description = "Success", body = ThreadState),
        (status = 404, description = "Not Found", body = ErrorResponse),
        (status = 422, description = "Validation Error", body = ErrorResponse),
    )
)]
async fn thread_state_at(
    State(service): Api,
    caller: Caller,
    Path((id, checkpoint)): Path<(String, String)>,
) -> Answer {
    let at = checkpoint_id(&id, &checkpoint)?;
    state_json(&service, &caller, &id, Some(at)).await
}

/// A history query: the fields this server reads.
#[derive(Deserialize, Default, ToSchema)]
#[serde(default)]
#[schema(as = ThreadStateSearch)]
struct HistoryQuery {
    /// At most this many checkpoints (10 by default).
    limit: Option<usize>,
}

/// Thread `id`'s checkpoints on every branch, the newest first, at most `limit` (10 by
/// default); the head with the questions the thread waits for there.
async fn history(service: &Service, caller: &Caller, id: &str, limit: Option<usize>) -> Answer {
    let thread = service.thread_for(caller, id, Action::Read).await?;
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

#[utoipa::path(
    get,
    path = "/threads/{thread_id}/history",
    tag = "Threads",
    summary = "Get Thread History",
    description = "The thread's checkpoints on every branch, the newest first.",
    params(ThreadPath, HistoryParams),
    responses(
        (status = 200, description = "Success", body = Vec<ThreadState>),
        (status = 404, description = "Not Found", body = ErrorResponse),
    )
)]
async fn history_get(
    State(service): Api,
    caller: Caller,
    Path(id): Path<String>,
    Query(query): Query<HashMap<String, String>>,
) -> Answer {
    let limit = query.get("limit").and_then(|l| l.parse().ok());
    history(&service, &caller, &id, limit).await
}

#[utoipa::path(
    post,
    path = "/threads/{thread_id}/history",
    tag = "Threads",
    summary = "Get Thread History Post",
    description = "The thread's checkpoints on every branch, the newest first.",
    params(ThreadPath),
    request_body = HistoryQuery,
    responses(
        (status = 200, description = "Success", body = Vec<ThreadState>),
        (status = 404, description = "Not Found", body = ErrorResponse),
        (status = 422, description = "Validation Error", body = ErrorResponse),
    )
)]
async fn history_post(
    State(service): Api,
    caller: Caller,
    Path(id): Path<String>,
    bytes: Bytes,
) -> Answer {
    let query: HistoryQuery = body(&bytes, &format!("the history query of thread `{id}`"))?;
    history(&service, &caller, &id, query.limit).await
}

// ---- runs ----

/// Where a run is read: `/threads/{t}/runs/{r}` (`/runs/{r}` for a stateless run).
fn location(thread: &str, run: &str, stateless: bool) -> HeaderValue {
    let (thread, run) = (segment(thread), segment(run));
    let path = match stateless {
        true => format!("/runs/{run}"),
        false => format!("/threads/{thread}/runs/{run}"),
    };
    // Percent-encoded: visible ASCII.
    HeaderValue::from_str(&path).unwrap_or(HeaderValue::from_static("/runs"))
}

/// What a URL path segment cannot hold as it is (RFC 3986's reserved and unsafe characters,
/// besides controls and non-ASCII): an id with `/`, `?` or a space stays one segment.
const SEGMENT: &percent_encoding::AsciiSet = &percent_encoding::CONTROLS
    .add(b' ')
    .add(b'"')
    .add(b'#')
    .add(b'%')
    .add(b'/')
    .add(b'<')
    .add(b'>')
    .add(b'?')
    .add(b'`')
    .add(b'{')
    .add(b'}');

/// Id `id` as one URL path segment.
fn segment(id: &str) -> String {
    percent_encoding::utf8_percent_encode(id, SEGMENT).to_string()
}

/// Whether run `run` was created resumable (`stream_resumable`): its streams give each event
/// its number as its SSE `id`, and its events are streamed again after it ended.
fn resumable(run: &RunRecord) -> bool {
    run.kwargs.get("stream_resumable").and_then(Value::as_bool) == Some(true)
}

/// The SSE response of a run's frames from the one numbered `from` (`ids`: each with its
/// number as its `id`).
fn stream_response(
    service: &Service,
    live: Arc<Live>,
    stateless: bool,
    from: usize,
    ids: bool,
) -> Response {
    let where_ = location(&live.thread_id, &live.run_id, stateless);
    let frames = live.frames(Arc::clone(&service.records), from);
    sse_response(frames, where_, stateless, ids)
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
        Some(live) => live.frames(Arc::clone(&service.records), 0).boxed(),
        // Queued: its `metadata`, written with its records, streamed at once; the rest as its
        // worker stores it.
        None => {
            let run_id = &created.run.run_id;
            let metadata = Frame {
                event: "metadata".to_owned(),
                data: metadata_json(run_id, 1),
            };
            let following = service.follow(run_id);
            let rest = stored_frames(Arc::clone(&service.records), following, 1, true);
            futures_util::stream::once(std::future::ready((0, metadata)))
                .chain(rest)
                .boxed()
        }
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

#[utoipa::path(
    post,
    path = "/threads/{thread_id}/runs/stream",
    tag = "Thread Runs",
    summary = "Create Run, Stream Output",
    description = "Creates a run on the thread and streams its events.",
    params(ThreadPath),
    request_body = RunCreate,
    responses(
        (status = 200, description = "Success: the run's events, as server-sent events", content_type = "text/event-stream", body = EventStream),
        (status = 404, description = "Not Found", body = ErrorResponse),
        (status = 409, description = "Conflict", body = ErrorResponse),
        (status = 422, description = "Validation Error", body = ErrorResponse),
    )
)]
async fn create_stream(
    State(service): Api,
    caller: Caller,
    Path(id): Path<String>,
    bytes: Bytes,
) -> Answer {
    let created = service
        .create_run(&caller, Some(&id), body(&bytes, "a run request")?)
        .await?;
    Ok(created_stream(&service, created))
}

#[utoipa::path(
    post,
    path = "/threads/{thread_id}/runs/wait",
    tag = "Thread Runs",
    summary = "Create Run, Wait for Output",
    description = "Creates a run on the thread and answers its final state once it ended.",
    params(ThreadPath),
    request_body = RunCreate,
    responses(
        (status = 200, description = "Success", body = RunResult),
        (status = 404, description = "Not Found", body = ErrorResponse),
        (status = 409, description = "Conflict", body = ErrorResponse),
        (status = 422, description = "Validation Error", body = ErrorResponse),
    )
)]
async fn create_wait(
    State(service): Api,
    caller: Caller,
    Path(id): Path<String>,
    bytes: Bytes,
) -> Answer {
    let created = service
        .create_run(&caller, Some(&id), body(&bytes, "a run request")?)
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

#[utoipa::path(
    post,
    path = "/threads/{thread_id}/runs",
    tag = "Thread Runs",
    summary = "Create Background Run",
    description = "Creates a run on the thread and answers it at once.",
    params(ThreadPath),
    request_body = RunCreate,
    responses(
        (status = 200, description = "Success", body = Run),
        (status = 404, description = "Not Found", body = ErrorResponse),
        (status = 409, description = "Conflict", body = ErrorResponse),
        (status = 422, description = "Validation Error", body = ErrorResponse),
    )
)]
async fn create_background(
    State(service): Api,
    caller: Caller,
    Path(id): Path<String>,
    bytes: Bytes,
) -> Answer {
    let created = service
        .create_run(&caller, Some(&id), body(&bytes, "a run request")?)
        .await?;
    Ok(run_answer(&service, &created))
}

#[utoipa::path(
    post,
    path = "/runs/stream",
    tag = "Stateless Runs",
    summary = "Create Run, Stream Output",
    description = "Creates a run on a thread of its own and streams its events.",
    request_body = RunCreate,
    responses(
        (status = 200, description = "Success: the run's events, as server-sent events", content_type = "text/event-stream", body = EventStream),
        (status = 422, description = "Validation Error", body = ErrorResponse),
    )
)]
async fn stateless_stream(State(service): Api, caller: Caller, bytes: Bytes) -> Answer {
    let created = service
        .create_run(&caller, None, body(&bytes, "a run request")?)
        .await?;
    Ok(created_stream(&service, created))
}

#[utoipa::path(
    post,
    path = "/runs/wait",
    tag = "Stateless Runs",
    summary = "Create Run, Wait for Output",
    description = "Creates a run on a thread of its own and answers its final state once it ended.",
    request_body = RunCreate,
    responses(
        (status = 200, description = "Success", body = RunResult),
        (status = 422, description = "Validation Error", body = ErrorResponse),
    )
)]
async fn stateless_wait(State(service): Api, caller: Caller, bytes: Bytes) -> Answer {
    let created = service
        .create_run(&caller, None, body(&bytes, "a run request")?)
        .await?;
    created_wait(&service, created).await
}

#[utoipa::path(
    post,
    path = "/runs",
    tag = "Stateless Runs",
    summary = "Create Background Run",
    description = "Creates a run on a thread of its own and answers it at once.",
    request_body = RunCreate,
    responses(
        (status = 200, description = "Success", body = Run),
        (status = 422, description = "Validation Error", body = ErrorResponse),
    )
)]
async fn stateless_background(State(service): Api, caller: Caller, bytes: Bytes) -> Answer {
    let created = service
        .create_run(&caller, None, body(&bytes, "a run request")?)
        .await?;
    Ok(run_answer(&service, &created))
}

#[utoipa::path(
    get,
    path = "/threads/{thread_id}/runs/{run_id}",
    tag = "Thread Runs",
    summary = "Get Run",
    description = "A run of the thread.",
    params(RunPath),
    responses(
        (status = 200, description = "Success", body = Run),
        (status = 404, description = "Not Found", body = ErrorResponse),
    )
)]
async fn get_run(
    State(service): Api,
    caller: Caller,
    Path((id, rid)): Path<(String, String)>,
) -> Answer {
    service.thread_for(&caller, &id, Action::Read).await?;
    let run = service.run_record(&id, &rid).await?;
    ok(run_json(
        &run,
        &service.assistant_id_of(&run),
        service.api_url().as_deref(),
    ))
}

#[utoipa::path(
    get,
    path = "/threads/{thread_id}/runs",
    tag = "Thread Runs",
    summary = "List Runs",
    description = "The thread's runs, the newest first.",
    params(ThreadPath, RunsParams),
    responses(
        (status = 200, description = "Success", body = Vec<Run>),
        (status = 404, description = "Not Found", body = ErrorResponse),
        (status = 422, description = "Validation Error", body = ErrorResponse),
    )
)]
async fn list_runs(
    State(service): Api,
    caller: Caller,
    Path(id): Path<String>,
    Query(query): Query<HashMap<String, String>>,
) -> Answer {
    service.thread_for(&caller, &id, Action::Read).await?;
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

#[utoipa::path(
    delete,
    path = "/threads/{thread_id}/runs/{run_id}",
    tag = "Thread Runs",
    summary = "Delete Run",
    description = "Deletes an ended run and its events.",
    params(RunPath),
    responses(
        (status = 204, description = "Deleted"),
        (status = 404, description = "Not Found", body = ErrorResponse),
        (status = 409, description = "Conflict", body = ErrorResponse),
    )
)]
async fn delete_run(
    State(service): Api,
    caller: Caller,
    Path((id, rid)): Path<(String, String)>,
) -> Answer {
    // Another user's thread: as LangGraph's server answers it.
    service
        .check_thread(&caller, &id, Action::Delete, "Not Found")
        .await?;
    service.delete_run(&id, &rid).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

#[utoipa::path(
    get,
    path = "/threads/{thread_id}/runs/{run_id}/join",
    tag = "Thread Runs",
    summary = "Join Run",
    description = "Waits for the run to end, and answers the thread's final state.",
    params(RunPath),
    responses(
        (status = 200, description = "Success", body = RunResult),
        (status = 404, description = "Not Found", body = ErrorResponse),
    )
)]
async fn join_run(
    State(service): Api,
    caller: Caller,
    Path((id, rid)): Path<(String, String)>,
) -> Answer {
    // Another user's thread, or none: as LangGraph's server answers it.
    service
        .check_thread(&caller, &id, Action::Read, "Thread not found")
        .await?;
    ok(service.join(&id, &rid).await?)
}

/// A run's stream joined: from its first event, or after the one a reconnecting client names
/// in `Last-Event-ID` (`-1`: from the first).
#[utoipa::path(
    get,
    path = "/threads/{thread_id}/runs/{run_id}/stream",
    tag = "Thread Runs",
    summary = "Join Run Stream",
    description = "Streams the run's events: from the first, or after the one `Last-Event-ID` names.",
    params(RunPath, StreamHeaders),
    responses(
        (status = 200, description = "Success: the run's events, as server-sent events", content_type = "text/event-stream", body = EventStream),
        (status = 404, description = "Not Found", body = ErrorResponse),
    )
)]
async fn join_stream(
    State(service): Api,
    caller: Caller,
    Path((id, rid)): Path<(String, String)>,
    headers: HeaderMap,
) -> Answer {
    service
        .check_thread(&caller, &id, Action::Read, "Not Found")
        .await?;
    let run = service.run_record(&id, &rid).await?;
    // A client that reconnects with `Last-Event-ID` gets the ids to reconnect with again.
    let asked = headers.contains_key("last-event-id");
    let ids = resumable(&run) || asked;
    let from = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
        // Past the last number an event log can hold: nothing more.
        .map_or(0, |seen| {
            seen.saturating_add(1).min(i64::MAX as u64) as usize
        });
    Ok(match service.runs.get(&rid) {
        // In progress here, from an event this attempt streams (those before it, of its earlier
        // attempts or announced by the server that queued it, are in its event log).
        Some(live) if from >= live.base() => stream_response(&service, live, false, from, ids),
        // Ended, not resumable, no event asked for again: LangGraph's server has nothing more
        // of it to stream.
        None if run.status.is_final() && !ids && !asked => {
            let none = futures_util::stream::empty();
            sse_response(none, location(&id, &rid, false), false, false)
        }
        // Carried out by another server on the database, or ended, or from an event before
        // this attempt's: its event log.
        _ => {
            let frames = stored_frames(
                Arc::clone(&service.records),
                service.follow(&rid),
                from,
                false,
            );
            sse_response(frames, location(&id, &rid, false), false, ids)
        }
    })
}

#[utoipa::path(
    post,
    path = "/threads/{thread_id}/runs/{run_id}/cancel",
    tag = "Thread Runs",
    summary = "Cancel Run",
    description = "Stops the run (`action=rollback`: and removes what it did); with `wait`, answers once it ended.",
    params(RunPath, CancelParams),
    responses(
        (status = 200, description = "Success", body = Object),
        (status = 202, description = "Accepted: the run is asked to stop"),
        (status = 404, description = "Not Found", body = ErrorResponse),
        (status = 422, description = "Validation Error", body = ErrorResponse),
    )
)]
async fn cancel_run(
    State(service): Api,
    caller: Caller,
    Path((id, rid)): Path<(String, String)>,
    Query(query): Query<HashMap<String, String>>,
) -> Answer {
    // Another user's thread, or none: as LangGraph's server answers it.
    service
        .check_thread(&caller, &id, Action::Update, "No runs found to cancel.")
        .await?;
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
