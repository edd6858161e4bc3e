//! The `model_call` example against a local server on 127.0.0.1 that plays back recorded
//! OpenAI Chat streams (`tests/data/streams/`) as `text/event-stream`, split into small chunks:
//! the final message is the recorded answer, the AG-UI events fold back into the run's
//! messages, and the requests carry the model, the tool, `stream: true` and the conversation.
//! Without a provider's key, the example runs with its scripted model.

#[allow(dead_code)]
#[path = "../examples/model_call.rs"]
mod model_call;

use agentstate::agui::{ChatState, Event as Agui};
use agentstate::message::{Message, Role};
use agentstate::model::{ChatModel, OpenAiChat};
use agentstate::providers::from_openai_chat;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::{Bytes, Frame, Incoming};
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use model_call::Setup;
use serde_json::Value;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::{JoinHandle, JoinSet};

/// What the server saw of one request.
#[derive(Debug, Clone)]
struct Seen {
    path: String,
    authorization: String,
    body: Value,
}

/// A server that answers its n-th request with the n-th recorded stream (then with HTTP 500).
struct PlaybackServer {
    addr: SocketAddr,
    seen: Arc<Mutex<Vec<Seen>>>,
    task: JoinHandle<()>,
}

fn recorded(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/streams")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

/// The recorded answer: what `from_openai_chat` reads from the non-streamed body, without its
/// `raw` (a streamed message's is the response assembled from the events, which lacks the
/// fields no event carries, such as `annotations: []`).
fn recorded_answer(name: &str) -> Message {
    let body: Value = serde_json::from_str(&recorded(&format!("{name}.json"))).expect("JSON");
    without_raw(&from_openai_chat(&body).expect("a Chat response").message)
}

/// The message without what differs between two reads of one answer: `raw` and the id (each
/// read gives the message a fresh one; the response's id is in its metadata).
fn without_raw(message: &Message) -> Message {
    let mut message = message.clone();
    message.raw = None;
    message.message_id = "read".into();
    message
}

type Body = BoxBody<Bytes, Infallible>;

async fn answer(
    req: Request<Incoming>,
    streams: Arc<Vec<String>>,
    seen: Arc<Mutex<Vec<Seen>>>,
) -> Result<Response<Body>, Infallible> {
    let path = req.uri().path().to_owned();
    let authorization = req
        .headers()
        .get(hyper::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let bytes = match req.into_body().collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(_) => Bytes::new(),
    };
    let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    let n = {
        let mut seen = seen.lock().expect("the log");
        seen.push(Seen {
            path,
            authorization,
            body,
        });
        seen.len() - 1
    };
    let Some(stream) = streams.get(n) else {
        let error = r#"{"error":{"message":"no more recorded streams","type":"server_error"}}"#;
        return Ok(Response::builder()
            .status(500)
            .header("content-type", "application/json")
            .body(Full::new(Bytes::from(error)).boxed())
            .expect("a response"));
    };
    // Small chunks that split events, lines and UTF-8 sequences anywhere.
    let chunks: Vec<Result<Frame<Bytes>, Infallible>> = stream
        .as_bytes()
        .chunks(61)
        .map(|c| Ok(Frame::data(Bytes::copy_from_slice(c))))
        .collect();
    Ok(Response::builder()
        .header("content-type", "text/event-stream")
        .header("cache-control", "no-cache")
        .body(StreamBody::new(futures_util::stream::iter(chunks)).boxed())
        .expect("a response"))
}

impl PlaybackServer {
    /// Listens on an ephemeral port of 127.0.0.1 and plays `streams` (files of
    /// `tests/data/streams/`) in order.
    async fn start(streams: &[&str]) -> Self {
        let streams: Arc<Vec<String>> = Arc::new(streams.iter().map(|s| recorded(s)).collect());
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a local port");
        let addr = listener.local_addr().expect("its address");
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = Arc::clone(&seen);
        let task = tokio::spawn(async move {
            // Dropped with the task: aborting the task closes every connection.
            let mut connections = JoinSet::new();
            while let Ok((tcp, _)) = listener.accept().await {
                let (streams, log) = (Arc::clone(&streams), Arc::clone(&log));
                let service = hyper::service::service_fn(move |req| {
                    answer(req, Arc::clone(&streams), Arc::clone(&log))
                });
                connections.spawn(async move {
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(tcp), service)
                        .await;
                });
            }
        });
        PlaybackServer { addr, seen, task }
    }

    /// An OpenAI Chat client of this server (no retries: a 500 is the test's answer).
    fn client(&self) -> Arc<dyn ChatModel> {
        let client = OpenAiChat::builder()
            .base_url(format!("http://{}/v1/", self.addr))
            .api_key("sk-test")
            .max_retries(0)
            .build()
            .expect("a client");
        Arc::new(client)
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().expect("the log").clone()
    }

    /// Stops the server and checks that its port no longer answers.
    async fn shut_down(self) {
        self.task.abort();
        let _ = self.task.await;
        assert!(
            TcpStream::connect(self.addr).await.is_err(),
            "the server at {} still accepts connections",
            self.addr
        );
    }
}

/// Runs the example's agent against `server`, folding its AG-UI events as a client would.
async fn run(
    server: &PlaybackServer,
    question: &str,
) -> (
    Result<agentstate::state::AgentState, String>,
    Vec<Agui>,
    ChatState,
) {
    run_with(server.client(), "gpt-4.1", question).await
}

/// Runs the example's agent with `model`, folding its AG-UI events as a client would.
async fn run_with(
    model: Arc<dyn ChatModel>,
    model_name: &str,
    question: &str,
) -> (
    Result<agentstate::state::AgentState, String>,
    Vec<Agui>,
    ChatState,
) {
    let mut events = Vec::new();
    let mut chat = ChatState::new();
    let outcome = model_call::run(model, model_name, question, |event| {
        chat.apply(event);
        events.push(event.clone());
    })
    .await
    .map_err(|e| e.to_string());
    (outcome, events, chat)
}

fn count(events: &[Agui], kind: &str) -> usize {
    events.iter().filter(|e| e.event_type() == kind).count()
}

#[tokio::test]
async fn a_text_answer_streams_into_the_state_and_the_agui_events() {
    let server = PlaybackServer::start(&["openai_chat_text.sse"]).await;
    let (outcome, events, chat) = run(&server, "Hello!").await;
    let state = outcome.expect("the run finishes");
    let seen = server.seen();
    server.shut_down().await;

    // The final message is the recorded answer, usage and id included.
    let expected = recorded_answer("openai_chat_text");
    assert_eq!(state.context.len(), 2);
    let answer = state.context.iter().last().expect("an answer");
    assert_eq!(without_raw(answer), expected);
    let raw = answer.raw.as_ref().expect("the assembled response");
    assert_eq!(
        raw.get("id"),
        Some(Value::from("chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT"))
    );
    let choices = raw.get("choices").expect("choices");
    assert_eq!(choices[0]["message"]["content"], expected.text());
    assert_eq!(expected.text(), "Hello! How can I assist you today?");

    // It was streamed (one content event per text delta), and the client's fold gives it back.
    assert_eq!(count(&events, "TEXT_MESSAGE_CONTENT"), 9);
    assert_eq!(count(&events, "RUN_FINISHED"), 1);
    let folded = chat.to_messages();
    assert_eq!(folded.len(), 2);
    assert_eq!(folded[1].role, Role::Assistant);
    assert_eq!(folded[1].message_id, answer.message_id);
    assert_eq!(folded[1].text(), expected.text());

    // One request: the model, the tool defined once, streaming on, the question.
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].path, "/v1/chat/completions");
    assert_eq!(seen[0].authorization, "Bearer sk-test");
    let body = &seen[0].body;
    assert_eq!(body["model"], "gpt-4.1");
    assert_eq!(body["stream"], true);
    assert_eq!(body["stream_options"]["include_usage"], true);
    assert_eq!(body["tools"][0]["function"]["name"], "get_weather");
    assert_eq!(
        body["messages"],
        serde_json::json!([{"role": "user", "content": "Hello!"}])
    );
}

#[tokio::test]
async fn tool_calls_are_answered_and_the_model_called_again() {
    let server = PlaybackServer::start(&["openai_chat_tools.sse", "openai_chat_text.sse"]).await;
    let (outcome, events, chat) = run(&server, "What's the weather in Paris and Bogotá?").await;
    let state = outcome.expect("the run finishes");
    let seen = server.seen();
    server.shut_down().await;

    // user, the two calls, their two results, the answer.
    let messages: Vec<&Message> = state.context.iter().collect();
    assert_eq!(messages.len(), 5);
    assert_eq!(
        without_raw(messages[1]),
        recorded_answer("openai_chat_tools")
    );
    let calls = messages[1].tool_calls();
    assert_eq!(calls.len(), 2);
    assert_eq!(
        calls[1].function.arguments,
        r#"{"location":"Bogotá, Colombia"}"#
    );
    assert_eq!(messages[3].text(), "Bogotá, Colombia: sunny, 24 °C");
    assert_eq!(
        without_raw(messages[4]),
        recorded_answer("openai_chat_text")
    );

    // The calls were streamed as they came; the client's fold has every message.
    assert_eq!(count(&events, "TOOL_CALL_START"), 2);
    assert!(count(&events, "TOOL_CALL_ARGS") > 2);
    let folded = chat.to_messages();
    assert_eq!(folded.len(), 5);
    assert_eq!(folded[1].tool_calls(), calls);
    assert_eq!(folded[4].text(), messages[4].text());
    assert_eq!(folded[4].message_id, messages[4].message_id);

    // The second request carries the calls and their results.
    assert_eq!(seen.len(), 2);
    let sent = &seen[1].body["messages"];
    let roles: Vec<&str> = sent
        .as_array()
        .expect("messages")
        .iter()
        .map(|m| m["role"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(roles, ["user", "assistant", "tool", "tool"]);
    assert_eq!(sent[1]["tool_calls"][0]["id"], calls[0].id.as_str());
    assert_eq!(sent[2]["tool_call_id"], calls[0].id.as_str());
}

#[tokio::test]
async fn an_http_error_fails_the_run_with_the_status() {
    let server = PlaybackServer::start(&[]).await;
    let (outcome, events, _) = run(&server, "Hello!").await;
    let addr = server.addr;
    server.shut_down().await;
    let error = outcome.expect_err("the run fails");
    let _ = addr;
    assert!(
        error.contains("OpenAI Chat failed on its side (HTTP 500): no more recorded streams"),
        "{error}"
    );
    assert_eq!(count(&events, "RUN_ERROR"), 1);
}

#[test]
fn the_environment_picks_the_provider() {
    let setup = Setup::from_vars(|_| None).expect("the scripted model");
    assert!(
        setup.description.starts_with("a scripted model"),
        "{}",
        setup.description
    );
    let setup = Setup::from_vars(|name| (name == "ANTHROPIC_API_KEY").then(|| "sk-ant-x".into()))
        .expect("Anthropic");
    assert_eq!(
        (setup.model_name.as_str(), setup.description.as_str()),
        ("claude-sonnet-4-5", "Anthropic Messages")
    );
    let setup = Setup::from_vars(|name| match name {
        "OPENAI_BASE_URL" => Some("http://localhost:11434/v1".into()),
        "MODEL" => Some("llama3.2".into()),
        _ => None,
    })
    .expect("a local server without a key");
    assert_eq!(setup.model_name, "llama3.2");
    assert_eq!(
        setup.description,
        "OpenAI Chat Completions at http://localhost:11434/v1"
    );
    let error = Setup::from_vars(|name| (name == "OPENAI_BASE_URL").then(|| "nowhere".into()))
        .err()
        .expect("a bad URL");
    assert!(
        error
            .to_string()
            .contains("the base URL `nowhere` is not a URL"),
        "{error}"
    );
}

#[tokio::test]
async fn without_a_key_the_scripted_model_answers() {
    let (outcome, events, chat) =
        run_with(Arc::new(model_call::scripted()), "gpt-4.1", "Weather?").await;
    let state = outcome.expect("the run finishes");
    // user, the call, its result, the answer.
    let messages: Vec<&Message> = state.context.iter().collect();
    assert_eq!(messages.len(), 4);
    assert_eq!(messages[1].tool_calls()[0].function.name, "get_weather");
    assert_eq!(messages[2].text(), "Paris, France: sunny, 24 °C");
    assert_eq!(messages[3].text(), "It is sunny in Paris today, 24 °C.");
    assert!(
        count(&events, "TEXT_MESSAGE_CONTENT") > 1,
        "the answer was streamed in pieces"
    );
    assert_eq!(chat.to_messages()[3].text(), messages[3].text());
}
