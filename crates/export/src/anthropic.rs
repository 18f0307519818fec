//! Anthropic Messages API tools: `{"name", "description", "input_schema"}` with the input schema
//! as written, except composition keywords at its top level, which the API rejects.
//!
//! Source: the Messages API tool definition (<https://docs.anthropic.com/en/docs/agents-and-tools/tool-use/overview>)
//! and its error "input_schema does not support oneOf, allOf, or anyOf at the top level".

use serde_json::{Value, json};
use toolgate_core::ToolSpec;

use crate::ExportNote;
use crate::context::{ANTHROPIC, Cx};
use crate::error::ExportError;
use crate::schema::{is_object_schema, root_object_rule};

/// Keywords Anthropic rejects at the top level of `input_schema`.
const ROOT_FORBIDDEN: &[&str] = &["anyOf", "oneOf", "allOf"];

pub(crate) fn export_tool(spec: &ToolSpec) -> Result<(Value, Vec<ExportNote>), ExportError> {
    let mut cx = Cx::new(spec.name().as_str(), ANTHROPIC);
    let mut root = match spec.input_schema() {
        Value::Object(m) if is_object_schema(m) => m.clone(),
        _ => {
            return Err(cx.unsupported(
                "input_schema",
                "type",
                "is not an object schema, and input_schema must be one".into(),
            ));
        }
    };
    root_object_rule(&mut root, "input_schema", ROOT_FORBIDDEN, &mut cx)?;
    let tool = json!({
        "name": spec.name().as_str(),
        "description": spec.description(),
        "input_schema": Value::Object(root),
    });
    Ok((tool, cx.notes))
}
