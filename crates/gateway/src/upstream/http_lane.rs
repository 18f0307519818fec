//! The fast lane of a Streamable HTTP upstream: `tools/call` posted from the caller's task.
//!
//! rmcp's client keeps the session (the handshake, `tools/list`, the GET stream, the
//! upstream's requests outside calls, a session the server forgot). A call on the lane is one
//! POST through the same [`PolicyHttpClient`] — the network policy, the entry's headers and
//! MCP's own only — in the session rmcp negotiated, with a request id rmcp never uses
//! (`tg-<n>`). Its answer is read by the caller's task: a JSON body parsed straight into a tool
//! result, or the POST's event stream, whose progress and log messages, elicitation and
//! sampling requests all belong to this call and go to its client. A session the server no
//! longer knows (404) sends the call back through rmcp's client, which re-initialises; dropping
//! the call before its answer posts `notifications/cancelled` for it.

// MCP revision 2026-07-28 deprecates logging and sampling; the upstreams toolgate fronts speak
// 2025-06-18 and 2025-11-25, where both are part of the protocol.
#![allow(deprecated)]

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use rmcp::model::{
    CallToolResult, ClientJsonRpcMessage, ClientResult, ErrorCode, ErrorData, JsonObject,
    JsonRpcNotification, JsonRpcRequest, ListRootsResult, NumberOrString, ProgressToken, RequestId,
    ServerNotification, ServerRequest,
};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use toolgate_core::{BoxFuture, ToolContext};
use toolgate_net::{Bytes, Endpoint, Method, SseEvents, StreamResponse};

use super::client::{RouteGuard, elicit, sample, to_level};
use super::http::{EVENT_STREAM, JSON, LaneSession, PolicyHttpClient, content_type_is};
use super::lane::{CallRequest, Lane, LaneOutcome};
use crate::GatewayError;

/// The first protocol revision whose requests carry headers derived from their content
/// (`Mcp-Method`, `Mcp-Name`, `Mcp-Param-*`): the lane leaves sessions at it to rmcp.
const STANDARD_HEADERS: &str = "2026-07-28";
/// How long a cancellation or an answer to the upstream's request may take to post.
const NOTICE_TIMEOUT: Duration = Duration::from_secs(5);
/// How often a call's event stream that ended early is resumed (`Last-Event-ID`).
const RESUMES: u32 = 3;
/// The longest wait before resuming, whatever the server's `retry` says.
const MAX_RETRY: Duration = Duration::from_secs(5);
/// The wait before resuming when the server set none.
const DEFAULT_RETRY: Duration = Duration::from_secs(1);
/// Most bytes of an error body read.
const MAX_ERROR_BODY: u64 = 64 * 1024;

/// The fast lane of one Streamable HTTP connection.
pub(crate) struct HttpLane {
    client: PolicyHttpClient,
    /// The server's url, parsed and checked once for every call (each connection is still
    /// checked by the policy's resolver).
    endpoint: Endpoint,
    next: AtomicU64,
}

impl HttpLane {
    /// A lane posting to `url` through `client` (the one rmcp's transport uses).
    pub(crate) fn new(client: PolicyHttpClient, url: &str) -> Result<Self, GatewayError> {
        Ok(Self {
            endpoint: client.lane_endpoint(url)?,
            client,
            next: AtomicU64::new(1),
        })
    }
}

impl Lane for HttpLane {
    fn call<'a>(
        &'a self,
        tool: &'a str,
        arguments: Option<&'a JsonObject>,
        route: &'a RouteGuard,
        ctx: &'a ToolContext,
    ) -> BoxFuture<'a, LaneOutcome> {
        Box::pin(self.run(tool, arguments, route, ctx))
    }
}

/// A message on the call's stream, read once: a response's result or error is built as it is
/// read (a notification's or request's params are skipped here and read again by kind).
#[derive(Deserialize)]
struct Event {
    #[serde(default)]
    id: Option<RequestId>,
    #[serde(default)]
    method: Option<String>,
    #[serde(default)]
    result: Option<CallToolResult>,
    #[serde(default)]
    error: Option<ErrorData>,
}

/// A response to the call: a tool result or an error.
#[derive(Deserialize)]
struct Reply {
    #[serde(default)]
    result: Option<CallToolResult>,
    #[serde(default)]
    error: Option<ErrorData>,
}

/// An error standing for an answer that is not one (`internal_error`: an execution error).
fn malformed(server: &str, what: &str) -> LaneOutcome {
    LaneOutcome::Refused(ErrorData::internal_error(
        format!("Server {server} {what}"),
        None,
    ))
}

/// The outcome of a response to the call: its error if it has one, else its result.
fn answered(error: Option<ErrorData>, result: Option<CallToolResult>, server: &str) -> LaneOutcome {
    match (error, result) {
        (Some(error), _) => LaneOutcome::Refused(error),
        (None, Some(result)) => LaneOutcome::Done(result),
        (None, None) => malformed(server, "answered with neither a result nor an error"),
    }
}

impl Reply {
    fn outcome(body: &[u8], server: &str) -> LaneOutcome {
        match serde_json::from_slice::<Reply>(body) {
            Ok(Reply { error, result }) => answered(error, result, server),
            Err(e) => malformed(
                server,
                &format!("answered with something other than a tool result ({e})"),
            ),
        }
    }
}

/// Posts `notifications/cancelled` for the call if dropped while armed.
struct CancelOnDrop {
    client: PolicyHttpClient,
    endpoint: Endpoint,
    session: Arc<LaneSession>,
    id: Option<Arc<str>>,
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        let Some(id) = self.id.take() else {
            return;
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let client = self.client.clone();
        let endpoint = self.endpoint.clone();
        let session = Arc::clone(&self.session);
        runtime.spawn(async move {
            let body = serde_json::json!({
                "jsonrpc": "2.0",
                "method": "notifications/cancelled",
                "params": {
                    "requestId": &*id,
                    "reason": "toolgate's caller cancelled the call, or it timed out",
                },
            });
            post_notice(&client, &endpoint, &session, &body).await;
        });
    }
}

/// Posts a notification or an answer in `session`, within [`NOTICE_TIMEOUT`]; failures are
/// traced (the call it belongs to has its own outcome).
async fn post_notice(
    client: &PolicyHttpClient,
    endpoint: &Endpoint,
    session: &LaneSession,
    message: &impl Serialize,
) {
    let (Ok(body), Some(headers)) = (
        serde_json::to_vec(message),
        client.lane_headers(session, None),
    ) else {
        return;
    };
    let sent = tokio::time::timeout(
        NOTICE_TIMEOUT,
        client.lane_open(
            endpoint,
            Method::POST,
            headers,
            Some(Bytes::from(body)),
            Some(NOTICE_TIMEOUT),
        ),
    )
    .await;
    match sent {
        Ok(Ok(response)) if (200..300).contains(&response.status()) => {}
        Ok(Ok(response)) => {
            tracing::debug!(
                server = client.server(),
                status = response.status(),
                "upstream refused a notice"
            )
        }
        Ok(Err(e)) => {
            tracing::debug!(server = client.server(), error = %e, "notice not sent upstream")
        }
        Err(_) => tracing::debug!(server = client.server(), "notice not sent upstream in time"),
    }
}

/// Where a call's event stream stands.
struct Stream {
    events: SseEvents,
    last_id: Option<String>,
    retry: Option<Duration>,
    resumes: u32,
}

impl HttpLane {
    async fn run(
        &self,
        tool: &str,
        arguments: Option<&JsonObject>,
        route: &RouteGuard,
        ctx: &ToolContext,
    ) -> LaneOutcome {
        let Some(session) = self.client.lane_session() else {
            return LaneOutcome::Fallback;
        };
        if session
            .version
            .as_deref()
            .is_some_and(|v| v >= STANDARD_HEADERS)
        {
            return LaneOutcome::Fallback;
        }
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let id_text: Arc<str> = Arc::from(format!("tg-{n}"));
        let id = NumberOrString::String(Arc::clone(&id_text));
        route.bind(ProgressToken(id.clone()), id.clone());
        let request = CallRequest::new(&id_text, tool, arguments);
        let (Ok(body), Some(headers)) = (
            serde_json::to_vec(&request),
            self.client.lane_headers(&session, None),
        ) else {
            return LaneOutcome::Fallback;
        };
        let mut cancel = CancelOnDrop {
            client: self.client.clone(),
            endpoint: self.endpoint.clone(),
            session: Arc::clone(&session),
            id: Some(Arc::clone(&id_text)),
        };
        let response = match self
            .client
            .lane_open(
                &self.endpoint,
                Method::POST,
                headers,
                Some(Bytes::from(body)),
                None,
            )
            .await
        {
            Ok(response) => response,
            Err(e) => {
                // The request may not have reached the server: rmcp's client sends it and
                // reports what fails.
                tracing::debug!(server = self.client.server(), error = %e, "fast lane failed, through rmcp");
                cancel.id = None;
                return LaneOutcome::Fallback;
            }
        };
        let outcome = self
            .answer(response, &session, &id, &id_text, route, ctx)
            .await;
        if !matches!(outcome, LaneOutcome::Lost) {
            cancel.id = None;
        }
        outcome
    }

    /// Reads the answer to the call `id`.
    async fn answer(
        &self,
        response: StreamResponse,
        session: &Arc<LaneSession>,
        id: &RequestId,
        token: &str,
        route: &RouteGuard,
        ctx: &ToolContext,
    ) -> LaneOutcome {
        let server = self.client.server();
        let status = response.status();
        if status == 404 {
            // The server forgot the session: rmcp's client re-initialises and sends the call.
            self.client.forget_session(session);
            return LaneOutcome::Fallback;
        }
        if !(200..300).contains(&status) {
            if content_type_is(&response, JSON)
                && let Ok(body) = response.bytes(MAX_ERROR_BODY).await
                && let Ok(Reply {
                    error: Some(error), ..
                }) = serde_json::from_slice::<Reply>(&body)
            {
                return LaneOutcome::Refused(error);
            }
            if (500..600).contains(&status) {
                return malformed(server, &format!("answered the call with HTTP {status}"));
            }
            // Refused at the HTTP level (credentials, rate, request): rmcp's client sends it
            // and reports the refusal as it does for every request.
            return LaneOutcome::Fallback;
        }
        if content_type_is(&response, EVENT_STREAM) {
            let stream = Stream {
                events: response.events(self.client.max_bytes()),
                last_id: None,
                retry: None,
                resumes: 0,
            };
            return self
                .read_stream(stream, session, id, token, route, ctx)
                .await;
        }
        if content_type_is(&response, JSON) {
            return match response.bytes(self.client.max_bytes()).await {
                Ok(body) => Reply::outcome(&body, server),
                Err(e) => {
                    tracing::debug!(%server, error = %e, "the answer to a call was cut off");
                    LaneOutcome::Lost
                }
            };
        }
        let shown = response.header("content-type").unwrap_or("none").to_owned();
        malformed(
            server,
            &format!(
                "answered the call with HTTP {status} and content type {shown}, not JSON or an event stream"
            ),
        )
    }

    /// Reads the call's event stream until the answer: its notifications and requests belong
    /// to the call.
    async fn read_stream(
        &self,
        mut stream: Stream,
        session: &Arc<LaneSession>,
        id: &RequestId,
        token: &str,
        route: &RouteGuard,
        ctx: &ToolContext,
    ) -> LaneOutcome {
        let server = self.client.server();
        // Made at the upstream's first request on the stream: most calls see none, and an empty
        // `FuturesUnordered` already allocates.
        let mut pending: Option<FuturesUnordered<BoxFuture<'_, ()>>> = None;
        let mut withdrawn: HashMap<RequestId, CancellationToken> = HashMap::new();
        loop {
            let item = match pending.as_mut() {
                Some(requests) if !requests.is_empty() => tokio::select! {
                    Some(()) = requests.next() => continue,
                    item = stream.events.next() => item,
                },
                _ => stream.events.next().await,
            };
            let event = match item {
                Some(Ok(event)) => event,
                ended => {
                    // Broken or ended before the answer: resumed if the server allows it.
                    if let Some(Err(e)) = ended {
                        tracing::debug!(%server, error = %e, "a call's event stream broke");
                    }
                    if self.resume(&mut stream, session).await {
                        continue;
                    }
                    return LaneOutcome::Lost;
                }
            };
            if let Some(event_id) = event.id {
                stream.last_id = Some(event_id);
            }
            if let Some(ms) = event.retry {
                stream.retry = Some(Duration::from_millis(ms));
            }
            if event.data.is_empty() {
                continue;
            }
            let data = event.data.as_bytes();
            let message = match serde_json::from_slice::<Event>(data) {
                Ok(message) => message,
                // A response to this call that is not a tool result, or not JSON-RPC at all.
                Err(_) => match serde_json::from_slice::<Value>(data) {
                    Ok(v) if v.get("method").is_none() && v.get("id") == Some(&json!(token)) => {
                        return Reply::outcome(data, server);
                    }
                    _ => {
                        tracing::debug!(%server, "an event that is not JSON-RPC skipped");
                        continue;
                    }
                },
            };
            match (message.method, message.id) {
                (None, Some(reply_to)) if &reply_to == id => {
                    return answered(message.error, message.result, server);
                }
                (None, _) => {}
                (Some(_), None) => self.notification(data, token, route, ctx, &withdrawn),
                (Some(_), Some(request_id)) => {
                    let upstream = CancellationToken::new();
                    withdrawn.insert(request_id, upstream.clone());
                    let Ok(request) = serde_json::from_slice::<JsonRpcRequest<ServerRequest>>(data)
                    else {
                        continue;
                    };
                    pending
                        .get_or_insert_with(FuturesUnordered::new)
                        .push(Box::pin(
                            self.server_request(request, session, ctx, upstream),
                        ));
                }
            }
        }
    }

    /// Resumes a call's event stream that ended before the answer, if the server numbered its
    /// events; whether it did.
    async fn resume(&self, stream: &mut Stream, session: &LaneSession) -> bool {
        let Some(last_id) = stream.last_id.clone() else {
            return false;
        };
        if stream.resumes == RESUMES {
            return false;
        }
        stream.resumes += 1;
        let wait = stream.retry.unwrap_or(DEFAULT_RETRY).min(MAX_RETRY);
        tokio::time::sleep(wait).await;
        let Some(headers) = self.client.lane_headers(session, Some(&last_id)) else {
            return false;
        };
        let timeout = Some(self.client.policy_timeout());
        let Ok(response) = self
            .client
            .lane_open(&self.endpoint, Method::GET, headers, None, timeout)
            .await
        else {
            return false;
        };
        if !(200..300).contains(&response.status()) || !content_type_is(&response, EVENT_STREAM) {
            return false;
        }
        stream.events = response.events(self.client.max_bytes());
        true
    }

    /// A notification on the call's stream: progress and log messages go to the call's client.
    fn notification(
        &self,
        data: &[u8],
        token: &str,
        route: &RouteGuard,
        ctx: &ToolContext,
        withdrawn: &HashMap<RequestId, CancellationToken>,
    ) {
        let server = self.client.server();
        let Ok(message) = serde_json::from_slice::<JsonRpcNotification<ServerNotification>>(data)
        else {
            return;
        };
        match message.notification {
            ServerNotification::ProgressNotification(n) => {
                let p = n.params;
                if matches!(&p.progress_token.0, NumberOrString::String(t) if &**t == token) {
                    ctx.report_progress(p.progress, p.total, p.message.as_deref());
                } else {
                    route.routes().progress(p);
                }
            }
            ServerNotification::LoggingMessageNotification(n) => {
                let p = n.params;
                let level = to_level(p.level);
                match ctx.client("log messages") {
                    Ok(client) => client.log(level, p.logger.as_deref(), p.data),
                    Err(_) => {
                        tracing::debug!(%server, level = level.as_str(), data = %p.data, "upstream log (the call has no client)");
                    }
                }
            }
            ServerNotification::ToolListChangedNotification(_) => route.routes().tools_changed(),
            ServerNotification::CancelledNotification(n) => {
                if let Some(request) = &n.params.request_id
                    && let Some(upstream) = withdrawn.get(request)
                {
                    upstream.cancel();
                }
            }
            _ => {}
        }
    }

    /// Answers a request the upstream made on the call's stream, for the call's client.
    async fn server_request(
        &self,
        request: JsonRpcRequest<ServerRequest>,
        session: &LaneSession,
        ctx: &ToolContext,
        upstream: CancellationToken,
    ) {
        let server = self.client.server();
        let result = match request.request {
            ServerRequest::PingRequest(_) => Ok(ClientResult::empty(())),
            ServerRequest::ListRootsRequest(_) => {
                Ok(ClientResult::ListRootsResult(ListRootsResult::default()))
            }
            ServerRequest::ElicitRequest(r) => {
                elicit(server, r.params, || Ok(ctx.clone()), &upstream)
                    .await
                    .map(ClientResult::ElicitResult)
            }
            ServerRequest::CreateMessageRequest(r) => sample(server, &r.params, ctx, &upstream)
                .await
                .map(|r| ClientResult::CreateMessageResult(Box::new(r))),
            ServerRequest::CustomRequest(r) => Err(ErrorData::new(
                ErrorCode::METHOD_NOT_FOUND,
                format!("toolgate does not answer {}", r.method),
                None,
            )),
            _ => Err(ErrorData::new(
                ErrorCode::METHOD_NOT_FOUND,
                "toolgate does not answer this request",
                None,
            )),
        };
        let message = match result {
            Ok(result) => ClientJsonRpcMessage::response(result, request.id),
            Err(error) => ClientJsonRpcMessage::error(error, Some(request.id)),
        };
        post_notice(&self.client, &self.endpoint, session, &message).await;
    }
}
