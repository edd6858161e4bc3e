//! Behaviour of `#[derive(AgentState)]`: extension, nested states, custom reducers, keys,
//! serde renames, atomic merges and introspection.

use agentstate::message::{Message, Role};
use agentstate::schema::Schema;
use agentstate::state::AgentStateUpdateSetters;
use agentstate::KeyedList;
use agentstate::{AgentState, State};
use serde::{Deserialize, Serialize};
use std::cell::Cell;
use std::collections::BTreeMap;

/// The seed's OrderState: AgentFlow's `class OrderState(AgentState)`.
#[derive(AgentState, Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct OrderState {
    #[agent_state(base)]
    #[serde(flatten)]
    base: agentstate::state::AgentState,
    order_id: Option<String>,
    #[reducer(append)]
    cart: Vec<BTreeMap<String, u32>>,
    confirmed: bool,
    discount_code: Option<String>,
}

#[test]
fn an_extension_reads_like_its_base() {
    let mut order = OrderState::default();
    assert!(order.is_running(), "base methods through Deref");
    let hi = Message::text_message("I'd like to order", Role::User).with_id("u1");
    order
        .merge(
            OrderStateUpdate::default()
                .context(vec![hi.clone()]) // a base setter, from AgentStateUpdateSetters
                .order_id(Some("ORD-1".to_string()))
                .confirmed(true),
        )
        .unwrap();
    assert_eq!(order.context.len(), 1, "base fields through Deref");
    assert_eq!(order.order_id.as_deref(), Some("ORD-1"));
    assert!(order.confirmed);
    // add_messages still governs the base's context.
    order
        .merge(OrderStateUpdate::default().context(vec![hi]))
        .unwrap();
    assert_eq!(order.context.len(), 1);
}

#[test]
fn an_extended_update_flattens_the_base_in_json() {
    let update: OrderStateUpdate = serde_json::from_value(serde_json::json!({
        "context": [{"message_id": "m1", "role": "user", "content": [{"type": "text", "text": "hi"}]}],
        "confirmed": true
    }))
    .unwrap();
    let mut order = OrderState::default();
    order.merge(update).unwrap();
    assert!(order.confirmed);
    assert_eq!(order.context[0].text(), "hi");
    // The state's JSON has the base's keys at the top level too.
    let json = serde_json::to_value(&order).unwrap();
    assert!(json.get("context").is_some() && json.get("confirmed").is_some());
    assert_eq!(
        OrderState::FIELDS,
        [
            "context",
            "context_summary",
            "context_summary_through",
            "execution_meta",
            "order_id",
            "cart",
            "confirmed",
            "discount_code"
        ]
    );
    let names: Vec<String> = OrderState::schema()
        .fields()
        .iter()
        .map(|f| f.name.clone())
        .collect();
    assert_eq!(names, OrderState::FIELDS);
}

/// A generic state marked extensible, and a state extending one of its instances.
#[derive(AgentState, Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[agent_state(extensible)]
pub struct Tagged<T: Clone + Default + PartialEq + std::fmt::Debug> {
    #[reducer(append)]
    pub tags: Vec<T>,
}

#[derive(AgentState, Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Page {
    #[agent_state(base)]
    #[serde(flatten)]
    pub base: Tagged<String>,
    pub title: String,
}

#[test]
fn a_generic_extensible_state_is_a_base() {
    // A generic state gets no setters trait; the extension's update takes the base's keys in
    // JSON and through `Extends::base_update`.
    let mut page = Page::default();
    page.merge(PageUpdate::from_json(serde_json::json!({"tags": ["a"], "title": "t"})).unwrap())
        .unwrap();
    let mut update = PageUpdate::default();
    agentstate::Extends::base_update(&mut update).tags = Some(vec!["b".to_string()]);
    page.merge(update).unwrap();
    assert_eq!(page.tags, ["a", "b"], "appended through the base's reducer");
    assert_eq!(page.title, "t");
}

thread_local! {
    static CALLS: Cell<u32> = const { Cell::new(0) };
}

/// Fails when asked to store a negative number; counts its calls.
fn non_negative(_current: &i64, update: i64) -> Result<i64, String> {
    CALLS.with(|c| c.set(c.get() + 1));
    if update < 0 {
        Err(format!("{update} is negative"))
    } else {
        Ok(update)
    }
}

#[derive(AgentState, Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Ledger {
    #[reducer(append)]
    entries: Vec<String>,
    #[reducer(bounded_append(max_len = 2))]
    recent: std::collections::VecDeque<u32>,
    #[reducer(merge)]
    totals: BTreeMap<String, i64>,
    #[reducer(with = non_negative)]
    balance: i64,
}

#[test]
fn a_failing_last_field_leaves_the_whole_state_unchanged() {
    let mut ledger = Ledger::default();
    ledger
        .merge(
            LedgerUpdate::default()
                .entries(vec!["open".to_string()])
                .recent(vec![1, 2])
                .balance(10),
        )
        .unwrap();
    let before = ledger.clone();
    let err = ledger
        .merge(
            LedgerUpdate::default()
                .entries(vec!["withdraw".to_string()])
                .recent(vec![3])
                .totals(BTreeMap::from([("out".to_string(), 50)]))
                .balance(-40),
        )
        .unwrap_err();
    assert_eq!(err.category(), "reducer_error");
    assert_eq!(
        err.to_string(),
        "reducer `non_negative` failed on field `balance`: -40 is negative"
    );
    assert_eq!(ledger, before, "nothing of the update was applied");
}

#[test]
fn reducers_of_absent_fields_are_not_called() {
    CALLS.with(|c| c.set(0));
    let mut ledger = Ledger::default();
    ledger
        .merge(LedgerUpdate::default().entries(vec!["x".to_string()]))
        .unwrap();
    assert_eq!(CALLS.with(Cell::get), 0);
    ledger.merge(LedgerUpdate::default().balance(3)).unwrap();
    assert_eq!(CALLS.with(Cell::get), 1);
    assert_eq!(ledger.balance, 3);
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Doc {
    url: String,
    rev: u32,
}

fn url_of(doc: &Doc) -> String {
    doc.url.clone()
}

#[derive(AgentState, Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[agent_state(update = LibraryPatch)]
pub struct Library {
    #[reducer(merge_by_key(key = self::url_of))]
    by_path: Vec<Doc>,
    #[reducer(dedupe_append(key = |d: &Doc| d.rev))]
    first_of_each_rev: Vec<Doc>,
    #[reducer(merge_by_key(key = url))]
    indexed: KeyedList<Doc>,
    #[serde(rename = "label")]
    display_name: String,
    #[reducer(nested)]
    inner: Ledger,
    #[agent_state(skip)]
    #[serde(skip)]
    cache: Vec<u8>,
}

fn doc(url: &str, rev: u32) -> Doc {
    Doc {
        url: url.into(),
        rev,
    }
}

#[test]
fn keys_as_fields_paths_and_closures() {
    let mut lib = Library::default();
    let docs = vec![doc("a", 1), doc("b", 1), doc("a", 2)];
    lib.merge(
        LibraryPatch::default()
            .by_path(docs.clone())
            .first_of_each_rev(docs.clone())
            .indexed(docs),
    )
    .unwrap();
    assert_eq!(lib.by_path, [doc("a", 2), doc("b", 1)]);
    assert_eq!(lib.first_of_each_rev, [doc("a", 1), doc("a", 2)]);
    assert_eq!(lib.indexed.as_slice(), [doc("a", 2), doc("b", 1)]);
    for rev in 3..6 {
        lib.merge(LibraryPatch::default().indexed(vec![doc("b", rev)]))
            .unwrap();
    }
    assert_eq!(lib.indexed.as_slice(), [doc("a", 2), doc("b", 5)]);
}

#[test]
fn nested_states_merge_recursively_and_atomically() {
    let mut lib = Library::default();
    lib.merge(
        LibraryPatch::default()
            .display_name("Shelf")
            .inner(LedgerUpdate::default().balance(5)),
    )
    .unwrap();
    assert_eq!(lib.inner.balance, 5);
    let before = lib.clone();
    let err = lib
        .merge(
            LibraryPatch::default()
                .display_name("Other")
                .inner(LedgerUpdate::default().balance(-1)),
        )
        .unwrap_err();
    assert_eq!(err.field(), Some("inner.balance"));
    assert_eq!(lib, before);
    assert!(lib.cache.is_empty());
}

#[test]
fn serde_renames_carry_over_to_the_update() {
    let patch: LibraryPatch = serde_json::from_value(serde_json::json!({
        "label": "L",
        "byPath": [{"url": "u", "rev": 1}],
        "inner": {"balance": 2}
    }))
    .unwrap();
    assert_eq!(patch.display_name.as_deref(), Some("L"));
    assert_eq!(patch.by_path.as_ref().map(Vec::len), Some(1));
    let fields: Vec<&str> = Library::FIELDS.to_vec();
    assert_eq!(
        fields,
        ["byPath", "firstOfEachRev", "indexed", "label", "inner"]
    );
}

#[test]
fn derived_and_dynamic_schemas_are_one_type() {
    let derived: Schema = Ledger::schema();
    let dynamic = Schema::from_json(&serde_json::json!({"fields": {
        "entries": {"reducer": "append"},
        "recent": {"reducer": {"bounded_append": {"max_len": 2}}},
        "totals": {"reducer": "merge"},
    }}))
    .unwrap();
    for name in ["entries", "recent", "totals"] {
        let (d, j) = (derived.field(name).unwrap(), dynamic.field(name).unwrap());
        assert_eq!(
            (&d.reducer, d.round_trip_idempotent),
            (&j.reducer, j.round_trip_idempotent)
        );
    }
    let balance = derived.field("balance").unwrap();
    assert_eq!(balance.reducer.name, "non_negative");
    assert!(!balance.round_trip_idempotent);
    // A derived schema merges JSON states too, for the reducers that run on JSON.
    let mut json = serde_json::to_value(Ledger::default()).unwrap();
    let state = json.as_object_mut().unwrap();
    derived
        .merge(
            state,
            serde_json::json!({"entries": ["a"], "recent": [1, 2, 3]}),
        )
        .unwrap();
    assert_eq!(state["recent"], serde_json::json!([2, 3]));
    let err = derived
        .merge(state, serde_json::json!({"balance": 1}))
        .unwrap_err();
    assert_eq!(err.category(), "reducer_error");
}

#[derive(AgentState, Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Usage {
    tokens_used: u64,
    cost_cents: Option<i64>,
    model: String,
    #[reducer(append)]
    latencies: Vec<u16>,
    #[reducer(bounded_append(max_len = 2))]
    recent: std::collections::VecDeque<u8>,
    #[reducer(merge)]
    per_model: BTreeMap<String, u32>,
}

#[test]
fn setters_take_integer_literals_and_the_usual_conversions() {
    let mut usage = Usage::default();
    // Integer literals take the field's type (with `impl Into<u64>`, `120` was an `i32`).
    usage
        .merge(
            UsageUpdate::default()
                .tokens_used(120)
                .cost_cents(-3)
                .model("gpt")
                .latencies(vec![40, 52])
                .recent([1, 2, 3])
                .per_model(BTreeMap::from([("gpt".to_owned(), 7)])),
        )
        .unwrap();
    assert_eq!(usage.tokens_used, 120);
    assert_eq!(usage.cost_cents, Some(-3));
    assert_eq!(usage.model, "gpt");
    assert_eq!(usage.latencies, [40, 52]);
    assert_eq!(usage.recent, [2, 3]);
    assert_eq!(usage.per_model["gpt"], 7);
    // `Some`/`None`, an owned `String`, and the field's type itself.
    usage
        .merge(
            UsageUpdate::default()
                .cost_cents(None)
                .model(String::from("o1"))
                .overwrite_latencies([9])
                .overwrite_tokens_used(5),
        )
        .unwrap();
    assert_eq!(usage.cost_cents, None);
    assert_eq!(usage.model, "o1");
    assert_eq!(usage.latencies, [9]);
    assert_eq!(usage.tokens_used, 5);
    let name = String::from("o3");
    usage.merge(UsageUpdate::default().model(&name)).unwrap();
    assert_eq!(usage.model, "o3");
    usage
        .merge(UsageUpdate::default().model(std::borrow::Cow::Borrowed("o4")))
        .unwrap();
    assert_eq!(usage.model, "o4");
    // The base's setters on an extension's update too.
    let update = OrderStateUpdate::default().context_summary("short");
    assert_eq!(update.base.context_summary, Some(Some("short".to_owned())));
}

/// Fields named like the update's own methods and trait methods.
#[derive(AgentState, Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Workflow {
    then: String,
    #[reducer(append)]
    from_json: Vec<u8>,
    default: u32,
    clone: bool,
}

#[test]
fn a_setter_that_would_shadow_a_method_of_the_update_takes_a_set_prefix() {
    let update = WorkflowUpdate::default()
        .set_then("review")
        .set_from_json([1, 2])
        .set_default(7)
        .set_clone(true);
    // The update's own methods are still the update's.
    let next = WorkflowUpdate::from_json(serde_json::json!({"from_json": [3]})).unwrap();
    let both = update.clone().then(next).unwrap();
    let mut workflow = Workflow::default();
    workflow.merge(both).unwrap();
    assert_eq!(workflow.then, "review");
    assert_eq!(workflow.from_json, [1, 2, 3]);
    assert_eq!((workflow.default, workflow.clone), (7, true));
    // `overwrite_<field>` keeps the field's name.
    workflow
        .merge(WorkflowUpdate::default().overwrite_from_json([]))
        .unwrap();
    assert!(workflow.from_json.is_empty());
}

#[test]
fn an_update_prints_the_entries_that_are_set_under_their_json_keys() {
    let update = WorkflowUpdate::default()
        .set_then("review")
        .overwrite_from_json([1]);
    assert_eq!(
        format!("{update:?}"),
        r#"WorkflowUpdate { then: "review", from_json.__overwrite__: [1] }"#
    );
    assert_eq!(format!("{:?}", WorkflowUpdate::default()), "WorkflowUpdate");
    // An extension's update prints its base's entries beside its own.
    let order = OrderStateUpdate::default()
        .confirmed(true)
        .context_summary("short");
    assert_eq!(
        format!("{order:?}"),
        r#"OrderStateUpdate { context_summary: Some("short"), confirmed: true }"#
    );
}
