//! # agentstate-store
//!
//! Durable agentstate threads. A thread is an initial state, an append-only journal of the
//! typed updates merged into it (versions 1, 2, 3, ...) and snapshots; any version can be
//! rebuilt by replaying the journal, which is exact because merging is deterministic.
//!
//! - Writers append *at the version they read*: a stale writer gets
//!   [`StoreError::Conflict`] (`state_write_conflict`) and nothing is written, so no update is
//!   lost and the history never forks, with any number of tasks or processes.
//! - One worker runs a thread at a time: [`Store::lease`] gives a run [`Lease`] that others
//!   are refused (`thread_leased`) until it is released or expires (a dead worker's thread is
//!   taken over), judged by the database's clock. A handle [`fence`](Thread::fence)d by a
//!   lease appends only while the lease is still its owner's (`lease_lost` otherwise, and
//!   nothing is written), so a worker that stalled past its lease commits nothing.
//! - Backends: SQLite (feature `sqlite`, default, bundled) and PostgreSQL (feature `postgres`).
//! - Async on tokio: every future is `Send`, and dropping one cancels it without writing half
//!   a step. [`blocking::BlockingStore`] wraps the store for synchronous programs.
//! - One type for a backend chosen at run time: [`AnyStore`] opens `sqlite:PATH`,
//!   `sqlite::memory:` or `postgres://...`; the typed [`SqliteStore`] and `PostgresStore` convert
//!   into it.
//! - A node's output (an update, messages, a tool result, several) goes into
//!   [`Thread::merge`] as it is; [`Thread::merge_with`] runs an async step (a model call) on
//!   the latest state and retries it on a conflict, with backoff ([`ConflictRetry`]).
//! - States and updates are stored as JSON, with the fingerprint of the state type's schema
//!   (and the schema itself, once). An edited type loads its old threads when the edit is
//!   compatible (a field added with a default, removed, a reducer changed); an incompatible
//!   edit is one error naming the field; declared versions (`#[agent_state(version = N)]`) and
//!   [`Migration`](migrate::Migration)s between them bridge the rest (see [`migrate`]).
//!
//! The [`_guide`] explains threads, the concurrency rule, leases, reading, snapshots,
//! migrations and durability, with running examples.
//!
//! ## What is where
//!
//! The root holds what a program that keeps threads uses:
//!
//! - [`Store`], its [`SnapshotPolicy`] and [`ConflictRetry`], [`StoredState`] (the states it
//!   keeps); [`SqliteStore`], `PostgresStore` and [`AnyStore`] (over [`AnyBackend`]);
//! - [`Thread`] (a handle that writes) with [`StepMeta`] (a step's metadata) and
//!   [`Versioned`] (a state read at its version);
//! - [`Lease`] and [`LeaseInfo`]: one worker at a time;
//! - what is read back: [`ThreadInfo`], [`Head`], [`EntryInfo`] and its [`EntryKind`],
//!   [`Compaction`]; the queries [`HistoryQuery`] and [`ThreadQuery`]; [`check_id`] and the
//!   limits [`MAX_ID_BYTES`], [`MAX_LEASE_TTL_MS`];
//! - records beside the threads (a server's runs): [`Store::put_record`] and its readers, on a
//!   [`RecordBackend`] (SQLite, PostgreSQL), as [`RecordRow`]s; numbered event logs
//!   ([`Store::append_events`], [`Store::events`], as [`EventRow`]s: a run's streamed events);
//!   both written together in one transaction ([`RecordWrites`], [`EventBatch`],
//!   [`RecordPatch`]); a run queue
//!   on PostgreSQL ([`RecordBackend::claim_run`] and its siblings, [`ClaimedRun`],
//!   [`RunClaim`] that fences a worker's writes, [`Swept`], [`RunNotice`]);
//! - [`StoreError`], each variant with a stable [`category`](StoreError::category).
//!
//! The rest is in namespaces:
//!
//! | module | what it holds |
//! |---|---|
//! | [`blocking`] | the store for synchronous programs: [`BlockingStore`](blocking::BlockingStore), its threads and leases |
//! | [`migrate`] | schema evolution: [`Migration`](migrate::Migration)s between declared versions, a schema's [`fingerprint`](migrate::fingerprint) and [`SchemaRecord`](migrate::SchemaRecord) |
//! | `sqlite` (feature `sqlite`) | the SQLite backend: `Sqlite` and `SqliteStore`, its `synchronous` setting (`Synchronous`), the version of its tables |
//! | `postgres` (feature `postgres`) | the PostgreSQL backend: `Postgres` and `PostgresStore`, `PostgresOptions`, the version of its tables |
//! | [`backend`] | for implementors of a backend: the [`Backend`](backend::Backend) trait and the rows it moves |
//! | [`_guide`] | documentation only |
//!
//! The public modules are namespaces, not files: the files behind them are private and their
//! items re-exported, so a file can move without breaking an import.
//!
//! ```
//! use agentstate::message::{Message, Role};
//! use agentstate::state::{AgentState, AgentStateUpdate};
//! use agentstate_store::{AnyStore, HistoryQuery, StepMeta};
//!
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! let store = AnyStore::open("sqlite::memory:").await?; // or SqliteStore::open("chat.db")?
//! let mut chat = store.thread_or_create("chat-1", AgentState::default).await?;
//! chat.merge(Message::text_message("Hello!", Role::User), StepMeta::node("user")).await?;
//!
//! // An async step on the latest state: reads what it needs, then awaits (here, a "model").
//! chat.merge_with(StepMeta::node("assistant"), |state| {
//!     let seen = state.context.len();
//!     async move {
//!         tokio::task::yield_now().await;
//!         Ok(Message::text_message(&format!("I have read {seen} message(s)."), Role::Assistant))
//!     }
//! })
//! .await?;
//!
//! let latest = store.load::<AgentState>("chat-1").await?;
//! assert_eq!((latest.state.context.len(), latest.version), (2, 2));
//! let before = store.load_at::<AgentState>("chat-1", 1).await?; // time travel
//! assert_eq!(before.state.context.len(), 1);
//! let newest = store.history("chat-1", HistoryQuery::newest(1)).await?;
//! assert_eq!(newest[0].node.as_deref(), Some("assistant"));
//!
//! // A fork at version 1 tries another answer; the original is untouched.
//! store.fork("chat-1", 1, "chat-1-retry").await?;
//! let mut retry = store.thread::<AgentState>("chat-1-retry").await?;
//! retry.merge(AgentStateUpdate::default().context_summary(Some("retried".into())), StepMeta::node("assistant")).await?;
//! assert_eq!(store.load::<AgentState>("chat-1").await?.state.context_summary, None);
//! # Ok::<(), agentstate_store::StoreError>(())
//! # }).unwrap();
//! ```

#![warn(missing_docs)]
#![warn(unreachable_pub)]

pub mod _guide;
#[cfg(any(feature = "sqlite", feature = "postgres"))]
mod any;
pub mod backend;
pub mod blocking;
mod checked;
mod error;
mod lease;
pub mod migrate;
#[cfg(feature = "postgres")]
pub mod postgres;
mod record;
mod records;
#[cfg(feature = "sqlite")]
pub mod sqlite;
mod store;
mod thread;

#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub use any::{AnyBackend, AnyStore};
pub use error::StoreError;
pub use lease::Lease;
#[cfg(feature = "postgres")]
pub use postgres::PostgresStore;
pub use record::{
    check_id, EntryInfo, EntryKind, Head, LeaseInfo, StepMeta, ThreadInfo, ThreadQuery,
    MAX_ID_BYTES, MAX_LEASE_TTL_MS,
};
pub use records::{
    ClaimedRun, EventBatch, EventRow, RecordBackend, RecordPatch, RecordRow, RecordWrites,
    RunClaim, RunNotice, Swept,
};
#[cfg(feature = "sqlite")]
pub use sqlite::SqliteStore;
pub use store::{Compaction, HistoryQuery, SnapshotPolicy, Store, StoredState, Versioned};
pub use thread::{ConflictRetry, Thread};
