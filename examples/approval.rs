//! An agent that asks a person before it calls a tool: a refund. The run is durable, kept in
//! `./agentstate.db` (SQLite), so it can wait for the answer across processes and survive a
//! crash; it is streamed, each step, note, commit and question printed as it happens:
//!
//! ```sh
//! cargo run --example approval              # runs until it waits for a person's approval
//! cargo run --example approval -- approve   # (or `reject`) answers, and the run finishes
//! cargo run --example approval -- reset     # deletes the run, to start again
//! ```
//!
//! Kill it while it runs (`APPROVAL_SLOW_MS=10000` makes the refund step slow, after the refund
//! was paid) and run it again: it continues where it stopped, and the refund, recorded with
//! `Context::effect`, is not paid twice: `./refunds.txt`, the "payment service", holds one
//! line per idempotency key. See `agentstate_graph::durable` for what a run stores.

use agentstate::AgentState;
use agentstate_graph::durable::{Answers, DurableError, DurableStream, RunStatus, META_KEY};
use agentstate_graph::{BoxError, CompileError, Context, Emitted, Event, Graph, END};
use agentstate_store::{HistoryQuery, SqliteStore, StoreError};
use futures_util::StreamExt;
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

/// The thread the run is kept in.
const THREAD: &str = "refund-1042";

#[derive(AgentState, Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
struct Refund {
    /// The customer's message.
    request: String,
    order: String,
    amount_cents: u64,
    /// The person's decision.
    approved: Option<bool>,
    /// The payment service's receipt.
    receipt: Option<String>,
    /// The agent's final answer to the customer.
    answer: Option<String>,
}

fn euros(cents: u64) -> String {
    format!("{}.{:02} EUR", cents / 100, cents % 100)
}

/// The "payment service": pays a refund once per idempotency key (a line in `refunds.txt`),
/// as a real one does with the key passed in its request.
fn pay_refund(key: &str, order: &str, cents: u64) -> std::io::Result<String> {
    let ledger = std::fs::read_to_string("refunds.txt").unwrap_or_default();
    let paid = ledger
        .lines()
        .position(|line| line.split('\t').next() == Some(key));
    let n = match paid {
        Some(n) => n,
        None => {
            let mut file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open("refunds.txt")?;
            writeln!(file, "{key}\torder {order}\t{}", euros(cents))?;
            ledger.lines().count()
        }
    };
    Ok(format!("R-{}", n + 1))
}

/// What a node says about what it does, printed by whoever streams the run (`follow`).
fn note(cx: &Context, text: String) {
    cx.custom("note", json!(text));
}

fn graph() -> Result<Graph<Refund, &'static str>, CompileError> {
    Graph::builder()
        // The "model": reads the request and wants to call the `refund` tool.
        .node("agent", |s: Arc<Refund>, cx: Context| async move {
            let (order, cents) = ("1042", 4999);
            note(&cx, format!("reads {:?}", s.request));
            note(
                &cx,
                format!("calls refund(order {order}, {})", euros(cents)),
            );
            Ok::<_, BoxError>(RefundUpdate::default().order(order).amount_cents(cents))
        })
        // Asks a person; the run suspends here until it is resumed with an answer.
        .node("approval", |s: Arc<Refund>, cx: Context| async move {
            let answer = cx.interrupt(json!({
                "tool": "refund",
                "order": s.order,
                "amount": euros(s.amount_cents),
            }))?;
            let approved = answer.as_bool() == Some(true);
            let decision = if approved { "approved" } else { "rejected" };
            note(&cx, format!("a person {decision} the refund"));
            Ok::<_, BoxError>(RefundUpdate::default().approved(approved))
        })
        // The tool call, run once: its result is journaled before the node goes on.
        .node("refund", |s: Arc<Refund>, cx: Context| async move {
            let receipt: String = cx
                .effect("refund", |key| {
                    note(&cx, format!("paying, idempotency key {key}"));
                    async move { pay_refund(&key, &s.order, s.amount_cents) }
                })
                .await?;
            note(&cx, format!("paid, receipt {receipt}"));
            if let Some(ms) = std::env::var("APPROVAL_SLOW_MS")
                .ok()
                .and_then(|v| v.parse().ok())
            {
                note(
                    &cx,
                    format!("slow: {ms} ms before the step ends; kill me now"),
                );
                tokio::time::sleep(Duration::from_millis(ms)).await;
            }
            Ok::<_, BoxError>(RefundUpdate::default().receipt(receipt))
        })
        // The "model's" answer, streamed word by word as a model streams its tokens.
        .node("reply", |s: Arc<Refund>, cx: Context| async move {
            let answer = match &s.receipt {
                Some(receipt) => format!(
                    "Your refund of {} for order {} is on its way (receipt {receipt}).",
                    euros(s.amount_cents),
                    s.order
                ),
                None => format!("Sorry, the refund for order {} was not approved.", s.order),
            };
            for word in answer.split_inclusive(' ') {
                cx.text_delta("answer", word);
            }
            Ok::<_, BoxError>(RefundUpdate::default().answer(answer))
        })
        .entry("agent")
        .edge("agent", "approval")
        .route_to("approval", ["refund", "reply"], |s: &Refund| {
            if s.approved == Some(true) {
                "refund"
            } else {
                "reply"
            }
            .into()
        })
        .edge("refund", "reply")
        .edge("reply", END)
        .build()
}

/// Streams a run to its end, printing each event as it comes: the steps, what the nodes say,
/// the answer as it is written, each commit, and how the run ended.
async fn follow(mut run: DurableStream<Refund, &'static str>) -> Result<(), DurableError<Refund>> {
    let mut writing = false; // in the middle of a line of text deltas
    while let Some(event) = run.next().await {
        match event? {
            Event::NodeStarted { step, node } => println!("  step {step}: {node}"),
            Event::NodeFinished { .. } if writing => {
                println!();
                writing = false;
            }
            Event::Emitted { emitted, .. } => match *emitted {
                Emitted::Custom { value, .. } => {
                    println!("          {}", value.as_str().unwrap_or(""))
                }
                Emitted::TextDelta { delta, .. } => {
                    if !writing {
                        print!("          ");
                        writing = true;
                    }
                    print!("{delta}");
                    std::io::stdout().flush().ok();
                }
                _ => {}
            },
            Event::StepCommitted { step, version } => {
                println!("  step {step} committed: thread `{THREAD}` at version {version}")
            }
            Event::RunSuspended { interrupts, .. } => {
                for asked in interrupts {
                    println!(
                        "Waiting at step {} for node `{}` (interrupt `{}`): {}",
                        asked.step, asked.node, asked.id, asked.payload
                    );
                }
                println!("Answer with `cargo run --example approval -- approve` (or `-- reject`).");
            }
            Event::RunFinished { state } => {
                println!("Finished.");
                println!("Answer: {}", state.answer.as_deref().unwrap_or("(none)"));
            }
            _ => {}
        }
    }
    Ok(())
}

async fn main_async(
    graph: Graph<Refund, &'static str>,
    command: Option<&str>,
) -> Result<(), DurableError<Refund>> {
    let store = SqliteStore::open("agentstate.db")?;
    if command == Some("reset") {
        store.delete(THREAD).await?;
        println!("Deleted thread `{THREAD}`.");
        return Ok(());
    }
    // A worker that dies holds the thread for at most the lease's ttl.
    let durable = graph.durable(&store).lease_ttl(Duration::from_secs(3));

    // What to do, from where the thread's run stands.
    let answers = match (store.info(THREAD).await, command) {
        (Err(StoreError::ThreadNotFound { .. }), None) => {
            println!("A new run on thread `{THREAD}` in ./agentstate.db:");
            let request = "My order #1042 arrived broken. Can I get my money back?";
            let state = Refund {
                request: request.into(),
                ..Refund::default()
            };
            store.create(THREAD, state).await?;
            follow(durable.stream(THREAD, ())).await?;
            return journal(&store).await;
        }
        (Err(error), _) => return Err(error.into()),
        (Ok(_), _) => match (durable.status(THREAD).await?, command) {
            (RunStatus::Suspended { interrupts, .. }, Some(answer)) if !interrupts.is_empty() => {
                println!("Resuming thread `{THREAD}` with `{answer}`:");
                let approved = answer == "approve";
                interrupts.iter().fold(Answers::new(), |answers, asked| {
                    answers.answer(&asked.id, approved)
                })
            }
            (RunStatus::Running { step, next }, _) => {
                println!(
                    "Continuing thread `{THREAD}` after step {step} (next: {}):",
                    next.join(", ")
                );
                Answers::new()
            }
            (RunStatus::Idle { .. }, Some(_)) => {
                return Err(DurableError::State {
                    thread: THREAD.into(),
                    reason:
                        "its run finished, nothing waits for an answer (`-- reset` starts again)"
                            .into(),
                })
            }
            // Suspended and no answer given: the same question again. Idle: the outcome.
            _ => Answers::new(),
        },
    };
    // One run per thread: while another worker holds the thread's lease (a killed run's
    // lasts until it expires), wait.
    loop {
        match follow(durable.stream_resume(THREAD, answers.clone())).await {
            Err(DurableError::Store(StoreError::Leased {
                owner,
                expires_in_ms,
                ..
            })) => {
                println!(
                    "  (worker `{owner}` holds the thread for {expires_in_ms} ms more; waiting)"
                );
                tokio::time::sleep(Duration::from_millis(expires_in_ms + 50)).await;
            }
            result => break result?,
        }
    }
    journal(&store).await
}

/// Prints the thread's journal: what the run stored.
async fn journal(store: &SqliteStore) -> Result<(), DurableError<Refund>> {
    let history = store.history(THREAD, HistoryQuery::oldest(100)).await?;
    let entries: Vec<String> = history
        .iter()
        .map(|e| {
            let kind = e
                .extra
                .get(META_KEY)
                .and_then(|m| m["entry"].as_str())
                .unwrap_or("state");
            match &e.node {
                Some(node) if kind == "step" => format!("{}:step {node}", e.seq),
                _ => format!("{}:{kind}", e.seq),
            }
        })
        .collect();
    println!("Journal of `{THREAD}`: {}", entries.join(", "));
    Ok(())
}

fn main() {
    let command = std::env::args().nth(1);
    if let Some(other) = command
        .as_deref()
        .filter(|c| !["approve", "reject", "reset"].contains(c))
    {
        eprintln!("unknown command `{other}`: expected `approve`, `reject`, `reset` or nothing");
        std::process::exit(2);
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let graph = match graph() {
        Ok(graph) => graph,
        Err(err) => {
            eprintln!("error ({}): {err}", err.category());
            std::process::exit(1);
        }
    };
    if let Err(err) = runtime.block_on(main_async(graph, command.as_deref())) {
        eprintln!("error ({}): {err}", err.category());
        std::process::exit(1);
    }
}
