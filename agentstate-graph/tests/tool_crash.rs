//! A worker killed during a step of five parallel tool calls, on a SQLite file and on
//! PostgreSQL (when `AGENTSTATE_POSTGRES_URL` is set; under `CI` it must be).
//!
//! A child process (this binary run again with `AGENTSTATE_GRAPH_CHILD` set) starts a durable
//! run whose model node asks for five calls of the tool `work` at once and whose
//! [`ToolNode`](agentstate_graph::prebuilt::ToolNode) runs them in parallel: three end at once,
//! two wait for a release file. Once the three finished calls are journaled and the two others
//! are running, the test kills the child with SIGKILL, releases the two, and a new child
//! resumes the run. Then:
//! - each finished call ran exactly once (the resumed step returned its journaled result);
//! - each call in flight at the kill ran at most twice in all, every time with the same
//!   idempotency key;
//! - each call's result is journaled once, under its call id, and the run's final messages are
//!   the five results in call order.
//!
//! Every execution of the tool is a line in a file (`{call id} {idempotency key} {pid}`),
//! written before its work.

mod procs;

use agentstate::message::{Message, Role, ToolCall};
use agentstate::state::{AgentState, AgentStateUpdate};
use agentstate_graph::durable::{DurableGraph, Outcome};
use agentstate_graph::prebuilt::ToolNode;
use agentstate_graph::{BoxError, Context, Graph, ToolSet, END};
use procs::*;
use serde_json::json;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The lease ttl of the children: a killed child holds the thread this long at most.
const TTL: Duration = Duration::from_millis(250);
/// The calls of the step.
const CALLS: u64 = 5;
/// The calls below it end at once; the others wait for the release file.
const QUICK: u64 = 3;

fn main() {
    let runtime = runtime();
    if let Ok(spec) = std::env::var(CHILD) {
        runtime.block_on(child(&spec));
        return;
    }
    let dir = scratch("tool-crash");
    let dbs = databases("tool_crash", &dir);
    for db in &dbs {
        let started = Instant::now();
        let report = runtime.block_on(killed_during_tools(db, &dir));
        println!(
            "tool crash {:<8} ... ok ({:.1?}): {report}",
            db.backend(),
            started.elapsed()
        );
        db.remove();
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// The tool `work`'s arguments: which call it is.
#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Work {
    n: u64,
}

/// The model node asks for the five calls; the tool node runs them. A call below [`QUICK`]
/// ends within a few ms, the others once `release` exists; each execution is first written to
/// `raw` with its idempotency key.
fn graph(raw: PathBuf, release: PathBuf) -> Graph<AgentState> {
    let tools = ToolSet::new().tool("work", move |work: Work, cx: Context| {
        let (raw, release) = (raw.clone(), release.clone());
        async move {
            let key = cx.idempotency_key().ok_or("a tool call has a key")?;
            append_line(
                &raw,
                &format!("call_{} {key} {}", work.n, std::process::id()),
            );
            if work.n < QUICK {
                tokio::time::sleep(Duration::from_millis(work.n)).await;
            } else {
                while !release.exists() {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
            }
            Ok::<_, BoxError>(format!("worked {}", work.n))
        }
    });
    Graph::builder()
        .node("model", |_: Arc<AgentState>, _: Context| async {
            let calls = (0..CALLS)
                .map(|n| ToolCall::new(format!("call_{n}"), "work", json!({"n": n})))
                .collect();
            let ask = Message::text_message("", Role::Assistant).with_tool_calls(calls);
            Ok::<_, BoxError>(AgentStateUpdate::default().context(vec![ask]))
        })
        .node("tools", ToolNode::new(tools))
        .entry("model")
        .edge("model", "tools")
        .edge("tools", END)
        .build()
        .unwrap()
}

/// The executions of each call: (idempotency key, pid) each time it ran.
fn executions(raw: &Path) -> BTreeMap<String, Vec<(String, u32)>> {
    let mut out: BTreeMap<String, Vec<(String, u32)>> = BTreeMap::new();
    for line in std::fs::read_to_string(raw).unwrap_or_default().lines() {
        let mut parts = line.split(' ');
        let (Some(call), Some(key), Some(pid)) = (parts.next(), parts.next(), parts.next()) else {
            panic!("a malformed line {line:?}")
        };
        out.entry(call.to_owned())
            .or_default()
            .push((key.to_owned(), pid.parse().unwrap()));
    }
    out
}

/// The journal keys of the tool calls' effect entries of `thread`, each with its count.
async fn journaled(store: &agentstate_store::AnyStore, thread: &str) -> BTreeMap<String, usize> {
    let entries = store
        .history(thread, agentstate_store::HistoryQuery::oldest(1000))
        .await
        .unwrap_or_default();
    let mut keys = BTreeMap::new();
    for meta in entries
        .iter()
        .filter_map(|e| e.extra.get("agentstate_graph"))
        .filter(|m| m["entry"] == "effect")
    {
        *keys
            .entry(meta["key"].as_str().unwrap_or_default().to_owned())
            .or_insert(0) += 1;
    }
    keys
}

/// Kills a child once the quick calls are journaled and the others run, resumes in another;
/// checks the executions, the journal and the final state. A line of numbers.
async fn killed_during_tools(db: &Db, dir: &Path) -> String {
    let store = db.open().await;
    let thread = format!("tool-crash-{}-{}", std::process::id(), now_ms());
    let (raw, release) = raw_and_release(dir, &format!("tools-{}", db.backend()));
    let spec = release_spec(&thread, &raw, &release, db);

    let mut first = started_child(&spec);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let recorded = journaled(&store, &thread).await;
        let ran = executions(&raw);
        if recorded.len() == QUICK as usize && ran.len() == CALLS as usize {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "in 60 s the quick calls were not journaled ({recorded:?}) or not every call started ({ran:?})"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    first.kill();
    let before = executions(&raw);
    let recorded = journaled(&store, &thread).await;
    let finished: Vec<String> = (0..QUICK).map(|n| format!("call_{n}")).collect();
    for call in &finished {
        assert!(
            recorded
                .keys()
                .any(|k| k.ends_with(&format!("/call:{call}"))),
            "{call} is not journaled before the kill: {recorded:?}"
        );
    }

    std::fs::write(&release, b"").unwrap();
    resume_in_child(&spec);

    let after = executions(&raw);
    assert_eq!(after.len(), CALLS as usize, "every call ran: {after:?}");
    let mut again = 0;
    for (call, runs) in &after {
        let keys: std::collections::BTreeSet<&String> = runs.iter().map(|(k, _)| k).collect();
        assert_eq!(
            keys.len(),
            1,
            "{call} ran with several idempotency keys: {runs:?}"
        );
        assert!(
            keys.iter().all(|k| k.ends_with(&format!("/call:{call}"))),
            "{call}'s key does not name its call id: {keys:?}"
        );
        if finished.contains(call) {
            assert_eq!(
                runs.len(),
                1,
                "{call} finished and was journaled before the kill, and ran again: {runs:?}"
            );
        } else {
            assert!(
                runs.len() <= 2,
                "{call} was in flight at the kill and ran {} times: {runs:?}",
                runs.len()
            );
            assert_eq!(before[call].len(), 1, "{call} ran before the kill");
            again += runs.len() - 1;
        }
    }
    let recorded = journaled(&store, &thread).await;
    assert_eq!(
        recorded.len(),
        CALLS as usize,
        "each call journaled: {recorded:?}"
    );
    assert!(
        recorded.values().all(|n| *n == 1),
        "a call journaled twice: {recorded:?}"
    );
    let state = store.load::<AgentState>(&thread).await.unwrap().state;
    let results: Vec<(String, String)> = state
        .context
        .iter()
        .flat_map(|m| {
            m.tool_results()
                .map(|r| (r.call_id.clone(), m.text()))
                .collect::<Vec<_>>()
        })
        .collect();
    let expected: Vec<(String, String)> = (0..CALLS)
        .map(|n| (format!("call_{n}"), format!("worked {n}")))
        .collect();
    assert_eq!(results, expected, "the results, in call order");
    store.delete(&thread).await.unwrap();
    let _ = std::fs::remove_file(&raw);
    let _ = std::fs::remove_file(&release);
    format!(
        "{QUICK} of {CALLS} calls journaled before the kill ran once; the {} in flight ran again {again} times in all, each with its own key",
        CALLS - QUICK
    )
}

/// A child: starts or resumes the thread once a killed child's lease has lapsed; prints `go`
/// when it begins and `finished` at the end.
async fn child(spec: &str) {
    let mut parts = spec.splitn(4, '|');
    let (thread, raw, release, db) = (
        parts.next().unwrap(),
        PathBuf::from(parts.next().unwrap()),
        PathBuf::from(parts.next().unwrap()),
        Db::parse(parts.next().unwrap()),
    );
    let store = db.open().await;
    let graph: DurableGraph<AgentState, &'static str, _> = graph(raw, release)
        .durable(&store)
        .worker(format!("tool-crash-child-{}", std::process::id()))
        .lease_ttl(TTL);
    lease_lapsed(&store, thread).await;
    say("go");
    let result = match store.info(thread).await {
        Err(e) if e.category() == "thread_not_found" => {
            graph.start(thread, AgentState::default()).await
        }
        Err(e) => panic!("info: {e}"),
        Ok(_) => graph.resume(thread).await,
    };
    match result {
        Ok(Outcome::Finished { .. }) => say("finished"),
        other => panic!("thread `{thread}`: the run did not finish: {other:?}"),
    }
}
