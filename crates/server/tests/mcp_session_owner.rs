//! An MCP session belongs to the principal that opened it: another principal's token on its
//! `Mcp-Session-Id` is answered exactly as an unknown session (404), on POST, GET and DELETE,
//! and the owner's session keeps working.
#![cfg(test)]

mod common;

use axum::http::{Method, StatusCode};
use common::{Harness, Reply, principal};
use serde_json::{Value, json};
use toolgate_core::Quota;

const ALICE: &str = "alice-token";
const BOB: &str = "bob-token";
const VERSION: &str = "2025-11-25";
const SESSION: &str = "mcp-session-id";

async fn mcp(
    h: &Harness,
    method: Method,
    token: &str,
    session: Option<&str>,
    body: Option<Value>,
) -> Reply {
    let accept = if method == Method::GET {
        "text/event-stream"
    } else {
        "application/json, text/event-stream"
    };
    let mut headers = vec![("accept", accept), ("mcp-protocol-version", VERSION)];
    if let Some(s) = session {
        headers.push((SESSION, s));
    }
    h.send_with(method, "/mcp", Some(token), body, &headers)
        .await
}

fn rpc(id: u64, method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

/// Opens a session as `token`'s principal and returns its id.
async fn open(h: &Harness, token: &str) -> String {
    let init = rpc(
        1,
        "initialize",
        json!({"protocolVersion": VERSION, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}),
    );
    let r = mcp(h, Method::POST, token, None, Some(init)).await;
    assert_eq!(r.status, StatusCode::OK, "initialize: {}", r.text);
    let id = r
        .headers
        .get(SESSION)
        .expect("initialize answers a session id")
        .to_str()
        .unwrap()
        .to_owned();
    let done = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let r = mcp(h, Method::POST, token, Some(&id), Some(done)).await;
    assert!(
        r.status.is_success(),
        "initialized: {} {}",
        r.status,
        r.text
    );
    id
}

fn same_reply(label: &str, got: &Reply, unknown: &Reply) {
    assert_eq!(got.status, StatusCode::NOT_FOUND, "{label}: {}", got.text);
    assert_eq!(got.status, unknown.status, "{label}");
    assert_eq!(got.text, unknown.text, "{label}");
    assert_eq!(got.headers, unknown.headers, "{label}");
}

#[tokio::test]
async fn another_principal_on_a_session_gets_404_as_if_it_did_not_exist() {
    let h = Harness::new(vec![
        principal("alice", &["tool.*"], None, ALICE, Quota::default()),
        principal("bob", &["tool.*"], None, BOB, Quota::default()),
    ])
    .await;
    let session = open(&h, ALICE).await;
    let never = "3f2a8c1e-0000-4000-8000-000000000000";
    let call = rpc(
        2,
        "tools/call",
        json!({"name": "calculator", "arguments": {"expression": "6 * 7"}}),
    );

    // POST: bob on alice's session is answered like bob on a session that never existed.
    let got = mcp(&h, Method::POST, BOB, Some(&session), Some(call.clone())).await;
    let unknown = mcp(&h, Method::POST, BOB, Some(never), Some(call.clone())).await;
    same_reply("POST", &got, &unknown);
    let list = rpc(3, "tools/list", json!({}));
    let got = mcp(&h, Method::POST, BOB, Some(&session), Some(list)).await;
    same_reply("POST tools/list", &got, &unknown);

    // GET (the server's stream) and DELETE alike.
    let got = mcp(&h, Method::GET, BOB, Some(&session), None).await;
    let unknown = mcp(&h, Method::GET, BOB, Some(never), None).await;
    same_reply("GET", &got, &unknown);
    let got = mcp(&h, Method::DELETE, BOB, Some(&session), None).await;
    let unknown = mcp(&h, Method::DELETE, BOB, Some(never), None).await;
    same_reply("DELETE", &got, &unknown);

    // Alice's session is intact and hers: her call runs in it.
    let r = mcp(&h, Method::POST, ALICE, Some(&session), Some(call.clone())).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert!(r.text.contains("42"), "{}", r.text);

    // Bob's own session works for bob, and not for alice.
    let bobs = open(&h, BOB).await;
    let r = mcp(&h, Method::POST, BOB, Some(&bobs), Some(call.clone())).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    let r = mcp(&h, Method::POST, ALICE, Some(&bobs), Some(call.clone())).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.text);

    // Alice ends her session; then it is gone for her too.
    let r = mcp(&h, Method::DELETE, ALICE, Some(&session), None).await;
    assert!(r.status.is_success(), "DELETE: {} {}", r.status, r.text);
    let r = mcp(&h, Method::POST, ALICE, Some(&session), Some(call)).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.text);
}
