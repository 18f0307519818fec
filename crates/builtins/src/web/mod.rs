//! The network built-ins of seed 001: `web_search` (SerpAPI, Google Custom Search, Bing, Brave
//! Search, SearXNG), `wikipedia` (MediaWiki search + REST summary) and `web_scraper` (readable
//! text of a page).
//!
//! Every request goes through the context's [`toolgate_core::HttpClient`], which enforces the
//! network policy (SSRF checks, redirects, size and time caps); its refusals pass through as
//! they are. Each request also carries a tighter time and size limit of the tool's own
//! (`with_request_timeout`, `with_max_response_bytes`) and a descriptive `User-Agent`.
//!
//! Errors follow one scheme for every remote service: HTTP 401/403 → `authorization`, 429 →
//! `rate_limited` (retryable), 5xx → `unavailable` (retryable), a body that is not the JSON the
//! API documents → `execution` naming the service, and the service's own error message is
//! quoted. Secrets (API keys) never appear in any message: they are scrubbed from everything
//! the tools report, transport errors of the HTTP client included.

mod scrape;
mod search;
mod text;
mod wikipedia;

use std::time::Duration;

use serde_json::Value;
use toolgate_core::{ErrorKind, HttpRequest, HttpResponse, ToolContext, ToolError};

pub use scrape::{WEB_SCRAPER, WEB_SCRAPER_DESCRIPTION, WebScraper};
pub use search::{
    ENV_SEARCH_API_KEY, ENV_SEARCH_BASE_URL, ENV_SEARCH_CX, ENV_SEARCH_ENGINE, MAX_SEARCH_RESULTS,
    ParseSearchEngineError, SearchConfig, SearchEngine, WEB_SEARCH, WEB_SEARCH_DESCRIPTION,
    WebSearch,
};
pub use wikipedia::{
    ENV_WIKIPEDIA_BASE_URL, WIKIPEDIA, WIKIPEDIA_DESCRIPTION, Wikipedia, WikipediaConfig,
};

/// The `User-Agent` of every request the web tools make (Wikimedia's policy asks for a
/// descriptive one with a contact address).
pub const WEB_USER_AGENT: &str = concat!(
    "toolgate/",
    env!("CARGO_PKG_VERSION"),
    " (https://example.invalid/toolgate; built-in web tools)"
);

/// Default cap on one response body: 2 MiB.
pub const DEFAULT_MAX_RESPONSE_BYTES: u64 = 2 * 1024 * 1024;

/// How much of an error body is read for its message.
const ERROR_BODY_BYTES: usize = 16 * 1024;

/// What replaces a secret in messages and `Debug` output.
const REDACTED: &str = "[REDACTED]";

/// The time and size limits a tool puts on each of its requests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Limits {
    pub(crate) timeout: Duration,
    pub(crate) max_bytes: u64,
}

/// Sends `request` through the context's client with the tool's limits and user agent. The
/// body is checked against the limit again, whatever client is installed.
pub(crate) async fn send(
    ctx: &ToolContext,
    mut request: HttpRequest,
    limits: Limits,
) -> Result<HttpResponse, ToolError> {
    ctx.check_cancelled()?;
    let http = ctx.http()?;
    request
        .headers
        .push(("User-Agent".into(), WEB_USER_AGENT.into()));
    request.timeout = Some(limits.timeout);
    request.max_response_bytes = Some(limits.max_bytes);
    let response = http.send(request, ctx.cancellation()).await?;
    let len = response.body.len() as u64;
    if len > limits.max_bytes {
        return Err(ToolError::execution(format!(
            "The response is {len} bytes, more than the limit of {} bytes",
            limits.max_bytes
        )));
    }
    Ok(response)
}

/// Puts `what` in front of a failure's message (cancellation keeps its fixed message) and
/// scrubs `secrets` from it; kind and retryability are kept.
pub(crate) fn in_context(err: ToolError, what: &str, secrets: &[&str]) -> ToolError {
    if err.kind() == ErrorKind::Cancelled {
        return err;
    }
    let message = scrub(&format!("{what}: {}", err.message()), secrets);
    rebuild(&err, message)
}

/// The same failure with `secrets` scrubbed from its message.
pub(crate) fn scrubbed(err: ToolError, secrets: &[&str]) -> ToolError {
    let message = scrub(err.message(), secrets);
    if message == err.message() {
        return err;
    }
    rebuild(&err, message)
}

fn rebuild(err: &ToolError, message: String) -> ToolError {
    let out = ToolError::new(err.kind(), message);
    if err.is_retryable() {
        out.retryable()
    } else {
        out.permanent()
    }
}

/// Replaces every secret — as written, and as it appears percent- or form-encoded in a URL —
/// with `[REDACTED]`.
pub(crate) fn scrub(text: &str, secrets: &[&str]) -> String {
    let mut out = text.to_owned();
    for secret in secrets.iter().filter(|s| !s.is_empty()) {
        let encoded: String = url::form_urlencoded::byte_serialize(secret.as_bytes()).collect();
        let percent =
            percent_encoding::utf8_percent_encode(secret, percent_encoding::NON_ALPHANUMERIC)
                .to_string();
        for form in [secret.to_string(), encoded, percent] {
            if !form.is_empty() && out.contains(&form) {
                out = out.replace(&form, REDACTED);
            }
        }
    }
    out
}

/// The `Retry-After` header in seconds, when it is a number.
pub(crate) fn retry_after(response: &HttpResponse) -> Option<u64> {
    response
        .header("retry-after")
        .and_then(|v| v.trim().parse().ok())
}

/// What to do about a rate limit.
pub(crate) fn retry_hint(response: &HttpResponse) -> String {
    match retry_after(response) {
        Some(secs) => format!("retry after {secs} seconds"),
        None => "wait a moment and try again".to_owned(),
    }
}

/// The body as JSON, or an `execution` error naming `service`.
pub(crate) fn parse_json(body: &[u8], service: &str, hint: &str) -> Result<Value, ToolError> {
    serde_json::from_slice(body).map_err(|e| {
        ToolError::execution(format!(
            "{service} returned a response that is not valid JSON ({e}){hint}"
        ))
        .permanent()
    })
}

/// The error message a JSON error body carries, in any of the shapes the supported APIs use:
/// `{"error": "…"}` (SerpAPI), `{"error": {"message": …}}` (Google, Azure gateways),
/// `{"error": {"detail": …}}` (Brave), `{"errors": [{"message": …}]}` (Bing),
/// `{"error": {"info": …}}` (MediaWiki), `{"detail": …}` / `{"message": …}` (others).
pub(crate) fn json_error_message(v: &Value) -> Option<String> {
    let text = |v: Option<&Value>| {
        v.and_then(Value::as_str)
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
    };
    if let Some(s) = text(v.get("error")) {
        return Some(s);
    }
    if let Some(e) = v.get("error").filter(|e| e.is_object()) {
        for key in ["message", "detail", "info"] {
            if let Some(s) = text(e.get(key)) {
                return Some(s);
            }
        }
    }
    if let Some(first) = v.pointer("/errors/0")
        && let Some(s) = text(first.get("message"))
    {
        return Some(match text(first.get("moreDetails")) {
            Some(more) => format!("{s} {more}"),
            None => s,
        });
    }
    text(v.get("detail")).or_else(|| text(v.get("message")))
}

/// A short, one-line description of an error body: its JSON error message, or the start of its
/// text (markup removed); `None` when it says nothing.
pub(crate) fn error_detail(body: &[u8]) -> Option<String> {
    if let Ok(v) = serde_json::from_slice::<Value>(body)
        && let Some(msg) = json_error_message(&v)
    {
        return Some(truncate_chars(&text::collapse_whitespace(&msg), 300));
    }
    // Only the start of the body: error pages are read for one line, and parsing HTML costs
    // time quadratic in its nesting.
    let raw = String::from_utf8_lossy(&body[..body.len().min(ERROR_BODY_BYTES)]);
    let plain = if raw.trim_start().starts_with('<') {
        // Lines of an HTML page (a heading, then a paragraph) read as sentences.
        text::document_text(&scraper::Html::parse_document(&raw))
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(|l| {
                if l.ends_with(['.', '!', '?', ':', ';']) {
                    l.to_owned()
                } else {
                    format!("{l}.")
                }
            })
            .collect::<Vec<_>>()
            .join(" ")
    } else {
        raw.into_owned()
    };
    let line = text::collapse_whitespace(&plain);
    (!line.is_empty()).then(|| truncate_chars(&line, 300))
}

/// `detail` ready to be followed by `; what to do`: without a final period.
pub(crate) fn clause(detail: &str) -> &str {
    detail.trim_end().trim_end_matches('.')
}

/// At most `max` characters, with `…` when cut.
pub(crate) fn truncate_chars(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &s[..at]),
        None => s.to_owned(),
    }
}

/// A value that is set and not blank.
pub(crate) fn non_blank(value: Option<String>) -> Option<String> {
    value.map(|v| v.trim().to_owned()).filter(|v| !v.is_empty())
}

/// Overrides `slot` with the variable `name` when `var` has a non-blank value for it.
pub(crate) fn override_from(
    slot: &mut Option<String>,
    name: &str,
    var: &impl Fn(&str) -> Option<String>,
) {
    if let Some(value) = non_blank(var(name)) {
        *slot = Some(value);
    }
}

/// The standard reason phrase of common statuses, for messages.
pub(crate) fn reason(status: u16) -> &'static str {
    match status {
        400 => "Bad Request",
        401 => "Unauthorized",
        402 => "Payment Required",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        406 => "Not Acceptable",
        408 => "Request Timeout",
        410 => "Gone",
        415 => "Unsupported Media Type",
        422 => "Unprocessable Entity",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        _ => "",
    }
}

/// `HTTP 404 Not Found`, or `HTTP 599` for statuses without a common phrase.
pub(crate) fn status_text(status: u16) -> String {
    match reason(status) {
        "" => format!("HTTP {status}"),
        phrase => format!("HTTP {status} {phrase}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn secrets_are_scrubbed_in_every_encoding() {
        let secret = "k3y/with+odd chars";
        let text = format!(
            "GET https://x.test/?api_key={} failed; raw {secret}; pct {}",
            url::form_urlencoded::byte_serialize(secret.as_bytes()).collect::<String>(),
            percent_encoding::utf8_percent_encode(secret, percent_encoding::NON_ALPHANUMERIC)
        );
        let out = scrub(&text, &[secret, ""]);
        assert!(!out.contains("k3y"), "{out}");
        assert_eq!(out.matches(REDACTED).count(), 3, "{out}");
    }

    #[test]
    fn context_keeps_kind_and_retryability_but_not_cancellation_text() {
        let e = in_context(ToolError::unavailable("down with KEY"), "Bing", &["KEY"]);
        assert_eq!(e.kind(), ErrorKind::Unavailable);
        assert!(e.is_retryable());
        assert_eq!(e.message(), "Bing: down with [REDACTED]");
        let e = in_context(ToolError::execution("x"), "Bing", &[]);
        assert!(!e.is_retryable());
        assert_eq!(
            in_context(ToolError::cancelled(), "Bing", &[]),
            ToolError::cancelled()
        );
    }

    #[test]
    fn error_messages_of_every_documented_shape() {
        let cases = [
            (json!({"error": "Invalid API key."}), "Invalid API key."),
            (
                json!({"error": {"code": 400, "message": "API key not valid.", "status": "INVALID_ARGUMENT"}}),
                "API key not valid.",
            ),
            (
                json!({"type": "ErrorResponse", "error": {"code": "RATE_LIMITED", "detail": "Too fast."}}),
                "Too fast.",
            ),
            (
                json!({"_type": "ErrorResponse", "errors": [{"code": "InvalidAuthorization", "message": "Authorization is required.", "moreDetails": "Subscription key is not recognized."}]}),
                "Authorization is required. Subscription key is not recognized.",
            ),
            (
                json!({"error": {"code": "badvalue", "info": "Unrecognized value."}}),
                "Unrecognized value.",
            ),
            (json!({"detail": "Page not found."}), "Page not found."),
        ];
        for (body, want) in cases {
            assert_eq!(json_error_message(&body).as_deref(), Some(want), "{body}");
        }
        assert_eq!(json_error_message(&json!({"results": []})), None);
    }

    #[test]
    fn error_detail_of_html_and_text_bodies() {
        assert_eq!(
            error_detail(
                b"<html><head><title>x</title></head><body><h1>Bad   gateway</h1></body></html>"
            )
            .as_deref(),
            Some("Bad gateway.")
        );
        assert_eq!(error_detail(b"  ").as_deref(), None);
        let long = "a".repeat(500);
        assert_eq!(
            error_detail(long.as_bytes()).map(|s| s.chars().count()),
            Some(301)
        );
    }
}
