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
    Category, Consequence, CoreError, Effect, Permission, RegisteredTool, ToolDefinition,
};
use toolgate_runtime::OpError;
use toolgate_runtime::definitions::{DefinitionChange, Editor};
use toolgate_runtime::views::{ChangedTool, DefinitionHistory, ToolDetail, ToolFilter, ToolsPage};

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

async fn list_tools(
    State(gw): Gw,
    Extension(caller): Extension<Arc<Caller>>,
    Query(params): Query<ListParams>,
) -> ApiResult<Json<ToolsPage>> {
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
    let filter = ToolFilter {
        category,
        effect,
        consequence,
        tag: params.tag,
        text: params.q,
        builtin: params.builtin,
    };
    let page = gw
        .runtime()
        .tools_page(&caller.principal, &filter, limit, params.cursor)
        .map_err(|e| ServerError::BadRequest(e.to_string()))?;
    Ok(Json(page))
}

/// The tool, if it exists and the caller may see it; otherwise the same not-found either way.
pub(super) fn visible(gw: &Gateway, caller: &Caller, name: &str) -> ApiResult<RegisteredTool> {
    gw.runtime()
        .visible_tool(&caller.principal, name)
        .ok_or_else(|| tool_not_found(name))
}

async fn get_tool(
    State(gw): Gw,
    Extension(caller): Extension<Arc<Caller>>,
    Path(name): Path<String>,
) -> ApiResult<Json<ToolDetail>> {
    match gw.runtime().tool_detail(&caller.principal, &name).await? {
        Some(detail) => Ok(Json(detail)),
        None => Err(tool_not_found(&name)),
    }
}

fn tool_not_found(name: &str) -> ServerError {
    ServerError::NotFound(format!(
        "Tool not found: {name}. GET /v1/tools lists the tools you can use."
    ))
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

/// A refused definition change as the API answers it.
pub(super) fn op_error(e: OpError) -> ServerError {
    match e {
        OpError::Refused { name, error } => invalid_from(&error, Some(&name)),
        OpError::NotFound(message) => ServerError::NotFound(message),
        OpError::Forbidden(message) => ServerError::Forbidden(message),
        OpError::Conflict(message) => ServerError::Conflict(message),
        OpError::Store(e) => ServerError::from(e),
        other => ServerError::Internal(ErrorChain(&other).to_string()),
    }
}

/// The view of a stored change (the tool as now served).
fn changed(gw: &Gateway, change: &DefinitionChange, update: bool) -> ApiResult<ChangedTool> {
    ChangedTool::of(gw.registry(), change, update).ok_or_else(|| {
        ServerError::Internal(format!(
            "Tool {} vanished after being stored",
            change.spec.name()
        ))
    })
}

async fn create_tool(
    State(gw): Gw,
    Extension(caller): Extension<Arc<Caller>>,
    JsonBytes(body): JsonBytes,
) -> ApiResult<Response> {
    require_manage(&caller)?;
    let def = definition_from(&body)?;
    let actor = actor(&caller);
    let editor = editor(&caller, &actor);
    let change = gw
        .runtime()
        .add_definition(editor, def)
        .await
        .map_err(op_error)?;
    let body = changed(&gw, &change, false)?;
    let location = HeaderValue::from_str(&format!("/v1/tools/{}", change.spec.name()))
        .map_err(|e| ServerError::Internal(e.to_string()))?;
    Ok((
        StatusCode::CREATED,
        [(header::LOCATION, location)],
        Json(body),
    )
        .into_response())
}

async fn update_tool(
    State(gw): Gw,
    Extension(caller): Extension<Arc<Caller>>,
    Path(name): Path<String>,
    JsonBytes(body): JsonBytes,
) -> ApiResult<Json<ChangedTool>> {
    require_manage(&caller)?;
    let def = definition_from(&body)?;
    if def.name != name {
        return Err(ServerError::BadRequest(format!(
            "The definition is named {:?} but the URL names {name:?}; rename by creating the new tool and deleting the old one",
            def.name
        )));
    }
    let actor = actor(&caller);
    let editor = editor(&caller, &actor);
    let change = gw
        .runtime()
        .update_definition(editor, def)
        .await
        .map_err(op_error)?;
    Ok(Json(changed(&gw, &change, true)?))
}

async fn delete_tool(
    State(gw): Gw,
    Extension(caller): Extension<Arc<Caller>>,
    Path(name): Path<String>,
) -> ApiResult<StatusCode> {
    require_manage(&caller)?;
    let actor = actor(&caller);
    let editor = editor(&caller, &actor);
    gw.runtime()
        .remove_definition(editor, &name)
        .await
        .map_err(op_error)?;
    Ok(StatusCode::NO_CONTENT)
}

async fn tool_history(
    State(gw): Gw,
    Extension(caller): Extension<Arc<Caller>>,
    Path(name): Path<String>,
) -> ApiResult<Json<DefinitionHistory>> {
    match gw
        .runtime()
        .definition_history(&caller.principal, &name)
        .await?
    {
        Some(history) => Ok(Json(history)),
        None => Err(ServerError::NotFound(format!(
            "Tool not found: {name} has no stored history (built-in and --tools-dir tools have none)"
        ))),
    }
}

async fn validate_tool(
    State(gw): Gw,
    Extension(caller): Extension<Arc<Caller>>,
    JsonBytes(body): JsonBytes,
) -> ApiResult<Json<Value>> {
    // Any JSON object gets a verdict; no body, or one that is not a JSON object, is a bad request.
    match serde_json::from_slice::<Value>(&body) {
        Ok(Value::Object(fields)) => {
            if let Some((format, text)) = definition_text(&fields)? {
                return Ok(Json(validate_text(&gw, &caller, format, text)));
            }
        }
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
    Ok(Json(verdict(&gw, &caller, def)))
}

/// `{"format": "toml", "text": "…"}` (exactly these two fields): definition text to check in
/// that format. Any other object is a definition itself.
fn definition_text(
    fields: &serde_json::Map<String, Value>,
) -> ApiResult<Option<(toolgate_core::Format, &str)>> {
    let (Some(format), Some(Value::String(text)), 2) =
        (fields.get("format"), fields.get("text"), fields.len())
    else {
        return Ok(None);
    };
    let format = format
        .as_str()
        .and_then(toolgate_core::Format::from_name)
        .ok_or_else(|| {
            ServerError::BadRequest(format!(
                "Unknown definition format {format}; send \"format\": \"toml\", \"json\" or \"yaml\" with the text"
            ))
        })?;
    Ok(Some((format, text)))
}

/// The verdict on definition text: a parse error at the parser's line and column, or the
/// verdict on the definition (and the definition as JSON) with each problem's line and column
/// found from its path.
fn validate_text(
    gw: &Gateway,
    caller: &Caller,
    format: toolgate_core::Format,
    text: &str,
) -> Value {
    let def = match ToolDefinition::parse_located(text, format) {
        Ok(def) => def,
        Err(problem) => {
            // Well-formed text that is not a definition: every problem at once (unknown
            // fields, wrong types, bad enum values), not only the first serde met.
            let all = toolgate_core::document_problems(text, format);
            if !all.is_empty() {
                let errors: Vec<Value> = all
                    .into_iter()
                    .map(|(at, issue)| {
                        json!({ "path": issue.path, "code": issue.code, "message": issue.message,
                                "line": at.line, "column": at.column })
                    })
                    .collect();
                return json!({ "valid": false, "errors": errors, "warnings": [] });
            }
            let mut issue = json!({ "path": "", "code": "parse", "message": problem.message });
            if let Some(at) = problem.position {
                issue["line"] = json!(at.line);
                issue["column"] = json!(at.column);
            }
            return json!({ "valid": false, "errors": [issue], "warnings": [] });
        }
    };
    let parsed = serde_json::to_value(&def).unwrap_or(Value::Null);
    let mut body = verdict(gw, caller, def);
    // The definition as read, so a client can store what it checked (POST /v1/tools takes JSON).
    body["definition"] = parsed;
    for list in ["errors", "warnings"] {
        if let Some(Value::Array(issues)) = body.get_mut(list) {
            for issue in issues {
                let path = issue.get("path").and_then(Value::as_str).unwrap_or("");
                if let Some(at) = toolgate_core::locate(text, path) {
                    issue["line"] = json!(at.line);
                    issue["column"] = json!(at.column);
                }
            }
        }
    }
    body
}

/// The verdict on a definition as registration would give it (run kinds, plan caps).
fn verdict(gw: &Gateway, caller: &Caller, def: ToolDefinition) -> Value {
    let replace = gw
        .registry()
        .get(&def.name)
        .is_some_and(|t| !t.is_builtin());
    let name = def.name.clone();
    let outcome = gw.registry().check(def, replace, Some(caller.plan.caps()));
    match outcome {
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
    }
}

/// The caller as the runtime's definition use cases see it: grants, tier and the audit name.
fn editor<'a>(caller: &'a Caller, actor: &'a str) -> Editor<'a> {
    Editor {
        principal: &caller.principal,
        plan: &caller.plan,
        actor,
    }
}
