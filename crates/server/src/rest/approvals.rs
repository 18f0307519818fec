//! `/v1/approvals`: list and show approvals, approve or deny one.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::routing::{get, post};
use axum::{Extension, Json, Router};
use serde::Deserialize;
use serde_json::Value;
use toolgate_runtime::decide::{self, Decider};
use toolgate_runtime::views::ApprovalList;
use toolgate_store::{Approval, ApprovalStatus};

use super::calls::reads_all_calls;
use super::tools::op_error;
use super::{ApiResult, Gw, JsonBytes, actor, object_body, page_limit};
use crate::Gateway;
use crate::auth::Caller;
use crate::error::ServerError;

/// The approval routes.
pub(super) fn routes() -> Router<Arc<Gateway>> {
    Router::new()
        .route("/v1/approvals", get(list_approvals))
        .route("/v1/approvals/{id}", get(get_approval))
        .route("/v1/approvals/{id}/approve", post(approve))
        .route("/v1/approvals/{id}/deny", post(deny))
}

pub(super) fn approval_json(a: &Approval) -> ApiResult<Value> {
    serde_json::to_value(a).map_err(|e| ServerError::Internal(e.to_string()))
}

/// Whether the caller may decide approvals (and see everyone's).
fn decides(caller: &Caller) -> bool {
    decide::may_decide(&caller.principal)
}

fn sees_approval(caller: &Caller, a: &Approval) -> bool {
    caller.sees(&a.tool)
        && (decides(caller)
            || reads_all_calls(caller)
            || caller.principal.id.as_str() == a.principal)
}

fn approval_not_found(id: &str) -> ServerError {
    ServerError::NotFound(format!(
        "No approval {id} (GET /v1/approvals lists the ones you may see)"
    ))
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ApprovalsParams {
    status: Option<String>,
    limit: Option<u64>,
}

async fn list_approvals(
    State(gw): Gw,
    Extension(caller): Extension<Arc<Caller>>,
    Query(params): Query<ApprovalsParams>,
) -> ApiResult<Json<ApprovalList>> {
    let status = params
        .status
        .as_deref()
        .map(str::parse::<ApprovalStatus>)
        .transpose()?;
    let limit = u32::try_from(page_limit(params.limit)?).unwrap_or(500);
    let everyone = decides(&caller) || reads_all_calls(&caller);
    let own = caller.principal.id.as_str();
    let approvals = gw
        .store()
        .approvals(status, (!everyone).then_some(own), limit)
        .await?;
    let approvals = approvals
        .into_iter()
        .filter(|a| caller.sees(&a.tool))
        .collect();
    Ok(Json(ApprovalList { approvals }))
}

async fn get_approval(
    State(gw): Gw,
    Extension(caller): Extension<Arc<Caller>>,
    Path(id): Path<String>,
) -> ApiResult<Json<Value>> {
    match gw.store().approval(&id).await? {
        Some(a) if sees_approval(&caller, &a) => Ok(Json(approval_json(&a)?)),
        _ => Err(approval_not_found(&id)),
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct DecisionBody {
    #[serde(default)]
    reason: Option<String>,
}

async fn approve(
    state: Gw,
    caller: Extension<Arc<Caller>>,
    id: Path<String>,
    JsonBytes(body): JsonBytes,
) -> ApiResult<Json<Value>> {
    decide(state, caller, id, body, true).await
}

async fn deny(
    state: Gw,
    caller: Extension<Arc<Caller>>,
    id: Path<String>,
    JsonBytes(body): JsonBytes,
) -> ApiResult<Json<Value>> {
    decide(state, caller, id, body, false).await
}

async fn decide(
    State(gw): Gw,
    Extension(caller): Extension<Arc<Caller>>,
    Path(id): Path<String>,
    body: Bytes,
    approve: bool,
) -> ApiResult<Json<Value>> {
    let body: DecisionBody = if body.is_empty() {
        DecisionBody::default()
    } else {
        object_body(
            &body,
            "decision body",
            "send {\"reason\": \"...\"} or nothing",
        )?
    };
    let actor = actor(&caller);
    let decider = Decider {
        principal: &caller.principal,
        actor: &actor,
    };
    let reason = body.reason.as_deref();
    let decided = if approve {
        gw.runtime().approve(decider, &id, reason).await
    } else {
        gw.runtime().deny(decider, &id, reason).await
    }
    .map_err(op_error)?;
    if approve {
        // Runs in a tracked task (`decide::run_approved`): the answer is the approval, now
        // approved; its result follows as an `approval` event and on GET /v1/approvals/{id}.
        gw.run_approval(decided.id.clone());
    }
    Ok(Json(approval_json(&decided)?))
}
