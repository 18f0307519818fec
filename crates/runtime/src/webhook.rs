//! The approval webhook: every new pending approval is POSTed, signed with HMAC-SHA256, to a
//! URL the operator configured; the receiver decides on the REST endpoint
//! (`POST /v1/approvals/{id}/approve|deny`).
//!
//! Each delivery is one JSON body sent up to `max_attempts` times with exponential backoff, in a
//! task of its own (the approval gate that announces approvals never waits for it). Headers:
//!
//! - `X-Toolgate-Event: approval.pending`
//! - `X-Toolgate-Delivery: <uuid v4>`, the same on every attempt of one delivery (deduplicate
//!   on it);
//! - `X-Toolgate-Timestamp: <unix seconds>` of the attempt;
//! - `X-Toolgate-Signature: sha256=<hex HMAC-SHA256(secret, "<timestamp>.<body>")>`.
//!
//! Receivers check the signature with [`verify`] (or the same computation) and refuse old
//! timestamps, so a captured request cannot be replayed later.

use std::collections::VecDeque;
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hmac::{Hmac, Mac};
use http::Uri;
use serde_json::json;
use sha2::Sha256;
use toolgate_core::{CancellationToken, ErrorKind, HttpClient, HttpRequest, HttpResponse};
use toolgate_store::Approval;

use crate::error::RuntimeError;

/// The event every delivery announces.
pub const WEBHOOK_EVENT: &str = "approval.pending";
/// Attempts of one delivery by default.
pub const DEFAULT_WEBHOOK_MAX_ATTEMPTS: u32 = 5;
/// The wait before the second attempt by default; it doubles after each failure.
pub const DEFAULT_WEBHOOK_FIRST_BACKOFF: Duration = Duration::from_secs(1);
/// The longest wait between two attempts.
pub const WEBHOOK_MAX_BACKOFF: Duration = Duration::from_secs(60);
/// Time limit of one attempt by default.
pub const DEFAULT_WEBHOOK_TIMEOUT: Duration = Duration::from_secs(10);

/// The receiver's answer is not needed; a larger one is not read.
const MAX_RESPONSE_BYTES: u64 = 64 * 1024;
/// Deliveries [`Webhook::deliveries`] remembers (the oldest are forgotten first).
const KEPT_DELIVERIES: usize = 256;

type HmacSha256 = Hmac<Sha256>;

/// Where and how new approvals are announced.
#[derive(Clone)]
pub struct WebhookConfig {
    /// An absolute `http://` or `https://` URL.
    pub url: String,
    /// The HMAC key shared with the receiver. Never logged or shown.
    pub secret: String,
    /// Attempts of one delivery, the first included (at least 1).
    pub max_attempts: u32,
    /// The wait before the second attempt; doubled after each failure, at most 60 s.
    pub first_backoff: Duration,
    /// Time limit of one attempt.
    pub timeout: Duration,
}

impl WebhookConfig {
    /// A webhook to `url` signed with `secret`, with the default attempts, backoff and timeout.
    pub fn new(url: impl Into<String>, secret: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            secret: secret.into(),
            max_attempts: DEFAULT_WEBHOOK_MAX_ATTEMPTS,
            first_backoff: DEFAULT_WEBHOOK_FIRST_BACKOFF,
            timeout: DEFAULT_WEBHOOK_TIMEOUT,
        }
    }

    /// The URL's host (an IPv6 literal in brackets), checking that the URL is an absolute
    /// `http://` or `https://` URL.
    pub fn host(&self) -> Result<String, RuntimeError> {
        let invalid = |why: &str| {
            RuntimeError::Config(format!(
                "Invalid approval webhook URL {}: {why}; write an absolute http:// or https:// URL such as https://approvals.example.com/toolgate",
                shown(&self.url)
            ))
        };
        let uri: Uri = self
            .url
            .parse()
            .map_err(|e: http::uri::InvalidUri| invalid(&e.to_string()))?;
        match uri.scheme_str() {
            Some("http" | "https") => {}
            Some(other) => return Err(invalid(&format!("the scheme {other:?} is not http(s)"))),
            None => return Err(invalid("it is not absolute")),
        }
        match uri.host() {
            Some(h) if !h.is_empty() => Ok(h.to_owned()),
            _ => Err(invalid("it has no host")),
        }
    }
}

impl fmt::Debug for WebhookConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WebhookConfig")
            .field("url", &shown(&self.url))
            .field("secret", &"<redacted>")
            .field("max_attempts", &self.max_attempts)
            .field("first_backoff", &self.first_backoff)
            .field("timeout", &self.timeout)
            .finish()
    }
}

/// Where a delivery stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeliveryStatus {
    /// Being sent, or waiting to retry.
    InProgress,
    /// The receiver answered 2xx.
    Delivered,
    /// The receiver refused it (4xx other than 408 and 429), or the network policy refused the
    /// URL: not retried.
    Refused,
    /// Every attempt failed.
    Failed,
}

/// One delivery: one approval announced to the receiver.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Delivery {
    /// The `X-Toolgate-Delivery` header, the same on every attempt.
    pub id: String,
    /// The approval announced.
    pub approval_id: String,
    /// Where it stands.
    pub status: DeliveryStatus,
    /// Attempts made so far.
    pub attempts: u32,
    /// The HTTP status of the last answer, if there was one.
    pub last_status: Option<u16>,
    /// Why the last attempt failed, if it did.
    pub last_error: Option<String>,
}

/// Sends new approvals to the configured URL. Share it as `Arc<Webhook>`.
pub struct Webhook {
    inner: Arc<Inner>,
}

struct Inner {
    config: WebhookConfig,
    client: Arc<dyn HttpClient>,
    /// The most recent deliveries, oldest first.
    deliveries: Mutex<VecDeque<Delivery>>,
}

impl fmt::Debug for Webhook {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Webhook")
            .field("config", &self.inner.config)
            .finish_non_exhaustive()
    }
}

impl Webhook {
    /// A webhook sending through `client` (which applies the network policy). Refuses a URL
    /// that is not absolute http(s), an empty secret and zero attempts.
    pub fn new(config: WebhookConfig, client: Arc<dyn HttpClient>) -> Result<Self, RuntimeError> {
        config.host()?;
        if config.secret.is_empty() {
            return Err(RuntimeError::Config(
                "The approval webhook's secret is empty; set a long random secret shared with the receiver".into(),
            ));
        }
        if config.max_attempts == 0 {
            return Err(RuntimeError::Config(
                "The approval webhook's max_attempts is 0; use at least 1".into(),
            ));
        }
        Ok(Self {
            inner: Arc::new(Inner {
                config,
                client,
                deliveries: Mutex::new(VecDeque::new()),
            }),
        })
    }

    /// Where and how it sends.
    pub fn config(&self) -> &WebhookConfig {
        &self.inner.config
    }

    /// Announces a new approval in a task of its own and returns the delivery id at once.
    /// Without a tokio runtime nothing can be sent: the delivery is recorded as failed.
    pub fn notify(&self, approval: &Approval) -> String {
        let (delivery, body) = self.inner.start(approval);
        let id = delivery.id.clone();
        match tokio::runtime::Handle::try_current() {
            Ok(rt) => {
                let inner = Arc::clone(&self.inner);
                rt.spawn(async move { inner.run(delivery, body).await });
            }
            Err(_) => {
                tracing::error!(approval = %approval.id, delivery = %id, "the approval webhook cannot be sent outside a tokio runtime");
                self.inner.record(&Delivery {
                    status: DeliveryStatus::Failed,
                    last_error: Some("no tokio runtime".into()),
                    ..delivery
                });
            }
        }
        id
    }

    /// Announces a new approval and waits until the delivery is over (delivered, refused or
    /// out of attempts).
    pub async fn deliver(&self, approval: &Approval) -> Delivery {
        let (delivery, body) = self.inner.start(approval);
        self.inner.run(delivery, body).await
    }

    /// The most recent deliveries (up to 256), oldest first.
    pub fn deliveries(&self) -> Vec<Delivery> {
        self.inner.lock().iter().cloned().collect()
    }

    /// The delivery `id`, if it is still remembered.
    pub fn delivery(&self, id: &str) -> Option<Delivery> {
        self.inner.lock().iter().find(|d| d.id == id).cloned()
    }
}

/// What one attempt came to.
enum Attempt {
    Delivered(u16),
    /// Worth another attempt, after at least this long (a `Retry-After`).
    Retry(Option<Duration>),
    /// Not worth another attempt.
    GiveUp,
}

impl Inner {
    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<Delivery>> {
        // A panic while holding the lock leaves plain data behind; keep using it.
        self.deliveries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn record(&self, delivery: &Delivery) {
        let mut all = self.lock();
        if let Some(d) = all.iter_mut().find(|d| d.id == delivery.id) {
            *d = delivery.clone();
            return;
        }
        if all.len() >= KEPT_DELIVERIES {
            all.pop_front();
        }
        all.push_back(delivery.clone());
    }

    /// A new delivery of `approval` (recorded) and its body.
    fn start(&self, approval: &Approval) -> (Delivery, Result<Vec<u8>, String>) {
        let delivery = Delivery {
            id: uuid::Uuid::new_v4().to_string(),
            approval_id: approval.id.clone(),
            status: DeliveryStatus::InProgress,
            attempts: 0,
            last_status: None,
            last_error: None,
        };
        self.record(&delivery);
        (delivery, body(approval).map_err(|e| e.to_string()))
    }

    async fn run(&self, mut delivery: Delivery, body: Result<Vec<u8>, String>) -> Delivery {
        let body = match body {
            Ok(b) => b,
            Err(e) => {
                tracing::error!(approval = %delivery.approval_id, delivery = %delivery.id, error = %e, "the approval webhook body could not be written");
                delivery.status = DeliveryStatus::Failed;
                delivery.last_error = Some(e);
                self.record(&delivery);
                return delivery;
            }
        };
        let max = self.config.max_attempts.max(1);
        let url = shown(&self.config.url);
        loop {
            delivery.attempts += 1;
            let attempt = self.attempt(&mut delivery, &body).await;
            let wait = match attempt {
                Attempt::Delivered(status) => {
                    tracing::info!(approval = %delivery.approval_id, delivery = %delivery.id, attempt = delivery.attempts, status, url = %url, "approval webhook delivered");
                    delivery.status = DeliveryStatus::Delivered;
                    delivery.last_error = None;
                    break;
                }
                Attempt::GiveUp => {
                    tracing::error!(approval = %delivery.approval_id, delivery = %delivery.id, attempt = delivery.attempts, url = %url, error = delivery.last_error.as_deref().unwrap_or(""), "approval webhook refused; not retrying (decide it with `toolgate approvals` or the REST API)");
                    delivery.status = DeliveryStatus::Refused;
                    break;
                }
                Attempt::Retry(_) if delivery.attempts >= max => {
                    tracing::error!(approval = %delivery.approval_id, delivery = %delivery.id, attempts = delivery.attempts, url = %url, error = delivery.last_error.as_deref().unwrap_or(""), "approval webhook failed; giving up (decide it with `toolgate approvals` or the REST API)");
                    delivery.status = DeliveryStatus::Failed;
                    break;
                }
                Attempt::Retry(after) => {
                    let wait = backoff(self.config.first_backoff, delivery.attempts)
                        .max(after.unwrap_or_default())
                        .min(WEBHOOK_MAX_BACKOFF);
                    tracing::warn!(approval = %delivery.approval_id, delivery = %delivery.id, attempt = delivery.attempts, max_attempts = max, retry_in_ms = wait.as_millis() as u64, url = %url, error = delivery.last_error.as_deref().unwrap_or(""), "approval webhook attempt failed; retrying");
                    wait
                }
            };
            self.record(&delivery);
            tokio::time::sleep(wait).await;
        }
        self.record(&delivery);
        delivery
    }

    /// Sends the body once (signed now) and says what came of it.
    async fn attempt(&self, delivery: &mut Delivery, body: &[u8]) -> Attempt {
        let timestamp = unix_now();
        let request = HttpRequest {
            method: "POST".into(),
            url: self.config.url.clone(),
            headers: vec![
                ("Content-Type".into(), "application/json".into()),
                ("X-Toolgate-Event".into(), WEBHOOK_EVENT.into()),
                ("X-Toolgate-Delivery".into(), delivery.id.clone()),
                ("X-Toolgate-Timestamp".into(), timestamp.to_string()),
                (
                    "X-Toolgate-Signature".into(),
                    sign(&self.config.secret, timestamp, body),
                ),
            ],
            body: Some(body.to_vec()),
            max_response_bytes: Some(MAX_RESPONSE_BYTES),
            timeout: Some(self.config.timeout),
        };
        match self.client.send(request, &CancellationToken::new()).await {
            Ok(response) => {
                let status = response.status;
                delivery.last_status = Some(status);
                if (200..300).contains(&status) {
                    return Attempt::Delivered(status);
                }
                delivery.last_error = Some(format!("the receiver answered HTTP {status}"));
                if (400..500).contains(&status) && status != 408 && status != 429 {
                    Attempt::GiveUp
                } else {
                    Attempt::Retry(retry_after(&response))
                }
            }
            Err(e) => {
                delivery.last_status = None;
                delivery.last_error = Some(e.message().to_owned());
                // A refusal by the network policy or an unusable URL stays so; every other
                // failure (connection, timeout, reset) may pass.
                if matches!(e.kind(), ErrorKind::Authorization | ErrorKind::Validation) {
                    Attempt::GiveUp
                } else {
                    Attempt::Retry(None)
                }
            }
        }
    }
}

/// The JSON body announcing `approval`.
fn body(approval: &Approval) -> Result<Vec<u8>, serde_json::Error> {
    let id = &approval.id;
    serde_json::to_vec(&json!({
        "type": WEBHOOK_EVENT,
        "approval": approval,
        "decide": {
            "approve": format!("/v1/approvals/{id}/approve"),
            "deny": format!("/v1/approvals/{id}/deny"),
        },
    }))
}

/// The wait after attempt `attempt` (1-based) failed: `first`, doubled each time, at most 60 s.
fn backoff(first: Duration, attempt: u32) -> Duration {
    let factor = 2u32.saturating_pow(attempt.saturating_sub(1).min(16));
    first.saturating_mul(factor).min(WEBHOOK_MAX_BACKOFF)
}

/// A `Retry-After` in seconds (the HTTP-date form is ignored).
fn retry_after(response: &HttpResponse) -> Option<Duration> {
    response
        .header("retry-after")?
        .trim()
        .parse::<u64>()
        .ok()
        .map(Duration::from_secs)
}

fn unix_now() -> u64 {
    u64::try_from(chrono::Utc::now().timestamp()).unwrap_or(0)
}

/// The MAC of `"<timestamp>.<body>"` under `secret`.
fn mac(secret: &str, timestamp: u64, body: &[u8]) -> Option<HmacSha256> {
    // HMAC takes keys of any length; this cannot fail.
    let mut mac = <HmacSha256 as Mac>::new_from_slice(secret.as_bytes()).ok()?;
    mac.update(timestamp.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    Some(mac)
}

/// The `X-Toolgate-Signature` value of a body sent at `timestamp`:
/// `sha256=` and the lowercase hex HMAC-SHA256 of `"<timestamp>.<body>"` keyed with `secret`.
pub fn sign(secret: &str, timestamp: u64, body: &[u8]) -> String {
    let tag = mac(secret, timestamp, body)
        .map(|m| m.finalize().into_bytes().to_vec())
        .unwrap_or_default();
    let mut out = String::with_capacity(7 + tag.len() * 2);
    out.push_str("sha256=");
    for b in tag {
        out.push(char::from(HEX[usize::from(b >> 4)]));
        out.push(char::from(HEX[usize::from(b & 0xf)]));
    }
    out
}

/// Whether `signature` (an `X-Toolgate-Signature` value) signs `body` sent at `timestamp` with
/// `secret`. The comparison takes the same time wherever the signatures differ. Receivers
/// should also refuse timestamps more than a few minutes away from their clock.
pub fn verify(secret: &str, timestamp: u64, body: &[u8], signature: &str) -> bool {
    let Some(tag) = signature.trim().strip_prefix("sha256=").and_then(from_hex) else {
        return false;
    };
    mac(secret, timestamp, body).is_some_and(|m| m.verify_slice(&tag).is_ok())
}

const HEX: &[u8; 16] = b"0123456789abcdef";

fn from_hex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    let digit = |c: u8| char::from(c).to_digit(16);
    s.as_bytes()
        .chunks(2)
        .map(|p| u8::try_from(digit(p[0])? * 16 + digit(p[1])?).ok())
        .collect()
}

/// A URL as logs and messages may show it: scheme, host, port and path (no user, no query,
/// which may hold a token).
fn shown(raw: &str) -> String {
    match raw.parse::<Uri>() {
        Ok(u) if u.scheme().is_some() && u.host().is_some() => {
            let mut s = format!(
                "{}://{}",
                u.scheme_str().unwrap_or(""),
                u.host().unwrap_or("")
            );
            if let Some(port) = u.port_u16() {
                s.push_str(&format!(":{port}"));
            }
            s.push_str(u.path());
            s
        }
        _ => raw.split(['?', '#']).next().unwrap_or("").to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_and_caps() {
        let s = Duration::from_secs;
        assert_eq!(backoff(s(1), 1), s(1));
        assert_eq!(backoff(s(1), 2), s(2));
        assert_eq!(backoff(s(1), 4), s(8));
        assert_eq!(backoff(s(1), 7), s(60));
        assert_eq!(backoff(s(1), u32::MAX), s(60));
    }

    #[test]
    fn hex_round_trips() {
        assert_eq!(from_hex("00ff7A"), Some(vec![0, 255, 0x7a]));
        assert_eq!(from_hex("0"), None);
        assert_eq!(from_hex("zz"), None);
    }

    #[test]
    fn urls_are_shown_without_secrets() {
        assert_eq!(
            shown("https://u:p@hooks.example.com:8443/a/b?token=x"),
            "https://hooks.example.com:8443/a/b"
        );
        let c = WebhookConfig::new("https://hooks.example.com/x?k=secret", "s3cr3t");
        let debug = format!("{c:?}");
        assert!(
            !debug.contains("s3cr3t") && !debug.contains("k=secret"),
            "{debug}"
        );
        assert_eq!(c.host().unwrap(), "hooks.example.com");
        assert!(WebhookConfig::new("/relative", "s").host().is_err());
        assert!(WebhookConfig::new("ftp://h/x", "s").host().is_err());
    }
}
