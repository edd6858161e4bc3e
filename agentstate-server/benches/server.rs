//! The server over loopback, with a plain HTTP/1 client (hyper): a run of the three-node graph
//! (`examples/support/three.rs`) streamed on a new thread, from the request to its first
//! streamed event and to the stream's end, and a run waited for; on SQLite (a file) and, with
//! `AGENTSTATE_POSTGRES_URL`, PostgreSQL (one line says it was skipped without it).
//!
//! `cargo bench -p agentstate-server --features postgres --bench server`. The comparison with
//! LangGraph's `langgraph dev`, through the official Python SDK, is `benches/langgraph/`; both
//! tables are in `benches/README.md`.

#[path = "../examples/support/three.rs"]
mod three;

use agentstate_server::Server;
use agentstate_store::postgres::PostgresOptions;
use agentstate_store::{AnyStore, PostgresStore};
use divan::Bencher;
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::Request;
use hyper_util::rt::TokioIo;
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use tokio::runtime::Runtime;

fn main() {
    divan::main();
}

/// The store a bench runs on: a new SQLite file, or a new schema of the PostgreSQL database.
enum Db {
    Sqlite(std::path::PathBuf),
    Postgres { url: String, schema: String },
}

impl Db {
    async fn open(&self) -> AnyStore {
        match self {
            Db::Sqlite(path) => AnyStore::open(&format!("sqlite:{}", path.display()))
                .await
                .expect("the SQLite store opens"),
            Db::Postgres { url, schema } => {
                let options = PostgresOptions {
                    schema: schema.clone(),
                    ..PostgresOptions::default()
                };
                PostgresStore::connect_with(url, options)
                    .await
                    .expect("the PostgreSQL store connects")
                    .into()
            }
        }
    }

    /// Removes the file, or drops the schema.
    fn remove(&self, rt: &Runtime) {
        match self {
            Db::Sqlite(path) => {
                let _ = std::fs::remove_dir_all(path.parent().unwrap());
            }
            Db::Postgres { url, schema } => rt.block_on(async {
                let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
                    .await
                    .unwrap();
                tokio::spawn(connection);
                let drop = format!("DROP SCHEMA IF EXISTS \"{schema}\" CASCADE");
                client.batch_execute(&drop).await.unwrap();
            }),
        }
    }
}

/// A server of `three` on `db`, on a free loopback port, for the bench's life.
fn serve(rt: &Runtime, db: &Db) -> SocketAddr {
    rt.block_on(async {
        let store = db.open().await;
        let server = Server::builder(&store)
            .assistant("three", three::graph().unwrap().durable(&store))
            .build();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let at = listener.local_addr().unwrap();
        tokio::spawn(server.serve(listener));
        at
    })
}

/// One HTTP/1 connection to the server.
struct Client {
    send: hyper::client::conn::http1::SendRequest<Full<Bytes>>,
}

impl Client {
    async fn connect(at: SocketAddr) -> Client {
        let tcp = tokio::net::TcpStream::connect(at).await.unwrap();
        tcp.set_nodelay(true).unwrap();
        let (send, connection) = hyper::client::conn::http1::handshake(TokioIo::new(tcp))
            .await
            .unwrap();
        tokio::spawn(connection);
        Client { send }
    }

    async fn post(&mut self, path: &str, body: &str) -> hyper::Response<hyper::body::Incoming> {
        let request = Request::post(path)
            .header("host", "127.0.0.1")
            .header("content-type", "application/json")
            .body(Full::new(Bytes::from(body.to_owned())))
            .unwrap();
        self.send.ready().await.unwrap();
        self.send.send_request(request).await.unwrap()
    }

    /// A new thread's id.
    async fn thread(&mut self) -> String {
        let body = self.post("/threads", "{}").await.collect().await.unwrap();
        let thread: serde_json::Value = serde_json::from_slice(&body.to_bytes()).unwrap();
        thread["thread_id"].as_str().unwrap().to_owned()
    }
}

const RUN: &str = r#"{"assistant_id": "three", "input": {"log": []}, "stream_mode": ["values"]}"#;

/// Prints the p50 and p90 of `times`.
fn report(label: &str, mut times: Vec<Duration>) {
    times.sort();
    let at = |q: usize| times[q * (times.len() - 1) / 100];
    println!(
        "{label}: p50 {:?}, p90 {:?} ({} runs)",
        at(50),
        at(90),
        times.len()
    );
}

/// A streamed run on a new thread (made untimed before it): timed to the stream's end; the
/// time to its first event is printed apart (p50, p90).
fn streamed(bencher: Bencher, db: &Db, label: &str) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let at = serve(&rt, db);
    let (mut setup, mut client) =
        rt.block_on(async { (Client::connect(at).await, Client::connect(at).await) });
    let mut firsts = Vec::new();
    bencher
        .with_inputs(|| rt.block_on(setup.thread()))
        .bench_local_values(|thread| {
            rt.block_on(async {
                let start = Instant::now();
                let response = client
                    .post(&format!("/threads/{thread}/runs/stream"), RUN)
                    .await;
                let mut body = response.into_body();
                let mut first = None;
                while let Some(frame) = body.frame().await {
                    let frame = frame.unwrap();
                    if first.is_none() && frame.data_ref().is_some_and(|d| !d.is_empty()) {
                        first = Some(start.elapsed());
                    }
                }
                firsts.push(first.expect("a streamed event"));
            })
        });
    report(&format!("{label}: first event"), firsts);
    db.remove(&rt);
}

/// A run on a new thread (made untimed before it), waited for (`/runs/wait`).
fn waited(bencher: Bencher, db: &Db) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let at = serve(&rt, db);
    let (mut setup, mut client) =
        rt.block_on(async { (Client::connect(at).await, Client::connect(at).await) });
    bencher
        .with_inputs(|| rt.block_on(setup.thread()))
        .bench_local_values(|thread| {
            rt.block_on(async {
                let response = client
                    .post(&format!("/threads/{thread}/runs/wait"), RUN)
                    .await;
                let body = response.into_body().collect().await.unwrap().to_bytes();
                assert!(body.windows(3).any(|w| w == b"\"c\""), "the run finished");
            })
        });
    db.remove(&rt);
}

fn sqlite(name: &str) -> Db {
    let dir = std::env::temp_dir().join(format!(
        "agentstate-server-bench-{}-{name}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    Db::Sqlite(dir.join("bench.db"))
}

/// A new schema of the PostgreSQL server's database, or `None` (said) without
/// `AGENTSTATE_POSTGRES_URL`.
fn postgres(name: &str) -> Option<Db> {
    let Ok(url) = std::env::var("AGENTSTATE_POSTGRES_URL") else {
        println!("{name}: skipped, AGENTSTATE_POSTGRES_URL is not set");
        return None;
    };
    let schema = format!("bench_server_{}_{name}", std::process::id());
    Some(Db::Postgres { url, schema })
}

#[divan::bench(sample_count = 300, sample_size = 1)]
fn sqlite_stream(bencher: Bencher) {
    streamed(bencher, &sqlite("stream"), "sqlite_stream");
}

#[divan::bench(sample_count = 300, sample_size = 1)]
fn sqlite_wait(bencher: Bencher) {
    waited(bencher, &sqlite("wait"));
}

#[divan::bench(sample_count = 300, sample_size = 1)]
fn postgres_stream(bencher: Bencher) {
    if let Some(db) = postgres("stream") {
        streamed(bencher, &db, "postgres_stream");
    }
}

#[divan::bench(sample_count = 300, sample_size = 1)]
fn postgres_wait(bencher: Bencher) {
    if let Some(db) = postgres("wait") {
        waited(bencher, &db);
    }
}
