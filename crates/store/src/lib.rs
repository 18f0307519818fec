//! toolgate store: custom tool definitions with history, definition events, plans, the MCP
//! gateway's server entries and tool pins, and a tamper-evident audit log, on SQLite (embedded
//! default) or PostgreSQL (shared by instances).
//!
//! One interface, [`Store`], two backends chosen by [`DbUrl`]. Migrations live per backend in
//! `migrations/sqlite` and `migrations/postgres`, are compiled into the binary and run on
//! [`Store::open`].
//!
//! # Crash safety
//!
//! **SQLite** runs in WAL mode with `synchronous = FULL`: every transaction that returned from
//! commit has been fsynced to the write-ahead log, so it survives a process crash (`kill -9`) *and*
//! an operating-system crash or power loss (given a disk that honours fsync). A transaction that had
//! not returned from commit is rolled back as a whole on the next open — never half-applied. Each
//! store operation (a definition change together with its event, one audit entry) is one
//! transaction. The WAL is checkpointed into the main file automatically; the `-wal` and `-shm`
//! files next to the database belong to it and must be copied with it.
//!
//! **PostgreSQL** gives the same guarantee with its default `synchronous_commit = on`.
//!
//! **The audit log** is written in two steps for tools whose effect is `write`, `delete` or
//! `side_effect`: [`AuditStage`] commits a `started` entry (tool, definition hash, principal,
//! redacted input) *before* the handler runs, and refuses the call (`unavailable`) if that commit
//! fails. So a side effect can never happen without a durable record: if the process dies during
//! the call, the log holds a `started` entry without a matching `finished` one
//! ([`AuditCall::interrupted`]), meaning "this call may have had its effect; its outcome is
//! unknown". The outcome of every call, read-only ones included, is appended afterwards by
//! [`AuditObserver`]; the outcome of a call that finished just before a crash may be lost, its
//! `started` entry is not. Entries are never updated, only appended, and form a SHA-256 hash chain
//! ([`Store::verify`]): editing or deleting a row breaks the chain at that row (and outputs kept
//! apart are covered through their SHA-256). The removal of the newest entries (or of all of them)
//! leaves a valid chain; signed checkpoints of the head, kept in the database and in a file
//! outside it, show it (see [`AuditAnchor`] and [`Store::verify`]).
//!
//! # Concurrency
//!
//! Appends to the audit chain, definition changes and their events are serialized: on SQLite by
//! `BEGIN IMMEDIATE` (the database write lock), on PostgreSQL by a transaction-scoped advisory
//! lock (`pg_advisory_xact_lock`), so two processes or instances can neither fork the chain nor
//! both slip past a plan limit. The MCP gateway's server entries and tool pins change under the
//! definitions' lock too, each change with its event, so instances that see the same upstream
//! change at once quarantine the tool once. Two processes opening a fresh database at once both succeed and the
//! migrations run once (SQLite: the migrator runs inside one `BEGIN IMMEDIATE` transaction;
//! PostgreSQL: sqlx's migrator holds an advisory lock).
//!
//! # Events
//!
//! A definition change and its event are one transaction; the event is published in-process after
//! commit ([`Store::subscribe`]). Event ids increase in commit order (event writes are serialized
//! too), so [`Store::events`]`(after_id, …)` is a gap-free cursor. On PostgreSQL each event also
//! sends `NOTIFY toolgate_events[_<schema>]` with `<instance>:<id>`; the first subscriber of an
//! instance starts a `LISTEN` task that reads other instances' events by id and publishes them.
//! Notifications missed while that connection is down are not replayed; catch up with
//! [`Store::events`].

#![warn(missing_docs, unreachable_pub)]

mod approvals;
mod audit;
mod checkpoint;
mod cluster;
mod definitions;
mod error;
mod events;
mod gate;
mod output_types;
mod quota;
mod run_cache;
mod runs;
mod sync;
mod tier;
mod todo;
mod upstream;
mod url;

use std::path::Path;
use std::str::FromStr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use chrono::{DateTime, SecondsFormat, Utc};
use sqlx::migrate::{Migration, MigrationType, Migrator};
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};
use sqlx::{Connection, SqlSafeStr};
use tokio::sync::{broadcast, watch};
use toolgate_core::CancellationToken;
use toolgate_core::ErrorChain;

pub use approvals::{
    Approval, ApprovalCursor, ApprovalStatus, NewApproval, RecoveredApprovals, arguments_sha256,
};
pub use audit::{
    AuditCall, AuditObserver, AuditQuery, AuditRecord, AuditStage, AuditStart, BrokenLink,
    ContentDigest, GATEWAY_PRINCIPAL, GATEWAY_VIA, GatewayAudit, LARGE_OUTPUT_BYTES, VerifyReport,
};
pub use checkpoint::{
    AuditAnchor, AuditKey, Checkpoint, CheckpointProblem, CheckpointProblemKind, CheckpointSource,
    CutTail, suffixed,
};
pub use cluster::{CancelRequest, RequestState};
pub use definitions::StoredDefinition;
pub use error::{StoreError, StoreErrorKind};
pub use events::{EventKind, StoredEvent};
pub use gate::{
    BoundApproval, Cancel, CreatedFn, DEFAULT_APPROVAL_TTL, DurableApproval, HintFn, run_approved,
    run_approved_with,
};
pub use quota::{SHARED_LEASE, SharedQuotas};
pub use run_cache::RUN_LEASE;
pub use runs::{Admission, RunCall, StoredRun};
pub use sync::SYNC_INTERVAL;
pub use tier::{ALL_BUILTINS, Tier};
pub use upstream::{Observed, Pin, PinStatus, StoredServer};
pub use url::DbUrl;

/// Options for [`Store::open`].
#[derive(Clone, Debug, Default)]
pub struct StoreOptions {
    /// PostgreSQL only: the schema to keep the tables in, created if missing and put on every
    /// connection's `search_path`. `None` uses the server's default `search_path` (usually
    /// `public`). Ignored for SQLite.
    pub pg_schema: Option<String>,
    /// How long this instance's hold on a run's reserved calls and a tool's attempts lasts
    /// without renewal (see `run_cache.rs`); `None` is [`RUN_LEASE`]. Tests shorten it; at
    /// least 100 ms.
    pub run_lease: Option<Duration>,
}

/// How long a SQLite connection waits for another writer before failing.
const SQLITE_BUSY_TIMEOUT: Duration = Duration::from_secs(30);
/// Capacity of the in-process event channel; slower subscribers see `Lagged`.
const EVENT_CHANNEL_CAPACITY: usize = 1024;

pub(crate) enum Pool {
    Sqlite(SqlitePool),
    Postgres(PgPool),
}

pub(crate) struct Inner {
    pub(crate) pool: Pool,
    pub(crate) url: DbUrl,
    pub(crate) events: broadcast::Sender<StoredEvent>,
    /// PostgreSQL: the NOTIFY channel of this schema.
    pub(crate) channel: String,
    /// Identifies this instance in NOTIFY payloads, so it skips its own notifications.
    pub(crate) origin: String,
    pub(crate) listener_started: AtomicBool,
    pub(crate) listening: watch::Sender<bool>,
    pub(crate) shutdown: CancellationToken,
    /// The audit log's group-commit writer (see `audit::writer`).
    pub(crate) audit_writer: audit::AuditWriter,
    /// Signs and keeps checkpoints of the chain's head; `None` without a key.
    pub(crate) checkpoints: Option<checkpoint::Checkpointer>,
    /// Runs' counters cached in this process (see `run_cache`).
    pub(crate) runs: run_cache::RunCache,
    /// How long this instance's run leases last without renewal.
    pub(crate) run_lease: Duration,
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

/// The store. Cheap to clone (shared); share one per process.
#[derive(Clone)]
pub struct Store {
    pub(crate) inner: Arc<Inner>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("url", &self.inner.url)
            .finish_non_exhaustive()
    }
}

/// Runs `$body` with `$p` bound to the backend's pool; the body is compiled once per backend.
macro_rules! on_pool {
    ($store:expr, $p:ident => $body:expr) => {
        match &$store.inner.pool {
            $crate::Pool::Sqlite($p) => $body,
            $crate::Pool::Postgres($p) => $body,
        }
    };
}
pub(crate) use on_pool;

/// Runs `$body` in a serialized write transaction bound to `$tx` (SQLite: `BEGIN IMMEDIATE`;
/// PostgreSQL: `pg_advisory_xact_lock($lock)`) and commits it. An early `?` return rolls back.
macro_rules! write_tx {
    ($store:expr, $lock:expr, $tx:ident => $body:block) => {
        match &$store.inner.pool {
            $crate::Pool::Sqlite(pool) => {
                let mut $tx = pool
                    .begin_with("BEGIN IMMEDIATE")
                    .await
                    .map_err($crate::StoreError::db("starting a write transaction"))?;
                let out = $body;
                $tx.commit()
                    .await
                    .map_err($crate::StoreError::db("committing"))?;
                out
            }
            $crate::Pool::Postgres(pool) => {
                let mut $tx = pool
                    .begin()
                    .await
                    .map_err($crate::StoreError::db("starting a write transaction"))?;
                sqlx::query("SELECT pg_advisory_xact_lock($1)")
                    .bind($lock)
                    .execute(&mut *$tx)
                    .await
                    .map_err($crate::StoreError::db("taking the write lock"))?;
                let out = $body;
                $tx.commit()
                    .await
                    .map_err($crate::StoreError::db("committing"))?;
                out
            }
        }
    };
}
pub(crate) use write_tx;

/// Advisory lock keys (PostgreSQL): one for definitions and events, one for the audit chain.
pub(crate) const LOCK_DEFINITIONS: i64 = 0x7467_0001;
pub(crate) const LOCK_AUDIT: i64 = 0x7467_0002;

impl Store {
    /// Opens (creating if needed) the database and applies pending migrations, with the default
    /// audit anchor ([`AuditAnchor::for_url`]: for SQLite a key file and a checkpoint file next
    /// to the database, created when missing; for PostgreSQL none).
    ///
    /// SQLite: creates the parent directories and the file; WAL journal, `synchronous = FULL`,
    /// foreign keys on, a 30 s busy timeout. PostgreSQL: creates `options.pg_schema` if given.
    pub async fn open(url: &DbUrl, options: &StoreOptions) -> Result<Store, StoreError> {
        Self::open_with(url, options, &AuditAnchor::for_url(url)).await
    }

    /// Like [`Store::open`], with the audit log's checkpoints signed by `anchor`'s key and kept
    /// in its checkpoint file (see [`Store::verify`]).
    pub async fn open_with(
        url: &DbUrl,
        options: &StoreOptions,
        anchor: &AuditAnchor,
    ) -> Result<Store, StoreError> {
        let (pool, channel) = match url {
            DbUrl::Sqlite(path) => (Pool::Sqlite(open_sqlite(url, path).await?), String::new()),
            DbUrl::Postgres(raw) => {
                let schema = options.pg_schema.as_deref();
                let pool = open_postgres(url, raw, schema).await?;
                let channel = match schema {
                    Some(s) => format!("toolgate_events_{s}").chars().take(63).collect(),
                    None => "toolgate_events".to_owned(),
                };
                (Pool::Postgres(pool), channel)
            }
        };
        // After the database: its errors name the path and the fix first.
        let checkpoints = checkpoint::Checkpointer::new(anchor)?;
        let (events, _) = broadcast::channel(EVENT_CHANNEL_CAPACITY);
        let (listening, _) = watch::channel(false);
        let (audit_writer, audit_jobs) = audit::AuditWriter::new();
        let store = Store {
            inner: Arc::new(Inner {
                pool,
                url: url.clone(),
                events,
                channel,
                origin: uuid::Uuid::now_v7().simple().to_string(),
                listener_started: AtomicBool::new(false),
                listening,
                shutdown: CancellationToken::new(),
                audit_writer,
                checkpoints,
                runs: run_cache::RunCache::default(),
                run_lease: options
                    .run_lease
                    .unwrap_or(run_cache::RUN_LEASE)
                    .max(Duration::from_millis(100)),
            }),
        };
        audit::AuditWriter::spawn(Arc::downgrade(&store.inner), audit_jobs);
        if let Some(checkpoints) = &store.inner.checkpoints {
            checkpoints.spawn(Arc::downgrade(&store.inner), store.inner.shutdown.clone());
        }
        Ok(store)
    }

    /// `"sqlite"` or `"postgres"`.
    pub fn backend(&self) -> &'static str {
        self.inner.url.backend()
    }

    /// The database location (its `Display` hides passwords).
    pub fn url(&self) -> &DbUrl {
        &self.inner.url
    }

    /// Closes every connection. Later operations fail with an `unavailable` error.
    pub async fn close(&self) {
        // Unused reserved calls and held attempts go back for the other instances.
        self.release_all_cached().await;
        if let Err(e) = self.flush_audit().await {
            tracing::error!(error = %ErrorChain(&e), "audit entries could not be written before closing");
        } else if let Err(e) = self.checkpoint_audit().await {
            tracing::error!(error = %ErrorChain(&e), "the audit checkpoint could not be written before closing");
        }
        self.inner.shutdown.cancel();
        on_pool!(self, p => p.close().await);
    }

    pub(crate) fn listener_flag(&self) -> &AtomicBool {
        &self.inner.listener_started
    }

    pub(crate) fn mark_listener(&self, started: bool) {
        self.inner.listener_started.store(started, Ordering::SeqCst);
    }
}

/// The migrations of one backend, oldest first: (version, description, script).
macro_rules! scripts {
    ($dir:literal) => {
        [
            (
                1,
                "initial",
                include_str!(concat!($dir, "/0001_initial.sql")),
            ),
            (
                2,
                "todo_plans",
                include_str!(concat!($dir, "/0002_todo_plans.sql")),
            ),
            (
                3,
                "approvals",
                include_str!(concat!($dir, "/0003_approvals.sql")),
            ),
            (
                4,
                "output_types",
                include_str!(concat!($dir, "/0004_output_types.sql")),
            ),
            (
                5,
                "approval_revisions",
                include_str!(concat!($dir, "/0005_approval_revisions.sql")),
            ),
            (
                6,
                "audit_content",
                include_str!(concat!($dir, "/0006_audit_content.sql")),
            ),
            (
                7,
                "audit_checkpoints",
                include_str!(concat!($dir, "/0007_audit_checkpoints.sql")),
            ),
            (
                8,
                "call_origin",
                include_str!(concat!($dir, "/0008_call_origin.sql")),
            ),
            (
                9,
                "upstream",
                include_str!(concat!($dir, "/0009_upstream.sql")),
            ),
            (
                10,
                "shared_quotas",
                include_str!(concat!($dir, "/0010_shared_quotas.sql")),
            ),
            (11, "runs", include_str!(concat!($dir, "/0011_runs.sql"))),
            (
                12,
                "run_attempts_in_flight",
                include_str!(concat!($dir, "/0012_run_attempts_in_flight.sql")),
            ),
            (
                13,
                "cluster_requests",
                include_str!(concat!($dir, "/0013_cluster_requests.sql")),
            ),
            (
                14,
                "request_state_answers",
                include_str!(concat!($dir, "/0014_request_state_answers.sql")),
            ),
            (
                15,
                "run_reserved_calls",
                include_str!(concat!($dir, "/0015_run_reserved_calls.sql")),
            ),
            (
                16,
                "run_leases",
                include_str!(concat!($dir, "/0016_run_leases.sql")),
            ),
            (
                17,
                "task_questions",
                include_str!(concat!($dir, "/0017_task_questions.sql")),
            ),
        ]
    };
}

fn migrations(backend: &str) -> Vec<Migration> {
    let scripts = match backend {
        "sqlite" => scripts!("../migrations/sqlite"),
        _ => scripts!("../migrations/postgres"),
    };
    scripts
        .into_iter()
        .map(|(version, description, sql)| {
            Migration::new(
                version,
                description.into(),
                MigrationType::Simple,
                sql.into_sql_str(),
                false,
            )
        })
        .collect()
}

async fn open_sqlite(url: &DbUrl, path: &Path) -> Result<SqlitePool, StoreError> {
    let open_err = |source: sqlx::Error| StoreError::Open {
        url: url.to_string(),
        hint: "check that the path is writable",
        source,
    };
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        tokio::fs::create_dir_all(parent)
            .await
            .map_err(|e| open_err(sqlx::Error::Io(e)))?;
    }
    let options = SqliteConnectOptions::new()
        .filename(path)
        .create_if_missing(true)
        .journal_mode(SqliteJournalMode::Wal)
        .synchronous(SqliteSynchronous::Full)
        .foreign_keys(true)
        .busy_timeout(SQLITE_BUSY_TIMEOUT);
    // Switching a fresh file to WAL needs an exclusive lock that SQLite's busy timeout does not
    // wait for, so a process racing another one's first open may see SQLITE_BUSY here: retry.
    // Once the file is in WAL mode (a permanent property of the file) the pragma is a no-op.
    let mut attempts = 0;
    let pool = loop {
        match SqlitePoolOptions::new()
            .max_connections(8)
            .connect_with(options.clone())
            .await
        {
            Ok(pool) => break pool,
            Err(sqlx::Error::Database(e)) if is_busy(e.as_ref()) && attempts < 100 => {
                attempts += 1;
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(e) => return Err(open_err(e)),
        }
    };
    // sqlx's SQLite migrator takes no lock of its own; run it inside one BEGIN IMMEDIATE
    // transaction (each migration becomes a savepoint) so a second process waits for the first
    // and then finds the migrations applied.
    let migrator = Migrator::with_migrations(migrations("sqlite"));
    let mut conn = pool.acquire().await.map_err(open_err)?;
    let mut tx = conn.begin_with("BEGIN IMMEDIATE").await.map_err(open_err)?;
    // `run_direct` is what `run` calls; used directly because `run`'s `Acquire` bound makes the
    // future not `Send` for a borrowed connection (a known sqlx limitation).
    migrator
        .run_direct(None, &mut *tx, false)
        .await
        .map_err(|source| StoreError::Migrate {
            url: url.to_string(),
            source,
        })?;
    tx.commit().await.map_err(open_err)?;
    Ok(pool)
}

/// SQLITE_BUSY or one of its extended codes.
fn is_busy(e: &dyn sqlx::error::DatabaseError) -> bool {
    e.code()
        .and_then(|c| c.parse::<i32>().ok())
        .is_some_and(|c| c & 0xff == 5)
}

/// A schema name we are willing to interpolate into SQL.
fn check_schema(schema: &str) -> Result<(), StoreError> {
    let ok = !schema.is_empty()
        && schema.len() <= 48
        && schema
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_lowercase() || c == '_')
        && schema
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if ok {
        Ok(())
    } else {
        Err(StoreError::Invalid(format!(
            "Invalid PostgreSQL schema name {schema:?}: use lower-case letters, digits and `_`, starting with a letter or `_`, at most 48 characters"
        )))
    }
}

async fn open_postgres(url: &DbUrl, raw: &str, schema: Option<&str>) -> Result<PgPool, StoreError> {
    let open_err = |source: sqlx::Error| StoreError::Open {
        url: url.to_string(),
        hint: "check that the server is running, reachable and that the user may connect",
        source,
    };
    if let Some(schema) = schema {
        check_schema(schema)?;
    }
    let mut options = PgConnectOptions::from_str(raw).map_err(open_err)?;
    // One direct connection first: it fails fast with the server's own reason (the pool would
    // retry until its timeout and report only that), and it creates the schema.
    let mut conn = sqlx::PgConnection::connect_with(&options)
        .await
        .map_err(open_err)?;
    if let Some(schema) = schema {
        let created = sqlx::query(sqlx::AssertSqlSafe(format!(
            "CREATE SCHEMA IF NOT EXISTS \"{schema}\""
        )))
        .execute(&mut conn)
        .await;
        match created {
            Ok(_) => {}
            // Two instances creating the schema at once: the loser sees a duplicate.
            Err(sqlx::Error::Database(e))
                if e.is_unique_violation() || e.code().as_deref() == Some("42P06") => {}
            Err(e) => return Err(open_err(e)),
        }
        options = options.options([("search_path", schema)]);
    }
    let _ = conn.close().await;
    let pool = PgPoolOptions::new()
        .max_connections(10)
        .acquire_timeout(Duration::from_secs(10))
        .connect_with(options)
        .await
        .map_err(open_err)?;
    // sqlx's PostgreSQL migrator holds pg_advisory_lock (keyed by the database name) while it
    // lists and applies migrations, so concurrent starts apply each migration once.
    Migrator::with_migrations(migrations("postgres"))
        .run(&pool)
        .await
        .map_err(|source| StoreError::Migrate {
            url: url.to_string(),
            source,
        })?;
    Ok(pool)
}

/// Timestamps are stored as RFC 3339 UTC text with microseconds: sortable and identical on both
/// backends (and in hashes).
///
/// Written by hand for the years 0–9999: every audit entry formats two timestamps, and chrono's
/// formatter (through `fmt`) cost several times more instructions. Other years and leap seconds
/// take chrono's path; `ts_matches_chrono` checks both give the same text.
pub(crate) fn ts(at: DateTime<Utc>) -> String {
    use chrono::{Datelike, Timelike};
    let year = at.year();
    let nanos = at.nanosecond();
    let (Ok(year @ 0..=9999), 0..=999_999_999) = (u32::try_from(year), nanos) else {
        return at.to_rfc3339_opts(SecondsFormat::Micros, true);
    };
    fn digits(out: &mut String, value: u32, width: u32) {
        for place in (0..width).rev() {
            let digit = value / 10u32.pow(place) % 10;
            out.push(char::from_digit(digit, 10).unwrap_or('0'));
        }
    }
    let mut out = String::with_capacity(27);
    digits(&mut out, year, 4);
    out.push('-');
    digits(&mut out, at.month(), 2);
    out.push('-');
    digits(&mut out, at.day(), 2);
    out.push('T');
    digits(&mut out, at.hour(), 2);
    out.push(':');
    digits(&mut out, at.minute(), 2);
    out.push(':');
    digits(&mut out, at.second(), 2);
    out.push('.');
    digits(&mut out, nanos / 1_000, 6);
    out.push('Z');
    out
}

pub(crate) fn parse_ts(raw: &str) -> Result<DateTime<Utc>, StoreError> {
    DateTime::parse_from_rfc3339(raw)
        .map(|t| t.with_timezone(&Utc))
        .map_err(|e| StoreError::Corrupt(format!("bad timestamp {raw:?}: {e}")))
}

/// Now, cut to the microseconds the store keeps.
pub(crate) fn now() -> DateTime<Utc> {
    use chrono::Timelike;
    let now = Utc::now();
    now.with_nanosecond(now.nanosecond() / 1_000 * 1_000)
        .unwrap_or(now)
}

pub(crate) fn from_json<T: serde::de::DeserializeOwned>(
    raw: &str,
    what: &str,
) -> Result<T, StoreError> {
    serde_json::from_str(raw).map_err(|e| StoreError::Corrupt(format!("{what}: {e}")))
}

#[cfg(test)]
mod tests {
    use chrono::{DateTime, SecondsFormat, TimeZone, Utc};

    use super::{now, parse_ts, ts};

    #[test]
    fn ts_matches_chrono() {
        let mut cases: Vec<DateTime<Utc>> = vec![
            Utc::now(),
            now(),
            DateTime::UNIX_EPOCH,
            DateTime::<Utc>::MIN_UTC,
            DateTime::<Utc>::MAX_UTC,
        ];
        for (y, mo, d, h, mi, s) in [
            (0, 1, 1, 0, 0, 0),
            (9, 2, 3, 4, 5, 6),
            (999, 12, 31, 23, 59, 59),
            (2026, 11, 26, 23, 52, 29),
            (9999, 12, 31, 23, 59, 59),
            (10_000, 1, 1, 0, 0, 0),
            (-1, 6, 15, 12, 30, 45),
        ] {
            if let chrono::LocalResult::Single(at) = Utc.with_ymd_and_hms(y, mo, d, h, mi, s) {
                for nanos in [0, 1, 999, 1_000, 123_456_789, 999_999_999, 1_500_000_000] {
                    if let Some(at) = chrono::Timelike::with_nanosecond(&at, nanos) {
                        cases.push(at);
                    }
                }
            }
        }
        for at in cases {
            assert_eq!(
                ts(at),
                at.to_rfc3339_opts(SecondsFormat::Micros, true),
                "{at:?}"
            );
        }
    }

    #[test]
    fn now_is_cut_to_what_ts_keeps() {
        let at = now();
        assert_eq!(parse_ts(&ts(at)).ok(), Some(at));
    }
}
