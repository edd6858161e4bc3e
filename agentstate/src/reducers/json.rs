//! The reducers on `serde_json::Value` fields: what dynamic schemas and `Value`-typed fields of
//! a derived state merge with. A value of the wrong shape (an `append` update that is not a list)
//! is a `reducer_error` that says what was found.

use super::keyed::{dedupe_mask, keep_masked, last_indices, place, slot_update};
use super::{
    AddMessages, Append, BoundedAppend, ConcatFlatten, DedupeAppend, Merge, MergeAll, MergeByKey,
    Merges, Reducer, ReplaceMessages, UpsertMessages,
};
use crate::error::ReduceError;
use crate::keys::{KeyFn, KeyLabel};
use crate::message::Message;
use serde_json::{Map, Value};

/// Names a JSON value's kind for error messages: "a string", "a list", ...
pub(crate) fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

/// The items of a current list value. `null` (what `Value::default()` is, so what a derived
/// state's `Value` field starts as) is the empty list.
fn list<'a>(value: &'a Value, what: &str) -> Result<&'a [Value], ReduceError> {
    match value {
        Value::Array(items) => Ok(items),
        Value::Null => Ok(&[]),
        other => Err(ReduceError::msg(format!(
            "{what} must be a list, got {}",
            kind_of(other)
        ))),
    }
}

/// The current list to apply a plan to, turning `null` into the empty list.
fn list_mut(current: &mut Value) -> Option<&mut Vec<Value>> {
    if current.is_null() {
        *current = Value::Array(Vec::new());
    }
    current.as_array_mut()
}

/// The current object to apply a plan to, turning `null` into the empty object.
fn object_mut(current: &mut Value) -> Option<&mut Map<String, Value>> {
    if current.is_null() {
        *current = Value::Object(Map::new());
    }
    current.as_object_mut()
}

/// Checks a current object value; `null` is the empty object, as for lists.
fn object(value: &Value, what: &str) -> Result<(), ReduceError> {
    if value.is_object() || value.is_null() {
        Ok(())
    } else {
        Err(ReduceError::msg(format!(
            "{what} must be an object, got {}",
            kind_of(value)
        )))
    }
}

fn into_list(value: Value, what: &str) -> Result<Vec<Value>, ReduceError> {
    match value {
        Value::Array(items) => Ok(items),
        other => Err(ReduceError::msg(format!(
            "{what} must be a list, got {}",
            kind_of(&other)
        ))),
    }
}

fn into_object(value: Value, what: &str) -> Result<Map<String, Value>, ReduceError> {
    match value {
        Value::Object(map) => Ok(map),
        other => Err(ReduceError::msg(format!(
            "{what} must be an object, got {}",
            kind_of(&other)
        ))),
    }
}

/// The key of a JSON item: one of its fields (`merge_by_key(key = "id")` in a fixture).
///
/// An item that is not an object, or has no such field, is a `reducer_error`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JsonField(pub String);

/// The key of a JSON item is the whole item (`dedupe_append()` with no key on JSON values).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct JsonValue;

/// JSON values are compared by their canonical text (serde_json writes object keys sorted).
fn canonical(value: &Value) -> String {
    value.to_string()
}

impl KeyFn<Value> for JsonField {
    type Key<'a> = String;
    fn key<'a>(&'a self, item: &'a Value) -> Result<String, ReduceError> {
        item.get(&self.0).map(canonical).ok_or_else(|| {
            ReduceError::msg(format!(
                "the key `{}` is missing from an item ({})",
                self.0,
                if item.is_object() {
                    "an object without it".to_owned()
                } else {
                    kind_of(item).to_owned()
                }
            ))
        })
    }
}

impl KeyLabel for JsonField {
    fn key_label(&self) -> Option<&str> {
        Some(&self.0)
    }
}

impl KeyFn<Value> for JsonValue {
    type Key<'a> = String;
    fn key<'a>(&'a self, item: &'a Value) -> Result<String, ReduceError> {
        Ok(canonical(item))
    }
}

impl KeyLabel for JsonValue {
    fn key_label(&self) -> Option<&str> {
        None
    }
}

/// Two list updates as one: both must be arrays.
fn concat_arrays(first: Value, second: Value) -> Option<Value> {
    match (first, second) {
        (Value::Array(mut a), Value::Array(b)) => {
            a.extend(b);
            Some(Value::Array(a))
        }
        _ => None,
    }
}

fn push_all(current: &mut Value, items: Vec<Value>) {
    if let Some(existing) = list_mut(current) {
        existing.extend(items);
    }
}

impl Merges<Value> for Append {
    type Update = Value;
    type Plan = Vec<Value>;
}

impl Reducer<Value> for Append {
    fn plan(&self, current: &Value, update: Value) -> Result<Vec<Value>, ReduceError> {
        list(current, "the current value")?;
        into_list(update, "the update")
    }
    fn apply(&self, current: &mut Value, plan: Vec<Value>) {
        push_all(current, plan);
    }
    fn compose(&self, first: Value, second: Value) -> Option<Value> {
        concat_arrays(first, second)
    }
}

impl Merges<Value> for BoundedAppend {
    type Update = Value;
    type Plan = Vec<Value>;
}

impl Reducer<Value> for BoundedAppend {
    fn plan(&self, current: &Value, update: Value) -> Result<Vec<Value>, ReduceError> {
        list(current, "the current value")?;
        into_list(update, "the update")
    }
    fn apply(&self, current: &mut Value, plan: Vec<Value>) {
        if let Some(existing) = list_mut(current) {
            Reducer::<Vec<Value>>::apply(self, existing, plan);
        }
    }
    fn compose(&self, first: Value, second: Value) -> Option<Value> {
        concat_arrays(first, second)
    }
}

impl Merges<Value> for ConcatFlatten {
    type Update = Vec<Value>;
    type Plan = Vec<Value>;
}

impl Reducer<Value> for ConcatFlatten {
    fn plan(&self, current: &Value, update: Vec<Value>) -> Result<Vec<Value>, ReduceError> {
        list(current, "the current value")?;
        let mut flat = Vec::new();
        for (i, element) in update.into_iter().enumerate() {
            flat.extend(into_list(element, &format!("update element {i}"))?);
        }
        Ok(flat)
    }
    fn apply(&self, current: &mut Value, plan: Vec<Value>) {
        push_all(current, plan);
    }
    fn compose(&self, mut first: Self::Update, second: Self::Update) -> Option<Self::Update> {
        first.extend(second);
        Some(first)
    }
}

impl Merges<Value> for Merge {
    type Update = Value;
    type Plan = Map<String, Value>;
}

impl Reducer<Value> for Merge {
    fn plan(&self, current: &Value, update: Value) -> Result<Map<String, Value>, ReduceError> {
        object(current, "the current value")?;
        into_object(update, "the update")
    }
    fn apply(&self, current: &mut Value, plan: Map<String, Value>) {
        if let Some(existing) = object_mut(current) {
            existing.extend(plan);
        }
    }
    fn compose(&self, first: Value, second: Value) -> Option<Value> {
        match (first, second) {
            (Value::Object(mut a), Value::Object(b)) => {
                a.extend(b);
                Some(Value::Object(a))
            }
            _ => None,
        }
    }
}

impl Merges<Value> for MergeAll {
    type Update = Vec<Value>;
    type Plan = Vec<Map<String, Value>>;
}

impl Reducer<Value> for MergeAll {
    fn plan(
        &self,
        current: &Value,
        update: Vec<Value>,
    ) -> Result<Vec<Map<String, Value>>, ReduceError> {
        object(current, "the current value")?;
        update
            .into_iter()
            .enumerate()
            .map(|(i, element)| into_object(element, &format!("update element {i}")))
            .collect()
    }
    fn apply(&self, current: &mut Value, plan: Vec<Map<String, Value>>) {
        if let Some(existing) = object_mut(current) {
            for map in plan {
                existing.extend(map);
            }
        }
    }
    fn compose(&self, mut first: Self::Update, second: Self::Update) -> Option<Self::Update> {
        first.extend(second);
        Some(first)
    }
}

impl<K> Merges<Value> for DedupeAppend<K> {
    type Update = Value;
    type Plan = Vec<Value>;
}

impl<K: KeyFn<Value>> Reducer<Value> for DedupeAppend<K> {
    fn plan(&self, current: &Value, update: Value) -> Result<Vec<Value>, ReduceError> {
        let existing = list(current, "the current value")?;
        let update = into_list(update, "the update")?;
        let keep = {
            let seen = last_indices(self.key_fn(), existing)?;
            dedupe_mask(self.key_fn(), &update, |k| Ok(seen.contains_key(k)))?
        };
        Ok(keep_masked(update, &keep))
    }
    fn apply(&self, current: &mut Value, plan: Vec<Value>) {
        push_all(current, plan);
    }
    fn compose(&self, first: Value, second: Value) -> Option<Value> {
        concat_arrays(first, second)
    }
}

impl<K> Merges<Value> for MergeByKey<K> {
    type Update = Value;
    type Plan = super::keyed::KeyedPlan<Value>;
}

impl<K: KeyFn<Value>> Reducer<Value> for MergeByKey<K> {
    fn plan(&self, current: &Value, update: Value) -> Result<Self::Plan, ReduceError> {
        let existing = list(current, "the current value")?;
        let update = into_list(update, "the update")?;
        let slots = {
            let index = last_indices(self.key_fn(), existing)?;
            slot_update(self.key_fn(), &update, |k| Ok(index.get(k).copied()))?
        };
        Ok(place(update, slots))
    }
    fn apply(&self, current: &mut Value, plan: Self::Plan) {
        if let Some(existing) = list_mut(current) {
            for (at, item) in plan.replace {
                existing[at] = item;
            }
            existing.extend(plan.novel);
        }
    }
    fn compose(&self, first: Value, second: Value) -> Option<Value> {
        concat_arrays(first, second)
    }
}

/// `append_items` on JSON lists: items are deduplicated by their `"id"` field, against the
/// existing items only.
pub(crate) fn append_items_json(current: &Value, update: Value) -> Result<Vec<Value>, ReduceError> {
    let existing = list(current, "the current value")?;
    let update = into_list(update, "the update")?;
    let id = JsonField("id".to_owned());
    let ids = last_indices(&id, existing)?;
    let mut fresh = Vec::with_capacity(update.len());
    for item in update {
        if !ids.contains_key(&id.key(&item)?) {
            fresh.push(item);
        }
    }
    Ok(fresh)
}

pub(crate) fn push_json(current: &mut Value, items: Vec<Value>) {
    push_all(current, items);
}

fn messages_of(value: Value, what: &str) -> Result<Vec<Message>, ReduceError> {
    serde_json::from_value(value)
        .map_err(|e| ReduceError::msg(format!("{what} is not a list of messages: {e}")))
}

/// Runs a message reducer on JSON by converting to and from typed messages.
macro_rules! messages_on_json {
    ($reducer:ty, $update:ty, $convert:expr, $prepare:expr) => {
        impl Merges<Value> for $reducer {
            type Update = $update;
            type Plan = Value;
        }

        impl Reducer<Value> for $reducer {
            fn plan(&self, current: &Value, update: $update) -> Result<Value, ReduceError> {
                let mut messages = match current {
                    Value::Null => Vec::new(),
                    current => messages_of(current.clone(), "the current value")?,
                };
                let update = $convert(update)?;
                Reducer::<Vec<Message>>::reduce(self, &mut messages, update)?;
                serde_json::to_value(messages).map_err(ReduceError::new)
            }
            fn apply(&self, current: &mut Value, plan: Value) {
                *current = plan;
            }
            fn prepare(&self, update: &mut $update) {
                $prepare(update)
            }
        }
    };
}

/// Gives the messages of a JSON messages update their ids and timestamps now (by reading them
/// as typed messages and writing them back), so that every merge of the update sees the same
/// ones. An update that is not a list of messages is left as it is, for the merge to report.
fn prepare_messages(update: &mut Value) {
    if let Ok(messages) = serde_json::from_value::<Vec<Message>>(update.clone()) {
        if let Ok(prepared) = serde_json::to_value(messages) {
            *update = prepared;
        }
    }
}

/// Typed message updates got their ids when they were made.
fn prepared<T>(_: &mut T) {}

fn update_messages(update: Value) -> Result<Vec<Message>, ReduceError> {
    messages_of(update, "the update")
}

fn same<T>(update: T) -> Result<T, ReduceError> {
    Ok(update)
}

messages_on_json!(AddMessages, Value, update_messages, prepare_messages);
messages_on_json!(ReplaceMessages, Value, update_messages, prepare_messages);
messages_on_json!(UpsertMessages, Vec<super::MessageUpdate>, same, prepared);

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn wrong_shapes_are_reducer_errors_that_say_what_was_found() {
        let bounded = BoundedAppend::new(3).unwrap();
        let err = bounded
            .reduce(&mut json!([]), json!("not_a_list"))
            .unwrap_err();
        assert_eq!(err.to_string(), "the update must be a list, got a string");
        let err = ConcatFlatten
            .reduce(&mut json!([]), vec![json!(["a"]), json!("not_a_list")])
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "update element 1 must be a list, got a string"
        );
        let err = MergeAll
            .reduce(
                &mut json!({}),
                vec![json!({"k": "1"}), json!("not_a_mapping")],
            )
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "update element 1 must be an object, got a string"
        );
        let err = Merge.reduce(&mut json!({}), json!([1])).unwrap_err();
        assert_eq!(err.to_string(), "the update must be an object, got a list");
        let err = MergeByKey::new(JsonField("id".into()))
            .reduce(&mut json!([]), json!([{"name": "x"}]))
            .unwrap_err();
        assert!(err.to_string().contains("the key `id` is missing"), "{err}");
    }

    #[test]
    fn json_lists_merge_like_typed_lists() {
        let mut v = json!([{"id": 1, "s": "a"}, {"id": 2, "s": "b"}]);
        MergeByKey::new(JsonField("id".into()))
            .reduce(&mut v, json!([{"id": 2, "s": "B"}, {"id": 3, "s": "c"}]))
            .unwrap();
        assert_eq!(
            v,
            json!([{"id": 1, "s": "a"}, {"id": 2, "s": "B"}, {"id": 3, "s": "c"}])
        );
        let mut tags = json!(["seed"]);
        DedupeAppend::by(JsonValue)
            .reduce(&mut tags, json!(["seed", "a", "b", "a"]))
            .unwrap();
        assert_eq!(tags, json!(["seed", "a", "b"]));
        // 1 and "1" are different values.
        DedupeAppend::by(JsonValue)
            .reduce(&mut tags, json!([1, "1"]))
            .unwrap();
        assert_eq!(tags, json!(["seed", "a", "b", 1, "1"]));
        let mut m = json!({"a": 1});
        MergeAll
            .reduce(&mut m, vec![json!({"b": 2}), json!({"a": 3})])
            .unwrap();
        assert_eq!(m, json!({"a": 3, "b": 2}));
    }

    #[test]
    fn a_null_current_value_merges_as_the_empty_list_or_object() {
        let mut v = Value::Null;
        Append.reduce(&mut v, json!([1])).unwrap();
        assert_eq!(v, json!([1]));
        let mut v = Value::Null;
        BoundedAppend::new(2)
            .unwrap()
            .reduce(&mut v, json!([1, 2, 3]))
            .unwrap();
        assert_eq!(v, json!([2, 3]));
        let mut v = Value::Null;
        ConcatFlatten
            .reduce(&mut v, vec![json!([1]), json!([2])])
            .unwrap();
        assert_eq!(v, json!([1, 2]));
        let mut v = Value::Null;
        DedupeAppend::by(JsonValue)
            .reduce(&mut v, json!(["a", "a"]))
            .unwrap();
        assert_eq!(v, json!(["a"]));
        let mut v = Value::Null;
        MergeByKey::new(JsonField("id".into()))
            .reduce(&mut v, json!([{"id": 1}]))
            .unwrap();
        assert_eq!(v, json!([{"id": 1}]));
        let mut v = Value::Null;
        Merge.reduce(&mut v, json!({"a": 1})).unwrap();
        assert_eq!(v, json!({"a": 1}));
        let mut v = Value::Null;
        MergeAll.reduce(&mut v, vec![json!({"a": 1})]).unwrap();
        assert_eq!(v, json!({"a": 1}));
        let mut v = Value::Null;
        let message = json!([{"message_id": "m", "role": "user", "content": []}]);
        AddMessages.reduce(&mut v, message).unwrap();
        assert_eq!(v[0]["message_id"], "m");
        // An empty update leaves null alone; other current values are still refused.
        let mut v = Value::Null;
        Append.reduce(&mut v, json!([])).unwrap();
        assert_eq!(v, json!([]));
        let err = Append.reduce(&mut json!("x"), json!([1])).unwrap_err();
        assert_eq!(
            err.to_string(),
            "the current value must be a list, got a string"
        );
    }

    #[test]
    fn a_prepared_json_messages_update_merges_the_same_every_time() {
        let raw = json!([{"role": "user", "content": [{"type": "text", "text": "hi"}]}]);
        // Unprepared, each merge makes up a new id, so the message is appended twice.
        let mut history = json!([]);
        AddMessages.reduce(&mut history, raw.clone()).unwrap();
        AddMessages.reduce(&mut history, raw.clone()).unwrap();
        assert_eq!(history.as_array().unwrap().len(), 2);
        // Prepared, the id and timestamp are fixed once.
        let mut update = raw;
        Reducer::<Value>::prepare(&AddMessages, &mut update);
        let id = update[0]["message_id"].clone();
        assert!(id.is_string());
        assert!(update[0]["timestamp"].is_number());
        let mut history = json!([]);
        AddMessages.reduce(&mut history, update.clone()).unwrap();
        let once = history.clone();
        AddMessages.reduce(&mut history, update.clone()).unwrap();
        assert_eq!(history, once, "add_messages is round-trip idempotent");
        let mut replaced = json!([]);
        ReplaceMessages
            .reduce(&mut replaced, update.clone())
            .unwrap();
        assert_eq!(replaced, once);
        // Preparing twice changes nothing; a malformed update is left for the merge to report.
        let mut again = update.clone();
        Reducer::<Value>::prepare(&AddMessages, &mut again);
        assert_eq!(again, update);
        let mut bad = json!("not messages");
        Reducer::<Value>::prepare(&AddMessages, &mut bad);
        assert_eq!(bad, json!("not messages"));
    }
}
