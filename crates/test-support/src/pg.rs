//! The PostgreSQL that tests and benchmarks use: where it is, a schema of their own per run, and
//! what happens when it is not there.
//!
//! The server is [`DEFAULT_URL`] (the local cluster `scripts/test.sh` starts: trust
//! authentication, user `postgres`, database `test`) unless [`URL_VAR`] names another one. Every
//! test works in a fresh schema ([`unique_schema`]) and drops it afterwards, so runs in parallel
//! and runs left half-done never see each other's rows.
//!
//! A missing server skips the PostgreSQL part of a test with a note on stderr, so a developer
//! without PostgreSQL can run the suite; with `CI=true` it fails the test instead
//! ([`available`]), so CI never passes by skipping.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use sqlx::Connection;

/// The tests' PostgreSQL when [`URL_VAR`] is not set: the local cluster, database `test`.
pub const DEFAULT_URL: &str = "postgres://postgres@127.0.0.1:5432/test";

/// The environment variable that points the tests at another PostgreSQL (or, set to a closed
/// port, makes them run without one, as `scripts/test.sh --quick` does).
pub const URL_VAR: &str = "TOOLGATE_TEST_PG_URL";

/// The URL of the tests' PostgreSQL: [`URL_VAR`] when set and not empty, else [`DEFAULT_URL`].
pub fn url() -> String {
    match std::env::var(URL_VAR) {
        Ok(value) if !value.trim().is_empty() => value,
        _ => DEFAULT_URL.to_owned(),
    }
}

/// Whether a missing PostgreSQL fails the tests instead of skipping them: `CI=true`.
pub fn required() -> bool {
    std::env::var("CI").as_deref() == Ok("true")
}

/// Connects to `url` once and closes the connection again: whether PostgreSQL answers there.
///
/// # Errors
///
/// The connection's error when it does not.
pub async fn reachable(url: &str) -> Result<(), sqlx::Error> {
    let conn = sqlx::PgConnection::connect(url).await?;
    // Closing only says goodbye to a server that just answered; its failure changes nothing.
    let _ = conn.close().await;
    Ok(())
}

/// The tests' PostgreSQL URL ([`url`]) when the server answers there. When it does not, `None`
/// after a note on stderr that `what` (for example "the PostgreSQL half of this test") is
/// skipped — or, with `CI=true` ([`required`]), a panic that fails the test.
///
/// # Panics
///
/// With `CI=true`, when PostgreSQL is unreachable.
pub async fn available(what: &str) -> Option<String> {
    let url = url();
    match reachable(&url).await {
        Ok(()) => Some(url),
        Err(e) => {
            assert!(
                !required(),
                "PostgreSQL at {url} is required in CI (CI=true) but unreachable: {e}; start it \
                 (scripts/test.sh does) or point {URL_VAR} at one"
            );
            eprintln!(
                "note: skipping {what}: PostgreSQL at {url} is unreachable: {e} (start it, or \
                 point {URL_VAR} at one)"
            );
            None
        }
    }
}

static COUNTER: AtomicU32 = AtomicU32::new(0);

/// A schema name no other test, process or run uses: `prefix`, this process's id, a counter
/// and the clock's nanoseconds (`tg_4242_0_123456789` for prefix `tg`). `prefix` must be a plain
/// SQL identifier (ASCII letters, digits, `_`), so that the name needs no quoting beyond the
/// double quotes [`create_schema`] and [`drop_schema`] put around it.
///
/// # Panics
///
/// When `prefix` is empty or not a plain identifier: a mistake in the calling test.
pub fn unique_schema(prefix: &str) -> String {
    assert!(
        prefix.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
            && prefix
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_'),
        "schema prefix {prefix:?} is not a plain SQL identifier; use ASCII letters, digits and _"
    );
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!(
        "{prefix}_{}_{}_{nanos}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::SeqCst)
    )
}

/// Creates the schema `schema` (a name from [`unique_schema`]) on the PostgreSQL at `url`.
///
/// # Errors
///
/// The connection's or the statement's error.
pub async fn create_schema(url: &str, schema: &str) -> Result<(), sqlx::Error> {
    execute(url, format!("CREATE SCHEMA \"{schema}\"")).await
}

/// Drops the schema `schema` and everything in it, best effort: a test's cleanup, which must not
/// fail the test it cleans up after (a schema left behind harms no other run).
pub async fn drop_schema(url: &str, schema: &str) {
    let _ = execute(url, format!("DROP SCHEMA IF EXISTS \"{schema}\" CASCADE")).await;
}

/// `url` with `schema` as the connection's `search_path`, for a process that takes only a URL
/// (the `toolgate` binary's `TOOLGATE_DB`), so that its tables land in that schema.
pub fn with_search_path(url: &str, schema: &str) -> String {
    let separator = if url.contains('?') { '&' } else { '?' };
    format!("{url}{separator}options=-c%20search_path%3D{schema}")
}

async fn execute(url: &str, sql: String) -> Result<(), sqlx::Error> {
    let mut conn = sqlx::PgConnection::connect(url).await?;
    let result = sqlx::query(sqlx::AssertSqlSafe(sql))
        .execute(&mut conn)
        .await;
    let _ = conn.close().await;
    result.map(drop)
}
