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

/// Durable runs (feature `store`) through the adapter, on SQLite in memory.
#[cfg(feature = "store")]
mod durable {
    use super::*;
    use agentstate::agui::RunOutcome;
    use agentstate_graph::durable::{Answers, Durability, DurableStream};
    use agentstate_graph::{BoxError, Event};
    use agentstate_store::SqliteStore;
    use std::collections::HashMap;

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime")
    }

    /// The AG-UI events of a durable stream, and its run events' kinds (its error as `error`).
    async fn to_agui(
        mut run: DurableStream<AgentState, &'static str>,
        adapter: &mut AguiAdapter<AgentState>,
    ) -> (Vec<Agui>, Vec<&'static str>) {
        let (mut agui, mut kinds) = (Vec::new(), Vec::new());
        while let Some(item) = run.next().await {
            match item {
                Ok(event) => {
                    kinds.push(event.kind());
                    agui.extend(adapter.events(&event));
                }
                Err(error) => {
                    kinds.push("error");
                    agui.extend(adapter.failed(&error));
                }
            }
        }
        (agui, kinds)
    }

    /// One run's events as the official client verifies them: at most one `RUN_STARTED`,
    /// first; exactly one `RUN_FINISHED` or `RUN_ERROR`, last; before a `RUN_FINISHED`, every
    /// text message, tool call and step started is ended, once, and nothing comes for one
    /// after its end.
    fn check_balanced(events: &[Agui]) {
        let types: Vec<&str> = events.iter().map(|e| e.event_type()).collect();
        let starts = types.iter().filter(|t| **t == "RUN_STARTED").count();
        assert!(starts <= 1, "{types:?}");
        if starts == 1 {
            assert_eq!(types[0], "RUN_STARTED", "{types:?}");
        }
        let ends = types
            .iter()
            .filter(|t| matches!(**t, "RUN_FINISHED" | "RUN_ERROR"))
            .count();
        assert_eq!(ends, 1, "{types:?}");
        assert!(
            matches!(*types.last().unwrap(), "RUN_FINISHED" | "RUN_ERROR"),
            "{types:?}"
        );
        // Open things by kind and id (steps by name, counted).
        let mut open: HashMap<(&str, String), i32> = HashMap::new();
        for event in events {
            let json = serde_json::to_value(event).unwrap();
            let id = |key: &str| json[key].as_str().unwrap_or_default().to_owned();
            let (kind, key, delta) = match event.event_type() {
                "TEXT_MESSAGE_START" => ("text", id("messageId"), 1),
                "TEXT_MESSAGE_CONTENT" => ("text", id("messageId"), 0),
                "TEXT_MESSAGE_END" => ("text", id("messageId"), -1),
                "TOOL_CALL_START" => ("tool", id("toolCallId"), 1),
                "TOOL_CALL_ARGS" => ("tool", id("toolCallId"), 0),
                "TOOL_CALL_END" => ("tool", id("toolCallId"), -1),
                "STEP_STARTED" => ("step", id("stepName"), 1),
                "STEP_FINISHED" => ("step", id("stepName"), -1),
                _ => continue,
            };
            let count = open.entry((kind, key.clone())).or_default();
            if delta == 0 {
                assert_eq!(
                    *count, 1,
                    "{kind} `{key}` streamed while not open: {types:?}"
                );
            }
            *count += delta;
            assert!(
                (0..=1).contains(count) || kind == "step",
                "{kind} `{key}` unbalanced: {types:?}"
            );
            assert!(*count >= 0, "{kind} `{key}` ended twice: {types:?}");
        }
        if types.last() == Some(&"RUN_FINISHED") {
            let still: Vec<_> = open.iter().filter(|(_, n)| **n != 0).collect();
            assert!(
                still.is_empty(),
                "open at RUN_FINISHED: {still:?}\n{types:?}"
            );
        }
    }

    fn user(text: &str) -> AgentState {
        let mut start = AgentState::default();
        start
            .merge(
                AgentStateUpdate::default()
                    .context(vec![Message::text_message(text, Role::User).with_id("u-1")]),
            )
            .unwrap();
        start
    }

    fn fold(events: &[Agui]) -> ChatState {
        let mut chat = ChatState::new();
        for event in events {
            chat.apply(event);
        }
        chat
    }

    fn folded(chat: &ChatState) -> Vec<AguiMessage> {
        chat.messages()
            .iter()
            .map(|m| m.message().clone())
            .collect()
    }

    /// The react graph run durably gives the in-memory run's AG-UI events (its commits map to
    /// none) and the state's last change, balanced, and they fold back into the thread's final messages and state.
    #[test]
    fn a_durable_run_gives_the_in_memory_runs_events_balanced() {
        let start = user("Weather and time in Paris?");
        let in_memory: Vec<String> = block_on(async {
            let mut adapter = AguiAdapter::new("t-1", &start, messages_of).unwrap();
            let mut out = Vec::new();
            let mut run = react().stream(start.clone());
            while let Some(event) = run.next().await {
                out.extend(
                    adapter
                        .events(&event)
                        .iter()
                        .map(|e| e.event_type().to_owned()),
                );
            }
            out
        });
        runtime().block_on(async {
            let store = SqliteStore::open_in_memory().unwrap();
            store.create("t-1", start.clone()).await.unwrap();
            let durable = react().durable(&store);
            let mut adapter = AguiAdapter::new("t-1", &start, messages_of).unwrap();
            let (events, kinds) = to_agui(durable.stream("t-1", ()), &mut adapter).await;
            // A commit per step, the last one with the run's end (the state's
            // `ExecutionState` marked completed), in one transaction.
            assert_eq!(
                kinds.iter().filter(|k| **k == "step_committed").count(),
                3,
                "{kinds:?}"
            );
            assert_eq!(kinds.last(), Some(&"run_finished"));
            check_balanced(&events);
            // The same events, and one `STATE_DELTA` more at the end: the run's end marks the
            // state's `ExecutionState` completed.
            let mut expected = in_memory.clone();
            expected.insert(expected.len() - 1, "STATE_DELTA".to_owned());
            let types: Vec<&str> = events.iter().map(|e| e.event_type()).collect();
            assert_eq!(types, expected);
            let end = serde_json::to_value(&events[events.len() - 2]).unwrap();
            assert!(end["delta"].to_string().contains("completed"), "{end}");

            let last = store.load::<AgentState>("t-1").await.unwrap().state;
            let chat = fold(&events);
            assert!(chat.error().is_none(), "{:?}", chat.error());
            assert_eq!(chat.phase(), &Phase::Idle);
            assert_eq!(chat.agent_state(), &serde_json::to_value(&last).unwrap());
            assert_eq!(folded(&chat), messages_to_agui(last.context.iter()));
        });
    }

    /// `model` streams, then `approve` asks while `note` streams a message and finishes; then
    /// `reply` answers.
    fn approval() -> Graph<AgentState> {
        Graph::builder()
            .node("model", |_: Arc<AgentState>, cx: Context| async move {
                cx.text_delta("m-1", "Checking ");
                cx.text_delta("m-1", "your order.");
                let text = Message::text_message("Checking your order.", Role::Assistant);
                Ok::<_, Infallible>(AgentStateUpdate::default().context(vec![text.with_id("m-1")]))
            })
            .node("approve", |_: Arc<AgentState>, cx: Context| async move {
                cx.interrupt(json!({"refund": 30}))?;
                Ok::<_, BoxError>(AgentStateUpdate::default())
            })
            .node("note", |_: Arc<AgentState>, cx: Context| async move {
                cx.text_delta("m-note", "Asking a person.");
                let text = Message::text_message("Asking a person.", Role::Assistant);
                Ok::<_, Infallible>(
                    AgentStateUpdate::default().context(vec![text.with_id("m-note")]),
                )
            })
            .node("reply", |_: Arc<AgentState>, _: Context| async move {
                let text = Message::text_message("Refunded.", Role::Assistant).with_id("m-2");
                Ok::<_, Infallible>(AgentStateUpdate::default().context(vec![text]))
            })
            .entry("model")
            .edges("model", ["approve", "note"])
            .edge("approve", "reply")
            .edge("note", "reply")
            .edge("reply", END)
            .build()
            .unwrap()
    }

    /// A suspended run ends with `RUN_FINISHED` whose outcome carries the question with its
    /// id, what it streamed closed; resumed with the answer (through the same adapter, or a
    /// new one made from the stored state), the rest streams, and the client ends with the
    /// thread's messages and state.
    #[test]
    fn a_suspended_run_ends_with_the_interrupt_outcome_and_resumes() {
        for same_adapter in [true, false] {
            runtime().block_on(async {
                let start = user("Refund my order, please.");
                let store = SqliteStore::open_in_memory().unwrap();
                store.create("t-1", start.clone()).await.unwrap();
                let durable = approval().durable(&store);
                let mut adapter = AguiAdapter::new("t-1", &start, messages_of).unwrap();
                let (asked, kinds) = to_agui(durable.stream("t-1", ()), &mut adapter).await;
                assert_eq!(kinds.last(), Some(&"run_suspended"), "{kinds:?}");
                check_balanced(&asked);
                let Some(Agui::RunFinished(finished)) = asked.last() else {
                    panic!("{asked:?}")
                };
                let Some(RunOutcome::Interrupt { interrupts }) = &finished.outcome else {
                    panic!("{finished:?}")
                };
                let pending = durable.status("t-1").await.unwrap();
                let agentstate_graph::durable::RunStatus::Suspended {
                    interrupts: stored, ..
                } = pending
                else {
                    panic!("{pending:?}")
                };
                assert_eq!(interrupts.len(), 1);
                assert_eq!(interrupts[0]["id"], stored[0].id.as_str());
                assert_eq!(interrupts[0]["reason"], "interrupt");
                assert_eq!(interrupts[0]["metadata"]["node"], "approve");
                assert_eq!(interrupts[0]["metadata"]["payload"], json!({"refund": 30}));
                // The client has what ran: `model`'s message, and `note`'s streamed one.
                let chat = fold(&asked);
                assert!(chat.error().is_none(), "{:?}", chat.error());
                let ids: Vec<&str> = chat.messages().iter().map(|m| m.id()).collect();
                assert_eq!(ids, ["u-1", "m-1", "m-note"]);

                let answers = Answers::new().answer(&stored[0].id, true);
                let mut adapter = if same_adapter {
                    adapter
                } else {
                    let stored = store.load::<AgentState>("t-1").await.unwrap().state;
                    AguiAdapter::new("t-1", &stored, messages_of).unwrap()
                };
                let (rest, kinds) =
                    to_agui(durable.stream_resume("t-1", answers), &mut adapter).await;
                assert_eq!(kinds.last(), Some(&"run_finished"), "{kinds:?}");
                check_balanced(&rest);
                let Some(Agui::RunFinished(finished)) = rest.last() else {
                    panic!("{rest:?}")
                };
                assert_eq!(finished.outcome, None);
                let last = store.load::<AgentState>("t-1").await.unwrap().state;
                let chat = fold(&[asked, rest].concat());
                assert!(chat.error().is_none(), "{:?}", chat.error());
                assert_eq!(chat.agent_state(), &serde_json::to_value(&last).unwrap());
                assert_eq!(folded(&chat), messages_to_agui(last.context.iter()));
                let ids: Vec<String> = last
                    .context
                    .iter()
                    .map(|m| m.message_id.to_string())
                    .collect();
                assert_eq!(ids, ["u-1", "m-1", "m-note", "m-2"]);
            });
        }
    }

    /// A durable stream's error is `RUN_ERROR` with its category: after `RUN_STARTED` when a
    /// node failed, alone when the run could not start.
    #[test]
    fn a_durable_streams_error_is_run_error() {
        runtime().block_on(async {
            let store = SqliteStore::open_in_memory().unwrap();
            let start = AgentState::default();
            let mut adapter = AguiAdapter::new("t-1", &start, messages_of).unwrap();
            let (events, kinds) =
                to_agui(react().durable(&store).stream("none", ()), &mut adapter).await;
            assert_eq!(kinds, ["error"]);
            check_balanced(&events);
            let json = serde_json::to_value(&events).unwrap();
            assert_eq!(json[0]["type"], "RUN_ERROR");
            assert_eq!(json[0]["code"], "thread_not_found");

            let failing = Graph::builder()
                .node("model", |_: Arc<AgentState>, cx: Context| async move {
                    cx.text_delta("m-1", "Let me");
                    Err::<AgentStateUpdate, _>("provider down")
                })
                .entry("model")
                .edge("model", END)
                .build()
                .unwrap();
            store.create("t-1", start.clone()).await.unwrap();
            let (events, _) =
                to_agui(failing.durable(&store).stream("t-1", ()), &mut adapter).await;
            check_balanced(&events);
            let json = serde_json::to_value(&events).unwrap();
            let json = json.as_array().unwrap();
            assert_eq!(json[0]["type"], "RUN_STARTED");
            let last = json.last().unwrap();
            assert_eq!(last["type"], "RUN_ERROR");
            assert_eq!(last["code"], "node_exception");
            assert_eq!(
                last["message"],
                "node `model` failed in step 1: provider down"
            );
            // The client keeps what was streamed, marked cut short.
            let chat = fold(&events);
            assert_eq!(chat.phase(), &Phase::Error);
        });
    }

    /// A streamed run in `Exit` (or `Async`) mode commits its steps when it ends, and its
    /// stream says so: a `StepCommitted` with the thread's final version before `RunFinished`.
    #[test]
    fn an_exit_mode_stream_says_what_it_committed() {
        for mode in [Durability::Exit, Durability::Async] {
            runtime().block_on(async {
                let start = user("Weather and time in Paris?");
                let store = SqliteStore::open_in_memory().unwrap();
                store.create("t-1", start.clone()).await.unwrap();
                let durable = react().durable(&store).durability(mode);
                let mut versions = Vec::new();
                let mut run = durable.stream("t-1", ());
                while let Some(event) = run.next().await {
                    if let Event::StepCommitted { version, .. } = event.unwrap() {
                        versions.push(version);
                    }
                }
                let version = store.info("t-1").await.unwrap().version;
                assert_eq!(versions.last(), Some(&version), "{mode:?}: {versions:?}");
            });
        }
    }
}
