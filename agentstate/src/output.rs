//! What a node returns: messages, a partial update, a tool result, several of those, or
//! nothing, as one [`NodeOutput`] that a state applies atomically.

use crate::error::Error;
use crate::message::Message;
use crate::update::{Combine, Update};

/// An update that can carry messages: the update of a state with a messages field.
///
/// `#[derive(AgentState)]` implements it for `#[agent_state(messages = field)]`, and for a state
/// extending `AgentState` (whose messages field is `context`).
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot carry messages: its state has no messages field",
    label = "messages given to a state without a messages field",
    note = "name the field with #[agent_state(messages = field)], or extend agentstate::state::AgentState"
)]
pub trait MessagesUpdate {
    /// Adds messages to the update's messages entry (after any already there); they merge
    /// through that field's reducer.
    fn add_messages(&mut self, messages: Vec<Message>);
}

/// A tool's result: the tool message for the model plus a typed partial update of the state,
/// applied atomically (the message through the messages reducer, the update through the field
/// reducers).
pub struct ToolResult<U> {
    message: Message,
    update: U,
    /// `U`'s [`MessagesUpdate::add_messages`], kept from the constructor's bound.
    add_messages: fn(&mut U, Vec<Message>),
}

impl<U: MessagesUpdate> ToolResult<U> {
    /// A tool result. Only updates of states with a messages field can carry one.
    pub fn new(message: Message, update: U) -> Self {
        ToolResult {
            message,
            update,
            add_messages: U::add_messages,
        }
    }

    /// A tool result that changes nothing but the messages.
    pub fn message_only(message: Message) -> Self
    where
        U: Default,
    {
        ToolResult::new(message, U::default())
    }
}

impl<U> ToolResult<U> {
    /// The tool message.
    pub fn message(&self) -> &Message {
        &self.message
    }

    /// The state update.
    pub fn update(&self) -> &U {
        &self.update
    }

    /// The update with the tool message added to its messages entry.
    pub fn into_update(self) -> U {
        let mut update = self.update;
        (self.add_messages)(&mut update, vec![self.message]);
        update
    }
}

impl<U: Clone> Clone for ToolResult<U> {
    fn clone(&self) -> Self {
        ToolResult {
            message: self.message.clone(),
            update: self.update.clone(),
            add_messages: self.add_messages,
        }
    }
}

impl<U: std::fmt::Debug> std::fmt::Debug for ToolResult<U> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolResult")
            .field("message", &self.message)
            .field("update", &self.update)
            .finish()
    }
}

impl<U: PartialEq> PartialEq for ToolResult<U> {
    fn eq(&self, other: &Self) -> bool {
        self.message == other.message && self.update == other.update
    }
}

/// What a node returns. Build it with `.into()` from an update, a `Vec<Message>` (for a state
/// with a messages field), a [`ToolResult`], a `Vec` of outputs, or `()` for nothing.
///
/// Messages go into the state's messages field through its reducer (`add_messages` for an
/// [`AgentState`](crate::state::AgentState) extension), never around it: a [`ToolResult`]'s
/// update cannot wipe the context, and its tool message is always appended. Giving messages to a
/// state that has no messages field does not compile.
///
/// ```
/// use agentstate::message::{Message, Role};
/// use agentstate::{NodeOutput, ToolResult};
/// use agentstate::state::{AgentState, AgentStateUpdate};
/// use agentstate::State;
///
/// let mut state = AgentState::default();
/// let from_messages: NodeOutput<AgentStateUpdate> = vec![Message::text_message("hi", Role::User)].into();
/// state.apply_output(from_messages)?;
/// state.apply_output(().into())?; // nothing
///
/// // A tool result whose update says `context: []` still only adds its tool message.
/// let result = ToolResult::new(
///     Message::tool_result("call_1", "42"),
///     AgentStateUpdate::default().context(vec![]).context_summary(Some("asked".to_string())),
/// );
/// state.apply_output(result.into())?;
/// assert_eq!(state.context.len(), 2);
/// assert_eq!(state.context_summary.as_deref(), Some("asked"));
/// # Ok::<(), agentstate::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
pub enum NodeOutput<U> {
    /// No change.
    Nothing,
    /// A partial update.
    Update(U),
    /// A tool result (boxed: a message is large).
    ToolResult(Box<ToolResult<U>>),
    /// Several outputs, applied in order as one atomic merge.
    Many(Vec<NodeOutput<U>>),
}

impl<U> NodeOutput<U> {
    /// Folds the output into one update (`None` for nothing), combining in order with `compose`
    /// (a state's [`State::compose`](crate::State::compose)).
    pub fn into_update(
        self,
        compose: fn(U, U, Combine) -> Result<U, Error>,
    ) -> Result<Option<U>, Error> {
        Ok(match self {
            NodeOutput::Nothing => None,
            NodeOutput::Update(update) => Some(update),
            NodeOutput::ToolResult(result) => Some(result.into_update()),
            NodeOutput::Many(outputs) => {
                let mut acc: Option<U> = None;
                for output in outputs {
                    if let Some(next) = output.into_update(compose)? {
                        acc = Some(match acc {
                            None => next,
                            Some(prev) => compose(prev, next, Combine::Sequence)?,
                        });
                    }
                }
                acc
            }
        })
    }
}

impl<U> From<()> for NodeOutput<U> {
    fn from((): ()) -> Self {
        NodeOutput::Nothing
    }
}

impl<U: Update> From<U> for NodeOutput<U> {
    fn from(update: U) -> Self {
        NodeOutput::Update(update)
    }
}

impl<U: Update> From<Option<U>> for NodeOutput<U> {
    fn from(update: Option<U>) -> Self {
        update.map_or(NodeOutput::Nothing, NodeOutput::Update)
    }
}

impl<U: MessagesUpdate + Default> From<Vec<Message>> for NodeOutput<U> {
    fn from(messages: Vec<Message>) -> Self {
        let mut update = U::default();
        update.add_messages(messages);
        NodeOutput::Update(update)
    }
}

impl<U: MessagesUpdate + Default> From<Message> for NodeOutput<U> {
    fn from(message: Message) -> Self {
        vec![message].into()
    }
}

impl<U> From<ToolResult<U>> for NodeOutput<U> {
    fn from(result: ToolResult<U>) -> Self {
        NodeOutput::ToolResult(Box::new(result))
    }
}

impl<U> From<Vec<NodeOutput<U>>> for NodeOutput<U> {
    fn from(outputs: Vec<NodeOutput<U>>) -> Self {
        NodeOutput::Many(outputs)
    }
}
