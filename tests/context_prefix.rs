//! Prefix stability: providers cache the prompt's prefix, so a view that keeps the same first
//! messages from one model call to the next is cheaper and faster. A long conversation
//! (tests/context_support) is replayed call by call (a call before each assistant message) under
//! an 8k-token window with each cut policy; the share of calls whose kept history starts where
//! the previous call's did is the README's prefix-stability table. Run with
//! `cargo test --test context_prefix -- --nocapture` to see it.

mod context_support;

use agentstate::context::{ContextIndex, ContextWindow, Cut};
use agentstate::message::Role;

/// For one cut policy: the share of calls (after the first cut) whose cut did not move, and the
/// mean share of the budget the views fill.
fn replay(cut: Cut) -> (f64, f64) {
    let conversation = context_support::conversation(600);
    let window = ContextWindow::tokens(8_000).with_cut(cut);
    let mut index = ContextIndex::default();
    let (mut calls, mut unchanged, mut fill) = (0u32, 0u32, 0f64);
    let mut previous: Option<usize> = None;
    for end in 1..conversation.len() {
        if conversation[end].role != Role::Assistant {
            continue;
        }
        let view = index.view(&conversation[..end], &window).unwrap();
        assert!(view.tokens() <= 8_000);
        if view.cut() > 1 {
            // The history no longer fits: count from the first call that cuts.
            if let Some(before) = previous {
                calls += 1;
                unchanged += u32::from(before == view.cut());
            }
            fill += view.tokens() as f64 / 8_000.0;
            previous = Some(view.cut());
        }
    }
    (
        f64::from(unchanged) / f64::from(calls),
        fill / f64::from(calls + 1),
    )
}

#[test]
fn chunked_cuts_keep_the_prefix() {
    let mut results = Vec::new();
    for (name, cut) in [
        ("Tight", Cut::Tight),
        ("Turns", Cut::Turns),
        ("Chunked { parts: 4 } (default)", Cut::Chunked { parts: 4 }),
        ("Chunked { parts: 2 }", Cut::Chunked { parts: 2 }),
    ] {
        let (stable, fill) = replay(cut);
        println!(
            "| `Cut::{name}` | {:.0}% | {:.0}% |",
            stable * 100.0,
            fill * 100.0
        );
        results.push((stable, fill));
    }
    let (tight, turns, chunked4, chunked2) = (results[0], results[1], results[2], results[3]);
    assert!(tight.0 < 0.5, "the tight cut moves on most calls");
    assert!(turns.0 > tight.0, "whole turns move less often");
    assert!(
        chunked4.0 >= 0.8,
        "chunks of a quarter keep the prefix on most calls"
    );
    assert!(chunked2.0 >= chunked4.0, "larger chunks keep it longer");
    assert!(
        chunked4.1 >= 0.6 && chunked2.1 >= 0.4,
        "while the views stay reasonably full"
    );
}
