//! The helpers themselves: the CLI runner hands the program none of the caller's `TOOLGATE_*`
//! variables (nor `RUST_LOG`) and exactly the database and folder it was given; the PostgreSQL
//! helpers make distinct schema names and URLs that select a schema.
#![cfg(test)]

use std::process::Command;

use toolgate_test_support::cli::{Toolgate, isolated};
use toolgate_test_support::pg;

/// Set in the copy of this test binary that [`the_caller_s_settings_never_reach_the_program`]
/// starts with settings of its own in the environment.
const CHILD: &str = "TOOLGATE_TEST_SUPPORT_CHILD";

/// The environment `/usr/bin/env` printed, one `NAME=value` a line.
fn env_of(mut command: Command) -> Vec<String> {
    let out = command.output().unwrap();
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect()
}

#[test]
fn the_caller_s_settings_never_reach_the_program() {
    if std::env::var_os(CHILD).is_none() {
        // This process cannot change its own environment (no unsafe code), so it starts a copy
        // of itself with settings a developer's shell might have, and the copy checks.
        let out = Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "the_caller_s_settings_never_reach_the_program",
                "--nocapture",
            ])
            .env(CHILD, "1")
            .env("TOOLGATE_DB", "sqlite:/home/someone/real.db")
            .env("TOOLGATE_CONFIG", "/home/someone/toolgate.toml")
            .env("TOOLGATE_ALLOW_PRIVATE_NETWORK", "1")
            .env("TOOLGATE_A_SETTING_ADDED_LATER", "x")
            .env("RUST_LOG", "trace")
            .env("KEPT_BY_THE_RUNNER", "yes")
            .output()
            .unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.status.success(), "{text}");
        assert!(text.contains("1 passed"), "the copy ran no test: {text}");
        return;
    }

    let env = env_of(isolated("/usr/bin/env"));
    assert!(
        !env.iter().any(|line| line.starts_with("TOOLGATE_")),
        "{env:?}"
    );
    assert!(
        !env.iter().any(|line| line.starts_with("RUST_LOG=")),
        "{env:?}"
    );
    assert!(
        env.iter().any(|line| line == "KEPT_BY_THE_RUNNER=yes"),
        "other variables are kept: {env:?}"
    );

    // The runner sets exactly the database it was given, and runs in its folder.
    let dir = tempfile::tempdir().unwrap();
    let toolgate = Toolgate::new("/usr/bin/env", dir.path());
    let db = format!(
        "TOOLGATE_DB=sqlite:{}",
        dir.path().join("toolgate.db").display()
    );
    let env = env_of(toolgate.command());
    let set: Vec<&String> = env
        .iter()
        .filter(|line| line.starts_with("TOOLGATE_"))
        .collect();
    assert_eq!(set, [&db]);
    let out = toolgate.wrapped("/bin/pwd").output().unwrap();
    assert_eq!(
        String::from_utf8(out.stdout).unwrap().trim(),
        dir.path().display().to_string()
    );
    let other = toolgate.clone().with_sqlite("state/t.db");
    assert_eq!(
        other.db(),
        format!("sqlite:{}", dir.path().join("state/t.db").display())
    );
    let env = env_of(toolgate.with_db("postgres://u@h/db").command());
    assert!(
        env.iter()
            .any(|line| line == "TOOLGATE_DB=postgres://u@h/db")
    );
}

#[test]
fn a_binary_that_cannot_start_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no-such-binary");
    let toolgate = Toolgate::new(&missing, dir.path());
    let message = match toolgate.command().output() {
        Ok(out) => panic!("started a missing binary: {out:?}"),
        Err(e) => toolgate.not_started(&e),
    };
    assert!(
        message.contains(&missing.display().to_string()) && message.contains("built"),
        "{message}"
    );
}

#[test]
fn schema_names_are_distinct_and_urls_select_them() {
    let a = pg::unique_schema("tg_x");
    let b = pg::unique_schema("tg_x");
    assert_ne!(a, b);
    assert!(a.starts_with("tg_x_"), "{a}");
    assert!(
        a.len() <= 63,
        "PostgreSQL cuts identifiers at 63 bytes: {a}"
    );
    assert_eq!(
        pg::with_search_path("postgres://p@h/test", "s1"),
        "postgres://p@h/test?options=-c%20search_path%3Ds1"
    );
    assert_eq!(
        pg::with_search_path("postgres://p@h/test?sslmode=disable", "s1"),
        "postgres://p@h/test?sslmode=disable&options=-c%20search_path%3Ds1"
    );
}

#[test]
#[should_panic(expected = "not a plain SQL identifier")]
fn a_schema_prefix_that_needs_quoting_is_refused() {
    pg::unique_schema("tg\"; DROP");
}

#[tokio::test]
async fn an_unreachable_server_is_an_error_not_a_hang() {
    // Port 1 on the loopback: nothing listens there, the connection is refused at once.
    let err = pg::reachable("postgres://postgres@127.0.0.1:1/test")
        .await
        .unwrap_err();
    assert!(!err.to_string().is_empty());
}

#[tokio::test]
async fn the_tests_postgres_is_used_when_it_answers() {
    // With CI=true an unreachable server fails here, as in every PostgreSQL test.
    let Some(url) = pg::available("this test").await else {
        return;
    };
    let schema = pg::unique_schema("tg_support");
    pg::create_schema(&url, &schema).await.unwrap();
    // Creating it twice fails: it exists.
    assert!(pg::create_schema(&url, &schema).await.is_err());
    pg::drop_schema(&url, &schema).await;
    pg::create_schema(&url, &schema).await.unwrap();
    pg::drop_schema(&url, &schema).await;
}
