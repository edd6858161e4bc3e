//! Racing workers on durable runs, on a SQLite file and on PostgreSQL (when
//! `AGENTSTATE_POSTGRES_URL` is set; under `CI` it must be).
//!
//! - **Racing**: two processes (this binary run again with `AGENTSTATE_GRAPH_CHILD` set), four
//!   tokio tasks each, every task a worker of its own, all start at the same moment to `start`
//!   and then `resume` the same three threads of the trip graph (see `procs/mod.rs`), whose
//!   nodes fail now and then (a transient failure: the run stops, and whichever worker resumes
//!   it next runs the step again). Checked: every thread ends as an uninterrupted run does,
//!   with a journal without fork or duplicate step; every effect's outside work was done
//!   exactly once (the ledger's keys are the journal's, and each ran once); a worker refused
//!   was told why (`thread_leased`, naming the thread) before any node body of its call ran;
//!   and no node body of a thread ever ran in two workers at once (each body logs its start
//!   and end with the machine's clock, and the logs of both processes are swept in time order).
//! - **Takeover**: a child holds a thread's lease inside a step that hangs (its effects
//!   journaled) and is killed with SIGKILL; a worker that tries at once is refused with
//!   `thread_leased` naming the dead holder, and another process takes the thread over once the
//!   lease's ttl has lapsed (not before), and finishes it with its effects done once.
//! - **Paused worker**: a child is stopped (SIGSTOP) inside a step (`join`, which runs alone),
//!   after its effect was journaled, so its lease lapses; another process takes the thread over and finishes it; the stopped child,
//!   continued (SIGCONT), is refused (`lease_lost`) and appends
//!   nothing: the journal stays unforked, the state the uninterrupted run's.
//!
//! Randomness is seeded: the seed is printed, and `AGENTSTATE_TEST_SEED=<seed>` repeats it.

mod procs;

use agentstate_graph::durable::{Durability, DurableError};
use procs::*;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const PROCESSES: u64 = 2;
const TASKS: u64 = 4;
const THREADS: u64 = 3;
/// The racing workers' lease ttl: far longer than any step (no lease lapses in a race).
const RACE_TTL: Duration = Duration::from_secs(10);
/// The chance in 1,000 that a node body fails (the run stops; another call resumes it).
const FAIL_PER_MILLE: u64 = 150;
/// The takeover's lease ttl.
const TAKEOVER_TTL: Duration = Duration::from_millis(1_500);

fn main() {
    let runtime = runtime();
    if let Ok(spec) = std::env::var(CHILD) {
        runtime.block_on(child(&spec));
        return;
    }
    let seed = seed("race");
    let dir = scratch("race");
    for db in databases("race", &dir) {
        let started = Instant::now();
        let report = runtime.block_on(racing(&db, &dir, seed));
        println!(
            "race {:<8} racing workers ... ok ({:.1?}): {report}",
            db.backend(),
            started.elapsed()
        );
        let started = Instant::now();
        let report = runtime.block_on(takeover(&db, &dir, seed));
        println!(
            "race {:<8} takeover ... ok ({:.1?}): {report}",
            db.backend(),
            started.elapsed()
        );
        let started = Instant::now();
        let report = runtime.block_on(paused(&db, &dir, seed));
        println!(
            "race {:<8} paused worker ... ok ({:.1?}): {report}",
            db.backend(),
            started.elapsed()
        );
        db.remove();
    }
    let _ = std::fs::remove_dir_all(&dir);
}

fn tag(test: &str) -> String {
    format!("{test}-{}-{}", std::process::id(), now_ms())
}

async fn racing(db: &Db, dir: &Path, seed: u64) -> String {
    let store = db.open().await;
    let tag = tag("race");
    let dir = &dir.join(&tag);
    std::fs::create_dir_all(dir).unwrap();
    let raw = dir.join(format!("raw-{}.log", db.backend()));
    let (expected, _) = reference(&store, &tag, &raw, seed).await;

    // Both processes start at the same moment, once both have started.
    let start = now_ms() + 700;
    let mut children: Vec<ChildGuard> = (0..PROCESSES)
        .map(|p| {
            ChildGuard::spawn(
                &format!(
                    "race|{p}|{tag}|{}|{}|{}",
                    raw.display(),
                    dir.display(),
                    db.describe()
                ),
                &[
                    ("AGENTSTATE_TEST_SEED", (seed ^ (p + 1)).to_string()),
                    ("AGENTSTATE_RACE_START", start.to_string()),
                ],
            )
        })
        .collect();
    let mut calls = Vec::new();
    for child in &mut children {
        let status = child
            .wait_for(Duration::from_secs(120))
            .unwrap_or_else(|| panic!("racing child {} did not end in 120 s", child.id()));
        assert!(
            status.success(),
            "racing child {} failed: {status}",
            child.id()
        );
        for line in child.rest() {
            if let Some(call) = line.strip_prefix("call ") {
                calls.push(call.to_owned());
            }
        }
    }

    // Every call: `worker call thread what result...`.
    let mut leased_calls = BTreeSet::new();
    let mut results: BTreeMap<&str, usize> = BTreeMap::new();
    for call in &calls {
        let parts: Vec<&str> = call.splitn(5, ' ').collect();
        let result = parts[4].split(' ').next().unwrap();
        assert!(
            matches!(
                result,
                "finished" | "notyet" | "exists" | "leased" | "failed"
            ),
            "a worker's call failed unexpectedly: {call}"
        );
        *results.entry(result).or_default() += 1;
        if result == "leased" {
            leased_calls.insert((parts[0].to_owned(), parts[1].to_owned()));
        }
    }
    assert_eq!(
        results.get("finished").copied(),
        Some((PROCESSES * TASKS * THREADS) as usize),
        "every worker saw every thread finished: {results:?}"
    );
    assert!(
        results.get("leased").copied().unwrap_or(0) > 0,
        "no worker was ever refused: the workers did not race ({results:?})"
    );

    // No node body of a thread ran in two workers at once; refused calls ran none.
    let mut events: BTreeMap<String, Vec<(u128, bool, String, String)>> = BTreeMap::new();
    for p in 0..PROCESSES {
        // A process whose workers lost every race ran no node body and wrote no log.
        let text = match std::fs::read_to_string(dir.join(format!("nodes-{p}.log"))) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
            Err(e) => panic!("reading process {p}'s node log: {e}"),
        };
        for line in text.lines() {
            let parts: Vec<&str> = line.split(' ').collect();
            let [what, thread, worker, call, nanos, _node] = parts[..] else {
                panic!("a malformed node line {line:?}")
            };
            assert!(
                !leased_calls.contains(&(worker.to_owned(), call.to_owned())),
                "worker `{worker}` was refused in call {call} but ran a node body in it: {line}\nits calls:\n{}\nits node bodies:\n{}",
                calls.iter().filter(|c| c.starts_with(&format!("{worker} "))).cloned().collect::<Vec<_>>().join("\n"),
                text.lines().filter(|l| l.contains(&format!(" {worker} "))).collect::<Vec<_>>().join("\n"),
            );
            events.entry(thread.to_owned()).or_default().push((
                nanos.parse().unwrap(),
                what == "enter",
                worker.to_owned(),
                line.to_owned(),
            ));
        }
    }
    let mut bodies = 0;
    let mut workers_per_thread = Vec::new();
    for (thread, mut events) in events {
        // At one instant, ends before starts (the body that ends hands over before the next).
        events.sort_by_key(|e| (e.0, e.1));
        let mut running: BTreeMap<String, i64> = BTreeMap::new();
        let mut workers = BTreeSet::new();
        for (_, enter, worker, line) in &events {
            if *enter {
                bodies += 1;
                workers.insert(worker.clone());
                if let Some((other, _)) = running.iter().find(|(w, n)| *w != worker && **n > 0) {
                    panic!(
                        "thread `{thread}`: worker `{worker}` ran a node body while worker `{other}` was running one: {line}"
                    );
                }
                *running.entry(worker.clone()).or_default() += 1;
            } else {
                *running.entry(worker.clone()).or_default() -= 1;
            }
        }
        assert!(
            running.values().all(|n| *n == 0),
            "thread `{thread}`: a node body did not end: {running:?}"
        );
        workers_per_thread.push(workers.len());
    }
    assert_eq!(workers_per_thread.len(), THREADS as usize);

    // Each thread: the uninterrupted run's state, no fork, every effect done exactly once.
    let raws = raw_executions(&raw);
    for t in 0..THREADS {
        let thread = format!("{tag}-{t}");
        let state = store.load::<Trip>(&thread).await.unwrap().state;
        assert_eq!(
            state, expected,
            "thread `{thread}` does not end as an uninterrupted run"
        );
        let journal = check_journal(&store, &thread).await;
        assert_eq!(
            check_effects(&store, &thread, &journal, &raws[&thread]).await,
            0,
            "thread `{thread}`: an effect ran twice though no worker died"
        );
        clean(&store, &thread).await;
    }
    let _ = std::fs::remove_file(&raw);
    format!(
        "{} calls ({results:?}), {bodies} node bodies, workers that ran node bodies per thread {workers_per_thread:?}",
        calls.len()
    )
}

async fn takeover(db: &Db, dir: &Path, seed: u64) -> String {
    let store = db.open().await;
    let tag = tag("takeover");
    let dir = &dir.join(&tag);
    std::fs::create_dir_all(dir).unwrap();
    let raw = dir.join(format!("raw-takeover-{}.log", db.backend()));
    let (expected, _) = reference(&store, &tag, &raw, seed).await;
    let thread = format!("{tag}-held");

    let mut holder = ChildGuard::spawn(
        &format!(
            "hold|0|{thread}|{}|{}|{}",
            raw.display(),
            dir.display(),
            db.describe()
        ),
        &[("AGENTSTATE_TEST_SEED", seed.to_string())],
    );
    holder.expect_line("hanging", Duration::from_secs(60));
    let owner = format!("holder-{}", holder.id());
    let info = store.lease_info(&thread).await.unwrap();
    assert_eq!(info.map(|i| i.owner), Some(owner.clone()));
    holder.kill();
    let killed = Instant::now();

    // A worker that tries at once is refused, naming the dead holder (if the lease is still
    // held now, which it is unless this machine stalled for most of the ttl).
    // The lease expires `held_for` after the database answered, so after `asked` plus that.
    let asked = Instant::now();
    let info = store.lease_info(&thread).await.unwrap();
    let held_for = info.as_ref().map_or(Duration::ZERO, |i| i.expires_in());
    let mut refused_at_once = false;
    if held_for > Duration::from_millis(300) {
        let outside = Arc::new(Outside {
            store: store.clone(),
            thread: thread.clone(),
            raw: raw.clone(),
            nodes: Some(dir.join("nodes-early.log")),
            worker: "early".into(),
            call: Arc::new(AtomicU64::new(0)),
            fail_per_mille: 0,
            hang: None,
            pause: None,
            rng: Mutex::new(Rng::new(seed)),
        });
        let error = trip(outside, TAKEOVER_TTL, Durability::Sync)
            .resume(&thread)
            .await
            .unwrap_err();
        assert_eq!(error.category(), "thread_leased", "{error}");
        assert!(
            matches!(&error, DurableError::Store(agentstate_store::StoreError::Leased { owner: o, .. }) if *o == owner),
            "the refusal names the dead holder: {error}"
        );
        assert!(error.to_string().contains(&thread), "{error}");
        assert!(
            !dir.join("nodes-early.log").exists(),
            "the refused worker ran a node body"
        );
        refused_at_once = true;
    }

    // Another process takes the thread over once the lease has lapsed, and finishes it.
    let mut taker = ChildGuard::spawn(
        &format!(
            "take|0|{thread}|{}|{}|{}",
            raw.display(),
            dir.display(),
            db.describe()
        ),
        &[("AGENTSTATE_TEST_SEED", seed.to_string())],
    );
    let took = taker.expect_line("took", Duration::from_secs(60));
    let finished_after = asked.elapsed();
    let after_kill = killed.elapsed();
    let status = taker.wait_for(Duration::from_secs(60)).unwrap();
    assert!(status.success(), "the taking child failed: {status}");
    // It cannot have run before the dead holder's lease lapsed (a small margin for the
    // clocks' millisecond rounding).
    assert!(
        finished_after + Duration::from_millis(20) >= held_for,
        "the thread was taken over {finished_after:?} after the kill, but the lease had {held_for:?} left"
    );
    let state = store.load::<Trip>(&thread).await.unwrap().state;
    assert_eq!(
        state, expected,
        "the taken-over thread does not end as an uninterrupted run"
    );
    let journal = check_journal(&store, &thread).await;
    let raws = raw_executions(&raw);
    let again = check_effects(&store, &thread, &journal, &raws[&thread]).await;
    // The hanging node's effects were journaled before it hung: the new worker got them back.
    for key in journal.iter().filter(|k| k.contains(":2.1/")) {
        assert_eq!(
            raws[&thread][key].len(),
            1,
            "effect `{key}` of the hanging node ran again after the takeover"
        );
    }
    clean(&store, &thread).await;
    let _ = std::fs::remove_file(&raw);
    format!(
        "holder killed with {held_for:?} of lease left, refused at once: {refused_at_once}, {took} (finished {after_kill:.0?} after the kill), {again} effects of the killed step ran again"
    )
}

/// A worker paused past its lease (SIGSTOP inside a step, after one of its node's effects) while
/// another takes the thread over and finishes it; continued (SIGCONT), it must not commit
/// anything: the thread's journal is the taker's, unforked, and its state the uninterrupted
/// run's.
///
/// The step is `join`, which runs alone, so that the stopped worker is not in the middle of a
/// transaction of several statements, as a parallel node's ledger insert is (a `create` of the
/// store): a PostgreSQL client stopped there keeps its locks, and the taker, inserting the same
/// key when it runs that effect again, would wait for as long as the worker is stopped.
async fn paused(db: &Db, dir: &Path, seed: u64) -> String {
    let store = db.open().await;
    let tag = tag("paused");
    let dir = &dir.join(&tag);
    std::fs::create_dir_all(dir).unwrap();
    let raw = dir.join("raw.log");
    let (expected, _) = reference(&store, &tag, &raw, seed).await;
    let thread = format!("{tag}-held");
    let spec = |role: &str| {
        format!(
            "{role}|0|{thread}|{}|{}|{}",
            raw.display(),
            dir.display(),
            db.describe()
        )
    };
    let env = [("AGENTSTATE_TEST_SEED", seed.to_string())];

    let mut sleeper = ChildGuard::spawn(&spec("pause"), &env);
    sleeper.expect_line("paused", Duration::from_secs(60));
    signal(&sleeper, "-STOP");
    let mut taker = ChildGuard::spawn(&spec("take"), &env);
    let took = taker.expect_line("took", Duration::from_secs(60));
    let status = taker.wait_for(Duration::from_secs(60)).unwrap();
    assert!(status.success(), "the taking child failed: {status}");
    let version = store.info(&thread).await.unwrap().version;

    // The paused worker goes on: it must be refused.
    std::fs::write(dir.join("go-on"), "").unwrap();
    signal(&sleeper, "-CONT");
    let outcome = sleeper.expect_line("outcome", Duration::from_secs(60));
    assert!(
        !outcome.starts_with("outcome ok"),
        "a worker paused past its lease finished the run the taker had finished: {outcome}"
    );
    let status = sleeper.wait_for(Duration::from_secs(60)).unwrap();
    assert!(status.success(), "the paused child failed: {status}");
    assert_eq!(
        store.info(&thread).await.unwrap().version,
        version,
        "the paused worker appended to the thread after the takeover"
    );
    let state = store.load::<Trip>(&thread).await.unwrap().state;
    assert_eq!(
        state, expected,
        "the taken-over thread does not end as an uninterrupted run"
    );
    let journal = check_journal(&store, &thread).await;
    let raws = raw_executions(&raw);
    let again = check_effects(&store, &thread, &journal, &raws[&thread]).await;
    clean(&store, &thread).await;
    let refused = outcome.split(' ').nth(1).unwrap_or_default().to_owned();
    format!("{took}; the paused worker, continued, was refused with `{refused}`; {again} effects ran a second time (the paused worker's work once it went on, absorbed by the ledger)")
}

/// Sends a signal (`-STOP`, `-CONT`) to a child.
fn signal(child: &ChildGuard, signal: &str) {
    // The shell's own `kill` (no `kill` binary needed).
    let status = std::process::Command::new("sh")
        .args(["-c", &format!("kill {signal} {}", child.id())])
        .status()
        .expect("`sh` runs");
    assert!(status.success(), "kill {signal} {} failed", child.id());
}

/// A child: `race` (racing tasks), `hold` (runs until a node hangs), `pause` (runs until a node
/// waits for the gate file), `take` (resumes the held thread, retrying while it is leased).
async fn child(spec: &str) {
    let parts: Vec<String> = spec.splitn(6, '|').map(str::to_owned).collect();
    let [role, p, name, raw, dir, db] = &parts[..] else {
        panic!("a malformed child spec {spec:?}")
    };
    let (role, name): (&'static str, &str) = (Box::leak(role.clone().into_boxed_str()), name);
    let raw: std::path::PathBuf = raw.into();
    let db = Db::parse(db);
    let p: u64 = p.parse().unwrap();
    let seed: u64 = std::env::var("AGENTSTATE_TEST_SEED")
        .unwrap()
        .parse()
        .unwrap();
    let store = db.open().await;
    let nodes = Path::new(dir).join(match role {
        "race" => format!("nodes-{p}.log"),
        other => format!("nodes-{other}.log"),
    });
    let gate = Path::new(dir).join("go-on");
    let outside = move |thread: &str, worker: String, call: Arc<AtomicU64>, rng: u64| Outside {
        store: store.clone(),
        thread: thread.to_owned(),
        raw: raw.clone(),
        nodes: Some(nodes.clone()),
        worker,
        call,
        fail_per_mille: if role == "race" { FAIL_PER_MILLE } else { 0 },
        hang: (role == "hold").then_some("hotel"),
        pause: (role == "pause").then(|| ("join", gate.clone())),
        rng: Mutex::new(Rng::new(rng)),
    };
    match role {
        "hold" => {
            let worker = format!("holder-{}", std::process::id());
            let graph = trip(
                Arc::new(outside(name, worker, Default::default(), seed)),
                TAKEOVER_TTL,
                Durability::Sync,
            );
            let outcome = graph.start(name, Trip::default()).await;
            panic!("the holding run ended: {outcome:?}");
        }
        "pause" => {
            let worker = format!("paused-{}", std::process::id());
            let graph = trip(
                Arc::new(outside(name, worker, Default::default(), seed)),
                TAKEOVER_TTL,
                Durability::Sync,
            );
            match graph.start(name, Trip::default()).await {
                Ok(outcome) => say(&format!("outcome ok {outcome:?}")),
                Err(e) => say(&format!("outcome {} {e}", e.category())),
            }
        }
        "take" => {
            let worker = format!("taker-{}", std::process::id());
            let graph = trip(
                Arc::new(outside(name, worker, Default::default(), seed)),
                TAKEOVER_TTL,
                Durability::Sync,
            );
            let mut refused = 0;
            loop {
                match graph.resume(name).await {
                    Ok(outcome) if finished(&outcome) => break,
                    Ok(outcome) => panic!("the resumed run ended unfinished: {outcome:?}"),
                    Err(e) if leased(&e) => {
                        refused += 1;
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                    Err(e) => panic!("resuming the held thread: {e} ({})", e.category()),
                }
            }
            say(&format!("took over after {refused} refusals"));
        }
        "race" => {
            let start: u64 = std::env::var("AGENTSTATE_RACE_START")
                .unwrap()
                .parse()
                .unwrap();
            tokio::time::sleep(Duration::from_millis(start.saturating_sub(now_ms()))).await;
            let outside = Arc::new(outside);
            let name = name.to_owned();
            let mut tasks = Vec::new();
            for t in 0..TASKS {
                let outside = Arc::clone(&outside);
                let tag = name.clone();
                tasks.push(tokio::spawn(async move {
                    let worker = format!("p{p}-t{t}");
                    let call = Arc::new(AtomicU64::new(0));
                    let mut rng = Rng::new(seed ^ (t << 8));
                    let mut order: Vec<u64> = (0..THREADS).collect();
                    for i in (1..order.len()).rev() {
                        order.swap(i, rng.below(i as u64 + 1) as usize);
                    }
                    let mut lines = Vec::new();
                    for t in order {
                        let thread = format!("{tag}-{t}");
                        let graph = trip(
                            Arc::new(outside(
                                &thread,
                                worker.clone(),
                                Arc::clone(&call),
                                rng.next(),
                            )),
                            RACE_TTL,
                            Durability::Sync,
                        );
                        race_thread(&graph, &thread, &worker, &call, &mut rng, &mut lines).await;
                    }
                    lines
                }));
            }
            for task in tasks {
                for line in task.await.unwrap() {
                    say(&line);
                }
            }
        }
        other => panic!("unknown child role {other:?}"),
    }
}

/// How a racing worker treats a thread: `start_as` it with a run id of its own; if another
/// created it, `resume` until it is finished; the creator refused by a resumer (which may have
/// started the creator's run itself: the run's id is recorded with the thread) retries
/// `run_as` with the same id, which never starts a second run.
async fn race_thread(
    graph: &agentstate_graph::durable::DurableGraph<
        Trip,
        &'static str,
        agentstate_store::AnyBackend,
    >,
    thread: &str,
    worker: &str,
    call: &AtomicU64,
    rng: &mut Rng,
    lines: &mut Vec<String>,
) {
    #[derive(PartialEq)]
    enum Role {
        First,
        Creator,
        Resumer,
    }
    let mut role = Role::First;
    // No `:` in it: an effect's key is `{run_id}:{place}`, which the nodes split at the first one.
    let run_id = format!("{worker}-{thread}").replace(':', "-");
    for _ in 0..10_000 {
        let n = call.fetch_add(1, Ordering::SeqCst) + 1;
        let (what, result) = match role {
            Role::First => (
                "start",
                graph.start_as(thread, &run_id, Trip::default()).await,
            ),
            Role::Creator => ("run", graph.run_as(thread, &run_id, ()).await),
            Role::Resumer => ("resume", graph.resume(thread).await),
        };
        let result = match result {
            Ok(outcome) if finished(&outcome) => "finished".to_owned(),
            Ok(_) => "notyet".to_owned(),
            Err(e) if e.category() == "thread_exists" && role == Role::First => {
                role = Role::Resumer;
                "exists".to_owned()
            }
            Err(e) if leased(&e) => {
                if role == Role::First {
                    role = Role::Creator;
                }
                if e.to_string().contains(thread) {
                    "leased".to_owned()
                } else {
                    format!("error the refusal does not name the thread: {e}")
                }
            }
            Err(DurableError::Run(e)) => {
                role = Role::Resumer;
                format!("failed {}", e.category())
            }
            Err(e) => format!("error {}: {e}", e.category()),
        };
        lines.push(format!("call {worker} {n} {thread} {what} {result}"));
        if result == "finished" {
            return;
        }
        tokio::time::sleep(Duration::from_millis(1 + rng.below(4))).await;
    }
    lines.push(format!("call {worker} 0 {thread} - error: never finished"));
}
