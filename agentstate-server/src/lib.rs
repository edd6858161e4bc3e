//! # agentstate-server
//!
//! Serves [`agentstate_graph`] durable graphs over the LangGraph Agent Server API, the API the
//! official LangGraph SDKs (`@langchain/langgraph-sdk`, `langgraph-sdk`) and `useStream` call:
//! threads, their state and history, and runs streamed as SSE, waited for, or run in the
//! background, on the store's database (SQLite, or PostgreSQL with the feature `postgres`). On
//! SQLite (the embedded default) runs are carried out in the serving process as tokio tasks; on
//! PostgreSQL, with [`ServerBuilder::workers`], they are queued in the database and carried out
//! by workers in any server or worker-only process on it ([`Workers`]).
//!
//! A library: [`Server::builder`] takes the store and the graphs (each a
//! [`DurableGraph`](agentstate_graph::durable::DurableGraph) on that store, served under a graph
//! id) and gives a [`Server`], whose [`router`](Server::router) an application mounts, or which
//! [`serve`](Server::serve)s itself; an API key (`x-api-key`) and CORS are options.
//!
//! ```no_run
//! use agentstate::AgentState;
//! use agentstate_graph::{Context, Graph, END};
//! use agentstate_server::Server;
//! use agentstate_store::SqliteStore;
//! use std::sync::Arc;
//!
//! #[derive(AgentState, Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
//! struct Count { n: u32 }
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let graph = Graph::builder()
//!     .node("add", |s: Arc<Count>, _: Context| async move {
//!         Ok::<_, std::convert::Infallible>(CountUpdate::default().n(s.n + 1))
//!     })
//!     .entry("add")
//!     .edge("add", END)
//!     .build()?;
//! let store = SqliteStore::open("agents.db")?;
//! let server = Server::builder(&store).assistant("counter", graph.durable(&store)).build();
//! server.serve(tokio::net::TcpListener::bind("127.0.0.1:2024").await?).await?;
//! # Ok(())
//! # }
//! ```
//!
//! # What is where
//!
//! - [`Server`] and its [`ServerBuilder`]: the router, the API key, CORS.
//! - [`Assistant`]: a graph with its state type erased behind JSON (a run's input is a JSON
//!   update of the state, `command.resume` its [`Answers`](agentstate_graph::durable::Answers),
//!   its events [`RunEvent`]s); implemented for every `DurableGraph` whose state has a
//!   `Default`. With it: [`Start`], [`RunEvents`], [`Snapshot`], [`CheckpointState`],
//!   [`AssistantError`], [`BoxFuture`].
//! - [`record`]: what the server stores beside the threads, one serde-tagged, versioned type
//!   ([`Record`](record::Record): runs and threads' bookkeeping, with their statuses, and the
//!   events each run streamed, in the store's event log of the run).
//! - [`ApiError`]: a refusal, its status and sentence, as the reference server's JSON.
//! - [`Workers`]: a process's workers on the database's run queue (PostgreSQL), started by
//!   [`Server::start_workers`] or [`Server::serve`]: they claim runs (`FOR UPDATE SKIP
//!   LOCKED`, one running run per thread), wake up and are cancelled by `LISTEN/NOTIFY`, and
//!   sweep back the runs of workers that stopped (only once their thread's lease expired: a
//!   live run renews it, so a long node is never run twice), at most 3 attempts; a graceful
//!   [`shutdown`](Workers::shutdown) hands the unfinished runs back. A run claimed again
//!   continues from its journal: its committed steps and effects are not repeated. The
//!   `worker` example is a worker-only process.
//!
//! # The API served
//!
//! | route | what |
//! |---|---|
//! | `GET /ok`, `GET /info` | health, version |
//! | `POST /assistants/search`, `GET /assistants/{id}`, `.../graph`, `.../schemas` | the served graphs (an assistant id is the UUID v5 of its graph id, as LangGraph's; runs accept either) |
//! | `POST /threads` (`if_exists`), `POST /threads/search`, `GET`/`PATCH`/`DELETE /threads/{id}` | threads |
//! | `GET`/`POST /threads/{id}/state`, `.../state/{checkpoint_id}`, `GET`/`POST .../history` | a thread's state (values, next, tasks with their interrupts, checkpoint) now, at a checkpoint (a version of the thread), and its history; an update made as a node (`as_node`; 409 while a run is in progress) |
//! | `POST /threads/{id}/runs` (background), `.../runs/stream`, `.../runs/wait`; `POST /runs`, `/runs/stream`, `/runs/wait` (stateless) | runs |
//! | `GET /threads/{id}/runs`, `GET`/`DELETE .../runs/{rid}`, `.../join`, `.../stream`, `POST .../cancel` | a thread's runs |
//!
//! Streams send `metadata` (`run_id`, `attempt`) first, then the events of the run's
//! `stream_mode`s (`values`, `updates`, `custom`, `messages-tuple` as `messages` tuples),
//! interrupts as `__interrupt__`, and `error` on failure, each with an `id` (its number in the
//! run, from 0); the response's `Content-Location` names the run. A run's events are written
//! to the database as it streams (a batch at a time), so a client that joins a run
//! (`GET .../runs/{rid}/stream`, the stream response's `Location`), on this server or on
//! another one on the same database, while it runs or after it ended, with `Last-Event-ID`
//! gets every later event once (`-1`: all); `join` waits for a run another server carries out. A run that stops at an interrupt ends `success` and leaves its thread
//! `interrupted`, as the reference server does; `command.resume` answers it. A cancelled run
//! leaves its thread `interrupted`; a run without `input` continues it, and a run with a new
//! `input` starts afresh from the state (whatever the last run left: cut short, failed, or
//! waiting for answers). On a busy thread a run is refused (409) under `multitask_strategy`
//! `reject` (the default), stops the running run under `interrupt` (its committed steps stay)
//! and waits for it under `enqueue`. A run its task's panic ended is `error`; without workers,
//! [`Server::recover`] ends those a stopped process left.
//!
//! Not served yet: the `rollback` strategy (and cancel's `rollback`), `command.update` and
//! `goto`, runs from a checkpoint, `interrupt_before`/`interrupt_after` per run, the
//! `messages`, `events`, `debug`, `tasks` and `checkpoints` stream modes, a state update at a
//! checkpoint, thread copy,
//! crons, the store API (a request for them is refused, 422, with a sentence saying so); the
//! AG-UI endpoint. With workers on PostgreSQL: stateless runs are still carried out by the
//! process that creates them; following another process's run polls its event log (every
//! 50 ms, no `NOTIFY` yet).

#![warn(missing_docs)]
#![warn(unreachable_pub)]

mod api;
mod assistant;
mod error;
pub mod record;
mod records;
mod runs;
mod server;
mod worker;

pub use assistant::{
    Assistant, AssistantError, BoxFuture, CheckpointState, RunEvent, RunEvents, Snapshot, Start,
};
pub use error::ApiError;
pub use server::{Server, ServerBuilder};
pub use worker::Workers;
