//! Real MCP servers run inside toolgate's sandbox at `strict`, through the production runtime
//! (`Runtime::open`: the sandbox runner's sessions, `toolgate-runtime-fixture` as the launcher):
//! the Python fixture on the official `mcp` SDK (list, call, content, a cancellation it sees and
//! records in its one `write_paths` folder), the official everything
//! server, and the official filesystem server configured with `/` as its own allowed root but
//! given one `read_paths` folder — a file outside that folder cannot be read through toolgate
//! although the server's own check allows it (the sandbox holds when the upstream's is open).
//!
//! The fixtures must be readable by the sandbox's program user (`nobody`): the Python venv is
//! made from a system python (`scripts/mcp-test-deps.sh`); a checkout under a 0700 folder fails
//! here with that folder named.
#![cfg(test)]

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};
use toolgate_core::{CallRequest, ErrorKind, Principal, ToolResult};
use toolgate_runtime::servers::Manager;
use toolgate_runtime::servers::views::ServerToolView;
use toolgate_runtime::{ConfigSource, Runtime, RuntimeOptions};
use toolgate_store::DbUrl;
use toolgate_test_support::mcp_fixtures;

fn options(dir: &Path, text: &str) -> RuntimeOptions {
    RuntimeOptions {
        config: ConfigSource::Value(Box::new(toml::from_str(text).unwrap())),
        db: Some(DbUrl::Sqlite(dir.join("toolgate.db"))),
        root: Some(dir.to_path_buf()),
        launcher: Some(env!("CARGO_BIN_EXE_toolgate-runtime-fixture").into()),
        ..RuntimeOptions::default()
    }
}

fn manager(principal: &Principal) -> Manager<'_> {
    Manager {
        principal,
        actor: "cli:test",
    }
}

async fn call(runtime: &Runtime, tool: &str, args: Value) -> ToolResult {
    runtime
        .call(
            CallRequest::new(tool, args).principal(Principal::local()),
            None,
        )
        .await
}

/// Fails with the reason when the sandbox's user cannot read one of `paths`.
fn readable_by_the_sandbox_user(paths: &[&Path]) {
    for p in paths {
        if let Some(why) = mcp_fixtures::blocked_for_others(p) {
            panic!("the sandboxed upstream tests need their fixtures readable by `nobody`: {why}");
        }
    }
}

/// Lists `server`'s tools now (starting it in the sandbox) and approves them all; panics with
/// its state (error, stderr tail) when it serves none.
async fn listed_and_approved(runtime: &Runtime, server: &str) -> Vec<ServerToolView> {
    let local = Principal::local();
    let tools = runtime
        .servers()
        .tools_now(&local, server)
        .await
        .unwrap()
        .tools;
    assert!(
        !tools.is_empty(),
        "server {server} listed no tools in the sandbox: {:?}",
        runtime.servers().show(&local, server)
    );
    runtime
        .servers()
        .approve(manager(&local), server, None)
        .await
        .unwrap();
    tools
}

/// A folder the sandbox's user could enter by its permission bits (a tempdir is 0700).
fn open_dir(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(path).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_fixture_serves_at_strict() {
    let Some(python) = mcp_fixtures::python("the strict Python upstream test") else {
        return;
    };
    let script = mcp_fixtures::py_server_script();
    readable_by_the_sandbox_user(&[&python, &script]);
    let dir = tempfile::tempdir().unwrap();
    // The one folder it may write (its cancel marker goes there); writable by the sandbox's
    // user by its permission bits too.
    let marks = dir.path().join("marks");
    open_dir(dir.path());
    open_dir(&marks);
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&marks, std::fs::Permissions::from_mode(0o777)).unwrap();
    }
    let marker = marks.join("cancelled");
    let text = format!(
        r#"
[servers.py]
command = {python:?}
args = [{script:?}]
isolation = "strict"
env = {{ GIVEN = "yes", PY_SERVER_CANCEL_MARKER = {marker:?} }}
[servers.py.sandbox]
write_paths = [{marks:?}]
[servers.py.defaults]
requires_confirmation = false
"#,
        python = python.display().to_string(),
        script = script.display().to_string(),
        marker = marker.display().to_string(),
        marks = marks.display().to_string(),
    );
    let runtime = Runtime::open(options(dir.path(), &text)).await.unwrap();
    let tools = listed_and_approved(&runtime, "py").await;
    assert!(tools.len() >= 8, "{tools:?}");

    let r = call(&runtime, "py__echo", json!({"text": "from strict"})).await;
    assert!(r.is_ok(), "{:?}", r.error());
    assert!(
        r.data().unwrap().to_string().contains("from strict"),
        "{:?}",
        r.data()
    );
    // Content: an image block, structured output.
    let r = call(&runtime, "py__pixel", json!({})).await;
    assert!(r.is_ok(), "{:?}", r.error());
    let content = serde_json::to_value(&r.content).unwrap();
    assert_eq!(content[0]["type"], "image", "{content}");
    assert_eq!(content[0]["mimeType"], "image/png", "{content}");
    let r = call(&runtime, "py__weather", json!({"city": "Oslo"})).await;
    assert!(r.is_ok(), "{:?}", r.error());
    assert!(
        r.data().unwrap().to_string().contains("Oslo"),
        "{:?}",
        r.data()
    );
    // Its environment: the entry's variable and the sandbox's private home, nothing of ours.
    let r = call(&runtime, "py__environment", json!({})).await;
    assert!(r.is_ok(), "{:?}", r.error());
    let env = r.data().unwrap().to_string();
    assert!(env.contains("GIVEN"), "{env}");
    assert!(
        !env.contains("CARGO_MANIFEST_DIR"),
        "toolgate's environment leaked: {env}"
    );
    assert!(!env.contains("\"HOME\":\"/root"), "{env}");
    // An upstream isError is an execution error with its text.
    let r = call(&runtime, "py__fail", json!({"message": "nope at strict"})).await;
    assert_eq!(
        r.error_kind(),
        Some(ErrorKind::Execution),
        "{:?}",
        r.error()
    );
    assert!(
        r.error().unwrap().contains("nope at strict"),
        "{:?}",
        r.error()
    );

    // Cancelled by its caller: the sandboxed upstream sees it (and writes its marker in the
    // folder it may write).
    let cancel = toolgate_core::CancellationToken::new();
    let pending = runtime.call(
        CallRequest::new("py__slow", json!({"seconds": 30})).principal(Principal::local()),
        Some(cancel.clone()),
    );
    let cancelling = async {
        tokio::time::sleep(Duration::from_millis(1500)).await;
        cancel.cancel();
    };
    let (r, ()) = tokio::time::timeout(Duration::from_secs(10), async {
        tokio::join!(pending, cancelling)
    })
    .await
    .unwrap();
    assert_eq!(
        r.error_kind(),
        Some(ErrorKind::Cancelled),
        "{:?}",
        r.error()
    );
    let mut seen = false;
    for _ in 0..50 {
        if marker.exists() {
            seen = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        seen,
        "the sandboxed upstream never saw the cancellation: {:?}",
        runtime.servers().show(&Principal::local(), "py")
    );

    let summary = runtime
        .servers()
        .summary(&Principal::local(), "py")
        .unwrap();
    assert_eq!(summary.state.state, "ready", "{summary:?}");
    runtime.drain(Duration::from_secs(1)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_filesystem_server_with_root_slash_reads_only_its_read_paths_at_strict() {
    let dir = tempfile::tempdir().unwrap();
    open_dir(dir.path());
    let allowed = dir.path().join("allowed");
    let outside = dir.path().join("outside");
    open_dir(&allowed);
    open_dir(&outside);
    std::fs::write(allowed.join("inside.txt"), "inside the read path").unwrap();
    std::fs::write(outside.join("secret.txt"), "outside the read path").unwrap();
    // The server's own check is wide open: `/` is its allowed directory.
    let Some(files) =
        mcp_fixtures::filesystem("the strict filesystem upstream test", &[Path::new("/")])
    else {
        return;
    };
    readable_by_the_sandbox_user(&[&files.program, Path::new(&files.args[0])]);
    // Both files are readable by the sandbox's user by their permission bits: only the sandbox
    // can keep the second one out.
    readable_by_the_sandbox_user(&[&allowed.join("inside.txt"), &outside.join("secret.txt")]);
    let text = format!(
        r#"{entry}isolation = "strict"
[servers.files.sandbox]
read_paths = [{allowed:?}]
[servers.files.defaults]
requires_confirmation = false
"#,
        entry = files.toml_entry("files"),
        allowed = allowed.display().to_string(),
    );
    let runtime = Runtime::open(options(dir.path(), &text)).await.unwrap();
    let tools = listed_and_approved(&runtime, "files").await;
    assert!(
        tools.iter().any(|t| t.upstream_name == "read_text_file"),
        "{tools:?}"
    );

    let inside = allowed.join("inside.txt").display().to_string();
    let r = call(&runtime, "files__read_text_file", json!({ "path": inside })).await;
    assert!(r.is_ok(), "{:?}", r.error());
    let seen = format!("{:?} {:?}", r.data(), serde_json::to_string(&r.content));
    assert!(seen.contains("inside the read path"), "{seen}");

    let secret = outside.join("secret.txt").display().to_string();
    let r = call(&runtime, "files__read_text_file", json!({ "path": secret })).await;
    assert!(!r.is_ok(), "read outside read_paths: {:?}", r.content);
    let everything = format!(
        "{:?} {:?} {:?}",
        r.error(),
        serde_json::to_string(&r.content).unwrap(),
        r.data()
    );
    assert!(
        !everything.contains("outside the read path"),
        "the secret leaked: {everything}"
    );
    // Nor does a listing of the other folder show what is in it.
    let r = call(
        &runtime,
        "files__list_directory",
        json!({ "path": outside.display().to_string() }),
    )
    .await;
    let listed = format!("{:?} {:?}", r.error(), serde_json::to_string(&r.content));
    assert!(!listed.contains("secret.txt"), "{listed}");
    runtime.drain(Duration::from_secs(1)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_everything_server_serves_at_strict() {
    let Some(everything) = mcp_fixtures::everything("the strict everything upstream test") else {
        return;
    };
    readable_by_the_sandbox_user(&[&everything.program, Path::new(&everything.args[0])]);
    let dir = tempfile::tempdir().unwrap();
    let text = format!(
        "{}isolation = \"strict\"\n[servers.every.defaults]\nrequires_confirmation = false\n",
        everything.toml_entry("every")
    );
    let runtime = Runtime::open(options(dir.path(), &text)).await.unwrap();
    let tools = listed_and_approved(&runtime, "every").await;
    assert!(tools.iter().any(|t| t.upstream_name == "echo"), "{tools:?}");

    let r = call(&runtime, "every__echo", json!({"message": "strict hello"})).await;
    assert!(r.is_ok(), "{:?}", r.error());
    let seen = format!("{:?} {:?}", r.data(), serde_json::to_string(&r.content));
    assert!(seen.contains("strict hello"), "{seen}");
    let image = tools
        .iter()
        .find(|t| t.upstream_name == "get-tiny-image")
        .and_then(|t| t.name.clone())
        .unwrap_or_else(|| panic!("no get-tiny-image tool: {tools:?}"));
    let r = call(&runtime, &image, json!({})).await;
    assert!(r.is_ok(), "{:?}", r.error());
    let content = serde_json::to_value(&r.content).unwrap();
    assert!(
        content
            .as_array()
            .unwrap()
            .iter()
            .any(|b| b["type"] == "image"),
        "{content}"
    );
    runtime.drain(Duration::from_secs(1)).await;
}
