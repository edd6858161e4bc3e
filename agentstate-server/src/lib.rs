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
//! [`serve`](Server::serve)s itself; an API key (`x-api-key`), users kept apart (see
//! [below](#users)) and CORS are options.
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
//! # How faithful to the reference
//!
//! A differential test serves the same small graphs with LangGraph's own `langgraph dev`
//! (written in Python) and with this server (in Rust), makes the same calls against both with
//! the official Python SDK, and compares what comes back; another does so for the AG-UI
//! endpoint against ag-ui-langgraph with `@ag-ui/client`. Where this server still answers
//! otherwise, [`_divergences`] says what differs and why.
//!
//! # What is where
//!
//! - [`Server`] and its [`ServerBuilder`]: the router, the API key, users, CORS.
//! - Users: [`Authenticate`] (and [`BearerTokens`]) finds a request's [`Identity`];
//!   [`Authorize`] (and [`OwnerOnly`], the default) decides, for an [`Access`] (a [`Resource`]
//!   and an [`Action`]), a [`Decision`], possibly a [`Filter`] of metadata.
//! - [`Assistant`]: a graph with its state type erased behind JSON (a run's input is a JSON
//!   update of the state, `command.resume` its [`Answers`](agentstate_graph::durable::Answers),
//!   its events [`RunEvent`]s); implemented for every `DurableGraph` whose state has a
//!   `Default`. With it: [`Start`], [`RunOptions`] (a run's breakpoints, `command.update` and
//!   `goto`, its checkpoint), [`RunEvents`], [`Snapshot`], [`CheckpointState`],
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
//!   continues from its journal: its committed steps and effects are not repeated. Every
//!   write a worker makes of a run (its events, its record, its thread's status, its queue
//!   row) is fenced by its claim on the run, as the journal is by the thread's lease: a worker
//!   paused past its lease, whose run was put back and claimed by another, writes nothing
//!   more when it goes on (a run that lost its lease while its worker still held it is handed
//!   back to the queue). A run's queueing (its records, its first event, its queue row) and
//!   its end (its last events, its record, its thread's status, its queue row) are each one
//!   transaction. The `worker` example is a worker-only process.
//! - Deadlines: a run may run 24 hours once started ([`ServerBuilder::run_timeout`], as
//!   LangGraph's `BG_JOB_TIMEOUT_SECS`; per assistant
//!   [`ServerBuilder::assistant_run_timeout`]; per request, the body's `timeout` in seconds,
//!   this server's own), then ends `timeout` (`TimeoutError`). A run asked to stop (a cancel,
//!   its deadline) that has not ended 2 s later, because a node blocks its thread or never
//!   returns, is ended from outside its task: its record, its thread's status, its lease
//!   revoked (whatever the node commits or starts later is refused), its streams ended; the
//!   API, the heartbeats and the other runs go on meanwhile. A graph's own
//!   [`step_timeout`](agentstate_graph::GraphBuilder::step_timeout) and a node's
//!   [`timeout`](agentstate_graph::layer::NodeExt::timeout) layer (with retries) limit its
//!   steps and nodes.
//!
//! # The API served
//!
//! | route | what |
//! |---|---|
//! | `GET /ok`, `GET /info` | health, version |
//! | `GET /openapi.json`, `GET /docs` | the API's OpenAPI 3.1 spec, and its reference page (Scalar's, with the spec inlined, its script from the jsDelivr CDN), as LangGraph's server serves them: not behind the API key; the spec generated from the routes themselves (each route is registered with its entry), the served graphs' ids as `graph_id`'s enum, and the `x-api-key` scheme when the server has a key |
//! | `POST /assistants/search`, `GET /assistants/{id}`, `.../graph`, `.../schemas` | the served graphs (an assistant id is the UUID v5 of its graph id, as LangGraph's; runs accept either) |
//! | `POST /threads` (`if_exists`), `POST /threads/search` (metadata, values, status, ids, sorted, paged), `POST /threads/count`, `GET`/`PATCH`/`DELETE /threads/{id}` | threads (a thread runs any served graph, as on LangGraph's server) |
//! | `POST /threads/{id}/copy` | a new thread (a new UUID) with the thread's metadata, status, state, history and branches, its own (deleting, rewinding or running either leaves the other as it was); not its runs; 409 while a run is in progress |
//! | `GET`/`POST /threads/{id}/state`, `.../state/{checkpoint_id}`, `GET`/`POST .../history` | a thread's state (values, next, tasks with their interrupts, checkpoint) now or at a checkpoint, and its history (every branch's checkpoints, the newest first); an update made as a node (`as_node`; 409 while a run is in progress), at an earlier checkpoint too (a fork, as a run from it) |
//! | `POST /threads/{id}/runs` (background), `.../runs/stream`, `.../runs/wait`; `POST /runs`, `/runs/stream`, `/runs/wait` (stateless) | runs |
//! | `GET /threads/{id}/runs`, `GET`/`DELETE .../runs/{rid}`, `.../join`, `.../stream`, `POST .../cancel` | a thread's runs |
//! | `POST /agui/{assistant}` | an AG-UI run (see [below](#the-ag-ui-endpoint)) |
//!
//! Messages: the state keeps AgentFlow's [`Message`](agentstate::message::Message)s; the API
//! takes them in any shape LangGraph's `add_messages` takes (LangChain's dicts such as
//! `{"type": "human", "content": "hi"}`, OpenAI-style `{"role": "user", ...}`, a plain string,
//! a `["user", "hi"]` pair, with tool calls and tool results) and shows them, in values,
//! updates, state and history, as LangChain's message dicts (`type`, `content`, `id`,
//! `tool_calls`, `tool_call_id`, `usage_metadata`), as the SDKs and `useStream` read them.
//!
//! Streams send `metadata` (`run_id`, `attempt`) first, then the events of the run's
//! `stream_mode`s (`values`, `updates`, `custom`, `messages-tuple` as `messages` tuples;
//! `messages` as `messages/metadata` when a message first shows, `messages/partial` (a model's
//! message so far) as its text streams, and `messages/complete` for each message a node adds;
//! `tasks`, each task's start and result; `checkpoints`, each checkpoint the run commits, as
//! its history entry with its `config` and `parent_config`; `debug`, both wrapped as
//! LangGraph's `{type, timestamp, step, payload}`; `events`, LangChain's `on_chain_*` and
//! `on_chat_model_*` events of the graph, its nodes and its models' streamed text),
//! interrupts as `__interrupt__`, and `error` on failure (`{"error": "ValueError", "message":
//! "boom"}`: a node's error named by its type, see [`AssistantError`]); the state the run
//! starts from (its input merged) is its first `values`. The events of a run created with
//! `stream_resumable` carry an `id` (its number in the run, from 0); the response's
//! `Content-Location` names the run. A run created with
//! `on_disconnect: "cancel"` is cancelled when the client that streams or waits for it goes
//! away (`continue`, the default, lets it run).
//!
//! A run's `interrupt_before` / `interrupt_after` (node names, or `*`) stop it before or after
//! those nodes' steps: the thread is `interrupted`, its state's `next` names the nodes, no
//! question is shown; a run without `input` goes on past the stop. A `command`'s `update` is
//! merged as the run's input, and its `goto` (a node's name or a list) is where the run's
//! first step goes; `update` alone runs no node on a thread whose run finished, and goes on
//! where a cut-short or stopped run stands; with `resume`, it is committed with the answers,
//! before the suspended step runs again. A run's events are written
//! to the database as it streams (a batch at a time), so a client that joins a run
//! (`GET .../runs/{rid}/stream`, the stream response's `Location`), on this server or on
//! another one on the same database, while it runs, or after it ended if it was created
//! resumable, with `Last-Event-ID` gets every later event once (`-1`: all); `join` waits for a
//! run another server carries out. A run with `after_seconds` is `pending` until then. A run
//! that stops at an interrupt ends `success` and leaves its thread
//! `interrupted`, as the reference server does; `command.resume` answers it. A cancelled run
//! leaves its thread `interrupted`; a run without `input` continues it, and a run with a new
//! `input` starts afresh from the state (whatever the last run left: cut short, failed, or
//! waiting for answers). On a busy thread a run waits for the running one under
//! `multitask_strategy` `enqueue` (the default, as LangGraph's server's), is refused (409)
//! under `reject`, stops the running run under `interrupt` (its committed steps stay), and
//! stops it under `rollback` and removes what it did (its checkpoints, its record and its
//! events: the thread is as it was before it started); a cancel with `action=rollback` does
//! the same to one run. A run with a `checkpoint_id` (or `checkpoint`) starts from that
//! checkpoint, of the thread's head or of one of its branches: the thread goes on from there,
//! and what came after is kept as a branch, listed in the history (below), then the run goes on from it (without `input`) or starts afresh from its
//! state (with one). A run its task's panic ended is `error`; without workers,
//! [`Server::recover`] ends those a stopped process left.
//!
//! A thread's branches: a run from an earlier checkpoint (or a state update at one) keeps the
//! thread's later checkpoints as a branch, in a store thread of its own, as LangGraph keeps the
//! abandoned branch of a fork (`useStream`'s branch switcher reads them from the history):
//! the history lists every branch's checkpoints beside the head's, each branch's first one a
//! child of the checkpoint it forked from; a branch's checkpoint ids name it (`b0-5`); a run
//! from one makes that branch the head, and the head it replaces is kept as a branch in turn.
//!
//! Not served yet: `command.goto` as a `Send` (a node with an input of its own), `command.resume`
//! with `command.goto`, crons, the store API (a request for them is refused, 422, with a
//! sentence saying so);
//! `stream_subgraphs` is accepted and streams the graph's own events. With
//! workers on PostgreSQL: stateless runs are still carried out by the process that creates
//! them; following another process's run polls its event log (every 50 ms, no `NOTIFY` yet).
//!
//! # Users
//!
//! With [`ServerBuilder::authenticate`], the server keeps its users apart as LangGraph's custom
//! auth does: each request is its user's ([`Authenticate`]: a bearer token, a JWT checked by
//! the application, any check), or refused (401); `/ok`, `/info`, `/docs` and `/openapi.json`
//! stay open. Rules ([`Authorize`], per resource and action) decide what a user does; by
//! default ([`OwnerOnly`]) a user's threads and runs are their own: stamped `owner` when
//! created, and another user's are answered as missing ones (404) by every route, AG-UI's
//! included, and left out of searches and counts, with the codes and sentences `langgraph dev`
//! gives (a differential test compares them; `docs/divergences.md` lists the three answers that
//! differ). A run's `config.configurable` names its user (`langgraph_auth_user`, ...), as
//! LangGraph's; the graph's nodes do not read a run's `configurable` (it is shown in the run and
//! its checkpoints' metadata).
//!
//! ```no_run
//! # use agentstate_graph::Graph;
//! # async fn run(graph: Graph<agentstate::state::AgentState>) -> Result<(), Box<dyn std::error::Error>> {
//! use agentstate_server::{BearerTokens, Identity, Server};
//! use agentstate_store::SqliteStore;
//!
//! let store = SqliteStore::open("agents.db")?;
//! let server = Server::builder(&store)
//!     .assistant("agent", graph.durable(&store))
//!     .authenticate(
//!         BearerTokens::new()
//!             .token("token-alice", Identity::new("alice"))
//!             .token("token-bob", Identity::new("bob")),
//!     )
//!     .build();
//! server.serve(tokio::net::TcpListener::bind("127.0.0.1:2024").await?).await?;
//! # Ok(())
//! # }
//! ```
//!
//! # The AG-UI endpoint
//!
//! `POST /agui/{assistant}` (a graph id or an assistant id) takes an AG-UI `RunAgentInput`
//! ([`agentstate::agui::RunAgentInput`]: what `@ag-ui/client`'s `HttpAgent` POSTs) and answers
//! `text/event-stream`, one `data: <event JSON>` frame per AG-UI event, sent as it happens. The
//! run is a durable run, with the client's `runId`, on thread `threadId` (created if missing),
//! and a run of the thread like any other (`GET /threads/{id}/state` reads what it did).
//! Its events are those ag-ui-langgraph (the AG-UI server of LangGraph graphs) sends for the
//! same graph; where they still differ, and why, is listed in `docs/divergences.md`, which a
//! differential test keeps true:
//!
//! - **Its input**: the client's messages that the thread does not have (by id) are added to
//!   the state's messages field ([`Assistant::messages_field`]: a `DurableGraph`'s first
//!   `add_messages` or `upsert_messages` field); the client's `state` is applied as
//!   ag-ui-langgraph applies it: each of its keys that is a field of the state (other than the
//!   messages field) and whose value is not the thread's already is part of the run's input,
//!   merged through the field's reducer before the graph's first step (keys the state has no
//!   field for are left out); the client's `tools`, then those of its `state.tools` of other
//!   names, replace the state's field `tools`, and are `actions` in its field `copilotkit`
//!   (CopilotKit's `CopilotKitState`, the rest of the client's `state.copilotkit` kept) and
//!   `tools` in its field `ag-ui` beside the client's `context` (`{"tools", "context"}`), as
//!   ag-ui-langgraph gives them, those of the three the state has. `forwardedProps` is not
//!   applied. A state without a messages field takes no messages. A user message the
//!   thread has, with other text under its id (an edited message), makes the run do the
//!   conversation again from it, as ag-ui-langgraph does: the thread is taken back to where it
//!   was before that message came (what came after leaves its history, as with a run from an
//!   earlier checkpoint in the API above) and the edited message is the run's input.
//! - **Answers**: with `resume`, the run answers the thread's interrupts instead (each entry's
//!   `payload` for its `interruptId`; a cancelled one is answered `null`); an id the thread does
//!   not wait for is refused (422). `forwardedProps.command.resume` (ag-ui-langgraph's older
//!   way, which CopilotKit's `useInterrupt` uses after `on_interrupt`) answers every question
//!   the thread waits for with its value. A run answering the thread's interrupts may take the
//!   `runId` of the run that asked (CopilotKit's `useInterrupt` does); any other run needs a new
//!   one (409 otherwise). A run without answers on a thread that waits for them (and without
//!   an edited message, which goes first) runs nothing: it gives the questions again
//!   (`RUN_STARTED`, `CUSTOM` `on_interrupt`, `RUN_FINISHED` with the interrupt outcome), as
//!   ag-ui-langgraph does. Otherwise a run starts afresh from the
//!   thread's state whatever its last run left, as a new `input` does in the API above.
//! - **Its events**: `RUN_STARTED` (with the input's `parentRunId`); each node a step
//!   (`STEP_STARTED` / `STEP_FINISHED` with its name; a node of the same step streaming at once
//!   ends the other's step); a model's streamed text as `TEXT_MESSAGE_START` (role
//!   `assistant`) / `CONTENT` / `END` and its streamed tool calls as `TOOL_CALL_START` / `ARGS` /
//!   `END`; after each step, the tool calls and tool results the step wrote and did not stream
//!   (`TOOL_CALL_START` / `ARGS` / `END`, `TOOL_CALL_RESULT`: a frontend tool's call reaches the
//!   client so) and the state as `STATE_SNAPSHOT`; nodes' custom events as `CUSTOM`; before the
//!   end, the thread's state (`STATE_SNAPSHOT`) and its whole conversation (`MESSAGES_SNAPSHOT`:
//!   the text of messages a node wrote without streaming comes so, and a client that connects
//!   to a thread it has nothing of, after a reload or a restart of CopilotKit's runtime, gets
//!   the thread's messages back from any run, one with no new messages included: AG-UI over
//!   HTTP has no other way to load a thread, `HttpAgent` has no `connect`, and CopilotKit's
//!   `/connect` replays what its runner kept in memory; a runner that reads the thread through
//!   the API above, `GET /threads/{id}/state`, works too); then exactly one of `RUN_FINISHED` (no `outcome`: a plain success, the client derives the tool calls
//!   left pending; or, when the run waits for answers, `CUSTOM` `on_interrupt` with each
//!   question's payload, then `outcome` `{"type": "interrupt", "interrupts": [{id, reason,
//!   message, metadata}]}`: a later run with `resume` answers them) and `RUN_ERROR` (its `code`
//!   the error's category, its message naming the run and thread; the text messages and tool
//!   calls still streaming are ended before it).
//! - **Frontend tools** (tools the client declares and executes): the graph reads them from its
//!   state's `tools` field, and its model node may answer with an assistant message calling one;
//!   the graph then routes to `END` (it does not run that tool itself). The run ends with the
//!   call as `TOOL_CALL_START` / `ARGS` / `END` and `RUN_FINISHED`: the call has no result, so
//!   the client takes it as pending, runs the tool, and starts the next run with the result as a
//!   `tool` message, which comes in as a new message like any other. The prebuilt
//!   [`ReactAgent`](agentstate_graph::prebuilt::ReactAgent) follows this contract when its
//!   state names the client's tools
//!   ([`MessagesState::frontend_tools`](agentstate_graph::prebuilt::MessagesState::frontend_tools),
//!   read from the state's `tools` field): its model is offered them beside its own, and a
//!   reply that calls one ends the run.
//! - **One run per thread**: a run on a thread busy with another run of this server is refused
//!   before its stream starts: `409`, whose `detail` names the thread and the run it is busy
//!   with (the client's `runAgent` rejects with it, as with the API's `reject`); a thread another process holds (its lease) ends
//!   the run with `RUN_ERROR` (`thread_leased`). A client that goes away does not stop the run:
//!   it runs to its end, and the thread keeps what it did.
//!
//! With an [API key](ServerBuilder::api_key), the client sends it as the API's clients do
//! (`new HttpAgent({ url, headers: { "x-api-key": key } })`).
//!
//! Behind CopilotKit's runtime, the endpoint is an `HttpAgent` of the runtime's agents (the
//! runtime serves the browser; its `/agent/{id}/run` forwards the `RunAgentInput` here). The
//! runtime 1.75.0 bundles `@ag-ui/client` 0.0.59, whose `HttpAgent` is tested here beside
//! 1.0.0's, and the runtime itself is tested serving the endpoint so (text, an interrupt and
//! its resume, a frontend tool, a failure):
//!
//! ```text
//! import { CopilotRuntime, InMemoryAgentRunner } from "@copilotkit/runtime";
//! import { HttpAgent } from "@ag-ui/client";
//!
//! const runtime = new CopilotRuntime({
//!   agents: { desk: new HttpAgent({ url: "http://127.0.0.1:2024/agui/desk" }) },
//!   runner: new InMemoryAgentRunner(),
//! });
//! ```

#![warn(missing_docs)]
#![warn(unreachable_pub)]

#[doc = include_str!("../docs/divergences.md")]
pub mod _divergences {}

mod agui;
mod api;
mod assistant;
mod auth;
mod branches;
mod checkpoints;
mod error;
mod messages;
mod metadata;
mod openapi;
pub mod record;
mod records;
mod runs;
mod server;
mod service;
mod worker;

pub use assistant::{
    Assistant, AssistantError, BoxFuture, CheckpointState, RunEvent, RunEvents, RunOptions,
    Snapshot, Start,
};
pub use auth::{
    Access, Action, Authenticate, Authorize, BearerTokens, Decision, Filter, Identity, OwnerOnly,
    Resource, OWNER,
};
pub use error::ApiError;
pub use server::{Server, ServerBuilder};
pub use worker::Workers;
