use agentstate::AgentState;

// Neither Serialize nor Deserialize: a field of a state must be
// Clone + PartialEq + Debug + Serialize + Deserialize. (The state derives no serde traits here:
// those derives would add their own errors about `Handle`.)
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Handle(u32);

#[derive(AgentState, Debug, Clone, Default, PartialEq)]
pub struct Session {
    handle: Handle,
    #[reducer(append)]
    log: Vec<String>,
}

fn main() {}
