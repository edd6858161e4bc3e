//! [`ContextWindow`]: the budget and cutting policy of views, and the cut itself: a walk back
//! from the newest message over what is kept, O(kept).

use super::budget::Budget;
use super::error::ContextError;
use super::index::{ContextIndex, Entry, ORPHAN};
use super::tokens::{TokenCounter, MESSAGE_OVERHEAD};
use super::view::ContextView;
use crate::message::{Message, MessageId};

/// Where a view may start its kept history.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Cut {
    /// At the earliest safe position that fits: the most history, but the first kept message
    /// changes whenever the history grows past the budget.
    Tight,
    /// At the start of a turn (a user message); a safe position inside a turn only when not even
    /// the newest turn fits.
    Turns,
    /// At the start of a turn, on a grid of `parts` chunks per budget: the first kept message
    /// moves only when the history has grown by a chunk since it last moved, so consecutive
    /// calls share their prompt prefix (which providers cache). A view then keeps between about
    /// `(parts - 1) / parts` of the budget and all of it. The grid is in estimated tokens (chunks
    /// of the budget as given, so that calibration does not move it) when the budget limits
    /// tokens, else in messages; a budget of turns alone cuts as [`Cut::Turns`].
    Chunked {
        /// Chunks per budget (at least 1).
        parts: u32,
    },
}

impl Default for Cut {
    /// Chunks of a quarter of the budget.
    fn default() -> Self {
        Cut::Chunked { parts: 4 }
    }
}

/// How views are made: a [`Budget`], a [`Cut`] policy, and whether to calibrate token counts
/// with the provider's reported usage.
///
/// A view never sends a tool result without the assistant message that called it, never an
/// assistant message's tool calls without every result of theirs that the history holds, and
/// never more than the budget; what it sends is paired as providers require (see
/// [`Unanswered`](super::Unanswered)).
///
/// **System messages are pinned**: every system message of the history, not only the leading
/// ones, is always sent and counted first, before the summary and the history, in its order.
/// A system message is an instruction, not a turn of the conversation: cutting it as an old
/// message would silently change the agent's behaviour once the history grows past the
/// budget. Sending it first is what AgentFlow does with system messages, and what the
/// Anthropic, Gemini and OpenAI Responses formats require (they have one system prompt);
/// only OpenAI Chat could take it in place. The summary follows the system messages when the
/// history was cut or summarized. If these alone exceed the budget, [`ContextIndex::view`]
/// fails with [`ContextError::OverBudget`]; a budget that fits them but no more gives a view
/// without history messages.
///
/// ```
/// use agentstate::context::{ContextIndex, ContextWindow};
/// use agentstate::message::{Message, Role, ToolCall};
/// use serde_json::json;
///
/// let history = vec![
///     Message::text_message("You are a weather bot.", Role::System),
///     Message::text_message("Weather in Paris and Rome?", Role::User),
///     Message::text_message("", Role::Assistant).with_tool_calls(vec![
///         ToolCall::new("c1", "weather", json!({"city": "Paris"})),
///         ToolCall::new("c2", "weather", json!({"city": "Rome"})),
///     ]),
///     Message::tool_result("c1", "sunny"),
///     Message::tool_result("c2", "rainy"),
///     Message::text_message("Paris is sunny, Rome rainy.", Role::Assistant),
/// ];
/// let mut index = ContextIndex::default();
/// // Four messages: the system message and the three newest would split the tool calls from
/// // their results, so the view keeps the system message and the final answer.
/// let view = index.view(&history, &ContextWindow::messages(4))?;
/// let roles: Vec<_> = view.messages().iter().map(|m| m.text()).collect();
/// assert_eq!(roles, ["You are a weather bot.", "Paris is sunny, Rome rainy."]);
/// // Five: the whole tool sequence fits.
/// let view = index.view(&history, &ContextWindow::messages(5))?;
/// assert_eq!(view.history_len(), 4);
/// assert_eq!(view.cut(), 2);
/// # Ok::<(), agentstate::context::ContextError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ContextWindow {
    /// The limits.
    pub budget: Budget,
    /// Where views may cut.
    pub cut: Cut,
    /// Whether to calibrate token counts with the latest assistant message's
    /// `usages.prompt_tokens` (default true).
    pub calibrate: bool,
}

impl ContextWindow {
    /// Views within `budget`, chunked turns ([`Cut::default`]), calibrated.
    pub fn new(budget: Budget) -> Self {
        ContextWindow {
            budget,
            cut: Cut::default(),
            calibrate: true,
        }
    }

    /// Views of at most `n` tokens.
    pub fn tokens(n: u64) -> Self {
        ContextWindow::new(Budget::tokens(n))
    }

    /// Views of at most `n` messages.
    pub fn messages(n: usize) -> Self {
        ContextWindow::new(Budget::messages(n))
    }

    /// Views of at most `n` turns.
    pub fn turns(n: usize) -> Self {
        ContextWindow::new(Budget::turns(n))
    }

    /// This window, cutting by `cut`.
    pub fn with_cut(mut self, cut: Cut) -> Self {
        self.cut = cut;
        self
    }

    /// This window, with calibration on or off.
    ///
    /// Calibrated, a view scales the estimate by `prompt_tokens / estimate`, where
    /// `prompt_tokens` is the usage the provider reported on the latest assistant message and
    /// `estimate` the estimated tokens of the view this window gives for the history before
    /// that message (what was sent then). When the cut has not moved since, the calibrated count
    /// is the provider's exact count plus the scaled estimate of what is new. The factor is
    /// bounded to 0.5..=2.
    pub fn calibrated(mut self, calibrate: bool) -> Self {
        self.calibrate = calibrate;
        self
    }
}

/// The summary a view may send, and the id of the last message it covers.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SummaryRef<'a> {
    /// The summary's text.
    pub text: &'a str,
    /// The last message it covers; `None` when unknown (a state written by AgentFlow), in which
    /// case the summary is sent whenever the history is cut.
    pub through: Option<&'a MessageId>,
}

impl<C: TokenCounter> ContextIndex<C> {
    /// Syncs the index with `messages` and returns the view of them that `window` allows.
    pub fn view<'a>(
        &mut self,
        messages: &'a [Message],
        window: &ContextWindow,
    ) -> Result<ContextView<'a>, ContextError> {
        self.view_with_summary(messages, None, window)
    }

    /// Syncs the index with `messages` and returns the view of them that `window` allows, with
    /// `summary` standing for the messages before the cut.
    ///
    /// When the summary names the last message it covers, the messages up to that one are never
    /// sent again (the summary replaces them) and the summary is always sent; otherwise it is
    /// sent when the history is cut.
    pub fn view_with_summary<'a>(
        &mut self,
        messages: &'a [Message],
        summary: Option<SummaryRef<'a>>,
        window: &ContextWindow,
    ) -> Result<ContextView<'a>, ContextError> {
        self.sync_appended(messages);
        let end = messages.len();
        let mut ratio = 1.0;
        let mut checked = false;
        let view = loop {
            if window.calibrate && window.budget.max_tokens.is_some() {
                if let Some(at) = self.last_usage {
                    let prompt = messages[at].usages.as_ref().map_or(0, |u| u.prompt_tokens);
                    ratio = self.calibration(messages, summary, window, at, prompt);
                }
            }
            let view = self.view_at(messages, summary, window, end, ratio);
            if checked {
                break view?;
            }
            checked = true;
            // The messages this view reads must be the ones indexed: one edited in place since
            // (an upsert, a time-travel update) is re-indexed, and the view made again.
            let from = view
                .as_ref()
                .ok()
                .and_then(|v| v.ranges().first())
                .map_or(end, |r| r.start);
            match self.first_changed(messages, from, end) {
                Some(changed) => self.reindex_from(messages, changed),
                None => break view?,
            }
        };
        // One entry per history length and window: views repeated at one length keep the
        // entries of the lengths before.
        self.recent.retain(|(e, w, _)| !(*e == end && w == window));
        if self.recent.len() == RECENT {
            self.recent.remove(0);
        }
        self.recent.push((end, *window, view.tokens));
        Ok(view)
    }

    /// The factor `prompt / estimate` of the call made before the message at `at`, whose
    /// provider counted `prompt` tokens. What was sent then is the view of the history before
    /// `at`: the index remembers the estimates of its latest views. When it has not seen that
    /// one (a new index), the view is remade under a factor `r` from its own previous call,
    /// which is unknown: starting from `r = 1`, `r = prompt / estimate(view(r))` is followed
    /// until the view's cut settles (at most four steps). No factor (1) when none settles.
    fn calibration(
        &self,
        messages: &[Message],
        summary: Option<SummaryRef<'_>>,
        window: &ContextWindow,
        at: usize,
        prompt: i64,
    ) -> f64 {
        if prompt <= 0 {
            return 1.0;
        }
        let remembered = self
            .recent
            .iter()
            .rev()
            .find(|(end, w, _)| *end == at && w == window);
        if let Some(&(_, _, estimate)) = remembered {
            return if estimate == 0 {
                1.0
            } else {
                (prompt as f64 / estimate as f64).clamp(0.5, 2.0)
            };
        }
        let mut ratio = 1.0;
        let mut cut = None;
        for _ in 0..4 {
            let Ok(before) = self.view_at(messages, summary, window, at, ratio) else {
                return 1.0;
            };
            if before.tokens == 0 {
                return 1.0;
            }
            if cut == Some(before.cut) {
                return ratio;
            }
            cut = Some(before.cut);
            ratio = (prompt as f64 / before.tokens as f64).clamp(0.5, 2.0);
        }
        1.0
    }

    /// The view of `messages[..end]` (the index holds at least `end` messages), with the
    /// estimate scaled by `ratio`.
    fn view_at<'a>(
        &self,
        messages: &'a [Message],
        summary: Option<SummaryRef<'a>>,
        window: &ContextWindow,
        end: usize,
        ratio: f64,
    ) -> Result<ContextView<'a>, ContextError> {
        let budget = window.budget;
        let leading = self.leading_system.min(end);
        // Every system message before `end` is pinned: sent first, counted first.
        let system = self.system_at.partition_point(|&p| (p as usize) < end);
        let system_tokens = self.system_prefix[system];
        // What the summary covers, when it says.
        let through = summary
            .and_then(|s| s.through)
            .and_then(|id| self.position_of(messages, id))
            .filter(|&p| p >= leading && p < end);
        let lower = through.map_or(leading, |p| p + 1);
        let summary_tokens = summary.map(|s| {
            u64::from(
                self.counter()
                    .count(s.text)
                    .saturating_add(MESSAGE_OVERHEAD),
            )
        });
        let limits = Limits::new(&budget, ratio);
        let pinned = |with_summary: bool| {
            let (tokens, messages) = match (with_summary, summary_tokens) {
                (true, Some(t)) => (system_tokens + t, system + 1),
                _ => (system_tokens, system),
            };
            if tokens > limits.tokens || messages > limits.messages {
                let what = match (with_summary && summary.is_some(), system > 0) {
                    (true, true) => "the system messages and the summary",
                    (true, false) => "the summary",
                    _ => "the system messages",
                };
                return Err(ContextError::OverBudget {
                    what,
                    budget: budget.to_string(),
                    messages,
                    tokens: (tokens as f64 * ratio).ceil() as u64,
                });
            }
            Ok((tokens, messages))
        };
        let mut with_summary = summary.is_some() && through.is_some();
        let mut fixed = pinned(with_summary)?;
        let mut cut = self.walk(lower, end, fixed, &limits, window);
        if summary.is_some() && !with_summary && cut > lower {
            // The history is cut: the summary stands for what was left out, and takes room.
            with_summary = true;
            fixed = pinned(true)?;
            cut = self.walk(lower, end, fixed, &limits, window);
        }
        let mut ranges = Vec::new();
        let mut start = cut;
        let mut tokens = fixed.0 + self.prefix[end] - self.prefix[cut];
        for (offset, entry) in self.entries[cut..end].iter().enumerate() {
            if self.skipped(entry, lower) {
                let at = cut + offset;
                if start < at {
                    ranges.push(start..at);
                }
                start = at + 1;
                if entry.link != ORPHAN && !entry.pinned {
                    // A result whose call the summary covers: in the running sum, not sent.
                    tokens -= u64::from(entry.tokens);
                }
            }
        }
        if start < end {
            ranges.push(start..end);
        }
        // The largest summary a view of this window can hold beside the system messages.
        let summary_room = (system < limits.messages)
            .then(|| {
                limits
                    .tokens
                    .checked_sub(system_tokens + u64::from(MESSAGE_OVERHEAD))
            })
            .flatten();
        Ok(ContextView {
            messages: &messages[..end],
            leading,
            pinned: self.system_at[leading.min(system)..system]
                .iter()
                .map(|&p| p as usize)
                .collect(),
            summary: summary.filter(|_| with_summary).map(|s| s.text),
            covered: lower,
            cut,
            ranges,
            tokens,
            ratio,
            unanswered: self.unanswered,
            summary_room,
        })
    }

    /// Whether the walk passes over the entry without keeping it: an orphan, a system message
    /// (pinned, counted apart) or a result whose call is at or before `lower`'s summary.
    fn skipped(&self, entry: &Entry, lower: usize) -> bool {
        entry.link == ORPHAN || entry.pinned || (entry.link as usize) < lower
    }

    /// The cut: the walk back from `end` keeps messages while they fit beside the `fixed`
    /// tokens and messages (system messages, summary), noting each safe position (one no kept
    /// message links before), then picks a safe position at or after the earliest that fits, as
    /// `window.cut` says.
    fn walk(
        &self,
        lower: usize,
        end: usize,
        fixed: (u64, usize),
        limits: &Limits,
        window: &ContextWindow,
    ) -> usize {
        let (mut tokens, mut messages) = fixed;
        let mut turns = 0usize;
        // The smallest link of the kept messages (at positions >= the walk's position).
        let mut lowest_link = u32::MAX;
        let mut safe = end;
        // Safe turn starts, newest first (the walk covers what is kept: O(kept)).
        let mut turn_starts: Vec<u32> = Vec::new();
        let mut tight = end;
        let mut stopped = false;
        let mut stopped_by_turns = false;
        for j in (lower..end).rev() {
            let entry = self.entries[j];
            if !self.skipped(&entry, lower) {
                let t = tokens + u64::from(entry.tokens);
                let t_turns = turns + usize::from(entry.turn);
                if t > limits.tokens || messages + 1 > limits.messages || t_turns > limits.turns {
                    stopped = true;
                    stopped_by_turns = t_turns > limits.turns;
                    break;
                }
                tokens = t;
                messages += 1;
                turns = t_turns;
                lowest_link = lowest_link.min(entry.link);
            }
            tight = j;
            if lowest_link as usize >= j {
                safe = j;
                if entry.turn {
                    turn_starts.push(j as u32);
                }
            }
        }
        let earliest_turn = turn_starts.last().map(|&q| q as usize);
        match window.cut {
            // Everything fits: nothing to cut.
            _ if !stopped => safe,
            // Out of turns: the view starts at a turn, not with the replies of the one before.
            Cut::Tight if !stopped_by_turns => safe,
            Cut::Chunked { parts } if limits.grid.is_some() => {
                let (in_tokens, size) = limits.grid.unwrap_or((true, 1));
                let chunk = (size / u64::from(parts.max(1))).max(1);
                let measure = |q: usize| if in_tokens { self.prefix[q] } else { q as u64 };
                let line = measure(tight).div_ceil(chunk) * chunk;
                turn_starts
                    .iter()
                    .rev()
                    .map(|&q| q as usize)
                    .find(|&q| measure(q) >= line)
                    .or(earliest_turn)
                    .unwrap_or(safe)
            }
            _ => earliest_turn.unwrap_or(safe),
        }
    }
}

/// How many of its latest views an index remembers, for calibration.
const RECENT: usize = 8;

/// A budget in the index's units: the token limit divided by the calibration factor.
struct Limits {
    tokens: u64,
    messages: usize,
    turns: usize,
    /// The chunk grid's metric (tokens or messages) and the budget in it.
    grid: Option<(bool, u64)>,
}

impl Limits {
    fn new(budget: &Budget, ratio: f64) -> Self {
        let tokens = budget.max_tokens.map_or(u64::MAX, |limit| {
            // The largest estimate whose calibrated count, rounded up, is within the limit.
            let mut estimate = (limit as f64 / ratio).floor() as u64;
            while estimate > 0 && (estimate as f64 * ratio).ceil() as u64 > limit {
                estimate -= 1;
            }
            estimate
        });
        // The grid's chunks are of the budget as given, not as calibrated, so that a change of
        // the calibration factor does not move the grid (and the cut with it).
        let grid = match (budget.max_tokens, budget.max_messages) {
            (Some(limit), _) => Some((true, limit)),
            (None, Some(n)) => Some((false, n as u64)),
            (None, None) => None,
        };
        Limits {
            tokens,
            messages: budget.max_messages.unwrap_or(usize::MAX),
            turns: budget.max_turns.unwrap_or(usize::MAX),
            grid,
        }
    }
}
