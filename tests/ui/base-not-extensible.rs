use agentstate::AgentState;

/// A state that does not say other states may extend it (`#[agent_state(extensible)]`).
#[derive(AgentState, Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Research {
    #[reducer(append)]
    notes: Vec<String>,
}

#[derive(AgentState, Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Review {
    #[agent_state(base)]
    #[serde(flatten)]
    research: Research,
    verdict: String,
}

fn main() {}
