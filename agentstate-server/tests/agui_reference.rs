//! The AG-UI differential harness: the concierge graph written twice, in Python served by the
//! reference (ag-ui-langgraph 0.0.47's FastAPI endpoint, `tests/reference/agui_graphs.py`, in
//! the venv `target/agui-ref-venv` that `.ci/run` makes from
//! `tests/reference/agui-requirements.txt`) and in Rust served by agentstate-server's
//! `/agui/{assistant}` (below), both on 127.0.0.1; one driver, `tests/agui-js/reference.mjs`,
//! makes the same runs against both with the official `@ag-ui/client` `HttpAgent` and compares
//! the events (types, order, payloads; normalized only where values must differ: ids,
//! timestamps, LangGraph's own RAW events).
//!
//! Every run of every scenario (compared one by one; a scenario of several runs names them
//! `SCENARIO.RUN`) must give what the reference gives, except those in the AG-UI table of
//! `docs/divergences.md`: the test fails on a difference not listed there, and on a listed
//! scenario that no longer differs. The scenarios: a model's streamed answer and a second turn,
//! a node's message, an interrupt and its resume with the asking run's `runId`, a new client on
//! an interrupted thread, a frontend tool and its answer, a node's custom event, a backend tool,
//! a node failing before and while it streams, the client's state, an edited message (on a
//! thread waiting for an answer too), a new client on a thread with a conversation; and, apart, the state sent after each node (`node_exit_state`).
//!
//! Without the venv or `node_modules` it prints one line and passes, except under CI (`CI`
//! set), where that is a failure.

use agentstate::message::{Message, Role, ToolCall};
use agentstate::AgentState;
use agentstate_graph::{BoxError, Context, Emitted, Graph, END};
use agentstate_server::Server;
use agentstate_store::SqliteStore;
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, BufReader};

/// The concierge's state, as the Python one's (`Concierge` in `agui_graphs.py`): a key the
/// Python state has not written yet is left out here too.
#[derive(AgentState, Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
struct Concierge {
    /// LangGraph's `add_messages`.
    #[reducer(upsert_messages)]
    messages: Vec<Message>,
    /// The client's tools.
    tools: Vec<Value>,
    /// The client's tools and context, as ag-ui-langgraph gives them.
    #[serde(rename = "ag-ui", default, skip_serializing_if = "Option::is_none")]
    ag_ui: Option<Value>,
    /// CopilotKit's state: the client's tools as `actions`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    copilotkit: Option<Value>,
    /// A note the client's state gives.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    note: Option<String>,
    /// The person's answer to the refund question.
    #[serde(default, skip_serializing_if = "Option::is_none")]
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

/// `text` in the pieces the Python concierge's model streams it in (GenericFakeChatModel's:
/// split on whitespace, each whitespace a piece).
fn pieces(text: &str) -> Vec<String> {
    let mut pieces = Vec::new();
    let mut word = String::new();
    for c in text.chars() {
        if c.is_whitespace() {
            pieces.extend((!word.is_empty()).then(|| std::mem::take(&mut word)));
            pieces.push(c.to_string());
        } else {
            word.push(c);
        }
    }
    pieces.extend((!word.is_empty()).then_some(word));
    pieces
}

/// Streams `text` as message `id`'s pieces; gives the message.
fn stream(cx: &Context, id: &str, text: &str) -> Message {
    for delta in pieces(text) {
        cx.emit(Emitted::TextDelta {
            message_id: id.to_owned(),
            delta,
        });
    }
    Message::text_message(text, Role::Assistant).with_id(id)
}

/// A model's call of tool `name` with `args`, its arguments streamed in `pieces`, as message
/// `id` (the call's id `call-<messages so far>`).
fn call<const N: usize>(
    cx: &Context,
    id: &str,
    state: &Concierge,
    name: &str,
    pieces: [&str; N],
    args: Value,
) -> Message {
    let call_id = format!("call-{}", state.messages.len());
    for delta in pieces {
        cx.emit(Emitted::ToolCallDelta {
            message_id: id.to_owned(),
            tool_call_id: call_id.clone(),
            name: name.to_owned(),
            delta: delta.to_owned(),
        });
    }
    Message::text_message("", Role::Assistant)
        .with_id(id)
        .with_tool_calls(vec![ToolCall::new(call_id, name, args)])
}

/// The concierge of `agui_graphs.py`, node for node.
fn graph() -> Result<Graph<Concierge, &'static str>, agentstate_graph::CompileError> {
    Graph::builder()
        .node("model", |state: Arc<Concierge>, cx: Context| async move {
            let id = uuid::Uuid::new_v4().to_string();
            let q = asked(&state);
            if q.as_deref() == Some("progress") {
                cx.emit(Emitted::Custom {
                    name: "progress".to_owned(),
                    value: json!({"done": 1}),
                });
            }
            let text = match q.as_deref() {
                Some("refund" | "write") => return Ok(ConciergeUpdate::default()),
                Some("fail") => return Err(BoxError::from("the concierge cannot answer `fail`")),
                Some("break") => {
                    stream(&cx, &id, "I ");
                    return Err(BoxError::from("the concierge broke down mid-answer"));
                }
                Some("weather") => {
                    let pieces = [r#"{"city": "#, r#""Paris"}"#];
                    let call = call(
                        &cx,
                        &id,
                        &state,
                        "weather",
                        pieces,
                        json!({"city": "Paris"}),
                    );
                    return Ok(ConciergeUpdate::default().messages(vec![call.into()]));
                }
                Some("order") if state.tools.iter().any(|t| t["name"] == "confirm_order") => {
                    let pieces = [r#"{"item": "#, r#""book"}"#];
                    let args = json!({"item": "book"});
                    let call = call(&cx, &id, &state, "confirm_order", pieces, args);
                    return Ok(ConciergeUpdate::default().messages(vec![call.into()]));
                }
                Some("actions") => {
                    let values = |field: &Option<Value>, list: &str, key: &str| -> Vec<String> {
                        let list = field.as_ref().and_then(|f| f[list].as_array().cloned());
                        let items = list.unwrap_or_default();
                        items
                            .iter()
                            .filter_map(|i| i[key].as_str().map(str::to_owned))
                            .collect()
                    };
                    let names = values(&state.copilotkit, "actions", "name").join(" ");
                    let context = values(&state.ag_ui, "context", "value").join(" ");
                    format!("Actions: {names}; context: {context}")
                }
                Some("note") => format!("Your note: {}", state.note.as_deref().unwrap_or("none")),
                Some(q) => format!("You said: {q}"),
                None => match state.messages.last() {
                    Some(m) if m.role == Role::Tool => format!("The user chose: {}", m.text()),
                    _ => "Nothing to answer.".to_owned(),
                },
            };
            let reply = stream(&cx, &id, &text);
            Ok::<_, BoxError>(ConciergeUpdate::default().messages(vec![reply.into()]))
        })
        // LangGraph's ToolNode running the backend tool `weather`.
        .node("tools", |state: Arc<Concierge>, _: Context| async move {
            let asked = state.messages.last().map(|m| m.tool_calls().to_vec());
            let results = asked.unwrap_or_default().into_iter().map(|call| {
                let args = call.arguments::<Value>().unwrap_or_default();
                let city = args["city"].as_str().unwrap_or("nowhere").to_owned();
                let mut result = Message::tool_result(call.id, json!(format!("sunny in {city}")));
                // The tool's name, as LangGraph's ToolNode names its results.
                result
                    .metadata
                    .insert("function_name", json!(call.function.name));
                result.into()
            });
            Ok::<_, BoxError>(ConciergeUpdate::default().messages(results.collect::<Vec<_>>()))
        })
        .node("writer", |_: Arc<Concierge>, _: Context| async move {
            let written = Message::text_message("Written without streaming.", Role::Assistant)
                .with_id("written-1");
            Ok::<_, BoxError>(ConciergeUpdate::default().messages(vec![written.into()]))
        })
        .node("approve", |_: Arc<Concierge>, cx: Context| async move {
            let yes = cx.interrupt(json!("Refund 30 EUR?"))?.as_bool() == Some(true);
            let text = if yes { "Refunded." } else { "Not refunded." };
            Ok::<_, BoxError>(
                ConciergeUpdate::default()
                    .approved(Some(yes))
                    .messages(vec![Message::text_message(text, Role::Assistant).into()]),
            )
        })
        .entry("model")
        .route("model", |state: &Concierge| {
            let last = state.messages.last();
            if last.is_some_and(|m| m.tool_calls().iter().any(|c| c.function.name == "weather")) {
                return "tools".into();
            }
            match asked(state).as_deref() {
                Some("refund") => "approve".into(),
                Some("write") => "writer".into(),
                _ => END.into(),
            }
        })
        .edge("tools", "model")
        .edge("approve", END)
        .edge("writer", END)
        .build()
}

fn manifest() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
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
    println!("skipped: the AG-UI differential harness needs {what} ({how})");
    false
}

/// The scenarios the AG-UI table of `docs/divergences.md` lists (its rows' first cells).
fn listed() -> BTreeSet<String> {
    let text = std::fs::read_to_string(manifest().join("docs/divergences.md")).unwrap();
    let table = text
        .split_once("\n## AG-UI")
        .expect("docs/divergences.md has an AG-UI section")
        .1;
    let table = table.split("\n## ").next().unwrap_or_default();
    table
        .lines()
        .filter_map(|line| line.strip_prefix("| `"))
        .filter_map(|cell| cell.split_once('`'))
        .map(|(name, _)| name.to_owned())
        .collect()
}

/// Where the reference's log goes (its failed runs' tracebacks): a file of this process's,
/// removed when the test passes.
fn log() -> PathBuf {
    std::env::temp_dir().join(format!(
        "agentstate-agui-reference-{}.log",
        std::process::id()
    ))
}

/// The reference, on a free port of 127.0.0.1: its URL and its process.
async fn reference(python: &Path) -> (String, tokio::process::Child) {
    let mut child = tokio::process::Command::new(python)
        .arg("agui_graphs.py")
        .current_dir(manifest().join("tests/reference"))
        .stdout(std::process::Stdio::piped())
        // Its log (a failed run's traceback) goes to a file, not into the test's output.
        .stderr(std::fs::File::create(log()).unwrap())
        .kill_on_drop(true)
        .spawn()
        .expect("the reference's Python starts");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let ready = tokio::time::timeout(Duration::from_secs(60), lines.next_line()).await;
    let port: u16 = match &ready {
        Ok(Ok(Some(line))) => line.strip_prefix("ready ").and_then(|p| p.parse().ok()),
        _ => None,
    }
    .unwrap_or_else(|| panic!("the reference did not start: {ready:?}"));
    // Ready once it accepts connections.
    for _ in 0..200 {
        if tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_ok()
        {
            return (format!("http://127.0.0.1:{port}"), child);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the reference does not listen on 127.0.0.1:{port}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agui_answers_as_ag_ui_langgraph_does_but_where_listed() {
    let python: PathBuf = manifest().join("../target/agui-ref-venv/bin/python");
    let js = manifest().join("tests/agui-js");
    if !installed(
        &python,
        "the reference (ag-ui-langgraph)",
        "`.ci/run` makes the venv target/agui-ref-venv",
    ) || !installed(
        &js.join("node_modules/@ag-ui/client"),
        "@ag-ui/client",
        "`npm ci` in tests/agui-js",
    ) {
        return;
    }
    let (reference_url, mut reference) = reference(&python).await;

    let store = SqliteStore::open_in_memory().unwrap();
    let server = Server::builder(&store)
        .assistant("concierge", graph().unwrap().durable(&store))
        .build();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let ours = format!("http://{}", listener.local_addr().unwrap());
    let serving = tokio::spawn(server.serve(listener));

    let driver = tokio::process::Command::new("node")
        .arg("reference.mjs")
        .args([&reference_url, &ours])
        .current_dir(&js)
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(Duration::from_secs(180), driver).await;
    serving.abort();
    reference.kill().await.ok();
    let output = output
        .expect("reference.mjs finishes within three minutes")
        .expect("node runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    // To see both sides of every scenario: AGUI_REFERENCE_VERBOSE=1 AGUI_REFERENCE_OUT=<file>.
    if let Some(path) = std::env::var_os("AGUI_REFERENCE_OUT") {
        std::fs::write(path, stdout.as_bytes()).unwrap();
    }
    assert!(
        output.status.success(),
        "reference.mjs failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );

    let mut ran = BTreeSet::new();
    let mut differing = BTreeSet::new();
    let mut details = Vec::new();
    for line in stdout.lines() {
        if let Some(name) = line.strip_prefix("same ") {
            ran.insert(name.to_owned());
        } else if let Some(rest) = line.strip_prefix("differs ") {
            let (name, detail) = rest.split_once(' ').unwrap_or((rest, ""));
            ran.insert(name.to_owned());
            differing.insert(name.to_owned());
            details.push(format!("{name}: {detail}"));
        }
    }
    assert_eq!(ran.len(), 18, "every scenario ran:\n{stdout}");
    let listed = listed();
    let unlisted: Vec<&String> = differing.difference(&listed).collect();
    let stale: Vec<&String> = listed.difference(&differing).collect();
    assert!(
        unlisted.is_empty() && stale.is_empty(),
        "AG-UI scenarios that differ from the reference but are not listed in docs/divergences.md: {unlisted:?}; \
         listed there but no longer differing (remove their rows): {stale:?}\n{}\n(the reference's log: {})",
        details.join("\n"),
        log().display()
    );
    std::fs::remove_file(log()).ok();
}
