//! Cost of the streamed-response accumulators, per event: an answer of 1,000 text deltas of a
//! few words and one tool call whose arguments come in 200 fragments, in each provider's
//! stream format (OpenAI Chat chunks as OpenAI sends them, with `system_fingerprint` and
//! `logprobs`; Responses events with their `sequence_number`s and ids; Anthropic's
//! `content_block_delta`s; Gemini chunks with `usageMetadata` in each).
//!
//! `events` feeds the decoded events (`Accumulator::push_event`) and finishes the message;
//! `bytes` feeds the SSE body in 4 KiB chunks through `Sse` (decoding included). divan
//! reports the time per event through its item counter. The goal: an accumulator adds
//! at most 1 µs per event.
//!
//! Run with `cargo bench --bench streams`; `benches/README.md`'s table comes from it.

use agentstate::providers::stream::{
    Accumulator, AnthropicStream, Delta, GeminiStream, OpenAiChatStream, OpenAiResponsesStream, Sse,
};
use divan::counter::ItemsCount;
use divan::{black_box, Bencher};
use serde_json::json;

fn main() {
    divan::main();
}

const TEXT_DELTAS: usize = 1_000;
const ARG_FRAGMENTS: usize = 200;

fn word(i: usize) -> String {
    format!(" word{} and", i % 97)
}

fn fragment(i: usize) -> String {
    match i {
        0 => "{\"notes\": \"".to_owned(),
        i if i == ARG_FRAGMENTS - 1 => "end\"}".to_owned(),
        i => format!("part {i} "),
    }
}

fn chat() -> Vec<(String, String)> {
    let chunk = |choices: serde_json::Value, usage: serde_json::Value| {
        json!({"id": "chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT", "object": "chat.completion.chunk",
               "created": 1741569952, "model": "gpt-4o-2024-08-06", "service_tier": "default",
               "system_fingerprint": "fp_f9f4fb6dbf", "choices": choices, "usage": usage})
        .to_string()
    };
    let mut events = vec![chunk(
        json!([{"index": 0, "delta": {"role": "assistant", "content": "", "refusal": null}, "logprobs": null, "finish_reason": null}]),
        json!(null),
    )];
    for i in 0..TEXT_DELTAS {
        events.push(chunk(
            json!([{"index": 0, "delta": {"content": word(i)}, "logprobs": null, "finish_reason": null}]),
            json!(null),
        ));
    }
    events.push(chunk(json!([{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "call_DdmO9pD3xa9XTPNJ32zg2hcA", "type": "function", "function": {"name": "take_note", "arguments": ""}}]}, "logprobs": null, "finish_reason": null}]), json!(null)));
    for i in 0..ARG_FRAGMENTS {
        events.push(chunk(
            json!([{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": fragment(i)}}]}, "logprobs": null, "finish_reason": null}]),
            json!(null),
        ));
    }
    events.push(chunk(
        json!([{"index": 0, "delta": {}, "logprobs": null, "finish_reason": "tool_calls"}]),
        json!(null),
    ));
    events.push(chunk(
        json!([]),
        json!({"prompt_tokens": 19, "completion_tokens": 1300, "total_tokens": 1319}),
    ));
    events.push("[DONE]".to_owned());
    events
        .into_iter()
        .map(|d| ("message".to_owned(), d))
        .collect()
}

fn responses() -> Vec<(String, String)> {
    let mut seq = 0;
    let mut events = Vec::new();
    let mut push = |kind: &str, mut data: serde_json::Value| {
        data["type"] = json!(kind);
        data["sequence_number"] = json!(seq);
        seq += 1;
        events.push((kind.to_owned(), data.to_string()));
    };
    let base = json!({"id": "resp_67c9fdcecf488190bdd9a0409de3a1ec07b8b0ad4e5eb654", "object": "response",
                      "created_at": 1741290958, "status": "in_progress", "model": "gpt-4.1-2025-04-14", "output": []});
    let mid = "msg_67c9fdcf37fc8190ba82116e33fb28c507b8b0ad4e5eb654";
    let fc = "fc_68af403278848193a9a6e3d3e3f8b5e605438e46b5f69a3b";
    push("response.created", json!({"response": base}));
    push(
        "response.output_item.added",
        json!({"output_index": 0, "item": {"id": mid, "type": "message", "status": "in_progress", "role": "assistant", "content": []}}),
    );
    let mut text = String::new();
    for i in 0..TEXT_DELTAS {
        text.push_str(&word(i));
        push(
            "response.output_text.delta",
            json!({"item_id": mid, "output_index": 0, "content_index": 0, "delta": word(i)}),
        );
    }
    push(
        "response.output_item.added",
        json!({"output_index": 1, "item": {"id": fc, "type": "function_call", "status": "in_progress", "arguments": "", "call_id": "call_1234xyz", "name": "take_note"}}),
    );
    let mut args = String::new();
    for i in 0..ARG_FRAGMENTS {
        args.push_str(&fragment(i));
        push(
            "response.function_call_arguments.delta",
            json!({"item_id": fc, "output_index": 1, "delta": fragment(i)}),
        );
    }
    let mut done = base.clone();
    done["status"] = json!("completed");
    done["output"] = json!([
        {"id": mid, "type": "message", "status": "completed", "role": "assistant", "content": [{"type": "output_text", "text": text, "annotations": []}]},
        {"id": fc, "type": "function_call", "status": "completed", "arguments": args, "call_id": "call_1234xyz", "name": "take_note"}]);
    done["usage"] = json!({"input_tokens": 37, "output_tokens": 1300, "total_tokens": 1337});
    push("response.completed", json!({"response": done}));
    events
}

fn anthropic() -> Vec<(String, String)> {
    let mut events = Vec::new();
    let mut push = |data: serde_json::Value| {
        events.push((data["type"].as_str().unwrap().to_owned(), data.to_string()));
    };
    push(
        json!({"type": "message_start", "message": {"id": "msg_1nZdL29xx5MUA1yADyHTEsnR8uuvGzszyY", "type": "message", "role": "assistant", "content": [], "model": "claude-opus-4-6", "stop_reason": null, "stop_sequence": null, "usage": {"input_tokens": 25, "output_tokens": 1}}}),
    );
    push(
        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
    );
    for i in 0..TEXT_DELTAS {
        push(
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": word(i)}}),
        );
    }
    push(json!({"type": "content_block_stop", "index": 0}));
    push(
        json!({"type": "content_block_start", "index": 1, "content_block": {"type": "tool_use", "id": "toolu_01T1x1fJ34qAmk2tNTrN7Up6", "name": "take_note", "input": {}}}),
    );
    for i in 0..ARG_FRAGMENTS {
        push(
            json!({"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": fragment(i)}}),
        );
    }
    push(json!({"type": "content_block_stop", "index": 1}));
    push(
        json!({"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": null}, "usage": {"output_tokens": 1300}}),
    );
    push(json!({"type": "message_stop"}));
    events
}

fn gemini() -> Vec<(String, String)> {
    let chunk = |parts: serde_json::Value, n: usize, finish: Option<&str>| {
        let mut candidate = json!({"content": {"parts": parts, "role": "model"}});
        if let Some(finish) = finish {
            candidate["finishReason"] = json!(finish);
        }
        (
            "message".to_owned(),
            json!({"candidates": [candidate],
                   "usageMetadata": {"promptTokenCount": 8, "candidatesTokenCount": n, "totalTokenCount": 8 + n,
                                     "promptTokensDetails": [{"modality": "TEXT", "tokenCount": 8}]},
                   "modelVersion": "gemini-2.5-flash", "responseId": "mGGJaPOvFs2Mz7IPt7bR-Ag"})
            .to_string(),
        )
    };
    let mut events: Vec<_> = (0..TEXT_DELTAS)
        .map(|i| chunk(json!([{"text": word(i)}]), i, None))
        .collect();
    events.push(chunk(
        json!([{"functionCall": {"name": "take_note", "args": {"notes": "a note"}}}]),
        TEXT_DELTAS,
        Some("STOP"),
    ));
    events
}

fn body(events: &[(String, String)]) -> Vec<u8> {
    let mut out = String::new();
    for (event, data) in events {
        if event != "message" {
            out.push_str("event: ");
            out.push_str(event);
            out.push('\n');
        }
        out.push_str("data: ");
        out.push_str(data);
        out.push_str("\n\n");
    }
    out.into_bytes()
}

fn run_events<A: Accumulator>(bencher: Bencher, events: Vec<(String, String)>, make: fn() -> A) {
    bencher
        .counter(ItemsCount::new(events.len()))
        .bench_local(|| {
            let mut accumulator = make();
            let mut deltas: Vec<Delta> = Vec::with_capacity(16);
            for (event, data) in &events {
                accumulator.push_event(event, data, &mut deltas).unwrap();
                deltas.clear();
            }
            black_box(accumulator.finish().unwrap())
        });
}

fn run_bytes<A: Accumulator>(bencher: Bencher, events: Vec<(String, String)>, make: fn() -> A) {
    let count = events.len();
    let body = body(&events);
    bencher.counter(ItemsCount::new(count)).bench_local(|| {
        let mut stream = Sse::new(make());
        let mut deltas: Vec<Delta> = Vec::with_capacity(64);
        for chunk in body.chunks(4096) {
            stream.push(chunk, &mut deltas).unwrap();
            deltas.clear();
        }
        black_box(stream.finish().unwrap())
    });
}

#[divan::bench]
fn openai_chat_events(bencher: Bencher) {
    run_events(bencher, chat(), OpenAiChatStream::new);
}

#[divan::bench]
fn openai_chat_bytes(bencher: Bencher) {
    run_bytes(bencher, chat(), OpenAiChatStream::new);
}

#[divan::bench]
fn openai_responses_events(bencher: Bencher) {
    run_events(bencher, responses(), OpenAiResponsesStream::new);
}

#[divan::bench]
fn openai_responses_bytes(bencher: Bencher) {
    run_bytes(bencher, responses(), OpenAiResponsesStream::new);
}

fn anthropic_new() -> AnthropicStream {
    AnthropicStream::new(None)
}

#[divan::bench]
fn anthropic_events(bencher: Bencher) {
    run_events(bencher, anthropic(), anthropic_new);
}

#[divan::bench]
fn anthropic_bytes(bencher: Bencher) {
    run_bytes(bencher, anthropic(), anthropic_new);
}

#[divan::bench]
fn gemini_events(bencher: Bencher) {
    run_events(bencher, gemini(), GeminiStream::new);
}

#[divan::bench]
fn gemini_bytes(bencher: Bencher) {
    run_bytes(bencher, gemini(), GeminiStream::new);
}
