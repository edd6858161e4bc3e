//! # Guide: durable threads
//!
//! A documentation-only module: how threads are stored, written, leased, read and upgraded. Its
//! examples run as doctests (on an in-memory SQLite database; a file works the same way:
//! [`SqliteStore::open`](crate::SqliteStore::open)`("agentstate.db")`).
//!
//! ## A thread
//!
//! A thread is an initial state, an append-only journal of the typed updates merged into it
//! (versions 1, 2, 3, ...) and, now and then, a snapshot. Every merge is already a serializable
//! update and merging is deterministic, so the journal rebuilds any version exactly, and a step
//! costs its update's JSON, not a copy of the state (LangGraph's checkpointers write the whole
//! state at every step).
//!
//! ```
//! use agentstate::message::{Message, Role};
//! use agentstate::state::AgentState;
//! use agentstate_store::{HistoryQuery, SqliteStore, StepMeta};
//!
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! // Or PostgresStore::connect(url).await?, or AnyStore::open(&config.database_url).await?
//! let store = SqliteStore::open_in_memory()?;
//! let mut chat = store.thread_or_create("chat-1", AgentState::default).await?;
//! let hello = Message::text_message("Hello!", Role::User); // an update, a message, a tool result...
//! chat.merge(hello, StepMeta::node("user").run_id("run-7")).await?; // version 1
//!
//! // Another worker's async step, retried on conflict (with backoff): it reads what it needs
//! // from the latest state, then awaits (a model call, say).
//! let mut worker = store.thread::<AgentState>("chat-1").await?;
//! worker.merge_with(StepMeta::node("assistant"), |state| {
//!     let seen = state.context.len();
//!     async move {
//!         let reply = format!("You sent {seen} message(s).");
//!         Ok(Message::text_message(&reply, Role::Assistant))
//!     }
//! }).await?;
//!
//! let before = store.load_at::<AgentState>("chat-1", 1).await?; // time travel
//! assert_eq!((before.state.context.len(), before.version), (1, 1));
//! let newest = store.history("chat-1", HistoryQuery::newest(20)).await?;
//! assert_eq!(newest[0].node.as_deref(), Some("assistant"));
//! store.fork("chat-1", 1, "chat-1-retry").await?; // O(1): refers to its parent
//! let retry = store.load::<AgentState>("chat-1-retry").await?;
//! assert_eq!((retry.state.context.len(), retry.version), (1, 1));
//! # Ok::<(), agentstate_store::StoreError>(())
//! # }).unwrap();
//! ```
//!
//! ## The concurrency rule
//!
//! A writer appends *at the version it read*. If the thread has moved on, the append fails with
//! [`StoreError::Conflict`](crate::StoreError::Conflict) (category `state_write_conflict`,
//! naming the thread, the version the writer read and the thread's version) and nothing is
//! written. A [`Thread`](crate::Thread) handle checks the update against its local state first
//! (a failing merge writes nothing either), appends, and only then applies the merge locally;
//! [`reload`](crate::Thread::reload) replays just the entries appended since its version, and
//! [`merge_with`](crate::Thread::merge_with) re-runs an async step on the reloaded state until
//! it wins, as its [`ConflictRetry`](crate::ConflictRetry) says (default: 32 tries, pauses from 5 ms
//! doubling to 500 ms with full jitter; with 16 writers on one thread a call needs about 2
//! tries), then fails with `RetriesExhausted`, naming the thread and the tries. The database enforces the rule (SQLite: `BEGIN IMMEDIATE`, then the
//! version check and the insert in one transaction; PostgreSQL: one statement that updates the
//! thread's version only if it is still the expected one and inserts the entry only if that
//! happened). The tests race tasks and processes on both backends: every success has its own
//! version, the losers got the conflict, and the stored state equals the replay of exactly the
//! winners' updates.
//!
//! ```
//! use agentstate::message::{Message, Role};
//! use agentstate::state::{AgentState, AgentStateUpdate};
//! use agentstate_store::{SqliteStore, StepMeta};
//!
//! # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
//! let store = SqliteStore::open_in_memory()?;
//! let mut a = store.thread_or_create("t", AgentState::default).await?;
//! let mut b = store.thread::<AgentState>("t").await?;
//! let say = |text: &str| AgentStateUpdate::default().context(vec![Message::text_message(text, Role::User)]);
//!
//! a.merge(say("first"), StepMeta::node("a")).await?;
//! let err = b.merge(say("stale"), StepMeta::node("b")).await.unwrap_err();
//! assert_eq!(err.category(), "state_write_conflict");
//! assert!(b.state().context.is_empty(), "nothing was applied or written");
//!
//! b.reload().await?;
//! assert_eq!(b.merge(say("second"), StepMeta::node("b")).await?, 2);
//! # Ok::<(), agentstate_store::StoreError>(())
//! # }).unwrap();
//! ```
//!
//! ## One run per thread: leases
//!
//! Appends never fork a thread, but two workers could still both *run* it (call the same
//! model, charge the same card) before one of them is refused. A run lease prevents that:
//! [`Store::lease`](crate::Store::lease)`(thread, owner, ttl)` gives a
//! [`Lease`](crate::Lease) to one worker at a time. Another worker asking meanwhile gets
//! [`StoreError::Leased`](crate::StoreError::Leased) (`thread_leased`: "thread `t` is being run
//! by worker `w` (its lease expires in 4.2 s); ..."); once the lease has expired (its holder
//! died), the next worker to ask takes the thread over. The holder renews it while it runs
//! ([`Lease::renew`](crate::Lease::renew), e.g. every third of the ttl: a lease does not renew
//! itself), stops when renewing fails with `lease_lost` (it expired and was taken), and
//! [`release`](crate::Lease::release)s it when done (releasing a lease that is no longer the
//! owner's is `lease_lost` too); a dropped lease just expires.
//! [`lease_info`](crate::Store::lease_info) says who holds it and for how long.
//!
//! Each call is one statement (PostgreSQL) or one transaction (SQLite), so tasks, processes
//! and machines sharing a database agree on the holder; expiry is judged by the database's
//! clock on PostgreSQL, so workers on several machines need not agree on the time, and by the
//! local clock on SQLite. Deleting the thread deletes its lease.
//!
//! A lease also fences writes: [`Thread::fence`](crate::Thread::fence)`(&lease)` makes every
//! later append of the handle check, in the append's own statement or transaction, that the
//! lease is still its owner's and has not expired; otherwise nothing is written and the append
//! fails with `lease_lost`. So a worker that stalled past its ttl (a long pause, a node that
//! blocked its thread) while another took the thread over commits nothing, even if it did not
//! notice. Each acquisition and renewal also reports the thread's head (version, incarnation,
//! schema) as the database saw it: a worker that keeps a handle between runs knows from
//! [`Thread::is_current`](crate::Thread::is_current) whether to reload it.
//! `agentstate-graph`'s durable runs (its `durable` module, feature `store`) follow the lease:
//! a run takes it before any node runs, renews it while a step runs and releases it when the
//! run ends or waits for an answer.
//!
//! ```
//! use agentstate::state::AgentState;
//! use agentstate_store::SqliteStore;
//! use std::time::Duration;
//!
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! let store = SqliteStore::open_in_memory()?;
//! store.create("job-7", AgentState::default()).await?;
//! let ttl = Duration::from_millis(50);
//!
//! let mut mine = store.lease("job-7", "worker-a", ttl).await?;
//! let refused = store.lease("job-7", "worker-b", ttl).await.unwrap_err();
//! assert_eq!(refused.category(), "thread_leased");
//!
//! // worker-a stalls past its ttl; worker-b takes the thread over, and worker-a learns it.
//! tokio::time::sleep(Duration::from_millis(60)).await;
//! let theirs = store.lease("job-7", "worker-b", ttl).await?;
//! assert_eq!(mine.renew().await.unwrap_err().category(), "lease_lost");
//! assert_eq!(store.lease_info("job-7").await?.unwrap().owner, "worker-b");
//! theirs.release().await?;
//! assert!(store.lease_info("job-7").await?.is_none());
//! # Ok::<(), agentstate_store::StoreError>(())
//! # }).unwrap();
//! ```
//!
//! ## Reading
//!
//! [`load`](crate::Store::load) gives the latest state and its version: the newest snapshot plus
//! the entries after it. [`load_at`](crate::Store::load_at) gives any version still in the
//! journal (time travel); both return a [`Versioned`](crate::Versioned) state.
//! [`history`](crate::Store::history) pages through the entries' metadata (node, run id, time,
//! size; never a state or an update): `HistoryQuery::oldest(n).after(v)`, or
//! `HistoryQuery::newest(n).before(v)` for newest-first pages. [`list`](crate::Store::list) pages
//! through threads by id, filtered by metadata
//! (`ThreadQuery::first(50).with("user", json!("ann"))`). [`delete`](crate::Store::delete)
//! removes a thread with its journal (refused while a fork starts from it).
//! [`create_with`](crate::Store::create_with) and [`fork_with`](crate::Store::fork_with) take
//! metadata. [`fork`](crate::Store::fork) creates a thread that starts at a version of another in O(1): it
//! loads its parent at that version, then its own entries. A fork's history is, like `git log` of
//! a branch, the parent's entries up to the fork point (each naming the thread that holds it in
//! `inherited_from`), then its own. [`copy`](crate::Store::copy) creates an independent thread
//! with the same versions and history (LangGraph's thread copy): in one transaction it copies
//! every row the thread owns (its initial state, journal and snapshots), so that deleting or
//! rewinding either one afterwards leaves the other as it was.
//!
//! A thread is also stored as plain JSON text, readable with `sqlite3` or `psql`: three tables
//! (`agentstate_threads`, `agentstate_entries`, `agentstate_snapshots`) and the store's version
//! (`agentstate_meta`). A thread row holds its id, version, the state type's schema fingerprint
//! (a stable hash of `State::schema()`), a parent and fork version for a fork, and user
//! metadata; on PostgreSQL also its initial state and its lease (owner and expiry, if held).
//! SQLite keeps the row small, so that appends and lease changes cost the same whatever the
//! thread's size: the initial state is the thread's snapshot at version 0, and the lease a row
//! of its own (shown by the view `agentstate_leases`). An entry holds its version, kind (one update, or a parallel step: the
//! branch updates and the fan-in mode, replayed with `merge_parallel`), time, node, run id, user
//! metadata and the update. In SQLite an entry's key is one integer, `tid * 2^32 + seq` (`tid`
//! and `seq` are virtual columns beside it, so `SELECT seq, node, body FROM agentstate_entries
//! WHERE tid = 1` works): a thread holds at most 2^32 - 1 versions and a database 2^31 threads
//! (beyond, an append or a create fails naming the thread). A database of an unknown store version is refused
//! (`store_version_unsupported`) before anything is written; older SQLite layouts are migrated
//! when opened.
//!
//! ## Snapshots and compaction
//!
//! A handle stores a snapshot after an append when its [`SnapshotPolicy`](crate::SnapshotPolicy)
//! says so: every K entries since the last snapshot (default 1,000, so a load replays at most K
//! entries), and optionally (`when_journal_outgrows(true)`) when the entries since the last
//! snapshot are larger than it, for states whose fields are overwritten rather than appended to.
//! A snapshot is written after its entry is committed; if writing it fails, the step still
//! stands. Writing one deletes the thread's older snapshots beyond the newest `keep` (default 1),
//! never the one a compaction left as the thread's base nor one a fork loads its start from.
//! [`compact`](crate::Store::compact) stores a snapshot of the latest version and, in the same
//! transaction, drops the entries and snapshots before it. A missing or unreadable entry is an
//! error (`store_corrupt_data`), never a shorter state.
//!
//! ## Types and versions
//!
//! A thread records the schema of the type that wrote each row (its fingerprint, and the
//! schema itself once per store). An edited state type loads its old threads as they are when
//! the edit is compatible: a field added with a default or as an `Option`, a field removed, a
//! reducer or its parameter changed (old entries then replay under the new reducers). An
//! incompatible edit (a field's type changed, a required field added) is one
//! `state_schema_mismatch` error naming the row, the field, the stored value and what the type
//! expects, and saying what to declare. For those, declare `#[agent_state(version = N)]` on the
//! state and register a [`Migration`](crate::migrate::Migration) from the stored version with
//! [`Store::with_migration`](crate::Store::with_migration): it reads the old JSON (the old Rust
//! type is never needed), chains are found by shortest path, and a missing, failing or
//! ambiguous chain is a named error (`state_migration_missing`, `state_migration_failed`,
//! `state_migration_chain_ambiguous`), as OpenArmature specifies.
//! [`migrate_thread`](crate::Store::migrate_thread) rewrites a thread's rows in the new schema
//! in one transaction, after which loads need no migration; a writer that read the thread
//! before is refused on its next append. The [`migrate`](crate::migrate) module has the rules
//! and an example. Updates are read as strictly as `Update::from_json`: a hand-edited entry
//! with an unknown key is an error naming the entry.
//!
//! A thread deleted and created again under the same id is another incarnation: a handle of
//! the old one is refused on its next append (`StoreError::Recreated`). So is a thread
//! [`rewind`](crate::Store::rewind)ed to an earlier version (a run rolled back: its entries and
//! snapshots after that version are deleted in one transaction, refused while a lease on the
//! thread is held or a fork starts after that version), since its later versions will be
//! written again with other updates. Thread ids are non-empty, at most 1,024 bytes and free of
//! control characters (`thread_id_invalid`).
//!
//! ## Durability
//!
//! SQLite runs in WAL mode with `synchronous=NORMAL` by default: a committed step survives a
//! crash of the process (a test kills a writer with SIGKILL mid-loop and reopens the thread at
//! its last committed version) and the database is never corrupted, but the last commits before a
//! power loss or OS crash may be rolled back. `SqliteStore::open_with(path, Synchronous::Full)`
//! ([`sqlite::Synchronous`](crate::sqlite::Synchronous)) syncs every commit. PostgreSQL: an
//! append returns after the server's commit, which with its
//! default `synchronous_commit=on` has flushed the WAL; `PostgresOptions { synchronous_commit:
//! false, .. }` trades the last fraction of a second of commits on a server crash for latency.
//!
//! ## Drivers and threads of execution
//!
//! SQLite: `rusqlite` with SQLite compiled in (nothing to install). One connection serves the
//! store, with prepared statements cached; every operation but an append runs on the
//! connection's own thread, in one hop from the async caller, and a load streams its entries
//! back in batches so that the caller replays while the rest is read. An append (a version check
//! and an insert) runs on the caller's thread when the connection is free and the write lock is
//! not held, otherwise on the connection's thread; `SqliteStore::with_inline_appends(false)`
//! keeps every database call off the executor's threads. PostgreSQL: `tokio-postgres` with
//! `deadpool-postgres`. [`AnyStore`](crate::AnyStore) (`Store<AnyBackend>`) holds whichever
//! backend a URL names (`sqlite:PATH`, `sqlite::memory:`, `postgres://...`), for programs that
//! pick one from their configuration; the typed stores convert into it with `.into()`. The API
//! is async on tokio; synchronous programs use
//! [`blocking::BlockingStore`](crate::blocking::BlockingStore), which has the same methods
//! without `.await` (called from inside an async runtime, it returns an error rather than block
//! that runtime's thread; dropping one there never panics).
//!
//! ## Tests and benchmarks
//!
//! `agentstate-store/tests/backends.rs` runs every case on SQLite and then, with
//! `AGENTSTATE_POSTGRES_URL` set, on PostgreSQL (without it, it prints one line saying the
//! PostgreSQL half was skipped; under `CI=true` that is a failure). The benchmarks and their
//! figures are in `agentstate-store/benches/README.md`.
