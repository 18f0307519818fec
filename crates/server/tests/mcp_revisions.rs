//! MCP revisions over Streamable HTTP: a client asking for 2025-03-26, 2025-06-18 or 2025-11-25
//! is answered in that revision (an unknown one gets the newest), a 2025-03-26 session gets only
//! what that revision defines (no titles, output schemas, tool `_meta` or structured content),
//! and `DELETE /mcp` ends a session with 204 No Content.
#![cfg(test)]

mod common;

use axum::http::{Method, StatusCode};
use common::{Harness, Reply, principal};
use serde_json::{Value, json};
use toolgate_core::Quota;

const ALICE: &str = "alice-token";

async fn harness() -> Harness {
    Harness::new(vec![principal(
        "alice",
        &["tool.*"],
        None,
        ALICE,
        Quota::default(),
    )])
    .await
}

/// POSTs one JSON-RPC message to /mcp. `version` is the `MCP-Protocol-Version` header, which a
/// 2025-03-26 client does not send (that revision has no such header).
async fn post(h: &Harness, session: Option<&str>, version: Option<&str>, body: Value) -> Reply {
    let mut headers = vec![("accept", "application/json, text/event-stream")];
    if let Some(s) = session {
        headers.push(("mcp-session-id", s));
    }
    if let Some(v) = version {
        headers.push(("mcp-protocol-version", v));
    }
    h.send_with(Method::POST, "/mcp", Some(ALICE), Some(body), &headers)
        .await
}

/// The JSON-RPC message of an SSE reply (or a JSON body).
fn message(reply: &Reply) -> Value {
    if !reply.json.is_null() {
        return reply.json.clone();
    }
    reply
        .text
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
        .next_back()
        .unwrap_or(Value::Null)
}

/// `initialize` asking for `asked`: the session id and the initialize result.
async fn open(h: &Harness, asked: &str) -> (String, Value) {
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": asked, "capabilities": {"elicitation": {}},
        "clientInfo": {"name": "revisions-test", "version": "1"}}});
    let reply = post(h, None, None, init).await;
    assert_eq!(
        reply.status,
        StatusCode::OK,
        "initialize {asked}: {}",
        reply.text
    );
    let id = reply
        .headers
        .get("mcp-session-id")
        .expect("initialize answers a session id")
        .to_str()
        .unwrap()
        .to_owned();
    let result = message(&reply)["result"].clone();
    let version = result["protocolVersion"].as_str().unwrap().to_owned();
    let header = (version != "2025-03-26").then_some(version.as_str());
    let done = post(
        h,
        Some(&id),
        header,
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    )
    .await;
    assert_eq!(done.status, StatusCode::ACCEPTED, "{}", done.text);
    (id, result)
}

/// `tools/list` and a calculator call in the session, sent the way a client of `version` does.
async fn list_and_call(h: &Harness, session: &str, version: &str) -> (Value, Value) {
    let header = (version != "2025-03-26").then_some(version);
    let list = post(
        h,
        Some(session),
        header,
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
    )
    .await;
    assert_eq!(list.status, StatusCode::OK, "{}", list.text);
    let call = post(
        h,
        Some(session),
        header,
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
               "params": {"name": "calculator", "arguments": {"expression": "6 * 7"}}}),
    )
    .await;
    assert_eq!(call.status, StatusCode::OK, "{}", call.text);
    (
        message(&list)["result"].clone(),
        message(&call)["result"].clone(),
    )
}

#[tokio::test]
async fn each_client_is_answered_in_the_revision_it_asks_for() {
    let h = harness().await;
    for asked in ["2025-03-26", "2025-06-18", "2025-11-25"] {
        let (_, init) = open(&h, asked).await;
        assert_eq!(init["protocolVersion"], asked, "{init}");
        assert_eq!(init["serverInfo"]["name"], "toolgate", "{init}");
        // serverInfo.title came with 2025-06-18.
        assert_eq!(
            init["serverInfo"].get("title").is_some(),
            asked != "2025-03-26",
            "{asked}: {init}"
        );
        assert!(init["capabilities"]["tools"].is_object(), "{init}");
    }
    // A revision toolgate does not speak is answered with the newest it does.
    for asked in ["2024-11-05", "2099-01-01"] {
        let (_, init) = open(&h, asked).await;
        assert_eq!(init["protocolVersion"], "2025-11-25", "{asked}: {init}");
    }
    h.cleanup().await;
}

#[tokio::test]
async fn a_2025_03_26_session_gets_only_what_that_revision_defines() {
    let h = harness().await;
    let (old, _) = open(&h, "2025-03-26").await;
    let (tools, result) = list_and_call(&h, &old, "2025-03-26").await;
    let listed = tools["tools"].as_array().unwrap();
    assert!(!listed.is_empty(), "{tools}");
    for tool in listed {
        for field in ["title", "outputSchema", "icons", "_meta"] {
            assert!(
                tool.get(field).is_none(),
                "{field} in a 2025-03-26 tool: {tool}"
            );
        }
        assert!(tool["inputSchema"].is_object(), "{tool}");
        assert!(tool["description"].is_string(), "{tool}");
    }
    assert_eq!(result["isError"], false, "{result}");
    assert!(result.get("structuredContent").is_none(), "{result}");
    assert_eq!(result["content"][0]["text"], r#"{"result":42}"#, "{result}");
    // The result's own _meta is part of 2025-03-26 and keeps the call id.
    assert!(
        result["_meta"]["dev.toolgate/result"]["callId"].is_string(),
        "{result}"
    );

    // The same server gives a 2025-11-25 session all of it.
    let (new, _) = open(&h, "2025-11-25").await;
    let (tools, result) = list_and_call(&h, &new, "2025-11-25").await;
    let calculator = tools["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "calculator")
        .unwrap();
    assert!(
        calculator["_meta"]["dev.toolgate/governance"].is_object(),
        "{calculator}"
    );
    assert_eq!(result["structuredContent"]["result"], 42, "{result}");
    h.cleanup().await;
}

#[tokio::test]
async fn delete_ends_the_session_with_no_content() {
    let h = harness().await;
    let (session, _) = open(&h, "2025-11-25").await;
    let deleted = h
        .send_with(
            Method::DELETE,
            "/mcp",
            Some(ALICE),
            None,
            &[
                ("mcp-session-id", session.as_str()),
                ("mcp-protocol-version", "2025-11-25"),
            ],
        )
        .await;
    // 204, not rmcp's 202, which the official Python SDK logs as a failed termination.
    assert_eq!(deleted.status, StatusCode::NO_CONTENT, "{}", deleted.text);
    assert!(deleted.text.is_empty(), "{}", deleted.text);
    // The session is gone.
    let after = post(
        &h,
        Some(&session),
        Some("2025-11-25"),
        json!({"jsonrpc": "2.0", "id": 9, "method": "tools/list"}),
    )
    .await;
    assert_eq!(after.status, StatusCode::NOT_FOUND, "{}", after.text);
    // A DELETE of a session that does not exist stays 404.
    let unknown = h
        .send_with(
            Method::DELETE,
            "/mcp",
            Some(ALICE),
            None,
            &[
                ("mcp-session-id", session.as_str()),
                ("mcp-protocol-version", "2025-11-25"),
            ],
        )
        .await;
    assert_eq!(unknown.status, StatusCode::NOT_FOUND, "{}", unknown.text);
    h.cleanup().await;
}

/// One 2026-07-28 request from a client without capabilities: no session, its revision and
/// client in `_meta` and in the standard headers (`MCP-Protocol-Version`, `Mcp-Method`,
/// `Mcp-Name` for a call).
async fn stateless(h: &Harness, token: &str, method: &str, params: Value) -> Reply {
    stateless_with(h, token, method, params, json!({})).await
}

/// [`stateless`] from a client with `capabilities`.
async fn stateless_with(
    h: &Harness,
    token: &str,
    method: &str,
    mut params: Value,
    capabilities: Value,
) -> Reply {
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "revisions-test", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": capabilities,
    });
    let name = params["name"].as_str().map(str::to_owned);
    let mut headers = vec![
        ("accept", "application/json, text/event-stream"),
        ("mcp-protocol-version", "2026-07-28"),
        ("mcp-method", method),
    ];
    if let Some(name) = name.as_deref() {
        headers.push(("mcp-name", name));
    }
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    h.send_with(Method::POST, "/mcp", Some(token), Some(body), &headers)
        .await
}

#[tokio::test]
async fn a_2026_07_28_client_discovers_lists_and_calls_without_a_session() {
    let h = harness().await;
    let discovered = stateless(&h, ALICE, "server/discover", json!({})).await;
    assert_eq!(discovered.status, StatusCode::OK, "{}", discovered.text);
    assert!(discovered.headers.get("mcp-session-id").is_none());
    let result = &message(&discovered)["result"];
    assert_eq!(
        result["supportedVersions"],
        json!(["2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28"]),
        "{result}"
    );
    assert!(result["capabilities"]["tools"].is_object(), "{result}");

    let listed = stateless(&h, ALICE, "tools/list", json!({})).await;
    assert_eq!(listed.status, StatusCode::OK, "{}", listed.text);
    let result = &message(&listed)["result"];
    let names: Vec<&str> = result["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    let mut sorted = names.clone();
    sorted.sort_unstable();
    assert_eq!(names, sorted, "tools/list is in name order");
    assert!(names.contains(&"calculator"), "{names:?}");
    // The caching hints 2026-07-28 requires: the list depends on the caller, so private.
    assert_eq!(result["cacheScope"], "private", "{result}");
    assert!(result["ttlMs"].is_u64(), "{result}");

    let called = stateless(
        &h,
        ALICE,
        "tools/call",
        json!({"name": "calculator", "arguments": {"expression": "6 * 7"}}),
    )
    .await;
    assert_eq!(called.status, StatusCode::OK, "{}", called.text);
    let result = &message(&called)["result"];
    assert_eq!(result["structuredContent"]["result"], 42, "{result}");
    assert_eq!(result["resultType"], "complete", "{result}");
    assert_eq!(h.gw.mcp_session_counts().awake, 0, "no session was opened");
    h.cleanup().await;
}

#[tokio::test]
async fn under_2026_07_28_a_client_that_cannot_elicit_waits_for_a_durable_approval() {
    // No elicitation capability in the request's _meta: nobody to ask in the request, so the
    // call waits as a durable approval and the result names it.
    let h = harness().await;
    let called = stateless(
        &h,
        ALICE,
        "tools/call",
        json!({"name": "write_file", "arguments": {"path": "x.txt", "content": "no"}}),
    )
    .await;
    assert_eq!(called.status, StatusCode::OK, "{}", called.text);
    assert!(
        !called.text.contains("elicitation/create"),
        "{}",
        called.text
    );
    let result = &message(&called)["result"];
    assert_eq!(result["isError"], true, "{result}");
    let meta = &result["_meta"]["dev.toolgate/result"];
    assert_eq!(meta["errorKind"], "confirmation_required", "{result}");
    assert!(meta["approvalId"].is_string(), "{result}");
    h.cleanup().await;
}

#[tokio::test]
async fn a_2026_07_28_request_takes_no_session_slot() {
    // A principal at its session cap still gets its stateless requests answered.
    let h = Harness::with_options(toolgate_server::GatewayOptions {
        principals: vec![principal(
            "alice",
            &["tool.*"],
            None,
            ALICE,
            Quota::default(),
        )],
        sessions: toolgate_server::SessionLimits {
            max_sessions: 10,
            max_per_principal: 1,
            ..toolgate_server::SessionLimits::default()
        },
        ..toolgate_server::GatewayOptions::default()
    })
    .await;
    let _ = open(&h, "2025-11-25").await;
    let refused = post(
        &h,
        None,
        None,
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "revisions-test", "version": "1"}}}),
    )
    .await;
    assert_eq!(
        refused.status,
        StatusCode::TOO_MANY_REQUESTS,
        "{}",
        refused.text
    );
    let called = stateless(
        &h,
        ALICE,
        "tools/call",
        json!({"name": "calculator", "arguments": {"expression": "1 + 1"}}),
    )
    .await;
    assert_eq!(called.status, StatusCode::OK, "{}", called.text);
    assert_eq!(message(&called)["result"]["structuredContent"]["result"], 2);
    // An initialize sent with a 2026-07-28 header still needs a slot: it is refused.
    let sneaked = h
        .send_with(
            Method::POST,
            "/mcp",
            Some(ALICE),
            Some(
                json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2026-07-28", "capabilities": {},
                "clientInfo": {"name": "revisions-test", "version": "1"}}}),
            ),
            &[
                ("accept", "application/json, text/event-stream"),
                ("mcp-protocol-version", "2026-07-28"),
            ],
        )
        .await;
    assert!(
        sneaked.headers.get("mcp-session-id").is_none(),
        "{}",
        sneaked.text
    );
    assert_eq!(h.gw.mcp_session_counts().awake, 1);
    h.cleanup().await;
}

#[tokio::test]
async fn an_open_listen_stream_takes_a_session_slot() {
    use axum::body::Body;
    use http_body_util::BodyExt;
    use tower::ServiceExt;

    let h = Harness::with_options(toolgate_server::GatewayOptions {
        principals: vec![principal(
            "alice",
            &["tool.*"],
            None,
            ALICE,
            Quota::default(),
        )],
        sessions: toolgate_server::SessionLimits {
            max_sessions: 10,
            max_per_principal: 1,
            ..toolgate_server::SessionLimits::default()
        },
        ..toolgate_server::GatewayOptions::default()
    })
    .await;
    let listen = || {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": "subscriptions/listen", "params": {
        "notifications": {"toolsListChanged": true},
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
        }}});
        axum::http::Request::builder()
            .method(Method::POST)
            .uri("/mcp")
            .header("host", "localhost:7878")
            .header("authorization", format!("Bearer {ALICE}"))
            .header("accept", "application/json, text/event-stream")
            .header("content-type", "application/json")
            .header("mcp-protocol-version", "2026-07-28")
            .header("mcp-method", "subscriptions/listen")
            .body(Body::from(body.to_string()))
            .unwrap()
    };
    // The first stream is acknowledged and stays open: it holds alice's one slot.
    let first = h.router.clone().oneshot(listen()).await.unwrap();
    assert_eq!(first.status(), StatusCode::OK);
    let mut first = first.into_body();
    let frame = tokio::time::timeout(std::time::Duration::from_secs(10), first.frame())
        .await
        .expect("the acknowledgement comes at once")
        .unwrap()
        .unwrap();
    let mut acked = String::from_utf8_lossy(frame.data_ref().unwrap()).into_owned();
    while !acked.contains("notifications/subscriptions/acknowledged") {
        let frame = tokio::time::timeout(std::time::Duration::from_secs(10), first.frame())
            .await
            .expect("the acknowledgement comes at once")
            .unwrap()
            .unwrap();
        if let Some(data) = frame.data_ref() {
            acked.push_str(&String::from_utf8_lossy(data));
        }
    }
    // A second one is refused, naming the cap, and ends.
    let second = h.router.clone().oneshot(listen()).await.unwrap();
    let bytes = tokio::time::timeout(
        std::time::Duration::from_secs(10),
        second.into_body().collect(),
    )
    .await
    .expect("the refused stream ends")
    .unwrap()
    .to_bytes();
    let text = String::from_utf8_lossy(&bytes);
    assert!(text.contains("max_sessions_per_principal"), "{text}");
    // Closing the first gives the slot back.
    drop(first);
    let mut opened = false;
    for _ in 0..50 {
        let session = post(
            &h,
            None,
            None,
            json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": {},
                "clientInfo": {"name": "revisions-test", "version": "1"}}}),
        )
        .await;
        if session.status == StatusCode::OK {
            opened = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert!(opened, "the closed listen stream kept its slot");
    h.cleanup().await;
}

/// A `write_file` call under 2026-07-28 from a client that can elicit, with `extra` params
/// (`inputResponses`, `requestState`).
async fn write(h: &Harness, path: &str, extra: Value) -> Value {
    let mut params = json!({"name": "write_file", "arguments": {"path": path, "content": "yes"}});
    if let (Some(p), Some(extra)) = (params.as_object_mut(), extra.as_object()) {
        p.extend(extra.clone());
    }
    let reply = stateless_with(h, ALICE, "tools/call", params, json!({"elicitation": {}})).await;
    message(&reply)
}

/// Whether `path` exists under the gateway's root, read through the read_file tool.
async fn written(h: &Harness, path: &str) -> bool {
    let reply = stateless(
        h,
        ALICE,
        "tools/call",
        json!({"name": "read_file", "arguments": {"path": path}}),
    )
    .await;
    message(&reply)["result"]["isError"] == false
}

/// The first round: the confirmation form as an input request, and its requestState.
async fn first_round(h: &Harness, path: &str) -> String {
    let reply = write(h, path, json!({})).await;
    let result = &reply["result"];
    assert_eq!(result["resultType"], "input_required", "{reply}");
    let form = &result["inputRequests"]["confirm"];
    assert_eq!(form["method"], "elicitation/create", "{reply}");
    let approve = &form["params"]["requestedSchema"]["properties"]["approve"];
    assert_eq!(approve["type"], "boolean", "{reply}");
    assert!(approve.get("default").is_none(), "{reply}");
    assert!(
        form["params"]["message"]
            .as_str()
            .unwrap()
            .contains("write_file"),
        "{reply}"
    );
    result["requestState"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn under_2026_07_28_confirmation_is_an_input_required_round_trip_with_explicit_yes() {
    let h = harness().await;
    // Nothing runs in the first round.
    let state = first_round(&h, "a.txt").await;
    assert!(!written(&h, "a.txt").await);

    // An accept without approve: true is a refusal that says why; nothing is written.
    for (path, answer) in [
        ("b.txt", json!({"action": "accept", "content": {}})),
        (
            "c.txt",
            json!({"action": "accept", "content": {"approve": "true"}}),
        ),
        (
            "d.txt",
            json!({"action": "accept", "content": {"approve": false}}),
        ),
        ("e.txt", json!({"action": "decline"})),
    ] {
        let state = first_round(&h, path).await;
        let reply = write(
            &h,
            path,
            json!({"inputResponses": {"confirm": answer}, "requestState": state}),
        )
        .await;
        let result = &reply["result"];
        assert_eq!(result["isError"], true, "{answer}: {reply}");
        assert_eq!(
            result["_meta"]["dev.toolgate/result"]["errorKind"], "rejected",
            "{answer}: {reply}"
        );
        assert!(!written(&h, path).await, "{answer} wrote {path}");
    }

    // The requestState is bound to the call: other arguments do not redeem it.
    let reply = write(
        &h,
        "other.txt",
        json!({"inputResponses": {"confirm": {"action": "accept", "content": {"approve": true}}},
               "requestState": state}),
    )
    .await;
    assert_eq!(reply["error"]["code"], -32602, "{reply}");
    assert!(!written(&h, "other.txt").await);

    // approve: true runs the call, once: its requestState cannot be used again.
    let state = first_round(&h, "f.txt").await;
    let yes = json!({"inputResponses": {"confirm": {"action": "accept", "content": {"approve": true}}},
                     "requestState": state});
    let reply = write(&h, "f.txt", yes.clone()).await;
    assert_eq!(reply["result"]["isError"], false, "{reply}");
    assert!(written(&h, "f.txt").await);
    let again = write(&h, "f.txt", yes).await;
    assert_eq!(again["error"]["code"], -32602, "{again}");

    // A second round without an answer asks again.
    let state = first_round(&h, "g.txt").await;
    let reply = write(&h, "g.txt", json!({"requestState": state})).await;
    assert_eq!(reply["result"]["resultType"], "input_required", "{reply}");
    assert!(!written(&h, "g.txt").await);
    h.cleanup().await;
}

/// A tool that asks its client's user a name, then a colour (two rounds under 2026-07-28), and
/// counts its completed runs in `runs`; `confirmed` makes it need a yes first.
fn asking_tool(
    name: &str,
    confirmed: bool,
    runs: std::sync::Arc<std::sync::atomic::AtomicU32>,
) -> std::sync::Arc<dyn toolgate_core::Tool> {
    let form = |field: &str| json!({"type": "object", "properties": {field: {"type": "string"}}, "required": [field]});
    let text = |answer: toolgate_core::ElicitAnswer, field: &str| match answer {
        toolgate_core::ElicitAnswer::Accept(m) => m[field].as_str().unwrap_or("?").to_owned(),
        other => format!("{other:?}"),
    };
    std::sync::Arc::new(
        toolgate_core::ToolBuilder::new(name, "Asks a name and a colour; for tests.")
            .effect(toolgate_core::Effect::Write)
            .requires_confirmation(confirmed)
            .handler(move |_, ctx| {
                let runs = std::sync::Arc::clone(&runs);
                async move {
                    let client = ctx.client("elicitation")?;
                    let who = client
                        .elicit_as("user_name", "Your name?".into(), form("name"))
                        .await?;
                    let colour = client
                        .elicit_as("colour", "Your colour?".into(), form("colour"))
                        .await?;
                    runs.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    Ok(json!(format!(
                        "{} likes {}",
                        text(who, "name"),
                        text(colour, "colour")
                    )))
                }
            }),
    )
}

const BOB: &str = "bob-token";

/// A `tools/call` of `tool` under 2026-07-28 by `token` declaring `capabilities`, with `extra`
/// params (`inputResponses`, `requestState`): the JSON-RPC reply.
async fn ask(h: &Harness, token: &str, tool: &str, capabilities: Value, extra: Value) -> Value {
    let mut params = json!({"name": tool, "arguments": {}});
    if let (Some(p), Some(extra)) = (params.as_object_mut(), extra.as_object()) {
        p.extend(extra.clone());
    }
    message(&stateless_with(h, token, "tools/call", params, capabilities).await)
}

fn accept(field: &str, value: Value) -> Value {
    json!({"action": "accept", "content": {field: value}})
}

#[tokio::test]
async fn under_2026_07_28_a_tool_asks_its_client_in_rounds_with_a_state_bound_to_the_call() {
    let h = Harness::new(vec![
        principal("alice", &["tool.*"], None, ALICE, Quota::default()),
        principal("bob", &["tool.*"], None, BOB, Quota::default()),
    ])
    .await;
    let runs = std::sync::Arc::new(std::sync::atomic::AtomicU32::new(0));
    h.gw.registry()
        .register_all(
            vec![
                asking_tool("ask_free", false, std::sync::Arc::clone(&runs)),
                asking_tool("ask_confirmed", true, std::sync::Arc::clone(&runs)),
            ],
            false,
        )
        .unwrap();
    let elicits = json!({"elicitation": {}});
    let state_of = |reply: &Value| {
        assert_eq!(reply["result"]["resultType"], "input_required", "{reply}");
        reply["result"]["requestState"].as_str().unwrap().to_owned()
    };

    // Round 1 asks the name; an altered state, or the state sent by another principal, is
    // refused with -32602 (and a state bob tried is used up).
    let first = ask(&h, ALICE, "ask_free", elicits.clone(), json!({})).await;
    assert_eq!(
        first["result"]["inputRequests"]["user_name"]["method"], "elicitation/create",
        "{first}"
    );
    let state = state_of(&first);
    let name = json!({"user_name": accept("name", json!("Al"))});
    for (token, sent) in [
        (ALICE, format!("{state}-TAMPERED")),
        (BOB, state.clone()),
        (ALICE, state.clone()),
    ] {
        let reply = ask(
            &h,
            token,
            "ask_free",
            elicits.clone(),
            json!({"inputResponses": name, "requestState": sent}),
        )
        .await;
        assert_eq!(reply["error"]["code"], -32602, "{reply}");
    }
    assert_eq!(runs.load(std::sync::atomic::Ordering::SeqCst), 0);

    // Round 2 asks the colour with a new state that carries the name; round 3 completes with
    // both, the name read from the state (the client's new version of it is ignored).
    let state = state_of(&ask(&h, ALICE, "ask_free", elicits.clone(), json!({})).await);
    let second = ask(
        &h,
        ALICE,
        "ask_free",
        elicits.clone(),
        json!({"inputResponses": name, "requestState": state}),
    )
    .await;
    assert!(
        second["result"]["inputRequests"]["colour"].is_object(),
        "{second}"
    );
    let next = state_of(&second);
    assert_ne!(next, state);
    let done = ask(
        &h,
        ALICE,
        "ask_free",
        elicits.clone(),
        json!({"inputResponses": {"colour": accept("colour", json!("blue")),
                                  "user_name": accept("name", json!("Mallory"))},
               "requestState": next}),
    )
    .await;
    assert_eq!(done["result"]["isError"], false, "{done}");
    assert_eq!(
        done["result"]["content"][0]["text"], "Al likes blue",
        "{done}"
    );
    assert_eq!(runs.load(std::sync::atomic::Ordering::SeqCst), 1);

    // A client that did not declare elicitation is not asked: the request lacks a client
    // capability the tool needs (-32021 with HTTP 400, naming it), and the tool did not finish.
    let reply = stateless_with(
        &h,
        ALICE,
        "tools/call",
        json!({"name": "ask_free", "arguments": {}}),
        json!({"sampling": {}}),
    )
    .await;
    assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{}", reply.text);
    let refused = message(&reply);
    assert_eq!(refused["error"]["code"], -32021, "{refused}");
    assert_eq!(
        refused["error"]["data"]["requiredCapabilities"],
        json!({"elicitation": {}}),
        "{refused}"
    );
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("ask_free needs the client's elicitation capability"),
        "{refused}"
    );
    assert_eq!(runs.load(std::sync::atomic::Ordering::SeqCst), 1);
    h.cleanup().await;
}

#[tokio::test]
async fn under_2026_07_28_a_confirmation_before_a_tools_questions_needs_its_state_and_an_explicit_yes()
 {
    let h = harness().await;
    let runs = std::sync::Arc::new(std::sync::atomic::AtomicU32::new(0));
    h.gw.registry()
        .register_all(
            vec![asking_tool(
                "ask_confirmed",
                true,
                std::sync::Arc::clone(&runs),
            )],
            false,
        )
        .unwrap();
    let elicits = json!({"elicitation": {}});
    let yes = json!({"action": "accept", "content": {"approve": true}});
    let call = |extra: Value| ask(&h, ALICE, "ask_confirmed", elicits.clone(), extra);

    // The confirmation comes first, alone; a yes sent without the state that asked it decides
    // nothing (the form is asked again).
    let first = call(json!({})).await;
    let asked: Vec<&String> = first["result"]["inputRequests"]
        .as_object()
        .unwrap()
        .keys()
        .collect();
    assert_eq!(asked, ["confirm"], "{first}");
    let unasked = call(json!({"inputResponses": {"confirm": yes}})).await;
    assert!(
        unasked["result"]["inputRequests"]["confirm"].is_object(),
        "{unasked}"
    );

    // approve: "true" is not an explicit yes.
    let state = unasked["result"]["requestState"]
        .as_str()
        .unwrap()
        .to_owned();
    let not_yes = call(
        json!({"inputResponses": {"confirm": accept("approve", json!("true"))},
                              "requestState": state}),
    )
    .await;
    assert_eq!(not_yes["result"]["isError"], true, "{not_yes}");
    assert_eq!(
        not_yes["result"]["_meta"]["dev.toolgate/result"]["errorKind"], "rejected",
        "{not_yes}"
    );

    // An explicit yes lets the tool ask its questions; the yes rides along in the state.
    let state = call(json!({})).await["result"]["requestState"]
        .as_str()
        .unwrap()
        .to_owned();
    let named = call(json!({"inputResponses": {"confirm": yes}, "requestState": state})).await;
    assert!(
        named["result"]["inputRequests"]["user_name"].is_object(),
        "{named}"
    );
    let state = named["result"]["requestState"].as_str().unwrap().to_owned();
    let coloured = call(
        json!({"inputResponses": {"user_name": accept("name", json!("Al"))},
                               "requestState": state}),
    )
    .await;
    let state = coloured["result"]["requestState"]
        .as_str()
        .unwrap()
        .to_owned();
    let done = call(
        json!({"inputResponses": {"colour": accept("colour", json!("red"))},
                           "requestState": state}),
    )
    .await;
    assert_eq!(
        done["result"]["content"][0]["text"], "Al likes red",
        "{done}"
    );
    assert_eq!(runs.load(std::sync::atomic::Ordering::SeqCst), 1);
    h.cleanup().await;
}
