//! The semantics of every reducer, in this project's own words: each edge case of the reference
//! semantics (AgentFlow, OpenArmature, LangGraph) and the behaviour of every OpenArmature
//! conformance case, on typed fields (plain and indexed containers) and on dynamic schemas.
//!
//! The conformance fixtures themselves are run by `tests/conformance.rs` when they are present;
//! this file stands without them.

use agentstate::message::{Message, MessageId, Role, ToolCall};
use agentstate::reducers::{
    self, by_field, by_value, remove_tool_messages, AddMessages, Append, AppendItems,
    BoundedAppend, ConcatFlatten, DedupeAppend, HasId, LastWriteWins, Merge, MergeAll, MergeByKey,
    Merges, MessageUpdate, Reducer, ReducerInfo, ReplaceMessages, ReplaceValue, UpsertMessages,
    REMOVE_ALL_MESSAGES,
};
use agentstate::schema::{Field, Schema};
use agentstate::state::{AgentState, AgentStateUpdate, ExecutionState, ExecutionStatus};
use agentstate::{Error, State};
use agentstate::{KeyedList, MessageList};
use serde_json::{json, Map, Value};
use std::collections::{BTreeMap, HashMap, VecDeque};

// =============================================================================================
// Helpers

/// A record with an id, for the keyed reducers.
#[derive(Debug, Clone, PartialEq)]
struct Task {
    id: u32,
    status: &'static str,
}

impl HasId for Task {
    type Id = u32;
    fn id(&self) -> &u32 {
        &self.id
    }
}

fn task(id: u32, status: &'static str) -> Task {
    Task { id, status }
}

fn task_id() -> agentstate::reducers::KeyRef<impl Fn(&Task) -> &u32 + Clone, u32> {
    by_field(|t: &Task| &t.id)
}

/// Merges `updates` one after the other into `start`, held once as a `Vec` and once as a
/// `KeyedList` (whose index then lives across the merges), checks that both agree, and returns
/// the result.
fn vec_and_keyed<R>(reducer: &R, start: Vec<Task>, updates: &[Vec<Task>]) -> Vec<Task>
where
    R: Reducer<Vec<Task>, Update = Vec<Task>> + Reducer<KeyedList<Task>, Update = KeyedList<Task>>,
{
    let mut plain = start.clone();
    let mut keyed = KeyedList::from(start);
    for update in updates {
        reducer.reduce(&mut plain, update.clone()).unwrap();
        reducer.reduce(&mut keyed, update.clone().into()).unwrap();
        assert_eq!(
            keyed.as_slice(),
            plain.as_slice(),
            "Vec and KeyedList agree"
        );
    }
    plain
}

fn user(id: &str, text: &str) -> Message {
    Message::text_message(text, Role::User)
        .with_timestamp(0.0)
        .with_id(id)
}

fn assistant(id: &str, text: &str) -> Message {
    Message::text_message(text, Role::Assistant)
        .with_timestamp(0.0)
        .with_id(id)
}

fn delta(id: &str, text: &str) -> Message {
    let mut message = Message::text_message(text, Role::Assistant)
        .with_timestamp(0.0)
        .with_id(id);
    message.delta = true;
    message
}

/// An assistant message that calls a tool.
fn calls_tool(id: &str) -> Message {
    Message::text_message("", Role::Assistant)
        .with_timestamp(0.0)
        .with_id(id)
        .with_tool_calls(vec![ToolCall::new("c1", "f", json!({}))])
}

fn tool(id: &str) -> Message {
    Message::text_message("result", Role::Tool)
        .with_timestamp(0.0)
        .with_id(id)
}

fn system(id: &str) -> Message {
    Message::text_message("be brief", Role::System)
        .with_timestamp(0.0)
        .with_id(id)
}

fn ids(messages: &[Message]) -> Vec<MessageId> {
    messages.iter().map(|m| m.message_id.clone()).collect()
}

fn mid(id: &str) -> MessageId {
    MessageId::from(id)
}

/// Merges into a `Vec<Message>` and a `MessageList` alike, checking that both agree.
fn vec_and_list<R, U>(reducer: &R, start: Vec<Message>, updates: &[U]) -> Vec<Message>
where
    R: Reducer<Vec<Message>, Update = U> + Reducer<MessageList>,
    <R as Merges<MessageList>>::Update: From<U>,
    U: Clone,
{
    let mut plain = start.clone();
    let mut list = MessageList::from(start);
    for update in updates {
        Reducer::<Vec<Message>>::reduce(reducer, &mut plain, update.clone()).unwrap();
        Reducer::<MessageList>::reduce(reducer, &mut list, update.clone().into()).unwrap();
        assert_eq!(
            list.as_slice(),
            plain.as_slice(),
            "Vec and MessageList agree"
        );
    }
    plain
}

/// A dynamic schema with one field `f` declared by `decl`.
fn one_field(decl: Value) -> Schema {
    Schema::from_json(&json!({ "fields": { "f": decl } })).expect("a valid declaration")
}

/// Merges each update into field `f` of a fresh state of `schema`, as node `n`; the field's
/// final value, or the first error.
fn run_field(schema: &Schema, updates: &[Value]) -> Result<Value, Error> {
    let mut state = schema.initial_state();
    for update in updates {
        schema.merge_from("n", &mut state, json!({ "f": update }))?;
    }
    Ok(state["f"].clone())
}

fn to_json<T: serde::Serialize>(value: &T) -> Value {
    serde_json::to_value(value).expect("serializable")
}

fn messages_of(value: Value) -> Vec<Message> {
    serde_json::from_value(value).expect("a list of messages")
}

/// Asserts that `result` is a `reducer_error` on field `f` from node `n`, and returns it.
fn assert_reducer_error(result: Result<Value, Error>, reducer: &str) -> Error {
    let err = result.expect_err("a reducer_error");
    assert_eq!(err.category(), "reducer_error", "{err}");
    match &err {
        Error::Reducer {
            field,
            reducer: name,
            node,
            ..
        } => {
            assert_eq!(field, "f");
            assert_eq!(name, reducer);
            assert_eq!(node.as_deref(), Some("n"));
        }
        other => panic!("expected Error::Reducer, got {other:?}"),
    }
    err
}

/// A small deterministic generator for the property checks.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        // xorshift64*
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

// =============================================================================================
// last_write_wins and replace_value

#[test]
fn last_write_wins_replaces_whatever_the_value() {
    let mut title = String::from("draft");
    LastWriteWins.reduce(&mut title, "first".into()).unwrap();
    LastWriteWins.reduce(&mut title, "second".into()).unwrap();
    assert_eq!(title, "second");

    let mut list = vec![1, 2, 3];
    LastWriteWins.reduce(&mut list, vec![]).unwrap();
    assert!(list.is_empty(), "an empty update is a value like any other");

    let mut maybe = Some(3);
    LastWriteWins.reduce(&mut maybe, None).unwrap();
    assert_eq!(maybe, None);

    assert_eq!(reducers::last_write_wins("old", "new"), "new");
    assert_eq!(LastWriteWins.name(), "last_write_wins");
}

#[test]
fn replace_value_is_last_write_wins_under_agentflows_name() {
    let mut value = json!({"a": 1});
    ReplaceValue.reduce(&mut value, json!([1])).unwrap();
    assert_eq!(value, json!([1]));
    assert_eq!(reducers::replace_value(1, 2), 2);
    assert_eq!(ReplaceValue.name(), "replace_value");
}

#[test]
fn dynamic_last_write_wins_is_the_default_and_later_nodes_win() {
    // No reducer declared: last_write_wins.
    let schema = one_field(json!({"type": "string", "default": ""}));
    assert_eq!(schema.fields()[0].reducer.name, "last_write_wins");
    assert_eq!(schema.initial_state()["f"], json!(""));
    assert_eq!(
        run_field(&schema, &[json!("first"), json!("second")]).unwrap(),
        json!("second")
    );
    let replace = one_field(json!({"reducer": "replace_value", "default": [1, 2]}));
    assert_eq!(run_field(&replace, &[json!([3])]).unwrap(), json!([3]));
    // A field declared without a default starts as null.
    let bare = one_field(json!({}));
    assert_eq!(bare.initial_state()["f"], Value::Null);
}

// =============================================================================================
// append

#[test]
fn append_keeps_order_and_duplicates_over_several_merges() {
    let mut items = vec!["seed"];
    Append.reduce(&mut items, vec!["x", "y"]).unwrap();
    Append.reduce(&mut items, vec!["z", "x"]).unwrap();
    Append.reduce(&mut items, vec![]).unwrap();
    assert_eq!(items, ["seed", "x", "y", "z", "x"]);

    let mut deque = VecDeque::from(["seed"]);
    Append.reduce(&mut deque, vec!["x", "y"].into()).unwrap();
    Append.reduce(&mut deque, vec!["z"].into()).unwrap();
    assert_eq!(deque, ["seed", "x", "y", "z"]);

    assert_eq!(reducers::append(vec![1], vec![1, 2]), [1, 1, 2]);
}

#[test]
fn dynamic_append_from_a_default_and_a_non_list_update() {
    let schema =
        one_field(json!({"type": "list<string>", "reducer": "append", "default": ["seed"]}));
    assert_eq!(
        run_field(&schema, &[json!(["x", "y"]), json!(["z"])]).unwrap(),
        json!(["seed", "x", "y", "z"])
    );
    let err = assert_reducer_error(run_field(&schema, &[json!("x")]), "append");
    assert!(err.to_string().contains("must be a list"), "{err}");
    // An item of the wrong type is caught by the declared type.
    let err = run_field(&schema, &[json!([1])]).unwrap_err();
    assert_eq!(err.category(), "state_validation_error");
}

// =============================================================================================
// merge

#[test]
fn merge_is_shallow_and_the_updates_keys_win_on_every_map_type() {
    let mut btree = BTreeMap::from([("source", "seed")]);
    Merge
        .reduce(
            &mut btree,
            BTreeMap::from([("author", "alice"), ("stage", "draft")]),
        )
        .unwrap();
    Merge
        .reduce(
            &mut btree,
            BTreeMap::from([("stage", "final"), ("reviewer", "bob")]),
        )
        .unwrap();
    assert_eq!(
        btree,
        BTreeMap::from([
            ("source", "seed"),
            ("author", "alice"),
            ("stage", "final"),
            ("reviewer", "bob")
        ])
    );

    let mut hash: HashMap<String, Value> = HashMap::from([
        ("keep".to_string(), json!(1)),
        ("nested".to_string(), json!({"a": 1, "b": 2})),
    ]);
    Merge
        .reduce(
            &mut hash,
            HashMap::from([("nested".to_string(), json!({"c": 3}))]),
        )
        .unwrap();
    assert_eq!(hash["keep"], json!(1));
    assert_eq!(hash["nested"], json!({"c": 3}), "nested maps are replaced");

    let mut object = Map::new();
    object.insert("k".into(), json!("old"));
    let mut update = Map::new();
    update.insert("k".into(), json!("new"));
    update.insert("j".into(), json!(null));
    Merge.reduce(&mut object, update).unwrap();
    assert_eq!(Value::Object(object), json!({"k": "new", "j": null}));

    Merge.reduce(&mut btree, BTreeMap::new()).unwrap();
    assert_eq!(btree.len(), 4, "an empty update changes nothing");

    let merged = reducers::merge(HashMap::from([(1, 1)]), HashMap::from([(1, 2), (2, 2)]));
    assert_eq!(merged, HashMap::from([(1, 2), (2, 2)]));
}

#[test]
fn dynamic_merge_over_two_nodes() {
    let schema = one_field(json!({
        "type": "dict<string,string>", "reducer": "merge", "default": {"source": "seed"}
    }));
    assert_eq!(
        run_field(
            &schema,
            &[
                json!({"author": "alice", "stage": "draft"}),
                json!({"stage": "final", "reviewer": "bob"})
            ]
        )
        .unwrap(),
        json!({"source": "seed", "author": "alice", "stage": "final", "reviewer": "bob"})
    );
    assert_reducer_error(run_field(&schema, &[json!(["a"])]), "merge");
}

// =============================================================================================
// bounded_append

fn bounded(max_len: i64) -> BoundedAppend {
    reducers::bounded_append(max_len).expect("a valid bound")
}

/// Runs `bounded_append(max_len)` on a `Vec` and a `VecDeque`, checking that both agree.
fn bounded_both(
    max_len: i64,
    start: Vec<&'static str>,
    updates: &[&[&'static str]],
) -> Vec<&'static str> {
    let reducer = bounded(max_len);
    let mut plain = start.clone();
    let mut deque = VecDeque::from(start);
    for update in updates {
        reducer.reduce(&mut plain, update.to_vec()).unwrap();
        reducer.reduce(&mut deque, update.to_vec().into()).unwrap();
        assert_eq!(Vec::from(deque.clone()), plain, "Vec and VecDeque agree");
    }
    plain
}

#[test]
fn bounded_append_truncates_from_the_front_after_concatenating() {
    assert_eq!(
        bounded_both(3, vec![], &[&["a", "b", "c", "d", "e"]]),
        ["c", "d", "e"]
    );
    assert_eq!(
        bounded_both(3, vec!["a"], &[&["b"]]),
        ["a", "b"],
        "under the bound"
    );
    assert_eq!(
        bounded_both(3, vec!["a", "b"], &[&["c"]]),
        ["a", "b", "c"],
        "exactly at the bound"
    );
    assert_eq!(bounded_both(1, vec!["a"], &[&["b"], &["c"]]), ["c"]);
}

#[test]
fn bounded_append_bound_is_cumulative_across_merges() {
    assert_eq!(
        bounded_both(4, vec![], &[&["1", "2"], &["3", "4"], &["5", "6"]]),
        ["3", "4", "5", "6"]
    );
}

#[test]
fn bounded_append_update_longer_than_the_bound_keeps_its_own_tail() {
    assert_eq!(
        bounded_both(2, vec!["seed-1", "seed-2"], &[&["a", "b", "c", "d", "e"]]),
        ["d", "e"]
    );
}

#[test]
fn bounded_append_empty_update_leaves_an_over_bound_list_alone() {
    let over = vec!["a", "b", "c", "d", "e"];
    assert_eq!(bounded_both(3, over.clone(), &[&[]]), over);
    // The next non-empty update brings it back under the bound.
    assert_eq!(bounded_both(3, over, &[&[], &["f"]]), ["d", "e", "f"]);
}

#[test]
fn bounded_append_rejects_non_positive_bounds_when_built() {
    for bad in [0, -1, -100, i64::MIN] {
        let err = reducers::bounded_append(bad).unwrap_err();
        assert_eq!(err.category(), "reducer_configuration_invalid");
        assert!(err.is_configuration_error());
    }
    assert_eq!(bounded(5).max_len(), 5);
    assert_eq!(bounded(5).params()["max_len"], json!(5));
}

#[test]
fn dynamic_bounded_append_configuration_and_merge_errors() {
    let schema = one_field(json!({
        "type": "list<string>", "reducer": {"bounded_append": {"max_len": 3}}, "default": []
    }));
    assert_eq!(
        run_field(&schema, &[json!(["a", "b", "c", "d", "e"])]).unwrap(),
        json!(["c", "d", "e"])
    );
    let err = assert_reducer_error(run_field(&schema, &[json!("not_a_list")]), "bounded_append");
    assert!(err.to_string().contains("got a string"), "{err}");

    for params in [
        json!({"max_len": 0}),
        json!({"max_len": -3}),
        json!({"max_len": 1.5}),
        json!({"max_len": "3"}),
        json!({"max_len": null}),
        json!({}),
        json!({"max_len": 3, "min_len": 1}),
    ] {
        let err = Schema::from_json(&json!({"fields": {
            "items": {"type": "list<string>", "reducer": {"bounded_append": params}, "default": []}
        }}))
        .unwrap_err();
        assert_eq!(
            err.category(),
            "reducer_configuration_invalid",
            "{params}: {err}"
        );
        assert_eq!(err.field(), Some("items"), "{params}: {err}");
    }
}

// =============================================================================================
// dedupe_append

#[test]
fn dedupe_append_default_key_is_the_item_and_first_occurrence_wins() {
    let mut tags = vec!["seed"];
    reducers::dedupe_append()
        .reduce(&mut tags, vec!["seed", "a", "b", "a"])
        .unwrap();
    assert_eq!(tags, ["seed", "a", "b"]);

    let mut keyed: KeyedList<&str> = vec!["seed"].into();
    DedupeAppend::new()
        .reduce(&mut keyed, vec!["seed", "a", "b", "a"].into())
        .unwrap();
    DedupeAppend::new()
        .reduce(&mut keyed, vec!["b", "c"].into())
        .unwrap();
    assert_eq!(keyed.as_slice(), ["seed", "a", "b", "c"]);
}

#[test]
fn dedupe_append_with_a_key_keeps_the_existing_item() {
    let out = vec_and_keyed(
        &DedupeAppend::by(task_id()),
        vec![task(1, "alpha")],
        &[vec![
            task(1, "alpha-updated"),
            task(2, "beta"),
            task(2, "beta-dup"),
        ]],
    );
    assert_eq!(out, [task(1, "alpha"), task(2, "beta")]);
}

#[test]
fn dedupe_append_never_removes_existing_duplicates() {
    let out = vec_and_keyed(
        &DedupeAppend::by(task_id()),
        vec![task(1, "a"), task(1, "a-again"), task(2, "b")],
        &[
            vec![task(2, "b2"), task(3, "c")],
            vec![],
            vec![task(3, "c2")],
        ],
    );
    assert_eq!(
        out,
        [task(1, "a"), task(1, "a-again"), task(2, "b"), task(3, "c")]
    );
}

#[test]
fn dedupe_append_with_an_owned_key() {
    // Keyed by status: one task per status.
    let out = vec_and_keyed(
        &DedupeAppend::by(by_value(|t: &Task| t.status.to_uppercase())),
        vec![task(1, "open")],
        &[vec![task(2, "OPEN"), task(3, "done"), task(4, "Done")]],
    );
    assert_eq!(out, [task(1, "open"), task(3, "done")]);
}

#[test]
fn dynamic_dedupe_append_default_key_and_field_key() {
    let tags = one_field(json!({
        "type": "list<string>", "reducer": {"dedupe_append": {}}, "default": ["seed"]
    }));
    assert_eq!(
        run_field(&tags, &[json!(["seed", "a", "b", "a"])]).unwrap(),
        json!(["seed", "a", "b"])
    );
    // With no key, values are compared whole: 1 and "1" differ, equal objects do not.
    let values = one_field(json!({"reducer": "dedupe_append", "default": []}));
    assert_eq!(
        run_field(
            &values,
            &[
                json!([1, "1", {"a": 1, "b": 2}]),
                json!([1, {"b": 2, "a": 1}])
            ]
        )
        .unwrap(),
        json!([1, "1", {"a": 1, "b": 2}])
    );

    let records = one_field(json!({
        "type": "list", "reducer": {"dedupe_append": {"key": "id"}},
        "default": [{"id": 1, "value": "alpha"}]
    }));
    assert_eq!(
        run_field(
            &records,
            &[json!([
                {"id": 1, "value": "alpha-updated"},
                {"id": 2, "value": "beta"},
                {"id": 2, "value": "beta-dup"}
            ])]
        )
        .unwrap(),
        json!([{"id": 1, "value": "alpha"}, {"id": 2, "value": "beta"}])
    );
    // An item without the key field is a reducer_error, not a panic.
    assert_reducer_error(
        run_field(&records, &[json!([{"value": 3}])]),
        "dedupe_append",
    );
    assert_reducer_error(run_field(&records, &[json!(["bare"])]), "dedupe_append");
}

// =============================================================================================
// merge_by_key

#[test]
fn merge_by_key_replaces_in_place_keeping_positions() {
    let out = vec_and_keyed(
        &reducers::merge_by_key(task_id()),
        vec![task(1, "pending"), task(2, "pending"), task(3, "pending")],
        &[vec![
            task(2, "done"),
            task(1, "running"),
            task(3, "errored"),
        ]],
    );
    assert_eq!(
        out,
        [task(1, "running"), task(2, "done"), task(3, "errored")]
    );
}

#[test]
fn merge_by_key_appends_novel_keys_in_update_order() {
    let out = vec_and_keyed(
        &MergeByKey::new(task_id()),
        vec![task(1, "pending")],
        &[vec![
            task(7, "running"),
            task(2, "done"),
            task(5, "errored"),
        ]],
    );
    assert_eq!(
        out,
        [
            task(1, "pending"),
            task(7, "running"),
            task(2, "done"),
            task(5, "errored")
        ]
    );
}

#[test]
fn merge_by_key_mixes_replacing_and_appending() {
    let out = vec_and_keyed(
        &MergeByKey::new(task_id()),
        vec![task(1, "pending"), task(2, "pending")],
        &[vec![
            task(1, "done"),
            task(3, "running"),
            task(2, "errored"),
            task(4, "queued"),
        ]],
    );
    assert_eq!(
        out,
        [
            task(1, "done"),
            task(2, "errored"),
            task(3, "running"),
            task(4, "queued")
        ]
    );
}

#[test]
fn merge_by_key_duplicates_target_the_last_existing_and_the_last_update_wins() {
    let out = vec_and_keyed(
        &MergeByKey::new(task_id()),
        vec![task(1, "old-a"), task(1, "old-b"), task(2, "old-c")],
        &[vec![task(1, "new-b"), task(2, "new-c1"), task(2, "new-c2")]],
    );
    assert_eq!(out, [task(1, "old-a"), task(1, "new-b"), task(2, "new-c2")]);

    // A novel key repeated in one update is appended once, at its first position, with its
    // last value; a later merge then replaces it.
    let out = vec_and_keyed(
        &MergeByKey::new(task_id()),
        vec![task(1, "a")],
        &[
            vec![task(9, "x"), task(8, "y"), task(9, "z")],
            vec![task(9, "w")],
        ],
    );
    assert_eq!(out, [task(1, "a"), task(9, "w"), task(8, "y")]);
}

#[test]
fn merge_by_key_on_a_keyed_list_across_many_merges_matches_the_vec() {
    let mut rng = Rng(0x5EED);
    let statuses = ["a", "b", "c", "d"];
    let updates: Vec<Vec<Task>> = (0..200)
        .map(|_| {
            (0..rng.below(5))
                .map(|_| task(rng.below(30) as u32, statuses[rng.below(4) as usize]))
                .collect()
        })
        .collect();
    let out = vec_and_keyed(&MergeByKey::new(task_id()), vec![], &updates);
    let mut seen = std::collections::HashSet::new();
    assert!(out.iter().all(|t| seen.insert(t.id)), "one item per key");
}

#[test]
fn one_keyed_list_merged_by_two_key_functions_stays_correct() {
    let by_id = MergeByKey::new(task_id());
    let by_status = MergeByKey::new(by_field(|t: &Task| &t.status));
    let mut keyed: KeyedList<Task> = KeyedList::new();
    let mut plain: Vec<Task> = Vec::new();
    let steps: Vec<(bool, Vec<Task>)> = vec![
        (true, vec![task(1, "open"), task(2, "done")]),
        // By status, "done" is replaced by a task with another id ...
        (false, vec![task(3, "done")]),
        // ... so by id, 3 is now known and 2 is not.
        (true, vec![task(3, "closed"), task(2, "reopened")]),
        (false, vec![task(4, "open"), task(5, "new")]),
        (true, vec![task(4, "x"), task(1, "y")]),
    ];
    for (use_id, update) in steps {
        if use_id {
            by_id.reduce(&mut keyed, update.clone().into()).unwrap();
            by_id.reduce(&mut plain, update).unwrap();
        } else {
            by_status.reduce(&mut keyed, update.clone().into()).unwrap();
            by_status.reduce(&mut plain, update).unwrap();
        }
        assert_eq!(keyed.as_slice(), plain.as_slice());
    }
    assert_eq!(
        plain,
        [
            task(4, "x"),
            task(3, "closed"),
            task(2, "reopened"),
            task(5, "new"),
            task(1, "y")
        ]
    );
}

#[test]
fn merge_by_key_needs_a_key() {
    let err = MergeByKey::<agentstate::reducers::Identity>::from_optional(None).unwrap_err();
    assert_eq!(err.category(), "reducer_configuration_invalid");
    assert!(MergeByKey::from_optional(Some(task_id())).is_ok());
}

#[test]
fn dynamic_merge_by_key_cases_and_configuration() {
    let schema = |default: Value| {
        one_field(json!({
            "type": "list", "reducer": {"merge_by_key": {"key": "id"}}, "default": default
        }))
    };
    assert_eq!(
        run_field(
            &schema(json!([{"id": 1, "s": "pending"}, {"id": 2, "s": "pending"}])),
            &[json!([
                {"id": 1, "s": "done"}, {"id": 3, "s": "running"},
                {"id": 2, "s": "errored"}, {"id": 4, "s": "queued"}
            ])]
        )
        .unwrap(),
        json!([
            {"id": 1, "s": "done"}, {"id": 2, "s": "errored"},
            {"id": 3, "s": "running"}, {"id": 4, "s": "queued"}
        ])
    );
    assert_eq!(
        run_field(
            &schema(
                json!([{"id": 1, "v": "old-a"}, {"id": 1, "v": "old-b"}, {"id": 2, "v": "old-c"}])
            ),
            &[json!([{"id": 1, "v": "new-b"}, {"id": 2, "v": "new-c1"}, {"id": 2, "v": "new-c2"}])]
        )
        .unwrap(),
        json!([{"id": 1, "v": "old-a"}, {"id": 1, "v": "new-b"}, {"id": 2, "v": "new-c2"}])
    );
    // 1 and "1" are different keys.
    assert_eq!(
        run_field(&schema(json!([{"id": 1}])), &[json!([{"id": "1"}])]).unwrap(),
        json!([{"id": 1}, {"id": "1"}])
    );
    assert_reducer_error(
        run_field(&schema(json!([])), &[json!([{"name": "no id"}])]),
        "merge_by_key",
    );
    assert_reducer_error(
        run_field(&schema(json!([])), &[json!({"id": 1})]),
        "merge_by_key",
    );

    for params in [
        json!({"key": null}),
        json!({}),
        json!({"key": 3}),
        json!(null),
    ] {
        let err = Schema::from_json(&json!({"fields": {
            "records": {"type": "list", "reducer": {"merge_by_key": params}, "default": []}
        }}))
        .unwrap_err();
        assert_eq!(
            err.category(),
            "reducer_configuration_invalid",
            "{params}: {err}"
        );
    }
}

// =============================================================================================
// concat_flatten

#[test]
fn concat_flatten_flattens_exactly_one_level() {
    let mut items = vec!["a", "b"];
    ConcatFlatten
        .reduce(&mut items, vec![vec!["c"], vec!["d", "e"], vec![]])
        .unwrap();
    ConcatFlatten.reduce(&mut items, vec![vec!["f"]]).unwrap();
    assert_eq!(items, ["a", "b", "c", "d", "e", "f"]);

    ConcatFlatten.reduce(&mut items, vec![]).unwrap();
    ConcatFlatten
        .reduce(&mut items, vec![vec![], vec![]])
        .unwrap();
    assert_eq!(
        items.len(),
        6,
        "empty updates and empty sub-lists add nothing"
    );

    let mut nested: Vec<Vec<u8>> = vec![vec![0]];
    ConcatFlatten
        .reduce(&mut nested, vec![vec![vec![1, 2]], vec![vec![3]]])
        .unwrap();
    assert_eq!(nested, [vec![0], vec![1, 2], vec![3]], "one level only");

    let mut deque = VecDeque::from([1]);
    ConcatFlatten
        .reduce(&mut deque, vec![vec![2, 3].into(), vec![4].into()])
        .unwrap();
    assert_eq!(deque, [1, 2, 3, 4]);

    assert_eq!(
        reducers::concat_flatten(vec![0], vec![vec![1], vec![2]]),
        [0, 1, 2]
    );
}

#[test]
fn dynamic_concat_flatten_and_its_non_list_element_error() {
    let schema =
        one_field(json!({"type": "list", "reducer": "concat_flatten", "default": ["a", "b"]}));
    assert_eq!(
        run_field(&schema, &[json!([["c"], ["d", "e"], []]), json!([["f"]])]).unwrap(),
        json!(["a", "b", "c", "d", "e", "f"])
    );
    assert_eq!(run_field(&schema, &[json!([])]).unwrap(), json!(["a", "b"]));
    assert_eq!(
        run_field(&schema, &[json!([[], []])]).unwrap(),
        json!(["a", "b"])
    );
    let err = assert_reducer_error(
        run_field(&schema, &[json!([["a"], "not_a_list"])]),
        "concat_flatten",
    );
    assert!(err.to_string().contains("element 1"), "{err}");
}

// =============================================================================================
// merge_all

#[test]
fn merge_all_folds_the_maps_in_order_last_write_wins() {
    let mut registry = BTreeMap::from([("seed_key", "seed_value"), ("retained", "from_prior")]);
    MergeAll
        .reduce(
            &mut registry,
            vec![
                BTreeMap::from([("a", "1")]),
                BTreeMap::from([("seed_key", "overwritten"), ("b", "2")]),
                BTreeMap::from([("a", "1 wins over first")]),
            ],
        )
        .unwrap();
    MergeAll
        .reduce(
            &mut registry,
            vec![
                BTreeMap::from([("b", "y wins")]),
                BTreeMap::from([("c", "3")]),
            ],
        )
        .unwrap();
    assert_eq!(
        registry,
        BTreeMap::from([
            ("seed_key", "overwritten"),
            ("retained", "from_prior"),
            ("a", "1 wins over first"),
            ("b", "y wins"),
            ("c", "3")
        ])
    );

    let before = registry.clone();
    MergeAll.reduce(&mut registry, vec![]).unwrap();
    MergeAll
        .reduce(&mut registry, vec![BTreeMap::new(), BTreeMap::new()])
        .unwrap();
    assert_eq!(registry, before, "no maps, or empty maps, change nothing");

    let mut hash = HashMap::from([("k", 0)]);
    MergeAll
        .reduce(
            &mut hash,
            vec![HashMap::from([("k", 1)]), HashMap::from([("k", 2)])],
        )
        .unwrap();
    assert_eq!(hash, HashMap::from([("k", 2)]));

    assert_eq!(
        reducers::merge_all(BTreeMap::from([(1, 1)]), vec![BTreeMap::from([(1, 9)])]),
        BTreeMap::from([(1, 9)])
    );
}

#[test]
fn dynamic_merge_all_and_its_non_mapping_element_error() {
    let schema = one_field(json!({
        "type": "dict", "reducer": "merge_all", "default": {"k": "v"}
    }));
    assert_eq!(
        run_field(
            &schema,
            &[json!([{"a": "1"}, {"k": "w", "b": "2"}, {"a": "3"}])]
        )
        .unwrap(),
        json!({"k": "w", "a": "3", "b": "2"})
    );
    assert_eq!(run_field(&schema, &[json!([])]).unwrap(), json!({"k": "v"}));
    assert_eq!(
        run_field(&schema, &[json!([{}, {}])]).unwrap(),
        json!({"k": "v"})
    );
    let err = assert_reducer_error(
        run_field(&schema, &[json!([{"k": "1"}, "not_a_mapping"])]),
        "merge_all",
    );
    assert!(err.to_string().contains("element 1"), "{err}");
    assert_reducer_error(run_field(&schema, &[json!({"k": "1"})]), "merge_all");
}

// =============================================================================================
// add_messages (AgentFlow)

#[test]
fn add_messages_never_updates_an_existing_id() {
    let original = user("m1", "hi");
    let out = vec_and_list(
        &AddMessages,
        vec![original.clone()],
        &[vec![user("m1", "edited"), assistant("m2", "hello")]],
    );
    assert_eq!(out, [original, assistant("m2", "hello")]);
}

#[test]
fn add_messages_keeps_every_duplicate_inside_one_update() {
    let out = vec_and_list(
        &AddMessages,
        vec![user("m1", "hi")],
        &[vec![
            assistant("m2", "one"),
            assistant("m2", "two"),
            user("m1", "again"),
        ]],
    );
    assert_eq!(
        out,
        [
            user("m1", "hi"),
            assistant("m2", "one"),
            assistant("m2", "two")
        ]
    );
    // Both now exist, so the next update drops that id.
    let out = vec_and_list(&AddMessages, out, &[vec![assistant("m2", "three")]]);
    assert_eq!(out.len(), 3);
}

#[test]
fn add_messages_drops_deltas_in_the_update_but_keeps_them_in_the_list() {
    let out = vec_and_list(
        &AddMessages,
        vec![delta("d1", "partial"), user("u", "dup"), user("u", "dup")],
        &[vec![delta("d2", "streaming"), assistant("a", "final")]],
    );
    assert_eq!(
        out,
        [
            delta("d1", "partial"),
            user("u", "dup"),
            user("u", "dup"),
            assistant("a", "final")
        ]
    );
    // A delta is dropped even with a new id, and even when its id matches nothing.
    assert_eq!(
        vec_and_list(&AddMessages, vec![], &[vec![delta("x", "p")]]),
        []
    );
}

#[test]
fn add_messages_tells_integer_ids_from_string_ids() {
    let one_int = Message::text_message("int", Role::User)
        .with_timestamp(0.0)
        .with_id(1i64);
    let one_str = Message::text_message("str", Role::User)
        .with_timestamp(0.0)
        .with_id("1");
    let out = vec_and_list(
        &AddMessages,
        vec![one_int.clone()],
        &[vec![one_str.clone(), one_int.clone()]],
    );
    assert_eq!(out, [one_int, one_str]);
}

#[test]
fn add_messages_function_and_empty_updates() {
    let left = vec![user("a", "1")];
    assert_eq!(reducers::add_messages(left.clone(), vec![]), left);
    assert_eq!(
        reducers::add_messages(vec![], vec![user("a", "1"), user("a", "2")]).len(),
        2
    );
    assert_eq!(
        reducers::add_messages(left.clone(), vec![user("a", "x"), delta("b", "y")]),
        left
    );
}

#[test]
fn dynamic_add_messages() {
    let schema = one_field(json!({"reducer": "add_messages", "default": []}));
    let one_int = Message::text_message("int", Role::User)
        .with_timestamp(0.0)
        .with_id(1i64);
    let first = vec![user("m1", "hi"), one_int.clone()];
    let second = vec![
        user("m1", "changed"),
        assistant("m2", "a"),
        assistant("m2", "b"),
        delta("m3", "partial"),
        Message::text_message("str", Role::User)
            .with_timestamp(0.0)
            .with_id("1"),
    ];
    let out = messages_of(run_field(&schema, &[to_json(&first), to_json(&second)]).unwrap());
    assert_eq!(
        out,
        [
            user("m1", "hi"),
            one_int,
            assistant("m2", "a"),
            assistant("m2", "b"),
            Message::text_message("str", Role::User)
                .with_timestamp(0.0)
                .with_id("1"),
        ]
    );
    assert_reducer_error(
        run_field(&schema, &[json!(["not a message"])]),
        "add_messages",
    );
    assert_reducer_error(
        run_field(&schema, &[json!({"message_id": 1})]),
        "add_messages",
    );
}

// =============================================================================================
// replace_messages, append_items

#[test]
fn replace_messages_returns_the_update() {
    let out = vec_and_list(
        &ReplaceMessages,
        vec![user("a", "1"), user("b", "2")],
        &[vec![user("c", "3"), user("c", "3")]],
    );
    assert_eq!(out, [user("c", "3"), user("c", "3")]);
    assert_eq!(vec_and_list(&ReplaceMessages, out, &[vec![]]), []);
    assert_eq!(
        reducers::replace_messages(vec![user("a", "1")], vec![user("b", "2")]),
        [user("b", "2")]
    );
    // After a replace, a MessageList's index follows the new content.
    let mut list = MessageList::from(vec![user("a", "1")]);
    AddMessages
        .reduce(&mut list, vec![user("b", "x")].into())
        .unwrap();
    ReplaceMessages
        .reduce(&mut list, vec![user("c", "3")].into())
        .unwrap();
    AddMessages
        .reduce(
            &mut list,
            vec![user("a", "back"), user("c", "dropped")].into(),
        )
        .unwrap();
    assert_eq!(list.as_slice(), [user("c", "3"), user("a", "back")]);

    let schema = one_field(json!({"reducer": "replace_messages", "default": []}));
    let update = vec![user("z", "only")];
    assert_eq!(
        messages_of(
            run_field(&schema, &[to_json(&vec![user("a", "1")]), to_json(&update)]).unwrap()
        ),
        update
    );
}

#[test]
fn append_items_dedupes_against_existing_ids_only() {
    let out = vec_and_keyed(
        &AppendItems,
        vec![task(1, "a")],
        &[
            vec![task(2, "b"), task(1, "a2"), task(2, "b-dup")],
            vec![task(2, "b3"), task(3, "c")],
        ],
    );
    assert_eq!(
        out,
        [task(1, "a"), task(2, "b"), task(2, "b-dup"), task(3, "c")]
    );
    assert_eq!(
        reducers::append_items(vec![task(1, "a")], vec![task(1, "x"), task(5, "y")]),
        [task(1, "a"), task(5, "y")]
    );
}

#[test]
fn dynamic_append_items_dedupes_by_the_id_field() {
    let schema = one_field(json!({"reducer": "append_items", "default": [{"id": 1, "v": "a"}]}));
    assert_eq!(
        run_field(
            &schema,
            &[json!([{"id": 2, "v": "b"}, {"id": 1, "v": "x"}, {"id": 2, "v": "b2"}, {"id": "1", "v": "s"}])]
        )
        .unwrap(),
        json!([{"id": 1, "v": "a"}, {"id": 2, "v": "b"}, {"id": 2, "v": "b2"}, {"id": "1", "v": "s"}])
    );
    assert_reducer_error(
        run_field(&schema, &[json!([{"v": "no id"}])]),
        "append_items",
    );
    assert_reducer_error(run_field(&schema, &[json!(7)]), "append_items");
}

// =============================================================================================
// remove_tool_messages (AgentFlow helper)

#[test]
fn remove_tool_messages_removes_a_complete_sequence_and_keeps_the_answer() {
    let messages = vec![
        user("u", "weather?"),
        calls_tool("call"),
        tool("t1"),
        tool("t2"),
        assistant("answer", "sunny"),
        user("u2", "thanks"),
    ];
    assert_eq!(
        ids(&remove_tool_messages(messages)),
        [mid("u"), mid("answer"), mid("u2")]
    );
    // Zero tool messages in between still make a complete sequence.
    assert_eq!(
        ids(&remove_tool_messages(vec![
            calls_tool("call"),
            assistant("a", "done")
        ])),
        [mid("a")]
    );
}

#[test]
fn remove_tool_messages_keeps_incomplete_sequences_whole() {
    let cases: Vec<Vec<Message>> = vec![
        // Ends before the answer.
        vec![user("u", "q"), calls_tool("call"), tool("t")],
        vec![calls_tool("call")],
        // Followed by a user message.
        vec![calls_tool("call"), tool("t"), user("u", "wait")],
        // Followed by a system message.
        vec![calls_tool("call"), tool("t"), system("s")],
        // A tool message without a call before it.
        vec![user("u", "q"), tool("t"), assistant("a", "x")],
    ];
    for messages in cases {
        let kept = remove_tool_messages(messages.clone());
        assert_eq!(kept, messages, "kept whole: {:?}", ids(&messages));
    }
}

#[test]
fn remove_tool_messages_chained_calls_keep_the_first_pair() {
    let messages = vec![
        calls_tool("c1"),
        tool("t1"),
        calls_tool("c2"),
        tool("t2"),
        assistant("answer", "done"),
    ];
    assert_eq!(
        ids(&remove_tool_messages(messages)),
        [mid("c1"), mid("t1"), mid("answer")]
    );
    // Two separate complete sequences are both removed.
    let messages = vec![
        calls_tool("c1"),
        tool("t1"),
        assistant("a1", "one"),
        calls_tool("c2"),
        tool("t2"),
        assistant("a2", "two"),
    ];
    assert_eq!(ids(&remove_tool_messages(messages)), [mid("a1"), mid("a2")]);
}

#[test]
fn remove_tool_messages_empty_tool_calls_are_no_call_and_empty_input_is_empty() {
    let no_calls = Message::text_message("", Role::Assistant)
        .with_timestamp(0.0)
        .with_id("empty")
        .with_tool_calls(vec![]);
    let messages = vec![no_calls, tool("t"), assistant("a", "x")];
    assert_eq!(remove_tool_messages(messages.clone()), messages);
    assert_eq!(remove_tool_messages(vec![]), []);
}

#[test]
fn remove_tool_messages_is_not_a_reducer() {
    let err = Schema::from_json(&json!({"fields": {"f": {"reducer": "remove_tool_messages"}}}))
        .unwrap_err();
    assert_eq!(err.category(), "reducer_configuration_invalid");
}

// =============================================================================================
// upsert_messages (LangGraph's add_messages)

fn put(message: Message) -> MessageUpdate {
    MessageUpdate::Message(message)
}

fn remove(id: &str) -> MessageUpdate {
    MessageUpdate::Remove(mid(id))
}

#[test]
fn upsert_messages_replaces_in_place_and_appends_new_ids() {
    let out = vec_and_list(
        &UpsertMessages,
        vec![user("a", "1"), user("b", "2"), user("c", "3")],
        &[vec![
            put(user("b", "two")),
            put(user("d", "4")),
            put(user("a", "one")),
        ]],
    );
    assert_eq!(
        out,
        [
            user("a", "one"),
            user("b", "two"),
            user("c", "3"),
            user("d", "4")
        ]
    );
}

#[test]
fn upsert_messages_removes_by_id() {
    let out = vec_and_list(
        &UpsertMessages,
        vec![
            user("a", "1"),
            user("b", "2"),
            user("b", "2 again"),
            user("c", "3"),
        ],
        &[vec![remove("b")]],
    );
    assert_eq!(
        out,
        [user("a", "1"), user("c", "3")],
        "every message with the id"
    );
    // A message added earlier in the same update can be removed by it.
    let out = vec_and_list(
        &UpsertMessages,
        vec![user("a", "1")],
        &[vec![put(user("n", "new")), remove("n")]],
    );
    assert_eq!(out, [user("a", "1")]);
    // Removed then written again in one update: the message stays, replaced.
    let out = vec_and_list(
        &UpsertMessages,
        vec![user("a", "1"), user("b", "2")],
        &[vec![remove("a"), put(user("a", "back"))]],
    );
    assert_eq!(out, [user("a", "back"), user("b", "2")]);
}

#[test]
fn upsert_messages_removing_an_unknown_id_fails_and_changes_nothing() {
    let start = vec![user("a", "1"), user("b", "2")];
    let update = vec![
        put(user("a", "changed")),
        put(user("z", "new")),
        remove("nope"),
    ];

    let mut plain = start.clone();
    let err = UpsertMessages
        .reduce(&mut plain, update.clone())
        .unwrap_err();
    assert!(err.to_string().contains("nope"), "{err}");
    assert_eq!(plain, start);

    let mut list = MessageList::from(start.clone());
    UpsertMessages
        .reduce(&mut list, vec![put(user("b", "warm"))])
        .unwrap();
    let before = list.clone();
    assert!(UpsertMessages.reduce(&mut list, update).is_err());
    assert_eq!(list, before);
    // The list still merges correctly afterwards.
    UpsertMessages
        .reduce(&mut list, vec![put(user("a", "ok"))])
        .unwrap();
    assert_eq!(list.as_slice(), [user("a", "ok"), user("b", "warm")]);

    assert!(reducers::upsert_messages(start, vec![remove("x")]).is_err());
}

#[test]
fn upsert_messages_remove_all_keeps_only_what_follows_the_last_marker() {
    let out = vec_and_list(
        &UpsertMessages,
        vec![user("a", "1"), user("b", "2")],
        &[vec![
            put(user("x", "before the first marker")),
            MessageUpdate::RemoveAll,
            put(user("y", "between markers")),
            MessageUpdate::RemoveAll,
            put(user("a", "after")),
            put(user("z", "last")),
        ]],
    );
    assert_eq!(out, [user("a", "after"), user("z", "last")]);
    let out = vec_and_list(
        &UpsertMessages,
        vec![user("a", "1")],
        &[vec![MessageUpdate::RemoveAll]],
    );
    assert_eq!(out, []);
    // After a reset, the list's index is rebuilt for the new content.
    let mut list = MessageList::from(vec![user("a", "1")]);
    UpsertMessages
        .reduce(
            &mut list,
            vec![MessageUpdate::RemoveAll, put(user("b", "2"))],
        )
        .unwrap();
    UpsertMessages
        .reduce(
            &mut list,
            vec![put(user("b", "two")), put(user("a", "new"))],
        )
        .unwrap();
    assert_eq!(list.as_slice(), [user("b", "two"), user("a", "new")]);
}

#[test]
fn upsert_messages_duplicate_new_ids_collapse_to_the_last() {
    let out = vec_and_list(
        &UpsertMessages,
        vec![user("a", "1")],
        &[vec![
            put(user("n", "first")),
            put(user("m", "other")),
            put(user("n", "last")),
        ]],
    );
    assert_eq!(out, [user("a", "1"), user("n", "last"), user("m", "other")]);
}

#[test]
fn upsert_messages_json_markers_and_dynamic_schema() {
    let marker: MessageUpdate =
        serde_json::from_value(json!({"type": "remove", "id": "m1"})).unwrap();
    assert_eq!(marker, remove("m1"));
    let all: MessageUpdate =
        serde_json::from_value(json!({"type": "remove", "id": REMOVE_ALL_MESSAGES})).unwrap();
    assert_eq!(all, MessageUpdate::RemoveAll);
    assert_eq!(
        to_json(&all),
        json!({"type": "remove", "id": "__remove_all__"})
    );
    let int_marker: MessageUpdate =
        serde_json::from_value(json!({"type": "remove", "id": 1})).unwrap();
    assert_eq!(int_marker, MessageUpdate::Remove(MessageId::from(1i64)));

    let schema = one_field(json!({"reducer": "upsert_messages", "default": []}));
    let start = to_json(&vec![user("a", "1"), user("b", "2")]);
    let mut update = vec![
        to_json(&user("a", "one")),
        json!({"type": "remove", "id": "b"}),
    ];
    update.push(to_json(&user("c", "3")));
    assert_eq!(
        messages_of(run_field(&schema, &[start.clone(), Value::Array(update)]).unwrap()),
        [user("a", "one"), user("c", "3")]
    );
    assert_reducer_error(
        run_field(&schema, &[start, json!([{"type": "remove", "id": "zzz"}])]),
        "upsert_messages",
    );
}

// =============================================================================================
// Round-trip idempotence

#[test]
fn every_reducer_reports_its_name_and_round_trip_idempotence() {
    let table: Vec<(&dyn ReducerInfo, &str, bool)> = vec![
        (&LastWriteWins, "last_write_wins", true),
        (&Merge, "merge", true),
        (&Append, "append", false),
        (&ConcatFlatten, "concat_flatten", false),
        (&MergeAll, "merge_all", false),
        (&ReplaceValue, "replace_value", true),
        (&AddMessages, "add_messages", true),
        (&ReplaceMessages, "replace_messages", true),
        (&AppendItems, "append_items", true),
        (&UpsertMessages, "upsert_messages", true),
    ];
    let bounded = bounded(3);
    let dedupe = DedupeAppend::new();
    let by_key = MergeByKey::new(task_id());
    let parametrised: Vec<(&dyn ReducerInfo, &str, bool)> = vec![
        (&bounded, "bounded_append", false),
        (&dedupe, "dedupe_append", true),
        (&by_key, "merge_by_key", true),
    ];
    for (reducer, name, idempotent) in table.into_iter().chain(parametrised) {
        assert_eq!(reducer.name(), name);
        assert_eq!(reducer.round_trip_idempotent(), idempotent, "{name}");
        // Dynamic schemas report the same flag for the same reducer.
        let spec = match name {
            "bounded_append" => json!({"bounded_append": {"max_len": 3}}),
            "merge_by_key" => json!({"merge_by_key": {"key": "id"}}),
            _ => json!(name),
        };
        let schema = one_field(json!({ "reducer": spec }));
        assert_eq!(schema.fields()[0].reducer.name, name);
        assert_eq!(
            schema.fields()[0].round_trip_idempotent,
            idempotent,
            "{name}"
        );
    }
}

/// Random tasks with ids from a small pool, so duplicates and repeats are common.
fn random_tasks(rng: &mut Rng, max_len: u64) -> Vec<Task> {
    let statuses = ["a", "b", "c"];
    (0..rng.below(max_len + 1))
        .map(|_| task(rng.below(6) as u32, statuses[rng.below(3) as usize]))
        .collect()
}

fn random_messages(rng: &mut Rng, max_len: u64) -> Vec<Message> {
    let texts = ["x", "y", "z"];
    (0..rng.below(max_len + 1))
        .map(|_| {
            let id = format!("m{}", rng.below(6));
            let mut message = user(&id, texts[rng.below(3) as usize]);
            message.delta = rng.below(4) == 0;
            message
        })
        .collect()
}

/// Checks, on `Vec` and `KeyedList`, that merging `update` twice gives what merging it once
/// gives, and that re-merging the merged value as an update changes nothing.
fn check_idempotent_on_tasks<R>(reducer: &R, rng: &mut Rng)
where
    R: Reducer<Vec<Task>, Update = Vec<Task>> + Reducer<KeyedList<Task>, Update = KeyedList<Task>>,
{
    for _ in 0..300 {
        let start = random_tasks(rng, 6);
        let update = random_tasks(rng, 6);
        let once = vec_and_keyed(reducer, start.clone(), std::slice::from_ref(&update));
        let twice = vec_and_keyed(reducer, start, &[update.clone(), update]);
        assert_eq!(twice, once, "{}: merging twice", reducer.name());
        let round_trip = vec_and_keyed(reducer, once.clone(), std::slice::from_ref(&once));
        assert_eq!(round_trip, once, "{}: re-merging the value", reducer.name());
    }
}

#[test]
fn keyed_reducers_marked_idempotent_are_idempotent() {
    let mut rng = Rng(42);
    check_idempotent_on_tasks(&DedupeAppend::by(task_id()), &mut rng);
    check_idempotent_on_tasks(&MergeByKey::new(task_id()), &mut rng);
    check_idempotent_on_tasks(&AppendItems, &mut rng);
}

#[test]
fn message_reducers_marked_idempotent_are_idempotent() {
    let mut rng = Rng(7);
    for _ in 0..300 {
        let start = random_messages(&mut rng, 6);
        let update = random_messages(&mut rng, 6);

        let add_once = vec_and_list(&AddMessages, start.clone(), std::slice::from_ref(&update));
        let add_twice = vec_and_list(
            &AddMessages,
            start.clone(),
            &[update.clone(), update.clone()],
        );
        assert_eq!(add_twice, add_once, "add_messages: merging twice");
        assert_eq!(
            vec_and_list(
                &AddMessages,
                add_once.clone(),
                std::slice::from_ref(&add_once)
            ),
            add_once,
            "add_messages: re-merging the value"
        );

        let replace_once = vec_and_list(
            &ReplaceMessages,
            start.clone(),
            std::slice::from_ref(&update),
        );
        assert_eq!(
            vec_and_list(
                &ReplaceMessages,
                start.clone(),
                &[update.clone(), update.clone()]
            ),
            replace_once
        );

        // upsert_messages with messages and remove-all markers (removals: see below).
        let mut entries: Vec<MessageUpdate> = update.iter().cloned().map(put).collect();
        if rng.below(3) == 0 {
            let at = rng.below(entries.len() as u64 + 1) as usize;
            entries.insert(at, MessageUpdate::RemoveAll);
        }
        let upsert_once = vec_and_list(
            &UpsertMessages,
            start.clone(),
            std::slice::from_ref(&entries),
        );
        let upsert_twice =
            vec_and_list(&UpsertMessages, start.clone(), &[entries.clone(), entries]);
        assert_eq!(upsert_twice, upsert_once, "upsert_messages: merging twice");
        let value: Vec<MessageUpdate> = upsert_once.iter().cloned().map(put).collect();
        assert_eq!(
            vec_and_list(&UpsertMessages, upsert_once.clone(), &[value]),
            upsert_once,
            "upsert_messages: re-merging the value"
        );
    }
}

#[test]
fn upsert_messages_after_a_remove_all_keeps_the_messages_unmerged_as_langgraph_does() {
    // langgraph 1.2.22's add_messages returns what follows the last remove-all as it is: a repeated
    // id is kept twice, not replaced in place.
    let out = vec_and_list(
        &UpsertMessages,
        vec![user("a", "1")],
        &[vec![
            MessageUpdate::RemoveAll,
            put(user("b", "first")),
            put(user("c", "2")),
            put(user("b", "second")),
        ]],
    );
    assert_eq!(
        out,
        [user("b", "first"), user("c", "2"), user("b", "second")]
    );
    // A later update replaces the last message with the id, as LangGraph's index does.
    let out = vec_and_list(&UpsertMessages, out, &[vec![put(user("b", "third"))]]);
    assert_eq!(
        out,
        [user("b", "first"), user("c", "2"), user("b", "third")]
    );
    // A removal after the marker drops the messages before it with its id (LangGraph would
    // keep the removal itself in the list); an id none of them has is an error.
    let out = vec_and_list(
        &UpsertMessages,
        vec![user("a", "1")],
        &[vec![
            MessageUpdate::RemoveAll,
            put(user("b", "x")),
            put(user("b", "y")),
            remove("b"),
            put(user("b", "z")),
        ]],
    );
    assert_eq!(out, [user("b", "z")]);
    let mut messages = vec![user("a", "1")];
    assert!(UpsertMessages
        .reduce(&mut messages, vec![MessageUpdate::RemoveAll, remove("a")])
        .is_err());
    assert_eq!(messages, [user("a", "1")], "nothing merged");
}

/// `tests/data/langgraph_add_messages.json` (`generate_langgraph_add_messages.py`): 600 random
/// lists and updates merged by the real LangGraph `add_messages`. Every case agrees, on a `Vec`
/// and a `MessageList`, except the deliberate departure: a removal after the update's last
/// remove-all, which LangGraph keeps in the list as a `RemoveMessage`.
#[test]
fn upsert_messages_agrees_with_langgraph_add_messages() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/langgraph_add_messages.json");
    let cases: Vec<Value> = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let pool = ["a", "b", "c", "d", "e", "f"];
    let message = |e: &Value| {
        let m = Message::text_message(e[2].as_str().unwrap(), Role::User).with_timestamp(0.0);
        match e[1].as_str() {
            Some(id) => m.with_id(id),
            None => m,
        }
    };
    let (mut agreed, mut departures) = (0, 0);
    for case in &cases {
        let state: Vec<Message> = case["state"]
            .as_array()
            .unwrap()
            .iter()
            .map(message)
            .collect();
        let entries = case["update"].as_array().unwrap();
        let update: Vec<MessageUpdate> = entries
            .iter()
            .map(|e| match e[0].as_str().unwrap() {
                "message" => put(message(e)),
                "remove" => remove(e[1].as_str().unwrap()),
                _ => MessageUpdate::RemoveAll,
            })
            .collect();
        let last_reset = entries.iter().rposition(|e| e[0] == "remove_all");
        if last_reset.is_some_and(|at| entries[at + 1..].iter().any(|e| e[0] == "remove")) {
            departures += 1;
            continue;
        }
        let mut plain = state.clone();
        let mut list = MessageList::from(state);
        let merged = Reducer::<Vec<Message>>::reduce(&UpsertMessages, &mut plain, update.clone());
        let listed = Reducer::<MessageList>::reduce(&UpsertMessages, &mut list, update);
        assert_eq!(merged.is_ok(), listed.is_ok());
        assert_eq!(
            plain.as_slice(),
            list.as_slice(),
            "Vec and MessageList agree"
        );
        let got = match merged {
            Ok(()) => json!({
                "ok": plain
                    .iter()
                    .map(|m| {
                        let id = serde_json::to_value(&m.message_id).unwrap();
                        let id = id.as_str().filter(|id| pool.contains(id));
                        json!([id, m.text(), "message"])
                    })
                    .collect::<Vec<_>>()
            }),
            Err(_) => json!({ "error": true }),
        };
        match case["expect"].get("ok") {
            Some(expected) => assert_eq!(&got["ok"], expected, "case {case}"),
            None => assert!(got.get("error").is_some(), "case {case}: LangGraph fails"),
        }
        agreed += 1;
    }
    assert!(
        agreed >= 500 && departures > 0,
        "{agreed} agreed, {departures} departures"
    );
}

#[test]
fn upsert_messages_a_remove_all_then_an_update_compose_into_one() {
    let first = vec![
        MessageUpdate::RemoveAll,
        put(user("b", "1")),
        put(user("b", "2")),
    ];
    let second = vec![put(user("b", "3")), put(user("c", "4"))];
    let mut in_turn = vec![user("a", "0")];
    UpsertMessages.reduce(&mut in_turn, first.clone()).unwrap();
    UpsertMessages.reduce(&mut in_turn, second.clone()).unwrap();
    assert_eq!(in_turn, [user("b", "1"), user("b", "3"), user("c", "4")]);
    for composed in [
        Reducer::<Vec<Message>>::compose(&UpsertMessages, first.clone(), second.clone()),
        Reducer::<MessageList>::compose(&UpsertMessages, first.clone(), second.clone()),
    ] {
        let composed = composed.expect("composable");
        let mut at_once = vec![user("a", "0")];
        UpsertMessages.reduce(&mut at_once, composed).unwrap();
        assert_eq!(at_once, in_turn);
    }
    // A second update that fails on what the first leaves does not compose.
    assert!(Reducer::<Vec<Message>>::compose(&UpsertMessages, first, vec![remove("a")]).is_none());
}

#[test]
fn upsert_messages_removal_cannot_be_merged_twice() {
    // Re-merging the merged *value* changes nothing (checked above), but an update with a
    // removal fails the second time: the id is gone, and removing an unknown id is an error.
    let mut messages = vec![user("a", "1"), user("b", "2")];
    let update = vec![remove("b")];
    UpsertMessages
        .reduce(&mut messages, update.clone())
        .unwrap();
    assert!(UpsertMessages.reduce(&mut messages, update).is_err());
    assert_eq!(messages, [user("a", "1")]);
}

#[test]
fn map_and_value_reducers_marked_idempotent_are_idempotent() {
    let mut rng = Rng(99);
    for _ in 0..300 {
        let map = |rng: &mut Rng| -> BTreeMap<u8, u8> {
            (0..rng.below(5))
                .map(|_| (rng.below(6) as u8, rng.below(3) as u8))
                .collect()
        };
        let (start, update) = (map(&mut rng), map(&mut rng));
        let mut once = start.clone();
        Merge.reduce(&mut once, update.clone()).unwrap();
        let mut twice = once.clone();
        Merge.reduce(&mut twice, update.clone()).unwrap();
        assert_eq!(twice, once, "merge: merging twice");
        let mut round_trip = once.clone();
        Merge.reduce(&mut round_trip, once.clone()).unwrap();
        assert_eq!(round_trip, once, "merge: re-merging the value");

        for reducer in [&LastWriteWins as &dyn ReducerInfo, &ReplaceValue] {
            let mut value = start.clone();
            let merge =
                |value: &mut BTreeMap<u8, u8>, update: BTreeMap<u8, u8>| match reducer.name() {
                    "last_write_wins" => LastWriteWins.reduce(value, update),
                    _ => ReplaceValue.reduce(value, update),
                };
            merge(&mut value, update.clone()).unwrap();
            let once = value.clone();
            merge(&mut value, update.clone()).unwrap();
            assert_eq!(value, once, "{}: merging twice", reducer.name());
            merge(&mut value, once.clone()).unwrap();
            assert_eq!(value, once, "{}: re-merging the value", reducer.name());
        }
    }
}

#[test]
fn reducers_marked_not_idempotent_are_not() {
    // append: the same update twice appends twice; re-merging the value doubles it.
    let mut items = vec!["a"];
    Append.reduce(&mut items, vec!["b"]).unwrap();
    let once = items.clone();
    Append.reduce(&mut items, vec!["b"]).unwrap();
    assert_ne!(items, once);
    let mut doubled = once.clone();
    Append.reduce(&mut doubled, once.clone()).unwrap();
    assert_eq!(doubled, ["a", "b", "a", "b"]);

    // concat_flatten: the same.
    let mut flat = vec![1];
    ConcatFlatten.reduce(&mut flat, vec![vec![2]]).unwrap();
    let once = flat.clone();
    ConcatFlatten.reduce(&mut flat, vec![vec![2]]).unwrap();
    assert_eq!(flat, [1, 2, 2]);
    let mut again = once.clone();
    ConcatFlatten
        .reduce(&mut again, vec![once.clone()])
        .unwrap();
    assert_ne!(again, once);

    // bounded_append: under the bound it appends twice; re-merging the value changes it.
    let reducer = bounded(3);
    let mut recent = vec![1];
    reducer.reduce(&mut recent, vec![2]).unwrap();
    let once = recent.clone();
    reducer.reduce(&mut recent, vec![2]).unwrap();
    assert_eq!(recent, [1, 2, 2]);
    let mut again = once.clone();
    reducer.reduce(&mut again, once.clone()).unwrap();
    assert_eq!(again, [2, 1, 2]);

    // merge_all: its update is a list of maps, not a map, so the merged value cannot be merged
    // back as it is: a dynamic field rejects it.
    let schema = one_field(json!({"type": "dict", "reducer": "merge_all", "default": {}}));
    let mut state = schema.initial_state();
    schema
        .merge(&mut state, json!({"f": [{"a": 1}, {"b": 2}]}))
        .unwrap();
    let value = state["f"].clone();
    let err = schema.merge(&mut state, json!({ "f": value })).unwrap_err();
    assert_eq!(err.category(), "reducer_error");
}

// =============================================================================================
// Dynamic schemas: configuration errors, validation, atomic merges

#[test]
fn schema_configuration_errors_come_before_any_merge() {
    let cases = [
        (
            json!({"type": "list<string>", "reducer": "append", "alt_reducer": "last_write_wins"}),
            "conflicting_reducers",
        ),
        (
            json!({"reducer": "appendd"}),
            "reducer_configuration_invalid",
        ),
        (
            json!({"reducer": {"append": {"x": 1}}}),
            "reducer_configuration_invalid",
        ),
        (json!({"reducer": 3}), "reducer_configuration_invalid"),
        (
            json!({"reducer": {"append": {}, "merge": {}}}),
            "reducer_configuration_invalid",
        ),
        (json!({"type": "no_such_type"}), "state_validation_error"),
        (
            json!({"type": "int", "default": "zero"}),
            "state_validation_error",
        ),
        (json!("not an object"), "state_validation_error"),
    ];
    for (decl, category) in cases {
        let err = Schema::from_json(&json!({"fields": {"f": decl}})).unwrap_err();
        assert_eq!(err.category(), category, "{decl}: {err}");
        assert!(
            err.to_string().contains("`f`") || err.field() == Some("f"),
            "{decl}: {err}"
        );
    }
    let conflicting = Schema::builder()
        .field(Field::new("v").reducer("append").reducer("merge"))
        .build()
        .unwrap_err();
    assert_eq!(conflicting.category(), "conflicting_reducers");
    assert!(conflicting.is_configuration_error());
    assert!(conflicting.to_string().contains("`v`"), "{conflicting}");
    let twice = Schema::builder()
        .field(Field::new("v"))
        .field(Field::new("v"))
        .build()
        .unwrap_err();
    assert_eq!(twice.category(), "conflicting_reducers");
    assert_eq!(
        Schema::from_json(&json!({"no_fields": {}}))
            .unwrap_err()
            .category(),
        "state_validation_error"
    );
}

fn two_field_schema() -> Schema {
    Schema::from_json(&json!({"fields": {
        "items": {"type": "list<string>", "reducer": "append", "default": []},
        "recent": {"type": "list<string>", "reducer": {"bounded_append": {"max_len": 2}}, "default": []},
        "count": {"type": "int", "default": 0},
    }}))
    .unwrap()
}

#[test]
fn dynamic_merges_are_all_or_nothing() {
    let schema = two_field_schema();
    let mut state = schema.initial_state();
    schema
        .merge(
            &mut state,
            json!({"items": ["a"], "recent": ["a"], "count": 1}),
        )
        .unwrap();
    let before = state.clone();

    // A reducer error in one field: no field changes.
    let err = schema
        .merge_from(
            "writer",
            &mut state,
            json!({"items": ["b"], "recent": "oops", "count": 2}),
        )
        .unwrap_err();
    assert_eq!(err.category(), "reducer_error");
    assert_eq!(err.field(), Some("recent"));
    assert!(
        matches!(&err, Error::Reducer { node: Some(n), reducer, .. } if n == "writer" && reducer == "bounded_append")
    );
    assert!(
        err.to_string().contains("`recent`") && err.to_string().contains("`writer`"),
        "{err}"
    );
    assert_eq!(state, before);

    // A value that does not fit its declared type: the same.
    let err = schema
        .merge(&mut state, json!({"items": ["b"], "count": "two"}))
        .unwrap_err();
    assert_eq!(err.category(), "state_validation_error");
    assert!(err.to_string().contains("`count`"), "{err}");
    assert_eq!(state, before);

    // An undeclared field: the same, and the error names it.
    let err = schema
        .merge(&mut state, json!({"items": ["b"], "itemz": ["c"]}))
        .unwrap_err();
    assert_eq!(err.category(), "state_validation_error");
    assert!(err.to_string().contains("`itemz`"), "{err}");
    assert_eq!(state, before);

    // An update that is not an object.
    for bad in [json!(null), json!([1]), json!("items")] {
        let err = schema.merge(&mut state, bad.clone()).unwrap_err();
        assert_eq!(err.category(), "state_validation_error", "{bad}");
    }
    assert_eq!(state, before);
}

#[test]
fn dynamic_reducers_are_not_called_for_absent_fields() {
    let schema = two_field_schema();
    let mut state = schema.initial_state();
    // A value its reducer could not merge into: untouched while the field is absent.
    state.insert("items".into(), json!("not a list"));
    schema.merge(&mut state, json!({"count": 5})).unwrap();
    assert_eq!(state["count"], json!(5));
    assert_eq!(state["items"], json!("not a list"));
    assert!(schema.merge(&mut state, json!({"items": ["x"]})).is_err());
    // An empty update changes nothing.
    let before = state.clone();
    schema.merge(&mut state, json!({})).unwrap();
    assert_eq!(state, before);
}

// =============================================================================================
// Typed states: AgentState and a hand-written State

#[test]
fn agent_state_starts_empty_and_running() {
    let state = AgentState::default();
    assert!(state.context.is_empty());
    assert_eq!(state.context_summary, None);
    assert_eq!(state.execution_meta, ExecutionState::default());
    assert_eq!(state.execution_meta.current_node, "__start__");
    assert!(state.is_running() && !state.is_interrupted() && !state.is_stopped_requested());
}

#[test]
fn agent_state_context_merges_with_add_messages() {
    let mut state = AgentState::default();
    state
        .merge(AgentStateUpdate::default().context(vec![user("m1", "hi"), user("m1", "hi")]))
        .unwrap();
    assert_eq!(
        state.context.len(),
        2,
        "duplicates inside one update are kept"
    );
    state
        .merge(AgentStateUpdate::default().context(vec![
            user("m1", "edited"),
            delta("m2", "partial"),
            assistant("m3", "answer"),
        ]))
        .unwrap();
    assert_eq!(
        state.context.as_slice(),
        [
            user("m1", "hi"),
            user("m1", "hi"),
            assistant("m3", "answer")
        ]
    );
    // Easy to read: iterate, index, len, last, by id.
    assert_eq!(state.context.iter().count(), 3);
    assert_eq!(state.context[2], assistant("m3", "answer"));
    assert_eq!(state.context.last(), Some(&assistant("m3", "answer")));
    assert_eq!(
        state.context.get_by_id(&mid("m3")),
        Some(&assistant("m3", "answer"))
    );
    assert_eq!(state.context.get_by_id(&mid("m1")), Some(&user("m1", "hi")));
    assert!(state.context.contains_id(&mid("m1")));
    assert!(!state.context.contains_id(&mid("m2")));
}

#[test]
fn agent_state_other_fields_are_last_write_wins_and_absent_fields_stay() {
    let mut state = AgentState::default();
    state
        .merge(AgentStateUpdate::default().context(vec![user("m1", "hi")]))
        .unwrap();
    state
        .merge(AgentStateUpdate::default().context_summary(Some("a greeting".to_string())))
        .unwrap();
    assert_eq!(state.context_summary.as_deref(), Some("a greeting"));
    assert_eq!(state.context.len(), 1, "an absent field is left alone");

    let mut meta = ExecutionState::new("agent");
    meta.set_interrupt(
        "tools",
        "approval",
        ExecutionStatus::InterruptedBefore,
        None,
    );
    state
        .merge(AgentStateUpdate::default().execution_meta(meta.clone()))
        .unwrap();
    assert_eq!(state.execution_meta, meta);
    assert!(state.is_interrupted());
    assert_eq!(state.context_summary.as_deref(), Some("a greeting"));

    state
        .merge(AgentStateUpdate::default().context_summary(None))
        .unwrap();
    assert_eq!(state.context_summary, None, "Some(None) clears the summary");
}

#[test]
fn agent_state_round_trips_through_json_and_keeps_merging_by_id() {
    let mut state = AgentState::default();
    state
        .merge(AgentStateUpdate::default().context(vec![user("m1", "hi"), assistant("m2", "yo")]))
        .unwrap();
    let json = to_json(&state);
    assert!(json["context"].is_array(), "the context is a plain list");
    assert_eq!(json["context"].as_array().unwrap().len(), 2);
    let mut back: AgentState = serde_json::from_value(json).unwrap();
    assert_eq!(back, state);
    back.merge(AgentStateUpdate::default().context(vec![user("m1", "again"), user("m9", "new")]))
        .unwrap();
    assert_eq!(ids(&back.context), [mid("m1"), mid("m2"), mid("m9")]);

    let update: AgentStateUpdate = serde_json::from_value(json!({
        "context": [to_json(&user("m10", "from json"))],
        "context_summary": null
    }))
    .unwrap();
    assert_eq!(update.context_summary, Some(None));
    back.merge(update).unwrap();
    assert_eq!(back.context.len(), 4);
    let err = AgentStateUpdate::from_json(json!({"contexts": []})).unwrap_err();
    assert_eq!(err.category(), "state_validation_error");
    assert_eq!(err.field(), Some("contexts"));
}

#[test]
fn agent_state_schema_names_each_fields_reducer() {
    let schema = AgentState::schema();
    let fields: Vec<(&str, &str, bool)> = schema
        .fields()
        .iter()
        .map(|f| {
            (
                f.name.as_str(),
                f.reducer.name.as_str(),
                f.round_trip_idempotent,
            )
        })
        .collect();
    assert_eq!(
        fields,
        [
            ("context", "add_messages", true),
            ("context_summary", "last_write_wins", true),
            ("context_summary_through", "last_write_wins", true),
            ("execution_meta", "last_write_wins", true)
        ]
    );
}

/// A derived state with a field whose reducer can fail, to check that typed merges are all or
/// nothing.
#[derive(
    agentstate::AgentState, Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize,
)]
struct Notes {
    #[reducer(append)]
    items: Vec<String>,
    #[reducer(upsert_messages)]
    history: MessageList,
}

#[test]
fn typed_merges_are_all_or_nothing() {
    let mut notes = Notes::default();
    notes
        .merge(NotesUpdate {
            items: Some(vec!["first".into()]),
            history: Some(vec![put(user("a", "1"))]),
            ..Default::default()
        })
        .unwrap();
    let before = notes.clone();
    let err = notes
        .merge(NotesUpdate {
            items: Some(vec!["second".into()]),
            history: Some(vec![put(user("b", "2")), remove("missing")]),
            ..Default::default()
        })
        .unwrap_err();
    assert_eq!(err.category(), "reducer_error");
    assert_eq!(err.field(), Some("history"));
    assert!(err.to_string().contains("upsert_messages"), "{err}");
    assert_eq!(notes, before, "the first field was not merged either");

    notes
        .merge(NotesUpdate {
            items: Some(vec!["second".into()]),
            history: None,
            ..Default::default()
        })
        .unwrap();
    assert_eq!(notes.items, ["first", "second"]);
    assert_eq!(notes.history.as_slice(), [user("a", "1")]);
    let described: Vec<_> = Notes::schema()
        .fields()
        .iter()
        .map(|f| (f.name.clone(), f.round_trip_idempotent))
        .collect();
    assert_eq!(
        described,
        [("items".to_string(), false), ("history".to_string(), true)]
    );
}
