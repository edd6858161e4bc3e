//! The AG-UI endpoint driven by the official AG-UI client and checked by the conformance
//! validator, on SQLite, on 127.0.0.1:
//!
//! - `@ag-ui/client`'s `HttpAgent` (pinned in `tests/agui-js/package.json` and its lock file)
//!   runs `tests/agui-js/agui.mjs`: text streamed, a second turn on the thread, the client's
//!   state equal to the thread's after every run, an interrupt and its `resume`, a frontend
//!   tool's pending call and its answer, a busy thread's 409, a malformed body's 422, an
//!   unknown interrupt's 422, a failed run's and a cancelled run's `RUN_ERROR`. Its
//!   event verifier checks every stream (a violation fails the run, and the script).
//! - `ag-ui-validate` (PyPI, pinned in `.ci/run`, in the venv `target/agui-venv`) checks the
//!   streams `tests/agui-js/record.mjs` records (text, interrupt, resume, frontend tool, a
//!   failure) and the live endpoint with its own input, with no finding, warnings included.
//!
//! Without `node_modules` (or the venv) a test prints one line and passes, except under CI (`CI`
//! set), where that is a failure.

use agentstate::message::{Message, Role, ToolCall};
use agentstate::model::ScriptedModel;
use agentstate::providers::ModelRequest;
use agentstate::AgentState;
use agentstate_graph::{BoxError, Context, Graph, END};
use agentstate_server::Server;
use agentstate_store::SqliteStore;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// The concierge's state.
#[derive(AgentState, Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
struct Concierge {
    /// The conversation: the client's new messages come in here.
    #[reducer(add_messages)]
    messages: Vec<Message>,
    /// The client's tools (AG-UI `tools`), as each run's input gives them.
    tools: Vec<Value>,
    /// The person's answer to the refund question.
    approved: Option<bool>,
}

/// The last message's text if a user wrote it.
fn asked(state: &Concierge) -> Option<String> {
    state
        .messages
        .last()
        .filter(|m| m.role == Role::User)
        .map(Message::text)
}

/// The concierge: `model` streams `You said: ...`; `refund` goes to `approve`, which asks
/// (an interrupt); `fail` fails; `order`, when the client offers the tool `confirm_order`, is a call of it
/// that ends the run (a frontend tool: the client runs it), and its result is answered; a
/// question starting with `slow` takes two seconds.
fn graph() -> Result<Graph<Concierge, &'static str>, agentstate_graph::CompileError> {
    let request = Arc::new(
        ModelRequest::builder("scripted")
            .build()
            .expect("a request"),
    );
    Graph::builder()
        .node("model", move |state: Arc<Concierge>, cx: Context| {
            let request = Arc::clone(&request);
            async move {
                let answer = match (asked(&state), state.messages.last()) {
                    (Some(q), _) if q == "refund" => return Ok(ConciergeUpdate::default()),
                    (Some(q), _) if q == "fail" => {
                        return Err(BoxError::from("the concierge cannot answer `fail`"))
                    }
                    (Some(q), _)
                        if q == "order"
                            && state.tools.iter().any(|t| t["name"] == "confirm_order") =>
                    {
                        let id = format!("call-{}", state.messages.len());
                        let call = ToolCall::new(id, "confirm_order", json!({"item": "book"}));
                        let asking =
                            Message::text_message("", Role::Assistant).with_tool_calls(vec![call]);
                        return Ok(ConciergeUpdate::default().messages(vec![asking]));
                    }
                    (Some(q), _) => {
                        if q.starts_with("slow") {
                            tokio::time::sleep(Duration::from_secs(2)).await;
                        }
                        format!("You said: {q}")
                    }
                    (None, Some(m)) if m.role == Role::Tool => {
                        format!("The user chose: {}", m.text())
                    }
                    (None, _) => "Nothing to answer.".to_owned(),
                };
                let model = ScriptedModel::from_texts([answer]).chunk_size(4);
                let reply = cx.complete(&model, &request, &state.messages).await?;
                Ok::<_, BoxError>(ConciergeUpdate::default().messages(vec![reply]))
            }
        })
        .node("approve", |_: Arc<Concierge>, cx: Context| async move {
            let yes = cx.interrupt(json!("Refund 30 EUR?"))?.as_bool() == Some(true);
            let text = if yes { "Refunded." } else { "Not refunded." };
            Ok::<_, BoxError>(
                ConciergeUpdate::default()
                    .approved(Some(yes))
                    .messages(vec![Message::text_message(text, Role::Assistant)]),
            )
        })
        .entry("model")
        .route("model", |state: &Concierge| match asked(state).as_deref() {
            Some("refund") => "approve".into(),
            _ => END.into(),
        })
        .edge("approve", END)
        .build()
}

fn js_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/agui-js")
}

/// Whether `what` is installed at `path`; if not, under CI a failure, otherwise one line.
fn installed(path: &Path, what: &str, how: &str) -> bool {
    if path.exists() {
        return true;
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "under CI {what} must be installed ({how})"
    );
    println!("skipped: {what} is not installed ({how})");
    false
}

/// Serves the concierge at `/agui/concierge` on 127.0.0.1: the server's URL and its task.
async fn serve() -> (String, tokio::task::JoinHandle<std::io::Result<()>>) {
    let store = SqliteStore::open_in_memory().unwrap();
    let server = Server::builder(&store)
        .assistant("concierge", graph().unwrap().durable(&store))
        .build();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    (url, tokio::spawn(server.serve(listener)))
}

/// Runs `node script url args...` in `tests/agui-js`; gives its stdout.
async fn node(script: &str, url: &str, args: &[&str]) -> String {
    let node = tokio::process::Command::new("node")
        .arg(script)
        .arg(url)
        .args(args)
        .current_dir(js_dir())
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(Duration::from_secs(120), node)
        .await
        .unwrap_or_else(|_| panic!("{script} finishes within two minutes"))
        .expect("node runs");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "{script} failed:\n{stdout}\n{stderr}"
    );
    stdout
}

/// Runs `ag-ui-validate` on `target` (a recorded stream or a live endpoint) failing on any
/// warning; panics with its report if it finds one.
async fn validate(validator: &Path, target: &str) {
    let output = tokio::process::Command::new(validator)
        .args([
            "--no-color",
            "--features",
            "shared-state",
            "--timeout",
            "60",
        ])
        .args(["--max-warnings", "0", "--fail-on", "warning"])
        .arg(target)
        .kill_on_drop(true)
        .output()
        .await
        .expect("ag-ui-validate runs");
    assert!(
        output.status.success(),
        "ag-ui-validate found something in {target}:\n{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr),
    );
}

/// The checks `agui.mjs` prints, in order.
const CHECKS: &[&str] = &[
    "run_started_first",
    "one_run_finished_last",
    "text_streamed",
    "text_message",
    "state_equals_server",
    "second_turn_adds_only_new_messages",
    "second_turn_state_equals_server",
    "interrupt_outcome",
    "interrupt_pending",
    "thread_interrupted",
    "resume_finished",
    "resume_answer",
    "resume_state_equals_server",
    "frontend_tool_pending",
    "frontend_tool_call",
    "frontend_tool_answered",
    "frontend_tool_state_equals_server",
    "busy_thread_refused",
    "malformed_body_refused",
    "unknown_interrupt_refused",
    "run_error",
    "cancelled_run_error",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_official_agui_client_drives_the_endpoint() {
    let modules = js_dir().join("node_modules/@ag-ui/client");
    if !installed(&modules, "@ag-ui/client", "`npm ci` in tests/agui-js") {
        return;
    }
    let (url, serving) = serve().await;
    let stdout = node("agui.mjs", &url, &[]).await;
    serving.abort();
    let passed: Vec<&str> = stdout
        .lines()
        .filter_map(|l| l.strip_prefix("ok "))
        .collect();
    assert_eq!(passed, CHECKS, "{stdout}");
}

/// The streams `record.mjs` records, in order.
const RECORDED: &[&str] = &["text", "interrupt", "resume", "frontend_tool", "failed"];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ag_ui_validate_finds_nothing_in_the_endpoints_streams() {
    let venv = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/agui-venv/bin/ag-ui-validate");
    if !installed(
        &venv,
        "ag-ui-validate",
        "`.ci/run` makes the venv target/agui-venv",
    ) {
        return;
    }
    let dir = std::env::temp_dir().join(format!("agentstate-agui-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (url, serving) = serve().await;
    let stdout = node("record.mjs", &url, &[dir.to_str().unwrap()]).await;
    let recorded: Vec<&str> = stdout
        .lines()
        .filter_map(|l| l.strip_prefix("recorded "))
        .collect();
    assert_eq!(recorded, RECORDED, "{stdout}");
    for name in recorded {
        validate(&venv, dir.join(format!("{name}.sse")).to_str().unwrap()).await;
    }
    // The live endpoint, with the validator's own input (one user message): the transport's
    // rules too (content type, frames as they come).
    validate(&venv, &format!("{url}/agui/concierge")).await;
    serving.abort();
    std::fs::remove_dir_all(&dir).unwrap();
}
