//! Messages on the LangGraph API's wire: LangChain's message dicts out, and in whatever shape
//! LangGraph's `add_messages` takes (LangChain dicts, OpenAI-style `role` dicts, plain
//! strings, `[role, content]` pairs), while the state keeps AgentFlow's [`Message`]s.
//!
//! Only the state's message fields (those merged by a messages reducer) are converted; every
//! other field goes through as it is.
//!
//! [`Message`]: agentstate::message::Message

use agentstate::State;
use serde_json::{json, Map, Value};
use std::any::TypeId;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

/// The reducers whose fields hold messages.
const MESSAGE_REDUCERS: [&str; 3] = ["add_messages", "replace_messages", "upsert_messages"];

/// The names of `S`'s message fields (read from its schema once per type).
pub(crate) fn message_fields<S: State + 'static>() -> Arc<[String]> {
    static FIELDS: OnceLock<Mutex<HashMap<TypeId, Arc<[String]>>>> = OnceLock::new();
    let mut known = FIELDS
        .get_or_init(Mutex::default)
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    Arc::clone(known.entry(TypeId::of::<S>()).or_insert_with(|| {
        S::schema()
            .fields()
            .iter()
            .filter(|field| MESSAGE_REDUCERS.contains(&field.reducer.name.as_str()))
            .map(|field| field.name.clone())
            .collect()
    }))
}

/// A state's or an update's JSON with its message fields (`fields`) as LangChain's dicts.
pub(crate) fn outgoing(mut value: Value, fields: &[String]) -> Value {
    if let Value::Object(object) = &mut value {
        for field in fields {
            if let Some(Value::Array(messages)) = object.get_mut(field) {
                for message in messages.iter_mut() {
                    *message = to_langchain(message);
                }
            }
        }
    }
    value
}

/// An input's JSON with its message fields (`fields`) as AgentFlow's messages; what is not a
/// message the client could have meant is left for the state's own check to refuse.
pub(crate) fn incoming(mut value: Value, fields: &[String]) -> Value {
    if let Value::Object(object) = &mut value {
        for field in fields {
            match object.get_mut(field) {
                Some(Value::Array(messages)) => {
                    for message in messages.iter_mut() {
                        if let Some(converted) = from_langchain(message) {
                            *message = converted;
                        }
                    }
                }
                // One message on its own, as `add_messages` takes it.
                Some(one @ (Value::String(_) | Value::Object(_))) => {
                    if let Some(converted) = from_langchain(one) {
                        *one = Value::Array(vec![converted]);
                    }
                }
                _ => {}
            }
        }
    }
    value
}

/// LangChain's message type of an AgentFlow role.
fn langchain_type(role: &str) -> &str {
    match role {
        "user" => "human",
        "assistant" => "ai",
        other => other,
    }
}

/// AgentFlow's role of a LangChain type or an OpenAI-style role.
fn agentflow_role(kind: &str) -> Option<&'static str> {
    Some(match kind {
        "human" | "user" | "HumanMessage" | "HumanMessageChunk" => "user",
        "ai" | "assistant" | "AIMessage" | "AIMessageChunk" => "assistant",
        "system" | "developer" | "SystemMessage" => "system",
        "tool" | "ToolMessage" => "tool",
        _ => return None,
    })
}

/// An AgentFlow message (as the state serializes it) as LangChain's dict: `type`, `content` (a
/// string when it is text only, else LangChain's content blocks), `id`, and for an assistant
/// its `tool_calls` and `usage_metadata`, for a tool result its `tool_call_id` and `status`.
/// Anything else is returned as it is.
pub(crate) fn to_langchain(message: &Value) -> Value {
    let Some(object) = message.as_object() else {
        return message.clone();
    };
    let Some(role) = object.get("role").and_then(Value::as_str) else {
        return message.clone();
    };
    let blocks = object
        .get("content")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let id = match object.get("message_id") {
        Some(Value::String(id)) => Value::String(id.clone()),
        Some(Value::Number(id)) => Value::String(id.to_string()),
        _ => Value::Null,
    };
    let metadata = object.get("metadata").cloned().unwrap_or(json!({}));
    let mut out = Map::new();
    out.insert("type".into(), Value::from(langchain_type(role)));
    out.insert("content".into(), content(blocks));
    out.insert("id".into(), id);
    out.insert("name".into(), Value::Null);
    out.insert("additional_kwargs".into(), json!({}));
    out.insert("response_metadata".into(), metadata.clone());
    match role {
        "assistant" => {
            let calls: Vec<Value> = blocks
                .iter()
                .filter(|b| {
                    matches!(
                        b.get("type").and_then(Value::as_str),
                        Some("tool_call" | "remote_tool_call")
                    )
                })
                .map(|b| {
                    json!({
                        "name": b.get("name").cloned().unwrap_or(Value::Null),
                        "args": b.get("args").cloned().unwrap_or(json!({})),
                        "id": b.get("id").cloned().unwrap_or(Value::Null),
                        "type": "tool_call",
                    })
                })
                .collect();
            out.insert("tool_calls".into(), Value::Array(calls));
            out.insert("invalid_tool_calls".into(), json!([]));
            out.insert("usage_metadata".into(), usage(object.get("usages")));
        }
        "tool" => {
            let result = blocks
                .iter()
                .find(|b| b.get("type").and_then(Value::as_str) == Some("tool_result"));
            let call_id = result
                .and_then(|r| r.get("call_id"))
                .or_else(|| metadata.get("tool_call_id"))
                .cloned()
                .unwrap_or(Value::Null);
            let failed = result
                .and_then(|r| r.get("is_error"))
                .and_then(Value::as_bool)
                .unwrap_or(false);
            if let Some(output) = result.and_then(|r| r.get("output")) {
                let text = match output {
                    Value::String(text) => text.clone(),
                    other => other.to_string(),
                };
                out.insert("content".into(), Value::String(text));
            }
            out.insert("tool_call_id".into(), call_id);
            out.insert(
                "name".into(),
                metadata
                    .get("function_name")
                    .cloned()
                    .unwrap_or(Value::Null),
            );
            out.insert(
                "status".into(),
                Value::from(if failed { "error" } else { "success" }),
            );
        }
        _ => {}
    }
    Value::Object(out)
}

/// LangChain's content of AgentFlow's blocks: one string when they are all text, else the
/// blocks LangChain knows (text, image by URL or data) and the others as they are. Tool calls
/// and results are not content in LangChain's dicts (they are `tool_calls`, `tool_call_id`).
fn content(blocks: &[Value]) -> Value {
    let kind = |b: &Value| b.get("type").and_then(Value::as_str).map(str::to_owned);
    let shown: Vec<&Value> = blocks
        .iter()
        .filter(|b| {
            !matches!(
                kind(b).as_deref(),
                Some("tool_call" | "remote_tool_call" | "tool_result")
            )
        })
        .collect();
    if shown.iter().all(|b| kind(b).as_deref() == Some("text")) {
        let text: String = shown
            .iter()
            .filter_map(|b| b.get("text").and_then(Value::as_str))
            .collect();
        return Value::String(text);
    }
    Value::Array(
        shown
            .into_iter()
            .map(|block| match kind(block).as_deref() {
                Some("text") => json!({"type": "text", "text": block.get("text").cloned().unwrap_or(Value::Null)}),
                Some("image") => match block.get("media") {
                    Some(media) if media.get("url").is_some_and(Value::is_string) => {
                        json!({"type": "image_url", "image_url": {"url": media["url"]}})
                    }
                    Some(media) if media.get("data_base64").is_some_and(Value::is_string) => {
                        let mime = media
                            .get("mime_type")
                            .and_then(Value::as_str)
                            .unwrap_or("image/png");
                        let data = media["data_base64"].as_str().unwrap_or_default();
                        json!({"type": "image_url", "image_url": {"url": format!("data:{mime};base64,{data}")}})
                    }
                    _ => block.clone(),
                },
                _ => block.clone(),
            })
            .collect(),
    )
}

/// LangChain's `usage_metadata` of AgentFlow's `usages`.
fn usage(usages: Option<&Value>) -> Value {
    match usages {
        Some(Value::Object(u)) => {
            let n = |key: &str| u.get(key).and_then(Value::as_u64).unwrap_or(0);
            json!({
                "input_tokens": n("prompt_tokens"),
                "output_tokens": n("completion_tokens"),
                "total_tokens": n("total_tokens"),
            })
        }
        _ => Value::Null,
    }
}

/// A message in a shape `add_messages` takes, as AgentFlow's message JSON; `None` when it is
/// already AgentFlow's (content blocks) or is no message shape at all.
pub(crate) fn from_langchain(message: &Value) -> Option<Value> {
    let (role, content, object) = match message {
        Value::String(text) => ("user", Value::String(text.clone()), None),
        Value::Array(pair) if pair.len() == 2 => {
            let role = agentflow_role(pair[0].as_str()?)?;
            (role, pair[1].clone(), None)
        }
        Value::Object(object) => {
            // AgentFlow's own: a role and a list of typed blocks.
            let blocks = object.get("content").and_then(Value::as_array);
            if object.contains_key("role")
                && !object.contains_key("type")
                && blocks.is_some_and(|b| b.iter().all(|b| b.get("type").is_some()))
                && !object.contains_key("tool_calls")
                && !object.contains_key("tool_call_id")
            {
                return None;
            }
            let kind = object
                .get("type")
                .or_else(|| object.get("role"))
                .and_then(Value::as_str)?;
            let role = agentflow_role(kind)?;
            let content = object.get("content").cloned().unwrap_or(Value::Null);
            (role, content, Some(object))
        }
        _ => return None,
    };
    let mut blocks = match content {
        Value::String(text) => vec![json!({"type": "text", "text": text})],
        Value::Array(parts) => parts.into_iter().map(block_in).collect(),
        Value::Null => Vec::new(),
        other => vec![json!({"type": "text", "text": other.to_string()})],
    };
    let mut out = Map::new();
    if let Some(object) = object {
        if let Some(id) = object.get("id").filter(|id| id.is_string()) {
            out.insert("message_id".into(), id.clone());
        }
        if role == "assistant" {
            for call in object
                .get("tool_calls")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                blocks.push(tool_call_in(call));
            }
        }
        if role == "tool" {
            let output = match blocks.as_slice() {
                [one] if one.get("type").and_then(Value::as_str) == Some("text") => {
                    one["text"].clone()
                }
                _ => Value::Array(blocks.clone()),
            };
            let failed = object.get("status").and_then(Value::as_str) == Some("error");
            blocks = vec![json!({
                "type": "tool_result",
                "call_id": object.get("tool_call_id").cloned().unwrap_or(Value::Null),
                "output": output,
                "is_error": failed,
                "status": if failed { "failed" } else { "completed" },
            })];
            if let Some(name) = object.get("name").filter(|n| n.is_string()) {
                out.insert("metadata".into(), json!({"function_name": name}));
            }
        }
    }
    out.insert("role".into(), Value::from(role));
    out.insert("content".into(), Value::Array(blocks));
    Some(Value::Object(out))
}

/// One of LangChain's (or OpenAI's) content parts as AgentFlow's block.
fn block_in(part: Value) -> Value {
    match part {
        Value::String(text) => json!({"type": "text", "text": text}),
        Value::Object(ref object) => match object.get("type").and_then(Value::as_str) {
            Some("image_url") => {
                let url = object
                    .get("image_url")
                    .and_then(|i| i.get("url").or(Some(i)))
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                match url
                    .strip_prefix("data:")
                    .and_then(|d| d.split_once(";base64,"))
                {
                    Some((mime, data)) => {
                        json!({"type": "image", "media": {"kind": "data", "data_base64": data, "mime_type": mime}})
                    }
                    None => json!({"type": "image", "media": {"kind": "url", "url": url}}),
                }
            }
            _ => part,
        },
        other => json!({"type": "text", "text": other.to_string()}),
    }
}

/// A tool call of LangChain's (`name`, `args`, `id`) or OpenAI's (`function.name`,
/// `function.arguments` as a JSON string) as AgentFlow's `tool_call` block.
fn tool_call_in(call: &Value) -> Value {
    let function = call.get("function");
    let name = call
        .get("name")
        .or_else(|| function.and_then(|f| f.get("name")))
        .cloned()
        .unwrap_or(Value::Null);
    let args = match (call.get("args"), function.and_then(|f| f.get("arguments"))) {
        (Some(args), _) => args.clone(),
        (None, Some(Value::String(text))) => {
            serde_json::from_str(text).unwrap_or(Value::String(text.clone()))
        }
        (None, Some(args)) => args.clone(),
        (None, None) => json!({}),
    };
    json!({"type": "tool_call", "id": call.get("id").cloned().unwrap_or(Value::Null), "name": name, "args": args})
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentstate::message::{Message, MessageId, Role};

    fn agentflow(value: Value) -> Message {
        serde_json::from_value(value).expect("an AgentFlow message")
    }

    #[test]
    fn the_shapes_add_messages_takes_become_agentflow_messages() {
        let cases = [
            json!("hi"),
            json!(["user", "hi"]),
            json!({"role": "user", "content": "hi"}),
            json!({"type": "human", "content": "hi", "id": "m-1"}),
            json!({"type": "human", "content": [{"type": "text", "text": "hi"}]}),
        ];
        for case in cases {
            let message = agentflow(from_langchain(&case).unwrap());
            assert_eq!(
                (message.role, message.text()),
                (Role::User, "hi".to_owned()),
                "{case}"
            );
        }
        let with_id = agentflow(
            from_langchain(&json!({"type": "human", "content": "hi", "id": "m-1"})).unwrap(),
        );
        assert_eq!(with_id.message_id, MessageId::Str("m-1".into()));
        // AgentFlow's own and what is no message are left alone.
        let own = json!({"role": "user", "content": [{"type": "text", "text": "hi"}]});
        assert_eq!(from_langchain(&own), None);
        assert_eq!(from_langchain(&json!(42)), None);
        assert_eq!(
            from_langchain(&json!({"type": "alien", "content": "x"})),
            None
        );
    }

    #[test]
    fn tool_calls_and_results_round_trip() {
        let ai = json!({"type": "ai", "content": "", "tool_calls": [{"name": "weather", "args": {"city": "Paris"}, "id": "c-1"}]});
        let openai = json!({"role": "assistant", "content": null, "tool_calls": [{"id": "c-1", "type": "function", "function": {"name": "weather", "arguments": "{\"city\": \"Paris\"}"}}]});
        for case in [ai, openai] {
            let message = from_langchain(&case).unwrap();
            agentflow(message.clone());
            let back = to_langchain(&message);
            assert_eq!(back["type"], "ai");
            assert_eq!(
                back["tool_calls"],
                json!([{"name": "weather", "args": {"city": "Paris"}, "id": "c-1", "type": "tool_call"}])
            );
        }
        let tool =
            json!({"type": "tool", "content": "Sunny", "tool_call_id": "c-1", "name": "weather"});
        let message = from_langchain(&tool).unwrap();
        agentflow(message.clone());
        let back = to_langchain(&message);
        assert_eq!(
            (
                back["type"].as_str(),
                back["content"].as_str(),
                back["tool_call_id"].as_str(),
                back["status"].as_str()
            ),
            (Some("tool"), Some("Sunny"), Some("c-1"), Some("success"))
        );
        assert_eq!(back["name"], "weather");
    }

    #[test]
    fn agentflow_messages_go_out_as_langchain_dicts() {
        let path = std::env::var("AGENTSTATE_WIRE_DIR").ok();
        let Some(dir) = path else {
            println!("skipped the wire fixtures: AGENTSTATE_WIRE_DIR is not set");
            return;
        };
        let text =
            std::fs::read_to_string(std::path::Path::new(&dir).join("agentflow-messages.json"))
                .unwrap();
        let file: Value = serde_json::from_str(&text).unwrap();
        let fixtures = file["messages"].as_array().expect("the fixtures' messages");
        assert_eq!(fixtures.len(), 20);
        for fixture in fixtures {
            let dump = &fixture["dump"];
            let out = to_langchain(dump);
            let expected_type = langchain_type(dump["role"].as_str().unwrap());
            assert_eq!(out["type"], expected_type, "{dump}");
            assert!(out["id"].is_string(), "{out}");
            // Text-only content is one string, the message's text.
            if out["content"].is_string() && dump["role"] != "tool" {
                assert_eq!(
                    out["content"].as_str().unwrap(),
                    fixture["text"].as_str().unwrap_or_default(),
                    "{dump}"
                );
            }
        }
    }

    #[test]
    fn only_message_fields_are_converted() {
        let fields = vec!["messages".to_owned()];
        let input = json!({"messages": [{"role": "user", "content": "hi"}], "log": ["hi"]});
        let converted = incoming(input, &fields);
        assert_eq!(converted["log"], json!(["hi"]));
        assert_eq!(
            converted["messages"][0]["content"],
            json!([{"type": "text", "text": "hi"}])
        );
        let single = incoming(json!({"messages": "hi"}), &fields);
        assert_eq!(single["messages"][0]["role"], "user");
        let out = outgoing(
            json!({"messages": [converted["messages"][0].clone()], "log": ["hi"]}),
            &fields,
        );
        assert_eq!(
            (
                out["messages"][0]["type"].as_str(),
                out["messages"][0]["content"].as_str()
            ),
            (Some("human"), Some("hi"))
        );
        assert_eq!(out["log"], json!(["hi"]));
    }
}
