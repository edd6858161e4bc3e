//! The prebuilt agent: tools_condition, the ReAct agent's loop, approval before a tool
//! (approve, edit, reject, a bad answer asked again) in a durable run on SQLite, the recursion
//! limit, the structured final answer, the context window and the streamed deltas.

use agentstate::context::ContextWindow;
use agentstate::message::{Message, Role, ToolCall};
use agentstate::model::ScriptedModel;
use agentstate::providers::ModelRequest;
use agentstate::state::{AgentState, AgentStateUpdate};
use agentstate::State;
use agentstate_graph::durable::{Answers, Outcome};
use agentstate_graph::prebuilt::{
    structured_answer, tools_condition, ApprovalRequest, Decision, Decisions, ReactAgent,
};
use agentstate_graph::{BoxError, Context, Emitted, Event, Graph, Interrupt, Target, ToolSet};
use agentstate_store::SqliteStore;
use futures_util::StreamExt;
use serde_json::{json, Value};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// The weather in a city today.
#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Weather {
    city: String,
}

/// Refunds an order.
#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Refund {
    order: String,
    cents: u64,
}

/// Two tools; `refund` counts its payments (an effect: once per call).
fn tools(paid: &Arc<AtomicUsize>) -> ToolSet {
    let paid = Arc::clone(paid);
    ToolSet::new()
        .tool("get_weather", |w: Weather, _: Context| async move {
            Ok::<_, BoxError>(format!("sunny in {}", w.city))
        })
        .tool("refund", move |r: Refund, cx: Context| {
            let paid = Arc::clone(&paid);
            async move {
                let receipt: String = cx
                    .effect("pay", |_key| async move {
                        let n = paid.fetch_add(1, Ordering::SeqCst) + 1;
                        Ok::<_, std::io::Error>(format!("R-{n}"))
                    })
                    .await?;
                Ok::<_, BoxError>(format!(
                    "refunded {} cents for order {} ({receipt})",
                    r.cents, r.order
                ))
            }
        })
}

fn ask(calls: Vec<ToolCall>) -> Message {
    Message::text_message("", Role::Assistant).with_tool_calls(calls)
}

fn say(text: &str) -> Message {
    Message::text_message(text, Role::Assistant)
}

fn question(text: &str) -> AgentState {
    let mut state = AgentState::default();
    state
        .merge(AgentStateUpdate::default().context(vec![Message::text_message(text, Role::User)]))
        .unwrap();
    state
}

fn request() -> agentstate::providers::ModelRequestBuilder {
    ModelRequest::builder("test-model")
}

fn texts(state: &AgentState) -> Vec<String> {
    state.context.iter().map(Message::text).collect()
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap()
}

#[test]
fn tools_condition_routes_on_the_last_message_only() {
    let route = tools_condition::<AgentState, _>("tools", "summarize");
    let mut state = question("hi");
    assert_eq!(route(&state).targets(), [Target::Node("summarize")]);
    state
        .merge(
            AgentStateUpdate::default().context(vec![ask(vec![ToolCall::new(
                "c1",
                "get_weather",
                json!({"city": "Oslo"}),
            )])]),
        )
        .unwrap();
    assert_eq!(route(&state).targets(), [Target::Node("tools")]);
    // A tool result after it: the calls are answered.
    state
        .merge(AgentStateUpdate::default().context(vec![Message::tool_result("c1", "sunny")]))
        .unwrap();
    assert_eq!(route(&state).targets(), [Target::Node("summarize")]);
    // An assistant message with an empty list of calls calls nothing.
    state
        .merge(AgentStateUpdate::default().context(vec![say("done").with_tool_calls(vec![])]))
        .unwrap();
    assert_eq!(route(&state).targets(), [Target::Node("summarize")]);
}

#[test]
fn the_agent_loops_until_the_model_answers_and_sends_what_each_call_needs() {
    let paid = Arc::new(AtomicUsize::new(0));
    let model = ScriptedModel::new([
        ask(vec![
            ToolCall::new("w1", "get_weather", json!({"city": "Oslo"})),
            ToolCall::new("w2", "get_weather", json!({"city": "Bergen"})),
        ]),
        ask(vec![ToolCall::new("w3", "get_forecast", json!({}))]),
        say("Sunny in both."),
    ]);
    let agent = ReactAgent::new(model.clone(), request().temperature(0.0), tools(&paid))
        .system_prompt("Be brief.")
        .build()
        .unwrap();
    let state = runtime()
        .block_on(agent.invoke(question("Weather in Oslo and Bergen?")))
        .unwrap();
    assert_eq!(
        texts(&state),
        [
            "Weather in Oslo and Bergen?",
            "",
            "sunny in Oslo",
            "sunny in Bergen",
            "",
            "Error: get_forecast is not a valid tool, try one of [get_weather, refund].",
            "Sunny in both.",
        ]
    );
    let requests = model.requests();
    assert_eq!(requests.len(), 3);
    for (i, sent) in requests.iter().enumerate() {
        assert_eq!(sent.messages[0].role, Role::System);
        assert_eq!(sent.messages[0].text(), "Be brief.");
        assert_eq!(sent.request.model(), "test-model");
        assert_eq!(sent.request.sampling().temperature, Some(0.0));
        let names: Vec<&str> = sent
            .request
            .tools()
            .iter()
            .map(|t| t.name.as_str())
            .collect();
        assert_eq!(names, ["get_weather", "refund"], "call {i}");
    }
    assert_eq!(requests[2].messages.len(), 7);
}

#[test]
fn a_context_window_chooses_what_each_call_is_sent() {
    let model = ScriptedModel::new([say("Fine.")]);
    let agent = ReactAgent::new(model.clone(), request(), ToolSet::new())
        .system_prompt("Be brief.")
        .window(ContextWindow::turns(1))
        .build()
        .unwrap();
    let mut state = AgentState::default();
    for i in 0..5 {
        state
            .merge(AgentStateUpdate::default().context(vec![
                Message::text_message(format!("question {i}"), Role::User),
                say(&format!("answer {i}")),
            ]))
            .unwrap();
    }
    state
        .merge(
            AgentStateUpdate::default()
                .context(vec![Message::text_message("last question", Role::User)]),
        )
        .unwrap();
    runtime().block_on(agent.invoke(state)).unwrap();
    let sent: Vec<String> = model.requests()[0]
        .messages
        .iter()
        .map(Message::text)
        .collect();
    assert_eq!(sent, ["Be brief.", "last question"]);
}

#[test]
fn the_model_node_streams_its_deltas_into_the_run() {
    let model = ScriptedModel::new([
        ask(vec![ToolCall::new(
            "w1",
            "get_weather",
            json!({"city": "Oslo"}),
        )])
        .with_id("m1"),
        say("Sunny in Oslo.").with_id("m2"),
    ])
    .chunk_size(4);
    let paid = Arc::new(AtomicUsize::new(0));
    let agent = ReactAgent::new(model, request(), tools(&paid))
        .build()
        .unwrap();
    let (text, args) = runtime().block_on(async {
        let mut run = agent.stream(question("Weather?"));
        let (mut text, mut args) = (String::new(), String::new());
        while let Some(event) = run.next().await {
            if let Event::Emitted { emitted, .. } = event {
                match *emitted {
                    Emitted::TextDelta { message_id, delta } => {
                        assert_eq!(message_id, "m2");
                        text.push_str(&delta);
                    }
                    Emitted::ToolCallDelta {
                        message_id,
                        tool_call_id,
                        name,
                        delta,
                    } => {
                        assert_eq!((message_id.as_str(), tool_call_id.as_str()), ("m1", "w1"));
                        assert_eq!(name, "get_weather");
                        args.push_str(&delta);
                    }
                    _ => {}
                }
            }
        }
        (text, args)
    });
    assert_eq!(text, "Sunny in Oslo.");
    assert_eq!(args, r#"{"city": "Oslo"}"#);
}

// ---------------------------------------------------------------------------------------------
// Approval, durable on SQLite.

/// A durable agent on a new SQLite store, asking before `refund`, whose model asks for the
/// weather and a refund at once, then answers `last`.
struct Approving {
    store: SqliteStore,
    graph: Graph<AgentState>,
    model: ScriptedModel,
    paid: Arc<AtomicUsize>,
}

impl Approving {
    fn new(last: &str) -> Self {
        let paid = Arc::new(AtomicUsize::new(0));
        let model = ScriptedModel::new([
            ask(vec![
                ToolCall::new("w1", "get_weather", json!({"city": "Oslo"})),
                ToolCall::new("r1", "refund", json!({"order": "1042", "cents": 4999})),
            ])
            .with_id("ask"),
            say(last),
        ]);
        let graph = ReactAgent::new(model.clone(), request(), tools(&paid))
            .approve(["refund"])
            .build()
            .unwrap();
        Approving {
            store: SqliteStore::open_in_memory().unwrap(),
            graph,
            model,
            paid,
        }
    }

    /// Starts the run on thread `t`: it must wait for the refund's approval.
    async fn start(&self) -> Interrupt {
        let durable = self.graph.durable(&self.store);
        let outcome = durable
            .start("t", question("Refund order 1042, and the weather?"))
            .await
            .unwrap();
        let Outcome::Suspended { interrupts, .. } = outcome else {
            panic!("expected the run to wait for approval, got {outcome:?}");
        };
        assert_eq!(interrupts.len(), 1);
        assert_eq!(
            self.paid.load(Ordering::SeqCst),
            0,
            "nothing paid before approval"
        );
        interrupts.into_iter().next().unwrap()
    }

    async fn answer(&self, asked: &Interrupt, answer: impl Into<Value>) -> Outcome<AgentState> {
        self.graph
            .durable(&self.store)
            .resume_with("t", Answers::new().answer(&asked.id, answer))
            .await
            .unwrap()
    }
}

fn finished(outcome: Outcome<AgentState>) -> AgentState {
    match outcome {
        Outcome::Finished { state, .. } => Arc::unwrap_or_clone(state),
        other => panic!("expected a finished run, got {other:?}"),
    }
}

#[tokio::test]
async fn approval_asks_once_for_the_chosen_tools_and_approve_runs_the_call() {
    let agent = Approving::new("Refunded, and sunny.");
    let asked = agent.start().await;
    assert_eq!(asked.node, "tools");
    let request: ApprovalRequest = serde_json::from_value(asked.payload.clone()).unwrap();
    assert_eq!(
        request.action_requests.len(),
        1,
        "only `refund` needs approval"
    );
    let action = &request.action_requests[0];
    assert_eq!(
        (action.call_id.as_str(), action.name.as_str()),
        ("r1", "refund")
    );
    assert_eq!(action.args, json!({"order": "1042", "cents": 4999}));
    assert_eq!(
        action.description,
        "Tool execution requires approval\n\nTool: refund\nArgs: {\"cents\":4999,\"order\":\"1042\"}"
    );
    assert_eq!(request.error, None);

    let state = finished(agent.answer(&asked, Decisions::approve_all(1)).await);
    assert_eq!(agent.paid.load(Ordering::SeqCst), 1);
    assert_eq!(
        texts(&state)[2..],
        [
            "sunny in Oslo",
            "refunded 4999 cents for order 1042 (R-1)",
            "Refunded, and sunny."
        ]
    );
    let refund = state.context.get(3).unwrap();
    assert_eq!(refund.metadata.get("approval"), Some(json!("approved")));
    assert!(!refund.tool_results().next().unwrap().is_error);
    // The model saw both results.
    assert_eq!(agent.model.requests()[1].messages.len(), 4);
}

#[tokio::test]
async fn approval_edit_runs_the_call_with_the_persons_arguments() {
    let agent = Approving::new("Refunded 20 EUR.");
    let asked = agent.start().await;
    let edit = Decisions::new([Decision::edit(json!({"order": "1042", "cents": 2000}))]);
    let state = finished(agent.answer(&asked, edit).await);
    assert_eq!(agent.paid.load(Ordering::SeqCst), 1);
    let refund = state.context.get(3).unwrap();
    assert_eq!(refund.text(), "refunded 2000 cents for order 1042 (R-1)");
    assert_eq!(refund.metadata.get("approval"), Some(json!("edited")));
    assert_eq!(
        refund.metadata.get("edited_args"),
        Some(json!({"order": "1042", "cents": 2000}))
    );
    // AgentFlow's add_messages keeps the model's message as it was (it never replaces one).
    let original = state.context.get(1).unwrap();
    assert_eq!(
        original.tool_calls()[1].arguments::<Value>().unwrap(),
        json!({"order": "1042", "cents": 4999})
    );
}

#[tokio::test]
async fn approval_reject_gives_the_model_the_persons_message_and_runs_nothing() {
    let agent = Approving::new("I could not refund it.");
    let asked = agent.start().await;
    let reject = Decisions::new([Decision::reject("Refunds over 40 EUR need a manager.")]);
    let state = finished(agent.answer(&asked, reject).await);
    assert_eq!(agent.paid.load(Ordering::SeqCst), 0);
    let refund = state.context.get(3).unwrap();
    assert_eq!(refund.text(), "Refunds over 40 EUR need a manager.");
    let block = refund.tool_results().next().unwrap();
    assert_eq!(block.call_id, "r1");
    assert!(block.is_error);
    assert_eq!(refund.metadata.get("approval"), Some(json!("rejected")));
    // The other call ran.
    assert_eq!(state.context.get(2).unwrap().text(), "sunny in Oslo");

    // Without a message, a sentence naming the call.
    let agent = Approving::new("No refund.");
    let asked = agent.start().await;
    let state = finished(
        agent
            .answer(&asked, json!({"decisions": [{"type": "reject"}]}))
            .await,
    );
    assert_eq!(
        state.context.get(3).unwrap().text(),
        "User rejected the tool call for `refund` with id r1"
    );
}

#[tokio::test]
async fn an_answer_that_does_not_read_is_asked_again_with_what_was_wrong() {
    let agent = Approving::new("Refunded.");
    let asked = agent.start().await;
    let outcome = agent.answer(&asked, json!({"decisions": []})).await;
    let Outcome::Suspended { interrupts, .. } = outcome else {
        panic!("expected the question again, got {outcome:?}");
    };
    let again = &interrupts[0];
    assert_ne!(again.id, asked.id);
    let request: ApprovalRequest = serde_json::from_value(again.payload.clone()).unwrap();
    assert_eq!(
        request.error.as_deref(),
        Some("the answer has 0 decisions for 1 tool calls; give one per call, in order")
    );
    let outcome = agent.answer(again, json!("yes")).await;
    let Outcome::Suspended { interrupts, .. } = outcome else {
        panic!("expected the question again, got {outcome:?}");
    };
    let request: ApprovalRequest = serde_json::from_value(interrupts[0].payload.clone()).unwrap();
    assert!(request
        .error
        .unwrap()
        .starts_with("the answer is not {\"decisions\": [...]}"));
    let state = finished(
        agent
            .answer(&interrupts[0], Decisions::approve_all(1))
            .await,
    );
    assert_eq!(agent.paid.load(Ordering::SeqCst), 1);
    assert_eq!(texts(&state).last().unwrap(), "Refunded.");
}

#[test]
fn approval_outside_a_durable_run_fails_the_run_saying_so() {
    let agent = Approving::new("unused");
    let error = runtime()
        .block_on(agent.graph.invoke(question("Refund?")))
        .unwrap_err();
    assert_eq!(error.category(), "interrupt_outside_durable_run");
    assert_eq!(agent.paid.load(Ordering::SeqCst), 0);
}

#[test]
fn approval_of_a_tool_the_set_does_not_have_is_refused_when_built() {
    let paid = Arc::new(AtomicUsize::new(0));
    let error = ReactAgent::<AgentState>::new(ScriptedModel::new([]), request(), tools(&paid))
        .approve(["refnud"])
        .build()
        .unwrap_err();
    assert_eq!(error.category(), "approval_tool_unknown");
    assert_eq!(
        error.to_string(),
        "approval is asked for tool `refnud`, which the tool set does not have (it has: get_weather, refund)"
    );
}

// ---------------------------------------------------------------------------------------------
// The recursion limit.

/// A model that always asks for the weather.
fn stubborn(n: usize) -> ScriptedModel {
    ScriptedModel::new((0..n).map(|i| {
        ask(vec![ToolCall::new(
            format!("w{i}"),
            "get_weather",
            json!({"city": "Oslo"}),
        )])
    }))
}

#[test]
fn out_of_steps_the_agent_says_sorry_and_the_run_ends() {
    let paid = Arc::new(AtomicUsize::new(0));
    let model = stubborn(10);
    let agent = ReactAgent::new(model.clone(), request(), tools(&paid))
        .recursion_limit(6)
        .build()
        .unwrap();
    let state = runtime()
        .block_on(agent.invoke(question("Weather?")))
        .unwrap();
    // Steps: agent 1, tools 2, agent 3, tools 4, agent 5 (no room for tools 6 and agent 7).
    assert_eq!(model.requests().len(), 3);
    let last = state.context.iter().last().unwrap();
    assert_eq!(
        last.text(),
        "Sorry, need more steps to process this request."
    );
    assert!(!last.has_tool_calls());
    assert_eq!(
        state
            .context
            .iter()
            .filter(|m| m.role == Role::Tool)
            .count(),
        2
    );
}

#[test]
fn a_graph_around_the_agent_still_stops_at_the_limit() {
    // The agent's graph extended with a node that always sends it back: the run needs more
    // steps than the limit and fails, as every graph does.
    let paid = Arc::new(AtomicUsize::new(0));
    let model = ScriptedModel::new((0..10).map(|i| say(&format!("answer {i}"))));
    let graph = ReactAgent::new(model, request(), tools(&paid))
        .recursion_limit(5)
        .then("again")
        .into_builder()
        .unwrap()
        .node("again", |_: Arc<AgentState>, _: Context| async {
            Ok::<_, BoxError>(())
        })
        .edge("again", "agent")
        .build()
        .unwrap();
    let error = runtime()
        .block_on(graph.invoke(question("Hi")))
        .unwrap_err();
    assert_eq!(error.category(), "recursion_limit");
}

// ---------------------------------------------------------------------------------------------
// The structured final answer.

/// The final answer: a city and whether to take an umbrella.
#[derive(serde::Deserialize, serde::Serialize, schemars::JsonSchema, Debug, PartialEq)]
struct Advice {
    city: String,
    umbrella: bool,
}

#[test]
fn a_structured_answer_is_asked_for_last_and_read_typed() {
    let paid = Arc::new(AtomicUsize::new(0));
    let model = ScriptedModel::new([
        ask(vec![ToolCall::new(
            "w1",
            "get_weather",
            json!({"city": "Oslo"}),
        )]),
        say("Sunny: no umbrella."),
        say(r#" {"city": "Oslo", "umbrella": false} "#),
    ]);
    let agent = ReactAgent::new(model.clone(), request(), tools(&paid))
        .structured::<Advice>("advice")
        .build()
        .unwrap();
    let state = runtime()
        .block_on(agent.invoke(question("Umbrella in Oslo?")))
        .unwrap();
    assert_eq!(
        structured_answer::<Advice>(state.context.as_slice())
            .unwrap()
            .unwrap(),
        Advice {
            city: "Oslo".into(),
            umbrella: false
        }
    );
    let requests = model.requests();
    // The last call asks for the schema, without tools; the others offer the tools only.
    let last = &requests[2].request;
    assert_eq!(last.output_schema().unwrap().name, "advice");
    assert_eq!(
        last.output_schema().unwrap().schema["required"],
        json!(["city", "umbrella"])
    );
    assert!(last.tools().is_empty());
    assert!(requests[0].request.output_schema().is_none());
    assert_eq!(requests[0].request.tools().len(), 2);
}

#[test]
fn a_structured_answer_that_does_not_fit_fails_naming_the_type() {
    let paid = Arc::new(AtomicUsize::new(0));
    let model = ScriptedModel::new([say("Sunny."), say(r#"{"city": "Oslo"}"#)]);
    let agent = ReactAgent::new(model, request(), tools(&paid))
        .structured::<Advice>("advice")
        .build()
        .unwrap();
    let error = runtime()
        .block_on(agent.invoke(question("Umbrella?")))
        .unwrap_err();
    assert_eq!(error.category(), "node_exception");
    let message = error.to_string();
    assert!(
        message.contains(
            "node `respond`: the model's structured answer does not read as `Advice`: missing field `umbrella`"
        ),
        "{message}"
    );
}

/// A shop whose client declares tools of its own (AG-UI's frontend tools).
#[derive(
    agentstate::AgentState, Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize,
)]
struct Shop {
    #[reducer(add_messages)]
    messages: Vec<Message>,
    /// The client's tools, as AG-UI declares them.
    tools: Vec<Value>,
}

impl agentstate_graph::prebuilt::MessagesState for Shop {
    fn messages(&self) -> &[Message] {
        &self.messages
    }

    fn frontend_tools(&self) -> Vec<agentstate::providers::Tool> {
        self.tools
            .iter()
            .map(|t| {
                agentstate::providers::Tool::new(
                    t["name"].as_str().unwrap_or_default(),
                    t["description"].as_str().unwrap_or_default(),
                    t["parameters"].clone(),
                )
            })
            .collect()
    }
}

#[test]
fn a_frontend_tool_is_offered_and_its_call_ends_the_run_pending_for_the_client() {
    let paid = Arc::new(AtomicUsize::new(0));
    let model = ScriptedModel::new([
        ask(vec![ToolCall::new(
            "f1",
            "confirm_order",
            json!({"item": "book"}),
        )]),
        say("Ordered."),
        ask(vec![ToolCall::new(
            "w1",
            "get_weather",
            json!({"city": "Oslo"}),
        )]),
        say("Sunny."),
    ]);
    let agent: Graph<Shop> = ReactAgent::new(model.clone(), request(), tools(&paid))
        .build()
        .unwrap();
    let declared = |name: &str| json!({"name": name, "description": "the client's", "parameters": {"type": "object"}});
    let shop = Shop {
        messages: vec![Message::text_message("order a book", Role::User)],
        // One of the client's tools has the name of one of the agent's: the agent's wins.
        tools: vec![declared("confirm_order"), declared("get_weather")],
    };
    let rt = runtime();
    let mut state = rt.block_on(agent.invoke(shop)).unwrap();
    // The run ended at the call, not run, with nothing after it.
    let last = state.messages.last().unwrap();
    assert_eq!(last.tool_calls()[0].function.name, "confirm_order");
    assert_eq!(state.messages.len(), 2);
    let offered: Vec<String> = model.requests()[0]
        .request
        .tools()
        .iter()
        .map(|t| t.name.clone())
        .collect();
    assert_eq!(offered, ["get_weather", "refund", "confirm_order"]);
    // The client ran it: its result comes in, and the agent goes on.
    state.messages.push(Message::tool_result("f1", "yes"));
    let state = rt.block_on(agent.invoke(state)).unwrap();
    assert_eq!(state.messages.last().unwrap().text(), "Ordered.");
    // A call of the agent's own tool (one the client declared too) is run by the agent.
    let mut state = state;
    state
        .messages
        .push(Message::text_message("weather?", Role::User));
    let state = rt.block_on(agent.invoke(state)).unwrap();
    let said: Vec<String> = state.messages.iter().map(Message::text).collect();
    assert_eq!(said[said.len() - 2..], ["sunny in Oslo", "Sunny."]);
    // One model call per answer: the pending call was not answered by the agent.
    assert_eq!(model.requests().len(), 4);
}
