//! No client token reaches a Streamable HTTP upstream: an rmcp server on 127.0.0.1 records the
//! headers of every HTTP request it gets (initialize, list, calls); toolgate serves it as a
//! `url` entry with headers of its own, and callers with bearer tokens call its tool over
//! REST and over MCP. The upstream sees the entry's headers only, never a caller's token.
#![cfg(test)]

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::http::{Method, StatusCode};
use common::{Harness, mcp, principal};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::{Value, json};
use toolgate_core::Quota;
use toolgate_server::GatewayOptions;

const ADMIN: &str = "admin-bearer-secret-0001";
const ALICE: &str = "alice-bearer-secret-0002";

/// The headers of each HTTP request the upstream got.
type Seen = Arc<Mutex<Vec<Vec<(String, String)>>>>;

#[derive(Clone)]
struct Remote;

impl ServerHandler for Remote {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let Value::Object(schema) =
            json!({"type": "object", "properties": {"text": {"type": "string"}}})
        else {
            unreachable!()
        };
        let mut tool = Tool::new("echo", "Says the text back", Arc::new(schema));
        tool.annotations = serde_json::from_value(json!({"readOnlyHint": true})).ok();
        Ok(ListToolsResult::with_all_items(vec![tool]))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let args = request.arguments.unwrap_or_default();
        let text = args.get("text").and_then(Value::as_str).unwrap_or("");
        Ok(CallToolResponse::Complete(CallToolResult::success(vec![
            ContentBlock::text(text.to_owned()),
        ])))
    }
}

/// Serves [`Remote`] on 127.0.0.1, recording every request's headers.
async fn serve(seen: Seen) -> String {
    let service = StreamableHttpService::new(
        || Ok(Remote),
        Arc::new(LocalSessionManager::default()),
        StreamableHttpServerConfig::default(),
    );
    let record = move |req: axum::extract::Request, next: axum::middleware::Next| {
        let seen = Arc::clone(&seen);
        async move {
            let headers = req
                .headers()
                .iter()
                .map(|(k, v)| (k.as_str().to_owned(), v.to_str().unwrap_or("?").to_owned()))
                .collect();
            seen.lock().unwrap().push(headers);
            next.run(req).await
        }
    };
    let app = axum::Router::new()
        .nest_service("/mcp", service)
        .layer(axum::middleware::from_fn(record));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://{addr}/mcp")
}

/// initialize, initialized, then one tools/call of `tool` over toolgate's MCP endpoint.
async fn mcp_call(h: &Harness, token: &str, tool: &str, args: Value) -> Value {
    let session = mcp::open(h, token, "passthrough-test").await;
    let body = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": tool, "arguments": args}});
    mcp::message(&mcp::rpc(h, token, Some(&session), body).await)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn callers_tokens_never_reach_an_http_upstream_over_rest_or_mcp() {
    let seen: Seen = Arc::default();
    let url = serve(Arc::clone(&seen)).await;
    let config = json!({
        "network": { "private_hosts": ["127.0.0.1"] },
        "servers": { "remote": {
            "url": url,
            "headers": { "Authorization": "Bearer entry-token", "X-Tenant": "acme" },
            "tools": { "echo": { "requires_confirmation": false } },
        }},
    });
    let options = GatewayOptions {
        principals: vec![
            principal("admin", &["*"], None, ADMIN, Quota::default()),
            principal("alice", &["tool.*"], None, ALICE, Quota::default()),
        ],
        ..GatewayOptions::default()
    };
    let h = Harness::with_config(options, serde_json::from_value(config).unwrap()).await;
    let mut listed = Value::Null;
    for _ in 0..100 {
        let r = h
            .send(Method::GET, "/v1/servers/remote/tools", Some(ADMIN), None)
            .await;
        if r.json["tools"].as_array().is_some_and(|t| !t.is_empty()) {
            listed = r.json;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(listed.is_object(), "the HTTP upstream was never listed");
    let r = h
        .send(
            Method::POST,
            "/v1/servers/remote/approve",
            Some(ADMIN),
            Some(json!({"all": true})),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);

    // Over REST, with a bearer token and a header of the caller's own.
    let r = h
        .send_with(
            Method::POST,
            "/v1/tools/remote__echo/call",
            Some(ALICE),
            Some(json!({"arguments": {"text": "over rest"}})),
            &[("x-caller-header", "caller-only")],
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert!(r.text.contains("over rest"), "{}", r.text);
    // Over MCP.
    let result = mcp_call(&h, ADMIN, "remote__echo", json!({"text": "over mcp"})).await;
    assert_eq!(result["result"]["isError"], false, "{result}");
    assert!(result.to_string().contains("over mcp"), "{result}");

    let seen = seen.lock().unwrap().clone();
    assert!(seen.len() >= 3, "{seen:?}");
    for headers in &seen {
        let all = format!("{headers:?}");
        for secret in [ADMIN, ALICE, "caller-only"] {
            assert!(
                !all.contains(secret),
                "a caller's credential reached the upstream: {all}"
            );
        }
        let get = |name: &str| -> Vec<&str> {
            headers
                .iter()
                .filter(|(k, _)| k.eq_ignore_ascii_case(name))
                .map(|(_, v)| v.as_str())
                .collect()
        };
        assert_eq!(get("authorization"), ["Bearer entry-token"], "{all}");
        assert_eq!(get("x-tenant"), ["acme"], "{all}");
        assert!(get("x-caller-header").is_empty(), "{all}");
    }
    h.gw.runtime().drain(Duration::from_secs(1)).await;
}
