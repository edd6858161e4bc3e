//! What a backend stores and returns (see [`backend`](crate::backend)).

use crate::error::StoreError;
use serde_json::{Map, Value};
use std::time::{SystemTime, UNIX_EPOCH};

/// The fingerprint of a state type's schema: a 64-bit FNV-1a hash of `State::schema()` as JSON
/// (field names, reducers and their parameters, in order) and, when the type declares one, of
/// its version ([`State::SCHEMA_VERSION`](agentstate::State)). Two types with equal
/// fingerprints read each other's rows directly. (A field's Rust type is not part of it: a
/// changed type is found when a row does not read, from the types recorded with the schema.)
///
/// ```
/// use agentstate::state::AgentState;
/// use agentstate_store::migrate::fingerprint;
///
/// assert_eq!(fingerprint::<AgentState>(), fingerprint::<AgentState>());
/// ```
pub fn fingerprint<S: agentstate::State>() -> u64 {
    let mut schema = serde_json::to_string(&S::schema()).unwrap_or_default();
    // Unversioned types keep the fingerprints they had before versions existed.
    if S::SCHEMA_VERSION != 0 {
        schema.push_str(&format!("\0version {}", S::SCHEMA_VERSION));
    }
    // FNV-1a: stable across builds and platforms, unlike std's hasher.
    schema
        .bytes()
        .fold(0xcbf2_9ce4_8422_2325_u64, |hash, byte| {
            (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
        })
}

/// A state type's schema as the store records it, once per fingerprint: what lets an old
/// schema be compared with a new one after the old type is gone (see [`migrate`](crate::migrate)).
///
/// ```
/// use agentstate::state::AgentState;
/// use agentstate_store::migrate::{fingerprint, SchemaRecord};
///
/// let record = SchemaRecord::of::<AgentState>();
/// assert_eq!(record.fingerprint, fingerprint::<AgentState>());
/// assert_eq!(record.version, 0); // AgentState declares none
/// assert!(record.fields().iter().any(|f| f.name == "context"));
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct SchemaRecord {
    /// Its fingerprint ([`fingerprint`]).
    pub fingerprint: u64,
    /// The version the type declared (`#[agent_state(version = N)]`), 0 if none.
    pub version: u32,
    /// The type's name (`std::any::type_name`).
    pub type_name: String,
    /// `State::schema()` as JSON: the fields, their reducers and parameters.
    pub schema: String,
    /// The fields' Rust types ([`State::FIELD_TYPES`](agentstate::State)) as a JSON array.
    pub types: String,
}

impl SchemaRecord {
    /// The record of `S`'s schema.
    pub fn of<S: agentstate::State>() -> Self {
        SchemaRecord {
            fingerprint: fingerprint::<S>(),
            version: S::SCHEMA_VERSION,
            type_name: std::any::type_name::<S>().to_owned(),
            schema: serde_json::to_string(&S::schema()).unwrap_or_default(),
            types: serde_json::to_string(S::FIELD_TYPES).unwrap_or_default(),
        }
    }

    /// The fields' Rust types, in the order of its fields (none if not recorded).
    pub fn field_types(&self) -> Vec<String> {
        serde_json::from_str(&self.types).unwrap_or_default()
    }

    /// The fields it describes (none if its JSON does not read as a schema).
    pub fn fields(&self) -> Vec<agentstate::schema::FieldSchema> {
        serde_json::from_str(&self.schema).unwrap_or_default()
    }
}

/// The longest thread id, in bytes.
pub const MAX_ID_BYTES: usize = 1024;

/// Checks a thread id: the store accepts any UTF-8 string that is not empty, is at most
/// [`MAX_ID_BYTES`] long and holds no control character (NUL, newline, tab, ...); anything
/// else is [`StoreError::InvalidId`] (`thread_id_invalid`), on every backend, when a thread
/// is created or forked.
///
/// ```
/// use agentstate_store::check_id;
///
/// assert!(check_id("user-42/chat 7").is_ok());
/// assert_eq!(check_id("").unwrap_err().category(), "thread_id_invalid");
/// assert!(check_id("a\0b").is_err());
/// assert!(check_id(&"x".repeat(1025)).is_err());
/// ```
pub fn check_id(id: &str) -> Result<(), StoreError> {
    let reason = if id.is_empty() {
        "it is empty".to_owned()
    } else if id.len() > MAX_ID_BYTES {
        format!("it is {} bytes long, the most is {MAX_ID_BYTES}", id.len())
    } else if let Some(c) = id.chars().find(|c| c.is_control()) {
        format!("it holds the control character {c:?}")
    } else {
        return Ok(());
    };
    Err(StoreError::InvalidId {
        thread: id.to_owned(),
        reason,
    })
}

/// Checks an id a thread is looked up by: one with a NUL character cannot exist (and
/// PostgreSQL cannot take it as a query parameter), so it is [`StoreError::InvalidId`] on
/// every backend. Other ids [`check_id`] refuses may belong to threads an older build created
/// (an empty id), which stay readable.
pub(crate) fn check_lookup(id: &str) -> Result<(), StoreError> {
    if id.contains('\0') {
        return Err(StoreError::InvalidId {
            thread: id.to_owned(),
            reason: "it holds the control character '\\0'".to_owned(),
        });
    }
    Ok(())
}

/// A new incarnation of a thread: a random non-zero number that tells this thread from an
/// earlier one of the same id (deleted since), or from its own history before a rewind. Threads
/// created before incarnations were recorded have 0.
#[cfg_attr(not(any(feature = "sqlite", feature = "postgres")), allow(dead_code))]
pub(crate) fn new_incarnation() -> i64 {
    use std::hash::{BuildHasher, Hasher};
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    // std's RandomState is seeded from the OS per process; the counter and the time make each
    // call differ.
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u64(COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
    hasher.write_u128(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0),
    );
    hasher.write_u32(std::process::id());
    ((hasher.finish() >> 1) as i64).max(1)
}

/// Milliseconds since the Unix epoch, now.
pub(crate) fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// What a journal entry holds: one update, or the branch updates of a parallel step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryKind {
    /// One update, merged with `State::merge`.
    Update,
    /// The branch updates of a step, merged with `State::merge_parallel` in `FanIn::Ordered`.
    Parallel,
    /// The branch updates of a step, merged with `State::merge_parallel` in `FanIn::Strict`.
    ParallelStrict,
}

impl EntryKind {
    /// Its code in the database (0, 1, 2).
    pub fn code(self) -> i64 {
        match self {
            EntryKind::Update => 0,
            EntryKind::Parallel => 1,
            EntryKind::ParallelStrict => 2,
        }
    }

    /// The kind of a code read from the database.
    pub fn from_code(code: i64) -> Option<Self> {
        match code {
            0 => Some(EntryKind::Update),
            1 => Some(EntryKind::Parallel),
            2 => Some(EntryKind::ParallelStrict),
            _ => None,
        }
    }
}

/// The metadata of a step: who wrote it, in which run, and anything else the caller wants to
/// find it by later. The time is added when it is appended.
///
/// ```
/// use agentstate_store::StepMeta;
/// use serde_json::json;
///
/// let meta = StepMeta::node("chat").run_id("run-1").with("model", json!("small"));
/// assert_eq!(meta.node.as_deref(), Some("chat"));
/// ```
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StepMeta {
    /// The graph node that produced the update.
    pub node: Option<String>,
    /// The run the step belongs to.
    pub run_id: Option<String>,
    /// Any user data (a JSON object).
    pub extra: Map<String, Value>,
}

impl StepMeta {
    /// Metadata naming the node that produced the update.
    pub fn node(node: impl Into<String>) -> Self {
        StepMeta {
            node: Some(node.into()),
            ..StepMeta::default()
        }
    }

    /// Sets the run id.
    #[must_use]
    pub fn run_id(mut self, run_id: impl Into<String>) -> Self {
        self.run_id = Some(run_id.into());
        self
    }

    /// Adds a user key.
    #[must_use]
    pub fn with(mut self, key: impl Into<String>, value: Value) -> Self {
        self.extra.insert(key.into(), value);
        self
    }
}

/// A journal entry to append.
#[derive(Debug, Clone)]
pub struct NewEntry {
    /// What the body holds.
    pub kind: EntryKind,
    /// The update (or, for a parallel step, the JSON array of branch updates), as JSON.
    pub body: String,
    /// When it was written, in milliseconds since the Unix epoch.
    pub time_ms: i64,
    /// The node that produced it.
    pub node: Option<String>,
    /// The run it belongs to.
    pub run_id: Option<String>,
    /// User metadata as a JSON object, `None` when empty.
    pub extra: Option<String>,
    /// The fingerprint of the type that wrote it, when it is not the thread's (a thread read
    /// through a migration and written by the new type).
    pub fingerprint: Option<u64>,
    /// The thread's fingerprint as the writer read it: the append is refused
    /// ([`StoreError::Migrated`]) if the thread was migrated since,
    /// as `fingerprint: None` would then mean another schema.
    pub thread_fingerprint: u64,
    /// The thread's incarnation as the writer read it ([`ThreadInfo::incarnation`]): the append
    /// is refused ([`StoreError::Recreated`]) if the thread was deleted and created again, or
    /// rewound, since.
    pub thread_incarnation: i64,
    /// The lease owner the append is fenced by, if any: the append is refused
    /// ([`StoreError::LeaseLost`]) unless the thread's lease is this owner's and has not expired
    /// (by the database's clock on PostgreSQL, the local clock on SQLite), checked in the
    /// append's own statement or transaction. `None`: the lease is not looked at.
    pub lease: Option<String>,
    /// A change the append makes to the lease of [`lease`](NewEntry::lease)'s owner, in the
    /// same statement or transaction (ignored without an owner): a run's first append takes
    /// the lease, its last releases it, with no transaction of their own.
    pub lease_change: Option<LeaseChange>,
}

/// What an append does to its fence's lease ([`NewEntry::lease_change`]), in the append's own
/// statement or transaction, judged by the same clock as the fence.
///
/// ```
/// use agentstate_store::backend::LeaseChange;
///
/// let take = LeaseChange::Take { ttl_ms: 30_000 };
/// assert_ne!(take, LeaseChange::Release);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeaseChange {
    /// Before the entry is checked, the lease is taken for the owner for `ttl_ms` if no one
    /// else holds it (it is free, expired or already the owner's); otherwise the append writes
    /// nothing and fails with [`StoreError::Leased`]. The entry (and those after it in the
    /// same batch) is then fenced by the lease it took.
    Take {
        /// How long the lease lasts from the append, in milliseconds.
        ttl_ms: u64,
    },
    /// Once the batch's entries are written, the owner's lease (which fenced them) is
    /// released, so that another worker can take the thread at once.
    Release,
}

/// A thread's head as the database saw it: its version, the incarnation of its id and the
/// fingerprint of its schema. A handle that read the thread at this head is current (see
/// [`Thread::is_current`](crate::Thread::is_current)).
///
/// ```
/// use agentstate_store::Head;
///
/// let head = Head { version: 7, incarnation: 42, fingerprint: 0xabc };
/// assert_eq!(head, Head { version: 7, ..head });
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Head {
    /// The thread's version.
    pub version: u64,
    /// Which life of the id the thread is ([`ThreadInfo::incarnation`]).
    pub incarnation: i64,
    /// The fingerprint of the thread's schema ([`ThreadInfo::fingerprint`]).
    pub fingerprint: u64,
}

/// One stored row of a thread, as a rewrite ([`Backend::rewrite`](crate::backend::Backend))
/// sees it: its JSON and the fingerprint of the schema it was written in.
#[derive(Debug, Clone, Copy)]
pub enum StoredRow<'a> {
    /// The thread's initial state.
    Initial {
        /// Its schema.
        fingerprint: u64,
        /// The state as JSON.
        json: &'a str,
    },
    /// A journal entry.
    Entry {
        /// Its version.
        seq: u64,
        /// Its kind's code (see [`EntryKind::code`]).
        kind: i64,
        /// Its schema (the entry's own, or else the thread's).
        fingerprint: u64,
        /// Its JSON.
        json: &'a str,
    },
    /// A snapshot.
    Snapshot {
        /// Its version.
        seq: u64,
        /// Its schema.
        fingerprint: u64,
        /// The state as JSON.
        json: &'a str,
    },
}

impl StoredRow<'_> {
    /// Which row it is, e.g. `entry 7` or `snapshot at version 64`.
    pub fn describe(&self) -> String {
        match self {
            StoredRow::Initial { .. } => "initial state".to_owned(),
            StoredRow::Entry { seq, .. } => format!("entry {seq}"),
            StoredRow::Snapshot { seq, .. } => format!("snapshot at version {seq}"),
        }
    }
}

/// What a rewrite does to each row: its new JSON, in the thread's new schema.
pub type Rewriter = Box<dyn Fn(StoredRow<'_>) -> Result<String, StoreError> + Send + Sync>;

/// A journal entry read back for replay.
#[derive(Debug, Clone)]
pub struct StoredEntry {
    /// Its version: the thread's version once it is merged.
    pub seq: u64,
    /// Its kind's code (see [`EntryKind::code`]).
    pub kind: i64,
    /// Its JSON.
    pub body: String,
    /// The fingerprint of the type that wrote it, when it is not the thread's.
    pub fingerprint: Option<u64>,
}

/// One entry of a thread's history: its metadata, never its update.
#[derive(Debug, Clone, PartialEq)]
pub struct EntryInfo {
    /// The version this entry made.
    pub seq: u64,
    /// When it was written, in milliseconds since the Unix epoch.
    pub time_ms: i64,
    /// Whether it is one update or a parallel step.
    pub kind: EntryKind,
    /// The node that produced it.
    pub node: Option<String>,
    /// The run it belongs to.
    pub run_id: Option<String>,
    /// User metadata.
    pub extra: Map<String, Value>,
    /// The size of its JSON, in bytes.
    pub bytes: u64,
    /// The fingerprint of the schema it was written in: the thread's, or the writer's own when
    /// that differs. The first entry of a new fingerprint is where the thread's schema changed
    /// (see [`migrate`](crate::migrate)).
    pub fingerprint: u64,
    /// For an entry a fork inherited (one at or before its fork point): the ancestor whose
    /// journal holds it. `None` for the thread's own entries.
    pub inherited_from: Option<String>,
}

/// A page of one thread's own journal, as a backend reads it: the thread's parent link (a
/// fork's history continues in its parent's) and the entries' metadata.
#[derive(Debug, Clone, PartialEq)]
pub struct HistoryPage {
    /// For a fork: the parent thread and the version it starts at.
    pub parent: Option<(String, u64)>,
    /// The thread's own entries in the range asked for, in order.
    pub entries: Vec<EntryInfo>,
}

/// A new thread.
#[derive(Debug, Clone)]
pub struct NewThread {
    /// Its id.
    pub id: String,
    /// The state type's fingerprint.
    pub fingerprint: u64,
    /// The initial state as JSON (for a fork: not stored, the parent's state is its start).
    pub initial: Option<String>,
    /// For a fork: the parent thread and the version it starts at.
    pub parent: Option<(String, u64)>,
    /// User metadata (a JSON object).
    pub metadata: String,
    /// When it was created, in milliseconds since the Unix epoch.
    pub created_ms: i64,
}

/// A thread as listed.
#[derive(Debug, Clone, PartialEq)]
pub struct ThreadInfo {
    /// Its id.
    pub id: String,
    /// Its version: the number of the last entry appended (0 for a new thread; for a fork, it
    /// continues from the version it forked at).
    pub version: u64,
    /// The state type's fingerprint.
    pub fingerprint: u64,
    /// For a fork: the parent thread and the version it starts at.
    pub parent: Option<(String, u64)>,
    /// The oldest version still loadable (raised by compaction; for a fork, its start).
    pub oldest: u64,
    /// User metadata.
    pub metadata: Map<String, Value>,
    /// When it was created, in milliseconds since the Unix epoch.
    pub created_ms: i64,
    /// Which life of the id this is: a random number drawn when the thread was created, and
    /// again when it is rewound ([`Store::rewind`](crate::Store::rewind)) (0 for a thread
    /// created before the store recorded it and never rewound), so a writer that read the
    /// thread before it was deleted and created again, or rewound, is refused.
    pub incarnation: i64,
}

/// Where loading a version starts from.
#[derive(Debug, Clone)]
pub enum Base {
    /// The thread's initial state (JSON).
    Initial(String),
    /// A snapshot: its version, its fingerprint and its JSON.
    Snapshot {
        /// The version it is the state of.
        seq: u64,
        /// The fingerprint of the type that wrote it.
        fingerprint: u64,
        /// The state as JSON.
        json: String,
    },
    /// The state the caller holds, at this version.
    Continue(u64),
    /// The parent thread at a version (a fork's start).
    Parent {
        /// The parent thread.
        thread: String,
        /// The version.
        seq: u64,
    },
}

/// What a backend returns to load a version: the thread, where to start, and the entries to
/// replay after it, in order.
#[derive(Debug)]
pub struct Loaded {
    /// The thread.
    pub thread: ThreadInfo,
    /// Where to start.
    pub base: Base,
    /// The entries after the base, up to the version asked for.
    pub entries: Entries,
    /// The version loaded.
    pub seq: u64,
}

/// A batch of entries as a backend's reader sends it, or the error that ended its reading.
pub type EntryBatch = Result<Vec<StoredEntry>, StoreError>;

/// The entries a load replays, versions `from + 1 ..= to` of one thread: read at once, or
/// arriving in batches while the caller replays the first ones (the SQLite backend reads them on
/// its connection's thread as the caller decodes its base state and replays, so the two overlap).
/// [`next`](Entries::next) checks that every version is there, in order: a missing entry is
/// [`StoreError::Corrupt`], never a shorter state.
///
/// ```
/// use agentstate_store::backend::{Entries, StoredEntry};
///
/// let entry = |seq| StoredEntry { seq, kind: 0, body: "{}".into(), fingerprint: None };
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let mut entries = Entries::complete("t", 0, 3, vec![entry(1), entry(3)]);
/// assert_eq!(entries.len(), 3);
/// assert_eq!(entries.next().await?.map(|e| e.seq), Some(1));
/// let missing = entries.next().await.unwrap_err();
/// assert_eq!(missing.category(), "store_corrupt_data");
/// assert!(missing.to_string().contains("entry 2 is missing"), "{missing}");
/// # Ok::<(), agentstate_store::StoreError>(())
/// # }).unwrap();
/// ```
#[derive(Debug)]
pub struct Entries {
    thread: String,
    /// The version the next entry must have.
    next: u64,
    /// The version of the last entry.
    last: u64,
    ready: std::vec::IntoIter<StoredEntry>,
    batches: Option<tokio::sync::mpsc::UnboundedReceiver<EntryBatch>>,
}

impl Entries {
    /// Versions `from + 1 ..= to` of thread `thread`, all read.
    pub fn complete(thread: &str, from: u64, to: u64, entries: Vec<StoredEntry>) -> Self {
        Entries {
            thread: thread.to_owned(),
            next: from + 1,
            last: to,
            ready: entries.into_iter(),
            batches: None,
        }
    }

    /// Versions `from + 1 ..= to` of thread `thread`: `first`, read already, then the rest sent
    /// in order through `batches` by a reader that ends with an `Err` if it fails (and stops
    /// when this is dropped).
    pub fn streamed(
        thread: &str,
        from: u64,
        to: u64,
        first: Vec<StoredEntry>,
        batches: tokio::sync::mpsc::UnboundedReceiver<EntryBatch>,
    ) -> Self {
        Entries {
            batches: Some(batches),
            ..Entries::complete(thread, from, to, first)
        }
    }

    /// How many entries are left to replay (received or not yet).
    pub fn len(&self) -> u64 {
        (self.last + 1).saturating_sub(self.next)
    }

    /// Whether there is no entry to replay.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The next entry, `None` after the last; an error if one is missing or the reader failed.
    pub async fn next(&mut self) -> Result<Option<StoredEntry>, StoreError> {
        loop {
            if let Some(entry) = self.ready.next() {
                if entry.seq > self.last && entry.seq >= self.next {
                    return Err(StoreError::corrupt(
                        &self.thread,
                        format!("entry {}", entry.seq),
                        format!("it is past the thread's version {}", self.last),
                    ));
                }
                if entry.seq != self.next {
                    return Err(StoreError::corrupt(
                        &self.thread,
                        format!("journal before entry {}", entry.seq),
                        format!("entry {} is missing", self.next),
                    ));
                }
                self.next += 1;
                return Ok(Some(entry));
            }
            let Some(batches) = &mut self.batches else {
                break;
            };
            match batches.recv().await {
                Some(Ok(batch)) => self.ready = batch.into_iter(),
                Some(Err(err)) => return Err(err),
                None => self.batches = None,
            }
        }
        if self.next <= self.last {
            return Err(StoreError::corrupt(
                &self.thread,
                "journal",
                format!("entries {} to {} are missing", self.next, self.last),
            ));
        }
        Ok(None)
    }
}

/// A page of threads to list: after which id, how many, and which metadata they must have.
#[derive(Debug, Clone)]
pub struct ThreadQuery {
    /// Only threads whose id sorts after this one (the last id of the previous page).
    pub after: Option<String>,
    /// At most this many.
    pub limit: u32,
    /// Only threads whose metadata has each of these keys with exactly this value.
    pub metadata: Map<String, Value>,
}

impl Default for ThreadQuery {
    fn default() -> Self {
        ThreadQuery {
            after: None,
            limit: 100,
            metadata: Map::new(),
        }
    }
}

impl ThreadQuery {
    /// The first page of at most `limit` threads.
    pub fn first(limit: u32) -> Self {
        ThreadQuery {
            limit,
            ..ThreadQuery::default()
        }
    }

    /// Only threads whose metadata has `key` set to `value`.
    #[must_use]
    pub fn with(mut self, key: impl Into<String>, value: Value) -> Self {
        self.metadata.insert(key.into(), value);
        self
    }

    /// The page after the thread `id`.
    #[must_use]
    pub fn after(mut self, id: impl Into<String>) -> Self {
        self.after = Some(id.into());
        self
    }
}

/// Reads a JSON object stored as text; `None` and `""` are empty.
pub(crate) fn parse_object(text: Option<&str>) -> Result<Map<String, Value>, String> {
    match text {
        None | Some("") => Ok(Map::new()),
        Some(text) => match serde_json::from_str(text) {
            Ok(Value::Object(map)) => Ok(map),
            Ok(other) => Err(format!("metadata is not a JSON object: {other}")),
            Err(err) => Err(err.to_string()),
        },
    }
}

/// The version to load: `seq`, or the head; an error outside the thread's range.
#[allow(dead_code)] // used by whichever backends are compiled in
pub(crate) fn check_range(info: &ThreadInfo, seq: Option<u64>) -> Result<u64, StoreError> {
    let target = seq.unwrap_or(info.version);
    if target > info.version || target < info.oldest {
        return Err(StoreError::VersionOutOfRange {
            thread: info.id.clone(),
            seq: target,
            oldest: info.oldest,
            head: info.version,
        });
    }
    Ok(target)
}

/// Why the thread (its row `info`) refuses a compaction at version `seq` of the state read in
/// its incarnation `incarnation`: another incarnation now ([`StoreError::Recreated`]: it was
/// deleted and created again, or rewound, since), or no version `seq`
/// ([`StoreError::VersionOutOfRange`]).
#[allow(dead_code)] // used by whichever backends are compiled in
pub(crate) fn check_compaction(
    info: &ThreadInfo,
    seq: u64,
    incarnation: i64,
) -> Result<(), StoreError> {
    if info.incarnation != incarnation {
        return Err(StoreError::Recreated {
            thread: info.id.clone(),
        });
    }
    check_range(info, Some(seq)).map(|_| ())
}

/// Builds an [`EntryInfo`] from its columns.
#[allow(clippy::too_many_arguments, dead_code)]
pub(crate) fn entry_info(
    id: &str,
    seq: i64,
    time_ms: i64,
    kind: i64,
    node: Option<String>,
    run_id: Option<String>,
    extra: Option<&str>,
    bytes: i64,
    fingerprint: u64,
) -> Result<EntryInfo, StoreError> {
    let what = || format!("entry {seq}");
    Ok(EntryInfo {
        seq: seq as u64,
        time_ms,
        kind: EntryKind::from_code(kind)
            .ok_or_else(|| StoreError::corrupt(id, what(), format!("unknown entry kind {kind}")))?,
        node,
        run_id,
        extra: parse_object(extra).map_err(|reason| StoreError::corrupt(id, what(), reason))?,
        bytes: bytes as u64,
        fingerprint,
        inherited_from: None,
    })
}

/// Where a backend's load starts, decided from the thread's row before reading any state.
#[allow(dead_code)] // used by whichever backends are compiled in
pub(crate) enum Start {
    /// The caller's state at this version: read no snapshot.
    Continue(u64),
    /// The newest snapshot at or before the target, if any; else [`Start::without_snapshot`].
    Snapshot,
}

#[allow(dead_code)] // used by whichever backends are compiled in
impl Start {
    /// `after` (the version the caller holds) is usable if its entries are still there.
    pub(crate) fn of(info: &ThreadInfo, target: u64, after: Option<u64>) -> Self {
        match after {
            Some(after) if (info.oldest..=target).contains(&after) => Start::Continue(after),
            _ => Start::Snapshot,
        }
    }

    /// The base and the version its entries start after, given the snapshot found (version,
    /// fingerprint, JSON); `None` when the thread's initial state is needed.
    pub(crate) fn base(
        &self,
        info: &ThreadInfo,
        snapshot: Option<(u64, u64, String)>,
    ) -> Option<(Base, u64)> {
        match (self, snapshot, &info.parent) {
            (Start::Continue(after), _, _) => Some((Base::Continue(*after), *after)),
            (Start::Snapshot, Some((seq, fingerprint, json)), _) => Some((
                Base::Snapshot {
                    seq,
                    fingerprint,
                    json,
                },
                seq,
            )),
            (Start::Snapshot, None, Some((parent, fork))) => Some((
                Base::Parent {
                    thread: parent.clone(),
                    seq: *fork,
                },
                *fork,
            )),
            (Start::Snapshot, None, None) => None,
        }
    }

    /// The base of a thread's own initial state, as read from its row.
    pub(crate) fn initial(id: &str, initial: Option<String>) -> Result<(Base, u64), StoreError> {
        let initial = initial.ok_or_else(|| {
            StoreError::corrupt(
                id,
                "thread row",
                "it has neither an initial state nor a parent",
            )
        })?;
        Ok((Base::Initial(initial), 0))
    }
}

/// What [`Backend::lease`](crate::backend::Backend::lease) does to a thread's lease (see
/// [`Store::lease`](crate::Store::lease)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeaseOp {
    /// Take the lease for `ttl_ms` if no one holds it, it has expired, or it is already the
    /// owner's (then it is extended); otherwise [`StoreError::Leased`].
    Acquire,
    /// Extend the owner's lease to `ttl_ms` from now if it is still the owner's (also after it
    /// expired, as long as no one else took it); otherwise [`StoreError::LeaseLost`].
    Renew,
    /// Give the lease up if it is the owner's (also after it expired, as long as no one else
    /// took it); otherwise [`StoreError::LeaseLost`].
    Release,
    /// Take the lease away from whoever holds it (`owner` and `ttl_ms` are not used): the
    /// holder's next renewal and fenced append fail with [`StoreError::LeaseLost`]. Returns the
    /// lease that was held (`None` if none was, or it had expired).
    Revoke,
}

/// A thread's lease as the database holds it: who runs the thread, and until when; with the
/// thread's head as the same statement saw it.
///
/// ```
/// use agentstate_store::{Head, LeaseInfo};
/// use std::time::Duration;
///
/// let info = LeaseInfo {
///     owner: "worker-1".into(),
///     expires_at_ms: 1_700_000_004_200,
///     expires_in_ms: 4_200,
///     head: Head { version: 12, incarnation: 7, fingerprint: 0xabc },
/// };
/// assert_eq!(info.expires_in(), Duration::from_millis(4_200));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseInfo {
    /// The worker (or run) holding it.
    pub owner: String,
    /// When it expires, in milliseconds since the Unix epoch by the database's clock
    /// (PostgreSQL: the server's, so that workers on several machines agree; SQLite: the local
    /// clock).
    pub expires_at_ms: i64,
    /// How long it still had when the database answered, by the same clock.
    pub expires_in_ms: u64,
    /// The thread's head when the database answered (read in the same statement or
    /// transaction as the lease).
    pub head: Head,
}

impl LeaseInfo {
    /// [`expires_in_ms`](LeaseInfo::expires_in_ms) as a [`Duration`](std::time::Duration).
    pub fn expires_in(&self) -> std::time::Duration {
        std::time::Duration::from_millis(self.expires_in_ms)
    }
}

/// The longest lease the store grants, in milliseconds (a year; a longer `ttl` is cut to it).
pub const MAX_LEASE_TTL_MS: u64 = 365 * 24 * 3_600 * 1_000;

/// Checks a lease owner: any string that is not empty, is at most [`MAX_ID_BYTES`] long and
/// holds no control character; anything else is [`StoreError::InvalidLeaseOwner`]
/// (`lease_owner_invalid`).
pub(crate) fn check_owner(owner: &str) -> Result<(), StoreError> {
    let reason = if owner.is_empty() {
        "it is empty".to_owned()
    } else if owner.len() > MAX_ID_BYTES {
        format!(
            "it is {} bytes long, the most is {MAX_ID_BYTES}",
            owner.len()
        )
    } else if let Some(c) = owner.chars().find(|c| c.is_control()) {
        format!("it holds the control character {c:?}")
    } else {
        return Ok(());
    };
    Err(StoreError::InvalidLeaseOwner {
        owner: owner.to_owned(),
        reason,
    })
}

/// A thread's lease as its row holds it: the owner and the expiry (milliseconds since the
/// Unix epoch), each `None` when no lease is recorded.
pub(crate) type FoundLease = (Option<String>, Option<i64>);

/// The outcome of a lease operation, from what the database saw: the expiry it wrote (`None`:
/// the statement changed nothing; for a release, any `Some` says it released), and the
/// thread's lease owner and expiry as it found them, at its clock's `now_ms`, and the thread's
/// head. Shared by the backends.
#[allow(dead_code)] // used by whichever backends are compiled in
pub(crate) fn lease_outcome(
    thread: &str,
    owner: &str,
    op: LeaseOp,
    written: Option<i64>,
    found: FoundLease,
    now_ms: i64,
    head: Head,
) -> Result<Option<LeaseInfo>, StoreError> {
    match (op, written) {
        (LeaseOp::Release, Some(_)) => return Ok(None),
        (LeaseOp::Revoke, _) => return Ok(held(found, now_ms, head)),
        (_, Some(expires_at_ms)) => {
            return Ok(Some(LeaseInfo {
                owner: owner.to_owned(),
                expires_at_ms,
                expires_in_ms: expires_at_ms.saturating_sub(now_ms).max(0) as u64,
                head,
            }))
        }
        _ => {}
    }
    let holder = held(found, now_ms, head);
    Err(match (op, holder) {
        (LeaseOp::Acquire, Some(info)) => StoreError::Leased {
            thread: thread.to_owned(),
            owner: info.owner,
            expires_in_ms: info.expires_in_ms,
        },
        (LeaseOp::Acquire, None) => StoreError::Leased {
            thread: thread.to_owned(),
            owner: "(another worker)".to_owned(),
            expires_in_ms: 0,
        },
        (_, holder) => lease_lost(thread, owner, holder),
    })
}

/// [`StoreError::LeaseLost`] for `owner`, given who holds the lease now.
fn lease_lost(thread: &str, owner: &str, holder: Option<LeaseInfo>) -> StoreError {
    StoreError::LeaseLost {
        thread: thread.to_owned(),
        owner: owner.to_owned(),
        now_held_by: holder.map(|info| info.owner).filter(|o| o != owner),
    }
}

/// The lease a thread row holds at `now_ms`: `None` if it has none or it has expired.
#[allow(dead_code)] // used by whichever backends are compiled in
pub(crate) fn held(found: FoundLease, now_ms: i64, head: Head) -> Option<LeaseInfo> {
    match found {
        (Some(owner), Some(expires_at_ms)) if expires_at_ms > now_ms => Some(LeaseInfo {
            owner,
            expires_at_ms,
            expires_in_ms: (expires_at_ms - now_ms) as u64,
            head,
        }),
        _ => None,
    }
}

/// Why a thread refuses a rewind to `seq` (see [`Backend::rewind`](crate::backend::Backend)),
/// from its row `info`, its head and its lease as found at the clock's `now_ms`, before its
/// forks are looked at: `seq` out of its range ([`StoreError::VersionOutOfRange`]), or a
/// lease held and not expired ([`StoreError::Leased`]). Shared by the backends, so that both
/// give one answer.
#[allow(dead_code)] // used by whichever backends are compiled in
pub(crate) fn rewind_refusal(
    info: &ThreadInfo,
    seq: u64,
    head: Head,
    lease: FoundLease,
    now_ms: i64,
) -> Result<(), StoreError> {
    check_range(info, Some(seq))?;
    match held(lease, now_ms, head) {
        Some(holder) => Err(StoreError::Leased {
            thread: info.id.clone(),
            owner: holder.owner,
            expires_in_ms: holder.expires_in_ms,
        }),
        None => Ok(()),
    }
}

/// A thread as an append finds it: its head and its lease at the database's `now_ms`.
#[allow(dead_code)] // used by whichever backends are compiled in
pub(crate) struct Found {
    pub(crate) head: Head,
    pub(crate) lease: FoundLease,
    pub(crate) now_ms: i64,
}

/// Why the thread as `found` refuses `entry` appended at version `expected`; `None` if it
/// takes it. In this order: a fenced append whose lease is not its owner's or has expired
/// ([`StoreError::LeaseLost`], so that a worker that lost its thread stops at once instead of
/// reloading and retrying), a thread created again ([`StoreError::Recreated`]), another version
/// ([`StoreError::Conflict`]), another schema ([`StoreError::Migrated`]). Shared by the
/// backends, so that both give one answer.
#[allow(dead_code)] // used by whichever backends are compiled in
pub(crate) fn refusal(
    thread: &str,
    expected: u64,
    entry: &NewEntry,
    found: &Found,
) -> Option<StoreError> {
    let head = found.head;
    if let Some(owner) = &entry.lease {
        let holder = held(found.lease.clone(), found.now_ms, head);
        match (entry.lease_change, holder) {
            // Taken: anyone's but another's will do.
            (Some(LeaseChange::Take { .. }), Some(other)) if &other.owner != owner => {
                return Some(StoreError::Leased {
                    thread: thread.to_owned(),
                    owner: other.owner,
                    expires_in_ms: other.expires_in_ms,
                });
            }
            (Some(LeaseChange::Take { .. }), _) => {}
            (_, holder) if holder.as_ref().is_none_or(|h| &h.owner != owner) => {
                return Some(lease_lost(thread, owner, holder));
            }
            _ => {}
        }
    }
    if head.incarnation != entry.thread_incarnation {
        return Some(StoreError::Recreated {
            thread: thread.to_owned(),
        });
    }
    if head.version != expected {
        return Some(StoreError::Conflict {
            thread: thread.to_owned(),
            expected,
            actual: head.version,
        });
    }
    if head.fingerprint != entry.thread_fingerprint {
        return Some(StoreError::Migrated {
            thread: thread.to_owned(),
            read: entry.thread_fingerprint,
            now: head.fingerprint,
        });
    }
    None
}

/// Whether a statement that changed nothing saw a row that would have let it: another
/// transaction changed the lease between the statement's snapshot and its update, and the
/// statement should run again to see who holds it now (PostgreSQL's read committed).
#[allow(dead_code)] // used by whichever backends are compiled in
pub(crate) fn lease_raced(owner: &str, op: LeaseOp, found: &FoundLease, now_ms: i64) -> bool {
    let mine = found.0.as_deref() == Some(owner);
    let free = match found {
        (Some(_), Some(expires_at_ms)) => *expires_at_ms <= now_ms,
        _ => true,
    };
    match op {
        LeaseOp::Acquire => mine || free,
        LeaseOp::Renew | LeaseOp::Release => mine,
        LeaseOp::Revoke => false,
    }
}
