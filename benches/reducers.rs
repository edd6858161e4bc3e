//! Merge cost of every reducer: 10 new items merged into a field that already holds 1k, 10k and
//! 100k items, on a plain container (`Vec`, maps) and, where the reducer has one, on an indexed
//! container (`KeyedList`, `MessageList`, `VecDeque` for `bounded_append`).
//!
//! Only the merge is timed. For each iteration the setup copies the prepared field into a fresh
//! one and runs one warm-up merge, which builds a keyed list's index; the timed merge is then the
//! cost of one more merge into a long-lived state. A list is copied with room for both merges,
//! as a long-lived list has room at every merge but the one in about n/k that doubles its
//! allocation (that merge also copies the list: O(n), amortized O(1) per item, as for any
//! `Vec`). The state is dropped outside the timing. (The replacing reducers get no warm-up, which
//! would replace the n items; dropping the old value is part of their cost.)
//!
//! Caches: after that setup, the field's memory is as warm as the setup left it, as between two
//! merges in a row; a field of 1k items fits in the CPU's L2 cache, one of 100k items does not,
//! so part of what separates the two is the cost of cache misses, not of work. The `cold_cache`
//! group repeats the indexed benchmarks after reading through a buffer larger than L2 in the
//! setup, so that every size starts with the same cold caches and TLB (as in an agent, where
//! model calls and tools run between two merges). The `reference` group measures 10 lookups in
//! a `std` `HashMap` of n entries under both conditions: the textbook O(1) structure, for scale.
//!
//! Run with `cargo bench --bench reducers`; `benches/README.md`'s table comes from it.

use agentstate::message::{Message, Role};
use agentstate::reducers::{
    by_field, AddMessages, Append, AppendItems, BoundedAppend, ConcatFlatten, DedupeAppend, HasId,
    KeyRef, LastWriteWins, Merge, MergeAll, MergeByKey, MessageUpdate, Reducer, ReplaceMessages,
    ReplaceValue, UpsertMessages,
};
use agentstate::{KeyedList, MessageList};
use divan::Bencher;
use std::collections::{BTreeMap, HashMap, VecDeque};

fn main() {
    divan::main();
}

/// How many items the field holds before the merge.
const SIZES: [usize; 3] = [1_000, 10_000, 100_000];

/// How many items one merge brings.
const K: usize = 10;

/// Samples per benchmark: one merge per sample, since each needs a fresh copy of the field.
const SAMPLES: u32 = 200;

/// The cache state the timed merge starts from.
#[derive(Clone, Copy)]
enum Cache {
    /// As the setup (clone and warm-up merge) left it.
    AsLeft,
    /// Cold: the setup ends by reading a buffer larger than the L2 cache.
    Cold,
}

/// Larger than the L2 cache of the machines this runs on (2 MiB per core on the reference VM).
const EVICTION_BYTES: usize = 16 << 20;

/// Reads every cache line of `buffer`, pushing what the setup touched out of the L1 and L2
/// caches.
fn evict(buffer: &[u8]) {
    let mut sum = 0u8;
    for line in buffer.chunks(64) {
        sum ^= line[0];
    }
    divan::black_box(sum);
}

/// A record with an id, as `merge_by_key`, `dedupe_append` and `append_items` merge them.
#[derive(Debug, Clone, PartialEq)]
struct Rec {
    id: u64,
    payload: String,
}

impl HasId for Rec {
    type Id = u64;
    fn id(&self) -> &u64 {
        &self.id
    }
}

fn rec(id: u64) -> Rec {
    Rec {
        id,
        payload: format!("record number {id}"),
    }
}

fn word(i: usize) -> String {
    format!("item-{i:08}")
}

fn words(range: std::ops::Range<usize>) -> Vec<String> {
    range.map(word).collect()
}

/// `K` ids of which half are already in a field of `n` items (spread over the whole field, so
/// that lookups touch cold memory) and half are new; `salt` makes the new ids of the warm-up and
/// of the timed merge differ.
fn mixed_ids(n: usize, salt: usize) -> Vec<usize> {
    let half = K / 2;
    let existing = (0..half).map(move |i| i * n / half + n / (2 * half));
    existing
        .chain(novel_ids(n, salt).into_iter().take(K - half))
        .collect()
}

/// `K` new ids.
fn novel_ids(n: usize, salt: usize) -> Vec<usize> {
    (0..K).map(|i| n + salt * 1_000 + i).collect()
}

fn recs(ids: &[usize]) -> Vec<Rec> {
    ids.iter().map(|&i| rec(i as u64)).collect()
}

fn by_id() -> KeyRef<impl Fn(&Rec) -> &u64 + Clone, u64> {
    by_field(|r: &Rec| &r.id)
}

/// A copy of a prepared field to merge into, with room for the warm-up and the timed merge.
trait Fresh {
    fn fresh(&self) -> Self;
}

impl<T: Clone> Fresh for Vec<T> {
    fn fresh(&self) -> Self {
        let mut copy = Vec::with_capacity(self.len() + 2 * K);
        copy.extend_from_slice(self);
        copy
    }
}

impl<T: Clone> Fresh for VecDeque<T> {
    fn fresh(&self) -> Self {
        let mut copy = VecDeque::with_capacity(self.len() + 2 * K);
        copy.extend(self.iter().cloned());
        copy
    }
}

/// Without an index: the warm-up merge builds it.
impl<T: Clone> Fresh for KeyedList<T> {
    fn fresh(&self) -> Self {
        KeyedList::from(self.as_slice().to_vec().fresh())
    }
}

impl<K: Clone, V: Clone> Fresh for HashMap<K, V> {
    fn fresh(&self) -> Self {
        self.clone()
    }
}

impl<K: Clone, V: Clone> Fresh for BTreeMap<K, V> {
    fn fresh(&self) -> Self {
        self.clone()
    }
}

/// Benchmarks one merge: the setup makes a [`Fresh`] copy of `field` and merges `warm_up` into
/// it (when given), then merging `update` is timed.
fn bench_merge<T, R>(
    bencher: Bencher,
    reducer: &R,
    field: &T,
    warm_up: Option<R::Update>,
    update: R::Update,
) where
    T: Fresh,
    R: Reducer<T>,
    R::Update: Clone,
{
    bench_merge_in(bencher, Cache::AsLeft, reducer, field, warm_up, update);
}

/// [`bench_merge`], starting from the given cache state.
fn bench_merge_in<T, R>(
    bencher: Bencher,
    cache: Cache,
    reducer: &R,
    field: &T,
    warm_up: Option<R::Update>,
    update: R::Update,
) where
    T: Fresh,
    R: Reducer<T>,
    R::Update: Clone,
{
    let eviction = match cache {
        Cache::AsLeft => Vec::new(),
        Cache::Cold => vec![1u8; EVICTION_BYTES],
    };
    bencher
        .with_inputs(|| {
            let mut state = field.fresh();
            if let Some(warm_up) = &warm_up {
                reducer
                    .reduce(&mut state, warm_up.clone())
                    .expect("the warm-up merge succeeds");
            }
            let update = update.clone();
            evict(&eviction);
            (state, Some(update))
        })
        .bench_local_refs(|(state, update)| {
            let update = update.take().expect("one merge per input");
            reducer.reduce(state, update).expect("the merge succeeds");
        });
}

// ---------------------------------------------------------------------------------------------
// Replacing reducers: the update replaces the field, so the old n items are dropped.

mod last_write_wins {
    use super::*;

    #[divan::bench(args = SIZES, sample_count = SAMPLES, sample_size = 1)]
    fn vec(bencher: Bencher, n: usize) {
        let update = words(n..n + K);
        bench_merge(bencher, &LastWriteWins, &words(0..n), None, update);
    }
}

mod replace_value {
    use super::*;

    #[divan::bench(args = SIZES, sample_count = SAMPLES, sample_size = 1)]
    fn vec(bencher: Bencher, n: usize) {
        let update = words(n..n + K);
        bench_merge(bencher, &ReplaceValue, &words(0..n), None, update);
    }
}

// ---------------------------------------------------------------------------------------------
// Lists.

mod append {
    use super::*;

    #[divan::bench(args = SIZES, sample_count = SAMPLES, sample_size = 1)]
    fn vec(bencher: Bencher, n: usize) {
        let (warm, update) = (words(n..n + K), words(n + K..n + 2 * K));
        bench_merge(bencher, &Append, &words(0..n), Some(warm), update);
    }

    #[divan::bench(args = SIZES, sample_count = SAMPLES, sample_size = 1)]
    fn vec_deque(bencher: Bencher, n: usize) {
        let field: VecDeque<String> = words(0..n).into();
        let (warm, update) = (words(n..n + K), words(n + K..n + 2 * K));
        bench_merge(bencher, &Append, &field, Some(warm.into()), update.into());
    }
}

mod bounded_append {
    use super::*;

    /// The field is full (`max_len = n`): every merge evicts `K` items from the front.
    #[divan::bench(args = SIZES, sample_count = SAMPLES, sample_size = 1)]
    fn vec(bencher: Bencher, n: usize) {
        let reducer = BoundedAppend::new(n as i64).expect("a positive bound");
        let (warm, update) = (words(n..n + K), words(n + K..n + 2 * K));
        bench_merge(bencher, &reducer, &words(0..n), Some(warm), update);
    }

    #[divan::bench(args = SIZES, sample_count = SAMPLES, sample_size = 1)]
    fn vec_deque(bencher: Bencher, n: usize) {
        vec_deque_in(bencher, n, Cache::AsLeft);
    }

    pub(crate) fn vec_deque_in(bencher: Bencher, n: usize, cache: Cache) {
        let reducer = BoundedAppend::new(n as i64).expect("a positive bound");
        let field: VecDeque<String> = words(0..n).into();
        let (warm, update) = (words(n..n + K), words(n + K..n + 2 * K));
        bench_merge_in(
            bencher,
            cache,
            &reducer,
            &field,
            Some(warm.into()),
            update.into(),
        );
    }
}

mod concat_flatten {
    use super::*;

    /// The update is two lists of 5 items.
    fn update(from: usize) -> Vec<Vec<String>> {
        vec![words(from..from + K / 2), words(from + K / 2..from + K)]
    }

    #[divan::bench(args = SIZES, sample_count = SAMPLES, sample_size = 1)]
    fn vec(bencher: Bencher, n: usize) {
        let (warm, next) = (update(n), update(n + K));
        bench_merge(bencher, &ConcatFlatten, &words(0..n), Some(warm), next);
    }

    #[divan::bench(args = SIZES, sample_count = SAMPLES, sample_size = 1)]
    fn vec_deque(bencher: Bencher, n: usize) {
        let field: VecDeque<String> = words(0..n).into();
        let deques = |batches: Vec<Vec<String>>| -> Vec<VecDeque<String>> {
            batches.into_iter().map(VecDeque::from).collect()
        };
        let (warm, next) = (deques(update(n)), deques(update(n + K)));
        bench_merge(bencher, &ConcatFlatten, &field, Some(warm), next);
    }
}

// ---------------------------------------------------------------------------------------------
// Maps: half of the update's keys exist, half are new.

fn map_entries(ids: &[usize]) -> impl Iterator<Item = (String, String)> + '_ {
    ids.iter().map(|&i| (word(i), format!("value {i}")))
}

fn map_of<M: FromIterator<(String, String)>>(n: usize) -> M {
    (0..n).map(|i| (word(i), format!("value {i}"))).collect()
}

mod merge {
    use super::*;

    #[divan::bench(args = SIZES, sample_count = SAMPLES, sample_size = 1)]
    fn hash_map(bencher: Bencher, n: usize) {
        let field: HashMap<String, String> = map_of(n);
        let warm = map_entries(&mixed_ids(n, 1)).collect();
        let update = map_entries(&mixed_ids(n, 2)).collect();
        bench_merge(bencher, &Merge, &field, Some(warm), update);
    }

    #[divan::bench(args = SIZES, sample_count = SAMPLES, sample_size = 1)]
    fn btree_map(bencher: Bencher, n: usize) {
        let field: BTreeMap<String, String> = map_of(n);
        let warm = map_entries(&mixed_ids(n, 1)).collect();
        let update = map_entries(&mixed_ids(n, 2)).collect();
        bench_merge(bencher, &Merge, &field, Some(warm), update);
    }
}

mod merge_all {
    use super::*;

    /// Two maps of 5 entries each.
    fn update<M: FromIterator<(String, String)>>(n: usize, salt: usize) -> Vec<M> {
        let ids = mixed_ids(n, salt);
        vec![
            map_entries(&ids[..K / 2]).collect(),
            map_entries(&ids[K / 2..]).collect(),
        ]
    }

    #[divan::bench(args = SIZES, sample_count = SAMPLES, sample_size = 1)]
    fn hash_map(bencher: Bencher, n: usize) {
        let field: HashMap<String, String> = map_of(n);
        let (warm, next) = (update(n, 1), update(n, 2));
        bench_merge(bencher, &MergeAll, &field, Some(warm), next);
    }

    #[divan::bench(args = SIZES, sample_count = SAMPLES, sample_size = 1)]
    fn btree_map(bencher: Bencher, n: usize) {
        let field: BTreeMap<String, String> = map_of(n);
        let (warm, next) = (update(n, 1), update(n, 2));
        bench_merge(bencher, &MergeAll, &field, Some(warm), next);
    }
}

// ---------------------------------------------------------------------------------------------
// Keyed lists of records: half of the update's ids exist, half are new.

fn records(n: usize) -> Vec<Rec> {
    recs(&(0..n).collect::<Vec<_>>())
}

mod dedupe_append {
    use super::*;

    #[divan::bench(args = SIZES, sample_count = SAMPLES, sample_size = 1)]
    fn vec(bencher: Bencher, n: usize) {
        let reducer = DedupeAppend::by(by_id());
        let (warm, update) = (recs(&mixed_ids(n, 1)), recs(&mixed_ids(n, 2)));
        bench_merge(bencher, &reducer, &records(n), Some(warm), update);
    }

    #[divan::bench(args = SIZES, sample_count = SAMPLES, sample_size = 1)]
    fn keyed_list(bencher: Bencher, n: usize) {
        keyed_list_in(bencher, n, Cache::AsLeft);
    }

    pub(crate) fn keyed_list_in(bencher: Bencher, n: usize, cache: Cache) {
        let reducer = DedupeAppend::by(by_id());
        let field = KeyedList::from(records(n));
        let (warm, update) = (recs(&mixed_ids(n, 1)), recs(&mixed_ids(n, 2)));
        bench_merge_in(
            bencher,
            cache,
            &reducer,
            &field,
            Some(warm.into()),
            update.into(),
        );
    }
}

mod merge_by_key {
    use super::*;

    #[divan::bench(args = SIZES, sample_count = SAMPLES, sample_size = 1)]
    fn vec(bencher: Bencher, n: usize) {
        let reducer = MergeByKey::new(by_id());
        let (warm, update) = (recs(&mixed_ids(n, 1)), recs(&mixed_ids(n, 2)));
        bench_merge(bencher, &reducer, &records(n), Some(warm), update);
    }

    #[divan::bench(args = SIZES, sample_count = SAMPLES, sample_size = 1)]
    fn keyed_list(bencher: Bencher, n: usize) {
        keyed_list_in(bencher, n, Cache::AsLeft);
    }

    pub(crate) fn keyed_list_in(bencher: Bencher, n: usize, cache: Cache) {
        let reducer = MergeByKey::new(by_id());
        let field = KeyedList::from(records(n));
        let (warm, update) = (recs(&mixed_ids(n, 1)), recs(&mixed_ids(n, 2)));
        bench_merge_in(
            bencher,
            cache,
            &reducer,
            &field,
            Some(warm.into()),
            update.into(),
        );
    }
}

mod append_items {
    use super::*;

    #[divan::bench(args = SIZES, sample_count = SAMPLES, sample_size = 1)]
    fn vec(bencher: Bencher, n: usize) {
        let (warm, update) = (recs(&mixed_ids(n, 1)), recs(&mixed_ids(n, 2)));
        bench_merge(bencher, &AppendItems, &records(n), Some(warm), update);
    }

    #[divan::bench(args = SIZES, sample_count = SAMPLES, sample_size = 1)]
    fn keyed_list(bencher: Bencher, n: usize) {
        keyed_list_in(bencher, n, Cache::AsLeft);
    }

    pub(crate) fn keyed_list_in(bencher: Bencher, n: usize, cache: Cache) {
        let field = KeyedList::from(records(n));
        let (warm, update) = (recs(&mixed_ids(n, 1)), recs(&mixed_ids(n, 2)));
        bench_merge_in(
            bencher,
            cache,
            &AppendItems,
            &field,
            Some(warm.into()),
            update.into(),
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Messages (uuid v4 ids): half of the update's ids exist, half are new.

fn history(n: usize) -> Vec<Message> {
    (0..n)
        .map(|i| {
            let role = if i % 2 == 0 {
                Role::User
            } else {
                Role::Assistant
            };
            Message::text_message(format!("message number {i}"), role)
        })
        .collect()
}

/// `K` messages: half re-use ids spread over `history`, half are new.
fn mixed_messages(history: &[Message], salt: usize) -> Vec<Message> {
    let n = history.len();
    mixed_ids(n, salt)
        .into_iter()
        .map(|i| {
            let message = Message::text_message(format!("update {salt} {i}"), Role::Assistant);
            match history.get(i) {
                Some(old) => message.with_id(old.message_id.clone()),
                None => message,
            }
        })
        .collect()
}

fn upserts(messages: Vec<Message>) -> Vec<MessageUpdate> {
    messages.into_iter().map(MessageUpdate::from).collect()
}

mod add_messages {
    use super::*;

    #[divan::bench(args = SIZES, sample_count = SAMPLES, sample_size = 1)]
    fn vec(bencher: Bencher, n: usize) {
        let field = history(n);
        let (warm, update) = (mixed_messages(&field, 1), mixed_messages(&field, 2));
        bench_merge(bencher, &AddMessages, &field, Some(warm), update);
    }

    #[divan::bench(args = SIZES, sample_count = SAMPLES, sample_size = 1)]
    fn message_list(bencher: Bencher, n: usize) {
        message_list_in(bencher, n, Cache::AsLeft);
    }

    pub(crate) fn message_list_in(bencher: Bencher, n: usize, cache: Cache) {
        let plain = history(n);
        let (warm, update) = (mixed_messages(&plain, 1), mixed_messages(&plain, 2));
        let field: MessageList = plain.into();
        bench_merge_in(
            bencher,
            cache,
            &AddMessages,
            &field,
            Some(warm.into()),
            update.into(),
        );
    }
}

mod replace_messages {
    use super::*;

    #[divan::bench(args = SIZES, sample_count = SAMPLES, sample_size = 1)]
    fn vec(bencher: Bencher, n: usize) {
        let update = history(K);
        bench_merge(bencher, &ReplaceMessages, &history(n), None, update);
    }

    #[divan::bench(args = SIZES, sample_count = SAMPLES, sample_size = 1)]
    fn message_list(bencher: Bencher, n: usize) {
        let update = history(K);
        let field: MessageList = history(n).into();
        bench_merge(bencher, &ReplaceMessages, &field, None, update.into());
    }
}

mod upsert_messages {
    use super::*;

    /// 5 messages replace existing ones in place, 5 are appended.
    #[divan::bench(args = SIZES, sample_count = SAMPLES, sample_size = 1)]
    fn vec(bencher: Bencher, n: usize) {
        let field = history(n);
        let (warm, update) = (mixed_messages(&field, 1), mixed_messages(&field, 2));
        bench_merge(
            bencher,
            &UpsertMessages,
            &field,
            Some(upserts(warm)),
            upserts(update),
        );
    }

    #[divan::bench(args = SIZES, sample_count = SAMPLES, sample_size = 1)]
    fn message_list(bencher: Bencher, n: usize) {
        message_list_in(bencher, n, Cache::AsLeft);
    }

    pub(crate) fn message_list_in(bencher: Bencher, n: usize, cache: Cache) {
        let plain = history(n);
        let (warm, update) = (mixed_messages(&plain, 1), mixed_messages(&plain, 2));
        let field: MessageList = plain.into();
        bench_merge_in(
            bencher,
            cache,
            &UpsertMessages,
            &field,
            Some(upserts(warm)),
            upserts(update),
        );
    }

    /// As above, plus one removal: a removal rewrites the list (O(n), also on a MessageList).
    #[divan::bench(args = SIZES, sample_count = SAMPLES, sample_size = 1)]
    fn message_list_with_removal(bencher: Bencher, n: usize) {
        let plain = history(n);
        let (warm, update) = (mixed_messages(&plain, 1), mixed_messages(&plain, 2));
        let mut update = upserts(update);
        update.push(MessageUpdate::Remove(plain[n / 3].message_id.clone()));
        let field: MessageList = plain.into();
        bench_merge(
            bencher,
            &UpsertMessages,
            &field,
            Some(upserts(warm)),
            update,
        );
    }
}

// ---------------------------------------------------------------------------------------------
// The indexed containers again, from cold caches.

mod cold_cache {
    use super::*;

    #[divan::bench(args = SIZES, sample_count = SAMPLES, sample_size = 1)]
    fn add_messages_message_list(bencher: Bencher, n: usize) {
        add_messages::message_list_in(bencher, n, Cache::Cold);
    }

    #[divan::bench(args = SIZES, sample_count = SAMPLES, sample_size = 1)]
    fn upsert_messages_message_list(bencher: Bencher, n: usize) {
        upsert_messages::message_list_in(bencher, n, Cache::Cold);
    }

    #[divan::bench(args = SIZES, sample_count = SAMPLES, sample_size = 1)]
    fn dedupe_append_keyed_list(bencher: Bencher, n: usize) {
        dedupe_append::keyed_list_in(bencher, n, Cache::Cold);
    }

    #[divan::bench(args = SIZES, sample_count = SAMPLES, sample_size = 1)]
    fn merge_by_key_keyed_list(bencher: Bencher, n: usize) {
        merge_by_key::keyed_list_in(bencher, n, Cache::Cold);
    }

    #[divan::bench(args = SIZES, sample_count = SAMPLES, sample_size = 1)]
    fn append_items_keyed_list(bencher: Bencher, n: usize) {
        append_items::keyed_list_in(bencher, n, Cache::Cold);
    }

    #[divan::bench(args = SIZES, sample_count = SAMPLES, sample_size = 1)]
    fn bounded_append_vec_deque(bencher: Bencher, n: usize) {
        bounded_append::vec_deque_in(bencher, n, Cache::Cold);
    }
}

// ---------------------------------------------------------------------------------------------
// For scale: 10 lookups (5 present keys, 5 absent) in a `std` `HashMap<u64, u64>` of n entries,
// with the same setup (a fresh clone, then an insert) and the same two cache states.

mod reference {
    use super::*;

    fn lookups(bencher: Bencher, n: usize, cache: Cache) {
        let map: HashMap<u64, u64> = (0..n as u64).map(|i| (i, i)).collect();
        let keys: Vec<u64> = mixed_ids(n, 2).into_iter().map(|i| i as u64).collect();
        let eviction = match cache {
            Cache::AsLeft => Vec::new(),
            Cache::Cold => vec![1u8; EVICTION_BYTES],
        };
        bencher
            .with_inputs(|| {
                let mut map = map.clone();
                map.insert(u64::MAX, 0);
                evict(&eviction);
                map
            })
            .bench_local_refs(|map| {
                keys.iter()
                    .filter_map(|k| map.get(divan::black_box(k)))
                    .sum::<u64>()
            });
    }

    #[divan::bench(args = SIZES, sample_count = SAMPLES, sample_size = 1)]
    fn hash_map_10_lookups(bencher: Bencher, n: usize) {
        lookups(bencher, n, Cache::AsLeft);
    }

    #[divan::bench(args = SIZES, sample_count = SAMPLES, sample_size = 1)]
    fn hash_map_10_lookups_cold(bencher: Bencher, n: usize) {
        lookups(bencher, n, Cache::Cold);
    }
}
