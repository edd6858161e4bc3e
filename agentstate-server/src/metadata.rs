//! The metadata LangGraph's server gives a run, and what carries it: the run's own (its
//! assistant, its graph and the request's), its config's (the run's, the server's identity,
//! the attempt), and that of what its nodes stream (a task's, a message's), as
//! `langgraph dev` shows them.

use crate::record::{iso8601, RunRecord, RunStatus};
use serde_json::{json, Map, Value};

/// The namespace of the ids of tasks (UUID v5 of their step and node).
const NAMESPACE_TASK: uuid::Uuid = uuid::Uuid::from_u128(0x3c1e_7a52_5a0d_4f0b_9d4e_61a7_2f0c_8b11);

/// The id of the task of node `node` in step `step`: a UUID, as LangGraph's task ids are, the
/// same each time it is asked for, and in a thread's copy.
pub(crate) fn task_id(node: &str, step: u64) -> String {
    let name = format!("{step}\u{0}{node}");
    uuid::Uuid::new_v5(&NAMESPACE_TASK, name.as_bytes()).to_string()
}

/// A new run's `metadata`: the request's, with its assistant and graph, as LangGraph's
/// server adds them (and the assistant's own, `created_by: system`).
pub(crate) fn run_metadata(
    request: Option<Map<String, Value>>,
    assistant_id: &str,
    graph_id: &str,
) -> Value {
    let mut metadata = request.unwrap_or_default();
    metadata.insert("created_by".into(), Value::from("system"));
    metadata.insert("assistant_id".into(), Value::from(assistant_id));
    metadata.insert("graph_id".into(), Value::from(graph_id));
    Value::Object(metadata)
}

/// What run `run`'s config metadata holds: its metadata, the server's identity (its URL, if
/// known, as `langgraph_api_url`), and the run's attempt and id. The metadata of its tasks,
/// checkpoints and streamed messages start from it.
pub(crate) fn config_metadata(run: &RunRecord, api_url: Option<&str>) -> Map<String, Value> {
    let mut metadata = match &run.metadata {
        Value::Object(map) => map.clone(),
        _ => Map::new(),
    };
    if let Some(url) = api_url {
        metadata.insert("langgraph_api_url".into(), Value::from(url));
    }
    let version = Value::from(env!("CARGO_PKG_VERSION"));
    metadata.insert("langgraph_api_version".into(), version.clone());
    metadata.insert("langgraph_host".into(), Value::from("self-hosted"));
    metadata.insert("langgraph_plan".into(), Value::from("developer"));
    metadata.insert("langgraph_version".into(), version);
    metadata.insert("run_attempt".into(), Value::from(run.attempt));
    metadata.insert("run_id".into(), Value::from(run.run_id.as_str()));
    metadata
}

/// The metadata of what node `node`'s task in step `step` streams (a message's): the run's
/// config metadata with the thread and the task.
pub(crate) fn node_metadata(
    config: &Map<String, Value>,
    thread: &str,
    node: &str,
    step: u64,
) -> Value {
    let mut metadata = config.clone();
    metadata.insert("thread_id".into(), Value::from(thread));
    metadata.insert("langgraph_step".into(), Value::from(step));
    metadata.insert("langgraph_node".into(), Value::from(node));
    metadata.insert(
        "langgraph_triggers".into(),
        json!([format!("branch:to:{node}")]),
    );
    metadata.insert("langgraph_path".into(), json!(["__pregel_pull", node]));
    metadata.insert(
        "langgraph_checkpoint_ns".into(),
        Value::from(format!("{node}:{}", task_id(node, step))),
    );
    metadata.insert("ls_integration".into(), Value::from("langgraph"));
    Value::Object(metadata)
}

/// The id LangGraph's server gives the request that created run `run_id` (derived from the
/// run's id, so that every view of the run names the same).
pub(crate) fn request_id(run_id: &str) -> String {
    uuid::Uuid::new_v5(&uuid::Uuid::NAMESPACE_OID, run_id.as_bytes()).to_string()
}

/// What run `run`'s config carries as its `configurable`, as LangGraph's server fills it: the
/// run's own (its assistant, graph, thread and ids, when it was asked for) and the request's
/// `config.configurable`.
pub(crate) fn run_configurable(run: &RunRecord, assistant_id: &str) -> Value {
    let asked = |key: &str| run.kwargs.get(key).cloned().unwrap_or(Value::Null);
    let mut configurable = json!({
        "__after_seconds__": match asked("after_seconds") {
            Value::Number(seconds) => Value::Number(seconds),
            _ => json!(0),
        },
        "__request_start_time_ms__": run.created_ms,
        "assistant_id": assistant_id,
        "graph_id": run.graph_id,
        "langgraph_auth_permissions": [],
        "langgraph_auth_user": null,
        "langgraph_auth_user_id": "",
        "langgraph_request_id": request_id(&run.run_id),
        "run_id": run.run_id,
        "thread_id": run.thread_id,
        "user_id": "",
    });
    // A run from a checkpoint names it, as LangGraph's server keeps it.
    let from = match asked("checkpoint_id") {
        Value::String(id) => Some(Value::String(id)),
        _ => asked("checkpoint").get("checkpoint_id").cloned(),
    };
    if let Some(id) = from.filter(|id| !id.is_null()) {
        configurable["checkpoint_id"] = id;
    }
    let user_config = asked("config");
    if let Some(own) = user_config.get("configurable").and_then(Value::as_object) {
        for (key, value) in own {
            configurable[key] = value.clone();
        }
    }
    configurable
}

/// Run `run` as the API shows it (LangGraph's `Run`): its request as LangGraph keeps it
/// (`kwargs`: its input, command, config, stream modes, breakpoints, ...), its metadata and
/// its multitask strategy.
pub(crate) fn run_json(run: &RunRecord, assistant_id: &str, api_url: Option<&str>) -> Value {
    let asked = |key: &str| run.kwargs.get(key).cloned().unwrap_or(Value::Null);
    let stream_mode = match asked("stream_mode") {
        Value::Null => json!(["values"]),
        Value::Array(modes) => Value::Array(modes),
        one => json!([one]),
    };
    let mut configurable = run_configurable(run, assistant_id);
    let mut metadata = run.metadata.clone();
    if run.started || !matches!(run.status, RunStatus::Pending | RunStatus::Interrupted) {
        // Once it ran: what its config carried then.
        configurable["__pregel_node_finished"] = Value::Null;
        metadata = Value::Object(config_metadata(run, api_url));
        if let Value::Object(map) = &mut metadata {
            map.remove("run_id");
        }
    }
    json!({
        "run_id": run.run_id,
        "thread_id": run.thread_id,
        "assistant_id": assistant_id,
        "created_at": iso8601(run.created_ms),
        "updated_at": iso8601(run.updated_ms),
        "status": run.status,
        "metadata": run.metadata,
        "kwargs": {
            "input": asked("input"),
            "command": asked("command"),
            "config": {"configurable": configurable, "metadata": metadata},
            "context": run.kwargs.get("context").cloned().unwrap_or(json!({})),
            "stream_mode": stream_mode,
            "interrupt_before": asked("interrupt_before"),
            "interrupt_after": asked("interrupt_after"),
            "webhook": asked("webhook"),
            "feedback_keys": asked("feedback_keys"),
            "temporary": false,
            "subgraphs": asked("stream_subgraphs").as_bool().unwrap_or(false),
            "resumable": asked("stream_resumable").as_bool().unwrap_or(false),
            "checkpoint_during": true,
            "durability": run.kwargs.get("durability").cloned().unwrap_or(json!("async")),
        },
        "multitask_strategy": run.kwargs.get("multitask_strategy").cloned().unwrap_or(json!("enqueue")),
        "langsmith_session_name": null,
    })
}
