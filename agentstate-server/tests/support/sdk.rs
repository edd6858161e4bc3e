//! An official client's script against the help desk graph: the server on SQLite at
//! 127.0.0.1 with API key `test-key`, the script run with its URL as its last argument, and
//! the checks it printed (`ok <check>`) compared with `checks`, in order.

use crate::desk;
use agentstate_server::Server;
use agentstate_store::SqliteStore;
use std::time::Duration;

/// Serves the desk graph, runs `command` (given the URL), stops both, and asserts that it
/// succeeded and printed exactly `checks`.
pub async fn drive(mut command: tokio::process::Command, checks: &[&str]) {
    let store = SqliteStore::open_in_memory().unwrap();
    let server = Server::builder(&store)
        .assistant("desk", desk::graph().unwrap().durable(&store))
        .api_key("test-key")
        .build();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let serving = tokio::spawn(server.serve(listener));

    let run = command.arg(&url).kill_on_drop(true).output();
    let output = tokio::time::timeout(Duration::from_secs(120), run).await;
    serving.abort();
    let output = output
        .expect("the client's script finishes within two minutes")
        .expect("the client's script runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "the client's script failed:\n{stdout}\n{stderr}"
    );
    let passed: Vec<&str> = stdout
        .lines()
        .filter_map(|l| l.strip_prefix("ok "))
        .collect();
    assert_eq!(passed, checks, "{stdout}\n{stderr}");
}
