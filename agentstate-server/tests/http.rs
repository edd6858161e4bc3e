//! The API over HTTP without a client library: error shapes and codes, the SSE framing, a
//! cancelled run continued, `enqueue`, stateless runs, and records that outlive the server.

#[path = "../examples/support/desk.rs"]
mod desk;
#[cfg(feature = "postgres")]
#[path = "support/postgres.rs"]
mod support;

use agentstate_server::Server;
use agentstate_store::{RecordBackend, SqliteStore, Store};
use axum::body::Body;
use axum::http::{header, HeaderMap, Request, StatusCode};
use axum::Router;
use http_body_util::BodyExt;
use serde_json::{json, Value};
use std::time::Duration;
use tower::ServiceExt;

fn app<B: RecordBackend>(store: &Store<B>) -> Router {
    Server::builder(store)
        .assistant("desk", desk::graph().unwrap().durable(store))
        .api_key("k")
        .build()
        .router()
}

/// A request: its status, headers and body text.
async fn call(
    app: &Router,
    method: &str,
    path: &str,
    body: Option<Value>,
    key: Option<&str>,
) -> (StatusCode, HeaderMap, String) {
    let mut request = Request::builder().method(method).uri(path);
    if let Some(key) = key {
        request = request.header("x-api-key", key);
    }
    let body = body.map_or_else(Body::empty, |b| Body::from(b.to_string()));
    let response = app
        .clone()
        .oneshot(
            request
                .header("content-type", "application/json")
                .body(body)
                .unwrap(),
        )
        .await
        .unwrap();
    let (parts, body) = response.into_parts();
    let bytes = body.collect().await.unwrap().to_bytes();
    (
        parts.status,
        parts.headers,
        String::from_utf8_lossy(&bytes).into_owned(),
    )
}

/// An SSE body's events: the ids of those that have one (a resumable run's), and their names
/// with their JSON.
fn sse(body: &str) -> (Vec<usize>, Vec<(&str, Value)>) {
    let mut ids = Vec::new();
    let events = body
        .split("\n\n")
        .filter(|f| !f.is_empty())
        .map(|frame| {
            let field = |name: &str| {
                let prefix = format!("{name}: ");
                frame.lines().find_map(|l| l.strip_prefix(prefix.as_str()))
            };
            if let Some(id) = field("id") {
                ids.push(id.parse().unwrap());
            }
            let data = serde_json::from_str(field("data").unwrap()).unwrap();
            (field("event").unwrap(), data)
        })
        .collect();
    (ids, events)
}

/// A request with the key whose answer is JSON.
async fn json(app: &Router, method: &str, path: &str, body: Option<Value>) -> (StatusCode, Value) {
    let (status, _, text) = call(app, method, path, body, Some("k")).await;
    let value = serde_json::from_str(&text).unwrap_or(Value::Null);
    (status, value)
}

/// The statuses of the runs listed at `runs`, the newest first.
async fn run_statuses(app: &Router, runs: &str) -> Vec<String> {
    let (_, listed) = json(app, "GET", runs, None).await;
    let list = listed.as_array().cloned().unwrap_or_default();
    list.iter()
        .map(|r| r["status"].as_str().unwrap_or("?").to_owned())
        .collect()
}

/// The events of the stream of a run of `slow one` in mode `updates`, checked: `metadata`,
/// then its three steps' updates, numbered from 0.
fn the_slow_runs_updates(body: &str) -> Vec<(&str, Value)> {
    let (ids, frames) = sse(body);
    let names: Vec<&str> = frames.iter().map(|(e, _)| *e).collect();
    assert_eq!(
        names,
        ["metadata", "updates", "updates", "updates"],
        "{body}"
    );
    assert_eq!(ids, [0, 1, 2, 3]);
    frames
}

/// The body of run stream `stream` joined on `app`, after event `last` if given.
async fn joined(app: &Router, stream: &str, last: Option<&str>) -> String {
    let mut request = Request::builder().uri(stream).header("x-api-key", "k");
    if let Some(last) = last {
        request = request.header("last-event-id", last);
    }
    let response = app
        .clone()
        .oneshot(request.body(Body::empty()).unwrap())
        .await
        .unwrap();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    String::from_utf8_lossy(&bytes).into_owned()
}

fn ask(text: &str) -> Value {
    json!({"messages": [{"role": "user", "content": [{"type": "text", "text": text}]}]})
}

/// A server on a new database, a new thread on it, and the path of the thread's runs.
async fn on_a_thread() -> (Router, String, String) {
    let app = app(&SqliteStore::open_in_memory().unwrap());
    let thread = new_thread(&app).await;
    let runs = format!("/threads/{thread}/runs");
    (app, thread, runs)
}

async fn new_thread(app: &Router) -> String {
    let (status, thread) = json(app, "POST", "/threads", Some(json!({}))).await;
    assert_eq!(status, StatusCode::OK, "{thread}");
    thread["thread_id"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn refusals_name_what_was_wrong_with_the_reference_servers_codes() {
    let app = app(&SqliteStore::open_in_memory().unwrap());
    let (status, _, body) = call(&app, "GET", "/ok", None, None).await;
    assert_eq!((status, body.as_str()), (StatusCode::OK, r#"{"ok":true}"#));
    let (status, _, body) = call(&app, "POST", "/threads/search", Some(json!({})), None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_eq!(
        body,
        r#"{"detail":"the request to `/threads/search` carries no API key in its `x-api-key` header"}"#
    );
    let (status, _, _) = call(
        &app,
        "POST",
        "/threads/search",
        Some(json!({})),
        Some("bad"),
    )
    .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);

    let (status, body) = json(&app, "GET", "/threads/nope", None).await;
    assert_eq!(
        (status, body),
        (
            StatusCode::NOT_FOUND,
            json!({"detail": "Thread with ID nope not found"})
        )
    );
    let (status, body) = json(
        &app,
        "POST",
        "/threads/nope/runs/wait",
        Some(json!({"assistant_id": "desk"})),
    )
    .await;
    assert_eq!(
        (status, body),
        (
            StatusCode::NOT_FOUND,
            json!({"detail": "Thread or assistant not found."})
        )
    );
    let (status, body) = json(&app, "POST", "/threads/nope/copy", None).await;
    assert_eq!(
        (status, body),
        (
            StatusCode::NOT_FOUND,
            json!({"detail": "Thread with ID nope not found"})
        )
    );

    let thread = new_thread(&app).await;
    let runs = format!("/threads/{thread}/runs/stream");
    let refused = [
        (
            json!({"assistant_id": "nobody"}),
            "Invalid assistant: 'nobody'. Must be either:\n- A valid assistant UUID, or\n- One of the registered graphs: desk",
        ),
        (
            json!({"assistant_id": "desk", "stream_mode": ["values", "tools"]}),
            "stream mode `tools` is not served yet",
        ),
        (
            json!({"assistant_id": "desk", "stream_mode": "nonsense"}),
            "stream mode \"nonsense\" is not one of",
        ),
        (
            json!({"assistant_id": "desk", "command": {"goto": {"node": "draft", "input": {}}}}),
            "with an input of its own (a `Send`)",
        ),
        (
            json!({"assistant_id": "desk", "interrupt_before": ["nowhere"]}),
            "names node `nowhere`, which graph `desk` does not have",
        ),
        (
            json!({"assistant_id": "desk", "checkpoint_id": "first"}),
            "checkpoint `first` is not one of the thread's checkpoint ids",
        ),
        (
            json!({"assistant_id": "desk", "multitask_strategy": "sometimes"}),
            "multitask_strategy `sometimes` is not one of",
        ),
        (
            json!({"input": {}}),
            "a run request needs an `assistant_id`",
        ),
        (
            json!({"assistant_id": 7}),
            "the body of a run request is not valid",
        ),
    ];
    for (request, says) in refused {
        let (status, body) = json(&app, "POST", &runs, Some(request.clone())).await;
        assert_eq!(
            status,
            StatusCode::UNPROCESSABLE_ENTITY,
            "{request}: {body}"
        );
        assert!(
            body["detail"].as_str().unwrap().contains(says),
            "{request}: {body}"
        );
    }
    let (status, _, body) = call(
        &app,
        "POST",
        "/threads",
        Some(json!({"thread_id": thread})),
        Some("k"),
    )
    .await;
    assert_eq!(
        (status, body),
        (
            StatusCode::CONFLICT,
            format!(r#"{{"detail":"Thread with ID {thread} already exists"}}"#)
        )
    );
    let (status, _, body) = call(&app, "POST", "/threads", None, Some("k")).await;
    assert_eq!(
        status,
        StatusCode::OK,
        "an empty body is an empty request: {body}"
    );
    let (status, body) = json(&app, "GET", &format!("/threads/{thread}/runs/r-1"), None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    // As LangGraph's server answers it.
    assert_eq!(body["detail"], "Not Found");
}

/// A thread no run made a state for yet is copied as its record: a new id, its metadata and
/// status, no state.
#[tokio::test]
async fn a_thread_without_state_is_copied_as_its_record() {
    let app = app(&SqliteStore::open_in_memory().unwrap());
    let (status, source) = json(
        &app,
        "POST",
        "/threads",
        Some(json!({"metadata": {"user": "ann"}})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{source}");
    let id = source["thread_id"].as_str().unwrap();
    let (status, copy) = json(&app, "POST", &format!("/threads/{id}/copy"), None).await;
    assert_eq!(status, StatusCode::OK, "{copy}");
    let copy_id = copy["thread_id"].as_str().unwrap();
    assert_ne!(copy_id, id);
    assert!(uuid::Uuid::parse_str(copy_id).is_ok(), "{copy}");
    assert_eq!(
        (&copy["metadata"], &copy["status"], &copy["values"]),
        (&json!({"user": "ann"}), &json!("idle"), &Value::Null)
    );
    // Read back, the thread shows its (empty) values; the copy's answer, as LangGraph's, not.
    let (status, mut read) = json(&app, "GET", &format!("/threads/{copy_id}"), None).await;
    assert_eq!(
        (status, read["values"].take()),
        (StatusCode::OK, Value::Null)
    );
    read.as_object_mut().unwrap().remove("values");
    assert_eq!(read, copy);
    let (status, history) = json(&app, "GET", &format!("/threads/{copy_id}/history"), None).await;
    assert_eq!((status, history), (StatusCode::OK, json!([])));
}

#[tokio::test]
async fn a_stream_is_sse_with_metadata_first_and_the_run_named() {
    let app = app(&SqliteStore::open_in_memory().unwrap());
    let thread = new_thread(&app).await;
    let request = json!({"assistant_id": "desk", "input": ask("hi"), "stream_mode": ["updates", "values"], "stream_resumable": true});
    let path = format!("/threads/{thread}/runs/stream");
    let (status, headers, body) = call(&app, "POST", &path, Some(request), Some("k")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(headers["content-type"], "text/event-stream");
    let location = headers["content-location"].to_str().unwrap();
    assert_eq!(headers["location"], format!("{location}/stream"));
    let run_id = location
        .strip_prefix(&format!("/threads/{thread}/runs/"))
        .unwrap();
    let (ids, frames) = sse(&body);
    assert_eq!(
        ids,
        (0..frames.len()).collect::<Vec<_>>(),
        "an id on every event of a resumable run"
    );
    assert_eq!(
        frames[0],
        ("metadata", json!({"run_id": run_id, "attempt": 1}))
    );
    let names: Vec<&str> = frames.iter().map(|(e, _)| *e).collect();
    assert_eq!(
        names,
        ["metadata", "values", "updates", "values", "updates", "values", "updates", "values"],
        "{body}"
    );
    // The state the run starts from: its input merged.
    assert_eq!(frames[1].1["messages"][0]["content"], json!("hi"));
    assert_eq!(
        frames[6].1["__interrupt__"][0]["value"],
        json!({"question": "Send this answer?"})
    );
    assert_eq!(frames[7].1["log"], json!(["triage", "draft"]));
    assert!(frames[7].1["__interrupt__"][0]["id"].is_string());
}

#[tokio::test]
async fn a_cancelled_run_leaves_its_thread_interrupted_and_a_run_without_input_continues_it() {
    let (app, thread, runs) = on_a_thread().await;
    let (_, run) = json(
        &app,
        "POST",
        &runs,
        Some(json!({"assistant_id": "desk", "input": ask("slow one")})),
    )
    .await;
    let run_id = run["run_id"].as_str().unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (status, _, _) = call(
        &app,
        "POST",
        &format!("{runs}/{run_id}/cancel?wait=1"),
        None,
        Some("k"),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let (_, run) = json(&app, "GET", &format!("{runs}/{run_id}"), None).await;
    assert_eq!(run["status"], "interrupted");
    let (_, state) = json(&app, "GET", &format!("/threads/{thread}"), None).await;
    assert_eq!(state["status"], "interrupted");
    assert_eq!(
        (&state["error"]["error"], &state["error"]["message"]),
        (
            &json!("UserInterrupt"),
            &json!("interrupt requested via POST /threads/{thread_id}/runs/{run_id}/cancel")
        )
    );
    let (status, body) = json(&app, "POST", &format!("{runs}/{run_id}/cancel"), None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(
        body["detail"]
            .as_str()
            .unwrap()
            .starts_with("No matching runs to cancel."),
        "{body}"
    );

    let (status, values) = json(
        &app,
        "POST",
        &format!("{runs}/wait"),
        Some(json!({"assistant_id": "desk"})),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(values["log"], json!(["triage", "draft"]), "{values}");
    assert_eq!(values["__interrupt__"].as_array().map(Vec::len), Some(1));
}

#[tokio::test]
async fn enqueue_runs_after_the_running_run_and_reject_refuses() {
    let (app, _, runs) = on_a_thread().await;
    let (_, first) = json(
        &app,
        "POST",
        &runs,
        Some(json!({"assistant_id": "desk", "input": ask("slow one")})),
    )
    .await;
    let reject = json!({"assistant_id": "desk", "input": ask("x"), "multitask_strategy": "reject"});
    let (status, body) = json(&app, "POST", &runs, Some(reject)).await;
    assert_eq!(status, StatusCode::CONFLICT);
    let first_id = first["run_id"].as_str().unwrap();
    assert_eq!(
        body["detail"],
        "Thread is already running a task. Wait for it to finish or choose a different multitask strategy."
    );
    assert!(!first_id.is_empty());
    let resume = json!({"assistant_id": "desk", "command": {"resume": true}, "multitask_strategy": "enqueue"});
    let (status, values) = json(&app, "POST", &format!("{runs}/wait"), Some(resume)).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        values["log"],
        json!(["triage", "draft", "approve"]),
        "{values}"
    );
    assert_eq!(run_statuses(&app, &runs).await, ["success", "success"]);
}

#[tokio::test]
async fn a_stateless_run_leaves_no_thread_behind() {
    let app = app(&SqliteStore::open_in_memory().unwrap());
    let (status, values) = json(
        &app,
        "POST",
        "/runs/wait",
        Some(json!({"assistant_id": "desk", "input": ask("hi")})),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(values["log"], json!(["triage", "draft"]));
    let (_, threads) = json(&app, "POST", "/threads/search", Some(json!({}))).await;
    assert_eq!(threads, json!([]));
}

#[tokio::test]
async fn threads_and_runs_outlive_the_server_in_the_stores_database() {
    let dir = std::env::temp_dir().join(format!("agentstate-server-http-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("server.db");
    let _ = std::fs::remove_file(&path);
    let (thread, run_id) = {
        let store = SqliteStore::open(&path).unwrap();
        let app = app(&store);
        let (_, thread) = json(
            &app,
            "POST",
            "/threads",
            Some(json!({"metadata": {"user": "ann"}})),
        )
        .await;
        let thread = thread["thread_id"].as_str().unwrap().to_owned();
        let runs = format!("/threads/{thread}/runs");
        let (_, run) = json(
            &app,
            "POST",
            &runs,
            Some(json!({"assistant_id": "desk", "input": ask("hi")})),
        )
        .await;
        let run_id = run["run_id"].as_str().unwrap().to_owned();
        json(&app, "GET", &format!("{runs}/{run_id}/join"), None).await;
        (thread, run_id)
    };
    let store = SqliteStore::open(&path).unwrap();
    let app = app(&store);
    let (_, got) = json(&app, "GET", &format!("/threads/{thread}"), None).await;
    assert_eq!(
        (&got["status"], &got["metadata"]),
        (
            &json!("interrupted"),
            &json!({"user": "ann", "graph_id": "desk", "assistant_id": "43d2564a-5479-5acc-951b-f2ac157987ec"})
        )
    );
    assert_eq!(got["values"]["log"], json!(["triage", "draft"]));
    let (_, run) = json(
        &app,
        "GET",
        &format!("/threads/{thread}/runs/{run_id}"),
        None,
    )
    .await;
    assert_eq!(run["status"], "success");
    let (status, _, _) = call(
        &app,
        "DELETE",
        &format!("/threads/{thread}"),
        None,
        Some("k"),
    )
    .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, _) = json(
        &app,
        "GET",
        &format!("/threads/{thread}/runs/{run_id}"),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    drop((app, store));
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn recover_ends_the_runs_a_stopped_server_left_running() {
    use agentstate_server::record::{Record, RunRecord, RunStatus, ThreadRecord, ThreadStatus};
    let store = SqliteStore::open_in_memory().unwrap();
    let server = || {
        Server::builder(&store)
            .assistant("desk", desk::graph().unwrap().durable(&store))
            .api_key("k")
            .build()
    };
    let first = server().router();
    let thread = new_thread(&first).await;
    let runs = format!("/threads/{thread}/runs");
    json(
        &first,
        "POST",
        &format!("{runs}/wait"),
        Some(json!({"assistant_id": "desk", "input": ask("hi")})),
    )
    .await;
    // What a server that stopped mid-run leaves: a running run, a busy thread; and a pending
    // run on a thread no run made yet.
    let mut left = RunRecord::new("r-running", &thread, "desk", json!({}), 1);
    left.status = RunStatus::Running;
    store
        .put_record("run", "r-running", Some(&thread), &Record::Run(left))
        .await
        .unwrap();
    let mut busy: ThreadRecord = match store.record::<Record>("thread", &thread).await.unwrap() {
        Some(Record::Thread(t)) => t,
        other => panic!("a thread record, not {other:?}"),
    };
    busy.status = ThreadStatus::Busy;
    store
        .put_record("thread", &thread, None, &Record::Thread(busy))
        .await
        .unwrap();
    let mut fresh = ThreadRecord::new("t-fresh", Default::default(), 1);
    fresh.status = ThreadStatus::Busy;
    fresh.graph_id = Some("desk".into());
    store
        .put_record("thread", "t-fresh", None, &Record::Thread(fresh))
        .await
        .unwrap();
    let pending = RunRecord::new("r-pending", "t-fresh", "desk", json!({}), 1);
    store
        .put_record("run", "r-pending", Some("t-fresh"), &Record::Run(pending))
        .await
        .unwrap();

    let second = server();
    assert_eq!(second.recover().await.unwrap(), 2);
    assert_eq!(
        second.recover().await.unwrap(),
        0,
        "recovering twice ends nothing more"
    );
    let app = second.router();
    let (_, run) = json(&app, "GET", &format!("{runs}/r-running"), None).await;
    assert_eq!(run["status"], "error");
    let (_, joined) = json(&app, "GET", &format!("{runs}/r-running/join"), None).await;
    assert_eq!(
        joined["__error__"]["message"],
        format!("the server stopped while run `r-running` of thread `{thread}` was running; a run without `input` continues the thread")
    );
    let (_, got) = json(&app, "GET", &format!("/threads/{thread}"), None).await;
    assert_eq!(
        got["status"], "interrupted",
        "its run waits at the approval"
    );
    let (_, got) = json(&app, "GET", "/threads/t-fresh", None).await;
    assert_eq!(
        (&got["status"], &got["values"]),
        (&json!("idle"), &Value::Null)
    );
    let (_, state) = json(&app, "GET", "/threads/t-fresh/state", None).await;
    assert_eq!(state["values"], json!({}));
}

#[tokio::test]
async fn interrupt_stops_the_running_run_and_a_new_input_starts_afresh() {
    let (app, _, runs) = on_a_thread().await;
    let slow = json!({"assistant_id": "desk", "input": ask("slow one")});
    let (_, first) = json(&app, "POST", &runs, Some(slow)).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let second =
        json!({"assistant_id": "desk", "input": ask("second"), "multitask_strategy": "interrupt"});
    let (status, values) = json(&app, "POST", &format!("{runs}/wait"), Some(second)).await;
    assert_eq!(status, StatusCode::OK, "{values}");
    // The first run's committed step (triage) stays; its draft never ran.
    assert_eq!(
        values["log"],
        json!(["triage", "triage", "draft"]),
        "{values}"
    );
    // Messages go out as LangChain's dicts.
    let texts: Vec<(&str, &str)> = values["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| (m["type"].as_str().unwrap(), m["content"].as_str().unwrap()))
        .collect();
    assert_eq!(
        texts,
        [
            ("human", "slow one"),
            ("human", "second"),
            ("ai", "You asked: second")
        ]
    );
    let (_, first) = json(
        &app,
        "GET",
        &format!("{runs}/{}", first["run_id"].as_str().unwrap()),
        None,
    )
    .await;
    assert_eq!(first["status"], "interrupted");
}

/// A node that fails and one that panics (a bug): each run ends in error, saying why (a
/// node's error named by its type, as LangGraph names an exception by its class, with its own
/// text), its thread `error`; the server goes on, and a new input on the thread runs.
#[tokio::test]
async fn a_failed_or_panicking_run_ends_in_error_and_a_new_input_runs() {
    let cases = [
        // A string made a `BoxError`: a type without a name of its own.
        ("fail", "Error", "triage cannot route the question `fail`"),
        (
            "panic",
            "run_panicked",
            "panicked: triage met a question it was never meant to see",
        ),
    ];
    for (question, name, says) in cases {
        let (app, thread, runs) = on_a_thread().await;
        let wait = format!("{runs}/wait");
        let failing = json!({"assistant_id": "desk", "input": ask(question)});
        let (status, failed) = json(&app, "POST", &wait, Some(failing)).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(failed["__error__"]["error"], name, "{failed}");
        let message = failed["__error__"]["message"].as_str().unwrap();
        assert!(message.contains(says), "{message}");
        let (_, got) = json(&app, "GET", &format!("/threads/{thread}"), None).await;
        assert_eq!(got["status"], "error");
        assert_eq!(got["error"], failed["__error__"], "{got}");
        let fine = json!({"assistant_id": "desk", "input": ask("hi")});
        let (_, values) = json(&app, "POST", &wait, Some(fine)).await;
        assert_eq!(values["log"], json!(["triage", "draft"]), "{values}");
        let (_, got) = json(&app, "GET", &format!("/threads/{thread}"), None).await;
        assert_eq!(got["status"], "interrupted");
    }
}

/// A run whose node blocks its thread (no cancellation reaches it) still ends: past its
/// deadline (`timeout`, in seconds) it ends `timeout`, and cancelled it ends `interrupted`,
/// each within the stop's grace (2 s), long before the node returns (5 s); the server answers
/// meanwhile, the thread's next run runs once the node returned, and what the node's run does
/// when it returns changes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 3)]
async fn a_run_past_its_deadline_or_cancelled_ends_even_if_its_node_blocks() {
    let (app, thread, runs) = on_a_thread().await;
    let status_of = |run: String| {
        let app = app.clone();
        async move { json(&app, "GET", &run, None).await.1["status"].clone() }
    };
    // Past its deadline.
    let started = std::time::Instant::now();
    let late = json!({"assistant_id": "desk", "input": ask("block"), "timeout": 0.3});
    let (status, run) = json(&app, "POST", &runs, Some(late)).await;
    assert_eq!(status, StatusCode::OK, "{run}");
    let timed_out = format!("{runs}/{}", run["run_id"].as_str().unwrap());
    let (ok, _) = json(&app, "GET", "/ok", None).await;
    assert_eq!(ok, StatusCode::OK);
    while status_of(timed_out.clone()).await != "timeout" {
        eprintln!(
            "DEBUG {:?} {}",
            started.elapsed(),
            status_of(timed_out.clone()).await
        );
        assert!(
            started.elapsed() < Duration::from_millis(3800),
            "not ended in time"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (_, got) = json(&app, "GET", &format!("/threads/{thread}"), None).await;
    assert_eq!(got["status"], "error", "{got}");
    assert_eq!(got["error"]["error"], "TimeoutError", "{got}");
    let (_, joined) = json(&app, "GET", &format!("{timed_out}/join"), None).await;
    assert_eq!(joined["__error__"]["error"], "TimeoutError", "{joined}");
    // The thread's next run waits for the blocked node's return (one run of a thread at a
    // time), then runs after what the stopped run committed (its `triage`).
    let fine = json!({"assistant_id": "desk", "input": ask("hi")});
    let (_, values) = json(&app, "POST", &format!("{runs}/wait"), Some(fine)).await;
    assert_eq!(
        values["log"],
        json!(["triage", "triage", "draft"]),
        "{values}"
    );
    assert!(started.elapsed() >= Duration::from_secs(5));
    // Cancelled.
    let blocked = json!({"assistant_id": "desk", "input": ask("block again")});
    let (_, run) = json(&app, "POST", &runs, Some(blocked)).await;
    let cancelled = format!("{runs}/{}", run["run_id"].as_str().unwrap());
    while status_of(cancelled.clone()).await != "running" {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let asked = std::time::Instant::now();
    let (status, _) = json(&app, "POST", &format!("{cancelled}/cancel?wait=1"), None).await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        asked.elapsed() < Duration::from_millis(4000),
        "cancel took {:?}",
        asked.elapsed()
    );
    assert_eq!(status_of(cancelled.clone()).await, "interrupted");
    // The blocked nodes return: what their runs would write is not written.
    tokio::time::sleep(Duration::from_secs(6)).await;
    assert_eq!(status_of(timed_out).await, "timeout");
    assert_eq!(status_of(cancelled).await, "interrupted");
    let (_, got) = json(&app, "GET", &format!("/threads/{thread}"), None).await;
    assert_eq!(got["status"], "interrupted", "{got}");
    // A deadline that is not a number of seconds is refused.
    let bad = json!({"assistant_id": "desk", "input": ask("hi"), "timeout": "soon"});
    let (status, said) = json(&app, "POST", &runs, Some(bad)).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{said}");
    assert!(
        said["detail"].as_str().unwrap().contains("`timeout`"),
        "{said}"
    );
}

#[tokio::test]
async fn a_client_that_reconnects_with_last_event_id_gets_every_later_event_once() {
    let (app, _, runs) = on_a_thread().await;
    let slow = json!({"assistant_id": "desk", "input": ask("slow one"), "stream_mode": ["updates"], "stream_resumable": true});
    let (_, run) = json(&app, "POST", &runs, Some(slow)).await;
    let stream = format!("{runs}/{}/stream", run["run_id"].as_str().unwrap());
    let joined = |last| joined(&app, &stream, last);
    let (all, after_one, from_start) =
        tokio::join!(joined(None), joined(Some("1")), joined(Some("-1")));
    the_slow_runs_updates(&all);
    assert_eq!(sse(&after_one).0, [2, 3], "{after_one}");
    assert_eq!(sse(&from_start).0, [0, 1, 2, 3], "{from_start}");
}

#[tokio::test]
async fn a_state_update_is_made_as_a_node_and_refused_on_a_busy_thread() {
    let (app, thread, runs) = on_a_thread().await;
    let state = format!("/threads/{thread}/state");
    let (status, body) = json(
        &app,
        "POST",
        &state,
        Some(json!({"values": {"log": ["x"]}})),
    )
    .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(
        body["detail"],
        format!("thread `{thread}` has no state yet (no run made it), so it cannot be updated")
    );

    let hi = json!({"assistant_id": "desk", "input": ask("hi")});
    json(&app, "POST", &format!("{runs}/wait"), Some(hi)).await;
    // Made as `approve`, the suspended step is replaced: the run goes on from approve's edge,
    // to its end.
    let edit = json!({"values": {"approved": false, "log": ["edited"]}, "as_node": "approve"});
    let (status, updated) = json(&app, "POST", &state, Some(edit)).await;
    assert_eq!(status, StatusCode::OK, "{updated}");
    let (_, now) = json(&app, "GET", &state, None).await;
    assert_eq!(now["checkpoint"], updated["checkpoint"]);
    assert_eq!(
        (&now["values"]["approved"], &now["next"]),
        (&json!(false), &json!([]))
    );
    assert_eq!(now["values"]["log"], json!(["triage", "draft", "edited"]));

    let wrong = json!({"values": {"log": []}, "as_node": "nobody"});
    let (status, body) = json(&app, "POST", &state, Some(wrong)).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(
        body["detail"].as_str().unwrap().ends_with(
            "as node `nobody`, which the graph does not have (its nodes: triage, draft, approve)"
        ),
        "{body}"
    );

    let slow = json!({"assistant_id": "desk", "input": ask("slow one")});
    let (_, run) = json(&app, "POST", &runs, Some(slow)).await;
    let (status, body) = json(&app, "POST", &state, Some(json!({"values": {"log": []}}))).await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert_eq!(
        body["detail"],
        format!(
            "thread `{thread}` is busy with run `{}`; its state cannot be updated until it ends",
            run["run_id"].as_str().unwrap()
        )
    );
}

/// A run's stream read from `second`, a server on the same database as `first`, which
/// carries the run out: joined while it runs (from its start, and after an event a client
/// saw), then replayed and joined once it ended.
async fn another_server_streams_the_run(first: &Router, second: &Router) {
    let thread = new_thread(first).await;
    let runs = format!("/threads/{thread}/runs");
    let slow = json!({"assistant_id": "desk", "input": ask("slow one"), "stream_mode": ["updates"], "stream_resumable": true});
    let (_, run) = json(first, "POST", &runs, Some(slow)).await;
    let run_id = run["run_id"].as_str().unwrap().to_owned();
    let stream = format!("{runs}/{run_id}/stream");
    let joined = |last| joined(second, &stream, last);
    let join = format!("{runs}/{run_id}/join");
    let (all, after_one, result) = tokio::join!(
        joined(None),
        joined(Some("1")),
        json(second, "GET", &join, None)
    );
    let frames = the_slow_runs_updates(&all);
    assert_eq!(frames[0].1["run_id"], json!(run_id));
    assert_eq!(sse(&after_one).0, [2, 3], "{after_one}");
    assert_eq!(result.1["log"], json!(["triage", "draft"]), "{}", result.1);
    // Ended: replayed whole, or after the last event a client saw.
    assert_eq!(joined(Some("-1")).await, all);
    assert_eq!(sse(&joined(Some("2")).await).0, [3]);
    assert_eq!(joined(Some("3")).await, "");
    // A deleted run's events go with it.
    let (status, _, _) = call(
        first,
        "DELETE",
        &format!("{runs}/{run_id}"),
        None,
        Some("k"),
    )
    .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, _, _) = call(second, "GET", &stream, None, Some("k")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_is_streamed_by_another_server_on_the_same_sqlite_database() {
    let dir = std::env::temp_dir().join(format!("agentstate-server-events-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("server.db");
    let _ = std::fs::remove_file(&path);
    let (one, two) = (
        SqliteStore::open(&path).unwrap(),
        SqliteStore::open(&path).unwrap(),
    );
    another_server_streams_the_run(&app(&one), &app(&two)).await;
    drop((one, two));
    let _ = std::fs::remove_dir_all(&dir);
}

/// The same API on PostgreSQL (feature `postgres`, `AGENTSTATE_POSTGRES_URL`): a run streamed to
/// its interrupt, answered, the records read back by a second server on the same schema.
#[cfg(feature = "postgres")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_on_postgresql() {
    use agentstate_store::PostgresStore;
    let what = "the API on PostgreSQL";
    let Some((url, options)) = support::database("agentstate_server", what) else {
        return;
    };
    let schema = options.schema.clone();
    let store = PostgresStore::connect_with(&url, options.clone())
        .await
        .unwrap();
    let first = app(&store);
    // An id with a NUL character cannot be a thread's (PostgreSQL cannot take it as text):
    // none is found, as on SQLite, not a server error.
    for path in [
        "/threads/a%00b",
        "/threads/a%00b/runs",
        "/threads/a%00b/state",
    ] {
        let (status, body) = json(&first, "GET", path, None).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{path}: {body}");
    }
    let thread = new_thread(&first).await;
    let runs = format!("/threads/{thread}/runs");
    let hi = json!({"assistant_id": "desk", "input": ask("hi"), "stream_mode": "updates"});
    let (status, _, body) = call(
        &first,
        "POST",
        &format!("{runs}/stream"),
        Some(hi),
        Some("k"),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let names: Vec<&str> = sse(&body).1.iter().map(|(e, _)| *e).collect();
    assert_eq!(
        names,
        ["metadata", "updates", "updates", "updates"],
        "{body}"
    );
    let resume = json!({"assistant_id": "desk", "command": {"resume": true}});
    let (_, values) = json(&first, "POST", &format!("{runs}/wait"), Some(resume)).await;
    assert_eq!(
        values["log"],
        json!(["triage", "draft", "approve"]),
        "{values}"
    );

    let again = PostgresStore::connect_with(&url, options).await.unwrap();
    let second = app(&again);
    assert_eq!(run_statuses(&second, &runs).await, ["success", "success"]);
    let (_, got) = json(&second, "GET", &format!("/threads/{thread}"), None).await;
    assert_eq!(
        (&got["status"], &got["values"]["approved"]),
        (&json!("idle"), &json!(true))
    );
    another_server_streams_the_run(&first, &second).await;

    support::drop_schema(&url, &schema).await;
}

#[tokio::test]
async fn on_disconnect_cancel_stops_the_run_when_its_client_goes_away_and_continue_does_not() {
    for (asked, expected) in [("cancel", "interrupted"), ("continue", "success")] {
        let (app, _thread, runs) = on_a_thread().await;
        let request = json!({
            "assistant_id": "desk",
            "input": ask("slow one"),
            "on_disconnect": asked,
        });
        // The client waits for the run (a slow draft), then goes away before it ended.
        let path = format!("{runs}/wait");
        let waited = json(&app, "POST", &path, Some(request));
        assert!(
            tokio::time::timeout(Duration::from_millis(400), waited)
                .await
                .is_err(),
            "the slow run ended before its client went away"
        );
        let mut statuses = Vec::new();
        for _ in 0..100 {
            statuses = run_statuses(&app, &runs).await;
            if statuses
                .first()
                .is_some_and(|s| s != "running" && s != "pending")
            {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert_eq!(statuses, [expected], "on_disconnect `{asked}`");
    }
}

/// A run from an earlier checkpoint keeps what came after it as a branch, as LangGraph's fork
/// keeps the abandoned branch: the history lists both (the branch's first checkpoint a child
/// of the checkpoint it forked from), a branch's checkpoint is read, and a run from it makes
/// that branch the head again, the head it replaces kept in its turn.
#[tokio::test]
async fn a_run_from_an_earlier_checkpoint_keeps_the_later_ones_as_a_branch() {
    let (app, thread, runs) = on_a_thread().await;
    let wait = format!("{runs}/wait");
    let history = |limit: usize| {
        let app = app.clone();
        let path = format!("/threads/{thread}/history?limit={limit}");
        async move { json(&app, "GET", &path, None).await.1 }
    };
    let hi = json!({"assistant_id": "desk", "input": ask("hi")});
    json(&app, "POST", &wait, Some(hi)).await;
    let resume = json!({"assistant_id": "desk", "command": {"resume": true}});
    let (_, done) = json(&app, "POST", &wait, Some(resume)).await;
    assert_eq!(done["log"], json!(["triage", "draft", "approve"]), "{done}");
    let before = history(50).await;
    let entries = before.as_array().unwrap();
    let after_triage = entries
        .iter()
        .find(|e| e["next"] == json!(["draft"]))
        .unwrap();
    let after_triage_id = after_triage["checkpoint_id"].as_str().unwrap().to_owned();
    let old_draft = entries
        .iter()
        .find(|e| e["next"] == json!(["approve"]))
        .unwrap()["values"]["messages"][1]["id"]
        .clone();

    // From the checkpoint after `triage`: `draft` runs again, and asks again.
    let again = json!({"assistant_id": "desk", "input": null, "checkpoint_id": after_triage_id});
    let (status, values) = json(&app, "POST", &wait, Some(again)).await;
    assert_eq!(status, StatusCode::OK, "{values}");
    assert_eq!(values["log"], json!(["triage", "draft"]), "{values}");
    let new_draft = values["messages"][1]["id"].clone();
    assert_ne!(new_draft, old_draft);

    let after = history(50).await;
    let entries = after.as_array().unwrap();
    // Nothing removed: every checkpoint is still listed, and the new ones beside them.
    assert!(entries.len() > before.as_array().unwrap().len(), "{after}");
    let children: Vec<&Value> = entries
        .iter()
        .filter(|e| e["parent_checkpoint_id"] == json!(after_triage_id))
        .collect();
    assert_eq!(children.len(), 2, "the head's and the branch's: {after}");
    let kept = children
        .iter()
        .find(|e| e["checkpoint_id"].as_str().unwrap().starts_with("b0-"))
        .expect("the old draft kept on branch 0");
    assert_eq!(kept["values"]["messages"][1]["id"], old_draft);
    let finished = entries
        .iter()
        .find(|e| e["values"]["log"] == json!(["triage", "draft", "approve"]))
        .expect("the old run's end kept");
    let finished_id = finished["checkpoint_id"].as_str().unwrap();
    assert!(finished_id.starts_with("b0-"), "{finished_id}");
    let (status, read) = json(
        &app,
        "GET",
        &format!("/threads/{thread}/state/{finished_id}"),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{read}");
    assert_eq!(read["values"]["log"], json!(["triage", "draft", "approve"]));

    // From the kept draft (its question): that branch is the head again.
    let kept_id = kept["checkpoint_id"].as_str().unwrap().to_owned();
    let back = json!({"assistant_id": "desk", "input": null, "checkpoint_id": kept_id});
    let (status, values) = json(&app, "POST", &wait, Some(back)).await;
    assert_eq!(status, StatusCode::OK, "{values}");
    assert_eq!(values["messages"][1]["id"], old_draft, "{values}");
    let (_, state) = json(&app, "GET", &format!("/threads/{thread}/state"), None).await;
    assert_eq!(state["values"]["messages"][1]["id"], old_draft);
    assert_eq!(state["next"], json!(["approve"]));
    // The head it replaced is a branch now: its draft is still listed.
    let last = history(100).await;
    let drafts: Vec<&Value> = last
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["values"]["messages"][1]["id"] == new_draft)
        .collect();
    assert!(!drafts.is_empty(), "{last}");
    assert!(drafts
        .iter()
        .all(|e| e["checkpoint_id"].as_str().unwrap().starts_with('b')));
}

/// A run cancelled right after it was created (whether or not its input was committed yet)
/// leaves its thread no longer busy once the cancel that waited for it returned.
#[tokio::test]
async fn a_run_cancelled_at_once_leaves_its_thread_not_busy() {
    for _ in 0..5 {
        let (app, thread, runs) = on_a_thread().await;
        let slow = json!({"assistant_id": "desk", "input": ask("slow one")});
        let (_, run) = json(&app, "POST", &runs, Some(slow)).await;
        let run_id = run["run_id"].as_str().unwrap();
        let cancel = format!("{runs}/{run_id}/cancel?wait=1");
        let (status, _) = json(&app, "POST", &cancel, None).await;
        assert_eq!(status, StatusCode::OK);
        let (_, got) = json(&app, "GET", &format!("/threads/{thread}"), None).await;
        assert_ne!(got["status"], "busy", "{got}");
        let (_, run) = json(&app, "GET", &format!("{runs}/{run_id}"), None).await;
        assert_eq!(run["status"], "interrupted", "{run}");
    }
}

/// Every operation the server documents, as `METHOD path`: the routes of the LangGraph API
/// and of AG-UI that it serves, and `/docs`; not `/openapi.json` (LangGraph's server leaves it
/// out of its own spec), nor the routes of crons and the store API, which only refuse.
const DOCUMENTED: [&str; 32] = [
    "GET /ok",
    "GET /info",
    "GET /docs",
    "POST /assistants/search",
    "GET /assistants/{assistant_id}",
    "GET /assistants/{assistant_id}/graph",
    "GET /assistants/{assistant_id}/schemas",
    "POST /threads",
    "POST /threads/search",
    "POST /threads/count",
    "GET /threads/{thread_id}",
    "PATCH /threads/{thread_id}",
    "DELETE /threads/{thread_id}",
    "POST /threads/{thread_id}/copy",
    "GET /threads/{thread_id}/state",
    "POST /threads/{thread_id}/state",
    "GET /threads/{thread_id}/state/{checkpoint_id}",
    "GET /threads/{thread_id}/history",
    "POST /threads/{thread_id}/history",
    "GET /threads/{thread_id}/runs",
    "POST /threads/{thread_id}/runs",
    "POST /threads/{thread_id}/runs/stream",
    "POST /threads/{thread_id}/runs/wait",
    "GET /threads/{thread_id}/runs/{run_id}",
    "DELETE /threads/{thread_id}/runs/{run_id}",
    "GET /threads/{thread_id}/runs/{run_id}/join",
    "GET /threads/{thread_id}/runs/{run_id}/stream",
    "POST /threads/{thread_id}/runs/{run_id}/cancel",
    "POST /runs",
    "POST /runs/stream",
    "POST /runs/wait",
    "POST /agui/{assistant}",
];

/// The spec's operations, as `METHOD path`, with each one's operation.
fn operations(spec: &Value) -> Vec<(String, Value)> {
    let mut found = Vec::new();
    for (path, item) in spec["paths"].as_object().unwrap() {
        for (method, operation) in item.as_object().unwrap() {
            found.push((
                format!("{} {path}", method.to_uppercase()),
                operation.clone(),
            ));
        }
    }
    found
}

#[tokio::test]
async fn the_spec_documents_every_route_the_server_serves_and_no_other() {
    let app = app(&SqliteStore::open_in_memory().unwrap());
    // Not behind the API key, as on LangGraph's server.
    let (status, headers, body) = call(&app, "GET", "/openapi.json", None, None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(headers["content-type"], "application/json");
    let spec: Value = serde_json::from_str(&body).unwrap();
    assert!(
        spec["openapi"].as_str().unwrap().starts_with("3."),
        "{}",
        spec["openapi"]
    );
    assert!(spec["info"]["title"].is_string() && spec["info"]["version"].is_string());
    let documented: Vec<String> = operations(&spec).into_iter().map(|(o, _)| o).collect();
    let mut expected = DOCUMENTED.to_vec();
    let mut sorted = documented.clone();
    sorted.sort();
    expected.sort();
    assert_eq!(sorted, expected);
    let tags: Vec<&str> = spec["tags"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    for (what, operation) in operations(&spec) {
        // Each with a tag of the spec's, a summary, and its path's parameters.
        let tag = operation["tags"][0].as_str().unwrap_or_default();
        assert!(tags.contains(&tag), "{what}: tag {tag:?}");
        assert!(operation["summary"].is_string(), "{what}: no summary");
        let named: Vec<&str> = operation["parameters"]
            .as_array()
            .map(|p| {
                p.iter()
                    .filter(|p| p["in"] == "path")
                    .map(|p| p["name"].as_str().unwrap())
                    .collect()
            })
            .unwrap_or_default();
        let path = what.split_once(' ').unwrap().1;
        let holes: Vec<&str> = path
            .split('/')
            .filter_map(|s| s.strip_prefix('{')?.strip_suffix('}'))
            .collect();
        assert_eq!(named, holes, "{what}: its path parameters");
        // Refusals in the shape of `ApiError`'s body.
        for (status, response) in operation["responses"].as_object().unwrap() {
            if status.starts_with('4') {
                let schema = &response["content"]["application/json"]["schema"]["$ref"];
                assert_eq!(
                    schema, "#/components/schemas/ErrorResponse",
                    "{what}: {status}"
                );
            }
        }
        // And served: with a key and made-up ids, its handler answers (no 405, and no route
        // the router lacks, which its fallback would answer with a bare "Not Found").
        let (method, path) = what.split_once(' ').unwrap();
        let path = path
            .replace("{assistant_id}", "desk")
            .replace("{assistant}", "desk");
        let path = path.replace(['{', '}'], "");
        let body = (method != "GET" && method != "DELETE").then(|| json!({}));
        let (status, _, answer) = call(&app, method, &path, body, Some("k")).await;
        assert_ne!(status, StatusCode::METHOD_NOT_ALLOWED, "{what}");
        let bare = status == StatusCode::NOT_FOUND && answer == r#"{"detail":"Not Found"}"#;
        // Missing runs are "Not Found" as on LangGraph's server; their routes exist.
        assert!(
            !bare || path.contains("run_id"),
            "{what} is not served: {answer}"
        );
    }
    // The answers built from the types that give their schemas: their JSON as it was (its
    // keys by name).
    let (_, _, body) = call(&app, "GET", "/info", None, Some("k")).await;
    let version = env!("CARGO_PKG_VERSION");
    assert_eq!(
        body,
        format!(
            r#"{{"flags":{{"assistants":true,"crons":false,"langsmith":false,"langsmith_tracing_replicas":false}},"langgraph_js_version":null,"version":"{version}"}}"#
        )
    );
    let error = &spec["components"]["schemas"]["ErrorResponse"];
    assert_eq!(error["required"], json!(["detail"]));
    // The request types' schemas, by the reference's names, their fields as serde reads them.
    let schemas = &spec["components"]["schemas"];
    for (schema, field) in [
        ("RunCreate", "assistant_id"),
        ("Command", "resume"),
        ("ThreadCreate", "if_exists"),
        ("ThreadSearchRequest", "sort_by"),
        ("ThreadStateUpdate", "as_node"),
        ("ThreadStateSearch", "limit"),
        ("RunAgentInput", "threadId"),
    ] {
        assert!(
            schemas[schema]["properties"][field].is_object(),
            "{schema}.{field}"
        );
    }
    // The served graphs' ids, as `graph_id`'s enum.
    for schema in ["Assistant", "GraphSchema", "AssistantSearchRequest"] {
        assert_eq!(
            schemas[schema]["properties"]["graph_id"]["enum"],
            json!(["desk"]),
            "{schema}"
        );
    }
    // With a key: its scheme, required but where it is not asked for.
    assert_eq!(
        spec["components"]["securitySchemes"]["x-api-key"],
        json!({"type": "apiKey", "in": "header", "name": "x-api-key"})
    );
    assert_eq!(spec["security"], json!([{"x-api-key": []}]));
    assert_eq!(spec["paths"]["/ok"]["get"]["security"], json!([]));
    assert_eq!(spec["paths"]["/docs"]["get"]["security"], json!([]));
    assert!(spec["paths"]["/threads"]["post"].get("security").is_none());

    // Without a key, no scheme.
    let store = SqliteStore::open_in_memory().unwrap();
    let open = Server::builder(&store)
        .assistant("desk", desk::graph().unwrap().durable(&store))
        .build()
        .router();
    let (_, _, body) = call(&open, "GET", "/openapi.json", None, None).await;
    let spec: Value = serde_json::from_str(&body).unwrap();
    assert!(spec.get("security").is_none() && spec["components"].get("securitySchemes").is_none());
}

#[tokio::test]
async fn docs_is_scalars_page_with_the_spec_inlined_and_escaped() {
    let app = app(&SqliteStore::open_in_memory().unwrap());
    let (status, headers, page) = call(&app, "GET", "/docs", None, None).await;
    assert_eq!(status, StatusCode::OK);
    assert!(headers["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/html"));
    assert!(page.starts_with("<!doctype html>"));
    assert!(page
        .contains(r#"<script src="https://cdn.jsdelivr.net/npm/@scalar/api-reference"></script>"#));
    let configuration = page
        .split_once("var configuration = ")
        .and_then(|(_, rest)| rest.split_once('\n'))
        .unwrap()
        .0;
    // No `<` left to end the script early.
    assert!(!configuration.contains('<'));
    let configuration: Value = serde_json::from_str(configuration).unwrap();
    let (_, _, spec) = call(&app, "GET", "/openapi.json", None, None).await;
    assert_eq!(configuration["content"], spec.as_str());
    assert!(
        spec.contains('<'),
        "the spec has a `<` to escape (a type in a description)"
    );
}

/// Bad input is refused or answered as nothing found, never misread: an API key no header can
/// carry turns nothing off, a body that is no JSON object creates nothing, an id with `/`, `?`
/// or a space stays one path segment, a `Last-Event-ID` past every number replays nothing, a
/// checkpoint a thread does not have is not found.
#[tokio::test]
async fn bad_input_is_refused_not_misread() {
    let store = SqliteStore::open_in_memory().unwrap();
    let keyed = |key: &str| {
        Server::builder(&store)
            .assistant("desk", desk::graph().unwrap().durable(&store))
            .api_key(key)
            .build()
    };
    // A key file's trailing newline: every guarded request refused, saying why; not served.
    let unkeyed = keyed("k\n").router();
    for key in [None, Some("k")] {
        let (status, _, body) =
            call(&unkeyed, "POST", "/threads/search", Some(json!({})), key).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
        assert!(body.contains("control character"), "{body}");
    }
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let refused = keyed("k\n").serve(listener).await.unwrap_err();
    assert_eq!(
        refused.kind(),
        std::io::ErrorKind::InvalidInput,
        "{refused}"
    );

    let app = app(&store);
    for body in ["[]", "null", "3", "\"t\""] {
        let (status, _, text) = call_raw(&app, "POST", "/threads", body).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}: {text}");
        assert!(text.contains("is not a JSON object"), "{text}");
    }
    let (_, found) = json(&app, "POST", "/threads/search", Some(json!({}))).await;
    assert_eq!(found, json!([]), "nothing was created");

    let id = "a/b c?d";
    let (status, thread) = json(&app, "POST", "/threads", Some(json!({"thread_id": id}))).await;
    assert_eq!(status, StatusCode::OK, "{thread}");
    let path = "/threads/a%2Fb%20c%3Fd/runs/wait";
    let run = json!({"assistant_id": "desk", "input": ask("hi")});
    let (status, headers, body) = call(&app, "POST", path, Some(run), Some("k")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let location = headers[header::CONTENT_LOCATION].to_str().unwrap();
    let run_id = location.rsplit('/').next().unwrap();
    assert_eq!(location, format!("/threads/a%2Fb%20c%3Fd/runs/{run_id}"));
    let (status, run) = json(&app, "GET", location, None).await;
    assert_eq!(
        (status, run["thread_id"].as_str()),
        (StatusCode::OK, Some(id))
    );

    let stream = format!("{location}/stream");
    for seen in ["18446744073709551615", "9223372036854775807"] {
        let request = Request::builder()
            .uri(&stream)
            .header("x-api-key", "k")
            .header("last-event-id", seen)
            .body(Body::empty())
            .unwrap();
        let response = app.clone().oneshot(request).await.unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        let bytes = response.into_body().collect().await.unwrap().to_bytes();
        let text = String::from_utf8_lossy(&bytes);
        assert!(!text.contains("event:"), "after {seen}: {text}");
    }

    let state = "/threads/a%2Fb%20c%3Fd/state/999999";
    let (status, body) = json(&app, "GET", state, None).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
}

/// A request with body `body` as it is (no JSON made of it), with the key.
async fn call_raw(
    app: &Router,
    method: &str,
    path: &str,
    body: &str,
) -> (StatusCode, HeaderMap, String) {
    let request = Request::builder()
        .method(method)
        .uri(path)
        .header("x-api-key", "k")
        .header("content-type", "application/json")
        .body(Body::from(body.to_owned()))
        .unwrap();
    let response = app.clone().oneshot(request).await.unwrap();
    let (parts, body) = response.into_parts();
    let bytes = body.collect().await.unwrap().to_bytes();
    (
        parts.status,
        parts.headers,
        String::from_utf8_lossy(&bytes).into_owned(),
    )
}
