//! Plans over the wire (`docs/tool-model.md#plans`): each plan's built-ins are the only built-ins
//! its callers see — REST listing, lookup, export and calls, MCP `tools/list` and `tools/call` —
//! and a definition's JSON Schema is held to the plan's level when validated or created over REST.
#![cfg(test)]

mod common;

use std::collections::BTreeSet;

use axum::http::{Method, StatusCode};
use common::{Harness, principal};
use serde_json::{Value, json};
use toolgate_core::Quota;
use toolgate_server::PrincipalEntry;
use toolgate_store::{ALL_BUILTINS, Tier};

/// One principal per plan, token = plan name, every permission.
fn per_plan() -> Vec<PrincipalEntry> {
    Tier::NAMES
        .iter()
        .map(|plan| {
            let mut entry = principal(
                &format!("user_{plan}"),
                &["*"],
                None,
                plan,
                Quota::default(),
            );
            entry.plan = Tier::named(plan).unwrap();
            entry
        })
        .collect()
}

fn builtins_of(plan: &str) -> BTreeSet<String> {
    Tier::named(plan)
        .unwrap()
        .builtins
        .iter()
        .map(|b| (*b).to_owned())
        .collect()
}

/// The built-in names among `names`.
fn only_builtins<'a>(names: impl IntoIterator<Item = &'a str>) -> BTreeSet<String> {
    names
        .into_iter()
        .filter(|n| ALL_BUILTINS.contains(n))
        .map(str::to_owned)
        .collect()
}

/// Sends one MCP JSON-RPC message over Streamable HTTP; returns the session id header and the
/// JSON-RPC reply (from a JSON body or the first SSE `data:` line).
async fn mcp(
    h: &Harness,
    token: &str,
    session: Option<&str>,
    body: Value,
) -> (Option<String>, Value) {
    let mut headers = vec![("accept", "application/json, text/event-stream")];
    if let Some(s) = session {
        headers.push(("mcp-session-id", s));
    }
    let r = h
        .send_with(Method::POST, "/mcp", Some(token), Some(body), &headers)
        .await;
    assert!(r.status.is_success(), "{}: {}", r.status, r.text);
    let id = r
        .headers
        .get("mcp-session-id")
        .map(|v| v.to_str().unwrap().to_owned());
    let reply = if r.json.is_null() {
        r.text
            .lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .map(str::trim)
            .filter(|d| !d.is_empty())
            .find_map(|d| serde_json::from_str::<Value>(d).ok())
            .unwrap_or(Value::Null)
    } else {
        r.json
    };
    (id, reply)
}

async fn mcp_session(h: &Harness, token: &str) -> String {
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "plans-test", "version": "1"}}});
    let (id, reply) = mcp(h, token, None, init).await;
    assert!(reply.get("result").is_some(), "{reply}");
    let id = id.expect("a session id");
    let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let r = h
        .send_with(
            Method::POST,
            "/mcp",
            Some(token),
            Some(note),
            &[
                ("accept", "application/json, text/event-stream"),
                ("mcp-session-id", &id),
            ],
        )
        .await;
    assert!(r.status.is_success(), "{}", r.status);
    id
}

#[tokio::test]
async fn each_plan_sees_and_calls_only_its_built_ins_on_every_interface() {
    let h = Harness::new(per_plan()).await;
    for plan in Tier::NAMES {
        let token = plan;
        let want = builtins_of(plan);
        let hidden: Vec<&str> = ALL_BUILTINS
            .iter()
            .copied()
            .filter(|b| !want.contains(*b))
            .collect();

        // REST listing.
        let r = h
            .api(
                Method::GET,
                "/v1/tools",
                "/v1/tools?limit=500",
                Some(token),
                None,
            )
            .await;
        assert_eq!(r.status, StatusCode::OK);
        let listed = only_builtins(
            r.json["tools"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| t["name"].as_str().unwrap()),
        );
        assert_eq!(listed, want, "{plan}: GET /v1/tools");
        // Custom tools are not affected by the plan's built-in set.
        assert!(
            r.json["tools"]
                .as_array()
                .unwrap()
                .iter()
                .any(|t| t["name"] == "slow_wait"),
            "{plan}"
        );

        // REST export.
        let r = h
            .api(
                Method::GET,
                "/v1/export/{format}",
                "/v1/export/mcp",
                Some(token),
                None,
            )
            .await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.text);
        let exported = only_builtins(
            r.json["document"]["tools"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| t["name"].as_str().unwrap()),
        );
        assert_eq!(exported, want, "{plan}: export");

        // MCP tools/list.
        let session = mcp_session(&h, token).await;
        let (_, reply) = mcp(
            &h,
            token,
            Some(&session),
            json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}),
        )
        .await;
        let listed = only_builtins(
            reply["result"]["tools"]
                .as_array()
                .unwrap_or_else(|| panic!("{reply}"))
                .iter()
                .map(|t| t["name"].as_str().unwrap()),
        );
        assert_eq!(listed, want, "{plan}: MCP tools/list");

        // A built-in of the plan is callable over REST and MCP.
        let r = h
            .send(
                Method::POST,
                "/v1/tools/calculator/call",
                Some(token),
                Some(json!({"arguments": {"expression": "2+3"}})),
            )
            .await;
        assert_eq!(r.json["data"]["result"], json!(5), "{plan}: {}", r.text);

        // Every hidden built-in answers exactly like a tool that does not exist.
        let unknown_rest_get = h
            .send(Method::GET, "/v1/tools/no_such_tool", Some(token), None)
            .await;
        let unknown_rest_call = h
            .send(
                Method::POST,
                "/v1/tools/no_such_tool/call",
                Some(token),
                Some(json!({"arguments": {}})),
            )
            .await;
        let (_, unknown_mcp) = mcp(
            &h,
            token,
            Some(&session),
            json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "no_such_tool", "arguments": {}}}),
        )
        .await;
        assert!(unknown_mcp.get("error").is_some(), "{unknown_mcp}");
        for name in &hidden {
            let r = h
                .send(Method::GET, &format!("/v1/tools/{name}"), Some(token), None)
                .await;
            assert_eq!(r.status, StatusCode::NOT_FOUND, "{plan}: GET {name}");
            assert_eq!(r.status, unknown_rest_get.status);
            assert_eq!(
                r.json["error"]["message"].as_str().unwrap(),
                unknown_rest_get.json["error"]["message"]
                    .as_str()
                    .unwrap()
                    .replace("no_such_tool", name)
            );
            let r = h
                .send(
                    Method::POST,
                    &format!("/v1/tools/{name}/call"),
                    Some(token),
                    Some(json!({"arguments": {"path": "x"}})),
                )
                .await;
            assert_eq!(r.status, unknown_rest_call.status, "{plan}: call {name}");
            assert_eq!(r.json["errorKind"], "not_found", "{plan}: {}", r.text);
            assert_eq!(r.json["errorKind"], unknown_rest_call.json["errorKind"]);
            assert!(r.json.get("data").is_none(), "{}", r.text);
            assert!(
                r.json["error"]
                    .as_str()
                    .unwrap()
                    .starts_with(&format!("Tool not found: {name}.")),
                "{}",
                r.text
            );
            let (_, reply) = mcp(
                &h,
                token,
                Some(&session),
                json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": name, "arguments": {}}}),
            )
            .await;
            assert_eq!(
                reply["error"]["code"], unknown_mcp["error"]["code"],
                "{plan}: MCP call {name}: {reply}"
            );
            assert!(reply.get("result").is_none(), "{plan}: {reply}");
        }
        // No hidden built-in has run: none of them wrote an audit entry for this caller.
        let r = h
            .send(
                Method::GET,
                &format!("/v1/calls?principal=user_{plan}&limit=200"),
                Some(token),
                None,
            )
            .await;
        if let Some(calls) = r.json["calls"].as_array() {
            assert!(
                calls
                    .iter()
                    .all(|c| !hidden.contains(&c["tool"].as_str().unwrap_or(""))),
                "{plan}: {}",
                r.text
            );
        }
    }
}

#[tokio::test]
async fn definitions_beyond_the_plans_json_schema_level_are_refused_over_rest() {
    let h = Harness::new(per_plan()).await;
    let with_schema = |name: &str, schema: Value| {
        json!({
            "name": name,
            "description": "A tool defined to test the JSON Schema level of each plan.",
            "input_schema": schema,
        })
    };
    let advanced = json!({
        "type": "object",
        "properties": {"code": {"type": "string", "pattern": "^[A-Z]{3}$"}},
        "required": ["code"]
    });
    let full = json!({
        "type": "object",
        "properties": {"code": {"type": "string"}},
        "required": ["code"],
        "errorMessage": {"required": {"code": "Give a code"}}
    });
    // (plan, schema, lowest plan that allows it or None when allowed)
    let cases: [(&str, &Value, Option<&str>); 6] = [
        ("writer_pro", &advanced, Some("teams")),
        ("writer_pro", &full, Some("enterprise")),
        ("teams", &advanced, None),
        ("teams", &full, Some("enterprise")),
        ("enterprise", &advanced, None),
        ("enterprise", &full, None),
    ];
    for (i, (plan, schema, refused)) in cases.into_iter().enumerate() {
        let def = with_schema(&format!("level_probe_{i}"), schema.clone());
        let r = h
            .api(
                Method::POST,
                "/v1/tools/validate",
                "/v1/tools/validate",
                Some(plan),
                Some(def.clone()),
            )
            .await;
        assert_eq!(r.status, StatusCode::OK);
        match refused {
            Some(lowest) => {
                assert_eq!(r.json["valid"], false, "{plan}: {}", r.text);
                let e = &r.json["errors"][0];
                assert_eq!(e["code"], "schema.plan_level", "{}", r.text);
                let message = e["message"].as_str().unwrap();
                assert!(
                    message.contains(&format!("`plan = \"{lowest}\"`")),
                    "{message}"
                );
                assert!(
                    e["path"].as_str().unwrap().ends_with("pattern")
                        || e["path"] == "input_schema.errorMessage",
                    "{e}"
                );
                // Creating it is refused the same way, and nothing is stored.
                let r = h
                    .send(Method::POST, "/v1/tools", Some(plan), Some(def))
                    .await;
                assert_eq!(r.status, StatusCode::UNPROCESSABLE_ENTITY, "{}", r.text);
                assert!(r.text.contains("schema.plan_level"), "{}", r.text);
            }
            None => assert_eq!(r.json["valid"], true, "{plan}: {}", r.text),
        }
    }
    // The raw schema's required list names only declared properties
    // (`input_schema.required_undeclared`), over REST too.
    let r = h
        .send(
            Method::POST,
            "/v1/tools/validate",
            Some("enterprise"),
            Some(with_schema(
                "required_probe",
                json!({"type": "object", "properties": {"a": {}}, "required": ["a", "foo"]}),
            )),
        )
        .await;
    assert_eq!(r.json["valid"], false, "{}", r.text);
    assert_eq!(r.json["errors"][0]["path"], "input_schema.required[1]");
    assert_eq!(
        r.json["errors"][0]["code"],
        "input_schema.required_undeclared"
    );
}
