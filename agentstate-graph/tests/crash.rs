//! Crash tests of durable runs, on a SQLite file and on PostgreSQL (when
//! `AGENTSTATE_POSTGRES_URL` is set; under `CI` it must be).
//!
//! The trip graph (8 steps, two of them parallel, 11 effects: see `procs/mod.rs`) runs in a
//! child process (this binary run again with `AGENTSTATE_GRAPH_CHILD` set), which the test kills
//! with SIGKILL at a random moment; a new child resumes the thread, and is killed in turn, until
//! one finishes the run. Threads are run so until at least 50 kills were made per backend, in
//! the three durability modes in turn. Then, for every thread:
//! - its final state equals the state of an uninterrupted run;
//! - its journal has contiguous versions, one run, and each step number once, in order (no
//!   fork, no step committed twice), each effect journaled once;
//! - every effect's outside work was done exactly once: the work is an idempotent insert into a
//!   ledger (a thread of the same store per effect, its id the effect's idempotency key), and
//!   the ledger's keys are exactly the journal's effect keys.
//!
//! Each execution of an effect's work is counted too (a line in a file, before the work). A
//! kill between an effect's work and its result's journal entry runs the work again in the
//! next child with the same idempotency key: that window is expected (it is why
//! [`Context::effect`](agentstate_graph::Context::effect) hands out the key), the ledger's
//! insert absorbs it, and the test reports how often a kill hit it.
//!
//! Then a fan-out of 100 instances (10 at a time) runs in children killed at random moments
//! until one finishes: its final state equals an uninterrupted run's, the journal records each
//! instance's result exactly once (a recorded instance never ran again), and the instances'
//! bodies ran again only as often as a kill can catch them finished but not yet journaled.
//!
//! Then a step of 144 `Send` tasks runs in `Async` (and `Sync`) mode in a child killed half a
//! second after half of them finished (the others wait until the child is killed): a child
//! that resumes the run runs only the other half; no finished task runs again.
//!
//! `AGENTSTATE_CRASH_KILLS=<n>` makes more kills than the 50 per backend (a longer soak).
//!
//! Randomness is seeded: the seed is printed, and `AGENTSTATE_TEST_SEED=<seed>` repeats it.

mod procs;

use agentstate::AgentState;
use agentstate_graph::durable::{Durability, DurableGraph, Outcome, RunStatus};
use agentstate_graph::parallel::FanOut;
use agentstate_graph::{BoxError, Context, Dispatch, Graph, END};
use procs::*;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The lease ttl of the children: a killed child holds the thread this long at most.
const TTL: Duration = Duration::from_millis(250);
/// Kills per backend, at least (`AGENTSTATE_CRASH_KILLS` sets another number, for a longer soak).
fn kills_wanted() -> usize {
    std::env::var("AGENTSTATE_CRASH_KILLS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(50)
}
const MODES: [&str; 3] = ["sync", "async", "exit"];

fn main() {
    let runtime = runtime();
    if let Ok(spec) = std::env::var(CHILD) {
        if let Some(spec) = spec.strip_prefix("fan-out|") {
            runtime.block_on(fan_out_child(spec));
        } else if let Some(spec) = spec.strip_prefix("sends|") {
            runtime.block_on(sends_child(spec));
        } else {
            runtime.block_on(child(&spec));
        }
        return;
    }
    let seed = seed("crash");
    let dir = scratch("crash");
    let dbs = databases("crash", &dir);
    for db in &dbs {
        let started = Instant::now();
        let report = runtime.block_on(crashes(db, &dir, seed));
        println!(
            "crash {:<8} ... ok ({:.1?}): {report}",
            db.backend(),
            started.elapsed()
        );
    }
    for db in &dbs {
        let started = Instant::now();
        let report = runtime.block_on(fan_out_kills(db, &dir, seed));
        println!(
            "crash {:<8} fan-out ... ok ({:.1?}): {report}",
            db.backend(),
            started.elapsed()
        );
    }
    for db in &dbs {
        for mode in ["async", "sync"] {
            let started = Instant::now();
            let report = runtime.block_on(sends_killed(db, &dir, mode));
            println!(
                "crash {:<8} sends {mode:<5} ... ok ({:.1?}): {report}",
                db.backend(),
                started.elapsed()
            );
        }
    }
    // After the kills, so that their report is printed whatever this finds.
    for db in &dbs {
        runtime.block_on(a_start_cut_short_is_not_finished(db, &dir, seed));
        println!("crash {:<8} a start cut short ... ok", db.backend());
        db.remove();
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Runs threads under kills until [`kills_wanted`] kills, checking each thread; a line of numbers.
async fn crashes(db: &Db, dir: &std::path::Path, seed: u64) -> String {
    let mut rng = Rng::new(seed ^ db.backend().len() as u64);
    let store = db.open().await;
    let tag = format!("crash-{}-{}", std::process::id(), now_ms());
    let raw = dir.join(format!("raw-{}.log", db.backend()));

    // Twice: the second run, on a warm store, times a run.
    let (expected, _) = reference(&store, &format!("{tag}-cold"), &raw, seed).await;
    let (again, run_time) = reference(&store, &tag, &raw, seed).await;
    assert_eq!(again, expected, "two uninterrupted runs end differently");

    // Kills at a random moment of the run (measured from when the child starts it).
    // The kill comes within `most` ms of the child's start: from the run's time, then made
    // shorter after each child that finished and longer after each kill (about 2 kills per
    // finished child, however fast this machine is at the moment).
    let mut most = run_time.as_millis() as f64 + 5.0;
    let (mut kills, mut spawns, mut threads, mut windows) = (0, 0, 0, 0);
    let mut per_mode = [0usize; 3];
    // The kills by the last step the thread had committed (0: none, or not created yet).
    let mut at_step = [0usize; 9];
    let wanted = kills_wanted();
    while kills < wanted || threads < MODES.len() {
        let thread = format!("{tag}-trip-{threads}");
        let mode = threads % MODES.len();
        let mut attempts = 0;
        loop {
            spawns += 1;
            assert!(
                spawns < 1_000,
                "{spawns} children and the runs are not done"
            );
            let mut child = ChildGuard::spawn(
                &format!(
                    "{thread}|{}|{}|{}",
                    MODES[mode],
                    raw.display(),
                    db.describe()
                ),
                &[("AGENTSTATE_TEST_SEED", rng.next().to_string())],
            );
            child.expect_line("go", Duration::from_secs(60));
            // A run that keeps being killed before it ends (in `exit` mode nothing but its
            // effects is kept until it ends) gets more time.
            let bound = if attempts >= 12 { 3.0 * most } else { most };
            attempts += 1;
            let delay = Duration::from_millis(rng.below(bound as u64));
            match child.wait_for(delay) {
                Some(status) => {
                    assert!(status.success(), "child {} failed: {status}", child.id());
                    most = (most * 0.85).max(10.0);
                    break;
                }
                None => {
                    child.kill();
                    most = (most * 1.07).min(5_000.0);
                    kills += 1;
                    per_mode[mode] += 1;
                    at_step[committed_step(&store, &thread).await as usize] += 1;
                }
            }
        }
        // The thread is done: check it.
        let state = store.load::<Trip>(&thread).await.unwrap().state;
        assert_eq!(
            state, expected,
            "thread `{thread}` ({} mode) does not end as an uninterrupted run",
            MODES[mode]
        );
        let journal = check_journal(&store, &thread).await;
        let raws = raw_executions(&raw);
        windows += check_effects(&store, &thread, &journal, &raws[&thread]).await;
        clean(&store, &thread).await;
        threads += 1;
    }
    let _ = std::fs::remove_file(&raw);
    format!(
        "{threads} runs, {kills} kills (sync {}, async {}, exit {}; by the last step committed 0..=8: {at_step:?}), {windows} effects ran again after a kill between their work and their journal entry, uninterrupted run {run_time:.0?}",
        per_mode[0], per_mode[1], per_mode[2]
    )
}

/// `start` creates the thread, then runs the graph on it: a crash between the two leaves a
/// thread on which no run was made. Resuming it must not report a finished run with the state
/// the thread was created with (nothing ran): it runs the graph, or says there is no run to
/// resume (`run_state_invalid`).
async fn a_start_cut_short_is_not_finished(db: &Db, dir: &std::path::Path, seed: u64) {
    let store = db.open().await;
    let thread = format!("crash-{}-{}-cut", std::process::id(), now_ms());
    // What `start` did before the crash.
    store.create(&thread, Trip::default()).await.unwrap();
    let outside = Arc::new(Outside {
        store: store.clone(),
        thread: thread.clone(),
        raw: dir.join("raw-cut.log"),
        nodes: None,
        worker: "cut".into(),
        call: Arc::new(AtomicU64::new(0)),
        fail_per_mille: 0,
        hang: None,
        pause: None,
        rng: Mutex::new(Rng::new(seed)),
    });
    let graph = trip(outside, TTL, durability("sync"));
    let resumed = graph.resume(&thread).await;
    clean(&store, &thread).await;
    match resumed {
        Ok(outcome) => assert!(
            finished(&outcome),
            "thread `{thread}` was created by a `start` that crashed before its run began; `resume` reports its run finished, with the state it was created with, though no node ran: {outcome:?}"
        ),
        Err(e) => assert_eq!(e.category(), "run_state_invalid", "{e}"),
    }
}

/// The number of the last step the thread's journal holds (0 if none or no thread).
async fn committed_step(store: &agentstate_store::AnyStore, thread: &str) -> u64 {
    let Ok(entries) = store
        .history(thread, agentstate_store::HistoryQuery::newest(64))
        .await
    else {
        return 0;
    };
    entries
        .iter()
        .filter_map(|e| e.extra.get("agentstate_graph"))
        .filter(|m| m["entry"] == "step")
        .filter_map(|m| m["step"].as_u64())
        .max()
        .unwrap_or(0)
}

/// A child: resumes (or starts) the thread once the dead children's lease has lapsed, prints
/// `go` when it begins and `finished` at the end.
async fn child(spec: &str) {
    let mut parts = spec.splitn(4, '|');
    let (thread, mode, raw, db) = (
        parts.next().unwrap(),
        parts.next().unwrap(),
        parts.next().unwrap(),
        Db::parse(parts.next().unwrap()),
    );
    let seed: u64 = std::env::var("AGENTSTATE_TEST_SEED")
        .unwrap()
        .parse()
        .unwrap();
    let store = db.open().await;
    let outside = Arc::new(Outside {
        store: store.clone(),
        thread: thread.to_owned(),
        raw: raw.into(),
        nodes: None,
        worker: format!("crash-child-{}", std::process::id()),
        call: Arc::new(AtomicU64::new(0)),
        fail_per_mille: 0,
        hang: None,
        pause: None,
        rng: Mutex::new(Rng::new(seed)),
    });
    let graph = trip(outside, TTL, durability(mode));
    // The killed child's lease lapses within the ttl.
    lease_lapsed(&store, thread).await;
    say("go");
    loop {
        let result = match store.info(thread).await {
            Err(e) if e.category() == "thread_not_found" => {
                graph.start(thread, Trip::default()).await
            }
            Err(e) => panic!("info: {e}"),
            // Killed after the thread was created and before its run's input entry.
            Ok(_) => match graph.status(thread).await.unwrap() {
                RunStatus::Idle { step: 0 } => graph.run(thread, ()).await,
                _ => graph.resume(thread).await,
            },
        };
        match result {
            Ok(outcome) if finished(&outcome) => break,
            Ok(outcome) => panic!("thread `{thread}`: the run ended unfinished: {outcome:?}"),
            Err(e) if leased(&e) => tokio::time::sleep(Duration::from_millis(5)).await,
            Err(e) => panic!("thread `{thread}`: {e} ({})", e.category()),
        }
    }
    say("finished");
}

// ---------------------------------------------------------------------------------------------
// A fan-out killed in the middle.

/// The fan-out's instances.
const INSTANCES: u64 = 100;

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
}

/// A fan-out of 10 instances at a time over the items, each sleeping 1 to 4 ms and then
/// writing its item to `raw` (one line per finished body) before it returns the item doubled.
fn fan_out_graph(raw: PathBuf) -> Graph<Batch> {
    let job = Graph::builder()
        .node("double", move |s: Arc<Job>, _: Context| {
            let raw = raw.clone();
            async move {
                tokio::time::sleep(Duration::from_millis(1 + s.x % 4)).await;
                let mut file = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(&raw)?;
                std::io::Write::write_all(&mut file, format!("{}\n", s.x).as_bytes())?;
                Ok::<_, BoxError>(JobUpdate::default().result(s.x * 2))
            }
        })
        .entry("double")
        .edge("double", END)
        .build()
        .unwrap();
    let fan_out = FanOut::new(
        job,
        |b: &Batch| b.items.iter().map(|&x| Job { x, result: 0 }).collect(),
        |done: Vec<Job>| {
            BatchUpdate::default().results(done.into_iter().map(|j| j.result).collect::<Vec<_>>())
        },
    )
    .concurrency(Some(10));
    Graph::builder()
        .node("process", fan_out)
        .entry("process")
        .edge("process", END)
        .build()
        .unwrap()
}

fn fan_out_input() -> Batch {
    Batch {
        items: (0..INSTANCES).collect(),
        ..Batch::default()
    }
}

/// Runs the fan-out in children killed after a random delay (the first three always within an
/// uninterrupted run's time), until one finishes; checks the thread. A line of numbers.
async fn fan_out_kills(db: &Db, dir: &std::path::Path, seed: u64) -> String {
    let mut rng = Rng::new(seed ^ 0xfa);
    let store = db.open().await;
    let tag = format!("crash-{}-{}", std::process::id(), now_ms());
    let raw = dir.join(format!("fan-out-{}.log", db.backend()));

    // An uninterrupted run, for the final state and the time a run takes.
    let reference = format!("{tag}-fan-out-reference");
    let started = Instant::now();
    let graph = fan_out_graph(dir.join("fan-out-reference.log"));
    let expected = match graph
        .durable(&store)
        .start(&reference, fan_out_input())
        .await
    {
        Ok(Outcome::Finished { state, .. }) => state,
        other => panic!("the uninterrupted fan-out: {other:?}"),
    };
    let run_time = started.elapsed();
    store.delete(&reference).await.unwrap();
    assert_eq!(
        expected.results,
        (0..INSTANCES).map(|x| x * 2).collect::<Vec<_>>()
    );

    // Kills within the first three quarters of a run's time, three of them, then a child that
    // finishes; a thread whose children all finished before their kill is run again anew.
    let (mut thread, mut kills, mut spawns) = (String::new(), 0, 0);
    for attempt in 0..20 {
        thread = format!("{tag}-fan-out-{attempt}");
        kills = 0;
        let _ = std::fs::remove_file(&raw);
        loop {
            spawns += 1;
            let mut child = ChildGuard::spawn(
                &format!("fan-out|{thread}|{}|{}", raw.display(), db.describe()),
                &[],
            );
            child.expect_line("go", Duration::from_secs(60));
            let delay = if kills < 3 {
                Duration::from_millis(1 + rng.below(run_time.as_millis() as u64 * 3 / 4))
            } else {
                Duration::from_secs(120)
            };
            match child.wait_for(delay) {
                Some(status) => {
                    assert!(
                        status.success(),
                        "fan-out child {} failed: {status}",
                        child.id()
                    );
                    break;
                }
                None => {
                    child.kill();
                    kills += 1;
                }
            }
        }
        if kills > 0 {
            break;
        }
        store.delete(&thread).await.unwrap();
    }
    assert!(
        kills > 0,
        "no fan-out child was killed before it finished in {spawns} children"
    );
    let state = store.load::<Batch>(&thread).await.unwrap().state;
    assert_eq!(
        state, *expected,
        "the fan-out killed {kills} times does not end as an uninterrupted run"
    );

    // Each instance recorded once: an instance whose result was journaled never ran again.
    let entries = store
        .history(&thread, agentstate_store::HistoryQuery::newest(10_000))
        .await
        .unwrap();
    let mut records = BTreeMap::new();
    for meta in entries
        .iter()
        .filter_map(|e| e.extra.get("agentstate_graph"))
    {
        if meta["name"] == "fan_out_instance" {
            *records
                .entry(meta["key"].as_str().unwrap_or_default().to_owned())
                .or_insert(0) += 1;
        }
    }
    assert_eq!(records.len(), INSTANCES as usize, "{records:?}");
    assert!(
        records.values().all(|n| *n == 1),
        "an instance recorded twice: {records:?}"
    );

    // The bodies: each finished at least once; again only when a kill caught it finished and
    // not yet journaled (an instance holds its place among the 10 running at once until its
    // record is made: at most 10 per kill).
    let text = std::fs::read_to_string(&raw).unwrap_or_default();
    let mut runs = BTreeMap::new();
    for line in text.lines() {
        *runs.entry(line.parse::<u64>().unwrap()).or_insert(0u32) += 1;
    }
    assert_eq!(
        runs.len(),
        INSTANCES as usize,
        "instances whose body never finished"
    );
    let again: u32 = runs.values().map(|n| n - 1).sum();
    assert!(
        again as usize <= 10 * kills,
        "{again} bodies ran again after {kills} kills: finished instances were run again"
    );
    store.delete(&thread).await.unwrap();
    let _ = std::fs::remove_file(&raw);
    format!(
        "{kills} kills in {spawns} children, {again} of {INSTANCES} instance bodies ran again (finished, not yet journaled, at a kill), uninterrupted run {run_time:.0?}"
    )
}

/// A fan-out child: resumes (or starts) the fan-out's thread once the killed children's lease
/// has lapsed, prints `go` when it begins and `finished` at the end.
async fn fan_out_child(spec: &str) {
    let mut parts = spec.splitn(3, '|');
    let (thread, raw, db) = (
        parts.next().unwrap(),
        PathBuf::from(parts.next().unwrap()),
        Db::parse(parts.next().unwrap()),
    );
    let store = db.open().await;
    let graph: DurableGraph<Batch, &'static str, _> = fan_out_graph(raw)
        .durable(&store)
        .worker(format!("fan-out-child-{}", std::process::id()))
        .lease_ttl(TTL);
    lease_lapsed(&store, thread).await;
    say("go");
    loop {
        let result = match store.info(thread).await {
            Err(e) if e.category() == "thread_not_found" => {
                graph.start(thread, fan_out_input()).await
            }
            Err(e) => panic!("info: {e}"),
            Ok(_) => match graph.status(thread).await.unwrap() {
                RunStatus::Idle { step: 0 } => graph.run(thread, ()).await,
                _ => graph.resume(thread).await,
            },
        };
        match result {
            Ok(Outcome::Finished { .. }) => break,
            Ok(_) => panic!("thread `{thread}`: the fan-out ended unfinished"),
            Err(agentstate_graph::durable::DurableError::Store(
                agentstate_store::StoreError::Leased { .. },
            )) => tokio::time::sleep(Duration::from_millis(5)).await,
            // A killed child's `start` committed after this child found no thread (its
            // transaction outlived it on the server): the thread is there now, resume it.
            Err(agentstate_graph::durable::DurableError::Store(
                agentstate_store::StoreError::ThreadExists { .. },
            )) => {}
            Err(e) => panic!("thread `{thread}`: {e} ({})", e.category()),
        }
    }
    say("finished");
}

// ---------------------------------------------------------------------------------------------
// A step of `Send` tasks killed when half of them had finished.

/// The step's `Send` tasks.
const SENDS: u64 = 144;
/// The tasks below it finish at once (within 8 ms); the others wait for the release file.
const QUICK: u64 = SENDS / 2;

#[derive(AgentState, Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
struct Sends {
    item: u64,
    #[reducer(append)]
    done: Vec<u64>,
}

/// `plan`, then a `Send` to `work` per item; `work` on an item below [`QUICK`] sleeps up to
/// 7 ms, on the others waits until `release` exists; then it writes its item to `raw` (one
/// line per finished body) and adds it.
fn sends_graph(raw: PathBuf, release: PathBuf) -> Graph<Sends> {
    Graph::builder()
        .node("plan", |_: Arc<Sends>, _: Context| async {
            Ok::<_, BoxError>(SendsUpdate::default())
        })
        .node("work", move |s: Arc<Sends>, _: Context| {
            let (raw, release) = (raw.clone(), release.clone());
            async move {
                if s.item < QUICK {
                    tokio::time::sleep(Duration::from_millis(s.item % 8)).await;
                } else {
                    while !release.exists() {
                        tokio::time::sleep(Duration::from_millis(5)).await;
                    }
                }
                let mut file = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(&raw)?;
                std::io::Write::write_all(&mut file, format!("{}\n", s.item).as_bytes())?;
                Ok::<_, BoxError>(SendsUpdate::default().done(vec![s.item]))
            }
        })
        .entry("plan")
        .route_send("plan", |_: &Sends| {
            (0..SENDS)
                .map(|item| {
                    let input = Sends {
                        item,
                        ..Sends::default()
                    };
                    Dispatch::to("work", input)
                })
                .collect()
        })
        .edge("work", END)
        .build()
        .unwrap()
}

/// The times each item's body finished, from `raw`.
fn finished_bodies(raw: &std::path::Path) -> BTreeMap<u64, u32> {
    let text = std::fs::read_to_string(raw).unwrap_or_default();
    let mut runs = BTreeMap::new();
    for line in text.lines() {
        *runs.entry(line.parse::<u64>().unwrap()).or_insert(0) += 1;
    }
    runs
}

/// Runs the `Send` step in durability `mode` in a child, killed half a second after the
/// [`QUICK`] tasks finished, then in a child that resumes it with the others released: every
/// task's body finished once. A line of numbers.
async fn sends_killed(db: &Db, dir: &std::path::Path, mode: &str) -> String {
    let store = db.open().await;
    let thread = format!("crash-{}-{}-sends-{mode}", std::process::id(), now_ms());
    let (raw, release) = raw_and_release(dir, &format!("sends-{}-{mode}", db.backend()));
    let spec = release_spec(&format!("sends|{mode}|{thread}"), &raw, &release, db);

    let mut first = started_child(&spec);
    let deadline = Instant::now() + Duration::from_secs(60);
    while finished_bodies(&raw).len() < QUICK as usize {
        assert!(
            Instant::now() < deadline,
            "{mode}: the quick tasks did not finish in 60 s"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    std::thread::sleep(Duration::from_millis(500));
    first.kill();
    let before = finished_bodies(&raw);
    assert_eq!(
        before.keys().copied().collect::<Vec<_>>(),
        (0..QUICK).collect::<Vec<_>>(),
        "{mode}: only the quick tasks finished before the kill"
    );

    std::fs::write(&release, b"").unwrap();
    resume_in_child(&spec);

    let runs = finished_bodies(&raw);
    let again: Vec<u64> = runs
        .iter()
        .filter(|(_, n)| **n > 1)
        .map(|(item, _)| *item)
        .collect();
    assert!(
        again.is_empty(),
        "{mode}: {} of {QUICK} tasks that finished half a second before the kill ran again: {again:?}",
        again.len()
    );
    assert_eq!(
        runs.len(),
        SENDS as usize,
        "{mode}: tasks that never finished"
    );
    let state = store.load::<Sends>(&thread).await.unwrap().state;
    assert_eq!(state.done, (0..SENDS).collect::<Vec<_>>(), "{mode}");
    store.delete(&thread).await.unwrap();
    let _ = std::fs::remove_file(&raw);
    let _ = std::fs::remove_file(&release);
    format!("{QUICK} of {SENDS} tasks finished before the kill, 0 ran again")
}

/// A `Send` step's child: starts or resumes the thread in the durability its spec names, once
/// a killed child's lease has lapsed; prints `go` when it begins.
async fn sends_child(spec: &str) {
    let mut parts = spec.splitn(5, '|');
    let (mode, thread, raw, release, db) = (
        parts.next().unwrap(),
        parts.next().unwrap(),
        PathBuf::from(parts.next().unwrap()),
        PathBuf::from(parts.next().unwrap()),
        Db::parse(parts.next().unwrap()),
    );
    let durability = match mode {
        "async" => Durability::Async,
        _ => Durability::Sync,
    };
    let store = db.open().await;
    let graph = sends_graph(raw, release)
        .durable(&store)
        .worker(format!("sends-child-{}", std::process::id()))
        .lease_ttl(TTL)
        .durability(durability);
    lease_lapsed(&store, thread).await;
    say("go");
    let result = match store.info(thread).await {
        Err(e) if e.category() == "thread_not_found" => graph.start(thread, Sends::default()).await,
        Err(e) => panic!("info: {e}"),
        Ok(_) => graph.resume(thread).await,
    };
    match result {
        Ok(Outcome::Finished { .. }) => {}
        other => panic!("thread `{thread}`: the run did not finish: {other:?}"),
    }
}
