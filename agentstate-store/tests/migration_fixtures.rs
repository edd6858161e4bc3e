//! OpenArmature's state-migration fixtures (`pipeline-utilities/039`-`047`, §10.12), run
//! through the store's migration registry ([`Migrations`]): the registration, the chain
//! resolution, the application of the chain to the seeded state (and each parent state), and
//! the reading of the result against the current schema's required fields. The engine parts
//! (resuming a graph) are out of scope; the store-level behaviour of each case, on both
//! backends, is in `backends.rs` (`openarmature_migration_fixtures`).
//!
//! The fixtures are not part of this repository: set `AGENTSTATE_ENGINE_CONFORMANCE_DIR` to the
//! directory that holds `pipeline-utilities/*.json` (`.ci/run` sets it to
//! `../shared/conformance/openarmature-engine`). Without it this test prints one line and
//! passes. Versions are the fixtures' `vN` read as `N`.

use agentstate_store::migrate::{Migration, Migrations};
use agentstate_store::StoreError;
use serde_json::{json, Value};
use std::sync::{Arc, Mutex};

#[test]
fn state_migration_fixtures() {
    let Some(dir) = std::env::var_os("AGENTSTATE_ENGINE_CONFORMANCE_DIR") else {
        println!("state migrations: AGENTSTATE_ENGINE_CONFORMANCE_DIR is not set; skipping");
        return;
    };
    let dir = std::path::Path::new(&dir).join("pipeline-utilities");
    let mut ran = 0;
    for number in 39..=47 {
        let prefix = format!("{number:03}-state-migration");
        let file = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| {
                let name = p.file_name().unwrap().to_string_lossy().into_owned();
                name.starts_with(&prefix) && name.ends_with(".json")
            })
            .unwrap_or_else(|| panic!("no fixture {prefix}*.json in {}", dir.display()));
        let fixture: Value =
            serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
        for case in fixture["cases"].as_array().unwrap() {
            let name = case["name"].as_str().unwrap();
            run_case(case).unwrap_or_else(|problem| panic!("{number:03} {name}: {problem}"));
            println!("ok {number:03} {name}");
            ran += 1;
        }
    }
    assert_eq!(ran, 10, "cases run");
}

fn version(value: &Value) -> u32 {
    value
        .as_str()
        .and_then(|v| v.strip_prefix('v'))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("not a version: {value}"))
}

/// The harness's named migration functions; each run is logged as `from->to`.
fn step(from: u32, to: u32, name: &str, log: &Arc<Mutex<Vec<String>>>) -> Migration {
    let (log, name) = (log.clone(), name.to_owned());
    Migration::new(
        from,
        to,
        move |mut state| {
            log.lock().unwrap().push(format!("{from}->{to}"));
            let map = state.as_object_mut().ok_or("not an object")?;
            match name.as_str() {
                "add_new_field_default" => {
                    map.insert("new_field".into(), json!("v2_default"));
                }
                "add_v2_field" => {
                    map.insert("v2_field".into(), json!("v2_default"));
                }
                "add_v3_field" => {
                    map.insert("v3_field".into(), json!("v3_default"));
                }
                "identity_passthrough" => {}
                "raises_keyerror" => return Err("KeyError: 'missing'".into()),
                other => panic!("migration `{other}` ({from}->{to}) must not run"),
            }
            Ok(state)
        },
        Ok,
    )
}

fn run_case(case: &Value) -> Result<(), String> {
    let log = Arc::new(Mutex::new(Vec::<String>::new()));
    let ambiguity_expected = case
        .get("expected_chain_ambiguity_error")
        .or_else(|| case["resume"].get("expected_chain_ambiguity_error"))
        .is_some();
    let mut registry = Migrations::default();
    for m in case["migrations"].as_array().into_iter().flatten() {
        let (from, to) = (version(&m["from_version"]), version(&m["to_version"]));
        if let Err(err) = registry.add(step(from, to, m["migrate"].as_str().unwrap(), &log)) {
            // §10.12.1: a duplicate pair fails at registration.
            return match err.category() {
                "state_migration_chain_ambiguous" if ambiguity_expected => Ok(()),
                _ => Err(format!("registration failed: {err}")),
            };
        }
    }
    let Some(seeded) = case.get("seeded_record") else {
        return Err("no seeded record and no registration error".into());
    };
    let (from, to) = (
        version(&seeded["schema_version"]),
        version(&case["state"]["schema_version"]),
    );
    let expected = &case["resume"]["expected"];
    let expected_error = case["resume"]["expected_error"]["category"].as_str();
    // §10.12.3: equal versions never consult the registry.
    let chain = if from == to {
        Vec::new()
    } else {
        match registry.resolve(from, to) {
            Err(err) if ambiguity_expected => {
                return match err {
                    StoreError::MigrationAmbiguous { .. } => Ok(()),
                    other => Err(format!("not ambiguous: {other}")),
                }
            }
            Err(err) => return Err(format!("resolution failed: {err}")),
            Ok(None) => {
                let count = case["resume"]["expected_error"]["carries"]
                    ["registered_migrations_count"]
                    .as_u64();
                return match expected_error {
                    Some("checkpoint_state_migration_missing")
                        if count == Some(registry.len() as u64) =>
                    {
                        Ok(())
                    }
                    _ => Err(format!(
                        "no chain from {from} to {to}, expected {expected_error:?}"
                    )),
                };
            }
            Ok(Some(chain)) if ambiguity_expected => {
                return Err(format!(
                    "a chain of {} steps, expected ambiguity",
                    chain.len()
                ))
            }
            Ok(Some(chain)) => chain,
        }
    };
    // The chain applied to the record's state and to each parent state (§10.12.2).
    let mut states = vec![seeded["state"].clone()];
    states.extend(
        seeded["parent_states"]
            .as_array()
            .into_iter()
            .flatten()
            .cloned(),
    );
    let mut migrated = Vec::new();
    for state in states {
        let mut value = state;
        for m in &chain {
            match m.upgrade_state(value) {
                Ok(next) => value = next,
                Err(reason) => {
                    let carries = &case["resume"]["expected_error"]["carries"];
                    let pair = (
                        version(&carries["from_version"]),
                        version(&carries["to_version"]),
                    );
                    return match expected_error {
                        Some("checkpoint_state_migration_failed")
                            if pair == (m.from_version(), m.to_version()) =>
                        {
                            Ok(())
                        }
                        _ => Err(format!("migration failed unexpectedly: {reason}")),
                    };
                }
            }
        }
        migrated.push(value);
    }
    // Reading the result: a required field of the current schema must be there (§10.12.4).
    let fields = case["state"]["fields"].as_object().unwrap();
    for (name, decl) in fields {
        if decl["required"] == json!(true) && migrated[0].get(name).is_none() {
            return match expected_error {
                Some("checkpoint_record_invalid") => Ok(()),
                _ => Err(format!("required field `{name}` missing after migration")),
            };
        }
    }
    if let Some(category) = expected_error {
        return Err(format!("expected {category}, but the state migrated"));
    }
    if let Some(run) = expected["migrations_run"].as_array() {
        let run: Vec<String> = run
            .iter()
            .map(|r| {
                let (a, b) = r.as_str().unwrap().split_once("->").unwrap();
                format!("{}->{}", version(&json!(a)), version(&json!(b)))
            })
            .collect();
        let logged = log.lock().unwrap().clone();
        if logged != run {
            return Err(format!("migrations run {logged:?}, expected {run:?}"));
        }
    }
    let invocations = case["resume"]["invariants"]["migration_invocation_count"].as_u64();
    if let Some(n) = invocations {
        let logged = log.lock().unwrap().len() as u64;
        if logged != n {
            return Err(format!("{logged} migration runs, expected {n}"));
        }
    }
    // The final state where the fixture gives it: the migrated state with the fields'
    // defaults, then the graph's one update (the outermost state, for 043's subgraph).
    if let Some(final_state) = expected["final_state"].as_object() {
        let mut state = migrated.last().unwrap().as_object().unwrap().clone();
        for (name, decl) in fields {
            if !state.contains_key(name) {
                state.insert(name.clone(), decl["default"].clone());
            }
        }
        for node in case["nodes"].as_object().unwrap().values() {
            for (key, value) in node["update_pure"].as_object().into_iter().flatten() {
                state.insert(key.clone(), value.clone());
            }
        }
        if &state != final_state {
            return Err(format!("final state {state:?}, expected {final_state:?}"));
        }
    }
    Ok(())
}
