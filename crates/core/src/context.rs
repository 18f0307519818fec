//! What a tool handler receives besides its arguments: who is calling,
//! the cancellation token, auth claims, an HTTP client slot, progress reporting and typed
//! extensions for services a tool needs.

use std::any::{Any, TypeId};
use std::collections::{BTreeSet, HashMap};
use std::fmt;
use std::sync::Arc;

use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;

use crate::content::{Attachments, Content};
use crate::envelope::CallId;
use crate::error::ToolError;
use crate::names::{Permission, PrincipalId, ToolName};
use crate::tool::BoxFuture;

/// A caller: an id, the permissions granted to it and, optionally, the only tools it may call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Principal {
    /// Who the caller is.
    pub id: PrincipalId,
    /// The permissions granted to it (a final `*` segment covers every suffix).
    pub grants: Vec<Permission>,
    /// `None`: every tool (subject to permissions). `Some`: only these tools.
    pub allowed_tools: Option<BTreeSet<String>>,
    /// Tools that do not exist for this principal, whatever `allowed_tools` says: the built-ins
    /// its plan leaves out. `None` hides nothing.
    pub hidden_tools: Option<Arc<BTreeSet<String>>>,
}

impl Principal {
    /// A principal with no grants and no tool restriction.
    pub fn new(id: PrincipalId) -> Self {
        Self {
            id,
            grants: Vec::new(),
            allowed_tools: None,
            hidden_tools: None,
        }
    }

    /// The local operator of the CLI: every permission (`*`), every tool.
    pub fn local() -> Self {
        Self {
            id: PrincipalId::local(),
            grants: Permission::parse("*").into_iter().collect(),
            allowed_tools: None,
            hidden_tools: None,
        }
    }

    /// Adds a grant.
    #[must_use]
    pub fn grant(mut self, permission: Permission) -> Self {
        self.grants.push(permission);
        self
    }

    /// Restricts the principal to the given tools.
    #[must_use]
    pub fn only_tools<I: IntoIterator<Item = S>, S: Into<String>>(mut self, tools: I) -> Self {
        self.allowed_tools = Some(tools.into_iter().map(Into::into).collect());
        self
    }

    /// Hides the given tools from the principal (adding to those already hidden): for it they
    /// do not exist — not listed, not found by name, not callable (see [`Principal::may_call`]).
    #[must_use]
    pub fn hide_tools<I: IntoIterator<Item = S>, S: Into<String>>(mut self, tools: I) -> Self {
        let mut hidden: BTreeSet<String> =
            self.hidden_tools.as_deref().cloned().unwrap_or_default();
        hidden.extend(tools.into_iter().map(Into::into));
        self.hidden_tools = (!hidden.is_empty()).then(|| Arc::new(hidden));
        self
    }

    /// Whether any grant covers `required`.
    pub fn holds(&self, required: &Permission) -> bool {
        self.grants.iter().any(|g| g.covers(required))
    }

    /// Whether the tool exists for the principal: not hidden, and in its tool list (if any).
    /// Every listing, lookup and call asks this, so a tool it refuses is reported as unknown.
    pub fn may_call(&self, tool: &str) -> bool {
        self.hidden_tools
            .as_ref()
            .is_none_or(|hidden| !hidden.contains(tool))
            && self
                .allowed_tools
                .as_ref()
                .is_none_or(|set| set.contains(tool))
    }
}

/// Authentication claims of the caller (for example a verified JWT's claims).
pub type AuthClaims = Map<String, Value>;

/// Services keyed by type, for tools that need more than the standard context.
#[derive(Clone, Default)]
pub struct Extensions(HashMap<TypeId, Arc<dyn Any + Send + Sync>>);

impl Extensions {
    /// An empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds (or replaces) the service of type `T`.
    pub fn insert<T: Send + Sync + 'static>(&mut self, value: T) {
        self.0.insert(TypeId::of::<T>(), Arc::new(value));
    }

    /// The service of type `T`, if present.
    pub fn get<T: Send + Sync + 'static>(&self) -> Option<&T> {
        self.0.get(&TypeId::of::<T>())?.downcast_ref()
    }
}

impl fmt::Debug for Extensions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Extensions({} entries)", self.0.len())
    }
}

/// An outbound HTTP request made through the context's client.
///
/// Header values may carry secrets (API keys): clients never log them or put them in errors.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HttpRequest {
    /// The HTTP method, like `GET`.
    pub method: String,
    /// The absolute URL.
    pub url: String,
    /// Request headers, name and value.
    pub headers: Vec<(String, String)>,
    /// The request body, if any.
    pub body: Option<Vec<u8>>,
    /// A tighter cap on the response body than the client's own (never a looser one).
    pub max_response_bytes: Option<u64>,
    /// A tighter time limit for the whole exchange than the client's own.
    pub timeout: Option<std::time::Duration>,
}

impl HttpRequest {
    /// A `GET` of `url`.
    pub fn get(url: impl Into<String>) -> Self {
        Self {
            method: "GET".to_owned(),
            url: url.into(),
            ..Self::default()
        }
    }

    /// Adds a header.
    #[must_use]
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }
}

impl HttpResponse {
    /// The first header named `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// The answer to an [`HttpRequest`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HttpResponse {
    /// The HTTP status code.
    pub status: u16,
    /// Response headers, name and value.
    pub headers: Vec<(String, String)>,
    /// The response body (at most the cap).
    pub body: Vec<u8>,
}

/// The shared HTTP client slot. Implementations enforce the network policy (SSRF checks,
/// redirects, size and time limits) and return its refusals as `authorization` errors.
pub trait HttpClient: Send + Sync {
    /// Sends a request; must give up promptly when `cancel` fires.
    fn send<'a>(
        &'a self,
        request: HttpRequest,
        cancel: &'a CancellationToken,
    ) -> BoxFuture<'a, Result<HttpResponse, ToolError>>;
}

/// Receives progress reports of a running call (MCP progress notifications, for instance).
pub trait ProgressSink: Send + Sync {
    /// Reports `progress` (of `total`, when known) with an optional message.
    fn report(&self, progress: f64, total: Option<f64>, message: Option<&str>);
}

/// Severity of a log message sent to the connected client (RFC 5424 levels, as MCP uses).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum LogLevel {
    /// Detailed information for debugging.
    Debug,
    /// Normal operation.
    Info,
    /// Normal but significant.
    Notice,
    /// Something may be wrong.
    Warning,
    /// Something failed.
    Error,
    /// A critical condition.
    Critical,
    /// Action must be taken at once.
    Alert,
    /// The system is unusable.
    Emergency,
}

impl LogLevel {
    /// Every level, least severe first.
    pub const ALL: [LogLevel; 8] = [
        Self::Debug,
        Self::Info,
        Self::Notice,
        Self::Warning,
        Self::Error,
        Self::Critical,
        Self::Alert,
        Self::Emergency,
    ];

    /// The wire name (`"warning"`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Debug => "debug",
            Self::Info => "info",
            Self::Notice => "notice",
            Self::Warning => "warning",
            Self::Error => "error",
            Self::Critical => "critical",
            Self::Alert => "alert",
            Self::Emergency => "emergency",
        }
    }
}

/// A request for the connected client's model to write a reply (MCP sampling).
#[derive(Clone, Debug, PartialEq)]
pub struct SamplingRequest {
    /// The user message the model should answer.
    pub prompt: String,
    /// A system prompt for the model, if any.
    pub system_prompt: Option<String>,
    /// Most tokens the reply may have.
    pub max_tokens: u32,
}

/// The client's model reply.
#[derive(Clone, Debug, PartialEq)]
pub struct SamplingReply {
    /// The reply's text.
    pub text: String,
    /// The model that wrote it, as the client names it.
    pub model: String,
    /// Why the model stopped, as the client says.
    pub stop_reason: Option<String>,
}

/// The client user's answer to an elicitation.
#[derive(Clone, Debug, PartialEq)]
pub enum ElicitAnswer {
    /// The user submitted the form: the values, matching the requested schema.
    Accept(Map<String, Value>),
    /// The user explicitly said no.
    Decline,
    /// The user dismissed the request without choosing.
    Cancel,
}

/// A root the client exposes (a directory or file the user opened; MCP `roots/list`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Root {
    /// Its URI (`file:///home/me/project`).
    pub uri: String,
    /// Its name, as the client shows it.
    pub name: Option<String>,
}

/// The client connected to the current call (an MCP session): where log messages go, and who
/// can answer sampling and elicitation requests. Implemented by the server's MCP adapter.
pub trait ClientBridge: Send + Sync {
    /// Sends a log message to the client (dropped if below the client's chosen level).
    fn log(&self, level: LogLevel, logger: Option<&str>, data: Value);

    /// Whether the client declared it can answer elicitation requests.
    fn can_elicit(&self) -> bool;

    /// Whether the client declared it can answer sampling requests.
    fn can_sample(&self) -> bool;

    /// Asks the client's model for a reply.
    fn sample(&self, request: SamplingRequest) -> BoxFuture<'_, Result<SamplingReply, ToolError>>;

    /// Asks the client's user to fill in a form described by `schema` (a flat JSON Schema object).
    fn elicit(
        &self,
        message: String,
        schema: Value,
    ) -> BoxFuture<'_, Result<ElicitAnswer, ToolError>>;

    /// Whether the client declared it can list its roots.
    fn can_list_roots(&self) -> bool {
        false
    }

    /// Asks the client for its roots.
    fn list_roots(&self) -> BoxFuture<'_, Result<Vec<Root>, ToolError>> {
        Box::pin(std::future::ready(Err(ToolError::unavailable(
            "This client connection cannot list the client's roots",
        )
        .permanent())))
    }

    /// [`elicit`](Self::elicit), naming the question `key`. A client that answers over a
    /// stateless revision (MCP 2026-07-28) is asked in an input-required result, where `key`
    /// names the question and its answer on the next round: a tool that asks several questions
    /// gives each its own key, the same on every round. A live session ignores the key.
    fn elicit_as(
        &self,
        key: &str,
        message: String,
        schema: Value,
    ) -> BoxFuture<'_, Result<ElicitAnswer, ToolError>> {
        let _ = key;
        self.elicit(message, schema)
    }

    /// [`sample`](Self::sample), naming the question `key` (see [`elicit_as`](Self::elicit_as)).
    fn sample_as(
        &self,
        key: &str,
        request: SamplingRequest,
    ) -> BoxFuture<'_, Result<SamplingReply, ToolError>> {
        let _ = key;
        self.sample(request)
    }

    /// [`list_roots`](Self::list_roots), naming the question `key` (see
    /// [`elicit_as`](Self::elicit_as)).
    fn list_roots_as(&self, key: &str) -> BoxFuture<'_, Result<Vec<Root>, ToolError>> {
        let _ = key;
        self.list_roots()
    }
}

/// The context of one attempt of one call.
#[derive(Clone)]
pub struct ToolContext {
    pub(crate) principal: Arc<Principal>,
    pub(crate) call_id: CallId,
    pub(crate) tool: ToolName,
    pub(crate) cancel: CancellationToken,
    pub(crate) auth: Arc<AuthClaims>,
    pub(crate) http: Option<Arc<dyn HttpClient>>,
    pub(crate) extensions: Arc<Extensions>,
    pub(crate) progress: Option<Arc<dyn ProgressSink>>,
    pub(crate) client: Option<Arc<dyn ClientBridge>>,
    pub(crate) attachments: Attachments,
    pub(crate) attempt: u32,
}

impl ToolContext {
    /// A context for calling a handler directly (tests, embedding without the pipeline).
    pub fn detached(tool: ToolName, principal: Principal) -> Self {
        Self {
            principal: Arc::new(principal),
            call_id: CallId::new(),
            tool,
            cancel: CancellationToken::new(),
            auth: Arc::default(),
            http: None,
            extensions: Arc::default(),
            progress: None,
            client: None,
            attachments: Attachments::default(),
            attempt: 1,
        }
    }

    /// Who is calling.
    pub fn principal(&self) -> &Principal {
        &self.principal
    }

    /// The caller's id.
    pub fn user_id(&self) -> &PrincipalId {
        &self.principal.id
    }

    /// This call's id.
    pub fn call_id(&self) -> CallId {
        self.call_id
    }

    /// The tool being called.
    pub fn tool(&self) -> &ToolName {
        &self.tool
    }

    /// Which attempt this is (1-based).
    pub fn attempt(&self) -> u32 {
        self.attempt
    }

    /// The abort signal: fires on cancellation and on timeout.
    pub fn cancellation(&self) -> &CancellationToken {
        &self.cancel
    }

    /// Whether the call was cancelled or timed out.
    pub fn is_cancelled(&self) -> bool {
        self.cancel.is_cancelled()
    }

    /// Call before any I/O: `Err(cancelled)` if the call was aborted
    /// (`docs/envelope.md#error-kinds`).
    pub fn check_cancelled(&self) -> Result<(), ToolError> {
        if self.cancel.is_cancelled() {
            Err(ToolError::cancelled())
        } else {
            Ok(())
        }
    }

    /// Authentication claims of the caller.
    pub fn auth(&self) -> &AuthClaims {
        &self.auth
    }

    /// The shared HTTP client, or an `unavailable` error saying none is configured.
    pub fn http(&self) -> Result<&dyn HttpClient, ToolError> {
        self.http.as_deref().ok_or_else(|| {
            ToolError::unavailable(format!(
                "Tool {} needs network access but no HTTP client is configured",
                self.tool
            ))
            .permanent()
        })
    }

    /// The service of type `T`, if the embedder provided one.
    pub fn extension<T: Send + Sync + 'static>(&self) -> Option<&T> {
        self.extensions.get()
    }

    /// Adds a content block (image, audio, embedded resource, text) to this call's result.
    /// Blocks from a failed attempt are discarded before a retry.
    pub fn attach(&self, content: Content) {
        self.attachments.push(content);
    }

    /// Sends a log message to the connected client, if there is one; always traced too.
    pub fn log(&self, level: LogLevel, message: impl Into<String>) {
        let message = message.into();
        tracing::debug!(tool = %self.tool, level = level.as_str(), %message, "tool log");
        if let Some(client) = &self.client {
            client.log(level, Some(self.tool.as_str()), Value::String(message));
        }
    }

    /// The connected client, or an `unavailable` error naming what the tool needed it for.
    pub fn client(&self, purpose: &str) -> Result<&dyn ClientBridge, ToolError> {
        self.client.as_deref().ok_or_else(|| {
            ToolError::unavailable(format!(
                "Tool {} needs a connected MCP client for {purpose}; call it over MCP",
                self.tool
            ))
            .permanent()
        })
    }

    /// Reports progress (ignored when nobody listens).
    pub fn report_progress(&self, progress: f64, total: Option<f64>, message: Option<&str>) {
        if let Some(sink) = &self.progress {
            sink.report(progress, total, message);
        }
    }
}

impl fmt::Debug for ToolContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ToolContext")
            .field("principal", &self.principal.id)
            .field("call_id", &self.call_id)
            .field("tool", &self.tool)
            .field("attempt", &self.attempt)
            .field("cancelled", &self.cancel.is_cancelled())
            .finish_non_exhaustive()
    }
}
