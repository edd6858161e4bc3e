//! The three-node graph of the server benchmark (`benches/server.rs`, and `benches/langgraph/`,
//! where LangGraph's `langgraph dev` serves the same graph written in Python): `a`, `b` and `c`
//! in a row, each appending its name to `log`.

use agentstate::AgentState;
use agentstate_graph::{Context, Graph, END};
use std::sync::Arc;

/// The benchmark's state.
#[derive(AgentState, Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Three {
    /// The nodes that ran, in order.
    #[reducer(append)]
    pub log: Vec<String>,
}

/// A node that appends its name.
fn step(name: &'static str) -> impl agentstate_graph::Node<Three> {
    move |_: Arc<Three>, _: Context| async move {
        Ok::<_, std::convert::Infallible>(ThreeUpdate::default().log(vec![name.to_owned()]))
    }
}

/// `a` → `b` → `c`.
pub fn graph() -> Result<Graph<Three, &'static str>, agentstate_graph::CompileError> {
    Graph::builder()
        .node("a", step("a"))
        .node("b", step("b"))
        .node("c", step("c"))
        .entry("a")
        .edge("a", "b")
        .edge("b", "c")
        .edge("c", END)
        .build()
}
