//! `/v1/runs`: a principal's runs (one agent task each, with a budget the pipeline enforces).
//! Start one (`POST`, optionally tightening the principal's budget), list them, read one with
//! its consumption and the calls counted against it, report a model turn, finish it. A run
//! belongs to the principal that started it: to every other principal it does not exist.

use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::routing::{get, post};
use axum::{Extension, Json, Router};
use serde::Deserialize;
use serde_json::{Value, json};
use toolgate_core::{Budget, RunId};
use toolgate_store::{Admission, StoredRun};

use super::{ApiResult, Gw, JsonBytes, object_body, page_limit};
use crate::Gateway;
use crate::auth::Caller;
use crate::error::ServerError;

/// The header a call names its run with (or the call body's `run` field).
pub(super) const RUN_HEADER: &str = "toolgate-run";

/// The routes of runs.
pub(super) fn routes() -> Router<Arc<Gateway>> {
    Router::new()
        .route("/v1/runs", post(start_run).get(list_runs))
        .route("/v1/runs/{id}", get(get_run))
        .route("/v1/runs/{id}/turns", post(report_turn))
        .route("/v1/runs/{id}/finish", post(finish_run))
}

/// The run a call names: its body's `run` field, else the `Toolgate-Run` header.
pub(super) fn call_run(headers: &HeaderMap, body: Option<&str>) -> ApiResult<Option<RunId>> {
    let raw = match body {
        Some(raw) => Some(raw),
        None => headers.get(RUN_HEADER).and_then(|v| v.to_str().ok()),
    };
    raw.map(|raw| RunId::parse(raw).map_err(ServerError::BadRequest))
        .transpose()
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct StartBody {
    /// Keys to tighten; each at most the principal's own.
    #[serde(default)]
    budget: Option<Budget>,
}

/// A run as the API shows it: the stored run with its wall time so far.
fn run_json(run: &StoredRun) -> ApiResult<Value> {
    let mut value = serde_json::to_value(run)
        .map_err(|e| ServerError::Internal(format!("a run did not serialize: {e}")))?;
    if let Value::Object(map) = &mut value {
        let elapsed = run.elapsed_ms();
        map.insert("elapsedMs".into(), json!(elapsed));
    }
    Ok(value)
}

fn run_id(raw: &str) -> ApiResult<RunId> {
    RunId::parse(raw).map_err(ServerError::BadRequest)
}

fn not_found(id: &str) -> ServerError {
    ServerError::NotFound(format!(
        "Run not found: {id}. GET /v1/runs lists your runs; POST /v1/runs starts one."
    ))
}

async fn start_run(
    State(gw): Gw,
    Extension(caller): Extension<Arc<Caller>>,
    JsonBytes(body): JsonBytes,
) -> ApiResult<(StatusCode, Json<Value>)> {
    const HINT: &str = "send {\"budget\": {\"max_tool_calls\": N, ...}} or no body";
    let body: StartBody = if body.is_empty() {
        StartBody::default()
    } else {
        let mut raw: Value = object_body(&body, "run body", HINT)?;
        // JSON has one number type: `5.0` is the integer 5 (as JSON Schema says), which serde
        // would refuse for a count.
        match raw.get_mut("budget") {
            None | Some(Value::Null | Value::Object(_)) => {}
            // serde would read a list as the struct's fields in order.
            Some(other) => {
                return Err(ServerError::BadRequest(format!(
                    "Invalid run body: budget must be an object, not {}; {HINT}",
                    super::json_type(other)
                )));
            }
        }
        if let Some(Value::Object(budget)) = raw.get_mut("budget") {
            for value in budget.values_mut() {
                if let Some(n) = value.as_f64().filter(|n| {
                    !value.is_u64() && n.fract() == 0.0 && *n >= 0.0 && *n <= u64::MAX as f64
                }) {
                    *value = json!(n as u64);
                }
            }
        }
        serde_json::from_value(raw)
            .map_err(|e| ServerError::BadRequest(format!("Invalid run body: {e}; {HINT}")))?
    };
    let run = gw
        .runtime()
        .start_run(&caller.principal, &body.budget.unwrap_or_default())
        .await?;
    Ok((StatusCode::CREATED, Json(run_json(&run)?)))
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ListParams {
    limit: Option<u64>,
}

async fn list_runs(
    State(gw): Gw,
    Extension(caller): Extension<Arc<Caller>>,
    Query(params): Query<ListParams>,
) -> ApiResult<Json<Value>> {
    let limit = u32::try_from(page_limit(params.limit)?).unwrap_or(500);
    let runs = gw.runtime().runs_of(&caller.principal, limit).await?;
    let runs = runs.iter().map(run_json).collect::<ApiResult<Vec<_>>>()?;
    Ok(Json(json!({ "runs": runs })))
}

async fn get_run(
    State(gw): Gw,
    Extension(caller): Extension<Arc<Caller>>,
    Path(raw): Path<String>,
) -> ApiResult<Json<Value>> {
    let id = run_id(&raw)?;
    let Some((run, calls)) = gw.runtime().run_of(&caller.principal, id).await? else {
        return Err(not_found(&raw));
    };
    let mut value = run_json(&run)?;
    if let Value::Object(map) = &mut value {
        map.insert("calls".into(), json!(calls));
    }
    Ok(Json(value))
}

async fn report_turn(
    State(gw): Gw,
    Extension(caller): Extension<Arc<Caller>>,
    Path(raw): Path<String>,
) -> ApiResult<Json<Value>> {
    let id = run_id(&raw)?;
    match gw.runtime().run_turn(&caller.principal, id).await? {
        Admission::Counted(turns) => Ok(Json(json!({ "turns": turns }))),
        Admission::Refused(why) => Err(ServerError::Conflict(why.message(&id))),
        Admission::NotFound => Err(not_found(&raw)),
    }
}

async fn finish_run(
    State(gw): Gw,
    Extension(caller): Extension<Arc<Caller>>,
    Path(raw): Path<String>,
) -> ApiResult<Json<Value>> {
    let id = run_id(&raw)?;
    gw.runtime().finish_run(&caller.principal, id).await?;
    let Some((run, _)) = gw.runtime().run_of(&caller.principal, id).await? else {
        return Err(not_found(&raw));
    };
    Ok(Json(run_json(&run)?))
}
