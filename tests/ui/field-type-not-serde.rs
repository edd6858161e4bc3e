use agentstate::AgentState;

// Comparable but not serializable: a field of a state must be
// Clone + PartialEq + Debug + Serialize + Deserialize.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Handle(u32);

#[derive(AgentState, Debug, Clone, Default)]
pub struct Session {
    handle: Handle,
    #[reducer(append)]
    log: Vec<String>,
}

fn main() {}
