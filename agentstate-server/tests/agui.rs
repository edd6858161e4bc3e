//! The AG-UI endpoint driven by the official AG-UI client and checked by the conformance
//! validator, on SQLite, on 127.0.0.1:
//!
//! - `@ag-ui/client`'s `HttpAgent` (pinned in `tests/agui-js/package.json` and its lock file),
//!   1.0.0 and 0.0.59 (the one CopilotKit's runtime 1.75.0 bundles), runs
//!   `tests/agui-js/agui.mjs`: text streamed, a second turn on the thread, the client's
//!   state equal to the thread's after every run, an interrupt and its `resume`, a frontend
//!   tool's pending call and its answer, a busy thread's 409, a malformed body's 422, an
//!   unknown interrupt's 422, a failed run's and a cancelled run's `RUN_ERROR`. Its
//!   event verifier checks every stream (a violation fails the run, and the script).
//! - CopilotKit's runtime itself (`@copilotkit/runtime` 1.75.0, pinned beside it) serves the
//!   endpoint as one of its agents (an `HttpAgent` of 0.0.59) to requests sent as a browser's
//!   CopilotKit client sends them, in `tests/agui-js/copilotkit.mjs`: text, an interrupt and
//!   its resume (with the interrupted run's `runId`, as its `useInterrupt` does), a frontend
//!   tool, a failure, each reaching the thread on the server, and, after the runtime restarts,
//!   a run with no messages reading the thread's conversation back.
//! - `ag-ui-validate` (PyPI, pinned in `.ci/run`, in the venv `target/agui-venv`) checks the
//!   streams `tests/agui-js/record.mjs` records (text, interrupt, resume, frontend tool, a
//!   failure) and the live endpoint with its own input, with no finding, warnings included.
//!
//! Without `node_modules` (or the venv) a test prints one line and passes, except under CI (`CI`
//! set), where that is a failure.
//!
//! Without a client, requests to the router check the wire itself (frames, content type, the
//! events folded by agentstate's own AG-UI fold, steps and snapshots), the refusals, the
//! client's messages and state on a state whose conversation is `upsert_messages`, a thread's
//! conversation read back by a run with no messages, a failure ending what streamed, a resume
//! with the interrupted run's own id, a thread asking again, and `forwardedProps.command.resume`.

use agentstate::agui::{ChatState, Event};
use agentstate::message::{Message, Role, ToolCall};
use agentstate::model::ScriptedModel;
use agentstate::providers::ModelRequest;
use agentstate::AgentState;
use agentstate_graph::{BoxError, Context, Emitted, Graph, END};
use agentstate_server::Server;
use agentstate_store::SqliteStore;
use axum::body::Body;
use axum::http::{header, Request, StatusCode};
use axum::Router;
use http_body_util::BodyExt;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tower::ServiceExt;

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
/// (an interrupt); `fail` fails, `panic` panics; `order`, when the client offers the tool `confirm_order`, is a
/// call of it (streamed) that ends the run (a frontend tool: the client runs it), and its result
/// is answered; a question starting with `slow` takes two seconds.
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
                    (Some(q), _) if q == "panic" => panic!("the concierge met `panic`"),
                    (Some(q), _) if q == "fail" => {
                        return Err(BoxError::from("the concierge cannot answer `fail`"))
                    }
                    (Some(q), _)
                        if q == "order"
                            && state.tools.iter().any(|t| t["name"] == "confirm_order") =>
                    {
                        let n = state.messages.len();
                        let (message_id, id) = (format!("ask-{n}"), format!("call-{n}"));
                        // The call streamed as a model streams it, then the message.
                        for delta in [r#"{"item": "#, r#""book"}"#] {
                            cx.emit(Emitted::ToolCallDelta {
                                message_id: message_id.clone(),
                                tool_call_id: id.clone(),
                                name: "confirm_order".to_owned(),
                                delta: delta.to_owned(),
                            });
                        }
                        let call = ToolCall::new(id, "confirm_order", json!({"item": "book"}));
                        let asking = Message::text_message("", Role::Assistant)
                            .with_id(message_id)
                            .with_tool_calls(vec![call]);
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
        // CopilotKit's runtime sends telemetry unless told not to: nothing leaves the machine.
        .env("COPILOTKIT_TELEMETRY_DISABLED", "true")
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
/// warning, with the shared-state feature declared if `shared_state` (a stream that shares no
/// state, a run failed before its first step, is checked without); panics with its report if
/// it finds something.
async fn validate(validator: &Path, target: &str, shared_state: bool) {
    let features: &[&str] = if shared_state {
        &["--features", "shared-state"]
    } else {
        &[]
    };
    let output = tokio::process::Command::new(validator)
        .args(["--no-color", "--timeout", "60"])
        .args(features)
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
    "frontend_tool_args_streamed",
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
    drive("@ag-ui/client").await;
}

/// CopilotKit's runtime (1.75.0) bundles `@ag-ui/client` 0.0.59: the endpoint as its
/// `HttpAgent` calls it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copilotkits_agui_client_drives_the_endpoint() {
    let modules = js_dir().join("node_modules/ag-ui-client-copilotkit");
    if !installed(
        &modules,
        "@ag-ui/client 0.0.59",
        "`npm ci` in tests/agui-js",
    ) {
        return;
    }
    drive("ag-ui-client-copilotkit").await;
}

/// Runs `agui.mjs` with the client of npm package `client` and checks every check passed.
async fn drive(client: &str) {
    let (url, serving) = serve().await;
    let stdout = node("agui.mjs", &url, &[client]).await;
    serving.abort();
    let passed: Vec<&str> = stdout
        .lines()
        .filter_map(|l| l.strip_prefix("ok "))
        .collect();
    assert_eq!(passed, CHECKS, "{client}: {stdout}");
}

/// The checks `copilotkit.mjs` prints, in order.
const RUNTIME_CHECKS: &[&str] = &[
    "runtime_lists_the_agent",
    "runtime_run_started_first",
    "runtime_one_run_finished_last",
    "runtime_text_streamed",
    "runtime_run_on_the_thread",
    "runtime_state_snapshot",
    "runtime_interrupt_outcome",
    "runtime_resume",
    "runtime_frontend_tool",
    "runtime_run_error",
    "runtime_restart_reads_the_thread",
];

/// CopilotKit's runtime itself (1.75.0, its fetch handler) serves the endpoint to a browser's
/// requests as one of its agents, an `HttpAgent`: text, an interrupt and its resume, a
/// frontend tool, a failure.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copilotkits_runtime_serves_the_endpoint_as_an_http_agent() {
    let modules = js_dir().join("node_modules/@copilotkit/runtime");
    if !installed(&modules, "@copilotkit/runtime", "`npm ci` in tests/agui-js") {
        return;
    }
    let (url, serving) = serve().await;
    let stdout = node("copilotkit.mjs", &url, &[]).await;
    serving.abort();
    let passed: Vec<&str> = stdout
        .lines()
        .filter_map(|l| l.strip_prefix("ok "))
        .collect();
    assert_eq!(passed, RUNTIME_CHECKS, "{stdout}");
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
        let target = dir.join(format!("{name}.sse"));
        validate(&venv, target.to_str().unwrap(), name != "failed").await;
    }
    // The live endpoint, with the validator's own input (one user message): the transport's
    // rules too (content type, frames as they come).
    validate(&venv, &format!("{url}/agui/concierge"), true).await;
    serving.abort();
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The concierge's router, on a new in-memory store.
fn router() -> Router {
    let store = SqliteStore::open_in_memory().unwrap();
    Server::builder(&store)
        .assistant("concierge", graph().unwrap().durable(&store))
        .build()
        .router()
}

/// A request to `app`: its status, content type and body (read to its end).
async fn call(app: &Router, method: &str, path: &str, body: &str) -> (StatusCode, String, String) {
    let request = Request::builder()
        .method(method)
        .uri(path)
        .header(header::CONTENT_TYPE, "application/json")
        .header(header::ACCEPT, "text/event-stream")
        .body(Body::from(body.to_owned()))
        .unwrap();
    let response = app.clone().oneshot(request).await.unwrap();
    let (parts, body) = response.into_parts();
    let content_type = parts
        .headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let bytes = body.collect().await.unwrap().to_bytes();
    (
        parts.status,
        content_type,
        String::from_utf8_lossy(&bytes).into_owned(),
    )
}

/// `POST /agui/concierge` with `body`.
async fn post(app: &Router, body: &str) -> (StatusCode, String, String) {
    call(app, "POST", "/agui/concierge", body).await
}

/// A run's input on `thread` with `messages`.
fn input(thread: &str, run: &str, messages: Value) -> String {
    json!({"threadId": thread, "runId": run, "messages": messages, "tools": [], "context": []})
        .to_string()
}

/// An AG-UI stream's events: every frame is `data: <one event>`, blank-line ended.
fn events(body: &str) -> Vec<Event> {
    assert!(body.ends_with("\n\n"), "{body}");
    body.split_terminator("\n\n")
        .map(|frame| {
            let data = frame
                .strip_prefix("data: ")
                .unwrap_or_else(|| panic!("{frame}"));
            assert!(!data.contains('\n'), "{frame}");
            serde_json::from_str(data).unwrap()
        })
        .collect()
}

#[tokio::test]
async fn a_run_streams_frames_that_fold_into_the_threads_state() {
    let app = router();
    let messages = json!([{"id": "u1", "role": "user", "content": "hello"}]);
    let (status, content_type, body) = post(&app, &input("t-1", "r-1", messages)).await;
    assert_eq!(
        (status, content_type.as_str()),
        (StatusCode::OK, "text/event-stream")
    );
    let events = events(&body);
    let types: Vec<&str> = events.iter().map(Event::event_type).collect();
    assert_eq!(types.first(), Some(&"RUN_STARTED"), "{types:?}");
    assert_eq!(types.last(), Some(&"RUN_FINISHED"), "{types:?}");
    assert_eq!(types.iter().filter(|t| t.starts_with("RUN_")).count(), 2);
    let Event::RunStarted(started) = &events[0] else {
        unreachable!()
    };
    assert_eq!(
        (started.thread_id.as_str(), started.run_id.as_str()),
        ("t-1", "r-1")
    );

    // agentstate's fold (the official client's rules) takes every event, and ends where the
    // thread is.
    let mut chat = ChatState::new();
    for event in &events {
        assert!(chat.apply(event).is_applied(), "{event:?}");
    }
    assert!(chat.errors().is_empty(), "{:?}", chat.errors());
    // The answer streamed; the run's MESSAGES_SNAPSHOT adds the question (this fold had not
    // got it: a client that sent it has it first).
    let texts: Vec<String> = chat.messages().iter().map(|m| m.text().into()).collect();
    assert_eq!(texts, ["You said: hello", "hello"]);
    // Each node a step, the state after it, then the thread's state and conversation.
    let types: Vec<&str> = events.iter().map(Event::event_type).collect();
    assert_eq!(
        types,
        [
            "RUN_STARTED",
            "STEP_STARTED",
            "TEXT_MESSAGE_START",
            "TEXT_MESSAGE_CONTENT",
            "TEXT_MESSAGE_CONTENT",
            "TEXT_MESSAGE_CONTENT",
            "TEXT_MESSAGE_CONTENT",
            "TEXT_MESSAGE_END",
            "STATE_SNAPSHOT",
            "STEP_FINISHED",
            "STATE_SNAPSHOT",
            "MESSAGES_SNAPSHOT",
            "RUN_FINISHED"
        ]
    );
    let (_, _, state) = call(&app, "GET", "/threads/t-1/state", "").await;
    let state: Value = serde_json::from_str(&state).unwrap();
    assert_eq!(chat.agent_state(), &state["values"]);
    assert_eq!(
        state["values"]["messages"].as_array().map(Vec::len),
        Some(2)
    );
}

#[tokio::test]
async fn a_busy_thread_refuses_a_second_run_before_its_stream_starts() {
    let app = router();
    let slow = json!([{"id": "s1", "role": "user", "content": "slow"}]);
    let request = Request::builder()
        .method("POST")
        .uri("/agui/concierge")
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(input("t-busy", "r-slow", slow)))
        .unwrap();
    // The first run's response is here (its stream is not read yet): the run holds the thread.
    let first = app.clone().oneshot(request).await.unwrap();
    let (status, _, body) = post(&app, &input("t-busy", "r-2", json!([]))).await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    let detail: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        detail["detail"],
        "thread `t-busy` is busy with run `r-slow`; AG-UI run `r-2` was refused (retry when it ends)"
    );
    let rest = first.into_body().collect().await.unwrap().to_bytes();
    let last = events(&String::from_utf8_lossy(&rest)).pop().unwrap();
    assert_eq!(last.event_type(), "RUN_FINISHED");
    // Ended, the thread takes the next run.
    let (status, _, _) = post(&app, &input("t-busy", "r-3", json!([]))).await;
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test]
async fn bad_requests_are_refused_with_a_sentence() {
    let app = router();
    let detail = |body: &str| {
        serde_json::from_str::<Value>(body).unwrap()["detail"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let hello = json!([{"id": "u1", "role": "user", "content": "hello"}]);

    let (status, _, body) = call(&app, "POST", "/agui/nobody", &input("t", "r", json!([]))).await;
    assert_eq!(
        (status, detail(&body)),
        (
            StatusCode::NOT_FOUND,
            "assistant `nobody` does not exist".to_owned()
        )
    );

    let (status, _, body) = post(&app, "{\"runId\": \"r\"}").await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(detail(&body).starts_with("the body of an AG-UI run of assistant `concierge` is not a RunAgentInput: missing field `threadId`"), "{body}");

    let (status, _, body) = post(&app, &input("", "r", json!([]))).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(
        detail(&body).starts_with(
            "the thread id `` of an AG-UI run of assistant `concierge` is not valid: "
        ),
        "{body}"
    );

    let (status, _, _) = post(&app, &input("t-2", "r-1", hello.clone())).await;
    assert_eq!(status, StatusCode::OK);
    let (status, _, body) = post(&app, &input("t-3", "r-1", hello)).await;
    assert_eq!(
        (status, detail(&body)),
        (
            StatusCode::CONFLICT,
            "run `r-1` exists already (on thread `t-2`); an AG-UI run needs a new `runId`"
                .to_owned()
        )
    );

    let resume = json!({"threadId": "t-2", "runId": "r-4", "messages": [],
        "resume": [{"interruptId": "approve:9.0:0", "status": "resolved", "payload": true}]});
    let (status, _, body) = post(&app, &resume.to_string()).await;
    assert_eq!((status, detail(&body)), (StatusCode::UNPROCESSABLE_ENTITY, "AG-UI run `r-4` on thread `t-2` answers interrupt `approve:9.0:0`, which the thread does not wait for (it waits for: nothing)".to_owned()));
}

#[tokio::test]
async fn a_run_whose_node_panics_ends_with_run_error() {
    let app = router();
    let panic = json!([{"id": "p1", "role": "user", "content": "panic"}]);
    let (status, _, body) = post(&app, &input("t-panic", "r-panic", panic)).await;
    assert_eq!(status, StatusCode::OK);
    let events = events(&body);
    let Some(Event::RunError(error)) = events.last() else {
        panic!("{events:?}")
    };
    assert_eq!(error.code.as_deref(), Some("run_panicked"));
    assert_eq!(
        error.message,
        "run `r-panic` on thread `t-panic` panicked: the concierge met `panic`"
    );
    let ends = events
        .iter()
        .filter(|e| e.event_type().starts_with("RUN_"))
        .count();
    assert_eq!(ends, 2, "{events:?}");
}

/// A notebook whose conversation is LangGraph's `add_messages` (`upsert_messages`) and whose
/// note the client's state gives.
#[derive(AgentState, Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
struct Notebook {
    #[reducer(upsert_messages)]
    messages: Vec<Message>,
    note: Option<String>,
}

/// `read` answers `<note> / <the user's last words>`; `break` streams `Half` then fails.
fn notebook() -> Router {
    let graph = Graph::builder()
        .node("read", |state: Arc<Notebook>, cx: Context| async move {
            let said = state.messages.last().map(Message::text).unwrap_or_default();
            if said == "break" {
                cx.emit(Emitted::TextDelta {
                    message_id: "half".into(),
                    delta: "Half".into(),
                });
                return Err(BoxError::from("the notebook broke"));
            }
            let note = state.note.as_deref().unwrap_or("no note");
            let reply = Message::text_message(format!("{note} / {said}"), Role::Assistant);
            Ok::<_, BoxError>(NotebookUpdate::default().messages(vec![reply.into()]))
        })
        .entry("read")
        .edge("read", END)
        .build()
        .unwrap();
    let store = SqliteStore::open_in_memory().unwrap();
    Server::builder(&store)
        .assistant("notebook", graph.durable(&store))
        .build()
        .router()
}

#[tokio::test]
async fn client_messages_and_state_reach_an_upsert_messages_state() {
    let app = notebook();
    let body = json!({"threadId": "n-1", "runId": "n-r1", "tools": [], "context": [],
        "messages": [{"id": "u1", "role": "user", "content": "hi"}],
        "state": {"note": "from the client", "unknown": 1}});
    let (status, _, body) = call(&app, "POST", "/agui/notebook", &body.to_string()).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let first = events(&body);
    let types: Vec<&str> = first.iter().map(Event::event_type).collect();
    assert_eq!(
        types,
        [
            "RUN_STARTED",
            "STEP_STARTED",
            "STATE_SNAPSHOT",
            "STEP_FINISHED",
            "STATE_SNAPSHOT",
            "MESSAGES_SNAPSHOT",
            "RUN_FINISHED"
        ]
    );
    let Event::MessagesSnapshot(snapshot) = &first[5] else {
        unreachable!()
    };
    let texts: Vec<String> = snapshot.messages.iter().map(|m| m.text().into()).collect();
    assert_eq!(texts, ["hi", "from the client / hi"]);
    let Event::RunFinished(finished) = &first[6] else {
        unreachable!()
    };
    assert_eq!(finished.outcome, None);
    let (_, _, state) = call(&app, "GET", "/threads/n-1/state", "").await;
    let values = serde_json::from_str::<Value>(&state).unwrap()["values"].clone();
    assert_eq!(values["note"], "from the client");
    assert_eq!(values.get("unknown"), None);
    assert_eq!(values["messages"].as_array().map(Vec::len), Some(2));

    // A reload: a new client, no messages, its state empty; the conversation comes back.
    let again = json!({"threadId": "n-1", "runId": "n-r2", "messages": [], "state": {}});
    let (_, _, body) = call(&app, "POST", "/agui/notebook", &again.to_string()).await;
    let reloaded = events(&body);
    let Some(Event::MessagesSnapshot(snapshot)) = reloaded.iter().rev().nth(1) else {
        panic!("{reloaded:?}")
    };
    let texts: Vec<String> = snapshot.messages.iter().map(|m| m.text().into()).collect();
    assert_eq!(
        texts,
        [
            "hi",
            "from the client / hi",
            "from the client / from the client / hi"
        ]
    );
}

#[tokio::test]
async fn a_failure_ends_what_was_streaming_before_run_error() {
    let app = notebook();
    let body = json!({"threadId": "n-2", "runId": "n-r3",
        "messages": [{"id": "b1", "role": "user", "content": "break"}]});
    let (_, _, body) = call(&app, "POST", "/agui/notebook", &body.to_string()).await;
    let events = events(&body);
    let types: Vec<&str> = events.iter().map(Event::event_type).collect();
    assert_eq!(
        types,
        [
            "RUN_STARTED",
            "STEP_STARTED",
            "TEXT_MESSAGE_START",
            "TEXT_MESSAGE_CONTENT",
            "TEXT_MESSAGE_END",
            "RUN_ERROR"
        ]
    );
    let mut chat = ChatState::new();
    for event in &events {
        assert!(chat.apply(event).is_applied(), "{event:?}");
    }
    assert_eq!(chat.messages()[0].text(), "Half");
}

#[tokio::test]
async fn a_resume_may_take_the_interrupted_runs_id_and_an_unanswered_thread_asks_again() {
    let app = router();
    let refund = json!([{"id": "r1", "role": "user", "content": "refund"}]);
    let (_, _, body) = post(&app, &input("t-ask", "r-ask", refund.clone())).await;
    let asked = events(&body);
    let Some(Event::RunFinished(finished)) = asked.last() else {
        panic!("{asked:?}")
    };
    let Some(agentstate::agui::RunOutcome::Interrupt { interrupts }) = &finished.outcome else {
        panic!("{finished:?}")
    };
    let id = interrupts[0]["id"].as_str().unwrap().to_owned();
    let Event::Custom(on_interrupt) = &asked[asked.len() - 2] else {
        panic!("{asked:?}")
    };
    assert_eq!(
        (on_interrupt.name.as_str(), &on_interrupt.value),
        ("on_interrupt", &json!("Refund 30 EUR?"))
    );

    // A run without answers runs nothing: the questions again.
    let (status, _, body) = post(&app, &input("t-ask", "r-again", refund.clone())).await;
    assert_eq!(status, StatusCode::OK);
    let again = events(&body);
    let types: Vec<&str> = again.iter().map(Event::event_type).collect();
    assert_eq!(types, ["RUN_STARTED", "CUSTOM", "RUN_FINISHED"]);

    // The resume takes the interrupted run's id (CopilotKit's useInterrupt).
    let resume = json!({"threadId": "t-ask", "runId": "r-ask", "messages": refund,
        "resume": [{"interruptId": id, "status": "resolved", "payload": true}]});
    let (status, _, body) = post(&app, &resume.to_string()).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let resumed = events(&body);
    assert_eq!(resumed.last().map(Event::event_type), Some("RUN_FINISHED"));
    let (_, _, state) = call(&app, "GET", "/threads/t-ask/state", "").await;
    let values = serde_json::from_str::<Value>(&state).unwrap()["values"].clone();
    assert_eq!(values["approved"], true);
    let (_, _, run) = call(&app, "GET", "/threads/t-ask/runs/r-ask", "").await;
    assert_eq!(
        serde_json::from_str::<Value>(&run).unwrap()["status"],
        "success"
    );

    // A new input may not: the run id is taken.
    let later = json!([{"id": "r2", "role": "user", "content": "hello"}]);
    let (status, _, body) = post(&app, &input("t-ask", "r-ask", later)).await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert_eq!(
        serde_json::from_str::<Value>(&body).unwrap()["detail"],
        "run `r-ask` exists already on thread `t-ask`; only a run answering the thread's interrupts may take an earlier run's `runId`"
    );
}

#[tokio::test]
async fn forwarded_props_command_resume_answers_the_thread() {
    let app = router();
    let refund = json!([{"id": "r1", "role": "user", "content": "refund"}]);
    post(&app, &input("t-legacy", "r-l1", refund.clone())).await;
    let resume = json!({"threadId": "t-legacy", "runId": "r-l2", "messages": refund,
        "forwardedProps": {"command": {"resume": "false"}}});
    let (status, _, body) = post(&app, &resume.to_string()).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (_, _, state) = call(&app, "GET", "/threads/t-legacy/state", "").await;
    let values = serde_json::from_str::<Value>(&state).unwrap()["values"].clone();
    assert_eq!(values["approved"], false);
    assert_eq!(values["messages"][1]["content"], "Not refunded.");
}

#[tokio::test]
async fn client_state_that_does_not_fit_the_state_fails_the_run_with_a_sentence() {
    let app = notebook();
    let body = json!({"threadId": "n-3", "runId": "n-r4", "state": {"note": 5},
        "messages": [{"id": "u1", "role": "user", "content": "hi"}]});
    let (status, _, body) = call(&app, "POST", "/agui/notebook", &body.to_string()).await;
    assert_eq!(status, StatusCode::OK);
    let Some(Event::RunError(error)) = events(&body).pop() else {
        panic!("{body}")
    };
    assert_eq!(error.code.as_deref(), Some("state_validation_error"));
    assert_eq!(
        error.message,
        "the input of run `n-r4` on thread `n-3` is not an update of its state: field `note` has a value that does not fit at `note`: invalid type: integer `5`, expected a string"
    );
}

#[tokio::test]
async fn an_edited_message_does_the_conversation_again_from_it() {
    let app = notebook();
    let said = |text: &str, run: &str| {
        json!({"threadId": "n-edit", "runId": run, "messages": [{"id": "e1", "role": "user", "content": text}]})
            .to_string()
    };
    call(&app, "POST", "/agui/notebook", &said("hello", "n-e1")).await;
    let (status, _, body) = call(&app, "POST", "/agui/notebook", &said("goodbye", "n-e2")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (_, _, state) = call(&app, "GET", "/threads/n-edit/state", "").await;
    let values = serde_json::from_str::<Value>(&state).unwrap()["values"].clone();
    let texts: Vec<&str> = values["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["content"].as_str().unwrap())
        .collect();
    assert_eq!(texts, ["goodbye", "no note / goodbye"]);
    // The same text again is no edit: the conversation goes on.
    call(&app, "POST", "/agui/notebook", &said("goodbye", "n-e3")).await;
    let (_, _, state) = call(&app, "GET", "/threads/n-edit/state", "").await;
    let values = serde_json::from_str::<Value>(&state).unwrap()["values"].clone();
    assert_eq!(values["messages"].as_array().map(Vec::len), Some(3));
}

#[tokio::test]
async fn an_edit_goes_before_the_threads_questions() {
    let app = router();
    let refund = json!([{"id": "q1", "role": "user", "content": "refund"}]);
    post(&app, &input("t-edit", "r-e1", refund)).await;
    let edited = json!([{"id": "q1", "role": "user", "content": "never mind"}]);
    let (status, _, body) = post(&app, &input("t-edit", "r-e2", edited)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (_, _, thread) = call(&app, "GET", "/threads/t-edit", "").await;
    assert_eq!(
        serde_json::from_str::<Value>(&thread).unwrap()["status"],
        "idle"
    );
    let (_, _, state) = call(&app, "GET", "/threads/t-edit/state", "").await;
    let values = serde_json::from_str::<Value>(&state).unwrap()["values"].clone();
    let texts: Vec<&str> = values["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["content"].as_str().unwrap())
        .collect();
    assert_eq!(texts, ["never mind", "You said: never mind"]);
}
