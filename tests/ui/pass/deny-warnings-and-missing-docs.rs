//! A user crate that denies warnings and missing docs: the generated code adds neither.
#![deny(warnings, missing_docs)]

use agentstate::{AgentState, State};
use serde::{Deserialize, Serialize};

/// A finding.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Finding {
    /// Its id.
    pub id: u32,
}

/// A documented state using every kind of attribute.
#[derive(AgentState, Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Research {
    /// Notes.
    #[reducer(append)]
    pub notes: Vec<String>,
    /// Recent ids.
    #[reducer(bounded_append(max_len = 3))]
    pub recent: std::collections::VecDeque<u32>,
    /// Findings by id.
    #[reducer(merge_by_key(key = id))]
    pub findings: agentstate::KeyedList<Finding>,
    /// Tags.
    #[reducer(dedupe_append)]
    pub tags: Vec<String>,
    /// Never merged.
    #[agent_state(skip)]
    pub cache: Option<String>,
    /// Title.
    pub title: String,
}

/// An extension of AgentState.
#[derive(AgentState, Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Order {
    /// The base.
    #[agent_state(base)]
    #[serde(flatten)]
    pub base: agentstate::state::AgentState,
    /// Confirmed?
    pub confirmed: bool,
}

fn main() {
    let mut r = Research::default();
    r.merge(ResearchUpdate::default().notes(vec!["n".to_string()]))
        .unwrap();
    assert_eq!(r.notes.len(), 1);
    let mut o = Order::default();
    o.merge(OrderUpdate::default().confirmed(true)).unwrap();
    assert!(o.confirmed && o.is_running());
}
