//! Generic states with bounds and where clauses.

use agentstate::{AgentState, State};
use serde::{Deserialize, Serialize};
use std::fmt::Debug;

#[derive(AgentState, Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Log<T: Clone + Debug, U>
where
    U: Clone + PartialEq,
{
    #[reducer(append)]
    entries: Vec<T>,
    latest: Option<U>,
    #[agent_state(skip)]
    #[serde(skip)]
    scratch: Vec<T>,
}

fn main() {
    let mut log: Log<u8, String> = Log::default();
    log.merge(LogUpdate::default().entries(vec![1u8, 2]).latest(Some("x".to_string())))
        .unwrap();
    assert_eq!(log.entries, [1, 2]);
    assert_eq!(log.latest.as_deref(), Some("x"));
    let json = serde_json::to_string(&LogUpdate::<u8, String>::default().entries(vec![3u8])).unwrap();
    assert_eq!(json, r#"{"entries":[3]}"#);
    assert!(log.scratch.is_empty());
}
