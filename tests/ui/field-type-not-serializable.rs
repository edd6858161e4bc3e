use agentstate::AgentState;

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Handle(u32);

#[derive(AgentState, Debug, Clone, Default, PartialEq)]
pub struct Session {
    handle: Handle,
    #[reducer(append)]
    log: Vec<String>,
}

fn main() {}
