//! A model call on the graph runner, with the `client` feature's HTTP clients: the model node
//! builds its request from the context view and calls `cx.complete`, which streams the answer
//! (the text and tool-call deltas go to the run's event stream as they arrive) and merges the
//! finished message into the state. A stand-in `get_weather` tool answers the model's tool
//! calls, and the model is called again until it answers in text. The run is printed as it
//! goes, from its AG-UI events: the answer as it is written, the tool calls, the usage.
//!
//! With a provider's key in the environment it calls that provider; without one it answers
//! with a `ScriptedModel` (a tool call, then a text) and says what it would have done:
//!
//! ```text
//! OPENAI_API_KEY=sk-... cargo run --example model_call --features ag-ui,client -- "What's the weather in Paris?"
//! ANTHROPIC_API_KEY=sk-ant-... cargo run --example model_call --features ag-ui,client
//! GEMINI_API_KEY=... cargo run --example model_call --features ag-ui,client
//! # any OpenAI-compatible server (vLLM, Ollama, LM Studio...), with or without a key:
//! OPENAI_BASE_URL=http://localhost:11434/v1 MODEL=llama3.2 cargo run --example model_call --features ag-ui,client
//! cargo run --example model_call --features ag-ui,client   # no key: the scripted model
//! ```
//!
//! `MODEL` picks the model. `tests/model_call_example.rs` runs [`run`] against a local server
//! that plays back recorded OpenAI streams, and with the scripted model.

use agentstate::agui::Event as Agui;
use agentstate::context::{ContextIndex, ContextWindow};
use agentstate::message::{Message, Role, ToolCall};
use agentstate::model::{Anthropic, ChatModel, Gemini, OpenAiChat, ScriptedModel};
use agentstate::providers::{ModelRequest, Tool};
use agentstate::state::{AgentState, AgentStateUpdate};
use agentstate::State;
use agentstate_graph::agui::AguiAdapter;
use agentstate_graph::{node_names, Context, Event, Graph, Routes, Target, END};
use futures_util::StreamExt;
use serde_json::{json, Value};
use std::convert::Infallible;
use std::sync::{Arc, Mutex};

/// The error of this example: one readable sentence.
pub type Error = Box<dyn std::error::Error + Send + Sync>;

node_names! {
    /// The agent's nodes.
    enum Step {
        Model = "model",
        Tools = "tools",
    }
}

/// The model to call and how it was chosen.
pub struct Setup {
    /// The client (or the scripted model).
    pub model: Arc<dyn ChatModel>,
    /// The model's name, for the request.
    pub model_name: String,
    /// What was chosen, for the reader.
    pub description: String,
}

impl Setup {
    /// Reads the environment through `var`: `OPENAI_API_KEY` or `OPENAI_BASE_URL` (OpenAI Chat,
    /// or a compatible server), then `ANTHROPIC_API_KEY`, then `GEMINI_API_KEY` or
    /// `GOOGLE_API_KEY`; `MODEL` names the model. Without any, a scripted model.
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Result<Self, Error> {
        let get = |name: &str| var(name).filter(|v| !v.trim().is_empty());
        let model_or = |default: &str| get("MODEL").unwrap_or_else(|| default.to_owned());
        let (openai_key, openai_base) = (get("OPENAI_API_KEY"), get("OPENAI_BASE_URL"));
        if openai_key.is_some() || openai_base.is_some() {
            let mut builder = OpenAiChat::builder();
            if let Some(base) = &openai_base {
                builder = builder.base_url(base);
            }
            builder = match openai_key {
                Some(key) => builder.api_key(key),
                None => builder.no_key(),
            };
            let base = openai_base
                .as_deref()
                .unwrap_or("https://api.openai.com/v1");
            return Ok(Setup {
                model: Arc::new(builder.build()?),
                model_name: model_or("gpt-4.1-mini"),
                description: format!("OpenAI Chat Completions at {base}"),
            });
        }
        if let Some(key) = get("ANTHROPIC_API_KEY") {
            return Ok(Setup {
                model: Arc::new(Anthropic::builder().api_key(key).build()?),
                model_name: model_or("claude-sonnet-4-5"),
                description: "Anthropic Messages".into(),
            });
        }
        if let Some(key) = get("GEMINI_API_KEY").or_else(|| get("GOOGLE_API_KEY")) {
            return Ok(Setup {
                model: Arc::new(Gemini::builder().api_key(key).build()?),
                model_name: model_or("gemini-2.5-flash"),
                description: "Gemini".into(),
            });
        }
        Ok(Setup {
            model: Arc::new(scripted()),
            model_name: model_or("gpt-4.1-mini"),
            description: "a scripted model (no OPENAI_API_KEY, ANTHROPIC_API_KEY, GEMINI_API_KEY \
                          or OPENAI_BASE_URL is set: with one, the same run calls that provider)"
                .into(),
        })
    }
}

/// What the example answers without a provider: a call of the tool, then a text.
pub fn scripted() -> ScriptedModel {
    ScriptedModel::new([
        Message::text_message("", Role::Assistant)
            .with_id("scripted-1")
            .with_tool_calls(vec![ToolCall::new(
                "call_1",
                "get_weather",
                json!({"location": "Paris, France"}),
            )]),
        Message::text_message("It is sunny in Paris today, 24 °C.", Role::Assistant)
            .with_id("scripted-2"),
    ])
    .chunk_size(6)
}

/// The request's parameters: the model and the one tool, defined once for every call.
fn model_request(model: &str) -> Result<ModelRequest, Error> {
    let weather = Tool::new(
        "get_weather",
        "The current weather in a place.",
        json!({
            "type": "object",
            "properties": {"location": {"type": "string", "description": "City and country"}},
            "required": ["location"],
        }),
    );
    // Anthropic requires a maximum; the others take it too.
    Ok(ModelRequest::builder(model)
        .tool(weather)
        .max_output_tokens(1024)
        .build()?)
}

/// The model node: the context view (the last 40 messages, tool calls kept with their
/// results) sent with `cx.complete`, which streams the answer's deltas into the run's events;
/// the answer merged into the state.
fn model(
    model: Arc<dyn ChatModel>,
    name: &str,
) -> Result<impl agentstate_graph::Node<AgentState>, Error> {
    let request = Arc::new(model_request(name)?);
    let index = Arc::new(Mutex::new(ContextIndex::default()));
    Ok(move |state: Arc<AgentState>, cx: Context| {
        let (request, model, index) =
            (Arc::clone(&request), Arc::clone(&model), Arc::clone(&index));
        async move {
            let messages: Vec<Message> = {
                let mut index = index.lock().map_err(|_| "the context index is poisoned")?;
                let view = index.view_state(&state, &ContextWindow::messages(40))?;
                view.messages()
                    .into_iter()
                    .map(|m| m.into_owned())
                    .collect()
            };
            let answer = cx.complete(&model, &request, &messages).await?;
            Ok::<_, Error>(AgentStateUpdate::default().context(vec![answer]))
        }
    })
}

/// The stand-in tool: answers every call of the model's last message.
async fn tools(state: Arc<AgentState>, _: Context) -> Result<AgentStateUpdate, Infallible> {
    let calls = state
        .context
        .iter()
        .last()
        .map(Message::tool_calls)
        .unwrap_or_default();
    let results: Vec<Message> = calls
        .iter()
        .map(|call| {
            let place: Value = serde_json::from_str(&call.function.arguments).unwrap_or_default();
            let place = place["location"].as_str().unwrap_or("there");
            Message::tool_result(call.id.clone(), format!("{place}: sunny, 24 °C"))
                .with_id(format!("result-{}", call.id))
        })
        .collect();
    Ok(AgentStateUpdate::default().context(results))
}

/// Runs the agent on `question`, handing each AG-UI event to `on_event` as it comes; the final
/// state, or the run's error.
pub async fn run(
    model_client: Arc<dyn ChatModel>,
    model_name: &str,
    question: &str,
    mut on_event: impl FnMut(&Agui),
) -> Result<AgentState, Error> {
    let graph = Graph::builder()
        .node(Step::Model, model(model_client, model_name)?)
        .node(Step::Tools, tools)
        .entry(Step::Model)
        .route_to(
            Step::Model,
            [Target::Node(Step::Tools), Target::End],
            |s: &AgentState| {
                let calls = s
                    .context
                    .iter()
                    .last()
                    .is_some_and(|m| !m.tool_calls().is_empty());
                if calls {
                    Routes::from(Step::Tools)
                } else {
                    Routes::from(END)
                }
            },
        )
        .edge(Step::Tools, Step::Model)
        .build()?;

    let mut start = AgentState::default();
    start.merge(AgentStateUpdate::default().context(vec![
        Message::text_message(question, Role::User).with_id("msg-user"),
    ]))?;
    let mut adapter = AguiAdapter::new("thread-1", &start, |s: &AgentState| s.context.as_slice())?;
    let mut run = graph.stream(start);
    let mut outcome = None;
    while let Some(event) = run.next().await {
        for agui in adapter.events(&event) {
            on_event(&agui);
        }
        match event {
            Event::RunFinished { state } => {
                outcome = Some(Ok(std::sync::Arc::unwrap_or_clone(state)))
            }
            Event::RunFailed { error } => outcome = Some(Err(error.to_string().into())),
            _ => {}
        }
    }
    outcome.unwrap_or_else(|| Err("the run ended without an outcome".into()))
}

/// Prints an AG-UI event as a reader would like it: the answer as it is written, the tool
/// calls and their results, the end of the run.
fn print_event(event: &Agui) {
    use std::io::Write;
    let value = serde_json::to_value(event).unwrap_or(Value::Null);
    let field = |key: &str| value[key].as_str().unwrap_or_default().to_owned();
    match event.event_type() {
        "TEXT_MESSAGE_START" => print!("assistant: "),
        "TEXT_MESSAGE_CONTENT" => print!("{}", field("delta")),
        "TEXT_MESSAGE_END" => println!(),
        "TOOL_CALL_START" => print!("assistant calls {}(", field("toolCallName")),
        "TOOL_CALL_ARGS" => print!("{}", field("delta")),
        "TOOL_CALL_END" => println!(")"),
        "TOOL_CALL_RESULT" => println!("tool: {}", field("content")),
        "RUN_ERROR" => println!("the run failed: {}", field("message")),
        _ => {}
    }
    let _ = std::io::stdout().flush();
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Error> {
    let setup = Setup::from_vars(|name| std::env::var(name).ok())?;
    let question = std::env::args().nth(1);
    let question = question
        .as_deref()
        .unwrap_or("What's the weather like in Paris today?");
    println!("model: {} on {}", setup.model_name, setup.description);
    println!("user: {question}");
    let state = run(setup.model, &setup.model_name, question, print_event).await?;
    let usage = state
        .context
        .iter()
        .filter_map(|m| m.usages.as_deref())
        .fold((0, 0), |(i, o), u| {
            (i + u.prompt_tokens, o + u.completion_tokens)
        });
    println!(
        "{} messages; {} input and {} output tokens",
        state.context.len(),
        usage.0,
        usage.1
    );
    Ok(())
}
