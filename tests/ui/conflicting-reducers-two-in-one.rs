use agentstate::AgentState;

#[derive(AgentState, Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Notes {
    #[reducer(append, last_write_wins)]
    items: Vec<String>,
}

fn main() {}
