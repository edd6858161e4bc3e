//! The context window: what a model is sent from a long history with parallel tool calls.
//!
//! A travel assistant's state has grown to 40 turns, most with two or three parallel tool
//! calls. Each model call sends a *view* of it: the system message, the summary of what was cut,
//! and the newest turns within a 1,200-token budget, never splitting a tool call from its
//! results (even when the budget is only a few messages). The history is over the summary
//! policy's trigger (80% of the window), so all but its newest half window is summarized (here
//! by a stand-in for the model call) and the summary is recorded as a state update, through the
//! journal. What is printed is exactly what is sent (`ContextView::messages`).
//! Run with `cargo run --example context_window`.

use agentstate::context::{ContextIndex, ContextView, ContextWindow, Estimate, SummaryPolicy};
use agentstate::message::{Message, MessageId, Role, ToolCall};
use agentstate::state::{AgentState, AgentStateUpdate};
use agentstate::Journal;
use serde_json::json;

const CITIES: [&str; 8] = [
    "Oslo", "Bergen", "Lisbon", "Porto", "Kyoto", "Osaka", "Lima", "Cusco",
];

/// One turn: a question, an assistant message calling `weather` and `flights` in parallel (and
/// `hotels` on every third turn), the tools' results, and the answer.
fn turn(i: usize) -> Vec<Message> {
    let (from, to) = (CITIES[i % 8], CITIES[(i + 3) % 8]);
    let mut calls = vec![
        ToolCall::new(format!("w{i}"), "weather", json!({"city": to, "days": 3})),
        ToolCall::new(format!("f{i}"), "flights", json!({"from": from, "to": to})),
    ];
    if i % 3 == 0 {
        calls.push(ToolCall::new(
            format!("h{i}"),
            "hotels",
            json!({"city": to, "nights": 2}),
        ));
    }
    let results: Vec<Message> = calls
        .iter()
        .map(|call| {
            let output = match call.name() {
                "weather" => json!({"city": to, "forecast": ["sun", "clouds", "rain"], "high_c": 14 + i % 9}),
                "flights" => json!({"options": [{"dep": "07:40", "price_eur": 120 + i * 7}, {"dep": "18:05", "price_eur": 95 + i * 5}]}),
                _ => json!({"hotels": [{"name": format!("Hotel {to} Central"), "eur_per_night": 90 + i}]}),
            };
            Message::tool_result(call.id(), output).with_id(format!("{}-result", call.id()))
        })
        .collect();
    let mut messages = vec![
        Message::text_message(
            format!("I am in {from}. Should I fly to {to} this weekend? What will it cost?"),
            Role::User,
        )
        .with_id(format!("u{i}")),
        Message::text_message("", Role::Assistant)
            .with_tool_calls(calls)
            .with_id(format!("c{i}")),
    ];
    messages.extend(results);
    messages.push(
        Message::text_message(
            format!(
                "{to} looks mostly dry with highs around {} °C. The cheapest flight from {from} \
                 leaves at 18:05 for {} EUR.",
                14 + i % 9,
                95 + i * 5
            ),
            Role::Assistant,
        )
        .with_id(format!("a{i}")),
    );
    messages
}

/// One line per message, exactly as a model call is sent them (`view.messages()`: the system
/// messages, the summary as a system message, the kept history paired as providers require).
fn print_view(view: &ContextView<'_>) {
    for m in view.messages() {
        let role = if m.message_id == MessageId::from(ContextView::SUMMARY_ID) {
            "[summary]".to_owned()
        } else {
            format!("[{:?}]", m.role).to_lowercase()
        };
        let calls: Vec<String> = m
            .tool_calls()
            .iter()
            .map(|c| format!("{}#{}({})", c.name(), c.id(), c.function.arguments))
            .collect();
        let mut text = if calls.is_empty() {
            m.text()
        } else {
            calls.join(", ")
        };
        if text.chars().count() > 96 {
            text = text.chars().take(93).collect::<String>() + "...";
        }
        println!("  {role:<11} {text}");
    }
    println!(
        "  -- {} messages sent of {}, {} tokens (estimated), history kept from position {}\n",
        view.len(),
        view.stored_len(),
        view.tokens(),
        view.cut()
    );
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut history = vec![Message::text_message(
        "You are a travel assistant. Use the tools; quote prices in EUR.",
        Role::System,
    )
    .with_id("system")];
    history.extend((0..40).flat_map(turn));
    let mut journal = Journal::new(AgentState::default());
    journal.merge(AgentStateUpdate::default().context(history))?;

    let window = ContextWindow::tokens(1_200);
    let mut index = ContextIndex::default();
    let update = {
        let state = journal.state();
        let view = index.view_state(state, &window)?;
        println!(
            "The history holds {} messages. A model call with a 1,200-token budget is sent:",
            state.context.len()
        );
        print_view(&view);

        // The history is over 80% of the window (the default policy's trigger): everything but
        // the newest half window is summarized; the summarizer is yours (a model call).
        let policy = SummaryPolicy::new();
        let request = index
            .summary_request(state, &window, &policy)?
            .expect("the history is over the trigger");
        let asked: Vec<String> = request
            .messages()
            .iter()
            .filter(|m| m.role == Role::User)
            .map(|m| m.text())
            .collect();
        let summary = format!(
            "The user asked about {} trips (first: \"{}\"); weather, flights and hotels were \
             looked up for each.",
            asked.len(),
            asked[0]
        );
        println!(
            "Summarizing {} messages, through {}.",
            request.messages().len(),
            request.through()
        );
        // Bounded: at most 200 tokens, and never more than the window holds.
        request.record(summary, &Estimate::default(), 200)?
    };
    journal.merge(update)?;

    let state = journal.state();
    let view = index.view_state(state, &window)?;
    println!(
        "After recording the summary (update {} of the journal):",
        journal.updates().len()
    );
    print_view(&view);

    // A budget of six messages: the newest four history messages would start with a tool result
    // whose call is cut off (HTTP 400 from the provider); the view starts after the sequence.
    let view = index.view_state(state, &ContextWindow::messages(6))?;
    println!("With a budget of 6 messages:");
    print_view(&view);
    assert_eq!(
        state.context.len(),
        1 + 40 * 5 + 40 / 3 + 1,
        "the history is untouched"
    );
    Ok(())
}
