//! For implementors of a backend: the [`Backend`] trait every database implements, moving rows
//! in and out of it, each operation in one transaction, and the rows it moves. The typed API
//! is [`Store`](crate::Store), which builds the rows and checks types and versions around these
//! raw operations.
//!
//! The rows are threads, journal entries and snapshots as JSON text with their bookkeeping:
//! [`NewThread`] and [`NewEntry`] (to write), [`Loaded`] (where loading a version starts,
//! [`Base`], and the [`Entries`] to replay after it, as [`StoredEntry`]s), [`HistoryPage`],
//! [`StoredRow`] (what a [`Rewriter`] rewrites), [`LeaseOp`], [`LeaseChange`]; and, shared with users, the
//! root's [`ThreadInfo`], [`EntryInfo`](crate::EntryInfo), [`Head`](crate::Head),
//! [`LeaseInfo`], [`ThreadQuery`] and [`migrate::SchemaRecord`](crate::migrate::SchemaRecord).

pub use crate::record::{
    Base, Entries, EntryBatch, HistoryPage, LeaseChange, LeaseOp, Loaded, NewEntry, NewThread,
    Rewriter, StoredEntry, StoredRow,
};

use crate::error::StoreError;
use crate::record::{LeaseInfo, SchemaRecord, ThreadInfo, ThreadQuery};
use std::future::Future;

/// A database holding threads. Implemented by `Sqlite` and `Postgres`; users call
/// [`Store`](crate::Store), which checks types and versions around these raw operations.
pub trait Backend: std::fmt::Debug + Send + Sync + 'static {
    /// Creates a thread (for a fork: after checking its parent has the version it starts at),
    /// with a new incarnation; an id [`check_id`](crate::check_id) refuses is
    /// [`StoreError::InvalidId`].
    fn create(
        &self,
        thread: NewThread,
    ) -> impl Future<Output = Result<ThreadInfo, StoreError>> + Send;

    /// Appends `entry` as version `expected + 1` if the thread is at version `expected`, has
    /// the fingerprint `entry.thread_fingerprint` and the incarnation
    /// `entry.thread_incarnation`, and (if `entry.lease` names an owner) its lease is that
    /// owner's and has not expired, all checked in the append's own statement or transaction;
    /// returns the new version. Otherwise it writes nothing and fails with, in this order of
    /// precedence, [`StoreError::LeaseLost`], [`StoreError::Recreated`],
    /// [`StoreError::Conflict`] or [`StoreError::Migrated`] (the same answer on every backend).
    /// With a [`LeaseChange`] in `entry.lease_change`, the same statement or transaction takes
    /// the lease first (refused with [`StoreError::Leased`] if another holds it) or releases it
    /// after.
    fn append(
        &self,
        thread: &str,
        expected: u64,
        entry: NewEntry,
    ) -> impl Future<Output = Result<u64, StoreError>> + Send;

    /// Appends `entries` as versions `expected + 1 ..= expected + n`, in order, in one
    /// transaction: each is checked as [`append`](Backend::append) checks it (its fingerprint,
    /// incarnation and lease fence, at the version the one before it made), and either all are
    /// written or, on the first refusal, none. Returns the thread's new version (with no
    /// entries: writes nothing and returns the thread's version; a missing thread is
    /// [`StoreError::ThreadNotFound`]).
    fn append_all(
        &self,
        thread: &str,
        expected: u64,
        entries: Vec<NewEntry>,
    ) -> impl Future<Output = Result<u64, StoreError>> + Send;

    /// Stores the state of version `seq` (a committed version) of the thread's incarnation
    /// `incarnation` as a snapshot (an existing one is kept), then, in the same transaction,
    /// deletes the thread's snapshots older than its newest `keep`, except the one at the
    /// thread's oldest version (a compaction's base) and those a fork loads from (the newest at
    /// or before each fork point). If the thread does not have version `seq` or is another
    /// incarnation now (it was deleted and created again, or rewound, since the state was
    /// read: its version `seq` may be another state), no snapshot is stored, and that is not an
    /// error. A rewind waits for it, or it for the rewind.
    fn put_snapshot(
        &self,
        thread: &str,
        seq: u64,
        incarnation: i64,
        fingerprint: u64,
        json: String,
        keep: u32,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// What it takes to build version `seq` (the newest if `None`): the newest snapshot at or
    /// before it (or the initial state, or the parent's version for a fork) and the entries
    /// after that, read in one consistent view. With `after` (the version a caller holds), and
    /// if the entries after it are still there: [`Base::Continue`](crate::backend::Base) and
    /// just those entries.
    fn load(
        &self,
        thread: &str,
        seq: Option<u64>,
        after: Option<u64>,
    ) -> impl Future<Output = Result<Loaded, StoreError>> + Send;

    /// The thread's row.
    fn info(&self, thread: &str) -> impl Future<Output = Result<ThreadInfo, StoreError>> + Send;

    /// The metadata of at most `limit` of the thread's own entries after version `after` and
    /// at or before `until`, in order (the newest first if `newest_first`, so a page of the
    /// newest entries is read, not the oldest), with the thread's parent link.
    fn history(
        &self,
        thread: &str,
        after: u64,
        until: u64,
        limit: u32,
        newest_first: bool,
    ) -> impl Future<Output = Result<HistoryPage, StoreError>> + Send;

    /// A page of threads, ordered by id.
    fn list(
        &self,
        query: ThreadQuery,
    ) -> impl Future<Output = Result<Vec<ThreadInfo>, StoreError>> + Send;

    /// Deletes a thread with its entries and snapshots; false if there was none. Fails with
    /// [`StoreError::HasForks`] while a fork refers to it.
    fn delete(&self, thread: &str) -> impl Future<Output = Result<bool, StoreError>> + Send;

    /// In one transaction, with the thread locked against writers: replaces the JSON of each of
    /// the thread's own rows (its initial state, every entry still in the journal, every
    /// snapshot) by what `rewrite` returns for it, and records `fingerprint` as the schema of
    /// the thread and all its rows. If `rewrite` fails on any row, nothing is written. Returns
    /// the thread's version.
    fn rewrite(
        &self,
        thread: &str,
        fingerprint: u64,
        rewrite: Rewriter,
    ) -> impl Future<Output = Result<u64, StoreError>> + Send;

    /// Records a state type's schema (see [`migrate`](crate::migrate)) if none with its
    /// fingerprint is recorded yet.
    fn put_schema(
        &self,
        schema: SchemaRecord,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Every recorded schema.
    fn schemas(&self) -> impl Future<Output = Result<Vec<SchemaRecord>, StoreError>> + Send;

    /// In one transaction: stores the snapshot of version `seq` of the thread's incarnation
    /// `incarnation`, then drops the entries and snapshots before the newest snapshot that no
    /// fork needs to go behind, and raises the thread's oldest version to it. Returns the
    /// number of entries dropped. If the thread is another incarnation now (deleted and created
    /// again, or rewound, since the state was read), it writes nothing and fails with
    /// [`StoreError::Recreated`].
    fn compact(
        &self,
        thread: &str,
        seq: u64,
        incarnation: i64,
        fingerprint: u64,
        json: String,
    ) -> impl Future<Output = Result<u64, StoreError>> + Send;

    /// In one transaction, with the thread locked against writers: takes the thread back to
    /// version `seq`, as if nothing after it had been written. Deletes the thread's own entries
    /// and snapshots after `seq`, sets its version to `seq` and draws a new incarnation, so
    /// that a writer that read it before is refused ([`StoreError::Recreated`]) rather than
    /// appending its versions again on another history. Returns the thread's row after it.
    ///
    /// Writes nothing and fails, in this order, if the thread is missing
    /// ([`StoreError::ThreadNotFound`]), `seq` is after its version or before its oldest
    /// version (compacted away, or a fork's starting point:
    /// [`StoreError::VersionOutOfRange`]), a lease on it is held and has not expired
    /// ([`StoreError::Leased`], judged by the same clock as [`lease`](Backend::lease)), or a
    /// fork of it starts after `seq` ([`StoreError::HasForks`]). With `seq` at the thread's
    /// version, once these checks pass, it writes nothing (the incarnation stays) and returns
    /// the row.
    fn rewind(
        &self,
        thread: &str,
        seq: u64,
    ) -> impl Future<Output = Result<ThreadInfo, StoreError>> + Send;

    /// In one transaction, with the thread locked against writers: creates thread `new_id` as
    /// an independent copy of `thread`, with a new incarnation, the user metadata `metadata`
    /// (a JSON object's text, as [`NewThread::metadata`]) and the creation time `created_ms`,
    /// and everything else of the source's row: its schema's fingerprint, its version, its
    /// oldest version and, for a fork, its parent link (the copy is then a fork of the same
    /// parent at the same version). Copies every row the thread owns: its initial state, every
    /// entry still in its journal (the same versions, kinds, times, nodes, run ids, metadata,
    /// fingerprints and bodies) and every snapshot; not its lease. The copy's rows are its
    /// own: what is done to either thread afterwards does not change the other. Returns the
    /// copy's row.
    ///
    /// Writes nothing and fails, in this order, if `new_id` is one
    /// [`check_id`](crate::check_id) refuses ([`StoreError::InvalidId`]), the thread is missing
    /// ([`StoreError::ThreadNotFound`]), or a thread `new_id` exists
    /// ([`StoreError::ThreadExists`]).
    fn copy(
        &self,
        thread: &str,
        new_id: &str,
        metadata: String,
        created_ms: i64,
    ) -> impl Future<Output = Result<ThreadInfo, StoreError>> + Send;

    /// Acquires, renews, releases or revokes the thread's lease for `owner` (see [`LeaseOp`]), in one
    /// atomic statement or transaction. Expiry is judged, and the new one computed, by the
    /// database's clock (PostgreSQL) or the local clock (SQLite). Returns the lease now held,
    /// with the thread's [`Head`](crate::Head) as the same statement or transaction
    /// saw it (`None` for a release; for a revocation, the lease it took away, if one was
    /// held). A missing thread is [`StoreError::ThreadNotFound`]; a
    /// lease that is not the owner's is [`StoreError::Leased`] (acquire: another holds it) or
    /// [`StoreError::LeaseLost`] (renew, release: another holds it or none is recorded for the
    /// owner).
    fn lease(
        &self,
        thread: &str,
        owner: &str,
        ttl_ms: u64,
        op: LeaseOp,
    ) -> impl Future<Output = Result<Option<LeaseInfo>, StoreError>> + Send;

    /// The thread's lease, if one is held and not expired, with the thread's head.
    fn lease_info(
        &self,
        thread: &str,
    ) -> impl Future<Output = Result<Option<LeaseInfo>, StoreError>> + Send;
}
