//! Fan-out, parallel branches and dynamic fan-out (`Dispatch`): results in input order, error
//! policies, the empty case, the concurrency limit, cancellation.

use agentstate::AgentState;
use agentstate_graph::parallel::{FanOut, FanOutError, OnEmpty, ParallelBranches};
use agentstate_graph::{Context, Dispatch, Graph, RunErrorKind, Sends, END};
use std::convert::Infallible;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

#[derive(AgentState, Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
struct Job {
    x: u64,
    result: u64,
}

#[derive(AgentState, Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
struct Batch {
    items: Vec<u64>,
    #[reducer(append)]
    results: Vec<u64>,
    #[reducer(append)]
    errors: Vec<String>,
    winner: String,
}

fn block_on<F: std::future::Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("a runtime")
        .block_on(future)
}

#[derive(Debug)]
struct Odd(u64);
impl std::fmt::Display for Odd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} is odd", self.0)
    }
}
impl std::error::Error for Odd {}

/// A job that sleeps `10 - x` ms (so later items finish first), fails on odd `x` when
/// `fail_odd`, and doubles `x`; `live` counts the jobs running, `peak` the most at once.
fn worker(fail_odd: bool, live: Arc<AtomicUsize>, peak: Arc<AtomicUsize>) -> Graph<Job> {
    Graph::builder()
        .node("work", move |s: Arc<Job>, _: Context| {
            let (live, peak) = (Arc::clone(&live), Arc::clone(&peak));
            async move {
                let now = live.fetch_add(1, Ordering::SeqCst) + 1;
                peak.fetch_max(now, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(10 - s.x.min(10))).await;
                live.fetch_sub(1, Ordering::SeqCst);
                if fail_odd && s.x % 2 == 1 {
                    return Err(Odd(s.x));
                }
                Ok(JobUpdate::default().result(s.x * 2))
            }
        })
        .entry("work")
        .edge("work", END)
        .build()
        .unwrap()
}

fn fan_out(child: Graph<Job>) -> FanOut<Batch, Job, &'static str> {
    FanOut::new(
        child,
        |b: &Batch| b.items.iter().map(|&x| Job { x, result: 0 }).collect(),
        |done: Vec<Job>| {
            BatchUpdate::default().results(done.into_iter().map(|j| j.result).collect::<Vec<_>>())
        },
    )
}

fn one_node(node: impl agentstate_graph::Node<Batch>) -> Graph<Batch> {
    Graph::builder()
        .node("process", node)
        .entry("process")
        .edge("process", END)
        .build()
        .unwrap()
}

fn batch(items: &[u64]) -> Batch {
    Batch {
        items: items.to_vec(),
        ..Batch::default()
    }
}

#[test]
fn a_fan_out_collects_in_item_order_within_its_concurrency_limit() {
    let (live, peak) = (Arc::default(), Arc::new(AtomicUsize::new(0)));
    let graph = one_node(fan_out(worker(false, live, Arc::clone(&peak))).concurrency(Some(3)));
    let state = block_on(graph.invoke(batch(&[1, 2, 3, 4, 5, 6, 7, 8]))).unwrap();
    assert_eq!(state.results, [2, 4, 6, 8, 10, 12, 14, 16]);
    assert_eq!(peak.load(Ordering::SeqCst), 3);
}

#[test]
fn a_failing_instance_fails_the_fan_out_and_nothing_merges() {
    let graph = one_node(fan_out(worker(true, Arc::default(), Arc::default())));
    let err = block_on(graph.invoke(batch(&[2, 3, 4]))).unwrap_err();
    assert_eq!(err.category(), "node_exception");
    assert_eq!(err.node(), Some("process"));
    assert!(err.state().results.is_empty());
    let RunErrorKind::Node { error, .. } = err.kind() else {
        panic!("{err:?}")
    };
    let fan_out = error
        .downcast_ref::<FanOutError>()
        .expect("a fan-out error");
    assert_eq!(fan_out.category(), "node_exception");
    assert!(
        fan_out
            .to_string()
            .starts_with("fan-out instance 1 failed: node `work` failed in step 1: 3 is odd"),
        "{fan_out}"
    );
}

#[test]
fn collecting_errors_keeps_the_successes_in_order_and_reports_the_failures() {
    let node = fan_out(worker(true, Arc::default(), Arc::default())).collect_errors(|failed| {
        BatchUpdate::default().errors(
            failed
                .into_iter()
                .map(|f| format!("{}: {}", f.index, f.error.category()))
                .collect::<Vec<_>>(),
        )
    });
    let state = block_on(one_node(node).invoke(batch(&[1, 2, 3, 4]))).unwrap();
    assert_eq!(state.results, [4, 8]);
    assert_eq!(state.errors, ["0: node_exception", "2: node_exception"]);
}

#[test]
fn an_empty_fan_out_raises_unless_told_it_may_be_empty() {
    let graph = one_node(fan_out(worker(false, Arc::default(), Arc::default())));
    let err = block_on(graph.invoke(batch(&[]))).unwrap_err();
    let RunErrorKind::Node { error, .. } = err.kind() else {
        panic!("{err:?}")
    };
    assert_eq!(
        error.downcast_ref::<FanOutError>().unwrap().category(),
        "fan_out_empty"
    );

    let noop =
        one_node(fan_out(worker(false, Arc::default(), Arc::default())).on_empty(OnEmpty::Noop));
    assert!(block_on(noop.invoke(batch(&[])))
        .unwrap()
        .results
        .is_empty());
}

#[test]
fn parallel_branches_merge_in_branch_order_and_the_last_listed_branch_wins_a_plain_field() {
    let branch = |name: &'static str, delay: u64| {
        move |_: Arc<Batch>, _: Context| async move {
            tokio::time::sleep(Duration::from_millis(delay)).await;
            Ok::<_, Infallible>(
                BatchUpdate::default()
                    .errors(vec![name.to_owned()])
                    .winner(name),
            )
        }
    };
    let node = ParallelBranches::new()
        .branch("slow", branch("slow", 20))
        .branch("fast", branch("fast", 0));
    let state = block_on(one_node(node).invoke(Batch::default())).unwrap();
    assert_eq!(state.errors, ["slow", "fast"]);
    assert_eq!(state.winner, "fast");
}

#[test]
fn a_failing_branch_cancels_the_others_unless_errors_are_collected() {
    let hung = Arc::new(AtomicUsize::new(0));
    let finished = Arc::clone(&hung);
    let never = move |_: Arc<Batch>, _: Context| {
        let finished = Arc::clone(&finished);
        async move {
            tokio::time::sleep(Duration::from_secs(3600)).await;
            finished.fetch_add(1, Ordering::SeqCst);
            Ok::<_, Infallible>(BatchUpdate::default())
        }
    };
    let failing = |_: Arc<Batch>, _: Context| async { Err::<BatchUpdate, _>(Odd(1)) };
    let node = ParallelBranches::new()
        .branch("never", never)
        .branch("failing", failing);
    let err = block_on(one_node(node).invoke(Batch::default())).unwrap_err();
    assert_eq!(
        err.to_string(),
        "node `process` failed in step 1: branch `failing` failed: 1 is odd"
    );
    assert_eq!(hung.load(Ordering::SeqCst), 0);

    let ok = |_: Arc<Batch>, _: Context| async {
        Ok::<_, Infallible>(BatchUpdate::default().results(vec![7]))
    };
    let node = ParallelBranches::new()
        .branch("failing", failing)
        .branch("ok", ok)
        .collect_errors(|failed| {
            BatchUpdate::default().errors(
                failed
                    .into_iter()
                    .map(|f| format!("{}: {}", f.branch, f.error))
                    .collect::<Vec<_>>(),
            )
        });
    let state = block_on(one_node(node).invoke(Batch::default())).unwrap();
    assert_eq!(
        (state.results, state.errors),
        (vec![7], vec!["failing: 1 is odd".to_owned()])
    );
}

#[test]
fn dispatch_runs_a_node_per_task_with_its_own_input_in_the_order_returned() {
    let graph = Graph::builder()
        .node("split", |_: Arc<Batch>, _: Context| async {
            Ok::<_, Infallible>(())
        })
        .node("square", |s: Arc<Batch>, _: Context| async move {
            let x = s.items[0];
            tokio::time::sleep(Duration::from_millis(10 - x)).await;
            Ok::<_, Infallible>(BatchUpdate::default().results(vec![x * x]))
        })
        .node("done", |s: Arc<Batch>, _: Context| async move {
            Ok::<_, Infallible>(
                BatchUpdate::default().errors(vec![format!("{} results", s.results.len())]),
            )
        })
        .entry("split")
        .route_send("split", |s: &Batch| {
            s.items
                .iter()
                .map(|&x| Dispatch::to("square", batch(&[x])))
                .collect()
        })
        .edge("square", "done")
        .edge("done", END)
        .build()
        .unwrap();
    let state = block_on(graph.invoke(batch(&[1, 2, 3]))).unwrap();
    assert_eq!(state.results, [1, 4, 9]);
    // `done` ran once, after every task merged.
    assert_eq!(state.errors, ["3 results"]);

    let lost = Graph::builder()
        .node("split", |_: Arc<Batch>, _: Context| async {
            Ok::<_, Infallible>(())
        })
        .entry("split")
        .route_send("split", |_: &Batch| {
            vec![Dispatch::to("ghost", Batch::default())]
        })
        .build()
        .unwrap();
    assert_eq!(
        block_on(lost.invoke(Batch::default()))
            .unwrap_err()
            .category(),
        "routing_error"
    );
}

#[test]
fn a_conditional_branch_runs_only_when_its_condition_holds() {
    let hit = |name: &'static str| {
        move |_: Arc<Batch>, _: Context| async move {
            Ok::<_, Infallible>(BatchUpdate::default().errors(vec![name.to_owned()]))
        }
    };
    let node = ParallelBranches::new()
        .branch_when("vector", |b: &Batch| !b.items.is_empty(), hit("vector"))
        .branch("fts", hit("fts"));
    let graph = one_node(node);
    assert_eq!(
        block_on(graph.invoke(Batch::default())).unwrap().errors,
        ["fts"]
    );
    assert_eq!(
        block_on(graph.invoke(batch(&[1]))).unwrap().errors,
        ["vector", "fts"]
    );
}

#[test]
fn the_concurrency_limit_can_come_from_the_state_and_instances_retry_whole() {
    let (live, peak) = (Arc::default(), Arc::new(AtomicUsize::new(0)));
    let node = fan_out(worker(false, live, Arc::clone(&peak)))
        .concurrency_from(|b: &Batch| Some(b.items.len() / 2));
    let state = block_on(one_node(node).invoke(batch(&[2, 4, 6, 8]))).unwrap();
    assert_eq!(state.results, [4, 8, 12, 16]);
    assert_eq!(peak.load(Ordering::SeqCst), 2);

    // Each instance fails its first run; retried whole, all succeed.
    let runs = Arc::new(AtomicUsize::new(0));
    let count = Arc::clone(&runs);
    let seen = Arc::new(std::sync::Mutex::new(std::collections::HashSet::new()));
    let once = Graph::builder()
        .node("work", move |s: Arc<Job>, _: Context| {
            count.fetch_add(1, Ordering::SeqCst);
            let first = seen.lock().unwrap().insert(s.x);
            async move {
                if first {
                    return Err(Odd(s.x));
                }
                Ok(JobUpdate::default().result(s.x))
            }
        })
        .entry("work")
        .edge("work", END)
        .build()
        .unwrap();
    let node = fan_out(once).retry_instances(
        agentstate_graph::layer::RetryPolicy::new(2).backoff_constant(Duration::ZERO),
    );
    let state = block_on(one_node(node).invoke(batch(&[1, 2, 3]))).unwrap();
    assert_eq!(state.results, [1, 2, 3]);
    assert_eq!(runs.load(Ordering::SeqCst), 6);
}

#[test]
fn an_interrupt_outside_a_durable_run_says_it_needs_one() {
    let graph = Graph::builder()
        .node("approve", |_: Arc<Batch>, cx: Context| async move {
            let answer = cx.interrupt(serde_json::json!({"refund": 30}))?;
            Ok::<_, agentstate_graph::BoxError>(BatchUpdate::default().winner(answer.to_string()))
        })
        .entry("approve")
        .edge("approve", END)
        .build()
        .unwrap();
    let config = agentstate_graph::RunConfig {
        run_id: Some("run-1".to_owned()),
        ..Default::default()
    };
    let error = block_on(graph.invoke_with(Batch::default(), config)).unwrap_err();
    assert_eq!(error.category(), "interrupt_outside_durable_run");
    assert_eq!(error.node(), Some("approve"));
    assert_eq!(
        error.to_string(),
        "node `approve` asked for an answer (interrupt `approve:1.0:0@run-1`) in step 1, but the run is not durable, so nothing can answer it (interrupt_outside_durable_run); run the graph durably, with `graph.durable(&store)` (feature `store`), to suspend the run and resume it with the answer"
    );

    // Inside a fan-out instance whose errors are collected: still the same answer (the
    // collecting fan-out cannot suspend, but neither could the run).
    let asking = Graph::builder()
        .node("ask", |s: Arc<Job>, cx: Context| async move {
            if s.x == 2 {
                cx.interrupt("two?")?;
            }
            Ok::<_, agentstate_graph::BoxError>(JobUpdate::default().result(s.x))
        })
        .entry("ask")
        .edge("ask", END)
        .build()
        .unwrap();
    let fan_out = FanOut::new(
        asking,
        |b: &Batch| b.items.iter().map(|&x| Job { x, result: 0 }).collect(),
        |done: Vec<Job>| {
            BatchUpdate::default().results(done.into_iter().map(|j| j.result).collect::<Vec<_>>())
        },
    )
    .collect_errors(|failed| {
        BatchUpdate::default().errors(vec![format!("{} failed", failed.len())])
    });
    let graph = Graph::builder()
        .node("process", fan_out)
        .entry("process")
        .edge("process", END)
        .build()
        .unwrap();
    let error = block_on(graph.invoke(batch(&[1, 2, 3]))).unwrap_err();
    assert_eq!(error.category(), "interrupt_outside_durable_run", "{error}");
    assert!(error.to_string().contains("interrupt `ask:"), "{error}");
}

/// A graph whose `split` sends each item to `square`, or falls back to `empty` when there is
/// none; `extra` names a plain target sent along with the tasks.
fn send_or_fall_back(
    extra: Option<&'static str>,
) -> Result<Graph<Batch>, agentstate_graph::CompileError> {
    let note = |text: &'static str| {
        move |_: Arc<Batch>, _: Context| async move {
            Ok::<_, Infallible>(BatchUpdate::default().errors(vec![text.to_owned()]))
        }
    };
    Graph::builder()
        .node("split", |_: Arc<Batch>, _: Context| async {
            Ok::<_, Infallible>(())
        })
        .node("square", |s: Arc<Batch>, _: Context| async move {
            Ok::<_, Infallible>(BatchUpdate::default().results(vec![s.items[0] * s.items[0]]))
        })
        .node("empty", note("nothing to square"))
        .node("audit", note("audited"))
        .entry("split")
        .route_send_to("split", ["square", "empty", "audit"], move |s: &Batch| {
            if s.items.is_empty() {
                return "empty".into();
            }
            let mut sends: agentstate_graph::Sends<_, _> = s
                .items
                .iter()
                .map(|&x| Dispatch::to("square", batch(&[x])))
                .collect();
            if let Some(extra) = extra {
                sends = sends.to(extra);
            }
            sends
        })
        .edge("square", END)
        .edge("empty", END)
        .edge("audit", END)
        .build()
}

#[test]
fn a_send_router_falls_back_to_a_node_when_there_is_nothing_to_send() {
    let graph = send_or_fall_back(None).unwrap();
    let state = block_on(graph.invoke(batch(&[2, 3]))).unwrap();
    assert_eq!((state.results, state.errors), (vec![4, 9], vec![]));
    let state = block_on(graph.invoke(batch(&[]))).unwrap();
    assert_eq!(state.results, Vec::<u64>::new());
    assert_eq!(state.errors, ["nothing to square"]);

    // Plain targets and tasks at once: the plain target's update merges first.
    let graph = send_or_fall_back(Some("audit")).unwrap();
    let mut order = Vec::new();
    let mut stream = graph.stream(batch(&[2]));
    block_on(async {
        use futures_util::StreamExt;
        while let Some(event) = stream.next().await {
            if let agentstate_graph::Event::StepFinished { record, .. } = event {
                order.push(record.nodes.to_vec());
            }
        }
    });
    // The run's start first (no node), then each step's nodes in merge order.
    assert_eq!(order, [vec![], vec!["split"], vec!["audit", "square"]]);

    // A target the router did not declare is a routing error, as a task's node or plain.
    let graph = send_or_fall_back(Some("split")).unwrap();
    let error = block_on(graph.invoke(batch(&[2]))).unwrap_err();
    assert_eq!(error.category(), "routing_error");
    assert_eq!(
        error.to_string(),
        "the conditional edge from node `split` routed to `split` in step 1, which is neither a node of the graph nor END"
    );
}

#[test]
fn a_send_router_s_declared_targets_are_checked_when_the_graph_is_built() {
    let noop = |_: Arc<Batch>, _: Context| async { Ok::<_, Infallible>(()) };
    let dangling = Graph::builder()
        .node("split", noop)
        .node("square", noop)
        .entry("split")
        .route_send_to("split", ["square", "sqare"], |_: &Batch| "square".into())
        .edge("square", END)
        .build()
        .unwrap_err();
    assert_eq!(dangling.category(), "dangling_edge");
    assert_eq!(
        dangling.to_string(),
        "the edge from `split` names node `sqare`, which the graph does not have; did you mean `square`?"
    );
    // Declared targets make reachability checkable (an undeclared router reaches anything).
    let unreachable = Graph::builder()
        .node("split", noop)
        .node("square", noop)
        .node("orphan", noop)
        .entry("split")
        .route_send_to("split", ["square"], |_: &Batch| Sends::new())
        .edge("square", END)
        .edge("orphan", END)
        .build()
        .unwrap_err();
    assert_eq!(unreachable.category(), "unreachable_node");
    // Nothing to send and no target: the branch ends.
    let ends = Graph::builder()
        .node("split", noop)
        .node("square", noop)
        .entry("split")
        .route_send_to("split", ["square"], |_: &Batch| Sends::new())
        .edge("square", END)
        .build()
        .unwrap();
    assert_eq!(block_on(ends.invoke(batch(&[1]))).unwrap(), batch(&[1]));
}
