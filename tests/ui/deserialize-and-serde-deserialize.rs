use agentstate::AgentState;

// The opt-in generates `Deserialize`: deriving serde's as well conflicts (E0119).
#[derive(AgentState, Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[agent_state(deserialize)]
pub struct Order {
    confirmed: bool,
}

fn main() {}
