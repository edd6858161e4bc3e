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

mod conformance_support;

use agentstate_graph::json::JsonState;
use agentstate_graph::parallel::FanOutError;
use agentstate_graph::Event;
use conformance_support::{
    build, cases, deepest_message, fixture_files, registry, set_case_middleware, Built,
};
use futures_util::StreamExt;
use serde_json::{json, Value};
use std::path::PathBuf;
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
                    result: Ok(std::sync::Arc::unwrap_or_clone(state)),
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
    set_case_middleware(case.get("middleware").cloned());
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
                // A routing error: issue 27 follows LangGraph, where a failing step (its edges
                // included) merges nothing, so the state is the one before the step (here the
                // initial state); OpenArmature keeps the failing step's writes.
                let before = JsonState::with_values(Arc::clone(&built.schema), initial.clone())
                    .map(|s| s.to_json())
                    .unwrap_or(Value::Null);
                let state = if error.category() == "routing_error" {
                    &before
                } else {
                    state
                };
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
