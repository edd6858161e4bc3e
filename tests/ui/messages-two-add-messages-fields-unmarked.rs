use agentstate::message::Message;
use agentstate::AgentState;

// Two add_messages fields and no #[agent_state(messages = ...)]: neither is the messages field.
#[derive(AgentState, Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Chat {
    #[reducer(add_messages)]
    messages: Vec<Message>,
    #[reducer(add_messages)]
    audit: agentstate::MessageList,
}

fn main() {}
