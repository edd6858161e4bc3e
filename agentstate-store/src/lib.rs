//! # agentstate-store
//!
//! Durable agentstate threads. A thread is an initial state, an append-only journal of the
//! typed updates merged into it (versions 1, 2, 3, ...) and snapshots; any version can be
//! rebuilt by replaying the journal, which is exact because merging is deterministic.
//!
//! - Writers append *at the version they read*: a stale writer gets
//!   [`StoreError::Conflict`] (`state_write_conflict`) and nothing is written, so no update is
//!   lost and the history never forks, with any number of tasks or processes.
//! - Backends: SQLite (feature `sqlite`, default, bundled) and PostgreSQL (feature `postgres`).
//! - Async on tokio; [`blocking::BlockingStore`] wraps it for synchronous programs.
//! - States and updates are stored as JSON, with the fingerprint of the state type's schema
//!   (and the schema itself, once). An edited type loads its old threads when the edit is
//!   compatible (a field added with a default, removed, a reducer changed); an incompatible
//!   edit is one error naming the field; declared versions (`#[agent_state(version = N)]`) and
//!   [`Migration`](migrate::Migration)s between them bridge the rest (see [`migrate`]).
//!
//! ```
//! use agentstate::message::{Message, Role};
//! use agentstate::state::{AgentState, AgentStateUpdate};
//! use agentstate_store::{SqliteStore, StepMeta};
//!
//! # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
//! let store = SqliteStore::open_in_memory()?;
//! let mut chat = store.thread_or_create("chat-1", AgentState::default).await?;
//! chat.merge(
//!     AgentStateUpdate::default().context(vec![Message::text_message("Hello!", Role::User)]),
//!     StepMeta::node("user"),
//! ).await?;
//!
//! let (state, version) = store.load::<AgentState>("chat-1").await?;
//! assert_eq!((state.context.len(), version), (1, 1));
//! let before = store.load_at::<AgentState>("chat-1", 0).await?; // time travel
//! assert!(before.context.is_empty());
//! # Ok::<(), agentstate_store::StoreError>(())
//! # }).unwrap();
//! ```

#![warn(missing_docs)]

pub mod backend;
pub mod blocking;
mod checked;
pub mod error;
pub mod migrate;
#[cfg(feature = "postgres")]
pub mod postgres;
pub mod record;
#[cfg(feature = "sqlite")]
pub mod sqlite;
pub mod store;
pub mod thread;

pub use error::StoreError;
#[cfg(feature = "postgres")]
pub use postgres::PostgresStore;
pub use record::{StepMeta, ThreadQuery};
#[cfg(feature = "sqlite")]
pub use sqlite::SqliteStore;
pub use store::{SnapshotPolicy, Store};
pub use thread::Thread;
