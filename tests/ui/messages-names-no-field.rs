use agentstate::AgentState;

#[derive(AgentState, Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[agent_state(messages = history)]
pub struct Chat {
    #[reducer(add_messages)]
    context: Vec<agentstate::message::Message>,
}

fn main() {}
