//! The streamed-response accumulators (`agentstate::providers::stream`): every recorded
//! stream of `tests/data/streams/`, split at random byte and event boundaries, gives the
//! message the non-streamed `from_*` function reads from the same answer's JSON; the deltas
//! concatenate to the final texts and arguments; errors name the provider and the event.

use agentstate::message::{ContentBlock, Message};
use agentstate::providers::stream::SseDecoder;
use agentstate::providers::stream::{
    Accumulator, AnthropicStream, Delta, GeminiStream, OpenAiChatStream, OpenAiResponsesStream,
    Sse, StreamError,
};
use agentstate::providers::{
    from_anthropic, from_gemini, from_openai_chat, from_openai_responses, ParsedResponse,
};
use proptest::prelude::*;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;

fn read(name: &str) -> Vec<u8> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/streams")
        .join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[derive(Clone, Copy, Debug)]
enum Provider {
    Chat,
    Responses,
    Anthropic,
    Gemini,
}

const CASES: &[(&str, Provider)] = &[
    ("openai_chat_text", Provider::Chat),
    ("openai_chat_tools", Provider::Chat),
    ("openai_responses_text", Provider::Responses),
    ("openai_responses_tools", Provider::Responses),
    ("anthropic_text", Provider::Anthropic),
    ("anthropic_tools", Provider::Anthropic),
    ("anthropic_thinking", Provider::Anthropic),
    ("gemini_text", Provider::Gemini),
    ("gemini_tools", Provider::Gemini),
    ("gemini_thinking", Provider::Gemini),
];

fn feed<A: Accumulator>(
    accumulator: A,
    chunks: &[&[u8]],
) -> (Vec<Delta>, Result<ParsedResponse, StreamError>) {
    let mut stream = Sse::new(accumulator);
    let mut deltas = Vec::new();
    for chunk in chunks {
        if let Err(e) = stream.push(chunk, &mut deltas) {
            return (deltas, Err(e));
        }
    }
    (deltas, stream.finish())
}

fn streamed(
    provider: Provider,
    chunks: &[&[u8]],
) -> (Vec<Delta>, Result<ParsedResponse, StreamError>) {
    match provider {
        Provider::Chat => feed(OpenAiChatStream::new(), chunks),
        Provider::Responses => feed(OpenAiResponsesStream::new(), chunks),
        Provider::Anthropic => feed(AnthropicStream::new(None), chunks),
        Provider::Gemini => feed(GeminiStream::new(), chunks),
    }
}

fn non_streamed(provider: Provider, json: &Value) -> ParsedResponse {
    match provider {
        Provider::Chat => from_openai_chat(json),
        Provider::Responses => from_openai_responses(json),
        Provider::Anthropic => from_anthropic(json, None),
        Provider::Gemini => from_gemini(json),
    }
    .unwrap()
}

/// The message without what differs between two reads of one answer: `raw` (the streamed
/// one is the response assembled from the events), the id (each read makes a fresh one) and,
/// for providers whose responses have no creation time, the timestamp (`from_*` puts the time
/// of reading).
fn comparable(mut message: Message, provider: Provider) -> Message {
    message.raw = None;
    message.message_id = "read".into();
    if matches!(provider, Provider::Anthropic | Provider::Gemini) {
        message.timestamp = None;
    }
    message
}

/// Checks one split of a recorded stream against the non-streamed response.
fn check(name: &str, provider: Provider, cuts: &[usize]) {
    let body = read(&format!("{name}.sse"));
    let json: Value = serde_json::from_slice(&read(&format!("{name}.json"))).unwrap();
    let mut cuts: Vec<usize> = cuts.iter().map(|c| c % (body.len() + 1)).collect();
    cuts.sort_unstable();
    let mut chunks = Vec::new();
    let mut at = 0;
    for cut in cuts.into_iter().chain([body.len()]) {
        chunks.push(&body[at..cut]);
        at = cut;
    }
    let (deltas, converted) = streamed(provider, &chunks);
    let converted = converted.unwrap_or_else(|e| panic!("{name}: {e}"));
    let expected = non_streamed(provider, &json);
    assert_eq!(converted.report, expected.report, "{name}: report");
    let message = converted.message;
    let raw = message.raw.clone().expect("raw");
    // The usage the message was read from is the response's.
    let usage_key = match provider {
        Provider::Gemini => "usageMetadata",
        _ => "usage",
    };
    assert_eq!(
        raw.get(usage_key),
        expected.message.raw.as_ref().unwrap().get(usage_key),
        "{name}: usage"
    );
    assert!(message.usages.is_some(), "{name}: no usage");
    assert_eq!(
        comparable(message.clone(), provider),
        comparable(expected.message, provider),
        "{name}: message"
    );
    check_deltas(name, &message, &deltas, provider);
}

/// The deltas carry the message's id and concatenate to its text, reasoning and arguments.
fn check_deltas(name: &str, message: &Message, deltas: &[Delta], provider: Provider) {
    let id = message.message_id.to_string();
    let mut text = String::new();
    let mut reasoning = String::new();
    let mut args: BTreeMap<String, (String, String)> = BTreeMap::new();
    for delta in deltas {
        assert_eq!(delta.message_id(), id, "{name}: delta's message id");
        match delta {
            Delta::Text { delta, .. } => text.push_str(delta),
            Delta::Reasoning { delta, .. } => reasoning.push_str(delta),
            Delta::ToolCall {
                tool_call_id,
                name,
                delta,
                ..
            } => {
                let entry = args.entry(tool_call_id.clone()).or_default();
                entry.0.clone_from(name);
                entry.1.push_str(delta);
            }
        }
    }
    assert_eq!(text, message.text(), "{name}: text deltas");
    let thought: String = message
        .content
        .iter()
        .filter_map(|b| match b {
            ContentBlock::Reasoning(r) => Some(r.summary.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(reasoning, thought, "{name}: reasoning deltas");
    let calls = message.tool_calls();
    assert_eq!(args.len(), calls.len(), "{name}: one delta stream per call");
    for call in calls {
        let (tool, streamed) = &args[&call.id];
        assert_eq!(tool, call.name(), "{name}: tool name");
        match provider {
            // The arguments' text as the provider sent it.
            Provider::Chat | Provider::Responses | Provider::Gemini => {
                assert_eq!(streamed, &call.function.arguments, "{name}: arguments")
            }
            // Anthropic's input is an object; the message writes it as Python's json.dumps.
            Provider::Anthropic => assert_eq!(
                serde_json::from_str::<Value>(streamed).unwrap(),
                serde_json::from_str::<Value>(&call.function.arguments).unwrap(),
                "{name}: arguments"
            ),
        }
    }
}

#[test]
fn every_recording_whole_and_byte_by_byte() {
    for (name, provider) in CASES {
        check(name, *provider, &[]);
        let len = read(&format!("{name}.sse")).len();
        check(name, *provider, &(1..len).collect::<Vec<_>>());
    }
}

#[test]
fn every_recording_at_event_boundaries() {
    for (name, provider) in CASES {
        let body = read(&format!("{name}.sse"));
        let text = String::from_utf8(body).unwrap();
        let sep = if text.contains("\r\n\r\n") {
            "\r\n\r\n"
        } else {
            "\n\n"
        };
        let cuts: Vec<usize> = text
            .match_indices(sep)
            .map(|(i, _)| i + sep.len())
            .collect();
        check(name, *provider, &cuts);
        // Between an event's lines, and between the CR and the LF of a CRLF.
        let lines: Vec<usize> = text.match_indices('\n').map(|(i, _)| i).collect();
        check(name, *provider, &lines);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn random_splits(case in 0..CASES.len(), cuts in prop::collection::vec(any::<usize>(), 0..40)) {
        let (name, provider) = CASES[case];
        check(name, provider, &cuts);
    }
}

#[test]
fn a_responses_completion_without_output_takes_the_finished_items() {
    let text = String::from_utf8(read("openai_responses_tools.sse")).unwrap();
    let json: Value = serde_json::from_slice(&read("openai_responses_tools.json")).unwrap();
    let (head, last) = text.trim_end().rsplit_once("\n\n").unwrap();
    let mut completed: Value = serde_json::from_str(last.split_once("data: ").unwrap().1).unwrap();
    completed["response"]["output"] = serde_json::json!([]);
    let body = format!("{head}\n\nevent: response.completed\ndata: {completed}\n\n");
    let (_, converted) = streamed(Provider::Responses, &[body.as_bytes()]);
    let message = converted.unwrap().message;
    let expected = non_streamed(Provider::Responses, &json).message;
    assert_eq!(
        comparable(message, Provider::Responses),
        comparable(expected, Provider::Responses)
    );
}

#[test]
fn without_a_response_id_the_deltas_and_the_message_share_a_made_one() {
    for (provider, body) in [
        (
            Provider::Gemini,
            "data: {\"candidates\": [{\"content\": {\"parts\": [{\"text\": \"Hi\"}]}, \"finishReason\": \"STOP\"}]}\n\n",
        ),
        (
            Provider::Chat,
            "data: {\"choices\": [{\"index\": 0, \"delta\": {\"content\": \"Hi\"}, \"finish_reason\": \"stop\"}]}\n\n",
        ),
    ] {
        let (deltas, converted) = streamed(provider, &[body.as_bytes()]);
        let message = converted.unwrap().message;
        assert_eq!(message.text(), "Hi");
        assert_eq!(deltas.len(), 1);
        assert_eq!(deltas[0].message_id(), message.message_id.to_string());
        assert!(!deltas[0].message_id().is_empty());
    }
}

/// Each read of a stream gives the message a fresh id, which its deltas carry; the provider's
/// response id is in the metadata (a server that repeats ids cannot make two answers one).
#[test]
fn each_streamed_message_has_its_own_id_and_keeps_the_response_id() {
    for (name, provider) in CASES {
        let body = read(&format!("{name}.sse"));
        let json: Value = serde_json::from_slice(&read(&format!("{name}.json"))).unwrap();
        let (deltas, first) = streamed(*provider, &[&body]);
        let (_, again) = streamed(*provider, &[&body]);
        let (first, again) = (first.unwrap().message, again.unwrap().message);
        assert_ne!(first.message_id, again.message_id, "{name}");
        let id = first.message_id.to_string();
        assert!(deltas.iter().all(|d| d.message_id() == id), "{name}");
        let response_id = json
            .get("id")
            .or_else(|| json.get("responseId"))
            .and_then(Value::as_str)
            .unwrap_or_else(|| panic!("{name}: the recording has an id"));
        assert_eq!(
            first.metadata.get(agentstate::providers::RESPONSE_ID),
            Some(response_id.into()),
            "{name}"
        );
        assert_ne!(id, response_id, "{name}");
    }
}

#[test]
fn the_recorded_deltas_arrive_in_order() {
    let (deltas, _) = streamed(Provider::Anthropic, &[&read("anthropic_tools.sse")]);
    let kinds: Vec<String> = deltas
        .iter()
        .map(|d| match d {
            Delta::Text { .. } => "text".to_owned(),
            Delta::Reasoning { .. } => "reasoning".to_owned(),
            Delta::ToolCall { tool_call_id, .. } => tool_call_id.clone(),
        })
        .collect();
    let mut seen = kinds.clone();
    seen.dedup();
    assert_eq!(
        seen,
        [
            "text",
            "toolu_01T1x1fJ34qAmk2tNTrN7Up6",
            "toolu_01ABCDEFGHIJKLMNOPQRSTUV"
        ]
    );
    // The first delta of each call is empty: it announces the call with its name.
    let Delta::ToolCall { delta, name, .. } = &deltas[5] else {
        panic!("{:?}", deltas[5])
    };
    assert_eq!((delta.as_str(), name.as_str()), ("", "get_weather"));
}

// ---------------------------------------------------------------------------------------
// Errors

fn one(provider: Provider, body: &str) -> StreamError {
    streamed(provider, &[body.as_bytes()]).1.unwrap_err()
}

#[test]
fn an_error_event_is_the_providers_error() {
    let err = one(
        Provider::Anthropic,
        "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"content\":[]}}\n\n\
         event: ping\ndata: {\"type\": \"ping\"}\n\n\
         event: error\ndata: {\"type\": \"error\", \"error\": {\"type\": \"overloaded_error\", \"message\": \"Overloaded\"}}\n\n",
    );
    assert_eq!(
        err.to_string(),
        "the Anthropic stream failed at event 3: overloaded_error: Overloaded"
    );
    assert_eq!(err.category(), "provider_unavailable");

    let err = one(
        Provider::Responses,
        "event: error\ndata: {\"type\":\"error\",\"code\":\"rate_limit_exceeded\",\"message\":\"Slow down\",\"param\":null}\n\n",
    );
    assert_eq!(
        err.to_string(),
        "the OpenAI Responses stream failed at event 1: rate_limit_exceeded: Slow down"
    );
    assert_eq!(err.category(), "provider_rate_limit");

    let err = one(
        Provider::Responses,
        "event: response.failed\ndata: {\"type\":\"response.failed\",\"response\":{\"id\":\"r\",\"status\":\"failed\",\"error\":{\"code\":\"server_error\",\"message\":\"The server had an error\"}}}\n\n",
    );
    assert_eq!(err.category(), "provider_unavailable");
    assert!(
        err.to_string()
            .contains("server_error: The server had an error"),
        "{err}"
    );

    let err = one(
        Provider::Gemini,
        "data: {\"error\": {\"code\": 429, \"message\": \"Resource has been exhausted\", \"status\": \"RESOURCE_EXHAUSTED\"}}\r\n\r\n",
    );
    assert_eq!(
        err.to_string(),
        "the Gemini stream failed at event 1: 429: Resource has been exhausted"
    );
    assert_eq!(err.category(), "provider_rate_limit");

    let err = one(
        Provider::Chat,
        "data: {\"error\": {\"message\": \"Invalid key\", \"type\": \"authentication_error\"}}\n\n",
    );
    assert_eq!(err.category(), "provider_authentication");
}

/// The SSE body of Responses events (`event:` lines from their `type`).
fn responses_body(events: &[Value]) -> String {
    events
        .iter()
        .map(|e| format!("event: {}\ndata: {e}\n\n", e["type"].as_str().unwrap()))
        .collect()
}

/// `response.created`, a text delta, then `middle`, then the response completed with "Hi".
fn responses_around(middle: &[Value]) -> String {
    let completed = serde_json::json!({"type": "response.completed", "response": {"id": "resp_1",
        "status": "completed", "model": "gpt-5", "output": [{"id": "msg_1", "type": "message",
        "role": "assistant", "content": [{"type": "output_text", "text": "Hi", "annotations": []}]}]}});
    let mut events = vec![
        serde_json::json!({"type": "response.created", "response": {"id": "resp_1", "status": "in_progress", "output": []}}),
        serde_json::json!({"type": "response.output_text.delta", "item_id": "msg_1", "output_index": 0, "delta": "Hi"}),
    ];
    events.extend_from_slice(middle);
    events.push(completed);
    responses_body(&events)
}

#[test]
fn responses_events_with_other_deltas_and_unknown_events_are_skipped() {
    use agentstate::providers::{Action, Issue};
    // A shell call's output delta is an object (the SDK's
    // `ResponseShellCallOutputContentDeltaEvent`); a known event, read from the final response.
    let shell = serde_json::json!({"type": "response.shell_call_output_content.delta",
        "command_index": 0, "delta": {"stdout": "ok\n", "stderr": null}, "item_id": "sh_1",
        "output_index": 1, "sequence_number": 4});
    let (deltas, parsed) = streamed(
        Provider::Responses,
        &[responses_around(&[shell]).as_bytes()],
    );
    let parsed = parsed.unwrap();
    assert_eq!(parsed.message.text(), "Hi");
    assert!(parsed.report.is_empty(), "{}", parsed.report);
    assert_eq!(deltas.len(), 1);

    // An event type this version does not know, whatever its fields: skipped, noted once.
    let unknown = serde_json::json!({"type": "response.hologram.delta", "delta": [1, 2],
        "message": {"a": 1}, "code": 7, "output_index": "x"});
    let body = responses_around(&[unknown.clone(), unknown]);
    let parsed = streamed(Provider::Responses, &[body.as_bytes()]).1.unwrap();
    assert_eq!(parsed.message.text(), "Hi");
    let notes = parsed.report.notes();
    assert_eq!(notes.len(), 1, "{}", parsed.report);
    assert_eq!(
        (&notes[0].issue, &notes[0].action),
        (
            &Issue::UnknownEvent {
                event: "response.hologram.delta".into()
            },
            &Action::Dropped
        )
    );
    assert_eq!(
        parsed.report.to_string(),
        "stream: the stream's `response.hologram.delta` event is not one this version reads; dropped"
    );

    // A known event whose `delta` must be text is still refused when it is not.
    let bad =
        serde_json::json!({"type": "response.output_text.delta", "output_index": 0, "delta": 5});
    let err = one(Provider::Responses, &responses_around(&[bad]));
    assert!(
        err.to_string().contains("it has no `delta` string"),
        "{err}"
    );

    // Anthropic skips an unknown event with the same note.
    let body = String::from_utf8(read("anthropic_text.sse")).unwrap().replacen(
        "event: ping",
        "event: thought_bubble\ndata: {\"type\": \"thought_bubble\", \"index\": \"x\"}\n\nevent: ping",
        1,
    );
    let parsed = streamed(Provider::Anthropic, &[body.as_bytes()]).1.unwrap();
    assert_eq!(
        parsed.report.notes()[0].issue,
        Issue::UnknownEvent {
            event: "thought_bubble".into()
        }
    );
}

#[test]
fn a_responses_error_event_keeps_the_providers_message_flat_or_nested() {
    let nested = "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"invalid_request_error\",\"code\":\"context_length_exceeded\",\"message\":\"Your input exceeds the context window of this model.\",\"param\":\"input\"},\"sequence_number\":2}\n\n";
    let err = one(Provider::Responses, nested);
    assert_eq!(
        err.to_string(),
        "the OpenAI Responses stream failed at event 1: context_length_exceeded: Your input exceeds the context window of this model."
    );
    let nested_type_only = "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"server_error\",\"message\":\"Boom\"}}\n\n";
    let err = one(Provider::Responses, nested_type_only);
    assert_eq!(err.category(), "provider_unavailable");
    assert!(err.to_string().ends_with("server_error: Boom"), "{err}");
}

#[test]
fn malformed_json_names_the_provider_and_the_event() {
    let err = one(
        Provider::Chat,
        "data: {\"id\":\"c\",\"choices\":[]}\n\ndata: {\"id\":\"c\",\"choices\":[{\"delta\":{\"content\":\"x\"\n\n",
    );
    let text = err.to_string();
    assert!(
        text.starts_with(
            "cannot read event 2 (`message`) of the OpenAI Chat stream: EOF while parsing"
        ),
        "{text}"
    );
    assert_eq!(err.category(), "provider_invalid_response");

    let err = one(
        Provider::Anthropic,
        "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":4,\"delta\":{\"type\":\"text_delta\",\"text\":\"x\"}}\n\n",
    );
    assert_eq!(
        err.to_string(),
        "cannot read event 1 (`content_block_delta`) of the Anthropic stream: no content block was started at index 4"
    );

    // A tool call's input that is not JSON, found when the message is assembled.
    let body = String::from_utf8(read("anthropic_tools.sse"))
        .unwrap()
        .replace("renheit\\\"}", "renheit\\\"");
    let err = one(Provider::Anthropic, &body);
    assert!(
        err.to_string()
            .contains("the input of tool call block 1 is not valid JSON"),
        "{err}"
    );
}

/// A function call whose arguments Vertex AI streams (`partialArgs` at JSON paths,
/// `willContinue`, as google-genai's `PartialArg` and `FunctionCall.will_continue` describe
/// them) is read into one whole call.
#[test]
fn gemini_streamed_function_call_arguments_make_one_call() {
    let chunk = |parts: &str, end: &str| {
        format!(
            "data: {{\"candidates\": [{{\"content\": {{\"role\": \"model\", \"parts\": [{parts}]}}{end}}}], \"responseId\": \"r\"}}\n\n"
        )
    };
    let body = [
        chunk(r#"{"text": "Saving."}"#, ""),
        chunk(
            r#"{"functionCall": {"name": "save_article", "willContinue": true}, "thoughtSignature": "c2ln"}"#,
            "",
        ),
        chunk(
            r#"{"functionCall": {"partialArgs": [{"jsonPath": "$.title", "stringValue": "Rust ", "willContinue": true}], "willContinue": true}}"#,
            "",
        ),
        chunk(
            r#"{"functionCall": {"partialArgs": [{"jsonPath": "$.title", "stringValue": "streams"}, {"jsonPath": "$.meta.words", "numberValue": 2}, {"jsonPath": "$.tags[1]", "stringValue": "b"}, {"jsonPath": "$['draft']", "boolValue": false}, {"jsonPath": "$.note", "nullValue": "NULL_VALUE"}], "willContinue": true}}"#,
            "",
        ),
        chunk(r#"{"functionCall": {}}"#, ""),
        chunk("", r#", "finishReason": "STOP""#),
    ]
    .concat();
    let (deltas, parsed) = streamed(Provider::Gemini, &[body.as_bytes()]);
    let parsed = parsed.unwrap();
    assert!(parsed.report.is_empty(), "{}", parsed.report);
    let message = parsed.message;
    let call = &message.tool_calls()[0];
    assert_eq!((call.id.as_str(), call.name()), ("call_0", "save_article"));
    assert_eq!(
        call.arguments::<serde_json::Value>().unwrap(),
        serde_json::json!({"title": "Rust streams", "meta": {"words": 2}, "tags": [null, "b"],
                           "draft": false, "note": null})
    );
    assert_eq!(
        message
            .tool_call_blocks()
            .next()
            .unwrap()
            .signature
            .as_deref(),
        Some("c2ln")
    );
    assert_eq!(message.tool_calls().len(), 1);
    check_deltas("streamed call", &message, &deltas, Provider::Gemini);
    // The same answer, not streamed.
    let whole = serde_json::json!({"responseId": "r", "candidates": [{"content": {"role": "model", "parts": [
        {"text": "Saving."},
        {"functionCall": {"name": "save_article", "args": {"title": "Rust streams", "meta": {"words": 2},
            "tags": [null, "b"], "draft": false, "note": null}}, "thoughtSignature": "c2ln"}]},
        "finishReason": "STOP"}]});
    assert_eq!(
        comparable(message, Provider::Gemini),
        comparable(
            non_streamed(Provider::Gemini, &whole).message,
            Provider::Gemini
        )
    );
    // A path that is not a JSON path is malformed.
    let bad = [
        chunk(r#"{"functionCall": {"name": "f", "partialArgs": [{"jsonPath": "title", "stringValue": "x"}], "willContinue": true}}"#, ""),
    ]
    .concat();
    let err = one(Provider::Gemini, &bad);
    assert!(
        err.to_string()
            .ends_with("the partial argument's path `title` is not a JSON path"),
        "{err}"
    );
}

/// What the `from_*` functions read beyond the parts (a refusal's stop details, a search's
/// sources) comes through the streams too.
#[test]
fn streamed_refusals_and_sources_equal_the_non_streamed_ones() {
    let anthropic = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"model\":\"m\",\"usage\":{\"input_tokens\":1,\"output_tokens\":1}}}\n\n\
        event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"refusal\",\"stop_sequence\":null,\"stop_details\":{\"type\":\"refusal\",\"category\":\"bio\",\"explanation\":\"Not this.\"}},\"usage\":{\"output_tokens\":2}}\n\n\
        event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n";
    let json = serde_json::json!({"id": "msg_1", "type": "message", "role": "assistant",
        "content": [], "model": "m", "stop_reason": "refusal", "stop_sequence": null,
        "stop_details": {"type": "refusal", "category": "bio", "explanation": "Not this."},
        "usage": {"input_tokens": 1, "output_tokens": 2}});
    let gemini = "data: {\"candidates\": [{\"content\": {\"parts\": [{\"text\": \"Spain won.\"}], \"role\": \"model\"}, \"citationMetadata\": {\"citationSources\": [{\"uri\": \"https://c.example\"}]}}], \"responseId\": \"r\"}\n\n\
        data: {\"candidates\": [{\"content\": {\"parts\": [{\"text\": \"\"}], \"role\": \"model\"}, \"finishReason\": \"STOP\", \"groundingMetadata\": {\"webSearchQueries\": [\"euro\"], \"groundingChunks\": [{\"web\": {\"uri\": \"https://a.example\", \"title\": \"A\"}}]}}], \"usageMetadata\": {\"promptTokenCount\": 3, \"candidatesTokenCount\": 2, \"totalTokenCount\": 5}, \"responseId\": \"r\"}\n\n";
    let gemini_json = serde_json::json!({"candidates": [{"content": {"parts": [{"text": "Spain won."}], "role": "model"},
        "finishReason": "STOP", "citationMetadata": {"citations": [{"uri": "https://c.example"}]},
        "groundingMetadata": {"webSearchQueries": ["euro"], "groundingChunks": [{"web": {"uri": "https://a.example", "title": "A"}}]}}],
        "usageMetadata": {"promptTokenCount": 3, "candidatesTokenCount": 2, "totalTokenCount": 5}, "responseId": "r"});
    for (provider, body, json) in [
        (Provider::Anthropic, anthropic, json),
        (Provider::Gemini, gemini, gemini_json),
    ] {
        let parsed = streamed(provider, &[body.as_bytes()]).1.unwrap();
        let expected = non_streamed(provider, &json);
        assert_eq!(parsed.report, expected.report, "{provider:?}");
        assert_eq!(
            comparable(parsed.message, provider),
            comparable(expected.message, provider),
            "{provider:?}"
        );
    }
}

#[test]
fn a_chat_stream_cut_in_or_before_its_usage_chunk_is_incomplete() {
    let text = String::from_utf8(read("openai_chat_text.sse")).unwrap();
    let usage_at = text.find("\"choices\":[],\"usage\"").unwrap();
    let chunk_at = text[..usage_at].rfind("data: ").unwrap();
    // Inside the usage chunk (its bytes never make an event), and right before it.
    for cut in [usage_at + 30, chunk_at] {
        let err = one(Provider::Chat, &text[..cut]);
        assert_eq!(err.category(), "provider_invalid_response");
        assert!(
            err.to_string().ends_with(
                "without its final event (the usage chunk (its chunks had `\"usage\": null`))"
            ),
            "{err}"
        );
    }
    // After the usage chunk, without `[DONE]`: nothing is lost.
    let done_at = text.find("data: [DONE]").unwrap();
    let parsed = streamed(Provider::Chat, &[&text.as_bytes()[..done_at]])
        .1
        .unwrap();
    assert!(parsed.message.usages.is_some());
}

#[test]
fn an_anthropic_event_after_message_stop_is_refused_not_merged() {
    let body = String::from_utf8(read("anthropic_text.sse")).unwrap();
    let late = "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\" More.\"}}\n\n";
    let events = body.matches("\n\n").count();
    let err = one(Provider::Anthropic, &format!("{body}{late}"));
    assert_eq!(
        err.to_string(),
        format!(
            "cannot read event {} (`content_block_delta`) of the Anthropic stream: it comes after `message_stop`, which ends the message",
            events + 1
        )
    );
    // A late `ping` changes nothing.
    let ping = "event: ping\ndata: {\"type\": \"ping\"}\n\n";
    let parsed = streamed(Provider::Anthropic, &[format!("{body}{ping}").as_bytes()])
        .1
        .unwrap();
    let json: Value = serde_json::from_slice(&read("anthropic_text.json")).unwrap();
    assert_eq!(
        parsed.message.text(),
        non_streamed(Provider::Anthropic, &json).message.text()
    );
}

#[test]
fn a_stream_cut_short_is_an_error() {
    for (name, provider, expected) in [
        (
            "openai_chat_tools",
            Provider::Chat,
            "a `finish_reason` or `[DONE]`",
        ),
        (
            "openai_responses_text",
            Provider::Responses,
            "`response.completed`",
        ),
        ("anthropic_text", Provider::Anthropic, "`message_stop`"),
        (
            "gemini_text",
            Provider::Gemini,
            "a candidate's `finishReason`",
        ),
    ] {
        let body = read(&format!("{name}.sse"));
        let text = String::from_utf8(body).unwrap();
        let sep = if text.contains("\r\n\r\n") {
            "\r\n\r\n"
        } else {
            "\n\n"
        };
        let events: Vec<&str> = text.split_inclusive(sep).collect();
        let cut = events[..events.len() / 2].concat();
        let err = one(provider, &cut);
        assert_eq!(err.category(), "provider_invalid_response");
        assert!(err.to_string().contains(expected), "{name}: {err}");
        assert!(
            err.to_string()
                .contains(&format!("after {} events", events.len() / 2)),
            "{name}: {err}"
        );
    }
}

#[test]
fn anthropic_rewritten_tool_ids_are_mapped_back() {
    use agentstate::message::{Message, Role, ToolCall};
    use agentstate::providers::to_anthropic;
    let messages = [
        Message::text_message("Weather?", Role::User),
        Message::text_message("", Role::Assistant).with_tool_calls(vec![ToolCall::new(
            "functions.get_weather:0",
            "get_weather",
            serde_json::json!({}),
        )]),
        Message::tool_result("functions.get_weather:0", "Sunny"),
    ];
    let ids = to_anthropic(&messages, None).tool_ids;
    let body = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_2\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"model\":\"m\",\"usage\":{\"input_tokens\":1,\"output_tokens\":1}}}\n\n\
        event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"tool_use\",\"id\":\"functions_get_weather_0\",\"name\":\"get_weather\",\"input\":{}}}\n\n\
        event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{}\"}}\n\n\
        event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n\
        event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n";
    let (deltas, converted) = feed(AnthropicStream::new(Some(ids)), &[body.as_bytes()]);
    let Delta::ToolCall { tool_call_id, .. } = &deltas[0] else {
        panic!()
    };
    assert_eq!(tool_call_id, "functions.get_weather:0");
    assert_eq!(
        converted.unwrap().message.tool_calls()[0].id,
        "functions.get_weather:0"
    );
}

// ---------------------------------------------------------------------------------------
// The SSE decoder

fn decode(chunks: &[&[u8]]) -> Vec<(String, String)> {
    let mut decoder = SseDecoder::new();
    let mut events = Vec::new();
    for chunk in chunks {
        decoder
            .push(chunk, &mut |event: &str, data: &str| {
                events.push((event.to_owned(), data.to_owned()));
                Ok::<(), ()>(())
            })
            .unwrap();
    }
    events
}

fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter()
        .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
        .collect()
}

#[test]
fn sse_line_ends_comments_and_fields() {
    let body = "\u{feff}: comment\r\nevent: a\rdata: 1\r\ndata:2\n\n\
                data\n\n\
                event: lost\n\n\
                id: 9\nretry: 10\nunknown: x\ndata:  two spaces\r\r\
                data: unfinished";
    let expected = pairs(&[("a", "1\n2"), ("message", ""), ("message", " two spaces")]);
    assert_eq!(decode(&[body.as_bytes()]), expected);
    // Split at every byte: the same events (a CRLF split between chunks is one line end).
    let bytes = body.as_bytes();
    let chunks: Vec<&[u8]> = bytes.chunks(1).collect();
    assert_eq!(decode(&chunks), expected);
    // A CR at the end of a chunk, a LF starting the next: one line end, not two.
    assert_eq!(
        decode(&[b"data: x\r", b"\n\r", b"\n"]),
        pairs(&[("message", "x")])
    );
}

#[test]
fn sse_one_data_line_events_in_one_chunk() {
    // Read straight from the chunk: every line end, an empty `data`, and an event type.
    let body = ": start\ndata: a\r\n\r\ndata: b\r\rdata: c\n\r\ndata\n\nevent: e\ndata:f\n\n";
    let expected = pairs(&[
        ("message", "a"),
        ("message", "b"),
        ("message", "c"),
        ("message", ""),
        ("e", "f"),
    ]);
    assert_eq!(decode(&[body.as_bytes()]), expected);
    let chunks: Vec<&[u8]> = body.as_bytes().chunks(1).collect();
    assert_eq!(decode(&chunks), expected);
    // A CR ends the chunk: the LF starting the next one belongs to it.
    assert_eq!(
        decode(&[b": x\ndata: a\r\r", b"\ndata: b\r", b"\n\n"]),
        pairs(&[("message", "a"), ("message", "b")])
    );
    assert_eq!(
        decode(&[b": x\ndata: a\n\r", b"\ndata: \xff\n\n"]),
        pairs(&[("message", "a"), ("message", "\u{fffd}")])
    );
}

#[test]
fn sse_invalid_utf8_is_replaced_and_an_error_stops_the_chunk() {
    assert_eq!(
        decode(&[b"data: \xff\n\n"]),
        pairs(&[("message", "\u{fffd}")])
    );
    let mut decoder = SseDecoder::new();
    let mut seen = 0;
    let result = decoder.push(b"data: 1\n\ndata: 2\n\n", &mut |_: &str, _: &str| {
        seen += 1;
        Err("stop")
    });
    assert_eq!((result, seen), (Err("stop"), 1));
}

#[cfg(feature = "ag-ui")]
#[test]
fn deltas_become_agui_events() {
    use agentstate::agui::Event;
    use agentstate::providers::stream::AguiDeltas;
    let (deltas, converted) = streamed(Provider::Anthropic, &[&read("anthropic_tools.sse")]);
    let message = converted.unwrap().message;
    let mut agui = AguiDeltas::default();
    let mut events = Vec::new();
    for delta in &deltas {
        agui.push(delta, &mut events);
    }
    agui.end(&mut events);
    let mut types: Vec<&str> = events.iter().map(Event::event_type).collect();
    types.dedup();
    assert_eq!(
        types,
        [
            "TEXT_MESSAGE_START",
            "TEXT_MESSAGE_CONTENT",
            "TEXT_MESSAGE_END",
            "TOOL_CALL_START",
            "TOOL_CALL_ARGS",
            "TOOL_CALL_END",
            "TOOL_CALL_START",
            "TOOL_CALL_ARGS",
            "TOOL_CALL_END"
        ]
    );
    let Event::TextMessageStart(start) = &events[0] else {
        panic!()
    };
    assert_eq!(start.message_id, message.message_id.to_string());
    let Event::ToolCallStart(call) = events
        .iter()
        .find(|e| e.event_type() == "TOOL_CALL_START")
        .unwrap()
    else {
        panic!()
    };
    assert_eq!(
        call.parent_message_id.as_deref(),
        Some(message.message_id.to_string().as_str())
    );
    assert_eq!(call.tool_call_name, "get_weather");
}

/// Every recording's deltas, as AG-UI events, fold into the chat state a UI renders: the
/// message's text and each call's arguments, without errors.
#[cfg(feature = "ag-ui")]
#[test]
fn every_recording_folds_into_the_agui_chat_state() {
    use agentstate::agui::{fold_all, ChatState, Event};
    use agentstate::providers::stream::AguiDeltas;
    for (name, provider) in CASES {
        let (deltas, converted) = streamed(*provider, &[&read(&format!("{name}.sse"))]);
        let message = converted.unwrap().message;
        let mut agui = AguiDeltas::default();
        let mut events = vec![Event::run_started("thread", "run")];
        for delta in &deltas {
            agui.push(delta, &mut events);
        }
        agui.end(&mut events);
        let state = fold_all(ChatState::new(), &events);
        assert!(state.errors().is_empty(), "{name}: {:?}", state.errors());
        let id = message.message_id.to_string();
        if !message.text().is_empty() {
            let folded = state
                .message(&id)
                .unwrap_or_else(|| panic!("{name}: no message"));
            assert_eq!(folded.text(), message.text(), "{name}");
        }
        for call in message.tool_calls() {
            let view = state
                .tool_call(&call.id)
                .unwrap_or_else(|| panic!("{name}: no call {}", call.id));
            assert_eq!(view.name(), call.name(), "{name}");
            assert_eq!(
                view.arguments(),
                call.arguments::<serde_json::Value>().ok(),
                "{name}"
            );
        }
    }
}
