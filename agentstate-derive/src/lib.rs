//! The `#[derive(AgentState)]` macro of agentstate (filled in by the derive issue).
