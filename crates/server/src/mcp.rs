//! The MCP adapter: rmcp's `ServerHandler` over the gateway. It turns `tools/list` into the MCP
//! export of the tools the caller may see, `tools/call` into a pipeline call, and the pipeline's
//! client needs (progress, logs, sampling, elicitation, confirmation) into MCP messages. No rmcp
//! type leaves this file.

// MCP revision 2026-07-28 deprecates logging and sampling; toolgate also speaks 2025-03-26 to
// 2025-11-25, where both are part of the protocol.
#![allow(deprecated)]

use std::borrow::Cow;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::response::IntoResponse;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CancelTaskParams, ContentBlock,
    CreateMessageRequestParams, ElicitRequestParams, ElicitationAction, ErrorCode, GetTaskParams,
    GetTaskResult, Implementation, InitializeRequestParams, InitializeResult, ListToolsResult,
    LoggingLevel, LoggingMessageNotificationParam, MetaObject, PaginatedRequestParams,
    ProgressNotificationParam, ProgressToken, ProtocolVersion, RequestId, ServerCapabilities,
    ServerConfig, SetLevelRequestParams, SubscriptionFilter, Tool as McpTool, UpdateTaskParams,
};
use rmcp::service::{
    NotificationContext, OriginatingRequestId, Peer, RequestContext, SubscriptionContext,
};
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler, ServiceExt};
use serde_json::{Map, Value, json};
use tokio::sync::mpsc;
use toolgate_core::ErrorChain;
use toolgate_core::{
    ApprovalHandler, ApprovalRequest, BoxFuture, CallRequest, CancellationToken, ClientBridge,
    Decision, ElicitAnswer, LogLevel, Outcome, ProgressSink, Root, SamplingReply, SamplingRequest,
    ToolError, ToolResult,
};
use toolgate_export::{ExportFormat, ExportOptions};

use crate::Gateway;
use crate::auth::Caller;
use crate::error::ServerError;
use crate::mcp_sessions::{BoundedSessions, ListChangedSubscription};

pub use toolgate_export::GOVERNANCE_META_KEY;

/// `_meta` key of a call result carrying the envelope's call id and error kind.
const RESULT_META_KEY: &str = "dev.toolgate/result";

/// Tools per `tools/list` page.
const PAGE: usize = 100;

/// The protocol revisions toolgate implements, oldest first. A client asking for one of the
/// handshake revisions in `initialize` is answered in it; one asking for another gets the newest
/// of them (2025-11-25). 2026-07-28 has no handshake: each request carries its revision,
/// client info and capabilities in `_meta` (`server/discover` lists these).
const PROTOCOL_VERSIONS: [ProtocolVersion; 4] = [
    ProtocolVersion::V_2025_03_26,
    ProtocolVersion::V_2025_06_18,
    ProtocolVersion::V_2025_11_25,
    ProtocolVersion::V_2026_07_28,
];

/// Whether `version` is 2026-07-28 or later: no sessions and no server-initiated requests (so no
/// elicitation or sampling request from toolgate; a confirmation waits as a durable approval),
/// log messages only when the request asks for them in `_meta`, list changes through
/// `subscriptions/listen`.
fn is_2026_07_28(version: Option<&ProtocolVersion>) -> bool {
    version.is_some_and(|v| v.as_str() >= ProtocolVersion::V_2026_07_28.as_str())
}

/// Whether `version` is 2025-03-26 (or older): the revision without structured content, output
/// schemas, titles, `_meta` on tools and content blocks, resource links and elicitation, so an
/// answer to its client leaves them out.
fn is_2025_03_26(version: Option<&ProtocolVersion>) -> bool {
    version.is_some_and(|v| v.as_str() < ProtocolVersion::V_2025_06_18.as_str())
}

/// A tool as 2025-03-26 defines it: name, description, input schema and annotations (whose
/// `title` that revision has).
fn tool_for_2025_03_26(tool: &mut McpTool) {
    tool.title = None;
    tool.output_schema = None;
    tool.icons = None;
    tool.meta = None;
}

/// A call result as 2025-03-26 defines it: no structured content (its JSON is the text block
/// already), resource links as text, no `_meta` or `lastModified` on content blocks. The
/// result's own `_meta` (call id, error kind) is part of that revision and stays.
fn result_for_2025_03_26(result: &mut CallToolResult) {
    result.structured_content = None;
    let plain = |annotations: &mut Option<rmcp::model::Annotations>| {
        if let Some(a) = annotations.as_mut() {
            a.last_modified = None;
        }
    };
    for block in &mut result.content {
        match block {
            ContentBlock::Text(c) => {
                c.meta = None;
                plain(&mut c.annotations);
            }
            ContentBlock::Image(c) => {
                c.meta = None;
                plain(&mut c.annotations);
            }
            ContentBlock::Audio(c) => {
                c.meta = None;
                plain(&mut c.annotations);
            }
            ContentBlock::Resource(c) => {
                c.meta = None;
                plain(&mut c.annotations);
            }
            ContentBlock::ResourceLink(link) => {
                let text = match &link.description {
                    Some(d) => format!("Resource {} ({}): {d}", link.name, link.uri),
                    None => format!("Resource {} ({})", link.name, link.uri),
                };
                *block = ContentBlock::text(text);
            }
            // A kind rmcp adds later is passed on as it is.
            _ => {}
        }
    }
}

/// One MCP session (rmcp makes one handler per session).
#[derive(Clone)]
pub(crate) struct McpHandler {
    gw: Arc<Gateway>,
    session: Arc<Session>,
}

struct Session {
    /// Index into [`LogLevel::ALL`] of the least severe level the client wants.
    min_level: AtomicUsize,
    /// The session's place in the server's `tools/list_changed` notifier (from `initialized`
    /// on; dropped with the session).
    list_changed: std::sync::Mutex<Option<ListChangedSubscription>>,
    /// The caller on stdio, where there are no HTTP headers.
    stdio: Option<Arc<Caller>>,
    /// The session's own run, when its principal has a budget (see `mcp_runs`).
    run: tokio::sync::OnceCell<toolgate_core::RunId>,
}

impl McpHandler {
    pub(crate) fn new(gw: Arc<Gateway>, stdio: Option<Arc<Caller>>) -> Self {
        Self {
            gw,
            session: Arc::new(Session {
                min_level: AtomicUsize::new(level_index(LogLevel::Info)),
                list_changed: std::sync::Mutex::new(None),
                stdio,
                run: tokio::sync::OnceCell::new(),
            }),
        }
    }

    /// The caller of a request: set by the HTTP auth layer, or the stdio principal.
    fn caller(&self, context: &RequestContext<RoleServer>) -> Result<Arc<Caller>, McpError> {
        if let Some(caller) = &self.session.stdio {
            return Ok(Arc::clone(caller));
        }
        context
            .extensions
            .get::<axum::http::request::Parts>()
            .and_then(|parts| parts.extensions.get::<Arc<Caller>>())
            .cloned()
            .ok_or_else(|| {
                McpError::internal_error("request without an authenticated caller", None)
            })
    }

    /// The HTTP session's id (`Mcp-Session-Id` of the request), `None` on stdio.
    fn http_session<'a>(&self, extensions: &'a rmcp::model::Extensions) -> Option<&'a str> {
        extensions
            .get::<axum::http::request::Parts>()
            .and_then(|parts| parts.headers.get("mcp-session-id"))
            .and_then(|v| v.to_str().ok())
    }

    /// Sends `notifications/tools/list_changed` to this session whenever the registry changes,
    /// until the session or the server ends (through the server's one notifier task: no task
    /// per session).
    fn watch_registry(&self, peer: Peer<RoleServer>) {
        let mut subscription = self
            .session
            .list_changed
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if subscription.is_none() {
            *subscription = Some(self.gw.list_changed.subscribe(
                self.gw.registry(),
                &self.gw.close_streams,
                peer,
            ));
        }
    }
}

fn level_index(level: LogLevel) -> usize {
    LogLevel::ALL.iter().position(|l| *l == level).unwrap_or(1)
}

fn to_mcp_level(level: LogLevel) -> LoggingLevel {
    match level {
        LogLevel::Debug => LoggingLevel::Debug,
        LogLevel::Info => LoggingLevel::Info,
        LogLevel::Notice => LoggingLevel::Notice,
        LogLevel::Warning => LoggingLevel::Warning,
        LogLevel::Error => LoggingLevel::Error,
        LogLevel::Critical => LoggingLevel::Critical,
        LogLevel::Alert => LoggingLevel::Alert,
        LogLevel::Emergency => LoggingLevel::Emergency,
    }
}

fn from_mcp_level(level: LoggingLevel) -> LogLevel {
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

/// The not-found answer for unknown tools and tools the caller may not see alike.
fn unknown_tool(name: &str) -> McpError {
    McpError::invalid_params(
        format!("Unknown tool: {name}. Call tools/list to see the tools you can call."),
        Some(json!({ "tool": name })),
    )
}

impl ServerHandler for McpHandler {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .enable_logging()
                // toolgate serves tools, and no prompts: `prompts/list` answers an empty list.
                // Declared because 2026-07-28 clients may only call what discovery declares
                // (a server answering an undeclared method breaks that contract), and caching
                // clients list prompts beside tools.
                .enable_prompts()
                // Calls that wait for an approval become tasks (see `mcp_tasks`).
                .enable_tasks()
                .build(),
        )
        .with_server_info(
            Implementation::new("toolgate", env!("CARGO_PKG_VERSION"))
                .with_title("toolgate — the governed tool layer"),
        )
        .with_instructions(
            "Every tool call runs through toolgate's pipeline: argument validation, permissions, \
             confirmation, timeouts and audit. A failed call returns isError with a message that \
             says how to correct the call.",
        )
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Cow::Owned(PROTOCOL_VERSIONS.to_vec())
    }

    async fn initialize(
        &self,
        request: InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, McpError> {
        context.peer.set_peer_info(request.clone());
        let mut result = self.negotiate_initialize(&request)?;
        // A session of a principal with a budget is a run of its own, from now on.
        if let Ok(caller) = self.caller(&context) {
            Box::pin(crate::mcp_runs::session_run_id(
                &self.gw,
                &caller,
                &self.session.run,
            ))
            .await?;
        }
        // `serverInfo.title` came with 2025-06-18.
        if is_2025_03_26(Some(&result.protocol_version)) {
            result.server_info.title = None;
        }
        Ok(result)
    }

    fn accepted_subscription_filter(
        &self,
        _requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        // Tools are all toolgate lists; rmcp keeps what the client asked for of this.
        Some(SubscriptionFilter::builder().tools_list_changed().build())
    }

    /// `subscriptions/listen` (2026-07-28): `notifications/tools/list_changed` on the request's
    /// stream whenever the registry changes, until the client cancels or the server stops.
    async fn listen(&self, context: SubscriptionContext) -> Result<(), McpError> {
        // An open stream takes a slot under the session caps (on HTTP, where they apply).
        let _slot = match self.gw.mcp_sessions.get() {
            Some(sessions) => {
                let caller = self.caller(context.request_context())?;
                Some(
                    sessions
                        .hold(caller.principal.id.as_str())
                        .map_err(|message| McpError::new(ErrorCode(-32000), message, None))?,
                )
            }
            None => None,
        };
        let mut changes = self.gw.registry().subscribe();
        changes.mark_unchanged();
        let stop = self.gw.close_streams.clone();
        loop {
            tokio::select! {
                () = context.cancelled() => return Ok(()),
                () = stop.cancelled() => return Ok(()),
                changed = changes.changed() => if changed.is_err() { return Ok(()) },
            }
            if context.accepted().tools_list_changed == Some(true)
                && context.sink().notify_tool_list_changed().await.is_err()
            {
                return Ok(());
            }
        }
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, McpError> {
        let caller = self.caller(&context)?;
        Box::pin(crate::mcp_tasks::get(&self.gw, &caller, &request.task_id)).await
    }

    async fn update_task(
        &self,
        request: UpdateTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        let caller = self.caller(&context)?;
        Box::pin(crate::mcp_tasks::update(
            &self.gw,
            &caller,
            &request.task_id,
            request.input_responses,
        ))
        .await
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        let caller = self.caller(&context)?;
        Box::pin(crate::mcp_tasks::cancel(
            &self.gw,
            &caller,
            &request.task_id,
        ))
        .await
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        // A session woken from sleep (see `mcp_sessions`) gets its logging level back.
        if let (Some(id), Some(sessions)) = (
            self.http_session(&context.extensions),
            self.gw.mcp_sessions.get(),
        ) && let Some(level) = sessions.log_level(id)
        {
            self.session.min_level.store(level, Ordering::SeqCst);
        }
        self.watch_registry(context.peer);
    }

    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        let level = level_index(from_mcp_level(request.level));
        self.session.min_level.store(level, Ordering::SeqCst);
        if let (Some(id), Some(sessions)) = (
            self.http_session(&context.extensions),
            self.gw.mcp_sessions.get(),
        ) {
            sessions.remember_log_level(id, level);
        }
        Ok(())
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let caller = self.caller(&context)?;
        let after = match request.and_then(|r| r.cursor) {
            None => None,
            Some(cursor) => Some(
                cursor
                    .strip_prefix("after:")
                    .map(str::to_owned)
                    .ok_or_else(|| {
                        McpError::invalid_params(
                            format!("Invalid cursor {cursor:?}: pass the nextCursor of the previous tools/list page"),
                            None,
                        )
                    })?,
            ),
        };
        let snapshot = self.gw.registry().snapshot();
        let mut tools = Vec::with_capacity(PAGE.min(snapshot.len()));
        let mut more = false;
        for registered in snapshot.iter() {
            let name = registered.spec().name().as_str();
            if after.as_deref().is_some_and(|a| name <= a) || !caller.sees(name) {
                continue;
            }
            if tools.len() == PAGE {
                more = true;
                break;
            }
            tools.push(mcp_tool(registered.spec())?);
        }
        if is_2025_03_26(context.protocol_version().as_ref()) {
            tools.iter_mut().for_each(tool_for_2025_03_26);
        }
        let next_cursor = if more {
            tools.last().map(|t: &McpTool| format!("after:{}", t.name))
        } else {
            None
        };
        let mut result = ListToolsResult::with_all_items(tools);
        result.next_cursor = next_cursor;
        Ok(result)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        // Boxed: the pipeline's future is tens of KiB, and rmcp moves the future of every
        // request several times (into its task, through its dispatch); inline, those copies
        // were about a third of a call's instructions under callgrind (issue 24).
        toolgate_core::box_in_place(|| self.call_tool_inner(request, context)).await
    }
}

impl McpHandler {
    /// `tools/call`, behind [`ServerHandler::call_tool`]'s box.
    async fn call_tool_inner(
        &self,
        mut request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let caller = self.caller(&context)?;
        let request_state = request.request_state.take();
        let input_responses = request.input_responses.take();
        let name = request.name.to_string();
        // A withheld name (an upstream tool in quarantine) goes on to the pipeline, which
        // refuses it `unavailable` naming what changed and how to approve it.
        let known = || {
            self.gw.registry().get(&name).is_some()
                || self
                    .gw
                    .registry()
                    .withheld()
                    .iter()
                    .any(|(n, _)| n.as_str() == name)
        };
        if !caller.sees(&name) || !known() {
            return Err(unknown_tool(&name));
        }
        // Tasks hook (see `mcp_tasks`): a call to a tool that supports tasks, from a client
        // that declared the extension, is answered with a task. One that will wait for an
        // approval waits as the durable one (never elicitation); any other runs in the
        // background (`mcp_task_runs`), asking its client through the task. A tool that asks
        // before its task (`Tool::asks_before_task`) is asked through input-required rounds
        // under 2026-07-28, and becomes a task on the round that answers them all.
        let (wanted, confirms, asks_first) = match self.gw.registry().get(&name) {
            Some(tool) => (
                crate::mcp_tasks::wanted(tool.spec(), &context)?,
                tool.spec().requires_confirmation(),
                tool.handler().is_some_and(|h| h.asks_before_task()),
            ),
            None => (false, false, false),
        };
        let arguments = request.arguments.map_or_else(|| json!({}), Value::Object);
        let peer = context.peer.clone();
        let version = context.protocol_version();
        let old_revision = is_2025_03_26(version.as_ref());
        let stateless = is_2026_07_28(version.as_ref());
        let declared = context.client_capabilities();
        let can = crate::mcp_input::Can {
            elicit: declared.as_ref().is_some_and(|c| c.elicitation.is_some()) && !old_revision,
            sample: declared.as_ref().is_some_and(|c| c.sampling.is_some()),
            list_roots: declared.as_ref().is_some_and(|c| c.roots.is_some()),
        };
        let origin = context.peer.peer_info().map(|info| {
            toolgate_core::CallOrigin::mcp(&info.client_info.name, &info.client_info.version)
        });
        let gathering = wanted && !confirms && asks_first && stateless;
        let as_task = wanted && !gathering;
        if as_task && !confirms {
            let mut call = CallRequest::new(name, arguments);
            if let Some(origin) = origin {
                call = call.origin(origin);
            }
            let asking = crate::mcp_task_runs::Asking {
                can,
                answers: Map::new(),
            };
            let task = crate::mcp_task_runs::start(&self.gw, &caller, call, asking).await?;
            return Ok(CallToolResponse::Task(task));
        }
        let (can_elicit, can_sample, can_list_roots) =
            peer.peer_info().map_or((false, false, false), |info| {
                (
                    // Elicitation came with 2025-06-18: a 2025-03-26 client is never asked. Under
                    // 2026-07-28 the server sends no requests of its own (see `round` below).
                    info.capabilities.elicitation.is_some() && !old_revision && !stateless,
                    info.capabilities.sampling.is_some() && !stateless,
                    info.capabilities.roots.is_some() && !stateless,
                )
            });
        // Under 2026-07-28 a call asks its client through input-required results (see
        // mcp_input): each round runs the tool again with the answers so far, those carried by
        // the requestState of the round before (bound to this principal, tool and arguments)
        // and those the client sends. Only for the kinds of input the request's `_meta` client
        // capabilities declare. A call answered with a task waits as a durable approval
        // instead (see mcp_tasks).
        let round = if stateless && !as_task {
            let carried = match &request_state {
                Some(state) => {
                    let carried = crate::mcp_input::redeem(
                        self.gw.store(),
                        state,
                        caller.principal.id.as_str(),
                        &name,
                        &arguments,
                    )
                    .await
                    .map_err(|e| {
                        McpError::internal_error(
                            format!("reading the requestState from the store failed: {e}"),
                            None,
                        )
                    })?;
                    if carried.is_none() {
                        return Err(McpError::invalid_params(
                            "requestState is not one this server issued for this call: it is unknown, altered, already used, expired (after 10 minutes), or for another call or principal. Call the tool again without requestState and inputResponses.",
                            None,
                        ));
                    }
                    carried
                }
                None => None,
            };
            // A tool that asks before its task, on the round that answers everything the round
            // before asked: from here it runs as a task, with those answers.
            if gathering
                && let Some(answers) = carried
                    .as_ref()
                    .and_then(|c| crate::mcp_input::answered(c, input_responses.as_ref()))
            {
                let weight = Value::Object(answers.clone()).to_string().len();
                if weight > crate::mcp_input::MAX_ANSWERS_BYTES {
                    return Err(too_large(weight));
                }
                let mut call = CallRequest::new(name, arguments);
                if let Some(origin) = origin {
                    call = call.origin(origin);
                }
                let asking = crate::mcp_task_runs::Asking { can, answers };
                let task = crate::mcp_task_runs::start(&self.gw, &caller, call, asking).await?;
                return Ok(CallToolResponse::Task(task));
            }
            let round = crate::mcp_input::Round::new(can, carried, input_responses)
                .map_err(|crate::mcp_input::RoundError::TooLarge(bytes)| too_large(bytes))?;
            Some(Arc::new(round))
        } else {
            None
        };
        // Under 2026-07-28 a request opts in to log messages with `_meta` logLevel; without it
        // it gets none. Before, the session's `logging/setLevel` decides.
        let log_floor = if stateless {
            LogFloor::Request(
                context
                    .meta
                    .log_level()
                    .map(|level| level_index(from_mcp_level(level))),
            )
        } else {
            LogFloor::Session
        };
        let (tx, rx) = mpsc::unbounded_channel();
        let bridge = Arc::new(Bridge {
            peer,
            can_elicit,
            can_sample,
            can_list_roots,
            round: round.clone(),
            outbox: std::sync::Mutex::new(Some(tx)),
            session: Arc::clone(&self.session),
            log_floor,
            progress: context.meta.get_progress_token(),
            request: context.id.clone(),
        });
        // The arguments again only for a round, whose next requestState is bound to them.
        let round_arguments = round.is_some().then(|| arguments.clone());
        let mut call = CallRequest::new(name.clone(), arguments)
            .client(Arc::clone(&bridge) as Arc<dyn ClientBridge>);
        // Where the call came from: the client as it introduced itself in `initialize`.
        if let Some(origin) = origin {
            call = call.origin(origin);
        }
        // A client that can ask its user does; otherwise the call waits as a durable approval
        // (the pipeline's default gate) and the result names it.
        if let Some(round) = round.as_ref().filter(|r| r.can_elicit()) {
            call = call.approval(Arc::new(crate::mcp_input::Confirm(Arc::clone(round))));
        } else if bridge.can_elicit() && !as_task {
            call = call.approval(Arc::new(ElicitApproval {
                bridge: Arc::clone(&bridge),
            }));
        }
        if bridge.progress.is_some() {
            call = call.progress(Arc::clone(&bridge) as Arc<dyn ProgressSink>);
        }
        // The run the call counts against (`_meta`, else the session's own; see mcp_runs).
        let session_run = (!stateless).then_some(&self.session.run);
        if let Some(run) =
            crate::mcp_runs::run_for(&self.gw, &caller, &context.meta, session_run).await?
        {
            // `_meta["toolgate/turn"]: true`: this call starts a new model turn of the run.
            if let Some(why) =
                crate::mcp_runs::count_turn(&self.gw, &caller, &context.meta, run).await?
            {
                let refused = toolgate_core::ToolResult::refused(
                    call.tool.clone(),
                    call.call_id,
                    call.arguments.clone(),
                    toolgate_core::ErrorKind::BudgetExhausted,
                    why,
                );
                return Ok(CallToolResponse::Complete(call_result(refused)));
            }
            call = call.run(run);
        }
        // The call and the forwarder of its progress and log messages run side by side in this
        // task (no task of their own per call); the forwarder ends once the call has closed
        // the bridge and everything queued is sent, so every message reaches the client before
        // the result.
        let calling = async {
            let result = self.gw.call(&caller, call, Some(context.ct.clone())).await;
            bridge.close();
            result
        };
        let (result, ()) = tokio::join!(calling, forward(&context.peer, rx));
        if as_task && let Some(task) = crate::mcp_tasks::created(&self.gw, &result).await? {
            return Ok(CallToolResponse::Task(task));
        }
        // A call that failed on an answer that is not the kind of result its question asks for
        // (a number for a form): the request is invalid.
        if let Some(round) = &round
            && !result.is_ok()
            && let Some(why) = round.malformed()
        {
            return Err(McpError::invalid_params(why, None));
        }
        // A round that asked the client something, and whose call did not get through without
        // it, is answered with the questions and the state of the next round.
        if let Some(round) = &round
            && let Some(arguments) = &round_arguments
            && !result.is_ok()
            && let Some((requests, carried)) = round.next()
        {
            let token = crate::mcp_input::issue(
                self.gw.store(),
                caller.principal.id.as_str(),
                &name,
                arguments,
                &carried,
            )
            .await
            .map_err(|e| {
                McpError::internal_error(format!("storing the requestState failed: {e}"), None)
            })?;
            return Ok(CallToolResponse::InputRequired(
                crate::mcp_input::input_required(requests, token),
            ));
        }
        // A call that failed for want of a kind of input this request did not declare it can
        // give (2026-07-28): the request lacks a client capability the tool needs.
        if let Some(round) = &round
            && !result.is_ok()
            && let Some(capability) = round.missing()
        {
            return Err(missing_capability(&name, capability));
        }
        let mut result = call_result(result);
        if old_revision {
            result_for_2025_03_26(&mut result);
        }
        Ok(CallToolResponse::Complete(result))
    }
}

/// The refusal of a call whose tool needs the client `capability` the request did not declare
/// (`-32021`, with the capability in `requiredCapabilities` as the revision's error shows it).
fn missing_capability(tool: &str, capability: &str) -> McpError {
    McpError::new(
        ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY,
        format!(
            "Tool {tool} needs the client's {capability} capability, which this request's _meta clientCapabilities do not declare; declare it to call this tool"
        ),
        Some(json!({ "requiredCapabilities": { capability: {} } })),
    )
}

/// The refusal of answers heavier than a call's answers may weigh.
fn too_large(bytes: usize) -> McpError {
    McpError::invalid_params(
        format!(
            "inputResponses weigh {bytes} bytes, more than the {} a call's answers may; send only the answers the input-required result asked for",
            crate::mcp_input::MAX_ANSWERS_BYTES
        ),
        None,
    )
}

/// A registry tool as an MCP `Tool` (through the MCP export, so both always agree).
fn mcp_tool(spec: &toolgate_core::ToolSpec) -> Result<McpTool, McpError> {
    let (value, _notes) =
        toolgate_export::export_one(spec, ExportFormat::Mcp, &ExportOptions::default())
            .map_err(|e| McpError::internal_error(e.to_string(), None))?;
    serde_json::from_value(value).map_err(|e| {
        McpError::internal_error(format!("tool {} does not fit MCP: {e}", spec.name()), None)
    })
}

/// The envelope as an MCP call result: data as structured content and as text, attached
/// content blocks, and every failure as `isError` with the envelope's message.
pub(crate) fn call_result(result: ToolResult) -> CallToolResult {
    // Built from rmcp's types directly, moving the result's parts: this runs for every call.
    let mut meta = Map::with_capacity(4);
    meta.insert("callId".into(), json!(result.call_id));
    meta.insert("fetchedAt".into(), json!(result.fetched_at_string()));
    let mut out = match result.outcome {
        Outcome::Data(data) => {
            let mut content = Vec::with_capacity(result.content.len() + 1);
            let structured = match data {
                Value::Null if !result.content.is_empty() => None,
                Value::String(text) => {
                    content.push(ContentBlock::text(text));
                    None
                }
                other => {
                    content.push(ContentBlock::text(other.to_string()));
                    other.is_object().then_some(other)
                }
            };
            for block in &result.content {
                match serde_json::to_value(block).and_then(serde_json::from_value) {
                    Ok(block) => content.push(block),
                    Err(e) => {
                        tracing::error!(error = %e, "a content block did not fit MCP");
                        content.push(ContentBlock::text(format!(
                            "toolgate could not express a content block over MCP: {e}"
                        )));
                    }
                }
            }
            let mut out = CallToolResult::success(content);
            out.structured_content = structured;
            if result.truncated {
                meta.insert("truncated".into(), json!(true));
            }
            if let Some(r) = &result.output_ref {
                meta.insert("outputRef".into(), json!(r));
            }
            out
        }
        Outcome::Error { kind, message } => {
            meta.insert("errorKind".into(), json!(kind));
            if let Some(id) = &result.approval_id {
                meta.insert("approvalId".into(), json!(id));
            }
            CallToolResult::error(vec![ContentBlock::text(message)])
        }
    };
    let mut wrapper = Map::with_capacity(1);
    wrapper.insert(RESULT_META_KEY.into(), Value::Object(meta));
    out.meta = Some(MetaObject(wrapper));
    out
}

/// A message for the client, sent in order by the call's forwarder.
enum Outgoing {
    Progress(ProgressNotificationParam),
    Log(LoggingMessageNotificationParam),
}

async fn forward(peer: &Peer<RoleServer>, mut rx: mpsc::UnboundedReceiver<Outgoing>) {
    while let Some(message) = rx.recv().await {
        let sent = match message {
            Outgoing::Progress(p) => peer.notify_progress(p).await,
            #[allow(deprecated)] // logging stays in the 2025 revisions toolgate speaks
            Outgoing::Log(l) => peer.notify_logging_message(l).await,
        };
        if sent.is_err() {
            return;
        }
    }
}

/// Which log messages a call sends.
enum LogFloor {
    /// The session's level (`logging/setLevel`; info until set): revisions with a handshake.
    Session,
    /// The request's own `_meta` logLevel, none without it (2026-07-28).
    Request(Option<usize>),
}

/// The call's connection to its MCP client.
struct Bridge {
    peer: Peer<RoleServer>,
    can_elicit: bool,
    can_sample: bool,
    can_list_roots: bool,
    /// Under 2026-07-28: the round that answers and records the call's questions instead of
    /// requests to the client.
    round: Option<Arc<crate::mcp_input::Round>>,
    outbox: std::sync::Mutex<Option<mpsc::UnboundedSender<Outgoing>>>,
    session: Arc<Session>,
    log_floor: LogFloor,
    progress: Option<ProgressToken>,
    /// The `tools/call` request this call answers: its elicitation and sampling requests are
    /// marked with it so that they ride that request's SSE stream (SEP-2260) and the client
    /// knows which call asks. rmcp marks them itself only from the request handler's own task,
    /// and a tool may run in another (a sandboxed or detached call, an approved task).
    request: RequestId,
}

impl Bridge {
    /// Sends `request` to the client as part of this call.
    async fn ask(
        &self,
        mut request: rmcp::model::ServerRequest,
    ) -> Result<rmcp::model::ClientResult, rmcp::ServiceError> {
        use rmcp::model::GetExtensions;
        request
            .extensions_mut()
            .insert(OriginatingRequestId(self.request.clone()));
        self.peer.send_request(request).await
    }

    fn send(&self, message: Outgoing) {
        let outbox = self.outbox.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(tx) = outbox.as_ref() {
            let _ = tx.send(message);
        }
    }

    /// No more messages: lets the forwarder finish once it has sent what is queued.
    fn close(&self) {
        self.outbox.lock().unwrap_or_else(|p| p.into_inner()).take();
    }
}

impl ProgressSink for Bridge {
    fn report(&self, progress: f64, total: Option<f64>, message: Option<&str>) {
        let Some(token) = &self.progress else {
            return;
        };
        let mut param = ProgressNotificationParam::new(token.clone(), progress);
        param.total = total;
        param.message = message.map(str::to_owned);
        self.send(Outgoing::Progress(param));
    }
}

impl ClientBridge for Bridge {
    fn log(&self, level: LogLevel, logger: Option<&str>, data: Value) {
        let floor = match self.log_floor {
            LogFloor::Session => self.session.min_level.load(Ordering::SeqCst),
            LogFloor::Request(Some(floor)) => floor,
            LogFloor::Request(None) => return,
        };
        if level_index(level) < floor {
            return;
        }
        let mut param = LoggingMessageNotificationParam::new(to_mcp_level(level), data);
        param.logger = logger.map(str::to_owned);
        self.send(Outgoing::Log(param));
    }

    fn can_elicit(&self) -> bool {
        self.round
            .as_ref()
            .map_or(self.can_elicit, |r| r.can_elicit())
    }

    fn can_sample(&self) -> bool {
        self.round
            .as_ref()
            .map_or(self.can_sample, |r| r.can_sample())
    }

    fn can_list_roots(&self) -> bool {
        self.round
            .as_ref()
            .map_or(self.can_list_roots, |r| r.can_list_roots())
    }

    fn sample(&self, request: SamplingRequest) -> BoxFuture<'_, Result<SamplingReply, ToolError>> {
        match &self.round {
            Some(round) => self.sample_as(&round.auto_key("sampling"), request),
            None => self.sample_as("", request),
        }
    }

    fn elicit(
        &self,
        message: String,
        schema: Value,
    ) -> BoxFuture<'_, Result<ElicitAnswer, ToolError>> {
        match &self.round {
            Some(round) => self.elicit_as(&round.auto_key("elicitation"), message, schema),
            None => self.elicit_as("", message, schema),
        }
    }

    fn list_roots(&self) -> BoxFuture<'_, Result<Vec<Root>, ToolError>> {
        match &self.round {
            Some(round) => self.list_roots_as(&round.auto_key("roots")),
            None => self.list_roots_as(""),
        }
    }

    fn list_roots_as(&self, key: &str) -> BoxFuture<'_, Result<Vec<Root>, ToolError>> {
        if let Some(round) = &self.round {
            return Box::pin(std::future::ready(round.list_roots(key)));
        }
        Box::pin(async move {
            if !self.can_list_roots {
                return Err(ToolError::unavailable(
                    "The MCP client did not declare the roots capability, so it cannot list its roots",
                )
                .permanent());
            }
            let request = rmcp::model::ServerRequest::ListRootsRequest(
                rmcp::model::ListRootsRequest::default(),
            );
            let reply = match self.ask(request).await {
                Ok(rmcp::model::ClientResult::ListRootsResult(reply)) => Ok(reply),
                Ok(_) => Err(rmcp::ServiceError::UnexpectedResponse),
                Err(e) => Err(e),
            };
            let reply = reply.map_err(|e| {
                ToolError::execution(format!(
                    "The MCP client's roots/list request failed: {}",
                    ErrorChain(&e)
                ))
            })?;
            Ok(reply
                .roots
                .into_iter()
                .map(|root| Root {
                    uri: root.uri,
                    name: root.name,
                })
                .collect())
        })
    }

    fn sample_as(
        &self,
        key: &str,
        request: SamplingRequest,
    ) -> BoxFuture<'_, Result<SamplingReply, ToolError>> {
        if let Some(round) = &self.round {
            return Box::pin(std::future::ready(round.sample(key, request)));
        }
        Box::pin(async move {
            if !self.can_sample() {
                return Err(ToolError::unavailable(
                    "The MCP client did not declare the sampling capability, so it cannot answer sampling requests",
                )
                .permanent());
            }
            let mut params = json!({
                "messages": [{ "role": "user", "content": { "type": "text", "text": request.prompt } }],
                "maxTokens": request.max_tokens,
            });
            if let Some(system) = request.system_prompt {
                params["systemPrompt"] = json!(system);
            }
            let params: CreateMessageRequestParams = serde_json::from_value(params)
                .map_err(|e| ToolError::execution(format!("Invalid sampling request: {e}")))?;
            let request = rmcp::model::ServerRequest::CreateMessageRequest(
                rmcp::model::CreateMessageRequest::new(params),
            );
            let reply = match self.ask(request).await {
                Ok(rmcp::model::ClientResult::CreateMessageResult(reply)) => Ok(*reply),
                Ok(_) => Err(rmcp::ServiceError::UnexpectedResponse),
                Err(e) => Err(e),
            };
            let reply = reply.map_err(|e| {
                ToolError::execution(format!(
                    "The MCP client's sampling request failed: {}",
                    ErrorChain(&e)
                ))
            })?;
            let wire = serde_json::to_value(&reply).unwrap_or(Value::Null);
            let text = match &wire["content"] {
                Value::Array(blocks) => blocks
                    .iter()
                    .filter_map(|b| b["text"].as_str())
                    .collect::<Vec<_>>()
                    .join(""),
                block => block["text"].as_str().unwrap_or_default().to_owned(),
            };
            Ok(SamplingReply {
                text,
                model: reply.model,
                stop_reason: reply.stop_reason,
            })
        })
    }

    fn elicit_as(
        &self,
        key: &str,
        message: String,
        schema: Value,
    ) -> BoxFuture<'_, Result<ElicitAnswer, ToolError>> {
        if let Some(round) = &self.round {
            return Box::pin(std::future::ready(round.elicit(key, message, schema)));
        }
        Box::pin(async move {
            if !self.can_elicit() {
                return Err(ToolError::unavailable(
                    "The MCP client did not declare the elicitation capability, so it cannot ask its user",
                )
                .permanent());
            }
            let params: ElicitRequestParams = serde_json::from_value(json!({
                "mode": "form",
                "message": message,
                "requestedSchema": schema,
            }))
            .map_err(|e| {
                ToolError::execution(format!(
                    "The elicitation form is not a valid MCP elicitation schema: {e}"
                ))
            })?;
            let request =
                rmcp::model::ServerRequest::ElicitRequest(rmcp::model::ElicitRequest::new(params));
            let answer = match self.ask(request).await {
                Ok(rmcp::model::ClientResult::ElicitResult(answer)) => Ok(answer),
                Ok(_) => Err(rmcp::ServiceError::UnexpectedResponse),
                Err(e) => Err(e),
            };
            let answer = answer.map_err(|e| {
                ToolError::execution(format!(
                    "The MCP client's elicitation request failed: {}",
                    ErrorChain(&e)
                ))
            })?;
            Ok(match answer.action {
                ElicitationAction::Accept => match answer.content {
                    Some(Value::Object(map)) => ElicitAnswer::Accept(map),
                    _ => ElicitAnswer::Accept(Map::new()),
                },
                ElicitationAction::Decline => ElicitAnswer::Decline,
                _ => ElicitAnswer::Cancel,
            })
        })
    }
}

/// Confirmation through MCP elicitation: the client's user sees the tool, its consequence and
/// the (redacted) arguments, and accepts or declines.
struct ElicitApproval {
    bridge: Arc<Bridge>,
}

impl ApprovalHandler for ElicitApproval {
    fn decide<'a>(&'a self, request: &'a ApprovalRequest<'a>) -> BoxFuture<'a, Decision> {
        Box::pin(async move {
            let message = confirmation_message(request);
            let answer = self.bridge.elicit(message, approval_form()).await;
            elicited_decision(answer)
        })
    }
}

/// What the confirmation form says: the tool, for whom, what it does and the (redacted)
/// arguments.
pub(crate) fn confirmation_message(request: &ApprovalRequest<'_>) -> String {
    let spec = request.spec;
    format!(
        "Allow tool {} to run for {}? It {} ({} consequence). Arguments: {}",
        spec.name(),
        request.principal.id,
        match spec.effect() {
            toolgate_core::Effect::Read => "reads data",
            toolgate_core::Effect::Write => "writes data",
            toolgate_core::Effect::Delete => "deletes data",
            toolgate_core::Effect::SideEffect => "has side effects outside toolgate",
        },
        spec.consequence(),
        request.arguments
    )
}

/// The confirmation form: one required boolean, `approve`, with no default, so that a client
/// which fills in defaults or accepts forms unseen does not approve anything.
pub(crate) fn approval_form() -> Value {
    json!({
        "type": "object",
        "properties": {
            "approve": {
                "type": "boolean",
                "title": "Run this call",
                "description": "Tick to let the call run; leave unticked to refuse it"
            }
        },
        "required": ["approve"]
    })
}

/// What the client's answer to the confirmation form decides. Consent is explicit: only an
/// `accept` whose content has `approve` set to the JSON boolean `true` approves; an accept
/// with no `approve`, with `false` or with anything else (`"true"`, `1`), a decline and a
/// cancel are refusals that say why. A failed request leaves the call unanswered.
pub(crate) fn elicited_decision(answer: Result<ElicitAnswer, ToolError>) -> Decision {
    let denied = |reason: String| Decision::Denied {
        reason: Some(reason),
    };
    match answer {
        Ok(ElicitAnswer::Accept(values)) => match values.get("approve") {
            Some(Value::Bool(true)) => Decision::Approved,
            Some(Value::Bool(false)) => denied(
                "not approved: the confirmation form came back with approve: false".into(),
            ),
            None => denied(
                "not approved: the confirmation form came back without approve: true (the MCP client accepted it with no approve field); only an explicit approve: true runs the call".into(),
            ),
            Some(other) => denied(format!(
                "not approved: the confirmation form came back with approve: {other}, not the boolean true; only an explicit approve: true runs the call"
            )),
        },
        Ok(ElicitAnswer::Decline) => denied("the MCP client's user declined".into()),
        Ok(ElicitAnswer::Cancel) => denied("the MCP client's user dismissed the request".into()),
        Err(e) => Decision::Unanswered {
            hint: format!(
                "asking the MCP client's user failed ({}); retry, or approve the call where a person can confirm it",
                e.message()
            ),
        },
    }
}

/// `/mcp`: Streamable HTTP with sessions (bounded, see `mcp_sessions`), loopback Host/Origin
/// checks and the body limit.
pub(crate) fn http_router(gw: Arc<Gateway>) -> axum::Router {
    let options = gw.options();
    let mut hosts: Vec<String> = vec!["localhost".into(), "127.0.0.1".into(), "::1".into()];
    hosts.extend(options.allowed_hosts.iter().cloned());
    let mut origins: Vec<String> = [
        "http://localhost:*",
        "http://127.0.0.1:*",
        "http://[::1]:*",
        "https://localhost:*",
        "https://127.0.0.1:*",
    ]
    .into_iter()
    .map(str::to_owned)
    .collect();
    origins.extend(options.allowed_origins.iter().cloned());
    let sessions = gw
        .mcp_sessions
        .get_or_init(|| BoundedSessions::new(options.sessions, gw.close_streams.child_token()))
        .clone();
    let mut config = StreamableHttpServerConfig::default()
        .with_allowed_hosts(hosts)
        .with_allowed_origins(origins)
        .with_max_request_body_bytes(options.max_body_bytes)
        .with_cancellation_token(gw.close_streams.child_token());
    // Where a sleeping session's `initialize` is kept to wake it (the session table itself).
    config.session_store = Some(sessions.store());
    let factory_gw = Arc::clone(&gw);
    let service = Arc::new(StreamableHttpService::new(
        move || Ok(McpHandler::new(Arc::clone(&factory_gw), None)),
        Arc::new(sessions.clone()),
        config,
    ));
    // Shared behind an Arc and called through `handle`: axum clones a route's service for every
    // request and rmcp's own `Service::call` clones it again, its config (the host and origin
    // allow-lists) included. Each session answers only the principal that opened it (see
    // mcp_session_owner), and a new one takes a slot under the caps (see mcp_sessions).
    //
    // rmcp's request handling is boxed where it starts: its future is several KiB, and each
    // layer above (the owner check, the admission, axum's handler) would otherwise copy it
    // as it is wrapped and moved.
    let mcp = axum::routing::any(move |request: axum::extract::Request| {
        let service = Arc::clone(&service);
        let sessions = sessions.clone();
        async move {
            let admitting = sessions.clone();
            let deleting = request.method() == axum::http::Method::DELETE;
            let response = crate::mcp_session_owner::serve_owned(
                request,
                |id| sessions.owner_of(id),
                |request| async move {
                    admitting
                        .admit(request, |request| async move {
                            let method = request.method().clone();
                            let response = Box::pin(service.handle(request)).await.into_response();
                            crate::mcp_first_write::hold_priming(&method, response).await
                        })
                        .await
                },
            )
            .await;
            session_ended(deleting, response)
        }
    });
    axum::Router::new()
        .route("/mcp", mcp)
        .layer(axum::middleware::from_fn_with_state(
            gw,
            crate::rest::authenticate,
        ))
}

/// The answer to a `DELETE /mcp` that ended its session: 204 No Content rather than rmcp's 202.
/// The transport spec leaves the status of a granted termination open (only 405, "not
/// allowed", and 404, "no such session", are named); the session is gone when the answer is
/// sent, so 202 ("accepted, not yet done") is the wrong word, and clients read it as a failure
/// (the official Python SDK logs `Session termination failed: 202` on every close; it accepts
/// 200 and 204). Every other answer passes unchanged.
fn session_ended(
    deleting: bool,
    mut response: axum::response::Response,
) -> axum::response::Response {
    if deleting && response.status() == axum::http::StatusCode::ACCEPTED {
        *response.status_mut() = axum::http::StatusCode::NO_CONTENT;
        *response.body_mut() = axum::body::Body::empty();
        response
            .headers_mut()
            .remove(axum::http::header::CONTENT_TYPE);
        response
            .headers_mut()
            .remove(axum::http::header::CONTENT_LENGTH);
    }
    response
}

/// Serves one MCP session on stdin/stdout as the local principal.
pub(crate) async fn serve_stdio(
    gw: Arc<Gateway>,
    shutdown: CancellationToken,
) -> Result<(), ServerError> {
    let caller = Arc::new(Caller::new(
        toolgate_core::Principal::local(),
        gw.plan().clone(),
    ));
    let handler = McpHandler::new(Arc::clone(&gw), Some(caller));
    let running = handler
        .serve_with_ct(rmcp::transport::io::stdio(), shutdown)
        .await
        .map_err(|e| {
            ServerError::Internal(format!(
                "MCP over stdio failed to start: {}",
                ErrorChain(&e)
            ))
        })?;
    running
        .waiting()
        .await
        .map_err(|e| ServerError::Internal(format!("MCP over stdio stopped: {e}")))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn accept(content: Value) -> Result<ElicitAnswer, ToolError> {
        match content {
            Value::Object(map) => Ok(ElicitAnswer::Accept(map)),
            other => panic!("not an object: {other}"),
        }
    }

    fn reason(decision: Decision) -> String {
        match decision {
            Decision::Denied { reason: Some(r) } => r,
            other => panic!("expected a refusal with a reason, got {other:?}"),
        }
    }

    /// One MCP session over an in-memory pipe, driven with raw JSON-RPC lines by a client that
    /// declares elicitation and answers the confirmation form with `accept` and `content`.
    /// Returns the `tools/call` result and how many times the tool ran.
    async fn call_confirmed(content: Value) -> (Value, u64) {
        let (result, runs, asked) = call_confirmed_in("2025-06-18", content).await;
        assert_eq!(asked, 1, "one confirmation form per call");
        (result, runs)
    }

    /// [`call_confirmed`] in revision `version`: also how many confirmation forms came.
    async fn call_confirmed_in(version: &str, content: Value) -> (Value, u64, usize) {
        use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

        let (gw, runs, caller, _dir) = crate::confirmed_write_gateway().await;

        let (server_io, client_io) = tokio::io::duplex(1 << 16);
        let handler = McpHandler::new(Arc::clone(&gw), Some(caller));
        let stop = CancellationToken::new();
        let server_stop = stop.clone();
        let server = tokio::spawn(async move {
            if let Ok(running) = handler
                .serve_with_ct(tokio::io::split(server_io), server_stop)
                .await
            {
                let _ = running.waiting().await;
            }
        });
        let (read, mut write) = tokio::io::split(client_io);
        let mut lines = BufReader::new(read).lines();
        let mut send = async |message: Value| {
            let mut line = message.to_string();
            line.push('\n');
            write.write_all(line.as_bytes()).await.unwrap();
        };
        send(
            json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": version,
                "capabilities": {"elicitation": {}},
                "clientInfo": {"name": "consent-test", "version": "1"}
            }}),
        )
        .await;
        let init: Value = serde_json::from_str(&lines.next_line().await.unwrap().unwrap()).unwrap();
        assert_eq!(init["id"], 1, "{init}");
        assert_eq!(init["result"]["protocolVersion"], version, "{init}");
        send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"})).await;
        send(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "confirmed_write", "arguments": {}}}))
        .await;
        let mut asked = 0;
        let result = loop {
            let line = tokio::time::timeout(std::time::Duration::from_secs(10), lines.next_line())
                .await
                .expect("the server answers within 10 s")
                .unwrap()
                .expect("the server keeps the pipe open");
            let message: Value = serde_json::from_str(&line).unwrap();
            if message["method"] == "elicitation/create" {
                asked += 1;
                let approve = &message["params"]["requestedSchema"]["properties"]["approve"];
                assert!(approve.get("default").is_none(), "{message}");
                send(json!({"jsonrpc": "2.0", "id": message["id"],
                    "result": {"action": "accept", "content": content}}))
                .await;
            } else if message["id"] == 2 {
                break message["result"].clone();
            }
        };
        stop.cancel();
        let _ = server.await;
        (result, runs.load(Ordering::SeqCst), asked)
    }

    #[tokio::test]
    async fn a_2025_03_26_client_is_never_asked_through_elicitation() {
        // That revision has no elicitation: even a client that declares it is not sent
        // elicitation/create; the call waits as a durable approval and the result names it.
        let (result, runs, asked) = call_confirmed_in("2025-03-26", json!({"approve": true})).await;
        assert_eq!((runs, asked), (0, 0), "{result}");
        assert_eq!(result["isError"], true, "{result}");
        let meta = &result["_meta"][RESULT_META_KEY];
        assert_eq!(meta["errorKind"], "confirmation_required", "{result}");
        assert!(meta["approvalId"].is_string(), "{result}");
        assert!(result.get("structuredContent").is_none(), "{result}");
    }

    #[tokio::test]
    async fn over_mcp_only_approve_true_runs_the_call_once() {
        for content in [
            json!({}),
            json!({"approve": false}),
            json!({"approve": "true"}),
        ] {
            let (result, runs) = call_confirmed(content.clone()).await;
            assert_eq!(runs, 0, "accept with {content} ran the tool: {result}");
            assert_eq!(result["isError"], true, "{content}: {result}");
            assert_eq!(
                result["_meta"][RESULT_META_KEY]["errorKind"], "rejected",
                "{content}: {result}"
            );
            let text = result["content"][0]["text"].as_str().unwrap();
            assert!(text.contains("not approved"), "{content}: {text}");
        }
        let (result, runs) = call_confirmed(json!({"approve": true})).await;
        assert_eq!(runs, 1, "{result}");
        assert_eq!(result["isError"], false, "{result}");
        assert_eq!(result["structuredContent"], json!({"written": true}));
    }

    #[test]
    fn the_approval_form_has_no_default_that_approves() {
        let form = approval_form();
        let approve = &form["properties"]["approve"];
        assert_eq!(approve["type"], "boolean");
        assert!(
            approve.get("default").is_none(),
            "the approve field must have no default: {approve}"
        );
        assert_eq!(form["required"], json!(["approve"]));
        // rmcp accepts it as a form schema.
        serde_json::from_value::<ElicitRequestParams>(json!({
            "mode": "form",
            "message": "m",
            "requestedSchema": form,
        }))
        .unwrap();
    }

    #[test]
    fn only_an_explicit_boolean_true_approves() {
        assert!(matches!(
            elicited_decision(accept(json!({"approve": true}))),
            Decision::Approved
        ));
        let empty = reason(elicited_decision(accept(json!({}))));
        assert!(empty.contains("without approve: true"), "{empty}");
        let no = reason(elicited_decision(accept(json!({"approve": false}))));
        assert!(no.contains("approve: false"), "{no}");
        for other in [json!("true"), json!(1), json!(null), json!([true])] {
            let r = reason(elicited_decision(accept(json!({ "approve": other }))));
            assert!(r.contains("not the boolean true"), "{other}: {r}");
        }
        // Other fields do not stand in for approve.
        let r = reason(elicited_decision(accept(json!({"ok": true, "yes": true}))));
        assert!(r.contains("without approve: true"), "{r}");
        assert!(reason(elicited_decision(Ok(ElicitAnswer::Decline))).contains("declined"));
        assert!(reason(elicited_decision(Ok(ElicitAnswer::Cancel))).contains("dismissed"));
        assert!(matches!(
            elicited_decision(Err(ToolError::execution("gone"))),
            Decision::Unanswered { .. }
        ));
    }
}

#[cfg(test)]
#[path = "mcp_forwarding_tests.rs"]
mod forwarding_tests;
