//! What an upstream's answers become in toolgate: a listed tool an [`UpstreamTool`], a call
//! result the handler's output and attached content blocks, an MCP error a [`ToolError`].
//!
//! A result is split so that toolgate's MCP server, which emits a call's data as the first
//! block (structured data as JSON text plus `structuredContent`, a string as text) followed by
//! the attached blocks, gives the client what the upstream gave:
//! - `structuredContent` present: it is the data, and the text block that serialises it (the
//!   one the MCP specification asks servers to add) is not attached again;
//! - otherwise a first text block is the data (a string) and the rest is attached;
//! - otherwise (first block an image, a resource, …) the data is `null` and every block is
//!   attached.
//!
//! Resource links become text (`toolgate_core::Content` has no link block); content
//! annotations and `_meta` are not kept.

use rmcp::ServiceError;
use rmcp::model::{CallToolResult, ContentBlock, ErrorCode, Tool};
use serde_json::Value;
use toolgate_core::{Content, EmbeddedResource, ToolContext, ToolError, ToolOutput};

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

/// One content block in toolgate's shape.
fn content(block: &ContentBlock) -> Content {
    match block {
        ContentBlock::Text(t) => Content::text(t.text.clone()),
        ContentBlock::Image(i) => Content::image(i.data.clone(), i.mime_type.clone()),
        ContentBlock::Audio(a) => Content::audio(a.data.clone(), a.mime_type.clone()),
        ContentBlock::Resource(r) => {
            let wire = serde_json::to_value(&r.resource).unwrap_or(Value::Null);
            let text = |k: &str| wire[k].as_str().map(str::to_owned);
            Content::Resource {
                resource: EmbeddedResource {
                    uri: text("uri").unwrap_or_default(),
                    mime_type: text("mimeType"),
                    text: text("text"),
                    blob: text("blob"),
                },
            }
        }
        ContentBlock::ResourceLink(link) => {
            let name = link.title.as_deref().unwrap_or(&link.name);
            let mut text = format!("Resource {name}: {}", link.uri);
            if let Some(mime) = &link.mime_type {
                text.push_str(&format!(" ({mime})"));
            }
            if let Some(description) = &link.description {
                text.push_str(&format!(" — {description}"));
            }
            Content::text(text)
        }
        // A block type newer than this code: kept as its JSON text rather than lost.
        other => Content::text(serde_json::to_string(other).unwrap_or_default()),
    }
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
            Some(ContentBlock::Text(t)) => {
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
    fn resource_links_become_text() {
        let block: ContentBlock = serde_json::from_value(json!({
            "type": "resource_link", "uri": "test://a", "name": "a", "mimeType": "text/plain",
            "description": "A file"
        }))
        .unwrap();
        assert_eq!(
            content(&block),
            Content::text("Resource a: test://a (text/plain) — A file")
        );
    }
}
