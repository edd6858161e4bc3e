//! A field type that is neither `Debug` nor `Clone`: the field's requirement, once.
use agentstate::AgentState;

#[derive(Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Opaque(u32);

#[derive(AgentState, Default)]
pub struct Session {
    handle: Opaque,
    #[reducer(append)]
    log: Vec<String>,
}

fn main() {}
