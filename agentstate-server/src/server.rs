//! The server: its builder, its router (the LangGraph API's routes and AG-UI's, over the run
//! service), its API key, its users' authentication and CORS, and its listener.

use crate::assistant::Assistant;
use crate::auth::{Authenticate, Authorize, Caller, OwnerOnly};
use crate::error::ApiError;
use crate::openapi::{self, ApiDoc, Docs};
use crate::records::Records;
use crate::service::{Served, Service};
use crate::worker::{WorkerOptions, Workers};
use crate::{agui, api};
use agentstate_store::{RecordBackend, Store};
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::serve::ListenerExt;
use axum::Router;
use std::sync::Arc;
use std::time::Duration;
use tower_http::cors::CorsLayer;
use utoipa::OpenApi;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

/// The routes the API key does not guard, as LangGraph's server does not (its "unshadowable"
/// meta routes): the health check, the spec and its page.
pub(crate) const UNGUARDED: [&str; 3] = ["/ok", "/docs", "/openapi.json"];

/// The namespace of LangGraph's assistant ids: an assistant's id is the UUID v5 of its graph id
/// in it, as LangGraph's servers derive the ids of the assistants they create for their graphs.
const NAMESPACE_GRAPH: uuid::Uuid = uuid::Uuid::from_u128(0x6ba7b821_9dad_11d1_80b4_00c04fd430c8);

/// The LangGraph Agent Server API over durable graphs: build it with [`Server::builder`],
/// mount its [`router`](Server::router) or [`serve`](Server::serve) it.
///
/// ```
/// use agentstate::AgentState;
/// use agentstate_graph::{Context, Graph, END};
/// use agentstate_server::Server;
/// use agentstate_store::SqliteStore;
/// use std::sync::Arc;
///
/// #[derive(AgentState, Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
/// struct Count { n: u32 }
///
/// let graph = Graph::builder()
///     .node("add", |s: Arc<Count>, _: Context| async move {
///         Ok::<_, std::convert::Infallible>(CountUpdate::default().n(s.n + 1))
///     })
///     .entry("add")
///     .edge("add", END)
///     .build()?;
/// let store = SqliteStore::open_in_memory()?;
/// let server = Server::builder(&store)
///     .assistant("counter", graph.durable(&store))
///     .api_key("secret")
///     .cors(tower_http::cors::CorsLayer::permissive())
///     .build();
/// let app: axum::Router = axum::Router::new().nest("/agents", server.router());
/// # let _ = app;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Server {
    router: Router,
    service: Arc<Service>,
    workers: Option<WorkerOptions>,
    /// An API key no header can carry, which [`serve`](Server::serve) refuses.
    unsendable_key: bool,
}

/// Builds a [`Server`] ([`Server::builder`]).
pub struct ServerBuilder {
    records: Arc<dyn Records>,
    assistants: Vec<Served>,
    api_key: Option<Arc<str>>,
    authenticate: Option<Arc<dyn Authenticate>>,
    authorize: Arc<dyn Authorize>,
    cors: Option<CorsLayer>,
    workers: Option<WorkerOptions>,
    run_timeout: Duration,
}

impl std::fmt::Debug for ServerBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerBuilder")
            .field(
                "assistants",
                &self
                    .assistants
                    .iter()
                    .map(|a| &a.graph_id)
                    .collect::<Vec<_>>(),
            )
            .field("api_key", &self.api_key.as_ref().map(|_| "…"))
            .field("authenticate", &self.authenticate.is_some())
            .field("cors", &self.cors.is_some())
            .finish()
    }
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server").finish_non_exhaustive()
    }
}

impl Server {
    /// A server whose threads and run records live in `store` (the store the served graphs
    /// run on).
    pub fn builder<B: RecordBackend>(store: &Store<B>) -> ServerBuilder {
        ServerBuilder {
            records: Arc::new(store.clone()),
            assistants: Vec::new(),
            api_key: None,
            authenticate: None,
            authorize: Arc::new(OwnerOnly),
            cors: None,
            workers: None,
            run_timeout: DEFAULT_RUN_TIMEOUT,
        }
    }

    /// The router, to serve or to mount (nest) in an application's router.
    pub fn router(&self) -> Router {
        self.router.clone()
    }

    /// Ends the runs a previous process left pending or running (it stopped while they ran:
    /// runs are carried out in the serving process), so that none stays `running` and no thread
    /// stays `busy` forever: each ends `error`, saying so, and its thread is `interrupted` if
    /// its run was cut short (a run without `input` continues it) or `idle`. Returns how many.
    /// [`serve`](Server::serve) calls it first; an application that mounts the
    /// [`router`](Server::router) calls it once at startup, before serving.
    ///
    /// With workers on a run queue ([`ServerBuilder::workers`]) it ends nothing (the runs are
    /// other processes' too: the sweeper puts back those of workers that stopped).
    pub async fn recover(&self) -> Result<usize, ApiError> {
        if self.service.queued {
            return Ok(0);
        }
        self.service.recover().await
    }

    /// Starts this process's workers on the database's run queue ([`ServerBuilder::workers`]:
    /// as many as it says, 0 for an instance that only serves the API), with the queue's
    /// listener and the sweeper; [`serve`](Server::serve) calls it. Refused (422) if the server
    /// has no workers configured or its store keeps no run queue (SQLite: runs are carried out
    /// by the serving process).
    pub fn start_workers(&self) -> Result<Workers, ApiError> {
        match &self.workers {
            Some(options) if self.service.queued => Ok(Workers::start(Arc::clone(&self.service), options)),
            Some(_) => Err(ApiError::unprocessable(
                "this server's store keeps no run queue (SQLite): its runs are carried out by the serving process, so it has no workers to start",
            )),
            None => Err(ApiError::unprocessable(
                "this server has no workers configured (`ServerBuilder::workers`): its runs are carried out by the serving process",
            )),
        }
    }

    /// Serves the API on `listener` until the task is dropped or the listener fails, after
    /// [`recover`](Server::recover)ing the runs a previous process left. Refused
    /// (`InvalidInput`) for an API key no header can carry (see
    /// [`ServerBuilder::api_key`]).
    ///
    /// ```no_run
    /// # async fn serve(server: agentstate_server::Server) -> std::io::Result<()> {
    /// let listener = tokio::net::TcpListener::bind("127.0.0.1:2024").await?;
    /// server.serve(listener).await
    /// # }
    /// ```
    pub async fn serve(self, listener: tokio::net::TcpListener) -> std::io::Result<()> {
        if self.unsendable_key {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "the server's API key holds a control character (a key file's trailing newline?), which no `x-api-key` header can carry: trim it",
            ));
        }
        if let Ok(address) = listener.local_addr() {
            let _ = self
                .service
                .api_url
                .set(Arc::from(format!("http://{address}")));
        }
        self.recover().await.map_err(std::io::Error::other)?;
        // Dropped when serving ends: they claim nothing more (what they run goes on).
        let _workers = match self.service.queued {
            true => Some(self.start_workers().map_err(std::io::Error::other)?),
            false => None,
        };
        // Streamed events are small writes, each flushed: without TCP_NODELAY, Nagle's
        // algorithm holds each one back until the client acknowledges the last (up to 40 ms
        // with delayed acknowledgements).
        let listener = listener.tap_io(|tcp| {
            let _ = tcp.set_nodelay(true);
        });
        axum::serve(listener, self.router).await
    }
}

impl ServerBuilder {
    /// Serves `assistant` (a [`DurableGraph`](agentstate_graph::durable::DurableGraph) on the
    /// builder's store, or any [`Assistant`]) under graph id `graph_id`; its assistant id is
    /// derived from it. A second assistant of the same graph id replaces the first.
    #[must_use]
    pub fn assistant(mut self, graph_id: &str, assistant: impl Assistant) -> Self {
        self.assistants.retain(|a| a.graph_id != graph_id);
        self.assistants.push(Served {
            graph_id: graph_id.to_owned(),
            assistant_id: uuid::Uuid::new_v5(&NAMESPACE_GRAPH, graph_id.as_bytes()).to_string(),
            assistant: Arc::new(assistant),
            timeout: None,
        });
        self
    }

    /// How long a run may run once started (24 hours by default, as LangGraph's server's
    /// `BG_JOB_TIMEOUT_SECS`), unless its assistant has its own
    /// ([`assistant_run_timeout`](ServerBuilder::assistant_run_timeout)) or its request gives
    /// one (`timeout`, in seconds). Past it, the run is stopped and ends `timeout` (its error
    /// `TimeoutError`, its thread `error`), its thread's lease released; a run that does not
    /// stop within 2 s (a node that blocks its thread, or never returns) is ended from
    /// outside its task, as a cancelled run that does not stop is.
    ///
    /// ```
    /// use agentstate_server::Server;
    /// use std::time::Duration;
    ///
    /// # let store = agentstate_store::SqliteStore::open_in_memory().unwrap();
    /// let server = Server::builder(&store).run_timeout(Duration::from_secs(600)).build();
    /// # drop(server);
    /// ```
    #[must_use]
    pub fn run_timeout(mut self, timeout: Duration) -> Self {
        self.run_timeout = timeout;
        self
    }

    /// The deadline of the runs of the assistant served as `graph_id` (see
    /// [`run_timeout`](ServerBuilder::run_timeout)); a run's request may still give its own.
    ///
    /// # Panics
    /// If no assistant is served as `graph_id` yet (give it with
    /// [`assistant`](ServerBuilder::assistant) first): a deadline set for no graph is a
    /// mistake in the server's setup, found when it is built.
    #[must_use]
    pub fn assistant_run_timeout(mut self, graph_id: &str, timeout: Duration) -> Self {
        let Some(served) = self.assistants.iter_mut().find(|a| a.graph_id == graph_id) else {
            panic!("assistant_run_timeout: no assistant is served as `{graph_id}` yet");
        };
        served.timeout = Some(timeout);
        self
    }

    /// Requires every request but `/ok`, `/docs` and `/openapi.json` (as LangGraph's server,
    /// which guards none of them) to carry `key` in its `x-api-key` header (401 otherwise),
    /// compared in constant time; the spec then declares the `x-api-key` scheme.
    ///
    /// A key no header can carry (a control character, such as a key file's trailing newline)
    /// matches no request: every guarded request is refused, saying why, and
    /// [`serve`](Server::serve) refuses to start. It never turns the check off.
    ///
    /// With users too ([`authenticate`](ServerBuilder::authenticate)), a request needs both:
    /// the key is checked first.
    #[must_use]
    pub fn api_key(mut self, key: impl Into<String>) -> Self {
        self.api_key = Some(Arc::from(key.into()));
        self
    }

    /// Serves users kept apart, as LangGraph's custom auth does: every request but `/ok`,
    /// `/info`, `/docs` and `/openapi.json` (which LangGraph's server leaves open too) is
    /// `authenticate`d (refused as it says, 401 by default: `{"detail": ...}`), and what its user
    /// does is decided by the server's rules ([`authorize`](ServerBuilder::authorize);
    /// [`OwnerOnly`] by default: what a user creates is theirs, stamped `owner`, and no one
    /// else reads, lists, runs on, streams, joins, cancels, copies, updates or deletes it; a
    /// thread or run hidden so is answered as a missing one, 404). Applied by every route,
    /// the AG-UI endpoint's included. A run's `config.configurable` carries its user, as
    /// LangGraph's (`langgraph_auth_user`, `langgraph_auth_user_id`,
    /// `langgraph_auth_permissions`, `user_id`, in place of any the request sent).
    ///
    /// With an [`api_key`](ServerBuilder::api_key) too, a request needs both: the key is
    /// checked first (401 without it), then the user.
    ///
    /// ```
    /// use agentstate_server::{BearerTokens, Identity, Server};
    ///
    /// # fn run(graph: agentstate_graph::Graph<agentstate::state::AgentState>) -> Result<(), Box<dyn std::error::Error>> {
    /// # let store = agentstate_store::SqliteStore::open_in_memory()?;
    /// let server = Server::builder(&store)
    ///     .assistant("agent", graph.durable(&store))
    ///     // `Authorization: Bearer token-alice` is alice's; each user sees their own threads.
    ///     .authenticate(
    ///         BearerTokens::new()
    ///             .token("token-alice", Identity::new("alice"))
    ///             .token("token-bob", Identity::new("bob").with_permission("admin")),
    ///     )
    ///     .build();
    /// # let _ = server;
    /// # Ok(())
    /// # }
    /// ```
    #[must_use]
    pub fn authenticate(mut self, authenticate: impl Authenticate) -> Self {
        self.authenticate = Some(Arc::new(authenticate));
        self
    }

    /// Decides what the users [`authenticate`](ServerBuilder::authenticate) finds may do with
    /// `rules` in place of [`OwnerOnly`] (see [`Authorize`]: a rule may defer to
    /// [`OwnerOnly`]). Without authentication there are no users, and no rules apply.
    ///
    /// ```
    /// use agentstate_server::{Access, Action, BearerTokens, Decision, Identity, OwnerOnly, Server};
    /// use agentstate_server::Authorize;
    /// use serde_json::{Map, Value};
    ///
    /// # fn run(graph: agentstate_graph::Graph<agentstate::state::AgentState>) -> Result<(), Box<dyn std::error::Error>> {
    /// # let store = agentstate_store::SqliteStore::open_in_memory()?;
    /// let server = Server::builder(&store)
    ///     .assistant("agent", graph.durable(&store))
    ///     .authenticate(BearerTokens::new().token("token-alice", Identity::new("alice")))
    ///     // Nobody deletes; the rest as `OwnerOnly` says.
    ///     .authorize(|access: &Access<'_>, metadata: &mut Map<String, Value>| match access.action {
    ///         Action::Delete => Decision::Deny,
    ///         _ => OwnerOnly.authorize(access, metadata),
    ///     })
    ///     .build();
    /// # let _ = server;
    /// # Ok(())
    /// # }
    /// ```
    #[must_use]
    pub fn authorize(mut self, rules: impl Authorize) -> Self {
        self.authorize = Arc::new(rules);
        self
    }

    /// Answers browsers' cross-origin requests as `cors` says (for a UI on another origin; a
    /// `tower_http::cors::CorsLayer`, which needs `tower-http` with its `cors` feature among the
    /// application's dependencies: [`cors_permissive`](ServerBuilder::cors_permissive) and
    /// [`cors_origins`](ServerBuilder::cors_origins) do not).
    #[must_use]
    pub fn cors(mut self, cors: CorsLayer) -> Self {
        self.cors = Some(cors);
        self
    }

    /// Answers browsers' cross-origin requests from any origin, with any method and header,
    /// and lets the page read every response header (the SDKs read a run's id from
    /// `Content-Location`): a UI on another origin (a development server, another port) calls
    /// the API with no more. Requests with credentials (cookies) are not allowed; name the
    /// origins with [`cors_origins`](ServerBuilder::cors_origins) instead for a deployed UI.
    ///
    /// ```
    /// # fn run(graph: agentstate_graph::Graph<agentstate::state::AgentState>) -> Result<(), Box<dyn std::error::Error>> {
    /// # use agentstate_server::Server;
    /// # let store = agentstate_store::SqliteStore::open_in_memory()?;
    /// let server = Server::builder(&store)
    ///     .assistant("agent", graph.durable(&store))
    ///     .cors_permissive()
    ///     .build();
    /// # let _ = server;
    /// # Ok(())
    /// # }
    /// ```
    #[must_use]
    pub fn cors_permissive(self) -> Self {
        self.cors(CorsLayer::permissive())
    }

    /// Answers browsers' cross-origin requests from `origins` only (each a scheme, host and
    /// port, as a browser sends it in `Origin`: `https://chat.example.com`,
    /// `http://localhost:5173`), with any method and header, and lets the page read every
    /// response header (the SDKs read a run's id from `Content-Location`). Other origins get no
    /// CORS headers, so their browsers refuse the answers.
    ///
    /// # Panics
    ///
    /// If an origin is not a valid header value (a control character or a non-ASCII one).
    ///
    /// ```
    /// # fn run(graph: agentstate_graph::Graph<agentstate::state::AgentState>) -> Result<(), Box<dyn std::error::Error>> {
    /// # use agentstate_server::Server;
    /// # let store = agentstate_store::SqliteStore::open_in_memory()?;
    /// let server = Server::builder(&store)
    ///     .assistant("agent", graph.durable(&store))
    ///     .cors_origins(["https://chat.example.com", "http://localhost:5173"])
    ///     .build();
    /// # let _ = server;
    /// # Ok(())
    /// # }
    /// ```
    #[must_use]
    pub fn cors_origins<I>(self, origins: I) -> Self
    where
        I: IntoIterator,
        I::Item: AsRef<str>,
    {
        use tower_http::cors::{AllowOrigin, Any};
        let origins: Vec<HeaderValue> = origins
            .into_iter()
            .map(|origin| {
                let origin = origin.as_ref();
                HeaderValue::from_str(origin).unwrap_or_else(|_| {
                    panic!("the CORS origin `{origin}` is not a valid header value")
                })
            })
            .collect();
        self.cors(
            CorsLayer::new()
                .allow_origin(AllowOrigin::list(origins))
                .allow_methods(Any)
                .allow_headers(Any)
                .expose_headers(Any),
        )
    }

    /// Queues the runs created on threads in the database's run queue, for the workers of every
    /// server and worker process on the database, and runs `count` workers in this process
    /// ([`Server::start_workers`]; 0: this instance only serves the API). A worker claims a run
    /// with `FOR UPDATE SKIP LOCKED` (never two running runs of one thread), carries it out,
    /// and wakes up on `NOTIFY`; a cancelled run is stopped by its worker, told by `NOTIFY`; a
    /// run whose worker stopped (its thread's lease expired: a live run renews it) is put back
    /// by a sweeper and continued by another worker from its last committed step, at most 3
    /// attempts. On a store without a run queue (SQLite) runs stay in the serving process.
    ///
    /// ```no_run
    /// # #[cfg(feature = "postgres")]
    /// # async fn run(graph: agentstate_graph::Graph<agentstate::state::AgentState>) -> Result<(), Box<dyn std::error::Error>> {
    /// use agentstate_server::Server;
    /// use agentstate_store::PostgresStore;
    ///
    /// let store = PostgresStore::connect("postgres://postgres@127.0.0.1:5432/agents").await?;
    /// // This instance serves the API and runs 8 workers; more processes may serve or work.
    /// let server = Server::builder(&store)
    ///     .assistant("agent", graph.durable(&store))
    ///     .workers(8)
    ///     .build();
    /// server.serve(tokio::net::TcpListener::bind("127.0.0.1:8123").await?).await?;
    /// # Ok(())
    /// # }
    /// ```
    #[must_use]
    pub fn workers(mut self, count: usize) -> Self {
        self.workers
            .get_or_insert_with(WorkerOptions::default)
            .count = count;
        self
    }

    /// How often the sweeper looks for runs whose workers stopped (10 s by default), and how
    /// long after its claim a run with no live lease on its thread is taken for stopped (10 s
    /// by default: longer than a worker takes between claiming a run and taking its thread's
    /// lease). Takes effect with [`workers`](ServerBuilder::workers).
    #[must_use]
    pub fn sweep(mut self, every: Duration, grace: Duration) -> Self {
        let options = self.workers.get_or_insert_with(WorkerOptions::default);
        options.sweep_every = every;
        options.sweep_grace = grace;
        self
    }

    /// How often an idle worker claims without a notice (5 s by default; notices wake it at
    /// once), and how long [`Workers::shutdown`] gives the runs in progress before it puts
    /// them back in the queue (10 s by default).
    #[must_use]
    pub fn worker_timing(mut self, poll: Duration, shutdown_grace: Duration) -> Self {
        let options = self.workers.get_or_insert_with(WorkerOptions::default);
        options.poll_every = poll;
        options.shutdown_grace = shutdown_grace;
        self
    }

    /// The server.
    pub fn build(self) -> Server {
        let queued = self.workers.is_some() && self.records.has_queue();
        let service = Arc::new(Service {
            records: self.records,
            assistants: self.assistants,
            runs: Arc::default(),
            queued,
            api_url: std::sync::OnceLock::new(),
            followers: Arc::default(),
            run_timeout: self.run_timeout,
        });
        let (routes, spec) = OpenApiRouter::with_openapi(ApiDoc::openapi())
            .merge(api::routes())
            .merge(agui::routes())
            .routes(routes!(openapi::docs))
            .split_for_parts();
        let graph_ids: Vec<String> = service
            .assistants
            .iter()
            .map(|a| a.graph_id.clone())
            .collect();
        let docs = Arc::new(Docs::new(spec, &graph_ids, self.api_key.is_some()));
        let mut router = routes
            .route("/openapi.json", get(openapi::openapi_json))
            .fallback(|| async { ApiError::not_found("Not Found") })
            .layer(axum::Extension(docs))
            .with_state(Arc::clone(&service));
        let unsendable_key = self.api_key.as_deref().is_some_and(|k| !sendable(k));
        if let Some(authenticate) = self.authenticate {
            let users = Arc::new(Users {
                authenticate,
                rules: self.authorize,
            });
            router = router.layer(axum::middleware::from_fn_with_state(users, check_user));
        }
        // The outer layer: the key is checked before the user.
        if let Some(key) = self.api_key {
            router = router.layer(axum::middleware::from_fn_with_state(key, check_key));
        }
        if let Some(cors) = self.cors {
            router = router.layer(cors);
        }
        Server {
            router,
            service,
            workers: self.workers,
            unsendable_key,
        }
    }
}

/// A run's deadline unless its assistant or its request gives one: 24 hours, as LangGraph's
/// server's (`BG_JOB_TIMEOUT_SECS`, 86400 s by default).
const DEFAULT_RUN_TIMEOUT: Duration = Duration::from_secs(86_400);

/// Refuses a request without the API key (but those of [`UNGUARDED`]).
async fn check_key(State(key): State<Arc<str>>, request: Request, next: Next) -> Response {
    use subtle::ConstantTimeEq;
    let given = request.headers().get("x-api-key");
    let open = UNGUARDED.contains(&request.uri().path());
    let matches = given.is_some_and(|g| bool::from(g.as_bytes().ct_eq(key.as_bytes())));
    if open || (matches && sendable(&key)) {
        return next.run(request).await;
    }
    let path = request.uri().path();
    let why = match (sendable(&key), given.is_some()) {
        (false, _) => format!(
            "the request to `{path}` is refused: the server's API key holds a control character (a key file's trailing newline?), which no `x-api-key` header can carry"
        ),
        (true, true) => format!("the request to `{path}` carries a wrong API key in its `x-api-key` header"),
        (true, false) => format!("the request to `{path}` carries no API key in its `x-api-key` header"),
    };
    ApiError::new(StatusCode::UNAUTHORIZED, why).into_response()
}

/// Whether an `x-api-key` header can carry API key `key`.
fn sendable(key: &str) -> bool {
    HeaderValue::from_str(key).is_ok()
}

/// How the server finds its users and what they may do.
struct Users {
    authenticate: Arc<dyn Authenticate>,
    rules: Arc<dyn Authorize>,
}

/// Refuses a request its authentication refuses (but those of [`UNGUARDED`] and `/info`, as
/// LangGraph's custom auth leaves them open); the others go on as their user's
/// ([`Caller`]).
async fn check_user(State(users): State<Arc<Users>>, request: Request, next: Next) -> Response {
    let path = request.uri().path();
    if path == "/info" || UNGUARDED.contains(&path) {
        return next.run(request).await;
    }
    let (mut parts, body) = request.into_parts();
    match users.authenticate.authenticate(&parts).await {
        Ok(user) => {
            let caller = Caller::new(user, Arc::clone(&users.rules));
            parts.extensions.insert(caller);
            next.run(Request::from_parts(parts, body)).await
        }
        Err(refused) => refused.into_response(),
    }
}
