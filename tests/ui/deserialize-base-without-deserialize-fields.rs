use agentstate::AgentState;

/// A base state with serde's derived `Deserialize`, without the opt-in.
#[derive(AgentState, Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[agent_state(extensible)]
pub struct Base {
    note: String,
}

#[derive(AgentState, Debug, Clone, Default, PartialEq, serde::Serialize)]
#[agent_state(deserialize)]
pub struct Order {
    #[agent_state(base)]
    #[serde(flatten)]
    base: Base,
    confirmed: bool,
}

fn main() {}
