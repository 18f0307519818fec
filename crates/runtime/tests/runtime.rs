//! The runtime end to end: opening it from options (config, store, built-ins, tools directory),
//! the one pipeline it builds, tracked calls and what a call that panics returns.
#![cfg(test)]

use std::sync::Arc;

use serde_json::json;
use toolgate_core::{
    ApprovalHandler, ApprovalRequest, BoxFuture, CallId, CallRequest, Decision, ErrorKind,
    ToolBuilder,
};
use toolgate_runtime::{ConfigSource, Parts, Runtime, RuntimeErrorKind, RuntimeOptions};
use toolgate_store::{DbUrl, Store, StoreOptions};

/// Options for a runtime on a fresh SQLite database in `dir`, rooted there.
fn options(dir: &tempfile::TempDir) -> RuntimeOptions {
    RuntimeOptions {
        db: Some(DbUrl::Sqlite(dir.path().join("toolgate.db"))),
        root: Some(dir.path().to_path_buf()),
        ..RuntimeOptions::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn open_registers_the_builtins_and_the_tools_directory_and_calls_are_audited() {
    let dir = tempfile::tempdir().unwrap();
    let tools = dir.path().join("tools");
    std::fs::create_dir(&tools).unwrap();
    std::fs::write(tools.join("broken.toml"), "name = \"broken\"\n").unwrap();
    std::fs::write(dir.path().join("notes.txt"), "hello").unwrap();
    let runtime = Runtime::open(RuntimeOptions {
        tools_dir: Some(tools),
        ..options(&dir)
    })
    .await
    .unwrap();
    assert!(runtime.registry().get("calculator").is_some());
    assert!(
        runtime.executor().is_some(),
        "calls run through the sandbox executor"
    );
    // The bad file is skipped and named.
    assert!(
        runtime.warnings().iter().any(|w| w.contains("broken.toml")),
        "{:?}",
        runtime.warnings()
    );
    let result = runtime
        .call(
            CallRequest::new("read_file", json!({ "path": "notes.txt" })),
            None,
        )
        .await;
    assert!(result.is_ok(), "{:?}", result.error());
    runtime.store().flush_audit().await.unwrap();
    let audited = runtime.store().audit_call(result.call_id).await.unwrap();
    assert!(audited.is_some(), "the call is in the audit log");
    runtime.drain(std::time::Duration::from_secs(1)).await;
    assert!(runtime.stopped().is_cancelled());
}

#[tokio::test]
async fn a_config_value_is_used_and_a_bad_config_file_is_a_config_error() {
    let dir = tempfile::tempdir().unwrap();
    let config: toolgate_runtime::Config =
        toml::from_str("plan = \"core\"\n[principals.alice]\ngrants = [\"tool.*\"]\n").unwrap();
    let runtime = Runtime::open(RuntimeOptions {
        config: ConfigSource::Value(Box::new(config)),
        ..options(&dir)
    })
    .await
    .unwrap();
    assert_eq!(runtime.plan().name, "core");
    assert!(runtime.principals().get("alice").is_some());
    assert!(runtime.principals().get("local").is_none());

    let path = dir.path().join("toolgate.toml");
    std::fs::write(&path, "plan = \"gold\"\n").unwrap();
    let err = Runtime::open(RuntimeOptions {
        config: ConfigSource::File(path),
        ..options(&dir)
    })
    .await
    .unwrap_err();
    assert_eq!(err.kind(), RuntimeErrorKind::Config);
    // The message names the file; its source names the setting and the fix.
    assert!(err.to_string().contains("toolgate.toml"), "{err}");
    let source = std::error::Error::source(&err).unwrap().to_string();
    assert!(
        source.contains("gold") && source.contains("enterprise"),
        "{source}"
    );
}

/// An approval handler that panics: the call's task fails.
struct Panics;

impl ApprovalHandler for Panics {
    fn decide<'a>(&'a self, _: &'a ApprovalRequest<'a>) -> BoxFuture<'a, Decision> {
        Box::pin(async { panic!("the approval handler broke") })
    }
}

/// A runtime on a fresh SQLite database in a temporary directory (kept alive by the caller)
/// serving only `tool`.
async fn runtime_with(tool: toolgate_core::FnTool) -> (tempfile::TempDir, Arc<Runtime>) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(
        &DbUrl::Sqlite(dir.path().join("t.db")),
        &StoreOptions::default(),
    )
    .await
    .unwrap();
    let registry = Arc::new(toolgate_core::Registry::new());
    registry.register_all(vec![Arc::new(tool)], false).unwrap();
    (dir, Runtime::assemble(Parts::new(store, registry).unwrap()))
}

/// When a call panics, the result still names the request's tool and call id — those its
/// audit record has — never an empty name and a fresh id.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_call_task_reports_the_calls_tool_and_id() {
    let tool = ToolBuilder::new("confirmed_write", "Needs a confirmation; for tests.")
        .effect(toolgate_core::Effect::Write)
        .requires_confirmation(true)
        .handler(|_, _| async { Ok(json!({ "written": true })) });
    let (_dir, runtime) = runtime_with(tool).await;
    let id = CallId::new();
    let result = runtime
        .call(
            CallRequest::new("confirmed_write", json!({}))
                .call_id(id)
                .approval(Arc::new(Panics)),
            None,
        )
        .await;
    assert_eq!(result.tool, "confirmed_write");
    assert_eq!(result.call_id, id);
    assert_eq!(result.error_kind(), Some(ErrorKind::Execution));
    assert!(
        result.error().unwrap_or_default().contains("please report"),
        "{:?}",
        result.error()
    );
}

/// A call runs in its caller's task; when the caller goes away mid-call (its future dropped),
/// the call is cancelled, noted as `client_disconnected`, finishes in a task of its own and
/// records its outcome, and it counts as in flight until then.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_whose_caller_goes_away_still_records_its_outcome() {
    let running = Arc::new(tokio::sync::Notify::new());
    let started = Arc::clone(&running);
    let tool = ToolBuilder::new("slow_write", "Writes after a long wait; for tests.")
        .effect(toolgate_core::Effect::Write)
        .handler(move |_, _| {
            let started = Arc::clone(&started);
            async move {
                started.notify_one();
                tokio::time::sleep(std::time::Duration::from_secs(60)).await;
                Ok(json!({ "written": true }))
            }
        });
    let (_dir, runtime) = runtime_with(tool).await;
    let id = CallId::new();
    let mut call =
        Box::pin(runtime.call(CallRequest::new("slow_write", json!({})).call_id(id), None));
    tokio::select! {
        result = &mut call => panic!("the call finished before its caller went away: {result:?}"),
        () = running.notified() => {}
    }
    assert_eq!(runtime.calls_in_flight(), 1);
    drop(call);
    tokio::time::timeout(std::time::Duration::from_secs(10), async {
        while runtime.calls_in_flight() > 0 {
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
    })
    .await
    .expect("the cancelled call finishes");
    let audited = runtime.store().audit_call(id).await.unwrap().unwrap();
    assert!(audited.started.is_some(), "{audited:?}");
    let finished = audited.finished.expect("the call's outcome is recorded");
    assert_eq!(
        finished.cancelled_by.as_deref(),
        Some("client_disconnected"),
        "{finished:?}"
    );
}
