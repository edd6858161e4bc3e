//! [`ContextView`]: what one model call is sent, borrowed from the stored history.

use crate::message::Message;
use std::ops::Range;

/// What to send a model: the leading system messages, the summary of what was cut (if any), and
/// the kept messages of the history, all borrowed from the stored messages, which stay as they
/// are.
///
/// The kept messages are the history from [`cut`](ContextView::cut) to its end, less tool
/// messages that answer no call (orphans), in [`ranges`](ContextView::ranges). The messages
/// between the summary's coverage and the cut are neither sent nor summarized:
/// [`unsummarized`](ContextView::unsummarized) names them, for the next summary.
///
/// ```
/// use agentstate::context::{ContextIndex, ContextWindow, SummaryRef};
/// use agentstate::message::{Message, Role};
///
/// let history: Vec<Message> = std::iter::once(Message::text_message("Be kind.", Role::System))
///     .chain((0..10).map(|i| Message::text_message(format!("note {i}"), Role::User)))
///     .collect();
/// let summary = SummaryRef { text: "Notes 0 to 5 were about cats.", through: None };
/// let mut index = ContextIndex::default();
/// let view = index.view_with_summary(&history, Some(summary), &ContextWindow::messages(5))?;
/// assert_eq!(view.system().len(), 1);
/// assert_eq!(view.summary(), Some("Notes 0 to 5 were about cats."));
/// assert_eq!(view.ranges(), [8..11]);
/// assert_eq!(view.len(), 5, "system, summary and three notes");
/// assert_eq!(view.unsummarized(), 1..8, "the summary does not say what it covers");
/// # Ok::<(), agentstate::context::ContextError>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct ContextView<'a> {
    pub(crate) messages: &'a [Message],
    pub(crate) system: usize,
    pub(crate) summary: Option<&'a str>,
    pub(crate) covered: usize,
    pub(crate) cut: usize,
    pub(crate) ranges: Vec<Range<usize>>,
    pub(crate) tokens: u64,
    pub(crate) ratio: f64,
}

impl<'a> ContextView<'a> {
    /// The leading system messages, always sent first.
    pub fn system(&self) -> &'a [Message] {
        &self.messages[..self.system]
    }

    /// The summary of the messages before the cut, to send after the system messages (as a
    /// system message, in the form the model expects).
    pub fn summary(&self) -> Option<&'a str> {
        self.summary
    }

    /// The kept messages of the history, oldest first.
    pub fn history(&self) -> impl DoubleEndedIterator<Item = &'a Message> + '_ {
        let messages = self.messages;
        self.ranges
            .iter()
            .flat_map(move |range| messages[range.clone()].iter())
    }

    /// Every message to send, in order: the system messages, then the kept history (the summary
    /// is text: see [`summary`](ContextView::summary)).
    pub fn messages(&self) -> impl Iterator<Item = &'a Message> + '_ {
        self.system().iter().chain(self.history())
    }

    /// The kept history as ranges of positions in the stored history, in order.
    pub fn ranges(&self) -> &[Range<usize>] {
        &self.ranges
    }

    /// The position of the first kept history message (the history's length when none is
    /// kept): every kept message is at or after it.
    pub fn cut(&self) -> usize {
        self.cut
    }

    /// The messages neither sent nor covered by the summary: after the system messages and what
    /// the summary covers, before the cut. What the next summary should take in.
    pub fn unsummarized(&self) -> Range<usize> {
        self.covered..self.cut.max(self.covered)
    }

    /// How many messages are sent, the summary counting as one.
    pub fn len(&self) -> usize {
        self.system + usize::from(self.summary.is_some()) + self.history_len()
    }

    /// Whether nothing at all is sent.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// How many messages the stored history holds (sent or not).
    pub fn stored_len(&self) -> usize {
        self.messages.len()
    }

    /// How many history messages are kept.
    pub fn history_len(&self) -> usize {
        self.ranges.iter().map(ExactSizeIterator::len).sum()
    }

    /// The tokens of everything sent, as the index's counter estimates them.
    pub fn estimated_tokens(&self) -> u64 {
        self.tokens
    }

    /// The tokens of everything sent, calibrated with the provider's count of the previous call
    /// (see [`ContextWindow::calibrated`](super::ContextWindow::calibrated)); the estimate when
    /// there was nothing to calibrate with.
    pub fn tokens(&self) -> u64 {
        // Rounded up: the budget holds the calibrated count, so it must not be under-reported.
        (self.tokens as f64 * self.ratio).ceil() as u64
    }

    /// The calibration factor applied to the estimate (1 when uncalibrated).
    pub fn calibration(&self) -> f64 {
        self.ratio
    }
}
