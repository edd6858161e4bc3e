//! The SQLite tables' versions: a database written by version 1 of the tables (entries and
//! snapshots in `WITHOUT ROWID` tables, the version in a table) is migrated when it is opened, in
//! one transaction, and reads and writes as before; so is version 2 (the same tables, whose
//! appends also moved the thread row's `head` on), and every later one; version 5 (each
//! thread's initial state and lease in its row) is written here as that build's own statements
//! would have written it.
#![cfg(feature = "sqlite")]

use agentstate::message::{Message, Role};
use agentstate::state::{AgentState, AgentStateUpdate};
use agentstate_store::migrate::fingerprint;
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
        agentstate_store::sqlite::TABLES_VERSION
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
                 SELECT key + {max}, fingerprint, body FROM agentstate_snapshots WHERE key = (
                     SELECT tid << 32 FROM agentstate_threads WHERE id = 'full');",
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
        agentstate_store::sqlite::TABLES_VERSION
    );
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
}

/// Turns a version-6 file into the version-3 file it would have been: each thread's initial
/// state back in its row (version 6 keeps it as the snapshot at version 0), without the schema
/// records, the delete trigger and the threads' incarnations (version 4), and without the
/// threads' leases (version 5; version 6 keeps them in a table of their own).
const V4_REMOVED: &str = "
    ALTER TABLE agentstate_threads ADD COLUMN initial TEXT;
    ALTER TABLE agentstate_threads ADD COLUMN lease_owner TEXT;
    ALTER TABLE agentstate_threads ADD COLUMN lease_expires_ms INTEGER;
    UPDATE agentstate_threads SET
        initial = (SELECT body FROM agentstate_snapshots s WHERE s.key = agentstate_threads.tid << 32);
    DELETE FROM agentstate_snapshots WHERE key IN (SELECT tid << 32 FROM agentstate_threads);
    DELETE FROM agentstate_snapshots WHERE key > 0 AND key < 4294967296;
    DROP VIEW agentstate_leases;
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
        agentstate_store::sqlite::TABLES_VERSION
    );
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
}

/// Version 5's tables, as that build created them (its `CREATE TABLE` statements), and its
/// version view.
const V5: &str = "
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
        created_ms INTEGER NOT NULL,
        incarnation INTEGER NOT NULL DEFAULT 0,
        lease_owner TEXT,
        lease_expires_ms INTEGER
    );
    CREATE TABLE agentstate_entries (
        key INTEGER PRIMARY KEY,
        kind INTEGER NOT NULL,
        time_ms INTEGER NOT NULL,
        node TEXT,
        run_id TEXT,
        extra TEXT,
        fingerprint INTEGER,
        body TEXT NOT NULL,
        tid INTEGER GENERATED ALWAYS AS (key >> 32) VIRTUAL,
        seq INTEGER GENERATED ALWAYS AS (key & 0xFFFFFFFF) VIRTUAL
    );
    CREATE TABLE agentstate_snapshots (
        key INTEGER PRIMARY KEY,
        fingerprint INTEGER NOT NULL,
        body TEXT NOT NULL,
        tid INTEGER GENERATED ALWAYS AS (key >> 32) VIRTUAL,
        seq INTEGER GENERATED ALWAYS AS (key & 0xFFFFFFFF) VIRTUAL
    );
    CREATE TRIGGER agentstate_entry_deleted AFTER DELETE ON agentstate_entries
    WHEN (OLD.key & 4294967295) > (SELECT head FROM agentstate_threads WHERE tid = OLD.key >> 32)
    BEGIN
        UPDATE agentstate_threads SET head = OLD.key & 4294967295 WHERE tid = OLD.key >> 32;
    END;
    CREATE VIEW agentstate_meta (key, value) AS SELECT 'schema_version', 5;";

/// A version-5 file, written as that build wrote it: "big" created with 200 messages in its
/// initial state, 6 entries, a snapshot at 4 and a lease held for an hour; "fork" a fork of it
/// at 2 with an entry of its own and an expired lease; "compacted" compacted to a snapshot at 3
/// (its initial state still in its row), with 2 entries after it. It opens, is migrated in
/// place, and reads the same states, versions, histories and leases; then it appends, leases
/// and compacts as a new file does.
#[test]
fn a_version_5_database_is_migrated_when_opened() {
    let path = std::env::temp_dir().join(format!("agentstate-schema-v5-{}.db", std::process::id()));
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
    let fp = fingerprint::<AgentState>() as i64;
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute_batch(V5).unwrap();
    let mut big = AgentState::default();
    agentstate::State::merge(
        &mut big,
        AgentStateUpdate::default().context(
            (1000..1200)
                .map(|i| Message::text_message(format!("initial {i}"), Role::User))
                .collect::<Vec<_>>(),
        ),
    )
    .unwrap();
    let json = |state: &AgentState| serde_json::to_string(state).unwrap();
    let in_an_hour = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
        + 3_600_000;
    let insert_thread = |tid: i64,
                         id: &str,
                         oldest: i64,
                         parent: Option<i64>,
                         fork: Option<i64>,
                         initial: Option<String>,
                         lease: (Option<&str>, Option<i64>)| {
        conn.execute(
            "INSERT INTO agentstate_threads (tid, id, fingerprint, head, oldest, parent, fork_seq, initial, metadata, created_ms, incarnation, lease_owner, lease_expires_ms)
             VALUES (?1, ?2, ?3, ?4, ?4, ?5, ?6, ?7, '{\"v\":5}', 0, ?8, ?9, ?10)",
            rusqlite::params![tid, id, fp, oldest, parent, fork, initial, 100 + tid, lease.0, lease.1],
        )
        .unwrap();
    };
    let insert_entry = |tid: i64, seq: i64, update: &AgentStateUpdate| {
        conn.execute(
            "INSERT INTO agentstate_entries (key, kind, time_ms, node, body) VALUES (?1, 0, ?2, 'n', ?3)",
            rusqlite::params![(tid << 32) + seq, seq, serde_json::to_string(update).unwrap()],
        )
        .unwrap();
    };
    let insert_snapshot = |tid: i64, seq: i64, state: &AgentState| {
        conn.execute(
            "INSERT INTO agentstate_snapshots (key, fingerprint, body) VALUES (?1, ?2, ?3)",
            rusqlite::params![(tid << 32) + seq, fp, json(state)],
        )
        .unwrap();
    };
    // "big": versions 0 to 6; what each version's state is.
    insert_thread(
        1,
        "big",
        0,
        None,
        None,
        Some(json(&big)),
        (Some("worker-1"), Some(in_an_hour)),
    );
    let mut states = vec![big.clone()];
    for seq in 1..=6 {
        let update = message(seq as u64);
        insert_entry(1, seq, &update);
        let mut next = states.last().unwrap().clone();
        agentstate::State::merge(&mut next, update).unwrap();
        if seq == 4 {
            insert_snapshot(1, 4, &next);
        }
        states.push(next);
    }
    // "fork": big at 2, then one entry of its own.
    insert_thread(
        2,
        "fork",
        2,
        Some(1),
        Some(2),
        None,
        (Some("gone"), Some(1)),
    );
    let own = message(30);
    insert_entry(2, 3, &own);
    let mut fork = states[2].clone();
    agentstate::State::merge(&mut fork, own).unwrap();
    // "compacted": oldest 3, a snapshot there, entries 4 and 5; its initial state unused.
    insert_thread(
        3,
        "compacted",
        3,
        None,
        None,
        Some(json(&AgentState::default())),
        (None, None),
    );
    let mut compacted = AgentState::default();
    for seq in 1..=3 {
        agentstate::State::merge(&mut compacted, message(seq)).unwrap();
    }
    insert_snapshot(3, 3, &compacted);
    for seq in 4..=5 {
        let update = message(seq as u64);
        insert_entry(3, seq, &update);
        agentstate::State::merge(&mut compacted, update).unwrap();
    }
    conn.execute("UPDATE agentstate_threads SET head = 5 WHERE tid = 3", [])
        .unwrap();
    drop(conn);

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let store = SqliteStore::open(&path).unwrap();
        // The same states at every version, the same versions and histories.
        for (seq, state) in states.iter().enumerate() {
            let loaded = store
                .load_at::<AgentState>("big", seq as u64)
                .await
                .unwrap();
            assert!(&loaded.state == state, "big at {seq}");
        }
        assert_eq!(store.info("big").await.unwrap().version, 6);
        assert_eq!(store.info("big").await.unwrap().incarnation, 101);
        assert_eq!(
            store.info("big").await.unwrap().metadata["v"],
            serde_json::json!(5)
        );
        assert!(
            store.load::<AgentState>("fork").await.unwrap()
                == Versioned {
                    state: fork,
                    version: 3
                }
        );
        assert!(
            store.load::<AgentState>("compacted").await.unwrap()
                == Versioned {
                    state: compacted.clone(),
                    version: 5
                }
        );
        let err = store
            .load_at::<AgentState>("compacted", 2)
            .await
            .unwrap_err();
        assert_eq!(err.category(), "thread_version_out_of_range", "{err}");
        let history = store
            .history("big", HistoryQuery::oldest(10))
            .await
            .unwrap();
        assert_eq!(
            history.iter().map(|e| e.seq).collect::<Vec<_>>(),
            [1, 2, 3, 4, 5, 6]
        );
        assert_eq!(history[2].time_ms, 3);
        // The same leases: "big" held, "fork"'s expired, "compacted" none.
        let held = store.lease_info("big").await.unwrap().unwrap();
        assert_eq!(
            (held.owner.as_str(), held.expires_at_ms),
            ("worker-1", in_an_hour)
        );
        assert_eq!(held.head.version, 6);
        let err = store
            .lease("big", "worker-2", std::time::Duration::from_secs(30))
            .await
            .unwrap_err();
        assert_eq!(err.category(), "thread_leased", "{err}");
        assert_eq!(store.lease_info("fork").await.unwrap(), None);
        assert_eq!(store.lease_info("compacted").await.unwrap(), None);
        // The holder's lease carries on: it fences and releases.
        let lease = store
            .lease("big", "worker-1", std::time::Duration::from_secs(30))
            .await
            .unwrap();
        assert_eq!(lease.version(), 6);
        let mut t = store.thread::<AgentState>("big").await.unwrap();
        t.fence(&lease);
        assert!(t.is_current(&lease));
        assert_eq!(t.merge(message(7), StepMeta::default()).await.unwrap(), 7);
        lease.release().await.unwrap();
        assert_eq!(store.lease_info("big").await.unwrap(), None);
        // Compaction drops the initial state with the entries before its snapshot.
        store.compact::<AgentState>("big").await.unwrap();
        assert_eq!(store.load::<AgentState>("big").await.unwrap().version, 7);
        // A new thread and a fork of the migrated one.
        store.fork("big", 7, "fork-2").await.unwrap();
        assert_eq!(store.load::<AgentState>("fork-2").await.unwrap().version, 7);
    });
    assert_eq!(
        stored_version(&path),
        agentstate_store::sqlite::TABLES_VERSION
    );
    // The thread row holds neither the initial state nor the lease any more.
    let conn = rusqlite::Connection::open(&path).unwrap();
    let columns: Vec<String> = conn
        .prepare("SELECT name FROM pragma_table_info('agentstate_threads')")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert!(
        !columns
            .iter()
            .any(|c| c == "initial" || c.starts_with("lease")),
        "{columns:?}"
    );
    let initial: String = conn
        .query_row(
            "SELECT body FROM agentstate_snapshots WHERE key = 2 << 32",
            [],
            |r| r.get(0),
        )
        .unwrap_or_default();
    assert_eq!(initial, "", "a fork has no initial state");
    let compacted_initial: i64 = conn
        .query_row(
            "SELECT count(*) FROM agentstate_snapshots WHERE key = 3 << 32",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(
        compacted_initial, 0,
        "an initial state compacted past is not kept"
    );
    // The leases' rows, as their view shows them: "fork"'s expired one ("big"'s was released).
    let leases: Vec<(i64, String, i64)> = conn
        .prepare("SELECT tid, owner, expires_ms FROM agentstate_leases")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(leases, [(2, "gone".to_owned(), 1)]);
    drop(conn);
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
}
