//! [`ModelError`]: why a model call failed, in stable categories.

use crate::providers::stream::StreamError;
use crate::providers::RequestError;
use std::time::Duration;

/// Why a model call failed: one readable sentence naming the provider and what happened, and a
/// stable [`category`](ModelError::category) to branch on.
///
/// The HTTP clients (feature `client`) read each provider's error bodies and status codes into
/// these categories (OpenAI's `context_length_exceeded`, Anthropic's `overloaded_error`,
/// Gemini's `RESOURCE_EXHAUSTED`...); an error the provider sends inside a stream is read the
/// same way.
///
/// ```
/// use agentstate::model::ModelError;
/// use std::time::Duration;
///
/// let error = ModelError::RateLimit {
///     provider: "Anthropic".into(),
///     message: "Number of request tokens has exceeded your per-minute rate limit".into(),
///     retry_after: Some(Duration::from_secs(20)),
/// };
/// assert_eq!(error.category(), "rate_limit");
/// assert!(error.is_retryable());
/// assert_eq!(error.to_string(), "Anthropic is rate limiting this client (retry after 20s): \
///     Number of request tokens has exceeded your per-minute rate limit");
/// ```
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ModelError {
    /// The API key is missing, wrong or lacks the permission (HTTP 401, 403).
    #[error("{provider} refused the credentials (HTTP {status}): {message}")]
    Authentication {
        /// The provider, e.g. `OpenAI Chat`.
        provider: String,
        /// The HTTP status.
        status: u16,
        /// The provider's message.
        message: String,
    },
    /// Too many requests or tokens for the account's limits (HTTP 429, Gemini's
    /// `RESOURCE_EXHAUSTED`).
    #[error("{provider} is rate limiting this client{}: {message}", retry_after_text(.retry_after))]
    RateLimit {
        /// The provider.
        provider: String,
        /// The provider's message.
        message: String,
        /// How long the provider asked to wait (`Retry-After`, `retry-after-ms`), if it said.
        retry_after: Option<Duration>,
    },
    /// The conversation (with the answer's tokens) is longer than the model's context window.
    #[error("the conversation is too long for the {provider} model: {message}")]
    ContextLengthExceeded {
        /// The provider.
        provider: String,
        /// The provider's message.
        message: String,
    },
    /// The provider's content filter blocked the request or the answer.
    #[error("{provider}'s content filter blocked the request or its answer: {message}")]
    ContentFiltered {
        /// The provider.
        provider: String,
        /// The provider's message.
        message: String,
    },
    /// The provider refused the request as invalid (HTTP 400, 404, 422...): an unknown model,
    /// a bad parameter.
    #[error("{provider} refused the request (HTTP {status}): {message}")]
    BadRequest {
        /// The provider.
        provider: String,
        /// The HTTP status.
        status: u16,
        /// The provider's message.
        message: String,
    },
    /// The provider failed or is overloaded (HTTP 5xx, Anthropic's 529 `overloaded_error`).
    #[error("{provider} failed on its side (HTTP {status}): {message}")]
    Server {
        /// The provider.
        provider: String,
        /// The HTTP status (500 for an error sent inside a stream).
        status: u16,
        /// The provider's message.
        message: String,
    },
    /// The connection could not be made, or broke.
    #[error("the connection to {provider} failed: {message}")]
    Transport {
        /// The provider.
        provider: String,
        /// What happened.
        message: String,
    },
    /// The provider did not answer in time.
    #[error("{provider} sent nothing for {}s ({what})", .after.as_secs_f64())]
    Timeout {
        /// The provider.
        provider: String,
        /// The time waited.
        after: Duration,
        /// Which timeout: `connecting`, `waiting for the answer`, `the whole call`...
        what: String,
    },
    /// The request body could not be built: a parameter the provider lacks (see
    /// [`RequestError`]).
    #[error(transparent)]
    Request(#[from] RequestError),
    /// The answer's stream could not be read (see [`StreamError`]): malformed, or cut before
    /// its end.
    #[error(transparent)]
    Stream(StreamError),
    /// A client that cannot be built or used as configured: no API key, a bad base URL or
    /// header.
    #[error("the {provider} client is not usable: {message}")]
    Configuration {
        /// The provider.
        provider: String,
        /// What is wrong, and how to fix it.
        message: String,
    },
    /// A [`ScriptedModel`](super::ScriptedModel) was asked more often than it has answers.
    #[error("the scripted model has no answer left: it was given {answers} and asked for call {call}; add answers with `ScriptedModel::push`")]
    ScriptExhausted {
        /// How many answers it was given.
        answers: usize,
        /// The call that found none, from 1.
        call: usize,
    },
}

fn retry_after_text(retry_after: &Option<Duration>) -> String {
    match retry_after {
        Some(after) => format!(" (retry after {}s)", after.as_secs_f64()),
        None => String::new(),
    }
}

impl ModelError {
    /// The error's stable snake_case name: `authentication`, `rate_limit`,
    /// `context_length_exceeded`, `content_filtered`, `bad_request`, `server`, `transport`,
    /// `timeout`, `request` (the body could not be built), `stream` (the answer could not be
    /// read), `configuration` or `script_exhausted`.
    ///
    /// ```
    /// use agentstate::model::ModelError;
    ///
    /// let error = ModelError::ScriptExhausted { answers: 1, call: 2 };
    /// assert_eq!(error.category(), "script_exhausted");
    /// ```
    pub fn category(&self) -> &'static str {
        match self {
            ModelError::Authentication { .. } => "authentication",
            ModelError::RateLimit { .. } => "rate_limit",
            ModelError::ContextLengthExceeded { .. } => "context_length_exceeded",
            ModelError::ContentFiltered { .. } => "content_filtered",
            ModelError::BadRequest { .. } => "bad_request",
            ModelError::Server { .. } => "server",
            ModelError::Transport { .. } => "transport",
            ModelError::Timeout { .. } => "timeout",
            ModelError::Request(_) => "request",
            ModelError::Stream(_) => "stream",
            ModelError::Configuration { .. } => "configuration",
            ModelError::ScriptExhausted { .. } => "script_exhausted",
        }
    }

    /// Whether the same call may succeed later: a rate limit, a server error, a broken
    /// connection or a timeout. The HTTP clients already retry these before anything is
    /// streamed; a caller may retry once more after [`retry_after`](Self::retry_after).
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            ModelError::RateLimit { .. }
                | ModelError::Server { .. }
                | ModelError::Transport { .. }
                | ModelError::Timeout { .. }
        )
    }

    /// How long the provider asked to wait before the next call, if it said.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            ModelError::RateLimit { retry_after, .. } => *retry_after,
            _ => None,
        }
    }

    /// The error of a provider's error object (its type, code or status, and its message),
    /// sent with HTTP `status` (or inside a stream, `None`), in its category.
    ///
    /// The codes read are those the providers document: OpenAI's `error.code`
    /// (`context_length_exceeded`, `rate_limit_exceeded`, `content_filter`,
    /// `invalid_api_key`...) and `error.type`; Anthropic's `error.type`
    /// (`authentication_error`, `permission_error`, `rate_limit_error`, `overloaded_error`,
    /// `api_error`, `invalid_request_error` with "prompt is too long"); Gemini's
    /// `error.status` (`RESOURCE_EXHAUSTED`, `UNAUTHENTICATED`, `PERMISSION_DENIED`,
    /// `INVALID_ARGUMENT` with "exceeds the maximum number of tokens", `INTERNAL`,
    /// `UNAVAILABLE`).
    ///
    /// ```
    /// use agentstate::model::ModelError;
    ///
    /// let error = ModelError::from_provider("Anthropic", Some(400), "invalid_request_error",
    ///     "prompt is too long: 208310 tokens > 200000 maximum", None);
    /// assert_eq!(error.category(), "context_length_exceeded");
    /// let error = ModelError::from_provider("Gemini", Some(429), "RESOURCE_EXHAUSTED",
    ///     "Resource has been exhausted (e.g. check quota).", None);
    /// assert_eq!(error.category(), "rate_limit");
    /// ```
    pub fn from_provider(
        provider: &str,
        status: Option<u16>,
        code: &str,
        message: &str,
        retry_after: Option<Duration>,
    ) -> Self {
        let provider = provider.to_owned();
        let lower_code = code.to_ascii_lowercase();
        let lower = message.to_ascii_lowercase();
        let message = if message.is_empty() {
            format!("{code} (no message)")
        } else {
            message.to_owned()
        };
        let context = lower_code.contains("context_length")
            || lower_code == "string_above_max_length"
            || lower.contains("prompt is too long")
            || lower.contains("context length")
            || lower.contains("context window")
            || lower.contains("maximum context")
            || (lower.contains("exceeds the maximum number of tokens"))
            || (lower.contains("input token count") && lower.contains("exceeds"));
        let filtered = lower_code.contains("content_filter")
            || lower_code.contains("content_policy")
            || lower_code == "safety"
            || lower_code == "prohibited_content"
            || lower_code == "blocklist";
        let status_code = status.unwrap_or(0);
        if context {
            return ModelError::ContextLengthExceeded { provider, message };
        }
        if filtered {
            return ModelError::ContentFiltered { provider, message };
        }
        if status_code == 429
            || lower_code.contains("rate_limit")
            || lower_code == "resource_exhausted"
            || lower_code == "insufficient_quota"
        {
            return ModelError::RateLimit {
                provider,
                message,
                retry_after,
            };
        }
        if status_code == 401
            || status_code == 403
            || lower_code.contains("authentication")
            || lower_code.contains("permission")
            || lower_code == "invalid_api_key"
            || lower_code == "unauthenticated"
        {
            return ModelError::Authentication {
                provider,
                status: if status_code == 0 { 401 } else { status_code },
                message,
            };
        }
        if status_code >= 500
            || lower_code.contains("overloaded")
            || lower_code == "api_error"
            || lower_code == "server_error"
            || lower_code == "internal"
            || lower_code == "unavailable"
            || lower_code == "deadline_exceeded"
        {
            return ModelError::Server {
                provider,
                status: if status_code == 0 { 500 } else { status_code },
                message,
            };
        }
        ModelError::BadRequest {
            provider,
            status: if status_code == 0 { 400 } else { status_code },
            message,
        }
    }
}

impl From<StreamError> for ModelError {
    /// An error the provider sent inside the stream goes to its category (see
    /// [`ModelError::from_provider`]); a malformed or cut stream is [`ModelError::Stream`].
    fn from(error: StreamError) -> Self {
        match &error {
            StreamError::Provider {
                provider,
                event,
                code,
                message,
            } => ModelError::from_provider(
                provider,
                None,
                code,
                &format!("{message} (in the stream, at event {event})"),
                None,
            ),
            _ => ModelError::Stream(error),
        }
    }
}
