//! Gemini's side of the round trip: `functionCall` parts read out of a `generateContent`
//! response's first candidate, and results written back as one `user` `Content` of
//! `functionResponse` parts (each with the call's `name`, and its `id` when the model sent one).
//!
//! Gemini's `response` is an object; as its documentation asks, a result goes in `output` and an
//! error in `error`
//! (`{"error": message, "errorKind": kind}`): Gemini has no other error flag.
//!
//! Content blocks a tool attached go in the response's `content` list, in order: text as
//! strings, and media Gemini takes in a function response (PNG, JPEG and WebP images, PDF and
//! plain-text documents) as `functionResponse.parts` of `inlineData` (base64, with a
//! `displayName`), which `content` references as `{"$ref": displayName}`, the way Gemini's
//! multimodal function responses name them. Other media (sounds, other types) become a note
//! string saying what was left out. The data stays in `output` (left out when it is `null` and
//! blocks carry the result).

use serde_json::{Map, Value, json};

use toolgate_core::{Content, EmbeddedResource};

use crate::calls::{
    BlockWriter, CallsError, Reader, ToolCall, ToolOutcome, error_object, file_name, left_out_note,
    model_blocks, resource_text, write_blocks,
};

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
            let blocks = model_blocks(&o.result);
            let mut response = match o.result.data() {
                Some(Value::Null) if !blocks.is_empty() => Map::new(),
                Some(data) => {
                    let mut map = Map::new();
                    map.insert("output".into(), data.clone());
                    map
                }
                None => error_object(&o.result),
            };
            let (content, media) = attached(&blocks);
            if !content.is_empty() {
                response.insert("content".into(), Value::Array(content));
            }
            let mut part = Map::new();
            if let Some(id) = &o.call.id {
                part.insert("id".into(), Value::String(id.clone()));
            }
            part.insert("name".into(), Value::String(o.call.name.clone()));
            part.insert("response".into(), Value::Object(response));
            if !media.is_empty() {
                part.insert("parts".into(), Value::Array(media));
            }
            json!({ "functionResponse": part })
        })
        .collect();
    json!({ "role": "user", "parts": parts })
}

/// The media types Gemini takes inline in a function response.
const MEDIA: [&str; 5] = [
    "image/png",
    "image/jpeg",
    "image/webp",
    "application/pdf",
    "text/plain",
];

/// The response's `content` entries and the `inlineData` parts they reference.
fn attached(blocks: &[&Content]) -> (Vec<Value>, Vec<Value>) {
    let mut writer = ResponseContent { media: Vec::new() };
    let content = write_blocks(blocks, &mut writer);
    (content, writer.media)
}

/// Blocks as a function response takes them: `content` entries (returned), with the media they
/// reference gathered as `inlineData` parts.
struct ResponseContent {
    media: Vec<Value>,
}

const GEMINI_WHY: &str = "Gemini takes images and documents in a function response";

impl ResponseContent {
    /// A `{"$ref": displayName}` entry for an `inlineData` part added beside it.
    fn inline(&mut self, mime: &str, data: &str, name: &str) -> Value {
        // Display names pair a reference with its part: keep them unique in the response.
        let name = format!("{}-{name}", self.media.len() + 1);
        self.media
            .push(json!({ "inlineData": { "mimeType": mime, "data": data, "displayName": name } }));
        json!({ "$ref": name })
    }
}

impl BlockWriter for ResponseContent {
    fn text(&mut self, text: String) -> Value {
        Value::String(text)
    }

    fn image(&mut self, mime: &str, data: &str) -> Value {
        if MEDIA.contains(&mime) {
            let ext = mime.rsplit('/').next().unwrap_or("bin");
            self.inline(mime, data, &format!("image.{ext}"))
        } else {
            self.text(left_out_note(
                "an image",
                mime,
                data,
                "Gemini takes PNG, JPEG and WebP images in a function response",
            ))
        }
    }

    fn audio(&mut self, mime: &str, data: &str) -> Value {
        self.text(left_out_note("a sound", mime, data, GEMINI_WHY))
    }

    fn resource(&mut self, resource: &EmbeddedResource) -> Value {
        let mime = resource.mime_type.as_deref().unwrap_or("");
        match (&resource.text, &resource.blob) {
            (Some(t), _) => self.text(resource_text(&resource.uri, t)),
            (None, Some(blob)) if MEDIA.contains(&mime) => {
                self.inline(mime, blob, file_name(&resource.uri))
            }
            (None, blob) => self.text(left_out_note(
                &format!("the resource {}", resource.uri),
                if mime.is_empty() {
                    "application/octet-stream"
                } else {
                    mime
                },
                blob.as_deref().unwrap_or_default(),
                GEMINI_WHY,
            )),
        }
    }
}
