//! The four converters' request bodies are valid for the official SDKs' request types:
//! `openai` (Chat `CompletionCreateParams`, Responses `ResponseCreateParams`), `anthropic`
//! (`MessageCreateParams`) and `google-genai` (`GenerateContentParameters`), validated with
//! pydantic by `tests/data/validate_provider_bodies.py` (which also fails on a key the type
//! does not define).
//!
//! The bodies: every conversation of the differential fixture and 500 random conversations
//! (every block kind, media by URL, bytes and file id, tool results whose output is content
//! blocks, ids other providers make), each converted for the four providers; the whole bodies
//! of typed requests (`ModelRequest`: tools, every tool choice, structured output, sampling,
//! maximum tokens, reasoning effort and thinking budget, cache breakpoints) with the fixture's
//! conversations and 50 random ones, for each provider that takes the request; and a few
//! deliberately broken bodies, which the validator must reject (so that a validator that
//! accepts everything cannot pass).
//!
//! The SDKs are Python: set `AGENTSTATE_SDK_PYTHON` to an interpreter that has them (`.ci/run`
//! makes `target/sdk-venv` with pinned versions). Without it the test prints one line and
//! passes.

use agentstate::message::{
    AudioBlock, ContentBlock, DataBlock, DocumentBlock, ErrorBlock, MediaRef, Message,
    ReasoningBlock, Role, ToolCall, ToolCallBlock, ToolResultBlock, VideoBlock,
};
use agentstate::providers::{to_anthropic, to_gemini, to_openai_chat, to_openai_responses};
use agentstate::providers::{
    CacheAt, Effort, ModelRequest, OutputSchema, Sampling, Tool, ToolChoice,
};
use serde_json::{json, Map, Value};
use std::io::Write;
use std::process::Command;

/// A small deterministic generator (xorshift64), so the same bodies are checked every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }
}

fn object(value: Value) -> Map<String, Value> {
    value.as_object().cloned().expect("an object")
}

fn media(rng: &mut Rng, mime: &str) -> MediaRef {
    match rng.next(5) {
        0 => MediaRef::url("https://m.example/x"),
        1 => MediaRef::data("AAAA", mime),
        2 => MediaRef::url(format!("data:{mime};base64,AAAA")),
        3 => MediaRef::file_id("file-1"),
        _ => MediaRef::file_id("https://generativelanguage.googleapis.com/v1beta/files/f1"),
    }
}

const IDS: [&str; 4] = ["call_1", "c.2", "functions.f:0", "toolu_4"];

fn block(rng: &mut Rng) -> ContentBlock {
    let id = IDS[rng.next(IDS.len())];
    let owner = ["openai", "anthropic", "gemini", "other"][rng.next(4)];
    match rng.next(15) {
        0..=2 => ContentBlock::text(["", "some text", "é ü"][rng.next(3)]),
        3 => ContentBlock::image(media(rng, "image/png")),
        4 => AudioBlock::new(media(rng, "audio/wav")).into(),
        5 => VideoBlock::new(media(rng, "video/mp4")).into(),
        6 => DocumentBlock::new(media(rng, "application/pdf")).into(),
        7 => DataBlock {
            data_base64: Some("e30=".into()),
            ..DataBlock::new("application/json")
        }
        .into(),
        8 => ToolCallBlock {
            signature: (rng.next(2) == 0).then(|| "c2ln".into()),
            extra: Some(Box::new(object(json!({"provider": owner, "id": "fc_1"})))),
            ..ToolCallBlock::new(id, "f", object(json!({"a": 1})))
        }
        .into(),
        9 => ContentBlock::tool_result(id, json!({"out": [1, "é"]})),
        10 => ToolResultBlock::failed(id, "boom").into(),
        11 => ContentBlock::tool_result(
            id,
            json!([
                {"type": "text", "text": "the chart:"},
                {"type": "image", "media": {"kind": "data", "data_base64": "iVBO", "mime_type": "image/png"}}
            ]),
        ),
        12 => ReasoningBlock {
            signature: Some("c2ln".into()),
            extra: Some(Box::new(object(json!({"provider": owner, "id": "rs_1"})))),
            ..ReasoningBlock::new("thinking")
        }
        .into(),
        13 => ContentBlock::Error(ErrorBlock {
            code: Some("refusal".into()),
            ..ErrorBlock::new("I can't.")
        }),
        _ => ContentBlock::error("oops"),
    }
}

fn random_conversation(rng: &mut Rng) -> Vec<Message> {
    (0..rng.next(9))
        .map(|_| {
            let role = [Role::System, Role::User, Role::Assistant, Role::Tool][rng.next(4)];
            let content = (0..rng.next(5)).map(|_| block(rng)).collect();
            let mut message = Message::new(role, content);
            if role == Role::Assistant && rng.next(3) == 0 {
                let mut call = ToolCall::new(IDS[rng.next(IDS.len())], "g", json!({"b": 2}));
                if rng.next(4) == 0 {
                    call.function.arguments = "{broken".into();
                }
                message = message.with_tool_calls(vec![call]);
            }
            message
        })
        .collect()
}

fn fixture_conversations() -> Vec<(String, Vec<Message>)> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/providers_agentflow.json"
    );
    let fixture: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    fixture["cases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|case| {
            let name = case["name"].as_str().unwrap().to_owned();
            (
                name,
                serde_json::from_value(case["messages"].clone()).unwrap(),
            )
        })
        .collect()
}

/// The four complete request bodies of a conversation.
fn bodies(messages: &[Message]) -> [(&'static str, Value); 4] {
    let mut chat = serde_json::to_value(to_openai_chat(messages, Some("summary")).request).unwrap();
    chat["model"] = json!("gpt-4o");
    let mut responses = to_openai_responses(messages, Some("summary")).request;
    responses["model"] = json!("o4-mini");
    let mut anthropic = to_anthropic(messages, Some("summary")).request;
    anthropic["model"] = json!("claude-sonnet-4-5");
    anthropic["max_tokens"] = json!(1024);
    let mut gemini = to_gemini(messages, Some("summary")).request;
    gemini["model"] = json!("gemini-2.5-flash");
    [
        ("openai_chat", chat),
        ("openai_responses", responses),
        ("anthropic", anthropic),
        ("gemini", gemini),
    ]
}

/// Typed requests that together set every parameter each provider takes.
fn requests() -> Vec<ModelRequest> {
    let tools = || {
        vec![
            Tool::new(
                "get_weather",
                "The weather in a city.",
                json!({"type": "object", "properties": {"city": {"type": "string"}},
                       "required": ["city"], "additionalProperties": false}),
            ),
            Tool::new("now", "", json!({"type": "object", "properties": {}})),
        ]
    };
    let strict = || Tool::new("strict_one", "Strict.", json!({"type": "object"})).strict(true);
    let output = OutputSchema {
        description: Some("The answer.".into()),
        ..OutputSchema::new(
            "answer",
            json!({"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}),
        )
    };
    let all_sampling = Sampling {
        temperature: Some(0.3),
        top_p: Some(0.9),
        top_k: Some(40),
        stop: vec!["END".into(), "STOP".into()],
        seed: Some(7),
        frequency_penalty: Some(0.1),
        presence_penalty: Some(-0.1),
    };
    let mut requests: Vec<ModelRequest> = [
        ToolChoice::Auto,
        ToolChoice::None,
        ToolChoice::Required,
        ToolChoice::Tool("now".into()),
    ]
    .into_iter()
    .map(|choice| {
        ModelRequest::builder("model-1")
            .tools(tools())
            .tool_choice(choice)
            .max_output_tokens(1024)
            .build()
            .unwrap()
    })
    .collect();
    // OpenAI Chat: every parameter it has.
    requests.push(
        ModelRequest::builder("gpt-4o")
            .tools(tools())
            .tool(strict())
            .tool_choice(ToolChoice::Tool("get_weather".into()))
            .output_schema(output.clone())
            .sampling(Sampling {
                top_k: None,
                ..all_sampling.clone()
            })
            .max_output_tokens(500)
            .reasoning_effort(Effort::High)
            .build()
            .unwrap(),
    );
    // OpenAI Responses.
    requests.push(
        ModelRequest::builder("o4-mini")
            .tools(tools())
            .tool(strict())
            .tool_choice(ToolChoice::Required)
            .output_schema(output.clone())
            .temperature(1.0)
            .top_p(0.5)
            .max_output_tokens(500)
            .reasoning_effort(Effort::Minimal)
            .cache_message(CacheAt::Last)
            .build()
            .unwrap(),
    );
    // Anthropic: thinking, effort, structured output, every cache breakpoint.
    requests.push(
        ModelRequest::builder("claude-sonnet-4-5")
            .tools(tools())
            .tool(strict())
            .tool_choice(ToolChoice::Auto)
            .output_schema(output.clone())
            .stop("END")
            .max_output_tokens(4096)
            .reasoning_effort(Effort::XHigh)
            .thinking_budget(2048)
            .cache_system(true)
            .cache_tools(true)
            .cache_message(CacheAt::Message(3))
            .build()
            .unwrap(),
    );
    requests.push(
        ModelRequest::builder("claude-sonnet-4-5")
            .tools(tools())
            .max_output_tokens(100)
            .cache_message(CacheAt::Last)
            .build()
            .unwrap(),
    );
    // Gemini: every sampling parameter, thinking, structured output.
    requests.push(
        ModelRequest::builder("gemini-2.5-flash")
            .tools(tools())
            .tool_choice(ToolChoice::Tool("get_weather".into()))
            .output_schema(output)
            .sampling(all_sampling)
            .max_output_tokens(800)
            .thinking_budget(0)
            .build()
            .unwrap(),
    );
    requests
}

/// The whole bodies of a typed request with a conversation, for each provider that takes it.
fn request_bodies(request: &ModelRequest, messages: &[Message]) -> Vec<(&'static str, Value)> {
    let value = |body: Result<Value, _>| body.ok();
    let summary = || agentstate::providers::Conversation::new(messages).summary("summary");
    [
        (
            "openai_chat",
            value(
                request
                    .to_openai_chat(summary())
                    .map(|c| serde_json::to_value(c.request).unwrap()),
            ),
        ),
        (
            "openai_responses",
            value(
                request
                    .to_openai_responses(summary())
                    .map(|c| serde_json::to_value(c.request).unwrap()),
            ),
        ),
        (
            "anthropic",
            value(
                request
                    .to_anthropic(summary())
                    .map(|c| serde_json::to_value(c.request).unwrap()),
            ),
        ),
        (
            "gemini",
            value(
                request
                    .to_gemini(summary())
                    .map(|c| serde_json::to_value(c.request).unwrap()),
            ),
        ),
    ]
    .into_iter()
    .filter_map(|(provider, body)| Some((provider, body?)))
    .collect()
}

/// Bodies the SDK types must reject: each breaks one rule of its type.
fn broken() -> Vec<(&'static str, &'static str, Value)> {
    vec![
        (
            "input_image without detail",
            "openai_responses",
            json!({"model": "o4-mini", "input": [{"role": "user", "content": [
                {"type": "input_image", "image_url": "https://x.example/a.png"}]}]}),
        ),
        (
            "a tool message without tool_call_id",
            "openai_chat",
            json!({"model": "gpt-4o", "messages": [{"role": "tool", "content": "42"}]}),
        ),
        (
            "a key Anthropic's tool_result does not have",
            "anthropic",
            json!({"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "t", "content": "x", "output": "x"}]}]}),
        ),
        (
            "an image block without source",
            "anthropic",
            json!({"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": [
                {"type": "image"}]}]}),
        ),
        (
            "an Anthropic tool without input_schema",
            "anthropic",
            json!({"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}],
                   "tools": [{"name": "f", "description": "d"}]}),
        ),
        (
            "an Anthropic tool choice of OpenAI's shape",
            "anthropic",
            json!({"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}],
                   "tool_choice": "required"}),
        ),
        (
            "a Chat tool without its function wrapper",
            "openai_chat",
            json!({"model": "m", "messages": [{"role": "user", "content": "hi"}],
                   "tools": [{"type": "function", "name": "f", "parameters": {}}]}),
        ),
        (
            "a Responses function tool without strict",
            "openai_responses",
            json!({"model": "m", "input": [], "tools": [{"type": "function", "name": "f", "parameters": {}}]}),
        ),
        (
            "a Gemini function calling config key that does not exist",
            "gemini",
            json!({"model": "m", "contents": [], "tool_config": {"function_calling_config": {"mode": "ANY", "allowed_functions": ["f"]}}}),
        ),
        (
            "a Gemini generation_config key that does not exist",
            "gemini",
            json!({"model": "m", "contents": [], "generation_config": {"max_tokens": 10}}),
        ),
        (
            "a key Gemini's part does not have",
            "gemini",
            json!({"model": "m", "contents": [{"role": "user", "parts": [{"text": "hi", "kind": "text"}]}]}),
        ),
    ]
}

#[test]
fn bodies_are_valid_for_the_official_sdk_types() {
    let Some(python) = std::env::var_os("AGENTSTATE_SDK_PYTHON") else {
        println!("provider SDK types: AGENTSTATE_SDK_PYTHON is not set; skipping");
        return;
    };
    let mut conversations = fixture_conversations();
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    for i in 0..500 {
        conversations.push((format!("random {i}"), random_conversation(&mut rng)));
    }
    let dir = std::env::temp_dir().join(format!("agentstate-sdk-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("cases.jsonl");
    let mut file = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
    let mut line = |name: &str, provider: &str, body: &Value, valid: bool| {
        let case = json!({"name": name, "provider": provider, "body": body, "valid": valid});
        writeln!(file, "{case}").unwrap();
    };
    for (name, messages) in &conversations {
        for (provider, body) in bodies(messages) {
            line(name, provider, &body, true);
        }
    }
    let requests = requests();
    let mut whole = 0;
    for (name, messages) in conversations.iter().take(conversations.len() - 450) {
        for (r, request) in requests.iter().enumerate() {
            for (provider, body) in request_bodies(request, messages) {
                line(&format!("{name} / request {r}"), provider, &body, true);
                whole += 1;
            }
        }
    }
    assert!(whole > 1000, "only {whole} whole bodies");
    for (name, provider, body) in broken() {
        line(name, provider, &body, false);
    }
    file.flush().unwrap();
    drop(file);
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/validate_provider_bodies.py"
    );
    let output = Command::new(python)
        .arg(script)
        .arg(&path)
        .output()
        .expect("AGENTSTATE_SDK_PYTHON runs");
    let _ = std::fs::remove_dir_all(&dir);
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    println!("{}", stdout.lines().last().unwrap_or_default());
    assert!(
        output.status.success(),
        "bodies the SDK types do not take as expected:\n{stdout}{stderr}"
    );
}
