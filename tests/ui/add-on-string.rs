use agentstate::AgentState;

// `add` sums numbers; LangGraph's operator.add on a list is `append`.
#[derive(AgentState, Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Counter {
    #[reducer(add)]
    steps: u32,
    #[reducer(add)]
    label: String,
}

fn main() {}
