//! Message reducers: AgentFlow's `add_messages`, `replace_messages` and `append_items`, the
//! `remove_tool_messages` helper, and LangGraph's message semantics as `upsert_messages`.

use super::{Merges, Reducer, ReducerInfo};
use crate::collections::KeyedList;
use crate::error::ReduceError;
use crate::keys::{ById, HasId};
use crate::message::{Message, MessageId, Role};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::collections::{HashMap, HashSet};

/// `add_messages` (AgentFlow): appends the update's messages whose `message_id` is not among the
/// *existing* messages' ids and that are not `delta` messages.
///
/// Exactly AgentFlow 0.10.1:
/// - no update by id: a message whose id already exists is dropped even if its content changed;
/// - duplicates inside the update are all kept (only existing ids are checked);
/// - delta messages in the update are dropped; deltas or duplicates already in the list stay;
/// - ids `1` and `"1"` are different ids.
///
/// On a [`MessageList`](crate::collections::MessageList) a merge of k messages costs O(k).
///
/// ```
/// use agentstate::message::{Message, Role};
/// use agentstate::reducers::{AddMessages, Reducer};
///
/// let hi = Message::text_message("hi", Role::User).with_id("m1");
/// let mut context = vec![hi.clone()];
/// let edited = Message::text_message("hello", Role::User).with_id("m1");
/// let answer = Message::text_message("hey!", Role::Assistant).with_id("m2");
/// AddMessages.reduce(&mut context, vec![edited, answer])?;
/// assert_eq!(context.len(), 2);
/// assert_eq!(context[0], hi, "an existing id is never updated");
/// # Ok::<(), agentstate::ReduceError>(())
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AddMessages;

/// `append_items` (AgentFlow): appends the update's items whose [`HasId`] id is not among the
/// existing items' ids. As in AgentFlow, only existing ids are checked: duplicates inside the
/// update are all kept.
///
/// ```
/// use agentstate::reducers::{AppendItems, HasId, Reducer};
///
/// #[derive(Debug, PartialEq)]
/// struct Finding { id: u32 }
/// impl HasId for Finding {
///     type Id = u32;
///     fn id(&self) -> &u32 { &self.id }
/// }
///
/// let mut findings = vec![Finding { id: 1 }];
/// AppendItems.reduce(&mut findings, vec![Finding { id: 2 }, Finding { id: 1 }])?;
/// assert_eq!(findings, [Finding { id: 1 }, Finding { id: 2 }]);
/// # Ok::<(), agentstate::ReduceError>(())
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AppendItems;

/// `replace_messages` (AgentFlow): the update replaces the whole message list.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReplaceMessages;

/// `upsert_messages`: LangGraph's `add_messages` semantics.
///
/// - a message whose id exists replaces it in place (its position is kept);
/// - a new id is appended; a new id repeated inside one update collapses to its last message,
///   at the position of its first;
/// - [`MessageUpdate::Remove`] deletes every message with that id; removing an id that does not
///   exist (before or earlier in the same update) is a `reducer_error`, and nothing is merged;
/// - [`MessageUpdate::RemoveAll`] clears the list: the list becomes what follows the update's
///   last remove-all marker, as LangGraph makes it: those messages in order, unmerged (a repeated
///   id is kept twice); a removal there drops the messages with its id before it, and is an
///   error if there are none (LangGraph would keep the removal itself in the list).
///
/// On a [`MessageList`](crate::collections::MessageList), replacing and appending k messages
/// cost O(k); a removal rewrites the list once (O(n)) however many ids it removes.
///
/// ```
/// use agentstate::message::{Message, Role};
/// use agentstate::reducers::{MessageUpdate, Reducer, UpsertMessages};
///
/// let mut context = vec![
///     Message::text_message("draft", Role::Assistant).with_id("a"),
///     Message::text_message("tmp", Role::Assistant).with_id("b"),
/// ];
/// UpsertMessages.reduce(&mut context, vec![
///     Message::text_message("final", Role::Assistant).with_id("a").into(),
///     MessageUpdate::Remove("b".into()),
/// ])?;
/// assert_eq!(context.len(), 1);
/// assert_eq!(context[0].message_id, "a".into());
///
/// let err = UpsertMessages.reduce(&mut context, vec![MessageUpdate::Remove("zzz".into())]);
/// assert!(err.is_err());
/// # Ok::<(), agentstate::ReduceError>(())
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct UpsertMessages;

/// The id LangGraph uses for "remove all messages" (`RemoveMessage(id=REMOVE_ALL_MESSAGES)`).
pub const REMOVE_ALL_MESSAGES: &str = "__remove_all__";

/// One entry of an `upsert_messages` update: a message to insert or replace, or a removal
/// marker.
///
/// In JSON a message is a message object, and a removal is LangGraph's serialized
/// `RemoveMessage`: `{"type": "remove", "id": "<id>"}`, with the id `"__remove_all__"` for
/// [`MessageUpdate::RemoveAll`].
///
/// ```
/// use agentstate::reducers::MessageUpdate;
///
/// let remove: MessageUpdate = serde_json::from_str(r#"{"type": "remove", "id": "m1"}"#)?;
/// assert_eq!(remove, MessageUpdate::Remove("m1".into()));
/// let all: MessageUpdate = serde_json::from_str(r#"{"type": "remove", "id": "__remove_all__"}"#)?;
/// assert_eq!(all, MessageUpdate::RemoveAll);
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
pub enum MessageUpdate {
    /// Insert this message, or replace the message with its id.
    Message(Message),
    /// Remove every message with this id.
    Remove(MessageId),
    /// Remove every message.
    RemoveAll,
}

impl From<Message> for MessageUpdate {
    fn from(message: Message) -> Self {
        MessageUpdate::Message(message)
    }
}

#[derive(Serialize, Deserialize)]
struct RemovalWire {
    #[serde(rename = "type")]
    kind: String,
    id: MessageId,
}

impl Serialize for MessageUpdate {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            MessageUpdate::Message(message) => message.serialize(serializer),
            MessageUpdate::Remove(id) => RemovalWire {
                kind: "remove".into(),
                id: id.clone(),
            }
            .serialize(serializer),
            MessageUpdate::RemoveAll => RemovalWire {
                kind: "remove".into(),
                id: MessageId::from(REMOVE_ALL_MESSAGES),
            }
            .serialize(serializer),
        }
    }
}

impl<'de> Deserialize<'de> for MessageUpdate {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        use serde::de::Error as _;
        let value = serde_json::Value::deserialize(deserializer)?;
        let is_removal = value.get("type").and_then(|t| t.as_str()) == Some("remove");
        if is_removal {
            let wire: RemovalWire = serde_json::from_value(value).map_err(D::Error::custom)?;
            Ok(match wire.id {
                MessageId::Str(ref s) if s == REMOVE_ALL_MESSAGES => MessageUpdate::RemoveAll,
                id => MessageUpdate::Remove(id),
            })
        } else {
            Message::deserialize(value)
                .map(MessageUpdate::Message)
                .map_err(D::Error::custom)
        }
    }
}

macro_rules! info {
    ($ty:ty, $name:literal, $idempotent:literal) => {
        impl ReducerInfo for $ty {
            fn name(&self) -> &'static str {
                $name
            }
            fn round_trip_idempotent(&self) -> bool {
                $idempotent
            }
        }
    };
}

info!(AddMessages, "add_messages", true);
info!(AppendItems, "append_items", true);
info!(ReplaceMessages, "replace_messages", true);
info!(UpsertMessages, "upsert_messages", true);

/// The update items to append: those whose id is not among the existing ids and that `skip`
/// does not reject. Existing ids only: duplicates inside the update are all kept.
fn new_by_id<T: HasId>(
    right: Vec<T>,
    exists: impl Fn(&T::Id) -> bool,
    skip: impl Fn(&T) -> bool,
) -> Vec<T> {
    right
        .into_iter()
        .filter(|item| !skip(item) && !exists(item.id()))
        .collect()
}

/// `first` then `second` as one update of an append-if-new-id reducer: the items of `second`
/// that `first` (skipped items aside) makes known are dropped, as merging `first` would have.
fn compose_by_id<T: HasId>(first: Vec<T>, second: Vec<T>, skip: impl Fn(&T) -> bool) -> Vec<T> {
    let known: HashSet<&T::Id> = first.iter().filter(|m| !skip(m)).map(HasId::id).collect();
    let keep: Vec<bool> = second.iter().map(|m| !known.contains(m.id())).collect();
    drop(known);
    let mut out = first;
    out.extend(
        second
            .into_iter()
            .zip(keep)
            .filter_map(|(m, k)| k.then_some(m)),
    );
    out
}

fn existing_ids<T: HasId>(items: &[T]) -> HashSet<&T::Id> {
    items.iter().map(HasId::id).collect()
}

/// The update items whose id is not in the list (and that `skip` does not reject), with the
/// ids looked up in one batch.
fn new_in_index<T: HasId>(
    list: &KeyedList<T>,
    update: Vec<T>,
    skip: impl Fn(&T) -> bool,
) -> Result<Vec<T>, ReduceError> {
    // One item, the usual step of a chat: no batch to allocate.
    if let [item] = update.as_slice() {
        let fresh = !skip(item) && list.find_key_of(&ById, item)?.is_none();
        return Ok(if fresh { update } else { Vec::new() });
    }
    let keep = {
        let found = list.find_keys_of(&ById, &update)?;
        update
            .iter()
            .zip(found)
            .map(|(item, at)| !skip(item) && at.is_none())
            .collect::<Vec<bool>>()
    };
    Ok(update
        .into_iter()
        .zip(keep)
        .filter_map(|(item, keep)| keep.then_some(item))
        .collect())
}

/// The messages of `right` that `add_messages` appends to `left`.
pub(crate) fn fresh_messages(left: &[Message], right: Vec<Message>) -> Vec<Message> {
    let ids = existing_ids(left);
    new_by_id(right, |id| ids.contains(id), |m| m.delta)
}

/// The items of `right` that `append_items` appends to `left`.
pub(crate) fn fresh_items<T: HasId>(left: &[T], right: Vec<T>) -> Vec<T> {
    let ids = existing_ids(left);
    new_by_id(right, |id| ids.contains(id), |_| false)
}

impl Merges<Vec<Message>> for AddMessages {
    type Update = Vec<Message>;
    type Plan = Vec<Message>;
}

impl Reducer<Vec<Message>> for AddMessages {
    fn plan(
        &self,
        current: &Vec<Message>,
        update: Vec<Message>,
    ) -> Result<Vec<Message>, ReduceError> {
        Ok(fresh_messages(current, update))
    }
    fn apply(&self, current: &mut Vec<Message>, plan: Vec<Message>) {
        current.extend(plan);
    }
    fn compose(&self, first: Vec<Message>, second: Vec<Message>) -> Option<Vec<Message>> {
        Some(compose_by_id(first, second, |m| m.delta))
    }
}

impl Merges<KeyedList<Message>> for AddMessages {
    type Update = KeyedList<Message>;
    type Plan = Vec<Message>;
}

impl Reducer<KeyedList<Message>> for AddMessages {
    fn plan(
        &self,
        current: &KeyedList<Message>,
        update: KeyedList<Message>,
    ) -> Result<Vec<Message>, ReduceError> {
        let update = update.into_vec();
        if update.is_empty() {
            return Ok(update);
        }
        new_in_index(current, update, |m| m.delta)
    }
    fn apply(&self, current: &mut KeyedList<Message>, plan: Vec<Message>) {
        current.extend_keyed(&ById, plan);
    }
    fn compose(
        &self,
        first: KeyedList<Message>,
        second: KeyedList<Message>,
    ) -> Option<KeyedList<Message>> {
        Some(compose_by_id(first.into_vec(), second.into_vec(), |m| m.delta).into())
    }
}

impl<T: HasId> Merges<Vec<T>> for AppendItems {
    type Update = Vec<T>;
    type Plan = Vec<T>;
}

impl<T: HasId> Reducer<Vec<T>> for AppendItems {
    fn plan(&self, current: &Vec<T>, update: Vec<T>) -> Result<Vec<T>, ReduceError> {
        Ok(fresh_items(current, update))
    }
    fn apply(&self, current: &mut Vec<T>, plan: Vec<T>) {
        current.extend(plan);
    }
    fn compose(&self, first: Vec<T>, second: Vec<T>) -> Option<Vec<T>> {
        Some(compose_by_id(first, second, |_| false))
    }
}

impl<T: HasId> Merges<KeyedList<T>> for AppendItems {
    type Update = KeyedList<T>;
    type Plan = Vec<T>;
}

impl<T: HasId> Reducer<KeyedList<T>> for AppendItems {
    fn plan(&self, current: &KeyedList<T>, update: KeyedList<T>) -> Result<Vec<T>, ReduceError> {
        let update = update.into_vec();
        if update.is_empty() {
            return Ok(update);
        }
        new_in_index(current, update, |_| false)
    }
    fn apply(&self, current: &mut KeyedList<T>, plan: Vec<T>) {
        current.extend_keyed(&ById, plan);
    }
    fn compose(&self, first: KeyedList<T>, second: KeyedList<T>) -> Option<KeyedList<T>> {
        Some(compose_by_id(first.into_vec(), second.into_vec(), |_| false).into())
    }
}

impl Merges<Vec<Message>> for ReplaceMessages {
    type Update = Vec<Message>;
    type Plan = Vec<Message>;
}

impl Reducer<Vec<Message>> for ReplaceMessages {
    fn plan(
        &self,
        _current: &Vec<Message>,
        update: Vec<Message>,
    ) -> Result<Vec<Message>, ReduceError> {
        Ok(update)
    }
    fn apply(&self, current: &mut Vec<Message>, plan: Vec<Message>) {
        *current = plan;
    }
    fn compose(&self, _first: Self::Update, second: Self::Update) -> Option<Self::Update> {
        Some(second)
    }
}

impl Merges<KeyedList<Message>> for ReplaceMessages {
    type Update = KeyedList<Message>;
    type Plan = Vec<Message>;
}

impl Reducer<KeyedList<Message>> for ReplaceMessages {
    fn plan(
        &self,
        _current: &KeyedList<Message>,
        update: KeyedList<Message>,
    ) -> Result<Vec<Message>, ReduceError> {
        Ok(update.into_vec())
    }
    fn apply(&self, current: &mut KeyedList<Message>, plan: Vec<Message>) {
        current.replace_all(plan);
    }
    fn compose(&self, _first: Self::Update, second: Self::Update) -> Option<Self::Update> {
        Some(second)
    }
}

/// The checked result of an `upsert_messages` merge.
#[derive(Debug)]
pub enum UpsertPlan {
    /// A remove-all marker was present: the list becomes these messages.
    Reset(Vec<Message>),
    /// Replace, append, then remove.
    Edit {
        /// Messages replacing existing positions.
        replace: Vec<(usize, Message)>,
        /// New messages, in order.
        append: Vec<Message>,
        /// Ids whose messages are removed at the end.
        remove: HashSet<MessageId>,
    },
}

/// The id an upsert entry puts or removes.
fn target_id(entry: &MessageUpdate) -> Option<&MessageId> {
    match entry {
        MessageUpdate::Message(message) => Some(&message.message_id),
        MessageUpdate::Remove(id) => Some(id),
        MessageUpdate::RemoveAll => None,
    }
}

/// `existing(i, id)` is the position of the existing message with `id`, asked for the `i`-th
/// entry of `update`.
fn plan_upsert(
    existing: impl Fn(usize, &MessageId) -> Option<usize>,
    mut update: Vec<MessageUpdate>,
) -> Result<UpsertPlan, ReduceError> {
    if let Some(last_reset) = update
        .iter()
        .rposition(|u| matches!(u, MessageUpdate::RemoveAll))
    {
        let tail = update.split_off(last_reset + 1);
        return reset_to(tail).map(UpsertPlan::Reset);
    }
    plan_edit(existing, update)
}

/// The list that what follows an update's last remove-all marker leaves, as LangGraph leaves
/// it: its messages in order, unmerged (LangGraph returns that part of the update as it is, so a
/// repeated id is kept twice, not replaced). A removal there drops the messages with its id
/// that come before it, and is a `reducer_error` if none has it (LangGraph would keep the
/// removal itself in the list, which a list of messages cannot hold).
fn reset_to(tail: Vec<MessageUpdate>) -> Result<Vec<Message>, ReduceError> {
    let mut kept: Vec<Option<Message>> = Vec::with_capacity(tail.len());
    // Where each id's messages are, until a removal drops them.
    let mut at: HashMap<MessageId, Vec<usize>> = HashMap::new();
    for entry in tail {
        match entry {
            MessageUpdate::Message(message) => {
                at.entry(message.message_id.clone())
                    .or_default()
                    .push(kept.len());
                kept.push(Some(message));
            }
            MessageUpdate::Remove(id) => match at.get_mut(&id) {
                Some(slots) => {
                    for slot in slots.drain(..) {
                        kept[slot] = None;
                    }
                }
                None => return Err(unknown_removal(&id)),
            },
            // The tail follows the last marker, so there is none; one would mean the same:
            // start from nothing.
            MessageUpdate::RemoveAll => {
                kept.clear();
                at.clear();
            }
        }
    }
    Ok(kept.into_iter().flatten().collect())
}

/// The error of a removal whose id no message has (LangGraph's `ValueError`).
fn unknown_removal(id: &MessageId) -> ReduceError {
    ReduceError::msg(format!(
        "cannot remove message {id}: no message has that id"
    ))
}

fn plan_edit(
    existing: impl Fn(usize, &MessageId) -> Option<usize>,
    update: Vec<MessageUpdate>,
) -> Result<UpsertPlan, ReduceError> {
    let mut replace = Vec::new();
    let mut append: Vec<Message> = Vec::new();
    let mut appended: HashMap<MessageId, usize> = HashMap::new();
    let mut remove = HashSet::new();
    for (i, entry) in update.into_iter().enumerate() {
        match entry {
            MessageUpdate::Message(message) => {
                let id = &message.message_id;
                remove.remove(id);
                if let Some(&slot) = appended.get(id) {
                    append[slot] = message;
                } else if let Some(at) = existing(i, id) {
                    replace.push((at, message));
                } else {
                    appended.insert(id.clone(), append.len());
                    append.push(message);
                }
            }
            MessageUpdate::Remove(id) => {
                if appended.contains_key(&id) || existing(i, &id).is_some() {
                    remove.insert(id);
                } else {
                    return Err(unknown_removal(&id));
                }
            }
            // plan_upsert hands what follows a remove-all marker to `reset_to`, so there is
            // none here; should one come, it means the same: start from nothing.
            MessageUpdate::RemoveAll => {
                replace.clear();
                append.clear();
                appended.clear();
                remove.clear();
            }
        }
    }
    Ok(UpsertPlan::Edit {
        replace,
        append,
        remove,
    })
}

/// `first` then `second` as one `upsert_messages` update: the two lists one after the other,
/// except when `second` puts back a message that `first` removes (and `second` has no
/// remove-all). Merged in turn, that message goes to the end of the list; in one update a
/// removal followed by the same id replaces the message in place, so no single update says
/// it, and the two cannot be combined (`None`).
fn compose_upserts(
    mut first: Vec<MessageUpdate>,
    second: Vec<MessageUpdate>,
) -> Option<Vec<MessageUpdate>> {
    if !second.iter().any(|u| matches!(u, MessageUpdate::RemoveAll)) {
        if let Some(reset) = first
            .iter()
            .rposition(|u| matches!(u, MessageUpdate::RemoveAll))
        {
            // `first` leaves exactly the list of what follows its last remove-all, unmerged;
            // `second` merges into that list, so the two are one remove-all followed by the
            // list they leave (or nothing, if `second` fails on it, as it would in turn).
            let mut list = reset_to(first.split_off(reset + 1)).ok()?;
            Reducer::<Vec<Message>>::reduce(&UpsertMessages, &mut list, second).ok()?;
            let mut composed = Vec::with_capacity(list.len() + 1);
            composed.push(MessageUpdate::RemoveAll);
            composed.extend(list.into_iter().map(MessageUpdate::Message));
            return Some(composed);
        }
        // What `first` leaves removed: ids whose last entry is a removal.
        let mut removed: HashSet<&MessageId> = HashSet::new();
        for entry in &first {
            match entry {
                MessageUpdate::Message(m) => {
                    removed.remove(&m.message_id);
                }
                MessageUpdate::Remove(id) => {
                    removed.insert(id);
                }
                MessageUpdate::RemoveAll => {}
            }
        }
        let puts_back = second
            .iter()
            .any(|u| matches!(u, MessageUpdate::Message(m) if removed.contains(&m.message_id)));
        if puts_back {
            return None;
        }
    }
    first.extend(second);
    Some(first)
}

fn last_index_by_id(messages: &[Message]) -> HashMap<&MessageId, usize> {
    messages
        .iter()
        .enumerate()
        .map(|(i, m)| (&m.message_id, i))
        .collect()
}

impl Merges<Vec<Message>> for UpsertMessages {
    type Update = Vec<MessageUpdate>;
    type Plan = UpsertPlan;
}

impl Reducer<Vec<Message>> for UpsertMessages {
    fn plan(
        &self,
        current: &Vec<Message>,
        update: Vec<MessageUpdate>,
    ) -> Result<UpsertPlan, ReduceError> {
        let index = last_index_by_id(current);
        plan_upsert(|_, id| index.get(id).copied(), update)
    }
    fn apply(&self, current: &mut Vec<Message>, plan: UpsertPlan) {
        match plan {
            UpsertPlan::Reset(messages) => *current = messages,
            UpsertPlan::Edit {
                replace,
                append,
                remove,
            } => {
                for (at, message) in replace {
                    current[at] = message;
                }
                current.extend(append);
                if !remove.is_empty() {
                    current.retain(|m| !remove.contains(&m.message_id));
                }
            }
        }
    }
    fn compose(&self, first: Self::Update, second: Self::Update) -> Option<Self::Update> {
        compose_upserts(first, second)
    }
}

impl Merges<KeyedList<Message>> for UpsertMessages {
    type Update = Vec<MessageUpdate>;
    type Plan = UpsertPlan;
}

impl Reducer<KeyedList<Message>> for UpsertMessages {
    fn plan(
        &self,
        current: &KeyedList<Message>,
        update: Vec<MessageUpdate>,
    ) -> Result<UpsertPlan, ReduceError> {
        // All ids are looked up in one batch, before the plan is made.
        let found: Vec<Option<usize>> = {
            let index = current.index_for(&ById)?;
            let ids: Vec<&MessageId> = update.iter().filter_map(target_id).collect();
            let mut found = index
                .find_many(current.as_slice(), &ById, &ids)?
                .into_iter();
            update
                .iter()
                .map(|entry| target_id(entry).and_then(|_| found.next().flatten()))
                .collect()
        };
        plan_upsert(|i, _| found.get(i).copied().flatten(), update)
    }
    fn apply(&self, current: &mut KeyedList<Message>, plan: UpsertPlan) {
        match plan {
            UpsertPlan::Reset(messages) => current.replace_all(messages),
            UpsertPlan::Edit {
                replace,
                append,
                remove,
            } => {
                current.replace_at(&ById, replace);
                current.extend_keyed(&ById, append);
                if !remove.is_empty() {
                    current.retain(|m| !remove.contains(&m.message_id));
                }
            }
        }
    }
    fn compose(&self, first: Self::Update, second: Self::Update) -> Option<Self::Update> {
        compose_upserts(first, second)
    }
}

/// `remove_tool_messages` (AgentFlow): removes every *complete* tool sequence.
///
/// A complete sequence is an assistant message with non-empty `tools_calls`, the run of `tool`
/// messages right after it (zero or more), and then an assistant message without tool calls,
/// which is kept. A sequence not followed by such an assistant message (end of list, a user or
/// system message, another assistant message with tool calls) is kept whole. `tools_calls ==
/// []` is not a tool call, and tool-call blocks inside `content` are not looked at.
///
/// ```
/// use agentstate::message::{Message, Role};
/// use agentstate::reducers::remove_tool_messages;
/// # use agentstate::message::ToolCall;
///
/// let user = Message::text_message("weather?", Role::User);
/// let call = Message::text_message("", Role::Assistant)
///     .with_tool_calls(vec![ToolCall::new("c1", "get_weather", serde_json::json!({"city": "Paris"}))]);
/// let result = Message::text_message("Sunny", Role::Tool);
/// let answer = Message::text_message("It is sunny.", Role::Assistant);
///
/// let kept = remove_tool_messages(vec![user.clone(), call, result, answer.clone()]);
/// assert_eq!(kept, vec![user, answer]);
/// ```
pub fn remove_tool_messages(messages: Vec<Message>) -> Vec<Message> {
    let calls_tools = |m: &Message| {
        m.role == Role::Assistant && m.tools_calls.as_ref().is_some_and(|c| !c.is_empty())
    };
    let mut removed = vec![false; messages.len()];
    let mut i = 0;
    while i < messages.len() {
        if !calls_tools(&messages[i]) {
            i += 1;
            continue;
        }
        let start = i;
        i += 1;
        while i < messages.len() && messages[i].role == Role::Tool {
            i += 1;
        }
        let answered =
            i < messages.len() && messages[i].role == Role::Assistant && !calls_tools(&messages[i]);
        if answered {
            removed[start..i].iter_mut().for_each(|r| *r = true);
            i += 1;
        }
    }
    messages
        .into_iter()
        .zip(removed)
        .filter_map(|(m, r)| (!r).then_some(m))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(id: &str, text: &str) -> Message {
        Message::text_message(text, Role::Assistant)
            .with_id(id)
            .with_timestamp(1.0)
    }

    #[test]
    fn upsert_compose_refuses_a_removal_then_putting_the_message_back() {
        let first = vec![MessageUpdate::Remove("a".into())];
        let second = vec![MessageUpdate::Message(m("a", "back"))];
        // In turn the message moves to the end.
        let mut in_turn = vec![m("a", "one"), m("b", "two")];
        UpsertMessages.reduce(&mut in_turn, first.clone()).unwrap();
        UpsertMessages.reduce(&mut in_turn, second.clone()).unwrap();
        assert_eq!(in_turn, [m("b", "two"), m("a", "back")]);
        // The two lists one after the other would replace it in place instead.
        let mut concatenated = vec![m("a", "one"), m("b", "two")];
        let both: Vec<MessageUpdate> = first.iter().chain(&second).cloned().collect();
        UpsertMessages.reduce(&mut concatenated, both).unwrap();
        assert_ne!(concatenated, in_turn);
        assert!(
            Reducer::<Vec<Message>>::compose(&UpsertMessages, first.clone(), second.clone())
                .is_none()
        );
        assert!(Reducer::<KeyedList<Message>>::compose(
            &UpsertMessages,
            first.clone(),
            second.clone()
        )
        .is_none());

        // After a remove-all the first update leaves a known list, so putting back what it
        // removed there composes (into one remove-all and that list); a remove-all in the
        // second update makes any first one irrelevant; other ids combine.
        let cleared = vec![
            MessageUpdate::RemoveAll,
            MessageUpdate::Message(m("a", "x")),
            MessageUpdate::Remove("a".into()),
        ];
        assert_eq!(
            Reducer::<Vec<Message>>::compose(&UpsertMessages, cleared, second.clone()),
            Some(vec![
                MessageUpdate::RemoveAll,
                MessageUpdate::Message(m("a", "back"))
            ])
        );
        let reset = vec![
            MessageUpdate::RemoveAll,
            MessageUpdate::Message(m("a", "x")),
        ];
        assert_eq!(
            Reducer::<Vec<Message>>::compose(&UpsertMessages, first.clone(), reset.clone())
                .map(|u| u.len()),
            Some(3)
        );
        let other = vec![MessageUpdate::Message(m("c", "new"))];
        assert!(Reducer::<Vec<Message>>::compose(&UpsertMessages, first, other).is_some());
        let put_back_in_first = vec![
            MessageUpdate::Remove("a".into()),
            MessageUpdate::Message(m("a", "kept")),
        ];
        assert!(
            Reducer::<Vec<Message>>::compose(&UpsertMessages, put_back_in_first, second).is_some(),
            "the first update's last word on `a` is a message, not a removal"
        );
    }
}
