//! Views on concrete histories: the failures the issue measured in LangChain's `trim_messages`
//! and AgentFlow's `SummaryContextManager` (a view starting with an orphaned tool result, or
//! ending on calls without their results), swept over every budget; pending calls, orphans in
//! the middle, system messages in the middle, empty views, a replaced history.

// Views' kept ranges are compared with arrays of one range.
#![allow(clippy::single_range_in_vec_init)]

mod context_support;

use agentstate::context::{
    ContextIndex, ContextView, ContextWindow, Cut, TokenCounter, Unanswered,
};
use agentstate::message::{Message, Role, ToolCall};
use agentstate::providers::{Issue, Report};
use serde_json::json;
use std::collections::HashSet;

/// No kept tool result without its call, no kept call without its results.
fn assert_paired(view: &ContextView<'_>) {
    let kept: Vec<&Message> = view.history().collect();
    let (calls, results) = calls_and_results(&kept);
    assert!(results.is_subset(&calls), "a result without its call");
    assert!(calls.is_subset(&results), "a call without its results");
    assert_ne!(kept.first().map(|m| m.role), Some(Role::Tool));
}

/// The call ids of `messages`' tool calls, and those their results answer.
fn calls_and_results<'m>(messages: &[&'m Message]) -> (HashSet<&'m str>, HashSet<&'m str>) {
    let calls = messages
        .iter()
        .flat_map(|m| m.tool_calls().iter().map(|c| c.id()))
        .collect();
    let results = messages
        .iter()
        .flat_map(|m| m.tool_results().map(|r| r.call_id.as_str()))
        .collect();
    (calls, results)
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

/// System messages are instructions: every one is sent first and counted first, wherever it is
/// in the history, and a cut never drops one.
#[test]
fn every_system_message_is_pinned() {
    let history = vec![
        Message::text_message("rules", Role::System),
        Message::text_message("more rules", Role::System),
        user("one"),
        Message::text_message("mid-conversation note", Role::System),
        user("two"),
        user("three"),
    ];
    let mut index = ContextIndex::default();
    let view = index.view(&history, &ContextWindow::messages(4)).unwrap();
    let system: Vec<String> = view.system().iter().map(|m| m.text()).collect();
    assert_eq!(system, ["rules", "more rules", "mid-conversation note"]);
    assert_eq!(view.ranges(), [5..6]);
    let sent: Vec<String> = view.messages().iter().map(|m| m.text()).collect();
    assert_eq!(
        sent,
        ["rules", "more rules", "mid-conversation note", "three"]
    );
    // Kept history does not hold it twice.
    let view = index.view(&history, &ContextWindow::messages(10)).unwrap();
    assert_eq!(view.ranges(), [2..3, 4..6]);
    assert_eq!(view.messages().len(), 6);
    assert_eq!(
        view.estimated_tokens(),
        history
            .iter()
            .map(|m| u64::from(index.counter().count_message(m)))
            .sum::<u64>()
    );
    let err = index
        .view(&history, &ContextWindow::messages(2))
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "the context budget of 2 messages cannot hold the system messages (3 messages, 17 tokens)"
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
        assert!(view.messages().is_empty());
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

fn answer(text: &str) -> Message {
    Message::text_message(text, Role::Assistant)
}

/// What a view sends, as (role, call ids, result ids, text).
fn sent(view: &ContextView<'_>) -> Vec<(Role, Vec<String>, Vec<String>, String)> {
    view.messages()
        .iter()
        .map(|m| {
            let calls = m.tool_calls().iter().map(|c| c.id().to_owned()).collect();
            let results = m.tool_results().map(|r| r.call_id.clone()).collect();
            (m.role, calls, results, m.text())
        })
        .collect()
}

/// What OpenAI and Anthropic reject: an assistant message with tool calls not followed right
/// away by one result per call, a result not right after its call, a result given twice. The
/// provider converters report every such pair; the views' messages must give them none.
fn assert_providers_accept(view: &ContextView<'_>) {
    let messages: Vec<Message> = view
        .messages()
        .into_iter()
        .map(|m| m.into_owned())
        .collect();
    let pairing = |report: &Report| {
        report
            .notes()
            .iter()
            .filter(|n| {
                matches!(
                    n.issue,
                    Issue::UnansweredToolCall { .. }
                        | Issue::UnmatchedToolResult { .. }
                        | Issue::DuplicateToolCallId { .. }
                        | Issue::ToolResultOutOfPlace
                )
            })
            .count()
    };
    let chat = agentstate::providers::to_openai_chat(&messages, None);
    assert_eq!(pairing(&chat.report), 0, "OpenAI: {}", chat.report);
    let anthropic = agentstate::providers::to_anthropic(&messages, None);
    assert_eq!(
        pairing(&anthropic.report),
        0,
        "Anthropic: {}",
        anthropic.report
    );
    // Each assistant message with calls is followed by exactly one result per call.
    for (i, m) in messages.iter().enumerate() {
        let calls: Vec<&str> = m.tool_calls().iter().map(|c| c.id()).collect();
        if calls.is_empty() {
            continue;
        }
        let results: Vec<&str> = messages[i + 1..]
            .iter()
            .take_while(|t| t.role == Role::Tool)
            .flat_map(|t| t.tool_results().map(|r| r.call_id.as_str()))
            .collect();
        assert_eq!(
            results, calls,
            "results right after the calls of message {i}"
        );
    }
}

#[test]
fn unanswered_calls_are_closed_once_the_conversation_moves_on() {
    let history = vec![
        user("book a table"),
        calls(&["c1"]),
        user("never mind"),
        answer("All right."),
    ];
    let mut index = ContextIndex::default();
    let view = index.view(&history, &ContextWindow::messages(10)).unwrap();
    let stub = (
        Role::Tool,
        vec![],
        vec!["c1".to_owned()],
        Unanswered::STUB_TEXT.to_owned(),
    );
    assert_eq!(sent(&view)[2], stub);
    assert_eq!(sent(&view).len(), 5);
    assert_providers_accept(&view);
    // The stub is counted: the estimate is what is sent.
    let sent_tokens: u64 = view
        .messages()
        .iter()
        .map(|m| u64::from(index.counter().count_message(m)))
        .sum();
    assert_eq!(view.estimated_tokens(), sent_tokens);

    // Dropped instead: the call is gone, and the empty assistant message with it.
    let mut index = ContextIndex::default().with_unanswered(Unanswered::DropCalls);
    let view = index.view(&history, &ContextWindow::messages(10)).unwrap();
    let roles: Vec<Role> = sent(&view).into_iter().map(|m| m.0).collect();
    assert_eq!(roles, [Role::User, Role::User, Role::Assistant]);
    assert_providers_accept(&view);

    // Pending: nothing but tool messages after the calls (the tools are running).
    let mut index = ContextIndex::default();
    let pending = vec![
        user("compare a and b"),
        calls(&["a", "b"]),
        Message::tool_result("a", "A"),
    ];
    let view = index.view(&pending, &ContextWindow::messages(10)).unwrap();
    assert_eq!(view.messages().len(), 3, "no stub for a call still running");
    // A later answer closes it: the missing result gets its stub, after the one that came.
    let mut closed = pending.clone();
    closed.push(answer("Only a answered."));
    let view = index.view(&closed, &ContextWindow::messages(10)).unwrap();
    let results: Vec<Vec<String>> = sent(&view).into_iter().map(|m| m.2).collect();
    assert_eq!(results[2..4], [vec!["a".to_owned()], vec!["b".to_owned()]]);
    assert_providers_accept(&view);
}

#[test]
fn a_late_result_is_sent_right_after_its_call() {
    let history = vec![
        user("weather in a and b?"),
        calls(&["a", "b"]),
        Message::tool_result("a", "A"),
        user("hurry up"),
        Message::tool_result("b", "B"),
        answer("a: A, b: B"),
    ];
    let mut index = ContextIndex::default();
    let view = index.view(&history, &ContextWindow::messages(10)).unwrap();
    let texts: Vec<String> = sent(&view).into_iter().map(|m| m.3).collect();
    assert_eq!(
        texts,
        [
            "weather in a and b?",
            "",
            "A",
            "B",
            "hurry up",
            "a: A, b: B"
        ]
    );
    assert_providers_accept(&view);
    let sent_tokens: u64 = view
        .messages()
        .iter()
        .map(|m| u64::from(index.counter().count_message(m)))
        .sum();
    assert_eq!(
        view.estimated_tokens(),
        sent_tokens,
        "no stub counted for b"
    );
}

#[test]
fn a_duplicated_result_is_sent_once() {
    let history = vec![
        user("weather?"),
        calls(&["w"]),
        Message::tool_result("w", "sunny"),
        Message::tool_result("w", "sunny (retried)"),
        answer("Sunny."),
    ];
    let mut index = ContextIndex::default();
    let view = index.view(&history, &ContextWindow::messages(10)).unwrap();
    let texts: Vec<String> = sent(&view).into_iter().map(|m| m.3).collect();
    assert_eq!(texts, ["weather?", "", "sunny", "Sunny."]);
    assert!(index.is_orphan(3));
    assert_providers_accept(&view);
    // One message answering a call twice and another once: the copy sent holds the new one.
    let history = vec![
        user("two lookups"),
        calls(&["x", "y"]),
        Message::tool_result("x", "X"),
        Message::tool_message(vec![
            agentstate::message::ContentBlock::tool_result("x", "X again"),
            agentstate::message::ContentBlock::tool_result("y", "Y"),
        ]),
        answer("X and Y."),
    ];
    let view = index.view(&history, &ContextWindow::messages(10)).unwrap();
    let results: Vec<Vec<String>> = sent(&view).into_iter().map(|m| m.2).collect();
    assert_eq!(results[2..4], [vec!["x".to_owned()], vec!["y".to_owned()]]);
    assert_providers_accept(&view);
}

/// An index reused across turns gives the same view as a new one after a message was edited in
/// place by id (an `upsert_messages` update, a time-travel `update_as`): the issue's fault was a
/// tool result dropped as answering nothing.
#[test]
fn a_message_edited_in_place_is_reindexed() {
    let mut history = vec![user("look these up")];
    for turn in 0..30 {
        history.push(calls(&[&format!("c{turn}")]).with_id(format!("a{turn}")));
        history.push(Message::tool_result(format!("c{turn}"), "found").with_id(format!("t{turn}")));
        history.push(answer(&format!("answer {turn}")).with_id(format!("r{turn}")));
        history.push(user(&format!("question {turn}")));
    }
    // An assistant answer is stored first, then a tool result answering a call it did not make yet.
    history.push(answer("Let me check.").with_id("late"));
    history.push(Message::tool_result("late-call", "42").with_id("late-result"));
    let windows = [
        ContextWindow::messages(6),
        ContextWindow::messages(200),
        ContextWindow::tokens(400),
    ];
    let mut index = ContextIndex::default();
    for window in &windows {
        index.view(&history, window).unwrap();
    }
    assert!(index.is_orphan(history.len() - 1));
    let same = |index: &mut ContextIndex, history: &[Message]| {
        for window in &windows {
            let reused = index.view(history, window).unwrap();
            let fresh_index = &mut ContextIndex::default();
            let fresh = fresh_index.view(history, window).unwrap();
            assert_eq!(reused.ranges(), fresh.ranges(), "{window:?}");
            assert_eq!(sent(&reused), sent(&fresh), "{window:?}");
            assert_eq!(reused.tokens(), fresh.tokens(), "{window:?}");
            // Every call sent is answered (by its result or a stub), every result has its call.
            let sent = reused.messages();
            let sent: Vec<&Message> = sent.iter().map(|m| &**m).collect();
            let (calls, results) = calls_and_results(&sent);
            assert_eq!(calls, results, "{window:?}");
        }
    };
    // The upsert: the assistant message gains the call (same id, same position).
    let at = history.len() - 2;
    history[at] =
        history[at]
            .clone()
            .with_tool_calls(vec![ToolCall::new("late-call", "lookup", json!({}))]);
    same(&mut index, &history);
    assert!(
        !index.is_orphan(history.len() - 1),
        "the result is paired now"
    );
    assert!(sent(&index.view(&history, &windows[0]).unwrap())
        .iter()
        .any(|(_, _, results, _)| results == &["late-call".to_string()]));
    // An early message edited: its text grows (outside a small view, inside a large one).
    history[2] =
        Message::tool_result("c0", "found, with a much longer answer than before").with_id("t0");
    same(&mut index, &history);
    // A result edited to answer another call: now a duplicate, left out.
    history[6] = Message::tool_result("c0", "again").with_id("t1");
    same(&mut index, &history);
    // `sync` checks every message.
    history[1] = calls(&["c0", "c-extra"]).with_id("a0");
    index.sync(&history);
    let mut fresh = ContextIndex::default();
    fresh.sync(&history);
    for p in 0..history.len() {
        assert_eq!(index.tokens(p), fresh.tokens(p), "position {p}");
        assert_eq!(index.is_orphan(p), fresh.is_orphan(p), "position {p}");
    }
}
