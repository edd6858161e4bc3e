//! A real model call on the graph runner: the model node builds its request from the context
//! view, sends it to an OpenAI-compatible Chat Completions endpoint with `stream: true`, reads
//! the server-sent events through `OpenAiChatStream` as they arrive, emits the text and
//! tool-call deltas to the run's stream, and merges the finished message into the state. A
//! stand-in `get_weather` tool answers the model's tool calls, and the model is called again
//! until it answers in text. The run is printed as AG-UI events as it goes (one JSON per
//! line on stdout), the answer on stderr.
//!
//! Run it against a real endpoint (any OpenAI-compatible server: OpenAI, a vLLM or Ollama
//! server's `/v1`...):
//!
//! ```text
//! OPENAI_BASE_URL=https://api.openai.com/v1 OPENAI_API_KEY=sk-... MODEL=gpt-4.1-mini \
//!     cargo run --example model_call --features ag-ui -- "What's the weather in Paris?"
//! ```
//!
//! `tests/model_call_example.rs` runs [`run`] against a local server that plays back recorded
//! OpenAI streams.

use agentstate::agui::Event as Agui;
use agentstate::context::{ContextIndex, ContextWindow};
use agentstate::message::{Message, Role};
use agentstate::providers::stream::{Delta, OpenAiChatStream, Sse};
use agentstate::providers::{ModelRequest, Tool};
use agentstate::state::{AgentState, AgentStateUpdate};
use agentstate::State;
use agentstate_graph::agui::AguiAdapter;
use agentstate_graph::{node_names, Context, Emitted, Event, Graph, Routes, Target, END};
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

/// Where the model is: an OpenAI-compatible base URL, its key and the model's name.
#[derive(Debug, Clone)]
pub struct Endpoint {
    /// The base URL, e.g. `https://api.openai.com/v1` (the request goes to `{base}/chat/completions`).
    pub base_url: String,
    /// The API key, sent as a bearer token.
    pub api_key: String,
    /// The model, e.g. `gpt-4.1-mini`.
    pub model: String,
}

impl Endpoint {
    /// Reads `OPENAI_BASE_URL`, `OPENAI_API_KEY` and `MODEL` from the environment.
    pub fn from_env() -> Result<Self, Error> {
        Self::from_vars(|name| std::env::var(name).ok())
    }

    /// Reads the three variables through `var`; an error names the first one missing or empty.
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Result<Self, Error> {
        let get = |name: &str| {
            var(name).filter(|v| !v.trim().is_empty()).ok_or_else(|| {
                format!(
                    "the environment variable {name} is not set; the example needs OPENAI_BASE_URL \
                     (e.g. https://api.openai.com/v1), OPENAI_API_KEY and MODEL (e.g. gpt-4.1-mini)"
                )
            })
        };
        Ok(Endpoint {
            base_url: get("OPENAI_BASE_URL")?,
            api_key: get("OPENAI_API_KEY")?,
            model: get("MODEL")?,
        })
    }
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
    Ok(ModelRequest::builder(model).tool(weather).build()?)
}

/// Sends one streamed Chat Completions request and reads the answer as it comes: each text or
/// tool-call delta goes to the run's stream, and the finished message is returned.
pub async fn call_model(
    client: &reqwest::Client,
    endpoint: &Endpoint,
    body: &Value,
    cx: &Context,
) -> Result<Message, Error> {
    let url = format!(
        "{}/chat/completions",
        endpoint.base_url.trim_end_matches('/')
    );
    let mut response = client
        .post(&url)
        .bearer_auth(&endpoint.api_key)
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .body(serde_json::to_vec(body)?)
        .send()
        .await
        .map_err(|e| format!("cannot send the model request to {url}: {e}"))?;
    let status = response.status();
    if !status.is_success() {
        let text = response.text().await.unwrap_or_default();
        let text: String = text.chars().take(300).collect();
        return Err(format!("the model endpoint {url} answered {status}: {text}").into());
    }
    let mut stream = Sse::new(OpenAiChatStream::new());
    let mut deltas = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|e| format!("the model's stream from {url} broke off: {e}"))?
    {
        stream.push(&chunk, &mut deltas)?;
        for delta in deltas.drain(..) {
            match delta {
                Delta::Text { message_id, delta } => cx.text_delta(message_id, delta),
                Delta::ToolCall {
                    message_id,
                    tool_call_id,
                    name,
                    delta,
                } => cx.emit(Emitted::ToolCallDelta {
                    message_id,
                    tool_call_id,
                    name,
                    delta,
                }),
                // The runner has no reasoning event.
                Delta::Reasoning { .. } => {}
            }
        }
    }
    Ok(stream.finish()?.message)
}

/// The model node: the context view (the last 40 messages, tool calls kept with their
/// results) as a typed Chat body with `stream: true`, sent, its answer merged into the state.
fn model(endpoint: Endpoint) -> Result<impl agentstate_graph::Node<AgentState>, Error> {
    let request = Arc::new(model_request(&endpoint.model)?);
    let endpoint = Arc::new(endpoint);
    // TLS through rustls with its `ring` provider (installed once per process).
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = reqwest::Client::new();
    let index = Arc::new(Mutex::new(ContextIndex::default()));
    Ok(move |state: Arc<AgentState>, cx: Context| {
        let (request, endpoint, client, index) = (
            Arc::clone(&request),
            Arc::clone(&endpoint),
            client.clone(),
            Arc::clone(&index),
        );
        async move {
            let mut body = {
                let mut index = index.lock().map_err(|_| "the context index is poisoned")?;
                let view = index.view_state(&state, &ContextWindow::messages(40))?;
                let messages: Vec<Message> = view
                    .messages()
                    .into_iter()
                    .map(|m| m.into_owned())
                    .collect();
                let converted = request.to_openai_chat(&messages)?;
                if !converted.report.is_empty() {
                    // What the provider could not take of the conversation (a video...).
                    eprintln!("[model call {}] {}", cx.step(), converted.report);
                }
                serde_json::to_value(converted.request)?
            };
            body["stream"] = json!(true);
            body["stream_options"] = json!({"include_usage": true});
            let answer = call_model(&client, &endpoint, &body, &cx).await?;
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
    endpoint: Endpoint,
    question: &str,
    mut on_event: impl FnMut(&Agui),
) -> Result<AgentState, Error> {
    let graph = Graph::builder()
        .node(Step::Model, model(endpoint)?)
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

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Error> {
    let endpoint = Endpoint::from_env()?;
    let question = std::env::args().nth(1);
    let question = question
        .as_deref()
        .unwrap_or("What's the weather like in Paris today?");
    let state = run(endpoint, question, |event| {
        println!(
            "{}",
            serde_json::to_string(event).expect("an AG-UI event serializes")
        );
    })
    .await?;
    if let Some(answer) = state.context.iter().last() {
        eprintln!("answer: {}", answer.text());
    }
    Ok(())
}
