//! The key index of `KeyedList` and `MessageList` against the plain `Vec` reducers: random
//! sequences of keyed merges (with two key functions taking turns), direct edits that drop the
//! index, and JSON round-trips must leave the indexed list equal to the `Vec` after every step.
//! Keys come from a small set, so that most merges hit existing keys and duplicates.
//!
//! The tests run with debug assertions, under which every index hit is also checked against the
//! item's key: a stale index fails here even where the answer happens to be right.

use agentstate::message::{Message, MessageId, Role};
use agentstate::reducers::{
    by_value, AddMessages, DedupeAppend, MergeByKey, MessageUpdate, Reducer, UpsertMessages,
};
use agentstate::{KeyedList, MessageList};
use proptest::prelude::*;

type Pair = (u8, u8);

#[derive(Debug, Clone)]
enum ListOp {
    /// `merge_by_key` on the first element.
    MergeByFirst(Vec<Pair>),
    /// `dedupe_append` on the first element.
    DedupeByFirst(Vec<Pair>),
    /// `dedupe_append` on the second element: a second key function over the same list.
    DedupeBySecond(Vec<Pair>),
    /// `KeyedList::push`.
    Push(Pair),
    /// Changes the first element of an item through `get_mut`.
    SetFirst(usize, u8),
    /// Keeps the items whose second element is below the bound.
    RetainBelow(u8),
    /// Serializes the list to JSON and reads it back.
    RoundTrip,
}

fn pair() -> impl Strategy<Value = Pair> {
    (0u8..8, 0u8..4)
}

fn pairs() -> impl Strategy<Value = Vec<Pair>> {
    prop::collection::vec(pair(), 0..6)
}

fn list_op() -> impl Strategy<Value = ListOp> {
    prop_oneof![
        4 => pairs().prop_map(ListOp::MergeByFirst),
        3 => pairs().prop_map(ListOp::DedupeByFirst),
        2 => pairs().prop_map(ListOp::DedupeBySecond),
        1 => pair().prop_map(ListOp::Push),
        1 => (0usize..20, 0u8..8).prop_map(|(at, k)| ListOp::SetFirst(at, k)),
        1 => (0u8..5).prop_map(ListOp::RetainBelow),
        1 => Just(ListOp::RoundTrip),
    ]
}

/// Applies `op` to both lists; the reducers are built once, as a state's reducers are.
fn apply_list_op(list: &mut KeyedList<Pair>, vec: &mut Vec<Pair>, op: ListOp) {
    let by_first = MergeByKey::new(by_value(|p: &Pair| p.0));
    let first_seen = DedupeAppend::by(by_value(|p: &Pair| p.0));
    let second_seen = DedupeAppend::by(by_value(|p: &Pair| p.1));
    match op {
        ListOp::MergeByFirst(update) => {
            by_first.reduce(list, update.clone().into()).unwrap();
            by_first.reduce(vec, update).unwrap();
        }
        ListOp::DedupeByFirst(update) => {
            first_seen.reduce(list, update.clone().into()).unwrap();
            first_seen.reduce(vec, update).unwrap();
        }
        ListOp::DedupeBySecond(update) => {
            second_seen.reduce(list, update.clone().into()).unwrap();
            second_seen.reduce(vec, update).unwrap();
        }
        ListOp::Push(item) => {
            list.push(item);
            vec.push(item);
        }
        ListOp::SetFirst(at, k) => {
            if let Some(item) = list.get_mut(at) {
                item.0 = k;
            }
            if let Some(item) = vec.get_mut(at) {
                item.0 = k;
            }
        }
        ListOp::RetainBelow(bound) => {
            list.retain(|p| p.1 < bound);
            vec.retain(|p| p.1 < bound);
        }
        ListOp::RoundTrip => {
            let json = serde_json::to_string(&*list).unwrap();
            *list = serde_json::from_str(&json).unwrap();
        }
    }
}

#[derive(Debug, Clone)]
enum MessageOp {
    Add(Vec<Message>),
    Upsert(Vec<MessageUpdate>),
    RoundTrip,
}

/// Ids from a small set, as strings and as integers.
fn message_id() -> impl Strategy<Value = MessageId> {
    prop_oneof![
        (0u8..8).prop_map(|i| MessageId::from(format!("m{i}"))),
        (0i128..4).prop_map(MessageId::Int),
    ]
}

fn message() -> impl Strategy<Value = Message> {
    (message_id(), 0u8..100, prop::bool::weighted(0.2)).prop_map(|(id, text, delta)| {
        let mut message = Message::text_message(format!("text {text}"), Role::Assistant);
        message.message_id = id;
        message.delta = delta;
        message
    })
}

fn message_update() -> impl Strategy<Value = MessageUpdate> {
    prop_oneof![
        8 => message().prop_map(MessageUpdate::from),
        2 => message_id().prop_map(MessageUpdate::Remove),
        1 => Just(MessageUpdate::RemoveAll),
    ]
}

fn message_op() -> impl Strategy<Value = MessageOp> {
    prop_oneof![
        4 => prop::collection::vec(message(), 0..6).prop_map(MessageOp::Add),
        4 => prop::collection::vec(message_update(), 0..6).prop_map(MessageOp::Upsert),
        1 => Just(MessageOp::RoundTrip),
    ]
}

fn apply_message_op(list: &mut MessageList, vec: &mut Vec<Message>, op: MessageOp) {
    match op {
        MessageOp::Add(update) => {
            AddMessages.reduce(list, update.clone().into()).unwrap();
            AddMessages.reduce(vec, update).unwrap();
        }
        MessageOp::Upsert(update) => {
            let on_list = UpsertMessages.reduce(list, update.clone());
            let on_vec = UpsertMessages.reduce(vec, update);
            // Removing an unknown id fails on both, and changes neither.
            assert_eq!(
                on_list.map_err(|e| e.to_string()),
                on_vec.map_err(|e| e.to_string())
            );
        }
        MessageOp::RoundTrip => {
            let json = serde_json::to_string(&*list).unwrap();
            *list = serde_json::from_str(&json).unwrap();
        }
    }
}

proptest! {
    // Many cases, as a stale index needs a particular order of merges to show.
    #![proptest_config(ProptestConfig::with_cases(4096))]

    #[test]
    fn a_keyed_list_merges_like_a_vec(
        start in prop::collection::vec(pair(), 0..10),
        ops in prop::collection::vec(list_op(), 0..16),
    ) {
        let mut list = KeyedList::from(start.clone());
        let mut vec = start;
        for op in ops {
            apply_list_op(&mut list, &mut vec, op);
            prop_assert_eq!(list.as_slice(), vec.as_slice());
        }
    }

    #[test]
    fn a_message_list_merges_like_a_vec(
        start in prop::collection::vec(message(), 0..8),
        ops in prop::collection::vec(message_op(), 0..10),
    ) {
        let mut list = MessageList::from(start.clone());
        let mut vec = start;
        for op in ops {
            apply_message_op(&mut list, &mut vec, op);
            prop_assert_eq!(list.as_slice(), vec.as_slice());
            // Lookups by id agree with a scan for the last message with that id.
            for id in vec.iter().map(|m| &m.message_id) {
                let last = vec.iter().rev().find(|m| &m.message_id == id);
                prop_assert_eq!(list.get_by_id(id), last);
            }
        }
    }
}

#[test]
fn a_long_list_finds_every_key_at_its_last_position() {
    let by_first = MergeByKey::new(by_value(|p: &(u32, u32)| p.0));
    let mut list: KeyedList<(u32, u32)> = (0..20_000).map(|i| (i, 0)).collect();
    by_first.reduce(&mut list, vec![(0, 1)].into()).unwrap();
    let update: Vec<(u32, u32)> = (0..40_000).step_by(3).map(|i| (i, 2)).collect();
    let novel = update.iter().filter(|p| p.0 >= 20_000).count();
    by_first.reduce(&mut list, update.into()).unwrap();
    // Keys below 20 000 were replaced in place when divisible by 3; the rest were appended.
    assert_eq!(list.len(), 20_000 + novel);
    for (i, &(k, v)) in list.iter().enumerate() {
        if i < 20_000 {
            assert_eq!(k, i as u32);
            let expected = if k % 3 == 0 {
                2
            } else if k == 0 {
                1
            } else {
                0
            };
            assert_eq!(v, expected, "item {i}");
        } else {
            assert_eq!(v, 2);
        }
    }
}
