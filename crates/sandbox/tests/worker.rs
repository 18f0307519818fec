//! In-process tools that ask for isolation run in a sandboxed worker (the fixture binary
//! re-executed), so even a handler that never yields is stopped at its deadline.
#![cfg(test)]

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::config;
use serde_json::json;
use toolgate_core::{
    CallRequest, Constraints, ErrorKind, Isolation, ParamType, Parameter, PipelineBuilder,
    Registry, ToolBuilder,
};
use toolgate_sandbox::{Runner, SandboxExecutor};

fn isolated(name: &str, description: &str, isolation: Isolation) -> ToolBuilder {
    ToolBuilder::new(name, description).constraints(Constraints {
        isolation: Some(isolation),
        timeout_ms: Some(1500),
        ..Constraints::default()
    })
}

/// The same definitions as the fixture binary's worker tools; handlers here must never run.
fn registry() -> Arc<Registry> {
    let registry = Arc::new(Registry::new());
    let never = |_args, _ctx| async move { panic!("ran in the test process, not in the worker") };
    registry
        .register(Arc::new(
            isolated(
                "spin_forever",
                "Spins the CPU without ever yielding. Use in tests only.",
                Isolation::Standard,
            )
            .handler(never),
        ))
        .unwrap();
    registry
        .register(Arc::new(
            isolated(
                "read_path",
                "Reads a file and returns its text. Use in tests only.",
                Isolation::Strict,
            )
            .param(
                Parameter::new("path", ParamType::String)
                    .description("File")
                    .required(),
            )
            .handler(never),
        ))
        .unwrap();
    registry
        .register(Arc::new(
            isolated(
                "pid_in_sandbox",
                "Returns the worker's process id. Use in tests only.",
                Isolation::Restricted,
            )
            .handler(never),
        ))
        .unwrap();
    registry
        .register(Arc::new(
            isolated(
                "not_in_worker",
                "A tool the worker binary does not have. Use in tests only.",
                Isolation::Standard,
            )
            .handler(never),
        ))
        .unwrap();
    registry
}

fn pipeline() -> toolgate_core::Pipeline {
    PipelineBuilder::new(registry())
        .executor(Arc::new(SandboxExecutor::new(Arc::new(Runner::new(
            config(),
        )))))
        .build()
}

#[tokio::test]
async fn a_handler_that_never_yields_is_killed_at_its_deadline() {
    let p = pipeline();
    let t = Instant::now();
    let r = p.call(CallRequest::new("spin_forever", json!({}))).await;
    let took = t.elapsed();
    assert_eq!(r.error_kind(), Some(ErrorKind::Timeout), "{r:?}");
    assert!(
        took < Duration::from_millis(1500 + 700),
        "stopped after {took:?}"
    );
}

#[tokio::test]
async fn a_strict_worker_reads_only_what_landlock_allows() {
    let p = pipeline();
    let secret = tempfile::NamedTempFile::new_in("/var/tmp").unwrap();
    std::fs::write(secret.path(), "top secret").unwrap();
    let r = p
        .call(CallRequest::new(
            "read_path",
            json!({"path": secret.path()}),
        ))
        .await;
    assert_eq!(r.error_kind(), Some(ErrorKind::Execution), "{r:?}");
    assert!(r.error().unwrap().contains("Permission denied"), "{r:?}");
    // System paths stay readable.
    let r = p
        .call(CallRequest::new("read_path", json!({"path": "/etc/hosts"})))
        .await;
    assert!(r.data().is_some(), "{r:?}");
}

#[tokio::test]
async fn a_restricted_worker_runs_in_its_own_pid_namespace() {
    let p = pipeline();
    let r = p.call(CallRequest::new("pid_in_sandbox", json!({}))).await;
    assert_eq!(r.data(), Some(&json!({"pid": 1})), "{r:?}");
}

#[tokio::test]
async fn a_tool_the_worker_binary_lacks_is_unavailable_and_says_why() {
    let p = pipeline();
    let r = p.call(CallRequest::new("not_in_worker", json!({}))).await;
    assert_eq!(r.error_kind(), Some(ErrorKind::Unavailable), "{r:?}");
    assert!(
        r.error()
            .unwrap()
            .contains("not built into the worker binary"),
        "{r:?}"
    );
}
