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
use toolgate_runtime::views::{CallFilter, CallOutcome, CallsPage};
use toolgate_store::{ApprovalStatus, AuditCall};

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
    /// The run to count the call against (or the `Toolgate-Run` header).
    #[serde(default)]
    run: Option<String>,
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
            run: None,
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
    if let Some(run) = super::runs::call_run(&headers, body.run.as_deref())? {
        request = request.run(run);
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

async fn list_calls(
    State(gw): Gw,
    Extension(caller): Extension<Arc<Caller>>,
    Query(params): Query<CallsParams>,
) -> ApiResult<Json<CallsPage>> {
    let limit = u32::try_from(page_limit(params.limit)?).unwrap_or(500);
    let outcome = params
        .outcome
        .as_deref()
        .map(str::parse::<CallOutcome>)
        .transpose()
        .map_err(ServerError::BadRequest)?;
    let before = match params.cursor.as_deref() {
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
    let filter = CallFilter {
        tool: params.tool,
        principal: params.principal,
        outcome,
    };
    // Store pages are cut first and filtered to what the caller may read (and asked for) after.
    let page = gw
        .runtime()
        .calls_page(&filter, limit, before, |principal, tool| {
            may_read(&caller, principal, tool)
        })
        .await?;
    Ok(Json(page))
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
) -> ApiResult<Json<AuditCall>> {
    let id = call_id(&raw)?;
    let call = gw
        .runtime()
        .call_detail(id, |principal, tool| may_read(&caller, principal, tool))
        .await?;
    call.map(Json).ok_or_else(|| call_not_found(&raw))
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
