use agentstate::AgentState;

#[derive(AgentState, Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Cache {
    #[agent_state(skip)]
    #[reducer(append)]
    scratch: Vec<u8>,
}

fn main() {}
