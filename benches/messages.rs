//! Messages: memory per message and the JSON round trip of a state holding them.
//!
//! - `memory`: parses 100k realistic messages (about 590 bytes each as AgentFlow's compact
//!   JSON: user questions, assistant answers with usages and metadata, tool calls, tool results)
//!   into a `MessageList` and reports the heap bytes it holds per message, counted by this
//!   file's global allocator. Printed once before the timings, and checked against the goal of
//!   at most 1.5x the JSON size.
//! - `round_trip`: serializes and deserializes a 10k-message state, `AgentState` and a state
//!   extending it (`#[agent_state(base)]`, `#[serde(flatten)] base: AgentState`), as a
//!   checkpointer does; `deserialize` and `serialize` time each half alone.
//!
//! Run with `cargo bench --bench messages`; the README's table comes from it.

use agentstate::collections::MessageList;
use agentstate::message::{ContentBlock, JsonObject, Message, Role, TokenUsages, ToolCall};
use agentstate::state::AgentState;
use divan::{black_box, Bencher};
use serde_json::json;
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};

/// The system allocator, counting the bytes currently allocated.
struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: forwarded as received.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: forwarded as received.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(
            new_size as isize - layout.size() as isize,
            Ordering::Relaxed,
        );
        // SAFETY: forwarded as received.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// A state extending `AgentState`, as users write one.
#[derive(
    agentstate::AgentState, Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize,
)]
struct Extended {
    #[agent_state(base)]
    #[serde(flatten)]
    base: AgentState,
    order_id: Option<String>,
    confirmed: bool,
}

/// Message `i` of a realistic conversation: a user question, an assistant turn that calls a
/// tool, the tool's result, the assistant's answer, in turn.
fn message(i: usize) -> Message {
    let id = format!(
        "{:08x}-7d1c-4b6e-9a2f-{:012x}",
        i * 2_654_435_761 % (1 << 32),
        i
    );
    let call_id = format!("call_{:024x}", i * 97);
    let timestamp = 1_760_000_000.0 + i as f64 * 1.375;
    let metadata =
        |pairs: &[(&str, &str)]| -> JsonObject { pairs.iter().map(|(k, v)| (*k, *v)).collect() };
    let m = match i % 4 {
        0 => Message::text_message(
            format!("Can you check the weather in Zürich for trip {i} and suggest what to pack? I leave on Friday morning."),
            Role::User,
        ),
        1 => Message::text_message("Let me look up the forecast first.", Role::Assistant)
            .with_tool_calls(vec![ToolCall::new(&call_id, "get_weather", json!({"city": "Zürich", "days": 3}))])
            .with_usages(TokenUsages::new(42, 380 + i as i64 % 100)),
        2 => {
            let mut m = Message::tool_result(&call_id, json!({"city": "Zürich", "forecast": ["sun", "rain", "sun"], "high_c": 21.5, "low_c": 11.0}));
            m.metadata = metadata(&[("function_name", "get_weather"), ("tool_call_id", &call_id)]);
            m
        }
        _ => {
            let mut m = Message::text_message(
                "Expect 11–21 °C with rain on Saturday: pack a light jacket, an umbrella and layers. Sunday looks dry.",
                Role::Assistant,
            )
            .with_usages(TokenUsages::new(64, 520 + i as i64 % 100));
            m.metadata = metadata(&[("provider", "openai"), ("model", "gpt-4o-mini"), ("finish_reason", "stop")]);
            m
        }
    };
    m.with_id(id).with_timestamp(timestamp)
}

fn messages(n: usize) -> Vec<Message> {
    (0..n).map(message).collect()
}

/// The heap bytes per message of a 100k-message `MessageList` parsed from JSON, and the JSON
/// bytes per message.
fn memory_per_message() -> (f64, f64) {
    const N: usize = 100_000;
    let json = serde_json::to_string(&messages(N)).unwrap();
    let json_per_message = (json.len() - 2 - (N - 1)) as f64 / N as f64;
    let before = LIVE.load(Ordering::Relaxed);
    let list: MessageList = serde_json::from_str(&json).unwrap();
    let held = LIVE.load(Ordering::Relaxed) - before;
    let len = black_box(&list).len();
    assert_eq!(len, N);
    drop(list);
    (held as f64 / N as f64, json_per_message)
}

fn main() {
    let (bytes, json) = memory_per_message();
    println!(
        "memory: a 100k-message MessageList holds {bytes:.0} bytes per message; \
         the messages are {json:.0} bytes each as JSON ({:.2}x); size_of::<Message>() = {}, \
         size_of::<ContentBlock>() = {}",
        bytes / json,
        std::mem::size_of::<Message>(),
        std::mem::size_of::<ContentBlock>(),
    );
    assert!(bytes <= 1.5 * json, "over the goal of 1.5x the JSON size");
    divan::main();
}

const STATE_MESSAGES: usize = 10_000;

fn agent_state() -> AgentState {
    AgentState {
        context: messages(STATE_MESSAGES).into(),
        context_summary: Some("The user plans a trip.".into()),
        ..AgentState::default()
    }
}

fn extended_state() -> Extended {
    Extended {
        base: agent_state(),
        order_id: Some("o-42".into()),
        confirmed: true,
    }
}

mod round_trip {
    use super::*;

    #[divan::bench]
    fn agent_state(bencher: Bencher) {
        let state = super::agent_state();
        bencher.bench_local(|| {
            let json = serde_json::to_string(black_box(&state)).unwrap();
            serde_json::from_str::<AgentState>(&json).unwrap()
        });
    }

    #[divan::bench]
    fn extended_state(bencher: Bencher) {
        let state = super::extended_state();
        bencher.bench_local(|| {
            let json = serde_json::to_string(black_box(&state)).unwrap();
            serde_json::from_str::<Extended>(&json).unwrap()
        });
    }
}

mod deserialize {
    use super::*;

    #[divan::bench]
    fn agent_state(bencher: Bencher) {
        let json = serde_json::to_string(&super::agent_state()).unwrap();
        bencher.bench_local(|| serde_json::from_str::<AgentState>(black_box(&json)).unwrap());
    }

    #[divan::bench]
    fn extended_state(bencher: Bencher) {
        let json = serde_json::to_string(&super::extended_state()).unwrap();
        bencher.bench_local(|| serde_json::from_str::<Extended>(black_box(&json)).unwrap());
    }
}

mod serialize {
    use super::*;

    #[divan::bench]
    fn agent_state(bencher: Bencher) {
        let state = super::agent_state();
        bencher.bench_local(|| serde_json::to_string(black_box(&state)).unwrap());
    }

    #[divan::bench]
    fn extended_state(bencher: Bencher) {
        let state = super::extended_state();
        bencher.bench_local(|| serde_json::to_string(black_box(&state)).unwrap());
    }
}
