//! Views on concrete histories: the failures the issue measured in LangChain's `trim_messages`
//! and AgentFlow's `SummaryContextManager` (a view starting with an orphaned tool result, or
//! ending on calls without their results), swept over every budget; pending calls, orphans in
//! the middle, system messages in the middle, empty views, a replaced history.

// Views' kept ranges are compared with arrays of one range.
#![allow(clippy::single_range_in_vec_init)]

mod context_support;

use agentstate::context::{ContextIndex, ContextView, ContextWindow, Cut, TokenCounter};
use agentstate::message::{Message, Role, ToolCall};
use serde_json::json;
use std::collections::HashSet;

/// No kept tool result without its call, no kept call without its results.
fn assert_paired(view: &ContextView<'_>) {
    let kept: Vec<&Message> = view.history().collect();
    let calls: HashSet<&str> = kept
        .iter()
        .flat_map(|m| m.tool_calls().iter().map(|c| c.id()))
        .collect();
    let results: HashSet<&str> = kept
        .iter()
        .flat_map(|m| m.tool_results().map(|r| r.call_id.as_str()))
        .collect();
    assert!(results.is_subset(&calls), "a result without its call");
    assert!(calls.is_subset(&results), "a call without its results");
    assert_ne!(kept.first().map(|m| m.role), Some(Role::Tool));
}

/// The issue's measurement: a 20-turn history with parallel tool calls, every token budget from
/// 0 to all of it, every cut policy; and every message budget (AgentFlow's `keep_recent`).
#[test]
fn every_budget_of_a_20_turn_history_keeps_pairs() {
    let history = context_support::conversation(20);
    let mut index = ContextIndex::default();
    index.sync(&history);
    let total = index.total_tokens();
    for cut in [
        Cut::Tight,
        Cut::Turns,
        Cut::Chunked { parts: 4 },
        Cut::Chunked { parts: 1 },
    ] {
        let mut last_len = 0;
        for budget in 0..=total + 1 {
            let window = ContextWindow::tokens(budget).with_cut(cut);
            match index.view(&history, &window) {
                Ok(view) => {
                    assert!(view.tokens() <= budget);
                    assert_paired(&view);
                    if cut == Cut::Tight {
                        assert!(view.history_len() >= last_len, "a larger budget keeps more");
                        last_len = view.history_len();
                    }
                }
                Err(_) => assert!(
                    budget < u64::from(index.tokens(0)),
                    "only the system message"
                ),
            }
        }
        assert_eq!(
            index
                .view(&history, &ContextWindow::tokens(total).with_cut(cut))
                .unwrap()
                .history_len(),
            history.len() - 1,
            "the whole history fits its own size"
        );
        for keep in 1..=history.len() + 1 {
            let view = index
                .view(&history, &ContextWindow::messages(keep).with_cut(cut))
                .unwrap();
            assert!(view.len() <= keep);
            assert_paired(&view);
        }
    }
}

fn user(text: &str) -> Message {
    Message::text_message(text, Role::User)
}

fn calls(ids: &[&str]) -> Message {
    Message::text_message("", Role::Assistant).with_tool_calls(
        ids.iter()
            .map(|id| ToolCall::new(*id, "lookup", json!({"id": id})))
            .collect(),
    )
}

#[test]
fn pending_calls_at_the_end_are_kept_with_the_results_that_exist() {
    let history = vec![
        user("compare a and b"),
        calls(&["a", "b"]),
        Message::tool_result("a", "A"),
    ];
    let mut index = ContextIndex::default();
    let view = index.view(&history, &ContextWindow::messages(1)).unwrap();
    assert!(view.is_empty(), "the result alone would be an orphan");
    let view = index.view(&history, &ContextWindow::messages(2)).unwrap();
    assert_eq!(
        view.ranges(),
        [1..3],
        "the calls with the one result there is"
    );
    let view = index.view(&history, &ContextWindow::messages(3)).unwrap();
    assert_eq!(view.ranges(), [0..3]);
}

#[test]
fn orphan_tool_messages_are_left_out() {
    let history = vec![
        Message::tool_result("nobody", "stray"), // answers no call
        user("hi"),
        calls(&["x"]),
        Message::tool_result("x", "X"),
        Message::tool_result("y", "Y"), // a call id never made
        Message::text_message("done", Role::Assistant),
        Message::text_message("positional result, no call before it", Role::Tool),
    ];
    let mut index = ContextIndex::default();
    let view = index.view(&history, &ContextWindow::turns(10)).unwrap();
    assert_eq!(view.ranges(), [1..4, 5..6]);
    assert!(index.is_orphan(0) && index.is_orphan(4) && index.is_orphan(6));
    assert_eq!(view.len(), 4);
}

#[test]
fn a_tool_message_without_result_blocks_belongs_to_its_run() {
    // AgentFlow's notion of a tool sequence: the tool messages right after the call.
    let history = vec![
        user("weather?"),
        calls(&["w"]),
        Message::text_message("Sunny", Role::Tool),
        Message::text_message("It is sunny.", Role::Assistant),
    ];
    let mut index = ContextIndex::default();
    let view = index.view(&history, &ContextWindow::messages(2)).unwrap();
    assert_eq!(view.ranges(), [3..4], "the run is not split from its call");
    let view = index.view(&history, &ContextWindow::messages(3)).unwrap();
    assert_eq!(view.ranges(), [1..4]);
}

#[test]
fn only_leading_system_messages_are_pinned() {
    let history = vec![
        Message::text_message("rules", Role::System),
        Message::text_message("more rules", Role::System),
        user("one"),
        Message::text_message("mid-conversation note", Role::System),
        user("two"),
    ];
    let mut index = ContextIndex::default();
    let view = index.view(&history, &ContextWindow::messages(3)).unwrap();
    assert_eq!(view.system().len(), 2);
    assert_eq!(view.ranges(), [4..5]);
    let err = index
        .view(&history, &ContextWindow::messages(1))
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "the context budget of 1 messages cannot hold the leading system messages (2 messages, 9 tokens)"
    );
}

#[test]
fn a_budget_that_holds_nothing_gives_an_empty_view() {
    let history = vec![user("hello there")];
    let mut index = ContextIndex::default();
    for window in [
        ContextWindow::tokens(0),
        ContextWindow::messages(0),
        ContextWindow::turns(0),
    ] {
        let view = index.view(&history, &window).unwrap();
        assert!(view.is_empty(), "{window:?}");
        assert_eq!(view.cut(), 1);
        assert_eq!(view.messages().count(), 0);
    }
    let view = index.view(&[], &ContextWindow::tokens(10)).unwrap();
    assert!(view.is_empty());
}

#[test]
fn turns_are_kept_whole() {
    let mut history = Vec::new();
    for i in 0..5 {
        history.push(user(&format!("q{i}")));
        history.push(calls(&[&format!("c{i}")]));
        history.push(Message::tool_result(format!("c{i}"), "r"));
        history.push(Message::text_message(format!("a{i}"), Role::Assistant));
    }
    let mut index = ContextIndex::default();
    let view = index.view(&history, &ContextWindow::turns(2)).unwrap();
    assert_eq!(view.ranges(), [12..20]);
    // Seven messages: not two whole turns; one turn and nothing of the turn before.
    let view = index.view(&history, &ContextWindow::messages(7)).unwrap();
    assert_eq!(view.ranges(), [16..20]);
    let view = index
        .view(&history, &ContextWindow::messages(7).with_cut(Cut::Tight))
        .unwrap();
    assert_eq!(
        view.ranges(),
        [13..20],
        "the tight cut starts mid-turn, at a safe place"
    );
    // A turn budget starts at a turn under every cut: not with the replies of the turn before.
    for cut in [Cut::Tight, Cut::Turns, Cut::Chunked { parts: 4 }] {
        let view = index
            .view(&history, &ContextWindow::turns(1).with_cut(cut))
            .unwrap();
        assert_eq!(view.ranges(), [16..20], "{cut:?}");
    }
}

#[test]
fn a_replaced_or_shortened_history_is_reindexed() {
    let long: Vec<Message> = (0..10)
        .map(|i| user(&format!("message number {i}")).with_id(i))
        .collect();
    let mut index = ContextIndex::default();
    index.view(&long, &ContextWindow::turns(3)).unwrap();
    assert_eq!(index.len(), 10);
    let short = vec![user("a new history").with_id("n1"), calls(&["z"])];
    let view = index.view(&short, &ContextWindow::turns(3)).unwrap();
    assert_eq!(index.len(), 2);
    assert_eq!(view.ranges(), [0..2]);
    // Same first message, but the last indexed one changed: re-indexed too.
    let mut edited = long.clone();
    edited[9] = user("replaced").with_id("other");
    let view = index.view(&edited, &ContextWindow::turns(1)).unwrap();
    assert_eq!(index.tokens(9), index.counter().count_message(&edited[9]));
    assert_eq!(view.ranges(), [9..10]);
}
