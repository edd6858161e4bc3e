//! Why no view could be made: [`ContextError`].

/// Why no view could be made, or a summary not recorded.
///
/// [`OverBudget`](ContextError::OverBudget): the budget cannot hold what every view must contain.
/// A view always holds the system messages and, when the history was summarized, the
/// summary; when those alone are over the budget there is no valid view, and asking for one is
/// this error rather than a view that breaks the budget. (A budget that fits them but no
/// message of the history gives a view with no history messages, which is not an error.)
///
/// ```
/// use agentstate::context::{ContextError, ContextIndex, ContextWindow};
/// use agentstate::message::{Message, Role};
///
/// let history = vec![Message::text_message("You are a careful assistant.", Role::System)];
/// let mut index = ContextIndex::default();
/// let err = index.view(&history, &ContextWindow::tokens(2)).unwrap_err();
/// assert!(matches!(err, ContextError::OverBudget { .. }));
/// assert_eq!(
///     err.to_string(),
///     "the context budget of 2 tokens cannot hold the system messages (1 message, 10 tokens)"
/// );
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ContextError {
    /// The system messages and the summary, which every view keeps, exceed the budget.
    #[error(
        "the context budget of {budget} cannot hold {what} ({messages} message{s}, {tokens} tokens)",
        s = if *messages == 1 { "" } else { "s" }
    )]
    OverBudget {
        /// What must be kept: the system messages, the summary, or both.
        what: &'static str,
        /// The budget that was exceeded, as written by [`Budget`](super::Budget)'s `Display`.
        budget: String,
        /// How many messages that is (the summary counts as one).
        messages: usize,
        /// How many tokens that is.
        tokens: u64,
    },
    /// A summary to record is longer than its limit
    /// ([`SummaryRequest::record`](super::SummaryRequest::record)).
    #[error(
        "the summary for `context_summary` has {tokens} tokens, over its limit of {max_tokens}"
    )]
    SummaryTooLong {
        /// The summary's tokens.
        tokens: u32,
        /// The limit.
        max_tokens: u32,
    },
    /// A summary to record is larger than the window it was made for can ever hold beside the
    /// system messages ([`SummaryRequest::record`](super::SummaryRequest::record)).
    #[error(
        "the summary for `context_summary` has {tokens} tokens, more than the {room} the context \
         window holds beside the system messages"
    )]
    SummaryOverWindow {
        /// The summary's tokens.
        tokens: u32,
        /// The most the window holds (0 when its message limit leaves no room for a summary).
        room: u64,
    },
    /// A [`SummaryPolicy`](super::SummaryPolicy) that cannot be applied to the window.
    #[error("the summary policy cannot be applied: {reason}")]
    InvalidSummaryPolicy {
        /// What is wrong.
        reason: &'static str,
    },
}
