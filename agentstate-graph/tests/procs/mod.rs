//! What the crash and race tests share: the databases they run on (a SQLite file, and
//! PostgreSQL when `AGENTSTATE_POSTGRES_URL` is set), child processes (this test binary run
//! again, killed when dropped), a seeded random source, the trip graph whose effects do their
//! outside work on a ledger, and the checks of a thread's journal.

#![allow(dead_code)] // each test binary uses its own part

use agentstate::AgentState;
use agentstate_graph::durable::{Durability, DurableError, DurableGraph, Outcome};
use agentstate_graph::{BoxError, Context, Graph, Routes, END};
use agentstate_store::AnyBackend;
use agentstate_store::{AnyStore, HistoryQuery, StoreError, ThreadQuery};
use serde::{Deserialize, Serialize};
use serde_json::{json, Map};
use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// The environment variable that makes this binary a child: its value says what to do.
pub const CHILD: &str = "AGENTSTATE_GRAPH_CHILD";

// ---------------------------------------------------------------------------------------------
// Databases.

/// Where a case's store is.
#[derive(Debug, Clone)]
pub enum Db {
    Sqlite(PathBuf),
    Postgres { url: String, schema: String },
}

impl Db {
    /// As text, for a child's command line.
    pub fn describe(&self) -> String {
        match self {
            Db::Sqlite(path) => format!("sqlite|{}", path.display()),
            Db::Postgres { url, schema } => format!("postgres|{schema}|{url}"),
        }
    }

    pub fn parse(text: &str) -> Db {
        if let Some(path) = text.strip_prefix("sqlite|") {
            return Db::Sqlite(path.into());
        }
        let rest = text.strip_prefix("postgres|").expect("a db description");
        let (schema, url) = rest.split_once('|').expect("schema|url");
        Db::Postgres {
            url: url.into(),
            schema: schema.into(),
        }
    }

    pub fn backend(&self) -> &'static str {
        match self {
            Db::Sqlite(_) => "sqlite",
            Db::Postgres { .. } => "postgres",
        }
    }

    pub async fn open(&self) -> AnyStore {
        match self {
            Db::Sqlite(path) => agentstate_store::SqliteStore::open(path)
                .unwrap_or_else(|e| panic!("opening {}: {e}", path.display()))
                .into(),
            Db::Postgres { url, schema } => agentstate_store::PostgresStore::connect_with(
                url,
                agentstate_store::postgres::PostgresOptions {
                    schema: schema.clone(),
                    max_connections: 8,
                    ..Default::default()
                },
            )
            .await
            .unwrap_or_else(|e| panic!("the PostgreSQL server at AGENTSTATE_POSTGRES_URL: {e}"))
            .into(),
        }
    }

    /// Removes what the case left (the SQLite file; on PostgreSQL the case deletes its threads).
    pub fn remove(&self) {
        if let Db::Sqlite(path) = self {
            for suffix in ["", "-wal", "-shm"] {
                let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
            }
        }
    }
}

/// The databases to run on: a new SQLite file, and PostgreSQL (schema `schema`) when
/// `AGENTSTATE_POSTGRES_URL` is set. Under `CI` a missing PostgreSQL is a failure; otherwise one
/// line says what was skipped.
pub fn databases(test: &str, dir: &Path) -> Vec<Db> {
    let mut dbs = vec![Db::Sqlite(dir.join(format!("{test}.db")))];
    let ci = std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false" && v != "0");
    match std::env::var("AGENTSTATE_POSTGRES_URL") {
        Ok(url) => dbs.push(Db::Postgres {
            url,
            schema: format!("agentstate_graph_{test}"),
        }),
        Err(_) if ci => panic!(
            "CI is set but AGENTSTATE_POSTGRES_URL is not: the PostgreSQL {test} tests must run in CI"
        ),
        Err(_) => println!("{test}: postgres skipped: AGENTSTATE_POSTGRES_URL is not set"),
    }
    dbs
}

/// A fresh directory for a test's files.
pub fn scratch(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "agentstate-graph-{test}-{}-{}",
        std::process::id(),
        now_ms()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Milliseconds since the Unix epoch (the clock every process of the machine shares).
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// Nanoseconds since the Unix epoch.
pub fn now_ns() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0)
}

// ---------------------------------------------------------------------------------------------
// Randomness and child processes.

/// SplitMix64: a small seeded random source (the seed is printed, so a failure repeats).
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }

    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `0..n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// The seed: `AGENTSTATE_TEST_SEED` if set, else from the clock. A panic hook prints it again
/// after any failure.
pub fn seed(test: &'static str) -> u64 {
    let seed = std::env::var("AGENTSTATE_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| now_ns() as u64);
    println!("{test}: seed {seed} (AGENTSTATE_TEST_SEED={seed} repeats this run)");
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        default(info);
        eprintln!("{test} failed with seed {seed}: AGENTSTATE_TEST_SEED={seed} repeats it");
    }));
    seed
}

/// The runtime of a test binary and of its children.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// The paths of a case's `raw` log and `release` file in `dir`, both removed: `{case}.log`
/// and `{case}.release`.
pub fn raw_and_release(dir: &Path, case: &str) -> (PathBuf, PathBuf) {
    let raw = dir.join(format!("{case}.log"));
    let release = dir.join(format!("{case}.release"));
    let _ = std::fs::remove_file(&raw);
    let _ = std::fs::remove_file(&release);
    (raw, release)
}

/// A child's spec: `{prefix}|{raw}|{release}|{db}`.
pub fn release_spec(prefix: &str, raw: &Path, release: &Path, db: &Db) -> String {
    format!(
        "{prefix}|{}|{}|{}",
        raw.display(),
        release.display(),
        db.describe()
    )
}

/// Spawns a child with `spec` and waits until it began (printed `go`).
pub fn started_child(spec: &str) -> ChildGuard {
    let child = ChildGuard::spawn(spec, &[]);
    child.expect_line("go", Duration::from_secs(60));
    child
}

/// Spawns a child with `spec` that resumes a killed child's run, and waits until it exited
/// with success (at most two minutes).
pub fn resume_in_child(spec: &str) {
    let mut child = started_child(spec);
    let status = child.wait_for(Duration::from_secs(120));
    assert!(
        status.is_some_and(|s| s.success()),
        "the resuming child {} did not finish: {status:?}",
        child.id()
    );
}

/// A child process (this test binary, with [`CHILD`] set), killed and reaped when dropped; its
/// stdout lines arrive on a channel.
pub struct ChildGuard {
    child: Child,
    lines: Receiver<String>,
}

impl ChildGuard {
    pub fn spawn(spec: &str, env: &[(&str, String)]) -> ChildGuard {
        let mut command = Command::new(std::env::current_exe().unwrap());
        command
            .env(CHILD, spec)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        for (key, value) in env {
            command.env(key, value);
        }
        let mut child = command
            .spawn()
            .expect("the test binary runs again as a child");
        let stdout = child.stdout.take().unwrap();
        let (send, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if send.send(line).is_err() {
                    break;
                }
            }
        });
        ChildGuard { child, lines }
    }

    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// The next line the child printed, waiting at most `timeout`; `None` if it closed its
    /// stdout (it exited) or the time ran out.
    pub fn line(&self, timeout: Duration) -> Option<String> {
        self.lines.recv_timeout(timeout).ok()
    }

    /// Waits for a line starting with `prefix` (others are skipped), at most `timeout`.
    pub fn expect_line(&self, prefix: &str, timeout: Duration) -> String {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) if line.starts_with(prefix) => return line,
                Ok(_) => continue,
                Err(RecvTimeoutError::Timeout) => {
                    panic!(
                        "child {} printed no `{prefix}` line in {timeout:?}",
                        self.id()
                    )
                }
                Err(RecvTimeoutError::Disconnected) => {
                    panic!("child {} exited before printing `{prefix}`", self.id())
                }
            }
        }
    }

    /// Waits until the child exits or `timeout` passes: its exit status if it exited.
    pub fn wait_for(&mut self, timeout: Duration) -> Option<std::process::ExitStatus> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return Some(status);
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// SIGKILL, and reap.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// The rest of the lines the child printed, up to its stdout's end (call once it
    /// exited: the lines still in the pipe are read to its end).
    pub fn rest(&self) -> Vec<String> {
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut lines = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => lines.push(line),
                Err(RecvTimeoutError::Disconnected) => return lines,
                Err(RecvTimeoutError::Timeout) => {
                    panic!("child {}'s stdout did not end", self.id())
                }
            }
        }
    }
}

impl Drop for ChildGuard {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Waits until no worker holds thread `thread`'s lease (a killed child's lapses within its
/// ttl), or the thread does not exist yet.
pub async fn lease_lapsed(store: &AnyStore, thread: &str) {
    loop {
        match store.lease_info(thread).await {
            Ok(Some(info)) => {
                tokio::time::sleep(info.expires_in() + Duration::from_millis(2)).await
            }
            Ok(None) => break,
            Err(e) if e.category() == "thread_not_found" => break,
            Err(e) => panic!("lease_info: {e}"),
        }
    }
}

/// Prints one line and flushes it (a child's report to its parent).
pub fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{line}").unwrap();
    out.flush().unwrap();
}

// ---------------------------------------------------------------------------------------------
// The trip graph: 8 steps, two of them parallel, 11 effects, each doing outside work on a ledger.

/// The graph's state.
#[derive(AgentState, Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Trip {
    /// Every effect's receipt, node by node.
    #[reducer(append)]
    pub log: Vec<String>,
    pub bills: u32,
    pub done: bool,
}

/// A ledger row: the outside work of one effect, a thread of the store whose id is the
/// effect's idempotency key (creating it twice is refused: the insert is idempotent).
#[derive(AgentState, Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Receipt {
    pub key: String,
    pub pid: u32,
}

/// The number of effects of one trip run.
pub const EFFECTS: usize = 11;

/// Where a worker's nodes do their outside work and report what they do.
pub struct Outside {
    pub store: AnyStore,
    /// The thread the run is on (the ledger rows name it).
    pub thread: String,
    /// Every execution of an effect's work appends `thread key pid` here, before the work.
    pub raw: PathBuf,
    /// Every node body appends `enter|exit thread worker call nanos` here (race test).
    pub nodes: Option<PathBuf>,
    pub worker: String,
    /// The call (start/resume attempt) the worker is making.
    pub call: Arc<AtomicU64>,
    /// The chance in 1,000 that a node body fails after its effects (a transient failure).
    pub fail_per_mille: u64,
    /// A node that, after its effects, prints `hanging` and hangs until the process is killed.
    pub hang: Option<&'static str>,
    /// A node that, after its first effect, prints `paused` and waits until this file exists
    /// (the parent stops the process meanwhile: a worker paused past its lease).
    pub pause: Option<(&'static str, PathBuf)>,
    pub rng: Mutex<Rng>,
}

/// Appends one line to `path` in one write (lines of several processes do not interleave).
pub fn append_line(path: &Path, line: &str) {
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .unwrap();
    // One write of the whole line: lines of several processes do not interleave.
    file.write_all(format!("{line}\n").as_bytes()).unwrap();
}

impl Outside {
    /// The outside work of an effect: counted, then done once by the ledger (an idempotent
    /// insert keyed by the idempotency key), then a short wait (the service's answer on its
    /// way back) during which a kill leaves work done but not journaled.
    async fn work(&self, name: &str, key: String) -> Result<String, std::io::Error> {
        append_line(
            &self.raw,
            &format!("{} {key} {}", self.thread, std::process::id()),
        );
        let mut meta = Map::new();
        meta.insert("ledger".into(), json!(self.thread));
        let row = Receipt {
            key: key.clone(),
            pid: std::process::id(),
        };
        match self
            .store
            .create_with(&format!("ledger {key}"), row, meta)
            .await
        {
            Ok(_) => {}
            Err(e) if e.category() == "thread_exists" => {}
            Err(e) => return Err(std::io::Error::other(e)),
        }
        let wait = self.rng.lock().unwrap().below(3);
        tokio::time::sleep(Duration::from_millis(wait)).await;
        // The receipt does not depend on the run id, so runs compare.
        let place = key.split_once(':').map_or(key.as_str(), |(_, p)| p);
        Ok(format!("{name}@{place}"))
    }

    fn log_node(&self, what: &str, node: &str) {
        if let Some(path) = &self.nodes {
            append_line(
                path,
                &format!(
                    "{what} {} {} {} {} {node}",
                    self.thread,
                    self.worker,
                    self.call.load(Ordering::SeqCst),
                    now_ns()
                ),
            );
        }
    }

    /// A node body: its effects in order, a short pause, maybe a transient failure or a hang.
    async fn body(
        &self,
        cx: &Context,
        node: &str,
        effects: &[&str],
    ) -> Result<Vec<String>, BoxError> {
        self.log_node("enter", node);
        let result = self.body_inner(cx, node, effects).await;
        self.log_node("exit", node);
        result
    }

    async fn body_inner(
        &self,
        cx: &Context,
        node: &str,
        effects: &[&str],
    ) -> Result<Vec<String>, BoxError> {
        let mut receipts = Vec::new();
        for name in effects {
            let receipt: String = cx.effect(name, |key| self.work(name, key)).await?;
            receipts.push(format!("{node}:{receipt}"));
            if let Some((paused, gate)) = &self.pause {
                if *paused == node && receipts.len() == 1 {
                    say("paused");
                    while !gate.exists() {
                        tokio::time::sleep(Duration::from_millis(5)).await;
                    }
                }
            }
        }
        if self.hang == Some(node) {
            say("hanging");
            tokio::time::sleep(Duration::from_secs(600)).await;
        }
        let (pause, fail) = {
            let mut rng = self.rng.lock().unwrap();
            (rng.below(3), rng.below(1000) < self.fail_per_mille)
        };
        tokio::time::sleep(Duration::from_millis(pause)).await;
        if fail {
            return Err(format!("node `{node}` failed on purpose (a transient failure)").into());
        }
        Ok(receipts)
    }
}

/// The trip graph: `plan`; `flight`, `hotel`, `car` in parallel; `join`; `bill` three times;
/// `notify` and `audit` in parallel; `finish`.
pub fn trip_graph(outside: Arc<Outside>) -> Graph<Trip> {
    let node = |name: &'static str, effects: &'static [&'static str]| {
        let outside = Arc::clone(&outside);
        move |s: Arc<Trip>, cx: Context| {
            let outside = Arc::clone(&outside);
            async move {
                let log = outside.body(&cx, name, effects).await?;
                let mut update = TripUpdate::default().log(log);
                if name == "bill" {
                    update = update.bills(s.bills + 1);
                }
                if name == "finish" {
                    update = update.done(true);
                }
                Ok::<_, BoxError>(update)
            }
        }
    };
    Graph::builder()
        .node("plan", node("plan", &["reserve"]))
        .node("flight", node("flight", &["book flight"]))
        .node("hotel", node("hotel", &["book hotel", "pay deposit"]))
        .node("car", node("car", &["rent car"]))
        .node("join", node("join", &["confirm"]))
        .node("bill", node("bill", &["charge"]))
        .node("notify", node("notify", &["email", "sms"]))
        .node("audit", node("audit", &[]))
        .node("finish", node("finish", &[]))
        .entry("plan")
        .edges("plan", ["flight", "hotel", "car"])
        .edge("flight", "join")
        .edge("hotel", "join")
        .edge("car", "join")
        .edge("join", "bill")
        .route("bill", |s: &Trip| {
            if s.bills < 3 {
                Routes::from("bill")
            } else {
                Routes::from(["notify", "audit"])
            }
        })
        .edge("notify", "finish")
        .edge("audit", "finish")
        .edge("finish", END)
        .build()
        .expect("the trip graph builds")
}

/// The trip graph on `store` for worker `worker` with lease ttl `ttl`.
pub fn trip(
    outside: Arc<Outside>,
    ttl: Duration,
    durability: Durability,
) -> DurableGraph<Trip, &'static str, AnyBackend> {
    let store = outside.store.clone();
    let worker = outside.worker.clone();
    trip_graph(outside)
        .durable(&store)
        .worker(worker)
        .lease_ttl(ttl)
        .durability(durability)
}

pub fn durability(name: &str) -> Durability {
    match name {
        "async" => Durability::Async,
        "exit" => Durability::Exit,
        _ => Durability::Sync,
    }
}

/// The uninterrupted run, in this process, on thread `{tag}-reference` (checked, then
/// deleted): its final state and how long it took.
pub async fn reference(store: &AnyStore, tag: &str, raw: &Path, seed: u64) -> (Trip, Duration) {
    let thread = format!("{tag}-reference");
    let outside = Arc::new(Outside {
        store: store.clone(),
        thread: thread.clone(),
        raw: raw.to_owned(),
        nodes: None,
        worker: "reference".into(),
        call: Arc::new(AtomicU64::new(0)),
        fail_per_mille: 0,
        hang: None,
        pause: None,
        rng: Mutex::new(Rng::new(seed)),
    });
    let started = Instant::now();
    let outcome = trip(outside, Duration::from_secs(30), Durability::Sync)
        .start(&thread, Trip::default())
        .await
        .unwrap();
    let took = started.elapsed();
    assert!(
        finished(&outcome),
        "the reference run finished: {outcome:?}"
    );
    let expected = outcome.state().clone();
    assert_eq!(expected.log.len(), EFFECTS, "{expected:?}");
    let journal = check_journal(store, &thread).await;
    let raws = raw_executions(raw);
    assert_eq!(
        check_effects(store, &thread, &journal, &raws[&thread]).await,
        0,
        "an uninterrupted run ran an effect twice"
    );
    clean(store, &thread).await;
    (expected, took)
}

/// Whether an outcome is the trip's end.
pub fn finished(outcome: &Outcome<Trip>) -> bool {
    matches!(outcome, Outcome::Finished { state, .. } if state.done)
}

// ---------------------------------------------------------------------------------------------
// Checks.

/// A thread's journal, checked: versions 1, 2, 3... with no gap; one run; its input once; its
/// steps numbered 1, 2, 3... once each, in order; each effect key journaled once. Returns the
/// effect keys.
pub async fn check_journal(store: &AnyStore, thread: &str) -> BTreeSet<String> {
    let mut entries = Vec::new();
    loop {
        let mut query = HistoryQuery::oldest(500);
        if let Some(last) = entries.last().map(|e: &agentstate_store::EntryInfo| e.seq) {
            query = query.after(last);
        }
        let page = store.history(thread, query).await.unwrap();
        let done = page.len() < 500;
        entries.extend(page);
        if done {
            break;
        }
    }
    for (at, entry) in entries.iter().enumerate() {
        assert_eq!(
            entry.seq,
            at as u64 + 1,
            "thread `{thread}`: the versions are not contiguous"
        );
    }
    let mut runs = BTreeSet::new();
    let mut inputs = 0;
    let mut steps = Vec::new();
    let mut effects = BTreeSet::new();
    for entry in &entries {
        let meta = entry.extra.get("agentstate_graph").unwrap_or_else(|| {
            panic!("thread `{thread}`: entry {} has no run metadata", entry.seq)
        });
        runs.insert(entry.run_id.clone());
        match meta["entry"].as_str() {
            Some("input") => inputs += 1,
            Some("step") => steps.push(meta["step"].as_u64().unwrap()),
            // A failed attempt of a step (the racers' nodes fail at random): journaled, and
            // the step runs again.
            Some("failed") => {}
            // A finished task of a parallel step, kept so that a resume does not run it again.
            Some("task") => {}
            Some("effect") => {
                let key = meta["key"].as_str().unwrap().to_owned();
                assert!(
                    effects.insert(key.clone()),
                    "thread `{thread}`: effect `{key}` was journaled twice (entry {})",
                    entry.seq
                );
            }
            other => panic!(
                "thread `{thread}`: unexpected entry {other:?} at {}",
                entry.seq
            ),
        }
    }
    assert_eq!(runs.len(), 1, "thread `{thread}`: several runs: {runs:?}");
    assert_eq!(inputs, 1, "thread `{thread}`: {inputs} input entries");
    assert_eq!(
        steps,
        (1..=8).collect::<Vec<u64>>(),
        "thread `{thread}`: a step is missing or forked (each step number once, in order)"
    );
    let run_id = runs.into_iter().next().flatten().unwrap();
    // The effects' full keys.
    effects
        .into_iter()
        .map(|place| format!("{run_id}:{place}"))
        .collect()
}

/// The ledger rows of `thread`'s effects: their keys.
pub async fn ledger(store: &AnyStore, thread: &str) -> BTreeSet<String> {
    let mut keys = BTreeSet::new();
    let mut query = ThreadQuery::first(500).with("ledger", json!(thread));
    loop {
        let page = store.list(query.clone()).await.unwrap();
        for info in &page {
            keys.insert(info.id.strip_prefix("ledger ").unwrap().to_owned());
        }
        match page.last() {
            Some(last) if page.len() == 500 => {
                query = ThreadQuery::first(500)
                    .with("ledger", json!(thread))
                    .after(last.id.clone())
            }
            _ => break,
        }
    }
    keys
}

/// The raw executions of each effect's work, by thread then key: the processes that ran it.
pub fn raw_executions(path: &Path) -> BTreeMap<String, BTreeMap<String, Vec<u32>>> {
    let mut out: BTreeMap<String, BTreeMap<String, Vec<u32>>> = BTreeMap::new();
    let text = std::fs::read_to_string(path).unwrap_or_default();
    for line in text.lines() {
        let mut parts = line.split(' ');
        let (Some(thread), Some(key), Some(pid)) = (parts.next(), parts.next(), parts.next())
        else {
            panic!("a malformed raw line {line:?}")
        };
        out.entry(thread.to_owned())
            .or_default()
            .entry(key.to_owned())
            .or_default()
            .push(pid.parse().unwrap());
    }
    out
}

/// Every effect's outside work done exactly once: the journal's effect keys are the ledger's
/// (no work for an effect the journal does not hold, none journaled without its work), 11 of
/// them. Returns the raw executions beyond one per key (a kill between the work and its
/// journal entry), having checked that a key ran again only in another process.
pub async fn check_effects(
    store: &AnyStore,
    thread: &str,
    journal: &BTreeSet<String>,
    raw: &BTreeMap<String, Vec<u32>>,
) -> usize {
    let ledger = ledger(store, thread).await;
    assert_eq!(
        &ledger, journal,
        "thread `{thread}`: the ledger's effects are not the journal's"
    );
    assert_eq!(
        journal.len(),
        EFFECTS,
        "thread `{thread}`: effects journaled"
    );
    let ran: BTreeSet<String> = raw.keys().cloned().collect();
    assert_eq!(
        &ran, journal,
        "thread `{thread}`: the effects that ran are not the journal's"
    );
    let mut again = 0;
    for (key, pids) in raw {
        let distinct: BTreeSet<_> = pids.iter().collect();
        assert_eq!(
            distinct.len(),
            pids.len(),
            "thread `{thread}`: effect `{key}` ran twice in one process ({pids:?})"
        );
        again += pids.len() - 1;
    }
    again
}

/// Deletes a thread and its ledger rows (PostgreSQL keeps its schema between runs).
pub async fn clean(store: &AnyStore, thread: &str) {
    for key in ledger(store, thread).await {
        store.delete(&format!("ledger {key}")).await.unwrap();
    }
    store.delete(thread).await.unwrap();
}

/// Whether an error is the store refusing because another worker holds the thread.
pub fn leased(error: &DurableError<Trip>) -> bool {
    matches!(error, DurableError::Store(StoreError::Leased { .. }))
}
