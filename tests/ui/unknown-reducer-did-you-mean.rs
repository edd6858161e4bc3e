use agentstate::AgentState;

#[derive(AgentState, Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Notes {
    #[reducer(apend)]
    items: Vec<String>,
}

fn main() {}
