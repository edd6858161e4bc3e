//! Summaries as state: recorded through the reducers and the journal, replayable, undoable,
//! bounded; views never send again what a summary covers; the state's JSON stays AgentFlow's.

// Views' kept ranges are compared with arrays of one range.
#![allow(clippy::single_range_in_vec_init)]

mod context_support;

use agentstate::context::{
    ContextError, ContextIndex, ContextWindow, Estimate, SummaryPolicy, SummaryRequest, Threshold,
    TokenCounter,
};
use agentstate::message::{Message, MessageId, Role};
use agentstate::state::{AgentState, AgentStateUpdate};
use agentstate::Journal;
use agentstate::State;
use serde_json::json;

fn state_with(messages: Vec<Message>) -> AgentState {
    let mut state = AgentState::default();
    state
        .merge(AgentStateUpdate::default().context(messages))
        .unwrap();
    state
}

/// A growing conversation summarized whenever a view leaves messages out: every request holds
/// whole tool sequences, every view keeps its budget and sends the summary, the history is never
/// rewritten, and the journal replays to the same state.
#[test]
fn rolling_summaries_over_a_growing_conversation() {
    let conversation = context_support::conversation(150);
    let window = ContextWindow::tokens(3_000);
    let mut journal = Journal::new(AgentState::default());
    let mut index = ContextIndex::default();
    let mut summaries = 0;
    for message in conversation.iter().cloned() {
        let is_call = message.role == Role::Assistant;
        journal
            .merge(AgentStateUpdate::default().context(vec![message]))
            .unwrap();
        if !is_call {
            continue;
        }
        let update = {
            let state = journal.state();
            let view = index.view_state(state, &window).unwrap();
            assert!(view.tokens() <= 3_000);
            if state.context_summary.is_some() {
                assert_eq!(view.summary(), state.context_summary.as_deref());
            }
            let Some(request) = SummaryRequest::new(state, &view) else {
                continue;
            };
            // Whole tool sequences: every result's call is in the request, and every call's
            // results too.
            let calls: Vec<&str> = request
                .messages()
                .iter()
                .flat_map(|m| m.tool_calls().iter().map(|c| c.id()))
                .collect();
            let results: Vec<&str> = request
                .messages()
                .iter()
                .flat_map(|m| m.tool_results().map(|r| r.call_id.as_str()))
                .collect();
            assert!(
                results.iter().all(|r| calls.contains(r)),
                "{results:?} {calls:?}"
            );
            assert!(
                calls.iter().all(|c| results.contains(c)),
                "{calls:?} {results:?}"
            );
            summaries += 1;
            let text = format!(
                "Summary {summaries}: {} messages, the last {}.",
                request.messages().len(),
                request.through()
            );
            request.record(text, &Estimate::default(), 100).unwrap()
        };
        journal.merge(update).unwrap();
        // Right after recording, nothing is left out unsummarized.
        let state = journal.state();
        let view = index.view_state(state, &window).unwrap();
        assert!(view.unsummarized().is_empty());
        let through = state.context_summary_through.as_ref().unwrap();
        let covered = state
            .context
            .iter()
            .position(|m| &m.message_id == through)
            .unwrap();
        assert!(view.history().all(|m| state
            .context
            .iter()
            .position(|x| x.message_id == m.message_id)
            .unwrap()
            > covered));
    }
    assert!(summaries >= 10, "{summaries} summaries");
    let state = journal.state();
    assert_eq!(
        state.context.as_slice(),
        conversation.as_slice(),
        "history untouched"
    );
    let replayed = Journal::replay(AgentState::default(), journal.updates().to_vec()).unwrap();
    assert_eq!(&replayed, state);
}

#[test]
fn a_summary_can_be_undone() {
    let messages: Vec<Message> = (0..40)
        .map(|i| {
            let role = if i % 2 == 0 {
                Role::User
            } else {
                Role::Assistant
            };
            Message::text_message(format!("message {i}"), role).with_id(i)
        })
        .collect();
    let mut state = state_with(messages);
    state
        .merge(
            AgentStateUpdate::default()
                .context_summary(Some("first".into()))
                .context_summary_through(Some(MessageId::from(9))),
        )
        .unwrap();
    let before = state.clone();
    let mut index = ContextIndex::default();
    let window = ContextWindow::messages(11);
    let (record, undo) = {
        let view = index.view_state(&state, &window).unwrap();
        assert_eq!(view.summary(), Some("first"));
        assert_eq!(
            view.unsummarized(),
            10..30,
            "the summary and 10 newest messages fit"
        );
        let request = SummaryRequest::new(&state, &view).unwrap();
        assert_eq!(request.previous(), Some("first"));
        assert_eq!(request.through(), &MessageId::from(29));
        (
            request.record("second", &Estimate::default(), 10).unwrap(),
            request.undo(),
        )
    };
    state.merge(record).unwrap();
    assert_eq!(state.context_summary.as_deref(), Some("second"));
    assert_eq!(state.context_summary_through, Some(MessageId::from(29)));
    state.merge(undo).unwrap();
    assert_eq!(state, before);
}

#[test]
fn a_summary_over_its_limit_is_refused() {
    let state = state_with(
        (0..10)
            .map(|i| Message::text_message(format!("m{i}"), Role::User).with_id(i))
            .collect(),
    );
    let mut index = ContextIndex::default();
    let view = index
        .view_state(&state, &ContextWindow::messages(3))
        .unwrap();
    let request = SummaryRequest::new(&state, &view).unwrap();
    let err = request
        .record("word ".repeat(50), &Estimate::default(), 20)
        .unwrap_err();
    assert_eq!(
        err,
        ContextError::SummaryTooLong {
            tokens: 50,
            max_tokens: 20
        }
    );
    assert_eq!(
        err.to_string(),
        "the summary for `context_summary` has 50 tokens, over its limit of 20"
    );
}

#[test]
fn covered_messages_are_never_sent_again() {
    let messages: Vec<Message> = (0..10)
        .map(|i| Message::text_message(format!("m{i}"), Role::User).with_id(i))
        .collect();
    let mut state = state_with(messages);
    state.context_summary = Some("m0 to m5".into());
    state.context_summary_through = Some(MessageId::from(5));
    let mut index = ContextIndex::default();
    // A budget that would hold everything: the covered messages still stay out.
    let view = index
        .view_state(&state, &ContextWindow::messages(100))
        .unwrap();
    assert_eq!(view.summary(), Some("m0 to m5"));
    assert_eq!(view.ranges(), [6..10]);
    // A marker that is not in the history (a state written by AgentFlow, or a replaced history):
    // the summary is sent only when the history is cut.
    state.context_summary_through = Some(MessageId::from("gone"));
    let view = index
        .view_state(&state, &ContextWindow::messages(100))
        .unwrap();
    assert_eq!((view.summary(), view.history_len()), (None, 10));
    let view = index
        .view_state(&state, &ContextWindow::messages(4))
        .unwrap();
    assert_eq!(
        (view.summary(), view.ranges()),
        (Some("m0 to m5"), &[7..10][..])
    );
    // The summary itself over the budget is an error, not a broken view.
    let err = index
        .view_state(&state, &ContextWindow::messages(0))
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "the context budget of 0 messages cannot hold the summary (1 message, 8 tokens)"
    );
}

#[test]
fn the_marker_stays_out_of_agentflow_json_until_set() {
    let state = AgentState::default();
    let value = serde_json::to_value(&state).unwrap();
    assert_eq!(
        value.as_object().unwrap().keys().collect::<Vec<_>>(),
        ["context", "context_summary", "execution_meta"]
    );
    let with_marker = AgentState {
        context_summary: Some("s".into()),
        context_summary_through: Some(MessageId::from("m7")),
        ..AgentState::default()
    };
    let value = serde_json::to_value(&with_marker).unwrap();
    assert_eq!(value["context_summary_through"], json!("m7"));
    let back: AgentState = serde_json::from_value(value).unwrap();
    assert_eq!(back, with_marker);
    let agentflow: AgentState =
        serde_json::from_value(json!({"context": [], "context_summary": "s"})).unwrap();
    assert_eq!(agentflow.context_summary_through, None);
}

/// A tool result that arrives after the summary's coverage, for a call the summary covers: it
/// cannot be sent (its call is not), and it must not push the cut past the uncovered messages
/// before it.
#[test]
fn a_late_result_of_a_summarized_call_does_not_hide_uncovered_messages() {
    let messages = vec![
        Message::text_message("u0", Role::User).with_id("u0"),
        Message::text_message("", Role::Assistant)
            .with_tool_calls(vec![agentstate::message::ToolCall::new(
                "c1",
                "lookup",
                json!({}),
            )])
            .with_id("a0"),
        Message::text_message("u1", Role::User).with_id("u1"),
        Message::text_message("a1", Role::Assistant).with_id("a1"),
        Message::tool_result("c1", "late").with_id("t1"),
        Message::text_message("u2", Role::User).with_id("u2"),
        Message::text_message("a2", Role::Assistant).with_id("a2"),
    ];
    let mut state = state_with(messages);
    state.context_summary = Some("u0 asked; a lookup was started.".into());
    state.context_summary_through = Some(MessageId::from("u1"));
    let mut index = ContextIndex::default();
    let view = index
        .view_state(&state, &ContextWindow::messages(100))
        .unwrap();
    assert_eq!(view.ranges(), [3..4, 5..7]);
    assert!(view.unsummarized().is_empty());
    let sent: Vec<String> = view.messages().iter().map(|m| m.text()).collect();
    assert_eq!(sent, ["u0 asked; a lookup was started.", "a1", "u2", "a2"]);
    let counter = Estimate::default();
    let expected: u64 = view
        .messages()
        .iter()
        .map(|m| u64::from(counter.count_message(m)))
        .sum();
    assert_eq!(view.estimated_tokens(), expected);
}

/// A summary the window can never hold is refused when recorded, not by every later view.
#[test]
fn a_summary_larger_than_the_window_is_refused() {
    let mut messages = vec![Message::text_message("Be brief.", Role::System)];
    messages.extend((0..30).map(|i| Message::text_message(format!("m{i}"), Role::User).with_id(i)));
    let state = state_with(messages);
    let window = ContextWindow::tokens(40);
    let mut index = ContextIndex::default();
    let view = index.view_state(&state, &window).unwrap();
    let request = SummaryRequest::new(&state, &view).unwrap();
    // System message 6 tokens, the summary's message 3: 31 tokens of text at most.
    let err = request
        .record("word ".repeat(32), &Estimate::default(), 1_000)
        .unwrap_err();
    assert_eq!(
        err,
        ContextError::SummaryOverWindow {
            tokens: 32,
            room: 31
        }
    );
    assert_eq!(
        err.to_string(),
        "the summary for `context_summary` has 32 tokens, more than the 31 the context window \
         holds beside the system messages"
    );
    let update = request
        .record("word ".repeat(31), &Estimate::default(), 1_000)
        .unwrap();
    let mut summarized = state.clone();
    summarized.merge(update).unwrap();
    let view = index.view_state(&summarized, &window).unwrap();
    assert_eq!(view.estimated_tokens(), 40, "exactly full: no history fits");
    // A message budget with no room beside the system message refuses any summary.
    let view = index
        .view_state(&state, &ContextWindow::messages(1))
        .unwrap();
    let request = SummaryRequest::new(&state, &view).unwrap();
    let err = request
        .record("s", &Estimate::default(), 1_000)
        .unwrap_err();
    assert_eq!(err, ContextError::SummaryOverWindow { tokens: 1, room: 0 });
}

/// The default policy summarizes at 80% of the window, before the window has to cut (and covers
/// what it cut when one message jumped past it): replayed call by call, asking the policy
/// before each call, no view ever leaves out a message that no summary covers, every view keeps
/// its budget, and after each summary the view holds at most half the window (the summary
/// aside).
#[test]
fn with_the_default_policy_no_message_is_left_out_unsummarized() {
    let conversation = context_support::conversation(120);
    let window = ContextWindow::tokens(3_000);
    let policy = SummaryPolicy::new();
    let mut state = AgentState::default();
    let mut index = ContextIndex::default();
    let mut summaries = 0;
    for message in conversation {
        state
            .merge(AgentStateUpdate::default().context(vec![message]))
            .unwrap();
        // Before each call: summarize if the policy says so, then view.
        if let Some(request) = index.summary_request(&state, &window, &policy).unwrap() {
            summaries += 1;
            let text = format!(
                "Summary {summaries} of {} messages.",
                request.messages().len()
            );
            let update = request.record(text, &Estimate::default(), 200).unwrap();
            state.merge(update).unwrap();
            let view = index.view_state(&state, &window).unwrap();
            let summary = u64::from(Estimate::default().count(view.summary().unwrap()) + 3);
            assert!(
                view.tokens() - summary <= 1_500,
                "half the window after summarizing: {}",
                view.tokens()
            );
        }
        let view = index.view_state(&state, &window).unwrap();
        assert!(
            view.unsummarized().is_empty(),
            "a message left out unsummarized: {:?} of {}",
            view.unsummarized(),
            state.context.len(),
        );
        assert!(view.tokens() <= 3_000);
    }
    assert!(summaries >= 5, "{summaries} summaries");
}

#[test]
fn triggers_and_keep_amounts() {
    let messages: Vec<Message> = (0..40)
        .map(|i| {
            let role = if i % 2 == 0 {
                Role::User
            } else {
                Role::Assistant
            };
            Message::text_message(format!("message number {i}"), role).with_id(i)
        })
        .collect();
    let state = state_with(messages);
    let mut index = ContextIndex::default();
    let total = index
        .view_state(&state, &ContextWindow::messages(100))
        .unwrap()
        .tokens();
    let window = ContextWindow::tokens(1_000);
    // Tokens: triggered at the history's size, not one token more.
    let at = |n| {
        SummaryPolicy::new()
            .trigger(Threshold::Tokens(n))
            .keep(Threshold::Messages(2))
    };
    assert!(index
        .summary_request(&state, &window, &at(total))
        .unwrap()
        .is_some());
    assert!(index
        .summary_request(&state, &window, &at(total + 1))
        .unwrap()
        .is_none());
    // Messages, or a fraction of the window: any trigger reached.
    let policy = at(total + 1).or_trigger(Threshold::Messages(40));
    assert!(index
        .summary_request(&state, &window, &policy)
        .unwrap()
        .is_some());
    let fraction = total as f64 / 1_000.0;
    let policy = at(0).trigger(Threshold::Fraction(fraction));
    assert!(index
        .summary_request(&state, &window, &policy)
        .unwrap()
        .is_some());
    let policy = at(0).trigger(Threshold::Fraction(fraction + 0.01));
    assert!(index
        .summary_request(&state, &window, &policy)
        .unwrap()
        .is_none());
    // Keep: messages, tokens, a fraction; the kept part starts at a turn.
    let mut keep = |amount| {
        let policy = SummaryPolicy::new()
            .trigger(Threshold::Messages(1))
            .keep(amount);
        let request = index
            .summary_request(&state, &window, &policy)
            .unwrap()
            .unwrap();
        40 - request.messages().len()
    };
    assert_eq!(keep(Threshold::Messages(10)), 10);
    assert_eq!(keep(Threshold::Messages(9)), 8, "from a turn");
    let per_message = total / 40;
    assert_eq!(keep(Threshold::Tokens(per_message * 6)), 6);
    assert_eq!(
        keep(Threshold::Fraction(per_message as f64 * 4.0 / 1_000.0)),
        4
    );
    // Whatever keep says, what the window cuts is summarized too.
    let small = ContextWindow::messages(6);
    let policy = SummaryPolicy::new()
        .trigger(Threshold::Messages(1))
        .keep(Threshold::Messages(30));
    let request = index
        .summary_request(&state, &small, &policy)
        .unwrap()
        .unwrap();
    assert_eq!(request.messages().len(), 34);
    // A fraction that cannot be applied.
    for (policy, window) in [
        (
            SummaryPolicy::new().trigger(Threshold::Fraction(1.5)),
            window,
        ),
        (SummaryPolicy::new().keep(Threshold::Fraction(0.0)), window),
        (SummaryPolicy::new(), ContextWindow::new(Default::default())),
    ] {
        let err = index.summary_request(&state, &window, &policy).unwrap_err();
        assert!(
            matches!(err, ContextError::InvalidSummaryPolicy { .. }),
            "{err}"
        );
    }
}
