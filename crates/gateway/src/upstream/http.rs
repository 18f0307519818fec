//! Streamable HTTP upstreams, reached through toolgate's network policy.
//!
//! [`PolicyHttpClient`] is rmcp's HTTP backend ([`StreamableHttpClient`]) built on
//! toolgate-net's [`PolicyClient`]: every request passes the policy's checks (http/https only,
//! each address classified by the resolver the connection uses, no proxy), MCP requests are
//! never redirected (a redirect is refused with the target named: configure the final URL),
//! each server-sent event is capped rather than the stream, and JSON answers are capped whole.
//!
//! What an upstream receives is fixed here and nowhere else: the headers of its entry (already
//! `${env:…}`-expanded) and MCP's own (`Accept`, `Content-Type`, `Mcp-Session-Id`,
//! `MCP-Protocol-Version`, `Last-Event-ID`, and the standard `Mcp-Method`/`Mcp-Name`/
//! `Mcp-Param-*` request headers rmcp derives from the message). Nothing of toolgate's caller
//! (its token, its headers) ever is: the client is built from the entry alone.
//!
//! [`PolicyConnector::connect`] (or [`connect`]) gives an rmcp transport to serve a client
//! handler on; a session the server forgot (HTTP 404) is re-initialised by rmcp.
//! [`PolicyConnector::http_connector`] is the same as an [`Upstream`](super::Upstream)'s
//! [`HttpConnector`](super::HttpConnector).

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures_util::StreamExt;
use futures_util::stream::BoxStream;
use http::{HeaderName, HeaderValue};
use rmcp::model::{ClientJsonRpcMessage, ClientRequest, ErrorData, ServerJsonRpcMessage};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::{
    AuthRequiredError, HttpStatusError, InsufficientScopeError, SseError, StreamableHttpClient,
    StreamableHttpClientTransportConfig, StreamableHttpError, StreamableHttpPostResponse,
};
use tokio_util::sync::CancellationToken;
use toolgate_core::ToolError;
use toolgate_net::{
    Bytes, Endpoint, HeaderMap, Method, NetPolicy, PolicyClient, Redirects, StreamRequest,
    StreamResponse,
};

use crate::GatewayError;

/// The rmcp transport of an HTTP upstream: serve a client handler on it.
pub type HttpTransport = StreamableHttpClientTransport<PolicyHttpClient>;

/// Most bytes of a JSON error body read (its text goes into the message).
const MAX_ERROR_BODY: u64 = 64 * 1024;
/// Most characters of an unusable body shown in a message.
const BODY_PREVIEW: usize = 300;

const ACCEPT_BOTH: &str = "application/json, text/event-stream";
pub(crate) const EVENT_STREAM: &str = "text/event-stream";
pub(crate) const JSON: &str = "application/json";
const SESSION_ID: &str = "mcp-session-id";
const LAST_EVENT_ID: &str = "last-event-id";

/// Headers MCP sets itself: an entry may not set them, and they are the only ones taken from
/// rmcp's per-request headers.
const MCP_HEADERS: &[&str] = &[
    "accept",
    "content-type",
    SESSION_ID,
    "mcp-protocol-version",
    LAST_EVENT_ID,
    "mcp-method",
    "mcp-name",
];
/// Prefix of the standard per-parameter request headers (`Mcp-Param-NAME`).
const MCP_PARAM_PREFIX: &str = "mcp-param-";
/// Headers the HTTP layer owns.
const TRANSPORT_HEADERS: &[&str] = &[
    "host",
    "content-length",
    "transfer-encoding",
    "connection",
    "upgrade",
    "te",
    "trailer",
    "keep-alive",
    "proxy-authorization",
    "proxy-connection",
];

fn is_mcp_header(name: &str) -> bool {
    MCP_HEADERS.iter().any(|h| name.eq_ignore_ascii_case(h))
        || name
            .get(..MCP_PARAM_PREFIX.len())
            .is_some_and(|p| p.eq_ignore_ascii_case(MCP_PARAM_PREFIX))
}

/// Makes transports for HTTP upstreams under one network policy (share it: one connection
/// pool, one resolver).
#[derive(Clone, Debug)]
pub struct PolicyConnector {
    net: PolicyClient,
}

impl PolicyConnector {
    /// A connector enforcing `policy` (with the system resolver).
    pub fn new(policy: NetPolicy) -> Result<Self, GatewayError> {
        let net = PolicyClient::new(policy)
            .map_err(|e| GatewayError::Unavailable(format!("Cannot set up HTTP upstreams: {e}")))?;
        Ok(Self { net })
    }

    /// A connector over an existing policy client (the runtime's, or a test's with its resolver).
    pub fn from_client(net: PolicyClient) -> Self {
        Self { net }
    }

    /// The policy in force.
    pub fn policy(&self) -> &NetPolicy {
        self.net.policy()
    }

    /// Checks `url` against the policy now (scheme, every address of its host) and returns a
    /// transport to it that sends `headers` (the entry's, `${env:…}` already expanded) and
    /// MCP's own, nothing else. A refusal is `unavailable`, naming the server, the address and
    /// how to allow it.
    ///
    /// `server` is the server's name as messages show it (a [`ServerName`](crate::ServerName)).
    pub async fn connect(
        &self,
        server: impl std::fmt::Display,
        url: &str,
        headers: &BTreeMap<String, String>,
    ) -> Result<HttpTransport, GatewayError> {
        Ok(self.open(server, url, headers).await?.0)
    }

    /// [`connect`](Self::connect), with the client the transport uses (a lane posts through it).
    async fn open(
        &self,
        server: impl std::fmt::Display,
        url: &str,
        headers: &BTreeMap<String, String>,
    ) -> Result<(HttpTransport, PolicyHttpClient), GatewayError> {
        let server = server.to_string();
        let client = PolicyHttpClient::new(self.net.clone(), &server, headers)?;
        self.net
            .check_destination(url)
            .await
            .map_err(|e| GatewayError::Unavailable(format!("Server {server}: {}", e.message())))?;
        let config = StreamableHttpClientTransportConfig::with_uri(url)
            .max_sse_event_size(
                usize::try_from(self.net.policy().max_response_bytes).unwrap_or(usize::MAX),
            )
            .reinit_on_expired_session(true);
        Ok((
            StreamableHttpClientTransport::with_client(client.clone(), config),
            client,
        ))
    }
}

/// A transport to the upstream at `url` under `policy`, sending `headers` and MCP's own only.
impl PolicyConnector {
    /// The [`HttpConnector`](super::HttpConnector) an upstream's [`Connector`](super::Connector)
    /// takes: every url entry reached through this policy, with its entry's headers only.
    /// Its connections send `tools/call` on the fast lane (`http_lane.rs`) and leave the
    /// rest of the session to rmcp's client.
    pub fn http_connector(&self) -> super::HttpConnector {
        let this = self.clone();
        super::HttpConnector::with_lane(move |target: super::HttpTarget| {
            let this = this.clone();
            async move {
                let (transport, client) = this
                    .open(&target.label, &target.url, &target.headers)
                    .await?;
                let lane = super::http_lane::HttpLane::new(client, &target.url)?;
                let lane: Arc<dyn super::lane::Lane> = Arc::new(lane);
                Ok((transport, Some(lane)))
            }
        })
    }
}

/// One-off form of [`PolicyConnector::connect`] (which shares a client between servers).
pub async fn connect(
    server: impl std::fmt::Display,
    url: &str,
    headers: &BTreeMap<String, String>,
    policy: NetPolicy,
) -> Result<HttpTransport, GatewayError> {
    PolicyConnector::new(policy)?
        .connect(server, url, headers)
        .await
}

/// rmcp's HTTP backend over toolgate-net: the policy's checks on every request, the entry's
/// headers and MCP's own only, no redirects, capped events and bodies.
#[derive(Clone)]
pub struct PolicyHttpClient {
    inner: Arc<Inner>,
}

struct Inner {
    net: PolicyClient,
    /// The server's name, for messages.
    server: String,
    /// The entry's headers, validated; values may be secrets (never shown).
    headers: Vec<(String, String)>,
    /// The same as a header map (values marked sensitive), the start of every lane request's.
    entry: HeaderMap,
    /// Stops every request and stream of this client ([`PolicyHttpClient::close`]).
    cancel: CancellationToken,
    /// The session rmcp last posted in, for the fast lane (`None` until rmcp has posted
    /// after its handshake, and after the lane found the session gone).
    session: Mutex<Option<Arc<LaneSession>>>,
}

/// The session of an HTTP upstream as rmcp negotiated it: what a request outside rmcp's
/// client must carry to be part of it.
pub(crate) struct LaneSession {
    /// `Mcp-Session-Id` (`None`: the server keeps no sessions).
    pub(crate) id: Option<Arc<str>>,
    /// `MCP-Protocol-Version`.
    pub(crate) version: Option<String>,
    /// Every header of a lane POST in this session (the entry's, then MCP's own), built once
    /// per session rather than once per call.
    post: HeaderMap,
}

impl std::fmt::Debug for LaneSession {
    // The headers are left out: the entry's may hold credentials.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LaneSession")
            .field("id", &self.id)
            .field("version", &self.version)
            .finish_non_exhaustive()
    }
}

impl std::fmt::Debug for PolicyHttpClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.inner.headers.iter().map(|(n, _)| n.as_str()).collect();
        f.debug_struct("PolicyHttpClient")
            .field("server", &self.inner.server)
            .field("header_names", &names)
            .finish_non_exhaustive()
    }
}

impl PolicyHttpClient {
    /// A client for `server` (its name, for messages) sending `headers` (the entry's). Refuses
    /// header names and values HTTP does not allow, and headers MCP or HTTP set themselves,
    /// naming each.
    pub fn new(
        net: PolicyClient,
        server: &str,
        headers: &BTreeMap<String, String>,
    ) -> Result<Self, GatewayError> {
        let mut problems = Vec::new();
        let mut kept = Vec::new();
        let mut entry = HeaderMap::new();
        for (name, value) in headers {
            let lower = name.to_ascii_lowercase();
            let Ok(header) = HeaderName::from_bytes(name.as_bytes()) else {
                problems.push(format!("`{name}` is not a valid header name"));
                continue;
            };
            if is_mcp_header(&lower) {
                problems.push(format!("`{name}` is set by MCP itself (remove it)"));
            } else if TRANSPORT_HEADERS.contains(&lower.as_str()) {
                problems.push(format!("`{name}` is set by HTTP itself (remove it)"));
            } else if let Ok(mut v) = HeaderValue::from_str(value) {
                v.set_sensitive(true);
                entry.append(header, v);
                kept.push((lower, value.clone()));
            } else {
                problems.push(format!(
                    "the value of `{name}` holds characters a header cannot carry (a line break or a control character)"
                ));
            }
        }
        if !problems.is_empty() {
            return Err(GatewayError::Invalid(format!(
                "Server {server}: [servers.{server}] headers: {}",
                problems.join("; ")
            )));
        }
        Ok(Self {
            inner: Arc::new(Inner {
                net,
                server: server.to_owned(),
                headers: kept,
                entry,
                cancel: CancellationToken::new(),
                session: Mutex::new(None),
            }),
        })
    }

    /// Stops every request and stream of this client at once (the upstream is being stopped).
    pub fn close(&self) {
        self.inner.cancel.cancel();
    }

    /// The session rmcp last posted in, if the lane may use it.
    pub(crate) fn lane_session(&self) -> Option<Arc<LaneSession>> {
        self.session_slot().clone()
    }

    /// Forgets `session` (the server said it is gone) unless rmcp has moved on already, so
    /// that calls go through rmcp's client until it has re-initialised.
    pub(crate) fn forget_session(&self, session: &Arc<LaneSession>) {
        let mut slot = self.session_slot();
        if slot.as_ref().is_some_and(|s| Arc::ptr_eq(s, session)) {
            *slot = None;
        }
    }

    fn session_slot(&self) -> std::sync::MutexGuard<'_, Option<Arc<LaneSession>>> {
        self.inner
            .session
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Notes the session rmcp posts `message` in (after its handshake).
    fn note_session(
        &self,
        message: &ClientJsonRpcMessage,
        id: Option<&Arc<str>>,
        headers: &HashMap<HeaderName, HeaderValue>,
    ) {
        if let ClientJsonRpcMessage::Request(request) = message
            && matches!(
                request.request,
                ClientRequest::InitializeRequest(_) | ClientRequest::DiscoverRequest(_)
            )
        {
            return;
        }
        let version = headers
            .get(&HeaderName::from_static("mcp-protocol-version"))
            .and_then(|v| v.to_str().ok());
        let mut slot = self.session_slot();
        if slot
            .as_ref()
            .is_some_and(|s| s.id.as_ref() == id && s.version.as_deref() == version)
        {
            return;
        }
        let mut post = self.inner.entry.clone();
        post.insert(http::header::ACCEPT, HeaderValue::from_static(ACCEPT_BOTH));
        post.insert(http::header::CONTENT_TYPE, HeaderValue::from_static(JSON));
        if let Some(id) = id
            && let Ok(value) = HeaderValue::from_str(id)
        {
            post.insert(HeaderName::from_static(SESSION_ID), value);
        }
        if let Some(version) = version
            && let Ok(value) = HeaderValue::from_str(version)
        {
            post.insert(HeaderName::from_static("mcp-protocol-version"), value);
        }
        *slot = Some(Arc::new(LaneSession {
            id: id.cloned(),
            version: version.map(str::to_owned),
            post,
        }));
    }

    /// The server's name, for messages.
    pub(crate) fn server(&self) -> &str {
        &self.inner.server
    }

    /// The most bytes of one answer or event.
    pub(crate) fn max_bytes(&self) -> u64 {
        self.inner.net.policy().max_response_bytes
    }

    /// The headers of a request the lane sends in `session`: the entry's and MCP's own (a
    /// POST's, or with `last_event_id` a GET resuming a stream's; `None` if that id cannot be
    /// a header value).
    pub(crate) fn lane_headers(
        &self,
        session: &LaneSession,
        last_event_id: Option<&str>,
    ) -> Option<HeaderMap> {
        let mut headers = session.post.clone();
        if let Some(last) = last_event_id {
            headers.remove(http::header::CONTENT_TYPE);
            headers.insert(
                HeaderName::from_static(LAST_EVENT_ID),
                HeaderValue::from_str(last).ok()?,
            );
        }
        Some(headers)
    }

    /// The lane's [`Endpoint`] for `url`, under this client's policy.
    pub(crate) fn lane_endpoint(&self, url: &str) -> Result<Endpoint, GatewayError> {
        self.inner.net.endpoint(url).map_err(|e| {
            GatewayError::Unavailable(format!("Server {}: {}", self.inner.server, e.message()))
        })
    }

    /// A lane request to `endpoint` (never redirected), stopped with the client.
    pub(crate) async fn lane_open(
        &self,
        endpoint: &Endpoint,
        method: Method,
        headers: HeaderMap,
        body: Option<Bytes>,
        timeout: Option<Duration>,
    ) -> Result<StreamResponse, StreamableHttpError<ToolError>> {
        endpoint
            .open(method, headers, body, timeout, &self.inner.cancel)
            .await
            .map_err(|e| self.client_error(e))
    }

    /// The headers of one request: the entry's, then MCP's (from rmcp, filtered), then the
    /// ones this exchange needs.
    fn headers(
        &self,
        from_rmcp: &HashMap<HeaderName, HeaderValue>,
        own: &[(&str, &str)],
    ) -> Vec<(String, String)> {
        let mut headers = self.inner.headers.clone();
        for (name, value) in from_rmcp {
            let name = name.as_str();
            if !is_mcp_header(name) {
                tracing::debug!(server = %self.inner.server, header = name, "header not sent upstream");
                continue;
            }
            if own.iter().any(|(n, _)| n.eq_ignore_ascii_case(name)) {
                continue;
            }
            if let Ok(value) = value.to_str() {
                headers.push((name.to_owned(), value.to_owned()));
            }
        }
        headers.extend(own.iter().map(|(n, v)| ((*n).to_owned(), (*v).to_owned())));
        headers
    }

    pub(crate) async fn open(
        &self,
        method: &str,
        url: &str,
        headers: Vec<(String, String)>,
        body: Option<Vec<u8>>,
        timeout: Option<Duration>,
    ) -> Result<StreamResponse, StreamableHttpError<ToolError>> {
        let request = StreamRequest {
            method: method.to_owned(),
            url: url.to_owned(),
            headers,
            body,
            redirects: Redirects::Refuse,
            timeout,
        };
        self.inner
            .net
            .open(request, &self.inner.cancel)
            .await
            .map_err(|e| self.client_error(e))
    }

    fn client_error(&self, e: ToolError) -> StreamableHttpError<ToolError> {
        let message = format!("Server {}: {}", self.inner.server, e.message());
        StreamableHttpError::Client(ToolError::new(e.kind(), message))
    }

    pub(crate) fn policy_timeout(&self) -> Duration {
        self.inner.net.policy().timeout()
    }

    /// A 401 or 403 as rmcp's auth errors (their challenge kept), or a plain refusal.
    fn auth_failure(&self, response: &StreamResponse) -> Option<StreamableHttpError<ToolError>> {
        let status = response.status();
        if status != 401 && status != 403 {
            return None;
        }
        if let Some(challenge) = response.header("www-authenticate") {
            let challenge = challenge.to_owned();
            return Some(if status == 401 {
                StreamableHttpError::AuthRequired(AuthRequiredError::new(challenge))
            } else {
                let scope = scope_of(&challenge);
                StreamableHttpError::InsufficientScope(InsufficientScopeError::new(
                    challenge, scope,
                ))
            });
        }
        Some(StreamableHttpError::Client(ToolError::authorization(
            format!(
                "Server {} refused the request (HTTP {status}); check the credentials in [servers.{}] headers",
                self.inner.server, self.inner.server
            ),
        )))
    }
}

/// The `scope="…"` of a `WWW-Authenticate` challenge.
fn scope_of(challenge: &str) -> Option<String> {
    let at = challenge.find("scope=")?;
    let rest = &challenge[at + "scope=".len()..];
    let value = match rest.strip_prefix('"') {
        Some(quoted) => quoted.split('"').next()?,
        None => rest.split([',', ' ']).next()?,
    };
    Some(value.to_owned())
}

/// 429 and 5xx as rmcp's status error, with a short `Retry-After` kept.
fn status_error(response: &StreamResponse) -> Option<HttpStatusError> {
    let status = response.status();
    if status != 429 && !(500..=599).contains(&status) {
        return None;
    }
    let retry_after = response.header("retry-after").map(str::to_owned);
    Some(HttpStatusError::new(status, retry_after))
}

pub(crate) fn content_type_is(response: &StreamResponse, mime: &str) -> bool {
    response.header("content-type").is_some_and(|ct| {
        ct.trim_start()
            .as_bytes()
            .get(..mime.len())
            .is_some_and(|start| start.eq_ignore_ascii_case(mime.as_bytes()))
    })
}

fn preview(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let text = text.trim();
    if text.is_empty() {
        return "<empty>".into();
    }
    match text.char_indices().nth(BODY_PREVIEW) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}

/// The events of a streamed response as rmcp's `Sse` items.
fn sse_items(
    response: StreamResponse,
    max_event: usize,
) -> BoxStream<'static, Result<sse_stream::Sse, SseError>> {
    response
        .events(u64::try_from(max_event).unwrap_or(u64::MAX))
        .map(|item| {
            item.map(|e| sse_stream::Sse {
                event: e.event,
                data: (!e.data.is_empty()).then_some(e.data),
                id: e.id,
                retry: e.retry,
            })
            .map_err(|e| SseError::Body(Box::new(e)))
        })
        .boxed()
}

fn is_reply_or_notification(message: &ClientJsonRpcMessage) -> bool {
    matches!(
        message,
        ClientJsonRpcMessage::Notification(_)
            | ClientJsonRpcMessage::Response(_)
            | ClientJsonRpcMessage::Error(_)
    )
}

impl StreamableHttpClient for PolicyHttpClient {
    type Error = ToolError;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<ToolError>> {
        let max = usize::try_from(self.inner.net.policy().max_response_bytes).unwrap_or(usize::MAX);
        self.post_message_with_max_sse_event_size(
            uri,
            message,
            session_id,
            auth_header,
            custom_headers,
            max,
        )
        .await
    }

    async fn post_message_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        _auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<ToolError>> {
        self.note_session(&message, session_id.as_ref(), &custom_headers);
        let body = serde_json::to_vec(&message)?;
        let mut own = vec![("accept", ACCEPT_BOTH), ("content-type", JSON)];
        if let Some(id) = &session_id {
            own.push((SESSION_ID, id));
        }
        let headers = self.headers(&custom_headers, &own);
        // A request's answer may take as long as the call (its own timeout and cancellation
        // govern); notifications and replies are answered at once.
        let timeout = match &message {
            ClientJsonRpcMessage::Request(_) => None,
            _ => Some(self.policy_timeout()),
        };
        let response = self
            .open("POST", &uri, headers, Some(body), timeout)
            .await?;
        if let Some(e) = self.auth_failure(&response) {
            return Err(e);
        }
        let status = response.status();
        if status == 202 || status == 204 {
            return Ok(StreamableHttpPostResponse::Accepted);
        }
        if status == 404 && session_id.is_some() {
            return Err(StreamableHttpError::SessionExpired);
        }
        let is_json = content_type_is(&response, JSON);
        let status_err = status_error(&response);
        if (!is_json || status == 429)
            && let Some(e) = status_err
        {
            return Err(e.into());
        }
        let new_session = response.header(SESSION_ID).map(str::to_owned);
        if (200..300).contains(&status)
            && response.content_length() == Some(0)
            && is_reply_or_notification(&message)
        {
            return Ok(StreamableHttpPostResponse::Accepted);
        }
        if !(200..300).contains(&status) {
            let shown = response.shown_url();
            let body = response
                .bytes(MAX_ERROR_BODY)
                .await
                .unwrap_or_else(|e| Bytes::from(e.message().to_owned()));
            if is_json
                && status != 401
                && status != 403
                && let Ok(m @ ServerJsonRpcMessage::Error(_)) =
                    serde_json::from_slice::<ServerJsonRpcMessage>(&body)
            {
                return Ok(StreamableHttpPostResponse::Json(m, new_session));
            }
            // An older server refusing `server/discover` outside a session: answer with a
            // JSON-RPC error so rmcp falls back to `initialize`.
            if session_id.is_none()
                && (400..500).contains(&status)
                && let ClientJsonRpcMessage::Request(request) = &message
                && matches!(request.request, ClientRequest::DiscoverRequest(_))
            {
                let error = ErrorData::invalid_request(
                    format!("server/discover refused with HTTP {status}"),
                    None,
                );
                return Ok(StreamableHttpPostResponse::Json(
                    ServerJsonRpcMessage::error(error, Some(request.id.clone())),
                    None,
                ));
            }
            if let Some(e) = status_err {
                return Err(e.into());
            }
            let hint = match status {
                404 | 405 => {
                    "; check that the entry's url is the server's MCP endpoint (often …/mcp)"
                }
                _ => "",
            };
            return Err(StreamableHttpError::UnexpectedServerResponse(Cow::Owned(
                format!(
                    "Server {} answered HTTP {status} at {shown}: {}{hint}",
                    self.inner.server,
                    preview(&body)
                ),
            )));
        }
        if content_type_is(&response, EVENT_STREAM) {
            return Ok(StreamableHttpPostResponse::Sse(
                sse_items(response, max_sse_event_size),
                new_session,
            ));
        }
        if is_json {
            let cap = self.inner.net.policy().max_response_bytes;
            let body = response
                .bytes(cap)
                .await
                .map_err(|e| self.client_error(e))?;
            return match serde_json::from_slice::<ServerJsonRpcMessage>(&body) {
                Ok(parsed) => Ok(StreamableHttpPostResponse::Json(parsed, new_session)),
                Err(_) if is_reply_or_notification(&message) => {
                    Ok(StreamableHttpPostResponse::Accepted)
                }
                Err(e) => Err(StreamableHttpError::UnexpectedServerResponse(Cow::Owned(
                    format!(
                        "Server {} answered with JSON that is not a JSON-RPC message ({e}): {}",
                        self.inner.server,
                        preview(&body)
                    ),
                ))),
            };
        }
        Err(StreamableHttpError::UnexpectedContentType(
            response.header("content-type").map(str::to_owned),
        ))
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        _auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), StreamableHttpError<ToolError>> {
        let headers = self.headers(&custom_headers, &[(SESSION_ID, &session_id)]);
        let timeout = Some(self.policy_timeout());
        let response = self.open("DELETE", &uri, headers, None, timeout).await?;
        let status = response.status();
        if (200..300).contains(&status) || status == 405 || status == 404 {
            return Ok(());
        }
        Err(StreamableHttpError::UnexpectedServerResponse(Cow::Owned(
            format!(
                "Server {} answered HTTP {status} to closing its session",
                self.inner.server
            ),
        )))
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<BoxStream<'static, Result<sse_stream::Sse, SseError>>, StreamableHttpError<ToolError>>
    {
        let max = usize::try_from(self.inner.net.policy().max_response_bytes).unwrap_or(usize::MAX);
        self.get_stream_with_max_sse_event_size(
            uri,
            session_id,
            last_event_id,
            auth_header,
            custom_headers,
            max,
        )
        .await
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        _auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<BoxStream<'static, Result<sse_stream::Sse, SseError>>, StreamableHttpError<ToolError>>
    {
        let mut own = vec![("accept", ACCEPT_BOTH)];
        if let Some(id) = &session_id {
            own.push((SESSION_ID, id));
        }
        if let Some(id) = &last_event_id {
            own.push((LAST_EVENT_ID, id));
        }
        let headers = self.headers(&custom_headers, &own);
        let timeout = Some(self.policy_timeout());
        let response = self.open("GET", &uri, headers, None, timeout).await?;
        let status = response.status();
        if status == 405 {
            return Err(StreamableHttpError::ServerDoesNotSupportSse);
        }
        if let Some(e) = self.auth_failure(&response) {
            return Err(e);
        }
        if let Some(e) = status_error(&response) {
            return Err(e.into());
        }
        if !(200..300).contains(&status) {
            return Err(StreamableHttpError::UnexpectedServerResponse(Cow::Owned(
                format!(
                    "Server {} answered HTTP {status} to opening its event stream",
                    self.inner.server
                ),
            )));
        }
        if !content_type_is(&response, EVENT_STREAM) && !content_type_is(&response, JSON) {
            return Err(StreamableHttpError::UnexpectedContentType(
                response.header("content-type").map(str::to_owned),
            ));
        }
        Ok(sse_items(response, max_sse_event_size))
    }
}
