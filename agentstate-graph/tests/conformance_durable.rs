//! The OpenArmature engine conformance fixtures of checkpoints, suspension and sessions, run
//! through durable runs ([`DurableGraph`]) on SQLite in memory.
//!
//! The fixtures are not part of this repository: set `AGENTSTATE_ENGINE_CONFORMANCE_DIR` to the
//! directory holding `pipeline-utilities/`, `suspension/` and `sessions/` (`.ci/run` sets it).
//! Without it this test prints one line and passes. One line per case: `ok` (with, in
//! brackets, the parts of the case that do not apply and why), `FAILED` with what differed, or
//! `n/a` with the reason; the test fails if an applicable case fails.
//!
//! Graphs are built from the fixtures as in `conformance.rs` (`conformance_support`), over
//! [`JsonState`]s, which the store keeps as their JSON objects (read back under
//! [`JsonState::reading`]). The runtime is a current-thread one, so the schema in scope is the
//! case's.
//!
//! # How OpenArmature's concepts map to durable runs
//! - **Checkpointer, saved record** — the thread's journal. OpenArmature saves after each
//!   node's `completed` event; a durable run commits once per superstep, which in the linear
//!   graphs of these fixtures is once per node. A save is a `step` entry
//!   ([`DurableGraph::checkpoints`]), its state is [`DurableGraph::state_at`] its version, and
//!   its `completed_positions` are the nodes of the committed steps, OpenArmature's step `k`
//!   being our step `k + 1` (our step 0 is the run's input). `last_saved_at` is the entry's
//!   time. Attempt indexes are not journaled (a retry happens inside one node's call).
//! - **`invoke(resume_invocation=...)`** — [`DurableGraph::resume`] of the thread: committed
//!   steps are not run again, the step in flight runs again from its start.
//! - **Correlation id** — the thread id (chosen by the caller, the same across resumes), and
//!   the run id, which a resume keeps. **Invocation id** — the run id (a UUID v4); a resume
//!   continues the same run, so there is no fresh invocation id per resume.
//! - **A node that raises on the first invocation** — a node failing in the first run (the
//!   harness counts "first run" and "resume" phases). **Crash injection** — the run's future is
//!   dropped while the next node (or fan-out instance) waits, as a process that stops; the
//!   resume is made by another worker once the first one's lease has expired. A fan-out's
//!   `abort_after_instance` is such a crash after that instance.
//! - **`suspend(descriptor)`** — [`Context::interrupt`] with the descriptor as its payload; the
//!   run ends [`Outcome::Suspended`] with the interrupt. Its `node` is the node that asked;
//!   OpenArmature's `suspending_node` is the outer graph's node, so for a node inside a
//!   subgraph the suspended step's node ([`DurableGraph::status`], the last checkpoint's
//!   `next`) is compared instead.
//!   **Resume with a signal payload** — [`DurableGraph::resume_with`] answering every pending
//!   interrupt with the payload: the asking node runs again from its start, its `interrupt`
//!   call returns the payload and the node returns it as its update (so it merges through the
//!   reducers). The "execution order" of a resumed invocation leaves out that node's own run
//!   again (OpenArmature continues after it). The paused record is the thread's `suspend`
//!   entry ([`DurableGraph::status`] says `Suspended`).
//! - **Sessions** — threads: a session id is a thread id, a session's saved state is the
//!   thread's state, an invocation on an existing session is [`DurableGraph::run`] with the
//!   invocation's initial state as the run's input. A mid-invoke save is the commit of each
//!   step. Session state migrations are the store's migrations ([`Migration`]) of a typed
//!   state declaring the fixture's version (`vN` read as `N`); OpenArmature's
//!   `session_state_migration_*` categories are the store's `state_migration_*`.
//! - **Error categories**: `checkpoint_not_found` is `thread_not_found`;
//!   `suspension_record_invalid` is `run_state_invalid` (nothing to answer) or
//!   `thread_not_found`; `suspension_resume_payload_invalid` is the merge's validation error.
//!
//! - **Fan-out progress** (`fan_out_progress`) — the fan-out's records in the journal
//!   (`effect` entries named `fan_out_count` and `fan_out_instance`): the instance count,
//!   recorded when the fan-out starts, and each finished instance's final state, recorded as
//!   it finishes; an instance with a record is `completed` (its `result` is the collected field
//!   of its recorded state), one without is `in_flight` or `not_started` (not told apart).
//!   A failed instance is not recorded (it runs again), so an error record of a collecting
//!   fan-out does not apply; saves are not batched (each is journaled at once), so nothing
//!   buffered is lost. **`resume_with_modified_items`** — the items written to the thread as
//!   an update of its own between the runs.
//!
//! Not applicable (a feature durable runs do not have): positions inside a subgraph (a
//! subgraph node is one node of its step), `parent_states`, schema versions of runtime
//! [`JsonState`]s, an invocation id per resume, a caller-chosen run id, session state
//! projection, turning off a session's save, overwriting a field through its reducer from a
//! [`JsonState`] update, and telling an interrupt from a layer apart from the node's own.
//!
//! - **Session observability** (sessions 012) — the `tracing` spans of the run, seen by a
//!   recording subscriber (`capture_support`): the invocation span is `agentstate.run`, a node's
//!   span is the `agentstate.node` span whose `otel.name` is the node's name (under the run's
//!   `agentstate.step` span, which OpenArmature does not have), and `openarmature.session_id`
//!   is OpenTelemetry's `gen_ai.conversation.id`, the thread's id. A log record carries the
//!   fields of the span it is emitted in. An invocation bound to no session is an in-memory
//!   run (`Graph::invoke`).
//!
//! The test runs without the libtest harness (`harness = false`) so that its lines are shown.

mod capture_support;
mod conformance_support;

use agentstate_graph::durable::{Answers, DurableError, Outcome, RunStatus, META_KEY};
use agentstate_graph::json::JsonState;
use agentstate_graph::{BoxError, BoxNode, Context, Graph, Node, RunError, END};
use agentstate_store::migrate::{Migration, Migrations};
use agentstate_store::{HistoryQuery, SqliteStore, StepMeta, StoreError, ThreadQuery};
use capture_support::{field, Capture};
use conformance_support::{
    apply_middleware, body, build, cases, computed, fail, fixture_files, registry,
    set_case_middleware, set_directives, Built, Flaky, Raised,
};
use futures_util::future::{select, Either};
use serde_json::{json, Map, Value};
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The fixtures issue 22 lists.
const CHECKPOINT: &[u32] = &[
    24, 25, 26, 27, 29, 30, 31, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 67, 70,
];
const SUSPENSION: &[u32] = &[1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 13, 14, 15];
const SESSIONS: &[u32] = &[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13];

/// Listed fixtures whose subject durable runs do not have, with the reason.
fn not_applicable(family: &str, number: u32) -> Option<&'static str> {
    Some(match (family, number) {
        ("suspension", 2) => "the answer is the node's update and merges through the reducers; a JsonState update cannot overwrite an `append` field (typed states can, with `Overwrite`)",
        ("suspension", 15) => "a layer is part of its node: its `Context::interrupt` suspends the node like the node's own, there is no middleware context to reject",
        ("sessions", 4) => "a thread keeps its whole state; there is no projection of the fields a session saves",
        ("sessions", 5) => "a durable run always commits its steps; a run that saves nothing is a plain `Graph::invoke`, not a session option",
        _ => return None,
    })
}

fn main() {
    let Some(dir) = std::env::var_os("AGENTSTATE_ENGINE_CONFORMANCE_DIR") else {
        println!("OpenArmature durable conformance: AGENTSTATE_ENGINE_CONFORMANCE_DIR is not set; skipping");
        return;
    };
    let dir = PathBuf::from(dir);
    set_directives(Rc::new(directive));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("a runtime");
    let (mut passed, mut not_applicable_count) = (0, 0);
    let mut failures = Vec::new();
    for (family, listed) in [
        ("pipeline-utilities", CHECKPOINT),
        ("suspension", SUSPENSION),
        ("sessions", SESSIONS),
    ] {
        for (file, number) in fixture_files(&dir.join(family)) {
            if !listed.contains(&number) {
                continue;
            }
            let stem = file.file_stem().unwrap().to_string_lossy().into_owned();
            if let Some(reason) = not_applicable(family, number) {
                not_applicable_count += 1;
                println!("n/a {family}/{stem}: {reason}");
                continue;
            }
            let fixture: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap())
                .unwrap_or_else(|e| panic!("{}: {e}", file.display()));
            for (name, case) in cases(&fixture) {
                let label = format!("{family}/{stem}{name}");
                match run_case(&runtime, family, number, &fixture, &case) {
                    Ok(notes) => {
                        passed += 1;
                        if notes.is_empty() {
                            println!("ok {label}");
                        } else {
                            println!("ok {label} [n/a: {}]", notes.join("; "));
                        }
                    }
                    Err(problem) => {
                        println!("FAILED {label}: {problem}");
                        failures.push(format!("{label}: {problem}"));
                    }
                }
            }
        }
    }
    println!(
        "OpenArmature durable conformance: {passed} cases passed, {} failed, {not_applicable_count} fixtures not applicable",
        failures.len()
    );
    assert!(passed > 0, "no case found under {}", dir.display());
    assert!(
        failures.is_empty(),
        "failed cases:\n{}",
        failures.join("\n")
    );
}

/// What a case checked: `Ok` with the parts that do not apply, or what differed.
type Checked = Result<Vec<String>, String>;

// ----------------------------------------------------------------------------------------
// What the nodes did: the harness's mocks and their record.

/// Where the first run crashes.
#[derive(Debug, Clone)]
enum Crash {
    /// When a node starts after this one ran.
    AfterNode(String),
    /// When a fan-out instance after this one starts.
    AfterInstance(i64),
}

#[derive(Default)]
struct Trace {
    /// Whether the run is a resume (the mocks that fail "on the first invocation" succeed).
    resumed: bool,
    /// The node bodies that ran in this phase, in order.
    nodes: Vec<String>,
    /// The state each node body was given, in order.
    seen: Vec<(String, Value)>,
    /// The fan-out instances (by index) whose node ran in this phase.
    instances: Vec<i64>,
    /// The calls of each node in this phase.
    calls: BTreeMap<String, u32>,
    /// The middleware log (`pre_log`, `post_log`).
    middleware: Vec<String>,
    /// The fan-out's items, to tell an instance's index from its item.
    items: Vec<Value>,
    /// The crash to inject in the first run, and whether it happened.
    crash: Option<Crash>,
    crashed: bool,
}

thread_local! {
    static TRACE: RefCell<Trace> = RefCell::new(Trace::default());
}

fn trace<T>(f: impl FnOnce(&mut Trace) -> T) -> T {
    TRACE.with(|t| f(&mut t.borrow_mut()))
}

/// Starts a phase: the record of the last one is cleared.
fn phase(resumed: bool) {
    trace(|t| {
        t.resumed = resumed;
        t.nodes.clear();
        t.seen.clear();
        t.instances.clear();
        t.calls.clear();
        t.middleware.clear();
    });
}

/// The fan-out instance a node runs in: its state's `input` item's index in the items.
fn instance_of(state: &JsonState) -> Option<i64> {
    let item = state.get("input")?;
    trace(|t| t.items.iter().position(|i| i == item)).map(|i| i as i64)
}

/// Records a node body's start; whether the run crashes here (the body then never ends).
fn started(name: &str, state: &JsonState, instance: Option<i64>) -> bool {
    trace(|t| {
        let crash = !t.resumed
            && match &t.crash {
                Some(Crash::AfterNode(after)) => {
                    after != name && t.nodes.iter().any(|n| n == after)
                }
                Some(Crash::AfterInstance(after)) => instance.is_some_and(|i| i > *after),
                None => false,
            };
        if crash {
            t.crashed = true;
            return true;
        }
        t.nodes.push(name.to_owned());
        t.seen.push((name.to_owned(), state.to_json()));
        *t.calls.entry(name.to_owned()).or_insert(0) += 1;
        if let Some(i) = instance {
            t.instances.push(i);
        }
        false
    })
}

/// Runs `run` until it ends or a node crashes the run (then `None`: the future is dropped, as
/// a process that stopped).
async fn until_crash<F: std::future::Future>(run: F) -> Option<F::Output> {
    let watch = async {
        while !trace(|t| t.crashed) {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    };
    match select(std::pin::pin!(run), std::pin::pin!(watch)).await {
        Either::Left((output, _)) => Some(output),
        Either::Right(_) => None,
    }
}

/// A crashed body: it never ends.
async fn crashed() {
    futures_util::future::pending::<()>().await;
}

/// An update's values: a string naming one of the state's fields is that field's value
/// (`update_pure: {stage1: input}`).
fn with_references(state: &JsonState, update: &Value) -> Value {
    let mut out = Map::new();
    for (field, value) in update.as_object().into_iter().flatten() {
        let value = match value.as_str().and_then(|f| state.get(f)) {
            Some(referenced) => referenced.clone(),
            None => value.clone(),
        };
        out.insert(field.clone(), value);
    }
    Value::Object(out)
}

fn descriptor(spec: &Value) -> Value {
    let mut descriptor =
        json!({ "signal_id": spec.get("signal_id").cloned().unwrap_or(Value::Null) });
    if let Some(metadata) = spec.get("metadata") {
        descriptor["metadata"] = metadata.clone();
    }
    descriptor
}

/// The nodes this test's fixtures declare beyond `conformance_support`'s, each recording its
/// run in the trace; `None` for the others.
fn directive(name: &str, spec: &Value) -> Option<BoxNode<JsonState>> {
    // A node that logs (sessions 012): a `tracing` event, then the node's own body.
    if let Some(message) = spec.pointer("/emits_log/message").and_then(Value::as_str) {
        let mut inner_spec = spec.clone();
        inner_spec.as_object_mut()?.remove("emits_log");
        let inner = body(name, &inner_spec);
        let message = message.to_owned();
        return Some(BoxNode::new(move |s: Arc<JsonState>, cx: Context| {
            tracing::info!("{message}");
            inner.call(s, cx)
        }));
    }
    if let Some(layers) = spec.get("wrap_with_middleware").and_then(Value::as_array) {
        let mut inner_spec = spec.clone();
        inner_spec.as_object_mut()?.remove("wrap_with_middleware");
        let mut node = body(name, &inner_spec);
        for layer in layers.iter().rev() {
            let (pre, post) = (
                layer.get("pre_log").cloned(),
                layer.get("post_log").cloned(),
            );
            let inner = node;
            node = BoxNode::new(move |s: Arc<JsonState>, cx: Context| {
                if let Some(Value::String(pre)) = &pre {
                    trace(|t| t.middleware.push(pre.clone()));
                }
                let call = inner.call(s, cx);
                let post = post.clone();
                async move {
                    let output = call.await;
                    if let (Ok(_), Some(Value::String(post))) = (&output, &post) {
                        trace(|t| t.middleware.push(post.clone()));
                    }
                    output
                }
            });
        }
        return Some(node);
    }
    let node = plain_directive(name, spec)?;
    let mut node = node;
    for layer in spec
        .get("middleware")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        node = apply_middleware(node, layer);
    }
    Some(node)
}

fn plain_directive(name: &str, spec: &Value) -> Option<BoxNode<JsonState>> {
    let key = name.to_owned();
    if let Some(flaky) = spec
        .get("flaky")
        .filter(|f| f.get("fail_first_invocation_only").is_some())
    {
        let success = flaky.get("on_success").cloned().unwrap_or(json!({}));
        return Some(BoxNode::new(move |s: Arc<JsonState>, _: Context| {
            let crash = started(&key, &s, None);
            let resumed = trace(|t| t.resumed);
            let update = s.update(success.clone());
            let key = key.clone();
            async move {
                if crash {
                    crashed().await;
                }
                if resumed {
                    Ok(update)
                } else {
                    Err(Raised(format!("{key} fails on the first invocation")))
                }
            }
        }));
    }
    if let Some(flaky) = spec.get("flaky_resume_aware") {
        let count = |field: &str| flaky.get(field).and_then(Value::as_u64).unwrap_or(0) as u32;
        let (first, resumed_count) = (
            count("fail_first_invocation_count"),
            count("fail_resumed_invocation_count"),
        );
        let success = flaky.get("on_success").cloned().unwrap_or(json!({}));
        let failure = flaky.clone();
        return Some(BoxNode::new(move |s: Arc<JsonState>, _: Context| {
            started(&key, &s, None);
            let (resumed, calls) = trace(|t| (t.resumed, t.calls[&key]));
            let fails = if resumed { resumed_count } else { first };
            let result = if calls <= fails {
                Err(fail(&failure, "flaky"))
            } else {
                Ok(s.update(success.clone()))
            };
            async move { result }
        }));
    }
    if let Some(flaky) = spec.get("flaky_per_index") {
        let indices = |field: &str| -> Vec<i64> {
            flaky
                .get(field)
                .and_then(Value::as_array)
                .map(|a| a.iter().filter_map(Value::as_i64).collect())
                .unwrap_or_default()
        };
        let (first_run, always) = (
            indices("fail_first_run_indices"),
            indices("always_fail_indices"),
        );
        let compute = flaky.get("success_compute").cloned().unwrap_or(json!({}));
        return Some(BoxNode::new(move |s: Arc<JsonState>, _: Context| {
            let index = instance_of(&s);
            let crash = started(&key, &s, index);
            let resumed = trace(|t| t.resumed);
            let fails =
                index.is_some_and(|i| always.contains(&i) || (!resumed && first_run.contains(&i)));
            let result: Result<_, BoxError> = if fails {
                Err(Box::new(Flaky {
                    transient: true,
                    message: format!("instance {index:?} failed"),
                }))
            } else {
                Ok(s.update(computed(&s, &compute)))
            };
            async move {
                if crash {
                    crashed().await;
                }
                result
            }
        }));
    }
    if let Some(suspend) = spec.get("suspend_with_descriptor") {
        let descriptor = descriptor(suspend);
        return Some(BoxNode::new(move |s: Arc<JsonState>, cx: Context| {
            started(&key, &s, None);
            let asked = cx.interrupt(descriptor.clone());
            async move {
                let answer = asked?;
                Ok::<_, BoxError>(s.update(answer))
            }
        }));
    }
    if let Some(conditional) = spec.get("conditional_suspend") {
        let at = conditional
            .get("suspend_on_item_index")
            .and_then(Value::as_i64);
        let descriptor = descriptor(conditional.get("descriptor").unwrap_or(&Value::Null));
        let otherwise = spec
            .pointer("/on_other_indices/update_from_field")
            .cloned()
            .unwrap_or(json!({}));
        return Some(BoxNode::new(move |s: Arc<JsonState>, cx: Context| {
            let index = s.get("item_idx").and_then(Value::as_i64);
            started(&key, &s, index);
            let result = if index == at {
                cx.interrupt(descriptor.clone())
                    .map(|answer| s.update(answer))
                    .map_err(BoxError::from)
            } else {
                Ok(s.update(computed(&s, &otherwise)))
            };
            async move { result }
        }));
    }
    if let Some(raises) = spec.get("raises").filter(|r| r.is_object()) {
        let message = format!(
            "{key} raises ({})",
            raises
                .get("category")
                .and_then(Value::as_str)
                .unwrap_or("?")
        );
        return Some(BoxNode::new(move |s: Arc<JsonState>, _: Context| {
            started(&key, &s, None);
            let error = Raised(message.clone());
            async move { Err::<agentstate_graph::json::JsonUpdate, _>(error) }
        }));
    }
    if let Some(from) = spec.get("update_from_field") {
        let from = from.clone();
        return Some(BoxNode::new(move |s: Arc<JsonState>, _: Context| {
            let crash = started(&key, &s, instance_of(&s));
            let update = s.update(computed(&s, &from));
            async move {
                if crash {
                    crashed().await;
                }
                Ok::<_, BoxError>(update)
            }
        }));
    }
    if let Some(update) = spec.get("update").or_else(|| spec.get("update_pure")) {
        let update = update.clone();
        return Some(BoxNode::new(move |s: Arc<JsonState>, _: Context| {
            let crash = started(&key, &s, instance_of(&s));
            let update = s.update(with_references(&s, &update));
            async move {
                if crash {
                    crashed().await;
                }
                Ok::<_, BoxError>(update)
            }
        }));
    }
    None
}

// ----------------------------------------------------------------------------------------
// Checks.

/// Compares the fields `expected` lists (`<field>_list_length`: the length of a list field).
fn check_fields(what: &str, actual: &Value, expected: &Value) -> Result<(), String> {
    for (field, want) in expected.as_object().into_iter().flatten() {
        let (got, want) = match field.strip_suffix("_list_length") {
            Some(list) => (
                json!(actual.get(list).and_then(Value::as_array).map(Vec::len)),
                want.clone(),
            ),
            None => (
                actual.get(field).cloned().unwrap_or(Value::Null),
                want.clone(),
            ),
        };
        if got != want {
            return Err(format!(
                "{what}: `{field}` is {got}, expected {want} (whole state {actual})"
            ));
        }
    }
    Ok(())
}

/// The nodes a failure was raised from: the failing node, and any inner run's (a subgraph's).
fn raised_from(error: &DurableError<JsonState>) -> Vec<String> {
    let mut nodes = Vec::new();
    let mut next: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(e) = next {
        if let Some(DurableError::Run(run)) = e.downcast_ref::<DurableError<JsonState>>() {
            nodes.extend(run.node().map(str::to_owned));
        }
        if let Some(run) = e.downcast_ref::<RunError<JsonState>>() {
            nodes.extend(run.node().map(str::to_owned));
        }
        next = e.source();
    }
    nodes
}

/// Our categories for OpenArmature's.
fn categories(theirs: &str) -> Vec<String> {
    match theirs {
        "checkpoint_not_found" => vec!["thread_not_found".into()],
        "suspension_record_invalid" => vec!["run_state_invalid".into(), "thread_not_found".into()],
        "suspension_resume_payload_invalid" => vec!["state_validation_error".into()],
        other => match other.strip_prefix("session_") {
            Some(store) => vec![store.to_owned()],
            None => vec![other.to_owned()],
        },
    }
}

fn check_error(expected: &Value, error: &DurableError<JsonState>) -> Result<(), String> {
    if let Some(category) = expected.get("category").and_then(Value::as_str) {
        let ours = categories(category);
        if !ours.iter().any(|c| c == error.category()) {
            return Err(format!(
                "error {} ({error}), expected {category} (ours: {})",
                error.category(),
                ours.join(" or ")
            ));
        }
    }
    if let Some(node) = expected.get("raised_from").and_then(Value::as_str) {
        let nodes = raised_from(error);
        if !nodes.iter().any(|n| n == node) {
            return Err(format!("raised from {nodes:?}, expected {node}"));
        }
    }
    Ok(())
}

fn is_uuid_v4(id: &str) -> bool {
    let bytes = id.as_bytes();
    id.len() == 36
        && bytes[14] == b'4'
        && id.char_indices().all(|(i, c)| {
            matches!(i, 8 | 13 | 18 | 23) == (c == '-') && (c == '-' || c.is_ascii_hexdigit())
        })
}

type Durable =
    agentstate_graph::durable::DurableGraph<JsonState, String, agentstate_store::sqlite::Sqlite>;

/// `completed_positions` as the checkpoints give them: `(node, OpenArmature step)`.
async fn positions(durable: &Durable, thread: &str) -> Result<Vec<(String, u64)>, String> {
    let mut found = Vec::new();
    for checkpoint in durable
        .checkpoints(thread)
        .await
        .map_err(|e| e.to_string())?
    {
        if checkpoint.step == 0 {
            continue;
        }
        for node in checkpoint.nodes {
            found.push((node, checkpoint.step - 1));
        }
    }
    Ok(found)
}

/// Checks `completed_positions`; positions inside a subgraph do not apply.
fn check_positions(
    expected: &Value,
    actual: &[(String, u64)],
    notes: &mut Vec<String>,
) -> Result<(), String> {
    let expected = expected.as_array().cloned().unwrap_or_default();
    if expected
        .iter()
        .any(|p| p["namespace"].as_array().is_some_and(|n| !n.is_empty()))
    {
        notes.push("completed positions inside a subgraph (a subgraph node is one node of its step; its inner steps are not journaled)".into());
        return Ok(());
    }
    let want: Vec<(String, u64)> = expected
        .iter()
        .map(|p| {
            (
                p["node_name"].as_str().unwrap_or_default().to_owned(),
                p["step"].as_u64().unwrap_or(0),
            )
        })
        .collect();
    if want != actual {
        return Err(format!("completed positions {actual:?}, expected {want:?}"));
    }
    Ok(())
}

/// The records of fan-out progress in the thread's journal (`effect` entries whose names
/// are `fan_out_*`), by key: `{task}/count` and `{task}/i{n}/done`.
async fn progress_records(setup: &Setup, thread: &str) -> Result<BTreeMap<String, Value>, String> {
    let entries = setup
        .store
        .history(thread, HistoryQuery::newest(1000))
        .await
        .map_err(|e| e.to_string())?;
    let mut records = BTreeMap::new();
    for entry in entries {
        let Some(meta) = entry.extra.get(META_KEY) else {
            continue;
        };
        let is_progress = meta["entry"] == "effect"
            && meta["name"]
                .as_str()
                .is_some_and(|n| n.starts_with("fan_out_"));
        if let (true, Some(key)) = (is_progress, meta["key"].as_str()) {
            records.insert(key.to_owned(), meta["value"].clone());
        }
    }
    Ok(records)
}

/// The fan-out instances recorded as finished (`{task}/i{n}/done`), with their final states.
fn finished_instances(records: &BTreeMap<String, Value>) -> BTreeMap<i64, Value> {
    records
        .iter()
        .filter_map(|(key, state)| {
            let mut parts = key.split('/');
            let (_task, instance, done) = (parts.next()?, parts.next()?, parts.next()?);
            let index = instance.strip_prefix('i')?.parse().ok()?;
            (done == "done" && parts.next().is_none()).then(|| (index, state.clone()))
        })
        .collect()
}

/// Checks `fan_out_progress` against the journal's progress records: the instance count, and
/// an instance is `completed` when its final state is recorded (its `result` is the collected
/// field of that state). An instance not recorded is `in_flight` or `not_started`: the journal
/// does not tell the two apart.
async fn check_progress(
    setup: &Setup,
    thread: &str,
    assertions: &Value,
    batched: bool,
    notes: &mut Vec<String>,
) -> Result<(), String> {
    if assertions.get("parent_states_present").is_some() {
        notes.push("parent_states (a subgraph's inner state is not journaled)".into());
    }
    let Some(progress) = assertions.get("fan_out_progress") else {
        return Ok(());
    };
    let records = progress_records(setup, thread).await?;
    let Some(nodes) = progress.as_object() else {
        return match records.is_empty() {
            true => Ok(()),
            false => Err(format!(
                "fan-out progress records {records:?}, expected none"
            )),
        };
    };
    for (node, expected) in nodes {
        let count = records
            .iter()
            .find(|(key, _)| key.split('/').count() == 2 && key.ends_with("/count"))
            .map(|(_, count)| count.clone());
        if count.as_ref() != expected.get("instance_count") {
            return Err(format!(
                "`{node}`'s recorded instance count {count:?}, expected {}",
                expected["instance_count"]
            ));
        }
        let collect_field = setup.def["nodes"][node]["fan_out"]["collect_field"]
            .as_str()
            .unwrap_or_default();
        let finished = finished_instances(&records);
        let mut told_apart = false;
        for (index, want) in expected["instances"]
            .as_array()
            .into_iter()
            .flatten()
            .enumerate()
        {
            let index = index as i64;
            let states: Vec<&str> = match (want["state"].as_str(), want["state_one_of"].as_array())
            {
                (Some(state), _) => vec![state],
                (None, Some(states)) => states.iter().filter_map(Value::as_str).collect(),
                (None, None) => vec![],
            };
            if want["result_is_error"] == true {
                notes.push(format!("fan_out_progress instance {index}: a failed instance's error is not recorded (a failed instance runs again)"));
                continue;
            }
            match finished.get(&index) {
                Some(state) if states.contains(&"completed") => {
                    if let Some(result) = want.get("result") {
                        if state.get(collect_field) != Some(result) {
                            return Err(format!(
                                "`{node}` instance {index} recorded {state}, expected `{collect_field}` {result}"
                            ));
                        }
                    }
                }
                Some(_) if batched => notes.push(format!("fan_out_progress instance {index}: recorded as completed, as fan-out saves are not batched (each is journaled at once; nothing buffered is lost)")),
                Some(state) => {
                    return Err(format!(
                        "`{node}` instance {index} is recorded as finished ({state}), expected {states:?}"
                    ))
                }
                None if states.contains(&"completed") => {
                    return Err(format!(
                        "`{node}` instance {index} is not recorded as finished, expected completed"
                    ))
                }
                None => told_apart |= states.contains(&"in_flight") && !states.contains(&"not_started")
                    || want.get("completed_inner_positions").is_some(),
            }
        }
        if told_apart {
            notes.push("fan_out_progress in_flight vs not_started, and an in-flight instance's inner positions (the journal records finished instances only)".into());
        }
    }
    Ok(())
}

/// The subgraph node names of a graph definition's nodes (its top-level names).
fn top_level(def: &Value) -> Vec<String> {
    def.get("nodes")
        .and_then(Value::as_object)
        .map(|n| n.keys().cloned().collect())
        .unwrap_or_default()
}

// ----------------------------------------------------------------------------------------
// Cases.

struct Setup {
    built: Built,
    store: SqliteStore,
    def: Value,
}

fn run_case(
    runtime: &tokio::runtime::Runtime,
    family: &str,
    number: u32,
    fixture: &Value,
    case: &Value,
) -> Checked {
    if family == "sessions" && matches!(number, 7 | 8 | 9 | 13) {
        return runtime.block_on(migration_case(case));
    }
    if family == "sessions" && number == 12 {
        return observability_case(runtime, fixture, case);
    }
    // `list<error_entry>` (a fan-out's error records) is a list of objects to this schema.
    let text = case.get("graph").unwrap_or(case).to_string();
    let def: Value = serde_json::from_str(&text.replace("list<error_entry>", "list<dict>"))
        .map_err(|e| e.to_string())?;
    set_case_middleware(case.get("middleware").cloned());
    let subgraphs = registry(fixture, &def);
    let built = build(&def, &subgraphs).map_err(|e| format!("does not build: {e}"))?;
    let items = def
        .pointer("/state/fields/items/default")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    trace(|t| {
        *t = Trace {
            items,
            ..Trace::default()
        }
    });
    let setup = Setup {
        store: SqliteStore::open_in_memory().map_err(|e| e.to_string())?,
        built,
        def,
    };
    let schema = Arc::clone(&setup.built.schema);
    JsonState::reading(&schema, || {
        runtime.block_on(async {
            if case.get("invocations").is_some() {
                invocations_case(&setup, case).await
            } else if case.get("resume").is_some() {
                resume_case(&setup, case).await
            } else if case.get("expected_error").is_some() {
                error_case(&setup, case).await
            } else {
                simple_case(&setup, case).await
            }
        })
    })
}

/// Sessions 012: the session id on every span and log record of a session-bound invocation (a
/// durable run of the thread), on none of an unbound one (a run in memory).
fn observability_case(runtime: &tokio::runtime::Runtime, fixture: &Value, case: &Value) -> Checked {
    let def = case.get("graph").unwrap_or(case);
    let built = build(def, &registry(fixture, def)).map_err(|e| format!("does not build: {e}"))?;
    let setup = Setup {
        store: SqliteStore::open_in_memory().map_err(|e| e.to_string())?,
        built,
        def: def.clone(),
    };
    let session = case.get("session_id").and_then(Value::as_str);
    let capture = Capture::default();
    let schema = Arc::clone(&setup.built.schema);
    JsonState::reading(&schema, || {
        tracing::subscriber::with_default(capture.clone(), || {
            runtime.block_on(async {
                let state = initial(&setup, case.get("initial_state"))?;
                match session {
                    Some(id) => setup
                        .built
                        .graph
                        .durable(&setup.store)
                        .start(id, state)
                        .await
                        .map(drop)
                        .map_err(|e| format!("the run failed: {e}")),
                    None => setup
                        .built
                        .graph
                        .invoke(state)
                        .await
                        .map(drop)
                        .map_err(|e| format!("the run failed: {e}")),
                }
            })
        })
    })?;
    let (runs, node_spans) = (
        capture.spans("agentstate.run"),
        capture.spans("agentstate.node"),
    );
    let recorded = capture.recorded.lock().unwrap();
    let expected = case.get("expected").cloned().unwrap_or_default();
    // The span tree: the invocation's span, and under it (through its step spans) a node span
    // for each expected child, in order.
    let runs: Vec<u64> = runs.iter().map(|(id, _)| *id).collect();
    let [run] = runs[..] else {
        return Err(format!("{} run spans, not one", runs.len()));
    };
    let under_run = |mut id: u64| loop {
        match recorded.spans.get(&id).and_then(|s| s.parent) {
            Some(parent) if parent == run => return true,
            Some(parent) => id = parent,
            None => return false,
        }
    };
    let nodes: Vec<String> = node_spans
        .into_iter()
        .filter(|(id, _)| under_run(*id))
        .filter_map(|(_, s)| field(&s, "otel.name").map(str::to_owned))
        .collect();
    let children: Vec<String> = expected
        .pointer("/span_tree/0/children")
        .and_then(Value::as_array)
        .map(|c| {
            c.iter()
                .filter_map(|c| c["name"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    if nodes != children {
        return Err(format!(
            "node spans {nodes:?} under the run, expected {children:?}"
        ));
    }
    // Every span and every log record: the session's id, or none.
    let want = session.map(str::to_owned);
    for span in recorded.spans.values() {
        let got = field(span, "gen_ai.conversation.id").map(str::to_owned);
        if got != want {
            return Err(format!(
                "span {} carries {got:?}, expected {want:?}",
                span.name
            ));
        }
    }
    let bodies: Vec<&str> = expected
        .get("log_records")
        .and_then(Value::as_array)
        .map(|l| l.iter().filter_map(|r| r["body"].as_str()).collect())
        .unwrap_or_default();
    for body in bodies {
        let log = recorded
            .events
            .iter()
            .find(|e| e.fields.get("message").map(String::as_str) == Some(body))
            .ok_or_else(|| format!("no log record `{body}`"))?;
        let got = log
            .span
            .and_then(|id| recorded.spans.get(&id))
            .and_then(|s| field(s, "gen_ai.conversation.id"))
            .map(str::to_owned);
        if got != want {
            return Err(format!(
                "log record `{body}` carries {got:?}, expected {want:?}"
            ));
        }
    }
    Ok(Vec::new())
}

fn initial(setup: &Setup, value: Option<&Value>) -> Result<JsonState, String> {
    JsonState::with_values(
        Arc::clone(&setup.built.schema),
        value.cloned().unwrap_or(json!({})),
    )
    .map_err(|e| format!("the initial state does not merge: {e}"))
}

async fn load(setup: &Setup, thread: &str) -> Result<Value, String> {
    let loaded = setup
        .store
        .load::<JsonState>(thread)
        .await
        .map_err(|e| format!("loading thread `{thread}`: {e}"))?;
    Ok(loaded.state.to_json())
}

/// Where a fixture crashes the first run, if it does.
fn crash_of(case: &Value) -> Option<Crash> {
    if let Some(after) = case
        .pointer("/crash_injection/after_node")
        .and_then(Value::as_str)
    {
        return Some(Crash::AfterNode(after.to_owned()));
    }
    if let Some(index) = case
        .pointer("/crash_injection/after_fan_out_instance/index")
        .and_then(Value::as_i64)
    {
        return Some(Crash::AfterInstance(index));
    }
    case.get("nodes")?
        .as_object()?
        .values()
        .find_map(|n| n.pointer("/fan_out/abort_after_instance")?.as_i64())
        .map(Crash::AfterInstance)
}

/// A first run that fails or crashes, then a resume.
async fn resume_case(setup: &Setup, case: &Value) -> Checked {
    let mut notes = Vec::new();
    let thread = case
        .get("caller_correlation_id")
        .and_then(Value::as_str)
        .unwrap_or("invocation");
    let ttl = Duration::from_millis(150);
    let crash = crash_of(case);
    trace(|t| t.crash = crash.clone());
    phase(false);
    let first = setup
        .built
        .graph
        .durable(&setup.store)
        .worker("first")
        .lease_ttl(ttl);
    let state = initial(setup, case.get("initial_state"))?;
    match until_crash(first.start(thread, state)).await {
        None => {
            if case.get("first_run_expected_error").is_some() {
                notes.push("the first run's abort is a crash here (the run stops; nothing of the step in flight is committed)".into());
            }
        }
        Some(Ok(outcome)) => {
            return Err(format!(
                "the first run ended ({:?}), expected it to fail",
                outcome.state().to_json()
            ))
        }
        Some(Err(error)) => match case.get("first_run_expected_error") {
            Some(expected) => {
                check_error(expected, &error).map_err(|e| format!("first run: {e}"))?
            }
            None => return Err(format!("the first run failed: {error}")),
        },
    }
    let crashed = trace(|t| t.crashed);
    let batched = case.pointer("/checkpointer/kind") == Some(&json!("in_memory_batched"));
    if let Some(assertions) = case.get("saved_record_assertions") {
        if let Some(state) = assertions.get("state") {
            check_fields("saved state", &load(setup, thread).await?, state)?;
        }
        if let Some(expected) = assertions.get("completed_positions") {
            check_positions(expected, &positions(&first, thread).await?, &mut notes)?;
        }
        if assertions.get("fan_out_node_in_completed_positions") == Some(&json!(false)) {
            let positions = positions(&first, thread).await?;
            if positions.iter().any(|(n, _)| {
                top_level(&setup.def).contains(n) && setup.def["nodes"][n].get("fan_out").is_some()
            }) {
                return Err(format!(
                    "the fan-out node is among the completed positions {positions:?}"
                ));
            }
        }
        check_progress(setup, thread, assertions, batched, &mut notes).await?;
    }
    let run_ids_before: Vec<Option<String>> = first
        .checkpoints(thread)
        .await
        .map_err(|e| e.to_string())?
        .into_iter()
        .map(|c| c.run_id)
        .collect();
    // The resume: another worker, once a crashed worker's lease has expired.
    if crashed {
        tokio::time::sleep(ttl + Duration::from_millis(50)).await;
    }
    let recorded_before = finished_instances(&progress_records(setup, thread).await?);
    phase(true);
    let resume = &case["resume"];
    // The input changed between the runs: written to the thread as an update of its own.
    if let Some(items) = resume.get("resume_with_modified_items") {
        let mut handle = setup
            .store
            .thread::<JsonState>(thread)
            .await
            .map_err(|e| e.to_string())?;
        let update = handle.state().update(items.clone());
        handle
            .merge(update, StepMeta::node("harness"))
            .await
            .map_err(|e| format!("modifying the items: {e}"))?;
    }
    let second = setup.built.graph.durable(&setup.store).worker("second");
    if let Some(expected) = resume.get("expected_error") {
        let error = match second.resume(thread).await {
            Ok(outcome) => {
                return Err(format!(
                    "the resume ended ({:?}), expected it to fail",
                    outcome.state().to_json()
                ))
            }
            Err(error) => error,
        };
        check_error(expected, &error).map_err(|e| format!("resume: {e}"))?;
        let ran = trace(|t| t.instances.clone());
        if !ran.is_empty() {
            return Err(format!(
                "instances {ran:?} ran on the resume before it failed"
            ));
        }
        return Ok(notes);
    }
    let outcome = second
        .resume(thread)
        .await
        .map_err(|e| format!("the resume failed ({}): {e}", e.category()))?;
    let Outcome::Finished { state, .. } = outcome else {
        return Err("the resume suspended, expected it to finish".into());
    };
    let expected = &resume["expected"];
    if let Some(final_state) = expected.get("final_state") {
        check_fields("final state", &state.to_json(), final_state)?;
    }
    let (ran, instances, calls) =
        trace(|t| (t.nodes.clone(), t.instances.clone(), t.calls.clone()));
    let top = top_level(&setup.def);
    if let Some(nodes) = expected
        .get("nodes_executed_during_resume")
        .and_then(Value::as_array)
    {
        for node in nodes.iter().filter_map(Value::as_str) {
            if !ran.iter().any(|n| n == node) {
                return Err(format!("`{node}` did not run on resume (ran: {ran:?})"));
            }
        }
    }
    if let Some(nodes) = expected
        .get("nodes_skipped_during_resume")
        .and_then(Value::as_array)
    {
        for node in nodes.iter().filter_map(Value::as_str) {
            if ran.iter().any(|n| n == node) {
                if top.iter().any(|n| n == node) {
                    return Err(format!("`{node}` ran again on resume (ran: {ran:?})"));
                }
                notes.push(format!("`{node}` runs again on resume: it is inside a subgraph node, whose step runs again whole"));
            }
        }
    }
    if let Some(indices) = expected
        .get("instances_executed_during_resume")
        .and_then(Value::as_array)
    {
        for index in indices.iter().filter_map(Value::as_i64) {
            if instances.contains(&index) {
                continue;
            }
            if batched && recorded_before.contains_key(&index) {
                notes.push(format!("instance {index} does not run again: fan-out saves are not batched, each finished instance is journaled at once (nothing buffered is lost)"));
                continue;
            }
            return Err(format!(
                "instance {index} did not run on resume (ran: {instances:?})"
            ));
        }
    }
    if let Some(indices) = expected
        .get("instances_skipped_during_resume")
        .and_then(Value::as_array)
    {
        let again: Vec<i64> = indices
            .iter()
            .filter_map(Value::as_i64)
            .filter(|i| instances.contains(i))
            .collect();
        // A failed instance of a collecting fan-out (an error record in OpenArmature's
        // progress) is not recorded: it runs again.
        let errored = |i: &i64| {
            case.pointer("/saved_record_assertions/fan_out_progress")
                .and_then(Value::as_object)
                .into_iter()
                .flat_map(|nodes| nodes.values())
                .any(|node| node["instances"][*i as usize]["result_is_error"] == true)
        };
        let (noted, again): (Vec<i64>, Vec<i64>) = again.into_iter().partition(errored);
        if !noted.is_empty() {
            notes.push(format!("instances {noted:?} run again on resume: a failed instance is not recorded (only finished ones are)"));
        }
        if !again.is_empty() {
            return Err(format!(
                "instances {again:?} ran again on resume (ran: {instances:?})"
            ));
        }
    }
    if let Some(attempt) = expected
        .get("successful_attempt_index_during_resume")
        .and_then(Value::as_u64)
    {
        let node = top.first().cloned().unwrap_or_default();
        let made = calls.get(&node).copied().unwrap_or(0) as u64;
        if made != attempt + 1 {
            return Err(format!(
                "`{node}` succeeded at attempt index {}, expected {attempt}",
                made.saturating_sub(1)
            ));
        }
    }
    if let Some(count) = resume
        .pointer("/invariants/instance_1_resume_attempt_count")
        .and_then(Value::as_u64)
    {
        let made = instances.iter().filter(|i| **i == 1).count() as u64;
        if made != count {
            return Err(format!(
                "instance 1 ran {made} times on resume, expected {count}"
            ));
        }
    }
    // Correlation: the thread, and the run id, which the resume keeps.
    let checkpoints = second
        .checkpoints(thread)
        .await
        .map_err(|e| e.to_string())?;
    let run_ids: Vec<Option<String>> = checkpoints.iter().map(|c| c.run_id.clone()).collect();
    if !run_ids.starts_with(&run_ids_before) || run_ids.windows(2).any(|w| w[0] != w[1]) {
        return Err(format!(
            "the resume's steps do not keep the run id: {run_ids:?}"
        ));
    }
    let run_id = run_ids.first().cloned().flatten().unwrap_or_default();
    if !is_uuid_v4(&run_id) {
        return Err(format!("run id `{run_id}` is not a UUID v4"));
    }
    let invariants = [case.get("invariants"), resume.get("invariants")];
    for (key, value) in invariants
        .iter()
        .flatten()
        .filter_map(|i| i.as_object())
        .flatten()
    {
        match key.as_str() {
            "first_run_correlation_id"
            | "resumed_run_correlation_id"
            | "saved_record_correlation_id"
                if value.as_str() != Some(thread) =>
            {
                return Err(format!(
                    "thread (correlation id) `{thread}`, expected {value}"
                ));
            }
            "resumed_invocation_id_differs_from_original"
            | "first_and_resumed_invocation_ids_differ"
            | "resumed_run_invocation_id_is_fresh_uuidv4" => {
                notes.push(format!("{key} (a resume continues the same run, with its run id; there is no invocation id per resume)"));
            }
            "first_run_invocation_id" | "resumed_run_invocation_id_not_caller_supplied" => {
                notes.push(format!("{key} (a caller cannot choose a run id)"));
            }
            _ => {}
        }
    }
    if case.get("caller_invocation_id").is_some()
        && !notes
            .iter()
            .any(|n| n.starts_with("first_run_invocation_id"))
    {
        notes.push("caller_invocation_id (a caller cannot choose a run id)".into());
    }
    notes.dedup();
    Ok(notes)
}

/// A run that is expected to fail (or a resume of a thread that has none).
async fn error_case(setup: &Setup, case: &Value) -> Checked {
    let durable = setup.built.graph.durable(&setup.store);
    let expected = &case["expected_error"];
    phase(false);
    let error = if let Some(ghost) = case
        .pointer("/invoke_with/resume_invocation")
        .and_then(Value::as_str)
    {
        let runs = case
            .get("populate_checkpointer_via_runs")
            .and_then(Value::as_u64)
            .unwrap_or(0);
        for n in 0..runs {
            durable
                .start(
                    &format!("populated-{n}"),
                    initial(setup, case.get("initial_state"))?,
                )
                .await
                .map_err(|e| format!("populating run {n}: {e}"))?;
        }
        match durable.resume(ghost).await {
            Ok(_) => return Err(format!("resuming `{ghost}` succeeded")),
            Err(error) => error,
        }
    } else {
        let thread = case
            .get("session_id")
            .and_then(Value::as_str)
            .unwrap_or("invocation");
        match durable
            .start(thread, initial(setup, case.get("initial_state"))?)
            .await
        {
            Ok(outcome) => return Err(format!("succeeded with {}", outcome.state().to_json())),
            Err(error) => {
                if let Some(store_after) = case.pointer("/expected/store_after") {
                    if let Some(state) = store_after.get("loaded_state") {
                        check_fields(
                            "the thread's state after the failure",
                            &load(setup, thread).await?,
                            state,
                        )?;
                    }
                }
                error
            }
        }
    };
    check_error(expected, &error)?;
    Ok(Vec::new())
}

/// A run that ends: a checkpoint's saves and record, a session's state.
async fn simple_case(setup: &Setup, case: &Value) -> Checked {
    let mut notes = Vec::new();
    let expected = &case["expected"];
    let session = case.get("session_id").and_then(Value::as_str);
    let has_store = case.get("session_store").is_some() || case.get("checkpointer").is_some();
    phase(false);
    if !has_store || (session.is_none() && case.get("checkpointer").is_none()) {
        // No store, or no session id: a plain run, which stores nothing.
        let state = setup
            .built
            .graph
            .invoke(initial(setup, case.get("initial_state"))?)
            .await
            .map_err(|e| format!("failed ({}): {e}", e.category()))?;
        if let Some(final_state) = expected.get("final_state") {
            check_fields("final state", &state.to_json(), final_state)?;
        }
        let threads = setup
            .store
            .list(ThreadQuery::default())
            .await
            .map_err(|e| e.to_string())?;
        if !threads.is_empty() {
            return Err(format!(
                "the store holds {} threads after a run without a session",
                threads.len()
            ));
        }
        return Ok(notes);
    }
    let thread = session
        .or_else(|| case.get("caller_correlation_id").and_then(Value::as_str))
        .unwrap_or("invocation");
    let durable = setup.built.graph.durable(&setup.store);
    let outcome = if let Some(seeded) = case.pointer("/seeded_session/state") {
        setup
            .store
            .create(thread, initial(setup, Some(seeded))?)
            .await
            .map_err(|e| e.to_string())?;
        let input =
            initial(setup, None)?.update(case.get("initial_state").cloned().unwrap_or(json!({})));
        durable.run(thread, input).await
    } else {
        durable
            .start(thread, initial(setup, case.get("initial_state"))?)
            .await
    };
    let outcome = outcome.map_err(|e| format!("failed ({}): {e}", e.category()))?;
    let Outcome::Finished { state, .. } = outcome else {
        return Err("the run suspended".into());
    };
    if let Some(final_state) = expected.get("final_state") {
        check_fields("final state", &state.to_json(), final_state)?;
    }
    if let Some(saved) = expected.pointer("/saved_session_assertions/state") {
        check_fields("the thread's state", &load(setup, thread).await?, saved)?;
    }
    let seen = trace(|t| t.seen.clone());
    if let Some(pre) = expected.get("inner_pre_state") {
        let inner: Vec<&Value> = seen
            .iter()
            .filter(|(n, _)| !top_level(&setup.def).contains(n))
            .map(|(_, s)| s)
            .collect();
        if inner.first() != Some(&pre) {
            return Err(format!(
                "the subgraph's node was given {inner:?}, expected {pre}"
            ));
        }
    }
    if let Some(pre) = expected
        .get("instance_pre_states")
        .and_then(Value::as_array)
    {
        let inner: Vec<&Value> = seen
            .iter()
            .filter(|(n, _)| !top_level(&setup.def).contains(n))
            .map(|(_, s)| s)
            .collect();
        if inner != pre.iter().collect::<Vec<_>>() {
            return Err(format!(
                "the instances were given {inner:?}, expected {pre:?}"
            ));
        }
    }
    let checkpoints = durable
        .checkpoints(thread)
        .await
        .map_err(|e| e.to_string())?;
    let steps: Vec<_> = checkpoints.iter().filter(|c| c.step > 0).collect();
    if let Some(saves) = expected.get("checkpoint_saves").and_then(Value::as_array) {
        if saves.len() != steps.len() {
            return Err(format!(
                "{} step entries, expected {} saves",
                steps.len(),
                saves.len()
            ));
        }
        let mut completed = Vec::new();
        for (save, step) in saves.iter().zip(&steps) {
            if json!(step.nodes) != json!([save["after_node"]]) {
                return Err(format!(
                    "a save after {:?}, expected after {}",
                    step.nodes, save["after_node"]
                ));
            }
            let at = durable
                .state_at(thread, step.version)
                .await
                .map_err(|e| e.to_string())?;
            check_fields(
                &format!("state at step {}", step.step),
                &at.to_json(),
                &save["state"],
            )?;
            completed.extend(step.nodes.iter().map(|n| (n.clone(), step.step - 1)));
            check_positions(&save["completed_positions"], &completed, &mut notes)?;
        }
    }
    if let Some(record) = expected.get("latest_record_assertions") {
        let last = steps.last().ok_or("no step entry")?;
        let run_id = last.run_id.clone().unwrap_or_default();
        if !is_uuid_v4(&run_id) {
            return Err(format!("run id `{run_id}` is not a UUID v4"));
        }
        if let Some(id) = record.get("correlation_id") {
            if json!(thread) != *id {
                return Err(format!("thread `{thread}`, expected correlation id {id}"));
            }
        }
        if let Some(state) = record.get("state") {
            check_fields("latest state", &load(setup, thread).await?, state)?;
        }
        if let Some(expected) = record.get("completed_positions") {
            let all: Vec<(String, u64)> = steps
                .iter()
                .flat_map(|s| s.nodes.iter().map(|n| (n.clone(), s.step - 1)))
                .collect();
            check_positions(expected, &all, &mut notes)?;
        }
        if checkpoints.windows(2).any(|w| w[0].time_ms > w[1].time_ms) {
            return Err("the entries' times are not monotonic".into());
        }
        if record.get("fan_out_progress") == Some(&Value::Null)
            && !progress_records(setup, thread).await?.is_empty()
        {
            return Err("the journal has fan-out progress records, expected none".into());
        }
        notes.push(
            "schema_version (a runtime JsonState declares none) and parent_states (not journaled)"
                .into(),
        );
    }
    if expected.get("every_save_assertions").is_some()
        || case.get("every_save_assertions").is_some()
    {
        notes.push("every save's schema_version (a runtime JsonState declares none; there is no runtime state subclass)".into());
    }
    Ok(notes)
}

/// Suspension fixtures and multi-invocation sessions: invocations one after another.
async fn invocations_case(setup: &Setup, case: &Value) -> Checked {
    let mut notes = Vec::new();
    let durable = setup.built.graph.durable(&setup.store);
    let mut pending: Vec<agentstate_graph::Interrupt> = Vec::new();
    let mut last_thread = String::from("invocation");
    for invocation in case["invocations"].as_array().into_iter().flatten() {
        let name = invocation
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or("invocation");
        let thread = invocation
            .get("session_id")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .unwrap_or_else(|| last_thread.clone());
        let expected = invocation.get("expected").cloned().unwrap_or(json!({}));
        phase(invocation.get("resume_invocation").is_some());
        let result = if let Some(id) = invocation.get("resume_invocation").and_then(Value::as_str) {
            let target = if id.starts_with('<') {
                thread.clone()
            } else {
                id.to_owned()
            };
            let payload = invocation
                .get("signal_payload")
                .cloned()
                .unwrap_or(json!({}));
            let mut answers = Answers::new();
            for interrupt in &pending {
                answers = answers.answer(&interrupt.id, payload.clone());
            }
            if answers.is_empty() {
                // Nothing is pending: answer the signal the caller names.
                answers = answers.answer(id, payload);
            }
            durable.resume_with(&target, answers).await
        } else {
            let exists = setup.store.info(&thread).await.is_ok();
            if let Some(loaded) = invocation.get("loaded_session_state") {
                let before = if exists {
                    load(setup, &thread).await?
                } else {
                    Value::Null
                };
                if loaded.is_null() != before.is_null()
                    || (!loaded.is_null()
                        && check_fields("loaded session", &before, loaded).is_err())
                {
                    return Err(format!(
                        "{name}: the session held {before}, expected {loaded}"
                    ));
                }
            }
            if exists {
                let input = initial(setup, None)?.update(
                    invocation
                        .get("initial_state")
                        .cloned()
                        .unwrap_or(json!({})),
                );
                durable.run(&thread, input).await
            } else {
                durable
                    .start(&thread, initial(setup, invocation.get("initial_state"))?)
                    .await
            }
        };
        last_thread = thread.clone();
        let outcome_kind = expected.get("outcome").and_then(Value::as_str).unwrap_or(
            if invocation.get("expected_final_state").is_some() {
                "completed"
            } else {
                ""
            },
        );
        match (outcome_kind, result) {
            (
                "suspended",
                Ok(Outcome::Suspended {
                    state, interrupts, ..
                }),
            ) => {
                let first = interrupts
                    .first()
                    .ok_or(format!("{name}: suspended without an interrupt"))?;
                if let Some(state_expected) = expected.get("suspended_state") {
                    check_fields(
                        &format!("{name}: suspended state"),
                        &state.to_json(),
                        state_expected,
                    )?;
                }
                if let Some(descriptor) = expected.get("descriptor") {
                    let mut want = descriptor.clone();
                    if let Some(includes) = want
                        .as_object_mut()
                        .and_then(|d| d.remove("metadata_includes"))
                    {
                        // The descriptor's own metadata, with where it was asked (the fan-out
                        // instance, the parallel branch) from the interrupt's metadata.
                        let mut metadata =
                            first.payload.get("metadata").cloned().unwrap_or(json!({}));
                        if let Some(object) = metadata.as_object_mut() {
                            object.extend(first.metadata.clone());
                        }
                        check_fields(
                            &format!("{name}: descriptor metadata"),
                            &metadata,
                            &includes,
                        )
                        .map_err(|e| format!("{e}; the interrupt: {first:?}"))?;
                    }
                    check_fields(&format!("{name}: descriptor"), &first.payload, &want)?;
                }
                if let Some(node) = expected.get("suspending_node") {
                    // OpenArmature names the outer graph's node whose execution is suspended;
                    // an interrupt names the node that asked, which may be inside it (a
                    // subgraph's node): then the suspended step's node must be the one named.
                    let outer = match durable.status(&thread).await {
                        Ok(RunStatus::Suspended { .. }) => {
                            let checkpoints = durable
                                .checkpoints(&thread)
                                .await
                                .map_err(|e| e.to_string())?;
                            checkpoints
                                .last()
                                .map(|c| c.next.clone())
                                .unwrap_or_default()
                        }
                        _ => Vec::new(),
                    };
                    let inner = !top_level(&setup.def).contains(&first.node);
                    let named = json!(first.step_node) == *node
                        || json!(first.node) == *node
                        || (inner && outer.iter().any(|n| json!(n) == *node));
                    if !named {
                        return Err(format!(
                            "{name}: suspended by `{}` in a step of {outer:?}, expected {node}",
                            first.node
                        ));
                    }
                }
                if let Some(log) = expected.get("middleware_log_captured") {
                    let captured = trace(|t| t.middleware.clone());
                    if json!(captured) != *log {
                        return Err(format!(
                            "{name}: middleware log {captured:?}, expected {log}"
                        ));
                    }
                }
                if expected.get("checkpointer_assertions").is_some() {
                    match durable.status(&thread).await.map_err(|e| e.to_string())? {
                        RunStatus::Suspended { interrupts, .. } if !interrupts.is_empty() => {}
                        other => {
                            return Err(format!(
                                "{name}: the thread's status is {other:?}, expected suspended"
                            ))
                        }
                    }
                }
                if let Some(saved) = expected.pointer("/saved_session_assertions/state") {
                    check_fields(
                        &format!("{name}: the thread's state"),
                        &load(setup, &thread).await?,
                        saved,
                    )?;
                }
                pending = interrupts;
            }
            ("completed", Ok(Outcome::Finished { state, .. })) => {
                let final_state = expected
                    .get("final_state")
                    .or_else(|| invocation.get("expected_final_state"));
                if let Some(final_state) = final_state {
                    check_fields(
                        &format!("{name}: final state"),
                        &state.to_json(),
                        final_state,
                    )?;
                }
                if let Some(order) = expected.get("execution_order") {
                    let mut ran = trace(|t| t.nodes.clone());
                    // The asking node's own run again (it returns the answer) is not a node
                    // OpenArmature runs: it continues after it.
                    if let Some(asker) = pending.first() {
                        if let Some(at) = ran.iter().position(|n| *n == asker.node) {
                            ran.remove(at);
                        }
                    }
                    if json!(ran) != *order {
                        return Err(format!("{name}: execution order {ran:?}, expected {order}"));
                    }
                }
                let saved = expected
                    .pointer("/saved_session_assertions/state")
                    .or_else(|| invocation.pointer("/saved_session_assertions/state"));
                if let Some(saved) = saved {
                    check_fields(
                        &format!("{name}: the thread's state"),
                        &load(setup, &thread).await?,
                        saved,
                    )?;
                }
                pending.clear();
            }
            ("errored", Err(error)) => {
                check_error(&expected["error"], &error).map_err(|e| format!("{name}: {e}"))?;
            }
            (kind, Ok(outcome)) => {
                return Err(format!(
                    "{name}: {} with {} (interrupts {:?}), expected {kind}",
                    if outcome.interrupts().is_empty() {
                        "finished"
                    } else {
                        "suspended"
                    },
                    outcome.state().to_json(),
                    outcome.interrupts()
                ))
            }
            (kind, Err(error)) => {
                return Err(format!(
                    "{name}: failed ({}): {error}, expected {kind}",
                    error.category()
                ))
            }
        }
    }
    if case
        .pointer("/invariants/saved_record_overwrites_prior")
        .is_some()
    {
        notes.push(
            "saved_record_overwrites_prior (a thread appends each step; its state is the latest)"
                .into(),
        );
    }
    Ok(notes)
}

// ----------------------------------------------------------------------------------------
// Session state migrations: typed states declaring the fixtures' versions.

mod v1 {
    /// The session state at the fixtures' `v1`.
    #[derive(
        agentstate::AgentState,
        Debug,
        Clone,
        Default,
        PartialEq,
        serde::Serialize,
        serde::Deserialize,
    )]
    #[agent_state(version = 1)]
    pub struct Session {
        pub value: i64,
    }
}

mod v2 {
    /// The session state at the fixtures' `v2`.
    #[derive(
        agentstate::AgentState,
        Debug,
        Clone,
        Default,
        PartialEq,
        serde::Serialize,
        serde::Deserialize,
    )]
    #[agent_state(version = 2)]
    pub struct Session {
        pub value: i64,
    }
}

fn version(value: &Value) -> u32 {
    value
        .as_str()
        .and_then(|v| v.strip_prefix('v'))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// The harness's named migration functions.
fn migration(spec: &Value, log: &Arc<Mutex<Vec<String>>>) -> Migration {
    let (from, to) = (version(&spec["from_version"]), version(&spec["to_version"]));
    let name = spec["migrate"].as_str().unwrap_or_default().to_owned();
    let log = Arc::clone(log);
    let upgrade = move |mut state: Value| -> Result<Value, String> {
        log.lock().unwrap().push(format!("v{from}->v{to}"));
        let value = state.get("value").and_then(Value::as_i64).unwrap_or(0);
        state["value"] = match name.as_str() {
            "add_ten_to_value" => json!(value + 10),
            "multiply_value_by_two" => json!(value * 2),
            "raises_keyerror" => return Err("KeyError: 'missing_key'".to_owned()),
            other => return Err(format!("unknown migration {other}")),
        };
        Ok(state)
    };
    Migration::new(from, to, upgrade, Ok)
}

async fn migration_case(case: &Value) -> Checked {
    let log = Arc::new(Mutex::new(Vec::new()));
    let specs = case
        .get("session_migrations")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let expected_error = case.get("expected_error");
    if expected_error.and_then(|e| e.get("raised_at")) == Some(&json!("registration")) {
        let mut registry = Migrations::default();
        let mut refused = None;
        for spec in &specs {
            if let Err(error) = registry.add(migration(spec, &log)) {
                refused = Some(error);
            }
        }
        let error = refused.ok_or("every migration was registered")?;
        let want = categories(
            expected_error.unwrap()["category"]
                .as_str()
                .unwrap_or_default(),
        );
        if !want.iter().any(|c| c == error.category()) {
            return Err(format!(
                "registration refused with {}, expected {want:?}",
                error.category()
            ));
        }
        return Ok(Vec::new());
    }
    let thread = case["session_id"].as_str().unwrap_or("session");
    let seeded = SqliteStore::open_in_memory().map_err(|e| e.to_string())?;
    let value = case
        .pointer("/seeded_session/state/value")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    seeded
        .create(thread, v1::Session { value })
        .await
        .map_err(|e| e.to_string())?;
    let mut store = seeded.clone();
    for spec in &specs {
        store = store.with_migration(migration(spec, &log));
    }
    let ran = Arc::new(Mutex::new(0));
    let counter = Arc::clone(&ran);
    let graph = Graph::builder()
        .node("noop", move |_: Arc<v2::Session>, _: Context| {
            *counter.lock().unwrap() += 1;
            async { Ok::<_, BoxError>(()) }
        })
        .entry("noop")
        .edge("noop", END)
        .build()
        .map_err(|e| e.to_string())?;
    let result = graph.durable(&store).run(thread, ()).await;
    match (expected_error, result) {
        (None, Ok(outcome)) => {
            let expected = &case["expected"];
            let state = outcome.state();
            if let Some(final_value) = expected.pointer("/final_state/value") {
                if json!(state.value) != *final_value {
                    return Err(format!(
                        "final value {}, expected {final_value}",
                        state.value
                    ));
                }
            }
            if let Some(runs) = expected.get("migrations_run") {
                let ran = log.lock().unwrap().clone();
                if json!(ran) != *runs {
                    return Err(format!("migrations run {ran:?}, expected {runs}"));
                }
            }
            if let Some(saved) = expected.pointer("/saved_session_assertions/state/value") {
                let loaded = store
                    .load::<v2::Session>(thread)
                    .await
                    .map_err(|e| e.to_string())?;
                if json!(loaded.state.value) != *saved {
                    return Err(format!(
                        "saved value {}, expected {saved}",
                        loaded.state.value
                    ));
                }
            }
            Ok(Vec::new())
        }
        (Some(expected), Err(error)) => {
            let want = categories(expected["category"].as_str().unwrap_or_default());
            if !want.iter().any(|c| c == error.category()) {
                return Err(format!(
                    "error {} ({error}), expected {want:?}",
                    error.category()
                ));
            }
            if let Some(carries) = expected.get("carries") {
                let (from, to) = (
                    version(&carries["from_version"]),
                    version(&carries["to_version"]),
                );
                let found = match &error {
                    DurableError::Store(StoreError::MigrationMissing {
                        from: f,
                        to: t,
                        registered,
                        ..
                    }) => {
                        let count = carries
                            .get("registered_migrations_count")
                            .and_then(Value::as_u64);
                        if count.is_some_and(|c| c as usize != *registered) {
                            return Err(format!(
                                "{registered} migrations registered, expected {count:?}"
                            ));
                        }
                        (*f, *t)
                    }
                    DurableError::Store(StoreError::Migration { from: f, to: t, .. }) => (*f, *t),
                    other => return Err(format!("error {other:?} carries no versions")),
                };
                if found != (from, to) {
                    return Err(format!("versions {found:?}, expected {:?}", (from, to)));
                }
            }
            if *ran.lock().unwrap() != 0 {
                return Err("the node ran".into());
            }
            if let Some(value) = case.pointer("/expected/store_after/loaded_state/value") {
                let loaded = seeded
                    .load::<v1::Session>(thread)
                    .await
                    .map_err(|e| e.to_string())?;
                if json!(loaded.state.value) != *value {
                    return Err(format!(
                        "the seeded session now holds {}, expected {value}",
                        loaded.state.value
                    ));
                }
            }
            Ok(Vec::new())
        }
        (None, Err(error)) => Err(format!("failed ({}): {error}", error.category())),
        (Some(expected), Ok(_)) => Err(format!("succeeded, expected {}", expected["category"])),
    }
}
