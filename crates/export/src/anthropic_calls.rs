//! Anthropic's side of the round trip: `tool_use` blocks read out of a Messages response's
//! `content`, and results written back as one `user` message of `tool_result` blocks (each with
//! its `tool_use_id`; an error has `"is_error": true`), which must follow the assistant message
//! directly, all results together.

use serde_json::{Value, json};

use crate::calls::{CallsError, Reader, ToolCall, ToolOutcome, required_id, result_text};

const MESSAGES: &str = "Anthropic Messages";

/// The `tool_use` blocks of a Messages response, in order (text and thinking blocks skipped).
pub fn parse_message(response: &Value) -> Result<Vec<ToolCall>, CallsError> {
    let r = Reader { provider: MESSAGES };
    r.object(response, "")?;
    let Some(content) = r.opt_array(response, "content", "")? else {
        return Err(r.shape("content", "an array"));
    };
    let mut calls = Vec::new();
    for (i, block) in content.iter().enumerate() {
        if block.get("type").and_then(Value::as_str) != Some("tool_use") {
            continue;
        }
        let path = format!("content[{i}]");
        let id = r.string(block, "id", &path)?.to_owned();
        let name = r.string(block, "name", &path)?.to_owned();
        let input = block.get("input").cloned().unwrap_or(Value::Null);
        calls.push(ToolCall::from_json_value(Some(id), name, input));
    }
    Ok(calls)
}

/// The `user` message carrying one `tool_result` block per outcome, in order.
pub fn tool_results_message(outcomes: &[ToolOutcome]) -> Result<Value, CallsError> {
    let blocks = outcomes
        .iter()
        .map(|o| {
            let mut block = json!({
                "type": "tool_result",
                "tool_use_id": required_id(MESSAGES, o)?,
                "content": result_text(&o.result),
            });
            if !o.result.is_ok() {
                block["is_error"] = Value::Bool(true);
            }
            Ok(block)
        })
        .collect::<Result<Vec<_>, CallsError>>()?;
    Ok(json!({ "role": "user", "content": blocks }))
}
