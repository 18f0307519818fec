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

use toolgate_core::Content;

use crate::calls::{
    CallsError, Reader, ToolCall, ToolOutcome, error_object, file_name, left_out_note, link_text,
    model_blocks, resource_text,
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
    let mut content = Vec::new();
    let mut media = Vec::new();
    let mut inline = |mime: &str, data: &str, name: String, content: &mut Vec<Value>| {
        // Display names pair a reference with its part: keep them unique in the response.
        let name = format!("{}-{name}", media.len() + 1);
        content.push(json!({ "$ref": name }));
        media
            .push(json!({ "inlineData": { "mimeType": mime, "data": data, "displayName": name } }));
    };
    for block in blocks {
        match block {
            Content::Text { text, .. } => content.push(Value::String(text.clone())),
            Content::Image {
                data, mime_type, ..
            } if MEDIA.contains(&mime_type.as_str()) => {
                let ext = mime_type.rsplit('/').next().unwrap_or("bin");
                inline(mime_type, data, format!("image.{ext}"), &mut content);
            }
            Content::Image {
                data, mime_type, ..
            } => content.push(Value::String(left_out_note(
                "an image",
                mime_type,
                data,
                "Gemini takes PNG, JPEG and WebP images in a function response",
            ))),
            Content::Audio {
                data, mime_type, ..
            } => content.push(Value::String(left_out_note(
                "a sound",
                mime_type,
                data,
                "Gemini takes images and documents in a function response",
            ))),
            Content::Resource { resource, .. } => {
                let mime = resource.mime_type.as_deref().unwrap_or("");
                match (&resource.text, &resource.blob) {
                    (Some(t), _) => {
                        content.push(Value::String(resource_text(&resource.uri, t)));
                    }
                    (None, Some(blob)) if MEDIA.contains(&mime) => {
                        inline(
                            mime,
                            blob,
                            file_name(&resource.uri).to_owned(),
                            &mut content,
                        );
                    }
                    (None, blob) => content.push(Value::String(left_out_note(
                        &format!("the resource {}", resource.uri),
                        if mime.is_empty() {
                            "application/octet-stream"
                        } else {
                            mime
                        },
                        blob.as_deref().unwrap_or_default(),
                        "Gemini takes images and documents in a function response",
                    ))),
                }
            }
            Content::ResourceLink {
                uri,
                name,
                description,
                ..
            } => content.push(Value::String(link_text(uri, name, description.as_deref()))),
        }
    }
    (content, media)
}
