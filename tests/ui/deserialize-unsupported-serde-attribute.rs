use agentstate::AgentState;

#[derive(AgentState, Debug, Clone, Default, PartialEq, serde::Serialize)]
#[agent_state(deserialize)]
pub struct Order {
    #[agent_state(base)]
    #[serde(flatten)]
    base: agentstate::state::AgentState,
    #[serde(alias = "ok")]
    confirmed: bool,
}

fn main() {}
