use agentstate::AgentState;

#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Settings {
    verbose: bool,
}

#[derive(AgentState, Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Agent {
    #[reducer(nested)]
    settings: Settings,
    steps: u32,
}

fn main() {}
