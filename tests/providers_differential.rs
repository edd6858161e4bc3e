//! Differential against AgentFlow 0.10.1's own request builders.
//!
//! `tests/data/providers_agentflow.json` holds real AgentFlow messages (each alone, then all
//! together) and random conversations, with what AgentFlow builds from them for OpenAI Chat,
//! OpenAI Responses, Anthropic and Gemini (written by `tests/data/providers_agentflow.py`,
//! so CI needs no Python). Each of our request bodies must equal AgentFlow's, except where a
//! conversation uses something AgentFlow gets wrong: those deliberate differences are the
//! "Where we differ from AgentFlow" list of `agentstate::providers`' docs, and each is named
//! here by a reason.
//!
//! Four differences are mechanical and normalised away before comparing, so that the rest of
//! such conversations is still compared: Anthropic `tool_result` blocks carry `is_error`
//! (AgentFlow never sets it), Gemini function calls and responses carry the call `id` and a
//! failed result under `error` (AgentFlow: no id, `result`), a Gemini result that is JSON
//! other than a string goes as its value (an object as the `response` itself; AgentFlow: its
//! JSON text under `result`, read back as JSON here), and Responses `input_image` parts carry
//! `"detail": "auto"` (required by the SDK's type; AgentFlow leaves it out).

use agentstate::message::{ContentBlock, MediaKind, Message, Role};
use agentstate::providers::anthropic::to_anthropic;
use agentstate::providers::gemini::to_gemini;
use agentstate::providers::openai_chat::to_openai_chat;
use agentstate::providers::openai_responses::to_openai_responses;
use agentstate::providers::{Issue, Report};
use serde_json::Value;
use std::collections::BTreeMap;

const PROVIDERS: [&str; 4] = ["openai_chat", "openai_responses", "anthropic", "gemini"];

fn fixture() -> Value {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/providers_agentflow.json"
    );
    let text = std::fs::read_to_string(path).expect("the differential fixture");
    serde_json::from_str(&text).expect("JSON")
}

fn convert(provider: &str, messages: &[Message]) -> (Value, Report) {
    match provider {
        "openai_chat" => {
            let c = to_openai_chat(messages, None);
            (serde_json::to_value(&c.request).unwrap(), c.report)
        }
        "openai_responses" => {
            let c = to_openai_responses(messages, None);
            (c.request, c.report)
        }
        "anthropic" => {
            let c = to_anthropic(messages, None);
            (c.request, c.report)
        }
        "gemini" => {
            let c = to_gemini(messages, None);
            (c.request, c.report)
        }
        _ => unreachable!(),
    }
}

/// The documented differences a conversation runs into with a provider.
fn differences(provider: &str, messages: &[Message], report: &Report) -> Vec<&'static str> {
    let mut reasons = Vec::new();
    let blocks = || messages.iter().flat_map(|m| &m.content);
    let openai = provider.starts_with("openai");
    if blocks().any(|b| matches!(b, ContentBlock::RemoteToolCall(_))) {
        reasons.push("remote_tool_call");
    }
    if blocks().any(|b| matches!(b, ContentBlock::Document(_))) {
        reasons.push("document");
    }
    if blocks().any(|b| matches!(b, ContentBlock::Video(_))) && provider != "anthropic" {
        reasons.push("video");
    }
    if !openai
        && report
            .notes()
            .iter()
            .any(|n| n.issue == Issue::EmptyMessage)
    {
        reasons.push("empty_message");
    }
    let audio = |data: bool| {
        blocks().any(
            |b| matches!(b, ContentBlock::Audio(a) if (a.media.kind == MediaKind::Data) == data),
        )
    };
    if provider == "openai_responses" && audio(true) {
        reasons.push("responses_audio");
    }
    // Media by file id: images (all providers; OpenAI: dropped with a note), documents
    // (Anthropic's `{"type": "file"}` source; OpenAI's `file` part is the `document`
    // reason), and for Gemini any media (`file_data`, reported when the id is not a URI).
    let by_file_id = |b: &ContentBlock| {
        let media = match b {
            ContentBlock::Image(i) => &i.media,
            ContentBlock::Document(d) if !openai => &d.media,
            ContentBlock::Audio(a) if provider == "gemini" => &a.media,
            ContentBlock::Video(v) if provider == "gemini" => &v.media,
            _ => return false,
        };
        media.kind == MediaKind::FileId
    };
    if blocks().any(by_file_id) {
        reasons.push("file_id");
    }
    // A tool result whose output is content blocks: sent as blocks and media (AgentFlow:
    // their JSON text).
    let output_blocks = |b: &ContentBlock| match b {
        ContentBlock::ToolResult(r) => {
            serde_json::from_str::<Vec<ContentBlock>>(r.output.as_json())
                .is_ok_and(|v| !v.is_empty())
        }
        _ => false,
    };
    if blocks().any(output_blocks) {
        reasons.push("tool_output_blocks");
    }
    if report
        .notes()
        .iter()
        .any(|n| matches!(n.issue, Issue::ToolCallIdRewritten { .. }))
    {
        reasons.push("anthropic_tool_id");
    }
    // A user message right after tool results joins their user turn (Anthropic, Gemini);
    // AgentFlow sends a second user turn.
    let joins = messages.windows(2).any(|pair| {
        let results = pair[0].role == Role::Tool
            || pair[0]
                .content
                .iter()
                .any(|b| matches!(b, ContentBlock::ToolResult(_)));
        results && pair[1].role == Role::User
    });
    if (provider == "anthropic" || provider == "gemini") && joins {
        reasons.push("user_after_tool_results");
    }
    if provider == "gemini" {
        if blocks().any(|b| matches!(b, ContentBlock::Image(i) if i.media.kind == MediaKind::Url)) {
            reasons.push("gemini_media_url");
        }
        let audio_url =
            blocks().any(|b| matches!(b, ContentBlock::Audio(a) if a.media.kind == MediaKind::Url));
        if audio_url {
            reasons.push("gemini_media_url");
        }
        if blocks().any(|b| matches!(b, ContentBlock::Data(_))) {
            reasons.push("gemini_data");
        }
    }
    reasons.dedup();
    reasons
}

/// Removes the mechanical differences (see the module docs) from our body.
fn normalise(provider: &str, mut body: Value) -> Value {
    fn walk(value: &mut Value, f: &mut dyn FnMut(&mut serde_json::Map<String, Value>)) {
        match value {
            Value::Object(map) => {
                f(map);
                for v in map.values_mut() {
                    walk(v, f);
                }
            }
            Value::Array(items) => items.iter_mut().for_each(|v| walk(v, f)),
            _ => {}
        }
    }
    match provider {
        "anthropic" => walk(&mut body, &mut |map| {
            if map.get("type").and_then(Value::as_str) == Some("tool_result") {
                map.remove("is_error");
            }
        }),
        "gemini" => walk(&mut body, &mut |map| {
            for key in ["function_call", "function_response"] {
                if let Some(Value::Object(inner)) = map.get_mut(key) {
                    inner.remove("id");
                    if let Some(Value::Object(response)) = inner.get_mut("response") {
                        match response.remove("error") {
                            // A failed result that is a JSON object, as a successful one goes.
                            Some(Value::Object(error)) => *response = error,
                            Some(error) => {
                                response.insert("result".into(), error);
                            }
                            None => {}
                        }
                    }
                }
            }
        }),
        "openai_responses" => walk(&mut body, &mut |map| {
            if map.get("type").and_then(Value::as_str) == Some("input_image") {
                map.remove("detail");
            }
        }),
        _ => {}
    }
    body
}

/// AgentFlow's Gemini function responses with their `result` text read as the JSON it is
/// (see the module docs): an object as the `response`, another value under `result`.
fn normalise_agentflow(provider: &str, mut body: Value) -> Value {
    if provider != "gemini" {
        return body;
    }
    for content in body["contents"].as_array_mut().into_iter().flatten() {
        for part in content["parts"].as_array_mut().into_iter().flatten() {
            let Some(response) = part
                .get_mut("function_response")
                .and_then(|f| f.get_mut("response"))
            else {
                continue;
            };
            let parsed = response["result"]
                .as_str()
                .and_then(|text| serde_json::from_str::<Value>(text).ok());
            match parsed {
                Some(object @ Value::Object(_)) => *response = object,
                Some(Value::String(_)) | None => {}
                Some(value) => response["result"] = value,
            }
        }
    }
    body
}

#[test]
fn requests_equal_agentflow_where_agentflow_is_right() {
    let fixture = fixture();
    let cases = fixture["cases"].as_array().expect("cases");
    assert!(cases.len() > 60, "{} cases", cases.len());
    let mut equal = BTreeMap::<&str, usize>::new();
    let mut differing = BTreeMap::<&str, usize>::new();
    let mut agentflow_failed = BTreeMap::<&str, usize>::new();
    let mut failures = Vec::new();
    for case in cases {
        let name = case["name"].as_str().unwrap();
        let messages: Vec<Message> =
            serde_json::from_value(case["messages"].clone()).expect("messages read");
        for provider in PROVIDERS {
            let (ours, report) = convert(provider, &messages);
            // Byte-stable: the same messages give the same bytes.
            let again = convert(provider, &messages).0;
            assert_eq!(
                serde_json::to_string(&ours).unwrap(),
                serde_json::to_string(&again).unwrap()
            );
            let Some(theirs) = case[provider].get("ok") else {
                *agentflow_failed.entry(provider).or_default() += 1;
                continue;
            };
            let reasons = differences(provider, &messages, &report);
            if !reasons.is_empty() {
                for reason in reasons {
                    *differing.entry(reason).or_default() += 1;
                }
                continue;
            }
            let ours = normalise(provider, ours);
            if ours == normalise_agentflow(provider, theirs.clone()) {
                *equal.entry(provider).or_default() += 1;
            } else {
                failures.push(format!(
                    "{name} / {provider}:\n  ours:      {ours}\n  agentflow: {theirs}\n  report: {report}"
                ));
            }
        }
    }
    eprintln!("equal to AgentFlow: {equal:?}");
    eprintln!("documented differences: {differing:?}");
    eprintln!("AgentFlow raised: {agentflow_failed:?}");
    assert!(
        failures.is_empty(),
        "{} requests differ from AgentFlow's:\n{}",
        failures.len(),
        failures.join("\n")
    );
    // Most conversations are compared in full.
    for provider in PROVIDERS {
        assert!(
            equal.get(provider).copied().unwrap_or(0) >= 40,
            "{provider}: {equal:?}"
        );
    }
}
