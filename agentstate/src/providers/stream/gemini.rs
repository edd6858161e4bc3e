//! The Gemini stream (`streamGenerateContent?alt=sse`): each event is a
//! `GenerateContentResponse` holding the next parts of the first candidate, read into the
//! message [`from_gemini`] gives for the same answer.

use super::{error_parts, Accumulator, Delta, Events, StreamError};
use crate::message::python_json;
use crate::providers::{from_gemini, ParsedResponse};
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value};
use std::borrow::Cow;

const PROVIDER: &str = "Gemini";

/// The accumulator of a Gemini stream.
///
/// The Gemini stream (`streamGenerateContent?alt=sse`): each event is a
/// `GenerateContentResponse` holding the next parts of the first candidate, read into the
/// message [`from_gemini`] gives for the same answer.
///
/// A text part continues the text (or thought) part before it, as the non-streamed response
/// has one part where the stream sent several; a `thoughtSignature` stays on the part that
/// carried it. Function calls come whole, each giving one delta with its arguments' JSON text
/// (as the message's `tools_calls` entry has it). The last `usageMetadata`, `modelVersion`
/// and `responseId` are kept, as are the candidate's last `groundingMetadata`, `finishMessage`
/// and `safetyRatings` and every chunk's citations; a `finishReason` ends the answer. A chunk
/// with an `error` is an error.
///
/// ```
/// use agentstate::providers::stream::{Accumulator, Delta, GeminiStream};
///
/// let mut stream = GeminiStream::new();
/// let mut deltas = Vec::new();
/// for data in [
///     r#"{"candidates": [{"content": {"parts": [{"text": "The sky"}],"role": "model"}}],"responseId": "r1"}"#,
///     r#"{"candidates": [{"content": {"parts": [{"text": " is blue."}],"role": "model"},"finishReason": "STOP"}],
///         "usageMetadata": {"promptTokenCount": 5,"candidatesTokenCount": 4,"totalTokenCount": 9},"responseId": "r1"}"#,
/// ] {
///     stream.push_event("message", data, &mut deltas)?;
/// }
/// let message = stream.finish()?.message;
/// assert_eq!(deltas[1], Delta::Text { message_id: message.message_id.to_string(), delta: " is blue.".into() });
/// assert_eq!(message.text(), "The sky is blue.");
/// assert_eq!(message.usages.as_ref().unwrap().total_tokens, 9);
/// # Ok::<(), agentstate::providers::stream::StreamError>(())
/// ```
#[derive(Debug, Clone, Default)]
pub struct GeminiStream {
    events: Events,
    /// The first `responseId`.
    id: Option<String>,
    model: Option<String>,
    /// The last `usageMetadata`'s JSON text (its buffer reused from chunk to chunk).
    usage: Option<String>,
    parts: Vec<Part>,
    calls: usize,
    finish_reason: Option<String>,
    /// The candidate's fields the message reads besides its parts and finish reason: the last
    /// `groundingMetadata`, `finishMessage` and `safetyRatings`.
    candidate: Map<String, Value>,
    /// The citations of every chunk's `citationMetadata`, each once.
    citations: Vec<Value>,
}

#[derive(Debug, Clone)]
enum Part {
    Text {
        text: String,
        thought: bool,
        signature: Option<String>,
    },
    /// A function call or a part the message has no block for, kept whole.
    Other(Value),
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Chunk<'a> {
    #[serde(borrow, default)]
    candidates: Vec<Candidate<'a>>,
    #[serde(borrow, default)]
    usage_metadata: Option<&'a RawValue>,
    #[serde(borrow, default)]
    model_version: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    response_id: Option<Cow<'a, str>>,
    #[serde(default)]
    error: Option<Value>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Candidate<'a> {
    #[serde(borrow, default)]
    content: Option<Content<'a>>,
    #[serde(borrow, default)]
    finish_reason: Option<Cow<'a, str>>,
    #[serde(default)]
    index: u64,
    #[serde(default, alias = "grounding_metadata")]
    grounding_metadata: Option<Value>,
    #[serde(default, alias = "citation_metadata")]
    citation_metadata: Option<Value>,
    #[serde(default, alias = "finish_message")]
    finish_message: Option<Value>,
    #[serde(default, alias = "safety_ratings")]
    safety_ratings: Option<Value>,
}

#[derive(Deserialize)]
struct Content<'a> {
    #[serde(borrow, default)]
    parts: Vec<&'a RawValue>,
}

#[derive(Deserialize)]
struct TextPart<'a> {
    #[serde(borrow, default)]
    text: Option<Cow<'a, str>>,
    #[serde(default)]
    thought: Option<bool>,
    #[serde(
        borrow,
        default,
        rename = "thoughtSignature",
        alias = "thought_signature"
    )]
    signature: Option<Cow<'a, str>>,
    #[serde(default, rename = "functionCall", alias = "function_call")]
    function_call: Option<Value>,
}

impl GeminiStream {
    /// An accumulator at the start of a stream.
    pub fn new() -> Self {
        GeminiStream::default()
    }

    /// The response Gemini would have sent without streaming.
    fn response(&self) -> Result<Value, StreamError> {
        let parts: Vec<Value> = self
            .parts
            .iter()
            .map(|part| match part {
                Part::Text {
                    text,
                    thought,
                    signature,
                } => {
                    let mut out = Map::new();
                    out.insert("text".into(), Value::from(text.as_str()));
                    if *thought {
                        out.insert("thought".into(), Value::Bool(true));
                    }
                    if let Some(signature) = signature {
                        out.insert("thoughtSignature".into(), Value::from(signature.as_str()));
                    }
                    Value::Object(out)
                }
                Part::Other(value) => value.clone(),
            })
            .collect();
        let mut candidate = Map::new();
        candidate.insert(
            "content".into(),
            serde_json::json!({"parts": parts, "role": "model"}),
        );
        if let Some(reason) = &self.finish_reason {
            candidate.insert("finishReason".into(), Value::from(reason.as_str()));
        }
        for (key, value) in &self.candidate {
            candidate.insert(key.clone(), value.clone());
        }
        if !self.citations.is_empty() {
            candidate.insert(
                "citationMetadata".into(),
                serde_json::json!({ "citations": self.citations }),
            );
        }
        candidate.insert("index".into(), Value::from(0));
        let mut response = Map::new();
        response.insert(
            "candidates".into(),
            Value::Array(vec![Value::Object(candidate)]),
        );
        if let Some(usage) = &self.usage {
            let usage: Value = serde_json::from_str(usage).map_err(|e| StreamError::Malformed {
                provider: PROVIDER,
                event: self.events.count,
                name: "message".into(),
                reason: format!("its `usageMetadata` is not valid JSON ({e})"),
            })?;
            response.insert("usageMetadata".into(), usage);
        }
        if let Some(model) = &self.model {
            response.insert("modelVersion".into(), Value::from(model.as_str()));
        }
        if let Some(id) = &self.id {
            response.insert("responseId".into(), Value::from(id.as_str()));
        }
        Ok(Value::Object(response))
    }
}

impl Accumulator for GeminiStream {
    const PROVIDER: &'static str = PROVIDER;

    fn push_event(
        &mut self,
        event: &str,
        data: &str,
        deltas: &mut Vec<Delta>,
    ) -> Result<(), StreamError> {
        self.events.count += 1;
        let chunk: Chunk<'_> =
            serde_json::from_str(data).map_err(|e| self.events.malformed(PROVIDER, event, e))?;
        if chunk.error.is_some() {
            let (code, message) = error_parts(chunk.error.as_ref());
            return Err(self.events.provider_error(PROVIDER, code, message));
        }
        if let Some(id) = chunk.response_id {
            if self.id.is_none() {
                self.id = Some(id.into_owned());
            }
        }
        if let Some(model) = chunk.model_version {
            self.model = Some(model.into_owned());
        }
        if let Some(usage) = chunk.usage_metadata {
            let text = self.usage.get_or_insert_with(String::new);
            text.clear();
            text.push_str(usage.get());
        }
        let Some(candidate) = chunk.candidates.into_iter().find(|c| c.index == 0) else {
            return Ok(());
        };
        if let Some(reason) = candidate.finish_reason {
            self.finish_reason = Some(reason.into_owned());
        }
        for (key, value) in [
            ("groundingMetadata", candidate.grounding_metadata),
            ("finishMessage", candidate.finish_message),
            ("safetyRatings", candidate.safety_ratings),
        ] {
            if let Some(value) = value.filter(|v| !v.is_null()) {
                self.candidate.insert(key.into(), value);
            }
        }
        if let Some(metadata) = candidate.citation_metadata {
            let list = metadata
                .get("citations")
                .or(metadata.get("citationSources"))
                .and_then(Value::as_array);
            for citation in list.into_iter().flatten() {
                if !self.citations.contains(citation) {
                    self.citations.push(citation.clone());
                }
            }
        }
        for raw in candidate.content.map(|c| c.parts).unwrap_or_default() {
            let part: TextPart<'_> = serde_json::from_str(raw.get())
                .map_err(|e| self.events.malformed(PROVIDER, event, e))?;
            if let Some(call) = part.function_call {
                let name = call.get("name").and_then(Value::as_str).ok_or_else(|| {
                    self.events
                        .malformed(PROVIDER, event, "a function call has no `name`")
                })?;
                let id = match call.get("id").and_then(Value::as_str) {
                    Some(id) => id.to_owned(),
                    None => format!("call_{}", self.calls),
                };
                let args = call
                    .get("args")
                    .cloned()
                    .unwrap_or(Value::Object(Map::new()));
                let delta = python_json::to_string(&args);
                let name = name.to_owned();
                self.calls += 1;
                let message_id = self.events.message_id();
                deltas.push(Delta::ToolCall {
                    message_id,
                    tool_call_id: id,
                    name,
                    delta,
                });
                self.parts
                    .push(Part::Other(parse(raw, &self.events, event)?));
                continue;
            }
            let Some(text) = part.text else {
                self.parts
                    .push(Part::Other(parse(raw, &self.events, event)?));
                continue;
            };
            let thought = part.thought == Some(true);
            let signature = part.signature.map(Cow::into_owned);
            if !text.is_empty() {
                let message_id = self.events.message_id();
                let delta = text.clone().into_owned();
                deltas.push(if thought {
                    Delta::Reasoning { message_id, delta }
                } else {
                    Delta::Text { message_id, delta }
                });
            }
            match self.parts.last_mut() {
                Some(Part::Text {
                    text: last,
                    thought: last_thought,
                    signature: last_signature,
                }) if *last_thought == thought
                    && (signature.is_none() || last_signature.is_none()) =>
                {
                    last.push_str(&text);
                    if signature.is_some() {
                        *last_signature = signature;
                    }
                }
                _ => self.parts.push(Part::Text {
                    text: text.into_owned(),
                    thought,
                    signature,
                }),
            }
        }
        Ok(())
    }

    fn finish(self) -> Result<ParsedResponse, StreamError> {
        if self.finish_reason.is_none() {
            return Err(StreamError::Incomplete {
                provider: PROVIDER,
                events: self.events.count,
                expected: "a candidate's `finishReason`",
            });
        }
        let parsed = from_gemini(&self.response()?)?;
        Ok(self.events.stamp(parsed))
    }
}

/// A part kept whole.
fn parse(raw: &RawValue, events: &Events, event: &str) -> Result<Value, StreamError> {
    serde_json::from_str(raw.get()).map_err(|e| events.malformed(PROVIDER, event, e))
}
