//! A run streamed as AG-UI events folds back, in our AG-UI fold, into the run's final messages
//! and state.
#![cfg(feature = "ag-ui")]

use agentstate::agui::messages_to_agui;
use agentstate::agui::{AguiMessage, ChatState, Event as Agui, Phase};
use agentstate::message::{Message, Role, ToolCall};
use agentstate::state::{AgentState, AgentStateUpdate};
use agentstate::NodeOutput;
use agentstate::State;
use agentstate::ToolResult;
use agentstate_graph::agui::AguiAdapter;
use agentstate_graph::{Context, Graph, END};
use futures_util::StreamExt;
use serde_json::json;
use std::convert::Infallible;
use std::sync::Arc;

fn block_on<F: std::future::Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("a runtime")
        .block_on(future)
}

/// A model that first asks for two tools (streaming its text), then answers.
async fn model(state: Arc<AgentState>, cx: Context) -> Result<AgentStateUpdate, Infallible> {
    let turn = state
        .context
        .iter()
        .filter(|m| m.role == Role::Assistant)
        .count();
    let reply = if turn == 0 {
        let id = "m-ask";
        cx.text_delta(id, "Let me ");
        cx.text_delta(id, "check.");
        Message::text_message("Let me check.", Role::Assistant)
            .with_id(id)
            .with_tool_calls(vec![
                ToolCall::new("call-1", "weather", json!({"city": "Paris"})),
                ToolCall::new("call-2", "time", json!({"city": "Paris"})),
            ])
    } else {
        cx.custom("answering", json!({"turn": turn}));
        Message::text_message("Sunny, 3 pm.", Role::Assistant).with_id("m-answer")
    };
    Ok(AgentStateUpdate::default().context(vec![reply]))
}

async fn tools(
    state: Arc<AgentState>,
    _: Context,
) -> Result<NodeOutput<AgentStateUpdate>, Infallible> {
    let last = state.context.iter().last().expect("the model's message");
    let results: Vec<NodeOutput<AgentStateUpdate>> = last
        .tool_calls()
        .iter()
        .map(|call| {
            let output = if call.function.name == "weather" {
                "sunny"
            } else {
                "15:00"
            };
            ToolResult::new(
                Message::tool_result(call.id.clone(), output).with_id(format!("r-{}", call.id)),
                AgentStateUpdate::default(),
            )
            .into()
        })
        .collect();
    Ok(results.into())
}

fn react() -> Graph<AgentState> {
    Graph::builder()
        .node("model", model)
        .node("tools", tools)
        .entry("model")
        .route("model", |s: &AgentState| {
            let last = s.context.iter().last().expect("a message");
            if last.tool_calls().is_empty() {
                END.into()
            } else {
                "tools".into()
            }
        })
        .edge("tools", "model")
        .build()
        .unwrap()
}

fn messages_of(state: &AgentState) -> &[Message] {
    state.context.as_slice()
}

#[test]
fn the_ag_ui_events_fold_back_into_the_final_messages_and_state() {
    let mut start = AgentState::default();
    start
        .merge(
            AgentStateUpdate::default().context(vec![Message::text_message(
                "Weather and time in Paris?",
                Role::User,
            )]),
        )
        .unwrap();
    let mut adapter = AguiAdapter::new("t-1", &start, messages_of).unwrap();
    let mut events: Vec<Agui> = Vec::new();
    let mut last = None;
    block_on(async {
        let mut run = react().stream(start);
        while let Some(event) = run.next().await {
            events.extend(adapter.events(&event));
            if let agentstate_graph::Event::RunFinished { state } = event {
                last = Some(std::sync::Arc::unwrap_or_clone(state));
            }
        }
    });
    let last = last.expect("the run finished");
    let mut chat = ChatState::new();
    for event in &events {
        chat.apply(event);
    }
    assert!(chat.error().is_none(), "{:?}", chat.error());
    assert_eq!(chat.phase(), &Phase::Idle);
    assert_eq!(chat.agent_state(), &serde_json::to_value(&last).unwrap());
    let folded: Vec<AguiMessage> = chat
        .messages()
        .iter()
        .map(|m| m.message().clone())
        .collect();
    assert_eq!(folded, messages_to_agui(last.context.iter()));
    let types: Vec<&str> = events.iter().map(|e| e.event_type()).collect();
    assert_eq!(
        types,
        [
            "RUN_STARTED",
            "STATE_SNAPSHOT",
            "MESSAGES_SNAPSHOT",
            "STEP_STARTED",
            "TEXT_MESSAGE_START",
            "TEXT_MESSAGE_CONTENT",
            "TEXT_MESSAGE_CONTENT",
            "TEXT_MESSAGE_END",
            "STEP_FINISHED",
            "TOOL_CALL_START",
            "TOOL_CALL_ARGS",
            "TOOL_CALL_END",
            "TOOL_CALL_START",
            "TOOL_CALL_ARGS",
            "TOOL_CALL_END",
            "STATE_DELTA",
            "STEP_STARTED",
            "STEP_FINISHED",
            "TOOL_CALL_RESULT",
            "TOOL_CALL_RESULT",
            "STATE_DELTA",
            "STEP_STARTED",
            "CUSTOM",
            "STEP_FINISHED",
            "TEXT_MESSAGE_START",
            "TEXT_MESSAGE_CONTENT",
            "TEXT_MESSAGE_END",
            "STATE_DELTA",
            "RUN_FINISHED"
        ]
    );
}

#[test]
fn a_failed_run_ends_with_run_error_carrying_the_category() {
    let graph = Graph::builder()
        .node("model", |_: Arc<AgentState>, _: Context| async {
            Err::<AgentStateUpdate, _>("provider down")
        })
        .entry("model")
        .edge("model", END)
        .build()
        .unwrap();
    let start = AgentState::default();
    let mut adapter = AguiAdapter::new("t-1", &start, messages_of).unwrap();
    let events: Vec<Agui> = block_on(async {
        let mut out = Vec::new();
        let mut run = graph.stream(start);
        while let Some(event) = run.next().await {
            out.extend(adapter.events(&event));
        }
        out
    });
    let last = serde_json::to_value(events.last().unwrap()).unwrap();
    assert_eq!(last["type"], "RUN_ERROR");
    assert_eq!(last["code"], "node_exception");
    assert_eq!(
        last["message"],
        "node `model` failed in step 1: provider down"
    );
}
