//! Every canonical OpenArmature reducer on one state. Run with `cargo run --example research`.

use agentstate::KeyedList;
use agentstate::{AgentState, State};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, VecDeque};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Finding {
    id: u32,
    claim: String,
}

#[derive(AgentState, Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Research {
    /// Every note, in order.
    #[reducer(append)]
    notes: Vec<String>,
    /// The last three pages visited.
    #[reducer(bounded_append(max_len = 3))]
    recent: VecDeque<u32>,
    /// Sources, each once.
    #[reducer(dedupe_append)]
    sources: Vec<String>,
    /// Findings by id: a newer finding replaces the older one in place.
    #[reducer(merge_by_key(key = id))]
    findings: KeyedList<Finding>,
    /// Metadata, merged key by key.
    #[reducer(merge)]
    meta: BTreeMap<String, String>,
    /// Batches of tags from parallel searches, flattened.
    #[reducer(concat_flatten)]
    tags: Vec<String>,
    /// Settings from several layers, folded in order.
    #[reducer(merge_all)]
    settings: BTreeMap<String, String>,
    /// The title: no attribute, so last_write_wins.
    title: String,
}

fn finding(id: u32, claim: &str) -> Finding {
    Finding {
        id,
        claim: claim.into(),
    }
}

fn kv(k: &str, v: &str) -> BTreeMap<String, String> {
    BTreeMap::from([(k.to_string(), v.to_string())])
}

fn main() -> Result<(), agentstate::Error> {
    let mut state = Research::default();
    println!("schema:");
    for field in Research::schema().fields() {
        println!(
            "  {:<9} {:<30} round-trip idempotent: {}",
            field.name,
            field.reducer.to_string(),
            field.round_trip_idempotent
        );
    }

    let steps = vec![
        ResearchUpdate::default()
            .title("Rust agent state")
            .notes(vec!["start with the seeds".to_string()])
            .recent(VecDeque::from(vec![1, 2]))
            .sources(vec!["spec".to_string(), "spec".to_string()])
            .findings(vec![finding(1, "reducers differ"), finding(2, "ids vary")])
            .meta(kv("stage", "draft"))
            .tags(vec![vec!["rust".to_string()], vec!["agents".to_string()]])
            .settings(vec![kv("depth", "1"), kv("depth", "2")]),
        ResearchUpdate::default()
            .notes(vec!["measure".to_string()])
            .recent(VecDeque::from(vec![3, 4]))
            .sources(vec!["spec".to_string(), "bench".to_string()])
            .findings(vec![
                finding(2, "ids are str or int"),
                finding(3, "O(k) merges"),
            ])
            .meta(kv("reviewer", "bob"))
            .settings(vec![kv("style", "terse")]),
    ];
    for (i, step) in steps.into_iter().enumerate() {
        state.merge(step)?;
        println!("\nafter step {}:", i + 1);
        println!(
            "{}",
            serde_json::to_string_pretty(&state).unwrap_or_default()
        );
    }
    Ok(())
}
