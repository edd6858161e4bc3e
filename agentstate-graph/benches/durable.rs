//! Durable runs (`agentstate_graph::durable`, feature `store`): what a step costs when it is
//! committed to a thread of SQLite or PostgreSQL. See `benches/README.md` for the goals and the
//! last results. Run with `cargo bench -p agentstate-graph --features store --bench durable`
//! (the PostgreSQL rows need `AGENTSTATE_POSTGRES_URL`; without it they print one line saying
//! they were skipped).
//!
//! - `sqlite_steps_100`: one `DurableGraph::run` of 100 steps on a thread whose `AgentState`
//!   holds 1k, 10k and 100k messages of ~400 characters (appended one per entry, as a
//!   conversation grows; `sqlite_steps_100_created`: the thread created with all of them in its
//!   initial state); each step's node appends one message
//!   (the step's update appended to the journal, the state advanced). Divide by 100 for a step
//!   (divan's throughput column is steps per second). The bench also prints the distribution of
//!   one step as the time from one node call to the next within a run (p50, p90): a step's
//!   whole cycle, without the run's own start (lease, position, input) and end (release).
//! - `sqlite_store_append`: the store's own append of the same one-message update to the same
//!   kind of thread (`Thread::merge`, as in `agentstate-store/benches/store.rs`): the part of a
//!   step that is the store's.
//! - `sqlite_run_1_step`: a whole `run` of a one-step graph on a thread of 1k messages: the
//!   lease taken and released, the position read from the journal, the input appended, one step.
//! - `sqlite_durability`: `sqlite_steps_100` on 1k messages in each `Durability` mode.
//! - `sqlite_sends_32`: a run of two steps, the second 32 `Send` tasks that finish in four
//!   waves (task i sleeps i % 4 ms), in each `Durability` mode: what journaling each finished
//!   task costs (awaited in `Sync`, written while the others run in `Async`, kept with the
//!   steps at the end in `Exit`).
//! - `sqlite_steps_100_streamed`: `sqlite_steps_100` on 1k messages streamed
//!   (`DurableGraph::stream`: every event, or the state after each step) against not streamed.
//! - `sqlite_chat_turn`: a one-step `run` with a user's message as input, on a thread of 1k and
//!   10k messages, by a warm worker (the thread's handle kept from its last turn), a cold one
//!   (`keep_threads(0)`), against `Store::load` of the thread.
//! - `sqlite_resume_10k_steps` vs `sqlite_load_10k_steps`: `resume` of a thread of 10,000 steps
//!   (one message each, made by a durable run) whose run failed in its next step (the step
//!   runs again and ends the run), against `Store::load` of the same thread.
//! - `postgres_steps_100`: `sqlite_steps_100` on PostgreSQL over loopback, 1k messages.
//! - `postgres_throughput`: 100 threads run by 8 workers (tokio tasks on 2 runtime threads, each
//!   with its own `DurableGraph` and worker id), each worker running its threads' runs of 10 steps
//!   one after the other: 1,000 steps; steps per second = 1,000 / time.
//!
//! With `AGENTSTATE_DURABLE_PROFILE=<steps>` set, the bench instead runs that many durable steps
//! on SQLite (runs of 100 on a thread of 1k messages, or of
//! `AGENTSTATE_DURABLE_PROFILE_MESSAGES`), for `perf record -g`.

use agentstate::message::{Message, Role};
use agentstate::state::{AgentState, AgentStateUpdate};
use agentstate::State;
use agentstate_graph::durable::{Durability, DurableGraph, Outcome};
use agentstate_graph::{BoxError, Context, Dispatch, Event, EventFilter, Graph, END};
use agentstate_store::backend::Backend;
use agentstate_store::{SqliteStore, StepMeta, Store, Thread};
use divan::counter::ItemsCount;
use divan::Bencher;
use futures_util::StreamExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::runtime::Runtime;

fn main() {
    match std::env::var("AGENTSTATE_DURABLE_PROFILE") {
        Ok(steps) => profile(steps.parse().unwrap_or(100_000)),
        Err(_) => divan::main(),
    }
}

/// The steps of a run in the per-step benchmarks.
const STEPS: usize = 100;

fn runtime() -> Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime")
}

/// A ~400-character message (as in the store's benchmarks).
fn message(i: usize) -> Message {
    let mut text = format!("message {i}: ");
    while text.len() < 400 {
        text.push_str("the quick brown fox jumps over the lazy dog; ");
    }
    text.truncate(400);
    let role = if i % 2 == 0 {
        Role::User
    } else {
        Role::Assistant
    };
    Message::text_message(text, role)
}

/// An `AgentState` holding `n` messages.
fn conversation(n: usize) -> AgentState {
    let mut state = AgentState::default();
    state
        .merge(AgentStateUpdate::default().context((0..n).map(message).collect::<Vec<_>>()))
        .expect("the messages merge");
    state
}

/// Thread `id` holding `n` messages, appended one per entry (as a conversation grows), or
/// with `created`, created at once with all of them (its initial state holds them).
async fn chat<B: Backend>(
    store: &Store<B>,
    id: &str,
    n: usize,
    created: bool,
) -> Thread<AgentState, B> {
    if created {
        return store.create(id, conversation(n)).await.unwrap();
    }
    let mut thread = store.create(id, AgentState::default()).await.unwrap();
    for i in 0..n {
        thread
            .merge(
                AgentStateUpdate::default().context(vec![message(i)]),
                StepMeta::node("chat"),
            )
            .await
            .unwrap();
    }
    thread
}

/// When each node call started, with its step: a step's whole cycle is the time from one
/// node call to the next.
#[derive(Clone, Default)]
struct Stamps(Arc<Mutex<Vec<(u64, Instant)>>>);

impl Stamps {
    fn stamp(&self, step: u64) {
        self.0.lock().unwrap().push((step, Instant::now()));
    }

    /// Prints the p50 and p90 of the times between node calls of consecutive steps.
    fn report(&self, label: &str) {
        let stamps = std::mem::take(&mut *self.0.lock().unwrap());
        let mut gaps: Vec<Duration> = stamps
            .windows(2)
            .filter(|w| w[1].0 == w[0].0 + 1)
            .map(|w| w[1].1 - w[0].1)
            .collect();
        if gaps.is_empty() {
            return;
        }
        gaps.sort();
        let at = |q: usize| gaps[q * (gaps.len() - 1) / 100];
        println!(
            "{label}: one step, node call to node call: p50 {:?}, p90 {:?}, p99 {:?} ({} steps)",
            at(50),
            at(90),
            at(99),
            gaps.len()
        );
    }
}

/// A node that appends one message, looping until the thread holds a multiple of `every`
/// messages (each run of 100 steps on a thread of 100·k messages); `every = 1`: one step.
/// With `fail` set, the node fails instead.
fn looping(every: usize, stamps: Stamps, fail: Arc<AtomicBool>) -> Graph<AgentState> {
    Graph::builder()
        .node("work", move |s: Arc<AgentState>, cx: Context| {
            stamps.stamp(cx.step());
            let n = s.context.len();
            let fail = fail.load(Ordering::Relaxed);
            async move {
                if fail {
                    return Err(BoxError::from("the node fails, as asked"));
                }
                Ok(AgentStateUpdate::default().context(vec![message(n)]))
            }
        })
        .entry("work")
        .route("work", move |s: &AgentState| {
            if s.context.len() % every == 0 {
                END.into()
            } else {
                "work".into()
            }
        })
        .recursion_limit(20_000)
        .build()
        .expect("the graph builds")
}

fn temp_db(name: &str) -> PathBuf {
    let path = std::env::temp_dir().join(format!(
        "agentstate-durable-bench-{name}-{}.db",
        std::process::id()
    ));
    remove_db(&path);
    path
}

fn remove_db(path: &Path) {
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
}

/// Runs 100-step runs of `durable` on thread `thread` (which holds a multiple of 100 messages).
fn bench_steps<B: Backend>(
    bencher: Bencher,
    rt: &Runtime,
    durable: &DurableGraph<AgentState, &'static str, B>,
    thread: &str,
) {
    bencher.counter(ItemsCount::new(STEPS)).bench_local(|| {
        match rt.block_on(durable.run(thread, ())) {
            Ok(Outcome::Finished { version, .. }) => version,
            other => panic!("the run finishes: {other:?}"),
        }
    });
}

#[divan::bench(args = [1_000, 10_000, 100_000], sample_count = 30, sample_size = 1)]
fn sqlite_steps_100(bencher: Bencher, n: usize) {
    steps_100(bencher, n, false);
}

/// `sqlite_steps_100` on a thread created with its messages (its initial state holds them).
#[divan::bench(args = [1_000, 100_000], sample_count = 10, sample_size = 1)]
fn sqlite_steps_100_created(bencher: Bencher, n: usize) {
    steps_100(bencher, n, true);
}

fn steps_100(bencher: Bencher, n: usize, created: bool) {
    let rt = runtime();
    let path = temp_db(&format!("steps-{n}-{created}"));
    let store = SqliteStore::open(&path).unwrap();
    drop(rt.block_on(chat(&store, "chat", n, created)));
    let stamps = Stamps::default();
    let graph = looping(STEPS, stamps.clone(), Arc::default());
    let durable = graph.durable(&store).worker("bench");
    bench_steps(bencher, &rt, &durable, "chat");
    let label = if created { "_created" } else { "" };
    stamps.report(&format!("sqlite_steps_100{label}({n})"));
    drop(durable);
    drop(store);
    remove_db(&path);
}

/// `sqlite_steps_100` on 1k messages, streamed (`DurableGraph::stream`), every event taken
/// (`all`) or the state after each step (`values`), against the same runs not streamed
/// (`none`), in one benchmark so that the three are measured in the same conditions.
#[divan::bench(args = ["none", "values", "all"], sample_count = 30, sample_size = 1)]
fn sqlite_steps_100_streamed(bencher: Bencher, events: &str) {
    let rt = runtime();
    let path = temp_db(&format!("streamed-{events}"));
    let store = SqliteStore::open(&path).unwrap();
    drop(rt.block_on(chat(&store, "chat", 1_000, false)));
    let graph = looping(STEPS, Stamps::default(), Arc::default());
    let durable = graph.durable(&store).worker("bench");
    let filter = match events {
        "values" => Some(EventFilter::STEP_FINISHED),
        "all" => Some(EventFilter::ALL),
        _ => None,
    };
    bencher.counter(ItemsCount::new(STEPS)).bench_local(|| {
        let Some(filter) = filter else {
            return match rt.block_on(durable.run("chat", ())) {
                Ok(Outcome::Finished { version, .. }) => version,
                other => panic!("the run finishes: {other:?}"),
            };
        };
        rt.block_on(async {
            let mut stream = durable.stream("chat", ()).only(filter);
            let mut version = 0;
            while let Some(event) = stream.next().await {
                if let Event::StepCommitted { version: v, .. } = event.expect("the run streams") {
                    version = v;
                }
            }
            version
        })
    });
    drop(durable);
    drop(store);
    remove_db(&path);
}

/// A chat turn: a user's message as the run's input, one step whose node answers with one
/// message, on a thread of `n` messages (growing by two per turn). `warm`: the same worker runs
/// every turn (it keeps the thread's handle); `cold`: it keeps none (`keep_threads(0)`), so
/// each turn loads the thread, as a new worker would; `load`: `Store::load` of the thread
/// alone, what a cold turn is compared with.
#[divan::bench(args = ["warm", "cold", "load"], consts = [1_000, 10_000], sample_count = 100, sample_size = 1)]
fn sqlite_chat_turn<const N: usize>(bencher: Bencher, worker: &str) {
    let rt = runtime();
    let path = temp_db(&format!("turn-{N}-{worker}"));
    let store = SqliteStore::open(&path).unwrap();
    drop(rt.block_on(chat(&store, "chat", N, false)));
    let graph = looping(1, Stamps::default(), Arc::default());
    let mut durable = graph.durable(&store).worker("bench");
    if worker != "warm" {
        durable = durable.keep_threads(0);
    }
    let i = std::cell::Cell::new(N);
    let turn = || {
        i.set(i.get() + 2);
        let input = AgentStateUpdate::default().context(vec![message(i.get())]);
        match rt.block_on(durable.run("chat", input)) {
            Ok(Outcome::Finished { version, .. }) => version,
            other => panic!("the turn finishes: {other:?}"),
        }
    };
    if worker == "load" {
        // The same thread as the cold turns load, grown as they grow it (a cold turn, untimed,
        // before each load): what a plain load of it costs at that point.
        bencher.with_inputs(turn).bench_local_values(|_| {
            rt.block_on(store.load::<AgentState>("chat"))
                .unwrap()
                .version
        });
    } else {
        bencher.bench_local(turn);
    }
    drop(store);
    remove_db(&path);
}

#[divan::bench(args = ["sync", "async", "exit"], sample_count = 30, sample_size = 1)]
fn sqlite_durability(bencher: Bencher, mode: &str) {
    let rt = runtime();
    let path = temp_db(&format!("durability-{mode}"));
    let store = SqliteStore::open(&path).unwrap();
    drop(rt.block_on(chat(&store, "chat", 1_000, false)));
    let stamps = Stamps::default();
    let graph = looping(STEPS, stamps.clone(), Arc::default());
    let durability = match mode {
        "sync" => Durability::Sync,
        "async" => Durability::Async,
        _ => Durability::Exit,
    };
    let durable = graph.durable(&store).worker("bench").durability(durability);
    bench_steps(bencher, &rt, &durable, "chat");
    stamps.report(&format!("sqlite_durability({mode})"));
    drop(durable);
    drop(store);
    remove_db(&path);
}

/// The `Send` tasks of `sqlite_sends_32`'s second step.
const SENDS: u64 = 32;

/// The state of `sqlite_sends_32`: a `Send` task's item, and every task's item once done.
#[derive(
    agentstate::AgentState, Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize,
)]
struct Fan {
    item: u64,
    #[reducer(append)]
    done: Vec<u64>,
}

/// `plan`, then a `Send` to `work` per item of `0..SENDS`; `work` sleeps `item % 4` ms (four
/// waves of finished tasks) and adds its item.
fn sends_graph() -> Graph<Fan> {
    Graph::builder()
        .node("plan", |_: Arc<Fan>, _: Context| async {
            Ok::<_, BoxError>(FanUpdate::default())
        })
        .node("work", |s: Arc<Fan>, _: Context| async move {
            tokio::time::sleep(Duration::from_millis(s.item % 4)).await;
            Ok::<_, BoxError>(FanUpdate::default().done(vec![s.item]))
        })
        .entry("plan")
        .route_send("plan", |_: &Fan| {
            (0..SENDS)
                .map(|item| {
                    Dispatch::to(
                        "work",
                        Fan {
                            item,
                            ..Fan::default()
                        },
                    )
                })
                .collect()
        })
        .edge("work", END)
        .build()
        .expect("the graph builds")
}

#[divan::bench(args = ["sync", "async", "exit"], sample_count = 30, sample_size = 1)]
fn sqlite_sends_32(bencher: Bencher, mode: &str) {
    let rt = runtime();
    let path = temp_db(&format!("sends-{mode}"));
    let store = SqliteStore::open(&path).unwrap();
    rt.block_on(store.create("fan", Fan::default())).unwrap();
    let durability = match mode {
        "sync" => Durability::Sync,
        "async" => Durability::Async,
        _ => Durability::Exit,
    };
    let durable = sends_graph()
        .durable(&store)
        .worker("bench")
        .durability(durability);
    bencher
        .counter(ItemsCount::new(SENDS as usize))
        .bench_local(|| match rt.block_on(durable.run("fan", ())) {
            Ok(Outcome::Finished { version, .. }) => version,
            other => panic!("the run finishes: {other:?}"),
        });
    drop(durable);
    drop(store);
    remove_db(&path);
}

/// The step's update through the store alone: `Thread::merge` of one message, with the
/// metadata a durable step writes (its size is part of the append's cost).
async fn append<B: Backend>(thread: &mut Thread<AgentState, B>, i: usize) -> u64 {
    let meta = StepMeta::node("work")
        .run_id("0b1c6a8e-6f0e-4a57-9d1a-0c9a3e1f2b4d")
        .with(
            agentstate_graph::durable::META_KEY,
            serde_json::json!({"entry": "step", "step": i, "nodes": ["work"], "next": ["work"]}),
        );
    thread
        .merge(AgentStateUpdate::default().context(vec![message(i)]), meta)
        .await
        .unwrap()
}

#[divan::bench(args = [1_000, 10_000, 100_000], sample_count = 300, sample_size = 1)]
fn sqlite_store_append(bencher: Bencher, n: usize) {
    store_append(bencher, n, false);
}

/// `sqlite_store_append` on a thread created with its messages.
#[divan::bench(args = [1_000, 100_000], sample_count = 300, sample_size = 1)]
fn sqlite_store_append_created(bencher: Bencher, n: usize) {
    store_append(bencher, n, true);
}

fn store_append(bencher: Bencher, n: usize, created: bool) {
    let rt = runtime();
    let path = temp_db(&format!("append-{n}-{created}"));
    let store = SqliteStore::open(&path).unwrap();
    let mut thread = rt.block_on(chat(&store, "chat", n, created));
    let mut i = n;
    bencher.bench_local(|| {
        i += 1;
        rt.block_on(append(&mut thread, i))
    });
    drop(thread);
    drop(store);
    remove_db(&path);
}

#[divan::bench(sample_count = 300, sample_size = 1)]
fn sqlite_run_1_step(bencher: Bencher) {
    let rt = runtime();
    let path = temp_db("run-1");
    let store = SqliteStore::open(&path).unwrap();
    drop(rt.block_on(chat(&store, "chat", 1_000, false)));
    let graph = looping(1, Stamps::default(), Arc::default());
    let durable = graph.durable(&store).worker("bench");
    bencher.bench_local(|| match rt.block_on(durable.run("chat", ())) {
        Ok(Outcome::Finished { version, .. }) => version,
        other => panic!("the run finishes: {other:?}"),
    });
    drop(durable);
    drop(store);
    remove_db(&path);
}

/// A thread of 10,000 durable steps of one message each; its next run fails in its first step
/// while `fail` is set.
fn long_thread(
    rt: &Runtime,
    path: &Path,
) -> (
    SqliteStore,
    DurableGraph<AgentState, &'static str, agentstate_store::sqlite::Sqlite>,
    Arc<AtomicBool>,
) {
    let store = SqliteStore::open(path).unwrap();
    let fail = Arc::new(AtomicBool::new(false));
    let graph = Graph::builder()
        .node("work", {
            let fail = Arc::clone(&fail);
            move |s: Arc<AgentState>, _cx: Context| {
                let n = s.context.len();
                let fail = fail.load(Ordering::Relaxed);
                async move {
                    if fail {
                        return Err(BoxError::from("the node fails, as asked"));
                    }
                    Ok(AgentStateUpdate::default().context(vec![message(n)]))
                }
            }
        })
        .entry("work")
        .route("work", |s: &AgentState| {
            if s.context.len() >= 10_000 {
                END.into()
            } else {
                "work".into()
            }
        })
        .recursion_limit(20_000)
        .build()
        .expect("the graph builds");
    let durable = graph.durable(&store).worker("bench");
    match rt.block_on(durable.start("long", AgentState::default())) {
        Ok(Outcome::Finished { state, .. }) => assert_eq!(state.context.len(), 10_000),
        other => panic!("the long run finishes: {other:?}"),
    }
    (store, durable, fail)
}

#[divan::bench(sample_count = 100, sample_size = 1)]
fn sqlite_resume_10k_steps(bencher: Bencher) {
    let rt = runtime();
    let path = temp_db("resume");
    let (store, durable, fail) = long_thread(&rt, &path);
    bencher
        .with_inputs(|| {
            // A run that fails in its step: the thread stands after its input, `work` next.
            fail.store(true, Ordering::Relaxed);
            let failed = rt.block_on(durable.run("long", ()));
            assert_eq!(failed.err().map(|e| e.category()), Some("node_exception"));
            fail.store(false, Ordering::Relaxed);
        })
        .bench_local_values(|()| match rt.block_on(durable.resume("long")) {
            Ok(Outcome::Finished { version, .. }) => version,
            other => panic!("the resumed run finishes: {other:?}"),
        });
    drop(durable);
    drop(store);
    remove_db(&path);
}

#[divan::bench(sample_count = 100, sample_size = 1)]
fn sqlite_load_10k_steps(bencher: Bencher) {
    let rt = runtime();
    let path = temp_db("load");
    let (store, durable, _) = long_thread(&rt, &path);
    bencher.bench_local(|| rt.block_on(store.load::<AgentState>("long")).unwrap());
    drop(durable);
    drop(store);
    remove_db(&path);
}

/// `AGENTSTATE_DURABLE_PROFILE`: `steps` durable steps, for a profiler.
fn profile(steps: usize) {
    let rt = runtime();
    let path = temp_db("profile");
    let store = SqliteStore::open(&path).unwrap();
    let messages = std::env::var("AGENTSTATE_DURABLE_PROFILE_MESSAGES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(1_000);
    let created = std::env::var_os("AGENTSTATE_DURABLE_PROFILE_CREATED").is_some();
    drop(rt.block_on(chat(&store, "chat", messages, created)));
    // `AGENTSTATE_DURABLE_PROFILE_TURNS`: `steps` one-step chat turns instead.
    if std::env::var_os("AGENTSTATE_DURABLE_PROFILE_TURNS").is_some() {
        // No snapshot meanwhile: the profile is of the turns alone.
        let store = store
            .clone()
            .with_snapshot_policy(agentstate_store::SnapshotPolicy::every(u64::MAX));
        let graph = looping(1, Stamps::default(), Arc::default());
        let mut durable = graph.durable(&store).worker("bench");
        // `=cold`: a worker that keeps no thread warm.
        if std::env::var("AGENTSTATE_DURABLE_PROFILE_TURNS").as_deref() == Ok("cold") {
            durable = durable.keep_threads(0);
        }
        let start = Instant::now();
        for i in 0..steps {
            let input = AgentStateUpdate::default().context(vec![message(messages + 2 * i)]);
            rt.block_on(durable.run("chat", input)).unwrap();
        }
        println!(
            "{steps} turns: {:?} per turn",
            start.elapsed() / steps as u32
        );
    } else {
        let graph = looping(STEPS, Stamps::default(), Arc::default());
        let durable = graph.durable(&store).worker("bench");
        let start = Instant::now();
        for _ in 0..steps.div_ceil(STEPS) {
            rt.block_on(durable.run("chat", ())).unwrap();
        }
        let elapsed = start.elapsed();
        println!(
            "{} steps in {elapsed:?}: {:?} per step",
            steps.div_ceil(STEPS) * STEPS,
            elapsed / (steps.div_ceil(STEPS) * STEPS) as u32
        );
    }
    drop(store);
    remove_db(&path);
}

mod postgres {
    use super::*;
    use agentstate_store::postgres::{Postgres, PostgresOptions};
    use agentstate_store::PostgresStore;

    /// A store in a fresh schema, or `None` (with a line saying so) without
    /// `AGENTSTATE_POSTGRES_URL`.
    fn store(rt: &Runtime, name: &str) -> Option<(Store<Postgres>, String)> {
        let Ok(url) = std::env::var("AGENTSTATE_POSTGRES_URL") else {
            println!("{name}: skipped, AGENTSTATE_POSTGRES_URL is not set");
            return None;
        };
        let options = PostgresOptions {
            schema: schema(name),
            max_connections: 16,
            synchronous_commit: true,
        };
        let store = rt
            .block_on(PostgresStore::connect_with(&url, options))
            .unwrap();
        Some((store, url))
    }

    fn schema(name: &str) -> String {
        format!("agentstate_durable_bench_{name}_{}", std::process::id())
    }

    fn drop_schema(rt: &Runtime, url: &str, name: &str) {
        let schema = schema(name);
        rt.block_on(async {
            let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls)
                .await
                .unwrap();
            tokio::spawn(conn);
            client
                .batch_execute(&format!("DROP SCHEMA IF EXISTS \"{schema}\" CASCADE"))
                .await
                .unwrap();
        });
    }

    #[divan::bench(sample_count = 50, sample_size = 1)]
    fn postgres_steps_100(bencher: Bencher) {
        let rt = runtime();
        let Some((store, url)) = store(&rt, "steps") else {
            return;
        };
        drop(rt.block_on(chat(&store, "chat", 1_000, false)));
        let stamps = Stamps::default();
        let graph = looping(STEPS, stamps.clone(), Arc::default());
        let durable = graph.durable(&store).worker("bench");
        bench_steps(bencher, &rt, &durable, "chat");
        stamps.report("postgres_steps_100(1000)");
        drop(durable);
        drop(store);
        drop_schema(&rt, &url, "steps");
    }

    /// The store's own append on the same server, for the runner's share; `leased`: while the
    /// thread's lease is held (as in a durable run).
    #[divan::bench(args = ["free", "leased"], sample_count = 300, sample_size = 1)]
    fn postgres_store_append(bencher: Bencher, lease: &str) {
        let rt = runtime();
        let name = format!("append_{lease}");
        let Some((store, url)) = store(&rt, &name) else {
            return;
        };
        let mut thread = rt.block_on(chat(&store, "chat", 1_000, false));
        let _lease = (lease == "leased").then(|| {
            rt.block_on(store.lease("chat", "bench", Duration::from_secs(60)))
                .unwrap()
        });
        let mut i = 1_000;
        bencher.bench_local(|| {
            i += 1;
            rt.block_on(append(&mut thread, i))
        });
        drop(thread);
        drop(store);
        drop_schema(&rt, &url, &name);
    }

    /// 100 threads, 8 workers; worker `w` runs threads `w`, `w + 8`, ... one run of 10 steps
    /// each, one after the other.
    #[divan::bench(sample_count = 10, sample_size = 1)]
    fn postgres_throughput(bencher: Bencher) {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let Some((store, url)) = store(&rt, "throughput") else {
            return;
        };
        rt.block_on(async {
            for t in 0..100 {
                store
                    .create(&format!("t{t}"), AgentState::default())
                    .await
                    .unwrap();
            }
        });
        let graph = looping(10, Stamps::default(), Arc::default());
        let workers: Vec<_> = (0..8)
            .map(|w| graph.durable(&store).worker(format!("worker-{w}")))
            .collect();
        bencher
            .counter(ItemsCount::new(1_000usize))
            .bench_local(|| {
                rt.block_on(async {
                    let tasks: Vec<_> = workers
                        .iter()
                        .enumerate()
                        .map(|(w, durable)| {
                            let durable = durable.clone();
                            tokio::spawn(async move {
                                for t in (w..100).step_by(8) {
                                    match durable.run(&format!("t{t}"), ()).await {
                                        Ok(Outcome::Finished { .. }) => {}
                                        other => panic!("the run finishes: {other:?}"),
                                    }
                                }
                            })
                        })
                        .collect();
                    for task in tasks {
                        task.await.unwrap();
                    }
                })
            });
        drop(workers);
        drop(store);
        drop_schema(&rt, &url, "throughput");
    }
}
