//! The store's errors: one enum, each variant a readable sentence, [`StoreError::category`] a
//! stable name.

/// Everything the store reports. Bad data in the database is always one of these, never a panic
/// and never a partly loaded state.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// Another writer appended to the thread after this writer read it; nothing was written
    /// (`state_write_conflict`). Reload the thread and merge again (see
    /// [`Thread::merge_with`](crate::thread::Thread::merge_with)).
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
    /// [`Store::migrate_thread`](crate::store::Store::migrate_thread)) after this writer read
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

    /// [`Thread::merge_with`](crate::thread::Thread::merge_with) ran its step the
    /// [`RetryPolicy`](crate::thread::RetryPolicy)'s number of times, and each time another
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

    /// The thread was written with another state type, or another version of it, than the one
    /// it is loaded as, and no migration leads from one to the other (`state_schema_mismatch`).
    #[error("thread `{thread}` holds states of schema {stored:016x}, but `{type_name}` has schema {expected:016x}; load it with its own type or register a migration from {stored:016x} to {expected:016x}")]
    SchemaMismatch {
        /// The thread.
        thread: String,
        /// The fingerprint stored with the thread.
        stored: u64,
        /// The fingerprint of the type it was loaded as.
        expected: u64,
        /// The type it was loaded as.
        type_name: &'static str,
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

    /// The version asked for is not in the thread (`thread_version_out_of_range`).
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

    /// The thread has forks that still refer to it, so it cannot be deleted
    /// (`thread_has_forks`).
    #[error("thread `{thread}` cannot be deleted: fork `{fork}` starts from it")]
    HasForks {
        /// The thread.
        thread: String,
        /// One fork that refers to it.
        fork: String,
    },

    /// An update did not merge into the state; nothing was written (its own category).
    #[error(transparent)]
    Merge(#[from] agentstate::Error),

    /// A migration failed (`state_migration_failed`).
    #[error("migrating thread `{thread}` from schema {from:016x} to {to:016x} failed: {reason}")]
    Migration {
        /// The thread.
        thread: String,
        /// The stored fingerprint.
        from: u64,
        /// The target fingerprint.
        to: u64,
        /// Why.
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
    /// `state_schema_mismatch`, `store_version_unsupported`, `store_corrupt_data`,
    /// `thread_version_out_of_range`, `thread_has_forks`, `state_migration_failed`,
    /// `store_backend_error`, or a merge error's own category.
    ///
    /// ```
    /// use agentstate_store::StoreError;
    ///
    /// let err = StoreError::Conflict { thread: "t".into(), expected: 3, actual: 4 };
    /// assert_eq!(err.category(), "state_write_conflict");
    /// assert!(err.is_conflict());
    /// ```
    pub fn category(&self) -> &'static str {
        match self {
            StoreError::Conflict { .. }
            | StoreError::Migrated { .. }
            | StoreError::RetriesExhausted { .. } => "state_write_conflict",
            StoreError::ThreadNotFound { .. } => "thread_not_found",
            StoreError::ThreadExists { .. } => "thread_exists",
            StoreError::SchemaMismatch { .. } => "state_schema_mismatch",
            StoreError::UnsupportedVersion { .. } => "store_version_unsupported",
            StoreError::Corrupt { .. } => "store_corrupt_data",
            StoreError::VersionOutOfRange { .. } => "thread_version_out_of_range",
            StoreError::HasForks { .. } => "thread_has_forks",
            StoreError::Merge(err) => err.category(),
            StoreError::Migration { .. } => "state_migration_failed",
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
