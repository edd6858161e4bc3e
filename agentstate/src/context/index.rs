//! [`ContextIndex`]: what a view needs to know of each message, computed once per message and
//! extended as the history grows.

use super::pairing::{self, Unanswered};
use super::tokens::{Estimate, TokenCounter};
use super::window::ContextWindow;
use crate::message::ContentBlock;
use crate::message::{Message, MessageId, Role};
use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasher, Hash, Hasher, RandomState};

/// A link value meaning "answers no call in the history": the message is left out of views.
pub(crate) const ORPHAN: u32 = u32::MAX;

/// What the index keeps of one message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Entry {
    /// The message's tokens under the index's counter.
    pub(crate) tokens: u32,
    /// The earliest position this message cannot be sent without ([`ORPHAN`]: not sendable).
    pub(crate) link: u32,
    /// A user message: the start of a turn.
    pub(crate) turn: bool,
    /// A system message: sent by every view, before the history (see [`ContextWindow`]).
    pub(crate) pinned: bool,
}

/// The token counts and tool-call pairing of a history, kept beside it and extended
/// incrementally, so that a view costs O(what it keeps), not O(history).
///
/// For every message the index keeps its token count, whether it starts a turn, and its *link*:
/// for a tool message, the position of the earliest assistant message whose tool call it answers
/// (or none: an orphan); for any other message, its own position. A cut before position `q` is
/// *safe* when no message at or after `q` links to a message before `q`: no tool result loses
/// its call and no assistant message loses a result. The index also keeps the running token sum,
/// which makes the chunk grid of [`Cut::Chunked`](crate::context::Cut::Chunked) independent of where the
/// history ends.
///
/// Keep one index per history (for instance next to the state, or in the node that calls the
/// model) and pass it the history each time: [`sync`](ContextIndex::sync) indexes the messages
/// appended since the last call. The index notices a history that shrank or whose last indexed
/// message changed (a `replace_messages`, a rewind) and re-indexes it. It also notices a message
/// edited in place under the same id and position (`upsert_messages`, a time-travel
/// `update_as`): it keeps a fingerprint of each message it indexed (its id, role, blocks, call
/// and result ids, and each text's length and ends, not the whole text) and re-indexes from the
/// first changed message, reusing the token counts of the unchanged ones. A view checks the
/// messages it reads (all of them when it reads a tool message that answers nothing, which an
/// edit of an earlier message may have answered); [`sync`](ContextIndex::sync) checks every
/// message.
///
/// Pairing follows the tool messages' `tool_result` blocks: a tool message answers the latest
/// earlier assistant message that made a call with the result's `call_id` (in `tools_calls` or as
/// a `tool_call` block). A tool message with no `tool_result` block answers no call (providers
/// get it as text: a user message), but belongs to the run of tool messages it is in, as
/// AgentFlow's `remove_tool_messages` sees it (system messages, which views send first, do not
/// end a run): it is sent with that run's assistant message, after the results of its calls,
/// and the calls still without a result then are unanswered (a stub each, by default). A tool message that answers nothing, or
/// only calls already answered (a duplicate), is an orphan: no view includes it. Calls left
/// without a result once another message follows are unanswered: see
/// [`Unanswered`] for what views send for them.
///
/// ```
/// use agentstate::context::{ContextIndex, ContextWindow};
/// use agentstate::message::{Message, Role};
///
/// let mut history = vec![Message::text_message("Hi", Role::User)];
/// let mut index = ContextIndex::default();
/// index.sync(&history);
/// history.push(Message::text_message("Hello! How can I help?", Role::Assistant));
/// index.sync(&history); // indexes only the new message
/// assert_eq!(index.len(), 2);
/// assert_eq!(index.total_tokens(), index.tokens(0) as u64 + index.tokens(1) as u64);
/// ```
#[derive(Debug, Clone)]
pub struct ContextIndex<C = Estimate> {
    counter: C,
    pub(crate) entries: Vec<Entry>,
    /// `prefix[i]`: the tokens of messages `0..i`; one longer than `entries`.
    pub(crate) prefix: Vec<u64>,
    /// The number of leading system messages.
    pub(crate) leading_system: usize,
    /// The positions of all system messages, and `system_prefix[k]` the tokens of the first
    /// `k` of them.
    pub(crate) system_at: Vec<u32>,
    pub(crate) system_prefix: Vec<u64>,
    /// Each call id to the latest assistant message that made it, and whether a result
    /// answered it there.
    calls: HashMap<Box<str>, (u32, bool)>,
    /// The assistant message with tool calls whose run of tool messages is still open, and
    /// its call ids not yet charged for stub results.
    run_head: Option<u32>,
    run_calls: Vec<Box<str>>,
    /// What views do with unanswered calls, and the tokens of one stub result.
    pub(crate) unanswered: Unanswered,
    stub_tokens: u32,
    /// The assistant messages charged for stub results (closed with unanswered calls).
    charged: HashSet<u32>,
    /// Each message id's hash to the last position holding that id.
    ids: HashMap<u64, u32>,
    hasher: RandomState,
    /// The id hashes of the first and last indexed messages, to notice a replaced history.
    ends: Option<(u64, u64)>,
    /// Each indexed message's fingerprint ([`ContextIndex::fingerprint`]) and token count
    /// (without stub results), to notice an edit in place and re-index after it cheaply.
    prints: Vec<u64>,
    counts: Vec<u32>,
    /// The latest assistant message that reports its call's token usage.
    pub(crate) last_usage: Option<usize>,
    /// The latest views made: the history length, the window and the estimate, so that the
    /// usage a provider reports for a call can be set against the estimate of what was sent.
    pub(crate) recent: Vec<(usize, ContextWindow, u64)>,
}

impl Default for ContextIndex<Estimate> {
    fn default() -> Self {
        ContextIndex::new(Estimate::default())
    }
}

impl<C: TokenCounter> ContextIndex<C> {
    /// An empty index counting tokens with `counter`.
    pub fn new(counter: C) -> Self {
        let stub_tokens = counter.count_message(&Unanswered::stub(""));
        ContextIndex {
            counter,
            entries: Vec::new(),
            prefix: vec![0],
            leading_system: 0,
            system_at: Vec::new(),
            system_prefix: vec![0],
            calls: HashMap::new(),
            run_head: None,
            run_calls: Vec::new(),
            unanswered: Unanswered::default(),
            stub_tokens,
            charged: HashSet::new(),
            ids: HashMap::new(),
            hasher: RandomState::new(),
            ends: None,
            prints: Vec::new(),
            counts: Vec::new(),
            last_usage: None,
            recent: Vec::new(),
        }
    }

    /// This index, with views treating unanswered tool calls by `policy` (default
    /// [`Unanswered::Stub`]). Forgets what was indexed: the policy changes the counts.
    pub fn with_unanswered(mut self, policy: Unanswered) -> Self {
        self.unanswered = policy;
        self.clear();
        self
    }

    /// The token counter.
    pub fn counter(&self) -> &C {
        &self.counter
    }

    /// How many messages are indexed.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether no message is indexed.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The tokens of the message at `position` (0 past the end); for an assistant message
    /// whose calls went unanswered, with the stub results sent for them.
    pub fn tokens(&self, position: usize) -> u32 {
        self.entries.get(position).map_or(0, |e| e.tokens)
    }

    /// The tokens of every indexed message that a view may send (orphans and duplicates left
    /// out).
    pub fn total_tokens(&self) -> u64 {
        self.prefix.last().copied().unwrap_or(0) + self.system_prefix.last().copied().unwrap_or(0)
    }

    /// Whether the message at `position` is a tool message that answers no call (no view
    /// includes it).
    pub fn is_orphan(&self, position: usize) -> bool {
        self.entries.get(position).is_some_and(|e| e.link == ORPHAN)
    }

    /// Forgets every message, to re-index the history on the next [`sync`](ContextIndex::sync).
    pub fn clear(&mut self) {
        self.entries.clear();
        self.prefix.truncate(1);
        self.leading_system = 0;
        self.system_at.clear();
        self.system_prefix.truncate(1);
        self.calls.clear();
        self.run_head = None;
        self.run_calls.clear();
        self.charged.clear();
        self.ids.clear();
        self.ends = None;
        self.prints.clear();
        self.counts.clear();
        self.last_usage = None;
        self.recent.clear();
    }

    fn hash_id(&self, id: &MessageId) -> u64 {
        self.hasher.hash_one(id)
    }

    /// Brings the index up to date with `messages`: indexes the messages appended since the last
    /// call (O(new messages)), re-indexes all of them if the history was replaced, and
    /// re-indexes from the first message edited in place since it was indexed (checking each
    /// message's fingerprint: O(messages) of cheap work, not of text; a view checks only what it
    /// reads).
    ///
    /// ```
    /// use agentstate::context::{ContextIndex, ContextWindow};
    /// use agentstate::message::{Message, Role, ToolCall};
    /// use serde_json::json;
    ///
    /// let mut history = vec![
    ///     Message::text_message("Weather in Paris?", Role::User),
    ///     Message::text_message("Let me look.", Role::Assistant).with_id("a1"),
    /// ];
    /// let mut index = ContextIndex::default();
    /// index.sync(&history);
    /// // The assistant message is edited in place (same id): it now calls a tool...
    /// history[1] = history[1].clone().with_tool_calls(vec![ToolCall::new("c1", "weather", json!({}))]);
    /// history.push(Message::tool_result("c1", "Sunny"));
    /// index.sync(&history);
    /// // ...and its result is paired with it, not left out as answering nothing.
    /// assert!(!index.is_orphan(2));
    /// assert_eq!(index.tokens(1), agentstate::context::TokenCounter::count_message(index.counter(), &history[1]));
    /// ```
    pub fn sync(&mut self, messages: &[Message]) {
        self.sync_appended(messages);
        if let Some(from) = self.first_changed(messages, 0, self.entries.len()) {
            self.reindex_from(messages, from);
        }
    }

    /// [`sync`](ContextIndex::sync) without the check for edits in place.
    pub(crate) fn sync_appended(&mut self, messages: &[Message]) {
        let n = self.entries.len();
        let replaced = match self.ends {
            None => false,
            Some((first, last)) => {
                messages.len() < n
                    || self.hash_id(&messages[0].message_id) != first
                    || self.hash_id(&messages[n - 1].message_id) != last
            }
        };
        if replaced {
            self.clear();
        }
        for message in &messages[self.entries.len()..] {
            self.push(message, None);
        }
        self.set_ends(messages);
    }

    fn set_ends(&mut self, messages: &[Message]) {
        if let (Some(first), Some(last)) = (messages.first(), messages.last()) {
            self.ends = Some((
                self.hash_id(&first.message_id),
                self.hash_id(&last.message_id),
            ));
        }
    }

    /// A cheap fingerprint of what the index keeps of `message`: its id, role, block kinds,
    /// call and result ids, and the length and first and last bytes of each text (not the whole
    /// text: an edit that keeps every length and both ends is not noticed).
    fn fingerprint(&self, message: &Message) -> u64 {
        fn text(h: &mut impl Hasher, text: &str) {
            let bytes = text.as_bytes();
            h.write_usize(bytes.len());
            h.write(&bytes[..bytes.len().min(16)]);
            h.write(&bytes[bytes.len().saturating_sub(16)..]);
        }
        let mut h = self.hasher.build_hasher();
        message.message_id.hash(&mut h);
        message.role.hash(&mut h);
        h.write_usize(message.content.len());
        for block in &message.content {
            std::mem::discriminant(block).hash(&mut h);
            match block {
                ContentBlock::Text(t) => text(&mut h, &t.text),
                ContentBlock::ToolResult(r) => {
                    h.write(r.call_id.as_bytes());
                    h.write_u8(u8::from(r.is_error));
                    text(&mut h, r.output.as_json());
                }
                ContentBlock::ToolCall(c) => {
                    h.write(c.id.as_bytes());
                    h.write(c.name.as_bytes());
                }
                ContentBlock::Reasoning(r) => text(&mut h, &r.summary),
                ContentBlock::Error(e) => text(&mut h, &e.message),
                ContentBlock::Document(d) => text(&mut h, d.text.as_deref().unwrap_or("")),
                _ => {}
            }
        }
        for call in message.tool_calls() {
            h.write(call.id().as_bytes());
            h.write(call.name().as_bytes());
            text(&mut h, &call.function.arguments);
        }
        h.write_u8(u8::from(message.usages.is_some()));
        h.finish()
    }

    /// The first indexed position in `from..end` (or among the system messages before `end`)
    /// whose message changed since it was indexed. When that span holds a tool message that
    /// answers nothing, the messages before `from` are checked too: an edit there may have
    /// made the call it answers.
    pub(crate) fn first_changed(
        &self,
        messages: &[Message],
        from: usize,
        end: usize,
    ) -> Option<usize> {
        let end = end.min(self.entries.len()).min(messages.len());
        let from = from.min(end);
        let changed = |p: usize| self.prints[p] != self.fingerprint(&messages[p]);
        let system = self.system_at.partition_point(|&p| (p as usize) < end);
        let pinned = self.system_at[..system]
            .iter()
            .map(|&p| p as usize)
            .find(|&p| changed(p));
        let span = (from..end).find(|&p| changed(p));
        let earlier = if span.is_none()
            && from > 0
            && self.entries[from..end].iter().any(|e| e.link == ORPHAN)
        {
            (0..from).find(|&p| changed(p))
        } else {
            None
        };
        [pinned, span, earlier].into_iter().flatten().min()
    }

    /// Re-indexes `messages` from position `from`, whose message was edited in place: the
    /// pairing is rebuilt, and the token counts of the messages whose fingerprints did not
    /// change are reused (not counted again).
    pub(crate) fn reindex_from(&mut self, messages: &[Message], from: usize) {
        let prints = std::mem::take(&mut self.prints);
        let counts = std::mem::take(&mut self.counts);
        self.clear();
        for (p, message) in messages.iter().enumerate() {
            let kept = (p < from || prints.get(p) == Some(&self.fingerprint(message)))
                .then(|| counts.get(p).copied())
                .flatten();
            self.push(message, kept);
        }
        self.set_ends(messages);
    }

    /// Indexes one more message, whose token count is `tokens` when already known.
    fn push(&mut self, message: &Message, tokens: Option<u32>) {
        let position = u32::try_from(self.entries.len()).unwrap_or(ORPHAN - 1);
        let tokens = tokens.unwrap_or_else(|| self.counter.count_message(message));
        self.counts.push(tokens);
        self.prints.push(self.fingerprint(message));
        let link = match message.role {
            Role::Tool => {
                let mut link = ORPHAN;
                let mut has_results = false;
                for result in message.tool_results() {
                    has_results = true;
                    // A call answered once: a second result for it is a duplicate.
                    if let Some((head, answered)) = self.calls.get_mut(result.call_id.as_str()) {
                        if !*answered {
                            *answered = true;
                            link = link.min(*head);
                            let head = *head;
                            self.uncharge(head);
                        }
                    }
                }
                if has_results {
                    link
                } else {
                    // A tool message without result blocks answers no call: it is sent in its
                    // run, after the results and stubs of the calls, which are unanswered from
                    // here on unless a result comes later.
                    self.charge_open();
                    self.run_head.unwrap_or(ORPHAN)
                }
            }
            Role::Assistant => {
                self.close_run();
                let ids = pairing::call_ids(message);
                for &id in &ids {
                    self.calls.insert(id.into(), (position, false));
                }
                self.run_head = (!ids.is_empty()).then_some(position);
                self.run_calls = ids.into_iter().map(Box::from).collect();
                position
            }
            Role::User => {
                self.close_run();
                position
            }
            // Sent before the history, a system message does not interrupt a run.
            Role::System => position,
        };
        let pinned = message.role == Role::System;
        if pinned {
            if self.leading_system == self.entries.len() {
                self.leading_system += 1;
            }
            self.system_at.push(position);
            let total = self.system_prefix.last().copied().unwrap_or(0);
            self.system_prefix.push(total + u64::from(tokens));
        }
        // Orphans are never sent, system messages are counted apart.
        let counted = if link == ORPHAN || pinned { 0 } else { tokens };
        let total = self.prefix.last().copied().unwrap_or(0) + u64::from(counted);
        self.entries.push(Entry {
            tokens,
            link,
            turn: message.role == Role::User,
            pinned,
        });
        self.prefix.push(total);
        if message.role == Role::Assistant && message.usages.is_some() {
            self.last_usage = Some(self.entries.len() - 1);
        }
        let hash = self.hash_id(&message.message_id);
        self.ids.insert(hash, position);
    }

    /// Closes the open run of tool messages: a message other than a tool message follows the
    /// calls, so the ones still without a result are unanswered ([`ContextIndex::charge_open`]).
    fn close_run(&mut self) {
        self.charge_open();
        self.run_head = None;
    }

    /// Charges the open run's calls still without a result for the stubs views send for them,
    /// on the assistant message ([`Unanswered::Stub`]): something other than a result follows
    /// them.
    fn charge_open(&mut self) {
        let Some(head) = self.run_head else {
            return;
        };
        let calls = std::mem::take(&mut self.run_calls);
        if self.unanswered != Unanswered::Stub {
            return;
        }
        let open = calls
            .iter()
            .filter(|id| self.calls.get(&**id) == Some(&(head, false)))
            .count();
        if open > 0 {
            self.charged.insert(head);
            self.adjust(head, i64::from(self.stub_tokens) * open as i64);
        }
    }

    /// A late result answered a call of `head`: one stub less, if it was charged.
    fn uncharge(&mut self, head: u32) {
        if self.charged.contains(&head) {
            self.adjust(head, -i64::from(self.stub_tokens));
        }
    }

    /// Adds `delta` tokens to the message at `head` (O(messages since it): usually a few).
    fn adjust(&mut self, head: u32, delta: i64) {
        let head = head as usize;
        let entry = &mut self.entries[head];
        entry.tokens = (i64::from(entry.tokens) + delta).clamp(0, i64::from(u32::MAX)) as u32;
        for sum in &mut self.prefix[head + 1..] {
            *sum = (*sum as i64 + delta).max(0) as u64;
        }
    }

    /// The last position of a message with id `id`, if indexed.
    pub fn position_of(&self, messages: &[Message], id: &MessageId) -> Option<usize> {
        let indexed = &messages[..self.entries.len().min(messages.len())];
        match self.ids.get(&self.hash_id(id)) {
            Some(&p) if indexed.get(p as usize).is_some_and(|m| &m.message_id == id) => {
                Some(p as usize)
            }
            // A hash collision (or a stale index): look the id up the slow way.
            Some(_) => indexed.iter().rposition(|m| &m.message_id == id),
            None => None,
        }
    }
}
