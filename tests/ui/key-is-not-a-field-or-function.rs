use agentstate::AgentState;

#[derive(AgentState, Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Tags {
    #[reducer(dedupe_append(key = "id"))]
    items: Vec<String>,
}

fn main() {}
