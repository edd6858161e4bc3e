//! The official LangGraph JS SDK (`@langchain/langgraph-sdk`, pinned in `tests/js/package.json`
//! and its lock file) drives the server: `tests/js/sdk.mjs` against the help desk graph of the
//! `serve` example, on SQLite, on 127.0.0.1.
//!
//! Covers: assistants (search, get, graph, schemas); threads (create with `if_exists`, get,
//! patch, search, delete); runs streamed in the `values`, `updates`, `custom` and
//! `messages-tuple` modes, waited for, in the background and joined, listed, got, cancelled and
//! continued; double texting with `reject`, `interrupt` and `enqueue`; an interrupt answered by
//! `command.resume`; state, state at a checkpoint, a state update as a node, history; a run's
//! breakpoints (`interruptBefore`, `interruptAfter: "*"`) and a run without input going on past
//! them; `command.update` and `goto`; the `messages`, `tasks`, `checkpoints`, `debug` and
//! `events` modes, debug's checkpoints equal to the history; a cancel with `rollback`; a run
//! from a checkpoint; thread copy; failures; stateless runs.
//!
//! Needs `node` and `npm ci` run in `tests/js` (`.ci/run` does it). Without `node_modules` the
//! test prints one line and passes, except under CI (`CI` set), where that is a failure.

#[path = "../examples/support/desk.rs"]
mod desk;

#[path = "support/sdk.rs"]
mod sdk;

use std::path::Path;

/// The checks `sdk.mjs` prints, in order.
const CHECKS: &[&str] = &[
    "api_key_required",
    "assistants_search",
    "assistants_get",
    "assistants_graph",
    "assistants_schemas",
    "threads_create",
    "threads_create_if_exists",
    "threads_create_conflict",
    "threads_get",
    "threads_patch",
    "threads_search",
    "threads_get_missing",
    "stream_metadata_first",
    "stream_content_location",
    "stream_values",
    "values_messages_langchain",
    "stream_updates",
    "stream_custom",
    "stream_messages_tuple",
    "stream_interrupt_update",
    "stream_interrupt_values",
    "thread_interrupted",
    "state_interrupt_task",
    "state_checkpoint",
    "runs_get",
    "wait_resume",
    "thread_idle",
    "history",
    "state_at_checkpoint",
    "update_state",
    "runs_create",
    "runs_join",
    "runs_list",
    "multitask_reject",
    "runs_cancel",
    "thread_after_cancel",
    "continue_after_cancel",
    "multitask_interrupt",
    "multitask_enqueue",
    "stream_error",
    "wait_error",
    "thread_error",
    "unknown_assistant",
    "unknown_stream_mode",
    "interrupt_before",
    "continue_after_breakpoint",
    "interrupt_after_all",
    "command_update",
    "command_goto",
    "stream_modes",
    "debug_checkpoints_are_history",
    "cancel_rollback",
    "run_from_checkpoint",
    "threads_copy",
    "stateless_stream",
    "stateless_wait",
    "threads_delete",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_official_js_sdk_drives_the_server() {
    let js = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/js");
    if !js.join("node_modules/@langchain/langgraph-sdk").is_dir() {
        assert!(
            std::env::var_os("CI").is_none(),
            "under CI the JS SDK must be installed: run `npm ci` in {}",
            js.display()
        );
        println!(
            "skipped: the JS SDK is not installed (run `npm ci` in {})",
            js.display()
        );
        return;
    }

    let mut node = tokio::process::Command::new("node");
    node.arg("sdk.mjs").current_dir(&js);
    sdk::drive(node, CHECKS).await;
}
