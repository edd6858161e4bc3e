//! A tool call in the OpenAI shape AgentFlow keeps in `Message.tools_calls`:
//! `{"id", "type": "function", "function": {"name", "arguments": "<JSON string>"}}`.

use super::block::ToolCallBlock;
use super::json::{Json, JsonObject};
use super::python_json;
use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::ser::{SerializeMap, Serializer};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::fmt;

/// One entry of [`Message::tools_calls`](super::Message::tools_calls), in OpenAI's shape.
///
/// The arguments are a JSON *string*, written by [`ToolCall::new`] the way AgentFlow writes
/// them (Python's `json.dumps`: `{"city": "Paris"}`). Keys this type does not name are kept
/// in [`extra`](ToolCall::extra), and a call read from JSON is written back with its keys in
/// the order they were read (AgentFlow keeps `tools_calls` as plain dicts). A new call is
/// written in the order of the OpenAI SDK's `model_dump`, which AgentFlow's OpenAI converter
/// stores: `id`, `function` (`arguments`, `name`), `type`.
///
/// ```
/// use agentstate::message::ToolCall;
/// use serde_json::json;
///
/// let call = ToolCall::new("call_1", "get_weather", json!({"city": "Paris"}));
/// assert_eq!(call.id(), "call_1");
/// assert_eq!(call.name(), "get_weather");
/// assert_eq!(call.function.arguments, r#"{"city": "Paris"}"#);
/// assert_eq!(call.arguments::<serde_json::Value>().unwrap(), json!({"city": "Paris"}));
/// assert_eq!(
///     serde_json::to_string(&call)?,
///     r#"{"id":"call_1","function":{"arguments":"{\"city\": \"Paris\"}","name":"get_weather"},"type":"function"}"#
/// );
///
/// // Read in another order, written back in that order.
/// let text = r#"{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}"#;
/// let read: ToolCall = serde_json::from_str(text)?;
/// assert_eq!(serde_json::to_string(&read)?, text);
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct ToolCall {
    /// The call id, which the tool's result refers to.
    pub id: String,
    /// The `type` key: `"function"` (the default when absent).
    pub kind: String,
    /// The function to call and its arguments.
    pub function: FunctionCall,
    /// Any other key of the call object, kept as it came.
    pub extra: JsonObject,
    order: KeyOrder,
}

/// The `function` object of a [`ToolCall`].
#[derive(Debug, Clone)]
pub struct FunctionCall {
    /// The tool's name.
    pub name: String,
    /// The arguments as a JSON string.
    pub arguments: String,
    /// Any other key of the function object, kept as it came.
    pub extra: JsonObject,
    order: KeyOrder,
}

impl PartialEq for ToolCall {
    /// Key order aside, as Python compares dicts.
    fn eq(&self, other: &Self) -> bool {
        self.id == other.id
            && self.kind == other.kind
            && self.function == other.function
            && self.extra == other.extra
    }
}

impl PartialEq for FunctionCall {
    /// Key order aside, as Python compares dicts.
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name && self.arguments == other.arguments && self.extra == other.extra
    }
}

/// The order in which an object's keys were read: `None` for the default order of its type,
/// else one slot per key, a named field's index or [`EXTRA`] for the next extra key.
#[derive(Debug, Clone, Default)]
struct KeyOrder(Option<Box<[u8]>>);

const EXTRA: u8 = u8::MAX;

impl KeyOrder {
    fn read(slots: Vec<u8>, default: &[u8]) -> Self {
        KeyOrder((slots != default).then(|| slots.into_boxed_slice()))
    }

    fn slots<'a>(&'a self, default: &'a [u8]) -> &'a [u8] {
        self.0.as_deref().unwrap_or(default)
    }
}

/// Writes the named fields in `slots` order, with the extra keys where they were read (or
/// after the named fields).
fn serialize_ordered<S: Serializer>(
    serializer: S,
    slots: &[u8],
    extra: &JsonObject,
    mut field: impl FnMut(u8, &mut S::SerializeMap) -> Result<(), S::Error>,
) -> Result<S::Ok, S::Error> {
    let extras = if extra.is_empty() {
        Vec::new()
    } else {
        extra.entries()
    };
    let mut map = serializer.serialize_map(None)?;
    let mut next = extras.iter();
    for &slot in slots {
        if slot == EXTRA {
            if let Some((key, value)) = next.next() {
                map.serialize_entry(key, value)?;
            }
        } else {
            field(slot, &mut map)?;
        }
    }
    for (key, value) in next {
        map.serialize_entry(key, value)?;
    }
    map.end()
}

const CALL_ORDER: &[u8] = &[0, 2, 1]; // id, function, type
const FUNCTION_ORDER: &[u8] = &[1, 0]; // arguments, name

impl Serialize for ToolCall {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serialize_ordered(
            serializer,
            self.order.slots(CALL_ORDER),
            &self.extra,
            |slot, map| match slot {
                0 => map.serialize_entry("id", &self.id),
                1 => map.serialize_entry("type", &self.kind),
                _ => map.serialize_entry("function", &self.function),
            },
        )
    }
}

impl Serialize for FunctionCall {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serialize_ordered(
            serializer,
            self.order.slots(FUNCTION_ORDER),
            &self.extra,
            |slot, map| match slot {
                0 => map.serialize_entry("name", &self.name),
                _ => map.serialize_entry("arguments", &self.arguments),
            },
        )
    }
}

impl<'de> Deserialize<'de> for ToolCall {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct CallVisitor;
        impl<'de> Visitor<'de> for CallVisitor {
            type Value = ToolCall;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a tool call object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<ToolCall, A::Error> {
                let (mut id, mut kind, mut function) = (None, None, None);
                let mut extra = JsonObject::new();
                let mut slots = Vec::with_capacity(3);
                while let Some(key) = map.next_key::<String>()? {
                    match key.as_str() {
                        "id" => {
                            id = Some(map.next_value()?);
                            slots.push(0);
                        }
                        "type" => {
                            kind = Some(map.next_value()?);
                            slots.push(1);
                        }
                        "function" => {
                            function = Some(map.next_value()?);
                            slots.push(2);
                        }
                        _ => {
                            extra.insert(key, map.next_value::<Json>()?);
                            slots.push(EXTRA);
                        }
                    }
                }
                Ok(ToolCall {
                    id: id.ok_or_else(|| de::Error::missing_field("id"))?,
                    kind: kind.unwrap_or_else(function_kind),
                    function: function.ok_or_else(|| de::Error::missing_field("function"))?,
                    extra,
                    order: KeyOrder::read(slots, CALL_ORDER),
                })
            }
        }
        deserializer.deserialize_map(CallVisitor)
    }
}

impl<'de> Deserialize<'de> for FunctionCall {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct FunctionVisitor;
        impl<'de> Visitor<'de> for FunctionVisitor {
            type Value = FunctionCall;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a function object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<FunctionCall, A::Error> {
                let (mut name, mut arguments) = (None, None);
                let mut extra = JsonObject::new();
                let mut slots = Vec::with_capacity(2);
                while let Some(key) = map.next_key::<String>()? {
                    match key.as_str() {
                        "name" => {
                            name = Some(map.next_value()?);
                            slots.push(0);
                        }
                        "arguments" => {
                            arguments = Some(map.next_value()?);
                            slots.push(1);
                        }
                        _ => {
                            extra.insert(key, map.next_value::<Json>()?);
                            slots.push(EXTRA);
                        }
                    }
                }
                Ok(FunctionCall {
                    name: name.ok_or_else(|| de::Error::missing_field("name"))?,
                    arguments: arguments.ok_or_else(|| de::Error::missing_field("arguments"))?,
                    extra,
                    order: KeyOrder::read(slots, FUNCTION_ORDER),
                })
            }
        }
        deserializer.deserialize_map(FunctionVisitor)
    }
}

fn function_kind() -> String {
    "function".to_owned()
}

impl FunctionCall {
    /// A function call with these arguments (a JSON string), written in the SDK's order.
    pub fn new(name: impl Into<String>, arguments: impl Into<String>) -> Self {
        FunctionCall {
            name: name.into(),
            arguments: arguments.into(),
            extra: JsonObject::new(),
            order: KeyOrder::default(),
        }
    }
}

impl ToolCall {
    /// A call of tool `name` with `args`, which are written as a JSON string in Python's
    /// `json.dumps` format, as AgentFlow does.
    pub fn new(id: impl Into<String>, name: impl Into<String>, args: Value) -> Self {
        ToolCall::from_function(id, FunctionCall::new(name, python_json::to_string(&args)))
    }

    /// A `"function"` call of `function`.
    pub fn from_function(id: impl Into<String>, function: FunctionCall) -> Self {
        ToolCall {
            id: id.into(),
            kind: function_kind(),
            function,
            extra: JsonObject::new(),
            order: KeyOrder::default(),
        }
    }

    /// The call id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The tool's name.
    pub fn name(&self) -> &str {
        &self.function.name
    }

    /// The arguments, parsed from their JSON string into `T`: a
    /// [`Value`](serde_json::Value), or the typed arguments of a tool (a struct deriving
    /// `Deserialize`). An error names the call, the tool, where in the arguments the value did
    /// not fit and why.
    ///
    /// ```
    /// use agentstate::message::ToolCall;
    /// use serde_json::{json, Value};
    ///
    /// #[derive(serde::Deserialize, Debug, PartialEq)]
    /// struct Weather { city: String, days: u8 }
    ///
    /// let call = ToolCall::new("call_1", "get_weather", json!({"city": "Oslo", "days": 3}));
    /// assert_eq!(call.arguments::<Weather>()?, Weather { city: "Oslo".into(), days: 3 });
    /// assert_eq!(call.arguments::<Value>()?["city"], "Oslo");
    ///
    /// let bad = ToolCall::new("call_2", "get_weather", json!({"city": "Oslo", "days": "three"}));
    /// assert_eq!(
    ///     bad.arguments::<Weather>().unwrap_err().to_string(),
    ///     "the arguments of call `call_2` to tool `get_weather` do not fit at `days`: \
    ///      invalid type: string \"three\", expected u8 at line 1 column 32"
    /// );
    ///
    /// let mut broken = ToolCall::new("call_3", "get_weather", json!({}));
    /// broken.function.arguments = "{not json".into();
    /// assert!(broken.arguments::<Value>().unwrap_err().to_string().starts_with(
    ///     "the arguments of call `call_3` to tool `get_weather` are not JSON: key must be a string"
    /// ));
    /// # Ok::<(), agentstate::message::ArgumentsError>(())
    /// ```
    pub fn arguments<T: serde::de::DeserializeOwned>(&self) -> Result<T, ArgumentsError> {
        let text = if self.function.arguments.trim().is_empty() {
            // Some providers send no argument text for a tool without parameters.
            "{}"
        } else {
            self.function.arguments.as_str()
        };
        let error = |path: Option<String>, error| ArgumentsError {
            call_id: self.id.clone(),
            tool: self.function.name.clone(),
            path,
            error,
        };
        let mut de = serde_json::Deserializer::from_str(text);
        let value = serde_path_to_error::deserialize::<_, T>(&mut de).map_err(|e| {
            let path = e.path().to_string();
            let e = e.into_inner();
            let located = !e.is_syntax() && !e.is_eof() && path != ".";
            error(located.then_some(path), e)
        })?;
        de.end().map_err(|e| error(None, e))?;
        Ok(value)
    }

    /// The same call as a `tool_call` content block, its `args` in the order of the argument
    /// string. Arguments that are not a JSON object (or not JSON) become empty `args`, since a
    /// block's `args` is always an object.
    pub fn to_block(&self) -> ToolCallBlock {
        let args = serde_json::from_str::<JsonObject>(&self.function.arguments).unwrap_or_default();
        ToolCallBlock::new(self.id.clone(), self.function.name.clone(), args)
    }
}

/// Why a tool call's arguments did not parse ([`ToolCall::arguments`]): not JSON, or not of
/// the type asked for. Its message names the call, the tool, where the value did not fit and
/// why, in one sentence a model can read and correct.
#[derive(Debug)]
pub struct ArgumentsError {
    /// The call's id.
    pub call_id: String,
    /// The tool's name.
    pub tool: String,
    /// Where in the arguments the value did not fit (`days`, `items[2].name`), when the text
    /// was JSON.
    pub path: Option<String>,
    /// The JSON error.
    pub error: serde_json::Error,
}

impl fmt::Display for ArgumentsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (call, tool) = (&self.call_id, &self.tool);
        match &self.path {
            _ if self.error.is_syntax() || self.error.is_eof() => write!(
                f,
                "the arguments of call `{call}` to tool `{tool}` are not JSON: {}",
                self.error
            ),
            Some(path) => write!(
                f,
                "the arguments of call `{call}` to tool `{tool}` do not fit at `{path}`: {}",
                self.error
            ),
            None => write!(
                f,
                "the arguments of call `{call}` to tool `{tool}` do not fit: {}",
                self.error
            ),
        }
    }
}

impl std::error::Error for ArgumentsError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.error)
    }
}

impl From<&ToolCallBlock> for ToolCall {
    /// The OpenAI-shaped call of a `tool_call` block (its `tool_type` is not part of that
    /// shape and is dropped).
    fn from(block: &ToolCallBlock) -> Self {
        ToolCall::from_function(
            block.id.clone(),
            FunctionCall::new(
                block.name.clone(),
                python_json::text_to_string(block.args.as_json()),
            ),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn arguments_use_python_json_format() {
        let call = ToolCall::new("c", "f", json!({"a": 1, "b": [1.0, "é"], "c": null}));
        assert_eq!(
            call.function.arguments,
            r#"{"a": 1, "b": [1.0, "\u00e9"], "c": null}"#
        );
        assert_eq!(
            call.arguments::<Value>().unwrap(),
            json!({"a": 1, "b": [1.0, "é"], "c": null})
        );
    }

    #[test]
    fn unknown_keys_round_trip() {
        let wire = r#"{"index":0,"id":"c","function":{"strict":true,"name":"f","arguments":"{}"},"type":"function","z":{"b":1,"a":2}}"#;
        let call: ToolCall = serde_json::from_str(wire).unwrap();
        assert_eq!(call.extra.get("index"), Some(json!(0)));
        assert_eq!(call.function.extra.get("strict"), Some(json!(true)));
        assert_eq!(serde_json::to_string(&call).unwrap(), wire);
        assert_eq!(
            serde_json::to_value(&call).unwrap(),
            serde_json::from_str::<Value>(wire).unwrap()
        );
        // Another order compares equal, as Python dicts do.
        let other: ToolCall = serde_json::from_str(
            r#"{"id":"c","type":"function","index":0,"z":{"a":2,"b":1},"function":{"name":"f","arguments":"{}","strict":true}}"#,
        )
        .unwrap();
        assert_eq!(other, call);
    }

    #[test]
    fn type_defaults_to_function_and_shape_is_required() {
        let call: ToolCall =
            serde_json::from_value(json!({"id": "c", "function": {"name": "f", "arguments": ""}}))
                .unwrap();
        assert_eq!(call.kind, "function");
        assert!(serde_json::from_value::<ToolCall>(json!({"id": "c"})).is_err());
        assert!(serde_json::from_value::<ToolCall>(
            json!({"id": "c", "function": {"name": "f", "arguments": {"a": 1}}})
        )
        .is_err());
    }

    #[test]
    fn block_conversions() {
        let call = ToolCall::new("c1", "get_weather", json!({"city": "Paris"}));
        let block = call.to_block();
        assert_eq!(block.id, "c1");
        assert_eq!(block.name, "get_weather");
        assert_eq!(block.args, json!({"city": "Paris"}));
        assert_eq!(block.tool_type, None);
        assert_eq!(ToolCall::from(&block), call);

        let odd = ToolCall::new("c2", "f", json!([1, 2]));
        assert!(odd.to_block().args.is_empty());
        // Arguments keep their order through a block and back.
        let ordered = ToolCall::from_function("c3", FunctionCall::new("f", r#"{"z": 1, "a": 2}"#));
        assert_eq!(ToolCall::from(&ordered.to_block()), ordered);
    }

    #[test]
    fn new_calls_use_the_sdk_dump_order() {
        let call = ToolCall::new("c", "f", json!({}));
        assert_eq!(
            serde_json::to_string(&call).unwrap(),
            r#"{"id":"c","function":{"arguments":"{}","name":"f"},"type":"function"}"#
        );
    }
}
