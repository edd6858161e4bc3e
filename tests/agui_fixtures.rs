//! Folds every event-stream fixture of `examples/data/` and checks the resulting chat state:
//! against the official TypeScript client's result (`NAME.expected.json`), and in detail.
#![cfg(feature = "ag-ui")]

use agentstate::agui::{
    AguiMessage, ApplyOutcome, ChatError, ChatState, Event, Phase, StreamStatus, Timeline,
};
use serde_json::{json, Value};

fn data(name: &str) -> String {
    let path = format!("{}/examples/data/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {path}: {e}"))
}

fn events(name: &str) -> Vec<Event> {
    Event::parse_array(&data(&format!("{name}.json"))).expect("fixture parses")
}

fn expected(name: &str) -> Value {
    serde_json::from_str(&data(&format!("{name}.expected.json"))).expect("expectation parses")
}

fn fold(name: &str) -> ChatState {
    fold_checking_outcomes(name)
}

/// `value` with every integral float written as an integer, as JavaScript (whose numbers are
/// all doubles) writes it: the official client prints `2.0` as `2`, the fold keeps `2.0`.
fn js_numbers(value: &Value) -> Value {
    match value {
        Value::Number(n) => match n.as_f64() {
            Some(f) if n.is_f64() && f.fract() == 0.0 && f.abs() < 9.0e15 => json!(f as i64),
            _ => value.clone(),
        },
        Value::Array(items) => Value::Array(items.iter().map(js_numbers).collect()),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), js_numbers(v)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// The message list matches the official client's after the same events, exactly (numbers
/// written as the client writes them), and the shared state too, numbers by value.
fn assert_matches_official_client(name: &str, chat: &ChatState) {
    let expected = expected(name);
    assert_eq!(
        serde_json::to_value(chat.to_agui_messages()).unwrap(),
        expected["messages"],
        "{name}: messages differ from the official client's"
    );
    assert_eq!(
        js_numbers(chat.agent_state()),
        expected["state"],
        "{name}: shared state differs from the official client's"
    );
}

/// Folds a fixture, checking that exactly the events its expectation lists under `ignored`
/// (those the official client refuses) are ignored, each with its index.
fn fold_checking_outcomes(name: &str) -> ChatState {
    let ignored: Vec<usize> =
        serde_json::from_value(expected(name)["ignored"].clone()).unwrap_or_default();
    let mut chat = ChatState::new();
    for (i, event) in events(name).iter().enumerate() {
        match chat.apply(event) {
            ApplyOutcome::Ignored(error) => {
                assert!(
                    ignored.contains(&i),
                    "{name}: event {i} was ignored: {error}"
                );
                assert_eq!(error.event_index, i);
            }
            other => assert!(
                !ignored.contains(&i),
                "{name}: event {i} was not ignored: {other:?}"
            ),
        }
    }
    assert_matches_official_client(name, &chat);
    chat
}

fn protocol_errors(chat: &ChatState) -> Vec<String> {
    chat.errors()
        .iter()
        .filter_map(|e| match e {
            ChatError::Protocol(p) => Some(p.to_string()),
            _ => None,
        })
        .collect()
}

#[test]
fn text_streams_into_one_committed_message() {
    let chat = fold("text");
    assert_matches_official_client("text", &chat);
    assert!(chat.errors().is_empty(), "{:?}", chat.errors());
    assert_eq!(chat.phase(), &Phase::Idle);
    assert_eq!(chat.committed_messages().count(), 3);
    assert_eq!(chat.run().unwrap().result, Some(json!({"haikus": 1})));

    // Mid-stream: the partial message is visible and not committed; the step shows in the phase.
    let timeline = Timeline::from_events(ChatState::new(), events("text"));
    let mid = timeline.state_at(5); // after the second CONTENT
    assert_eq!(mid.phase(), &Phase::StepRunning("compose".into()));
    let streaming: Vec<_> = mid.streaming_messages().collect();
    assert_eq!(streaming.len(), 1);
    assert_eq!(streaming[0].text(), "Borrowed, never lost\n");
    assert_eq!(
        mid.committed_messages().count(),
        1,
        "only the input message"
    );
    assert_eq!(
        timeline.state_at(9).phase(),
        &Phase::Running,
        "step finished"
    );
}

#[test]
fn tool_calls_get_their_arguments_and_results() {
    let chat = fold("tool_calls");
    assert_matches_official_client("tool_calls", &chat);
    assert!(chat.errors().is_empty(), "{:?}", chat.errors());

    let oslo = chat.tool_call("call-oslo").unwrap();
    assert_eq!(oslo.message.id(), "a1");
    assert_eq!(oslo.arguments(), Some(json!({"city": "Oslo"})));
    assert_eq!(oslo.status, StreamStatus::Complete);
    assert_eq!(oslo.result.unwrap().content.text(), r#"{"temp_c": -3}"#);

    let alert = chat.tool_call("call-alert").unwrap();
    assert_eq!(
        alert.message.id(),
        "call-alert",
        "no parent: named after the call"
    );
    assert_eq!(alert.result.unwrap().id, "r-alert");

    let order: Vec<&str> = chat.messages().iter().map(|m| m.id()).collect();
    assert_eq!(
        order,
        [
            "a1",
            "r-lima",
            "r-oslo",
            "a2",
            "call-alert",
            "r-alert",
            "r-orphan"
        ]
    );
    assert_eq!(chat.tool_calls().count(), 3);

    // While the first call's arguments stream, they are visible and the call is streaming.
    let timeline = Timeline::from_events(ChatState::new(), events("tool_calls"));
    let mid = timeline.state_at(6);
    let call = mid.tool_call("call-oslo").unwrap();
    assert_eq!(call.call.function.arguments, r#"{"city": "#);
    assert_eq!(call.status, StreamStatus::Streaming);
    assert_eq!(call.arguments(), None, "incomplete JSON");
    assert!(call.result.is_none());
}

#[test]
fn snapshots_replace_and_deltas_patch_the_shared_state() {
    let chat = fold("state");
    assert_matches_official_client("state", &chat);
    assert!(chat.errors().is_empty(), "{:?}", chat.errors());
    let timeline = Timeline::from_events(ChatState::new(), events("state"));
    assert_eq!(
        timeline.state_at(6).agent_state(),
        &json!({
            "todos": [{"title": "walk dog", "done": false}, {"title": "buy milk", "done": true}],
            "owner": {"name": "Ada"}, "count": 2, "lastEditor": "Ada"
        })
    );
    assert_eq!(
        timeline.state_at(8).agent_state(),
        &json!({"todos": [{"title": "write report", "done": false}], "count": 1}),
        "the second snapshot replaced everything"
    );
}

#[test]
fn failing_deltas_leave_the_state_unchanged_and_surface_a_conflict() {
    let chat = fold("state_conflict");
    assert_matches_official_client("state_conflict", &chat);
    let conflicts: Vec<_> = chat
        .errors()
        .iter()
        .map(|e| match e {
            ChatError::StateConflict(c) => c,
            other => panic!("expected only conflicts, got {other}"),
        })
        .collect();
    assert_eq!(conflicts.len(), 4);
    let before = json!({"cart": {"items": ["apple"], "total": 1}});
    let raw = events("state_conflict");
    for (conflict, event) in conflicts.iter().zip(&raw[2..6]) {
        assert_eq!(
            conflict.state, before,
            "each failed against the untouched state"
        );
        let Event::StateDelta(delta) = event else {
            panic!("fixture order")
        };
        assert_eq!(conflict.patch, delta.delta, "the incoming patch is carried");
        assert_eq!(conflict.activity_id, None);
    }
    assert_eq!(conflicts[0].operation, Some(2));
    assert_eq!(
        conflicts[0].to_string(),
        "event 2: STATE_DELTA could not be applied, so the shared state was left unchanged: \
         operation 2 (test at `/cart/total`) failed: value did not match"
    );
    assert!(
        conflicts[1].reason.contains("remove at `/cart/coupon`"),
        "{}",
        conflicts[1].reason
    );
    assert!(
        conflicts[2]
            .reason
            .starts_with("operation 0 is not a JSON Patch operation")
            && conflicts[2].reason.contains("frobnicate"),
        "{}",
        conflicts[2].reason
    );
    assert_eq!(conflicts[3].operation, Some(1));
    // The states between: unchanged by every failing delta, then patched by the good one.
    let timeline = Timeline::from_events(ChatState::new(), raw);
    for step in 2..=6 {
        assert_eq!(
            timeline.state_at(step).agent_state(),
            &before,
            "after event {step}"
        );
    }
    assert_eq!(
        chat.agent_state(),
        &json!({"cart": {"items": ["apple", "plum"], "total": 2}})
    );
    assert_eq!(
        chat.phase(),
        &Phase::Idle,
        "a conflict does not end the run"
    );
}

#[test]
fn messages_snapshot_merges_like_the_official_client() {
    let chat = fold("messages_snapshot");
    assert_matches_official_client("messages_snapshot", &chat);
    assert!(chat.errors().is_empty(), "{:?}", chat.errors());
    // The snapshot's tool message answers the snapshot's call.
    let call = chat.tool_call("c1").unwrap();
    assert_eq!(call.result.unwrap().id, "t1");
    assert!(
        chat.message("a-local").is_none(),
        "not in the snapshot: dropped"
    );
    let AguiMessage::Activity(plan) = chat.message("plan-1").unwrap().message() else {
        panic!("plan-1 is an activity")
    };
    assert_eq!(plan.content, json!({"steps": ["search", "summarize"]}));
}

#[test]
fn run_error_is_typed_and_interrupts_open_streams() {
    let chat = fold("run_error");
    assert_matches_official_client("run_error", &chat);
    assert_eq!(chat.phase(), &Phase::Error);
    let Some(ChatError::Run(error)) = chat.error() else {
        panic!("expected a run error, got {:?}", chat.error())
    };
    assert_eq!(error.message, "model provider timed out");
    assert_eq!(error.code.as_deref(), Some("PROVIDER_TIMEOUT"));
    assert_eq!(
        error.to_string(),
        "the run failed: model provider timed out (code `PROVIDER_TIMEOUT`)"
    );
    let a1 = chat.message("a1").unwrap();
    assert_eq!(a1.status(), StreamStatus::Interrupted);
    assert_eq!(a1.text(), "I'll start by");
    assert_eq!(
        chat.tool_call("c1").unwrap().status,
        StreamStatus::Interrupted
    );
    assert_eq!(chat.streaming_messages().count(), 0);

    // Only RUN_STARTED may follow; a new run clears the current error.
    let mut chat = chat;
    chat.apply(&Event::text_content("a1", " more"));
    assert!(matches!(chat.error(), Some(ChatError::Protocol(_))));
    assert_eq!(chat.message("a1").unwrap().text(), "I'll start by");
    chat.apply(&Event::run_started("thread-1", "run-7"));
    assert_eq!(chat.phase(), &Phase::Running);
    assert!(chat.error().is_none());
    assert_eq!(chat.errors().len(), 2, "the history keeps both");
}

#[test]
fn chunks_expand_to_start_content_end() {
    let chat = fold("chunks");
    assert_matches_official_client("chunks", &chat);
    assert!(chat.errors().is_empty(), "{:?}", chat.errors());
    assert!(chat.messages().iter().all(|m| !m.is_streaming()));

    let timeline = Timeline::from_events(ChatState::new(), events("chunks"));
    // After the continuation chunk without an id, a1 is still streaming.
    let a1 = timeline.state_at(3).message("a1").unwrap().clone();
    assert_eq!((&*a1.text(), a1.is_streaming()), ("Hello, world", true));
    // The chunk for a2 closed a1.
    assert!(!timeline.state_at(5).message("a1").unwrap().is_streaming());
    // RAW did not close the tool chunk c2; the state snapshot did.
    let after_raw = timeline.state_at(9);
    assert_eq!(
        after_raw.tool_call("c2").unwrap().status,
        StreamStatus::Streaming
    );
    assert_eq!(
        timeline.state_at(11).tool_call("c2").unwrap().status,
        StreamStatus::Complete
    );
    let user = chat.message("u1").unwrap();
    assert_eq!(user.message().role().as_str(), "user");
}

#[test]
fn ordering_violations_are_reported_and_ignored() {
    let all = events("ordering");
    let expected = expected("ordering");
    let ignored: Vec<usize> = serde_json::from_value(expected["ignored"].clone()).unwrap();

    let mut chat = ChatState::new();
    for (i, event) in all.iter().enumerate() {
        let errors_before = protocol_errors(&chat).len();
        let outcome = chat.apply(event);
        let reported = protocol_errors(&chat).len() > errors_before;
        assert_eq!(
            reported,
            ignored.contains(&i),
            "event {i} ({})",
            event.event_type()
        );
        // `apply` says so too, with the event's index.
        match outcome {
            ApplyOutcome::Ignored(error) => {
                assert!(ignored.contains(&i), "event {i} was ignored: {error}");
                assert_eq!(error.event_index, i);
            }
            ApplyOutcome::Applied => assert!(!ignored.contains(&i), "event {i} was applied"),
            other => panic!("event {i}: {other:?}"),
        }
    }
    assert_matches_official_client("ordering", &chat);

    // Ignoring is exact: the same state as folding only the valid events (errors aside).
    let valid = all
        .iter()
        .enumerate()
        .filter(|(i, _)| !ignored.contains(i))
        .fold(ChatState::new(), |s, (_, e)| agentstate::agui::fold(s, e));
    assert!(valid
        .errors()
        .iter()
        .all(|e| matches!(e, ChatError::Run(_))));
    assert_eq!(chat.to_agui_messages(), valid.to_agui_messages());
    assert_eq!(chat.agent_state(), valid.agent_state());
    assert_eq!(chat.phase(), valid.phase());

    let messages = protocol_errors(&chat);
    let expected_messages = [
        "event 0: TEXT_MESSAGE_CONTENT was ignored: no run has started; the first event must be RUN_STARTED",
        "event 2: RUN_STARTED was ignored: a run is already active; it must end with RUN_FINISHED or RUN_ERROR first",
        "event 3: TEXT_MESSAGE_CONTENT was ignored: no text message `a1` is open; it needs a TEXT_MESSAGE_START first",
        "event 5: TEXT_MESSAGE_START was ignored: text message `a1` is already open; it must be closed with TEXT_MESSAGE_END first",
        "event 7: RUN_FINISHED was ignored: it arrived while text message `a1` is still open",
        "event 9: TEXT_MESSAGE_END was ignored: no text message `a1` is open; it needs a TEXT_MESSAGE_START first",
        "event 10: TOOL_CALL_ARGS was ignored: no tool call `c9` is open; it needs a TOOL_CALL_START first",
        "event 11: STEP_FINISHED was ignored: step `ghost` was never started",
        "event 12: TEXT_MESSAGE_CHUNK was ignored: the first chunk of a text message needs a messageId",
        "event 13: TOOL_CALL_CHUNK was ignored: the first chunk of tool call `c1` needs a toolCallName",
        "event 16: TEXT_MESSAGE_START was ignored: the run has already finished; a new run must begin with RUN_STARTED",
        "event 18: STATE_SNAPSHOT was ignored: the run already failed with RUN_ERROR; only RUN_STARTED may follow",
    ];
    assert_eq!(messages, expected_messages);
    // The message that was open when RUN_FINISHED was refused is intact.
    assert_eq!(chat.message("a1").unwrap().text(), "Hello");
    assert_eq!(chat.phase(), &Phase::Idle);
}

#[test]
fn event_metadata_is_kept_on_messages_and_tool_calls() {
    let chat = fold_checking_outcomes("metadata");
    let messages = serde_json::to_value(chat.to_agui_messages()).unwrap();
    // START, CONTENT and END merge key by key, the last write winning.
    assert_eq!(
        messages[0]["metadata"],
        json!({"model": "m-1", "trace": "t-2", "usage": {"output_tokens": 7}, "finish": "stop"})
    );
    // A tool call's events go to the call, not to its message.
    assert_eq!(
        messages[0]["toolCalls"][0]["metadata"],
        json!({"cache": "miss", "partial": false, "latency_ms": 12})
    );
    // As the client writes it: the event said 12.0; the fold's own view keeps that spelling.
    let a1 = chat.message("a1").unwrap();
    assert_eq!(
        a1.tool_calls()[0].metadata.as_ref().unwrap()["latency_ms"],
        json!(12.0)
    );
    assert_eq!(messages[1]["metadata"], json!({"source": "met.no"}));
    // Chunks: the opening chunk's metadata, then each continuation's, a metadata-only one too.
    assert_eq!(
        messages[2]["metadata"],
        json!({"chunk": 2, "model": "m-1", "usage": {"output_tokens": 3}})
    );
    assert_eq!(
        messages[2]["toolCalls"][0]["metadata"],
        json!({"chunk": "close"})
    );
    // An activity keeps the metadata of a delta that failed, and across a replacing snapshot.
    assert_eq!(messages[4]["metadata"], json!({"v": 3, "failed": true}));
    // `test` compares numbers by value: 2 passes against 2.0, [1, "x"] against [1.0, "x"].
    assert_eq!(chat.agent_state()["count"], json!(3));
    assert_eq!(chat.agent_state()["tags"], json!([1.0, "x", "y"]));
    let conflicts: Vec<_> = chat
        .errors()
        .iter()
        .filter_map(|e| match e {
            ChatError::StateConflict(c) => Some(c),
            _ => None,
        })
        .collect();
    assert_eq!(conflicts.len(), 2, "{conflicts:?}");
    assert_eq!(
        (conflicts[0].event_index, conflicts[0].operation),
        (13, Some(1)),
        "3.5 is not 3"
    );
    assert_eq!(conflicts[1].activity_id.as_deref(), Some("plan"));
    assert_eq!(conflicts[1].event_index, 24);
}

#[test]
fn subagents_stream_in_their_own_lanes_and_keep_their_attribution() {
    let chat = fold_checking_outcomes("subagents");
    let owner = |id: &str| chat.message(id).unwrap().message().subagent_run_id();
    assert_eq!(
        ["p1", "r1", "w1", "p2", "c1", "res1", "rs1", "act1"].map(owner),
        [
            None,
            Some("s1"),
            Some("s2"),
            None,
            Some("s1"),
            Some("s1"),
            Some("s2"),
            Some("s2")
        ]
    );
    // Two subagents and the parent streamed chunks at once, each into its own message.
    assert_eq!(chat.message("r1").unwrap().text(), "Found three sources");
    assert_eq!(chat.message("w1").unwrap().text(), "Drafting an outline");
    assert_eq!(chat.message("p2").unwrap().text(), "Waiting for both.");
    // The subagent's call stays where it is: reopening it under the parent's message is refused.
    assert_eq!(chat.tool_call("c1").unwrap().message.id(), "c1");
    assert!(chat.tool_call("c2").is_none());
    let refused: Vec<String> = chat
        .errors()
        .iter()
        .filter_map(|e| match e {
            ChatError::Protocol(p) if p.event_index == 20 || p.event_index == 21 => {
                Some(p.to_string())
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        refused,
        [
            "event 20: TOOL_CALL_START was ignored: tool call `c1` belongs to subagent `s1`, but its parent message `p1` belongs to the parent agent; a tool call belongs to the message that carries it",
            "event 21: TOOL_CALL_START was ignored: it is attributed to subagent `s1`, but its parent message `p1` belongs to the parent agent; a tool call belongs to the message that carries it",
        ]
    );
    assert_eq!(chat.phase(), &Phase::Idle);
}

#[test]
fn ignored_events_change_nothing_and_reused_activity_ids_stay_open() {
    let chat = fold_checking_outcomes("corners");
    // The START on an activity's id left the activity alone but opened the id: after the
    // snapshot made it a text (and a reasoning) message, its CONTENT landed.
    assert_eq!(chat.message("x1").unwrap().text(), "Results: three");
    assert_eq!(chat.message("x2").unwrap().text(), "Comparing: two");
    let dropped: Vec<usize> = chat
        .errors()
        .iter()
        .filter_map(|e| match e {
            ChatError::Protocol(p) if p.reason.contains("is an activity message") => {
                Some(p.event_index)
            }
            _ => None,
        })
        .collect();
    assert_eq!(dropped, [2, 4]);
    // The ignored STEP_FINISHED and TEXT_MESSAGE_END did not close the chunk stream, nor did a
    // subagent's event: the id-less chunks continued it.
    assert_eq!(chat.message("a1").unwrap().text(), "Hello!");
    assert!(
        !chat.message("a1").unwrap().is_streaming(),
        "RUN_FINISHED closed it"
    );
}

#[test]
fn every_fixture_round_trips_through_json() {
    for name in [
        "text",
        "tool_calls",
        "state",
        "state_conflict",
        "messages_snapshot",
        "run_error",
        "chunks",
        "ordering",
    ] {
        let raw: Value = serde_json::from_str(&data(&format!("{name}.json"))).unwrap();
        let parsed = events(name);
        assert!(
            parsed.iter().all(|e| !matches!(e, Event::Unknown(_))),
            "{name}"
        );
        assert_eq!(serde_json::to_value(&parsed).unwrap(), raw, "{name}");
    }
}
