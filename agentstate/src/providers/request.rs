//! A whole model request, described once beside the conversation: the model, tools, tool
//! choice, structured output, sampling, maximum output tokens, reasoning and prompt-cache
//! breakpoints. Each provider's converter writes it in its shape as a typed body
//! ([`ChatBody`](super::openai_chat::ChatBody),
//! [`ResponsesBody`](super::openai_responses::ResponsesBody),
//! [`AnthropicBody`](super::anthropic::AnthropicBody),
//! [`GeminiBody`](super::gemini::GeminiBody)), serialized in the provider's documented key
//! order (its required keys first, in its reference's order, then the optional ones) and byte
//! for byte the same for equal inputs.

use super::report::{Action, Issue, Report};
use super::strict::{strict_schema, Dialect};
use crate::message::Message;
use serde::Serialize;
use serde_json::Value;
use std::borrow::Cow;
use std::fmt;

/// A model request's parameters, built by [`ModelRequest::builder`] (which checks them), and
/// converted with a conversation by `to_openai_chat`, `to_openai_responses`, `to_anthropic`
/// and `to_gemini`.
///
/// A whole model request, described once beside the conversation: the model, tools, tool
/// choice, structured output, sampling, maximum output tokens, reasoning and prompt-cache
/// breakpoints. Each provider's converter writes it in its shape as a typed body
/// ([`ChatBody`](super::openai_chat::ChatBody),
/// [`ResponsesBody`](super::openai_responses::ResponsesBody),
/// [`AnthropicBody`](super::anthropic::AnthropicBody),
/// [`GeminiBody`](super::gemini::GeminiBody)), serialized in the provider's documented key
/// order (its required keys first, in its reference's order, then the optional ones) and byte
/// for byte the same for equal inputs.
///
/// # What a provider cannot take
///
/// Two kinds, handled differently:
///
/// - **A parameter you set that the provider lacks, or a request it would refuse** (a `seed`
///   for Anthropic, `top_k` for OpenAI, no `max_tokens` for Anthropic, a thinking budget larger
///   than `max_tokens`...): the conversion returns a [`RequestError`] naming the provider and
///   the parameter, and no body. These are your choices, not your data: dropping one would
///   change what the model does without a word (OpenArmature's llm-provider spec rejects such
///   parameters rather than dropping them), and sending it would only get an HTTP 400 later.
///   A `Result` cannot be ignored; a note can.
/// - **Something of the conversation** (a video for OpenAI, reasoning another provider made) and
///   **a setting that does not apply** (cache breakpoints where caching is automatic): the body
///   is built and the [`Report`] says what was done, as the message
///   conversion always did. A cache breakpoint where it does not apply is a
///   [`Severity::Info`](super::report::Severity::Info) note
///   ([`Issue::NotApplicable`]): OpenAI and Gemini cache
///   prompt prefixes by themselves.
///
/// A request that no provider would take (a tool choice naming a tool the request does not
/// have, a temperature of 5, two tools of one name) is refused when it is built
/// ([`ModelRequestBuilder::build`]). A tool choice without tools (`Auto` or `None`: the
/// builder refuses the others) is refused by the conversion for OpenAI Chat and Gemini, which
/// answer it with an HTTP 400; OpenAI Responses and Anthropic take it.
///
/// # Reasoning
///
/// Providers take reasoning in two forms: an effort (OpenAI's `reasoning_effort`, Anthropic's
/// `output_config.effort`) and a token budget (Anthropic's `thinking.budget_tokens`, Gemini's
/// `thinking_config.thinking_budget`). Set one or both; a provider writes the ones it takes
/// and refuses the request only when it takes neither of those you set (OpenAI given only a
/// budget, Gemini given only an effort). One request with both goes to all four.
///
/// # Where each parameter goes
///
/// "refused": the conversion returns [`RequestError::Unsupported`].
///
/// | parameter | OpenAI Chat | OpenAI Responses | Anthropic | Gemini |
/// |---|---|---|---|---|
/// | model | `model` | `model` | `model` | `model` (the URL's, in the body for SDKs) |
/// | tools | `tools` (`function`) | `tools` (`function`) | `tools` (`input_schema`) | `tools[0].function_declarations` (`parameters_json_schema`) |
/// | tool choice | `tool_choice` (refused without tools) | `tool_choice` | `tool_choice` (`auto`, `none`, `any`, `tool`) | `tool_config.function_calling_config` (`AUTO`, `NONE`, `ANY`, `allowed_function_names`; refused without tools) |
/// | structured output | `response_format` (`json_schema`) | `text.format` | `output_config.format` (no name; always strict) | `generation_config.response_json_schema` (no name; JSON mime type) |
/// | temperature, top_p | `temperature`, `top_p` | `temperature`, `top_p` | refused | `generation_config` |
/// | top_k | refused | refused | refused | `generation_config.top_k` |
/// | stop | `stop` | refused | `stop_sequences` | `generation_config.stop_sequences` |
/// | seed | `seed` | refused | refused | `generation_config.seed` |
/// | frequency, presence penalty | `frequency_penalty`, `presence_penalty` | refused | refused | `generation_config` |
/// | max output tokens | `max_completion_tokens` | `max_output_tokens` | `max_tokens` (required) | `generation_config.max_output_tokens` |
/// | reasoning effort | `reasoning_effort` | `reasoning.effort` | `output_config.effort` (low to max) | not taken (a budget is needed) |
/// | thinking budget | not taken (an effort is needed) | not taken | `thinking` (`enabled`, `budget_tokens`) | `generation_config.thinking_config.thinking_budget` |
/// | cache breakpoints | noted: automatic | noted: automatic | `cache_control` on the last system block, the last tool, the chosen message's last block | noted: implicit |
///
/// Anthropic's column follows the Messages API as the pinned official SDK types define it
/// (`anthropic` 2.14.0's `MessageCreateParams`, which `tests/providers_sdk_types.rs` validates
/// against): it has no `temperature`, `top_p`, `top_k`, `seed` or penalties. Anthropic also
/// refuses thinking with a forced tool choice (`any`, `tool`), and a budget under 1,024 tokens
/// or not under `max_tokens`: refused here too.
///
/// # Example
///
/// ```
/// use agentstate::message::{Message, Role};
/// use agentstate::providers::{Effort, ModelRequest, OutputSchema, Tool, ToolChoice};
/// use agentstate::providers::RequestError;
/// use serde_json::json;
///
/// let weather = Tool::new(
///     "get_weather",
///     "The weather in a city today.",
///     json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}),
/// );
/// let request = ModelRequest::builder("claude-sonnet-4-5")
///     .tool(weather)
///     .tool_choice(ToolChoice::Auto)
///     .max_output_tokens(2048)
///     .thinking_budget(1024)
///     .reasoning_effort(Effort::Medium)
///     .cache_system(true)
///     .build()?;
/// let messages = vec![
///     Message::text_message("Be brief.", Role::System),
///     Message::text_message("Weather in Paris?", Role::User),
/// ];
///
/// // Anthropic: the tools, the thinking budget, a breakpoint on the system prompt.
/// let converted = request.to_anthropic(&messages)?;
/// assert!(converted.report.is_empty(), "{}", converted.report);
/// let body = serde_json::to_value(&converted.request)?;
/// assert_eq!(body["max_tokens"], 2048);
/// assert_eq!(body["tools"][0]["input_schema"]["required"], json!(["city"]));
/// assert_eq!(body["thinking"], json!({"type": "enabled", "budget_tokens": 1024}));
/// assert_eq!(body["system"][0]["cache_control"], json!({"type": "ephemeral"}));
///
/// // OpenAI Chat: the effort; the cache breakpoint does not apply (a note, not an error).
/// let converted = request.to_openai_chat(&messages)?;
/// let body = serde_json::to_value(&converted.request)?;
/// assert_eq!(body["reasoning_effort"], "medium");
/// assert_eq!(body["tools"][0]["function"]["name"], "get_weather");
/// assert_eq!(converted.report.to_string(),
///     "request: `cache_breakpoints` does not apply (the provider caches prompt prefixes by itself); dropped");
///
/// // A parameter a provider lacks is refused, not dropped.
/// let seeded = ModelRequest::builder("claude-sonnet-4-5").seed(7).max_output_tokens(512).build()?;
/// let error = seeded.to_anthropic(&messages).unwrap_err();
/// assert_eq!(error.to_string(), "Anthropic Messages has no `seed` parameter; leave it unset for this provider");
/// assert_eq!(error.category(), "provider_parameter_unsupported");
///
/// // Structured output, for Gemini.
/// let request = ModelRequest::builder("gemini-2.5-flash")
///     .output_schema(OutputSchema::new("answer", json!({"type": "object", "properties": {"ok": {"type": "boolean"}}})))
///     .build()?;
/// let body = serde_json::to_value(request.to_gemini(&messages)?.request)?;
/// assert_eq!(body["generation_config"]["response_mime_type"], "application/json");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct ModelRequest {
    model: String,
    tools: Vec<Tool>,
    tool_choice: Option<ToolChoice>,
    output_schema: Option<OutputSchema>,
    sampling: Sampling,
    max_output_tokens: Option<u32>,
    effort: Option<Effort>,
    thinking_budget: Option<u32>,
    cache: CacheBreakpoints,
}

/// Builds a [`ModelRequest`]; [`build`](ModelRequestBuilder::build) checks it.
#[derive(Debug, Clone, PartialEq)]
#[must_use = "a builder does nothing until `build` is called"]
pub struct ModelRequestBuilder {
    request: ModelRequest,
}

/// A tool the model may call: its name, what it does, and its arguments' JSON Schema.
#[derive(Debug, Clone, PartialEq)]
pub struct Tool {
    /// The name the model calls it by (`^[a-zA-Z0-9_-]{1,64}$`, which every provider takes).
    pub name: String,
    /// What it does, for the model.
    pub description: String,
    /// The JSON Schema of its arguments (an object schema).
    pub parameters: Value,
    /// Whether the provider must make arguments that follow the schema exactly (OpenAI's and
    /// Anthropic's `strict`; Gemini has none and refuses it). Default `false`.
    pub strict: bool,
}

impl Tool {
    /// A tool, not strict.
    ///
    /// ```
    /// use agentstate::providers::Tool;
    /// use serde_json::json;
    ///
    /// let tool = Tool::new("now", "The current time.", json!({"type": "object", "properties": {}}));
    /// assert!(!tool.strict);
    /// ```
    pub fn new(name: impl Into<String>, description: impl Into<String>, parameters: Value) -> Self {
        Tool {
            name: name.into(),
            description: description.into(),
            parameters,
            strict: false,
        }
    }

    /// The tool made strict.
    pub fn strict(mut self, strict: bool) -> Self {
        self.strict = strict;
        self
    }

    /// A tool whose parameters are the JSON Schema of `T` (feature `schemars`), without the
    /// `$schema` key, not strict. Made strict ([`Tool::strict`]), its schema is rewritten for
    /// each provider's strict mode when the body is built: every object closed
    /// (`additionalProperties: false`), every property required for OpenAI (an `Option` field
    /// stays nullable), Anthropic's one type per schema, the keywords a provider does not
    /// enforce moved into the description; what a provider cannot express (a `HashMap`, a
    /// `serde_json::Value`, a recursive type for Anthropic) is a [`RequestError`] naming the
    /// field.
    ///
    /// ```
    /// # #[cfg(feature = "schemars")] {
    /// use agentstate::providers::Tool;
    ///
    /// #[derive(schemars::JsonSchema)]
    /// #[allow(dead_code)]
    /// struct Weather {
    ///     /// The city.
    ///     city: String,
    /// }
    /// let tool = Tool::of::<Weather>("get_weather", "The weather in a city.");
    /// assert_eq!(tool.parameters["properties"]["city"]["type"], "string");
    /// assert_eq!(tool.parameters["required"][0], "city");
    /// assert!(tool.parameters.get("$schema").is_none());
    ///
    /// // Strict: OpenAI is sent a closed object.
    /// let request = agentstate::providers::ModelRequest::builder("gpt-4o").tool(tool.strict(true)).build()?;
    /// let body = serde_json::to_value(request.to_openai_chat(&[])?.request)?;
    /// assert_eq!(body["tools"][0]["function"]["parameters"]["additionalProperties"], false);
    /// assert_eq!(body["tools"][0]["function"]["strict"], true);
    /// # }
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[cfg(feature = "schemars")]
    pub fn of<T: schemars::JsonSchema>(
        name: impl Into<String>,
        description: impl Into<String>,
    ) -> Self {
        let schema = schemars::SchemaGenerator::default().into_root_schema_for::<T>();
        let mut parameters = schema.to_value();
        if let Value::Object(map) = &mut parameters {
            map.remove("$schema");
        }
        Tool::new(name, description, parameters)
    }
}

/// Which tools the model may or must call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolChoice {
    /// The model decides (every provider's default with tools).
    Auto,
    /// No tool call.
    None,
    /// At least one tool call (OpenAI `required`, Anthropic `any`, Gemini `ANY`).
    Required,
    /// A call of this tool, which must be one of the request's.
    Tool(String),
}

/// A JSON Schema the answer must follow (structured output).
#[derive(Debug, Clone, PartialEq)]
pub struct OutputSchema {
    /// Its name (`^[a-zA-Z0-9_-]{1,64}$`): OpenAI's `name`; Anthropic and Gemini take none.
    pub name: String,
    /// The schema.
    pub schema: Value,
    /// Whether the answer must follow it exactly (OpenAI's `strict`; Anthropic's always is,
    /// Gemini's has no such switch). Default `true`.
    pub strict: bool,
    /// What the answer is, for the model (OpenAI only).
    pub description: Option<String>,
}

impl OutputSchema {
    /// A strict schema without description.
    pub fn new(name: impl Into<String>, schema: Value) -> Self {
        OutputSchema {
            name: name.into(),
            schema,
            strict: true,
            description: None,
        }
    }

    /// The schema of `T` (feature `schemars`), without the `$schema` key, strict. When the
    /// body is built it is rewritten for the provider's strict mode (as [`Tool::of`]'s strict
    /// tools are), or refused with a [`RequestError`] naming the field a provider cannot
    /// express; [`parse`](OutputSchema::parse) reads the answer back as `T`.
    ///
    /// ```
    /// # #[cfg(feature = "schemars")] {
    /// use agentstate::message::{Message, Role};
    /// use agentstate::providers::{ModelRequest, OutputSchema};
    /// use std::collections::HashMap;
    ///
    /// #[derive(schemars::JsonSchema, serde::Deserialize, Debug, PartialEq)]
    /// struct Answer { ok: bool, note: Option<String> }
    /// let output = OutputSchema::of::<Answer>("answer");
    /// assert_eq!(output.schema["properties"]["ok"]["type"], "boolean");
    ///
    /// // OpenAI's strict mode: every property required, `note` nullable.
    /// let request = ModelRequest::builder("gpt-4o").output_schema(output.clone()).build()?;
    /// let body = serde_json::to_value(request.to_openai_chat(&[])?.request)?;
    /// let schema = &body["response_format"]["json_schema"]["schema"];
    /// assert_eq!(schema["required"], serde_json::json!(["note", "ok"]));
    /// assert_eq!(schema["additionalProperties"], false);
    ///
    /// // The answer, typed.
    /// let reply = Message::text_message(r#"{"ok": true, "note": null}"#, Role::Assistant);
    /// assert_eq!(output.parse::<Answer>(&reply)?, Answer { ok: true, note: None });
    ///
    /// // What strict mode cannot express is refused when the body is built.
    /// #[derive(schemars::JsonSchema)]
    /// #[allow(dead_code)]
    /// struct Scores { by_name: HashMap<String, u32> }
    /// let request = ModelRequest::builder("gpt-4o").output_schema(OutputSchema::of::<Scores>("scores")).build()?;
    /// let error = request.to_openai_chat(&[]).unwrap_err();
    /// assert!(error.to_string().contains("`Scores.by_name` is a free-form map"), "{error}");
    /// # }
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[cfg(feature = "schemars")]
    pub fn of<T: schemars::JsonSchema>(name: impl Into<String>) -> Self {
        OutputSchema::new(name, Tool::of::<T>("", "").parameters)
    }

    /// The structured answer of `message` read as `T`: its `parsed_content` when the response
    /// carried one, else its text as JSON. An answer that is not JSON, or not a `T`, is an
    /// [`OutputError`] naming where it differs.
    ///
    /// ```
    /// use agentstate::message::{Message, Role};
    /// use agentstate::providers::OutputSchema;
    /// use serde_json::json;
    ///
    /// #[derive(serde::Deserialize)]
    /// struct Answer { ok: bool }
    /// let output = OutputSchema::new("answer", json!({"type": "object", "properties": {"ok": {"type": "boolean"}}}));
    /// let reply = Message::text_message(r#"{"ok": "yes"}"#, Role::Assistant);
    /// let error = output.parse::<Answer>(&reply).err().unwrap();
    /// assert_eq!(error.to_string(),
    ///     "the answer does not follow the output schema `answer` at `ok`: invalid type: string \"yes\", expected a boolean at line 1 column 12");
    /// ```
    pub fn parse<T: serde::de::DeserializeOwned>(
        &self,
        message: &Message,
    ) -> Result<T, OutputError> {
        let error = |path: String, reason: String| OutputError {
            schema: self.name.clone(),
            path,
            reason,
        };
        let text;
        let json = match &message.parsed_content {
            Some(parsed) => {
                text = serde_json::to_string(parsed)
                    .map_err(|e| error(String::new(), e.to_string()))?;
                text.as_str()
            }
            None => {
                text = message.text();
                text.as_str()
            }
        };
        if json.trim().is_empty() {
            return Err(error(String::new(), "the message has no text".into()));
        }
        let mut reader = serde_json::Deserializer::from_str(json);
        serde_path_to_error::deserialize(&mut reader)
            .map_err(|e| {
                let path = e.path().to_string();
                let path = if path == "." { String::new() } else { path };
                error(path, e.into_inner().to_string())
            })
            .and_then(|value| {
                reader
                    .end()
                    .map_err(|e| error(String::new(), e.to_string()))?;
                Ok(value)
            })
    }
}

/// A structured answer that does not follow its [`OutputSchema`] ([`OutputSchema::parse`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the answer does not follow the output schema `{schema}`{}: {reason}", at(.path))]
pub struct OutputError {
    /// The schema's name.
    pub schema: String,
    /// Where in the answer it differs (`items[0].city`; empty: the whole answer).
    pub path: String,
    /// How it differs.
    pub reason: String,
}

fn at(path: &str) -> String {
    if path.is_empty() {
        String::new()
    } else {
        format!(" at `{path}`")
    }
}

/// Sampling parameters; each `None` (or empty) is left to the provider's default and not
/// written.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Sampling {
    /// 0 to 2.
    pub temperature: Option<f64>,
    /// 0 to 1.
    pub top_p: Option<f64>,
    /// At least 1 (Gemini only).
    pub top_k: Option<u32>,
    /// Sequences that end the answer.
    pub stop: Vec<String>,
    /// A seed for reproducible sampling (OpenAI Chat, Gemini).
    pub seed: Option<i64>,
    /// -2 to 2 (OpenAI Chat, Gemini).
    pub frequency_penalty: Option<f64>,
    /// -2 to 2 (OpenAI Chat, Gemini).
    pub presence_penalty: Option<f64>,
}

/// How much a reasoning model thinks (OpenAI's `reasoning_effort`, Anthropic's
/// `output_config.effort`). Serialized in lower case (`"xhigh"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Effort {
    /// `"none"`: no reasoning (OpenAI only).
    #[serde(rename = "none")]
    Off,
    /// `"minimal"` (OpenAI only).
    Minimal,
    /// `"low"`.
    Low,
    /// `"medium"`.
    Medium,
    /// `"high"`.
    High,
    /// `"xhigh"`.
    XHigh,
    /// `"max"`.
    Max,
}

impl Effort {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Effort::Off => "none",
            Effort::Minimal => "minimal",
            Effort::Low => "low",
            Effort::Medium => "medium",
            Effort::High => "high",
            Effort::XHigh => "xhigh",
            Effort::Max => "max",
        }
    }
}

/// Where Anthropic's prompt cache may end (`cache_control: {"type": "ephemeral"}`): each
/// breakpoint caches everything up to it. OpenAI and Gemini cache prefixes by themselves: a
/// breakpoint is a [`Severity::Info`](super::report::Severity::Info) note there.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheBreakpoints {
    /// On the last block of the system prompt.
    pub system: bool,
    /// On the last tool.
    pub tools: bool,
    /// On the last block of a message's turn.
    pub message: Option<CacheAt>,
}

/// The message a cache breakpoint follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CacheAt {
    /// The last turn sent (caches the whole conversation, for the next call).
    Last,
    /// The turn holding the message at this index of the converted slice (or, when that
    /// message sends nothing, the last turn before it).
    Message(usize),
}

impl CacheBreakpoints {
    /// Whether any breakpoint is set.
    pub fn any(&self) -> bool {
        self.system || self.tools || self.message.is_some()
    }
}

/// A request a provider cannot take, or that no provider would take.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RequestError {
    /// A parameter the provider does not have (`provider_parameter_unsupported`).
    #[error("{provider} has no `{parameter}` parameter; {hint}")]
    Unsupported {
        /// The provider's API (`"Anthropic Messages"`).
        provider: &'static str,
        /// The parameter, as this module names it (`"seed"`).
        parameter: &'static str,
        /// What to do instead.
        hint: &'static str,
    },
    /// A parameter the provider requires (`provider_parameter_missing`).
    #[error("{provider} requires `{parameter}` and has no default; set it with `{setter}`")]
    Missing {
        /// The provider's API.
        provider: &'static str,
        /// The parameter.
        parameter: &'static str,
        /// The builder method that sets it.
        setter: &'static str,
    },
    /// A parameter's value, or a combination, that the provider (or every provider) refuses
    /// (`provider_parameter_invalid`).
    #[error("`{parameter}` is invalid{}: {reason}", for_provider(.provider))]
    Invalid {
        /// The provider's API, `None` when no provider takes it.
        provider: Option<&'static str>,
        /// The parameter.
        parameter: String,
        /// What is wrong with it.
        reason: String,
    },
}

fn for_provider(provider: &Option<&'static str>) -> String {
    provider.map(|p| format!(" for {p}")).unwrap_or_default()
}

impl RequestError {
    /// The error's category: `provider_parameter_unsupported`, `provider_parameter_missing`
    /// or `provider_parameter_invalid`.
    pub fn category(&self) -> &'static str {
        match self {
            RequestError::Unsupported { .. } => "provider_parameter_unsupported",
            RequestError::Missing { .. } => "provider_parameter_missing",
            RequestError::Invalid { .. } => "provider_parameter_invalid",
        }
    }

    fn invalid(provider: Option<&'static str>, parameter: &str, reason: impl fmt::Display) -> Self {
        RequestError::Invalid {
            provider,
            parameter: parameter.to_owned(),
            reason: reason.to_string(),
        }
    }
}

/// The conversation a request is converted with: messages, and a `context_summary` to put in
/// the system prompt (as the `to_*` functions' second argument). A slice, a `Vec` or an array
/// of messages converts into one without a summary; a [`ContextView`]'s
/// [`messages`](crate::context::ContextView::messages) already hold its summary.
///
/// [`ContextView`]: crate::context::ContextView
#[derive(Debug, Clone, Copy)]
pub struct Conversation<'a> {
    /// The messages, in order.
    pub messages: &'a [Message],
    /// The summary of earlier messages, if any.
    pub summary: Option<&'a str>,
}

impl<'a> Conversation<'a> {
    /// The messages with a context summary.
    ///
    /// ```
    /// use agentstate::message::{Message, Role};
    /// use agentstate::providers::{Conversation, ModelRequest};
    ///
    /// let messages = [Message::text_message("Hi", Role::User)];
    /// let request = ModelRequest::builder("gpt-4o").build()?;
    /// let body = request.to_openai_responses(Conversation::new(&messages).summary("Earlier: nothing."))?.request;
    /// assert_eq!(body.instructions.as_deref(), Some("Earlier: nothing."));
    /// # Ok::<(), agentstate::providers::RequestError>(())
    /// ```
    pub fn new(messages: &'a [Message]) -> Self {
        Conversation {
            messages,
            summary: None,
        }
    }

    /// With a context summary.
    pub fn summary(mut self, summary: &'a str) -> Self {
        self.summary = Some(summary);
        self
    }
}

impl<'a> From<&'a [Message]> for Conversation<'a> {
    fn from(messages: &'a [Message]) -> Self {
        Conversation::new(messages)
    }
}

impl<'a> From<&'a Vec<Message>> for Conversation<'a> {
    fn from(messages: &'a Vec<Message>) -> Self {
        Conversation::new(messages)
    }
}

impl<'a, const N: usize> From<&'a [Message; N]> for Conversation<'a> {
    fn from(messages: &'a [Message; N]) -> Self {
        Conversation::new(messages)
    }
}

impl ModelRequest {
    /// A builder for a request to `model`.
    pub fn builder(model: impl Into<String>) -> ModelRequestBuilder {
        ModelRequestBuilder {
            request: ModelRequest {
                model: model.into(),
                tools: Vec::new(),
                tool_choice: None,
                output_schema: None,
                sampling: Sampling::default(),
                max_output_tokens: None,
                effort: None,
                thinking_budget: None,
                cache: CacheBreakpoints::default(),
            },
        }
    }

    /// The model.
    pub fn model(&self) -> &str {
        &self.model
    }

    /// The tools, in order.
    pub fn tools(&self) -> &[Tool] {
        &self.tools
    }

    /// The tool choice, `None` for the provider's default.
    pub fn tool_choice(&self) -> Option<&ToolChoice> {
        self.tool_choice.as_ref()
    }

    /// The structured output's schema.
    pub fn output_schema(&self) -> Option<&OutputSchema> {
        self.output_schema.as_ref()
    }

    /// The sampling parameters.
    pub fn sampling(&self) -> &Sampling {
        &self.sampling
    }

    /// The maximum number of output tokens.
    pub fn max_output_tokens(&self) -> Option<u32> {
        self.max_output_tokens
    }

    /// The reasoning effort.
    pub fn reasoning_effort(&self) -> Option<Effort> {
        self.effort
    }

    /// The thinking budget, in tokens.
    pub fn thinking_budget(&self) -> Option<u32> {
        self.thinking_budget
    }

    /// The prompt-cache breakpoints.
    pub fn cache(&self) -> CacheBreakpoints {
        self.cache
    }

    /// Refuses each parameter in `lacks` that is set, for `provider`.
    pub(super) fn refuse(
        &self,
        provider: &'static str,
        lacks: &[Param],
    ) -> Result<(), RequestError> {
        let s = &self.sampling;
        for param in lacks {
            let set = match param {
                Param::Temperature => s.temperature.is_some(),
                Param::TopP => s.top_p.is_some(),
                Param::TopK => s.top_k.is_some(),
                Param::Stop => !s.stop.is_empty(),
                Param::Seed => s.seed.is_some(),
                Param::FrequencyPenalty => s.frequency_penalty.is_some(),
                Param::PresencePenalty => s.presence_penalty.is_some(),
                Param::ToolStrict => self.tools.iter().any(|t| t.strict),
            };
            if set {
                let (parameter, hint) = param.names();
                return Err(RequestError::Unsupported {
                    provider,
                    parameter,
                    hint,
                });
            }
        }
        Ok(())
    }

    /// Refuses a tool choice without tools, for a provider that answers one with an HTTP 400
    /// (OpenAI Chat: "`tool_choice` is only allowed when `tools` are specified"; Gemini:
    /// "Function calling config is set without function_declarations").
    pub(super) fn refuse_tool_choice_without_tools(
        &self,
        provider: &'static str,
    ) -> Result<(), RequestError> {
        if self.tool_choice.is_some() && self.tools.is_empty() {
            return Err(invalid_for(
                provider,
                "tool_choice",
                "it is set but the request has no tools; add tools or leave it unset",
            ));
        }
        Ok(())
    }

    /// The note for cache breakpoints where the provider caches by itself.
    pub(super) fn note_cache(&self, report: &mut Report) {
        if self.cache.any() {
            report.push(
                None,
                None,
                Issue::NotApplicable {
                    parameter: "cache_breakpoints",
                    reason: "the provider caches prompt prefixes by itself",
                },
                Action::Dropped,
            );
        }
    }
}

/// A parameter some providers lack.
#[derive(Debug, Clone, Copy)]
pub(super) enum Param {
    Temperature,
    TopP,
    TopK,
    Stop,
    Seed,
    FrequencyPenalty,
    PresencePenalty,
    ToolStrict,
}

impl Param {
    fn names(self) -> (&'static str, &'static str) {
        let unset = "leave it unset for this provider";
        match self {
            Param::Temperature => ("temperature", unset),
            Param::TopP => ("top_p", unset),
            Param::TopK => ("top_k", unset),
            Param::Stop => ("stop", unset),
            Param::Seed => ("seed", unset),
            Param::FrequencyPenalty => ("frequency_penalty", unset),
            Param::PresencePenalty => ("presence_penalty", unset),
            Param::ToolStrict => (
                "tools[].strict",
                "make the tools not strict for this provider",
            ),
        }
    }
}

/// Whether `name` is a tool or schema name every provider takes: `^[a-zA-Z0-9_-]{1,64}$`.
fn valid_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

impl ModelRequestBuilder {
    /// Adds a tool.
    pub fn tool(mut self, tool: Tool) -> Self {
        self.request.tools.push(tool);
        self
    }

    /// Adds tools.
    pub fn tools(mut self, tools: impl IntoIterator<Item = Tool>) -> Self {
        self.request.tools.extend(tools);
        self
    }

    /// Sets the tool choice.
    pub fn tool_choice(mut self, choice: ToolChoice) -> Self {
        self.request.tool_choice = Some(choice);
        self
    }

    /// Sets the structured output's schema.
    pub fn output_schema(mut self, schema: OutputSchema) -> Self {
        self.request.output_schema = Some(schema);
        self
    }

    /// Sets every sampling parameter at once.
    pub fn sampling(mut self, sampling: Sampling) -> Self {
        self.request.sampling = sampling;
        self
    }

    /// Sets the temperature (0 to 2).
    pub fn temperature(mut self, temperature: f64) -> Self {
        self.request.sampling.temperature = Some(temperature);
        self
    }

    /// Sets top_p (0 to 1).
    pub fn top_p(mut self, top_p: f64) -> Self {
        self.request.sampling.top_p = Some(top_p);
        self
    }

    /// Sets top_k (at least 1; Gemini only).
    pub fn top_k(mut self, top_k: u32) -> Self {
        self.request.sampling.top_k = Some(top_k);
        self
    }

    /// Adds a stop sequence.
    pub fn stop(mut self, stop: impl Into<String>) -> Self {
        self.request.sampling.stop.push(stop.into());
        self
    }

    /// Sets the seed.
    pub fn seed(mut self, seed: i64) -> Self {
        self.request.sampling.seed = Some(seed);
        self
    }

    /// Sets the frequency penalty (-2 to 2).
    pub fn frequency_penalty(mut self, penalty: f64) -> Self {
        self.request.sampling.frequency_penalty = Some(penalty);
        self
    }

    /// Sets the presence penalty (-2 to 2).
    pub fn presence_penalty(mut self, penalty: f64) -> Self {
        self.request.sampling.presence_penalty = Some(penalty);
        self
    }

    /// Sets the maximum number of output tokens (required by Anthropic).
    pub fn max_output_tokens(mut self, tokens: u32) -> Self {
        self.request.max_output_tokens = Some(tokens);
        self
    }

    /// Sets the reasoning effort (OpenAI, Anthropic).
    pub fn reasoning_effort(mut self, effort: Effort) -> Self {
        self.request.effort = Some(effort);
        self
    }

    /// Sets the thinking budget in tokens (Anthropic, Gemini).
    pub fn thinking_budget(mut self, tokens: u32) -> Self {
        self.request.thinking_budget = Some(tokens);
        self
    }

    /// Sets every cache breakpoint at once.
    pub fn cache(mut self, cache: CacheBreakpoints) -> Self {
        self.request.cache = cache;
        self
    }

    /// Puts a cache breakpoint after the system prompt (or takes it away).
    pub fn cache_system(mut self, on: bool) -> Self {
        self.request.cache.system = on;
        self
    }

    /// Puts a cache breakpoint after the tools (or takes it away).
    pub fn cache_tools(mut self, on: bool) -> Self {
        self.request.cache.tools = on;
        self
    }

    /// Puts a cache breakpoint after a message.
    pub fn cache_message(mut self, at: CacheAt) -> Self {
        self.request.cache.message = Some(at);
        self
    }

    /// The request, checked for what no provider takes: an empty model name, a tool or
    /// schema name outside `^[a-zA-Z0-9_-]{1,64}$`, two tools of one name, a tool's or the
    /// output's schema that is not a JSON object, a tool choice naming a tool the request does
    /// not have (or `Required` without tools), a sampling parameter out of its range, a
    /// maximum of 0 output tokens.
    ///
    /// ```
    /// use agentstate::providers::{ModelRequest, ToolChoice};
    ///
    /// let error = ModelRequest::builder("gpt-4o").tool_choice(ToolChoice::Tool("search".into())).build().unwrap_err();
    /// assert_eq!(error.to_string(), "`tool_choice` is invalid: it names the tool `search`, which the request does not have");
    /// let error = ModelRequest::builder("gpt-4o").temperature(2.5).build().unwrap_err();
    /// assert_eq!(error.to_string(), "`temperature` is invalid: 2.5 is not within 0 to 2");
    /// ```
    pub fn build(self) -> Result<ModelRequest, RequestError> {
        let request = self.request;
        let invalid =
            |parameter: &str, reason: String| Err(RequestError::invalid(None, parameter, reason));
        if request.model.trim().is_empty() {
            return invalid("model", "it is empty".into());
        }
        for (i, tool) in request.tools.iter().enumerate() {
            if !valid_name(&tool.name) {
                return invalid(
                    "tools",
                    format!(
                        "the name {:?} is not 1 to 64 letters, digits, `_` or `-`",
                        tool.name
                    ),
                );
            }
            if request.tools[..i].iter().any(|t| t.name == tool.name) {
                return invalid("tools", format!("two tools are named `{}`", tool.name));
            }
            if !tool.parameters.is_object() {
                return invalid(
                    "tools",
                    format!(
                        "the parameters of `{}` are not a JSON Schema object",
                        tool.name
                    ),
                );
            }
        }
        match &request.tool_choice {
            Some(ToolChoice::Tool(name)) if !request.tools.iter().any(|t| &t.name == name) => {
                return invalid(
                    "tool_choice",
                    format!("it names the tool `{name}`, which the request does not have"),
                );
            }
            Some(ToolChoice::Required) if request.tools.is_empty() => {
                return invalid(
                    "tool_choice",
                    "a tool call is required but the request has no tools".into(),
                );
            }
            _ => {}
        }
        if let Some(output) = &request.output_schema {
            if !valid_name(&output.name) {
                return invalid(
                    "output_schema",
                    format!(
                        "the name {:?} is not 1 to 64 letters, digits, `_` or `-`",
                        output.name
                    ),
                );
            }
            if !output.schema.is_object() {
                return invalid("output_schema", "the schema is not a JSON object".into());
            }
        }
        let s = &request.sampling;
        let ranges = [
            ("temperature", s.temperature, 0.0, 2.0),
            ("top_p", s.top_p, 0.0, 1.0),
            ("frequency_penalty", s.frequency_penalty, -2.0, 2.0),
            ("presence_penalty", s.presence_penalty, -2.0, 2.0),
        ];
        for (name, value, low, high) in ranges {
            if let Some(value) = value.filter(|v| !(low..=high).contains(v)) {
                return invalid(name, format!("{value} is not within {low} to {high}"));
            }
        }
        if s.top_k == Some(0) {
            return invalid("top_k", "it must be at least 1".into());
        }
        if s.stop.iter().any(String::is_empty) {
            return invalid("stop", "a stop sequence is empty".into());
        }
        if request.max_output_tokens == Some(0) {
            return invalid("max_output_tokens", "it must be at least 1".into());
        }
        Ok(request)
    }
}

/// A `{"type": "ephemeral"}` cache marker (Anthropic's `cache_control`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct CacheControl {
    /// Always `"ephemeral"`.
    #[serde(rename = "type")]
    pub kind: &'static str,
}

impl CacheControl {
    /// `{"type": "ephemeral"}`.
    pub const EPHEMERAL: CacheControl = CacheControl { kind: "ephemeral" };
}

/// The `invalid` error of a provider.
pub(super) fn invalid_for(
    provider: &'static str,
    parameter: &str,
    reason: impl fmt::Display,
) -> RequestError {
    RequestError::invalid(Some(provider), parameter, reason)
}

/// `schema` as `provider` is sent it: as given when not `strict`, else rewritten for its
/// strict mode, or the error naming `parameter`, `what` (`the strict tool `x``), the field and
/// the rule.
fn sent_schema<'s>(
    schema: &'s Value,
    strict: bool,
    dialect: Dialect,
    provider: &'static str,
    parameter: &str,
    what: impl FnOnce() -> String,
) -> Result<Cow<'s, Value>, RequestError> {
    if !strict {
        return Ok(Cow::Borrowed(schema));
    }
    strict_schema(schema, dialect)
        .map(Cow::Owned)
        .map_err(|reason| invalid_for(provider, parameter, format!("{}: {reason}", what())))
}

impl Tool {
    /// The parameters' schema as `provider` is sent it: as given, or rewritten for its strict
    /// mode when the tool is strict (an error naming the tool, the field and the rule when the
    /// schema cannot be).
    pub(super) fn schema_for(
        &self,
        dialect: Dialect,
        provider: &'static str,
    ) -> Result<Cow<'_, Value>, RequestError> {
        sent_schema(
            &self.parameters,
            self.strict,
            dialect,
            provider,
            "tools",
            || format!("the strict tool `{}`", self.name),
        )
    }
}

impl OutputSchema {
    /// The schema as `provider` is sent it: as given, or rewritten for its strict mode when
    /// the schema is strict or the provider is always strict (Anthropic).
    pub(super) fn schema_for(
        &self,
        dialect: Dialect,
        provider: &'static str,
        always_strict: bool,
    ) -> Result<Cow<'_, Value>, RequestError> {
        let strict = self.strict || always_strict;
        sent_schema(
            &self.schema,
            strict,
            dialect,
            provider,
            "output_schema",
            || format!("the schema `{}`", self.name),
        )
    }
}
