use agentstate::AgentState;

#[derive(AgentState, Debug, Clone, Default, PartialEq)]
#[agent_state(version = "v2")]
struct Named {
    lines: Vec<String>,
}

#[derive(AgentState, Debug, Clone, Default, PartialEq)]
#[agent_state(version = 0)]
struct Zero {
    lines: Vec<String>,
}

#[derive(AgentState, Debug, Clone, Default, PartialEq)]
#[agent_state(version = -1)]
struct Negative {
    lines: Vec<String>,
}

fn main() {}
