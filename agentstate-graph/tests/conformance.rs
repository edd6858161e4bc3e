//! The OpenArmature engine conformance fixtures, run through this crate's runner.
//!
//! The fixtures are not part of this repository: set `AGENTSTATE_ENGINE_CONFORMANCE_DIR` to the
//! directory holding `graph-engine/` and `pipeline-utilities/` (`.ci/run` sets it to
//! `../shared/conformance/openarmature-engine`). Without it this test prints one line and
//! passes.
//!
//! Each fixture's graph is built with [`Graph::builder`] over [`JsonState`]s whose schema is the
//! fixture's declared state ([`Schema::from_json`]), its nodes are the fixture's directives
//! (`update`, `update_from_field`, `raises`, `flaky*`, `sleep_ms`, `subgraph` with its
//! projection, `fan_out` as a [`FanOut`], `parallel_branches` as [`ParallelBranches`], the
//! `retry` middleware as the [`Retry`](agentstate_graph::layer::Retry) layer, and
//! `failure_isolation` as a node that turns a failure into its degraded update), and it runs
//! with [`Graph::stream`], whose `node_started` events give the execution order. One line per
//! case: `ok`, `FAILED` or `n/a` with the reason. Every fixture issue 21 lists must pass.
//!
//! Not checked: observer events and the invariants stated about them
//! (`observer_event_invariants`, `concurrency_invariant`, `invariants`), which need observer
//! hooks (graph-engine §6) this runner does not have.
//!
//! The test runs without the libtest harness (`harness = false`) so that its lines are shown.

use agentstate::schema::Schema;
use agentstate_graph::json::{JsonState, JsonUpdate};
use agentstate_graph::layer::{NodeExt, RetryPolicy};
use agentstate_graph::parallel::{FanOut, FanOutError, OnEmpty, ParallelBranches};
use agentstate_graph::subgraph::{JsonSubgraph, Projection};
use agentstate_graph::{
    BoxError, BoxNode, CompileError, Context, Event, Graph, GraphBuilder, Node, Routes, END,
};
use futures_util::StreamExt;
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::convert::Infallible;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The graph-engine fixtures issue 21 lists; the others are about observer hooks.
const GRAPH_ENGINE: &[u32] = &[
    1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 19, 26, 27, 34, 35, 36, 37, 38, 40, 41, 42,
];

/// The pipeline-utilities fixtures issue 21 lists: retry, fan-out, parallel branches.
const PIPELINE: &[u32] = &[
    7, 8, 9, 16, 17, 18, 19, 20, 21, 22, 23, 32, 33, 34, 35, 36, 37, 38, 73, 74, 75,
];

fn main() {
    let Some(dir) = std::env::var_os("AGENTSTATE_ENGINE_CONFORMANCE_DIR") else {
        println!("OpenArmature engine conformance: AGENTSTATE_ENGINE_CONFORMANCE_DIR is not set; skipping");
        return;
    };
    let dir = PathBuf::from(dir);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("a runtime");
    let mut passed = 0;
    let mut failures = Vec::new();
    let mut not_applicable = 0;
    for (file, number) in fixture_files(&dir.join("graph-engine")) {
        let fixture: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap())
            .unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        let stem = file.file_stem().unwrap().to_string_lossy().into_owned();
        if !GRAPH_ENGINE.contains(&number) {
            not_applicable += 1;
            println!("n/a graph-engine/{stem}: observer hooks (graph-engine §6), which this runner does not implement");
            continue;
        }
        for (name, case) in cases(&fixture) {
            let label = format!("graph-engine/{stem}{name}");
            match runtime.block_on(run_case(&fixture, &case)) {
                Ok(()) => {
                    passed += 1;
                    println!("ok {label}");
                }
                Err(problem) => {
                    println!("FAILED {label}: {problem}");
                    failures.push(format!("{label}: {problem}"));
                }
            }
        }
    }
    for (file, number) in fixture_files(&dir.join("pipeline-utilities")) {
        let stem = file.file_stem().unwrap().to_string_lossy().into_owned();
        if !PIPELINE.contains(&number) {
            not_applicable += 1;
            if (39..=47).contains(&number) {
                println!("n/a pipeline-utilities/{stem}: state migration, run by agentstate-store's tests/migration_fixtures.rs");
            } else {
                println!("n/a pipeline-utilities/{stem}: not in issue 21's list (middleware, checkpointing, observability or sessions)");
            }
            continue;
        }
        let fixture: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap())
            .unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        for (name, case) in cases(&fixture) {
            let label = format!("pipeline-utilities/{stem}{name}");
            match runtime.block_on(run_case(&fixture, &case)) {
                Ok(()) => {
                    passed += 1;
                    println!("ok {label}");
                }
                Err(problem) => {
                    println!("FAILED {label}: {problem}");
                    failures.push(format!("{label}: {problem}"));
                }
            }
        }
    }
    println!(
        "OpenArmature engine conformance: {passed} cases passed, {} failed, {not_applicable} fixtures not applicable",
        failures.len()
    );
    assert!(passed > 0, "no case found under {}", dir.display());
    assert!(
        failures.is_empty(),
        "failed cases:\n{}",
        failures.join("\n")
    );
}

fn fixture_files(dir: &Path) -> Vec<(PathBuf, u32)> {
    let mut files: Vec<(PathBuf, u32)> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|entry| {
            let path = entry.ok()?.path();
            let name = path.file_name()?.to_str()?;
            let number = name.get(..3)?.parse().ok()?;
            (path.extension()? == "json").then_some((path, number))
        })
        .collect();
    files.sort();
    files
}

/// A fixture's cases: its `cases`, or the fixture itself.
fn cases(fixture: &Value) -> Vec<(String, Value)> {
    match fixture.get("cases").and_then(Value::as_array) {
        Some(cases) => cases
            .iter()
            .map(|c| {
                let name = c.get("name").and_then(Value::as_str).unwrap_or("?");
                (format!(" {name}"), c.clone())
            })
            .collect(),
        None => vec![(String::new(), fixture.clone())],
    }
}

/// The subgraph definitions a graph may name: the fixture's `subgraphs` map and `subgraph`, and
/// the graph's own.
fn registry(fixture: &Value, graph: &Value) -> BTreeMap<String, Value> {
    let mut found = BTreeMap::new();
    for source in [fixture, graph] {
        if let Some(map) = source.get("subgraphs").and_then(Value::as_object) {
            for (name, def) in map {
                found.insert(name.clone(), def.clone());
            }
        }
        for key in ["subgraph", "subgraph_with_idx"] {
            if let Some(def) = source.get(key).filter(|d| d.is_object()) {
                if let Some(name) = def.get("name").and_then(Value::as_str) {
                    found.insert(name.to_owned(), def.clone());
                }
            }
        }
    }
    found
}

thread_local! {
    /// The running case's `middleware` (a case declares it beside its graph).
    static CASE_MIDDLEWARE: std::cell::RefCell<Option<Value>> = const { std::cell::RefCell::new(None) };
}

struct Built {
    graph: Graph<JsonState, String>,
    schema: Arc<Schema>,
}

fn string_map(value: Option<&Value>) -> Option<BTreeMap<String, String>> {
    value.and_then(Value::as_object).map(|m| {
        m.iter()
            .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_owned()))
            .collect()
    })
}

fn string_list(value: Option<&Value>) -> Option<Vec<String>> {
    value.and_then(Value::as_array).map(|items| {
        items
            .iter()
            .filter_map(|v| v.as_str().map(str::to_owned))
            .collect()
    })
}

#[derive(Debug)]
struct Raised(String);
impl std::fmt::Display for Raised {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}
impl std::error::Error for Raised {}

/// Builds a fixture graph (and, recursively, the subgraphs it names).
fn build(def: &Value, subgraphs: &BTreeMap<String, Value>) -> Result<Built, CompileError> {
    let schema = Arc::new(Schema::from_json(
        def.get("state").unwrap_or(&json!({"fields": {}})),
    )?);
    let mut builder: GraphBuilder<JsonState, String> = Graph::builder();
    let empty = Map::new();
    let nodes = def
        .get("nodes")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    let middleware = def
        .get("middleware")
        .cloned()
        .or_else(|| CASE_MIDDLEWARE.with(|m| m.borrow().clone()))
        .and_then(|m| m.get("per_node").cloned())
        .unwrap_or(json!({}));
    for (name, spec) in nodes {
        let key = name.clone();
        if let Some(sub) = spec.get("subgraph").and_then(Value::as_str) {
            let sub_def = subgraphs
                .get(sub)
                .unwrap_or_else(|| panic!("subgraph `{sub}` is not defined"));
            let child = build(sub_def, subgraphs)?;
            builder = builder.json_subgraph(
                key,
                &schema,
                JsonSubgraph::new(child.graph, child.schema, projection(spec)),
            );
            continue;
        }
        let mut node = if let Some(fan_out) = spec.get("fan_out") {
            fan_out_node(fan_out, &schema, subgraphs)?
        } else if let Some(branches) = spec.get("parallel_branches") {
            branches_node(branches, &schema, subgraphs)?
        } else {
            body(name, spec)
        };
        for layer in middleware
            .get(name)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            node = apply_middleware(node, layer);
        }
        builder = builder.node(key, node);
    }
    for edge in def
        .get("edges")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let from = edge["from"].as_str().expect("an edge's from").to_owned();
        if let Some(to) = edge.get("to").and_then(Value::as_str) {
            builder = match to {
                "END" => builder.edge(from, END),
                to => builder.edge(from, to.to_owned()),
            };
        } else if let Some(condition) = edge.get("condition") {
            let field = condition["if_field"].as_str().expect("if_field").to_owned();
            let equals = condition["equals"].clone();
            let target = |which: &str| -> Routes<String> {
                match condition[which].as_str().expect("a target") {
                    "END" => END.into(),
                    name => name.to_owned().into(),
                }
            };
            let (then, otherwise) = (target("then"), target("else"));
            builder = builder.route(from, move |s: &JsonState| {
                if s.get(&field) == Some(&equals) {
                    then.clone()
                } else {
                    otherwise.clone()
                }
            });
        }
    }
    if let Some(entry) = def.get("entry").and_then(Value::as_str) {
        builder = builder.entry(entry.to_owned());
    }
    Ok(Built {
        graph: builder.build()?,
        schema,
    })
}

struct Outcome {
    result: Result<JsonState, agentstate_graph::RunError<JsonState>>,
    order: Vec<String>,
}

async fn run(built: &Built, initial: &Value) -> Result<Outcome, String> {
    let state = JsonState::with_values(Arc::clone(&built.schema), initial.clone())
        .map_err(|e| format!("the initial state does not merge: {e}"))?;
    let mut stream = built.graph.stream(state);
    let mut order = Vec::new();
    while let Some(event) = stream.next().await {
        match event {
            Event::NodeStarted { node, .. } => order.push(node),
            Event::RunFinished { state } => {
                return Ok(Outcome {
                    result: Ok(*state),
                    order,
                })
            }
            Event::RunFailed { error } => {
                return Ok(Outcome {
                    result: Err(error),
                    order,
                })
            }
            _ => {}
        }
    }
    Err("the stream ended without a last event".to_owned())
}

fn check_order(expected: &Value, order: &[String]) -> Result<(), String> {
    if let Some(expected) = expected.get("execution_order") {
        let actual = json!(order);
        if &actual != expected {
            return Err(format!("execution order {actual}, expected {expected}"));
        }
    }
    Ok(())
}

async fn run_case(fixture: &Value, case: &Value) -> Result<(), String> {
    let def = case.get("graph").unwrap_or(case);
    CASE_MIDDLEWARE.with(|m| *m.borrow_mut() = case.get("middleware").cloned());
    let subgraphs = registry(fixture, def);
    let built = build(def, &subgraphs);
    if let Some(expected) = def
        .get("expected_compile_error")
        .or_else(|| case.get("expected_compile_error"))
    {
        return match built {
            Ok(_) => Err(format!("built, expected compile error {expected}")),
            Err(e) if json!(e.category()) == *expected => Ok(()),
            Err(e) => Err(format!(
                "compile error {} ({e}), expected {expected}",
                e.category()
            )),
        };
    }
    let built = built.map_err(|e| format!("does not build: {} ({e})", e.category()))?;
    if let Some(expected) = case
        .get("expected_compile_warning")
        .or_else(|| def.get("expected_compile_warning"))
    {
        let warnings: Vec<&str> = built
            .graph
            .warnings()
            .iter()
            .map(|w| w.category())
            .collect();
        if json!(warnings) != *expected {
            return Err(format!(
                "compile warnings {warnings:?}, expected {expected}"
            ));
        }
    }
    let initial = case.get("initial_state").cloned().unwrap_or(json!({}));
    let runs = case.get("run_count").and_then(Value::as_u64).unwrap_or(1);
    for _ in 0..runs {
        let nested_error = case.get("expected").and_then(|e| e.get("expected_error"));
        if let (Some(expected), Some(error)) = (case.get("expected"), nested_error) {
            let outcome = run(&built, &initial).await?;
            let Err(run_error) = outcome.result else {
                return Err("succeeded, expected an error".to_owned());
            };
            let cause = std::error::Error::source(&run_error)
                .and_then(|s| s.downcast_ref::<FanOutError>())
                .ok_or_else(|| format!("{run_error} has no fan-out error as its source"))?;
            if json!(cause.category()) != error["category"] {
                return Err(format!(
                    "category {}, expected {}",
                    cause.category(),
                    error["category"]
                ));
            }
            if let (FanOutError::BranchFailed { branch, .. }, Some(name)) =
                (cause, error.get("branch_name"))
            {
                if json!(branch) != *name {
                    return Err(format!("branch {branch}, expected {name}"));
                }
            }
            if let Some(message) = error.get("cause_message") {
                let deepest = deepest_message(cause);
                if json!(deepest) != *message {
                    return Err(format!("cause {deepest:?}, expected {message}"));
                }
            }
            if let Some(state) = expected.get("recoverable_state") {
                if &run_error.state().to_json() != state {
                    return Err(format!(
                        "recoverable state {}, expected {state}",
                        run_error.state().to_json()
                    ));
                }
            }
        } else if let Some(expected) = case.get("expected") {
            let outcome = run(&built, &initial).await?;
            let state = outcome
                .result
                .map_err(|e| format!("failed ({}): {e}", e.category()))?;
            if let Some(final_state) = expected.get("final_state") {
                if &state.to_json() != final_state {
                    return Err(format!(
                        "final state {}, expected {final_state}",
                        state.to_json()
                    ));
                }
            }
            check_order(expected, &outcome.order)?;
        } else if let Some(expected) = case.get("expected_error") {
            let outcome = run(&built, &initial).await?;
            let error = match outcome.result {
                Ok(state) => return Err(format!("succeeded with {}", state.to_json())),
                Err(error) => error,
            };
            if json!(error.category()) != expected["category"] {
                return Err(format!(
                    "error {} ({error}), expected {}",
                    error.category(),
                    expected["category"]
                ));
            }
            if let Some(category) = expected.get("fan_out_category") {
                let found = std::error::Error::source(&error)
                    .and_then(|s| s.downcast_ref::<FanOutError>())
                    .map(FanOutError::category);
                if json!(found) != *category {
                    return Err(format!("fan-out category {found:?}, expected {category}"));
                }
            }
            if let Some(node) = expected.get("raised_from") {
                if json!(error.node()) != *node {
                    return Err(format!("raised from {:?}, expected {node}", error.node()));
                }
            }
            if let Some(message) = expected.get("message").and_then(Value::as_str) {
                let source = std::error::Error::source(&error).map(deepest_message);
                if source.as_deref() != Some(message) {
                    return Err(format!("message {source:?}, expected {message:?}"));
                }
            }
            if let Some(state) = expected.get("recoverable_state") {
                if &error.state().to_json() != state {
                    return Err(format!(
                        "recoverable state {}, expected {state}",
                        error.state().to_json()
                    ));
                }
            }
            check_order(expected, &outcome.order)?;
        } else if case.get("expected_compile_warning").is_none()
            && def.get("expected_compile_warning").is_none()
        {
            return Err("the case expects nothing this adapter checks".to_owned());
        }
    }
    Ok(())
}

/// The message of the innermost error of a chain (the user's own).
fn deepest_message(error: &(dyn std::error::Error + 'static)) -> String {
    let mut error = error;
    while let Some(next) = error.source() {
        error = next;
    }
    error.to_string()
}

/// A `flaky` failure: its message and whether it is transient.
#[derive(Debug)]
struct Flaky {
    transient: bool,
    message: String,
}

impl std::fmt::Display for Flaky {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Flaky {}

fn fail(spec: &Value, default_message: &str) -> BoxError {
    let transient = spec
        .get("transient")
        .and_then(Value::as_bool)
        .unwrap_or_else(|| {
            // A category alone: OpenArmature's transient provider categories.
            matches!(
                spec.get("category").and_then(Value::as_str),
                Some("provider_unavailable" | "provider_rate_limit" | "provider_model_not_loaded")
            )
        });
    Box::new(Flaky {
        transient,
        message: spec
            .get("message")
            .and_then(Value::as_str)
            .unwrap_or(default_message)
            .to_owned(),
    })
}

/// OpenArmature's default classifier: a transient failure, or a carrier of one.
fn transient(error: &BoxError) -> bool {
    let mut error: &(dyn std::error::Error + 'static) = error.as_ref();
    loop {
        if error.downcast_ref::<Flaky>().is_some_and(|f| f.transient) {
            return true;
        }
        match error.source() {
            Some(next) => error = next,
            None => return false,
        }
    }
}

/// `{target: source_field}` of a `success_compute` / `update_from_field`: each target takes the
/// source field's value (times `multiplier`).
fn computed(state: &JsonState, spec: &Value) -> Value {
    let multiplier = spec.get("multiplier").and_then(Value::as_i64);
    let mut out = Map::new();
    for (target, source) in spec.as_object().into_iter().flatten() {
        if target == "multiplier" {
            continue;
        }
        let value = match source.as_str() {
            Some(field) => state.get(field).cloned().unwrap_or(Value::Null),
            None => source.clone(),
        };
        let value = match (multiplier, value.as_i64()) {
            (Some(m), Some(v)) => json!(v * m),
            _ => value,
        };
        out.insert(target.clone(), value);
    }
    Value::Object(out)
}

/// A node's body from its directives.
fn body(name: &str, spec: &Value) -> BoxNode<JsonState> {
    let sleep = spec.get("sleep_ms").and_then(Value::as_u64).unwrap_or(0);
    let update = spec
        .get("update")
        .or_else(|| spec.get("update_pure"))
        .cloned();
    if let Some(message) = spec.get("raises").and_then(Value::as_str) {
        let message = message.to_owned();
        return BoxNode::new(move |_: Arc<JsonState>, _: Context| {
            let error = Raised(message.clone());
            async move { Err::<JsonUpdate, _>(error) }
        });
    }
    if let Some(flaky) = spec.get("flaky") {
        let failures: Vec<Value> = flaky
            .get("failure_sequence")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let success = flaky.get("success_update").cloned().unwrap_or(json!({}));
        let calls = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        return BoxNode::new(move |s: Arc<JsonState>, _: Context| {
            let call = calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let result = match failures.get(call) {
                Some(failure) => Err(fail(failure, "flaky")),
                None => Ok(s.update(success.clone())),
            };
            async move { result }
        });
    }
    if let Some(flaky) = spec
        .get("flaky_by_index")
        .or_else(|| spec.get("flaky_instance_only"))
    {
        // Fails when the state's index is `fail_when_idx`, or the first `fail_count_per_*`
        // calls of each instance (told apart by the state as it entered).
        let fail_when = flaky.get("fail_when_idx").and_then(Value::as_i64);
        let fail_count = flaky
            .get("fail_count_per_idx")
            .or_else(|| flaky.get("fail_count_per_instance"))
            .and_then(Value::as_u64)
            .unwrap_or(0);
        let compute = flaky.get("success_compute").cloned().unwrap_or(json!({}));
        let failure = flaky.clone();
        let seen = Arc::new(std::sync::Mutex::new(BTreeMap::<String, u64>::new()));
        return BoxNode::new(move |s: Arc<JsonState>, _: Context| {
            let idx = s.get("idx").and_then(Value::as_i64);
            let calls = {
                let mut seen = seen.lock().unwrap();
                let count = seen.entry(s.to_json().to_string()).or_insert(0);
                *count += 1;
                *count
            };
            let result = if (fail_when.is_some() && idx == fail_when) || calls <= fail_count {
                Err(fail(&failure, &format!("instance {idx:?} failed")))
            } else {
                Ok(s.update(computed(&s, &compute)))
            };
            async move { result }
        });
    }
    if let Some(from) = spec.get("update_from_field") {
        let from = from.clone();
        return BoxNode::new(move |s: Arc<JsonState>, _: Context| {
            let update = s.update(computed(&s, &from));
            async move { Ok::<_, Infallible>(update) }
        });
    }
    if let Some(update) = update {
        return BoxNode::new(move |s: Arc<JsonState>, _: Context| {
            let update = s.update(update.clone());
            async move {
                if sleep > 0 {
                    tokio::time::sleep(std::time::Duration::from_millis(sleep)).await;
                }
                Ok::<_, Infallible>(update)
            }
        });
    }
    panic!("node `{name}` has no directive this adapter knows: {spec}");
}

fn retry_policy(layer: &Value) -> RetryPolicy<JsonState> {
    let attempts = layer
        .get("max_attempts")
        .and_then(Value::as_u64)
        .unwrap_or(3) as u32;
    let seconds = layer
        .pointer("/backoff/seconds")
        .and_then(Value::as_f64)
        .unwrap_or(0.0);
    let policy =
        RetryPolicy::new(attempts).backoff_constant(std::time::Duration::from_secs_f64(seconds));
    match layer.pointer("/classifier/type").and_then(Value::as_str) {
        Some("state_aware_max_retries_remaining") => policy.retry_if(|_, s: &JsonState| {
            s.get("max_retries_remaining")
                .and_then(Value::as_i64)
                .unwrap_or(0)
                > 0
        }),
        _ => policy.retry_if(|e, _| transient(e)),
    }
}

/// Wraps a node in a fixture's middleware: `retry`, or `failure_isolation` (a failure becomes
/// the degraded update).
fn apply_middleware(node: BoxNode<JsonState>, layer: &Value) -> BoxNode<JsonState> {
    match layer.get("type").and_then(Value::as_str) {
        Some("retry") => BoxNode::new(node.retry(retry_policy(layer))),
        Some("failure_isolation") => {
            let degraded = layer.get("degraded_update").cloned().unwrap_or(json!({}));
            BoxNode::new(move |s: Arc<JsonState>, cx: Context| {
                let attempt = node.call(Arc::clone(&s), cx);
                let degraded = s.update(degraded.clone());
                async move {
                    Ok::<_, Infallible>(match attempt.await {
                        Ok(output) => output,
                        Err(_) => degraded.into(),
                    })
                }
            })
        }
        other => panic!("middleware {other:?} is not known to this adapter"),
    }
}

fn projection(spec: &Value) -> Projection {
    Projection {
        inputs: string_map(spec.get("inputs")),
        outputs: string_map(spec.get("outputs")),
        projects_in: string_list(spec.get("projects_in")),
        projects_out: string_list(spec.get("projects_out")),
    }
}

/// An int-or-callable of a fan-out (`count`, `concurrency`), read from the parent state.
fn resolve(spec: &Value, state: &JsonState) -> Option<i64> {
    match spec {
        Value::Null => None,
        Value::Number(n) => n.as_i64(),
        Value::Object(callable) => {
            let field = callable
                .get("field")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let value = state.get(field).cloned().unwrap_or(Value::Null);
            match callable.get("callable").and_then(Value::as_str) {
                Some("state_field_read") => value.as_i64(),
                Some("queue_chunk") => {
                    let chunk = callable
                        .get("chunk_size")
                        .and_then(Value::as_i64)
                        .unwrap_or(1);
                    // The fixture's harness operation: `max(1, len // chunk_size)`.
                    let len = value.as_array().map_or(0, Vec::len) as i64;
                    Some((len / chunk.max(1)).max(1))
                }
                other => panic!("callable {other:?} is not known to this adapter"),
            }
        }
        other => panic!("{other} is not an int or a callable"),
    }
}

fn fan_out_node(
    spec: &Value,
    parent: &Arc<Schema>,
    subgraphs: &BTreeMap<String, Value>,
) -> Result<BoxNode<JsonState>, CompileError> {
    let sub = spec["subgraph"].as_str().expect("a fan-out's subgraph");
    let child = build(&subgraphs[sub], subgraphs)?;
    let field = |name: &str| spec.get(name).and_then(Value::as_str).map(str::to_owned);
    let (items_field, item_field) = (field("items_field"), field("item_field"));
    let collect_field = field("collect_field").expect("a collect field");
    let target_field = field("target_field").expect("a target field");
    let (count_field, errors_field) = (field("count_field"), field("errors_field"));
    let count = spec.get("count").cloned().unwrap_or(Value::Null);
    let inputs = string_map(spec.get("inputs")).unwrap_or_default();
    let child_schema = Arc::clone(&child.schema);
    let instances = move |p: &JsonState| -> Result<Vec<JsonState>, BoxError> {
        let seed = |item: Option<&Value>| {
            let mut values = child_schema.initial_state();
            for (c, pf) in &inputs {
                values.insert(c.clone(), p.get(pf).cloned().unwrap_or(Value::Null));
            }
            if let (Some(item), Some(field)) = (item, &item_field) {
                values.insert(field.clone(), item.clone());
            }
            JsonState::from_values(Arc::clone(&child_schema), values)
        };
        Ok(match &items_field {
            Some(items) => p
                .get(items)
                .and_then(Value::as_array)
                .ok_or_else(|| format!("field `{items}` is not a list"))?
                .iter()
                .map(|item| seed(Some(item)))
                .collect(),
            None => {
                let n = resolve(&count, p).unwrap_or(0);
                if n < 0 {
                    return Err(format!("fan_out_invalid_count: {n}").into());
                }
                (0..n).map(|_| seed(None)).collect()
            }
        })
    };
    let schema = Arc::clone(parent);
    let collect = move |done: Vec<JsonState>| {
        let values: Vec<Value> = done
            .iter()
            .map(|d| d.get(&collect_field).cloned().unwrap_or(Value::Null))
            .collect();
        let mut update = json!({ target_field.clone(): values });
        if let Some(field) = &count_field {
            update[field] = json!(done.len());
        }
        JsonUpdate::new(Arc::clone(&schema), update)
    };
    let mut node = FanOut::try_new(child.graph, instances, collect);
    if let Some(concurrency) = spec.get("concurrency").cloned() {
        node = node.concurrency_from(move |p: &JsonState| {
            resolve(&concurrency, p).map(|n| n.max(1) as usize)
        });
    }
    if spec.get("on_empty").and_then(Value::as_str) == Some("noop") {
        node = node.on_empty(OnEmpty::Noop);
    }
    for layer in spec
        .get("instance_middleware")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let attempts = retry_policy(layer).max_attempts();
        let policy = RetryPolicy::new(attempts)
            .backoff_constant(std::time::Duration::ZERO)
            .retry_if(|e, _: &JsonState| transient(e));
        node = node.retry_instances(policy);
    }
    if spec.get("error_policy").and_then(Value::as_str) == Some("collect") {
        let schema = Arc::clone(parent);
        node = node.collect_errors(move |failed| {
            let records: Vec<Value> = failed
                .iter()
                .map(|f| json!({"fan_out_index": f.index.to_string(), "category": f.error.category()}))
                .collect();
            match &errors_field {
                Some(field) => {
                    JsonUpdate::new(Arc::clone(&schema), json!({ field.clone(): records }))
                }
                None => JsonUpdate::default(),
            }
        });
    }
    Ok(BoxNode::new(node))
}

fn branches_node(
    spec: &Value,
    parent: &Arc<Schema>,
    subgraphs: &BTreeMap<String, Value>,
) -> Result<BoxNode<JsonState>, CompileError> {
    let mut node = ParallelBranches::new();
    let empty = Map::new();
    let branches = spec
        .get("branches")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    for (name, branch) in branches {
        let mut work = if let Some(sub) = branch.get("subgraph").and_then(Value::as_str) {
            let child = build(&subgraphs[sub], subgraphs)?;
            let projection = projection(branch);
            projection.check(name, parent, &child.schema)?;
            BoxNode::new(JsonSubgraph::new(child.graph, child.schema, projection))
        } else {
            body(name, &branch["call"])
        };
        for layer in branch
            .get("middleware")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            work = apply_middleware(work, layer);
        }
        node = match branch.pointer("/when/field").and_then(Value::as_str) {
            Some(field) => {
                let field = field.to_owned();
                let truthy = move |p: &JsonState| {
                    !matches!(p.get(&field), None | Some(Value::Null | Value::Bool(false)))
                };
                node.branch_when(name, truthy, work)
            }
            None => node.branch(name, work),
        };
    }
    if spec.get("error_policy").and_then(Value::as_str) == Some("collect") {
        let field = spec
            .get("errors_field")
            .and_then(Value::as_str)
            .map(str::to_owned);
        let schema = Arc::clone(parent);
        node = node.collect_errors(move |failed| {
            let records: Vec<Value> = failed
                .iter()
                .map(|f| json!({"branch_name": f.branch, "category": "node_exception"}))
                .collect();
            match &field {
                Some(field) => {
                    JsonUpdate::new(Arc::clone(&schema), json!({ field.clone(): records }))
                }
                None => JsonUpdate::default(),
            }
        });
    }
    Ok(BoxNode::new(node))
}
