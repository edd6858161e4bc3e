use agentstate::AgentState;

#[derive(AgentState, Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum Phase {
    #[default]
    Idle,
    Running,
}

fn main() {}
