//! Keyed list reducers: `dedupe_append(key?)` and `merge_by_key(key)`, and the key functions
//! they take.

use super::{Merges, Reducer, ReducerInfo};
use crate::collections::KeyedList;
use crate::error::{Error, ReduceError};
use crate::keys::{Identity, KeyFn, KeyLabel};
use serde_json::{Map, Value};
use std::collections::{HashMap, HashSet};
use std::fmt::Debug;

/// `dedupe_append(key=None)`: appends the update's items whose key has not been seen.
///
/// The keys of all existing items are seen first; each update item is appended only if its key
/// is unseen, and its key is then seen, so the first occurrence inside an update wins. Existing
/// duplicates are never removed. With no key function the item itself is the key.
///
/// On a [`KeyedList`] a merge of `k` items costs O(k); on a `Vec<T>` it costs O(n + k).
///
/// ```
/// use agentstate::reducers::{by_field, DedupeAppend, Reducer};
///
/// let mut tags = vec!["seed"];
/// DedupeAppend::new().reduce(&mut tags, vec!["seed", "a", "b", "a"])?;
/// assert_eq!(tags, ["seed", "a", "b"]);
///
/// #[derive(Debug, PartialEq)]
/// struct Source { url: String, title: String }
/// let by_url = DedupeAppend::by(by_field(|s: &Source| s.url.as_str()));
/// let mut sources = vec![Source { url: "a".into(), title: "first".into() }];
/// by_url.reduce(&mut sources, vec![Source { url: "a".into(), title: "again".into() }])?;
/// assert_eq!(sources.len(), 1);
/// assert_eq!(sources[0].title, "first");
/// # Ok::<(), agentstate::ReduceError>(())
/// ```
#[derive(Debug, Clone, Default)]
pub struct DedupeAppend<K = Identity> {
    key: K,
}

impl DedupeAppend<Identity> {
    /// Dedupe by the item itself.
    pub fn new() -> Self {
        DedupeAppend { key: Identity }
    }
}

impl<K> DedupeAppend<K> {
    /// Dedupe by a key function.
    pub fn by(key: K) -> Self {
        DedupeAppend { key }
    }

    /// The key function.
    pub fn key_fn(&self) -> &K {
        &self.key
    }
}

/// `merge_by_key(key)`: keyed merge of a list of records.
///
/// Existing items are indexed by key, holding the last index for duplicate keys. An update item
/// with a known key replaces the item at that index; a novel key is appended (in update order)
/// and indexed, so a later update item with the same novel key replaces it. Existing order is
/// preserved. The key is required: building one without a key is
/// `reducer_configuration_invalid` (see [`MergeByKey::from_optional`]).
///
/// On a [`KeyedList`] a merge of `k` items costs O(k); on a `Vec<T>` it costs O(n + k).
///
/// ```
/// use agentstate::reducers::{by_field, MergeByKey, Reducer};
///
/// let by_id = MergeByKey::new(by_field(|r: &(u32, &str)| &r.0));
/// let mut records = vec![(1, "pending"), (2, "pending")];
/// by_id.reduce(&mut records, vec![(1, "done"), (3, "running"), (2, "errored"), (3, "queued")])?;
/// assert_eq!(records, [(1, "done"), (2, "errored"), (3, "queued")]);
/// # Ok::<(), agentstate::ReduceError>(())
/// ```
#[derive(Debug, Clone)]
pub struct MergeByKey<K> {
    key: K,
}

impl<K> MergeByKey<K> {
    /// Merge by `key`.
    pub fn new(key: K) -> Self {
        MergeByKey { key }
    }

    /// Merge by `key`, which configuration may have left out: `None` is
    /// `reducer_configuration_invalid`, as OpenArmature requires.
    pub fn from_optional(key: Option<K>) -> Result<Self, Error> {
        key.map(Self::new).ok_or_else(|| {
            Error::configuration(
                "merge_by_key",
                "a key is required (merge_by_key has no default key)",
            )
        })
    }

    /// The key function.
    pub fn key_fn(&self) -> &K {
        &self.key
    }
}

fn key_params(label: Option<&str>) -> Map<String, Value> {
    Map::from_iter([(
        "key".to_owned(),
        label.map_or(Value::Null, |l| Value::String(l.to_owned())),
    )])
}

impl<K: KeyLabel> ReducerInfo for DedupeAppend<K> {
    fn name(&self) -> &'static str {
        "dedupe_append"
    }
    fn params(&self) -> Map<String, Value> {
        key_params(self.key.key_label())
    }
    fn round_trip_idempotent(&self) -> bool {
        true
    }
}

impl<K: KeyLabel> ReducerInfo for MergeByKey<K> {
    fn name(&self) -> &'static str {
        "merge_by_key"
    }
    fn params(&self) -> Map<String, Value> {
        key_params(self.key.key_label())
    }
    fn round_trip_idempotent(&self) -> bool {
        true
    }
}

/// The checked result of a keyed merge: items replacing existing positions, then novel items to
/// append in order.
#[derive(Debug)]
pub struct KeyedPlan<T> {
    pub(crate) replace: Vec<(usize, T)>,
    pub(crate) novel: Vec<T>,
}

/// Which update items `dedupe_append` keeps, given a lookup of existing keys. `exists` is
/// called once per update item, in order (so it may answer from lookups made in one batch).
pub(crate) fn dedupe_mask<'a, T, K: KeyFn<T>>(
    key: &'a K,
    update: &'a [T],
    mut exists: impl FnMut(&K::Key<'a>) -> Result<bool, ReduceError>,
) -> Result<Vec<bool>, ReduceError> {
    let mut seen = HashSet::with_capacity(update.len());
    let mut keep = Vec::with_capacity(update.len());
    for item in update {
        let k = key.key(item)?;
        let fresh = !exists(&k)? && !seen.contains(&k);
        if fresh {
            seen.insert(k);
        }
        keep.push(fresh);
    }
    Ok(keep)
}

pub(crate) fn keep_masked<T>(update: Vec<T>, keep: &[bool]) -> Vec<T> {
    update
        .into_iter()
        .zip(keep)
        .filter_map(|(item, &k)| k.then_some(item))
        .collect()
}

/// The last index of each key in `items`.
pub(crate) fn last_indices<'a, T, K: KeyFn<T>>(
    key: &'a K,
    items: &'a [T],
) -> Result<HashMap<K::Key<'a>, usize>, ReduceError> {
    let mut index = HashMap::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        index.insert(key.key(item)?, i);
    }
    Ok(index)
}

impl<T, K> Merges<Vec<T>> for DedupeAppend<K> {
    type Update = Vec<T>;
    type Plan = Vec<T>;
}

impl<T, K: KeyFn<T>> Reducer<Vec<T>> for DedupeAppend<K> {
    fn plan(&self, current: &Vec<T>, update: Vec<T>) -> Result<Vec<T>, ReduceError> {
        if update.is_empty() {
            return Ok(update);
        }
        let keep = {
            let existing = last_indices(&self.key, current)?;
            dedupe_mask(&self.key, &update, |k| Ok(existing.contains_key(k)))?
        };
        Ok(keep_masked(update, &keep))
    }
    fn apply(&self, current: &mut Vec<T>, plan: Vec<T>) {
        current.extend(plan);
    }
    fn compose(&self, mut first: Self::Update, second: Self::Update) -> Option<Self::Update> {
        first.extend(second);
        Some(first)
    }
}

impl<T, K> Merges<Vec<T>> for MergeByKey<K> {
    type Update = Vec<T>;
    type Plan = KeyedPlan<T>;
}

impl<T, K: KeyFn<T>> Reducer<Vec<T>> for MergeByKey<K> {
    fn plan(&self, current: &Vec<T>, update: Vec<T>) -> Result<KeyedPlan<T>, ReduceError> {
        plan_merge_by_key(&self.key, current, update)
    }
    fn apply(&self, current: &mut Vec<T>, plan: KeyedPlan<T>) {
        for (index, item) in plan.replace {
            current[index] = item;
        }
        current.extend(plan.novel);
    }
    fn compose(&self, mut first: Self::Update, second: Self::Update) -> Option<Self::Update> {
        first.extend(second);
        Some(first)
    }
}

fn plan_merge_by_key<T, K: KeyFn<T>>(
    key: &K,
    current: &[T],
    update: Vec<T>,
) -> Result<KeyedPlan<T>, ReduceError> {
    if update.is_empty() {
        return Ok(KeyedPlan {
            replace: Vec::new(),
            novel: Vec::new(),
        });
    }
    // Keys borrow the update, so slots are computed first and the items moved afterwards.
    let slots = {
        let existing = last_indices(key, current)?;
        slot_update(key, &update, |k| Ok(existing.get(k).copied()))?
    };
    Ok(place(update, slots))
}

/// The slot of each update item: `Ok(index)` replaces an existing item, `Err(n)` is the n-th
/// novel item. `existing` is called once per update item, in order (so it may answer from
/// lookups made in one batch).
pub(crate) fn slot_update<'a, T, K: KeyFn<T>>(
    key: &'a K,
    update: &'a [T],
    mut existing: impl FnMut(&K::Key<'a>) -> Result<Option<usize>, ReduceError>,
) -> Result<Vec<Result<usize, usize>>, ReduceError> {
    let mut slots = Vec::with_capacity(update.len());
    let mut novel_slots: HashMap<K::Key<'a>, usize> = HashMap::new();
    for item in update {
        let k = key.key(item)?;
        if let Some(index) = existing(&k)? {
            slots.push(Ok(index));
        } else if let Some(&slot) = novel_slots.get(&k) {
            slots.push(Err(slot));
        } else {
            let slot = novel_slots.len();
            novel_slots.insert(k, slot);
            slots.push(Err(slot));
        }
    }
    Ok(slots)
}

/// Moves update items to their slots; a later item for the same slot wins.
pub(crate) fn place<T>(update: Vec<T>, slots: Vec<Result<usize, usize>>) -> KeyedPlan<T> {
    let novel_count = slots
        .iter()
        .filter_map(|s| s.err())
        .max()
        .map_or(0, |m| m + 1);
    let mut replace = Vec::new();
    let mut novel: Vec<Option<T>> = (0..novel_count).map(|_| None).collect();
    for (item, slot) in update.into_iter().zip(slots) {
        match slot {
            Ok(index) => replace.push((index, item)),
            Err(slot) => novel[slot] = Some(item),
        }
    }
    KeyedPlan {
        replace,
        novel: novel.into_iter().flatten().collect(),
    }
}

impl<T, K> Merges<KeyedList<T>> for DedupeAppend<K> {
    type Update = KeyedList<T>;
    type Plan = Vec<T>;
}

impl<T, K> Reducer<KeyedList<T>> for DedupeAppend<K>
where
    K: KeyFn<T> + 'static,
{
    fn plan(&self, current: &KeyedList<T>, update: KeyedList<T>) -> Result<Vec<T>, ReduceError> {
        let update = update.into_vec();
        if update.is_empty() {
            return Ok(update);
        }
        let mut found = current.find_keys_of(&self.key, &update)?.into_iter();
        let keep = dedupe_mask(&self.key, &update, |_| Ok(found.next().flatten().is_some()))?;
        Ok(keep_masked(update, &keep))
    }
    fn apply(&self, current: &mut KeyedList<T>, plan: Vec<T>) {
        current.extend_keyed(&self.key, plan);
    }
    fn compose(&self, first: KeyedList<T>, second: KeyedList<T>) -> Option<KeyedList<T>> {
        let mut all = first.into_vec();
        all.extend(second);
        Some(all.into())
    }
}

impl<T, K> Merges<KeyedList<T>> for MergeByKey<K> {
    type Update = KeyedList<T>;
    type Plan = KeyedPlan<T>;
}

impl<T, K> Reducer<KeyedList<T>> for MergeByKey<K>
where
    K: KeyFn<T> + 'static,
{
    fn plan(
        &self,
        current: &KeyedList<T>,
        update: KeyedList<T>,
    ) -> Result<KeyedPlan<T>, ReduceError> {
        let update = update.into_vec();
        if update.is_empty() {
            return Ok(place(update, Vec::new()));
        }
        let mut found = current.find_keys_of(&self.key, &update)?.into_iter();
        let slots = slot_update(&self.key, &update, |_| Ok(found.next().flatten()))?;
        Ok(place(update, slots))
    }
    fn apply(&self, current: &mut KeyedList<T>, plan: KeyedPlan<T>) {
        current.replace_at(&self.key, plan.replace);
        current.extend_keyed(&self.key, plan.novel);
    }
    fn compose(&self, first: KeyedList<T>, second: KeyedList<T>) -> Option<KeyedList<T>> {
        let mut all = first.into_vec();
        all.extend(second);
        Some(all.into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys::{by_field, by_value, KeyRef};

    #[derive(Debug, Clone, PartialEq)]
    struct Rec {
        id: u32,
        value: &'static str,
    }

    fn rec(id: u32, value: &'static str) -> Rec {
        Rec { id, value }
    }

    fn by_id() -> KeyRef<impl Fn(&Rec) -> &u32 + Clone, u32> {
        by_field(|r: &Rec| &r.id).named("id")
    }

    fn both<R>(reducer: &R, start: Vec<Rec>, update: Vec<Rec>) -> Vec<Rec>
    where
        R: Reducer<Vec<Rec>, Update = Vec<Rec>> + Reducer<KeyedList<Rec>, Update = KeyedList<Rec>>,
    {
        let mut plain = start.clone();
        let mut keyed = KeyedList::from(start);
        reducer.reduce(&mut plain, update.clone()).unwrap();
        reducer.reduce(&mut keyed, update.into()).unwrap();
        assert_eq!(
            keyed.as_slice(),
            plain.as_slice(),
            "Vec and KeyedList agree"
        );
        plain
    }

    #[test]
    fn dedupe_default_key_first_occurrence_wins() {
        let mut tags = vec!["seed"];
        DedupeAppend::new()
            .reduce(&mut tags, vec!["seed", "a", "b", "a"])
            .unwrap();
        assert_eq!(tags, ["seed", "a", "b"]);
        let mut keyed = KeyedList::from(vec!["seed"]);
        DedupeAppend::new()
            .reduce(&mut keyed, vec!["seed", "a", "b", "a"].into())
            .unwrap();
        assert_eq!(keyed.as_slice(), ["seed", "a", "b"]);
    }

    #[test]
    fn dedupe_with_key_keeps_existing_and_existing_duplicates() {
        let out = both(
            &DedupeAppend::by(by_id()),
            vec![rec(1, "alpha"), rec(1, "alpha-dup")],
            vec![rec(1, "alpha-updated"), rec(2, "beta"), rec(2, "beta-dup")],
        );
        assert_eq!(
            out,
            [rec(1, "alpha"), rec(1, "alpha-dup"), rec(2, "beta")],
            "existing duplicates stay; update duplicates are filtered"
        );
        let empty = both(&DedupeAppend::by(by_id()), vec![rec(1, "a")], vec![]);
        assert_eq!(empty, [rec(1, "a")]);
    }

    #[test]
    fn merge_by_key_replaces_in_place_and_appends_novel_in_order() {
        let out = both(
            &MergeByKey::new(by_id()),
            vec![rec(1, "pending"), rec(2, "pending"), rec(3, "pending")],
            vec![rec(2, "done"), rec(1, "running"), rec(3, "errored")],
        );
        assert_eq!(out, [rec(1, "running"), rec(2, "done"), rec(3, "errored")]);
        let out = both(
            &MergeByKey::new(by_id()),
            vec![rec(1, "pending")],
            vec![rec(7, "running"), rec(2, "done"), rec(5, "errored")],
        );
        assert_eq!(
            out,
            [
                rec(1, "pending"),
                rec(7, "running"),
                rec(2, "done"),
                rec(5, "errored")
            ]
        );
    }

    #[test]
    fn merge_by_key_duplicates_last_wins_on_both_sides() {
        let out = both(
            &MergeByKey::new(by_id()),
            vec![rec(1, "old-a"), rec(1, "old-b"), rec(2, "old-c")],
            vec![rec(1, "new-b"), rec(2, "new-c1"), rec(2, "new-c2")],
        );
        assert_eq!(out, [rec(1, "old-a"), rec(1, "new-b"), rec(2, "new-c2")]);
        // A novel key repeated in one update: first position, last value.
        let out = both(
            &MergeByKey::new(by_id()),
            vec![],
            vec![rec(4, "x"), rec(5, "y"), rec(4, "z")],
        );
        assert_eq!(out, [rec(4, "z"), rec(5, "y")]);
    }

    #[test]
    fn keyed_list_index_survives_many_merges() {
        let reducer = MergeByKey::new(by_id());
        let mut keyed = KeyedList::new();
        let mut plain = Vec::new();
        for round in 0..50u32 {
            let update: Vec<Rec> = (0..5)
                .map(|i| {
                    rec(
                        (round * 3 + i) % 40,
                        if i % 2 == 0 { "even" } else { "odd" },
                    )
                })
                .collect();
            reducer.reduce(&mut keyed, update.clone().into()).unwrap();
            reducer.reduce(&mut plain, update).unwrap();
        }
        assert_eq!(keyed.as_slice(), plain.as_slice());
        assert_eq!(keyed.len(), 40);
    }

    #[test]
    fn owned_keys_and_missing_key_configuration() {
        let reducer = MergeByKey::new(by_value(|r: &Rec| r.id % 10));
        let mut v = vec![rec(1, "a")];
        reducer.reduce(&mut v, vec![rec(11, "b")]).unwrap();
        assert_eq!(v, [rec(11, "b")]);
        let err = MergeByKey::<Identity>::from_optional(None).unwrap_err();
        assert_eq!(err.category(), "reducer_configuration_invalid");
        assert_eq!(MergeByKey::new(by_id()).params()["key"], "id");
        assert_eq!(DedupeAppend::new().params()["key"], Value::Null);
    }
}
