//! What an upstream's answers become in toolgate: a listed tool an [`UpstreamTool`], a call
//! result the handler's output and attached content blocks, an MCP error a [`ToolError`].
//!
//! A result is split so that toolgate's MCP server, which emits a call's data as the first
//! block (structured data as JSON text plus `structuredContent`, a string as text) followed by
//! the attached blocks, gives the client what the upstream gave:
//! - `structuredContent` present: it is the data, and the plain text block that serialises it
//!   (the one the MCP specification asks servers to add) is not attached again;
//! - otherwise a first plain text block is the data (a string) and the rest is attached;
//! - otherwise (first block an image, a resource, or text with annotations or `_meta`) the data
//!   is `null` and every block is attached.
//!
//! Every block keeps its annotations (audience, priority, lastModified) and `_meta`; resource
//! links stay links; an embedded resource keeps its contents' `_meta` too.

use rmcp::ServiceError;
use rmcp::model::{
    Annotations, CallToolResult, ContentBlock, ErrorCode, MetaObject, ResourceContents, Role,
    TextContent, Tool,
};
use serde_json::Value;
use toolgate_core::{
    Content, ContentMeta, EmbeddedResource, Priority, ToolContext, ToolError, ToolOutput,
};

use crate::{GatewayError, UpstreamTool};

/// An upstream's listed tool as the pinned [`UpstreamTool`].
pub(crate) fn upstream_tool(server: &str, tool: &Tool) -> Result<UpstreamTool, GatewayError> {
    serde_json::to_value(tool)
        .and_then(serde_json::from_value)
        .map_err(|e| {
            GatewayError::Protocol(format!(
                "Server {server} listed tool {} in a shape toolgate cannot read: {e}",
                tool.name
            ))
        })
}

/// A block's annotations in toolgate's shape. A priority outside 0..=1 (which the MCP
/// specification does not allow) is left out; the rest is kept.
fn annotations(annotations: Option<&Annotations>) -> Option<toolgate_core::Annotations> {
    let a = annotations?;
    Some(toolgate_core::Annotations {
        audience: a.audience.as_ref().map(|roles| {
            roles
                .iter()
                .map(|role| match role {
                    Role::User => toolgate_core::Role::User,
                    Role::Assistant => toolgate_core::Role::Assistant,
                })
                .collect()
        }),
        // Through its shortest decimal form, so that 0.7 stays 0.7 (not 0.699999988…).
        priority: a
            .priority
            .and_then(|p| p.to_string().parse::<f64>().ok())
            .and_then(|p| Priority::new(p).ok()),
        last_modified: a.last_modified.clone(),
    })
}

fn meta(meta: Option<&MetaObject>) -> Option<ContentMeta> {
    meta.map(|m| m.0.clone())
}

/// One content block in toolgate's shape, with its annotations and `_meta`.
fn content(block: &ContentBlock) -> Content {
    match block {
        ContentBlock::Text(t) => Content::Text {
            text: t.text.clone(),
            annotations: annotations(t.annotations.as_ref()),
            meta: meta(t.meta.as_ref()),
        },
        ContentBlock::Image(i) => Content::Image {
            data: i.data.clone(),
            mime_type: i.mime_type.clone(),
            annotations: annotations(i.annotations.as_ref()),
            meta: meta(i.meta.as_ref()),
        },
        ContentBlock::Audio(a) => Content::Audio {
            data: a.data.clone(),
            mime_type: a.mime_type.clone(),
            annotations: annotations(a.annotations.as_ref()),
            meta: meta(a.meta.as_ref()),
        },
        ContentBlock::Resource(r) => {
            let resource = match &r.resource {
                ResourceContents::TextResourceContents {
                    uri,
                    mime_type,
                    text,
                    meta: m,
                } => EmbeddedResource {
                    uri: uri.clone(),
                    mime_type: mime_type.clone(),
                    text: Some(text.clone()),
                    blob: None,
                    meta: meta(m.as_ref()),
                },
                ResourceContents::BlobResourceContents {
                    uri,
                    mime_type,
                    blob,
                    meta: m,
                } => EmbeddedResource {
                    uri: uri.clone(),
                    mime_type: mime_type.clone(),
                    text: None,
                    blob: Some(blob.clone()),
                    meta: meta(m.as_ref()),
                },
                // A shape newer than this code: its fields as far as they are known.
                other => {
                    let wire = serde_json::to_value(other).unwrap_or(Value::Null);
                    let text = |k: &str| wire[k].as_str().map(str::to_owned);
                    EmbeddedResource {
                        uri: text("uri").unwrap_or_default(),
                        mime_type: text("mimeType"),
                        text: text("text"),
                        blob: text("blob"),
                        meta: wire["_meta"].as_object().cloned(),
                    }
                }
            };
            Content::Resource {
                resource,
                annotations: annotations(r.annotations.as_ref()),
                meta: meta(r.meta.as_ref()),
            }
        }
        ContentBlock::ResourceLink(link) => Content::ResourceLink {
            uri: link.uri.clone(),
            name: link.name.clone(),
            title: link.title.clone(),
            description: link.description.clone(),
            mime_type: link.mime_type.clone(),
            size: link.size,
            // Icons have the same shape on both sides.
            icons: link
                .icons
                .as_ref()
                .and_then(|icons| serde_json::to_value(icons).ok())
                .and_then(|icons| serde_json::from_value(icons).ok()),
            annotations: annotations(link.annotations.as_ref()),
            meta: meta(link.meta.as_ref()),
        },
        // A block type newer than this code: kept as its JSON text rather than lost.
        other => Content::text(serde_json::to_string(other).unwrap_or_default()),
    }
}

/// Whether a text block is plain: no annotations, no `_meta`. Only a plain block may stand
/// for the call's data, whose own block carries neither.
fn plain(text: &TextContent) -> bool {
    text.annotations.is_none() && text.meta.is_none()
}

/// Whether `text` is the JSON serialisation of `structured`.
fn serialises(text: &str, structured: &Value) -> bool {
    serde_json::from_str::<Value>(text).is_ok_and(|v| &v == structured)
}

/// An upstream's `tools/call` result as the handler's output, attaching content blocks to
/// `ctx`. `isError: true` is an `execution` error carrying the upstream's text.
pub(crate) fn output(
    server: &str,
    tool: &str,
    result: CallToolResult,
    ctx: &ToolContext,
) -> ToolOutput {
    if result.is_error == Some(true) {
        let text: Vec<&str> = result
            .content
            .iter()
            .filter_map(|b| match b {
                ContentBlock::Text(t) => Some(t.text.as_str()),
                _ => None,
            })
            .collect();
        let message = if text.is_empty() {
            format!("Server {server}'s tool {tool} reported an error without a message")
        } else {
            text.join("\n")
        };
        return Err(ToolError::execution(message));
    }
    let mut blocks = result.content.iter().peekable();
    let data = match result.structured_content {
        Some(structured) => {
            let mut skipped = false;
            for block in result.content.iter() {
                if !skipped
                    && let ContentBlock::Text(t) = block
                    && plain(t)
                    && serialises(&t.text, &structured)
                {
                    skipped = true;
                    continue;
                }
                ctx.attach(content(block));
            }
            return Ok(structured);
        }
        None => match blocks.peek() {
            Some(ContentBlock::Text(t)) if plain(t) => {
                let text = t.text.clone();
                blocks.next();
                Value::String(text)
            }
            _ => Value::Null,
        },
    };
    for block in blocks {
        ctx.attach(content(block));
    }
    Ok(data)
}

/// A failed `tools/call` exchange as a tool error.
pub(crate) fn call_error(server: &str, tool: &str, error: &ServiceError) -> ToolError {
    match error {
        ServiceError::McpError(e) => {
            let text = format!(
                "Server {server} refused the call to {tool}: {} (MCP error {})",
                e.message, e.code.0
            );
            match e.code {
                ErrorCode::INVALID_PARAMS => ToolError::validation(text),
                ErrorCode::METHOD_NOT_FOUND => ToolError::unavailable(text).permanent(),
                _ => ToolError::execution(text),
            }
        }
        ServiceError::Timeout { timeout } => ToolError::new(
            toolgate_core::ErrorKind::Timeout,
            format!(
                "Server {server} did not answer the call to {tool} within {} ms",
                timeout.as_millis()
            ),
        ),
        other => ToolError::unavailable(format!(
            "Server {server} could not take the call to {tool}: {}",
            toolgate_core::ErrorChain(other)
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use toolgate_core::{Principal, ToolName};

    fn ctx() -> ToolContext {
        ToolContext::detached(ToolName::parse("t").unwrap(), Principal::local())
    }

    fn result(wire: Value) -> CallToolResult {
        serde_json::from_value(wire).unwrap()
    }

    #[test]
    fn a_first_text_block_is_the_data_and_the_rest_is_attached() {
        let c = ctx();
        let out = output(
            "s",
            "t",
            result(json!({"content": [
                {"type": "text", "text": "hello"},
                {"type": "image", "data": "AA==", "mimeType": "image/png"}
            ]})),
            &c,
        );
        assert_eq!(out.unwrap(), json!("hello"));
    }

    #[test]
    fn is_error_is_an_execution_error_with_the_upstreams_text() {
        let out = output(
            "s",
            "t",
            result(json!({"content": [{"type": "text", "text": "boom"}], "isError": true})),
            &ctx(),
        );
        let e = out.unwrap_err();
        assert_eq!(e.kind(), toolgate_core::ErrorKind::Execution);
        assert_eq!(e.message(), "boom");
    }

    #[test]
    fn links_annotations_and_meta_are_kept() {
        let wire = json!({
            "type": "resource_link", "uri": "test://a", "name": "a", "title": "A",
            "mimeType": "text/plain", "description": "A file", "size": 3,
            "icons": [{"src": "https://example.com/a.png", "theme": "light"}],
            "annotations": {"audience": ["assistant"], "priority": 0.7, "lastModified": "2025-01-12T15:00:58Z"},
            "_meta": {"k": "v"}
        });
        let block: ContentBlock = serde_json::from_value(wire.clone()).unwrap();
        let ours = content(&block);
        // Exactly the upstream's JSON, 0.7 included (rmcp holds it as an f32).
        assert_eq!(serde_json::to_value(&ours).unwrap(), wire);
        let wire = json!({
            "type": "resource",
            "resource": {"uri": "test://b", "blob": "AAEC", "_meta": {"inner": 1}},
            "annotations": {"priority": 0.25}, "_meta": {"outer": 2}
        });
        let block: ContentBlock = serde_json::from_value(wire.clone()).unwrap();
        assert_eq!(serde_json::to_value(content(&block)).unwrap(), wire);
    }

    #[test]
    fn an_annotated_first_text_block_is_attached_not_made_the_data() {
        let c = ctx();
        let out = output(
            "s",
            "t",
            result(json!({"content": [
                {"type": "text", "text": "hello", "annotations": {"audience": ["user"]}}
            ]})),
            &c,
        );
        assert_eq!(out.unwrap(), Value::Null);
    }
}
