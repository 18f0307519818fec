//! [`CallRequest`]: what a caller asks the pipeline to run, with its builder methods (who asks,
//! under which id and token, with which approval handler, from where).

use std::fmt;
use std::sync::{Arc, OnceLock};

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::approval::ApprovalHandler;
use crate::context::{AuthClaims, ClientBridge, Extensions, Principal, ProgressSink};
use crate::envelope::CallId;

/// A request to call a tool.
#[derive(Clone)]
pub struct CallRequest {
    /// The tool's name as the caller wrote it.
    pub tool: String,
    /// The arguments, a JSON object.
    pub arguments: Value,
    /// Who calls.
    pub principal: Arc<Principal>,
    /// The call's id (a fresh UUIDv7 unless the caller sets one).
    pub call_id: CallId,
    /// Fires to cancel the call (the result is `cancelled`, `docs/envelope.md#error-kinds`).
    pub cancel: CancellationToken,
    /// What the caller's authentication established (token claims).
    pub auth: Arc<AuthClaims>,
    /// Typed services the tool may need, handed through to its context.
    pub extensions: Arc<Extensions>,
    /// Where the tool's progress reports go, when someone listens.
    pub progress: Option<Arc<dyn ProgressSink>>,
    /// Overrides the pipeline's approval handler for this call (e.g. `--yes`, MCP elicitation).
    pub approval: Option<Arc<dyn ApprovalHandler>>,
    /// The connected client (logging, sampling, elicitation), when there is one.
    pub client: Option<Arc<dyn ClientBridge>>,
    /// Repeating a call with the same key returns the same approval or result.
    pub idempotency_key: Option<String>,
    /// Why the caller wants to run it (shown to an approver).
    pub reason: Option<String>,
    /// Where the call came from (kept in the audit log and with its approval).
    pub origin: Option<crate::CallOrigin>,
    /// Who cancelled the call: set by whoever fires `cancel`, just before.
    pub cancelled_by: crate::CancelNote,
    /// The run whose budget this call is counted against (`None`: not counted).
    pub run: Option<crate::RunId>,
    /// Commit a `started` audit entry before the call runs whatever the tool's effect (a call
    /// that changes things always gets one): set for a background task, so that another instance
    /// on the same database finds it while it runs. The audit stage notifies it once the entry
    /// is committed (`notify_one`: the permit waits for a later `notified`).
    pub record_start: Option<Arc<tokio::sync::Notify>>,
}

impl CallRequest {
    /// A call by the local operator with a fresh id and token.
    pub fn new(tool: impl Into<String>, arguments: Value) -> Self {
        // Shared, not built per call: servers build a request for every call and most keep
        // these defaults (or replace the principal right away).
        static LOCAL: OnceLock<Arc<Principal>> = OnceLock::new();
        static NO_CLAIMS: OnceLock<Arc<AuthClaims>> = OnceLock::new();
        static NO_EXTENSIONS: OnceLock<Arc<Extensions>> = OnceLock::new();
        Self {
            tool: tool.into(),
            arguments,
            principal: Arc::clone(LOCAL.get_or_init(|| Arc::new(Principal::local()))),
            call_id: CallId::new(),
            cancel: CancellationToken::new(),
            auth: Arc::clone(NO_CLAIMS.get_or_init(Arc::default)),
            extensions: Arc::clone(NO_EXTENSIONS.get_or_init(Arc::default)),
            progress: None,
            approval: None,
            client: None,
            idempotency_key: None,
            reason: None,
            origin: None,
            cancelled_by: crate::CancelNote::default(),
            run: None,
            record_start: None,
        }
    }

    /// Commits a `started` audit entry before the call runs, even for a read-only tool, and
    /// notifies `committed` once it is (see
    /// [`CallRequest::record_start`](Self#structfield.record_start)).
    #[must_use]
    pub fn record_start(mut self, committed: Arc<tokio::sync::Notify>) -> Self {
        self.record_start = Some(committed);
        self
    }

    /// Counts the call against `run`'s budget (see [`crate::RunBudgetStage`]).
    #[must_use]
    pub fn run(mut self, run: crate::RunId) -> Self {
        self.run = Some(run);
        self
    }

    /// Sets where the call came from.
    #[must_use]
    pub fn origin(mut self, origin: crate::CallOrigin) -> Self {
        self.origin = Some(origin);
        self
    }

    /// Sets the call id (a call run later under an approval keeps the id it was asked with).
    #[must_use]
    pub fn call_id(mut self, id: CallId) -> Self {
        self.call_id = id;
        self
    }

    /// Sets the idempotency key.
    #[must_use]
    pub fn idempotency_key(mut self, key: impl Into<String>) -> Self {
        self.idempotency_key = Some(key.into());
        self
    }

    /// Sets the reason shown to an approver.
    #[must_use]
    pub fn reason(mut self, reason: impl Into<String>) -> Self {
        self.reason = Some(reason.into());
        self
    }

    /// Sets the caller.
    #[must_use]
    pub fn principal(mut self, principal: Principal) -> Self {
        self.principal = Arc::new(principal);
        self
    }

    /// Sets the cancellation token.
    #[must_use]
    pub fn cancel_token(mut self, token: CancellationToken) -> Self {
        self.cancel = token;
        self
    }

    /// Sets the approval handler for this call.
    #[must_use]
    pub fn approval(mut self, handler: Arc<dyn ApprovalHandler>) -> Self {
        self.approval = Some(handler);
        self
    }

    /// Sets the auth claims.
    #[must_use]
    pub fn auth(mut self, claims: AuthClaims) -> Self {
        self.auth = Arc::new(claims);
        self
    }

    /// Sets the typed extensions handlers can read.
    #[must_use]
    pub fn extensions(mut self, extensions: Extensions) -> Self {
        self.extensions = Arc::new(extensions);
        self
    }

    /// Sets the progress sink.
    #[must_use]
    pub fn progress(mut self, sink: Arc<dyn ProgressSink>) -> Self {
        self.progress = Some(sink);
        self
    }

    /// Connects the call to a client (logging, sampling, elicitation).
    #[must_use]
    pub fn client(mut self, client: Arc<dyn ClientBridge>) -> Self {
        self.client = Some(client);
        self
    }
}

impl fmt::Debug for CallRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CallRequest")
            .field("tool", &self.tool)
            .field("principal", &self.principal.id)
            .field("call_id", &self.call_id)
            .finish_non_exhaustive()
    }
}
