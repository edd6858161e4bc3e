//! Tool calls and results as providers require them: [`Unanswered`], the policy for calls
//! that never got a result, and the sequence of messages a view sends.

use crate::message::{ContentBlock, Message, Role, ToolResultBlock};
use std::borrow::Cow;
use std::collections::{HashMap, HashSet};

/// What a view does with an assistant message's tool calls that never got a result, once the
/// conversation moved on.
///
/// OpenAI (Chat Completions) requires every assistant message with `tool_calls` to be followed
/// directly by one `tool` message per call id, and every `tool` message to answer a call of
/// that assistant message; Anthropic requires every `tool_use` block to be answered by a
/// `tool_result` block in the very next (user) message, and every `tool_result` to answer a
/// `tool_use` of the message before. Both reject the request otherwise (HTTP 400). Gemini is
/// lenient but pairs results by position. So a view sends, for each assistant message with
/// calls:
///
/// - the message, then right after it the tool messages answering its calls, in the order they
///   were stored: also a result stored after an interleaved message (a *late* result: the user
///   spoke before the tool answered) is moved up to its call;
/// - each call answered once: a second result for the same call (a *duplicate*) is left out,
///   the first one is sent;
/// - calls with no result anywhere in the history are *unanswered* once any other message
///   follows them (also a tool message without a result block: it answers no call, and is sent
///   as text after the results), and [`Unanswered`] says what is done: by default each gets a stub result
///   saying so ([`Unanswered::Stub`]); [`Unanswered::DropCalls`] sends the assistant message
///   without them. Only the newest assistant message's calls may still be *pending* (nothing
///   but tool messages after it: its tools are running), and are sent as they are.
///
/// ```
/// use agentstate::context::{ContextIndex, ContextWindow, Unanswered};
/// use agentstate::message::{Message, Role, ToolCall};
/// use serde_json::json;
///
/// let history = vec![
///     Message::text_message("Book a table.", Role::User),
///     Message::text_message("Let me check.", Role::Assistant)
///         .with_tool_calls(vec![ToolCall::new("c1", "book", json!({"seats": 2}))]),
///     Message::text_message("Never mind.", Role::User),
///     Message::text_message("All right.", Role::Assistant),
/// ];
/// // The default: a stub result closes the call.
/// let mut index = ContextIndex::default();
/// let view = index.view(&history, &ContextWindow::messages(10))?;
/// let sent = view.messages();
/// assert_eq!(sent.len(), 5);
/// assert_eq!(sent[2].role, Role::Tool);
/// assert_eq!(sent[2].text(), Unanswered::STUB_TEXT);
/// // Or the call is dropped: the assistant message keeps its text.
/// let mut index = ContextIndex::default().with_unanswered(Unanswered::DropCalls);
/// let view = index.view(&history, &ContextWindow::messages(10))?;
/// let sent = view.messages();
/// assert_eq!(sent.len(), 4);
/// assert!(sent[1].tool_calls().is_empty() && sent[1].tool_call_blocks().next().is_none());
/// assert_eq!(sent[1].text(), "Let me check.");
/// # Ok::<(), agentstate::context::ContextError>(())
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum Unanswered {
    /// Each unanswered call gets a failed tool result with [`Unanswered::STUB_TEXT`], right
    /// after its call: the model sees that it called the tool and that no answer came (as
    /// LangChain answers a rejected call with a `ToolMessage`). The default. Its tokens are
    /// counted in the view.
    #[default]
    Stub,
    /// The unanswered calls are left out of the assistant message sent (its text and answered
    /// calls stay; a message left with nothing is not sent). The calls' tokens stay counted:
    /// the view's count errs high by them.
    DropCalls,
}

impl Unanswered {
    /// The output of a stub result.
    pub const STUB_TEXT: &'static str = "No result: this tool call was not completed.";

    /// The stub result sent for unanswered call `call_id`: a tool message with one failed
    /// result, id `{call_id}-unanswered`.
    ///
    /// ```
    /// use agentstate::context::Unanswered;
    ///
    /// let stub = Unanswered::stub("c1");
    /// let result = stub.tool_results().next().unwrap();
    /// assert!(result.is_error && result.call_id == "c1");
    /// assert_eq!(stub.message_id, agentstate::message::MessageId::from("c1-unanswered"));
    /// ```
    pub fn stub(call_id: &str) -> Message {
        Message::tool_message(vec![ContentBlock::ToolResult(ToolResultBlock::failed(
            call_id,
            Unanswered::STUB_TEXT,
        ))])
        .with_id(format!("{call_id}-unanswered"))
    }
}

/// The call ids of an assistant message, each once, in order (`tools_calls`, then `tool_call`
/// blocks not already there).
pub(crate) fn call_ids(message: &Message) -> Vec<&str> {
    let mut ids: Vec<&str> = Vec::new();
    let calls = message.tool_calls().iter().map(|c| c.id());
    for id in calls.chain(message.tool_call_blocks().map(|b| b.id.as_str())) {
        if !ids.contains(&id) {
            ids.push(id);
        }
    }
    ids
}

/// What is sent of the kept `positions` of `messages` (in order, already free of orphans),
/// paired as [`Unanswered`] describes.
pub(crate) fn paired<'a>(
    messages: &'a [Message],
    positions: impl Iterator<Item = usize> + Clone,
    policy: Unanswered,
) -> Vec<Cow<'a, Message>> {
    // Each result block to the latest kept assistant message that made its call; a second
    // result for one call is a duplicate.
    let mut heads: HashMap<&'a str, usize> = HashMap::new();
    let mut answered: HashSet<(usize, &'a str)> = HashSet::new();
    // Per assistant message: the tool messages answering it, with the result blocks that
    // answer it when not all of them do.
    type Part = Option<Vec<usize>>;
    let mut results: HashMap<usize, Vec<(usize, Part)>> = HashMap::new();
    let mut run_head: Option<usize> = None;
    let mut last_not_tool = None;
    for p in positions.clone() {
        let m = &messages[p];
        match m.role {
            Role::Assistant => {
                let ids = call_ids(m);
                for &id in &ids {
                    heads.insert(id, p);
                }
                run_head = (!ids.is_empty()).then_some(p);
                last_not_tool = Some(p);
            }
            Role::Tool => {
                // The blocks of this message each assistant message takes, in block order.
                let mut taken: Vec<(usize, Vec<usize>)> = Vec::new();
                let mut blocks = 0;
                for (b, block) in m.content.iter().enumerate() {
                    let ContentBlock::ToolResult(r) = block else {
                        continue;
                    };
                    blocks += 1;
                    let Some(&head) = heads.get(r.call_id.as_str()) else {
                        continue;
                    };
                    if answered.insert((head, r.call_id.as_str())) {
                        match taken.iter_mut().find(|(h, _)| *h == head) {
                            Some((_, mine)) => mine.push(b),
                            None => taken.push((head, vec![b])),
                        }
                    }
                }
                // A tool message without result blocks answers no call: the calls before it
                // are no longer pending.
                if blocks == 0 && run_head.is_some() {
                    last_not_tool = Some(p);
                }
                let whole = taken.len() == 1 && taken[0].1.len() == blocks;
                for (head, mine) in taken {
                    let part = (!whole).then_some(mine);
                    results.entry(head).or_default().push((p, part));
                }
            }
            Role::User | Role::System => {
                run_head = None;
                last_not_tool = Some(p);
            }
        }
    }
    let mut out = Vec::new();
    for p in positions {
        let m = &messages[p];
        match m.role {
            Role::Tool => {
                // Results were sent with their call; tool messages without result blocks stay
                // in their run.
                if m.tool_results().next().is_none() {
                    out.push(Cow::Borrowed(m));
                }
            }
            Role::Assistant => {
                let ids = call_ids(m);
                if ids.is_empty() {
                    out.push(Cow::Borrowed(m));
                    continue;
                }
                let pending = last_not_tool == Some(p);
                let unanswered: Vec<&str> = if pending {
                    Vec::new()
                } else {
                    ids.iter()
                        .copied()
                        .filter(|id| !answered.contains(&(p, *id)))
                        .collect()
                };
                match policy {
                    Unanswered::DropCalls if !unanswered.is_empty() => {
                        if let Some(trimmed) = without_calls(m, &unanswered) {
                            out.push(Cow::Owned(trimmed));
                        }
                    }
                    _ => out.push(Cow::Borrowed(m)),
                }
                for (q, part) in results.get(&p).map_or(&[][..], Vec::as_slice) {
                    let tool = &messages[*q];
                    match part {
                        None => out.push(Cow::Borrowed(tool)),
                        Some(blocks) => {
                            let mut copy = tool.clone();
                            let mut b = 0;
                            copy.content.retain(|block| {
                                b += 1;
                                !matches!(block, ContentBlock::ToolResult(_))
                                    || blocks.contains(&(b - 1))
                            });
                            out.push(Cow::Owned(copy));
                        }
                    }
                }
                if policy == Unanswered::Stub {
                    out.extend(unanswered.iter().map(|id| Cow::Owned(Unanswered::stub(id))));
                }
            }
            Role::User | Role::System => out.push(Cow::Borrowed(m)),
        }
    }
    out
}

/// `message` without the calls `ids`; `None` when nothing would be left to send.
fn without_calls(message: &Message, ids: &[&str]) -> Option<Message> {
    let mut copy = message.clone();
    copy.content.retain(
        |block| !matches!(block, ContentBlock::ToolCall(c) if ids.contains(&c.id.as_str())),
    );
    if let Some(calls) = &mut copy.tools_calls {
        calls.retain(|c| !ids.contains(&c.id()));
        if calls.is_empty() {
            copy.tools_calls = None;
        }
    }
    let empty = copy.tools_calls.is_none()
        && copy
            .content
            .iter()
            .all(|b| b.as_text().is_some_and(str::is_empty));
    (!empty).then_some(copy)
}
