//! How `langgraph dev` is started here (the differential harness, `tests/reference.rs`, and
//! the load generator, `benches/load.rs`): offline, quiet, in a process group of its own.

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Stdio};

/// Starts `langgraph dev` (the `langgraph` script beside `python`, a venv's) on 127.0.0.1:`port`,
/// serving `dir`'s `langgraph.json`, in a process group of its own (end it with its group),
/// its output in `dir/langgraph-dev.log`.
pub fn spawn(python: &Path, dir: &Path, port: u16) -> Child {
    let langgraph = python.with_file_name("langgraph");
    let log = std::fs::File::create(dir.join("langgraph-dev.log")).unwrap();
    std::process::Command::new(&langgraph)
        .args(["dev", "--no-browser", "--no-reload", "--host", "127.0.0.1"])
        .args(["--port", &port.to_string(), "--n-jobs-per-worker", "10"])
        .args([
            "--server-log-level",
            "WARNING",
            "--config",
            "langgraph.json",
        ])
        .current_dir(dir)
        .env("LANGGRAPH_CLI_NO_ANALYTICS", "1")
        .env("LANGSMITH_TRACING", "false")
        .stdin(Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .process_group(0)
        .spawn()
        .unwrap_or_else(|e| panic!("{} does not start: {e}", langgraph.display()))
}
