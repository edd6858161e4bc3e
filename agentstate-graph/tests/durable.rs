//! The durable core's behaviour (issue 22): a run's journal and status, resume after a run cut
//! short, interrupts, one run per thread, the durability modes, errors, `Send` steps.
//!
//! Every case runs on SQLite (in memory) and on PostgreSQL when `AGENTSTATE_POSTGRES_URL` is set
//! (under `CI` it must be; without it one line says the PostgreSQL cases were skipped), each on
//! a fresh thread id.

mod durable_support;

use agentstate_graph::durable::{
    Answers, Durability, DurableError, DurableGraph, Outcome, RunStatus,
};
use agentstate_graph::{BoxError, Context, Dispatch, Graph, Interrupt, Node, Target, END};
use agentstate_store::backend::Backend;
use agentstate_store::EntryInfo;
use agentstate_store::{Store, StoreError};
use durable_support::*;
use serde_json::{json, Value};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A node that counts its calls, opens `started`, waits for `release`, and logs its name.
fn waiting(calls: &Calls, name: &'static str, started: &Gate, release: &Gate) -> impl Node<Flow> {
    let (calls, started, release) = (calls.clone(), started.clone(), release.clone());
    move |_: Arc<Flow>, _: Context| {
        let (calls, started, release) = (calls.clone(), started.clone(), release.clone());
        async move {
            calls.hit(name);
            started.open();
            release.wait().await;
            Ok::<_, BoxError>(FlowUpdate::default().log(vec![name.to_owned()]))
        }
    }
}

/// A node that counts its calls, asks `payload`, and logs `name:answer`.
fn asking(calls: &Calls, name: &'static str, payload: Value) -> impl Node<Flow> {
    let calls = calls.clone();
    move |_: Arc<Flow>, cx: Context| {
        let (calls, payload) = (calls.clone(), payload.clone());
        async move {
            calls.hit(name);
            let answer = cx.interrupt(payload)?;
            let answer = answer.as_str().unwrap_or("?").to_owned();
            Ok::<_, BoxError>(FlowUpdate::default().log(vec![format!("{name}:{answer}")]))
        }
    }
}

/// A graph of one node, `name`.
fn single(name: &'static str, node: impl Node<Flow>) -> Graph<Flow> {
    Graph::builder()
        .node(name, node)
        .entry(name)
        .edge(name, END)
        .build()
        .unwrap()
}

fn names(items: &[&str]) -> Vec<String> {
    log(items)
}

/// The journal's entries of one kind (`"step"`, `"effect"`...).
fn of_kind<'a>(entries: &'a [EntryInfo], kind: &str) -> Vec<&'a EntryInfo> {
    entries
        .iter()
        .filter(|e| meta(e)["entry"] == kind)
        .collect()
}

fn finished<S: std::fmt::Debug + Clone>(outcome: Result<Outcome<S>, DurableError<S>>) -> (S, u64) {
    match outcome {
        Ok(Outcome::Finished { state, version }) => {
            (std::sync::Arc::unwrap_or_clone(state), version)
        }
        other => panic!("expected a finished run, got {other:?}"),
    }
}

fn suspended<S: std::fmt::Debug + Clone>(
    outcome: Result<Outcome<S>, DurableError<S>>,
) -> (S, Vec<Interrupt>) {
    match outcome {
        Ok(Outcome::Suspended {
            state, interrupts, ..
        }) => (std::sync::Arc::unwrap_or_clone(state), interrupts),
        other => panic!("expected a suspended run, got {other:?}"),
    }
}

fn refused<S: std::fmt::Debug>(
    outcome: Result<Outcome<S>, DurableError<S>>,
    category: &str,
) -> DurableError<S> {
    match outcome {
        Err(error) if error.category() == category => error,
        other => panic!("expected `{category}`, got {other:?}"),
    }
}

// ---------------------------------------------------------------------------------------------
// A run's journal and status.

async fn journal_and_status<B: Backend>(store: Store<B>, t: String) {
    let calls = Calls::default();
    let (started, release) = (Gate::new(), Gate::new());
    let graph = Graph::builder()
        .node("a", plain(&calls, "a"))
        .node("b", waiting(&calls, "b", &started, &release))
        .node("c", plain(&calls, "c"))
        .entry("a")
        .edge("a", "b")
        .edge("b", "c")
        .edge("c", END)
        .build()
        .unwrap();
    let durable = graph.durable(&store);
    store.create(&t, Flow::default()).await.unwrap();
    assert_eq!(
        durable.status(&t).await.unwrap(),
        RunStatus::Idle { step: 0 }
    );

    let watch = async {
        started.wait().await;
        let status = durable.status(&t).await.unwrap();
        release.open();
        status
    };
    let (outcome, during) = tokio::join!(durable.run(&t, ()), watch);
    assert_eq!(
        during,
        RunStatus::Running {
            step: 1,
            next: names(&["b"])
        }
    );
    let (state, version) = finished(outcome);
    assert_eq!(state.log, log(&["a", "b", "c"]));
    assert_eq!(
        durable.status(&t).await.unwrap(),
        RunStatus::Idle { step: 3 }
    );
    assert_eq!(store.load::<Flow>(&t).await.unwrap().state, state);

    // The input first, then one entry per step; versions contiguous; one run id.
    let entries = journal(&store, &t).await;
    assert_eq!(
        entries.iter().map(|e| e.seq).collect::<Vec<_>>(),
        (1..=version).collect::<Vec<_>>()
    );
    assert_eq!(version, 4, "{entries:#?}");
    let run_id = entries[0].run_id.clone().expect("the input has the run id");
    assert!(entries.iter().all(|e| e.run_id.as_deref() == Some(&run_id)));
    let input = meta(&entries[0]);
    assert_eq!(input["entry"], "input");
    assert_eq!(input["step"], 0);
    assert_eq!(input["next"], json!(["a"]));
    for (entry, (step, node, next)) in entries[1..].iter().zip([
        (1, "a", json!(["b"])),
        (2, "b", json!(["c"])),
        (3, "c", json!([])),
    ]) {
        let m = meta(entry);
        assert_eq!(m["entry"], "step", "{entry:?}");
        assert_eq!(m["step"], step, "{entry:?}");
        assert_eq!(m["nodes"], json!([node]), "{entry:?}");
        assert_eq!(m["next"], next, "{entry:?}");
        assert_eq!(entry.node.as_deref(), Some(node));
    }

    // A second run on the thread: its input entry and its own run id.
    let (state, version) = finished(
        durable
            .run(&t, FlowUpdate::default().log(vec!["hi".to_owned()]))
            .await,
    );
    assert_eq!(state.log, log(&["a", "b", "c", "hi", "a", "b", "c"]));
    assert_eq!(version, 8);
    let entries = journal(&store, &t).await;
    assert_eq!(meta(&entries[4])["entry"], "input");
    let second = entries[4].run_id.clone().unwrap();
    assert_ne!(second, run_id);
    assert!(entries[4..]
        .iter()
        .all(|e| e.run_id.as_deref() == Some(&second)));
    assert_eq!(calls.of("a"), 2);
}

// ---------------------------------------------------------------------------------------------
// Resume after a run cut short.

async fn resume_after_a_cut<B: Backend>(store: Store<B>, t: String) {
    let calls = Calls::default();
    let charged = Arc::new(AtomicUsize::new(0));
    let started = Gate::new();
    let pay = {
        let (calls, charged, started) = (calls.clone(), Arc::clone(&charged), started.clone());
        move |_: Arc<Flow>, cx: Context| {
            let (calls, charged, started) = (calls.clone(), Arc::clone(&charged), started.clone());
            async move {
                let call = calls.hit("pay");
                let receipt: String = cx
                    .effect("charge", |key| async move {
                        let n = charged.fetch_add(1, Ordering::SeqCst) + 1;
                        Ok::<_, std::io::Error>(format!("receipt-{n} ({key})"))
                    })
                    .await?;
                if call == 1 {
                    started.open();
                    std::future::pending::<()>().await;
                }
                Ok::<_, BoxError>(FlowUpdate::default().log(vec![receipt]))
            }
        }
    };
    let graph = Graph::builder()
        .node("a", plain(&calls, "a"))
        .node("pay", pay)
        .node("c", plain(&calls, "c"))
        .entry("a")
        .edge("a", "pay")
        .edge("pay", "c")
        .edge("c", END)
        .build()
        .unwrap();
    let durable = graph.durable(&store);
    tokio::select! {
        outcome = durable.start(&t, Flow::default()) => panic!("the run was to be cut short: {outcome:?}"),
        () = started.wait() => {}
    }
    // Cut short in step 2: step 1 committed, the effect journaled.
    assert_eq!((calls.of("a"), calls.of("pay"), calls.of("c")), (1, 1, 0));
    assert_eq!(
        durable.status(&t).await.unwrap(),
        RunStatus::Running {
            step: 1,
            next: names(&["pay"])
        }
    );
    let entries = journal(&store, &t).await;
    let effects = of_kind(&entries, "effect");
    assert_eq!(effects.len(), 1, "{entries:#?}");
    assert_eq!(meta(effects[0])["name"], "charge");
    let recorded = meta(effects[0])["value"].as_str().unwrap().to_owned();
    assert!(recorded.starts_with("receipt-1 ("), "{recorded}");

    // The same worker comes back: step 1 is not run again, step 2 is, its effect is not.
    let (state, _) = finished(durable.resume(&t).await);
    assert_eq!(state.log, vec!["a".to_owned(), recorded, "c".to_owned()]);
    assert_eq!((calls.of("a"), calls.of("pay"), calls.of("c")), (1, 2, 1));
    assert_eq!(charged.load(Ordering::SeqCst), 1);
    let entries = journal(&store, &t).await;
    let steps: Vec<_> = of_kind(&entries, "step")
        .iter()
        .map(|e| meta(e)["step"].as_u64().unwrap())
        .collect();
    assert_eq!(steps, [1, 2, 3], "each step committed once: {entries:#?}");
    assert_eq!(of_kind(&entries, "effect").len(), 1);
    let seqs: Vec<u64> = entries.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, (1..=entries.len() as u64).collect::<Vec<_>>());
    // Nothing left to resume: the finished state.
    let (again, _) = finished(durable.resume(&t).await);
    assert_eq!(again, state);
    assert_eq!(calls.of("pay"), 2);
}

// ---------------------------------------------------------------------------------------------
// Interrupts.

async fn one_interrupt<B: Backend>(store: Store<B>, t: String) {
    let calls = Calls::default();
    let graph = Graph::builder()
        .node("ask", asking(&calls, "ask", json!({"question": "ok?"})))
        .node("after", plain(&calls, "after"))
        .entry("ask")
        .edge("ask", "after")
        .edge("after", END)
        .build()
        .unwrap();
    let durable = graph.durable(&store);
    let (state, interrupts) = suspended(durable.start_as(&t, "run-1", Flow::default()).await);
    assert_eq!(state.log, Vec::<String>::new());
    assert_eq!(
        interrupts,
        [Interrupt {
            id: "ask:1.0:0@run-1".into(),
            node: "ask".into(),
            step_node: "ask".into(),
            step: 1,
            payload: json!({"question": "ok?"}),
            metadata: Default::default(),
        }]
    );
    assert_eq!(
        durable.status(&t).await.unwrap(),
        RunStatus::Suspended {
            step: 1,
            interrupts: interrupts.clone()
        }
    );
    assert_eq!(
        meta(journal(&store, &t).await.last().unwrap())["entry"],
        "suspend"
    );
    // A new run while this one waits is refused; a resume without answers runs nothing.
    refused(durable.run(&t, ()).await, "run_state_invalid");
    let (_, again) = suspended(durable.resume(&t).await);
    assert_eq!(again, interrupts);
    assert_eq!((calls.of("ask"), calls.of("after")), (1, 0));

    // Another worker answers at once: the suspended run released the thread.
    let answers = Answers::new().answer(&interrupts[0].id, "yes");
    let other = graph.durable(&store).worker("another");
    let (state, _) = finished(other.resume_with(&t, answers).await);
    assert_eq!(state.log, log(&["ask:yes", "after"]));
    assert_eq!((calls.of("ask"), calls.of("after")), (2, 1));
    let entries = journal(&store, &t).await;
    let answered = of_kind(&entries, "answers");
    assert_eq!(answered.len(), 1);
    assert_eq!(
        meta(answered[0])["answers"],
        json!({"ask:1.0:0@run-1": "yes"})
    );
    assert_eq!(
        durable.status(&t).await.unwrap(),
        RunStatus::Idle { step: 2 }
    );

    // Answers to a run that is not suspended.
    let answers = Answers::new().answer("ask:1.0:0@run-1", "again");
    let error = refused(durable.resume_with(&t, answers).await, "run_state_invalid");
    assert!(error.to_string().contains(&t), "{error}");
    assert_eq!(calls.of("ask"), 2);
}

/// `fan` -> (`p` asks, `q` asks, `r`) -> `join`.
fn parallel_askers(calls: &Calls) -> Graph<Flow> {
    Graph::builder()
        .node("fan", plain(calls, "fan"))
        .node("p", asking(calls, "p", json!("p?")))
        .node("q", asking(calls, "q", json!("q?")))
        .node("r", plain(calls, "r"))
        .node("join", plain(calls, "join"))
        .entry("fan")
        .edges("fan", ["p", "q", "r"])
        .edge("p", "join")
        .edge("q", "join")
        .edge("r", "join")
        .edge("join", END)
        .build()
        .unwrap()
}

fn parallel_interrupts() -> Vec<Interrupt> {
    vec![
        Interrupt {
            id: "p:2.0:0@run-1".into(),
            node: "p".into(),
            step_node: "p".into(),
            step: 2,
            payload: json!("p?"),
            metadata: Default::default(),
        },
        Interrupt {
            id: "q:2.1:0@run-1".into(),
            node: "q".into(),
            step_node: "q".into(),
            step: 2,
            payload: json!("q?"),
            metadata: Default::default(),
        },
    ]
}

async fn parallel_interrupts_one_resume<B: Backend>(store: Store<B>, t: String) {
    let calls = Calls::default();
    let durable = parallel_askers(&calls).durable(&store);
    let (state, interrupts) = suspended(durable.start_as(&t, "run-1", Flow::default()).await);
    assert_eq!(state.log, log(&["fan"]));
    assert_eq!(interrupts, parallel_interrupts());
    assert_eq!(
        (
            calls.of("p"),
            calls.of("q"),
            calls.of("r"),
            calls.of("join")
        ),
        (1, 1, 1, 0)
    );
    let answers = Answers::new()
        .answer("q:2.1:0@run-1", "no")
        .answer("p:2.0:0@run-1", "yes");
    let (state, _) = finished(durable.resume_with(&t, answers).await);
    assert_eq!(state.log, log(&["fan", "p:yes", "q:no", "r", "join"]));
    assert_eq!(
        (
            calls.of("p"),
            calls.of("q"),
            calls.of("r"),
            calls.of("join")
        ),
        (2, 2, 1, 1)
    );
}

async fn parallel_interrupts_two_resumes<B: Backend>(store: Store<B>, t: String) {
    let calls = Calls::default();
    let durable = parallel_askers(&calls).durable(&store);
    let (_, interrupts) = suspended(durable.start_as(&t, "run-1", Flow::default()).await);
    assert_eq!(interrupts, parallel_interrupts());

    // The first answer: `p` finishes, `q` asks again; `r` is not run again.
    let (state, left) = suspended(
        durable
            .resume_with(&t, Answers::new().answer("p:2.0:0@run-1", "yes"))
            .await,
    );
    assert_eq!(state.log, log(&["fan"]));
    assert_eq!(left, parallel_interrupts()[1..]);
    assert_eq!(
        durable.status(&t).await.unwrap(),
        RunStatus::Suspended {
            step: 2,
            interrupts: left.clone()
        }
    );
    assert_eq!((calls.of("p"), calls.of("q"), calls.of("r")), (2, 2, 1));

    // `p` was answered: answering it again is refused, and nothing runs.
    let error = refused(
        durable
            .resume_with(&t, Answers::new().answer("p:2.0:0@run-1", "again"))
            .await,
        "interrupt_answered",
    );
    assert!(error.to_string().contains("p:2.0:0@run-1"), "{error}");
    assert!(error.to_string().contains(&t), "{error}");
    assert_eq!((calls.of("p"), calls.of("q"), calls.of("r")), (2, 2, 1));

    // The second: `q` finishes; `p` and `r` are not run again.
    let (state, _) = finished(
        durable
            .resume_with(&t, Answers::new().answer("q:2.1:0@run-1", "no"))
            .await,
    );
    assert_eq!(state.log, log(&["fan", "p:yes", "q:no", "r", "join"]));
    assert_eq!(
        (
            calls.of("p"),
            calls.of("q"),
            calls.of("r"),
            calls.of("join")
        ),
        (2, 3, 1, 1)
    );
    let entries = journal(&store, &t).await;
    let steps: Vec<_> = of_kind(&entries, "step")
        .iter()
        .map(|e| meta(e)["step"].as_u64().unwrap())
        .collect();
    assert_eq!(steps, [1, 2, 3], "{entries:#?}");
}

async fn two_questions_in_a_row<B: Backend>(store: Store<B>, t: String) {
    let calls = Calls::default();
    let ask = {
        let calls = calls.clone();
        move |_: Arc<Flow>, cx: Context| {
            let calls = calls.clone();
            async move {
                calls.hit("ask");
                let first = cx.interrupt("first?")?;
                let second = cx.interrupt("second?")?;
                Ok::<_, BoxError>(FlowUpdate::default().log(vec![format!(
                    "{}+{}",
                    first.as_str().unwrap_or("?"),
                    second.as_str().unwrap_or("?")
                )]))
            }
        }
    };
    let graph = Graph::builder()
        .node("ask", ask)
        .entry("ask")
        .edge("ask", END)
        .build()
        .unwrap();
    let durable = graph.durable(&store);
    let (_, asked) = suspended(durable.start_as(&t, "run-1", Flow::default()).await);
    assert_eq!(asked.len(), 1);
    assert_eq!(
        (asked[0].id.as_str(), &asked[0].payload),
        ("ask:1.0:0@run-1", &json!("first?"))
    );
    let (_, asked) = suspended(
        durable
            .resume_with(&t, Answers::new().answer("ask:1.0:0@run-1", "x"))
            .await,
    );
    assert_eq!(asked.len(), 1);
    assert_eq!(
        (asked[0].id.as_str(), &asked[0].payload),
        ("ask:1.0:1@run-1", &json!("second?"))
    );
    refused(
        durable
            .resume_with(&t, Answers::new().answer("ask:1.0:0@run-1", "x again"))
            .await,
        "interrupt_answered",
    );
    assert_eq!(calls.of("ask"), 2);
    let (state, _) = finished(
        durable
            .resume_with(&t, Answers::new().answer("ask:1.0:1@run-1", "y"))
            .await,
    );
    assert_eq!(state.log, log(&["x+y"]));
    assert_eq!(calls.of("ask"), 3);
}

async fn unknown_interrupt<B: Backend>(store: Store<B>, t: String) {
    let calls = Calls::default();
    let graph = Graph::builder()
        .node("ask", asking(&calls, "ask", json!("ok?")))
        .entry("ask")
        .edge("ask", END)
        .build()
        .unwrap();
    let durable = graph.durable(&store);
    let (_, asked) = suspended(durable.start_as(&t, "run-1", Flow::default()).await);
    let before = journal(&store, &t).await.len();

    let error = refused(
        durable
            .resume_with(&t, Answers::new().answer("nope:1.0:0@run-1", "x"))
            .await,
        "interrupt_unknown",
    );
    let text = error.to_string();
    assert!(text.contains("nope:1.0:0@run-1"), "{text}");
    assert!(
        text.contains("ask:1.0:0@run-1"),
        "the pending ids are named: {text}"
    );
    assert!(text.contains(&t), "{text}");
    // With a valid answer beside it: refused as a whole, nothing recorded.
    refused(
        durable
            .resume_with(
                &t,
                Answers::new()
                    .answer("ask:1.0:0@run-1", "yes")
                    .answer("nope:1.0:0@run-1", "x"),
            )
            .await,
        "interrupt_unknown",
    );
    assert_eq!(calls.of("ask"), 1);
    assert_eq!(journal(&store, &t).await.len(), before);
    assert_eq!(
        durable.status(&t).await.unwrap(),
        RunStatus::Suspended {
            step: 1,
            interrupts: asked
        }
    );
    // The refusals released the thread: another worker answers at once.
    let other = graph.durable(&store).worker("another");
    let (state, _) = finished(
        other
            .resume_with(&t, Answers::new().answer("ask:1.0:0@run-1", "yes"))
            .await,
    );
    assert_eq!(state.log, log(&["ask:yes"]));
}

/// A node runs effects around its questions: each effect runs once, however often the node
/// runs again to get its answers.
async fn effects_are_not_repeated_across_interrupts<B: Backend>(store: Store<B>, t: String) {
    let calls = Calls::default();
    let charged = Arc::new(AtomicUsize::new(0));
    let pay = {
        let (calls, charged) = (calls.clone(), Arc::clone(&charged));
        move |_: Arc<Flow>, cx: Context| {
            let (calls, charged) = (calls.clone(), Arc::clone(&charged));
            async move {
                calls.hit("pay");
                let charge = |what: &'static str| {
                    let charged = Arc::clone(&charged);
                    move |_key: String| async move {
                        let n = charged.fetch_add(1, Ordering::SeqCst) + 1;
                        Ok::<_, std::io::Error>(format!("{what}-{n}"))
                    }
                };
                let quote: String = cx.effect("quote", charge("quote")).await?;
                let confirmed = cx.interrupt(json!({"quote": quote}))?;
                let receipt: String = cx.effect("charge", charge("receipt")).await?;
                let rating = cx.interrupt(json!({"receipt": receipt}))?;
                Ok::<_, BoxError>(
                    FlowUpdate::default()
                        .log(vec![format!("{quote} {confirmed} {receipt} {rating}")]),
                )
            }
        }
    };
    let graph = single("pay", pay);
    let durable = graph.durable(&store);
    let (_, asked) = suspended(durable.start(&t, Flow::default()).await);
    assert_eq!(asked[0].payload, json!({"quote": "quote-1"}));
    let (_, asked) = suspended(
        durable
            .resume_with(&t, Answers::new().answer(&asked[0].id, true))
            .await,
    );
    assert_eq!(asked[0].payload, json!({"receipt": "receipt-2"}));
    let (state, _) = finished(
        durable
            .resume_with(&t, Answers::new().answer(&asked[0].id, 5))
            .await,
    );
    assert_eq!(state.log, log(&["quote-1 true receipt-2 5"]));
    assert_eq!(charged.load(Ordering::SeqCst), 2, "each effect ran once");
    assert_eq!(calls.of("pay"), 3);
    let entries = journal(&store, &t).await;
    assert_eq!(of_kind(&entries, "effect").len(), 2);
}

/// A node that asks; the run is answered, then cut short while the node runs again (with its
/// answer).
async fn answered_then_cut<B: Backend>(
    store: &Store<B>,
    t: &str,
) -> (DurableGraph<Flow, &'static str, B>, Calls, Interrupt) {
    let calls = Calls::default();
    let started = Gate::new();
    let ask = {
        let (calls, started) = (calls.clone(), started.clone());
        move |_: Arc<Flow>, cx: Context| {
            let (calls, started) = (calls.clone(), started.clone());
            async move {
                let call = calls.hit("ask");
                let answer = cx.interrupt("ok?")?;
                if call == 2 {
                    started.open();
                    std::future::pending::<()>().await;
                }
                Ok::<_, BoxError>(
                    FlowUpdate::default()
                        .log(vec![format!("ask:{}", answer.as_str().unwrap_or("?"))]),
                )
            }
        }
    };
    let graph = Graph::builder()
        .node("ask", ask)
        .entry("ask")
        .edge("ask", END)
        .build()
        .unwrap();
    let durable = graph.durable(store);
    let (_, mut asked) = suspended(durable.start(t, Flow::default()).await);
    tokio::select! {
        outcome = durable.resume_with(t, Answers::new().answer(&asked[0].id, "yes")) => {
            panic!("the resumed run was to be cut short: {outcome:?}")
        }
        () = started.wait() => {}
    }
    assert_eq!(calls.of("ask"), 2);
    (durable, calls, asked.remove(0))
}

/// Answers are committed before the step runs again: a crash while it runs again leaves them
/// in place, and a plain `resume` runs the step with them (nothing is asked again).
async fn answers_survive_a_crash<B: Backend>(store: Store<B>, t: String) {
    let (durable, calls, asked) = answered_then_cut(&store, &t).await;
    refused(
        durable
            .resume_with(&t, Answers::new().answer(&asked.id, "no"))
            .await,
        "interrupt_answered",
    );
    let (state, _) = finished(durable.resume(&t).await);
    assert_eq!(state.log, log(&["ask:yes"]));
    assert_eq!(calls.of("ask"), 3);
}

/// The status of a run whose every question was answered, cut short while its step ran
/// again: it waits for nothing but a `resume`, so it is `Running` (not `Suspended` with no
/// interrupts, which would have a caller wait for answers no one can give).
async fn status_of_an_answered_run_cut_short<B: Backend>(store: Store<B>, t: String) {
    let (durable, _, _) = answered_then_cut(&store, &t).await;
    assert_eq!(
        durable.status(&t).await.unwrap(),
        RunStatus::Running {
            step: 0,
            next: names(&["ask"])
        }
    );
}

/// Parallel nodes' effects, recorded before a cut, are returned on resume to each node.
async fn parallel_effects_resume<B: Backend>(store: Store<B>, t: String) {
    let calls = Calls::default();
    let charged = Arc::new(AtomicUsize::new(0));
    let started = Gate::new();
    let branch = |name: &'static str, stuck: bool| {
        let (calls, charged, started) = (calls.clone(), Arc::clone(&charged), started.clone());
        move |_: Arc<Flow>, cx: Context| {
            let (calls, charged, started) = (calls.clone(), Arc::clone(&charged), started.clone());
            async move {
                let call = calls.hit(name);
                let receipt: String = cx
                    .effect("charge", |_key| async move {
                        let n = charged.fetch_add(1, Ordering::SeqCst);
                        Ok::<_, std::io::Error>(format!("{name}-{n}"))
                    })
                    .await?;
                if stuck && call == 1 {
                    // The other branch's effect is journaled first.
                    while calls.of("q-done") == 0 {
                        tokio::time::sleep(Duration::from_millis(5)).await;
                    }
                    started.open();
                    std::future::pending::<()>().await;
                }
                if !stuck {
                    calls.hit("q-done");
                }
                Ok::<_, BoxError>(FlowUpdate::default().log(vec![receipt]))
            }
        }
    };
    let graph = Graph::builder()
        .node("p", branch("p", true))
        .node("q", branch("q", false))
        .node("start", plain(&calls, "start"))
        .entry("start")
        .edges("start", ["p", "q"])
        .edge("p", END)
        .edge("q", END)
        .build()
        .unwrap();
    let durable = graph.durable(&store);
    tokio::select! {
        outcome = durable.start(&t, Flow::default()) => panic!("the run was to be cut short: {outcome:?}"),
        () = started.wait() => {}
    }
    let entries = journal(&store, &t).await;
    let mut keys: Vec<String> = of_kind(&entries, "effect")
        .iter()
        .map(|e| meta(e)["key"].as_str().unwrap().to_owned())
        .collect();
    keys.sort();
    assert_eq!(keys.len(), 2, "{entries:#?}");
    assert_ne!(keys[0], keys[1]);
    let first: Vec<Value> = of_kind(&entries, "effect")
        .iter()
        .map(|e| meta(e)["value"].clone())
        .collect();
    let (state, _) = finished(durable.resume(&t).await);
    assert_eq!(
        charged.load(Ordering::SeqCst),
        2,
        "each branch's effect ran once"
    );
    let mut got = state.log[1..].to_vec();
    got.sort();
    let mut want: Vec<String> = first
        .iter()
        .map(|v| v.as_str().unwrap().to_owned())
        .collect();
    want.sort();
    assert_eq!(got, want);
    assert!(
        state.log[1].starts_with("p-") && state.log[2].starts_with("q-"),
        "{:?}",
        state.log
    );
    // `q` finished before the cut: it runs again only if its update was not journaled yet.
    assert_eq!((calls.of("p"), calls.of("start")), (2, 1));
    assert!((1..=2).contains(&calls.of("q")));
}

/// A step with more effects than one page of the journal (the run's position is read newest
/// first, by pages): all of them are returned on resume.
async fn many_effects_in_one_step<B: Backend>(store: Store<B>, t: String) {
    const EFFECTS: usize = 150;
    let calls = Calls::default();
    let ran = Arc::new(AtomicUsize::new(0));
    let started = Gate::new();
    let busy = {
        let (calls, ran, started) = (calls.clone(), Arc::clone(&ran), started.clone());
        move |_: Arc<Flow>, cx: Context| {
            let (calls, ran, started) = (calls.clone(), Arc::clone(&ran), started.clone());
            async move {
                let call = calls.hit("busy");
                let mut total = 0;
                for i in 0..EFFECTS {
                    let ran = Arc::clone(&ran);
                    total += cx
                        .effect(&format!("e{i}"), |_| async move {
                            ran.fetch_add(1, Ordering::SeqCst);
                            Ok::<_, std::io::Error>(i)
                        })
                        .await?;
                }
                if call == 1 {
                    started.open();
                    std::future::pending::<()>().await;
                }
                Ok::<_, BoxError>(FlowUpdate::default().log(vec![total.to_string()]))
            }
        }
    };
    let graph = Graph::builder()
        .node("a", plain(&calls, "a"))
        .node("busy", busy)
        .entry("a")
        .edge("a", "busy")
        .edge("busy", END)
        .build()
        .unwrap();
    let durable = graph.durable(&store);
    tokio::select! {
        outcome = durable.start(&t, Flow::default()) => panic!("the run was to be cut short: {outcome:?}"),
        () = started.wait() => {}
    }
    assert_eq!(ran.load(Ordering::SeqCst), EFFECTS);
    assert_eq!(
        durable.status(&t).await.unwrap(),
        RunStatus::Running {
            step: 1,
            next: names(&["busy"])
        }
    );
    let (state, _) = finished(durable.resume(&t).await);
    assert_eq!(ran.load(Ordering::SeqCst), EFFECTS, "no effect ran again");
    let total: usize = (0..EFFECTS).sum();
    assert_eq!(state.log, vec!["a".to_owned(), total.to_string()]);
    assert_eq!((calls.of("a"), calls.of("busy")), (1, 2));
}

/// The recursion limit stops a durable run like any other: `recursion_limit`, the steps up to
/// the limit committed.
async fn the_recursion_limit<B: Backend>(store: Store<B>, t: String) {
    let calls = Calls::default();
    let graph = Graph::builder()
        .node("again", plain(&calls, "again"))
        .entry("again")
        .edge("again", "again")
        .build()
        .unwrap();
    let durable = graph.durable(&store).recursion_limit(3);
    let error = durable
        .start(&t, Flow::default())
        .await
        .expect_err("the loop never ends");
    assert_eq!(error.category(), "recursion_limit", "{error}");
    let entries = journal(&store, &t).await;
    let steps: Vec<_> = of_kind(&entries, "step")
        .iter()
        .map(|e| meta(e)["step"].as_u64().unwrap())
        .collect();
    assert_eq!(steps, [1, 2, 3], "{entries:#?}");
    assert_eq!(
        store.load::<Flow>(&t).await.unwrap().state.log,
        log(&["again", "again", "again"])
    );
    assert_eq!(calls.of("again"), 3);
}

/// In Exit mode a suspension commits the steps before it, and the run resumes from them.
async fn interrupts_in_exit_mode<B: Backend>(store: Store<B>, t: String) {
    let calls = Calls::default();
    let graph = Graph::builder()
        .node("a", plain(&calls, "a"))
        .node("ask", asking(&calls, "ask", json!("ok?")))
        .node("c", plain(&calls, "c"))
        .entry("a")
        .edge("a", "ask")
        .edge("ask", "c")
        .edge("c", END)
        .build()
        .unwrap();
    let durable = graph.durable(&store).durability(Durability::Exit);
    let (state, asked) = suspended(durable.start(&t, Flow::default()).await);
    assert_eq!(state.log, log(&["a"]));
    assert_eq!(store.load::<Flow>(&t).await.unwrap().state.log, log(&["a"]));
    let entries = journal(&store, &t).await;
    assert_eq!(of_kind(&entries, "step").len(), 1, "{entries:#?}");
    let (state, _) = finished(
        durable
            .resume_with(&t, Answers::new().answer(&asked[0].id, "yes"))
            .await,
    );
    assert_eq!(state.log, log(&["a", "ask:yes", "c"]));
    assert_eq!((calls.of("a"), calls.of("ask"), calls.of("c")), (1, 2, 1));
}

/// A resolved interrupt does not fire again: the node runs again and gets its answer; the same
/// node in a later step asks anew (a new id) only when its code asks again. Ids are unique to
/// their run: a later run's question at the same place has another id, stable across resumes.
async fn a_resolved_interrupt_never_fires_again<B: Backend>(store: Store<B>, t: String) {
    let calls = Calls::default();
    // Asks while fewer than two answers were logged, then logs "auto"; loops until three lines.
    let ask = {
        let calls = calls.clone();
        move |s: Arc<Flow>, cx: Context| {
            let calls = calls.clone();
            async move {
                calls.hit("ask");
                let line = if s.log.len() < 2 {
                    let answer = cx.interrupt(json!({"n": s.log.len()}))?;
                    answer.as_str().unwrap_or("?").to_owned()
                } else {
                    "auto".to_owned()
                };
                Ok::<_, BoxError>(FlowUpdate::default().log(vec![line]))
            }
        }
    };
    let graph = Graph::builder()
        .node("ask", ask)
        .entry("ask")
        .route_to(
            "ask",
            [Target::from("ask"), Target::from(END)],
            |s: &Flow| {
                if s.log.len() < 3 {
                    "ask".into()
                } else {
                    END.into()
                }
            },
        )
        .build()
        .unwrap();
    let durable = graph.durable(&store);
    let (_, asked) = suspended(durable.start_as(&t, "run-1", Flow::default()).await);
    assert_eq!(asked[0].id, "ask:1.0:0@run-1");
    let (state, asked) = suspended(
        durable
            .resume_with(&t, Answers::new().answer("ask:1.0:0@run-1", "one"))
            .await,
    );
    // Step 1 ran again with its answer and was committed; step 2 asks its own question.
    assert_eq!(state.log, log(&["one"]));
    assert_eq!(asked.len(), 1);
    assert_eq!(
        (asked[0].id.as_str(), asked[0].step, &asked[0].payload),
        ("ask:2.0:0@run-1", 2, &json!({"n": 1}))
    );
    assert_eq!(calls.of("ask"), 3);
    let (state, _) = finished(
        durable
            .resume_with(&t, Answers::new().answer("ask:2.0:0@run-1", "two"))
            .await,
    );
    assert_eq!(state.log, log(&["one", "two", "auto"]));
    assert_eq!(calls.of("ask"), 5);

    // A new run of a node that always asks, on another thread: its question of the first run
    // is answered; the next run asks anew (the old answer is not reused) and takes an answer.
    let calls = Calls::default();
    let graph = Graph::builder()
        .node("ask", asking(&calls, "ask", json!("ok?")))
        .entry("ask")
        .edge("ask", END)
        .build()
        .unwrap();
    let durable = graph.durable(&store);
    let other = format!("{t}-again");
    let (_, asked) = suspended(durable.start_as(&other, "run-1", Flow::default()).await);
    let first = asked[0].id.clone();
    finished(
        durable
            .resume_with(&other, Answers::new().answer(&first, "first"))
            .await,
    );
    let (_, asked) = suspended(durable.run_as(&other, "run-2", ()).await);
    assert_eq!(asked.len(), 1, "the new run asks anew");
    assert_eq!(calls.of("ask"), 3);
    // The same question at the same place, asked by another run: another id, which an answer
    // to the first run's cannot meet.
    assert_eq!(
        (first.as_str(), asked[0].id.as_str()),
        ("ask:1.0:0@run-1", "ask:1.0:0@run-2")
    );
    let stale = refused(
        durable
            .resume_with(&other, Answers::new().answer(&first, "stale"))
            .await,
        "interrupt_unknown",
    );
    assert_eq!(
        stale.to_string(),
        format!("thread `{other}` has no pending interrupt `ask:1.0:0@run-1` (pending: ask:1.0:0@run-2)")
    );
    // Stable across a resume of the same run, by another worker too.
    let (_, again) = suspended(durable.resume(&other).await);
    assert_eq!(again, asked);
    let another = graph.durable(&store).worker("another");
    let (_, again) = suspended(another.resume(&other).await);
    assert_eq!(again, asked);
    assert_eq!(calls.of("ask"), 3);
    let (state, _) = finished(
        durable
            .resume_with(&other, Answers::new().answer(&asked[0].id, "second"))
            .await,
    );
    assert_eq!(state.log, log(&["ask:first", "ask:second"]));
    assert_eq!(calls.of("ask"), 4);
}

// ---------------------------------------------------------------------------------------------
// One run per thread.

async fn one_run_per_thread<B: Backend>(store: Store<B>, t: String) {
    let calls = Calls::default();
    let (started, release) = (Gate::new(), Gate::new());
    let graph = Graph::builder()
        .node("a", waiting(&calls, "a", &started, &release))
        .entry("a")
        .edge("a", END)
        .build()
        .unwrap();
    let first = graph.durable(&store).worker("worker-1");
    let second = graph.durable(&store).worker("worker-2");
    store.create(&t, Flow::default()).await.unwrap();

    let contend = async {
        started.wait().await;
        let run = second.run(&t, ()).await;
        let resume = second.resume(&t).await;
        let answers = second
            .resume_with(&t, Answers::new().answer("a:1.0:0", "x"))
            .await;
        let during = calls.of("a");
        release.open();
        (run, resume, answers, during)
    };
    let (outcome, (run, resume, answers, during)) = tokio::join!(first.run(&t, ()), contend);
    for refusal in [run, resume, answers] {
        match refusal {
            Err(DurableError::Store(StoreError::Leased { owner, thread, .. })) => {
                assert_eq!((owner.as_str(), thread.as_str()), ("worker-1", t.as_str()))
            }
            other => panic!("expected `thread_leased`, got {other:?}"),
        }
    }
    assert_eq!(during, 1, "the refused worker ran no node");
    let (state, _) = finished(outcome);
    assert_eq!(state.log, log(&["a"]));

    // The first worker finished: the second runs the thread.
    let (state, _) = finished(second.run(&t, ()).await);
    assert_eq!(state.log, log(&["a", "a"]));
    assert_eq!(calls.of("a"), 2);
}

async fn a_dead_worker_is_taken_over<B: Backend>(store: Store<B>, t: String) {
    let calls = Calls::default();
    let started = Gate::new();
    let graph = Graph::builder()
        .node("a", plain(&calls, "a"))
        .node("b", stuck_once(&calls, "b", &started))
        .entry("a")
        .edge("a", "b")
        .edge("b", END)
        .build()
        .unwrap();
    let ttl = Duration::from_millis(1000);
    let dead = graph.durable(&store).worker("dead").lease_ttl(ttl);
    let next = graph.durable(&store).worker("next");
    tokio::select! {
        outcome = dead.start(&t, Flow::default()) => panic!("the run was to be cut short: {outcome:?}"),
        () = started.wait() => {}
    }
    // The dead worker's lease holds until its ttl is over.
    refused(next.resume(&t).await, "thread_leased");
    assert_eq!(calls.of("b"), 1);
    tokio::time::sleep(ttl + Duration::from_millis(300)).await;
    let (state, _) = finished(next.resume(&t).await);
    assert_eq!(state.log, log(&["a", "b"]));
    assert_eq!((calls.of("a"), calls.of("b")), (1, 2));

    // A lease taken by hand with a short ttl and never renewed.
    let lease = store
        .lease(&t, "ghost", Duration::from_millis(1000))
        .await
        .unwrap();
    let error = refused(next.run(&t, ()).await, "thread_leased");
    assert!(error.to_string().contains("ghost"), "{error}");
    assert_eq!(calls.of("a"), 1);
    drop(lease);
    tokio::time::sleep(Duration::from_millis(1300)).await;
    let (state, _) = finished(next.run(&t, ()).await);
    assert_eq!(state.log, log(&["a", "b", "a", "b"]));
}

// ---------------------------------------------------------------------------------------------
// Durability modes.

/// What a journal entry says, without its times and run ids.
fn shape(entries: &[EntryInfo]) -> Vec<(u64, Option<String>, Value)> {
    entries
        .iter()
        .map(|e| (e.seq, e.node.clone(), meta(e).clone()))
        .collect()
}

async fn durability_modes<B: Backend>(store: Store<B>, t: String) {
    let mut results = Vec::new();
    for (mode, name) in MODES {
        let thread = format!("{t}-{name}");
        let calls = Calls::default();
        // `c` notes the thread's version when it runs (the last step).
        let seen = Arc::new(Mutex::new(None));
        let observe = {
            let (store, thread, seen) = (store.clone(), thread.clone(), Arc::clone(&seen));
            move |_: Arc<Flow>, _: Context| {
                let (store, thread, seen) = (store.clone(), thread.clone(), Arc::clone(&seen));
                async move {
                    let version = store.info(&thread).await?.version;
                    *seen.lock().unwrap() = Some(version);
                    Ok::<_, BoxError>(FlowUpdate::default().log(vec!["c".to_owned()]))
                }
            }
        };
        let graph = Graph::builder()
            .node("a", plain(&calls, "a"))
            .node("p", plain(&calls, "p"))
            .node("q", plain(&calls, "q"))
            .node("c", observe)
            .entry("a")
            .edges("a", ["p", "q"])
            .edge("p", "c")
            .edge("q", "c")
            .edge("c", END)
            .build()
            .unwrap();
        let durable = graph.durable(&store).durability(mode);
        let (state, version) = finished(durable.start(&thread, Flow::default()).await);
        let seen = seen.lock().unwrap().expect("c ran");
        results.push((
            name,
            state,
            version,
            shape(&journal(&store, &thread).await),
            seen,
        ));
    }
    let (_, state, version, shape, _) = &results[0];
    assert_eq!(state.log, log(&["a", "p", "q", "c"]));
    // input, a, the parallel step's two finished tasks, the parallel step, c.
    assert_eq!(*version, 6);
    let tasks: Vec<(&Value, &Value)> = shape[2..4]
        .iter()
        .map(|(_, _, m)| (&m["entry"], &m["node"]))
        .collect();
    assert_eq!(
        tasks,
        [(&json!("task"), &json!("p")), (&json!("task"), &json!("q"))]
    );
    // The parallel step is one entry naming both nodes.
    let (_, node, parallel) = &shape[4];
    assert_eq!(node.as_deref(), Some("p,q"));
    assert_eq!(
        (
            &parallel["entry"],
            &parallel["step"],
            &parallel["nodes"],
            &parallel["next"]
        ),
        (&json!("step"), &json!(2), &json!(["p", "q"]), &json!(["c"]))
    );
    for (name, other_state, other_version, other_shape, _) in &results[1..] {
        assert_eq!(other_state, state, "{name}");
        assert_eq!(other_version, version, "{name}");
        assert_eq!(other_shape, shape, "{name}");
    }
    let seen: Vec<(&str, u64)> = results.iter().map(|r| (r.0, r.4)).collect();
    // Sync: input, a, p's and q's tasks, (p, q) committed before c runs; Exit: only the input.
    assert_eq!(seen[0], ("sync", 5));
    assert!((2..=5).contains(&seen[1].1), "{seen:?}");
    assert_eq!(seen[2], ("exit", 1), "Exit appends no step before the end");
}

// ---------------------------------------------------------------------------------------------
// Errors.

async fn a_failing_node<B: Backend>(store: Store<B>, t: String) {
    for (mode, name) in [(Durability::Sync, "sync"), (Durability::Exit, "exit")] {
        let thread = format!("{t}-{name}");
        let calls = Calls::default();
        let flaky = {
            let calls = calls.clone();
            move |_: Arc<Flow>, _: Context| {
                let calls = calls.clone();
                async move {
                    if calls.hit("b") == 1 {
                        return Err::<FlowUpdate, BoxError>("the model is down".into());
                    }
                    Ok(FlowUpdate::default().log(vec!["b".to_owned()]))
                }
            }
        };
        let graph = Graph::builder()
            .node("a", plain(&calls, "a"))
            .node("b", flaky)
            .node("c", plain(&calls, "c"))
            .entry("a")
            .edge("a", "b")
            .edge("b", "c")
            .edge("c", END)
            .build()
            .unwrap();
        let durable = graph.durable(&store).durability(mode);
        let error = durable
            .start(&thread, Flow::default())
            .await
            .expect_err("b fails");
        assert_eq!(error.category(), "node_exception", "{name}: {error}");
        let DurableError::Run(failure) = &error else {
            panic!("{name}: expected a run error, got {error:?}")
        };
        assert_eq!(failure.node(), Some("b"), "{name}");
        assert_eq!(failure.state().log, log(&["a"]), "{name}");
        assert!(error.to_string().contains("b"), "{name}: {error}");
        // Step 1 is committed (Exit too: the steps are appended when the run fails).
        let entries = journal(&store, &thread).await;
        let steps: Vec<_> = of_kind(&entries, "step")
            .iter()
            .map(|e| meta(e)["step"].as_u64().unwrap())
            .collect();
        assert_eq!(steps, [1], "{name}: {entries:#?}");
        assert_eq!(
            store.load::<Flow>(&thread).await.unwrap().state.log,
            log(&["a"])
        );
        assert_eq!(
            durable.status(&thread).await.unwrap(),
            RunStatus::Running {
                step: 1,
                next: names(&["b"])
            },
            "{name}"
        );
        // A new run while this one is unfinished; answers to a run that is not suspended.
        let error = refused(durable.run(&thread, ()).await, "run_state_invalid");
        assert!(error.to_string().contains(&thread), "{error}");
        refused(
            durable
                .resume_with(&thread, Answers::new().answer("b:2.0:0", "x"))
                .await,
            "run_state_invalid",
        );
        // Resumed: the failed step runs again (and now succeeds); `a` is not run again.
        // Another worker, at once: the failed run released the thread.
        let other = graph.durable(&store).worker("another").durability(mode);
        let (state, _) = finished(other.resume(&thread).await);
        assert_eq!(state.log, log(&["a", "b", "c"]), "{name}");
        assert_eq!(
            (calls.of("a"), calls.of("b"), calls.of("c")),
            (1, 2, 1),
            "{name}"
        );
    }
}

async fn a_missing_thread<B: Backend>(store: Store<B>, t: String) {
    let calls = Calls::default();
    let graph = Graph::builder()
        .node("a", plain(&calls, "a"))
        .entry("a")
        .edge("a", END)
        .build()
        .unwrap();
    let durable = graph.durable(&store);
    let missing = format!("{t}-missing");
    for error in [
        refused(durable.run(&missing, ()).await, "thread_not_found"),
        refused(durable.resume(&missing).await, "thread_not_found"),
        refused(
            durable
                .resume_with(&missing, Answers::new().answer("a:1.0:0", "x"))
                .await,
            "thread_not_found",
        ),
    ] {
        assert!(error.to_string().contains(&missing), "{error}");
    }
    match durable.status(&missing).await {
        Err(error) => assert_eq!(error.category(), "thread_not_found", "{error}"),
        Ok(status) => panic!("a missing thread has no status, got {status:?}"),
    }
    assert_eq!(calls.of("a"), 0);
    // `start` on an existing thread is refused.
    finished(durable.start(&t, Flow::default()).await);
    refused(durable.start(&t, Flow::default()).await, "thread_exists");
}

/// Entries written by others (plain merges) are skipped; a journal that sends the run to a node
/// the graph does not have is `run_journal_invalid`, naming the node.
async fn journals_written_by_others<B: Backend>(store: Store<B>, t: String) {
    let calls = Calls::default();
    let mut thread = store.create(&t, Flow::default()).await.unwrap();
    for i in 0..3 {
        thread
            .merge(
                FlowUpdate::default().log(vec![format!("plain-{i}")]),
                agentstate_store::StepMeta::node("someone"),
            )
            .await
            .unwrap();
    }
    let started = Gate::new();
    let graph = Graph::builder()
        .node("a", plain(&calls, "a"))
        .node("b", stuck_once(&calls, "b", &started))
        .entry("a")
        .edge("a", "b")
        .edge("b", END)
        .build()
        .unwrap();
    let durable = graph.durable(&store).worker("w");
    assert_eq!(
        durable.status(&t).await.unwrap(),
        RunStatus::Idle { step: 0 }
    );
    tokio::select! {
        outcome = durable.run(&t, ()) => panic!("the run was to be cut short: {outcome:?}"),
        () = started.wait() => {}
    }
    // Another graph, without `b`, cannot resume the run (the same worker: the lease is its own).
    let other = Graph::builder()
        .node("a", plain(&calls, "a"))
        .entry("a")
        .edge("a", END)
        .build()
        .unwrap();
    let error = refused(
        other.durable(&store).worker("w").resume(&t).await,
        "run_journal_invalid",
    );
    let text = error.to_string();
    assert!(text.contains("`b`") && text.contains(&t), "{text}");
    let (state, _) = finished(durable.resume(&t).await);
    assert_eq!(state.log, log(&["plain-0", "plain-1", "plain-2", "a", "b"]));
    assert_eq!((calls.of("a"), calls.of("b")), (1, 2));
}

// ---------------------------------------------------------------------------------------------
// `Send` steps.

/// `plan` -> `Send`s to `work` with subjects x, y, z. `work` logs `work:{subject}`; on `y`
/// it is stuck the first time (after opening `started`) when `stuck`, and asks (logging
/// `work:y:{answer}`) when `ask`. `seen` lists the subjects the tasks read.
fn send_graph(
    calls: &Calls,
    started: &Gate,
    seen: &Arc<Mutex<Vec<String>>>,
    stuck: bool,
    ask: bool,
) -> Graph<Flow> {
    let work = {
        let (calls, started, seen) = (calls.clone(), started.clone(), Arc::clone(seen));
        move |s: Arc<Flow>, cx: Context| {
            let (calls, started, seen) = (calls.clone(), started.clone(), Arc::clone(&seen));
            async move {
                calls.hit("work");
                seen.lock().unwrap().push(s.subject.clone());
                let mut line = format!("work:{}", s.subject);
                if s.subject == "y" && stuck && calls.of("stuck") == 0 {
                    calls.hit("stuck");
                    started.open();
                    std::future::pending::<()>().await;
                }
                if s.subject == "y" && ask {
                    let answer = cx.interrupt(json!({"subject": "y"}))?;
                    line = format!("{line}:{}", answer.as_str().unwrap_or("?"));
                }
                Ok::<_, BoxError>(FlowUpdate::default().log(vec![line]))
            }
        }
    };
    Graph::builder()
        .node("plan", plain(calls, "plan"))
        .node("work", work)
        .entry("plan")
        .route_send("plan", |_: &Flow| {
            ["x", "y", "z"]
                .iter()
                .map(|s| {
                    Dispatch::to(
                        "work",
                        Flow {
                            subject: s.to_string(),
                            ..Flow::default()
                        },
                    )
                })
                .collect()
        })
        .edge("work", END)
        .build()
        .unwrap()
}

async fn send_steps_resume_with_their_inputs<B: Backend>(store: Store<B>, t: String) {
    let (calls, started, seen) = (Calls::default(), Gate::new(), Arc::default());
    let durable = send_graph(&calls, &started, &seen, true, false).durable(&store);
    tokio::select! {
        outcome = durable.start(&t, Flow::default()) => panic!("the run was to be cut short: {outcome:?}"),
        () = started.wait() => {}
    }
    assert_eq!(
        durable.status(&t).await.unwrap(),
        RunStatus::Running {
            step: 1,
            next: names(&["work", "work", "work"])
        }
    );
    let entries = journal(&store, &t).await;
    let plan = of_kind(&entries, "step");
    assert_eq!(plan.len(), 1);
    assert_eq!(meta(plan[0])["next"], json!([]));
    let sends = meta(plan[0])["sends"]
        .as_array()
        .expect("the sends")
        .clone();
    assert_eq!(
        sends
            .iter()
            .map(|s| (s["node"].clone(), s["input"]["subject"].clone()))
            .collect::<Vec<_>>(),
        [
            (json!("work"), json!("x")),
            (json!("work"), json!("y")),
            (json!("work"), json!("z"))
        ]
    );
    seen.lock().unwrap().clear();

    let (state, _) = finished(durable.resume(&t).await);
    assert_eq!(state.log, log(&["plan", "work:x", "work:y", "work:z"]));
    let mut resumed = seen.lock().unwrap().clone();
    resumed.sort();
    // The stuck task runs again, reading its own input; the tasks that finished before the cut
    // (and whose updates were journaled by then) do not.
    assert!(resumed.contains(&"y".to_owned()), "{resumed:?}");
    let mut unique = resumed.clone();
    unique.dedup();
    assert_eq!(unique, resumed, "each task reads its own input");
    assert!(resumed
        .iter()
        .all(|s| ["x", "y", "z"].contains(&s.as_str())));
    assert_eq!(calls.of("plan"), 1);
}

async fn a_new_run_waits_for_pending_send_tasks<B: Backend>(store: Store<B>, t: String) {
    let (calls, started, seen) = (Calls::default(), Gate::new(), Arc::default());
    let durable = send_graph(&calls, &started, &seen, true, false).durable(&store);
    tokio::select! {
        outcome = durable.start(&t, Flow::default()) => panic!("the run was to be cut short: {outcome:?}"),
        () = started.wait() => {}
    }
    // The run is unfinished (its next step is three `Send` tasks): a new run is refused.
    refused(durable.run(&t, ()).await, "run_state_invalid");
    assert_eq!(calls.of("plan"), 1);
}

async fn send_tasks_interrupt_and_resume<B: Backend>(store: Store<B>, t: String) {
    let (calls, started, seen) = (Calls::default(), Gate::new(), Arc::default());
    let durable = send_graph(&calls, &started, &seen, false, true).durable(&store);
    let (state, asked) = suspended(durable.start_as(&t, "run-1", Flow::default()).await);
    assert_eq!(state.log, log(&["plan"]));
    assert_eq!(
        asked,
        [Interrupt {
            id: "work:2.1:0@run-1".into(),
            node: "work".into(),
            step_node: "work".into(),
            step: 2,
            payload: json!({"subject": "y"}),
            metadata: Default::default(),
        }]
    );
    assert_eq!(calls.of("work"), 3);
    seen.lock().unwrap().clear();
    let (state, _) = finished(
        durable
            .resume_with(&t, Answers::new().answer("work:2.1:0@run-1", "ok"))
            .await,
    );
    assert_eq!(state.log, log(&["plan", "work:x", "work:y:ok", "work:z"]));
    // Only the asking task ran again, on its own input.
    assert_eq!(*seen.lock().unwrap(), ["y"]);
    assert_eq!(calls.of("plan"), 1);
}

// ---------------------------------------------------------------------------------------------
// A crash in each durability mode.

/// `a` -> `b` -> `c` (stuck the first time) -> END, cut short in `c`, then resumed: each
/// step's update is in the state once, whatever the mode lost.
async fn a_crash_in_each_mode<B: Backend>(store: Store<B>, t: String) {
    for (mode, name) in MODES {
        let thread = format!("{t}-{name}");
        let (calls, started) = (Calls::default(), Gate::new());
        let graph = Graph::builder()
            .node("a", plain(&calls, "a"))
            .node("b", plain(&calls, "b"))
            .node("c", stuck_once(&calls, "c", &started))
            .entry("a")
            .edge("a", "b")
            .edge("b", "c")
            .edge("c", END)
            .build()
            .unwrap();
        let durable = graph.durable(&store).durability(mode);
        tokio::select! {
            outcome = durable.start(&thread, Flow::default()) => panic!("the run was to be cut short: {outcome:?}"),
            () = started.wait() => {}
        }
        let status = durable.status(&thread).await.unwrap();
        let after_a = RunStatus::Running {
            step: 1,
            next: names(&["b"]),
        };
        let after_b = RunStatus::Running {
            step: 2,
            next: names(&["c"]),
        };
        // Sync: steps 1 and 2 committed. Async: step 2's append ran beside `c` and may have
        // been cut short too. Exit: only the input was appended; the run starts again from it.
        let b_runs = match mode {
            Durability::Sync => {
                assert_eq!(status, after_b, "{name}");
                1
            }
            Durability::Async if status == after_a => 2,
            Durability::Async => {
                assert_eq!(status, after_b, "{name}");
                1
            }
            _ => {
                let from_input = RunStatus::Running {
                    step: 0,
                    next: names(&["a"]),
                };
                assert_eq!(status, from_input, "{name}");
                2
            }
        };
        let (state, _) = finished(durable.resume(&thread).await);
        assert_eq!(state.log, log(&["a", "b", "c"]), "{name}");
        let a_runs = if mode == Durability::Exit { 2 } else { 1 };
        assert_eq!(
            (calls.of("a"), calls.of("b"), calls.of("c")),
            (a_runs, b_runs, 2),
            "{name}"
        );
        let entries = journal(&store, &thread).await;
        let steps: Vec<_> = of_kind(&entries, "step")
            .iter()
            .map(|e| meta(e)["step"].as_u64().unwrap())
            .collect();
        assert_eq!(steps, [1, 2, 3], "{name}: {entries:#?}");
    }
}

/// An effect is journaled at once in every mode (with the steps staged before it, so the
/// journal keeps its order): a crash after it does not run it again, and no step is
/// committed twice.
async fn effects_in_each_mode<B: Backend>(store: Store<B>, t: String) {
    for (mode, name) in MODES {
        let thread = format!("{t}-{name}");
        let (calls, started) = (Calls::default(), Gate::new());
        let charged = Arc::new(AtomicUsize::new(0));
        let pay = {
            let (calls, charged, started) = (calls.clone(), Arc::clone(&charged), started.clone());
            move |_: Arc<Flow>, cx: Context| {
                let (calls, charged, started) =
                    (calls.clone(), Arc::clone(&charged), started.clone());
                async move {
                    let call = calls.hit("pay");
                    let receipt: String = cx
                        .effect("charge", |_| async move {
                            let n = charged.fetch_add(1, Ordering::SeqCst) + 1;
                            Ok::<_, std::io::Error>(format!("receipt-{n}"))
                        })
                        .await?;
                    if call == 1 {
                        started.open();
                        std::future::pending::<()>().await;
                    }
                    Ok::<_, BoxError>(FlowUpdate::default().log(vec![receipt]))
                }
            }
        };
        let graph = Graph::builder()
            .node("a", plain(&calls, "a"))
            .node("b", plain(&calls, "b"))
            .node("pay", pay)
            .entry("a")
            .edge("a", "b")
            .edge("b", "pay")
            .edge("pay", END)
            .build()
            .unwrap();
        let durable = graph.durable(&store).durability(mode);
        tokio::select! {
            outcome = durable.start(&thread, Flow::default()) => panic!("the run was to be cut short: {outcome:?}"),
            () = started.wait() => {}
        }
        let (state, _) = finished(durable.resume(&thread).await);
        assert_eq!(state.log, log(&["a", "b", "receipt-1"]), "{name}");
        assert_eq!(charged.load(Ordering::SeqCst), 1, "{name}");
        assert_eq!((calls.of("a"), calls.of("b")), (1, 1), "{name}");
        let entries = journal(&store, &thread).await;
        let kinds: Vec<String> = entries
            .iter()
            .map(|e| {
                let m = meta(e);
                match m["entry"].as_str().unwrap() {
                    "step" => format!("step {}", m["step"]),
                    other => other.to_owned(),
                }
            })
            .collect();
        assert_eq!(
            kinds,
            ["input", "step 1", "step 2", "effect", "step 3"],
            "{name}"
        );
    }
}

/// A run longer than its lease's ttl keeps the thread: the lease is renewed while it runs.
async fn a_long_step_keeps_its_lease<B: Backend>(store: Store<B>, t: String) {
    let calls = Calls::default();
    let (started, release) = (Gate::new(), Gate::new());
    let graph = Graph::builder()
        .node("a", waiting(&calls, "a", &started, &release))
        .entry("a")
        .edge("a", END)
        .build()
        .unwrap();
    let ttl = Duration::from_millis(600);
    let first = graph.durable(&store).worker("worker-1").lease_ttl(ttl);
    let second = graph.durable(&store).worker("worker-2");
    store.create(&t, Flow::default()).await.unwrap();
    let contend = async {
        started.wait().await;
        tokio::time::sleep(ttl * 5 / 2).await;
        let refused = second.resume(&t).await;
        let holder = store.lease_info(&t).await.unwrap().map(|l| l.owner);
        release.open();
        (refused, holder)
    };
    let (outcome, (refusal, holder)) = tokio::join!(first.run(&t, ()), contend);
    refused(refusal, "thread_leased");
    assert_eq!(holder.as_deref(), Some("worker-1"));
    finished(outcome);
    assert_eq!(calls.of("a"), 1);
    // Released at the end.
    assert!(store.lease_info(&t).await.unwrap().is_none());
}

/// A run whose lease is revoked while its node runs (a worker paused past its lease and
/// taken over, or a run ended from outside) starts no effect after: its node's effect is
/// refused (`lease_lost`) without running, and the run fails.
async fn no_effect_once_the_lease_is_lost<B: Backend>(store: Store<B>, t: String) {
    let charged = Arc::new(AtomicUsize::new(0));
    let (started, release) = (Gate::new(), Gate::new());
    let pay = {
        let (charged, started, release) = (Arc::clone(&charged), started.clone(), release.clone());
        move |_: Arc<Flow>, cx: Context| {
            let (charged, started, release) =
                (Arc::clone(&charged), started.clone(), release.clone());
            async move {
                started.open();
                release.wait().await;
                let charge = move |_key: String| async move {
                    charged.fetch_add(1, Ordering::SeqCst);
                    Ok::<_, std::io::Error>("paid".to_owned())
                };
                let refused = cx.effect("charge", charge).await;
                let error = refused.expect_err("no effect starts once the lease is lost");
                assert_eq!(error.category(), "lease_lost", "{error}");
                Err::<FlowUpdate, _>(BoxError::from(error.to_string()))
            }
        }
    };
    let graph = single("pay", pay);
    let ttl = Duration::from_millis(300);
    let durable = graph.durable(&store).worker("worker-1").lease_ttl(ttl);
    store.create(&t, Flow::default()).await.unwrap();
    let revoke = async {
        started.wait().await;
        store.revoke_lease(&t).await.unwrap();
        // Its heartbeat's next renewal (every third of the ttl) is refused.
        tokio::time::sleep(ttl).await;
        release.open();
    };
    let (outcome, ()) = tokio::join!(durable.run(&t, ()), revoke);
    assert!(outcome.is_err(), "{outcome:?}");
    assert_eq!(charged.load(Ordering::SeqCst), 0, "the effect ran");
}

/// A step that runs past the graph's step timeout fails the durable run (`step_timeout`),
/// nothing of the step merged, its lease released: resumed, the step runs again.
async fn a_step_past_its_timeout<B: Backend>(store: Store<B>, t: String) {
    let calls = Calls::default();
    let slow = {
        let calls = calls.clone();
        move |_: Arc<Flow>, _: Context| {
            let calls = calls.clone();
            async move {
                if calls.hit("slow") == 1 {
                    tokio::time::sleep(Duration::from_secs(30)).await;
                }
                Ok::<_, BoxError>(FlowUpdate::default().log(vec!["slow".to_owned()]))
            }
        }
    };
    let graph = Graph::builder()
        .node("slow", slow)
        .entry("slow")
        .edge("slow", END)
        .step_timeout(Duration::from_millis(100))
        .build()
        .unwrap();
    let durable = graph.durable(&store);
    let failed = refused(durable.start(&t, Flow::default()).await, "step_timeout");
    assert!(failed.to_string().contains("step timeout"), "{failed}");
    assert!(store.lease_info(&t).await.unwrap().is_none());
    // Resumed, the step runs again (its node's second call is quick).
    let (state, _) = finished(durable.resume(&t).await);
    assert_eq!(state.log, ["slow"]);
}

// ---------------------------------------------------------------------------------------------
// Every case on both backends.

/// The PostgreSQL store, if there is one (`durable_support::postgres`).
async fn postgres() -> Option<agentstate_store::PostgresStore> {
    durable_support::postgres("durable").await
}

macro_rules! cases {
    ($($case:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $case() {
                    let store = agentstate_store::SqliteStore::open_in_memory().unwrap();
                    super::$case(store, super::thread_id(stringify!($case))).await;
                }
            )*
        }
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $case() {
                    let Some(store) = super::postgres().await else { return };
                    super::$case(store, super::thread_id(stringify!($case))).await;
                }
            )*
        }
    };
}

cases!(
    journal_and_status,
    resume_after_a_cut,
    one_interrupt,
    parallel_interrupts_one_resume,
    parallel_interrupts_two_resumes,
    two_questions_in_a_row,
    unknown_interrupt,
    effects_are_not_repeated_across_interrupts,
    interrupts_in_exit_mode,
    answers_survive_a_crash,
    many_effects_in_one_step,
    the_recursion_limit,
    status_of_an_answered_run_cut_short,
    parallel_effects_resume,
    a_resolved_interrupt_never_fires_again,
    one_run_per_thread,
    a_dead_worker_is_taken_over,
    durability_modes,
    a_failing_node,
    a_missing_thread,
    journals_written_by_others,
    send_steps_resume_with_their_inputs,
    a_new_run_waits_for_pending_send_tasks,
    send_tasks_interrupt_and_resume,
    a_crash_in_each_mode,
    effects_in_each_mode,
    a_long_step_keeps_its_lease,
    no_effect_once_the_lease_is_lost,
    a_step_past_its_timeout,
);
