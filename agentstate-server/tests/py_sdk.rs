//! The official LangGraph Python SDK (`langgraph-sdk`, pinned with its dependencies in
//! `tests/py/requirements.txt`) drives the server: `tests/py/sdk.py` against the help desk graph
//! of the `serve` example, on SQLite, on 127.0.0.1.
//!
//! Covers what the JS SDK test does through the Python client (threads, runs streamed in four
//! modes, waited for, in the background and joined, cancelled, double texting, an interrupt
//! answered by `Command(resume=...)`, state, history, an update as a node, failures, stateless
//! runs), a run's stream joined again from its start with `Last-Event-ID`, and a thread copied
//! (`threads.copy`: its state and history, a run on it, its source deleted); and in more detail:
//! breakpoints of a run, `command.update` and `goto`, the `tasks`, `checkpoints`, `debug`,
//! `events` and `messages` modes, double texting with `rollback` and a cancel with `rollback`,
//! runs from a checkpoint (with and without input) and a state update at one.
//!
//! Needs a Python with the requirements installed, named by `AGENTSTATE_LANGGRAPH_PYTHON`
//! (`.ci/run` makes a venv and sets it). Without it the test prints one line and passes,
//! except under CI (`CI` set), where that is a failure.

#[path = "../examples/support/desk.rs"]
mod desk;

#[path = "support/sdk.rs"]
mod sdk;

use std::path::Path;

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
    "interrupt_before",
    "continue_after_breakpoint",
    "interrupt_after",
    "breakpoint_unknown_node",
    "command_update",
    "command_goto",
    "command_resume_update",
    "stream_tasks",
    "stream_debug_checkpoints",
    "stream_checkpoints",
    "stream_events",
    "stream_messages",
    "multitask_rollback",
    "cancel_rollback",
    "run_from_checkpoint",
    "run_from_checkpoint_with_input",
    "run_from_missing_checkpoint",
    "update_state_at_checkpoint",
    "threads_copy",
    "threads_copy_independent",
    "threads_copy_busy",
    "threads_copy_outlives_source",
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

    let mut run = tokio::process::Command::new(python);
    run.arg(script);
    sdk::drive(run, CHECKS).await;
}
