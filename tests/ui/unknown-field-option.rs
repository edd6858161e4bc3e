use agentstate::AgentState;

#[derive(AgentState, Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Notes {
    #[agent_state(bsae)]
    items: Vec<String>,
}

fn main() {}
