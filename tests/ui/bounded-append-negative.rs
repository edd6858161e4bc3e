use agentstate::AgentState;

#[derive(AgentState, Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Recent {
    #[reducer(bounded_append(max_len = -3))]
    items: Vec<u32>,
}

fn main() {}
