//! Typed model requests (`agentstate::providers::ModelRequest`): where each parameter goes in each
//! provider's body, what each provider refuses (a `RequestError`, no body), the notes of what
//! does not apply, the bodies' key order and byte stability, and the builder's checks.

use agentstate::message::{Message, Role, ToolCall};
use agentstate::providers::{to_anthropic, to_gemini, to_openai_chat, to_openai_responses};
use agentstate::providers::{Action, Issue, Severity};
use agentstate::providers::{
    CacheAt, CacheBreakpoints, Conversation, Effort, ModelRequest, ModelRequestBuilder,
    OutputSchema, RequestError, Sampling, Tool, ToolChoice,
};
use proptest::prelude::*;
use serde_json::{json, Value};

fn weather() -> Tool {
    Tool::new(
        "get_weather",
        "The weather in a city.",
        json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}),
    )
}

fn clock() -> Tool {
    Tool::new(
        "now",
        "The time.",
        json!({"type": "object", "properties": {}}),
    )
}

fn conversation() -> Vec<Message> {
    vec![
        Message::text_message("Be brief.", Role::System),
        Message::text_message("Weather in Paris?", Role::User),
        Message::text_message("", Role::Assistant).with_tool_calls(vec![ToolCall::new(
            "call_1",
            "get_weather",
            json!({"city": "Paris"}),
        )]),
        Message::tool_result("call_1", "Sunny"),
        Message::text_message("Thanks. And tomorrow?", Role::User),
    ]
}

fn builder() -> ModelRequestBuilder {
    ModelRequest::builder("m").tool(weather()).tool(clock())
}

fn value<T: serde::Serialize>(body: &T) -> Value {
    serde_json::to_value(body).unwrap()
}

/// The serialized top-level keys in order (serde_json's `Value` sorts them, so read the text).
fn text_keys<T: serde::Serialize>(body: &T) -> Vec<String> {
    let text = serde_json::to_string(body).unwrap();
    let mut keys = Vec::new();
    let mut depth = 0;
    let mut chars = text.char_indices().peekable();
    let mut in_string = false;
    let mut start = 0;
    while let Some((i, c)) = chars.next() {
        match c {
            '\\' if in_string => {
                chars.next();
            }
            '"' if !in_string => {
                in_string = true;
                start = i + 1;
            }
            '"' => {
                in_string = false;
                if depth == 1 && text[i + 1..].starts_with(':') {
                    keys.push(text[start..i].to_owned());
                }
            }
            '{' | '[' if !in_string => depth += 1,
            '}' | ']' if !in_string => depth -= 1,
            _ => {}
        }
    }
    keys
}

#[test]
fn every_parameter_goes_where_openai_chat_takes_it() {
    let request = builder()
        .tool_choice(ToolChoice::Required)
        .output_schema(OutputSchema {
            description: Some("The answer.".into()),
            ..OutputSchema::new("answer", json!({"type": "object"}))
        })
        .temperature(0.2)
        .top_p(0.9)
        .stop("END")
        .seed(42)
        .frequency_penalty(0.5)
        .presence_penalty(-0.5)
        .max_output_tokens(300)
        .reasoning_effort(Effort::High)
        .thinking_budget(2048)
        .build()
        .unwrap();
    let messages = conversation();
    let converted = request.to_openai_chat(&messages).unwrap();
    assert!(converted.report.is_empty(), "{}", converted.report);
    let body = value(&converted.request);
    assert_eq!(body["model"], "m");
    assert_eq!(body["tool_choice"], "required");
    assert_eq!(
        body["tools"][1],
        json!({"type": "function", "function": {"name": "now", "description": "The time.",
            "parameters": {"type": "object", "properties": {}}, "strict": false}})
    );
    assert_eq!(
        body["response_format"],
        // Strict: the object closed, as OpenAI's strict mode requires.
        json!({"type": "json_schema", "json_schema": {"name": "answer", "description": "The answer.",
            "schema": {"type": "object", "additionalProperties": false, "properties": {}, "required": []},
            "strict": true}})
    );
    assert_eq!(body["temperature"], 0.2);
    assert_eq!(body["top_p"], 0.9);
    assert_eq!(body["stop"], json!(["END"]));
    assert_eq!(body["seed"], 42);
    assert_eq!(body["frequency_penalty"], 0.5);
    assert_eq!(body["presence_penalty"], -0.5);
    assert_eq!(body["max_completion_tokens"], 300);
    assert_eq!(body["reasoning_effort"], "high");
    // The conversation is the one `to_openai_chat` gives.
    assert_eq!(
        body["messages"],
        value(&to_openai_chat(&messages, None).request)["messages"]
    );
    assert_eq!(
        text_keys(&converted.request),
        [
            "messages",
            "model",
            "frequency_penalty",
            "max_completion_tokens",
            "presence_penalty",
            "reasoning_effort",
            "response_format",
            "seed",
            "stop",
            "temperature",
            "tool_choice",
            "tools",
            "top_p"
        ]
    );
}

#[test]
fn a_bare_request_writes_only_the_model_and_the_conversation() {
    let request = ModelRequest::builder("m").build().unwrap();
    let messages = conversation();
    let chat = request.to_openai_chat(&messages).unwrap();
    assert_eq!(text_keys(&chat.request), ["messages", "model"]);
    let responses = request.to_openai_responses(&messages).unwrap();
    assert_eq!(
        text_keys(&responses.request),
        ["model", "input", "instructions"]
    );
    let gemini = request.to_gemini(&messages).unwrap();
    assert_eq!(
        text_keys(&gemini.request),
        ["model", "contents", "system_instruction"]
    );
    let anthropic = ModelRequest::builder("m")
        .max_output_tokens(10)
        .build()
        .unwrap();
    let anthropic = anthropic.to_anthropic(&messages).unwrap();
    assert_eq!(
        text_keys(&anthropic.request),
        ["max_tokens", "messages", "model", "system"]
    );
    // The conversations are the ones the `to_*` functions give.
    let old = to_anthropic(&messages, None).request;
    let new = value(&anthropic.request);
    assert_eq!(
        (&new["messages"], &new["system"]),
        (&old["messages"], &old["system"])
    );
    let old = to_gemini(&messages, None).request;
    let new = value(&gemini.request);
    assert_eq!(
        (&new["contents"], &new["system_instruction"]),
        (&old["contents"], &old["system_instruction"])
    );
    let old = to_openai_responses(&messages, None).request;
    let new = value(&responses.request);
    assert_eq!(
        (&new["input"], &new["instructions"]),
        (&old["input"], &old["instructions"])
    );
}

#[test]
fn every_parameter_goes_where_openai_responses_takes_it() {
    let request = builder()
        .tool_choice(ToolChoice::Tool("now".into()))
        .output_schema(OutputSchema::new("answer", json!({"type": "object"})))
        .temperature(1.0)
        .top_p(0.5)
        .max_output_tokens(100)
        .reasoning_effort(Effort::Minimal)
        .build()
        .unwrap();
    let messages = conversation();
    let converted = request
        .to_openai_responses(Conversation::new(&messages).summary("Earlier: hello."))
        .unwrap();
    assert!(converted.report.is_empty(), "{}", converted.report);
    let body = value(&converted.request);
    assert_eq!(body["instructions"], "Be brief.\nEarlier: hello.");
    assert_eq!(
        body["tool_choice"],
        json!({"type": "function", "name": "now"})
    );
    assert_eq!(
        body["tools"][0],
        json!({"type": "function", "name": "get_weather", "description": "The weather in a city.",
            "parameters": weather().parameters, "strict": false})
    );
    assert_eq!(
        body["text"],
        json!({"format": {"type": "json_schema", "name": "answer",
            "schema": {"type": "object", "additionalProperties": false, "properties": {}, "required": []},
            "strict": true}})
    );
    assert_eq!(body["reasoning"], json!({"effort": "minimal"}));
    assert_eq!(body["max_output_tokens"], 100);
    assert_eq!(
        (&body["temperature"], &body["top_p"]),
        (&json!(1.0), &json!(0.5))
    );
    assert_eq!(
        text_keys(&converted.request),
        [
            "model",
            "input",
            "instructions",
            "max_output_tokens",
            "reasoning",
            "temperature",
            "text",
            "tool_choice",
            "tools",
            "top_p"
        ]
    );
}

#[test]
fn every_parameter_goes_where_anthropic_takes_it() {
    let request = builder()
        .tool(Tool::new("strict_one", "S.", json!({"type": "object"})).strict(true))
        .tool_choice(ToolChoice::Auto)
        .output_schema(OutputSchema::new("answer", json!({"type": "object"})))
        .stop("END")
        .max_output_tokens(4096)
        .reasoning_effort(Effort::XHigh)
        .thinking_budget(1024)
        .cache_system(true)
        .cache_tools(true)
        .cache_message(CacheAt::Message(3))
        .build()
        .unwrap();
    let messages = conversation();
    let converted = request.to_anthropic(&messages).unwrap();
    assert!(converted.report.is_empty(), "{}", converted.report);
    let body = value(&converted.request);
    assert_eq!(body["max_tokens"], 4096);
    assert_eq!(body["tool_choice"], json!({"type": "auto"}));
    assert_eq!(
        body["tools"][0],
        json!({"name": "get_weather", "description": "The weather in a city.", "input_schema": weather().parameters})
    );
    assert_eq!(
        body["tools"][2],
        json!({"name": "strict_one", "description": "S.",
            "input_schema": {"type": "object", "additionalProperties": false, "properties": {}},
            "cache_control": {"type": "ephemeral"}, "strict": true})
    );
    assert_eq!(
        body["output_config"],
        json!({"effort": "xhigh", "format": {"type": "json_schema",
            "schema": {"type": "object", "additionalProperties": false, "properties": {}}}})
    );
    assert_eq!(body["stop_sequences"], json!(["END"]));
    assert_eq!(
        body["thinking"],
        json!({"type": "enabled", "budget_tokens": 1024})
    );
    assert_eq!(
        body["system"],
        json!([{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}])
    );
    // Message 3 (the tool result) is in the third turn, with the user's next question.
    assert_eq!(
        body["messages"][2]["content"],
        json!([
            {"type": "tool_result", "tool_use_id": "call_1", "content": "Sunny"},
            {"type": "text", "text": "Thanks. And tomorrow?", "cache_control": {"type": "ephemeral"}}
        ])
    );
    assert_eq!(body["messages"].as_array().unwrap().len(), 3);
    assert_eq!(
        text_keys(&converted.request),
        [
            "max_tokens",
            "messages",
            "model",
            "output_config",
            "stop_sequences",
            "system",
            "thinking",
            "tool_choice",
            "tools"
        ]
    );
}

#[test]
fn anthropic_cache_breakpoints_on_messages() {
    let messages = conversation();
    let at = |at: CacheAt| {
        let request = ModelRequest::builder("m")
            .max_output_tokens(10)
            .cache_message(at)
            .build()
            .unwrap();
        let body = value(&request.to_anthropic(&messages).unwrap().request);
        let marked: Vec<usize> = body["messages"]
            .as_array()
            .unwrap()
            .iter()
            .enumerate()
            .filter(|(_, turn)| turn.to_string().contains("cache_control"))
            .map(|(i, _)| i)
            .collect();
        marked
    };
    assert_eq!(at(CacheAt::Last), [2]);
    assert_eq!(at(CacheAt::Message(0)), Vec::<usize>::new()); // the system message: no turn
    assert_eq!(at(CacheAt::Message(1)), [0]);
    assert_eq!(at(CacheAt::Message(2)), [1]);
    assert_eq!(at(CacheAt::Message(3)), [2]);
    assert_eq!(at(CacheAt::Message(99)), [2]);
    // The assistant turn's last block is its tool_use.
    let request = ModelRequest::builder("m")
        .max_output_tokens(10)
        .cache_message(CacheAt::Message(2))
        .build()
        .unwrap();
    let body = value(&request.to_anthropic(&messages).unwrap().request);
    assert_eq!(
        body["messages"][1]["content"][0]["cache_control"],
        json!({"type": "ephemeral"})
    );
    assert_eq!(body["messages"][1]["content"][0]["type"], "tool_use");
}

#[test]
fn cache_breakpoints_with_nothing_to_mark_are_noted() {
    let messages = [Message::text_message("Hi", Role::User)];
    let request = ModelRequest::builder("m")
        .max_output_tokens(10)
        .cache(CacheBreakpoints {
            system: true,
            tools: true,
            message: None,
        })
        .build()
        .unwrap();
    let converted = request.to_anthropic(&messages).unwrap();
    assert_eq!(
        converted.report.to_string(),
        "request: `cache_breakpoints.system` does not apply (the request has no system prompt); dropped\n\
         request: `cache_breakpoints.tools` does not apply (the request has no tools); dropped"
    );
    assert_eq!(converted.report.worst(), Some(Severity::Info));
}

#[test]
fn every_parameter_goes_where_gemini_takes_it() {
    let request = builder()
        .tool_choice(ToolChoice::None)
        .output_schema(OutputSchema::new("answer", json!({"type": "object"})))
        .sampling(Sampling {
            temperature: Some(0.1),
            top_p: Some(0.2),
            top_k: Some(3),
            stop: vec!["A".into(), "B".into()],
            seed: Some(-4),
            frequency_penalty: Some(0.5),
            presence_penalty: Some(0.6),
        })
        .max_output_tokens(700)
        .reasoning_effort(Effort::Low)
        .thinking_budget(0)
        .build()
        .unwrap();
    let messages = conversation();
    let converted = request.to_gemini(&messages).unwrap();
    assert!(converted.report.is_empty(), "{}", converted.report);
    let body = value(&converted.request);
    assert_eq!(
        body["tools"],
        json!([{"function_declarations": [
            {"name": "get_weather", "description": "The weather in a city.", "parameters_json_schema": weather().parameters},
            {"name": "now", "description": "The time.", "parameters_json_schema": clock().parameters}
        ]}])
    );
    assert_eq!(
        body["tool_config"],
        json!({"function_calling_config": {"mode": "NONE"}})
    );
    assert_eq!(
        serde_json::to_string(&converted.request.generation_config).unwrap(),
        concat!(
            r#"{"stop_sequences":["A","B"],"max_output_tokens":700,"temperature":0.1,"top_p":0.2,"top_k":3,"#,
            r#""seed":-4,"presence_penalty":0.6,"frequency_penalty":0.5,"response_mime_type":"application/json","#,
            r#""response_json_schema":{"type":"object"},"thinking_config":{"thinking_budget":0}}"#
        )
    );
    assert_eq!(
        text_keys(&converted.request),
        [
            "model",
            "contents",
            "tools",
            "tool_config",
            "system_instruction",
            "generation_config"
        ]
    );
}

#[test]
fn tool_choices_in_each_providers_shape() {
    let messages = conversation();
    let shapes = |choice: ToolChoice| {
        let request = builder()
            .tool_choice(choice)
            .max_output_tokens(10)
            .build()
            .unwrap();
        [
            value(&request.to_openai_chat(&messages).unwrap().request)["tool_choice"].clone(),
            value(&request.to_openai_responses(&messages).unwrap().request)["tool_choice"].clone(),
            value(&request.to_anthropic(&messages).unwrap().request)["tool_choice"].clone(),
            value(&request.to_gemini(&messages).unwrap().request)["tool_config"].clone(),
        ]
    };
    assert_eq!(
        shapes(ToolChoice::Auto),
        [
            json!("auto"),
            json!("auto"),
            json!({"type": "auto"}),
            json!({"function_calling_config": {"mode": "AUTO"}})
        ]
    );
    assert_eq!(
        shapes(ToolChoice::None),
        [
            json!("none"),
            json!("none"),
            json!({"type": "none"}),
            json!({"function_calling_config": {"mode": "NONE"}})
        ]
    );
    assert_eq!(
        shapes(ToolChoice::Required),
        [
            json!("required"),
            json!("required"),
            json!({"type": "any"}),
            json!({"function_calling_config": {"mode": "ANY"}})
        ]
    );
    assert_eq!(
        shapes(ToolChoice::Tool("get_weather".into())),
        [
            json!({"type": "function", "function": {"name": "get_weather"}}),
            json!({"type": "function", "name": "get_weather"}),
            json!({"type": "tool", "name": "get_weather"}),
            json!({"function_calling_config": {"mode": "ANY", "allowed_function_names": ["get_weather"]}})
        ]
    );
}

#[test]
fn a_tool_choice_without_tools_is_refused_where_the_provider_refuses_it() {
    let invalid = |provider: &str| {
        Some(format!(
            "`tool_choice` is invalid for {provider}: it is set but the request has no tools; \
             add tools or leave it unset"
        ))
    };
    for choice in [ToolChoice::Auto, ToolChoice::None] {
        let request = ModelRequest::builder("m")
            .tool_choice(choice)
            .max_output_tokens(10)
            .build()
            .unwrap();
        // OpenAI Chat and Gemini answer it with an HTTP 400; Responses and Anthropic take it.
        assert_eq!(
            errors(&request),
            [
                invalid("OpenAI Chat Completions"),
                None,
                None,
                invalid("Gemini generateContent")
            ]
        );
        let error = request.to_openai_chat(&conversation()).unwrap_err();
        assert_eq!(error.category(), "provider_parameter_invalid");
    }
}

/// The error of converting `request` for each provider (`None`: converted).
fn errors(request: &ModelRequest) -> [Option<String>; 4] {
    let messages = conversation();
    [
        request.to_openai_chat(&messages).err(),
        request.to_openai_responses(&messages).err(),
        request.to_anthropic(&messages).err(),
        request.to_gemini(&messages).err(),
    ]
    .map(|e| e.map(|e| e.to_string()))
}

#[test]
fn each_provider_refuses_the_parameters_it_lacks() {
    let base = || ModelRequest::builder("m").max_output_tokens(2000);
    let refused = |provider: &str, parameter: &str| {
        Some(format!(
            "{provider} has no `{parameter}` parameter; leave it unset for this provider"
        ))
    };
    let (chat, responses, anthropic) = (
        "OpenAI Chat Completions",
        "OpenAI Responses",
        "Anthropic Messages",
    );
    let cases: Vec<(ModelRequestBuilder, [Option<String>; 4])> = vec![
        (
            base().temperature(0.5),
            [None, None, refused(anthropic, "temperature"), None],
        ),
        (
            base().top_p(0.5),
            [None, None, refused(anthropic, "top_p"), None],
        ),
        (
            base().top_k(5),
            [
                refused(chat, "top_k"),
                refused(responses, "top_k"),
                refused(anthropic, "top_k"),
                None,
            ],
        ),
        (
            base().stop("x"),
            [None, refused(responses, "stop"), None, None],
        ),
        (
            base().seed(1),
            [
                None,
                refused(responses, "seed"),
                refused(anthropic, "seed"),
                None,
            ],
        ),
        (
            base().frequency_penalty(1.0),
            [
                None,
                refused(responses, "frequency_penalty"),
                refused(anthropic, "frequency_penalty"),
                None,
            ],
        ),
        (
            base().presence_penalty(1.0),
            [
                None,
                refused(responses, "presence_penalty"),
                refused(anthropic, "presence_penalty"),
                None,
            ],
        ),
        (
            base().tool(weather().strict(true)),
            [
                None,
                None,
                None,
                Some("Gemini generateContent has no `tools[].strict` parameter; make the tools not strict for this provider".into()),
            ],
        ),
        (
            base().thinking_budget(1024),
            [
                Some("OpenAI Chat Completions has no `thinking_budget` parameter; OpenAI takes a reasoning effort: set `reasoning_effort`".into()),
                Some("OpenAI Responses has no `thinking_budget` parameter; OpenAI takes a reasoning effort: set `reasoning_effort`".into()),
                None,
                None,
            ],
        ),
        (
            base().reasoning_effort(Effort::Medium),
            [
                None,
                None,
                None,
                Some("Gemini generateContent has no `reasoning_effort` parameter; Gemini takes a thinking budget: set `thinking_budget`".into()),
            ],
        ),
        (
            base().reasoning_effort(Effort::Off).thinking_budget(1024),
            [
                None,
                None,
                Some("`reasoning_effort` is invalid for Anthropic Messages: `none` is not one of low, medium, high, xhigh, max".into()),
                None,
            ],
        ),
        (
            base().thinking_budget(1000),
            [
                Some("OpenAI Chat Completions has no `thinking_budget` parameter; OpenAI takes a reasoning effort: set `reasoning_effort`".into()),
                Some("OpenAI Responses has no `thinking_budget` parameter; OpenAI takes a reasoning effort: set `reasoning_effort`".into()),
                Some("`thinking_budget` is invalid for Anthropic Messages: 1000 tokens is under the minimum of 1024".into()),
                None,
            ],
        ),
        (
            base().thinking_budget(2000).reasoning_effort(Effort::Low),
            [
                None,
                None,
                Some("`thinking_budget` is invalid for Anthropic Messages: 2000 tokens is not under max_tokens (2000)".into()),
                None,
            ],
        ),
        (
            base()
                .tool(weather())
                .tool_choice(ToolChoice::Required)
                .thinking_budget(1024)
                .reasoning_effort(Effort::Low),
            [
                None,
                None,
                Some("`tool_choice` is invalid for Anthropic Messages: thinking takes only `auto` or `none`: a forced tool call is refused".into()),
                None,
            ],
        ),
        (
            ModelRequest::builder("m"),
            [
                None,
                None,
                Some("Anthropic Messages requires `max_tokens` and has no default; set it with `max_output_tokens`".into()),
                None,
            ],
        ),
    ];
    for (builder, expected) in cases {
        let request = builder.build().unwrap();
        assert_eq!(errors(&request), expected, "{request:?}");
    }
}

#[test]
fn refusals_have_categories() {
    let messages = conversation();
    let missing = ModelRequest::builder("m").build().unwrap();
    let error = missing.to_anthropic(&messages).unwrap_err();
    assert_eq!(error.category(), "provider_parameter_missing");
    assert!(matches!(
        error,
        RequestError::Missing {
            parameter: "max_tokens",
            ..
        }
    ));
    let seeded = ModelRequest::builder("m").seed(1).build().unwrap();
    assert_eq!(
        seeded
            .to_openai_responses(&messages)
            .unwrap_err()
            .category(),
        "provider_parameter_unsupported"
    );
    let invalid = ModelRequest::builder("m")
        .max_output_tokens(10)
        .thinking_budget(5000)
        .build()
        .unwrap();
    assert_eq!(
        invalid.to_anthropic(&messages).unwrap_err().category(),
        "provider_parameter_invalid"
    );
}

#[test]
fn cache_breakpoints_are_a_note_where_caching_is_automatic() {
    let request = ModelRequest::builder("m")
        .cache_message(CacheAt::Last)
        .build()
        .unwrap();
    let messages = conversation();
    let reports = [
        request.to_openai_chat(&messages).unwrap().report,
        request.to_openai_responses(&messages).unwrap().report,
        request.to_gemini(&messages).unwrap().report,
    ];
    for report in reports {
        assert_eq!(report.notes().len(), 1);
        let note = &report.notes()[0];
        assert_eq!(
            (note.message, note.block, &note.action, note.severity()),
            (None, None, &Action::Dropped, Severity::Info)
        );
        assert!(matches!(
            note.issue,
            Issue::NotApplicable {
                parameter: "cache_breakpoints",
                ..
            }
        ));
        assert_eq!(
            serde_json::to_value(note).unwrap(),
            json!({"message": null, "block": null, "issue": "not_applicable", "parameter": "cache_breakpoints",
                "reason": "the provider caches prompt prefixes by itself", "action": "dropped", "severity": "info"})
        );
    }
}

#[test]
fn the_builder_refuses_what_no_provider_takes() {
    let error = |builder: ModelRequestBuilder| builder.build().unwrap_err().to_string();
    assert_eq!(
        error(ModelRequest::builder(" ")),
        "`model` is invalid: it is empty"
    );
    assert_eq!(
        error(ModelRequest::builder("m").tool(weather()).tool(weather())),
        "`tools` is invalid: two tools are named `get_weather`"
    );
    assert_eq!(
        error(ModelRequest::builder("m").tool(Tool::new("a.b", "", json!({})))),
        "`tools` is invalid: the name \"a.b\" is not 1 to 64 letters, digits, `_` or `-`"
    );
    assert_eq!(
        error(ModelRequest::builder("m").tool(Tool::new("a", "", json!(true)))),
        "`tools` is invalid: the parameters of `a` are not a JSON Schema object"
    );
    assert_eq!(
        error(ModelRequest::builder("m").tool_choice(ToolChoice::Required)),
        "`tool_choice` is invalid: a tool call is required but the request has no tools"
    );
    assert_eq!(
        error(ModelRequest::builder("m").top_p(1.5)),
        "`top_p` is invalid: 1.5 is not within 0 to 1"
    );
    assert_eq!(
        error(ModelRequest::builder("m").presence_penalty(-3.0)),
        "`presence_penalty` is invalid: -3 is not within -2 to 2"
    );
    assert_eq!(
        error(ModelRequest::builder("m").temperature(f64::NAN)),
        "`temperature` is invalid: NaN is not within 0 to 2"
    );
    assert_eq!(
        error(ModelRequest::builder("m").top_k(0)),
        "`top_k` is invalid: it must be at least 1"
    );
    assert_eq!(
        error(ModelRequest::builder("m").stop("")),
        "`stop` is invalid: a stop sequence is empty"
    );
    assert_eq!(
        error(ModelRequest::builder("m").max_output_tokens(0)),
        "`max_output_tokens` is invalid: it must be at least 1"
    );
    assert_eq!(
        error(ModelRequest::builder("m").output_schema(OutputSchema::new("a b", json!({})))),
        "`output_schema` is invalid: the name \"a b\" is not 1 to 64 letters, digits, `_` or `-`"
    );
    assert_eq!(
        error(ModelRequest::builder("m").output_schema(OutputSchema::new("a", json!([])))),
        "`output_schema` is invalid: the schema is not a JSON object"
    );
    let error = ModelRequest::builder("m").top_k(0).build().unwrap_err();
    assert_eq!(error.category(), "provider_parameter_invalid");
}

#[test]
fn anthropic_keeps_its_rewritten_tool_ids() {
    let messages = vec![
        Message::text_message("Hi", Role::User),
        Message::text_message("", Role::Assistant).with_tool_calls(vec![ToolCall::new(
            "functions.f:0",
            "f",
            json!({}),
        )]),
        Message::tool_result("functions.f:0", "ok"),
    ];
    let request = ModelRequest::builder("m")
        .max_output_tokens(10)
        .build()
        .unwrap();
    let converted = request.to_anthropic(&messages).unwrap();
    assert_eq!(converted.tool_ids, to_anthropic(&messages, None).tool_ids);
    assert!(!converted.tool_ids.is_empty());
}

#[cfg(feature = "schemars")]
#[test]
fn tools_from_rust_types() {
    #[derive(schemars::JsonSchema)]
    #[allow(dead_code)]
    struct Search {
        /// The query.
        query: String,
        /// How many results.
        limit: Option<u32>,
    }
    let tool = Tool::of::<Search>("search", "Searches the web.");
    assert_eq!(tool.parameters["type"], "object");
    assert_eq!(tool.parameters["required"], json!(["query"]));
    assert_eq!(
        tool.parameters["properties"]["query"]["description"],
        "The query."
    );
    assert!(tool.parameters.get("$schema").is_none());
    let request = ModelRequest::builder("m").tool(tool).build().unwrap();
    let body = value(&request.to_openai_chat(&conversation()).unwrap().request);
    assert_eq!(
        body["tools"][0]["function"]["parameters"]["required"],
        json!(["query"])
    );
}

fn arb_request() -> impl Strategy<Value = ModelRequest> {
    (
        prop::option::of(0.0..2.0f64),
        prop::option::of(1u32..100),
        prop::option::of(prop_oneof![
            Just(ToolChoice::Auto),
            Just(ToolChoice::None),
            Just(ToolChoice::Required),
            Just(ToolChoice::Tool("now".into()))
        ]),
        any::<bool>(),
        prop::collection::vec("[a-z]{1,5}", 0..3),
        any::<(bool, bool, bool)>(),
    )
        .prop_map(|(temperature, budget, choice, schema, stop, cache)| {
            let mut b = builder()
                .max_output_tokens(budget.map_or(10, |b| b + 5000))
                .cache_system(cache.0)
                .cache_tools(cache.1);
            if let Some(t) = temperature {
                b = b.temperature(t);
            }
            if let Some(budget) = budget {
                b = b
                    .thinking_budget(budget + 1024)
                    .reasoning_effort(Effort::Low);
            }
            if let Some(choice) = choice.filter(|_| budget.is_none()) {
                b = b.tool_choice(choice);
            }
            if schema {
                b = b.output_schema(OutputSchema::new("o", json!({"type": "object"})));
            }
            for s in stop {
                b = b.stop(s);
            }
            if cache.2 {
                b = b.cache_message(CacheAt::Last);
            }
            b.build().unwrap()
        })
}

/// Each provider's body as bytes (`None` when refused).
fn bytes(request: &ModelRequest, messages: &[Message]) -> [Option<Vec<u8>>; 4] {
    [
        request
            .to_openai_chat(messages)
            .ok()
            .map(|c| serde_json::to_vec(&c.request).unwrap()),
        request
            .to_openai_responses(messages)
            .ok()
            .map(|c| serde_json::to_vec(&c.request).unwrap()),
        request
            .to_anthropic(messages)
            .ok()
            .map(|c| serde_json::to_vec(&c.request).unwrap()),
        request
            .to_gemini(messages)
            .ok()
            .map(|c| serde_json::to_vec(&c.request).unwrap()),
    ]
}

proptest! {
    /// Equal requests and conversations give the same bytes, for every provider; a clone of
    /// the request (other allocations, same values) too.
    #[test]
    fn bodies_are_byte_stable(request in arb_request(), extra in 0usize..3) {
        let mut messages = conversation();
        for i in 0..extra {
            messages.push(Message::text_message(format!("more {i}"), Role::User));
        }
        let first = bytes(&request, &messages);
        let again = bytes(&request.clone(), &messages.clone());
        prop_assert_eq!(&first, &again);
        prop_assert!(first.iter().filter(|b| b.is_some()).count() >= 2);
    }
}

/// Every schema node of `schema` (the root, properties, items, `anyOf` branches, `$defs`).
#[cfg(feature = "schemars")]
fn nodes(schema: &Value) -> Vec<&serde_json::Map<String, Value>> {
    let mut out = Vec::new();
    let mut stack = vec![schema];
    while let Some(node) = stack.pop() {
        let Some(map) = node.as_object() else {
            continue;
        };
        out.push(map);
        for key in ["properties", "$defs"] {
            if let Some(children) = map.get(key).and_then(Value::as_object) {
                stack.extend(children.values());
            }
        }
        stack.extend(map.get("items"));
        if let Some(branches) = map.get("anyOf").and_then(Value::as_array) {
            stack.extend(branches);
        }
    }
    out
}

/// What OpenAI's strict mode requires of every node: objects closed with every property
/// required, only keywords of its documented subset, no `oneOf`/`allOf`/`const`, a root object.
#[cfg(feature = "schemars")]
fn assert_openai_strict(schema: &Value) {
    assert_eq!(schema["type"], "object", "root: {schema}");
    const SUBSET: [&str; 20] = [
        "type",
        "properties",
        "required",
        "additionalProperties",
        "items",
        "anyOf",
        "enum",
        "$ref",
        "$defs",
        "description",
        "title",
        "pattern",
        "format",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "multipleOf",
        "minItems",
        "maxItems",
    ];
    for node in nodes(schema) {
        for key in node.keys() {
            assert!(SUBSET.contains(&key.as_str()), "`{key}` in {node:?}");
        }
        if node.contains_key("$ref") {
            assert_eq!(node.len(), 1, "a $ref alone: {node:?}");
        }
        if let Some(properties) = node.get("properties").and_then(Value::as_object) {
            assert_eq!(node["additionalProperties"], false, "{node:?}");
            let required: Vec<&str> = node["required"]
                .as_array()
                .unwrap()
                .iter()
                .map(|r| r.as_str().unwrap())
                .collect();
            assert_eq!(
                required,
                properties.keys().map(String::as_str).collect::<Vec<_>>()
            );
        }
        if let Some(format) = node.get("format") {
            let allowed = [
                "date-time",
                "time",
                "date",
                "duration",
                "email",
                "hostname",
                "ipv4",
                "ipv6",
                "uuid",
            ];
            assert!(allowed.contains(&format.as_str().unwrap()), "{node:?}");
        }
    }
}

/// What Anthropic's strict mode requires: objects closed, one `type` per node, no numeric or
/// length bounds, a `minItems` of 0 or 1 at most, no recursion (checked by the error below).
#[cfg(feature = "schemars")]
fn assert_anthropic_strict(schema: &Value) {
    for node in nodes(schema) {
        if node.contains_key("properties") {
            assert_eq!(node["additionalProperties"], false, "{node:?}");
        }
        if let Some(t) = node.get("type") {
            assert!(t.is_string(), "one type: {node:?}");
        }
        for key in [
            "minimum",
            "maximum",
            "minLength",
            "maxLength",
            "maxItems",
            "uniqueItems",
            "oneOf",
            "const",
            "default",
        ] {
            assert!(!node.contains_key(key), "`{key}` in {node:?}");
        }
        assert!(node.get("minItems").is_none_or(|m| m.as_u64() <= Some(1)));
    }
}

/// Structured output and strict tools from Rust types (`Option`, nested structs, enums, `Vec`,
/// a `HashMap`, recursion): each body's schema meets its provider's strict rules, what a
/// provider cannot express is refused when the body is built, and the answer parses back typed.
#[cfg(feature = "schemars")]
#[test]
fn strict_schemas_from_rust_types() {
    use agentstate::providers::OutputSchema;
    use serde::Deserialize;
    use std::collections::HashMap;

    #[derive(schemars::JsonSchema, Deserialize, Debug, PartialEq)]
    #[serde(rename_all = "snake_case")]
    enum Unit {
        Celsius,
        Fahrenheit,
    }
    #[derive(schemars::JsonSchema, Deserialize, Debug, PartialEq)]
    #[serde(tag = "kind", rename_all = "snake_case")]
    enum Sky {
        Clear,
        Cloudy { cover: u8 },
    }
    #[derive(schemars::JsonSchema, Deserialize, Debug, PartialEq)]
    struct Reading {
        /// Degrees.
        value: f64,
        unit: Unit,
    }
    #[derive(schemars::JsonSchema, Deserialize, Debug, PartialEq)]
    struct Forecast {
        /// The city.
        city: String,
        /// Today's reading.
        today: Reading,
        tomorrow: Option<Reading>,
        skies: Vec<Sky>,
        #[serde(default)]
        alerts: u32,
        note: Option<String>,
    }
    #[derive(schemars::JsonSchema)]
    #[allow(dead_code)]
    struct WithMap {
        city: String,
        by_hour: HashMap<String, f64>,
    }
    #[derive(schemars::JsonSchema)]
    #[allow(dead_code)]
    struct Node {
        name: String,
        children: Vec<Node>,
    }
    #[derive(schemars::JsonSchema)]
    #[allow(dead_code)]
    struct Raw {
        payload: serde_json::Value,
    }

    let messages = conversation();
    let request = |output: OutputSchema, tool: Tool| {
        ModelRequest::builder("m")
            .max_output_tokens(100)
            .output_schema(output)
            .tool(tool.strict(true))
            .build()
            .unwrap()
    };
    let now = || Tool::new("now", "", json!({"type": "object", "properties": {}}));
    let forecast = request(
        OutputSchema::of::<Forecast>("forecast"),
        Tool::of::<Forecast>("report", "Reports a forecast."),
    );
    let chat = value(&forecast.to_openai_chat(&messages).unwrap().request);
    assert_openai_strict(&chat["response_format"]["json_schema"]["schema"]);
    assert_openai_strict(&chat["tools"][0]["function"]["parameters"]);
    assert_eq!(chat["tools"][0]["function"]["strict"], true);
    let schema = &chat["response_format"]["json_schema"]["schema"];
    assert_eq!(
        schema["properties"]["note"]["type"],
        json!(["string", "null"]),
        "an Option stays nullable"
    );
    let responses = value(&forecast.to_openai_responses(&messages).unwrap().request);
    assert_openai_strict(&responses["text"]["format"]["schema"]);
    assert_openai_strict(&responses["tools"][0]["parameters"]);
    let anthropic = value(&forecast.to_anthropic(&messages).unwrap().request);
    assert_anthropic_strict(&anthropic["output_config"]["format"]["schema"]);
    assert_anthropic_strict(&anthropic["tools"][0]["input_schema"]);
    assert_eq!(
        anthropic["output_config"]["format"]["schema"]["properties"]["alerts"]["description"],
        "{minimum: 0}",
        "a bound Anthropic does not enforce is left to the model, in the description"
    );

    // The answer, typed.
    let output = OutputSchema::of::<Forecast>("forecast");
    let reply = Message::text_message(
        r#"{"city": "Paris", "today": {"value": 21.5, "unit": "celsius"}, "tomorrow": null,
            "skies": [{"kind": "clear"}, {"kind": "cloudy", "cover": 40}], "alerts": 0, "note": null}"#,
        Role::Assistant,
    );
    let parsed: Forecast = output.parse(&reply).unwrap();
    assert_eq!(parsed.skies[1], Sky::Cloudy { cover: 40 });
    assert_eq!(parsed.tomorrow, None);
    let wrong = Message::text_message(
        r#"{"city": "Paris", "today": {"value": "hot"}}"#,
        Role::Assistant,
    );
    let error = output.parse::<Forecast>(&wrong).unwrap_err();
    assert_eq!(error.path, "today.value");

    // A free-form map: no strict mode can name its keys.
    let map = request(OutputSchema::of::<WithMap>("with_map"), now());
    assert_eq!(
        map.to_openai_chat(&messages).unwrap_err().to_string(),
        "`output_schema` is invalid for OpenAI Chat Completions: the schema `with_map`: `WithMap.by_hour` is a free-form map (`additionalProperties`: a `HashMap` or JSON object), which OpenAI's strict mode cannot express (every key must be named); use a list of key-value structs or make the schema not strict"
    );
    assert!(map
        .to_anthropic(&messages)
        .unwrap_err()
        .to_string()
        .contains("`WithMap.by_hour` is a free-form map"));
    let tool = request(
        OutputSchema::of::<Forecast>("forecast"),
        Tool::of::<WithMap>("hourly", "Hourly readings."),
    );
    let error = tool.to_openai_responses(&messages).unwrap_err();
    assert_eq!(error.category(), "provider_parameter_invalid");
    assert!(
        error.to_string().starts_with(
            "`tools` is invalid for OpenAI Responses: the strict tool `hourly`: `WithMap.by_hour`"
        ),
        "{error}"
    );
    // Not strict, the same tool is sent as it is.
    let loose = ModelRequest::builder("m")
        .tool(Tool::of::<WithMap>("hourly", "Hourly readings."))
        .build()
        .unwrap();
    assert!(loose.to_openai_chat(&messages).is_ok());

    // Recursion: OpenAI takes it, Anthropic's strict mode does not.
    let tree = request(OutputSchema::of::<Node>("tree"), now());
    let chat = value(&tree.to_openai_chat(&messages).unwrap().request);
    assert_openai_strict(&chat["response_format"]["json_schema"]["schema"]);
    assert!(tree
        .to_anthropic(&messages)
        .unwrap_err()
        .to_string()
        .contains("`Node` is recursive"));

    // Any JSON value.
    let raw = request(OutputSchema::of::<Raw>("raw"), now());
    assert!(raw
        .to_openai_chat(&messages)
        .unwrap_err()
        .to_string()
        .contains("`Raw.payload` accepts any JSON value"));
    // A root that is not an object.
    let list = request(OutputSchema::of::<Vec<Reading>>("list"), now());
    assert!(list
        .to_openai_chat(&messages)
        .unwrap_err()
        .to_string()
        .contains("is not an object"));
}
