//! Serves the benchmark's three-node graph (`three`: `a` → `b` → `c`, each appending its name to
//! `log`) over the LangGraph Agent Server API, for `benches/langgraph/compare.py`, which drives
//! it and LangGraph's `langgraph dev` with the same client. On the store `AGENTSTATE_DATABASE`
//! names (default: `sqlite:agentstate-bench.db` in the working directory; `postgres://...`
//! with the feature `postgres`), at the address given as its argument (default
//! 127.0.0.1:8124).
//!
//! ```text
//! cargo run --release -p agentstate-server --example three -- 127.0.0.1:8124
//! ```

#[path = "support/three.rs"]
mod three;

use agentstate_server::Server;
use agentstate_store::AnyStore;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let url = std::env::var("AGENTSTATE_DATABASE")
        .unwrap_or_else(|_| "sqlite:agentstate-bench.db".to_owned());
    let store = AnyStore::open(&url).await?;
    let server = Server::builder(&store)
        .assistant("three", three::graph()?.durable(&store))
        .build();
    let address = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:8124".to_owned());
    let listener = tokio::net::TcpListener::bind(&address).await?;
    println!(
        "serving `three` on {} at http://{}",
        store.backend().name(),
        listener.local_addr()?
    );
    server.serve(listener).await?;
    Ok(())
}
