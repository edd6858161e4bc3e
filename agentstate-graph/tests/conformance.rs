//! The OpenArmature engine conformance fixtures, run through this crate's runner.
//!
//! The fixtures are not part of this repository: set `AGENTSTATE_ENGINE_CONFORMANCE_DIR` to the
//! directory holding `graph-engine/` and `pipeline-utilities/` (`.ci/run` sets it to
//! `../shared/conformance/openarmature-engine`). Without it this test prints one line and
//! passes.
//!
//! Each fixture's graph is built with [`Graph::builder`] over [`JsonState`]s whose schema is the
//! fixture's declared state ([`Schema::from_json`]), its nodes are the fixture's directives
//! (`update`, `update_from_field`, `raises`, `subgraph` with its projection), and it runs with
//! [`Graph::stream`], whose `node_started` events give the execution order. One line per case:
//! `ok`, `FAILED` or `n/a` with the reason. Every fixture issue 21 lists must pass.
//!
//! The test runs without the libtest harness (`harness = false`) so that its lines are shown.

use agentstate::schema::Schema;
use agentstate_graph::json::{JsonState, JsonUpdate};
use agentstate_graph::subgraph::{JsonSubgraph, Projection};
use agentstate_graph::{CompileError, Context, Event, Graph, GraphBuilder, Routes, END};
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
        if let Some(def) = source.get("subgraph").filter(|d| d.is_object()) {
            if let Some(name) = def.get("name").and_then(Value::as_str) {
                found.insert(name.to_owned(), def.clone());
            }
        }
    }
    found
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
    for (name, spec) in nodes {
        let key = name.clone();
        if let Some(update) = spec.get("update").or_else(|| spec.get("update_pure")) {
            let update = update.clone();
            builder = builder.node(key, move |s: Arc<JsonState>, _: Context| {
                let update = s.update(update.clone());
                async move { Ok::<_, Infallible>(update) }
            });
        } else if let Some(message) = spec.get("raises").and_then(Value::as_str) {
            let message = message.to_owned();
            builder = builder.node(key, move |_: Arc<JsonState>, _: Context| {
                let error = Raised(message.clone());
                async move { Err::<JsonUpdate, _>(error) }
            });
        } else if let Some(from) = spec.get("update_from_field").and_then(Value::as_object) {
            let multiplier = from.get("multiplier").and_then(Value::as_i64).unwrap_or(1);
            let (target, source) = from
                .iter()
                .find(|(k, _)| k.as_str() != "multiplier")
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_owned()))
                .expect("a target field");
            builder = builder.node(key, move |s: Arc<JsonState>, _: Context| {
                let value = s.get(&source).and_then(Value::as_i64).unwrap_or(0) * multiplier;
                let update = s.update(json!({ target.clone(): value }));
                async move { Ok::<_, Infallible>(update) }
            });
        } else if let Some(sub) = spec.get("subgraph").and_then(Value::as_str) {
            let sub_def = subgraphs
                .get(sub)
                .unwrap_or_else(|| panic!("subgraph `{sub}` is not defined"));
            let child = build(sub_def, subgraphs)?;
            let projection = Projection {
                inputs: string_map(spec.get("inputs")),
                outputs: string_map(spec.get("outputs")),
                projects_in: string_list(spec.get("projects_in")),
                projects_out: string_list(spec.get("projects_out")),
            };
            builder = builder.json_subgraph(
                key,
                &schema,
                JsonSubgraph::new(child.graph, child.schema, projection),
            );
        } else {
            panic!("node `{name}` has no directive this adapter knows: {spec}");
        }
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
                    result: Ok(state),
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
        if let Some(expected) = case.get("expected") {
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
            if let Some(node) = expected.get("raised_from") {
                if json!(error.node()) != *node {
                    return Err(format!("raised from {:?}, expected {node}", error.node()));
                }
            }
            if let Some(message) = expected.get("message").and_then(Value::as_str) {
                let source = std::error::Error::source(&error).map(|s| s.to_string());
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
