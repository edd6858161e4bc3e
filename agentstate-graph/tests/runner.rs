//! The runner's behaviour: edges, supersteps, merges at the barrier, errors, the recursion
//! limit, compile checks, typed routing, cancellation and streaming.

use agentstate::AgentState;
use agentstate_graph::{
    node_names, CompileError, Context, Event, Graph, NodeKey, RunConfig, RunErrorKind, END,
};
use futures_util::StreamExt;
use std::convert::Infallible;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

thread_local! {
    /// The state's copies made on this test's thread (each test runs its graph on its own
    /// thread, on a current-thread runtime).
    static CLONES: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

#[derive(AgentState, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
struct Flow {
    n: u32,
    #[reducer(append)]
    log: Vec<String>,
    last: Option<String>,
}

// Counts copies of the state, to check that steps never copy it.
impl Clone for Flow {
    fn clone(&self) -> Self {
        CLONES.set(CLONES.get() + 1);
        Flow {
            n: self.n,
            log: self.log.clone(),
            last: self.last.clone(),
        }
    }
}

fn block_on<F: std::future::Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("a runtime")
        .block_on(future)
}

/// A node that appends its name to `log` after `delay_ms`.
fn log_after(name: &'static str, delay_ms: u64) -> impl agentstate_graph::Node<Flow> {
    move |_: Arc<Flow>, _: Context| async move {
        tokio::time::sleep(Duration::from_millis(delay_ms)).await;
        Ok::<_, Infallible>(FlowUpdate::default().log(vec![name.to_owned()]))
    }
}

fn log(name: &'static str) -> impl agentstate_graph::Node<Flow> {
    log_after(name, 0)
}

#[derive(Debug)]
struct Boom;
impl std::fmt::Display for Boom {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("boom")
    }
}
impl std::error::Error for Boom {}

#[test]
fn static_edges_run_in_order_and_conditional_edges_read_the_merged_state() {
    let graph = Graph::builder()
        .node("a", |s: Arc<Flow>, _: Context| async move {
            Ok::<_, Infallible>(FlowUpdate::default().n(s.n + 1).log(vec!["a".into()]))
        })
        .node("b", log("b"))
        .entry("a")
        .edge("b", "a")
        // After a's update merged: n is already 1 on the first pass.
        .route(
            "a",
            |s: &Flow| if s.n >= 2 { END.into() } else { "b".into() },
        )
        .build()
        .unwrap();
    let state = block_on(graph.invoke(Flow::default())).unwrap();
    assert_eq!(state.log, ["a", "b", "a"]);
    assert_eq!(state.n, 2);
}

#[test]
fn parallel_nodes_merge_in_node_order_not_completion_order_and_a_join_runs_once() {
    CLONES.set(0);
    let graph = Graph::builder()
        .node("start", log("start"))
        .node("slow", log_after("slow", 30))
        .node("fast", log_after("fast", 0))
        .node("join", log("join"))
        .entry("start")
        .edges("start", ["slow", "fast"])
        .edge("slow", "join")
        .edge("fast", "join")
        .edge("join", END)
        .build()
        .unwrap();
    let state = block_on(graph.invoke(Flow::default())).unwrap();
    assert_eq!(state.log, ["start", "slow", "fast", "join"]);
    assert_eq!(CLONES.get(), 0, "no step copied the state");
}

#[test]
fn two_branches_writing_a_plain_field_is_an_error_naming_both_and_nothing_merges() {
    let write = |who: &'static str| {
        move |_: Arc<Flow>, _: Context| async move {
            Ok::<_, Infallible>(FlowUpdate::default().last(who).log(vec![who.to_owned()]))
        }
    };
    let graph = Graph::builder()
        .node("start", log("start"))
        .node("left", write("left"))
        .node("middle", log("middle"))
        .node("right", write("right"))
        .entry("start")
        .edges("start", ["left", "middle", "right"])
        .edge("left", END)
        .edge("middle", END)
        .edge("right", END)
        .build()
        .unwrap();
    let err = block_on(graph.invoke(Flow::default())).unwrap_err();
    assert_eq!(err.category(), "state_validation_error");
    assert!(
        matches!(err.kind(), RunErrorKind::ConcurrentWrite { field, first, second, .. }
            if field == "last" && first == "left" && second == "right"),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "field `last` was written by nodes `left` and `right` in step 2, and its reducer keeps one value; give it a reducer that combines writes (append, merge, add_messages, ...) or write it from one branch"
    );
    assert_eq!(err.state().log, ["start"], "no branch's update is merged");
    assert_eq!(err.step(), 2);
}

#[test]
fn a_node_error_stops_the_run_with_its_source_and_the_state_before_the_step() {
    let graph = Graph::builder()
        .node("a", log("a"))
        .node("b", |_: Arc<Flow>, _: Context| async move {
            Err::<FlowUpdate, _>(Boom)
        })
        .node("c", log("c"))
        .entry("a")
        .edge("a", "b")
        .edge("b", "c")
        .edge("c", END)
        .build()
        .unwrap();
    let err = block_on(graph.invoke(Flow::default())).unwrap_err();
    assert_eq!(err.category(), "node_exception");
    assert_eq!(err.node(), Some("b"));
    assert_eq!(err.to_string(), "node `b` failed in step 2: boom");
    let source = std::error::Error::source(&err).expect("the node's error");
    assert!(source.downcast_ref::<Boom>().is_some());
    assert_eq!(err.into_state().log, ["a"]);
}

/// A node's panic (in a run a node makes too) fails the run in memory with `run_panicked`, naming the
/// node and the panic's message, the state before the step kept; the caller goes on.
#[test]
fn a_panicking_node_fails_the_run_with_run_panicked() {
    let inner = Graph::builder()
        .node("deep", |_: Arc<Flow>, _: Context| async move {
            if true {
                panic!("deep gave up: {}", 7);
            }
            Ok::<_, Infallible>(FlowUpdate::default())
        })
        .entry("deep")
        .edge("deep", END)
        .build()
        .unwrap();
    let graph = Graph::builder()
        .node("a", log("a"))
        .node(
            "b",
            |_: Arc<Flow>, _: Context| -> std::future::Ready<Result<FlowUpdate, Infallible>> {
                panic!("b cannot start")
            },
        )
        .node("sub", move |s: Arc<Flow>, _: Context| {
            let inner = inner.clone();
            async move {
                inner.invoke(Flow::clone(&s)).await?;
                Ok::<_, agentstate_graph::BoxError>(FlowUpdate::default())
            }
        })
        .entry("a")
        .route(
            "a",
            |s: &Flow| if s.n == 0 { "b".into() } else { "sub".into() },
        )
        .edge("b", END)
        .edge("sub", END)
        .build()
        .unwrap();
    let err = block_on(graph.invoke(Flow::default())).unwrap_err();
    assert_eq!(err.category(), "run_panicked");
    assert_eq!(err.node(), Some("b"));
    assert_eq!(
        err.to_string(),
        "node `b` panicked in step 2: b cannot start"
    );
    assert_eq!(err.into_state().log, ["a"]);

    let err = block_on(graph.invoke(Flow {
        n: 1,
        ..Flow::default()
    }))
    .unwrap_err();
    assert_eq!(err.category(), "run_panicked");
    assert_eq!(
        err.to_string(),
        "node `sub` failed in step 2: node `deep` panicked in step 1: deep gave up: 7",
        "the inner run's panic is the node's error; the outer run's category is found in its chain"
    );
}

#[test]
/// A step whose edge fails merges nothing, as LangGraph (where an edge is part of its node's
/// task) and the runner's docs say: the error carries the state before the step.
fn edge_and_routing_errors_carry_the_state_before_the_step() {
    let failing = Graph::builder()
        .node("a", log("a"))
        .entry("a")
        .try_route("a", |_: &Flow| {
            Err::<agentstate_graph::Routes<&str>, _>(Boom)
        })
        .build()
        .unwrap();
    let err = block_on(failing.invoke(Flow::default())).unwrap_err();
    assert_eq!(err.category(), "edge_exception");
    assert!(err.state().log.is_empty(), "{:?}", err.state().log);
    assert!(std::error::Error::source(&err).is_some());

    let lost = Graph::builder()
        .node("a", log("a"))
        .entry("a")
        .route("a", |_: &Flow| "ghost".into())
        .build()
        .unwrap();
    let err = block_on(lost.invoke(Flow::default())).unwrap_err();
    assert_eq!(err.category(), "routing_error");
    assert_eq!(
        err.to_string(),
        "the conditional edge from node `a` routed to `ghost` in step 1, which is neither a node of the graph nor END"
    );
    assert!(err.state().log.is_empty(), "{:?}", err.state().log);

    // A declared target set: a node outside it is a routing error even though it exists.
    let declared = Graph::builder()
        .node("a", log("a"))
        .node("b", log("b"))
        .entry("a")
        .route_to("a", [END], |_: &Flow| "b".into())
        .edge("b", END)
        .build();
    assert_eq!(declared.unwrap_err().category(), "unreachable_node");
}

#[test]
fn a_reducer_error_names_the_field_the_reducer_and_the_node() {
    fn positive(current: &i64, update: i64) -> Result<i64, String> {
        if update < 0 {
            return Err(format!("{update} is negative"));
        }
        Ok(current + update)
    }
    #[derive(
        AgentState, Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize,
    )]
    struct Items {
        #[reducer(with = positive)]
        items: i64,
    }
    let graph = Graph::builder()
        .node("bad", |_: Arc<Items>, _: Context| async move {
            Ok::<_, Infallible>(ItemsUpdate::default().items(-1))
        })
        .entry("bad")
        .edge("bad", END)
        .build()
        .unwrap();
    let err = block_on(graph.invoke(Items::default())).unwrap_err();
    assert_eq!(err.category(), "reducer_error");
    assert_eq!(err.node(), Some("bad"));
    let RunErrorKind::Merge { error, .. } = err.kind() else {
        panic!("{err:?}")
    };
    assert_eq!(error.field(), Some("items"));
    assert!(
        error.to_string().contains("positive") && error.to_string().contains("-1 is negative"),
        "{error}"
    );
}

#[test]
fn the_recursion_limit_follows_langgraph() {
    // A loop of n steps: `a` counts and routes back until n reaches `steps`.
    let looping = |steps: u32| {
        Graph::builder()
            .node("a", |s: Arc<Flow>, _: Context| async move {
                Ok::<_, Infallible>(FlowUpdate::default().n(s.n + 1))
            })
            .entry("a")
            .route(
                "a",
                move |s: &Flow| if s.n >= steps { END.into() } else { "a".into() },
            )
            .recursion_limit(5)
            .build()
            .unwrap()
    };
    // 4 steps (limit - 1) succeed.
    assert_eq!(block_on(looping(4).invoke(Flow::default())).unwrap().n, 4);
    // 5 steps or more: 5 run and merge, then the error.
    for steps in [5, 50] {
        let err = block_on(looping(steps).invoke(Flow::default())).unwrap_err();
        assert_eq!(err.category(), "recursion_limit");
        assert_eq!(err.state().n, 5);
        assert!(
            err.to_string().starts_with(
                "the run reached its recursion limit of 5 steps; the last step ran `a`"
            ),
            "{err}"
        );
    }
    // A run's own limit overrides the graph's.
    let config = RunConfig {
        recursion_limit: Some(100),
        ..RunConfig::default()
    };
    assert_eq!(
        block_on(looping(50).invoke_with(Flow::default(), config))
            .unwrap()
            .n,
        50
    );
    assert_eq!(agentstate_graph::DEFAULT_RECURSION_LIMIT, 25);
}

#[test]
fn building_checks_the_graph_with_openarmature_categories() {
    let category = |b: agentstate_graph::GraphBuilder<Flow, &'static str>| match b.build() {
        Ok(_) => "built".to_owned(),
        Err(e) => e.category().to_owned(),
    };
    let base = || Graph::<Flow>::builder().node("a", log("a"));
    assert_eq!(category(base().edge("a", END)), "no_declared_entry");
    assert_eq!(
        category(base().entry("a").edge("a", "ghost")),
        "dangling_edge"
    );
    assert_eq!(
        category(base().entry("ghost").edge("a", END)),
        "dangling_edge"
    );
    assert_eq!(category(base().entry("a")), "dangling_edge"); // no outgoing edge
    assert_eq!(
        category(
            base()
                .node("b", log("b"))
                .entry("a")
                .edge("a", END)
                .edge("b", END)
        ),
        "unreachable_node"
    );
    assert_eq!(
        category(
            base()
                .node("b", log("b"))
                .entry("a")
                .edge("a", "b")
                .edge("a", END)
                .edge("b", END)
        ),
        "multiple_outgoing_edges"
    );
    assert_eq!(
        category(base().node("a", log("a2")).entry("a").edge("a", END)),
        "duplicate_node"
    );
    assert_eq!(category(base().entry("a").edge("a", END)), "built");
    let err = base()
        .entry("a")
        .edge("a", "b_typo")
        .node("b_typ", log("b"))
        .edge("b_typ", END)
        .build()
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "the edge from `a` names node `b_typo`, which the graph does not have; did you mean `b_typ`?"
    );
    assert!(matches!(err, CompileError::DanglingEdge { .. }));
}

node_names! {
    /// Typed node names.
    enum Step { Think = "think", Act = "act", Review = "review" }
}

#[test]
fn enum_names_route_without_strings_and_every_variant_needs_a_node() {
    let act = |_: Arc<Flow>, _: Context| async move {
        Ok::<_, Infallible>(FlowUpdate::default().log(vec![Step::Act.name().to_owned()]))
    };
    let graph = Graph::builder()
        .node(Step::Think, |s: Arc<Flow>, _: Context| async move {
            Ok::<_, Infallible>(FlowUpdate::default().n(s.n + 1).log(vec!["think".into()]))
        })
        .node(Step::Act, act)
        .node(Step::Review, log("review"))
        .entry(Step::Think)
        .route(Step::Think, |s: &Flow| match s.n {
            1 => Step::Act.into(),
            2 => Step::Review.into(),
            _ => END.into(),
        })
        .edge(Step::Act, Step::Think)
        .edge(Step::Review, Step::Think)
        .build()
        .unwrap();
    assert_eq!(graph.entry(), &Step::Think);
    let state = block_on(graph.invoke(Flow::default())).unwrap();
    assert_eq!(state.log, ["think", "act", "think", "review", "think"]);

    let missing = Graph::builder()
        .node(Step::Think, log("think"))
        .node(Step::Act, log("act"))
        .entry(Step::Think)
        .edge(Step::Think, Step::Act)
        .edge(Step::Act, END)
        .build()
        .unwrap_err();
    assert_eq!(missing.category(), "dangling_edge");
    assert_eq!(
        missing.to_string(),
        "the node enum `Step` names node `review`, which the graph does not have"
    );
}

#[test]
fn dropping_a_run_cancels_it_without_a_partial_merge() {
    let started = Arc::new(AtomicUsize::new(0));
    let count = Arc::clone(&started);
    let graph = Graph::builder()
        .node("a", log("a"))
        .node("fast", log("fast"))
        .node("hang", move |_: Arc<Flow>, _: Context| {
            let count = Arc::clone(&count);
            async move {
                count.fetch_add(1, Ordering::SeqCst);
                std::future::pending::<()>().await;
                Ok::<_, Infallible>(FlowUpdate::default())
            }
        })
        .entry("a")
        .edges("a", ["fast", "hang"])
        .edge("fast", END)
        .edge("hang", END)
        .build()
        .unwrap();
    let mut events = Vec::new();
    block_on(async {
        let mut stream = graph.stream(Flow::default());
        let timeout = tokio::time::sleep(Duration::from_millis(20));
        tokio::pin!(timeout);
        loop {
            tokio::select! {
                event = stream.next() => events.push(event.expect("the run goes on").kind()),
                () = &mut timeout => break,
            }
        }
    });
    assert_eq!(started.load(Ordering::SeqCst), 1);
    // The second step never finished: `fast` finished, but nothing of its step merged (the
    // steps that finished: the start, and `a`'s).
    assert_eq!(events.iter().filter(|k| **k == "step_finished").count(), 2);
    assert!(events.contains(&"node_finished"));
}

#[test]
fn a_streamed_run_reports_steps_updates_and_emissions_in_order() {
    CLONES.set(0);
    let graph = Graph::builder()
        .node("a", |_: Arc<Flow>, cx: Context| async move {
            cx.custom("progress", serde_json::json!({"done": 1}));
            Ok::<_, Infallible>(FlowUpdate::default().log(vec!["a".into()]))
        })
        .node("b", log("b"))
        .entry("a")
        .edge("a", "b")
        .edge("b", END)
        .build()
        .unwrap();
    let mut kinds = Vec::new();
    let mut states = Vec::new();
    let mut last = None;
    block_on(async {
        let mut stream = graph.stream(Flow::default());
        while let Some(event) = stream.next().await {
            kinds.push(event.kind());
            match event {
                Event::StepFinished { record, state } => states.push((
                    record.step,
                    record.nodes.to_vec(),
                    record.next.to_vec(),
                    state.log.clone(),
                )),
                Event::NodeFinished { node, update, .. } => {
                    assert_eq!(update.expect("an update").log, Some(vec![node.to_owned()]))
                }
                Event::Emitted { node, emitted, .. } => {
                    assert_eq!(&*node, "a");
                    assert_eq!(
                        *emitted,
                        agentstate_graph::Emitted::Custom {
                            name: "progress".into(),
                            value: serde_json::json!({"done": 1})
                        }
                    );
                }
                Event::RunFinished { state } => last = Some(std::sync::Arc::unwrap_or_clone(state)),
                _ => {}
            }
        }
    });
    assert_eq!(
        kinds,
        [
            "run_started",
            "step_finished",
            "step_started",
            "node_started",
            "emitted",
            "node_finished",
            "step_finished",
            "step_started",
            "node_started",
            "node_finished",
            "step_finished",
            "run_finished"
        ]
    );
    // The state the run starts from first (LangGraph's first `values`): step 0, no nodes, the
    // entry next.
    assert_eq!(
        states,
        [
            (0, vec![], vec!["a"], vec![]),
            (1, vec!["a"], vec!["b"], vec!["a".to_owned()]),
            (2, vec!["b"], vec![], vec!["a".to_owned(), "b".to_owned()])
        ]
    );
    assert_eq!(last.expect("a final state").log, ["a", "b"]);
    assert_eq!(CLONES.get(), 0, "streaming copied no state");
}

#[test]
fn a_filtered_stream_builds_only_the_events_asked_for() {
    use agentstate_graph::EventFilter;
    let streamed = Arc::new(AtomicUsize::new(0));
    let seen = Arc::clone(&streamed);
    let graph = Graph::builder()
        .node("a", move |_: Arc<Flow>, cx: Context| {
            if cx.is_streamed() {
                seen.fetch_add(1, Ordering::SeqCst);
            }
            cx.custom("dropped", serde_json::json!(1));
            async { Ok::<_, Infallible>(FlowUpdate::default().log(vec!["a".into()])) }
        })
        .node("b", log("b"))
        .entry("a")
        .edge("a", "b")
        .edge("b", END)
        .build()
        .unwrap();
    let kinds = |filter: EventFilter| {
        block_on(async {
            let stream = graph.stream(Flow::default()).only(filter);
            stream.map(|e| e.kind()).collect::<Vec<_>>().await
        })
    };
    assert_eq!(
        kinds(EventFilter::STEP_FINISHED),
        [
            "run_started",
            "step_finished",
            "step_finished",
            "step_finished",
            "run_finished"
        ]
    );
    assert_eq!(
        streamed.load(Ordering::SeqCst),
        0,
        "without EMITTED a node is told it is not streamed"
    );
    assert_eq!(
        kinds(EventFilter::NODES | EventFilter::EMITTED),
        [
            "run_started",
            "node_started",
            "emitted",
            "node_finished",
            "node_started",
            "node_finished",
            "run_finished"
        ]
    );
    assert_eq!(streamed.load(Ordering::SeqCst), 1);
    assert_eq!(
        kinds(EventFilter::STEP_STARTED),
        [
            "run_started",
            "step_started",
            "step_started",
            "run_finished"
        ]
    );
    assert_eq!(kinds(EventFilter::NONE), ["run_started", "run_finished"]);
}

#[test]
fn emissions_from_another_task_wake_the_stream_and_come_before_the_node_finishes() {
    let graph = Graph::builder()
        .node("worker", |_: Arc<Flow>, cx: Context| async move {
            // The emissions come from a task of the node's own, while the node waits.
            tokio::spawn(async move {
                for i in 0..3 {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                    cx.text_delta("m1", format!("part {i} "));
                }
            })
            .await
            .expect("the task ends");
            Ok::<_, Infallible>(FlowUpdate::default().last(Some("done".into())))
        })
        .entry("worker")
        .edge("worker", END)
        .build()
        .unwrap();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_time()
        .build()
        .unwrap();
    let events: Vec<Event<Flow, &str>> =
        runtime.block_on(async { graph.stream(Flow::default()).collect().await });
    let kinds: Vec<&str> = events.iter().map(Event::kind).collect();
    assert_eq!(
        kinds,
        [
            "run_started",
            "step_finished",
            "step_started",
            "node_started",
            "emitted",
            "emitted",
            "emitted",
            "node_finished",
            "step_finished",
            "run_finished"
        ]
    );
    let text: String = events
        .iter()
        .filter_map(|e| match e {
            Event::Emitted { emitted, .. } => match &**emitted {
                agentstate_graph::Emitted::TextDelta { delta, .. } => Some(delta.as_str()),
                _ => None,
            },
            _ => None,
        })
        .collect();
    assert_eq!(text, "part 0 part 1 part 2 ");
}

#[test]
fn a_compiled_graph_is_shared_by_concurrent_runs() {
    fn assert_send_sync<T: Send + Sync + Clone>(_: &T) {}
    let graph = Graph::builder()
        .node("a", |s: Arc<Flow>, _: Context| async move {
            tokio::time::sleep(Duration::from_millis(5)).await;
            Ok::<_, Infallible>(FlowUpdate::default().n(s.n * 2))
        })
        .entry("a")
        .edge("a", END)
        .build()
        .unwrap();
    assert_send_sync(&graph);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_time()
        .build()
        .unwrap();
    let results = runtime.block_on(async {
        let runs: Vec<_> = (1..=4)
            .map(|n| {
                let graph = graph.clone();
                tokio::spawn(async move {
                    graph
                        .invoke(Flow {
                            n,
                            ..Flow::default()
                        })
                        .await
                        .map(|s| s.n)
                        .map_err(|e| e.to_string())
                })
            })
            .collect();
        let mut out = Vec::new();
        for run in runs {
            out.push(run.await.unwrap().unwrap());
        }
        out
    });
    assert_eq!(results, [2, 4, 6, 8]);
}
