use agentstate::AgentState;

#[derive(AgentState, Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Order {
    #[agent_state(base)]
    #[reducer(nested)]
    #[serde(flatten)]
    base: agentstate::state::AgentState,
}

fn main() {}
