//! The `command` run kind through the pipeline and the sandbox executor, at every level.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{Harness, command_tool};
use serde_json::json;
use toolgate_core::ErrorKind;

#[tokio::test]
async fn a_trivial_command_runs_at_every_level() {
    let h = Harness::new();
    for level in ["none", "standard", "strict", "restricted"] {
        h.add_toml(&command_tool(
            &format!("echo_{level}"),
            level,
            "/bin/echo",
            &["hello", "{arg}"],
            "",
        ));
        let r = h
            .call(&format!("echo_{level}"), json!({"arg": "world; rm -rf /"}))
            .await;
        assert_eq!(
            r.data(),
            Some(&json!("hello world; rm -rf /")),
            "{level}: {r:?}"
        );
    }
}

#[tokio::test]
async fn arguments_arrive_as_json_on_stdin_and_json_output_is_parsed() {
    let h = Harness::new();
    let def = command_tool("cat_json", "strict", "/bin/cat", &[], "")
        .replace("output = \"text\"", "output = \"json\"");
    h.add_toml(&def);
    let r = h.call("cat_json", json!({"arg": "x"})).await;
    assert_eq!(r.data(), Some(&json!({"arg": "x"})), "{r:?}");
}

#[tokio::test]
async fn a_failing_command_is_an_execution_error_with_its_exit_code_and_stderr() {
    let h = Harness::new();
    h.add_toml(&command_tool(
        "ls_missing",
        "strict",
        "/bin/ls",
        &["/definitely/not/here"],
        "",
    ));
    let r = h.call("ls_missing", json!({})).await;
    assert_eq!(r.error_kind(), Some(ErrorKind::Execution), "{r:?}");
    let e = r.error().unwrap();
    assert!(e.contains("exited with code 2"), "{e}");
    assert!(e.contains("No such file"), "{e}");
}

#[tokio::test]
async fn the_timeout_kills_the_process() {
    let h = Harness::new();
    let def = command_tool("sleepy", "standard", "/bin/sleep", &["30"], "")
        .replace("timeout_ms = 3000", "timeout_ms = 1000");
    h.add_toml(&def);
    let t = std::time::Instant::now();
    let r = h.call("sleepy", json!({})).await;
    assert_eq!(r.error_kind(), Some(ErrorKind::Timeout), "{r:?}");
    assert!(
        t.elapsed() < std::time::Duration::from_secs(3),
        "{:?}",
        t.elapsed()
    );
}
