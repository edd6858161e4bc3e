//! A load generator of low overhead, and the servers it drives: runs of the three-node graph
//! (`examples/support/three.rs`; `benches/langgraph/graph.py` for LangGraph) at 1, 8, 32 and
//! 128 concurrent clients, against
//!
//! - agentstate-server on SQLite (a new file; runs carried out in the serving process),
//! - agentstate-server on PostgreSQL (`AGENTSTATE_POSTGRES_URL`; a new schema): an API process
//!   with no workers of its own and a worker-only process that carries the runs out,
//! - LangGraph's `langgraph dev` (`AGENTSTATE_LANGGRAPH_REF_PYTHON`: the Python of a venv with
//!   `tests/reference/requirements.txt`), in the same run.
//!
//! ```text
//! AGENTSTATE_POSTGRES_URL=postgres://postgres@127.0.0.1:5432/test \
//! AGENTSTATE_LANGGRAPH_REF_PYTHON=target/langgraph-dev-venv/bin/python \
//!   cargo bench -p agentstate-server --features postgres --bench load
//! ```
//!
//! Each client is one kept-alive HTTP/1 connection (hyper) and a loop: `POST /threads`, then
//! `POST /threads/{id}/runs/stream` (`values`), timed from the stream request's sending to the
//! first bytes of its first event, read to its end (the last `values` event must hold the three
//! nodes' names). All clients are tasks of one single-threaded runtime in this process, so the
//! generator takes at most one of the machine's cores; the servers are processes of their own
//! (this binary run again, `AGENTSTATE_LOAD_ROLE`), each in a process group that is ended with
//! the run. A level runs `LOAD_WARMUP` seconds unmeasured (default 2), then `LOAD_SECONDS`
//! (default 10): its runs per second are the runs that ended in that window, its percentiles
//! (exact, from the sorted times) those runs' first events. The CPU each side used in the
//! window is read from `/proc` (Linux): the generator, the servers' process groups, PostgreSQL's
//! processes, the whole machine.
//!
//! Other settings: `LOAD_CLIENTS` (default `1,8,32,128`), `LOAD_SETUPS` (default
//! `sqlite,postgres,langgraph`), `LOAD_WORKERS` (the worker process's workers, default 16: one
//! a connection of its pool), `LOAD_SYNCHRONOUS_COMMIT=off` (the PostgreSQL processes commit
//! without waiting for the WAL's flush: `PostgresOptions::synchronous_commit`).
//! Without `--bench` (`cargo test --benches`) it runs nothing and says so.

#[path = "../tests/support/langgraph_dev.rs"]
mod langgraph_dev;
#[path = "../examples/support/three.rs"]
mod three;

use agentstate_server::Server;
use agentstate_store::postgres::PostgresOptions;
use agentstate_store::{AnyStore, PostgresStore};
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::Request;
use hyper_util::rt::TokioIo;
use std::net::SocketAddr;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The environment variable that makes this binary a server process: `sqlite` (API and runs),
/// `api` (PostgreSQL, no workers) or `worker` (PostgreSQL, workers only).
const ROLE: &str = "AGENTSTATE_LOAD_ROLE";
/// A server process's address (`sqlite`, `api`).
const ADDRESS: &str = "AGENTSTATE_LOAD_ADDRESS";
/// A server process's database: a SQLite file, or a PostgreSQL URL.
const DATABASE: &str = "AGENTSTATE_LOAD_DATABASE";
/// The PostgreSQL schema of the processes of one run.
const SCHEMA: &str = "AGENTSTATE_LOAD_SCHEMA";

/// A stream request of the three-node graph.
const RUN: &str = r#"{"assistant_id": "three", "input": {"log": []}, "stream_mode": ["values"]}"#;
/// What the stream's last `values` event holds.
const DONE: &[u8] = br#""log":["a","b","c"]"#;

fn main() {
    if let Ok(role) = std::env::var(ROLE) {
        return serve_role(&role);
    }
    if !std::env::args().any(|a| a == "--bench") {
        println!("load: a benchmark; run it with `cargo bench -p agentstate-server --features postgres --bench load`");
        return;
    }
    let config = Config::from_env();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    println!(
        "load: {} s warm-up, {} s measured per level; clients {:?}; {} cores; load average {}",
        config.warmup.as_secs_f64(),
        config.seconds.as_secs_f64(),
        config.clients,
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        load_average()
    );
    let mut results: Vec<(String, Vec<Level>)> = Vec::new();
    for setup in &config.setups {
        let Some(servers) = Servers::start(setup, &config) else {
            continue;
        };
        println!("\n{} at {}", servers.name, servers.at);
        let postgres = servers
            .schema
            .as_ref()
            .map(|(url, _)| rt.block_on(connect(url)));
        let mut levels = Vec::new();
        for &clients in &config.clients {
            let groups = servers.groups();
            let level = rt.block_on(measure(
                servers.at,
                clients,
                &config,
                &groups,
                postgres.as_ref(),
            ));
            println!("{}", level.row());
            levels.push(level);
            std::thread::sleep(Duration::from_secs(1));
        }
        results.push((servers.name.clone(), levels));
        servers.stop(&rt);
    }
    println!("\nload average after: {}\n", load_average());
    println!("| server | clients | runs/s | first event p50 | p99 | runs | CPU: client, server, PostgreSQL, machine (100% a core) | PostgreSQL transactions a run |");
    println!("|---|---|---|---|---|---|---|---|");
    for (name, levels) in &results {
        for level in levels {
            println!("| {name} {}", level.row());
        }
    }
    let reference = results.iter().find(|(n, _)| n.starts_with("langgraph"));
    if let Some((_, theirs)) = reference {
        println!();
        for (name, ours) in results.iter().filter(|(n, _)| !n.starts_with("langgraph")) {
            for (o, t) in ours.iter().zip(theirs) {
                println!(
                    "{name}, {} clients: {:.1}x the runs/s of langgraph dev",
                    o.clients,
                    o.rate / t.rate.max(f64::MIN_POSITIVE)
                );
            }
        }
    }
}

/// The bench's settings (environment variables).
struct Config {
    clients: Vec<usize>,
    warmup: Duration,
    seconds: Duration,
    setups: Vec<String>,
    workers: usize,
}

impl Config {
    fn from_env() -> Config {
        let var =
            |name: &str, default: &str| std::env::var(name).unwrap_or_else(|_| default.into());
        let seconds = |name: &str, default: &str| {
            Duration::from_secs_f64(var(name, default).parse().expect("a number of seconds"))
        };
        Config {
            clients: var("LOAD_CLIENTS", "1,8,32,128")
                .split(',')
                .map(|n| n.trim().parse().expect("LOAD_CLIENTS: numbers"))
                .collect(),
            warmup: seconds("LOAD_WARMUP", "2"),
            seconds: seconds("LOAD_SECONDS", "10"),
            setups: var("LOAD_SETUPS", "sqlite,postgres,langgraph")
                .split(',')
                .map(|s| s.trim().to_owned())
                .collect(),
            workers: var("LOAD_WORKERS", "16")
                .parse()
                .expect("LOAD_WORKERS: a number"),
        }
    }
}

// ---- the server processes ----

/// This binary as a server process (`role`), until its standard input closes.
fn serve_role(role: &str) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    std::thread::spawn(|| {
        let _ = std::io::Read::read_to_end(&mut std::io::stdin(), &mut Vec::new());
        std::process::exit(0);
    });
    let database = std::env::var(DATABASE).expect("AGENTSTATE_LOAD_DATABASE");
    rt.block_on(async {
        let store: AnyStore = match role {
            "sqlite" => AnyStore::open(&format!("sqlite:{database}")).await.unwrap(),
            _ => {
                let options = PostgresOptions {
                    schema: std::env::var(SCHEMA).expect("AGENTSTATE_LOAD_SCHEMA"),
                    synchronous_commit: std::env::var("LOAD_SYNCHRONOUS_COMMIT").as_deref()
                        != Ok("off"),
                    ..PostgresOptions::default()
                };
                PostgresStore::connect_with(&database, options)
                    .await
                    .expect("the PostgreSQL store connects")
                    .into()
            }
        };
        let builder =
            Server::builder(&store).assistant("three", three::graph().unwrap().durable(&store));
        match role {
            "worker" => {
                let workers: usize = std::env::var("LOAD_WORKERS").unwrap().parse().unwrap();
                let server = builder.workers(workers).build();
                let _workers = server.start_workers().expect("the workers start");
                std::future::pending::<()>().await;
            }
            _ => {
                let server = match role {
                    "api" => builder.workers(0).build(),
                    _ => builder.build(),
                };
                let address = std::env::var(ADDRESS).expect("AGENTSTATE_LOAD_ADDRESS");
                let listener = tokio::net::TcpListener::bind(&address).await.unwrap();
                server.serve(listener).await.unwrap();
            }
        }
    });
}

/// The processes of one setup, each in a process group of its own.
struct Servers {
    name: String,
    at: SocketAddr,
    children: Vec<Child>,
    /// A temporary directory (the SQLite file, `langgraph dev`'s files), removed at the end.
    dir: PathBuf,
    /// The PostgreSQL database and schema, dropped at the end.
    schema: Option<(String, String)>,
}

fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

/// This binary again, as server process `role`.
fn role(role: &str, vars: &[(&str, String)]) -> Child {
    let mut command = Command::new(std::env::current_exe().unwrap());
    command
        .env(ROLE, role)
        .envs(vars.iter().map(|(k, v)| (*k, v)))
        .stdin(Stdio::piped())
        .process_group(0);
    command.spawn().expect("this binary starts again")
}

impl Servers {
    /// Starts setup `setup` (`None`: skipped, saying why) and waits until it answers `/ok`.
    fn start(setup: &str, config: &Config) -> Option<Servers> {
        let dir = std::env::temp_dir().join(format!("agentstate-load-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        let port = free_port();
        let at: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
        let address = at.to_string();
        let mut servers = Servers {
            name: String::new(),
            at,
            children: Vec::new(),
            dir: dir.clone(),
            schema: None,
        };
        match setup {
            "sqlite" => {
                servers.name = "agentstate-server (SQLite)".into();
                let file = dir.join("load.db").display().to_string();
                servers
                    .children
                    .push(role("sqlite", &[(ADDRESS, address), (DATABASE, file)]));
            }
            "postgres" => {
                let Ok(url) = std::env::var("AGENTSTATE_POSTGRES_URL") else {
                    println!("\nskipped: PostgreSQL (AGENTSTATE_POSTGRES_URL not set)");
                    return None;
                };
                servers.name = format!(
                    "agentstate-server (PostgreSQL, API + worker process of {} workers)",
                    config.workers
                );
                let schema = format!("load_{}", uuid::Uuid::new_v4().simple());
                servers.schema = Some((url.clone(), schema.clone()));
                let vars = [
                    (ADDRESS, address),
                    (DATABASE, url),
                    (SCHEMA, schema),
                    ("LOAD_WORKERS", config.workers.to_string()),
                ];
                servers.children.push(role("api", &vars));
                // The API process creates the schema's tables first.
                wait_ok(&mut servers);
                servers.children.push(role("worker", &vars));
            }
            "langgraph" => {
                let Some(python) = std::env::var_os("AGENTSTATE_LANGGRAPH_REF_PYTHON") else {
                    println!("\nskipped: langgraph dev (AGENTSTATE_LANGGRAPH_REF_PYTHON not set)");
                    return None;
                };
                servers.name = "langgraph dev (in memory)".into();
                let here = Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/langgraph");
                for file in ["graph.py", "langgraph.json"] {
                    std::fs::copy(here.join(file), dir.join(file)).unwrap();
                }
                let child = langgraph_dev::spawn(Path::new(&python), &dir, port);
                servers.children.push(child);
            }
            other => panic!("LOAD_SETUPS: `{other}` is not sqlite, postgres or langgraph"),
        }
        wait_ok(&mut servers);
        Some(servers)
    }

    /// The process groups (their leaders' ids).
    fn groups(&self) -> Vec<u32> {
        self.children.iter().map(Child::id).collect()
    }

    /// Ends the processes (their groups), removes the directory and drops the schema.
    fn stop(mut self, rt: &tokio::runtime::Runtime) {
        for child in &mut self.children {
            drop(child.stdin.take());
            let _ = Command::new("kill")
                .args(["-TERM", "--", &format!("-{}", child.id())])
                .stderr(Stdio::null())
                .status();
        }
        for child in &mut self.children {
            let deadline = Instant::now() + Duration::from_secs(10);
            while Instant::now() < deadline && !matches!(child.try_wait(), Ok(Some(_))) {
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = Command::new("kill")
                .args(["-KILL", "--", &format!("-{}", child.id())])
                .stderr(Stdio::null())
                .status();
            let _ = child.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
        if let Some((url, schema)) = self.schema.take() {
            rt.block_on(async {
                let client = connect(&url).await;
                let drop = format!("DROP SCHEMA IF EXISTS \"{schema}\" CASCADE");
                client.batch_execute(&drop).await.unwrap();
            });
        }
    }
}

/// A connection to the PostgreSQL database at `url`.
async fn connect(url: &str) -> tokio_postgres::Client {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .expect("PostgreSQL answers");
    tokio::spawn(connection);
    client
}

/// The transactions the database committed or rolled back so far, by its statistics (which
/// each connection reports at most once a second: a count over seconds is near, not exact).
async fn transactions(postgres: &tokio_postgres::Client) -> f64 {
    let row = postgres
        .query_one(
            "SELECT (xact_commit + xact_rollback)::float8 FROM pg_stat_database WHERE datname = current_database()",
            &[],
        )
        .await
        .expect("PostgreSQL's statistics");
    row.get(0)
}

/// Waits until the setup's server answers `/ok` (120 s at most).
fn wait_ok(servers: &mut Servers) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        for child in &mut servers.children {
            if let Ok(Some(status)) = child.try_wait() {
                let log = std::fs::read_to_string(servers.dir.join("langgraph-dev.log"))
                    .unwrap_or_default();
                panic!("{} exited ({status}) before it served\n{log}", servers.name);
            }
        }
        let ok = rt.block_on(async {
            let mut client = Client::connect(servers.at).await.ok()?;
            client.get("/ok").await.ok()
        });
        if ok == Some(200) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{} did not answer /ok within 120 s",
            servers.name
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

// ---- the client ----

type Error = Box<dyn std::error::Error + Send + Sync>;

/// One kept-alive HTTP/1 connection.
struct Client {
    send: hyper::client::conn::http1::SendRequest<Full<Bytes>>,
    /// The body of the last stream read (kept for its capacity).
    body: Vec<u8>,
}

/// One run: when its stream request was sent, its first event came, its stream ended.
struct Timed {
    sent: Instant,
    first: Instant,
    end: Instant,
}

impl Client {
    async fn connect(at: SocketAddr) -> Result<Client, Error> {
        let tcp = tokio::net::TcpStream::connect(at).await?;
        tcp.set_nodelay(true)?;
        let (send, connection) = hyper::client::conn::http1::handshake(TokioIo::new(tcp)).await?;
        tokio::spawn(connection);
        Ok(Client {
            send,
            body: Vec::with_capacity(4096),
        })
    }

    fn request(method: hyper::Method, path: &str, body: &'static str) -> Request<Full<Bytes>> {
        Request::builder()
            .method(method)
            .uri(path)
            .header("host", "127.0.0.1")
            .header("content-type", "application/json")
            .body(Full::new(Bytes::from_static(body.as_bytes())))
            .unwrap()
    }

    /// `GET path`'s status.
    async fn get(&mut self, path: &str) -> Result<u16, Error> {
        self.send.ready().await?;
        let response = self
            .send
            .send_request(Self::request(hyper::Method::GET, path, ""))
            .await?;
        let status = response.status().as_u16();
        response.into_body().collect().await?;
        Ok(status)
    }

    /// A new thread, then a streamed run on it.
    async fn run(&mut self) -> Result<Timed, Error> {
        self.send.ready().await?;
        let response = self
            .send
            .send_request(Self::request(hyper::Method::POST, "/threads", "{}"))
            .await?;
        if !response.status().is_success() {
            return Err(format!("POST /threads: {}", response.status()).into());
        }
        let body = response.into_body().collect().await?.to_bytes();
        let thread: serde_json::Value = serde_json::from_slice(&body)?;
        let id = thread["thread_id"]
            .as_str()
            .ok_or("a thread without an id")?;
        let path = format!("/threads/{id}/runs/stream");
        self.send.ready().await?;
        let sent = Instant::now();
        let response = self
            .send
            .send_request(Self::request(hyper::Method::POST, &path, RUN))
            .await?;
        if !response.status().is_success() {
            return Err(format!("POST {path}: {}", response.status()).into());
        }
        let mut body = response.into_body();
        let mut first = None;
        self.body.clear();
        while let Some(frame) = body.frame().await {
            if let Ok(data) = frame?.into_data() {
                if first.is_none() && !data.is_empty() {
                    first = Some(Instant::now());
                }
                self.body.extend_from_slice(&data);
            }
        }
        let end = Instant::now();
        if !self.body.windows(DONE.len()).any(|w| w == DONE) {
            let text = String::from_utf8_lossy(&self.body);
            return Err(format!("a stream without the three nodes' state: {text}").into());
        }
        Ok(Timed {
            sent,
            first: first.ok_or("an empty stream")?,
            end,
        })
    }
}

/// One level's results.
struct Level {
    clients: usize,
    rate: f64,
    runs: usize,
    errors: usize,
    p50: Duration,
    p99: Duration,
    cpu: Cpu,
    /// The database's transactions a run (PostgreSQL).
    transactions: Option<f64>,
}

/// The CPU time used in the window, in seconds.
#[derive(Default, Clone, Copy)]
struct Cpu {
    client: f64,
    server: f64,
    postgres: f64,
    machine: f64,
    wall: f64,
}

impl Level {
    fn row(&self) -> String {
        let pct = |s: f64| format!("{:.0}%", 100.0 * s / self.cpu.wall.max(f64::MIN_POSITIVE));
        let errors = match self.errors {
            0 => String::new(),
            n => format!(" ({n} failed)"),
        };
        format!(
            "| {} | {} | {} | {} | {}{errors} | {}, {}, {}, {} | {} |",
            self.clients,
            match self.rate {
                r if r < 10.0 => format!("{r:.1}"),
                r => format!("{r:.0}"),
            },
            ms(self.p50),
            ms(self.p99),
            self.runs,
            pct(self.cpu.client),
            pct(self.cpu.server),
            pct(self.cpu.postgres),
            pct(self.cpu.machine),
            self.transactions
                .map_or_else(|| "".to_owned(), |t| format!("{t:.1}")),
        )
    }
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1000.0)
}

/// The exact `q` quantile of sorted `times` (nearest rank).
fn quantile(times: &[Duration], q: f64) -> Duration {
    if times.is_empty() {
        return Duration::ZERO;
    }
    let rank = (q * times.len() as f64).ceil() as usize;
    times[rank.clamp(1, times.len()) - 1]
}

/// `clients` clients for the warm-up and the window; the runs in progress at its end are read
/// to their end (unmeasured) before it returns.
async fn measure(
    at: SocketAddr,
    clients: usize,
    config: &Config,
    groups: &[u32],
    postgres: Option<&tokio_postgres::Client>,
) -> Level {
    let start = Instant::now();
    let (from, to) = (
        start + config.warmup,
        start + config.warmup + config.seconds,
    );
    let tasks: Vec<_> = (0..clients)
        .map(|_| {
            tokio::spawn(async move {
                let (mut firsts, mut errors) = (Vec::new(), 0usize);
                let mut client = None;
                while Instant::now() < to {
                    if client.is_none() {
                        client = Client::connect(at).await.ok();
                    }
                    let Some(c) = client.as_mut() else {
                        errors += 1;
                        tokio::time::sleep(Duration::from_millis(10)).await;
                        continue;
                    };
                    match c.run().await {
                        Ok(t) if t.sent >= from && t.end <= to => firsts.push(t.first - t.sent),
                        Ok(_) => {}
                        Err(e) => {
                            if errors == 0 {
                                eprintln!("a run failed: {e}");
                            }
                            errors += 1;
                            client = None;
                        }
                    }
                }
                (firsts, errors)
            })
        })
        .collect();
    tokio::time::sleep_until(from.into()).await;
    let before = ProcTimes::now(groups);
    let xacts_before = match postgres {
        Some(p) => Some(transactions(p).await),
        None => None,
    };
    tokio::time::sleep_until(to.into()).await;
    let after = ProcTimes::now(groups);
    let xacts = match (postgres, xacts_before) {
        (Some(p), Some(before)) => Some(transactions(p).await - before),
        _ => None,
    };
    let (mut firsts, mut errors) = (Vec::new(), 0);
    for task in tasks {
        let (f, e) = task.await.unwrap();
        firsts.extend(f);
        errors += e;
    }
    firsts.sort();
    let wall = (to - from).as_secs_f64();
    Level {
        clients,
        rate: firsts.len() as f64 / wall,
        transactions: xacts.map(|x| x / firsts.len().max(1) as f64),
        runs: firsts.len(),
        errors,
        p50: quantile(&firsts, 0.50),
        p99: quantile(&firsts, 0.99),
        cpu: after.since(&before, wall),
    }
}

// ---- CPU time from /proc (Linux; zeros elsewhere) ----

/// Clock ticks per second of `/proc`'s times (`getconf CLK_TCK`: 100 on Linux).
const TICKS: f64 = 100.0;

/// A process's state fields after its name: (process group, user + system ticks, name).
fn proc_stat(pid: &str) -> Option<(u32, u64, String)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (head, rest) = stat.rsplit_once(')')?;
    let name = head.split_once('(')?.1.to_owned();
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    Some((fields.get(2)?.parse().ok()?, ticks, name))
}

/// The CPU ticks used so far: this process, each process of the process groups `groups` and
/// each of PostgreSQL's processes, and the whole machine (its busy time).
struct ProcTimes {
    client: u64,
    server: std::collections::HashMap<String, u64>,
    postgres: std::collections::HashMap<String, u64>,
    machine: u64,
}

impl ProcTimes {
    fn now(groups: &[u32]) -> ProcTimes {
        let mut times = ProcTimes {
            client: proc_stat("self").map_or(0, |(_, ticks, _)| ticks),
            server: Default::default(),
            postgres: Default::default(),
            machine: machine_busy(),
        };
        for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
            let pid = entry.file_name();
            let Some(pid) = pid
                .to_str()
                .filter(|p| p.bytes().all(|b| b.is_ascii_digit()))
            else {
                continue;
            };
            if let Some((group, ticks, name)) = proc_stat(pid) {
                if groups.contains(&group) {
                    times.server.insert(pid.to_owned(), ticks);
                } else if name == "postgres" {
                    times.postgres.insert(pid.to_owned(), ticks);
                }
            }
        }
        times
    }

    /// The CPU seconds used since `before`, in `wall` seconds (a process that ended meanwhile
    /// is not counted; one that started, from its start).
    fn since(&self, before: &ProcTimes, wall: f64) -> Cpu {
        type Ticks = std::collections::HashMap<String, u64>;
        let delta = |now: &Ticks, then: &Ticks| {
            let ticks: u64 = now
                .iter()
                .map(|(pid, t)| t.saturating_sub(then.get(pid).copied().unwrap_or(0)))
                .sum();
            ticks as f64 / TICKS
        };
        Cpu {
            client: self.client.saturating_sub(before.client) as f64 / TICKS,
            server: delta(&self.server, &before.server),
            postgres: delta(&self.postgres, &before.postgres),
            machine: self.machine.saturating_sub(before.machine) as f64 / TICKS,
            wall,
        }
    }
}

/// The machine's busy CPU ticks so far (`/proc/stat`: all but idle, I/O wait and steal).
fn machine_busy() -> u64 {
    let Ok(stat) = std::fs::read_to_string("/proc/stat") else {
        return 0;
    };
    let ticks: Vec<u64> = stat
        .lines()
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .skip(1)
        .filter_map(|t| t.parse().ok())
        .collect();
    // user nice system idle iowait irq softirq (then steal: the hypervisor's, not counted)
    ticks.iter().take(7).sum::<u64>() - ticks.get(3).unwrap_or(&0) - ticks.get(4).unwrap_or(&0)
}

/// `/proc/loadavg`'s three load averages.
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}
