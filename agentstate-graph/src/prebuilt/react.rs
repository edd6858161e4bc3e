//! [`ReactAgent`]: a tool-calling agent as a graph (LangGraph's `create_react_agent`).

use super::state::MessagesState;
use super::tool_node::{tools_condition, ToolNode};
use crate::builder::GraphBuilder;
use crate::error::CompileError;
use crate::graph::Graph;
use crate::name::Target;
use crate::node::{BoxError, Context, Node, NodeFuture};
use crate::tool::ToolSet;
use agentstate::context::{ContextIndex, ContextWindow};
use agentstate::message::{Message, Role};
use agentstate::model::ChatModel;
use agentstate::providers::{ModelRequest, ModelRequestBuilder, OutputSchema, RequestError};
use agentstate::NodeOutput;
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;
use std::marker::PhantomData;
use std::sync::{Arc, Mutex};

/// The name of a [`ReactAgent`]'s model node.
pub const AGENT: &str = "agent";
/// The name of a [`ReactAgent`]'s [`ToolNode`].
pub const TOOLS: &str = "tools";
/// The name of the node that asks a [`ReactAgent`]'s model for its structured final answer
/// ([`ReactAgent::structured`]).
pub const RESPOND: &str = "respond";

/// What the model is told when the run has no steps left for the tools it asked for (the
/// words of LangGraph's `create_react_agent`).
const OUT_OF_STEPS: &str = "Sorry, need more steps to process this request.";

/// A ReAct agent as a graph, LangGraph's `create_react_agent`: a model node ([`AGENT`]) that
/// calls the model with the conversation and the tools, a [`ToolNode`] ([`TOOLS`]) that runs the
/// calls it asks for, and [`tools_condition`] between them, until the model answers without
/// calling a tool.
///
/// - **The model**: any [`ChatModel`] (a provider's client, a
///   [`ScriptedModel`](agentstate::model::ScriptedModel) in tests), with the request's
///   parameters from a [`ModelRequestBuilder`] (the model's name, sampling...); the tools'
///   definitions are added to it. When the run is streamed, the model's text and tool-call
///   deltas go to the run's stream as they arrive ([`Emitted::TextDelta`](crate::Emitted::TextDelta),
///   [`Emitted::ToolCallDelta`](crate::Emitted::ToolCallDelta)); otherwise the model is asked for the whole message.
/// - **What each call is sent**: the [`system_prompt`](ReactAgent::system_prompt) first, then
///   the conversation, or with a [`window`](ReactAgent::window) the view of it the context
///   window allows (budget, pairing of tool calls and results, the state's summary:
///   [`agentstate::context`]).
/// - **Recursion limit** ([`recursion_limit`](ReactAgent::recursion_limit), 25 by default):
///   when the model asks for tools but the run has no steps left for them and the answer after
///   them, its message is replaced by "Sorry, need more steps to process this request." and
///   the run ends normally, as LangGraph's agent does; a run that still needs more steps fails
///   with `recursion_limit`.
/// - **Approval** ([`approve`](ReactAgent::approve)): calls of the named tools wait for a
///   person's decision in a durable run (see [`ToolNode`]).
/// - **Frontend tools** ([`MessagesState::frontend_tools`]): tools a client declares and runs
///   itself (AG-UI's `tools`) are offered to the model beside the agent's own (one of the
///   agent's own wins a name both have). A reply that calls one of them ends the run there,
///   the call pending for the client (it is not run, and no node after the agent runs); the
///   client's next run brings its result as a `tool` message, and the agent goes on.
/// - **Structured final answer** ([`structured`](ReactAgent::structured)): after the model's
///   last answer, one more call ([`RESPOND`]) asks it for an answer in the JSON Schema of a
///   type, checked by parsing it into the type; the answer is added as an assistant message
///   whose `parsed_content` holds it, read typed with [`structured_answer`].
///
/// [`build`](ReactAgent::build) gives the graph; [`into_builder`](ReactAgent::into_builder)
/// gives its builder, to add nodes: with [`then`](ReactAgent::then) the agent goes to a node
/// of yours when it is done, instead of ending the run.
///
/// ```
/// use agentstate::message::{Message, Role, ToolCall};
/// use agentstate::model::ScriptedModel;
/// use agentstate::providers::ModelRequest;
/// use agentstate::state::{AgentState, AgentStateUpdate};
/// use agentstate::State;
/// use agentstate_graph::prebuilt::{structured_answer, ReactAgent};
/// use agentstate_graph::{BoxError, Context, ToolSet};
/// use serde_json::json;
///
/// /// Adds two numbers.
/// #[derive(serde::Deserialize, schemars::JsonSchema)]
/// struct Add { a: i64, b: i64 }
///
/// /// The final answer.
/// #[derive(serde::Deserialize, serde::Serialize, schemars::JsonSchema, Debug, PartialEq)]
/// struct Answer { sum: i64 }
///
/// let tools = ToolSet::new().tool("add", |x: Add, _: Context| async move { Ok::<_, BoxError>(x.a + x.b) });
/// let model = ScriptedModel::new([
///     Message::text_message("", Role::Assistant)
///         .with_tool_calls(vec![ToolCall::new("c1", "add", json!({"a": 2, "b": 3}))]),
///     Message::text_message("2 + 3 = 5.", Role::Assistant),
///     Message::text_message(r#"{"sum": 5}"#, Role::Assistant),
/// ]);
/// let agent = ReactAgent::new(model, ModelRequest::builder("gpt-4.1-mini"), tools)
///     .structured::<Answer>("answer")
///     .build()?;
///
/// let mut start = AgentState::default();
/// start.merge(AgentStateUpdate::default().context(vec![Message::text_message("2 + 3?", Role::User)]))?;
/// let state = tokio::runtime::Builder::new_current_thread().build()?.block_on(agent.invoke(start))?;
/// assert_eq!(structured_answer::<Answer>(state.context.as_slice()).unwrap()?, Answer { sum: 5 });
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct ReactAgent<S> {
    model: Arc<dyn ChatModel>,
    request: ModelRequestBuilder,
    tools: ToolSet,
    system: Option<String>,
    window: Option<ContextWindow>,
    recursion_limit: usize,
    approve: Vec<String>,
    structured: Option<Structured>,
    then: Target<&'static str>,
    state: PhantomData<fn() -> S>,
}

/// The structured final answer: its schema, and how to check the model's text against its type.
#[derive(Clone)]
struct Structured {
    schema: OutputSchema,
    type_name: &'static str,
    parse: fn(&str) -> Result<Value, serde_json::Error>,
}

/// Why a [`ReactAgent`] could not be built: one sentence naming what is wrong.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AgentError {
    /// The model request is one no provider would take (its parameters, the tools'
    /// definitions, two tools of one name, the structured answer's schema).
    #[error("the agent's model request is invalid: {0}")]
    Request(#[from] RequestError),
    /// Approval is asked for a tool the tool set does not have.
    #[error("approval is asked for tool `{tool}`, which the tool set does not have (it has: {available})")]
    UnknownTool {
        /// The name given.
        tool: String,
        /// The set's tools, comma-separated.
        available: String,
    },
    /// The graph does not build (a node of yours missing for [`ReactAgent::then`]).
    #[error(transparent)]
    Compile(#[from] CompileError),
}

impl AgentError {
    /// The category: the request error's (`provider_parameter_invalid`...),
    /// `approval_tool_unknown`, or the compile error's.
    pub fn category(&self) -> &'static str {
        match self {
            AgentError::Request(error) => error.category(),
            AgentError::UnknownTool { .. } => "approval_tool_unknown",
            AgentError::Compile(error) => error.category(),
        }
    }
}

impl<S: MessagesState> ReactAgent<S> {
    /// An agent calling `model` with `request`'s parameters (its model name, sampling...; the
    /// tools' definitions are added) and running `tools`.
    pub fn new(model: impl ChatModel, request: ModelRequestBuilder, tools: ToolSet) -> Self {
        ReactAgent {
            model: Arc::new(model),
            request,
            tools,
            system: None,
            window: None,
            recursion_limit: crate::DEFAULT_RECURSION_LIMIT,
            approve: Vec::new(),
            structured: None,
            then: Target::End,
            state: PhantomData,
        }
    }

    /// A system message sent first in every model call (not stored in the state).
    pub fn system_prompt(mut self, prompt: impl Into<String>) -> Self {
        self.system = Some(prompt.into());
        self
    }

    /// Sends each model call the view of the conversation `window` allows, with the state's
    /// summary ([`MessagesState::summary`]) for what it leaves out. The agent keeps one
    /// [`ContextIndex`] for its calls (a history it has not seen is indexed again).
    pub fn window(mut self, window: ContextWindow) -> Self {
        self.window = Some(window);
        self
    }

    /// The graph's recursion limit ([`GraphBuilder::recursion_limit`]; 25 by default).
    pub fn recursion_limit(mut self, limit: usize) -> Self {
        self.recursion_limit = limit;
        self
    }

    /// Asks a person before calls of these tools run (see [`ToolNode`]); needs a durable run.
    pub fn approve<T: Into<String>>(mut self, tools: impl IntoIterator<Item = T>) -> Self {
        self.approve.extend(tools.into_iter().map(Into::into));
        self
    }

    /// Ends with a structured answer of type `T`, its JSON Schema named `name` (see the
    /// type's documentation); a model answer that does not parse as `T` fails the run at
    /// [`RESPOND`], naming the type.
    pub fn structured<T>(mut self, name: impl Into<String>) -> Self
    where
        T: DeserializeOwned + Serialize + schemars::JsonSchema,
    {
        let type_name = std::any::type_name::<T>();
        self.structured = Some(Structured {
            schema: OutputSchema::of::<T>(name),
            type_name: type_name.rsplit("::").next().unwrap_or(type_name),
            parse: |text| serde_json::from_str::<T>(text).and_then(serde_json::to_value),
        });
        self
    }

    /// When the agent is done, goes to `node` (a node of yours, added to
    /// [`into_builder`](ReactAgent::into_builder)'s builder) instead of ending the run.
    pub fn then(mut self, node: &'static str) -> Self {
        self.then = Target::Node(node);
        self
    }

    /// The agent's graph builder: its nodes ([`AGENT`], [`TOOLS`], and [`RESPOND`] for a
    /// structured answer), their edges, the entry and the recursion limit; add nodes of yours
    /// (the [`then`](ReactAgent::then) node) before building it.
    pub fn into_builder(self) -> Result<GraphBuilder<S, &'static str>, AgentError> {
        let available = || self.tools.names().collect::<Vec<_>>().join(", ");
        if let Some(tool) = self.approve.iter().find(|t| self.tools.get(t).is_none()) {
            return Err(AgentError::UnknownTool {
                tool: tool.clone(),
                available: available(),
            });
        }
        let with_tools = self.request.clone().tools(self.tools.tools());
        let request = with_tools.clone().build()?;
        let own: Arc<[String]> = self.tools.names().map(str::to_owned).collect();
        let window = self
            .window
            .map(|window| (window, Arc::new(Mutex::new(ContextIndex::default()))));
        let system = self
            .system
            .map(|prompt| Message::text_message(prompt, Role::System).with_id("system-prompt"));
        let call = ModelCall {
            model: self.model,
            request: Arc::new(request),
            with_tools,
            own: Arc::clone(&own),
            system,
            window,
        };
        let after = match &self.structured {
            Some(_) => Target::Node(RESPOND),
            None => self.then.clone(),
        };
        let agent = ModelNode {
            call: call.clone(),
            steps_after_tools: if self.structured.is_some() { 3 } else { 2 },
        };
        let tools = ToolNode::shared(Arc::new(self.tools)).approve(self.approve);
        let mut builder = GraphBuilder::default()
            .node(AGENT, agent)
            .node(TOOLS, tools)
            .entry(AGENT)
            .route_to(
                AGENT,
                [Target::Node(TOOLS), after.clone(), Target::End],
                frontend_or(own, tools_condition(TOOLS, after)),
            )
            .edge(TOOLS, AGENT)
            .recursion_limit(self.recursion_limit);
        if let Some(structured) = self.structured {
            let request = self
                .request
                .output_schema(structured.schema.clone())
                .build()?;
            let respond = RespondNode {
                call: ModelCall {
                    request: Arc::new(request),
                    // The structured answer is asked for without tools.
                    own: Arc::from(Vec::new()),
                    ..call
                },
                structured,
            };
            builder = builder.node(RESPOND, respond).edge(RESPOND, self.then);
        }
        Ok(builder)
    }

    /// The agent's graph.
    pub fn build(self) -> Result<Graph<S>, AgentError> {
        Ok(self.into_builder()?.build()?)
    }
}

impl<S> std::fmt::Debug for ReactAgent<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReactAgent")
            .field("tools", &self.tools)
            .field("system", &self.system)
            .field("window", &self.window)
            .field("recursion_limit", &self.recursion_limit)
            .field("approve", &self.approve)
            .field("structured", &self.structured.as_ref().map(|s| s.type_name))
            .field("then", &self.then)
            .finish()
    }
}

/// Routes a reply that calls a frontend tool (one the state's client declared, not one of
/// `own`) to the end of the run, the call pending for the client; any other reply as `route`.
fn frontend_or<S: MessagesState>(
    own: Arc<[String]>,
    route: impl Fn(&S) -> crate::name::Routes<&'static str> + Send + Sync + 'static,
) -> impl Fn(&S) -> crate::name::Routes<&'static str> + Send + Sync + 'static {
    move |state: &S| {
        let frontend = state.frontend_tools();
        let calls_frontend = !frontend.is_empty()
            && state.messages().last().is_some_and(|m| {
                m.role == Role::Assistant
                    && m.tool_calls().iter().any(|call| {
                        let name = &call.function.name;
                        !own.contains(name) && frontend.iter().any(|t| &t.name == name)
                    })
            });
        if calls_frontend {
            Target::End.into()
        } else {
            route(state)
        }
    }
}

/// One model call as the agent makes it: the model, the request, the system prompt, the window.
#[derive(Clone)]
struct ModelCall {
    model: Arc<dyn ChatModel>,
    request: Arc<ModelRequest>,
    /// The request's builder with the agent's own tools, to add a client's frontend tools to.
    with_tools: ModelRequestBuilder,
    /// The agent's own tools' names (none for the structured answer's call).
    own: Arc<[String]>,
    system: Option<Message>,
    window: Option<(ContextWindow, Arc<Mutex<ContextIndex>>)>,
}

impl ModelCall {
    /// The request for a call on `state`: the agent's, with the client's frontend tools the
    /// agent does not have itself added (a request no provider would take fails the node).
    fn request_for<S: MessagesState>(&self, state: &S) -> Result<Arc<ModelRequest>, BoxError> {
        if self.own.is_empty() {
            return Ok(Arc::clone(&self.request));
        }
        let frontend: Vec<_> = state
            .frontend_tools()
            .into_iter()
            .filter(|t| !self.own.contains(&t.name))
            .collect();
        if frontend.is_empty() {
            return Ok(Arc::clone(&self.request));
        }
        let request = self
            .with_tools
            .clone()
            .tools(frontend)
            .build()
            .map_err(|e| {
                format!("the client's frontend tools do not make a request a provider takes: {e}")
            })?;
        Ok(Arc::new(request))
    }

    /// What the model is sent: the system prompt, then the conversation or its view.
    fn conversation<S: MessagesState>(&self, state: &S) -> Result<Vec<Message>, BoxError> {
        let mut sent: Vec<Message> = self.system.iter().cloned().collect();
        match &self.window {
            None => sent.extend(state.messages().iter().cloned()),
            Some((window, index)) => {
                let mut index = index
                    .lock()
                    .unwrap_or_else(|poisoned| poisoned.into_inner());
                let view = index.view_with_summary(state.messages(), state.summary(), window)?;
                sent.extend(
                    view.messages()
                        .into_iter()
                        .map(std::borrow::Cow::into_owned),
                );
            }
        }
        Ok(sent)
    }

    /// Calls the model: streamed into the run's stream when the run is streamed, whole
    /// otherwise ([`Context::complete`]).
    async fn answer(
        &self,
        request: &ModelRequest,
        messages: &[Message],
        cx: &Context,
    ) -> Result<Message, BoxError> {
        Ok(cx.complete(&self.model, request, messages).await?)
    }
}

/// The agent's model node.
#[derive(Clone)]
struct ModelNode {
    call: ModelCall,
    /// The steps a call of tools needs after this one (the tools, the model again, and the
    /// structured answer if any).
    steps_after_tools: u64,
}

impl<S: MessagesState> Node<S> for ModelNode {
    fn call(&self, state: Arc<S>, cx: Context) -> NodeFuture<S::Update> {
        let node = self.clone();
        Box::pin(async move {
            let sent = node.call.conversation(&*state)?;
            let request = node.call.request_for(&*state)?;
            let mut reply = node.call.answer(&request, &sent, &cx).await?;
            // A run succeeds in at most `limit - 1` steps.
            let out_of_steps = cx
                .recursion_limit()
                .is_some_and(|limit| cx.step() + node.steps_after_tools >= limit as u64);
            if reply.has_tool_calls() && out_of_steps {
                reply = Message::text_message(OUT_OF_STEPS, Role::Assistant)
                    .with_id(reply.message_id.clone());
            }
            Ok(NodeOutput::from(vec![reply]))
        })
    }
}

/// The node that asks for the structured final answer.
#[derive(Clone)]
struct RespondNode {
    call: ModelCall,
    structured: Structured,
}

impl<S: MessagesState> Node<S> for RespondNode {
    fn call(&self, state: Arc<S>, cx: Context) -> NodeFuture<S::Update> {
        let node = self.clone();
        Box::pin(async move {
            let sent = node.call.conversation(&*state)?;
            let reply = node.call.answer(&node.call.request, &sent, &cx).await?;
            let parsed = (node.structured.parse)(reply.text().trim()).map_err(|error| {
                format!(
                    "node `{}`: the model's structured answer does not read as `{}`: {error}",
                    cx.node(),
                    node.structured.type_name
                )
            })?;
            let reply = match parsed {
                Value::Object(object) => reply.with_parsed_content(object),
                _ => reply,
            };
            Ok(NodeOutput::from(vec![reply]))
        })
    }
}

/// The structured final answer of a [`ReactAgent`] built with
/// [`structured`](ReactAgent::structured): the `parsed_content` of the last assistant message
/// that has one, read as `T`; `None` when no message has one.
pub fn structured_answer<T: DeserializeOwned>(
    messages: &[Message],
) -> Option<Result<T, serde_json::Error>> {
    let parsed = messages
        .iter()
        .rev()
        .filter(|m| m.role == Role::Assistant)
        .find_map(|m| m.parsed_content.as_ref())?;
    Some(serde_json::to_value(parsed).and_then(serde_json::from_value))
}
