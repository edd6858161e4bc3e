use agentstate::{AgentState, State};

#[derive(AgentState, Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Counter {
    #[reducer(append)]
    seen: Vec<u32>,
    label: String,
}

fn main() {
    let mut c = Counter::default();
    c.merge(CounterUpdate::default().seen(vec![1]).label("x")).unwrap();
    assert_eq!(c.seen, [1]);
}
