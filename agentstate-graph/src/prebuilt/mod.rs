//! Prebuilt agents, after LangGraph's `prebuilt`: a [`ToolNode`] that runs the last model
//! message's tool calls, [`tools_condition`] that routes to it, and [`ReactAgent`], a whole
//! tool-calling agent (LangGraph's `create_react_agent`) with a system prompt, a context window
//! per model call, a recursion limit, approval before chosen tools (LangChain's human-in-the-loop
//! middleware) and an optional structured final answer.
//!
//! They work on any state with a messages field ([`MessagesState`]: AgentFlow's
//! [`AgentState`](agentstate::state::AgentState), or your own), in memory and durably
//! (`graph.durable(&store)`, feature `store`: approval needs a durable run, which keeps the
//! question until a person answers), and stream: the model node forwards the model's text and
//! tool-call deltas to the run's stream ([`Emitted::TextDelta`](crate::Emitted::TextDelta),
//! [`Emitted::ToolCallDelta`](crate::Emitted::ToolCallDelta)).
//!
//! ```
//! use agentstate::message::{Message, Role, ToolCall};
//! use agentstate::model::ScriptedModel;
//! use agentstate::providers::ModelRequest;
//! use agentstate::state::{AgentState, AgentStateUpdate};
//! use agentstate::State;
//! use agentstate_graph::prebuilt::ReactAgent;
//! use agentstate_graph::{BoxError, Context, ToolSet};
//! use serde_json::json;
//!
//! /// The weather in a city today.
//! #[derive(serde::Deserialize, schemars::JsonSchema)]
//! struct Weather { city: String }
//!
//! let tools = ToolSet::new().tool("get_weather", |w: Weather, _: Context| async move {
//!     Ok::<_, BoxError>(format!("sunny in {}", w.city))
//! });
//! // A model that asks for the tool, then answers (a provider's client in production).
//! let model = ScriptedModel::new([
//!     Message::text_message("", Role::Assistant)
//!         .with_tool_calls(vec![ToolCall::new("c1", "get_weather", json!({"city": "Oslo"}))]),
//!     Message::text_message("It is sunny in Oslo.", Role::Assistant),
//! ]);
//! let agent = ReactAgent::new(model.clone(), ModelRequest::builder("gpt-4.1-mini"), tools)
//!     .system_prompt("You answer weather questions.")
//!     .build()?;
//!
//! let mut start = AgentState::default();
//! start.merge(AgentStateUpdate::default().context(vec![Message::text_message("Weather in Oslo?", Role::User)]))?;
//! # tokio::runtime::Builder::new_current_thread().build()?.block_on(async {
//! let state = agent.invoke(start).await?;
//! let texts: Vec<String> = state.context.iter().map(Message::text).collect();
//! assert_eq!(texts, ["Weather in Oslo?", "", "sunny in Oslo", "It is sunny in Oslo."]);
//! // Each model call was sent the system prompt, the history and the tools.
//! let sent = &model.requests()[1];
//! assert_eq!(sent.messages[0].text(), "You answer weather questions.");
//! assert_eq!(sent.messages.len(), 4);
//! assert_eq!(sent.request.tools()[0].name, "get_weather");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! # })?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod approval;
mod react;
mod state;
mod tool_node;

pub use approval::{ActionRequest, ApprovalRequest, Decision, Decisions};
pub use react::{structured_answer, AgentError, ReactAgent, AGENT, RESPOND, TOOLS};
pub use state::MessagesState;
pub use tool_node::{tools_condition, ToolNode};
