use agentstate::AgentState;

#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Reading {
    at: f64,
    value: i32,
}

#[derive(AgentState, Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Sensor {
    #[reducer(merge_by_key(key = at))]
    readings: Vec<Reading>,
}

fn main() {}
