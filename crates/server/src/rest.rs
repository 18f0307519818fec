//! The REST API under `/v1` (DESIGN.md §4), plus `/openapi.json`, `/healthz` and `/metrics`.
//! JSON is camelCase; lists take `limit` and `cursor` and answer with `nextCursor`.

use std::convert::Infallible;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Path, Query, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Extension, Json, Router};
use futures_util::Stream;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::sync::broadcast::error::RecvError;
use toolgate_core::{
    CallId, CallOrigin, CallRequest, Category, Consequence, CoreError, Effect, Permission,
    RegisteredTool, ToolDefinition, ToolSpec,
};
use toolgate_export::{ExportFormat, ExportOptions};
use toolgate_store::{Approval, ApprovalStatus, AuditQuery};

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
        .route("/v1/tools", get(list_tools).post(create_tool))
        .route("/v1/tools/validate", post(validate_tool))
        .route(
            "/v1/tools/{name}",
            get(get_tool).put(update_tool).delete(delete_tool),
        )
        .route("/v1/tools/{name}/history", get(tool_history))
        .route("/v1/tools/{name}/call", post(call_tool))
        .route("/v1/approvals", get(list_approvals))
        .route("/v1/approvals/{id}", get(get_approval))
        .route("/v1/approvals/{id}/approve", post(approve))
        .route("/v1/approvals/{id}/deny", post(deny))
        .route("/v1/calls", get(list_calls))
        .route("/v1/calls/{call_id}", get(get_call))
        .route("/v1/calls/{call_id}/output", get(call_output))
        .route("/v1/export/{format}", get(export))
        .route("/v1/events", get(events))
        .route("/metrics", get(metrics))
        .layer(axum::middleware::from_fn_with_state(
            Arc::clone(&gw),
            authenticate,
        ));
    Router::new()
        .route("/healthz", get(healthz))
        .route("/openapi.json", get(openapi))
        .merge(crate::ui::routes())
        .merge(api)
        .fallback(not_found)
        .layer(DefaultBodyLimit::max(limit))
        .layer(axum::middleware::from_fn_with_state(
            Arc::clone(&gw),
            check_host,
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

async fn healthz(State(gw): Gw) -> Json<Value> {
    Json(json!({
        "status": "ok",
        "version": env!("CARGO_PKG_VERSION"),
        "tools": gw.registry().snapshot().len(),
        "store": gw.store().backend(),
        "callsInFlight": gw.calls_in_flight(),
    }))
}

async fn openapi() -> Json<Value> {
    Json(crate::openapi::openapi_document())
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

// ---------------------------------------------------------------------------------------------
// Tools

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ListParams {
    category: Option<String>,
    effect: Option<String>,
    consequence: Option<String>,
    tag: Option<String>,
    q: Option<String>,
    /// `true`: only built-in tools; `false`: only custom ones.
    builtin: Option<bool>,
    limit: Option<usize>,
    cursor: Option<String>,
}

fn parse_filter<T: std::str::FromStr>(
    what: &str,
    raw: Option<&str>,
    all: &[&str],
) -> ApiResult<Option<T>> {
    match raw {
        None | Some("") => Ok(None),
        Some(raw) => raw.parse().map(Some).map_err(|_| {
            ServerError::BadRequest(format!(
                "Unknown {what} {raw:?}; use one of {}",
                all.join(", ")
            ))
        }),
    }
}

fn names<T: Copy>(all: &[T], f: impl Fn(T) -> &'static str) -> Vec<&'static str> {
    all.iter().map(|x| f(*x)).collect()
}

/// Summary of a tool for lists.
fn summary(tool: &RegisteredTool) -> Value {
    let spec = tool.spec();
    let mut v = json!({
        "name": spec.name().as_str(),
        "description": spec.description(),
        "category": spec.category(),
        "effect": spec.effect(),
        "consequence": spec.consequence(),
        "requiresConfirmation": spec.requires_confirmation(),
        "tags": spec.tags(),
        "builtin": tool.is_builtin(),
        "definitionHash": spec.definition_hash(),
    });
    if let Some(title) = &spec.definition().title {
        v["title"] = json!(title);
    }
    if let Some(version) = &spec.definition().version {
        v["version"] = json!(version);
    }
    v
}

/// Full view of one tool: the definition document, its resolved limits and schemas.
fn detail(tool: &RegisteredTool, stored_version: Option<i64>) -> Value {
    let spec = tool.spec();
    let limits = spec.limits();
    let mut v = summary(tool);
    v["definition"] = serde_json::to_value(spec.definition()).unwrap_or(Value::Null);
    v["inputSchema"] = spec.input_schema().clone();
    if let Some(output) = spec.output_schema() {
        v["outputSchema"] = output.clone();
    }
    v["limits"] = json!({
        "timeoutMs": u64::try_from(limits.timeout.as_millis()).unwrap_or(u64::MAX),
        "maxOutputBytes": limits.max_output_bytes,
        "isolation": limits.isolation,
        "maxAttempts": limits.max_attempts,
    });
    v["requiredPermissions"] = json!(
        spec.required_permissions()
            .iter()
            .map(Permission::as_str)
            .collect::<Vec<_>>()
    );
    v["storedVersion"] = json!(stored_version);
    v
}

async fn list_tools(
    State(gw): Gw,
    Extension(caller): Extension<Arc<Caller>>,
    Query(params): Query<ListParams>,
) -> ApiResult<Json<Value>> {
    let category = parse_filter::<Category>(
        "category",
        params.category.as_deref(),
        &names(Category::ALL, Category::as_str),
    )?;
    let effect = parse_filter::<Effect>(
        "effect",
        params.effect.as_deref(),
        &names(Effect::ALL, Effect::as_str),
    )?;
    let consequence = parse_filter::<Consequence>(
        "consequence",
        params.consequence.as_deref(),
        &names(Consequence::ALL, Consequence::as_str),
    )?;
    let limit = params.limit.unwrap_or(50).clamp(1, 500);
    let mut cursor = params.cursor.clone();
    let mut tools = Vec::with_capacity(limit);
    // Pages are cut from the registry, then filtered to what the caller may see; keep reading
    // until the page is full or the registry is exhausted.
    loop {
        let page = gw
            .registry()
            .list(&toolgate_core::Query {
                category,
                effect,
                consequence,
                tag: params.tag.clone(),
                text: params.q.clone(),
                limit: limit - tools.len(),
                cursor: cursor.clone(),
            })
            .map_err(|e| ServerError::BadRequest(e.to_string()))?;
        tools.extend(
            page.items
                .iter()
                .filter(|t| caller.sees(t.spec().name().as_str()))
                .filter(|t| params.builtin.is_none_or(|b| t.is_builtin() == b))
                .map(summary),
        );
        cursor = page.next_cursor;
        if tools.len() >= limit || cursor.is_none() {
            break;
        }
    }
    Ok(Json(json!({ "tools": tools, "nextCursor": cursor })))
}

/// The tool, if it exists and the caller may see it; otherwise the same not-found either way.
fn visible(gw: &Gateway, caller: &Caller, name: &str) -> ApiResult<RegisteredTool> {
    match gw.registry().get(name) {
        Some(tool) if caller.sees(name) => Ok(tool),
        _ => Err(ServerError::NotFound(format!(
            "Tool not found: {name}. GET /v1/tools lists the tools you can use."
        ))),
    }
}

async fn get_tool(
    State(gw): Gw,
    Extension(caller): Extension<Arc<Caller>>,
    Path(name): Path<String>,
) -> ApiResult<Json<Value>> {
    let tool = visible(&gw, &caller, &name)?;
    let stored = if tool.is_builtin() {
        None
    } else {
        gw.store().definition(&name).await?.map(|d| d.version)
    };
    Ok(Json(detail(&tool, stored)))
}

/// Reads a definition from a request body (JSON; the definition file format).
fn definition_from(body: &Bytes) -> ApiResult<ToolDefinition> {
    let text = std::str::from_utf8(body)
        .map_err(|_| ServerError::BadRequest("The request body is not UTF-8 JSON".into()))?;
    ToolDefinition::parse(text, toolgate_core::Format::Json).map_err(|e| invalid_from(&e, None))
}

/// A core error as a 422 listing every problem (or the right status for non-validation errors).
fn invalid_from(e: &CoreError, name: Option<&str>) -> ServerError {
    use toolgate_core::CoreErrorKind as K;
    let message = e.to_string();
    match (e.report(), e.kind()) {
        (Some(report), _) => ServerError::Invalid {
            message: format!(
                "The definition{} is invalid: {} problem(s)",
                name.map(|n| format!(" of {n}")).unwrap_or_default(),
                report.errors.len()
            ),
            report: Box::new(report.clone()),
        },
        (None, K::Forbidden) => ServerError::Forbidden(message),
        (None, K::Conflict) => ServerError::Conflict(message),
        (None, K::NotFound) => ServerError::NotFound(message),
        (None, K::Parse) => ServerError::Invalid {
            message: format!("The definition cannot be read: {message}"),
            report: Box::new(toolgate_core::ValidationReport {
                errors: vec![toolgate_core::Issue {
                    path: String::new(),
                    code: "parse".into(),
                    message,
                }],
                warnings: Vec::new(),
            }),
        },
        (None, _) => ServerError::BadRequest(message),
    }
}

fn require_manage(caller: &Caller) -> ApiResult<()> {
    let needed = Permission::parse("toolgate.tools.manage").map_err(ServerError::Internal)?;
    if caller.principal.holds(&needed) {
        Ok(())
    } else {
        Err(ServerError::Forbidden(format!(
            "Principal {} lacks permission toolgate.tools.manage, needed to change tool definitions; grant it in the config file",
            caller.principal.id
        )))
    }
}

async fn create_tool(
    State(gw): Gw,
    Extension(caller): Extension<Arc<Caller>>,
    body: Bytes,
) -> ApiResult<Response> {
    require_manage(&caller)?;
    let def = definition_from(&body)?;
    let name = def.name.clone();
    let spec = checked(&gw, &caller, def.clone(), false).await?;
    let stored = gw
        .store()
        .insert_definition(&spec, &actor(&caller), &caller.plan)
        .await?;
    if let Err(e) = gw.registry().register_definition(def) {
        // Another writer got there first; the sync task will converge the registry.
        tracing::debug!(tool = %name, error = %e, "registered by sync instead");
    }
    let tool = gw
        .registry()
        .get(&name)
        .ok_or_else(|| ServerError::Internal(format!("Tool {name} vanished after being stored")))?;
    let mut body = detail(&tool, Some(stored.version));
    body["warnings"] = json!(spec.warnings());
    let location = HeaderValue::from_str(&format!("/v1/tools/{name}"))
        .map_err(|e| ServerError::Internal(e.to_string()))?;
    Ok((
        StatusCode::CREATED,
        [(header::LOCATION, location)],
        Json(body),
    )
        .into_response())
}

/// Validates as registration would, under the caller's plan; 422 with every problem if not.
/// A definition that passes is recorded as a `validated` event (seed 003 §11).
async fn checked(
    gw: &Gateway,
    caller: &Caller,
    def: ToolDefinition,
    replace: bool,
) -> ApiResult<ToolSpec> {
    let name = def.name.clone();
    let started = std::time::Instant::now();
    let spec = gw
        .registry()
        .check(def, replace, Some(caller.plan.max_isolation))
        .map_err(|e| invalid_from(&e, Some(&name)))?;
    let took = started.elapsed();
    if let Err(e) = gw
        .store()
        .record_validated(
            &name,
            spec.category(),
            spec.definition().parameters.len(),
            took,
        )
        .await
    {
        tracing::warn!(tool = %name, error = %e, "could not record the validated event");
    }
    Ok(spec)
}

async fn update_tool(
    State(gw): Gw,
    Extension(caller): Extension<Arc<Caller>>,
    Path(name): Path<String>,
    body: Bytes,
) -> ApiResult<Json<Value>> {
    require_manage(&caller)?;
    let def = definition_from(&body)?;
    if def.name != name {
        return Err(ServerError::BadRequest(format!(
            "The definition is named {:?} but the URL names {name:?}; rename by creating the new tool and deleting the old one",
            def.name
        )));
    }
    let existing = visible(&gw, &caller, &name)?;
    if existing.is_builtin() {
        return Err(ServerError::Forbidden(format!(
            "Built-in tool {name} cannot be changed; define a tool with another name"
        )));
    }
    let spec = checked(&gw, &caller, def.clone(), true).await?;
    let (stored, changed) = gw.store().update_definition(&spec, &actor(&caller)).await?;
    if let Err(e) = gw.registry().replace_definition(def) {
        tracing::debug!(tool = %name, error = %e, "replaced by sync instead");
    }
    let tool = visible(&gw, &caller, &name)?;
    let mut body = detail(&tool, Some(stored.version));
    body["changedFields"] = json!(changed);
    body["warnings"] = json!(spec.warnings());
    Ok(Json(body))
}

async fn delete_tool(
    State(gw): Gw,
    Extension(caller): Extension<Arc<Caller>>,
    Path(name): Path<String>,
) -> ApiResult<StatusCode> {
    require_manage(&caller)?;
    let existing = visible(&gw, &caller, &name)?;
    if existing.is_builtin() {
        return Err(ServerError::Forbidden(format!(
            "Built-in tool {name} cannot be removed"
        )));
    }
    if gw.store().definition(&name).await?.is_none() {
        return Err(ServerError::Conflict(format!(
            "Tool {name} is not stored (it comes from --tools-dir); remove its file instead"
        )));
    }
    gw.store().delete_definition(&name, &actor(&caller)).await?;
    match gw.registry().remove(&name) {
        Ok(_) | Err(CoreError::NotFound(_)) => {}
        Err(e) => return Err(invalid_from(&e, Some(&name))),
    }
    Ok(StatusCode::NO_CONTENT)
}

async fn tool_history(
    State(gw): Gw,
    Extension(caller): Extension<Arc<Caller>>,
    Path(name): Path<String>,
) -> ApiResult<Json<Value>> {
    if !caller.sees(&name) {
        return Err(ServerError::NotFound(format!("Tool not found: {name}")));
    }
    let history = gw.store().history(&name).await?;
    if history.is_empty() {
        return Err(ServerError::NotFound(format!(
            "Tool not found: {name} has no stored history (built-in and --tools-dir tools have none)"
        )));
    }
    let versions: Vec<Value> = history
        .iter()
        .map(|d| {
            json!({
                "version": d.version,
                "definitionHash": d.definition_hash,
                "createdAt": d.created_at,
                "updatedAt": d.updated_at,
                "createdBy": d.created_by,
                "deletedAt": d.deleted_at,
                "definition": d.definition,
            })
        })
        .collect();
    Ok(Json(json!({ "name": name, "versions": versions })))
}

async fn validate_tool(
    State(gw): Gw,
    Extension(caller): Extension<Arc<Caller>>,
    body: Bytes,
) -> ApiResult<Json<Value>> {
    let def = match definition_from(&body) {
        Ok(def) => def,
        Err(ServerError::Invalid { report, .. }) => {
            return Ok(Json(json!({
                "valid": false, "errors": report.errors, "warnings": report.warnings
            })));
        }
        Err(e) => return Err(e),
    };
    let replace = gw
        .registry()
        .get(&def.name)
        .is_some_and(|t| !t.is_builtin());
    let name = def.name.clone();
    let outcome = gw
        .registry()
        .check(def, replace, Some(caller.plan.max_isolation));
    let body = match outcome {
        Ok(spec) => {
            json!({ "valid": true, "errors": [], "warnings": spec.warnings(), "definitionHash": spec.definition_hash() })
        }
        Err(e) => match invalid_from(&e, Some(&name)) {
            ServerError::Invalid { report, .. } => {
                json!({ "valid": false, "errors": report.errors, "warnings": report.warnings })
            }
            other => {
                json!({ "valid": false, "errors": [{ "path": "name", "code": other.kind().as_str(), "message": other.to_string() }], "warnings": [] })
            }
        },
    };
    Ok(Json(body))
}

// ---------------------------------------------------------------------------------------------
// Calls

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
    body: Bytes,
) -> ApiResult<Response> {
    let body: CallBody = if body.is_empty() {
        CallBody {
            arguments: None,
            idempotency_key: None,
            reason: None,
        }
    } else {
        serde_json::from_slice(&body).map_err(|e| {
            ServerError::BadRequest(format!(
                "Invalid call body: {e}; send {{\"arguments\": {{...}}}}"
            ))
        })?
    };
    let arguments = body.arguments.unwrap_or_else(|| json!({}));
    // Where the call came from: REST, and the client the optional X-Toolgate-Client names.
    let client = headers
        .get("x-toolgate-client")
        .and_then(|v| v.to_str().ok());
    let mut request = CallRequest::new(name, arguments).origin(CallOrigin::rest(client));
    if let Some(key) = body.idempotency_key {
        request = request.idempotency_key(key);
    }
    if let Some(reason) = body.reason {
        request = request.reason(reason);
    }
    let result = gw.call(&caller, request, None).await;
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

// ---------------------------------------------------------------------------------------------
// Approvals

fn approval_json(a: &Approval) -> ApiResult<Value> {
    serde_json::to_value(a).map_err(|e| ServerError::Internal(e.to_string()))
}

/// Whether the caller may decide approvals (and see everyone's).
fn decides(caller: &Caller) -> bool {
    Permission::parse("toolgate.approvals.decide").is_ok_and(|p| caller.principal.holds(&p))
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
    limit: Option<u32>,
}

async fn list_approvals(
    State(gw): Gw,
    Extension(caller): Extension<Arc<Caller>>,
    Query(params): Query<ApprovalsParams>,
) -> ApiResult<Json<Value>> {
    let status = params
        .status
        .as_deref()
        .map(str::parse::<ApprovalStatus>)
        .transpose()?;
    let limit = params.limit.unwrap_or(50).clamp(1, 500);
    let everyone = decides(&caller) || reads_all_calls(&caller);
    let own = caller.principal.id.as_str();
    let approvals = gw
        .store()
        .approvals(status, (!everyone).then_some(own), limit)
        .await?;
    let shown: Vec<Value> = approvals
        .iter()
        .filter(|a| caller.sees(&a.tool))
        .map(approval_json)
        .collect::<ApiResult<_>>()?;
    Ok(Json(json!({ "approvals": shown })))
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
    body: Bytes,
) -> ApiResult<Json<Value>> {
    decide(state, caller, id, body, true).await
}

async fn deny(
    state: Gw,
    caller: Extension<Arc<Caller>>,
    id: Path<String>,
    body: Bytes,
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
        serde_json::from_slice(&body).map_err(|e| {
            ServerError::BadRequest(format!(
                "Invalid decision body: {e}; send {{\"reason\": \"...\"}} or nothing"
            ))
        })?
    };
    let Some(current) = gw.store().approval(&id).await? else {
        return Err(approval_not_found(&id));
    };
    if !caller.sees(&current.tool) {
        return Err(approval_not_found(&id));
    }
    if !decides(&caller) {
        return Err(ServerError::Forbidden(format!(
            "Principal {} lacks permission toolgate.approvals.decide, which deciding approvals requires",
            caller.principal.id
        )));
    }
    let decided = gw
        .store()
        .decide_approval(&id, approve, &actor(&caller), body.reason.as_deref())
        .await?;
    gw.publish_approval(&decided);
    if approve {
        gw.run_approval(decided.id.clone());
    }
    Ok(Json(approval_json(&decided)?))
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct CallsParams {
    tool: Option<String>,
    /// Only calls made by this principal.
    principal: Option<String>,
    /// `ok` (the call returned data) or `error` (any error kind), or one error kind.
    outcome: Option<String>,
    limit: Option<u32>,
    cursor: Option<String>,
}

/// Whether the caller may read every principal's calls (else only its own).
fn reads_all_calls(caller: &Caller) -> bool {
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
            None | Some("") => Ok(None),
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
    let limit = params.limit.unwrap_or(50).clamp(1, 500);
    let outcome = OutcomeFilter::parse(params.outcome.as_deref())?;
    let principal = params.principal.as_deref().filter(|p| !p.is_empty());
    let mut before = match params.cursor.as_deref() {
        None | Some("") => None,
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

// ---------------------------------------------------------------------------------------------
// Exports and events

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ExportParams {
    #[serde(default)]
    strict: bool,
    /// Only this tool (the caller must be able to see it).
    tool: Option<String>,
}

async fn export(
    State(gw): Gw,
    Extension(caller): Extension<Arc<Caller>>,
    Path(format): Path<String>,
    Query(params): Query<ExportParams>,
) -> ApiResult<Json<Value>> {
    let format: ExportFormat = format.parse().map_err(|_| {
        ServerError::NotFound(format!(
            "Unknown export format {format:?}; use one of {}",
            ExportFormat::ALL.map(ExportFormat::as_str).join(", ")
        ))
    })?;
    let specs: Vec<ToolSpec> = match params.tool.as_deref().filter(|t| !t.is_empty()) {
        Some(name) => vec![visible(&gw, &caller, name)?.spec().clone()],
        None => gw
            .registry()
            .snapshot()
            .iter()
            .filter(|t| caller.sees(t.spec().name().as_str()))
            .map(|t| t.spec().clone())
            .collect(),
    };
    let export = toolgate_export::export(
        &specs,
        format,
        &ExportOptions {
            strict: params.strict,
        },
    )
    .map_err(|e| match e.kind() {
        toolgate_export::ExportErrorKind::Unsupported => ServerError::Invalid {
            message: e.to_string(),
            report: Box::new(toolgate_core::ValidationReport {
                errors: vec![toolgate_core::Issue {
                    path: e.tool().unwrap_or_default().to_owned(),
                    code: "export.unsupported".into(),
                    message: e.to_string(),
                }],
                warnings: Vec::new(),
            }),
        },
        _ => ServerError::BadRequest(e.to_string()),
    })?;
    Ok(Json(json!({
        "format": format.as_str(),
        "document": export.document,
        "notes": export.notes,
    })))
}

async fn events(
    State(gw): Gw,
    Extension(caller): Extension<Arc<Caller>>,
) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    let receiver = gw.events().subscribe();
    let stop = gw.close_streams.clone();
    let stream = futures_util::stream::unfold(
        (receiver, stop, caller),
        |(mut receiver, stop, caller)| async move {
            loop {
                let received = tokio::select! {
                    () = stop.cancelled() => return None,
                    r = receiver.recv() => r,
                };
                match received {
                    Ok(event) if caller.sees(&event.tool) => {
                        let sse = Event::default()
                            .event(event.name)
                            .json_data(&*event.data)
                            .unwrap_or_else(|_| Event::default().comment("unserializable event"));
                        return Some((Ok(sse), (receiver, stop, caller)));
                    }
                    Ok(_) => {}
                    Err(RecvError::Lagged(n)) => {
                        let sse = Event::default()
                            .event("lagged")
                            .data(format!("{{\"missed\":{n}}}"));
                        return Some((Ok(sse), (receiver, stop, caller)));
                    }
                    Err(RecvError::Closed) => return None,
                }
            }
        },
    );
    Sse::new(stream).keep_alive(KeepAlive::default())
}
