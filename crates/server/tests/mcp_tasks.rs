//! MCP Tasks (the `io.modelcontextprotocol/tasks` extension) for calls that wait for a yes: a
//! task-augmented `tools/call` to a tool that requires confirmation is answered with a task at
//! once; `tasks/get` reads `input_required` (naming the approval and who decides) until the
//! approval is decided over REST, then `completed` with the call's result; the task is bound to
//! its principal, `tasks/cancel` withdraws the pending approval or stops the running call, the
//! task expires with its approval, and it outlives the gateway that created it (another runtime
//! on the same SQLite file reads and completes it; on PostgreSQL another instance reads and
//! cancels it).
//!
//! Long calls that need no approval (a tool declaring `tasks`): the task is answered `working`
//! at once, then `completed` with the result a direct call gives, or `cancelled` by
//! `tasks/cancel` (the tool sees the cancellation); the audit log records the call and serves
//! the task after a restart; `taskSupport` is listed, `required` needs the extension and
//! `forbidden` answers directly.
#![cfg(test)]

mod common;

use std::time::Duration;

use axum::http::{Method, Request, StatusCode};
use common::{Harness, principal};
use http_body_util::BodyExt;
use serde_json::{Value, json};
use toolgate_core::Quota;
use toolgate_server::GatewayOptions;
use tower::ServiceExt;

const ALICE: &str = "alice-token";
const BOB: &str = "bob-token";
const APPROVER: &str = "approver-token";

fn options() -> GatewayOptions {
    GatewayOptions {
        principals: vec![
            principal("alice", &["tool.*"], None, ALICE, Quota::default()),
            principal("bob", &["tool.*"], None, BOB, Quota::default()),
            principal("approver", &["*"], None, APPROVER, Quota::default()),
        ],
        ..GatewayOptions::default()
    }
}

/// Sends one request to `router` (Host: localhost): the status and the JSON body, or for an
/// SSE reply the JSON-RPC message in its last `data:` line.
async fn send(
    router: &axum::Router,
    method: Method,
    uri: &str,
    token: &str,
    body: Option<Value>,
    headers: &[(&str, &str)],
) -> (StatusCode, Value) {
    let mut req = Request::builder()
        .method(method)
        .uri(uri)
        .header("host", "localhost:7878")
        .header("authorization", format!("Bearer {token}"));
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let req = match body {
        Some(b) => req
            .header("content-type", "application/json")
            .body(axum::body::Body::from(b.to_string())),
        None => req.body(axum::body::Body::empty()),
    }
    .unwrap();
    let response = router.clone().oneshot(req).await.unwrap();
    let status = response.status();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    let text = String::from_utf8_lossy(&bytes).into_owned();
    let json = serde_json::from_str(&text).unwrap_or_else(|_| {
        text.lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
            .next_back()
            .unwrap_or(Value::Null)
    });
    (status, json)
}

/// One stateless 2026-07-28 request from a client that declares the tasks extension: the
/// JSON-RPC answer.
async fn mcp(router: &axum::Router, token: &str, method: &str, mut params: Value) -> Value {
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "tasks-test", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {
            "elicitation": {},
            "extensions": {"io.modelcontextprotocol/tasks": {}}
        },
    });
    // `Mcp-Name`: the tool of a call, the task of a tasks/* request.
    let name = params["name"]
        .as_str()
        .or(params["taskId"].as_str())
        .map(str::to_owned);
    let mut headers = vec![
        ("accept", "application/json, text/event-stream"),
        ("mcp-protocol-version", "2026-07-28"),
        ("mcp-method", method),
    ];
    if let Some(name) = name.as_deref() {
        headers.push(("mcp-name", name));
    }
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    let (status, reply) = send(router, Method::POST, "/mcp", token, Some(body), &headers).await;
    assert_eq!(status, StatusCode::OK, "{method}: {reply}");
    reply
}

/// Alice asks to write `path` (a tool that requires confirmation) as a task: the task.
async fn write_as_task(router: &axum::Router, path: &str) -> Value {
    let reply = mcp(
        router,
        ALICE,
        "tools/call",
        json!({"name": "write_file", "arguments": {"path": path, "content": "hello"}}),
    )
    .await;
    reply["result"].clone()
}

async fn get(router: &axum::Router, token: &str, task: &str) -> Value {
    mcp(router, token, "tasks/get", json!({ "taskId": task })).await
}

/// Reads the task until its status is `want` (10 s at most).
async fn until(router: &axum::Router, task: &str, want: &str) -> Value {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let got = get(router, ALICE, task).await["result"].clone();
        if got["status"] == want {
            return got;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "task {task} did not become {want}: {got}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn approve(router: &axum::Router, id: &str) -> StatusCode {
    let uri = format!("/v1/approvals/{id}/approve");
    send(router, Method::POST, &uri, APPROVER, None, &[])
        .await
        .0
}

async fn approval(router: &axum::Router, id: &str) -> Value {
    let uri = format!("/v1/approvals/{id}");
    let (status, body) = send(router, Method::GET, &uri, APPROVER, None, &[]).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body
}

#[tokio::test]
async fn a_task_waits_for_its_approval_and_then_holds_the_call_result() {
    let h = Harness::with_options(options()).await;
    let router = h.gw.router();
    // The extension is announced.
    let discovered = mcp(&router, ALICE, "server/discover", json!({})).await;
    assert!(
        discovered["result"]["capabilities"]["extensions"]["io.modelcontextprotocol/tasks"]
            .is_object(),
        "{discovered}"
    );

    let created = write_as_task(&router, "task.txt").await;
    assert_eq!(created["resultType"], "task", "{created}");
    assert_eq!(created["status"], "input_required", "{created}");
    let task = created["taskId"].as_str().unwrap().to_owned();
    assert_eq!(
        created["_meta"]["dev.toolgate/approval"]["approvalId"],
        task
    );
    assert!(created["ttlMs"].as_u64().unwrap() > 0, "{created}");

    let waiting = get(&router, ALICE, &task).await["result"].clone();
    assert_eq!(waiting["status"], "input_required", "{waiting}");
    assert_eq!(waiting["inputRequests"], json!({}), "{waiting}");
    let message = waiting["statusMessage"].as_str().unwrap();
    assert!(message.contains(&task), "{message}");
    assert!(message.contains("toolgate.approvals.decide"), "{message}");
    assert!(
        message.contains(&format!("/v1/approvals/{task}/approve")),
        "{message}"
    );
    assert_eq!(approval(&router, &task).await["status"], "pending");

    // Another principal does not see it, before or after it completes.
    let foreign = get(&router, BOB, &task).await;
    assert_eq!(foreign["error"]["code"], -32602, "{foreign}");
    assert!(
        foreign["error"]["message"]
            .as_str()
            .unwrap()
            .contains("not found"),
        "{foreign}"
    );

    assert_eq!(approve(&router, &task).await, StatusCode::OK);
    let done = until(&router, &task, "completed").await;
    let result = &done["result"];
    assert_eq!(result["isError"], false, "{done}");
    // The result a direct call gives: the envelope the approval recorded, as MCP.
    let recorded = approval(&router, &task).await;
    assert_eq!(recorded["status"], "executed", "{recorded}");
    assert_eq!(
        result["structuredContent"], recorded["result"]["data"],
        "{done}"
    );
    assert_eq!(
        result["_meta"]["dev.toolgate/result"]["callId"], recorded["callId"],
        "{done}"
    );
    let foreign = get(&router, BOB, &task).await;
    assert_eq!(foreign["error"]["code"], -32602, "{foreign}");
    let foreign = mcp(&router, BOB, "tasks/cancel", json!({ "taskId": &task })).await;
    assert_eq!(foreign["error"]["code"], -32602, "{foreign}");
    h.cleanup().await;
}

#[tokio::test]
async fn a_call_that_needs_no_approval_is_answered_directly() {
    let h = Harness::with_options(options()).await;
    let router = h.gw.router();
    let reply = mcp(
        &router,
        ALICE,
        "tools/call",
        json!({"name": "calculator", "arguments": {"expression": "6 * 7"}}),
    )
    .await;
    assert_eq!(reply["result"]["resultType"], "complete", "{reply}");
    assert_eq!(
        reply["result"]["structuredContent"]["result"], 42,
        "{reply}"
    );
    h.cleanup().await;
}

#[tokio::test]
async fn cancel_withdraws_the_pending_approval() {
    let h = Harness::with_options(options()).await;
    let router = h.gw.router();
    let task = write_as_task(&router, "never.txt").await["taskId"]
        .as_str()
        .unwrap()
        .to_owned();
    let cancelled = mcp(&router, ALICE, "tasks/cancel", json!({ "taskId": &task })).await;
    assert_eq!(cancelled["result"]["resultType"], "complete", "{cancelled}");
    let read = get(&router, ALICE, &task).await["result"].clone();
    assert_eq!(read["status"], "cancelled", "{read}");
    // The approval is withdrawn: denied in the caller's name, and nobody can approve it now.
    let recorded = approval(&router, &task).await;
    assert_eq!(recorded["status"], "denied", "{recorded}");
    assert_eq!(recorded["decidedBy"], "alice", "{recorded}");
    assert_ne!(approve(&router, &task).await, StatusCode::OK);
    // Cancelling a finished task again is acknowledged and changes nothing.
    let again = mcp(&router, ALICE, "tasks/cancel", json!({ "taskId": &task })).await;
    assert_eq!(again["result"]["resultType"], "complete", "{again}");
    assert_eq!(approval(&router, &task).await["status"], "denied");
    h.cleanup().await;
}

#[tokio::test]
async fn a_denied_task_completes_with_the_refusal() {
    let h = Harness::with_options(options()).await;
    let router = h.gw.router();
    let task = write_as_task(&router, "denied.txt").await["taskId"]
        .as_str()
        .unwrap()
        .to_owned();
    let uri = format!("/v1/approvals/{task}/deny");
    let (status, body) = send(
        &router,
        Method::POST,
        &uri,
        APPROVER,
        Some(json!({"reason": "not today"})),
        &[],
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let read = get(&router, ALICE, &task).await["result"].clone();
    assert_eq!(read["status"], "completed", "{read}");
    assert_eq!(read["result"]["isError"], true, "{read}");
    assert_eq!(
        read["result"]["_meta"]["dev.toolgate/result"]["errorKind"], "rejected",
        "{read}"
    );
    let text = read["result"]["content"][0]["text"].as_str().unwrap();
    assert!(
        text.contains("approver") && text.contains("not today"),
        "{text}"
    );
    h.cleanup().await;
}

#[tokio::test]
async fn a_task_survives_a_restart() {
    let h = Harness::with_options(options()).await;
    let task = write_as_task(&h.gw.router(), "restart.txt").await["taskId"]
        .as_str()
        .unwrap()
        .to_owned();
    // The gateway goes away; a new runtime on the same SQLite file takes over.
    h.gw.drain().await;
    let restarted = h.another_gateway(options()).await;
    let router = restarted.router();
    let read = get(&router, ALICE, &task).await["result"].clone();
    assert_eq!(read["status"], "input_required", "{read}");
    let foreign = get(&router, BOB, &task).await;
    assert_eq!(foreign["error"]["code"], -32602, "{foreign}");
    assert_eq!(approve(&router, &task).await, StatusCode::OK);
    let done = until(&router, &task, "completed").await;
    assert_eq!(done["result"]["isError"], false, "{done}");
    restarted.store().close().await;
    h.cleanup().await;
}

/// A tool that requires confirmation and runs until cancelled (60 s at most).
fn slow_confirmed() -> std::sync::Arc<dyn toolgate_core::Tool> {
    std::sync::Arc::new(
        toolgate_core::ToolBuilder::new(
            "slow_confirmed",
            "Needs a yes, then waits until cancelled; for tests.",
        )
        .effect(toolgate_core::Effect::Write)
        .requires_confirmation(true)
        .handler(|_, ctx| async move {
            tokio::select! {
                () = ctx.cancellation().cancelled() => Err(toolgate_core::ToolError::cancelled()),
                () = tokio::time::sleep(Duration::from_secs(60)) => Ok(json!({ "slept": true })),
            }
        }),
    )
}

#[tokio::test]
async fn a_running_task_reads_working_and_cancel_stops_its_call() {
    let h = Harness::with_options(options()).await;
    h.gw.registry()
        .register_all(vec![slow_confirmed()], false)
        .unwrap();
    let router = h.gw.router();
    let created = mcp(
        &router,
        ALICE,
        "tools/call",
        json!({"name": "slow_confirmed", "arguments": {}}),
    )
    .await;
    let task = created["result"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("no task: {created}"))
        .to_owned();
    assert_eq!(approve(&router, &task).await, StatusCode::OK);
    let working = until(&router, &task, "working").await;
    assert!(
        working["statusMessage"]
            .as_str()
            .unwrap()
            .contains("approver"),
        "{working}"
    );
    // Wait until the call has been claimed and runs (approved → running).
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while approval(&router, &task).await["status"] != "running" {
        assert!(tokio::time::Instant::now() < deadline, "never ran");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let cancelled = mcp(&router, ALICE, "tasks/cancel", json!({ "taskId": &task })).await;
    assert_eq!(cancelled["result"]["resultType"], "complete", "{cancelled}");
    let read = until(&router, &task, "cancelled").await;
    assert!(read.get("result").is_none(), "{read}");
    let recorded = approval(&router, &task).await;
    assert_eq!(recorded["status"], "executed", "{recorded}");
    assert_eq!(recorded["result"]["errorKind"], "cancelled", "{recorded}");
    h.cleanup().await;
}

/// One message of a 2025-11-25 session (`session` from `initialize`; none for it).
async fn in_session(
    router: &axum::Router,
    session: Option<&str>,
    body: Value,
) -> (StatusCode, Value, Option<String>) {
    let mut req = Request::builder()
        .method(Method::POST)
        .uri("/mcp")
        .header("host", "localhost:7878")
        .header("authorization", format!("Bearer {ALICE}"))
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json");
    if let Some(s) = session {
        req = req
            .header("mcp-session-id", s)
            .header("mcp-protocol-version", "2025-11-25");
    }
    let req = req.body(axum::body::Body::from(body.to_string())).unwrap();
    let response = router.clone().oneshot(req).await.unwrap();
    let status = response.status();
    let id = response
        .headers()
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    let text = String::from_utf8_lossy(&bytes).into_owned();
    let json = text
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
        .next_back()
        .unwrap_or_else(|| serde_json::from_str(&text).unwrap_or(Value::Null));
    (status, json, id)
}

#[tokio::test]
async fn a_2025_11_25_session_that_declares_the_extension_gets_tasks() {
    let h = Harness::with_options(options()).await;
    let router = h.gw.router();
    let (status, init, session) = in_session(
        &router,
        None,
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}},
            "clientInfo": {"name": "tasks-test", "version": "1"}}}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{init}");
    let session = session.expect("a session id");
    assert!(
        init["result"]["capabilities"]["extensions"]["io.modelcontextprotocol/tasks"].is_object(),
        "{init}"
    );
    in_session(
        &router,
        Some(&session),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    )
    .await;
    let (_, created, _) = in_session(
        &router,
        Some(&session),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": "write_file", "arguments": {"path": "s.txt", "content": "s"}}}),
    )
    .await;
    assert_eq!(created["result"]["resultType"], "task", "{created}");
    let task = created["result"]["taskId"].as_str().unwrap().to_owned();
    assert_eq!(approve(&router, &task).await, StatusCode::OK);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let (_, got, _) = in_session(
            &router,
            Some(&session),
            json!({"jsonrpc": "2.0", "id": 3, "method": "tasks/get", "params": {"taskId": &task}}),
        )
        .await;
        if got["result"]["status"] == "completed" {
            assert_eq!(got["result"]["result"]["isError"], false, "{got}");
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "{got}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    h.cleanup().await;
}

#[tokio::test]
async fn a_task_expires_with_its_approval() {
    let h = Harness::with_options(GatewayOptions {
        approval_ttl: Duration::from_secs(1),
        ..options()
    })
    .await;
    let router = h.gw.router();
    let created = write_as_task(&router, "late.txt").await;
    assert_eq!(created["ttlMs"], 1000, "{created}");
    let task = created["taskId"].as_str().unwrap().to_owned();
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let read = get(&router, ALICE, &task).await["result"].clone();
    assert_eq!(read["status"], "failed", "{read}");
    let message = read["error"]["message"].as_str().unwrap();
    assert!(message.contains("expired"), "{message}");
    assert_eq!(approval(&router, &task).await["status"], "expired");
    h.cleanup().await;
}

#[tokio::test]
async fn on_postgresql_a_task_made_on_one_instance_is_read_and_cancelled_on_another() {
    let Some(h) = Harness::on_postgres(options()).await else {
        return;
    };
    let task = write_as_task(&h.gw.router(), "pg.txt").await["taskId"]
        .as_str()
        .unwrap()
        .to_owned();
    let other = h.another_gateway(options()).await;
    let router = other.router();
    let read = get(&router, ALICE, &task).await["result"].clone();
    assert_eq!(read["status"], "input_required", "{read}");
    let foreign = get(&router, BOB, &task).await;
    assert_eq!(foreign["error"]["code"], -32602, "{foreign}");
    let cancelled = mcp(&router, ALICE, "tasks/cancel", json!({ "taskId": &task })).await;
    assert_eq!(cancelled["result"]["resultType"], "complete", "{cancelled}");
    let read = get(&h.gw.router(), ALICE, &task).await["result"].clone();
    assert_eq!(read["status"], "cancelled", "{read}");
    other.store().close().await;
    h.cleanup().await;
}

/// One stateless 2026-07-28 request from a client that does not declare the tasks extension.
async fn mcp_without_tasks(router: &axum::Router, method: &str, mut params: Value) -> Value {
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "no-tasks", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {},
    });
    let mut headers = vec![
        ("accept", "application/json, text/event-stream"),
        ("mcp-protocol-version", "2026-07-28"),
        ("mcp-method", method),
    ];
    let name = params["name"].as_str().map(str::to_owned);
    if let Some(name) = name.as_deref() {
        headers.push(("mcp-name", name));
    }
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    // (A JSON-RPC error of 2026-07-28's own codes comes with an HTTP error status.)
    send(router, Method::POST, "/mcp", ALICE, Some(body), &headers)
        .await
        .1
}

/// What a [`long_sum`] run did: `[started, saw its cancellation]`.
type Probe = std::sync::Arc<[std::sync::atomic::AtomicBool; 2]>;

/// A tool that needs no approval and declares `tasks`: it sleeps `millis` (or until cancelled)
/// and answers the sum of `a` and `b`, noting in `probe` that it started and that its
/// cancellation token fired.
fn long_sum(
    support: toolgate_core::TaskSupport,
    probe: Probe,
) -> std::sync::Arc<dyn toolgate_core::Tool> {
    std::sync::Arc::new(
        toolgate_core::ToolBuilder::new("long_sum", "Adds a and b, slowly; for tests.")
            .tasks(support)
            .param(toolgate_core::Parameter::new("a", toolgate_core::ParamType::Integer))
            .param(toolgate_core::Parameter::new("b", toolgate_core::ParamType::Integer))
            .param(toolgate_core::Parameter::new("millis", toolgate_core::ParamType::Integer))
            .handler(move |args: Value, ctx| {
                let probe = std::sync::Arc::clone(&probe);
                async move {
                    probe[0].store(true, std::sync::atomic::Ordering::SeqCst);
                    // Work the tool started on its own sees the call's cancellation too.
                    let token = ctx.cancellation().clone();
                    let seen = std::sync::Arc::clone(&probe);
                    tokio::spawn(async move {
                        token.cancelled().await;
                        seen[1].store(true, std::sync::atomic::Ordering::SeqCst);
                    });
                    let millis = args["millis"].as_u64().unwrap_or(100);
                    tokio::select! {
                        () = ctx.cancellation().cancelled() => Err(toolgate_core::ToolError::cancelled()),
                        () = tokio::time::sleep(Duration::from_millis(millis)) => {
                            let sum = args["a"].as_i64().unwrap_or(0) + args["b"].as_i64().unwrap_or(0);
                            Ok(json!({ "sum": sum }))
                        }
                    }
                }
            }),
    )
}

fn no_flag() -> Probe {
    std::sync::Arc::default()
}

#[tokio::test]
async fn a_long_call_runs_as_a_task_and_completes_with_the_direct_result() {
    let h = Harness::with_options(options()).await;
    h.gw.registry()
        .register_all(
            vec![long_sum(toolgate_core::TaskSupport::Optional, no_flag())],
            false,
        )
        .unwrap();
    let router = h.gw.router();
    let args = json!({"name": "long_sum", "arguments": {"a": 2, "b": 40, "millis": 300}});
    let created = mcp(&router, ALICE, "tools/call", args.clone()).await["result"].clone();
    assert_eq!(created["resultType"], "task", "{created}");
    assert_eq!(created["status"], "working", "{created}");
    let task = created["taskId"].as_str().unwrap().to_owned();
    let read = get(&router, ALICE, &task).await["result"].clone();
    assert_eq!(read["status"], "working", "{read}");
    // Another principal: not found, for reading and for cancelling.
    let foreign = get(&router, BOB, &task).await;
    assert_eq!(foreign["error"]["code"], -32602, "{foreign}");
    let foreign = mcp(&router, BOB, "tasks/cancel", json!({ "taskId": &task })).await;
    assert_eq!(foreign["error"]["code"], -32602, "{foreign}");

    let done = until(&router, &task, "completed").await;
    // The same result a direct call (a client without the extension) gets.
    let direct = mcp_without_tasks(&router, "tools/call", args).await["result"].clone();
    assert_eq!(direct["resultType"], "complete", "{direct}");
    assert_eq!(done["result"]["isError"], false, "{done}");
    assert_eq!(done["result"]["structuredContent"], json!({ "sum": 42 }));
    assert_eq!(
        done["result"]["structuredContent"],
        direct["structuredContent"]
    );
    assert_eq!(done["result"]["content"], direct["content"]);
    assert_eq!(
        done["result"]["_meta"]["dev.toolgate/result"]["callId"], task,
        "the task is the call: {done}"
    );
    // The audit log has the call, under its principal.
    let call = toolgate_core::CallId::parse(&task).unwrap();
    let audited = h.gw.store().audit_call(call).await.unwrap().unwrap();
    let finished = audited.finished.unwrap();
    assert_eq!(finished.principal, "alice");
    assert_eq!(finished.tool, "long_sum");
    // Cancelling a finished task is acknowledged and changes nothing.
    let again = mcp(&router, ALICE, "tasks/cancel", json!({ "taskId": &task })).await;
    assert_eq!(again["result"]["resultType"], "complete", "{again}");
    let read = get(&router, ALICE, &task).await["result"].clone();
    assert_eq!(read["status"], "completed", "{read}");

    // After a restart the task is read back from the audit log, still its principal's only.
    h.gw.drain().await;
    let restarted = h.another_gateway(options()).await;
    let router = restarted.router();
    let read = get(&router, ALICE, &task).await["result"].clone();
    assert_eq!(read["status"], "completed", "{read}");
    assert_eq!(read["result"]["structuredContent"], json!({ "sum": 42 }));
    let foreign = get(&router, BOB, &task).await;
    assert_eq!(foreign["error"]["code"], -32602, "{foreign}");
    restarted.store().close().await;
    h.cleanup().await;
}

/// A task whose handler panics ends `failed` (−32603, the envelope's message), here and when
/// rebuilt from the audit log after a restart; a direct call answers the same envelope as an
/// `isError` result, and a tool's own error completes its task with `isError`.
#[tokio::test]
async fn a_panicking_handler_fails_its_task_and_a_tool_error_completes_it() {
    let h = Harness::with_options(options()).await;
    let tool = |name: &str, panics: bool| {
        std::sync::Arc::new(
            toolgate_core::ToolBuilder::new(name, "Fails; for tests.")
                .tasks(toolgate_core::TaskSupport::Optional)
                .handler(move |_, _| async move {
                    if std::hint::black_box(panics) {
                        panic!("a defect");
                    }
                    Err(toolgate_core::ToolError::execution("it failed"))
                }),
        ) as std::sync::Arc<dyn toolgate_core::Tool>
    };
    h.gw.registry()
        .register_all(vec![tool("boom", true), tool("fails", false)], false)
        .unwrap();
    let router = h.gw.router();
    let created =
        mcp(&router, ALICE, "tools/call", json!({"name": "boom"})).await["result"].clone();
    let task = created["taskId"].as_str().unwrap().to_owned();
    let failed = until(&router, &task, "failed").await;
    assert_eq!(failed["error"]["code"], -32603, "{failed}");
    let message = failed["error"]["message"].as_str().unwrap().to_owned();
    assert!(
        message.contains("the handler panicked: a defect"),
        "{failed}"
    );
    assert!(failed.get("result").is_none(), "{failed}");
    let direct =
        mcp_without_tasks(&router, "tools/call", json!({"name": "boom"})).await["result"].clone();
    assert_eq!(direct["isError"], true, "{direct}");
    assert!(
        direct["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("the handler panicked: a defect"),
        "{direct}"
    );
    let created =
        mcp(&router, ALICE, "tools/call", json!({"name": "fails"})).await["result"].clone();
    let other = created["taskId"].as_str().unwrap().to_owned();
    let done = until(&router, &other, "completed").await;
    assert_eq!(done["result"]["isError"], true, "{done}");

    h.gw.drain().await;
    let restarted = h.another_gateway(options()).await;
    let read = get(&restarted.router(), ALICE, &task).await["result"].clone();
    assert_eq!(read["status"], "failed", "{read}");
    assert_eq!(read["error"]["message"], message.as_str(), "{read}");
    restarted.store().close().await;
    h.cleanup().await;
}

#[tokio::test]
async fn cancel_stops_a_running_task_and_the_tool_sees_it() {
    let h = Harness::with_options(options()).await;
    let saw_cancel = no_flag();
    h.gw.registry()
        .register_all(
            vec![long_sum(
                toolgate_core::TaskSupport::Required,
                std::sync::Arc::clone(&saw_cancel),
            )],
            false,
        )
        .unwrap();
    let router = h.gw.router();
    let created = mcp(
        &router,
        ALICE,
        "tools/call",
        json!({"name": "long_sum", "arguments": {"a": 1, "b": 1, "millis": 60000}}),
    )
    .await["result"]
        .clone();
    let task = created["taskId"].as_str().unwrap().to_owned();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !saw_cancel[0].load(std::sync::atomic::Ordering::SeqCst) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the tool never started"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let cancelled = mcp(&router, ALICE, "tasks/cancel", json!({ "taskId": &task })).await;
    assert_eq!(cancelled["result"]["resultType"], "complete", "{cancelled}");
    let read = until(&router, &task, "cancelled").await;
    assert!(read.get("result").is_none(), "{read}");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !saw_cancel[1].load(std::sync::atomic::Ordering::SeqCst) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the cancellation never reached the tool"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let call = toolgate_core::CallId::parse(&task).unwrap();
    let finished =
        h.gw.store()
            .audit_call(call)
            .await
            .unwrap()
            .unwrap()
            .finished
            .unwrap();
    assert!(
        matches!(
            finished.outcome,
            toolgate_core::Outcome::Error {
                kind: toolgate_core::ErrorKind::Cancelled,
                ..
            }
        ),
        "{:?}",
        finished.outcome
    );
    assert_eq!(finished.cancelled_by.as_deref(), Some("client"));
    h.cleanup().await;
}

#[tokio::test]
async fn task_support_is_listed_required_needs_the_extension_and_forbidden_is_direct() {
    let h = Harness::with_options(options()).await;
    let forbidden_confirmed = toolgate_core::ToolBuilder::new(
        "confirmed_no_task",
        "Needs a yes but never runs as a task; for tests.",
    )
    .effect(toolgate_core::Effect::Write)
    .requires_confirmation(true)
    .tasks(toolgate_core::TaskSupport::Forbidden)
    .handler(|_, _| async { Ok(json!({ "ran": true })) });
    h.gw.registry()
        .register_all(
            vec![
                long_sum(toolgate_core::TaskSupport::Required, no_flag()),
                std::sync::Arc::new(forbidden_confirmed),
            ],
            false,
        )
        .unwrap();
    let router = h.gw.router();
    let listed = mcp(&router, ALICE, "tools/list", json!({})).await;
    let support = |name: &str| {
        listed["result"]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == name)
            .map(|t| t["_meta"]["dev.toolgate/governance"]["taskSupport"].clone())
            .unwrap_or_else(|| panic!("{name} not listed: {listed}"))
    };
    assert_eq!(support("long_sum"), "required");
    assert_eq!(support("write_file"), "optional", "confirmation → optional");
    assert_eq!(support("calculator"), "forbidden", "others → forbidden");
    assert_eq!(support("confirmed_no_task"), "forbidden");

    // A tool that requires tasks, called by a client without the extension: -32021.
    let refused = mcp_without_tasks(
        &router,
        "tools/call",
        json!({"name": "long_sum", "arguments": {"a": 1, "b": 2}}),
    )
    .await;
    assert_eq!(refused["error"]["code"], -32021, "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("io.modelcontextprotocol/tasks"),
        "{refused}"
    );
    // A tool that forbids tasks is answered directly, even to a client with the extension: a
    // confirmation-required one with its confirmation_required result (the approval waits).
    let direct = mcp(
        &router,
        ALICE,
        "tools/call",
        json!({"name": "confirmed_no_task", "arguments": {}}),
    )
    .await["result"]
        .clone();
    // (This client can elicit, so under 2026-07-28 it is asked with an input-required result.)
    assert_ne!(direct["resultType"], "task", "{direct}");
    assert!(direct.get("taskId").is_none(), "{direct}");
    h.cleanup().await;
}

/// A task that asks its client (`tasks/update`): a tool that asks two questions at once (keys
/// `name` and `go`, elicitation) and greets the name once both are answered; `asks_first`
/// builds it as a tool that asks before its task (input-required rounds first).
fn asking(asks_first: bool) -> std::sync::Arc<dyn toolgate_core::Tool> {
    let mut builder = toolgate_core::ToolBuilder::new("ask_two", "Asks two things; for tests.")
        .tasks(toolgate_core::TaskSupport::Optional);
    if asks_first {
        builder = builder.asks_before_task();
    }
    std::sync::Arc::new(builder.handler(|_, ctx| async move {
        let client = ctx.client("elicitation")?;
        let form = json!({"type": "object", "properties": {"v": {"type": "string"}}});
        let (name, go) = tokio::join!(
            client.elicit_as("name", "Name?".into(), form.clone()),
            client.elicit_as("go", "Go?".into(), form.clone()),
        );
        let v = |a: toolgate_core::ElicitAnswer| match a {
            toolgate_core::ElicitAnswer::Accept(c) => c["v"].as_str().unwrap_or("").to_owned(),
            _ => "no".to_owned(),
        };
        Ok(json!(format!("Hello, {}! go={}", v(name?), v(go?))))
    }))
}

fn accept(v: &str) -> Value {
    json!({"action": "accept", "content": {"v": v}})
}

/// Calls `ask_two` as ALICE: the call must become a task; waits until it asks both its
/// questions (each waits once it is recorded in the store, so one may show before the other).
/// The task id and its `tasks/get` while it waits.
async fn ask_two_task(router: &axum::Router) -> (String, Value) {
    let created =
        mcp(router, ALICE, "tools/call", json!({"name": "ask_two"})).await["result"].clone();
    assert_eq!(created["resultType"], "task", "{created}");
    let task = created["taskId"].as_str().unwrap().to_owned();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let waiting = until(router, &task, "input_required").await;
        if waiting["inputRequests"].as_object().map(|o| o.len()) == Some(2) {
            return (task, waiting);
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "task {task} did not ask both questions: {waiting}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn update(router: &axum::Router, token: &str, task: &str, answers: Value) -> Value {
    mcp(
        router,
        token,
        "tasks/update",
        json!({"taskId": task, "inputResponses": answers}),
    )
    .await
}

#[tokio::test]
async fn a_task_asks_its_client_and_tasks_update_answers_each_question() {
    let h = Harness::with_options(options()).await;
    h.gw.registry()
        .register_all(vec![asking(false)], false)
        .unwrap();
    let router = h.gw.router();
    let (task, waiting) = ask_two_task(&router).await;
    let keys: Vec<&String> = waiting["inputRequests"]
        .as_object()
        .unwrap()
        .keys()
        .collect();
    assert_eq!(keys, ["go", "name"], "both questions wait: {waiting}");
    assert_eq!(
        waiting["inputRequests"]["name"]["method"], "elicitation/create",
        "{waiting}"
    );
    // Another principal cannot answer: not found.
    let foreign = update(&router, BOB, &task, json!({"name": accept("Mallory")})).await;
    assert_eq!(foreign["error"]["code"], -32602, "{foreign}");
    // One answer (and a key nothing asked, ignored): acknowledged; the other still waits.
    let ack = update(
        &router,
        ALICE,
        &task,
        json!({"name": accept("Ada"), "nobody-asked": {"x": 1}}),
    )
    .await;
    assert_eq!(ack["result"], json!({"resultType": "complete"}), "{ack}");
    let still = get(&router, ALICE, &task).await["result"].clone();
    assert_eq!(still["status"], "input_required", "{still}");
    let keys: Vec<&String> = still["inputRequests"].as_object().unwrap().keys().collect();
    assert_eq!(keys, ["go"], "only the unanswered question: {still}");
    update(&router, ALICE, &task, json!({"go": accept("yes")})).await;
    let done = until(&router, &task, "completed").await;
    assert_eq!(
        done["result"]["content"][0]["text"], "Hello, Ada! go=yes",
        "{done}"
    );
    // A finished task's answers change nothing and are acknowledged.
    let late = update(&router, ALICE, &task, json!({"go": accept("no")})).await;
    assert_eq!(late["result"]["resultType"], "complete", "{late}");
    h.cleanup().await;
}

#[tokio::test]
async fn an_answer_of_the_wrong_kind_fails_the_task_and_cancel_stops_a_waiting_one() {
    let h = Harness::with_options(options()).await;
    h.gw.registry()
        .register_all(vec![asking(false)], false)
        .unwrap();
    let router = h.gw.router();
    let (task, _) = ask_two_task(&router).await;
    update(
        &router,
        ALICE,
        &task,
        json!({"name": {"action": 5}, "go": accept("yes")}),
    )
    .await;
    let failed = until(&router, &task, "failed").await;
    assert_eq!(failed["error"]["code"], -32602, "{failed}");
    assert!(failed.get("result").is_none(), "{failed}");

    let (task, _) = ask_two_task(&router).await;
    let ack = mcp(&router, ALICE, "tasks/cancel", json!({ "taskId": &task })).await;
    assert_eq!(ack["result"]["resultType"], "complete", "{ack}");
    until(&router, &task, "cancelled").await;
    h.cleanup().await;
}

#[tokio::test]
async fn a_tool_that_asks_before_its_task_is_asked_in_rounds_then_becomes_a_task() {
    let h = Harness::with_options(options()).await;
    h.gw.registry()
        .register_all(vec![asking(true)], false)
        .unwrap();
    let router = h.gw.router();
    let first =
        mcp(&router, ALICE, "tools/call", json!({"name": "ask_two"})).await["result"].clone();
    assert_eq!(first["resultType"], "input_required", "{first}");
    assert!(first.get("taskId").is_none(), "{first}");
    let state = first["requestState"].as_str().unwrap().to_owned();
    // Answering one of the two questions: another round, still no task.
    let second = mcp(
        &router,
        ALICE,
        "tools/call",
        json!({"name": "ask_two", "requestState": state, "inputResponses": {"name": accept("Ada")}}),
    )
    .await["result"]
        .clone();
    assert_eq!(second["resultType"], "input_required", "{second}");
    let state = second["requestState"].as_str().unwrap().to_owned();
    let created = mcp(
        &router,
        ALICE,
        "tools/call",
        json!({"name": "ask_two", "requestState": state, "inputResponses": {"go": accept("yes")}}),
    )
    .await["result"]
        .clone();
    assert_eq!(created["resultType"], "task", "{created}");
    assert!(created.get("requestState").is_none(), "{created}");
    let task = created["taskId"].as_str().unwrap().to_owned();
    let done = until(&router, &task, "completed").await;
    assert_eq!(
        done["result"]["content"][0]["text"], "Hello, Ada! go=yes",
        "the answers of the rounds before reach the task: {done}"
    );
    h.cleanup().await;
}
