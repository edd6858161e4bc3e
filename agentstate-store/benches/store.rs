//! The store's costs, on SQLite (a file in the temp directory, WAL, `synchronous=NORMAL`) and,
//! with feature `postgres` and `AGENTSTATE_POSTGRES_URL`, on PostgreSQL over loopback.
//!
//! - `sqlite_append`: one step of one ~400-character message appended through a thread handle
//!   (serialize, plan the merge, version check, insert, commit, apply the merge) to a thread whose
//!   journal already holds 1k, 10k and 100k messages, with the default snapshot policy (one
//!   append in 1,000 also writes a snapshot of the whole state: that sample is in the mean, not
//!   the median). Goal: median at most 50 µs, and 100k within 1.5x of 1k.
//! - `sqlite_load_latest` vs `deserialize_state_json`: loading the 300-turn chat (600 entries,
//!   default snapshot policy: no snapshot yet, so 600 replays) against `serde_json` reading that
//!   state's own JSON. Goal: at most 2x.
//!   With `AGENTSTATE_LOAD_RATIO=<pairs>` set, the bench instead times the two in pairs, one
//!   right after the other, and prints the distribution of the pairs' ratios: the speed of a
//!   virtual machine drifts within seconds, which two separate medians do not cancel out.
//! - `sqlite_history_1000`: one page of 1,000 entries' metadata. Goal: at most 5 ms.
//! - After each `sqlite_append` thread, the bench prints the database file's size (WAL
//!   checkpointed into it) next to the journal's and the snapshots' JSON: the pages of snapshots
//!   the snapshot policy deletes are given back to the file system (incremental auto-vacuum).
//! - `postgres_append`: as `sqlite_append`, on a thread of 1k messages, with the server's
//!   `synchronous_commit=on` (each commit waits for the WAL's flush to disk) and with the store's
//!   opt-in `synchronous_commit=off`. Goal: median at most 1 ms.
//! - `sqlite_append_created`: as `sqlite_append`, on a thread *created* with 1k, 10k and 100k
//!   messages (its initial state; the journal starts empty). Goal: 100k within 1.5x of 1k.
//! - `sqlite_lease_cycle`: a lease taken and released on a thread created with 1k, 10k and 100k
//!   messages. Goal: at most 100 µs at any size.
//! - `postgres_append_created`, `postgres_lease_cycle`: the same two on PostgreSQL.
//! - `postgres_throughput`: 800 appends by 8 workers spread over 100 threads (each worker owns
//!   its handles, so each append is at a fresh version); appends per second = 800 / time.
//!
//! Run with `cargo bench -p agentstate-store --all-features --bench store`.

use agentstate::message::{Message, Role};
use agentstate::state::{AgentState, AgentStateUpdate};
use agentstate_store::backend::Backend;
use agentstate_store::{HistoryQuery, SnapshotPolicy, SqliteStore, StepMeta, Store, Thread};
use divan::Bencher;
use std::path::{Path, PathBuf};
use tokio::runtime::Runtime;

fn main() {
    match std::env::var("AGENTSTATE_LOAD_RATIO") {
        Ok(pairs) => load_ratio(pairs.parse().unwrap_or(1_000)),
        Err(_) => divan::main(),
    }
}

/// `sqlite_load_latest` against `deserialize_state_json` in pairs, one right after the other,
/// so that both see the same speed of a machine whose speed drifts: prints the medians and
/// the distribution of the pairs' ratios.
fn load_ratio(pairs: usize) {
    let rt = runtime();
    let path = temp_db("ratio");
    let store = chat_300(&rt, &path);
    let state = rt.block_on(store.load::<AgentState>("chat")).unwrap().state;
    let json = serde_json::to_string(&state).unwrap();
    let (mut loads, mut reads, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..pairs.max(10) {
        let start = std::time::Instant::now();
        let loaded = rt.block_on(store.load::<AgentState>("chat")).unwrap();
        let loaded_at = std::time::Instant::now();
        let read: AgentState = serde_json::from_str(divan::black_box(&json)).unwrap();
        let read_at = std::time::Instant::now();
        drop((loaded, read));
        let (load, read) = (loaded_at - start, read_at - loaded_at);
        loads.push(load);
        reads.push(read);
        ratios.push(load.as_secs_f64() / read.as_secs_f64());
    }
    loads.sort();
    reads.sort();
    ratios.sort_by(f64::total_cmp);
    let at = |q: usize| q * (ratios.len() - 1) / 100;
    println!(
        "{} pairs: load latest median {:?}, state JSON median {:?}; load / JSON per pair: \
         median {:.2}x (p10 {:.2}x, p90 {:.2}x)",
        ratios.len(),
        loads[at(50)],
        reads[at(50)],
        ratios[at(50)],
        ratios[at(10)],
        ratios[at(90)],
    );
    drop(store);
    remove_db(&path);
}

fn runtime() -> Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// A ~400-character message.
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

fn step(i: usize) -> AgentStateUpdate {
    AgentStateUpdate::default().context(vec![message(i)])
}

fn temp_db(name: &str) -> PathBuf {
    let path =
        std::env::temp_dir().join(format!("agentstate-bench-{name}-{}.db", std::process::id()));
    remove_db(&path);
    path
}

fn remove_db(path: &Path) {
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
}

/// A thread of `n` messages, one entry each, appended through the store.
async fn chat<B: Backend>(store: &Store<B>, id: &str, n: usize) -> Thread<AgentState, B> {
    let mut thread = store.create(id, AgentState::default()).await.unwrap();
    for i in 0..n {
        thread.merge(step(i), StepMeta::node("chat")).await.unwrap();
    }
    thread
}

#[divan::bench(args = [1_000, 10_000, 100_000], sample_count = 300, sample_size = 1)]
fn sqlite_append(bencher: Bencher, n: usize) {
    let rt = runtime();
    let path = temp_db(&format!("append-{n}"));
    let store = SqliteStore::open(&path).unwrap();
    let mut thread = rt.block_on(chat(&store, "chat", n));
    let mut i = n;
    bencher
        .with_inputs(|| {
            i += 1;
            step(i)
        })
        .bench_local_values(|update| {
            rt.block_on(thread.merge(update, StepMeta::node("chat")))
                .unwrap()
        });
    drop(thread);
    drop(store);
    report_file(&path, &format!("sqlite_append({n})"));
    remove_db(&path);
}

/// A state of `n` messages: the initial state of a thread created with them.
fn messages(n: usize) -> AgentState {
    let mut state = AgentState::default();
    agentstate::State::merge(
        &mut state,
        AgentStateUpdate::default().context((0..n).map(message).collect::<Vec<_>>()),
    )
    .unwrap();
    state
}

/// Appends to a thread created with `n` messages (its initial state), one message a step.
fn append_created<B: Backend>(rt: &Runtime, store: &Store<B>, bencher: Bencher, n: usize) {
    let mut thread = rt.block_on(store.create("created", messages(n))).unwrap();
    let mut i = n;
    bencher
        .with_inputs(|| {
            i += 1;
            step(i)
        })
        .bench_local_values(|update| {
            rt.block_on(thread.merge(update, StepMeta::node("chat")))
                .unwrap()
        });
}

/// A lease taken and released on a thread created with `n` messages.
fn lease_cycle<B: Backend>(rt: &Runtime, store: &Store<B>, bencher: Bencher, n: usize) {
    let ttl = std::time::Duration::from_secs(60);
    rt.block_on(store.create("leased", messages(n))).unwrap();
    bencher.bench_local(|| {
        rt.block_on(async {
            let lease = store.lease("leased", "worker-1", ttl).await.unwrap();
            lease.release().await.unwrap();
        })
    });
}

/// One step appended to a thread created with 1k, 10k and 100k messages (its initial state;
/// the journal starts empty). Goal: flat (100k within 1.5x of 1k).
#[divan::bench(args = [1_000, 10_000, 100_000], sample_count = 300, sample_size = 1)]
fn sqlite_append_created(bencher: Bencher, n: usize) {
    let rt = runtime();
    let path = temp_db(&format!("append-created-{n}"));
    let store = SqliteStore::open(&path).unwrap();
    append_created(&rt, &store, bencher, n);
    drop(store);
    remove_db(&path);
}

/// A lease taken and released (two transactions) on a thread created with 1k, 10k and 100k
/// messages. Goal: at most 100 µs at any size.
#[divan::bench(args = [1_000, 10_000, 100_000], sample_count = 300, sample_size = 1)]
fn sqlite_lease_cycle(bencher: Bencher, n: usize) {
    let rt = runtime();
    let path = temp_db(&format!("lease-cycle-{n}"));
    let store = SqliteStore::open(&path).unwrap();
    lease_cycle(&rt, &store, bencher, n);
    drop(store);
    remove_db(&path);
}

/// A lease renewal (one transaction on the connection's thread), and a refused acquisition
/// (the same, plus the read of who holds it).
#[divan::bench(args = ["renew", "refused"], sample_count = 300, sample_size = 1)]
fn sqlite_lease(bencher: Bencher, what: &str) {
    let rt = runtime();
    let path = temp_db(&format!("lease-{what}"));
    let store = SqliteStore::open(&path).unwrap();
    lease_bench(&rt, &store, bencher, what);
    drop(store);
    remove_db(&path);
}

fn lease_bench<B: Backend>(rt: &Runtime, store: &Store<B>, bencher: Bencher, what: &str) {
    let ttl = std::time::Duration::from_secs(60);
    rt.block_on(store.create("leased", AgentState::default()))
        .unwrap();
    let mut lease = rt.block_on(store.lease("leased", "worker-1", ttl)).unwrap();
    match what {
        "renew" => bencher.bench_local(|| rt.block_on(lease.renew()).unwrap()),
        _ => bencher.bench_local(|| {
            rt.block_on(store.lease("leased", "worker-2", ttl))
                .unwrap_err()
        }),
    }
}

/// Prints the database file's size, with the WAL checkpointed into it, and the JSON it holds.
fn report_file(path: &Path, label: &str) {
    let conn = rusqlite::Connection::open(path).unwrap();
    conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE);")
        .unwrap();
    let query = |sql: &str| -> i64 { conn.query_row(sql, [], |r| r.get(0)).unwrap() };
    let mb = |bytes: i64| bytes as f64 / 1e6;
    let file = std::fs::metadata(path).map(|m| m.len() as i64).unwrap_or(0);
    let journal = query("SELECT coalesce(sum(octet_length(body)), 0) FROM agentstate_entries");
    let snapshots = query(
        "SELECT coalesce(sum(octet_length(body)), 0) FROM agentstate_snapshots WHERE key >= 4294967296",
    );
    println!(
        "{label}: file {:.1} MB for {:.1} MB of journal and {:.1} MB of kept snapshots ({} free pages)",
        mb(file),
        mb(journal),
        mb(snapshots),
        query("PRAGMA freelist_count")
    );
}

/// The 300-turn chat: 600 entries of one message.
fn chat_300(rt: &Runtime, path: &Path) -> SqliteStore {
    let store = SqliteStore::open(path).unwrap();
    rt.block_on(chat(&store, "chat", 600));
    store
}

#[divan::bench(sample_count = 100)]
fn sqlite_load_latest(bencher: Bencher) {
    let rt = runtime();
    let path = temp_db("load");
    let store = chat_300(&rt, &path);
    bencher.bench_local(|| rt.block_on(store.load::<AgentState>("chat")).unwrap());
    drop(store);
    remove_db(&path);
}

#[divan::bench(sample_count = 100)]
fn deserialize_state_json(bencher: Bencher) {
    let rt = runtime();
    let path = temp_db("deserialize");
    let store = chat_300(&rt, &path);
    let state = rt.block_on(store.load::<AgentState>("chat")).unwrap().state;
    let json = serde_json::to_string(&state).unwrap();
    bencher.bench_local(|| serde_json::from_str::<AgentState>(divan::black_box(&json)).unwrap());
    drop(store);
    remove_db(&path);
}

#[divan::bench(sample_count = 100)]
fn sqlite_history_1000(bencher: Bencher) {
    let rt = runtime();
    let path = temp_db("history");
    let store = SqliteStore::open(&path)
        .unwrap()
        .with_snapshot_policy(SnapshotPolicy::every(u64::MAX));
    rt.block_on(chat(&store, "chat", 1_000));
    bencher.bench_local(|| {
        let page = rt
            .block_on(store.history("chat", HistoryQuery::oldest(1_000)))
            .unwrap();
        assert_eq!(page.len(), 1_000);
        page
    });
    drop(store);
    remove_db(&path);
}

#[cfg(feature = "postgres")]
mod postgres {
    use super::*;
    use agentstate_store::postgres::{Postgres, PostgresOptions};
    use agentstate_store::PostgresStore;

    /// A store in a fresh schema, or `None` without `AGENTSTATE_POSTGRES_URL`.
    fn store(
        rt: &Runtime,
        name: &str,
        synchronous_commit: bool,
    ) -> Option<(Store<Postgres>, String)> {
        let url = std::env::var("AGENTSTATE_POSTGRES_URL").ok()?;
        let schema = format!("agentstate_bench_{name}_{}", std::process::id());
        let options = PostgresOptions {
            schema: schema.clone(),
            max_connections: 16,
            synchronous_commit,
        };
        let store = rt
            .block_on(PostgresStore::connect_with(&url, options))
            .unwrap();
        Some((store, url))
    }

    fn drop_schema(rt: &Runtime, url: &str, name: &str) {
        let schema = format!("agentstate_bench_{name}_{}", std::process::id());
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

    /// `synchronous_commit`: `true` is the server's default (each commit waits for its WAL
    /// flush), `false` the store's opt-in (`PostgresOptions::synchronous_commit`).
    #[divan::bench(args = [true, false], sample_count = 300, sample_size = 1)]
    fn postgres_append(bencher: Bencher, synchronous_commit: bool) {
        let rt = runtime();
        let name = format!("append_{synchronous_commit}");
        let Some((store, url)) = store(&rt, &name, synchronous_commit) else {
            eprintln!("postgres benchmarks skipped: AGENTSTATE_POSTGRES_URL is not set");
            return;
        };
        let mut thread = rt.block_on(chat(&store, "chat", 1_000));
        let mut i = 1_000;
        bencher
            .with_inputs(|| {
                i += 1;
                step(i)
            })
            .bench_local_values(|update| {
                rt.block_on(thread.merge(update, StepMeta::node("chat")))
                    .unwrap()
            });
        drop(thread);
        drop(store);
        drop_schema(&rt, &url, &name);
    }

    /// A lease renewal and a refused acquisition: one statement each.
    #[divan::bench(args = ["renew", "refused"], sample_count = 300, sample_size = 1)]
    fn postgres_lease(bencher: Bencher, what: &str) {
        let rt = runtime();
        let name = format!("lease_{what}");
        let Some((store, url)) = store(&rt, &name, true) else {
            eprintln!("postgres benchmarks skipped: AGENTSTATE_POSTGRES_URL is not set");
            return;
        };
        lease_bench(&rt, &store, bencher, what);
        drop(store);
        drop_schema(&rt, &url, &name);
    }

    /// As `sqlite_append_created`: one step appended to a thread created with 1k, 10k and
    /// 100k messages.
    #[divan::bench(args = [1_000, 10_000, 100_000], sample_count = 300, sample_size = 1)]
    fn postgres_append_created(bencher: Bencher, n: usize) {
        let rt = runtime();
        let name = format!("append_created_{n}");
        let Some((store, url)) = store(&rt, &name, true) else {
            eprintln!("postgres benchmarks skipped: AGENTSTATE_POSTGRES_URL is not set");
            return;
        };
        append_created(&rt, &store, bencher, n);
        drop(store);
        drop_schema(&rt, &url, &name);
    }

    /// As `sqlite_lease_cycle`: a lease taken and released (two statements) on a thread
    /// created with 1k, 10k and 100k messages.
    #[divan::bench(args = [1_000, 10_000, 100_000], sample_count = 300, sample_size = 1)]
    fn postgres_lease_cycle(bencher: Bencher, n: usize) {
        let rt = runtime();
        let name = format!("lease_cycle_{n}");
        let Some((store, url)) = store(&rt, &name, true) else {
            eprintln!("postgres benchmarks skipped: AGENTSTATE_POSTGRES_URL is not set");
            return;
        };
        lease_cycle(&rt, &store, bencher, n);
        drop(store);
        drop_schema(&rt, &url, &name);
    }

    #[divan::bench(sample_count = 20)]
    fn postgres_throughput(bencher: Bencher) {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let Some((store, url)) = store(&rt, "throughput", true) else {
            eprintln!("postgres benchmarks skipped: AGENTSTATE_POSTGRES_URL is not set");
            return;
        };
        // 100 threads; worker w owns threads w, w + 8, ...
        let handles: Vec<Vec<Thread<AgentState, Postgres>>> = rt.block_on(async {
            let mut workers: Vec<Vec<_>> = (0..8).map(|_| Vec::new()).collect();
            for t in 0..100 {
                let thread = store
                    .create(&format!("t{t}"), AgentState::default())
                    .await
                    .unwrap();
                workers[t % 8].push(thread);
            }
            workers
        });
        let handles = std::sync::Arc::new(std::sync::Mutex::new(Some(handles)));
        bencher.bench_local(|| {
            let workers = handles.lock().unwrap().take().unwrap();
            let done = rt.block_on(async {
                let tasks: Vec<_> = workers
                    .into_iter()
                    .map(|mut threads| {
                        tokio::spawn(async move {
                            for k in 0..100 {
                                let n = threads.len();
                                threads[k % n]
                                    .merge(step(k), StepMeta::node("w"))
                                    .await
                                    .unwrap();
                            }
                            threads
                        })
                    })
                    .collect();
                let mut back = Vec::new();
                for task in tasks {
                    back.push(task.await.unwrap());
                }
                back
            });
            *handles.lock().unwrap() = Some(done);
        });
        drop(handles);
        drop(store);
        drop_schema(&rt, &url, "throughput");
    }
}
