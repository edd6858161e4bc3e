use agentstate::AgentState;

#[derive(AgentState, Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Chat {
    #[reducer(add_messages)]
    context: Vec<String>,
}

fn main() {}
