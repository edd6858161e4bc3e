//! Serves the help desk graph (`examples/support/desk.rs`: triage, a model's streamed answer,
//! an approval interrupt) over the LangGraph Agent Server API and AG-UI, on SQLite
//! (`agentstate-server.db` in the working directory, or the store URL in `AGENTSTATE_DATABASE`:
//! `postgres://...` with the feature `postgres`), at http://127.0.0.1:2024 (`langgraph dev`'s
//! port; a free port if that one is taken, or the address given as its argument). It prints the
//! URL to point a client at. On PostgreSQL, `AGENTSTATE_WORKERS=n` queues the runs in the
//! database for `n` workers in this process and those of the `worker` example (0: this process
//! only serves).
//!
//! The model is a scripted echo, unless a provider's key is set: `OPENAI_API_KEY`,
//! `ANTHROPIC_API_KEY` or `GEMINI_API_KEY` (`MODEL` names the model).
//!
//! ```text
//! cargo run -p agentstate-server --example serve
//! cargo run -p agentstate-server --example serve -- 127.0.0.1:8123
//! ```
//!
//! Then, with the Python SDK (`pip install langgraph-sdk`):
//!
//! ```text
//! from langgraph_sdk import get_sync_client
//! client = get_sync_client(url="http://127.0.0.1:2024")
//! thread = client.threads.create()
//! ask = {"messages": [{"role": "user", "content": "Where is my order?"}]}
//! for part in client.runs.stream(thread["thread_id"], "desk", input=ask, stream_mode="updates"):
//!     print(part.event, part.data)
//! print(client.runs.wait(thread["thread_id"], "desk", command={"resume": True})["approved"])
//! ```

#[path = "support/desk.rs"]
mod desk;

use agentstate::model::{Anthropic, ChatModel, Gemini, OpenAiChat};
use agentstate_server::Server;
use agentstate_store::AnyStore;
use std::sync::Arc;

/// A provider's model, if a key is set: the client, the model's name, and the provider's.
type Provider = (Arc<dyn ChatModel>, String, &'static str);

fn provider() -> Result<Option<Provider>, Box<dyn std::error::Error>> {
    let var = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
    let model = |default: &str| var("MODEL").unwrap_or_else(|| default.to_owned());
    Ok(if let Some(key) = var("OPENAI_API_KEY") {
        let client = OpenAiChat::builder().api_key(key).build()?;
        Some((Arc::new(client), model("gpt-4.1-mini"), "OpenAI"))
    } else if let Some(key) = var("ANTHROPIC_API_KEY") {
        let client = Anthropic::builder().api_key(key).build()?;
        Some((Arc::new(client), model("claude-sonnet-4-5"), "Anthropic"))
    } else if let Some(key) = var("GEMINI_API_KEY") {
        let client = Gemini::builder().api_key(key).build()?;
        Some((Arc::new(client), model("gemini-2.5-flash"), "Gemini"))
    } else {
        None
    })
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let url = std::env::var("AGENTSTATE_DATABASE")
        .unwrap_or_else(|_| "sqlite:agentstate-server.db".to_owned());
    let store = AnyStore::open(&url).await?;
    let provider = provider()?;
    let model = match &provider {
        Some((_, name, by)) => format!("{by}'s {name}"),
        None => "a scripted model (set OPENAI_API_KEY, ANTHROPIC_API_KEY or GEMINI_API_KEY for a real one)".to_owned(),
    };
    let graph = desk::graph_with(provider.map(|(client, name, _)| (client, name)))?;
    let mut server = Server::builder(&store)
        .assistant("desk", graph.durable(&store))
        .cors_permissive();
    if let Ok(workers) = std::env::var("AGENTSTATE_WORKERS") {
        server = server.workers(workers.parse()?);
    }
    let server = server.build();
    let listener = match std::env::args().nth(1) {
        Some(address) => tokio::net::TcpListener::bind(&address).await?,
        None => match tokio::net::TcpListener::bind("127.0.0.1:2024").await {
            Ok(listener) => listener,
            Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => {
                tokio::net::TcpListener::bind("127.0.0.1:0").await?
            }
            Err(e) => return Err(e.into()),
        },
    };
    let at = listener.local_addr()?;
    println!(
        "serving the help desk graph as assistant `desk`, on {}, answering with {model}",
        store.backend().name()
    );
    println!("  LangGraph API (JS and Python SDKs, useStream): http://{at}");
    println!("  AG-UI (HttpAgent, CopilotKit):                 http://{at}/agui/desk");
    println!("  API reference (OpenAPI: /openapi.json):        http://{at}/docs");
    server.serve(listener).await?;
    Ok(())
}
