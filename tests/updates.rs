//! Updates in practice (issue 4): node outputs, tool results, strict and lenient JSON updates,
//! Overwrite, parallel fan-in, update composition (`then`) and journal replay. Each test shows
//! one behaviour, and where AgentFlow or LangGraph gets it wrong (semantics.md §1 and §3), that
//! the wrong result does not happen here.

use agentstate::message::{Message, Role};
use agentstate::reducers::{HasId, MessageUpdate};
use agentstate::state::AgentStateUpdateSetters;
use agentstate::FanIn;
use agentstate::Journal;
use agentstate::{AgentState, State};
use agentstate::{KeyedList, MessageList};
use agentstate::{NodeOutput, ToolResult};
use proptest::prelude::*;
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};

// ---------------------------------------------------------------------------------------------
// A trip planner: an AgentState extension with a few custom fields.
// ---------------------------------------------------------------------------------------------

/// Refuses a negative budget: a user reducer (`with = f`), whose updates combine by running it
/// on each in turn.
fn checked_budget(_current: &i64, update: i64) -> Result<i64, String> {
    if update < 0 {
        Err(format!("a budget of {update} is negative"))
    } else {
        Ok(update)
    }
}

#[derive(AgentState, Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Trip {
    #[agent_state(base)]
    #[serde(flatten)]
    base: agentstate::state::AgentState,
    #[reducer(append)]
    cities: Vec<String>,
    #[reducer(merge)]
    weather: BTreeMap<String, i64>,
    #[reducer(bounded_append(max_len = 3))]
    recent: VecDeque<u32>,
    destination: Option<String>,
    nights: u32,
    #[reducer(with = checked_budget)]
    budget: i64,
}

fn msg(id: &str, role: Role, text: &str) -> Message {
    Message::text_message(text, role)
        .with_id(id)
        .with_timestamp(1.0)
}

fn user(id: &str, text: &str) -> Message {
    msg(id, Role::User, text)
}

fn assistant(id: &str, text: &str) -> Message {
    msg(id, Role::Assistant, text)
}

fn tool(id: &str, call_id: &str, output: &str) -> Message {
    Message::tool_result(call_id, output)
        .with_id(id)
        .with_timestamp(1.0)
}

/// The context as `(id, text)` pairs.
fn context(trip: &Trip) -> Vec<(String, String)> {
    trip.context
        .iter()
        .map(|m| (m.message_id.as_str().unwrap_or("?").to_owned(), m.text()))
        .collect()
}

fn pairs(items: &[(&str, &str)]) -> Vec<(String, String)> {
    items
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect()
}

/// A trip with a conversation and every custom field set.
fn started() -> Trip {
    let mut trip = Trip::default();
    trip.merge(
        TripUpdate::default()
            .context(vec![
                user("u1", "Plan a trip"),
                assistant("a1", "Where to?"),
            ])
            .cities(vec!["Oslo".to_string()])
            .weather(BTreeMap::from([("Oslo".to_string(), 4)]))
            .recent(vec![1, 2])
            .destination(Some("Norway".to_string()))
            .nights(3_u32)
            .budget(900),
    )
    .unwrap();
    trip
}

// ---------------------------------------------------------------------------------------------
// Node outputs
// ---------------------------------------------------------------------------------------------

#[test]
fn messages_into_an_output_merge_through_add_messages() {
    let mut trip = started();
    let output: NodeOutput<TripUpdate> = vec![user("u2", "Bergen, please")].into();
    trip.apply_output(output).unwrap();
    assert_eq!(
        context(&trip),
        pairs(&[
            ("u1", "Plan a trip"),
            ("a1", "Where to?"),
            ("u2", "Bergen, please")
        ])
    );

    // add_messages (AgentFlow): an existing id is dropped even with new content; a new id is
    // appended.
    let output: NodeOutput<TripUpdate> = vec![
        user("u1", "Plan a trip to Rome"),
        assistant("a2", "Bergen it is"),
    ]
    .into();
    trip.apply_output(output).unwrap();
    assert_eq!(
        context(&trip),
        pairs(&[
            ("u1", "Plan a trip"),
            ("a1", "Where to?"),
            ("u2", "Bergen, please"),
            ("a2", "Bergen it is")
        ])
    );

    // One message converts too.
    let output: NodeOutput<TripUpdate> = assistant("a3", "Booked").into();
    trip.apply_output(output).unwrap();
    assert_eq!(trip.context.len(), 5);
    assert_eq!(trip.context[4].text(), "Booked");
    assert_eq!(trip.cities, ["Oslo"], "messages touch nothing else");
}

#[test]
fn an_update_an_option_and_nothing_convert_into_outputs() {
    let mut trip = started();
    let before = trip.clone();
    trip.apply_output(().into()).unwrap();
    assert_eq!(trip, before, "() is no change");
    trip.apply_output(None::<TripUpdate>.into()).unwrap();
    assert_eq!(trip, before, "None is no change");

    let update = TripUpdate::default()
        .cities(vec!["Bergen".to_string()])
        .nights(5_u32);
    trip.apply_output(update.into()).unwrap();
    assert_eq!(trip.cities, ["Oslo", "Bergen"], "through append");
    assert_eq!(trip.nights, 5);

    trip.apply_output(Some(TripUpdate::default().destination(None)).into())
        .unwrap();
    assert_eq!(trip.destination, None);
    assert_eq!(trip.context, before.context);
}

#[test]
fn several_outputs_apply_in_order_as_one_merge() {
    let mut trip = started();
    let output: NodeOutput<TripUpdate> = vec![
        NodeOutput::from(
            TripUpdate::default()
                .nights(4_u32)
                .cities(vec!["Bergen".into()]),
        ),
        vec![assistant("a2", "first")].into(),
        ().into(),
        ToolResult::new(
            tool("t1", "call_1", "sunny"),
            TripUpdate::default()
                .nights(6_u32)
                .cities(vec!["Tromsø".into()]),
        )
        .into(),
        vec![assistant("a3", "second")].into(),
        vec![NodeOutput::from(TripUpdate::default().recent(vec![3, 4]))].into(),
    ]
    .into();
    trip.apply_output(output).unwrap();
    assert_eq!(trip.nights, 6, "the later last_write_wins value wins");
    assert_eq!(trip.cities, ["Oslo", "Bergen", "Tromsø"]);
    assert_eq!(
        trip.recent,
        [2, 3, 4],
        "bounded_append(3) over the whole batch"
    );
    assert_eq!(
        context(&trip),
        pairs(&[
            ("u1", "Plan a trip"),
            ("a1", "Where to?"),
            ("a2", "first"),
            ("t1", "sunny"),
            ("a3", "second")
        ])
    );
}

#[test]
fn several_outputs_are_atomic() {
    let mut trip = started();
    let before = trip.clone();
    let output: NodeOutput<TripUpdate> = vec![
        NodeOutput::from(TripUpdate::default().cities(vec!["Bergen".into()])),
        vec![assistant("a2", "noted")].into(),
        TripUpdate::default().budget(-5).into(),
    ]
    .into();
    let err = trip.apply_output(output).unwrap_err();
    assert_eq!(err.category(), "reducer_error");
    assert_eq!(err.field(), Some("budget"));
    assert_eq!(trip, before, "neither the city nor the message was applied");

    // Two outputs setting the user-reducer field apply one after the other; when the second
    // fails, nothing of either is applied.
    let output: NodeOutput<TripUpdate> = vec![
        NodeOutput::from(TripUpdate::default().budget(10).nights(1_u32)),
        TripUpdate::default().budget(-20).into(),
    ]
    .into();
    let err = trip.apply_output(output).unwrap_err();
    assert_eq!(err.field(), Some("budget"));
    assert_eq!(trip, before);
    let output: NodeOutput<TripUpdate> = vec![
        NodeOutput::from(TripUpdate::default().budget(10).nights(1_u32)),
        TripUpdate::default().budget(20).into(),
    ]
    .into();
    trip.apply_output(output).unwrap();
    assert_eq!((trip.budget, trip.nights), (20, 1));
}

// ---------------------------------------------------------------------------------------------
// ToolResult
// ---------------------------------------------------------------------------------------------

#[test]
fn a_tool_result_applies_its_message_and_its_update_together() {
    let mut trip = started();
    let result = ToolResult::new(
        tool("t1", "call_1", "Bergen: 7°C"),
        TripUpdate::default()
            .cities(vec!["Bergen".into()])
            .weather(BTreeMap::from([("Bergen".to_string(), 7)])),
    );
    assert_eq!(result.message().text(), "Bergen: 7°C");
    trip.apply_output(result.into()).unwrap();
    assert_eq!(
        context(&trip),
        pairs(&[
            ("u1", "Plan a trip"),
            ("a1", "Where to?"),
            ("t1", "Bergen: 7°C")
        ])
    );
    assert_eq!(trip.cities, ["Oslo", "Bergen"]);
    assert_eq!(
        trip.weather,
        BTreeMap::from([("Bergen".to_string(), 7), ("Oslo".to_string(), 4)])
    );

    // Atomic: when the update fails, the tool message is not appended either.
    let before = trip.clone();
    let failing = ToolResult::new(
        tool("t2", "call_2", "refund"),
        TripUpdate::default().budget(-1),
    );
    assert!(trip.apply_output(failing.into()).is_err());
    assert_eq!(trip, before);
}

#[test]
fn a_tool_result_saying_empty_context_does_not_wipe_it() {
    // AgentFlow applies ToolResult.state with attribute assignment: `{"context": []}` wipes the
    // history. Here `context` merges through add_messages: an empty list adds nothing.
    let mut trip = started();
    let typed = ToolResult::new(
        tool("t1", "call_1", "done"),
        TripUpdate::default().context(vec![]).nights(2_u32),
    );
    trip.apply_output(typed.into()).unwrap();
    assert_eq!(
        context(&trip),
        pairs(&[("u1", "Plan a trip"), ("a1", "Where to?"), ("t1", "done")])
    );
    assert_eq!(trip.nights, 2);

    // The same from JSON (an LLM's or a Python tool's state update).
    let from_json = TripUpdate::from_json(json!({"context": [], "cities": ["Bergen"]})).unwrap();
    trip.apply_output(ToolResult::new(tool("t2", "call_2", "again"), from_json).into())
        .unwrap();
    assert_eq!(
        trip.context.len(),
        4,
        "nothing wiped, the tool message added"
    );
    assert_eq!(trip.context[0].text(), "Plan a trip");
    assert_eq!(trip.context[3].text(), "again");
    assert_eq!(trip.cities, ["Oslo", "Bergen"]);
}

#[test]
fn only_an_overwrite_in_a_tool_result_replaces_the_context() {
    let mut trip = started();
    let typed = ToolResult::new(
        tool("t1", "call_1", "reset"),
        TripUpdate::default().overwrite_context(vec![]),
    );
    trip.apply_output(typed.into()).unwrap();
    assert_eq!(
        context(&trip),
        pairs(&[("t1", "reset")]),
        "the context was dropped, and the tool message still appended after the overwrite"
    );

    let mut trip = started();
    let from_json = TripUpdate::from_json(json!({"context": {"__overwrite__": []}})).unwrap();
    trip.apply_output(ToolResult::new(tool("t1", "call_1", "reset"), from_json).into())
        .unwrap();
    assert_eq!(context(&trip), pairs(&[("t1", "reset")]));
    assert_eq!(trip.cities, ["Oslo"], "only the context was overwritten");
}

#[test]
fn the_tool_message_is_always_appended() {
    // AgentFlow under invoke returns the ToolResult's message but never appends it.
    let mut trip = started();
    let result: ToolResult<TripUpdate> = ToolResult::message_only(tool("t1", "call_1", "42"));
    trip.apply_output(result.into()).unwrap();
    assert_eq!(
        trip.context.last().map(Message::text).as_deref(),
        Some("42")
    );
    assert_eq!(trip.context.len(), 3);

    // With messages in its update too: those first, then the tool message.
    let result = ToolResult::new(
        tool("t2", "call_2", "43"),
        TripUpdate::default().context(vec![assistant("a2", "thinking")]),
    );
    let update = result.clone().into_update();
    assert_eq!(update.base.context.as_ref().map(|c| c.len()), Some(2));
    trip.apply_output(result.into()).unwrap();
    assert_eq!(
        context(&trip)[3..],
        pairs(&[("a2", "thinking"), ("t2", "43")])[..]
    );
}

// ---------------------------------------------------------------------------------------------
// JSON updates
// ---------------------------------------------------------------------------------------------

/// Applies `json` strictly, expects a `state_validation_error` on `field`, and checks that the
/// state did not change. Returns the message.
fn rejected(json: serde_json::Value, field: &str) -> String {
    let mut trip = started();
    let before = trip.clone();
    let err = trip.apply_json(json.clone()).unwrap_err();
    assert_eq!(err.category(), "state_validation_error", "{json}: {err}");
    assert_eq!(err.field(), Some(field), "{json}: {err}");
    assert_eq!(trip, before, "{json}: the state changed");
    // The update parser says the same.
    let parsed = TripUpdate::from_json(json).unwrap_err();
    assert_eq!(parsed.to_string(), err.to_string());
    err.to_string()
}

#[test]
fn a_json_update_merges_through_the_reducers() {
    let mut trip = started();
    trip.apply_json(json!({
        "cities": ["Bergen"],
        "weather": {"Bergen": 7},
        "recent": [3, 4],
        "nights": 5,
        "context": [{"message_id": "u2", "role": "user", "content": [{"type": "text", "text": "Bergen"}]}]
    }))
    .unwrap();
    assert_eq!(trip.cities, ["Oslo", "Bergen"]);
    assert_eq!(trip.weather.len(), 2);
    assert_eq!(trip.recent, [2, 3, 4]);
    assert_eq!(trip.nights, 5);
    assert_eq!(trip.context.len(), 3);
    assert_eq!(
        trip.destination.as_deref(),
        Some("Norway"),
        "absent keys stay"
    );
}

#[test]
fn an_unknown_key_is_named_with_a_hint_when_close() {
    let message = rejected(json!({"citis": ["Bergen"]}), "citis");
    assert_eq!(
        message,
        "field `citis` is not a field of this state; did you mean `cities`?"
    );
    // Close to a base field.
    let message = rejected(json!({"contxt": []}), "contxt");
    assert!(message.ends_with("did you mean `context`?"), "{message}");
    // In the Overwrite form too.
    let message = rejected(json!({"nigths": {"__overwrite__": 2}}), "nigths");
    assert!(message.ends_with("did you mean `nights`?"), "{message}");
    // Valid keys beside an unknown one are not applied either (checked by `rejected`).
    rejected(json!({"cities": ["Bergen"], "budgt": 10}), "budgt");
}

#[test]
fn the_key_messages_on_an_agent_state_extension_points_to_context() {
    // LangGraph's MessagesState calls the field `messages`; AgentFlow's AgentState `context`.
    let message = rejected(json!({"messages": []}), "messages");
    assert_eq!(
        message,
        "field `messages` is not a field of this state; this state's messages are in `context`"
    );
    let message = rejected(json!({"history": {"__overwrite__": []}}), "history");
    assert!(message.ends_with("messages are in `context`"), "{message}");
    // A state whose messages field is its own (here found without being named).
    let err = ChatUpdate::from_json(json!({"history": []})).unwrap_err();
    assert!(
        err.to_string().ends_with("messages are in `messages`"),
        "{err}"
    );
    // A state without a messages field gives no such hint.
    let err = NotebookUpdate::from_json(json!({"messages": []})).unwrap_err();
    assert_eq!(
        err.to_string(),
        "field `messages` is not a field of this state"
    );
}

#[test]
fn an_unknown_key_far_from_every_field_gets_no_hint() {
    let message = rejected(json!({"temperature": 3}), "temperature");
    assert_eq!(message, "field `temperature` is not a field of this state");
    assert!(!message.contains("did you mean"));
}

#[test]
fn a_type_mismatch_names_the_field_and_the_json_path() {
    let message = rejected(json!({"nights": "five"}), "nights");
    assert!(message.contains("at `nights`"), "{message}");
    assert!(
        message.contains("invalid type: string \"five\""),
        "{message}"
    );

    // A list element.
    let message = rejected(json!({"cities": ["Bergen", 5]}), "cities");
    assert!(message.contains("at `cities[1]`"), "{message}");
    let message = rejected(json!({"recent": [1, -2]}), "recent");
    assert!(message.contains("at `recent[1]`"), "{message}");
    // A map entry.
    let message = rejected(json!({"weather": {"Oslo": 4, "Bergen": "mild"}}), "weather");
    assert!(message.contains("at `weather.Bergen`"), "{message}");
    // A field of the base state, nested (the base is flattened into the update).
    let message = rejected(
        json!({"context": [{"role": "user", "content": []}, {"role": "robot", "content": []}]}),
        "context",
    );
    assert!(message.contains("at `context[1].role`"), "{message}");
    assert!(message.contains("unknown variant `robot`"), "{message}");
    let message = rejected(json!({"execution_meta": {"step": "x"}}), "execution_meta");
    assert!(message.contains("at `execution_meta.step`"), "{message}");
    // Inside an Overwrite, the path is the field's.
    let message = rejected(json!({"cities": {"__overwrite__": ["a", 5]}}), "cities");
    assert!(message.contains("at `cities[1]`"), "{message}");
    let message = rejected(
        json!({"context": {"__overwrite__": [{"role": "user", "content": 5}]}}),
        "context",
    );
    assert!(message.contains("at `context[0].content`"), "{message}");
    // An object with more keys than `__overwrite__` is an ordinary value, here of the wrong type.
    let message = rejected(json!({"cities": {"__overwrite__": [], "x": 1}}), "cities");
    assert!(message.contains("at `cities`"), "{message}");
    // null where no Option is.
    let message = rejected(json!({"nights": null}), "nights");
    assert!(message.contains("invalid type: null"), "{message}");
}

#[test]
fn when_two_flattened_entries_fail_the_error_pairs_each_name_with_its_own_path() {
    // An Overwrite and a base field, both flattened, both wrong: whichever is reported, the
    // field named is the one whose value is at the path given, with that value's own message.
    for json in [
        json!({"nights": {"__overwrite__": "x"}, "execution_meta": 5}),
        json!({"execution_meta": 5, "nights": {"__overwrite__": "x"}}),
        json!({"cities": {"__overwrite__": [1]}, "context": [{"role": "robot", "content": []}]}),
        json!({"context": {"__overwrite__": 5}, "execution_meta": {"step": "x"}}),
    ] {
        let mut trip = started();
        let err = trip.apply_json(json.clone()).unwrap_err();
        let field = err.field().unwrap().to_owned();
        let message = err.to_string();
        let at = message
            .split("at `")
            .nth(1)
            .and_then(|rest| rest.split('`').next())
            .unwrap_or_else(|| panic!("{json}: no path in {message}"));
        assert!(
            at == field
                || at.starts_with(&format!("{field}["))
                || at.starts_with(&format!("{field}.")),
            "{json}: field `{field}` paired with path `{at}`: {message}"
        );
        // The message is the one the field's value gives alone.
        let alone = json!({ field.clone(): json[&field].clone() });
        let alone = trip.apply_json(alone).unwrap_err();
        assert_eq!(alone.to_string(), message, "{json}");
    }
    let message = rejected(
        json!({"nights": {"__overwrite__": "x"}, "execution_meta": 5}),
        "execution_meta",
    );
    assert_eq!(
        message,
        "field `execution_meta` has a value that does not fit at `execution_meta`: invalid type: integer `5`, expected struct ExecutionState"
    );
}

#[test]
fn a_value_nested_too_deep_is_refused_without_overflowing_the_stack() {
    // Built in code: serde_json's parser would stop at 128 levels, a `Value` has no limit.
    // (Built with `Value` constructors: `json!` would serialize the inner value recursively.)
    use serde_json::{Map, Value};
    let mut deep = json!(1);
    for _ in 0..10_000 {
        deep = Value::Array(vec![deep]);
    }
    let mut trip = started();
    let before = trip.clone();
    let update = Value::Object(Map::from_iter([("cities".to_owned(), deep)]));
    let err = trip.apply_json(update).unwrap_err();
    assert_eq!(err.category(), "state_validation_error");
    assert_eq!(
        err.to_string(),
        "field `cities` has a value nested deeper than 128 levels of arrays and objects (the update included), more than a JSON update may have"
    );
    let mut deep = json!({});
    for _ in 0..10_000 {
        deep = Value::Object(Map::from_iter([("a".to_owned(), deep)]));
    }
    let overwrite = Value::Object(Map::from_iter([("__overwrite__".to_owned(), deep)]));
    let update = Value::Object(Map::from_iter([("weather".to_owned(), overwrite)]));
    let err = TripUpdate::from_json(update).unwrap_err();
    assert_eq!(err.field(), Some("weather"));
    assert_eq!(trip, before);

    // Every update serde_json can parse (at most 128 levels, the update included) is accepted
    // as far as depth goes; one level more is not.
    let nest = |levels: usize| {
        let mut value = json!("Oslo");
        for _ in 0..levels {
            value = Value::Array(vec![value]);
        }
        value
    };
    let text = json!({ "context_summary": nest(126) }).to_string();
    assert!(serde_json::from_str::<serde_json::Value>(&text).is_ok());
    let err = started()
        .apply_json(serde_json::from_str(&text).unwrap())
        .unwrap_err();
    assert!(err.to_string().contains("does not fit"), "{err}");
    rejected(json!({ "context_summary": nest(128) }), "context_summary");
}

#[test]
fn both_overwrite_spellings_of_one_field_are_an_error() {
    for json in [
        json!({"nights": {"__overwrite__": 1}, "nights.__overwrite__": 2}),
        json!({"nights.__overwrite__": 2, "nights": {"__overwrite__": 1}}),
    ] {
        let message = rejected(json, "nights");
        assert_eq!(
            message,
            "field `nights` has two Overwrites in one update (`{\"nights\": {\"__overwrite__\": ...}}` and `\"nights.__overwrite__\"`); give one"
        );
    }
    // Each spelling alone is an Overwrite.
    for json in [
        json!({"nights": {"__overwrite__": 1}}),
        json!({"nights.__overwrite__": 1}),
    ] {
        let mut trip = started();
        trip.apply_json(json).unwrap();
        assert_eq!(trip.nights, 1);
    }
}

#[test]
fn a_json_update_that_is_not_an_object_is_rejected() {
    for value in [
        json!(null),
        json!([{"cities": ["Bergen"]}]),
        json!("cities"),
        json!(3),
    ] {
        let message = rejected(value.clone(), "(update)");
        assert!(
            message.contains("must be a JSON object"),
            "{value}: {message}"
        );
    }
}

#[test]
fn json_null_clears_an_option_and_an_absent_key_leaves_it() {
    let mut trip = started();
    trip.apply_json(json!({"nights": 4})).unwrap();
    assert_eq!(
        trip.destination.as_deref(),
        Some("Norway"),
        "absent: untouched"
    );
    trip.apply_json(json!({"destination": null})).unwrap();
    assert_eq!(trip.destination, None, "null: set to None");
    trip.apply_json(json!({"context_summary": "s"})).unwrap();
    trip.apply_json(json!({"context_summary": null})).unwrap();
    assert_eq!(trip.context_summary, None, "a base field the same");

    let update = TripUpdate::from_json(json!({"destination": null})).unwrap();
    assert_eq!(update.destination, Some(None));
    let update = TripUpdate::from_json(json!({})).unwrap();
    assert_eq!(update, TripUpdate::default());
}

#[test]
fn lenient_json_ignores_unknown_keys_and_returns_them() {
    let mut trip = started();
    let ignored = trip
        .apply_json_lenient(json!({"cities": ["Bergen"], "mood": "happy", "citis": [], "note": {"__overwrite__": 1}}))
        .unwrap();
    let ignored: HashSet<String> = ignored.into_iter().collect();
    assert_eq!(
        ignored,
        HashSet::from(["mood".to_string(), "citis".to_string(), "note".to_string()])
    );
    assert_eq!(trip.cities, ["Oslo", "Bergen"]);

    let (update, ignored) = TripUpdate::from_json_lenient(json!({"nights": 2, "x": 1})).unwrap();
    assert_eq!(update, TripUpdate::default().nights(2_u32));
    assert_eq!(ignored, ["x"]);

    // Lenient is about keys only: values are checked, a non-object rejected, atomically.
    let before = trip.clone();
    let err = trip
        .apply_json_lenient(json!({"cities": ["Rome"], "nights": "two", "x": 1}))
        .unwrap_err();
    assert_eq!(err.field(), Some("nights"));
    assert!(trip.apply_json_lenient(json!([1])).is_err());
    assert_eq!(trip, before);
}

#[test]
fn a_json_update_whose_reducer_fails_changes_nothing() {
    let mut trip = started();
    let before = trip.clone();
    let err = trip
        .apply_json(json!({"cities": ["Bergen"], "budget": -3}))
        .unwrap_err();
    assert_eq!(err.category(), "reducer_error");
    assert_eq!(err.field(), Some("budget"));
    assert_eq!(trip, before);
}

// ---------------------------------------------------------------------------------------------
// Overwrite
// ---------------------------------------------------------------------------------------------

#[test]
fn an_overwrite_clears_an_append_list_resets_a_buffer_and_drops_the_context() {
    let mut trip = started();
    trip.merge(
        TripUpdate::default()
            .overwrite_cities(vec![])
            .overwrite_recent(vec![9])
            .overwrite_context(vec![])
            .overwrite_weather(BTreeMap::new()),
    )
    .unwrap();
    assert!(trip.cities.is_empty(), "append cannot clear; Overwrite can");
    assert_eq!(trip.recent, [9]);
    assert!(trip.context.is_empty());
    assert!(
        trip.weather.is_empty(),
        "merge cannot drop keys; Overwrite can"
    );
    assert_eq!(trip.nights, 3, "other fields untouched");

    // The same in JSON.
    let mut trip = started();
    trip.apply_json(json!({
        "cities": {"__overwrite__": []},
        "recent": {"__overwrite__": []},
        "context": {"__overwrite__": []},
        "destination": {"__overwrite__": null},
        "budget": {"__overwrite__": 0}
    }))
    .unwrap();
    assert!(trip.cities.is_empty() && trip.recent.is_empty() && trip.context.is_empty());
    assert_eq!(trip.destination, None);
    assert_eq!(
        trip.budget, 0,
        "an Overwrite bypasses the user reducer as well"
    );
}

#[test]
fn an_overwrite_bypasses_the_reducer_entirely() {
    // bounded_append's bound and add_messages' id check are the reducer's; an Overwrite stores
    // exactly what it is given.
    let mut trip = started();
    let dup = user("x", "same id twice");
    trip.merge(
        TripUpdate::default()
            .overwrite_recent(vec![1, 2, 3, 4, 5])
            .overwrite_context(vec![dup.clone(), dup]),
    )
    .unwrap();
    assert_eq!(trip.recent, [1, 2, 3, 4, 5]);
    assert_eq!(trip.context.len(), 2);
    // The next ordinary write goes through the reducer again.
    trip.merge(TripUpdate::default().recent(vec![6])).unwrap();
    assert_eq!(trip.recent, [4, 5, 6]);
}

#[test]
fn an_ordinary_entry_merges_on_top_of_an_overwrite_of_the_same_field() {
    let mut trip = started();
    trip.merge(
        TripUpdate::default()
            .overwrite_cities(vec!["Rome".into()])
            .cities(vec!["Milan".into()])
            .overwrite_recent(vec![7, 8])
            .recent(vec![9, 10])
            .overwrite_context(vec![user("u9", "new start")])
            .context(vec![
                user("u9", "dropped: same id"),
                assistant("a9", "kept"),
            ])
            .overwrite_nights(1_u32)
            .nights(2_u32),
    )
    .unwrap();
    assert_eq!(trip.cities, ["Rome", "Milan"]);
    assert_eq!(trip.recent, [8, 9, 10]);
    assert_eq!(
        context(&trip),
        pairs(&[("u9", "new start"), ("a9", "kept")])
    );
    assert_eq!(trip.nights, 2);

    // In JSON through the serialized form (the `{"field": {"__overwrite__": v}}` form holds one
    // value per key).
    let mut trip = started();
    trip.apply_json(json!({"cities.__overwrite__": ["Rome"], "cities": ["Milan"]}))
        .unwrap();
    assert_eq!(trip.cities, ["Rome", "Milan"]);
}

#[test]
fn an_update_with_overwrites_round_trips_through_json() {
    let update = TripUpdate::default()
        .overwrite_cities(vec!["Rome".into()])
        .cities(vec!["Milan".into()])
        .overwrite_context(vec![])
        .context(vec![user("u1", "hi")])
        .overwrite_destination(None)
        .nights(2_u32);
    let value = serde_json::to_value(&update).unwrap();
    let object = value.as_object().unwrap();
    let mut keys: Vec<&str> = object.keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        [
            "cities",
            "cities.__overwrite__",
            "context",
            "context.__overwrite__",
            "destination.__overwrite__",
            "nights"
        ]
    );
    assert_eq!(value["destination.__overwrite__"], json!(null));
    assert_eq!(value["cities.__overwrite__"], json!(["Rome"]));

    let back: TripUpdate = serde_json::from_value(value.clone()).unwrap();
    assert_eq!(back, update);
    assert_eq!(TripUpdate::from_json(value).unwrap(), update);

    let (mut a, mut b) = (started(), started());
    a.merge(update).unwrap();
    b.merge(back).unwrap();
    assert_eq!(a, b);
    assert_eq!(a.destination, None);
    assert_eq!(a.cities, ["Rome", "Milan"]);
}

/// A base state whose map has integer keys, and an extension of it.
#[derive(AgentState, Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[agent_state(extensible)]
pub struct Scores {
    #[reducer(merge)]
    by_round: BTreeMap<u8, u32>,
}

#[derive(AgentState, Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Game {
    #[agent_state(base)]
    #[serde(flatten)]
    base: Scores,
    #[reducer(merge)]
    bonus: BTreeMap<u8, u32>,
}

#[test]
fn overwrites_and_base_fields_with_integer_map_keys_round_trip() {
    // Overwrites and the base's fields sit in flattened parts of the update; serde alone cannot
    // read a map with integer keys back from those.
    let update = GameUpdate::default()
        .by_round(BTreeMap::from([(1, 10)]))
        .overwrite_by_round(BTreeMap::from([(2, 20)]))
        .overwrite_bonus(BTreeMap::from([(3, 30)]))
        .bonus(BTreeMap::from([(4, 40)]));
    let json = serde_json::to_value(&update).unwrap();
    assert_eq!(
        json,
        json!({
            "by_round": {"1": 10},
            "by_round.__overwrite__": {"2": 20},
            "bonus": {"4": 40},
            "bonus.__overwrite__": {"3": 30}
        })
    );
    let back: GameUpdate = serde_json::from_value(json.clone()).unwrap();
    assert_eq!(back, update);
    assert_eq!(GameUpdate::from_json(json).unwrap(), update);
    let mut game = Game::default();
    game.merge(back).unwrap();
    assert_eq!(game.by_round, BTreeMap::from([(1, 10), (2, 20)]));
    assert_eq!(game.bonus, BTreeMap::from([(3, 30), (4, 40)]));

    // And a bad value there is named with its path.
    let err = GameUpdate::from_json(json!({"by_round": {"1": "one"}})).unwrap_err();
    assert_eq!(err.field(), Some("by_round"));
    assert!(err.to_string().contains("at `by_round.1`"), "{err}");
    let err = GameUpdate::from_json(json!({"by_round": {"one": 1}})).unwrap_err();
    assert_eq!(err.field(), Some("by_round"));
    assert!(err.to_string().contains("key to be a number"), "{err}");
    let err = GameUpdate::from_json(json!({"bonus": {"__overwrite__": {"7": -1}}})).unwrap_err();
    assert_eq!(err.field(), Some("bonus"));
    assert!(err.to_string().contains("at `bonus.7`"), "{err}");
}

/// A nested state of the serialization tests below.
#[derive(AgentState, Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Leg {
    #[reducer(append)]
    stops: Vec<String>,
    hours: u32,
}

/// A state with a base, a nested state and reduced fields: its update's `Serialize` is the
/// derive's own.
#[derive(AgentState, Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Tour {
    #[reducer(append)]
    cities: Vec<String>,
    #[agent_state(base)]
    #[serde(flatten)]
    base: Scores,
    #[reducer(nested)]
    leg: Leg,
    #[reducer(merge)]
    bonus: BTreeMap<u8, u32>,
    guide: Option<String>,
}

/// The same state, generic: its update is generated the same way, through the same field lists.
#[derive(AgentState, Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct GenericTour<T: Clone + Default + PartialEq + std::fmt::Debug> {
    #[reducer(append)]
    cities: Vec<T>,
    #[agent_state(base)]
    #[serde(flatten)]
    base: Scores,
    #[reducer(nested)]
    leg: Leg,
    #[reducer(merge)]
    bonus: BTreeMap<u8, u32>,
    guide: Option<String>,
}

/// What serde's derive writes for a `TourUpdate`, written out as a struct deriving it: the
/// reference for the generated `Serialize` (the base's part flattened, each entry skipped when
/// unset, then the Overwrites).
#[derive(Serialize)]
struct TourUpdateBySerde {
    #[serde(skip_serializing_if = "Option::is_none")]
    cities: Option<Vec<String>>,
    #[serde(flatten)]
    base: ScoresUpdate,
    #[serde(skip_serializing_if = "Option::is_none")]
    leg: Option<LegUpdate>,
    #[serde(skip_serializing_if = "Option::is_none")]
    bonus: Option<BTreeMap<u8, u32>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    guide: Option<Option<String>>,
    #[serde(
        rename = "cities.__overwrite__",
        skip_serializing_if = "Option::is_none"
    )]
    overwrite_cities: Option<Vec<String>>,
    #[serde(rename = "leg.__overwrite__", skip_serializing_if = "Option::is_none")]
    overwrite_leg: Option<Leg>,
    #[serde(
        rename = "bonus.__overwrite__",
        skip_serializing_if = "Option::is_none"
    )]
    overwrite_bonus: Option<BTreeMap<u8, u32>>,
    #[serde(
        rename = "guide.__overwrite__",
        skip_serializing_if = "Option::is_none"
    )]
    overwrite_guide: Option<Option<String>>,
}

impl From<TourUpdate> for TourUpdateBySerde {
    fn from(u: TourUpdate) -> Self {
        TourUpdateBySerde {
            cities: u.cities,
            base: u.base,
            leg: u.leg,
            bonus: u.bonus,
            guide: u.guide,
            overwrite_cities: u.overwrite.cities,
            overwrite_leg: u.overwrite.leg,
            overwrite_bonus: u.overwrite.bonus,
            overwrite_guide: u.overwrite.guide,
        }
    }
}

#[test]
fn the_generated_update_serialize_writes_what_serde_derive_writes() {
    // The same setters on both updates.
    macro_rules! tour_update {
        ($update:ty) => {
            <$update>::default()
                .overwrite_cities(vec!["Rome".into()])
                .cities(vec!["Milan".into()])
                .by_round(BTreeMap::from([(1, 10)]))
                .overwrite_by_round(BTreeMap::from([(2, 20)]))
                .leg(
                    LegUpdate::default()
                        .stops(vec!["Pisa".into()])
                        .overwrite_hours(3_u32),
                )
                .overwrite_guide(None)
                .guide(Some("Ada".into()))
        };
    }
    let update = tour_update!(TourUpdate);
    let generic = tour_update!(GenericTourUpdate<String>);
    // The keys in order: the own entries and the base's (flattened, its Overwrites last) in
    // declaration order, then the Overwrites; a nested update is an object of the same form.
    let expected = concat!(
        r#"{"cities":["Milan"],"by_round":{"1":10},"by_round.__overwrite__":{"2":20},"#,
        r#""leg":{"stops":["Pisa"],"hours.__overwrite__":3},"guide":"Ada","#,
        r#""cities.__overwrite__":["Rome"],"guide.__overwrite__":null}"#
    );
    assert_eq!(serde_json::to_string(&update).unwrap(), expected);
    assert_eq!(serde_json::to_string(&generic).unwrap(), expected);
    assert_eq!(
        serde_json::to_string(&TourUpdateBySerde::from(update.clone())).unwrap(),
        expected
    );
    // Every entry set, and none: still what serde's derive writes.
    let full = update
        .clone()
        .bonus(BTreeMap::from([(3, 30)]))
        .overwrite_bonus(BTreeMap::new())
        .overwrite_leg(Leg::default());
    assert_eq!(
        serde_json::to_string(&full).unwrap(),
        serde_json::to_string(&TourUpdateBySerde::from(full.clone())).unwrap()
    );
    assert_eq!(serde_json::to_string(&TourUpdate::default()).unwrap(), "{}");
    assert_eq!(
        serde_json::to_string(&TourUpdateBySerde::from(TourUpdate::default())).unwrap(),
        "{}"
    );
    assert_eq!(
        serde_json::to_string(&GenericTourUpdate::<String>::default()).unwrap(),
        "{}"
    );
    // And it reads back, the generic state's too.
    let back: TourUpdate = serde_json::from_str(expected).unwrap();
    assert_eq!(back, update);
    let back: GenericTourUpdate<String> = serde_json::from_str(expected).unwrap();
    assert_eq!(back, generic);
    let back: TourUpdate = serde_json::from_str(&serde_json::to_string(&full).unwrap()).unwrap();
    assert_eq!(back, full);
}

// ---------------------------------------------------------------------------------------------
// Fan-in
// ---------------------------------------------------------------------------------------------

#[test]
fn parallel_branches_fold_in_branch_order() {
    let branch_a = TripUpdate::default()
        .cities(vec!["A".into()])
        .weather(BTreeMap::from([("X".to_string(), 1)]))
        .recent(vec![10])
        .context(vec![assistant("m", "from a")])
        .nights(1_u32);
    let branch_b = TripUpdate::default()
        .cities(vec!["B".into()])
        .weather(BTreeMap::from([("X".to_string(), 2)]))
        .recent(vec![20])
        .context(vec![assistant("m", "from b"), assistant("mb", "b only")])
        .nights(2_u32);

    let mut ab = started();
    ab.merge_parallel([branch_a.clone(), branch_b.clone()], FanIn::Ordered)
        .unwrap();
    assert_eq!(ab.cities, ["Oslo", "A", "B"]);
    assert_eq!(ab.weather["X"], 2, "merge: the later branch's key wins");
    assert_eq!(ab.recent, [2, 10, 20]);
    assert_eq!(ab.nights, 2, "Ordered: the last branch wins");
    assert_eq!(
        context(&ab)[2..],
        pairs(&[("m", "from a"), ("mb", "b only")])[..],
        "add_messages: the first branch's message with an id wins"
    );

    // The order given is the order applied, whichever branch finished first.
    let mut ba = started();
    ba.merge_parallel([branch_b, branch_a], FanIn::Ordered)
        .unwrap();
    assert_eq!(ba.cities, ["Oslo", "B", "A"]);
    assert_eq!(ba.weather["X"], 1);
    assert_eq!(ba.recent, [2, 20, 10]);
    assert_eq!(ba.nights, 1);
    assert_eq!(
        context(&ba)[2..],
        pairs(&[("m", "from b"), ("mb", "b only")])[..]
    );

    // No branches, no change.
    let mut none = started();
    none.merge_parallel([], FanIn::Strict).unwrap();
    assert_eq!(none, started());
}

#[test]
fn parallel_branches_do_not_double_a_list() {
    // AgentFlow passes each branch's *full* value to the reducer, so a list-concatenating field
    // started at ["t0"] ends as ['t0', 't0', 'A', 't0', 'b'].
    let mut trip = Trip::default();
    trip.merge(TripUpdate::default().cities(vec!["t0".into()]))
        .unwrap();
    trip.merge_parallel(
        [
            TripUpdate::default().cities(vec!["A".into()]),
            TripUpdate::default().cities(vec!["b".into()]),
        ],
        FanIn::Strict,
    )
    .unwrap();
    assert_eq!(trip.cities, ["t0", "A", "b"]);
    assert_ne!(trip.cities, ["t0", "t0", "A", "t0", "b"]);
}

#[test]
fn strict_fan_in_rejects_two_writes_to_a_last_write_wins_field() {
    let branches = || {
        [
            TripUpdate::default().nights(4_u32).cities(vec!["A".into()]),
            TripUpdate::default().cities(vec!["B".into()]),
            TripUpdate::default().nights(5_u32),
        ]
    };
    let mut trip = started();
    let before = trip.clone();
    let err = trip.merge_parallel(branches(), FanIn::Strict).unwrap_err();
    assert_eq!(err.category(), "state_validation_error");
    assert_eq!(err.field(), Some("nights"));
    assert!(
        err.to_string().contains("INVALID_CONCURRENT_GRAPH_UPDATE"),
        "{err}"
    );
    assert_eq!(trip, before, "no branch was applied");

    // A base field is checked the same way.
    let err = trip
        .merge_parallel(
            [
                TripUpdate::default().context_summary(Some("a".into())),
                TripUpdate::default().context_summary(None),
            ],
            FanIn::Strict,
        )
        .unwrap_err();
    assert_eq!(err.field(), Some("context_summary"));
    assert_eq!(trip, before);

    // Ordered: the last branch wins.
    trip.merge_parallel(branches(), FanIn::Ordered).unwrap();
    assert_eq!(trip.nights, 5);
    assert_eq!(trip.cities, ["Oslo", "A", "B"]);

    // One write per field is fine in Strict mode, and reducer fields take many.
    let mut trip = started();
    trip.merge_parallel(
        [
            TripUpdate::default().nights(9_u32).cities(vec!["A".into()]),
            TripUpdate::default()
                .destination(None)
                .cities(vec!["B".into()]),
        ],
        FanIn::Strict,
    )
    .unwrap();
    assert_eq!((trip.nights, trip.destination.clone()), (9, None));
}

#[test]
fn two_overwrites_of_one_field_in_a_step_are_an_error() {
    for mode in [FanIn::Ordered, FanIn::Strict] {
        let mut trip = started();
        let before = trip.clone();
        let err = trip
            .merge_parallel(
                [
                    TripUpdate::default().overwrite_cities(vec![]),
                    TripUpdate::default().cities(vec!["B".into()]),
                    TripUpdate::default().overwrite_cities(vec!["C".into()]),
                ],
                mode,
            )
            .unwrap_err();
        assert_eq!(err.category(), "state_validation_error");
        assert_eq!(err.field(), Some("cities"), "{mode:?}");
        assert!(err.to_string().contains("two Overwrites"), "{err}");
        assert_eq!(trip, before, "{mode:?}");

        // A base field too.
        let err = trip
            .merge_parallel(
                [
                    TripUpdate::default().overwrite_context(vec![]),
                    TripUpdate::default().overwrite_context(vec![]),
                ],
                mode,
            )
            .unwrap_err();
        assert_eq!(err.field(), Some("context"));
        assert_eq!(trip, before);
    }
}

#[test]
fn an_overwrite_wins_over_other_branches_ordinary_writes() {
    for overwrite_first in [true, false] {
        let overwrite = TripUpdate::default()
            .overwrite_cities(vec!["Fresh".into()])
            .overwrite_nights(1_u32);
        let ordinary = TripUpdate::default()
            .cities(vec!["Lost".into()])
            .nights(7_u32)
            .recent(vec![5]);
        let branches = if overwrite_first {
            [overwrite, ordinary]
        } else {
            [ordinary, overwrite]
        };
        let mut trip = started();
        // Not a Strict-mode conflict: the Overwrite decides the field.
        trip.merge_parallel(branches, FanIn::Strict).unwrap();
        assert_eq!(trip.cities, ["Fresh"], "overwrite first: {overwrite_first}");
        assert_eq!(trip.nights, 1);
        assert_eq!(trip.recent, [1, 2, 5], "fields it does not overwrite merge");
    }

    // The overwriting branch's own ordinary entry still merges on top of its Overwrite.
    let mut trip = started();
    trip.merge_parallel(
        [
            TripUpdate::default().cities(vec!["Lost".into()]),
            TripUpdate::default()
                .overwrite_cities(vec!["Fresh".into()])
                .cities(vec!["Own".into()]),
        ],
        FanIn::Ordered,
    )
    .unwrap();
    assert_eq!(trip.cities, ["Fresh", "Own"]);
}

#[test]
fn parallel_tool_results_fan_in() {
    let mut trip = started();
    let r1 = ToolResult::new(
        tool("t1", "call_1", "Oslo: 4°C"),
        TripUpdate::default()
            .cities(vec!["Oslo".into()])
            .weather(BTreeMap::from([("Oslo".to_string(), 4)])),
    );
    let r2 = ToolResult::new(
        tool("t2", "call_2", "Bergen: 7°C"),
        TripUpdate::default()
            .cities(vec!["Bergen".into()])
            .weather(BTreeMap::from([("Bergen".to_string(), 7)]))
            .context(vec![]),
    );
    trip.merge_parallel([r1.into_update(), r2.into_update()], FanIn::Strict)
        .unwrap();
    assert_eq!(
        context(&trip)[2..],
        pairs(&[("t1", "Oslo: 4°C"), ("t2", "Bergen: 7°C")])[..]
    );
    assert_eq!(trip.cities, ["Oslo", "Oslo", "Bergen"]);
    assert_eq!(trip.weather.len(), 2);
}

// ---------------------------------------------------------------------------------------------
// A user reducer (`with = f`) and `then`
// ---------------------------------------------------------------------------------------------

/// A user reducer that sees the order of its updates: each one is added to the log.
#[expect(
    clippy::ptr_arg,
    reason = "a with = f function takes &T, here &Vec<String>"
)]
fn logged(current: &Vec<String>, entry: String) -> Result<Vec<String>, String> {
    if entry.is_empty() {
        return Err(format!("an empty entry after {} entries", current.len()));
    }
    let mut next = current.clone();
    next.push(entry);
    Ok(next)
}

#[derive(AgentState, Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Audit {
    #[reducer(with = logged, update = String)]
    log: Vec<String>,
    count: u32,
}

#[test]
fn two_writes_to_a_user_reducer_field_apply_one_after_the_other() {
    let a = AuditUpdate::default().log("a".to_string());
    let b = AuditUpdate::default().log("b".to_string()).count(2_u32);
    // `then`: the function runs on each update in turn.
    let composed = a.clone().then(b.clone()).unwrap();
    let mut one = Audit::default();
    one.merge(composed.clone()).unwrap();
    let mut two = Audit::default();
    two.merge(a.clone()).unwrap();
    two.merge(b.clone()).unwrap();
    assert_eq!(one, two);
    assert_eq!(one.log, ["a", "b"]);
    // Parallel branches in one step, in branch order.
    let mut parallel = Audit::default();
    parallel
        .merge_parallel([b.clone(), a.clone()], FanIn::Ordered)
        .unwrap();
    assert_eq!(parallel.log, ["b", "a"]);
    // The composed update round-trips through JSON (a journal holds it).
    let json = serde_json::to_value(&composed).unwrap();
    assert_eq!(json["log"], json!({"__steps__": ["a", "b"]}));
    let back: AuditUpdate = serde_json::from_value(json).unwrap();
    assert_eq!(back, composed);
    // A failing step fails the whole merge, naming the field, and changes nothing.
    let bad = a.then(AuditUpdate::default().log(String::new())).unwrap();
    let err = one.merge(bad).unwrap_err();
    assert_eq!(err.category(), "reducer_error");
    assert_eq!(
        err.to_string(),
        "reducer `logged` failed on field `log`: an empty entry after 3 entries"
    );
    assert_eq!(one, two);
}

#[test]
fn two_writes_to_a_user_reducer_field_of_an_extension_compose_too() {
    let a = TripUpdate::default().budget(100).cities(vec!["A".into()]);
    let b = TripUpdate::default().budget(200);
    let mut trip = started();
    trip.merge_parallel([a.clone(), b.clone()], FanIn::Ordered)
        .unwrap();
    assert_eq!(trip.budget, 200);
    let err = trip
        .merge(b.then(TripUpdate::default().budget(-1)).unwrap())
        .unwrap_err();
    assert_eq!(err.field(), Some("budget"));
    assert!(err.to_string().contains("checked_budget"), "{err}");
    assert_eq!(trip.budget, 200);

    // With one of them setting it, they compose, and the result merges like the two in turn.
    let c = TripUpdate::default().cities(vec!["C".into()]).nights(8_u32);
    for (first, second) in [(a.clone(), c.clone()), (c, a)] {
        let composed = first.clone().then(second.clone()).unwrap();
        assert_eq!(
            composed.budget,
            Some(agentstate::reducers::Steps::from(100))
        );
        let (mut one, mut two) = (started(), started());
        one.merge(composed).unwrap();
        two.merge(first).unwrap();
        two.merge(second).unwrap();
        assert_eq!(one, two);
    }

    // An Overwrite of the field in the second update replaces the first's write: no combining.
    let composed = TripUpdate::default()
        .budget(100)
        .then(TripUpdate::default().overwrite_budget(5))
        .unwrap();
    let mut trip = started();
    trip.merge(composed).unwrap();
    assert_eq!(trip.budget, 5);
}

#[test]
fn then_composes_messages_like_merging_in_turn() {
    // add_messages in the second update drops an id the first one adds.
    let a = TripUpdate::default().context(vec![user("n", "first")]);
    let b = TripUpdate::default().context(vec![user("n", "second"), user("o", "other")]);
    let composed = a.clone().then(b.clone()).unwrap();
    let mut one = started();
    one.merge(composed).unwrap();
    let mut two = started();
    two.merge(a).unwrap();
    two.merge(b).unwrap();
    assert_eq!(one, two);
    assert_eq!(
        context(&one)[2..],
        pairs(&[("n", "first"), ("o", "other")])[..]
    );
}

#[test]
fn then_refuses_a_removal_followed_by_putting_the_message_back() {
    // upsert_messages (LangGraph): merged in turn, a message removed and then sent again goes to
    // the end of the list; inside one update a removal followed by the same id replaces the
    // message in place. No single update says the first, so `then` refuses instead of giving
    // another list.
    let m = |id: &str, text: &str| msg(id, Role::Assistant, text);
    let start = Every {
        history: vec![m("a", "one"), m("b", "two")],
        ..Every::default()
    };
    let a = EveryUpdate::default().history(vec![MessageUpdate::Remove("a".into())]);
    let b = EveryUpdate::default().history(vec![MessageUpdate::from(m("a", "back"))]);
    let mut in_turn = start.clone();
    in_turn.merge(a.clone()).unwrap();
    in_turn.merge(b.clone()).unwrap();
    assert_eq!(in_turn.history, [m("b", "two"), m("a", "back")]);

    let err = a.clone().then(b.clone()).unwrap_err();
    assert_eq!(err.category(), "reducer_error");
    assert_eq!(err.field(), Some("history"));
    // A fan-in of the two is refused the same way, and changes nothing.
    let mut fanned_in = start.clone();
    let err = fanned_in
        .merge_parallel([a.clone(), b], FanIn::Ordered)
        .unwrap_err();
    assert_eq!(err.field(), Some("history"));
    assert_eq!(fanned_in, start);

    // Removing and then sending another id, or a second update that starts with a remove-all,
    // combine.
    let c = EveryUpdate::default().history(vec![MessageUpdate::from(m("c", "new"))]);
    let mut at_once = start.clone();
    at_once.merge(a.clone().then(c).unwrap()).unwrap();
    assert_eq!(at_once.history, [m("b", "two"), m("c", "new")]);
    let reset = EveryUpdate::default().history(vec![
        MessageUpdate::RemoveAll,
        MessageUpdate::from(m("a", "only")),
    ]);
    let mut at_once = start;
    at_once.merge(a.then(reset).unwrap()).unwrap();
    assert_eq!(at_once.history, [m("a", "only")]);
}

// ---------------------------------------------------------------------------------------------
// Journal
// ---------------------------------------------------------------------------------------------

#[test]
fn a_journal_records_merged_updates_and_rebuilds_from_a_checkpoint() {
    let start = started();
    let mut journal = Journal::new(start.clone());
    journal
        .merge(TripUpdate::default().cities(vec!["Bergen".into()]))
        .unwrap();
    journal
        .merge(TripUpdate::default().context(vec![assistant("a2", "ok")]))
        .unwrap();
    let checkpoint = journal.state().clone();
    let at = journal.updates().len();
    // A failed merge changes nothing and records nothing.
    assert!(journal.merge(TripUpdate::default().budget(-1)).is_err());
    assert_eq!(journal.updates().len(), 2);
    assert_eq!(journal.state(), &checkpoint);
    journal
        .merge(TripUpdate::default().overwrite_cities(vec![]).nights(1_u32))
        .unwrap();
    journal
        .merge(TripUpdate::default().recent(vec![7, 8]))
        .unwrap();

    assert_eq!(journal.since(at).len(), 2);
    assert_eq!(journal.since(0), journal.updates());
    assert!(journal.since(4).is_empty());
    assert!(
        journal.since(99).is_empty(),
        "past the end is empty, not a panic"
    );

    // What a checkpoint stores: the state at `at`, then only the updates since.
    let saved = serde_json::to_string(journal.since(at)).unwrap();
    let since: Vec<TripUpdate> = serde_json::from_str(&saved).unwrap();
    let rebuilt = Journal::replay(checkpoint, since).unwrap();
    assert_eq!(&rebuilt, journal.state());
    assert!(rebuilt.cities.is_empty());
    assert_eq!(rebuilt.recent, [2, 7, 8]);

    let (state, updates) = journal.into_parts();
    assert_eq!(Journal::replay(start, updates).unwrap(), state);
}

// ---------------------------------------------------------------------------------------------
// Property tests: `then` and replay, on a state holding every canonical reducer (and the message
// reducers), on plain `Vec`s and on the indexed or double-ended collections.
// ---------------------------------------------------------------------------------------------

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Item {
    k: u8,
    v: u8,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Rec {
    id: u8,
    v: u8,
}

impl HasId for Rec {
    type Id = u8;
    fn id(&self) -> &u8 {
        &self.id
    }
}

#[derive(AgentState, Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
// Two `add_messages` fields: which one receives messages must be named.
#[agent_state(messages = chat)]
pub struct Every {
    title: Option<String>,
    count: u8,
    #[reducer(append)]
    log: Vec<u8>,
    #[reducer(append)]
    log_deque: VecDeque<u8>,
    #[reducer(merge)]
    tags: BTreeMap<u8, u8>,
    #[reducer(merge)]
    tags_hash: HashMap<u8, u8>,
    #[reducer(bounded_append(max_len = 3))]
    recent: Vec<u8>,
    #[reducer(bounded_append(max_len = 3))]
    recent_deque: VecDeque<u8>,
    #[reducer(dedupe_append)]
    seen: Vec<u8>,
    #[reducer(dedupe_append(key = k))]
    first_by_key: Vec<Item>,
    #[reducer(dedupe_append(key = k))]
    first_by_key_list: KeyedList<Item>,
    #[reducer(merge_by_key(key = k))]
    by_key: Vec<Item>,
    #[reducer(merge_by_key(key = k))]
    by_key_list: KeyedList<Item>,
    #[reducer(concat_flatten)]
    flat: Vec<u8>,
    #[reducer(concat_flatten)]
    flat_deque: VecDeque<u8>,
    #[reducer(merge_all)]
    folded: BTreeMap<u8, u8>,
    #[reducer(add_messages)]
    chat: Vec<Message>,
    #[reducer(add_messages)]
    chat_list: MessageList,
    #[reducer(append_items)]
    items: Vec<Rec>,
    #[reducer(append_items)]
    items_list: KeyedList<Rec>,
    #[reducer(upsert_messages)]
    history: Vec<Message>,
    #[reducer(upsert_messages)]
    history_list: MessageList,
}

/// `Some` half of the time.
fn maybe<S: Strategy>(s: S) -> impl Strategy<Value = Option<S::Value>> {
    prop::option::weighted(0.5, s)
}

fn bytes() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(0u8..6, 0..4)
}

fn map() -> impl Strategy<Value = BTreeMap<u8, u8>> {
    prop::collection::btree_map(0u8..4, 0u8..4, 0..3)
}

fn hash_map() -> impl Strategy<Value = HashMap<u8, u8>> {
    prop::collection::hash_map(0u8..4, 0u8..4, 0..3)
}

fn items() -> impl Strategy<Value = Vec<Item>> {
    prop::collection::vec((0u8..4, 0u8..4).prop_map(|(k, v)| Item { k, v }), 0..4)
}

fn recs() -> impl Strategy<Value = Vec<Rec>> {
    prop::collection::vec((0u8..4, 0u8..4).prop_map(|(id, v)| Rec { id, v }), 0..4)
}

/// Messages with ids from a small pool (so that ids collide), sometimes a delta.
fn message() -> impl Strategy<Value = Message> {
    (0u8..5, 0u8..3, prop::bool::weighted(0.15)).prop_map(|(id, text, delta)| {
        Message::text_message(format!("text {text}"), Role::Assistant)
            .with_id(format!("m{id}"))
            .with_timestamp(1.0)
            .with_delta(delta)
    })
}

fn messages() -> impl Strategy<Value = Vec<Message>> {
    prop::collection::vec(message(), 0..4)
}

/// `upsert_messages` entries: mostly messages, some removals, rarely a remove-all. Removals of
/// ids that are not there are dropped by [`known_removals`] before use.
fn message_updates() -> impl Strategy<Value = Vec<MessageUpdate>> {
    let entry = prop_oneof![
        6 => message().prop_map(MessageUpdate::Message),
        3 => (0u8..5).prop_map(|id| MessageUpdate::Remove(format!("m{id}").into())),
        1 => Just(MessageUpdate::RemoveAll),
    ];
    prop::collection::vec(entry, 0..5)
}

/// An entry and an Overwrite for one field, each present or not.
fn slot<U: std::fmt::Debug + 'static, T: std::fmt::Debug + 'static>(
    update: impl Strategy<Value = U> + 'static,
    overwrite: impl Strategy<Value = T> + 'static,
) -> BoxedStrategy<(Option<U>, Option<T>)> {
    (maybe(update), prop::option::weighted(0.2, overwrite)).boxed()
}

fn every_update() -> BoxedStrategy<EveryUpdate> {
    let title = || maybe(prop::sample::select(vec!["a", "b"]).prop_map(str::to_owned));
    let first = (
        slot(title(), title()),
        slot(0u8..4, 0u8..4),
        slot(bytes(), bytes()),
        slot(bytes(), bytes()),
        slot(map(), map()),
        slot(hash_map(), hash_map()),
        // bounded_append(3): Overwrites may go over the bound.
        slot(bytes(), prop::collection::vec(0u8..6, 0..6)),
        slot(bytes(), prop::collection::vec(0u8..6, 0..6)),
        slot(bytes(), bytes()),
        slot(items(), items()),
        slot(items(), items()),
    );
    let second = (
        slot(items(), items()),
        slot(items(), items()),
        slot(prop::collection::vec(bytes(), 0..3), bytes()),
        slot(prop::collection::vec(bytes(), 0..3), bytes()),
        slot(prop::collection::vec(map(), 0..3), map()),
        slot(messages(), messages()),
        slot(messages(), messages()),
        slot(recs(), recs()),
        slot(recs(), recs()),
        slot(message_updates(), messages()),
        slot(message_updates(), messages()),
    );
    (first, second)
        .prop_map(|(first, second)| {
            let (
                title,
                count,
                log,
                log_deque,
                tags,
                tags_hash,
                recent,
                recent_deque,
                seen,
                fbk,
                fbkl,
            ) = first;
            let (
                by_key,
                by_key_list,
                flat,
                flat_deque,
                folded,
                chat,
                chat_list,
                items,
                items_list,
                history,
                history_list,
            ) = second;
            let mut u = EveryUpdate::default();
            (u.title, u.overwrite.title) = title;
            (u.count, u.overwrite.count) = count;
            (u.log, u.overwrite.log) = log;
            (u.log_deque, u.overwrite.log_deque) =
                (log_deque.0.map(Into::into), log_deque.1.map(Into::into));
            (u.tags, u.overwrite.tags) = tags;
            (u.tags_hash, u.overwrite.tags_hash) = tags_hash;
            (u.recent, u.overwrite.recent) = recent;
            (u.recent_deque, u.overwrite.recent_deque) = (
                recent_deque.0.map(Into::into),
                recent_deque.1.map(Into::into),
            );
            (u.seen, u.overwrite.seen) = seen;
            (u.first_by_key, u.overwrite.first_by_key) = fbk;
            (u.first_by_key_list, u.overwrite.first_by_key_list) =
                (fbkl.0.map(Into::into), fbkl.1.map(Into::into));
            (u.by_key, u.overwrite.by_key) = by_key;
            (u.by_key_list, u.overwrite.by_key_list) =
                (by_key_list.0.map(Into::into), by_key_list.1.map(Into::into));
            (u.flat, u.overwrite.flat) = flat;
            (u.flat_deque, u.overwrite.flat_deque) = (
                flat_deque
                    .0
                    .map(|v| v.into_iter().map(Into::into).collect()),
                flat_deque.1.map(Into::into),
            );
            (u.folded, u.overwrite.folded) = folded;
            (u.chat, u.overwrite.chat) = chat;
            (u.chat_list, u.overwrite.chat_list) =
                (chat_list.0.map(Into::into), chat_list.1.map(Into::into));
            (u.items, u.overwrite.items) = items;
            (u.items_list, u.overwrite.items_list) =
                (items_list.0.map(Into::into), items_list.1.map(Into::into));
            (u.history, u.overwrite.history) = history;
            (u.history_list, u.overwrite.history_list) =
                (history_list.0, history_list.1.map(Into::into));
            u
        })
        .boxed()
}

/// A start state: any update's Overwrites applied to the default state, so that fields hold
/// anything, including duplicate keys and lists over their bound.
fn every_state() -> impl Strategy<Value = Every> {
    every_update().prop_map(|u| {
        let mut state = Every::default();
        let overwrites = EveryUpdate {
            overwrite: u.overwrite,
            ..EveryUpdate::default()
        };
        state.merge(overwrites).expect("overwrites never fail");
        state
    })
}

/// Drops the removals of ids that the `upsert_messages` field would not have when the entry
/// merges (LangGraph rejects those), given the ids the field holds before the update.
fn known_removals(
    entries: &mut Vec<MessageUpdate>,
    before: &[Message],
    overwrite: Option<&[Message]>,
) {
    let base = overwrite.unwrap_or(before);
    let last_reset = entries
        .iter()
        .rposition(|e| matches!(e, MessageUpdate::RemoveAll));
    let mut known: HashSet<_> = match last_reset {
        Some(_) => HashSet::new(),
        None => base.iter().map(|m| m.message_id.clone()).collect(),
    };
    let start = last_reset.map_or(0, |at| at + 1);
    let mut i = 0;
    entries.retain(|entry| {
        let at = i;
        i += 1;
        if at < start {
            return true;
        }
        match entry {
            MessageUpdate::Message(m) => {
                known.insert(m.message_id.clone());
                true
            }
            MessageUpdate::Remove(id) => known.contains(id),
            MessageUpdate::RemoveAll => true,
        }
    });
}

/// `update` with only the removals that merging it into `state` allows.
fn mergeable(state: &Every, mut update: EveryUpdate) -> EveryUpdate {
    if let Some(entries) = update.history.as_mut() {
        known_removals(entries, &state.history, update.overwrite.history.as_deref());
    }
    if let Some(entries) = update.history_list.as_mut() {
        let overwrite = update.overwrite.history_list.as_ref().map(|l| l.as_slice());
        known_removals(entries, state.history_list.as_slice(), overwrite);
    }
    update
}

/// The ids whose last entry in `entries` (after its last remove-all) is a removal: gone after
/// the merge, whatever the field held.
fn removed_ids(entries: &[MessageUpdate]) -> HashSet<agentstate::message::MessageId> {
    let start = entries
        .iter()
        .rposition(|e| matches!(e, MessageUpdate::RemoveAll))
        .map_or(0, |at| at + 1);
    let mut removed = HashSet::new();
    for entry in &entries[start..] {
        match entry {
            MessageUpdate::Message(m) => {
                removed.remove(&m.message_id);
            }
            MessageUpdate::Remove(id) => {
                removed.insert(id.clone());
            }
            MessageUpdate::RemoveAll => {}
        }
    }
    removed
}

/// Whether `second` puts back a message `first` removes (with no remove-all in `second`):
/// merged in turn the message goes to the end, which no single upsert update can say.
fn puts_back_a_removed_message(
    first: Option<&Vec<MessageUpdate>>,
    second: Option<&Vec<MessageUpdate>>,
) -> bool {
    let (Some(first), Some(second)) = (first, second) else {
        return false;
    };
    let removed = removed_ids(first);
    !second.iter().any(|e| matches!(e, MessageUpdate::RemoveAll))
        && second
            .iter()
            .any(|e| matches!(e, MessageUpdate::Message(m) if removed.contains(&m.message_id)))
}

fn check_then_law(start: Every, a: EveryUpdate, b: EveryUpdate) -> Result<(), TestCaseError> {
    let a = mergeable(&start, a);
    let mut in_turn = start.clone();
    in_turn.merge(a.clone()).expect("a merges");
    let b = mergeable(&in_turn, b);
    in_turn.merge(b.clone()).expect("b merges");

    match a.clone().then(b.clone()) {
        Ok(composed) => {
            let mut at_once = start.clone();
            at_once.merge(composed).expect("the composition merges");
            prop_assert_eq!(at_once, in_turn);
        }
        Err(err) => {
            // The one composition that cannot be written as one update.
            let history = puts_back_a_removed_message(a.history.as_ref(), b.history.as_ref())
                && b.overwrite.history.is_none();
            let history_list =
                puts_back_a_removed_message(a.history_list.as_ref(), b.history_list.as_ref())
                    && b.overwrite.history_list.is_none();
            prop_assert!(
                history || history_list,
                "then failed where it should not: {}",
                err
            );
            prop_assert!(
                matches!(err.field(), Some("history" | "history_list")),
                "{}",
                err
            );
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// `merge(a.then(b)) == merge(a); merge(b)` for every reducer, with Overwrites.
    #[test]
    fn then_equals_merging_in_turn(start in every_state(), a in every_update(), b in every_update()) {
        check_then_law(start, a, b)?;
    }

    /// Parallel fan-in of updates without Overwrites folds them like merging in turn (in
    /// `FanIn::Ordered`, where the last branch's last_write_wins value wins).
    #[test]
    fn ordered_fan_in_equals_merging_in_branch_order(
        start in every_state(),
        branches in prop::collection::vec(every_update(), 0..4),
    ) {
        let mut in_turn = start.clone();
        let mut mergeable_branches = Vec::new();
        for mut branch in branches {
            branch.overwrite = Default::default();
            // Only branch sequences whose every pair composes (see `check_then_law`).
            let branch = mergeable(&in_turn, branch);
            in_turn.merge(branch.clone()).expect("a branch merges");
            mergeable_branches.push(branch);
        }
        let mut fanned_in = start.clone();
        match fanned_in.merge_parallel(mergeable_branches, FanIn::Ordered) {
            Ok(()) => prop_assert_eq!(fanned_in, in_turn),
            Err(err) => {
                prop_assert!(matches!(err.field(), Some("history" | "history_list")), "{}", err);
                prop_assert_eq!(fanned_in, start, "a failed fan-in changes nothing");
            }
        }
    }

    /// Replaying the updates a journal recorded, as they are or after a JSON round-trip, gives
    /// the journal's state; so does replaying `since(n)` from the state after n updates.
    #[test]
    fn replay_rebuilds_the_state(
        start in every_state(),
        updates in prop::collection::vec(every_update(), 0..6),
        checkpoint in 0usize..7,
    ) {
        let mut journal = Journal::new(start.clone());
        let mut at_checkpoint = (checkpoint == 0).then(|| start.clone());
        for update in updates {
            let update = mergeable(journal.state(), update);
            journal.merge(update).expect("a mergeable update merges");
            if journal.updates().len() == checkpoint {
                at_checkpoint = Some(journal.state().clone());
            }
        }
        let replayed = Journal::replay(start.clone(), journal.updates().to_vec()).unwrap();
        prop_assert_eq!(&replayed, journal.state());

        let saved = serde_json::to_string(journal.updates()).unwrap();
        let restored: Vec<EveryUpdate> = serde_json::from_str(&saved).unwrap();
        prop_assert_eq!(&restored, journal.updates());
        let replayed = Journal::replay(start.clone(), restored).unwrap();
        prop_assert_eq!(&replayed, journal.state());

        // Each update also parses as a strict JSON update.
        for update in journal.updates() {
            let json = serde_json::to_value(update).unwrap();
            prop_assert_eq!(&EveryUpdate::from_json(json).unwrap(), update);
        }

        match at_checkpoint {
            Some(state) => {
                let rebuilt = Journal::replay(state, journal.since(checkpoint).to_vec()).unwrap();
                prop_assert_eq!(&rebuilt, journal.state());
            }
            None => prop_assert!(journal.since(checkpoint).is_empty()),
        }
    }
}

/// The state of `tests/data/langgraph_fan_in.json`: LangGraph's
/// `log: Annotated[list, operator.add]` and `last: int`.
#[derive(AgentState, Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
struct FanInLog {
    #[reducer(append)]
    log: Vec<i64>,
    last: i64,
}

/// `tests/data/langgraph_fan_in.json` (`generate_langgraph_fan_in.py`): 400 steps of one to four
/// parallel branches run by a real LangGraph graph. `merge_parallel` with `FanIn::Strict` gives
/// the same state on every one, and fails exactly where LangGraph does (two writes to `last`, two
/// Overwrites of `log`), leaving the state unchanged.
#[test]
fn merge_parallel_strict_agrees_with_a_langgraph_step() {
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/langgraph_fan_in.json");
    let cases: Vec<serde_json::Value> =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let (mut merged, mut refused) = (0, 0);
    for case in &cases {
        let branches: Vec<FanInLogUpdate> = case["branches"]
            .as_array()
            .unwrap()
            .iter()
            .map(|branch| FanInLogUpdate::from_json(branch.clone()).unwrap())
            .collect();
        let start = FanInLog {
            log: vec![0],
            last: 0,
        };
        let mut state = start.clone();
        match (
            state.merge_parallel(branches, FanIn::Strict),
            case["expect"].get("ok"),
        ) {
            (Ok(()), Some(expected)) => {
                assert_eq!(serde_json::to_value(&state).unwrap(), *expected, "{case}");
                merged += 1;
            }
            (Err(e), None) => {
                assert_eq!(e.category(), "state_validation_error", "{case}");
                assert_eq!(state, start, "unchanged after {case}");
                refused += 1;
            }
            (got, _) => panic!("{case}: ours {got:?}, state {state:?}"),
        }
    }
    assert!(
        merged > 200 && refused > 50,
        "{merged} merged, {refused} refused"
    );
}

// ---------------------------------------------------------------------------------------------
// Setters
// ---------------------------------------------------------------------------------------------

#[derive(AgentState, Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Notebook {
    #[reducer(append)]
    log: Vec<String>,
    #[reducer(bounded_append(max_len = 3))]
    recent: VecDeque<String>,
    #[reducer(append)]
    sizes: Vec<u16>,
}

#[test]
fn list_setters_take_arrays_and_vecs_of_str_and_integer_literals_keep_the_field_type() {
    let mut book = Notebook::default();
    book.merge(
        NotebookUpdate::default()
            .log(["a", "b"])
            .recent(["x", "y"])
            .sizes([1, 2]),
    )
    .unwrap();
    book.merge(
        NotebookUpdate::default()
            .log(["c"])
            .recent(["z", "w"])
            .sizes(vec![3]),
    )
    .unwrap();
    assert_eq!(book.log, ["a", "b", "c"]);
    assert_eq!(book.recent, ["y", "z", "w"]);
    assert_eq!(book.sizes, [1u16, 2, 3]);
}

/// A state whose one `add_messages` field is the messages field without being named.
#[derive(AgentState, Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Chat {
    #[reducer(add_messages)]
    messages: Vec<Message>,
    turns: u32,
}

#[test]
fn the_one_add_messages_field_receives_messages_without_being_named() {
    let mut chat = Chat::default();
    chat.apply_output(NodeOutput::from(user("m1", "hi")))
        .unwrap();
    assert_eq!(chat.messages, [user("m1", "hi")]);

    let result = ToolResult::new(tool("m2", "c1", "42"), ChatUpdate::default().turns(2));
    chat.apply_output(NodeOutput::from(result)).unwrap();
    assert_eq!(chat.messages, [user("m1", "hi"), tool("m2", "c1", "42")]);
    assert_eq!(chat.turns, 2);
}

// ---------------------------------------------------------------------------------------------
// `add` (LangGraph's `Annotated[int, operator.add]`)
// ---------------------------------------------------------------------------------------------

#[derive(AgentState, Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Tally {
    #[reducer(add)]
    steps: u8,
    #[reducer(add)]
    cost: f64,
    #[reducer(add)]
    score: serde_json::Value,
}

#[test]
fn add_sums_numbers_and_an_overflow_is_a_reducer_error_that_changes_nothing() {
    let mut tally = Tally::default();
    tally
        .merge(TallyUpdate::default().steps(200).cost(0.5).score(json!(3)))
        .unwrap();
    tally
        .apply_json(json!({"steps": 50, "cost": 0.25, "score": -1}))
        .unwrap();
    assert_eq!(
        (tally.steps, tally.cost, &tally.score),
        (250, 0.75, &json!(2))
    );

    let before = tally.clone();
    let err = tally
        .merge(TallyUpdate::default().cost(1.0).steps(6))
        .unwrap_err();
    assert_eq!(err.category(), "reducer_error");
    assert_eq!(
        err.to_string(),
        "reducer `add` failed on field `steps`: adding 6 to 250 overflows u8 (its range is 0 to 255)"
    );
    assert_eq!(tally, before);
    let err = tally.apply_json(json!({"score": "many"})).unwrap_err();
    assert_eq!(
        err.to_string(),
        "reducer `add` failed on field `score`: the update must be a number, got a string"
    );

    // Parallel branches and `then` add both writes.
    let (a, b) = (
        TallyUpdate::default().steps(1).score(json!(10)),
        TallyUpdate::default().steps(2).score(json!(0.5)),
    );
    let mut parallel = before.clone();
    parallel
        .merge_parallel([a.clone(), b.clone()], FanIn::Strict)
        .unwrap();
    assert_eq!((parallel.steps, &parallel.score), (253, &json!(12.5)));
    let mut composed = before.clone();
    composed.merge(a.then(b).unwrap()).unwrap();
    assert_eq!(composed, parallel);

    let schema = Tally::schema();
    let steps = &schema.fields()[0];
    assert_eq!(
        (steps.reducer.name.as_str(), steps.round_trip_idempotent),
        ("add", false)
    );
}

#[test]
fn a_dynamic_schema_declares_add_on_numbers() {
    use agentstate::schema::{Field, Schema};
    let schema = Schema::builder()
        .field(
            Field::new("count")
                .reducer("add")
                .type_name("int")
                .default(json!(0)),
        )
        .build()
        .unwrap();
    let mut state = schema.initial_state();
    schema.merge(&mut state, json!({"count": 2})).unwrap();
    schema.merge(&mut state, json!({"count": 3})).unwrap();
    assert_eq!(state["count"], json!(5));
    assert!(!schema.fields()[0].round_trip_idempotent);
    let err = schema.merge(&mut state, json!({"count": [1]})).unwrap_err();
    assert_eq!(err.category(), "reducer_error");
    assert_eq!(state["count"], json!(5));
    // A near miss of the name is a configuration error with a hint.
    let err = Schema::builder()
        .field(Field::new("count").reducer("ad"))
        .build()
        .unwrap_err();
    assert!(err.to_string().contains("did you mean `add`?"), "{err}");
}

#[test]
fn a_setter_called_again_replaces_its_value_and_then_combines_two_updates() {
    // A setter sets the update's entry; to combine two values through the reducer, compose
    // two updates (a setter that composes cost the derive's compile-time goal, see the notes).
    let again = NotebookUpdate::default().log(["a"]).log(["b"]);
    assert_eq!(again, NotebookUpdate::default().log(["b"]));
    let combined = NotebookUpdate::default()
        .log(["a"])
        .then(NotebookUpdate::default().log(["b"]))
        .unwrap();
    let mut book = Notebook::default();
    book.merge(combined).unwrap();
    assert_eq!(book.log, ["a", "b"]);
    let mut tally = Tally::default();
    tally
        .merge(
            TallyUpdate::default()
                .steps(2)
                .then(TallyUpdate::default().steps(3))
                .unwrap(),
        )
        .unwrap();
    assert_eq!(tally.steps, 5);
}
