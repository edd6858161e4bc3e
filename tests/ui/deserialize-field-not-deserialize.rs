use agentstate::AgentState;

#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct Handle(u32);

// Under the opt-in too, the first error on a field type without Deserialize names the
// requirement; the update's serde code and the generated Deserialize repeat it.
#[derive(AgentState, Debug, Clone, Default, PartialEq)]
#[agent_state(deserialize)]
pub struct Session {
    handle: Handle,
}

fn main() {}
