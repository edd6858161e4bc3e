//! The OpenArmature graph-engine conformance fixtures (state and reducer cases).
//!
//! The fixtures are not part of this repository: set `AGENTSTATE_CONFORMANCE_DIR` to the
//! directory that holds `graph-engine/*.json` (`.ci/run` sets it to
//! `../shared/conformance/openarmature`). Without it this test prints one line and passes.
//!
//! Each case is run by a tiny adapter: the state schema comes from the library
//! ([`Schema::from_json`]), so `conflicting_reducers` and `reducer_configuration_invalid` are the
//! library's own errors. The graph-topology checks of fixture 007 (`no_declared_entry`,
//! `unreachable_node`, `dangling_edge`, `multiple_outgoing_edges`,
//! `mapping_references_undeclared_field`) concern this adapter's straight-line graph runner, not
//! the library, so they are implemented here.
//!
//! The test runs without the libtest harness (`harness = false`) so that its one line per case
//! is always shown.

use agentstate::schema::Schema;
use agentstate::Error;
use serde_json::{Map, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

const END: &str = "END";

fn main() {
    let Some(dir) = std::env::var_os("AGENTSTATE_CONFORMANCE_DIR") else {
        println!("OpenArmature conformance: AGENTSTATE_CONFORMANCE_DIR is not set; skipping");
        return;
    };
    let dir = PathBuf::from(dir);
    let files = fixture_files(&dir);

    // Read every case first, so the number found is known before any runs.
    let mut found = Vec::new();
    for file in &files {
        match read_cases(file) {
            Ok(cases) => found.extend(cases),
            Err(problem) => panic!("{}: {problem}", file.display()),
        }
    }
    assert!(
        !found.is_empty(),
        "no conformance case found under {}",
        dir.display()
    );

    let mut run = 0;
    let mut failures = Vec::new();
    for case in &found {
        run += 1;
        match run_case(case) {
            Ok(()) => println!("ok {} {}", case.number, case.name),
            Err(problem) => {
                println!("FAILED {} {}: {problem}", case.number, case.name);
                failures.push(format!("{} {}: {problem}", case.number, case.name));
            }
        }
    }
    println!(
        "OpenArmature conformance: {} of {run} cases passed ({} files, {} cases found)",
        run - failures.len(),
        files.len(),
        found.len()
    );
    assert_eq!(run, found.len(), "every case found must run");
    assert!(
        failures.is_empty(),
        "{} conformance case(s) failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// `graph-engine/*.json` under `dir`, sorted by name.
fn fixture_files(dir: &Path) -> Vec<PathBuf> {
    let engine = dir.join("graph-engine");
    let entries = std::fs::read_dir(&engine).unwrap_or_else(|e| {
        panic!(
            "AGENTSTATE_CONFORMANCE_DIR is set, but {} cannot be read: {e}",
            engine.display()
        )
    });
    let mut files: Vec<PathBuf> = entries
        .map(|entry| entry.expect("a directory entry").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "json"))
        .collect();
    files.sort();
    assert!(
        !files.is_empty(),
        "no fixture (*.json) in {}",
        engine.display()
    );
    files
}

/// One conformance case: the fixture's number, the case's name, and its graph and expectations.
struct Case {
    number: String,
    name: String,
    body: Value,
}

/// The cases of one fixture file: the top-level object, or each entry of its `cases` list.
fn read_cases(file: &Path) -> Result<Vec<Case>, String> {
    let text = std::fs::read_to_string(file).map_err(|e| format!("cannot read: {e}"))?;
    let json: Value = serde_json::from_str(&text).map_err(|e| format!("not JSON: {e}"))?;
    let stem = file
        .file_stem()
        .and_then(|s| s.to_str())
        .ok_or("a file name that is not UTF-8")?;
    let (number, rest) = stem.split_once('-').unwrap_or((stem, stem));
    match json.get("cases") {
        Some(Value::Array(cases)) => cases
            .iter()
            .enumerate()
            .map(|(i, case)| {
                let name = case
                    .get("name")
                    .and_then(Value::as_str)
                    .map(str::to_owned)
                    .unwrap_or_else(|| format!("{rest}#{i}"));
                Ok(Case {
                    number: number.to_owned(),
                    name,
                    body: case.clone(),
                })
            })
            .collect(),
        Some(other) => Err(format!("`cases` must be a list, got {other}")),
        None => Ok(vec![Case {
            number: number.to_owned(),
            name: json
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or(rest)
                .to_owned(),
            body: json,
        }]),
    }
}

/// What running a graph produced.
struct Outcome {
    state: Map<String, Value>,
    order: Vec<String>,
    error: Option<Error>,
    /// The state just before the failing merge, to check that a failed merge changed nothing.
    before_error: Option<Map<String, Value>>,
}

/// Why a graph did not compile: the category name, and a sentence for the report.
struct CompileError {
    category: String,
    detail: String,
}

fn run_case(case: &Case) -> Result<(), String> {
    let body = &case.body;
    // Fixture 007 wraps each graph in `graph`; the others have it at the top level.
    let graph = body.get("graph").unwrap_or(body);
    let expected_compile = body.get("expected_compile_error");
    let expected_error = body.get("expected_error");
    let expected = body.get("expected");
    if expected_compile.is_none() && expected_error.is_none() && expected.is_none() {
        return Err("the case has no expectation this runner knows".into());
    }

    let compiled = compile(graph);
    if let Some(category) = expected_compile {
        let category = category
            .as_str()
            .ok_or("expected_compile_error is not a string")?;
        return match compiled {
            Ok(_) => Err(format!(
                "expected the compile error {category}, but the graph compiled"
            )),
            Err(e) if e.category == category => Ok(()),
            Err(e) => Err(format!(
                "expected the compile error {category}, got {}: {}",
                e.category, e.detail
            )),
        };
    }
    let (schema, path) =
        compiled.map_err(|e| format!("unexpected compile error {}: {}", e.category, e.detail))?;
    let outcome = execute(&schema, graph, &path)?;

    if let Some(expected_order) = expected.and_then(|e| e.get("execution_order")) {
        let order: Vec<Value> = outcome.order.iter().cloned().map(Value::from).collect();
        if expected_order != &Value::Array(order) {
            return Err(format!(
                "execution order {:?}, expected {expected_order}",
                outcome.order
            ));
        }
    }

    if let Some(expected_error) = expected_error {
        let category = expected_error
            .get("category")
            .and_then(Value::as_str)
            .ok_or("expected_error has no category")?;
        let Some(error) = &outcome.error else {
            return Err(format!(
                "expected {category}, but every node merged (final state {})",
                Value::Object(outcome.state)
            ));
        };
        if error.category() != category {
            return Err(format!(
                "expected {category}, got {}: {error}",
                error.category()
            ));
        }
        if let Some(from) = expected_error.get("raised_from").and_then(Value::as_str) {
            let node = match error {
                Error::Reducer { node, .. } => node.as_deref(),
                _ => None,
            };
            if node != Some(from) {
                return Err(format!(
                    "expected the error to be raised from node `{from}`, it names {node:?}: {error}"
                ));
            }
        }
        if outcome.before_error.as_ref() != Some(&outcome.state) {
            return Err("a failed merge changed the state".into());
        }
    } else if let Some(error) = &outcome.error {
        return Err(format!("unexpected {}: {error}", error.category()));
    }

    if let Some(final_state) = expected.and_then(|e| e.get("final_state")) {
        let final_state = final_state
            .as_object()
            .ok_or("expected.final_state is not an object")?;
        for (field, want) in final_state {
            match outcome.state.get(field) {
                Some(got) if got == want => {}
                Some(got) => return Err(format!("field `{field}` is {got}, expected {want}")),
                None => return Err(format!("field `{field}` is missing from the final state")),
            }
        }
    }
    Ok(())
}

/// Builds the schema (the library's checks) and checks the graph's topology (this adapter's
/// checks); returns the schema and the straight path of nodes from the entry to `END`.
fn compile(graph: &Value) -> Result<(Schema, Vec<String>), CompileError> {
    let state = graph.get("state").unwrap_or(&Value::Null);
    let schema = Schema::from_json(state).map_err(|e| CompileError {
        category: e.category().to_owned(),
        detail: e.to_string(),
    })?;
    let path = check_topology(graph, &schema)?;
    Ok((schema, path))
}

fn topology(category: &str, detail: String) -> CompileError {
    CompileError {
        category: category.to_owned(),
        detail,
    }
}

fn check_topology(graph: &Value, schema: &Schema) -> Result<Vec<String>, CompileError> {
    let empty = Map::new();
    let nodes = graph
        .get("nodes")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    let entry = match graph.get("entry").and_then(Value::as_str) {
        Some(entry) if nodes.contains_key(entry) => entry,
        Some(entry) => {
            return Err(topology(
                "no_declared_entry",
                format!("the entry `{entry}` is not a node"),
            ))
        }
        None => {
            return Err(topology(
                "no_declared_entry",
                "the graph declares no entry".into(),
            ))
        }
    };

    let mut next: BTreeMap<&str, &str> = BTreeMap::new();
    let no_edges = Vec::new();
    for edge in graph
        .get("edges")
        .and_then(Value::as_array)
        .unwrap_or(&no_edges)
    {
        let from = edge.get("from").and_then(Value::as_str).unwrap_or("");
        let to = edge.get("to").and_then(Value::as_str).unwrap_or("");
        for end in [from, to] {
            if end != END && !nodes.contains_key(end) {
                return Err(topology(
                    "dangling_edge",
                    format!("the edge {from} -> {to} names the undeclared node `{end}`"),
                ));
            }
        }
        if from == END {
            return Err(topology(
                "dangling_edge",
                format!("an edge leaves END (to `{to}`)"),
            ));
        }
        if let Some(previous) = next.insert(from, to) {
            return Err(topology(
                "multiple_outgoing_edges",
                format!("`{from}` has edges to `{previous}` and `{to}`"),
            ));
        }
    }

    let subgraphs: BTreeMap<&str, &Value> = graph
        .get("subgraph")
        .into_iter()
        .flat_map(|s| match s {
            Value::Array(list) => list.iter().collect(),
            other => vec![other],
        })
        .filter_map(|s| Some((s.get("name")?.as_str()?, s)))
        .collect();
    for (name, node) in nodes {
        check_mappings(name, node, schema, &subgraphs)?;
    }

    // Follow the single outgoing edges from the entry; what is not on the path is unreachable.
    let mut path = Vec::new();
    let mut seen = BTreeSet::new();
    let mut at = entry;
    while at != END {
        if !seen.insert(at) {
            return Err(topology(
                "cycle",
                format!("`{at}` is reached twice; this runner follows straight lines only"),
            ));
        }
        path.push(at.to_owned());
        at = next.get(at).copied().ok_or_else(|| {
            topology(
                "no_path_to_end",
                format!("`{at}` has no outgoing edge to follow"),
            )
        })?;
    }
    if let Some(orphan) = nodes.keys().find(|n| !seen.contains(n.as_str())) {
        return Err(topology(
            "unreachable_node",
            format!("`{orphan}` cannot be reached from the entry `{entry}`"),
        ));
    }
    Ok(path)
}

/// A subgraph node maps its `inputs` (subgraph field -> parent field) and `outputs` (parent
/// field -> subgraph field); every field named must be declared on its side.
fn check_mappings(
    node_name: &str,
    node: &Value,
    parent: &Schema,
    subgraphs: &BTreeMap<&str, &Value>,
) -> Result<(), CompileError> {
    let Some(sub_name) = node.get("subgraph").and_then(Value::as_str) else {
        return Ok(());
    };
    let sub = subgraphs.get(sub_name).ok_or_else(|| {
        topology(
            "dangling_edge",
            format!("node `{node_name}` runs the undeclared subgraph `{sub_name}`"),
        )
    })?;
    let inner =
        Schema::from_json(sub.get("state").unwrap_or(&Value::Null)).map_err(|e| CompileError {
            category: e.category().to_owned(),
            detail: format!("subgraph `{sub_name}`: {e}"),
        })?;
    let undeclared = |side: &str, field: &str| {
        topology(
            "mapping_references_undeclared_field",
            format!("node `{node_name}` maps the {side} field `{field}`, which is not declared"),
        )
    };
    let pairs = |key: &str| -> Vec<(String, String)> {
        node.get(key)
            .and_then(Value::as_object)
            .map(|m| {
                m.iter()
                    .map(|(k, v)| (k.clone(), v.as_str().unwrap_or("").to_owned()))
                    .collect()
            })
            .unwrap_or_default()
    };
    for (inner_field, parent_field) in pairs("inputs") {
        if inner.field(&inner_field).is_none() {
            return Err(undeclared("subgraph", &inner_field));
        }
        if parent.field(&parent_field).is_none() {
            return Err(undeclared("parent", &parent_field));
        }
    }
    for (parent_field, inner_field) in pairs("outputs") {
        if parent.field(&parent_field).is_none() {
            return Err(undeclared("parent", &parent_field));
        }
        if inner.field(&inner_field).is_none() {
            return Err(undeclared("subgraph", &inner_field));
        }
    }
    Ok(())
}

/// Runs the path: the initial state is the schema's defaults overlaid with `initial_state`, and
/// each node's `update` is merged through the schema. Stops at the first error.
fn execute(schema: &Schema, graph: &Value, path: &[String]) -> Result<Outcome, String> {
    let mut state = schema.initial_state();
    if let Some(initial) = graph.get("initial_state") {
        let initial = initial
            .as_object()
            .ok_or("initial_state is not an object")?;
        for (field, value) in initial {
            if schema.field(field).is_none() {
                return Err(format!(
                    "initial_state names the undeclared field `{field}`"
                ));
            }
            state.insert(field.clone(), value.clone());
        }
    }
    let mut order = Vec::new();
    for name in path {
        let node = &graph["nodes"][name];
        let update = node.get("update").ok_or_else(|| {
            format!("node `{name}` has no `update`; this runner runs no other kind")
        })?;
        order.push(name.clone());
        let before = state.clone();
        if let Err(error) = schema.merge_from(name, &mut state, update.clone()) {
            return Ok(Outcome {
                state,
                order,
                error: Some(error),
                before_error: Some(before),
            });
        }
    }
    Ok(Outcome {
        state,
        order,
        error: None,
        before_error: None,
    })
}
