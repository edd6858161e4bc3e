use agentstate::AgentState;

#[derive(AgentState, Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Notes {
    #[reducer(append)]
    #[reducer(dedupe_append)]
    items: Vec<String>,
}

fn main() {}
