//! A tool call in the OpenAI shape AgentFlow keeps in `Message.tools_calls`:
//! `{"id", "type": "function", "function": {"name", "arguments": "<JSON string>"}}`.

use super::block::ToolCallBlock;
use super::python_json;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// One entry of [`Message::tools_calls`](super::Message::tools_calls), in OpenAI's shape.
///
/// The arguments are a JSON *string*, written by [`ToolCall::new`] the way AgentFlow writes
/// them (Python's `json.dumps`: `{"city": "Paris"}`). Keys this type does not name are kept
/// in [`extra`](ToolCall::extra) so that a message read from AgentFlow is written back with
/// them.
///
/// ```
/// use agentstate::message::ToolCall;
/// use serde_json::json;
///
/// let call = ToolCall::new("call_1", "get_weather", json!({"city": "Paris"}));
/// assert_eq!(call.id(), "call_1");
/// assert_eq!(call.name(), "get_weather");
/// assert_eq!(call.function.arguments, r#"{"city": "Paris"}"#);
/// assert_eq!(call.arguments()?, json!({"city": "Paris"}));
/// assert_eq!(
///     serde_json::to_string(&call)?,
///     r#"{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\": \"Paris\"}"}}"#
/// );
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The call id, which the tool's result refers to.
    pub id: String,
    /// The `type` key: `"function"` (the default when absent).
    #[serde(rename = "type", default = "function_kind")]
    pub kind: String,
    /// The function to call and its arguments.
    pub function: FunctionCall,
    /// Any other key of the call object, kept as it came.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// The `function` object of a [`ToolCall`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FunctionCall {
    /// The tool's name.
    pub name: String,
    /// The arguments as a JSON string.
    pub arguments: String,
    /// Any other key of the function object, kept as it came.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

fn function_kind() -> String {
    "function".to_owned()
}

impl ToolCall {
    /// A call of tool `name` with `args`, which are written as a JSON string in Python's
    /// `json.dumps` format, as AgentFlow does.
    pub fn new(id: impl Into<String>, name: impl Into<String>, args: Value) -> Self {
        ToolCall {
            id: id.into(),
            kind: function_kind(),
            function: FunctionCall {
                name: name.into(),
                arguments: python_json::to_string(&args),
                extra: Map::new(),
            },
            extra: Map::new(),
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

    /// The arguments, parsed from their JSON string.
    ///
    /// ```
    /// use agentstate::message::ToolCall;
    ///
    /// let mut call = ToolCall::new("c1", "f", serde_json::json!({}));
    /// call.function.arguments = "{not json".into();
    /// assert!(call.arguments().is_err());
    /// ```
    pub fn arguments(&self) -> Result<Value, serde_json::Error> {
        serde_json::from_str(&self.function.arguments)
    }

    /// The same call as a `tool_call` content block. Arguments that are not a JSON object
    /// (or not JSON) become empty `args`, since a block's `args` is always an object.
    pub fn to_block(&self) -> ToolCallBlock {
        let args = match self.arguments() {
            Ok(Value::Object(map)) => map,
            _ => Map::new(),
        };
        ToolCallBlock {
            id: self.id.clone(),
            name: self.function.name.clone(),
            args,
            tool_type: None,
            signature: None,
            extra: None,
        }
    }
}

impl From<&ToolCallBlock> for ToolCall {
    /// The OpenAI-shaped call of a `tool_call` block (its `tool_type` is not part of that
    /// shape and is dropped).
    fn from(block: &ToolCallBlock) -> Self {
        ToolCall::new(
            block.id.clone(),
            block.name.clone(),
            Value::Object(block.args.clone()),
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
            call.arguments().unwrap(),
            json!({"a": 1, "b": [1.0, "é"], "c": null})
        );
    }

    #[test]
    fn unknown_keys_round_trip() {
        let wire = json!({
            "id": "c", "type": "function", "index": 0,
            "function": {"name": "f", "arguments": "{}", "strict": true}
        });
        let call: ToolCall = serde_json::from_value(wire.clone()).unwrap();
        assert_eq!(call.extra["index"], json!(0));
        assert_eq!(call.function.extra["strict"], json!(true));
        assert_eq!(serde_json::to_value(&call).unwrap(), wire);
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
        assert_eq!(Value::Object(block.args.clone()), json!({"city": "Paris"}));
        assert_eq!(block.tool_type, None);
        assert_eq!(ToolCall::from(&block), call);

        let odd = ToolCall::new("c2", "f", json!([1, 2]));
        assert!(odd.to_block().args.is_empty());
    }
}
