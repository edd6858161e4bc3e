//! `AnyStore`: one store type for the backend a URL names, with `Send` futures (the suite in
//! `backends.rs` runs its cases on it over both databases).
#![cfg(feature = "sqlite")]

use agentstate::message::{Message, Role};
use agentstate::state::AgentState;
use agentstate_store::blocking::BlockingStore;
use agentstate_store::AnyBackend;
use agentstate_store::{AnyStore, HistoryQuery, SqliteStore, StepMeta, ThreadQuery};

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

fn temp_db(tag: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("agentstate-any-{tag}-{}.db", std::process::id()))
}

#[test]
fn sqlite_urls_open_the_file_or_memory() {
    runtime().block_on(async {
        for (form, path) in [("sqlite:", temp_db("a")), ("sqlite://", temp_db("b"))] {
            let url = format!("{form}{}", path.display());
            let store = AnyStore::open(&url).await.unwrap();
            assert_eq!(store.backend().name(), "SQLite");
            let mut t = store.create("t", AgentState::default()).await.unwrap();
            t.merge(Message::text_message("hi", Role::User), StepMeta::default())
                .await
                .unwrap();
            drop((t, store));
            // The same file, through the typed store.
            let typed = SqliteStore::open(&path).unwrap();
            assert_eq!(typed.load::<AgentState>("t").await.unwrap().version, 1);
            drop(typed);
            for suffix in ["", "-wal", "-shm"] {
                let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
            }
        }
        // Memory: private to each store.
        let a = AnyStore::open("sqlite::memory:").await.unwrap();
        a.create("t", AgentState::default()).await.unwrap();
        let b = AnyStore::open("sqlite://:memory:").await.unwrap();
        assert!(b.list(ThreadQuery::first(10)).await.unwrap().is_empty());
    });
}

#[test]
fn a_url_naming_no_backend_is_a_named_error_without_its_password() {
    runtime().block_on(async {
        for (url, scheme, why) in [
            ("mysql://root:hunter2@db/app", "`mysql`", "names no backend"),
            ("sqlite:", "`sqlite`", "no database file"),
            ("sqlite://chat.db?mode=rwc", "`sqlite`", "take no options"),
            ("chat.db", "``", "names no backend"),
        ] {
            let err = AnyStore::open(url).await.unwrap_err();
            let text = err.to_string();
            assert_eq!(err.category(), "store_backend_error", "{text}");
            assert!(text.contains(scheme) && text.contains(why), "{text}");
            assert!(!text.contains("hunter2"), "{text}");
        }
        #[cfg(not(feature = "postgres"))]
        {
            let err = AnyStore::open("postgres://u@h/db").await.unwrap_err();
            assert!(err.to_string().contains("feature `postgres`"), "{err}");
        }
    });
}

#[test]
fn a_typed_store_converts_with_its_settings() {
    use agentstate_store::{ConflictRetry, SnapshotPolicy};
    let policy = ConflictRetry::default().max_attempts(3);
    let typed = SqliteStore::open_in_memory()
        .unwrap()
        .with_snapshot_policy(SnapshotPolicy::every(7))
        .with_conflict_retry(policy);
    let any: AnyStore = typed.clone().into();
    assert_eq!(any.snapshot_policy(), SnapshotPolicy::every(7));
    assert_eq!(any.conflict_retry(), policy);
    runtime().block_on(async {
        // The same database.
        typed.create("t", AgentState::default()).await.unwrap();
        assert_eq!(any.info("t").await.unwrap().version, 0);
    });
}

/// The futures of the store's operations are `Send` (they can be spawned on a multi-thread
/// runtime), on `AnyStore` as on the typed stores.
#[test]
fn futures_are_send() {
    fn send<T: Send>(value: T) -> T {
        value
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let store = rt.block_on(AnyStore::open("sqlite::memory:")).unwrap();
    let task = rt.spawn(async move {
        let mut t = send(store.create("t", AgentState::default())).await?;
        send(t.merge(Message::text_message("hi", Role::User), StepMeta::default())).await?;
        send(t.merge_with(StepMeta::default(), |s| {
            let n = s.context.len();
            async move {
                tokio::task::yield_now().await;
                Ok(Message::text_message(n.to_string(), Role::Assistant))
            }
        }))
        .await?;
        send(t.reload()).await?;
        send(store.fork("t", 1, "f")).await?;
        send(store.history("f", HistoryQuery::newest(5))).await?;
        send(store.load_at::<AgentState>("t", 1)).await?;
        send(store.compact::<AgentState>("t")).await?;
        send(store.load::<AgentState>("t")).await
    });
    let loaded = rt.block_on(task).unwrap().unwrap();
    assert_eq!(loaded.state.context[1].text(), "1");
}

#[test]
fn blocking_store_opens_a_url() {
    let store: BlockingStore<AnyBackend> = BlockingStore::open_url("sqlite::memory:").unwrap();
    let mut t = store.create("t", AgentState::default()).unwrap();
    t.merge(Message::text_message("hi", Role::User), StepMeta::default())
        .unwrap();
    assert_eq!(store.load::<AgentState>("t").unwrap().version, 1);
    let err = BlockingStore::open_url("redis://x").unwrap_err();
    assert!(err.to_string().contains("`redis`"), "{err}");
}

/// A `postgres://` URL connects (schema `public` of the test database; the thread is removed).
#[cfg(feature = "postgres")]
#[test]
fn a_postgres_url_connects() {
    let Ok(url) = std::env::var("AGENTSTATE_POSTGRES_URL") else {
        println!("postgres URL test skipped: AGENTSTATE_POSTGRES_URL is not set");
        return;
    };
    runtime().block_on(async {
        let store = AnyStore::open(&url).await.unwrap();
        assert_eq!(store.backend().name(), "PostgreSQL");
        let id = format!("any-url-{}", std::process::id());
        let mut t = store.create(&id, AgentState::default()).await.unwrap();
        t.merge(Message::text_message("hi", Role::User), StepMeta::default())
            .await
            .unwrap();
        assert_eq!(store.load::<AgentState>(&id).await.unwrap().version, 1);
        assert!(store.delete(&id).await.unwrap());
    });
}
