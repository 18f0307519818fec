//! A yes is never implied on the server's approval paths besides MCP elicitation (unit-tested
//! in mcp.rs and end to end in tests/interop): a webhook receiver's reply cannot approve, and on
//! REST only `POST /v1/approvals/{id}/approve` approves — a body that says otherwise is refused
//! and leaves the approval pending, and a deny never runs the call.
#![cfg(test)]

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::http::{Method, StatusCode};
use common::{Harness, principal};
use serde_json::{Value, json};
use toolgate_core::Quota;
use toolgate_net::{NetPolicy, PolicyClient};
use toolgate_server::{GatewayOptions, Webhook, WebhookConfig};

const AGENT: &str = "agent-token";
const APPROVER: &str = "approver-token";

fn options(webhook: Option<Arc<Webhook>>) -> GatewayOptions {
    GatewayOptions {
        principals: vec![
            principal("agent", &["tool.*"], None, AGENT, Quota::default()),
            principal("approver", &["*"], None, APPROVER, Quota::default()),
        ],
        webhook,
        ..GatewayOptions::default()
    }
}

/// The agent asks to write `path` (which needs approval); returns the pending approval's id.
async fn ask_to_write(h: &Harness, path: &str) -> String {
    let r = h
        .send(
            Method::POST,
            "/v1/tools/write_file/call",
            Some(AGENT),
            Some(json!({ "arguments": { "path": path, "content": "hello" } })),
        )
        .await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.text);
    r.json["approval"]["id"].as_str().unwrap().to_owned()
}

async fn status(h: &Harness, id: &str) -> Value {
    let r = h
        .send(
            Method::GET,
            &format!("/v1/approvals/{id}"),
            Some(APPROVER),
            None,
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    r.json["status"].clone()
}

#[tokio::test]
async fn a_webhook_reply_that_says_approve_does_not_approve() {
    // A receiver that answers every delivery with what looks like a decision.
    let got = Arc::new(Mutex::new(0usize));
    let counter = Arc::clone(&got);
    let app = axum::Router::new().route(
        "/hook",
        axum::routing::post(move || {
            let counter = Arc::clone(&counter);
            async move {
                *counter.lock().unwrap() += 1;
                (
                    StatusCode::OK,
                    axum::Json(
                        json!({ "approve": true, "decision": "approve", "status": "approved" }),
                    ),
                )
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let client = Arc::new(
        PolicyClient::new(NetPolicy {
            allow_private_network: true,
            ..Default::default()
        })
        .unwrap(),
    );
    let config = WebhookConfig {
        timeout: Duration::from_secs(5),
        ..WebhookConfig::new(format!("http://{addr}/hook"), "whsec_consent_0123456789")
    };
    let wh = Arc::new(Webhook::new(config, client).unwrap());
    let h = Harness::with_options(options(Some(Arc::clone(&wh)))).await;

    let id = ask_to_write(&h, "hooked.txt").await;
    for _ in 0..200 {
        if *got.lock().unwrap() > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert_eq!(*got.lock().unwrap(), 1, "the receiver got no delivery");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(status(&h, &id).await, "pending");
    assert!(!h.dir.path().join("hooked.txt").exists());
}

#[tokio::test]
async fn rest_approves_only_on_the_approve_endpoint() {
    let h = Harness::with_options(options(None)).await;
    let id = ask_to_write(&h, "rest.txt").await;
    let approve = format!("/v1/approvals/{id}/approve");
    let deny = format!("/v1/approvals/{id}/deny");

    // A body cannot turn an approve into something else, nor a deny into a yes: both are
    // refused and nothing is decided.
    for (uri, body) in [
        (&approve, json!({ "approve": false })),
        (&approve, json!({ "decision": "deny" })),
        (&deny, json!({ "approve": true })),
        (&deny, json!({ "decision": "approve" })),
    ] {
        let r = h
            .send(Method::POST, uri, Some(APPROVER), Some(body.clone()))
            .await;
        assert_eq!(
            r.status,
            StatusCode::BAD_REQUEST,
            "{uri} {body}: {}",
            r.text
        );
        assert_eq!(status(&h, &id).await, "pending", "{uri} {body}");
    }
    // A deny, with or without a body, is a no: the call never runs.
    let r = h.send(Method::POST, &deny, Some(APPROVER), None).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert_eq!(r.json["status"], "denied");
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(status(&h, &id).await, "denied");
    assert!(!h.dir.path().join("rest.txt").exists());
    // And a later approve cannot overturn it.
    let r = h.send(Method::POST, &approve, Some(APPROVER), None).await;
    assert!(r.status.is_client_error(), "{} {}", r.status, r.text);
    assert_eq!(status(&h, &id).await, "denied");
}
