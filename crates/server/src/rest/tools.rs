//! `/v1/tools`: list, show, create, update, delete, validate a tool definition, and its history.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Extension, Json, Router};
use serde::Deserialize;
use serde_json::{Value, json};
use toolgate_core::ErrorChain;
use toolgate_core::{
    Category, Consequence, CoreError, Effect, Permission, RegisteredTool, ToolDefinition, ToolSpec,
};

use super::{ApiResult, Gw, JsonBytes, actor, json_type, page_limit};
use crate::Gateway;
use crate::auth::Caller;
use crate::error::ServerError;

/// The tool definition routes.
pub(super) fn routes() -> Router<Arc<Gateway>> {
    Router::new()
        .route("/v1/tools", get(list_tools).post(create_tool))
        .route("/v1/tools/validate", post(validate_tool))
        .route(
            "/v1/tools/{name}",
            get(get_tool).put(update_tool).delete(delete_tool),
        )
        .route("/v1/tools/{name}/history", get(tool_history))
}

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
    limit: Option<u64>,
    cursor: Option<String>,
}

fn parse_filter<T: std::str::FromStr>(
    what: &str,
    raw: Option<&str>,
    all: &[&str],
) -> ApiResult<Option<T>> {
    match raw {
        None => Ok(None),
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
    let limit = page_limit(params.limit)?;
    let mut cursor = params.cursor.clone().filter(|c| !c.is_empty());
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
pub(super) fn visible(gw: &Gateway, caller: &Caller, name: &str) -> ApiResult<RegisteredTool> {
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
    // A definition is an object (serde would also read one from an array of field values).
    if let Ok(other) = serde_json::from_str::<Value>(text)
        && !other.is_object()
    {
        return Err(ServerError::BadRequest(format!(
            "The body must be a JSON object (the tool definition), not {}",
            json_type(&other)
        )));
    }
    ToolDefinition::parse(text, toolgate_core::Format::Json).map_err(|e| invalid_from(&e, None))
}

/// A core error as a 422 listing every problem (or the right status for non-validation errors).
fn invalid_from(e: &CoreError, name: Option<&str>) -> ServerError {
    use toolgate_core::CoreErrorKind as K;
    let message = ErrorChain(e).to_string();
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
    JsonBytes(body): JsonBytes,
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
        tracing::debug!(tool = %name, error = %ErrorChain(&e), "registered by sync instead");
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
        .check(def, replace, Some(caller.plan.caps()))
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
        tracing::warn!(tool = %name, error = %ErrorChain(&e), "could not record the validated event");
    }
    Ok(spec)
}

async fn update_tool(
    State(gw): Gw,
    Extension(caller): Extension<Arc<Caller>>,
    Path(name): Path<String>,
    JsonBytes(body): JsonBytes,
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
        tracing::debug!(tool = %name, error = %ErrorChain(&e), "replaced by sync instead");
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
    JsonBytes(body): JsonBytes,
) -> ApiResult<Json<Value>> {
    // Any JSON object gets a verdict; no body, or one that is not a JSON object, is a bad request.
    match serde_json::from_slice::<Value>(&body) {
        Ok(Value::Object(_)) => {}
        Ok(_) => {
            return Err(ServerError::BadRequest(
                "The body must be a JSON object: the tool definition to validate".into(),
            ));
        }
        Err(e) if body.is_empty() => {
            return Err(ServerError::BadRequest(format!(
                "No definition to validate ({e}); send the tool definition as a JSON object"
            )));
        }
        Err(e) => {
            return Err(ServerError::BadRequest(format!(
                "The body is not JSON ({e}); send the tool definition as a JSON object"
            )));
        }
    }
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
    let outcome = gw.registry().check(def, replace, Some(caller.plan.caps()));
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
