//! Serves the help desk graph (`examples/support/desk.rs`: triage, a scripted model's streamed
//! answer, an approval interrupt) over the LangGraph Agent Server API, on SQLite
//! (`agentstate-server.db` in the working directory, or the store URL in `AGENTSTATE_DATABASE`:
//! `postgres://...` with the feature `postgres`), at http://127.0.0.1:2024 (or the address given
//! as its argument). On PostgreSQL, `AGENTSTATE_WORKERS=n` queues the runs in the database for
//! `n` workers in this process and those of the `worker` example (0: this process only serves).
//!
//! ```text
//! cargo run -p agentstate-server --example serve            # http://127.0.0.1:2024
//! cargo run -p agentstate-server --example serve -- 127.0.0.1:0
//! ```
//!
//! Then, with the JS SDK (`npm i @langchain/langgraph-sdk`):
//!
//! ```text
//! const client = new Client({ apiUrl: "http://127.0.0.1:2024" });
//! const thread = await client.threads.create();
//! for await (const part of client.runs.stream(thread.thread_id, "desk", {
//!   input: { messages: [{ role: "user", content: "Where is my order?" }] },
//!   streamMode: ["updates", "messages-tuple"],
//! })) console.log(part.event, part.data);
//! ```

#[path = "support/desk.rs"]
mod desk;

use agentstate_server::Server;
use agentstate_store::AnyStore;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let url = std::env::var("AGENTSTATE_DATABASE")
        .unwrap_or_else(|_| "sqlite:agentstate-server.db".to_owned());
    let store = AnyStore::open(&url).await?;
    let mut server = Server::builder(&store)
        .assistant("desk", desk::graph()?.durable(&store))
        .cors(tower_http::cors::CorsLayer::permissive());
    if let Ok(workers) = std::env::var("AGENTSTATE_WORKERS") {
        server = server.workers(workers.parse()?);
    }
    let server = server.build();
    let address = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:2024".to_owned());
    let listener = tokio::net::TcpListener::bind(&address).await?;
    println!(
        "serving the help desk graph (`desk`) on {} at http://{}",
        store.backend().name(),
        listener.local_addr()?
    );
    server.serve(listener).await?;
    Ok(())
}
