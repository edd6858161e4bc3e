use agentstate::AgentState;

#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Task {
    id: u32,
}

#[derive(AgentState, Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Board {
    #[reducer(merge_by_key)]
    tasks: Vec<Task>,
}

fn main() {}
