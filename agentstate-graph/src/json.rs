//! [`JsonState`]: a state whose fields are only known at run time, merged through a runtime
//! [`Schema`] with the same reducers and errors as typed states; for graphs built from
//! configuration (and the OpenArmature conformance fixtures).
//!
//! Its update, [`JsonUpdate`], is a sequence of JSON partial updates; composing two keeps both
//! and, for parallel writes, refuses two writes of a `last_write_wins` field as typed states do.
//!
//! Both serialize as plain JSON objects (the state as its field values, the update as its
//! partial updates folded into one), so a store can keep them (a durable run of a graph
//! of `JsonState`s). The schema is not in that JSON: a `JsonState` is read back only inside
//! [`JsonState::reading`], which names the schema the states read on this thread take.
//!
//! ```
//! use agentstate::schema::Schema;
//! use agentstate::State;
//! use agentstate_graph::json::JsonState;
//! use serde_json::json;
//! use std::sync::Arc;
//!
//! let schema = Arc::new(Schema::from_json(&json!({"fields": {
//!     "log": {"type": "list<string>", "reducer": "append", "default": []},
//!     "v": {"type": "string", "default": ""}
//! }}))?);
//! let mut state = JsonState::new(Arc::clone(&schema));
//! let update = state.update(json!({"log": ["a"], "v": "x"}));
//! state.merge(update)?;
//! assert_eq!(state.to_json(), json!({"log": ["a"], "v": "x"}));
//! # Ok::<(), agentstate::Error>(())
//! ```

use agentstate::schema::Schema;
use agentstate::{Combine, FanIn};
use agentstate::{Error, State};
use serde_json::{Map, Value};
use std::cell::RefCell;
use std::sync::Arc;

thread_local! {
    /// The schemas of [`JsonState::reading`] calls in progress on this thread, innermost last.
    static READING: RefCell<Vec<Arc<Schema>>> = const { RefCell::new(Vec::new()) };
}

/// A JSON object state merged through a runtime [`Schema`]. Cloning copies the values.
#[derive(Debug, Clone)]
pub struct JsonState {
    schema: Arc<Schema>,
    values: Map<String, Value>,
}

impl PartialEq for JsonState {
    fn eq(&self, other: &Self) -> bool {
        self.values == other.values
    }
}

impl JsonState {
    /// A state with every field at its default.
    pub fn new(schema: Arc<Schema>) -> Self {
        let values = schema.initial_state();
        JsonState { schema, values }
    }

    /// A state with every field at its default, then `values` merged as an update (so through
    /// the reducers, as OpenArmature's `initial_state`).
    pub fn with_values(schema: Arc<Schema>, values: Value) -> Result<Self, Error> {
        let mut state = JsonState::new(schema);
        let update = state.update(values);
        state.merge(update)?;
        Ok(state)
    }

    /// A state holding `values` as they are: not merged through the reducers, not checked
    /// against the schema (a subgraph's or fan-out instance's projected fields are copied in so).
    pub fn from_values(schema: Arc<Schema>, values: Map<String, Value>) -> Self {
        JsonState { schema, values }
    }

    /// The schema.
    pub fn schema_ref(&self) -> &Arc<Schema> {
        &self.schema
    }

    /// The fields' values.
    pub fn values(&self) -> &Map<String, Value> {
        &self.values
    }

    /// One field's value.
    pub fn get(&self, field: &str) -> Option<&Value> {
        self.values.get(field)
    }

    /// The state as a JSON object.
    pub fn to_json(&self) -> Value {
        Value::Object(self.values.clone())
    }

    /// An update of this state from a JSON object of field values (checked when it merges).
    pub fn update(&self, json: Value) -> JsonUpdate {
        JsonUpdate::new(Arc::clone(&self.schema), json)
    }

    /// Runs `read` with `schema` as the schema of every `JsonState` deserialized on this thread
    /// meanwhile (a state's JSON holds its values, not its schema). Deserializing a `JsonState`
    /// outside any `reading` call fails with an error saying so. Fields the JSON lacks take
    /// their default; the values are taken as they are (not merged through the reducers).
    ///
    /// To read a store's states in an async run, call the runtime's `block_on` inside `read`,
    /// on a current-thread runtime (the schema is this thread's).
    ///
    /// ```
    /// use agentstate::schema::Schema;
    /// use agentstate_graph::json::JsonState;
    /// use serde_json::json;
    /// use std::sync::Arc;
    ///
    /// let schema = Arc::new(Schema::from_json(&json!({"fields": {
    ///     "n": {"type": "int", "default": 0}, "tag": {"type": "string", "default": "-"}
    /// }}))?);
    /// let state = JsonState::reading(&schema, || serde_json::from_value::<JsonState>(json!({"n": 2})))?;
    /// assert_eq!(state.to_json(), json!({"n": 2, "tag": "-"}));
    /// assert!(serde_json::from_value::<JsonState>(json!({"n": 2})).is_err());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn reading<T>(schema: &Arc<Schema>, read: impl FnOnce() -> T) -> T {
        struct Pop;
        impl Drop for Pop {
            fn drop(&mut self) {
                READING.with(|r| r.borrow_mut().pop());
            }
        }
        READING.with(|r| r.borrow_mut().push(Arc::clone(schema)));
        let _pop = Pop;
        read()
    }
}

/// The state's object of field values.
impl serde::Serialize for JsonState {
    fn serialize<Ser: serde::Serializer>(&self, serializer: Ser) -> Result<Ser::Ok, Ser::Error> {
        self.values.serialize(serializer)
    }
}

/// An object of field values, under the schema of the [`JsonState::reading`] call in progress.
impl<'de> serde::Deserialize<'de> for JsonState {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let values = Map::<String, Value>::deserialize(deserializer)?;
        let schema = READING.with(|r| r.borrow().last().cloned()).ok_or_else(|| {
            serde::de::Error::custom(
                "a JsonState is read only inside JsonState::reading, which gives its schema (the JSON holds only its values)",
            )
        })?;
        let mut state = JsonState::new(schema);
        state.values.extend(values);
        Ok(state)
    }
}

/// One object of field values, as a store keeps an update: the partial updates folded in merge
/// order through the schema's reducers (an `append` field's lists joined, a `last_write_wins`
/// field's last value), or, for an update read back (which has no schema), each field's last
/// write.
///
/// ```
/// use agentstate::schema::Schema;
/// use agentstate::State;
/// use agentstate_graph::json::{JsonState, JsonUpdate};
/// use serde_json::json;
/// use std::sync::Arc;
///
/// let schema = Arc::new(Schema::from_json(&json!({"fields": {
///     "log": {"type": "list<string>", "reducer": "append", "default": []},
///     "v": {"type": "int", "default": 0}
/// }}))?);
/// let state = JsonState::new(Arc::clone(&schema));
/// let both = JsonState::compose(
///     state.update(json!({"log": ["a"], "v": 1})),
///     state.update(json!({"log": ["b"], "v": 2})),
///     agentstate::Combine::Sequence,
/// )?;
/// let stored = serde_json::to_value(&both)?;
/// assert_eq!(stored, json!({"log": ["a", "b"], "v": 2}));
/// // Read back, it merges as the two did.
/// let mut replayed = state.clone();
/// replayed.merge(serde_json::from_value::<JsonUpdate>(stored)?)?;
/// assert_eq!(replayed.to_json(), json!({"log": ["a", "b"], "v": 2}));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
impl serde::Serialize for JsonUpdate {
    fn serialize<Ser: serde::Serializer>(&self, serializer: Ser) -> Result<Ser::Ok, Ser::Error> {
        match self.writes.as_slice() {
            [] => Map::new().serialize(serializer),
            [one] => one.serialize(serializer),
            writes => {
                let mut folded = Map::new();
                for write in writes {
                    match &self.schema {
                        Some(schema) => schema
                            .merge(&mut folded, write.clone())
                            .map_err(serde::ser::Error::custom)?,
                        None => {
                            if let Value::Object(fields) = write {
                                folded.extend(fields.clone());
                            }
                        }
                    }
                }
                folded.serialize(serializer)
            }
        }
    }
}

/// A partial update (an object), or a list of them. The update read has no schema of its own:
/// it merges through the state's, and composes without the parallel-write check.
impl<'de> serde::Deserialize<'de> for JsonUpdate {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let writes = match Value::deserialize(deserializer)? {
            Value::Array(writes) => writes,
            Value::Null => Vec::new(),
            one => vec![one],
        };
        Ok(JsonUpdate {
            schema: None,
            writes,
        })
    }
}

/// An update of a [`JsonState`]: JSON partial updates, merged in order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct JsonUpdate {
    schema: Option<Arc<Schema>>,
    writes: Vec<Value>,
}

impl JsonUpdate {
    /// An update that merges `json` (an object of field values) through `schema`'s reducers.
    pub fn new(schema: Arc<Schema>, json: Value) -> Self {
        JsonUpdate {
            schema: Some(schema),
            writes: vec![json],
        }
    }

    /// The partial updates, in merge order.
    pub fn writes(&self) -> &[Value] {
        &self.writes
    }

    fn fields(&self) -> impl Iterator<Item = &str> {
        self.writes
            .iter()
            .filter_map(Value::as_object)
            .flat_map(|w| w.keys().map(String::as_str))
    }
}

impl State for JsonState {
    type Update = JsonUpdate;
    /// The new values of the fields the update writes.
    type Plan = Map<String, Value>;

    /// A runtime state has no static field list; see [`JsonState::values`].
    const FIELDS: &'static [&'static str] = &[];

    fn plan(&self, update: JsonUpdate) -> Result<Self::Plan, Error> {
        // Only the fields written are copied, then merged in order through the reducers.
        let mut scratch = Map::new();
        for field in update.fields() {
            if let Some(value) = self.values.get(field) {
                scratch
                    .entry(field.to_owned())
                    .or_insert_with(|| value.clone());
            }
        }
        for write in update.writes {
            self.schema.merge(&mut scratch, write)?;
        }
        Ok(scratch)
    }

    fn apply(&mut self, plan: Self::Plan) {
        for (field, value) in plan {
            self.values.insert(field, value);
        }
    }

    /// A runtime state's schema is its value's ([`JsonState::schema_ref`]); this static one is
    /// empty.
    fn schema() -> Schema {
        Schema::describe(Vec::new())
    }

    fn compose(first: JsonUpdate, second: JsonUpdate, how: Combine) -> Result<JsonUpdate, Error> {
        let schema = first.schema.clone().or_else(|| second.schema.clone());
        if let (Combine::Parallel(FanIn::Strict), Some(schema)) = (how, &schema) {
            let clash = first.fields().find(|field| {
                second.fields().any(|other| other == *field)
                    && schema
                        .field(field)
                        .is_some_and(|f| f.reducer.name == "last_write_wins")
            });
            if let Some(field) = clash {
                return Err(Error::validation(
                    field,
                    "was written by two parallel branches in one step, and its reducer `last_write_wins` cannot combine them (INVALID_CONCURRENT_GRAPH_UPDATE); give it a reducer or write it from one branch",
                ));
            }
        }
        let mut writes = first.writes;
        writes.extend(second.writes);
        Ok(JsonUpdate { schema, writes })
    }
}

/// Makes a `JsonUpdate` a node's output (`.into()`, or returned as it is).
impl agentstate::Update for JsonUpdate {
    type State = JsonState;
}
