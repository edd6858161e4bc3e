//! A derived state's own work at run time: merging an update, composing two, and writing and
//! reading an update's JSON, on the state of `benches/compile_time.sh` (8 fields, 5 with
//! reducers) and on an extension of `AgentState`.
//!
//! The lists are short (10 items), so what is timed is the derive's per-field code (planning
//! and applying every field, skipping the ones an update leaves alone, reading and writing
//! entries) more than the reducers, which `benches/reducers.rs` times on long fields.
//!
//! Run with `cargo bench --bench updates`; `benches/README.md`'s table ("Updates at run time")
//! shows its medians beside callgrind's instruction counts of the same operations.

use agentstate::message::{Message, Role};
use agentstate::state::AgentStateUpdateSetters;
use agentstate::{AgentState, State};
use divan::{black_box, Bencher};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, VecDeque};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Item {
    id: u32,
    text: String,
}

/// The compile-time benchmark's state.
#[derive(AgentState, Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
struct Research {
    #[reducer(append)]
    notes: Vec<String>,
    #[reducer(bounded_append(max_len = 10))]
    recent: VecDeque<u32>,
    #[reducer(merge)]
    meta: BTreeMap<String, i64>,
    #[reducer(merge_by_key(key = id))]
    items: Vec<Item>,
    #[reducer(dedupe_append)]
    tags: Vec<String>,
    title: String,
    count: u64,
    done: Option<bool>,
}

/// An extension of `AgentState`, as an agent's state usually is.
#[derive(AgentState, Debug, Clone, Default, PartialEq, Serialize)]
#[agent_state(deserialize)]
struct Agent {
    #[agent_state(base)]
    #[serde(flatten)]
    base: agentstate::state::AgentState,
    #[reducer(append)]
    notes: Vec<String>,
    step_budget: u32,
}

fn item(id: u32) -> Item {
    Item {
        id,
        text: format!("finding {id}"),
    }
}

fn research() -> Research {
    Research {
        notes: (0..10).map(|i| format!("note {i}")).collect(),
        recent: (0..10).collect(),
        meta: (0..10).map(|i| (format!("k{i}"), i)).collect(),
        items: (0..10).map(item).collect(),
        tags: (0..10).map(|i| format!("tag {i}")).collect(),
        title: "survey".into(),
        count: 7,
        done: None,
    }
}

/// A node's usual update: three of the eight fields.
fn small_update() -> ResearchUpdate {
    ResearchUpdate::default()
        .notes(vec!["one more".to_owned()])
        .count(8_u64)
        .title("survey, revised")
}

/// Every field, and two Overwrites.
fn full_update() -> ResearchUpdate {
    ResearchUpdate::default()
        .notes(vec!["a".to_owned()])
        .recent(VecDeque::from([11, 12]))
        .meta(BTreeMap::from([("k1".to_owned(), 100)]))
        .items(vec![item(3), item(42)])
        .tags(vec!["tag 1".to_owned(), "new".to_owned()])
        .title("t")
        .count(9_u64)
        .done(Some(true))
        .overwrite_notes(vec![])
        .overwrite_done(None)
}

fn main() {
    divan::main();
}

/// Times merging the update `make` builds into the research state (the state is returned, so
/// that its drop is not timed).
fn merge_into_research(bencher: Bencher, make: fn() -> ResearchUpdate) {
    bencher
        .with_inputs(|| (research(), make()))
        .bench_local_values(|(mut state, update)| {
            state.merge(update).unwrap();
            state
        });
}

#[divan::bench]
fn merge_three_of_eight_fields(bencher: Bencher) {
    merge_into_research(bencher, small_update);
}

#[divan::bench]
fn merge_every_field(bencher: Bencher) {
    merge_into_research(bencher, full_update);
}

#[divan::bench]
fn compose_two_updates(bencher: Bencher) {
    bencher
        .with_inputs(|| (full_update(), small_update()))
        .bench_local_values(|(a, b)| a.then(b).unwrap());
}

#[divan::bench]
fn update_to_json(bencher: Bencher) {
    let update = full_update();
    bencher.bench_local(|| serde_json::to_string(black_box(&update)).unwrap());
}

#[divan::bench]
fn update_from_json(bencher: Bencher) {
    let json = serde_json::to_string(&full_update()).unwrap();
    bencher.bench_local(|| serde_json::from_str::<ResearchUpdate>(black_box(&json)).unwrap());
}

/// `from_json`: checked keys, both Overwrite spellings, errors naming the field.
#[divan::bench]
fn update_from_json_checked(bencher: Bencher) {
    let value = serde_json::to_value(full_update()).unwrap();
    bencher
        .with_inputs(|| value.clone())
        .bench_local_values(|value| ResearchUpdate::from_json(value).unwrap());
}

#[divan::bench]
fn update_eq(bencher: Bencher) {
    let (a, b) = (full_update(), full_update());
    bencher.bench_local(|| black_box(&a) == black_box(&b));
}

/// An extension's update: a message through the base's `add_messages`, and an own field.
#[divan::bench]
fn merge_extension(bencher: Bencher) {
    let hello = Message::text_message("hello", Role::User).with_id("m1");
    bencher
        .with_inputs(|| {
            let update = AgentUpdate::default()
                .context(vec![
                    Message::text_message("hi", Role::Assistant).with_id("m2")
                ])
                .notes(vec!["greeted".to_owned()]);
            let mut state = Agent::default();
            state
                .merge(AgentUpdate::default().context(vec![hello.clone()]))
                .unwrap();
            (state, update)
        })
        .bench_local_values(|(mut state, update)| {
            state.merge(update).unwrap();
            state
        });
}

#[divan::bench]
fn extension_update_from_json(bencher: Bencher) {
    let update = AgentUpdate::default()
        .context(vec![
            Message::text_message("hi", Role::Assistant).with_id("m2")
        ])
        .notes(vec!["greeted".to_owned()])
        .step_budget(3_u32);
    let json = serde_json::to_string(&update).unwrap();
    bencher.bench_local(|| serde_json::from_str::<AgentUpdate>(black_box(&json)).unwrap());
}
