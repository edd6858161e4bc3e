use agentstate::AgentState;

#[derive(AgentState, Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Order {
    #[agent_state(base)]
    base: agentstate::state::AgentState,
    confirmed: bool,
}

fn main() {}
