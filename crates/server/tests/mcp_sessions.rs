//! MCP sessions over Streamable HTTP are bounded: the caps refuse new sessions with a clear
//! JSON-RPC error while existing sessions keep working, idle sessions expire, idle sessions
//! past the awake allowance sleep and wake on their next request, and a call longer than the
//! idle timeout keeps its session.
#![cfg(test)]

mod common;

use std::time::{Duration, Instant};

use axum::http::{Method, StatusCode};
use common::mcp::{self, message, rpc};
use common::{Harness, Reply, principal};
use serde_json::{Value, json};
use toolgate_core::Quota;
use toolgate_server::{GatewayOptions, SessionLimits};

const ALICE: &str = "alice-token";
const BOB: &str = "bob-token";

fn options(limits: SessionLimits) -> GatewayOptions {
    GatewayOptions {
        principals: vec![
            principal("alice", &["tool.*"], None, ALICE, Quota::default()),
            principal("bob", &["tool.*"], None, BOB, Quota::default()),
        ],
        sessions: limits,
        ..GatewayOptions::default()
    }
}

fn limits(max: usize, per_principal: usize, idle: Duration) -> SessionLimits {
    SessionLimits {
        max_sessions: max,
        max_per_principal: per_principal,
        idle_timeout: idle,
        ..SessionLimits::default()
    }
}

/// `initialize` + `notifications/initialized`; the new session's id, or the refusal.
async fn open(h: &Harness, token: &str) -> Result<String, Reply> {
    mcp::try_open(h, token, "sessions-test").await
}

async fn opened(h: &Harness, token: &str) -> String {
    mcp::open(h, token, "sessions-test").await
}

fn refusal(opened: Result<String, Reply>) -> Reply {
    match opened {
        Ok(id) => panic!("session {id} opened past the cap"),
        Err(r) => r,
    }
}

/// A `tools/call` of the calculator in the session: its status and JSON-RPC reply.
async fn calculate(h: &Harness, token: &str, session: &str) -> (StatusCode, Value) {
    let reply = rpc(
        h,
        token,
        Some(session),
        json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
               "params": {"name": "calculator", "arguments": {"expression": "6 * 7"}}}),
    )
    .await;
    (reply.status, message(&reply))
}

fn assert_works(status: StatusCode, reply: &Value) {
    assert_eq!(status, StatusCode::OK, "{reply}");
    assert_eq!(
        reply["result"]["structuredContent"]["result"],
        json!(42),
        "{reply}"
    );
}

#[tokio::test]
async fn sessions_past_a_cap_are_refused_with_a_clear_error_and_existing_ones_keep_working() {
    let h = Harness::with_options(options(limits(3, 2, Duration::from_secs(600)))).await;
    let a1 = opened(&h, ALICE).await;
    let _a2 = opened(&h, ALICE).await;

    // Alice's third: her cap (429), naming the setting and the idle timeout.
    let refused = refusal(open(&h, ALICE).await);
    assert_eq!(
        refused.status,
        StatusCode::TOO_MANY_REQUESTS,
        "{}",
        refused.text
    );
    assert!(refused.headers.contains_key("retry-after"));
    let error = &refused.json["error"];
    assert_eq!(refused.json["jsonrpc"], "2.0");
    assert_eq!(error["code"], -32000);
    assert_eq!(error["data"]["setting"], "max_sessions_per_principal");
    assert_eq!(error["data"]["limit"], 2);
    let text = error["message"].as_str().unwrap();
    for needle in [
        "principal alice",
        "[server] max_sessions_per_principal",
        "idle for 10 min expire",
        "session_idle_timeout_seconds",
        "keep working",
    ] {
        assert!(text.contains(needle), "{needle:?} not in {text}");
    }
    // Her existing session still answers.
    let (status, reply) = calculate(&h, ALICE, &a1).await;
    assert_works(status, &reply);

    // Bob takes the last slot of the server; the next one hits the server's cap (503).
    let b1 = opened(&h, BOB).await;
    let refused = refusal(open(&h, BOB).await);
    assert_eq!(
        refused.status,
        StatusCode::SERVICE_UNAVAILABLE,
        "{}",
        refused.text
    );
    assert_eq!(refused.json["error"]["data"]["setting"], "max_sessions");
    assert!(
        refused.json["error"]["message"]
            .as_str()
            .unwrap()
            .contains("[server] max_sessions in the config file"),
        "{}",
        refused.text
    );
    let (status, reply) = calculate(&h, BOB, &b1).await;
    assert_works(status, &reply);
    // Refusals are counted by cap.
    let metrics = h.send(Method::GET, "/metrics", Some(ALICE), None).await;
    for setting in ["max_sessions_per_principal", "max_sessions\""] {
        assert!(
            metrics
                .text
                .lines()
                .any(|l| l.starts_with("mcp_sessions_refused") && l.contains(setting)),
            "{setting} not counted: {}",
            metrics.text
        );
    }

    // Closing a session gives its slot back.
    let closed = h
        .send_with(
            Method::DELETE,
            "/mcp",
            Some(ALICE),
            None,
            &[
                ("mcp-session-id", a1.as_str()),
                ("mcp-protocol-version", "2025-11-25"),
            ],
        )
        .await;
    assert!(closed.status.is_success(), "{}", closed.text);
    let again = opened(&h, ALICE).await;
    let (status, reply) = calculate(&h, ALICE, &again).await;
    assert_works(status, &reply);
    h.cleanup().await;
}

#[tokio::test]
async fn an_idle_session_expires_and_frees_its_slot() {
    let h = Harness::with_options(options(limits(1, 1, Duration::from_millis(300)))).await;
    let session = opened(&h, ALICE).await;
    let (status, reply) = calculate(&h, ALICE, &session).await;
    assert_works(status, &reply);
    assert_eq!(h.gw.mcp_session_counts().list_changed, 1);

    // The only slot is taken.
    assert!(open(&h, BOB).await.is_err());

    tokio::time::sleep(Duration::from_millis(1200)).await;
    let counts = h.gw.mcp_session_counts();
    assert_eq!((counts.awake, counts.asleep), (0, 0), "{counts:?}");
    // Removed with everything it held (its list_changed subscription too).
    let deadline = Instant::now() + Duration::from_secs(5);
    while h.gw.mcp_session_counts().list_changed != 0 {
        assert!(
            Instant::now() < deadline,
            "the expired session is still notified"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (status, _) = calculate(&h, ALICE, &session).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    // Its slot is free again.
    let bobs = opened(&h, BOB).await;
    let (status, reply) = calculate(&h, BOB, &bobs).await;
    assert_works(status, &reply);
    h.cleanup().await;
}

#[tokio::test]
async fn a_call_longer_than_the_idle_timeout_keeps_its_session() {
    let h = Harness::with_options(options(limits(10, 10, Duration::from_millis(300)))).await;
    let session = opened(&h, ALICE).await;
    let reply = rpc(
        &h,
        ALICE,
        Some(&session),
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
               "params": {"name": "slow_wait", "arguments": {"seconds": 1.0}}}),
    )
    .await;
    let reply = message(&reply);
    assert_eq!(
        reply["result"]["structuredContent"]["waited"], 1.0,
        "{reply}"
    );
    // Used just now: still there.
    let (status, reply) = calculate(&h, ALICE, &session).await;
    assert_works(status, &reply);
    h.cleanup().await;
}

#[tokio::test]
async fn idle_sessions_past_the_awake_allowance_sleep_and_wake_on_their_next_request() {
    let h = Harness::with_options(options(SessionLimits {
        max_awake_idle: 1,
        ..limits(10, 10, Duration::from_secs(600))
    }))
    .await;
    let first = opened(&h, ALICE).await;
    let second = opened(&h, ALICE).await;
    let third = opened(&h, BOB).await;
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let counts = h.gw.mcp_session_counts();
        if counts.asleep == 2 && counts.awake == 1 {
            break;
        }
        assert!(Instant::now() < deadline, "{counts:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Sleeping sessions answer as if nothing happened, in order, again and again.
    for session in [&first, &third, &second, &first] {
        let token = if *session == third { BOB } else { ALICE };
        let (status, reply) = calculate(&h, token, session).await;
        assert_works(status, &reply);
    }
    let listed = rpc(
        &h,
        ALICE,
        Some(&second),
        json!({"jsonrpc": "2.0", "id": 9, "method": "tools/list"}),
    )
    .await;
    assert!(
        message(&listed)["result"]["tools"]
            .as_array()
            .is_some_and(|t| !t.is_empty()),
        "{}",
        listed.text
    );
    // A sleeping session still counts toward the caps, and is still closed by DELETE.
    let counts = h.gw.mcp_session_counts();
    assert_eq!(counts.awake + counts.asleep, 3, "{counts:?}");
    h.cleanup().await;
}

#[tokio::test]
async fn a_session_wakes_with_the_logging_level_its_client_set() {
    let h = Harness::with_options(options(SessionLimits {
        max_awake_idle: 1,
        ..limits(10, 10, Duration::from_secs(600))
    }))
    .await;
    let chatty = toolgate_core::ToolBuilder::new(
        "chatty",
        "Logs one info and one error line; for tests of logging levels.",
    )
    .handler(|_args, ctx| async move {
        ctx.log(toolgate_core::LogLevel::Info, "an info line");
        ctx.log(toolgate_core::LogLevel::Error, "an error line");
        Ok(json!({ "done": true }))
    });
    h.gw.registry()
        .register(std::sync::Arc::new(chatty))
        .unwrap();
    let quiet = opened(&h, ALICE).await;
    let level = rpc(
        &h,
        ALICE,
        Some(&quiet),
        json!({"jsonrpc": "2.0", "id": 4, "method": "logging/setLevel", "params": {"level": "error"}}),
    )
    .await;
    assert_eq!(level.status, StatusCode::OK, "{}", level.text);
    // Two newer sessions: the quiet one, least recently used, goes to sleep.
    let _ = opened(&h, ALICE).await;
    let _ = opened(&h, BOB).await;
    let deadline = Instant::now() + Duration::from_secs(5);
    while h.gw.mcp_session_counts().asleep < 2 {
        assert!(Instant::now() < deadline, "{:?}", h.gw.mcp_session_counts());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Log messages go out on the session's GET stream; opening it wakes the session.
    let get = axum::http::Request::builder()
        .method("GET")
        .uri("/mcp")
        .header("host", "localhost:7878")
        .header("authorization", format!("Bearer {ALICE}"))
        .header("accept", "text/event-stream")
        .header("mcp-session-id", quiet.as_str())
        .header("mcp-protocol-version", "2025-11-25")
        .body(axum::body::Body::empty())
        .unwrap();
    let stream = tower::ServiceExt::oneshot(h.router.clone(), get)
        .await
        .unwrap();
    assert_eq!(stream.status(), StatusCode::OK);
    let mut stream = stream.into_body();
    let call = rpc(
        &h,
        ALICE,
        Some(&quiet),
        json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call",
               "params": {"name": "chatty", "arguments": {}}}),
    )
    .await;
    assert_eq!(
        message(&call)["result"]["structuredContent"]["done"],
        true,
        "{}",
        call.text
    );
    // The info line is sent first: at the default level it would come before the error line.
    let mut seen = String::new();
    while !seen.contains("an error line") {
        let frame = tokio::time::timeout(
            Duration::from_secs(5),
            http_body_util::BodyExt::frame(&mut stream),
        )
        .await
        .unwrap_or_else(|_| panic!("no error line on the GET stream: {seen}"))
        .unwrap()
        .unwrap();
        if let Some(data) = frame.data_ref() {
            seen.push_str(&String::from_utf8_lossy(data));
        }
    }
    assert!(
        !seen.contains("an info line"),
        "woke with the default level: {seen}"
    );
    drop(stream);
    h.cleanup().await;
}
