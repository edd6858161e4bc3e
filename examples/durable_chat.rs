//! A chat that survives restarts: its turns are kept in `./agentstate.db` as a journal of
//! updates. Run `cargo run --example durable_chat` twice: the second run resumes the first's
//! turns and adds its own. Inspect the file with `sqlite3 agentstate.db 'select * from
//! agentstate_entries'`.

use agentstate::message::{Message, Role};
use agentstate::state::{AgentState, AgentStateUpdate};
use agentstate_store::{SqliteStore, StepMeta, StoreError};

/// The "model": answers with the number of messages it has seen.
fn reply(state: &AgentState, question: &str) -> String {
    format!(
        "You said {question:?}; this chat now holds {} message(s).",
        state.context.len()
    )
}

async fn chat() -> Result<(), StoreError> {
    let store = SqliteStore::open("agentstate.db")?;
    let mut thread = store
        .thread_or_create("durable-chat", AgentState::default)
        .await?;

    if thread.version() == 0 {
        println!("A new chat (thread `durable-chat` in ./agentstate.db).");
    } else {
        let turns = thread.state().context.len() / 2;
        println!(
            "Resumed {turns} turns at version {} from ./agentstate.db:",
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
        let user =
            AgentStateUpdate::default().context(vec![Message::text_message(&question, Role::User)]);
        thread
            .merge(user, StepMeta::node("user").run_id(&run))
            .await?;

        let answer = reply(thread.state(), &question);
        let assistant = AgentStateUpdate::default()
            .context(vec![Message::text_message(&answer, Role::Assistant)]);
        let version = thread
            .merge(assistant, StepMeta::node("assistant").run_id(&run))
            .await?;
        println!("New turn {n} (now at version {version}): {question} -> {answer}");
    }

    let history = store.history("durable-chat", 0, 1_000).await?;
    let bytes: u64 = history.iter().map(|e| e.bytes).sum();
    println!(
        "The journal holds {} entries ({bytes} bytes of updates); run again to continue.",
        history.len()
    );
    Ok(())
}

fn main() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("a tokio runtime");
    if let Err(err) = runtime.block_on(chat()) {
        eprintln!("error ({}): {err}", err.category());
        std::process::exit(1);
    }
}
