//! The derive on the issue's `Research` state: every canonical reducer on one struct.

use agentstate::reducers::HasId;
use agentstate::{AgentState, State};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Finding {
    id: u32,
    text: String,
}

impl HasId for Finding {
    type Id = u32;
    fn id(&self) -> &u32 {
        &self.id
    }
}

#[derive(AgentState, Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Research {
    #[reducer(append)]
    notes: Vec<String>,
    #[reducer(bounded_append(max_len = 3))]
    recent: Vec<u32>,
    #[reducer(dedupe_append)]
    sources: Vec<String>,
    #[reducer(merge_by_key(key = id))]
    findings: Vec<Finding>,
    #[reducer(merge)]
    meta: BTreeMap<String, String>,
    title: String,
}

fn finding(id: u32, text: &str) -> Finding {
    Finding {
        id,
        text: text.into(),
    }
}

#[test]
fn merges_each_field_through_its_reducer() {
    let mut r = Research::default();
    r.merge(
        ResearchUpdate::default()
            .notes(vec!["a".to_string()])
            .recent(vec![1, 2, 3, 4])
            .sources(vec!["x".to_string(), "x".to_string()])
            .findings(vec![finding(1, "one"), finding(2, "two")])
            .meta(BTreeMap::from([("k".to_string(), "v".to_string())]))
            .title("t"),
    )
    .unwrap();
    r.merge(
        ResearchUpdate::default()
            .notes(vec!["b".to_string()])
            .recent(vec![5])
            .sources(vec!["x".to_string(), "y".to_string()])
            .findings(vec![finding(2, "TWO"), finding(3, "three")]),
    )
    .unwrap();
    assert_eq!(r.notes, ["a", "b"]);
    assert_eq!(r.recent, [3, 4, 5]);
    assert_eq!(r.sources, ["x", "y"]);
    assert_eq!(
        r.findings,
        [finding(1, "one"), finding(2, "TWO"), finding(3, "three")]
    );
    assert_eq!(r.title, "t");
}

#[test]
fn update_json_uses_the_state_keys() {
    let update: ResearchUpdate = serde_json::from_str(r#"{"notes": ["n"], "title": "x"}"#).unwrap();
    assert_eq!(
        update,
        ResearchUpdate::default()
            .notes(vec!["n".to_string()])
            .title("x")
    );
    assert_eq!(
        serde_json::to_string(&update).unwrap(),
        r#"{"notes":["n"],"title":"x"}"#
    );
}

#[test]
fn schema_lists_reducers_and_parameters() {
    let schema = Research::schema();
    let described: Vec<(String, String, bool)> = schema
        .fields()
        .iter()
        .map(|f| {
            (
                f.name.clone(),
                f.reducer.to_string(),
                f.round_trip_idempotent,
            )
        })
        .collect();
    assert_eq!(
        described,
        [
            ("notes".into(), "append".into(), false),
            ("recent".into(), "bounded_append(max_len = 3)".into(), false),
            ("sources".into(), "dedupe_append(key = null)".into(), true),
            ("findings".into(), "merge_by_key(key = \"id\")".into(), true),
            ("meta".into(), "merge".into(), true),
            ("title".into(), "last_write_wins".into(), true),
        ]
    );
    assert_eq!(
        Research::FIELDS,
        ["notes", "recent", "sources", "findings", "meta", "title"]
    );
}
