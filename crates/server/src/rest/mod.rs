//! The REST API under `/v1` (README.md, "Serving: MCP and REST"), plus `/openapi.json`, `/healthz`
//! and `/metrics`. JSON is camelCase; lists take `limit` and `cursor` and answer with `nextCursor`.
//!
//! In the style of axum's per-feature routers: each resource has its own module and router
//! ([`tools`], [`calls`], [`approvals`], [`exports`], [`events`], [`servers`], and [`meta`] for health, the
//! OpenAPI document and metrics), joined here with `merge`. This module keeps what they share:
//! the body extractors, paging, bearer auth and the Host/Origin check.

mod approvals;
mod calls;
mod events;
mod exports;
mod meta;
mod runs;
mod servers;
mod tools;

use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde_json::Value;

use crate::Gateway;
use crate::auth::Caller;
use crate::error::ServerError;

type Gw = State<Arc<Gateway>>;
type ApiResult<T> = Result<T, ServerError>;

/// Who changes definitions through the API, as recorded in the history.
fn actor(caller: &Caller) -> String {
    format!("api:{}", caller.principal.id)
}

/// The REST routes, behind the Host/Origin check and (except `/healthz`, `/openapi.json` and the
/// web UI's static files, which hold no data) auth.
pub(crate) fn router(gw: Arc<Gateway>) -> Router {
    let limit = gw.options().max_body_bytes;
    let api = Router::new()
        .merge(tools::routes())
        .merge(calls::routes())
        .merge(approvals::routes())
        .merge(exports::routes())
        .merge(events::routes())
        .merge(servers::routes())
        .merge(runs::routes())
        .merge(meta::authenticated_routes())
        .layer(axum::middleware::from_fn_with_state(
            Arc::clone(&gw),
            authenticate,
        ));
    Router::new()
        .merge(meta::open_routes())
        .merge(crate::ui::routes())
        .merge(api)
        .fallback(not_found)
        .layer(DefaultBodyLimit::max(limit))
        .layer(axum::middleware::from_fn_with_state(
            Arc::clone(&gw),
            check_host,
        ))
        .layer(axum::middleware::from_fn(
            crate::envelope::errors_as_envelope,
        ))
        .with_state(gw)
}

/// Resolves the bearer token to a [`Caller`] (request extension) or answers 401.
pub(crate) async fn authenticate(State(gw): Gw, mut request: Request, next: Next) -> Response {
    match gw.auth().caller(request.headers()) {
        Ok(caller) => {
            request.extensions_mut().insert(caller);
            next.run(request).await
        }
        Err(e) => e.into_response(),
    }
}

/// DNS-rebinding protection for the REST API: the `Host` must be a loopback name or a
/// configured host, and a browser `Origin`, when sent, a loopback or configured origin.
async fn check_host(State(gw): Gw, request: Request, next: Next) -> Response {
    if let Err(e) = host_allowed(&gw, request.headers()) {
        return e.into_response();
    }
    next.run(request).await
}

fn host_allowed(gw: &Gateway, headers: &HeaderMap) -> ApiResult<()> {
    let options = gw.options();
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or_default();
    let name = strip_port(host);
    let loopback = ["localhost", "127.0.0.1", "::1", "[::1]"];
    let host_ok = loopback.contains(&name)
        || options
            .allowed_hosts
            .iter()
            .any(|h| h.eq_ignore_ascii_case(name) || h.eq_ignore_ascii_case(host));
    if !host_ok {
        return Err(ServerError::Forbidden(format!(
            "Host {host:?} is not allowed (DNS rebinding protection); add it to [server] allowed_hosts in the config file if this server is meant to be reached by that name"
        )));
    }
    if let Some(origin) = headers.get(header::ORIGIN).and_then(|o| o.to_str().ok()) {
        let origin_host = origin
            .split_once("://")
            .map(|(_, rest)| strip_port(rest))
            .unwrap_or_default();
        let origin_ok = loopback.contains(&origin_host)
            || options
                .allowed_origins
                .iter()
                .any(|o| o.eq_ignore_ascii_case(origin));
        if !origin_ok {
            return Err(ServerError::Forbidden(format!(
                "Origin {origin:?} is not allowed; add it to [server] allowed_origins in the config file to let that web page call this server"
            )));
        }
    }
    Ok(())
}

/// `host:port` → `host` (IPv6 literals keep their brackets stripped of the port only).
fn strip_port(authority: &str) -> &str {
    if let Some(rest) = authority.strip_prefix('[') {
        return rest.split(']').next().unwrap_or_default();
    }
    authority.split(':').next().unwrap_or_default()
}

async fn not_found(request: Request) -> ServerError {
    ServerError::NotFound(format!(
        "No route {} {}; see /openapi.json for the API",
        request.method(),
        request.uri().path()
    ))
}

/// A page size: 1 to 500 (as `/openapi.json` says), 50 when not given; anything else is refused.
fn page_limit(raw: Option<u64>) -> ApiResult<usize> {
    match raw {
        None => Ok(50),
        Some(n @ 1..=500) => Ok(n as usize),
        Some(n) => Err(ServerError::BadRequest(format!(
            "limit {n} is out of range; pass 1 to 500 (default 50)"
        ))),
    }
}

/// A request body that is JSON or empty: a body sent with another `Content-Type` (or none) is
/// refused with 415, one over the size limit with 413 — both as the error envelope.
struct JsonBytes(Bytes);

impl<S: Send + Sync> axum::extract::FromRequest<S> for JsonBytes {
    type Rejection = ServerError;

    async fn from_request(request: Request, state: &S) -> Result<Self, Self::Rejection> {
        let content_type = request
            .headers()
            .get(header::CONTENT_TYPE)
            .map(|v| v.to_str().unwrap_or("?").to_owned());
        let body = Bytes::from_request(request, state).await.map_err(|e| {
            if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
                ServerError::PayloadTooLarge(format!(
                    "The request body is too large: {}; send less, or raise [server] max_body_bytes in the config file",
                    e.body_text()
                ))
            } else {
                ServerError::BadRequest(format!("The request body cannot be read: {}", e.body_text()))
            }
        })?;
        if body.is_empty() {
            return Ok(Self(body));
        }
        let json = content_type.as_deref().is_some_and(|ct| {
            let essence = ct.split(';').next().unwrap_or_default().trim();
            essence.eq_ignore_ascii_case("application/json") || essence.ends_with("+json")
        });
        if !json {
            return Err(ServerError::UnsupportedMediaType(format!(
                "The request body must be JSON, sent with Content-Type: application/json (got {})",
                content_type.map_or_else(|| "no Content-Type".to_owned(), |ct| format!("{ct:?}"))
            )));
        }
        Ok(Self(body))
    }
}

/// A body that must be a JSON object with known fields (serde would also read a struct from an
/// array of its fields' values; the API takes objects only).
fn object_body<T: serde::de::DeserializeOwned>(
    body: &Bytes,
    what: &str,
    hint: &str,
) -> ApiResult<T> {
    let invalid = |e: String| ServerError::BadRequest(format!("Invalid {what}: {e}; {hint}"));
    match serde_json::from_slice::<Value>(body).map_err(|e| invalid(e.to_string()))? {
        value @ Value::Object(_) => {
            serde_json::from_value(value).map_err(|e| invalid(e.to_string()))
        }
        other => Err(invalid(format!(
            "a JSON object is expected, not {}",
            json_type(&other)
        ))),
    }
}

/// A JSON value's type, for messages.
fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}
