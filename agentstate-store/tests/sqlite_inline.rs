//! SQLite appends on the caller's thread (`SqliteStore::with_inline_appends`, on by default):
//! an append never waits there. A write lock held by another connection sends it to the
//! connection's thread, which waits for the lock; and the WAL checkpoint that SQLite would run in
//! the committing call is queued for that thread, so the log still stops growing.
#![cfg(feature = "sqlite")]

use agentstate::message::{Message, Role};
use agentstate::state::{AgentState, AgentStateUpdate};
use agentstate_store::{SqliteStore, StepMeta, Versioned};
use std::path::PathBuf;
use std::time::Duration;

fn temp_db(name: &str) -> PathBuf {
    let path = std::env::temp_dir().join(format!(
        "agentstate-inline-{name}-{}.db",
        std::process::id()
    ));
    remove_db(&path);
    path
}

fn remove_db(path: &std::path::Path) {
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
}

fn step(text: String) -> AgentStateUpdate {
    AgentStateUpdate::default().context(vec![Message::text_message(text, Role::User)])
}

#[test]
fn an_append_waits_on_the_connections_thread_for_a_write_lock_held_elsewhere() {
    let path = temp_db("locked");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_time()
        .build()
        .unwrap();
    runtime.block_on(async {
        let store = SqliteStore::open(&path).unwrap();
        assert!(store.inline_appends());
        let mut thread = store.create("t", AgentState::default()).await.unwrap();
        thread
            .merge(step("before".into()), StepMeta::node("n"))
            .await
            .unwrap();

        // Another connection (another process, say) takes the write lock.
        let other = rusqlite::Connection::open(&path).unwrap();
        other.execute_batch("BEGIN IMMEDIATE").unwrap();
        let append = tokio::spawn(async move {
            let seq = thread
                .merge(step("while locked".into()), StepMeta::node("n"))
                .await;
            (seq, thread)
        });
        tokio::time::sleep(Duration::from_millis(200)).await;
        // Inline, the append would have failed at once with SQLite's "database is locked".
        assert!(
            !append.is_finished(),
            "the append did not wait for the lock"
        );
        other.execute_batch("COMMIT").unwrap();
        let (seq, thread) = append.await.unwrap();
        assert_eq!(seq.unwrap(), 2);
        assert_eq!(thread.version(), 2);

        let Versioned { state, version } = store.load::<AgentState>("t").await.unwrap();
        assert_eq!(version, 2);
        assert_eq!(state.context.len(), 2);
    });
    remove_db(&path);
}

#[test]
fn inline_appends_still_checkpoint_the_wal() {
    let path = temp_db("checkpoint");
    let wal = PathBuf::from(format!("{}-wal", path.display()));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    runtime.block_on(async {
        let store = SqliteStore::open(&path).unwrap();
        let mut thread = store.create("t", AgentState::default()).await.unwrap();
        // 600 appends of a 32 KiB message (7 pages of 8 KiB each, with the thread's row): 34 MB
        // of log, four times the 1,000 pages at which it is checkpointed and then reused from
        // its start. (Fewer than the 1,000 entries after which a snapshot is written.)
        let text = "x".repeat(32 * 1024);
        for _ in 0..600 {
            thread
                .merge(step(text.clone()), StepMeta::node("n"))
                .await
                .unwrap();
        }
        // The checkpoint jobs run on the connection's thread; the last may still be queued.
        store.info("t").await.unwrap();
        let size = std::fs::metadata(&wal).unwrap().len();
        assert!(
            size < 12 << 20,
            "the WAL grew to {size} bytes: it was never checkpointed"
        );
        let Versioned { state, version } = store.load::<AgentState>("t").await.unwrap();
        assert_eq!((version, state.context.len()), (600, 600));
    });
    remove_db(&path);
}

#[test]
fn appends_can_be_kept_off_the_callers_thread() {
    let path = temp_db("off");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    runtime.block_on(async {
        let store = SqliteStore::open(&path).unwrap().with_inline_appends(false);
        assert!(!store.clone().inline_appends());
        let mut thread = store.create("t", AgentState::default()).await.unwrap();
        for i in 1..=3 {
            let seq = thread
                .merge(step(format!("m{i}")), StepMeta::node("n"))
                .await
                .unwrap();
            assert_eq!(seq, i);
        }
        let state = store.load::<AgentState>("t").await.unwrap().state;
        assert_eq!(state.context.len(), 3);
    });
    remove_db(&path);
}
