//! A worker-only process: four workers that claim the runs any server on the PostgreSQL database
//! queued (the `serve` example with `AGENTSTATE_WORKERS`), carry them out with the help desk
//! graph, and hand back what is unfinished when stopped (Ctrl-C). Needs the feature `postgres`.
//!
//! ```text
//! AGENTSTATE_DATABASE=postgres://postgres@127.0.0.1:5432/test AGENTSTATE_WORKERS=0 \
//!   cargo run -p agentstate-server --features postgres --example serve -- 127.0.0.1:0
//! AGENTSTATE_DATABASE=postgres://postgres@127.0.0.1:5432/test \
//!   cargo run -p agentstate-server --features postgres --example worker
//! ```

#[path = "support/desk.rs"]
mod desk;

use agentstate_server::Server;
use agentstate_store::AnyStore;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let url = std::env::var("AGENTSTATE_DATABASE")
        .map_err(|_| "set AGENTSTATE_DATABASE to a postgres:// URL: workers claim runs from PostgreSQL's run queue")?;
    let store = AnyStore::open(&url).await?;
    let server = Server::builder(&store)
        .assistant("desk", desk::graph()?.durable(&store))
        .workers(4)
        .build();
    let workers = server.start_workers()?;
    println!(
        "worker `{}` claims runs from {}; Ctrl-C stops it",
        workers.owner(),
        store.backend().name()
    );
    tokio::signal::ctrl_c().await?;
    workers.shutdown().await;
    Ok(())
}
