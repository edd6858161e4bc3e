use agentstate::AgentState;

#[derive(AgentState)]
pub union Bits {
    a: u32,
    b: f32,
}

fn main() {}
