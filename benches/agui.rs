//! Benchmarks of the AG-UI fold (feature `ag-ui`):
//!
//! - `text_10_byte_deltas`: one assistant message streamed as TEXT_MESSAGE_CONTENT events of 10
//!   bytes each, 100 KB and 1 MB in total. The time per byte is the same for both: each delta
//!   costs O(delta), not O(message length).
//! - `state_deltas_1000`: 1,000 STATE_DELTA events of four operations each (`test` and `replace` a
//!   counter, mark one item done, `add` a key) on a shared state of 100 and 10,000 items. The time
//!   per delta does not grow with the state: patches apply in place, undoable, without copying
//!   the state.
//!
//! `cargo bench --bench agui --features ag-ui`

use agentstate::agui::{ChatState, Event};
use divan::counter::{BytesCount, ItemsCount};
use divan::Bencher;
use serde_json::{json, Value};

fn main() {
    divan::main();
}

/// A running chat with one open assistant message.
fn streaming_chat() -> ChatState {
    let mut chat = ChatState::new();
    chat.apply(&Event::run_started("thread", "run"));
    chat.apply(&Event::text_start("m"));
    chat
}

#[divan::bench(args = [100_000, 1_000_000])]
fn text_10_byte_deltas(bencher: Bencher, bytes: usize) {
    let events: Vec<Event> = (0..bytes / 10)
        .map(|_| Event::text_content("m", "0123456789"))
        .collect();
    bencher
        .counter(BytesCount::new(bytes))
        .with_inputs(streaming_chat)
        .bench_local_values(|mut chat| {
            for event in &events {
                chat.apply(event);
            }
            assert_eq!(chat.messages()[0].message().text().len(), bytes);
            chat
        });
}

/// The same text as chunks: the first names the message, the others continue it (each one
/// expands to a CONTENT).
#[divan::bench(args = [100_000])]
fn text_10_byte_chunks(bencher: Bencher, bytes: usize) {
    let events: Vec<Event> = (0..bytes / 10)
        .map(|i| {
            let id = if i == 0 { json!("m") } else { Value::Null };
            serde_json::from_value(
                json!({"type": "TEXT_MESSAGE_CHUNK", "messageId": id, "delta": "0123456789"}),
            )
            .unwrap()
        })
        .collect();
    bencher
        .counter(BytesCount::new(bytes))
        .with_inputs(|| {
            let mut chat = ChatState::new();
            chat.apply(&Event::run_started("thread", "run"));
            chat
        })
        .bench_local_values(|mut chat| {
            for event in &events {
                chat.apply(event);
            }
            assert_eq!(chat.messages()[0].message().text().len(), bytes);
            chat
        });
}

fn chat_with_items(items: usize) -> ChatState {
    let mut chat = ChatState::new();
    chat.apply(&Event::run_started("thread", "run"));
    let list: Vec<_> = (0..items)
        .map(|i| json!({"id": i, "title": format!("item {i}"), "done": false}))
        .collect();
    chat.apply(&Event::state_snapshot(
        json!({"counter": 0, "items": list, "owner": {"name": "Ada"}}),
    ));
    chat
}

#[divan::bench(args = [100, 10_000])]
fn state_deltas_1000(bencher: Bencher, items: usize) {
    let events: Vec<Event> = (0..1000)
        .map(|i| {
            Event::state_delta(vec![
                json!({"op": "test", "path": "/counter", "value": i}),
                json!({"op": "replace", "path": "/counter", "value": i + 1}),
                json!({"op": "replace", "path": format!("/items/{}/done", i % items), "value": true}),
                json!({"op": "add", "path": "/owner/lastEdit", "value": i}),
            ])
        })
        .collect();
    bencher
        .counter(ItemsCount::new(events.len()))
        .with_inputs(|| chat_with_items(items))
        .bench_local_values(|mut chat| {
            for event in &events {
                chat.apply(event);
            }
            assert!(chat.errors().is_empty());
            assert_eq!(chat.agent_state()["counter"], json!(1000));
            chat
        });
}
