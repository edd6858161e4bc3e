//! [`ContextView`]: what one model call is sent, borrowed from the stored history.

use super::pairing::{self, Unanswered};
use crate::message::{Message, Role};
use std::borrow::Cow;
use std::ops::Range;

/// What to send a model: the system messages, the summary of what was cut (if any), and the
/// kept messages of the history, borrowed from the stored messages, which stay as they are;
/// [`messages`](ContextView::messages) gives exactly what is sent.
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
    /// The leading system messages: `messages[..leading]`.
    pub(crate) leading: usize,
    /// The positions of the other system messages, pinned too.
    pub(crate) pinned: Vec<usize>,
    pub(crate) summary: Option<&'a str>,
    pub(crate) covered: usize,
    pub(crate) cut: usize,
    pub(crate) ranges: Vec<Range<usize>>,
    pub(crate) tokens: u64,
    pub(crate) ratio: f64,
    pub(crate) unanswered: Unanswered,
    /// The tokens (in the index's units) of the largest summary this view's window holds.
    pub(crate) summary_room: Option<u64>,
}

impl<'a> ContextView<'a> {
    /// Every system message of the history, in order, always sent first: the leading ones, then
    /// those met later in the history (pinned: see [`ContextWindow`](super::ContextWindow)).
    pub fn system(&self) -> Vec<&'a Message> {
        let messages = self.messages;
        let pinned = self.pinned.iter().map(move |&p| &messages[p]);
        messages[..self.leading].iter().chain(pinned).collect()
    }

    /// The summary of the messages before the cut, sent after the system messages (as a system
    /// message: [`messages`](ContextView::messages) makes it).
    pub fn summary(&self) -> Option<&'a str> {
        self.summary
    }

    /// The kept messages of the history as stored, oldest first (system messages are in
    /// [`system`](ContextView::system)). What is sent of them is
    /// [`messages`](ContextView::messages): the same, paired as providers require.
    pub fn history(&self) -> impl DoubleEndedIterator<Item = &'a Message> + '_ {
        let messages = self.messages;
        self.ranges
            .iter()
            .flat_map(move |range| messages[range.clone()].iter())
    }

    /// Exactly what to send, in order: the system messages, the summary as a system message
    /// ([`ContextView::SUMMARY_ID`]), then the kept history with its tool calls and results
    /// paired as providers require (late results moved up to their call, duplicates left out,
    /// unanswered calls closed by the index's [`Unanswered`] policy). Stored messages are
    /// borrowed; the summary, stubs and trimmed copies are owned. Give it to a provider
    /// converter as a slice (with no `context_summary` argument: it is in here).
    ///
    /// ```
    /// use agentstate::context::{ContextIndex, ContextView, ContextWindow, SummaryRef};
    /// use agentstate::message::{Message, Role};
    /// use agentstate::providers::openai_chat::to_openai_chat;
    ///
    /// let history = vec![
    ///     Message::text_message("Be brief.", Role::System),
    ///     Message::text_message("Hi", Role::User).with_id("u1"),
    ///     Message::text_message("Hello!", Role::Assistant),
    ///     Message::text_message("Answer in French from now on.", Role::System),
    ///     Message::text_message("How are you?", Role::User),
    /// ];
    /// let summary = SummaryRef { text: "The user said hi.", through: Some(&history[1].message_id) };
    /// let mut index = ContextIndex::default();
    /// let view = index.view_with_summary(&history, Some(summary), &ContextWindow::messages(10))?;
    /// let sent: Vec<Message> = view.messages().into_iter().map(|m| m.into_owned()).collect();
    /// let texts: Vec<String> = sent.iter().map(|m| m.text()).collect();
    /// assert_eq!(
    ///     texts,
    ///     ["Be brief.", "Answer in French from now on.", "The user said hi.", "Hello!", "How are you?"]
    /// );
    /// assert_eq!(sent[2].message_id, agentstate::message::MessageId::from(ContextView::SUMMARY_ID));
    /// let body = serde_json::to_value(to_openai_chat(&sent, None).request)?;
    /// assert_eq!(body["messages"][2]["role"], "system");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn messages(&self) -> Vec<Cow<'a, Message>> {
        let mut out: Vec<Cow<'a, Message>> = self.system().into_iter().map(Cow::Borrowed).collect();
        if let Some(summary) = self.summary {
            out.push(Cow::Owned(
                Message::text_message(summary, Role::System).with_id(Self::SUMMARY_ID),
            ));
        }
        let positions = self.ranges.iter().flat_map(Clone::clone);
        out.extend(pairing::paired(self.messages, positions, self.unanswered));
        out
    }

    /// The message id of the summary's message in [`messages`](ContextView::messages).
    pub const SUMMARY_ID: &'static str = "context-summary";

    /// The kept history as ranges of positions in the stored history, in order.
    pub fn ranges(&self) -> &[Range<usize>] {
        &self.ranges
    }

    /// The position of the first kept history message (the history's length when none is
    /// kept): every kept message is at or after it.
    pub fn cut(&self) -> usize {
        self.cut
    }

    /// The messages neither sent nor covered by the summary: after the leading system messages
    /// and what the summary covers, before the cut. What the next summary should take in (system
    /// messages among them are sent anyway).
    pub fn unsummarized(&self) -> Range<usize> {
        self.covered..self.cut.max(self.covered)
    }

    /// How many messages are sent, the summary counting as one (before pairing, which may add
    /// stub results and leave out duplicates: [`messages`](ContextView::messages) is exact).
    pub fn len(&self) -> usize {
        self.leading + self.pinned.len() + usize::from(self.summary.is_some()) + self.history_len()
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
