//! The server: its builder, its router, and what its handlers share.

use crate::api;
use crate::assistant::Assistant;
use crate::error::ApiError;
use crate::records::Records;
use crate::runs::Runs;
use agentstate_store::{RecordBackend, Store};
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::serve::ListenerExt;
use axum::Router;
use std::sync::Arc;
use tower_http::cors::CorsLayer;

/// The namespace of LangGraph's assistant ids: an assistant's id is the UUID v5 of its graph id
/// in it, as LangGraph's servers derive the ids of the assistants they create for their graphs.
const NAMESPACE_GRAPH: uuid::Uuid = uuid::Uuid::from_u128(0x6ba7b821_9dad_11d1_80b4_00c04fd430c8);

/// A served graph.
pub(crate) struct Served {
    pub(crate) graph_id: String,
    pub(crate) assistant_id: String,
    pub(crate) assistant: Arc<dyn Assistant>,
}

/// What the handlers share.
pub(crate) struct Shared {
    pub(crate) records: Arc<dyn Records>,
    pub(crate) assistants: Vec<Served>,
    pub(crate) runs: Arc<Runs>,
}

impl Shared {
    /// The assistant named `id` (its graph id or its assistant id).
    pub(crate) fn assistant(&self, id: &str) -> Option<&Served> {
        self.assistants
            .iter()
            .find(|a| a.graph_id == id || a.assistant_id == id)
    }

    /// The assistant of graph `graph_id`.
    pub(crate) fn graph(&self, graph_id: &str) -> Result<&Served, ApiError> {
        self.assistants
            .iter()
            .find(|a| a.graph_id == graph_id)
            .ok_or_else(|| {
                ApiError::unprocessable(format!(
                    "graph `{graph_id}` is no longer served by this server"
                ))
            })
    }
}

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
    shared: Arc<Shared>,
}

/// Builds a [`Server`] ([`Server::builder`]).
pub struct ServerBuilder {
    records: Arc<dyn Records>,
    assistants: Vec<Served>,
    api_key: Option<Arc<str>>,
    cors: Option<CorsLayer>,
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
            cors: None,
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
    pub async fn recover(&self) -> Result<usize, ApiError> {
        crate::runs::recover(&self.shared).await
    }

    /// Serves the API on `listener` until the task is dropped or the listener fails, after
    /// [`recover`](Server::recover)ing the runs a previous process left.
    ///
    /// ```no_run
    /// # async fn serve(server: agentstate_server::Server) -> std::io::Result<()> {
    /// let listener = tokio::net::TcpListener::bind("127.0.0.1:2024").await?;
    /// server.serve(listener).await
    /// # }
    /// ```
    pub async fn serve(self, listener: tokio::net::TcpListener) -> std::io::Result<()> {
        self.recover().await.map_err(std::io::Error::other)?;
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
        });
        self
    }

    /// Requires every request but `/ok` to carry `key` in its `x-api-key` header (401
    /// otherwise).
    #[must_use]
    pub fn api_key(mut self, key: impl Into<String>) -> Self {
        self.api_key = Some(Arc::from(key.into()));
        self
    }

    /// Answers browsers' cross-origin requests as `cors` says (for a UI on another origin).
    #[must_use]
    pub fn cors(mut self, cors: CorsLayer) -> Self {
        self.cors = Some(cors);
        self
    }

    /// The server.
    pub fn build(self) -> Server {
        let shared = Arc::new(Shared {
            records: self.records,
            assistants: self.assistants,
            runs: Arc::default(),
        });
        let mut router = api::routes().with_state(Arc::clone(&shared));
        if let Some(key) = self.api_key {
            router = router.layer(axum::middleware::from_fn_with_state(key, check_key));
        }
        if let Some(cors) = self.cors {
            router = router.layer(cors);
        }
        Server { router, shared }
    }
}

/// Refuses a request without the API key (but `/ok`, a health check).
async fn check_key(State(key): State<Arc<str>>, request: Request, next: Next) -> Response {
    let given = request.headers().get("x-api-key");
    if request.uri().path() == "/ok" || given == HeaderValue::from_str(&key).ok().as_ref() {
        return next.run(request).await;
    }
    let what = if given.is_some() { "a wrong" } else { "no" };
    ApiError::new(
        StatusCode::UNAUTHORIZED,
        format!(
            "the request to `{}` carries {what} API key in its `x-api-key` header",
            request.uri().path()
        ),
    )
    .into_response()
}
