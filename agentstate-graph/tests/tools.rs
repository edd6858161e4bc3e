//! `ToolSet`: typed tools run in parallel, their results in call order, every failure a result
//! the model reads, panics caught, and in a durable run each call's effects run once and its
//! questions suspend the run (on SQLite).

use agentstate::message::{Message, Role, ToolCall, ToolResultStatus};
use agentstate::state::{AgentState, AgentStateUpdate};
use agentstate_graph::durable::Outcome;
use agentstate_graph::{BoxError, Context, Graph, ToolSet, END};
use agentstate_store::SqliteStore;
use serde_json::json;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Sleeps this long, then says so.
#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Sleep {
    ms: u64,
}

/// How many calls run at once, and the most that ever did.
#[derive(Clone, Default)]
struct Gauge {
    now: Arc<AtomicUsize>,
    most: Arc<AtomicUsize>,
}

impl Gauge {
    fn tools(&self) -> ToolSet {
        let gauge = self.clone();
        ToolSet::new().tool("sleep", move |args: Sleep, _: Context| {
            let gauge = gauge.clone();
            async move {
                let now = gauge.now.fetch_add(1, Ordering::SeqCst) + 1;
                gauge.most.fetch_max(now, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(args.ms)).await;
                gauge.now.fetch_sub(1, Ordering::SeqCst);
                Ok::<_, BoxError>(format!("slept {} ms", args.ms))
            }
        })
    }
}

fn sleeps(ms: &[u64]) -> Vec<ToolCall> {
    ms.iter()
        .enumerate()
        .map(|(i, ms)| ToolCall::new(format!("c{i}"), "sleep", json!({ "ms": ms })))
        .collect()
}

fn texts(messages: &[Message]) -> Vec<String> {
    messages.iter().map(Message::text).collect()
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap()
}

#[test]
fn results_come_in_call_order_whatever_order_the_calls_finish_in() {
    let gauge = Gauge::default();
    let calls = sleeps(&[60, 5, 30, 1]);
    let results = runtime()
        .block_on(gauge.tools().run(&calls, &Context::detached("tools")))
        .unwrap();
    assert_eq!(
        texts(&results),
        ["slept 60 ms", "slept 5 ms", "slept 30 ms", "slept 1 ms"]
    );
    for (result, call) in results.iter().zip(&calls) {
        assert_eq!(result.role, Role::Tool);
        let block = result.tool_results().next().unwrap();
        assert_eq!(block.call_id, call.id);
        assert!(!block.is_error);
        assert_eq!(block.status, Some(ToolResultStatus::Completed));
    }
    // All four ran at once (the default bound is 8).
    assert_eq!(gauge.most.load(Ordering::SeqCst), 4);
}

#[test]
fn concurrency_bounds_the_calls_running_at_once() {
    let gauge = Gauge::default();
    let tools = gauge.tools().concurrency(2);
    let calls = sleeps(&[20, 20, 20, 20, 20, 20, 20]);
    let results = runtime()
        .block_on(tools.run(&calls, &Context::detached("tools")))
        .unwrap();
    assert_eq!(results.len(), 7);
    assert_eq!(gauge.most.load(Ordering::SeqCst), 2);

    // 0 is taken as 1: one call at a time, none refused.
    let gauge = Gauge::default();
    let results = runtime()
        .block_on(
            gauge
                .tools()
                .concurrency(0)
                .run(&sleeps(&[1, 1, 1]), &Context::detached("tools")),
        )
        .unwrap();
    assert_eq!(texts(&results), ["slept 1 ms"; 3]);
    assert_eq!(gauge.most.load(Ordering::SeqCst), 1);
}

/// Divides two numbers.
#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Divide {
    a: i64,
    b: i64,
}

#[derive(Debug)]
struct DivisionByZero;

impl std::fmt::Display for DivisionByZero {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("cannot divide by zero")
    }
}

impl std::error::Error for DivisionByZero {}

fn arithmetic() -> ToolSet {
    ToolSet::new()
        .tool("divide", |args: Divide, _: Context| async move {
            if args.b == 0 {
                return Err(DivisionByZero);
            }
            Ok(args.a / args.b)
        })
        .tool("explode", |_: serde_json::Value, _: Context| async move {
            if true {
                panic!("the tool blew up");
            }
            Ok::<_, BoxError>(0)
        })
        .tool_defined(
            agentstate::providers::Tool::new(
                "explode_early",
                "Panics before its future.",
                json!({"type": "object"}),
            ),
            |_: serde_json::Value, _: Context| -> std::future::Ready<Result<u8, BoxError>> {
                panic!("panicked while starting: {}", 42)
            },
        )
}

#[test]
fn every_failure_is_a_result_the_model_can_read() {
    let mut not_json = ToolCall::new("c2", "divide", json!({}));
    not_json.function.arguments = "{\"a\": 1,".into();
    let calls = vec![
        ToolCall::new("c0", "divide", json!({"a": 7, "b": 2})),
        ToolCall::new("c1", "divide", json!({"a": 7, "b": "two"})),
        not_json,
        ToolCall::new("c3", "multiply", json!({"a": 7, "b": 2})),
        ToolCall::new("c4", "divide", json!({"a": 7, "b": 0})),
        ToolCall::new("c5", "explode", json!({})),
        ToolCall::new("c6", "explode_early", json!({})),
        ToolCall::new("c7", "divide", json!({"a": 9, "b": 3})),
    ];
    let results = runtime()
        .block_on(arithmetic().run(&calls, &Context::detached("tools")))
        .unwrap();
    assert_eq!(
        texts(&results),
        [
            "3",
            "Error: the arguments of call `c1` to tool `divide` do not fit at `b`: invalid type: \
             string \"two\", expected i64 at line 1 column 19\n Please fix your mistakes.",
            "Error: the arguments of call `c2` to tool `divide` are not JSON: EOF while parsing \
             a value at line 1 column 8\n Please fix your mistakes.",
            "Error: multiply is not a valid tool, try one of [divide, explode, explode_early].",
            "Error: tool `divide` failed: cannot divide by zero\n Please fix your mistakes.",
            "Error: tool `explode` panicked: the tool blew up\n Please fix your mistakes.",
            "Error: tool `explode_early` panicked: panicked while starting: 42\n Please fix your \
             mistakes.",
            "3",
        ]
    );
    let failed: Vec<bool> = results
        .iter()
        .map(|m| m.tool_results().next().unwrap().is_error)
        .collect();
    assert_eq!(failed, [false, true, true, true, true, true, true, false]);
    assert!(results[1..7]
        .iter()
        .all(|m| m.tool_results().next().unwrap().status == Some(ToolResultStatus::Failed)));
}

#[test]
fn error_text_replaces_the_default_words_and_sees_the_failure() {
    let tools = arithmetic().error_text(|failure| {
        format!("{} on {}: {failure}", failure.category(), failure.call_id())
    });
    let calls = vec![
        ToolCall::new("c0", "divide", json!({"a": 1, "b": 0})),
        ToolCall::new("c1", "nope", json!({})),
        ToolCall::new("c2", "divide", json!({"a": 1})),
    ];
    let results = runtime()
        .block_on(tools.run(&calls, &Context::detached("tools")))
        .unwrap();
    assert_eq!(
        texts(&results),
        [
            "tool_failed on c0: tool `divide` failed: cannot divide by zero",
            "unknown_tool on c1: call `c1` names the tool `nope`, which the set does not have",
            "tool_arguments_invalid on c2: the arguments of call `c2` to tool `divide` do not fit: \
             missing field `b` at line 1 column 8",
        ]
    );
}

#[test]
fn definitions_come_from_the_argument_types() {
    let tools = arithmetic();
    let divide = tools.get("divide").unwrap();
    assert_eq!(divide.description, "Divides two numbers.");
    assert_eq!(divide.parameters["type"], "object");
    assert_eq!(divide.parameters["required"], json!(["a", "b"]));
    assert!(divide.parameters.get("title").is_none());
    assert!(divide.parameters.get("description").is_none());
    assert_eq!(
        tools.names().collect::<Vec<_>>(),
        ["divide", "explode", "explode_early"]
    );
    // Every definition is one a request takes.
    let request = agentstate::providers::ModelRequest::builder("m")
        .tools(tools.tools())
        .build();
    assert!(request.is_ok(), "{request:?}");

    // A name given twice: the first serves calls, and a request refuses the pair.
    let twice = arithmetic().tool("divide", |_: Divide, _: Context| async {
        Ok::<_, BoxError>("second")
    });
    let result = runtime()
        .block_on(twice.call(
            &ToolCall::new("c", "divide", json!({"a": 4, "b": 2})),
            &Context::detached("tools"),
        ))
        .unwrap();
    assert_eq!(result.text(), "2");
    let error = agentstate::providers::ModelRequest::builder("m")
        .tools(twice.tools())
        .build()
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        "`tools` is invalid: two tools are named `divide`"
    );
}

// ---------------------------------------------------------------------------------------------
// In a durable run.

/// Charges a card (an effect: once per call, however often the node runs).
#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Charge {
    cents: u64,
}

/// Asks a person to confirm.
#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Confirm {
    question: String,
}

fn durable_tools(charges: &Arc<AtomicUsize>) -> ToolSet {
    let charges = Arc::clone(charges);
    ToolSet::new()
        .tool("charge", move |args: Charge, cx: Context| {
            let charges = Arc::clone(&charges);
            async move {
                // The slower the earlier call, so the calls finish out of order.
                tokio::time::sleep(Duration::from_millis(args.cents / 10)).await;
                let receipt: String = cx
                    .effect("charge", |key| async move {
                        let n = charges.fetch_add(1, Ordering::SeqCst) + 1;
                        Ok::<_, std::io::Error>(format!(
                            "receipt {n} ({} cents, key {key})",
                            args.cents
                        ))
                    })
                    .await?;
                Ok::<_, BoxError>(receipt)
            }
        })
        .tool("confirm", |args: Confirm, cx: Context| async move {
            let answer = cx.interrupt(json!({ "question": args.question }))?;
            Ok::<_, BoxError>(format!("the person said {answer}"))
        })
}

/// The tools node: runs the last message's calls.
fn tools_node(tools: ToolSet) -> impl agentstate_graph::Node<AgentState> {
    let tools = Arc::new(tools);
    move |state: Arc<AgentState>, cx: Context| {
        let tools = Arc::clone(&tools);
        async move {
            let calls = state
                .context
                .iter()
                .last()
                .map(|m| m.tool_calls().to_vec())
                .unwrap_or_default();
            let results = tools.run(&calls, &cx).await?;
            Ok::<_, BoxError>(AgentStateUpdate::default().context(results))
        }
    }
}

/// A graph of the tools node alone.
fn tools_graph(charges: &Arc<AtomicUsize>) -> Graph<AgentState> {
    Graph::builder()
        .node("tools", tools_node(durable_tools(charges)))
        .entry("tools")
        .edge("tools", END)
        .build()
        .unwrap()
}

fn asking_state() -> AgentState {
    let mut state = AgentState::default();
    let ask = Message::text_message("", Role::Assistant)
        .with_id("ask")
        .with_tool_calls(vec![
            ToolCall::new("pay-1", "charge", json!({"cents": 300})),
            ToolCall::new("ok", "confirm", json!({"question": "ship it?"})),
            ToolCall::new("pay-2", "charge", json!({"cents": 100})),
        ]);
    agentstate::State::merge(&mut state, AgentStateUpdate::default().context(vec![ask])).unwrap();
    state
}

#[tokio::test]
async fn in_a_durable_run_effects_run_once_and_a_question_suspends_the_run() {
    let charges = Arc::new(AtomicUsize::new(0));
    let graph = tools_graph(&charges);
    let store = SqliteStore::open_in_memory().unwrap();
    let durable = graph.durable(&store);

    let outcome = durable.start("t", asking_state()).await.unwrap();
    let Outcome::Suspended { interrupts, .. } = outcome else {
        panic!("expected the run to wait for the person, got {outcome:?}");
    };
    assert_eq!(interrupts.len(), 1);
    let asked = &interrupts[0];
    assert_eq!(asked.node, "tools");
    assert_eq!(asked.payload, json!({"question": "ship it?"}));
    assert_eq!(asked.metadata["tool_call_index"], 1);
    // Both charges ran (and were journaled) before the run suspended.
    assert_eq!(charges.load(Ordering::SeqCst), 2);

    let answers = agentstate_graph::durable::Answers::new().answer(&asked.id, "yes");
    let outcome = durable.resume_with("t", answers).await.unwrap();
    let Outcome::Finished { state, .. } = outcome else {
        panic!("expected the run to finish, got {outcome:?}");
    };
    // The node ran again, every call from its start; the charges were not made again.
    assert_eq!(charges.load(Ordering::SeqCst), 2);
    let results: Vec<String> = state.context.iter().skip(1).map(Message::text).collect();
    assert_eq!(results.len(), 3);
    // Each call kept its own recorded receipt (keyed by its place in the message, not by
    // which finished first: the second charge finishes first).
    assert!(
        results[0].starts_with("receipt 2 (300 cents"),
        "{results:?}"
    );
    assert_eq!(results[1], "the person said \"yes\"");
    assert!(
        results[2].starts_with("receipt 1 (100 cents"),
        "{results:?}"
    );
    assert!(results[0].ends_with(":1.0/t0/e0)"), "{results:?}");
    assert!(results[2].ends_with(":1.0/t2/e0)"), "{results:?}");
}

#[test]
fn a_question_outside_a_durable_run_fails_the_run() {
    let charges = Arc::new(AtomicUsize::new(0));
    let graph = tools_graph(&charges);
    let error = runtime()
        .block_on(graph.invoke(asking_state()))
        .unwrap_err();
    assert_eq!(error.category(), "interrupt_outside_durable_run");
}

// ---------------------------------------------------------------------------------------------
// Each call once: an effect keyed by its call id.

/// How many times each call id's tool ran, and the idempotency keys it was given.
#[derive(Clone, Default)]
struct Ran(Arc<std::sync::Mutex<std::collections::BTreeMap<String, Vec<String>>>>);

impl Ran {
    fn hit(&self, id: &str, key: Option<&str>) {
        let mut ran = self.0.lock().unwrap();
        ran.entry(id.to_owned())
            .or_default()
            .push(key.unwrap_or("none").to_owned());
    }

    fn counts(&self) -> Vec<(String, usize)> {
        let ran = self.0.lock().unwrap();
        ran.iter()
            .map(|(id, keys)| (id.clone(), keys.len()))
            .collect()
    }

    fn keys(&self, id: &str) -> Vec<String> {
        self.0.lock().unwrap().get(id).cloned().unwrap_or_default()
    }
}

/// Names its call.
#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Tag {
    id: String,
}

/// `work` says its call's id, `broken` fails; both count their runs.
fn counted_tools(ran: &Ran) -> ToolSet {
    let (work, broken) = (ran.clone(), ran.clone());
    ToolSet::new()
        .tool("work", move |tag: Tag, cx: Context| {
            let ran = work.clone();
            async move {
                ran.hit(&tag.id, cx.idempotency_key());
                // The earlier call finishes last.
                let wait = 30u64.saturating_sub(10 * tag.id.len() as u64 % 30);
                tokio::time::sleep(Duration::from_millis(wait)).await;
                Ok::<_, BoxError>(format!("worked {}", tag.id))
            }
        })
        .tool("broken", move |tag: Tag, cx: Context| {
            let ran = broken.clone();
            async move {
                ran.hit(&tag.id, cx.idempotency_key());
                Err::<String, BoxError>(format!("{} is broken", tag.id).into())
            }
        })
}

fn calls_of(ids: &[(&str, &str)]) -> Vec<ToolCall> {
    ids.iter()
        .map(|(id, tool)| ToolCall::new(*id, *tool, json!({ "id": id })))
        .collect()
}

/// A node that runs `calls` (in reverse order from its second call on), then fails the first
/// time it ran; it returns the results it got.
fn failing_once(tools: ToolSet, calls: Vec<ToolCall>) -> impl agentstate_graph::Node<AgentState> {
    let (tools, calls) = (Arc::new(tools), Arc::new(calls));
    let attempts = Arc::new(AtomicUsize::new(0));
    move |_: Arc<AgentState>, cx: Context| {
        let (tools, calls, attempts) = (tools.clone(), calls.clone(), attempts.clone());
        async move {
            let attempt = attempts.fetch_add(1, Ordering::SeqCst);
            let mut calls = calls.to_vec();
            if attempt > 0 {
                calls.reverse();
            }
            let results = tools.run(&calls, &cx).await?;
            if attempt == 0 {
                return Err::<AgentStateUpdate, BoxError>("the node failed after its tools".into());
            }
            Ok(AgentStateUpdate::default().context(results))
        }
    }
}

/// A graph of `node` alone, named `tools`.
fn alone(node: impl agentstate_graph::Node<AgentState>) -> Graph<AgentState> {
    Graph::builder()
        .node("tools", node)
        .entry("tools")
        .edge("tools", END)
        .build()
        .unwrap()
}

/// Runs `graph` durably on a new SQLite store: its final state.
async fn finished_on_sqlite(graph: &Graph<AgentState>) -> Arc<AgentState> {
    let store = SqliteStore::open_in_memory().unwrap();
    match graph
        .durable(&store)
        .start("t", AgentState::default())
        .await
    {
        Ok(Outcome::Finished { state, .. }) => state,
        other => panic!("expected the run to finish, got {other:?}"),
    }
}

/// The results' (call id, text) pairs.
fn answered(messages: &[Message]) -> Vec<(String, String)> {
    messages
        .iter()
        .flat_map(|m| {
            m.tool_results()
                .map(|r| (r.call_id.clone(), m.text()))
                .collect::<Vec<_>>()
        })
        .collect()
}

/// Runs the failing node durably on `store`: the step fails after its calls, and the resume
/// runs it again, in reverse order; no finished call runs again.
async fn finished_calls_once<B: agentstate_store::backend::Backend>(
    store: &agentstate_store::Store<B>,
    thread: &str,
) {
    let ran = Ran::default();
    let calls = calls_of(&[
        ("a", "work"),
        ("bb", "work"),
        ("x", "broken"),
        ("z", "nope"),
    ]);
    let graph = alone(failing_once(counted_tools(&ran), calls));
    let durable = graph.durable(store);
    let error = durable
        .start(thread, AgentState::default())
        .await
        .unwrap_err();
    assert!(
        error
            .to_string()
            .contains("the node failed after its tools"),
        "{error}"
    );
    let expected_runs = vec![
        ("a".to_owned(), 1),
        ("bb".to_owned(), 1),
        ("x".to_owned(), 1),
    ];
    assert_eq!(ran.counts(), expected_runs);

    // Each call that reached its tool was journaled under its id (the unknown tool was not).
    let entries = store
        .history(thread, agentstate_store::HistoryQuery::oldest(100))
        .await
        .unwrap();
    let mut keys: Vec<String> = entries
        .iter()
        .filter_map(|e| e.extra.get("agentstate_graph"))
        .filter(|m| m["entry"] == "effect")
        .map(|m| m["key"].as_str().unwrap().to_owned())
        .collect();
    keys.sort();
    assert_eq!(keys, ["1.0/call:a", "1.0/call:bb", "1.0/call:x"]);

    let outcome = durable.resume(thread).await.unwrap();
    let Outcome::Finished { state, .. } = outcome else {
        panic!("expected the run to finish, got {outcome:?}");
    };
    // Nothing ran again, though the calls came in another order.
    assert_eq!(ran.counts(), expected_runs);
    let results = answered(&state.context.iter().cloned().collect::<Vec<_>>());
    let texts: Vec<(&str, &str)> = results
        .iter()
        .map(|(id, text)| (id.as_str(), text.as_str()))
        .collect();
    assert_eq!(
        texts,
        [
            (
                "z",
                "Error: nope is not a valid tool, try one of [work, broken]."
            ),
            (
                "x",
                "Error: tool `broken` failed: x is broken\n Please fix your mistakes."
            ),
            ("bb", "worked bb"),
            ("a", "worked a"),
        ]
    );
    // Each tool was given its call's key: the run's id, the step's task and the call id.
    let key = &ran.keys("bb")[0];
    assert!(key.ends_with(":1.0/call:bb"), "{key}");
    assert!(!key.starts_with(":1.0"), "the key names the run: {key}");
}

#[tokio::test]
async fn a_finished_call_does_not_run_again_when_its_step_runs_again_on_sqlite() {
    let store = SqliteStore::open_in_memory().unwrap();
    finished_calls_once(&store, "t").await;
}

#[tokio::test]
async fn a_finished_call_does_not_run_again_when_its_step_runs_again_on_postgres() {
    let ci = std::env::var("CI").is_ok_and(|v| v == "true" || v == "1");
    let Ok(url) = std::env::var("AGENTSTATE_POSTGRES_URL") else {
        assert!(!ci, "CI=true but AGENTSTATE_POSTGRES_URL is not set");
        eprintln!("tools: postgres case skipped: AGENTSTATE_POSTGRES_URL is not set");
        return;
    };
    let store = agentstate_store::PostgresStore::connect(&url)
        .await
        .unwrap();
    let thread = format!(
        "tools-once-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    );
    finished_calls_once(&store, &thread).await;
    store.delete(&thread).await.unwrap();
}

#[tokio::test]
async fn a_retried_node_does_not_run_its_finished_calls_again() {
    use agentstate_graph::layer::{NodeExt, RetryPolicy};
    let ran = Ran::default();
    let calls = calls_of(&[("a", "work"), ("b", "work")]);
    let graph = alone(
        failing_once(counted_tools(&ran), calls.clone())
            .retry(RetryPolicy::new(2).backoff_constant(Duration::ZERO)),
    );
    finished_on_sqlite(&graph).await;
    assert_eq!(ran.counts(), [("a".to_owned(), 1), ("b".to_owned(), 1)]);

    // Outside a durable run there is no journal: the retry runs the calls again, as it did.
    let ran = Ran::default();
    let graph = alone(
        failing_once(counted_tools(&ran), calls)
            .retry(RetryPolicy::new(2).backoff_constant(Duration::ZERO)),
    );
    graph.invoke(AgentState::default()).await.unwrap();
    assert_eq!(ran.counts(), [("a".to_owned(), 2), ("b".to_owned(), 2)]);
}

/// The effects a node asks for itself are not run again by its retry either.
#[tokio::test]
async fn a_retried_node_does_not_run_its_recorded_effects_again() {
    use agentstate_graph::layer::{NodeExt, RetryPolicy};
    let (paid, attempts) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let (p, a) = (paid.clone(), attempts.clone());
    let node = move |_: Arc<AgentState>, cx: Context| {
        let (paid, attempts) = (p.clone(), a.clone());
        async move {
            let receipt: usize = cx
                .effect("pay", |_key| async move {
                    Ok::<_, std::io::Error>(paid.fetch_add(1, Ordering::SeqCst) + 1)
                })
                .await?;
            if attempts.fetch_add(1, Ordering::SeqCst) == 0 {
                return Err::<AgentStateUpdate, BoxError>("failed after paying".into());
            }
            let said = Message::text_message(format!("receipt {receipt}"), Role::Assistant);
            Ok(AgentStateUpdate::default().context(vec![said]))
        }
    };
    let graph = alone(node.retry(RetryPolicy::new(2).backoff_constant(Duration::ZERO)));
    let state = finished_on_sqlite(&graph).await;
    assert_eq!(attempts.load(Ordering::SeqCst), 2);
    assert_eq!(paid.load(Ordering::SeqCst), 1, "the retry paid again");
    assert_eq!(state.context.iter().last().unwrap().text(), "receipt 1");
}

#[tokio::test]
async fn calls_that_share_an_id_are_each_their_own_effect() {
    let ran = Ran::default();
    let calls = calls_of(&[
        ("same", "work"),
        ("same", "work"),
        ("", "work"),
        ("", "work"),
    ]);
    let graph = alone(failing_once(counted_tools(&ran), calls));
    let store = SqliteStore::open_in_memory().unwrap();
    let durable = graph.durable(&store);
    durable.start("t", AgentState::default()).await.unwrap_err();
    assert_eq!(ran.counts(), [("".to_owned(), 2), ("same".to_owned(), 2)]);
    let mut keys = ran.keys("same");
    keys.sort();
    assert!(keys[0].ends_with(":1.0/call:same"), "{keys:?}");
    assert!(keys[1].ends_with(":1.0/call:same#1"), "{keys:?}");
    durable.resume("t").await.unwrap();
    assert_eq!(ran.counts(), [("".to_owned(), 2), ("same".to_owned(), 2)]);
}

#[test]
fn outside_a_durable_run_a_call_runs_each_time_with_its_key() {
    let ran = Ran::default();
    let tools = counted_tools(&ran);
    let cx = Context::detached("tools");
    let calls = calls_of(&[("a", "work")]);
    let rt = runtime();
    rt.block_on(tools.run(&calls, &cx)).unwrap();
    rt.block_on(tools.run(&calls, &cx)).unwrap();
    assert_eq!(ran.keys("a"), ["test:tools/call:a", "test:tools/call:a"]);
}
