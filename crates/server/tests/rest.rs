//! The REST API end to end through the real router: every route, auth (missing, wrong,
//! insufficient token), hidden tools, quotas, validation errors, stored outputs, events, metrics
//! and DNS-rebinding checks — each response checked against `/openapi.json`.
#![cfg(test)]

mod common;

use std::time::Duration;

use axum::http::{Method, StatusCode};
use common::{Harness, principal};
use serde_json::{Value, json};
use toolgate_core::{Quota, RateLimit};

const ADMIN: &str = "admin-token";
const READER: &str = "reader-token";
const CALC_ONLY: &str = "calc-token";

async fn with_principals() -> Harness {
    Harness::new(vec![
        principal("admin", &["*"], None, ADMIN, Quota::default()),
        principal("reader", &["tool.*"], None, READER, Quota::default()),
        principal(
            "calc",
            &["tool.*"],
            Some(&["calculator"]),
            CALC_ONLY,
            Quota::default(),
        ),
    ])
    .await
}

fn definition(name: &str, description: &str) -> Value {
    json!({
        "name": name,
        "description": description,
        "category": "knowledge",
        "parameters": [{ "name": "city", "type": "string", "description": "City name", "required": true }],
        "tags": ["weather"]
    })
}

#[tokio::test]
async fn every_documented_route_exists_and_every_route_is_documented() {
    let h = Harness::new(Vec::new()).await;
    let doc = &h.doc;
    let paths = doc["paths"].as_object().unwrap();
    let mut documented = Vec::new();
    for (path, ops) in paths {
        for method in ops.as_object().unwrap().keys() {
            documented.push((method.clone(), path.clone()));
        }
    }
    let mut listed: Vec<(String, String)> = toolgate_server::ROUTES
        .iter()
        .map(|(m, p)| ((*m).to_owned(), (*p).to_owned()))
        .collect();
    documented.sort();
    listed.sort();
    assert_eq!(documented, listed, "ROUTES and /openapi.json disagree");
    // Every documented route is answered by a handler, not the fallback.
    for (method, path) in &listed {
        // /mcp is exercised by the conformance suite; /v1/events never ends (checked below).
        if path == "/mcp" || path == "/v1/events" {
            continue;
        }
        let uri = path
            .replace("{name}", "calculator")
            .replace("{callId}", "01a20311-f0e6-708a-9f5a-fa5cc0a368bf")
            .replace("{format}", "mcp");
        let m = Method::from_bytes(method.to_uppercase().as_bytes()).unwrap();
        let reply = h.send(m, &uri, None, Some(json!({}))).await;
        assert!(
            !reply.text.contains("No route"),
            "{method} {path} fell through to the fallback: {}",
            reply.text
        );
    }
    EventStream::open(&h).await;
    let reply = h
        .api(Method::GET, "/openapi.json", "/openapi.json", None, None)
        .await;
    assert_eq!(reply.json["openapi"], "3.1.0");
    let unknown = h.send(Method::GET, "/v1/nothing", None, None).await;
    assert_eq!(unknown.status, StatusCode::NOT_FOUND);
    assert_eq!(unknown.json["error"]["kind"], "not_found");
}

#[tokio::test]
async fn tokens_missing_wrong_and_insufficient() {
    let h = with_principals().await;
    // Missing.
    let r = h
        .api(Method::GET, "/v1/tools", "/v1/tools", None, None)
        .await;
    assert_eq!(r.status, StatusCode::UNAUTHORIZED);
    assert_eq!(r.headers["www-authenticate"], "Bearer realm=\"toolgate\"");
    assert!(
        r.json["error"]["message"]
            .as_str()
            .unwrap()
            .contains("Missing bearer token")
    );
    // Wrong.
    let r = h
        .api(Method::GET, "/v1/tools", "/v1/tools", Some("nope"), None)
        .await;
    assert_eq!(r.status, StatusCode::UNAUTHORIZED);
    assert!(
        r.json["error"]["message"]
            .as_str()
            .unwrap()
            .contains("Invalid bearer token")
    );
    // Malformed scheme.
    let r = h
        .send_with(
            Method::GET,
            "/v1/tools",
            None,
            None,
            &[("authorization", "Basic YTpi")],
        )
        .await;
    assert_eq!(r.status, StatusCode::UNAUTHORIZED);
    // MCP needs the token too.
    let r = h
        .send_with(
            Method::POST,
            "/mcp",
            None,
            Some(json!({"jsonrpc": "2.0", "id": 1, "method": "ping"})),
            &[("accept", "application/json, text/event-stream")],
        )
        .await;
    assert_eq!(r.status, StatusCode::UNAUTHORIZED);
    // Insufficient: reader may call tools but not manage definitions.
    let r = h
        .api(
            Method::POST,
            "/v1/tools",
            "/v1/tools",
            Some(READER),
            Some(definition(
                "weather_now",
                "Current weather for a city. Use when asked about weather.",
            )),
        )
        .await;
    assert_eq!(r.status, StatusCode::FORBIDDEN);
    assert!(
        r.json["error"]["message"]
            .as_str()
            .unwrap()
            .contains("toolgate.tools.manage")
    );
    // Open endpoints.
    let r = h.api(Method::GET, "/healthz", "/healthz", None, None).await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(r.json["store"], "sqlite");
    // The right token works.
    let r = h
        .api(Method::GET, "/v1/tools", "/v1/tools", Some(ADMIN), None)
        .await;
    assert_eq!(r.status, StatusCode::OK);
}

#[tokio::test]
async fn hidden_tools_are_reported_exactly_like_missing_ones() {
    let h = with_principals().await;
    let hidden = h
        .api(
            Method::GET,
            "/v1/tools/{name}",
            "/v1/tools/read_file",
            Some(CALC_ONLY),
            None,
        )
        .await;
    let missing = h
        .api(
            Method::GET,
            "/v1/tools/{name}",
            "/v1/tools/read_filf",
            Some(CALC_ONLY),
            None,
        )
        .await;
    assert_eq!(hidden.status, StatusCode::NOT_FOUND);
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
    assert_eq!(
        hidden.text.replace("read_file", "X"),
        missing.text.replace("read_filf", "X")
    );
    // Listing shows only what the principal may call.
    let list = h
        .api(Method::GET, "/v1/tools", "/v1/tools", Some(CALC_ONLY), None)
        .await;
    let names: Vec<&str> = list.json["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["calculator"]);
    // Calls: the envelope says not found, word for word like a missing tool.
    let hidden = h
        .api(
            Method::POST,
            "/v1/tools/{name}/call",
            "/v1/tools/read_file/call",
            Some(CALC_ONLY),
            Some(json!({"arguments": {"path": "a"}})),
        )
        .await;
    let missing = h
        .api(
            Method::POST,
            "/v1/tools/{name}/call",
            "/v1/tools/read_filf/call",
            Some(CALC_ONLY),
            Some(json!({"arguments": {"path": "a"}})),
        )
        .await;
    assert_eq!(hidden.json["errorKind"], "not_found");
    assert_eq!(
        hidden.json["error"]
            .as_str()
            .unwrap()
            .replace("read_file", "X"),
        missing.json["error"]
            .as_str()
            .unwrap()
            .replace("read_filf", "X")
    );
    // Exports and history hide it too.
    let export = h
        .api(
            Method::GET,
            "/v1/export/{format}",
            "/v1/export/openai",
            Some(CALC_ONLY),
            None,
        )
        .await;
    assert_eq!(export.json["document"].as_array().unwrap().len(), 1);
    let history = h
        .api(
            Method::GET,
            "/v1/tools/{name}/history",
            "/v1/tools/read_file/history",
            Some(CALC_ONLY),
            None,
        )
        .await;
    assert_eq!(history.status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn validate_takes_definition_text_and_gives_each_problem_its_line() {
    let h = Harness::new(Vec::new()).await;
    let route = "/v1/tools/validate";
    // Two mistakes a validation finds together, each at its line.
    let text = "name = \"Get-Weather\"\ndescription = \"Current weather for a city.\"\n\n[constraints]\ntimeout_ms = 500\n";
    let v = h
        .api(
            Method::POST,
            route,
            route,
            None,
            Some(json!({ "format": "toml", "text": text })),
        )
        .await;
    assert_eq!(v.status, StatusCode::OK, "{}", v.text);
    assert_eq!(v.json["valid"], false);
    let errors = v.json["errors"].as_array().unwrap();
    let line_of = |path: &str| {
        errors
            .iter()
            .find(|e| e["path"] == path)
            .map(|e| (e["line"].clone(), e["column"].clone()))
    };
    assert_eq!(line_of("name"), Some((json!(1), json!(1))), "{errors:?}");
    assert_eq!(
        line_of("constraints.timeout_ms"),
        Some((json!(5), json!(1))),
        "{errors:?}"
    );
    // Well-formed text that is not a definition: the mistake at its line, with a hint.
    for (format, text, line, code) in [
        (
            "toml",
            "name = \"x\"\ndescription = \"d\"\nefect = \"read\"\n",
            3,
            "field.unknown",
        ),
        (
            "json",
            "{\"name\": \"x\",\n \"description\": 5}",
            2,
            "field.type",
        ),
        (
            "yaml",
            "name: x\ndescription: d\ncategory: nowhere\n",
            3,
            "field.enum",
        ),
    ] {
        let v = h
            .api(
                Method::POST,
                route,
                route,
                None,
                Some(json!({ "format": format, "text": text })),
            )
            .await;
        assert_eq!(v.status, StatusCode::OK, "{}", v.text);
        assert_eq!(v.json["errors"][0]["code"], code, "{format}: {}", v.text);
        assert_eq!(v.json["errors"][0]["line"], line, "{format}: {}", v.text);
    }
    // Several such mistakes come back together, each at its line (serde stops at the first).
    let three = "name = \"x\"\ndescription = \"d\"\nefect = \"read\"\ncategory = \"nowhere\"\ntags = \"weather\"\n";
    let v = h
        .api(
            Method::POST,
            route,
            route,
            None,
            Some(json!({ "format": "toml", "text": three })),
        )
        .await;
    let lines: Vec<&Value> = v.json["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| &e["line"])
        .collect();
    assert_eq!(lines, [&json!(3), &json!(4), &json!(5)], "{}", v.text);
    assert!(v.text.contains("did you mean `effect`?"), "{}", v.text);
    // Text that does not parse at all: the parser's line and column.
    for (format, text, line) in [
        ("toml", "name = \"x\"\ndescription = \"d\"\neffect = \n", 3),
        ("json", "{\"name\": \"x\",\n \"description\": }", 2),
        ("yaml", "name: x\ndescription: d\ncategory: [\n", 3),
    ] {
        let v = h
            .api(
                Method::POST,
                route,
                route,
                None,
                Some(json!({ "format": format, "text": text })),
            )
            .await;
        assert_eq!(v.status, StatusCode::OK, "{}", v.text);
        assert_eq!(v.json["errors"][0]["code"], "parse", "{}", v.text);
        assert_eq!(v.json["errors"][0]["line"], line, "{format}: {}", v.text);
    }
    // Valid text; an unknown format is a bad request.
    let ok = "name: weather_now\ndescription: Current weather for a city. Use when asked about the weather.\n";
    let v = h
        .api(
            Method::POST,
            route,
            route,
            None,
            Some(json!({ "format": "yaml", "text": ok })),
        )
        .await;
    assert_eq!(v.json["valid"], true, "{}", v.text);
    // The definition as read, ready for POST /v1/tools.
    assert_eq!(v.json["definition"]["name"], "weather_now", "{}", v.text);
    let v = h
        .api(
            Method::POST,
            route,
            route,
            None,
            Some(json!({ "format": "xml", "text": ok })),
        )
        .await;
    assert_eq!(v.status, StatusCode::BAD_REQUEST, "{}", v.text);
}

#[tokio::test]
async fn definitions_crud_with_history_and_validation_errors() {
    let h = Harness::new(Vec::new()).await;
    let route = "/v1/tools";
    // Invalid: every problem, each with its path.
    let bad =
        json!({ "name": "Bad-Name", "description": "", "category": "nope", "parameters": [] });
    let r = h
        .api(Method::POST, route, route, None, Some(bad.clone()))
        .await;
    assert_eq!(r.status, StatusCode::UNPROCESSABLE_ENTITY, "{}", r.text);
    let bad2 = json!({ "name": "Bad-Name", "description": "x", "parameters": [{"name": "q", "type": "string", "required": true, "default": "a"}] });
    let r = h
        .api(Method::POST, route, route, None, Some(bad2.clone()))
        .await;
    assert_eq!(r.status, StatusCode::UNPROCESSABLE_ENTITY, "{}", r.text);
    let errors = r.json["error"]["errors"].as_array().unwrap();
    assert!(errors.len() >= 2, "{errors:?}");
    assert!(errors.iter().any(|e| e["path"] == "name"), "{errors:?}");
    // The validate endpoint says the same without storing.
    let v = h
        .api(
            Method::POST,
            "/v1/tools/validate",
            "/v1/tools/validate",
            None,
            Some(bad2),
        )
        .await;
    assert_eq!(v.status, StatusCode::OK);
    assert_eq!(v.json["valid"], false);
    assert_eq!(v.json["errors"].as_array().unwrap().len(), errors.len());
    let good = definition(
        "weather_now",
        "Current weather for a city. Use when asked about the weather.",
    );
    let v = h
        .api(
            Method::POST,
            "/v1/tools/validate",
            "/v1/tools/validate",
            None,
            Some(good.clone()),
        )
        .await;
    assert_eq!(v.json["valid"], true, "{}", v.text);
    assert!(
        h.gw.registry().get("weather_now").is_none(),
        "validate must not register"
    );
    // Create.
    let r = h
        .api(Method::POST, route, route, None, Some(good.clone()))
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    assert_eq!(r.headers["location"], "/v1/tools/weather_now");
    assert_eq!(r.json["storedVersion"], 1);
    // Duplicate.
    let r = h
        .api(Method::POST, route, route, None, Some(good.clone()))
        .await;
    assert_eq!(r.status, StatusCode::CONFLICT, "{}", r.text);
    // Built-in names are refused.
    let r = h
        .api(
            Method::POST,
            route,
            route,
            None,
            Some(definition(
                "calculator",
                "A clash with the built-in calculator tool.",
            )),
        )
        .await;
    assert!(
        r.status == StatusCode::FORBIDDEN || r.status == StatusCode::UNPROCESSABLE_ENTITY,
        "{}",
        r.text
    );
    // Read, update, history.
    let r = h
        .api(
            Method::GET,
            "/v1/tools/{name}",
            "/v1/tools/weather_now",
            None,
            None,
        )
        .await;
    assert_eq!(r.json["definition"]["name"], "weather_now");
    let mut changed = good.clone();
    changed["category"] = json!("external_api");
    let r = h
        .api(
            Method::PUT,
            "/v1/tools/{name}",
            "/v1/tools/weather_now",
            None,
            Some(changed.clone()),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert_eq!(r.json["changedFields"], json!(["category"]));
    assert_eq!(r.json["storedVersion"], 2);
    let r = h
        .api(
            Method::PUT,
            "/v1/tools/{name}",
            "/v1/tools/other_name",
            None,
            Some(changed),
        )
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    let r = h
        .api(
            Method::GET,
            "/v1/tools/{name}/history",
            "/v1/tools/weather_now/history",
            None,
            None,
        )
        .await;
    assert_eq!(r.json["versions"].as_array().unwrap().len(), 2);
    // Built-ins cannot be changed or removed.
    let calc =
        json!({"name": "calculator", "description": "Replaced calculator description text."});
    let r = h
        .api(
            Method::PUT,
            "/v1/tools/{name}",
            "/v1/tools/calculator",
            None,
            Some(calc),
        )
        .await;
    assert_eq!(r.status, StatusCode::FORBIDDEN);
    let r = h
        .api(
            Method::DELETE,
            "/v1/tools/{name}",
            "/v1/tools/calculator",
            None,
            None,
        )
        .await;
    assert_eq!(r.status, StatusCode::FORBIDDEN);
    // Delete.
    let r = h
        .api(
            Method::DELETE,
            "/v1/tools/{name}",
            "/v1/tools/weather_now",
            None,
            None,
        )
        .await;
    assert_eq!(r.status, StatusCode::NO_CONTENT);
    let r = h
        .api(
            Method::GET,
            "/v1/tools/{name}",
            "/v1/tools/weather_now",
            None,
            None,
        )
        .await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    let r = h
        .api(
            Method::DELETE,
            "/v1/tools/{name}",
            "/v1/tools/weather_now",
            None,
            None,
        )
        .await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    // Malformed JSON is a 422 with a parse problem, not a crash.
    let r = h
        .send_with(
            Method::POST,
            "/v1/tools",
            None,
            None,
            &[("content-type", "application/json")],
        )
        .await;
    assert!(r.status.is_client_error());
}

#[tokio::test]
async fn calls_envelopes_audit_and_stored_outputs() {
    let h = Harness::new(Vec::new()).await;
    let route = "/v1/tools/{name}/call";
    let ok = h
        .api(
            Method::POST,
            route,
            "/v1/tools/calculator/call",
            None,
            Some(json!({"arguments": {"expression": "6*7"}})),
        )
        .await;
    assert_eq!(ok.json["data"], json!({"result": 42}));
    let bad = h
        .api(
            Method::POST,
            route,
            "/v1/tools/calculator/call",
            None,
            Some(json!({"arguments": {}})),
        )
        .await;
    assert_eq!(bad.json["errorKind"], "validation");
    let r = h
        .api(
            Method::POST,
            route,
            "/v1/tools/calculator/call",
            None,
            Some(json!({"args": {}})),
        )
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    let big = h
        .api(
            Method::POST,
            route,
            "/v1/tools/big_text/call",
            None,
            Some(json!({"arguments": {"bytes": 20000}})),
        )
        .await;
    let big_id = big.json["callId"].as_str().unwrap().to_owned();
    // Listing with a cursor.
    let page1 = h
        .api(Method::GET, "/v1/calls", "/v1/calls?limit=2", None, None)
        .await;
    assert_eq!(page1.json["calls"].as_array().unwrap().len(), 2);
    let cursor = page1.json["nextCursor"].as_str().unwrap().to_owned();
    let page2 = h
        .api(
            Method::GET,
            "/v1/calls",
            &format!("/v1/calls?limit=2&cursor={cursor}"),
            None,
            None,
        )
        .await;
    assert_eq!(page2.json["calls"].as_array().unwrap().len(), 1);
    let only = h
        .api(
            Method::GET,
            "/v1/calls",
            "/v1/calls?tool=big_text",
            None,
            None,
        )
        .await;
    assert_eq!(only.json["calls"].as_array().unwrap().len(), 1);
    let r = h
        .api(Method::GET, "/v1/calls", "/v1/calls?cursor=zz", None, None)
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    // One call, and its stored output byte for byte.
    let ok_id = ok.json["callId"].as_str().unwrap();
    let r = h
        .api(
            Method::GET,
            "/v1/calls/{callId}",
            &format!("/v1/calls/{ok_id}"),
            None,
            None,
        )
        .await;
    assert_eq!(r.json["finished"]["tool"], "calculator");
    assert_eq!(r.json["interrupted"], false);
    let r = h
        .send(
            Method::GET,
            &format!("/v1/calls/{big_id}/output"),
            None,
            None,
        )
        .await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(r.json, json!({"text": "x".repeat(20000)}));
    let r = h
        .api(
            Method::GET,
            "/v1/calls/{callId}/output",
            &format!("/v1/calls/{ok_id}/output"),
            None,
            None,
        )
        .await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    let r = h
        .api(
            Method::GET,
            "/v1/calls/{callId}",
            "/v1/calls/not-a-uuid",
            None,
            None,
        )
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    let r = h
        .api(
            Method::GET,
            "/v1/calls/{callId}",
            "/v1/calls/01a20311-f0e6-708a-9f5a-fa5cc0a368bf",
            None,
            None,
        )
        .await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn principals_see_only_their_own_calls_unless_they_read_the_audit() {
    let h = with_principals().await;
    h.send(
        Method::POST,
        "/v1/tools/calculator/call",
        Some(CALC_ONLY),
        Some(json!({"arguments": {"expression": "1"}})),
    )
    .await;
    let admin_call = h
        .send(
            Method::POST,
            "/v1/tools/calculator/call",
            Some(ADMIN),
            Some(json!({"arguments": {"expression": "2"}})),
        )
        .await;
    let mine = h
        .api(Method::GET, "/v1/calls", "/v1/calls", Some(CALC_ONLY), None)
        .await;
    let principals: Vec<&str> = mine.json["calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["principal"].as_str().unwrap())
        .collect();
    assert_eq!(principals, ["calc"]);
    let all = h
        .api(Method::GET, "/v1/calls", "/v1/calls", Some(ADMIN), None)
        .await;
    assert_eq!(all.json["calls"].as_array().unwrap().len(), 2);
    let id = admin_call.json["callId"].as_str().unwrap();
    let r = h
        .api(
            Method::GET,
            "/v1/calls/{callId}",
            &format!("/v1/calls/{id}"),
            Some(CALC_ONLY),
            None,
        )
        .await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn per_principal_rate_limit_and_concurrency_cap() {
    let h = Harness::new(vec![
        principal(
            "burst",
            &["*"],
            None,
            "b",
            Quota {
                rate: Some(RateLimit::new(2, 0.001).unwrap()),
                max_concurrent: None,
            },
        ),
        principal(
            "one",
            &["*"],
            None,
            "o",
            Quota {
                rate: None,
                max_concurrent: Some(1),
            },
        ),
        principal("free", &["*"], None, "f", Quota::default()),
    ])
    .await;
    let call = json!({"arguments": {"expression": "1"}});
    for _ in 0..2 {
        let r = h
            .send(
                Method::POST,
                "/v1/tools/calculator/call",
                Some("b"),
                Some(call.clone()),
            )
            .await;
        assert_eq!(r.json["data"], json!({"result": 1}), "{}", r.text);
    }
    let r = h
        .send(
            Method::POST,
            "/v1/tools/calculator/call",
            Some("b"),
            Some(call.clone()),
        )
        .await;
    assert_eq!(r.json["errorKind"], "rate_limited");
    assert!(
        r.json["error"]
            .as_str()
            .unwrap()
            .contains("principal burst"),
        "{}",
        r.text
    );
    // Another principal is not affected.
    let r = h
        .send(
            Method::POST,
            "/v1/tools/calculator/call",
            Some("f"),
            Some(call),
        )
        .await;
    assert!(r.json["data"].is_object());
    // Concurrency: a second call while the first runs is refused; after it, calls work again.
    let slow = json!({"arguments": {"seconds": 0.5}});
    let first = h.send(
        Method::POST,
        "/v1/tools/slow_wait/call",
        Some("o"),
        Some(slow.clone()),
    );
    let second = async {
        tokio::time::sleep(Duration::from_millis(150)).await;
        h.send(
            Method::POST,
            "/v1/tools/slow_wait/call",
            Some("o"),
            Some(json!({"arguments": {"seconds": 0}})),
        )
        .await
    };
    let (first, second) = tokio::join!(first, second);
    assert_eq!(first.json["data"], json!({"waited": 0.5}), "{}", first.text);
    assert_eq!(second.json["errorKind"], "rate_limited", "{}", second.text);
    assert!(second.json["error"].as_str().unwrap().contains("in flight"));
    let third = h
        .send(
            Method::POST,
            "/v1/tools/slow_wait/call",
            Some("o"),
            Some(json!({"arguments": {"seconds": 0}})),
        )
        .await;
    assert!(third.json["data"].is_object(), "{}", third.text);
}

#[tokio::test]
async fn exports_every_format_and_refuses_unknown_ones() {
    let h = Harness::new(Vec::new()).await;
    for format in [
        "openai",
        "openai-responses",
        "anthropic",
        "gemini",
        "gemini-json-schema",
        "mcp",
    ] {
        let r = h
            .api(
                Method::GET,
                "/v1/export/{format}",
                &format!("/v1/export/{format}"),
                None,
                None,
            )
            .await;
        assert_eq!(r.status, StatusCode::OK, "{format}: {}", r.text);
        assert_eq!(r.json["format"], format);
    }
    let r = h
        .api(
            Method::GET,
            "/v1/export/{format}",
            "/v1/export/openai?strict=true",
            None,
            None,
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    let r = h
        .api(
            Method::GET,
            "/v1/export/{format}",
            "/v1/export/anthropic?strict=true",
            None,
            None,
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert_eq!(r.json["document"][0]["strict"], true, "{}", r.text);
    // validate_output takes any JSON value, which no strict subset expresses.
    let r = h
        .api(
            Method::GET,
            "/v1/export/{format}",
            "/v1/export/anthropic?requireStrict=true",
            None,
            None,
        )
        .await;
    assert_eq!(r.status, StatusCode::UNPROCESSABLE_ENTITY, "{}", r.text);
    assert!(
        r.text.contains("cannot be strict") && r.text.contains("validate_output"),
        "{}",
        r.text
    );
    let r = h
        .api(
            Method::GET,
            "/v1/export/{format}",
            "/v1/export/cobol",
            None,
            None,
        )
        .await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    let r = h
        .api(
            Method::GET,
            "/v1/export/{format}",
            "/v1/export/gemini?strict=true",
            None,
            None,
        )
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    let r = h
        .api(
            Method::GET,
            "/v1/tools",
            "/v1/tools?category=nope",
            None,
            None,
        )
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert!(
        r.json["error"]["message"]
            .as_str()
            .unwrap()
            .contains("filesystem")
    );
    let r = h
        .api(
            Method::GET,
            "/v1/tools",
            "/v1/tools?category=filesystem&limit=2",
            None,
            None,
        )
        .await;
    assert_eq!(r.json["tools"].as_array().unwrap().len(), 2);
    let next = r.json["nextCursor"].as_str().unwrap().to_owned();
    let r = h
        .api(
            Method::GET,
            "/v1/tools",
            &format!("/v1/tools?category=filesystem&limit=2&cursor={next}"),
            None,
            None,
        )
        .await;
    assert_eq!(r.json["tools"].as_array().unwrap().len(), 2);
    let r = h
        .api(
            Method::GET,
            "/v1/tools",
            "/v1/tools?q=arithmetic",
            None,
            None,
        )
        .await;
    assert_eq!(r.json["tools"][0]["name"], "calculator");
}

#[tokio::test]
async fn dns_rebinding_and_body_limits() {
    let h = Harness::with_options(toolgate_server::GatewayOptions {
        max_body_bytes: 1024,
        ..Default::default()
    })
    .await;
    for (host, origin, want) in [
        ("evil.example.com", None, StatusCode::FORBIDDEN),
        (
            "localhost:7878",
            Some("http://evil.example.com"),
            StatusCode::FORBIDDEN,
        ),
        (
            "127.0.0.1:7878",
            Some("http://127.0.0.1:7878"),
            StatusCode::OK,
        ),
        ("[::1]:7878", None, StatusCode::OK),
    ] {
        let mut req = axum::http::Request::builder()
            .uri("/v1/tools")
            .header("host", host);
        if let Some(o) = origin {
            req = req.header("origin", o);
        }
        let resp = tower::ServiceExt::oneshot(
            h.router.clone(),
            req.body(axum::body::Body::empty()).unwrap(),
        )
        .await
        .unwrap();
        assert_eq!(resp.status(), want, "{host} {origin:?}");
        // MCP checks the same.
        let mut req = axum::http::Request::builder()
            .method("POST")
            .uri("/mcp")
            .header("host", host)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream");
        if let Some(o) = origin {
            req = req.header("origin", o);
        }
        let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
        let resp = tower::ServiceExt::oneshot(
            h.router.clone(),
            req.body(axum::body::Body::from(init.to_string())).unwrap(),
        )
        .await
        .unwrap();
        assert_eq!(
            resp.status().is_success(),
            want.is_success(),
            "/mcp {host} {origin:?}: {}",
            resp.status()
        );
    }
    let big = json!({ "arguments": { "expression": "1".repeat(4096) } });
    let r = h
        .send(
            Method::POST,
            "/v1/tools/calculator/call",
            None,
            Some(big.clone()),
        )
        .await;
    assert_eq!(r.status, StatusCode::PAYLOAD_TOO_LARGE);
    let rpc =
        json!({"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"pad": "1".repeat(4096)}});
    let r = h
        .send_with(
            Method::POST,
            "/mcp",
            None,
            Some(rpc),
            &[("accept", "application/json, text/event-stream")],
        )
        .await;
    assert_eq!(r.status, StatusCode::PAYLOAD_TOO_LARGE);
}

#[tokio::test]
async fn metrics_expose_the_design_metrics_in_prometheus_format() {
    let h = Harness::new(Vec::new()).await;
    h.send(
        Method::POST,
        "/v1/tools/calculator/call",
        None,
        Some(json!({"arguments": {"expression": "1"}})),
    )
    .await;
    h.send(
        Method::POST,
        "/v1/tools/calculator/call",
        None,
        Some(json!({"arguments": {}})),
    )
    .await;
    h.send(
        Method::POST,
        "/v1/tools",
        None,
        Some(definition(
            "metric_probe",
            "A tool created to make the creation counter move.",
        )),
    )
    .await;
    h.send(
        Method::POST,
        "/v1/tools",
        None,
        Some(json!({"name": "Bad", "description": ""})),
    )
    .await;
    let r = h.api(Method::GET, "/metrics", "/metrics", None, None).await;
    assert_eq!(r.status, StatusCode::OK);
    assert!(
        r.headers["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/plain")
    );
    for name in [
        "tools_calls",
        "tools_calls_errors",
        "tools_calls_duration",
        "tools_definitions_validation_duration",
        "tools_definitions_validation_failures",
        "tools_definitions_created",
        "tools_definitions_by_category",
    ] {
        assert!(
            r.text.lines().any(|l| l.starts_with(name)),
            "{name} missing from /metrics:\n{}",
            r.text
        );
    }
    assert!(r.text.contains("tool=\"calculator\""));
}

#[tokio::test]
async fn events_stream_definition_and_call_events() {
    use http_body_util::BodyExt;
    let h = Harness::new(Vec::new()).await;
    let gw = h.gw.clone();
    // The store follower feeds the hub, as `serve_http` starts it.
    gw.start_sync().await.unwrap();
    let req = axum::http::Request::builder()
        .uri("/v1/events")
        .header("host", "localhost")
        .body(axum::body::Body::empty())
        .unwrap();
    let resp = tower::ServiceExt::oneshot(h.router.clone(), req)
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(resp.headers()["content-type"], "text/event-stream");
    let mut body = resp.into_body();
    h.send(
        Method::POST,
        "/v1/tools",
        None,
        Some(definition(
            "evented",
            "A tool whose creation must appear on the event stream.",
        )),
    )
    .await;
    h.send(
        Method::POST,
        "/v1/tools/calculator/call",
        None,
        Some(json!({"arguments": {"expression": "1"}})),
    )
    .await;
    let pending = h
        .send(
            Method::POST,
            "/v1/tools/write_file/call",
            None,
            Some(json!({"arguments": {"path": "e.txt", "content": "e"}})),
        )
        .await;
    let id = pending.json["approval"]["id"].as_str().unwrap().to_owned();
    h.send(
        Method::POST,
        &format!("/v1/approvals/{id}/approve"),
        None,
        None,
    )
    .await;
    let mut seen = String::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while !(seen.contains("\"kind\":\"created\"")
        && seen.contains("event: call")
        && seen.contains("\"status\":\"executed\""))
    {
        let frame = tokio::time::timeout_at(deadline, body.frame())
            .await
            .expect("events arrive")
            .unwrap()
            .unwrap();
        if let Ok(data) = frame.into_data() {
            seen.push_str(&String::from_utf8_lossy(&data));
        }
    }
    assert!(seen.contains("\"kind\":\"created\""), "{seen}");
    assert!(seen.contains("\"tool\":\"evented\""), "{seen}");
    assert!(seen.contains("\"tool\":\"calculator\""), "{seen}");
    // The approval's life: created (pending), decided (approved), run (executed).
    assert!(seen.contains("event: approval"), "{seen}");
    for status in ["pending", "approved", "executed"] {
        assert!(
            seen.contains(&format!("\"id\":\"{id}\""))
                && seen.contains(&format!("\"status\":\"{status}\"")),
            "{status}: {seen}"
        );
    }
}

/// `GET /v1/events` read frame by frame, split into (event name, JSON data); the statuses of
/// the `approval` events read so far are kept per approval id, in order.
struct EventStream {
    body: axum::body::Body,
    buffer: String,
    approvals: std::collections::HashMap<String, Vec<String>>,
}

impl EventStream {
    async fn open(h: &Harness) -> Self {
        let req = axum::http::Request::builder()
            .uri("/v1/events")
            .header("host", "localhost")
            .body(axum::body::Body::empty())
            .unwrap();
        let resp = tower::ServiceExt::oneshot(h.router.clone(), req)
            .await
            .unwrap();
        assert_eq!(resp.status(), StatusCode::OK);
        Self {
            body: resp.into_body(),
            buffer: String::new(),
            approvals: std::collections::HashMap::new(),
        }
    }

    /// The next event, or `None` once `deadline` passes.
    async fn next(&mut self, deadline: tokio::time::Instant) -> Option<(String, Value)> {
        use http_body_util::BodyExt;
        loop {
            if let Some(end) = self.buffer.find("\n\n") {
                let block: String = self.buffer.drain(..end + 2).collect();
                let mut name = String::new();
                let mut data = String::new();
                for line in block.lines() {
                    if let Some(v) = line.strip_prefix("event:") {
                        name = v.trim().to_owned();
                    } else if let Some(v) = line.strip_prefix("data:") {
                        data.push_str(v.trim());
                    }
                }
                if name.is_empty() {
                    continue;
                }
                let data: Value = serde_json::from_str(&data).unwrap_or(Value::Null);
                if name == "approval" {
                    self.approvals
                        .entry(data["id"].as_str().unwrap().to_owned())
                        .or_default()
                        .push(data["status"].as_str().unwrap().to_owned());
                }
                return Some((name, data));
            }
            let frame = tokio::time::timeout_at(deadline, self.body.frame())
                .await
                .ok()?
                .unwrap()
                .unwrap();
            if let Ok(data) = frame.into_data() {
                self.buffer.push_str(&String::from_utf8_lossy(&data));
            }
        }
    }

    /// Reads events until approval `id` has had an event with `status` (`true`) or `deadline`
    /// passes (`false`).
    async fn wait_for(&mut self, id: &str, status: &str, deadline: tokio::time::Instant) -> bool {
        loop {
            if self.statuses(id).contains(&status) {
                return true;
            }
            if self.next(deadline).await.is_none() {
                return false;
            }
        }
    }

    /// Reads every event until `deadline`.
    async fn drain_until(&mut self, deadline: tokio::time::Instant) {
        while self.next(deadline).await.is_some() {}
    }

    /// The statuses of approval `id`'s events so far, in order.
    fn statuses(&self, id: &str) -> Vec<&str> {
        self.approvals
            .get(id)
            .map(|v| v.iter().map(String::as_str).collect())
            .unwrap_or_default()
    }
}

/// A pending approval of `write_file`, asked for over REST.
async fn pending_write(h: &Harness, path: &str) -> String {
    let r = h
        .send(
            Method::POST,
            "/v1/tools/write_file/call",
            None,
            Some(json!({"arguments": {"path": path, "content": "x"}})),
        )
        .await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.text);
    r.json["approval"]["id"].as_str().unwrap().to_owned()
}

fn within(seconds: f64) -> tokio::time::Instant {
    tokio::time::Instant::now() + Duration::from_secs_f64(seconds)
}

/// Three rounds of the approval follower: long enough for it to repeat anything it would.
fn follower_rounds() -> tokio::time::Instant {
    within(3.0 * toolgate_server::APPROVAL_POLL.as_secs_f64())
}

#[tokio::test]
async fn approvals_decided_by_another_process_reach_the_event_stream() {
    let h = Harness::new(Vec::new()).await;
    decided_elsewhere_body(&h).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approvals_decided_by_another_instance_reach_the_event_stream_on_postgres() {
    let Some(h) = Harness::on_postgres(toolgate_server::GatewayOptions::default()).await else {
        return;
    };
    decided_elsewhere_body(&h).await;
    h.cleanup().await;
}

async fn decided_elsewhere_body(h: &Harness) {
    h.gw.start_sync().await.unwrap();
    let mut events = EventStream::open(h).await;
    let denied = pending_write(h, "denied.txt").await;
    let ran = pending_write(h, "ran.txt").await;
    // The CLI (or another instance) opens the same database and decides there.
    let cli = h.second_store().await;
    cli.decide_approval(&denied, false, "cli:tester", Some("not today"))
        .await
        .unwrap();
    assert!(
        events.wait_for(&denied, "denied", within(3.0)).await,
        "the decision made elsewhere arrives as an event: {:?}",
        events.approvals
    );
    // Approved and run elsewhere (the CLI runs what it approves): the result arrives too.
    cli.decide_approval(&ran, true, "cli:tester", None)
        .await
        .unwrap();
    cli.claim_approval(&ran).await.unwrap().unwrap();
    cli.finish_approval(&ran, &json!({"tool": "write_file", "data": {}}))
        .await
        .unwrap();
    assert!(
        events.wait_for(&ran, "executed", within(3.0)).await,
        "{:?}",
        events.approvals
    );
    // Each status once, however many times the follower looks.
    events.drain_until(follower_rounds()).await;
    assert_eq!(events.statuses(&denied), ["pending", "denied"]);
    let of_ran = events.statuses(&ran);
    assert_eq!(of_ran.first(), Some(&"pending"), "{of_ran:?}");
    assert_eq!(of_ran.last(), Some(&"executed"), "{of_ran:?}");
    let mut unique = of_ran.clone();
    unique.dedup();
    assert_eq!(unique, of_ran, "no status twice");
    cli.close().await;
}

#[tokio::test]
async fn approval_events_of_changes_made_here_are_not_repeated() {
    let h = Harness::new(Vec::new()).await;
    h.gw.start_sync().await.unwrap();
    let mut events = EventStream::open(&h).await;
    let denied = pending_write(&h, "no.txt").await;
    let ran = pending_write(&h, "yes.txt").await;
    let r = h
        .send(
            Method::POST,
            &format!("/v1/approvals/{denied}/deny"),
            None,
            None,
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    let r = h
        .send(
            Method::POST,
            &format!("/v1/approvals/{ran}/approve"),
            None,
            None,
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert!(
        events.wait_for(&ran, "executed", within(4.0)).await,
        "the approved call ran: {:?}",
        events.approvals
    );
    events.drain_until(follower_rounds()).await;
    assert_eq!(events.statuses(&denied), ["pending", "denied"]);
    // `running` is not announced by the run itself; the follower may have caught it, once.
    let of_ran = events.statuses(&ran);
    let mut announced = of_ran.clone();
    announced.retain(|s| *s != "running");
    assert_eq!(announced, ["pending", "approved", "executed"], "{of_ran:?}");
    assert!(of_ran.iter().filter(|s| **s == "running").count() <= 1);
}

/// Sends one HTTP/1.1 request over a fresh connection and returns the response body.
async fn raw_post(addr: std::net::SocketAddr, path: &str, body: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let request = format!(
        "POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).await.unwrap();
    response
        .split("\r\n\r\n")
        .nth(1)
        .unwrap_or_default()
        .to_owned()
}

async fn shutdown_during_a_call(grace: Duration, seconds: f64) -> (Value, Duration, Harness) {
    let h = Harness::with_options(toolgate_server::GatewayOptions {
        grace,
        ..Default::default()
    })
    .await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let shutdown = toolgate_core::CancellationToken::new();
    let server = tokio::spawn(h.gw.clone().serve_http(listener, shutdown.clone()));
    let body = json!({ "arguments": { "seconds": seconds } }).to_string();
    let call = tokio::spawn(async move { raw_post(addr, "/v1/tools/slow_wait/call", &body).await });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let started = std::time::Instant::now();
    shutdown.cancel();
    // No new connections once shutdown has begun.
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(
        tokio::net::TcpStream::connect(addr).await.is_err(),
        "the listener still accepts during shutdown"
    );
    let response = call.await.unwrap();
    tokio::time::timeout(Duration::from_secs(10), server)
        .await
        .expect("the server stops")
        .unwrap()
        .unwrap();
    let envelope: Value = serde_json::from_str(response.trim()).unwrap_or_else(|_| {
        // Chunked encoding: the JSON sits between the chunk-size lines.
        let start = response.find('{').unwrap();
        let end = response.rfind('}').unwrap();
        serde_json::from_str(&response[start..=end]).unwrap()
    });
    (envelope, started.elapsed(), h)
}

#[tokio::test]
async fn shutdown_lets_calls_finish_within_the_grace_period() {
    let (envelope, took, h) = shutdown_during_a_call(Duration::from_secs(5), 0.8).await;
    assert_eq!(envelope["data"], json!({"waited": 0.8}), "{envelope}");
    assert!(took < Duration::from_secs(4), "{took:?}");
    let id = toolgate_core::CallId::parse(envelope["callId"].as_str().unwrap()).unwrap();
    let audited = h.gw.store().audit_call(id).await.unwrap().unwrap();
    assert!(audited.finished.unwrap().error_kind().is_none());
}

#[tokio::test]
async fn shutdown_cancels_calls_after_the_grace_period_and_audits_them() {
    let (envelope, took, h) = shutdown_during_a_call(Duration::from_millis(200), 30.0).await;
    assert_eq!(envelope["errorKind"], "cancelled", "{envelope}");
    assert!(took < Duration::from_secs(5), "{took:?}");
    let id = toolgate_core::CallId::parse(envelope["callId"].as_str().unwrap()).unwrap();
    let audited = h.gw.store().audit_call(id).await.unwrap().unwrap();
    let finished = audited.finished.unwrap();
    assert_eq!(
        finished.error_kind(),
        Some(toolgate_core::ErrorKind::Cancelled)
    );
    // The audit log says who cancelled it and where the call came from.
    assert_eq!(finished.cancelled_by.as_deref(), Some("shutdown"));
    assert_eq!(finished.origin, Some(toolgate_core::CallOrigin::rest(None)));
}

#[tokio::test]
async fn refuses_non_loopback_addresses_without_principals() {
    let open =
        toolgate_server::Auth::from_entries(&[], &toolgate_store::Tier::named("core").unwrap())
            .unwrap();
    let err = toolgate_server::check_binding("0.0.0.0:7878".parse().unwrap(), &open).unwrap_err();
    assert!(err.to_string().contains("without principals"), "{err}");
    assert!(toolgate_server::check_binding("127.0.0.1:7878".parse().unwrap(), &open).is_ok());
    assert!(toolgate_server::check_binding("[::1]:7878".parse().unwrap(), &open).is_ok());
    let with = toolgate_server::Auth::from_entries(
        &[principal("a", &["*"], None, "t", Quota::default())],
        &toolgate_store::Tier::named("core").unwrap(),
    )
    .unwrap();
    assert!(toolgate_server::check_binding("0.0.0.0:7878".parse().unwrap(), &with).is_ok());
}

#[tokio::test]
async fn approvals_wait_are_decided_over_rest_and_run_once() {
    let h = with_principals().await;
    let call = |key: Option<&str>, content: &str| {
        let mut body = json!({ "arguments": { "path": "approved.txt", "content": content }, "reason": "release notes" });
        if let Some(k) = key {
            body["idempotencyKey"] = json!(k);
        }
        body
    };
    let route = "/v1/tools/{name}/call";
    let uri = "/v1/tools/write_file/call";
    let r = h
        .api(
            Method::POST,
            route,
            uri,
            Some(READER),
            Some(call(Some("k1"), "v1")),
        )
        .await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.text);
    let id = r.json["approval"]["id"].as_str().unwrap().to_owned();
    assert_eq!(r.json["approval"]["status"], "pending");
    assert_eq!(r.json["approval"]["reason"], "release notes");
    assert_eq!(r.json["result"]["errorKind"], "confirmation_required");
    assert_eq!(r.json["result"]["approvalId"], json!(id));
    assert_eq!(r.json["watch"]["approval"], format!("/v1/approvals/{id}"));
    // The same key: the same approval.
    let again = h
        .api(
            Method::POST,
            route,
            uri,
            Some(READER),
            Some(call(Some("k1"), "v1")),
        )
        .await;
    assert_eq!(again.json["approval"]["id"], json!(id));

    let one = "/v1/approvals/{id}";
    let at = format!("/v1/approvals/{id}");
    let r = h.api(Method::GET, one, &at, Some(READER), None).await;
    assert_eq!(r.status, StatusCode::OK);
    // A principal that cannot see write_file cannot see its approvals either.
    let r = h.api(Method::GET, one, &at, Some(CALC_ONLY), None).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    // Only deciders decide.
    let approve = "/v1/approvals/{id}/approve";
    let r = h
        .api(
            Method::POST,
            approve,
            &format!("{at}/approve"),
            Some(READER),
            None,
        )
        .await;
    assert_eq!(r.status, StatusCode::FORBIDDEN, "{}", r.text);
    assert!(r.text.contains("toolgate.approvals.decide"));
    let r = h
        .api(
            Method::POST,
            approve,
            &format!("{at}/approve"),
            Some(ADMIN),
            Some(json!({ "reason": "ok" })),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert_eq!(r.json["decidedBy"], "api:admin");

    // It runs once, in the background; the approval then holds the result.
    let mut done = Value::Null;
    for _ in 0..100 {
        let r = h.api(Method::GET, one, &at, Some(READER), None).await;
        if r.json["status"] == "executed" {
            done = r.json;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(done["result"]["data"]["bytesWritten"], 2, "{done}");
    // The stored result is in the call history under the original call id.
    let call_id = done["callId"].as_str().unwrap();
    let r = h
        .api(
            Method::GET,
            "/v1/calls/{callId}",
            &format!("/v1/calls/{call_id}"),
            Some(READER),
            None,
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert_eq!(r.json["finished"]["tool"], "write_file", "{}", r.text);
    assert_eq!(r.json["interrupted"], false, "{}", r.text);
    let r = h
        .api(
            Method::POST,
            approve,
            &format!("{at}/approve"),
            Some(ADMIN),
            None,
        )
        .await;
    assert_eq!(r.status, StatusCode::CONFLICT, "{}", r.text);
    // The same key after it ran: that call's result, not a new approval.
    let replay = h
        .api(
            Method::POST,
            route,
            uri,
            Some(READER),
            Some(call(Some("k1"), "v1")),
        )
        .await;
    assert_eq!(replay.status, StatusCode::OK, "{}", replay.text);
    assert_eq!(replay.json["data"]["bytesWritten"], 2);
    // The same key with other arguments: refused, saying why; nothing new waits.
    let clash = h
        .api(
            Method::POST,
            route,
            uri,
            Some(READER),
            Some(call(Some("k1"), "other")),
        )
        .await;
    assert_eq!(clash.status, StatusCode::OK, "{}", clash.text);
    assert_eq!(clash.json["errorKind"], "confirmation_required");
    assert!(
        clash.text.contains("was already used for another call"),
        "{}",
        clash.text
    );
    assert!(clash.json.get("approvalId").is_none());

    // Denied: never runs.
    let r = h
        .api(
            Method::POST,
            route,
            uri,
            Some(READER),
            Some(call(None, "denied")),
        )
        .await;
    let denied = r.json["approval"]["id"].as_str().unwrap().to_owned();
    let r = h
        .api(
            Method::POST,
            "/v1/approvals/{id}/deny",
            &format!("/v1/approvals/{denied}/deny"),
            Some(ADMIN),
            None,
        )
        .await;
    assert_eq!(r.json["status"], "denied");
    let list = h
        .api(
            Method::GET,
            "/v1/approvals",
            "/v1/approvals?status=denied",
            Some(READER),
            None,
        )
        .await;
    let ids: Vec<&str> = list.json["approvals"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, [denied.as_str()]);
    let r = h
        .api(
            Method::GET,
            "/v1/approvals",
            "/v1/approvals?status=bogus",
            Some(READER),
            None,
        )
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn filters_the_web_ui_uses_builtin_outcome_principal_and_one_tool_exports() {
    let h = Harness::new(Vec::new()).await;
    let names = |r: &common::Reply, key: &str, field: &str| -> Vec<String> {
        r.json[key]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t[field].as_str().unwrap().to_owned())
            .collect()
    };
    let custom = h
        .api(
            Method::GET,
            "/v1/tools",
            "/v1/tools?builtin=false",
            None,
            None,
        )
        .await;
    assert_eq!(names(&custom, "tools", "name"), ["big_text", "slow_wait"]);
    let builtin = h
        .api(
            Method::GET,
            "/v1/tools",
            "/v1/tools?builtin=true",
            None,
            None,
        )
        .await;
    let builtin_names = names(&builtin, "tools", "name");
    assert!(builtin_names.contains(&"calculator".to_owned()));
    assert!(!builtin_names.contains(&"big_text".to_owned()));
    assert!(
        builtin.json["tools"]
            .as_array()
            .unwrap()
            .iter()
            .all(|t| t["builtin"] == true)
    );
    // axum's own query rejection (plain text, as for any malformed query string).
    let r = h
        .send(Method::GET, "/v1/tools?builtin=maybe", None, None)
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);

    for args in [
        json!({"expression": "1+1"}),
        json!({}),
        json!({"expression": "2+2"}),
    ] {
        h.send(
            Method::POST,
            "/v1/tools/calculator/call",
            None,
            Some(json!({ "arguments": args })),
        )
        .await;
    }
    h.send(
        Method::POST,
        "/v1/tools/big_text/call",
        None,
        Some(json!({"arguments": {"bytes": 3}})),
    )
    .await;
    let count = |uri: &'static str| {
        let h = &h;
        async move {
            let r = h.api(Method::GET, "/v1/calls", uri, None, None).await;
            assert_eq!(r.status, StatusCode::OK, "{uri}: {}", r.text);
            r.json["calls"].as_array().unwrap().len()
        }
    };
    assert_eq!(count("/v1/calls?outcome=ok").await, 3);
    assert_eq!(count("/v1/calls?outcome=error").await, 1);
    assert_eq!(count("/v1/calls?outcome=validation").await, 1);
    assert_eq!(count("/v1/calls?outcome=timeout").await, 0);
    assert_eq!(count("/v1/calls?outcome=ok&tool=calculator").await, 2);
    assert_eq!(count("/v1/calls?principal=local").await, 4);
    assert_eq!(count("/v1/calls?principal=someone").await, 0);
    let r = h
        .api(
            Method::GET,
            "/v1/calls",
            "/v1/calls?outcome=bogus",
            None,
            None,
        )
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert!(r.text.contains("confirmation_required"), "{}", r.text);
    // Filtered pages follow the cursor to the end.
    let mut seen = Vec::new();
    let mut uri = "/v1/calls?outcome=ok&limit=2".to_owned();
    for _ in 0..5 {
        let r = h.api(Method::GET, "/v1/calls", &uri, None, None).await;
        seen.extend(names(&r, "calls", "tool"));
        match r.json["nextCursor"].as_str() {
            Some(c) => uri = format!("/v1/calls?outcome=ok&limit=2&cursor={c}"),
            None => break,
        }
    }
    assert_eq!(seen, ["big_text", "calculator", "calculator"]);

    let r = h
        .api(
            Method::GET,
            "/v1/export/{format}",
            "/v1/export/anthropic?tool=calculator",
            None,
            None,
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    let exported = r.json["document"].to_string();
    assert!(exported.contains("\"calculator\""), "{exported}");
    assert!(!exported.contains("read_file"), "{exported}");
    let r = h
        .api(
            Method::GET,
            "/v1/export/{format}",
            "/v1/export/mcp?tool=nope",
            None,
            None,
        )
        .await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
}
