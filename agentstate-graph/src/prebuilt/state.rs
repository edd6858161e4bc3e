//! [`MessagesState`]: the states the prebuilt agents run on.

use crate::GraphState;
use agentstate::context::SummaryRef;
use agentstate::message::Message;
use agentstate::providers::Tool;
use agentstate::{MessagesUpdate, State};

/// A state with a messages field: what the prebuilt [`ToolNode`](super::ToolNode),
/// [`tools_condition`](super::tools_condition) and [`ReactAgent`](super::ReactAgent) read
/// (the conversation) and write (messages, through the field's reducer).
///
/// Implemented for AgentFlow's [`AgentState`](agentstate::state::AgentState) (its `context`,
/// and its `context_summary` for the context window). For your own state, name its messages
/// field (a `#[derive(AgentState)]` state with an `add_messages` field, or an extension of
/// `AgentState`, already carries messages in its update):
///
/// ```
/// use agentstate::message::Message;
/// use agentstate::AgentState;
/// use agentstate_graph::prebuilt::MessagesState;
///
/// #[derive(AgentState, Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
/// struct Support {
///     #[reducer(add_messages)]
///     messages: Vec<Message>,
///     #[reducer(append)]
///     tickets: Vec<String>,
/// }
///
/// impl MessagesState for Support {
///     fn messages(&self) -> &[Message] {
///         &self.messages
///     }
/// }
/// ```
pub trait MessagesState: GraphState + State<Update: MessagesUpdate + Default> {
    /// The conversation, oldest first.
    fn messages(&self) -> &[Message];

    /// The summary of the messages a context window leaves out, if the state keeps one (sent
    /// to the model in their place). None by default.
    fn summary(&self) -> Option<SummaryRef<'_>> {
        None
    }

    /// Tools the client declares and runs itself (AG-UI's frontend tools, which
    /// `agentstate-server`'s AG-UI endpoint puts in the state's `tools` field): a
    /// [`ReactAgent`](super::ReactAgent) offers them to its model, and a reply that calls one
    /// ends the run with the call pending for the client. None by default.
    ///
    /// ```
    /// use agentstate::message::Message;
    /// use agentstate::providers::Tool;
    /// use agentstate::AgentState;
    /// use agentstate_graph::prebuilt::MessagesState;
    ///
    /// #[derive(AgentState, Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
    /// struct Chat {
    ///     #[reducer(add_messages)]
    ///     messages: Vec<Message>,
    ///     /// The client's tools, as AG-UI declares them (`name`, `description`, `parameters`).
    ///     tools: Vec<serde_json::Value>,
    /// }
    ///
    /// impl MessagesState for Chat {
    ///     fn messages(&self) -> &[Message] {
    ///         &self.messages
    ///     }
    ///
    ///     fn frontend_tools(&self) -> Vec<Tool> {
    ///         self.tools
    ///             .iter()
    ///             .map(|t| Tool::new(
    ///                 t["name"].as_str().unwrap_or_default(),
    ///                 t["description"].as_str().unwrap_or_default(),
    ///                 t["parameters"].clone(),
    ///             ))
    ///             .collect()
    ///     }
    /// }
    ///
    /// let chat = Chat {
    ///     tools: vec![serde_json::json!({"name": "confirm", "description": "Asks the user", "parameters": {"type": "object"}})],
    ///     ..Chat::default()
    /// };
    /// assert_eq!(chat.frontend_tools()[0].name, "confirm");
    /// ```
    fn frontend_tools(&self) -> Vec<Tool> {
        Vec::new()
    }
}

impl MessagesState for agentstate::state::AgentState {
    fn messages(&self) -> &[Message] {
        self.context.as_slice()
    }

    fn summary(&self) -> Option<SummaryRef<'_>> {
        self.context_summary.as_deref().map(|text| SummaryRef {
            text,
            through: self.context_summary_through.as_ref(),
        })
    }
}
