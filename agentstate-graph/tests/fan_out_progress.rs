//! A fan-out's and a parallel-branches node's progress in a durable run (issue 27 §3): a crash
//! in the middle of the node does not run its finished instances (branches) again, and a fan-out
//! run again with another instance count fails with `checkpoint_record_invalid` before any
//! instance runs.
//!
//! The crash is the run's future dropped while some instances wait forever, once the finished
//! ones are journaled, as a process that stops; another worker resumes once the lease (a short
//! ttl) expired. Every case runs on SQLite
//! (in memory) and on PostgreSQL when `AGENTSTATE_POSTGRES_URL` is set.

use agentstate::AgentState;
use agentstate_graph::durable::{DurableError, Outcome, META_KEY};
use agentstate_graph::parallel::{FanOut, FanOutError, ParallelBranches};
use agentstate_graph::{BoxError, Context, Graph, END};
use agentstate_store::backend::Backend;
use agentstate_store::{HistoryQuery, StepMeta, Store};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

#[derive(AgentState, Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
struct Job {
    x: u64,
    result: u64,
}

#[derive(AgentState, Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
struct Batch {
    items: Vec<u64>,
    #[reducer(append)]
    results: Vec<u64>,
    #[reducer(append)]
    log: Vec<String>,
}

/// The lease ttl of the worker that "crashes": the next worker takes over after it.
const TTL: Duration = Duration::from_millis(300);

/// What the instances' bodies did.
struct Bodies {
    /// Per item: how many times its body ran to its end.
    finished: Vec<AtomicUsize>,
    /// Bodies that started and wait forever (the first run's crash).
    stuck: AtomicUsize,
    /// Items from which bodies wait forever, while `crashing`.
    stuck_from: u64,
    crashing: AtomicBool,
}

impl Bodies {
    fn new(items: usize, stuck_from: u64) -> Arc<Self> {
        Arc::new(Bodies {
            finished: (0..items).map(|_| AtomicUsize::new(0)).collect(),
            stuck: AtomicUsize::new(0),
            stuck_from,
            crashing: AtomicBool::new(true),
        })
    }

    fn finished(&self) -> Vec<usize> {
        self.finished
            .iter()
            .map(|n| n.load(Ordering::SeqCst))
            .collect()
    }
}

/// A fan-out over the batch's items (10 at a time) whose instances double their item.
fn doubling(bodies: &Arc<Bodies>) -> Graph<Batch> {
    let inner = Arc::clone(bodies);
    let job = Graph::builder()
        .node("double", move |s: Arc<Job>, _: Context| {
            let bodies = Arc::clone(&inner);
            async move {
                if bodies.crashing.load(Ordering::SeqCst) && s.x >= bodies.stuck_from {
                    bodies.stuck.fetch_add(1, Ordering::SeqCst);
                    futures_util::future::pending::<()>().await;
                }
                tokio::time::sleep(Duration::from_millis(s.x % 3)).await;
                bodies.finished[s.x as usize].fetch_add(1, Ordering::SeqCst);
                Ok::<_, BoxError>(JobUpdate::default().result(s.x * 2))
            }
        })
        .entry("double")
        .edge("double", END)
        .build()
        .unwrap();
    let fan_out = FanOut::new(
        job,
        |b: &Batch| b.items.iter().map(|&x| Job { x, result: 0 }).collect(),
        |done: Vec<Job>| {
            BatchUpdate::default().results(done.into_iter().map(|j| j.result).collect::<Vec<_>>())
        },
    )
    .concurrency(Some(10));
    Graph::builder()
        .node("process", fan_out)
        .node("report", |s: Arc<Batch>, _: Context| async move {
            Ok::<_, BoxError>(
                BatchUpdate::default().log(vec![format!("{} results", s.results.len())]),
            )
        })
        .entry("process")
        .edge("process", "report")
        .edge("report", END)
        .build()
        .unwrap()
}

/// Runs `run` until `crashed` holds and the thread's journal holds `records` progress records
/// (of finished instances or branches), then drops it (as a process that stopped).
async fn until<F: std::future::Future, B: Backend>(
    run: F,
    crashed: impl Fn() -> bool,
    store: &Store<B>,
    t: &str,
    records: usize,
) {
    let watch = async {
        loop {
            if crashed() && progress_records(store, t).await >= records {
                return;
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    };
    tokio::select! {
        _ = run => panic!("the run was to crash, and it ended"),
        () = watch => {}
    }
}

/// The journal entries recording a finished fan-out instance or parallel branch.
async fn progress_records<B: Backend>(store: &Store<B>, t: &str) -> usize {
    let Ok(entries) = store.history(t, HistoryQuery::newest(1000)).await else {
        return 0;
    };
    entries
        .iter()
        .filter(|e| {
            e.extra[META_KEY]["name"]
                .as_str()
                .is_some_and(|n| n == "fan_out_instance" || n == "parallel_branch")
        })
        .count()
}

async fn finished_instances_do_not_run_again<B: Backend>(store: Store<B>, t: String) {
    let items: Vec<u64> = (0..100).collect();
    let input = Batch {
        items: items.clone(),
        ..Batch::default()
    };
    // An uninterrupted run, in memory, for the final state.
    let plain = Bodies::new(100, u64::MAX);
    let expected = doubling(&plain).invoke(input.clone()).await.unwrap();
    assert_eq!(
        expected.results,
        items.iter().map(|x| x * 2).collect::<Vec<_>>()
    );

    // Items 60 and after wait forever in the first run: with 10 instances at a time, once ten
    // of them started, instances 0..60 have all finished; the crash comes once they are
    // journaled.
    let bodies = Bodies::new(100, 60);
    let graph = doubling(&bodies);
    let first = graph.durable(&store).worker("first").lease_ttl(TTL);
    let stuck = || bodies.stuck.load(Ordering::SeqCst) == 10;
    until(first.start(&t, input), stuck, &store, &t, 60).await;
    let after_crash = bodies.finished();
    assert_eq!(after_crash[..60], [1; 60], "{after_crash:?}");
    assert_eq!(after_crash[60..], [0; 40], "{after_crash:?}");

    bodies.crashing.store(false, Ordering::SeqCst);
    tokio::time::sleep(TTL + Duration::from_millis(100)).await;
    let second = graph.durable(&store).worker("second");
    let Outcome::Finished { state, .. } = second.resume(&t).await.unwrap() else {
        panic!("the resume finishes")
    };
    // Each instance's body ran to its end once, across both runs.
    assert_eq!(bodies.finished(), [1; 100]);
    assert_eq!(*state, expected);
    assert_eq!(state.log, ["100 results"]);
}

async fn a_changed_count_fails_before_any_instance<B: Backend>(store: Store<B>, t: String) {
    let bodies = Bodies::new(5, 2);
    let graph = doubling(&bodies);
    let input = Batch {
        items: vec![0, 1, 2, 3, 4],
        ..Batch::default()
    };
    let first = graph.durable(&store).worker("first").lease_ttl(TTL);
    let stuck = || bodies.stuck.load(Ordering::SeqCst) == 3;
    until(first.start(&t, input), stuck, &store, &t, 2).await;
    assert_eq!(bodies.finished(), [1, 1, 0, 0, 0]);
    // The input changes meanwhile: three items instead of five.
    let mut thread = store.thread::<Batch>(&t).await.unwrap();
    thread
        .merge(
            BatchUpdate::default().items(vec![0, 1, 2]),
            StepMeta::node("edit"),
        )
        .await
        .unwrap();
    bodies.crashing.store(false, Ordering::SeqCst);
    tokio::time::sleep(TTL + Duration::from_millis(100)).await;
    let second = graph.durable(&store).worker("second");
    let error = match second.resume(&t).await {
        Err(DurableError::Run(error)) => error,
        other => panic!(
            "the resume was to fail: {:?}",
            other.map(|o| o.state().clone())
        ),
    };
    assert_eq!(error.category(), "checkpoint_record_invalid", "{error}");
    assert_eq!(error.node(), Some("process"));
    let cause = std::error::Error::source(&error)
        .and_then(|s| s.downcast_ref::<FanOutError>())
        .expect("a fan-out error");
    assert!(
        matches!(
            cause,
            FanOutError::CountChanged {
                recorded: 5,
                count: 3
            }
        ),
        "{cause:?}"
    );
    assert!(
        error.to_string().contains("node `process` failed")
            && error.to_string().contains("recorded 5 instances"),
        "{error}"
    );
    // Nothing ran on the resume.
    assert_eq!(bodies.finished(), [1, 1, 0, 0, 0]);
}

async fn finished_branches_do_not_run_again<B: Backend>(store: Store<B>, t: String) {
    let runs = Arc::new([(); 3].map(|()| AtomicUsize::new(0)));
    let stuck = Arc::new(AtomicBool::new(true));
    let started = Arc::new(AtomicUsize::new(0));
    let branch = |index: usize| {
        let (runs, stuck, started) = (Arc::clone(&runs), Arc::clone(&stuck), Arc::clone(&started));
        move |_: Arc<Batch>, _: Context| {
            let (runs, stuck, started) =
                (Arc::clone(&runs), Arc::clone(&stuck), Arc::clone(&started));
            async move {
                if index == 2 && stuck.load(Ordering::SeqCst) {
                    started.fetch_add(1, Ordering::SeqCst);
                    futures_util::future::pending::<()>().await;
                }
                runs[index].fetch_add(1, Ordering::SeqCst);
                // The first branch writes nothing.
                Ok::<_, BoxError>(if index == 0 {
                    BatchUpdate::default()
                } else {
                    BatchUpdate::default().log(vec![format!("branch {index}")])
                })
            }
        }
    };
    let node = ParallelBranches::new()
        .branch("a", branch(0))
        .branch("b", branch(1))
        .branch("c", branch(2));
    let graph = Graph::builder()
        .node("recall", node)
        .entry("recall")
        .edge("recall", END)
        .build()
        .unwrap();
    let first = graph.durable(&store).worker("first").lease_ttl(TTL);
    let waiting = || started.load(Ordering::SeqCst) == 1;
    until(first.start(&t, Batch::default()), waiting, &store, &t, 2).await;
    stuck.store(false, Ordering::SeqCst);
    tokio::time::sleep(TTL + Duration::from_millis(100)).await;
    let second = graph.durable(&store).worker("second");
    let Outcome::Finished { state, .. } = second.resume(&t).await.unwrap() else {
        panic!("the resume finishes")
    };
    assert_eq!(state.log, ["branch 1", "branch 2"]);
    let runs: Vec<usize> = runs.iter().map(|n| n.load(Ordering::SeqCst)).collect();
    assert_eq!(runs, [1, 1, 1]);
}

async fn a_failing_sibling_does_not_lose_finished_records<B: Backend>(store: Store<B>, t: String) {
    // Instance 0 finishes and instance 1 fails at once in the first run: the fan-out fails
    // (fail-fast), but instance 0's record under way is made first.
    let runs = Arc::new([(); 2].map(|()| AtomicUsize::new(0)));
    let failing = Arc::new(AtomicBool::new(true));
    let (r, f) = (Arc::clone(&runs), Arc::clone(&failing));
    let job = Graph::builder()
        .node("double", move |s: Arc<Job>, _: Context| {
            let (runs, failing) = (Arc::clone(&r), Arc::clone(&f));
            async move {
                runs[s.x as usize].fetch_add(1, Ordering::SeqCst);
                if s.x == 1 && failing.load(Ordering::SeqCst) {
                    return Err::<JobUpdate, BoxError>("instance 1 fails the first time".into());
                }
                Ok(JobUpdate::default().result(s.x * 2))
            }
        })
        .entry("double")
        .edge("double", END)
        .build()
        .unwrap();
    let fan_out = FanOut::new(
        job,
        |b: &Batch| b.items.iter().map(|&x| Job { x, result: 0 }).collect(),
        |done: Vec<Job>| {
            BatchUpdate::default().results(done.into_iter().map(|j| j.result).collect::<Vec<_>>())
        },
    );
    // The same with parallel branches: `a` finishes, `b` fails the first time.
    let (r, f) = (Arc::clone(&runs), Arc::clone(&failing));
    let branch = move |index: usize| {
        let (runs, failing) = (Arc::clone(&r), Arc::clone(&f));
        move |_: Arc<Batch>, _: Context| {
            let (runs, failing) = (Arc::clone(&runs), Arc::clone(&failing));
            async move {
                runs[index].fetch_add(1, Ordering::SeqCst);
                if index == 1 && failing.load(Ordering::SeqCst) {
                    return Err::<BatchUpdate, BoxError>("branch b fails the first time".into());
                }
                Ok(BatchUpdate::default().log(vec![format!("branch {index}")]))
            }
        }
    };
    let branches = ParallelBranches::new()
        .branch("a", branch(0))
        .branch("b", branch(1));
    for (case, graph) in [
        (
            "fan-out",
            Graph::builder()
                .node("n", fan_out)
                .entry("n")
                .edge("n", END)
                .build()
                .unwrap(),
        ),
        (
            "branches",
            Graph::builder()
                .node("n", branches)
                .entry("n")
                .edge("n", END)
                .build()
                .unwrap(),
        ),
    ] {
        runs.iter().for_each(|n| n.store(0, Ordering::SeqCst));
        failing.store(true, Ordering::SeqCst);
        let thread = format!("{t}-{case}");
        let durable = graph.durable(&store);
        let input = Batch {
            items: vec![0, 1],
            ..Batch::default()
        };
        let error = match durable.start(&thread, input).await {
            Err(DurableError::Run(error)) => error,
            other => panic!(
                "{case}: the first run was to fail: {:?}",
                other.map(|o| o.state().clone())
            ),
        };
        assert_eq!(error.category(), "node_exception", "{case}: {error}");
        failing.store(false, Ordering::SeqCst);
        let Outcome::Finished { state, .. } = durable.resume(&thread).await.unwrap() else {
            panic!("{case}: the resume finishes")
        };
        let runs: Vec<usize> = runs.iter().map(|n| n.load(Ordering::SeqCst)).collect();
        assert_eq!(
            runs,
            [1, 2],
            "{case}: the finished one ran once, the failed one twice"
        );
        match case {
            "fan-out" => assert_eq!(state.results, [0, 2]),
            _ => assert_eq!(state.log, ["branch 0", "branch 1"]),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Every case on both backends.

/// A thread id no other case (or earlier test run on the same database) uses.
fn thread_id(case: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("{case}-{}-{nanos}", std::process::id())
}

/// The PostgreSQL store at `AGENTSTATE_POSTGRES_URL`, if it is set (under CI it must be).
async fn postgres() -> Option<agentstate_store::PostgresStore> {
    let ci = std::env::var("CI").is_ok_and(|v| v == "true" || v == "1");
    match std::env::var("AGENTSTATE_POSTGRES_URL") {
        Err(_) if ci => panic!("CI=true but AGENTSTATE_POSTGRES_URL is not set"),
        Err(_) => None,
        Ok(url) => Some(
            agentstate_store::PostgresStore::connect(&url)
                .await
                .expect("the PostgreSQL server at AGENTSTATE_POSTGRES_URL"),
        ),
    }
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
    finished_instances_do_not_run_again,
    a_changed_count_fails_before_any_instance,
    finished_branches_do_not_run_again,
    a_failing_sibling_does_not_lose_finished_records,
);
