//! Retry and timeout layers.

use agentstate::AgentState;
use agentstate_graph::layer::{Backoff, Elapsed, NodeExt, RetryPolicy};
use agentstate_graph::{BoxError, Context, Graph, RunErrorKind, END};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

#[derive(AgentState, Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
struct Call {
    budget: u32,
    answer: u32,
}

fn block_on<F: std::future::Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("a runtime")
        .block_on(future)
}

/// A node failing its first `failures` calls (with "transient" or "fatal"), counting calls.
fn flaky(
    failures: u32,
    message: &'static str,
    calls: Arc<AtomicU32>,
) -> impl agentstate_graph::Node<Call> {
    move |_: Arc<Call>, _: Context| {
        let call = calls.fetch_add(1, Ordering::SeqCst);
        async move {
            if call < failures {
                return Err(BoxError::from(message));
            }
            Ok(CallUpdate::default().answer(call + 1))
        }
    }
}

fn one_node(node: impl agentstate_graph::Node<Call>) -> Graph<Call> {
    Graph::builder()
        .node("model", node)
        .entry("model")
        .edge("model", END)
        .build()
        .unwrap()
}

fn no_wait(attempts: u32) -> RetryPolicy<Call> {
    RetryPolicy::new(attempts).backoff_constant(Duration::ZERO)
}

#[test]
fn a_retried_node_succeeds_on_a_later_attempt() {
    let calls = Arc::new(AtomicU32::new(0));
    let graph = one_node(flaky(1, "transient", Arc::clone(&calls)).retry(no_wait(3)));
    assert_eq!(block_on(graph.invoke(Call::default())).unwrap().answer, 2);
    assert_eq!(calls.load(Ordering::SeqCst), 2);
}

#[test]
fn exhausted_retries_report_the_last_error() {
    let calls = Arc::new(AtomicU32::new(0));
    let graph = one_node(flaky(10, "transient", Arc::clone(&calls)).retry(no_wait(3)));
    let err = block_on(graph.invoke(Call::default())).unwrap_err();
    assert_eq!(err.category(), "node_exception");
    assert_eq!(err.to_string(), "node `model` failed in step 1: transient");
    assert_eq!(calls.load(Ordering::SeqCst), 3);
}

#[test]
fn the_classifier_sees_the_error_and_the_state() {
    let policy = no_wait(5).retry_if(|error: &BoxError, state: &Call| {
        error.to_string() == "transient" && state.budget > 0
    });
    for (message, budget, calls_made) in [("fatal", 9, 1), ("transient", 0, 1), ("transient", 9, 2)]
    {
        let calls = Arc::new(AtomicU32::new(0));
        let graph = one_node(flaky(1, message, Arc::clone(&calls)).retry(policy.clone()));
        let _ = block_on(graph.invoke(Call {
            budget,
            ..Call::default()
        }));
        assert_eq!(
            calls.load(Ordering::SeqCst),
            calls_made,
            "{message} with budget {budget}"
        );
    }
}

#[test]
fn a_timeout_fails_the_node_and_each_attempt_has_its_own() {
    let slow = |_: Arc<Call>, _: Context| async {
        tokio::time::sleep(Duration::from_secs(3600)).await;
        Ok::<_, BoxError>(CallUpdate::default())
    };
    let graph = one_node(slow.timeout(Duration::from_millis(5)));
    let err = block_on(graph.invoke(Call::default())).unwrap_err();
    let RunErrorKind::Node { error, .. } = err.kind() else {
        panic!("{err:?}")
    };
    assert_eq!(
        error.downcast_ref::<Elapsed>(),
        Some(&Elapsed {
            after: Duration::from_millis(5)
        })
    );
    assert_eq!(
        err.to_string(),
        "node `model` failed in step 1: did not finish within its timeout of 5ms"
    );

    // The first attempt hangs, the second answers: the timeout of the first lets it retry.
    let calls = Arc::new(AtomicU32::new(0));
    let count = Arc::clone(&calls);
    let hangs_once = move |_: Arc<Call>, _: Context| {
        let call = count.fetch_add(1, Ordering::SeqCst);
        async move {
            if call == 0 {
                tokio::time::sleep(Duration::from_secs(3600)).await;
            }
            Ok::<_, BoxError>(CallUpdate::default().answer(7))
        }
    };
    let graph = one_node(
        hangs_once
            .timeout(Duration::from_millis(5))
            .retry(no_wait(2)),
    );
    assert_eq!(block_on(graph.invoke(Call::default())).unwrap().answer, 7);
}

#[test]
fn backoffs_grow_to_their_cap_and_jitter_stays_below() {
    let exponential = Backoff::Exponential {
        base: Duration::from_millis(100),
        cap: Duration::from_secs(1),
        jitter: false,
    };
    let delays: Vec<u128> = (0..6).map(|a| exponential.delay(a).as_millis()).collect();
    assert_eq!(delays, [100, 200, 400, 800, 1000, 1000]);
    assert_eq!(exponential.delay(200), Duration::from_secs(1));
    let jittered = Backoff::Exponential {
        base: Duration::from_millis(100),
        cap: Duration::from_secs(1),
        jitter: true,
    };
    let draws: Vec<Duration> = (0..50).map(|_| jittered.delay(3)).collect();
    assert!(draws.iter().all(|d| *d <= Duration::from_millis(800)));
    assert!(draws.iter().any(|d| *d != draws[0]), "jitter varies");
}
