//! [`Upstream`]: one shared connection to an upstream server and its lifecycle — started on first
//! use (or by [`Upstream::start`] for `eager` entries), restarted on the next use after it dies
//! (with backoff when starts keep failing), stopped after its idle timeout, and never outliving
//! its handle: stopping or dropping the last [`Upstream`] kills the process.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError, Weak};
use std::time::Duration;

use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CancelledNotificationParam, ClientRequest, RequestId,
    ServerResult,
};
use rmcp::service::{ClientInitializeError, PeerRequestOptions, RunningService};
use rmcp::transport::Transport;
use rmcp::{Peer, RoleClient, ServiceError, ServiceExt};
use serde_json::Value;
use tokio::sync::broadcast;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use toolgate_core::{BoxFuture, Isolation, ToolContext, ToolError, ToolOutput, error_chain};

use super::client::{ClientSide, Routes};
use super::forward;
use super::lane::{Lane, LaneOutcome};
use super::stdio_lane::{self, StdioLane};
use super::{ServerState, StdioHandle, StdioLaunch, StdioProcess, StdioSpawner};
use crate::{GatewayError, ServerEntry, ServerName, UpstreamTool};

/// How long a server has to start and answer `initialize` and `tools/list`.
const START_TIMEOUT: Duration = Duration::from_secs(60);
/// How long `tools/list` may take on a running server.
const LIST_TIMEOUT: Duration = Duration::from_secs(30);
/// The first wait after repeated failures; doubled after each failure up to [`BACKOFF_MAX`].
const BACKOFF_FIRST: Duration = Duration::from_millis(500);
/// The longest wait between two starts.
const BACKOFF_MAX: Duration = Duration::from_secs(30);
/// How long a stopped process has to exit after it was killed, and a closed transport to say
/// why (the process's exit status).
const REAP_TIMEOUT: Duration = Duration::from_secs(5);
/// The idle timeout of a stdio server whose entry sets none.
const DEFAULT_IDLE_SECS: u64 = 600;

type Service = RunningService<RoleClient, ClientSide>;

/// What an [`Upstream`] reports to its subscribers.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum UpstreamEvent {
    /// The upstream's tool list may have changed (`notifications/tools/list_changed`, or a
    /// restart that listed different tools): call [`Upstream::tools`] again.
    ToolsChanged,
    /// The server's state changed.
    State(ServerState),
}

/// Where a Streamable HTTP upstream is, as an [`HttpConnector`] receives it.
#[derive(Clone, Debug)]
pub struct HttpTarget {
    /// The server's name, for messages.
    pub label: String,
    /// The server's MCP endpoint.
    pub url: String,
    /// The only headers to send (the entry's, `${env:…}` expanded). Nothing of toolgate's own
    /// caller — no token, no header — is ever added.
    pub headers: BTreeMap<String, String>,
}

/// A connection and its fast lane, if the transport offers one.
type Opened = (Service, Option<Arc<dyn Lane>>);

type OpenHttp =
    dyn Fn(ClientSide, HttpTarget) -> BoxFuture<'static, Result<Opened, String>> + Send + Sync;

/// Opens Streamable HTTP connections through a transport factory of the embedder's choosing
/// (toolgate's network-policy client in production).
#[derive(Clone)]
pub struct HttpConnector {
    open: Arc<OpenHttp>,
}

impl HttpConnector {
    /// A connector whose connections run over the transport `connect` makes for each target
    /// (typically rmcp's `StreamableHttpClientTransport` over a policy-checked client, with
    /// `reinit_on_expired_session` so that a session the server expired is re-initialised).
    /// The transport sends `target.headers` and MCP's own, nothing else; an `Err` is shown as
    /// is (name the server in it).
    pub fn new<F, Fut, T>(connect: F) -> Self
    where
        F: Fn(HttpTarget) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<T, GatewayError>> + Send + 'static,
        T: Transport<RoleClient> + 'static,
    {
        Self::with_lane(move |target| {
            let transport = connect(target);
            async move { Ok((transport.await?, None)) }
        })
    }

    /// [`new`](Self::new) for transports that come with a fast lane for `tools/call`.
    pub(crate) fn with_lane<F, Fut, T>(connect: F) -> Self
    where
        F: Fn(HttpTarget) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<(T, Option<Arc<dyn Lane>>), GatewayError>> + Send + 'static,
        T: Transport<RoleClient> + 'static,
    {
        Self {
            open: Arc::new(move |side, target| {
                let label = target.label.clone();
                let url = target.url.clone();
                let transport = connect(target);
                Box::pin(async move {
                    let (transport, lane) = transport.await.map_err(|e| e.to_string())?;
                    let transport = side.routed(transport);
                    let service = side.serve(transport).await.map_err(|e| {
                        format!(
                            "Server {label} could not complete the MCP handshake at {url}: {}",
                            init_error(&e)
                        )
                    })?;
                    Ok((service, lane))
                })
            }),
        }
    }
}

impl std::fmt::Debug for HttpConnector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpConnector").finish_non_exhaustive()
    }
}

/// How upstreams are reached: stdio servers through a spawner (the sandbox in production),
/// Streamable HTTP ones through an [`HttpConnector`] (none: such entries are unavailable).
#[derive(Clone)]
pub struct Connector {
    /// Starts stdio servers.
    pub stdio: Arc<dyn StdioSpawner>,
    /// Opens Streamable HTTP connections, if this build can.
    pub http: Option<HttpConnector>,
}

impl std::fmt::Debug for Connector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connector")
            .field("http", &self.http.is_some())
            .finish_non_exhaustive()
    }
}

/// One upstream server: a handle to its single connection, shared by every session (clones
/// share it). Dropping the last clone kills the server's process.
#[derive(Clone)]
pub struct Upstream {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Upstream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Upstream")
            .field("name", &self.inner.name)
            .field("state", &self.state())
            .finish_non_exhaustive()
    }
}

struct Inner {
    name: ServerName,
    entry: ServerEntry,
    connector: Connector,
    slot: Mutex<Slot>,
    /// Held while starting or stopping, so that one start serves every waiting caller.
    start_lock: tokio::sync::Mutex<()>,
    events: broadcast::Sender<UpstreamEvent>,
    generation: AtomicU64,
    /// Failed starts and deaths since the last answered request.
    failures: AtomicU32,
    /// The tools the last listing gave, to tell whether a restart changed them.
    last_tools: Mutex<Option<Vec<UpstreamTool>>>,
}

enum Slot {
    Stopped,
    Starting,
    Ready(Arc<Connection>),
    Failed {
        error: String,
        stderr_tail: String,
        retry_at: Instant,
    },
}

impl Slot {
    fn state(&self) -> ServerState {
        match self {
            Self::Stopped => ServerState::Stopped,
            Self::Starting => ServerState::Starting,
            Self::Ready(_) => ServerState::Ready,
            Self::Failed {
                error, stderr_tail, ..
            } => ServerState::Failed {
                error: error.clone(),
                stderr_tail: stderr_tail.clone(),
            },
        }
    }
}

/// One live connection.
struct Connection {
    generation: u64,
    peer: Peer<RoleClient>,
    routes: Arc<Routes>,
    /// The fast lane for `tools/call`, when the transport offers one.
    lane: Option<Arc<dyn Lane>>,
    process: Option<Box<dyn StdioHandle>>,
    /// Asks the watcher to close the connection.
    stop: CancellationToken,
    /// Fires once the connection is over (after `end_reason` is set).
    ended: CancellationToken,
    end_reason: OnceLock<String>,
    tools: Mutex<Option<Vec<UpstreamTool>>>,
    busy: AtomicUsize,
    last_used: Mutex<Instant>,
}

impl Connection {
    fn stderr_tail(&self) -> String {
        self.process
            .as_ref()
            .map(|p| p.stderr_tail())
            .unwrap_or_default()
    }

    fn last_used(&self) -> Instant {
        *self
            .last_used
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn touch(&self) {
        *self
            .last_used
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Instant::now();
    }

    fn busy(self: &Arc<Self>) -> Busy {
        self.busy.fetch_add(1, Ordering::SeqCst);
        self.touch();
        Busy(Arc::clone(self))
    }

    fn cached_tools(&self) -> Option<Vec<UpstreamTool>> {
        self.tools
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn set_tools(&self, tools: Option<Vec<UpstreamTool>>) {
        *self.tools.lock().unwrap_or_else(PoisonError::into_inner) = tools;
    }

    /// Ends the connection now: the watcher closes it and reaps the process.
    fn shut(&self, reason: String) {
        let _ = self.end_reason.set(reason);
        self.stop.cancel();
        if let Some(p) = &self.process {
            p.kill();
        }
    }
}

/// A request in progress on a connection (keeps the idle timer from firing).
struct Busy(Arc<Connection>);

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.touch();
        self.0.busy.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Puts a start whose caller gave up half-way (the future was dropped) back to `Stopped`; the
/// half-started process dies with its dropped handle.
struct Unfinished<'a>(Option<&'a Inner>);

impl Drop for Unfinished<'_> {
    fn drop(&mut self) {
        if let Some(inner) = self.0 {
            inner.set(Slot::Stopped);
        }
    }
}

/// Sends `notifications/cancelled` for a request still outstanding when the call is dropped
/// or cancelled (the pipeline drops a handler on cancellation and timeout).
struct CancelOnDrop {
    peer: Peer<RoleClient>,
    id: Option<RequestId>,
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        let Some(id) = self.id.take() else {
            return;
        };
        let peer = self.peer.clone();
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                let param = CancelledNotificationParam::new(
                    Some(id),
                    Some("toolgate's caller cancelled the call, or it timed out".to_owned()),
                );
                let _ = tokio::time::timeout(REAP_TIMEOUT, peer.notify_cancelled(param)).await;
            });
        }
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        let slot = self.slot.get_mut().unwrap_or_else(PoisonError::into_inner);
        if let Slot::Ready(conn) = slot {
            conn.shut("its server entry was removed".to_owned());
        }
    }
}

impl Inner {
    fn set(&self, slot: Slot) -> Slot {
        let state = slot.state();
        let old = std::mem::replace(
            &mut *self.slot.lock().unwrap_or_else(PoisonError::into_inner),
            slot,
        );
        if old.state() != state {
            let _ = self.events.send(UpstreamEvent::State(state));
        }
        old
    }

    /// The upstream said its tools changed.
    fn tools_changed(&self, generation: u64) {
        if let Slot::Ready(conn) = &*self.slot.lock().unwrap_or_else(PoisonError::into_inner)
            && conn.generation == generation
        {
            conn.set_tools(None);
        }
        let _ = self.events.send(UpstreamEvent::ToolsChanged);
    }

    /// Records a listing; whether it differs from the one before (not counting the first).
    fn note_tools(&self, tools: &[UpstreamTool]) -> bool {
        let mut last = self
            .last_tools
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let changed = last.as_deref().is_some_and(|old| old != tools);
        *last = Some(tools.to_vec());
        changed
    }

    /// A connection ended by itself (died, closed or idle): the state says so.
    fn ended(&self, generation: u64, died: bool, reason: &str, stderr_tail: String) {
        let mut slot = self.slot.lock().unwrap_or_else(PoisonError::into_inner);
        if !matches!(&*slot, Slot::Ready(c) if c.generation == generation) {
            return;
        }
        let next = if died {
            let failures = self.failures.fetch_add(1, Ordering::SeqCst) + 1;
            Slot::Failed {
                error: format!(
                    "Server {} {reason}; it is restarted on the next use",
                    self.name
                ),
                stderr_tail,
                retry_at: Instant::now() + backoff(failures),
            }
        } else {
            Slot::Stopped
        };
        let state = next.state();
        *slot = next;
        drop(slot);
        let _ = self.events.send(UpstreamEvent::State(state));
    }
}

/// The wait before the next start after `failures` consecutive failures: none after the first
/// (a server that ran and died is restarted at once), then 0.5 s doubling up to 30 s.
fn backoff(failures: u32) -> Duration {
    match failures {
        0 | 1 => Duration::ZERO,
        n => BACKOFF_FIRST
            .saturating_mul(1 << (n - 2).min(16))
            .min(BACKOFF_MAX),
    }
}

/// ` Its stderr ends with: …` when there is a tail.
fn tail_note(tail: &str) -> String {
    let tail = tail.trim();
    if tail.is_empty() {
        String::new()
    } else {
        format!(". Its stderr ends with:\n{tail}")
    }
}

fn tool_error(e: GatewayError) -> ToolError {
    match e {
        GatewayError::Invalid(m) => ToolError::unavailable(m).permanent(),
        other => ToolError::unavailable(other.to_string()),
    }
}

impl Upstream {
    /// A handle for the server `name` declared by `entry` (with `${env:…}` already expanded).
    /// Nothing starts until the first use or [`Upstream::start`].
    pub fn new(name: ServerName, entry: ServerEntry, connector: Connector) -> Self {
        let (events, _) = broadcast::channel(64);
        Self {
            inner: Arc::new(Inner {
                name,
                entry,
                connector,
                slot: Mutex::new(Slot::Stopped),
                start_lock: tokio::sync::Mutex::new(()),
                events,
                generation: AtomicU64::new(0),
                failures: AtomicU32::new(0),
                last_tools: Mutex::new(None),
            }),
        }
    }

    /// The server's name.
    pub fn name(&self) -> &ServerName {
        &self.inner.name
    }

    /// The entry the server was declared with.
    pub fn entry(&self) -> &ServerEntry {
        &self.inner.entry
    }

    /// Where the server is in its lifecycle.
    pub fn state(&self) -> ServerState {
        self.inner
            .slot
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .state()
    }

    /// State changes and tool-list changes from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<UpstreamEvent> {
        self.inner.events.subscribe()
    }

    /// Starts the server now if it is not running (an `eager` entry at boot, or an operator),
    /// without waiting out a backoff.
    pub async fn start(&self) -> Result<(), GatewayError> {
        self.connection(true).await.map(|_| ())
    }

    /// Stops the server (calls in flight get `unavailable`), then starts it again.
    pub async fn restart(&self) -> Result<(), GatewayError> {
        self.stop().await;
        self.start().await
    }

    /// Stops the server: its process is killed and reaped before this returns. The next use
    /// starts it again.
    pub async fn stop(&self) {
        let _starting = self.inner.start_lock.lock().await;
        self.inner.failures.store(0, Ordering::SeqCst);
        if let Slot::Ready(conn) = self.inner.set(Slot::Stopped) {
            conn.shut("it was stopped".to_owned());
            let _ = tokio::time::timeout(REAP_TIMEOUT * 2, conn.ended.cancelled()).await;
        }
    }

    /// The upstream's tools, starting it if needed (listed once per connection, again after
    /// `notifications/tools/list_changed`).
    pub async fn tools(&self) -> Result<Vec<UpstreamTool>, GatewayError> {
        let conn = self.connection(false).await?;
        if let Some(tools) = conn.cached_tools() {
            return Ok(tools);
        }
        let _busy = conn.busy();
        let tools = tokio::select! {
            tools = list(&self.inner.name, &conn.peer) => tools?,
            () = conn.ended.cancelled() => {
                return Err(GatewayError::Unavailable(self.lost(&conn, "tools/list").await.message().to_owned()));
            }
        };
        self.inner.failures.store(0, Ordering::SeqCst);
        conn.set_tools(Some(tools.clone()));
        self.inner.note_tools(&tools);
        Ok(tools)
    }

    /// Calls the upstream's tool `tool` (its own name) with `args`, starting the server if
    /// needed. Progress and log messages reach `ctx`'s caller, content blocks are attached to
    /// `ctx`, `structuredContent` is the output; cancelling `ctx` (or dropping this future)
    /// sends `notifications/cancelled` upstream. Nothing of `ctx.auth()` goes upstream.
    pub async fn call(&self, tool: &str, args: Value, ctx: &ToolContext) -> ToolOutput {
        ctx.check_cancelled()?;
        let name = self.inner.name.as_str();
        let arguments = match args {
            Value::Object(map) => Some(map),
            Value::Null => None,
            other => {
                return Err(ToolError::validation(format!(
                    "Tool {tool} of server {name} takes an object of arguments, not {other}"
                )));
            }
        };
        let conn = match self.live() {
            Some(conn) => conn,
            // Boxed: starting the server is a large future awaited once per connection; inline
            // it would be part of (and copied with) every call's future.
            None => tokio::select! {
                conn = Box::pin(self.connection(false)) => conn.map_err(tool_error)?,
                () = ctx.cancellation().cancelled() => return Err(ToolError::cancelled()),
            },
        };
        let _busy = conn.busy();
        let route = conn.routes.open(ctx);
        if let Some(lane) = &conn.lane {
            let outcome = tokio::select! {
                biased;
                outcome = lane.call(tool, arguments.as_ref(), &route, ctx) => outcome,
                // Dropping the lane's future tells the upstream.
                () = ctx.cancellation().cancelled() => return Err(ToolError::cancelled()),
                () = conn.ended.cancelled() => LaneOutcome::Lost,
            };
            match outcome {
                LaneOutcome::Done(result) => {
                    self.inner.failures.store(0, Ordering::SeqCst);
                    return forward::output(name, tool, result, ctx);
                }
                LaneOutcome::Refused(e) => {
                    return Err(forward::call_error(name, tool, &ServiceError::McpError(e)));
                }
                LaneOutcome::Lost => {
                    return Err(self.lost(&conn, &format!("the call to {tool}")).await);
                }
                LaneOutcome::Fallback => {}
            }
        }
        let mut params = CallToolRequestParams::new(tool.to_owned());
        params.arguments = arguments;
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
        let Ok(handle) = conn
            .peer
            .send_request_with_option(request, PeerRequestOptions::no_options())
            .await
        else {
            return Err(self.lost(&conn, &format!("the call to {tool}")).await);
        };
        route.bind(handle.progress_token.clone(), handle.id.clone());
        let mut cancel = CancelOnDrop {
            peer: conn.peer.clone(),
            id: Some(handle.id.clone()),
        };
        let response = tokio::select! {
            biased;
            response = handle.await_response() => response,
            // `cancel` tells the upstream as it drops.
            () = ctx.cancellation().cancelled() => return Err(ToolError::cancelled()),
            () = conn.ended.cancelled() => {
                cancel.id = None;
                return Err(self.lost(&conn, &format!("the call to {tool}")).await);
            }
        };
        cancel.id = None;
        match response {
            Ok(ServerResult::CallToolResult(result)) => {
                self.inner.failures.store(0, Ordering::SeqCst);
                forward::output(name, tool, result, ctx)
            }
            Ok(_) => Err(ToolError::execution(format!(
                "Server {name} answered the call to {tool} with something other than a tool result"
            ))),
            Err(ServiceError::TransportClosed) => {
                Err(self.lost(&conn, &format!("the call to {tool}")).await)
            }
            Err(e) => Err(forward::call_error(name, tool, &e)),
        }
    }

    /// The error for a request cut off by the end of its connection, naming why and the
    /// server's last stderr lines.
    async fn lost(&self, conn: &Connection, what: &str) -> ToolError {
        let _ = tokio::time::timeout(REAP_TIMEOUT, conn.ended.cancelled()).await;
        let reason = conn
            .end_reason
            .get()
            .cloned()
            .unwrap_or_else(|| "its connection closed".to_owned());
        ToolError::unavailable(format!(
            "Server {} is unavailable: {reason} during {what}; it is restarted on the next call{}",
            self.inner.name,
            tail_note(&conn.stderr_tail())
        ))
    }

    /// The live connection, started if needed (once for all waiting callers). Unless `force`,
    /// a server that failed recently is not started again before its backoff has passed.
    async fn connection(&self, force: bool) -> Result<Arc<Connection>, GatewayError> {
        if let Some(conn) = self.live() {
            return Ok(conn);
        }
        let _starting = self.inner.start_lock.lock().await;
        if let Some(conn) = self.live() {
            return Ok(conn);
        }
        if !force {
            let slot = self
                .inner
                .slot
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            if let Slot::Failed {
                error,
                stderr_tail,
                retry_at,
            } = &*slot
                && *retry_at > Instant::now()
            {
                let wait = retry_at.duration_since(Instant::now());
                return Err(GatewayError::Unavailable(format!(
                    "{error}; retrying in {:.1} s{}",
                    wait.as_secs_f64(),
                    tail_note(stderr_tail)
                )));
            }
        }
        self.inner.set(Slot::Starting);
        let mut unfinished = Unfinished(Some(&self.inner));
        let connected = self.connect().await;
        unfinished.0 = None;
        match connected {
            Ok((conn, changed)) => {
                self.inner.set(Slot::Ready(Arc::clone(&conn)));
                if changed {
                    let _ = self.inner.events.send(UpstreamEvent::ToolsChanged);
                }
                Ok(conn)
            }
            Err((error, stderr_tail)) => {
                let failures = self.inner.failures.fetch_add(1, Ordering::SeqCst) + 1;
                let message = format!("{error}{}", tail_note(&stderr_tail));
                self.inner.set(Slot::Failed {
                    error,
                    stderr_tail,
                    retry_at: Instant::now() + backoff(failures),
                });
                Err(GatewayError::Unavailable(message))
            }
        }
    }

    fn live(&self) -> Option<Arc<Connection>> {
        match &*self
            .inner
            .slot
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
        {
            Slot::Ready(conn) if !conn.ended.is_cancelled() && !conn.stop.is_cancelled() => {
                Some(Arc::clone(conn))
            }
            _ => None,
        }
    }

    /// Starts the server and lists its tools: the connection, and whether the tools differ
    /// from the last listing; or the error and the stderr tail.
    async fn connect(&self) -> Result<(Arc<Connection>, bool), (String, String)> {
        let inner = &self.inner;
        let name = &inner.name;
        let entry = &inner.entry;
        let generation = inner.generation.fetch_add(1, Ordering::SeqCst) + 1;
        let weak = Arc::downgrade(inner);
        let routes = Routes::new(
            name.as_str(),
            Arc::new(move || {
                if let Some(inner) = weak.upgrade() {
                    inner.tools_changed(generation);
                }
            }),
        );
        let side = ClientSide::new(Arc::clone(&routes));
        let (service, process, lane) = if let Some(program) = &entry.command {
            let launch = StdioLaunch {
                label: name.to_string(),
                program: program.clone(),
                args: entry.args.clone(),
                env: entry
                    .env
                    .iter()
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect(),
                cwd: entry.cwd.clone(),
                level: entry.isolation.unwrap_or(Isolation::Standard),
                access: entry.sandbox.clone(),
            };
            let (service, handle, lane) =
                start_stdio(name, &*inner.connector.stdio, &launch, side).await?;
            let lane: Option<Arc<dyn Lane>> = Some(Arc::new(lane));
            (service, Some(handle), lane)
        } else if let Some(url) = &entry.url {
            let Some(http) = &inner.connector.http else {
                return Err((
                    format!(
                        "Server {name} is a Streamable HTTP server ({url}), which this build of toolgate cannot reach yet; use a stdio entry (command) instead"
                    ),
                    String::new(),
                ));
            };
            let target = HttpTarget {
                label: name.to_string(),
                url: url.clone(),
                headers: entry.headers.clone(),
            };
            let (service, lane) = tokio::time::timeout(START_TIMEOUT, (http.open)(side, target))
                .await
                .map_err(|_| {
                    (
                        format!(
                            "Server {name} did not answer initialize within {} s at {url}",
                            START_TIMEOUT.as_secs()
                        ),
                        String::new(),
                    )
                })?
                .map_err(|e| (e, String::new()))?;
            (service, None, lane)
        } else {
            return Err((
                format!("Server {name} has neither command nor url; set one of them in its entry"),
                String::new(),
            ));
        };
        let peer = service.peer().clone();
        // An HTTP upstream that can log may send a call's log messages on its shared stream
        // (rmcp servers do: only progress rides the call's own stream), where they race the
        // result on the call's stream and can arrive after it. Calls to such an upstream keep
        // rmcp's client, which reads both streams in one place, in the order they come.
        let logs_on_shared_stream = process.is_none()
            && peer
                .peer_info()
                .is_some_and(|info| info.capabilities.logging.is_some());
        let lane = if logs_on_shared_stream { None } else { lane };
        ask_all_log_messages(name, &peer).await;
        let listed = tokio::time::timeout(START_TIMEOUT, list(name, &peer)).await;
        let tools = match listed {
            Ok(Ok(tools)) => tools,
            failed => {
                let why = match failed {
                    Ok(Err(e)) => e.to_string(),
                    _ => format!(
                        "Server {name} did not answer tools/list within {} s",
                        START_TIMEOUT.as_secs()
                    ),
                };
                let tail = process
                    .as_ref()
                    .map(|p| p.stderr_tail())
                    .unwrap_or_default();
                if let Some(p) = &process {
                    p.kill();
                }
                let _ = tokio::time::timeout(REAP_TIMEOUT, service.cancel()).await;
                return Err((why, tail));
            }
        };
        let idle = match (
            &process,
            entry.idle_timeout_secs.unwrap_or(DEFAULT_IDLE_SECS),
        ) {
            (Some(_), secs) if secs > 0 => Some(Duration::from_secs(secs)),
            _ => None,
        };
        let conn = Arc::new(Connection {
            generation,
            peer,
            routes,
            lane,
            process,
            stop: CancellationToken::new(),
            ended: CancellationToken::new(),
            end_reason: OnceLock::new(),
            tools: Mutex::new(Some(tools.clone())),
            busy: AtomicUsize::new(0),
            last_used: Mutex::new(Instant::now()),
        });
        let changed = inner.note_tools(&tools);
        tokio::spawn(watch(
            Arc::downgrade(inner),
            Arc::clone(&conn),
            service,
            idle,
        ));
        Ok((conn, changed))
    }
}

/// Spawns a stdio server and completes the MCP handshake with it; the connection's fast lane
/// shares its pipes.
async fn start_stdio(
    name: &ServerName,
    spawner: &dyn StdioSpawner,
    launch: &StdioLaunch,
    side: ClientSide,
) -> Result<(Service, Box<dyn StdioHandle>, StdioLane), (String, String)> {
    let StdioProcess {
        stdout,
        stdin,
        handle,
    } = spawner
        .spawn(launch)
        .map_err(|e| (format!("Server {name} could not start: {e}"), String::new()))?;
    let (transport, lane) = stdio_lane::stdio(stdout, stdin);
    let transport = side.routed(transport);
    let served = tokio::select! {
        served = side.serve(transport) => served.map_err(|e| init_error(&e)),
        status = handle.exited() => Err(format!("the process exited ({status})")),
        () = tokio::time::sleep(START_TIMEOUT) => Err(format!("no answer to initialize within {} s", START_TIMEOUT.as_secs())),
    };
    match served {
        Ok(service) => Ok((service, handle, lane)),
        Err(why) => {
            // A process that ended the handshake by exiting says how; that is the cause.
            let why = match tokio::time::timeout(Duration::from_secs(1), handle.exited()).await {
                Ok(status) => {
                    format!("the process exited ({status}) before completing the MCP handshake")
                }
                Err(_) => why,
            };
            let tail = handle.stderr_tail();
            handle.kill();
            let _ = tokio::time::timeout(REAP_TIMEOUT, handle.exited()).await;
            Err((
                format!(
                    "Server {name} could not start: {why}; check that its command runs an MCP server on stdio"
                ),
                tail,
            ))
        }
    }
}

/// A failed MCP handshake in words (rmcp's own text names Rust types).
fn init_error(e: &ClientInitializeError) -> String {
    match e {
        ClientInitializeError::TransportError { error, context } => {
            format!("{context} failed: {}", error.error)
        }
        ClientInitializeError::ConnectionClosed(what) => {
            format!("the connection closed while toolgate waited for the {what}")
        }
        other => error_chain(other),
    }
}

/// Asks an upstream that declares logging for every log message (`logging/setLevel debug`):
/// one connection serves every caller, and toolgate's server passes each caller the messages
/// at or above the level that caller chose, so a caller asking for debug messages gets the
/// upstream's too. Without it the upstream keeps its own default (often info). A refusal is
/// only traced: the upstream then sends what it sends.
// MCP revision 2026-07-28 deprecates logging; the upstreams toolgate fronts speak 2025-06-18
// and 2025-11-25, where it is part of the protocol.
#[allow(deprecated)]
async fn ask_all_log_messages(name: &ServerName, peer: &Peer<RoleClient>) {
    use rmcp::model::{LoggingLevel, SetLevelRequestParams};
    if peer
        .peer_info()
        .is_none_or(|info| info.capabilities.logging.is_none())
    {
        return;
    }
    let asked = tokio::time::timeout(
        LIST_TIMEOUT,
        peer.set_level(SetLevelRequestParams::new(LoggingLevel::Debug)),
    )
    .await;
    match asked {
        Ok(Ok(())) => {}
        Ok(Err(e)) => {
            tracing::debug!(server = %name, error = %error_chain(&e), "upstream refused logging/setLevel");
        }
        Err(_) => tracing::debug!(server = %name, "upstream did not answer logging/setLevel"),
    }
}

/// Every tool the upstream lists.
async fn list(
    name: &ServerName,
    peer: &Peer<RoleClient>,
) -> Result<Vec<UpstreamTool>, GatewayError> {
    let tools = tokio::time::timeout(LIST_TIMEOUT, peer.list_all_tools())
        .await
        .map_err(|_| {
            GatewayError::Unavailable(format!(
                "Server {name} did not answer tools/list within {} s",
                LIST_TIMEOUT.as_secs()
            ))
        })?
        .map_err(|e| {
            GatewayError::Protocol(format!(
                "Server {name} failed to list its tools: {}",
                error_chain(&e)
            ))
        })?;
    tools
        .iter()
        .map(|t| forward::upstream_tool(name.as_str(), t))
        .collect()
}

/// Why a connection ended.
enum End {
    Stopped,
    Exited(String),
    Closed,
    Idle(Duration),
}

/// Resolves once the connection has had no request in flight for `idle` (never if `None`).
async fn idle_expired(conn: &Connection, idle: Option<Duration>) {
    let Some(idle) = idle else {
        return std::future::pending().await;
    };
    loop {
        tokio::time::sleep_until(conn.last_used() + idle).await;
        if conn.busy.load(Ordering::SeqCst) > 0 {
            conn.touch();
        } else if conn.last_used() + idle <= Instant::now() {
            return;
        }
    }
}

/// Watches one connection until it ends, then closes it, reaps the process and updates the
/// state (when the [`Upstream`] still exists and still holds this connection).
async fn watch(
    inner: Weak<Inner>,
    conn: Arc<Connection>,
    service: Service,
    idle: Option<Duration>,
) {
    let stop_service = service.cancellation_token();
    let waiting = service.waiting();
    tokio::pin!(waiting);
    let exited = async {
        match &conn.process {
            Some(p) => p.exited().await,
            None => std::future::pending().await,
        }
    };
    tokio::pin!(exited);
    let mut service_done = false;
    let end = tokio::select! {
        () = conn.stop.cancelled() => End::Stopped,
        status = &mut exited => End::Exited(status),
        _ = &mut waiting => {
            service_done = true;
            if conn.process.is_some() {
                match tokio::time::timeout(REAP_TIMEOUT, &mut exited).await {
                    Ok(status) => End::Exited(status),
                    Err(_) => End::Closed,
                }
            } else {
                End::Closed
            }
        }
        () = idle_expired(&conn, idle) => End::Idle(idle.unwrap_or_default()),
    };
    let (died, reason) = match &end {
        End::Stopped => (false, String::new()),
        End::Exited(status) => (true, format!("exited ({status})")),
        End::Closed if conn.process.is_some() => (true, "closed its output".to_owned()),
        End::Closed => (true, "ended the connection".to_owned()),
        End::Idle(idle) => (
            false,
            format!("was stopped after {} s without calls", idle.as_secs()),
        ),
    };
    if !service_done {
        stop_service.cancel();
        let _ = tokio::time::timeout(REAP_TIMEOUT, &mut waiting).await;
    }
    if let Some(p) = &conn.process {
        p.kill();
        if !matches!(end, End::Exited(_)) {
            let _ = tokio::time::timeout(REAP_TIMEOUT, &mut exited).await;
        }
    }
    let tail = conn.stderr_tail();
    if let Some(inner) = inner.upgrade() {
        let _ = conn.end_reason.set(format!("it {reason}"));
        if !matches!(end, End::Stopped) {
            inner.ended(conn.generation, died, &reason, tail);
        }
    }
    conn.ended.cancel();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_is_immediate_once_then_doubles_to_thirty_seconds() {
        assert_eq!(backoff(1), Duration::ZERO);
        assert_eq!(backoff(2), Duration::from_millis(500));
        assert_eq!(backoff(3), Duration::from_secs(1));
        assert_eq!(backoff(4), Duration::from_secs(2));
        assert_eq!(backoff(9), Duration::from_secs(30));
        assert_eq!(backoff(40), Duration::from_secs(30));
    }
}
