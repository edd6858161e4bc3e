//! The providers' HTTP clients (feature `client`): what is shared by the four of them (the
//! settings every builder has, the retries and timeouts, the streamed call, the error bodies).

mod anthropic;
mod gemini;
mod openai;

pub use anthropic::{Anthropic, AnthropicBuilder, ANTHROPIC_VERSION};
pub use gemini::{Gemini, GeminiBuilder};
pub use openai::{OpenAiChat, OpenAiChatBuilder, OpenAiResponses, OpenAiResponsesBuilder};

use super::{ModelError, ModelEvent, ModelStream};
use crate::providers::stream::{Accumulator, Delta, Sse};
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, SystemTime};
use tokio::time::Instant;

/// The time to open a connection, by default.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// The longest wait for the answer to start or for its next bytes, by default. Reasoning
/// models may think a while before their first token.
pub const DEFAULT_READ_TIMEOUT: Duration = Duration::from_secs(120);
/// The longest a whole call may take, retries and the streamed answer included, by default
/// (the official SDKs' 10 minutes).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(600);
/// How many times a call is retried, by default (the official SDKs' 2).
pub const DEFAULT_MAX_RETRIES: u32 = 2;

/// How a client waits and retries.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Policy {
    connect_timeout: Duration,
    read_timeout: Duration,
    timeout: Duration,
    max_retries: u32,
    initial_backoff: Duration,
    max_backoff: Duration,
    max_retry_after: Duration,
}

impl Default for Policy {
    fn default() -> Self {
        Policy {
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            read_timeout: DEFAULT_READ_TIMEOUT,
            timeout: DEFAULT_TIMEOUT,
            max_retries: DEFAULT_MAX_RETRIES,
            initial_backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(8),
            max_retry_after: Duration::from_secs(60),
        }
    }
}

/// Where the API key comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Key {
    /// The first of these environment variables that is set and not empty.
    Env(&'static [&'static str]),
    Given(String),
    None,
}

/// What every builder holds.
#[derive(Debug, Clone)]
struct Settings {
    provider: &'static str,
    base_url: String,
    key: Key,
    /// The header the key goes in; `authorization` means `Bearer {key}`.
    key_header: &'static str,
    headers: Vec<(String, String)>,
    policy: Policy,
}

impl Settings {
    fn new(
        provider: &'static str,
        base_url: &str,
        env: &'static [&'static str],
        key_header: &'static str,
    ) -> Self {
        Settings {
            provider,
            base_url: base_url.to_owned(),
            key: Key::Env(env),
            key_header,
            headers: Vec::new(),
            policy: Policy::default(),
        }
    }

    fn error(&self, message: impl Into<String>) -> ModelError {
        ModelError::Configuration {
            provider: self.provider.to_owned(),
            message: message.into(),
        }
    }

    /// The checked base URL (without a trailing `/`), the headers of every request and the
    /// HTTP client.
    fn build(self) -> Result<Core, ModelError> {
        let base = self.base_url.trim_end_matches('/').to_owned();
        match reqwest::Url::parse(&base) {
            Ok(url) if matches!(url.scheme(), "http" | "https") => {}
            Ok(url) => {
                return Err(self.error(format!(
                    "the base URL `{base}` has the scheme `{}`; use http or https",
                    url.scheme()
                )))
            }
            Err(e) => return Err(self.error(format!("the base URL `{base}` is not a URL: {e}"))),
        }
        let key = match &self.key {
            Key::Given(key) => Some(key.clone()),
            Key::None => None,
            Key::Env(names) => match names
                .iter()
                .find_map(|name| std::env::var(name).ok().filter(|v| !v.trim().is_empty()))
            {
                Some(key) => Some(key),
                None => {
                    return Err(self.error(format!(
                        "no API key: set {}, pass one with `.api_key(...)`, or call `.no_key()` for a server that needs none",
                        names.join(" or ")
                    )))
                }
            },
        };
        let mut headers = HeaderMap::new();
        headers.insert(
            reqwest::header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        headers.insert(
            reqwest::header::ACCEPT,
            HeaderValue::from_static("text/event-stream"),
        );
        if let Some(key) = key {
            let value = if self.key_header == "authorization" {
                format!("Bearer {}", key.trim())
            } else {
                key.trim().to_owned()
            };
            let mut value = HeaderValue::from_str(&value).map_err(|_| {
                self.error("the API key holds characters an HTTP header cannot carry")
            })?;
            value.set_sensitive(true);
            headers.insert(HeaderName::from_static(self.key_header), value);
        }
        for (name, value) in &self.headers {
            let header = HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| self.error(format!("`{name}` is not a valid HTTP header name")))?;
            let value = HeaderValue::from_str(value).map_err(|_| {
                self.error(format!(
                    "the value of header `{name}` holds characters an HTTP header cannot carry"
                ))
            })?;
            headers.insert(header, value);
        }
        let http = http_client(self.policy.connect_timeout)
            .map_err(|e| self.error(format!("cannot set up the HTTP client: {e}")))?;
        Ok(Core {
            provider: self.provider,
            base,
            headers,
            http,
            policy: self.policy,
        })
    }
}

/// An HTTP/1.1 client with rustls and its `ring` provider (no system OpenSSL, no process-wide
/// provider to install) and the platform's certificate verifier.
fn http_client(connect_timeout: Duration) -> Result<reqwest::Client, String> {
    use rustls_platform_verifier::BuilderVerifierExt;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_platform_verifier()
        .map_err(|e| e.to_string())?
        .with_no_client_auth();
    reqwest::Client::builder()
        .tls_backend_preconfigured(tls)
        .connect_timeout(connect_timeout)
        .build()
        .map_err(|e| e.to_string())
}

/// The builder methods every client has, written once for each builder type.
macro_rules! common_builder_methods {
    () => {
        /// The API's base URL, for an OpenAI-compatible server (vLLM, Ollama, LM Studio,
        /// OpenRouter...), a proxy or a test server.
        pub fn base_url(mut self, url: impl Into<String>) -> Self {
            self.settings.base_url = url.into();
            self
        }

        /// The API key (instead of the environment variable's).
        pub fn api_key(mut self, key: impl Into<String>) -> Self {
            self.settings.key = $crate::model::client::Key::Given(key.into());
            self
        }

        /// Sends no API key: for a local server that needs none.
        pub fn no_key(mut self) -> Self {
            self.settings.key = $crate::model::client::Key::None;
            self
        }

        /// A header sent with every request (an organization, a project, a beta flag...); it
        /// replaces a header of the same name the client sets.
        pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
            self.settings.headers.push((name.into(), value.into()));
            self
        }

        /// The time to open a connection (default [`DEFAULT_CONNECT_TIMEOUT`](crate::model::DEFAULT_CONNECT_TIMEOUT)).
        pub fn connect_timeout(mut self, timeout: std::time::Duration) -> Self {
            self.settings.policy.connect_timeout = timeout;
            self
        }

        /// The longest wait for the answer to start and for each next piece of it (default
        /// [`DEFAULT_READ_TIMEOUT`](crate::model::DEFAULT_READ_TIMEOUT)).
        pub fn read_timeout(mut self, timeout: std::time::Duration) -> Self {
            self.settings.policy.read_timeout = timeout;
            self
        }

        /// The longest a whole call may take, retries included (default
        /// [`DEFAULT_TIMEOUT`](crate::model::DEFAULT_TIMEOUT)).
        pub fn timeout(mut self, timeout: std::time::Duration) -> Self {
            self.settings.policy.timeout = timeout;
            self
        }

        /// How many times a call is retried after a rate limit (429), a server error (5xx,
        /// Anthropic's 529) or a failed connection, before anything is streamed (default
        /// [`DEFAULT_MAX_RETRIES`](crate::model::DEFAULT_MAX_RETRIES); 0: never).
        pub fn max_retries(mut self, retries: u32) -> Self {
            self.settings.policy.max_retries = retries;
            self
        }

        /// The wait before the first retry, doubled for each next one up to `max`, less a
        /// random quarter (default 0.5 s up to 8 s). A `Retry-After` or `retry-after-ms`
        /// header the provider sends is waited instead.
        pub fn backoff(mut self, initial: std::time::Duration, max: std::time::Duration) -> Self {
            self.settings.policy.initial_backoff = initial;
            self.settings.policy.max_backoff = max.max(initial);
            self
        }

        /// The longest `Retry-After` the client waits for before retrying (default 60 s);
        /// beyond it the rate limit is returned, with its `retry_after`.
        pub fn max_retry_after(mut self, wait: std::time::Duration) -> Self {
            self.settings.policy.max_retry_after = wait;
            self
        }
    };
}
pub(crate) use common_builder_methods;

/// A built client's shared part: where to send, what headers, how to wait and retry.
#[derive(Debug)]
struct Core {
    provider: &'static str,
    base: String,
    headers: HeaderMap,
    http: reqwest::Client,
    policy: Policy,
}

impl Core {
    /// The streamed answer of one call: the body (or why it could not be built) sent to `url`,
    /// read by `accumulator`.
    fn stream<A>(
        self: &Arc<Self>,
        url: String,
        body: Result<Vec<u8>, ModelError>,
        accumulator: A,
    ) -> ModelStream
    where
        A: Accumulator + Clone + Send + 'static,
    {
        let call = match body {
            Ok(body) => Call {
                core: Arc::clone(self),
                url,
                body,
                fresh: accumulator,
                attempt: 0,
                deadline: Instant::now() + self.policy.timeout,
                phase: Phase::Start,
                pending: VecDeque::new(),
                yielded: false,
            },
            Err(error) => {
                return Box::pin(futures_util::stream::iter([Err(error)]));
            }
        };
        Box::pin(futures_util::stream::unfold(call, |mut call| async move {
            let item = call.next().await?;
            Some((item, call))
        }))
    }

    /// The wait before retry number `attempt + 1`: exponential, capped, less a random quarter.
    fn backoff(&self, attempt: u32) -> Duration {
        let policy = &self.policy;
        let base = policy
            .initial_backoff
            .saturating_mul(2u32.saturating_pow(attempt))
            .min(policy.max_backoff);
        base.mul_f64(1.0 - 0.25 * random_unit())
    }

    fn timeout(&self, after: Duration, what: &str) -> ModelError {
        ModelError::Timeout {
            provider: self.provider.to_owned(),
            after,
            what: what.to_owned(),
        }
    }

    fn transport(&self, message: String) -> ModelError {
        ModelError::Transport {
            provider: self.provider.to_owned(),
            message,
        }
    }

    /// Sends the request until it is answered with success, a final error, or out of retries.
    async fn send(&self, call: &mut CallState<'_>) -> Result<reqwest::Response, ModelError> {
        loop {
            let request = self
                .http
                .post(call.url)
                .headers(self.headers.clone())
                .body(call.body.to_vec());
            let (wait, what) = self.wait(call.deadline, "waiting for the answer to start");
            let (error, retry) = match tokio::time::timeout(wait, request.send()).await {
                Err(_) => (self.timeout(wait, what), false),
                Ok(Err(e)) if e.is_connect() => (
                    self.transport(format!(
                        "cannot connect to {}: {}",
                        call.url,
                        error_chain(&e)
                    )),
                    true,
                ),
                Ok(Err(e)) if e.is_timeout() => (
                    self.timeout(self.policy.connect_timeout, "connecting"),
                    true,
                ),
                Ok(Err(e)) => (
                    self.transport(format!(
                        "cannot send the request to {}: {}",
                        call.url,
                        error_chain(&e)
                    )),
                    false,
                ),
                Ok(Ok(response)) if response.status().is_success() => return Ok(response),
                Ok(Ok(response)) => {
                    let error = self.error_response(response, call.deadline).await;
                    let retry = matches!(
                        error,
                        ModelError::RateLimit { .. } | ModelError::Server { .. }
                    );
                    (error, retry)
                }
            };
            if !retry || !self.pause(&error, call).await {
                return Err(error);
            }
        }
    }

    /// Waits before the next attempt, if one is left and fits the deadline: whether to retry.
    async fn pause(&self, error: &ModelError, call: &mut CallState<'_>) -> bool {
        if *call.attempt >= self.policy.max_retries {
            return false;
        }
        let wait = match error.retry_after() {
            Some(wait) if wait > self.policy.max_retry_after => return false,
            Some(wait) => wait,
            None => self.backoff(*call.attempt),
        };
        if Instant::now() + wait >= call.deadline {
            return false;
        }
        tokio::time::sleep(wait).await;
        *call.attempt += 1;
        true
    }

    /// The time to wait for the next bytes: the read timeout, or what is left of the call's.
    fn wait(&self, deadline: Instant, what: &'static str) -> (Duration, &'static str) {
        let left = deadline.saturating_duration_since(Instant::now());
        if left < self.policy.read_timeout {
            (left, "the whole call's timeout")
        } else {
            (self.policy.read_timeout, what)
        }
    }

    /// The error of a response with an error status, from its body.
    async fn error_response(&self, response: reqwest::Response, deadline: Instant) -> ModelError {
        let status = response.status();
        let retry_after = retry_after(response.headers(), SystemTime::now());
        let (wait, _) = self.wait(deadline, "");
        let body = match tokio::time::timeout(wait, response.bytes()).await {
            Ok(Ok(bytes)) => String::from_utf8_lossy(&bytes).into_owned(),
            _ => String::new(),
        };
        error_from_body(
            self.provider,
            status.as_u16(),
            status.canonical_reason(),
            &body,
            retry_after,
        )
    }
}

/// What `Core::send` needs of a call.
struct CallState<'a> {
    url: &'a str,
    body: &'a [u8],
    attempt: &'a mut u32,
    deadline: Instant,
}

/// One streamed call, as its stream's state.
struct Call<A> {
    core: Arc<Core>,
    url: String,
    body: Vec<u8>,
    /// The accumulator as it was before the call, for each attempt.
    fresh: A,
    attempt: u32,
    deadline: Instant,
    phase: Phase<A>,
    pending: VecDeque<Delta>,
    /// Whether a delta was handed out: from then on, no retry.
    yielded: bool,
}

enum Phase<A> {
    Start,
    Streaming(Box<Streaming<A>>),
    Done,
}

/// An answer being read: the response, its accumulator, the bytes read so far.
struct Streaming<A> {
    response: reqwest::Response,
    sse: Sse<A>,
    bytes: usize,
}

impl<A: Accumulator + Clone + Send + 'static> Call<A> {
    async fn next(&mut self) -> Option<Result<ModelEvent, ModelError>> {
        loop {
            if let Some(delta) = self.pending.pop_front() {
                self.yielded = true;
                return Some(Ok(ModelEvent::Delta(delta)));
            }
            let error = match std::mem::replace(&mut self.phase, Phase::Done) {
                Phase::Done => return None,
                Phase::Start => {
                    let mut state = CallState {
                        url: &self.url,
                        body: &self.body,
                        attempt: &mut self.attempt,
                        deadline: self.deadline,
                    };
                    match self.core.send(&mut state).await {
                        Ok(response) => {
                            self.phase = Phase::Streaming(Box::new(Streaming {
                                response,
                                sse: Sse::new(self.fresh.clone()),
                                bytes: 0,
                            }));
                            continue;
                        }
                        // `send` has retried what it could.
                        Err(error) => return Some(Err(error)),
                    }
                }
                Phase::Streaming(mut streaming) => {
                    let Streaming {
                        response,
                        sse,
                        bytes,
                    } = &mut *streaming;
                    let bytes = *bytes;
                    let (wait, what) = self
                        .core
                        .wait(self.deadline, "waiting for the next part of the answer");
                    match tokio::time::timeout(wait, response.chunk()).await {
                        Err(_) => self.core.timeout(wait, what),
                        Ok(Err(e)) => self.core.transport(format!(
                            "the answer's stream broke off after {bytes} bytes: {}",
                            error_chain(&e)
                        )),
                        Ok(Ok(Some(chunk))) => {
                            let mut deltas = Vec::new();
                            match sse.push(&chunk, &mut deltas) {
                                Ok(()) => {
                                    self.pending.extend(deltas);
                                    streaming.bytes += chunk.len();
                                    self.phase = Phase::Streaming(streaming);
                                    continue;
                                }
                                Err(error) => error.into(),
                            }
                        }
                        Ok(Ok(None)) => match streaming.sse.finish() {
                            Ok(converted) => return Some(Ok(ModelEvent::Done(converted.message))),
                            Err(error) => error.into(),
                        },
                    }
                }
            };
            // The stream failed: retry when nothing was handed out yet and it may pass.
            let retry = !self.yielded && error.is_retryable();
            let mut state = CallState {
                url: &self.url,
                body: &self.body,
                attempt: &mut self.attempt,
                deadline: self.deadline,
            };
            if retry && self.core.pause(&error, &mut state).await {
                self.pending.clear();
                self.phase = Phase::Start;
                continue;
            }
            return Some(Err(error));
        }
    }
}

/// An error and its sources, as one line.
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

/// A number in [0, 1), random enough for a backoff's jitter (no random-number crate).
fn random_unit() -> f64 {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u128(
        SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos(),
    );
    (hasher.finish() >> 11) as f64 / (1u64 << 53) as f64
}

/// The wait a response asks for: `retry-after-ms` (OpenAI's SDKs), or `Retry-After` in
/// seconds or as an HTTP date.
fn retry_after(headers: &HeaderMap, now: SystemTime) -> Option<Duration> {
    let header = |name: &str| headers.get(name)?.to_str().ok().map(str::trim);
    let seconds = |secs: f64| {
        (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs.min(86_400.0)))
    };
    if let Some(ms) = header("retry-after-ms").and_then(|v| v.parse::<f64>().ok()) {
        if let Some(wait) = seconds(ms / 1000.0) {
            return Some(wait);
        }
    }
    let value = header("retry-after")?;
    match value.parse::<f64>() {
        Ok(secs) => seconds(secs),
        Err(_) => {
            let at = httpdate::parse_http_date(value).ok()?;
            Some(at.duration_since(now).unwrap_or_default())
        }
    }
}

/// The error of an HTTP error response: the provider's error object read as
/// [`ModelError::from_provider`] reads it (OpenAI's and vLLM's `{"error": {"message", "type",
/// "code"}}`, Anthropic's `{"type": "error", "error": {"type", "message"}}`, Gemini's
/// `{"error": {"code", "message", "status"}}`, possibly in a list; Ollama's `{"error": "..."}`),
/// or the body's start when it is not JSON.
fn error_from_body(
    provider: &str,
    status: u16,
    reason: Option<&str>,
    body: &str,
    retry_after: Option<Duration>,
) -> ModelError {
    let value: Option<serde_json::Value> = serde_json::from_str(body).ok();
    let value = match value {
        Some(serde_json::Value::Array(mut items)) if !items.is_empty() => {
            Some(items.swap_remove(0))
        }
        other => other,
    };
    let object = value.as_ref().map(|v| v.get("error").unwrap_or(v));
    let text = |key: &str| {
        object
            .and_then(|o| o.get(key))
            .and_then(serde_json::Value::as_str)
            .filter(|s| !s.is_empty())
    };
    let code = text("code")
        .or(text("status"))
        .or(text("type"))
        .unwrap_or("");
    let message = match object {
        Some(serde_json::Value::String(message)) => message.clone(),
        _ => match text("message") {
            Some(message) => message.to_owned(),
            None if !body.trim().is_empty() => body.trim().chars().take(300).collect(),
            None => reason.unwrap_or("no details").to_owned(),
        },
    };
    ModelError::from_provider(provider, Some(status), code, &message, retry_after)
}

/// The JSON body of a request, with `extra` keys set at its top level (the stream flags).
fn json_body(
    body: Result<impl serde::Serialize, crate::providers::RequestError>,
    provider: &str,
    extra: &[(&str, serde_json::Value)],
    remove: &[&str],
) -> Result<Vec<u8>, ModelError> {
    let mut value = serde_json::to_value(body?).map_err(|e| ModelError::Configuration {
        provider: provider.to_owned(),
        message: format!("the request body cannot be written as JSON: {e}"),
    })?;
    if let serde_json::Value::Object(map) = &mut value {
        for key in remove {
            map.remove(*key);
        }
        for (key, v) in extra {
            map.insert((*key).to_owned(), v.clone());
        }
    }
    serde_json::to_vec(&value).map_err(|e| ModelError::Configuration {
        provider: provider.to_owned(),
        message: format!("the request body cannot be written as JSON: {e}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(*name, HeaderValue::from_str(value).unwrap());
        }
        map
    }

    #[test]
    fn retry_after_reads_milliseconds_seconds_and_dates() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_445_412_480);
        let read = |pairs: &[(&'static str, &str)]| retry_after(&headers(pairs), now);
        assert_eq!(
            read(&[("retry-after-ms", "250")]),
            Some(Duration::from_millis(250))
        );
        assert_eq!(read(&[("retry-after", "2")]), Some(Duration::from_secs(2)));
        assert_eq!(
            read(&[("retry-after", "1.5")]),
            Some(Duration::from_millis(1500))
        );
        // RFC 9110's example date, 20 seconds after `now`.
        assert_eq!(
            read(&[("retry-after", "Wed, 21 Oct 2015 07:28:20 GMT")]),
            Some(Duration::from_secs(20))
        );
        assert_eq!(
            read(&[("retry-after", "Wed, 21 Oct 2015 07:00:00 GMT")]),
            Some(Duration::ZERO)
        );
        assert_eq!(read(&[("retry-after", "soon")]), None);
        assert_eq!(read(&[("retry-after", "-3")]), None);
        assert_eq!(read(&[("retry-after", "1e400")]), None);
        assert_eq!(read(&[]), None);
    }

    #[test]
    fn backoff_doubles_up_to_its_cap_less_a_quarter_at_most() {
        let core = Settings::new("Test", "http://127.0.0.1:1", &[], "authorization");
        let core = Settings {
            key: Key::None,
            ..core
        }
        .build()
        .unwrap();
        for (attempt, full) in [(0, 500), (1, 1000), (2, 2000), (5, 8000), (40, 8000)] {
            let wait = core.backoff(attempt).as_millis();
            assert!(
                (full * 3 / 4..=full).contains(&wait),
                "attempt {attempt}: {wait} ms"
            );
        }
    }

    #[test]
    fn a_missing_key_is_an_error_when_the_client_is_built() {
        let settings = Settings::new(
            "OpenAI Chat",
            "https://api.openai.com/v1",
            &["AGENTSTATE_TEST_UNSET_KEY_1", "AGENTSTATE_TEST_UNSET_KEY_2"],
            "authorization",
        );
        let error = settings.build().unwrap_err();
        assert_eq!(error.category(), "configuration");
        assert_eq!(
            error.to_string(),
            "the OpenAI Chat client is not usable: no API key: set AGENTSTATE_TEST_UNSET_KEY_1 or \
             AGENTSTATE_TEST_UNSET_KEY_2, pass one with `.api_key(...)`, or call `.no_key()` for a \
             server that needs none"
        );
    }

    #[test]
    fn error_bodies_of_each_provider() {
        let error = error_from_body(
            "Ollama",
            404,
            None,
            r#"{"error":"model 'x' not found"}"#,
            None,
        );
        assert_eq!(
            error.to_string(),
            "Ollama refused the request (HTTP 404): model 'x' not found"
        );
        let error = error_from_body(
            "vLLM",
            400,
            None,
            r#"{"object":"error","message":"This model's maximum context length is 4096 tokens.","type":"BadRequestError","param":null,"code":400}"#,
            None,
        );
        assert_eq!(error.category(), "context_length_exceeded");
        let error = error_from_body("Proxy", 502, Some("Bad Gateway"), "", None);
        assert_eq!(
            error.to_string(),
            "Proxy failed on its side (HTTP 502): Bad Gateway"
        );
        let error = error_from_body("Proxy", 503, None, "<html>upstream down</html>", None);
        assert_eq!(
            error.to_string(),
            "Proxy failed on its side (HTTP 503): <html>upstream down</html>"
        );
    }
}
