//! Schema evolution: what happens when a thread written by one version of a state type is
//! loaded by another, and the [`Migration`]s that bridge versions.
//!
//! # What the store records
//!
//! Every row (a thread's initial state, each journal entry, each snapshot) records the
//! *fingerprint* of the schema it was written in ([`fingerprint`]:
//! a hash of `State::schema()`, i.e. the fields, their reducers and their parameters, and of
//! the declared version). The description itself (`State::schema()` as JSON), the type's name,
//! its fields' Rust types ([`State::FIELD_TYPES`](agentstate::State)) and its declared version
//! (`#[agent_state(version = N)]`, [`State::SCHEMA_VERSION`](agentstate::State), 0 when none is
//! declared) are stored once per fingerprint ([`SchemaRecord`]; PostgreSQL keeps them in a table
//! of their own, SQLite as rows of its snapshots table), when a type first writes to the
//! database (creates a thread, opens a handle, snapshots, compacts, migrates). So an old schema
//! can be compared field by field with the new one although the old Rust type no longer exists.
//!
//! # Loading a row of another schema
//!
//! A row whose fingerprint is the loading type's is read directly (the migration registry is
//! not consulted). Otherwise:
//!
//! - **Same version** (the type was edited without bumping its version, or neither declares
//!   one): the edit must be *compatible*, and the row is read as it is. An edit is compatible
//!   when the stored state and every stored update deserialize into the new types once the keys
//!   of fields the new type no longer has are dropped: a field added with a default (or an
//!   `Option`), a field removed, a reducer or a reducer's parameter changed
//!   (`bounded_append(max_len = 5)` to `50`). No ceremony: the thread loads and the new type
//!   appends to it. An incompatible edit (a field's type changed, a required field added) is
//!   [`StoreError::Incompatible`] (`state_schema_mismatch`): one sentence naming the row, the
//!   field, the stored value and what the type expects, the fields added, removed and changed
//!   since the stored schema, and how to migrate (bump the version, register a migration). A
//!   type that shares no field with the stored schema is another type, not an edit
//!   ([`StoreError::SchemaMismatch`]). A field's Rust type is not part of the fingerprint, so
//!   a type changed without any other edit leaves the fingerprint as it was: a row that then does
//!   not read is compared with the recorded field types, and reported as the same
//!   [`StoreError::Incompatible`] naming the field's old and new type (with no recorded change,
//!   it is corrupt data, [`StoreError::Corrupt`]).
//! - **Another version**: the registered migrations must lead from the stored version to the
//!   type's, and are applied in order to the row's JSON, which is then read as the type. The
//!   chain is the shortest path through the registered steps (fewest steps); two shortest
//!   paths are [`StoreError::MigrationAmbiguous`], as is a pair registered twice; no path is
//!   [`StoreError::MigrationMissing`] (naming both versions and listing the registered steps);
//!   a step that fails is [`StoreError::Migration`] (naming the step), and the steps after it do
//!   not run; a migrated row the type still cannot read is [`StoreError::Incompatible`]. This is
//!   OpenArmature's state-migration contract (§10.12), with versions as numbers.
//!
//! Rows written before the store recorded schemas (SQLite store schema 3 and older,
//! PostgreSQL 1) are taken as version 0 with an unknown description until a type with their
//! fingerprint writes again: they load when they deserialize, and the keys of removed fields
//! are not dropped from their updates. A type that declares a version for the first time reads
//! version-0 rows through a migration from 0, e.g. [`Migration::unchanged(0, 1)`](Migration::unchanged)
//! when they already fit.
//!
//! # Time travel across a schema change
//!
//! A thread's versions are always rebuilt by the type that loads them. An entry written by a
//! type whose schema is not the thread's records its own fingerprint
//! ([`EntryInfo::fingerprint`](crate::EntryInfo), listed by
//! [`Store::history`](crate::Store::history)): the first entry with a new fingerprint is
//! the point where the schema changed. Loading a version before that point replays the old
//! entries *under the new schema*: a changed reducer applies to them too (with
//! `bounded_append(max_len = 50)` in place of 5, a version before the change holds up to 50
//! items where it held 5 when it was written). A snapshot keeps the state as its own schema
//! made it, and entries after it are merged by the new reducers. To have every row in the new
//! schema (and read directly again), write the thread back with
//! [`Store::migrate_thread`](crate::Store::migrate_thread).
//!
//! # Example
//!
//! Version 1 kept `notes`; version 2 renamed it `lines` (a rename is not compatible: the old
//! key would be dropped), so version 2 declares its version and a migration leads there.
//!
//! ```
//! use agentstate::AgentState;
//! use agentstate_store::migrate::Migration;
//! use agentstate_store::{SqliteStore, StepMeta};
//! use serde::{Deserialize, Serialize};
//! use serde_json::Value;
//!
//! mod v1 {
//!     #[derive(agentstate::AgentState, Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
//!     #[agent_state(version = 1)]
//!     pub struct Notes { #[reducer(append)] pub notes: Vec<String> }
//! }
//! #[derive(AgentState, Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
//! #[agent_state(version = 2)]
//! struct Notes {
//!     #[reducer(append)]
//!     lines: Vec<String>,
//!     #[serde(default)]
//!     title: Option<String>, // added: compatible on its own
//! }
//!
//! fn rename(mut value: Value) -> Result<Value, String> {
//!     let map = value.as_object_mut().ok_or("not an object")?;
//!     if let Some(notes) = map.remove("notes") {
//!         map.insert("lines".into(), notes);
//!     }
//!     Ok(value)
//! }
//!
//! # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
//! let store = SqliteStore::open_in_memory()?;
//! let mut t = store.create("t", v1::Notes::default()).await?;
//! t.merge(v1::NotesUpdate::default().notes(vec!["hi".into()]), StepMeta::default()).await?;
//!
//! // Without a migration, version 2 cannot read version 1's rows: a named error.
//! let err = store.load::<Notes>("t").await.unwrap_err();
//! assert_eq!(err.category(), "state_migration_missing");
//!
//! let store = store.with_migration(Migration::new(1, 2, rename, rename));
//! let agentstate_store::Versioned { state: notes, version } = store.load::<Notes>("t").await?;
//! assert_eq!((notes.lines, version), (vec!["hi".to_string()], 1));
//! # Ok::<(), agentstate_store::StoreError>(())
//! # }).unwrap();
//! ```

pub use crate::record::{fingerprint, SchemaRecord};

use crate::error::StoreError;
use serde_json::Value;
use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};

type Upgrade = Arc<dyn Fn(Value) -> Result<Value, String> + Send + Sync>;

/// One step from version `from` to version `to` of a state type: how a state's JSON and how an
/// update's JSON change. It reads the old JSON, so the old Rust type is never needed.
///
/// ```
/// use agentstate_store::migrate::Migration;
/// use serde_json::{json, Value};
///
/// // Version 2 renamed `notes` to `context_summary`.
/// fn rename(mut value: Value) -> Result<Value, String> {
///     if let Some(map) = value.as_object_mut() {
///         if let Some(notes) = map.remove("notes") {
///             map.insert("context_summary".into(), notes);
///         }
///     }
///     Ok(value)
/// }
/// let step = Migration::new(1, 2, rename, rename);
/// assert_eq!(step.upgrade_state(json!({"notes": "x"})).unwrap(), json!({"context_summary": "x"}));
/// assert_eq!((step.from_version(), step.to_version()), (1, 2));
/// ```
#[derive(Clone)]
pub struct Migration {
    from: u32,
    to: u32,
    state: Upgrade,
    update: Upgrade,
}

impl std::fmt::Debug for Migration {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Migration({} -> {})", self.from, self.to)
    }
}

impl Migration {
    /// A step from version `from` to version `to` (as declared with
    /// `#[agent_state(version = N)]`; 0 is a type that declares none): `state` upgrades a
    /// state's JSON (the initial state, snapshots), `update` an update's JSON (each entry, each
    /// branch of a parallel step).
    pub fn new(
        from: u32,
        to: u32,
        state: impl Fn(Value) -> Result<Value, String> + Send + Sync + 'static,
        update: impl Fn(Value) -> Result<Value, String> + Send + Sync + 'static,
    ) -> Self {
        Migration {
            from,
            to,
            state: Arc::new(state),
            update: Arc::new(update),
        }
    }

    /// A step that keeps the JSON as it is: for declaring a first version on a type whose
    /// stored rows already fit it (`Migration::unchanged(0, 1)`), or a version bump that only
    /// made compatible edits.
    ///
    /// ```
    /// use agentstate_store::migrate::Migration;
    /// use serde_json::json;
    ///
    /// let step = Migration::unchanged(0, 1);
    /// assert_eq!(step.upgrade_update(json!({"a": 1})).unwrap(), json!({"a": 1}));
    /// ```
    pub fn unchanged(from: u32, to: u32) -> Self {
        Migration::new(from, to, Ok, Ok)
    }

    /// The version it reads.
    pub fn from_version(&self) -> u32 {
        self.from
    }

    /// The version it writes.
    pub fn to_version(&self) -> u32 {
        self.to
    }

    /// Upgrades a state's JSON.
    pub fn upgrade_state(&self, value: Value) -> Result<Value, String> {
        (self.state)(value)
    }

    /// Upgrades an update's JSON.
    pub fn upgrade_update(&self, value: Value) -> Result<Value, String> {
        (self.update)(value)
    }
}

/// The registered migrations, keyed by `(from, to)` version pair (the order of registration
/// does not matter).
///
/// ```
/// use agentstate_store::migrate::{Migration, Migrations};
///
/// let mut registry = Migrations::default();
/// registry.add(Migration::unchanged(1, 2))?;
/// registry.add(Migration::unchanged(2, 3))?;
/// let chain = registry.resolve(1, 3)?.expect("a chain");
/// assert_eq!(chain.iter().map(|m| m.to_version()).collect::<Vec<_>>(), [2, 3]);
/// assert!(registry.resolve(3, 1)?.is_none());
/// // The same pair twice is ambiguous.
/// let err = registry.add(Migration::unchanged(1, 2)).unwrap_err();
/// assert_eq!(err.category(), "state_migration_chain_ambiguous");
/// # Ok::<(), agentstate_store::StoreError>(())
/// ```
#[derive(Debug, Clone, Default)]
pub struct Migrations {
    steps: BTreeMap<(u32, u32), Migration>,
    /// A pair registered twice: every resolution reports it.
    duplicate: Option<(u32, u32)>,
}

impl Migrations {
    /// Registers a step. A second step for the same `(from, to)` pair is
    /// [`StoreError::MigrationAmbiguous`]; the first is kept, and every later
    /// [`resolve`](Self::resolve) reports the duplicate too, so a registration whose error was
    /// not looked at (as [`Store::with_migration`](crate::Store::with_migration)'s) still
    /// fails before any migration runs.
    pub fn add(&mut self, step: Migration) -> Result<(), StoreError> {
        let pair = (step.from, step.to);
        if self.steps.contains_key(&pair) {
            self.duplicate.get_or_insert(pair);
            return Err(duplicate(pair));
        }
        self.steps.insert(pair, step);
        Ok(())
    }

    /// How many steps are registered.
    pub fn len(&self) -> usize {
        self.steps.len()
    }

    /// Whether no step is registered.
    pub fn is_empty(&self) -> bool {
        self.steps.is_empty()
    }

    /// The registered steps, e.g. `1->2, 2->3`, or `none`.
    pub fn describe(&self) -> String {
        if self.steps.is_empty() {
            return "none".to_owned();
        }
        self.steps
            .keys()
            .map(|(from, to)| format!("{from}->{to}"))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The steps leading from version `from` to version `to`, in order: the shortest chain
    /// (none for `from == to`), `None` if there is no chain, and
    /// [`StoreError::MigrationAmbiguous`] if two chains are equally short or a pair was
    /// registered twice.
    pub fn resolve(&self, from: u32, to: u32) -> Result<Option<Vec<&Migration>>, StoreError> {
        if let Some(pair) = self.duplicate {
            return Err(duplicate(pair));
        }
        if from == to {
            return Ok(Some(Vec::new()));
        }
        // Breadth first, counting the shortest paths to each version (2 means "several").
        let mut dist: HashMap<u32, usize> = HashMap::from([(from, 0)]);
        let mut paths: HashMap<u32, u8> = HashMap::from([(from, 1)]);
        let mut previous: HashMap<u32, u32> = HashMap::new();
        let mut queue = VecDeque::from([from]);
        while let Some(at) = queue.pop_front() {
            let (d, n) = (dist[&at], paths[&at]);
            for &(_, next) in self.steps.range((at, 0)..=(at, u32::MAX)).map(|(k, _)| k) {
                match dist.get(&next) {
                    None => {
                        dist.insert(next, d + 1);
                        paths.insert(next, n);
                        previous.insert(next, at);
                        queue.push_back(next);
                    }
                    Some(&dn) if dn == d + 1 => {
                        let count = paths.entry(next).or_insert(0);
                        *count = (*count + n).min(2);
                    }
                    Some(_) => {}
                }
            }
        }
        match paths.get(&to) {
            None => Ok(None),
            Some(n) if *n > 1 => Err(StoreError::MigrationAmbiguous {
                from: Some(from),
                to: Some(to),
                reason: format!(
                    "two chains of {} steps lead from version {from} to version {to}; remove steps until one is left (registered: {})",
                    dist[&to],
                    self.describe()
                ),
            }),
            Some(_) => {
                let mut chain = Vec::new();
                let mut at = to;
                while at != from {
                    let before = previous[&at];
                    chain.push(&self.steps[&(before, at)]);
                    at = before;
                }
                chain.reverse();
                Ok(Some(chain))
            }
        }
    }

    /// Checks the whole registry ahead of any load: a duplicate pair, or two equally short
    /// chains between any two versions, is [`StoreError::MigrationAmbiguous`].
    ///
    /// ```
    /// use agentstate_store::migrate::{Migration, Migrations};
    ///
    /// let mut diamond = Migrations::default();
    /// for (from, to) in [(1, 2), (2, 4), (1, 3), (3, 4)] {
    ///     diamond.add(Migration::unchanged(from, to))?;
    /// }
    /// let err = diamond.check().unwrap_err();
    /// assert_eq!(err.category(), "state_migration_chain_ambiguous");
    /// assert!(err.to_string().contains("from version 1 to version 4"), "{err}");
    /// # Ok::<(), agentstate_store::StoreError>(())
    /// ```
    pub fn check(&self) -> Result<(), StoreError> {
        let versions: HashSet<u32> = self.steps.keys().flat_map(|&(a, b)| [a, b]).collect();
        let mut versions: Vec<u32> = versions.into_iter().collect();
        versions.sort_unstable();
        for &from in &versions {
            for &to in &versions {
                if from != to {
                    self.resolve(from, to)?;
                }
            }
        }
        Ok(())
    }
}

fn duplicate((from, to): (u32, u32)) -> StoreError {
    StoreError::MigrationAmbiguous {
        from: Some(from),
        to: Some(to),
        reason: format!("a migration from version {from} to version {to} is registered twice"),
    }
}

/// The loading type, as the schema logic needs it.
pub(crate) struct Target {
    pub(crate) fingerprint: u64,
    pub(crate) version: u32,
    pub(crate) fields: &'static [&'static str],
    /// `State::schema`, called only to describe an incompatible edit.
    pub(crate) schema: fn() -> agentstate::schema::Schema,
    pub(crate) types: &'static [&'static str],
    pub(crate) type_name: &'static str,
}

impl Target {
    pub(crate) fn of<S: agentstate::State>() -> Self {
        Target {
            fingerprint: crate::record::fingerprint::<S>(),
            version: S::SCHEMA_VERSION,
            fields: S::FIELDS,
            schema: S::schema,
            types: S::FIELD_TYPES,
            type_name: std::any::type_name::<S>(),
        }
    }
}

/// How rows of one stored schema are read as the target type.
#[derive(Debug, Clone)]
pub(crate) enum Plan {
    /// The same schema: read directly.
    Direct,
    /// The same version, another schema: read as it is, without the keys of these fields (fields
    /// the stored schema has and the target does not).
    Compatible {
        dropped: Vec<String>,
        stored: Option<Arc<SchemaRecord>>,
    },
    /// Another version: these steps, in order.
    Chain {
        steps: Vec<Migration>,
        stored: Option<Arc<SchemaRecord>>,
    },
}

impl Plan {
    /// Decides how rows of schema `fingerprint` (described by `stored`, if it was recorded)
    /// are read as `target`.
    pub(crate) fn of(
        migrations: &Migrations,
        thread: &str,
        target: &Target,
        fingerprint: u64,
        stored: Option<Arc<SchemaRecord>>,
    ) -> Result<Plan, StoreError> {
        if fingerprint == target.fingerprint {
            return Ok(Plan::Direct);
        }
        let version = stored.as_ref().map_or(0, |s| s.version);
        if version != target.version {
            return match migrations.resolve(version, target.version)? {
                Some(steps) => Ok(Plan::Chain {
                    steps: steps.into_iter().cloned().collect(),
                    stored,
                }),
                None => Err(StoreError::MigrationMissing {
                    thread: thread.to_owned(),
                    type_name: target.type_name,
                    from: version,
                    to: target.version,
                    registered: migrations.len(),
                    registry: migrations.describe(),
                }),
            };
        }
        let Some(record) = stored else {
            return Ok(Plan::Compatible {
                dropped: Vec::new(),
                stored: None,
            });
        };
        let fields = record.fields();
        let names: Vec<&str> = fields.iter().map(|f| f.name.as_str()).collect();
        if !names.is_empty()
            && !target.fields.is_empty()
            && !names.iter().any(|n| target.fields.contains(n))
        {
            return Err(StoreError::SchemaMismatch {
                thread: thread.to_owned(),
                type_name: target.type_name,
                stored: fingerprint,
                expected: target.fingerprint,
                detail: format!(
                    "it holds states of `{}` (fields {}), which shares no field with it (fields {})",
                    record.type_name,
                    names.join(", "),
                    target.fields.join(", ")
                ),
            });
        }
        let dropped = names
            .iter()
            .filter(|n| !target.fields.contains(n))
            .map(|n| (*n).to_owned())
            .collect();
        Ok(Plan::Compatible {
            dropped,
            stored: Some(record),
        })
    }

    /// Prepares a stored update's JSON: drops removed fields' keys, or runs the chain.
    pub(crate) fn update(&self, thread: &str, value: Value) -> Result<Value, StoreError> {
        self.upgrade(thread, value, Migration::upgrade_update)
    }

    /// Prepares a stored state's JSON.
    pub(crate) fn state(&self, thread: &str, value: Value) -> Result<Value, StoreError> {
        self.upgrade(thread, value, Migration::upgrade_state)
    }

    fn upgrade(
        &self,
        thread: &str,
        mut value: Value,
        step: fn(&Migration, Value) -> Result<Value, String>,
    ) -> Result<Value, StoreError> {
        match self {
            Plan::Direct => Ok(value),
            Plan::Compatible { dropped, .. } => {
                if let Some(map) = value.as_object_mut() {
                    map.retain(|key, _| {
                        let field = key
                            .strip_suffix(agentstate::OVERWRITE_SUFFIX)
                            .unwrap_or(key);
                        !dropped.iter().any(|d| d == field)
                    });
                }
                Ok(value)
            }
            Plan::Chain { steps, .. } => {
                for m in steps {
                    value = step(m, value).map_err(|reason| StoreError::Migration {
                        thread: thread.to_owned(),
                        from: m.from,
                        to: m.to,
                        reason,
                    })?;
                }
                Ok(value)
            }
        }
    }

    /// The error for a row (`row`: `entry 7`, ...) this plan prepared that `target` still
    /// cannot read: `detail` names the field and what was wrong with it.
    pub(crate) fn incompatible(
        &self,
        thread: &str,
        target: &Target,
        row: &str,
        detail: String,
    ) -> StoreError {
        let (stored, chain) = match self {
            Plan::Direct => (None, None),
            Plan::Compatible { stored, .. } => (stored.as_deref(), None),
            Plan::Chain { stored, steps } => (stored.as_deref(), Some(steps)),
        };
        let version = stored.map_or(0, |s| s.version);
        let changes = match stored {
            Some(s) => format!(
                "; since the stored schema (`{}`, version {version}): {}",
                s.type_name,
                changes(s, target)
            ),
            None => "; the stored schema was not recorded (its rows predate the schema table)"
                .to_owned(),
        };
        let help = match chain {
            Some(steps) => format!(
                "the migrations from version {version} to version {} ({}) leave a value it cannot read: fix them",
                target.version,
                steps
                    .iter()
                    .map(|m| format!("{}->{}", m.from, m.to))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            None => format!(
                "to read it, declare #[agent_state(version = {next})] on `{name}` and register Migration::new({version}, {next}, ..) rewriting the stored JSON",
                next = target.version.max(version) + 1,
                name = short(target.type_name),
            ),
        };
        StoreError::Incompatible {
            thread: thread.to_owned(),
            type_name: target.type_name,
            row: row.to_owned(),
            detail: format!("{detail}{changes}"),
            help,
        }
    }
}

/// A type's name without its module path.
fn short(type_name: &str) -> &str {
    type_name.rsplit("::").next().unwrap_or(type_name)
}

/// The fields whose recorded Rust type differs from the target's: `(field, stored, now)`.
fn retyped_fields(stored: &SchemaRecord, target: &Target) -> Vec<(String, String, String)> {
    let (fields, types) = (stored.fields(), stored.field_types());
    // Types are known only when every field's is (a hand-written state lists none).
    if types.len() != fields.len() || target.types.len() != target.fields.len() {
        return Vec::new();
    }
    fields
        .iter()
        .zip(&types)
        .filter_map(|(field, old)| {
            let i = target.fields.iter().position(|f| *f == field.name)?;
            let now = target.types.get(i)?;
            (old != now).then(|| (field.name.clone(), old.clone(), (*now).to_owned()))
        })
        .collect()
}

/// The error for a row of the target's own schema (same fingerprint) that does not read as it
/// (`reason`, from the reader), when the stored schema's record shows fields whose Rust type was
/// changed since: an incompatible edit, not corrupt data. `None` if no type changed.
pub(crate) fn retyped(
    thread: &str,
    target: &Target,
    stored: &SchemaRecord,
    row: &str,
    reason: &str,
) -> Option<StoreError> {
    let changed = retyped_fields(stored, target);
    if changed.is_empty() {
        return None;
    }
    let list: Vec<String> = changed
        .iter()
        .map(|(field, old, now)| {
            format!("field `{field}` was `{old}` when it was written, `{now}` now")
        })
        .collect();
    Some(StoreError::Incompatible {
        thread: thread.to_owned(),
        type_name: target.type_name,
        row: row.to_owned(),
        detail: format!("{reason}; {}", list.join(", ")),
        help: format!(
            "a changed type needs a new version: declare #[agent_state(version = {next})] on `{name}` and register Migration::new({version}, {next}, ..) converting the field",
            version = stored.version,
            next = target.version.max(stored.version) + 1,
            name = short(target.type_name),
        ),
    })
}

/// What changed from the stored schema to the target's, field by field: `added x; removed y;
/// z: bounded_append(max_len=5) -> bounded_append(max_len=50); w: u64 -> String`.
pub(crate) fn changes(stored: &SchemaRecord, target: &Target) -> String {
    let (old, new) = (&stored.fields(), &(target.schema)().into_fields());
    let mut parts = Vec::new();
    let added: Vec<&str> = new
        .iter()
        .filter(|f| !old.iter().any(|o| o.name == f.name))
        .map(|f| f.name.as_str())
        .collect();
    if !added.is_empty() {
        parts.push(format!("added {}", added.join(", ")));
    }
    let removed: Vec<&str> = old
        .iter()
        .filter(|f| !new.iter().any(|n| n.name == f.name))
        .map(|f| f.name.as_str())
        .collect();
    if !removed.is_empty() {
        parts.push(format!("removed {}", removed.join(", ")));
    }
    for o in old {
        if let Some(n) = new.iter().find(|n| n.name == o.name) {
            if n.reducer != o.reducer {
                parts.push(format!("{}: {} -> {}", o.name, o.reducer, n.reducer));
            }
        }
    }
    for (field, was, now) in retyped_fields(stored, target) {
        parts.push(format!("{field}: {was} -> {now}"));
    }
    if parts.is_empty() {
        "no field added, removed, retyped or given another reducer".to_owned()
    } else {
        parts.join("; ")
    }
}

/// The schemas a store has seen: descriptions read from the database (by fingerprint), and the
/// fingerprints this process has recorded there.
#[derive(Debug, Default)]
pub(crate) struct SchemaCache {
    known: Mutex<HashMap<u64, Arc<SchemaRecord>>>,
    recorded: Mutex<HashSet<u64>>,
}

impl SchemaCache {
    pub(crate) fn get(&self, fingerprint: u64) -> Option<Arc<SchemaRecord>> {
        self.known
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&fingerprint)
            .cloned()
    }

    pub(crate) fn fill(&self, records: Vec<SchemaRecord>) {
        let mut known = self.known.lock().unwrap_or_else(PoisonError::into_inner);
        for record in records {
            known.insert(record.fingerprint, Arc::new(record));
        }
    }

    pub(crate) fn is_recorded(&self, fingerprint: u64) -> bool {
        self.recorded
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .contains(&fingerprint)
    }

    pub(crate) fn set_recorded(&self, fingerprint: u64) {
        self.recorded
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(fingerprint);
    }
}
