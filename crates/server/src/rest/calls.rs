//! `/v1/tools/{name}/call` (make a call) and `/v1/calls` (the calls made: list, show, output).

use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Extension, Json, Router};
use serde::Deserialize;
use serde_json::{Value, json};
use toolgate_core::{CallId, CallOrigin, CallRequest, Permission};
use toolgate_store::{ApprovalStatus, AuditQuery};

use super::approvals::approval_json;
use super::tools::visible;
use super::{ApiResult, Gw, JsonBytes, json_type, object_body, page_limit};
use crate::Gateway;
use crate::auth::Caller;
use crate::error::ServerError;

/// The routes that make calls and read them back.
pub(super) fn routes() -> Router<Arc<Gateway>> {
    Router::new()
        .route("/v1/tools/{name}/call", post(call_tool))
        .route("/v1/calls", get(list_calls))
        .route("/v1/calls/{call_id}", get(get_call))
        .route("/v1/calls/{call_id}/output", get(call_output))
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct CallBody {
    #[serde(default)]
    arguments: Option<Value>,
    /// Repeating a call with the same key returns the same approval or result.
    #[serde(default)]
    idempotency_key: Option<String>,
    /// Why the caller wants to run it (shown to an approver).
    #[serde(default)]
    reason: Option<String>,
}

async fn call_tool(
    State(gw): Gw,
    Extension(caller): Extension<Arc<Caller>>,
    Path(name): Path<String>,
    headers: HeaderMap,
    JsonBytes(body): JsonBytes,
) -> ApiResult<Response> {
    let body: CallBody = if body.is_empty() {
        CallBody {
            arguments: None,
            idempotency_key: None,
            reason: None,
        }
    } else {
        object_body(&body, "call body", "send {\"arguments\": {...}}")?
    };
    let arguments = match body.arguments {
        None => json!({}),
        Some(arguments @ Value::Object(_)) => arguments,
        Some(other) => {
            return Err(ServerError::BadRequest(format!(
                "arguments must be a JSON object, not {}; send {{\"arguments\": {{...}}}}",
                json_type(&other)
            )));
        }
    };
    // Where the call came from: REST, and the client the optional X-Toolgate-Client names.
    let client = headers
        .get("x-toolgate-client")
        .and_then(|v| v.to_str().ok());
    let mut request = CallRequest::new(name.clone(), arguments).origin(CallOrigin::rest(client));
    if let Some(key) = body.idempotency_key {
        request = request.idempotency_key(key);
    }
    if let Some(reason) = body.reason {
        request = request.reason(reason);
    }
    let result = gw.call(&caller, request, None).await;
    if result.error_kind() == Some(toolgate_core::ErrorKind::NotFound)
        && visible(&gw, &caller, &name).is_err()
    {
        // No such tool (or one the caller may not see): 404, the envelope still the body. A
        // tool that exists and reports not_found itself (a missing file) stays a 200.
        return Ok((StatusCode::NOT_FOUND, Json(result)).into_response());
    }
    let Some(id) = result.approval_id.clone() else {
        return Ok(Json(result).into_response());
    };
    let Some(approval) = gw.store().approval(&id).await? else {
        return Ok(Json(result).into_response());
    };
    // A repeated idempotency key whose call already ran: that call's result.
    if let (ApprovalStatus::Executed, Some(stored)) = (approval.status, &approval.result) {
        return Ok(Json(stored.clone()).into_response());
    }
    let body = json!({
        "approval": approval_json(&approval)?,
        "result": result,
        "watch": {
            "approval": format!("/v1/approvals/{id}"),
            "events": "/v1/events",
        },
    });
    Ok((StatusCode::ACCEPTED, Json(body)).into_response())
}
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct CallsParams {
    tool: Option<String>,
    /// Only calls made by this principal.
    principal: Option<String>,
    /// `ok` (the call returned data) or `error` (any error kind), or one error kind.
    outcome: Option<String>,
    limit: Option<u64>,
    cursor: Option<String>,
}

/// Whether the caller may read every principal's calls (else only its own).
pub(super) fn reads_all_calls(caller: &Caller) -> bool {
    Permission::parse("toolgate.audit.read").is_ok_and(|p| caller.principal.holds(&p))
}

fn may_read(caller: &Caller, principal: &str, tool: &str) -> bool {
    caller.sees(tool) && (reads_all_calls(caller) || caller.principal.id.as_str() == principal)
}

/// The `outcome` filter of `GET /v1/calls`.
#[derive(Clone, Copy, Debug)]
enum OutcomeFilter {
    Ok,
    Error,
    Kind(toolgate_core::ErrorKind),
}

impl OutcomeFilter {
    fn parse(raw: Option<&str>) -> ApiResult<Option<Self>> {
        match raw {
            None => Ok(None),
            Some("ok") => Ok(Some(Self::Ok)),
            Some("error") => Ok(Some(Self::Error)),
            Some(raw) => toolgate_core::ErrorKind::ALL
                .iter()
                .find(|k| k.as_str() == raw)
                .map(|k| Some(Self::Kind(*k)))
                .ok_or_else(|| {
                    ServerError::BadRequest(format!(
                        "Unknown outcome {raw:?}; use ok, error or an error kind ({})",
                        toolgate_core::ErrorKind::ALL
                            .iter()
                            .map(|k| k.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ))
                }),
        }
    }

    fn matches(self, record: &toolgate_store::AuditRecord) -> bool {
        match (self, record.error_kind()) {
            (Self::Ok, kind) => kind.is_none(),
            (Self::Error, kind) => kind.is_some(),
            (Self::Kind(want), kind) => kind == Some(want),
        }
    }
}

/// How many store pages one `GET /v1/calls` reads at most while filling a filtered page; a
/// page may then come back short, with a `nextCursor` to go on from.
const MAX_CALL_PAGES: usize = 20;

async fn list_calls(
    State(gw): Gw,
    Extension(caller): Extension<Arc<Caller>>,
    Query(params): Query<CallsParams>,
) -> ApiResult<Json<Value>> {
    let limit = u32::try_from(page_limit(params.limit)?).unwrap_or(500);
    let outcome = OutcomeFilter::parse(params.outcome.as_deref())?;
    let principal = params.principal.as_deref().filter(|p| !p.is_empty());
    let mut before = match params.cursor.as_deref() {
        None | Some("") => None,
        Some(raw) if raw.len() > 18 || !raw.bytes().all(|b| b.is_ascii_digit()) => {
            return Err(ServerError::BadRequest(format!(
                "Invalid cursor {raw:?}: pass the nextCursor of the previous page"
            )));
        }
        Some(raw) => Some(raw.parse::<i64>().map_err(|_| {
            ServerError::BadRequest(format!(
                "Invalid cursor {raw:?}: pass the nextCursor of the previous page"
            ))
        })?),
    };
    let mut calls: Vec<toolgate_store::AuditRecord> = Vec::new();
    let mut next = None;
    // Store pages are cut first and filtered to what the caller may read (and asked for) after;
    // keep reading until the page is full or the log is exhausted.
    for _ in 0..MAX_CALL_PAGES {
        let want = limit - calls.len() as u32;
        let records = gw
            .store()
            .audit(&AuditQuery {
                tool: params.tool.clone().filter(|t| !t.is_empty()),
                limit: want,
                before,
            })
            .await?;
        let full = records.len() == want as usize;
        let last = records.last().and_then(|r| r.seq);
        calls.extend(records.into_iter().filter(|r| {
            may_read(&caller, &r.principal, &r.tool)
                && principal.is_none_or(|p| r.principal == p)
                && outcome.is_none_or(|o| o.matches(r))
        }));
        next = if full { last } else { None };
        if next.is_none() || calls.len() >= limit as usize {
            break;
        }
        before = next;
    }
    Ok(Json(
        json!({ "calls": calls, "nextCursor": next.map(|s| s.to_string()) }),
    ))
}

fn call_id(raw: &str) -> ApiResult<CallId> {
    CallId::parse(raw).map_err(|e| ServerError::BadRequest(format!("Invalid call id {raw:?}: {e}")))
}

fn call_not_found(id: &str) -> ServerError {
    ServerError::NotFound(format!(
        "Call not found: {id}. GET /v1/calls lists recent calls."
    ))
}

async fn get_call(
    State(gw): Gw,
    Extension(caller): Extension<Arc<Caller>>,
    Path(raw): Path<String>,
) -> ApiResult<Json<Value>> {
    let id = call_id(&raw)?;
    let Some(call) = gw.store().audit_call(id).await? else {
        return Err(call_not_found(&raw));
    };
    let (principal, tool) = match (&call.finished, &call.started) {
        (Some(f), _) => (f.principal.clone(), f.tool.clone()),
        (None, Some(s)) => (s.principal.clone(), s.tool.clone()),
        (None, None) => return Err(call_not_found(&raw)),
    };
    if !may_read(&caller, &principal, &tool) {
        return Err(call_not_found(&raw));
    }
    let mut body = serde_json::to_value(&call).map_err(|e| ServerError::Internal(e.to_string()))?;
    body["interrupted"] = json!(call.interrupted());
    Ok(Json(body))
}

async fn call_output(
    State(gw): Gw,
    Extension(caller): Extension<Arc<Caller>>,
    Path(raw): Path<String>,
) -> ApiResult<Response> {
    let id = call_id(&raw)?;
    let Some(call) = gw.store().audit_call(id).await? else {
        return Err(call_not_found(&raw));
    };
    let Some(finished) = call.finished else {
        return Err(call_not_found(&raw));
    };
    if !may_read(&caller, &finished.principal, &finished.tool) {
        return Err(call_not_found(&raw));
    }
    match gw.store().output(id).await? {
        Some(bytes) => Ok((
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            )],
            bytes,
        )
            .into_response()),
        None => Err(ServerError::NotFound(format!(
            "Call {raw} has no stored output: only outputs over {} bytes are kept apart; its data is in GET /v1/calls/{raw}",
            toolgate_store::LARGE_OUTPUT_BYTES
        ))),
    }
}
