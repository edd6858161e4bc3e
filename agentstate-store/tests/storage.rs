//! Storage of the 300-turn chat on SQLite: one ~400-character message each way per turn,
//! one journal entry per message, the default snapshot policy. The goals: at most 0.5 MB =
//! 500,000 bytes on disk (the updates' own JSON, AgentFlow's message format, is already 0.41 MB),
//! and at most 64 bytes of bookkeeping per entry beyond the update's JSON (LangGraph's
//! SqliteSaver takes 150.6 MB for this workload; its DeltaChannel 2.3 MB with 470-1,080 bytes per
//! step).
#![cfg(feature = "sqlite")]

use agentstate::message::{Message, Role};
use agentstate::state::{AgentState, AgentStateUpdate};
use agentstate_store::{SqliteStore, StepMeta};

/// A ~400-character message.
pub fn text(turn: usize, who: &str) -> String {
    let mut s = format!("{who} turn {turn}: ");
    while s.len() < 400 {
        s.push_str("the quick brown fox jumps over the lazy dog; ");
    }
    s.truncate(400);
    s
}

#[test]
fn a_300_turn_chat_takes_under_half_a_megabyte() {
    let path = std::env::temp_dir().join(format!("agentstate-storage-{}.db", std::process::id()));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    runtime.block_on(async {
        let store = SqliteStore::open(&path).unwrap();
        let mut chat = store
            .thread_or_create("chat", AgentState::default)
            .await
            .unwrap();
        for turn in 0..300 {
            for (role, node) in [(Role::User, "user"), (Role::Assistant, "assistant")] {
                let message = Message::text_message(text(turn, node), role);
                let update = AgentStateUpdate::default().context(vec![message]);
                chat.merge(update, StepMeta::node(node).run_id("run-1"))
                    .await
                    .unwrap();
            }
        }
        assert_eq!(chat.version(), 600);
    });
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE);")
        .unwrap();
    let query = |sql: &str| -> i64 { conn.query_row(sql, [], |r| r.get(0)).unwrap() };
    let file = std::fs::metadata(&path).unwrap().len();
    let pages = query("PRAGMA page_count") * query("PRAGMA page_size");
    let entries = query("SELECT count(*) FROM agentstate_entries");
    let json = query("SELECT sum(octet_length(body)) FROM agentstate_entries");
    let table = query("SELECT sum(pgsize) FROM dbstat WHERE name = 'agentstate_entries'");
    let used = query("SELECT sum(pgsize - unused) FROM dbstat WHERE name = 'agentstate_entries'");
    let per_entry = (used - json) as f64 / entries as f64;
    let with_free_space = (table - json) as f64 / entries as f64;
    println!(
        "300-turn chat: file {file} bytes ({pages} in pages), {entries} entries, {json} bytes of update JSON, \
         bookkeeping {per_entry:.1} bytes per entry ({with_free_space:.1} counting the pages' free space)"
    );
    assert_eq!(entries, 600);
    assert_eq!(file as i64, pages, "the WAL was checkpointed into the file");
    assert!(
        file <= 500_000,
        "the 300-turn chat takes {file} bytes, more than 0.5 MB"
    );
    assert!(
        per_entry <= 64.0,
        "bookkeeping of {per_entry:.1} bytes per entry"
    );
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
}

/// Snapshots deleted by the snapshot policy, compacted entries and deleted threads give their
/// pages back to the file system (a new file uses incremental auto-vacuum): the file holds the
/// journal and the kept snapshot, not every snapshot ever written.
#[test]
fn freed_pages_go_back_to_the_file_system() {
    use agentstate_store::SnapshotPolicy;
    let path = std::env::temp_dir().join(format!("agentstate-reclaim-{}.db", std::process::id()));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let size = |path: &std::path::Path| {
        let conn = rusqlite::Connection::open(path).unwrap();
        conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE);")
            .unwrap();
        let query = |sql: &str| -> i64 { conn.query_row(sql, [], |r| r.get(0)).unwrap() };
        (
            std::fs::metadata(path).unwrap().len() as i64,
            query("SELECT coalesce(sum(octet_length(body)), 0) FROM agentstate_entries"),
            query("SELECT coalesce(sum(octet_length(body)), 0) FROM agentstate_snapshots"),
            query("PRAGMA freelist_count"),
        )
    };
    runtime.block_on(async {
        let store = SqliteStore::open(&path)
            .unwrap()
            .with_snapshot_policy(SnapshotPolicy::every(25));
        for id in ["chat", "other"] {
            let mut chat = store.thread_or_create(id, AgentState::default).await.unwrap();
            for turn in 0..300 {
                let message = Message::text_message(text(turn, "user"), Role::User);
                chat.merge(
                    AgentStateUpdate::default().context(vec![message]),
                    StepMeta::default(),
                )
                .await
                .unwrap();
            }
        }
        let (file, journal, snapshots, free) = size(&path);
        println!("reclaim: file {file}, journal {journal}, snapshots {snapshots}, {free} free pages");
        // Twelve snapshots of up to ~140 KB were written per thread, one is kept: without
        // reclaiming, the file would also hold the free pages of the one before (and more).
        assert_eq!(free, 0, "free pages left in the file");
        assert!(
            file < (journal + snapshots) * 13 / 10 + 64 * 1024,
            "file {file} for {journal} bytes of journal and {snapshots} of snapshots"
        );
        // Deleting a thread and compacting the other shrink the file.
        assert!(store.delete("other").await.unwrap());
        store.compact::<AgentState>("chat").await.unwrap();
        let (after, journal, snapshots, free) = size(&path);
        println!("reclaim: after deleting and compacting, file {after}, journal {journal}, snapshots {snapshots}");
        assert_eq!(free, 0, "free pages left in the file");
        assert!(after < file / 2, "{after} bytes after deleting, {file} before");
    });
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
}
