use agentstate::message::{Message, Role};
use agentstate::NodeOutput;
use agentstate::AgentState;

/// No messages field: neither `#[agent_state(messages = ...)]` nor an `AgentState` base.
#[derive(AgentState, Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Counter {
    count: u32,
    #[reducer(append)]
    log: Vec<String>,
}

fn main() {
    let output: NodeOutput<CounterUpdate> = vec![Message::text_message("hi", Role::User)].into();
    let _ = output;
}
