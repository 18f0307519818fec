//! toolgate's gateway: serves the registry's tools through the call pipeline to MCP clients
//! (Streamable HTTP at `/mcp`, or stdio) and to HTTP clients (the REST API under `/v1`), with
//! bearer-token auth, per-principal quotas, an event stream, OpenAPI and Prometheus metrics —
//! and the web Tool Manager at `/`, a client of that REST API.
//! The only crate that knows HTTP and MCP wire types.

mod approvals;
mod auth;
mod envelope;
mod error;
mod events;
mod mcp;
mod mcp_session_owner;
mod mcp_sessions;
mod metrics;
mod openapi;
mod rest;
mod ui;
mod webhook;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::serve::ListenerExt;
use tokio::net::TcpListener;
use tokio_util::task::TaskTracker;
use toolgate_core::{
    CallRequest, CancellationToken, Pipeline, PipelineBuilder, PrincipalQuotaStage, RateLimit,
    RateLimitStage, Registry, ToolResult,
};
use toolgate_store::{AuditObserver, AuditStage, Plan, Store};

pub use approvals::APPROVAL_POLL;
pub use auth::{Auth, Caller, PrincipalEntry, parse_token_hash, token_hash};
pub use error::{ServerError, ServerErrorKind};
pub use events::{EventHub, HubEvent};
pub use mcp::GOVERNANCE_META_KEY;
pub use mcp_sessions::{
    DEFAULT_MAX_AWAKE_IDLE, DEFAULT_MAX_SESSIONS, DEFAULT_MAX_SESSIONS_PER_PRINCIPAL,
    DEFAULT_SESSION_IDLE_TIMEOUT, SLEEP_AFTER, SessionCounts, SessionLimits,
};
pub use metrics::install_prometheus;
pub use openapi::{ROUTES, openapi_document, openapi_document_for};
pub use ui::{CONTENT_SECURITY_POLICY, UI_ROUTES, ui_files};
pub use webhook::{
    DEFAULT_WEBHOOK_FIRST_BACKOFF, DEFAULT_WEBHOOK_MAX_ATTEMPTS, DEFAULT_WEBHOOK_TIMEOUT, Delivery,
    DeliveryStatus, WEBHOOK_EVENT, WEBHOOK_MAX_BACKOFF, Webhook, WebhookConfig, sign, verify,
};

/// Requests larger than this are refused with 413 (REST and MCP alike).
pub const DEFAULT_MAX_BODY_BYTES: usize = 4 * 1024 * 1024;

/// How long in-flight calls may run after a shutdown signal before they are cancelled.
pub const DEFAULT_GRACE: Duration = Duration::from_secs(10);

/// How the gateway is set up.
#[derive(Clone, Debug)]
pub struct GatewayOptions {
    /// The plan for callers without one of their own (and for the local principal).
    pub plan: Plan,
    /// Configured principals; none means one local principal with every permission, which is
    /// allowed only on loopback addresses.
    pub principals: Vec<PrincipalEntry>,
    /// A per-(principal, tool) rate limit for everyone.
    pub rate_limit: Option<RateLimit>,
    /// Extra `Host` values accepted besides loopback names (for a public address).
    pub allowed_hosts: Vec<String>,
    /// Browser origins allowed to call; other `Origin`s get 403. Loopback origins are allowed.
    pub allowed_origins: Vec<String>,
    pub max_body_bytes: usize,
    pub grace: Duration,
    /// How long a call that needs confirmation waits for a decision.
    pub approval_ttl: Duration,
    /// Where every new pending approval is announced (signed), if anywhere.
    pub webhook: Option<Arc<Webhook>>,
    /// Caps on MCP sessions over HTTP and their idle timeout (never unlimited).
    pub sessions: SessionLimits,
}

impl Default for GatewayOptions {
    fn default() -> Self {
        Self {
            plan: Plan::named("enterprise").unwrap_or_else(no_limits),
            principals: Vec::new(),
            rate_limit: None,
            allowed_hosts: Vec::new(),
            allowed_origins: Vec::new(),
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            grace: DEFAULT_GRACE,
            approval_ttl: toolgate_store::DEFAULT_APPROVAL_TTL,
            webhook: None,
            sessions: SessionLimits::default(),
        }
    }
}

/// The enterprise plan's terms (no definition limit, every isolation level).
fn no_limits() -> Plan {
    Plan {
        name: "enterprise".into(),
        max_custom_definitions: None,
        max_isolation: toolgate_core::Isolation::Restricted,
        schema_level: toolgate_core::SchemaLevel::Full,
        builtins: &toolgate_store::ALL_BUILTINS,
    }
}

/// The running gateway: registry, pipeline, store, auth, events. Share it as `Arc<Gateway>`.
pub struct Gateway {
    registry: Arc<Registry>,
    pipeline: Pipeline,
    store: Store,
    auth: Auth,
    hub: EventHub,
    options: GatewayOptions,
    /// Calls in flight (each runs in its own task so a dropped connection cannot cut its audit).
    calls: TaskTracker,
    /// Fires when calls still running after the grace period must stop.
    cancel_calls: CancellationToken,
    /// Fires when long-lived streams (MCP sessions, SSE) must end.
    close_streams: CancellationToken,
    /// `notifications/tools/list_changed` to every MCP session, from one task.
    list_changed: Arc<mcp_sessions::ListChanged>,
    /// The MCP sessions of `/mcp` (made with the router).
    mcp_sessions: std::sync::OnceLock<mcp_sessions::BoundedSessions>,
}

impl std::fmt::Debug for Gateway {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gateway")
            .field("registry", &self.registry)
            .field("auth", &self.auth)
            .finish_non_exhaustive()
    }
}

impl Gateway {
    /// Builds the gateway and its pipeline: per-principal quotas, the rate limit, the audit
    /// stage and observer, and the event hub.
    pub fn new(
        registry: Arc<Registry>,
        store: Store,
        options: GatewayOptions,
    ) -> Result<Arc<Self>, ServerError> {
        Self::with_pipeline(registry, store, options, |b| b)
    }

    /// Like [`Gateway::new`], letting the embedder adjust the pipeline (extra stages, an
    /// executor, an HTTP client) before it is built.
    pub fn with_pipeline(
        registry: Arc<Registry>,
        store: Store,
        options: GatewayOptions,
        customize: impl FnOnce(PipelineBuilder) -> PipelineBuilder,
    ) -> Result<Arc<Self>, ServerError> {
        let auth = Auth::new(&options.principals, &options.plan)?;
        options.sessions.checked()?;
        let hub = EventHub::new();
        let quotas = options
            .principals
            .iter()
            .map(|p| (p.principal.id.as_str().to_owned(), p.quota));
        let mut builder = PipelineBuilder::new(Arc::clone(&registry))
            .stage(Arc::new(PrincipalQuotaStage::new(quotas)));
        if let Some(limit) = options.rate_limit {
            builder = builder.stage(Arc::new(RateLimitStage::new(limit)));
        }
        builder = builder
            .approval(approvals::durable(
                store.clone(),
                options.approval_ttl,
                hub.clone(),
                options.webhook.clone(),
            ))
            .stage(Arc::new(AuditStage::new(store.clone())))
            .observer(Arc::new(AuditObserver::new(store.clone())))
            .observer(Arc::new(hub.clone()));
        let pipeline = customize(builder).build();
        Ok(Arc::new(Self {
            registry,
            pipeline,
            store,
            auth,
            hub,
            options,
            calls: TaskTracker::new(),
            cancel_calls: CancellationToken::new(),
            close_streams: CancellationToken::new(),
            list_changed: Arc::new(mcp_sessions::ListChanged::default()),
            mcp_sessions: std::sync::OnceLock::new(),
        }))
    }

    pub fn registry(&self) -> &Arc<Registry> {
        &self.registry
    }

    pub fn store(&self) -> &Store {
        &self.store
    }

    pub fn events(&self) -> &EventHub {
        &self.hub
    }

    pub fn auth(&self) -> &Auth {
        &self.auth
    }

    pub fn options(&self) -> &GatewayOptions {
        &self.options
    }

    /// Runs one call through the pipeline in its own task. `external` (an MCP cancellation, a
    /// dropped HTTP request) cancels it; so does the end of the shutdown grace period. The
    /// call's audit records are written whatever happens to the caller.
    pub async fn call(
        &self,
        caller: &Caller,
        mut request: CallRequest,
        external: Option<CancellationToken>,
    ) -> ToolResult {
        let token = self.cancel_calls.child_token();
        request.cancel = token.clone();
        request.principal = Arc::clone(&caller.principal);
        let pipeline = self.pipeline.clone();
        // Whoever cancels notes who they are first (the audit log keeps it).
        let note = request.cancelled_by.clone();
        // Cancel the call if this future is dropped (the client went away).
        let guard = CancelOnDrop {
            token: Some(token.clone()),
            note: note.clone(),
        };
        let shutdown = self.cancel_calls.clone();
        let task = self.calls.spawn(async move {
            let call = pipeline.call(request);
            tokio::pin!(call);
            let external = async {
                match &external {
                    Some(external) => external.cancelled().await,
                    None => std::future::pending().await,
                }
            };
            // Biased: a cancellation is noted before the call (polled last) can see it.
            tokio::select! {
                biased;
                () = shutdown.cancelled() => note.set("shutdown"),
                () = external => {
                    note.set("client");
                    token.cancel();
                }
                result = &mut call => return result,
            }
            call.await
        });
        let result = task.await;
        guard.disarm();
        match result {
            Ok(result) => result,
            Err(e) => {
                tracing::error!(error = %e, "a call task failed");
                toolgate_core::ToolResult {
                    tool: String::new(),
                    call_id: toolgate_core::CallId::new(),
                    fetched_at: chrono::Utc::now(),
                    input: serde_json::Value::Null,
                    outcome: toolgate_core::Outcome::Error {
                        kind: toolgate_core::ErrorKind::Execution,
                        message: format!(
                            "The call failed inside toolgate ({e}); please report this"
                        ),
                    },
                    attempts: 0,
                    duration_ms: 0.0,
                    truncated: false,
                    output_ref: None,
                    content: Vec::new(),
                    approval_id: None,
                }
            }
        }
    }

    /// Lets in-flight calls finish for the grace period, cancels the rest, waits until every
    /// call has recorded its outcome, then ends long-lived streams.
    pub async fn drain(&self) {
        self.calls.close();
        if tokio::time::timeout(self.options.grace, self.calls.wait())
            .await
            .is_err()
        {
            tracing::warn!(
                grace_ms = self.options.grace.as_millis() as u64,
                "calls still running after the grace period; cancelling them"
            );
            self.cancel_calls.cancel();
            self.calls.wait().await;
        }
        self.close_streams.cancel();
    }

    /// How many MCP sessions over HTTP are awake (served by a worker) and asleep (reduced to
    /// their record until their next request).
    pub fn mcp_session_counts(&self) -> SessionCounts {
        let mut counts = self
            .mcp_sessions
            .get()
            .map(mcp_sessions::BoundedSessions::counts)
            .unwrap_or_default();
        counts.list_changed = self.list_changed.len();
        counts
    }

    /// Calls in flight right now.
    pub fn calls_in_flight(&self) -> usize {
        self.calls.len()
    }

    /// The full HTTP application: `/mcp`, `/v1/…`, `/openapi.json`, `/healthz`, `/metrics`, and
    /// the web UI at `/` and `/ui/…`.
    pub fn router(self: &Arc<Self>) -> axum::Router {
        rest::router(Arc::clone(self)).merge(mcp::http_router(Arc::clone(self)))
    }

    /// Serves HTTP on `listener` until `shutdown` fires, then drains (see [`Gateway::drain`]).
    pub async fn serve_http(
        self: Arc<Self>,
        listener: TcpListener,
        shutdown: CancellationToken,
    ) -> Result<(), ServerError> {
        let local = listener.local_addr().map_err(|e| {
            ServerError::Internal(format!("Cannot read the listening address: {e}"))
        })?;
        check_binding(local, &self.auth)?;
        self.start_sync().await?;
        let app = self
            .router()
            .into_make_service_with_connect_info::<SocketAddr>();
        // Replies go out in several small writes; without TCP_NODELAY, Nagle's algorithm holds
        // each call's last write for the peer's delayed ACK (~40 ms per call).
        let listener = listener.tap_io(|tcp| {
            if let Err(e) = tcp.set_nodelay(true) {
                tracing::debug!(error = %e, "could not set TCP_NODELAY");
            }
        });
        // On the signal the listener stops accepting and connections close once their current
        // request is answered; long-lived streams (MCP sessions, /v1/events) end when `drain`
        // closes them, after every call has finished or been cancelled.
        let stop_accepting = shutdown.clone();
        let server = axum::serve(listener, app).with_graceful_shutdown(async move {
            stop_accepting.cancelled().await;
        });
        let gateway = Arc::clone(&self);
        let drain = async move {
            shutdown.cancelled().await;
            gateway.drain().await;
        };
        let (served, ()) = tokio::join!(server, drain);
        served.map_err(|e| ServerError::Internal(format!("The HTTP server failed: {e}")))
    }

    /// Serves MCP over stdin/stdout until the client disconnects or `shutdown` fires.
    pub async fn serve_stdio(
        self: Arc<Self>,
        shutdown: CancellationToken,
    ) -> Result<(), ServerError> {
        self.start_sync().await?;
        let result = mcp::serve_stdio(Arc::clone(&self), shutdown.clone()).await;
        self.drain().await;
        result
    }

    /// Loads stored definitions and starts the store followers: one keeps the registry in
    /// step (changes from the CLI or other instances) and feeds definition events to the event
    /// hub, the other ([`Gateway::follow_approvals`]) publishes approval changes made elsewhere;
    /// both stop when streams close. `serve_http` and `serve_stdio` call it.
    pub async fn start_sync(&self) -> Result<i64, ServerError> {
        let last = self.store.load_into(&self.registry).await?;
        let hub = self.hub.clone();
        self.store.keep_in_sync_with(
            Arc::clone(&self.registry),
            last,
            self.close_streams.child_token(),
            move |event| hub.publish_definition(event),
        );
        self.follow_approvals().await?;
        Ok(last)
    }
}

/// Cancels a call whose caller went away (its future dropped), noting
/// `client_disconnected` first; [`CancelOnDrop::disarm`] once the call is done.
struct CancelOnDrop {
    token: Option<CancellationToken>,
    note: toolgate_core::CancelNote,
}

impl CancelOnDrop {
    fn disarm(mut self) {
        self.token = None;
    }
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if let Some(token) = self.token.take() {
            self.note.set("client_disconnected");
            token.cancel();
        }
    }
}

/// Whether an address is loopback (IPv4 127/8, IPv6 ::1, IPv4-mapped loopback).
pub fn is_loopback(addr: &SocketAddr) -> bool {
    match addr.ip() {
        std::net::IpAddr::V4(v4) => v4.is_loopback(),
        std::net::IpAddr::V6(v6) => {
            v6.is_loopback() || v6.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback())
        }
    }
}

/// Refuses to serve beyond loopback without principals (anyone could call every tool).
pub fn check_binding(addr: SocketAddr, auth: &Auth) -> Result<(), ServerError> {
    if !is_loopback(&addr) && !auth.requires_token() {
        return Err(ServerError::Forbidden(format!(
            "Refusing to listen on {addr} without principals: anyone who can reach it could call every tool. Configure [principals.NAME] with token_sha256 in the config file, or listen on 127.0.0.1"
        )));
    }
    Ok(())
}
