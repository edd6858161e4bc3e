//! Tool call ids rewritten for a provider that does not accept them, and back.

use super::report::{Action, Issue, Report};
use crate::message::{ContentBlock, Message};
use std::collections::{BTreeMap, BTreeSet};

/// The tool call ids a conversion rewrote, both ways Empty
/// when every id was sent unchanged.
///
/// Anthropic takes tool call ids matching `^[a-zA-Z0-9_-]+$` only, while other providers make
/// ids such as `functions.get_weather:0` (Kimi, some OpenAI-compatible servers). [`ToolIds`]
/// is the mapping one conversion used:
///
/// - an id the provider accepts is sent unchanged;
/// - any other id is sent as itself with each character outside `[a-zA-Z0-9_-]` replaced by
///   `_` (an empty id is `call`), followed by `_2`, `_3`... if that id is taken (by an id of
///   the conversation or by an earlier rewritten one), so two ids never become one;
/// - the same id is sent the same way everywhere in the conversation (its call and its
///   result), and the mapping depends only on the conversation, so the request's bytes are
///   stable.
///
/// [`to_anthropic`](super::to_anthropic) returns the mapping in
/// [`Converted::tool_ids`](super::Converted::tool_ids), with one
/// [`Issue::ToolCallIdRewritten`] note per rewritten id;
/// [`from_anthropic`](super::from_anthropic) maps the ids of a response back when given it.
///
/// ```
/// use agentstate::message::{Message, Role, ToolCall};
/// use agentstate::providers::anthropic::{from_anthropic, to_anthropic};
/// use serde_json::json;
///
/// let messages = vec![
///     Message::text_message("Weather?", Role::User),
///     Message::text_message("", Role::Assistant)
///         .with_tool_calls(vec![ToolCall::new("functions.get_weather:0", "get_weather", json!({}))]),
///     Message::tool_result("functions.get_weather:0", "Sunny"),
/// ];
/// let converted = to_anthropic(&messages, None);
/// let body = &converted.request;
/// assert_eq!(body["messages"][1]["content"][0]["id"], "functions_get_weather_0");
/// assert_eq!(body["messages"][2]["content"][0]["tool_use_id"], "functions_get_weather_0");
/// assert_eq!(converted.tool_ids.sent("functions.get_weather:0"), "functions_get_weather_0");
/// assert_eq!(converted.tool_ids.original("functions_get_weather_0"), "functions.get_weather:0");
///
/// // A response that uses a sent id (the turn sent back) gets the original one.
/// let response = json!({"content": [{"type": "tool_use", "id": "functions_get_weather_0",
///                                    "name": "get_weather", "input": {}}]});
/// let back = from_anthropic(&response, Some(&converted.tool_ids))?.message;
/// assert_eq!(back.tool_calls()[0].id, "functions.get_weather:0");
/// # Ok::<(), agentstate::providers::ResponseError>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolIds {
    /// Original id to sent id.
    sent: BTreeMap<String, String>,
    /// Sent id to original id.
    original: BTreeMap<String, String>,
}

/// Every use of a tool call id in a conversation, in order: (id, message, block), the block
/// `None` for a `tools_calls` entry.
fn uses(messages: &[Message]) -> impl Iterator<Item = (&str, usize, Option<usize>)> {
    messages.iter().enumerate().flat_map(|(index, message)| {
        let blocks = message
            .content
            .iter()
            .enumerate()
            .filter_map(move |(block, content)| {
                let id = match content {
                    ContentBlock::ToolCall(b) => &b.id,
                    ContentBlock::RemoteToolCall(b) => &b.id,
                    ContentBlock::ToolResult(b) => &b.call_id,
                    _ => return None,
                };
                Some((id.as_str(), index, Some(block)))
            });
        let entries = message
            .tool_calls()
            .iter()
            .map(move |call| (call.id.as_str(), index, None));
        blocks.chain(entries)
    })
}

/// Whether Anthropic accepts a tool call id: `^[a-zA-Z0-9_-]+$`.
fn anthropic_accepts(id: &str) -> bool {
    !id.is_empty()
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

impl ToolIds {
    /// The mapping for Anthropic of a conversation's tool call ids (of call blocks,
    /// `tools_calls` entries and tool results), with a note at the first use of each
    /// rewritten id.
    pub(super) fn anthropic(messages: &[Message], report: &mut Report) -> ToolIds {
        let mut ids = ToolIds::default();
        // The common case, every id accepted, allocates nothing.
        if uses(messages).all(|(id, _, _)| anthropic_accepts(id)) {
            return ids;
        }
        let mut taken: BTreeSet<String> = uses(messages)
            .filter(|(id, _, _)| anthropic_accepts(id))
            .map(|(id, _, _)| id.to_owned())
            .collect();
        for (id, index, block) in uses(messages) {
            if anthropic_accepts(id) || ids.sent.contains_key(id) {
                continue;
            }
            let mut base: String = id
                .chars()
                .map(|c| {
                    if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                        c
                    } else {
                        '_'
                    }
                })
                .collect();
            if base.is_empty() {
                base.push_str("call");
            }
            let mut sent = base.clone();
            let mut n = 2u64;
            while taken.contains(&sent) {
                sent = format!("{base}_{n}");
                n += 1;
            }
            taken.insert(sent.clone());
            report.push(
                Some(index),
                block,
                Issue::ToolCallIdRewritten {
                    id: id.to_owned(),
                    sent: sent.clone(),
                },
                Action::Rewritten,
            );
            ids.original.insert(sent.clone(), id.to_owned());
            ids.sent.insert(id.to_owned(), sent);
        }
        ids
    }

    /// Whether no id was rewritten.
    ///
    /// ```
    /// use agentstate::providers::ToolIds;
    ///
    /// assert!(ToolIds::default().is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.sent.is_empty()
    }

    /// The id sent for an original id (the id itself when it was not rewritten).
    ///
    /// ```
    /// use agentstate::providers::ToolIds;
    ///
    /// assert_eq!(ToolIds::default().sent("call_1"), "call_1");
    /// ```
    pub fn sent<'a>(&'a self, id: &'a str) -> &'a str {
        self.sent.get(id).map_or(id, String::as_str)
    }

    /// The original id of a sent id (the id itself when it was not rewritten).
    ///
    /// ```
    /// use agentstate::providers::ToolIds;
    ///
    /// assert_eq!(ToolIds::default().original("toolu_01"), "toolu_01");
    /// ```
    pub fn original<'a>(&'a self, sent: &'a str) -> &'a str {
        self.original.get(sent).map_or(sent, String::as_str)
    }

    /// The rewritten ids, as (original, sent) pairs in the originals' order.
    ///
    /// ```
    /// use agentstate::message::{Message, Role, ToolCall};
    /// use agentstate::providers::anthropic::to_anthropic;
    /// use serde_json::json;
    ///
    /// let messages = [Message::text_message("", Role::Assistant)
    ///     .with_tool_calls(vec![ToolCall::new("a.b", "f", json!({})), ToolCall::new("a_b", "f", json!({}))])];
    /// let ids = to_anthropic(&messages, None).tool_ids;
    /// // `a_b` is taken by the second call: the first is sent as `a_b_2`.
    /// assert_eq!(ids.iter().collect::<Vec<_>>(), [("a.b", "a_b_2")]);
    /// ```
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.sent.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }
}
