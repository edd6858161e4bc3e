use agentstate::AgentState;

#[derive(AgentState, Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[agent_state(extensible = true)]
pub struct Research {
    #[reducer(append)]
    notes: Vec<String>,
}

fn main() {}
