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
/// (as the message's `tools_calls` entry has it), or streamed (Vertex AI's
/// `stream_function_call_arguments`: a first part with the name, then `partialArgs`, each a
/// value at a JSON path, a string continuing the one at its path, with `willContinue` until
/// the call's last part): such a call gives an empty delta when it starts and its arguments'
/// JSON text when its last part (or the `finishReason`) comes. The last `usageMetadata`, `modelVersion`
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
    /// The function call whose arguments are being streamed (`partialArgs`).
    open: Option<OpenCall>,
    /// The candidate's fields the message reads besides its parts and finish reason: the last
    /// `groundingMetadata`, `finishMessage` and `safetyRatings`.
    candidate: Map<String, Value>,
    /// The citations of every chunk's `citationMetadata`, each once.
    citations: Vec<Value>,
}

/// A function call streamed in parts (Vertex AI's `stream_function_call_arguments`): its
/// first part has the name, each one `partialArgs` (a value at a JSON path; a string continues
/// the one at its path), and `willContinue` until its last.
#[derive(Debug, Clone)]
struct OpenCall {
    /// The provider's id, if any.
    id: Option<String>,
    /// The id of the deltas.
    delta_id: String,
    name: String,
    args: Value,
    signature: Option<String>,
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
                let streamed = get(&call, "partialArgs", "partial_args")
                    .and_then(Value::as_array)
                    .is_some_and(|p| !p.is_empty())
                    || get(&call, "willContinue", "will_continue").and_then(Value::as_bool)
                        == Some(true);
                let name = call.get("name").and_then(Value::as_str);
                if streamed || (self.open.is_some() && name.is_none()) {
                    let signature = part.signature.as_deref();
                    self.stream_call(&call, signature, event, deltas)?;
                    continue;
                }
                // A whole call: one open before it is finished.
                self.close_call(deltas);
                let Some(name) = name else {
                    // An empty call, as ends a streamed one (none is open): nothing to read.
                    continue;
                };
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
        if self.finish_reason.is_some() {
            // The answer is finished: so is a streamed call still open.
            self.close_call(deltas);
        }
        Ok(())
    }

    fn finish(mut self) -> Result<ParsedResponse, StreamError> {
        if self.finish_reason.is_none() {
            return Err(StreamError::Incomplete {
                provider: PROVIDER,
                events: self.events.count,
                expected: "a candidate's `finishReason`",
            });
        }
        // A streamed call still open when the answer finished is whole.
        self.close_call(&mut Vec::new());
        let parsed = from_gemini(&self.response()?)?;
        Ok(self.events.stamp(parsed))
    }
}

impl GeminiStream {
    /// Reads a part of a streamed function call: its first opens it (a delta announces it),
    /// each applies its `partialArgs` (and `args`), the one without `willContinue` closes it.
    fn stream_call(
        &mut self,
        call: &Value,
        signature: Option<&str>,
        event: &str,
        deltas: &mut Vec<Delta>,
    ) -> Result<(), StreamError> {
        let name = call.get("name").and_then(Value::as_str);
        let id = call.get("id").and_then(Value::as_str);
        if let (Some(open), Some(name)) = (&self.open, name) {
            if open.name != name || id.is_some_and(|id| open.id.as_deref() != Some(id)) {
                self.close_call(deltas); // another call starts
            }
        }
        if self.open.is_none() {
            let name = name.ok_or_else(|| {
                self.events.malformed(
                    PROVIDER,
                    event,
                    "the first part of a streamed function call has no `name`",
                )
            })?;
            let delta_id = id.map_or_else(|| format!("call_{}", self.calls), str::to_owned);
            self.calls += 1;
            let message_id = self.events.message_id();
            deltas.push(Delta::ToolCall {
                message_id,
                tool_call_id: delta_id.clone(),
                name: name.to_owned(),
                delta: String::new(),
            });
            self.open = Some(OpenCall {
                id: id.map(str::to_owned),
                delta_id,
                name: name.to_owned(),
                args: Value::Object(Map::new()),
                signature: None,
            });
        }
        let events = &self.events;
        let Some(open) = self.open.as_mut() else {
            return Ok(());
        };
        if open.signature.is_none() {
            open.signature = signature.map(str::to_owned);
        }
        if let (Some(Value::Object(args)), Value::Object(into)) = (call.get("args"), &mut open.args)
        {
            into.extend(args.iter().map(|(k, v)| (k.clone(), v.clone())));
        }
        let partial = get(call, "partialArgs", "partial_args").and_then(Value::as_array);
        for arg in partial.into_iter().flatten() {
            apply_partial(&mut open.args, arg)
                .map_err(|reason| events.malformed(PROVIDER, event, reason))?;
        }
        if get(call, "willContinue", "will_continue").and_then(Value::as_bool) != Some(true) {
            self.close_call(deltas);
        }
        Ok(())
    }

    /// Ends the streamed function call, if one is open: the part it makes, and a delta with
    /// its arguments' JSON text.
    fn close_call(&mut self, deltas: &mut Vec<Delta>) {
        let Some(open) = self.open.take() else {
            return;
        };
        let mut function_call = Map::new();
        if let Some(id) = open.id {
            function_call.insert("id".into(), Value::from(id));
        }
        function_call.insert("name".into(), Value::from(open.name.as_str()));
        let delta = python_json::to_string(&open.args);
        function_call.insert("args".into(), open.args);
        let mut part = Map::new();
        part.insert("functionCall".into(), Value::Object(function_call));
        if let Some(signature) = open.signature {
            part.insert("thoughtSignature".into(), Value::from(signature));
        }
        self.parts.push(Part::Other(Value::Object(part)));
        let message_id = self.events.message_id();
        deltas.push(Delta::ToolCall {
            message_id,
            tool_call_id: open.delta_id,
            name: open.name,
            delta,
        });
    }
}

/// A key in the REST API's camelCase or the proto's snake_case.
fn get<'a>(value: &'a Value, camel: &str, snake: &str) -> Option<&'a Value> {
    value.get(camel).or_else(|| value.get(snake))
}

/// Applies one `PartialArg` (`{"jsonPath", "stringValue" | "numberValue" | "boolValue" |
/// "nullValue", "willContinue"?}`) to the arguments: its value at its path, a string appended
/// to the string already there.
fn apply_partial(args: &mut Value, arg: &Value) -> Result<(), String> {
    let path = get(arg, "jsonPath", "json_path")
        .and_then(Value::as_str)
        .ok_or("a partial argument has no `jsonPath`")?;
    let value = if let Some(text) = get(arg, "stringValue", "string_value") {
        text.clone()
    } else if let Some(number) = get(arg, "numberValue", "number_value") {
        number.clone()
    } else if let Some(flag) = get(arg, "boolValue", "bool_value") {
        flag.clone()
    } else if get(arg, "nullValue", "null_value").is_some() {
        Value::Null
    } else {
        return Ok(()); // a path announced before its value
    };
    let slot = slot(args, path)?;
    match (slot, value) {
        (Value::String(at), Value::String(more)) => at.push_str(&more),
        (slot, value) => *slot = value,
    }
    Ok(())
}

/// The place a JSON path (`$.a.b[0]`, `$['a']`) names in `root`, made (objects, arrays
/// padded with `null`) where it does not exist yet.
fn slot<'v>(root: &'v mut Value, path: &str) -> Result<&'v mut Value, String> {
    let bad = || format!("the partial argument's path `{path}` is not a JSON path");
    let mut rest = path.strip_prefix('$').ok_or_else(bad)?;
    let mut at = root;
    while !rest.is_empty() {
        enum Step<'p> {
            Key(&'p str),
            Index(usize),
        }
        let step;
        if let Some(after) = rest.strip_prefix('.') {
            let end = after.find(['.', '[']).unwrap_or(after.len());
            step = Step::Key(&after[..end]);
            rest = &after[end..];
        } else if let Some(after) = rest.strip_prefix('[') {
            let end = after.find(']').ok_or_else(bad)?;
            let inner = &after[..end];
            rest = &after[end + 1..];
            step = match inner.strip_prefix(['\'', '"']) {
                Some(quoted) => Step::Key(
                    quoted
                        .get(..quoted.len().saturating_sub(1))
                        .ok_or_else(bad)?,
                ),
                None => Step::Index(inner.parse().map_err(|_| bad())?),
            };
        } else {
            return Err(bad());
        }
        at = match step {
            Step::Key(key) => {
                if key.is_empty() {
                    return Err(bad());
                }
                if !at.is_object() {
                    *at = Value::Object(Map::new());
                }
                match at {
                    Value::Object(map) => map.entry(key).or_insert(Value::Null),
                    _ => return Err(bad()),
                }
            }
            Step::Index(index) => {
                if index > 100_000 {
                    return Err(bad());
                }
                if !at.is_array() {
                    *at = Value::Array(Vec::new());
                }
                match at {
                    Value::Array(items) => {
                        if items.len() <= index {
                            items.resize(index + 1, Value::Null);
                        }
                        &mut items[index]
                    }
                    _ => return Err(bad()),
                }
            }
        };
    }
    Ok(at)
}

/// A part kept whole.
fn parse(raw: &RawValue, events: &Events, event: &str) -> Result<Value, StreamError> {
    serde_json::from_str(raw.get()).map_err(|e| events.malformed(PROVIDER, event, e))
}
