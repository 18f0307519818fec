//! Upstream MCP servers in the runtime, against the Python fixture server built on the official
//! `mcp` SDK (`crates/gateway/tests/fixtures/py_server.py`): its tools become `py__TOOL` tools
//! called through the one pipeline (approvals, allow-lists, audit), a first sight waits for
//! review, a changed description is quarantined (withheld, calls refused `unavailable` naming
//! the change, audited) until approved, and stored pins serve the tools before the server starts.
//!
//! Stdio servers start as plain child processes in most tests here (the test's own spawner);
//! one runs the production runtime, whose sessions start through the sandbox with
//! `toolgate-runtime-fixture` as the launcher.
#![cfg(test)]

use std::path::Path;
use std::pin::Pin;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::AsyncReadExt;
use tokio::sync::{Notify, watch};
use toolgate_core::{CallRequest, ErrorKind, Outcome, Principal, ToolResult};
use toolgate_gateway::GatewayError;
use toolgate_gateway::upstream::{StdioHandle, StdioLaunch, StdioProcess, StdioSpawner};
use toolgate_runtime::servers::Manager;
use toolgate_runtime::servers::views::{ServerSource, ToolStatus, Transport};
use toolgate_runtime::{ConfigSource, OpErrorKind, Runtime, RuntimeOptions};
use toolgate_store::{AuditQuery, DbUrl};
use toolgate_test_support::mcp_fixtures;

/// Starts each stdio server as a plain child process with only its entry's environment.
struct ChildSpawner;

struct ChildHandle {
    kill: Arc<Notify>,
    exit: watch::Receiver<Option<String>>,
    tail: Arc<Mutex<String>>,
}

impl StdioHandle for ChildHandle {
    fn stderr_tail(&self) -> String {
        self.tail.lock().unwrap().clone()
    }

    fn kill(&self) {
        self.kill.notify_one();
    }

    fn exited(&self) -> Pin<Box<dyn Future<Output = String> + Send + '_>> {
        let mut exit = self.exit.clone();
        Box::pin(async move {
            let done = exit.wait_for(Option::is_some).await;
            done.map(|e| e.clone().unwrap_or_default())
                .unwrap_or_else(|_| "gone".to_owned())
        })
    }
}

impl Drop for ChildHandle {
    fn drop(&mut self) {
        self.kill.notify_one();
    }
}

impl StdioSpawner for ChildSpawner {
    fn spawn(&self, launch: &StdioLaunch) -> Result<StdioProcess, GatewayError> {
        let mut child = tokio::process::Command::new(&launch.program)
            .args(&launch.args)
            .env_clear()
            .envs(launch.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| GatewayError::Unavailable(format!("{}: {e}", launch.label)))?;
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let mut stderr = child.stderr.take().unwrap();
        let tail = Arc::new(Mutex::new(String::new()));
        let writer = Arc::clone(&tail);
        tokio::spawn(async move {
            let mut buf = [0u8; 1024];
            while let Ok(n) = stderr.read(&mut buf).await {
                if n == 0 {
                    break;
                }
                writer
                    .lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        let kill = Arc::new(Notify::new());
        let (exit_tx, exit) = watch::channel(None);
        let killer = Arc::clone(&kill);
        tokio::spawn(async move {
            let status = tokio::select! {
                status = child.wait() => status,
                () = killer.notified() => {
                    let _ = child.start_kill();
                    child.wait().await
                }
            };
            let _ = exit_tx.send(Some(format!("{status:?}")));
        });
        Ok(StdioProcess {
            stdout: Box::pin(stdout),
            stdin: Box::pin(stdin),
            handle: Box::new(ChildHandle { kill, exit, tail }),
        })
    }
}

/// The config of a runtime serving the Python fixture as server `py`: `echo` and `drifting`
/// need no confirmation, `weather` keeps the default for a tool not marked read-only (a
/// person's yes); alice may call only `py__drifting`.
fn config(python: &Path, drift: &Path) -> toolgate_runtime::Config {
    let text = format!(
        r#"
[principals.alice]
tools = ["py__drifting"]

[servers.py]
command = {python:?}
args = [{script:?}]
env = {{ PY_SERVER_DRIFT_FILE = {drift:?}, PY_SERVER_CANCEL_MARKER = {marker:?} }}

[servers.py.tools.echo]
requires_confirmation = false

[servers.py.tools.pixel]
requires_confirmation = false

[servers.py.tools.slow]
requires_confirmation = false

[servers.py.tools.drifting]
requires_confirmation = false
"#,
        python = python.display().to_string(),
        script = mcp_fixtures::py_server_script().display().to_string(),
        drift = drift.display().to_string(),
        marker = drift.with_file_name("cancelled").display().to_string(),
    );
    toml::from_str(&text).unwrap()
}

async fn open(dir: &Path, python: &Path) -> Arc<Runtime> {
    let mut parts = Runtime::prepare(options(dir, config(python, &dir.join("drift"))))
        .await
        .unwrap();
    parts.stdio = Some(Arc::new(ChildSpawner));
    Runtime::assemble(parts)
}

fn options(dir: &Path, config: toolgate_runtime::Config) -> RuntimeOptions {
    RuntimeOptions {
        config: ConfigSource::Value(Box::new(config)),
        db: Some(DbUrl::Sqlite(dir.join("toolgate.db"))),
        root: Some(dir.to_path_buf()),
        launcher: Some(env!("CARGO_BIN_EXE_toolgate-runtime-fixture").into()),
        ..RuntimeOptions::default()
    }
}

fn local() -> Principal {
    Principal::local()
}

fn manager(principal: &Principal) -> Manager<'_> {
    Manager {
        principal,
        actor: "cli:test",
    }
}

async fn call(runtime: &Runtime, tool: &str, args: Value, principal: Principal) -> ToolResult {
    runtime
        .call(CallRequest::new(tool, args).principal(principal), None)
        .await
}

/// Waits until server `py`'s tools are listed (its first sight starts it at once).
async fn listed(runtime: &Runtime) -> Vec<toolgate_runtime::servers::views::ServerToolView> {
    for _ in 0..300 {
        let tools = runtime.servers().tools(&local(), "py").unwrap().tools;
        if tools.len() >= 8 {
            return tools;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!(
        "server py never listed its tools: {:?}",
        runtime.servers().show(&local(), "py").unwrap()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_tools_are_reviewed_served_through_the_pipeline_and_quarantined_when_changed() {
    let Some(python) = mcp_fixtures::python("the runtime's upstream server tests") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let runtime = open(dir.path(), &python).await;
    let servers = runtime.servers();

    // First sight: every tool waits for review; none is listed, a call is refused with the fix.
    let tools = listed(&runtime).await;
    assert!(
        tools.iter().all(|t| t.status == ToolStatus::Pending),
        "{tools:?}"
    );
    let echo = tools.iter().find(|t| t.upstream_name == "echo").unwrap();
    assert_eq!(echo.name.as_deref(), Some("py__echo"));
    assert!(runtime.registry().get("py__echo").is_none());
    let r = call(&runtime, "py__echo", json!({"text": "hi"}), local()).await;
    assert_eq!(
        r.error_kind(),
        Some(ErrorKind::Unavailable),
        "{:?}",
        r.error()
    );
    assert!(
        r.error()
            .unwrap()
            .contains("toolgate servers approve py echo"),
        "{:?}",
        r.error()
    );
    let summary = &servers.list(&local()).servers[0];
    assert_eq!(
        (summary.name.as_str(), summary.tools_served),
        ("py", 0),
        "{summary:?}"
    );
    assert_eq!(summary.pending_changes, tools.len());

    // Approving needs the permission; then every tool is served.
    let nobody = Principal::new(toolgate_core::PrincipalId::parse("nobody").unwrap());
    let refused = servers.approve(manager(&nobody), "py", None).await;
    assert!(refused.is_err());
    let approved = servers
        .approve(manager(&local()), "py", None)
        .await
        .unwrap();
    assert_eq!(approved.approved.len(), tools.len());
    assert!(runtime.registry().get("py__echo").is_some());
    assert_eq!(servers.list(&local()).servers[0].pending_changes, 0);

    // Called through the pipeline and audited.
    let r = call(&runtime, "py__echo", json!({"text": "hi"}), local()).await;
    assert!(r.is_ok(), "{:?}", r.error());
    assert!(
        r.data().unwrap().to_string().contains("hi"),
        "{:?}",
        r.data()
    );
    runtime.store().flush_audit().await.unwrap();
    assert!(
        runtime
            .store()
            .audit_call(r.call_id)
            .await
            .unwrap()
            .is_some()
    );
    // A tool not marked read-only needs a person's yes (the durable approval gate).
    let r = call(&runtime, "py__weather", json!({"city": "Oslo"}), local()).await;
    assert_eq!(
        r.error_kind(),
        Some(ErrorKind::ConfirmationRequired),
        "{:?}",
        r.error()
    );
    // Allow-lists apply: alice sees only py__drifting.
    let alice = runtime.principal(Some("alice")).unwrap();
    let r = call(&runtime, "py__echo", json!({"text": "hi"}), alice.clone()).await;
    assert_eq!(r.error_kind(), Some(ErrorKind::NotFound), "{:?}", r.error());
    let r = call(&runtime, "py__drifting", json!({}), alice.clone()).await;
    assert!(r.is_ok(), "{:?}", r.error());

    // The rug pull: the description changes; a new listing quarantines the tool.
    std::fs::write(dir.path().join("drift"), "on").unwrap();
    servers.restart(manager(&local()), "py").await.unwrap();
    let tools = servers.tools(&local(), "py").unwrap().tools;
    let drifting = tools
        .iter()
        .find(|t| t.upstream_name == "drifting")
        .unwrap();
    assert_eq!(drifting.status, ToolStatus::Quarantined, "{drifting:?}");
    assert_eq!(drifting.changes[0].field, "description", "{drifting:?}");
    assert!(drifting.changes[0].new.as_str().unwrap().contains("id_rsa"));
    assert!(runtime.registry().get("py__drifting").is_none());
    assert!(
        runtime
            .registry()
            .withheld()
            .iter()
            .any(|(n, _)| n.as_str() == "py__drifting")
    );
    let r = call(&runtime, "py__drifting", json!({}), alice.clone()).await;
    assert_eq!(
        r.error_kind(),
        Some(ErrorKind::Unavailable),
        "{:?}",
        r.error()
    );
    let message = r.error().unwrap();
    assert!(
        message.contains("quarantined")
            && message.contains("description changed")
            && message.contains("toolgate servers approve py drifting"),
        "{message}"
    );
    // The others are untouched.
    let r = call(&runtime, "py__echo", json!({"text": "still"}), local()).await;
    assert!(r.is_ok(), "{:?}", r.error());
    // The quarantine is in the audit log.
    let audited = runtime
        .store()
        .audit(&AuditQuery {
            tool: Some("py__drifting".into()),
            ..AuditQuery::default()
        })
        .await
        .unwrap();
    assert!(
        audited.iter().any(|a| a.principal == "toolgate"
            && matches!(
                a.outcome,
                Outcome::Error {
                    kind: ErrorKind::Unavailable,
                    ..
                }
            )),
        "{audited:?}"
    );

    // Approving the new version serves it again.
    let approved = servers
        .approve(manager(&local()), "py", Some("drifting"))
        .await
        .unwrap();
    assert_eq!(approved.approved.len(), 1);
    let r = call(&runtime, "py__drifting", json!({}), alice).await;
    assert!(r.is_ok(), "{:?}", r.error());

    runtime.drain(Duration::from_secs(1)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stored_pins_serve_tools_before_the_server_starts_and_a_change_meanwhile_is_caught() {
    let Some(python) = mcp_fixtures::python("the runtime's upstream server tests") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    {
        let runtime = open(dir.path(), &python).await;
        listed(&runtime).await;
        runtime
            .servers()
            .approve(manager(&local()), "py", None)
            .await
            .unwrap();
        runtime.drain(Duration::from_secs(1)).await;
    }

    // Reopened: the approved tools are there at once, the server not started.
    let runtime = open(dir.path(), &python).await;
    assert!(runtime.servers().tools(&local(), "py").unwrap().tools.len() >= 8);
    assert!(runtime.registry().get("py__echo").is_some());
    let summary = runtime.servers().summary(&local(), "py").unwrap();
    assert_eq!(summary.state.state, "stopped", "{summary:?}");
    // The first call starts it.
    let r = call(&runtime, "py__echo", json!({"text": "lazy"}), local()).await;
    assert!(r.is_ok(), "{:?}", r.error());
    runtime.drain(Duration::from_secs(1)).await;

    // Changed while toolgate was down: the first call lists first and is refused.
    std::fs::write(dir.path().join("drift"), "on").unwrap();
    let runtime = open(dir.path(), &python).await;
    assert!(runtime.registry().get("py__drifting").is_some());
    let r = call(&runtime, "py__drifting", json!({}), local()).await;
    assert_eq!(
        r.error_kind(),
        Some(ErrorKind::Unavailable),
        "{:?}",
        r.error()
    );
    assert!(
        r.error().unwrap().contains("quarantined"),
        "{:?}",
        r.error()
    );
    assert!(runtime.registry().get("py__drifting").is_none());
    runtime.drain(Duration::from_secs(1)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn servers_are_added_approved_up_front_shown_without_secrets_removed_and_imported() {
    let Some(python) = mcp_fixtures::python("the runtime's upstream server tests") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let runtime = open(dir.path(), &python).await;
    let servers = runtime.servers();
    let script = mcp_fixtures::py_server_script().display().to_string();
    let entry = json!({
        "command": python.display().to_string(),
        "args": [script],
        "env": { "API_TOKEN": "literal-secret", "HOME_TOKEN": "${env:HOME}" },
        "tools": { "echo": { "requires_confirmation": false } },
    });

    // Added with --approve: its first sight is approved up front, callable at once.
    let added = servers
        .add(manager(&local()), "extra", entry.clone(), true)
        .await
        .unwrap();
    assert_eq!(added.summary.source, ServerSource::Store);
    assert!(
        added.tools.iter().all(|t| t.status == ToolStatus::Approved) && added.tools.len() >= 8,
        "{added:?}"
    );
    assert_eq!(added.entry["env"]["API_TOKEN"], "[REDACTED]");
    assert_eq!(added.entry["env"]["HOME_TOKEN"], "${env:HOME}");
    let r = call(&runtime, "extra__echo", json!({"text": "added"}), local()).await;
    assert!(r.is_ok(), "{:?}", r.error());
    // The same name again, a bad entry, no permission: refused.
    let again = servers
        .add(manager(&local()), "extra", entry.clone(), true)
        .await;
    assert_eq!(again.unwrap_err().kind(), OpErrorKind::Conflict);
    let bad = servers
        .add(
            manager(&local()),
            "bad",
            json!({"command": "python3"}),
            false,
        )
        .await;
    assert_eq!(bad.unwrap_err().kind(), OpErrorKind::BadRequest);
    let nobody = Principal::new(toolgate_core::PrincipalId::parse("nobody").unwrap());
    let denied = servers
        .add(manager(&nobody), "other", entry.clone(), true)
        .await;
    assert_eq!(denied.unwrap_err().kind(), OpErrorKind::Forbidden);

    // The config file's server cannot be removed here; a stored one can, with its tools.
    let err = servers.remove(manager(&local()), "py").await.unwrap_err();
    assert_eq!(err.kind(), OpErrorKind::Conflict);
    assert!(err.to_string().contains("config file"), "{err}");
    let removed = servers.remove(manager(&local()), "extra").await.unwrap();
    assert!(removed.tools_removed.contains(&"extra__echo".to_owned()));
    assert!(runtime.registry().get("extra__echo").is_none());
    let r = call(&runtime, "extra__echo", json!({"text": "gone"}), local()).await;
    assert_eq!(r.error_kind(), Some(ErrorKind::NotFound), "{:?}", r.error());
    assert!(runtime.store().server("extra").await.unwrap().is_none());
    assert!(runtime.store().pins("extra").await.unwrap().is_empty());
    assert!(servers.show(&local(), "extra").is_err());

    // An mcpServers file: each entry added (first sight waiting for review), the rest skipped.
    let file = json!({
        "mcpServers": {
            "imported": { "command": python.display().to_string(), "args": [mcp_fixtures::py_server_script().display().to_string()] },
            "remote-sse": { "url": "https://example.com/sse", "type": "sse" },
        }
    });
    let report = servers
        .import(manager(&local()), &file.to_string(), false)
        .await
        .unwrap();
    assert_eq!(report.added, ["imported"], "{report:?}");
    assert_eq!(report.skipped.len(), 1, "{report:?}");
    let tools = servers.tools_now(&local(), "imported").await.unwrap().tools;
    assert!(
        tools.iter().all(|t| t.status == ToolStatus::Pending) && !tools.is_empty(),
        "{tools:?}"
    );
    assert_eq!(servers.list(&local()).servers.len(), 2);
    runtime.drain(Duration::from_secs(1)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stdio_server_runs_in_the_sandbox_with_only_its_entrys_environment() {
    let Some(python) = mcp_fixtures::python("the runtime's sandboxed upstream test") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    // The production runtime as `toolgate serve` opens it: the sandbox runner's sessions (at
    // `none`: the interop venv's python lives where the sandbox's user cannot enter; the levels
    // themselves are the sandbox's tests).
    let text = format!(
        r#"
[servers.py]
command = {python:?}
args = [{script:?}]
isolation = "none"
env = {{ GIVEN = "yes" }}
[servers.py.tools.environment]
requires_confirmation = false
"#,
        python = python.display().to_string(),
        script = mcp_fixtures::py_server_script().display().to_string(),
    );
    // The test process has CARGO_MANIFEST_DIR set (cargo sets it): it must not reach the server.
    let runtime = Runtime::open(options(dir.path(), toml::from_str(&text).unwrap()))
        .await
        .unwrap();
    listed(&runtime).await;
    runtime
        .servers()
        .approve(manager(&local()), "py", Some("environment"))
        .await
        .unwrap();
    let r = call(&runtime, "py__environment", json!({}), local()).await;
    assert!(r.is_ok(), "{:?}", r.error());
    let env = r.data().unwrap().to_string();
    assert!(env.contains("GIVEN"), "{env}");
    assert!(
        !env.contains("CARGO_MANIFEST_DIR"),
        "toolgate's environment leaked: {env}"
    );
    runtime.drain(Duration::from_secs(1)).await;
    let summary = runtime.servers().summary(&local(), "py").unwrap();
    assert_eq!(summary.state.state, "stopped", "{summary:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streamable_http_server_is_reached_through_the_network_policy() {
    let Some(everything) = mcp_fixtures::everything("the runtime's HTTP upstream test") else {
        return;
    };
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let _server = tokio::process::Command::new(&everything.program)
        .arg(&everything.args[0])
        .arg("streamableHttp")
        .env_clear()
        .env("PORT", port.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    for _ in 0..200 {
        if tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_ok()
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let dir = tempfile::tempdir().unwrap();
    // The loopback host is allowed by name; the metadata address never is.
    let text = format!(
        r#"
[network]
private_hosts = ["127.0.0.1"]

[servers.every]
url = "http://127.0.0.1:{port}/mcp"
[servers.every.tools.echo]
requires_confirmation = false

[servers.meta]
url = "http://169.254.169.254/mcp"
"#
    );
    let runtime = Runtime::open(options(dir.path(), toml::from_str(&text).unwrap()))
        .await
        .unwrap();
    let servers = runtime.servers();
    let tools = servers.tools_now(&local(), "every").await.unwrap().tools;
    assert!(
        tools.iter().any(|t| t.upstream_name == "echo"),
        "{:?}",
        servers.show(&local(), "every")
    );
    servers
        .approve(manager(&local()), "every", Some("echo"))
        .await
        .unwrap();
    let r = call(
        &runtime,
        "every__echo",
        json!({"message": "over http"}),
        local(),
    )
    .await;
    assert!(r.is_ok(), "{:?}", r.error());
    assert!(
        r.data().unwrap().to_string().contains("over http"),
        "{:?}",
        r.data()
    );
    let summary = servers.summary(&local(), "every").unwrap();
    assert_eq!(summary.transport, Transport::Http);
    assert_eq!(summary.state.state, "ready", "{summary:?}");

    let meta = servers.tools_now(&local(), "meta").await.unwrap();
    assert!(meta.tools.is_empty());
    let summary = servers.summary(&local(), "meta").unwrap();
    assert_eq!(summary.state.state, "failed", "{summary:?}");
    assert!(
        summary
            .state
            .error
            .as_deref()
            .unwrap_or_default()
            .contains("169.254.169.254"),
        "{summary:?}"
    );
    runtime.drain(Duration::from_secs(1)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_made_by_another_process_reaches_a_serving_runtime() {
    let Some(python) = mcp_fixtures::python("the runtime's upstream server tests") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    // The serving runtime follows the store (as `toolgate serve` does).
    let serving = open(dir.path(), &python).await;
    serving.start_sync().await.unwrap();
    listed(&serving).await;
    assert!(serving.registry().get("py__echo").is_none());

    // `toolgate servers approve py echo` in another process: its own runtime, same database.
    let cli = open(dir.path(), &python).await;
    cli.servers()
        .approve(manager(&local()), "py", Some("echo"))
        .await
        .unwrap();
    cli.drain(Duration::from_secs(1)).await;

    let mut served = false;
    for _ in 0..100 {
        if serving.registry().get("py__echo").is_some() {
            served = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(served, "{:?}", serving.servers().tools(&local(), "py"));
    let r = call(&serving, "py__echo", json!({"text": "from afar"}), local()).await;
    assert!(r.is_ok(), "{:?}", r.error());
    // The other tools still wait.
    assert!(serving.registry().get("py__weather").is_none());
    serving.drain(Duration::from_secs(1)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn content_blocks_come_back_and_a_cancelled_call_is_cancelled_upstream() {
    let Some(python) = mcp_fixtures::python("the runtime's upstream server tests") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let runtime = open(dir.path(), &python).await;
    listed(&runtime).await;
    runtime
        .servers()
        .approve(manager(&local()), "py", None)
        .await
        .unwrap();

    // An image block reaches the envelope's content.
    let r = call(&runtime, "py__pixel", json!({}), local()).await;
    assert!(r.is_ok(), "{:?}", r.error());
    let content = serde_json::to_value(&r.content).unwrap();
    assert_eq!(content[0]["type"], "image", "{content}");
    assert_eq!(content[0]["mimeType"], "image/png", "{content}");

    // The caller cancels: the call ends `cancelled` and the upstream sees the cancellation.
    let cancel = toolgate_core::CancellationToken::new();
    let pending = {
        let runtime = Arc::clone(&runtime);
        let cancel = cancel.clone();
        tokio::spawn(async move {
            runtime
                .call(
                    CallRequest::new("py__slow", json!({"seconds": 30})),
                    Some(cancel),
                )
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(1500)).await;
    cancel.cancel();
    let r = tokio::time::timeout(Duration::from_secs(10), pending)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        r.error_kind(),
        Some(ErrorKind::Cancelled),
        "{:?}",
        r.error()
    );
    let marker = dir.path().join("cancelled");
    let mut seen = false;
    for _ in 0..50 {
        if marker.exists() {
            seen = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(seen, "the upstream never saw the cancellation");
    runtime.drain(Duration::from_secs(1)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_name_held_by_another_tool_is_refused_and_that_tool_left_alone() {
    let Some(python) = mcp_fixtures::python("the runtime's upstream server tests") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let runtime = open(dir.path(), &python).await;
    runtime
        .registry()
        .register_definition(toolgate_core::ToolDefinition::new(
            "clash__echo",
            "A custom tool that was here first. Use it in tests only.",
        ))
        .unwrap();
    let entry = json!({
        "command": python.display().to_string(),
        "args": [mcp_fixtures::py_server_script().display().to_string()],
    });
    let added = runtime
        .servers()
        .add(manager(&local()), "clash", entry, true)
        .await
        .unwrap();
    let echo = added
        .tools
        .iter()
        .find(|t| t.upstream_name == "echo")
        .unwrap();
    assert_eq!(echo.status, ToolStatus::Refused, "{echo:?}");
    assert!(
        echo.reason.as_deref().unwrap().contains("clash__echo"),
        "{echo:?}"
    );
    // The custom tool is untouched; the server's other tools are served.
    let custom = runtime.registry().get("clash__echo").unwrap();
    assert!(custom.spec().description().contains("was here first"));
    assert!(runtime.registry().get("clash__weather").is_some());
    runtime.drain(Duration::from_secs(1)).await;
}
