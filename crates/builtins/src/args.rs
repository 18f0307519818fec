//! Reading arguments defensively (the pipeline validated them, but handlers are also called
//! directly) and running blocking file-system work off the async runtime.

use serde_json::Value;
use toolgate_core::ToolError;

/// A required string argument.
pub(crate) fn string_arg<'a>(args: &'a Value, name: &str) -> Result<&'a str, ToolError> {
    match args.get(name) {
        Some(Value::String(s)) => Ok(s),
        None | Some(Value::Null) => Err(ToolError::validation(format!(
            "Missing required argument {name} (a string)"
        ))),
        Some(_) => Err(ToolError::validation(format!(
            "Argument {name} must be a string"
        ))),
    }
}

/// An optional string argument with a default.
pub(crate) fn string_or<'a>(
    args: &'a Value,
    name: &str,
    default: &'a str,
) -> Result<&'a str, ToolError> {
    match args.get(name) {
        None | Some(Value::Null) => Ok(default),
        Some(_) => string_arg(args, name),
    }
}

/// An optional boolean argument with a default.
pub(crate) fn bool_or(args: &Value, name: &str, default: bool) -> Result<bool, ToolError> {
    match args.get(name) {
        None | Some(Value::Null) => Ok(default),
        Some(Value::Bool(b)) => Ok(*b),
        Some(_) => Err(ToolError::validation(format!(
            "Argument {name} must be true or false"
        ))),
    }
}

/// Runs blocking work on tokio's blocking pool.
pub(crate) async fn blocking<T, F>(work: F) -> Result<T, ToolError>
where
    T: Send + 'static,
    F: FnOnce() -> Result<T, ToolError> + Send + 'static,
{
    tokio::task::spawn_blocking(work).await.map_err(|e| {
        ToolError::execution(format!("The file operation stopped unexpectedly: {e}"))
    })?
}
