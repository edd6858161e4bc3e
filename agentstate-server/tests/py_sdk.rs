//! The official LangGraph Python SDK (`langgraph-sdk`, pinned with its dependencies in
//! `tests/py/requirements.txt`) drives the server: `tests/py/sdk.py` against the help desk graph
//! of the `serve` example, on SQLite, on 127.0.0.1.
//!
//! Covers what the JS SDK test does through the Python client (threads, runs streamed in four
//! modes, waited for, in the background and joined, cancelled, double texting, an interrupt
//! answered by `Command(resume=...)`, state, history, an update as a node, failures, stateless
//! runs), and a run's stream joined again from its start with `Last-Event-ID`.
//!
//! Needs a Python with the requirements installed, named by `AGENTSTATE_LANGGRAPH_PYTHON`
//! (`.ci/run` makes a venv and sets it). Without it the test prints one line and passes,
//! except under CI (`CI` set), where that is a failure.

#[path = "../examples/support/desk.rs"]
mod desk;

use agentstate_server::Server;
use agentstate_store::SqliteStore;
use std::path::Path;
use std::time::Duration;

/// The checks `sdk.py` prints, in order.
const CHECKS: &[&str] = &[
    "api_key_required",
    "assistants_search",
    "assistants_schemas",
    "threads_create",
    "threads_patch",
    "threads_search",
    "threads_get_missing",
    "stream_metadata_first",
    "stream_run_created",
    "stream_values",
    "values_messages_langchain",
    "stream_updates",
    "stream_custom",
    "stream_messages_tuple",
    "stream_interrupt",
    "thread_interrupted",
    "state_interrupt_task",
    "runs_get",
    "wait_resume",
    "thread_idle",
    "history",
    "state_at_checkpoint",
    "update_state",
    "runs_create",
    "join_stream_replay",
    "runs_join",
    "runs_list",
    "multitask_reject",
    "runs_cancel",
    "multitask_interrupt",
    "multitask_enqueue",
    "stream_error",
    "wait_error",
    "thread_error",
    "unknown_assistant",
    "stateless_wait",
    "threads_delete",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_official_python_sdk_drives_the_server() {
    let Some(python) = std::env::var_os("AGENTSTATE_LANGGRAPH_PYTHON") else {
        assert!(
            std::env::var_os("CI").is_none(),
            "under CI the Python SDK must be installed: AGENTSTATE_LANGGRAPH_PYTHON names its Python"
        );
        println!("skipped: AGENTSTATE_LANGGRAPH_PYTHON is not set (a Python with tests/py/requirements.txt)");
        return;
    };
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/py/sdk.py");

    let store = SqliteStore::open_in_memory().unwrap();
    let server = Server::builder(&store)
        .assistant("desk", desk::graph().unwrap().durable(&store))
        .api_key("test-key")
        .build();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let serving = tokio::spawn(server.serve(listener));

    let run = tokio::process::Command::new(python)
        .arg(&script)
        .arg(&url)
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(Duration::from_secs(120), run).await;
    serving.abort();
    let output = output
        .expect("the Python SDK script finishes within two minutes")
        .expect("python runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "sdk.py failed:\n{stdout}\n{stderr}"
    );
    let passed: Vec<&str> = stdout
        .lines()
        .filter_map(|l| l.strip_prefix("ok "))
        .collect();
    assert_eq!(passed, CHECKS, "{stdout}\n{stderr}");
}
