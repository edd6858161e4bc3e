use agentstate::AgentState;

#[derive(AgentState, Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Title {
    #[reducer(merge_by_key(key = id))]
    text: String,
}

fn main() {}
