//! Indexed collections for long-lived states: [`KeyedList`] and [`MessageList`].

use crate::error::ReduceError;
use crate::keys::{ById, HasId, KeyFn, ListField};
use crate::message::Message;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use siphasher::sip128::{Hasher128, SipHasher13};
use std::any::TypeId;
use std::borrow::Cow;
use std::collections::hash_map::RandomState;
use std::collections::HashMap;
use std::fmt;
use std::hash::{BuildHasher, BuildHasherDefault, Hash, Hasher};
use std::sync::OnceLock;

/// The conversation history of an [`AgentState`](crate::state::AgentState): a list of messages
/// indexed by `message_id`, so that `add_messages` and `upsert_messages` cost O(k) for k new
/// messages however long the history is.
///
/// It reads like a slice: iterate, index, `len`, `last`, and [`get_by_id`](KeyedList::get_by_id).
pub type MessageList = KeyedList<Message>;

/// A list whose items are indexed by the key of the keyed reducer that merges into it.
///
/// A keyed reducer (`merge_by_key`, `dedupe_append`, `append_items`, `add_messages`,
/// `upsert_messages`) on a plain `Vec<T>` indexes the whole list on every merge: O(n) for a merge
/// of a few items into n. These collections keep their key index between merges, so a merge of k
/// items costs O(k) however long the list grows. They serialize as plain JSON lists and rebuild
/// their index on the first merge after deserializing.
///
/// ```
/// use agentstate::KeyedList;
/// use agentstate::reducers::{by_field, MergeByKey, Reducer};
///
/// #[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
/// struct Task { id: u32, status: String }
///
/// let by_id = MergeByKey::new(by_field(|t: &Task| &t.id));
/// let mut tasks: KeyedList<Task> = KeyedList::new();
/// // A keyed list's update is a keyed list too; a `Vec` converts with `.into()`.
/// by_id.reduce(&mut tasks, vec![Task { id: 1, status: "pending".into() }].into())?;
/// by_id.reduce(&mut tasks, vec![Task { id: 1, status: "done".into() }].into())?;
/// assert_eq!(tasks.len(), 1);
/// assert_eq!(tasks[0].status, "done");
/// assert_eq!(serde_json::to_string(&tasks)?, r#"[{"id":1,"status":"done"}]"#);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// The index holds key *fingerprints*: a lookup hashes the key to 128 bits (one randomly keyed
/// SipHash-1-3-128 pass) and compares that with the index entry, so it never reads the list's
/// items (at 100k messages each such read is a cache and TLB miss). Two different keys are taken
/// for one with probability 2⁻¹²⁸; debug builds check every hit against the item's key. An
/// update's keys are looked up in one batch, so that the probes' cache misses overlap, and
/// appends go into room the list already has (`Vec` growth is amortized). Figures:
/// `benches/README.md`.
///
/// The index belongs to one key function: the first keyed merge builds it, and later merges with
/// the same key function keep it up to date. Reading is as cheap as a slice (`Deref<Target =
/// [T]>`); any mutable access through [`get_mut`](KeyedList::get_mut) or
/// [`iter_mut`](KeyedList::iter_mut) drops the index, which the next merge rebuilds.
///
/// The index compares 128-bit fingerprints of keys (one randomly keyed SipHash-1-3-128 value), not the
/// keys themselves, so that a merge reads no item it does not change: in a long list each such
/// read is a cache miss. Two different keys are taken for one with probability 2⁻¹²⁸ per
/// comparison, far below the rate of hardware memory errors; keys that share only half of a
/// fingerprint are told apart exactly.
pub struct KeyedList<T> {
    items: Vec<T>,
    index: OnceLock<KeyIndex>,
}

/// Which key function an index was built with.
#[derive(Debug, Clone, PartialEq, Eq)]
struct KeyTag {
    type_id: TypeId,
    label: Option<String>,
}

impl KeyTag {
    fn of<T, K: KeyFn<T> + 'static>(key: &K) -> Self {
        KeyTag {
            type_id: TypeId::of::<K>(),
            label: key.key_label().map(str::to_owned),
        }
    }

    /// Whether an index with this tag was built by `key`'s key function (without allocating).
    fn matches<T, K: KeyFn<T> + 'static>(&self, key: &K) -> bool {
        self.type_id == TypeId::of::<K>() && self.label.as_deref() == key.key_label()
    }
}

/// A key's 128-bit fingerprint: the two halves of one randomly keyed SipHash-1-3-128 hash, computed
/// in one pass over the key. `probe` places the key in the slot table; `check` tells two keys
/// with the same `probe` apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Fingerprint {
    probe: u64,
    check: u64,
}

/// Where the index places a key: the last position of an item with the key's fingerprint.
#[derive(Debug, Clone, Copy)]
struct Slot {
    check: u64,
    at: usize,
}

/// The key index of a [`KeyedList`]: each key's fingerprint to the last position of an item with
/// that key.
///
/// A lookup compares fingerprints, not keys, so it never reads the list's items: in a list of
/// 100k messages each item read is a cache (and TLB) miss, and not reading them is what keeps a
/// merge into a long list about as fast as one into a short list. Two keys are taken for equal
/// when both 64-bit halves of their fingerprints are equal; for two different keys that happens
/// with probability 2⁻¹²⁸ (the hash is keyed at random per index, so keys cannot be chosen to
/// collide), the same bet as a content-addressed store. Keys whose `probe` halves collide but
/// whose `check` halves differ are told apart exactly, by a scan of the list that compares keys.
/// Debug builds also compare every key found with the item's key.
#[derive(Clone)]
pub(crate) struct KeyIndex {
    tag: KeyTag,
    hasher: FingerprintHasher,
    slots: HashMap<u64, Slot, BuildHasherDefault<Prehashed>>,
}

/// The keys of an index's SipHash-1-3-128, drawn at random for each index so that keys cannot be
/// chosen to collide.
#[derive(Clone, Copy)]
struct FingerprintHasher {
    k0: u64,
    k1: u64,
}

impl FingerprintHasher {
    /// Random keys, from the standard library's randomly seeded `RandomState`.
    fn random() -> Self {
        let seed = RandomState::new();
        FingerprintHasher {
            k0: seed.hash_one(0x5eed_u64),
            k1: seed.hash_one(0xf00d_u64),
        }
    }

    /// Hashes `k` once, to 128 bits.
    fn fingerprint<Q: Hash + ?Sized>(&self, k: &Q) -> Fingerprint {
        let mut hasher = SipHasher13::new_with_keys(self.k0, self.k1);
        k.hash(&mut hasher);
        let hash = hasher.finish128();
        Fingerprint {
            probe: hash.h1,
            check: hash.h2,
        }
    }
}

/// The hasher of [`KeyIndex::slots`]: its keys are already hashes (by a randomly keyed
/// `RandomState`), so hashing them again would only cost time.
#[derive(Default)]
struct Prehashed(u64);

impl Hasher for Prehashed {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        // Only `write_u64` is used; fold anything else in so that the hasher stays correct.
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }
    fn write_u64(&mut self, hash: u64) {
        self.0 = hash;
    }
}

/// What the slot table says about a fingerprint.
enum Probe {
    /// No item has a key with this fingerprint's `probe` half: the key is absent.
    Absent,
    /// The last item with this fingerprint.
    At(usize),
    /// Another key shares the `probe` half: only a scan can tell.
    Unsure,
}

impl KeyIndex {
    fn build<T, K: KeyFn<T> + 'static>(key: &K, items: &[T]) -> Result<Self, ReduceError> {
        let mut index = KeyIndex {
            tag: KeyTag::of(key),
            hasher: FingerprintHasher::random(),
            slots: HashMap::with_capacity_and_hasher(items.len(), Default::default()),
        };
        for (i, item) in items.iter().enumerate() {
            index.insert(key, item, i)?;
        }
        Ok(index)
    }

    /// The fingerprint of a key.
    pub(crate) fn fingerprint<Q: Hash + ?Sized>(&self, k: &Q) -> Fingerprint {
        self.hasher.fingerprint(k)
    }

    fn insert<T, K: KeyFn<T>>(&mut self, key: &K, item: &T, at: usize) -> Result<(), ReduceError> {
        let fingerprint = self.fingerprint(&key.key(item)?);
        self.insert_fingerprint(fingerprint, at);
        Ok(())
    }

    /// Records that the item at `at` has a key with this fingerprint.
    fn insert_fingerprint(&mut self, fingerprint: Fingerprint, at: usize) {
        self.slots.insert(
            fingerprint.probe,
            Slot {
                check: fingerprint.check,
                at,
            },
        );
    }

    fn probe(&self, fingerprint: Fingerprint, len: usize) -> Probe {
        match self.slots.get(&fingerprint.probe) {
            None => Probe::Absent,
            Some(slot) if slot.check == fingerprint.check && slot.at < len => Probe::At(slot.at),
            Some(_) => Probe::Unsure,
        }
    }

    /// The last index of an item with each key of `keys`, in order: the same as calling
    /// [`find`](KeyIndex::find) for each, but with all fingerprints computed before the slot
    /// table is probed, so that the probes' cache misses overlap.
    pub(crate) fn find_many<'a, T, K: KeyFn<T>>(
        &self,
        items: &'a [T],
        key: &'a K,
        keys: &[K::Key<'a>],
    ) -> Result<Vec<Option<usize>>, ReduceError> {
        let fingerprints: Vec<Fingerprint> = keys.iter().map(|k| self.fingerprint(k)).collect();
        keys.iter()
            .zip(fingerprints)
            .map(|(k, fingerprint)| self.find_fingerprint(items, key, k, fingerprint))
            .collect()
    }

    /// The last index of an item whose key equals `k`.
    pub(crate) fn find<'a, T, K: KeyFn<T>>(
        &self,
        items: &'a [T],
        key: &'a K,
        k: &K::Key<'a>,
    ) -> Result<Option<usize>, ReduceError> {
        self.find_fingerprint(items, key, k, self.fingerprint(k))
    }

    /// [`find`](KeyIndex::find) with the key's fingerprint already computed.
    fn find_fingerprint<'a, T, K: KeyFn<T>>(
        &self,
        items: &'a [T],
        key: &'a K,
        k: &K::Key<'a>,
        fingerprint: Fingerprint,
    ) -> Result<Option<usize>, ReduceError> {
        match self.probe(fingerprint, items.len()) {
            Probe::Absent => Ok(None),
            Probe::At(at) => {
                #[cfg(debug_assertions)]
                if let Ok(found) = key.key(&items[at]) {
                    debug_assert!(found == *k, "the key index of a KeyedList is stale");
                }
                Ok(Some(at))
            }
            // Two keys share a `probe` hash: scan for this one, comparing keys.
            Probe::Unsure => {
                for (i, item) in items.iter().enumerate().rev() {
                    if key.key(item)? == *k {
                        return Ok(Some(i));
                    }
                }
                Ok(None)
            }
        }
    }
}

impl<T> KeyedList<T> {
    /// An empty list.
    pub const fn new() -> Self {
        KeyedList {
            items: Vec::new(),
            index: OnceLock::new(),
        }
    }

    /// The items as a slice.
    pub fn as_slice(&self) -> &[T] {
        &self.items
    }

    /// The items as a `Vec`, dropping the index.
    pub fn into_vec(self) -> Vec<T> {
        self.items
    }

    /// Appends an item. The index is dropped (this list does not know the key function), and
    /// rebuilt by the next keyed merge; merge through a reducer to keep it.
    pub fn push(&mut self, item: T) {
        self.index.take();
        self.items.push(item);
    }

    /// Removes every item.
    pub fn clear(&mut self) {
        self.index.take();
        self.items.clear();
    }

    /// Keeps only the items for which `keep` returns true.
    pub fn retain(&mut self, keep: impl FnMut(&T) -> bool) {
        self.index.take();
        self.items.retain(keep);
    }

    /// A mutable reference to the item at `position`; drops the index, since the item's key may
    /// change.
    pub fn get_mut(&mut self, position: usize) -> Option<&mut T> {
        self.index.take();
        self.items.get_mut(position)
    }

    /// Iterates mutably; drops the index, since keys may change.
    pub fn iter_mut(&mut self) -> std::slice::IterMut<'_, T> {
        self.index.take();
        self.items.iter_mut()
    }

    /// The index for `key`: the kept one if it was built with the same key function, otherwise
    /// a new one (kept for later merges when the list had none).
    pub(crate) fn index_for<K: KeyFn<T> + 'static>(
        &self,
        key: &K,
    ) -> Result<Cow<'_, KeyIndex>, ReduceError> {
        if let Some(index) = self.index.get() {
            if index.tag.matches(key) {
                return Ok(Cow::Borrowed(index));
            }
            return KeyIndex::build(key, &self.items).map(Cow::Owned);
        }
        let built = KeyIndex::build(key, &self.items)?;
        match self.index.set(built) {
            Ok(()) => Ok(Cow::Borrowed(self.index.get().expect("just set"))),
            Err(built) => Ok(Cow::Owned(built)),
        }
    }

    /// The last position of an item with the key of each of `probes` (under `key`), in order,
    /// looked up in one batch.
    pub(crate) fn find_keys_of<K: KeyFn<T> + 'static>(
        &self,
        key: &K,
        probes: &[T],
    ) -> Result<Vec<Option<usize>>, ReduceError> {
        let index = self.index_for(key)?;
        let keys = probes
            .iter()
            .map(|item| key.key(item))
            .collect::<Result<Vec<_>, _>>()?;
        index.find_many(&self.items, key, &keys)
    }

    /// The last position of an item with the key of `probe` (under `key`): what
    /// [`find_keys_of`](KeyedList::find_keys_of) gives for one probe, without its batch's
    /// allocations.
    pub(crate) fn find_key_of<K: KeyFn<T> + 'static>(
        &self,
        key: &K,
        probe: &T,
    ) -> Result<Option<usize>, ReduceError> {
        let index = self.index_for(key)?;
        index.find(&self.items, key, &key.key(probe)?)
    }

    /// Makes sure the kept index is the one for `key`, rebuilding it if needed. On a key that
    /// cannot be computed the index is dropped instead.
    fn ensure_index<K: KeyFn<T> + 'static>(&mut self, key: &K) {
        if !self.index.get().is_some_and(|index| index.tag.matches(key)) {
            self.index = match KeyIndex::build(key, &self.items) {
                Ok(index) => OnceLock::from(index),
                Err(_) => OnceLock::new(),
            };
        }
    }

    /// Appends items whose keys are computed by `key`, keeping the index.
    pub(crate) fn extend_keyed<K: KeyFn<T> + 'static>(&mut self, key: &K, items: Vec<T>) {
        if items.is_empty() {
            return;
        }
        let start = self.items.len();
        self.items.extend(items);
        // A rebuilt index covers the new items already; inserting them again is harmless (the
        // same last index per key).
        self.ensure_index(key);
        let KeyedList { items, index: lock } = self;
        let Some(index) = lock.get_mut() else {
            return;
        };
        let failed = items
            .iter()
            .enumerate()
            .skip(start)
            .any(|(i, item)| index.insert(key, item, i).is_err());
        if failed {
            lock.take();
        }
    }

    /// Replaces items at the given positions with items of the same key under `key`. The kept
    /// index stays valid when it is `key`'s; an index of another key function is dropped, since
    /// under that function the new items may have other keys.
    pub(crate) fn replace_at<K: KeyFn<T> + 'static>(
        &mut self,
        key: &K,
        replacements: Vec<(usize, T)>,
    ) {
        if replacements.is_empty() {
            return;
        }
        if !self.index.get().is_some_and(|index| index.tag.matches(key)) {
            self.index.take();
        }
        for (at, item) in replacements {
            self.items[at] = item;
        }
    }

    /// Replaces every item, dropping the index.
    pub(crate) fn replace_all(&mut self, items: Vec<T>) {
        self.index.take();
        self.items = items;
    }
}

impl<T: HasId> KeyedList<T> {
    /// The last item whose [`HasId`] id is `id`, found through the index.
    ///
    /// ```
    /// use agentstate::MessageList;
    /// use agentstate::message::{Message, Role};
    ///
    /// let list: MessageList = vec![Message::text_message("hi", Role::User).with_id("m1")].into();
    /// assert!(list.get_by_id(&"m1".into()).is_some());
    /// assert!(list.get_by_id(&"m2".into()).is_none());
    /// ```
    pub fn get_by_id(&self, id: &T::Id) -> Option<&T> {
        match self.index_for(&ById) {
            Ok(index) => index
                .find(&self.items, &ById, &id)
                .ok()
                .flatten()
                .map(|at| &self.items[at]),
            Err(_) => self.items.iter().rev().find(|item| item.id() == id),
        }
    }

    /// Whether an item with this id is in the list.
    pub fn contains_id(&self, id: &T::Id) -> bool {
        self.get_by_id(id).is_some()
    }
}

impl<T> ListField for KeyedList<T> {
    type Item = T;
}

impl<T> Default for KeyedList<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: Clone> Clone for KeyedList<T> {
    fn clone(&self) -> Self {
        KeyedList {
            items: self.items.clone(),
            index: self.index.clone(),
        }
    }
}

impl<T: fmt::Debug> fmt::Debug for KeyedList<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(&self.items).finish()
    }
}

impl<T: PartialEq> PartialEq for KeyedList<T> {
    fn eq(&self, other: &Self) -> bool {
        self.items == other.items
    }
}

impl<T: Eq> Eq for KeyedList<T> {}

impl<T: PartialEq> PartialEq<Vec<T>> for KeyedList<T> {
    fn eq(&self, other: &Vec<T>) -> bool {
        &self.items == other
    }
}

impl<T> std::ops::Deref for KeyedList<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        &self.items
    }
}

impl<T> From<Vec<T>> for KeyedList<T> {
    fn from(items: Vec<T>) -> Self {
        KeyedList {
            items,
            index: OnceLock::new(),
        }
    }
}

impl<T> From<KeyedList<T>> for Vec<T> {
    fn from(list: KeyedList<T>) -> Self {
        list.items
    }
}

impl<T> Extend<T> for KeyedList<T> {
    /// Appends items; like [`push`](KeyedList::push), this drops the index.
    fn extend<I: IntoIterator<Item = T>>(&mut self, iter: I) {
        self.index.take();
        self.items.extend(iter);
    }
}

impl<T> FromIterator<T> for KeyedList<T> {
    fn from_iter<I: IntoIterator<Item = T>>(iter: I) -> Self {
        Vec::from_iter(iter).into()
    }
}

impl<T> IntoIterator for KeyedList<T> {
    type Item = T;
    type IntoIter = std::vec::IntoIter<T>;
    fn into_iter(self) -> Self::IntoIter {
        self.items.into_iter()
    }
}

impl<'a, T> IntoIterator for &'a KeyedList<T> {
    type Item = &'a T;
    type IntoIter = std::slice::Iter<'a, T>;
    fn into_iter(self) -> Self::IntoIter {
        self.items.iter()
    }
}

impl<T: Serialize> Serialize for KeyedList<T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.items.serialize(serializer)
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for KeyedList<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Vec::<T>::deserialize(deserializer).map(Self::from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys::{by_field, by_value, KeyRef};
    use crate::reducers::{DedupeAppend, MergeByKey, Reducer};

    #[test]
    fn serializes_as_a_plain_list_and_rebuilds_on_deserialize() {
        let reducer = MergeByKey::new(by_field(|p: &(u32, String)| &p.0));
        let mut list = KeyedList::new();
        reducer
            .reduce(
                &mut list,
                vec![(1, "a".to_string()), (2, "b".to_string())].into(),
            )
            .unwrap();
        let json = serde_json::to_string(&list).unwrap();
        assert_eq!(json, r#"[[1,"a"],[2,"b"]]"#);
        let mut back: KeyedList<(u32, String)> = serde_json::from_str(&json).unwrap();
        assert_eq!(back, list);
        reducer
            .reduce(&mut back, vec![(2, "B".to_string())].into())
            .unwrap();
        assert_eq!(
            back.as_slice(),
            [(1, "a".to_string()), (2, "B".to_string())]
        );
    }

    #[test]
    fn a_second_key_function_gets_its_own_index() {
        let mut list: KeyedList<(u32, u32)> = vec![(1, 10), (2, 20)].into();
        let by_first = MergeByKey::new(by_value(|p: &(u32, u32)| p.0));
        let by_second = DedupeAppend::by(by_value(|p: &(u32, u32)| p.1));
        by_first.reduce(&mut list, vec![(1, 11)].into()).unwrap();
        // (3, 20) has a new first key but an existing second key.
        by_second
            .reduce(&mut list, vec![(3, 20), (4, 40)].into())
            .unwrap();
        assert_eq!(list.as_slice(), [(1, 11), (2, 20), (4, 40)]);
        by_first.reduce(&mut list, vec![(4, 44)].into()).unwrap();
        assert_eq!(list.as_slice(), [(1, 11), (2, 20), (4, 44)]);
    }

    #[test]
    fn the_slot_hasher_passes_prehashed_keys_through() {
        let mut h = Prehashed::default();
        h.write_u64(0xDEAD_BEEF_0123_4567);
        assert_eq!(h.finish(), 0xDEAD_BEEF_0123_4567);
        // Other writes still hash (differently for different input), though none are made.
        let bytes = |b: &[u8]| {
            let mut h = Prehashed::default();
            h.write(b);
            h.finish()
        };
        assert_ne!(bytes(b"ab"), bytes(b"ba"));
        // Many indexed keys: every one is found at its last position, absent keys are not.
        let reducer = MergeByKey::new(by_value(|p: &(u32, u32)| p.0));
        let mut list: KeyedList<(u32, u32)> = (0..5_000).map(|i| (i, 0)).collect();
        reducer.reduce(&mut list, vec![(7, 1)].into()).unwrap();
        reducer
            .reduce(&mut list, (0..5_000).step_by(7).map(|i| (i, 2)).collect())
            .unwrap();
        assert_eq!(list.len(), 5_000);
        assert!(list
            .iter()
            .all(|&(i, v)| v == if i % 7 == 0 { 2 } else { 0 }));
        reducer.reduce(&mut list, vec![(9_999, 3)].into()).unwrap();
        assert_eq!(list.len(), 5_001);
    }

    #[test]
    fn one_key_type_with_two_labels_keeps_two_indexes_apart() {
        use crate::reducers::JsonField;
        use serde_json::json;
        let by_id = MergeByKey::new(JsonField("id".into()));
        let by_name = MergeByKey::new(JsonField("name".into()));
        let mut list: KeyedList<serde_json::Value> =
            vec![json!({"id": 1, "name": "a"}), json!({"id": 2, "name": "b"})].into();
        by_id
            .reduce(&mut list, vec![json!({"id": 1, "name": "b"})].into())
            .unwrap();
        // By name, "b" is now at position 1 (the last one); by id, 1 is at position 0.
        by_name
            .reduce(&mut list, vec![json!({"id": 3, "name": "b"})].into())
            .unwrap();
        by_id
            .reduce(&mut list, vec![json!({"id": 1, "name": "c"})].into())
            .unwrap();
        assert_eq!(
            list.as_slice(),
            [json!({"id": 1, "name": "c"}), json!({"id": 3, "name": "b"})]
        );
    }

    #[test]
    fn replacing_by_one_key_does_not_leave_another_keys_index_stale() {
        use crate::reducers::JsonField;
        use serde_json::json;
        let by_id = MergeByKey::new(JsonField("id".into()));
        let by_name = MergeByKey::new(JsonField("name".into()));
        let mut list: KeyedList<serde_json::Value> = KeyedList::new();
        by_id
            .reduce(
                &mut list,
                vec![json!({"id": 1, "name": "a"}), json!({"id": 2, "name": "b"})].into(),
            )
            .unwrap();
        // Replaced by name, the item at position 1 changes its id from 2 to 3 ...
        by_name
            .reduce(&mut list, vec![json!({"id": 3, "name": "b"})].into())
            .unwrap();
        // ... so by id, 3 is found there and replaced, and 2 is new.
        by_id
            .reduce(
                &mut list,
                vec![json!({"id": 3, "name": "B"}), json!({"id": 2, "name": "x"})].into(),
            )
            .unwrap();
        assert_eq!(
            list.as_slice(),
            [
                json!({"id": 1, "name": "a"}),
                json!({"id": 3, "name": "B"}),
                json!({"id": 2, "name": "x"})
            ]
        );
    }

    #[test]
    fn mutable_access_drops_the_index_and_merges_stay_correct() {
        let reducer = MergeByKey::new(by_field(|p: &(u32, u32)| &p.0));
        let mut list: KeyedList<(u32, u32)> = KeyedList::new();
        reducer
            .reduce(&mut list, vec![(1, 1), (2, 2)].into())
            .unwrap();
        list.get_mut(0).unwrap().0 = 9; // the key changes behind the index
        reducer
            .reduce(&mut list, vec![(9, 90), (1, 10)].into())
            .unwrap();
        assert_eq!(list.as_slice(), [(9, 90), (2, 2), (1, 10)]);
        list.push((2, 3));
        reducer.reduce(&mut list, vec![(2, 30)].into()).unwrap();
        assert_eq!(list.as_slice(), [(9, 90), (2, 2), (1, 10), (2, 30)]);
    }

    /// A list of `(key, 0)` pairs.
    fn pairs(keys: &[u32]) -> KeyedList<(u32, u32)> {
        keys.iter().map(|&k| (k, 0)).collect()
    }

    /// The first element of a pair, as key.
    fn first() -> KeyRef<impl Fn(&(u32, u32)) -> &u32, u32> {
        by_field(|p: &(u32, u32)| &p.0)
    }

    #[test]
    fn a_probe_hash_shared_with_another_key_falls_back_to_comparing_keys() {
        let (list, key) = (pairs(&[10, 20, 30]), first());
        let mut index = KeyIndex::build(&key, &list).unwrap();
        // Make key 10 share its `probe` half with a different key: the slot now holds another
        // check half, pointing at the item with key 20.
        let ten = index.fingerprint(&&10u32);
        index.slots.insert(
            ten.probe,
            Slot {
                check: !ten.check,
                at: 1,
            },
        );
        assert_eq!(index.find(&list, &key, &&10).unwrap(), Some(0));
        // An absent key in the same situation is still absent.
        let forty = index.fingerprint(&&40u32);
        index.slots.insert(
            forty.probe,
            Slot {
                check: !forty.check,
                at: 2,
            },
        );
        assert_eq!(index.find(&list, &key, &&40).unwrap(), None);
        let keys = [&10, &40, &30];
        assert_eq!(
            index.find_many(&list, &key, &keys).unwrap(),
            [Some(0), None, Some(2)]
        );
    }

    #[test]
    fn a_slot_past_the_end_of_the_list_is_not_trusted() {
        let (list, key) = (pairs(&[10, 20]), first());
        let mut index = KeyIndex::build(&key, &list).unwrap();
        let twenty = index.fingerprint(&&20u32);
        index.insert_fingerprint(twenty, 7);
        assert_eq!(index.find(&list, &key, &&20).unwrap(), Some(1));
    }

    #[test]
    #[cfg(debug_assertions)]
    #[should_panic(expected = "the key index of a KeyedList is stale")]
    fn debug_builds_catch_an_index_that_points_at_the_wrong_item() {
        let (list, key) = (pairs(&[10, 20]), first());
        let mut index = KeyIndex::build(&key, &list).unwrap();
        let ten = index.fingerprint(&&10u32);
        index.insert_fingerprint(ten, 1);
        let _ = index.find(&list, &key, &&10);
    }

    #[test]
    fn fingerprints_differ_between_keys_and_between_indexes() {
        let (list, key) = (pairs(&[1]), first());
        let a = KeyIndex::build(&key, &list).unwrap();
        let b = KeyIndex::build(&key, &list).unwrap();
        assert_eq!(a.fingerprint(&1u32), a.fingerprint(&1u32));
        assert_ne!(a.fingerprint(&1u32), a.fingerprint(&2u32));
        // Each index keys its hashers at random, so keys cannot be chosen to collide.
        assert_ne!(a.fingerprint(&1u32), b.fingerprint(&1u32));
        let f = a.fingerprint(&1u32);
        assert_ne!(f.probe, f.check);
    }

    #[test]
    fn batched_lookups_answer_like_single_ones() {
        let list: KeyedList<(u32, u32)> = (0..500).map(|i| (i % 200, i)).collect();
        let key = by_field(|p: &(u32, u32)| &p.0);
        let index = list.index_for(&key).unwrap();
        let wanted: Vec<u32> = vec![0, 199, 200, 7, 1_000, 7, 150];
        let keys: Vec<&u32> = wanted.iter().collect();
        let batched = index.find_many(list.as_slice(), &key, &keys).unwrap();
        let single: Vec<Option<usize>> = keys
            .iter()
            .map(|k| index.find(list.as_slice(), &key, k).unwrap())
            .collect();
        assert_eq!(batched, single);
        // The last occurrence of each present key; absent keys are None.
        assert_eq!(batched[0], Some(400));
        assert_eq!(batched[2], None);
        assert_eq!(batched[4], None);
    }
}
