//! Runs and budgets end to end: over REST (start a run, tighter-only budgets, calls carrying the
//! run by header or body, `budget_exhausted`, reading a run, another principal's run not found,
//! turns), after a restart (another runtime on the same database keeps the counters), and over
//! MCP (a session of a principal with a budget is a run: more than `max_tool_calls` calls get
//! `budget_exhausted`; a call names another run in `_meta["toolgate/run"]`).
#![cfg(test)]

mod common;

use axum::http::{Method, StatusCode};
use common::mcp::{self, message, rpc};
use common::{Harness, principal};
use serde_json::{Value, json};
use toolgate_core::{Budget, CallRequest, ErrorKind, Quota, RunId};
use toolgate_runtime::Config;
use toolgate_server::GatewayOptions;

const ALICE: &str = "alice-token";
const BOB: &str = "bob-token";

fn options() -> GatewayOptions {
    GatewayOptions {
        principals: vec![
            principal("alice", &["tool.*"], None, ALICE, Quota::default()),
            principal("bob", &["tool.*"], None, BOB, Quota::default()),
        ],
        ..GatewayOptions::default()
    }
}

/// `[budget]` max_tool_calls = 3 for every principal.
async fn harness() -> Harness {
    let config = Config {
        budget: Some(Budget {
            max_tool_calls: Some(3),
            ..Budget::default()
        }),
        ..Config::default()
    };
    Harness::with_config(options(), config).await
}

fn calc() -> Value {
    json!({"arguments": {"expression": "6 * 7"}})
}

#[tokio::test]
async fn rest_runs_enforce_their_budget_and_belong_to_their_principal() {
    let h = harness().await;
    // Looser than the ceiling: valid, but not the caller's to have (403), naming the key and
    // the ceiling.
    let r = h
        .send(
            Method::POST,
            "/v1/runs",
            Some(ALICE),
            Some(json!({"budget": {"max_tool_calls": 4}})),
        )
        .await;
    assert_eq!(r.status, StatusCode::FORBIDDEN, "{}", r.text);
    assert!(r.text.contains("max_tool_calls 4"), "{}", r.text);
    assert!(r.text.contains("ceiling of 3"), "{}", r.text);
    let r = h
        .api(
            Method::POST,
            "/v1/runs",
            "/v1/runs",
            Some(ALICE),
            Some(json!({"budget": {"max_tool_calls": 2}})),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    assert_eq!(r.json["budget"]["max_tool_calls"], 2);
    assert_eq!(r.json["budget"]["max_attempts_per_tool"], 3);
    assert_eq!(r.json["status"], "open");
    let id = r.json["id"].as_str().unwrap().to_owned();
    // By header, then by body field.
    let first = h
        .send_with(
            Method::POST,
            "/v1/tools/calculator/call",
            Some(ALICE),
            Some(calc()),
            &[("toolgate-run", id.as_str())],
        )
        .await;
    assert_eq!(first.json["data"]["result"], 42, "{}", first.text);
    let mut body = calc();
    body["run"] = json!(id);
    let second = h
        .send(
            Method::POST,
            "/v1/tools/calculator/call",
            Some(ALICE),
            Some(body.clone()),
        )
        .await;
    assert_eq!(second.json["data"]["result"], 42, "{}", second.text);
    let third = h
        .send(
            Method::POST,
            "/v1/tools/calculator/call",
            Some(ALICE),
            Some(body.clone()),
        )
        .await;
    assert_eq!(
        third.status,
        StatusCode::OK,
        "an error result: {}",
        third.text
    );
    assert_eq!(
        third.json["errorKind"], "budget_exhausted",
        "{}",
        third.text
    );
    let message = third.json["error"].as_str().unwrap();
    assert!(
        message.contains("2 of its 2 tool calls (max_tool_calls)"),
        "{message}"
    );
    assert!(
        message.contains("Summarise what you have and stop"),
        "{message}"
    );
    // Without a run the calls are not counted.
    let free = h
        .send(
            Method::POST,
            "/v1/tools/calculator/call",
            Some(ALICE),
            Some(calc()),
        )
        .await;
    assert_eq!(free.json["data"]["result"], 42, "{}", free.text);
    // The run with its consumption and calls; another principal does not see it, nor use it.
    let shown = h
        .api(
            Method::GET,
            "/v1/runs/{id}",
            &format!("/v1/runs/{id}"),
            Some(ALICE),
            None,
        )
        .await;
    assert_eq!(shown.status, StatusCode::OK, "{}", shown.text);
    assert_eq!(shown.json["toolCalls"], 2);
    assert_eq!(shown.json["status"], "exhausted");
    assert_eq!(shown.json["calls"].as_array().unwrap().len(), 2);
    assert_eq!(shown.json["calls"][0]["callId"], first.json["callId"]);
    let other = h
        .send(Method::GET, &format!("/v1/runs/{id}"), Some(BOB), None)
        .await;
    assert_eq!(other.status, StatusCode::NOT_FOUND, "{}", other.text);
    let used = h
        .send(
            Method::POST,
            "/v1/tools/calculator/call",
            Some(BOB),
            Some(body),
        )
        .await;
    assert_eq!(used.json["errorKind"], "not_found", "{}", used.text);
    let listed = h.send(Method::GET, "/v1/runs", Some(BOB), None).await;
    assert_eq!(listed.json["runs"], json!([]), "{}", listed.text);
    let listed = h
        .api(Method::GET, "/v1/runs", "/v1/runs", Some(ALICE), None)
        .await;
    assert_eq!(listed.json["runs"].as_array().unwrap().len(), 1);
    // Turns, up to max_turns.
    let r = h
        .send(
            Method::POST,
            "/v1/runs",
            Some(ALICE),
            Some(json!({"budget": {"max_turns": 1}})),
        )
        .await;
    let turns = r.json["id"].as_str().unwrap().to_owned();
    let t = h
        .send(
            Method::POST,
            &format!("/v1/runs/{turns}/turns"),
            Some(ALICE),
            None,
        )
        .await;
    assert_eq!(t.json["turns"], 1, "{}", t.text);
    let t = h
        .send(
            Method::POST,
            &format!("/v1/runs/{turns}/turns"),
            Some(ALICE),
            None,
        )
        .await;
    assert_eq!(t.status, StatusCode::CONFLICT, "{}", t.text);
    assert!(t.text.contains("(max_turns)"), "{}", t.text);
    // JSON's `2.0` is the integer 2; a budget that is not an object, or beyond what the store
    // holds, is refused.
    let r = h
        .send(
            Method::POST,
            "/v1/runs",
            Some(ALICE),
            Some(json!({"budget": {"max_turns": 2.0, "max_output_bytes": null}})),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    assert_eq!(r.json["budget"]["max_turns"], 2, "{}", r.text);
    for (body, says) in [
        (
            json!({"budget": [null, null]}),
            "budget must be an object, not an array",
        ),
        (
            json!({"budget": {"timeout_ms": 9_223_372_036_854_775_808u64}}),
            "budget timeout_ms must be at most 9223372036854775807",
        ),
    ] {
        let r = h
            .send(Method::POST, "/v1/runs", Some(ALICE), Some(body))
            .await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.text);
        assert!(r.text.contains(says), "{}", r.text);
    }
    h.cleanup().await;
}

#[tokio::test]
async fn a_run_keeps_its_counters_across_a_restart() {
    let h = harness().await;
    let r = h.send(Method::POST, "/v1/runs", Some(ALICE), None).await;
    let id = RunId::parse(r.json["id"].as_str().unwrap()).unwrap();
    for _ in 0..2 {
        let mut body = calc();
        body["run"] = json!(id.to_string());
        let r = h
            .send(
                Method::POST,
                "/v1/tools/calculator/call",
                Some(ALICE),
                Some(body),
            )
            .await;
        assert_eq!(r.json["data"]["result"], 42, "{}", r.text);
    }
    // Another runtime on the same database (the server restarted): one call left, then none.
    let restarted = h.another_gateway(options()).await;
    let alice = restarted
        .runtime()
        .principals()
        .get("alice")
        .unwrap()
        .principal
        .clone();
    let call = || {
        CallRequest::new("calculator", json!({"expression": "1 + 1"}))
            .principal(alice.clone())
            .run(id)
    };
    let r = restarted.runtime().pipeline().call(call()).await;
    assert_eq!(r.data().unwrap()["result"], 2);
    let r = restarted.runtime().pipeline().call(call()).await;
    assert_eq!(r.error_kind(), Some(ErrorKind::BudgetExhausted));
    assert!(r.error().unwrap().contains("3 of its 3 tool calls"));
    h.cleanup().await;
}

async fn calculate(h: &Harness, session: &str, meta: Option<Value>) -> Value {
    let mut params = json!({"name": "calculator", "arguments": {"expression": "6 * 7"}});
    if let Some(meta) = meta {
        params["_meta"] = meta;
    }
    let reply = rpc(
        h,
        ALICE,
        Some(session),
        json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": params}),
    )
    .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text);
    message(&reply)["result"].clone()
}

/// A `tools/call` result refused with `budget_exhausted`, its text naming the budget as `spent`.
#[track_caller]
fn assert_budget_exhausted(result: &Value, spent: &str) {
    assert_eq!(result["isError"], true, "{result}");
    assert_eq!(
        result["_meta"]["dev.toolgate/result"]["errorKind"], "budget_exhausted",
        "{result}"
    );
    let text = result["content"][0]["text"].as_str().unwrap();
    assert!(text.contains(spent), "{text}");
}

#[tokio::test]
async fn an_mcp_session_is_a_run_and_a_call_may_name_another_in_meta() {
    let h = harness().await;
    let session = mcp::open(&h, ALICE, "runs-test").await;
    for _ in 0..3 {
        let result = calculate(&h, &session, None).await;
        assert_eq!(result["isError"], false, "{result}");
    }
    let result = calculate(&h, &session, None).await;
    assert_budget_exhausted(&result, "3 of its 3 tool calls (max_tool_calls)");
    // The session's run is alice's, listed with its consumption.
    let listed = h.send(Method::GET, "/v1/runs", Some(ALICE), None).await;
    assert_eq!(listed.json["runs"][0]["toolCalls"], 3, "{}", listed.text);
    // A run named in _meta is counted instead of the session's.
    let r = h.send(Method::POST, "/v1/runs", Some(ALICE), None).await;
    let id = r.json["id"].as_str().unwrap().to_owned();
    let result = calculate(&h, &session, Some(json!({"toolgate/run": id}))).await;
    assert_eq!(result["isError"], false, "{result}");
    let shown = h
        .send(Method::GET, &format!("/v1/runs/{id}"), Some(ALICE), None)
        .await;
    assert_eq!(shown.json["toolCalls"], 1, "{}", shown.text);
    h.cleanup().await;
}

#[tokio::test]
async fn an_mcp_client_reports_turns_in_meta_and_max_turns_holds() {
    let config = Config {
        budget: Some(Budget {
            max_turns: Some(2),
            max_tool_calls: Some(10),
            ..Budget::default()
        }),
        ..Config::default()
    };
    let h = Harness::with_config(options(), config).await;
    let session = mcp::open(&h, ALICE, "runs-test").await;
    // Two turns, each with a marked first call and an unmarked parallel one.
    for _ in 0..2 {
        let result = calculate(&h, &session, Some(json!({"toolgate/turn": true}))).await;
        assert_eq!(result["isError"], false, "{result}");
        let result = calculate(&h, &session, None).await;
        assert_eq!(result["isError"], false, "{result}");
    }
    // A third turn: refused without running, the message naming the budget.
    let result = calculate(&h, &session, Some(json!({"toolgate/turn": true}))).await;
    assert_budget_exhausted(&result, "2 of its 2 model turns (max_turns)");
    let listed = h.send(Method::GET, "/v1/runs", Some(ALICE), None).await;
    assert_eq!(listed.json["runs"][0]["turns"], 2, "{}", listed.text);
    assert_eq!(listed.json["runs"][0]["toolCalls"], 4, "{}", listed.text);
    assert_eq!(
        listed.json["runs"][0]["status"], "exhausted",
        "{}",
        listed.text
    );
    // The run is spent: an unmarked call is refused too.
    let result = calculate(&h, &session, None).await;
    assert_eq!(result["isError"], true, "{result}");
    // A marker that is not `true` is the client's mistake.
    let mut params = json!({"name": "calculator", "arguments": {"expression": "1"}});
    params["_meta"] = json!({"toolgate/turn": 1});
    let reply = rpc(
        &h,
        ALICE,
        Some(&session),
        json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": params}),
    )
    .await;
    let error = &message(&reply)["error"];
    assert_eq!(error["code"], -32602, "{}", reply.text);
    h.cleanup().await;
}
