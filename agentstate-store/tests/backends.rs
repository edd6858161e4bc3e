//! The backend-independent suite: every case runs on SQLite, then on PostgreSQL when
//! `AGENTSTATE_POSTGRES_URL` is set (under `CI=true` it must be, and the server must answer).
//!
//! Its own `main` (no libtest harness): the racing and crashing cases re-execute this binary as
//! child processes (`AGENTSTATE_STORE_CHILD=...`).

use agentstate::state::AgentStateUpdate;
use agentstate::FanIn;
use agentstate::{AgentState, State};
use agentstate_store::backend::Backend;
use agentstate_store::migrate::{fingerprint, Migration};
use agentstate_store::{
    HistoryQuery, SnapshotPolicy, StepMeta, Store, StoreError, Thread, ThreadInfo, ThreadQuery,
    Versioned,
};
use serde::{Deserialize, Serialize};
use serde_json::{json, Map};
use std::collections::BTreeSet;
use std::future::Future;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The test state: a log every writer appends to, and a last-writer field.
#[derive(AgentState, Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Tally {
    #[reducer(append)]
    pub log: Vec<u64>,
    pub last: Option<u64>,
}

/// Another state type, to load a `Tally` thread as.
#[derive(AgentState, Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Other {
    pub name: String,
}

/// `Tally` with `last` renamed: a new version of the type (`Tally` declares none: version 0),
/// reached by a migration.
#[derive(AgentState, Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[agent_state(version = 2)]
pub struct TallyV2 {
    #[reducer(append)]
    pub log: Vec<u64>,
    pub latest: Option<u64>,
}

/// `Tally` with a field added (compatible).
#[derive(AgentState, Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TallyV0 {
    #[reducer(append)]
    pub log: Vec<u64>,
    pub last: Option<u64>,
    #[serde(default)]
    pub note: Option<String>,
}

fn step(value: u64) -> TallyUpdate {
    TallyUpdate::default().log(vec![value]).last(Some(value))
}

/// Where a case's database is.
#[derive(Debug, Clone)]
enum Db {
    Sqlite(std::path::PathBuf),
    Postgres { url: String, schema: String },
}

impl Db {
    fn describe(&self) -> String {
        match self {
            Db::Sqlite(path) => format!("sqlite:{}", path.display()),
            Db::Postgres { url, schema } => format!("postgres:{schema}:{url}"),
        }
    }

    fn parse(text: &str) -> Db {
        if let Some(path) = text.strip_prefix("sqlite:") {
            return Db::Sqlite(path.into());
        }
        let rest = text.strip_prefix("postgres:").expect("a db description");
        let (schema, url) = rest.split_once(':').expect("schema:url");
        Db::Postgres {
            url: url.into(),
            schema: schema.into(),
        }
    }

    /// Runs raw SQL on the database (to corrupt it on purpose). `{threads}`, `{entries}`,
    /// `{snapshots}`, `{meta}` name the tables; `{thread:ID}` selects a thread's entries.
    async fn exec(&self, sql: &str) {
        match self {
            #[cfg(feature = "sqlite")]
            Db::Sqlite(path) => {
                let sql = sql
                    .replace("{threads}", "agentstate_threads")
                    .replace("{entries}", "agentstate_entries")
                    .replace("{snapshots}", "agentstate_snapshots")
                    .replace("{meta}", "agentstate_meta");
                let sql = replace_thread(&sql, |id| {
                    format!("tid = (SELECT tid FROM agentstate_threads WHERE id = '{id}')")
                });
                let conn = rusqlite::Connection::open(path).unwrap();
                conn.execute_batch(&sql).unwrap();
            }
            #[cfg(feature = "postgres")]
            Db::Postgres { url, schema } => {
                let sql = sql
                    .replace("{threads}", &format!("\"{schema}\".agentstate_threads"))
                    .replace("{entries}", &format!("\"{schema}\".agentstate_entries"))
                    .replace("{snapshots}", &format!("\"{schema}\".agentstate_snapshots"))
                    .replace("{meta}", &format!("\"{schema}\".agentstate_meta"))
                    .replace("{schemas}", &format!("\"{schema}\".agentstate_schemas"));
                let sql = replace_thread(&sql, |id| format!("thread = '{id}'"));
                let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls)
                    .await
                    .unwrap();
                tokio::spawn(conn);
                client.batch_execute(&sql).await.unwrap();
            }
            #[allow(unreachable_patterns)]
            _ => unreachable!("backend not compiled in"),
        }
    }
}

impl Db {
    /// Records another store schema version (SQLite keeps it in a view, PostgreSQL in a table).
    async fn set_store_version(&self, version: i64) {
        match self {
            Db::Sqlite(_) => {
                self.exec(&format!(
                    "DROP VIEW agentstate_meta;
                     CREATE VIEW agentstate_meta (key, value) AS SELECT 'schema_version', {version};"
                ))
                .await
            }
            Db::Postgres { .. } => {
                self.exec(&format!(
                    "UPDATE {{meta}} SET value = {version} WHERE key = 'schema_version'"
                ))
                .await
            }
        }
    }
}

fn replace_thread(sql: &str, with: impl Fn(&str) -> String) -> String {
    let mut out = sql.to_owned();
    while let Some(start) = out.find("{thread:") {
        let end = start + out[start..].find('}').unwrap();
        let id = out[start + 8..end].to_owned();
        out.replace_range(start..=end, &with(&id));
    }
    out
}

/// A backend the suite can open from a [`Db`].
trait Open: Backend + Sized {
    fn open(db: &Db) -> impl Future<Output = Result<Store<Self>, StoreError>>;

    /// As `open`, for the races: what they test (the version rule) does not depend on when a
    /// commit reaches the disk, so PostgreSQL commits without waiting for its WAL flush there
    /// (8,000 commits on one row would otherwise wait for 8,000 flushes in a row).
    fn open_for_race(db: &Db) -> impl Future<Output = Result<Store<Self>, StoreError>> {
        Self::open(db)
    }
}

#[cfg(feature = "sqlite")]
impl Open for agentstate_store::sqlite::Sqlite {
    async fn open(db: &Db) -> Result<Store<Self>, StoreError> {
        let Db::Sqlite(path) = db else { unreachable!() };
        agentstate_store::SqliteStore::open(path)
    }
}

#[cfg(feature = "postgres")]
impl Open for agentstate_store::postgres::Postgres {
    async fn open(db: &Db) -> Result<Store<Self>, StoreError> {
        let Db::Postgres { url, schema } = db else {
            unreachable!()
        };
        agentstate_store::PostgresStore::connect_with(
            url,
            agentstate_store::postgres::PostgresOptions {
                schema: schema.clone(),
                ..Default::default()
            },
        )
        .await
    }

    async fn open_for_race(db: &Db) -> Result<Store<Self>, StoreError> {
        let Db::Postgres { url, schema } = db else {
            unreachable!()
        };
        agentstate_store::PostgresStore::connect_with(
            url,
            agentstate_store::postgres::PostgresOptions {
                schema: schema.clone(),
                synchronous_commit: false,
                ..Default::default()
            },
        )
        .await
    }
}

/// The store for a backend chosen at run time, over either database: the suite's cases run
/// on it too (but the races, whose child processes open the typed stores).
impl Open for agentstate_store::AnyBackend {
    async fn open(db: &Db) -> Result<Store<Self>, StoreError> {
        match db {
            Db::Sqlite(path) => {
                agentstate_store::AnyStore::open(&format!("sqlite:{}", path.display())).await
            }
            #[cfg(feature = "postgres")]
            Db::Postgres { .. } => agentstate_store::postgres::Postgres::open(db)
                .await
                .map(Into::into),
            #[allow(unreachable_patterns)]
            _ => unreachable!("backend not compiled in"),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The cases.

async fn create_append_load<B: Open>(db: Db) {
    let store = B::open(&db).await.unwrap();
    let mut thread = store.create("t", Tally::default()).await.unwrap();
    for i in 1..=5 {
        let meta = StepMeta::node("count").run_id("run-1").with("i", json!(i));
        assert_eq!(thread.merge(step(i), meta).await.unwrap(), i);
    }
    let Versioned { state, version } = store.load::<Tally>("t").await.unwrap();
    assert_eq!(version, 5);
    assert_eq!(state.log, vec![1, 2, 3, 4, 5]);
    assert_eq!(&state, thread.state());
    // Reopened: the same.
    drop(store);
    let store = B::open(&db).await.unwrap();
    assert_eq!(
        store.load::<Tally>("t").await.unwrap(),
        Versioned {
            state: thread.state().clone(),
            version: 5
        }
    );
    // Creating it again is refused; an unknown thread is named.
    let err = store.create("t", Tally::default()).await.unwrap_err();
    assert_eq!(err.category(), "thread_exists", "{err}");
    let err = store.load::<Tally>("nope").await.unwrap_err();
    assert_eq!(err.category(), "thread_not_found", "{err}");
    assert!(err.to_string().contains("`nope`"), "{err}");
}

async fn a_stale_writer_gets_a_conflict_and_writes_nothing<B: Open>(db: Db) {
    let store = B::open(&db).await.unwrap();
    let mut a = store.create("t", Tally::default()).await.unwrap();
    let mut b = store.thread::<Tally>("t").await.unwrap();
    a.merge(step(1), StepMeta::default()).await.unwrap();
    let err = b.merge(step(2), StepMeta::default()).await.unwrap_err();
    assert_eq!(err.category(), "state_write_conflict");
    match &err {
        StoreError::Conflict {
            thread,
            expected,
            actual,
        } => {
            assert_eq!((thread.as_str(), *expected, *actual), ("t", 0, 1));
        }
        other => panic!("expected a conflict, got {other}"),
    }
    assert_eq!(
        err.to_string(),
        "thread `t` is at version 1, not at version 0 that this writer read; nothing was written (reload and retry)"
    );
    // Nothing written, and b's local state unchanged.
    assert_eq!(b.state().log, Vec::<u64>::new());
    assert_eq!(store.load::<Tally>("t").await.unwrap().state.log, vec![1]);
    // The retry helper reloads and decides again.
    let seq = b
        .merge_with_sync(StepMeta::default(), |s| Ok(step(s.log.len() as u64 + 10)))
        .await
        .unwrap();
    assert_eq!(seq, 2);
    assert_eq!(
        store.load::<Tally>("t").await.unwrap().state.log,
        vec![1, 11]
    );
    // An update that does not merge writes nothing.
    let mut strict = store.thread::<Tally>("t").await.unwrap();
    let err = strict
        .merge_parallel(
            vec![
                TallyUpdate::default().last(Some(1)),
                TallyUpdate::default().last(Some(2)),
            ],
            FanIn::Strict,
            StepMeta::default(),
        )
        .await
        .unwrap_err();
    assert_eq!(err.category(), "state_validation_error", "{err}");
    assert_eq!(store.info("t").await.unwrap().version, 2);
}

async fn parallel_steps_replay_exactly<B: Open>(db: Db) {
    let store = B::open(&db).await.unwrap();
    let mut t = store.create("p", Tally::default()).await.unwrap();
    t.merge_parallel(
        vec![step(1), step(2), step(3)],
        FanIn::Ordered,
        StepMeta::node("fan"),
    )
    .await
    .unwrap();
    t.merge(step(4), StepMeta::default()).await.unwrap();
    let mut expected = Tally::default();
    expected
        .merge_parallel(vec![step(1), step(2), step(3)], FanIn::Ordered)
        .unwrap();
    expected.merge(step(4)).unwrap();
    assert_eq!(&expected, t.state());
    assert_eq!(
        store.load::<Tally>("p").await.unwrap(),
        Versioned {
            state: expected,
            version: 2
        }
    );
    let history = store.history("p", HistoryQuery::oldest(10)).await.unwrap();
    assert_eq!(history.len(), 2);
    assert_eq!(history[0].kind, agentstate_store::EntryKind::Parallel);
    assert_eq!(history[0].node.as_deref(), Some("fan"));
}

async fn time_travel_history_and_list<B: Open>(db: Db) {
    let store = B::open(&db).await.unwrap();
    let meta = |user: &str| {
        let mut m = Map::new();
        m.insert("user".into(), json!(user));
        m
    };
    let mut t = store
        .create_with("a", Tally::default(), meta("ann"))
        .await
        .unwrap();
    store
        .create_with("b", Tally::default(), meta("bob"))
        .await
        .unwrap();
    store
        .create_with("c", Tally::default(), meta("ann"))
        .await
        .unwrap();
    for i in 1..=30 {
        t.merge(step(i), StepMeta::node(format!("n{i}")).with("i", json!(i)))
            .await
            .unwrap();
    }
    for seq in [0, 1, 17, 30] {
        let state = store.load_at::<Tally>("a", seq).await.unwrap();
        assert_eq!(state.state.log, (1..=seq).collect::<Vec<_>>());
        assert_eq!(state.version, seq);
    }
    let err = store.load_at::<Tally>("a", 31).await.unwrap_err();
    assert_eq!(err.category(), "thread_version_out_of_range", "{err}");
    // History pages.
    let first = store.history("a", HistoryQuery::oldest(10)).await.unwrap();
    let second = store
        .history(
            "a",
            HistoryQuery::oldest(100).after(first.last().unwrap().seq),
        )
        .await
        .unwrap();
    assert_eq!(
        first.iter().map(|e| e.seq).collect::<Vec<_>>(),
        (1..=10).collect::<Vec<_>>()
    );
    assert_eq!(second.len(), 20);
    assert_eq!(second[0].node.as_deref(), Some("n11"));
    assert_eq!(second[0].extra.get("i"), Some(&json!(11)));
    assert!(second[0].bytes > 0);
    assert_eq!(
        store
            .history("nope", HistoryQuery::oldest(10))
            .await
            .unwrap_err()
            .category(),
        "thread_not_found"
    );
    // Threads: paged, filtered.
    let page = store.list(ThreadQuery::first(2)).await.unwrap();
    assert_eq!(
        page.iter().map(|t| t.id.as_str()).collect::<Vec<_>>(),
        ["a", "b"]
    );
    let next = store.list(ThreadQuery::first(2).after("b")).await.unwrap();
    assert_eq!(
        next.iter().map(|t| t.id.as_str()).collect::<Vec<_>>(),
        ["c"]
    );
    let anns = store
        .list(ThreadQuery::first(10).with("user", json!("ann")))
        .await
        .unwrap();
    assert_eq!(
        anns.iter().map(|t| t.id.as_str()).collect::<Vec<_>>(),
        ["a", "c"]
    );
    assert_eq!(anns[0].version, 30);
    // Delete.
    assert!(store.delete("b").await.unwrap());
    assert!(!store.delete("b").await.unwrap());
    assert_eq!(
        store.load::<Tally>("b").await.unwrap_err().category(),
        "thread_not_found"
    );
}

async fn fork_starts_from_its_parent<B: Open>(db: Db) {
    let store = B::open(&db).await.unwrap();
    let mut main = store.create("main", Tally::default()).await.unwrap();
    for i in 1..=10 {
        main.merge(step(i), StepMeta::default()).await.unwrap();
    }
    let info = store.fork("main", 4, "alt").await.unwrap();
    assert_eq!(
        (info.version, info.parent.clone()),
        (4, Some(("main".to_owned(), 4)))
    );
    let mut alt = store.thread::<Tally>("alt").await.unwrap();
    assert_eq!(
        (alt.state().log.clone(), alt.version()),
        (vec![1, 2, 3, 4], 4)
    );
    alt.merge(step(100), StepMeta::default()).await.unwrap();
    assert_eq!(
        store.load::<Tally>("alt").await.unwrap().state.log,
        vec![1, 2, 3, 4, 100]
    );
    assert_eq!(
        store.load::<Tally>("main").await.unwrap().state.log.len(),
        10
    );
    // A fork of a fork.
    store.fork("alt", 5, "alt2").await.unwrap();
    assert_eq!(
        store.load::<Tally>("alt2").await.unwrap().state.log,
        vec![1, 2, 3, 4, 100]
    );
    // History of a fork: the parent's entries up to the fork point, then its own, paged
    // straight through the fork point; each inherited entry names the thread holding it.
    let seqs_from = |page: &[agentstate_store::EntryInfo]| {
        page.iter()
            .map(|e| (e.seq, e.inherited_from.clone().unwrap_or_default()))
            .collect::<Vec<_>>()
    };
    let from = |seq: u64, thread: &str| (seq, thread.to_owned());
    assert_eq!(
        seqs_from(
            &store
                .history("alt2", HistoryQuery::oldest(100))
                .await
                .unwrap()
        ),
        [
            from(1, "main"),
            from(2, "main"),
            from(3, "main"),
            from(4, "main"),
            from(5, "alt")
        ]
    );
    let mut paged = Vec::new();
    let mut after = 0;
    loop {
        let page = store
            .history("alt", HistoryQuery::oldest(2).after(after))
            .await
            .unwrap();
        let Some(last) = page.last() else { break };
        after = last.seq;
        paged.push(seqs_from(&page));
    }
    assert_eq!(
        paged,
        [
            vec![from(1, "main"), from(2, "main")],
            vec![from(3, "main"), from(4, "main")],
            vec![from(5, "")]
        ]
    );
    // A fork's own entries: the page after its fork point; the parent's own history is its own.
    assert_eq!(
        seqs_from(
            &store
                .history("alt", HistoryQuery::oldest(100).after(4))
                .await
                .unwrap()
        ),
        [from(5, "")]
    );
    assert_eq!(
        store
            .history("main", HistoryQuery::oldest(100))
            .await
            .unwrap()
            .len(),
        10
    );
    assert_eq!(
        store
            .history("alt", HistoryQuery::oldest(0))
            .await
            .unwrap()
            .len(),
        0
    );
    // Out of range; the parent cannot be deleted while forks refer to it.
    let err = store.fork("main", 11, "bad").await.unwrap_err();
    assert_eq!(err.category(), "thread_version_out_of_range", "{err}");
    let err = store.delete("main").await.unwrap_err();
    assert_eq!(err.category(), "thread_has_forks", "{err}");
    // Compacting the parent keeps what the fork starts from.
    main.merge(step(11), StepMeta::default()).await.unwrap();
    let done = store.compact::<Tally>("main").await.unwrap();
    assert_eq!(done.snapshot, 11);
    assert_eq!(
        store.load::<Tally>("alt").await.unwrap().state.log,
        vec![1, 2, 3, 4, 100]
    );
    assert_eq!(
        store.load::<Tally>("main").await.unwrap().state.log.len(),
        11
    );
}

async fn snapshots_and_compaction<B: Open>(db: Db) {
    let store = B::open(&db)
        .await
        .unwrap()
        .with_snapshot_policy(SnapshotPolicy::every(8));
    let mut t = store.create("s", Tally::default()).await.unwrap();
    for i in 1..=50 {
        t.merge(step(i), StepMeta::default()).await.unwrap();
    }
    // Snapshots at 8, 16, ..., 48: every version still loads the same.
    for seq in [0, 7, 8, 9, 48, 50] {
        assert_eq!(
            store.load_at::<Tally>("s", seq).await.unwrap().state.log,
            (1..=seq).collect::<Vec<_>>()
        );
    }
    // The latest load replays at most K entries: a handle knows how many.
    let done = store.compact::<Tally>("s").await.unwrap();
    assert_eq!(
        done,
        agentstate_store::Compaction {
            snapshot: 50,
            dropped: 50
        }
    );
    let info = store.info("s").await.unwrap();
    assert_eq!((info.oldest, info.version), (50, 50));
    assert_eq!(
        store
            .history("s", HistoryQuery::oldest(100))
            .await
            .unwrap()
            .len(),
        0
    );
    assert_eq!(
        store.load::<Tally>("s").await.unwrap().state.log,
        (1..=50).collect::<Vec<_>>()
    );
    let err = store.load_at::<Tally>("s", 10).await.unwrap_err();
    assert_eq!(err.category(), "thread_version_out_of_range", "{err}");
    // Appending goes on after compaction; newer snapshots (at 58 and 66, of which only the
    // newest is kept) never take the place of the one the compaction left as the base.
    let mut t = store.thread::<Tally>("s").await.unwrap();
    for i in 51..=66 {
        t.merge(step(i), StepMeta::default()).await.unwrap();
    }
    assert_eq!(store.load::<Tally>("s").await.unwrap().state.log.len(), 66);
    assert_eq!(
        store.load_at::<Tally>("s", 51).await.unwrap().state.log,
        (1..=51).collect::<Vec<_>>()
    );
    // The size rule: a snapshot once the journal outgrows the last one.
    let store =
        store.with_snapshot_policy(SnapshotPolicy::every(1_000).when_journal_outgrows(true));
    let mut u = store.create("u", Tally::default()).await.unwrap();
    for i in 1..=40 {
        u.merge(TallyUpdate::default().last(Some(i)), StepMeta::default())
            .await
            .unwrap();
    }
    // Compaction cuts at the newest snapshot, which the size rule made recently.
    let done = store.compact::<Tally>("u").await.unwrap();
    assert_eq!(done.dropped, 40);
    assert_eq!(store.load::<Tally>("u").await.unwrap().state.last, Some(40));
    // Only the newest snapshot is kept by default (`keep(1)`), so storage grows with the
    // journal, not with its square; `keep(2)` keeps the one before it too; and a fork keeps the
    // snapshot it loads its start from (its parent's newest at or before the fork point) even
    // when newer ones would push it out.
    let store = store.with_snapshot_policy(SnapshotPolicy::every(8));
    let mut k = store.create("k", Tally::default()).await.unwrap();
    merge_steps(&mut k, 1..=20).await;
    let kept2 = store
        .clone()
        .with_snapshot_policy(SnapshotPolicy::every(8).keep(2));
    let mut k2 = kept2.create("k2", Tally::default()).await.unwrap();
    merge_steps(&mut k2, 1..=20).await;
    let mut k3 = store.create("k3", Tally::default()).await.unwrap();
    merge_steps(&mut k3, 1..=10).await;
    store.fork("k3", 10, "k3-fork").await.unwrap();
    merge_steps(&mut k3, 11..=20).await;
    assert_eq!(
        store.load::<Tally>("k3-fork").await.unwrap().state.log,
        (1..=10).collect::<Vec<_>>()
    );
    // Spoil every snapshot's body (but the initial states, SQLite's snapshots at version 0):
    // a read of a snapshot that is still there is refused.
    db.exec("UPDATE {snapshots} SET body = '\"spoiled\"' WHERE seq > 0")
        .await;
    let spoiled = |result: Result<Tally, StoreError>| {
        let err = result.unwrap_err();
        assert_eq!(err.category(), "store_corrupt_data", "{err}");
    };
    // "k": version 9 replays from the start (the snapshot at 8 is gone); the latest reads 16.
    assert_eq!(
        store.load_at::<Tally>("k", 9).await.unwrap().state.log,
        (1..=9).collect::<Vec<_>>()
    );
    spoiled(store.load::<Tally>("k").await.map(|loaded| loaded.state));
    // "k2": version 9 reads the snapshot at 8; version 7 replays from the start.
    spoiled(
        store
            .load_at::<Tally>("k2", 9)
            .await
            .map(|loaded| loaded.state),
    );
    assert_eq!(
        store.load_at::<Tally>("k2", 7).await.unwrap().state.log,
        (1..=7).collect::<Vec<_>>()
    );
    // The fork reads its parent's snapshot at 8.
    spoiled(
        store
            .load::<Tally>("k3-fork")
            .await
            .map(|loaded| loaded.state),
    );
}

/// Merges `step(i)` for each `i` of `steps`, one entry each.
async fn merge_steps<B: Backend>(
    thread: &mut Thread<Tally, B>,
    steps: std::ops::RangeInclusive<u64>,
) {
    for i in steps {
        thread.merge(step(i), StepMeta::default()).await.unwrap();
    }
}

async fn migrations_and_schema_mismatch<B: Open>(db: Db) {
    let store = B::open(&db).await.unwrap();
    let mut t = store.create("m", Tally::default()).await.unwrap();
    t.merge(step(1), StepMeta::default()).await.unwrap();
    t.merge(step(2), StepMeta::default()).await.unwrap();
    // Another state type: a named error.
    let err = store.load::<Other>("m").await.unwrap_err();
    assert_eq!(err.category(), "state_schema_mismatch", "{err}");
    assert!(err.to_string().contains("Other"), "{err}");
    // A migration from Tally to TallyV2.
    fn rename(mut v: serde_json::Value) -> Result<serde_json::Value, String> {
        let map = v.as_object_mut().ok_or("not an object")?;
        if let Some(last) = map.remove("last") {
            map.insert("latest".into(), last);
        }
        Ok(v)
    }
    let store = store.with_migration(Migration::new(0, 2, rename, rename));
    let Versioned { state: v2, version } = store.load::<TallyV2>("m").await.unwrap();
    assert_eq!((v2.log, v2.latest, version), (vec![1, 2], Some(2), 2));
    // The new type appends; its entries record its fingerprint, so they are not migrated again.
    let mut t2 = store.thread::<TallyV2>("m").await.unwrap();
    t2.merge(
        TallyV2Update::default().log(vec![3]).latest(Some(3)),
        StepMeta::default(),
    )
    .await
    .unwrap();
    let Versioned { state: v2, version } = store.load::<TallyV2>("m").await.unwrap();
    assert_eq!((v2.log, v2.latest, version), (vec![1, 2, 3], Some(3), 3));
    // The old type cannot read the new type's entry (no migration back): a named error.
    let err = store.load::<Tally>("m").await.unwrap_err();
    assert_eq!(err.category(), "state_migration_missing", "{err}");
    assert!(err.to_string().contains("version 2"), "{err}");
    assert_eq!(
        store.load_at::<Tally>("m", 2).await.unwrap().state.log,
        vec![1, 2]
    );
}

async fn migrations_written_back<B: Open>(db: Db) {
    fn rename(mut v: serde_json::Value) -> Result<serde_json::Value, String> {
        let map = v.as_object_mut().ok_or("not an object")?;
        if let Some(last) = map.remove("last") {
            map.insert("latest".into(), last);
        }
        Ok(v)
    }
    let plain = B::open(&db).await.unwrap();
    let store = plain
        .clone()
        .with_migration(Migration::new(0, 2, rename, rename));
    // A thread of Tally rows: the initial state, entries (one a parallel step), a snapshot.
    let mut t = plain.create("w", Tally::default()).await.unwrap();
    for i in 1..=3 {
        t.merge(step(i), StepMeta::default()).await.unwrap();
    }
    plain.snapshot::<Tally>("w").await.unwrap();
    t.merge_parallel(vec![step(4), step(5)], FanIn::Ordered, StepMeta::default())
        .await
        .unwrap();
    let before: Vec<_> = {
        let mut states = Vec::new();
        for seq in 0..=4 {
            states.push(store.load_at::<TallyV2>("w", seq).await.unwrap());
        }
        states
    };
    // Without the migration, the new type cannot read it; after writing it back, it can: every
    // row (time travel included) is in the new schema.
    let err = plain.load::<TallyV2>("w").await.unwrap_err();
    assert_eq!(err.category(), "state_migration_missing", "{err}");
    assert_eq!(store.migrate_thread::<TallyV2>("w").await.unwrap(), 4);
    assert_eq!(
        plain.info("w").await.unwrap().fingerprint,
        fingerprint::<TallyV2>()
    );
    for (seq, state) in before.iter().enumerate() {
        assert_eq!(
            &plain.load_at::<TallyV2>("w", seq as u64).await.unwrap(),
            state
        );
    }
    assert_eq!(before[4].state.log, [1, 2, 3, 4, 5]);
    assert_eq!(before[4].state.latest, Some(5));
    // The old type's handle, read before, is refused (its entry would be read in the new
    // schema), and writes nothing; the old type no longer reads the thread.
    let err = t.merge(step(6), StepMeta::default()).await.unwrap_err();
    assert_eq!(err.category(), "state_write_conflict", "{err}");
    assert!(err.to_string().contains("migrated"), "{err}");
    assert_eq!(plain.info("w").await.unwrap().version, 4);
    let err = plain.load::<Tally>("w").await.unwrap_err();
    assert_eq!(err.category(), "state_migration_missing", "{err}");
    // The new type appends as the thread's own type.
    let mut t2 = plain.thread::<TallyV2>("w").await.unwrap();
    t2.merge(
        TallyV2Update::default().log(vec![6]).latest(Some(6)),
        StepMeta::default(),
    )
    .await
    .unwrap();
    assert_eq!(plain.load::<TallyV2>("w").await.unwrap().state.log.len(), 6);
    // A migration that fails on one row writes nothing, and names the row.
    let mut z = plain.create("z", Tally::default()).await.unwrap();
    for i in 1..=3 {
        z.merge(step(i), StepMeta::default()).await.unwrap();
    }
    let picky = plain
        .clone()
        .with_migration(Migration::new(0, 2, rename, |v| match v.get("last") {
            Some(last) if last == &json!(2) => Err("two is not allowed".into()),
            _ => rename(v),
        }));
    let err = picky.migrate_thread::<TallyV2>("z").await.unwrap_err();
    assert_eq!(err.category(), "state_migration_failed", "{err}");
    assert!(err.to_string().contains("`z`"), "{err}");
    assert!(err.to_string().contains("entry 2: two"), "{err}");
    assert_eq!(
        plain.info("z").await.unwrap().fingerprint,
        fingerprint::<Tally>()
    );
    assert_eq!(
        plain.load::<Tally>("z").await.unwrap().state.log,
        vec![1, 2, 3]
    );
    z.merge(step(4), StepMeta::default()).await.unwrap();
}

async fn bad_data_is_a_named_error<B: Open>(db: Db) {
    let store = B::open(&db).await.unwrap();
    // x5 to x7 have long journals, read in batches: a gap after the first batches, entries
    // deleted before a snapshot, and a bad entry in a later batch.
    for (id, n) in [
        ("x1", 3),
        ("x2", 3),
        ("x3", 3),
        ("x4", 3),
        ("x5", 200),
        ("x6", 200),
        ("x7", 200),
    ] {
        let mut t = store.create(id, Tally::default()).await.unwrap();
        for i in 1..=n {
            t.merge(step(i), StepMeta::default()).await.unwrap();
        }
    }
    assert_eq!(store.snapshot::<Tally>("x6").await.unwrap(), 200);
    drop(store);
    db.exec(
        "UPDATE {entries} SET body = '{\"log\": \"oops\"}' WHERE {thread:x1} AND seq = 2;
         UPDATE {entries} SET body = '{\"lgo\": [7]}' WHERE {thread:x2} AND seq = 2;
         DELETE FROM {entries} WHERE {thread:x3} AND seq = 2;
         UPDATE {entries} SET kind = 9 WHERE {thread:x4} AND seq = 3;
         DELETE FROM {entries} WHERE {thread:x5} AND seq = 150;
         DELETE FROM {entries} WHERE {thread:x6} AND seq > 197;
         UPDATE {entries} SET body = '{\"lgo\": [7]}' WHERE {thread:x7} AND seq = 180;",
    )
    .await;
    let store = B::open(&db).await.unwrap();
    for (id, needle) in [
        ("x1", "entry 2: "),
        ("x2", "lgo"),
        ("x3", "entry 2 is missing"),
        ("x4", "kind 9"),
    ] {
        let err = store.load::<Tally>(id).await.unwrap_err();
        assert_eq!(err.category(), "store_corrupt_data", "{id}: {err}");
        assert!(err.to_string().contains(needle), "{id}: {err}");
        assert!(err.to_string().contains(&format!("`{id}`")), "{err}");
        // Versions before the bad row still load.
        assert_eq!(
            store.load_at::<Tally>(id, 1).await.unwrap().state.log,
            vec![1]
        );
    }
    let err = store.load::<Tally>("x5").await.unwrap_err();
    assert_eq!(err.category(), "store_corrupt_data", "{err}");
    assert!(err.to_string().contains("entry 150 is missing"), "{err}");
    let before = store.load_at::<Tally>("x5", 149).await.unwrap();
    assert_eq!(before.state.log, (1..=149).collect::<Vec<u64>>());
    // x7's bad entry, in a later batch, fails as x2's in the first.
    let corrupt = |err: StoreError| match err {
        StoreError::Corrupt { what, reason, .. } => (what, reason),
        err => panic!("not corrupt data: {err}"),
    };
    let (what, reason) = corrupt(store.load::<Tally>("x7").await.unwrap_err());
    let (_, x2_reason) = corrupt(store.load::<Tally>("x2").await.unwrap_err());
    assert_eq!((what.as_str(), &reason), ("entry 180", &x2_reason));
    let before = store.load_at::<Tally>("x7", 179).await.unwrap();
    assert_eq!(before.state.log, (1..=179).collect::<Vec<u64>>());
    // x6's latest version loads from its snapshot; the versions between the last entry left
    // and the snapshot are a gap.
    assert_eq!(store.load::<Tally>("x6").await.unwrap().version, 200);
    let err = store.load_at::<Tally>("x6", 199).await.unwrap_err();
    assert_eq!(err.category(), "store_corrupt_data", "{err}");
    assert!(
        err.to_string().contains("entries 198 to 199 are missing"),
        "{err}"
    );
    // A future store version: refused, nothing written.
    drop(store);
    db.set_store_version(99).await;
    let err = B::open(&db).await.unwrap_err();
    assert_eq!(err.category(), "store_version_unsupported", "{err}");
    assert!(err.to_string().contains("version 99"), "{err}");
}

// ---------------------------------------------------------------------------------------------
// Schema evolution (see `agentstate_store::migrate`).

/// A state as first written: a bounded log, a last value and a field later removed.
mod first {
    use super::*;

    #[derive(AgentState, Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
    pub struct Notes {
        #[reducer(bounded_append(max_len = 5))]
        pub log: Vec<u64>,
        pub last: Option<u64>,
        pub scratch: Option<String>,
    }
}

/// The same state edited compatibly: a field added with a default, one removed, a reducer
/// parameter changed (no version declared by either).
mod edited {
    use super::*;

    #[derive(AgentState, Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
    pub struct Notes {
        #[reducer(bounded_append(max_len = 50))]
        pub log: Vec<u64>,
        pub last: Option<u64>,
        #[serde(default)]
        pub title: Option<String>,
    }
}

/// The same state edited incompatibly: `last` changed type.
mod retyped {
    use super::*;

    #[derive(AgentState, Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
    pub struct Notes {
        #[reducer(bounded_append(max_len = 5))]
        pub log: Vec<u64>,
        pub last: Option<String>,
        pub scratch: Option<String>,
    }
}

/// The same state edited incompatibly: a required field added.
mod required {
    use super::*;

    #[derive(AgentState, Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
    pub struct Notes {
        #[reducer(bounded_append(max_len = 5))]
        pub log: Vec<u64>,
        pub last: Option<u64>,
        pub owner: String,
    }
}

fn note(i: u64) -> first::NotesUpdate {
    first::NotesUpdate::default()
        .log(vec![i])
        .last(Some(i))
        .scratch(Some(format!("draft {i}")))
}

async fn compatible_edits_load_without_ceremony<B: Open>(db: Db) {
    let store = B::open(&db).await.unwrap();
    let mut t = store.create("n", first::Notes::default()).await.unwrap();
    for i in 1..=8 {
        t.merge(note(i), StepMeta::default()).await.unwrap();
    }
    assert_eq!(t.state().log, [4, 5, 6, 7, 8]);
    // The edited type reads it: `scratch` dropped (also from each update), `title` defaulted,
    // and the journal replayed under the new reducer (up to 50 items: time travel rebuilds the
    // old versions under the new schema).
    let Versioned {
        state: notes,
        version,
    } = store.load::<edited::Notes>("n").await.unwrap();
    assert_eq!(version, 8);
    assert_eq!(notes.log, (1..=8).collect::<Vec<_>>());
    assert_eq!((notes.last, notes.title), (Some(8), None));
    assert_eq!(
        store
            .load_at::<edited::Notes>("n", 3)
            .await
            .unwrap()
            .state
            .log,
        [1, 2, 3]
    );
    // It appends; its entries record its schema, the point where the thread's schema changed.
    let mut e = store.thread::<edited::Notes>("n").await.unwrap();
    e.merge(
        edited::NotesUpdate::default()
            .log(vec![9])
            .title(Some("t".into())),
        StepMeta::default(),
    )
    .await
    .unwrap();
    let history = store.history("n", HistoryQuery::oldest(100)).await.unwrap();
    let schemas: Vec<u64> = history.iter().map(|e| e.fingerprint).collect();
    assert_eq!(schemas[..8], [fingerprint::<first::Notes>(); 8]);
    assert_eq!(schemas[8], fingerprint::<edited::Notes>());
    // A snapshot by the new type, then loads from it; the old type still reads the thread (the
    // new type's `title` is a field it does not have: dropped).
    assert_eq!(store.snapshot::<edited::Notes>("n").await.unwrap(), 9);
    let notes = store.load::<edited::Notes>("n").await.unwrap().state;
    assert_eq!((notes.log.len(), notes.title.as_deref()), (9, Some("t")));
    let old = store.load::<first::Notes>("n").await.unwrap().state;
    assert_eq!(old.log, (1..=9).collect::<Vec<_>>());
    // Writing the thread back in the new schema: every row is then read directly.
    assert_eq!(store.migrate_thread::<edited::Notes>("n").await.unwrap(), 9);
    assert_eq!(
        store.info("n").await.unwrap().fingerprint,
        fingerprint::<edited::Notes>()
    );
    assert_eq!(
        store
            .load_at::<edited::Notes>("n", 2)
            .await
            .unwrap()
            .state
            .log,
        [1, 2]
    );
}

async fn incompatible_edits_name_the_field<B: Open>(db: Db) {
    let store = B::open(&db).await.unwrap();
    let mut t = store.create("i", first::Notes::default()).await.unwrap();
    for i in 1..=3 {
        t.merge(note(i), StepMeta::default()).await.unwrap();
    }
    // A field's type changed: the initial state (`last: null`) still reads, entry 1 does not.
    let err = store.load::<retyped::Notes>("i").await.unwrap_err();
    assert_eq!(err.category(), "state_schema_mismatch", "{err}");
    let text = err.to_string();
    for needle in [
        "`i`",
        "retyped::Notes",
        "entry 1",
        "`last`",
        "string",
        "version = 1",
    ] {
        assert!(text.contains(needle), "{needle}: {text}");
    }
    // A snapshot holds `last: 3`: the stored value is named.
    store.snapshot::<first::Notes>("i").await.unwrap();
    let err = store.load::<retyped::Notes>("i").await.unwrap_err();
    let text = err.to_string();
    for needle in ["snapshot at version 3", "field `last` holds a number (3)"] {
        assert!(text.contains(needle), "{needle}: {text}");
    }
    // A required field added: named, with the schema changes.
    let err = store.load::<required::Notes>("i").await.unwrap_err();
    assert_eq!(err.category(), "state_schema_mismatch", "{err}");
    let text = err.to_string();
    for needle in [
        "field `owner` is required",
        "added owner",
        "removed scratch",
    ] {
        assert!(text.contains(needle), "{needle}: {text}");
    }
    // Another type altogether (no field in common) is not an edit.
    let err = store.load::<Other>("i").await.unwrap_err();
    assert_eq!(err.category(), "state_schema_mismatch", "{err}");
    assert!(err.to_string().contains("shares no field"), "{err}");
    // Nothing was written by any of these loads.
    assert_eq!(
        store.load::<first::Notes>("i").await.unwrap().state.log,
        [1, 2, 3]
    );
}

/// OpenArmature's state-migration fixtures (`pipeline-utilities/039`-`047`), one type per
/// schema version, seeded by writing a thread with the old version's type.
mod fx {
    use super::*;

    #[derive(AgentState, Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
    #[agent_state(version = 1)]
    pub struct V1 {
        pub x: i64,
        pub completed: bool,
    }

    #[derive(AgentState, Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
    #[agent_state(version = 2)]
    pub struct V2 {
        pub x: i64,
        pub new_field: String,
        pub completed: bool,
    }

    #[derive(AgentState, Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
    #[agent_state(version = 3)]
    pub struct V3 {
        pub x: i64,
        pub v2_field: String,
        pub v3_field: String,
        pub completed: bool,
    }

    #[derive(AgentState, Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
    #[agent_state(version = 4)]
    pub struct V4 {
        pub x: i64,
    }

    /// 044's version 2: a required field the buggy migration does not add.
    pub mod strict {
        use super::*;

        #[derive(AgentState, Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
        #[agent_state(version = 2)]
        pub struct V2 {
            pub x: i64,
            pub required_v2_field: String,
        }
    }
}

/// A migration step that adds `key: value` to states and counts its runs (named `from->to`).
fn adds(
    from: u32,
    to: u32,
    key: &'static str,
    value: &'static str,
    runs: &std::sync::Arc<std::sync::Mutex<Vec<String>>>,
) -> Migration {
    let runs = runs.clone();
    Migration::new(
        from,
        to,
        move |mut v| {
            runs.lock().unwrap().push(format!("{from}->{to}"));
            v.as_object_mut()
                .ok_or("not an object")?
                .insert(key.into(), json!(value));
            Ok(v)
        },
        Ok,
    )
}

/// A step that must not run.
fn never(from: u32, to: u32) -> Migration {
    Migration::new(
        from,
        to,
        move |_| panic!("migration {from}->{to} ran"),
        move |_| panic!("migration {from}->{to} ran"),
    )
}

async fn openarmature_migration_fixtures<B: Open>(db: Db) {
    let plain = B::open(&db).await.unwrap();
    let runs = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let taken = || std::mem::take(&mut *runs.lock().unwrap());
    let seed = |id: &'static str, x: i64| {
        let plain = plain.clone();
        async move {
            plain
                .create(
                    id,
                    fx::V1 {
                        x,
                        completed: false,
                    },
                )
                .await
                .unwrap();
        }
    };

    // 039 additive field: v1 -> v2 runs once; the resumed run sees the default, then merges.
    seed("039", 7).await;
    let store = plain
        .clone()
        .with_migration(adds(1, 2, "new_field", "v2_default", &runs));
    let mut t = store.thread::<fx::V2>("039").await.unwrap();
    t.merge(fx::V2Update::default().completed(true), StepMeta::default())
        .await
        .unwrap();
    assert_eq!(
        t.state(),
        &fx::V2 {
            x: 7,
            new_field: "v2_default".into(),
            completed: true
        }
    );
    assert_eq!(taken(), ["1->2"]);

    // 040 chain: v1 -> v2 -> v3, in order, each once.
    seed("040", 5).await;
    let store = plain
        .clone()
        .with_migration(adds(2, 3, "v3_field", "v3_default", &runs))
        .with_migration(adds(1, 2, "v2_field", "v2_default", &runs));
    let v3 = store.load::<fx::V3>("040").await.unwrap().state;
    assert_eq!(
        (v3.x, v3.v2_field.as_str(), v3.v3_field.as_str()),
        (5, "v2_default", "v3_default")
    );
    assert_eq!(taken(), ["1->2", "2->3"]);

    // 041 missing, empty registry: names both versions and the empty registry.
    seed("041", 7).await;
    let err = plain.load::<fx::V2>("041").await.unwrap_err();
    assert_eq!(err.category(), "state_migration_missing", "{err}");
    match &err {
        StoreError::MigrationMissing {
            from,
            to,
            registered,
            ..
        } => assert_eq!((*from, *to, *registered), (1, 2, 0)),
        other => panic!("not a missing migration: {other}"),
    }

    // 042 versions match: the registry is not consulted (the registered step would panic).
    let store = plain.clone().with_migration(never(1, 2));
    plain
        .create(
            "042",
            fx::V2 {
                x: 11,
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(store.load::<fx::V2>("042").await.unwrap().state.x, 11);

    // 043 parent states: a fork's rows and its parent's are migrated alike (the parent's
    // initial state once; each update, the parent's and the fork's, through the update step).
    seed("043", 5).await;
    let mut parent = plain.thread::<fx::V1>("043").await.unwrap();
    parent
        .merge(fx::V1Update::default().x(6), StepMeta::default())
        .await
        .unwrap();
    plain.fork("043", 1, "043-fork").await.unwrap();
    let mut fork = plain.thread::<fx::V1>("043-fork").await.unwrap();
    fork.merge(fx::V1Update::default().completed(true), StepMeta::default())
        .await
        .unwrap();
    let updates = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = updates.clone();
    let state_step = adds(1, 2, "new_field", "v2_default", &runs);
    let store = plain.clone().with_migration(Migration::new(
        1,
        2,
        move |v| state_step.upgrade_state(v),
        move |v| {
            counted.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            Ok(v)
        },
    ));
    let v2 = store.load::<fx::V2>("043-fork").await.unwrap().state;
    assert_eq!(
        v2,
        fx::V2 {
            x: 6,
            new_field: "v2_default".into(),
            completed: true
        }
    );
    assert_eq!(taken(), ["1->2"]);
    assert_eq!(updates.load(std::sync::atomic::Ordering::Relaxed), 2);

    // 044 post-migration deserialization fails: neither missing nor failed; names the field.
    seed("044", 9).await;
    let store = plain.clone().with_migration(Migration::unchanged(1, 2));
    let err = store.load::<fx::strict::V2>("044").await.unwrap_err();
    assert_eq!(err.category(), "state_schema_mismatch", "{err}");
    assert!(err.to_string().contains("required_v2_field"), "{err}");

    // 045 no path: the registered (unhelpful) step is listed.
    seed("045", 4).await;
    let store = plain.clone().with_migration(never(3, 4));
    let err = store.load::<fx::V2>("045").await.unwrap_err();
    assert_eq!(err.category(), "state_migration_missing", "{err}");
    assert!(err.to_string().contains("1 registered: 3->4"), "{err}");

    // 046 the function fails: the failing step is named, the steps after it do not run.
    seed("046", 0).await;
    let store = plain
        .clone()
        .with_migration(Migration::new(1, 2, |_| Err("KeyError: 'y'".into()), Ok))
        .with_migration(never(2, 3));
    let err = store.load::<fx::V3>("046").await.unwrap_err();
    assert_eq!(err.category(), "state_migration_failed", "{err}");
    match &err {
        StoreError::Migration {
            from, to, reason, ..
        } => {
            assert_eq!((*from, *to), (1, 2));
            assert!(reason.contains("KeyError"), "{reason}");
        }
        other => panic!("not a failed migration: {other}"),
    }

    // 047 ambiguous: a pair registered twice, and a diamond; no step runs.
    seed("047", 1).await;
    let store = plain
        .clone()
        .with_migration(never(1, 2))
        .with_migration(never(1, 2));
    let err = store.load::<fx::V2>("047").await.unwrap_err();
    assert_eq!(err.category(), "state_migration_chain_ambiguous", "{err}");
    assert!(
        matches!(
            err,
            StoreError::MigrationAmbiguous {
                from: Some(1),
                to: Some(2),
                ..
            }
        ),
        "{err}"
    );
    let mut diamond = plain.clone();
    for (from, to) in [(1, 2), (2, 4), (1, 3), (3, 4)] {
        diamond = diamond.with_migration(never(from, to));
    }
    let err = diamond.load::<fx::V4>("047").await.unwrap_err();
    assert_eq!(err.category(), "state_migration_chain_ambiguous", "{err}");
    assert!(
        matches!(
            err,
            StoreError::MigrationAmbiguous {
                from: Some(1),
                to: Some(4),
                ..
            }
        ),
        "{err}"
    );
}

// ---------------------------------------------------------------------------------------------
// Store defects.

/// Turns a version-6 SQLite file into the version-5 file it would have been: each thread's
/// initial state and lease back in its row (as columns added last, where version 5 had them
/// in the middle: the store reads them by name), without the version-0 snapshots and the
/// leases' rows and view.
const SQLITE_V6_TO_V5: &str = "
    ALTER TABLE agentstate_threads ADD COLUMN initial TEXT;
    ALTER TABLE agentstate_threads ADD COLUMN lease_owner TEXT;
    ALTER TABLE agentstate_threads ADD COLUMN lease_expires_ms INTEGER;
    UPDATE agentstate_threads SET
        initial = (SELECT body FROM agentstate_snapshots s WHERE s.key = agentstate_threads.tid << 32),
        lease_owner = (SELECT owner FROM agentstate_leases l WHERE l.tid = agentstate_threads.tid),
        lease_expires_ms = (SELECT expires_ms FROM agentstate_leases l WHERE l.tid = agentstate_threads.tid);
    DELETE FROM agentstate_snapshots WHERE key IN (SELECT tid << 32 FROM agentstate_threads WHERE parent IS NULL);
    DELETE FROM agentstate_snapshots WHERE key > 0 AND key < 4294967296;
    DROP VIEW agentstate_leases;";

/// A database of the previous store version (SQLite 3, PostgreSQL 1: no schema table, no
/// incarnations) opens, is migrated, and its threads load and take appends.
async fn a_previous_store_version_opens<B: Open>(db: Db) {
    let store = B::open(&db).await.unwrap();
    let mut t = store.create("p", Tally::default()).await.unwrap();
    merge_steps(&mut t, 1..=3).await;
    drop((t, store));
    match &db {
        Db::Sqlite(_) => {
            db.exec(SQLITE_V6_TO_V5).await;
            db.exec(
                "DROP TRIGGER agentstate_entry_deleted;
                 DELETE FROM {snapshots} WHERE key < 0;
                 ALTER TABLE {threads} DROP COLUMN incarnation;
                 ALTER TABLE {threads} DROP COLUMN lease_owner;
                 ALTER TABLE {threads} DROP COLUMN lease_expires_ms;",
            )
            .await;
            db.set_store_version(3).await;
        }
        Db::Postgres { .. } => {
            db.exec(
                "DROP TABLE {schemas}; ALTER TABLE {threads} DROP COLUMN incarnation,
                 DROP COLUMN lease_owner, DROP COLUMN lease_expires_ms;",
            )
            .await;
            db.set_store_version(1).await;
        }
    }
    let store = B::open(&db).await.unwrap();
    assert_eq!(store.info("p").await.unwrap().incarnation, 0);
    let mut t = store.thread::<Tally>("p").await.unwrap();
    assert_eq!(t.state().log, [1, 2, 3]);
    assert_eq!(t.merge(step(4), StepMeta::default()).await.unwrap(), 4);
    // Its rows' schema was not recorded: a compatible edit still loads.
    let notes = store.load::<TallyV0>("p").await.unwrap().state;
    assert_eq!(notes.log, [1, 2, 3, 4]);
    // Opening again finds the current version.
    drop(store);
    let store = B::open(&db).await.unwrap();
    assert_eq!(store.load::<Tally>("p").await.unwrap().version, 4);
}

/// A database of the store version before leases (SQLite 4, PostgreSQL 2) opens, is migrated,
/// and its threads take leases.
async fn a_store_without_leases_opens<B: Open>(db: Db) {
    let store = B::open(&db).await.unwrap();
    let mut t = store.create("p", Tally::default()).await.unwrap();
    merge_steps(&mut t, 1..=2).await;
    drop((t, store));
    match &db {
        Db::Sqlite(_) => {
            db.exec(SQLITE_V6_TO_V5).await;
            db.exec(
                "ALTER TABLE {threads} DROP COLUMN lease_owner;
                 ALTER TABLE {threads} DROP COLUMN lease_expires_ms;",
            )
            .await;
            db.set_store_version(4).await;
        }
        Db::Postgres { .. } => {
            db.exec("ALTER TABLE {threads} DROP COLUMN lease_owner, DROP COLUMN lease_expires_ms;")
                .await;
            db.set_store_version(2).await;
        }
    }
    let store = B::open(&db).await.unwrap();
    assert_eq!(store.lease_info("p").await.unwrap(), None);
    let lease = store
        .lease("p", "worker", Duration::from_secs(30))
        .await
        .unwrap();
    let mut t = store.thread::<Tally>("p").await.unwrap();
    assert_eq!(t.merge(step(3), StepMeta::default()).await.unwrap(), 3);
    // Opening again finds the current version, and the lease.
    drop(store);
    let store = B::open(&db).await.unwrap();
    assert_eq!(store.load::<Tally>("p").await.unwrap().version, 3);
    let err = store
        .lease("p", "other", Duration::from_secs(30))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, StoreError::Leased { owner, .. } if owner == "worker"),
        "{err}"
    );
    lease.release().await.unwrap();
}

async fn a_recreated_thread_refuses_stale_handles<B: Open>(db: Db) {
    let store = B::open(&db).await.unwrap();
    let mut old = store.create("r", Tally::default()).await.unwrap();
    old.merge(step(1), StepMeta::default()).await.unwrap();
    let first = store.info("r").await.unwrap().incarnation;
    assert!(store.delete("r").await.unwrap());
    let mut new = store.create("r", Tally::default()).await.unwrap();
    new.merge(step(100), StepMeta::default()).await.unwrap();
    assert_ne!(store.info("r").await.unwrap().incarnation, first);
    // Same id, same version: the old handle is refused, and nothing is written.
    let err = old.merge(step(2), StepMeta::default()).await.unwrap_err();
    assert_eq!(err.category(), "state_write_conflict", "{err}");
    assert!(matches!(err, StoreError::Recreated { .. }), "{err}");
    assert!(
        err.to_string().contains("deleted and created again"),
        "{err}"
    );
    assert_eq!(
        store.load::<Tally>("r").await.unwrap(),
        Versioned {
            state: new.state().clone(),
            version: 1
        }
    );
    // Reloading reads the new thread afresh (not the old state with the new entries).
    old.reload().await.unwrap();
    assert_eq!(old.state().log, [100]);
    assert_eq!(old.merge(step(2), StepMeta::default()).await.unwrap(), 2);

    // Created again at a lower version than a stale handle's, or a higher one: `Recreated` on
    // every backend, never a conflict of versions.
    let mut stale = store.thread::<Tally>("r").await.unwrap();
    merge_steps(&mut stale, 3..=5).await;
    let mut higher = store.thread::<Tally>("r").await.unwrap();
    assert!(store.delete("r").await.unwrap());
    let mut new = store.create("r", Tally::default()).await.unwrap();
    new.merge(step(200), StepMeta::default()).await.unwrap();
    let err = stale.merge(step(6), StepMeta::default()).await.unwrap_err();
    assert!(matches!(err, StoreError::Recreated { .. }), "lower: {err}");
    merge_steps(&mut new, 201..=210).await;
    let err = higher
        .merge(step(6), StepMeta::default())
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::Recreated { .. }), "higher: {err}");
    assert_eq!(store.info("r").await.unwrap().version, 11);
}

async fn thread_ids_are_checked_and_all_listed<B: Open>(db: Db) {
    let store = B::open(&db).await.unwrap();
    for bad in ["", "a\0b", "line\nbreak"] {
        let err = store.create(bad, Tally::default()).await.unwrap_err();
        assert_eq!(err.category(), "thread_id_invalid", "{bad:?}: {err}");
        assert!(store.list(ThreadQuery::first(10)).await.unwrap().is_empty());
    }
    // Looking up an id with a NUL: the same named error on both backends.
    let err = store.load::<Tally>("a\0b").await.unwrap_err();
    assert_eq!(err.category(), "thread_id_invalid", "{err}");
    let err = store.info("a\0b").await.unwrap_err();
    assert_eq!(err.category(), "thread_id_invalid", "{err}");
    let long = "x".repeat(agentstate_store::MAX_ID_BYTES + 1);
    let err = store.create(&long, Tally::default()).await.unwrap_err();
    assert!(err.to_string().contains("1025 bytes"), "{err}");
    store.create("a", Tally::default()).await.unwrap();
    let err = store.fork("a", 0, "").await.unwrap_err();
    assert_eq!(err.category(), "thread_id_invalid", "{err}");
    // A thread whose id an older build let in (empty) is listed too.
    match &db {
        Db::Sqlite(_) => {
            db.exec(
                "INSERT INTO {threads} (id, fingerprint, head, oldest, metadata, created_ms)
                 SELECT '', fingerprint, 0, 0, '{}', created_ms FROM {threads} WHERE id = 'a'",
            )
            .await
        }
        Db::Postgres { .. } => {
            db.exec(
                "INSERT INTO {threads} (id, fingerprint, head, oldest, initial, metadata, created_ms)
                 SELECT '', fingerprint, 0, 0, initial, '{}', created_ms FROM {threads} WHERE id = 'a'",
            )
            .await
        }
    }
    let ids: Vec<String> = store
        .list(ThreadQuery::first(10))
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.id)
        .collect();
    assert_eq!(ids, ["", "a"]);
}

async fn more_bad_data_is_a_named_error<B: Open>(db: Db) {
    let store = B::open(&db).await.unwrap();
    for id in ["y1", "y2", "y3", "y4", "y5", "c1", "c2"] {
        let mut t = store.create(id, Tally::default()).await.unwrap();
        merge_steps(&mut t, 1..=3).await;
    }
    drop(store);
    let sqlite = matches!(db, Db::Sqlite(_));
    // y1: the last entry deleted by hand; y2: an entry inserted past the head.
    db.exec("DELETE FROM {entries} WHERE {thread:y1} AND seq = 3;")
        .await;
    if sqlite {
        db.exec(
            "INSERT INTO agentstate_entries (key, kind, time_ms, body)
               SELECT (tid << 32) + 5, 0, 0, '{\"log\": [5]}' FROM agentstate_threads WHERE id = 'y2';
             UPDATE agentstate_entries SET body = CAST(X'7B226C6F67223A205B315DFF7D' AS TEXT)
               WHERE tid = (SELECT tid FROM agentstate_threads WHERE id = 'y3') AND seq = 2;
             UPDATE agentstate_entries SET time_ms = 'noon'
               WHERE tid = (SELECT tid FROM agentstate_threads WHERE id = 'y4') AND seq = 2;
             UPDATE agentstate_threads SET parent = (SELECT tid FROM agentstate_threads WHERE id = 'c2'), fork_seq = 1 WHERE id = 'c1';
             UPDATE agentstate_threads SET parent = (SELECT tid FROM agentstate_threads WHERE id = 'c1'), fork_seq = 1 WHERE id = 'c2';
             DELETE FROM agentstate_snapshots WHERE key IN (SELECT tid << 32 FROM agentstate_threads WHERE id IN ('c1', 'c2'));
             DELETE FROM agentstate_entries WHERE tid IN (SELECT tid FROM agentstate_threads WHERE id IN ('c1', 'c2')) AND seq = 1;",
        )
        .await;
    } else {
        db.exec(
            "INSERT INTO {entries} (thread, seq, kind, time_ms, body) VALUES ('y2', 5, 0, 0, '{\"log\": [5]}');
             UPDATE {threads} SET parent = 'c2', fork_seq = 1, initial = NULL WHERE id = 'c1';
             UPDATE {threads} SET parent = 'c1', fork_seq = 1, initial = NULL WHERE id = 'c2';
             DELETE FROM {entries} WHERE thread IN ('c1', 'c2') AND seq = 1;",
        )
        .await;
    }
    let store = B::open(&db).await.unwrap();
    let corrupt = |err: StoreError| match err {
        StoreError::Corrupt { what, reason, .. } => format!("{what}: {reason}"),
        err => panic!("not corrupt data: {err}"),
    };
    // A missing last entry is an error, never a shorter thread.
    let text = corrupt(store.load::<Tally>("y1").await.unwrap_err());
    assert!(text.contains("3 are missing"), "{text}");
    assert_eq!(
        store.load_at::<Tally>("y1", 2).await.unwrap().state.log,
        [1, 2]
    );
    // An entry past the head is reported by loads and by the history, on both backends.
    let text = corrupt(store.load::<Tally>("y2").await.unwrap_err());
    assert!(text.contains("entry 5"), "{text}");
    let text = corrupt(
        store
            .history("y2", HistoryQuery::oldest(10))
            .await
            .unwrap_err(),
    );
    assert!(
        text.contains("entry 4") || text.contains("entry 5"),
        "{text}"
    );
    // A cycle of forks is named as such.
    for id in ["c1", "c2"] {
        let text = corrupt(store.load::<Tally>(id).await.unwrap_err());
        assert!(text.contains("cycle of forks"), "{id}: {text}");
        let text = corrupt(
            store
                .history(id, HistoryQuery::oldest(10))
                .await
                .unwrap_err(),
        );
        assert!(text.contains("cycle of forks"), "{id}: {text}");
    }
    if sqlite {
        // Invalid UTF-8 and a text time: named entries, corrupt data.
        let text = corrupt(store.load::<Tally>("y3").await.unwrap_err());
        assert!(text.starts_with("entry 2: "), "{text}");
        let text = corrupt(
            store
                .history("y4", HistoryQuery::oldest(10))
                .await
                .unwrap_err(),
        );
        assert!(text.starts_with("entry 2: "), "{text}");
    }
}

/// Appends `n` steps (values `first..first + n`) to `thread`, each at the version it holds,
/// reloading after each conflict; returns the (version, value) of each success and the number
/// of conflicts.
async fn append_racing<B: Backend>(
    mut thread: agentstate_store::Thread<Tally, B>,
    first: u64,
    n: u64,
) -> (Vec<(u64, u64)>, u64) {
    let (mut won, mut lost) = (Vec::new(), 0u64);
    while (won.len() as u64) < n {
        let value = first + won.len() as u64;
        match thread.merge(step(value), StepMeta::default()).await {
            Ok(seq) => won.push((seq, value)),
            Err(StoreError::Conflict { .. }) => {
                lost += 1;
                thread.reload().await.unwrap();
            }
            Err(other) => panic!("unexpected error: {other}"),
        }
    }
    (won, lost)
}

/// A store whose handles snapshot often, so that loads in the races stay short.
async fn race_store<B: Open>(db: &Db) -> Store<B> {
    B::open_for_race(db)
        .await
        .unwrap()
        .with_snapshot_policy(SnapshotPolicy::every(16))
}

/// 8 tasks race on one thread, 8,000 successful appends in all.
async fn racing_tasks<B: Open>(db: Db) {
    const TASKS: u64 = 8;
    const EACH: u64 = 1_000;
    let store = race_store::<B>(&db).await;
    store.create("race", Tally::default()).await.unwrap();
    let mut tasks = Vec::new();
    for task in 0..TASKS {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            let thread = store.thread::<Tally>("race").await.unwrap();
            append_racing(thread, task * 1_000_000, EACH).await
        }));
    }
    let mut won = Vec::new();
    let mut lost = 0;
    for task in tasks {
        let (w, l) = task.await.unwrap();
        won.extend(w);
        lost += l;
    }
    check_race(&store, "race", won, TASKS * EACH).await;
    println!(
        "    racing tasks: {} appends, {lost} conflicts",
        TASKS * EACH
    );
}

/// Every success has a distinct version, 1..=n, and the stored state is the replay of exactly
/// the winners' updates in version order.
async fn check_race<B: Backend>(store: &Store<B>, id: &str, mut won: Vec<(u64, u64)>, n: u64) {
    won.sort();
    let seqs: BTreeSet<u64> = won.iter().map(|(s, _)| *s).collect();
    assert_eq!(seqs.len() as u64, n, "a version was given twice");
    assert_eq!(seqs, (1..=n).collect::<BTreeSet<_>>());
    let Versioned { state, version } = store.load::<Tally>(id).await.unwrap();
    assert_eq!(version, n);
    let replay =
        agentstate::Journal::replay(Tally::default(), won.iter().map(|(_, v)| step(*v))).unwrap();
    assert_eq!(
        state, replay,
        "the stored state is not the replay of the committed appends"
    );
}

/// Two processes race on one thread, 2,000 successful appends in all.
async fn racing_processes<B: Open>(db: Db) {
    const EACH: u64 = 1_000;
    let store = race_store::<B>(&db).await;
    store.create("procs", Tally::default()).await.unwrap();
    // Both start appending at the same moment, once both have started.
    let start = agentstate_now_ms() + 500;
    let children: Vec<_> = (0..2)
        .map(|p| {
            Command::new(std::env::current_exe().unwrap())
                .env(
                    "AGENTSTATE_STORE_CHILD",
                    format!("race|{p}|{EACH}|{}", db.describe()),
                )
                .env("AGENTSTATE_STORE_START", start.to_string())
                .stdout(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let mut won = Vec::new();
    let mut lost = 0;
    for child in children {
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "a child failed");
        for line in String::from_utf8(out.stdout).unwrap().lines() {
            let mut parts = line.split_whitespace();
            match parts.next() {
                Some("won") => won.push((
                    parts.next().unwrap().parse().unwrap(),
                    parts.next().unwrap().parse().unwrap(),
                )),
                Some("lost") => lost += parts.next().unwrap().parse::<u64>().unwrap(),
                _ => {}
            }
        }
    }
    check_race(&store, "procs", won, 2 * EACH).await;
    assert!(
        lost > 0 || cfg!(not(unix)),
        "two processes never conflicted"
    );
    println!(
        "    racing processes: {} appends, {lost} conflicts",
        2 * EACH
    );
}

async fn child_race<B: Open>(db: Db, process: u64, each: u64) {
    let store = race_store::<B>(&db).await;
    let start: u128 = std::env::var("AGENTSTATE_STORE_START")
        .unwrap()
        .parse()
        .unwrap();
    let wait = start.saturating_sub(agentstate_now_ms());
    tokio::time::sleep(Duration::from_millis(wait as u64)).await;
    let thread = store.thread::<Tally>("procs").await.unwrap();
    let (won, lost) = append_racing(thread, 10_000_000 * (process + 1), each).await;
    let mut out = String::new();
    for (seq, value) in won {
        out.push_str(&format!("won {seq} {value}\n"));
    }
    println!("{out}lost {lost}");
}

/// A child appends in a loop until it is killed with SIGKILL; the thread then loads at its
/// last committed version, and takes appends again.
async fn crash<B: Open>(db: Db) {
    let store = B::open(&db).await.unwrap();
    store.create("crash", Tally::default()).await.unwrap();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .env(
            "AGENTSTATE_STORE_CHILD",
            format!("crash|0|0|{}", db.describe()),
        )
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let started = Instant::now();
    while store.info("crash").await.unwrap().version < 200 {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the child appends too slowly"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    drop(store);
    let store = B::open(&db).await.unwrap();
    let Versioned { state, version } = store.load::<Tally>("crash").await.unwrap();
    assert!(version >= 200);
    assert_eq!(state.log, (1..=version).collect::<Vec<_>>());
    let mut thread = store.thread::<Tally>("crash").await.unwrap();
    thread
        .merge(step(version + 1), StepMeta::default())
        .await
        .unwrap();
    println!("    crash: killed at version {version}, reopened and appended");
}

async fn child_crash<B: Open>(db: Db) {
    let store = B::open(&db)
        .await
        .unwrap()
        .with_snapshot_policy(SnapshotPolicy::every(50));
    let mut thread = store.thread::<Tally>("crash").await.unwrap();
    loop {
        let next = thread.version() + 1;
        thread.merge(step(next), StepMeta::default()).await.unwrap();
    }
}

/// The chat state of the README: messages through `add_messages`.
async fn a_chat_round_trips<B: Open>(db: Db) {
    use agentstate::message::{Message, Role};
    let store = B::open(&db).await.unwrap();
    let mut chat = store
        .thread_or_create("chat", AgentState::default)
        .await
        .unwrap();
    for turn in 0..5 {
        let q = Message::text_message(format!("question {turn}"), Role::User);
        let a = Message::text_message(format!("answer {turn}"), Role::Assistant);
        chat.merge(
            AgentStateUpdate::default().context(vec![q, a]),
            StepMeta::node("chat"),
        )
        .await
        .unwrap();
    }
    let again = store
        .thread_or_create("chat", AgentState::default)
        .await
        .unwrap();
    assert_eq!(again.state(), chat.state());
    assert_eq!(again.state().context.len(), 10);
    assert_eq!(again.state().context[9].text(), "answer 4");
}

/// Newest-first pages, `before` and `after` bounds, through two fork points: every way of
/// paging lists the same entries as one oldest-first page of all.
async fn history_pages_both_ways<B: Open>(db: Db) {
    let store = B::open(&db).await.unwrap();
    let mut main = store.create("main", Tally::default()).await.unwrap();
    for i in 1..=10 {
        main.merge(step(i), StepMeta::node(format!("main{i}")))
            .await
            .unwrap();
    }
    store.fork("main", 4, "alt").await.unwrap();
    let mut alt = store.thread::<Tally>("alt").await.unwrap();
    for i in 5..=7 {
        alt.merge(step(100 + i), StepMeta::node(format!("alt{i}")))
            .await
            .unwrap();
    }
    store.fork("alt", 6, "alt2").await.unwrap();
    let mut alt2 = store.thread::<Tally>("alt2").await.unwrap();
    for i in 7..=9 {
        alt2.merge(step(200 + i), StepMeta::node(format!("alt2_{i}")))
            .await
            .unwrap();
    }
    let nodes = |page: &[agentstate_store::EntryInfo]| {
        page.iter()
            .map(|e| e.node.clone().unwrap())
            .collect::<Vec<_>>()
    };
    let all = store
        .history("alt2", HistoryQuery::oldest(100))
        .await
        .unwrap();
    assert_eq!(
        nodes(&all),
        ["main1", "main2", "main3", "main4", "alt5", "alt6", "alt2_7", "alt2_8", "alt2_9"]
    );
    // Newest first, in pages of 2 (each page read before the next): the same, reversed.
    for size in [1, 2, 4, 9, 20] {
        let mut pages = Vec::new();
        let mut query = HistoryQuery::newest(size);
        loop {
            let page = store.history("alt2", query).await.unwrap();
            assert!(page.len() <= size as usize);
            let Some(last) = page.last() else { break };
            query = query.before(last.seq);
            pages.extend(page);
        }
        let mut reversed = all.clone();
        reversed.reverse();
        assert_eq!(pages, reversed, "pages of {size}");
    }
    // The newest page names where each entry lives.
    let newest = store
        .history("alt2", HistoryQuery::newest(4))
        .await
        .unwrap();
    assert_eq!(nodes(&newest), ["alt2_9", "alt2_8", "alt2_7", "alt6"]);
    assert_eq!(newest[3].inherited_from.as_deref(), Some("alt"));
    // Both bounds, both orders.
    let window = HistoryQuery::oldest(100).after(2).before(8);
    assert_eq!(
        nodes(&store.history("alt2", window).await.unwrap()),
        ["main3", "main4", "alt5", "alt6", "alt2_7"]
    );
    let window = HistoryQuery::newest(3).after(2).before(8);
    assert_eq!(
        nodes(&store.history("alt2", window).await.unwrap()),
        ["alt2_7", "alt6", "alt5"]
    );
    // An oldest-first page that ends before a fork point, and empty ranges.
    assert_eq!(
        nodes(
            &store
                .history("alt2", HistoryQuery::oldest(100).before(3))
                .await
                .unwrap()
        ),
        ["main1", "main2"]
    );
    for empty in [
        HistoryQuery::newest(10).before(1),
        HistoryQuery::oldest(10).after(9),
        HistoryQuery::newest(10).after(5).before(6),
        HistoryQuery::newest(0),
    ] {
        assert_eq!(store.history("alt2", empty).await.unwrap(), vec![]);
    }
    // The parent's own newest page is its own entries.
    assert_eq!(
        nodes(
            &store
                .history("main", HistoryQuery::newest(2))
                .await
                .unwrap()
        ),
        ["main10", "main9"]
    );
    let err = store
        .history("nope", HistoryQuery::newest(1))
        .await
        .unwrap_err();
    assert_eq!(err.category(), "thread_not_found", "{err}");
}

/// A node's output goes into `merge` as it is: messages, a tool result, several, or nothing
/// (an empty step), each one entry that replays to the same state.
async fn node_output_merges_in_one_call<B: Open>(db: Db) {
    use agentstate::message::{Message, Role};
    use agentstate::{NodeOutput, ToolResult};
    let store = B::open(&db).await.unwrap();
    let mut chat = store.create("chat", AgentState::default()).await.unwrap();
    let user = Message::text_message("2 + 2?", Role::User);
    assert_eq!(chat.merge(user, StepMeta::node("user")).await.unwrap(), 1);
    let out: Vec<NodeOutput<AgentStateUpdate>> = vec![
        ToolResult::new(
            Message::tool_result("call_1", "4"),
            // A tool result's update cannot wipe the context: only its message is added.
            AgentStateUpdate::default()
                .context(vec![])
                .context_summary(Some("arithmetic".into())),
        )
        .into(),
        Message::text_message("It is 4.", Role::Assistant).into(),
    ];
    assert_eq!(chat.merge(out, StepMeta::node("agent")).await.unwrap(), 2);
    assert_eq!(chat.merge((), StepMeta::node("idle")).await.unwrap(), 3);
    let state = chat.state();
    assert_eq!(state.context.len(), 3);
    // Parallel branches' outputs: one entry; a branch with nothing is left out.
    let branches: Vec<NodeOutput<AgentStateUpdate>> = vec![
        Message::text_message("left", Role::Assistant).into(),
        ().into(),
        AgentStateUpdate::default()
            .context_summary(Some("right".into()))
            .into(),
    ];
    let mut original = store.thread::<AgentState>("chat").await.unwrap();
    store.fork("chat", 3, "chat-par").await.unwrap();
    let mut par = store.thread::<AgentState>("chat-par").await.unwrap();
    assert_eq!(
        par.merge_parallel(branches, FanIn::Strict, StepMeta::node("fan"))
            .await
            .unwrap(),
        4
    );
    assert_eq!(par.state().context.len(), 4);
    assert_eq!(par.state().context_summary.as_deref(), Some("right"));
    assert_eq!(
        &store.load::<AgentState>("chat-par").await.unwrap().state,
        par.state()
    );
    original.reload().await.unwrap();
    assert_eq!(original.version(), 3); // the fork wrote only to itself
    assert_eq!(state.context[1].text(), "4");
    assert_eq!(state.context[2].text(), "It is 4.");
    assert_eq!(state.context_summary.as_deref(), Some("arithmetic"));
    // The same as applying the outputs to the state in memory, and as the replay.
    let loaded = store.load::<AgentState>("chat").await.unwrap();
    assert_eq!((&loaded.state, loaded.version), (chat.state(), 3));
    let history = store
        .history("chat", HistoryQuery::oldest(10))
        .await
        .unwrap();
    assert_eq!(history[2].node.as_deref(), Some("idle"));
    assert_eq!(
        store.load_at::<AgentState>("chat", 2).await.unwrap().state,
        loaded.state
    );
}

/// `merge_with` with an async step: it retries on conflicts, as its policy says, and after the
/// last try fails naming the thread and the tries, having written nothing; a step's own error
/// ends it at once; its future is `Send`.
async fn merge_with_async_steps_and_retries<B: Open>(db: Db) {
    use agentstate_store::ConflictRetry;
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::sync::Arc;
    let store = B::open(&db).await.unwrap();
    let mut t = store.create("t", Tally::default()).await.unwrap();
    t.merge(step(1), StepMeta::default()).await.unwrap();
    // A step that awaits, reading only what it took from the state.
    let seq = t
        .merge_with(StepMeta::node("async"), |s| {
            let n = s.log.len() as u64;
            async move {
                tokio::task::yield_now().await;
                Ok(step(n + 1))
            }
        })
        .await
        .unwrap();
    assert_eq!((seq, &t.state().log), (2, &vec![1, 2]));

    // Every try loses to another writer that appends while the step awaits.
    let other = Arc::new(tokio::sync::Mutex::new(
        store.thread::<Tally>("t").await.unwrap(),
    ));
    let tries = Arc::new(AtomicU32::new(0));
    t.set_conflict_retry(
        ConflictRetry::default()
            .max_attempts(3)
            .backoff(Duration::from_millis(1), Duration::from_millis(2)),
    );
    let step_fn = |s: &Tally| {
        let (other, tries, seen) = (Arc::clone(&other), Arc::clone(&tries), s.log.len());
        async move {
            tries.fetch_add(1, Ordering::SeqCst);
            let mut other = other.lock().await;
            other.reload().await?;
            other.merge(step(900), StepMeta::node("other")).await?;
            Ok(step(seen as u64))
        }
    };
    let call = t.merge_with(StepMeta::node("loser"), step_fn);
    fn assert_send<T: Send>(value: T) -> T {
        value
    }
    let err = assert_send(call).await.unwrap_err();
    assert_eq!(tries.load(Ordering::SeqCst), 3);
    assert_eq!(err.category(), "state_write_conflict", "{err}");
    assert!(err.is_conflict());
    match &err {
        StoreError::RetriesExhausted {
            thread, attempts, ..
        } => assert_eq!((thread.as_str(), *attempts), ("t", 3)),
        other => panic!("expected RetriesExhausted, got {other}"),
    }
    assert!(
        err.to_string()
            .starts_with("gave up writing to thread `t` after 3 tries"),
        "{err}"
    );
    let history = store.history("t", HistoryQuery::oldest(100)).await.unwrap();
    assert!(history.iter().all(|e| e.node.as_deref() != Some("loser")));
    assert_eq!(store.info("t").await.unwrap().version, 5);

    // A step's own error ends the call at once, without a retry.
    tries.store(0, Ordering::SeqCst);
    let err = t
        .merge_with(StepMeta::default(), |_| {
            let tries = Arc::clone(&tries);
            async move {
                tries.fetch_add(1, Ordering::SeqCst);
                Err::<TallyUpdate, _>(StoreError::ThreadNotFound {
                    thread: "model".into(),
                })
            }
        })
        .await
        .unwrap_err();
    assert_eq!(
        (err.category(), tries.load(Ordering::SeqCst)),
        ("thread_not_found", 1)
    );

    // A handle's policy survives a reload that reads the thread afresh.
    store.compact::<Tally>("t").await.unwrap();
    t.reload().await.unwrap();
    assert_eq!(t.conflict_retry().attempts(), 3);
    assert_eq!(
        store.thread::<Tally>("t").await.unwrap().conflict_retry(),
        store.conflict_retry()
    );
}

/// Dropping a `merge_with` future part way (cancellation) writes nothing half: the thread and
/// the handle, once reloaded, agree, and the next merge goes in.
async fn a_dropped_merge_writes_nothing_half<B: Open>(db: Db) {
    let store = B::open(&db).await.unwrap();
    let mut t = store.create("t", Tally::default()).await.unwrap();
    for polls in [0, 1, 2, 5, 50] {
        {
            let call = t.merge_with(StepMeta::default(), |s| {
                let n = s.log.len() as u64;
                async move {
                    tokio::task::yield_now().await;
                    Ok(step(n + 1))
                }
            });
            let mut call = std::pin::pin!(call);
            for _ in 0..polls {
                if futures_poll_once(call.as_mut()).await.is_ready() {
                    break;
                }
            }
        }
        t.reload().await.unwrap();
        let loaded = store.load::<Tally>("t").await.unwrap();
        assert_eq!((&loaded.state, loaded.version), (t.state(), t.version()));
        assert_eq!(
            loaded.state.log,
            (1..=loaded.version).collect::<Vec<_>>(),
            "a step was written twice or half"
        );
    }
    let v = t.version();
    assert_eq!(
        t.merge(step(v + 1), StepMeta::default()).await.unwrap(),
        v + 1
    );
}

/// Polls `future` once.
async fn futures_poll_once<F: Future + Unpin>(mut future: F) -> std::task::Poll<F::Output> {
    std::future::poll_fn(|cx| std::task::Poll::Ready(std::pin::Pin::new(&mut future).poll(cx)))
        .await
}

/// 16 writers race on one thread with `merge_with` and the default retry policy: every call
/// succeeds, in few tries (without the backoff, a call needed up to 64), and no update is lost.
async fn sixteen_writers_with_the_default_policy<B: Open>(db: Db) {
    const WRITERS: u64 = 16;
    const EACH: u64 = 10;
    let store = race_store::<B>(&db).await;
    store.create("race16", Tally::default()).await.unwrap();
    let mut tasks = Vec::new();
    for writer in 0..WRITERS {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            let mut thread = store.thread::<Tally>("race16").await.unwrap();
            let mut tries = Vec::new();
            for i in 0..EACH {
                let mut n = 0;
                thread
                    .merge_with_sync(StepMeta::default(), |_| {
                        n += 1;
                        Ok(step(writer * 1_000 + i))
                    })
                    .await
                    .unwrap_or_else(|e| panic!("writer {writer} step {i}: {e}"));
                tries.push(n);
            }
            tries
        }));
    }
    let mut tries = Vec::new();
    for task in tasks {
        tries.extend(task.await.unwrap());
    }
    let loaded = store.load::<Tally>("race16").await.unwrap();
    assert_eq!(loaded.version, WRITERS * EACH);
    let mut values = loaded.state.log.clone();
    values.sort();
    let mut expected: Vec<u64> = (0..WRITERS)
        .flat_map(|w| (0..EACH).map(move |i| w * 1_000 + i))
        .collect();
    expected.sort();
    assert_eq!(values, expected, "an update was lost or written twice");
    let most = *tries.iter().max().unwrap();
    let mean = tries.iter().sum::<u32>() as f64 / tries.len() as f64;
    assert!(most <= store.conflict_retry().attempts());
    // About 2 on PostgreSQL, 1.3 on SQLite (5.7 and 2.5 without the pauses).
    assert!(mean < 4.0, "{mean} tries on average");
    println!(
        "    16 writers: {} calls, {mean:.1} tries on average, {most} at most",
        tries.len()
    );
}

// ---------------------------------------------------------------------------------------------
// Run leases.

const LONG: Duration = Duration::from_secs(30);

fn leased_by(err: &StoreError) -> &str {
    match err {
        StoreError::Leased { owner, .. } => owner,
        other => panic!("expected a thread_leased error, got: {other}"),
    }
}

async fn leases_admit_one_worker<B: Open>(db: Db) {
    let store = B::open(&db).await.unwrap();
    let mut t = store.create("l", Tally::default()).await.unwrap();
    assert_eq!(store.lease_info("l").await.unwrap(), None);

    let mut a = store.lease("l", "worker-a", LONG).await.unwrap();
    assert_eq!((a.thread(), a.owner(), a.ttl()), ("l", "worker-a", LONG));
    assert!(a.remaining() <= LONG && a.remaining() > LONG - Duration::from_secs(5));
    let info = store.lease_info("l").await.unwrap().unwrap();
    assert_eq!(info.owner, "worker-a");
    assert!(
        info.expires_in_ms > 25_000 && info.expires_in_ms <= 30_000,
        "{info:?}"
    );

    // A second owner is refused, with the holder and the time left named.
    let err = store.lease("l", "worker-b", LONG).await.unwrap_err();
    assert_eq!(err.category(), "thread_leased", "{err}");
    let StoreError::Leased {
        thread,
        owner,
        expires_in_ms,
    } = &err
    else {
        panic!("{err}")
    };
    assert_eq!((thread.as_str(), owner.as_str()), ("l", "worker-a"));
    assert!(*expires_in_ms > 25_000 && *expires_in_ms <= 30_000, "{err}");
    let text = err.to_string();
    assert!(
        text.starts_with("thread `l` is being run by worker `worker-a` (its lease expires in ")
            && text.contains(" s)"),
        "{text}"
    );

    // The same owner acquires again: the lease is extended.
    let again = store
        .lease("l", "worker-a", Duration::from_secs(90))
        .await
        .unwrap();
    let info = store.lease_info("l").await.unwrap().unwrap();
    assert!(info.expires_in_ms > 60_000, "{info:?}");
    a.renew().await.unwrap();
    let info = store.lease_info("l").await.unwrap().unwrap();
    assert!(
        info.expires_in_ms <= 30_000,
        "renewed to its own ttl: {info:?}"
    );

    // The lease does not stop writes (the runner checks it), and the thread reads as before.
    assert_eq!(t.merge(step(1), StepMeta::default()).await.unwrap(), 1);
    assert_eq!(store.info("l").await.unwrap().version, 1);

    // Another owner's release is refused, naming the holder, and changes nothing; the
    // owner's lets the next worker in.
    let err = store
        .backend()
        .lease(
            "l",
            "worker-b",
            0,
            agentstate_store::backend::LeaseOp::Release,
        )
        .await
        .unwrap_err();
    assert!(
        matches!(&err, StoreError::LeaseLost { owner, now_held_by: Some(by), .. }
            if owner == "worker-b" && by == "worker-a"),
        "{err}"
    );
    assert_eq!(
        store.lease_info("l").await.unwrap().unwrap().owner,
        "worker-a"
    );
    again.release().await.unwrap();
    assert_eq!(store.lease_info("l").await.unwrap(), None);
    let b = store.lease("l", "worker-b", LONG).await.unwrap();

    // The old holder's renewal fails, naming the new one; so does its release, which changes
    // nothing.
    let err = a.renew().await.unwrap_err();
    assert_eq!(err.category(), "lease_lost", "{err}");
    assert!(
        matches!(&err, StoreError::LeaseLost { thread, owner, now_held_by: Some(by) }
            if thread == "l" && owner == "worker-a" && by == "worker-b"),
        "{err}"
    );
    assert_eq!(
        err.to_string(),
        "worker `worker-a` no longer holds the lease on thread `l`: worker `worker-b` holds it now; nothing was written, stop running the thread"
    );
    let err = a.clone().release().await.unwrap_err();
    assert!(
        matches!(&err, StoreError::LeaseLost { owner, now_held_by: Some(by), .. }
            if owner == "worker-a" && by == "worker-b"),
        "{err}"
    );
    assert_eq!(
        store.lease_info("l").await.unwrap().unwrap().owner,
        "worker-b"
    );
    let mut b_heartbeat = b.clone();
    let b_again = b.clone();
    b.release().await.unwrap();
    let err = b_heartbeat.renew().await.unwrap_err();
    assert!(
        matches!(
            &err,
            StoreError::LeaseLost {
                now_held_by: None,
                ..
            }
        ),
        "{err}"
    );
    // Released twice: the second release finds no lease of its owner.
    let err = b_again.release().await.unwrap_err();
    assert_eq!(err.category(), "lease_lost", "{err}");
    assert!(err.to_string().contains("no worker holds it now"), "{err}");

    // A missing thread, a bad owner.
    let err = store.lease("nope", "w", LONG).await.unwrap_err();
    assert_eq!(err.category(), "thread_not_found", "{err}");
    assert!(err.to_string().contains("`nope`"), "{err}");
    let err = store.lease_info("nope").await.unwrap_err();
    assert_eq!(err.category(), "thread_not_found", "{err}");
    for bad in ["", "a\nb", "nul\0"] {
        let err = store.lease("l", bad, LONG).await.unwrap_err();
        assert_eq!(err.category(), "lease_owner_invalid", "{bad:?}: {err}");
    }
    assert_eq!(store.lease_info("l").await.unwrap(), None);

    // A thread deleted while leased takes its lease with it.
    let mut c = store.lease("l", "worker-c", LONG).await.unwrap();
    assert!(store.delete("l").await.unwrap());
    assert_eq!(
        store.lease_info("l").await.unwrap_err().category(),
        "thread_not_found"
    );
    assert_eq!(c.renew().await.unwrap_err().category(), "thread_not_found");
    store.create("l", Tally::default()).await.unwrap();
    assert_eq!(store.lease_info("l").await.unwrap(), None);
    let _d = store.lease("l", "worker-d", LONG).await.unwrap();
    let err = c.renew().await.unwrap_err();
    assert!(
        matches!(&err, StoreError::LeaseLost { now_held_by: Some(by), .. } if by == "worker-d"),
        "{err}"
    );

    // Another store over the same database (a reopened process) sees the lease.
    let other = B::open(&db).await.unwrap();
    let err = other.lease("l", "worker-e", LONG).await.unwrap_err();
    assert_eq!(leased_by(&err), "worker-d");
}

async fn an_expired_lease_is_taken_over<B: Open>(db: Db) {
    let store = B::open(&db).await.unwrap();
    store.create("x", Tally::default()).await.unwrap();
    let short = Duration::from_millis(50);
    let mut a = store.lease("x", "a", short).await.unwrap();
    assert!(a.remaining() <= short);
    let err = store.lease("x", "b", LONG).await.unwrap_err();
    assert_eq!(leased_by(&err), "a");
    assert!(err.to_string().contains(" ms)"), "{err}");
    // `a` dies (no renewal): after its ttl the lease is free and `b` takes the thread over.
    tokio::time::sleep(Duration::from_millis(80)).await;
    assert_eq!(a.remaining(), Duration::ZERO);
    assert_eq!(store.lease_info("x").await.unwrap(), None);
    let b = store.lease("x", "b", LONG).await.unwrap();
    let err = a.renew().await.unwrap_err();
    assert!(
        matches!(&err, StoreError::LeaseLost { now_held_by: Some(by), .. } if by == "b"),
        "{err}"
    );
    assert_eq!(
        leased_by(&store.lease("x", "a", short).await.unwrap_err()),
        "b"
    );
    drop(b);

    // Expired but not taken over: its owner renews it (nothing ran in between).
    store.create("y", Tally::default()).await.unwrap();
    let mut c = store.lease("y", "c", short).await.unwrap();
    tokio::time::sleep(Duration::from_millis(80)).await;
    c.renew().await.unwrap();
    assert!(c.remaining() > Duration::from_millis(20));
    assert_eq!(store.lease_info("y").await.unwrap().unwrap().owner, "c");
    assert_eq!(
        leased_by(&store.lease("y", "d", short).await.unwrap_err()),
        "c"
    );
    // Renewed in time, a lease outlives its first ttl.
    for _ in 0..4 {
        tokio::time::sleep(Duration::from_millis(25)).await;
        c.renew().await.unwrap();
    }
    assert_eq!(store.lease_info("y").await.unwrap().unwrap().owner, "c");
}

/// Tasks on two stores over one database (two connections, or pools) race for the lease of a
/// fresh thread, and then for an expired one: each time exactly one wins, and the others are
/// told who.
async fn racing_for_a_lease<B: Open>(db: Db) {
    const TASKS: usize = 16;
    let stores = [B::open(&db).await.unwrap(), B::open(&db).await.unwrap()];
    for round in 0..6 {
        let id = format!("race-{round}");
        stores[0].create(&id, Tally::default()).await.unwrap();
        if round % 2 == 1 {
            // A dead worker's lease, expired.
            let _dead = stores[1]
                .lease(&id, "dead", Duration::from_millis(1))
                .await
                .unwrap();
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let barrier = std::sync::Arc::new(tokio::sync::Barrier::new(TASKS));
        let tasks: Vec<_> = (0..TASKS)
            .map(|i| {
                let (store, barrier, id) = (stores[i % 2].clone(), barrier.clone(), id.clone());
                tokio::spawn(async move {
                    barrier.wait().await;
                    let owner = format!("worker-{i}");
                    store.lease(&id, &owner, LONG).await.map(|_| owner)
                })
            })
            .collect();
        let mut won = Vec::new();
        let mut refused = Vec::new();
        for task in tasks {
            match task.await.unwrap() {
                Ok(owner) => won.push(owner),
                Err(err) => refused.push(leased_by(&err).to_owned()),
            }
        }
        assert_eq!(won.len(), 1, "round {round}: winners {won:?}");
        assert!(
            refused.iter().all(|by| *by == won[0]),
            "round {round}: {refused:?} vs {won:?}"
        );
        let holder = stores[1].lease_info(&id).await.unwrap().unwrap().owner;
        assert_eq!(holder, won[0]);
    }
}

fn lost_to(err: &StoreError) -> Option<&str> {
    match err {
        StoreError::LeaseLost { now_held_by, .. } => now_held_by.as_deref(),
        other => panic!("expected a lease_lost error, got: {other}"),
    }
}

/// A handle fenced by a lease appends only while the lease is its owner's and has not expired:
/// a worker that stalled past its ttl while another took the thread over commits nothing, by
/// any of the handle's ways of appending, and is told who holds the thread now.
async fn fenced_appends_need_the_lease<B: Open>(db: Db) {
    let store = B::open(&db).await.unwrap();
    let short = Duration::from_millis(400);
    let mut a = store.create("f", Tally::default()).await.unwrap();
    let lease_a = store.lease("f", "a", short).await.unwrap();
    a.fence(&lease_a);
    assert_eq!(a.fenced_by(), Some("a"));
    assert_eq!(a.merge(step(1), StepMeta::default()).await.unwrap(), 1);

    // `a` stalls past its ttl; `b` takes the thread over, reads it and appends, fenced.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let lease_b = store.lease("f", "b", LONG).await.unwrap();
    assert_eq!(lease_b.version(), 1);
    let mut b = store.thread::<Tally>("f").await.unwrap();
    b.fence(&lease_b);
    assert!(b.is_current(&lease_b));
    assert_eq!(b.merge(step(2), StepMeta::default()).await.unwrap(), 2);

    // Every way `a` appends is refused, naming `b`; nothing is written, and a refused merge
    // leaves `a` as it was (it is also stale: the lease is reported first, so it stops).
    let err = a.merge(step(10), StepMeta::default()).await.unwrap_err();
    assert_eq!(err.category(), "lease_lost", "{err}");
    assert!(!err.is_conflict());
    assert_eq!(lost_to(&err), Some("b"));
    assert!(
        err.to_string()
            .contains("worker `a` no longer holds the lease on thread `f`"),
        "{err}"
    );
    assert_eq!((a.version(), a.state().log.clone()), (1, vec![1]));
    let err = a
        .merge_parallel([step(11), step(12)], FanIn::Ordered, StepMeta::default())
        .await
        .unwrap_err();
    assert_eq!(lost_to(&err), Some("b"));
    // merge_with does not retry a lost lease: its step ran once.
    let mut runs = 0;
    let err = a
        .merge_with_sync(StepMeta::default(), |_| {
            runs += 1;
            Ok(step(13))
        })
        .await
        .unwrap_err();
    assert_eq!((lost_to(&err), runs), (Some("b"), 1));
    // Staged steps are refused together (one transaction); the handle then holds the journal's
    // state, read afresh, and is still fenced.
    a.stage(step(14), |_| StepMeta::default()).unwrap();
    a.stage(step(15), |_| StepMeta::default()).unwrap();
    let err = a.flush().await.unwrap_err();
    assert_eq!(lost_to(&err), Some("b"));
    assert_eq!(
        (a.version(), a.staged(), a.state().log.clone()),
        (2, 0, vec![1, 2])
    );
    assert_eq!(a.fenced_by(), Some("a"));
    let err = a.merge(step(16), StepMeta::default()).await.unwrap_err();
    assert_eq!(lost_to(&err), Some("b"));
    assert_eq!(
        store.load::<Tally>("f").await.unwrap(),
        Versioned {
            state: Tally {
                log: vec![1, 2],
                last: Some(2)
            },
            version: 2
        }
    );
    assert_eq!(
        store
            .history("f", HistoryQuery::oldest(10))
            .await
            .unwrap()
            .len(),
        2
    );

    // `b` goes on; unfenced, `a` is checked by version only (a conflict, then it appends).
    assert_eq!(b.merge(step(3), StepMeta::default()).await.unwrap(), 3);
    a.unfence();
    let err = a.merge(step(17), StepMeta::default()).await.unwrap_err();
    assert!(matches!(err, StoreError::Conflict { .. }), "{err}");

    // An expired lease no one took fences nothing in: renewed, it appends again.
    store.create("g", Tally::default()).await.unwrap();
    let mut lease = store
        .lease("g", "c", Duration::from_millis(400))
        .await
        .unwrap();
    let mut c = store.thread::<Tally>("g").await.unwrap();
    c.fence(&lease);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let err = c.merge(step(1), StepMeta::default()).await.unwrap_err();
    assert_eq!(lost_to(&err), None);
    assert!(err.to_string().contains("no worker holds it now"), "{err}");
    lease.renew().await.unwrap();
    assert_eq!(c.merge(step(1), StepMeta::default()).await.unwrap(), 1);
    // Released, or never taken: refused too.
    lease.release().await.unwrap();
    let err = c.merge(step(2), StepMeta::default()).await.unwrap_err();
    assert_eq!(lost_to(&err), None);
    let other = store.lease("g", "d", LONG).await.unwrap();
    let err = c.merge(step(2), StepMeta::default()).await.unwrap_err();
    assert_eq!(lost_to(&err), Some("d"));
    other.release().await.unwrap();
    assert_eq!(store.info("g").await.unwrap().version, 1);

    // A missing thread is still `thread_not_found`.
    let lease = store.lease("g", "c", LONG).await.unwrap();
    c.fence(&lease);
    assert!(store.delete("g").await.unwrap());
    let err = c.merge(step(2), StepMeta::default()).await.unwrap_err();
    assert_eq!(err.category(), "thread_not_found", "{err}");
}

/// Two workers on two stores over one database, both fenced: after the first stalls past its
/// ttl and the second takes over, only the second's appends are committed, whether the first
/// wakes while the second is mid-run or after it finished.
async fn a_stalled_worker_commits_nothing<B: Open>(db: Db) {
    let (one, two) = (B::open(&db).await.unwrap(), B::open(&db).await.unwrap());
    for (round, wake_mid_run) in [(0, true), (1, false)] {
        let id = format!("s{round}");
        let ttl = Duration::from_millis(400);
        let mut first = one.create(&id, Tally::default()).await.unwrap();
        let lease = one.lease(&id, "first", ttl).await.unwrap();
        first.fence(&lease);
        first.merge(step(1), StepMeta::default()).await.unwrap();
        // The stall.
        tokio::time::sleep(Duration::from_millis(500)).await;
        let mut lease2 = two.lease(&id, "second", ttl).await.unwrap();
        let mut second = two.thread::<Tally>(&id).await.unwrap();
        second.fence(&lease2);
        second.merge(step(2), StepMeta::default()).await.unwrap();
        if wake_mid_run {
            let err = first
                .merge(step(100), StepMeta::default())
                .await
                .unwrap_err();
            assert_eq!(lost_to(&err), Some("second"));
        }
        lease2.renew().await.unwrap();
        second.merge(step(3), StepMeta::default()).await.unwrap();
        lease2.release().await.unwrap();
        if !wake_mid_run {
            let err = first
                .merge(step(100), StepMeta::default())
                .await
                .unwrap_err();
            assert_eq!(lost_to(&err), None);
            // Its late release is refused too.
            assert_eq!(
                lease.clone().release().await.unwrap_err().category(),
                "lease_lost"
            );
        }
        let err = first.flush().await;
        assert!(err.is_ok(), "nothing staged: {err:?}");
        assert_eq!(
            one.load::<Tally>(&id).await.unwrap().state.log,
            [1, 2, 3],
            "round {round}"
        );
    }
}

/// A worker appends, fenced, as fast as it can while its lease runs out and another worker
/// (another store: another connection or pool) takes the thread over: every append the first
/// committed is at or before the version the takeover saw, and none after.
async fn a_takeover_races_fenced_appends<B: Open>(db: Db) {
    let (one, two) = (B::open(&db).await.unwrap(), B::open(&db).await.unwrap());
    for round in 0..3 {
        let id = format!("t{round}");
        let mut first = one.create(&id, Tally::default()).await.unwrap();
        let lease = one
            .lease(&id, "first", Duration::from_millis(60))
            .await
            .unwrap();
        first.fence(&lease);
        let appender = tokio::spawn(async move {
            let mut committed = Vec::new();
            let started = Instant::now();
            let mut value = 0;
            loop {
                value += 1;
                match first.merge(step(value), StepMeta::default()).await {
                    Ok(seq) => committed.push(seq),
                    Err(StoreError::LeaseLost {
                        now_held_by: Some(by),
                        ..
                    }) => return (committed, by),
                    Err(StoreError::LeaseLost { .. }) => {
                        // Expired, not taken yet: keep trying, as a stalled worker would.
                        tokio::task::yield_now().await;
                    }
                    Err(err) => panic!("round {round}: {err}"),
                }
                assert!(started.elapsed() < Duration::from_secs(20), "round {round}");
            }
        });
        let takeover = loop {
            match two.lease(&id, "second", LONG).await {
                Ok(lease) => break lease,
                Err(StoreError::Leased { .. }) => tokio::task::yield_now().await,
                Err(err) => panic!("round {round}: {err}"),
            }
        };
        let (committed, by) = appender.await.unwrap();
        assert_eq!(by, "second");
        let seen = takeover.version();
        assert!(
            committed.iter().all(|seq| *seq <= seen),
            "round {round}: committed {:?} after the takeover at {seen}",
            committed
                .iter()
                .filter(|seq| **seq > seen)
                .collect::<Vec<_>>()
        );
        assert_eq!(
            committed.last().copied().unwrap_or(0),
            seen,
            "round {round}"
        );
        let mut second = two.thread::<Tally>(&id).await.unwrap();
        second.fence(&takeover);
        assert!(second.is_current(&takeover));
        assert_eq!(
            second.merge(step(0), StepMeta::default()).await.unwrap(),
            seen + 1
        );
    }
}

/// Releasing a lease that is not the owner's is an error on both backends; one that is, even
/// just expired, is released.
async fn releasing_a_lease_not_held_is_an_error<B: Open>(db: Db) {
    let store = B::open(&db).await.unwrap();
    store.create("r", Tally::default()).await.unwrap();
    // Expired, not taken: released.
    let lease = store
        .lease("r", "a", Duration::from_millis(20))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(40)).await;
    lease.release().await.unwrap();
    assert_eq!(store.lease_info("r").await.unwrap(), None);
    // Held by another.
    let lease = store
        .lease("r", "a", Duration::from_millis(20))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(40)).await;
    let b = store.lease("r", "b", LONG).await.unwrap();
    let err = lease.clone().release().await.unwrap_err();
    assert_eq!(err.category(), "lease_lost", "{err}");
    assert_eq!(lost_to(&err), Some("b"));
    assert_eq!(store.lease_info("r").await.unwrap().unwrap().owner, "b");
    // None recorded for the owner.
    b.release().await.unwrap();
    let err = lease.clone().release().await.unwrap_err();
    assert_eq!(lost_to(&err), None);
    // Another owner's expired lease is not this owner's either.
    let _c = store
        .lease("r", "c", Duration::from_millis(20))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(40)).await;
    let err = lease.clone().release().await.unwrap_err();
    assert_eq!(lost_to(&err), None);
    // A deleted thread.
    assert!(store.delete("r").await.unwrap());
    let err = lease.release().await.unwrap_err();
    assert_eq!(err.category(), "thread_not_found", "{err}");
}

/// A run's first append takes the lease and its last releases it, each in the append's own
/// write: refused (writing nothing) when another holds the lease, or the handle is stale.
/// A revoked lease is no one's: its holder's renewal and fenced appends fail with
/// `lease_lost` (nothing written), the thread is free at once, and revoking a free thread's
/// lease says so.
async fn a_revoked_lease_is_lost<B: Open>(db: Db) {
    let store = B::open(&db).await.unwrap();
    let mut mine = store.create("r", Tally::default()).await.unwrap();
    let mut lease = store.lease("r", "a", LONG).await.unwrap();
    mine.fence(&lease);
    merge_steps(&mut mine, 1..=1).await;

    let revoked = store.revoke_lease("r").await.unwrap().unwrap();
    assert_eq!((revoked.owner.as_str(), revoked.head.version), ("a", 1));
    assert_eq!(store.lease_info("r").await.unwrap(), None);
    let err = mine.merge(step(2), StepMeta::default()).await.unwrap_err();
    assert_eq!(err.category(), "lease_lost", "{err}");
    let err = lease.renew().await.unwrap_err();
    assert_eq!(err.category(), "lease_lost", "{err}");
    // Free for another at once; the revoked holder stays out.
    let b = store.lease("r", "b", LONG).await.unwrap();
    let err = mine.merge(step(2), StepMeta::default()).await.unwrap_err();
    assert_eq!(lost_to(&err), Some("b"));
    assert_eq!(store.info("r").await.unwrap().version, 1);
    b.release().await.unwrap();
    assert_eq!(store.revoke_lease("r").await.unwrap(), None);
    let err = store.revoke_lease("missing").await.unwrap_err();
    assert_eq!(err.category(), "thread_not_found", "{err}");
}

async fn appends_take_and_release_the_lease<B: Open>(db: Db) {
    let store = B::open(&db).await.unwrap();
    let mut mine = store.create("l", Tally::default()).await.unwrap();
    merge_steps(&mut mine, 1..=2).await;
    let lease = mine
        .merge_leasing(step(3), StepMeta::node("input"), "a", LONG)
        .await
        .unwrap();
    assert_eq!((lease.version(), mine.version()), (3, 3));
    assert_eq!(mine.fenced_by(), Some("a"));
    let held = store.lease_info("l").await.unwrap().unwrap();
    assert_eq!((held.owner.as_str(), held.head.version), ("a", 3));

    // Held: another's take writes nothing.
    let mut theirs = store.thread::<Tally>("l").await.unwrap();
    let err = theirs
        .merge_leasing(step(9), StepMeta::default(), "b", LONG)
        .await
        .unwrap_err();
    assert_eq!(err.category(), "thread_leased", "{err}");
    assert_eq!(leased_by(&err), "a");
    assert_eq!(store.info("l").await.unwrap().version, 3);

    // Several staged steps and the release: one write; the lease is free after it.
    mine.stage(step(4), |_| StepMeta::default()).unwrap();
    mine.stage(step(5), |_| StepMeta::default()).unwrap();
    assert_eq!(mine.flush_releasing(&lease).await.unwrap(), 5);
    assert_eq!(store.lease_info("l").await.unwrap(), None);
    assert_eq!(mine.fenced_by(), None);
    assert_eq!(
        store.load::<Tally>("l").await.unwrap().state.log,
        [1, 2, 3, 4, 5]
    );
    // Released: releasing again is an error, as for any lease not held.
    let err = lease.clone().release().await.unwrap_err();
    assert_eq!(err.category(), "lease_lost", "{err}");

    // A stale handle's take writes nothing and takes nothing.
    let err = theirs
        .merge_leasing(step(9), StepMeta::default(), "b", LONG)
        .await
        .unwrap_err();
    assert_eq!(err.category(), "state_write_conflict", "{err}");
    assert_eq!(store.lease_info("l").await.unwrap(), None);

    // Staged steps taken with the lease: one write.
    theirs.reload().await.unwrap();
    theirs.stage(step(6), |_| StepMeta::default()).unwrap();
    let lease = theirs
        .merge_leasing(step(7), StepMeta::default(), "b", LONG)
        .await
        .unwrap();
    assert_eq!(lease.version(), 7);
    assert_eq!(store.lease_info("l").await.unwrap().unwrap().owner, "b");

    // A release whose lease was taken over writes nothing.
    let short = {
        lease.clone().release().await.unwrap();
        theirs
            .merge_leasing(step(8), StepMeta::default(), "b", Duration::from_millis(20))
            .await
            .unwrap()
    };
    tokio::time::sleep(Duration::from_millis(40)).await;
    let c = store.lease("l", "c", LONG).await.unwrap();
    theirs.stage(step(9), |_| StepMeta::default()).unwrap();
    let err = theirs.flush_releasing(&short).await.unwrap_err();
    assert_eq!(err.category(), "lease_lost", "{err}");
    assert_eq!(lost_to(&err), Some("c"));
    assert_eq!(store.info("l").await.unwrap().version, 8);
    assert_eq!(store.lease_info("l").await.unwrap().unwrap().owner, "c");
    c.release().await.unwrap();
    // With nothing staged, the release alone.
    mine.reload().await.unwrap();
    let lease = mine
        .merge_leasing(step(10), StepMeta::default(), "a", LONG)
        .await
        .unwrap();
    assert_eq!(mine.flush_releasing(&lease).await.unwrap(), 9);
    assert_eq!(store.lease_info("l").await.unwrap(), None);
}

/// A lease reports the thread's head as its statement saw it, so a kept handle is known to be
/// current or not without reading the thread.
async fn a_lease_tells_a_handle_if_it_is_current<B: Open>(db: Db) {
    let store = B::open(&db).await.unwrap();
    let mut warm = store.create("h", Tally::default()).await.unwrap();
    merge_steps(&mut warm, 1..=3).await;
    let mut lease = store.lease("h", "w", LONG).await.unwrap();
    let info = store.info("h").await.unwrap();
    assert_eq!(
        lease.head(),
        agentstate_store::Head {
            version: 3,
            incarnation: info.incarnation,
            fingerprint: info.fingerprint
        }
    );
    assert_eq!(
        (lease.version(), lease.incarnation()),
        (3, info.incarnation)
    );
    assert!(warm.is_current(&lease));
    let held = store.lease_info("h").await.unwrap().unwrap();
    assert_eq!(held.head, lease.head());

    // Another writer appends: the lease, renewed, sees it; the kept handle is not current.
    let mut other = store.thread::<Tally>("h").await.unwrap();
    other.merge(step(4), StepMeta::default()).await.unwrap();
    assert!(warm.is_current(&lease), "as of the last renewal");
    lease.renew().await.unwrap();
    assert_eq!(lease.version(), 4);
    assert!(!warm.is_current(&lease) && other.is_current(&lease));
    warm.reload().await.unwrap();
    assert!(warm.is_current(&lease));
    lease.release().await.unwrap();

    // Deleted and created again to the same version: another incarnation, not current.
    assert!(store.delete("h").await.unwrap());
    let mut again = store.create("h", Tally::default()).await.unwrap();
    merge_steps(&mut again, 1..=4).await;
    let lease = store.lease("h", "w", LONG).await.unwrap();
    assert_eq!(lease.version(), 4);
    assert!(!warm.is_current(&lease) && again.is_current(&lease));
    lease.release().await.unwrap();

    // Migrated (same version, another schema): not current.
    fn rename(mut v: serde_json::Value) -> Result<serde_json::Value, String> {
        let map = v.as_object_mut().ok_or("not an object")?;
        if let Some(last) = map.remove("last") {
            map.insert("latest".into(), last);
        }
        Ok(v)
    }
    let store = store.with_migration(Migration::new(0, 2, rename, rename));
    store.migrate_thread::<TallyV2>("h").await.unwrap();
    let lease = store.lease("h", "w", LONG).await.unwrap();
    assert_eq!(lease.head().fingerprint, fingerprint::<TallyV2>());
    assert!(!again.is_current(&lease));
    // A lease of another thread: not current.
    store.create("h2", Tally::default()).await.unwrap();
    let fresh = store.thread::<TallyV2>("h").await.unwrap();
    assert!(fresh.is_current(&lease));
    let lease2 = store.lease("h2", "w", LONG).await.unwrap();
    assert!(!fresh.is_current(&lease2));
}

/// Staged steps are flushed in one transaction: all of them, or none.
async fn a_flush_is_one_transaction<B: Open>(db: Db) {
    let store = B::open(&db).await.unwrap();
    let mut t = store.create("b", Tally::default()).await.unwrap();
    let lease = store.lease("b", "w", LONG).await.unwrap();
    t.fence(&lease);
    for i in 1..=3 {
        t.stage(step(i), |s| {
            StepMeta::node("n").with("seen", json!(s.log.len()))
        })
        .unwrap();
    }
    t.stage_parallel([step(4), step(5)], FanIn::Ordered, |_| StepMeta::node("p"))
        .unwrap();
    assert_eq!(t.flush().await.unwrap(), 4);
    assert_eq!(t.flush().await.unwrap(), 4, "nothing staged");
    let history = store.history("b", HistoryQuery::oldest(10)).await.unwrap();
    assert_eq!(
        history
            .iter()
            .map(|e| (e.seq, e.extra.get("seen").cloned()))
            .collect::<Vec<_>>(),
        [
            (1, Some(json!(1))),
            (2, Some(json!(2))),
            (3, Some(json!(3))),
            (4, None)
        ]
    );
    assert_eq!(store.load::<Tally>("b").await.unwrap().state, *t.state());
    assert_eq!(t.state().log, [1, 2, 3, 4, 5]);

    // A stale writer's batch: nothing of it is written.
    let mut stale = store.thread::<Tally>("b").await.unwrap();
    t.merge(step(6), StepMeta::default()).await.unwrap();
    stale.stage(step(7), |_| StepMeta::default()).unwrap();
    stale.stage(step(8), |_| StepMeta::default()).unwrap();
    let err = stale.flush().await.unwrap_err();
    assert!(
        matches!(
            err,
            StoreError::Conflict {
                expected: 4,
                actual: 5,
                ..
            }
        ),
        "{err}"
    );
    assert_eq!((stale.version(), stale.staged()), (5, 0));
    assert_eq!(store.info("b").await.unwrap().version, 5);

    // The backend's batch: checked entry by entry, all or nothing.
    let info = store.info("b").await.unwrap();
    let entry = |value: u64, lease: Option<&str>| agentstate_store::backend::NewEntry {
        kind: agentstate_store::EntryKind::Update,
        body: serde_json::to_string(&step(value)).unwrap(),
        time_ms: 0,
        node: Some("raw".into()),
        run_id: None,
        extra: None,
        fingerprint: None,
        thread_fingerprint: info.fingerprint,
        thread_incarnation: info.incarnation,
        lease: lease.map(str::to_owned),
        lease_change: None,
    };
    let backend = store.backend();
    assert_eq!(backend.append_all("b", 5, vec![]).await.unwrap(), 5);
    let err = backend.append_all("nope", 0, vec![]).await.unwrap_err();
    assert_eq!(err.category(), "thread_not_found", "{err}");
    let err = backend
        .append_all("b", 5, vec![entry(9, Some("w")), entry(10, Some("x"))])
        .await
        .unwrap_err();
    assert!(
        matches!(&err, StoreError::LeaseLost { owner, now_held_by: Some(by), .. } if owner == "x" && by == "w"),
        "{err}"
    );
    let mut migrated = entry(10, Some("w"));
    migrated.thread_fingerprint ^= 1;
    let err = backend
        .append_all("b", 5, vec![entry(9, Some("w")), migrated])
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::Migrated { .. }), "{err}");
    let err = backend
        .append_all("b", 4, vec![entry(9, None), entry(10, None)])
        .await
        .unwrap_err();
    assert!(
        matches!(err, StoreError::Conflict { actual: 5, .. }),
        "{err}"
    );
    assert_eq!(store.info("b").await.unwrap().version, 5);
    assert_eq!(
        backend
            .append_all("b", 5, vec![entry(9, Some("w")), entry(10, None)])
            .await
            .unwrap(),
        7
    );
    assert_eq!(
        store.load::<Tally>("b").await.unwrap().state.log,
        [1, 2, 3, 4, 5, 6, 9, 10]
    );
    // A lost lease refuses the whole batch.
    lease.release().await.unwrap();
    t.reload().await.unwrap();
    t.stage(step(11), |_| StepMeta::default()).unwrap();
    t.stage(step(12), |_| StepMeta::default()).unwrap();
    let err = t.flush().await.unwrap_err();
    assert_eq!(err.category(), "lease_lost", "{err}");
    assert_eq!(store.info("b").await.unwrap().version, 7);
    assert_eq!((t.version(), t.staged()), (7, 0));
}

// ---------------------------------------------------------------------------------------------
// Rewinding.

/// What a refused rewind must leave as it was: the thread's row, its latest state and its
/// history.
async fn everything_of<B: Backend>(
    store: &Store<B>,
    id: &str,
) -> (ThreadInfo, Versioned<Tally>, Vec<u64>) {
    let history = store
        .history(id, HistoryQuery::oldest(1_000))
        .await
        .unwrap()
        .iter()
        .map(|e| e.seq)
        .collect();
    (
        store.info(id).await.unwrap(),
        store.load::<Tally>(id).await.unwrap(),
        history,
    )
}

/// Rewinds thread `id` to `seq`, which must be refused and leave the thread as it was; the
/// refusal.
async fn refused<B: Backend>(store: &Store<B>, id: &str, seq: u64) -> StoreError {
    let before = everything_of(store, id).await;
    let err = store.rewind(id, seq).await.unwrap_err();
    assert_eq!(everything_of(store, id).await, before, "{err}");
    err
}

/// The versions `store.history` lists for thread `id`, oldest first.
async fn versions<B: Backend>(store: &Store<B>, id: &str) -> Vec<u64> {
    everything_of(store, id).await.2
}

/// The thread, version and range a [`StoreError::VersionOutOfRange`] names.
fn out_of_range(err: &StoreError) -> (&str, u64, u64, u64) {
    assert_eq!(err.category(), "thread_version_out_of_range", "{err}");
    match err {
        StoreError::VersionOutOfRange {
            thread,
            seq,
            oldest,
            head,
        } => (thread, *seq, *oldest, *head),
        other => panic!("expected a version out of range, got: {other}"),
    }
}

fn tally(log: std::ops::RangeInclusive<u64>) -> Tally {
    let log: Vec<u64> = log.collect();
    Tally {
        last: log.last().copied(),
        log,
    }
}

/// A rewind drops the entries and snapshots after its version: the thread loads and lists as
/// it was at that version, its later versions are missing, and appends go on after it.
async fn rewinding_takes_a_thread_back<B: Open>(db: Db) {
    let store = B::open(&db).await.unwrap();
    // Snapshots at 2, 4 and 6, all kept.
    let snapshotting = store
        .clone()
        .with_snapshot_policy(SnapshotPolicy::every(2).keep(u32::MAX));
    let mut t = snapshotting.create("r", Tally::default()).await.unwrap();
    merge_steps(&mut t, 1..=7).await;
    let before = store.info("r").await.unwrap();
    // The snapshots after version 3 spoiled: a read of one that is still there fails.
    db.exec("UPDATE {snapshots} SET body = '\"spoiled\"' WHERE {thread:r} AND seq > 3")
        .await;
    let err = store.load::<Tally>("r").await.unwrap_err();
    assert_eq!(err.category(), "store_corrupt_data", "{err}");

    let info = store.rewind("r", 3).await.unwrap();
    assert_eq!((info.id.as_str(), info.version, info.oldest), ("r", 3, 0));
    assert_ne!(info.incarnation, before.incarnation);
    assert_eq!(store.info("r").await.unwrap(), info);
    assert_eq!(
        store.load::<Tally>("r").await.unwrap(),
        Versioned {
            state: tally(1..=3),
            version: 3
        }
    );
    assert_eq!(versions(&store, "r").await, [1, 2, 3]);
    let newest = store.history("r", HistoryQuery::newest(10)).await.unwrap();
    assert_eq!(newest.iter().map(|e| e.seq).collect::<Vec<_>>(), [3, 2, 1]);
    // The versions after it are gone, as any version the thread does not have.
    for seq in [4, 7] {
        let err = store.load_at::<Tally>("r", seq).await.unwrap_err();
        assert_eq!(err.category(), "thread_version_out_of_range", "{err}");
        assert_eq!(
            err.to_string(),
            format!("thread `r` has no version {seq}: its versions are 0 to 3")
        );
    }
    for seq in 0..=3 {
        assert_eq!(
            store.load_at::<Tally>("r", seq).await.unwrap().state,
            tally(1..=seq)
        );
    }

    // Appends go on at 4, and the new versions load from the new entries (with no snapshot
    // of the old history left to read in their place).
    let mut t = store.thread::<Tally>("r").await.unwrap();
    assert_eq!(t.version(), 3);
    for (seq, value) in [(4, 40), (5, 50), (6, 60), (7, 70)] {
        assert_eq!(
            t.merge(step(value), StepMeta::default()).await.unwrap(),
            seq
        );
    }
    let new_history = |upto: usize| {
        let mut log = vec![1, 2, 3, 40, 50, 60, 70];
        log.truncate(upto);
        log
    };
    for seq in 4..=7 {
        let loaded = store.load_at::<Tally>("r", seq).await.unwrap();
        assert_eq!(loaded.state.log, new_history(seq as usize), "version {seq}");
    }
    assert_eq!(
        store.load::<Tally>("r").await.unwrap().state.log,
        new_history(7)
    );
    assert_eq!(versions(&store, "r").await, [1, 2, 3, 4, 5, 6, 7]);

    // To the thread's own version: nothing changes, not even the incarnation, and handles
    // keep appending.
    let info = store.info("r").await.unwrap();
    assert_eq!(store.rewind("r", 7).await.unwrap(), info);
    assert_eq!(store.info("r").await.unwrap(), info);
    assert_eq!(t.merge(step(80), StepMeta::default()).await.unwrap(), 8);

    // To version 0: the initial state (on SQLite, the thread's snapshot at version 0) stays.
    let mut z = snapshotting
        .create(
            "z",
            Tally {
                log: vec![9],
                last: None,
            },
        )
        .await
        .unwrap();
    merge_steps(&mut z, 1..=4).await;
    assert_eq!(store.rewind("z", 0).await.unwrap().version, 0);
    assert_eq!(
        store.load::<Tally>("z").await.unwrap(),
        Versioned {
            state: Tally {
                log: vec![9],
                last: None
            },
            version: 0
        }
    );
    assert_eq!(versions(&store, "z").await, Vec::<u64>::new());
    let mut z = snapshotting.thread::<Tally>("z").await.unwrap();
    merge_steps(&mut z, 5..=7).await;
    assert_eq!(
        store.load::<Tally>("z").await.unwrap().state.log,
        [9, 5, 6, 7]
    );

    // A missing thread; an id no thread can have.
    let err = store.rewind("nope", 0).await.unwrap_err();
    assert_eq!(err.category(), "thread_not_found", "{err}");
    assert!(err.to_string().contains("`nope`"), "{err}");
    let err = store.rewind("a\0b", 0).await.unwrap_err();
    assert_eq!(err.category(), "thread_id_invalid", "{err}");
}

/// A handle that read the thread before a rewind is refused (`Recreated`), also at the very
/// version the thread was rewound to, and writes nothing; reloading, or a new handle, goes on
/// from the rewound thread.
async fn a_rewound_thread_refuses_stale_handles<B: Open>(db: Db) {
    let store = B::open(&db).await.unwrap();
    let mut writer = store.create("r", Tally::default()).await.unwrap();
    merge_steps(&mut writer, 1..=3).await;
    // One handle read the thread at the version it is rewound to, one at its head.
    let mut at_seq = store.thread::<Tally>("r").await.unwrap();
    merge_steps(&mut writer, 4..=5).await;
    let mut retrying = store.thread::<Tally>("r").await.unwrap();
    store.rewind("r", 3).await.unwrap();
    for (name, handle) in [("at 3", &mut at_seq), ("at 5", &mut writer)] {
        let err = handle
            .merge(step(6), StepMeta::default())
            .await
            .unwrap_err();
        assert!(matches!(err, StoreError::Recreated { .. }), "{name}: {err}");
        assert_eq!(err.category(), "state_write_conflict", "{err}");
        assert!(err.to_string().contains("rewound"), "{err}");
    }
    assert_eq!(
        store.load::<Tally>("r").await.unwrap(),
        Versioned {
            state: tally(1..=3),
            version: 3
        }
    );
    // Reloading reads the thread afresh, from either version.
    writer.reload().await.unwrap();
    assert_eq!((writer.version(), writer.state()), (3, &tally(1..=3)));
    assert_eq!(
        writer.merge(step(40), StepMeta::default()).await.unwrap(),
        4
    );
    at_seq.reload().await.unwrap();
    assert_eq!(at_seq.version(), 4);
    assert_eq!(at_seq.state().log, [1, 2, 3, 40]);
    // `merge_with` reloads and retries through the refusal.
    let version = retrying
        .merge_with_sync(StepMeta::default(), |state| {
            Ok(step(state.log.len() as u64 * 10 + 10))
        })
        .await
        .unwrap();
    assert_eq!(version, 5);
    assert_eq!(
        store.load::<Tally>("r").await.unwrap().state.log,
        [1, 2, 3, 40, 50]
    );
    // A new handle is current.
    let mut fresh = store.thread::<Tally>("r").await.unwrap();
    assert_eq!(fresh.merge(step(60), StepMeta::default()).await.unwrap(), 6);

    // Rewound to the version a handle holds, with nothing else changed but the history after
    // it: a lease taken since tells the handle it is not current.
    let mut stale = store.thread::<Tally>("r").await.unwrap();
    fresh.merge(step(70), StepMeta::default()).await.unwrap();
    store.rewind("r", 6).await.unwrap();
    let lease = store.lease("r", "w", LONG).await.unwrap();
    assert_eq!(lease.version(), 6);
    assert!(!stale.is_current(&lease));
    stale.reload().await.unwrap();
    assert!(stale.is_current(&lease));
    stale.fence(&lease);
    assert_eq!(stale.merge(step(70), StepMeta::default()).await.unwrap(), 7);
    lease.release().await.unwrap();
}

/// Every refusal writes nothing: past the thread's version, before its oldest (compacted
/// away, or a fork's start), a live lease (a revoked or expired one does not count), a fork
/// after the version.
async fn rewinding_is_refused_writing_nothing<B: Open>(db: Db) {
    let store = B::open(&db).await.unwrap();
    let mut t = store.create("r", Tally::default()).await.unwrap();
    merge_steps(&mut t, 1..=6).await;

    for seq in [7, u64::MAX] {
        let err = refused(&store, "r", seq).await;
        assert_eq!(out_of_range(&err), ("r", seq, 0, 6));
        assert_eq!(
            err.to_string(),
            format!("thread `r` has no version {seq}: its versions are 0 to 6")
        );
    }

    // A live lease, whoever holds it.
    let mut lease = store.lease("r", "worker", LONG).await.unwrap();
    let err = refused(&store, "r", 3).await;
    assert_eq!(leased_by(&err), "worker");
    assert_eq!(err.category(), "thread_leased", "{err}");
    // Revoked: the rewind goes ahead, and the revoked holder commits nothing after it.
    store.revoke_lease("r").await.unwrap();
    assert_eq!(store.rewind("r", 5).await.unwrap().version, 5);
    assert_eq!(lease.renew().await.unwrap_err().category(), "lease_lost");
    // Expired: as good as none.
    let _dead = store
        .lease("r", "dead", Duration::from_millis(50))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(80)).await;
    assert_eq!(store.rewind("r", 4).await.unwrap().version, 4);
    assert_eq!(store.load::<Tally>("r").await.unwrap().state, tally(1..=4));

    // A fork at 2 refuses a rewind to before it, naming the fork; to 2 is fine.
    store.fork("r", 2, "f").await.unwrap();
    let err = refused(&store, "r", 1).await;
    assert!(
        matches!(&err, StoreError::HasForks { thread, fork } if thread == "r" && fork == "f"),
        "{err}"
    );
    assert_eq!(err.category(), "thread_has_forks", "{err}");
    assert!(err.to_string().contains("rewound"), "{err}");
    assert_eq!(store.rewind("r", 2).await.unwrap().version, 2);
    assert_eq!(store.load::<Tally>("f").await.unwrap().state, tally(1..=2));

    // A fork's own history starts at its fork point: it is not rewound below it.
    let mut f = store.thread::<Tally>("f").await.unwrap();
    merge_steps(&mut f, 30..=31).await;
    let err = refused(&store, "f", 1).await;
    assert_eq!(out_of_range(&err), ("f", 1, 2, 4));
    let info = store.rewind("f", 2).await.unwrap();
    assert_eq!((info.version, info.parent), (2, Some(("r".to_owned(), 2))));
    assert_eq!(
        store.load::<Tally>("f").await.unwrap(),
        Versioned {
            state: tally(1..=2),
            version: 2
        }
    );
    assert_eq!(versions(&store, "f").await, [1, 2]);
    let mut f = store.thread::<Tally>("f").await.unwrap();
    assert_eq!(f.merge(step(33), StepMeta::default()).await.unwrap(), 3);

    // Compacted away: not before the oldest version; to it, the compaction's base stays.
    let mut c = store.create("c", Tally::default()).await.unwrap();
    merge_steps(&mut c, 1..=5).await;
    store.compact::<Tally>("c").await.unwrap();
    let mut c = store.thread::<Tally>("c").await.unwrap();
    merge_steps(&mut c, 6..=7).await;
    let err = refused(&store, "c", 4).await;
    assert_eq!(out_of_range(&err), ("c", 4, 5, 7));
    assert_eq!(store.rewind("c", 5).await.unwrap().version, 5);
    assert_eq!(
        store.load::<Tally>("c").await.unwrap(),
        Versioned {
            state: tally(1..=5),
            version: 5
        }
    );
    let mut c = store.thread::<Tally>("c").await.unwrap();
    assert_eq!(c.merge(step(60), StepMeta::default()).await.unwrap(), 6);
}

/// A snapshot or a compaction of a state read before a rewind is of a history that is gone
/// (its versions are written again, with other updates): neither is stored, so that no load
/// reads it in place of the new versions.
async fn snapshots_of_a_history_taken_back_are_not_stored<B: Open>(db: Db) {
    let store = B::open(&db).await.unwrap();
    let mut t = store.create("r", Tally::default()).await.unwrap();
    merge_steps(&mut t, 1..=5).await;
    let old = store.info("r").await.unwrap();
    let old_state = serde_json::to_string(&tally(1..=5)).unwrap();
    store.rewind("r", 2).await.unwrap();
    let mut t = store.thread::<Tally>("r").await.unwrap();
    merge_steps(&mut t, 30..=32).await;
    let new_state = Tally {
        log: vec![1, 2, 30, 31, 32],
        last: Some(32),
    };
    let backend = store.backend();
    backend
        .put_snapshot(
            "r",
            5,
            old.incarnation,
            old.fingerprint,
            old_state.clone(),
            1,
        )
        .await
        .unwrap();
    assert_eq!(store.load::<Tally>("r").await.unwrap().state, new_state);
    let before = everything_of(&store, "r").await;
    let err = backend
        .compact("r", 5, old.incarnation, old.fingerprint, old_state)
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::Recreated { .. }), "{err}");
    assert_eq!(everything_of(&store, "r").await, before);
    // With the thread's own incarnation, a snapshot is stored and read (here one that does not
    // hold the thread's state, to tell it from a replay).
    let marker = serde_json::to_string(&tally(7..=7)).unwrap();
    let now = store.info("r").await.unwrap();
    backend
        .put_snapshot("r", 5, now.incarnation, now.fingerprint, marker, 1)
        .await
        .unwrap();
    assert_eq!(store.load::<Tally>("r").await.unwrap().state, tally(7..=7));
}

// ---------------------------------------------------------------------------------------------
// Copying.

/// Everything a reader sees of thread `id` (but its row's id, incarnation, metadata and
/// creation time): the state at each of its versions (and that a version before its oldest is
/// missing), its whole history both ways, its row's version, oldest version, schema and parent,
/// and its lease.
async fn contents_of<B: Backend>(store: &Store<B>, id: &str) -> impl PartialEq + std::fmt::Debug {
    let info = store.info(id).await.unwrap();
    let mut states = Vec::new();
    for seq in info.oldest..=info.version {
        states.push(store.load_at::<Tally>(id, seq).await.unwrap());
    }
    let before_oldest = match info.oldest.checked_sub(1) {
        Some(seq) => Some(
            store
                .load_at::<Tally>(id, seq)
                .await
                .unwrap_err()
                .to_string()
                .replace(&format!("`{id}`"), "`..`"),
        ),
        None => None,
    };
    let oldest = store
        .history(id, HistoryQuery::oldest(1_000))
        .await
        .unwrap();
    let newest = store
        .history(id, HistoryQuery::newest(1_000))
        .await
        .unwrap();
    (
        (info.version, info.oldest, info.fingerprint, info.parent),
        store.load::<Tally>(id).await.unwrap(),
        states,
        before_oldest,
        (oldest, newest),
        store.lease_info(id).await.unwrap().map(|l| l.owner),
    )
}

/// A copy is the same thread under another id (every version, the history with its entries'
/// nodes, run ids, metadata, times and schemas, the snapshots) with rows of its own: what is
/// done to either afterwards (appends, snapshots, compaction, rewinding, deleting) does not
/// change the other.
async fn copying_makes_an_independent_thread<B: Open>(db: Db) {
    let store = B::open(&db).await.unwrap();
    // Snapshots at 2, 4 and 6, all kept.
    let snapshotting = store
        .clone()
        .with_snapshot_policy(SnapshotPolicy::every(2).keep(u32::MAX));
    let initial = Tally {
        log: vec![9],
        last: None,
    };
    let mut s = snapshotting
        .create_with(
            "s",
            initial.clone(),
            json!({"of": "s"}).as_object().cloned().unwrap(),
        )
        .await
        .unwrap();
    for i in 1..=4 {
        let meta = StepMeta::node(format!("n{i}"))
            .run_id(format!("run-{}", i / 3))
            .with("i", json!(i));
        s.merge(step(i), meta).await.unwrap();
    }
    s.merge_parallel(
        vec![step(50), step(51)],
        FanIn::Ordered,
        StepMeta::node("fan"),
    )
    .await
    .unwrap();
    // An entry in a schema of its own (a compatible edit of the type).
    let mut v0 = snapshotting.thread::<TallyV0>("s").await.unwrap();
    v0.merge(
        TallyV0Update::default().log(vec![6]).last(Some(6)),
        StepMeta::node("v0"),
    )
    .await
    .unwrap();
    let mut s = snapshotting.thread::<Tally>("s").await.unwrap();
    merge_steps(&mut s, 7..=7).await;
    let source = store.info("s").await.unwrap();
    let seen = contents_of(&store, "s").await;

    let info = store.copy("s", "c").await.unwrap();
    assert_eq!((info.id.as_str(), info.version, info.oldest), ("c", 7, 0));
    assert_eq!(
        (info.fingerprint, &info.parent),
        (source.fingerprint, &None)
    );
    assert_ne!(info.incarnation, source.incarnation);
    assert!(info.metadata.is_empty(), "{:?}", info.metadata);
    assert!(info.created_ms >= source.created_ms);
    assert_eq!(store.info("c").await.unwrap(), info);
    assert_eq!(contents_of(&store, "c").await, seen);
    assert_eq!(contents_of(&store, "s").await, seen);
    assert_eq!(store.load_at::<Tally>("c", 0).await.unwrap().state, initial);
    let history = store.history("c", HistoryQuery::oldest(10)).await.unwrap();
    assert_eq!(history[2].run_id.as_deref(), Some("run-1"));
    assert_eq!(history[2].extra, *json!({"i": 3}).as_object().unwrap());
    assert_eq!(history[5].fingerprint, fingerprint::<TallyV0>());
    assert!(history.iter().all(|e| e.inherited_from.is_none()));
    // With metadata of its own, which lists find it by.
    let mine = json!({"of": "c2"}).as_object().cloned().unwrap();
    assert_eq!(
        store
            .copy_with("s", "c2", mine.clone())
            .await
            .unwrap()
            .metadata,
        mine
    );
    let found = store
        .list(ThreadQuery::first(10).with("of", json!("c2")))
        .await
        .unwrap();
    assert_eq!(
        found.iter().map(|t| t.id.as_str()).collect::<Vec<_>>(),
        ["c2"]
    );

    // The source's snapshots are the copy's: with the entries they stand for gone (by hand),
    // the copy still loads its latest version, from its own snapshot at 6.
    db.exec("DELETE FROM {entries} WHERE {thread:c2} AND seq <= 6")
        .await;
    assert_eq!(
        store.load::<Tally>("c2").await.unwrap().state,
        s.state().clone()
    );

    // The source goes on, is compacted, rewound and deleted: the copy stays as it was.
    merge_steps(&mut s, 8..=9).await;
    store.compact::<Tally>("s").await.unwrap();
    assert_eq!(store.info("s").await.unwrap().oldest, 9);
    assert_eq!(contents_of(&store, "c").await, seen);
    store.rewind("s", 9).await.unwrap();
    let mut s = store.thread::<Tally>("s").await.unwrap();
    merge_steps(&mut s, 10..=10).await;
    store.rewind("s", 9).await.unwrap();
    assert!(store.delete("s").await.unwrap());
    assert_eq!(contents_of(&store, "c").await, seen);
    assert_eq!(store.info("c").await.unwrap(), info);

    // The copy goes on as the source would have: appends after its version, its snapshot
    // policy, a compaction, a rewind.
    let mut c = snapshotting.thread::<Tally>("c").await.unwrap();
    assert_eq!(c.version(), 7);
    merge_steps(&mut c, 8..=10).await;
    let mut expected = store.load_at::<Tally>("c", 7).await.unwrap().state;
    expected.merge(step(8)).unwrap();
    expected.merge(step(9)).unwrap();
    let at9 = expected.clone();
    expected.merge(step(10)).unwrap();
    assert_eq!(store.load::<Tally>("c").await.unwrap().state, expected);
    // Its policy stored version 8 (the second entry after the snapshot at 6 it was copied
    // with): with entries 1 to 8 gone (by hand), version 9 still loads.
    db.exec("DELETE FROM {entries} WHERE {thread:c} AND seq <= 8")
        .await;
    assert_eq!(store.load_at::<Tally>("c", 9).await.unwrap().state, at9);
    assert_eq!(store.compact::<Tally>("c").await.unwrap().snapshot, 10);
    assert_eq!(store.info("c").await.unwrap().oldest, 10);
    let err = store.load_at::<Tally>("c", 9).await.unwrap_err();
    assert_eq!(err.category(), "thread_version_out_of_range", "{err}");
    assert_eq!(store.load::<Tally>("c").await.unwrap().state, expected);

    // A compacted thread's copy starts at its oldest version too.
    let info = store.copy("c", "cc").await.unwrap();
    assert_eq!((info.version, info.oldest), (10, 10));
    assert_eq!(
        contents_of(&store, "cc").await,
        contents_of(&store, "c").await
    );
    // And the other way: the copy's changes leave its source as it was.
    let before = contents_of(&store, "c").await;
    let mut cc = store.thread::<Tally>("cc").await.unwrap();
    merge_steps(&mut cc, 11..=12).await;
    store.rewind("cc", 11).await.unwrap();
    store.compact::<Tally>("cc").await.unwrap();
    assert!(store.delete("cc").await.unwrap());
    assert_eq!(contents_of(&store, "c").await, before);
}

/// A copy of a fork is a fork of the same parent at the same version, with the fork's own
/// entries: its history reads the same, and the parent keeps a fork's limits for it.
async fn a_copy_of_a_fork_forks_the_same_parent<B: Open>(db: Db) {
    let store = B::open(&db).await.unwrap();
    let mut p = store.create("p", Tally::default()).await.unwrap();
    merge_steps(&mut p, 1..=4).await;
    store.fork("p", 2, "f").await.unwrap();
    let mut f = store.thread::<Tally>("f").await.unwrap();
    merge_steps(&mut f, 30..=31).await;
    let seen = contents_of(&store, "f").await;

    let info = store.copy("f", "fc").await.unwrap();
    assert_eq!(
        (info.version, info.oldest, info.parent.clone()),
        (4, 2, Some(("p".to_owned(), 2)))
    );
    assert_eq!(contents_of(&store, "fc").await, seen);
    let history = store.history("fc", HistoryQuery::oldest(10)).await.unwrap();
    let from: Vec<Option<&str>> = history
        .iter()
        .map(|e| e.inherited_from.as_deref())
        .collect();
    assert_eq!(from, [Some("p"), Some("p"), None, None]);

    // The fork goes: its copy still refers to the parent, which it keeps from being deleted
    // or rewound before version 2.
    assert!(store.delete("f").await.unwrap());
    assert_eq!(contents_of(&store, "fc").await, seen);
    let err = store.delete("p").await.unwrap_err();
    assert!(
        matches!(&err, StoreError::HasForks { thread, fork } if thread == "p" && fork == "fc"),
        "{err}"
    );
    let err = store.rewind("p", 1).await.unwrap_err();
    assert_eq!(err.category(), "thread_has_forks", "{err}");
    // The parent goes on, and is rewound to the fork point: the copy stays.
    merge_steps(&mut p, 5..=5).await;
    store.rewind("p", 2).await.unwrap();
    assert_eq!(contents_of(&store, "fc").await, seen);
    let mut fc = store.thread::<Tally>("fc").await.unwrap();
    assert_eq!(fc.merge(step(32), StepMeta::default()).await.unwrap(), 5);
    assert_eq!(
        store.load::<Tally>("fc").await.unwrap().state.log,
        [1, 2, 30, 31, 32]
    );
    assert!(store.delete("fc").await.unwrap());
    assert!(store.delete("p").await.unwrap());
}

/// The source's lease stays the source's: the copy has none and is free to run, and the
/// source's handles and lease go on as before.
async fn a_copy_has_no_lease<B: Open>(db: Db) {
    let store = B::open(&db).await.unwrap();
    let mut s = store.create("s", Tally::default()).await.unwrap();
    merge_steps(&mut s, 1..=2).await;
    let mut lease = store.lease("s", "worker", LONG).await.unwrap();
    s.fence(&lease);
    let info = store.copy("s", "c").await.unwrap();
    assert_eq!(info.version, 2);
    assert_eq!(store.lease_info("c").await.unwrap(), None);
    let taken = store.lease("c", "other", LONG).await.unwrap();
    assert_eq!(taken.version(), 2);
    taken.release().await.unwrap();
    // The source's handle, read before the copy, appends under its lease.
    assert_eq!(s.merge(step(3), StepMeta::default()).await.unwrap(), 3);
    lease.renew().await.unwrap();
    assert_eq!(
        store
            .lease_info("s")
            .await
            .unwrap()
            .map(|l| l.owner)
            .as_deref(),
        Some("worker")
    );
    assert_eq!(store.load::<Tally>("c").await.unwrap().state, tally(1..=2));
    lease.release().await.unwrap();
}

/// A copy is refused, writing nothing, for a missing source, a taken id (the source's own
/// included) and ids no thread can have.
async fn copying_is_refused_writing_nothing<B: Open>(db: Db) {
    let store = B::open(&db).await.unwrap();
    let mut s = store.create("s", Tally::default()).await.unwrap();
    merge_steps(&mut s, 1..=3).await;
    let mut t = store.create("t", Tally::default()).await.unwrap();
    merge_steps(&mut t, 1..=1).await;
    let all = || async {
        let ids: Vec<String> = store
            .list(ThreadQuery::first(100))
            .await
            .unwrap()
            .into_iter()
            .map(|t| t.id)
            .collect();
        (
            ids,
            everything_of(&store, "s").await,
            everything_of(&store, "t").await,
        )
    };
    let before = all().await;

    let err = store.copy("nope", "n").await.unwrap_err();
    assert!(
        matches!(&err, StoreError::ThreadNotFound { thread } if thread == "nope"),
        "{err}"
    );
    for taken in ["t", "s"] {
        let err = store.copy("s", taken).await.unwrap_err();
        assert!(
            matches!(&err, StoreError::ThreadExists { thread } if thread == taken),
            "{err}"
        );
        assert_eq!(err.category(), "thread_exists", "{err}");
    }
    for bad in ["", "a\nb", "a\0b"] {
        let err = store.copy("s", bad).await.unwrap_err();
        assert_eq!(err.category(), "thread_id_invalid", "{bad:?}: {err}");
    }
    // An invalid id is refused before the source is looked for.
    let err = store.copy("nope", "").await.unwrap_err();
    assert_eq!(err.category(), "thread_id_invalid", "{err}");
    let err = store.copy("a\0b", "n").await.unwrap_err();
    assert_eq!(err.category(), "thread_id_invalid", "{err}");
    // The backend refuses them as well, called directly.
    let err = store
        .backend()
        .copy("s", "a\nb", "{}".into(), 0)
        .await
        .unwrap_err();
    assert_eq!(err.category(), "thread_id_invalid", "{err}");
    assert_eq!(all().await, before);
}

// ---------------------------------------------------------------------------------------------
// The runner.

type Case = fn(Db) -> std::pin::Pin<Box<dyn Future<Output = ()>>>;

macro_rules! cases {
    ($backend:ty: $($name:ident),* $(,)?) => {
        vec![$((stringify!($name), (|db| Box::pin($name::<$backend>(db))) as Case)),*]
    };
}

fn all_cases<B: Open>() -> Vec<(&'static str, Case)>
where
{
    cases![B:
        create_append_load,
        a_stale_writer_gets_a_conflict_and_writes_nothing,
        parallel_steps_replay_exactly,
        time_travel_history_and_list,
        fork_starts_from_its_parent,
        snapshots_and_compaction,
        migrations_and_schema_mismatch,
        migrations_written_back,
        bad_data_is_a_named_error,
        compatible_edits_load_without_ceremony,
        incompatible_edits_name_the_field,
        openarmature_migration_fixtures,
        a_previous_store_version_opens,
        a_store_without_leases_opens,
        a_recreated_thread_refuses_stale_handles,
        thread_ids_are_checked_and_all_listed,
        more_bad_data_is_a_named_error,
        a_chat_round_trips,
        history_pages_both_ways,
        node_output_merges_in_one_call,
        merge_with_async_steps_and_retries,
        a_dropped_merge_writes_nothing_half,
        sixteen_writers_with_the_default_policy,
        leases_admit_one_worker,
        an_expired_lease_is_taken_over,
        racing_for_a_lease,
        fenced_appends_need_the_lease,
        a_stalled_worker_commits_nothing,
        a_takeover_races_fenced_appends,
        releasing_a_lease_not_held_is_an_error,
        appends_take_and_release_the_lease,
        a_revoked_lease_is_lost,
        a_lease_tells_a_handle_if_it_is_current,
        a_flush_is_one_transaction,
        rewinding_takes_a_thread_back,
        a_rewound_thread_refuses_stale_handles,
        rewinding_is_refused_writing_nothing,
        snapshots_of_a_history_taken_back_are_not_stored,
        copying_makes_an_independent_thread,
        a_copy_of_a_fork_forks_the_same_parent,
        a_copy_has_no_lease,
        copying_is_refused_writing_nothing,
        racing_tasks,
        racing_processes,
        crash,
    ]
}

/// The cases [`AnyBackend`](agentstate_store::AnyBackend) runs: all but the races and the
/// crash (their child processes use the typed stores).
fn any_cases() -> Vec<(&'static str, Case)> {
    let skip = ["racing_tasks", "racing_processes", "crash"];
    all_cases::<agentstate_store::AnyBackend>()
        .into_iter()
        .filter(|(name, _)| !skip.contains(name))
        .collect()
}

fn agentstate_now_ms() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis()
}

fn unique(tag: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!(
        "as_{tag}_{}_{}",
        std::process::id(),
        nanos % 1_000_000_000_000
    )
}

fn run_child(spec: &str, rt: &tokio::runtime::Runtime) {
    let mut parts = spec.splitn(4, '|');
    let (what, process, each) = (
        parts.next().unwrap(),
        parts.next().unwrap(),
        parts.next().unwrap(),
    );
    let db = Db::parse(parts.next().unwrap());
    let (process, each): (u64, u64) = (process.parse().unwrap(), each.parse().unwrap());
    match (&db, what) {
        #[cfg(feature = "sqlite")]
        (Db::Sqlite(_), "race") => rt.block_on(child_race::<agentstate_store::sqlite::Sqlite>(
            db, process, each,
        )),
        #[cfg(feature = "sqlite")]
        (Db::Sqlite(_), "crash") => {
            rt.block_on(child_crash::<agentstate_store::sqlite::Sqlite>(db))
        }
        #[cfg(feature = "postgres")]
        (Db::Postgres { .. }, "race") => rt.block_on(child_race::<
            agentstate_store::postgres::Postgres,
        >(db, process, each)),
        #[cfg(feature = "postgres")]
        (Db::Postgres { .. }, "crash") => {
            rt.block_on(child_crash::<agentstate_store::postgres::Postgres>(db))
        }
        _ => panic!("unknown child {spec}"),
    }
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .unwrap();
    if let Ok(spec) = std::env::var("AGENTSTATE_STORE_CHILD") {
        run_child(&spec, &rt);
        return;
    }
    let filter: Option<String> = std::env::args().skip(1).find(|a| !a.starts_with('-'));
    let selected = |name: &str| filter.as_deref().is_none_or(|f| name.contains(f));
    let mut ran = 0;

    #[cfg(feature = "sqlite")]
    {
        let dir = std::env::temp_dir();
        let typed = all_cases::<agentstate_store::sqlite::Sqlite>();
        let cases = typed
            .into_iter()
            .map(|(name, case)| ("sqlite    ", name, case))
            .chain(any_cases().into_iter().map(|(n, c)| ("sqlite/any", n, c)));
        for (backend, name, case) in cases {
            if !selected(name) {
                continue;
            }
            let path = dir.join(format!("{}.db", unique(name)));
            let started = Instant::now();
            rt.block_on(case(Db::Sqlite(path.clone())));
            println!("{backend} {name} ... ok ({:.2?})", started.elapsed());
            for suffix in ["", "-wal", "-shm"] {
                let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
            }
            ran += 1;
        }
    }

    let ci = std::env::var("CI").is_ok_and(|v| v == "true" || v == "1");
    match std::env::var("AGENTSTATE_POSTGRES_URL") {
        Err(_) if ci => panic!(
            "CI=true but AGENTSTATE_POSTGRES_URL is not set: the PostgreSQL tests must run in CI"
        ),
        Err(_) => println!("postgres tests skipped: AGENTSTATE_POSTGRES_URL is not set"),
        Ok(url) => run_postgres(&rt, &url, &selected, &mut ran),
    }
    println!("\n{ran} cases passed");
}

#[cfg(feature = "postgres")]
fn run_postgres(
    rt: &tokio::runtime::Runtime,
    url: &str,
    selected: &dyn Fn(&str) -> bool,
    ran: &mut usize,
) {
    let admin = rt.block_on(async {
        let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls)
            .await
            .unwrap_or_else(|e| {
                panic!("the PostgreSQL server at AGENTSTATE_POSTGRES_URL cannot be reached: {e}")
            });
        tokio::spawn(conn);
        client
    });
    let typed = all_cases::<agentstate_store::postgres::Postgres>();
    let cases = typed
        .into_iter()
        .map(|(name, case)| ("postgres    ", name, case))
        .chain(any_cases().into_iter().map(|(n, c)| ("postgres/any", n, c)));
    for (backend, name, case) in cases {
        if !selected(name) {
            continue;
        }
        let schema = unique(name);
        let started = Instant::now();
        rt.block_on(case(Db::Postgres {
            url: url.to_owned(),
            schema: schema.clone(),
        }));
        println!("{backend} {name} ... ok ({:.2?})", started.elapsed());
        rt.block_on(admin.batch_execute(&format!("DROP SCHEMA IF EXISTS \"{schema}\" CASCADE")))
            .unwrap();
        *ran += 1;
    }
}

#[cfg(not(feature = "postgres"))]
fn run_postgres(_: &tokio::runtime::Runtime, _: &str, _: &dyn Fn(&str) -> bool, _: &mut usize) {
    println!("postgres tests skipped: the `postgres` feature is off");
}
