//! The OpenAI converters' output is in the official request shapes: every request built from
//! the differential fixture's conversations (real AgentFlow messages and random ones) and
//! from a conversation with every kind of block deserializes into `async-openai`'s request
//! types, and serializes back from them to the same JSON (so no field was ignored; the one
//! default async-openai adds is noted below).

use agentstate::message::{
    AudioBlock, ContentBlock, DocumentBlock, MediaRef, Message, ReasoningBlock, Role, ToolCall,
    VideoBlock,
};
use agentstate::providers::openai_chat::to_openai_chat;
use agentstate::providers::openai_responses::to_openai_responses;
use async_openai::types::chat::CreateChatCompletionRequest;
use async_openai::types::responses::CreateResponse;
use serde_json::{json, Value};

fn conversations() -> Vec<Vec<Message>> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/providers_agentflow.json"
    );
    let fixture: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let mut all: Vec<Vec<Message>> = fixture["cases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|case| serde_json::from_value(case["messages"].clone()).unwrap())
        .collect();
    let reasoning = ReasoningBlock {
        signature: Some("gAAAA".into()),
        extra: json!({"provider": "openai", "id": "rs_1"})
            .as_object()
            .cloned()
            .map(Box::new),
        ..ReasoningBlock::new("Think.")
    };
    all.push(vec![
        Message::text_message("Be brief.", Role::System),
        Message::new(
            Role::User,
            vec![
                ContentBlock::text("All of these:"),
                ContentBlock::image(MediaRef::url("https://x.example/a.png")),
                ContentBlock::image(MediaRef::data("iVBO", "image/png")),
                AudioBlock::new(MediaRef::data("UklG", "audio/wav")).into(),
                DocumentBlock::new(MediaRef::data("JVBE", "application/pdf")).into(),
                DocumentBlock::new(MediaRef::file_id("file-1")).into(),
                VideoBlock::new(MediaRef::url("https://x.example/v.mp4")).into(),
            ],
        ),
        Message::new(
            Role::Assistant,
            vec![reasoning.into(), ContentBlock::text("Ok.")],
        )
        .with_tool_calls(vec![
            ToolCall::new("c1", "f", json!({"a": 1})),
            ToolCall::new("c2", "g", json!({})),
        ]),
        Message::tool_result("c1", "one").with_block(ContentBlock::image(MediaRef::url(
            "https://x.example/r.png",
        ))),
        Message::tool_result("c2", json!({"two": 2})),
        Message::text_message("Done?", Role::User),
    ]);
    all
}

#[test]
fn chat_requests_are_async_openai_requests() {
    for messages in conversations() {
        let mut body =
            serde_json::to_value(to_openai_chat(&messages, Some("summary")).request).unwrap();
        body["model"] = json!("gpt-4o");
        let typed: CreateChatCompletionRequest =
            serde_json::from_value(body.clone()).unwrap_or_else(|e| panic!("{e}: {body}"));
        assert_eq!(serde_json::to_value(&typed).unwrap(), body);
    }
}

#[test]
fn responses_requests_are_async_openai_requests() {
    for messages in conversations() {
        let mut body = to_openai_responses(&messages, Some("summary")).request;
        body["model"] = json!("o4-mini");
        let typed: CreateResponse =
            serde_json::from_value(body.clone()).unwrap_or_else(|e| panic!("{e}: {body}"));
        let mut back = serde_json::to_value(&typed).unwrap();
        // async-openai writes a default that the API (and AgentFlow) leave out: a role
        // message's `"type": "message"`.
        for item in back["input"].as_array_mut().unwrap() {
            if item.get("role").is_some() && item["type"] == "message" {
                item.as_object_mut().unwrap().remove("type");
            }
        }
        assert_eq!(back, body);
    }
}

/// Typed requests with every parameter OpenAI takes: their bodies convert into async-openai's
/// request types (feature `async-openai`, `TryFrom`), which serialize back to the same JSON.
#[cfg(feature = "async-openai")]
#[test]
fn typed_bodies_convert_into_async_openai_requests() {
    use agentstate::providers::{Effort, ModelRequest, OutputSchema, Tool, ToolChoice};

    let tools = [
        Tool::new(
            "get_weather",
            "The weather.",
            json!({"type": "object", "properties": {"city": {"type": "string"}}}),
        ),
        Tool::new("now", "", json!({"type": "object"})).strict(true),
    ];
    let output = OutputSchema {
        description: Some("The answer.".into()),
        ..OutputSchema::new("answer", json!({"type": "object"}))
    };
    let choices = [
        ToolChoice::Auto,
        ToolChoice::None,
        ToolChoice::Required,
        ToolChoice::Tool("now".into()),
    ];
    for (i, choice) in choices.into_iter().enumerate() {
        let chat = ModelRequest::builder("gpt-4o")
            .tools(tools.clone())
            .tool_choice(choice.clone())
            .output_schema(output.clone())
            .temperature(0.5)
            .top_p(0.5)
            .stop("END")
            .seed(3)
            .frequency_penalty(0.5)
            .presence_penalty(0.5)
            .max_output_tokens(100)
            .reasoning_effort([Effort::Low, Effort::High, Effort::Minimal, Effort::Off][i])
            .build()
            .unwrap();
        let responses = ModelRequest::builder("o4-mini")
            .tools(tools.clone())
            .tool_choice(choice)
            .output_schema(output.clone())
            .temperature(0.5)
            .max_output_tokens(100)
            .reasoning_effort(Effort::Medium)
            .build()
            .unwrap();
        for messages in conversations() {
            let body = chat.to_openai_chat(&messages).unwrap().request;
            let typed = CreateChatCompletionRequest::try_from(&body)
                .unwrap_or_else(|e| panic!("{e}: {}", serde_json::to_string(&body).unwrap()));
            assert_eq!(
                serde_json::to_value(&typed).unwrap(),
                serde_json::to_value(&body).unwrap()
            );
            let body = responses.to_openai_responses(&messages).unwrap().request;
            let typed = CreateResponse::try_from(&body)
                .unwrap_or_else(|e| panic!("{e}: {}", serde_json::to_string(&body).unwrap()));
            let mut back = serde_json::to_value(&typed).unwrap();
            for item in back["input"].as_array_mut().unwrap() {
                if item.get("role").is_some() && item["type"] == "message" {
                    item.as_object_mut().unwrap().remove("type");
                }
            }
            assert_eq!(back, serde_json::to_value(&body).unwrap());
        }
    }
}
