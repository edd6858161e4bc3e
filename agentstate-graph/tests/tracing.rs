//! The `tracing` spans of runs, node calls, effects and interrupts, seen by a subscriber that
//! records them (`capture_support`: no subscriber crate), on a current-thread runtime.

mod capture_support;

use agentstate::AgentState;
use agentstate_graph::durable::{Answers, Outcome};
use agentstate_graph::{BoxError, Context, Graph, RunConfig, END};
use capture_support::{field, Capture, EventData};
use serde_json::json;
use std::sync::Arc;

#[derive(AgentState, Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
struct Flow {
    #[reducer(append)]
    log: Vec<String>,
}

// ---------------------------------------------------------------------------------------------
// Cases.

fn two_nodes() -> Graph<Flow> {
    Graph::builder()
        .node("a", |_: Arc<Flow>, _: Context| async {
            tracing::info!("node a executing");
            Ok::<_, BoxError>(FlowUpdate::default().log(vec!["a".to_owned()]))
        })
        .node("b", |_: Arc<Flow>, cx: Context| async move {
            let paid: String = cx
                .effect("pay", |key| async move { Ok::<_, std::io::Error>(key) })
                .await?;
            Ok::<_, BoxError>(FlowUpdate::default().log(vec![paid]))
        })
        .entry("a")
        .edge("a", "b")
        .edge("b", END)
        .build()
        .unwrap()
}

#[test]
fn a_run_s_node_calls_and_effects_are_spans_under_the_run_s() {
    let capture = Capture::default();
    let config = RunConfig {
        run_id: Some("r-1".to_owned()),
        ..RunConfig::default()
    };
    let state = capture
        .run(two_nodes().invoke_with(Flow::default(), config))
        .unwrap();
    assert_eq!(state.log, ["a", "r-1:b/e0"]);

    let runs = capture.spans("agentstate.run");
    assert_eq!(runs.len(), 1, "{runs:?}");
    let (run_id, run) = &runs[0];
    assert_eq!(run.parent, None);
    assert_eq!(field(run, "gen_ai.operation.name"), Some("invoke_agent"));
    assert_eq!(field(run, "otel.name"), Some("invoke_agent"));
    assert_eq!(field(run, "agentstate.run.id"), Some("r-1"));
    // An in-memory run has no thread, and it did not fail.
    assert_eq!(field(run, "gen_ai.conversation.id"), None);
    assert_eq!(field(run, "otel.status_code"), None);

    let nodes = capture.spans("agentstate.node");
    let named: Vec<(Option<&str>, Option<&str>, Option<&str>)> = nodes
        .iter()
        .map(|(_, s)| {
            (
                field(s, "agentstate.node"),
                field(s, "agentstate.step"),
                field(s, "otel.name"),
            )
        })
        .collect();
    assert_eq!(
        named,
        [
            (Some("a"), Some("1"), Some("a")),
            (Some("b"), Some("2"), Some("b"))
        ]
    );
    // Each node's span is inside its step's, inside the run's.
    let steps = capture.spans("agentstate.step");
    assert_eq!(steps.len(), 2, "{steps:?}");
    assert!(steps
        .iter()
        .all(|(_, s)| s.parent == Some(*run_id) && field(s, "agentstate.run.id") == Some("r-1")));
    assert_eq!(
        steps
            .iter()
            .map(|(_, s)| (field(s, "agentstate.step"), field(s, "agentstate.nodes")))
            .collect::<Vec<_>>(),
        [(Some("1"), Some("a")), (Some("2"), Some("b"))]
    );
    assert!(nodes
        .iter()
        .zip(&steps)
        .all(|((_, s), (step, _))| s.parent == Some(*step)
            && field(s, "agentstate.run.id") == Some("r-1")));

    let effects = capture.spans("agentstate.effect");
    assert_eq!(effects.len(), 1);
    let (_, effect) = &effects[0];
    assert_eq!(
        effect.parent,
        Some(nodes[1].0),
        "the effect is inside `b`'s span"
    );
    assert_eq!(field(effect, "agentstate.effect.name"), Some("pay"));
    assert_eq!(field(effect, "agentstate.effect.key"), Some("r-1:b/e0"));
    assert_eq!(field(effect, "agentstate.effect.replayed"), Some("false"));

    // A node's log record is inside its node's span.
    let events = capture.events();
    let logged = events
        .iter()
        .find(|e| e.fields.get("message").map(String::as_str) == Some("node a executing"))
        .expect("node a's log record");
    assert_eq!(logged.span, Some(nodes[0].0));
}

#[test]
fn a_failing_node_and_an_interrupt_outside_a_durable_run_mark_their_spans() {
    let capture = Capture::default();
    let graph = Graph::builder()
        .node("ask", |_: Arc<Flow>, cx: Context| async move {
            cx.interrupt(json!({"refund": 30}))?;
            Ok::<_, BoxError>(FlowUpdate::default())
        })
        .entry("ask")
        .edge("ask", END)
        .build()
        .unwrap();
    let config = RunConfig {
        run_id: Some("run-1".to_owned()),
        ..RunConfig::default()
    };
    let error = capture
        .run(graph.invoke_with(Flow::default(), config))
        .unwrap_err();
    assert_eq!(error.category(), "interrupt_outside_durable_run");
    let (node_id, node) = capture.spans("agentstate.node").remove(0);
    assert_eq!(field(&node, "otel.status_code"), Some("ERROR"));
    assert_eq!(
        field(&node, "error.type"),
        Some("interrupt_outside_durable_run")
    );
    let (_, asked) = capture.spans("agentstate.interrupt").remove(0);
    assert_eq!(asked.parent, Some(node_id));
    assert_eq!(
        field(&asked, "agentstate.interrupt.id"),
        Some("ask:1.0:0@run-1")
    );
    assert_eq!(
        field(&asked, "agentstate.interrupt.answered"),
        Some("false")
    );
    assert_eq!(field(&asked, "agentstate.durable"), Some("false"));
    let (_, run) = capture.spans("agentstate.run").remove(0);
    assert_eq!(
        field(&run, "error.type"),
        Some("interrupt_outside_durable_run")
    );

    let failing = Graph::builder()
        .node("boom", |_: Arc<Flow>, _: Context| async {
            Err::<(), BoxError>("boom".into())
        })
        .entry("boom")
        .edge("boom", END)
        .build()
        .unwrap();
    let capture = Capture::default();
    capture.run(failing.invoke(Flow::default())).unwrap_err();
    let (_, node) = capture.spans("agentstate.node").remove(0);
    assert_eq!(field(&node, "error.type"), Some("node_exception"));
    let (_, run) = capture.spans("agentstate.run").remove(0);
    assert_eq!(field(&run, "otel.status_code"), Some("ERROR"));
}

#[test]
fn a_durable_interrupt_and_a_replayed_effect_are_spans_too() {
    let graph = Graph::builder()
        .node("approve", |_: Arc<Flow>, cx: Context| async move {
            let receipt: String = cx
                .effect("reserve", |_| async {
                    Ok::<_, std::io::Error>("r-9".to_owned())
                })
                .await?;
            let answer = cx.interrupt(json!({"receipt": receipt}))?;
            Ok::<_, BoxError>(FlowUpdate::default().log(vec![answer.to_string()]))
        })
        .entry("approve")
        .edge("approve", END)
        .build()
        .unwrap();
    let store = agentstate_store::SqliteStore::open_in_memory().unwrap();
    let durable = graph.durable(&store);

    let capture = Capture::default();
    let Outcome::Suspended { interrupts, .. } =
        capture.run(durable.start("t-1", Flow::default())).unwrap()
    else {
        panic!("the run asks")
    };
    let (_, node) = capture.spans("agentstate.node").remove(0);
    // A question is not a failure.
    assert_eq!(field(&node, "agentstate.interrupted"), Some("true"));
    assert_eq!(field(&node, "otel.status_code"), None);
    let (_, asked) = capture.spans("agentstate.interrupt").remove(0);
    assert_eq!(
        (
            field(&asked, "agentstate.interrupt.answered"),
            field(&asked, "agentstate.durable")
        ),
        (Some("false"), Some("true"))
    );

    let capture = Capture::default();
    let answers = Answers::new().answer(&interrupts[0].id, json!("yes"));
    let Outcome::Finished { state, .. } = capture.run(durable.resume_with("t-1", answers)).unwrap()
    else {
        panic!("the run finishes")
    };
    assert_eq!(state.log, ["\"yes\""]);
    let (_, effect) = capture.spans("agentstate.effect").remove(0);
    assert_eq!(field(&effect, "agentstate.effect.replayed"), Some("true"));
    let (_, asked) = capture.spans("agentstate.interrupt").remove(0);
    assert_eq!(field(&asked, "agentstate.interrupt.answered"), Some("true"));
}

/// OpenArmature sessions 012's rule, for durable runs: every span of a run bound to a thread
/// (run, steps, nodes, effects, including those of a nested run) carries the thread's id
/// (`gen_ai.conversation.id`), and every log record a node writes is inside such a span; an
/// in-memory run's spans carry none.
#[test]
fn a_durable_run_s_spans_all_carry_its_thread() {
    let child = Graph::builder()
        .node("inner", |_: Arc<Flow>, _: Context| async {
            tracing::info!("inner node");
            Ok::<_, std::convert::Infallible>(FlowUpdate::default().log(vec!["inner".to_owned()]))
        })
        .entry("inner")
        .edge("inner", END)
        .build()
        .unwrap();
    let sub = agentstate_graph::parallel::FanOut::new(
        child,
        |_: &Flow| vec![Flow::default(), Flow::default()],
        |done: Vec<Flow>| {
            FlowUpdate::default().log(done.into_iter().flat_map(|f| f.log).collect::<Vec<_>>())
        },
    );
    let graph = Graph::builder()
        .node("a", |_: Arc<Flow>, cx: Context| async move {
            tracing::info!("node a");
            let paid: String = cx
                .effect("pay", |_| async { Ok::<_, std::io::Error>("p".to_owned()) })
                .await?;
            Ok::<_, BoxError>(FlowUpdate::default().log(vec![paid]))
        })
        .node("fan", sub)
        .entry("a")
        .edge("a", "fan")
        .edge("fan", END)
        .build()
        .unwrap();

    let store = agentstate_store::SqliteStore::open_in_memory().unwrap();
    let durable = graph.durable(&store);
    let capture = Capture::default();
    let outcome = capture.run(durable.start("s12", Flow::default())).unwrap();
    assert_eq!(outcome.state().log, ["p", "inner", "inner"]);
    let recorded = capture.recorded.lock().unwrap();
    let names: Vec<&str> = recorded.spans.values().map(|s| s.name).collect();
    for name in [
        "agentstate.run",
        "agentstate.step",
        "agentstate.node",
        "agentstate.effect",
    ] {
        assert!(names.contains(&name), "no {name} span: {names:?}");
    }
    for span in recorded.spans.values() {
        assert_eq!(
            field(span, "gen_ai.conversation.id"),
            Some("s12"),
            "span {} has no thread: {span:?}",
            span.name
        );
    }
    let logs: Vec<&EventData> = recorded
        .events
        .iter()
        .filter(|e| e.fields.get("message").is_some_and(|m| m.contains("node")))
        .collect();
    assert_eq!(logs.len(), 3, "{logs:?}");
    for log in logs {
        let span = log.span.and_then(|id| recorded.spans.get(&id));
        assert_eq!(
            span.and_then(|s| field(s, "gen_ai.conversation.id")),
            Some("s12"),
            "a log record outside the thread's spans: {log:?}"
        );
    }
    drop(recorded);

    // In memory: no thread, no attribute.
    let capture = Capture::default();
    capture.run(graph.invoke(Flow::default())).unwrap();
    let recorded = capture.recorded.lock().unwrap();
    assert!(!recorded.spans.is_empty());
    assert!(recorded
        .spans
        .values()
        .all(|s| field(s, "gen_ai.conversation.id").is_none()));
}
