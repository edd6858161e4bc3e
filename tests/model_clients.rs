//! The HTTP clients of `agentstate::model` (feature `client`) against a local server on
//! 127.0.0.1 that plays back recorded provider streams (`tests/data/streams/`) and real error
//! bodies (`tests/data/model_errors/`, sources in its README): what each client sends (path,
//! key header, stream flags, body), the deltas then the final message with its usage, the
//! retries (`Retry-After`, `retry-after-ms`, 529), each error category, a stream cut short, a
//! timeout, and that dropping the stream closes the connection.

use agentstate::message::{Message, Role};
use agentstate::model::{
    Anthropic, ChatModel, Gemini, ModelError, ModelEvent, OpenAiChat, OpenAiResponses,
};
use agentstate::providers::stream::Delta;
use agentstate::providers::{
    from_anthropic, from_gemini, from_openai_chat, from_openai_responses, ModelRequest, Tool,
};
use futures_util::StreamExt;
use serde_json::{json, Value};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

fn data(path: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(path);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

/// What the server answers one request with.
#[derive(Debug, Clone)]
enum Reply {
    /// 200 with this recorded stream, in chunks of 61 bytes, then the connection closes.
    Sse(String),
    /// This status, these headers and this body.
    Status(u16, Vec<(&'static str, String)>, String),
    /// 200 with a chunked body of these bytes, then the connection closes without the last
    /// chunk: a stream cut short.
    Cut(String),
    /// 200 with these bytes, then nothing until the client closes the connection.
    Hold(String),
    /// Nothing at all until the client closes the connection.
    Silent,
}

fn sse(name: &str) -> Reply {
    Reply::Sse(data(&format!("streams/{name}.sse")))
}

fn status(code: u16, file: &str) -> Reply {
    Reply::Status(code, Vec::new(), data(&format!("model_errors/{file}.json")))
}

/// What the server saw of one request.
#[derive(Debug, Clone)]
struct Seen {
    /// The path and query.
    target: String,
    headers: Vec<(String, String)>,
    body: Value,
}

impl Seen {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// A server answering its n-th connection with the n-th reply (then with HTTP 500), one
/// connection at a time; stopped when dropped.
struct Server {
    addr: std::net::SocketAddr,
    seen: Arc<Mutex<Vec<Seen>>>,
    /// Connections the client closed while the server held them (`Hold`, `Silent`).
    closed: Arc<AtomicUsize>,
    task: JoinHandle<()>,
}

impl Drop for Server {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn read_request(tcp: &mut TcpStream) -> Option<Seen> {
    let mut buffer = Vec::new();
    let mut chunk = [0u8; 4096];
    let end = loop {
        if let Some(at) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
            break at + 4;
        }
        let n = tcp.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buffer.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buffer[..end]).into_owned();
    let mut lines = head.split("\r\n");
    let target = lines.next()?.split(' ').nth(1)?.to_owned();
    let headers: Vec<(String, String)> = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let length: usize = headers
        .iter()
        .find(|(n, _)| n == "content-length")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    while buffer.len() < end + length {
        let n = tcp.read(&mut chunk).await.ok()?;
        if n == 0 {
            break;
        }
        buffer.extend_from_slice(&chunk[..n]);
    }
    let body = serde_json::from_slice(&buffer[end..]).unwrap_or(Value::Null);
    Some(Seen {
        target,
        headers,
        body,
    })
}

/// Waits until the client closes the connection.
async fn until_closed(tcp: &mut TcpStream, closed: &AtomicUsize) {
    let mut sink = [0u8; 1024];
    while matches!(tcp.read(&mut sink).await, Ok(n) if n > 0) {}
    closed.fetch_add(1, Ordering::SeqCst);
}

async fn answer(tcp: &mut TcpStream, reply: Reply, closed: &AtomicUsize) -> std::io::Result<()> {
    const OK: &str =
        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\n";
    match reply {
        Reply::Sse(body) => {
            tcp.write_all(format!("{OK}connection: close\r\n\r\n").as_bytes())
                .await?;
            for piece in body.as_bytes().chunks(61) {
                tcp.write_all(piece).await?;
                tcp.flush().await?;
            }
        }
        Reply::Status(code, headers, body) => {
            let mut head = format!(
                "HTTP/1.1 {code} Error\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n",
                body.len()
            );
            for (name, value) in headers {
                head.push_str(&format!("{name}: {value}\r\n"));
            }
            head.push_str("\r\n");
            tcp.write_all(head.as_bytes()).await?;
            tcp.write_all(body.as_bytes()).await?;
        }
        Reply::Cut(body) => {
            tcp.write_all(format!("{OK}transfer-encoding: chunked\r\n\r\n").as_bytes())
                .await?;
            tcp.write_all(format!("{:x}\r\n{body}\r\n", body.len()).as_bytes())
                .await?;
            tcp.flush().await?;
        }
        Reply::Hold(body) => {
            tcp.write_all(format!("{OK}transfer-encoding: chunked\r\n\r\n").as_bytes())
                .await?;
            tcp.write_all(format!("{:x}\r\n{body}\r\n", body.len()).as_bytes())
                .await?;
            tcp.flush().await?;
            until_closed(tcp, closed).await;
        }
        Reply::Silent => until_closed(tcp, closed).await,
    }
    tcp.shutdown().await
}

impl Server {
    async fn start(replies: Vec<Reply>) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a local port");
        let addr = listener.local_addr().expect("its address");
        let seen = Arc::new(Mutex::new(Vec::new()));
        let closed = Arc::new(AtomicUsize::new(0));
        let (log, held) = (Arc::clone(&seen), Arc::clone(&closed));
        let task = tokio::spawn(async move {
            let mut n = 0;
            while let Ok((mut tcp, _)) = listener.accept().await {
                let Some(request) = read_request(&mut tcp).await else {
                    continue;
                };
                log.lock().expect("the log").push(request);
                let reply = replies.get(n).cloned().unwrap_or_else(|| {
                    Reply::Status(
                        500,
                        Vec::new(),
                        r#"{"error":{"message":"no more replies","type":"server_error"}}"#.into(),
                    )
                });
                n += 1;
                let _ = answer(&mut tcp, reply, &held).await;
            }
        });
        Server {
            addr,
            seen,
            closed,
            task,
        }
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().expect("the log").clone()
    }
}

macro_rules! quick {
    ($builder:expr, $retries:expr) => {
        $builder
            .api_key("sk-test")
            .max_retries($retries)
            .backoff(Duration::from_millis(1), Duration::from_millis(4))
            .build()
            .expect("a client")
    };
}

/// The clients of `server` (its paths as the providers have them), with the key `sk-test`,
/// `retries` retries and waits of 1 to 4 ms between them.
fn openai_chat(server: &Server, retries: u32) -> OpenAiChat {
    let builder = OpenAiChat::builder().base_url(server.url("/v1"));
    quick!(builder, retries)
}

fn openai_responses(server: &Server, retries: u32) -> OpenAiResponses {
    let builder = OpenAiResponses::builder().base_url(server.url("/v1"));
    quick!(builder, retries)
}

fn anthropic(server: &Server, retries: u32) -> Anthropic {
    let builder = Anthropic::builder().base_url(server.url("/v1"));
    quick!(builder, retries)
}

fn gemini(server: &Server, retries: u32) -> Gemini {
    let builder = Gemini::builder().base_url(server.url("/v1beta"));
    quick!(builder, retries)
}

fn weather() -> Tool {
    Tool::new(
        "get_weather",
        "The current weather in a place.",
        json!({"type": "object", "properties": {"location": {"type": "string"}}, "required": ["location"]}),
    )
}

fn question() -> Vec<Message> {
    vec![Message::text_message(
        "What's the weather in Paris and Bogotá?",
        Role::User,
    )]
}

/// A message without `raw` (a streamed message's is the response assembled from the events)
/// and its timestamp (now, for a provider whose response has no creation time).
fn without_raw(mut message: Message) -> Message {
    message.raw = None;
    message.timestamp = None;
    message
}

/// Streams one answer: its deltas, and the final message (or the error that ended it).
async fn stream_all(
    model: &dyn ChatModel,
    request: &ModelRequest,
) -> (Vec<Delta>, Result<Message, ModelError>) {
    let messages = question();
    let mut stream = model.stream(request, (&messages).into());
    let mut deltas = Vec::new();
    let mut outcome = None;
    while let Some(event) = stream.next().await {
        assert!(
            outcome.is_none(),
            "nothing follows the final message or an error"
        );
        match event {
            Ok(ModelEvent::Delta(delta)) => deltas.push(delta),
            Ok(ModelEvent::Done(message)) => outcome = Some(Ok(message)),
            Err(error) => outcome = Some(Err(error)),
        }
    }
    (
        deltas,
        outcome.expect("the stream ends with a message or an error"),
    )
}

/// Checks a streamed answer against the recorded one: the deltas' texts and arguments, their
/// message id (the final message's), and the message with its usage.
fn check_answer(deltas: &[Delta], message: &Message, expected: Message) {
    // Every message read gets an id of its own (the provider's is in its metadata): the
    // streamed one and the one read whole differ in that alone.
    let mut expected = without_raw(expected);
    assert_ne!(expected.message_id, message.message_id, "an id of its own");
    expected.message_id = message.message_id.clone();
    assert_eq!(without_raw(message.clone()), expected);
    assert!(message.usages.is_some(), "the usage lands on the message");
    let id = message.message_id.to_string();
    assert!(!deltas.is_empty());
    for delta in deltas {
        assert_eq!(
            delta.message_id(),
            id,
            "every delta carries the final message's id"
        );
    }
    let text: String = deltas
        .iter()
        .filter_map(|d| match d {
            Delta::Text { delta, .. } => Some(delta.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(text, message.text());
    for call in message.tool_calls() {
        let arguments: String = deltas
            .iter()
            .filter_map(|d| match d {
                Delta::ToolCall {
                    tool_call_id,
                    delta,
                    ..
                } if *tool_call_id == call.id => Some(delta.as_str()),
                _ => None,
            })
            .collect();
        let streamed: Value = serde_json::from_str(&arguments).expect("the arguments' JSON");
        let final_: Value = serde_json::from_str(&call.function.arguments).expect("JSON");
        assert_eq!(streamed, final_, "call {}", call.id);
    }
}

fn recorded(name: &str) -> Value {
    serde_json::from_str(&data(&format!("streams/{name}.json"))).expect("JSON")
}

#[tokio::test]
async fn openai_chat_sends_the_stream_flags_and_reads_the_recorded_tool_calls() {
    let server = Server::start(vec![sse("openai_chat_tools")]).await;
    let model = OpenAiChat::builder()
        .base_url(server.url("/v1/"))
        .api_key("sk-test")
        .header("OpenAI-Project", "proj_1")
        .build()
        .expect("a client");
    let request = ModelRequest::builder("gpt-4.1")
        .tool(weather())
        .build()
        .expect("a request");
    let (deltas, message) = stream_all(&model, &request).await;
    let message = message.expect("the answer");
    check_answer(
        &deltas,
        &message,
        from_openai_chat(&recorded("openai_chat_tools"))
            .expect("a response")
            .message,
    );
    assert_eq!(message.tool_calls().len(), 2);

    let seen = server.seen();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].target, "/v1/chat/completions");
    assert_eq!(seen[0].header("authorization"), Some("Bearer sk-test"));
    assert_eq!(seen[0].header("openai-project"), Some("proj_1"));
    let expected =
        serde_json::to_value(request.to_openai_chat(&question()).expect("a body").request)
            .expect("JSON");
    let mut body = seen[0].body.clone();
    assert_eq!(body["stream"], json!(true));
    assert_eq!(body["stream_options"], json!({"include_usage": true}));
    body.as_object_mut()
        .expect("an object")
        .retain(|k, _| k != "stream" && k != "stream_options");
    assert_eq!(body, expected, "the rest is the typed body");
}

#[tokio::test]
async fn complete_gives_the_streamed_message() {
    let server = Server::start(vec![sse("openai_chat_text")]).await;
    let model = OpenAiChat::builder()
        .base_url(server.url("/v1"))
        .no_key()
        .build()
        .expect("a client");
    let request = ModelRequest::builder("gpt-4.1").build().expect("a request");
    let message = model
        .complete(&request, (&question()).into())
        .await
        .expect("the answer");
    let mut expected = from_openai_chat(&recorded("openai_chat_text"))
        .expect("a response")
        .message;
    // An id of its own; the provider's is in the metadata of both.
    expected.message_id = message.message_id.clone();
    assert_eq!(without_raw(message), without_raw(expected));
    assert_eq!(
        server.seen()[0].header("authorization"),
        None,
        "no key, no header"
    );
}

#[tokio::test]
async fn azure_openai_chat_uses_the_deployment_path_and_api_key_header() {
    let server = Server::start(vec![sse("openai_chat_text")]).await;
    let model = OpenAiChat::azure(server.url(""), "my-gpt-4o", "2024-10-21")
        .api_key("azure-key")
        .build()
        .expect("a client");
    let request = ModelRequest::builder("gpt-4o").build().expect("a request");
    let (_, message) = stream_all(&model, &request).await;
    message.expect("the answer");
    let seen = server.seen();
    assert_eq!(
        seen[0].target,
        "/openai/deployments/my-gpt-4o/chat/completions?api-version=2024-10-21"
    );
    assert_eq!(seen[0].header("api-key"), Some("azure-key"));
    assert_eq!(seen[0].header("authorization"), None);
}

#[tokio::test]
async fn openai_responses_streams_the_recorded_answer() {
    let server = Server::start(vec![
        sse("openai_responses_tools"),
        sse("openai_responses_text"),
    ])
    .await;
    let model = openai_responses(&server, 2);
    let request = ModelRequest::builder("o4-mini")
        .tool(weather())
        .build()
        .expect("a request");
    for name in ["openai_responses_tools", "openai_responses_text"] {
        let (deltas, message) = stream_all(&model, &request).await;
        let message = message.expect("the answer");
        check_answer(
            &deltas,
            &message,
            from_openai_responses(&recorded(name))
                .expect("a response")
                .message,
        );
    }
    let seen = server.seen();
    assert_eq!(seen[0].target, "/v1/responses");
    assert_eq!(seen[0].header("authorization"), Some("Bearer sk-test"));
    assert_eq!(seen[0].body["stream"], json!(true));
    assert_eq!(seen[0].body["model"], "o4-mini");
}

#[tokio::test]
async fn anthropic_sends_its_headers_and_reads_the_recorded_streams() {
    let server = Server::start(vec![sse("anthropic_tools"), sse("anthropic_thinking")]).await;
    let model = anthropic(&server, 2);
    let request = ModelRequest::builder("claude-sonnet-4-5")
        .tool(weather())
        .max_output_tokens(1024)
        .build()
        .expect("a request");
    for name in ["anthropic_tools", "anthropic_thinking"] {
        let (deltas, message) = stream_all(&model, &request).await;
        let message = message.expect("the answer");
        let expected = from_anthropic(&recorded(name), None)
            .expect("a response")
            .message;
        check_answer(&deltas, &message, expected);
    }
    let seen = server.seen();
    assert_eq!(seen[0].target, "/v1/messages");
    assert_eq!(seen[0].header("x-api-key"), Some("sk-test"));
    assert_eq!(seen[0].header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(seen[0].header("authorization"), None);
    assert_eq!(seen[0].body["stream"], json!(true));
    assert_eq!(seen[0].body["max_tokens"], 1024);
}

#[tokio::test]
async fn gemini_puts_the_model_in_the_url_and_reads_the_recorded_streams() {
    let server = Server::start(vec![sse("gemini_tools"), sse("gemini_text")]).await;
    let model = gemini(&server, 2);
    let request = ModelRequest::builder("gemini-2.5-flash")
        .tool(weather())
        .build()
        .expect("a request");
    for name in ["gemini_tools", "gemini_text"] {
        let (deltas, message) = stream_all(&model, &request).await;
        let message = message.expect("the answer");
        let expected = from_gemini(&recorded(name)).expect("a response").message;
        check_answer(&deltas, &message, expected);
    }
    let seen = server.seen();
    assert_eq!(
        seen[0].target,
        "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
    );
    assert_eq!(seen[0].header("x-goog-api-key"), Some("sk-test"));
    assert!(
        seen[0].body.get("model").is_none(),
        "the model is the URL's"
    );
    assert!(seen[0].body.get("contents").is_some());
}

#[tokio::test]
async fn rate_limits_and_overloads_are_retried_after_the_wait_they_ask() {
    let server = Server::start(vec![
        Reply::Status(
            429,
            vec![("retry-after-ms", "150".into())],
            data("model_errors/openai_rate_limit.json"),
        ),
        Reply::Status(
            529,
            vec![("retry-after", "0".into())],
            data("model_errors/anthropic_overloaded.json"),
        ),
        sse("openai_chat_text"),
    ])
    .await;
    let model = openai_chat(&server, 2);
    let request = ModelRequest::builder("gpt-4.1").build().expect("a request");
    let start = Instant::now();
    let (_, message) = stream_all(&model, &request).await;
    message.expect("the third attempt's answer");
    assert!(
        start.elapsed() >= Duration::from_millis(150),
        "waited {:?}",
        start.elapsed()
    );
    assert_eq!(server.seen().len(), 3);
}

#[tokio::test]
async fn retries_stop_after_max_retries_and_at_a_long_retry_after() {
    let internal = || status(500, "gemini_internal");
    let server = Server::start(vec![internal(), internal(), internal(), internal()]).await;
    let model = gemini(&server, 2);
    let request = ModelRequest::builder("gemini-2.5-flash")
        .build()
        .expect("a request");
    let error = model
        .complete(&request, (&question()).into())
        .await
        .unwrap_err();
    assert_eq!(error.category(), "server");
    assert_eq!(server.seen().len(), 3, "one call and two retries");

    let server = Server::start(vec![Reply::Status(
        429,
        vec![("retry-after", "120".into())],
        data("model_errors/anthropic_rate_limit.json"),
    )])
    .await;
    let model = anthropic(&server, 2);
    let request = ModelRequest::builder("claude-sonnet-4-5")
        .max_output_tokens(64)
        .build()
        .expect("a request");
    let error = model
        .complete(&request, (&question()).into())
        .await
        .unwrap_err();
    assert_eq!(error.retry_after(), Some(Duration::from_secs(120)));
    assert_eq!(
        error.to_string(),
        "Anthropic is rate limiting this client (retry after 120s): This request would exceed the rate limit for your organization of 50,000 input tokens per minute."
    );
    assert_eq!(
        server.seen().len(),
        1,
        "a wait beyond max_retry_after is not waited"
    );
}

#[tokio::test]
async fn each_error_body_lands_in_its_category() {
    let cases: [(&str, u16, &str, &str); 11] = [
        ("openai", 401, "openai_invalid_api_key", "authentication"),
        (
            "openai",
            400,
            "openai_context_length_exceeded",
            "context_length_exceeded",
        ),
        ("openai", 429, "openai_rate_limit", "rate_limit"),
        ("openai", 400, "azure_content_filter", "content_filtered"),
        (
            "anthropic",
            401,
            "anthropic_authentication",
            "authentication",
        ),
        (
            "anthropic",
            400,
            "anthropic_prompt_too_long",
            "context_length_exceeded",
        ),
        ("anthropic", 529, "anthropic_overloaded", "server"),
        ("gemini", 429, "gemini_resource_exhausted", "rate_limit"),
        ("gemini", 400, "gemini_api_key_invalid", "authentication"),
        (
            "gemini",
            400,
            "gemini_token_limit",
            "context_length_exceeded",
        ),
        ("gemini", 500, "gemini_internal", "server"),
    ];
    for (provider, code, file, category) in cases {
        let server = Server::start(vec![status(code, file)]).await;
        let (model, request): (Box<dyn ChatModel>, ModelRequest) = match provider {
            "openai" => (
                Box::new(openai_chat(&server, 0)),
                ModelRequest::builder("gpt-4.1").build().expect("a request"),
            ),
            "anthropic" => (
                Box::new(anthropic(&server, 0)),
                ModelRequest::builder("claude-sonnet-4-5")
                    .max_output_tokens(64)
                    .build()
                    .expect("a request"),
            ),
            _ => (
                Box::new(gemini(&server, 0)),
                ModelRequest::builder("gemini-2.5-flash")
                    .build()
                    .expect("a request"),
            ),
        };
        let error = model
            .complete(&request, (&question()).into())
            .await
            .unwrap_err();
        assert_eq!(error.category(), category, "{file}: {error}");
        let body = data(&format!("model_errors/{file}.json"));
        let message: Value = serde_json::from_str(&body).expect("JSON");
        let message = message
            .pointer("/error/message")
            .or(message.pointer("/0/error/message"));
        let message = message.and_then(Value::as_str).expect("a message");
        assert!(error.to_string().contains(message), "{file}: {error}");
    }
}

#[tokio::test]
async fn a_stream_cut_short_is_an_error_and_not_retried_after_a_delta() {
    let recorded = data("streams/openai_chat_text.sse");
    let half = recorded.split_inclusive("\n\n").take(2).collect::<String>();

    // The connection breaks in the middle of a chunked body.
    let server = Server::start(vec![Reply::Cut(half.clone())]).await;
    let request = ModelRequest::builder("gpt-4.1").build().expect("a request");
    let (deltas, outcome) = stream_all(&openai_chat(&server, 2), &request).await;
    let error = outcome.unwrap_err();
    assert!(
        !deltas.is_empty(),
        "the deltas before the cut were handed out"
    );
    assert_eq!(error.category(), "transport", "{error}");
    assert!(
        error.to_string().starts_with(
            "the connection to OpenAI Chat failed: the answer's stream broke off after"
        ),
        "{error}"
    );
    assert_eq!(
        server.seen().len(),
        1,
        "no retry once a delta was handed out"
    );

    // The body ends cleanly, but before the stream's last event.
    let server = Server::start(vec![Reply::Sse(half)]).await;
    let (deltas, outcome) = stream_all(&openai_chat(&server, 2), &request).await;
    let error = outcome.unwrap_err();
    assert!(!deltas.is_empty());
    assert_eq!(error.category(), "stream", "{error}");
    assert_eq!(server.seen().len(), 1);
}

#[tokio::test]
async fn dropping_the_stream_closes_the_connection() {
    let recorded = data("streams/anthropic_text.sse");
    let start: String = recorded.split_inclusive("\n\n").take(4).collect();
    let server = Server::start(vec![Reply::Hold(start)]).await;
    let model = anthropic(&server, 2);
    let request = ModelRequest::builder("claude-sonnet-4-5")
        .max_output_tokens(64)
        .build()
        .expect("a request");
    let messages = question();
    let mut stream = model.stream(&request, (&messages).into());
    let first = stream.next().await.expect("an event").expect("a delta");
    assert!(
        matches!(first, ModelEvent::Delta(Delta::Text { .. })),
        "{first:?}"
    );
    assert_eq!(server.closed.load(Ordering::SeqCst), 0);
    drop(stream);
    let deadline = Instant::now() + Duration::from_secs(5);
    while server.closed.load(Ordering::SeqCst) == 0 {
        assert!(
            Instant::now() < deadline,
            "the server never saw the connection close"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn a_silent_server_times_out() {
    let server = Server::start(vec![Reply::Silent]).await;
    let model = OpenAiChat::builder()
        .base_url(server.url("/v1"))
        .no_key()
        .read_timeout(Duration::from_millis(200))
        .build()
        .expect("a client");
    let request = ModelRequest::builder("gpt-4.1").build().expect("a request");
    let error = model
        .complete(&request, (&question()).into())
        .await
        .unwrap_err();
    assert_eq!(error.category(), "timeout");
    assert_eq!(
        error.to_string(),
        "OpenAI Chat sent nothing for 0.2s (waiting for the answer to start)"
    );
}

#[tokio::test]
async fn a_refused_connection_is_retried_then_a_transport_error() {
    // A port that was free a moment ago.
    let addr = TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a port")
        .local_addr()
        .expect("its address");
    let model = OpenAiChat::builder()
        .base_url(format!("http://{addr}/v1"))
        .no_key()
        .backoff(Duration::from_millis(1), Duration::from_millis(2))
        .build()
        .expect("a client");
    let request = ModelRequest::builder("gpt-4.1").build().expect("a request");
    let error = model
        .complete(&request, (&question()).into())
        .await
        .unwrap_err();
    assert_eq!(error.category(), "transport");
    assert!(error.to_string().starts_with(&format!("the connection to OpenAI Chat failed: cannot connect to http://{addr}/v1/chat/completions")), "{error}");
}

#[tokio::test]
async fn a_body_the_provider_cannot_take_fails_before_any_request() {
    let server = Server::start(vec![]).await;
    let model = anthropic(&server, 2);
    // Anthropic requires max_tokens.
    let request = ModelRequest::builder("claude-sonnet-4-5")
        .build()
        .expect("a request");
    let error = model
        .complete(&request, (&question()).into())
        .await
        .unwrap_err();
    assert_eq!(error.category(), "request");
    assert_eq!(error.to_string(), "Anthropic Messages requires `max_tokens` and has no default; set it with `max_output_tokens`");
    assert!(server.seen().is_empty());
}

#[test]
fn bad_settings_are_refused_when_the_client_is_built() {
    let error = OpenAiChat::builder()
        .base_url("not a url")
        .no_key()
        .build()
        .unwrap_err();
    assert_eq!(error.category(), "configuration");
    assert_eq!(error.to_string(), "the OpenAI Chat client is not usable: the base URL `not a url` is not a URL: relative URL without a base");
    let error = Gemini::builder()
        .api_key("k")
        .header("bad header", "x")
        .build()
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        "the Gemini client is not usable: `bad header` is not a valid HTTP header name"
    );
    let error = Anthropic::builder()
        .api_key("line\nbreak")
        .build()
        .unwrap_err();
    assert_eq!(error.to_string(), "the Anthropic client is not usable: the API key holds characters an HTTP header cannot carry");
}
