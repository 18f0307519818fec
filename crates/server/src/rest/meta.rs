//! `/healthz` and `/openapi.json` (open: they hold no data) and `/metrics` (behind auth).

use std::sync::Arc;

use axum::extract::State;
use axum::http::{HeaderValue, header};
use axum::response::IntoResponse;
use axum::routing::get;
use axum::{Json, Router};
use serde_json::{Value, json};

use super::Gw;
use crate::Gateway;

/// The routes every client may read without a token.
pub(super) fn open_routes() -> Router<Arc<Gateway>> {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/openapi.json", get(openapi))
}

/// The metrics route (behind auth like the API).
pub(super) fn authenticated_routes() -> Router<Arc<Gateway>> {
    Router::new().route("/metrics", get(metrics))
}

/// Each upstream server's name and state (no error text: this route is open), with its tool
/// counts as the local principal sees them.
fn server_states(gw: &Gateway) -> Vec<Value> {
    let principal = toolgate_core::Principal::local();
    gw.runtime()
        .servers()
        .list(&principal)
        .servers
        .into_iter()
        .map(|s| {
            json!({
                "name": s.name,
                "state": s.state.state,
                "tools": s.tools_served,
                "pendingChanges": s.pending_changes,
            })
        })
        .collect()
}

async fn healthz(State(gw): Gw) -> Json<Value> {
    Json(json!({
        "servers": server_states(&gw),
        "status": "ok",
        "version": env!("CARGO_PKG_VERSION"),
        "tools": gw.registry().snapshot().len(),
        "store": gw.store().backend(),
        "callsInFlight": gw.calls_in_flight(),
    }))
}

/// The document for this server's mode: with principals every API route asks for a token;
/// without, none does.
async fn openapi(State(gw): Gw) -> Json<Value> {
    Json(crate::openapi::openapi_document_for(
        gw.auth().requires_token(),
    ))
}

async fn metrics() -> impl IntoResponse {
    (
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
        )],
        crate::metrics::render(),
    )
}
