use agentstate::AgentState;

#[derive(AgentState, Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[agent_state(updaet = NotesPatch)]
pub struct Notes {
    items: Vec<String>,
}

fn main() {}
