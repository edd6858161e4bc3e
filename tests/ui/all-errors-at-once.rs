use agentstate::AgentState;

#[derive(AgentState, Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Messy {
    #[reducer(bounded_append(max_len = 0))]
    recent: Vec<u32>,
    #[reducer(apend)]
    notes: Vec<String>,
    #[reducer(merge_by_key)]
    records: Vec<String>,
    #[agent_state(skp)]
    title: String,
}

fn main() {}
