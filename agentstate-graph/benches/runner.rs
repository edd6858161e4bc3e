//! The runner's own cost: per step on a large state, a linear run, a fan-out, and streaming.
//! See `benches/README.md` for the goals and the last results. Run with
//! `cargo bench -p agentstate-graph --bench runner`.

use agentstate::message::{Message, Role};
use agentstate::state::{AgentState, AgentStateUpdate};
use agentstate::State;
use agentstate_graph::parallel::FanOut;
use agentstate_graph::{Context, Graph, END};
use divan::{black_box, Bencher};
use futures_util::StreamExt;
use std::convert::Infallible;
use std::sync::Arc;

fn main() {
    divan::main();
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("a runtime")
}

/// The steps of the per-step benchmark.
const STEPS: u32 = 100;

/// An `AgentState` holding `n` messages.
fn conversation(n: usize) -> AgentState {
    let mut state = AgentState::default();
    let messages: Vec<Message> = (0..n)
        .map(|i| Message::text_message(format!("message {i}"), Role::User))
        .collect();
    state
        .merge(AgentStateUpdate::default().context(messages))
        .expect("the messages merge");
    state
}

/// A node that reads the state and changes nothing, looping `STEPS` times through a
/// conditional edge: what is timed is the runner (context, node call, barrier, routing).
fn looping() -> Graph<AgentState> {
    let counter = Arc::new(std::sync::atomic::AtomicU32::new(0));
    let seen = Arc::clone(&counter);
    Graph::builder()
        .node("think", move |s: Arc<AgentState>, cx: Context| {
            black_box(s.context.len());
            seen.store(cx.step() as u32, std::sync::atomic::Ordering::Relaxed);
            async { Ok::<_, Infallible>(()) }
        })
        .entry("think")
        .route("think", move |_: &AgentState| {
            if counter.load(std::sync::atomic::Ordering::Relaxed) >= STEPS {
                END.into()
            } else {
                "think".into()
            }
        })
        .recursion_limit(STEPS as usize + 1)
        .build()
        .expect("the graph builds")
}

/// 100 steps on a state of 10,000 messages; divide by 100 for one step's overhead.
#[divan::bench(sample_count = 200)]
fn steps_100_on_10k_messages(bencher: Bencher) {
    let graph = looping();
    let rt = runtime();
    let state = conversation(10_000);
    bencher
        .with_inputs(|| state.clone())
        .bench_local_values(|s| rt.block_on(graph.invoke(s)).expect("the run ends"));
}

/// The same run, streamed and consumed event by event.
#[divan::bench(sample_count = 200)]
fn steps_100_on_10k_messages_streamed(bencher: Bencher) {
    let graph = looping();
    let rt = runtime();
    let state = conversation(10_000);
    bencher
        .with_inputs(|| state.clone())
        .bench_local_values(|s| rt.block_on(consume(graph.stream(s))));
}

/// The same run, streaming the state after each step only (LangGraph's "values").
#[divan::bench(sample_count = 200)]
fn steps_100_on_10k_messages_streamed_values(bencher: Bencher) {
    let graph = looping();
    let rt = runtime();
    let state = conversation(10_000);
    bencher
        .with_inputs(|| state.clone())
        .bench_local_values(|s| {
            rt.block_on(consume(
                graph
                    .stream(s)
                    .only(agentstate_graph::EventFilter::STEP_FINISHED),
            ))
        });
}

/// Reads every event and returns the final state, which divan drops outside the timing (as
/// it drops `invoke`'s result).
async fn consume<S: agentstate_graph::GraphState, K: agentstate_graph::NodeKey>(
    mut events: agentstate_graph::RunStream<S, K>,
) -> Option<S> {
    let mut last = None;
    while let Some(event) = events.next().await {
        match event {
            agentstate_graph::Event::RunFinished { state } => {
                last = Some(std::sync::Arc::unwrap_or_clone(state))
            }
            other => drop(black_box(other)),
        }
    }
    last
}

#[derive(
    agentstate::AgentState, Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize,
)]
struct Counter {
    n: u64,
}

const NAMES: [&str; 10] = ["n0", "n1", "n2", "n3", "n4", "n5", "n6", "n7", "n8", "n9"];

/// Ten nodes in a line, each adding one.
fn linear() -> Graph<Counter> {
    let mut builder = Graph::builder();
    for (i, name) in NAMES.into_iter().enumerate() {
        builder = builder.node(name, |s: Arc<Counter>, _: Context| {
            let update = CounterUpdate::default().n(s.n + 1);
            async move { Ok::<_, Infallible>(update) }
        });
        builder = match NAMES.get(i + 1) {
            Some(next) => builder.edge(name, *next),
            None => builder.edge(name, END),
        };
    }
    builder.entry("n0").build().expect("the graph builds")
}

/// A 10-node linear run of trivial nodes, in all.
#[divan::bench(sample_count = 500)]
fn linear_10_nodes(bencher: Bencher) {
    let graph = linear();
    let rt = runtime();
    bencher.bench_local(|| {
        rt.block_on(graph.invoke(Counter::default()))
            .expect("the run ends")
    });
}

/// The same run, streamed.
#[divan::bench(sample_count = 500)]
fn linear_10_nodes_streamed(bencher: Bencher) {
    let graph = linear();
    let rt = runtime();
    bencher.bench_local(|| rt.block_on(consume(graph.stream(Counter::default()))));
}

/// The same run, streaming the state after each step only (LangGraph's "values").
#[divan::bench(sample_count = 500)]
fn linear_10_nodes_streamed_values(bencher: Bencher) {
    let graph = linear();
    let rt = runtime();
    bencher.bench_local(|| {
        rt.block_on(consume(
            graph
                .stream(Counter::default())
                .only(agentstate_graph::EventFilter::STEP_FINISHED),
        ))
    });
}

#[derive(
    agentstate::AgentState, Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize,
)]
struct Batch {
    items: Vec<u64>,
    #[reducer(append)]
    results: Vec<u64>,
}

/// 1,000 items through a one-node subgraph, collected into an `append` field (unbounded
/// concurrency: the items' work is trivial, so what is timed is the fan-out).
#[divan::bench(args = [1_000], sample_count = 100)]
fn fan_out_items(bencher: Bencher, n: u64) {
    let child = Graph::builder()
        .node("double", |s: Arc<Counter>, _: Context| {
            let update = CounterUpdate::default().n(s.n * 2);
            async move { Ok::<_, Infallible>(update) }
        })
        .entry("double")
        .edge("double", END)
        .build()
        .expect("the child builds");
    let fan_out = FanOut::new(
        child,
        |b: &Batch| b.items.iter().map(|&n| Counter { n }).collect(),
        |done: Vec<Counter>| {
            BatchUpdate::default().results(done.into_iter().map(|c| c.n).collect::<Vec<_>>())
        },
    )
    .concurrency(None);
    let graph = Graph::builder()
        .node("process", fan_out)
        .entry("process")
        .edge("process", END)
        .build()
        .expect("the graph builds");
    let rt = runtime();
    let batch = Batch {
        items: (0..n).collect(),
        results: Vec::new(),
    };
    bencher
        .with_inputs(|| batch.clone())
        .bench_local_values(|b| rt.block_on(graph.invoke(b)).expect("the run ends"));
}
