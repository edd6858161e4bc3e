use agentstate::AgentState;

#[derive(AgentState, Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Draft {
    #[reducer(append)]
    title: String,
    #[reducer(merge)]
    tags: Vec<String>,
    #[reducer(add_messages)]
    notes: Vec<String>,
    ok: u32,
}

fn main() {}
