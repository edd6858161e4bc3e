//! The SQLite backend (feature `sqlite`, default): one connection, used by a dedicated thread, so
//! each operation is one hop from the async caller and runs its whole transaction without
//! yielding. An append, a transaction of two statements that never waits (WAL mode, no sync at
//! commit, checkpoints left to the thread), runs on the caller's thread when the connection is
//! free and the write lock is not held elsewhere, and goes to the thread otherwise. WAL mode;
//! appends take the write lock first (`BEGIN IMMEDIATE`), so the version check and the insert
//! are one atomic step across threads and processes.

use crate::backend::Backend;
use crate::error::StoreError;
use crate::record::{
    check_compaction, check_id, check_lookup, check_range, entry_info, held, lease_outcome,
    new_incarnation, now_ms, parse_object, refusal, rewind_refusal, Base, Entries, EntryBatch,
    Found, FoundLease, Head, HistoryPage, LeaseChange, LeaseInfo, LeaseOp, Loaded, NewEntry,
    NewThread, Rewriter, SchemaRecord, Start, StoredEntry, StoredRow, ThreadInfo, ThreadQuery,
};
use crate::records::{EventBatch, EventRow, RecordBackend, RecordRow, RecordWrites, RunClaim};
use crate::store::Store;
use rusqlite::{params, Connection, ErrorCode, OptionalExtension, TransactionBehavior};
use std::cell::Cell;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex, MutexGuard, PoisonError, TryLockError};
use std::time::{Duration, Instant};

/// A [`Store`] in a SQLite database file.
pub type SqliteStore = Store<Sqlite>;

/// Work for the connection's thread. A job locks the connection itself, and unlocks it before it
/// answers: a caller woken by the answer then finds the connection free for an inline append.
type Job = Box<dyn FnOnce(&Mutex<Connection>) + Send>;

/// How durable a commit is: SQLite's `synchronous` setting in WAL mode (given to
/// [`SqliteStore::open_with`](Store::open_with)).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Synchronous {
    /// `synchronous=NORMAL`: a commit survives a crash of the process, but the last commits
    /// before a power loss or OS crash may be rolled back (the database stays consistent).
    #[default]
    Normal,
    /// `synchronous=FULL`: every commit is synced to disk before it returns.
    Full,
}

/// The SQLite backend: a connection used by a dedicated thread, and by a caller's append when
/// it is free (see [`Store::with_inline_appends`]).
#[derive(Debug)]
pub struct Sqlite {
    jobs: mpsc::Sender<Job>,
    conn: Arc<Mutex<Connection>>,
    /// Whether an append may run on the caller's thread.
    inline: AtomicBool,
    /// Whether a checkpoint job is queued for the thread (so appends queue one, not many).
    checkpoint_queued: Arc<AtomicBool>,
}

/// The WAL size (in pages) past which the log is checkpointed into the database, SQLite's
/// default `wal_autocheckpoint`.
const CHECKPOINT_PAGES: std::ffi::c_int = 1000;

thread_local! {
    /// Set on the connection's own thread, which checkpoints in the commit that fills the WAL,
    /// as SQLite's default does.
    static CONNECTION_THREAD: Cell<bool> = const { Cell::new(false) };
    /// Set by a commit on another thread (an inline append) that filled the WAL: the checkpoint,
    /// which syncs files, is then queued for the connection's thread.
    static CHECKPOINT_DUE: Cell<bool> = const { Cell::new(false) };
}

/// The connection's WAL hook, in place of SQLite's automatic checkpoint: a checkpoint syncs the
/// database file, so it must not run on an async caller's thread.
fn wal_committed(wal: &rusqlite::hooks::Wal, pages: std::ffi::c_int) -> rusqlite::Result<()> {
    if pages >= CHECKPOINT_PAGES {
        if CONNECTION_THREAD.get() {
            // As SQLite's own hook: a failed checkpoint is not the commit's failure.
            let _ = wal.checkpoint();
        } else {
            CHECKPOINT_DUE.set(true);
        }
    }
    Ok(())
}

const BACKEND: &str = "SQLite";

fn db_err(doing: impl Into<String>) -> impl FnOnce(rusqlite::Error) -> StoreError {
    let doing = doing.into();
    move |e| StoreError::backend(BACKEND, doing, e)
}

impl Store<Sqlite> {
    /// Opens (creating if needed) the database file at `path`, WAL mode, `synchronous=NORMAL`.
    ///
    /// ```
    /// use agentstate_store::SqliteStore;
    ///
    /// let dir = std::env::temp_dir().join(format!("agentstate-doc-{}", std::process::id()));
    /// std::fs::create_dir_all(&dir).unwrap();
    /// let store = SqliteStore::open(dir.join("threads.db"))?;
    /// # Ok::<(), agentstate_store::StoreError>(())
    /// ```
    pub fn open(path: impl AsRef<Path>) -> Result<Self, StoreError> {
        Self::open_with(path, Synchronous::Normal)
    }

    /// Opens the database file at `path` with the given `synchronous` setting (how durable a
    /// commit is).
    pub fn open_with(path: impl AsRef<Path>, synchronous: Synchronous) -> Result<Self, StoreError> {
        let path = path.as_ref();
        let conn =
            Connection::open(path).map_err(db_err(format!("opening `{}`", path.display())))?;
        Sqlite::start(conn, synchronous).map(Store::new)
    }

    /// A private database in memory (for tests and scratch work).
    pub fn open_in_memory() -> Result<Self, StoreError> {
        let conn = Connection::open_in_memory().map_err(db_err("opening a database in memory"))?;
        Sqlite::start(conn, Synchronous::Normal).map(Store::new)
    }

    /// Whether an append may run on the calling task's thread (the default with
    /// [`Synchronous::Normal`]; off by default with [`Synchronous::Full`], whose commits wait for
    /// the disk, which would then block the caller's thread).
    ///
    /// An append is one short transaction (a version check and an insert, tens of
    /// microseconds) that cannot wait on anything: it runs inline only when the connection is
    /// free and the database's write lock is not held by another connection (it does not wait
    /// for either; otherwise it goes to the connection's thread, as every other operation does),
    /// its commit does not sync (WAL mode, `synchronous=NORMAL`), and the WAL checkpoint a commit
    /// may call for is queued for the connection's thread. That is within tokio's guidance for
    /// work between two `.await`s, and it saves the two thread wake-ups of a hop, which on a
    /// virtual machine cost as much as the append itself. Turn it off to keep every database
    /// call off the executor's threads. The setting is shared by the store's clones.
    ///
    /// ```
    /// use agentstate_store::SqliteStore;
    ///
    /// let store = SqliteStore::open_in_memory()?.with_inline_appends(false);
    /// assert!(!store.inline_appends());
    /// # Ok::<(), agentstate_store::StoreError>(())
    /// ```
    #[must_use]
    pub fn with_inline_appends(self, on: bool) -> Self {
        self.backend.inline.store(on, Ordering::Relaxed);
        self
    }

    /// Whether appends may run on the calling task's thread (see
    /// [`with_inline_appends`](Self::with_inline_appends)).
    pub fn inline_appends(&self) -> bool {
        self.backend.inline.load(Ordering::Relaxed)
    }
}

/// How long an operation on the connection's thread waits for another connection's write lock.
const BUSY_TIMEOUT: Duration = Duration::from_secs(30);

/// The connection, also after a job panicked while holding it (every job runs whole
/// transactions, which a panic rolls back).
fn lock(conn: &Mutex<Connection>) -> MutexGuard<'_, Connection> {
    conn.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Sqlite {
    fn start(mut conn: Connection, synchronous: Synchronous) -> Result<Self, StoreError> {
        conn.busy_timeout(BUSY_TIMEOUT)
            .map_err(db_err("setting the busy timeout"))?;
        let sync = match synchronous {
            Synchronous::Normal => "NORMAL",
            Synchronous::Full => "FULL",
        };
        // 8 KiB pages (for a new file): a journal row of a chat message is ~0.7 KiB, and a 4 KiB
        // page would leave an eighth of itself empty after its fifth row. A 16 MiB page cache
        // (SQLite's default is 2 MiB) keeps appends to a long journal as fast as to a short one.
        // Incremental auto-vacuum (for a new file; see `reclaim`) gives the pages of deleted
        // snapshots and compacted entries back to the file system.
        conn.execute_batch(&format!(
            "PRAGMA page_size=8192; PRAGMA auto_vacuum=INCREMENTAL; PRAGMA journal_mode=WAL; PRAGMA synchronous={sync}; PRAGMA cache_size=-16384;"
        ))
        .map_err(db_err("setting WAL mode"))?;
        setup(&mut conn)?;
        conn.wal_hook(Some(wal_committed));
        // Every statement the store runs stays prepared (rusqlite keeps 16 by default).
        conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
        let conn = Arc::new(Mutex::new(conn));
        let (jobs, queue) = mpsc::channel::<Job>();
        let shared = Arc::clone(&conn);
        std::thread::Builder::new()
            .name("agentstate-sqlite".into())
            .spawn(move || {
                CONNECTION_THREAD.set(true);
                while let Some(job) = next_job(&queue) {
                    job(&shared);
                }
            })
            .map_err(|e| StoreError::backend(BACKEND, "starting its thread", e))?;
        Ok(Sqlite {
            jobs,
            conn,
            inline: AtomicBool::new(synchronous == Synchronous::Normal),
            checkpoint_queued: Arc::new(AtomicBool::new(false)),
        })
    }

    /// Runs the append of `entries` on the caller's thread if the connection is free and the write
    /// lock can be had at once; `None` (to be sent to the thread) otherwise.
    fn append_inline(
        &self,
        id: &str,
        expected: u64,
        entries: &[NewEntry],
    ) -> Option<Result<u64, StoreError>> {
        let done = self.inline(|conn| append_entries(conn, id, expected, entries))?;
        Some(flatten_append(id, done))
    }

    /// Runs `f` (one transaction) on the caller's thread if the connection is free and the
    /// write lock can be had at once; `None` (to be sent to the thread) otherwise, or when `f`
    /// found the database busy. While a checkpoint is queued, writes queue behind it (as they
    /// would wait for the checkpoint in the commit that filled the WAL, had SQLite run it
    /// there).
    fn inline<R>(
        &self,
        f: impl FnOnce(&mut Connection) -> rusqlite::Result<R>,
    ) -> Option<rusqlite::Result<R>> {
        if !self.inline.load(Ordering::Relaxed) || self.checkpoint_queued.load(Ordering::Acquire) {
            return None;
        }
        let mut conn = match self.conn.try_lock() {
            Ok(conn) => conn,
            Err(TryLockError::Poisoned(conn)) => conn.into_inner(),
            Err(TryLockError::WouldBlock) => return None,
        };
        if conn.busy_timeout(Duration::ZERO).is_err() {
            return None;
        }
        let done = f(&mut conn);
        let _ = conn.busy_timeout(BUSY_TIMEOUT);
        drop(conn);
        // A commit that filled the WAL queues a checkpoint on the connection's thread.
        if CHECKPOINT_DUE.take() && !self.checkpoint_queued.swap(true, Ordering::AcqRel) {
            let queued = Arc::clone(&self.checkpoint_queued);
            let _ = self.jobs.send(Box::new(move |conn| {
                let _ = lock(conn).query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()));
                queued.store(false, Ordering::Release);
            }));
        }
        match done {
            Err(e)
                if matches!(
                    e.sqlite_error_code(),
                    Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked)
                ) =>
            {
                None
            }
            done => Some(done),
        }
    }

    /// Runs `f` on the connection's thread and waits for it without blocking the executor.
    async fn call<R: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Connection) -> Result<R, StoreError> + Send + 'static,
    ) -> Result<R, StoreError> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let job: Job = Box::new(move |conn| {
            let done = f(&mut lock(conn));
            let _ = tx.send(done);
        });
        let gone = || StoreError::backend(BACKEND, "running a query", "its thread has stopped");
        self.jobs.send(job).map_err(|_| gone())?;
        rx.await.map_err(|_| gone())?
    }
}

/// The next job, or `None` once every sender is gone. A caller that just got an answer often
/// sends its next job within microseconds (a fork's load is its own, then its parent's; appends
/// queue behind a checkpoint until it has run), so the
/// thread polls for 50 µs before it sleeps: waking a sleeping thread costs tens of microseconds
/// on a virtual machine, as much as an append itself.
fn next_job(queue: &mpsc::Receiver<Job>) -> Option<Job> {
    let until = Instant::now() + Duration::from_micros(50);
    loop {
        match queue.try_recv() {
            Ok(job) => return Some(job),
            Err(mpsc::TryRecvError::Disconnected) => return None,
            Err(mpsc::TryRecvError::Empty) if Instant::now() < until => std::thread::yield_now(),
            Err(mpsc::TryRecvError::Empty) => return queue.recv().ok(),
        }
    }
}

/// The version of the SQLite tables this build creates, reads and writes. Versions 1 (entries
/// and snapshots in `WITHOUT ROWID` tables keyed by `(tid, seq)`, the version in a table), 2
/// (the same tables as 3, but every append also moved the thread row's `head` on), 3 and 4
/// are migrated when they are opened; any other version is refused with
/// [`StoreError::UnsupportedVersion`] and not written to.
///
/// A thread's version is the larger of its row's `head` (the version at its creation, fork,
/// last compaction or rewind, or of the newest entry deleted since) and its newest journal
/// entry's, so an append writes one row of one table (a version-2 build, which would read a
/// stale `head`, refuses the file). Version 4 adds:
/// - the schema records (one per state schema ever written: its fingerprint, declared version,
///   type name, description and field types; see [`migrate`](crate::migrate)), kept as rows of
///   the snapshots table with negative keys (`-1 - (fingerprint & (2^63 - 1))`), which no
///   thread's snapshot has, so that they take no page of their own (the 300-turn chat's file
///   stays within its 0.5 MB);
/// - each thread's `incarnation`, drawn when it is created (0 for threads created before) and
///   again when it is rewound ([`Store::rewind`]), which every append checks, so a writer that
///   read a thread deleted and created again, or rewound, since is refused
///   ([`StoreError::Recreated`]);
/// - a trigger that raises a thread's `head` to an entry deleted from its end, so an entry
///   deleted by hand is a gap that loading reports, never a silently shorter thread.
///
/// New files use incremental auto-vacuum: the pages freed by deleting snapshots (the snapshot
/// policy), compacting and deleting threads are given back to the file system in the same
/// transaction. A file created before keeps its pages (SQLite can only switch an existing
/// file to auto-vacuum with a full `VACUUM`, which the store does not run on its own: run
/// `PRAGMA auto_vacuum=INCREMENTAL; VACUUM;` on it once, with `sqlite3`, while no process has
/// it open).
///
/// Version 5 added each thread's lease, two columns of its row (`lease_owner`,
/// `lease_expires_ms`).
///
/// Version 6 keeps the thread row small, so that an append (which reads it) and a lease change
/// cost the same whatever the thread's size (in version 5, a thread created with a large state,
/// 100k messages, had it in its row: every append read past it and every lease change rewrote
/// it):
/// - a thread's initial state is its snapshot at version 0 (a row of the snapshots table,
///   which the snapshot policy keeps and a compaction drops like any snapshot before the
///   thread's oldest version);
/// - its lease is a row of its own, present only while a lease is recorded (see
///   [`Store::lease`]): a row of the snapshots table keyed by the thread's `tid` alone (a key
///   below 2^32, which no thread's snapshot has, since `tid`s start at 1), the owner in `body`
///   and the expiry (milliseconds since the Unix epoch by the local clock) in `fingerprint`,
///   so that it takes no page of its own (as the schema records). The view `agentstate_leases`
///   (`tid`, `owner`, `expires_ms`) shows them.
///
/// A version-5 file is migrated when it is opened: the initial state of each thread not
/// compacted past it becomes its version-0 snapshot (one written there already is kept), each
/// recorded lease a row of its own, and the thread row's three columns are dropped.
pub const TABLES_VERSION: i64 = 6;

/// A thread's version, in SQL, for a row `t` of the threads table (see [`TABLES_VERSION`]): the
/// newest entry's key is found by one B-tree seek.
macro_rules! version_of {
    ($t:literal) => {
        concat!(
            "max(",
            $t,
            ".head, coalesce((SELECT max(e.key) FROM agentstate_entries e WHERE e.key > ",
            $t,
            ".tid << 32 AND e.key < (",
            $t,
            ".tid + 1) << 32) & 4294967295, 0))"
        )
    };
}

/// The most versions an SQLite thread holds: an entry's key is `tid * 2^32 + seq`.
pub const MAX_SEQ: u64 = u32::MAX as u64;

/// The most threads an SQLite database holds (`tid` below 2^31, so a key fits an `i64`).
const MAX_TID: i64 = 1 << 31;

/// The key of version `seq` of thread `tid` in the entries and snapshots tables.
fn key(tid: i64, seq: u64) -> i64 {
    (tid << 32) + seq as i64
}

/// The entries and snapshots tables: rowid tables whose integer key packs `(tid, seq)`, so a
/// table is one B-tree with small interior cells (in a `WITHOUT ROWID` table the interior pages
/// hold whole rows, journal entries of ~0.7 KiB, and its leaves are split rather than packed:
/// 59 pages instead of 56 for the 300-turn chat); `tid` and `seq` are virtual columns for
/// reading with `sqlite3`. (The same since version 2.)
const TABLES: &str = "
    CREATE TABLE agentstate_entries (
        key INTEGER PRIMARY KEY,
        kind INTEGER NOT NULL,
        time_ms INTEGER NOT NULL,
        node TEXT,
        run_id TEXT,
        extra TEXT,
        fingerprint INTEGER,
        body TEXT NOT NULL,
        tid INTEGER GENERATED ALWAYS AS (key >> 32) VIRTUAL,
        seq INTEGER GENERATED ALWAYS AS (key & 0xFFFFFFFF) VIRTUAL
    );
    CREATE TABLE agentstate_snapshots (
        key INTEGER PRIMARY KEY,
        fingerprint INTEGER NOT NULL,
        body TEXT NOT NULL,
        tid INTEGER GENERATED ALWAYS AS (key >> 32) VIRTUAL,
        seq INTEGER GENERATED ALWAYS AS (key & 0xFFFFFFFF) VIRTUAL
    );";

/// The store's version, as a view (a constant of the schema: it takes no page, and reads as
/// version 1's table did).
fn version_view(version: i64) -> String {
    format!("CREATE VIEW agentstate_meta (key, value) AS SELECT 'schema_version', {version};")
}

/// Creates the tables on first use, or checks their version (migrating version 1); in one
/// transaction, so a database of an unknown version is not written to and a migration is never
/// half done.
fn setup(conn: &mut Connection) -> Result<(), StoreError> {
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(db_err("opening the store"))?;
    let has_meta: bool = tx
        .query_row(
            "SELECT count(*) FROM sqlite_master WHERE name = 'agentstate_meta'",
            [],
            |r| r.get::<_, i64>(0),
        )
        .map_err(db_err("reading the store's version"))?
        > 0;
    if has_meta {
        let found: Option<i64> = tx
            .query_row(
                "SELECT value FROM agentstate_meta WHERE key = 'schema_version'",
                [],
                |r| r.get(0),
            )
            .optional()
            .map_err(db_err("reading the store's version"))?;
        return match found {
            Some(TABLES_VERSION) => Ok(()),
            Some(found @ 1..=5) => {
                if found == 1 {
                    migrate_v1(&tx)?;
                }
                // Version 2's `head` is its newest entry's version: its tables are version 3's.
                if found <= 3 {
                    migrate_v3(&tx)?;
                }
                if found <= 4 {
                    migrate_v4(&tx)?;
                }
                migrate_v5(&tx)?;
                let doing = format!("migrating the store's tables to version {TABLES_VERSION}");
                reclaim(&tx, &doing)?;
                tx.commit().map_err(db_err(doing))
            }
            other => Err(StoreError::UnsupportedVersion {
                found: other.unwrap_or(-1),
                supported: TABLES_VERSION,
            }),
        };
    }
    tx.execute_batch(&format!(
        "CREATE TABLE agentstate_threads (
             tid INTEGER PRIMARY KEY,
             id TEXT NOT NULL UNIQUE,
             fingerprint INTEGER NOT NULL,
             head INTEGER NOT NULL,
             oldest INTEGER NOT NULL,
             parent INTEGER REFERENCES agentstate_threads (tid),
             fork_seq INTEGER,
             metadata TEXT NOT NULL,
             created_ms INTEGER NOT NULL,
             incarnation INTEGER NOT NULL DEFAULT 0
         );
         {TABLES}
         {V4_TABLES}
         {V6_TABLES}
         {}",
        version_view(TABLES_VERSION)
    ))
    .map_err(db_err("creating the store's tables"))?;
    tx.commit().map_err(db_err("creating the store's tables"))
}

/// The table of [`records`](crate::RecordBackend), created by the first record operation on a
/// database (one that never keeps a record has no such table: not part of [`TABLES_VERSION`]).
const RECORDS_TABLE: &str = "
    CREATE TABLE IF NOT EXISTS agentstate_records (
        kind TEXT NOT NULL,
        id TEXT NOT NULL,
        thread TEXT,
        created_ms INTEGER NOT NULL,
        body TEXT NOT NULL,
        PRIMARY KEY (kind, id)
    ) WITHOUT ROWID;
    CREATE INDEX IF NOT EXISTS agentstate_records_thread
        ON agentstate_records (kind, thread, created_ms);
    CREATE TABLE IF NOT EXISTS agentstate_events (
        log TEXT NOT NULL,
        seq INTEGER NOT NULL,
        body TEXT NOT NULL,
        PRIMARY KEY (log, seq)
    ) WITHOUT ROWID;";

/// Rewrites version 1's entries and snapshots into version 2's tables and replaces its version
/// table by the view, inside the caller's transaction.
fn migrate_v1(tx: &rusqlite::Transaction<'_>) -> Result<(), StoreError> {
    let doing = "migrating the store's tables from version 1";
    let (tid, seq): (i64, i64) = tx
        .query_row(
            "SELECT coalesce(max(tid), 0), max(coalesce((SELECT max(seq) FROM agentstate_entries), 0),
                                            coalesce((SELECT max(seq) FROM agentstate_snapshots), 0))
             FROM agentstate_threads",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .map_err(db_err(doing))?;
    if tid >= MAX_TID || seq as u64 > MAX_SEQ {
        return Err(StoreError::backend(
            BACKEND,
            doing,
            format!("a thread id ({tid}) or version ({seq}) is too large for version 2's keys"),
        ));
    }
    tx.execute_batch(&format!(
        "ALTER TABLE agentstate_entries RENAME TO agentstate_entries_v1;
         ALTER TABLE agentstate_snapshots RENAME TO agentstate_snapshots_v1;
         {TABLES}
         INSERT INTO agentstate_entries (key, kind, time_ms, node, run_id, extra, fingerprint, body)
             SELECT (tid << 32) + seq, kind, time_ms, node, run_id, extra, fingerprint, body
             FROM agentstate_entries_v1 ORDER BY tid, seq;
         INSERT INTO agentstate_snapshots (key, fingerprint, body)
             SELECT (tid << 32) + seq, fingerprint, body FROM agentstate_snapshots_v1 ORDER BY tid, seq;
         DROP TABLE agentstate_entries_v1;
         DROP TABLE agentstate_snapshots_v1;
         DROP TABLE agentstate_meta;
         {}",
        version_view(3)
    ))
    .map_err(db_err(doing))
}

/// What version 4 adds to version 3's tables (see [`TABLES_VERSION`]).
const V4_TABLES: &str = "
    CREATE TRIGGER agentstate_entry_deleted AFTER DELETE ON agentstate_entries
    WHEN (OLD.key & 4294967295) > (SELECT head FROM agentstate_threads WHERE tid = OLD.key >> 32)
    BEGIN
        UPDATE agentstate_threads SET head = OLD.key & 4294967295 WHERE tid = OLD.key >> 32;
    END;";

/// Brings version 3's tables to version 4, inside the caller's transaction.
fn migrate_v3(tx: &rusqlite::Transaction<'_>) -> Result<(), StoreError> {
    tx.execute_batch(&format!(
        "ALTER TABLE agentstate_threads ADD COLUMN incarnation INTEGER NOT NULL DEFAULT 0;
         {V4_TABLES}
         DROP VIEW agentstate_meta;
         {}",
        version_view(4)
    ))
    .map_err(db_err("migrating the store's tables from version 3"))
}

/// Brings version 4's tables to version 5 (each thread's lease), inside the caller's
/// transaction.
fn migrate_v4(tx: &rusqlite::Transaction<'_>) -> Result<(), StoreError> {
    tx.execute_batch(&format!(
        "ALTER TABLE agentstate_threads ADD COLUMN lease_owner TEXT;
         ALTER TABLE agentstate_threads ADD COLUMN lease_expires_ms INTEGER;
         DROP VIEW agentstate_meta;
         {}",
        version_view(5)
    ))
    .map_err(db_err("migrating the store's tables from version 4"))
}

/// What version 6 adds (see [`TABLES_VERSION`]): the view of the leases, kept as rows of the
/// snapshots table, one per thread while one is recorded.
const V6_TABLES: &str = "
    CREATE VIEW agentstate_leases (tid, owner, expires_ms) AS
        SELECT key, body, fingerprint FROM agentstate_snapshots WHERE key > 0 AND key < 4294967296;";

/// Brings version 5's tables to version 6 (the initial states as version-0 snapshots, each
/// lease a row of its own, a small thread row), inside the caller's transaction.
fn migrate_v5(tx: &rusqlite::Transaction<'_>) -> Result<(), StoreError> {
    let doing = "migrating the store's tables from version 5";
    // A `tid` below 1 (never given by SQLite, only by hand) would have its snapshots' keys
    // where the leases are.
    let odd: Option<String> = tx
        .query_row(
            "SELECT id FROM agentstate_threads WHERE tid < 1 LIMIT 1",
            [],
            |r| r.get(0),
        )
        .optional()
        .map_err(db_err(doing))?;
    if let Some(id) = odd {
        return Err(StoreError::backend(
            BACKEND,
            doing,
            format!("thread `{id}` has a row id below 1, which version 6 does not allow"),
        ));
    }
    tx.execute_batch(&format!(
        "{V6_TABLES}
         INSERT OR REPLACE INTO agentstate_snapshots (key, fingerprint, body)
             SELECT tid, lease_expires_ms, lease_owner FROM agentstate_threads
             WHERE lease_owner IS NOT NULL AND lease_expires_ms IS NOT NULL;
         INSERT OR IGNORE INTO agentstate_snapshots (key, fingerprint, body)
             SELECT tid << 32, fingerprint, initial FROM agentstate_threads
             WHERE initial IS NOT NULL AND oldest = 0 ORDER BY tid;
         ALTER TABLE agentstate_threads DROP COLUMN initial;
         ALTER TABLE agentstate_threads DROP COLUMN lease_owner;
         ALTER TABLE agentstate_threads DROP COLUMN lease_expires_ms;
         DROP VIEW agentstate_meta;
         {}",
        version_view(TABLES_VERSION)
    ))
    .map_err(db_err(doing))
}

/// Gives the file's free pages back to the file system (a file with incremental auto-vacuum;
/// nothing otherwise), in the caller's transaction.
fn reclaim(tx: &rusqlite::Transaction<'_>, doing: &str) -> Result<(), StoreError> {
    // The pragma frees a page per step: step it to the end.
    tx.prepare_cached("PRAGMA incremental_vacuum")
        .and_then(|mut s| {
            let mut rows = s.query([])?;
            while rows.next()?.is_some() {}
            Ok(())
        })
        .map_err(db_err(doing))
}

/// A thread's row as the queries below need it.
struct Row {
    tid: i64,
    info: ThreadInfo,
}

const THREAD_COLUMNS: &str = concat!(
    "t.tid, t.id, t.fingerprint, ",
    version_of!("t"),
    ", t.oldest, p.id, t.fork_seq, t.metadata, t.created_ms, t.incarnation"
);

fn read_thread(row: &rusqlite::Row<'_>) -> rusqlite::Result<(i64, ThreadInfo, Option<String>)> {
    let parent: Option<String> = row.get(5)?;
    let fork_seq: Option<i64> = row.get(6)?;
    let metadata: String = row.get(7)?;
    Ok((
        row.get(0)?,
        ThreadInfo {
            id: row.get(1)?,
            fingerprint: row.get::<_, i64>(2)? as u64,
            version: row.get::<_, i64>(3)? as u64,
            oldest: row.get::<_, i64>(4)? as u64,
            parent: parent.zip(fork_seq.map(|s| s as u64)),
            metadata: Default::default(),
            created_ms: row.get(8)?,
            incarnation: row.get(9)?,
        },
        Some(metadata),
    ))
}

fn thread_row(conn: &Connection, id: &str) -> Result<Row, StoreError> {
    let found = conn
        .prepare_cached(&format!(
            "SELECT {THREAD_COLUMNS} FROM agentstate_threads t
             LEFT JOIN agentstate_threads p ON p.tid = t.parent WHERE t.id = ?1"
        ))
        .and_then(|mut s| s.query_row([id], read_thread).optional())
        .map_err(db_err(format!("reading thread `{id}`")))?;
    let (tid, mut info, metadata) = found.ok_or_else(|| StoreError::ThreadNotFound {
        thread: id.to_owned(),
    })?;
    info.metadata = parse_object(metadata.as_deref())
        .map_err(|reason| StoreError::corrupt(id, "thread metadata", reason))?;
    Ok(Row { tid, info })
}

/// A thread's key and head, and its lease, for a row of the threads table `t` left-joined with
/// its lease's row `l` of the snapshots table (see [`TABLES_VERSION`]).
const HEAD_COLUMNS: &str = concat!(
    "t.tid, t.fingerprint, ",
    version_of!("t"),
    ", t.incarnation, l.body, l.fingerprint"
);

/// Reads [`HEAD_COLUMNS`].
fn read_head(r: &rusqlite::Row<'_>) -> rusqlite::Result<(i64, Head, FoundLease)> {
    Ok((
        r.get(0)?,
        Head {
            fingerprint: r.get::<_, i64>(1)? as u64,
            version: r.get::<_, i64>(2)? as u64,
            incarnation: r.get(3)?,
        },
        (r.get(4)?, r.get(5)?),
    ))
}

/// The thread's key, head and lease (`None`: no such thread).
/// Acquires, renews or releases thread `id`'s lease for `owner`, in one immediate transaction
/// (the read of who holds it and its change are one view, across connections and processes).
/// The outer error is the database's (a busy one sends an inline call to the connection's
/// thread); the inner one the lease's outcome.
fn change_lease(
    conn: &mut Connection,
    id: &str,
    owner: &str,
    ttl_ms: u64,
    op: LeaseOp,
) -> rusqlite::Result<Result<Option<LeaseInfo>, StoreError>> {
    let now = now_ms();
    let until = now.saturating_add(ttl_ms.min(i64::MAX as u64) as i64);
    let tx = Immediate::begin(conn)?;
    let Some((tid, head, found)) = thread_head(&tx, id)? else {
        return Ok(Err(StoreError::ThreadNotFound {
            thread: id.to_owned(),
        }));
    };
    let mine = found.0.as_deref() == Some(owner);
    let free = held(found.clone(), now, head).is_none();
    let written = match op {
        LeaseOp::Acquire if mine || free => tx
            .prepare_cached(
                "INSERT OR REPLACE INTO agentstate_snapshots (key, body, fingerprint) VALUES (?1, ?2, ?3)",
            )
            .and_then(|mut s| s.execute(params![tid, owner, until]))
            .map(|_| Some(until)),
        LeaseOp::Renew if mine => tx
            .prepare_cached("UPDATE agentstate_snapshots SET fingerprint = ?2 WHERE key = ?1")
            .and_then(|mut s| s.execute(params![tid, until]))
            .map(|_| Some(until)),
        LeaseOp::Release | LeaseOp::Revoke if mine || op == LeaseOp::Revoke => tx
            .prepare_cached("DELETE FROM agentstate_snapshots WHERE key = ?1")
            .and_then(|mut s| s.execute(params![tid]))
            .map(|_| Some(now)),
        _ => Ok(None),
    }?;
    if written.is_some() {
        tx.commit()?;
    }
    Ok(lease_outcome(id, owner, op, written, found, now, head))
}

fn thread_head(conn: &Connection, id: &str) -> rusqlite::Result<Option<(i64, Head, FoundLease)>> {
    conn.prepare_cached(&format!(
        "SELECT {HEAD_COLUMNS} FROM agentstate_threads t
         LEFT JOIN agentstate_snapshots l ON l.key = t.tid WHERE t.id = ?1"
    ))?
    .query_row([id], read_head)
    .optional()
}

/// The prepared statements a connection keeps.
const STATEMENT_CACHE: usize = 64;

/// An immediate transaction (it takes the write lock first) whose `BEGIN IMMEDIATE`, `COMMIT`
/// and `ROLLBACK` are the connection's prepared statements: rusqlite's `Transaction` parses
/// them at every use, a fifth of the instructions of a durable chat turn. Dropped uncommitted,
/// it rolls back, as rusqlite's does.
struct Immediate<'c> {
    conn: &'c Connection,
    open: bool,
}

impl<'c> Immediate<'c> {
    fn begin(conn: &'c mut Connection) -> rusqlite::Result<Self> {
        conn.prepare_cached("BEGIN IMMEDIATE")?.execute([])?;
        Ok(Immediate { conn, open: true })
    }

    fn commit(mut self) -> rusqlite::Result<()> {
        self.conn.prepare_cached("COMMIT")?.execute([])?;
        self.open = false;
        Ok(())
    }
}

impl std::ops::Deref for Immediate<'_> {
    type Target = Connection;

    fn deref(&self) -> &Connection {
        self.conn
    }
}

impl Drop for Immediate<'_> {
    fn drop(&mut self) {
        // A failed `COMMIT` may have ended the transaction already (SQLite rolls back on some
        // errors); then there is nothing to roll back.
        if self.open && !self.conn.is_autocommit() {
            let _ = self
                .conn
                .prepare_cached("ROLLBACK")
                .and_then(|mut rollback| rollback.execute([]));
        }
    }
}

/// Appends `entries` to thread `id` as the versions after `expected`, in one transaction that
/// takes the write lock first: `Ok(Err(_))` when the thread refused one (missing, at another
/// version, migrated or created again since the writer read it, its lease not the fence's, or
/// full) and nothing was written, `Err(_)` when SQLite failed (nothing is written either way).
/// The thread's row is only read: the new entries are its new versions.
fn append_entries(
    conn: &mut Connection,
    id: &str,
    expected: u64,
    entries: &[NewEntry],
) -> rusqlite::Result<Result<u64, StoreError>> {
    let tx = Immediate::begin(conn)?;
    let Some((tid, head, lease)) = thread_head(&tx, id)? else {
        return Ok(Err(StoreError::ThreadNotFound {
            thread: id.to_owned(),
        }));
    };
    let mut found = Found {
        head,
        lease,
        now_ms: now_ms(),
    };
    for (i, entry) in entries.iter().enumerate() {
        let at = expected + i as u64;
        if let Some(refused) = refusal(id, at, entry, &found) {
            return Ok(Err(refused));
        }
        if let (Some(LeaseChange::Take { ttl_ms }), Some(owner)) =
            (entry.lease_change, &entry.lease)
        {
            let until = found
                .now_ms
                .saturating_add(ttl_ms.min(i64::MAX as u64) as i64);
            tx.prepare_cached(
                "INSERT OR REPLACE INTO agentstate_snapshots (key, body, fingerprint) VALUES (?1, ?2, ?3)",
            )?
            .execute(params![tid, owner, until])?;
            found.lease = (Some(owner.clone()), Some(until));
        }
        if at >= MAX_SEQ {
            return Ok(Err(StoreError::backend(
                BACKEND,
                format!("appending to thread `{id}`"),
                format!("it has {at} versions, the most an SQLite thread holds"),
            )));
        }
        let seq = at + 1;
        tx.prepare_cached(
            "INSERT INTO agentstate_entries (key, kind, time_ms, node, run_id, extra, fingerprint, body)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
        )?
        .execute(params![
            key(tid, seq),
            entry.kind.code(),
            entry.time_ms,
            entry.node,
            entry.run_id,
            entry.extra,
            entry.fingerprint.map(|f| f as i64),
            entry.body
        ])?;
        found.head.version = seq;
    }
    if entries
        .iter()
        .any(|e| e.lease.is_some() && e.lease_change == Some(LeaseChange::Release))
    {
        tx.prepare_cached("DELETE FROM agentstate_snapshots WHERE key = ?1")?
            .execute(params![tid])?;
    }
    tx.commit()?;
    Ok(Ok(found.head.version))
}

/// [`append_entries`]'s outcome as the store reports it.
fn flatten_append(
    id: &str,
    done: rusqlite::Result<Result<u64, StoreError>>,
) -> Result<u64, StoreError> {
    done.map_err(db_err(format!("appending to thread `{id}`")))?
}

/// The thread, the state a load starts from, the thread's key and the range of versions to
/// replay after it: the first part of a load, in its transaction.
fn load_base(
    tx: &rusqlite::Transaction<'_>,
    id: &str,
    seq: Option<u64>,
    after: Option<u64>,
) -> Result<(ThreadInfo, Base, i64, u64, u64), StoreError> {
    let doing = || format!("loading thread `{id}`");
    let row = thread_row(tx, id)?;
    let target = check_range(&row.info, seq)?;
    let start = Start::of(&row.info, target, after);
    let snapshot = match start {
        Start::Continue(_) => None,
        Start::Snapshot => tx
            .prepare_cached(
                "SELECT seq, fingerprint, body FROM agentstate_snapshots
                 WHERE key BETWEEN ?1 AND ?2 ORDER BY key DESC LIMIT 1",
            )
            .and_then(|mut s| {
                s.query_row(params![key(row.tid, 0), key(row.tid, target)], |r| {
                    Ok((
                        r.get::<_, i64>(0)? as u64,
                        r.get::<_, i64>(1)? as u64,
                        r.get(2)?,
                    ))
                })
                .optional()
            })
            .map_err(db_err(doing()))?,
    };
    let (base, from) = match start.base(&row.info, snapshot) {
        // The initial state (see `TABLES_VERSION`), named as such.
        Some((
            Base::Snapshot {
                seq: 0,
                fingerprint,
                json,
            },
            0,
        )) if fingerprint == row.info.fingerprint && row.info.parent.is_none() => {
            (Base::Initial(json), 0)
        }
        Some(found) => found,
        None => Start::initial(id, None)?,
    };
    Ok((row.info, base, row.tid, from, target))
}

/// Reads versions `from + 1 ..= to` of thread `tid` and hands them to `deliver` in batches as
/// they are read: a small first batch, so the caller starts replaying at once, then larger ones
/// (any of them may be empty). Stops early once `deliver` says the caller
/// is gone.
fn read_entries(
    tx: &rusqlite::Transaction<'_>,
    id: &str,
    tid: i64,
    from: u64,
    to: u64,
    mut deliver: impl FnMut(EntryBatch) -> bool,
) {
    let failed = |e: rusqlite::Error| match e {
        rusqlite::Error::FromSqlConversionFailure(..) | rusqlite::Error::InvalidColumnType(..) => {
            StoreError::corrupt(id, "entry", e)
        }
        e => StoreError::backend(BACKEND, format!("loading thread `{id}`"), e),
    };
    let mut statement = match tx.prepare_cached(
        "SELECT seq, kind, body, fingerprint FROM agentstate_entries
         WHERE key > ?1 AND key <= ?2 ORDER BY key",
    ) {
        Ok(statement) => statement,
        Err(e) => {
            deliver(Err(failed(e)));
            return;
        }
    };
    let mut rows = match statement.query(params![key(tid, from), key(tid, to)]) {
        Ok(rows) => rows,
        Err(e) => {
            deliver(Err(failed(e)));
            return;
        }
    };
    let mut read = |size: usize| -> EntryBatch {
        let mut batch = Vec::with_capacity(size);
        while batch.len() < size {
            let Some(r) = rows.next().map_err(failed)? else {
                break;
            };
            // The version first, so a row that does not read is named by it.
            let seq = r.get::<_, i64>(0).map_err(failed)?;
            batch.push(
                (|| {
                    Ok(StoredEntry {
                        seq: seq as u64,
                        kind: r.get(1)?,
                        body: r.get(2)?,
                        fingerprint: r.get::<_, Option<i64>>(3)?.map(|f| f as u64),
                    })
                })()
                .map_err(|e| match failed(e) {
                    StoreError::Corrupt { thread, reason, .. } => StoreError::Corrupt {
                        thread,
                        what: format!("entry {seq}"),
                        reason,
                    },
                    other => other,
                })?,
            );
        }
        Ok(batch)
    };
    let mut size = FIRST_BATCH;
    loop {
        let batch = read(size);
        let more = matches!(&batch, Ok(b) if b.len() == size);
        if !deliver(batch) || !more {
            return;
        }
        size = BATCH;
    }
}

/// The entries of a load's first batch, and of each one after it.
const FIRST_BATCH: usize = 16;
const BATCH: usize = 64;

impl Backend for Sqlite {
    async fn create(&self, thread: NewThread) -> Result<ThreadInfo, StoreError> {
        self.call(move |conn| {
            let id = thread.id.clone();
            let tx = conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(db_err(format!("creating thread `{id}`")))?;
            let exists: bool = tx
                .query_row(
                    "SELECT count(*) FROM agentstate_threads WHERE id = ?1",
                    [&id],
                    |r| r.get::<_, i64>(0),
                )
                .map_err(db_err(format!("creating thread `{id}`")))?
                > 0;
            if exists {
                return Err(StoreError::ThreadExists { thread: id });
            }
            let (fingerprint, parent, fork_seq) = match &thread.parent {
                None => (thread.fingerprint, None, None),
                Some((parent, seq)) => {
                    let p = thread_row(&tx, parent)?;
                    if *seq < p.info.oldest || *seq > p.info.version {
                        return Err(StoreError::VersionOutOfRange {
                            thread: parent.clone(),
                            seq: *seq,
                            oldest: p.info.oldest,
                            head: p.info.version,
                        });
                    }
                    (p.info.fingerprint, Some(p.tid), Some(*seq as i64))
                }
            };
            let start = fork_seq.unwrap_or(0);
            tx.execute(
                "INSERT INTO agentstate_threads
                 (id, fingerprint, head, oldest, parent, fork_seq, metadata, created_ms, incarnation)
                 VALUES (?1, ?2, ?3, ?3, ?4, ?5, ?6, ?7, ?8)",
                params![
                    id,
                    fingerprint as i64,
                    start,
                    parent,
                    fork_seq,
                    thread.metadata,
                    thread.created_ms,
                    new_incarnation()
                ],
            )
            .map_err(db_err(format!("creating thread `{id}`")))?;
            let row = thread_row(&tx, &id)?;
            if row.tid >= MAX_TID {
                return Err(StoreError::backend(
                    BACKEND,
                    format!("creating thread `{id}`"),
                    "the database holds the most threads it can (2^31 row ids)",
                ));
            }
            // Row ids below 1 exist only if written by hand; their keys would be the leases'.
            if row.tid < 1 {
                return Err(StoreError::backend(
                    BACKEND,
                    format!("creating thread `{id}`"),
                    format!("SQLite gave it the row id {}, below 1 (a row was written by hand)", row.tid),
                ));
            }
            // The initial state is the thread's snapshot at version 0, out of its row.
            if let (Some(initial), None) = (&thread.initial, parent) {
                tx.execute(
                    "INSERT OR REPLACE INTO agentstate_snapshots (key, fingerprint, body) VALUES (?1, ?2, ?3)",
                    params![key(row.tid, 0), fingerprint as i64, initial],
                )
                .map_err(db_err(format!("creating thread `{id}`")))?;
            }
            let info = row.info;
            tx.commit()
                .map_err(db_err(format!("creating thread `{id}`")))?;
            Ok(info)
        })
        .await
    }

    async fn append(
        &self,
        thread: &str,
        expected: u64,
        entry: NewEntry,
    ) -> Result<u64, StoreError> {
        let entries = [entry];
        if let Some(done) = self.append_inline(thread, expected, &entries) {
            return done;
        }
        let id = thread.to_owned();
        self.call(move |conn| flatten_append(&id, append_entries(conn, &id, expected, &entries)))
            .await
    }

    async fn append_all(
        &self,
        thread: &str,
        expected: u64,
        entries: Vec<NewEntry>,
    ) -> Result<u64, StoreError> {
        if let Some(done) = self.append_inline(thread, expected, &entries) {
            return done;
        }
        let id = thread.to_owned();
        self.call(move |conn| flatten_append(&id, append_entries(conn, &id, expected, &entries)))
            .await
    }

    async fn put_snapshot(
        &self,
        thread: &str,
        seq: u64,
        incarnation: i64,
        fingerprint: u64,
        json: String,
        keep: u32,
    ) -> Result<(), StoreError> {
        let id = thread.to_owned();
        self.call(move |conn| {
            let doing = || format!("storing a snapshot of thread `{id}`");
            let tx = conn.transaction().map_err(db_err(doing()))?;
            tx.prepare_cached(concat!(
                "INSERT OR IGNORE INTO agentstate_snapshots (key, fingerprint, body)
                     SELECT (t.tid << 32) + ?2, ?3, ?4 FROM agentstate_threads t
                     WHERE t.id = ?1 AND t.incarnation = ?5 AND ",
                version_of!("t"),
                " >= ?2"
            ))
            .and_then(|mut s| {
                s.execute(params![
                    id,
                    seq as i64,
                    fingerprint as i64,
                    json,
                    incarnation
                ])
            })
            .map_err(db_err(doing()))?;
            // The thread's row records the version (in version 3 it is otherwise the newest
            // entry's): entries after it deleted by hand are then a gap, not an older version.
            tx.prepare_cached(concat!(
                "UPDATE agentstate_threads AS t SET head = ?2
                 WHERE t.id = ?1 AND t.incarnation = ?3 AND t.head < ?2 AND ",
                version_of!("t"),
                " >= ?2"
            ))
            .and_then(|mut s| s.execute(params![id, seq as i64, incarnation]))
            .map_err(db_err(doing()))?;
            // The thread's snapshots after its oldest version (the one at it is a compaction's
            // base), newest first, but for those a fork loads from (the newest at or before
            // its fork point); all but the first `keep` go.
            let deleted = tx
                .prepare_cached(
                    "DELETE FROM agentstate_snapshots WHERE key IN (
                     SELECT s.key FROM agentstate_threads t, agentstate_snapshots s
                     WHERE t.id = ?1 AND s.key > (t.tid << 32) + t.oldest
                       AND s.key < (t.tid + 1) << 32
                       AND NOT EXISTS (
                           SELECT 1 FROM agentstate_threads c
                           WHERE c.parent = t.tid AND s.key = (
                               SELECT max(n.key) FROM agentstate_snapshots n
                               WHERE n.key BETWEEN t.tid << 32 AND (t.tid << 32) + c.fork_seq))
                     ORDER BY s.key DESC LIMIT -1 OFFSET ?2)",
                )
                .and_then(|mut s| s.execute(params![id, i64::from(keep)]))
                .map_err(db_err(doing()))?;
            if deleted > 0 {
                reclaim(&tx, &doing())?;
            }
            tx.commit().map_err(db_err(doing()))?;
            Ok(())
        })
        .await
    }

    async fn load(
        &self,
        thread: &str,
        seq: Option<u64>,
        after: Option<u64>,
    ) -> Result<Loaded, StoreError> {
        // The thread, its base and the entries' range come back first; the entries follow in
        // batches, read in the same transaction while the caller decodes the base and replays.
        let id = thread.to_owned();
        let (header, loaded) = tokio::sync::oneshot::channel();
        let job: Job = Box::new(move |conn| {
            let mut conn = lock(conn);
            let (batches, received) = tokio::sync::mpsc::unbounded_channel();
            let base = conn
                .transaction()
                .map_err(db_err(format!("loading thread `{id}`")))
                .and_then(|tx| load_base(&tx, &id, seq, after).map(|base| (tx, base)));
            let (tx, (thread, base, tid, from, target)) = match base {
                Ok(found) => found,
                Err(e) => {
                    let _ = header.send(Err(e));
                    return;
                }
            };
            // The first batch travels with the header, so the caller, woken once, has entries
            // to replay while the rest are read.
            let mut header = Some((header, thread, base, received));
            read_entries(&tx, &id, tid, from, target, |batch| match header.take() {
                Some((header, thread, base, received)) => {
                    let loaded = batch.map(|first| Loaded {
                        thread,
                        base,
                        entries: Entries::streamed(&id, from, target, first, received),
                        seq: target,
                    });
                    header.send(loaded).is_ok()
                }
                None => batches.send(batch).is_ok(),
            });
        });
        let gone = || StoreError::backend(BACKEND, "running a query", "its thread has stopped");
        self.jobs.send(job).map_err(|_| gone())?;
        loaded.await.map_err(|_| gone())?
    }

    async fn info(&self, thread: &str) -> Result<ThreadInfo, StoreError> {
        let id = thread.to_owned();
        self.call(move |conn| thread_row(conn, &id).map(|r| r.info))
            .await
    }

    async fn history(
        &self,
        thread: &str,
        after: u64,
        until: u64,
        limit: u32,
        newest_first: bool,
    ) -> Result<HistoryPage, StoreError> {
        let id = thread.to_owned();
        self.call(move |conn| {
            let doing = || format!("reading the history of thread `{id}`");
            let tx = conn.transaction().map_err(db_err(doing()))?;
            let row = thread_row(&tx, &id)?;
            type Columns = (
                i64,
                i64,
                Option<String>,
                Option<String>,
                Option<String>,
                i64,
            );
            let raw = tx
                .prepare_cached(if newest_first {
                    "SELECT seq, time_ms, kind, node, run_id, extra, octet_length(body), fingerprint
                     FROM agentstate_entries WHERE key > ?1 AND key <= ?2 ORDER BY key DESC LIMIT ?3"
                } else {
                    "SELECT seq, time_ms, kind, node, run_id, extra, octet_length(body), fingerprint
                     FROM agentstate_entries WHERE key > ?1 AND key <= ?2 ORDER BY key LIMIT ?3"
                })
                .and_then(|mut s| {
                    let range = (
                        key(row.tid, after.min(MAX_SEQ)),
                        key(row.tid, until.min(MAX_SEQ)),
                    );
                    // The version first, so a column that does not read names its entry.
                    s.query_map(params![range.0, range.1, limit], |r| {
                        let columns = || -> rusqlite::Result<Columns> {
                            Ok((
                                r.get(1)?,
                                r.get(2)?,
                                r.get(3)?,
                                r.get(4)?,
                                r.get(5)?,
                                r.get(6)?,
                            ))
                        };
                        Ok((
                            r.get::<_, i64>(0)?,
                            columns(),
                            r.get::<_, Option<i64>>(7)?,
                        ))
                    })?
                    .collect::<rusqlite::Result<Vec<_>>>()
                })
                .map_err(db_err(doing()))?;
            tx.commit().map_err(db_err(doing()))?;
            let entries = raw
                .into_iter()
                .map(|(seq, columns, own)| {
                    let (time_ms, kind, node, run_id, extra, bytes) =
                        columns.map_err(|e| match e {
                            rusqlite::Error::FromSqlConversionFailure(..)
                            | rusqlite::Error::InvalidColumnType(..) => {
                                StoreError::corrupt(&id, format!("entry {seq}"), e)
                            }
                            e => StoreError::backend(BACKEND, doing(), e),
                        })?;
                    entry_info(
                        &id,
                        seq,
                        time_ms,
                        kind,
                        node,
                        run_id,
                        extra.as_deref(),
                        bytes,
                        own.map_or(row.info.fingerprint, |f| f as u64),
                    )
                })
                .collect::<Result<_, _>>()?;
            Ok(HistoryPage {
                parent: row.info.parent,
                entries,
            })
        })
        .await
    }

    async fn list(&self, query: ThreadQuery) -> Result<Vec<ThreadInfo>, StoreError> {
        self.call(move |conn| {
            let mut sql = format!(
                "SELECT {THREAD_COLUMNS} FROM agentstate_threads t
                 LEFT JOIN agentstate_threads p ON p.tid = t.parent WHERE (?1 IS NULL OR t.id > ?1)"
            );
            let mut args: Vec<Option<String>> = vec![query.after.clone()];
            for (key, value) in &query.metadata {
                args.push(Some(format!("$.\"{}\"", key.replace('"', "\\\""))));
                args.push(Some(value.to_string()));
                let (k, v) = (args.len() - 1, args.len());
                sql.push_str(&format!(" AND (t.metadata -> ?{k}) = json(?{v})"));
            }
            sql.push_str(&format!(" ORDER BY t.id LIMIT {}", query.limit));
            let rows = conn
                .prepare(&sql)
                .and_then(|mut s| {
                    s.query_map(rusqlite::params_from_iter(args.iter()), read_thread)?
                        .collect::<rusqlite::Result<Vec<_>>>()
                })
                .map_err(db_err("listing threads"))?;
            rows.into_iter()
                .map(|(_, mut info, metadata)| {
                    info.metadata = parse_object(metadata.as_deref()).map_err(|reason| {
                        StoreError::corrupt(&info.id, "thread metadata", reason)
                    })?;
                    Ok(info)
                })
                .collect()
        })
        .await
    }

    async fn delete(&self, thread: &str) -> Result<bool, StoreError> {
        let id = thread.to_owned();
        self.call(move |conn| {
            let doing = || format!("deleting thread `{id}`");
            let tx = conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(db_err(doing()))?;
            let row = match thread_row(&tx, &id) {
                Ok(row) => row,
                Err(StoreError::ThreadNotFound { .. }) => return Ok(false),
                Err(e) => return Err(e),
            };
            let fork: Option<String> = tx
                .query_row(
                    "SELECT id FROM agentstate_threads WHERE parent = ?1 LIMIT 1",
                    [row.tid],
                    |r| r.get(0),
                )
                .optional()
                .map_err(db_err(doing()))?;
            if let Some(fork) = fork {
                return Err(StoreError::HasForks { thread: id, fork });
            }
            // The thread's row first: the entries' delete trigger then has no row to update.
            tx.execute_batch(&format!(
                "DELETE FROM agentstate_threads WHERE tid = {tid};
                 DELETE FROM agentstate_snapshots WHERE key = {tid};
                 DELETE FROM agentstate_entries WHERE key BETWEEN {lo} AND {hi};
                 DELETE FROM agentstate_snapshots WHERE key BETWEEN {lo} AND {hi};",
                lo = key(row.tid, 0),
                hi = key(row.tid, MAX_SEQ),
                tid = row.tid
            ))
            .map_err(db_err(doing()))?;
            reclaim(&tx, &doing())?;
            tx.commit().map_err(db_err(doing()))?;
            Ok(true)
        })
        .await
    }

    async fn rewrite(
        &self,
        thread: &str,
        fingerprint: u64,
        rewrite: Rewriter,
    ) -> Result<u64, StoreError> {
        let id = thread.to_owned();
        self.call(move |conn| {
            let doing = || format!("migrating thread `{id}`");
            let tx = conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(db_err(doing()))?;
            let row = thread_row(&tx, &id)?;
            let (lo, hi) = (key(row.tid, 0), key(row.tid, MAX_SEQ));
            let entries = tx
                .prepare("SELECT key, kind, fingerprint, body FROM agentstate_entries WHERE key BETWEEN ?1 AND ?2")
                .and_then(|mut s| {
                    s.query_map(params![lo, hi], |r| {
                        Ok((
                            r.get::<_, i64>(0)?,
                            r.get::<_, i64>(1)?,
                            r.get::<_, Option<i64>>(2)?,
                            r.get::<_, String>(3)?,
                        ))
                    })?
                    .collect::<rusqlite::Result<Vec<_>>>()
                })
                .map_err(db_err(doing()))?;
            for (k, kind, own, json) in entries {
                let json = rewrite(StoredRow::Entry {
                    seq: (k - lo) as u64,
                    kind,
                    fingerprint: own.map_or(row.info.fingerprint, |f| f as u64),
                    json: &json,
                })?;
                tx.execute(
                    "UPDATE agentstate_entries SET body = ?2, fingerprint = NULL WHERE key = ?1",
                    params![k, json],
                )
                .map_err(db_err(doing()))?;
            }
            let snapshots = tx
                .prepare("SELECT key, fingerprint, body FROM agentstate_snapshots WHERE key BETWEEN ?1 AND ?2")
                .and_then(|mut s| {
                    s.query_map(params![lo, hi], |r| {
                        Ok((r.get::<_, i64>(0)?, r.get::<_, i64>(1)?, r.get::<_, String>(2)?))
                    })?
                    .collect::<rusqlite::Result<Vec<_>>>()
                })
                .map_err(db_err(doing()))?;
            for (k, own, json) in snapshots {
                // The snapshot at version 0 of a thread that is not a fork is its initial state.
                let json = rewrite(match (k - lo) as u64 {
                    0 if row.info.parent.is_none() => StoredRow::Initial {
                        fingerprint: own as u64,
                        json: &json,
                    },
                    seq => StoredRow::Snapshot {
                        seq,
                        fingerprint: own as u64,
                        json: &json,
                    },
                })?;
                tx.execute(
                    "UPDATE agentstate_snapshots SET body = ?2, fingerprint = ?3 WHERE key = ?1",
                    params![k, json, fingerprint as i64],
                )
                .map_err(db_err(doing()))?;
            }
            tx.execute(
                "UPDATE agentstate_threads SET fingerprint = ?2 WHERE tid = ?1",
                params![row.tid, fingerprint as i64],
            )
            .map_err(db_err(doing()))?;
            tx.commit().map_err(db_err(doing()))?;
            Ok(row.info.version)
        })
        .await
    }

    async fn put_schema(&self, schema: SchemaRecord) -> Result<(), StoreError> {
        let body = serde_json::json!({
            "version": schema.version,
            "type_name": schema.type_name,
            "schema": schema.schema,
            "types": schema.types,
        })
        .to_string();
        self.call(move |conn| {
            conn.prepare_cached(
                "INSERT OR IGNORE INTO agentstate_snapshots (key, fingerprint, body)
                 VALUES (-1 - (?1 & 9223372036854775807), ?1, ?2)",
            )
            .and_then(|mut s| s.execute(params![schema.fingerprint as i64, body]))
            .map_err(db_err(format!(
                "recording the schema of `{}`",
                schema.type_name
            )))?;
            Ok(())
        })
        .await
    }

    async fn schemas(&self) -> Result<Vec<SchemaRecord>, StoreError> {
        self.call(|conn| {
            let rows = conn
                .prepare_cached("SELECT fingerprint, body FROM agentstate_snapshots WHERE key < 0")
                .and_then(|mut s| {
                    s.query_map([], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?)))?
                        .collect::<rusqlite::Result<Vec<_>>>()
                })
                .map_err(db_err("reading the recorded schemas"))?;
            // A record that does not read is left out: its schema counts as not recorded.
            Ok(rows
                .into_iter()
                .filter_map(|(fingerprint, body)| {
                    let value: serde_json::Value = serde_json::from_str(&body).ok()?;
                    let text = |key: &str| value.get(key)?.as_str().map(str::to_owned);
                    Some(SchemaRecord {
                        fingerprint: fingerprint as u64,
                        version: u32::try_from(value.get("version")?.as_u64()?).ok()?,
                        type_name: text("type_name")?,
                        schema: text("schema")?,
                        types: text("types")?,
                    })
                })
                .collect())
        })
        .await
    }

    async fn compact(
        &self,
        thread: &str,
        seq: u64,
        incarnation: i64,
        fingerprint: u64,
        json: String,
    ) -> Result<u64, StoreError> {
        let id = thread.to_owned();
        self.call(move |conn| {
            let doing = || format!("compacting thread `{id}`");
            let tx = conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(db_err(doing()))?;
            let row = thread_row(&tx, &id)?;
            check_compaction(&row.info, seq, incarnation)?;
            tx.execute(
                "INSERT OR IGNORE INTO agentstate_snapshots (key, fingerprint, body) VALUES (?1, ?2, ?3)",
                params![key(row.tid, seq), fingerprint as i64, json],
            )
            .map_err(db_err(doing()))?;
            // Keep what forks start from: cut at the newest snapshot at or before the oldest
            // fork point (or the new snapshot).
            let limit: i64 = tx
                .query_row(
                    "SELECT min(?2, coalesce(min(fork_seq), ?2)) FROM agentstate_threads WHERE parent = ?1",
                    params![row.tid, seq as i64],
                    |r| r.get(0),
                )
                .map_err(db_err(doing()))?;
            let cut: i64 = tx
                .query_row(
                    "SELECT coalesce(max(seq), 0) FROM agentstate_snapshots WHERE key BETWEEN ?1 AND ?2",
                    params![key(row.tid, 0), key(row.tid, limit as u64)],
                    |r| r.get(0),
                )
                .map_err(db_err(doing()))?;
            if cut as u64 <= row.info.oldest {
                tx.commit().map_err(db_err(doing()))?;
                return Ok(0);
            }
            // The version is kept in the row: the entries that gave it may be gone. (First, so
            // the entries' delete trigger finds the head above every entry deleted.)
            tx.execute(
                "UPDATE agentstate_threads SET oldest = ?2, head = ?3 WHERE tid = ?1",
                params![row.tid, cut, row.info.version as i64],
            )
            .map_err(db_err(doing()))?;
            let dropped = tx
                .execute(
                    "DELETE FROM agentstate_entries WHERE key BETWEEN ?1 AND ?2",
                    params![key(row.tid, 0), key(row.tid, cut as u64)],
                )
                .map_err(db_err(doing()))?;
            tx.execute(
                "DELETE FROM agentstate_snapshots WHERE key >= ?1 AND key < ?2",
                params![key(row.tid, 0), key(row.tid, cut as u64)],
            )
            .map_err(db_err(doing()))?;
            reclaim(&tx, &doing())?;
            tx.commit().map_err(db_err(doing()))?;
            Ok(dropped as u64)
        })
        .await
    }

    async fn rewind(&self, thread: &str, seq: u64) -> Result<ThreadInfo, StoreError> {
        let id = thread.to_owned();
        self.call(move |conn| {
            let doing = || format!("rewinding thread `{id}` to version {seq}");
            // The write lock first: no append, lease change or fork comes between the checks
            // and the deletes.
            let tx = conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(db_err(doing()))?;
            let row = thread_row(&tx, &id)?;
            let (_, head, lease) = thread_head(&tx, &id)
                .map_err(db_err(doing()))?
                .ok_or_else(|| StoreError::ThreadNotFound { thread: id.clone() })?;
            rewind_refusal(&row.info, seq, head, lease, now_ms())?;
            let fork: Option<String> = tx
                .query_row(
                    "SELECT id FROM agentstate_threads WHERE parent = ?1 AND fork_seq > ?2
                     ORDER BY id LIMIT 1",
                    params![row.tid, seq as i64],
                    |r| r.get(0),
                )
                .optional()
                .map_err(db_err(doing()))?;
            if let Some(fork) = fork {
                return Err(StoreError::HasForks { thread: id, fork });
            }
            if seq == row.info.version {
                return Ok(row.info);
            }
            // The deletes first: the entries' delete trigger raises the row's head to the
            // newest entry deleted, and the update then sets it.
            let (after, last) = (key(row.tid, seq), key(row.tid, MAX_SEQ));
            tx.execute(
                "DELETE FROM agentstate_entries WHERE key > ?1 AND key <= ?2",
                params![after, last],
            )
            .map_err(db_err(doing()))?;
            tx.execute(
                "DELETE FROM agentstate_snapshots WHERE key > ?1 AND key <= ?2",
                params![after, last],
            )
            .map_err(db_err(doing()))?;
            tx.execute(
                "UPDATE agentstate_threads SET head = ?2, incarnation = ?3 WHERE tid = ?1",
                params![row.tid, seq as i64, new_incarnation()],
            )
            .map_err(db_err(doing()))?;
            reclaim(&tx, &doing())?;
            let info = thread_row(&tx, &id)?.info;
            tx.commit().map_err(db_err(doing()))?;
            Ok(info)
        })
        .await
    }

    async fn copy(
        &self,
        thread: &str,
        new_id: &str,
        metadata: String,
        created_ms: i64,
    ) -> Result<ThreadInfo, StoreError> {
        check_lookup(thread)?;
        check_id(new_id)?;
        let (id, new_id) = (thread.to_owned(), new_id.to_owned());
        self.call(move |conn| {
            let doing = || format!("copying thread `{id}` to `{new_id}`");
            // The write lock first: no append, snapshot, compaction or rewind of the source
            // comes between the reads of its rows.
            let tx = conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(db_err(doing()))?;
            let source = thread_row(&tx, &id)?;
            let taken: bool = tx
                .query_row(
                    "SELECT count(*) FROM agentstate_threads WHERE id = ?1",
                    [&new_id],
                    |r| r.get::<_, i64>(0),
                )
                .map_err(db_err(doing()))?
                > 0;
            if taken {
                return Err(StoreError::ThreadExists { thread: new_id });
            }
            // The source's row as it is (its `head` with the same entries gives the same
            // version), but for the id, the metadata, the time and the incarnation.
            tx.execute(
                "INSERT INTO agentstate_threads
                 (id, fingerprint, head, oldest, parent, fork_seq, metadata, created_ms, incarnation)
                 SELECT ?2, fingerprint, head, oldest, parent, fork_seq, ?3, ?4, ?5
                 FROM agentstate_threads WHERE tid = ?1",
                params![source.tid, new_id, metadata, created_ms, new_incarnation()],
            )
            .map_err(db_err(doing()))?;
            let copy = thread_row(&tx, &new_id)?;
            if copy.tid >= MAX_TID || copy.tid < 1 {
                return Err(StoreError::backend(
                    BACKEND,
                    doing(),
                    format!(
                        "SQLite gave the copy the row id {}, outside 1 to 2^31 - 1 (the database holds the most threads it can, or a row was written by hand)",
                        copy.tid
                    ),
                ));
            }
            // The source's entries and snapshots (its initial state is its snapshot at version
            // 0) under the copy's keys: the same versions. Its lease, keyed by its `tid` alone,
            // is below the range.
            let shift = key(copy.tid, 0) - key(source.tid, 0);
            let (lo, hi) = (key(source.tid, 0), key(source.tid, MAX_SEQ));
            tx.execute(
                "INSERT INTO agentstate_entries (key, kind, time_ms, node, run_id, extra, fingerprint, body)
                 SELECT key + ?3, kind, time_ms, node, run_id, extra, fingerprint, body
                 FROM agentstate_entries WHERE key BETWEEN ?1 AND ?2 ORDER BY key",
                params![lo, hi, shift],
            )
            .map_err(db_err(doing()))?;
            tx.execute(
                "INSERT INTO agentstate_snapshots (key, fingerprint, body)
                 SELECT key + ?3, fingerprint, body
                 FROM agentstate_snapshots WHERE key BETWEEN ?1 AND ?2 ORDER BY key",
                params![lo, hi, shift],
            )
            .map_err(db_err(doing()))?;
            let info = thread_row(&tx, &new_id)?.info;
            tx.commit().map_err(db_err(doing()))?;
            Ok(info)
        })
        .await
    }

    async fn lease(
        &self,
        thread: &str,
        owner: &str,
        ttl_ms: u64,
        op: LeaseOp,
    ) -> Result<Option<LeaseInfo>, StoreError> {
        let doing = |id: &str| format!("changing the lease on thread `{id}`");
        // On the caller's thread when the connection is free (as appends), else on its thread.
        if let Some(done) = self.inline(|conn| change_lease(conn, thread, owner, ttl_ms, op)) {
            return done.map_err(db_err(doing(thread)))?;
        }
        let (id, owner) = (thread.to_owned(), owner.to_owned());
        self.call(move |conn| {
            change_lease(conn, &id, &owner, ttl_ms, op).map_err(db_err(doing(&id)))?
        })
        .await
    }

    async fn lease_info(&self, thread: &str) -> Result<Option<LeaseInfo>, StoreError> {
        let id = thread.to_owned();
        self.call(move |conn| {
            let (_, head, found) = thread_head(conn, &id)
                .map_err(db_err(format!("reading the lease on thread `{id}`")))?
                .ok_or_else(|| StoreError::ThreadNotFound { thread: id.clone() })?;
            Ok(held(found, now_ms(), head))
        })
        .await
    }
}

/// Creates the records table if it is missing ([`RECORDS_TABLE`]).
fn records_table(conn: &Connection) -> Result<(), StoreError> {
    conn.execute_batch(RECORDS_TABLE)
        .map_err(db_err("creating the records table"))
}

fn read_record(r: &rusqlite::Row<'_>) -> rusqlite::Result<RecordRow> {
    Ok(RecordRow {
        kind: r.get(0)?,
        id: r.get(1)?,
        thread: r.get(2)?,
        created_ms: r.get(3)?,
        body: r.get(4)?,
    })
}

/// Inserts or replaces `row` on `conn` (a connection or a transaction).
fn put_row(conn: &Connection, row: &RecordRow) -> Result<(), StoreError> {
    conn.prepare_cached(
        "INSERT INTO agentstate_records (kind, id, thread, created_ms, body)
         VALUES (?1, ?2, ?3, ?4, ?5)
         ON CONFLICT (kind, id) DO UPDATE SET thread = excluded.thread, body = excluded.body",
    )
    .and_then(|mut s| {
        s.execute(params![
            row.kind,
            row.id,
            row.thread,
            row.created_ms,
            row.body
        ])
    })
    .map_err(db_err(format!("writing {} record `{}`", row.kind, row.id)))?;
    Ok(())
}

/// Appends `batch` to its event log on `conn` (a transaction: all or none).
fn append_batch(conn: &Connection, batch: &EventBatch) -> Result<(), StoreError> {
    let doing = || {
        format!(
            "appending {} events to event log `{}`",
            batch.bodies.len(),
            batch.log
        )
    };
    let mut insert = conn
        .prepare_cached(
            "INSERT INTO agentstate_events (log, seq, body) VALUES (?1, ?2, ?3)
             ON CONFLICT (log, seq) DO NOTHING",
        )
        .map_err(db_err(doing()))?;
    for (i, body) in batch.bodies.iter().enumerate() {
        let seq = (batch.first + i as u64) as i64;
        insert
            .execute(params![batch.log, seq, body])
            .map_err(db_err(doing()))?;
    }
    Ok(())
}

impl RecordBackend for Sqlite {
    async fn put_record(&self, row: RecordRow) -> Result<(), StoreError> {
        self.call(move |conn| {
            records_table(conn)?;
            put_row(conn, &row)
        })
        .await
    }

    async fn write_records(
        &self,
        writes: RecordWrites,
        claim: Option<&RunClaim>,
    ) -> Result<bool, StoreError> {
        if claim.is_some() {
            return Err(StoreError::backend(
                BACKEND,
                "writing records fenced by a run's claim",
                "it keeps no run queue (runs are carried out by the process that creates them; the queue is PostgreSQL's)",
            ));
        }
        self.call(move |conn| {
            records_table(conn)?;
            let doing = "writing records and events together";
            let tx = conn.transaction().map_err(db_err(doing))?;
            for row in &writes.records {
                put_row(&tx, row)?;
            }
            for patch in &writes.patches {
                let doing = || format!("changing {} record `{}`", patch.kind, patch.id);
                let body: Option<String> = tx
                    .prepare_cached(
                        "SELECT body FROM agentstate_records WHERE kind = ?1 AND id = ?2",
                    )
                    .and_then(|mut s| {
                        s.query_row([&patch.kind, &patch.id], |r| r.get(0))
                            .optional()
                    })
                    .map_err(db_err(doing()))?;
                if let Some(body) = body {
                    tx.prepare_cached(
                        "UPDATE agentstate_records SET body = ?3 WHERE kind = ?1 AND id = ?2",
                    )
                    .and_then(|mut s| s.execute(params![patch.kind, patch.id, patch.apply(&body)]))
                    .map_err(db_err(doing()))?;
                }
            }
            for batch in &writes.events {
                append_batch(&tx, batch)?;
            }
            tx.commit().map_err(db_err(doing))?;
            Ok(true)
        })
        .await
    }

    async fn get_record(&self, kind: &str, id: &str) -> Result<Option<RecordRow>, StoreError> {
        let (kind, id) = (kind.to_owned(), id.to_owned());
        self.call(move |conn| {
            records_table(conn)?;
            conn.prepare_cached(
                "SELECT kind, id, thread, created_ms, body FROM agentstate_records
                 WHERE kind = ?1 AND id = ?2",
            )
            .and_then(|mut s| s.query_row([&kind, &id], read_record).optional())
            .map_err(db_err(format!("reading {kind} record `{id}`")))
        })
        .await
    }

    async fn list_records(
        &self,
        kind: &str,
        thread: Option<&str>,
    ) -> Result<Vec<RecordRow>, StoreError> {
        let (kind, thread) = (kind.to_owned(), thread.map(str::to_owned));
        self.call(move |conn| {
            records_table(conn)?;
            conn.prepare_cached(
                "SELECT kind, id, thread, created_ms, body FROM agentstate_records
                 WHERE kind = ?1 AND (?2 IS NULL OR thread = ?2) ORDER BY created_ms, id",
            )
            .and_then(|mut s| {
                s.query_map(params![kind, thread], read_record)?
                    .collect::<rusqlite::Result<Vec<_>>>()
            })
            .map_err(db_err(format!("listing {kind} records")))
        })
        .await
    }

    async fn find_records(
        &self,
        kind: &str,
        member: &str,
        values: &[&str],
    ) -> Result<Vec<RecordRow>, StoreError> {
        let kind = kind.to_owned();
        // The member as a JSON path (quoted: any name), the values as a JSON array.
        let path = format!("$.{}", serde_json::Value::from(member));
        let values = serde_json::Value::from(values.to_vec()).to_string();
        self.call(move |conn| {
            records_table(conn)?;
            conn.prepare_cached(
                "SELECT kind, id, thread, created_ms, body FROM agentstate_records
                 WHERE kind = ?1 AND json_extract(body, ?2) IN (SELECT value FROM json_each(?3))
                   AND json_type(body, ?2) = 'text'
                 ORDER BY created_ms, id",
            )
            .and_then(|mut s| {
                s.query_map(params![kind, path, values], read_record)?
                    .collect::<rusqlite::Result<Vec<_>>>()
            })
            .map_err(db_err(format!("finding {kind} records")))
        })
        .await
    }

    async fn delete_record(&self, kind: &str, id: &str) -> Result<bool, StoreError> {
        let (kind, id) = (kind.to_owned(), id.to_owned());
        self.call(move |conn| {
            records_table(conn)?;
            conn.prepare_cached("DELETE FROM agentstate_records WHERE kind = ?1 AND id = ?2")
                .and_then(|mut s| s.execute([&kind, &id]))
                .map(|n| n > 0)
                .map_err(db_err(format!("deleting {kind} record `{id}`")))
        })
        .await
    }

    async fn append_events(
        &self,
        log: &str,
        first: u64,
        bodies: Vec<String>,
    ) -> Result<(), StoreError> {
        let batch = EventBatch {
            log: log.to_owned(),
            first,
            bodies,
        };
        self.call(move |conn| {
            records_table(conn)?;
            let doing = || {
                format!(
                    "appending {} events to event log `{}`",
                    batch.bodies.len(),
                    batch.log
                )
            };
            let tx = conn.transaction().map_err(db_err(doing()))?;
            append_batch(&tx, &batch)?;
            tx.commit().map_err(db_err(doing()))
        })
        .await
    }

    async fn list_events(
        &self,
        log: &str,
        from: u64,
        limit: usize,
    ) -> Result<Vec<EventRow>, StoreError> {
        let log = log.to_owned();
        self.call(move |conn| {
            records_table(conn)?;
            conn.prepare_cached(
                "SELECT seq, body FROM agentstate_events WHERE log = ?1 AND seq >= ?2
                 ORDER BY seq LIMIT ?3",
            )
            .and_then(|mut s| {
                s.query_map(
                    params![log, from as i64, limit.min(i64::MAX as usize) as i64],
                    |r| {
                        Ok(EventRow {
                            seq: r.get::<_, i64>(0)? as u64,
                            body: r.get(1)?,
                        })
                    },
                )?
                .collect::<rusqlite::Result<Vec<_>>>()
            })
            .map_err(db_err(format!("reading event log `{log}`")))
        })
        .await
    }

    async fn delete_events(&self, log: &str) -> Result<u64, StoreError> {
        let log = log.to_owned();
        self.call(move |conn| {
            records_table(conn)?;
            conn.prepare_cached("DELETE FROM agentstate_events WHERE log = ?1")
                .and_then(|mut s| s.execute([&log]))
                .map(|n| n as u64)
                .map_err(db_err(format!("deleting event log `{log}`")))
        })
        .await
    }
}
