//! Provider formats: the rules of each converter, its report, and round trips through a
//! provider response built from the request.

use agentstate::message::{
    ContentBlock, MediaRef, Message, ReasoningBlock, Role, ToolCall, ToolCallBlock, ToolResultBlock,
};
use agentstate::providers::anthropic::{from_anthropic, to_anthropic};
use agentstate::providers::gemini::{from_gemini, to_gemini};
use agentstate::providers::openai_chat::{from_openai_chat, to_openai_chat};
use agentstate::providers::openai_responses::{from_openai_responses, to_openai_responses};
use agentstate::providers::{Action, Issue, Note, Report, Severity};
use serde_json::{json, Map, Value};

fn object(value: Value) -> Map<String, Value> {
    value.as_object().cloned().expect("an object")
}

fn signed(provider: &str, summary: &str, signature: &str) -> ContentBlock {
    ReasoningBlock {
        signature: Some(signature.into()),
        extra: Some(Box::new(object(json!({"provider": provider})))),
        ..ReasoningBlock::new(summary)
    }
    .into()
}

fn chat(messages: &[Message]) -> (Value, Report) {
    let c = to_openai_chat(messages, None);
    (serde_json::to_value(&c.request).unwrap(), c.report)
}

/// The conversation of `agentstate::providers`' table: a system prompt, a user question with an image,
/// reasoning and two parallel calls, their results, a final answer.
fn conversation(reasoning: ContentBlock) -> Vec<Message> {
    vec![
        Message::text_message("You are a travel assistant.", Role::System),
        Message::text_message("Weather in Paris and Rome? Here is my map.", Role::User).with_block(
            ContentBlock::image(MediaRef::url("https://maps.example/eu.png")),
        ),
        Message::new(
            Role::Assistant,
            vec![reasoning, ContentBlock::text("Checking both.")],
        )
        .with_tool_calls(vec![
            ToolCall::new("call_1", "get_weather", json!({"city": "Paris"})),
            ToolCall::new("call_2", "get_weather", json!({"city": "Rome"})),
        ]),
        Message::tool_result("call_1", "Sunny, 22C"),
        Message::tool_result("call_2", json!({"sky": "rain", "temp": 17})),
        Message::text_message("Paris is sunny; Rome is rainy.", Role::Assistant),
        Message::text_message("Thanks!", Role::User),
    ]
}

fn issues(report: &Report) -> Vec<&Issue> {
    report.notes().iter().map(|n| &n.issue).collect()
}

#[test]
fn openai_chat_shapes() {
    let messages = conversation(signed("anthropic", "Two cities.", "sig"));
    let (body, report) = chat(&messages);
    let m = body["messages"].as_array().unwrap();
    assert_eq!(m.len(), 7);
    assert_eq!(
        m[0],
        json!({"role": "system", "content": "You are a travel assistant."})
    );
    assert_eq!(
        m[1]["content"],
        json!([
            {"type": "text", "text": "Weather in Paris and Rome? Here is my map."},
            {"type": "image_url", "image_url": {"url": "https://maps.example/eu.png"}}
        ])
    );
    assert_eq!(m[2]["content"], "Checking both.");
    assert_eq!(
        m[2]["tool_calls"][1],
        json!({"id": "call_2", "type": "function",
               "function": {"name": "get_weather", "arguments": r#"{"city": "Rome"}"#}})
    );
    assert_eq!(
        m[4],
        json!({"role": "tool", "content": r#"{"sky": "rain", "temp": 17}"#, "tool_call_id": "call_2"})
    );
    // Anthropic's thinking cannot go to OpenAI: dropped, with a note naming its maker.
    assert_eq!(
        report.notes(),
        [Note {
            message: Some(2),
            block: Some(0),
            issue: Issue::Reasoning {
                from: Some("anthropic".into())
            },
            action: Action::Dropped,
        }]
    );
    assert!(report
        .to_string()
        .contains("message 2, block 0: reasoning made by `anthropic`"));
}

#[test]
fn openai_chat_moves_tool_result_media_after_the_turn() {
    let messages = vec![
        Message::text_message("Show both", Role::User),
        Message::text_message("", Role::Assistant).with_tool_calls(vec![
            ToolCall::new("a", "render", json!({})),
            ToolCall::new("b", "render", json!({})),
        ]),
        Message::tool_result("a", "rendered")
            .with_block(ContentBlock::image(MediaRef::data("iVBO", "image/png"))),
        Message::tool_result("b", "rendered too"),
        Message::text_message("Which is better?", Role::User),
    ];
    let (body, report) = chat(&messages);
    let roles: Vec<&str> = body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    // The tool messages stay together right after the calls; the image follows them.
    assert_eq!(roles, ["user", "assistant", "tool", "tool", "user", "user"]);
    assert_eq!(
        body["messages"][4]["content"],
        json!([{"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBO"}}])
    );
    assert_eq!(body["messages"][2]["content"], "rendered");
    assert_eq!(
        issues(&report),
        [&Issue::ToolResultNonText { kind: "image" }]
    );
    assert_eq!(report.notes()[0].action, Action::MovedToUserMessage);
}

#[test]
fn anthropic_style_user_results_come_first_for_openai() {
    // LangChain turns [text, tool_result] into user then tool, which OpenAI rejects.
    let messages = vec![
        Message::text_message("", Role::Assistant).with_tool_calls(vec![ToolCall::new(
            "t1",
            "f",
            json!({}),
        )]),
        Message::new(
            Role::User,
            vec![
                ContentBlock::text("Here you go"),
                ContentBlock::tool_result("t1", "42"),
            ],
        ),
    ];
    let (body, report) = chat(&messages);
    assert_eq!(
        body["messages"][1],
        json!({"role": "tool", "content": "42", "tool_call_id": "t1"})
    );
    assert_eq!(
        body["messages"][2],
        json!({"role": "user", "content": "Here you go"})
    );
    assert!(report.is_empty(), "{report}");
    let body = to_openai_responses(&messages, None).request;
    assert_eq!(body["input"][1]["type"], "function_call_output");
    assert_eq!(body["input"][2]["role"], "user");
}

#[test]
fn anthropic_shapes_and_thinking() {
    let messages = conversation(signed("anthropic", "Two cities.", "sig-A"));
    let converted = to_anthropic(&messages, None);
    assert!(converted.report.is_empty(), "{}", converted.report);
    let body = converted.request;
    assert_eq!(
        body["system"],
        json!([{"type": "text", "text": "You are a travel assistant."}])
    );
    let m = body["messages"].as_array().unwrap();
    assert_eq!(m.len(), 5);
    assert_eq!(
        m[0]["content"][1],
        json!({"type": "image", "source": {"type": "url", "url": "https://maps.example/eu.png"}})
    );
    assert_eq!(
        m[1]["content"],
        json!([
            {"type": "thinking", "thinking": "Two cities.", "signature": "sig-A"},
            {"type": "text", "text": "Checking both."},
            {"type": "tool_use", "id": "call_1", "name": "get_weather", "input": {"city": "Paris"}},
            {"type": "tool_use", "id": "call_2", "name": "get_weather", "input": {"city": "Rome"}}
        ])
    );
    // Both results in one user turn.
    assert_eq!(
        m[2],
        json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "call_1", "content": "Sunny, 22C"},
            {"type": "tool_result", "tool_use_id": "call_2", "content": r#"{"sky": "rain", "temp": 17}"#}
        ]})
    );
    assert_eq!(m[4], json!({"role": "user", "content": "Thanks!"}));

    // Gemini's thought, or unsigned reasoning, cannot go to Anthropic.
    for (block, from) in [
        (
            signed("gemini", "Two cities.", "CiQB"),
            Some("gemini".to_owned()),
        ),
        (ContentBlock::reasoning("Two cities."), None),
    ] {
        let report = to_anthropic(&conversation(block), None).report;
        assert_eq!(issues(&report), [&Issue::Reasoning { from }]);
    }
}

#[test]
fn anthropic_tool_results_keep_media_and_error_flag() {
    let messages = vec![
        Message::text_message("Screenshot?", Role::User),
        Message::text_message("", Role::Assistant).with_tool_calls(vec![ToolCall::new(
            "s",
            "shot",
            json!({}),
        )]),
        Message::tool_message(vec![
            ToolResultBlock::failed("s", "partial").into(),
            ContentBlock::image(MediaRef::data("iVBO", "image/png")),
        ]),
    ];
    let converted = to_anthropic(&messages, None);
    assert!(converted.report.is_empty(), "{}", converted.report);
    assert_eq!(
        converted.request["messages"][2]["content"][0],
        json!({"type": "tool_result", "tool_use_id": "s", "is_error": true, "content": [
            {"type": "text", "text": "partial"},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBO"}}
        ]})
    );
}

#[test]
fn gemini_shapes_and_signatures() {
    let mut messages = conversation(signed("gemini", "Two cities.", "CiQB"));
    // Gemini's signature on the first call, as from_gemini and AgentFlow keep it.
    messages[2].tools_calls.as_mut().unwrap()[0]
        .extra
        .insert("thought_signature", json!("Zm9v"));
    let converted = to_gemini(&messages, None);
    assert!(converted.report.is_empty(), "{}", converted.report);
    let body = converted.request;
    assert_eq!(
        body["system_instruction"],
        json!({"parts": [{"text": "You are a travel assistant."}]})
    );
    let c = body["contents"].as_array().unwrap();
    assert_eq!(
        c[0]["parts"][1]["file_data"]["file_uri"],
        "https://maps.example/eu.png"
    );
    assert_eq!(
        c[1],
        json!({"role": "model", "parts": [
            {"text": "Two cities.", "thought": true, "thought_signature": "CiQB"},
            {"text": "Checking both."},
            {"function_call": {"id": "call_1", "name": "get_weather", "args": {"city": "Paris"}}, "thought_signature": "Zm9v"},
            {"function_call": {"id": "call_2", "name": "get_weather", "args": {"city": "Rome"}}}
        ]})
    );
    assert_eq!(c[2]["role"], "user");
    assert_eq!(
        c[2]["parts"][1],
        json!({"function_response": {"id": "call_2", "name": "get_weather",
                                     "response": {"sky": "rain", "temp": 17}}})
    );
    // The Gemini signature is stripped, with a note, for Anthropic.
    let report = to_anthropic(&messages, None).report;
    assert!(issues(&report).contains(&&Issue::Signature), "{report}");
    // Without a signature, the first call of a turn gets Google's documented placeholder.
    let unsigned = conversation(ContentBlock::text(""));
    let body = to_gemini(&unsigned, None).request;
    assert_eq!(
        body["contents"][1]["parts"][1]["thought_signature"],
        "c2tpcF90aG91Z2h0X3NpZ25hdHVyZV92YWxpZGF0b3I="
    );
    assert!(body["contents"][1]["parts"][2]
        .get("thought_signature")
        .is_none());
}

#[test]
fn system_messages_in_the_conversation() {
    let messages = vec![
        Message::text_message("Be brief.", Role::System),
        Message::text_message("Hi", Role::User),
        Message::text_message("Now answer in French.", Role::System),
        Message::text_message("Hello?", Role::User),
    ];
    // OpenAI Chat takes a system message anywhere.
    let (body, report) = chat(&messages);
    assert_eq!(body["messages"][2]["role"], "system");
    assert!(report.is_empty());
    let moved = |report: &Report| {
        report.notes()
            == [Note {
                message: Some(2),
                block: None,
                issue: Issue::SystemInConversation,
                action: Action::MovedToSystem,
            }]
    };
    let responses = to_openai_responses(&messages, None);
    assert_eq!(
        responses.request["instructions"],
        "Be brief.\nNow answer in French."
    );
    assert!(moved(&responses.report));
    let anthropic = to_anthropic(&messages, None);
    assert_eq!(
        anthropic.request["system"][1]["text"],
        "Now answer in French."
    );
    assert!(moved(&anthropic.report));
    let gemini = to_gemini(&messages, None);
    assert_eq!(
        gemini.request["system_instruction"]["parts"][0]["text"],
        "Be brief.\nNow answer in French."
    );
    assert!(moved(&gemini.report));
}

#[test]
fn context_summary_goes_into_the_system_prompt() {
    let messages = vec![
        Message::text_message("Be brief.", Role::System),
        Message::text_message("And then?", Role::User),
    ];
    let summary = Some("Earlier, the user booked a flight to Rome.");
    let (body, _) = {
        let c = to_openai_chat(&messages, summary);
        (serde_json::to_value(&c.request).unwrap(), c.report)
    };
    assert_eq!(
        body["messages"][1],
        json!({"role": "system", "content": "Earlier, the user booked a flight to Rome."})
    );
    assert_eq!(
        to_openai_responses(&messages, summary).request["instructions"],
        "Be brief.\nEarlier, the user booked a flight to Rome."
    );
    let anthropic = to_anthropic(&messages, summary).request;
    assert_eq!(
        anthropic["system"][1]["text"],
        "Earlier, the user booked a flight to Rome."
    );
    assert_eq!(anthropic["messages"].as_array().unwrap().len(), 1);
    assert_eq!(anthropic["messages"][0]["role"], "user");
    assert_eq!(
        to_gemini(&messages, summary).request["system_instruction"]["parts"][0]["text"],
        "Be brief.\nEarlier, the user booked a flight to Rome."
    );
    // Without system messages the summary is the whole system prompt.
    let only = [Message::text_message("Hi", Role::User)];
    let body = serde_json::to_value(to_openai_chat(&only, summary).request).unwrap();
    assert_eq!(body["messages"][0]["role"], "system");
    assert_eq!(body["messages"][1]["role"], "user");
}

#[test]
fn tool_call_pairing_is_checked() {
    let messages = vec![
        Message::text_message("Go", Role::User),
        Message::text_message("", Role::Assistant).with_tool_calls(vec![
            ToolCall::new("x", "f", json!({})),
            ToolCall::new("y", "f", json!({})),
            ToolCall::new("x", "f", json!({})),
        ]),
        Message::tool_result("x", "ok"),
        Message::tool_result("z", "stray"),
        Message::text_message("Next", Role::User),
    ];
    let report = to_anthropic(&messages, None).report;
    let found = issues(&report);
    assert!(
        found.contains(&&Issue::DuplicateToolCallId { id: "x".into() }),
        "{report}"
    );
    assert!(
        found.contains(&&Issue::UnmatchedToolResult { id: "z".into() }),
        "{report}"
    );
    assert!(
        found.contains(&&Issue::UnansweredToolCall { id: "y".into() }),
        "{report}"
    );
    let stray = report
        .notes()
        .iter()
        .find(|n| matches!(n.issue, Issue::UnmatchedToolResult { .. }))
        .unwrap();
    assert_eq!((stray.message, stray.block), (Some(3), Some(0)));
    // The same check for every provider.
    assert_eq!(chat(&messages).1.notes().len(), report.notes().len());
}

#[test]
fn invalid_arguments_are_reported() {
    let mut bad = ToolCall::new("c", "f", json!({}));
    bad.function.arguments = "{not json".into();
    let mut list = ToolCall::new("d", "f", json!({}));
    list.function.arguments = "[1, 2]".into();
    let messages = vec![
        Message::text_message("", Role::Assistant).with_tool_calls(vec![bad, list]),
        Message::tool_result("c", "?"),
        Message::tool_result("d", "?"),
    ];
    // OpenAI takes the string as it is; invalid JSON is noted.
    let (body, report) = chat(&messages);
    assert_eq!(
        body["messages"][0]["tool_calls"][0]["function"]["arguments"],
        "{not json"
    );
    assert!(
        matches!(
            report.notes(),
            [Note {
                issue: Issue::InvalidArguments { .. },
                action: Action::SentAsIs,
                ..
            }]
        ),
        "{report}"
    );
    // Anthropic and Gemini need an object: {} in its place, noted.
    for converted in [to_anthropic(&messages, None), to_gemini(&messages, None)] {
        let report = converted.report;
        let found: Vec<(&Issue, &Action)> = report
            .notes()
            .iter()
            .map(|n| (&n.issue, &n.action))
            .collect();
        assert!(
            matches!(
                found[0],
                (Issue::InvalidArguments { .. }, Action::SentAsEmptyObject)
            ),
            "{report}"
        );
        assert_eq!(
            found[1],
            (&Issue::ArgumentsNotObject, &Action::SentAsEmptyObject)
        );
    }
    let body = to_anthropic(&messages, None).request;
    assert_eq!(body["messages"][0]["content"][0]["input"], json!({}));
}

#[test]
fn calls_from_blocks_only_and_remote_calls_are_sent() {
    let messages = vec![
        Message::new(
            Role::Assistant,
            vec![
                ToolCallBlock::new("b1", "lookup", object(json!({"q": "x"}))).into(),
                ContentBlock::RemoteToolCall(agentstate::message::RemoteToolCallBlock::new(
                    "r1",
                    "client_fn",
                    object(json!({"a": 1})),
                )),
            ],
        ),
        Message::tool_result("b1", "found"),
        Message::tool_result("r1", "done"),
    ];
    let (body, report) = chat(&messages);
    assert!(report.is_empty(), "{report}");
    let calls = &body["messages"][0]["tool_calls"];
    assert_eq!(calls[0]["function"]["arguments"], r#"{"q":"x"}"#);
    assert_eq!(calls[1]["id"], "r1");
    let body = to_anthropic(&messages, None).request;
    assert_eq!(body["messages"][0]["content"][1]["input"], json!({"a": 1}));
}

#[test]
fn trailing_assistant_and_empty_messages_for_anthropic() {
    let messages = vec![
        Message::text_message("Hi", Role::User),
        Message::new(Role::Assistant, vec![ContentBlock::error("rate limited")]),
        Message::text_message("Again", Role::User),
        Message::text_message("Sure", Role::Assistant),
    ];
    let converted = to_anthropic(&messages, None);
    let m = converted.request["messages"].as_array().unwrap();
    assert_eq!(m.len(), 2, "{m:?}");
    let found: Vec<(Option<usize>, &Issue, &Action)> = converted
        .report
        .notes()
        .iter()
        .map(|n| (n.message, &n.issue, &n.action))
        .collect();
    assert_eq!(
        found,
        [
            (
                Some(1),
                &Issue::UnsupportedBlock { kind: "error" },
                &Action::Dropped
            ),
            (Some(1), &Issue::EmptyMessage, &Action::Dropped),
            (Some(3), &Issue::TrailingAssistant, &Action::Dropped),
        ]
    );
    // Alone, it becomes a user turn rather than an empty request.
    let alone = to_anthropic(&messages[3..], None);
    assert_eq!(
        alone.request["messages"],
        json!([{"role": "user", "content": "Sure"}])
    );
}

#[test]
fn unsupported_blocks_are_noted_never_silently_dropped() {
    let messages = vec![Message::new(
        Role::User,
        vec![
            ContentBlock::text("Look"),
            ContentBlock::Video(agentstate::message::VideoBlock::new(MediaRef::url(
                "https://v.example/a.mp4",
            ))),
            agentstate::message::DataBlock {
                data_base64: Some("e30=".into()),
                ..agentstate::message::DataBlock::new("application/json")
            }
            .into(),
            ContentBlock::Annotation(Default::default()),
        ],
    )];
    let (body, report) = chat(&messages);
    assert_eq!(
        body["messages"][0]["content"][1]["text"],
        "[Video: https://v.example/a.mp4]"
    );
    let blocks: Vec<Option<usize>> = report.notes().iter().map(|n| n.block).collect();
    assert_eq!(blocks, [Some(1), Some(2), Some(3)], "{report}");
    let report = to_anthropic(&messages, None).report;
    let blocks: Vec<Option<usize>> = report.notes().iter().map(|n| n.block).collect();
    assert_eq!(blocks, [Some(1), Some(2), Some(3)], "{report}");
    // Gemini takes video and data inline.
    let converted = to_gemini(&messages, None);
    assert_eq!(
        converted.request["contents"][0]["parts"][2],
        json!({"inline_data": {"mime_type": "application/json", "data": "e30="}})
    );
    assert_eq!(converted.report.notes().len(), 1, "{}", converted.report);
}

#[test]
fn output_is_byte_stable() {
    let messages = conversation(signed("openai", "Two cities.", "enc"));
    let first = serde_json::to_string(&to_openai_chat(&messages, Some("s")).request).unwrap();
    for _ in 0..3 {
        assert_eq!(
            serde_json::to_string(&to_openai_chat(&messages, Some("s")).request).unwrap(),
            first
        );
    }
    let bodies = |m: &[Message]| {
        [
            to_openai_responses(m, Some("s")).request,
            to_anthropic(m, Some("s")).request,
            to_gemini(m, Some("s")).request,
        ]
        .map(|b| serde_json::to_string(&b).unwrap())
    };
    assert_eq!(bodies(&messages), bodies(&messages.clone()));
}

#[test]
fn provider_fields_are_written_only_when_set() {
    let plain = Message::new(Role::Assistant, vec![ContentBlock::reasoning("r")])
        .with_tool_calls(vec![ToolCall::new("c", "f", json!({}))]);
    let text = serde_json::to_string(&plain).unwrap();
    assert!(
        !text.contains("signature") && !text.contains("extra"),
        "{text}"
    );
    let signed = Message::new(Role::Assistant, vec![signed("anthropic", "r", "sig")]);
    let wire = serde_json::to_value(&signed).unwrap();
    assert_eq!(wire["content"][0]["signature"], "sig");
    assert_eq!(
        wire["content"][0]["extra"],
        json!({"provider": "anthropic"})
    );
    let back: Message = serde_json::from_value(wire).unwrap();
    assert_eq!(back, signed);
}

// ---- Round trips: message -> request -> response built from it -> message ----

fn assert_same_turn(original: &Message, back: &Message) {
    assert_eq!(back.text(), original.text());
    let calls = |m: &Message| -> Vec<(String, String, Value)> {
        m.tool_calls()
            .iter()
            .map(|c| {
                (
                    c.id.clone(),
                    c.function.name.clone(),
                    c.arguments::<serde_json::Value>().unwrap(),
                )
            })
            .collect()
    };
    assert_eq!(calls(back), calls(original));
    let signatures = |m: &Message| -> Vec<Option<Box<str>>> {
        m.content
            .iter()
            .filter_map(|b| match b {
                ContentBlock::Reasoning(r) => Some(r.signature.clone()),
                _ => None,
            })
            .collect()
    };
    assert_eq!(signatures(back), signatures(original));
}

#[test]
fn round_trip_openai_chat() {
    let messages = conversation(ContentBlock::text(""));
    let (body, _) = chat(&messages);
    let turn = body["messages"][2].clone();
    let response = json!({"id": "chatcmpl-9", "model": "gpt-4o", "created": 1700000000,
        "choices": [{"index": 0, "message": turn, "finish_reason": "tool_calls"}]});
    let back = from_openai_chat(&response).unwrap().message;
    assert_same_turn(&messages[2], &back);
    assert_eq!(back.metadata.get("response_id"), Some(json!("chatcmpl-9")));
    assert_eq!(back.timestamp, Some(1_700_000_000.0));
    assert_eq!(back.metadata.get("model"), Some(json!("gpt-4o")));
    assert_eq!(back.raw.as_ref().unwrap().to_value()["id"], "chatcmpl-9");
    // Sent again, the same turn.
    assert_eq!(chat(&[back]).0["messages"][0], body["messages"][2]);
}

#[test]
fn round_trip_openai_responses() {
    let reasoning = ReasoningBlock {
        signature: Some("gAAAAenc".into()),
        extra: Some(Box::new(object(
            json!({"provider": "openai", "id": "rs_1"}),
        ))),
        ..ReasoningBlock::new("Two cities.")
    };
    let messages = conversation(reasoning.into());
    let converted = to_openai_responses(&messages, None);
    assert!(converted.report.is_empty(), "{}", converted.report);
    let input = converted.request["input"].as_array().unwrap().clone();
    assert_eq!(
        input[1],
        json!({"type": "reasoning", "id": "rs_1", "encrypted_content": "gAAAAenc",
               "summary": [{"type": "summary_text", "text": "Two cities."}]})
    );
    // The model's output: the reasoning, the message and the calls.
    let output: Vec<Value> = input[1..5]
        .iter()
        .map(|item| match item.get("role") {
            Some(_) => json!({"type": "message", "role": "assistant",
                              "content": [{"type": "output_text", "text": item["content"]}]}),
            None => item.clone(),
        })
        .collect();
    let back = from_openai_responses(&json!({"id": "resp_1", "output": output}))
        .unwrap()
        .message;
    assert_same_turn(&messages[2], &back);
    let again = to_openai_responses(&[back], None).request;
    assert_eq!(again["input"].as_array().unwrap()[..], input[1..5]);
}

#[test]
fn round_trip_anthropic() {
    let messages = conversation(signed("anthropic", "Two cities.", "sig-A"));
    let body = to_anthropic(&messages, None).request;
    let turn = body["messages"][1]["content"].clone();
    let response = json!({"id": "msg_1", "type": "message", "role": "assistant", "content": turn,
                          "stop_reason": "tool_use", "usage": {"input_tokens": 3, "output_tokens": 4}});
    let back = from_anthropic(&response, None).unwrap().message;
    assert_same_turn(&messages[2], &back);
    assert_eq!(back.usages.as_ref().unwrap().total_tokens, 7);
    // Put back in the conversation, the same request.
    let mut again = messages.clone();
    again[2] = back;
    assert_eq!(to_anthropic(&again, None).request, body);
    let redacted = json!({"content": [{"type": "redacted_thinking", "data": "opaque"}]});
    let back = from_anthropic(&redacted, None).unwrap().message;
    let again = to_anthropic(
        &[
            Message::text_message("q", Role::User),
            back,
            Message::text_message("r", Role::User),
        ],
        None,
    );
    assert_eq!(
        again.request["messages"][1]["content"][0],
        json!({"type": "redacted_thinking", "data": "opaque"})
    );
}

#[test]
fn round_trip_gemini() {
    let mut messages = conversation(signed("gemini", "Two cities.", "CiQB"));
    messages[2].tools_calls.as_mut().unwrap()[0]
        .extra
        .insert("thought_signature", json!("Zm9v"));
    let body = to_gemini(&messages, None).request;
    let turn = body["contents"][1].clone();
    let response = json!({"candidates": [{"content": turn, "finishReason": "STOP"}],
                          "usageMetadata": {"promptTokenCount": 5, "candidatesTokenCount": 6, "totalTokenCount": 11}});
    let back = from_gemini(&response).unwrap().message;
    assert_same_turn(&messages[2], &back);
    assert_eq!(
        back.tool_call_blocks().next().unwrap().signature.as_deref(),
        Some("Zm9v")
    );
    let again = to_gemini(&[back], None).request;
    assert_eq!(again["contents"][0], body["contents"][1]);
}

#[test]
fn responses_that_are_not_responses_are_errors() {
    for bad in [json!({}), json!({"choices": []}), json!([1])] {
        let err = from_openai_chat(&bad).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("cannot read this OpenAI Chat response"),
            "{err}"
        );
    }
    assert!(from_anthropic(&json!({"content": "hi"}), None).is_err());
    assert!(from_gemini(&json!({"candidates": []})).is_err());
    assert!(from_openai_responses(&json!({"output": [{"type": "function_call"}]})).is_err());
}

#[test]
fn a_reasoning_string_without_a_block_is_noted() {
    let messages = vec![
        Message::text_message("Hi", Role::User),
        Message::text_message("Hello", Role::Assistant).with_reasoning("greet back"),
        Message::text_message("Bye", Role::User),
    ];
    let expected = [Note {
        message: Some(1),
        block: None,
        issue: Issue::Reasoning { from: None },
        action: Action::Dropped,
    }];
    assert_eq!(chat(&messages).1.notes(), expected);
    assert_eq!(
        to_openai_responses(&messages, None).report.notes(),
        expected
    );
    assert_eq!(to_anthropic(&messages, None).report.notes(), expected);
    assert_eq!(to_gemini(&messages, None).report.notes(), expected);
}

// ---- Any conversation: no panic, stable bytes, notes that point at real blocks ----

mod any_conversation {
    use super::*;
    use agentstate::message::{AudioBlock, DataBlock, DocumentBlock, ErrorBlock, VideoBlock};
    use proptest::prelude::*;

    fn media(kind: u8) -> MediaRef {
        match kind % 4 {
            0 => MediaRef::url("https://m.example/x"),
            1 => MediaRef::data("AAAA", "image/png"),
            2 => MediaRef::file_id("file-1"),
            _ => MediaRef::default(),
        }
    }

    fn block(kind: u8, id: u8, provider: u8) -> ContentBlock {
        // Ids other providers make, which Anthropic does not take, and one that is taken
        // by rewriting another (`c.1` and `c_1`).
        let id = ["c0", "c.1", "c_1", "functions.f:0"][usize::from(id % 4)].to_owned();
        let owner = ["openai", "anthropic", "gemini", "other"][usize::from(provider % 4)];
        match kind % 13 {
            0 | 1 => ContentBlock::text(if id == "c0" { "" } else { "some text" }),
            2 => ContentBlock::image(media(provider)),
            3 => AudioBlock::new(media(provider)).into(),
            4 => VideoBlock::new(media(provider)).into(),
            5 => DocumentBlock::new(media(provider)).into(),
            6 => DataBlock::new("application/json").into(),
            7 => ToolCallBlock {
                signature: (provider % 2 == 0).then(|| "sig".into()),
                extra: Some(Box::new(object(json!({"provider": owner, "id": "fc_1"})))),
                ..ToolCallBlock::new(id, "f", object(json!({"a": 1})))
            }
            .into(),
            8 => ContentBlock::tool_result(id, json!({"out": [1, "é"]})),
            9 => ToolResultBlock::failed(id, "boom").into(),
            10 => signed(owner, "thinking", "sig"),
            11 => ErrorBlock::new("oops").into(),
            _ => ContentBlock::Annotation(Default::default()),
        }
    }

    fn conversation() -> impl Strategy<Value = Vec<Message>> {
        let message = (
            0u8..4,
            prop::collection::vec((any::<u8>(), any::<u8>(), any::<u8>()), 0..5),
            any::<u8>(),
        );
        prop::collection::vec(message, 0..10).prop_map(|specs| {
            specs
                .into_iter()
                .map(|(role, blocks, calls)| {
                    let role =
                        [Role::System, Role::User, Role::Assistant, Role::Tool][usize::from(role)];
                    let content = blocks.into_iter().map(|(k, i, p)| block(k, i, p)).collect();
                    let mut message = Message::new(role, content);
                    if role == Role::Assistant && calls % 3 == 0 {
                        let id = ["c0", "c.1", "c_1", "functions.f:0"][usize::from(calls % 4)];
                        let mut call = ToolCall::new(id, "g", json!({"b": 2}));
                        if calls % 2 == 0 {
                            call.function.arguments = "{broken".into();
                        }
                        message = message.with_tool_calls(vec![call]);
                    }
                    message
                })
                .collect()
        })
    }

    fn check_notes(messages: &[Message], report: &Report) {
        for note in report.notes() {
            if note.issue == Issue::EmptyConversation {
                assert_eq!(
                    (note.message, note.block, note.severity()),
                    (None, None, Severity::Refused)
                );
                continue;
            }
            let index = note.message.expect("a note about a message");
            assert!(index < messages.len(), "{note}");
            if let Some(block) = note.block {
                assert!(block < messages[index].content.len(), "{note}");
            }
        }
    }

    /// Every tool id sent to Anthropic matches `^[a-zA-Z0-9_-]+$`; the mapping is one to one
    /// (two ids never become one) and maps back.
    fn anthropic_ids_are_valid(
        messages: &[Message],
        converted: &agentstate::providers::Converted<Value>,
    ) {
        let valid = |id: &str| {
            !id.is_empty()
                && id
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        };
        for turn in converted.request["messages"].as_array().unwrap() {
            for block in turn["content"].as_array().into_iter().flatten() {
                for key in ["id", "tool_use_id"] {
                    if let Some(id) = block.get(key).and_then(Value::as_str) {
                        assert!(valid(id), "{id}");
                    }
                }
            }
        }
        let originals: std::collections::BTreeSet<&str> = messages
            .iter()
            .flat_map(|m| m.tool_calls().iter().map(|c| c.id.as_str()))
            .collect();
        let sent: std::collections::BTreeSet<&str> = originals
            .iter()
            .map(|id| converted.tool_ids.sent(id))
            .collect();
        assert_eq!(sent.len(), originals.len(), "{:?}", converted.tool_ids);
        for id in &originals {
            assert_eq!(
                converted.tool_ids.original(converted.tool_ids.sent(id)),
                *id
            );
        }
    }

    /// In every user turn, results come before anything else (Anthropic and Gemini reject or
    /// misread them otherwise).
    fn results_first(turns: &Value, is_result: impl Fn(&Value) -> bool, key: &str) {
        for turn in turns.as_array().unwrap() {
            if let Some(parts) = turn[key].as_array() {
                let first_other = parts
                    .iter()
                    .position(|p| !is_result(p))
                    .unwrap_or(parts.len());
                assert!(parts[first_other..].iter().all(|p| !is_result(p)), "{turn}");
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn converters_hold_their_invariants(messages in conversation()) {
            let (chat_body, chat_report) = chat(&messages);
            check_notes(&messages, &chat_report);
            prop_assert_eq!(&chat(&messages).0, &chat_body);

            let responses = to_openai_responses(&messages, Some("s"));
            check_notes(&messages, &responses.report);
            let anthropic = to_anthropic(&messages, Some("s"));
            check_notes(&messages, &anthropic.report);
            results_first(&anthropic.request["messages"], |p| p["type"] == "tool_result", "content");
            anthropic_ids_are_valid(&messages, &anthropic);
            for (body, empty) in [
                (&chat_body["messages"], chat_report.notes().iter().any(|n| n.issue == Issue::EmptyConversation)),
                (&responses.request["input"], responses.report.notes().iter().any(|n| n.issue == Issue::EmptyConversation)),
                (&anthropic.request["messages"], anthropic.report.notes().iter().any(|n| n.issue == Issue::EmptyConversation)),
            ] {
                prop_assert_eq!(body == &json!([]), empty, "{}", body);
            }
            for turn in anthropic.request["messages"].as_array().unwrap() {
                prop_assert!(turn["content"] != json!("") && turn["content"] != json!([]), "{}", turn);
            }
            let gemini = to_gemini(&messages, Some("s"));
            check_notes(&messages, &gemini.report);
            results_first(&gemini.request["contents"], |p| p.get("function_response").is_some(), "parts");
            for turn in gemini.request["contents"].as_array().unwrap() {
                prop_assert!(turn["parts"] != json!([]), "{}", turn);
            }
            prop_assert_eq!(&to_gemini(&messages, Some("s")).request, &gemini.request);
            let empty = gemini.report.notes().iter().any(|n| n.issue == Issue::EmptyConversation);
            prop_assert_eq!(gemini.request["contents"] == json!([]), empty);
        }
    }
}

#[test]
fn an_empty_conversation_is_reported_as_refused() {
    let only_system = [Message::text_message("Be brief.", Role::System)];
    for messages in [&[][..], &only_system[..]] {
        let responses = to_openai_responses(messages, None);
        let anthropic = to_anthropic(messages, None);
        let gemini = to_gemini(messages, None);
        for (body, report) in [
            (&responses.request["input"], &responses.report),
            (&anthropic.request["messages"], &anthropic.report),
            (&gemini.request["contents"], &gemini.report),
        ] {
            assert_eq!(body, &json!([]));
            assert_eq!(
                report.notes(),
                [Note {
                    message: None,
                    block: None,
                    issue: Issue::EmptyConversation,
                    action: Action::SentAsIs,
                }]
            );
            assert_eq!(report.worst(), Some(Severity::Refused));
        }
    }
    // OpenAI Chat takes a system message alone, not an empty list.
    assert_eq!(chat(&[]).1.worst(), Some(Severity::Refused));
    assert!(chat(&only_system).1.is_empty());
}

#[test]
fn anthropic_tool_ids_are_mapped_both_ways() {
    // `functions_get_weather_0` is already used: the rewritten id must not collide with it.
    let messages = vec![
        Message::text_message("Weather?", Role::User),
        Message::text_message("", Role::Assistant).with_tool_calls(vec![
            ToolCall::new(
                "functions.get_weather:0",
                "get_weather",
                json!({"city": "Paris"}),
            ),
            ToolCall::new(
                "functions_get_weather_0",
                "get_weather",
                json!({"city": "Rome"}),
            ),
        ]),
        Message::tool_result("functions.get_weather:0", "Sunny"),
        Message::tool_result("functions_get_weather_0", "Rain"),
    ];
    let converted = to_anthropic(&messages, None);
    let body = &converted.request;
    let ids: Vec<&str> = [
        &body["messages"][1]["content"][0]["id"],
        &body["messages"][1]["content"][1]["id"],
        &body["messages"][2]["content"][0]["tool_use_id"],
        &body["messages"][2]["content"][1]["tool_use_id"],
    ]
    .iter()
    .map(|v| v.as_str().unwrap())
    .collect();
    assert_eq!(
        ids,
        [
            "functions_get_weather_0_2",
            "functions_get_weather_0",
            "functions_get_weather_0_2",
            "functions_get_weather_0"
        ]
    );
    // One note, at the call block of the first use (after the empty text block).
    assert_eq!(
        converted.report.notes(),
        [Note {
            message: Some(1),
            block: Some(1),
            issue: Issue::ToolCallIdRewritten {
                id: "functions.get_weather:0".into(),
                sent: "functions_get_weather_0_2".into()
            },
            action: Action::Rewritten,
        }]
    );
    // The turn sent back (as a response) gives the original ids, with the mapping only.
    let response = json!({"content": body["messages"][1]["content"].clone()});
    let back = from_anthropic(&response, Some(&converted.tool_ids))
        .unwrap()
        .message;
    assert_same_turn(&messages[1], &back);
    let raw = from_anthropic(&response, None).unwrap().message;
    assert_eq!(raw.tool_calls()[0].id, "functions_get_weather_0_2");
    // Other providers get the ids as they are.
    assert_eq!(
        chat(&messages).0["messages"][1]["tool_calls"][0]["id"],
        "functions.get_weather:0"
    );
}

/// A tool result that is a JSON value goes to Gemini as that value: an object as the
/// `response` itself, anything else under `result` (`error` when failed); a string stays text.
#[test]
fn a_gemini_tool_result_that_is_json_is_sent_as_its_value() {
    let call = |id: &str| ToolCall::new(id, "lookup", json!({}));
    let mut failed = Message::tool_result("c5", json!({"code": 404}));
    if let ContentBlock::ToolResult(r) = &mut failed.content[0] {
        r.is_error = true;
    }
    let messages = vec![
        Message::text_message("Look up.", Role::User),
        Message::text_message("", Role::Assistant)
            .with_tool_calls(["c1", "c2", "c3", "c4", "c5"].map(call).to_vec()),
        Message::tool_result("c1", json!({"temp": 22, "unit": "C"})),
        Message::tool_result("c2", json!([1, 2.5, null])),
        Message::tool_result("c3", "{\"not\": \"parsed\"}"),
        Message::tool_result("c4", json!(7)),
        failed,
    ];
    let converted = to_gemini(&messages, None);
    assert!(converted.report.is_empty(), "{}", converted.report);
    let responses: Vec<Value> = converted.request["contents"][2]["parts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["function_response"]["response"].clone())
        .collect();
    assert_eq!(
        responses,
        [
            json!({"temp": 22, "unit": "C"}),
            json!({"result": [1, 2.5, null]}),
            json!({"result": "{\"not\": \"parsed\"}"}),
            json!({"result": 7}),
            json!({"error": {"code": 404}}),
        ]
    );
    // Text beside a JSON result in its tool message: the whole text, as before.
    let beside =
        Message::tool_result("c1", json!({"temp": 22})).with_block(ContentBlock::text(" (cached)"));
    let body = to_gemini(&[messages[0].clone(), messages[1].clone(), beside], None).request;
    assert_eq!(
        body["contents"][2]["parts"][0]["function_response"]["response"],
        json!({"result": "{\"temp\": 22} (cached)"})
    );
}

/// A Gemini search's sources are the text's annotations, as Anthropic's and OpenAI's web
/// search citations are; its queries are noted (they stay in `raw`). Citations too.
#[test]
fn gemini_grounding_and_citations_are_the_texts_annotations() {
    let response = json!({"responseId": "r", "candidates": [{
        "content": {"role": "model", "parts": [{"text": "Spain won Euro 2024."}, {"text": " Final: 2-1."}]},
        "finishReason": "STOP",
        "groundingMetadata": {
            "webSearchQueries": ["euro 2024 winner"],
            "searchEntryPoint": {"renderedContent": "<div></div>"},
            "groundingChunks": [
                {"web": {"uri": "https://a.example/euro", "title": "a.example"}},
                {"web": {"uri": "https://b.example/final", "title": "b.example"}},
                {"web": {"uri": "https://a.example/euro", "title": "a.example"}}
            ],
            "groundingSupports": [
                {"segment": {"startIndex": 0, "endIndex": 20, "text": "Spain won Euro 2024."}, "groundingChunkIndices": [0, 2]},
                {"segment": {"partIndex": 1, "startIndex": 0, "endIndex": 12, "text": " Final: 2-1."}, "groundingChunkIndices": [1]}
            ]
        },
        "citationMetadata": {"citationSources": [{"startIndex": 0, "endIndex": 5, "uri": "https://c.example", "license": ""}]}
    }]});
    let parsed = from_gemini(&response).unwrap();
    let urls = |block: &ContentBlock| match block {
        ContentBlock::Text(t) => t
            .annotations
            .iter()
            .map(|a| (a.url.clone().unwrap(), a.title.clone()))
            .collect::<Vec<_>>(),
        other => panic!("{other:?}"),
    };
    assert_eq!(
        urls(&parsed.message.content[0]),
        [
            (
                "https://a.example/euro".to_owned(),
                Some("a.example".to_owned())
            ),
            ("https://c.example".to_owned(), None)
        ]
    );
    assert_eq!(
        urls(&parsed.message.content[1]),
        [(
            "https://b.example/final".to_owned(),
            Some("b.example".to_owned())
        )]
    );
    assert_eq!(
        parsed.report.to_string(),
        "response: a message has no block for the response's `groundingMetadata`; kept in the message's `raw` only"
    );
    // No text to hold them: the sources are noted too.
    let bare = json!({"candidates": [{"content": {"parts": []}, "finishReason": "STOP",
        "citationMetadata": {"citations": [{"uri": "https://c.example", "title": "C"}]}}]});
    let notes = from_gemini(&bare).unwrap().report;
    assert_eq!(
        notes.notes()[0].issue,
        Issue::UnsupportedOutput {
            kind: "citationMetadata".into()
        }
    );
}

/// Anthropic's `refusal` stop reason and Gemini's safety finish are refusal blocks, as
/// OpenAI's `refusal` is read, and go back to OpenAI Chat as a refusal.
#[test]
fn stop_reason_refusals_are_refusal_blocks() {
    let refusal = |message: &Message| {
        message.content.iter().find_map(|b| match b {
            ContentBlock::Error(e) if e.code.as_deref() == Some("refusal") => Some(e.clone()),
            _ => None,
        })
    };
    let anthropic = json!({"id": "msg_1", "content": [{"type": "text", "text": "I can"}],
        "stop_reason": "refusal", "stop_details": {"type": "refusal", "category": "cyber",
        "explanation": "This could enable malware."}});
    let message = from_anthropic(&anthropic, None).unwrap().message;
    let block = refusal(&message).expect("a refusal block");
    assert_eq!(block.message, "This could enable malware.");
    assert_eq!(
        block.data.unwrap().to_value(),
        json!({"type": "refusal", "category": "cyber", "explanation": "This could enable malware."})
    );
    assert_eq!(
        message.metadata.get("finish_reason"),
        Some(json!("refusal"))
    );
    let body = chat(&[Message::text_message("Q", Role::User), message]).0;
    assert_eq!(body["messages"][1]["refusal"], "This could enable malware.");
    // Without details: a sentence naming the stop reason.
    let bare = json!({"content": [], "stop_reason": "refusal"});
    let block = refusal(&from_anthropic(&bare, None).unwrap().message).unwrap();
    assert_eq!(
        block.message,
        "The model refused to continue (Anthropic `stop_reason`: `refusal`)."
    );

    let gemini = json!({"candidates": [{"content": {"parts": []}, "finishReason": "SAFETY",
        "safetyRatings": [{"category": "HARM_CATEGORY_DANGEROUS_CONTENT", "probability": "HIGH", "blocked": true}]}]});
    let message = from_gemini(&gemini).unwrap().message;
    let block = refusal(&message).expect("a refusal block");
    assert_eq!(
        block.message,
        "The response was blocked (Gemini `finishReason`: `SAFETY`)."
    );
    assert_eq!(
        block.data.unwrap().to_value()["safetyRatings"][0]["blocked"],
        true
    );
    let stop =
        json!({"candidates": [{"content": {"parts": [{"text": "Hi"}]}, "finishReason": "STOP"}]});
    assert!(refusal(&from_gemini(&stop).unwrap().message).is_none());
}

/// Chat citations beside a refusal (no text) are kept, on an empty text.
#[test]
fn chat_citations_beside_a_refusal_are_kept() {
    let response = json!({"choices": [{"message": {"role": "assistant", "content": null,
        "refusal": "No.", "annotations": [{"type": "url_citation", "url_citation":
        {"url": "https://p.example", "title": "Policy", "start_index": 0, "end_index": 0}}]}}]});
    let parsed = from_openai_chat(&response).unwrap();
    assert!(parsed.report.is_empty(), "{}", parsed.report);
    let ContentBlock::Text(text) = &parsed.message.content[0] else {
        panic!("{:?}", parsed.message.content)
    };
    assert_eq!(text.text, "");
    assert_eq!(
        text.annotations[0].url.as_deref(),
        Some("https://p.example")
    );
    assert!(matches!(&parsed.message.content[1], ContentBlock::Error(e) if e.message == "No."));
}

/// A server that repeats response ids (a proxy, a cache, a local model server) must not make
/// two answers one message: each read gets a fresh id, and the response's id is in the
/// metadata, for every provider.
#[test]
fn repeated_response_ids_give_distinct_messages() {
    use agentstate::providers::RESPONSE_ID;
    use agentstate::reducers::add_messages;
    let text = |t: &str| {
        [
            from_openai_chat(
                &json!({"id": "r", "choices": [{"message": {"role": "assistant", "content": t}}]}),
            ),
            from_openai_responses(
                &json!({"id": "r", "output": [{"type": "message", "role": "assistant",
                "content": [{"type": "output_text", "text": t, "annotations": []}]}]}),
            ),
            from_anthropic(
                &json!({"id": "r", "content": [{"type": "text", "text": t}]}),
                None,
            ),
            from_gemini(
                &json!({"responseId": "r", "candidates": [{"content": {"parts": [{"text": t}]}}]}),
            ),
        ]
        .map(|parsed| parsed.unwrap().message)
    };
    for (first, second) in text("first").into_iter().zip(text("second")) {
        assert_eq!(first.metadata.get(RESPONSE_ID), Some("r".into()));
        assert_eq!(second.metadata.get(RESPONSE_ID), Some("r".into()));
        assert_ne!(first.message_id, second.message_id);
        let merged = add_messages(vec![first], vec![second]);
        let texts: Vec<String> = merged.iter().map(Message::text).collect();
        assert_eq!(texts, ["first", "second"]);
    }
}

#[test]
fn a_chat_refusal_round_trips_as_a_refusal() {
    let response = json!({"choices": [{"message": {"role": "assistant", "content": "Partly.",
                                                   "refusal": "Not that part."}}]});
    let converted = from_openai_chat(&response).unwrap();
    assert!(converted.report.is_empty(), "{}", converted.report);
    let message = converted.message;
    let messages = [Message::text_message("Q", Role::User), message];
    let body = chat(&messages).0;
    assert_eq!(
        body["messages"][1],
        json!({"role": "assistant", "content": "Partly.", "refusal": "Not that part."})
    );
    // Elsewhere it is the assistant's text, noted.
    let anthropic = to_anthropic(&messages, None);
    let responses = to_openai_responses(&messages, None);
    for report in [&anthropic.report, &responses.report] {
        assert_eq!(
            report
                .notes()
                .iter()
                .map(|n| (&n.issue, &n.action))
                .collect::<Vec<_>>(),
            [
                (&Issue::Refusal, &Action::SentAsText),
                (&Issue::TrailingAssistant, &Action::Dropped)
            ][..report.notes().len()]
        );
    }
    assert_eq!(
        responses.request["input"][1]["content"],
        "Partly.Not that part."
    );
}

#[test]
fn reports_serialize_with_their_severity() {
    let messages = vec![
        Message::text_message("Go", Role::User),
        Message::text_message("", Role::Assistant).with_tool_calls(vec![ToolCall::new(
            "x",
            "f",
            json!({}),
        )]),
        Message::text_message("Next", Role::User),
    ];
    let report = to_anthropic(&messages, None).report;
    assert_eq!(
        serde_json::to_value(&report).unwrap(),
        json!([{"message": 1, "block": 1, "issue": "unanswered_tool_call", "id": "x",
                "action": "sent_as_is", "severity": "refused"}])
    );
    let replaced = Note {
        message: Some(0),
        block: Some(2),
        issue: Issue::UnsupportedSource { kind: "video" },
        action: Action::ReplacedWithText("[Video: v]".into()),
    };
    assert_eq!(
        serde_json::to_value(&replaced).unwrap(),
        json!({"message": 0, "block": 2, "issue": "unsupported_source", "kind": "video",
               "action": "replaced_with_text", "text": "[Video: v]", "severity": "warning"})
    );
}

#[test]
fn tool_results_made_of_content_blocks_send_their_media() {
    // A tool that returns content blocks (text and an image), as AgentFlow's tool results hold them.
    let output = json!([
        {"type": "text", "text": "The chart:"},
        {"type": "image", "media": {"kind": "data", "data_base64": "iVBO", "mime_type": "image/png"}}
    ]);
    let messages = vec![
        Message::text_message("Plot it", Role::User),
        Message::text_message("", Role::Assistant).with_tool_calls(vec![ToolCall::new(
            "p1",
            "plot",
            json!({}),
        )]),
        Message::tool_result("p1", output),
    ];
    let anthropic = to_anthropic(&messages, None);
    assert!(anthropic.report.is_empty(), "{}", anthropic.report);
    assert_eq!(
        anthropic.request["messages"][2]["content"][0],
        json!({"type": "tool_result", "tool_use_id": "p1", "content": [
            {"type": "text", "text": "The chart:"},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBO"}}
        ]})
    );
    let gemini = to_gemini(&messages, None);
    assert!(gemini.report.is_empty(), "{}", gemini.report);
    assert_eq!(
        gemini.request["contents"][2]["parts"],
        json!([{"function_response": {"id": "p1", "name": "plot", "response": {"result": "The chart:"},
                "parts": [{"inline_data": {"mime_type": "image/png", "data": "iVBO"}}]}}])
    );
    let responses = to_openai_responses(&messages, None);
    assert!(responses.report.is_empty(), "{}", responses.report);
    assert_eq!(
        responses.request["input"][2],
        json!({"type": "function_call_output", "call_id": "p1", "output": [
            {"type": "input_text", "text": "The chart:"},
            {"type": "input_image", "image_url": "data:image/png;base64,iVBO", "detail": "auto"}
        ]})
    );
    // Chat's tool messages are text only: the image follows the tool results, noted.
    let (body, report) = chat(&messages);
    assert_eq!(
        body["messages"][2],
        json!({"role": "tool", "content": "The chart:", "tool_call_id": "p1"})
    );
    assert_eq!(
        body["messages"][3],
        json!({"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBO"}}]})
    );
    assert_eq!(
        report.notes(),
        [Note {
            message: Some(2),
            block: Some(0),
            issue: Issue::ToolResultNonText { kind: "image" },
            action: Action::MovedToUserMessage,
        }]
    );
}

#[test]
fn a_bare_file_id_is_not_a_gemini_uri() {
    let uri = "https://generativelanguage.googleapis.com/v1beta/files/abc";
    let messages = vec![Message::new(
        Role::User,
        vec![
            ContentBlock::text("Compare"),
            ContentBlock::image(MediaRef::file_id("file-abc")),
            ContentBlock::image(MediaRef::file_id(uri)),
        ],
    )];
    let converted = to_gemini(&messages, None);
    // Sent as it is (AgentFlow's callers may keep a URI there), and reported as refused.
    assert_eq!(
        converted.request["contents"][0]["parts"][1]["file_data"]["file_uri"],
        "file-abc"
    );
    assert_eq!(
        converted.report.notes(),
        [Note {
            message: Some(0),
            block: Some(1),
            issue: Issue::FileIdNotUri {
                id: "file-abc".into()
            },
            action: Action::SentAsIs,
        }]
    );
    assert_eq!(converted.report.worst(), Some(Severity::Refused));
}

#[test]
fn the_way_back_reports_what_a_message_cannot_keep() {
    // Responses: a web search call and a refusal; the citation is kept on the text.
    let response = json!({"id": "resp_1", "output": [
        {"type": "web_search_call", "id": "ws_1", "status": "completed"},
        {"type": "message", "role": "assistant", "content": [
            {"type": "output_text", "text": "Sunny.", "annotations": [
                {"type": "url_citation", "url": "https://w.example", "title": "W", "start_index": 0, "end_index": 6}]},
            {"type": "refusal", "refusal": "Not the rest."}
        ]}
    ]});
    let converted = from_openai_responses(&response).unwrap();
    let found: Vec<(Option<usize>, Option<usize>, &Issue, &Action)> = converted
        .report
        .notes()
        .iter()
        .map(|n| (n.message, n.block, &n.issue, &n.action))
        .collect();
    assert_eq!(
        found,
        [(
            None,
            Some(0),
            &Issue::UnsupportedOutput {
                kind: "web_search_call".into()
            },
            &Action::KeptInRawOnly
        )]
    );
    let message = converted.message;
    let ContentBlock::Text(text) = &message.content[0] else {
        panic!("{:?}", message.content)
    };
    assert_eq!(
        text.annotations[0].url.as_deref(),
        Some("https://w.example")
    );
    // The refusal goes to Chat as a refusal, not as content.
    let body = chat(&[Message::text_message("Q", Role::User), message]).0;
    assert_eq!(
        body["messages"][1],
        json!({"role": "assistant", "content": "Sunny.", "refusal": "Not the rest."})
    );

    // Gemini: a part a message has no block for.
    let response = json!({"candidates": [{"content": {"role": "model", "parts": [
        {"text": "Ran it."},
        {"executableCode": {"language": "PYTHON", "code": "print(1)"}}
    ]}}]});
    let report = from_gemini(&response).unwrap().report;
    assert_eq!(
        report.to_string(),
        "response item 1: a message has no block for the response's `executableCode`; kept in the message's `raw` only"
    );
    assert_eq!(report.worst(), Some(Severity::Warning));
}
