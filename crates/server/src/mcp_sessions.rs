//! Bounded MCP sessions over Streamable HTTP: a global and a per-principal cap on open sessions,
//! expiry of idle ones, and sleep that makes an idle session cost a few hundred bytes.
//!
//! rmcp keeps every session as a worker task, a service task and several channels (about
//! 130 KiB a session, measured: each channel's first buffer block holds 32 messages of ~500
//! bytes). [`BoundedSessions`] wraps rmcp's `LocalSessionManager` and keeps one small [`Entry`]
//! per session: who opened it, when it was last used and how many response streams are open.
//! One sweeper task (per server, not per session) puts a session whose streams are all closed to
//! sleep after [`SLEEP_AFTER`] without requests, or at once when more than
//! [`DEFAULT_MAX_AWAKE_IDLE`] such sessions are awake (least recently used first) — its rmcp
//! worker ends, only the entry and the client's `initialize` parameters stay — and removes a
//! session idle for the configured timeout. A request on a sleeping session wakes it: rmcp's
//! restore path (the [`SessionStore`] here is the entry table) builds a new worker under the
//! same id and replays the client's `initialize`, so the client notices nothing.
//!
//! The caps count sessions awake or asleep. A new session past a cap is refused before rmcp
//! sees the request, with HTTP 503 (the server's cap) or 429 (the principal's) and a JSON-RPC
//! error naming the cap, the setting that raises it and the idle timeout.

use std::cell::RefCell;
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures_util::{Stream, StreamExt};
use rmcp::RoleServer;
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::service::Peer;
use rmcp::transport::WorkerTransport;
use rmcp::transport::streamable_http_server::session::local::{
    LocalSessionManager, LocalSessionManagerError, LocalSessionWorker, SessionConfig,
};
use rmcp::transport::streamable_http_server::session::{
    RestoreOutcome, ServerSseMessage, SessionId, SessionManager, SessionState, SessionStore,
    SessionStoreError,
};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::auth::Caller;
use crate::error::ServerError;

/// Default cap on open MCP sessions (awake or asleep) for the whole server.
pub const DEFAULT_MAX_SESSIONS: usize = 1000;
/// Default cap on open MCP sessions per principal.
pub const DEFAULT_MAX_SESSIONS_PER_PRINCIPAL: usize = 100;
/// Default time without requests after which a session is removed.
pub const DEFAULT_SESSION_IDLE_TIMEOUT: Duration = Duration::from_secs(30 * 60);
/// A session whose streams are closed sleeps (its rmcp worker ends) after this long without
/// requests, or after the idle timeout if that is shorter.
pub const SLEEP_AFTER: Duration = Duration::from_secs(60);
/// Default number of sessions kept awake without an open stream: past it, the least recently
/// used of them go to sleep at once (an awake session costs about 130 KiB, a sleeping one
/// under 1 KiB).
pub const DEFAULT_MAX_AWAKE_IDLE: usize = 64;

/// Gauge: MCP sessions over HTTP, by `state` (`awake`, `asleep`), updated by the sweeper.
pub(crate) const SESSIONS_METRIC: &str = "mcp.sessions";
/// Counter: new MCP sessions refused, by `setting` (the cap that refused them).
pub(crate) const SESSIONS_REFUSED_METRIC: &str = "mcp.sessions.refused";

/// The header carrying the session id.
const SESSION_HEADER: &str = "mcp-session-id";

/// The first revision without sessions (rmcp's `ProtocolVersion::NO_INITIALIZE`); revisions are
/// dates, so they compare as strings.
const STATELESS_REVISION: &str = "2026-07-28";

/// JSON-RPC error code of a refused session (implementation-defined server error range).
const REFUSED_CODE: i64 = -32000;

/// How many MCP sessions may be open and for how long an unused one lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SessionLimits {
    /// Open sessions on the server (`[server] max_sessions`).
    pub max_sessions: usize,
    /// Open sessions of one principal (`[server] max_sessions_per_principal`).
    pub max_per_principal: usize,
    /// A session without requests (and without an open stream) for this long is removed
    /// (`[server] session_idle_timeout_seconds`).
    pub idle_timeout: Duration,
    /// Sessions without an open stream kept awake; the least recently used beyond it sleep.
    pub max_awake_idle: usize,
}

impl Default for SessionLimits {
    fn default() -> Self {
        Self {
            max_sessions: DEFAULT_MAX_SESSIONS,
            max_per_principal: DEFAULT_MAX_SESSIONS_PER_PRINCIPAL,
            idle_timeout: DEFAULT_SESSION_IDLE_TIMEOUT,
            max_awake_idle: DEFAULT_MAX_AWAKE_IDLE,
        }
    }
}

impl SessionLimits {
    /// Checks the limits: none may be zero (there is no "unlimited").
    pub fn checked(self) -> Result<Self, ServerError> {
        if self.max_sessions == 0 {
            return Err(ServerError::BadRequest(
                "[server] max_sessions must be at least 1 (there is no unlimited setting; the default is 1000)".into(),
            ));
        }
        if self.max_per_principal == 0 {
            return Err(ServerError::BadRequest(
                "[server] max_sessions_per_principal must be at least 1 (there is no unlimited setting; the default is 100)".into(),
            ));
        }
        if self.max_awake_idle == 0 {
            return Err(ServerError::BadRequest(
                "max_awake_idle must be at least 1".into(),
            ));
        }
        if self.idle_timeout.is_zero() {
            return Err(ServerError::BadRequest(
                "[server] session_idle_timeout_seconds must be at least 1 (the default is 1800, 30 minutes)".into(),
            ));
        }
        Ok(self)
    }

    /// When a session without open streams goes to sleep.
    fn sleep_after(&self) -> Duration {
        SLEEP_AFTER.min(self.idle_timeout)
    }

    /// How often the sweeper looks: a quarter of the shorter delay, between 10 ms and 15 s.
    fn sweep_every(&self) -> Duration {
        (self.sleep_after() / 4).clamp(Duration::from_millis(10), Duration::from_secs(15))
    }
}

/// A session's state in rmcp.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Life {
    /// An rmcp worker serves it.
    Awake,
    /// Its worker is being closed; a request waits until it is asleep, then wakes it.
    FallingAsleep,
    /// Only the entry is left; the next request restores a worker.
    Asleep,
}

/// What toolgate keeps of one session.
#[derive(Debug)]
struct Entry {
    owner: Arc<str>,
    last_active: Instant,
    /// Response streams open right now (a call in progress, a GET stream).
    open_streams: u32,
    life: Life,
    /// Ends of old workers still to be reported by rmcp (each after a sleep), which must not
    /// close the session.
    stale_worker_ends: u32,
    /// The client's `initialize`, replayed to wake the session.
    init: Option<SessionState>,
    /// The client's `logging/setLevel` (an index into `LogLevel::ALL`), restored on waking.
    log_level: Option<usize>,
}

#[derive(Debug, Default)]
struct Table {
    /// Sessions plus admissions in progress.
    total: usize,
    per_principal: HashMap<Arc<str>, usize>,
    entries: HashMap<SessionId, Entry>,
}

impl Table {
    fn release(&mut self, owner: &Arc<str>) {
        self.total = self.total.saturating_sub(1);
        if let Some(n) = self.per_principal.get_mut(owner) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                self.per_principal.remove(owner);
            }
        }
    }

    fn remove(&mut self, id: &SessionId) -> Option<Entry> {
        let entry = self.entries.remove(id)?;
        self.release(&entry.owner);
        Some(entry)
    }
}

/// The state shared by the session manager, the admission check and the sweeper.
struct Shared {
    limits: SessionLimits,
    local: LocalSessionManager,
    table: Mutex<Table>,
    sweeping: AtomicBool,
    /// Wakes the sweeper early (too many sessions awake).
    crowded: tokio::sync::Notify,
    stop: CancellationToken,
}

impl Shared {
    fn table(&self) -> MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Marks a request on the session; `false` if toolgate does not know it.
    fn touch(&self, id: &SessionId) -> bool {
        match self.table().entries.get_mut(id) {
            Some(entry) => {
                entry.last_active = Instant::now();
                true
            }
            None => false,
        }
    }
}

/// rmcp's session manager for `/mcp`, bounded (see the module documentation).
#[derive(Clone)]
pub(crate) struct BoundedSessions {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for BoundedSessions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BoundedSessions")
            .field("limits", &self.shared.limits)
            .finish_non_exhaustive()
    }
}

/// A snapshot of the sessions, for tests and metrics.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SessionCounts {
    /// Sessions an rmcp worker serves.
    pub awake: usize,
    /// Sessions reduced to their entry.
    pub asleep: usize,
    /// Sessions (HTTP and stdio) subscribed to `notifications/tools/list_changed`.
    pub list_changed: usize,
}

tokio::task_local! {
    /// The admitted slot of the request being handled, taken by `create_session`.
    static ADMITTED: RefCell<Option<Slot>>;
}

/// What `admit` left for `create_session`.
enum Slot {
    /// A slot taken before rmcp saw the request.
    Reserved(Admission),
    /// A 2026-07-28 request, which opens no session: no slot was taken up front. Should it still
    /// open one (an `initialize` sent with a 2026-07-28 header), the slot is taken then, under
    /// the same caps and for the same principal.
    Deferred(Arc<str>),
}

/// A slot taken by a new session's `initialize` before rmcp creates the session; given back
/// when dropped unless a session took it.
struct Admission {
    shared: Arc<Shared>,
    owner: Arc<str>,
    taken: bool,
}

impl Drop for Admission {
    fn drop(&mut self) {
        if !self.taken {
            self.shared.table().release(&self.owner);
        }
    }
}

/// Which cap refused a new session.
#[derive(Debug)]
enum Refusal {
    Server { open: usize },
    Principal { open: usize },
}

impl BoundedSessions {
    /// A session manager with these limits; its sweeper stops when `stop` fires.
    pub(crate) fn new(limits: SessionLimits, stop: CancellationToken) -> Self {
        let mut config = SessionConfig::default();
        // toolgate expires idle sessions itself: a session with an open stream (a call in
        // progress, a GET stream) is not idle, though rmcp's worker sees no message for as long
        // as the call runs, and rmcp's timer would end it mid-call. A stream whose connection
        // drops is dropped with it, so its session becomes idle and expires here.
        config.keep_alive = None;
        let mut local = LocalSessionManager::default();
        local.session_config = config;
        Self {
            shared: Arc::new(Shared {
                limits,
                local,
                table: Mutex::new(Table::default()),
                sweeping: AtomicBool::new(false),
                crowded: tokio::sync::Notify::new(),
                stop,
            }),
        }
    }

    /// The session store rmcp wakes sleeping sessions from (the same table).
    pub(crate) fn store(&self) -> Arc<dyn SessionStore> {
        Arc::new(self.clone())
    }

    /// How many sessions are awake and asleep.
    /// The principal that opened the session, while the table holds it (awake or asleep);
    /// looking does not count as activity.
    pub(crate) fn owner_of(&self, id: &str) -> Option<Arc<str>> {
        self.shared
            .table()
            .entries
            .get(id)
            .map(|entry| Arc::clone(&entry.owner))
    }

    pub(crate) fn counts(&self) -> SessionCounts {
        let table = self.shared.table();
        let mut counts = SessionCounts::default();
        for entry in table.entries.values() {
            match entry.life {
                Life::Awake | Life::FallingAsleep => counts.awake += 1,
                Life::Asleep => counts.asleep += 1,
            }
        }
        counts
    }

    /// Keeps the session's logging level, to restore it when the session wakes.
    pub(crate) fn remember_log_level(&self, id: &str, level: usize) {
        if let Some(entry) = self.shared.table().entries.get_mut(id) {
            entry.log_level = Some(level);
        }
    }

    /// The logging level the session's client asked for, if it did.
    pub(crate) fn log_level(&self, id: &str) -> Option<usize> {
        self.shared
            .table()
            .entries
            .get(id)
            .and_then(|e| e.log_level)
    }

    /// Serves one `/mcp` request: a request that would open a session (a POST without
    /// `Mcp-Session-Id`) first takes a slot under both caps, or is refused. A 2026-07-28 request
    /// (its `MCP-Protocol-Version` header) opens none, so it takes no slot and is never refused
    /// for the caps; if it opens one after all, the slot is taken when the session is made.
    pub(crate) async fn admit<F, Fut>(&self, request: axum::extract::Request, serve: F) -> Response
    where
        F: FnOnce(axum::extract::Request) -> Fut,
        Fut: Future<Output = Response>,
    {
        let opens =
            request.method() == Method::POST && !request.headers().contains_key(SESSION_HEADER);
        if !opens {
            return serve(request).await;
        }
        let owner: Arc<str> = request
            .extensions()
            .get::<Arc<Caller>>()
            .map_or_else(|| Arc::from("-"), |c| Arc::from(c.principal.id.as_str()));
        let stateless = request
            .headers()
            .get("mcp-protocol-version")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v >= STATELESS_REVISION);
        if stateless {
            return ADMITTED
                .scope(RefCell::new(Some(Slot::Deferred(owner))), serve(request))
                .await;
        }
        match self.reserve(&owner) {
            Ok(admission) => {
                ADMITTED
                    .scope(
                        RefCell::new(Some(Slot::Reserved(admission))),
                        serve(request),
                    )
                    .await
            }
            Err(refusal) => self.refuse(&owner, refusal),
        }
    }

    fn reserve(&self, owner: &Arc<str>) -> Result<Admission, Refusal> {
        let limits = self.shared.limits;
        let mut table = self.shared.table();
        if table.total >= limits.max_sessions {
            return Err(Refusal::Server { open: table.total });
        }
        let mine = table.per_principal.get(owner).copied().unwrap_or(0);
        if mine >= limits.max_per_principal {
            return Err(Refusal::Principal { open: mine });
        }
        table.total += 1;
        *table.per_principal.entry(Arc::clone(owner)).or_insert(0) += 1;
        Ok(Admission {
            shared: Arc::clone(&self.shared),
            owner: Arc::clone(owner),
            taken: false,
        })
    }

    /// A slot under both caps for an open 2026-07-28 `subscriptions/listen` stream, which holds
    /// a connection as long as a session's stream does; given back when the guard is dropped.
    /// Refused with the message a new session would get.
    pub(crate) fn hold(&self, owner: &str) -> Result<impl Drop + use<>, String> {
        let owner: Arc<str> = Arc::from(owner);
        self.reserve(&owner).map_err(|refusal| {
            let limits = self.shared.limits;
            match refusal {
                Refusal::Server { open } => format!(
                    "Too many open MCP sessions and subscriptions/listen streams on this server: {open} open, the cap is {} ([server] max_sessions in the config file). Close a listen stream you do not need, or retry later.",
                    limits.max_sessions
                ),
                Refusal::Principal { open } => format!(
                    "Too many open MCP sessions and subscriptions/listen streams for principal {owner}: {open} open, the cap is {} per principal ([server] max_sessions_per_principal in the config file). One listen stream per client is enough: close the others, or retry later.",
                    limits.max_per_principal
                ),
            }
        })
    }

    /// HTTP 503 (the server is full) or 429 (this principal is), with a JSON-RPC error body.
    fn refuse(&self, owner: &str, refusal: Refusal) -> Response {
        let limits = self.shared.limits;
        let idle = human(limits.idle_timeout);
        let (status, setting, limit, open, message) = match refusal {
            Refusal::Server { open } => (
                StatusCode::SERVICE_UNAVAILABLE,
                "max_sessions",
                limits.max_sessions,
                open,
                format!(
                    "Too many MCP sessions on this server: {open} open, the cap is {} ([server] max_sessions in the config file). Existing sessions keep working; close unused ones (HTTP DELETE /mcp with their Mcp-Session-Id) or retry later: sessions idle for {idle} expire ([server] session_idle_timeout_seconds).",
                    limits.max_sessions
                ),
            ),
            Refusal::Principal { open } => (
                StatusCode::TOO_MANY_REQUESTS,
                "max_sessions_per_principal",
                limits.max_per_principal,
                open,
                format!(
                    "Too many MCP sessions for principal {owner}: {open} open, the cap is {} per principal ([server] max_sessions_per_principal in the config file). Your existing sessions keep working: reuse one, close unused ones (HTTP DELETE /mcp with their Mcp-Session-Id), or retry later: sessions idle for {idle} expire ([server] session_idle_timeout_seconds).",
                    limits.max_per_principal
                ),
            ),
        };
        tracing::warn!(
            principal = owner,
            setting,
            limit,
            "MCP session refused: cap reached"
        );
        metrics::counter!(SESSIONS_REFUSED_METRIC, "setting" => setting).increment(1);
        let body = json!({
            "jsonrpc": "2.0",
            "id": null,
            "error": {
                "code": REFUSED_CODE,
                "message": message,
                "data": {
                    "kind": "session_limit",
                    "setting": setting,
                    "limit": limit,
                    "open": open,
                    "idleTimeoutSeconds": limits.idle_timeout.as_secs(),
                }
            }
        });
        let retry_after = limits.sleep_after().as_secs().max(1).to_string();
        let mut response = (status, axum::Json(body)).into_response();
        if let Ok(value) = HeaderValue::from_str(&retry_after) {
            response.headers_mut().insert(header::RETRY_AFTER, value);
        }
        response
    }

    /// Starts the sweeper once (lazily: a server nobody opens a session on runs none).
    fn start_sweeper(&self) {
        if self.shared.sweeping.swap(true, Ordering::SeqCst) {
            return;
        }
        metrics::describe_gauge!(
            SESSIONS_METRIC,
            "MCP sessions over HTTP, awake (an rmcp worker) or asleep (a record until the next request)"
        );
        metrics::describe_counter!(
            SESSIONS_REFUSED_METRIC,
            "New MCP sessions refused, by the cap that refused them"
        );
        let weak = Arc::downgrade(&self.shared);
        let stop = self.shared.stop.clone();
        let every = self.shared.limits.sweep_every();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(every);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                let Some(shared) = weak.upgrade() else { return };
                tokio::select! {
                    () = stop.cancelled() => return,
                    _ = tick.tick() => {}
                    () = shared.crowded.notified() => {}
                }
                drop(shared);
                if !sweep(&weak).await {
                    return;
                }
            }
        });
    }

    /// Wraps a response stream so the session counts as busy while it is open.
    fn busy<S>(
        &self,
        id: &SessionId,
        stream: S,
    ) -> impl Stream<Item = ServerSseMessage> + Send + Sync + 'static
    where
        S: Stream<Item = ServerSseMessage> + Send + Sync + 'static,
    {
        if let Some(entry) = self.shared.table().entries.get_mut(id) {
            entry.open_streams += 1;
            entry.last_active = Instant::now();
        }
        let guard = StreamGuard {
            shared: Arc::downgrade(&self.shared),
            id: id.clone(),
        };
        stream.map(move |message| {
            let _ = &guard;
            message
        })
    }
}

/// Closes what the sweeper found: sessions idle past the timeout are removed, idle ones past
/// [`SLEEP_AFTER`] with their streams closed go to sleep. `false` once the server is gone.
async fn sweep(weak: &Weak<Shared>) -> bool {
    let Some(shared) = weak.upgrade() else {
        return false;
    };
    let now = Instant::now();
    let limits = shared.limits;
    let mut expired = Vec::new();
    let mut sleepy = Vec::new();
    {
        let mut table = shared.table();
        let mut gone = Vec::new();
        // Awake sessions without an open stream that could sleep, oldest first.
        let mut could_sleep = Vec::new();
        for (id, entry) in table.entries.iter_mut() {
            if entry.open_streams > 0 {
                continue;
            }
            let idle = now.saturating_duration_since(entry.last_active);
            if idle >= limits.idle_timeout {
                gone.push(id.clone());
            } else if entry.life == Life::Awake && entry.init.is_some() {
                if idle >= limits.sleep_after() {
                    sleepy.push(id.clone());
                } else {
                    could_sleep.push((entry.last_active, id.clone()));
                }
            }
        }
        // Past the number of idle sessions kept awake, the least recently used sleep now.
        let awake_idle = could_sleep.len();
        if awake_idle > limits.max_awake_idle {
            could_sleep.sort_unstable_by_key(|(last, _)| *last);
            sleepy.extend(
                could_sleep
                    .into_iter()
                    .take(awake_idle - limits.max_awake_idle)
                    .map(|(_, id)| id),
            );
        }
        for id in &sleepy {
            if let Some(entry) = table.entries.get_mut(id) {
                entry.life = Life::FallingAsleep;
                entry.stale_worker_ends += 1;
            }
        }
        for id in gone {
            if let Some(entry) = table.remove(&id)
                && entry.life != Life::Asleep
            {
                expired.push(id);
            }
        }
        // Those falling asleep now count as asleep.
        let asleep = table
            .entries
            .values()
            .filter(|e| e.life != Life::Awake)
            .count();
        let awake = table.entries.len() - asleep;
        metrics::gauge!(SESSIONS_METRIC, "state" => "awake").set(awake as f64);
        metrics::gauge!(SESSIONS_METRIC, "state" => "asleep").set(asleep as f64);
    }
    for id in expired {
        tracing::debug!(session = %id, "MCP session expired (idle)");
        let _ = shared.local.close_session(&id).await;
    }
    for id in sleepy {
        // Out of rmcp's map first, so a request from now on restores a new worker.
        let handle = shared.local.sessions.write().await.remove(&id);
        if let Some(entry) = shared.table().entries.get_mut(&id) {
            entry.life = Life::Asleep;
        }
        if let Some(handle) = handle {
            let _ = handle.close().await;
        }
    }
    true
}

/// Keeps a session busy while one of its response streams is open.
struct StreamGuard {
    shared: Weak<Shared>,
    id: SessionId,
}

impl Drop for StreamGuard {
    fn drop(&mut self) {
        if let Some(shared) = self.shared.upgrade()
            && let Some(entry) = shared.table().entries.get_mut(&self.id)
        {
            entry.open_streams = entry.open_streams.saturating_sub(1);
            entry.last_active = Instant::now();
        }
    }
}

/// Seconds as "30 min", "90 s", "2 h".
fn human(d: Duration) -> String {
    let s = d.as_secs();
    if s == 0 {
        format!("{} ms", d.as_millis())
    } else if s.is_multiple_of(3600) {
        format!("{} h", s / 3600)
    } else if s.is_multiple_of(60) {
        format!("{} min", s / 60)
    } else {
        format!("{s} s")
    }
}

impl SessionManager for BoundedSessions {
    type Error = LocalSessionManagerError;
    type Transport = WorkerTransport<LocalSessionWorker>;

    async fn create_session(&self) -> Result<(SessionId, Self::Transport), Self::Error> {
        // The slot `admit` took; a session created another way takes one here (or none is
        // left, and the session is refused).
        let slot = ADMITTED
            .try_with(|slot| slot.borrow_mut().take())
            .ok()
            .flatten();
        let refused = |refusal: Refusal| {
            LocalSessionManagerError::SessionError(
                std::io::Error::other(format!("MCP session refused: {refusal:?}")).into(),
            )
        };
        let mut admission = match slot {
            Some(Slot::Reserved(a)) => a,
            Some(Slot::Deferred(owner)) => self.reserve(&owner).map_err(refused)?,
            None => self.reserve(&Arc::from("-")).map_err(refused)?,
        };
        let (id, transport) = self.shared.local.create_session().await?;
        admission.taken = true;
        self.shared.table().entries.insert(
            id.clone(),
            Entry {
                owner: Arc::clone(&admission.owner),
                last_active: Instant::now(),
                open_streams: 0,
                life: Life::Awake,
                stale_worker_ends: 0,
                init: None,
                log_level: None,
            },
        );
        self.start_sweeper();
        Ok((id, transport))
    }

    async fn initialize_session(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<ServerJsonRpcMessage, Self::Error> {
        self.shared.touch(id);
        self.shared.local.initialize_session(id, message).await
    }

    async fn has_session(&self, id: &SessionId) -> Result<bool, Self::Error> {
        // A sleeping session is not in rmcp's map: rmcp then restores it (see `restore_session`).
        let life = self.shared.table().entries.get_mut(id).map(|entry| {
            entry.last_active = Instant::now();
            entry.life
        });
        match life {
            Some(Life::Awake) => self.shared.local.has_session(id).await,
            Some(Life::FallingAsleep | Life::Asleep) | None => Ok(false),
        }
    }

    async fn close_session(&self, id: &SessionId) -> Result<(), Self::Error> {
        {
            let mut table = self.shared.table();
            if let Some(entry) = table.entries.get_mut(id)
                && entry.stale_worker_ends > 0
            {
                // The end of a worker put to sleep, not of the session.
                entry.stale_worker_ends -= 1;
                return Ok(());
            }
            table.remove(id);
        }
        self.shared.local.close_session(id).await
    }

    async fn create_stream(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.shared.touch(id);
        let stream = self.shared.local.create_stream(id, message).await?;
        Ok(self.busy(id, stream))
    }

    async fn accept_message(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<(), Self::Error> {
        self.shared.touch(id);
        self.shared.local.accept_message(id, message).await
    }

    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.shared.touch(id);
        let stream = self.shared.local.create_standalone_stream(id).await?;
        Ok(self.busy(id, stream))
    }

    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.shared.touch(id);
        let stream = self.shared.local.resume(id, last_event_id).await?;
        Ok(self.busy(id, stream))
    }

    async fn restore_session(
        &self,
        id: SessionId,
    ) -> Result<RestoreOutcome<Self::Transport>, Self::Error> {
        // Wait (briefly) for a worker being put to sleep to be gone from rmcp's map.
        for _ in 0..200 {
            let life = self.shared.table().entries.get(&id).map(|e| e.life);
            match life {
                None => return Ok(RestoreOutcome::NotSupported),
                Some(Life::FallingAsleep) => tokio::time::sleep(Duration::from_millis(5)).await,
                Some(Life::Awake | Life::Asleep) => break,
            }
        }
        let outcome = self.shared.local.restore_session(id.clone()).await?;
        if let RestoreOutcome::Restored(_) = &outcome {
            if let Some(entry) = self.shared.table().entries.get_mut(&id) {
                entry.life = Life::Awake;
                entry.last_active = Instant::now();
            }
            tracing::debug!(session = %id, "MCP session woken");
        }
        Ok(outcome)
    }
}

impl SessionStore for BoundedSessions {
    fn load<'a, 'b, 'c>(
        &'a self,
        session_id: &'b str,
    ) -> Pin<Box<dyn Future<Output = Result<Option<SessionState>, SessionStoreError>> + Send + 'c>>
    where
        'a: 'c,
        'b: 'c,
        Self: 'c,
    {
        let state = self
            .shared
            .table()
            .entries
            .get(session_id)
            .filter(|e| e.life != Life::Awake)
            .and_then(|e| e.init.clone());
        Box::pin(async move { Ok(state) })
    }

    fn store<'a, 'b, 'c, 'd>(
        &'a self,
        session_id: &'b str,
        state: &'c SessionState,
    ) -> Pin<Box<dyn Future<Output = Result<(), SessionStoreError>> + Send + 'd>>
    where
        'a: 'd,
        'b: 'd,
        'c: 'd,
        Self: 'd,
    {
        let crowded = {
            let mut table = self.shared.table();
            if let Some(entry) = table.entries.get_mut(session_id) {
                entry.init = Some(state.clone());
            }
            table.entries.len() > self.shared.limits.max_awake_idle
        };
        if crowded {
            // Maybe too many idle sessions awake: the sweeper checks now, not at its next tick.
            self.shared.crowded.notify_one();
        }
        Box::pin(async { Ok(()) })
    }

    fn delete<'a, 'b, 'c>(
        &'a self,
        session_id: &'b str,
    ) -> Pin<Box<dyn Future<Output = Result<(), SessionStoreError>> + Send + 'c>>
    where
        'a: 'c,
        'b: 'c,
        Self: 'c,
    {
        // rmcp calls this after closing a session the client DELETEd.
        let id: SessionId = Arc::from(session_id);
        self.shared.table().remove(&id);
        Box::pin(async { Ok(()) })
    }
}

/// `notifications/tools/list_changed` for every MCP session (HTTP and stdio), sent by one task
/// for the whole server instead of one watcher task per session. A session subscribes when the
/// client has initialized; dropping the [`ListChangedSubscription`] (with the session's
/// handler) removes it.
#[derive(Default)]
pub(crate) struct ListChanged {
    peers: Mutex<HashMap<u64, Peer<RoleServer>>>,
    next: AtomicU64,
    started: AtomicBool,
}

/// A session's place in [`ListChanged`].
pub(crate) struct ListChangedSubscription {
    hub: Weak<ListChanged>,
    key: u64,
}

impl Drop for ListChangedSubscription {
    fn drop(&mut self) {
        if let Some(hub) = self.hub.upgrade() {
            hub.peers().remove(&self.key);
        }
    }
}

/// Sessions notified at once when the registry changes.
const NOTIFY_CONCURRENCY: usize = 32;
/// How long one session's notification may take before it is skipped.
const NOTIFY_TIMEOUT: Duration = Duration::from_secs(5);

impl ListChanged {
    fn peers(&self) -> MutexGuard<'_, HashMap<u64, Peer<RoleServer>>> {
        self.peers.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Sessions subscribed right now.
    pub(crate) fn len(&self) -> usize {
        self.peers().len()
    }

    /// Notifies `peer` of every registry change from now on, until the subscription is dropped.
    pub(crate) fn subscribe(
        self: &Arc<Self>,
        registry: &Arc<toolgate_core::Registry>,
        stop: &CancellationToken,
        peer: Peer<RoleServer>,
    ) -> ListChangedSubscription {
        let key = self.next.fetch_add(1, Ordering::Relaxed);
        self.peers().insert(key, peer);
        if !self.started.swap(true, Ordering::SeqCst) {
            let mut changes = registry.subscribe();
            changes.mark_unchanged();
            let hub = Arc::downgrade(self);
            let stop = stop.clone();
            tokio::spawn(async move {
                loop {
                    tokio::select! {
                        () = stop.cancelled() => return,
                        changed = changes.changed() => if changed.is_err() { return },
                    }
                    let Some(hub) = hub.upgrade() else { return };
                    let peers: Vec<Peer<RoleServer>> = hub.peers().values().cloned().collect();
                    drop(hub);
                    futures_util::stream::iter(peers)
                        .for_each_concurrent(NOTIFY_CONCURRENCY, |peer| async move {
                            if !peer.is_transport_closed() {
                                let _ = tokio::time::timeout(
                                    NOTIFY_TIMEOUT,
                                    peer.notify_tool_list_changed(),
                                )
                                .await;
                            }
                        })
                        .await;
                }
            });
        }
        ListChangedSubscription {
            hub: Arc::downgrade(self),
            key,
        }
    }
}
