//! The generated code names everything by absolute path, so it compiles without the prelude.
#![no_implicit_prelude]

extern crate agentstate;
extern crate serde;
extern crate std;

use agentstate::State;

#[derive(
    agentstate::AgentState,
    std::fmt::Debug,
    std::clone::Clone,
    std::default::Default,
    std::cmp::PartialEq,
    serde::Serialize,
    serde::Deserialize,
)]
pub struct Research {
    #[reducer(append)]
    notes: std::vec::Vec<std::string::String>,
    #[reducer(bounded_append(max_len = 2))]
    recent: std::vec::Vec<u32>,
    #[reducer(dedupe_append(key = id))]
    sources: std::vec::Vec<Source>,
    #[reducer(merge)]
    meta: std::collections::BTreeMap<std::string::String, u32>,
    title: std::option::Option<std::string::String>,
    #[agent_state(base)]
    #[serde(flatten)]
    base: agentstate::state::AgentState,
}

#[derive(std::fmt::Debug, std::clone::Clone, std::cmp::PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Source {
    id: u32,
}

fn main() {
    let mut r = <Research as std::default::Default>::default();
    let update = <ResearchUpdate as std::default::Default>::default().recent(std::vec![1, 2, 3]);
    std::result::Result::unwrap(r.merge(update));
    std::assert_eq!(r.recent, std::vec![2, 3]);
}
