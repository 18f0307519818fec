//! The approval webhook against a fake receiver: body, headers, HMAC-SHA256 signature, retries
//! with one delivery id, no retry of a refusal, giving up after max_attempts; and end to end, a
//! gateway announcing a pending approval that the receiver then approves over REST, and pending
//! approvals announced again when a gateway starts.
#![cfg(test)]

mod common;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode};
use common::{Harness, principal};
use serde_json::{Value, json};
use toolgate_core::Quota;
use toolgate_net::{NetPolicy, PolicyClient};
use toolgate_server::{
    DeliveryStatus, GatewayOptions, WEBHOOK_EVENT, Webhook, WebhookConfig, sign, verify,
};
use toolgate_store::{Approval, ApprovalStatus};

const SECRET: &str = "whsec_test_0123456789";

/// One request the receiver got.
#[derive(Clone, Debug)]
struct Received {
    headers: HeaderMap,
    body: Vec<u8>,
}

impl Received {
    fn header(&self, name: &str) -> &str {
        self.headers
            .get(name)
            .unwrap_or_else(|| panic!("no {name} header"))
            .to_str()
            .unwrap()
    }

    fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap()
    }

    /// Whether the signature header signs this request's timestamp and body with `secret`.
    fn verifies_with(&self, secret: &str) -> bool {
        let ts: u64 = self.header("x-toolgate-timestamp").parse().unwrap();
        verify(secret, ts, &self.body, self.header("x-toolgate-signature"))
    }
}

#[derive(Clone)]
struct Receiver {
    got: Arc<Mutex<Vec<Received>>>,
    /// The first this-many requests are answered with `fail_with`, the rest with 200.
    fail_first: usize,
    fail_with: StatusCode,
}

impl Receiver {
    fn received(&self) -> Vec<Received> {
        self.got.lock().unwrap().clone()
    }

    async fn wait_for(&self, n: usize) -> Vec<Received> {
        for _ in 0..200 {
            let got = self.received();
            if got.len() >= n {
                return got;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        panic!("the receiver got {} of {n} requests", self.received().len());
    }
}

async fn receive(
    State(r): State<Receiver>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> StatusCode {
    let mut got = r.got.lock().unwrap();
    got.push(Received {
        headers,
        body: body.to_vec(),
    });
    if got.len() <= r.fail_first {
        r.fail_with
    } else {
        StatusCode::OK
    }
}

/// A fake receiver on 127.0.0.1: its URL and what it records.
async fn receiver(fail_first: usize, fail_with: StatusCode) -> (String, Receiver) {
    let r = Receiver {
        got: Arc::new(Mutex::new(Vec::new())),
        fail_first,
        fail_with,
    };
    let app = axum::Router::new()
        .route("/hooks/toolgate", axum::routing::post(receive))
        .with_state(r.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://{addr}/hooks/toolgate"), r)
}

/// The real policy client, allowed to reach the local receiver.
fn client() -> Arc<PolicyClient> {
    Arc::new(
        PolicyClient::new(NetPolicy {
            allow_private_network: true,
            ..Default::default()
        })
        .unwrap(),
    )
}

fn webhook(url: &str, max_attempts: u32) -> Webhook {
    let config = WebhookConfig {
        max_attempts,
        first_backoff: Duration::from_millis(20),
        timeout: Duration::from_secs(5),
        ..WebhookConfig::new(url, SECRET)
    };
    Webhook::new(config, client()).unwrap()
}

fn approval() -> Approval {
    let now = chrono::Utc::now();
    Approval {
        id: "apr_test1".into(),
        call_id: "call_1".into(),
        tool: "send_mail".into(),
        definition_hash: "d".repeat(64),
        arguments_sha256: "a".repeat(64),
        arguments: json!({ "to": "ops@example.com", "api_key": "sk-live-SECRET" }),
        display: json!({ "to": "ops@example.com", "api_key": "[redacted]" }),
        principal: "agent".into(),
        reason: Some("weekly report".into()),
        idempotency_key: None,
        status: ApprovalStatus::Pending,
        created_at: now,
        expires_at: now + chrono::Duration::hours(1),
        decided_at: None,
        decided_by: None,
        decision_reason: None,
        started_at: None,
        finished_at: None,
        result: None,
        origin: None,
        run: None,
    }
}

#[test]
fn signature_is_hmac_sha256_of_timestamp_dot_body() {
    // Computed independently: HMAC-SHA256("whsec_test", "1700000000.{\"type\":\"approval.pending\"}").
    let body = br#"{"type":"approval.pending"}"#;
    let sig = sign("whsec_test", 1_700_000_000, body);
    assert_eq!(
        sig,
        "sha256=2cd53cf0b86467073d4789a3c5777b03c0bb2b51f09ab2b8209fcfa1a9016c11"
    );
    assert!(verify("whsec_test", 1_700_000_000, body, &sig));
    assert!(verify(
        "whsec_test",
        1_700_000_000,
        body,
        &sig.to_uppercase().replace("SHA256=", "sha256=")
    ));
    // Another secret, another body, another timestamp, a mangled header: refused.
    assert!(!verify("whsec_other", 1_700_000_000, body, &sig));
    assert!(!verify(
        "whsec_test",
        1_700_000_000,
        br#"{"type":"approval.pendinG"}"#,
        &sig
    ));
    assert!(!verify("whsec_test", 1_700_000_001, body, &sig));
    assert!(!verify(
        "whsec_test",
        1_700_000_000,
        body,
        sig.trim_start_matches("sha256=")
    ));
    assert!(!verify(
        "whsec_test",
        1_700_000_000,
        body,
        &sig[..sig.len() - 2]
    ));
    assert!(!verify("whsec_test", 1_700_000_000, body, "sha256=zz"));
    assert!(!verify("whsec_test", 1_700_000_000, body, ""));
}

#[test]
fn configs_are_checked_and_the_secret_never_shown() {
    let ok = WebhookConfig::new("https://approvals.example.com/hook?token=abc", SECRET);
    let debug = format!("{ok:?}");
    assert!(!debug.contains(SECRET), "{debug}");
    assert!(!debug.contains("token=abc"), "{debug}");
    let wh = Webhook::new(ok, client()).unwrap();
    assert!(!format!("{wh:?}").contains(SECRET));
    for url in [
        "approvals.example.com/hook",
        "/hook",
        "ftp://example.com/hook",
        "http://",
    ] {
        let err = Webhook::new(WebhookConfig::new(url, SECRET), client()).unwrap_err();
        assert!(err.to_string().contains("http"), "{url}: {err}");
    }
    assert!(Webhook::new(WebhookConfig::new("https://h.example/x", ""), client()).is_err());
    let zero = WebhookConfig {
        max_attempts: 0,
        ..WebhookConfig::new("https://h.example/x", SECRET)
    };
    assert!(Webhook::new(zero, client()).is_err());
}

#[tokio::test]
async fn a_delivery_posts_the_signed_approval() {
    let (url, rx) = receiver(0, StatusCode::OK).await;
    let wh = webhook(&url, 3);
    let before = chrono::Utc::now().timestamp() as u64;
    let d = wh.deliver(&approval()).await;
    assert_eq!(d.status, DeliveryStatus::Delivered, "{d:?}");
    assert_eq!((d.attempts, d.last_status), (1, Some(200)));
    let got = rx.received();
    assert_eq!(got.len(), 1);
    let r = &got[0];
    assert_eq!(r.header("content-type"), "application/json");
    assert_eq!(r.header("x-toolgate-event"), WEBHOOK_EVENT);
    assert_eq!(r.header("x-toolgate-delivery"), d.id);
    let id = uuid::Uuid::parse_str(&d.id).unwrap();
    assert_eq!(id.get_version_num(), 4);
    let ts: u64 = r.header("x-toolgate-timestamp").parse().unwrap();
    assert!(ts >= before && ts <= before + 60, "{ts}");
    let sig = r.header("x-toolgate-signature");
    assert!(sig.starts_with("sha256=") && sig.len() == 7 + 64, "{sig}");
    assert_eq!(sig, sign(SECRET, ts, &r.body));
    assert!(r.verifies_with(SECRET));
    assert!(!r.verifies_with("another secret"));
    let mut tampered = r.clone();
    tampered.body = String::from_utf8(r.body.clone())
        .unwrap()
        .replace("ops@example.com", "evil@example.com")
        .into_bytes();
    assert!(!tampered.verifies_with(SECRET));
    assert!(!verify(SECRET, ts + 1, &r.body, sig));

    let body = r.json();
    assert_eq!(body["type"], "approval.pending");
    assert_eq!(body["approval"]["id"], "apr_test1");
    assert_eq!(body["approval"]["callId"], "call_1");
    assert_eq!(body["approval"]["tool"], "send_mail");
    assert_eq!(body["approval"]["principal"], "agent");
    assert_eq!(body["approval"]["status"], "pending");
    assert_eq!(body["approval"]["reason"], "weekly report");
    assert_eq!(body["approval"]["arguments"]["api_key"], "[redacted]");
    assert!(!String::from_utf8_lossy(&r.body).contains("sk-live-SECRET"));
    assert_eq!(
        body["decide"],
        json!({
            "approve": "/v1/approvals/apr_test1/approve",
            "deny": "/v1/approvals/apr_test1/deny",
        })
    );
    assert_eq!(wh.deliveries(), vec![d]);
}

#[tokio::test]
async fn failures_are_retried_with_backoff_under_one_delivery_id() {
    let (url, rx) = receiver(2, StatusCode::INTERNAL_SERVER_ERROR).await;
    let wh = webhook(&url, 5);
    let started = Instant::now();
    let d = wh.deliver(&approval()).await;
    assert_eq!(d.status, DeliveryStatus::Delivered, "{d:?}");
    assert_eq!(d.attempts, 3);
    // Waits of 20 ms, then 40 ms.
    assert!(
        started.elapsed() >= Duration::from_millis(60),
        "{:?}",
        started.elapsed()
    );
    let got = rx.received();
    assert_eq!(got.len(), 3);
    for r in &got {
        assert_eq!(r.header("x-toolgate-delivery"), d.id);
        assert_eq!(r.body, got[0].body);
        assert!(r.verifies_with(SECRET));
    }
    // 408 and 429 are worth another try as well.
    for status in [StatusCode::REQUEST_TIMEOUT, StatusCode::TOO_MANY_REQUESTS] {
        let (url, rx) = receiver(1, status).await;
        let d = webhook(&url, 3).deliver(&approval()).await;
        assert_eq!(
            (d.status, d.attempts),
            (DeliveryStatus::Delivered, 2),
            "{status}"
        );
        assert_eq!(rx.received().len(), 2);
    }
}

#[tokio::test]
async fn a_refusal_is_not_retried() {
    for status in [
        StatusCode::BAD_REQUEST,
        StatusCode::UNAUTHORIZED,
        StatusCode::GONE,
    ] {
        let (url, rx) = receiver(10, status).await;
        let d = webhook(&url, 5).deliver(&approval()).await;
        assert_eq!(d.status, DeliveryStatus::Refused, "{d:?}");
        assert_eq!((d.attempts, d.last_status), (1, Some(status.as_u16())));
        assert!(d.last_error.as_deref().unwrap().contains(status.as_str()));
        assert_eq!(rx.received().len(), 1);
    }
}

#[tokio::test]
async fn delivery_gives_up_after_max_attempts() {
    let (url, rx) = receiver(100, StatusCode::SERVICE_UNAVAILABLE).await;
    let d = webhook(&url, 3).deliver(&approval()).await;
    assert_eq!(d.status, DeliveryStatus::Failed, "{d:?}");
    assert_eq!((d.attempts, d.last_status), (3, Some(503)));
    let got = rx.received();
    assert_eq!(got.len(), 3);
    assert!(got.iter().all(|r| r.header("x-toolgate-delivery") == d.id));

    // Nobody listening: transport errors are retried the same way.
    let closed = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = closed.local_addr().unwrap();
    drop(closed);
    let d = webhook(&format!("http://{addr}/hook"), 2)
        .deliver(&approval())
        .await;
    assert_eq!(d.status, DeliveryStatus::Failed, "{d:?}");
    assert_eq!((d.attempts, d.last_status), (2, None));
    assert!(d.last_error.is_some());
}

#[tokio::test]
async fn the_network_policy_refusal_is_final() {
    let (url, rx) = receiver(0, StatusCode::OK).await;
    // The default policy refuses loopback: no point in retrying.
    let strict = Arc::new(PolicyClient::new(NetPolicy::default()).unwrap());
    let wh = Webhook::new(WebhookConfig::new(&url, SECRET), strict).unwrap();
    let d = wh.deliver(&approval()).await;
    assert_eq!(
        (d.status, d.attempts),
        (DeliveryStatus::Refused, 1),
        "{d:?}"
    );
    assert!(d.last_error.unwrap().contains("Network policy refused"));
    assert!(rx.received().is_empty());
}

const AGENT: &str = "agent-token";
const APPROVER: &str = "approver-token";

/// Gateway options with an agent, an approver and the webhook.
fn with_webhook(wh: &Arc<Webhook>) -> GatewayOptions {
    GatewayOptions {
        principals: vec![
            principal("agent", &["tool.*"], None, AGENT, Quota::default()),
            principal("approver", &["*"], None, APPROVER, Quota::default()),
        ],
        webhook: Some(Arc::clone(wh)),
        ..GatewayOptions::default()
    }
}

/// The agent asks to write `path` (which needs approval); returns the pending approval's id.
async fn ask_to_write(h: &Harness, path: &str, content: &str) -> String {
    let r = h
        .api(
            Method::POST,
            "/v1/tools/{name}/call",
            "/v1/tools/write_file/call",
            Some(AGENT),
            Some(json!({ "arguments": { "path": path, "content": content }, "reason": "from the webhook test" })),
        )
        .await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.text);
    r.json["approval"]["id"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn a_pending_approval_is_announced_and_decided_over_rest() {
    let (url, rx) = receiver(1, StatusCode::BAD_GATEWAY).await;
    let wh = Arc::new(webhook(&url, 4));
    let h = Harness::with_options(with_webhook(&wh)).await;

    let id = ask_to_write(&h, "hooked.txt", "hello").await;

    // The first attempt fails (502), the second lands; both carry one delivery id.
    let got = rx.wait_for(2).await;
    let delivery = got[1].header("x-toolgate-delivery").to_owned();
    assert_eq!(got[0].header("x-toolgate-delivery"), delivery);
    let hook = &got[1];
    assert!(hook.verifies_with(SECRET));
    let body = hook.json();
    assert_eq!(body["type"], "approval.pending");
    assert_eq!(body["approval"]["id"], json!(id));
    assert_eq!(body["approval"]["tool"], "write_file");
    assert_eq!(body["approval"]["principal"], "agent");
    assert_eq!(body["approval"]["status"], "pending");
    assert_eq!(body["approval"]["arguments"]["path"], "hooked.txt");
    let mut recorded = None;
    for _ in 0..100 {
        recorded = wh.delivery(&delivery);
        if recorded
            .as_ref()
            .is_some_and(|d| d.status != DeliveryStatus::InProgress)
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let recorded = recorded.unwrap();
    assert_eq!(
        (recorded.status, recorded.attempts),
        (DeliveryStatus::Delivered, 2)
    );
    assert_eq!(recorded.approval_id, id);

    // The receiver decides on the REST endpoint the body names.
    let approve = body["decide"]["approve"].as_str().unwrap();
    assert_eq!(approve, format!("/v1/approvals/{id}/approve"));
    let r = h
        .api(
            Method::POST,
            "/v1/approvals/{id}/approve",
            approve,
            Some(APPROVER),
            Some(json!({ "reason": "approved from chat" })),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);

    let at = format!("/v1/approvals/{id}");
    let mut done = Value::Null;
    for _ in 0..100 {
        let r = h
            .api(Method::GET, "/v1/approvals/{id}", &at, Some(AGENT), None)
            .await;
        if r.json["status"] == "executed" {
            done = r.json;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(done["status"], "executed", "{done}");
    assert_eq!(done["result"]["data"]["bytesWritten"], 5, "{done}");
    // Decisions are not announced again: one delivery for one approval.
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(rx.received().len(), 2);
    assert_eq!(wh.deliveries().len(), 1);
}

#[tokio::test]
async fn pending_approvals_are_announced_again_at_startup() {
    let (url, rx) = receiver(0, StatusCode::OK).await;
    let wh = Arc::new(webhook(&url, 2));
    let h = Harness::with_options(with_webhook(&wh)).await;
    let ids = [
        ask_to_write(&h, "a.txt", "x").await,
        ask_to_write(&h, "b.txt", "x").await,
    ];
    rx.wait_for(2).await;
    // One of them is decided; the other stays pending.
    let approve = format!("/v1/approvals/{}/deny", ids[0]);
    let r = h
        .api(
            Method::POST,
            "/v1/approvals/{id}/deny",
            &approve,
            Some(APPROVER),
            Some(json!({})),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);

    // A restart: a new gateway on the same database recovers, and announces what is pending
    // (deliveries in flight at exit are lost with the process; this makes them again).
    let restarted = h.another_gateway(with_webhook(&wh)).await;
    restarted.recover_approvals().await.unwrap();
    let got = rx.wait_for(3).await;
    let again = got[2].json();
    assert_eq!(again["type"], "approval.pending");
    assert_eq!(again["approval"]["id"], json!(ids[1]));
    assert!(got[2].verifies_with(SECRET));
    assert_ne!(
        got[2].header("x-toolgate-delivery"),
        got[1].header("x-toolgate-delivery"),
        "a new delivery"
    );
    // The decided approval is not announced again.
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(rx.received().len(), 3);

    // Without a webhook nothing is announced.
    let quiet = h.another_gateway(GatewayOptions::default()).await;
    assert_eq!(quiet.announce_pending().await.unwrap(), 0);
    assert_eq!(restarted.announce_pending().await.unwrap(), 1);
    rx.wait_for(4).await;
}
