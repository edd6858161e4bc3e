//! The OpenAPI spec of the served API (`GET /openapi.json`) and its reference page (`GET
//! /docs`), as LangGraph's server serves them: the spec generated from the routes'
//! `#[utoipa::path]` annotations and their types' schemas (the routes and their entries are
//! registered together, by `utoipa_axum`'s `routes!`), then patched as the reference patches
//! its own: the served graphs' ids as `graph_id`'s enum, and the `x-api-key` scheme when the
//! server has a key. The page is the reference's: Scalar's API reference with the spec inlined.
//!
//! The schemas here are named and shaped as the reference's spec names them. Most describe
//! answers that the handlers build as JSON (a thread, a run, a state...) and serve only the
//! spec; the answers the handlers build from a type (an assistant, a checkpoint's address...)
//! are described by that type.

use crate::checkpoints::CheckpointConfig;
use axum::extract::Extension;
use axum::http::header;
use axum::response::{Html, IntoResponse, Response};
use serde_json::{Map, Value};
use std::sync::Arc;
use utoipa::{IntoParams, OpenApi, ToSchema};

/// What the spec starts from: its title and the tags of its routes (the reference's, with
/// their descriptions, and AG-UI's).
#[derive(OpenApi)]
#[openapi(
    info(
        title = "agentstate-server",
        description = "The LangGraph Agent Server API over agentstate's durable graphs, and an AG-UI endpoint."
    ),
    tags(
        (name = "Assistants", description = "An assistant is a configured instance of a graph."),
        (name = "Threads", description = "A thread contains the accumulated outputs of a group of runs."),
        (name = "Thread Runs", description = "A run is an invocation of a graph / assistant on a thread. It updates the state of the thread."),
        (name = "Stateless Runs", description = "A run is an invocation of a graph / assistant, with no state or memory persistence."),
        (name = "AG-UI", description = "A run of a graph as an AG-UI agent: a `RunAgentInput` in, AG-UI events out."),
        (name = "System", description = "System endpoints for health checks, metrics, and server information."),
    )
)]
pub(crate) struct ApiDoc;

/// The spec as served, and the page that shows it: made once, when the server is built.
pub(crate) struct Docs {
    json: String,
    page: String,
}

impl Docs {
    /// The spec `openapi` (the routes' entries) patched for the server that serves
    /// `graph_ids`, with an API key or not, and its page.
    pub(crate) fn new(
        openapi: utoipa::openapi::OpenApi,
        graph_ids: &[String],
        keyed: bool,
    ) -> Self {
        let mut spec = serde_json::to_value(&openapi).unwrap_or(Value::Null);
        patch(&mut spec, graph_ids, keyed);
        let json = spec.to_string();
        let page = page(&json);
        Docs { json, page }
    }
}

/// The schemas whose `graph_id` the reference's spec enumerates (those this server has).
const GRAPH_ID_SCHEMAS: [&str; 3] = ["Assistant", "GraphSchema", "AssistantSearchRequest"];

/// The reference's patches: the graph ids as `graph_id`'s enum; with a key, the `x-api-key`
/// scheme, required by every route but those it does not guard (`/ok`, `/docs`).
fn patch(spec: &mut Value, graph_ids: &[String], keyed: bool) {
    for schema in GRAPH_ID_SCHEMAS {
        if let Some(graph_id) = spec
            .pointer_mut(&format!("/components/schemas/{schema}/properties/graph_id"))
            .and_then(Value::as_object_mut)
        {
            graph_id.insert("enum".into(), Value::from(graph_ids.to_vec()));
        }
    }
    if !keyed {
        return;
    }
    let Value::Object(root) = spec else {
        return;
    };
    root.insert("security".into(), serde_json::json!([{"x-api-key": []}]));
    let components = root
        .entry("components")
        .or_insert_with(|| Value::Object(Map::new()));
    if let Value::Object(components) = components {
        components.insert(
            "securitySchemes".into(),
            serde_json::json!({"x-api-key": {"type": "apiKey", "in": "header", "name": "x-api-key"}}),
        );
    }
    for open in crate::server::UNGUARDED {
        if let Some(Value::Object(item)) = root.get_mut("paths").and_then(|p| p.get_mut(open)) {
            for operation in item.values_mut().filter_map(Value::as_object_mut) {
                operation.insert("security".into(), Value::Array(Vec::new()));
            }
        }
    }
}

/// The reference's page (langgraph-api's `DOCS_HTML`): Scalar's API reference, its script
/// from the CDN, configured with the spec inlined.
const PAGE: &str = r#"<!doctype html>
<html>
  <head>
    <title>Agent Server API Reference</title>
    <meta charset="utf-8" />
    <meta
      name="viewport"
      content="width=device-width, initial-scale=1" />
  </head>
  <body>
    <script id="api-reference"></script>
    <script>
      var configuration = __SCALAR_CONFIGURATION_JSON__
      document.getElementById('api-reference').dataset.configuration =
        JSON.stringify(configuration)
    </script>
    <script src="https://cdn.jsdelivr.net/npm/@scalar/api-reference"></script>
  </body>
</html>"#;

/// The page with spec `json` inlined as Scalar's `content`, every `<` escaped (`\u003c`) so
/// that nothing in the spec (a `</script>` in a description) ends the script early.
fn page(json: &str) -> String {
    let configuration = serde_json::json!({ "content": json }).to_string();
    PAGE.replace(
        "__SCALAR_CONFIGURATION_JSON__",
        &configuration.replace('<', "\\u003c"),
    )
}

/// The spec (not in itself, as the reference's is not).
pub(crate) async fn openapi_json(Extension(docs): Extension<Arc<Docs>>) -> Response {
    (
        [(header::CONTENT_TYPE, "application/json")],
        docs.json.clone(),
    )
        .into_response()
}

/// The API's reference page.
#[utoipa::path(
    get,
    path = "/docs",
    tag = "System",
    summary = "API Documentation",
    description = "The API's reference (Scalar's), with this spec inlined.",
    responses((status = 200, description = "Success", content_type = "text/html", body = String))
)]
pub(crate) async fn docs(Extension(docs): Extension<Arc<Docs>>) -> Html<String> {
    Html(docs.page.clone())
}

// ---- schemas of the answers (for the spec only) ----

/// A thread's status.
#[derive(ToSchema)]
#[schema(rename_all = "lowercase")]
#[allow(dead_code)] // A schema: `record::ThreadStatus` is the type.
pub(crate) enum ThreadStatus {
    /// No run in progress.
    Idle,
    /// A run in progress.
    Busy,
    /// Its last run stopped at an interrupt or a breakpoint, or was cancelled.
    Interrupted,
    /// Its last run failed.
    Error,
}

/// A thread.
#[derive(ToSchema)]
#[allow(dead_code)] // A schema: the handlers build the body.
pub(crate) struct Thread {
    /// The thread's id.
    thread_id: String,
    /// When it was created (ISO 8601).
    created_at: String,
    /// When it was last updated.
    updated_at: String,
    /// When its state was last updated.
    state_updated_at: String,
    /// Its metadata.
    metadata: Map<String, Value>,
    /// Its config (`{"configurable": {}}` once a run made its state).
    config: Map<String, Value>,
    /// Its status.
    status: ThreadStatus,
    /// Its state's values, once a run made them.
    values: Option<Value>,
    /// The questions it waits for, by task id.
    #[schema(required = false)]
    interrupts: Option<Map<String, Value>>,
    /// Its last run's error.
    #[schema(required = false)]
    error: Option<Value>,
}

/// A thread's state at a checkpoint.
#[derive(ToSchema)]
#[allow(dead_code)] // A schema: the handlers build the body.
pub(crate) struct ThreadState {
    /// The state's values.
    values: Value,
    /// The nodes that run next.
    next: Vec<String>,
    /// The tasks of the next step, with their interrupts.
    tasks: Vec<Value>,
    /// The checkpoint.
    checkpoint: Option<CheckpointConfig>,
    /// The checkpoint's metadata (its source, step, run...).
    metadata: Option<Map<String, Value>>,
    /// When it was made.
    created_at: Option<String>,
    /// The checkpoint before it.
    parent_checkpoint: Option<CheckpointConfig>,
    /// The questions the thread waits for there.
    interrupts: Vec<Value>,
}

/// A run's status.
#[derive(ToSchema)]
#[schema(rename_all = "lowercase")]
#[allow(dead_code)] // A schema: `record::RunStatus` is the type.
pub(crate) enum RunStatus {
    /// Waiting for its thread or its start (`after_seconds`).
    Pending,
    /// In progress.
    Running,
    /// Failed.
    Error,
    /// Ended (at its end or at an interrupt).
    Success,
    /// Timed out.
    Timeout,
    /// Cancelled.
    Interrupted,
}

/// A run.
#[derive(ToSchema)]
#[allow(dead_code)] // A schema: the handlers build the body.
pub(crate) struct Run {
    /// The run's id.
    run_id: String,
    /// Its thread.
    thread_id: String,
    /// Its assistant.
    assistant_id: String,
    /// When it was created (ISO 8601).
    created_at: String,
    /// When it was last updated.
    updated_at: String,
    /// Its status.
    status: RunStatus,
    /// Its metadata.
    metadata: Map<String, Value>,
    /// Its request, as it was made.
    kwargs: Map<String, Value>,
    /// What it does to a busy thread's runs.
    multitask_strategy: String,
}

/// A run's final state (`wait`, `join`): its values, or its error.
#[derive(ToSchema)]
#[schema(as = RunResult)]
#[allow(dead_code)] // A schema: the handlers build the body.
pub(crate) struct RunResult(Value);

/// A run's events, as server-sent events.
#[derive(ToSchema)]
#[schema(as = EventStream)]
#[allow(dead_code)] // A schema: the handlers stream the events.
pub(crate) struct EventStream(String);

/// What an AG-UI client POSTs (AG-UI's `RunAgentInput`).
#[derive(ToSchema)]
#[schema(rename_all = "camelCase")]
#[allow(dead_code)] // A schema: `agentstate::agui::RunAgentInput` is the type.
pub(crate) struct RunAgentInput {
    /// The conversation thread.
    thread_id: String,
    /// The run (new, or the interrupted run to resume).
    run_id: String,
    /// The run this one was started from.
    #[schema(required = false)]
    parent_run_id: Option<String>,
    /// The shared state as the client holds it.
    #[schema(required = false)]
    state: Option<Value>,
    /// The conversation as the client holds it.
    #[schema(required = false)]
    messages: Vec<Value>,
    /// The tools the client offers.
    #[schema(required = false)]
    tools: Vec<Value>,
    /// Context the client gives the agent.
    #[schema(required = false)]
    context: Vec<Value>,
    /// Properties forwarded to the agent as they are.
    #[schema(required = false)]
    forwarded_props: Option<Value>,
    /// Answers to the interrupts the thread's last run ended with.
    #[schema(required = false)]
    resume: Option<Vec<Value>>,
}

// ---- parameters (for the spec only: the handlers read them as they always did) ----

/// An assistant's path.
#[derive(IntoParams)]
#[into_params(parameter_in = Path)]
#[allow(dead_code)] // Parameters: the handler reads the path.
pub(crate) struct AssistantPath {
    /// The assistant's id (or its graph id).
    assistant_id: String,
}

/// A thread's path.
#[derive(IntoParams)]
#[into_params(parameter_in = Path)]
#[allow(dead_code)] // Parameters: the handler reads the path.
pub(crate) struct ThreadPath {
    /// The thread's id.
    thread_id: String,
}

/// A checkpoint's path.
#[derive(IntoParams)]
#[into_params(parameter_in = Path)]
#[allow(dead_code)] // Parameters: the handler reads the path.
pub(crate) struct CheckpointPath {
    /// The thread's id.
    thread_id: String,
    /// The checkpoint's id (`5`, `5-input`, or a branch's `b0-5`).
    checkpoint_id: String,
}

/// A run's path.
#[derive(IntoParams)]
#[into_params(parameter_in = Path)]
#[allow(dead_code)] // Parameters: the handler reads the path.
pub(crate) struct RunPath {
    /// The thread's id.
    thread_id: String,
    /// The run's id.
    run_id: String,
}

/// `GET /threads/{thread_id}/history`'s query.
#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)] // Parameters: the handler reads the query.
pub(crate) struct HistoryParams {
    /// At most this many checkpoints (10 by default).
    limit: Option<usize>,
}

/// `GET /threads/{thread_id}/runs`'s query.
#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)] // Parameters: the handler reads the query.
pub(crate) struct RunsParams {
    /// At most this many runs (10 by default).
    limit: Option<usize>,
    /// After skipping this many.
    offset: Option<usize>,
    /// Only the runs of this status.
    status: Option<RunStatus>,
}

/// A cancel's query.
#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)] // Parameters: the handler reads the query.
pub(crate) struct CancelParams {
    /// Whether to answer once the run ended (`true`, `1`) rather than at once (202).
    wait: Option<bool>,
    /// `interrupt` (the default: its committed steps stay) or `rollback` (what it did is
    /// removed).
    action: Option<String>,
}

/// A stream's reconnection header.
#[derive(IntoParams)]
#[into_params(parameter_in = Header)]
#[allow(dead_code)] // Parameters: the handler reads the header.
pub(crate) struct StreamHeaders {
    /// The number of the last event the client got (`-1`: every event).
    #[param(rename = "Last-Event-ID")]
    last_event_id: Option<String>,
}
