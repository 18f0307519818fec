//! Anthropic's side of the round trip: `tool_use` blocks read out of a Messages response's
//! `content`, and results written back as one `user` message of `tool_result` blocks (each with
//! its `tool_use_id`; an error has `"is_error": true`), which must follow the assistant message
//! directly, all results together.
//!
//! A result with attached content blocks sends `content` as a list of blocks, as `tool_result`
//! takes them: text blocks as `text`; images (JPEG, PNG, GIF, WebP) as `image` blocks with a
//! base64 `source`; an embedded PDF as a `document` with a base64 source and an embedded text
//! resource as a `document` with a `text` source (titled with its URI); a resource link as text.
//! What Anthropic does not take in a tool result (sounds, other binary types) becomes a note text
//! block saying what was left out. A result without blocks stays one string.

use serde_json::{Value, json};
use toolgate_core::EmbeddedResource;

use crate::calls::{
    BlockWriter, CallsError, Reader, ToolCall, ToolOutcome, blocks_or_text, left_out_note,
    required_id,
};

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
                "content": content(o),
            });
            if !o.result.is_ok() {
                block["is_error"] = Value::Bool(true);
            }
            Ok(block)
        })
        .collect::<Result<Vec<_>, CallsError>>()?;
    Ok(json!({ "role": "user", "content": blocks }))
}

/// The image types a Messages `image` block takes.
const IMAGES: [&str; 4] = ["image/jpeg", "image/png", "image/gif", "image/webp"];

/// A `tool_result`'s `content`: the result's text, or, with attached blocks, a list of blocks.
fn content(outcome: &ToolOutcome) -> Value {
    blocks_or_text(outcome, &mut MessagesBlocks)
}

/// Blocks as a `tool_result` takes them.
struct MessagesBlocks;

fn base64(kind: &str, mime: &str, data: &str) -> Value {
    json!({ "type": kind, "source": { "type": "base64", "media_type": mime, "data": data } })
}

impl BlockWriter for MessagesBlocks {
    fn text(&mut self, text: String) -> Value {
        json!({ "type": "text", "text": text })
    }

    fn image(&mut self, mime: &str, data: &str) -> Value {
        if IMAGES.contains(&mime) {
            base64("image", mime, data)
        } else {
            self.text(left_out_note(
                "an image",
                mime,
                data,
                "Anthropic takes JPEG, PNG, GIF and WebP images",
            ))
        }
    }

    fn audio(&mut self, mime: &str, data: &str) -> Value {
        self.text(left_out_note(
            "a sound",
            mime,
            data,
            "an Anthropic tool_result takes text, images and documents only",
        ))
    }

    fn resource(&mut self, resource: &EmbeddedResource) -> Value {
        let mime = resource.mime_type.as_deref();
        match (&resource.text, &resource.blob) {
            (Some(t), _) => json!({
                "type": "document",
                "source": { "type": "text", "media_type": "text/plain", "data": t },
                "title": resource.uri,
            }),
            (None, Some(blob)) if mime == Some("application/pdf") => {
                let mut doc = base64("document", "application/pdf", blob);
                doc["title"] = Value::String(resource.uri.clone());
                doc
            }
            (None, blob) => self.text(left_out_note(
                &format!("the resource {}", resource.uri),
                mime.unwrap_or("application/octet-stream"),
                blob.as_deref().unwrap_or_default(),
                "Anthropic documents are PDF or text",
            )),
        }
    }
}
