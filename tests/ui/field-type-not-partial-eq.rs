use agentstate::AgentState;

// Serializable but not PartialEq: a field of a state must be
// Clone + PartialEq + Debug + Serialize + Deserialize.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct Handle(u32);

#[derive(AgentState, Debug, Clone, Default)]
pub struct Session {
    handle: Handle,
    #[reducer(append)]
    log: Vec<String>,
}

fn main() {}
