//! Wire compatibility with AgentFlow 0.10.1, byte for byte.
//!
//! Two sets of messages dumped by the real Python package (`model_dump_json()`):
//! - the 20 hand-picked messages of `agentflow-messages.json`, from the directory in
//!   `AGENTSTATE_WIRE_DIR` (skipped with a note when it is not set);
//! - `tests/data/agentflow_corpus.json`: 400 random messages (every block type, tool calls in
//!   three key orders, usages, metadata with unicode, integers beyond 64 bits, floats of every
//!   spelling, NaN and infinities, ids of AgentFlow's `bigint` mode and beyond), written by
//!   `tests/data/generate_agentflow_corpus.py`.
//!
//! Each message must parse, give AgentFlow's `Message.text()` and serialize back to exactly the
//! text AgentFlow wrote.

use agentstate::message::Message;
use serde_json::Value;
use std::io::Write as _;
use std::path::{Path, PathBuf};

struct Case {
    name: String,
    json_string: String,
    text: String,
}

fn read_cases(path: &Path) -> Vec<Case> {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let file: Value = serde_json::from_str(&text).expect("the fixture file is JSON");
    let messages = file["messages"].as_array().expect("a `messages` array");
    messages
        .iter()
        .enumerate()
        .map(|(i, case)| Case {
            name: case["name"]
                .as_str()
                .map_or_else(|| format!("message {i}"), str::to_owned),
            json_string: case["json_string"]
                .as_str()
                .expect("a json_string")
                .to_owned(),
            text: case["text"].as_str().expect("a text").to_owned(),
        })
        .collect()
}

/// Checks every case; returns how many were byte-identical (all others fail the test).
fn check(cases: &[Case]) -> usize {
    let mut failures = Vec::new();
    for case in cases {
        let name = &case.name;
        let message: Message = match serde_json::from_str(&case.json_string) {
            Ok(message) => message,
            Err(e) => {
                failures.push(format!("{name}: does not parse: {e}"));
                continue;
            }
        };
        if message.text() != case.text {
            failures.push(format!(
                "{name}: text() {:?} != {:?}",
                message.text(),
                case.text
            ));
        }
        let ours = serde_json::to_string(&message).unwrap();
        if ours != case.json_string {
            failures.push(format!(
                "{name}: re-serialization differs\n  ours:      {ours}\n  agentflow: {}",
                case.json_string
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} messages differ:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
    cases.len()
}

#[test]
fn agentflow_fixture_messages_are_byte_identical() {
    let Some(dir) = std::env::var_os("AGENTSTATE_WIRE_DIR") else {
        // Written to the process's stderr, not through `println!`, so that the test harness
        // does not capture it: a skipped conformance check should be visible.
        let _ = writeln!(
            std::io::stderr(),
            "agentflow wire fixtures: AGENTSTATE_WIRE_DIR is not set; skipping"
        );
        return;
    };
    let cases = read_cases(&PathBuf::from(dir).join("agentflow-messages.json"));
    assert_eq!(cases.len(), 20);
    let identical = check(&cases);
    println!("agentflow wire fixtures: {identical} of 20 messages byte-identical");
}

#[test]
fn agentflow_random_corpus_is_byte_identical() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/agentflow_corpus.json");
    let cases = read_cases(&path);
    assert_eq!(cases.len(), 400);
    let identical = check(&cases);
    println!("agentflow corpus: {identical} of 400 messages parse, give text() and re-serialize byte-identically");
}
