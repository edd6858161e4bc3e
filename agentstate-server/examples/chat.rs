//! A web chat on the help desk graph (`examples/support/desk.rs`: triage, a streamed answer,
//! a person's approval): the useStream page of `examples/web` (React, `@langchain/langgraph-sdk`'s
//! `useStream`) served beside the LangGraph Agent Server API on one origin, on SQLite
//! (`agentstate-chat.db` in the working directory, or the store URL in `AGENTSTATE_DATABASE`),
//! at http://127.0.0.1:2024 (a free port if that one is taken, or the address given as its
//! argument). It also serves the `concierge` graph (`examples/support/concierge.rs`) at
//! `/agui/concierge` for the CopilotKit page, and answers cross-origin requests (CORS) from any
//! origin.
//!
//! The page is a bundle built once, with node and npm, in `examples/web`:
//!
//! ```text
//! (cd agentstate-server/examples/web && npm ci && npm run build)
//! cargo run -p agentstate-server --example chat
//! ```
//!
//! then open the printed URL: send a message (the answer streams in), approve or reject it,
//! stop a run and continue it, regenerate an answer, reload (the conversation comes back; a run
//! in progress is rejoined). The page has a branch switcher for regenerated answers, which shows
//! once the server keeps the branch a run from a checkpoint leaves (today it removes it).
//! Without the bundle it serves the API and prints how to build the page.
//! `tests/browser.rs` clicks through all of it in headless Chromium.
//!
//! CopilotKit's chat on the same server: `node copilotkit.mjs http://127.0.0.1:2024` in
//! `examples/web` serves CopilotKit's runtime (its agent `concierge` an `HttpAgent` on
//! `/agui/concierge`) and its page, and prints its URL.

#[path = "support/concierge.rs"]
mod concierge;
#[path = "support/desk.rs"]
mod desk;
#[path = "support/page.rs"]
mod page;

use agentstate_server::Server;
use agentstate_store::AnyStore;
use axum::serve::ListenerExt;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let url = std::env::var("AGENTSTATE_DATABASE")
        .unwrap_or_else(|_| "sqlite:agentstate-chat.db".to_owned());
    let store = AnyStore::open(&url).await?;
    let server = Server::builder(&store)
        .assistant("desk", desk::graph()?.durable(&store))
        .assistant("concierge", concierge::graph()?.durable(&store))
        .cors_permissive()
        .build();
    let dist = page::dist();
    let app = page::routes(dist.clone()).merge(server.router());
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
    if page::built(&dist) {
        println!("the help desk chat (useStream): http://{at}");
    } else {
        println!(
            "the chat page is not built: run `npm ci && npm run build` in {} (serving the API only)",
            dist.parent().unwrap_or(&dist).display()
        );
    }
    println!(
        "  LangGraph API: http://{at}   AG-UI: http://{at}/agui/desk, http://{at}/agui/concierge"
    );
    // The router is mounted, not `Server::serve`d: end the runs a stopped process left first.
    server.recover().await?;
    // As `Server::serve` does: each streamed event is sent at once (no Nagle delay).
    let listener = listener.tap_io(|tcp| {
        let _ = tcp.set_nodelay(true);
    });
    axum::serve(listener, app).await?;
    Ok(())
}
