//! Every REST error is the JSON error envelope `{"error": {"kind", "message"}}`: a middleware
//! rewrites the errors axum answers by itself (a rejected query string, path or body, a method
//! the route does not have, a body over the size limit) — plain text or empty — into the
//! envelope, keeping their status and headers (`Allow` on 405 included).

use axum::body::{Body, to_bytes};
use axum::extract::Request;
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::Response;
use serde_json::json;

use crate::error::ServerErrorKind;

/// Bodies of axum's own rejections are short; anything longer is cut to this.
const MAX_REJECTION_BYTES: usize = 16 * 1024;

/// The envelope's `kind` for a status: the server's own kinds, and the two statuses only axum
/// answers.
fn kind_for(status: StatusCode) -> &'static str {
    match status {
        StatusCode::METHOD_NOT_ALLOWED => "method_not_allowed",
        StatusCode::NOT_ACCEPTABLE => "not_acceptable",
        other => ServerErrorKind::for_status(other).as_str(),
    }
}

/// Whether a response already carries a JSON body (the handlers' own errors do).
fn is_json(response: &Response) -> bool {
    response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|essence| {
            let essence = essence.trim();
            essence.eq_ignore_ascii_case("application/json") || essence.ends_with("+json")
        })
}

/// Turns an error response that is not JSON into the envelope, its text (or a description of
/// the status when it has none) as the message.
pub(crate) async fn errors_as_envelope(request: Request, next: Next) -> Response {
    let method = request.method().clone();
    let path = request.uri().path().to_owned();
    let response = next.run(request).await;
    let status = response.status();
    if !(status.is_client_error() || status.is_server_error()) || is_json(&response) {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let text = match to_bytes(body, MAX_REJECTION_BYTES).await {
        Ok(bytes) => String::from_utf8_lossy(&bytes).trim().to_owned(),
        Err(_) => String::new(),
    };
    let message = message_for(status, &method, &path, &text, &parts.headers);
    let body = json!({ "error": { "kind": kind_for(status), "message": message } });
    parts.headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    parts.headers.remove(header::CONTENT_LENGTH);
    Response::from_parts(parts, Body::from(body.to_string()))
}

/// The message: axum's explanation when it gave one, with what to do about it.
fn message_for(
    status: StatusCode,
    method: &Method,
    path: &str,
    text: &str,
    headers: &axum::http::HeaderMap,
) -> String {
    match status {
        StatusCode::METHOD_NOT_ALLOWED => {
            let allowed = headers
                .get(header::ALLOW)
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default();
            format!("Method {method} is not allowed on {path}; use {allowed} (see /openapi.json)")
        }
        StatusCode::PAYLOAD_TOO_LARGE => format!(
            "The request body is too large ({}); send less, or raise [server] max_body_bytes in the config file",
            if text.is_empty() {
                "over the limit"
            } else {
                text
            }
        ),
        _ if text.is_empty() => format!(
            "{method} {path}: {}; see /openapi.json",
            status.canonical_reason().unwrap_or("error")
        ),
        _ => format!("{text}; see /openapi.json for what {method} {path} takes"),
    }
}
