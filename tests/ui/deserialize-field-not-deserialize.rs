use agentstate::AgentState;

#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct Handle(u32);

// Under the opt-in too, a field type without Deserialize is one error on the field.
#[derive(AgentState, Debug, Clone, Default, PartialEq)]
#[agent_state(deserialize)]
pub struct Session {
    handle: Handle,
}

fn main() {}
