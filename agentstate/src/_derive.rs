//! # Reference: `#[derive(AgentState)]`
//!
//! The derive implements [`State`](crate::State) for a struct whose fields declare their
//! reducers, and generates its update type, `<Name>Update`: one optional entry per field, a
//! setter per field, and an Overwrite per field (see [`Update`](crate::Update)).
//!
//! ```
//! use agentstate::{AgentState, State};
//! use serde::{Deserialize, Serialize};
//!
//! #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
//! pub struct Finding { id: u32, claim: String }
//!
//! #[derive(AgentState, Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
//! pub struct Research {
//!     #[reducer(append)]
//!     notes: Vec<String>,
//!     #[reducer(bounded_append(max_len = 3))]
//!     recent: Vec<u32>,
//!     #[reducer(merge_by_key(key = id))]
//!     findings: Vec<Finding>,
//!     title: String, // no attribute: last_write_wins
//! }
//!
//! let mut state = Research::default();
//! state.merge(ResearchUpdate::default().notes(vec!["first".into()]).recent(vec![1, 2, 3, 4]))?;
//! state.merge(ResearchUpdate::default().findings(vec![Finding { id: 1, claim: "a".into() }]))?;
//! state.merge(ResearchUpdate::default().findings(vec![Finding { id: 1, claim: "b".into() }]))?;
//! assert_eq!(state.recent, [2, 3, 4]);
//! assert_eq!(state.findings.len(), 1);
//! assert_eq!(state.findings[0].claim, "b");
//! # Ok::<(), agentstate::Error>(())
//! ```
//!
//! ## Field attributes
//!
//! | attribute | meaning |
//! |---|---|
//! | *(none)* | `last_write_wins` |
//! | `#[reducer(NAME)]` | a reducer without parameters: `append`, `merge`, `add_messages`, ... (table below) |
//! | `#[reducer(bounded_append(max_len = 50))]` | a reducer with parameters (`bounded_append(50)` also works; `max_len` may be a const path) |
//! | `#[reducer(merge_by_key(key = id))]` | `key` names a field of the items (borrowed) |
//! | `#[reducer(merge_by_key(key = self::key_of))]` | or a function path (two segments or more) returning an owned key |
//! | `#[reducer(dedupe_append(key = \|d: &Doc\| d.rev))]` | or a closure returning an owned key |
//! | `#[reducer(with = path::to::function)]` | your own reducer, a `fn(&T, U) -> Result<T, E>` with `E: Into<Box<dyn Error + Send + Sync>>` (a `String` works); `U` is the field type unless `update = Type` is added; add `idempotent` to declare it round-trip idempotent. Two writes of the field in one step (`then`, parallel branches, several node outputs) run the function on each in turn: the update holds [`Steps<U>`](crate::reducers::Steps), `{"__steps__": [...]}` in JSON when there are several |
//! | `#[reducer(nested)]` | the field is a derived state; it merges its own update, atomically with the outer state |
//! | `#[agent_state(base)]` | the field is the base this state extends (below) |
//! | `#[agent_state(skip)]` | a field updates never touch (it has no entry in the update) |
//!
//! ## Struct attributes
//!
//! | attribute | meaning |
//! |---|---|
//! | `#[agent_state(update = Name)]` | the update type's name (`<Name>Update` by default) |
//! | `#[agent_state(crate = path)]` | the path of a re-exported runtime (`::agentstate` by default) |
//! | `#[agent_state(messages = field)]` | the field that node outputs' messages and tool messages go into ([`NodeOutput`](crate::NodeOutput)); an extension of [`AgentState`](struct@crate::state::AgentState) uses `context`. Unmarked, the one `add_messages` field written `Vec<Message>` or `MessageList` is the messages field; two such fields are a compile error asking to name one |
//! | `#[agent_state(version = N)]` | the schema version (1 and up; 0 when none is declared) a durable store records and keys migrations by: bump it when an edit is not compatible with what was stored (see `agentstate_store::migrate`) |
//! | `#[agent_state(extensible)]` | other states may extend this one: the derive also generates `<Update>Setters`, the trait that gives the extending states' updates this state's setters (a state that is not marked does not pay for it) |
//! | `#[agent_state(deserialize)]` | the derive generates the struct's `Deserialize`, reading a base's keys in the same pass (below) |
//!
//! serde's field `rename` and container `rename_all` carry over, so the update's JSON keys equal
//! the state's. Generic structs with bounds and where clauses work.
//!
//! ## Reducers
//!
//! The update column is what the generated update holds for the field (inside an `Option`).
//! Round-trip idempotent: merging the same update twice gives the state merging it once gives
//! (what a replayed journal relies on).
//!
//! | reducer | from | parameters | field types | update | round-trip idempotent |
//! |---|---|---|---|---|---|
//! | `last_write_wins` (default) | OpenArmature | | any `T` | `T` | yes |
//! | `append` | OpenArmature | | `Vec<T>`, `VecDeque<T>`, `serde_json::Value` (array) | the field type | no |
//! | `merge` | OpenArmature | | `HashMap`, `BTreeMap`, `serde_json::Map`, `Value` (object) | the field type | yes |
//! | `bounded_append` | OpenArmature | `max_len` ≥ 1 | `Vec<T>`, `VecDeque<T>` (O(k)), `Value` | the field type | no |
//! | `dedupe_append` | OpenArmature | `key` (optional) | `Vec<T>`, `KeyedList<T>` (O(k)), `Value` | the field type | yes |
//! | `merge_by_key` | OpenArmature | `key` (required) | `Vec<T>`, `KeyedList<T>` (O(k)), `Value` | the field type | yes |
//! | `concat_flatten` | OpenArmature | | `Vec<T>`, `VecDeque<T>`, `Value` | `Vec<field type>` | no |
//! | `merge_all` | OpenArmature | | the maps of `merge`, `Value` | `Vec<field type>` | no |
//! | `add_messages` | AgentFlow | | `Vec<Message>`, `MessageList` (O(k)) | the field type | yes |
//! | `replace_messages` | AgentFlow | | `Vec<Message>`, `MessageList` | the field type | yes |
//! | `append_items` | AgentFlow | | `Vec<T: HasId>`, `KeyedList<T: HasId>` (O(k)) | the field type | yes |
//! | `replace_value` | AgentFlow | | any `T` | `T` | yes |
//! | `upsert_messages` | LangGraph | | `Vec<Message>`, `MessageList` (O(k)) | `Vec<MessageUpdate>` | yes |
//! | `add` | LangGraph (`operator.add` on numbers) | | integers (checked: out of range is a `reducer_error` and the value is kept), `f32`, `f64`, `Value` (a number; `null` is 0) | the field type | no |
//! | `nested` | agentstate | | a derived state | its update | when all its fields are |
//!
//! Each reducer's semantics are on its type in [`reducers`](crate::reducers). "O(k)": the
//! indexed collections ([`KeyedList`](crate::KeyedList)) merge k items in O(k) however long the list is;
//! on a plain `Vec` a keyed merge is O(n). On a `serde_json::Value` field, `null` (what
//! `Value::default()` is) merges as the empty list or object. LangGraph's
//! `Annotated[list, operator.add]` concatenates lists: that is `append`.
//!
//! `upsert_messages` is LangGraph's `add_messages` (langgraph 1.2.22): a message whose id is in
//! the list replaces it in place, a new id appends, [`MessageUpdate::Remove`] deletes every
//! message with its id (an unknown id is a `reducer_error`), and after the update's last
//! [`MessageUpdate::RemoveAll`] the list is exactly the messages that follow it. One deliberate
//! departure: a removal after the last `RemoveAll` drops the messages with its id before it
//! (LangGraph keeps the removal marker in the list), and is an error if there are none.
//!
//! [`MessageUpdate::Remove`]: crate::reducers::MessageUpdate::Remove
//! [`MessageUpdate::RemoveAll`]: crate::reducers::MessageUpdate::RemoveAll
//!
//! ### Keys, your own reducers, nested states, skipped fields
//!
//! ```
//! use agentstate::KeyedList;
//! use agentstate::{AgentState, State};
//! use serde::{Deserialize, Serialize};
//!
//! #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
//! pub struct Doc { url: String, rev: u32 }
//!
//! fn url_of(doc: &Doc) -> String { doc.url.clone() }
//!
//! /// A reducer of your own: refuses a negative balance.
//! fn non_negative(_current: &i64, update: i64) -> Result<i64, String> {
//!     if update < 0 { Err(format!("{update} is negative")) } else { Ok(update) }
//! }
//!
//! #[derive(AgentState, Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
//! pub struct Ledger {
//!     #[reducer(with = non_negative)]
//!     balance: i64,
//! }
//!
//! #[derive(AgentState, Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
//! #[agent_state(update = LibraryPatch)]
//! pub struct Library {
//!     #[reducer(merge_by_key(key = self::url_of))]
//!     by_url: Vec<Doc>,
//!     #[reducer(dedupe_append(key = |d: &Doc| d.rev))]
//!     first_of_each_rev: Vec<Doc>,
//!     #[reducer(merge_by_key(key = url))]
//!     indexed: KeyedList<Doc>,
//!     #[reducer(nested)]
//!     ledger: Ledger,
//!     #[agent_state(skip)]
//!     #[serde(skip)]
//!     cache: Vec<u8>,
//! }
//!
//! # fn main() -> Result<(), agentstate::Error> {
//! let doc = |url: &str, rev| Doc { url: url.into(), rev };
//! let mut lib = Library::default();
//! let docs = vec![doc("a", 1), doc("b", 1), doc("a", 2)];
//! lib.merge(LibraryPatch::default().by_url(docs.clone()).first_of_each_rev(docs.clone()).indexed(docs))?;
//! assert_eq!(lib.by_url, [doc("a", 2), doc("b", 1)]);
//! assert_eq!(lib.first_of_each_rev, [doc("a", 1), doc("a", 2)]);
//!
//! // A nested state's error names the path; the whole merge is refused.
//! let before = lib.clone();
//! let err = lib
//!     .merge(LibraryPatch::default().by_url(vec![doc("c", 1)]).ledger(LedgerUpdate::default().balance(-1)))
//!     .unwrap_err();
//! assert_eq!(err.field(), Some("ledger.balance"));
//! assert_eq!(err.to_string(), "reducer `non_negative` failed on field `ledger.balance`: -1 is negative");
//! assert_eq!(lib, before);
//! # Ok(())
//! # }
//! ```
//!
//! ### Setters
//!
//! A setter is named after its field (or `set_<field>` when the field's name is one of the
//! update's methods: `default`, `clone`, `eq`, `ne`, `fmt`, `serialize`, `deserialize`,
//! `from_json`, `from_json_lenient`, `then`) and takes
//! [`impl IntoField<T>`](crate::update::IntoField) of the field's update type: the type itself
//! (so an integer literal takes the field's type), a `&str` for a `String`, a `T` for an
//! `Option<T>`, a `Vec` or an array for a `Vec`, `VecDeque`, `KeyedList` or `MessageList`, and
//! an array of `&str` for a `Vec<String>` or `VecDeque<String>` (write `vec![]` for an empty
//! one). A setter called again replaces its value; `a.then(b)` combines two updates through the
//! reducers (making a second call combine as well made the derive's generated code too costly
//! to compile: see the compile-time table in `benches/README.md`).
//!
//! ```
//! use agentstate::{AgentState, State};
//! use std::collections::VecDeque;
//!
//! #[derive(AgentState, Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
//! pub struct Usage {
//!     tokens_used: u64,
//!     model: Option<String>,
//!     #[reducer(bounded_append(max_len = 2))]
//!     recent: VecDeque<u8>,
//! }
//!
//! let mut usage = Usage::default();
//! usage.merge(UsageUpdate::default().tokens_used(120).model("gpt").recent([1, 2, 3]))?;
//! assert_eq!((usage.tokens_used, usage.model.as_deref()), (120, Some("gpt")));
//! assert_eq!(usage.recent, [2, 3]);
//! # Ok::<(), agentstate::Error>(())
//! ```
//!
//! ### The generated update type
//!
//! `<Name>Update` has a public `Option` per field that updates can touch (`None` leaves the field
//! alone), the base's update for an extension, and `overwrite: <Name>UpdateOverwrite`, the
//! Overwrites (an `Option` per field; a field named `overwrite` moves it to `__overwrite`). It is
//! `Default`, `Clone`, `PartialEq`, `Debug`, `Serialize` and `Deserialize` (its JSON has the
//! state's keys, Overwrites as `"field.__overwrite__"`), and `#[must_use]`. Its `Debug` prints
//! the entries that are set.
//!
//! ```
//! use agentstate::AgentState;
//!
//! #[derive(AgentState, Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
//! pub struct Research {
//!     #[reducer(append)]
//!     notes: Vec<String>,
//!     title: String,
//! }
//!
//! let update = ResearchUpdate::default().notes(vec!["a".into()]).overwrite_title("t".to_string());
//! assert_eq!(update.notes.as_deref(), Some(&["a".to_string()][..]));
//! assert_eq!(format!("{update:?}"), r#"ResearchUpdate { notes: ["a"], title.__overwrite__: "t" }"#);
//! assert_eq!(
//!     serde_json::to_string(&update).unwrap(),
//!     r#"{"notes":["a"],"title.__overwrite__":"t"}"#
//! );
//! ```
//!
//! ## Extending a state: `#[agent_state(base)]`
//!
//! Subclass-style extension, as AgentFlow's `class OrderState(AgentState)`: one field, usually
//! [`agentstate::state::AgentState`](struct@crate::state::AgentState), marked
//! `#[agent_state(base)]` and `#[serde(flatten)]`. The struct derefs to its base, its update
//! flattens the base's update (in JSON too: the base's keys sit beside the state's own), and the
//! base's setters work on it through the base's setters trait
//! (`use agentstate::state::AgentStateUpdateSetters`). The base must be marked
//! `#[agent_state(extensible)]` (`AgentState` is).
//!
//! ```
//! use agentstate::message::{Message, Role};
//! use agentstate::state::AgentStateUpdateSetters;
//! use agentstate::{AgentState, State};
//!
//! #[derive(AgentState, Debug, Clone, Default, PartialEq, serde::Serialize)]
//! #[agent_state(deserialize)]
//! pub struct OrderState {
//!     #[agent_state(base)]
//!     #[serde(flatten)]
//!     base: agentstate::state::AgentState,
//!     #[reducer(append)]
//!     cart: Vec<String>,
//!     confirmed: bool,
//! }
//!
//! let mut order = OrderState::default();
//! order.merge(
//!     OrderStateUpdate::default()
//!         .context(vec![Message::text_message("Two coffees", Role::User)]) // the base's setter
//!         .cart(vec!["coffee".into(), "coffee".into()]),
//! )?;
//! assert_eq!(order.context.len(), 1); // the base's field, through Deref
//! order.apply_json(serde_json::json!({"confirmed": true, "cart": ["cake"]}))?;
//! assert_eq!(order.cart, ["coffee", "coffee", "cake"]);
//!
//! let json = serde_json::to_string(&order)?;
//! let back: OrderState = serde_json::from_str(&json)?;
//! assert_eq!(back, order);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! ## `#[agent_state(deserialize)]`
//!
//! The derive generates the struct's `serde::Deserialize` (so do not also derive serde's: rustc's
//! E0119, "conflicting implementations of trait `Deserialize`", means exactly that) and
//! [`DeserializeFields`](crate::state::DeserializeFields), which reads the object in one pass,
//! its own keys by name and every other key offered to the base. Use it on a state with a base:
//! serde's derive reads a `#[serde(flatten)]` base by buffering every key the struct does not
//! name (the whole conversation) and parsing it again, about twice the time. The base must
//! implement `DeserializeFields`: `AgentState` does, and so does every state with the opt-in.
//!
//! Values and errors are serde's derive's: "missing field `x`" (an absent `Option` is `None`),
//! "duplicate field `x`", a field's own type errors, unknown keys ignored (or "unknown field `x`"
//! with `#[serde(deny_unknown_fields)]`). Supported serde options: on fields `rename = "..."`,
//! `default`, `default = "path"`, `skip`, `skip_deserializing`, `flatten` on the base, and the
//! serialization-only ones; on the struct `default`, `default = "path"`, `rename_all = "..."`,
//! `deny_unknown_fields`, `rename`, `expecting`. Any other (`alias`, `with`, `deserialize_with`,
//! `borrow`, `flatten` on another field, `rename(deserialize = ...)`, ...) and generic structs
//! are compile errors saying to drop the opt-in. Departures from serde's derive: a base's own
//! errors are reported where they occur; a state without a base read from a JSON array of its
//! values reports a short array as "missing field" instead of "invalid length".
//!
//! ## Field requirements
//!
//! Every field that updates can touch (all but `#[agent_state(skip)]` fields) must be
//! `Clone + PartialEq + Debug + Serialize + Deserialize`: the generated update stores, compares,
//! clones, prints and (de)serializes the field's value. A `nested` field's type must derive
//! `AgentState`; a base field's type must be a state marked `#[agent_state(extensible)]`. A keyed
//! reducer's key must be `Hash + Eq`, so not a float: key by another field, or by a function
//! returning an owned key (`key = |r: &Reading| r.at.to_bits()`). A field that cannot meet them
//! and that updates never touch takes `#[agent_state(skip)]`. A type that misses a requirement is
//! one error on the field, naming the requirement, with a hint.
//!
//! ## Compile-time checks
//!
//! Every message starts with its OpenArmature category; all errors of a struct are reported at
//! once. `tests/ui/` holds one trybuild case per check with its expected message.
//!
//! - `conflicting_reducers`: two `#[reducer]` attributes on a field, two reducers in one, a
//!   reducer on the base field, or an extension declaring a field its base already has.
//! - `reducer_configuration_invalid`: `bounded_append` with `max_len` zero, negative, not an
//!   integer, missing, or a const path whose value is below 1; `merge_by_key` without a key;
//!   unknown parameters and unknown reducers (with "did you mean"); a key that is neither a
//!   field, a path nor a closure.
//! - `state_declaration_invalid`: the derive on an enum, a union or a tuple struct; unknown
//!   `agent_state` options (with "did you mean"); `skip` with a reducer; two bases; a base field
//!   without `#[serde(flatten)]`; a base not marked `extensible`; under
//!   `#[agent_state(deserialize)]`, an unsupported serde option, a generic struct, or a base
//!   without `DeserializeFields`.
//! - A reducer that does not fit its field's type is one error on the field:
//!   ``the reducer `Append` cannot merge into a field of type `String` ``.
//! - A field type without a requirement above, `nested` on a type that is not a state, and a
//!   float key are one error on the field (or the key).
//!
//! ```compile_fail
//! # use agentstate::AgentState;
//! #[derive(AgentState, Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
//! pub struct Draft {
//!     #[reducer(bounded_append(max_len = 0))] // reducer_configuration_invalid
//!     recent: Vec<u32>,
//! }
//! ```
//!
//! ```compile_fail
//! # use agentstate::AgentState;
//! #[derive(AgentState, Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
//! pub struct Draft {
//!     #[reducer(apend)] // reducer_configuration_invalid: unknown reducer, did you mean `append`?
//!     notes: Vec<String>,
//! }
//! ```
//!
//! ```compile_fail,E0277
//! # use agentstate::AgentState;
//! #[derive(AgentState, Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
//! pub struct Draft {
//!     #[reducer(append)] // the reducer `Append` cannot merge into a field of type `String`
//!     title: String,
//! }
//! ```
//!
//! ```compile_fail
//! # use agentstate::AgentState;
//! #[derive(AgentState, Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
//! pub struct Draft {
//!     #[reducer(append)]
//!     #[reducer(merge)] // conflicting_reducers
//!     notes: Vec<String>,
//! }
//! ```
//!
//! ## Runtime introspection
//!
//! `State::FIELDS` lists the update's JSON keys (a base's first) and `State::schema()` each
//! field's reducer, parameters and round-trip idempotence: the same
//! [`Schema`](crate::schema::Schema) type that configuration-driven agents build at run time.
//!
//! ```
//! use agentstate::{AgentState, State};
//!
//! #[derive(AgentState, Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
//! #[serde(rename_all = "camelCase")]
//! pub struct Notes {
//!     #[reducer(bounded_append(max_len = 5))]
//!     recent_notes: Vec<String>,
//!     title: String,
//! }
//!
//! assert_eq!(Notes::FIELDS, ["recentNotes", "title"]);
//! let schema = Notes::schema();
//! let recent = schema.field("recentNotes").unwrap();
//! assert_eq!(recent.reducer.name, "bounded_append");
//! assert!(!recent.round_trip_idempotent);
//! ```
