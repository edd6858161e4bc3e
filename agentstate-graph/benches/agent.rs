//! The runtime's share of an agent's work, with the model scripted (no network): a ReAct
//! turn of the prebuilt agent (a model call asking for two tools, the tools, the model's
//! answer) in memory, and a `ToolSet` running a message's calls. What a real turn adds is the
//! model's own time. Results and machine: `benches/README.md` (issue 28).
//!
//! `cargo bench -p agentstate-graph --bench agent`

use agentstate::message::{Message, Role, ToolCall};
use agentstate::model::ScriptedModel;
use agentstate::providers::ModelRequest;
use agentstate::state::{AgentState, AgentStateUpdate};
use agentstate::State;
use agentstate_graph::prebuilt::ReactAgent;
use agentstate_graph::{BoxError, Context, ToolSet};
use divan::Bencher;
use serde_json::json;

fn main() {
    divan::main();
}

/// The weather in a city.
#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Weather {
    /// The city.
    city: String,
}

async fn weather(args: Weather, _: Context) -> Result<String, BoxError> {
    Ok(format!("{}: sunny", args.city))
}

fn tools() -> ToolSet {
    ToolSet::new()
        .tool("get_weather", weather)
        .tool("get_forecast", weather)
}

fn calls(n: usize) -> Vec<ToolCall> {
    (0..n)
        .map(|i| {
            let name = if i % 2 == 0 {
                "get_weather"
            } else {
                "get_forecast"
            };
            ToolCall::new(
                format!("call-{i}"),
                name,
                json!({"city": format!("city {i}")}),
            )
        })
        .collect()
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime")
}

/// A whole turn: the agent built (untimed), then run from the user's question to its answer.
#[divan::bench(sample_count = 200)]
fn react_turn_in_memory(bencher: Bencher) {
    let rt = runtime();
    bencher
        .with_inputs(|| {
            let model = ScriptedModel::new([
                Message::text_message("Let me look.", Role::Assistant).with_tool_calls(calls(2)),
                Message::text_message("Sunny in both.", Role::Assistant),
            ]);
            let agent = ReactAgent::new(model, ModelRequest::builder("m"), tools())
                .system_prompt("You are brief.")
                .build()
                .expect("the agent builds");
            let mut state = AgentState::default();
            state
                .merge(
                    AgentStateUpdate::default().context(vec![Message::text_message(
                        "Weather in city 0 and city 1?",
                        Role::User,
                    )]),
                )
                .expect("the question merges");
            (agent, state)
        })
        .bench_local_values(|(agent, state)| {
            let done = rt.block_on(agent.invoke(state)).expect("the turn finishes");
            assert_eq!(done.context.len(), 5);
            done
        });
}

/// A message's `n` tool calls run by a `ToolSet` (arguments parsed, run concurrently, results
/// in call order).
#[divan::bench(args = [1, 8, 64])]
fn tool_set_calls(bencher: Bencher, n: usize) {
    let rt = runtime();
    let (tools, calls, cx) = (tools(), calls(n), Context::detached("tools"));
    bencher.bench_local(|| {
        let results = rt.block_on(tools.run(&calls, &cx)).expect("no interrupt");
        assert_eq!(results.len(), n);
        results
    });
}
