//! The metadata LangGraph's server gives a run, and what carries it: the run's own (its
//! assistant, its graph and the request's), its config's (the run's, the server's identity,
//! the attempt), and that of what its nodes stream (a task's, a message's), as
//! `langgraph dev` shows them.

use crate::record::RunRecord;
use serde_json::{json, Map, Value};

/// The namespace of the ids of tasks (UUID v5 of their thread, step and node).
const NAMESPACE_TASK: uuid::Uuid = uuid::Uuid::from_u128(0x3c1e_7a52_5a0d_4f0b_9d4e_61a7_2f0c_8b11);

/// The id of the task of node `node` in step `step` of thread `thread`: a UUID, as
/// LangGraph's task ids are, the same each time it is asked for.
pub(crate) fn task_id(thread: &str, node: &str, step: u64) -> String {
    let name = format!("{thread}\u{0}{step}\u{0}{node}");
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
        Value::from(format!("{node}:{}", task_id(thread, node, step))),
    );
    metadata.insert("ls_integration".into(), Value::from("langgraph"));
    Value::Object(metadata)
}
