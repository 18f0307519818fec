//! A small MCP server on stdio for the gateway's tests: tools with progress, logs, a slow tool
//! that records its cancellation, every content type, an `isError` result, elicitation and
//! sampling requests, a changing tool list and a tool that makes the process exit.
//!
//! Events the tests check are appended, one per line, to the file named by
//! `TOOLGATE_TEST_UPSTREAM_RECORD` (when set): `started PID`, `slow started`, `slow cancelled`,
//! `echo meta {…} args {…}`, `set_level LEVEL`.

// The tests exercise logging and sampling, which revision 2026-07-28 deprecates.
#![allow(deprecated)]

use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ListToolsResult,
    LoggingLevel, LoggingMessageNotificationParam, PaginatedRequestParams,
    ProgressNotificationParam, ProtocolVersion, ServerCapabilities, ServerConfig,
    SetLevelRequestParams, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler, ServiceExt};
use serde_json::{Value, json};

/// A 1×1 transparent PNG.
const PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==";
/// A few bytes standing for a sound.
const WAV: &str = "UklGRiQAAABXQVZFZm10IBAAAAABAAEAQB8AAIA+AAACABAAZGF0YQAAAAA=";

fn record(line: &str) {
    if let Ok(path) = std::env::var("TOOLGATE_TEST_UPSTREAM_RECORD")
        && let Ok(mut file) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
    {
        let _ = writeln!(file, "{line}");
    }
}

/// The `annotated` tool's blocks: annotated text, an image for the user with a priority, a
/// resource link with every field, an embedded resource with `_meta` on the block and inside.
fn annotated() -> Value {
    json!([
        {"type": "text", "text": "for the model", "annotations": {"audience": ["assistant"], "priority": 0.3, "lastModified": "2025-01-12T15:00:58Z"}},
        {"type": "image", "data": PNG, "mimeType": "image/png", "annotations": {"audience": ["user"], "priority": 0.7}},
        {"type": "resource_link", "uri": "test://linked", "name": "linked", "title": "Linked", "description": "A linked file", "mimeType": "text/plain", "size": 42,
         "icons": [{"src": "https://example.com/icon.png", "mimeType": "image/png", "sizes": ["48x48"], "theme": "dark"}],
         "annotations": {"priority": 1.0}, "_meta": {"example.com/origin": "test"}},
        {"type": "resource", "resource": {"uri": "test://doc", "mimeType": "text/plain", "text": "a document", "_meta": {"version": 2}},
         "_meta": {"example.com/note": "embedded"}, "annotations": {"audience": ["user", "assistant"]}}
    ])
}

#[derive(Clone, Default)]
struct Upstream {
    /// Whether `echo`'s description has been changed by `change_tools`.
    changed: Arc<AtomicBool>,
}

fn tool(value: Value) -> Result<Tool, McpError> {
    serde_json::from_value(value).map_err(|e| McpError::internal_error(e.to_string(), None))
}

fn text_result(text: impl Into<String>) -> CallToolResponse {
    CallToolResponse::Complete(CallToolResult::success(vec![ContentBlock::text(text)]))
}

impl Upstream {
    fn tools(&self) -> Result<Vec<Tool>, McpError> {
        let echo = if self.changed.load(Ordering::SeqCst) {
            "Echoes the text back. Changed."
        } else {
            "Echoes the text back."
        };
        [
            json!({"name": "echo", "description": echo, "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}, "annotations": {"readOnlyHint": true}}),
            json!({"name": "add", "title": "Add", "description": "Adds two numbers.", "inputSchema": {"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}, "required": ["a", "b"]}, "outputSchema": {"type": "object", "properties": {"sum": {"type": "number"}}, "required": ["sum"]}}),
            json!({"name": "progress", "description": "Reports progress in steps.", "inputSchema": {"type": "object", "properties": {"steps": {"type": "integer"}}}}),
            json!({"name": "slow", "description": "Waits, and records a cancellation.", "inputSchema": {"type": "object", "properties": {"seconds": {"type": "number"}}}}),
            json!({"name": "media", "description": "Returns every content type.", "inputSchema": {"type": "object"}}),
            json!({"name": "image_first", "description": "Returns an image, then text.", "inputSchema": {"type": "object"}}),
            json!({"name": "annotated", "description": "Returns annotated blocks, a resource link and _meta.", "inputSchema": {"type": "object"}}),
            json!({"name": "fail", "description": "Fails with isError.", "inputSchema": {"type": "object"}}),
            json!({"name": "exit", "description": "Makes the process exit.", "inputSchema": {"type": "object"}}),
            json!({"name": "log", "description": "Sends a log message.", "inputSchema": {"type": "object"}}),
            json!({"name": "elicit", "description": "Asks the user.", "inputSchema": {"type": "object"}}),
            json!({"name": "sample", "description": "Asks the model.", "inputSchema": {"type": "object"}}),
            json!({"name": "pid", "description": "The process id.", "inputSchema": {"type": "object"}}),
            json!({"name": "change_tools", "description": "Changes echo's description.", "inputSchema": {"type": "object"}}),
        ]
        .into_iter()
        .map(tool)
        .collect()
    }
}

impl ServerHandler for Upstream {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .enable_logging()
                .build(),
        )
    }

    fn supported_protocol_versions(&self) -> std::borrow::Cow<'static, [ProtocolVersion]> {
        std::borrow::Cow::Owned(vec![
            ProtocolVersion::V_2025_06_18,
            ProtocolVersion::V_2025_11_25,
        ])
    }

    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        record(&format!(
            "set_level {}",
            serde_json::to_value(request.level).unwrap_or_default()
        ));
        Ok(())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        Ok(ListToolsResult::with_all_items(self.tools()?))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let args = Value::Object(request.arguments.clone().unwrap_or_default());
        let peer = &context.peer;
        match request.name.as_ref() {
            "echo" => {
                // Everything the request carried besides the arguments, for the test that
                // nothing of the caller's reaches an upstream.
                record(&format!(
                    "echo meta {} args {args}",
                    serde_json::to_string(&context.meta).unwrap_or_default()
                ));
                Ok(text_result(args["text"].as_str().unwrap_or_default()))
            }
            "add" => {
                let sum = args["a"].as_f64().unwrap_or(0.0) + args["b"].as_f64().unwrap_or(0.0);
                Ok(CallToolResponse::Complete(CallToolResult::structured(
                    json!({"sum": sum}),
                )))
            }
            "progress" => {
                let steps = args["steps"].as_u64().unwrap_or(3);
                if let Some(token) = context.meta.get_progress_token() {
                    for step in 1..=steps {
                        let mut p = ProgressNotificationParam::new(token.clone(), step as f64);
                        p.total = Some(steps as f64);
                        p.message = Some(format!("step {step}"));
                        let _ = peer.notify_progress(p).await;
                    }
                }
                Ok(text_result(format!("{steps} steps done")))
            }
            "slow" => {
                record("slow started");
                let seconds = args["seconds"].as_f64().unwrap_or(30.0);
                tokio::select! {
                    () = tokio::time::sleep(Duration::from_secs_f64(seconds)) => Ok(text_result("slept")),
                    () = context.ct.cancelled() => {
                        record("slow cancelled");
                        Ok(text_result("cancelled"))
                    }
                }
            }
            "media" => {
                let blocks: Vec<ContentBlock> = serde_json::from_value(json!([
                    {"type": "text", "text": "{\"kind\":\"media\"}"},
                    {"type": "text", "text": "a picture and a sound"},
                    {"type": "image", "data": PNG, "mimeType": "image/png"},
                    {"type": "audio", "data": WAV, "mimeType": "audio/wav"},
                    {"type": "resource", "resource": {"uri": "test://doc", "mimeType": "text/plain", "text": "a document"}},
                    {"type": "resource", "resource": {"uri": "test://bin", "mimeType": "application/octet-stream", "blob": "AAEC"}},
                    {"type": "resource_link", "uri": "test://linked", "name": "linked", "mimeType": "text/plain"}
                ]))
                .map_err(|e| McpError::internal_error(e.to_string(), None))?;
                let mut result = CallToolResult::success(blocks);
                result.structured_content = Some(json!({"kind": "media"}));
                Ok(CallToolResponse::Complete(result))
            }
            "annotated" => {
                let blocks: Vec<ContentBlock> = serde_json::from_value(annotated())
                    .map_err(|e| McpError::internal_error(e.to_string(), None))?;
                Ok(CallToolResponse::Complete(CallToolResult::success(blocks)))
            }
            "image_first" => Ok(CallToolResponse::Complete(CallToolResult::success(vec![
                ContentBlock::image(PNG, "image/png"),
                ContentBlock::text("after the image"),
            ]))),
            "fail" => Ok(CallToolResponse::Complete(CallToolResult::error(vec![
                ContentBlock::text("the upstream failed on purpose"),
            ]))),
            "exit" => {
                eprintln!("test upstream: exiting on purpose");
                std::process::exit(3);
            }
            "log" => {
                let mut param =
                    LoggingMessageNotificationParam::new(LoggingLevel::Warning, json!("careful"));
                param.logger = Some("test-upstream".into());
                let _ = peer.notify_logging_message(param).await;
                Ok(text_result("logged"))
            }
            "elicit" => {
                let params = serde_json::from_value(json!({
                    "mode": "form",
                    "message": "Your name?",
                    "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
                }))
                .map_err(|e| McpError::internal_error(e.to_string(), None))?;
                match peer.create_elicitation(params).await {
                    Ok(answer) => Ok(text_result(
                        serde_json::to_string(&answer).unwrap_or_default(),
                    )),
                    Err(e) => Ok(CallToolResponse::Complete(CallToolResult::error(vec![
                        ContentBlock::text(format!("elicitation failed: {e}")),
                    ]))),
                }
            }
            "sample" => {
                let params = serde_json::from_value(json!({
                    "messages": [{"role": "user", "content": {"type": "text", "text": "Say hi"}}],
                    "maxTokens": 20
                }))
                .map_err(|e| McpError::internal_error(e.to_string(), None))?;
                match peer.create_message(params).await {
                    Ok(reply) => Ok(text_result(
                        serde_json::to_string(&reply).unwrap_or_default(),
                    )),
                    Err(e) => Ok(CallToolResponse::Complete(CallToolResult::error(vec![
                        ContentBlock::text(format!("sampling failed: {e}")),
                    ]))),
                }
            }
            "pid" => Ok(text_result(std::process::id().to_string())),
            "change_tools" => {
                self.changed.store(true, Ordering::SeqCst);
                let _ = peer.notify_tool_list_changed().await;
                Ok(text_result("changed"))
            }
            other => Err(McpError::invalid_params(
                format!("no tool named {other}"),
                None,
            )),
        }
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    record(&format!("started {}", std::process::id()));
    eprintln!("test upstream: started");
    let service = Upstream::default().serve(rmcp::transport::stdio()).await?;
    service.waiting().await?;
    Ok(())
}
