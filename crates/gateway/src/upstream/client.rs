//! The MCP client toolgate presents to an upstream: routes the upstream's progress, log
//! messages, elicitation and sampling requests to the toolgate call they belong to, and reports
//! `notifications/tools/list_changed`.
//!
//! One [`ClientSide`] serves one connection, shared by every session; its [`Routed`] transport
//! delivers progress and log messages in order with the results. Progress carries the
//! call's progress token, so it always reaches the right call. Log messages and elicitation or
//! sampling requests carry no call on stdio: they go to the call the transport associates them
//! with (Streamable HTTP), else to the only call in flight; with several calls in flight and no
//! association they are not sent to any caller (a log is traced, a request refused), so that
//! one caller never sees another's traffic.

// MCP revision 2026-07-28 deprecates logging and sampling; the upstreams toolgate fronts speak
// 2025-06-18 and 2025-11-25, where both are part of the protocol.
#![allow(deprecated)]

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};

use rmcp::model::{
    ClientCapabilities, ClientConfig, CreateMessageRequestParams, CreateMessageResult,
    ElicitRequestParams, ElicitResult, Extensions, Implementation, LoggingLevel,
    LoggingMessageNotificationParam, ProgressNotificationParam, ProgressToken, ProtocolVersion,
    RequestId,
};
use rmcp::model::{JsonRpcMessage, JsonRpcNotification, ServerNotification};
use rmcp::service::{
    InboundStreamOrigin, NotificationContext, RequestContext, RxJsonRpcMessage, TxJsonRpcMessage,
};
use rmcp::transport::Transport;
use rmcp::{ClientHandler, ErrorData as McpError, RoleClient};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use toolgate_core::{ElicitAnswer, LogLevel, SamplingRequest, ToolContext};

/// Progress notifications kept for a call whose token is not bound yet (the upstream can
/// answer before the call has registered its token).
const EARLY_PROGRESS: usize = 64;

/// Called when the upstream says its tool list changed.
pub(crate) type ToolsChanged = Arc<dyn Fn() + Send + Sync>;

/// The calls in flight on one connection, by progress token and request id.
pub(crate) struct Routes {
    server: String,
    table: Mutex<Table>,
    tools_changed: ToolsChanged,
}

#[derive(Default)]
struct Table {
    next: u64,
    calls: HashMap<u64, Route>,
    early: VecDeque<ProgressNotificationParam>,
}

struct Route {
    ctx: ToolContext,
    token: Option<ProgressToken>,
    request: Option<RequestId>,
}

impl Routes {
    pub(crate) fn new(server: &str, tools_changed: ToolsChanged) -> Arc<Self> {
        Arc::new(Self {
            server: server.to_owned(),
            table: Mutex::new(Table::default()),
            tools_changed,
        })
    }

    fn table(&self) -> std::sync::MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Registers a call; it stays routable until the guard is dropped.
    pub(crate) fn open(self: &Arc<Self>, ctx: &ToolContext) -> RouteGuard {
        let mut table = self.table();
        table.next += 1;
        let id = table.next;
        table.calls.insert(
            id,
            Route {
                ctx: ctx.clone(),
                token: None,
                request: None,
            },
        );
        RouteGuard {
            routes: Arc::clone(self),
            id,
        }
    }

    /// Reports `notifications/tools/list_changed`.
    pub(crate) fn tools_changed(&self) {
        (self.tools_changed)();
    }

    /// Delivers a progress notification to the call holding its token.
    pub(crate) fn progress(&self, param: ProgressNotificationParam) {
        let ctx = {
            let mut table = self.table();
            let found = table
                .calls
                .values()
                .find(|r| r.token.as_ref() == Some(&param.progress_token))
                .map(|r| r.ctx.clone());
            if found.is_none() {
                if table.early.len() == EARLY_PROGRESS {
                    table.early.pop_front();
                }
                table.early.push_back(param);
                return;
            }
            found
        };
        if let Some(ctx) = ctx {
            ctx.report_progress(param.progress, param.total, param.message.as_deref());
        }
    }

    /// Delivers a log message to the client of the call it belongs to, if that is clear.
    fn log(&self, params: LoggingMessageNotificationParam, extensions: &Extensions) {
        let level = to_level(params.level);
        let server = &self.server;
        match self.target(extensions) {
            Ok(ctx) => match ctx.client("log messages") {
                Ok(client) => client.log(level, params.logger.as_deref(), params.data),
                Err(_) => {
                    tracing::debug!(%server, level = level.as_str(), data = %params.data, "upstream log (the call has no client)");
                }
            },
            Err(why) => {
                tracing::debug!(%server, level = level.as_str(), data = %params.data, %why, "upstream log not relayed");
            }
        }
    }

    /// The call an upstream message belongs to: the one the transport associates it with, else
    /// the only call in flight; `Err` says why none.
    fn target(&self, extensions: &Extensions) -> Result<ToolContext, String> {
        let table = self.table();
        if let Some(InboundStreamOrigin::OutboundRequest(id)) =
            extensions.get::<InboundStreamOrigin>()
            && let Some(route) = table
                .calls
                .values()
                .find(|r| r.request.as_ref() == Some(id))
        {
            return Ok(route.ctx.clone());
        }
        let mut calls = table.calls.values();
        match (calls.next(), calls.next()) {
            (Some(only), None) => Ok(only.ctx.clone()),
            (None, _) => Err(format!(
                "no call to server {} is in flight, so toolgate has no client to ask",
                self.server
            )),
            (Some(_), Some(_)) => Err(format!(
                "{} calls to server {} are in flight and the request names none of them, so toolgate cannot tell whose client to ask",
                table.calls.len(),
                self.server
            )),
        }
    }
}

/// A call's place in [`Routes`]; removes it when dropped.
pub(crate) struct RouteGuard {
    routes: Arc<Routes>,
    id: u64,
}

impl RouteGuard {
    /// The calls of the connection this call belongs to.
    pub(crate) fn routes(&self) -> &Routes {
        &self.routes
    }

    /// Binds the call to the progress token and request id its `tools/call` went out with, and
    /// delivers any progress that arrived first.
    pub(crate) fn bind(&self, token: ProgressToken, request: RequestId) {
        let (ctx, early) = {
            let mut table = self.routes.table();
            // The usual case: no progress came before the request went out.
            let none_early = table.early.is_empty();
            let Some(route) = table.calls.get_mut(&self.id) else {
                return;
            };
            route.request = Some(request);
            if none_early {
                route.token = Some(token);
                return;
            }
            route.token = Some(token.clone());
            let ctx = route.ctx.clone();
            let (mine, rest): (VecDeque<_>, VecDeque<_>) = std::mem::take(&mut table.early)
                .into_iter()
                .partition(|p| p.progress_token == token);
            table.early = rest;
            (ctx, mine)
        };
        for p in early {
            ctx.report_progress(p.progress, p.total, p.message.as_deref());
        }
    }
}

impl Drop for RouteGuard {
    fn drop(&mut self) {
        self.routes.table().calls.remove(&self.id);
    }
}

/// A transport that hands progress and log notifications to their call as they are read, in
/// order with the responses: rmcp runs notification handlers in tasks of their own, so a
/// notification read before a call's result could otherwise reach the caller after it (and be
/// lost, the caller's channel closed with the result).
pub(crate) struct Routed<T> {
    inner: T,
    routes: Arc<Routes>,
}

impl<T: Transport<RoleClient>> Transport<RoleClient> for Routed<T> {
    type Error = T::Error;

    fn name() -> std::borrow::Cow<'static, str> {
        "MCP connection".into()
    }

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.inner.send(item)
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        loop {
            match self.inner.receive().await? {
                JsonRpcMessage::Notification(JsonRpcNotification {
                    notification: ServerNotification::ProgressNotification(n),
                    ..
                }) => self.routes.progress(n.params),
                JsonRpcMessage::Notification(JsonRpcNotification {
                    notification: ServerNotification::LoggingMessageNotification(n),
                    ..
                }) => self.routes.log(n.params, &n.extensions),
                other => return Some(other),
            }
        }
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.inner.close()
    }
}

/// rmcp's client handler for one upstream connection.
#[derive(Clone)]
pub(crate) struct ClientSide {
    routes: Arc<Routes>,
}

impl ClientSide {
    pub(crate) fn new(routes: Arc<Routes>) -> Self {
        Self { routes }
    }

    /// `transport`, with progress and log notifications routed as they are read.
    pub(crate) fn routed<T: Transport<RoleClient>>(&self, transport: T) -> Routed<T> {
        Routed {
            inner: transport,
            routes: Arc::clone(&self.routes),
        }
    }
}

/// An MCP error refusing a relayed request, naming the server and why.
fn refused(server: &str, what: &str, why: &str) -> McpError {
    McpError::invalid_request(
        format!("toolgate cannot relay {what} from server {server}: {why}"),
        None,
    )
}

pub(crate) fn to_level(level: LoggingLevel) -> LogLevel {
    match level {
        LoggingLevel::Debug => LogLevel::Debug,
        LoggingLevel::Info => LogLevel::Info,
        LoggingLevel::Notice => LogLevel::Notice,
        LoggingLevel::Warning => LogLevel::Warning,
        LoggingLevel::Error => LogLevel::Error,
        LoggingLevel::Critical => LogLevel::Critical,
        LoggingLevel::Alert => LogLevel::Alert,
        LoggingLevel::Emergency => LogLevel::Emergency,
    }
}

/// The text of a sampling request as one prompt: a single user message as is, several as
/// `role: text` lines. Only text is relayed (toolgate's client bridge carries text).
fn sampling_prompt(params: &CreateMessageRequestParams) -> Result<String, String> {
    let wire = serde_json::to_value(params).map_err(|e| e.to_string())?;
    let messages = wire["messages"].as_array().cloned().unwrap_or_default();
    let mut parts = Vec::with_capacity(messages.len());
    for message in &messages {
        let role = message["role"].as_str().unwrap_or("user");
        let blocks = match &message["content"] {
            Value::Array(blocks) => blocks.clone(),
            block => vec![block.clone()],
        };
        let mut text = String::new();
        for block in &blocks {
            match (block["type"].as_str(), block["text"].as_str()) {
                (Some("text"), Some(t)) => text.push_str(t),
                (kind, _) => {
                    return Err(format!(
                        "the request holds a {} block and toolgate relays text only",
                        kind.unwrap_or("untyped")
                    ));
                }
            }
        }
        parts.push((role.to_owned(), text));
    }
    match parts.as_slice() {
        [] => Err("the request holds no message".into()),
        [(role, text)] if role == "user" => Ok(text.clone()),
        _ => Ok(parts
            .iter()
            .map(|(role, text)| format!("{role}: {text}"))
            .collect::<Vec<_>>()
            .join("\n\n")),
    }
}

impl ClientHandler for ClientSide {
    fn get_info(&self) -> ClientConfig {
        // One connection serves every session: it declares what some client may answer, and a
        // request the current caller's client cannot answer is refused with an error.
        let mut capabilities = ClientCapabilities::default();
        capabilities.sampling = serde_json::from_value(json!({})).ok();
        capabilities.elicitation = serde_json::from_value(json!({"form": {}})).ok();
        ClientConfig::new(
            capabilities,
            Implementation::new("toolgate", env!("CARGO_PKG_VERSION")),
        )
        .with_protocol_version(ProtocolVersion::V_2025_11_25)
    }

    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.routes.progress(params);
    }

    async fn on_logging_message(
        &self,
        params: LoggingMessageNotificationParam,
        context: NotificationContext<RoleClient>,
    ) {
        self.routes.log(params, &context.extensions);
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        (self.routes.tools_changed)();
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, McpError> {
        elicit(
            &self.routes.server,
            request,
            || self.routes.target(&context.extensions),
            &context.ct,
        )
        .await
    }

    async fn create_message(
        &self,
        params: CreateMessageRequestParams,
        context: RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, McpError> {
        let ctx = self
            .routes
            .target(&context.extensions)
            .map_err(|why| refused(&self.routes.server, "a sampling request", &why))?;
        sample(&self.routes.server, &params, &ctx, &context.ct).await
    }
}

/// Relays an upstream's elicitation request to the client of the call `target` finds (asked
/// only once the request is known to be relayable); `upstream` is cancelled when the upstream
/// withdraws the request.
pub(crate) async fn elicit(
    server: &str,
    request: ElicitRequestParams,
    target: impl FnOnce() -> Result<ToolContext, String>,
    upstream: &CancellationToken,
) -> Result<ElicitResult, McpError> {
    let what = "an elicitation request";
    let wire = serde_json::to_value(&request).map_err(|e| refused(server, what, &e.to_string()))?;
    if wire["mode"].as_str() == Some("url") {
        return Err(refused(
            server,
            what,
            "toolgate relays form elicitations only, not URL ones",
        ));
    }
    let ctx = target().map_err(|why| refused(server, what, &why))?;
    let client = ctx
        .client("elicitation")
        .map_err(|_| refused(server, what, "the call did not come from an MCP client"))?;
    if !client.can_elicit() {
        return Err(refused(
            server,
            what,
            "toolgate's client cannot answer elicitation requests (it did not declare the elicitation capability)",
        ));
    }
    let message = wire["message"].as_str().unwrap_or_default().to_owned();
    let schema = wire["requestedSchema"].clone();
    let answer = tokio::select! {
        answer = client.elicit(message, schema) => answer,
        () = upstream.cancelled() => return Err(refused(server, what, "the upstream cancelled it")),
        () = ctx.cancellation().cancelled() => return Err(refused(server, what, "the call was cancelled")),
    };
    let answer = answer.map_err(|e| refused(server, what, e.message()))?;
    let result = match answer {
        ElicitAnswer::Accept(values) => json!({"action": "accept", "content": values}),
        ElicitAnswer::Decline => json!({"action": "decline"}),
        ElicitAnswer::Cancel => json!({"action": "cancel"}),
    };
    serde_json::from_value(result).map_err(|e| refused(server, what, &e.to_string()))
}

/// Relays an upstream's sampling request to `ctx`'s client; `upstream` is cancelled when the
/// upstream withdraws the request.
pub(crate) async fn sample(
    server: &str,
    params: &CreateMessageRequestParams,
    ctx: &ToolContext,
    upstream: &CancellationToken,
) -> Result<CreateMessageResult, McpError> {
    let what = "a sampling request";
    let client = ctx
        .client("sampling")
        .map_err(|_| refused(server, what, "the call did not come from an MCP client"))?;
    if !client.can_sample() {
        return Err(refused(
            server,
            what,
            "toolgate's client cannot answer sampling requests (it did not declare the sampling capability)",
        ));
    }
    let prompt = sampling_prompt(params).map_err(|why| refused(server, what, &why))?;
    let request = SamplingRequest {
        prompt,
        system_prompt: params.system_prompt.clone(),
        max_tokens: params.max_tokens,
    };
    let reply = tokio::select! {
        reply = client.sample(request) => reply,
        () = upstream.cancelled() => return Err(refused(server, what, "the upstream cancelled it")),
        () = ctx.cancellation().cancelled() => return Err(refused(server, what, "the call was cancelled")),
    };
    let reply = reply.map_err(|e| refused(server, what, e.message()))?;
    let mut result = json!({
        "role": "assistant",
        "content": {"type": "text", "text": reply.text},
        "model": reply.model,
    });
    if let Some(reason) = reply.stop_reason {
        result["stopReason"] = json!(reason);
    }
    serde_json::from_value(result).map_err(|e| refused(server, what, &e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_single_user_message_is_the_prompt_and_several_are_labelled() {
        let one: CreateMessageRequestParams = serde_json::from_value(json!({
            "messages": [{"role": "user", "content": {"type": "text", "text": "Hi"}}],
            "maxTokens": 10
        }))
        .unwrap();
        assert_eq!(sampling_prompt(&one).unwrap(), "Hi");
        let two: CreateMessageRequestParams = serde_json::from_value(json!({
            "messages": [
                {"role": "user", "content": {"type": "text", "text": "Hi"}},
                {"role": "assistant", "content": [{"type": "text", "text": "Hello"}]}
            ],
            "maxTokens": 10
        }))
        .unwrap();
        assert_eq!(
            sampling_prompt(&two).unwrap(),
            "user: Hi\n\nassistant: Hello"
        );
        let image: CreateMessageRequestParams = serde_json::from_value(json!({
            "messages": [{"role": "user", "content": {"type": "image", "data": "AA==", "mimeType": "image/png"}}],
            "maxTokens": 10
        }))
        .unwrap();
        assert!(sampling_prompt(&image).unwrap_err().contains("image block"));
    }
}
