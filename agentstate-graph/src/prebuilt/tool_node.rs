//! [`ToolNode`] and [`tools_condition`]: LangGraph's prebuilt tool node and its route.

use super::approval::{ActionRequest, ApprovalRequest, Decision, Decisions};
use super::state::MessagesState;
use crate::name::{NodeKey, Routes, Target};
use crate::node::{BoxError, Context, Node, NodeFuture};
use crate::tool::ToolSet;
use agentstate::message::{ContentBlock, Message, Role, ToolCall, ToolResultBlock};
use agentstate::NodeOutput;
use serde_json::Value;
use std::collections::HashSet;
use std::sync::Arc;

/// A node that runs the tool calls of the state's last assistant message with a [`ToolSet`]
/// and adds their results to the messages, in call order (LangGraph's `ToolNode`). Calls that
/// already have a result are not run again; a state without pending calls is left as it is.
///
/// In a durable run each call runs once: it is an effect keyed by its call id, journaled as
/// soon as its tool returned, so a crash, a failed step, a retry or a takeover that runs the
/// node again returns the finished calls' recorded results and runs only the others; a call
/// in flight at a crash runs again once, with the same idempotency key
/// ([`Context::idempotency_key`](crate::Context::idempotency_key)), which the tool passes to
/// the service that does the work (see [`ToolSet`]).
///
/// Tools named with [`approve`](ToolNode::approve) run only once a person approved them: the
/// node asks one question for all such calls of the message ([`ApprovalRequest`], the
/// interrupt's payload), and the durable run suspends until it is resumed with
/// [`Decisions`], one per call: approve, edit the arguments, or reject with a message that
/// becomes the call's result. The other calls run with the approved ones, in one parallel
/// batch. Outside a durable run the question fails the run
/// (`interrupt_outside_durable_run`). An edit runs the tool with the new arguments; the
/// update also carries the assistant message with the edited call (under its id), which a
/// LangGraph-style `upsert_messages` field puts in place of the model's, and AgentFlow's
/// `add_messages` drops (it never replaces a message), so the result's `approval` metadata
/// (`"edited"`, with `edited_args`) is the record of the edit there.
///
/// ```
/// use agentstate::message::{Message, Role, ToolCall};
/// use agentstate::state::{AgentState, AgentStateUpdate};
/// use agentstate::State;
/// use agentstate_graph::prebuilt::{tools_condition, ToolNode};
/// use agentstate_graph::{BoxError, Context, Graph, ToolSet, END};
/// use serde_json::json;
/// use std::sync::Arc;
///
/// #[derive(serde::Deserialize, schemars::JsonSchema)]
/// struct Add { a: i64, b: i64 }
///
/// let tools = ToolSet::new().tool("add", |x: Add, _: Context| async move { Ok::<_, BoxError>(x.a + x.b) });
/// let graph = Graph::builder()
///     .node("model", |_: Arc<AgentState>, _: Context| async {
///         let ask = Message::text_message("", Role::Assistant)
///             .with_tool_calls(vec![ToolCall::new("c1", "add", json!({"a": 2, "b": 3}))]);
///         Ok::<_, BoxError>(AgentStateUpdate::default().context(vec![ask]))
///     })
///     .node("tools", ToolNode::new(tools))
///     .entry("model")
///     .route("model", tools_condition("tools", END))
///     .edge("tools", END)
///     .build()?;
/// let state = tokio::runtime::Builder::new_current_thread().build()?.block_on(graph.invoke(AgentState::default()))?;
/// assert_eq!(state.context.iter().last().unwrap().text(), "5");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug)]
pub struct ToolNode {
    tools: Arc<ToolSet>,
    approve: Arc<HashSet<String>>,
}

impl ToolNode {
    /// A node running `tools`, none needing approval.
    pub fn new(tools: ToolSet) -> Self {
        ToolNode::shared(Arc::new(tools))
    }

    pub(crate) fn shared(tools: Arc<ToolSet>) -> Self {
        ToolNode {
            tools,
            approve: Arc::new(HashSet::new()),
        }
    }

    /// Asks a person before running these tools (see the type's documentation). A name the
    /// set does not have is never called, so it is never asked about
    /// ([`ReactAgent::build`](super::ReactAgent::build) refuses it).
    pub fn approve<T: Into<String>>(mut self, tools: impl IntoIterator<Item = T>) -> Self {
        Arc::make_mut(&mut self.approve).extend(tools.into_iter().map(Into::into));
        self
    }

    /// The tools.
    pub fn tools(&self) -> &ToolSet {
        &self.tools
    }

    /// Runs the pending calls of `messages`' last assistant message (asking for approval
    /// first where needed) and returns the messages to add.
    async fn respond(&self, messages: &[Message], cx: &Context) -> Result<Vec<Message>, BoxError> {
        let Some((ask, pending)) = pending_calls(messages) else {
            return Ok(Vec::new());
        };
        let asked: Vec<usize> = (0..pending.len())
            .filter(|&i| self.approve.contains(pending[i].name()))
            .collect();
        let decisions = if asked.is_empty() {
            Vec::new()
        } else {
            let requests: Vec<&ToolCall> = asked.iter().map(|&i| &pending[i]).collect();
            ask_approval(&requests, cx)?
        };
        // What runs (approved or edited), and the rejected calls' results, in call order.
        let mut run = Vec::with_capacity(pending.len());
        let mut outcomes: Vec<Outcome> = Vec::with_capacity(pending.len());
        let mut edited = false;
        for (i, call) in pending.iter().enumerate() {
            let decision = asked.iter().position(|&a| a == i).map(|at| &decisions[at]);
            match decision {
                None => {
                    outcomes.push(Outcome::Ran(None));
                    run.push(call.clone());
                }
                Some(Decision::Approve) => {
                    outcomes.push(Outcome::Ran(Some(("approved", None))));
                    run.push(call.clone());
                }
                Some(Decision::Edit { args }) => {
                    edited = true;
                    outcomes.push(Outcome::Ran(Some(("edited", Some(args.clone())))));
                    let mut call = call.clone();
                    call.function.arguments = args.to_string();
                    run.push(call);
                }
                Some(Decision::Reject { message }) => {
                    let text = message.clone().unwrap_or_else(|| {
                        format!(
                            "User rejected the tool call for `{}` with id {}",
                            call.name(),
                            call.id()
                        )
                    });
                    let block = ToolResultBlock::failed(call.id(), text);
                    let result = Message::tool_message(vec![ContentBlock::ToolResult(block)])
                        .with_metadata("approval", "rejected");
                    outcomes.push(Outcome::Rejected(result));
                }
            }
        }
        let mut results = self.tools.run(&run, cx).await?.into_iter();
        let mut messages = Vec::with_capacity(pending.len() + 1);
        if edited {
            messages.push(edited_ask(ask, &run));
        }
        for outcome in outcomes {
            messages.push(match outcome {
                Outcome::Rejected(result) => result,
                Outcome::Ran(approval) => {
                    let mut result = results
                        .next()
                        .ok_or("the tool set returned fewer results than calls")?;
                    if let Some((how, args)) = approval {
                        result = result.with_metadata("approval", how);
                        if let Some(args) = args {
                            result = result.with_metadata("edited_args", args);
                        }
                    }
                    result
                }
            });
        }
        Ok(messages)
    }
}

/// What became of one pending call.
enum Outcome {
    /// It ran (after approval: how, and the edited arguments).
    Ran(Option<(&'static str, Option<Value>)>),
    /// A person rejected it: its result.
    Rejected(Message),
}

impl<S: MessagesState> Node<S> for ToolNode {
    fn call(&self, state: Arc<S>, cx: Context) -> NodeFuture<S::Update> {
        let node = self.clone();
        Box::pin(async move {
            let messages = node.respond(state.messages(), &cx).await?;
            Ok(if messages.is_empty() {
                NodeOutput::Nothing
            } else {
                NodeOutput::from(messages)
            })
        })
    }
}

/// The last assistant message and its calls that have no result after it.
fn pending_calls(messages: &[Message]) -> Option<(&Message, Vec<ToolCall>)> {
    let at = messages.iter().rposition(|m| m.role == Role::Assistant)?;
    let answered: HashSet<&str> = messages[at + 1..]
        .iter()
        .flat_map(Message::tool_results)
        .map(|r| r.call_id.as_str())
        .collect();
    let ask = &messages[at];
    let pending: Vec<ToolCall> = ask
        .tool_calls()
        .iter()
        .filter(|c| !answered.contains(c.id()))
        .cloned()
        .collect();
    (!pending.is_empty()).then_some((ask, pending))
}

/// Asks a person about `calls` until the answer reads as one decision per call.
fn ask_approval(calls: &[&ToolCall], cx: &Context) -> Result<Vec<Decision>, BoxError> {
    let action_requests: Vec<ActionRequest> = calls
        .iter()
        .map(|call| {
            let args = call
                .arguments::<Value>()
                .unwrap_or_else(|_| Value::String(call.function.arguments.clone()));
            ActionRequest {
                call_id: call.id().to_owned(),
                name: call.name().to_owned(),
                description: format!(
                    "Tool execution requires approval\n\nTool: {}\nArgs: {args}",
                    call.name()
                ),
                args,
            }
        })
        .collect();
    let mut request = ApprovalRequest {
        action_requests,
        error: None,
    };
    loop {
        let answer = cx.interrupt(&request)?;
        match serde_json::from_value::<Decisions>(answer) {
            Ok(answer) if answer.decisions.len() == calls.len() => return Ok(answer.decisions),
            Ok(answer) => {
                request.error = Some(format!(
                    "the answer has {} decisions for {} tool calls; give one per call, in order",
                    answer.decisions.len(),
                    calls.len()
                ))
            }
            Err(error) => {
                request.error = Some(format!(
                    "the answer is not {{\"decisions\": [...]}} with one {{\"type\": \"approve\" | \"edit\" | \"reject\"}} per call: {error}"
                ))
            }
        }
    }
}

/// The assistant message `ask` with the calls that ran in place of its own (same ids).
fn edited_ask(ask: &Message, ran: &[ToolCall]) -> Message {
    let mut edited = ask.clone();
    let replace = |call: &ToolCall| {
        ran.iter()
            .find(|r| r.id == call.id)
            .cloned()
            .unwrap_or_else(|| call.clone())
    };
    if let Some(calls) = &mut edited.tools_calls {
        for call in calls.iter_mut() {
            *call = replace(call);
        }
    }
    for block in &mut edited.content {
        if let ContentBlock::ToolCall(block_call) = block {
            if let Some(call) = ran.iter().find(|r| r.id == block_call.id) {
                *block_call = call.to_block();
            }
        }
    }
    edited
}

/// LangGraph's `tools_condition`: a route to `tools` when the state's last message is an
/// assistant message with tool calls, otherwise to `otherwise` ([`END`](crate::END), or the
/// node that follows the agent).
///
/// ```
/// use agentstate::message::{Message, Role, ToolCall};
/// use agentstate::state::{AgentState, AgentStateUpdate};
/// use agentstate::State;
/// use agentstate_graph::prebuilt::tools_condition;
/// use agentstate_graph::{Target, END};
///
/// let route = tools_condition("tools", END);
/// let mut state = AgentState::default();
/// assert_eq!(route(&state).targets(), [Target::End]);
/// let ask = Message::text_message("", Role::Assistant)
///     .with_tool_calls(vec![ToolCall::new("c1", "add", serde_json::json!({}))]);
/// state.merge(AgentStateUpdate::default().context(vec![ask]))?;
/// assert_eq!(route(&state).targets(), [Target::Node("tools")]);
/// state.merge(AgentStateUpdate::default().context(vec![Message::tool_result("c1", "3")]))?;
/// assert_eq!(route(&state).targets(), [Target::End]);
/// # Ok::<(), agentstate::Error>(())
/// ```
pub fn tools_condition<S, K>(
    tools: K,
    otherwise: impl Into<Target<K>>,
) -> impl Fn(&S) -> Routes<K> + Clone + Send + Sync + 'static
where
    S: MessagesState,
    K: NodeKey,
{
    let otherwise = otherwise.into();
    move |state: &S| {
        let calls = state
            .messages()
            .last()
            .is_some_and(|m| m.role == Role::Assistant && m.has_tool_calls());
        if calls {
            Target::Node(tools.clone()).into()
        } else {
            otherwise.clone().into()
        }
    }
}
