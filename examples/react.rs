//! A ReAct agent with two typed tools, a person's approval before one of them, durable on
//! SQLite: the prebuilt `ReactAgent` (LangGraph's `create_react_agent`) in a few lines.
//!
//! ```sh
//! cargo run --example react             # the person approves the refund
//! cargo run --example react -- reject   # or rejects it (or `edit`: refunds 20 EUR instead)
//! ```
//!
//! The model is scripted (no network, no key). The run is kept in `./react.db`: it suspends
//! while the refund waits for the person, and continues from the database when answered.

use agentstate::message::{Message, Role, ToolCall};
use agentstate::model::ScriptedModel;
use agentstate::providers::ModelRequest;
use agentstate::state::{AgentState, AgentStateUpdate};
use agentstate::State;
use agentstate_graph::durable::{Answers, Outcome};
use agentstate_graph::prebuilt::{Decision, Decisions, ReactAgent};
use agentstate_graph::{BoxError, Context, ToolSet};
use agentstate_store::SqliteStore;
use serde_json::json;
use std::io::Write;

/// The weather in a city today.
#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Weather {
    /// The city's name.
    city: String,
}

/// Refunds an order, in cents.
#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Refund {
    order: String,
    cents: u64,
}

async fn get_weather(args: Weather, _: Context) -> Result<String, BoxError> {
    Ok(format!("{}: sunny, 24 °C", args.city))
}

async fn refund(args: Refund, cx: Context) -> Result<String, BoxError> {
    // An effect runs once in a durable run, however often the node runs again.
    let receipt: String = cx
        .effect("pay", |key| async move {
            Ok::<_, std::io::Error>(format!("R-{}", key.chars().take(8).collect::<String>()))
        })
        .await?;
    Ok(format!(
        "refunded {} cents for order {} ({receipt})",
        args.cents, args.order
    ))
}

/// The model's answers, in order (a provider's client in production).
fn model() -> ScriptedModel {
    let calls = vec![
        ToolCall::new("call-1", "get_weather", json!({"city": "Lisbon"})),
        ToolCall::new("call-2", "refund", json!({"order": "1042", "cents": 4999})),
    ];
    ScriptedModel::new([
        Message::text_message("Let me check.", Role::Assistant).with_tool_calls(calls),
        Message::text_message(
            "Done: see the refund's status above. Enjoy Lisbon's sun!",
            Role::Assistant,
        ),
    ])
}

/// Runs the agent on thread `react` of the database at `db`, the person deciding `decision`.
pub(crate) async fn run(
    db: &str,
    decision: &str,
    out: &mut impl Write,
) -> Result<AgentState, BoxError> {
    let tools = ToolSet::new()
        .tool("get_weather", get_weather)
        .tool("refund", refund);
    let agent = ReactAgent::new(model(), ModelRequest::builder("gpt-4.1-mini"), tools)
        .system_prompt("You are a travel shop's assistant.")
        .approve(["refund"])
        .build()?;
    let store = SqliteStore::open(db)?;
    let _ = store.delete("react").await; // a fresh run each time
    let durable = agent.durable(&store);

    let mut start = AgentState::default();
    let ask = "Refund my order 1042, and what's the weather in Lisbon?";
    start
        .merge(AgentStateUpdate::default().context(vec![Message::text_message(ask, Role::User)]))?;
    let mut outcome = durable.start("react", start).await?;
    while let Outcome::Suspended { interrupts, .. } = &outcome {
        let asked = &interrupts[0];
        let request = &asked.payload["action_requests"][0];
        let args = &request["args"];
        writeln!(
            out,
            "Waiting for a person to approve {}({args})",
            request["name"].as_str().unwrap_or("?")
        )?;
        let answer = match decision {
            "reject" => Decision::reject("Refunds need a manager today."),
            "edit" => Decision::edit(json!({"order": "1042", "cents": 2000})),
            _ => Decision::Approve,
        };
        writeln!(out, "The person answers: {decision}")?;
        let answers = Answers::new().answer(&asked.id, Decisions::new([answer]));
        outcome = durable.resume_with("react", answers).await?;
    }
    let state = outcome.state().clone();
    for message in state.context.iter() {
        let calls: Vec<String> = message
            .tool_calls()
            .iter()
            .map(|c| format!("{}({})", c.name(), c.function.arguments))
            .collect();
        let text = if calls.is_empty() {
            message.text()
        } else {
            format!("{} -> {}", message.text(), calls.join(", "))
        };
        writeln!(
            out,
            "{:>9}: {text}",
            format!("{:?}", message.role).to_lowercase()
        )?;
    }
    Ok(state)
}

fn main() -> Result<(), BoxError> {
    let decision = std::env::args().nth(1).unwrap_or_else(|| "approve".into());
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(run("react.db", &decision, &mut std::io::stdout()))?;
    Ok(())
}
