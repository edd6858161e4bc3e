//! The one run loop of every kind of run (issue 27): durable runs stream, a crash does not
//! rerun a step's finished tasks, static breakpoints, a failing step merges nothing, warm
//! workers, the journal as one typed enum, the lease.
//!
//! Every case runs on SQLite (in memory) and on PostgreSQL when `AGENTSTATE_POSTGRES_URL` is set
//! (under `CI` it must be), each on a fresh thread id. A crash is the run's future (or stream)
//! dropped, as a process that stops.

mod durable_support;

use agentstate::message::{Message, Role};
use agentstate::state::AgentState as Agent;
use agentstate_graph::durable::{
    Answers, Durability, DurableError, DurableStream, JournalEntry, Outcome, RunStatus, META_KEY,
};
use agentstate_graph::{
    BoxError, Context, Dispatch, Event, EventFilter, Graph, Interrupt, Node, END,
};
use agentstate_store::backend::Backend;
use agentstate_store::{EntryInfo, HistoryQuery, StepMeta, Store, StoreError};
use durable_support::*;
use futures_util::StreamExt;
use serde_json::{json, Value};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

/// A node that counts its calls, streams two text deltas, and logs its name.
fn chatty(calls: &Calls, name: &'static str) -> impl Node<Flow> {
    let calls = calls.clone();
    move |_: Arc<Flow>, cx: Context| {
        let calls = calls.clone();
        async move {
            calls.hit(name);
            cx.text_delta(format!("m-{name}"), "Hel");
            cx.text_delta(format!("m-{name}"), "lo");
            Ok::<_, BoxError>(FlowUpdate::default().log(vec![name.to_owned()]))
        }
    }
}

/// A node that counts its calls, asks `payload`, and logs `name:answer`.
fn asking(calls: &Calls, name: &'static str) -> impl Node<Flow> {
    let calls = calls.clone();
    move |_: Arc<Flow>, cx: Context| {
        let calls = calls.clone();
        async move {
            calls.hit(name);
            let answer = cx.interrupt(json!({"from": name}))?;
            let answer = answer.as_str().unwrap_or("?").to_owned();
            Ok::<_, BoxError>(FlowUpdate::default().log(vec![format!("{name}:{answer}")]))
        }
    }
}

/// A node that hangs (after opening `started`) while `hang` holds: the run is cut short there.
fn hanging(
    calls: &Calls,
    name: &'static str,
    started: &Gate,
    hang: &Arc<AtomicBool>,
) -> impl Node<Flow> {
    let (calls, started, hang) = (calls.clone(), started.clone(), Arc::clone(hang));
    move |_: Arc<Flow>, _: Context| {
        let (calls, started, hang) = (calls.clone(), started.clone(), Arc::clone(&hang));
        async move {
            calls.hit(name);
            if hang.load(Ordering::SeqCst) {
                started.open();
                std::future::pending::<()>().await;
            }
            Ok::<_, BoxError>(FlowUpdate::default().log(vec![name.to_owned()]))
        }
    }
}

/// A node that fails the first `n` times it runs.
fn failing(calls: &Calls, name: &'static str, n: usize) -> impl Node<Flow> {
    let calls = calls.clone();
    move |_: Arc<Flow>, _: Context| {
        let calls = calls.clone();
        async move {
            if calls.hit(name) <= n {
                return Err::<FlowUpdate, BoxError>(format!("{name} failed").into());
            }
            Ok(FlowUpdate::default().log(vec![name.to_owned()]))
        }
    }
}

/// The journal's entries of one kind (`"step"`, `"task"`...).
fn of_kind<'a>(entries: &'a [EntryInfo], kind: &str) -> Vec<&'a EntryInfo> {
    entries
        .iter()
        .filter(|e| e.extra.get(META_KEY).is_some_and(|m| m["entry"] == kind))
        .collect()
}

/// The journal as `kind` or `kind step`, oldest first.
fn kinds(entries: &[EntryInfo]) -> Vec<String> {
    entries
        .iter()
        .map(|e| match e.extra.get(META_KEY) {
            None => "plain".to_owned(),
            Some(m) => format!("{} {}", m["entry"].as_str().unwrap(), m["step"]),
        })
        .collect()
}

fn finished<S: std::fmt::Debug + Clone>(outcome: Result<Outcome<S>, DurableError<S>>) -> (S, u64) {
    match outcome {
        Ok(Outcome::Finished { state, version }) => (Arc::unwrap_or_clone(state), version),
        other => panic!("expected a finished run, got {other:?}"),
    }
}

fn suspended<S: std::fmt::Debug + Clone>(
    outcome: Result<Outcome<S>, DurableError<S>>,
) -> (S, Vec<Interrupt>) {
    match outcome {
        Ok(Outcome::Suspended {
            state, interrupts, ..
        }) => (Arc::unwrap_or_clone(state), interrupts),
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

fn ids(interrupts: &[Interrupt]) -> Vec<&str> {
    interrupts.iter().map(|i| i.id.as_str()).collect()
}

/// Polls `run` until `done` holds (checked every 2 ms), then drops it: a crash.
async fn crash_when<F: Future, D: Future<Output = bool>>(run: F, done: impl Fn() -> D) {
    let watch = async {
        while !done().await {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    };
    tokio::select! {
        _ = run => panic!("the run was to be cut short, and it ended"),
        () = watch => {}
    }
}

/// The number of `task` entries in the thread's journal.
async fn task_entries<B: Backend>(store: &Store<B>, t: &str) -> usize {
    match store.history(t, HistoryQuery::oldest(1000)).await {
        Ok(entries) => of_kind(&entries, "task").len(),
        Err(_) => 0,
    }
}

/// A durable stream's items, each event checked to be `Ok` but the last.
async fn drain<S: agentstate_graph::durable::DurableState, K: agentstate_graph::NodeKey>(
    stream: DurableStream<S, K>,
) -> (Vec<Event<S, K>>, Option<DurableError<S>>) {
    let items: Vec<_> = stream.collect().await;
    let mut events = Vec::new();
    let mut error = None;
    let n = items.len();
    for (i, item) in items.into_iter().enumerate() {
        match item {
            Ok(event) => events.push(event),
            Err(e) => {
                assert_eq!(i, n - 1, "an error is the stream's last item");
                error = Some(e);
            }
        }
    }
    (events, error)
}

fn kinds_of<S: agentstate::State, K>(events: &[Event<S, K>]) -> Vec<&'static str> {
    events.iter().map(Event::kind).collect()
}

// ---------------------------------------------------------------------------------------------
// 1. Durable streams.

/// `a` (streams text) -> `b`, `c` in parallel -> `d` -> END.
fn streaming_graph(calls: &Calls) -> Graph<Flow> {
    Graph::builder()
        .node("a", chatty(calls, "a"))
        .node("b", plain(calls, "b"))
        .node("c", chatty(calls, "c"))
        .node("d", plain(calls, "d"))
        .entry("a")
        .edges("a", ["b", "c"])
        .edge("b", "d")
        .edge("c", "d")
        .edge("d", END)
        .build()
        .unwrap()
}

/// A durable stream gives the events of the same graph's stream in memory on the same input
/// (same kinds, same states after each step, the text deltas as `Emitted`), plus a
/// `step_committed` after each step (the last one's with the run's end), whose version is the
/// thread's when it comes and grows.
async fn a_durable_stream_is_the_memory_stream_plus_commits<B: Backend>(
    store: Store<B>,
    t: String,
) {
    let calls = Calls::default();
    let graph = streaming_graph(&calls);
    let memory: Vec<Event<Flow, &str>> = graph
        .stream(Flow {
            subject: "s".into(),
            ..Flow::default()
        })
        .collect()
        .await;

    store.create(&t, Flow::default()).await.unwrap();
    let durable = graph.durable(&store);
    let mut stream = durable.stream(&t, FlowUpdate::default().subject("s".to_owned()));
    let mut events = Vec::new();
    let mut last_version = store.info(&t).await.unwrap().version;
    while let Some(item) = stream.next().await {
        let event = item.unwrap();
        if let Event::StepCommitted { version, .. } = &event {
            // Nothing runs while the consumer holds the event: the thread is at its version.
            assert_eq!(store.info(&t).await.unwrap().version, *version);
            assert!(*version > last_version, "{version} after {last_version}");
            last_version = *version;
        }
        events.push(event);
    }
    let without: Vec<&'static str> = kinds_of(&events)
        .into_iter()
        .filter(|k| *k != "step_committed")
        .collect();
    assert_eq!(without, kinds_of(&memory));
    assert_eq!(
        kinds_of(&events),
        [
            "run_started",
            "step_finished",
            "step_started",
            "node_started",
            "emitted",
            "emitted",
            "node_finished",
            "step_committed",
            "step_finished",
            "step_started",
            "node_started",
            "node_started",
            "emitted",
            "emitted",
            "node_finished",
            "node_finished",
            "step_committed",
            "step_finished",
            "step_started",
            "node_started",
            "node_finished",
            // The run's last step is committed with its end.
            "step_finished",
            "step_committed",
            "run_finished",
        ]
    );
    // The states after each step, and the end, are the memory run's.
    let states = |events: &[Event<Flow, &str>]| -> Vec<Flow> {
        events
            .iter()
            .filter_map(|e| match e {
                Event::StepFinished { state, .. } | Event::RunFinished { state } => {
                    Some((**state).clone())
                }
                _ => None,
            })
            .collect()
    };
    assert_eq!(states(&events), states(&memory));
    assert_eq!(
        states(&events).last().unwrap().log,
        log(&["a", "b", "c", "d"])
    );
    // Each step's commit comes before its `step_finished`, naming the step; the last step's
    // with the run's end, just before `run_finished`.
    let mut step = 0;
    for (i, event) in events.iter().enumerate() {
        if let Event::StepCommitted { step: s, .. } = event {
            step += 1;
            assert_eq!(*s, step);
            assert!(match &events[i + 1] {
                Event::StepFinished { record, .. } => record.step == step,
                Event::RunFinished { .. } => step == 3,
                _ => false,
            });
        }
    }
    assert_eq!(step, 3);
    // The emissions name their node and step.
    let emitted: Vec<(u64, String)> = events
        .iter()
        .filter_map(|e| match e {
            Event::Emitted { step, node, .. } => Some((*step, node.to_string())),
            _ => None,
        })
        .collect();
    assert_eq!(
        emitted,
        [
            (1, "a".to_owned()),
            (1, "a".to_owned()),
            (2, "c".to_owned()),
            (2, "c".to_owned())
        ]
    );
    assert_eq!(
        store.load::<Flow>(&t).await.unwrap().state,
        *states(&memory).last().unwrap()
    );
    assert_eq!(store.info(&t).await.unwrap().version, last_version);
    // The run's id is its journal's.
    let Event::RunStarted { run_id } = &events[0] else {
        unreachable!()
    };
    let entries = journal(&store, &t).await;
    assert!(entries.iter().all(|e| e.run_id.as_ref() == Some(run_id)));
}

/// A suspended durable run's stream ends with `RunSuspended` and its interrupt ids; streaming
/// the resume with answers streams the rest of the run to `RunFinished`.
async fn a_suspended_stream_resumes_as_a_stream<B: Backend>(store: Store<B>, t: String) {
    let calls = Calls::default();
    let graph = Graph::builder()
        .node("a", plain(&calls, "a"))
        .node("ask", asking(&calls, "ask"))
        .node("c", chatty(&calls, "c"))
        .entry("a")
        .edge("a", "ask")
        .edge("ask", "c")
        .edge("c", END)
        .build()
        .unwrap();
    store.create(&t, Flow::default()).await.unwrap();
    let durable = graph.durable(&store);
    let (events, error) = drain(durable.stream_as(&t, "run-1", ())).await;
    assert!(error.is_none(), "{error:?}");
    assert_eq!(
        kinds_of(&events),
        [
            "run_started",
            "step_finished",
            "step_started",
            "node_started",
            "node_finished",
            "step_committed",
            "step_finished",
            "step_started",
            "node_started",
            // The suspension's own commit (its journal entry), with the thread's version.
            "step_committed",
            "run_suspended",
        ]
    );
    let Some(Event::RunSuspended { state, interrupts }) = events.last() else {
        unreachable!()
    };
    assert_eq!(state.log, log(&["a"]));
    assert_eq!(ids(interrupts), ["ask:2.0:0@run-1"]);
    assert_eq!(interrupts[0].payload, json!({"from": "ask"}));
    assert_eq!(
        durable.status(&t).await.unwrap(),
        RunStatus::Suspended {
            step: 2,
            interrupts: interrupts.clone()
        }
    );

    let answers = Answers::new().answer("ask:2.0:0@run-1", "yes");
    let (events, error) = drain(durable.stream_resume(&t, answers)).await;
    assert!(error.is_none(), "{error:?}");
    assert_eq!(
        kinds_of(&events),
        [
            "run_started",
            "step_finished",
            "step_started",
            "node_started",
            "node_finished",
            "step_committed",
            "step_finished",
            "step_started",
            "node_started",
            "emitted",
            "emitted",
            "node_finished",
            // The run's last step is committed with its end.
            "step_finished",
            "step_committed",
            "run_finished",
        ]
    );
    let Some(Event::RunFinished { state }) = events.last() else {
        unreachable!()
    };
    assert_eq!(state.log, log(&["a", "ask:yes", "c"]));
    assert_eq!((calls.of("a"), calls.of("ask"), calls.of("c")), (1, 2, 1));
    assert_eq!(
        durable.status(&t).await.unwrap(),
        RunStatus::Idle { step: 3 }
    );
}

/// A failing durable run's stream ends with its `DurableError` as the last item; the events of
/// the steps before it came first.
async fn a_failing_stream_ends_with_its_error<B: Backend>(store: Store<B>, t: String) {
    let calls = Calls::default();
    let graph = Graph::builder()
        .node("a", plain(&calls, "a"))
        .node("b", failing(&calls, "b", 1))
        .entry("a")
        .edge("a", "b")
        .edge("b", END)
        .build()
        .unwrap();
    store.create(&t, Flow::default()).await.unwrap();
    let durable = graph.durable(&store);
    let (events, error) = drain(durable.stream(&t, ())).await;
    assert_eq!(
        kinds_of(&events),
        [
            "run_started",
            "step_finished",
            "step_started",
            "node_started",
            "node_finished",
            "step_committed",
            "step_finished",
            "step_started",
            "node_started",
        ]
    );
    let error = error.expect("the run's error as the last item");
    assert_eq!(error.category(), "node_exception");
    let DurableError::Run(error) = error else {
        panic!("a run error: {error:?}")
    };
    assert_eq!((error.step(), &error.state().log), (2, &log(&["a"])));
    // The stream is over after its error.
    let mut stream = durable.stream_resume(&t, Answers::new());
    let mut last = None;
    while let Some(item) = stream.next().await {
        last = Some(item.map(|e| e.kind()).map_err(|e| e.category()));
    }
    assert_eq!(last, Some(Ok("run_finished")));
    // A stream that cannot start gives its error as its only item: a missing thread, and a
    // new run on a thread whose run is not finished.
    let mut stream = durable.stream("no-such-thread", ());
    match stream.next().await {
        Some(Err(error)) => assert_eq!(error.category(), "thread_not_found"),
        other => panic!("{:?}", other.map(|i| i.map(|e| e.kind()))),
    }
    assert!(stream.next().await.is_none());
    let thread = format!("{t}-unfinished");
    store.create(&thread, Flow::default()).await.unwrap();
    let durable = Graph::builder()
        .node("x", failing(&calls, "x", usize::MAX))
        .entry("x")
        .edge("x", END)
        .build()
        .unwrap()
        .durable(&store);
    let (_, error) = drain(durable.stream(&thread, ())).await;
    assert_eq!(error.map(|e| e.category()), Some("node_exception"));
    let (events, error) = drain(durable.stream(&thread, ())).await;
    assert_eq!(
        (kinds_of(&events), error.map(|e| e.category())),
        (vec![], Some("run_state_invalid"))
    );
    assert_eq!(
        store.load::<Flow>(&t).await.unwrap().state.log,
        log(&["a", "b"])
    );
}

/// `only(STEP_FINISHED)` carries the run's start, the states after each step and its end.
async fn a_filtered_durable_stream<B: Backend>(store: Store<B>, t: String) {
    let calls = Calls::default();
    store.create(&t, Flow::default()).await.unwrap();
    let durable = streaming_graph(&calls).durable(&store);
    let (events, error) = drain(durable.stream(&t, ()).only(EventFilter::STEP_FINISHED)).await;
    assert!(error.is_none(), "{error:?}");
    assert_eq!(
        kinds_of(&events),
        [
            "run_started",
            "step_finished",
            "step_finished",
            "step_finished",
            "step_finished",
            "run_finished"
        ]
    );
    let logs: Vec<Vec<String>> = events
        .iter()
        .filter_map(|e| match e {
            Event::StepFinished { state, .. } => Some(state.log.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(
        logs,
        [
            // The run starts from an empty log (no input).
            log(&[]),
            log(&["a"]),
            log(&["a", "b", "c"]),
            log(&["a", "b", "c", "d"])
        ]
    );
    // The commits alone.
    let thread = format!("{t}-commits");
    store.create(&thread, Flow::default()).await.unwrap();
    let (events, _) = drain(
        durable
            .stream(&thread, ())
            .only(EventFilter::STEP_COMMITTED),
    )
    .await;
    assert_eq!(
        kinds_of(&events),
        [
            "run_started",
            "step_committed",
            "step_committed",
            "step_committed",
            "run_finished"
        ]
    );
}

/// `a` -> `b` -> `c`, `b` stuck its first time (after opening `started`): a run cut short there.
fn stuck_at_b(calls: &Calls, started: &Gate) -> Graph<Flow> {
    Graph::builder()
        .node("a", plain(calls, "a"))
        .node("b", stuck_once(calls, "b", started))
        .node("c", plain(calls, "c"))
        .entry("a")
        .edge("a", "b")
        .edge("b", "c")
        .edge("c", END)
        .build()
        .unwrap()
}

/// Dropping a durable stream in the middle of a step is a crash: a resume (streamed) runs the
/// step again, the steps before it are not run again.
async fn dropping_a_durable_stream_is_a_crash<B: Backend>(store: Store<B>, t: String) {
    let (calls, started) = (Calls::default(), Gate::new());
    let graph = stuck_at_b(&calls, &started);
    store.create(&t, Flow::default()).await.unwrap();
    let durable = graph.durable(&store).lease_ttl(Duration::from_millis(300));
    let mut stream = durable.stream(&t, ());
    let mut seen = Vec::new();
    let consume = async {
        while let Some(item) = stream.next().await {
            seen.push(item.unwrap().kind());
        }
    };
    tokio::select! {
        () = consume => panic!("the run was to be cut short"),
        () = started.wait() => {}
    }
    drop(stream);
    assert_eq!(
        durable.status(&t).await.unwrap(),
        RunStatus::Running {
            step: 1,
            next: log(&["b"])
        }
    );
    // Another worker, once the lease expired.
    let next = graph.durable(&store).worker("next");
    tokio::time::sleep(Duration::from_millis(400)).await;
    let (events, error) = drain(next.stream_resume(&t, Answers::new())).await;
    assert!(error.is_none(), "{error:?}");
    let Some(Event::RunFinished { state }) = events.last() else {
        panic!("{:?}", kinds_of(&events))
    };
    assert_eq!(state.log, log(&["a", "b", "c"]));
    assert_eq!((calls.of("a"), calls.of("b"), calls.of("c")), (1, 2, 1));
    let steps: Vec<StepMarker> = events
        .iter()
        .filter_map(|e| match e {
            Event::StepStarted { step, .. } => Some(StepMarker(*step)),
            _ => None,
        })
        .collect();
    assert_eq!(steps, [StepMarker(2), StepMarker(3)]);
    // The resumed run is the same run: its id is the input's.
    let Event::RunStarted { run_id } = &events[0] else {
        unreachable!()
    };
    let entries = journal(&store, &t).await;
    assert_eq!(entries[0].run_id.as_ref(), Some(run_id));
}

/// A run that goes to a node (`stream_goto`) commits its input with that node as its next
/// step: cut short there, it resumes there; run again with its id, it is not started twice; no
/// node merges the input alone; a node the graph lacks is refused before anything is written.
async fn a_run_goes_to_a_node<B: Backend>(store: Store<B>, t: String) {
    let (calls, started) = (Calls::default(), Gate::new());
    let graph = stuck_at_b(&calls, &started);
    store.create(&t, Flow::default()).await.unwrap();
    let durable = graph.durable(&store).lease_ttl(Duration::from_millis(300));
    let input = || FlowUpdate::default().log(vec!["in".to_owned()]);
    let mut stream = durable.stream_goto(&t, "run-1", input(), ["b"]);
    tokio::select! {
        _ = async { while stream.next().await.is_some() {} } => panic!("the run was to be cut short"),
        () = started.wait() => {}
    }
    drop(stream);
    assert_eq!(
        durable.status(&t).await.unwrap(),
        RunStatus::Running {
            step: 0,
            next: log(&["b"])
        }
    );
    tokio::time::sleep(Duration::from_millis(400)).await;
    // The same run again: resumed at `b`, its input not merged twice, `a` never run.
    let (events, error) = drain(durable.stream_goto(&t, "run-1", input(), ["b"])).await;
    assert!(error.is_none(), "{error:?}");
    let Some(Event::RunFinished { state }) = events.last() else {
        panic!("{:?}", kinds_of(&events))
    };
    assert_eq!(state.log, log(&["in", "b", "c"]));
    assert_eq!((calls.of("a"), calls.of("b"), calls.of("c")), (0, 2, 1));

    let (events, error) = drain(durable.stream_goto(&t, "run-2", input(), [])).await;
    assert!(error.is_none(), "{error:?}");
    assert!(
        matches!(events.last(), Some(Event::RunFinished { state }) if state.log == log(&["in", "b", "c", "in"]))
    );
    assert_eq!(calls.of("a") + calls.of("c"), 1);

    let version = store.info(&t).await.unwrap().version;
    let (_, error) = drain(durable.stream_goto(&t, "run-3", input(), ["nowhere"])).await;
    let error = error.expect("an unknown node is refused");
    assert_eq!(error.category(), "run_state_invalid", "{error}");
    assert_eq!(store.info(&t).await.unwrap().version, version);
}

#[derive(Debug, PartialEq)]
struct StepMarker(u64);

/// Streams `a` -> `b` (streams text) -> `c` on thread `thread` in `mode`: its events (each
/// `step_committed` checked to carry the thread's version when it comes), its commits (step,
/// version) and the thread's final version.
async fn stream_in_mode<B: Backend>(
    store: &Store<B>,
    thread: &str,
    mode: Durability,
) -> (Vec<Event<Flow, &'static str>>, Vec<(u64, u64)>, u64) {
    let calls = Calls::default();
    let graph = Graph::builder()
        .node("a", plain(&calls, "a"))
        .node("b", chatty(&calls, "b"))
        .node("c", plain(&calls, "c"))
        .entry("a")
        .edge("a", "b")
        .edge("b", "c")
        .edge("c", END)
        .build()
        .unwrap();
    store.create(thread, Flow::default()).await.unwrap();
    let durable = graph.durable(store).durability(mode);
    let mut stream = durable.stream(thread, ());
    let mut events = Vec::new();
    while let Some(item) = stream.next().await {
        let event = item.unwrap();
        if let Event::StepCommitted { version, .. } = &event {
            assert_eq!(
                store.info(thread).await.unwrap().version,
                *version,
                "{mode:?}"
            );
        }
        events.push(event);
    }
    let commits: Vec<(u64, u64)> = events
        .iter()
        .filter_map(|e| match e {
            Event::StepCommitted { step, version } => Some((*step, *version)),
            _ => None,
        })
        .collect();
    assert_eq!(
        store.load::<Flow>(thread).await.unwrap().state.log,
        log(&["a", "b", "c"])
    );
    let version = store.info(thread).await.unwrap().version;
    (events, commits, version)
}

/// Streams in the Async and Exit modes: the events of a Sync run, but for when the
/// `step_committed` events come; each carries the thread's version at the time; in Async
/// mode a step's commit comes while the next step runs.
async fn streams_in_each_mode<B: Backend>(store: Store<B>, t: String) {
    for (mode, name) in [(Durability::Async, "async"), (Durability::Exit, "exit")] {
        let (events, commits, _) = stream_in_mode(&store, &format!("{t}-{name}"), mode).await;
        let without: Vec<&str> = kinds_of(&events)
            .into_iter()
            .filter(|k| *k != "step_committed")
            .collect();
        assert_eq!(
            without,
            [
                "run_started",
                "step_finished",
                "step_started",
                "node_started",
                "node_finished",
                "step_finished",
                "step_started",
                "node_started",
                "emitted",
                "emitted",
                "node_finished",
                "step_finished",
                "step_started",
                "node_started",
                "node_finished",
                "step_finished",
                "run_finished"
            ],
            "{name}"
        );
        if mode == Durability::Async {
            // Step 1's commit comes in step 2 (before its nodes finish), step 2's in step 3.
            assert_eq!(commits[..2].iter().map(|c| c.0).collect::<Vec<_>>(), [1, 2]);
            let at = kinds_of(&events)
                .iter()
                .position(|k| *k == "step_committed")
                .unwrap();
            let kinds = kinds_of(&events);
            assert_eq!(
                kinds[at - 3..=at + 1],
                [
                    "node_started",
                    "emitted",
                    "emitted",
                    "step_committed",
                    "node_finished"
                ]
            );
            assert!(matches!(
                &events[at - 3],
                Event::NodeStarted { step: 2, .. }
            ));
        }
    }
}

/// The flushes at a run's end are streamed too: in Async mode the last step's (after it),
/// in Exit mode the whole run's (it has no other).
async fn the_last_flush_is_streamed<B: Backend>(store: Store<B>, t: String) {
    for (mode, name) in [(Durability::Async, "async"), (Durability::Exit, "exit")] {
        let (events, commits, version) = stream_in_mode(&store, &format!("{t}-{name}"), mode).await;
        assert_eq!(
            commits.last().copied(),
            Some((3, version)),
            "{name}: {:?}",
            kinds_of(&events)
        );
        if mode == Durability::Async {
            assert_eq!(commits.iter().map(|c| c.0).collect::<Vec<_>>(), [1, 2, 3]);
        }
        // It comes before the run's end.
        let kinds = kinds_of(&events);
        assert_eq!(kinds[kinds.len() - 2..], ["step_committed", "run_finished"]);
    }
}

/// A subgraph's nodes' emissions reach the parent's stream, in memory and durable, as the
/// parent node's own do (a chat model called inside a subgraph streams its text).
async fn a_subgraphs_emissions_are_streamed<B: Backend>(store: Store<B>, t: String) {
    let calls = Calls::default();
    let child = Graph::builder()
        .node("model", chatty(&calls, "model"))
        .entry("model")
        .edge("model", END)
        .build()
        .unwrap();
    let graph = Graph::builder()
        .node(
            "sub",
            agentstate_graph::subgraph::Subgraph::new(
                child,
                |_: &Flow| Flow::default(),
                |c: Flow| FlowUpdate::default().log(c.log),
            ),
        )
        .entry("sub")
        .edge("sub", END)
        .build()
        .unwrap();
    let events: Vec<Event<Flow, &str>> = graph.stream(Flow::default()).collect().await;
    assert_eq!(
        kinds_of(&events)
            .iter()
            .filter(|k| **k == "emitted")
            .count(),
        2,
        "in memory: {:?}",
        kinds_of(&events)
    );
    store.create(&t, Flow::default()).await.unwrap();
    let (events, error) = drain(graph.durable(&store).stream(&t, ())).await;
    assert!(error.is_none(), "{error:?}");
    assert_eq!(
        kinds_of(&events)
            .iter()
            .filter(|k| **k == "emitted")
            .count(),
        2,
        "durable: {:?}",
        kinds_of(&events)
    );
}

/// `model` (streams its reply) -> END, or -> `approve` (asks) -> END, on the chat state.
#[cfg(feature = "ag-ui")]
fn chat_graph(ask: bool) -> Graph<Agent> {
    let builder = Graph::builder()
        .node("model", |_: Arc<Agent>, cx: Context| async move {
            cx.text_delta("m1", "Hel");
            cx.text_delta("m1", "lo!");
            let reply = Message::text_message("Hello!", Role::Assistant).with_id("m1");
            Ok::<_, BoxError>(reply)
        })
        .node("approve", |_: Arc<Agent>, cx: Context| async move {
            let answer = cx.interrupt(json!({"reason": "approve"}))?;
            Ok::<_, BoxError>(Message::text_message(answer.to_string(), Role::User))
        })
        .entry("model")
        .edge("approve", END);
    let builder = if ask {
        builder.edge("model", "approve")
    } else {
        builder.route_to(
            "model",
            [agentstate_graph::Target::from("approve"), END.into()],
            |_: &Agent| END.into(),
        )
    };
    builder.build().unwrap()
}

/// A durable run's stream through the AG-UI adapter, folded by a client: the AG-UI event
/// types, and the client's chat.
#[cfg(feature = "ag-ui")]
async fn ag_ui_of<B: Backend>(
    store: &Store<B>,
    t: &str,
    ask: bool,
) -> (Vec<String>, agentstate::agui::ChatState) {
    use agentstate_graph::agui::AguiAdapter;
    let durable = chat_graph(ask).durable(store);
    let start = Agent::default();
    store.create(t, start.clone()).await.unwrap();
    let mut adapter = AguiAdapter::new(t, &start, |s: &Agent| s.context.as_slice()).unwrap();
    let mut chat = agentstate::agui::ChatState::new();
    let mut types = Vec::new();
    let mut stream = durable.stream(t, ());
    while let Some(item) = stream.next().await {
        for agui in adapter.events(&item.unwrap()) {
            types.push(agui.event_type().to_owned());
            chat.apply(&agui);
        }
    }
    assert!(chat.error().is_none(), "{:?}", chat.error());
    assert_eq!(chat.messages()[0].text(), "Hello!");
    assert!(
        types.iter().any(|t| t == "TEXT_MESSAGE_CONTENT"),
        "{types:?}"
    );
    (types, chat)
}

/// The AG-UI adapter on a durable run's stream: the streamed text and the state fold into an
/// AG-UI client's chat as in memory, and the run's end ends the client's run.
#[cfg(feature = "ag-ui")]
async fn ag_ui_on_a_durable_run<B: Backend>(store: Store<B>, t: String) {
    let (types, chat) = ag_ui_of(&store, &t, false).await;
    assert_eq!(types.last().map(String::as_str), Some("RUN_FINISHED"));
    assert!(!chat.is_running(), "{:?}", chat.phase());
    let stored = serde_json::to_value(store.load::<Agent>(&t).await.unwrap().state).unwrap();
    assert_eq!(chat.agent_state()["context"], stored["context"]);
    // The run's last change too: the `ExecutionState` marked completed when the run ended
    // (after its last step), sent with `RunFinished`.
    assert_eq!(stored["execution_meta"]["status"], "completed");
    assert_eq!(chat.agent_state()["execution_meta"]["status"], "completed");
}

/// A suspended durable run through the AG-UI adapter: the client is told the run ended waiting
/// for its interrupt (`RUN_FINISHED` with an interrupt outcome), with the state as stored.
#[cfg(feature = "ag-ui")]
async fn ag_ui_on_a_suspended_durable_run<B: Backend>(store: Store<B>, t: String) {
    let (types, chat) = ag_ui_of(&store, &t, true).await;
    assert_eq!(
        types.last().map(String::as_str),
        Some("RUN_FINISHED"),
        "{types:?}"
    );
    assert!(!chat.is_running(), "{:?}", chat.phase());
    let stored = store.load::<Agent>(&t).await.unwrap().state;
    assert_eq!(chat.agent_state(), &serde_json::to_value(&stored).unwrap());
}

// ---------------------------------------------------------------------------------------------
// 2. A crash does not rerun a step's finished tasks.

const TTL: Duration = Duration::from_millis(300);

/// `s` -> `a`, `b`, `c`, `d` in parallel -> `j` -> END; `c` and `d` hang on their first call.
fn parallel_graph(calls: &Calls, started: &Gate) -> Graph<Flow> {
    Graph::builder()
        .node("s", plain(calls, "s"))
        .node("a", plain(calls, "a"))
        .node("b", plain(calls, "b"))
        .node("c", stuck_once(calls, "c", started))
        .node("d", stuck_once(calls, "d", started))
        .node("j", plain(calls, "j"))
        .entry("s")
        .edges("s", ["a", "b", "c", "d"])
        .edge("a", "j")
        .edge("b", "j")
        .edge("c", "j")
        .edge("d", "j")
        .edge("j", END)
        .build()
        .unwrap()
}

async fn finished_parallel_tasks_do_not_run_again<B: Backend>(store: Store<B>, t: String) {
    let (calls, started) = (Calls::default(), Gate::new());
    let graph = parallel_graph(&calls, &started);
    let first = graph.durable(&store).worker("first").lease_ttl(TTL);
    store.create(&t, Flow::default()).await.unwrap();
    crash_when(first.run(&t, ()), || async {
        task_entries(&store, &t).await >= 2
    })
    .await;
    let entries = journal(&store, &t).await;
    let tasks: Vec<(u64, String)> = of_kind(&entries, "task")
        .iter()
        .map(|e| {
            (
                meta(e)["index"].as_u64().unwrap(),
                meta(e)["node"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(tasks, [(0, "a".to_owned()), (1, "b".to_owned())]);
    assert_eq!(
        kinds(&entries),
        ["input 0", "step 1", "task 2", "task 2"],
        "{entries:#?}"
    );

    // Another worker, once the lease expired: only the unfinished tasks run again.
    let second = graph.durable(&store).worker("second");
    refused(second.resume(&t).await, "thread_leased");
    tokio::time::sleep(TTL + Duration::from_millis(100)).await;
    let (state, _) = finished(second.resume(&t).await);
    assert_eq!(
        (
            calls.of("s"),
            calls.of("a"),
            calls.of("b"),
            calls.of("c"),
            calls.of("d"),
            calls.of("j")
        ),
        (1, 1, 1, 2, 2, 1)
    );
    // The state is an uninterrupted run's.
    let (calls2, started2) = (Calls::default(), Gate::new());
    started2.open();
    let clean = Graph::builder()
        .node("s", plain(&calls2, "s"))
        .node("a", plain(&calls2, "a"))
        .node("b", plain(&calls2, "b"))
        .node("c", plain(&calls2, "c"))
        .node("d", plain(&calls2, "d"))
        .node("j", plain(&calls2, "j"))
        .entry("s")
        .edges("s", ["a", "b", "c", "d"])
        .edge("a", "j")
        .edge("b", "j")
        .edge("c", "j")
        .edge("d", "j")
        .edge("j", END)
        .build()
        .unwrap();
    let uninterrupted = clean.invoke(Flow::default()).await.unwrap();
    assert_eq!(state, uninterrupted);
    assert_eq!(state.log, log(&["s", "a", "b", "c", "d", "j"]));
    assert_eq!(store.load::<Flow>(&t).await.unwrap().state, uninterrupted);
    let entries = journal(&store, &t).await;
    let steps: Vec<u64> = of_kind(&entries, "step")
        .iter()
        .map(|e| meta(e)["step"].as_u64().unwrap())
        .collect();
    assert_eq!(steps, [1, 2, 3]);
}

/// The same crash in the Async and Exit modes, where finished tasks are staged with the step
/// (they may run again): the final state is still an uninterrupted run's, each step committed
/// once.
async fn a_parallel_crash_in_each_mode<B: Backend>(store: Store<B>, t: String) {
    for (mode, name) in [(Durability::Async, "async"), (Durability::Exit, "exit")] {
        let thread = format!("{t}-{name}");
        let (calls, started) = (Calls::default(), Gate::new());
        let graph = parallel_graph(&calls, &started);
        let first = graph
            .durable(&store)
            .worker("first")
            .lease_ttl(TTL)
            .durability(mode);
        store.create(&thread, Flow::default()).await.unwrap();
        let (a, b) = (calls.clone(), calls.clone());
        crash_when(first.run(&thread, ()), || {
            let done = a.of("a") == 1 && b.of("b") == 1 && started.0.is_closed();
            async move { done }
        })
        .await;
        tokio::time::sleep(TTL + Duration::from_millis(100)).await;
        let second = graph.durable(&store).worker("second").durability(mode);
        let (state, _) = finished(second.resume(&thread).await);
        assert_eq!(state.log, log(&["s", "a", "b", "c", "d", "j"]), "{name}");
        assert_eq!(
            store.load::<Flow>(&thread).await.unwrap().state,
            state,
            "{name}"
        );
        let entries = journal(&store, &thread).await;
        let steps: Vec<u64> = of_kind(&entries, "step")
            .iter()
            .map(|e| meta(e)["step"].as_u64().unwrap())
            .collect();
        assert_eq!(steps, [1, 2, 3], "{name}: {:?}", kinds(&entries));
    }
}

/// How many `Send` tasks the fan-out step has, and from which one they hang on their first
/// call (while `hang` holds).
const SENDS: usize = 100;
const HANG_FROM: usize = 60;

/// `plan` -> `Send`s to `work` for subjects 0..100; `work` logs `work:{subject}`, and from
/// subject 60 hangs on its first call while `hang` holds. The tasks finish in a scrambled
/// order (a short sleep by subject).
fn send_graph(calls: &Calls, hang: &Arc<AtomicBool>) -> Graph<Flow> {
    let work = {
        let (calls, hang) = (calls.clone(), Arc::clone(hang));
        move |s: Arc<Flow>, _: Context| {
            let (calls, hang) = (calls.clone(), Arc::clone(&hang));
            async move {
                let name = format!("work:{}", s.subject);
                let n = calls.hit(&name);
                let i: usize = s.subject.parse().unwrap();
                if i >= HANG_FROM && n == 1 && hang.load(Ordering::SeqCst) {
                    std::future::pending::<()>().await;
                }
                tokio::time::sleep(Duration::from_millis((i * 7 % 5) as u64)).await;
                Ok::<_, BoxError>(FlowUpdate::default().log(vec![name]))
            }
        }
    };
    Graph::builder()
        .node("plan", plain(calls, "plan"))
        .node("work", work)
        .entry("plan")
        .route_send("plan", |_: &Flow| {
            (0..SENDS)
                .map(|i| {
                    Dispatch::to(
                        "work",
                        Flow {
                            subject: i.to_string(),
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

/// 100 `Send` tasks, killed once the first 60 finished and are journaled: another worker runs
/// only the 40 others; each finished task's body ran once, and the state is an uninterrupted
/// run's (the tasks' updates merge in the order sent, whoever ran them).
async fn finished_send_tasks_do_not_run_again<B: Backend>(store: Store<B>, t: String) {
    let (calls, hang) = (Calls::default(), Arc::new(AtomicBool::new(true)));
    let graph = send_graph(&calls, &hang);
    let first = graph.durable(&store).worker("first").lease_ttl(TTL);
    store.create(&t, Flow::default()).await.unwrap();
    crash_when(first.run(&t, ()), || async {
        task_entries(&store, &t).await >= HANG_FROM
    })
    .await;
    hang.store(false, Ordering::SeqCst);
    let second = graph.durable(&store).worker("second");
    tokio::time::sleep(TTL + Duration::from_millis(100)).await;
    let (state, _) = finished(second.resume(&t).await);
    let runs: Vec<usize> = (0..SENDS).map(|i| calls.of(&format!("work:{i}"))).collect();
    let expected: Vec<usize> = (0..SENDS)
        .map(|i| if i < HANG_FROM { 1 } else { 2 })
        .collect();
    assert_eq!(runs, expected);
    assert_eq!(calls.of("plan"), 1);
    let uninterrupted = send_graph(&Calls::default(), &Arc::new(AtomicBool::new(false)))
        .invoke(Flow::default())
        .await
        .unwrap();
    assert_eq!(state, uninterrupted);
    assert_eq!(state.log.len(), SENDS + 1);
    assert_eq!(store.load::<Flow>(&t).await.unwrap().state, uninterrupted);
}

/// A question in a parallel step keeps the other tasks' outputs: they do not run again when
/// the step is resumed with the answer.
async fn a_suspended_parallel_step_keeps_finished_tasks<B: Backend>(store: Store<B>, t: String) {
    for (mode, name) in MODES {
        let thread = format!("{t}-{name}");
        let calls = Calls::default();
        let graph = Graph::builder()
            .node("s", plain(&calls, "s"))
            .node("a", plain(&calls, "a"))
            .node("ask", asking(&calls, "ask"))
            .node("b", plain(&calls, "b"))
            .node("j", plain(&calls, "j"))
            .entry("s")
            .edges("s", ["a", "ask", "b"])
            .edge("a", "j")
            .edge("ask", "j")
            .edge("b", "j")
            .edge("j", END)
            .build()
            .unwrap();
        let durable = graph.durable(&store).durability(mode);
        let (_, interrupts) = suspended(durable.start_as(&thread, "run-1", Flow::default()).await);
        assert_eq!(ids(&interrupts), ["ask:2.1:0@run-1"], "{name}");
        let entries = journal(&store, &thread).await;
        assert_eq!(of_kind(&entries, "task").len(), 2, "{name}: {entries:#?}");
        let (state, _) = finished(
            durable
                .resume_with(&thread, Answers::new().answer("ask:2.1:0@run-1", "ok"))
                .await,
        );
        assert_eq!(state.log, log(&["s", "a", "ask:ok", "b", "j"]), "{name}");
        assert_eq!(
            (calls.of("a"), calls.of("ask"), calls.of("b"), calls.of("j")),
            (1, 2, 1, 1),
            "{name}"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// 3. Static breakpoints.

/// `a` -> `b` -> `c` -> END.
fn chain(calls: &Calls) -> agentstate_graph::GraphBuilder<Flow, &'static str> {
    Graph::builder()
        .node("a", plain(calls, "a"))
        .node("b", plain(calls, "b"))
        .node("c", plain(calls, "c"))
        .entry("a")
        .edge("a", "b")
        .edge("b", "c")
        .edge("c", END)
}

async fn breakpoints_of_the_graph<B: Backend>(store: Store<B>, t: String) {
    let calls = Calls::default();
    let graph = chain(&calls)
        .interrupt_before(["b"])
        .interrupt_after(["b"])
        .build()
        .unwrap();
    let durable = graph.durable(&store);
    let (state, interrupts) = suspended(durable.start_as(&t, "run-1", Flow::default()).await);
    assert_eq!(state.log, log(&["a"]));
    assert_eq!(ids(&interrupts), ["b:2.before@run-1"]);
    assert_eq!(interrupts[0].payload, json!({"breakpoint": "before"}));
    assert_eq!((interrupts[0].node.as_str(), interrupts[0].step), ("b", 2));
    assert_eq!(calls.of("b"), 0);
    assert_eq!(
        durable.status(&t).await.unwrap(),
        RunStatus::Suspended {
            step: 2,
            interrupts: interrupts.clone()
        }
    );
    // Resumed without an answer: the same question.
    let (_, again) = suspended(durable.resume(&t).await);
    assert_eq!(again, interrupts);

    let (state, interrupts) = suspended(
        durable
            .resume_with(&t, Answers::new().answer("b:2.before@run-1", true))
            .await,
    );
    assert_eq!(state.log, log(&["a", "b"]));
    assert_eq!(ids(&interrupts), ["b:2.after@run-1"]);
    assert_eq!(interrupts[0].payload, json!({"breakpoint": "after"}));
    assert_eq!(calls.of("b"), 1);
    assert!(matches!(
        durable.status(&t).await.unwrap(),
        RunStatus::Suspended { interrupts: ref i, .. } if ids(i) == ["b:2.after@run-1"]
    ));
    // An answer to the breakpoint already passed is refused: it is no longer pending.
    let error = refused(
        durable
            .resume_with(&t, Answers::new().answer("b:2.before@run-1", true))
            .await,
        "interrupt_unknown",
    );
    assert!(error.to_string().contains("pending: b:2.after"), "{error}");
    let (state, _) = finished(
        durable
            .resume_with(&t, Answers::new().answer("b:2.after@run-1", Value::Null))
            .await,
    );
    assert_eq!(state.log, log(&["a", "b", "c"]));
    assert_eq!((calls.of("a"), calls.of("b"), calls.of("c")), (1, 1, 1));
    assert_eq!(
        durable.status(&t).await.unwrap(),
        RunStatus::Idle { step: 3 }
    );
    // A new run stops at the same breakpoints again (its steps count from 1 again), with ids
    // of its own: an answer to the first run's is refused; answered, it goes through.
    let (_, interrupts) = suspended(durable.run_as(&t, "run-2", ()).await);
    assert_eq!(ids(&interrupts), ["b:2.before@run-2"]);
    refused(
        durable
            .resume_with(&t, Answers::new().answer("b:2.before@run-1", true))
            .await,
        "interrupt_unknown",
    );
    let (_, interrupts) = suspended(
        durable
            .resume_with(&t, Answers::new().answer("b:2.before@run-2", true))
            .await,
    );
    assert_eq!(ids(&interrupts), ["b:2.after@run-2"]);
    let (state, _) = finished(
        durable
            .resume_with(&t, Answers::new().answer("b:2.after@run-2", true))
            .await,
    );
    assert_eq!(state.log, log(&["a", "b", "c", "a", "b", "c"]));
}

/// A worker's own breakpoints (`DurableGraph::interrupt_before`/`_after`), in every mode;
/// another worker without them does not stop there.
async fn breakpoints_of_a_worker<B: Backend>(store: Store<B>, t: String) {
    for (mode, name) in MODES {
        let thread = format!("{t}-{name}");
        let calls = Calls::default();
        let graph = chain(&calls).build().unwrap();
        let durable = graph
            .durable(&store)
            .durability(mode)
            .interrupt_before(["c"])
            .interrupt_after(["a"]);
        let (state, interrupts) =
            suspended(durable.start_as(&thread, "run-1", Flow::default()).await);
        assert_eq!(
            (state.log, ids(&interrupts)),
            (log(&["a"]), vec!["a:1.after@run-1"]),
            "{name}"
        );
        // Stored: another worker sees the suspension.
        let other = graph.durable(&store);
        assert!(
            matches!(other.status(&thread).await.unwrap(), RunStatus::Suspended { interrupts: ref i, .. } if ids(i) == ["a:1.after@run-1"]),
            "{name}"
        );
        let (state, interrupts) = suspended(
            durable
                .resume_with(&thread, Answers::new().answer("a:1.after@run-1", 1))
                .await,
        );
        assert_eq!(
            (state.log, ids(&interrupts)),
            (log(&["a", "b"]), vec!["c:3.before@run-1"]),
            "{name}"
        );
        assert_eq!(
            store.load::<Flow>(&thread).await.unwrap().state.log,
            log(&["a", "b"]),
            "{name}"
        );
        let (state, _) = finished(
            durable
                .resume_with(&thread, Answers::new().answer("c:3.before@run-1", 1))
                .await,
        );
        assert_eq!(state.log, log(&["a", "b", "c"]), "{name}");
        assert_eq!((calls.of("a"), calls.of("b"), calls.of("c")), (1, 1, 1));

        // Without the breakpoints: no stop.
        let (state, _) = finished(other.run(&thread, ()).await);
        assert_eq!(state.log.len(), 6, "{name}");
    }
    // Two breakpoints due at once (after `a`, before `b`) are one suspension; answering one
    // leaves the other.
    let calls = Calls::default();
    let durable = chain(&calls)
        .build()
        .unwrap()
        .durable(&store)
        .interrupt_after(["a"])
        .interrupt_before(["b"]);
    let thread = format!("{t}-both");
    let (_, interrupts) = suspended(durable.start_as(&thread, "run-1", Flow::default()).await);
    assert_eq!(ids(&interrupts), ["a:1.after@run-1", "b:2.before@run-1"]);
    let (_, interrupts) = suspended(
        durable
            .resume_with(&thread, Answers::new().answer("b:2.before@run-1", 1))
            .await,
    );
    assert_eq!(ids(&interrupts), ["a:1.after@run-1"]);
    assert_eq!(calls.of("b"), 0);
    let (state, _) = finished(
        durable
            .resume_with(&thread, Answers::new().answer("a:1.after@run-1", 1))
            .await,
    );
    assert_eq!(state.log, log(&["a", "b", "c"]));
    // A worker's breakpoint naming a node the graph lacks is refused when a run starts.
    let bad = chain(&calls)
        .build()
        .unwrap()
        .durable(&store)
        .interrupt_before(["ghost"]);
    let thread = format!("{t}-bad");
    store.create(&thread, Flow::default()).await.unwrap();
    refused(bad.run(&thread, ()).await, "run_state_invalid");
    assert_eq!(journal(&store, &thread).await.len(), 0);
}

/// A breakpoint in a run in memory fails it with `interrupt_outside_durable_run` (invoke and
/// stream); a breakpoint naming a node the graph lacks is refused when it is built.
async fn breakpoints_in_memory_and_at_build<B: Backend>(_: Store<B>, _: String) {
    let calls = Calls::default();
    let graph = chain(&calls).interrupt_before(["b"]).build().unwrap();
    let error = graph.invoke(Flow::default()).await.unwrap_err();
    assert_eq!(error.category(), "interrupt_outside_durable_run");
    assert_eq!(error.state().log, log(&["a"]));
    assert_eq!(calls.of("b"), 0);
    let events: Vec<Event<Flow, &str>> = graph.stream(Flow::default()).collect().await;
    match events.last() {
        Some(Event::RunFailed { error }) => {
            assert_eq!(error.category(), "interrupt_outside_durable_run")
        }
        other => panic!("{other:?}"),
    }
    let graph = chain(&calls).interrupt_after(["a"]).build().unwrap();
    let error = graph.invoke(Flow::default()).await.unwrap_err();
    assert_eq!(error.category(), "interrupt_outside_durable_run");
    assert_eq!(error.state().log, log(&["a"]));

    for built in [
        chain(&calls).interrupt_before(["ghost"]).build(),
        chain(&calls).interrupt_after(["ghost"]).build(),
    ] {
        let error = built.unwrap_err();
        assert_eq!(error.category(), "dangling_edge");
        assert!(error.to_string().contains("ghost"), "{error}");
    }
}

/// LangGraph suspends after a node given to `interrupt_after` even when the run would end
/// there; here a breakpoint after the last node never fires.
async fn a_breakpoint_after_the_last_node<B: Backend>(store: Store<B>, t: String) {
    let calls = Calls::default();
    let durable = chain(&calls)
        .interrupt_after(["c"])
        .build()
        .unwrap()
        .durable(&store);
    let (state, interrupts) = suspended(durable.start_as(&t, "run-1", Flow::default()).await);
    assert_eq!(state.log, log(&["a", "b", "c"]));
    assert_eq!(ids(&interrupts), ["c:3.after@run-1"]);
    let (state, _) = finished(
        durable
            .resume_with(&t, Answers::new().answer("c:3.after@run-1", 1))
            .await,
    );
    assert_eq!(state.log, log(&["a", "b", "c"]));
    assert_eq!(
        durable.status(&t).await.unwrap(),
        RunStatus::Idle { step: 3 }
    );
}

/// A breakpoint before a `Send` step's node is one interrupt for all its tasks; answered, the
/// tasks run once each with their inputs; a crash after the answer does not suspend again.
async fn a_breakpoint_before_send_tasks<B: Backend>(store: Store<B>, t: String) {
    let (calls, hang) = (Calls::default(), Arc::new(AtomicBool::new(false)));
    let graph = send_graph(&calls, &hang);
    let durable = graph
        .durable(&store)
        .interrupt_before(["work"])
        .lease_ttl(TTL);
    let (state, interrupts) = suspended(durable.start_as(&t, "run-1", Flow::default()).await);
    assert_eq!(
        (state.log, ids(&interrupts)),
        (log(&["plan"]), vec!["work:2.before@run-1"])
    );
    assert_eq!(calls.of("work:0"), 0);
    // Answered, then cut short while the tasks run (from task 60 they hang).
    hang.store(true, Ordering::SeqCst);
    crash_when(
        durable.resume_with(&t, Answers::new().answer("work:2.before@run-1", true)),
        || async { task_entries(&store, &t).await >= HANG_FROM },
    )
    .await;
    hang.store(false, Ordering::SeqCst);
    let (state, _) = finished(durable.resume(&t).await);
    assert_eq!(state.log.len(), SENDS + 1);
    let runs: Vec<usize> = (0..SENDS).map(|i| calls.of(&format!("work:{i}"))).collect();
    let expected: Vec<usize> = (0..SENDS)
        .map(|i| if i < HANG_FROM { 1 } else { 2 })
        .collect();
    assert_eq!(runs, expected);
}

// ---------------------------------------------------------------------------------------------
// 4. A failing step merges nothing.

/// `a` -> `b` (its edge fails: a routing error, or an `Err`) -> `c`.
fn failing_edge_graph(calls: &Calls, err: bool) -> Graph<Flow> {
    let builder = Graph::builder()
        .node("a", plain(calls, "a"))
        .node("b", plain(calls, "b"))
        .node("c", plain(calls, "c"))
        .entry("a")
        .edge("a", "b")
        .edge("c", END);
    let builder = if err {
        builder.try_route("b", |_: &Flow| {
            Err::<agentstate_graph::Routes<&str>, _>("the edge failed")
        })
    } else {
        builder.route_to("b", ["c"], |_: &Flow| "ghost".into())
    };
    builder.build().unwrap()
}

async fn a_failing_step_merges_nothing<B: Backend>(store: Store<B>, t: String) {
    for (err, category) in [(false, "routing_error"), (true, "edge_exception")] {
        // In memory: invoke, and the stream's `RunFailed`.
        let calls = Calls::default();
        let graph = failing_edge_graph(&calls, err);
        let error = graph.invoke(Flow::default()).await.unwrap_err();
        assert_eq!(error.category(), category);
        assert_eq!((error.step(), &error.state().log), (2, &log(&["a"])));
        let events: Vec<Event<Flow, &str>> = graph.stream(Flow::default()).collect().await;
        match events.last() {
            Some(Event::RunFailed { error }) => {
                assert_eq!(error.category(), category);
                assert_eq!(error.state().log, log(&["a"]));
            }
            other => panic!("{other:?}"),
        }
        let finished_steps = events
            .iter()
            .filter(|e| matches!(e, Event::StepFinished { .. }))
            .count();
        // The run's start (its input merged) and step 1: step 2 failed, nothing of it merged.
        assert_eq!(finished_steps, 2);

        for (mode, name) in [
            (Durability::Sync, "sync"),
            (Durability::Async, "async"),
            (Durability::Exit, "exit"),
        ] {
            let thread = format!("{t}-{err}-{name}");
            let durable = graph.durable(&store).durability(mode);
            let error = durable.start(&thread, Flow::default()).await.unwrap_err();
            assert_eq!(error.category(), category, "{name}");
            let DurableError::Run(error) = error else {
                panic!("{name}: a run error: {error:?}")
            };
            assert_eq!(
                (error.step(), &error.state().log),
                (2, &log(&["a"])),
                "{name}"
            );
            assert_eq!(
                store.load::<Flow>(&thread).await.unwrap().state.log,
                log(&["a"]),
                "{name}"
            );
            let entries = journal(&store, &thread).await;
            assert_eq!(
                kinds(&entries),
                ["input 0", "step 1", "failed 2"],
                "{name}: {entries:#?}"
            );
            assert_eq!(meta(&entries[2])["category"], category);
            assert_eq!(
                durable.status(&thread).await.unwrap(),
                RunStatus::Running {
                    step: 1,
                    next: log(&["b"])
                },
                "{name}"
            );
            // Its stream: `RunFailed` is the error, the state before the step.
            let thread = format!("{thread}-stream");
            store.create(&thread, Flow::default()).await.unwrap();
            let (events, error) = drain(durable.stream(&thread, ())).await;
            let Some(DurableError::Run(error)) = error else {
                panic!("{name}: {error:?}")
            };
            assert_eq!(error.state().log, log(&["a"]), "{name}");
            assert_eq!(
                events
                    .iter()
                    .filter(|e| matches!(e, Event::StepFinished { .. }))
                    .count(),
                2, // the run's start, and step 1
                "{name}"
            );
            assert_eq!(
                store.load::<Flow>(&thread).await.unwrap().state.log,
                log(&["a"]),
                "{name}"
            );
        }
    }
}

/// `s`, then `a` and `name` (`node`) in parallel, then `j`.
fn beside_a(calls: &Calls, name: &'static str, node: impl Node<Flow>) -> Graph<Flow> {
    Graph::builder()
        .node("s", plain(calls, "s"))
        .node("a", plain(calls, "a"))
        .node(name, node)
        .node("j", plain(calls, "j"))
        .entry("s")
        .edges("s", ["a", name])
        .edge("a", "j")
        .edge(name, "j")
        .edge("j", END)
        .build()
        .unwrap()
}

/// A failing step of parallel nodes (one fails) merges nothing of the others, in every mode;
/// a resume runs only the failed task again.
async fn a_failing_parallel_step_merges_nothing<B: Backend>(store: Store<B>, t: String) {
    for (mode, name) in MODES {
        let thread = format!("{t}-{name}");
        let calls = Calls::default();
        let graph = beside_a(&calls, "f", failing(&calls, "f", 1));
        let durable = graph.durable(&store).durability(mode);
        let error = durable.start(&thread, Flow::default()).await.unwrap_err();
        let DurableError::Run(error) = error else {
            panic!("{name}: {error:?}")
        };
        assert_eq!(error.state().log, log(&["s"]), "{name}");
        assert_eq!(
            store.load::<Flow>(&thread).await.unwrap().state.log,
            log(&["s"]),
            "{name}"
        );
        let entries = journal(&store, &thread).await;
        assert!(
            of_kind(&entries, "step").len() == 1 && of_kind(&entries, "failed").len() == 1,
            "{name}: {:?}",
            kinds(&entries)
        );
        let (state, _) = finished(durable.resume(&thread).await);
        assert_eq!(state.log, log(&["s", "a", "f", "j"]), "{name}");
        assert_eq!((calls.of("a"), calls.of("f")), (1, 2), "{name}");
    }
}

/// A node that panics on its first `n` calls: when called (odd calls) or while it runs (even).
fn panicking(calls: &Calls, name: &'static str, n: usize) -> impl Node<Flow> {
    let calls = calls.clone();
    move |_: Arc<Flow>, _: Context| {
        let call = calls.hit(name);
        if call <= n && call % 2 == 1 {
            panic!("{name} blew up when called");
        }
        async move {
            tokio::task::yield_now().await;
            if call <= n {
                panic!("{name} blew up while it ran");
            }
            Ok::<_, BoxError>(FlowUpdate::default().log(vec![name.to_owned()]))
        }
    }
}

/// A node's panic ends a durable run as a node's error does, with `run_panicked`, through
/// `run`, a stream and `resume`, in every mode: the step merges nothing, its finished task is
/// kept, the failure is journaled, the lease released; a resume runs the step again.
async fn a_panicking_node_fails_the_run<B: Backend>(store: Store<B>, t: String) {
    for (mode, name) in MODES {
        let thread = format!("{t}-{name}");
        let calls = Calls::default();
        let graph = beside_a(&calls, "boom", panicking(&calls, "boom", 2));
        let durable = graph.durable(&store).durability(mode);
        store.create(&thread, Flow::default()).await.unwrap();
        let error = refused(durable.run(&thread, ()).await, "run_panicked");
        assert_eq!(
            error.to_string(),
            "node `boom` panicked in step 2: boom blew up when called",
            "{name}"
        );
        let DurableError::Run(error) = error else {
            panic!("{name}: {error:?}")
        };
        assert_eq!(error.state().log, log(&["s"]), "{name}");
        assert!(store.lease_info(&thread).await.unwrap().is_none(), "{name}");
        assert_eq!(
            store.load::<Flow>(&thread).await.unwrap().state.log,
            log(&["s"]),
            "{name}"
        );
        let entries = journal(&store, &thread).await;
        assert_eq!(
            kinds(&entries),
            ["input 0", "step 1", "task 2", "failed 2"],
            "{name}"
        );
        assert_eq!(meta(&entries[3])["category"], "run_panicked", "{name}");
        assert_eq!(
            meta(&entries[3])["error"],
            "node `boom` panicked in step 2: boom blew up when called",
            "{name}"
        );

        // Streamed: the stream's last item is the error.
        let mut stream = durable.stream_resume(&thread, Answers::new());
        let mut last = None;
        while let Some(item) = stream.next().await {
            last = Some(item);
        }
        match last {
            Some(Err(error)) => assert_eq!(
                (error.category(), error.to_string().as_str()),
                (
                    "run_panicked",
                    "node `boom` panicked in step 2: boom blew up while it ran"
                ),
                "{name}"
            ),
            other => panic!("{name}: the stream ends with the panic, got {other:?}"),
        }
        assert!(store.lease_info(&thread).await.unwrap().is_none(), "{name}");
        assert_eq!(
            store.load::<Flow>(&thread).await.unwrap().state.log,
            log(&["s"]),
            "{name}"
        );

        let (state, _) = finished(durable.resume(&thread).await);
        assert_eq!(state.log, log(&["s", "a", "boom", "j"]), "{name}");
        assert_eq!((calls.of("a"), calls.of("boom")), (1, 3), "{name}");
    }
}

// ---------------------------------------------------------------------------------------------
// 5. Warm workers.

/// Two runs of one thread at once by clones of one `DurableGraph` (a server's handlers share
/// it; a client retries a request): one run per thread holds, the second (a resume) is refused
/// with `thread_leased` before any node runs.
async fn clones_of_a_worker_do_not_run_a_thread_twice<B: Backend>(store: Store<B>, t: String) {
    let calls = Calls::default();
    let (started, release) = (Gate::new(), Gate::new());
    let graph = Graph::builder()
        .node("a", {
            let (calls, started, release) = (calls.clone(), started.clone(), release.clone());
            move |_: Arc<Flow>, _: Context| {
                let (calls, started, release) = (calls.clone(), started.clone(), release.clone());
                async move {
                    calls.hit("a");
                    started.open();
                    release.wait().await;
                    Ok::<_, BoxError>(FlowUpdate::default().log(vec!["a".to_owned()]))
                }
            }
        })
        .entry("a")
        .edge("a", END)
        .build()
        .unwrap();
    let durable = graph.durable(&store);
    let other = durable.clone();
    store.create(&t, Flow::default()).await.unwrap();
    let contend = async {
        started.wait().await;
        let second = tokio::time::timeout(Duration::from_millis(500), other.resume(&t)).await;
        let during = calls.of("a");
        release.open();
        (second, during)
    };
    let (first, (second, during)) = tokio::join!(durable.run(&t, ()), contend);
    let first_ok = first.is_ok();
    assert_eq!(
        during, 1,
        "the second run ran a node body while the first ran: {second:?}"
    );
    match second {
        Ok(outcome) => {
            refused(outcome, "thread_leased");
        }
        Err(_) => panic!("the second run was neither refused nor done in 500 ms"),
    }
    assert!(first_ok);
}

/// `count` logs `n{len}`: what it writes depends on the state it read.
fn counting() -> Graph<Flow> {
    Graph::builder()
        .node("count", |s: Arc<Flow>, _: Context| async move {
            Ok::<_, BoxError>(FlowUpdate::default().log(vec![format!("n{}", s.log.len())]))
        })
        .entry("count")
        .edge("count", END)
        .build()
        .unwrap()
}

async fn warm_runs_are_cold_runs<B: Backend>(store: Store<B>, t: String) {
    let graph = counting();
    let mut results = Vec::new();
    for keep in [64, 0] {
        let thread = format!("{t}-{keep}");
        let durable = graph.durable(&store).keep_threads(keep);
        let mut versions = Vec::new();
        let (state, v) = finished(durable.start(&thread, Flow::default()).await);
        versions.push(v);
        for _ in 0..3 {
            let (_, v) = finished(
                durable
                    .run(&thread, FlowUpdate::default().log(vec!["in".to_owned()]))
                    .await,
            );
            versions.push(v);
        }
        let stored = store.load::<Flow>(&thread).await.unwrap();
        let last = finished(durable.resume(&thread).await);
        assert_eq!(
            (last.0.clone(), last.1),
            (stored.state.clone(), stored.version)
        );
        let _ = state;
        results.push((
            stored.state,
            versions,
            kinds(&journal(&store, &thread).await),
        ));
    }
    assert_eq!(results[0], results[1]);
    assert_eq!(
        results[0].0.log,
        log(&["n0", "in", "n2", "in", "n4", "in", "n6"])
    );
}

async fn a_warm_worker_catches_up<B: Backend>(store: Store<B>, t: String) {
    let graph = counting();
    let warm = graph.durable(&store).worker("warm");
    let other = graph.durable(&store).worker("other");
    finished(warm.start(&t, Flow::default()).await);
    // Another worker's run, then a plain merge by someone else.
    finished(other.run(&t, ()).await);
    let mut thread = store.thread::<Flow>(&t).await.unwrap();
    thread
        .merge(
            FlowUpdate::default().log(vec!["plain".to_owned()]),
            StepMeta::node("someone"),
        )
        .await
        .unwrap();
    let (state, version) = finished(warm.run(&t, ()).await);
    assert_eq!(state.log, log(&["n0", "n1", "plain", "n3"]));
    assert_eq!(version, store.info(&t).await.unwrap().version);
    // Another worker's run left unfinished (cut short): the warm worker resumes it, and
    // refuses a new run until it is.
    let (calls, started, hang) = (
        Calls::default(),
        Gate::new(),
        Arc::new(AtomicBool::new(false)),
    );
    let two = Graph::builder()
        .node("count", plain(&calls, "count"))
        .node("b", hanging(&calls, "b", &started, &hang))
        .entry("count")
        .edge("count", "b")
        .edge("b", END)
        .build()
        .unwrap();
    let warm = two.durable(&store).worker("warm");
    let other = two.durable(&store).worker("other").lease_ttl(TTL);
    finished(warm.run(&t, ()).await);
    hang.store(true, Ordering::SeqCst);
    crash_when(other.run(&t, ()), || async { started.0.is_closed() }).await;
    hang.store(false, Ordering::SeqCst);
    tokio::time::sleep(TTL + Duration::from_millis(100)).await;
    refused(warm.run(&t, ()).await, "run_state_invalid");
    let (state, _) = finished(warm.resume(&t).await);
    assert_eq!(
        state.log[state.log.len() - 4..],
        log(&["count", "b", "count", "b"])
    );
    assert_eq!((calls.of("count"), calls.of("b")), (2, 3));
}

/// A warm worker's new run takes the lease with its input and gives it back with its last
/// step (one write each): free after the run, and a run while another holds it writes nothing.
async fn a_warm_run_takes_the_lease_with_its_input<B: Backend>(store: Store<B>, t: String) {
    let graph = counting();
    let warm = graph.durable(&store).worker("warm");
    finished(warm.start(&t, Flow::default()).await);
    let before = store.info(&t).await.unwrap().version;
    let (state, version) = finished(
        warm.run(&t, FlowUpdate::default().log(vec!["in".into()]))
            .await,
    );
    assert_eq!(state.log, log(&["n0", "in", "n2"]));
    // The input and the step with the run's end: two entries more, the lease free again.
    assert_eq!(version, before + 2);
    assert_eq!(store.lease_info(&t).await.unwrap(), None);
    // Held by another: refused, nothing written, the handle still warm and current after.
    let theirs = store
        .lease(&t, "other", Duration::from_secs(30))
        .await
        .unwrap();
    let err = warm.run(&t, ()).await.unwrap_err();
    assert_eq!(err.category(), "thread_leased", "{err}");
    assert_eq!(store.info(&t).await.unwrap().version, version);
    theirs.release().await.unwrap();
    let (state, _) = finished(warm.run(&t, ()).await);
    assert_eq!(state.log, log(&["n0", "in", "n2", "n3"]));
    assert_eq!(store.lease_info(&t).await.unwrap(), None);
    // A suspended run gives the lease back too.
    let asks = Graph::builder()
        .node("ask", |_: Arc<Flow>, cx: Context| async move {
            let answer = cx.interrupt("ok?")?;
            Ok::<_, BoxError>(FlowUpdate::default().log(vec![answer.to_string()]))
        })
        .entry("ask")
        .edge("ask", END)
        .build()
        .unwrap();
    let warm = asks.durable(&store).worker("warm");
    let asked = format!("{t}-ask");
    suspended(warm.start(&asked, Flow::default()).await);
    assert_eq!(store.lease_info(&asked).await.unwrap(), None);
}

/// A thread deleted and created again between two runs of a warm worker is read afresh: at a
/// lower version, and at the same version as the worker's handle with a run left unfinished.
async fn a_recreated_thread_is_not_served_stale<B: Backend>(store: Store<B>, t: String) {
    let (calls, started, hang) = (
        Calls::default(),
        Gate::new(),
        Arc::new(AtomicBool::new(false)),
    );
    let graph = Graph::builder()
        .node("a", plain(&calls, "a"))
        .node("b", hanging(&calls, "b", &started, &hang))
        .entry("a")
        .edge("a", "b")
        .edge("b", END)
        .build()
        .unwrap();
    let warm = graph.durable(&store).worker("warm");
    let (_, version) = finished(warm.start(&t, Flow::default()).await);
    assert_eq!(version, 3); // input, a, b

    // Created again, with another state: a lower version.
    assert!(store.delete(&t).await.unwrap());
    store
        .create(
            &t,
            Flow {
                subject: "second".into(),
                ..Flow::default()
            },
        )
        .await
        .unwrap();
    let (state, version) = finished(warm.run(&t, ()).await);
    assert_eq!(
        (state.subject.as_str(), &state.log[..], version),
        ("second", &log(&["a", "b"])[..], 3)
    );

    // Created again, and another worker's run cut short there at the same version (3).
    assert!(store.delete(&t).await.unwrap());
    let mut thread = store
        .create(
            &t,
            Flow {
                subject: "third".into(),
                ..Flow::default()
            },
        )
        .await
        .unwrap();
    thread
        .merge(
            FlowUpdate::default().log(vec!["plain".to_owned()]),
            StepMeta::node("someone"),
        )
        .await
        .unwrap();
    let other = graph.durable(&store).worker("other").lease_ttl(TTL);
    hang.store(true, Ordering::SeqCst);
    crash_when(other.run(&t, ()), || async { started.0.is_closed() }).await;
    hang.store(false, Ordering::SeqCst);
    assert_eq!(store.info(&t).await.unwrap().version, 3);
    tokio::time::sleep(TTL + Duration::from_millis(100)).await;
    assert_eq!(
        warm.status(&t).await.unwrap(),
        RunStatus::Running {
            step: 1,
            next: log(&["b"])
        }
    );
    // The warm worker resumes that run (it is not finished) rather than calling it finished.
    let (state, _) = finished(warm.resume(&t).await);
    assert_eq!(
        (state.subject.as_str(), &state.log[..]),
        ("third", &log(&["plain", "a", "b"])[..])
    );
}

// ---------------------------------------------------------------------------------------------
// 6. The journal is the typed enum.

async fn every_entry_reads_as_a_journal_entry<B: Backend>(store: Store<B>, t: String) {
    let calls = Calls::default();
    let (asked, failed) = (calls.clone(), calls.clone());
    let say = |text: &'static str| {
        move |_: Arc<Agent>, _: Context| async move {
            Ok::<_, BoxError>(Message::text_message(text, Role::Assistant))
        }
    };
    let graph = Graph::builder()
        .node("plan", say("plan"))
        .node("pay", |_: Arc<Agent>, cx: Context| async move {
            let receipt: String = cx
                .effect("charge", |_| async {
                    Ok::<_, std::io::Error>("r-1".to_owned())
                })
                .await?;
            Ok::<_, BoxError>(Message::text_message(receipt, Role::Tool))
        })
        .node("ask", move |_: Arc<Agent>, cx: Context| {
            asked.hit("ask");
            async move {
                let answer = cx.interrupt(json!({"ok?": true}))?;
                Ok::<_, BoxError>(Message::text_message(answer.to_string(), Role::User))
            }
        })
        .node("flaky", move |_: Arc<Agent>, _: Context| {
            let n = failed.hit("flaky");
            async move {
                if n == 1 {
                    return Err::<Message, BoxError>("flaky failed".into());
                }
                Ok(Message::text_message("flaky", Role::Assistant))
            }
        })
        .node("end", say("end"))
        .entry("plan")
        .edges("plan", ["pay", "ask"])
        .edge("pay", "flaky")
        .edge("ask", "flaky")
        .edge("flaky", "end")
        .edge("end", END)
        .build()
        .unwrap();
    let durable = graph.durable(&store);
    let (_, interrupts) = suspended(durable.start(&t, Agent::default()).await);
    let answers = Answers::new().answer(&interrupts[0].id, "yes");
    let error = durable.resume_with(&t, answers).await.unwrap_err();
    assert_eq!(error.category(), "node_exception");
    finished(durable.resume(&t).await);
    let entries = journal(&store, &t).await;
    let mut seen = std::collections::BTreeSet::new();
    for entry in &entries {
        let meta = meta(entry).clone();
        let read: JournalEntry = serde_json::from_value(meta.clone())
            .unwrap_or_else(|e| panic!("entry {} does not read: {e}: {meta}", entry.seq));
        assert_eq!(serde_json::to_value(&read).unwrap(), meta, "{}", entry.seq);
        seen.insert(meta["entry"].as_str().unwrap().to_owned());
    }
    assert_eq!(
        seen.into_iter().collect::<Vec<_>>(),
        ["answers", "effect", "end", "failed", "input", "step", "suspend", "task"]
    );
}

/// A thread suspended by a build whose interrupt ids had no run in them (`"{node}:{step}.
/// {task}:{n}"`, `"{node}:{step}.before"`): answered by those ids, the asking node gets its
/// answer and the breakpoint lets the run go on.
async fn an_interrupt_id_without_its_run_is_answered<B: Backend>(store: Store<B>, t: String) {
    let calls = Calls::default();
    let graph = Graph::builder()
        .node("a", plain(&calls, "a"))
        .node("ask", asking(&calls, "ask"))
        .entry("a")
        .edge("a", "ask")
        .edge("ask", END)
        .build()
        .unwrap();
    let durable = graph.durable(&store).interrupt_before(["ask"]);
    let entry = |m: Value| StepMeta::default().run_id("run-1").with(META_KEY, m);
    let mut thread = store.create(&t, Flow::default()).await.unwrap();
    for meta in [
        json!({"entry": "input", "step": 0, "next": ["a"]}),
        json!({"entry": "step", "step": 1, "nodes": ["a"], "next": ["ask"]}),
        json!({"entry": "suspend", "step": 2, "interrupts": [{
            "id": "ask:2.before", "node": "ask", "step_node": "ask", "step": 2,
            "payload": {"breakpoint": "before"}
        }]}),
    ] {
        thread.merge((), entry(meta)).await.unwrap();
    }
    let (_, interrupts) = suspended(
        durable
            .resume_with(&t, Answers::new().answer("ask:2.before", true))
            .await,
    );
    assert_eq!(ids(&interrupts), ["ask:2.0:0@run-1"]);
    // The question as an earlier build would have suspended on it.
    let asked = json!({
        "id": "ask:2.0:0", "node": "ask", "step_node": "ask", "step": 2, "payload": {"from": "ask"}
    });
    let suspend = json!({"entry": "suspend", "step": 2, "interrupts": [asked]});
    thread.reload().await.unwrap();
    thread.merge((), entry(suspend)).await.unwrap();
    let (state, _) = finished(
        durable
            .resume_with(&t, Answers::new().answer("ask:2.0:0", "yes"))
            .await,
    );
    assert_eq!(state.log, log(&["ask:yes"]));
    assert_eq!((calls.of("a"), calls.of("ask")), (0, 2));
}

/// An entry of a newer format (`"v": 2`), or one that does not read, makes `status` and
/// `resume` fail with `run_journal_invalid` naming it; entries without `v` (the format before
/// the version) and with `"v": 1` read.
async fn journal_versions<B: Backend>(store: Store<B>, t: String) {
    let calls = Calls::default();
    let graph = Graph::builder()
        .node("a", plain(&calls, "a"))
        .node("b", plain(&calls, "b"))
        .node("c", plain(&calls, "c"))
        .node("j", plain(&calls, "j"))
        .entry("a")
        .edges("a", ["b", "c"])
        .edge("b", "j")
        .edge("c", "j")
        .edge("j", END)
        .build()
        .unwrap();
    let durable = graph.durable(&store);
    // A journal written by hand as the format before the version wrote it: the input, step 1
    // (`a`), then step 2 suspended with `b`'s output kept in the suspension (`done`, as the
    // builds before task entries kept it) and `c`'s question.
    let mut thread = store.create(&t, Flow::default()).await.unwrap();
    let entry = |m: Value| StepMeta::default().run_id("run-1").with(META_KEY, m);
    thread
        .merge(
            (),
            entry(json!({"entry": "input", "step": 0, "next": ["a"]})),
        )
        .await
        .unwrap();
    thread
        .merge(
            FlowUpdate::default().log(vec!["a".to_owned()]),
            entry(json!({"entry": "step", "step": 1, "nodes": ["a"], "next": ["b", "c"]})),
        )
        .await
        .unwrap();
    let interrupt = json!({
        "id": "c:2.1:0", "node": "c", "step_node": "c", "step": 2, "payload": {"q": 1}
    });
    thread
        .merge(
            (),
            entry(json!({
                "entry": "suspend", "step": 2, "interrupts": [interrupt],
                "done": {"0": {"log": ["b-kept"]}}
            })),
        )
        .await
        .unwrap();
    let status = durable.status(&t).await.unwrap();
    let RunStatus::Suspended { step, interrupts } = status else {
        panic!("{status:?}")
    };
    assert_eq!((step, ids(&interrupts)), (2, vec!["c:2.1:0"]));
    // A `"v": 1` entry reads as well.
    thread
        .merge(
            (),
            entry(json!({"entry": "effect", "v": 1, "step": 2, "key": "2.1/e0", "name": "x", "value": 1})),
        )
        .await
        .unwrap();
    let (state, _) = finished(
        durable
            .resume_with(&t, Answers::new().answer("c:2.1:0", "yes"))
            .await,
    );
    assert_eq!(state.log, log(&["a", "b-kept", "c", "j"]));
    assert_eq!((calls.of("a"), calls.of("b"), calls.of("c")), (0, 0, 1));

    // An entry of format 2 after a step: refused, naming the entry.
    let mut thread = store.thread::<Flow>(&t).await.unwrap();
    let seq = thread
        .merge(
            (),
            entry(json!({"entry": "effect", "v": 2, "step": 9, "key": "9.0/e0", "name": "x", "value": 1})),
        )
        .await
        .unwrap();
    for error in [
        durable.status(&t).await.unwrap_err(),
        durable.resume(&t).await.unwrap_err(),
        durable.run(&t, ()).await.unwrap_err(),
    ] {
        assert_eq!(error.category(), "run_journal_invalid");
        let text = error.to_string();
        assert!(
            text.contains(&format!("entry {seq}")) && text.contains("format 2"),
            "{text}"
        );
    }
    // An entry that does not read.
    let t2 = format!("{t}-bad");
    let mut thread = store.create(&t2, Flow::default()).await.unwrap();
    let seq = thread
        .merge((), entry(json!({"entry": "bogus", "step": 1})))
        .await
        .unwrap();
    let error = durable.status(&t2).await.unwrap_err();
    assert_eq!(error.category(), "run_journal_invalid");
    assert!(
        error.to_string().contains(&format!("entry {seq}")),
        "{error}"
    );
}

// ---------------------------------------------------------------------------------------------
// 7. The lease.

/// A node that blocks its OS thread on its first call (`std::thread::sleep`).
fn blocking(calls: &Calls, name: &'static str, ms: u64) -> impl Node<Flow> {
    let calls = calls.clone();
    move |_: Arc<Flow>, _: Context| {
        let calls = calls.clone();
        async move {
            if calls.hit(name) == 1 {
                std::thread::sleep(Duration::from_millis(ms));
            }
            Ok::<_, BoxError>(FlowUpdate::default().log(vec![name.to_owned()]))
        }
    }
}

/// A node that blocks its thread past the ttl keeps the lease (the heartbeat renews it from a
/// thread of its own): another worker is refused meanwhile, and the run finishes.
async fn a_blocking_node_keeps_its_lease<B: Backend>(store: Store<B>, t: String) {
    let calls = Calls::default();
    let graph = Graph::builder()
        .node("a", blocking(&calls, "a", 1500))
        .node("b", plain(&calls, "b"))
        .entry("a")
        .edge("a", "b")
        .edge("b", END)
        .build()
        .unwrap();
    let first = graph
        .durable(&store)
        .worker("first")
        .lease_ttl(Duration::from_millis(300));
    let second = graph.durable(&store).worker("second");
    store.create(&t, Flow::default()).await.unwrap();
    let run = tokio::spawn({
        let (first, t) = (first.clone(), t.clone());
        async move { first.run(&t, ()).await }
    });
    while calls.of("a") == 0 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    for _ in 0..4 {
        tokio::time::sleep(Duration::from_millis(200)).await;
        if run.is_finished() {
            break;
        }
        match second.resume(&t).await {
            Err(DurableError::Store(StoreError::Leased { .. })) => {}
            // The first run finished between the check and the call: nothing is left to run.
            Ok(_) if calls.of("b") > 0 => break,
            other => panic!("the second worker is refused while the first runs: {other:?}"),
        }
    }
    let (state, _) = finished(run.await.unwrap());
    assert_eq!(state.log, log(&["a", "b"]));
    assert_eq!((calls.of("a"), calls.of("b")), (1, 1));
}

/// `a_blocking_node_keeps_its_lease` on a current-thread runtime, whose only thread the node
/// blocks: the heartbeat still renews, and a worker on another thread is refused meanwhile.
fn a_blocking_node_keeps_its_lease_on_one_thread<B: Backend>(make: MakeStore<B>, t: String) {
    let calls = Calls::default();
    let graph = Graph::builder()
        .node("a", blocking(&calls, "a", 1500))
        .node("b", plain(&calls, "b"))
        .entry("a")
        .edge("a", "b")
        .edge("b", END)
        .build()
        .unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let store = runtime.block_on(make());
    runtime.block_on(store.create(&t, Flow::default())).unwrap();
    let second = {
        let (graph, make, t, calls) = (graph.clone(), Arc::clone(&make), t.clone(), calls.clone());
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async move {
                let store = make().await;
                let second = graph.durable(&store).worker("second");
                while calls.of("a") == 0 {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
                let mut refused = 0;
                while calls.of("b") == 0 {
                    match second.resume(&t).await {
                        Err(DurableError::Store(StoreError::Leased { .. })) => refused += 1,
                        // The first run finished between the check and the call.
                        Ok(_) if calls.of("b") > 0 => break,
                        other => panic!("the second worker is refused: {other:?}"),
                    }
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                refused
            })
        })
    };
    let first = graph
        .durable(&store)
        .worker("first")
        .lease_ttl(Duration::from_millis(300));
    let (state, _) = finished(runtime.block_on(first.run(&t, ())));
    assert!(
        second.join().unwrap() >= 3,
        "refused past the ttl, several times"
    );
    assert_eq!(state.log, log(&["a", "b"]));
    assert_eq!(calls.of("a"), 1);
}

type MakeStore<B> = Arc<dyn Fn() -> Pin<Box<dyn Future<Output = Store<B>> + Send>> + Send + Sync>;

/// A worker paused inside a node (here: its node blocks its thread) whose lease is taken away
/// meanwhile (revoked, as when it was paused past its ttl: race.rs pauses a process with
/// SIGSTOP for that), while a second worker (another OS thread, its own runtime) takes the
/// thread over and commits a step, either finishing the run (`finish`) or still in its next
/// step; then the first worker goes on: it commits nothing and ends with `lease_lost`, and the
/// second's run is unharmed.
fn a_revoked_worker_commits_nothing<B: Backend>(make: MakeStore<B>, t: String, finish: bool) {
    let calls = Calls::default();
    let (blocked_tx, blocked_rx) = mpsc::channel::<()>();
    let (took_tx, took_rx) = mpsc::channel::<()>();
    let blocked_tx = Mutex::new(Some(blocked_tx));
    let took_rx = Mutex::new(took_rx);
    let hold = Gate::new();
    let a = {
        let calls = calls.clone();
        move |_: Arc<Flow>, _: Context| {
            let n = calls.hit("a");
            if n == 1 {
                // The first worker: blocks its thread until the second took over.
                if let Some(tx) = blocked_tx.lock().unwrap().take() {
                    tx.send(()).unwrap();
                }
                took_rx
                    .lock()
                    .unwrap()
                    .recv_timeout(Duration::from_secs(20))
                    .expect("the second worker took over");
            }
            async move { Ok::<_, BoxError>(FlowUpdate::default().log(vec![format!("a#{n}")])) }
        }
    };
    let b = {
        let (calls, hold) = (calls.clone(), hold.clone());
        move |_: Arc<Flow>, _: Context| {
            let (calls, hold) = (calls.clone(), hold.clone());
            async move {
                calls.hit("b");
                hold.wait().await;
                Ok::<_, BoxError>(FlowUpdate::default().log(vec!["b".to_owned()]))
            }
        }
    };
    let graph = Graph::builder()
        .node("a", a)
        .node("b", b)
        .entry("a")
        .edge("a", "b")
        .edge("b", END)
        .build()
        .unwrap();
    if finish {
        hold.open();
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let store = runtime.block_on(make());
    runtime.block_on(store.create(&t, Flow::default())).unwrap();

    // The second worker, on its own thread and runtime.
    let second = {
        let (graph, make, t, calls) = (graph.clone(), Arc::clone(&make), t.clone(), calls.clone());
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async move {
                let store = make().await;
                blocked_rx.recv_timeout(Duration::from_secs(20)).unwrap();
                let revoked = store.revoke_lease(&t).await.unwrap();
                assert_eq!(revoked.map(|l| l.owner).as_deref(), Some("first"));
                let second = graph.durable(&store).worker("second");
                let run = async {
                    loop {
                        match second.resume(&t).await {
                            Err(DurableError::Store(StoreError::Leased { .. })) => {
                                tokio::time::sleep(Duration::from_millis(20)).await
                            }
                            other => return other,
                        }
                    }
                };
                let signal = async {
                    // Step 1 committed by the second worker, then the first goes on: after
                    // the second's run ended, or while it is in step 2.
                    loop {
                        if calls.of("a") >= 2 && (finish || calls.of("b") >= 1) {
                            break;
                        }
                        tokio::time::sleep(Duration::from_millis(5)).await;
                    }
                };
                let (outcome, ()) = tokio::join!(run, async {
                    signal.await;
                    if !finish {
                        took_tx.send(()).unwrap();
                    }
                });
                if finish {
                    took_tx.send(()).unwrap();
                }
                outcome
            })
        })
    };

    let first = graph.durable(&store).worker("first");
    let outcome = runtime.block_on(first.run(&t, ()));
    match &outcome {
        Err(DurableError::Store(StoreError::LeaseLost { .. })) => {}
        other => panic!("the first worker lost its lease: {other:?}"),
    }
    if !finish {
        // The second worker still holds the thread, in its step 2.
        let holder = runtime.block_on(store.lease_info(&t)).unwrap();
        assert_eq!(holder.map(|l| l.owner).as_deref(), Some("second"));
        hold.open();
    }
    let outcome = second.join().unwrap();
    let (state, _) = finished(outcome);
    assert_eq!(state.log, log(&["a#2", "b"]));
    let entries = runtime.block_on(async { journal(&store, &t).await });
    assert_eq!(
        kinds(&entries),
        ["input 0", "step 1", "step 2"],
        "only the second worker's entries after the takeover: {entries:#?}"
    );
    let stored = runtime.block_on(store.load::<Flow>(&t)).unwrap();
    assert_eq!(stored.state.log, log(&["a#2", "b"]));
}

/// In the Async mode a step's append runs beside the next step's nodes: a worker whose next
/// node blocks its thread while its lease is revoked and a second worker takes the thread over
/// (and is in its first step, having appended nothing) must not append its staged step when
/// it goes on; it ends with `lease_lost`, and the second worker's run is unharmed.
fn a_revoked_async_worker_commits_nothing<B: Backend>(make: MakeStore<B>, t: String) {
    let calls = Calls::default();
    let (blocked_tx, blocked_rx) = mpsc::channel::<()>();
    let (took_tx, took_rx) = mpsc::channel::<()>();
    let blocked_tx = Mutex::new(Some(blocked_tx));
    let took_tx = Mutex::new(Some(took_tx));
    let took_rx = Mutex::new(took_rx);
    let hold = Gate::new();
    // `a`: quick for the first worker; the second's waits for `hold` (after saying it runs).
    let a = {
        let (calls, hold) = (calls.clone(), hold.clone());
        move |_: Arc<Flow>, _: Context| {
            let n = calls.hit("a");
            if n == 2 {
                if let Some(tx) = took_tx.lock().unwrap().take() {
                    tx.send(()).unwrap();
                }
            }
            let hold = hold.clone();
            async move {
                if n == 2 {
                    hold.wait().await;
                }
                Ok::<_, BoxError>(FlowUpdate::default().log(vec![format!("a#{n}")]))
            }
        }
    };
    // `b`: the first worker's blocks its thread until the second runs `a`.
    let b = {
        let calls = calls.clone();
        move |_: Arc<Flow>, _: Context| {
            let n = calls.hit("b");
            if n == 1 {
                if let Some(tx) = blocked_tx.lock().unwrap().take() {
                    tx.send(()).unwrap();
                }
                took_rx
                    .lock()
                    .unwrap()
                    .recv_timeout(Duration::from_secs(20))
                    .expect("the second worker took over");
            }
            async move { Ok::<_, BoxError>(FlowUpdate::default().log(vec![format!("b#{n}")])) }
        }
    };
    let graph = Graph::builder()
        .node("a", a)
        .node("b", b)
        .entry("a")
        .edge("a", "b")
        .edge("b", END)
        .build()
        .unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let store = runtime.block_on(make());
    runtime.block_on(store.create(&t, Flow::default())).unwrap();
    let second = {
        let (graph, make, t) = (graph.clone(), Arc::clone(&make), t.clone());
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async move {
                let store = make().await;
                blocked_rx.recv_timeout(Duration::from_secs(20)).unwrap();
                let revoked = store.revoke_lease(&t).await.unwrap();
                assert_eq!(revoked.map(|l| l.owner).as_deref(), Some("first"));
                let second = graph.durable(&store).worker("second");
                loop {
                    match second.resume(&t).await {
                        Err(DurableError::Store(StoreError::Leased { .. })) => {
                            tokio::time::sleep(Duration::from_millis(20)).await
                        }
                        other => return other,
                    }
                }
            })
        })
    };
    let first = graph
        .durable(&store)
        .worker("first")
        .durability(Durability::Async);
    let outcome = runtime.block_on(first.run(&t, ()));
    let entries = runtime.block_on(async { journal(&store, &t).await });
    hold.open();
    let second = second.join().unwrap();
    assert!(
        matches!(
            outcome,
            Err(DurableError::Store(StoreError::LeaseLost { .. }))
        ),
        "the first worker lost its lease: {outcome:?}"
    );
    assert_eq!(
        kinds(&entries),
        ["input 0"],
        "the first worker committed nothing after the takeover: {entries:#?}"
    );
    let (state, _) = finished(second);
    assert_eq!(state.log, log(&["a#2", "b#2"]));
}

// ---------------------------------------------------------------------------------------------
// Every case on both backends.

/// The PostgreSQL store, if there is one (`durable_support::postgres`).
async fn postgres() -> Option<agentstate_store::PostgresStore> {
    durable_support::postgres("durable_loop").await
}

macro_rules! cases {
    ($($(#[$attr:meta])* $case:ident),* $(,)?) => {
        mod sqlite {
            $(
                $(#[$attr])*
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $case() {
                    let store = agentstate_store::SqliteStore::open_in_memory().unwrap();
                    super::$case(store, super::thread_id(stringify!($case))).await;
                }
            )*

            #[test]
            fn a_revoked_async_worker_commits_nothing() {
                let store = agentstate_store::SqliteStore::open_in_memory().unwrap();
                let make: super::MakeStore<_> =
                    std::sync::Arc::new(move || { let s = store.clone(); Box::pin(async move { s }) });
                super::a_revoked_async_worker_commits_nothing(make, super::thread_id("revoked-async"));
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn a_blocking_node_keeps_its_lease() {
                let store = agentstate_store::SqliteStore::open_in_memory().unwrap();
                super::a_blocking_node_keeps_its_lease(store, super::thread_id("blocking")).await;
            }

            #[test]
            fn a_blocking_node_keeps_its_lease_on_one_thread() {
                let store = agentstate_store::SqliteStore::open_in_memory().unwrap();
                let make: super::MakeStore<_> =
                    std::sync::Arc::new(move || { let s = store.clone(); Box::pin(async move { s }) });
                super::a_blocking_node_keeps_its_lease_on_one_thread(make, super::thread_id("blocking-1"));
            }

            #[test]
            fn a_revoked_worker_commits_nothing_after_the_takeover_finished() {
                let store = agentstate_store::SqliteStore::open_in_memory().unwrap();
                let make: super::MakeStore<_> =
                    std::sync::Arc::new(move || { let s = store.clone(); Box::pin(async move { s }) });
                super::a_revoked_worker_commits_nothing(make, super::thread_id("revoked"), true);
            }

            #[test]
            fn a_revoked_worker_commits_nothing_while_the_new_holder_runs() {
                let store = agentstate_store::SqliteStore::open_in_memory().unwrap();
                let make: super::MakeStore<_> =
                    std::sync::Arc::new(move || { let s = store.clone(); Box::pin(async move { s }) });
                super::a_revoked_worker_commits_nothing(make, super::thread_id("revoked"), false);
            }
        }
        mod postgres {
            $(
                $(#[$attr])*
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $case() {
                    let Some(store) = super::postgres().await else { return };
                    super::$case(store, super::thread_id(stringify!($case))).await;
                }
            )*

            fn make() -> Option<super::MakeStore<agentstate_store::postgres::Postgres>> {
                std::env::var("AGENTSTATE_POSTGRES_URL").ok()?;
                Some(std::sync::Arc::new(|| Box::pin(async { super::postgres().await.unwrap() })))
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn a_blocking_node_keeps_its_lease() {
                let Some(store) = super::postgres().await else { return };
                super::a_blocking_node_keeps_its_lease(store, super::thread_id("blocking")).await;
            }

            #[test]
            fn a_blocking_node_keeps_its_lease_on_one_thread() {
                let Some(make) = make() else { return };
                super::a_blocking_node_keeps_its_lease_on_one_thread(make, super::thread_id("blocking-1"));
            }

            #[test]
            fn a_revoked_async_worker_commits_nothing() {
                let Some(make) = make() else { return };
                super::a_revoked_async_worker_commits_nothing(make, super::thread_id("revoked-async"));
            }

            #[test]
            fn a_revoked_worker_commits_nothing_after_the_takeover_finished() {
                let Some(make) = make() else { return };
                super::a_revoked_worker_commits_nothing(make, super::thread_id("revoked"), true);
            }

            #[test]
            fn a_revoked_worker_commits_nothing_while_the_new_holder_runs() {
                let Some(make) = make() else { return };
                super::a_revoked_worker_commits_nothing(make, super::thread_id("revoked"), false);
            }
        }
    };
}

cases!(
    a_durable_stream_is_the_memory_stream_plus_commits,
    a_suspended_stream_resumes_as_a_stream,
    a_failing_stream_ends_with_its_error,
    a_filtered_durable_stream,
    dropping_a_durable_stream_is_a_crash,
    a_run_goes_to_a_node,
    #[cfg(feature = "ag-ui")]
    ag_ui_on_a_durable_run,
    #[cfg(feature = "ag-ui")]
    ag_ui_on_a_suspended_durable_run,
    a_subgraphs_emissions_are_streamed,
    streams_in_each_mode,
    the_last_flush_is_streamed,
    finished_parallel_tasks_do_not_run_again,
    finished_send_tasks_do_not_run_again,
    a_parallel_crash_in_each_mode,
    a_suspended_parallel_step_keeps_finished_tasks,
    breakpoints_of_the_graph,
    breakpoints_of_a_worker,
    breakpoints_in_memory_and_at_build,
    a_breakpoint_before_send_tasks,
    a_breakpoint_after_the_last_node,
    a_failing_step_merges_nothing,
    a_failing_parallel_step_merges_nothing,
    a_panicking_node_fails_the_run,
    warm_runs_are_cold_runs,
    clones_of_a_worker_do_not_run_a_thread_twice,
    a_warm_worker_catches_up,
    a_warm_run_takes_the_lease_with_its_input,
    a_recreated_thread_is_not_served_stale,
    every_entry_reads_as_a_journal_entry,
    journal_versions,
    an_interrupt_id_without_its_run_is_answered,
);
