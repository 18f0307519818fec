//! A bare rmcp Streamable HTTP server with a single trivial `echo` tool.
//!
//! This is the baseline for the benchmark: the least code rmcp needs to serve
//! one tool over Streamable HTTP, with the same transport configuration as
//! toolgate (stateful sessions through `LocalSessionManager`, SSE responses).
//! With `--stdio` it serves one session on stdin/stdout instead: the upstream
//! that gateways (toolgate, mcp-proxy) start as a child process.

use std::{net::SocketAddr, sync::Arc};

use anyhow::Context as _;
use axum::serve::ListenerExt as _;
use rmcp::{
    ErrorData, RoleServer, ServerHandler,
    model::{
        CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, JsonObject,
        ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
    },
    service::RequestContext,
    transport::streamable_http_server::{
        StreamableHttpServerConfig, StreamableHttpService, session::local::LocalSessionManager,
    },
};
use serde_json::{Value, json};

/// Arguments of the `bare-server` subcommand.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// TCP port to listen on (bound to 127.0.0.1).
    #[arg(long, required_unless_present = "stdio")]
    port: Option<u16>,
    /// Serve one MCP session on stdin/stdout instead (a stdio upstream for a gateway).
    #[arg(long, conflicts_with = "port")]
    stdio: bool,
    /// Tokio worker threads (default: one per available CPU).
    #[arg(long)]
    threads: Option<usize>,
    /// Leave Nagle's algorithm on for accepted connections (axum's default).
    ///
    /// Only for demonstration: an SSE response is written in several small
    /// chunks, and with Nagle on, each `tools/call` waits ~40 ms for the
    /// client's delayed ACK.
    #[arg(long)]
    no_nodelay: bool,
}

/// The server handler: one `echo` tool, built once and shared by every session.
#[derive(Clone)]
struct EchoServer {
    tool: Arc<Tool>,
}

impl EchoServer {
    fn new() -> anyhow::Result<Self> {
        let input_schema = object(json!({
            "type": "object",
            "properties": {"text": {"type": "string"}},
            "required": ["text"],
        }))?;
        let output_schema = object(json!({
            "type": "object",
            "properties": {"text": {"type": "string"}},
            "required": ["text"],
        }))?;
        let tool = Tool::new("echo", "Return the given text unchanged", input_schema)
            .with_raw_output_schema(Arc::new(output_schema));
        Ok(Self {
            tool: Arc::new(tool),
        })
    }
}

fn object(value: Value) -> anyhow::Result<JsonObject> {
    match value {
        Value::Object(map) => Ok(map),
        _ => anyhow::bail!("schema is not a JSON object"),
    }
}

impl ServerHandler for EchoServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_instructions("Bare rmcp benchmark server with one echo tool")
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        (name == self.tool.name).then(|| (*self.tool).clone())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(vec![(*self.tool).clone()]))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        if request.name != self.tool.name {
            return Err(ErrorData::invalid_params(
                format!("unknown tool: {}", request.name),
                None,
            ));
        }
        let text = request
            .arguments
            .as_ref()
            .and_then(|arguments| arguments.get("text"))
            .and_then(Value::as_str)
            .ok_or_else(|| ErrorData::invalid_params("`text` must be a string", None))?
            .to_owned();
        let mut result = CallToolResult::success(vec![ContentBlock::text(text.clone())]);
        result.structured_content = Some(json!({ "text": text }));
        Ok(result.into())
    }
}

/// Run the bare server until Ctrl-C / SIGTERM.
pub fn run(args: Args) -> anyhow::Result<()> {
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    builder.enable_all();
    if let Some(threads) = args.threads {
        builder.worker_threads(threads.max(1));
    }
    builder
        .build()
        .context("building the tokio runtime")?
        .block_on(async {
            match args.port {
                Some(port) if !args.stdio => serve(port, !args.no_nodelay).await,
                _ => serve_stdio().await,
            }
        })
}

/// One session on stdin/stdout, until the client closes stdin.
async fn serve_stdio() -> anyhow::Result<()> {
    use rmcp::ServiceExt as _;
    eprintln!("bare rmcp server on stdio");
    let running = EchoServer::new()?
        .serve(rmcp::transport::io::stdio())
        .await
        .context("starting the stdio session")?;
    running.waiting().await.context("serving on stdio")?;
    Ok(())
}

async fn serve(port: u16, nodelay: bool) -> anyhow::Result<()> {
    let handler = EchoServer::new()?;
    // Defaults on purpose: stateful sessions (`legacy_session_mode: true`),
    // `json_response: false` (it only applies to stateless mode anyway), the
    // loopback Host allow-list. Toolgate uses the same choices.
    let config = StreamableHttpServerConfig::default();
    let cancel = config.cancellation_token.clone();
    let service: StreamableHttpService<EchoServer, LocalSessionManager> =
        StreamableHttpService::new(
            move || Ok(handler.clone()),
            Arc::new(LocalSessionManager::default()),
            config,
        );
    let router = axum::Router::new().nest_service("/mcp", service);
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("binding {addr}"))?;
    eprintln!("bare rmcp server listening on http://{addr}/mcp (TCP_NODELAY: {nodelay})");
    // TCP_NODELAY matters a lot here: see `Args::no_nodelay`.
    let listener = listener.tap_io(move |tcp| {
        if let Err(error) = tcp.set_nodelay(nodelay) {
            eprintln!("failed to set TCP_NODELAY: {error}");
        }
    });
    axum::serve(listener, router)
        .with_graceful_shutdown(async move {
            shutdown_signal().await;
            cancel.cancel();
        })
        .await
        .context("serving")?;
    Ok(())
}

async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = ctrl_c => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = ctrl_c.await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = ctrl_c.await;
    }
}
