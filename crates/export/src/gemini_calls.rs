//! Gemini's side of the round trip: `functionCall` parts read out of a `generateContent`
//! response's first candidate, and results written back as one `user` `Content` of
//! `functionResponse` parts (each with the call's `name`, and its `id` when the model sent one).
//!
//! Gemini's `response` is an object; as its documentation asks, a result goes in `output` and an
//! error in `error`
//! (`{"error": message, "errorKind": kind}`): Gemini has no other error flag.

use serde_json::{Map, Value, json};

use crate::calls::{CallsError, Reader, ToolCall, ToolOutcome, error_object};

const GEMINI: &str = "Gemini";

/// The `functionCall` parts of a `generateContent` response's first candidate, in order.
pub fn parse_generate_content(response: &Value) -> Result<Vec<ToolCall>, CallsError> {
    let r = Reader { provider: GEMINI };
    r.object(response, "")?;
    let Some(candidates) = r.opt_array(response, "candidates", "")? else {
        return Err(r.shape("candidates", "an array"));
    };
    let Some(candidate) = candidates.first() else {
        return Err(r.shape("candidates[0]", "a candidate"));
    };
    // A candidate stopped for safety may have no content: no calls, then.
    let Some(content) = candidate.get("content").filter(|c| !c.is_null()) else {
        return Ok(Vec::new());
    };
    r.object(content, "candidates[0].content")?;
    let Some(parts) = r.opt_array(content, "parts", "candidates[0].content")? else {
        return Ok(Vec::new());
    };
    let mut calls = Vec::new();
    for (i, part) in parts.iter().enumerate() {
        let Some(call) = part.get("functionCall") else {
            continue;
        };
        let path = format!("candidates[0].content.parts[{i}].functionCall");
        r.object(call, &path)?;
        let id = r.opt_string(call, "id", &path)?;
        let name = r.string(call, "name", &path)?.to_owned();
        let args = call.get("args").cloned().unwrap_or(Value::Null);
        calls.push(ToolCall::from_json_value(id, name, args));
    }
    Ok(calls)
}

/// The `user` `Content` carrying one `functionResponse` part per outcome, in order.
pub fn function_responses(outcomes: &[ToolOutcome]) -> Value {
    let parts: Vec<Value> = outcomes
        .iter()
        .map(|o| {
            let response = match o.result.data() {
                Some(data) => {
                    let mut map = Map::new();
                    map.insert("output".into(), data.clone());
                    map
                }
                None => error_object(&o.result),
            };
            let mut part = Map::new();
            if let Some(id) = &o.call.id {
                part.insert("id".into(), Value::String(id.clone()));
            }
            part.insert("name".into(), Value::String(o.call.name.clone()));
            part.insert("response".into(), Value::Object(response));
            json!({ "functionResponse": part })
        })
        .collect();
    json!({ "role": "user", "parts": parts })
}
