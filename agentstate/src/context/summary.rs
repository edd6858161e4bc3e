//! Summaries as state: what to summarize after a cut ([`SummaryRequest`]), and the summary
//! recorded as an [`AgentStateUpdate`] of `context_summary` and `context_summary_through`, so
//! that it merges through the reducers, goes into the [`Journal`](crate::journal::Journal),
//! replays, and can be undone.
//!
//! The library decides what to summarize: the messages a view leaves out that the current
//! summary does not cover yet ([`ContextView::unsummarized`]). The summarizer (usually a model
//! call, often async) is the caller's: it gets the previous summary and those messages, and
//! returns the new summary, which replaces the old one (a rolling summary, unlike AgentFlow's,
//! which grows forever) and must fit a token limit.

use super::error::ContextError;
use super::index::ContextIndex;
use super::tokens::TokenCounter;
use super::view::ContextView;
use super::window::{ContextWindow, SummaryRef};
use crate::message::{Message, MessageId};
use crate::state::{AgentState, AgentStateUpdate};
use crate::update::Extends;

impl<C: TokenCounter> ContextIndex<C> {
    /// The view of an [`AgentState`]: its `context`, with its `context_summary` standing for
    /// the messages up to `context_summary_through` (or, without it, for what is cut).
    ///
    /// ```
    /// use agentstate::context::{ContextIndex, ContextWindow};
    /// use agentstate::message::{Message, Role};
    /// use agentstate::state::{AgentState, AgentStateUpdate};
    /// use agentstate::State;
    ///
    /// let mut state = AgentState::default();
    /// let turns: Vec<Message> = (0..50)
    ///     .flat_map(|i| [
    ///         Message::text_message(format!("question {i}"), Role::User).with_id(format!("q{i}")),
    ///         Message::text_message(format!("answer {i}"), Role::Assistant).with_id(format!("a{i}")),
    ///     ])
    ///     .collect();
    /// state.merge(AgentStateUpdate::default().context(turns))?;
    ///
    /// let mut index = ContextIndex::default();
    /// let view = index.view_state(&state, &ContextWindow::turns(5))?;
    /// assert_eq!(view.history_len(), 10);
    /// assert_eq!(view.summary(), None, "no summary yet");
    /// assert_eq!(view.unsummarized(), 0..90);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn view_state<'a>(
        &mut self,
        state: &'a AgentState,
        window: &ContextWindow,
    ) -> Result<ContextView<'a>, ContextError> {
        let summary = state.context_summary.as_deref().map(|text| SummaryRef {
            text,
            through: state.context_summary_through.as_ref(),
        });
        self.view_with_summary(&state.context, summary, window)
    }
}

/// What to summarize after a view of an [`AgentState`]: the previous summary and the messages
/// the view leaves out that it does not cover. Made by [`SummaryRequest::new`], answered by
/// [`record`](SummaryRequest::record) with the summarizer's text.
///
/// ```
/// use agentstate::context::{ContextIndex, ContextWindow, Estimate, SummaryRequest};
/// use agentstate::journal::Journal;
/// use agentstate::message::{Message, Role};
/// use agentstate::state::{AgentState, AgentStateUpdate};
///
/// let mut journal = Journal::new(AgentState::default());
/// let turns: Vec<Message> = (0..50)
///     .flat_map(|i| [
///         Message::text_message(format!("question {i}"), Role::User).with_id(format!("q{i}")),
///         Message::text_message(format!("answer {i}"), Role::Assistant).with_id(format!("a{i}")),
///     ])
///     .collect();
/// journal.merge(AgentStateUpdate::default().context(turns))?;
///
/// let window = ContextWindow::turns(5);
/// let mut index = ContextIndex::default();
/// let update = {
///     let view = index.view_state(journal.state(), &window)?;
///     let request = SummaryRequest::new(journal.state(), &view).expect("90 messages are cut");
///     assert_eq!(request.messages().len(), 90);
///     // The summarizer is yours: usually a model call.
///     let text = format!("{} earlier questions, all answered.", request.messages().len() / 2);
///     request.record(text, &Estimate::default(), 200)?
/// };
/// journal.merge(update)?;
///
/// let state = journal.state();
/// assert_eq!(state.context.len(), 100, "the history itself is untouched");
/// assert_eq!(state.context_summary.as_deref(), Some("45 earlier questions, all answered."));
/// let view = index.view_state(state, &window)?;
/// assert_eq!(view.summary(), state.context_summary.as_deref());
/// assert!(view.unsummarized().is_empty());
/// // Replayable: the journal holds the summary's update like any other.
/// let replayed = Journal::replay(AgentState::default(), journal.updates().to_vec())?;
/// assert_eq!(&replayed, journal.state());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct SummaryRequest<'a> {
    previous: Option<&'a str>,
    previous_through: Option<&'a MessageId>,
    messages: &'a [Message],
    /// The largest summary the view's window holds (see [`ContextView`]).
    room: Option<u64>,
}

impl<'a> SummaryRequest<'a> {
    /// What to summarize after `view` (a view of `state`, from
    /// [`ContextIndex::view_state`]); `None` when the view leaves out nothing the summary does not
    /// already cover.
    pub fn new(state: &'a AgentState, view: &ContextView<'a>) -> Option<Self> {
        let range = view.unsummarized();
        let messages = state.context.get(range)?;
        if messages.is_empty() {
            return None;
        }
        Some(SummaryRequest {
            previous: state.context_summary.as_deref(),
            previous_through: state.context_summary_through.as_ref(),
            messages,
            room: view.summary_room,
        })
    }

    /// The current summary, which the new one replaces: fold it in.
    pub fn previous(&self) -> Option<&'a str> {
        self.previous
    }

    /// The messages to summarize, oldest first (never empty). Tool calls and their results are
    /// all here together, since views cut only between tool sequences.
    pub fn messages(&self) -> &'a [Message] {
        self.messages
    }

    /// The id of the last message to summarize: what the new summary covers through.
    pub fn through(&self) -> &'a MessageId {
        let last = self.messages.len() - 1;
        &self.messages[last].message_id
    }

    /// The update recording `summary` as the summary of everything through
    /// [`through`](SummaryRequest::through): it sets `context_summary` and
    /// `context_summary_through`, and merges like any update (into the state, or a journal).
    ///
    /// Fails with [`ContextError::SummaryTooLong`] when `summary` is over `max_tokens` tokens
    /// under `counter` (a summary stays bounded, however long the history grows), and with
    /// [`ContextError::SummaryOverWindow`] when it is more than the window of the view this
    /// request was made from can hold beside the system messages: recorded, it would make
    /// every later view of that window fail. Pass the index's counter, which views count the
    /// summary with.
    ///
    /// ```
    /// use agentstate::context::{ContextError, ContextIndex, ContextWindow, Estimate, SummaryRequest};
    /// use agentstate::message::{Message, Role};
    /// use agentstate::state::{AgentState, AgentStateUpdate};
    /// use agentstate::State;
    ///
    /// let mut state = AgentState::default();
    /// let notes: Vec<Message> = (0..40)
    ///     .map(|i| Message::text_message(format!("note {i}"), Role::User))
    ///     .collect();
    /// state.merge(AgentStateUpdate::default().context(notes))?;
    /// let mut index = ContextIndex::default();
    /// let view = index.view_state(&state, &ContextWindow::tokens(60))?;
    /// let request = SummaryRequest::new(&state, &view).expect("notes are cut");
    /// let err = request.record("word ".repeat(100), &Estimate::default(), 500).unwrap_err();
    /// assert!(matches!(err, ContextError::SummaryOverWindow { tokens: 100, room: 57, .. }));
    /// assert!(request.record("Notes 0 to 30.", &Estimate::default(), 500).is_ok());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn record(
        &self,
        summary: impl Into<String>,
        counter: &impl TokenCounter,
        max_tokens: u32,
    ) -> Result<AgentStateUpdate, ContextError> {
        let summary = summary.into();
        let tokens = counter.count(&summary);
        if tokens > max_tokens {
            return Err(ContextError::SummaryTooLong { tokens, max_tokens });
        }
        if self.room.is_none_or(|room| u64::from(tokens) > room) {
            return Err(ContextError::SummaryOverWindow {
                tokens,
                room: self.room.unwrap_or(0),
            });
        }
        Ok(AgentStateUpdate::default()
            .context_summary(Some(summary))
            .context_summary_through(Some(self.through().clone())))
    }

    /// The update that puts back the summary this request started from: merged after
    /// [`record`](SummaryRequest::record)'s, it undoes it.
    pub fn undo(&self) -> AgentStateUpdate {
        AgentStateUpdate::default()
            .context_summary(self.previous.map(str::to_owned))
            .context_summary_through(self.previous_through.cloned())
    }

    /// [`record`](SummaryRequest::record) for a state that extends [`AgentState`]
    /// (`#[agent_state(base)]`): the same update, as the extension's update type.
    ///
    /// ```
    /// use agentstate::context::{ContextIndex, ContextWindow, Estimate, SummaryRequest};
    /// use agentstate::message::{Message, Role};
    /// use agentstate::state::AgentStateUpdateSetters;
    /// use agentstate::{AgentState, State};
    ///
    /// #[derive(AgentState, Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
    /// struct Support {
    ///     #[agent_state(base)]
    ///     #[serde(flatten)]
    ///     base: agentstate::state::AgentState,
    ///     ticket: u32,
    /// }
    ///
    /// let mut state = Support::default();
    /// let notes: Vec<Message> = (0..20)
    ///     .map(|i| Message::text_message(format!("note {i}"), Role::User))
    ///     .collect();
    /// state.merge(SupportUpdate::default().context(notes))?;
    /// let mut index = ContextIndex::default();
    /// let update: SupportUpdate = {
    ///     let view = index.view_state(&state, &ContextWindow::turns(4))?;
    ///     let request = SummaryRequest::new(&state, &view).expect("16 notes are cut");
    ///     request.record_for("Notes 0 to 15.", &Estimate::default(), 50)?
    /// };
    /// state.merge(update)?;
    /// assert_eq!(state.context_summary.as_deref(), Some("Notes 0 to 15."));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn record_for<U: Extends<AgentStateUpdate> + Default>(
        &self,
        summary: impl Into<String>,
        counter: &impl TokenCounter,
        max_tokens: u32,
    ) -> Result<U, ContextError> {
        let mut update = U::default();
        *update.base_update() = self.record(summary, counter, max_tokens)?;
        Ok(update)
    }
}
