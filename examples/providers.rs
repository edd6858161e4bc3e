//! One request, four providers: a `ModelRequest` (a tool, a tool choice, a maximum of output
//! tokens, reasoning as an effort and as a thinking budget, a cache breakpoint) and a
//! conversation (a user question with an image, an assistant turn with Anthropic thinking and
//! two parallel tool calls, their results, and a follow-up). Prints the whole request body for
//! OpenAI Chat, OpenAI Responses, Anthropic and Gemini, each with its report of what the
//! provider could not take.
//!
//! Run with `cargo run --example providers`.

use agentstate::message::{ContentBlock, MediaRef, Message, ReasoningBlock, Role, ToolCall};
use agentstate::providers::Report;
use agentstate::providers::{CacheAt, Conversation, Effort, ModelRequest, Tool, ToolChoice};
use serde::Serialize;
use serde_json::json;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // Thinking as `from_anthropic` reads it: the summary, its signature and who made it.
    let thinking = ReasoningBlock {
        signature: Some("EqQBCkYIBxgCKkDq".into()),
        extra: json!({"provider": "anthropic"})
            .as_object()
            .cloned()
            .map(Box::new),
        ..ReasoningBlock::new("The user wants both cities; two lookups can run at once.")
    };
    let messages = vec![
        Message::text_message("You are a travel assistant. Be brief.", Role::System),
        Message::text_message("What's the weather where I'm going? My route:", Role::User)
            .with_block(ContentBlock::image(MediaRef::url(
                "https://maps.example/route.png",
            ))),
        Message::new(
            Role::Assistant,
            vec![
                thinking.into(),
                ContentBlock::text("Checking Paris and Rome."),
            ],
        )
        .with_tool_calls(vec![
            ToolCall::new("call_paris", "get_weather", json!({"city": "Paris"})),
            ToolCall::new("call_rome", "get_weather", json!({"city": "Rome"})),
        ]),
        Message::tool_result("call_paris", "Sunny, 22C"),
        Message::tool_result("call_rome", json!({"sky": "rain", "temp": 17})),
        Message::text_message("Paris: sunny, 22C. Rome: rain, 17C.", Role::Assistant),
        Message::text_message("Should I pack an umbrella?", Role::User),
    ];
    let summary = "Earlier: the user is travelling Paris -> Rome next week.";
    let request = ModelRequest::builder("a-model")
        .tool(Tool::new(
            "get_weather",
            "Today's weather in a city.",
            json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}),
        ))
        .tool_choice(ToolChoice::Auto)
        .max_output_tokens(2048)
        .reasoning_effort(Effort::Low)
        .thinking_budget(1024)
        .cache_message(CacheAt::Last)
        .build()?;
    let conversation = Conversation::new(&messages).summary(summary);

    let chat = request.to_openai_chat(conversation)?;
    show("OpenAI Chat Completions", &chat.request, &chat.report)?;
    let responses = request.to_openai_responses(conversation)?;
    show("OpenAI Responses", &responses.request, &responses.report)?;
    let anthropic = request.to_anthropic(conversation)?;
    show("Anthropic Messages", &anthropic.request, &anthropic.report)?;
    let gemini = request.to_gemini(conversation)?;
    show("Gemini", &gemini.request, &gemini.report)?;
    Ok(())
}

fn show(title: &str, body: &impl Serialize, report: &Report) -> Result<(), serde_json::Error> {
    println!("=== {title} ===");
    println!("{}", serde_json::to_string_pretty(body)?);
    // The worst note says whether the provider would refuse the request.
    match report.worst() {
        None => println!("report: lossless\n"),
        Some(worst) => println!("report (worst: {worst}):\n{report}\n"),
    }
    Ok(())
}
