//! The PostgreSQL backend (feature `postgres`): `tokio-postgres` through a `deadpool-postgres`
//! connection pool, so many tasks and processes share one database. An append is one statement
//! (a conditional `UPDATE` of the thread's version feeding the `INSERT` of the entry), atomic on
//! its own: the row lock serializes writers of one thread, and a writer whose version is stale
//! updates no row and inserts nothing.

use crate::backend::Backend;
use crate::error::StoreError;
use crate::record::{
    check_compaction, check_id, check_lookup, check_range, entry_info, held, lease_outcome,
    lease_raced, new_incarnation, parse_object, refusal, rewind_refusal, Base, Entries, Found,
    FoundLease, Head, HistoryPage, LeaseChange, LeaseInfo, LeaseOp, Loaded, NewEntry, NewThread,
    Rewriter, SchemaRecord, Start, StoredEntry, StoredRow, ThreadInfo, ThreadQuery,
};
use crate::records::{
    ClaimedRun, EventRow, RecordBackend, RecordRow, RecordWrites, RunClaim, RunNotice, Swept,
};
use crate::store::Store;
use deadpool_postgres::{Config, ManagerConfig, Pool, RecyclingMethod, Runtime};
use serde_json::Value;
use tokio_postgres::error::SqlState;
use tokio_postgres::types::ToSql;
use tokio_postgres::{IsolationLevel, NoTls, Row};

/// The version of the PostgreSQL tables this build creates, reads and writes. Versions 1 and 2
/// are migrated when they are opened; a database with another version is refused with
/// [`StoreError::UnsupportedVersion`] and not written to.
///
/// Version 2 adds the schema table `agentstate_schemas` (one row per state schema ever written;
/// see [`migrate`](crate::migrate)) and each thread's `incarnation`, drawn when it is created
/// (0 for threads created before) and again when it is rewound ([`Store::rewind`]), which every
/// append checks, so a writer that read a thread deleted and created again, or rewound, since
/// is refused ([`StoreError::Recreated`]).
///
/// Version 3 adds each thread's lease, two columns of its row: `lease_owner` and
/// `lease_expires_ms` (milliseconds since the Unix epoch by the server's clock, so workers on
/// several machines agree), both `NULL` when no worker holds it (see [`Store::lease`]).
///
/// The thread row also holds the thread's initial state, which an append (it moves the row's
/// `head` on) and a lease change rewrite the row around: PostgreSQL keeps a value of more than
/// about 2 kB out of the row (TOAST), and an update that does not change it copies only its
/// pointer, so both cost the same at any size of the initial state (measured at 1k to 100k
/// messages: see the store's benchmarks).
pub const TABLES_VERSION: i64 = 3;

/// A [`Store`] in a PostgreSQL database.
pub type PostgresStore = Store<Postgres>;

const BACKEND: &str = "PostgreSQL";

/// The connections kept for lease renewals, beside the pool's.
const RENEWAL_CONNECTIONS: usize = 2;

/// The PostgreSQL backend: a connection pool and the store's tables in one schema.
#[derive(Debug)]
pub struct Postgres {
    pool: Pool,
    /// The connections that renew leases, apart from the pool, so that a renewal never waits
    /// for a connection whose task is stuck behind a node blocking a runtime thread (a
    /// connection's task last woken on that thread sits in its slot until the node returns).
    renewals: Pool,
    sql: Sql,
    /// Where it connects: the run queue's listener opens a connection of its own.
    url: String,
}

/// Options of [`PostgresStore::connect_with`].
#[derive(Debug, Clone)]
pub struct PostgresOptions {
    /// The PostgreSQL schema holding the store's tables (created if missing). Default `public`.
    pub schema: String,
    /// The most connections the pool opens. Default 16. (Lease renewals have two more of
    /// their own, opened when first needed.)
    pub max_connections: usize,
    /// `false`: the store's sessions commit with `synchronous_commit=off`, so an append returns
    /// before the server has flushed its WAL (a server crash may lose the last ~0.6 s of
    /// commits, never corrupt them or break the version rule). Default `true`: the server's
    /// setting (normally `on`: every append is on disk when it returns).
    pub synchronous_commit: bool,
}

impl Default for PostgresOptions {
    fn default() -> Self {
        PostgresOptions {
            schema: "public".into(),
            max_connections: 16,
            synchronous_commit: true,
        }
    }
}

/// Whether PostgreSQL can hold `id` as text: one with a NUL character cannot be a record's, a
/// thread's or an event log's (and cannot be a query's parameter), so looking it up finds
/// nothing, as on SQLite.
fn storable(id: &str) -> bool {
    !id.contains('\0')
}

/// The payload of a cancel notice: the run and whether to roll it back, as JSON.
fn cancel_notice(run: &str, rollback: bool) -> String {
    serde_json::json!({"run": run, "rollback": rollback}).to_string()
}

/// A cancel notice read back; a payload that is not such JSON is a run's id alone (a plain
/// cancel, as servers of earlier versions notify it).
fn read_cancel_notice(payload: &str) -> RunNotice {
    #[derive(serde::Deserialize)]
    struct Notice {
        run: String,
        #[serde(default)]
        rollback: bool,
    }
    match serde_json::from_str::<Notice>(payload) {
        Ok(Notice { run, rollback }) => RunNotice::Cancel { run, rollback },
        Err(_) => RunNotice::Cancel {
            run: payload.to_owned(),
            rollback: false,
        },
    }
}

fn db_err(doing: impl Into<String>) -> impl FnOnce(tokio_postgres::Error) -> StoreError {
    let doing = doing.into();
    move |e| StoreError::backend(BACKEND, doing, e)
}

/// `sql` prepared once per pooled connection (deadpool's statement cache): a query is then one
/// round trip to the server instead of two (a text query is parsed, then run).
async fn prepared(
    client: &deadpool_postgres::Object,
    sql: &str,
    doing: &str,
) -> Result<tokio_postgres::Statement, StoreError> {
    client.prepare_cached(sql).await.map_err(db_err(doing))
}

/// [`prepared`], in a transaction.
async fn prepared_tx(
    tx: &deadpool_postgres::Transaction<'_>,
    sql: &str,
    doing: &str,
) -> Result<tokio_postgres::Statement, StoreError> {
    tx.prepare_cached(sql).await.map_err(db_err(doing))
}

impl Store<Postgres> {
    /// Connects to `url` (`postgres://user@host:port/db`) with a connection pool and creates
    /// or checks the store's tables in schema `public`.
    pub async fn connect(url: &str) -> Result<Self, StoreError> {
        Self::connect_with(url, PostgresOptions::default()).await
    }

    /// Connects with options (another schema, another pool size).
    pub async fn connect_with(url: &str, options: PostgresOptions) -> Result<Self, StoreError> {
        let mut config = Config::new();
        config.url = Some(url.to_owned());
        config.manager = Some(ManagerConfig {
            recycling_method: RecyclingMethod::Fast,
        });
        let pool_of = |size: usize| {
            let mut config = config.clone();
            config.pool = Some(deadpool_postgres::PoolConfig::new(size));
            config
                .create_pool(Some(Runtime::Tokio1), NoTls)
                .map_err(|e| StoreError::backend(BACKEND, "creating the connection pool", e))
        };
        let pool = pool_of(options.max_connections.max(1))?;
        // Opened when first used: a renewal every third of a lease's ttl per running run.
        let renewals = pool_of(RENEWAL_CONNECTIONS)?;
        let sql = Sql::new(&options.schema);
        let backend = Postgres {
            pool,
            renewals,
            sql,
            url: url.to_owned(),
        };
        backend.setup(&options.schema).await?;
        Ok(Store::new(backend))
    }
}

/// The statements, with the tables' qualified names.
#[derive(Debug)]
struct Sql {
    threads: String,
    entries: String,
    snapshots: String,
    meta: String,
    schemas: String,
    records: String,
    events: String,
    queue: String,
    /// The `NOTIFY` channel of runs ready to be claimed (`{schema}.agentstate_runs`).
    ready: String,
    /// The `NOTIFY` channel of cancellations (`{schema}.agentstate_cancel`).
    cancel: String,
    /// The `NOTIFY` channel of event logs appended to (`{schema}.agentstate_appended`; the
    /// log's name as the payload).
    appended: String,
    append: String,
    append_all: String,
    head: String,
    catch_up: String,
    thread: String,
    acquire: String,
    renew: String,
    release: String,
    revoke: String,
    lease: String,
}

/// The server's clock, in milliseconds since the Unix epoch (`clock_timestamp()`: the time the
/// statement runs, not its transaction's start).
const NOW_MS: &str = "(extract(epoch FROM clock_timestamp()) * 1000)::bigint";

impl Sql {
    fn new(schema: &str) -> Self {
        let q = format!("\"{}\"", schema.replace('"', "\"\""));
        let threads = format!("{q}.agentstate_threads");
        let entries = format!("{q}.agentstate_entries");
        // A lease change, in one statement: what it wrote (none if the lease is another's),
        // the thread's lease as the statement's snapshot saw it, the server's time, and the
        // thread's head (as the update left it, or as the snapshot saw it). No row: no thread.
        let lease = |set: &str, when: &str, written: &str| {
            format!(
                "WITH now AS (SELECT {NOW_MS} AS ms),
                 done AS (UPDATE {threads} t SET {set} FROM now WHERE t.id = $1 AND ({when})
                          RETURNING {written} AS written, t.head, t.incarnation, t.fingerprint)
                 SELECT (SELECT written FROM done), t.lease_owner, t.lease_expires_ms,
                        (SELECT ms FROM now), coalesce((SELECT head FROM done), t.head),
                        coalesce((SELECT incarnation FROM done), t.incarnation),
                        coalesce((SELECT fingerprint FROM done), t.fingerprint)
                 FROM {threads} t WHERE t.id = $1"
            )
        };
        // An append's condition: the version, schema and incarnation the writer read, and the
        // lease fence (`$12`: the owner, or `NULL` for none), judged by the server's clock.
        let guard = "t.id = $1 AND t.head = $2 AND t.fingerprint = $10 AND t.incarnation = $11
                     AND ($12::text IS NULL OR (t.lease_owner = $12 AND t.lease_expires_ms > now.ms))";
        // `append_all`'s: as `guard`, but a batch that takes the lease (`$14`: its ttl, or
        // `NULL`) needs only that no one else holds it.
        let guard_all = "t.id = $1 AND t.head = $2 AND t.fingerprint = $10 AND t.incarnation = $11
                     AND ($12::text IS NULL OR (t.lease_owner = $12 AND t.lease_expires_ms > now.ms)
                          OR ($14::bigint IS NOT NULL AND (t.lease_owner IS NULL OR t.lease_owner = $12
                                                           OR t.lease_expires_ms <= now.ms)))";
        // After an append: the thread as the statement's snapshot saw it, to say why nothing
        // was written. No row: no thread.
        let found = format!(
            "t.head, t.fingerprint, t.incarnation, t.lease_owner, t.lease_expires_ms,
             (SELECT ms FROM now) FROM {threads} t WHERE t.id = $1"
        );
        Sql {
            acquire: lease(
                "lease_owner = $2, lease_expires_ms = now.ms + $3",
                "t.lease_owner IS NULL OR t.lease_owner = $2 OR t.lease_expires_ms <= now.ms",
                "t.lease_expires_ms",
            ),
            renew: lease(
                "lease_expires_ms = now.ms + $3",
                "t.lease_owner = $2",
                "t.lease_expires_ms",
            ),
            release: lease(
                "lease_owner = NULL, lease_expires_ms = NULL",
                "t.lease_owner = $2",
                "now.ms",
            ),
            // `$2` is not compared: whoever holds it loses it.
            revoke: lease(
                "lease_owner = NULL, lease_expires_ms = NULL",
                "$2::text IS NOT NULL",
                "now.ms",
            ),
            lease: format!(
                "SELECT lease_owner, lease_expires_ms, {NOW_MS}, head, incarnation, fingerprint
                 FROM {threads} WHERE id = $1"
            ),
            // The new version, or (nothing written) the thread as the statement saw it, which
            // may still look right if the winner committed while this one waited.
            append: format!(
                "WITH now AS (SELECT {NOW_MS} AS ms),
                 bump AS (UPDATE {threads} t SET head = t.head + 1 FROM now WHERE {guard} RETURNING t.head),
                 ins AS (INSERT INTO {entries} (thread, seq, kind, time_ms, node, run_id, extra, fingerprint, body)
                         SELECT $1, head, $3, $4, $5, $6, $7::text::jsonb, $9, $8::text::json FROM bump
                         RETURNING seq)
                 SELECT (SELECT seq FROM ins), {found}"
            ),
            // As `append`, for `$13` entries given as arrays, in order, in one statement; with
            // the lease taken first (`$14`: its ttl) or released after (`$15`), if asked.
            append_all: format!(
                "WITH now AS (SELECT {NOW_MS} AS ms),
                 bump AS (UPDATE {threads} t SET head = t.head + $13,
                                 lease_owner = CASE WHEN $15 AND $12::text IS NOT NULL THEN NULL
                                                    WHEN $14::bigint IS NOT NULL THEN $12
                                                    ELSE t.lease_owner END,
                                 lease_expires_ms = CASE WHEN $15 AND $12::text IS NOT NULL THEN NULL
                                                         WHEN $14::bigint IS NOT NULL THEN now.ms + $14
                                                         ELSE t.lease_expires_ms END
                          FROM now WHERE {guard_all} RETURNING t.head),
                 ins AS (INSERT INTO {entries} (thread, seq, kind, time_ms, node, run_id, extra, fingerprint, body)
                         SELECT $1, $2 + e.n, e.kind, e.time_ms, e.node, e.run_id, e.extra::jsonb,
                                e.fingerprint, e.body::json
                         FROM bump, unnest($3::smallint[], $4::bigint[], $5::text[], $6::text[],
                                           $7::text[], $8::text[], $9::bigint[])
                              WITH ORDINALITY AS e(kind, time_ms, node, run_id, extra, body, fingerprint, n)
                         RETURNING seq)
                 SELECT (SELECT max(seq) FROM ins), {found}"
            ),
            head: format!(
                "WITH now AS (SELECT {NOW_MS} AS ms) SELECT NULL::bigint, {found}"
            ),
            catch_up: format!(
                "SELECT t.id, t.fingerprint, t.head, t.oldest, t.parent, t.fork_seq, t.metadata::text,
                        t.created_ms, t.incarnation, e.seq, e.kind, e.body::text, e.fingerprint
                 FROM {threads} t LEFT JOIN {entries} e ON e.thread = t.id AND e.seq > $2
                 WHERE t.id = $1 ORDER BY e.seq"
            ),
            thread: format!(
                "SELECT id, fingerprint, head, oldest, parent, fork_seq, metadata::text, created_ms,
                        incarnation
                 FROM {threads} WHERE id = $1"
            ),
            snapshots: format!("{q}.agentstate_snapshots"),
            meta: format!("{q}.agentstate_meta"),
            schemas: format!("{q}.agentstate_schemas"),
            records: format!("{q}.agentstate_records"),
            events: format!("{q}.agentstate_events"),
            queue: format!("{q}.agentstate_queue"),
            ready: format!("{schema}.agentstate_runs"),
            cancel: format!("{schema}.agentstate_cancel"),
            appended: format!("{schema}.agentstate_appended"),
            threads,
            entries,
        }
    }
}

/// The thread as an append statement's columns 1 to 6 give it (head, fingerprint,
/// incarnation, lease owner and expiry, the server's time).
fn found(row: &Row) -> Found {
    Found {
        head: Head {
            version: row.get::<_, i64>(1) as u64,
            fingerprint: row.get::<_, i64>(2) as u64,
            incarnation: row.get(3),
        },
        lease: (row.get(4), row.get(5)),
        now_ms: row.get(6),
    }
}

/// The first of `entries` (appended after `expected`, each at the version the one before made)
/// that the thread as `found` refuses, and why.
fn first_refusal(
    thread: &str,
    expected: u64,
    entries: &[NewEntry],
    found: &Found,
) -> Option<StoreError> {
    let mut at = Found {
        head: found.head,
        lease: found.lease.clone(),
        now_ms: found.now_ms,
    };
    for (i, entry) in entries.iter().enumerate() {
        let version = expected + i as u64;
        if i > 0 {
            at.head.version = version;
        }
        if let Some(refused) = refusal(thread, version, entry, &at) {
            return Some(refused);
        }
        // The entries after one that takes the lease are fenced by what it took.
        if let (Some(LeaseChange::Take { ttl_ms }), Some(owner)) =
            (entry.lease_change, &entry.lease)
        {
            let until = at.now_ms.saturating_add(ttl_ms.min(i64::MAX as u64) as i64);
            at.lease = (Some(owner.clone()), Some(until));
        }
    }
    None
}

/// The thread's lease, the server's time and the thread's head, as the `lease` statement gives
/// them.
fn lease_row(row: &Row) -> (FoundLease, i64, Head) {
    let head = Head {
        version: row.get::<_, i64>(3) as u64,
        incarnation: row.get(4),
        fingerprint: row.get::<_, i64>(5) as u64,
    };
    ((row.get(0), row.get(1)), row.get(2), head)
}

fn read_thread(row: &Row) -> Result<ThreadInfo, StoreError> {
    let id: String = row.get(0);
    let parent: Option<String> = row.get(4);
    let fork_seq: Option<i64> = row.get(5);
    let metadata: String = row.get(6);
    Ok(ThreadInfo {
        metadata: parse_object(Some(&metadata))
            .map_err(|reason| StoreError::corrupt(&id, "thread metadata", reason))?,
        fingerprint: row.get::<_, i64>(1) as u64,
        version: row.get::<_, i64>(2) as u64,
        oldest: row.get::<_, i64>(3) as u64,
        parent: parent.zip(fork_seq.map(|s| s as u64)),
        created_ms: row.get(7),
        incarnation: row.get(8),
        id,
    })
}

impl Postgres {
    async fn client(&self, doing: &str) -> Result<deadpool_postgres::Object, StoreError> {
        self.pool
            .get()
            .await
            .map_err(|e| StoreError::backend(BACKEND, format!("connecting for {doing}"), e))
    }

    /// The thread's row, locked against writers until `tx` ends.
    async fn lock_thread(
        &self,
        tx: &deadpool_postgres::Transaction<'_>,
        thread: &str,
        doing: &str,
    ) -> Result<ThreadInfo, StoreError> {
        let row = tx
            .query_opt(
                &prepared_tx(tx, &format!("{} FOR UPDATE", self.sql.thread), doing).await?,
                &[&thread],
            )
            .await
            .map_err(db_err(doing))?
            .ok_or_else(|| StoreError::ThreadNotFound {
                thread: thread.to_owned(),
            })?;
        read_thread(&row)
    }

    /// An append's outcome from the row its statement returned: the new version, or why
    /// nothing was written.
    async fn appended(
        &self,
        client: &deadpool_postgres::Object,
        thread: &str,
        expected: u64,
        entries: &[NewEntry],
        row: Option<Row>,
    ) -> Result<u64, StoreError> {
        let Some(row) = row else {
            return Err(StoreError::ThreadNotFound {
                thread: thread.to_owned(),
            });
        };
        if let Some(seq) = row.get::<_, Option<i64>>(0) {
            return Ok(seq as u64);
        }
        let seen = found(&row);
        if let Some(refused) = first_refusal(thread, expected, entries, &seen) {
            return Err(refused);
        }
        // Nothing was written although the thread looked right: another writer changed it
        // while this statement waited for its row (read committed). Read it again.
        let row = client
            .query_opt(&self.sql.head, &[&thread])
            .await
            .map_err(db_err(format!("appending to thread `{thread}`")))?;
        Err(self.refused(thread, expected, entries, row))
    }

    /// Why the thread (`row`, read after the append) refuses `entries`.
    fn refused(
        &self,
        thread: &str,
        expected: u64,
        entries: &[NewEntry],
        row: Option<Row>,
    ) -> StoreError {
        let Some(row) = row else {
            return StoreError::ThreadNotFound {
                thread: thread.to_owned(),
            };
        };
        let seen = found(&row);
        first_refusal(thread, expected, entries, &seen).unwrap_or(StoreError::Conflict {
            thread: thread.to_owned(),
            expected,
            actual: seen.head.version,
        })
    }

    /// The schema table (version 2).
    fn schemas_table(&self) -> String {
        format!(
            "CREATE TABLE {} (
                 fingerprint BIGINT PRIMARY KEY,
                 version BIGINT NOT NULL,
                 type_name TEXT NOT NULL,
                 schema TEXT NOT NULL,
                 types TEXT NOT NULL
             );",
            self.sql.schemas
        )
    }

    /// The table of [`records`](crate::RecordBackend), created when missing (not part of
    /// [`TABLES_VERSION`]).
    fn records_table(&self) -> String {
        let records = &self.sql.records;
        format!(
            "CREATE TABLE IF NOT EXISTS {records} (
                 kind TEXT NOT NULL,
                 id TEXT NOT NULL,
                 thread TEXT,
                 created_ms BIGINT NOT NULL,
                 body JSONB NOT NULL,
                 PRIMARY KEY (kind, id)
             );
             CREATE INDEX IF NOT EXISTS agentstate_records_thread ON {records} (kind, thread, created_ms);
             CREATE TABLE IF NOT EXISTS {events} (
                 log TEXT NOT NULL,
                 seq BIGINT NOT NULL,
                 body JSONB NOT NULL,
                 PRIMARY KEY (log, seq)
             );
             CREATE TABLE IF NOT EXISTS {queue} (
                 run TEXT PRIMARY KEY,
                 thread TEXT NOT NULL,
                 seq BIGSERIAL,
                 status TEXT NOT NULL DEFAULT 'pending',
                 owner TEXT,
                 attempts INTEGER NOT NULL DEFAULT 0,
                 claimed_ms BIGINT,
                 cancelled BOOLEAN NOT NULL DEFAULT false
             );
             CREATE UNIQUE INDEX IF NOT EXISTS agentstate_queue_running ON {queue} (thread)
                 WHERE status = 'running';
             CREATE INDEX IF NOT EXISTS agentstate_queue_pending ON {queue} (seq)
                 WHERE status = 'pending';
             CREATE INDEX IF NOT EXISTS agentstate_queue_thread ON {queue} (thread, seq);",
            events = self.sql.events,
            queue = self.sql.queue,
        )
    }

    async fn setup(&self, schema: &str) -> Result<(), StoreError> {
        let doing = "opening the store";
        let mut client = self.client(doing).await?;
        let tx = client.transaction().await.map_err(db_err(doing))?;
        // One process at a time creates the tables.
        tx.execute("SELECT pg_advisory_xact_lock(7301946521)", &[])
            .await
            .map_err(db_err(doing))?;
        let Sql {
            threads,
            entries,
            snapshots,
            meta,
            ..
        } = &self.sql;
        let exists: Option<String> = tx
            .query_one("SELECT to_regclass($1)::text", &[meta])
            .await
            .map_err(db_err(doing))?
            .get(0);
        if exists.is_some() {
            let found: Option<i64> = tx
                .query_opt(
                    &prepared_tx(
                        &tx,
                        &format!("SELECT value FROM {meta} WHERE key = 'schema_version'"),
                        doing,
                    )
                    .await?,
                    &[],
                )
                .await
                .map_err(db_err(doing))?
                .map(|r| r.get(0));
            return match found {
                Some(TABLES_VERSION) => {
                    let doing = "creating the records table";
                    tx.batch_execute(&self.records_table())
                        .await
                        .map_err(db_err(doing))?;
                    tx.commit().await.map_err(db_err(doing))
                }
                Some(found @ 1..=2) => {
                    if found == 1 {
                        tx.batch_execute(&format!(
                            "ALTER TABLE {threads} ADD COLUMN incarnation BIGINT NOT NULL DEFAULT 0;
                             {}",
                            self.schemas_table()
                        ))
                        .await
                        .map_err(db_err("migrating the store's tables from version 1"))?;
                    }
                    let doing = "migrating the store's tables from version 2";
                    tx.batch_execute(&format!(
                        "ALTER TABLE {threads} ADD COLUMN lease_owner TEXT,
                                               ADD COLUMN lease_expires_ms BIGINT;
                         UPDATE {meta} SET value = {TABLES_VERSION} WHERE key = 'schema_version';
                         {}",
                        self.records_table()
                    ))
                    .await
                    .map_err(db_err(doing))?;
                    tx.commit().await.map_err(db_err(doing))
                }
                other => Err(StoreError::UnsupportedVersion {
                    found: other.unwrap_or(-1),
                    supported: TABLES_VERSION,
                }),
            };
        }
        let q = format!("\"{}\"", schema.replace('"', "\"\""));
        tx.batch_execute(&format!(
            "CREATE SCHEMA IF NOT EXISTS {q};
             CREATE TABLE {meta} (key TEXT PRIMARY KEY, value BIGINT NOT NULL);
             CREATE TABLE {threads} (
                 id TEXT PRIMARY KEY,
                 fingerprint BIGINT NOT NULL,
                 head BIGINT NOT NULL,
                 oldest BIGINT NOT NULL,
                 parent TEXT REFERENCES {threads} (id),
                 fork_seq BIGINT,
                 initial JSON,
                 metadata JSONB NOT NULL,
                 created_ms BIGINT NOT NULL,
                 incarnation BIGINT NOT NULL DEFAULT 0,
                 lease_owner TEXT,
                 lease_expires_ms BIGINT
             );
             CREATE INDEX ON {threads} (parent) WHERE parent IS NOT NULL;
             CREATE TABLE {entries} (
                 thread TEXT NOT NULL,
                 seq BIGINT NOT NULL,
                 kind SMALLINT NOT NULL,
                 time_ms BIGINT NOT NULL,
                 node TEXT,
                 run_id TEXT,
                 extra JSONB,
                 fingerprint BIGINT,
                 body JSON NOT NULL,
                 PRIMARY KEY (thread, seq)
             );
             CREATE TABLE {snapshots} (
                 thread TEXT NOT NULL,
                 seq BIGINT NOT NULL,
                 fingerprint BIGINT NOT NULL,
                 body JSON NOT NULL,
                 PRIMARY KEY (thread, seq)
             );
             {}
             {}
             INSERT INTO {meta} (key, value) VALUES ('schema_version', {TABLES_VERSION});",
            self.schemas_table(),
            self.records_table()
        ))
        .await
        .map_err(db_err("creating the store's tables"))?;
        tx.commit().await.map_err(db_err(doing))
    }
}

impl Backend for Postgres {
    async fn create(&self, thread: NewThread) -> Result<ThreadInfo, StoreError> {
        let id = thread.id.clone();
        let doing = format!("creating thread `{id}`");
        let mut client = self.client(&doing).await?;
        let tx = client.transaction().await.map_err(db_err(&doing))?;
        let (fingerprint, fork_seq) = match &thread.parent {
            None => (thread.fingerprint, None),
            Some((parent, seq)) => {
                let row = tx
                    .query_opt(
                        &prepared_tx(&tx, &format!("{} FOR SHARE", self.sql.thread), &doing)
                            .await?,
                        &[parent],
                    )
                    .await
                    .map_err(db_err(&doing))?
                    .ok_or_else(|| StoreError::ThreadNotFound {
                        thread: parent.clone(),
                    })?;
                let p = read_thread(&row)?;
                if *seq < p.oldest || *seq > p.version {
                    return Err(StoreError::VersionOutOfRange {
                        thread: parent.clone(),
                        seq: *seq,
                        oldest: p.oldest,
                        head: p.version,
                    });
                }
                (p.fingerprint, Some(*seq as i64))
            }
        };
        let start = fork_seq.unwrap_or(0);
        let parent = thread.parent.as_ref().map(|(p, _)| p.clone());
        let incarnation = new_incarnation();
        let inserted = tx
            .execute(
                &prepared_tx(&tx, &format!(
                    "INSERT INTO {} (id, fingerprint, head, oldest, parent, fork_seq, initial, metadata, created_ms, incarnation)
                     VALUES ($1, $2, $3, $3, $4, $5, $6::text::json, $7::text::jsonb, $8, $9)",
                    self.sql.threads
                ), &doing).await?,
                &[
                    &id,
                    &(fingerprint as i64),
                    &start,
                    &parent,
                    &fork_seq,
                    &thread.initial,
                    &thread.metadata,
                    &thread.created_ms,
                    &incarnation,
                ],
            )
            .await;
        match inserted {
            Err(e) if e.code() == Some(&SqlState::UNIQUE_VIOLATION) => {
                return Err(StoreError::ThreadExists { thread: id })
            }
            other => other.map_err(db_err(&doing))?,
        };
        tx.commit().await.map_err(db_err(&doing))?;
        Ok(ThreadInfo {
            id,
            version: start as u64,
            fingerprint,
            parent: thread.parent,
            oldest: start as u64,
            metadata: parse_object(Some(&thread.metadata)).unwrap_or_default(),
            created_ms: thread.created_ms,
            incarnation,
        })
    }

    async fn append(
        &self,
        thread: &str,
        expected: u64,
        entry: NewEntry,
    ) -> Result<u64, StoreError> {
        if entry.lease.is_some() && entry.lease_change.is_some() {
            return self.append_all(thread, expected, vec![entry]).await;
        }
        let doing = format!("appending to thread `{thread}`");
        let client = self.client(&doing).await?;
        let statement = client
            .prepare_cached(&self.sql.append)
            .await
            .map_err(db_err(&doing))?;
        let row = client
            .query_opt(
                &statement,
                &[
                    &thread,
                    &(expected as i64),
                    &(entry.kind.code() as i16),
                    &entry.time_ms,
                    &entry.node,
                    &entry.run_id,
                    &entry.extra,
                    &entry.body,
                    &entry.fingerprint.map(|f| f as i64),
                    &(entry.thread_fingerprint as i64),
                    &entry.thread_incarnation,
                    &entry.lease,
                ],
            )
            .await
            .map_err(db_err(&doing))?;
        self.appended(&client, thread, expected, std::slice::from_ref(&entry), row)
            .await
    }

    async fn append_all(
        &self,
        thread: &str,
        expected: u64,
        entries: Vec<NewEntry>,
    ) -> Result<u64, StoreError> {
        let doing = format!("appending to thread `{thread}`");
        let client = self.client(&doing).await?;
        let Some(first) = entries.first() else {
            let row = client
                .query_opt(
                    &prepared(&client, &self.sql.head, &doing).await?,
                    &[&thread],
                )
                .await
                .map_err(db_err(&doing))?;
            return match row {
                Some(row) => Ok(found(&row).head.version),
                None => Err(StoreError::ThreadNotFound {
                    thread: thread.to_owned(),
                }),
            };
        };
        // One statement checks one guard for all: the schema and incarnation read (entries
        // that differ in them cannot all be taken), and the one owner any entry is fenced by
        // (if two are, one of them does not hold the lease).
        let guard = |e: &NewEntry| (e.thread_fingerprint, e.thread_incarnation);
        let mut owners = entries.iter().filter_map(|e| e.lease.as_ref());
        let fence = owners.next();
        if entries.iter().any(|e| guard(e) != guard(first)) || owners.any(|o| Some(o) != fence) {
            let row = client
                .query_opt(
                    &prepared(&client, &self.sql.head, &doing).await?,
                    &[&thread],
                )
                .await
                .map_err(db_err(&doing))?;
            return Err(self.refused(thread, expected, &entries, row));
        }
        let change =
            |c: LeaseChange| fence.is_some() && entries.iter().any(|e| e.lease_change == Some(c));
        let take = entries.iter().find_map(|e| match e.lease_change {
            Some(LeaseChange::Take { ttl_ms }) if fence.is_some() => {
                Some(ttl_ms.min(i64::MAX as u64) as i64)
            }
            _ => None,
        });
        let release = change(LeaseChange::Release);
        let column = |f: fn(&NewEntry) -> Option<String>| entries.iter().map(f).collect::<Vec<_>>();
        let kinds: Vec<i16> = entries.iter().map(|e| e.kind.code() as i16).collect();
        let times: Vec<i64> = entries.iter().map(|e| e.time_ms).collect();
        let fingerprints: Vec<Option<i64>> = entries
            .iter()
            .map(|e| e.fingerprint.map(|f| f as i64))
            .collect();
        let bodies: Vec<&str> = entries.iter().map(|e| e.body.as_str()).collect();
        let statement = client
            .prepare_cached(&self.sql.append_all)
            .await
            .map_err(db_err(&doing))?;
        let row = client
            .query_opt(
                &statement,
                &[
                    &thread,
                    &(expected as i64),
                    &kinds,
                    &times,
                    &column(|e| e.node.clone()),
                    &column(|e| e.run_id.clone()),
                    &column(|e| e.extra.clone()),
                    &bodies,
                    &fingerprints,
                    &(first.thread_fingerprint as i64),
                    &first.thread_incarnation,
                    &fence,
                    &(entries.len() as i64),
                    &take,
                    &release,
                ],
            )
            .await
            .map_err(db_err(&doing))?;
        self.appended(&client, thread, expected, &entries, row)
            .await
    }

    async fn put_snapshot(
        &self,
        thread: &str,
        seq: u64,
        incarnation: i64,
        fingerprint: u64,
        json: String,
        keep: u32,
    ) -> Result<(), StoreError> {
        let doing = format!("storing a snapshot of thread `{thread}`");
        let mut client = self.client(&doing).await?;
        let tx = client.transaction().await.map_err(db_err(&doing))?;
        // The thread's row is locked (`FOR KEY SHARE`, which appends do not wait for) until the
        // snapshot commits: a rewind, which locks it `FOR UPDATE`, waits, and then deletes the
        // snapshot if it is after its version; or the rewind went first, and the row, read
        // again once it committed, is another incarnation.
        tx.execute(
            &prepared_tx(
                &tx,
                &format!(
                    "INSERT INTO {} (thread, seq, fingerprint, body)
                 SELECT id, $2, $3, $4::text::json FROM {}
                 WHERE id = $1 AND head >= $2 AND incarnation = $5 FOR KEY SHARE
                 ON CONFLICT DO NOTHING",
                    self.sql.snapshots, self.sql.threads
                ),
                &doing,
            )
            .await?,
            &[
                &thread,
                &(seq as i64),
                &(fingerprint as i64),
                &json,
                &incarnation,
            ],
        )
        .await
        .map_err(db_err(&doing))?;
        // The thread's snapshots after its oldest version (the one at it is a compaction's
        // base), newest first, but for those a fork loads from (the newest at or before its
        // fork point); all but the first `keep` go.
        tx.execute(
            &prepared_tx(
                &tx,
                &format!(
                    "DELETE FROM {snapshots} WHERE thread = $1 AND seq IN (
                     SELECT s.seq FROM {snapshots} s JOIN {threads} t ON t.id = s.thread
                     WHERE s.thread = $1 AND s.seq > t.oldest
                       AND NOT EXISTS (
                           SELECT 1 FROM {threads} c
                           WHERE c.parent = $1 AND s.seq = (
                               SELECT max(n.seq) FROM {snapshots} n
                               WHERE n.thread = $1 AND n.seq <= c.fork_seq))
                     ORDER BY s.seq DESC OFFSET $2)",
                    snapshots = self.sql.snapshots,
                    threads = self.sql.threads
                ),
                &doing,
            )
            .await?,
            &[&thread, &i64::from(keep)],
        )
        .await
        .map_err(db_err(&doing))?;
        tx.commit().await.map_err(db_err(&doing))?;
        Ok(())
    }

    async fn load(
        &self,
        thread: &str,
        seq: Option<u64>,
        after: Option<u64>,
    ) -> Result<Loaded, StoreError> {
        let doing = format!("loading thread `{thread}`");
        let mut client = self.client(&doing).await?;
        if let (None, Some(after)) = (seq, after) {
            // Catching up: the thread and the entries after `after` in one statement.
            let rows = client
                .query(
                    &prepared(&client, &self.sql.catch_up, &doing).await?,
                    &[&thread, &(after as i64)],
                )
                .await
                .map_err(db_err(&doing))?;
            let first = rows.first().ok_or_else(|| StoreError::ThreadNotFound {
                thread: thread.to_owned(),
            })?;
            let info = read_thread(first)?;
            if (info.oldest..=info.version).contains(&after) {
                let entries: Vec<StoredEntry> = rows
                    .iter()
                    .filter(|r| r.get::<_, Option<i64>>(9).is_some())
                    .map(|r| StoredEntry {
                        seq: r.get::<_, i64>(9) as u64,
                        kind: i64::from(r.get::<_, i16>(10)),
                        body: r.get(11),
                        fingerprint: r.get::<_, Option<i64>>(12).map(|f| f as u64),
                    })
                    .collect();
                return Ok(Loaded {
                    seq: info.version,
                    entries: Entries::complete(thread, after, info.version, entries),
                    thread: info,
                    base: Base::Continue(after),
                });
            }
        }
        let tx = client
            .build_transaction()
            .isolation_level(IsolationLevel::RepeatableRead)
            .read_only(true)
            .start()
            .await
            .map_err(db_err(&doing))?;
        let row = tx
            .query_opt(
                &prepared_tx(&tx, &self.sql.thread, &doing).await?,
                &[&thread],
            )
            .await
            .map_err(db_err(&doing))?
            .ok_or_else(|| StoreError::ThreadNotFound {
                thread: thread.to_owned(),
            })?;
        let info = read_thread(&row)?;
        let target = check_range(&info, seq)?;
        let start = Start::of(&info, target, after);
        let snapshot = match start {
            Start::Continue(_) => None,
            Start::Snapshot => tx
                .query_opt(
                    &prepared_tx(
                        &tx,
                        &format!(
                        "SELECT seq, fingerprint, body::text FROM {} WHERE thread = $1 AND seq <= $2
                         ORDER BY seq DESC LIMIT 1",
                        self.sql.snapshots
                    ),
                        &doing,
                    )
                    .await?,
                    &[&thread, &(target as i64)],
                )
                .await
                .map_err(db_err(&doing))?
                .map(|r| {
                    (
                        r.get::<_, i64>(0) as u64,
                        r.get::<_, i64>(1) as u64,
                        r.get(2),
                    )
                }),
        };
        let (base, from) = match start.base(&info, snapshot) {
            Some(found) => found,
            None => Start::initial(
                thread,
                tx.query_one(
                    &prepared_tx(
                        &tx,
                        &format!(
                            "SELECT initial::text FROM {} WHERE id = $1",
                            self.sql.threads
                        ),
                        &doing,
                    )
                    .await?,
                    &[&thread],
                )
                .await
                .map_err(db_err(&doing))?
                .get(0),
            )?,
        };
        let entries: Vec<StoredEntry> = tx
            .query(
                &prepared_tx(&tx, &format!(
                    "SELECT seq, kind, body::text, fingerprint FROM {} WHERE thread = $1 AND seq > $2 AND seq <= $3
                     ORDER BY seq",
                    self.sql.entries
                ), &doing).await?,
                // Loading the latest version, entries past it are read too, and reported
                // (`Entries` refuses them): the thread's row and its journal disagree.
                &[
                    &thread,
                    &(from as i64),
                    &(if seq.is_none() { i64::MAX } else { target as i64 }),
                ],
            )
            .await
            .map_err(db_err(&doing))?
            .iter()
            .map(|r| StoredEntry {
                seq: r.get::<_, i64>(0) as u64,
                kind: i64::from(r.get::<_, i16>(1)),
                body: r.get(2),
                fingerprint: r.get::<_, Option<i64>>(3).map(|f| f as u64),
            })
            .collect();
        tx.commit().await.map_err(db_err(&doing))?;
        Ok(Loaded {
            thread: info,
            base,
            entries: Entries::complete(thread, from, target, entries),
            seq: target,
        })
    }

    async fn info(&self, thread: &str) -> Result<ThreadInfo, StoreError> {
        let doing = format!("reading thread `{thread}`");
        let client = self.client(&doing).await?;
        let row = client
            .query_opt(
                &prepared(&client, &self.sql.thread, &doing).await?,
                &[&thread],
            )
            .await
            .map_err(db_err(&doing))?
            .ok_or_else(|| StoreError::ThreadNotFound {
                thread: thread.to_owned(),
            })?;
        read_thread(&row)
    }

    async fn history(
        &self,
        thread: &str,
        after: u64,
        until: u64,
        limit: u32,
        newest_first: bool,
    ) -> Result<HistoryPage, StoreError> {
        let doing = format!("reading the history of thread `{thread}`");
        let client = self.client(&doing).await?;
        let bound = |v: u64| v.min(i64::MAX as u64) as i64;
        let rows = client
            .query(
                &prepared(
                    &client,
                    &format!(
                        "SELECT e.seq, e.time_ms, e.kind, e.node, e.run_id, e.extra::text,
                            octet_length(e.body::text), t.parent, t.fork_seq,
                            coalesce(e.fingerprint, t.fingerprint), t.head
                     FROM {threads} t
                     LEFT JOIN {entries} e ON e.thread = t.id AND e.seq > $2 AND e.seq <= $3
                     WHERE t.id = $1 ORDER BY e.seq {order} LIMIT $4",
                        threads = self.sql.threads,
                        entries = self.sql.entries,
                        order = if newest_first { "DESC" } else { "ASC" },
                    ),
                    &doing,
                )
                .await?,
                &[
                    &thread,
                    &bound(after),
                    &bound(until),
                    &i64::from(limit.max(1)),
                ],
            )
            .await
            .map_err(db_err(&doing))?;
        let first = rows.first().ok_or_else(|| StoreError::ThreadNotFound {
            thread: thread.to_owned(),
        })?;
        let parent: Option<String> = first.get(7);
        let fork_seq: Option<i64> = first.get(8);
        let entries = rows
            .iter()
            .filter(|r| r.get::<_, Option<i64>>(0).is_some())
            .take(limit as usize)
            .map(|r| {
                let (seq, head) = (r.get::<_, i64>(0), r.get::<_, i64>(10));
                if seq > head {
                    return Err(StoreError::corrupt(
                        thread,
                        format!("entry {seq}"),
                        format!("it is past the thread's version {head}"),
                    ));
                }
                entry_info(
                    thread,
                    r.get(0),
                    r.get(1),
                    i64::from(r.get::<_, i16>(2)),
                    r.get(3),
                    r.get(4),
                    r.get::<_, Option<String>>(5).as_deref(),
                    i64::from(r.get::<_, i32>(6)),
                    r.get::<_, i64>(9) as u64,
                )
            })
            .collect::<Result<_, _>>()?;
        Ok(HistoryPage {
            parent: parent.zip(fork_seq.map(|s| s as u64)),
            entries,
        })
    }

    async fn list(&self, query: ThreadQuery) -> Result<Vec<ThreadInfo>, StoreError> {
        let doing = "listing threads";
        let client = self.client(doing).await?;
        let filter = Value::Object(query.metadata).to_string();
        let rows = client
            .query(
                &prepared(&client, &format!(
                    "SELECT id, fingerprint, head, oldest, parent, fork_seq, metadata::text, created_ms,
                            incarnation
                     FROM {} WHERE ($1::text IS NULL OR id > $1) AND metadata @> $2::text::jsonb
                     ORDER BY id LIMIT $3",
                    self.sql.threads
                ), doing).await?,
                &[&query.after, &filter, &i64::from(query.limit)],
            )
            .await
            .map_err(db_err(doing))?;
        rows.iter().map(read_thread).collect()
    }

    async fn delete(&self, thread: &str) -> Result<bool, StoreError> {
        let doing = format!("deleting thread `{thread}`");
        let mut client = self.client(&doing).await?;
        let tx = client.transaction().await.map_err(db_err(&doing))?;
        let fork = tx
            .query_opt(
                &prepared_tx(
                    &tx,
                    &format!(
                        "SELECT id FROM {} WHERE parent = $1 LIMIT 1",
                        self.sql.threads
                    ),
                    &doing,
                )
                .await?,
                &[&thread],
            )
            .await
            .map_err(db_err(&doing))?;
        if let Some(fork) = fork {
            return Err(StoreError::HasForks {
                thread: thread.to_owned(),
                fork: fork.get(0),
            });
        }
        tx.execute(
            &prepared_tx(
                &tx,
                &format!("DELETE FROM {} WHERE thread = $1", self.sql.entries),
                &doing,
            )
            .await?,
            &[&thread],
        )
        .await
        .map_err(db_err(&doing))?;
        tx.execute(
            &prepared_tx(
                &tx,
                &format!("DELETE FROM {} WHERE thread = $1", self.sql.snapshots),
                &doing,
            )
            .await?,
            &[&thread],
        )
        .await
        .map_err(db_err(&doing))?;
        let deleted = tx
            .execute(
                &prepared_tx(
                    &tx,
                    &format!("DELETE FROM {} WHERE id = $1", self.sql.threads),
                    &doing,
                )
                .await?,
                &[&thread],
            )
            .await;
        let deleted = match deleted {
            Err(e) if e.code() == Some(&SqlState::FOREIGN_KEY_VIOLATION) => {
                return Err(StoreError::HasForks {
                    thread: thread.to_owned(),
                    fork: "(created meanwhile)".into(),
                })
            }
            other => other.map_err(db_err(&doing))?,
        };
        tx.commit().await.map_err(db_err(&doing))?;
        Ok(deleted > 0)
    }

    async fn rewrite(
        &self,
        thread: &str,
        fingerprint: u64,
        rewrite: Rewriter,
    ) -> Result<u64, StoreError> {
        let doing = format!("migrating thread `{thread}`");
        let mut client = self.client(&doing).await?;
        let tx = client.transaction().await.map_err(db_err(&doing))?;
        // The row lock keeps writers out until the rewrite commits.
        let info = self.lock_thread(&tx, thread, &doing).await?;
        let (threads, entries, snapshots) =
            (&self.sql.threads, &self.sql.entries, &self.sql.snapshots);
        let initial: Option<String> = tx
            .query_one(
                &prepared_tx(
                    &tx,
                    &format!("SELECT initial::text FROM {threads} WHERE id = $1"),
                    &doing,
                )
                .await?,
                &[&thread],
            )
            .await
            .map_err(db_err(&doing))?
            .get(0);
        let fp = fingerprint as i64;
        if let Some(json) = initial {
            let json = rewrite(StoredRow::Initial {
                fingerprint: info.fingerprint,
                json: &json,
            })?;
            tx.execute(
                &prepared_tx(
                    &tx,
                    &format!("UPDATE {threads} SET initial = $2::text::json WHERE id = $1"),
                    &doing,
                )
                .await?,
                &[&thread, &json],
            )
            .await
            .map_err(db_err(&doing))?;
        }
        let update_entry = tx
            .prepare(&format!(
                "UPDATE {entries} SET body = $3::text::json, fingerprint = NULL WHERE thread = $1 AND seq = $2"
            ))
            .await
            .map_err(db_err(&doing))?;
        for r in tx
            .query(
                &prepared_tx(
                    &tx,
                    &format!(
                    "SELECT seq, kind, fingerprint, body::text FROM {entries} WHERE thread = $1"
                ),
                    &doing,
                )
                .await?,
                &[&thread],
            )
            .await
            .map_err(db_err(&doing))?
        {
            let seq: i64 = r.get(0);
            let json = rewrite(StoredRow::Entry {
                seq: seq as u64,
                kind: i64::from(r.get::<_, i16>(1)),
                fingerprint: r
                    .get::<_, Option<i64>>(2)
                    .map_or(info.fingerprint, |f| f as u64),
                json: r.get(3),
            })?;
            tx.execute(&update_entry, &[&thread, &seq, &json])
                .await
                .map_err(db_err(&doing))?;
        }
        for r in tx
            .query(
                &prepared_tx(
                    &tx,
                    &format!(
                        "SELECT seq, fingerprint, body::text FROM {snapshots} WHERE thread = $1"
                    ),
                    &doing,
                )
                .await?,
                &[&thread],
            )
            .await
            .map_err(db_err(&doing))?
        {
            let seq: i64 = r.get(0);
            let json = rewrite(StoredRow::Snapshot {
                seq: seq as u64,
                fingerprint: r.get::<_, i64>(1) as u64,
                json: r.get(2),
            })?;
            tx.execute(
                &prepared_tx(&tx, &format!(
                    "UPDATE {snapshots} SET body = $3::text::json, fingerprint = $4 WHERE thread = $1 AND seq = $2"
                ), &doing).await?,
                &[&thread, &seq, &json, &fp],
            )
            .await
            .map_err(db_err(&doing))?;
        }
        tx.execute(
            &prepared_tx(
                &tx,
                &format!("UPDATE {threads} SET fingerprint = $2 WHERE id = $1"),
                &doing,
            )
            .await?,
            &[&thread, &fp],
        )
        .await
        .map_err(db_err(&doing))?;
        tx.commit().await.map_err(db_err(&doing))?;
        Ok(info.version)
    }

    async fn put_schema(&self, schema: SchemaRecord) -> Result<(), StoreError> {
        let doing = format!("recording the schema of `{}`", schema.type_name);
        let client = self.client(&doing).await?;
        client
            .execute(
                &prepared(&client, &format!(
                    "INSERT INTO {} (fingerprint, version, type_name, schema, types) VALUES ($1, $2, $3, $4, $5)
                     ON CONFLICT DO NOTHING",
                    self.sql.schemas
                ), &doing).await?,
                &[
                    &(schema.fingerprint as i64),
                    &i64::from(schema.version),
                    &schema.type_name,
                    &schema.schema,
                    &schema.types,
                ],
            )
            .await
            .map_err(db_err(&doing))?;
        Ok(())
    }

    async fn schemas(&self) -> Result<Vec<SchemaRecord>, StoreError> {
        let doing = "reading the recorded schemas";
        let client = self.client(doing).await?;
        let rows = client
            .query(
                &prepared(
                    &client,
                    &format!(
                        "SELECT fingerprint, version, type_name, schema, types FROM {}",
                        self.sql.schemas
                    ),
                    doing,
                )
                .await?,
                &[],
            )
            .await
            .map_err(db_err(doing))?;
        Ok(rows
            .iter()
            .map(|r| SchemaRecord {
                fingerprint: r.get::<_, i64>(0) as u64,
                version: r.get::<_, i64>(1) as u32,
                type_name: r.get(2),
                schema: r.get(3),
                types: r.get(4),
            })
            .collect())
    }

    async fn compact(
        &self,
        thread: &str,
        seq: u64,
        incarnation: i64,
        fingerprint: u64,
        json: String,
    ) -> Result<u64, StoreError> {
        let doing = format!("compacting thread `{thread}`");
        let mut client = self.client(&doing).await?;
        let tx = client.transaction().await.map_err(db_err(&doing))?;
        let info = self.lock_thread(&tx, thread, &doing).await?;
        check_compaction(&info, seq, incarnation)?;
        let seq = seq as i64;
        tx.execute(
            &prepared_tx(
                &tx,
                &format!(
                "INSERT INTO {} (thread, seq, fingerprint, body) VALUES ($1, $2, $3, $4::text::json)
                 ON CONFLICT DO NOTHING",
                self.sql.snapshots
            ),
                &doing,
            )
            .await?,
            &[&thread, &seq, &(fingerprint as i64), &json],
        )
        .await
        .map_err(db_err(&doing))?;
        // Keep what forks start from: cut at the newest snapshot at or before the oldest fork
        // point (or the new snapshot).
        let cut: i64 = tx
            .query_one(
                &prepared_tx(
                    &tx,
                    &format!(
                    "SELECT coalesce(max(seq), 0) FROM {} WHERE thread = $1 AND seq <= least($2,
                       (SELECT coalesce(min(fork_seq), $2) FROM {} WHERE parent = $1))",
                    self.sql.snapshots, self.sql.threads
                ),
                    &doing,
                )
                .await?,
                &[&thread, &seq],
            )
            .await
            .map_err(db_err(&doing))?
            .get(0);
        if cut as u64 <= info.oldest {
            tx.commit().await.map_err(db_err(&doing))?;
            return Ok(0);
        }
        let dropped = tx
            .execute(
                &prepared_tx(
                    &tx,
                    &format!(
                        "DELETE FROM {} WHERE thread = $1 AND seq <= $2",
                        self.sql.entries
                    ),
                    &doing,
                )
                .await?,
                &[&thread, &cut],
            )
            .await
            .map_err(db_err(&doing))?;
        tx.execute(
            &prepared_tx(
                &tx,
                &format!(
                    "DELETE FROM {} WHERE thread = $1 AND seq < $2",
                    self.sql.snapshots
                ),
                &doing,
            )
            .await?,
            &[&thread, &cut],
        )
        .await
        .map_err(db_err(&doing))?;
        tx.execute(
            &prepared_tx(
                &tx,
                &format!("UPDATE {} SET oldest = $2 WHERE id = $1", self.sql.threads),
                &doing,
            )
            .await?,
            &[&thread, &cut],
        )
        .await
        .map_err(db_err(&doing))?;
        tx.commit().await.map_err(db_err(&doing))?;
        Ok(dropped)
    }

    async fn rewind(&self, thread: &str, seq: u64) -> Result<ThreadInfo, StoreError> {
        let doing = format!("rewinding thread `{thread}` to version {seq}");
        let mut client = self.client(&doing).await?;
        let tx = client.transaction().await.map_err(db_err(&doing))?;
        // The row lock keeps appends, lease changes and new forks (which lock their parent's
        // row to share) out until the rewind commits.
        let info = self.lock_thread(&tx, thread, &doing).await?;
        let (lease, now, head) = lease_row(
            &tx.query_one(
                &prepared_tx(&tx, &self.sql.lease, &doing).await?,
                &[&thread],
            )
            .await
            .map_err(db_err(&doing))?,
        );
        rewind_refusal(&info, seq, head, lease, now)?;
        let seq_i = seq as i64;
        let fork = tx
            .query_opt(
                &prepared_tx(
                    &tx,
                    &format!(
                        "SELECT id FROM {} WHERE parent = $1 AND fork_seq > $2 ORDER BY id LIMIT 1",
                        self.sql.threads
                    ),
                    &doing,
                )
                .await?,
                &[&thread, &seq_i],
            )
            .await
            .map_err(db_err(&doing))?;
        if let Some(fork) = fork {
            return Err(StoreError::HasForks {
                thread: thread.to_owned(),
                fork: fork.get(0),
            });
        }
        if seq == info.version {
            tx.commit().await.map_err(db_err(&doing))?;
            return Ok(info);
        }
        for table in [&self.sql.entries, &self.sql.snapshots] {
            tx.execute(
                &prepared_tx(
                    &tx,
                    &format!("DELETE FROM {table} WHERE thread = $1 AND seq > $2"),
                    &doing,
                )
                .await?,
                &[&thread, &seq_i],
            )
            .await
            .map_err(db_err(&doing))?;
        }
        let incarnation = new_incarnation();
        tx.execute(
            &prepared_tx(
                &tx,
                &format!(
                    "UPDATE {} SET head = $2, incarnation = $3 WHERE id = $1",
                    self.sql.threads
                ),
                &doing,
            )
            .await?,
            &[&thread, &seq_i, &incarnation],
        )
        .await
        .map_err(db_err(&doing))?;
        tx.commit().await.map_err(db_err(&doing))?;
        Ok(ThreadInfo {
            version: seq,
            incarnation,
            ..info
        })
    }

    async fn copy(
        &self,
        thread: &str,
        new_id: &str,
        metadata: String,
        created_ms: i64,
    ) -> Result<ThreadInfo, StoreError> {
        check_lookup(thread)?;
        check_id(new_id)?;
        let doing = format!("copying thread `{thread}` to `{new_id}`");
        let mut client = self.client(&doing).await?;
        let tx = client.transaction().await.map_err(db_err(&doing))?;
        // The row lock keeps appends, snapshots, compactions and rewinds of the source out
        // until the copy commits, so its rows are read as of one version. (A parent the source
        // is a fork of is kept by the copy's own foreign key, which locks the parent's row to
        // share, as a fork's creation does.)
        self.lock_thread(&tx, thread, &doing).await?;
        let (threads, entries, snapshots) =
            (&self.sql.threads, &self.sql.entries, &self.sql.snapshots);
        let incarnation = new_incarnation();
        // The source's row as it is, but for the id, the metadata, the time, the incarnation
        // and the lease.
        let inserted = tx
            .execute(
                &prepared_tx(&tx, &format!(
                    "INSERT INTO {threads}
                     (id, fingerprint, head, oldest, parent, fork_seq, initial, metadata, created_ms, incarnation)
                     SELECT $2, fingerprint, head, oldest, parent, fork_seq, initial, $3::text::jsonb, $4, $5
                     FROM {threads} WHERE id = $1"
                ), &doing).await?,
                &[&thread, &new_id, &metadata, &created_ms, &incarnation],
            )
            .await;
        match inserted {
            Err(e) if e.code() == Some(&SqlState::UNIQUE_VIOLATION) => {
                return Err(StoreError::ThreadExists {
                    thread: new_id.to_owned(),
                })
            }
            other => other.map_err(db_err(&doing))?,
        };
        tx.execute(
            &prepared_tx(&tx, &format!(
                "INSERT INTO {entries} (thread, seq, kind, time_ms, node, run_id, extra, fingerprint, body)
                 SELECT $2, seq, kind, time_ms, node, run_id, extra, fingerprint, body
                 FROM {entries} WHERE thread = $1 ORDER BY seq"
            ), &doing).await?,
            &[&thread, &new_id],
        )
        .await
        .map_err(db_err(&doing))?;
        tx.execute(
            &prepared_tx(
                &tx,
                &format!(
                    "INSERT INTO {snapshots} (thread, seq, fingerprint, body)
                 SELECT $2, seq, fingerprint, body FROM {snapshots} WHERE thread = $1 ORDER BY seq"
                ),
                &doing,
            )
            .await?,
            &[&thread, &new_id],
        )
        .await
        .map_err(db_err(&doing))?;
        let copy = read_thread(
            &tx.query_one(
                &prepared_tx(&tx, &self.sql.thread, &doing).await?,
                &[&new_id],
            )
            .await
            .map_err(db_err(&doing))?,
        )?;
        tx.commit().await.map_err(db_err(&doing))?;
        Ok(copy)
    }

    async fn lease(
        &self,
        thread: &str,
        owner: &str,
        ttl_ms: u64,
        op: LeaseOp,
    ) -> Result<Option<LeaseInfo>, StoreError> {
        let doing = format!("changing the lease on thread `{thread}`");
        let client =
            match op {
                LeaseOp::Renew => self.renewals.get().await.map_err(|e| {
                    StoreError::backend(BACKEND, format!("connecting for {doing}"), e)
                })?,
                _ => self.client(&doing).await?,
            };
        let ttl = ttl_ms.min(i64::MAX as u64 / 2) as i64;
        let sql = match op {
            LeaseOp::Acquire => &self.sql.acquire,
            LeaseOp::Renew => &self.sql.renew,
            LeaseOp::Release => &self.sql.release,
            LeaseOp::Revoke => &self.sql.revoke,
        };
        let statement = client.prepare_cached(sql).await.map_err(db_err(&doing))?;
        let with_ttl: [&(dyn tokio_postgres::types::ToSql + Sync); 3] = [&thread, &owner, &ttl];
        let params = match op {
            LeaseOp::Release | LeaseOp::Revoke => &with_ttl[..2],
            _ => &with_ttl[..],
        };
        // Read committed: the update waits for a concurrent change of the row and then sees
        // it, but the statement's read of the row is from before. When that read says the
        // update should have happened, the row changed in between: ask again (rare).
        let mut tries = 0;
        loop {
            tries += 1;
            let row = client
                .query_opt(&statement, params)
                .await
                .map_err(db_err(&doing))?
                .ok_or_else(|| StoreError::ThreadNotFound {
                    thread: thread.to_owned(),
                })?;
            let written: Option<i64> = row.get(0);
            let found: (Option<String>, Option<i64>) = (row.get(1), row.get(2));
            let now: i64 = row.get(3);
            let head = Head {
                version: row.get::<_, i64>(4) as u64,
                incarnation: row.get(5),
                fingerprint: row.get::<_, i64>(6) as u64,
            };
            if written.is_none() && tries < 5 && lease_raced(owner, op, &found, now) {
                continue;
            }
            return lease_outcome(thread, owner, op, written, found, now, head);
        }
    }

    async fn lease_info(&self, thread: &str) -> Result<Option<LeaseInfo>, StoreError> {
        let doing = format!("reading the lease on thread `{thread}`");
        let client = self.client(&doing).await?;
        let statement = client
            .prepare_cached(&self.sql.lease)
            .await
            .map_err(db_err(&doing))?;
        let row = client
            .query_opt(&statement, &[&thread])
            .await
            .map_err(db_err(&doing))?
            .ok_or_else(|| StoreError::ThreadNotFound {
                thread: thread.to_owned(),
            })?;
        let (lease, now, head) = lease_row(&row);
        Ok(held(lease, now, head))
    }
}

fn read_record(row: &Row) -> RecordRow {
    RecordRow {
        kind: row.get(0),
        id: row.get(1),
        thread: row.get(2),
        created_ms: row.get(3),
        body: row.get(4),
    }
}

/// What lets a [`Postgres::write_together`] write: nothing, a worker's claim on its run (the
/// queue row still its: running, its owner, its attempt; locked until the end), or a thread
/// without a queued run (`reject`; its caller holds the thread's queue lock).
enum Gate<'a> {
    Open,
    Claim(&'a RunClaim),
    Alone(&'a str),
}

/// The change to the run queue a [`Postgres::write_together`] makes with its writes.
enum QueueChange<'a> {
    None,
    /// Run `0` of thread `1` queued, pending.
    Enqueue(&'a str, &'a str),
    /// Run `0` out of the queue.
    Finish(&'a str),
}

impl Postgres {
    /// `writes` and `change` in one statement (one round trip, one transaction unless `conn`
    /// is one), made only if `gate` lets them: whether it did. Records are upserted and
    /// events appended (their logs' followers notified) from arrays; the queue's workers are
    /// woken by a queued run, and a finished run's waiters by its end.
    async fn write_together(
        &self,
        conn: &impl deadpool_postgres::GenericClient,
        writes: &RecordWrites,
        gate: Gate<'_>,
        change: QueueChange<'_>,
        doing: &str,
    ) -> Result<bool, StoreError> {
        // A record written twice in one statement would be upserted twice: the last stands,
        // with the patches of it applied here (a row changes once in a statement).
        let mut rows: Vec<RecordRow> = Vec::new();
        for row in writes.records.iter().rev() {
            if !rows.iter().any(|r| r.kind == row.kind && r.id == row.id) {
                rows.push(row.clone());
            }
        }
        let mut patches = Vec::new();
        for patch in &writes.patches {
            match rows
                .iter_mut()
                .find(|r| r.kind == patch.kind && r.id == patch.id)
            {
                Some(row) => row.body = patch.apply(&row.body),
                None => patches.push(patch),
            }
        }
        let kinds: Vec<&str> = rows.iter().map(|r| r.kind.as_str()).collect();
        let ids: Vec<&str> = rows.iter().map(|r| r.id.as_str()).collect();
        let threads: Vec<Option<&str>> = rows.iter().map(|r| r.thread.as_deref()).collect();
        let created: Vec<i64> = rows.iter().map(|r| r.created_ms).collect();
        let bodies: Vec<&str> = rows.iter().map(|r| r.body.as_str()).collect();
        let patch_kinds: Vec<&str> = patches.iter().map(|p| p.kind.as_str()).collect();
        let patch_ids: Vec<&str> = patches.iter().map(|p| p.id.as_str()).collect();
        let patch_fields: Vec<&str> = patches.iter().map(|p| p.fields.as_str()).collect();
        let mut logs: Vec<&str> = Vec::new();
        let mut seqs: Vec<i64> = Vec::new();
        let mut events: Vec<&str> = Vec::new();
        for batch in &writes.events {
            for (i, body) in batch.bodies.iter().enumerate() {
                let seq = batch
                    .first
                    .checked_add(i as u64)
                    .and_then(|s| i64::try_from(s).ok());
                let Some(seq) = seq else {
                    return Err(StoreError::backend(
                        BACKEND,
                        doing,
                        format!("event log `{}` has no number past 2^63 - 1", batch.log),
                    ));
                };
                logs.push(&batch.log);
                seqs.push(seq);
                events.push(body);
            }
        }
        let mut params: Vec<&(dyn ToSql + Sync)> = vec![
            &kinds,
            &ids,
            &threads,
            &created,
            &bodies,
            &logs,
            &seqs,
            &events,
            &self.sql.appended,
            &self.sql.ready,
            &patch_kinds,
            &patch_ids,
            &patch_fields,
        ];
        let attempt;
        let (queue, records, events_table) = (&self.sql.queue, &self.sql.records, &self.sql.events);
        let gate_sql = match &gate {
            Gate::Open => "SELECT 1".to_owned(),
            Gate::Claim(claim) => {
                attempt = claim.attempt.min(i32::MAX as u32) as i32;
                params.extend([&claim.run as &(dyn ToSql + Sync), &claim.owner, &attempt]);
                format!(
                    "SELECT 1 FROM {queue} WHERE run = $14 AND owner = $15 AND attempts = $16
                       AND status = 'running' FOR UPDATE"
                )
            }
            Gate::Alone(thread) => {
                params.push(thread);
                format!("SELECT 1 WHERE NOT EXISTS (SELECT 1 FROM {queue} WHERE thread = $14)")
            }
        };
        let next = params.len() + 1;
        let change_sql = match &change {
            QueueChange::None => "queued AS (SELECT ''::text AS payload WHERE false)".to_owned(),
            QueueChange::Enqueue(run, thread) => {
                params.extend([run as &(dyn ToSql + Sync), thread]);
                format!(
                    "queued AS (INSERT INTO {queue} (run, thread)
                                SELECT ${next}, ${} WHERE EXISTS (SELECT 1 FROM gate)
                                RETURNING ''::text AS payload)",
                    next + 1
                )
            }
            // Its end told to those who wait for it; the workers woken only if its thread has
            // a run waiting for it.
            QueueChange::Finish(run) => {
                params.push(run);
                format!(
                    "done AS (DELETE FROM {queue} WHERE run = ${next} AND EXISTS (SELECT 1 FROM gate)
                              RETURNING run, thread),
                     queued AS (SELECT run AS payload FROM done
                                UNION ALL SELECT ''::text FROM done
                                WHERE EXISTS (SELECT 1 FROM {queue} w WHERE w.thread = done.thread
                                              AND w.run <> done.run AND w.status = 'pending'))"
                )
            }
        };
        let sql = format!(
            "WITH gate AS ({gate_sql}),
             rec AS (INSERT INTO {records} (kind, id, thread, created_ms, body)
                     SELECT k, i, t, c, b::jsonb
                     FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[], $5::text[])
                          AS r(k, i, t, c, b)
                     WHERE EXISTS (SELECT 1 FROM gate)
                     ON CONFLICT (kind, id) DO UPDATE SET thread = excluded.thread, body = excluded.body),
             pat AS (UPDATE {records} r SET body = r.body || p.f::jsonb
                     FROM unnest($11::text[], $12::text[], $13::text[]) AS p(k, i, f)
                     WHERE r.kind = p.k AND r.id = p.i AND EXISTS (SELECT 1 FROM gate)),
             ev AS (INSERT INTO {events_table} (log, seq, body)
                    SELECT l, s, b::jsonb FROM unnest($6::text[], $7::bigint[], $8::text[]) AS e(l, s, b)
                    WHERE EXISTS (SELECT 1 FROM gate)
                    ON CONFLICT (log, seq) DO NOTHING RETURNING log),
             {change_sql},
             told AS (SELECT pg_notify($9, log) FROM (SELECT DISTINCT log FROM ev) d
                      UNION ALL SELECT pg_notify($10, payload) FROM queued)
             -- `told` is read so that it runs (a data-modifying part runs unread).
             SELECT EXISTS (SELECT 1 FROM gate), (SELECT count(*) FROM told)"
        );
        let statement = conn.prepare_cached(&sql).await.map_err(db_err(doing))?;
        let row = conn
            .query_one(&statement, &params)
            .await
            .map_err(db_err(doing))?;
        Ok(row.get(0))
    }
}

impl RecordBackend for Postgres {
    async fn put_record(&self, row: RecordRow) -> Result<(), StoreError> {
        let doing = format!("writing {} record `{}`", row.kind, row.id);
        let client = self.client(&doing).await?;
        let sql = format!(
            "INSERT INTO {} (kind, id, thread, created_ms, body)
             VALUES ($1, $2, $3, $4, $5::text::jsonb)
             ON CONFLICT (kind, id) DO UPDATE SET thread = excluded.thread, body = excluded.body",
            self.sql.records
        );
        client
            .execute(
                &prepared(&client, &sql, &doing).await?,
                &[&row.kind, &row.id, &row.thread, &row.created_ms, &row.body],
            )
            .await
            .map_err(db_err(&doing))?;
        Ok(())
    }

    async fn get_record(&self, kind: &str, id: &str) -> Result<Option<RecordRow>, StoreError> {
        if !storable(id) {
            return Ok(None);
        }
        let doing = format!("reading {kind} record `{id}`");
        let client = self.client(&doing).await?;
        let row = client
            .query_opt(
                &prepared(&client, &format!(
                    "SELECT kind, id, thread, created_ms, body::text FROM {} WHERE kind = $1 AND id = $2",
                    self.sql.records
                ), &doing).await?,
                &[&kind, &id],
            )
            .await
            .map_err(db_err(&doing))?;
        Ok(row.as_ref().map(read_record))
    }

    async fn list_records(
        &self,
        kind: &str,
        thread: Option<&str>,
    ) -> Result<Vec<RecordRow>, StoreError> {
        if thread.is_some_and(|t| !storable(t)) {
            return Ok(Vec::new());
        }
        let doing = format!("listing {kind} records");
        let client = self.client(&doing).await?;
        let rows = client
            .query(
                &prepared(
                    &client,
                    &format!(
                        "SELECT kind, id, thread, created_ms, body::text FROM {}
                     WHERE kind = $1 AND ($2::text IS NULL OR thread = $2) ORDER BY created_ms, id",
                        self.sql.records
                    ),
                    &doing,
                )
                .await?,
                &[&kind, &thread],
            )
            .await
            .map_err(db_err(&doing))?;
        Ok(rows.iter().map(read_record).collect())
    }

    async fn find_records(
        &self,
        kind: &str,
        member: &str,
        values: &[&str],
    ) -> Result<Vec<RecordRow>, StoreError> {
        let doing = format!("finding {kind} records");
        let client = self.client(&doing).await?;
        let sql = format!(
            "SELECT kind, id, thread, created_ms, body::text FROM {}
             WHERE kind = $1 AND jsonb_typeof(body -> $2) = 'string' AND body ->> $2 = ANY($3)
             ORDER BY created_ms, id",
            self.sql.records
        );
        let rows = client
            .query(
                &prepared(&client, &sql, &doing).await?,
                &[&kind, &member, &values],
            )
            .await
            .map_err(db_err(&doing))?;
        Ok(rows.iter().map(read_record).collect())
    }

    async fn delete_record(&self, kind: &str, id: &str) -> Result<bool, StoreError> {
        if !storable(id) {
            return Ok(false);
        }
        let doing = format!("deleting {kind} record `{id}`");
        let client = self.client(&doing).await?;
        let n = client
            .execute(
                &prepared(
                    &client,
                    &format!(
                        "DELETE FROM {} WHERE kind = $1 AND id = $2",
                        self.sql.records
                    ),
                    &doing,
                )
                .await?,
                &[&kind, &id],
            )
            .await
            .map_err(db_err(&doing))?;
        Ok(n > 0)
    }

    async fn append_events(
        &self,
        log: &str,
        first: u64,
        bodies: Vec<String>,
    ) -> Result<(), StoreError> {
        let doing = format!("appending {} events to event log `{log}`", bodies.len());
        let client = self.client(&doing).await?;
        // One statement for the batch: the numbers and bodies as two arrays.
        let seqs: Vec<i64> = (0..bodies.len())
            .map(|i| (first + i as u64) as i64)
            .collect();
        // Those who follow the log (a run's stream on another server) are told, by `NOTIFY`.
        let sql = format!(
            "WITH added AS (INSERT INTO {} (log, seq, body)
                 SELECT $1, s, b::jsonb FROM unnest($2::bigint[], $3::text[]) AS e(s, b)
                 ON CONFLICT (log, seq) DO NOTHING RETURNING seq)
             SELECT pg_notify($4, $1) WHERE EXISTS (SELECT 1 FROM added)",
            self.sql.events
        );
        client
            .query(
                &prepared(&client, &sql, &doing).await?,
                &[&log, &seqs, &bodies, &self.sql.appended],
            )
            .await
            .map_err(db_err(&doing))?;
        Ok(())
    }

    async fn list_events(
        &self,
        log: &str,
        from: u64,
        limit: usize,
    ) -> Result<Vec<EventRow>, StoreError> {
        if !storable(log) {
            return Ok(Vec::new());
        }
        // Numbers past PostgreSQL's `bigint`: no event is numbered so.
        let Ok(from) = i64::try_from(from) else {
            return Ok(Vec::new());
        };
        let doing = format!("reading event log `{log}`");
        let client = self.client(&doing).await?;
        let rows = client
            .query(
                &prepared(&client, &format!(
                    "SELECT seq, body::text FROM {} WHERE log = $1 AND seq >= $2 ORDER BY seq LIMIT $3",
                    self.sql.events
                ), &doing).await?,
                &[&log, &from, &(limit.min(i64::MAX as usize) as i64)],
            )
            .await
            .map_err(db_err(&doing))?;
        Ok(rows
            .iter()
            .map(|r| EventRow {
                seq: r.get::<_, i64>(0) as u64,
                body: r.get(1),
            })
            .collect())
    }

    async fn delete_events(&self, log: &str) -> Result<u64, StoreError> {
        if !storable(log) {
            return Ok(0);
        }
        let doing = format!("deleting event log `{log}`");
        let client = self.client(&doing).await?;
        client
            .execute(
                &prepared(
                    &client,
                    &format!("DELETE FROM {} WHERE log = $1", self.sql.events),
                    &doing,
                )
                .await?,
                &[&log],
            )
            .await
            .map_err(db_err(&doing))
    }

    async fn write_records(
        &self,
        writes: RecordWrites,
        claim: Option<&RunClaim>,
    ) -> Result<bool, StoreError> {
        let doing = match claim {
            Some(c) => format!(
                "writing records of run `{}` for worker `{}`",
                c.run, c.owner
            ),
            None => "writing records and events together".to_owned(),
        };
        if writes.is_empty() && claim.is_none() {
            return Ok(true);
        }
        let client = self.client(&doing).await?;
        let gate = claim.map_or(Gate::Open, Gate::Claim);
        self.write_together(&client, &writes, gate, QueueChange::None, &doing)
            .await
    }

    fn has_run_queue(&self) -> bool {
        true
    }

    async fn enqueue_run(
        &self,
        run: &str,
        thread: &str,
        alone: bool,
        writes: RecordWrites,
    ) -> Result<bool, StoreError> {
        let doing = format!("queueing run `{run}` of thread `{thread}`");
        let mut client = self.client(&doing).await?;
        let change = QueueChange::Enqueue(run, thread);
        if !alone {
            return self
                .write_together(&client, &writes, Gate::Open, change, &doing)
                .await;
        }
        let tx = client.transaction().await.map_err(db_err(&doing))?;
        // The thread's queue, one asker at a time (a lock of the transaction's: released at
        // its end): the next asker's check, a statement that starts after this one commits,
        // sees this one's run.
        tx.execute(
            &prepared_tx(
                &tx,
                "SELECT pg_advisory_xact_lock(730194, hashtext($1))",
                &doing,
            )
            .await?,
            &[&thread],
        )
        .await
        .map_err(db_err(&doing))?;
        let queued = self
            .write_together(&tx, &writes, Gate::Alone(thread), change, &doing)
            .await?;
        tx.commit().await.map_err(db_err(&doing))?;
        Ok(queued)
    }

    async fn claim_run(
        &self,
        owner: &str,
        max_attempts: u32,
    ) -> Result<Option<ClaimedRun>, StoreError> {
        let doing = format!("claiming a run for worker `{owner}`");
        let client = self.client(&doing).await?;
        let queue = &self.sql.queue;
        // The oldest pending run whose thread runs nothing and has no older pending run,
        // skipping the rows other claimers hold. Two claimers may still pick runs of one thread
        // at once (neither sees the other's uncommitted claim): the unique index on running
        // runs' threads lets one through, the other claims again.
        let claim = format!(
            "UPDATE {queue} q SET status = 'running', owner = $1, attempts = q.attempts + 1,
                                  claimed_ms = {NOW_MS}
             WHERE q.run = (
                 SELECT c.run FROM {queue} c
                 WHERE c.status = 'pending' AND NOT c.cancelled AND c.attempts < $2
                   AND NOT EXISTS (SELECT 1 FROM {queue} o WHERE o.thread = c.thread
                       AND (o.status = 'running' OR (o.status = 'pending' AND o.seq < c.seq)))
                 ORDER BY c.seq LIMIT 1
                 FOR UPDATE SKIP LOCKED)
             RETURNING q.run, q.thread, q.attempts"
        );
        for _ in 0..16 {
            match client
                .query_opt(&claim, &[&owner, &(max_attempts as i32)])
                .await
            {
                Ok(row) => {
                    return Ok(row.map(|r| ClaimedRun {
                        run: r.get(0),
                        thread: r.get(1),
                        attempt: r.get::<_, i32>(2) as u32,
                    }))
                }
                Err(e) if e.code() == Some(&SqlState::UNIQUE_VIOLATION) => continue,
                Err(e) => return Err(db_err(&doing)(e)),
            }
        }
        Ok(None)
    }

    async fn finish_run(
        &self,
        run: &str,
        writes: RecordWrites,
        claim: Option<&RunClaim>,
    ) -> Result<bool, StoreError> {
        let doing = format!("taking run `{run}` out of the queue");
        let client = self.client(&doing).await?;
        let gate = claim.map_or(Gate::Open, Gate::Claim);
        self.write_together(&client, &writes, gate, QueueChange::Finish(run), &doing)
            .await
    }

    async fn release_run(&self, run: &str, owner: &str) -> Result<(), StoreError> {
        let doing = format!("putting run `{run}` back in the queue");
        let client = self.client(&doing).await?;
        // Back in the queue and its thread's lease revoked at once: the worker that claims it
        // next takes the lease without waiting, and no sweep sees it running without one.
        client
            .query(
                &prepared(
                    &client,
                    &format!(
                        "WITH back AS (UPDATE {queue} SET status = 'pending', owner = NULL,
                                          attempts = greatest(attempts - 1, 0)
                                   WHERE run = $1 AND owner = $2 AND status = 'running'
                                   RETURNING run, thread),
                     revoked AS (UPDATE {threads} t SET lease_owner = NULL, lease_expires_ms = NULL
                                 FROM back WHERE t.id = back.thread RETURNING t.id)
                     SELECT pg_notify($3, ''), (SELECT count(*) FROM revoked) FROM back",
                        queue = self.sql.queue,
                        threads = self.sql.threads,
                    ),
                    &doing,
                )
                .await?,
                &[&run, &owner, &self.sql.ready],
            )
            .await
            .map_err(db_err(&doing))?;
        Ok(())
    }

    async fn cancel_run(&self, run: &str, rollback: bool) -> Result<Option<bool>, StoreError> {
        let doing = format!("cancelling queued run `{run}`");
        let client = self.client(&doing).await?;
        let queue = &self.sql.queue;
        let pending = client
            .execute(
                &prepared(
                    &client,
                    &format!("DELETE FROM {queue} WHERE run = $1 AND status = 'pending'"),
                    &doing,
                )
                .await?,
                &[&run],
            )
            .await
            .map_err(db_err(&doing))?;
        if pending > 0 {
            return Ok(Some(false));
        }
        let running = client
            .query(
                &prepared(
                    &client,
                    &format!(
                        "WITH marked AS (UPDATE {queue} SET cancelled = true
                                     WHERE run = $1 AND status = 'running' RETURNING run)
                     SELECT pg_notify($2, $3) FROM marked"
                    ),
                    &doing,
                )
                .await?,
                &[&run, &self.sql.cancel, &cancel_notice(run, rollback)],
            )
            .await
            .map_err(db_err(&doing))?;
        Ok((!running.is_empty()).then_some(true))
    }

    async fn sweep_runs(
        &self,
        grace: std::time::Duration,
        max_attempts: u32,
    ) -> Result<Swept, StoreError> {
        let doing = "sweeping the run queue";
        let client = self.client(doing).await?;
        let (queue, threads) = (&self.sql.queue, &self.sql.threads);
        // A running run whose claim is older than the grace and whose thread's lease is not
        // live (its worker stopped renewing it): put back, or out once its attempts are used
        // up or it was cancelled (its cancellation reached no worker).
        let rows = client
            .query(
                &prepared(
                    &client,
                    &format!(
                        "WITH dead AS (
                         SELECT q.run FROM {queue} q
                         WHERE q.status = 'running' AND q.claimed_ms <= {NOW_MS} - $1
                           AND NOT EXISTS (SELECT 1 FROM {threads} t WHERE t.id = q.thread
                               AND t.lease_owner IS NOT NULL AND t.lease_expires_ms > {NOW_MS})
                         FOR UPDATE SKIP LOCKED),
                     swept AS (
                         UPDATE {queue} q SET owner = NULL, status = CASE
                             WHEN q.cancelled THEN 'cancelled'
                             WHEN q.attempts >= $2 THEN 'exhausted' ELSE 'pending' END
                         FROM dead WHERE q.run = dead.run
                         RETURNING q.run, q.thread, q.attempts, q.status)
                     SELECT run, thread, attempts, status,
                            CASE WHEN status = 'pending' THEN pg_notify($3, '') END
                     FROM swept"
                    ),
                    doing,
                )
                .await?,
                &[
                    &(grace.as_millis().min(i64::MAX as u128) as i64),
                    &(max_attempts as i32),
                    &self.sql.ready,
                ],
            )
            .await
            .map_err(db_err(doing))?;
        let mut swept = Swept::default();
        let mut out = Vec::new();
        for row in &rows {
            let run = ClaimedRun {
                run: row.get(0),
                thread: row.get(1),
                attempt: row.get::<_, i32>(2) as u32,
            };
            match row.get::<_, &str>(3) {
                "pending" => swept.requeued.push(run),
                "exhausted" => swept.exhausted.push(run),
                _ => {
                    out.push(run.run.clone());
                    swept.cancelled.push(run)
                }
            }
        }
        out.extend(swept.exhausted.iter().map(|r| r.run.clone()));
        if !out.is_empty() {
            client
                .execute(
                    &prepared(
                        &client,
                        &format!("DELETE FROM {queue} WHERE run = ANY($1)"),
                        doing,
                    )
                    .await?,
                    &[&out],
                )
                .await
                .map_err(db_err(doing))?;
        }
        Ok(swept)
    }

    async fn listen_runs(
        &self,
    ) -> Result<tokio::sync::mpsc::UnboundedReceiver<RunNotice>, StoreError> {
        let doing = "listening to the run queue";
        let (client, mut connection) = tokio_postgres::connect(&self.url, NoTls)
            .await
            .map_err(db_err(doing))?;
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let (ready, cancel) = (self.sql.ready.clone(), self.sql.cancel.clone());
        let appended = self.sql.appended.clone();
        let notices = tx.clone();
        tokio::spawn(async move {
            while let Some(Ok(message)) =
                std::future::poll_fn(|cx| connection.poll_message(cx)).await
            {
                let tokio_postgres::AsyncMessage::Notification(n) = message else {
                    continue;
                };
                let notice = if n.channel() == cancel {
                    read_cancel_notice(n.payload())
                } else if n.channel() == appended {
                    RunNotice::Appended(n.payload().to_owned())
                } else if n.payload().is_empty() {
                    RunNotice::Ready
                } else {
                    // A run taken out of the queue (its id as the payload) ended.
                    RunNotice::Ended(n.payload().to_owned())
                };
                if notices.send(notice).is_err() {
                    return;
                }
            }
        });
        let quoted = |c: &str| format!("\"{}\"", c.replace('"', "\"\""));
        client
            .batch_execute(&format!(
                "LISTEN {}; LISTEN {}; LISTEN {}",
                quoted(&ready),
                quoted(&self.sql.cancel),
                quoted(&self.sql.appended)
            ))
            .await
            .map_err(db_err(doing))?;
        // The connection lives as long as someone listens.
        tokio::spawn(async move {
            tx.closed().await;
            drop(client);
        });
        Ok(rx)
    }
}
