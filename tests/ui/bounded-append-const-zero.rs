use agentstate::AgentState;

const WINDOW: usize = 0;

#[derive(AgentState, Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Recent {
    #[reducer(bounded_append(max_len = WINDOW))]
    items: Vec<u32>,
}

fn main() {}
