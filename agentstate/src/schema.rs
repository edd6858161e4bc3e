//! Schemas: the list of a state's fields with their reducers, for introspection and for
//! configuration-driven agents whose fields are only known at run time.
//!
//! A derived state describes itself with `State::schema()`; a dynamic schema is built from
//! declarations ([`Schema::builder`]) or from JSON in the OpenArmature fixture format
//! ([`Schema::from_json`]), and merges JSON states with the same reducers and the same errors as
//! typed states. Building a schema checks every declaration before any update is merged: an
//! unknown reducer or a bad parameter is `reducer_configuration_invalid`, two reducers on one
//! field is `conflicting_reducers`.
//!
//! ```
//! use agentstate::schema::{Field, Schema};
//! use serde_json::json;
//!
//! let schema = Schema::builder()
//!     .field(Field::new("items").reducer(json!({"bounded_append": {"max_len": 2}})).default(json!([])))
//!     .field(Field::new("title").type_name("string").default(json!("")))
//!     .build()?;
//! let mut state = schema.initial_state();
//! schema.merge(&mut state, json!({"items": ["a", "b", "c"], "title": "t"}))?;
//! assert_eq!(state["items"], json!(["b", "c"]));
//!
//! let err = schema.merge(&mut state, json!({"items": ["d"], "title": 5})).unwrap_err();
//! assert_eq!(err.category(), "state_validation_error");
//! assert_eq!(state["items"], json!(["b", "c"]), "a failed merge changes nothing");
//!
//! let bad = Schema::builder().field(Field::new("items").reducer(json!({"bounded_append": {"max_len": 0}}))).build();
//! assert_eq!(bad.unwrap_err().category(), "reducer_configuration_invalid");
//! # Ok::<(), agentstate::Error>(())
//! ```

use crate::error::{Error, ReduceError};
use crate::reducers::json::kind_of;
use crate::reducers::{
    self, AddMessages, Append, BoundedAppend, ConcatFlatten, DedupeAppend, JsonField, JsonValue,
    LastWriteWins, Merge, MergeAll, MergeByKey, Reducer, ReducerInfo, ReplaceMessages,
    ReplaceValue, UpsertMessages,
};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::fmt;

/// A reducer named with its parameters: `append`, `bounded_append(max_len = 3)`.
///
/// In JSON (as in the OpenArmature fixtures) a spec is the reducer's name, or a one-key object
/// naming it and holding its parameters: `"append"`, `{"bounded_append": {"max_len": 3}}`.
///
/// ```
/// use agentstate::schema::ReducerSpec;
/// use serde_json::json;
///
/// let spec = ReducerSpec::from_json(&json!({"merge_by_key": {"key": "id"}}))?;
/// assert_eq!(spec.name, "merge_by_key");
/// assert_eq!(spec.to_string(), "merge_by_key(key = \"id\")");
/// assert_eq!(spec.to_json(), json!({"merge_by_key": {"key": "id"}}));
/// # Ok::<(), agentstate::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct ReducerSpec {
    /// The reducer's name.
    pub name: String,
    /// Its parameters.
    pub params: Map<String, Value>,
}

impl ReducerSpec {
    /// A reducer without parameters.
    pub fn new(name: impl Into<String>) -> Self {
        ReducerSpec {
            name: name.into(),
            params: Map::new(),
        }
    }

    /// Adds a parameter.
    pub fn param(mut self, name: impl Into<String>, value: impl Into<Value>) -> Self {
        self.params.insert(name.into(), value.into());
        self
    }

    /// The spec of a reducer value.
    pub fn of(reducer: &impl ReducerInfo) -> Self {
        ReducerSpec {
            name: reducer.name().to_owned(),
            params: reducer.params(),
        }
    }

    /// Reads a spec from its JSON form: a name, or `{name: {params}}`.
    pub fn from_json(value: &Value) -> Result<Self, Error> {
        match value {
            Value::String(name) => Ok(ReducerSpec::new(name.clone())),
            Value::Object(map) if map.len() == 1 => {
                let (name, params) = map.iter().next().expect("one entry");
                match params {
                    Value::Object(params) => Ok(ReducerSpec {
                        name: name.clone(),
                        params: params.clone(),
                    }),
                    Value::Null => Ok(ReducerSpec::new(name.clone())),
                    other => Err(Error::configuration(
                        name.clone(),
                        format!("parameters must be an object, got {}", kind_of(other)),
                    )),
                }
            }
            other => Err(Error::configuration(
                other.to_string(),
                "a reducer is declared as a name or as {\"name\": {parameters}}",
            )),
        }
    }

    /// The JSON form: the name alone when there are no parameters.
    pub fn to_json(&self) -> Value {
        if self.params.is_empty() {
            Value::String(self.name.clone())
        } else {
            Value::Object(Map::from_iter([(
                self.name.clone(),
                Value::Object(self.params.clone()),
            )]))
        }
    }
}

impl fmt::Display for ReducerSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name)?;
        if !self.params.is_empty() {
            let params: Vec<String> = self
                .params
                .iter()
                .map(|(k, v)| format!("{k} = {v}"))
                .collect();
            write!(f, "({})", params.join(", "))?;
        }
        Ok(())
    }
}

impl Serialize for ReducerSpec {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.to_json().serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for ReducerSpec {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(deserializer)?;
        ReducerSpec::from_json(&value).map_err(serde::de::Error::custom)
    }
}

/// One field of a schema: its name, reducer, round-trip idempotence, and (for dynamic schemas)
/// its default value and type.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FieldSchema {
    /// The field's name (its JSON key).
    pub name: String,
    /// Its reducer.
    pub reducer: ReducerSpec,
    /// Whether re-merging an already merged value changes nothing.
    pub round_trip_idempotent: bool,
    /// The value a new state starts with (`null` when not declared).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<Value>,
    /// The declared type (`string`, `list<string>`, `dict`, ...), checked after each merge.
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub type_name: Option<String>,
}

impl FieldSchema {
    /// Describes a field merged by `reducer`.
    pub fn of(name: impl Into<String>, reducer: &impl ReducerInfo) -> Self {
        FieldSchema {
            name: name.into(),
            reducer: ReducerSpec::of(reducer),
            round_trip_idempotent: reducer.round_trip_idempotent(),
            default: None,
            type_name: None,
        }
    }
}

impl FieldSchema {
    /// Describes a nested state field (`#[reducer(nested)]`): round-trip idempotent when every
    /// field of the nested state is.
    pub fn nested<S: crate::State>(name: impl Into<String>) -> Self {
        FieldSchema {
            name: name.into(),
            reducer: ReducerSpec::new("nested"),
            round_trip_idempotent: S::schema().fields.iter().all(|f| f.round_trip_idempotent),
            default: None,
            type_name: None,
        }
    }
}

/// A field declaration for [`Schema::builder`].
#[derive(Debug, Clone)]
pub struct Field {
    name: String,
    reducers: Vec<Value>,
    default: Option<Value>,
    type_name: Option<String>,
}

impl Field {
    /// A field with no reducer declared yet (`last_write_wins` unless one is added).
    pub fn new(name: impl Into<String>) -> Self {
        Field {
            name: name.into(),
            reducers: Vec::new(),
            default: None,
            type_name: None,
        }
    }

    /// Declares the field's reducer, in spec form (`json!("append")`,
    /// `json!({"bounded_append": {"max_len": 3}})`) or as a [`ReducerSpec`]. Declaring a second
    /// one is a `conflicting_reducers` error when the schema is built.
    pub fn reducer(mut self, spec: impl Into<ReducerDecl>) -> Self {
        self.reducers.push(spec.into().0);
        self
    }

    /// The value a new state starts with.
    pub fn default(mut self, value: Value) -> Self {
        self.default = Some(value);
        self
    }

    /// The field's type: `string`, `int`, `float`, `bool`, `list`, `list<T>`, `dict`,
    /// `dict<K,V>`, `any`, or `T | None` / `optional<T>`.
    pub fn type_name(mut self, type_name: impl Into<String>) -> Self {
        self.type_name = Some(type_name.into());
        self
    }
}

/// A reducer declaration: a [`ReducerSpec`] or its JSON form.
#[derive(Debug, Clone)]
pub struct ReducerDecl(Value);

impl From<Value> for ReducerDecl {
    fn from(value: Value) -> Self {
        ReducerDecl(value)
    }
}

impl From<&str> for ReducerDecl {
    fn from(name: &str) -> Self {
        ReducerDecl(Value::String(name.to_owned()))
    }
}

impl From<ReducerSpec> for ReducerDecl {
    fn from(spec: ReducerSpec) -> Self {
        ReducerDecl(spec.to_json())
    }
}

/// Collects field declarations; [`build`](SchemaBuilder::build) checks them all.
#[derive(Debug, Clone, Default)]
pub struct SchemaBuilder {
    fields: Vec<Field>,
}

impl SchemaBuilder {
    /// Adds a field.
    pub fn field(mut self, field: Field) -> Self {
        self.fields.push(field);
        self
    }

    /// Checks every declaration and builds the schema: the first error found, in declaration
    /// order, is returned.
    pub fn build(self) -> Result<Schema, Error> {
        let mut fields = Vec::with_capacity(self.fields.len());
        let mut compiled = Vec::with_capacity(self.fields.len());
        for (i, field) in self.fields.iter().enumerate() {
            if let Some(earlier) = self.fields[..i].iter().find(|f| f.name == field.name) {
                let label = |f: &Field| {
                    f.reducers
                        .iter()
                        .map(reducer_label)
                        .collect::<Vec<_>>()
                        .join(" + ")
                };
                let shown = |f: &Field| match label(f) {
                    l if l.is_empty() => "last_write_wins".to_owned(),
                    l => l,
                };
                return Err(Error::ConflictingReducers {
                    field: field.name.clone(),
                    reducers: vec![shown(earlier), shown(field)],
                });
            }
        }
        for field in self.fields {
            let spec = match field.reducers.as_slice() {
                [] => ReducerSpec::new("last_write_wins"),
                [one] => ReducerSpec::from_json(one).map_err(|e| e.for_field(&field.name))?,
                several => {
                    return Err(Error::ConflictingReducers {
                        reducers: several.iter().map(reducer_label).collect(),
                        field: field.name,
                    })
                }
            };
            let reducer = DynReducer::build(&spec).map_err(|e| e.for_field(&field.name))?;
            let field_type = field
                .type_name
                .as_deref()
                .map(ValueType::parse)
                .transpose()
                .map_err(|reason| Error::validation(&field.name, reason))?;
            if let (Some(ty), Some(default)) = (&field_type, &field.default) {
                ty.check(default).map_err(|reason| {
                    Error::validation(&field.name, format!("has a default that {reason}"))
                })?;
            }
            fields.push(FieldSchema {
                round_trip_idempotent: reducer.round_trip_idempotent(),
                name: field.name,
                reducer: spec,
                default: field.default,
                type_name: field.type_name,
            });
            compiled.push(Compiled {
                reducer: Some(reducer),
                field_type,
            });
        }
        Ok(Schema { fields, compiled })
    }
}

fn reducer_label(value: &Value) -> String {
    ReducerSpec::from_json(value)
        .map(|s| s.to_string())
        .unwrap_or_else(|_| value.to_string())
}

/// A state's fields with their reducers. See the [module docs](self).
#[derive(Debug, Clone)]
pub struct Schema {
    fields: Vec<FieldSchema>,
    compiled: Vec<Compiled>,
}

#[derive(Debug, Clone)]
struct Compiled {
    reducer: Option<DynReducer>,
    field_type: Option<ValueType>,
}

impl PartialEq for Schema {
    fn eq(&self, other: &Self) -> bool {
        self.fields == other.fields
    }
}

impl Serialize for Schema {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.fields.serialize(serializer)
    }
}

impl Schema {
    /// Starts a dynamic schema.
    pub fn builder() -> SchemaBuilder {
        SchemaBuilder::default()
    }

    /// The schema of a typed state, from its field descriptions. Fields whose reducer cannot run
    /// on JSON (a user function, a key closure) are described but fail a JSON merge with a
    /// `reducer_error`.
    pub fn describe(fields: Vec<FieldSchema>) -> Self {
        let compiled = fields
            .iter()
            .map(|f| Compiled {
                // A key that is a function or closure (not an item field's name) runs only on
                // the typed state.
                reducer: match f.reducer.params.get("key").and_then(Value::as_str) {
                    Some(key) if !key.chars().all(|c| c.is_alphanumeric() || c == '_') => None,
                    _ => DynReducer::build(&f.reducer).ok(),
                },
                field_type: None,
            })
            .collect();
        Schema { fields, compiled }
    }

    /// Builds a schema from the OpenArmature fixture form:
    /// `{"fields": {"name": {"type": ..., "default": ..., "reducer": ...}}}`.
    ///
    /// Any declaration key ending in `reducer` (`reducer`, `alt_reducer`, ...) declares a
    /// reducer, so two of them on one field are `conflicting_reducers`.
    pub fn from_json(value: &Value) -> Result<Self, Error> {
        let fields = value
            .get("fields")
            .and_then(Value::as_object)
            .ok_or_else(|| {
                Error::validation("fields", "must be an object of field declarations")
            })?;
        let mut builder = Schema::builder();
        for (name, decl) in fields {
            let decl = decl.as_object().ok_or_else(|| {
                Error::validation(
                    name,
                    format!("must be declared with an object, got {}", kind_of(decl)),
                )
            })?;
            let mut field = Field::new(name.clone());
            for (key, value) in decl {
                match key.as_str() {
                    "type" => {
                        let ty = value.as_str().ok_or_else(|| {
                            Error::validation(name, "declares a type that is not a string")
                        })?;
                        field = field.type_name(ty);
                    }
                    "default" => field = field.default(value.clone()),
                    k if k.ends_with("reducer") => field = field.reducer(value.clone()),
                    other => {
                        return Err(Error::validation(
                            name,
                            format!("has an unknown declaration key `{other}` (expected type, default, reducer)"),
                        ))
                    }
                }
            }
            builder = builder.field(field);
        }
        builder.build()
    }

    /// The fields, in declaration order.
    pub fn fields(&self) -> &[FieldSchema] {
        &self.fields
    }

    /// The fields, by value.
    pub fn into_fields(self) -> Vec<FieldSchema> {
        self.fields
    }

    /// The field called `name`.
    pub fn field(&self, name: &str) -> Option<&FieldSchema> {
        self.fields.iter().find(|f| f.name == name)
    }

    /// A new state: every field at its default (`null` where none was declared).
    pub fn initial_state(&self) -> Map<String, Value> {
        self.fields
            .iter()
            .map(|f| (f.name.clone(), f.default.clone().unwrap_or(Value::Null)))
            .collect()
    }

    /// Merges a JSON update (an object of field values) into a JSON state, atomically.
    ///
    /// An update that is not an object, or names a field the schema does not have, is a
    /// `state_validation_error`; a reducer failure is a `reducer_error`; a merged value that
    /// does not fit the field's declared type is a `state_validation_error`. On any error the
    /// state is unchanged.
    pub fn merge(&self, state: &mut Map<String, Value>, update: Value) -> Result<(), Error> {
        let Value::Object(update) = update else {
            return Err(Error::validation(
                "(update)",
                format!(
                    "must be an object of field values, got {}",
                    kind_of(&update)
                ),
            ));
        };
        let mut planned = Vec::with_capacity(update.len());
        for (key, value) in update {
            let Some(at) = self.fields.iter().position(|f| f.name == key) else {
                let names = self.fields.iter().map(|f| f.name.as_str());
                let hint = crate::error::did_you_mean(&key, names)
                    .map(|s| format!("; did you mean `{s}`?"))
                    .unwrap_or_default();
                return Err(Error::validation(
                    &key,
                    format!("is not a field of this state{hint}"),
                ));
            };
            let field = &self.fields[at];
            let compiled = &self.compiled[at];
            let null = Value::Null;
            let current = state.get(&key).unwrap_or(&null);
            let reducer = compiled.reducer.as_ref().ok_or_else(|| {
                ReduceError::msg("this reducer runs only on the typed state, not on JSON")
                    .into_error(&key, &field.reducer.name)
            })?;
            let merged = reducer
                .merged(current, value)
                .map_err(|e| e.into_error(&key, &field.reducer.name))?;
            if let Some(ty) = &compiled.field_type {
                ty.check(&merged)
                    .map_err(|reason| Error::validation(&key, reason))?;
            }
            planned.push((key, merged));
        }
        for (key, value) in planned {
            state.insert(key, value);
        }
        Ok(())
    }

    /// Fills in what merging `update` would otherwise make up: the ids and timestamps of the
    /// messages of its `add_messages`, `replace_messages` and `upsert_messages` fields. Call it
    /// when the update is made, before recording it, so that merging it twice or replaying it
    /// gives the same state ([`Reducer::prepare`] on typed states). Fields this schema does not
    /// have, and values of the wrong shape, are left for [`merge`](Schema::merge) to report.
    ///
    /// ```
    /// use agentstate::schema::Schema;
    /// use serde_json::json;
    ///
    /// let schema = Schema::from_json(&json!({
    ///     "fields": {"messages": {"type": "list", "reducer": "add_messages", "default": []}}
    /// }))?;
    /// let mut update = json!({"messages": [{"role": "user", "content": []}]});
    /// schema.prepare(&mut update);
    /// let mut state = schema.initial_state();
    /// schema.merge(&mut state, update.clone())?;
    /// schema.merge(&mut state, update)?;
    /// assert_eq!(state["messages"].as_array().unwrap().len(), 1);
    /// # Ok::<(), agentstate::Error>(())
    /// ```
    pub fn prepare(&self, update: &mut Value) {
        let Value::Object(update) = update else {
            return;
        };
        for (key, value) in update.iter_mut() {
            let compiled = self.fields.iter().position(|f| &f.name == key);
            if let Some(reducer) = compiled.and_then(|at| self.compiled[at].reducer.as_ref()) {
                reducer.prepare(value);
            }
        }
    }

    /// [`merge`](Schema::merge), recording `node` as the producer of the update in a
    /// `reducer_error`.
    pub fn merge_from(
        &self,
        node: &str,
        state: &mut Map<String, Value>,
        update: Value,
    ) -> Result<(), Error> {
        self.merge(state, update).map_err(|e| e.from_node(node))
    }
}

/// A reducer chosen at run time, working on JSON values.
#[derive(Debug, Clone)]
enum DynReducer {
    LastWriteWins,
    ReplaceValue,
    Append,
    Merge,
    BoundedAppend(BoundedAppend),
    DedupeAppend(DedupeAppend<JsonValue>),
    DedupeAppendBy(DedupeAppend<JsonField>),
    MergeByKey(MergeByKey<JsonField>),
    ConcatFlatten,
    MergeAll,
    AddMessages,
    ReplaceMessages,
    AppendItems,
    UpsertMessages,
    Add,
}

const REDUCER_NAMES: [&str; 15] = [
    "last_write_wins",
    "append",
    "merge",
    "bounded_append",
    "dedupe_append",
    "merge_by_key",
    "concat_flatten",
    "merge_all",
    "add_messages",
    "replace_messages",
    "append_items",
    "replace_value",
    "upsert_messages",
    "add",
    "remove_tool_messages",
];

impl DynReducer {
    fn build(spec: &ReducerSpec) -> Result<Self, Error> {
        let name = spec.name.as_str();
        let allowed: &[&str] = match name {
            "bounded_append" => &["max_len"],
            "dedupe_append" | "merge_by_key" => &["key"],
            _ => &[],
        };
        if let Some(unknown) = spec.params.keys().find(|k| !allowed.contains(&k.as_str())) {
            let expected = if allowed.is_empty() {
                "it takes no parameters".to_owned()
            } else {
                format!("it takes {}", allowed.join(", "))
            };
            return Err(Error::configuration(
                name,
                format!("unknown parameter `{unknown}`; {expected}"),
            ));
        }
        let key = |required: bool| -> Result<Option<JsonField>, Error> {
            match spec.params.get("key") {
                None | Some(Value::Null) if required => Err(Error::configuration(
                    name,
                    "a key is required (merge_by_key has no default key)",
                )),
                None | Some(Value::Null) => Ok(None),
                Some(Value::String(field)) => Ok(Some(JsonField(field.clone()))),
                Some(other) => Err(Error::configuration(
                    name,
                    format!("key must name a field of the items, got {}", kind_of(other)),
                )),
            }
        };
        Ok(match name {
            "last_write_wins" => DynReducer::LastWriteWins,
            "replace_value" => DynReducer::ReplaceValue,
            "append" => DynReducer::Append,
            "merge" => DynReducer::Merge,
            "concat_flatten" => DynReducer::ConcatFlatten,
            "merge_all" => DynReducer::MergeAll,
            "add_messages" => DynReducer::AddMessages,
            "replace_messages" => DynReducer::ReplaceMessages,
            "append_items" => DynReducer::AppendItems,
            "upsert_messages" => DynReducer::UpsertMessages,
            "add" => DynReducer::Add,
            "bounded_append" => {
                let max_len = match spec.params.get("max_len") {
                    None | Some(Value::Null) => {
                        return Err(Error::configuration(name, "max_len is required"))
                    }
                    Some(v) => v.as_i64().ok_or_else(|| {
                        Error::configuration(
                            name,
                            format!("max_len must be a positive integer, got {v}"),
                        )
                    })?,
                };
                DynReducer::BoundedAppend(BoundedAppend::new(max_len)?)
            }
            "dedupe_append" => match key(false)? {
                Some(field) => DynReducer::DedupeAppendBy(DedupeAppend::by(field)),
                None => DynReducer::DedupeAppend(DedupeAppend::by(JsonValue)),
            },
            "merge_by_key" => DynReducer::MergeByKey(MergeByKey::from_optional(key(true)?)?),
            "remove_tool_messages" => {
                return Err(Error::configuration(
                    name,
                    "remove_tool_messages is a one-argument helper, not a reducer",
                ))
            }
            unknown => {
                let hint = crate::error::did_you_mean(unknown, REDUCER_NAMES.into_iter())
                    .map(|s| format!("; did you mean `{s}`?"))
                    .unwrap_or_default();
                return Err(Error::configuration(
                    unknown,
                    format!("no reducer has this name{hint}"),
                ));
            }
        })
    }

    fn info(&self) -> &dyn ReducerInfo {
        match self {
            DynReducer::LastWriteWins => &LastWriteWins,
            DynReducer::ReplaceValue => &ReplaceValue,
            DynReducer::Append => &Append,
            DynReducer::Merge => &Merge,
            DynReducer::BoundedAppend(r) => r,
            DynReducer::DedupeAppend(r) => r,
            DynReducer::DedupeAppendBy(r) => r,
            DynReducer::MergeByKey(r) => r,
            DynReducer::ConcatFlatten => &ConcatFlatten,
            DynReducer::MergeAll => &MergeAll,
            DynReducer::AddMessages => &AddMessages,
            DynReducer::ReplaceMessages => &ReplaceMessages,
            DynReducer::AppendItems => &reducers::AppendItems,
            DynReducer::UpsertMessages => &UpsertMessages,
            DynReducer::Add => &reducers::Add,
        }
    }

    fn round_trip_idempotent(&self) -> bool {
        self.info().round_trip_idempotent()
    }

    /// Fills in the ids and timestamps a messages merge would otherwise make up.
    fn prepare(&self, update: &mut Value) {
        match self {
            DynReducer::AddMessages => Reducer::<Value>::prepare(&AddMessages, update),
            DynReducer::ReplaceMessages => Reducer::<Value>::prepare(&ReplaceMessages, update),
            DynReducer::UpsertMessages => {
                let parsed = serde_json::from_value::<Vec<reducers::MessageUpdate>>(update.clone());
                if let Ok(prepared) = parsed.and_then(serde_json::to_value) {
                    *update = prepared;
                }
            }
            _ => {}
        }
    }

    /// The field's new value. The current value is copied, so a dynamic merge costs O(n) in
    /// the field's size; typed states merge in place.
    fn merged(&self, current: &Value, update: Value) -> Result<Value, ReduceError> {
        fn run<R: Reducer<Value>>(
            r: &R,
            current: &Value,
            update: R::Update,
        ) -> Result<Value, ReduceError> {
            let plan = r.plan(current, update)?;
            let mut merged = current.clone();
            r.apply(&mut merged, plan);
            Ok(merged)
        }
        fn list(update: Value) -> Result<Vec<Value>, ReduceError> {
            match update {
                Value::Array(items) => Ok(items),
                other => Err(ReduceError::msg(format!(
                    "the update must be a list, got {}",
                    kind_of(&other)
                ))),
            }
        }
        match self {
            DynReducer::LastWriteWins | DynReducer::ReplaceValue => Ok(update),
            DynReducer::Append => run(&Append, current, update),
            DynReducer::Add => run(&reducers::Add, current, update),
            DynReducer::Merge => run(&Merge, current, update),
            DynReducer::BoundedAppend(r) => run(r, current, update),
            DynReducer::DedupeAppend(r) => run(r, current, update),
            DynReducer::DedupeAppendBy(r) => run(r, current, update),
            DynReducer::MergeByKey(r) => run(r, current, update),
            DynReducer::ConcatFlatten => run(&ConcatFlatten, current, list(update)?),
            DynReducer::MergeAll => run(&MergeAll, current, list(update)?),
            DynReducer::AddMessages => run(&AddMessages, current, update),
            DynReducer::ReplaceMessages => run(&ReplaceMessages, current, update),
            DynReducer::UpsertMessages => {
                let update = serde_json::from_value(update).map_err(|e| {
                    ReduceError::msg(format!("the update is not a list of message updates: {e}"))
                })?;
                run(&UpsertMessages, current, update)
            }
            DynReducer::AppendItems => {
                let fresh = crate::reducers::json::append_items_json(current, update)?;
                let mut merged = current.clone();
                crate::reducers::json::push_json(&mut merged, fresh);
                Ok(merged)
            }
        }
    }
}

/// A declared field type, checked against merged values.
#[derive(Debug, Clone, PartialEq)]
enum ValueType {
    Any,
    String,
    Int,
    Float,
    Bool,
    List(Box<ValueType>),
    Dict(Box<ValueType>),
    Optional(Box<ValueType>),
}

impl ValueType {
    fn parse(text: &str) -> Result<Self, String> {
        let t = text.trim();
        if let Some(inner) = t.strip_suffix("| None").or_else(|| t.strip_suffix("|None")) {
            return Ok(ValueType::Optional(Box::new(Self::parse(inner)?)));
        }
        let generic = |prefix: &str| {
            t.strip_prefix(prefix)
                .and_then(|rest| rest.strip_prefix('<'))
                .and_then(|rest| rest.strip_suffix('>'))
        };
        if let Some(inner) = generic("list") {
            return Ok(ValueType::List(Box::new(Self::parse(inner)?)));
        }
        if let Some(inner) = generic("optional") {
            return Ok(ValueType::Optional(Box::new(Self::parse(inner)?)));
        }
        if let Some(inner) = generic("dict") {
            let (key, value) = inner.split_once(',').ok_or_else(|| {
                format!("declares the type `{text}`, but dict<K,V> needs two types")
            })?;
            if Self::parse(key)? != ValueType::String {
                return Err(format!(
                    "declares the type `{text}`, but JSON object keys are strings"
                ));
            }
            return Ok(ValueType::Dict(Box::new(Self::parse(value)?)));
        }
        Ok(match t {
            "any" | "object" | "json" => ValueType::Any,
            "string" | "str" => ValueType::String,
            "int" | "integer" => ValueType::Int,
            "float" | "number" => ValueType::Float,
            "bool" | "boolean" => ValueType::Bool,
            "list" => ValueType::List(Box::new(ValueType::Any)),
            "dict" => ValueType::Dict(Box::new(ValueType::Any)),
            _ => {
                return Err(format!(
                    "declares the unknown type `{text}` (known: string, int, float, bool, list, list<T>, dict, dict<string,V>, any, T | None)"
                ))
            }
        })
    }

    fn name(&self) -> String {
        match self {
            ValueType::Any => "any value".into(),
            ValueType::String => "a string".into(),
            ValueType::Int => "an integer".into(),
            ValueType::Float => "a number".into(),
            ValueType::Bool => "a boolean".into(),
            ValueType::List(_) => "a list".into(),
            ValueType::Dict(_) => "an object".into(),
            ValueType::Optional(inner) => format!("{} or null", inner.name()),
        }
    }

    /// Checks `value`; the error continues a sentence starting with the field's name.
    fn check(&self, value: &Value) -> Result<(), String> {
        self.check_at(value, "")
    }

    fn check_at(&self, value: &Value, path: &str) -> Result<(), String> {
        let fits = match (self, value) {
            (ValueType::Any, _) => true,
            (ValueType::Optional(_), Value::Null) => true,
            (ValueType::Optional(inner), v) => return inner.check_at(v, path),
            (ValueType::String, Value::String(_)) => true,
            (ValueType::Int, Value::Number(n)) => n.is_i64() || n.is_u64(),
            (ValueType::Float, Value::Number(_)) => true,
            (ValueType::Bool, Value::Bool(_)) => true,
            (ValueType::List(item), Value::Array(items)) => {
                for (i, v) in items.iter().enumerate() {
                    item.check_at(v, &format!("{path}[{i}]"))?;
                }
                true
            }
            (ValueType::Dict(item), Value::Object(map)) => {
                for (k, v) in map {
                    item.check_at(v, &format!("{path}.{k}"))?;
                }
                true
            }
            _ => false,
        };
        if fits {
            Ok(())
        } else {
            let at = if path.is_empty() {
                String::new()
            } else {
                format!(" at {path}")
            };
            Err(format!(
                "expects {}{at}, got {} ({value})",
                self.name(),
                kind_of(value)
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn one_field(decl: Value) -> Result<Schema, Error> {
        Schema::from_json(&json!({"fields": {"f": decl}}))
    }

    #[test]
    fn configuration_errors_come_before_any_merge() {
        let cases = [
            (
                json!({"reducer": {"bounded_append": {"max_len": 0}}}),
                "reducer_configuration_invalid",
            ),
            (
                json!({"reducer": {"bounded_append": {"max_len": -2}}}),
                "reducer_configuration_invalid",
            ),
            (
                json!({"reducer": {"bounded_append": {"max_len": 2.5}}}),
                "reducer_configuration_invalid",
            ),
            (
                json!({"reducer": {"bounded_append": {}}}),
                "reducer_configuration_invalid",
            ),
            (
                json!({"reducer": {"merge_by_key": {"key": null}}}),
                "reducer_configuration_invalid",
            ),
            (
                json!({"reducer": {"merge_by_key": {}}}),
                "reducer_configuration_invalid",
            ),
            (
                json!({"reducer": {"append": {"max_len": 3}}}),
                "reducer_configuration_invalid",
            ),
            (json!({"reducer": "apend"}), "reducer_configuration_invalid"),
            (
                json!({"reducer": "append", "alt_reducer": "last_write_wins"}),
                "conflicting_reducers",
            ),
            (json!({"type": "list<strin>"}), "state_validation_error"),
            (
                json!({"type": "int", "default": "zero"}),
                "state_validation_error",
            ),
        ];
        for (decl, category) in cases {
            let err = one_field(decl.clone()).unwrap_err();
            assert_eq!(err.category(), category, "{decl}: {err}");
            assert_eq!(err.field(), Some("f"), "{decl}: {err}");
        }
        let twice = Schema::builder()
            .field(Field::new("f").reducer("append"))
            .field(Field::new("f").reducer("merge"))
            .build()
            .unwrap_err();
        assert_eq!(twice.category(), "conflicting_reducers");
        assert_eq!(
            twice.to_string(),
            "field `f` declares more than one reducer (append, merge); a field takes exactly one"
        );
        let typo = one_field(json!({"reducer": "apend"})).unwrap_err();
        assert!(
            typo.to_string().contains("did you mean `append`?"),
            "{typo}"
        );
        let conflict =
            one_field(json!({"reducer": "append", "alt_reducer": "last_write_wins"})).unwrap_err();
        assert_eq!(
            conflict.to_string(),
            // JSON object keys are read in sorted order: `alt_reducer` before `reducer`.
            "field `f` declares more than one reducer (last_write_wins, append); a field takes exactly one"
        );
    }

    #[test]
    fn merges_are_atomic_and_validated() {
        let schema = Schema::from_json(&json!({"fields": {
            "items": {"type": "list<string>", "reducer": "append", "default": []},
            "count": {"type": "int", "default": 0},
        }}))
        .unwrap();
        let mut state = schema.initial_state();
        schema
            .merge(&mut state, json!({"items": ["a"], "count": 1}))
            .unwrap();
        let before = state.clone();
        let err = schema
            .merge(&mut state, json!({"items": ["b"], "count": "two"}))
            .unwrap_err();
        assert_eq!(err.category(), "state_validation_error");
        assert_eq!(
            err.to_string(),
            "field `count` expects an integer, got a string (\"two\")"
        );
        assert_eq!(state, before);
        let err = schema.merge(&mut state, json!({"items": [1]})).unwrap_err();
        assert_eq!(
            err.to_string(),
            "field `items` expects a string at [1], got a number (1)"
        );
        let err = schema
            .merge(&mut state, json!({"itmes": ["x"]}))
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "field `itmes` is not a field of this state; did you mean `items`?"
        );
        let err = schema
            .merge_from("x", &mut state, json!({"items": "x"}))
            .unwrap_err();
        assert_eq!(err.category(), "reducer_error");
        assert_eq!(
            err.to_string(),
            "reducer `append` failed on field `items` (update from node `x`): the update must be a list, got a string"
        );
        let err = schema.merge(&mut state, json!(["items"])).unwrap_err();
        assert_eq!(err.category(), "state_validation_error");
        assert_eq!(state, before);
    }

    #[test]
    fn specs_round_trip_through_json() {
        for spec in [
            json!("append"),
            json!({"bounded_append": {"max_len": 3}}),
            json!({"merge_by_key": {"key": "id"}}),
        ] {
            let parsed: ReducerSpec = serde_json::from_value(spec.clone()).unwrap();
            assert_eq!(serde_json::to_value(&parsed).unwrap(), spec);
        }
        let schema =
            one_field(json!({"reducer": {"dedupe_append": {"key": "id"}}, "default": []})).unwrap();
        let field = &schema.fields()[0];
        assert!(field.round_trip_idempotent);
        assert_eq!(field.reducer.to_string(), "dedupe_append(key = \"id\")");
    }

    #[test]
    fn prepared_message_updates_replay_exactly() {
        let schema = Schema::from_json(&json!({"fields": {
            "added": {"type": "list", "reducer": "add_messages"},
            "replaced": {"type": "list", "reducer": "replace_messages"},
            "upserted": {"type": "list", "reducer": "upsert_messages"},
            "notes": {"type": "list", "reducer": "append"},
        }}))
        .unwrap();
        let message = json!({"role": "user", "content": [{"type": "text", "text": "hi"}]});
        let mut update = json!({
            "added": [message.clone()],
            "replaced": [message.clone()],
            "upserted": [message],
            "notes": [{"no": "id"}],
            "unknown": [1],
        });
        schema.prepare(&mut update);
        for field in ["added", "replaced", "upserted"] {
            assert!(
                update[field][0]["message_id"].is_string(),
                "{field}: {update}"
            );
        }
        assert_eq!(
            update["notes"],
            json!([{"no": "id"}]),
            "other reducers make nothing up"
        );
        assert_eq!(update["unknown"], json!([1]));
        update.as_object_mut().unwrap().remove("unknown");
        let replay = |updates: &[Value]| {
            let mut state = schema.initial_state();
            for u in updates {
                schema.merge(&mut state, u.clone()).unwrap();
            }
            state
        };
        let once = replay(std::slice::from_ref(&update));
        assert_eq!(replay(std::slice::from_ref(&update)), once);
        let twice = replay(&[update.clone(), update]);
        assert_eq!(twice["added"], once["added"], "add_messages is idempotent");
        assert_eq!(twice["upserted"], once["upserted"], "upsert_messages too");
    }
}
