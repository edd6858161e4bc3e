//! Approval before chosen tools: the question a [`ToolNode`](super::ToolNode) asks and the
//! answer it reads (LangChain's human-in-the-loop middleware).

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// What a [`ToolNode`](super::ToolNode) asks a person before it runs tools that need approval:
/// the interrupt's payload. One question for all the calls of a model message that need it, in
/// call order; the answer is [`Decisions`], one per call.
///
/// ```json
/// {"action_requests": [{"call_id": "c1", "name": "refund", "args": {"order": "1042"},
///   "description": "Tool execution requires approval\n\nTool: refund\nArgs: {\"order\":\"1042\"}"}]}
/// ```
///
/// When the answer could not be read, the node asks again, the same calls with `error` saying
/// what was wrong with the answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ApprovalRequest {
    /// The calls waiting for a decision, in call order.
    pub action_requests: Vec<ActionRequest>,
    /// Why the previous answer was not taken (absent the first time).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// One tool call waiting for approval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ActionRequest {
    /// The call's id.
    pub call_id: String,
    /// The tool.
    pub name: String,
    /// The arguments the model gave (their JSON; the text itself when it is not JSON).
    pub args: Value,
    /// What is asked, for the person.
    pub description: String,
}

/// A person's decision on one call.
///
/// As JSON: `{"type": "approve"}`, `{"type": "edit", "args": {...}}`, `{"type": "reject"}` or
/// `{"type": "reject", "message": "..."}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum Decision {
    /// Run the call as the model asked.
    Approve,
    /// Run the call with these arguments instead.
    Edit {
        /// The arguments to run it with.
        args: Value,
    },
    /// Do not run the call: its result is `message` (or a sentence saying the person rejected
    /// the call), marked failed, for the model to read.
    Reject {
        /// What to tell the model.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        message: Option<String>,
    },
}

impl Decision {
    /// Rejects the call, telling the model `message`.
    pub fn reject(message: impl Into<String>) -> Self {
        Decision::Reject {
            message: Some(message.into()),
        }
    }

    /// Runs the call with `args` instead of the model's.
    pub fn edit(args: Value) -> Self {
        Decision::Edit { args }
    }
}

/// The answer to an [`ApprovalRequest`]: one [`Decision`] per requested call, in the order of
/// its `action_requests`. As JSON `{"decisions": [...]}`; it converts into the answer a
/// durable run is resumed with.
///
/// ```
/// use agentstate_graph::prebuilt::{Decision, Decisions};
/// use serde_json::json;
///
/// let answer = Decisions::new([Decision::Approve, Decision::reject("Not today.")]);
/// assert_eq!(
///     serde_json::Value::from(answer),
///     json!({"decisions": [{"type": "approve"}, {"type": "reject", "message": "Not today."}]})
/// );
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Decisions {
    /// The decisions, in call order.
    pub decisions: Vec<Decision>,
}

impl Decisions {
    /// These decisions.
    pub fn new(decisions: impl IntoIterator<Item = Decision>) -> Self {
        Decisions {
            decisions: decisions.into_iter().collect(),
        }
    }

    /// Approves all `n` calls.
    pub fn approve_all(n: usize) -> Self {
        Decisions::new(std::iter::repeat_n(Decision::Approve, n))
    }
}

impl From<Decisions> for Value {
    fn from(decisions: Decisions) -> Self {
        serde_json::to_value(decisions).unwrap_or(Value::Null)
    }
}
