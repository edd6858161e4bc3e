//! The store's errors.

/// Everything the store reports: one enum, each variant a readable sentence,
/// [`category`](StoreError::category) a stable name. Bad data in the database is always one of
/// these, never a panic and never a partly loaded state.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// Another writer appended to the thread after this writer read it; nothing was written
    /// (`state_write_conflict`). Reload the thread and merge again (see
    /// [`Thread::merge_with`](crate::Thread::merge_with)).
    #[error("thread `{thread}` is at version {actual}, not at version {expected} that this writer read; nothing was written (reload and retry)")]
    Conflict {
        /// The thread.
        thread: String,
        /// The version the writer read and appended at.
        expected: u64,
        /// The thread's version in the database.
        actual: u64,
    },

    /// The thread was migrated to another schema (see
    /// [`Store::migrate_thread`](crate::Store::migrate_thread)) after this writer read
    /// it; nothing was written (`state_write_conflict`). Reload and retry.
    #[error("thread `{thread}` was migrated to schema {now:016x} after this writer read it at schema {read:016x}; nothing was written (reload and retry)")]
    Migrated {
        /// The thread.
        thread: String,
        /// The thread's fingerprint when the writer read it.
        read: u64,
        /// The thread's fingerprint now.
        now: u64,
    },

    /// [`Thread::merge_with`](crate::Thread::merge_with) ran its step the
    /// [`ConflictRetry`](crate::ConflictRetry)'s number of times, and each time another
    /// writer appended first; nothing was written (`state_write_conflict`).
    #[error("gave up writing to thread `{thread}` after {attempts} tries, each refused because another writer appended first; nothing was written (the last refusal: {last})")]
    RetriesExhausted {
        /// The thread.
        thread: String,
        /// How many times the step ran and its update was refused.
        attempts: u32,
        /// The last refusal ([`StoreError::Conflict`] or [`StoreError::Migrated`]).
        last: Box<StoreError>,
    },

    /// No thread has this id (`thread_not_found`).
    #[error("thread `{thread}` does not exist")]
    ThreadNotFound {
        /// The thread.
        thread: String,
    },

    /// A thread with this id exists already (`thread_exists`).
    #[error("thread `{thread}` exists already")]
    ThreadExists {
        /// The thread.
        thread: String,
    },

    /// The thread was written with another state type, one that shares no field with the type
    /// it is loaded as (`state_schema_mismatch`). An edited version of the same type is
    /// [`StoreError::Incompatible`] or loads (see [`migrate`](crate::migrate)).
    #[error(
        "thread `{thread}` cannot be loaded as `{type_name}`: {detail}; load it with its own type"
    )]
    SchemaMismatch {
        /// The thread.
        thread: String,
        /// The fingerprint stored with the rows.
        stored: u64,
        /// The fingerprint of the type it was loaded as.
        expected: u64,
        /// The type it was loaded as.
        type_name: &'static str,
        /// The stored type and its fields, and the loading type's.
        detail: String,
    },

    /// A row of the thread, written in an earlier schema of the type (or migrated from one),
    /// does not deserialize into the type it is loaded as (`state_schema_mismatch`): a field's
    /// type changed, or a required field was added. Nothing is loaded. See
    /// [`migrate`](crate::migrate).
    #[error("thread `{thread}` cannot be loaded as `{type_name}`: its {row} does not fit: {detail}; {help}")]
    Incompatible {
        /// The thread.
        thread: String,
        /// The type it was loaded as.
        type_name: &'static str,
        /// Which row, e.g. `entry 7` or `initial state`.
        row: String,
        /// The field, the stored value and what the type expects, and the fields changed since
        /// the stored schema.
        detail: String,
        /// How to load it.
        help: String,
    },

    /// The thread's rows are of another declared version than the type it is loaded as, and
    /// no chain of registered migrations leads from one to the other
    /// (`state_migration_missing`).
    #[error("thread `{thread}` holds states of version {from} but `{type_name}` is version {to}, and no chain of registered migrations leads from {from} to {to} ({registered} registered: {registry}); register Migration::new({from}, {to}, ..)")]
    MigrationMissing {
        /// The thread.
        thread: String,
        /// The type it was loaded as.
        type_name: &'static str,
        /// The stored version.
        from: u32,
        /// The type's version.
        to: u32,
        /// How many migrations are registered.
        registered: usize,
        /// The registered migrations, e.g. `1->2, 3->4`.
        registry: String,
    },

    /// The registered migrations do not give one chain: a version pair registered twice, or
    /// two equally short chains between two versions (`state_migration_chain_ambiguous`).
    #[error("the registered migrations are ambiguous: {reason}")]
    MigrationAmbiguous {
        /// The first version of the ambiguous pair, when known.
        from: Option<u32>,
        /// The second version of the ambiguous pair, when known.
        to: Option<u32>,
        /// What is ambiguous.
        reason: String,
    },

    /// The database was created by a newer (or unknown) version of this crate; nothing was
    /// written (`store_version_unsupported`).
    #[error("the database's store schema is version {found}, but this build of agentstate-store knows only version {supported}; nothing was written")]
    UnsupportedVersion {
        /// The version recorded in the database.
        found: i64,
        /// The version this build reads and writes.
        supported: i64,
    },

    /// A row could not be read back: hand-edited or corrupted JSON, or a value that does not fit
    /// the state type (`store_corrupt_data`).
    #[error("thread `{thread}` has a corrupt {what}: {reason}")]
    Corrupt {
        /// The thread.
        thread: String,
        /// Which row, e.g. `entry 7` or `snapshot at 64`.
        what: String,
        /// What is wrong with it.
        reason: String,
    },

    /// A record ([`Store::put_record`](crate::Store::put_record)) does not convert to or from
    /// its JSON (`store_corrupt_data`).
    #[error("{kind} record `{id}` does not read or write as JSON: {reason}")]
    Record {
        /// The record's kind.
        kind: String,
        /// Its id.
        id: String,
        /// What is wrong with it.
        reason: String,
    },

    /// The version asked for (to load, to fork from, to rewind to) is not in the thread
    /// (`thread_version_out_of_range`).
    #[error("thread `{thread}` has no version {seq}: its versions are {oldest} to {head}")]
    VersionOutOfRange {
        /// The thread.
        thread: String,
        /// The version asked for.
        seq: u64,
        /// The oldest version still loadable (after compaction), 0 otherwise.
        oldest: u64,
        /// The newest version.
        head: u64,
    },

    /// The thread has forks that still refer to it, so it cannot be deleted, nor rewound (see
    /// [`Store::rewind`](crate::Store::rewind)) to before the version a fork starts from
    /// (`thread_has_forks`). Nothing was changed.
    #[error("thread `{thread}` cannot be deleted, or rewound to before the version fork `{fork}` starts from; nothing was changed")]
    HasForks {
        /// The thread.
        thread: String,
        /// One fork that refers to it.
        fork: String,
    },

    /// An update did not merge into the state; nothing was written (its own category).
    #[error(transparent)]
    Merge(#[from] agentstate::Error),

    /// A migration step failed; the steps after it did not run (`state_migration_failed`).
    #[error("migrating thread `{thread}` from version {from} to version {to} failed: {reason}")]
    Migration {
        /// The thread.
        thread: String,
        /// The failing step's source version.
        from: u32,
        /// The failing step's target version.
        to: u32,
        /// Why (with the row, when known).
        reason: String,
    },

    /// The thread was deleted and created again, or rewound (see
    /// [`Store::rewind`](crate::Store::rewind)), after this writer read it: the writer's state
    /// belongs to the thread's previous life or to a history that was taken back; nothing was
    /// written (`state_write_conflict`). Reload and retry.
    #[error("thread `{thread}` was deleted and created again, or rewound, after this writer read it; nothing was written (reload and retry)")]
    Recreated {
        /// The thread.
        thread: String,
    },

    /// A thread id the store does not accept (`thread_id_invalid`). See
    /// [`check_id`](crate::check_id).
    #[error("thread id {thread:?} is not allowed: {reason}")]
    InvalidId {
        /// The id.
        thread: String,
        /// What is wrong with it.
        reason: String,
    },

    /// Another worker holds the thread's lease: it is running the thread (`thread_leased`).
    /// Nothing was changed. See [`Store::lease`](crate::Store::lease).
    #[error("thread `{thread}` is being run by worker `{owner}` (its lease expires in {}); try again once it is released or has expired", duration(.expires_in_ms))]
    Leased {
        /// The thread.
        thread: String,
        /// The worker holding the lease.
        owner: String,
        /// How long the lease still had, by the database's clock.
        expires_in_ms: u64,
    },

    /// A worker renewed or released a lease that is no longer its own (it expired and another
    /// worker took it, or it was released), or appended fenced by a lease it does not hold any
    /// more (another worker's, released, or expired) (`lease_lost`). Nothing was written; the
    /// worker must stop running the thread.
    #[error("worker `{owner}` no longer holds the lease on thread `{thread}`: {}; nothing was written, stop running the thread", lost(.now_held_by))]
    LeaseLost {
        /// The thread.
        thread: String,
        /// The worker that renewed, released or appended.
        owner: String,
        /// The worker holding the lease now, if any.
        now_held_by: Option<String>,
    },

    /// A lease owner the store does not accept (`lease_owner_invalid`): it must be a
    /// non-empty string of at most 1,024 bytes without control characters.
    #[error("lease owner {owner:?} is not allowed: {reason}")]
    InvalidLeaseOwner {
        /// The owner.
        owner: String,
        /// What is wrong with it.
        reason: String,
    },

    /// The database failed or could not be reached (`store_backend_error`).
    #[error("{backend} failed while {doing}: {source}")]
    Backend {
        /// `SQLite` or `PostgreSQL`.
        backend: &'static str,
        /// What the store was doing, e.g. `appending to thread `t``.
        doing: String,
        /// The driver's error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync + 'static>,
    },
}

impl StoreError {
    /// The error's category name: `state_write_conflict`, `thread_not_found`, `thread_exists`,
    /// `state_schema_mismatch`, `state_migration_missing`, `state_migration_chain_ambiguous`,
    /// `thread_id_invalid`, `store_version_unsupported`, `store_corrupt_data`,
    /// `thread_version_out_of_range`, `thread_has_forks`, `state_migration_failed`,
    /// `thread_leased`, `lease_lost`, `lease_owner_invalid`, `store_backend_error`, or a
    /// merge error's own category.
    ///
    /// ```
    /// use agentstate_store::StoreError;
    ///
    /// let err = StoreError::Conflict { thread: "t".into(), expected: 3, actual: 4 };
    /// assert_eq!(err.category(), "state_write_conflict");
    /// assert!(err.is_conflict());
    ///
    /// let err = StoreError::Leased { thread: "t".into(), owner: "w".into(), expires_in_ms: 4_200 };
    /// assert_eq!(err.category(), "thread_leased");
    /// assert!(err.to_string().starts_with("thread `t` is being run by worker `w` (its lease expires in 4.2 s)"));
    /// ```
    pub fn category(&self) -> &'static str {
        match self {
            StoreError::Conflict { .. }
            | StoreError::Migrated { .. }
            | StoreError::RetriesExhausted { .. }
            | StoreError::Recreated { .. } => "state_write_conflict",
            StoreError::ThreadNotFound { .. } => "thread_not_found",
            StoreError::ThreadExists { .. } => "thread_exists",
            StoreError::SchemaMismatch { .. } | StoreError::Incompatible { .. } => {
                "state_schema_mismatch"
            }
            StoreError::MigrationMissing { .. } => "state_migration_missing",
            StoreError::MigrationAmbiguous { .. } => "state_migration_chain_ambiguous",
            StoreError::InvalidId { .. } => "thread_id_invalid",
            StoreError::UnsupportedVersion { .. } => "store_version_unsupported",
            StoreError::Corrupt { .. } | StoreError::Record { .. } => "store_corrupt_data",
            StoreError::VersionOutOfRange { .. } => "thread_version_out_of_range",
            StoreError::HasForks { .. } => "thread_has_forks",
            StoreError::Merge(err) => err.category(),
            StoreError::Migration { .. } => "state_migration_failed",
            StoreError::Leased { .. } => "thread_leased",
            StoreError::LeaseLost { .. } => "lease_lost",
            StoreError::InvalidLeaseOwner { .. } => "lease_owner_invalid",
            StoreError::Backend { .. } => "store_backend_error",
        }
    }

    /// Whether this is a write conflict (another writer appended first, or migrated the
    /// thread, or kept doing so through every retry): reloading and retrying can succeed.
    pub fn is_conflict(&self) -> bool {
        matches!(
            self,
            StoreError::Conflict { .. }
                | StoreError::Migrated { .. }
                | StoreError::RetriesExhausted { .. }
                | StoreError::Recreated { .. }
        )
    }

    pub(crate) fn corrupt(thread: &str, what: impl Into<String>, reason: impl ToString) -> Self {
        StoreError::Corrupt {
            thread: thread.to_owned(),
            what: what.into(),
            reason: reason.to_string(),
        }
    }

    #[allow(dead_code)] // used by whichever backends are compiled in
    pub(crate) fn backend(
        backend: &'static str,
        doing: impl Into<String>,
        source: impl Into<Box<dyn std::error::Error + Send + Sync + 'static>>,
    ) -> Self {
        StoreError::Backend {
            backend,
            doing: doing.into(),
            source: source.into(),
        }
    }
}

/// A lease's remaining time as [`StoreError::Leased`] says it: `250 ms`, `4.2 s`.
fn duration(ms: &u64) -> String {
    if *ms < 1_000 {
        format!("{ms} ms")
    } else {
        format!("{:.1} s", *ms as f64 / 1_000.0)
    }
}

/// What became of a lost lease, as [`StoreError::LeaseLost`] says it.
fn lost(now_held_by: &Option<String>) -> String {
    match now_held_by {
        Some(other) => format!("worker `{other}` holds it now"),
        None => "no worker holds it now (it was released, or it expired)".to_owned(),
    }
}
