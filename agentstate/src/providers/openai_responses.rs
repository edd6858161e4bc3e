//! OpenAI Responses: messages to the request's `instructions` and `input` items, and a
//! `response` object back to a [`Message`].
//!
//! The conversion is the [Chat one](super::openai_chat) (same text, parts, tool results and
//! notes), written as Responses items: system messages join `instructions` (one met after the
//! conversation started is moved there with a note), tool calls are `function_call` items
//! and results `function_call_output` items, and reasoning made by OpenAI (a reasoning block
//! whose `extra` holds `"provider": "openai"` and the item's `"id"`) goes back as a
//! `reasoning` item with its `encrypted_content` (the block's `signature`). Responses takes no
//! audio input: audio is dropped with a note.

use super::openai_chat::{
    convert, json_schema_format, openai_effort, openai_mode, ChatContent, ChatPart,
    ChatRequestMessage, JsonSchemaFormat,
};
use super::report::{Action, Issue, Report};
use super::request::{Conversation, Effort, ModelRequest, Param, RequestError, ToolChoice};
use super::strict::Dialect;
use super::{
    calls_of, extra_str, openai_reasoning, openai_usage, provider_extra, response_message, str_at,
    Converted, ParsedResponse, Provider, Reply, ResponseError,
};
use crate::message::{
    AnnotationRef, ContentBlock, Message, ReasoningBlock, TextBlock, ToolCall, ToolCallBlock,
};
use serde::Serialize;
use serde_json::{Map, Value};
use std::borrow::Cow;

/// Converts a conversation to a Responses request's `instructions` and `input`.
///
/// The `context_summary` joins `instructions`, after the leading system messages.
///
/// ```
/// use agentstate::message::{Message, Role, ToolCall};
/// use agentstate::providers::openai_responses::to_openai_responses;
/// use serde_json::json;
///
/// let messages = vec![
///     Message::text_message("Be brief.", Role::System),
///     Message::text_message("Weather in Paris?", Role::User),
///     Message::text_message("", Role::Assistant)
///         .with_tool_calls(vec![ToolCall::new("call_1", "get_weather", json!({"city": "Paris"}))]),
///     Message::tool_result("call_1", "Sunny"),
/// ];
/// let body = to_openai_responses(&messages, Some("The user likes short answers.")).request;
/// assert_eq!(body["instructions"], "Be brief.\nThe user likes short answers.");
/// assert_eq!(body["input"][1], json!({"type": "function_call", "call_id": "call_1",
///     "name": "get_weather", "arguments": r#"{"city": "Paris"}"#}));
/// assert_eq!(body["input"][2], json!({"type": "function_call_output", "call_id": "call_1", "output": "Sunny"}));
/// ```
pub fn to_openai_responses(
    messages: &[Message],
    context_summary: Option<&str>,
) -> Converted<Value> {
    let (instructions, input, report) = conversation(messages, context_summary);
    let mut request = Map::new();
    if let Some(instructions) = instructions {
        request.insert("instructions".into(), Value::from(instructions));
    }
    request.insert(
        "input".into(),
        serde_json::to_value(&input).unwrap_or_default(),
    );
    Converted::new(Value::Object(request), report)
}

/// An input item: a message, a reasoning item, a function call or its output.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum ResponsesItem<'a> {
    /// `{"role": "user" | "assistant", "content"}`.
    Message {
        /// `"user"` or `"assistant"`.
        role: &'static str,
        /// A string, or input parts.
        content: ResponsesContent<'a>,
    },
    /// `{"type": "reasoning", "id", "summary": [...], "encrypted_content"?}`.
    Reasoning {
        /// Always `"reasoning"`.
        #[serde(rename = "type")]
        kind: &'static str,
        /// The item id.
        id: &'a str,
        /// The summary texts.
        summary: Vec<SummaryText<'a>>,
        /// The encrypted reasoning (the block's signature).
        #[serde(skip_serializing_if = "Option::is_none")]
        encrypted_content: Option<&'a str>,
    },
    /// `{"type": "function_call", "call_id", "name", "arguments", "id"?}`.
    FunctionCall {
        /// Always `"function_call"`.
        #[serde(rename = "type")]
        kind: &'static str,
        /// The call id.
        call_id: &'a str,
        /// The tool.
        name: &'a str,
        /// The arguments as a JSON string.
        arguments: Cow<'a, str>,
        /// The item id, for calls OpenAI made.
        #[serde(skip_serializing_if = "Option::is_none")]
        id: Option<&'a str>,
    },
    /// `{"type": "function_call_output", "call_id", "output"}`.
    FunctionCallOutput {
        /// Always `"function_call_output"`.
        #[serde(rename = "type")]
        kind: &'static str,
        /// The call it answers.
        call_id: &'a str,
        /// A string, or input parts.
        output: ResponsesContent<'a>,
    },
}

/// `{"type": "summary_text", "text"}`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SummaryText<'a> {
    /// Always `"summary_text"`.
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// The text.
    pub text: &'a str,
}

/// A message's content or a function call's output: a string, or input parts.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum ResponsesContent<'a> {
    /// A string.
    Text(Cow<'a, str>),
    /// Input parts.
    Parts(Vec<InputPart<'a>>),
}

/// An input part, tagged by `type`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum InputPart<'a> {
    /// `{"type": "input_text", "text"}`.
    InputText {
        /// The text.
        text: Cow<'a, str>,
    },
    /// `{"type": "input_image", "image_url", "detail": "auto"}`.
    InputImage {
        /// A URL or a `data:` URL.
        image_url: Cow<'a, str>,
        /// Always `"auto"` (the API's default, which the SDK's type requires).
        detail: &'static str,
    },
    /// `{"type": "input_file", "file_data"?, "file_id"?, "filename"?}`.
    InputFile {
        /// A `data:` URL of the bytes.
        #[serde(skip_serializing_if = "Option::is_none")]
        file_data: Option<String>,
        /// An uploaded file's id.
        #[serde(skip_serializing_if = "Option::is_none")]
        file_id: Option<Cow<'a, str>>,
        /// The file name.
        #[serde(skip_serializing_if = "Option::is_none")]
        filename: Option<Cow<'a, str>>,
    },
}

/// A conversation's `instructions` and `input` items.
fn conversation<'a>(
    messages: &'a [Message],
    context_summary: Option<&'a str>,
) -> (Option<String>, Vec<ResponsesItem<'a>>, Report) {
    let (out, mut report) = convert(messages, context_summary, true);
    let mut instructions: Vec<String> = Vec::new();
    let mut input = Vec::with_capacity(out.messages.len());
    let mut started = false;
    for (message, origin) in out.messages.into_iter().zip(out.origins) {
        match message {
            ChatRequestMessage::System { content } => {
                if started {
                    report.push(
                        origin,
                        None,
                        Issue::SystemInConversation,
                        Action::MovedToSystem,
                    );
                }
                if let ChatContent::Text(text) = content {
                    instructions.push(text.into_owned());
                }
            }
            ChatRequestMessage::User { content } => {
                started = true;
                let content = input_content(content, origin, &mut report);
                input.push(ResponsesItem::Message {
                    role: "user",
                    content,
                });
            }
            ChatRequestMessage::Assistant {
                mut content,
                refusal,
                tool_calls,
            } => {
                started = true;
                let source = origin.map(|i| &messages[i]);
                if let (Some(refusal), Some(index)) = (refusal, origin) {
                    // Responses takes no refusal in an input message: sent as its text.
                    let block = messages[index]
                        .content
                        .iter()
                        .position(|b| super::refusal_of(b).is_some())
                        .unwrap_or_default();
                    super::note_refusal(index, block, &mut report);
                    content.to_mut().push_str(refusal);
                }
                for block in source.into_iter().flat_map(|m| &m.content) {
                    if let ContentBlock::Reasoning(reasoning) = block {
                        if let Some(id) = openai_reasoning(reasoning) {
                            input.push(reasoning_item(id, reasoning));
                        }
                    }
                }
                if !content.is_empty() || tool_calls.is_empty() {
                    input.push(ResponsesItem::Message {
                        role: "assistant",
                        content: ResponsesContent::Text(content),
                    });
                }
                let calls = source.map(calls_of).unwrap_or_default();
                for call in tool_calls {
                    let item_id = calls
                        .iter()
                        .find(|c| c.id == call.id)
                        .filter(|c| {
                            extra_str(c.extra, "provider") == Some(Provider::OpenAi.as_str())
                        })
                        .and_then(|c| extra_str(c.extra, "id"));
                    input.push(ResponsesItem::FunctionCall {
                        kind: "function_call",
                        call_id: call.id,
                        name: call.function.name,
                        arguments: call.function.arguments,
                        id: item_id,
                    });
                }
            }
            ChatRequestMessage::Tool {
                content,
                tool_call_id,
            } => {
                started = true;
                // A string, or (for a result with media) input_text/input_image/input_file.
                let output = input_content(content, origin, &mut report);
                input.push(ResponsesItem::FunctionCallOutput {
                    kind: "function_call_output",
                    call_id: tool_call_id,
                    output,
                });
            }
        }
    }
    super::note_empty_conversation(input.len(), &mut report);
    let instructions = (!instructions.is_empty()).then(|| instructions.join("\n"));
    (instructions, input, report)
}

/// A user message's content as Responses input content. Responses takes no audio: an audio
/// part is dropped with a note.
fn input_content<'a>(
    content: ChatContent<'a>,
    origin: Option<usize>,
    report: &mut Report,
) -> ResponsesContent<'a> {
    let parts = match content {
        ChatContent::Text(text) => return ResponsesContent::Text(text),
        ChatContent::Parts(parts) => parts,
    };
    let parts = parts
        .into_iter()
        .filter_map(|part| match part {
            ChatPart::Text { text } => Some(InputPart::InputText { text }),
            // `detail` is required by the SDK's type; `auto` is the API's default.
            ChatPart::ImageUrl { image_url } => Some(InputPart::InputImage {
                image_url: image_url.url,
                detail: "auto",
            }),
            ChatPart::InputAudio { .. } => {
                report.push(
                    origin,
                    None,
                    Issue::UnsupportedBlock { kind: "audio" },
                    Action::Dropped,
                );
                None
            }
            ChatPart::File { file } => Some(InputPart::InputFile {
                file_data: file.file_data,
                file_id: file.file_id,
                filename: file.filename,
            }),
        })
        .collect();
    ResponsesContent::Parts(parts)
}

/// A reasoning item: `{"type": "reasoning", "id", "summary": [...], "encrypted_content"?}`.
fn reasoning_item<'a>(id: &'a str, reasoning: &'a ReasoningBlock) -> ResponsesItem<'a> {
    let texts: Vec<&str> = match &reasoning.details {
        Some(details) => details.iter().map(String::as_str).collect(),
        None if reasoning.summary.is_empty() => Vec::new(),
        None => vec![reasoning.summary.as_str()],
    };
    ResponsesItem::Reasoning {
        kind: "reasoning",
        id,
        summary: texts
            .into_iter()
            .map(|text| SummaryText {
                kind: "summary_text",
                text,
            })
            .collect(),
        encrypted_content: reasoning.signature.as_deref(),
    }
}

/// Reads a Responses API `response` object into an assistant message: `reasoning` items as
/// reasoning blocks (summary texts, `encrypted_content` as the signature, the item id in
/// `extra`), `message` items' `output_text` as text (`url_citation` and `file_citation`
/// annotations as the text's annotations, without their positions) and `refusal` as an
/// `error` block with code [`REFUSAL_CODE`](super::REFUSAL_CODE), `function_call` items as
/// tool calls (the item id in the block's `extra`), usage with cached and reasoning tokens,
/// and the whole response as `raw`. Other items (`web_search_call`, `file_search_call`...)
/// have no block in a message: each is noted in the report, and stays in `raw` only.
///
/// ```
/// use agentstate::message::ContentBlock;
/// use agentstate::providers::openai_responses::from_openai_responses;
/// use serde_json::json;
///
/// let response = json!({
///     "id": "resp_1", "object": "response", "model": "o4-mini", "status": "completed",
///     "output": [
///         {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "Look it up."}],
///          "encrypted_content": "gAAAA"},
///         {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "get_weather",
///          "arguments": "{\"city\":\"Paris\"}"}
///     ],
///     "usage": {"input_tokens": 30, "output_tokens": 12, "total_tokens": 42,
///               "output_tokens_details": {"reasoning_tokens": 8}}
/// });
/// let parsed = from_openai_responses(&response)?;
/// assert!(parsed.report.is_empty());
/// let message = parsed.message;
/// let ContentBlock::Reasoning(reasoning) = &message.content[0] else { panic!() };
/// assert_eq!(reasoning.signature.as_deref(), Some("gAAAA"));
/// assert_eq!(message.tool_calls()[0].id, "call_1");
/// assert_eq!(message.usages.unwrap().reasoning_tokens, 8);
///
/// // A web search: its call has no block (noted); the answer's citation is kept.
/// let response = json!({"output": [
///     {"type": "web_search_call", "id": "ws_1", "status": "completed"},
///     {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Sunny.",
///      "annotations": [{"type": "url_citation", "url": "https://w.example", "title": "W",
///                       "start_index": 0, "end_index": 6}]}]}
/// ]});
/// let parsed = from_openai_responses(&response)?;
/// assert_eq!(parsed.report.to_string(),
///     "response item 0: a message has no block for the response's `web_search_call`; kept in the message's `raw` only");
/// let ContentBlock::Text(text) = &parsed.message.content[0] else { panic!() };
/// assert_eq!(text.annotations[0].url.as_deref(), Some("https://w.example"));
/// # Ok::<(), agentstate::providers::ResponseError>(())
/// ```
pub fn from_openai_responses(response: &Value) -> Result<ParsedResponse, ResponseError> {
    let error = |reason: String| ResponseError::new("OpenAI Responses", reason);
    let output = response
        .get("output")
        .and_then(Value::as_array)
        .ok_or_else(|| error("it has no `output` list".into()))?;
    let mut content = Vec::new();
    let mut calls = Vec::new();
    let mut report = Report::default();
    for (at, item) in output.iter().enumerate() {
        match str_at(item, "type") {
            Some("reasoning") => {
                let texts: Vec<String> = item
                    .get("summary")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(|s| str_at(s, "text").map(str::to_owned))
                    .collect();
                let mut fields = Vec::new();
                if let Some(id) = str_at(item, "id") {
                    fields.push(("id", Value::from(id)));
                }
                content.push(ContentBlock::Reasoning(ReasoningBlock {
                    summary: texts.join("\n"),
                    details: (texts.len() > 1).then_some(texts),
                    signature: str_at(item, "encrypted_content").map(Into::into),
                    extra: provider_extra(Provider::OpenAi, &fields),
                }));
            }
            Some("message") => {
                for part in item
                    .get("content")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                {
                    match str_at(part, "type") {
                        Some("output_text") => content.push(output_text(part)),
                        Some("refusal") => content
                            .push(super::refusal_block(str_at(part, "refusal").unwrap_or(""))),
                        other => super::note_output(at, other.unwrap_or("unknown"), &mut report),
                    }
                }
            }
            Some("function_call") => {
                let (Some(call_id), Some(name)) = (str_at(item, "call_id"), str_at(item, "name"))
                else {
                    return Err(error(
                        "a function_call item has no `call_id` or `name`".into(),
                    ));
                };
                let arguments = str_at(item, "arguments").unwrap_or("{}");
                let args = match serde_json::from_str(arguments) {
                    Ok(Value::Object(args)) => args,
                    _ => Map::new(),
                };
                let mut fields = Vec::new();
                if let Some(id) = str_at(item, "id") {
                    fields.push(("id", Value::from(id)));
                }
                content.push(ContentBlock::ToolCall(ToolCallBlock {
                    extra: provider_extra(Provider::OpenAi, &fields),
                    ..ToolCallBlock::new(call_id, name, args)
                }));
                let mut call = ToolCall::new(call_id, name, Value::Object(Map::new()));
                call.function.arguments = arguments.to_owned();
                calls.push(call);
            }
            other => super::note_output(at, other.unwrap_or("unknown"), &mut report),
        }
    }
    let usage = openai_usage(
        response,
        ["input_tokens", "output_tokens"],
        ["input_tokens_details", "output_tokens_details"],
    );
    let message = response_message(
        response,
        content,
        calls,
        Reply {
            provider: "openai",
            id: str_at(response, "id"),
            model: str_at(response, "model"),
            finish_reason: str_at(response, "status"),
            usage,
            created: response.get("created_at").and_then(Value::as_f64),
        },
    );
    Ok(ParsedResponse::new(message, report))
}

/// An `output_text` part: its text, with its `url_citation` annotations (url and title) and
/// `file_citation` ones (file id and file name).
fn output_text(part: &Value) -> ContentBlock {
    let annotations = part
        .get("annotations")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|a| match str_at(a, "type") {
            Some("url_citation") => super::url_annotation(a),
            Some("file_citation") => Some(AnnotationRef {
                file_id: str_at(a, "file_id").map(str::to_owned),
                title: str_at(a, "filename").map(str::to_owned),
                ..AnnotationRef::default()
            }),
            _ => None,
        })
        .collect();
    ContentBlock::Text(TextBlock {
        annotations,
        ..TextBlock::new(str_at(part, "text").unwrap_or(""))
    })
}

/// A whole Responses request body, from [`ModelRequest::to_openai_responses`]: `model`,
/// `input` and `instructions` first, then the optional parameters alphabetically, each
/// written only when set.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ResponsesBody<'a> {
    /// The model.
    pub model: &'a str,
    /// The conversation's items.
    pub input: Vec<ResponsesItem<'a>>,
    /// The system prompt.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub instructions: Option<String>,
    /// `max_output_tokens`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_output_tokens: Option<u32>,
    /// `reasoning`: `{"effort"}`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<ResponsesReasoning>,
    /// `temperature`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    /// `text`: `{"format": {"type": "json_schema", ...}}`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub text: Option<ResponsesText<'a>>,
    /// `tool_choice`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<ResponsesToolChoice<'a>>,
    /// `tools`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<ResponsesTool<'a>>,
    /// `top_p`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub top_p: Option<f64>,
}

/// `{"effort"}`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ResponsesReasoning {
    /// The effort.
    pub effort: Effort,
}

/// `{"format"}`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ResponsesText<'a> {
    /// `{"type": "json_schema", "name", "description"?, "schema", "strict"}`.
    pub format: JsonSchemaFormat<'a>,
}

/// A Responses function tool: `{"type": "function", "name", "description", "parameters",
/// "strict"}`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ResponsesTool<'a> {
    /// Always `"function"`.
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// The name.
    pub name: &'a str,
    /// What it does.
    pub description: &'a str,
    /// The arguments' JSON Schema (rewritten for OpenAI's strict mode when the tool is
    /// strict).
    pub parameters: Cow<'a, Value>,
    /// Whether the arguments must follow the schema exactly (written always: Responses
    /// makes a tool without it strict).
    pub strict: bool,
}

/// A Responses `tool_choice`: `"auto"`, `"none"`, `"required"` or `{"type": "function",
/// "name"}`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum ResponsesToolChoice<'a> {
    /// `"auto"`, `"none"` or `"required"`.
    Mode(&'static str),
    /// `{"type": "function", "name"}`.
    Function {
        /// Always `"function"`.
        #[serde(rename = "type")]
        kind: &'static str,
        /// The tool.
        name: &'a str,
    },
}

const RESPONSES: &str = "OpenAI Responses";

impl ModelRequest {
    /// The whole OpenAI Responses body of this request and a conversation (see
    /// [`ModelRequest`] for where each parameter goes and what is refused:
    /// Responses has no `stop`, `seed`, penalties or `top_k`).
    ///
    /// ```
    /// use agentstate::message::{Message, Role};
    /// use agentstate::providers::{Effort, ModelRequest, OutputSchema};
    /// use serde_json::json;
    ///
    /// let request = ModelRequest::builder("o4-mini")
    ///     .reasoning_effort(Effort::Low)
    ///     .output_schema(OutputSchema::new("answer", json!({"type": "object"})))
    ///     .build()?;
    /// let messages = [Message::text_message("Hi", Role::User)];
    /// let body = serde_json::to_value(request.to_openai_responses(&messages)?.request).unwrap();
    /// assert_eq!(body["reasoning"], json!({"effort": "low"}));
    /// // Strict (the default): the schema is closed, as OpenAI's strict mode requires.
    /// assert_eq!(body["text"]["format"],
    ///     json!({"type": "json_schema", "name": "answer", "strict": true,
    ///            "schema": {"type": "object", "additionalProperties": false, "properties": {}, "required": []}}));
    ///
    /// let stopped = ModelRequest::builder("o4-mini").stop("END").build()?;
    /// assert!(stopped.to_openai_responses(&messages).is_err());
    /// # Ok::<(), agentstate::providers::RequestError>(())
    /// ```
    pub fn to_openai_responses<'a>(
        &'a self,
        conversation: impl Into<Conversation<'a>>,
    ) -> Result<Converted<ResponsesBody<'a>>, RequestError> {
        self.refuse(
            RESPONSES,
            &[
                Param::TopK,
                Param::Stop,
                Param::Seed,
                Param::FrequencyPenalty,
                Param::PresencePenalty,
            ],
        )?;
        let effort = openai_effort(self, RESPONSES)?;
        let conversation = conversation.into();
        let (instructions, input, mut report) =
            self::conversation(conversation.messages, conversation.summary);
        self.note_cache(&mut report);
        let s = self.sampling();
        let body = ResponsesBody {
            model: self.model(),
            input,
            instructions,
            max_output_tokens: self.max_output_tokens(),
            reasoning: effort.map(|effort| ResponsesReasoning { effort }),
            temperature: s.temperature,
            text: self
                .output_schema()
                .map(|output| {
                    Ok::<_, RequestError>(ResponsesText {
                        format: json_schema_format(output, Some("json_schema"), RESPONSES)?,
                    })
                })
                .transpose()?,
            tool_choice: self.tool_choice().map(|choice| match choice {
                ToolChoice::Tool(name) => ResponsesToolChoice::Function {
                    kind: "function",
                    name,
                },
                other => ResponsesToolChoice::Mode(openai_mode(other)),
            }),
            tools: self
                .tools()
                .iter()
                .map(|tool| {
                    Ok(ResponsesTool {
                        kind: "function",
                        name: &tool.name,
                        description: &tool.description,
                        parameters: tool.schema_for(Dialect::OpenAi, RESPONSES)?,
                        strict: tool.strict,
                    })
                })
                .collect::<Result<_, RequestError>>()?,
            top_p: s.top_p,
        };
        Ok(Converted::new(body, report))
    }
}

#[cfg(feature = "async-openai")]
impl TryFrom<&ResponsesBody<'_>> for async_openai::types::responses::CreateResponse {
    type Error = serde_json::Error;

    /// The body as async-openai's request (feature `async-openai`), to send with its client.
    fn try_from(body: &ResponsesBody<'_>) -> Result<Self, Self::Error> {
        serde_json::from_value(serde_json::to_value(body)?)
    }
}
