//! A url entry against a real Streamable HTTP server nobody here wrote: the official
//! `@modelcontextprotocol/server-everything` from npm in its `streamableHttp` mode, on
//! 127.0.0.1, reached through the network policy (the loopback host allowed by name): list,
//! call, content kept, progress over SSE, and the server's own session handling. It must be
//! installed under `$TOOLGATE_TEST_NPM_DIR/node_modules` (scripts/test.sh does); without it the
//! tests are skipped with a message, and fail in CI (`CI=true`).
#![cfg(test)]

mod common;

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use common::*;
use serde_json::json;
use toolgate_core::Content;
use toolgate_gateway::ServerEntry;
use toolgate_gateway::upstream::http::PolicyConnector;
use toolgate_gateway::upstream::{Connector, Upstream};
use toolgate_net::NetPolicy;

const PACKAGE: &str = "node_modules/@modelcontextprotocol/server-everything/dist/index.js";

/// The server's entry point, or `None` (after saying why) when the test is skipped.
fn entry_point() -> Option<PathBuf> {
    let ci = std::env::var("CI").is_ok_and(|v| v == "true");
    let workspace = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let found = std::env::var_os("TOOLGATE_TEST_NPM_DIR")
        .map(|dir| workspace.join(dir).join(PACKAGE))
        .filter(|p| p.is_file());
    if found.is_none() {
        let message = "@modelcontextprotocol/server-everything is not installed: set TOOLGATE_TEST_NPM_DIR to a directory where `npm install --prefix DIR @modelcontextprotocol/server-everything` ran (scripts/test.sh does)";
        assert!(!ci, "{message}");
        eprintln!("skipped: {message}");
    }
    found
}

fn node() -> PathBuf {
    std::env::var_os("PATH")
        .and_then(|path| {
            std::env::split_paths(&path)
                .map(|dir| dir.join("node"))
                .find(|p| p.is_file())
        })
        .expect("node is on PATH")
}

/// The everything server over Streamable HTTP (killed when dropped) and an upstream to it.
struct Remote {
    _server: tokio::process::Child,
    up: Upstream,
}

async fn everything_http() -> Option<Remote> {
    let script = entry_point()?;
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let server = tokio::process::Command::new(node())
        .arg(&script)
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
    let policy = NetPolicy {
        private_hosts: vec!["127.0.0.1".into()],
        ..NetPolicy::default()
    };
    let entry = ServerEntry {
        url: Some(format!("http://127.0.0.1:{port}/mcp")),
        ..ServerEntry::default()
    };
    let connector = Connector {
        stdio: Arc::new(TestSpawner::default()),
        http: Some(PolicyConnector::new(policy).unwrap().http_connector()),
    };
    let up = Upstream::new(server_name("everything"), entry, connector);
    Some(Remote {
        _server: server,
        up,
    })
}

#[tokio::test]
async fn lists_and_calls_the_everything_server_over_streamable_http() {
    let Some(remote) = everything_http().await else {
        return;
    };
    let tools = remote.up.tools().await.unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
    for expected in [
        "echo",
        "get-sum",
        "get-tiny-image",
        "trigger-long-running-operation",
    ] {
        assert!(
            names.contains(&expected),
            "{expected} missing from {names:?}"
        );
    }
    let p = pipeline(&remote.up);
    let r = call(&p, "echo", json!({"message": "over http"})).await;
    assert_eq!(r.data(), Some(&json!("Echo: over http")), "{:?}", r.error());
    let r = call(&p, "get-tiny-image", json!({})).await;
    assert!(
        matches!(&r.content[..], [Content::Image { mime_type, .. }, Content::Text { .. }] if mime_type == "image/png"),
        "{:?}",
        r.content
    );
    remote.up.stop().await;
}

#[tokio::test]
async fn progress_of_the_everything_server_arrives_over_sse() {
    let Some(remote) = everything_http().await else {
        return;
    };
    let p = pipeline(&remote.up);
    let progress = Arc::new(Progress::default());
    let r = p
        .call(
            request(
                "trigger-long-running-operation",
                json!({"duration": 1, "steps": 3}),
            )
            .progress(progress.clone()),
        )
        .await;
    assert_eq!(
        r.data(),
        Some(&json!(
            "Long running operation completed. Duration: 1 seconds, Steps: 3."
        )),
        "{:?}",
        r.error()
    );
    let reports = progress.0.lock().unwrap().clone();
    assert_eq!(
        reports,
        [
            (1.0, Some(3.0), None),
            (2.0, Some(3.0), None),
            (3.0, Some(3.0), None),
        ]
    );
    remote.up.stop().await;
}
