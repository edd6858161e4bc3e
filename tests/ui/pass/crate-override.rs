//! `#[agent_state(crate = ...)]` for a runtime re-exported under another path.

mod framework {
    pub use agentstate as state_runtime;
}

use agentstate::State;

#[derive(agentstate::AgentState, Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[agent_state(crate = crate::framework::state_runtime, update = NotesPatch)]
pub struct Notes {
    #[reducer(append)]
    items: Vec<String>,
}

fn main() {
    let mut n = Notes::default();
    n.merge(NotesPatch::default().items(vec!["a".to_string()])).unwrap();
    assert_eq!(n.items, ["a"]);
}
