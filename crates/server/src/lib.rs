//! toolgate's gateway: serves the registry's tools through the call pipeline to MCP clients
//! (Streamable HTTP at `/mcp`, or stdio) and to HTTP clients (the REST API under `/v1`), with
//! bearer-token auth, per-principal quotas, an event stream, OpenAPI and Prometheus metrics —
//! and the web Tool Manager at `/`, a client of that REST API.
//! The only crate that knows HTTP and MCP wire types. It is a front-end over a
//! [`toolgate_runtime::Runtime`], which assembles toolgate and runs every call.

#![warn(missing_docs, unreachable_pub)]

mod auth;
mod envelope;
mod error;
mod mcp;
mod mcp_first_write;
mod mcp_input;
mod mcp_runs;
mod mcp_session_owner;
mod mcp_sessions;
mod mcp_task_runs;
mod mcp_tasks;
mod metrics;
mod openapi;
mod rest;
mod ui;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::serve::ListenerExt;
use tokio::net::TcpListener;
use toolgate_core::{CallRequest, CancellationToken, RateLimit, Registry, ToolResult};
use toolgate_runtime::{Config, Parts, Runtime, RuntimeError, RuntimeErrorKind};
use toolgate_store::{Approval, HintFn, RecoveredApprovals, Store, Tier};

pub use auth::{Auth, Caller, PrincipalEntry, TokenHashes, parse_token_hash, token_hash};
pub use error::{ServerError, ServerErrorKind};
pub use mcp::GOVERNANCE_META_KEY;
pub use mcp_sessions::{
    DEFAULT_MAX_AWAKE_IDLE, DEFAULT_MAX_SESSIONS, DEFAULT_MAX_SESSIONS_PER_PRINCIPAL,
    DEFAULT_SESSION_IDLE_TIMEOUT, SLEEP_AFTER, SessionCounts, SessionLimits,
};
pub use metrics::install_prometheus;
pub use openapi::{ROUTES, openapi_document, openapi_document_for};
pub use toolgate_runtime::{
    APPROVAL_POLL, DEFAULT_WEBHOOK_FIRST_BACKOFF, DEFAULT_WEBHOOK_MAX_ATTEMPTS,
    DEFAULT_WEBHOOK_TIMEOUT, Delivery, DeliveryStatus, EventHub, HubEvent, WEBHOOK_EVENT,
    WEBHOOK_MAX_BACKOFF, Webhook, WebhookConfig, sign, verify,
};
pub use ui::{CONTENT_SECURITY_POLICY, UI_ROUTES, ui_files};

/// Requests larger than this are refused with 413 (REST and MCP alike).
pub const DEFAULT_MAX_BODY_BYTES: usize = 4 * 1024 * 1024;

/// How long in-flight calls may run after a shutdown signal before they are cancelled.
pub const DEFAULT_GRACE: Duration = Duration::from_secs(10);

/// How the server is set up: what only a server needs (who may reach it, how principals sign
/// in, how big a request may be, how long calls get at shutdown, MCP sessions). Everything
/// else — principals' grants, plans and quotas, the rate limit, approvals — is the runtime's.
#[derive(Clone, Debug)]
pub struct ServerOptions {
    /// The SHA-256 of each principal's bearer token, by principal id (a principal of the
    /// runtime without one cannot sign in over HTTP).
    pub tokens: TokenHashes,
    /// Extra `Host` values accepted besides loopback names (for a public address).
    pub allowed_hosts: Vec<String>,
    /// Browser origins allowed to call; other `Origin`s get 403. Loopback origins are allowed.
    pub allowed_origins: Vec<String>,
    /// Requests larger than this are refused with 413.
    pub max_body_bytes: usize,
    /// How long in-flight calls may run after a shutdown signal before they are cancelled.
    pub grace: Duration,
    /// Caps on MCP sessions over HTTP and their idle timeout (never unlimited).
    pub sessions: SessionLimits,
}

impl Default for ServerOptions {
    fn default() -> Self {
        Self {
            tokens: Vec::new(),
            allowed_hosts: Vec::new(),
            allowed_origins: Vec::new(),
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            grace: DEFAULT_GRACE,
            sessions: SessionLimits::default(),
        }
    }
}

impl ServerOptions {
    /// The options of the config file: `[server]` and every `[principals.NAME] token_sha256`.
    pub fn from_config(config: &Config) -> Result<Self, ServerError> {
        let mut tokens = Vec::new();
        for (id, p) in &config.principals {
            if let Some(hex) = &p.token_sha256 {
                let hash = parse_token_hash(hex).map_err(|e| {
                    ServerError::BadRequest(format!(
                        "[principals.{id}] {e}; `toolgate token` makes one"
                    ))
                })?;
                tokens.push((id.clone(), hash));
            }
        }
        let server = &config.server;
        Ok(Self {
            tokens,
            allowed_hosts: server.allowed_hosts.clone(),
            allowed_origins: server.allowed_origins.clone(),
            max_body_bytes: server.max_body_bytes.unwrap_or(DEFAULT_MAX_BODY_BYTES),
            grace: DEFAULT_GRACE,
            sessions: session_limits(server)?,
        })
    }
}

/// The MCP session caps and idle timeout of `[server]`; zero is refused (there is no
/// unlimited).
pub fn session_limits(
    server: &toolgate_runtime::ServerConfig,
) -> Result<SessionLimits, ServerError> {
    let defaults = SessionLimits::default();
    SessionLimits {
        max_sessions: server.max_sessions.unwrap_or(defaults.max_sessions),
        max_per_principal: server
            .max_sessions_per_principal
            .unwrap_or(defaults.max_per_principal),
        idle_timeout: server
            .session_idle_timeout_seconds
            .map_or(defaults.idle_timeout, Duration::from_secs),
        max_awake_idle: defaults.max_awake_idle,
    }
    .checked()
}

/// How a pending approval can be decided, as the server tells callers (pass it as the
/// runtime's `approval_hint` when the runtime is opened to serve).
pub fn approval_hint() -> HintFn {
    Arc::new(|a: &Approval| {
        format!(
            "a person can approve it with POST /v1/approvals/{id}/approve (or `toolgate approvals approve {id}`); watch GET /v1/approvals/{id} or the `approval` events of GET /v1/events",
            id = a.id
        )
    })
}

/// Everything a gateway over a registry and store of the caller's own needs, in one value (see
/// [`Gateway::from_parts`]): the runtime's settings and the server's.
#[derive(Clone, Debug)]
pub struct GatewayOptions {
    /// The plan for callers without one of their own (and for the local principal).
    pub plan: Tier,
    /// Configured principals; none means one local principal with every permission, which is
    /// allowed only on loopback addresses.
    pub principals: Vec<PrincipalEntry>,
    /// A per-(principal, tool) rate limit for everyone.
    pub rate_limit: Option<RateLimit>,
    /// Extra `Host` values accepted besides loopback names (for a public address).
    pub allowed_hosts: Vec<String>,
    /// Browser origins allowed to call; other `Origin`s get 403. Loopback origins are allowed.
    pub allowed_origins: Vec<String>,
    /// Requests larger than this are refused with 413.
    pub max_body_bytes: usize,
    /// How long in-flight calls may run after a shutdown signal before they are cancelled.
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
        let server = ServerOptions::default();
        Self {
            plan: Tier::enterprise(),
            principals: Vec::new(),
            rate_limit: None,
            allowed_hosts: server.allowed_hosts,
            allowed_origins: server.allowed_origins,
            max_body_bytes: server.max_body_bytes,
            grace: server.grace,
            approval_ttl: toolgate_store::DEFAULT_APPROVAL_TTL,
            webhook: None,
            sessions: server.sessions,
        }
    }
}

/// The running gateway: the runtime it serves, auth, MCP sessions and long-lived streams.
/// Share it as `Arc<Gateway>`.
pub struct Gateway {
    runtime: Arc<Runtime>,
    auth: Auth,
    options: ServerOptions,
    /// Fires when long-lived streams (MCP sessions, SSE) must end: when the runtime stops.
    close_streams: CancellationToken,
    /// `notifications/tools/list_changed` to every MCP session, from one task.
    list_changed: Arc<mcp_sessions::ListChanged>,
    /// The MCP sessions of `/mcp` (made with the router).
    mcp_sessions: std::sync::OnceLock<mcp_sessions::BoundedSessions>,
    /// MCP tasks of calls running in the background here (`mcp_task_runs`).
    task_runs: mcp_task_runs::TaskRuns,
}

impl std::fmt::Debug for Gateway {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gateway")
            .field("runtime", &self.runtime)
            .field("auth", &self.auth)
            .finish_non_exhaustive()
    }
}

impl Gateway {
    /// A gateway serving `runtime`: bearer tokens are matched against the runtime's
    /// principals (an unknown principal id in `options.tokens` is refused).
    pub fn new(runtime: Arc<Runtime>, options: ServerOptions) -> Result<Arc<Self>, ServerError> {
        let auth = Auth::new(runtime.principals(), &options.tokens)?;
        options.sessions.checked()?;
        Ok(Arc::new(Self {
            close_streams: runtime.stopped(),
            runtime,
            auth,
            options,
            list_changed: Arc::new(mcp_sessions::ListChanged::default()),
            mcp_sessions: std::sync::OnceLock::new(),
            task_runs: mcp_task_runs::TaskRuns::default(),
        }))
    }

    /// A gateway over a registry and store of the caller's own: assembles a runtime from them
    /// ([`Runtime::assemble`], the production pipeline without a sandbox executor or network
    /// policy) and serves it. See [`Gateway::assemble`] to bring those too.
    pub fn from_parts(
        registry: Arc<Registry>,
        store: Store,
        options: GatewayOptions,
    ) -> Result<Arc<Self>, ServerError> {
        Self::assemble(Parts::new(store, registry)?, options)
    }

    /// A gateway over a runtime assembled from `parts` (its HTTP client, executor, file root
    /// and config are kept), with the principals, plan, rate limit and approval settings of
    /// `options` and the server's approval hint.
    pub fn assemble(mut parts: Parts, options: GatewayOptions) -> Result<Arc<Self>, ServerError> {
        let (principals, tokens) = auth::split_entries(options.principals, options.plan)?;
        parts.principals = principals;
        parts.rate_limit = options.rate_limit;
        parts.approval_ttl = options.approval_ttl;
        parts.approval_hint = approval_hint();
        parts.webhook = options.webhook;
        let runtime = Runtime::assemble(parts);
        Self::new(
            runtime,
            ServerOptions {
                tokens,
                allowed_hosts: options.allowed_hosts,
                allowed_origins: options.allowed_origins,
                max_body_bytes: options.max_body_bytes,
                grace: options.grace,
                sessions: options.sessions,
            },
        )
    }

    /// The runtime this gateway serves.
    pub fn runtime(&self) -> &Arc<Runtime> {
        &self.runtime
    }

    /// The runtime's registry: every tool the gateway can list and call.
    pub fn registry(&self) -> &Arc<Registry> {
        self.runtime.registry()
    }

    /// The runtime's store (definitions, approvals, the audit).
    pub fn store(&self) -> &Store {
        self.runtime.store()
    }

    /// The runtime's event hub, which feeds the `/v1/events` stream.
    pub fn events(&self) -> &EventHub {
        self.runtime.events()
    }

    /// The bearer-token resolver that turns a request's token into its principal.
    pub fn auth(&self) -> &Auth {
        &self.auth
    }

    /// The options the gateway was built with: tokens, allowed hosts and origins, body limit,
    /// shutdown grace and session limits.
    pub fn options(&self) -> &ServerOptions {
        &self.options
    }

    /// The plan for callers without one of their own (and for the local principal).
    pub fn plan(&self) -> &Tier {
        self.runtime.plan()
    }

    /// Runs one call as `caller` (see [`Runtime::call`]): `external` (an MCP cancellation, a
    /// dropped HTTP request) cancels it; so does the end of the shutdown grace period.
    pub async fn call(
        &self,
        caller: &Caller,
        mut request: CallRequest,
        external: Option<CancellationToken>,
    ) -> ToolResult {
        request.principal = Arc::clone(&caller.principal);
        self.runtime.call(request, external).await
    }

    /// Lets in-flight calls finish for the grace period, cancels the rest, waits until every
    /// call has recorded its outcome, then ends long-lived streams.
    pub async fn drain(&self) {
        self.runtime.drain(self.options.grace).await;
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
        self.runtime.calls_in_flight()
    }

    /// Publishes an `approval` event (see [`Runtime::publish_approval`]).
    pub fn publish_approval(&self, a: &Approval) {
        self.runtime.publish_approval(a);
    }

    /// Runs approval `id` in a tracked task if it is approved (see [`Runtime::run_approval`]).
    pub fn run_approval(&self, id: String) {
        self.runtime.run_approval(id);
    }

    /// At startup: recovers interrupted and ready approvals (see
    /// [`Runtime::recover_approvals`]).
    pub async fn recover_approvals(&self) -> Result<RecoveredApprovals, ServerError> {
        Ok(self.runtime.recover_approvals().await?)
    }

    /// Announces every pending approval to the webhook (see [`Runtime::announce_pending`]).
    pub async fn announce_pending(&self) -> Result<usize, ServerError> {
        Ok(self.runtime.announce_pending().await?)
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
        tokio::spawn(mcp_tasks::follow_requests(
            Arc::clone(&self),
            shutdown.clone(),
        ));
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
        tokio::spawn(mcp_tasks::follow_requests(
            Arc::clone(&self),
            shutdown.clone(),
        ));
        let result = mcp::serve_stdio(Arc::clone(&self), shutdown.clone()).await;
        self.drain().await;
        result
    }

    /// Loads stored definitions and starts the store followers (see [`Runtime::start_sync`]);
    /// `serve_http` and `serve_stdio` call it.
    pub async fn start_sync(&self) -> Result<i64, ServerError> {
        Ok(self.runtime.start_sync().await?)
    }
}

/// A runtime error as the server reports it.
impl From<RuntimeError> for ServerError {
    fn from(e: RuntimeError) -> Self {
        match e {
            RuntimeError::Store(e) => e.into(),
            e => {
                let message = toolgate_core::ErrorChain(&e).to_string();
                match e.kind() {
                    RuntimeErrorKind::NotFound => Self::NotFound(message),
                    RuntimeErrorKind::Forbidden => Self::Forbidden(message),
                    RuntimeErrorKind::Conflict => Self::Conflict(message),
                    RuntimeErrorKind::Unavailable => Self::Unavailable(message),
                    RuntimeErrorKind::Internal => Self::Internal(message),
                    _ => Self::BadRequest(message),
                }
            }
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

/// A gateway on a fresh SQLite store whose one tool, `confirmed_write`, requires confirmation
/// and counts its runs; the tests of the confirmation paths (elicitation, tasks) share it.
#[cfg(test)]
pub(crate) async fn confirmed_write_gateway() -> (
    Arc<Gateway>,
    Arc<std::sync::atomic::AtomicU64>,
    Arc<auth::Caller>,
    tempfile::TempDir,
) {
    use std::sync::atomic::{AtomicU64, Ordering};
    let dir = tempfile::tempdir().unwrap();
    let store = toolgate_store::Store::open(
        &toolgate_store::DbUrl::Sqlite(dir.path().join("t.db")),
        &toolgate_store::StoreOptions::default(),
    )
    .await
    .unwrap();
    let runs = Arc::new(AtomicU64::new(0));
    let counter = Arc::clone(&runs);
    let tool = toolgate_core::ToolBuilder::new("confirmed_write", "Counts its runs; for tests.")
        .effect(toolgate_core::Effect::Write)
        .requires_confirmation(true)
        .handler(move |_, _| {
            counter.fetch_add(1, Ordering::SeqCst);
            async { Ok(serde_json::json!({ "written": true })) }
        });
    let registry = Arc::new(toolgate_core::Registry::new());
    registry.register_all(vec![Arc::new(tool)], false).unwrap();
    let gw = Gateway::from_parts(registry, store, GatewayOptions::default()).unwrap();
    let caller = Arc::new(auth::Caller::new(
        toolgate_core::Principal::local(),
        gw.plan().clone(),
    ));
    (gw, runs, caller, dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server(text: &str) -> toolgate_runtime::ServerConfig {
        let path = std::env::temp_dir().join(format!(
            "toolgate-server-config-{}-{}.toml",
            std::process::id(),
            text.len()
        ));
        std::fs::write(&path, text).unwrap();
        let config = Config::load(&path).unwrap();
        let _ = std::fs::remove_file(&path);
        config.server
    }

    #[test]
    fn mcp_session_limits_have_bounded_defaults_and_zero_is_refused() {
        let defaults = session_limits(&server("")).unwrap();
        assert_eq!(
            (
                defaults.max_sessions,
                defaults.max_per_principal,
                defaults.idle_timeout.as_secs()
            ),
            (1000, 100, 1800)
        );
        let set = session_limits(&server(
            "[server]\nmax_sessions = 50\nmax_sessions_per_principal = 5\nsession_idle_timeout_seconds = 90\n",
        ))
        .unwrap();
        assert_eq!(
            (
                set.max_sessions,
                set.max_per_principal,
                set.idle_timeout.as_secs()
            ),
            (50, 5, 90)
        );
        for key in [
            "max_sessions",
            "max_sessions_per_principal",
            "session_idle_timeout_seconds",
        ] {
            let err = session_limits(&server(&format!("[server]\n{key} = 0\n")))
                .unwrap_err()
                .to_string();
            assert!(err.contains(key) && err.contains("at least 1"), "{err}");
        }
    }

    /// `toolgate serve`'s path: a runtime opened from a config, the server's options read from
    /// the same config; a bearer token names the runtime's principal.
    #[tokio::test]
    async fn a_gateway_over_an_opened_runtime_signs_principals_in_by_token() {
        let dir = tempfile::tempdir().unwrap();
        let hex: String = token_hash("alice-token")
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        let path = dir.path().join("toolgate.toml");
        std::fs::write(
            &path,
            format!(
                "[principals.alice]\ngrants = [\"tool.*\"]\ntoken_sha256 = \"{hex}\"\n[principals.bob]\ngrants = []\n"
            ),
        )
        .unwrap();
        let runtime = Runtime::open(toolgate_runtime::RuntimeOptions {
            config: toolgate_runtime::ConfigSource::File(path),
            db: Some(toolgate_store::DbUrl::Sqlite(dir.path().join("t.db"))),
            root: Some(dir.path().to_path_buf()),
            ..Default::default()
        })
        .await
        .unwrap();
        let options = ServerOptions::from_config(runtime.config()).unwrap();
        assert_eq!(options.tokens.len(), 1, "bob has no token");
        let gw = Gateway::new(Arc::clone(&runtime), options).unwrap();
        assert!(gw.auth().requires_token());
        let mut headers = axum::http::HeaderMap::new();
        headers.insert("authorization", "Bearer alice-token".parse().unwrap());
        let caller = gw.auth().caller(&headers).unwrap();
        assert_eq!(caller.principal.id.as_str(), "alice");
        headers.insert("authorization", "Bearer nobody".parse().unwrap());
        assert!(gw.auth().caller(&headers).is_err());
        runtime.store().close().await;
    }
}
