//! An MCP client's side of Streamable HTTP for the server tests: one JSON-RPC message POSTed to
//! /mcp (in a session or not), the message of its reply, and a session opened with `initialize`
//! and `notifications/initialized` at protocol revision 2025-11-25.

use axum::http::{Method, StatusCode};
use serde_json::{Value, json};

use super::{Harness, Reply};

/// The protocol revision the helpers speak.
pub const PROTOCOL: &str = "2025-11-25";

/// POSTs one JSON-RPC message to /mcp as `token`, in `session` (with its protocol header) or
/// outside any.
pub async fn rpc(h: &Harness, token: &str, session: Option<&str>, body: Value) -> Reply {
    let mut headers = vec![("accept", "application/json, text/event-stream")];
    if let Some(s) = session {
        headers.push(("mcp-session-id", s));
        headers.push(("mcp-protocol-version", PROTOCOL));
    }
    h.send_with(Method::POST, "/mcp", Some(token), Some(body), &headers)
        .await
}

/// The last JSON-RPC message of an SSE reply (or the JSON body).
pub fn message(reply: &Reply) -> Value {
    if !reply.json.is_null() {
        return reply.json.clone();
    }
    reply
        .text
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter_map(|d| serde_json::from_str::<Value>(d).ok())
        .next_back()
        .unwrap_or(Value::Null)
}

/// `initialize` as the client named `client`, then `notifications/initialized` (which must be
/// accepted): the new session's id, or the reply that refused it.
pub async fn try_open(h: &Harness, token: &str, client: &str) -> Result<String, Reply> {
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": PROTOCOL, "capabilities": {},
        "clientInfo": {"name": client, "version": "1"}}});
    let reply = rpc(h, token, None, init).await;
    let Some(id) = reply.headers.get("mcp-session-id") else {
        return Err(reply);
    };
    let id = id.to_str().unwrap().to_owned();
    let done = rpc(
        h,
        token,
        Some(&id),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    )
    .await;
    assert_eq!(done.status, StatusCode::ACCEPTED, "{}", done.text);
    Ok(id)
}

/// [`try_open`] that must succeed: the session's id.
pub async fn open(h: &Harness, token: &str, client: &str) -> String {
    match try_open(h, token, client).await {
        Ok(id) => id,
        Err(r) => panic!("no MCP session: {} {}", r.status, r.text),
    }
}
