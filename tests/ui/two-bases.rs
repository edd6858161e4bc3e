use agentstate::AgentState;

#[derive(AgentState, Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Twice {
    #[agent_state(base)]
    #[serde(flatten)]
    first: agentstate::state::AgentState,
    #[agent_state(base)]
    #[serde(flatten)]
    second: agentstate::state::AgentState,
}

fn main() {}
