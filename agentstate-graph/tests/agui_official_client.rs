//! The graph adapter's AG-UI events, folded by the official AG-UI client (`@ag-ui/client`
//! 1.0.0), give back the run's final messages and state.
//!
//! Each case runs a graph with fixed run and message ids and fixed message timestamps, so its
//! AG-UI events are deterministic. They are committed in `tests/data/agui/NAME.json`; the test
//! checks the run still produces exactly those events (the fixture cannot go stale), then checks
//! that `NAME.expected.json`, the official client's fold of them, equals the run's final
//! messages (as AG-UI messages, through `agentstate::agui::messages_to_agui`) and final state.
//!
//! Normalisations, the same as `tests/agui_fixtures.rs`: numbers are compared as JavaScript
//! writes them (its numbers are all doubles: the run's `1700000000.0` reads `1700000000`), and
//! `ignored` (the events the client refused) must be empty.
//!
//! To regenerate after a deliberate change of the adapter (CI needs no Node):
//!
//! ```text
//! AGUI_WRITE_FIXTURES=1 cargo test -p agentstate-graph --features ag-ui,store --test agui_official_client
//! cd examples/data/official-client && npm install
//! for name in react run_error partial_stream state durable_interrupt; do
//!   f=../../../agentstate-graph/tests/data/agui/$name
//!   node fold.js $f.json | node -e 'const fs = require("fs");
//!     fs.writeFileSync(1, JSON.stringify(JSON.parse(fs.readFileSync(0, "utf8")), null, 2) + "\n")' > $f.expected.json
//! done
//! ```
#![cfg(feature = "ag-ui")]

use agentstate::agui::messages_to_agui;
use agentstate::message::{Message, Role, ToolCall};
use agentstate::state::{AgentState as Chat, AgentStateUpdate};
use agentstate::AgentState;
use agentstate::State;
use agentstate::{NodeOutput, ToolResult};
use agentstate_graph::agui::{AguiAdapter, MessagesOf};
use agentstate_graph::{Context, Emitted, Event, Graph, GraphState, RunConfig, END};
use futures_util::StreamExt;
use serde::Serialize;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::convert::Infallible;
use std::sync::Arc;

/// Every message's timestamp: fixed, so the state's JSON is deterministic.
const T: f64 = 1_700_000_000.0;

fn block_on<F: std::future::Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("a runtime")
        .block_on(future)
}

fn msg(text: &str, role: Role, id: &str) -> Message {
    Message::text_message(text, role)
        .with_id(id)
        .with_timestamp(T)
}

/// Runs `graph` from `start` with run id `run-NAME`: the AG-UI events (as JSON), the final
/// messages (as AG-UI messages, as JSON) and the final state (as JSON), failed or not.
fn run<S: GraphState + Serialize>(
    name: &str,
    graph: &Graph<S>,
    start: S,
    messages: MessagesOf<S>,
) -> (Value, Value, Value) {
    let mut adapter = AguiAdapter::new("thread-1", &start, messages).unwrap();
    let mut events = Vec::new();
    let mut last = None;
    block_on(async {
        let config = RunConfig {
            run_id: Some(format!("run-{name}")),
            ..Default::default()
        };
        let mut run = graph.stream_with(start, config);
        while let Some(event) = run.next().await {
            events.extend(adapter.events(&event));
            match event {
                Event::RunFinished { state } => last = Some(std::sync::Arc::unwrap_or_clone(state)),
                Event::RunFailed { error } => last = Some(error.state().clone()),
                _ => {}
            }
        }
    });
    let last = last.expect("the run ended");
    (
        serde_json::to_value(&events).unwrap(),
        serde_json::to_value(messages_to_agui(messages(&last))).unwrap(),
        serde_json::to_value(&last).unwrap(),
    )
}

fn data(file: &str) -> String {
    format!("{}/tests/data/agui/{file}", env!("CARGO_MANIFEST_DIR"))
}

fn read(file: &str) -> Value {
    let path = data(file);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {path}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("parsing {path}: {e}"))
}

/// `value` with every integral float written as an integer, as JavaScript writes it.
fn js_numbers(value: &Value) -> Value {
    match value {
        Value::Number(n) => match n.as_f64() {
            Some(f) if n.is_f64() && f.fract() == 0.0 && f.abs() < 9.0e15 => json!(f as i64),
            _ => value.clone(),
        },
        Value::Array(items) => Value::Array(items.iter().map(js_numbers).collect()),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), js_numbers(v)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// The events equal the committed ones (or are written, with `AGUI_WRITE_FIXTURES` set), and
/// the official client's fold of them equals the run's final messages and state.
fn check(name: &str, outcome: (Value, Value, Value)) {
    check_with(name, outcome, &[]);
}

/// [`check`], where the client has `extra` messages after the run's (streamed by a node that
/// then failed).
fn check_with(name: &str, (events, messages, state): (Value, Value, Value), extra: &[Value]) {
    let file = format!("{name}.json");
    if std::env::var_os("AGUI_WRITE_FIXTURES").is_some() {
        let text = serde_json::to_string_pretty(&events).unwrap() + "\n";
        std::fs::write(data(&file), text).unwrap();
    }
    assert_eq!(
        events,
        read(&file),
        "{name}: the adapter's events differ from the committed {file}; regenerate (module docs)"
    );
    let expected = read(&format!("{name}.expected.json"));
    assert_eq!(
        expected["ignored"],
        json!([]),
        "{name}: the official client refused events"
    );
    let mut messages = js_numbers(&messages);
    messages.as_array_mut().unwrap().extend_from_slice(extra);
    assert_eq!(
        messages, expected["messages"],
        "{name}: the official client's messages differ from the run's"
    );
    assert_eq!(
        js_numbers(&state),
        expected["state"],
        "{name}: the official client's state differs from the run's"
    );
}

fn context_of(state: &Chat) -> &[Message] {
    state.context.as_slice()
}

fn chat_with(messages: Vec<Message>) -> Chat {
    let mut start = Chat::default();
    start
        .merge(AgentStateUpdate::default().context(messages))
        .unwrap();
    start
}

/// A model that first streams its text and one of its two tool calls, then answers.
async fn model(state: Arc<Chat>, cx: Context) -> Result<AgentStateUpdate, Infallible> {
    let turn = state
        .context
        .iter()
        .filter(|m| m.role == Role::Assistant)
        .count();
    let reply = if turn == 0 {
        cx.text_delta("m-ask", "Let me ");
        cx.text_delta("m-ask", "check.");
        for delta in [r#"{"city""#, r#": "Paris"}"#] {
            cx.emit(Emitted::ToolCallDelta {
                message_id: "m-ask".into(),
                tool_call_id: "call-1".into(),
                name: "weather".into(),
                delta: delta.into(),
            });
        }
        msg("Let me check.", Role::Assistant, "m-ask").with_tool_calls(vec![
            ToolCall::new("call-1", "weather", json!({"city": "Paris"})),
            ToolCall::new("call-2", "time", json!({"city": "Paris", "utc": 1.0})),
        ])
    } else {
        cx.custom("answering", json!({"turn": turn}));
        msg("Sunny, 3 pm.", Role::Assistant, "m-answer")
    };
    Ok(AgentStateUpdate::default().context(vec![reply]))
}

/// Runs every tool call of the last message (in parallel, as one node's outputs).
async fn tools(state: Arc<Chat>, _: Context) -> Result<NodeOutput<AgentStateUpdate>, Infallible> {
    let last = state.context.iter().last().expect("the model's message");
    let results: Vec<NodeOutput<AgentStateUpdate>> = last
        .tool_calls()
        .iter()
        .map(|call| {
            let output = if call.function.name == "weather" {
                "sunny"
            } else {
                "15:00"
            };
            let result = Message::tool_result(call.id.clone(), output)
                .with_id(format!("r-{}", call.id))
                .with_timestamp(T);
            ToolResult::new(result, AgentStateUpdate::default()).into()
        })
        .collect();
    Ok(results.into())
}

fn react() -> Graph<Chat> {
    Graph::builder()
        .node("model", model)
        .node("tools", tools)
        .entry("model")
        .route("model", |s: &Chat| {
            let last = s.context.iter().last().expect("a message");
            if last.tool_calls().is_empty() {
                END.into()
            } else {
                "tools".into()
            }
        })
        .edge("tools", "model")
        .build()
        .unwrap()
}

#[test]
fn react_run_with_parallel_tool_calls_and_streamed_text() {
    let start = chat_with(vec![msg("Weather and time in Paris?", Role::User, "u-1")]);
    check("react", run("react", &react(), start, context_of));
}

#[test]
fn failing_node_ends_with_run_error() {
    let graph =
        Graph::builder()
            .node("model", |_: Arc<Chat>, _: Context| async {
                let ask = msg("Searching.", Role::Assistant, "m-ask").with_tool_calls(vec![
                    ToolCall::new("call-1", "search", json!({"q": "rust"})),
                ]);
                Ok::<_, &str>(AgentStateUpdate::default().context(vec![ask]))
            })
            .node("tools", |_: Arc<Chat>, _: Context| async {
                Err::<AgentStateUpdate, _>("search backend down")
            })
            .entry("model")
            .edge("model", "tools")
            .edge("tools", END)
            .build()
            .unwrap();
    let start = chat_with(vec![msg("Find rust.", Role::User, "u-1")]);
    let outcome = run("run_error", &graph, start, context_of);
    let last = &outcome.0.as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["type"], "RUN_ERROR");
    check("run_error", outcome);
}

/// A state with its own fields beside the messages, for `STATE_DELTA`s of every kind.
#[derive(AgentState, Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
struct Research {
    #[reducer(add_messages)]
    messages: Vec<Message>,
    status: String,
    #[reducer(append)]
    notes: Vec<String>,
    #[reducer(merge)]
    scores: BTreeMap<String, f64>,
    summary: Option<String>,
}

fn messages_of(state: &Research) -> &[Message] {
    &state.messages
}

#[test]
fn parallel_branches_with_state_deltas_and_a_new_user_message() {
    let graph = Graph::builder()
        .node("plan", |_: Arc<Research>, _: Context| async {
            Ok::<_, Infallible>(ResearchUpdate::default().status("researching".to_owned()))
        })
        .node("web", |_: Arc<Research>, cx: Context| async move {
            cx.text_delta("m-web", "Found 3 ");
            cx.text_delta("m-web", "pages.");
            Ok::<_, Infallible>(
                ResearchUpdate::default()
                    .notes(vec!["web: 3 pages".to_owned()])
                    .scores(BTreeMap::from([("web".to_owned(), 2.0)]))
                    .messages(vec![msg("Found 3 pages.", Role::Assistant, "m-web")]),
            )
        })
        .node("papers", |_: Arc<Research>, _: Context| async {
            Ok::<_, Infallible>(
                ResearchUpdate::default()
                    .notes(vec!["papers: 1".to_owned()])
                    .scores(BTreeMap::from([("papers".to_owned(), 0.5)])),
            )
        })
        .node("review", |_: Arc<Research>, _: Context| async {
            Ok::<_, Infallible>(
                ResearchUpdate::default()
                    .status("done".to_owned())
                    .summary(Some("Web wins.".to_owned()))
                    .messages(vec![msg("Summarize, please.", Role::User, "u-2")]),
            )
        })
        .entry("plan")
        .edges("plan", ["web", "papers"])
        .edge("web", "review")
        .edge("papers", "review")
        .edge("review", END)
        .build()
        .unwrap();
    let start = Research {
        messages: vec![msg("Research rust graphs.", Role::User, "u-1")],
        ..Default::default()
    };
    check("state", run("state", &graph, start, messages_of));
}

/// A node that streams part of a message and a tool call, then fails: the client keeps what it
/// was streamed (AG-UI has no event to withdraw it), the run's state (before the failed step)
/// does not have it. That is the one difference from the run's messages, checked exactly.
#[test]
fn a_failed_nodes_partial_stream_stays_in_the_client() {
    let graph = Graph::builder()
        .node("model", |_: Arc<Chat>, cx: Context| async move {
            cx.text_delta("m-part", "I'll start ");
            cx.emit(Emitted::ToolCallDelta {
                message_id: "m-part".into(),
                tool_call_id: "call-9".into(),
                name: "search".into(),
                delta: r#"{"q":"#.into(),
            });
            Err::<AgentStateUpdate, _>("stream cut")
        })
        .entry("model")
        .edge("model", END)
        .build()
        .unwrap();
    let start = chat_with(vec![msg("Go.", Role::User, "u-1")]);
    let partial = json!({
        "id": "m-part",
        "role": "assistant",
        "content": "I'll start ",
        "toolCalls": [{
            "id": "call-9",
            "type": "function",
            "function": {"name": "search", "arguments": r#"{"q":"#}
        }]
    });
    check_with(
        "partial_stream",
        run("partial_stream", &graph, start, context_of),
        &[partial],
    );
}

/// A durable run that suspends on a question (its last event `RUN_FINISHED` with the interrupt
/// outcome), then the run resumed with the answer, as one client receives both: the official
/// client accepts the outcome and the second run, and ends with the thread's messages and
/// state. The durable run's id (random) reads `run-durable` in the fixture.
#[cfg(feature = "store")]
#[test]
fn durable_run_suspended_on_a_question_then_resumed() {
    use agentstate_graph::durable::Answers;
    use agentstate_graph::BoxError;
    use agentstate_store::SqliteStore;

    let graph = Graph::builder()
        .node("ask", |_: Arc<Chat>, cx: Context| async move {
            cx.text_delta("m-ask", "May I refund ");
            cx.text_delta("m-ask", "30 EUR?");
            let ask = msg("May I refund 30 EUR?", Role::Assistant, "m-ask");
            Ok::<_, Infallible>(AgentStateUpdate::default().context(vec![ask]))
        })
        .node("approve", |_: Arc<Chat>, cx: Context| async move {
            let yes = cx.interrupt(json!({"refund": 30}))?.as_bool() == Some(true);
            let text = if yes { "Refunded." } else { "Not refunded." };
            let reply = msg(text, Role::Assistant, "m-reply");
            Ok::<_, BoxError>(AgentStateUpdate::default().context(vec![reply]))
        })
        .entry("ask")
        .edge("ask", "approve")
        .edge("approve", END)
        .build()
        .unwrap();
    let start = chat_with(vec![msg("Refund my order.", Role::User, "u-1")]);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let (events, last) = runtime.block_on(async {
        let store = SqliteStore::open_in_memory().unwrap();
        store.create("thread-1", start.clone()).await.unwrap();
        let durable = graph.durable(&store);
        let mut adapter = AguiAdapter::new("thread-1", &start, context_of).unwrap();
        let mut events = Vec::new();
        let mut asked = Vec::new();
        let mut run = durable.stream_as("thread-1", "run-durable", ());
        while let Some(event) = run.next().await {
            let event = event.unwrap();
            if let Event::RunSuspended { interrupts, .. } = &event {
                asked.clone_from(interrupts);
            }
            events.extend(adapter.events(&event));
        }
        assert_eq!(asked.len(), 1);
        let answers = Answers::new().answer(&asked[0].id, true);
        let mut run = durable.stream_resume("thread-1", answers);
        while let Some(event) = run.next().await {
            events.extend(adapter.events(&event.unwrap()));
        }
        let last = store.load::<Chat>("thread-1").await.unwrap().state;
        (events, last)
    });
    let mut events = serde_json::to_value(&events).unwrap();
    let run_id = events[0]["runId"].as_str().unwrap().to_owned();
    for event in events.as_array_mut().unwrap() {
        if event["runId"] == run_id.as_str() {
            event["runId"] = json!("run-durable");
        }
    }
    let finished: Vec<&Value> = events
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["type"] == "RUN_FINISHED")
        .collect();
    assert_eq!(finished.len(), 2);
    assert_eq!(finished[0]["outcome"]["type"], "interrupt");
    assert_eq!(
        finished[0]["outcome"]["interrupts"][0]["id"],
        "approve:2.0:0@run-durable"
    );
    let outcome = (
        events,
        serde_json::to_value(messages_to_agui(context_of(&last))).unwrap(),
        serde_json::to_value(&last).unwrap(),
    );
    check("durable_interrupt", outcome);
}
