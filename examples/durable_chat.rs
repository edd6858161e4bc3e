//! A chat that survives restarts: its turns are kept in `./agentstate.db` as a journal of
//! updates. Run `cargo run --example durable_chat` twice: the second run resumes the first's
//! turns and adds its own. Inspect the file with `sqlite3 agentstate.db 'select * from
//! agentstate_entries'`. Set `AGENTSTATE_DATABASE` to use another store (see `AnyStore::open`):
//! `sqlite::memory:`, or `postgres://postgres@127.0.0.1:5432/test` with `--features
//! agentstate-store/postgres`.

use agentstate::message::{Message, Role};
use agentstate::state::AgentState;
use agentstate_store::{AnyStore, HistoryQuery, StepMeta, StoreError};

/// The "model": answers with the number of messages it has seen, after "thinking".
async fn reply(seen: usize, question: String) -> Result<Message, StoreError> {
    tokio::task::yield_now().await;
    let answer = format!("You said {question:?}; this chat now holds {seen} message(s).");
    Ok(Message::text_message(&answer, Role::Assistant))
}

async fn chat() -> Result<(), StoreError> {
    let url = std::env::var("AGENTSTATE_DATABASE").unwrap_or("sqlite:agentstate.db".into());
    let store = AnyStore::open(&url).await?;
    // Where the chat is kept (a PostgreSQL URL may hold a password: not printed).
    let place = match url.strip_prefix("sqlite:") {
        Some(path) => path.to_owned(),
        None => store.backend().name().to_owned(),
    };
    let mut thread = store
        .thread_or_create("durable-chat", AgentState::default)
        .await?;

    if thread.version() == 0 {
        println!("A new chat (thread `durable-chat` in {place}).");
    } else {
        let turns = thread.state().context.len() / 2;
        println!(
            "Resumed {turns} turns at version {} from {place}:",
            thread.version()
        );
        for message in &thread.state().context {
            println!("  {:>9}: {}", format!("{:?}", message.role), message.text());
        }
    }

    let run = std::process::id().to_string();
    for _ in 0..2 {
        let n = thread.state().context.len() / 2 + 1;
        let question = format!("question {n}");
        let user = Message::text_message(&question, Role::User);
        thread
            .merge(user, StepMeta::node("user").run_id(&run))
            .await?;

        // The model runs on the latest state; if another writer got in first, it runs again.
        let version = thread
            .merge_with(StepMeta::node("assistant").run_id(&run), |state| {
                let (seen, question) = (state.context.len(), question.clone());
                async move { reply(seen, question).await }
            })
            .await?;
        let answer = thread.state().context.last().map(|m| m.text());
        println!(
            "New turn {n} (now at version {version}): {question} -> {}",
            answer.unwrap_or_default()
        );
    }

    let history = store
        .history("durable-chat", HistoryQuery::oldest(1_000))
        .await?;
    let bytes: u64 = history.iter().map(|e| e.bytes).sum();
    println!(
        "The journal holds {} entries ({bytes} bytes of updates); run again to continue.",
        history.len()
    );
    Ok(())
}

fn main() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    if let Err(err) = runtime.block_on(chat()) {
        eprintln!("error ({}): {err}", err.category());
        std::process::exit(1);
    }
}
