use agentstate::AgentState;

#[derive(AgentState, Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Order {
    #[agent_state(base)]
    #[serde(flatten)]
    base: agentstate::state::AgentState,
    #[reducer(append)]
    context: Vec<String>,
    confirmed: bool,
}

fn main() {}
