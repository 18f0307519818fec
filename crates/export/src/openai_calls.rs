//! OpenAI's side of the round trip: tool calls read out of a Chat Completions response
//! (`choices[0].message.tool_calls`) or a Responses response (`output` items of type
//! `function_call`), and results written back as Chat `role: "tool"` messages (with
//! `tool_call_id`) or Responses `function_call_output` items (with `call_id`).
//!
//! Content blocks a tool attached beside its data (images, files, text) go along as far as each
//! API takes them. A Chat Completions tool message's `content` takes text parts only: text blocks
//! and text resources become text parts, and an image, a sound or a binary resource becomes a
//! note text part saying what was left out and why. A Responses `function_call_output`'s `output`
//! takes a list of `input_text`, `input_image` (PNG, JPEG, WebP, GIF as a `data:` URL) and
//! `input_file` (base64 `file_data` with a `filename`) items: images and binary resources go as
//! those; a sound becomes a note. A result without blocks stays one string, as before.
//!
//! OpenAI has no error flag on a tool result: an error is sent as the JSON text
//! `{"error": message, "errorKind": kind}`. Arguments arrive as JSON text; text that is not a JSON
//! object becomes that call's `validation` error, not a failure of the whole response. With a
//! strict export (`ExportOptions::strict`) the model sends `null` for optional arguments; the
//! pipeline's validation drops those before checking (`toolgate_core::schema::strip_optional_nulls`).

use serde_json::{Value, json};
use toolgate_core::EmbeddedResource;

use crate::calls::{
    BlockWriter, CallsError, Reader, ToolCall, ToolOutcome, blocks_or_text, data_url, file_name,
    join, left_out_note, required_id, resource_text,
};

const CHAT: &str = "OpenAI Chat Completions";
const RESPONSES: &str = "OpenAI Responses";

/// The tool calls of a Chat Completions response's first choice, in the model's order (none when
/// the model answered in text).
pub fn parse_chat_completion(response: &Value) -> Result<Vec<ToolCall>, CallsError> {
    let r = Reader { provider: CHAT };
    r.object(response, "")?;
    let Some(choices) = r.opt_array(response, "choices", "")? else {
        return Err(r.shape("choices", "an array"));
    };
    let Some(choice) = choices.first() else {
        return Err(r.shape("choices[0]", "a choice"));
    };
    let message = choice
        .get("message")
        .filter(|m| m.is_object())
        .ok_or_else(|| r.shape("choices[0].message", "an object"))?;
    let base = "choices[0].message";
    let Some(items) = r.opt_array(message, "tool_calls", base)? else {
        return Ok(Vec::new());
    };
    let mut calls = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let path = format!("{base}.tool_calls[{i}]");
        r.object(item, &path)?;
        let id = r.string(item, "id", &path)?.to_owned();
        // A `custom` tool's call carries free text as `input`: toolgate exports functions only,
        // so such a call gets its arguments error (not JSON) rather than failing the batch.
        let field = match r.opt_string(item, "type", &path)?.as_deref() {
            Some("custom") => "custom",
            _ => "function",
        };
        let fpath = join(&path, field);
        let function = item
            .get(field)
            .filter(|f| f.is_object())
            .ok_or_else(|| r.shape(&fpath, "an object"))?;
        let name = r.string(function, "name", &fpath)?.to_owned();
        let text = function
            .get("arguments")
            .or_else(|| function.get("input"))
            .and_then(Value::as_str)
            .unwrap_or_default();
        calls.push(ToolCall::from_json_text(Some(id), name, text));
    }
    Ok(calls)
}

/// The `function_call` items of a Responses response's `output`, in order (other items —
/// messages, reasoning, built-in tool calls — are not toolgate's and are skipped).
pub fn parse_responses(response: &Value) -> Result<Vec<ToolCall>, CallsError> {
    let r = Reader {
        provider: RESPONSES,
    };
    r.object(response, "")?;
    let Some(output) = r.opt_array(response, "output", "")? else {
        return Err(r.shape("output", "an array"));
    };
    let mut calls = Vec::new();
    for (i, item) in output.iter().enumerate() {
        if item.get("type").and_then(Value::as_str) != Some("function_call") {
            continue;
        }
        let path = format!("output[{i}]");
        let id = r.string(item, "call_id", &path)?.to_owned();
        let name = r.string(item, "name", &path)?.to_owned();
        let text = r.string(item, "arguments", &path)?;
        calls.push(ToolCall::from_json_text(Some(id), name, text));
    }
    Ok(calls)
}

/// One Chat Completions `{"role": "tool", "tool_call_id", "content"}` message per outcome, in
/// order: append them after the assistant message that made the calls.
pub fn chat_tool_messages(outcomes: &[ToolOutcome]) -> Result<Vec<Value>, CallsError> {
    outcomes
        .iter()
        .map(|o| {
            Ok(json!({
                "role": "tool",
                "tool_call_id": required_id(CHAT, o)?,
                "content": chat_content(o),
            }))
        })
        .collect()
}

/// One Responses `{"type": "function_call_output", "call_id", "output"}` input item per
/// outcome, in order: send them as the next request's `input` (with `previous_response_id`, or
/// after the response's own output items).
pub fn responses_outputs(outcomes: &[ToolOutcome]) -> Result<Vec<Value>, CallsError> {
    outcomes
        .iter()
        .map(|o| {
            Ok(json!({
                "type": "function_call_output",
                "call_id": required_id(RESPONSES, o)?,
                "output": responses_output(o),
            }))
        })
        .collect()
}

/// Image types the OpenAI APIs take as input: PNG, JPEG, WebP and (non-animated) GIF.
const OPENAI_IMAGES: [&str; 5] = [
    "image/png",
    "image/jpeg",
    "image/jpg",
    "image/webp",
    "image/gif",
];

/// A Chat Completions tool message's `content`: the result's text, or, with attached blocks,
/// text parts (the only part type a tool message takes).
fn chat_content(outcome: &ToolOutcome) -> Value {
    blocks_or_text(outcome, &mut ChatParts)
}

/// Blocks as a Chat Completions tool message takes them: text parts only.
struct ChatParts;

const CHAT_WHY: &str = "Chat Completions tool messages take text only";

impl BlockWriter for ChatParts {
    fn text(&mut self, text: String) -> Value {
        json!({ "type": "text", "text": text })
    }

    fn image(&mut self, mime: &str, data: &str) -> Value {
        self.text(left_out_note("an image", mime, data, CHAT_WHY))
    }

    fn audio(&mut self, mime: &str, data: &str) -> Value {
        self.text(left_out_note("a sound", mime, data, CHAT_WHY))
    }

    fn resource(&mut self, resource: &EmbeddedResource) -> Value {
        self.text(match (&resource.text, &resource.blob) {
            (Some(t), _) => resource_text(&resource.uri, t),
            (None, blob) => left_out_note(
                &format!("the resource {}", resource.uri),
                resource
                    .mime_type
                    .as_deref()
                    .unwrap_or("application/octet-stream"),
                blob.as_deref().unwrap_or_default(),
                CHAT_WHY,
            ),
        })
    }
}

/// A Responses `function_call_output`'s `output`: the result's text, or, with attached blocks,
/// a list of `input_text`, `input_image` and `input_file` items.
fn responses_output(outcome: &ToolOutcome) -> Value {
    blocks_or_text(outcome, &mut ResponsesItems)
}

/// Blocks as a Responses `function_call_output` takes them.
struct ResponsesItems;

impl BlockWriter for ResponsesItems {
    fn text(&mut self, text: String) -> Value {
        json!({ "type": "input_text", "text": text })
    }

    fn image(&mut self, mime: &str, data: &str) -> Value {
        if OPENAI_IMAGES.contains(&mime) {
            json!({
                "type": "input_image",
                "image_url": data_url(mime, data),
                "detail": "auto",
            })
        } else {
            self.text(left_out_note(
                "an image",
                mime,
                data,
                "OpenAI takes PNG, JPEG, WebP and GIF images",
            ))
        }
    }

    fn audio(&mut self, mime: &str, data: &str) -> Value {
        self.text(left_out_note(
            "a sound",
            mime,
            data,
            "a Responses function_call_output takes text, images and files only",
        ))
    }

    fn resource(&mut self, resource: &EmbeddedResource) -> Value {
        match (&resource.text, &resource.blob) {
            (Some(t), _) => self.text(resource_text(&resource.uri, t)),
            (None, Some(blob)) => {
                let mime = resource
                    .mime_type
                    .as_deref()
                    .unwrap_or("application/octet-stream");
                json!({
                    "type": "input_file",
                    "file_data": data_url(mime, blob),
                    "filename": file_name(&resource.uri),
                })
            }
            (None, None) => self.text(resource_text(&resource.uri, "")),
        }
    }
}
