//! Upstream MCP server tools through toolgate's own front-ends, REST and MCP, on the production
//! runtime (the harness's gateway, the sandbox runner's sessions): the Python fixture server on
//! the official `mcp` SDK (`crates/gateway/tests/fixtures/py_server.py`) as server `py`.
//!
//! - a tool needing a person's yes makes a durable approval and runs once approved;
//! - a principal's allow-list hides and refuses upstream tools; a `[rate_limit]` applies;
//! - the audit log has each call; the caller's bearer token never reaches the upstream (its
//!   environment has only the entry's variables); upstream progress reaches an MCP client;
//! - an upstream that dies mid-call: the call ends `unavailable`, the next one works;
//! - `notifications/cancelled` from an MCP client reaches the upstream;
//! - an upstream's list change reaches MCP clients as `notifications/tools/list_changed`, a
//!   changed description is quarantined (gone from `tools/list`, calls refused) until approved.
//!
//! Skipped without the Python fixture (a failure with `CI=true`).
#![cfg(test)]

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use axum::body::Body;
use axum::http::{Method, Request, StatusCode};
use common::mcp::{self, message};
use common::{Harness, Reply, principal};
use http_body_util::BodyExt;
use serde_json::{Value, json};
use toolgate_core::{Quota, RateLimit};
use toolgate_server::GatewayOptions;
use toolgate_store::AuditQuery;
use toolgate_test_support::mcp_fixtures;

const ADMIN: &str = "admin-secret-token-1234";
const ALICE: &str = "alice-secret-token-5678";

/// Files the fixture reads and writes (outside the harness's directory).
struct Marks {
    dir: tempfile::TempDir,
}

impl Marks {
    fn drift(&self) -> PathBuf {
        self.dir.path().join("drift")
    }
    fn cancelled(&self) -> PathBuf {
        self.dir.path().join("cancelled")
    }
}

/// The config: server `py` at `none` (the sandbox levels are the runtime's tests) with the
/// fixture's files and one variable of its own; `weather` keeps the default (a person's yes).
fn config(python: &Path, marks: &Marks) -> toolgate_runtime::Config {
    let mut tools = serde_json::Map::new();
    for tool in [
        "echo",
        "environment",
        "slow",
        "exit",
        "drifting",
        "notify_tools_changed",
        "count",
    ] {
        tools.insert(tool.into(), json!({ "requires_confirmation": false }));
    }
    let config = json!({ "servers": { "py": {
        "command": python.display().to_string(),
        "args": [mcp_fixtures::py_server_script().display().to_string()],
        "isolation": "none",
        "env": {
            "PY_SERVER_DRIFT_FILE": marks.drift().display().to_string(),
            "PY_SERVER_CANCEL_MARKER": marks.cancelled().display().to_string(),
            "ENTRY_ONLY": "from-the-entry",
        },
        "tools": tools,
    }}});
    serde_json::from_value(config).unwrap()
}

/// A gateway serving `py`, every first-sight tool approved; admin may do anything, alice may
/// call only `py__echo`.
async fn gateway(rate: Option<RateLimit>) -> Option<(Harness, Marks)> {
    let python = mcp_fixtures::python("the upstream servers' REST and MCP tests")?;
    let marks = Marks {
        dir: tempfile::tempdir().unwrap(),
    };
    let options = GatewayOptions {
        principals: vec![
            principal("admin", &["*"], None, ADMIN, Quota::default()),
            principal(
                "alice",
                &["tool.*"],
                Some(&["py__echo"]),
                ALICE,
                Quota::default(),
            ),
        ],
        rate_limit: rate,
        ..GatewayOptions::default()
    };
    let h = Harness::with_config(options, config(&python, &marks)).await;
    listed(&h).await;
    let r = h
        .send(
            Method::POST,
            "/v1/servers/py/approve",
            Some(ADMIN),
            Some(json!({"all": true})),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    Some((h, marks))
}

/// Waits until `py` has listed its tools (its first sight starts it).
async fn listed(h: &Harness) -> Value {
    for _ in 0..300 {
        let r = h
            .send(Method::GET, "/v1/servers/py/tools", Some(ADMIN), None)
            .await;
        if r.json["tools"].as_array().is_some_and(|t| t.len() >= 8) {
            return r.json;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let r = h
        .send(Method::GET, "/v1/servers/py", Some(ADMIN), None)
        .await;
    panic!("server py never listed its tools: {}", r.text);
}

async fn rest_call(h: &Harness, token: &str, tool: &str, args: Value) -> Reply {
    h.send(
        Method::POST,
        &format!("/v1/tools/{tool}/call"),
        Some(token),
        Some(json!({ "arguments": args })),
    )
    .await
}

/// An MCP session over Streamable HTTP through the router.
struct Mcp<'a> {
    h: &'a Harness,
    token: &'a str,
    id: String,
    next: u64,
}

impl<'a> Mcp<'a> {
    async fn open(h: &'a Harness, token: &'a str) -> Mcp<'a> {
        let id = mcp::open(h, token, "servers-upstream-test").await;
        Mcp {
            h,
            token,
            id,
            next: 1,
        }
    }

    async fn post(&mut self, body: Value) -> Reply {
        mcp::rpc(self.h, self.token, Some(&self.id), body).await
    }

    async fn request(&mut self, method: &str, params: Value) -> Value {
        self.next += 1;
        let id = self.next;
        let reply = self
            .post(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
        message(&reply)
    }

    async fn tool_names(&mut self) -> Vec<String> {
        let listed = self.request("tools/list", json!({})).await;
        listed["result"]["tools"]
            .as_array()
            .unwrap_or_else(|| panic!("{listed}"))
            .iter()
            .filter_map(|t| t["name"].as_str().map(str::to_owned))
            .collect()
    }

    async fn call(&mut self, tool: &str, args: Value) -> Value {
        let reply = self
            .request("tools/call", json!({"name": tool, "arguments": args}))
            .await;
        assert!(reply["result"].is_object(), "tools/call {tool}: {reply}");
        reply["result"].clone()
    }

    /// The session's standalone stream (GET /mcp), where server notifications arrive.
    async fn listen(&self) -> Body {
        let req = Request::builder()
            .method(Method::GET)
            .uri("/mcp")
            .header("host", "localhost:7878")
            .header("authorization", format!("Bearer {}", self.token))
            .header("accept", "text/event-stream")
            .header("mcp-session-id", &self.id)
            .header("mcp-protocol-version", "2025-11-25")
            .body(Body::empty())
            .unwrap();
        let resp = tower::ServiceExt::oneshot(self.h.router.clone(), req)
            .await
            .unwrap();
        assert_eq!(resp.status(), StatusCode::OK);
        resp.into_body()
    }
}

/// Reads `body` until `needle` shows (or fails after `seconds`); what was read.
async fn read_until(body: &mut Body, needle: &str, seconds: u64) -> String {
    let mut seen = String::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(seconds);
    while !seen.contains(needle) {
        let frame = tokio::time::timeout_at(deadline, body.frame()).await;
        let Ok(Some(Ok(frame))) = frame else {
            panic!("{needle} never arrived; read: {seen}");
        };
        if let Ok(data) = frame.into_data() {
            seen.push_str(&String::from_utf8_lossy(&data));
        }
    }
    seen
}

fn meta(result: &Value) -> &Value {
    &result["_meta"]["dev.toolgate/result"]
}

async fn wait_for(path: &Path) -> bool {
    for _ in 0..100 {
        if path.exists() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    false
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approvals_allow_lists_and_the_audit_apply_to_upstream_tools_over_rest_and_mcp() {
    let Some((h, _marks)) = gateway(None).await else {
        return;
    };

    // REST: a tool needing confirmation waits as a durable approval, runs once approved.
    let r = rest_call(&h, ADMIN, "py__weather", json!({"city": "Oslo"})).await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.text);
    assert_eq!(r.json["result"]["errorKind"], "confirmation_required");
    let id = r.json["approval"]["id"].as_str().unwrap().to_owned();
    let r = h
        .send(
            Method::POST,
            &format!("/v1/approvals/{id}/approve"),
            Some(ADMIN),
            Some(json!({"reason": "fine"})),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    let mut done = Value::Null;
    for _ in 0..100 {
        let r = h
            .send(
                Method::GET,
                &format!("/v1/approvals/{id}"),
                Some(ADMIN),
                None,
            )
            .await;
        if r.json["status"] == "executed" {
            done = r.json;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(done.to_string().contains("sunny"), "{done}");

    // MCP: the same gate (this client cannot elicit): a durable approval named in the result.
    let mut mcp = Mcp::open(&h, ADMIN).await;
    let result = mcp.call("py__weather", json!({"city": "Bergen"})).await;
    assert_eq!(result["isError"], true, "{result}");
    assert_eq!(
        meta(&result)["errorKind"],
        "confirmation_required",
        "{result}"
    );
    let id = meta(&result)["approvalId"].as_str().unwrap().to_owned();
    let r = h
        .send(
            Method::POST,
            &format!("/v1/approvals/{id}/approve"),
            Some(ADMIN),
            None,
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    let mut executed = false;
    for _ in 0..100 {
        let r = h
            .send(
                Method::GET,
                &format!("/v1/approvals/{id}"),
                Some(ADMIN),
                None,
            )
            .await;
        if r.json["status"] == "executed" {
            executed = r.json.to_string().contains("Bergen");
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(executed, "the approved MCP call did not run");

    // Allow-lists: alice sees and calls only py__echo, over both.
    let mut alice = Mcp::open(&h, ALICE).await;
    let names = alice.tool_names().await;
    assert_eq!(names, ["py__echo"], "{names:?}");
    let refused = alice
        .request(
            "tools/call",
            json!({"name": "py__environment", "arguments": {}}),
        )
        .await;
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("Unknown tool"),
        "{refused}"
    );
    let r = rest_call(&h, ALICE, "py__environment", json!({})).await;
    assert_eq!(r.json["errorKind"], "not_found", "{}", r.text);
    let r = h.send(Method::GET, "/v1/tools", Some(ALICE), None).await;
    assert!(!r.text.contains("py__environment"), "{}", r.text);
    let result = alice.call("py__echo", json!({"text": "allowed"})).await;
    assert_eq!(result["isError"], false, "{result}");
    let r = rest_call(&h, ALICE, "py__echo", json!({"text": "allowed too"})).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    let rest_call_id = r.json["callId"].as_str().unwrap().to_owned();

    // The audit has the calls, each with its principal.
    h.gw.store().flush_audit().await.unwrap();
    let audited =
        h.gw.store()
            .audit(&AuditQuery {
                tool: Some("py__echo".into()),
                ..AuditQuery::default()
            })
            .await
            .unwrap();
    assert!(
        audited.iter().filter(|a| a.principal == "alice").count() >= 2,
        "{audited:?}"
    );
    assert!(
        audited
            .iter()
            .any(|a| a.call_id.to_string() == rest_call_id),
        "{audited:?}"
    );
    h.gw.runtime().drain(Duration::from_secs(1)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_client_token_reaches_the_upstream_and_the_rate_limit_applies() {
    let Some((h, _marks)) = gateway(Some(RateLimit::new(3, 0.001).unwrap())).await else {
        return;
    };
    // The upstream's environment over REST and over MCP: the entry's variable, no token.
    let r = rest_call(&h, ADMIN, "py__environment", json!({})).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    let mut mcp = Mcp::open(&h, ADMIN).await;
    let result = mcp.call("py__environment", json!({})).await;
    assert_eq!(result["isError"], false, "{result}");
    for seen in [r.text.clone(), result.to_string()] {
        assert!(seen.contains("from-the-entry"), "{seen}");
        assert!(
            !seen.contains(ADMIN),
            "the caller's token reached the upstream: {seen}"
        );
        assert!(!seen.to_lowercase().contains("bearer"), "{seen}");
    }
    // Upstream progress reaches the MCP client, before the result, on the call's stream.
    mcp.next += 1;
    let reply = mcp
        .post(
            json!({"jsonrpc": "2.0", "id": mcp.next, "method": "tools/call",
            "params": {"name": "py__count", "arguments": {"steps": 3},
                "_meta": {"progressToken": "count-1"}}}),
        )
        .await;
    let progress = reply.text.matches("notifications/progress").count();
    assert_eq!(progress, 3, "{}", reply.text);
    assert!(reply.text.contains("count-1"), "{}", reply.text);
    assert!(
        message(&reply).to_string().contains("counted 3"),
        "{}",
        reply.text
    );
    // Nor do the arguments carry it: the echo is exactly its text.
    let result = mcp.call("py__echo", json!({"text": "plain"})).await;
    assert_eq!(
        result["structuredContent"],
        json!({"result": "plain"}),
        "{result}"
    );

    // `[rate_limit]`: 3 calls per principal and tool; py__environment has had 2 (REST, MCP).
    let r = rest_call(&h, ADMIN, "py__environment", json!({})).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    let r = rest_call(&h, ADMIN, "py__environment", json!({})).await;
    assert_eq!(r.json["errorKind"], "rate_limited", "{}", r.text);
    let result = mcp.call("py__environment", json!({})).await;
    assert_eq!(meta(&result)["errorKind"], "rate_limited", "{result}");
    // Another tool is counted apart.
    let r = rest_call(&h, ADMIN, "py__echo", json!({"text": "x"})).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    h.gw.runtime().drain(Duration::from_secs(1)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_dying_mid_call_fails_it_unavailable_and_cancellation_reaches_the_upstream() {
    let Some((h, marks)) = gateway(None).await else {
        return;
    };
    let mut mcp = Mcp::open(&h, ADMIN).await;
    // Dies mid-call: a slow call is in flight when the process exits.
    let slow = rest_call(&h, ADMIN, "py__slow", json!({"seconds": 30}));
    let exit = async {
        tokio::time::sleep(Duration::from_millis(1500)).await;
        rest_call(&h, ADMIN, "py__exit", json!({})).await
    };
    let (slow, _exit) =
        tokio::time::timeout(Duration::from_secs(20), async { tokio::join!(slow, exit) })
            .await
            .expect("the call in flight ends when its upstream dies");
    assert_eq!(slow.json["errorKind"], "unavailable", "{}", slow.text);
    // The next call works once it is back.
    let mut back = false;
    for _ in 0..60 {
        let result = mcp.call("py__echo", json!({"text": "back"})).await;
        if result["isError"] == false {
            back = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    assert!(back, "the upstream never came back");

    // MCP cancellation: notifications/cancelled for a call in flight reaches the upstream.
    let session = mcp.id.clone();
    let pending = {
        let body = json!({"jsonrpc": "2.0", "id": 777, "method": "tools/call",
            "params": {"name": "py__slow", "arguments": {"seconds": 30}}});
        mcp::rpc(&h, ADMIN, Some(&session), body)
    };
    // The marker is looked for while the call is still held (dropping it would cancel it
    // by another way).
    let cancel_then_look = async {
        tokio::time::sleep(Duration::from_millis(1500)).await;
        mcp.post(
            json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
            "params": {"requestId": 777, "reason": "the user changed their mind"}}),
        )
        .await;
        wait_for(&marks.cancelled()).await
    };
    tokio::pin!(pending);
    let seen = tokio::select! {
        seen = cancel_then_look => seen,
        _ = &mut pending => wait_for(&marks.cancelled()).await,
    };
    assert!(seen, "the upstream never saw the cancellation");
    h.gw.runtime().drain(Duration::from_secs(1)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_list_change_reaches_mcp_clients_and_a_changed_description_waits_for_approval()
{
    let Some((h, marks)) = gateway(None).await else {
        return;
    };
    let mut mcp = Mcp::open(&h, ADMIN).await;
    assert!(mcp.tool_names().await.contains(&"py__drifting".to_owned()));
    let mut stream = mcp.listen().await;
    let result = mcp.call("py__drifting", json!({})).await;
    assert_eq!(result["isError"], false, "{result}");

    // The rug pull: the description changes and the upstream says its list changed.
    std::fs::write(marks.drift(), "on").unwrap();
    let result = mcp.call("py__notify_tools_changed", json!({})).await;
    assert_eq!(result["isError"], false, "{result}");
    read_until(&mut stream, "notifications/tools/list_changed", 20).await;

    // Quarantined: gone from tools/list, a call refused `unavailable` naming the change.
    let mut gone = false;
    for _ in 0..50 {
        if !mcp.tool_names().await.contains(&"py__drifting".to_owned()) {
            gone = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(gone, "py__drifting is still listed");
    assert!(mcp.tool_names().await.contains(&"py__echo".to_owned()));
    let result = mcp.call("py__drifting", json!({})).await;
    assert_eq!(result["isError"], true, "{result}");
    assert_eq!(meta(&result)["errorKind"], "unavailable", "{result}");
    let text = result["content"][0]["text"].as_str().unwrap_or_default();
    assert!(
        text.contains("quarantined") && text.contains("description"),
        "{text}"
    );
    let r = h
        .send(Method::GET, "/v1/servers/py/tools", Some(ADMIN), None)
        .await;
    assert!(r.text.contains("quarantined"), "{}", r.text);

    // A person approves the new version: listed again (clients told), callable.
    let r = h
        .send(
            Method::POST,
            "/v1/servers/py/approve",
            Some(ADMIN),
            Some(json!({"tools": ["drifting"]})),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    read_until(&mut stream, "notifications/tools/list_changed", 20).await;
    assert!(mcp.tool_names().await.contains(&"py__drifting".to_owned()));
    let result = mcp.call("py__drifting", json!({})).await;
    assert_eq!(result["isError"], false, "{result}");
    h.gw.runtime().drain(Duration::from_secs(1)).await;
}
