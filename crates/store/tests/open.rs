//! Opening the store: concurrent first opens (threads and processes), error messages.
#![cfg(test)]

mod common;

use std::process::Command;

use toolgate_store::{DbUrl, Store, StoreErrorKind, StoreOptions};

const CHILD_ENV: &str = "TOOLGATE_STORE_TEST_OPEN";

/// Not a test on its own: when re-run as a child process with `TOOLGATE_STORE_TEST_OPEN` set to
/// `url|schema`, it opens that store (running migrations) and exits.
#[tokio::test]
async fn child_opens_store() {
    let Ok(target) = std::env::var(CHILD_ENV) else {
        return;
    };
    let (url, schema) = target.split_once('|').unwrap();
    let options = StoreOptions {
        pg_schema: (!schema.is_empty()).then(|| schema.to_owned()),
        ..StoreOptions::default()
    };
    let store = Store::open(&DbUrl::parse(url).unwrap(), &options)
        .await
        .unwrap();
    store.close().await;
}

async fn targets() -> Vec<(DbUrl, StoreOptions, Option<tempfile::TempDir>)> {
    let (url, options, dir) = common::sqlite_target();
    let mut out = vec![(url, options, Some(dir))];
    if common::postgres_available().await {
        let (url, options) = common::postgres_target();
        out.push((url, options, None));
    }
    out
}

/// How many migrations each backend has (each must be applied exactly once).
const MIGRATIONS: i64 = 17;

async fn migrations_applied(url: &DbUrl, options: &StoreOptions) -> i64 {
    let store = Store::open(url, options).await.unwrap();
    store.close().await;
    let db = common::TestDb {
        store,
        url: url.clone(),
        options: options.clone(),
        dir: None,
    };
    db.count("SELECT COUNT(*) FROM _sqlx_migrations").await
}

async fn cleanup(url: &DbUrl, options: &StoreOptions) {
    if let (DbUrl::Postgres(raw), Some(schema)) = (url, &options.pg_schema) {
        common::drop_schema(raw, schema).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_first_opens_in_one_process_all_succeed() {
    for (url, options, _dir) in targets().await {
        eprintln!("-- on {}", url.backend());
        let mut tasks = Vec::new();
        for _ in 0..6 {
            let (url, options) = (url.clone(), options.clone());
            tasks.push(tokio::spawn(
                async move { Store::open(&url, &options).await },
            ));
        }
        for t in tasks {
            let store = t.await.unwrap().unwrap();
            store.close().await;
        }
        assert_eq!(migrations_applied(&url, &options).await, MIGRATIONS);
        cleanup(&url, &options).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_first_opens_by_processes_all_succeed() {
    if std::env::var(CHILD_ENV).is_ok() {
        return;
    }
    let exe = std::env::current_exe().unwrap();
    for (url, options, _dir) in targets().await {
        eprintln!("-- on {}", url.backend());
        let raw = match &url {
            DbUrl::Sqlite(p) => format!("sqlite:{}", p.display()),
            DbUrl::Postgres(u) => u.clone(),
        };
        let target = format!("{raw}|{}", options.pg_schema.clone().unwrap_or_default());
        let mut running = Vec::new();
        for _ in 0..4 {
            running.push(
                Command::new(&exe)
                    .args(["--exact", "child_opens_store", "--test-threads=1"])
                    .env(CHILD_ENV, &target)
                    .stdout(std::process::Stdio::piped())
                    .stderr(std::process::Stdio::piped())
                    .spawn()
                    .unwrap(),
            );
        }
        for child in running {
            let out = child.wait_with_output().unwrap();
            assert!(
                out.status.success(),
                "a concurrent open failed: {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        assert_eq!(migrations_applied(&url, &options).await, MIGRATIONS);
        cleanup(&url, &options).await;
    }
}

#[tokio::test]
async fn sqlite_runs_in_wal_mode_and_creates_parent_directories() {
    use sqlx::Connection;
    let (url, options, _dir) = common::sqlite_target();
    let DbUrl::Sqlite(path) = &url else {
        unreachable!()
    };
    assert!(!path.parent().unwrap().exists());
    let store = Store::open(&url, &options).await.unwrap();
    assert_eq!(store.backend(), "sqlite");
    assert!(path.exists());
    store.close().await;
    // the journal mode is a property of the file
    let opts = sqlx::sqlite::SqliteConnectOptions::new().filename(path);
    let mut conn = sqlx::SqliteConnection::connect_with(&opts).await.unwrap();
    let mode: String = sqlx::query_scalar("PRAGMA journal_mode")
        .fetch_one(&mut conn)
        .await
        .unwrap();
    assert_eq!(mode, "wal");
    conn.close().await.unwrap();
}

#[tokio::test]
async fn unwritable_sqlite_path_names_the_path_and_the_fix() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("plain_file");
    std::fs::write(&file, b"x").unwrap();
    let url = DbUrl::Sqlite(file.join("sub/toolgate.db"));
    let err = Store::open(&url, &StoreOptions::default())
        .await
        .unwrap_err();
    assert_eq!(err.kind(), StoreErrorKind::Unavailable);
    let msg = err.to_string();
    assert!(
        msg.starts_with(&format!(
            "Cannot open database sqlite:{}",
            file.join("sub/toolgate.db").display()
        )),
        "{msg}"
    );
    assert!(msg.contains("writable"), "{msg}");
}

#[tokio::test]
async fn postgres_errors_never_show_the_password() {
    let url = DbUrl::parse("postgres://someone:hunter2secret@127.0.0.1:1/nodb").unwrap();
    let err = Store::open(&url, &StoreOptions::default())
        .await
        .unwrap_err();
    assert_eq!(err.kind(), StoreErrorKind::Unavailable);
    let msg = format!("{err} {err:?}");
    assert!(!msg.contains("hunter2secret"), "{msg}");
    assert!(err.to_string().contains("someone:***@127.0.0.1:1"), "{err}");
}

#[tokio::test]
async fn bad_schema_names_are_refused() {
    let err = Store::open(
        &DbUrl::parse(&toolgate_test_support::pg::url()).unwrap(),
        &StoreOptions {
            pg_schema: Some("x\"; DROP TABLE y; --".into()),
            ..StoreOptions::default()
        },
    )
    .await
    .unwrap_err();
    assert_eq!(err.kind(), StoreErrorKind::Invalid);
}
