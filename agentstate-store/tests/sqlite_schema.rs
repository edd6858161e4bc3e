//! The SQLite tables' versions: a database written by version 1 of the tables (entries and
//! snapshots in `WITHOUT ROWID` tables, the version in a table) is migrated when it is opened, in
//! one transaction, and reads and writes as before; so is version 2 (the same tables, whose
//! appends also moved the thread row's `head` on).
#![cfg(feature = "sqlite")]

use agentstate::message::{Message, Role};
use agentstate::state::{AgentState, AgentStateUpdate};
use agentstate_store::record::fingerprint;
use agentstate_store::{HistoryQuery, SqliteStore, StepMeta, Versioned};

/// Version 1's tables, as that build created them.
const V1: &str = "
    CREATE TABLE agentstate_meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID;
    CREATE TABLE agentstate_threads (
        tid INTEGER PRIMARY KEY,
        id TEXT NOT NULL UNIQUE,
        fingerprint INTEGER NOT NULL,
        head INTEGER NOT NULL,
        oldest INTEGER NOT NULL,
        parent INTEGER REFERENCES agentstate_threads (tid),
        fork_seq INTEGER,
        initial TEXT,
        metadata TEXT NOT NULL,
        created_ms INTEGER NOT NULL
    );
    CREATE TABLE agentstate_entries (
        tid INTEGER NOT NULL,
        seq INTEGER NOT NULL,
        kind INTEGER NOT NULL,
        time_ms INTEGER NOT NULL,
        node TEXT,
        run_id TEXT,
        extra TEXT,
        fingerprint INTEGER,
        body TEXT NOT NULL,
        PRIMARY KEY (tid, seq)
    ) WITHOUT ROWID;
    CREATE TABLE agentstate_snapshots (
        tid INTEGER NOT NULL,
        seq INTEGER NOT NULL,
        fingerprint INTEGER NOT NULL,
        body TEXT NOT NULL,
        PRIMARY KEY (tid, seq)
    ) WITHOUT ROWID;
    INSERT INTO agentstate_meta (key, value) VALUES ('schema_version', 1);";

fn message(i: u64) -> AgentStateUpdate {
    let role = if i % 2 == 1 {
        Role::User
    } else {
        Role::Assistant
    };
    AgentStateUpdate::default().context(vec![Message::text_message(format!("message {i}"), role)])
}

/// The store version a database file records.
fn stored_version(path: &std::path::Path) -> i64 {
    rusqlite::Connection::open(path)
        .unwrap()
        .query_row(
            "SELECT value FROM agentstate_meta WHERE key = 'schema_version'",
            [],
            |r| r.get(0),
        )
        .unwrap()
}

#[test]
fn a_version_1_database_is_migrated_when_opened() {
    let path = std::env::temp_dir().join(format!("agentstate-schema-v1-{}.db", std::process::id()));
    let _ = std::fs::remove_file(&path);
    // Two threads written by version 1: "a" with 5 entries and a snapshot at 3, "b" with 2.
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute_batch(V1).unwrap();
    let initial = serde_json::to_string(&AgentState::default()).unwrap();
    let mut expected = AgentState::default();
    let mut snapshot = String::new();
    for (tid, id, n) in [(1, "a", 5), (2, "b", 2)] {
        conn.execute(
            "INSERT INTO agentstate_threads (tid, id, fingerprint, head, oldest, initial, metadata, created_ms)
             VALUES (?1, ?2, ?3, ?4, 0, ?5, '{}', 0)",
            rusqlite::params![tid, id, fingerprint::<AgentState>() as i64, n, initial],
        )
        .unwrap();
        for seq in 1..=n {
            let update = message(seq);
            conn.execute(
                "INSERT INTO agentstate_entries (tid, seq, kind, time_ms, node, body)
                 VALUES (?1, ?2, 0, 0, 'node', ?3)",
                rusqlite::params![tid, seq, serde_json::to_string(&update).unwrap()],
            )
            .unwrap();
            if tid == 1 {
                agentstate::State::merge(&mut expected, update).unwrap();
                if seq == 3 {
                    snapshot = serde_json::to_string(&expected).unwrap();
                }
            }
        }
    }
    conn.execute(
        "INSERT INTO agentstate_snapshots (tid, seq, fingerprint, body) VALUES (1, 3, ?1, ?2)",
        rusqlite::params![fingerprint::<AgentState>() as i64, snapshot],
    )
    .unwrap();
    drop(conn);

    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    runtime.block_on(async {
        let store = SqliteStore::open(&path).unwrap();
        let Versioned { state, version } = store.load::<AgentState>("a").await.unwrap();
        assert_eq!((&state, version), (&expected, 5));
        assert_eq!(
            store
                .load_at::<AgentState>("a", 2)
                .await
                .unwrap()
                .state
                .context
                .len(),
            2
        );
        assert_eq!(store.load::<AgentState>("b").await.unwrap().version, 2);
        let history = store.history("a", HistoryQuery::oldest(10)).await.unwrap();
        assert_eq!(
            history.iter().map(|e| e.seq).collect::<Vec<_>>(),
            [1, 2, 3, 4, 5]
        );
        assert_eq!(history[0].node.as_deref(), Some("node"));
        // It appends as a current database, and reopens without migrating again.
        let mut b = store.thread::<AgentState>("b").await.unwrap();
        b.merge(message(3), StepMeta::default()).await.unwrap();
        drop((b, store));
        let store = SqliteStore::open(&path).unwrap();
        assert_eq!(
            store
                .load::<AgentState>("b")
                .await
                .unwrap()
                .state
                .context
                .len(),
            3
        );
    });
    assert_eq!(
        stored_version(&path),
        agentstate_store::sqlite::SCHEMA_VERSION
    );
    let conn = rusqlite::Connection::open(&path).unwrap();
    let v1_tables: i64 = conn
        .query_row(
            "SELECT count(*) FROM sqlite_master WHERE name LIKE '%_v1'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(v1_tables, 0);
    drop(conn);
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
}

#[test]
fn a_thread_at_the_most_versions_refuses_an_append_naming_it() {
    let path =
        std::env::temp_dir().join(format!("agentstate-schema-full-{}.db", std::process::id()));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    runtime.block_on(async {
        let store = SqliteStore::open(&path).unwrap();
        store.create("full", AgentState::default()).await.unwrap();
        // Its last version, as a compacted thread: a snapshot and no entries.
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute_batch(&format!(
            "UPDATE agentstate_threads SET head = {max}, oldest = {max};
             INSERT INTO agentstate_snapshots (key, fingerprint, body)
                 SELECT (tid << 32) + {max}, fingerprint, initial FROM agentstate_threads;",
            max = agentstate_store::sqlite::MAX_SEQ
        ))
        .unwrap();
        let mut full = store.thread::<AgentState>("full").await.unwrap();
        assert_eq!(full.version(), agentstate_store::sqlite::MAX_SEQ);
        let err = full
            .merge(message(1), StepMeta::default())
            .await
            .unwrap_err();
        assert_eq!(err.category(), "store_backend_error", "{err}");
        assert!(err.to_string().contains("`full`"), "{err}");
        assert!(err.to_string().contains("the most"), "{err}");
        assert_eq!(
            store.info("full").await.unwrap().version,
            agentstate_store::sqlite::MAX_SEQ
        );
    });
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
}

#[test]
fn a_version_2_database_is_migrated_when_opened() {
    let path = std::env::temp_dir().join(format!("agentstate-schema-v2-{}.db", std::process::id()));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    runtime.block_on(async {
        let store = SqliteStore::open(&path).unwrap();
        let mut t = store.create("t", AgentState::default()).await.unwrap();
        for i in 1..=3 {
            t.merge(message(i), StepMeta::default()).await.unwrap();
        }
        drop((t, store));
        // Version 2's tables are version 3's; its appends kept `head` at the newest entry.
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute_batch(&format!(
            "{V4_REMOVED}
             UPDATE agentstate_threads SET head = 3;
             DROP VIEW agentstate_meta;
             CREATE VIEW agentstate_meta (key, value) AS SELECT 'schema_version', 2;"
        ))
        .unwrap();
        drop(conn);
        let store = SqliteStore::open(&path).unwrap();
        assert_eq!(store.load::<AgentState>("t").await.unwrap().version, 3);
        let mut t = store.thread::<AgentState>("t").await.unwrap();
        assert_eq!(t.merge(message(4), StepMeta::default()).await.unwrap(), 4);
        assert_eq!(store.info("t").await.unwrap().version, 4);
    });
    assert_eq!(
        stored_version(&path),
        agentstate_store::sqlite::SCHEMA_VERSION
    );
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
}

/// Turns a version-5 file into the version-3 file it would have been: without the schema
/// records, the delete trigger and the threads' incarnations (version 4), and without the
/// threads' leases (version 5).
const V4_REMOVED: &str = "
    DROP TRIGGER agentstate_entry_deleted;
    DELETE FROM agentstate_snapshots WHERE key < 0;
    ALTER TABLE agentstate_threads DROP COLUMN incarnation;
    ALTER TABLE agentstate_threads DROP COLUMN lease_owner;
    ALTER TABLE agentstate_threads DROP COLUMN lease_expires_ms;";

#[test]
fn a_version_3_database_is_migrated_when_opened() {
    let path = std::env::temp_dir().join(format!("agentstate-schema-v3-{}.db", std::process::id()));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    runtime.block_on(async {
        let store = SqliteStore::open(&path).unwrap();
        let mut t = store.create("t", AgentState::default()).await.unwrap();
        for i in 1..=3 {
            t.merge(message(i), StepMeta::default()).await.unwrap();
        }
        drop((t, store));
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute_batch(&format!(
            "{V4_REMOVED}
             DROP VIEW agentstate_meta;
             CREATE VIEW agentstate_meta (key, value) AS SELECT 'schema_version', 3;"
        ))
        .unwrap();
        drop(conn);
        // Its thread loads and takes appends (incarnation 0), and is guarded like a new one.
        let store = SqliteStore::open(&path).unwrap();
        assert_eq!(store.info("t").await.unwrap().incarnation, 0);
        let mut t = store.thread::<AgentState>("t").await.unwrap();
        assert_eq!(t.merge(message(4), StepMeta::default()).await.unwrap(), 4);
        assert!(store.delete("t").await.unwrap());
        let mut again = store.create("t", AgentState::default()).await.unwrap();
        again.merge(message(1), StepMeta::default()).await.unwrap();
        let mut stale = store.thread::<AgentState>("t").await.unwrap();
        assert_eq!(stale.version(), 1);
        let err = t.merge(message(5), StepMeta::default()).await.unwrap_err();
        assert_eq!(err.category(), "state_write_conflict", "{err}");
        assert_eq!(
            stale.merge(message(2), StepMeta::default()).await.unwrap(),
            2
        );
    });
    assert_eq!(
        stored_version(&path),
        agentstate_store::sqlite::SCHEMA_VERSION
    );
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
}
