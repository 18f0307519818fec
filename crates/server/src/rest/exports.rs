//! `/v1/export/{format}`: the visible tools as another ecosystem's tool document.

use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::routing::get;
use axum::{Extension, Json, Router};
use serde::Deserialize;
use serde_json::{Value, json};
use toolgate_core::ToolSpec;
use toolgate_export::{ExportFormat, ExportOptions};

use super::tools::visible;
use super::{ApiResult, Gw};
use crate::Gateway;
use crate::auth::Caller;
use crate::error::ServerError;

/// The export route.
pub(super) fn routes() -> Router<Arc<Gateway>> {
    Router::new().route("/v1/export/{format}", get(export))
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ExportParams {
    #[serde(default)]
    strict: bool,
    /// Fail (422, every tool that cannot be strict listed) instead of exporting such tools
    /// without strict mode.
    #[serde(default)]
    require_strict: bool,
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
            require_strict: params.require_strict,
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
