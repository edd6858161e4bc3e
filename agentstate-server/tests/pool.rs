//! Crashes and scale on PostgreSQL: two server processes (API only, on 127.0.0.1) and three
//! worker processes (this test binary run again as each) on one database, driven over HTTP. A worker killed with
//! `kill -9` in the middle of a run (a node that ran its effect, then blocks): another worker
//! finishes it, the effect ran once and no committed step ran again. 200 runs on 50 threads:
//! never two running runs on one thread, every run reaches a final status, each step ran once.
//! A worker paused (`SIGSTOP`) past its lease mid-run and continued once another finished the
//! run writes nothing over it; a node that blocks its worker's thread past its run's deadline
//! does not keep the run (ended `timeout`) nor the workers (they go on claiming); a slow
//! reader of a run of 4,000 events of 1 KiB holds nothing back and gets them all in order.
//!
//! Without `AGENTSTATE_POSTGRES_URL` it prints one line and passes, unless `CI` is set (then it
//! fails). Its own main (no libtest harness): it re-executes itself as the servers and the
//! workers, and ends them (closing their standard input, or `kill -9`).

#[path = "support/postgres.rs"]
mod support;

use agentstate::AgentState;
use agentstate_graph::{BoxError, Context, Graph, END};
use agentstate_server::Server;
use agentstate_store::postgres::PostgresOptions;
use agentstate_store::PostgresStore;
use serde_json::{json, Value};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};

/// A job's state: what its nodes did.
#[derive(AgentState, Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
struct Job {
    /// Its thread's id (the runs' input).
    thread: String,
    #[reducer(append)]
    log: Vec<String>,
}

/// The environment variable that makes this binary a worker (its value: the schema).
const WORKER: &str = "AGENTSTATE_POOL_WORKER";
/// The environment variable that makes this binary a server (its value: the schema).
const SERVER: &str = "AGENTSTATE_POOL_SERVER";
/// The directory where the nodes leave their marks (shared by the processes).
const MARKS: &str = "AGENTSTATE_POOL_MARKS";

/// How many events of 1 KiB a run on a thread `chatty...` streams.
const CHATTY: usize = 4000;

/// Appends `line` to the file `name` in `dir`.
fn mark(dir: &Path, name: &str, line: &str) {
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join(name))
        .unwrap();
    writeln!(file, "{line}").unwrap();
}

fn lines(dir: &Path, name: &str) -> Vec<String> {
    std::fs::read_to_string(dir.join(name))
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// Two nodes: `first` (its mark: a committed step), then `pay`, whose effect leaves its mark
/// (with the process id) and which, on threads `stop...`, blocks after running it. Each node
/// holds a lock file of its thread while it runs: finding one held is two runs at once.
fn graph(dir: PathBuf) -> Result<Graph<Job>, Box<dyn std::error::Error>> {
    let (first_dir, pay_dir) = (dir.clone(), dir);
    Ok(Graph::builder()
        .node("first", move |s: Arc<Job>, cx: Context| {
            let dir = first_dir.clone();
            async move {
                let thread = s.thread.clone();
                // Threads `block...`: a node that blocks its thread (no cancellation reaches
                // it); its run is ended without it, and the next may run while it still blocks.
                let blocks = thread.starts_with("block");
                let lock = (!blocks).then(|| exclusive(&dir, &thread));
                mark(&dir, &format!("first-{thread}"), "ran");
                // Threads `chatty...`: many events of 1 KiB (for a slow reader).
                if thread.starts_with("chatty") {
                    for n in 0..CHATTY {
                        cx.custom("chunk", json!({"n": n, "pad": "x".repeat(1024)}));
                    }
                }
                if blocks && lines(&dir, &format!("first-{thread}")).len() == 1 {
                    std::thread::sleep(Duration::from_secs(5));
                }
                // Threads `mt...`: long enough for a second run to come while it runs.
                let long = thread.starts_with("mt");
                tokio::time::sleep(Duration::from_millis(if long { 300 } else { 5 })).await;
                drop(lock);
                Ok::<_, BoxError>(JobUpdate::default().log(vec!["first".into()]))
            }
        })
        .node("pay", move |s: Arc<Job>, cx: Context| {
            let dir = pay_dir.clone();
            async move {
                let thread = s.thread.clone();
                let halted = thread.starts_with("stop") || thread.starts_with("pause");
                let lock = (!halted).then(|| exclusive(&dir, &thread));
                let ran = Arc::new(AtomicBool::new(false));
                let (effect_ran, effect_dir, effect_thread) =
                    (Arc::clone(&ran), dir.clone(), thread.clone());
                let _: String = cx
                    .effect("pay", move |_key| async move {
                        let pid = std::process::id().to_string();
                        mark(&effect_dir, &format!("effect-{effect_thread}"), &pid);
                        effect_ran.store(true, Ordering::SeqCst);
                        Ok::<_, std::io::Error>("paid".to_owned())
                    })
                    .await?;
                if thread.starts_with("stop") && ran.load(Ordering::SeqCst) {
                    // Stopped here (killed, or its worker shut down): the effect is journaled,
                    // the step is not committed.
                    tokio::time::sleep(Duration::from_secs(600)).await;
                }
                if thread.starts_with("pause") && ran.load(Ordering::SeqCst) {
                    // Paused here (`SIGSTOP`) past its lease; continued, it goes on at once.
                    tokio::time::sleep(Duration::from_secs(2)).await;
                }
                drop(lock);
                Ok::<_, BoxError>(JobUpdate::default().log(vec!["pay".into()]))
            }
        })
        .entry("first")
        .edge("first", "pay")
        .edge("pay", END)
        .build()?)
}

/// A lock file of `thread`, removed when dropped; one already there is written down as a
/// violation (two runs of the thread at once).
struct Exclusive(PathBuf);

fn exclusive(dir: &Path, thread: &str) -> Exclusive {
    let path = dir.join(format!("lock-{thread}"));
    if std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&path)
        .is_err()
    {
        mark(dir, "violations", thread);
    }
    Exclusive(path)
}

impl Drop for Exclusive {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

async fn store(url: &str, schema: &str) -> PostgresStore {
    let options = PostgresOptions {
        schema: schema.to_owned(),
        ..PostgresOptions::default()
    };
    PostgresStore::connect_with(url, options).await.unwrap()
}

/// A server on `store`: workers on the queue (`workers` of them), a short lease and sweep.
fn server(store: &PostgresStore, dir: &Path, workers: usize) -> Server {
    let durable = graph(dir.to_owned())
        .unwrap()
        .durable(store)
        .lease_ttl(Duration::from_millis(900));
    Server::builder(store)
        .assistant("job", durable)
        .workers(workers)
        .sweep(Duration::from_millis(300), Duration::from_millis(900))
        .worker_timing(Duration::from_secs(1), Duration::from_secs(2))
        .build()
}

/// The runtime of a child process, and a future that ends when its standard input closes.
fn child() -> (tokio::runtime::Runtime, tokio::sync::oneshot::Receiver<()>) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let (closed, stdin_closed) = tokio::sync::oneshot::channel();
    std::thread::spawn(move || {
        let _ = std::io::copy(&mut std::io::stdin(), &mut std::io::sink());
        let _ = closed.send(());
    });
    (runtime, stdin_closed)
}

/// A worker process: four workers until its standard input closes, then a graceful shutdown.
fn worker(url: &str, schema: &str) {
    let dir = PathBuf::from(std::env::var(MARKS).unwrap());
    let (runtime, stdin_closed) = child();
    runtime.block_on(async {
        let store = store(url, schema).await;
        let workers = server(&store, &dir, 4).start_workers().unwrap();
        let _ = stdin_closed.await;
        workers.shutdown().await;
    });
}

/// A server process (no workers) on 127.0.0.1, its address its first line, until its standard
/// input closes.
fn serve(url: &str, schema: &str) {
    let dir = PathBuf::from(std::env::var(MARKS).unwrap());
    let (runtime, stdin_closed) = child();
    runtime.block_on(async {
        let store = store(url, schema).await;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        println!("{}", listener.local_addr().unwrap());
        tokio::select! {
            served = server(&store, &dir, 0).serve(listener) => served.unwrap(),
            _ = stdin_closed => {}
        }
    });
}

/// This test binary run again as a child process with `role` set, and its standard input
/// and output piped.
fn spawn(role: &str, schema: &str, dir: &Path) -> tokio::process::Child {
    tokio::process::Command::new(std::env::current_exe().unwrap())
        .env(role, schema)
        .env(MARKS, dir)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap()
}

/// The body of an HTTP/1.1 request to the server at `addr` (one connection per request).
async fn request(
    addr: &str,
    method: &str,
    path: &str,
    body: Option<Value>,
    last: Option<&str>,
) -> String {
    let body = body.map(|b| b.to_string()).unwrap_or_default();
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nhost: {addr}\r\nconnection: close\r\ncontent-type: application/json\r\ncontent-length: {}\r\n",
        body.len()
    );
    if let Some(last) = last {
        head.push_str(&format!("last-event-id: {last}\r\n"));
    }
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    stream
        .write_all(format!("{head}\r\n{body}").as_bytes())
        .await
        .unwrap();
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).await.unwrap();
    let answer = String::from_utf8_lossy(&answer).into_owned();
    let (head, mut rest) = answer.split_once("\r\n\r\n").unwrap_or((&answer, ""));
    if !head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        return rest.to_owned();
    }
    let mut body = String::new();
    while let Some((size, after)) = rest.split_once("\r\n") {
        let size = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if size == 0 {
            break;
        }
        body.push_str(&after[..size]);
        rest = after[size..].trim_start_matches("\r\n");
    }
    body
}

async fn call(addr: &str, method: &str, path: &str, body: Option<Value>) -> Value {
    let text = request(addr, method, path, body, None).await;
    serde_json::from_str(&text).unwrap_or(Value::Null)
}

/// Waits (up to `limit`) for `done`, checking every 50 ms.
async fn eventually<F: std::future::Future<Output = bool>>(
    limit: Duration,
    what: &str,
    mut done: impl FnMut() -> F,
) {
    let until = Instant::now() + limit;
    while !done().await {
        assert!(Instant::now() < until, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn run_status(app: &str, thread: &str, run: &str) -> String {
    let got = call(app, "GET", &format!("/threads/{thread}/runs/{run}"), None).await;
    got["status"].as_str().unwrap_or("?").to_owned()
}

/// A run on a new thread `thread`, created on `a`, until its effect ran: its id, and the
/// process id of the worker that ran the effect.
async fn run_to_its_effect(a: &str, dir: &Path, thread: &str) -> (String, u32) {
    call(a, "POST", "/threads", Some(json!({"thread_id": thread}))).await;
    let input = json!({"assistant_id": "job", "input": {"thread": thread}});
    let run = call(a, "POST", &format!("/threads/{thread}/runs"), Some(input)).await;
    let run_id = run["run_id"].as_str().unwrap().to_owned();
    let effects = format!("effect-{thread}");
    eventually(Duration::from_secs(20), "the effect", || {
        let ran = !lines(dir, &effects).is_empty();
        async move { ran }
    })
    .await;
    let pid = lines(dir, &effects)[0].parse().unwrap();
    (run_id, pid)
}

/// A run on thread `thread` (created on `a`) whose worker is stopped once the run's effect
/// ran: killed (`kill`), or shut down gracefully (its standard input closed). Another worker
/// finishes it (read on `b`): the effect ran once, no committed step ran again, the run's
/// stream shows its two attempts. Returns the index of the stopped worker.
async fn stopped_midway(
    a: &str,
    b: &str,
    dir: &Path,
    workers: &mut [tokio::process::Child],
    thread: &str,
    kill: bool,
) -> usize {
    let (run_id, pid) = run_to_its_effect(a, dir, thread).await;
    let effects = format!("effect-{thread}");
    let stopped = workers
        .iter_mut()
        .position(|w| w.id() == Some(pid))
        .expect("the effect ran in a worker process");
    if kill {
        workers[stopped].start_kill().unwrap();
        workers[stopped].wait().await.unwrap();
    } else {
        drop(workers[stopped].stdin.take());
    }
    let runs = format!("/threads/{thread}/runs/{run_id}");
    eventually(
        Duration::from_secs(20),
        "the run's end on another worker",
        || {
            let (b, runs) = (b.to_owned(), runs.clone());
            async move {
                let got = call(&b, "GET", &runs, None).await;
                got["status"] == "success"
            }
        },
    )
    .await;
    assert_eq!(lines(dir, &effects).len(), 1, "the effect ran once");
    assert_eq!(
        lines(dir, &format!("first-{thread}")).len(),
        1,
        "`first` ran once"
    );
    let state = call(b, "GET", &format!("/threads/{thread}/state"), None).await;
    assert_eq!(state["values"]["log"], json!(["first", "pay"]), "{state}");
    let joined = call(a, "GET", &format!("{runs}/join"), None).await;
    assert_eq!(joined["log"], json!(["first", "pay"]), "{joined}");
    // Its stream, replayed from the database: the two attempts' events, numbered in order.
    let body = request(b, "GET", &format!("{runs}/stream"), None, Some("-1")).await;
    let attempts: Vec<Value> = body
        .split("\n\n")
        .filter(|frame| frame.contains("event: metadata"))
        .filter_map(|frame| frame.lines().find_map(|l| l.strip_prefix("data: ")))
        .map(|data| serde_json::from_str::<Value>(data).unwrap()["attempt"].clone())
        .collect();
    let expected = if kill { json!([1, 2]) } else { json!([1, 1]) };
    assert_eq!(Value::from(attempts), expected, "{body}");
    stopped
}

/// A run on thread `pause` (created on `a`) whose worker process is paused (`SIGSTOP`) once
/// the run's effect ran, past its lease: the run is put back and another worker finishes it
/// (read on `b`). Continued (`SIGCONT`), the paused worker's node goes on and its run ends
/// there with `lease_lost`, but it writes nothing (fenced by its claim on the run, as the
/// journal is by the lease): the run stays `success`, its thread `idle` with its state, and no
/// effect or committed step ran again.
async fn paused_midway(a: &str, b: &str, dir: &Path, workers: &[tokio::process::Child]) {
    let thread = "pause";
    let (run_id, pid) = run_to_its_effect(a, dir, thread).await;
    let runs = format!("/threads/{thread}/runs/{run_id}");
    let effects = format!("effect-{thread}");
    assert!(workers.iter().any(|w| w.id() == Some(pid)));
    let signal = |name: &str| {
        let sent = std::process::Command::new("kill")
            .args([name, &pid.to_string()])
            .status()
            .unwrap();
        assert!(sent.success(), "kill {name} {pid}");
    };
    signal("-STOP");
    eventually(
        Duration::from_secs(20),
        "the run's end on another worker",
        || {
            let (b, runs) = (b.to_owned(), runs.clone());
            async move { call(&b, "GET", &runs, None).await["status"] == "success" }
        },
    )
    .await;
    signal("-CONT");
    // The paused worker's node ends at once (its sleep's time passed while it was stopped);
    // what it would write, were it not fenced, would be written by now.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(call(a, "GET", &runs, None).await["status"], "success");
    let record = call(b, "GET", &format!("/threads/{thread}"), None).await;
    assert_eq!(record["status"], "idle", "{record}");
    let state = call(b, "GET", &format!("/threads/{thread}/state"), None).await;
    assert_eq!(state["values"]["log"], json!(["first", "pay"]), "{state}");
    assert_eq!(lines(dir, &effects).len(), 1, "the effect ran once");
    assert_eq!(lines(dir, &format!("first-{thread}")).len(), 1);
}

/// A run on thread `block` (created on `a`, with a deadline of 0.3 s) whose node blocks its
/// worker's thread for 5 s: it ends `timeout` long before the node returns, ended from
/// outside its task (its lease revoked, its queue row out); the worker processes go on
/// claiming and carrying out other runs meanwhile, and the thread's next run succeeds.
async fn blocked_past_its_deadline(a: &str, b: &str) {
    let started = Instant::now();
    call(a, "POST", "/threads", Some(json!({"thread_id": "block"}))).await;
    let late = json!({"assistant_id": "job", "input": {"thread": "block"}, "timeout": 0.3});
    let run = call(a, "POST", "/threads/block/runs", Some(late)).await;
    let runs = format!("/threads/block/runs/{}", run["run_id"].as_str().unwrap());
    // Another thread's run, while the node blocks.
    call(
        b,
        "POST",
        "/threads",
        Some(json!({"thread_id": "beside-block"})),
    )
    .await;
    let input = json!({"assistant_id": "job", "input": {"thread": "beside-block"}});
    let done = call(b, "POST", "/threads/beside-block/runs/wait", Some(input)).await;
    assert_eq!(done["log"], json!(["first", "pay"]), "{done}");
    eventually(Duration::from_secs(20), "the blocked run's end", || {
        let (a, runs) = (a.to_owned(), runs.clone());
        async move { call(&a, "GET", &runs, None).await["status"] == "timeout" }
    })
    .await;
    assert!(
        started.elapsed() < Duration::from_millis(4500),
        "ended only after {:?}",
        started.elapsed()
    );
    let thread = call(b, "GET", "/threads/block", None).await;
    assert_eq!(thread["status"], "error", "{thread}");
    let input = json!({"assistant_id": "job", "input": {"thread": "block"}});
    let next = call(b, "POST", "/threads/block/runs/wait", Some(input)).await;
    assert_eq!(next["log"], json!(["first", "pay"]), "{next}");
    assert_eq!(call(a, "GET", &runs, None).await["status"], "timeout");
}

/// The resident memory of process `pid`, in KiB (Linux).
fn resident_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// A run on thread `chatty` (created on `a`) that streams 4,000 events of 1 KiB, read through
/// `b` by a client that reads slowly: the run ends long before its reader has read half of it
/// (a reader holds nothing back), and the reader gets every event in order (its server reads
/// the event log a page at a time). The worker's growth is shown.
async fn a_slow_reader(a: &str, b: &str, dir: &Path, workers: &[tokio::process::Child]) {
    let before: Vec<(u32, u64)> = workers
        .iter()
        .filter_map(|w| w.id())
        .map(|pid| (pid, resident_kib(pid)))
        .collect();
    call(a, "POST", "/threads", Some(json!({"thread_id": "chatty"}))).await;
    let input =
        json!({"assistant_id": "job", "input": {"thread": "chatty"}, "stream_mode": ["custom"]});
    let run = call(a, "POST", "/threads/chatty/runs", Some(input)).await;
    let runs = format!("/threads/chatty/runs/{}", run["run_id"].as_str().unwrap());
    let read = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let reader = {
        let (b, path, read) = (b.to_owned(), format!("{runs}/stream"), Arc::clone(&read));
        tokio::spawn(async move {
            let mut stream = tokio::net::TcpStream::connect(&b).await.unwrap();
            let head = format!("GET {path} HTTP/1.1\r\nhost: {b}\r\nconnection: close\r\n\r\n");
            stream.write_all(head.as_bytes()).await.unwrap();
            let (mut body, mut chunk) = (Vec::new(), vec![0u8; 4096]);
            loop {
                let n = stream.read(&mut chunk).await.unwrap();
                if n == 0 {
                    break;
                }
                body.extend_from_slice(&chunk[..n]);
                read.store(body.len(), Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(4)).await;
            }
            String::from_utf8_lossy(&body).into_owned()
        })
    };
    eventually(Duration::from_secs(30), "the chatty run's end", || {
        let (a, runs) = (a.to_owned(), runs.clone());
        async move { call(&a, "GET", &runs, None).await["status"] == "success" }
    })
    .await;
    let at_end = read.load(Ordering::SeqCst);
    let body = reader.await.unwrap();
    assert!(
        at_end < body.len() / 2,
        "the reader had {at_end} of {} bytes when the run ended",
        body.len()
    );
    let numbers: Vec<u64> = body
        .split("\n\n")
        .filter(|frame| frame.contains("event: custom"))
        .filter_map(|frame| frame.lines().find_map(|l| l.strip_prefix("data: ")))
        .filter_map(|data| serde_json::from_str::<Value>(data).ok()?["n"].as_u64())
        .collect();
    assert_eq!(numbers, (0..CHATTY as u64).collect::<Vec<_>>());
    let pid: u32 = lines(dir, "effect-chatty")[0].parse().unwrap();
    let (_, was) = before.iter().find(|(p, _)| *p == pid).copied().unwrap();
    // Shown, not judged: the allocator keeps what it was given, so a process's resident
    // memory says little of what it holds (that a run keeps its last frames only is
    // `runs::tests::a_runs_memory_is_bounded_and_its_readers_get_every_frame`).
    let grew = resident_kib(pid).saturating_sub(was);
    println!(
        "a slow reader of {CHATTY} events of 1 KiB: {at_end} of {} bytes read when the run ended; its worker grew by {grew} KiB",
        body.len()
    );
}

async fn pool(url: &str) {
    let schema = format!("agentstate_pool_{}", std::process::id());
    let dir = std::env::temp_dir().join(&schema);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    // The tables, made before the processes start.
    let one = store(url, &schema).await;
    let mut servers: Vec<tokio::process::Child> =
        (0..2).map(|_| spawn(SERVER, &schema, &dir)).collect();
    let mut addresses = Vec::new();
    for server in &mut servers {
        let out = server.stdout.take().unwrap();
        let mut line = String::new();
        tokio::io::BufReader::new(out)
            .read_line(&mut line)
            .await
            .unwrap();
        addresses.push(line.trim().to_owned());
    }
    let (a, b) = (addresses[0].as_str(), addresses[1].as_str());
    let mut workers: Vec<tokio::process::Child> =
        (0..3).map(|_| spawn(WORKER, &schema, &dir)).collect();

    // A worker killed in the middle of a run.
    let killed = stopped_midway(a, b, &dir, &mut workers, "stop-kill", true).await;
    workers.remove(killed);

    // A worker paused past its lease, then continued.
    paused_midway(a, b, &dir, &workers).await;

    // A node that blocks its worker's thread past its run's deadline.
    blocked_past_its_deadline(a, b).await;

    // A run of many events, and a reader that reads it slowly.
    a_slow_reader(a, b, &dir, &workers).await;

    // A run cancelled through one server: its worker, told by NOTIFY, stops it; it is not run
    // again (no sweep puts it back), and its thread's lease is free.
    call(
        a,
        "POST",
        "/threads",
        Some(json!({"thread_id": "stop-cancel"})),
    )
    .await;
    let input = json!({"assistant_id": "job", "input": {"thread": "stop-cancel"}});
    let run = call(a, "POST", "/threads/stop-cancel/runs", Some(input)).await;
    let runs = format!(
        "/threads/stop-cancel/runs/{}",
        run["run_id"].as_str().unwrap()
    );
    eventually(Duration::from_secs(20), "the effect", || {
        let ran = !lines(&dir, "effect-stop-cancel").is_empty();
        async move { ran }
    })
    .await;
    // Busy on another process: a state update is refused.
    let update = json!({"values": {"log": ["x"]}, "as_node": "first"});
    let refused = call(b, "POST", "/threads/stop-cancel/state", Some(update)).await;
    let said = refused["detail"].as_str().unwrap_or_default();
    assert!(said.contains("is busy with run"), "{refused}");
    call(b, "POST", &format!("{runs}/cancel?wait=1"), None).await;
    assert_eq!(call(a, "GET", &runs, None).await["status"], "interrupted");
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(call(a, "GET", &runs, None).await["status"], "interrupted");
    assert_eq!(lines(&dir, "effect-stop-cancel").len(), 1);
    assert_eq!(one.lease_info("stop-cancel").await.unwrap(), None);

    // A run rolled back through one server: its worker stops it and takes its thread back to
    // where the run started (its committed step removed); the run's record is gone.
    call(
        a,
        "POST",
        "/threads",
        Some(json!({"thread_id": "stop-undo"})),
    )
    .await;
    let input = json!({"assistant_id": "job", "input": {"thread": "stop-undo"}});
    let run = call(a, "POST", "/threads/stop-undo/runs", Some(input)).await;
    let runs = format!(
        "/threads/stop-undo/runs/{}",
        run["run_id"].as_str().unwrap()
    );
    eventually(Duration::from_secs(20), "the effect", || {
        let ran = !lines(&dir, "effect-stop-undo").is_empty();
        async move { ran }
    })
    .await;
    let state = call(a, "GET", "/threads/stop-undo/state", None).await;
    assert_eq!(state["values"]["log"], json!(["first"]), "{state}");
    call(
        b,
        "POST",
        &format!("{runs}/cancel?wait=1&action=rollback"),
        None,
    )
    .await;
    // Deleted: as LangGraph's server answers a run it does not have.
    let gone = call(a, "GET", &runs, None).await;
    assert_eq!(gone["detail"], "Not Found", "{gone}");
    // Taken back before its first run: no checkpoint, the state LangGraph shows for none.
    let state = call(b, "GET", "/threads/stop-undo/state", None).await;
    assert_eq!(state["values"], json!({}), "{state}");
    let history = call(b, "GET", "/threads/stop-undo/history", None).await;
    assert_eq!(history, json!([]));
    assert_eq!(one.lease_info("stop-undo").await.unwrap(), None);

    // `interrupt` and `rollback`: a second run, created on the other server while the first is
    // pending, just claimed or running, stops the first every time (interrupted; rolled back:
    // deleted, its thread as if it had never run), then runs.
    for strategy in ["interrupt", "rollback"] {
        let mut pairs = Vec::new();
        for i in 0..8 {
            let thread = format!("mt-{strategy}-{i}");
            call(a, "POST", "/threads", Some(json!({"thread_id": thread}))).await;
            let input = json!({"assistant_id": "job", "input": {"thread": thread}});
            let first = call(a, "POST", &format!("/threads/{thread}/runs"), Some(input)).await;
            // From right away (pending) to well into its first node (running).
            tokio::time::sleep(Duration::from_millis(i * 40)).await;
            let body = json!({"assistant_id": "job", "input": {"thread": thread}, "multitask_strategy": strategy});
            let second = call(b, "POST", &format!("/threads/{thread}/runs"), Some(body)).await;
            let id = |run: &Value| {
                run["run_id"]
                    .as_str()
                    .unwrap_or_else(|| panic!("{run}"))
                    .to_owned()
            };
            pairs.push((thread, id(&first), id(&second)));
        }
        for (thread, first, second) in &pairs {
            eventually(Duration::from_secs(20), "the second run's end", || {
                let (a, thread, second) = (a.to_owned(), thread.clone(), second.clone());
                async move { run_status(&a, &thread, &second).await == "success" }
            })
            .await;
            let first_run = call(a, "GET", &format!("/threads/{thread}/runs/{first}"), None).await;
            let state = call(a, "GET", &format!("/threads/{thread}/state"), None).await;
            let log = state["values"]["log"].clone();
            match strategy {
                "interrupt" => {
                    assert_eq!(first_run["status"], "interrupted", "{thread}: {first_run}")
                }
                _ => {
                    let why = call(
                        a,
                        "GET",
                        &format!("/threads/{thread}/runs/{first}/join"),
                        None,
                    )
                    .await;
                    assert_eq!(
                        first_run["detail"], "Not Found",
                        "{thread}: {first_run} {why}"
                    );
                    assert_eq!(log, json!(["first", "pay"]), "{thread}: {state}");
                }
            }
        }
    }

    // `reject`: of 12 runs asked at once on an idle thread, through both servers, one is
    // accepted; the others are refused as LangGraph's server refuses them.
    call(
        a,
        "POST",
        "/threads",
        Some(json!({"thread_id": "mt-reject"})),
    )
    .await;
    let asked: Vec<_> = (0..12)
        .map(|i| {
            let app = if i % 2 == 0 { a } else { b }.to_owned();
            tokio::spawn(async move {
                let body = json!({"assistant_id": "job", "input": {"thread": "mt-reject"}, "multitask_strategy": "reject"});
                call(&app, "POST", "/threads/mt-reject/runs", Some(body)).await
            })
        })
        .collect();
    let mut answers = Vec::new();
    for answer in asked {
        answers.push(answer.await.unwrap());
    }
    let accepted = answers.iter().filter(|a| a["run_id"].is_string()).count();
    let said: Vec<&Value> = answers
        .iter()
        .map(|a| {
            if a["run_id"].is_string() {
                &a["status"]
            } else {
                &a["detail"]
            }
        })
        .collect();
    assert_eq!(accepted, 1, "{said:?}");
    for refused in answers.iter().filter(|a| !a["run_id"].is_string()) {
        let said = refused["detail"].as_str().unwrap_or_default();
        assert!(
            said.starts_with("Thread is already running a task"),
            "{refused}"
        );
    }
    let listed = call(a, "GET", "/threads/mt-reject/runs", None).await;
    assert_eq!(listed.as_array().map(Vec::len), Some(1), "{listed}");

    // 200 runs on 50 threads, created on both servers.
    let threads: Vec<String> = (0..50).map(|i| format!("t{i}")).collect();
    for (i, thread) in threads.iter().enumerate() {
        let app = if i % 2 == 0 { a } else { b };
        call(app, "POST", "/threads", Some(json!({"thread_id": thread}))).await;
    }
    let mut runs = Vec::new();
    for i in 0..200 {
        let (app, thread) = (if i % 2 == 0 { b } else { a }, &threads[i % 50]);
        let input = json!({"thread": thread});
        let body = json!({"assistant_id": "job", "input": input, "multitask_strategy": "enqueue"});
        let run = call(app, "POST", &format!("/threads/{thread}/runs"), Some(body)).await;
        let id = run["run_id"].as_str().unwrap_or_else(|| panic!("{run}"));
        runs.push((thread.clone(), id.to_owned()));
    }
    let started = Instant::now();
    eventually(Duration::from_secs(40), "200 runs' ends", || {
        let (a, runs) = (a.to_owned(), runs.clone());
        async move {
            for (thread, run) in &runs {
                let status = run_status(&a, thread, run).await;
                if status == "pending" || status == "running" {
                    return false;
                }
            }
            true
        }
    })
    .await;
    println!("200 runs on 50 threads ended in {:?}", started.elapsed());
    for (thread, run) in &runs {
        assert_eq!(run_status(b, thread, run).await, "success", "{run}");
    }
    assert!(
        lines(&dir, "violations").is_empty(),
        "two runs of a thread ran at once"
    );
    for thread in &threads {
        let state = call(a, "GET", &format!("/threads/{thread}/state"), None).await;
        let log = state["values"]["log"].as_array().map_or(0, Vec::len);
        assert_eq!(
            log, 8,
            "thread {thread}: each of its 4 runs' 2 steps once: {state}"
        );
        assert_eq!(lines(&dir, &format!("effect-{thread}")).len(), 4);
    }

    // A worker shut down in the middle of a run: it hands the run back after its grace.
    let stopped = stopped_midway(a, b, &dir, &mut workers, "stop-graceful", false).await;
    let graceful = workers.remove(stopped);
    assert!(graceful.wait_with_output().await.unwrap().status.success());

    // Graceful shutdown: standard input closed, each worker stops.
    for mut worker in workers {
        drop(worker.stdin.take());
        let stopped = tokio::time::timeout(Duration::from_secs(10), worker.wait()).await;
        assert!(stopped.is_ok_and(|s| s.is_ok_and(|s| s.success())));
    }
    for mut server in servers {
        drop(server.stdin.take());
        let stopped = tokio::time::timeout(Duration::from_secs(10), server.wait()).await;
        assert!(stopped.is_ok_and(|s| s.is_ok_and(|s| s.success())));
    }
    drop(one);
    support::drop_schema(url, &schema).await;
    let _ = std::fs::remove_dir_all(&dir);
}

fn main() {
    let url = std::env::var("AGENTSTATE_POSTGRES_URL");
    if let (Ok(schema), Ok(url)) = (std::env::var(WORKER), &url) {
        worker(url, &schema);
        return;
    }
    if let (Ok(schema), Ok(url)) = (std::env::var(SERVER), &url) {
        serve(url, &schema);
        return;
    }
    let Ok(url) = url else {
        assert!(
            std::env::var_os("CI").is_none(),
            "the worker pool test needs AGENTSTATE_POSTGRES_URL under CI"
        );
        println!("the worker pool on PostgreSQL skipped: AGENTSTATE_POSTGRES_URL is not set");
        return;
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(pool(&url));
    println!("the worker pool on PostgreSQL: ok");
}
