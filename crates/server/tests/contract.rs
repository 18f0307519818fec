//! The REST contract (issue 18 point 4): every error is the JSON error envelope — axum's own
//! rejections included —, the OpenAPI document is served per mode and states what the server
//! enforces, and the server enforces it (bounds, enums, object bodies, JSON content type, 404
//! for an unknown tool's call). schemathesis checks the same end to end
//! (`scripts/schemathesis.sh`); these pin each case down.
#![cfg(test)]

mod common;

use axum::body::Body;
use axum::http::{Method, Request, StatusCode};
use common::{Harness, Reply, principal};
use http_body_util::BodyExt;
use serde_json::{Value, json};
use toolgate_core::Quota;
use tower::ServiceExt;

const ADMIN: &str = "admin-token";

/// Sends a raw request (any body, any content type) through the router.
async fn raw(
    h: &Harness,
    method: Method,
    uri: &str,
    content_type: Option<&str>,
    body: &str,
) -> Reply {
    let mut req = Request::builder()
        .method(method)
        .uri(uri)
        .header("host", "localhost:7878");
    if let Some(ct) = content_type {
        req = req.header("content-type", ct);
    }
    let response = h
        .router
        .clone()
        .oneshot(req.body(Body::from(body.to_owned())).unwrap())
        .await
        .unwrap();
    let status = response.status();
    let headers = response.headers().clone();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    Reply {
        status,
        headers,
        text: String::from_utf8_lossy(&bytes).into_owned(),
        json: serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    }
}

/// The reply is the error envelope with this status and kind.
fn assert_envelope(reply: &Reply, status: StatusCode, kind: &str) {
    assert_eq!(reply.status, status, "{}", reply.text);
    assert_eq!(
        reply.headers["content-type"], "application/json",
        "{}",
        reply.text
    );
    assert_eq!(reply.json["error"]["kind"], kind, "{}", reply.text);
    assert!(
        reply.json["error"]["message"]
            .as_str()
            .is_some_and(|m| !m.is_empty()),
        "{}",
        reply.text
    );
}

#[tokio::test]
async fn rejected_query_strings_paths_and_methods_answer_the_envelope() {
    let h = Harness::new(Vec::new()).await;
    for uri in [
        "/v1/calls?nope=1",
        "/v1/calls?limit=abc",
        "/v1/approvals?nope=1",
        "/v1/approvals?limit=-1",
        "/v1/export/mcp?nope=1",
        "/v1/export/openai?strict=maybe",
        "/v1/tools?builtin=perhaps",
        "/v1/tools/%FF",
    ] {
        let reply = h.send(Method::GET, uri, None, None).await;
        assert_envelope(&reply, StatusCode::BAD_REQUEST, "bad_request");
        assert!(
            reply.json["error"]["message"]
                .as_str()
                .unwrap()
                .contains("/openapi.json"),
            "{uri}: {}",
            reply.text
        );
    }
    // A method the route does not have: 405, the envelope, and Allow kept.
    let reply = h.send(Method::PATCH, "/v1/tools", None, None).await;
    assert_envelope(&reply, StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed");
    let allow = reply.headers["allow"].to_str().unwrap();
    assert!(allow.contains("GET") && allow.contains("POST"), "{allow}");
    assert!(
        reply.json["error"]["message"]
            .as_str()
            .unwrap()
            .contains("PATCH")
    );
}

#[tokio::test]
async fn bodies_must_be_json_objects_sent_as_json() {
    let h = Harness::new(Vec::new()).await;
    let call = "/v1/tools/calculator/call";
    let args = r#"{"arguments": {"expression": "1+1"}}"#;
    // Another content type, or none, with a body: 415.
    for ct in [
        Some("text/plain"),
        Some("application/x-www-form-urlencoded"),
        None,
    ] {
        let reply = raw(&h, Method::POST, call, ct, args).await;
        assert_envelope(
            &reply,
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
        );
        h.conforms(&Method::POST, "/v1/tools/{name}/call", &reply);
    }
    // application/json with parameters, and +json types, are JSON.
    for ct in [
        "application/json; charset=utf-8",
        "application/merge-patch+json",
    ] {
        let reply = raw(&h, Method::POST, call, Some(ct), args).await;
        assert_eq!(reply.status, StatusCode::OK, "{ct}: {}", reply.text);
        assert_eq!(reply.json["data"], json!({"result": 2}));
    }
    // An empty body needs no content type (approve, deny and call take one).
    let reply = raw(&h, Method::POST, "/v1/tools/calculator/call", None, "").await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text);
    assert_eq!(reply.json["errorKind"], "validation");
    // Not an object: serde alone would read a struct from an array of its fields.
    for body in [
        "[null, null]",
        "[{\"expression\": \"1\"}]",
        "42",
        "\"x\"",
        "null",
    ] {
        let reply = raw(&h, Method::POST, call, Some("application/json"), body).await;
        assert_envelope(&reply, StatusCode::BAD_REQUEST, "bad_request");
        h.conforms(&Method::POST, "/v1/tools/{name}/call", &reply);
    }
    for arguments in [json!([1]), json!("1+1"), json!(3)] {
        let reply = h
            .api(
                Method::POST,
                "/v1/tools/{name}/call",
                call,
                None,
                Some(json!({ "arguments": arguments })),
            )
            .await;
        assert_envelope(&reply, StatusCode::BAD_REQUEST, "bad_request");
        assert!(
            reply.json["error"]["message"]
                .as_str()
                .unwrap()
                .contains("arguments must be a JSON object")
        );
    }
    // null means none, as the document says.
    let reply = h
        .api(
            Method::POST,
            "/v1/tools/{name}/call",
            call,
            None,
            Some(json!({ "arguments": null, "reason": null, "idempotencyKey": null })),
        )
        .await;
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(reply.json["errorKind"], "validation");
    // A definition is an object too.
    let reply = raw(
        &h,
        Method::POST,
        "/v1/tools",
        Some("application/json"),
        r#"["x_tool", null, "d"]"#,
    )
    .await;
    assert_envelope(&reply, StatusCode::BAD_REQUEST, "bad_request");
    let reply = raw(
        &h,
        Method::POST,
        "/v1/approvals/apr_00000000000000000000000000000000/deny",
        Some("application/json"),
        "[\"why\"]",
    )
    .await;
    assert_envelope(&reply, StatusCode::BAD_REQUEST, "bad_request");
}

#[tokio::test]
async fn validate_without_a_body_is_a_bad_request() {
    let h = Harness::new(Vec::new()).await;
    let route = "/v1/tools/validate";
    let empty = h.api(Method::POST, route, route, None, None).await;
    assert_envelope(&empty, StatusCode::BAD_REQUEST, "bad_request");
    for body in ["[]", "\"tool\"", "{not json"] {
        let reply = raw(&h, Method::POST, route, Some("application/json"), body).await;
        assert_envelope(&reply, StatusCode::BAD_REQUEST, "bad_request");
        h.conforms(&Method::POST, route, &reply);
    }
    // Any object gets a verdict.
    let verdict = h
        .api(
            Method::POST,
            route,
            route,
            None,
            Some(json!({ "name": "x" })),
        )
        .await;
    assert_eq!(verdict.status, StatusCode::OK);
    assert_eq!(verdict.json["valid"], false);
}

#[tokio::test]
async fn an_unknown_tools_call_is_a_404_with_the_envelope() {
    let h = Harness::new(Vec::new()).await;
    let reply = h
        .api(
            Method::POST,
            "/v1/tools/{name}/call",
            "/v1/tools/no_such_tool/call",
            None,
            Some(json!({ "arguments": {} })),
        )
        .await;
    assert_eq!(reply.status, StatusCode::NOT_FOUND);
    assert_eq!(reply.json["errorKind"], "not_found");
    assert_eq!(reply.json["tool"], "no_such_tool");
    assert!(
        reply.json["callId"].is_string(),
        "the envelope stays the body"
    );
    // A tool that exists and answers not_found itself (a missing file) is a 200.
    let missing_file = h
        .api(
            Method::POST,
            "/v1/tools/{name}/call",
            "/v1/tools/read_file/call",
            None,
            Some(json!({ "arguments": { "path": "no-such-file.txt" } })),
        )
        .await;
    assert_eq!(missing_file.status, StatusCode::OK, "{}", missing_file.text);
    assert!(missing_file.json["errorKind"].is_string());
}

#[tokio::test]
async fn a_hidden_tools_call_is_a_404_like_a_missing_one() {
    let h = Harness::new(vec![principal(
        "calc",
        &["tool.*"],
        Some(&["calculator"]),
        ADMIN,
        Quota::default(),
    )])
    .await;
    for uri in ["/v1/tools/read_file/call", "/v1/tools/read_filf/call"] {
        let reply = h
            .api(
                Method::POST,
                "/v1/tools/{name}/call",
                uri,
                Some(ADMIN),
                Some(json!({ "arguments": { "path": "a" } })),
            )
            .await;
        assert_eq!(reply.status, StatusCode::NOT_FOUND, "{uri}");
        assert_eq!(reply.json["errorKind"], "not_found");
    }
}

#[tokio::test]
async fn limits_and_filters_outside_the_document_are_refused() {
    let h = Harness::new(Vec::new()).await;
    for (route, uri) in [
        ("/v1/tools", "/v1/tools?limit=0"),
        ("/v1/tools", "/v1/tools?limit=501"),
        ("/v1/tools", "/v1/tools?category="),
        ("/v1/tools", "/v1/tools?effect=nope"),
        ("/v1/calls", "/v1/calls?limit=0"),
        ("/v1/calls", "/v1/calls?limit=100000"),
        ("/v1/calls", "/v1/calls?outcome="),
        ("/v1/calls", "/v1/calls?cursor=-5"),
        ("/v1/calls", "/v1/calls?cursor=%2B5"),
        ("/v1/approvals", "/v1/approvals?limit=0"),
        ("/v1/approvals", "/v1/approvals?limit=501"),
        ("/v1/approvals", "/v1/approvals?status="),
    ] {
        let reply = h.api(Method::GET, route, uri, None, None).await;
        assert_envelope(&reply, StatusCode::BAD_REQUEST, "bad_request");
    }
    for (route, uri) in [
        ("/v1/tools", "/v1/tools?limit=1"),
        ("/v1/tools", "/v1/tools?limit=500&cursor="),
        ("/v1/calls", "/v1/calls?limit=500&cursor="),
        ("/v1/calls", "/v1/calls?outcome=not_found&cursor=0"),
        ("/v1/approvals", "/v1/approvals?limit=1&status=pending"),
    ] {
        let reply = h.api(Method::GET, route, uri, None, None).await;
        assert_eq!(reply.status, StatusCode::OK, "{uri}: {}", reply.text);
    }
    // The document says the same.
    let doc = &h.doc;
    let calls = &doc["paths"]["/v1/calls"]["get"]["parameters"];
    let param = |name: &str| {
        calls
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == name)
            .unwrap()["schema"]
            .clone()
    };
    assert_eq!(param("limit")["minimum"], 1);
    assert_eq!(param("limit")["maximum"], 500);
    let outcomes = param("outcome")["enum"].as_array().unwrap().clone();
    assert!(outcomes.contains(&json!("ok")) && outcomes.contains(&json!("not_found")));
}

#[tokio::test]
async fn the_document_states_formats_patterns_and_unknown_fields() {
    let doc = toolgate_server::openapi_document();
    let param = |path: &str, method: &str, name: &str| {
        doc["paths"][path][method]["parameters"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == name)
            .unwrap()["schema"]
            .clone()
    };
    assert_eq!(
        param("/v1/calls/{callId}", "get", "callId")["format"],
        "uuid"
    );
    assert_eq!(
        param("/v1/calls/{callId}/output", "get", "callId")["format"],
        "uuid"
    );
    let name = param("/v1/tools/{name}", "get", "name");
    assert_eq!(name["pattern"], "^[a-z][a-z0-9_]*$");
    assert_eq!(name["maxLength"], toolgate_core::MAX_NAME_LEN);
    let schemas = &doc["components"]["schemas"];
    for schema in ["Definition", "CallBody", "DecisionBody"] {
        assert_eq!(schemas[schema]["additionalProperties"], false, "{schema}");
    }
    // Every key the document allows is one core reads: a definition with each of them parses.
    let keys: Vec<String> = schemas["Definition"]["properties"]
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect();
    for key in &keys {
        let text = json!({ "name": "x_tool", "description": "d", key.as_str(): Value::Null });
        let parsed =
            toolgate_core::ToolDefinition::parse(&text.to_string(), toolgate_core::Format::Json);
        assert!(
            !parsed
                .as_ref()
                .err()
                .is_some_and(|e| e.to_string().contains("unknown field")),
            "{key}: {parsed:?}"
        );
        // `null` is allowed by the document exactly where core reads it as absent: a server
        // that took a null the document forbids fails schemathesis (ST201), and the reverse
        // would send clients a 422 the document did not announce.
        let property = jsonschema::draft202012::new(&schemas["Definition"]["properties"][key])
            .unwrap_or_else(|e| panic!("{key}: {e}"));
        assert_eq!(
            property.is_valid(&Value::Null),
            parsed.is_ok(),
            "{key}: the document and core disagree on null ({parsed:?})"
        );
    }
    // /mcp is not a REST route: its contract is the MCP specification.
    assert!(doc["paths"].get("/mcp").is_none());
}

#[tokio::test]
async fn the_document_is_served_per_mode() {
    // Local mode: no security scheme, no token asked, no 401 answers.
    let local = Harness::new(Vec::new()).await;
    let doc = local
        .send(Method::GET, "/openapi.json", None, None)
        .await
        .json;
    assert!(doc.get("security").is_none());
    assert!(doc["components"].get("securitySchemes").is_none());
    for (path, ops) in doc["paths"].as_object().unwrap() {
        for (method, op) in ops.as_object().unwrap() {
            assert!(
                op["responses"].get("401").is_none(),
                "{method} {path} lists 401 in local mode"
            );
        }
    }
    assert_eq!(doc, toolgate_server::openapi_document_for(false));
    // With principals: bearer tokens, 401 listed.
    let tokens = Harness::new(vec![principal(
        "admin",
        &["*"],
        None,
        ADMIN,
        Quota::default(),
    )])
    .await;
    let doc = tokens
        .send(Method::GET, "/openapi.json", None, None)
        .await
        .json;
    assert_eq!(doc["security"], json!([{ "bearer": [] }]));
    assert_eq!(
        doc["components"]["securitySchemes"]["bearer"]["scheme"],
        "bearer"
    );
    assert!(doc["paths"]["/v1/tools"]["get"]["responses"]["401"].is_object());
    assert_eq!(doc, toolgate_server::openapi_document());
}

#[tokio::test]
async fn a_body_over_the_limit_is_a_413_envelope() {
    let h = Harness::with_options(toolgate_server::GatewayOptions {
        max_body_bytes: 64,
        ..Default::default()
    })
    .await;
    let body = json!({ "arguments": { "expression": "1+".repeat(100) + "1" } });
    let reply = h
        .api(
            Method::POST,
            "/v1/tools/{name}/call",
            "/v1/tools/calculator/call",
            None,
            Some(body),
        )
        .await;
    assert_envelope(&reply, StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large");
    assert!(
        reply.json["error"]["message"]
            .as_str()
            .unwrap()
            .contains("max_body_bytes")
    );
}
