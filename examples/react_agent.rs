//! A ReAct agent on the graph runner: a model node (a scripted fake model, no network) asks for
//! two tools at once, the tool calls run in parallel as tasks of their own (`Dispatch`,
//! LangGraph's `Send`) and merge as tool results, a conditional edge goes back to the model or
//! to END. Each model call builds its context window and the OpenAI Chat request body it would
//! send. The run is streamed and printed as AG-UI events as it goes.
//!
//! Run with `cargo run --example react_agent --features ag-ui`.

use agentstate::context::{ContextIndex, ContextWindow};
use agentstate::message::{Message, Role, ToolCall};
use agentstate::providers::openai_chat::to_openai_chat;
use agentstate::state::{AgentState, AgentStateUpdate};
use agentstate::State;
use agentstate::{NodeOutput, ToolResult};
use agentstate_graph::agui::AguiAdapter;
use agentstate_graph::{node_names, Context, Dispatch, Event, Graph};
use futures_util::StreamExt;
use serde_json::json;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};

node_names! {
    /// The agent's nodes: a route to any other name does not compile.
    enum Step {
        Model = "model",
        Tool = "tool",
    }
}

/// The fake model's answer to a conversation: tool calls first, then the answer.
fn scripted_model(history: &[Message]) -> Message {
    let results: Vec<String> = history
        .iter()
        .filter(|m| m.role == Role::Tool)
        .map(Message::text)
        .collect();
    if results.is_empty() {
        Message::text_message("Let me look up the weather and the time.", Role::Assistant)
            .with_id("msg-plan")
            .with_tool_calls(vec![
                ToolCall::new("call-weather", "get_weather", json!({"city": "Lisbon"})),
                ToolCall::new("call-time", "get_time", json!({"city": "Lisbon"})),
            ])
    } else {
        Message::text_message(
            format!("In Lisbon: {}.", results.join(", ")),
            Role::Assistant,
        )
        .with_id("msg-answer")
    }
}

/// The model node: builds the context window and the request body, then "calls" the model,
/// streaming its text as it comes.
fn model(index: Arc<Mutex<ContextIndex>>) -> impl agentstate_graph::Node<AgentState> {
    move |state: Arc<AgentState>, cx: Context| {
        let index = Arc::clone(&index);
        async move {
            let sent: Vec<Message> = {
                let mut index = index.lock().expect("the index");
                let view = index.view_state(&state, &ContextWindow::messages(20))?;
                view.messages()
                    .into_iter()
                    .map(std::borrow::Cow::into_owned)
                    .collect()
            };
            let body = serde_json::to_value(&to_openai_chat(&sent, None).request)?;
            eprintln!(
                "[model call {}] {} messages in the window, request body of {} bytes",
                cx.step(),
                sent.len(),
                body.to_string().len()
            );
            let reply = scripted_model(&sent);
            for word in reply.text().split_inclusive(' ') {
                cx.text_delta(reply.message_id.to_string(), word);
            }
            Ok::<_, Box<dyn std::error::Error + Send + Sync>>(
                AgentStateUpdate::default().context(vec![reply]),
            )
        }
    }
}

/// A tool task: its input holds the one call it answers.
async fn tool(
    input: Arc<AgentState>,
    _: Context,
) -> Result<NodeOutput<AgentStateUpdate>, Infallible> {
    let call = input
        .context
        .iter()
        .flat_map(|m| m.tool_calls())
        .next()
        .expect("a dispatched tool call");
    let output = match call.function.name.as_str() {
        "get_weather" => "sunny, 24 °C",
        _ => "15:30",
    };
    let result =
        Message::tool_result(call.id.clone(), output).with_id(format!("result-{}", call.id));
    Ok(ToolResult::message_only(result).into())
}

/// After the model: one task per tool call, each with its call as input; none ends the run.
fn dispatch_tools(state: &AgentState) -> Vec<Dispatch<Step, AgentState>> {
    let Some(last) = state.context.iter().last() else {
        return Vec::new();
    };
    last.tool_calls()
        .iter()
        .map(|call| {
            let mut input = AgentState::default();
            let ask =
                Message::text_message("", Role::Assistant).with_tool_calls(vec![call.clone()]);
            input
                .merge(AgentStateUpdate::default().context(vec![ask]))
                .expect("a new state takes a message");
            Dispatch::to(Step::Tool, input)
        })
        .collect()
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let graph = Graph::builder()
        .node(
            Step::Model,
            model(Arc::new(Mutex::new(ContextIndex::default()))),
        )
        .node(Step::Tool, tool)
        .entry(Step::Model)
        .route_send(Step::Model, dispatch_tools)
        .edge(Step::Tool, Step::Model)
        .build()?;

    let mut start = AgentState::default();
    start.merge(
        AgentStateUpdate::default().context(vec![Message::text_message(
            "What's the weather and the time in Lisbon?",
            Role::User,
        )
        .with_id("msg-user")]),
    )?;

    let mut adapter = AguiAdapter::new("thread-1", &start, |s: &AgentState| s.context.as_slice())?;
    // What an AG-UI client folds the events into (the official client's fold, in Rust).
    let mut chat = agentstate::agui::ChatState::new();
    let runtime = tokio::runtime::Builder::new_current_thread().build()?;
    let last = runtime.block_on(async {
        let mut run = graph.stream(start);
        let mut last = None;
        while let Some(event) = run.next().await {
            for agui in adapter.events(&event) {
                println!(
                    "{}",
                    serde_json::to_string(&agui).expect("an event serializes")
                );
                chat.apply(&agui);
            }
            match event {
                Event::RunFinished { state } => {
                    last = Some(Ok(std::sync::Arc::unwrap_or_clone(state)))
                }
                Event::RunFailed { error } => last = Some(Err(error.to_string())),
                _ => {}
            }
        }
        last.expect("a run ends with its outcome")
    })?;
    let answer = last.context.iter().last().expect("an answer");
    eprintln!("answer: {}", answer.text());
    assert_eq!(answer.text(), "In Lisbon: sunny, 24 °C, 15:30.");
    // The client's messages and state are the run's.
    assert_eq!(chat.to_messages().len(), last.context.len());
    assert_eq!(chat.agent_state(), &serde_json::to_value(&last)?);
    Ok(())
}
