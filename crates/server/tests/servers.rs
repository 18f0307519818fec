//! `/v1/servers` through the real router: the routes answer as `/openapi.json` says (each reply
//! validated against it), reading needs a token, changing needs `toolgate.servers.manage`, an
//! approval must say what it approves, and `/healthz` carries every server's state.
#![cfg(test)]

mod common;

use axum::http::{Method, StatusCode};
use common::{Harness, principal};
use serde_json::json;
use toolgate_core::Quota;

const ADMIN: &str = "admin-token";
const READER: &str = "reader-token";

async fn with_principals() -> Harness {
    Harness::new(vec![
        principal("admin", &["*"], None, ADMIN, Quota::default()),
        principal("reader", &["tool.*"], None, READER, Quota::default()),
    ])
    .await
}

#[tokio::test]
async fn listing_needs_a_token_and_answers_the_documented_shape() {
    let h = with_principals().await;
    let r = h
        .api(Method::GET, "/v1/servers", "/v1/servers", None, None)
        .await;
    assert_eq!(r.status, StatusCode::UNAUTHORIZED);
    let r = h
        .api(
            Method::GET,
            "/v1/servers",
            "/v1/servers",
            Some(READER),
            None,
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert_eq!(r.json, json!({ "servers": [] }));
}

#[tokio::test]
async fn an_unknown_server_is_404_with_the_way_to_list_them() {
    let h = with_principals().await;
    for (method, route, uri) in [
        (Method::GET, "/v1/servers/{name}", "/v1/servers/nope"),
        (
            Method::GET,
            "/v1/servers/{name}/tools",
            "/v1/servers/nope/tools",
        ),
        (Method::DELETE, "/v1/servers/{name}", "/v1/servers/nope"),
        (
            Method::POST,
            "/v1/servers/{name}/restart",
            "/v1/servers/nope/restart",
        ),
    ] {
        let r = h.api(method.clone(), route, uri, Some(ADMIN), None).await;
        assert_eq!(
            r.status,
            StatusCode::NOT_FOUND,
            "{method} {uri}: {}",
            r.text
        );
        assert_eq!(r.json["error"]["kind"], "not_found");
        let message = r.json["error"]["message"].as_str().unwrap();
        assert!(
            message.contains("nope") && message.contains("GET /v1/servers"),
            "{message}"
        );
    }
    let r = h
        .api(
            Method::POST,
            "/v1/servers/{name}/approve",
            "/v1/servers/nope/approve",
            Some(ADMIN),
            Some(json!({ "all": true })),
        )
        .await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.text);
}

#[tokio::test]
async fn changing_needs_the_manage_permission() {
    let h = with_principals().await;
    for (method, route, uri, body) in [
        (
            Method::DELETE,
            "/v1/servers/{name}",
            "/v1/servers/files",
            None,
        ),
        (
            Method::POST,
            "/v1/servers/{name}/restart",
            "/v1/servers/files/restart",
            None,
        ),
        (
            Method::POST,
            "/v1/servers/{name}/approve",
            "/v1/servers/files/approve",
            Some(json!({ "all": true })),
        ),
    ] {
        let r = h.api(method.clone(), route, uri, Some(READER), body).await;
        assert_eq!(
            r.status,
            StatusCode::FORBIDDEN,
            "{method} {uri}: {}",
            r.text
        );
        let message = r.json["error"]["message"].as_str().unwrap();
        assert!(message.contains("toolgate.servers.manage"), "{message}");
    }
}

#[tokio::test]
async fn an_approval_must_say_what_it_approves() {
    let h = with_principals().await;
    let route = "/v1/servers/{name}/approve";
    let uri = "/v1/servers/files/approve";
    for body in [
        None,
        Some(json!({})),
        Some(json!({ "tools": [] })),
        Some(json!({ "all": false })),
        Some(json!({ "tools": ["read_file"], "all": true })),
        Some(json!({ "everything": true })),
        Some(json!(["read_file"])),
    ] {
        let r = h
            .api(Method::POST, route, uri, Some(ADMIN), body.clone())
            .await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{body:?}: {}", r.text);
        let message = r.json["error"]["message"].as_str().unwrap();
        assert!(message.contains("{\"all\": true}"), "{body:?}: {message}");
    }
}

#[tokio::test]
async fn healthz_carries_the_servers_states() {
    let h = Harness::new(Vec::new()).await;
    let r = h.api(Method::GET, "/healthz", "/healthz", None, None).await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(r.json["servers"], json!([]));
}

#[tokio::test]
async fn a_real_server_added_over_rest_waits_for_review_and_a_rug_pull_is_quarantined() {
    let Some(launch) = toolgate_test_support::mcp_fixtures::py_server("the /v1/servers test")
    else {
        return;
    };
    let h = with_principals().await;
    let drift = h.dir.path().join("drift");
    let entry = json!({
        "command": launch.program_str(), "args": launch.args,
        // The sandbox levels are the gateway's tests'; the venv may sit where its user cannot read.
        "isolation": "none",
        "env": { "PY_SERVER_DRIFT_FILE": drift.to_string_lossy() }
    });
    let body = json!({ "name": "py", "entry": entry });
    let r = h
        .api(
            Method::POST,
            "/v1/servers",
            "/v1/servers",
            Some(READER),
            Some(body.clone()),
        )
        .await;
    assert_eq!(r.status, StatusCode::FORBIDDEN, "{}", r.text);
    let r = h
        .api(
            Method::POST,
            "/v1/servers",
            "/v1/servers",
            Some(ADMIN),
            Some(body.clone()),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    assert_eq!(r.json["state"], "ready", "{}", r.text);
    let tools = r.json["tools"].as_array().unwrap();
    assert!(tools.iter().all(|t| t["status"] == "pending"), "{}", r.text);
    let r = h
        .api(
            Method::POST,
            "/v1/servers",
            "/v1/servers",
            Some(ADMIN),
            Some(body),
        )
        .await;
    assert_eq!(r.status, StatusCode::CONFLICT, "{}", r.text);
    // Withheld: not a tool anyone can list or see yet.
    let r = h
        .send(Method::GET, "/v1/tools/py__drifting", Some(ADMIN), None)
        .await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.text);

    let approve = |tools: serde_json::Value| json!({ "tools": tools });
    let r = h
        .api(
            Method::POST,
            "/v1/servers/{name}/approve",
            "/v1/servers/py/approve",
            Some(ADMIN),
            Some(approve(json!(["drifting", "py__echo"]))),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert_eq!(r.json["by"], "api:admin");
    assert_eq!(
        r.json["approved"].as_array().unwrap().len(),
        2,
        "{}",
        r.text
    );
    let r = h
        .send(Method::GET, "/v1/tools/py__drifting", Some(ADMIN), None)
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    let r = h
        .api(
            Method::POST,
            "/v1/servers/{name}/approve",
            "/v1/servers/py/approve",
            Some(ADMIN),
            Some(approve(json!(["drifting"]))),
        )
        .await;
    assert_eq!(
        r.status,
        StatusCode::CONFLICT,
        "approved already: {}",
        r.text
    );

    // The rug pull: the description changes upstream; a restart lists it anew.
    std::fs::write(&drift, "x").unwrap();
    let r = h
        .api(
            Method::POST,
            "/v1/servers/{name}/restart",
            "/v1/servers/py/restart",
            Some(ADMIN),
            None,
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    let r = h
        .api(
            Method::GET,
            "/v1/servers/{name}/tools",
            "/v1/servers/py/tools",
            Some(READER),
            None,
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    let drifting = r.json["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["upstreamName"] == "drifting")
        .unwrap()
        .clone();
    assert_eq!(drifting["status"], "quarantined", "{drifting}");
    let change = &drifting["changes"][0];
    assert_eq!(change["field"], "description", "{drifting}");
    assert_eq!(change["old"], "Returns a constant. Harmless.");
    assert!(
        change["new"].as_str().unwrap().contains("id_rsa"),
        "{drifting}"
    );
    let r = h
        .send(Method::GET, "/v1/tools/py__drifting", Some(ADMIN), None)
        .await;
    assert_eq!(
        r.status,
        StatusCode::NOT_FOUND,
        "quarantined tools leave the list: {}",
        r.text
    );
    let r = h.api(Method::GET, "/healthz", "/healthz", None, None).await;
    assert_eq!(r.json["servers"][0]["name"], "py", "{}", r.text);
    assert_eq!(r.json["servers"][0]["state"], "ready", "{}", r.text);
    assert!(
        r.json["servers"][0]["pendingChanges"].as_u64().unwrap() >= 1,
        "{}",
        r.text
    );
    let r = h
        .api(
            Method::GET,
            "/v1/servers/{name}",
            "/v1/servers/py",
            Some(READER),
            None,
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);

    let r = h
        .api(
            Method::POST,
            "/v1/servers/{name}/approve",
            "/v1/servers/py/approve",
            Some(ADMIN),
            Some(json!({ "all": true })),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    let r = h
        .send(Method::GET, "/v1/tools/py__drifting", Some(ADMIN), None)
        .await;
    assert_eq!(r.status, StatusCode::OK, "approved again: {}", r.text);

    let r = h
        .api(
            Method::DELETE,
            "/v1/servers/{name}",
            "/v1/servers/py",
            Some(ADMIN),
            None,
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert!(
        r.json["toolsRemoved"]
            .as_array()
            .unwrap()
            .contains(&json!("py__drifting")),
        "{}",
        r.text
    );
    let r = h
        .api(Method::GET, "/v1/servers", "/v1/servers", Some(ADMIN), None)
        .await;
    assert_eq!(r.json, json!({ "servers": [] }));
}

#[tokio::test]
async fn an_invalid_entry_is_422_naming_the_fix() {
    let h = with_principals().await;
    for body in [
        json!({ "name": "files", "entry": {} }),
        json!({ "name": "Files!", "entry": { "command": "/usr/bin/true" } }),
        json!({ "name": "files", "entry": { "command": "npx" } }),
    ] {
        let r = h
            .api(
                Method::POST,
                "/v1/servers",
                "/v1/servers",
                Some(ADMIN),
                Some(body.clone()),
            )
            .await;
        assert_eq!(
            r.status,
            StatusCode::UNPROCESSABLE_ENTITY,
            "{body}: {}",
            r.text
        );
        assert_eq!(r.json["error"]["kind"], "validation");
        assert!(
            !r.json["error"]["errors"].as_array().unwrap().is_empty(),
            "{}",
            r.text
        );
    }
    let r = h
        .api(Method::GET, "/v1/servers", "/v1/servers", Some(ADMIN), None)
        .await;
    assert_eq!(r.json, json!({ "servers": [] }), "nothing was stored");
}
