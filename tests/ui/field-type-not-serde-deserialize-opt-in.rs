use agentstate::AgentState;

// Under `#[agent_state(deserialize)]` too (the derive then also writes the state's own
// `Deserialize`), a field type that is not serializable is one error.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Handle(u32);

#[derive(AgentState, Debug, Clone, Default)]
#[agent_state(deserialize)]
pub struct Session {
    handle: Handle,
    #[reducer(append)]
    log: Vec<String>,
}

fn main() {}
