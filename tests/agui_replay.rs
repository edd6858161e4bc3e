//! Replay: the same events always give the same state; a fold can be stepped event by event and
//! every state kept (time travel); bad streams never corrupt the state.
#![cfg(feature = "ag-ui")]

use agentstate::agui::json_patch;
use agentstate::agui::{fold, fold_all, ApplyOutcome, ChatError, ChatState, Event, Timeline};
use proptest::prelude::*;
use serde_json::{json, Value};

fn id() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("a".to_owned()),
        Just("b".to_owned()),
        Just("c".to_owned())
    ]
}

fn maybe_id() -> impl Strategy<Value = Option<String>> {
    prop_oneof![Just(None), id().prop_map(Some)]
}

fn text() -> impl Strategy<Value = String> {
    "[a-z é]{0,6}"
}

fn path() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("/n".to_owned()),
        Just("/list".to_owned()),
        Just("/list/0".to_owned()),
        Just("/list/-".to_owned()),
        Just("/obj".to_owned()),
        Just("/obj/k".to_owned()),
        Just("/missing/deep".to_owned()),
        Just("".to_owned()),
    ]
}

fn small_json() -> impl Strategy<Value = Value> {
    prop_oneof![
        any::<i8>().prop_map(|n| json!(n)),
        text().prop_map(Value::String),
        Just(json!([1, 2])),
        Just(json!({"k": true})),
        Just(Value::Null),
    ]
}

fn patch_op() -> impl Strategy<Value = Value> {
    (0..7u8, path(), path(), small_json()).prop_map(|(kind, path, from, value)| match kind {
        0 => json!({"op": "add", "path": path, "value": value}),
        1 => json!({"op": "remove", "path": path}),
        2 => json!({"op": "replace", "path": path, "value": value}),
        3 => json!({"op": "move", "from": from, "path": path}),
        4 => json!({"op": "copy", "from": from, "path": path}),
        5 => json!({"op": "test", "path": path, "value": value}),
        _ => json!({"op": "bogus", "path": path}),
    })
}

fn patch() -> impl Strategy<Value = Vec<Value>> {
    prop::collection::vec(patch_op(), 0..4)
}

/// Any event, valid or not in context, from a small alphabet of ids so that they interact,
/// half of them attributed to a subagent, some with metadata.
fn event() -> impl Strategy<Value = Event> {
    let tag = prop_oneof![2 => Just(None), 1 => Just(Some("s1")), 1 => Just(Some("s2"))];
    let metadata = prop_oneof![3 => Just(None), 1 => small_json().prop_map(Some)];
    (untagged_event(), tag, metadata).prop_map(|(event, tag, metadata)| {
        let mut wire = serde_json::to_value(&event).unwrap();
        if let Some(tag) = tag {
            wire["subagentRunId"] = json!(tag);
        }
        if let Some(value) = metadata {
            wire["metadata"] = json!({"k": value});
        }
        serde_json::from_value(wire).unwrap()
    })
}

fn untagged_event() -> impl Strategy<Value = Event> {
    prop_oneof![
        2 => Just(Event::run_started("t", "r")),
        1 => Just(Event::run_finished("t", "r")),
        1 => text().prop_map(|m| Event::run_error(m, None)),
        3 => id().prop_map(Event::text_start),
        6 => (id(), text()).prop_map(|(i, d)| Event::text_content(i, d)),
        3 => id().prop_map(Event::text_end),
        2 => (id(), maybe_id()).prop_map(|(i, p)| Event::tool_start(i, "tool", p)),
        3 => (id(), text()).prop_map(|(i, d)| Event::tool_args(i, d)),
        2 => id().prop_map(Event::tool_end),
        2 => (id(), id(), text()).prop_map(|(m, c, t)| Event::tool_result(format!("res-{m}"), c, t)),
        2 => small_json().prop_map(|v| Event::state_snapshot(json!({"n": 1, "list": [v], "obj": {}}))),
        3 => patch().prop_map(Event::state_delta),
        2 => (maybe_id(), text()).prop_map(|(i, d)| serde_json::from_value(
            json!({"type": "TEXT_MESSAGE_CHUNK", "messageId": i, "delta": d})).unwrap()),
        1 => (maybe_id(), text()).prop_map(|(i, d)| serde_json::from_value(
            json!({"type": "TOOL_CALL_CHUNK", "toolCallId": i, "toolCallName": "t", "delta": d})).unwrap()),
        1 => id().prop_map(|i| serde_json::from_value(json!({"type": "STEP_STARTED", "stepName": i})).unwrap()),
        1 => id().prop_map(|i| serde_json::from_value(json!({"type": "STEP_FINISHED", "stepName": i})).unwrap()),
        1 => id().prop_map(|i| serde_json::from_value(json!({"type": "MESSAGES_SNAPSHOT", "messages": [
            {"id": i, "role": "assistant", "content": "snap", "toolCalls": [
                {"id": "a", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}
        ]})).unwrap()),
        1 => (id(), patch()).prop_map(|(i, p)| serde_json::from_value(json!({
            "type": "ACTIVITY_DELTA", "messageId": i, "activityType": "plan", "patch": p})).unwrap()),
        1 => id().prop_map(|i| serde_json::from_value(json!({
            "type": "ACTIVITY_SNAPSHOT", "messageId": i, "activityType": "plan", "content": {"steps": []}})).unwrap()),
        1 => Just(serde_json::from_value(json!({"type": "SOMETHING_NEW", "x": 1})).unwrap()),
        1 => Just(serde_json::from_value(json!({"type": "SUBAGENT_STARTED", "name": "helper"})).unwrap()),
        1 => Just(serde_json::from_value(json!({"type": "SUBAGENT_FINISHED"})).unwrap()),
        1 => (maybe_id(), text()).prop_map(|(i, d)| serde_json::from_value(
            json!({"type": "REASONING_MESSAGE_CHUNK", "messageId": i, "delta": d})).unwrap()),
    ]
}

fn events() -> impl Strategy<Value = Vec<Event>> {
    prop::collection::vec(event(), 0..60)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn the_same_events_always_give_the_same_state(events in events()) {
        let first = fold_all(ChatState::new(), &events);
        let second = fold_all(ChatState::new(), &events);
        prop_assert_eq!(&first, &second);
        // In place and by value are the same fold.
        let mut in_place = ChatState::new();
        for event in &events {
            in_place.apply(event);
        }
        prop_assert_eq!(&first, &in_place);
        // Through JSON and back: the wire form folds to the same state.
        let wire = serde_json::to_string(&events).unwrap();
        let reparsed = Event::parse_array(&wire).unwrap();
        prop_assert_eq!(&first, &fold_all(ChatState::new(), &reparsed));
    }

    #[test]
    fn every_kept_state_is_the_fold_of_its_prefix(events in events()) {
        let timeline = Timeline::from_events(ChatState::new(), events.clone());
        prop_assert_eq!(timeline.states().len(), events.len() + 1);
        for step in 0..=events.len() {
            prop_assert_eq!(timeline.state_at(step), &fold_all(ChatState::new(), &events[..step]));
        }
        prop_assert_eq!(&timeline.replay(), timeline.latest());
    }

    #[test]
    fn an_ignored_event_changes_neither_messages_nor_shared_state(events in events()) {
        let mut chat = ChatState::new();
        let mut ignored = Vec::new();
        for (i, event) in events.iter().enumerate() {
            let before = chat.clone();
            let outcome = chat.apply(event);
            if let ApplyOutcome::Ignored(error) = &outcome {
                ignored.push(i);
                prop_assert_eq!(error.event_index, i);
                prop_assert_eq!(chat.errors().last(), Some(&ChatError::Protocol(error.clone())));
                prop_assert_eq!(chat.to_agui_messages(), before.to_agui_messages());
                prop_assert_eq!(chat.agent_state(), before.agent_state());
                prop_assert_eq!(chat.phase(), before.phase());
            }
            // The indexes agree with the list: every message is found by its id.
            for message in chat.messages() {
                prop_assert!(chat.message(message.id()).is_some());
            }
        }
        // Ignoring is exact, chunk streams included: the stream without the ignored events
        // folds to the same conversation, and none of its events is ignored.
        let mut valid = ChatState::new();
        for (i, event) in events.iter().enumerate().filter(|(i, _)| !ignored.contains(i)) {
            let outcome = valid.apply(event);
            prop_assert!(!matches!(outcome, ApplyOutcome::Ignored(_)), "event {} ignored only when alone: {:?}", i, outcome);
        }
        prop_assert_eq!(valid.to_agui_messages(), chat.to_agui_messages());
        prop_assert_eq!(valid.agent_state(), chat.agent_state());
        prop_assert_eq!(valid.phase(), chat.phase());
    }

    #[test]
    fn a_state_delta_applies_entirely_or_not_at_all(
        start in small_json(),
        ops in patch(),
    ) {
        let state = json!({"n": 1, "list": [start], "obj": {"k": false}});
        let mut chat = fold_all(ChatState::new(), &[Event::run_started("t", "r"), Event::state_snapshot(state.clone())]);
        chat = fold(chat, &Event::state_delta(ops.clone()));
        // The reference: the operations one by one on a copy; any failure means no change.
        let expected = serde_json::from_value::<json_patch::Patch>(Value::Array(ops.clone()))
            .ok()
            .and_then(|patch| {
                let mut copy = state.clone();
                json_patch::patch_unsafe(&mut copy, &patch).ok().map(|_| copy)
            });
        match expected {
            Some(patched) => {
                prop_assert_eq!(chat.agent_state(), &patched);
                prop_assert!(chat.errors().is_empty());
            }
            None => {
                prop_assert_eq!(chat.agent_state(), &state);
                match chat.error() {
                    Some(ChatError::StateConflict(conflict)) => {
                        prop_assert_eq!(&conflict.patch, &ops);
                        prop_assert_eq!(&conflict.state, &state);
                    }
                    other => prop_assert!(false, "expected a conflict, got {:?}", other),
                }
            }
        }
    }
}

#[test]
fn time_travel_steps_back_and_branches() {
    let mut timeline = Timeline::new(ChatState::new());
    for event in [
        Event::run_started("t", "r"),
        Event::text_start("m"),
        Event::text_content("m", "first draft"),
        Event::text_end("m"),
    ] {
        timeline.push(event);
    }
    assert_eq!(
        timeline.state_at(3).message("m").unwrap().text(),
        "first draft"
    );
    // Go back to before the content and take another branch.
    timeline.truncate(2);
    assert_eq!(timeline.len(), 2);
    timeline.push(Event::text_content("m", "second draft"));
    timeline.push(Event::text_end("m"));
    assert_eq!(
        timeline.latest().message("m").unwrap().text(),
        "second draft"
    );
    assert_eq!(timeline.replay(), *timeline.latest());
    assert_eq!(
        timeline.state_at(100),
        timeline.latest(),
        "past the end is the latest"
    );
}
