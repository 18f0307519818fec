//! `/v1/servers`: the upstream MCP servers whose tools this server serves — list, add, show,
//! their tools (with the old and new definition of a changed one), approve tools, restart, remove.
//! The use cases are the runtime's (`Runtime::servers()`, shared with `toolgate servers` and the
//! web UI). Reading needs only a token; changing needs `toolgate.servers.manage`, checked by the
//! runtime, as `toolgate.tools.manage` guards tool definitions.

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Extension, Json, Router};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use toolgate_runtime::OpError;
use toolgate_runtime::servers::Manager;
use toolgate_runtime::servers::views::{ApprovedTools, ServerList, ServerTools};

use super::tools::op_error;

/// A refused server operation as the API answers it (an invalid entry is a 400 naming every
/// problem; the rest as for tool definitions).
fn server_error(e: OpError) -> ServerError {
    match e {
        OpError::BadRequest(message) => ServerError::BadRequest(message),
        other => op_error(other),
    }
}
use super::{ApiResult, Gw, JsonBytes, actor, object_body};
use crate::Gateway;
use crate::auth::Caller;
use crate::error::ServerError;

/// The server routes.
pub(super) fn routes() -> Router<Arc<Gateway>> {
    Router::new()
        .route("/v1/servers", get(list_servers).post(add_server))
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
        .map_err(server_error)?;
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
        .map_err(server_error)
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
        .map_err(server_error)?;
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
        .map_err(server_error)?;
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
            .map_err(server_error),
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
                    .map_err(server_error)?;
                answer.approved.extend(one.approved);
            }
            Ok(Json(answer))
        }
        _ => Err(ServerError::BadRequest(format!(
            "Invalid approval request: {APPROVE_HINT} (not both, and not an empty list)"
        ))),
    }
}

/// An entry (or name) the gateway refused as a 422 listing every problem: one issue per line of
/// the runtime's message, its `PATH: ` prefix (`servers.files.url: …`) as the issue's path.
fn invalid_entry(name: &str, message: &str) -> ServerError {
    let errors = message
        .lines()
        .filter(|line| !line.trim().is_empty())
        .map(|line| {
            let (path, text) = match line.split_once(": ") {
                Some((path, text)) if !path.is_empty() && !path.contains(' ') => (path, text),
                _ => ("", line),
            };
            toolgate_core::Issue {
                path: path.to_owned(),
                code: "server.invalid".to_owned(),
                message: text.trim().to_owned(),
            }
        })
        .collect::<Vec<_>>();
    ServerError::Invalid {
        message: format!(
            "The server entry {name} is invalid: {} problem(s)",
            errors.len()
        ),
        report: Box::new(toolgate_core::ValidationReport {
            errors,
            warnings: Vec::new(),
        }),
    }
}

/// `POST /v1/servers`: `{"name": NAME, "entry": {command, args, … | url, headers, …}, "approve": false}`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct AddBody {
    name: String,
    entry: Value,
    #[serde(default)]
    approve: bool,
}

const ADD_HINT: &str = "send {\"name\": \"files\", \"entry\": {\"command\": \"/usr/bin/node\", \"args\": [\"server.js\"]}} (or an entry with \"url\"), with \"approve\": true to approve its tools as first seen";

async fn add_server(
    State(gw): Gw,
    Extension(caller): Extension<Arc<Caller>>,
    JsonBytes(body): JsonBytes,
) -> ApiResult<(StatusCode, Json<Value>)> {
    if body.is_empty() {
        return Err(ServerError::BadRequest(format!(
            "Say which server to add: {ADD_HINT}"
        )));
    }
    let request: AddBody = object_body(&body, "server", ADD_HINT)?;
    if !request.entry.is_object() {
        return Err(ServerError::BadRequest(format!(
            "Invalid server: entry must be a JSON object; {ADD_HINT}"
        )));
    }
    let by = actor(&caller);
    let manager = Manager {
        principal: &caller.principal,
        actor: &by,
    };
    let detail = gw
        .runtime()
        .servers()
        .add(manager, &request.name, request.entry, request.approve)
        .await
        .map_err(|e| match e {
            OpError::BadRequest(message) => invalid_entry(&request.name, &message),
            other => server_error(other),
        })?;
    Ok((StatusCode::CREATED, view(&detail)?))
}
