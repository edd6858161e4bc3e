//! What the durable-run test files share: the state of their graphs, call counters, gates and
//! nodes, and reading a thread's journal.

#![allow(dead_code)] // each test file uses some of it

use agentstate::AgentState;
use agentstate_graph::durable::{Durability, META_KEY};
use agentstate_graph::{BoxError, Context, Node};
use agentstate_store::backend::Backend;
use agentstate_store::{EntryInfo, HistoryQuery, Store};
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Once};
use tokio::sync::Semaphore;

#[derive(AgentState, Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Flow {
    #[reducer(append)]
    pub log: Vec<String>,
    pub subject: String,
}

// ---------------------------------------------------------------------------------------------
// Tools of the cases.

/// Every durability mode, with its name (for the cases that run in each).
pub const MODES: [(Durability, &str); 3] = [
    (Durability::Sync, "sync"),
    (Durability::Async, "async"),
    (Durability::Exit, "exit"),
];

/// How many times each node's body ran.
#[derive(Clone, Default)]
pub struct Calls(pub Arc<Mutex<BTreeMap<String, usize>>>);

impl Calls {
    pub fn hit(&self, node: &str) -> usize {
        let mut calls = self.0.lock().unwrap();
        let n = calls.entry(node.to_owned()).or_default();
        *n += 1;
        *n
    }

    pub fn of(&self, node: &str) -> usize {
        self.0.lock().unwrap().get(node).copied().unwrap_or(0)
    }
}

/// A one-way gate: `wait` returns once `open` was called (before or after).
#[derive(Clone)]
pub struct Gate(pub Arc<Semaphore>);

impl Gate {
    pub fn new() -> Self {
        Gate(Arc::new(Semaphore::new(0)))
    }

    pub fn open(&self) {
        self.0.close();
    }

    pub async fn wait(&self) {
        let _ = self.0.acquire().await;
    }
}

/// A node that counts its calls and logs its name.
pub fn plain(calls: &Calls, name: &'static str) -> impl Node<Flow> {
    let calls = calls.clone();
    move |_: Arc<Flow>, _: Context| {
        let calls = calls.clone();
        async move {
            calls.hit(name);
            Ok::<_, BoxError>(FlowUpdate::default().log(vec![name.to_owned()]))
        }
    }
}
/// A node that never ends on its first call (after opening `started`): the run is cut short
/// there by dropping its future.
pub fn stuck_once(calls: &Calls, name: &'static str, started: &Gate) -> impl Node<Flow> {
    let (calls, started) = (calls.clone(), started.clone());
    move |_: Arc<Flow>, _: Context| {
        let (calls, started) = (calls.clone(), started.clone());
        async move {
            if calls.hit(name) == 1 {
                started.open();
                std::future::pending::<()>().await;
            }
            Ok::<_, BoxError>(FlowUpdate::default().log(vec![name.to_owned()]))
        }
    }
}
pub fn log(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}
/// The thread's journal, oldest first.
pub async fn journal<B: Backend>(store: &Store<B>, thread: &str) -> Vec<EntryInfo> {
    store
        .history(thread, HistoryQuery::oldest(1000))
        .await
        .unwrap()
}
/// An entry's run metadata (`extra["agentstate_graph"]`).
pub fn meta(entry: &EntryInfo) -> &Value {
    entry
        .extra
        .get(META_KEY)
        .unwrap_or_else(|| panic!("entry {} has no run metadata: {entry:?}", entry.seq))
}
/// A thread id no other case (or earlier test run on the same database) uses.
pub fn thread_id(case: &str) -> String {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!(
        "{case}-{}-{nanos}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::SeqCst)
    )
}

/// The PostgreSQL store at `AGENTSTATE_POSTGRES_URL`; `None` (said once) without it, unless
/// under CI; `test` names the test file in the line said.
pub async fn postgres(test: &str) -> Option<agentstate_store::PostgresStore> {
    static SKIPPED: Once = Once::new();
    let ci = std::env::var("CI").is_ok_and(|v| v == "true" || v == "1");
    match std::env::var("AGENTSTATE_POSTGRES_URL") {
        Err(_) if ci => panic!(
            "CI=true but AGENTSTATE_POSTGRES_URL is not set: the PostgreSQL tests must run in CI"
        ),
        Err(_) => {
            SKIPPED.call_once(|| {
                use std::io::Write;
                // Past the test harness's capture, so that the line is seen.
                let _ = writeln!(
                    std::io::stderr(),
                    "{test}: postgres cases skipped: AGENTSTATE_POSTGRES_URL is not set"
                );
            });
            None
        }
        Ok(url) => Some(
            agentstate_store::PostgresStore::connect(&url)
                .await
                .unwrap_or_else(|e| {
                    panic!(
                        "the PostgreSQL server at AGENTSTATE_POSTGRES_URL cannot be reached: {e}"
                    )
                }),
        ),
    }
}
