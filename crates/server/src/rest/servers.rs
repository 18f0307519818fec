//! `/v1/servers`: the upstream MCP servers whose tools this server serves — list, show, their
//! tools (with the old and new definition of a changed one), approve tools, restart, remove.
//! The use cases are the runtime's (`Runtime::servers()`, shared with `toolgate servers` and the
//! web UI). Reading needs only a token; changing needs `toolgate.servers.manage`, checked by the
//! runtime, as `toolgate.tools.manage` guards tool definitions.

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::routing::{get, post};
use axum::{Extension, Json, Router};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use toolgate_runtime::servers::Manager;
use toolgate_runtime::servers::views::{ApprovedTools, ServerList, ServerTools};

use super::tools::op_error;
use super::{ApiResult, Gw, JsonBytes, actor, object_body};
use crate::Gateway;
use crate::auth::Caller;
use crate::error::ServerError;

/// The server routes.
pub(super) fn routes() -> Router<Arc<Gateway>> {
    Router::new()
        .route("/v1/servers", get(list_servers))
        .route("/v1/servers/{name}", get(get_server).delete(remove_server))
        .route("/v1/servers/{name}/tools", get(server_tools))
        .route("/v1/servers/{name}/restart", post(restart_server))
        .route("/v1/servers/{name}/approve", post(approve_tools))
}

/// A view as JSON, through a `Value`: a flattened view whose field repeats its summary's (the
/// detail's `tools` list after the summary's `tools` count) answers with one key, the list.
fn view<T: Serialize>(value: &T) -> ApiResult<Json<Value>> {
    serde_json::to_value(value)
        .map(Json)
        .map_err(|e| ServerError::Internal(format!("a server view cannot be written: {e}")))
}

async fn list_servers(
    State(gw): Gw,
    Extension(caller): Extension<Arc<Caller>>,
) -> Json<ServerList> {
    Json(gw.runtime().servers().list(&caller.principal))
}

async fn get_server(
    State(gw): Gw,
    Extension(caller): Extension<Arc<Caller>>,
    Path(name): Path<String>,
) -> ApiResult<Json<Value>> {
    let detail = gw
        .runtime()
        .servers()
        .show(&caller.principal, &name)
        .map_err(op_error)?;
    view(&detail)
}

async fn server_tools(
    State(gw): Gw,
    Extension(caller): Extension<Arc<Caller>>,
    Path(name): Path<String>,
) -> ApiResult<Json<ServerTools>> {
    gw.runtime()
        .servers()
        .tools(&caller.principal, &name)
        .map(Json)
        .map_err(op_error)
}

async fn restart_server(
    State(gw): Gw,
    Extension(caller): Extension<Arc<Caller>>,
    Path(name): Path<String>,
) -> ApiResult<Json<Value>> {
    let by = actor(&caller);
    let manager = Manager {
        principal: &caller.principal,
        actor: &by,
    };
    let summary = gw
        .runtime()
        .servers()
        .restart(manager, &name)
        .await
        .map_err(op_error)?;
    view(&summary)
}

async fn remove_server(
    State(gw): Gw,
    Extension(caller): Extension<Arc<Caller>>,
    Path(name): Path<String>,
) -> ApiResult<Json<Value>> {
    let by = actor(&caller);
    let manager = Manager {
        principal: &caller.principal,
        actor: &by,
    };
    let removed = gw
        .runtime()
        .servers()
        .remove(manager, &name)
        .await
        .map_err(op_error)?;
    view(&removed)
}

/// `POST /v1/servers/{name}/approve`: `{"tools": [NAME, …]}` (upstream or toolgate names) or
/// `{"all": true}` — an explicit yes, never implied by an empty body.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ApproveBody {
    #[serde(default)]
    tools: Option<Vec<String>>,
    #[serde(default)]
    all: Option<bool>,
}

const APPROVE_HINT: &str = "send {\"tools\": [\"TOOL\", …]} to approve named tools (upstream or toolgate names), or {\"all\": true} for every tool waiting for approval";

async fn approve_tools(
    State(gw): Gw,
    Extension(caller): Extension<Arc<Caller>>,
    Path(name): Path<String>,
    JsonBytes(body): JsonBytes,
) -> ApiResult<Json<ApprovedTools>> {
    if body.is_empty() {
        return Err(ServerError::BadRequest(format!(
            "Say what to approve: {APPROVE_HINT}"
        )));
    }
    let request: ApproveBody = object_body(&body, "approval request", APPROVE_HINT)?;
    let by = actor(&caller);
    let manager = Manager {
        principal: &caller.principal,
        actor: &by,
    };
    let servers = gw.runtime().servers();
    match (request.tools, request.all) {
        (None, Some(true)) => servers
            .approve(manager, &name, None)
            .await
            .map(Json)
            .map_err(op_error),
        (Some(tools), None | Some(false)) if !tools.is_empty() => {
            let mut answer = ApprovedTools {
                server: name.clone(),
                by: by.clone(),
                approved: Vec::new(),
            };
            for tool in &tools {
                let one = servers
                    .approve(manager, &name, Some(tool))
                    .await
                    .map_err(op_error)?;
                answer.approved.extend(one.approved);
            }
            Ok(Json(answer))
        }
        _ => Err(ServerError::BadRequest(format!(
            "Invalid approval request: {APPROVE_HINT} (not both, and not an empty list)"
        ))),
    }
}
