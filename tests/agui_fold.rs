//! The fold event by event: lifecycle and phase, cancellation, activity and reasoning messages,
//! snapshots while streaming, and the corners where the official client's behaviour is matched.
#![cfg(feature = "ag-ui")]

use agentstate::agui::{
    fold_all, AguiMessage, ApplyOutcome, ChatError, ChatState, Event, Phase, StreamStatus,
};
use serde_json::{json, Value};

fn ev(value: Value) -> Event {
    serde_json::from_value(value).expect("a valid event")
}

fn run(events: &[Event]) -> ChatState {
    let mut all = vec![Event::run_started("t", "r")];
    all.extend_from_slice(events);
    fold_all(ChatState::new(), &all)
}

fn messages_json(chat: &ChatState) -> Value {
    serde_json::to_value(chat.to_agui_messages()).unwrap()
}

#[test]
fn phase_follows_the_lifecycle() {
    let mut chat = ChatState::new();
    assert_eq!(chat.phase(), &Phase::Idle);
    assert!(!chat.is_running());
    chat.apply(&Event::run_started("t", "r"));
    assert_eq!(chat.phase(), &Phase::Running);
    assert!(chat.is_running());
    chat.apply(&ev(json!({"type": "STEP_STARTED", "stepName": "outer"})));
    chat.apply(&ev(json!({"type": "STEP_STARTED", "stepName": "inner"})));
    assert_eq!(chat.phase(), &Phase::StepRunning("inner".into()));
    assert_eq!(chat.phase().to_string(), "running step `inner`");
    assert_eq!(chat.active_steps(), ["outer", "inner"]);
    chat.apply(&ev(json!({"type": "STEP_FINISHED", "stepName": "inner"})));
    assert_eq!(chat.phase(), &Phase::StepRunning("outer".into()));
    chat.apply(&Event::run_finished("t", "r"));
    assert_eq!(
        chat.phase(),
        &Phase::StepRunning("outer".into()),
        "refused: step `outer` is open"
    );
    chat.apply(&ev(json!({"type": "STEP_FINISHED", "stepName": "outer"})));
    chat.apply(&Event::run_finished("t", "r"));
    assert_eq!(chat.phase(), &Phase::Idle);
    assert_eq!(chat.errors().len(), 1);
    assert_eq!(
        chat.errors()[0].to_string(),
        "event 4: RUN_FINISHED was ignored: it arrived while step `outer` is still open"
    );
    let run = chat.run().unwrap();
    assert_eq!((run.thread_id.as_str(), run.run_id.as_str()), ("t", "r"));
}

#[test]
fn a_cancelled_outcome_and_a_client_cancel_both_end_in_cancelled() {
    let chat = run(&[ev(json!({
        "type": "RUN_FINISHED", "threadId": "t", "runId": "r", "outcome": {"type": "cancelled"}
    }))]);
    assert_eq!(chat.phase(), &Phase::Cancelled);

    let mut chat = run(&[
        Event::text_start("m"),
        Event::text_content("m", "partial"),
        Event::tool_start("c", "f", Some("m".into())),
    ]);
    assert!(chat.cancel());
    assert_eq!(chat.phase(), &Phase::Cancelled);
    assert_eq!(
        chat.message("m").unwrap().status(),
        StreamStatus::Interrupted
    );
    assert_eq!(
        chat.tool_call("c").unwrap().status,
        StreamStatus::Interrupted
    );
    assert!(!chat.cancel(), "nothing left to cancel");
    // Late events of the cancelled run are refused; a new run starts cleanly.
    chat.apply(&Event::text_content("m", " more"));
    assert_eq!(chat.message("m").unwrap().text(), "partial");
    assert!(chat
        .error()
        .unwrap()
        .to_string()
        .contains("the run was cancelled"));
    chat.apply(&Event::run_started("t", "r2"));
    assert_eq!(chat.phase(), &Phase::Running);
    assert!(chat.error().is_none());
}

#[test]
fn text_start_streams_into_the_assistant_message_a_tool_call_created() {
    let chat = run(&[
        Event::tool_start("c1", "search", Some("a1".into())),
        Event::tool_end("c1"),
        Event::text_start("a1"),
        Event::text_content("a1", "Found it."),
        Event::text_end("a1"),
    ]);
    assert_eq!(
        messages_json(&chat),
        json!([{"id": "a1", "role": "assistant", "content": "Found it.", "toolCalls": [
            {"id": "c1", "type": "function", "function": {"name": "search", "arguments": ""}}]}])
    );
}

#[test]
fn a_parent_that_is_not_an_assistant_message_gets_a_new_one() {
    let chat = run(&[
        ev(json!({"type": "TEXT_MESSAGE_START", "messageId": "u1", "role": "user"})),
        Event::text_content("u1", "hi"),
        Event::text_end("u1"),
        Event::tool_start("c1", "f", Some("u1".into())),
        Event::tool_end("c1"),
        // A known call started again is reopened and renamed, not duplicated.
        Event::tool_start("c1", "g", None),
        Event::tool_args("c1", "{}"),
        Event::tool_end("c1"),
    ]);
    assert_eq!(
        messages_json(&chat),
        json!([
            {"id": "u1", "role": "user", "content": "hi"},
            {"id": "c1", "role": "assistant", "toolCalls": [
                {"id": "c1", "type": "function", "function": {"name": "g", "arguments": "{}"}}]}
        ])
    );
}

#[test]
fn run_input_messages_are_added_once() {
    let input = json!({"threadId": "t", "runId": "r", "messages": [
        {"id": "u1", "role": "user", "content": "hi"},
        {"id": "u1", "role": "user", "content": "duplicate"}
    ]});
    let mut chat = ChatState::new().with_messages([serde_json::from_value::<AguiMessage>(
        json!({"id": "s0", "role": "system", "content": "be kind"}),
    )
    .unwrap()]);
    chat.apply(&ev(
        json!({"type": "RUN_STARTED", "threadId": "t", "runId": "r", "input": input}),
    ));
    chat.apply(&Event::run_finished("t", "r"));
    chat.apply(&ev(
        json!({"type": "RUN_STARTED", "threadId": "t", "runId": "r2", "input": input}),
    ));
    let ids: Vec<&str> = chat.messages().iter().map(|m| m.id()).collect();
    assert_eq!(ids, ["s0", "u1"]);
    assert_eq!(chat.message("u1").unwrap().text(), "hi");
}

#[test]
fn a_messages_snapshot_during_a_stream_keeps_it_streaming() {
    let mut chat = run(&[Event::text_start("a1"), Event::text_content("a1", "Hel")]);
    chat.apply(&ev(json!({"type": "MESSAGES_SNAPSHOT", "messages": [
        {"id": "u0", "role": "user", "content": "q"},
        {"id": "a1", "role": "assistant", "content": "Hel"}
    ]})));
    assert!(chat.message("a1").unwrap().is_streaming());
    chat.apply(&Event::text_content("a1", "lo"));
    chat.apply(&Event::text_end("a1"));
    assert_eq!(chat.message("a1").unwrap().text(), "Hello");
    assert_eq!(chat.message("a1").unwrap().status(), StreamStatus::Complete);
    // The snapshot kept its own order for the message it added: after the existing ones.
    let ids: Vec<&str> = chat.messages().iter().map(|m| m.id()).collect();
    assert_eq!(ids, ["a1", "u0"]);

    // A streaming message the snapshot drops: its next CONTENT is reported, not applied.
    let mut chat = run(&[Event::text_start("a1"), Event::text_content("a1", "Hel")]);
    chat.apply(&ev(json!({"type": "MESSAGES_SNAPSHOT", "messages": []})));
    chat.apply(&Event::text_content("a1", "lo"));
    assert!(chat.messages().is_empty());
    assert_eq!(
        chat.error().unwrap().to_string(),
        "event 4: TEXT_MESSAGE_CONTENT was ignored: message `a1` is no longer in the conversation (a MESSAGES_SNAPSHOT dropped it)"
    );
}

#[test]
fn messages_snapshot_respects_authoritative_activity_types() {
    let events = [
        ev(
            json!({"type": "ACTIVITY_SNAPSHOT", "messageId": "p", "activityType": "plan", "content": {}}),
        ),
        ev(
            json!({"type": "ACTIVITY_SNAPSHOT", "messageId": "s", "activityType": "search", "content": {}}),
        ),
        ev(json!({"type": "MESSAGES_SNAPSHOT", "messages": [],
            "metadata": {"@ag-ui/client": {"authoritativeActivityTypes": ["plan"]}}})),
    ];
    let chat = run(&events);
    let ids: Vec<&str> = chat.messages().iter().map(|m| m.id()).collect();
    assert_eq!(ids, ["s"], "the snapshot speaks for plans only");

    let all = ev(json!({"type": "MESSAGES_SNAPSHOT", "messages": [],
        "metadata": {"@ag-ui/client": {"authoritativeActivityTypes": null}}}));
    let chat = run(&[events[0].clone(), all]);
    assert!(
        chat.messages().is_empty(),
        "null: authoritative for every type"
    );
}

#[test]
fn activity_messages_snapshot_and_patch() {
    let chat = run(&[
        ev(
            json!({"type": "ACTIVITY_SNAPSHOT", "messageId": "plan", "activityType": "plan", "content": {"steps": ["a"]}}),
        ),
        ev(
            json!({"type": "ACTIVITY_SNAPSHOT", "messageId": "plan", "activityType": "plan", "content": {"steps": ["ignored"]}, "replace": false}),
        ),
        ev(
            json!({"type": "ACTIVITY_DELTA", "messageId": "plan", "activityType": "plan-v2", "patch": [{"op": "add", "path": "/steps/-", "value": "b"}]}),
        ),
        ev(
            json!({"type": "ACTIVITY_DELTA", "messageId": "plan", "activityType": "plan-v3", "patch": [{"op": "remove", "path": "/nope"}]}),
        ),
        ev(
            json!({"type": "ACTIVITY_DELTA", "messageId": "ghost", "activityType": "plan", "patch": []}),
        ),
        Event::text_start("plan"),
    ]);
    assert_eq!(
        messages_json(&chat),
        json!([{"id": "plan", "role": "activity", "activityType": "plan-v2", "content": {"steps": ["a", "b"]}}])
    );
    let errors: Vec<String> = chat.errors().iter().map(ToString::to_string).collect();
    assert_eq!(
        errors,
        [
            "event 4: ACTIVITY_DELTA for activity `plan` could not be applied, so its content was left unchanged: operation 0 (remove at `/nope`) failed: path is invalid",
            "event 5: ACTIVITY_DELTA was ignored: no activity message `ghost` exists; it needs an ACTIVITY_SNAPSHOT first",
            "event 6: TEXT_MESSAGE_START was ignored: message `plan` is an activity message; text and activity messages need distinct ids",
        ]
    );
    let Some(ChatError::StateConflict(conflict)) = chat.errors().first() else {
        panic!("a conflict first")
    };
    assert_eq!(conflict.activity_id.as_deref(), Some("plan"));
    assert_eq!(conflict.state, json!({"steps": ["a", "b"]}));
}

#[test]
fn reasoning_messages_spans_and_encrypted_values() {
    let mut chat = run(&[
        ev(json!({"type": "REASONING_START", "messageId": "span"})),
        ev(json!({"type": "REASONING_MESSAGE_START", "messageId": "r1", "role": "reasoning"})),
        ev(json!({"type": "REASONING_MESSAGE_CONTENT", "messageId": "r1", "delta": "step one"})),
    ]);
    assert!(chat.message("r1").unwrap().is_streaming());
    chat.apply(&ev(
        json!({"type": "REASONING_MESSAGE_END", "messageId": "r1"}),
    ));
    chat.apply(&Event::run_finished("t", "r"));
    assert_eq!(
        chat.error().unwrap().to_string(),
        "event 5: RUN_FINISHED was ignored: it arrived while reasoning span `span` is still open"
    );
    chat.apply(&ev(json!({"type": "REASONING_END", "messageId": "span"})));
    chat.apply(&Event::tool_start("c1", "f", None));
    chat.apply(&Event::tool_end("c1"));
    chat.apply(&ev(json!({"type": "REASONING_ENCRYPTED_VALUE", "subtype": "message", "entityId": "r1", "encryptedValue": "enc-msg"})));
    chat.apply(&ev(json!({"type": "REASONING_ENCRYPTED_VALUE", "subtype": "tool-call", "entityId": "c1", "encryptedValue": "enc-call"})));
    chat.apply(&Event::run_finished("t", "r"));
    assert_eq!(chat.phase(), &Phase::Idle);
    assert_eq!(
        messages_json(&chat),
        json!([
            {"id": "r1", "role": "reasoning", "content": "step one", "encryptedValue": "enc-msg"},
            {"id": "c1", "role": "assistant", "toolCalls": [{"id": "c1", "type": "function",
                "function": {"name": "f", "arguments": ""}, "encryptedValue": "enc-call"}]}
        ])
    );
}

#[test]
fn unknown_raw_custom_and_subagent_events_change_nothing() {
    let before = run(&[Event::text_start("m")]);
    let mut after = before.clone();
    for event in [
        ev(json!({"type": "HOLOGRAM", "x": 1})),
        ev(json!({"type": "RAW", "event": {"a": 1}})),
        Event::custom("confetti", json!(3)),
        ev(json!({"type": "SUBAGENT_STARTED", "subagentRunId": "s", "name": "helper"})),
        ev(json!({"type": "SUBAGENT_FINISHED", "subagentRunId": "s"})),
    ] {
        assert_eq!(after.apply(&event), ApplyOutcome::Applied);
    }
    assert_eq!(after.to_agui_messages(), before.to_agui_messages());
    assert_eq!(after.messages(), before.messages());
    assert_eq!(after.agent_state(), before.agent_state());
    assert_eq!(after.phase(), before.phase());
    assert!(after.errors().is_empty());
}

#[test]
fn a_text_chunk_never_reopens_an_open_message() {
    let chat = run(&[
        Event::text_start("m"),
        ev(json!({"type": "TEXT_MESSAGE_CHUNK", "messageId": "m", "delta": "x"})),
    ]);
    assert_eq!(
        chat.message("m").unwrap().text(),
        "",
        "the chunk was refused whole"
    );
    assert_eq!(
        chat.error().unwrap().to_string(),
        "event 2: TEXT_MESSAGE_CHUNK was ignored: the TEXT_MESSAGE_START it expands to was refused: \
         text message `m` is already open; it must be closed with TEXT_MESSAGE_END first"
    );
}

#[test]
fn user_content_parts_become_text_when_streamed_into() {
    let chat = ChatState::new()
        .with_messages([serde_json::from_value::<AguiMessage>(json!(
            {"id": "u", "role": "user", "content": [{"type": "text", "text": "see image"}, {"type": "image", "source": {"type": "url", "value": "x"}}]}
        ))
        .unwrap()])
        .with_agent_state(json!({"seed": true}));
    assert_eq!(chat.messages()[0].text(), "see image");
    let chat = fold_all(
        chat,
        &[
            Event::run_started("t", "r"),
            ev(json!({"type": "TEXT_MESSAGE_START", "messageId": "u", "role": "user"})),
            Event::text_content("u", "typed"),
        ],
    );
    assert_eq!(messages_json(&chat)[0]["content"], json!("typed"));
    assert_eq!(chat.agent_state(), &json!({"seed": true}));
}

#[test]
fn apply_says_what_each_event_did_with_its_index() {
    let mut chat = ChatState::new().with_agent_state(json!({"n": 1}));
    let events = [
        Event::run_started("t", "r"),
        Event::text_start("a"),
        ev(json!({"type": "MESSAGES_SNAPSHOT", "messages": []})),
        Event::text_content("a", "lost"),
        Event::state_delta(vec![json!({"op": "test", "path": "/n", "value": 2})]),
        Event::text_start("a"),
    ];
    let outcomes: Vec<ApplyOutcome> = events.iter().map(|e| chat.apply(e)).collect();
    assert!(
        outcomes[..3].iter().all(ApplyOutcome::is_applied),
        "{outcomes:?}"
    );
    // Accepted (the message is still open) but it has nowhere to go: dropped.
    let ApplyOutcome::Dropped(dropped) = &outcomes[3] else {
        panic!("{:?}", outcomes[3])
    };
    assert_eq!(dropped.event_index, 3);
    assert_eq!(dropped.event_type, "TEXT_MESSAGE_CONTENT");
    let ApplyOutcome::Conflict(conflict) = &outcomes[4] else {
        panic!("{:?}", outcomes[4])
    };
    assert_eq!((conflict.event_index, conflict.operation), (4, Some(0)));
    assert_eq!(chat.agent_state(), &json!({"n": 1}));
    let ApplyOutcome::Ignored(ignored) = &outcomes[5] else {
        panic!("{:?}", outcomes[5])
    };
    assert_eq!(ignored.event_index, 5);
    // Every error is also on the state, in order, with the same index.
    let indices: Vec<usize> = chat
        .errors()
        .iter()
        .map(|e| match e {
            ChatError::Protocol(p) => p.event_index,
            ChatError::StateConflict(c) => c.event_index,
            ChatError::Run(_) => usize::MAX,
        })
        .collect();
    assert_eq!(indices, [3, 4, 5]);
}

#[test]
fn a_test_operation_compares_numbers_by_value() {
    let chat = run(&[
        Event::state_snapshot(json!({"price": 2.0, "tags": [1, {"w": 0.5}]})),
        Event::state_delta(vec![
            json!({"op": "test", "path": "/price", "value": 2}),
            json!({"op": "test", "path": "/tags", "value": [1.0, {"w": 0.5}]}),
            json!({"op": "replace", "path": "/price", "value": 3}),
        ]),
    ]);
    assert!(chat.errors().is_empty(), "{:?}", chat.errors());
    assert_eq!(chat.agent_state()["price"], json!(3));
}
