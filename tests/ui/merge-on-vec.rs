use agentstate::AgentState;

#[derive(AgentState, Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Notes {
    #[reducer(merge)]
    items: Vec<String>,
}

fn main() {}
