//! Test harness: every test runs against SQLite (a temp dir) and PostgreSQL (the tests' server,
//! `toolgate_test_support::pg::url()`, a fresh schema per test). Without a reachable PostgreSQL
//! the Postgres half is skipped with a note, unless `CI=true`, where it fails.
#![cfg(test)]
#![allow(dead_code)]

use std::str::FromStr;

use sqlx::Connection;
use toolgate_core::{ToolDefinition, ToolSpec};
use toolgate_store::{DbUrl, Store, StoreOptions};
use toolgate_test_support::pg;

pub use toolgate_test_support::pg::drop_schema;

/// One database for one test.
pub struct TestDb {
    pub store: Store,
    pub url: DbUrl,
    pub options: StoreOptions,
    pub dir: Option<tempfile::TempDir>,
}

impl TestDb {
    pub fn backend(&self) -> &'static str {
        self.store.backend()
    }

    /// A second, independent instance on the same database.
    pub async fn reopen(&self) -> Store {
        Store::open(&self.url, &self.options).await.unwrap()
    }

    /// Runs raw SQL against the database, bypassing the store (for tampering).
    pub async fn exec(&self, sql: &'static str) -> u64 {
        match &self.url {
            DbUrl::Sqlite(path) => {
                let opts = sqlx::sqlite::SqliteConnectOptions::new().filename(path);
                let mut conn = sqlx::SqliteConnection::connect_with(&opts).await.unwrap();
                let n = sqlx::query(sql)
                    .execute(&mut conn)
                    .await
                    .unwrap()
                    .rows_affected();
                conn.close().await.unwrap();
                n
            }
            DbUrl::Postgres(url) => {
                let schema = self.options.pg_schema.clone().unwrap();
                let opts = sqlx::postgres::PgConnectOptions::from_str(url)
                    .unwrap()
                    .options([("search_path", schema.as_str())]);
                let mut conn = sqlx::PgConnection::connect_with(&opts).await.unwrap();
                let n = sqlx::query(sql)
                    .execute(&mut conn)
                    .await
                    .unwrap()
                    .rows_affected();
                conn.close().await.unwrap();
                n
            }
        }
    }

    /// Runs a `SELECT COUNT(*) …` against the database, bypassing the store.
    pub async fn count(&self, sql: &'static str) -> i64 {
        match &self.url {
            DbUrl::Sqlite(path) => {
                let opts = sqlx::sqlite::SqliteConnectOptions::new().filename(path);
                let mut conn = sqlx::SqliteConnection::connect_with(&opts).await.unwrap();
                let n: i64 = sqlx::query_scalar(sql).fetch_one(&mut conn).await.unwrap();
                conn.close().await.unwrap();
                n
            }
            DbUrl::Postgres(url) => {
                let schema = self.options.pg_schema.clone().unwrap();
                let opts = sqlx::postgres::PgConnectOptions::from_str(url)
                    .unwrap()
                    .options([("search_path", schema.as_str())]);
                let mut conn = sqlx::PgConnection::connect_with(&opts).await.unwrap();
                let n: i64 = sqlx::query_scalar(sql).fetch_one(&mut conn).await.unwrap();
                conn.close().await.unwrap();
                n
            }
        }
    }

    /// Closes the store and drops the Postgres schema (best effort).
    pub async fn cleanup(self) {
        self.store.close().await;
        if let (DbUrl::Postgres(url), Some(schema)) = (&self.url, &self.options.pg_schema) {
            drop_schema(url, schema).await;
        }
    }
}

/// Whether PostgreSQL answers; with `CI=true` an unreachable server fails the test.
pub async fn postgres_available() -> bool {
    pg::available("the PostgreSQL half of this test")
        .await
        .is_some()
}

/// A fresh SQLite location (not yet opened).
pub fn sqlite_target() -> (DbUrl, StoreOptions, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let url = DbUrl::Sqlite(dir.path().join("nested/dir/toolgate.db"));
    (url, StoreOptions::default(), dir)
}

/// A fresh PostgreSQL location (not yet opened).
pub fn postgres_target() -> (DbUrl, StoreOptions) {
    (
        DbUrl::parse(&pg::url()).unwrap(),
        StoreOptions {
            pg_schema: Some(pg::unique_schema("tg")),
            ..StoreOptions::default()
        },
    )
}

/// The databases this test runs against: SQLite always, PostgreSQL when reachable.
pub async fn backends() -> Vec<TestDb> {
    let mut out = Vec::new();
    let (url, options, dir) = sqlite_target();
    let store = Store::open(&url, &options).await.unwrap();
    out.push(TestDb {
        store,
        url,
        options,
        dir: Some(dir),
    });
    if postgres_available().await {
        let (url, options) = postgres_target();
        let store = Store::open(&url, &options).await.unwrap();
        out.push(TestDb {
            store,
            url,
            options,
            dir: None,
        });
    }
    out
}

/// Runs `$body` (an async fn taking `&TestDb`) once per backend.
#[macro_export]
macro_rules! on_each_backend {
    ($($name:ident => $body:path;)+) => {$(
        #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
        async fn $name() {
            for db in common::backends().await {
                eprintln!("-- {} on {}", stringify!($name), db.backend());
                $body(&db).await;
                db.cleanup().await;
            }
        }
    )+};
}

/// A valid spec named `name`.
pub fn spec(name: &str, description: &str) -> ToolSpec {
    let mut def = ToolDefinition::new(name, description);
    def.tags = vec!["test".into()];
    toolgate_core::validate(&def).unwrap()
}

pub fn spec_of(def: &ToolDefinition) -> ToolSpec {
    toolgate_core::validate(def).unwrap()
}
