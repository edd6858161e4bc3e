//! Conversion cost of the provider formats, per message: a conversation of 10, 100 and 1000
//! messages in the shape of a tool-using agent (a system prompt, then rounds of a user
//! question, an assistant turn with two parallel tool calls, their two tool results and an
//! answer; one user message in five has an image) converted to each provider's request body.
//!
//! `to_openai_chat` is timed alone (the borrowed request) and with its serialization to a JSON
//! string, which is what is sent; the other three return a `serde_json::Value` (their typed
//! body, serialized into one). divan reports
//! the time per message through its item counter. The goal: at most 0.5 µs per message
//! for `to_openai_chat`.
//!
//! The `request_*` benchmarks convert a typed `ModelRequest` with 20 tools (each a JSON Schema
//! object of three properties), a tool choice, a structured output's schema, a maximum of
//! output tokens and reasoning, with the 1,000-message conversation, to each provider's whole
//! body, alone and serialized to bytes. The goal: at most 0.5 µs per message plus 2 µs
//! per tool (540 µs).
//!
//! Run with `cargo bench --bench providers`; `benches/README.md`'s table comes from it.

use agentstate::message::{ContentBlock, MediaRef, Message, Role, ToolCall};
use agentstate::providers::anthropic::to_anthropic;
use agentstate::providers::gemini::to_gemini;
use agentstate::providers::openai_chat::to_openai_chat;
use agentstate::providers::openai_responses::to_openai_responses;
use agentstate::providers::{Effort, ModelRequest, OutputSchema, Tool, ToolChoice};
use divan::counter::ItemsCount;
use divan::{black_box, Bencher};
use serde_json::json;

fn main() {
    divan::main();
}

const SIZES: [usize; 3] = [10, 100, 1_000];

/// A conversation of `n` messages (see the module docs).
fn conversation(n: usize) -> Vec<Message> {
    let mut messages = vec![Message::text_message(
        "You are a travel assistant. Answer briefly and cite your tools.",
        Role::System,
    )];
    let mut round = 0;
    while messages.len() < n {
        let mut question = Message::text_message(
            format!("What is the weather in Paris and Rome on day {round}?"),
            Role::User,
        );
        if round % 5 == 0 {
            question = question.with_block(ContentBlock::image(MediaRef::url(format!(
                "https://maps.example/{round}.png"
            ))));
        }
        let (a, b) = (format!("call_{round}_a"), format!("call_{round}_b"));
        messages.extend([
            question,
            Message::text_message("Let me check both cities.", Role::Assistant).with_tool_calls(
                vec![
                    ToolCall::new(
                        a.as_str(),
                        "get_weather",
                        json!({"city": "Paris", "day": round}),
                    ),
                    ToolCall::new(
                        b.as_str(),
                        "get_weather",
                        json!({"city": "Rome", "day": round}),
                    ),
                ],
            ),
            Message::tool_result(a, "Sunny, 22C"),
            Message::tool_result(b, json!({"sky": "rain", "temp": 17})),
            Message::text_message(
                "Paris is sunny at 22C; Rome has rain at 17C.",
                Role::Assistant,
            ),
        ]);
        round += 1;
    }
    messages.truncate(n);
    messages
}

#[divan::bench(args = SIZES)]
fn openai_chat(bencher: Bencher, n: usize) {
    let messages = conversation(n);
    bencher
        .counter(ItemsCount::new(n))
        .bench(|| to_openai_chat(black_box(&messages), None));
}

#[divan::bench(args = SIZES)]
fn openai_chat_to_json(bencher: Bencher, n: usize) {
    let messages = conversation(n);
    bencher
        .counter(ItemsCount::new(n))
        .bench(|| serde_json::to_vec(&to_openai_chat(black_box(&messages), None).request).unwrap());
}

#[divan::bench(args = SIZES)]
fn openai_responses(bencher: Bencher, n: usize) {
    let messages = conversation(n);
    bencher
        .counter(ItemsCount::new(n))
        .bench(|| to_openai_responses(black_box(&messages), None));
}

#[divan::bench(args = SIZES)]
fn anthropic(bencher: Bencher, n: usize) {
    let messages = conversation(n);
    bencher
        .counter(ItemsCount::new(n))
        .bench(|| to_anthropic(black_box(&messages), None));
}

#[divan::bench(args = SIZES)]
fn gemini(bencher: Bencher, n: usize) {
    let messages = conversation(n);
    bencher
        .counter(ItemsCount::new(n))
        .bench(|| to_gemini(black_box(&messages), None));
}

/// A request with 20 tools (see the module docs).
fn request() -> ModelRequest {
    let tools = (0..20).map(|i| {
        Tool::new(
            format!("tool_{i}"),
            format!("Tool number {i}: looks something up and returns it."),
            json!({"type": "object", "properties": {
                "query": {"type": "string", "description": "What to look up."},
                "limit": {"type": "integer", "minimum": 1, "maximum": 50},
                "units": {"type": "string", "enum": ["metric", "imperial"]}
            }, "required": ["query"], "additionalProperties": false}),
        )
    });
    ModelRequest::builder("model-1")
        .tools(tools)
        .tool_choice(ToolChoice::Auto)
        .output_schema(OutputSchema::new(
            "answer",
            json!({"type": "object", "properties": {"text": {"type": "string"}}}),
        ))
        .max_output_tokens(4096)
        .reasoning_effort(Effort::Medium)
        .thinking_budget(2048)
        .build()
        .unwrap()
}

const REQUEST_MESSAGES: usize = 1_000;

#[divan::bench]
fn request_openai_chat(bencher: Bencher) {
    let (request, messages) = (request(), conversation(REQUEST_MESSAGES));
    bencher
        .counter(ItemsCount::new(REQUEST_MESSAGES))
        .bench(|| {
            black_box(&request)
                .to_openai_chat(black_box(&messages))
                .unwrap()
        });
}

#[divan::bench]
fn request_openai_chat_to_json(bencher: Bencher) {
    let (request, messages) = (request(), conversation(REQUEST_MESSAGES));
    bencher
        .counter(ItemsCount::new(REQUEST_MESSAGES))
        .bench(|| {
            let body = black_box(&request)
                .to_openai_chat(black_box(&messages))
                .unwrap();
            serde_json::to_vec(&body.request).unwrap()
        });
}

#[divan::bench]
fn request_openai_responses(bencher: Bencher) {
    let (request, messages) = (request(), conversation(REQUEST_MESSAGES));
    bencher
        .counter(ItemsCount::new(REQUEST_MESSAGES))
        .bench(|| {
            black_box(&request)
                .to_openai_responses(black_box(&messages))
                .unwrap()
        });
}

#[divan::bench]
fn request_openai_responses_to_json(bencher: Bencher) {
    let (request, messages) = (request(), conversation(REQUEST_MESSAGES));
    bencher
        .counter(ItemsCount::new(REQUEST_MESSAGES))
        .bench(|| {
            let body = black_box(&request)
                .to_openai_responses(black_box(&messages))
                .unwrap();
            serde_json::to_vec(&body.request).unwrap()
        });
}

#[divan::bench]
fn request_anthropic(bencher: Bencher) {
    let (request, messages) = (request(), conversation(REQUEST_MESSAGES));
    bencher
        .counter(ItemsCount::new(REQUEST_MESSAGES))
        .bench(|| {
            black_box(&request)
                .to_anthropic(black_box(&messages))
                .unwrap()
        });
}

#[divan::bench]
fn request_anthropic_to_json(bencher: Bencher) {
    let (request, messages) = (request(), conversation(REQUEST_MESSAGES));
    bencher
        .counter(ItemsCount::new(REQUEST_MESSAGES))
        .bench(|| {
            let body = black_box(&request)
                .to_anthropic(black_box(&messages))
                .unwrap();
            serde_json::to_vec(&body.request).unwrap()
        });
}

#[divan::bench]
fn request_gemini(bencher: Bencher) {
    let (request, messages) = (request(), conversation(REQUEST_MESSAGES));
    bencher
        .counter(ItemsCount::new(REQUEST_MESSAGES))
        .bench(|| black_box(&request).to_gemini(black_box(&messages)).unwrap());
}

#[divan::bench]
fn request_gemini_to_json(bencher: Bencher) {
    let (request, messages) = (request(), conversation(REQUEST_MESSAGES));
    bencher
        .counter(ItemsCount::new(REQUEST_MESSAGES))
        .bench(|| {
            let body = black_box(&request).to_gemini(black_box(&messages)).unwrap();
            serde_json::to_vec(&body.request).unwrap()
        });
}
