//! Streamable HTTP upstreams through the network policy, against a real rmcp Streamable HTTP
//! server on 127.0.0.1: list and call, progress over SSE, the headers an upstream receives
//! (the entry's and MCP's, nothing else), the private-network refusal and what it says, and a
//! session the server forgot (404) re-initialised; and the fast lane calls take: its ids,
//! cancellation, a forgotten session falling back, the headers it sends.
#![cfg(test)]

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ClientRequest, ContentBlock,
    ListToolsResult, PaginatedRequestParams, ProgressNotificationParam, Request,
    ServerCapabilities, ServerConfig, ServerResult, Tool,
};
use rmcp::service::{NotificationContext, PeerRequestOptions, RequestContext, RunningService};
use rmcp::transport::streamable_http_server::session::SessionManager;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ClientHandler, ErrorData, RoleClient, RoleServer, ServerHandler, ServiceExt};
use serde_json::{Value, json};
use toolgate_core::{BoxFuture, CancellationToken, ErrorKind};
use toolgate_gateway::ServerEntry;
use toolgate_gateway::upstream::http::{PolicyConnector, connect};
use toolgate_gateway::upstream::{Connector, ServerState, Upstream};
use toolgate_gateway::{GatewayError, GatewayErrorKind};
use toolgate_net::{NetPolicy, PolicyClient, Resolver};

mod common;

/// Headers each request the upstream got carried: one list of (name, value) per request.
type Seen = Arc<Mutex<Vec<Vec<(String, String)>>>>;

/// The remote server: `echo` (text back), `count` (three progress notifications over SSE, then a
/// result) and `whoami` (records the headers of the HTTP request that carried the call).
#[derive(Clone)]
struct Remote {
    seen: Seen,
    /// What the `slow` tool went through ("slow started", "slow cancelled").
    events: Arc<Mutex<Vec<String>>>,
}

fn schema() -> Arc<serde_json::Map<String, Value>> {
    let Value::Object(map) = json!({"type": "object", "properties": {"text": {"type": "string"}}})
    else {
        unreachable!()
    };
    Arc::new(map)
}

fn text(result: &CallToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|c| match c {
            ContentBlock::Text(t) => Some(t.text.clone()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("")
}

impl ServerHandler for Remote {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(vec![
            Tool::new("echo", "Says the text back", schema()),
            Tool::new("count", "Counts to three, reporting progress", schema()),
            Tool::new("whoami", "Says which headers it got", schema()),
            Tool::new("slow", "Waits 30 s unless cancelled", schema()),
            Tool::new(
                "chatty",
                "Reports progress and logs the text twice",
                schema(),
            ),
            Tool::new("myid", "Says the JSON-RPC id of its request", schema()),
        ]))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let args = request.arguments.unwrap_or_default();
        let out = match request.name.as_ref() {
            "echo" => args
                .get("text")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned(),
            "count" => {
                let token = context.meta.get_progress_token().ok_or_else(|| {
                    ErrorData::invalid_params("count needs a progress token", None)
                })?;
                for step in 1..=3 {
                    context
                        .peer
                        .notify_progress(
                            ProgressNotificationParam::new(token.clone(), f64::from(step))
                                .with_total(3.0)
                                .with_message(format!("step {step}")),
                        )
                        .await
                        .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                "counted to 3".to_owned()
            }
            "myid" => context.id.to_string(),
            "slow" => {
                self.events.lock().unwrap().push("slow started".into());
                self.events
                    .lock()
                    .unwrap()
                    .push(format!("slow id {}", context.id));
                tokio::select! {
                    () = context.ct.cancelled() => {
                        self.events.lock().unwrap().push("slow cancelled".into());
                        return Err(ErrorData::internal_error("cancelled", None));
                    }
                    () = tokio::time::sleep(Duration::from_secs(30)) => "slept".to_owned(),
                }
            }
            "whoami" => {
                let parts = context
                    .extensions
                    .get::<http::request::Parts>()
                    .ok_or_else(|| ErrorData::internal_error("no HTTP request parts", None))?;
                let headers: Vec<(String, String)> = parts
                    .headers
                    .iter()
                    .map(|(k, v)| (k.as_str().to_owned(), v.to_str().unwrap_or("?").to_owned()))
                    .collect();
                self.seen.lock().unwrap().push(headers);
                "recorded".to_owned()
            }
            other => return Err(ErrorData::invalid_params(format!("no tool {other}"), None)),
        };
        Ok(CallToolResponse::Complete(CallToolResult::success(vec![
            ContentBlock::text(out),
        ])))
    }
}

struct Served {
    addr: SocketAddr,
    seen: Seen,
    events: Arc<Mutex<Vec<String>>>,
    sessions: Arc<LocalSessionManager>,
}

impl Served {
    fn url(&self) -> String {
        format!("http://{}/mcp", self.addr)
    }

    /// Forgets every session, as a server that restarted or expired them does.
    async fn forget_sessions(&self) -> usize {
        let ids: Vec<_> = self
            .sessions
            .sessions
            .read()
            .await
            .keys()
            .cloned()
            .collect();
        for id in &ids {
            self.sessions.close_session(id).await.unwrap();
        }
        ids.len()
    }
}

async fn serve() -> Served {
    let seen: Seen = Arc::default();
    let events: Arc<Mutex<Vec<String>>> = Arc::default();
    let sessions = Arc::new(LocalSessionManager::default());
    let factory_seen = Arc::clone(&seen);
    let factory_events = Arc::clone(&events);
    let service = StreamableHttpService::new(
        move || {
            Ok(Remote {
                seen: Arc::clone(&factory_seen),
                events: Arc::clone(&factory_events),
            })
        },
        Arc::clone(&sessions),
        StreamableHttpServerConfig::default(),
    );
    // `/old` has moved to `/mcp`, for every method.
    let moved = || async {
        (
            axum::http::StatusCode::TEMPORARY_REDIRECT,
            [(axum::http::header::LOCATION, "/mcp")],
        )
    };
    let app = axum::Router::new()
        .nest_service("/mcp", service)
        .route("/old", axum::routing::any(moved));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    Served {
        addr,
        seen,
        events,
        sessions,
    }
}

fn private_ok() -> NetPolicy {
    NetPolicy {
        private_hosts: vec!["127.0.0.1".into()],
        ..NetPolicy::default()
    }
}

fn entry_headers() -> BTreeMap<String, String> {
    BTreeMap::from([
        ("Authorization".to_owned(), "Bearer entry-token".to_owned()),
        ("X-Tenant".to_owned(), "acme".to_owned()),
    ])
}

/// One progress notification: the progress and its message.
type Progress = (f64, Option<String>);

/// A client that keeps the progress notifications it gets.
#[derive(Clone, Default)]
struct Client {
    progress: Arc<Mutex<Vec<Progress>>>,
}

impl ClientHandler for Client {
    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.progress
            .lock()
            .unwrap()
            .push((params.progress, params.message));
    }
}

async fn client(served: &Served, policy: NetPolicy) -> RunningService<RoleClient, Client> {
    let transport = connect(&"tickets", &served.url(), &entry_headers(), policy)
        .await
        .unwrap();
    Client::default().serve(transport).await.unwrap()
}

async fn call(
    client: &RunningService<RoleClient, Client>,
    tool: &'static str,
    args: Value,
) -> CallToolResult {
    let Value::Object(args) = args else {
        panic!("arguments must be an object")
    };
    client
        .call_tool(CallToolRequestParams::new(tool).with_arguments(args))
        .await
        .unwrap()
}

#[tokio::test]
async fn lists_and_calls_through_the_policy() {
    let served = serve().await;
    let client = client(&served, private_ok()).await;
    let tools = client.list_all_tools().await.unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    assert_eq!(names, ["echo", "count", "whoami", "slow", "chatty", "myid"]);
    let result = call(&client, "echo", json!({"text": "héllo"})).await;
    assert_eq!(text(&result), "héllo");
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn progress_streams_back_over_sse() {
    let served = serve().await;
    let client = client(&served, private_ok()).await;
    let handle = client
        .send_cancellable_request(
            ClientRequest::CallToolRequest(Request::new(CallToolRequestParams::new("count"))),
            PeerRequestOptions::no_options(),
        )
        .await
        .unwrap();
    let response = handle.await_response().await.unwrap();
    let ServerResult::CallToolResult(result) = response else {
        panic!("expected a tool result, got {response:?}")
    };
    assert_eq!(text(&result), "counted to 3");
    // Notifications are handled beside the response; give them a moment to land.
    for _ in 0..50 {
        if client.service().progress.lock().unwrap().len() == 3 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let progress = client.service().progress.lock().unwrap().clone();
    assert_eq!(
        progress,
        [
            (1.0, Some("step 1".to_owned())),
            (2.0, Some("step 2".to_owned())),
            (3.0, Some("step 3".to_owned())),
        ]
    );
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn the_upstream_gets_the_entry_headers_and_mcp_ones_only() {
    let served = serve().await;
    let client = client(&served, private_ok()).await;
    call(&client, "whoami", json!({})).await;
    let seen = served.seen.lock().unwrap().clone();
    let headers = seen.last().unwrap();
    let get = |n: &str| {
        headers
            .iter()
            .filter(|(k, _)| k == n)
            .map(|(_, v)| v.as_str())
            .collect::<Vec<_>>()
    };
    assert_eq!(get("authorization"), ["Bearer entry-token"]);
    assert_eq!(get("x-tenant"), ["acme"]);
    assert_eq!(get("mcp-session-id").len(), 1, "{headers:?}");
    assert_eq!(get("mcp-protocol-version").len(), 1, "{headers:?}");
    // Nothing else: no caller header, no proxy or forwarding header, no cookie.
    let allowed = [
        "authorization",
        "x-tenant",
        "accept",
        "content-type",
        "content-length",
        "host",
        "user-agent",
        "mcp-session-id",
        "mcp-protocol-version",
        "mcp-method",
        "mcp-name",
    ];
    let extra: Vec<&str> = headers
        .iter()
        .map(|(k, _)| k.as_str())
        .filter(|k| !allowed.contains(k) && !k.starts_with("mcp-param-"))
        .collect();
    assert!(extra.is_empty(), "unexpected headers upstream: {extra:?}");
    assert!(get("user-agent")[0].starts_with("toolgate/"));
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn the_default_policy_refuses_a_loopback_upstream_and_says_how_to_allow_it() {
    let served = serve().await;
    let err = connect(
        &"tickets",
        &served.url(),
        &entry_headers(),
        NetPolicy::default(),
    )
    .await
    .err()
    .unwrap();
    assert_eq!(err.kind(), GatewayErrorKind::Unavailable);
    let message = err.to_string();
    assert!(
        message.starts_with(
            "Server tickets: Network policy refused 127.0.0.1: it is a loopback address"
        ),
        "{message}"
    );
    assert!(message.contains("private_hosts"), "{message}");
    assert!(
        message.contains("allow_private_network = true"),
        "{message}"
    );
    // Nothing reached the server.
    assert!(served.sessions.sessions.read().await.is_empty());
}

#[tokio::test]
async fn a_name_resolving_to_loopback_is_refused_too() {
    // `localhost` is a name: the resolver's answer is what gets checked.
    let served = serve().await;
    let url = format!("http://localhost:{}/mcp", served.addr.port());
    let connector = PolicyConnector::new(NetPolicy::default()).unwrap();
    let err = connector
        .connect(&"tickets", &url, &BTreeMap::new())
        .await
        .err()
        .unwrap();
    let message = err.to_string();
    assert!(
        message.contains("Network policy refused localhost ("),
        "{message}"
    );
    assert!(message.contains("loopback"), "{message}");
}

#[tokio::test]
async fn entry_headers_that_mcp_or_http_own_are_refused_by_name() {
    let headers = BTreeMap::from([
        ("Mcp-Session-Id".to_owned(), "x".to_owned()),
        ("Host".to_owned(), "evil".to_owned()),
        ("X-Ok".to_owned(), "line\nbreak".to_owned()),
    ]);
    let err = connect(&"tickets", "http://127.0.0.1:9/mcp", &headers, private_ok())
        .await
        .err()
        .unwrap();
    assert!(matches!(err, GatewayError::Invalid(_)));
    let message = err.to_string();
    assert!(
        message.contains("`Mcp-Session-Id` is set by MCP itself"),
        "{message}"
    );
    assert!(
        message.contains("`Host` is set by HTTP itself"),
        "{message}"
    );
    assert!(message.contains("the value of `X-Ok`"), "{message}");
}

#[tokio::test]
async fn a_forgotten_session_is_reinitialised() {
    let served = serve().await;
    let client = client(&served, private_ok()).await;
    assert_eq!(
        text(&call(&client, "echo", json!({"text": "one"})).await),
        "one"
    );
    let before = served
        .sessions
        .sessions
        .read()
        .await
        .keys()
        .cloned()
        .collect::<Vec<_>>();
    assert_eq!(served.forget_sessions().await, 1);
    // The next call gets 404, rmcp initialises a new session and retries the call once.
    assert_eq!(
        text(&call(&client, "echo", json!({"text": "two"})).await),
        "two"
    );
    let after = served
        .sessions
        .sessions
        .read()
        .await
        .keys()
        .cloned()
        .collect::<Vec<_>>();
    assert_eq!(after.len(), 1);
    assert_ne!(before, after, "a new session was opened");
    client.cancel().await.unwrap();
}

fn url_upstream(served: &Served, policy: NetPolicy) -> Upstream {
    url_upstream_at(served.url(), policy)
}

fn url_upstream_at(url: String, policy: NetPolicy) -> Upstream {
    let http = PolicyConnector::new(policy).unwrap().http_connector();
    let entry = ServerEntry {
        url: Some(url),
        headers: entry_headers(),
        ..ServerEntry::default()
    };
    let connector = Connector {
        stdio: Arc::new(common::TestSpawner::default()),
        http: Some(http),
    };
    Upstream::new(common::server_name("tickets"), entry, connector)
}

#[tokio::test]
async fn a_url_entry_is_called_through_the_policy_and_never_gets_the_callers_token() {
    let served = serve().await;
    let up = url_upstream(&served, private_ok());
    let p = common::pipeline(&up);
    let caller = || serde_json::from_value(json!({"token": "caller-secret"})).unwrap();
    let r = p
        .call(common::request("echo", json!({"text": "through toolgate"})).auth(caller()))
        .await;
    assert_eq!(
        r.data(),
        Some(&json!("through toolgate")),
        "{:?}",
        r.error()
    );
    assert_eq!(up.state(), ServerState::Ready);
    let r = p
        .call(common::request("whoami", json!({})).auth(caller()))
        .await;
    assert!(r.error().is_none(), "{:?}", r.error());
    let seen = served.seen.lock().unwrap().clone();
    let headers = seen.last().unwrap();
    assert!(
        headers.iter().all(|(_, v)| !v.contains("caller-secret")),
        "the caller's token reached the upstream: {headers:?}"
    );
    let auth: Vec<&str> = headers
        .iter()
        .filter(|(k, _)| k == "authorization")
        .map(|(_, v)| v.as_str())
        .collect();
    assert_eq!(auth, ["Bearer entry-token"]);
    up.stop().await;
}

#[tokio::test]
async fn a_url_entry_refused_by_the_policy_fails_with_how_to_allow_it() {
    let served = serve().await;
    let up = url_upstream(&served, NetPolicy::default());
    let err = up.tools().await.unwrap_err();
    let message = err.to_string();
    assert!(
        message.contains("Network policy refused 127.0.0.1"),
        "{message}"
    );
    assert!(message.contains("[network] private_hosts"), "{message}");
    assert!(
        matches!(up.state(), ServerState::Failed { ref error, .. } if error.contains("private_hosts")),
        "{:?}",
        up.state()
    );
    assert!(served.sessions.sessions.read().await.is_empty());
}

#[tokio::test]
async fn cancelling_a_call_cancels_it_upstream_over_http() {
    let served = serve().await;
    let up = url_upstream(&served, private_ok());
    let p = common::pipeline(&up);
    let cancel = CancellationToken::new();
    let call = p.call(common::request("slow", json!({})).cancel_token(cancel.clone()));
    let events = Arc::clone(&served.events);
    let canceller = async {
        common::eventually("the slow tool starts", || {
            events.lock().unwrap().contains(&"slow started".to_owned())
        })
        .await;
        cancel.cancel();
    };
    let (r, ()) = tokio::join!(call, canceller);
    assert_eq!(r.error_kind(), Some(ErrorKind::Cancelled));
    common::eventually("the upstream sees the cancellation", || {
        events
            .lock()
            .unwrap()
            .contains(&"slow cancelled".to_owned())
    })
    .await;
    let r = common::call(&p, "echo", json!({"text": "still here"})).await;
    assert_eq!(r.data(), Some(&json!("still here")), "{:?}", r.error());
    up.stop().await;
}

#[tokio::test]
async fn a_redirected_endpoint_is_refused_with_the_address_to_configure() {
    let served = serve().await;
    let old = format!("http://{}/old", served.addr);
    let up = url_upstream_at(old.clone(), private_ok());
    let message = up.tools().await.unwrap_err().to_string();
    assert!(
        message.contains(&format!(
            "{old} answered with a redirect (307) to {}; this request is not redirected: use the final address instead",
            served.url()
        )),
        "{message}"
    );
    assert!(served.sessions.sessions.read().await.is_empty());
}

/// Resolves `tickets.internal` to a private address, and nothing else.
struct Intranet;

impl Resolver for Intranet {
    fn lookup<'a>(&'a self, host: &'a str) -> BoxFuture<'a, std::io::Result<Vec<IpAddr>>> {
        let found = (host == "tickets.internal").then(|| vec![IpAddr::from([10, 0, 0, 5])]);
        Box::pin(async move {
            found.ok_or_else(|| std::io::Error::new(std::io::ErrorKind::NotFound, "no such host"))
        })
    }
}

/// The messages people read when a url entry is refused, in one snapshot.
#[tokio::test]
async fn refusal_messages_people_read() {
    let mut transcript = String::new();
    let mut note = |title: &str, text: String| {
        transcript.push_str(&format!("## {title}\n{text}\n\n"));
    };
    let refused = |url: &'static str, headers: BTreeMap<String, String>, policy: NetPolicy| async move {
        connect("tickets", url, &headers, policy)
            .await
            .err()
            .map(|e| e.to_string())
            .unwrap_or_else(|| "(connected)".into())
    };
    note(
        "a loopback address under the default policy",
        refused(
            "http://127.0.0.1:9/mcp",
            BTreeMap::new(),
            NetPolicy::default(),
        )
        .await,
    );
    let intranet = PolicyConnector::from_client(
        PolicyClient::with_resolver(NetPolicy::default(), Arc::new(Intranet)).unwrap(),
    );
    note(
        "a name that resolves to a private address",
        intranet
            .connect("tickets", "https://tickets.internal/mcp", &BTreeMap::new())
            .await
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default(),
    );
    note(
        "a metadata address, even with private networks allowed",
        refused(
            "http://169.254.169.254/mcp",
            BTreeMap::new(),
            NetPolicy {
                allow_private_network: true,
                ..NetPolicy::default()
            },
        )
        .await,
    );
    note(
        "a scheme other than http and https",
        refused(
            "ftp://mcp.example.com/mcp",
            BTreeMap::new(),
            NetPolicy::default(),
        )
        .await,
    );
    note(
        "headers MCP or HTTP set themselves, and a value with a line break",
        refused(
            "http://127.0.0.1:9/mcp",
            BTreeMap::from([
                ("Accept".to_owned(), "*/*".to_owned()),
                ("Content-Length".to_owned(), "1".to_owned()),
                ("Mcp-Param-Region".to_owned(), "eu".to_owned()),
                ("X-Api-Key".to_owned(), "secret\r\nX-Evil: 1".to_owned()),
                ("Bad Name".to_owned(), "x".to_owned()),
            ]),
            private_ok(),
        )
        .await,
    );
    let served = serve().await;
    let up = url_upstream_at(format!("http://{}/old", served.addr), private_ok());
    let redirected = up.tools().await.unwrap_err().to_string();
    note(
        "an endpoint that redirects",
        redirected.replace(&served.addr.port().to_string(), "[PORT]"),
    );
    let up = url_upstream_at(format!("http://{}/nothing", served.addr), private_ok());
    let not_mcp = up.tools().await.unwrap_err().to_string();
    note(
        "a url that is not an MCP endpoint",
        not_mcp.replace(&served.addr.port().to_string(), "[PORT]"),
    );
    // Nothing listens on the discard port.
    let up = url_upstream_at("http://127.0.0.1:9/mcp".into(), private_ok());
    let nobody = up.tools().await.unwrap_err().to_string();
    note("nothing listening", nobody);
    insta::assert_snapshot!(transcript);
}

/// The id the upstream saw for a `myid` call through `p`.
async fn request_id(p: &toolgate_core::Pipeline) -> String {
    let r = common::call(p, "myid", json!({})).await;
    r.data()
        .and_then(Value::as_str)
        .unwrap_or_else(|| panic!("{:?}", r.error()))
        .to_owned()
}

#[tokio::test]
async fn calls_take_the_fast_lane_with_ids_rmcp_never_uses() {
    let served = serve().await;
    let up = url_upstream(&served, private_ok());
    let p = common::pipeline(&up);
    let first = request_id(&p).await;
    let second = request_id(&p).await;
    assert!(first.starts_with("tg-"), "{first}");
    assert!(second.starts_with("tg-"), "{second}");
    assert_ne!(first, second);
    up.stop().await;
}

#[tokio::test]
async fn cancelling_a_call_on_the_lane_tells_the_upstream() {
    let served = serve().await;
    let up = url_upstream(&served, private_ok());
    let p = common::pipeline(&up);
    let cancel = CancellationToken::new();
    let call = p.call(common::request("slow", json!({})).cancel_token(cancel.clone()));
    let events = Arc::clone(&served.events);
    let canceller = async {
        common::eventually("the slow tool starts", || {
            events.lock().unwrap().contains(&"slow started".to_owned())
        })
        .await;
        cancel.cancel();
    };
    let (r, ()) = tokio::join!(call, canceller);
    assert_eq!(r.error_kind(), Some(ErrorKind::Cancelled));
    common::eventually("the upstream sees the cancellation", || {
        events
            .lock()
            .unwrap()
            .contains(&"slow cancelled".to_owned())
    })
    .await;
    let seen = served.events.lock().unwrap().clone();
    assert!(
        seen.iter().any(|e| e.starts_with("slow id tg-")),
        "the call went through rmcp, not the lane: {seen:?}"
    );
    up.stop().await;
}

#[tokio::test]
async fn a_forgotten_session_falls_back_and_the_call_still_succeeds() {
    let served = serve().await;
    let up = url_upstream(&served, private_ok());
    let p = common::pipeline(&up);
    assert!(request_id(&p).await.starts_with("tg-"));
    assert_eq!(served.forget_sessions().await, 1);
    // The lane gets 404; rmcp's client re-initialises and sends the call itself.
    let r = common::call(&p, "echo", json!({"text": "after"})).await;
    assert_eq!(r.data(), Some(&json!("after")), "{:?}", r.error());
    assert_eq!(served.sessions.sessions.read().await.len(), 1);
    // Then the lane carries calls again, in the new session.
    assert!(request_id(&p).await.starts_with("tg-"));
    assert_eq!(up.state(), ServerState::Ready);
    up.stop().await;
}

#[tokio::test]
async fn the_lane_sends_the_entry_headers_and_the_session_never_the_callers_token() {
    let served = serve().await;
    let up = url_upstream(&served, private_ok());
    let p = common::pipeline(&up);
    let caller = || serde_json::from_value(json!({"token": "caller-secret"})).unwrap();
    let r = p
        .call(common::request("whoami", json!({})).auth(caller()))
        .await;
    assert!(r.error().is_none(), "{:?}", r.error());
    assert!(request_id(&p).await.starts_with("tg-"));
    let seen = served.seen.lock().unwrap().clone();
    let headers = seen.last().unwrap();
    assert!(
        headers.iter().all(|(_, v)| !v.contains("caller-secret")),
        "the caller's token reached the upstream: {headers:?}"
    );
    let mut names: Vec<&str> = headers.iter().map(|(k, _)| k.as_str()).collect();
    names.sort_unstable();
    names.dedup();
    assert_eq!(
        names,
        [
            "accept",
            "authorization",
            "content-length",
            "content-type",
            "host",
            "mcp-protocol-version",
            "mcp-session-id",
            "user-agent",
            "x-tenant"
        ]
    );
    let auth: Vec<&str> = headers
        .iter()
        .filter(|(k, _)| k == "authorization")
        .map(|(_, v)| v.as_str())
        .collect();
    assert_eq!(auth, ["Bearer entry-token"]);
    up.stop().await;
}
