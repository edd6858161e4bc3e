//! The blocking store: the async store's operations from plain threads, on SQLite and (with
//! `AGENTSTATE_POSTGRES_URL`) PostgreSQL; inside an async runtime it refuses instead of
//! blocking the runtime's thread.

use agentstate::AgentState;
use agentstate_store::backend::Backend;
use agentstate_store::blocking::BlockingStore;
use agentstate_store::{HistoryQuery, StepMeta, Versioned};
use serde::{Deserialize, Serialize};

#[derive(AgentState, Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Counter {
    #[reducer(append)]
    pub log: Vec<u64>,
}

fn exercise<B: Backend>(store: &BlockingStore<B>) {
    let mut t = store.create("c", Counter::default()).unwrap();
    for i in 1..=3 {
        assert_eq!(
            t.merge(CounterUpdate::default().log(vec![i]), StepMeta::node("n"))
                .unwrap(),
            i
        );
    }
    // A second handle is stale after the first writes; merge_with reloads and retries.
    let mut other = store.thread::<Counter>("c").unwrap();
    t.merge(CounterUpdate::default().log(vec![4]), StepMeta::default())
        .unwrap();
    let v = other
        .merge_with(StepMeta::default(), |s| {
            Ok(CounterUpdate::default().log(vec![s.log.len() as u64 + 1]))
        })
        .unwrap();
    assert_eq!((v, &other.state().log), (5, &vec![1, 2, 3, 4, 5]));
    store.fork("c", 2, "d").unwrap();
    assert_eq!(
        store.load::<Counter>("d").unwrap(),
        Versioned {
            state: Counter { log: vec![1, 2] },
            version: 2
        }
    );
    assert_eq!(
        store.history("d", HistoryQuery::oldest(10)).unwrap().len(),
        2
    );
    assert_eq!(
        store.load_at::<Counter>("c", 3).unwrap().state.log,
        vec![1, 2, 3]
    );
    assert_eq!(store.compact::<Counter>("d").unwrap().snapshot, 2);
    assert_eq!(
        store.load::<Counter>("c").unwrap().state,
        other.into_async().into_state()
    );
    let err = store.load::<Counter>("nope").unwrap_err();
    assert_eq!(err.category(), "thread_not_found");

    // Clones (of a store of any backend) share the database and the runtime, from other
    // threads too.
    let workers: Vec<_> = (0..2)
        .map(|w| {
            let store = store.clone();
            std::thread::spawn(move || {
                let mut t = store.create(&format!("w{w}"), Counter::default()).unwrap();
                t.merge(CounterUpdate::default().log(vec![w]), StepMeta::default())
                    .unwrap()
            })
        })
        .collect();
    for worker in workers {
        assert_eq!(worker.join().unwrap(), 1);
    }
    assert_eq!(store.load::<Counter>("w1").unwrap().state.log, [1]);

    // A fenced handle: it appends while its lease holds, and nothing once it is released.
    let lease = store
        .lease("w0", "worker", std::time::Duration::from_secs(30))
        .unwrap();
    assert_eq!(lease.version(), 1);
    let mut t = store.thread::<Counter>("w0").unwrap();
    t.fence(&lease);
    assert!(t.is_current(&lease));
    t.merge(CounterUpdate::default().log(vec![2]), StepMeta::default())
        .unwrap();
    lease.clone().release().unwrap();
    let err = t
        .merge(CounterUpdate::default().log(vec![3]), StepMeta::default())
        .unwrap_err();
    assert_eq!(err.category(), "lease_lost", "{err}");
    assert_eq!(lease.release().unwrap_err().category(), "lease_lost");
    t.unfence();
    assert_eq!(
        t.merge(CounterUpdate::default().log(vec![3]), StepMeta::default())
            .unwrap(),
        3
    );

    // Rewound: the steps after version 1 are gone, and the handle that read them is refused
    // until it reloads.
    assert_eq!(store.rewind("w0", 1).unwrap().version, 1);
    assert_eq!(store.load::<Counter>("w0").unwrap().state.log, [0]);
    let err = t
        .merge(CounterUpdate::default().log(vec![4]), StepMeta::default())
        .unwrap_err();
    assert_eq!(err.category(), "state_write_conflict", "{err}");
    t.reload().unwrap();
    assert_eq!(
        t.merge(CounterUpdate::default().log(vec![4]), StepMeta::default())
            .unwrap(),
        2
    );
    assert_eq!(store.load::<Counter>("w0").unwrap().state.log, [0, 4]);

    // Copied: the copy has the thread's versions and keeps them once the thread is gone.
    let meta = serde_json::json!({"copy": true})
        .as_object()
        .cloned()
        .unwrap();
    assert_eq!(
        store
            .copy_with("w0", "w0-copy", meta.clone())
            .unwrap()
            .metadata,
        meta
    );
    assert_eq!(
        store.copy("w0", "w0-copy").unwrap_err().category(),
        "thread_exists"
    );
    assert!(store.delete("w0").unwrap());
    assert_eq!(
        store.load_at::<Counter>("w0-copy", 1).unwrap().state.log,
        [0]
    );
    assert_eq!(store.load::<Counter>("w0-copy").unwrap().state.log, [0, 4]);
}

#[cfg(feature = "sqlite")]
#[test]
fn sqlite_from_a_plain_thread() {
    exercise(&BlockingStore::open_in_memory().unwrap());
}

#[cfg(feature = "sqlite")]
#[test]
fn inside_an_async_runtime_it_refuses() {
    let store = BlockingStore::open_in_memory().unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let err = runtime.block_on(async { store.load::<Counter>("c").unwrap_err() });
    assert_eq!(err.category(), "store_backend_error", "{err}");
    assert!(err.to_string().contains("async runtime"), "{err}");
    // Outside, the same store works.
    store.create("c", Counter::default()).unwrap();
}

/// Created, refused and dropped inside a runtime: the documented error, never a panic (the
/// store's own runtime is shut down without waiting there).
#[cfg(feature = "sqlite")]
#[test]
fn created_and_dropped_inside_an_async_runtime_it_does_not_panic() {
    for flavor in ["current_thread", "multi_thread"] {
        let runtime = match flavor {
            "current_thread" => tokio::runtime::Builder::new_current_thread(),
            _ => tokio::runtime::Builder::new_multi_thread(),
        }
        .enable_all()
        .build()
        .unwrap();
        // Made outside, with a thread handle; both dropped inside.
        let outside = BlockingStore::open_in_memory().unwrap();
        let handle = outside.create("c", Counter::default()).unwrap();
        runtime.block_on(async move {
            // Made inside: the documented error on use.
            let inside = BlockingStore::open_in_memory().unwrap();
            let err = inside.load::<Counter>("c").unwrap_err();
            assert!(err.to_string().contains("async runtime"), "{err}");
            drop(inside);
            assert_eq!(handle.version(), 0);
            drop(outside);
            drop(handle); // the last owner of `outside`'s runtime
        });
        // A thread handle outliving its store, dropped inside a spawned task.
        let store = BlockingStore::open_in_memory().unwrap();
        let handle = store.create("c", Counter::default()).unwrap();
        drop(store);
        let task = runtime.spawn(async move { drop(handle) });
        runtime.block_on(task).unwrap();
    }
}

/// Connecting inside a runtime fails with the documented error (the runtime it made is dropped
/// there too); no server is needed, since it fails before connecting.
#[cfg(feature = "postgres")]
#[test]
fn postgres_connect_inside_an_async_runtime_refuses_without_panicking() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let err = runtime.block_on(async {
        BlockingStore::connect_with("postgres://nobody@127.0.0.1:1/none", Default::default())
            .unwrap_err()
    });
    assert!(err.to_string().contains("async runtime"), "{err}");
}

#[cfg(feature = "postgres")]
#[test]
fn postgres_from_a_plain_thread() {
    let Ok(url) = std::env::var("AGENTSTATE_POSTGRES_URL") else {
        println!("postgres blocking test skipped: AGENTSTATE_POSTGRES_URL is not set");
        return;
    };
    let schema = format!("as_blocking_{}", std::process::id());
    let store = BlockingStore::connect_with(
        &url,
        agentstate_store::postgres::PostgresOptions {
            schema: schema.clone(),
            ..Default::default()
        },
    )
    .unwrap();
    exercise(&store);
    drop(store);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let (client, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
            .await
            .unwrap();
        tokio::spawn(conn);
        client
            .batch_execute(&format!("DROP SCHEMA \"{schema}\" CASCADE"))
            .await
            .unwrap();
    });
}
