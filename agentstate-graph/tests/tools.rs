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
