//! A field type that does not resolve: rustc's own errors, at the type (two, as with serde's
//! derives alone), none at the derive or the field's name.
use agentstate::AgentState;

#[derive(AgentState, Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Notes {
    #[reducer(append)]
    lines: Vec<Strng>,
}

fn main() {}
