//! Forwarding is faithful end to end: an upstream MCP server's `tools/call` result, taken
//! through the gateway's [`Upstream::call`], the pipeline and [`call_result`], is the JSON the
//! upstream itself answers (content blocks with their annotations and `_meta`, resource links,
//! embedded resources, `structuredContent`, `isError`), toolgate's own `_meta` aside.
//!
//! The upstreams: an rmcp server run in this process over an in-memory pipe (its results are
//! built from JSON here), and `@modelcontextprotocol/server-everything` from npm when
//! `$TOOLGATE_TEST_NPM_DIR` holds it (as in the gateway's tests).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::PathBuf;
use std::pin::Pin;
use std::process::Stdio;
use std::sync::Arc;

use base64::Engine;
use base64::prelude::BASE64_STANDARD;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler, ServiceExt};
use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use toolgate_core::{CallRequest, Pipeline, Registry, ToolBuilder};
use toolgate_gateway::GatewayError;
use toolgate_gateway::upstream::{
    Connector, StdioHandle, StdioLaunch, StdioProcess, StdioSpawner, Upstream,
};

use super::{RESULT_META_KEY, call_result};

/// A 1×1 transparent PNG.
const PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==";

/// The in-process upstream's results, by tool name: each a `CallToolResult` as JSON.
fn results() -> Vec<(&'static str, Value)> {
    vec![
        (
            "annotated",
            json!({"content": [
                {"type": "text", "text": "for the model", "annotations": {"audience": ["assistant"], "priority": 0.3, "lastModified": "2025-01-12T15:00:58Z"}, "_meta": {"example.com/kind": "note"}},
                {"type": "image", "data": PNG, "mimeType": "image/png", "annotations": {"audience": ["user"], "priority": 0.7}},
                {"type": "audio", "data": "UklGRg==", "mimeType": "audio/wav", "_meta": {"seconds": 0}},
                {"type": "resource_link", "uri": "test://linked", "name": "linked", "title": "Linked", "description": "A linked file", "mimeType": "text/plain", "size": 42,
                 "icons": [{"src": "https://example.com/icon.png", "mimeType": "image/png", "sizes": ["48x48"], "theme": "dark"}],
                 "annotations": {"priority": 1.0}, "_meta": {"example.com/origin": "test"}},
                {"type": "resource", "resource": {"uri": "test://doc", "mimeType": "text/plain", "text": "a document", "_meta": {"version": 2}},
                 "_meta": {"example.com/note": "embedded"}, "annotations": {"audience": ["user", "assistant"]}},
                {"type": "resource", "resource": {"uri": "test://bin", "blob": "AAEC"}, "annotations": {"lastModified": "2025-01-12T15:00:58Z"}}
            ], "isError": false}),
        ),
        (
            // A plain first text block is the data; the annotated rest is attached.
            "text_then_link",
            json!({"content": [
                {"type": "text", "text": "Here is the file:"},
                {"type": "resource_link", "uri": "file:///srv/a.txt", "name": "a.txt", "annotations": {"audience": ["user"]}}
            ], "isError": false}),
        ),
        (
            // Structured content with its JSON text block, then an annotated image.
            "structured",
            json!({"content": [
                {"type": "text", "text": "{\"sum\":3}"},
                {"type": "image", "data": PNG, "mimeType": "image/png", "annotations": {"priority": 0.5}, "_meta": {"k": [1, 2]}}
            ], "structuredContent": {"sum": 3}, "isError": false}),
        ),
    ]
}

/// An rmcp server answering each of [`results`]'s tools with its result.
#[derive(Clone)]
struct InProcessUpstream;

impl ServerHandler for InProcessUpstream {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let tools: Vec<Tool> = results()
            .into_iter()
            .map(|(name, _)| {
                serde_json::from_value(json!({"name": name, "description": "A test result.", "inputSchema": {"type": "object"}}))
                    .unwrap()
            })
            .collect();
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let (_, result) = results()
            .into_iter()
            .find(|(name, _)| *name == request.name)
            .ok_or_else(|| McpError::invalid_params("no such tool", None))?;
        let result: CallToolResult = serde_json::from_value(result)
            .map_err(|e| McpError::internal_error(e.to_string(), None))?;
        Ok(CallToolResponse::Complete(result))
    }
}

/// The end of a spawned upstream: a cancelled token stops it; `exited` waits for that.
struct Handle {
    stop: CancellationToken,
    done: watch::Receiver<bool>,
}

impl StdioHandle for Handle {
    fn stderr_tail(&self) -> String {
        String::new()
    }

    fn kill(&self) {
        self.stop.cancel();
    }

    fn exited(&self) -> Pin<Box<dyn Future<Output = String> + Send + '_>> {
        let mut done = self.done.clone();
        Box::pin(async move {
            let _ = done.wait_for(|d| *d).await;
            "stopped".to_owned()
        })
    }
}

impl Drop for Handle {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

type Reader = Pin<Box<dyn AsyncRead + Send>>;
type Writer = Pin<Box<dyn AsyncWrite + Send>>;

/// Where an upstream runs: in this process, or as a child process (`StdioLaunch`'s program).
enum Spawner {
    InProcess,
    Child,
}

/// Runs `work` until it ends or `stop` is cancelled, then reports done.
fn supervise(
    stop: CancellationToken,
    work: impl Future<Output = ()> + Send + 'static,
) -> watch::Receiver<bool> {
    let (tx, done) = watch::channel(false);
    tokio::spawn(async move {
        tokio::select! {
            () = work => {}
            () = stop.cancelled() => {}
        }
        let _ = tx.send(true);
    });
    done
}

impl StdioSpawner for Spawner {
    fn spawn(&self, launch: &StdioLaunch) -> Result<StdioProcess, GatewayError> {
        let stop = CancellationToken::new();
        let (stdout, stdin, done): (Reader, Writer, _) = match self {
            Self::InProcess => {
                let (ours, theirs) = tokio::io::duplex(1 << 16);
                let (read, write) = tokio::io::split(ours);
                let done = supervise(stop.clone(), async move {
                    if let Ok(service) = InProcessUpstream.serve(theirs).await {
                        let _ = service.waiting().await;
                    }
                });
                (Box::pin(read), Box::pin(write), done)
            }
            Self::Child => {
                let mut child = child(launch);
                let stdout = child.stdout.take().unwrap();
                let stdin = child.stdin.take().unwrap();
                let done = supervise(stop.clone(), async move {
                    let _ = child.wait().await;
                });
                (Box::pin(stdout), Box::pin(stdin), done)
            }
        };
        Ok(StdioProcess {
            stdout,
            stdin,
            handle: Box::new(Handle { stop, done }),
        })
    }
}

/// The launch as a plain child process with piped stdio, killed on drop.
fn child(launch: &StdioLaunch) -> tokio::process::Child {
    tokio::process::Command::new(&launch.program)
        .args(&launch.args)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap()
}

fn upstream(spawner: Spawner, program: PathBuf, args: &[&str]) -> Upstream {
    let entry = toolgate_gateway::ServerEntry {
        command: Some(program),
        args: args.iter().map(|a| (*a).to_owned()).collect(),
        ..Default::default()
    };
    let name = toolgate_gateway::upstream::test_server_name("up").unwrap();
    Upstream::new(
        name,
        entry,
        Connector {
            stdio: Arc::new(spawner),
            http: None,
        },
    )
}

/// A pipeline with one tool, `proxy`, forwarding `{"tool", "args"}` to the upstream.
fn pipeline(upstream: &Upstream) -> Pipeline {
    let upstream = upstream.clone();
    let proxy = ToolBuilder::new("proxy", "Forwards a call upstream. Use it in tests only.")
        .input_schema(json!({"type": "object"}))
        .idempotent(false)
        .handler(move |args: Value, ctx| {
            let upstream = upstream.clone();
            async move {
                let tool = args["tool"].as_str().unwrap_or_default().to_owned();
                upstream.call(&tool, args["args"].clone(), &ctx).await
            }
        });
    let registry = Arc::new(Registry::new());
    registry.register_all(vec![Arc::new(proxy)], false).unwrap();
    Pipeline::new(registry)
}

/// `value` as it goes over the wire, read back (rmcp keeps a priority as an `f32`, which
/// `serde_json::to_value` would widen to 0.699999988… where the wire says 0.7).
fn wire<T: serde::Serialize>(value: &T) -> Value {
    serde_json::from_str(&serde_json::to_string(value).unwrap()).unwrap()
}

/// What a result carries for the model and the user: its content blocks, its structured
/// content and whether it is an error (`isError` absent is false). The result-level `_meta`
/// (toolgate's call id) and `resultType` (which depends on the protocol revision each side
/// speaks) are left out.
fn carried(mut wire: Value) -> Value {
    let wire = wire.as_object_mut().unwrap();
    json!({
        "content": wire.remove("content"),
        "structuredContent": wire.remove("structuredContent"),
        "isError": wire.remove("isError").unwrap_or(json!(false)),
    })
}

/// `carried` with the clock of server-everything's dynamic resources masked. They say when
/// they were read, to the second (`… created at 11:55:39 PM`), so the direct answer and
/// toolgate's, made a moment apart, differ there whenever a second ticks between the two calls
/// (on a busy machine, often enough to make the comparison flaky). Only that clock is masked,
/// in an embedded resource's `text` and in its `blob` (decoded, masked, encoded again): every
/// other byte is still compared.
fn clock_masked(mut carried: Value) -> Value {
    let Some(blocks) = carried["content"].as_array_mut() else {
        return carried;
    };
    for block in blocks {
        let Some(resource) = block.get_mut("resource").and_then(Value::as_object_mut) else {
            continue;
        };
        if let Some(Value::String(text)) = resource.get_mut("text") {
            *text = mask_clock(text);
        }
        if let Some(Value::String(blob)) = resource.get_mut("blob") {
            let bytes = BASE64_STANDARD.decode(blob.as_bytes()).unwrap();
            if let Ok(text) = String::from_utf8(bytes) {
                *blob = BASE64_STANDARD.encode(mask_clock(&text));
            }
        }
    }
    carried
}

/// `text` with the time of day after its last ` created at ` replaced by `<clock>`; unchanged
/// when it has none (or what follows is not a time of day).
fn mask_clock(text: &str) -> String {
    match text.rsplit_once(" created at ") {
        Some((before, clock))
            if clock.contains(':')
                && clock
                    .chars()
                    .all(|c| c.is_ascii_digit() || c.is_whitespace() || ":APMapm".contains(c)) =>
        {
            format!("{before} created at <clock>")
        }
        _ => text.to_owned(),
    }
}

/// What toolgate's MCP server answers for the upstream's `tool`: [`carried`] of its result.
async fn through_toolgate(pipeline: &Pipeline, tool: &str, args: &Value) -> Value {
    let result = pipeline
        .call(CallRequest::new(
            "proxy",
            json!({"tool": tool, "args": args}),
        ))
        .await;
    let mut answer = wire(&call_result(result));
    let meta = answer.as_object_mut().unwrap().remove("_meta").unwrap();
    assert!(meta[RESULT_META_KEY]["callId"].is_string(), "{meta}");
    carried(answer)
}

/// What the upstream answers for `tool` to a plain rmcp client over `transport`.
async fn direct<T, E, A>(transport: T, tool: &str, args: &Value) -> Value
where
    T: rmcp::transport::IntoTransport<rmcp::RoleClient, E, A>,
    E: std::error::Error + Send + Sync + 'static,
{
    let client = ().serve(transport).await.unwrap();
    let mut params = CallToolRequestParams::new(tool.to_owned());
    params.arguments = args.as_object().cloned();
    let result = client.call_tool(params).await.unwrap();
    let _ = client.cancel().await;
    carried(wire(&result))
}

#[tokio::test]
async fn an_rmcp_upstreams_results_reach_mcp_clients_unchanged() {
    let up = upstream(Spawner::InProcess, PathBuf::from("/in-process"), &[]);
    let p = pipeline(&up);
    let args = json!({});
    for (tool, _) in results() {
        let (ours, theirs) = tokio::io::duplex(1 << 16);
        let server = tokio::spawn(async move {
            let service = InProcessUpstream.serve(theirs).await.unwrap();
            let _ = service.waiting().await;
        });
        let expected = direct(ours, tool, &args).await;
        server.abort();
        let got = through_toolgate(&p, tool, &args).await;
        assert_eq!(got, expected, "{tool}");
    }
    // The comparison can fail: annotations are really there on both sides.
    let annotated = through_toolgate(&p, "annotated", &args).await;
    assert_eq!(
        annotated["content"][1]["annotations"]["priority"],
        json!(0.7)
    );
    assert_eq!(annotated["content"][3]["type"], json!("resource_link"));
    assert_eq!(
        annotated["content"][4]["resource"]["_meta"],
        json!({"version": 2})
    );
    up.stop().await;
}

const EVERYTHING: &str = "node_modules/@modelcontextprotocol/server-everything/dist/index.js";

/// server-everything's entry point and Node, or `None` (after saying why) when skipped.
fn everything() -> Option<(PathBuf, PathBuf)> {
    let ci = std::env::var("CI").is_ok_and(|v| v == "true");
    let workspace = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let script = std::env::var_os("TOOLGATE_TEST_NPM_DIR")
        .map(|dir| workspace.join(dir).join(EVERYTHING))
        .filter(|p| p.is_file());
    let node = std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|dir| dir.join("node"))
            .find(|p| p.is_file())
    });
    match (script, node) {
        (Some(script), Some(node)) => Some((node, script)),
        _ => {
            let message = "@modelcontextprotocol/server-everything or node is missing: set TOOLGATE_TEST_NPM_DIR to a directory where `npm install --prefix DIR @modelcontextprotocol/server-everything` ran (scripts/test.sh does)";
            assert!(!ci, "{message}");
            eprintln!("skipped: {message}");
            None
        }
    }
}

#[tokio::test]
async fn server_everythings_annotated_messages_and_links_reach_mcp_clients_unchanged() {
    let Some((node, script)) = everything() else {
        return;
    };
    let script = script.to_string_lossy().into_owned();
    let up = upstream(Spawner::Child, node.clone(), &[&script, "stdio"]);
    let p = pipeline(&up);
    let launch = StdioLaunch {
        label: "everything".into(),
        program: node,
        args: vec![script, "stdio".into()],
        env: Vec::new(),
        cwd: None,
        level: toolgate_core::Isolation::Standard,
        access: Default::default(),
    };
    let mut process = child(&launch);
    let transport = (
        process.stdout.take().unwrap(),
        process.stdin.take().unwrap(),
    );
    let client = ().serve(transport).await.unwrap();
    for (tool, args) in [
        (
            "get-annotated-message",
            json!({"messageType": "error", "includeImage": true}),
        ),
        (
            "get-annotated-message",
            json!({"messageType": "debug", "includeImage": false}),
        ),
        ("get-resource-links", json!({"count": 3})),
        (
            "get-resource-reference",
            json!({"resourceType": "Blob", "resourceId": 2}),
        ),
        ("get-structured-content", json!({"location": "Chicago"})),
    ] {
        let mut params = CallToolRequestParams::new(tool);
        params.arguments = args.as_object().cloned();
        let expected = clock_masked(carried(wire(&client.call_tool(params).await.unwrap())));
        let got = clock_masked(through_toolgate(&p, tool, &args).await);
        assert_eq!(got, expected, "{tool} {args}");
        if tool == "get-resource-reference" {
            // The blob came through, and only its clock was masked.
            let blob = got["content"][1]["resource"]["blob"].as_str().unwrap();
            assert_eq!(
                BASE64_STANDARD.decode(blob).unwrap(),
                b"Resource 2: This is a base64 blob created at <clock>",
                "{got}"
            );
        }
        if tool == "get-annotated-message" {
            assert!(
                got["content"][0]["annotations"]["audience"].is_array(),
                "{got}"
            );
        }
    }
    let _ = client.cancel().await;
    up.stop().await;
}
