//! A tool loop: a user question, an assistant message with two tool calls, the two tools run as
//! parallel branches (each returning a `ToolResult`: its tool message plus a typed update of the
//! custom fields), a fan-in of the branches in branch order, and a final answer.
//! Run with `cargo run --example tool_loop`.

use agentstate::message::{Message, Role, ToolCall};
use agentstate::FanIn;
use agentstate::{AgentState, State};
use agentstate::{NodeOutput, ToolResult};
use serde::Serialize;
use serde_json::json;
use std::collections::BTreeMap;
use std::time::Duration;

/// An AgentState extension: the conversation comes from the base (`context`, merged with
/// add_messages), plus what the tools found.
// `deserialize`: the derive generates `Deserialize`, reading the base's keys in the same pass
// (serde's derive would buffer the whole conversation first).
#[derive(AgentState, Debug, Clone, Default, PartialEq, Serialize)]
#[agent_state(deserialize)]
pub struct TravelState {
    #[agent_state(base)]
    #[serde(flatten)]
    base: agentstate::state::AgentState,
    /// Every city a tool looked up, in the order the branches were given.
    #[reducer(append)]
    cities: Vec<String>,
    /// The forecast per city; each tool adds its own key.
    #[reducer(merge)]
    forecasts: BTreeMap<String, String>,
}

/// The user asks.
fn ask(_: &TravelState) -> NodeOutput<TravelStateUpdate> {
    vec![Message::text_message(
        "Do I need an umbrella in Oslo or Bergen tomorrow?",
        Role::User,
    )]
    .into()
}

/// The model answers with two tool calls.
fn plan(_: &TravelState) -> NodeOutput<TravelStateUpdate> {
    let calls = ["Oslo", "Bergen"]
        .iter()
        .map(|city| {
            ToolCall::new(
                format!("call_{}", city.to_lowercase()),
                "get_weather",
                json!({ "city": city }),
            )
        })
        .collect();
    vec![
        Message::text_message("Let me check both forecasts.", Role::Assistant)
            .with_tool_calls(calls),
    ]
    .into()
}

/// The tool: looks the city up and returns its message for the model and its state update.
/// Oslo's lookup is the slower one, so the second branch (Bergen) usually finishes first; the
/// fan-in still applies the first branch (Oslo) first.
fn get_weather(call: &ToolCall) -> ToolResult<TravelStateUpdate> {
    let args = call.arguments::<serde_json::Value>().unwrap_or_default();
    let city = args["city"].as_str().unwrap_or("nowhere").to_string();
    let forecast = match city.as_str() {
        "Oslo" => "4°C, dry",
        "Bergen" => "7°C, heavy rain",
        _ => "unknown",
    };
    std::thread::sleep(Duration::from_millis(if city == "Oslo" { 60 } else { 10 }));
    ToolResult::new(
        Message::tool_result(call.id(), format!("{city}: {forecast}")),
        TravelStateUpdate::default()
            .cities(vec![city.clone()])
            .forecasts(BTreeMap::from([(city, forecast.to_string())])),
    )
}

/// Runs every tool call of the last assistant message as a parallel branch. The results come
/// back in completion order; they are returned in branch order (the order of the calls).
fn run_tools(state: &TravelState) -> Vec<TravelStateUpdate> {
    let calls: Vec<ToolCall> = state
        .context
        .last()
        .map(|m| m.tool_calls().to_vec())
        .unwrap_or_default();
    let (done, finished) = std::sync::mpsc::channel();
    std::thread::scope(|scope| {
        for (branch, call) in calls.iter().enumerate() {
            let done = done.clone();
            scope.spawn(move || {
                let result = get_weather(call);
                done.send((branch, result))
                    .expect("the receiver outlives the branches");
            });
        }
    });
    drop(done);
    let mut results: Vec<(usize, ToolResult<TravelStateUpdate>)> = finished.iter().collect();
    let completion: Vec<String> = results.iter().map(|(_, r)| r.message().text()).collect();
    println!(
        "  (tools finished in this order: {})",
        completion.join(" | ")
    );
    results.sort_by_key(|(branch, _)| *branch);
    results
        .into_iter()
        .map(|(_, result)| result.into_update())
        .collect()
}

/// The model answers from what the tools found.
fn answer(state: &TravelState) -> NodeOutput<TravelStateUpdate> {
    let rainy: Vec<&str> = state
        .forecasts
        .iter()
        .filter(|(_, forecast)| forecast.contains("rain"))
        .map(|(city, _)| city.as_str())
        .collect();
    let text = match rainy.as_slice() {
        [] => "No umbrella needed.".to_string(),
        cities => format!("Take an umbrella for {}.", cities.join(" and ")),
    };
    vec![Message::text_message(text, Role::Assistant)].into()
}

fn role(message: &Message) -> &'static str {
    match message.role {
        Role::User => "user",
        Role::Assistant => "assistant",
        Role::System => "system",
        Role::Tool => "tool",
    }
}

fn show(step: &str, state: &TravelState) {
    println!("after {step}:");
    for message in state.context.iter() {
        let calls: Vec<String> = message
            .tool_calls()
            .iter()
            .map(|c| format!("{}({}) as {}", c.name(), c.function.arguments, c.id()))
            .collect();
        let calls = if calls.is_empty() {
            String::new()
        } else {
            format!("  -> calls {}", calls.join(", "))
        };
        println!("  {:<9} {}{calls}", role(message), message.text());
    }
    println!("  cities:    {:?}", state.cities);
    println!("  forecasts: {:?}", state.forecasts);
    println!();
}

fn main() -> Result<(), agentstate::Error> {
    let mut state = TravelState::default();

    state.apply_output(ask(&state))?;
    show("the question", &state);

    state.apply_output(plan(&state))?;
    show("the tool calls", &state);

    // Fan-in: both branches' tool messages go through add_messages and their updates through
    // the field reducers, in branch order, as one atomic merge. Strict: two branches writing
    // one last_write_wins field would be an error (none do here).
    let branches = run_tools(&state);
    state.merge_parallel(branches, FanIn::Strict)?;
    show("the parallel tools (fan-in in branch order)", &state);

    state.apply_output(answer(&state))?;
    show("the answer", &state);

    // A tool result's update that says `context: []` (as an AgentFlow tool might) adds its
    // tool message and wipes nothing; only an Overwrite would replace the context.
    let careless = TravelStateUpdate::from_json(json!({"context": [], "cities": ["Tromsø"]}))?;
    state.apply_output(
        ToolResult::new(Message::tool_result("call_extra", "Tromsø: -2°C"), careless).into(),
    )?;
    println!(
        "a tool result saying `context: []` kept all {} messages; cities: {:?}",
        state.context.len(),
        state.cities
    );

    // A JSON update with a typo is refused by name, and changes nothing.
    let before = state.clone();
    let err = state
        .apply_json(json!({"citis": ["Paris"]}))
        .expect_err("an unknown key is an error");
    println!("a JSON update with a typo is refused: {err}");
    assert_eq!(state, before);
    Ok(())
}
