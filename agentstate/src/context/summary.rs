//! Summaries as state: what to summarize after a cut ([`SummaryRequest`]), and the summary
//! recorded as an [`AgentStateUpdate`] of `context_summary` and `context_summary_through`, so
//! that it merges through the reducers, goes into the [`Journal`](crate::journal::Journal),
//! replays, and can be undone.

use super::budget::Budget;
use super::error::ContextError;
use super::index::ContextIndex;
use super::tokens::TokenCounter;
use super::view::ContextView;
use super::window::{ContextWindow, Cut, SummaryRef};
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
/// The library decides what to summarize: the messages a view leaves out that the current
/// summary does not cover yet ([`ContextView::unsummarized`]). The summarizer (usually a model
/// call, often async) is the caller's: it gets the previous summary and those messages, and
/// returns the new summary, which replaces the old one (a rolling summary, unlike AgentFlow's,
/// which grows forever) and must fit a token limit.
///
/// ```
/// use agentstate::context::{ContextIndex, ContextWindow, Estimate, SummaryRequest};
/// use agentstate::Journal;
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
    /// already cover. This summarizes as soon as the window cuts;
    /// [`ContextIndex::summary_request`] summarizes by a [`SummaryPolicy`] instead.
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

/// An amount of history: tokens, messages, or a fraction of the window's budget (of its token
/// limit, else of its message limit, else of its turn limit), as LangChain's
/// `SummarizationMiddleware` takes them (`("tokens", n)`, `("messages", n)`, `("fraction", f)`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Threshold {
    /// This many tokens.
    Tokens(u64),
    /// This many messages.
    Messages(usize),
    /// This fraction (0 < f ≤ 1) of the window's token limit, or of its message limit when it
    /// has none, or of its turn limit.
    Fraction(f64),
}

/// When to summarize, and how much of the newest history to keep out of the summary: a
/// [`trigger`](SummaryPolicy::trigger) measured on what the next model call would be sent if
/// nothing were cut (the system messages, the current summary and every message it does not
/// cover), and a [`keep`](SummaryPolicy::keep) amount of the newest messages that the summary
/// leaves to be sent as they are. Used by [`ContextIndex::summary_request`].
///
/// Defaults: trigger at [`Threshold::Fraction`]`(0.8)` (80% of the window: summarize before the
/// window has to cut, so that no message is ever left out unsummarized), keep
/// [`Threshold::Fraction`]`(0.5)` (half the window: the next summary comes after 30% of the
/// window's growth; LangChain keeps 20 messages, which for long tool results can be over the
/// trigger, and then summarizes on every call). Several triggers may be given
/// ([`or_trigger`](SummaryPolicy::or_trigger)): any one reached triggers. Whatever `keep` says,
/// the summary also covers every message the window's view leaves out, and the kept part starts
/// at a turn (a user message) when one fits, never between a tool call and its result.
///
/// ```
/// use agentstate::context::{SummaryPolicy, Threshold};
///
/// let policy = SummaryPolicy::new()
///     .trigger(Threshold::Tokens(6_000))
///     .or_trigger(Threshold::Messages(200))
///     .keep(Threshold::Fraction(0.25));
/// assert_eq!(policy.triggers(), [Threshold::Tokens(6_000), Threshold::Messages(200)]);
/// assert_eq!(SummaryPolicy::default().keep_amount(), Threshold::Fraction(0.5));
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct SummaryPolicy {
    triggers: Vec<Threshold>,
    keep: Threshold,
}

impl Default for SummaryPolicy {
    fn default() -> Self {
        SummaryPolicy {
            triggers: vec![Threshold::Fraction(0.8)],
            keep: Threshold::Fraction(0.5),
        }
    }
}

impl SummaryPolicy {
    /// The default policy (see [`SummaryPolicy`]).
    pub fn new() -> Self {
        SummaryPolicy::default()
    }

    /// This policy, triggered at `threshold` only (replacing the triggers before).
    pub fn trigger(mut self, threshold: Threshold) -> Self {
        self.triggers = vec![threshold];
        self
    }

    /// This policy, also triggered at `threshold`.
    pub fn or_trigger(mut self, threshold: Threshold) -> Self {
        self.triggers.push(threshold);
        self
    }

    /// This policy, keeping `amount` of the newest history out of the summary.
    pub fn keep(mut self, amount: Threshold) -> Self {
        self.keep = amount;
        self
    }

    /// The triggers (any one reached triggers).
    pub fn triggers(&self) -> &[Threshold] {
        &self.triggers
    }

    /// How much of the newest history is kept out of the summary.
    pub fn keep_amount(&self) -> Threshold {
        self.keep
    }
}

impl<C: TokenCounter> ContextIndex<C> {
    /// What to summarize under `policy` before a call with `window`: `None` until a trigger is
    /// reached (or when there is nothing to summarize), else a request for the messages after
    /// the current summary's coverage up to the kept part (see [`SummaryPolicy`]). Record its
    /// answer with [`SummaryRequest::record`], which bounds it by `window`.
    ///
    /// Fails with [`ContextError::InvalidSummaryPolicy`] for a fraction outside 0 < f ≤ 1 or
    /// one of a window without any limit, and as [`ContextIndex::view`] does.
    ///
    /// ```
    /// use agentstate::context::{ContextIndex, ContextWindow, Estimate, SummaryPolicy, Threshold};
    /// use agentstate::message::{Message, Role};
    /// use agentstate::state::{AgentState, AgentStateUpdate};
    /// use agentstate::State;
    ///
    /// let mut state = AgentState::default();
    /// let window = ContextWindow::tokens(8_000);
    /// let policy = SummaryPolicy::new().trigger(Threshold::Messages(61)).keep(Threshold::Messages(10));
    /// let mut index = ContextIndex::default();
    /// for i in 0..30 {
    ///     state.merge(AgentStateUpdate::default().context(vec![
    ///         Message::text_message(format!("question {i}"), Role::User).with_id(format!("q{i}")),
    ///         Message::text_message(format!("answer {i}"), Role::Assistant).with_id(format!("a{i}")),
    ///     ]))?;
    ///     assert!(index.summary_request(&state, &window, &policy)?.is_none(), "at most 60 messages");
    /// }
    /// state.merge(AgentStateUpdate::default().context(vec![
    ///     Message::text_message("question 30", Role::User).with_id("q30"),
    /// ]))?;
    /// let update = {
    ///     let request = index.summary_request(&state, &window, &policy)?.expect("61 messages");
    ///     // Ten kept, from a turn: the newest five questions and four answers... and one more
    ///     // message would split a turn, so nine: q26 to q30.
    ///     assert_eq!(request.messages().len(), 52);
    ///     assert_eq!(request.through(), &agentstate::message::MessageId::from("a25"));
    ///     request.record("Questions 0 to 25, all answered.", &Estimate::default(), 500)?
    /// };
    /// state.merge(update)?;
    /// let view = index.view_state(&state, &window)?;
    /// assert_eq!(view.history_len(), 9);
    /// assert!(index.summary_request(&state, &window, &policy)?.is_none(), "summarized");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn summary_request<'a>(
        &mut self,
        state: &'a AgentState,
        window: &ContextWindow,
        policy: &SummaryPolicy,
    ) -> Result<Option<SummaryRequest<'a>>, ContextError> {
        for &threshold in policy.triggers.iter().chain([&policy.keep]) {
            if let Threshold::Fraction(_) = threshold {
                fraction(threshold, window)?;
            }
        }
        let view = self.view_state(state, window)?;
        let covered = view.unsummarized().start;
        let end = state.context.len();
        // What the call would be sent if nothing were cut.
        let summary_tokens = state.context_summary.as_deref().map_or(0, |s| {
            u64::from(self.counter().count(s)) + u64::from(super::tokens::MESSAGE_OVERHEAD)
        });
        let system = self.system_at.len();
        let tokens = (self.system_prefix[system] + summary_tokens + self.prefix[end]
            - self.prefix[covered.min(end)]) as f64
            * view.ratio;
        let messages = system + usize::from(state.context_summary.is_some()) + (end - covered);
        let mut triggered = false;
        for &threshold in &policy.triggers {
            triggered |= match threshold {
                Threshold::Tokens(n) => tokens >= n as f64,
                Threshold::Messages(n) => messages >= n,
                Threshold::Fraction(_) => match fraction(threshold, window)? {
                    (Unit::Tokens, limit) => tokens >= limit,
                    (Unit::Messages, limit) => messages as f64 >= limit,
                    (Unit::Turns, limit) => {
                        let turns = self.entries[covered.min(end)..end]
                            .iter()
                            .filter(|e| e.turn)
                            .count();
                        turns as f64 >= limit
                    }
                },
            };
        }
        if !triggered {
            return Ok(None);
        }
        // The kept part: the view of a budget of `keep` beside the system messages.
        let budget = match policy.keep {
            Threshold::Tokens(n) => Budget::tokens(self.system_prefix[system] + n),
            Threshold::Messages(n) => Budget::messages(system + n),
            Threshold::Fraction(_) => match fraction(policy.keep, window)? {
                (Unit::Tokens, limit) => Budget::tokens(limit as u64),
                (Unit::Messages, limit) => Budget::messages(limit as usize),
                (Unit::Turns, limit) => Budget::turns(limit as usize),
            },
        };
        let keep = ContextWindow::new(budget)
            .with_cut(Cut::Turns)
            .calibrated(false);
        let kept = self.view(&state.context, &keep)?;
        let through = kept.cut().max(view.cut());
        let room = view.summary_room;
        let Some(messages) = state
            .context
            .get(covered..through)
            .filter(|m| !m.is_empty())
        else {
            return Ok(None);
        };
        Ok(Some(SummaryRequest {
            previous: state.context_summary.as_deref(),
            previous_through: state.context_summary_through.as_ref(),
            messages,
            room,
        }))
    }
}

/// What a fraction is of.
enum Unit {
    Tokens,
    Messages,
    Turns,
}

/// A fraction's limit: of the window's token limit, else message limit, else turn limit.
fn fraction(threshold: Threshold, window: &ContextWindow) -> Result<(Unit, f64), ContextError> {
    let Threshold::Fraction(f) = threshold else {
        return Err(ContextError::InvalidSummaryPolicy {
            reason: "not a fraction",
        });
    };
    if !(f > 0.0 && f <= 1.0) {
        return Err(ContextError::InvalidSummaryPolicy {
            reason: "a fraction must be over 0 and at most 1",
        });
    }
    let budget = window.budget;
    match (budget.max_tokens, budget.max_messages, budget.max_turns) {
        (Some(t), _, _) => Ok((Unit::Tokens, f * t as f64)),
        (None, Some(m), _) => Ok((Unit::Messages, f * m as f64)),
        (None, None, Some(t)) => Ok((Unit::Turns, f * t as f64)),
        (None, None, None) => Err(ContextError::InvalidSummaryPolicy {
            reason: "a fraction needs a window with a limit",
        }),
    }
}
