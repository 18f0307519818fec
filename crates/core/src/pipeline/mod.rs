//! The call pipeline (DESIGN.md §3): one ordered chain of stages, the same for every interface.
//!
//! ```text
//! resolve → authorize → validate input (+defaults) → approval → [extra stages, e.g. rate limit]
//!   → output checks (schema, cap) → retry → executor (timeout, cancellation, panics, isolation)
//! → envelope → observers (metrics, tracing, audit)
//! ```
//!
//! A [`Stage`] wraps the rest of the chain (like a tower `Layer`): it may stop the call with an
//! error, change the call state, or post-process the output. The [`Executor`] runs one attempt.
//! Later capabilities plug in as one more stage ([`PipelineBuilder::stage`]), one more executor
//! ([`PipelineBuilder::executor`]), one more approval handler or one more observer — never as a
//! second code path.

mod approval;
mod executor;
mod ratelimit;
mod stages;

use std::collections::HashMap;
use std::fmt;
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use futures_util::FutureExt;
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

pub use approval::{
    ApprovalHandler, ApprovalRequest, AutoDeny, Decision, PreApproved, PromptApproval,
};
pub use executor::{Executor, InProcessExecutor};
pub use ratelimit::{PrincipalQuotaStage, Quota, RateLimit, RateLimitStage};
pub use stages::{RetryPolicy, json_len_at_most};

use crate::content::{Attachments, Content};
use crate::context::{
    AuthClaims, ClientBridge, Extensions, HttpClient, Principal, ProgressSink, ToolContext,
};
use crate::envelope::{CallId, Outcome, ToolResult};
use crate::error::ToolError;
use crate::registry::{RegisteredTool, Registry};
use crate::spec::ToolSpec;
use crate::telemetry;
use crate::tool::{BoxFuture, ToolOutput};

/// A request to call a tool.
#[derive(Clone)]
pub struct CallRequest {
    pub tool: String,
    pub arguments: Value,
    pub principal: Arc<Principal>,
    pub call_id: CallId,
    /// Fires to cancel the call (seed 000's abort signal).
    pub cancel: CancellationToken,
    pub auth: Arc<AuthClaims>,
    pub extensions: Arc<Extensions>,
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
        }
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

/// The state of a call as it moves through the stages.
pub struct Call {
    pub request: CallRequest,
    /// Set by the resolve stage.
    pub tool: Option<RegisteredTool>,
    /// The arguments; after input validation, with defaults applied.
    pub input: Value,
    /// Attempts made so far.
    pub attempts: u32,
    pub truncated: bool,
    pub output_ref: Option<String>,
    /// When the call started: the envelope's `fetchedAt`, for stages that record the call.
    pub fetched_at: DateTime<Utc>,
    pub(crate) http: Option<Arc<dyn HttpClient>>,
    pub(crate) attachments: Attachments,
}

impl Call {
    /// The resolved tool's spec (after the resolve stage).
    pub fn spec(&self) -> Option<&ToolSpec> {
        self.tool.as_ref().map(RegisteredTool::spec)
    }

    /// A context for one attempt, with its own child cancellation token.
    pub fn context(&self, cancel: CancellationToken) -> Option<ToolContext> {
        let spec = self.spec()?;
        Some(ToolContext {
            principal: Arc::clone(&self.request.principal),
            call_id: self.request.call_id,
            tool: spec.name().clone(),
            cancel,
            auth: Arc::clone(&self.request.auth),
            http: self.http.clone(),
            extensions: Arc::clone(&self.request.extensions),
            progress: self.request.progress.clone(),
            client: self.request.client.clone(),
            attachments: self.attachments.clone(),
            attempt: self.attempts,
        })
    }
}

impl fmt::Debug for Call {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Call")
            .field("request", &self.request)
            .field("attempts", &self.attempts)
            .finish_non_exhaustive()
    }
}

/// One step of the pipeline. Call `next.run(call)` to continue; return without calling it to stop.
pub trait Stage: Send + Sync + 'static {
    /// Short name, for logs.
    fn name(&self) -> &'static str;

    /// Handles the call.
    fn run<'a>(&'a self, call: &'a mut Call, next: Next<'a>) -> BoxFuture<'a, ToolOutput>;
}

/// The rest of the chain after a stage. `Copy`, so a stage may run it more than once (retries).
#[derive(Clone, Copy)]
pub struct Next<'a> {
    rest: &'a [Arc<dyn Stage>],
    executor: &'a dyn Executor,
}

impl<'a> Next<'a> {
    /// Runs the remaining stages and the executor.
    pub fn run<'b>(self, call: &'b mut Call) -> BoxFuture<'b, ToolOutput>
    where
        'a: 'b,
    {
        match self.rest.split_first() {
            Some((stage, rest)) => stage.run(
                call,
                Next {
                    rest,
                    executor: self.executor,
                },
            ),
            None => self.executor.execute(call),
        }
    }
}

/// What observers see after each call.
#[derive(Debug)]
pub struct CallRecord<'a> {
    pub result: &'a ToolResult,
    /// `None` when the tool was not found.
    pub spec: Option<&'a ToolSpec>,
    pub principal: &'a Principal,
    /// Where the call came from, when the caller said.
    pub origin: Option<&'a crate::CallOrigin>,
    /// Who cancelled it (see [`crate::CancelNote`]), or `timeout` for a call that ran out of
    /// time; `None` otherwise.
    pub cancelled_by: Option<&'a str>,
}

/// Sees every finished call: metrics, logs, the audit log, event streams.
pub trait CallObserver: Send + Sync + 'static {
    fn on_call<'a>(&'a self, record: &'a CallRecord<'a>) -> BoxFuture<'a, ()>;
}

/// Builds a [`Pipeline`].
pub struct PipelineBuilder {
    registry: Arc<Registry>,
    approval: Arc<dyn ApprovalHandler>,
    extra: Vec<Arc<dyn Stage>>,
    executor: Arc<dyn Executor>,
    observers: Vec<Arc<dyn CallObserver>>,
    http: Option<Arc<dyn HttpClient>>,
    retry: RetryPolicy,
}

impl PipelineBuilder {
    /// Defaults: auto-deny approvals, in-process executor, default retry policy, no HTTP client.
    pub fn new(registry: Arc<Registry>) -> Self {
        Self {
            registry,
            approval: Arc::new(AutoDeny::default()),
            extra: Vec::new(),
            executor: Arc::new(InProcessExecutor),
            observers: Vec::new(),
            http: None,
            retry: RetryPolicy::default(),
        }
    }

    /// The approval handler used unless a request brings its own.
    #[must_use]
    pub fn approval(mut self, handler: Arc<dyn ApprovalHandler>) -> Self {
        self.approval = handler;
        self
    }

    /// Adds a stage after the approval gate and before execution (rate limits, quotas, …).
    #[must_use]
    pub fn stage(mut self, stage: Arc<dyn Stage>) -> Self {
        self.extra.push(stage);
        self
    }

    /// Replaces the executor (for example with a sandboxing one).
    #[must_use]
    pub fn executor(mut self, executor: Arc<dyn Executor>) -> Self {
        self.executor = executor;
        self
    }

    /// Adds an observer (audit, events, …).
    #[must_use]
    pub fn observer(mut self, observer: Arc<dyn CallObserver>) -> Self {
        self.observers.push(observer);
        self
    }

    /// Sets the HTTP client handed to tools.
    #[must_use]
    pub fn http_client(mut self, client: Arc<dyn HttpClient>) -> Self {
        self.http = Some(client);
        self
    }

    /// Sets the retry backoff.
    #[must_use]
    pub fn retry_policy(mut self, policy: RetryPolicy) -> Self {
        self.retry = policy;
        self
    }

    /// Finishes the pipeline.
    pub fn build(self) -> Pipeline {
        let mut chain: Vec<Arc<dyn Stage>> = vec![
            Arc::new(stages::Resolve {
                registry: Arc::clone(&self.registry),
            }),
            Arc::new(stages::Authorize),
            Arc::new(stages::ValidateInput),
            Arc::new(stages::Approval {
                default: self.approval,
            }),
        ];
        chain.extend(self.extra);
        chain.push(Arc::new(stages::OutputChecks));
        chain.push(Arc::new(stages::Retry { policy: self.retry }));
        Pipeline {
            registry: self.registry,
            chain: chain.into(),
            executor: self.executor,
            observers: self.observers.into(),
            http: self.http,
            metrics: Arc::default(),
        }
    }
}

/// Each tool's call counter and latency histogram, looked up in the `metrics` recorder once per
/// pipeline: the recorder's lookup (building a labelled key, hashing it) costs more than the
/// call of a trivial tool.
#[derive(Default)]
struct CallMetrics {
    by_tool: std::sync::RwLock<HashMap<String, ToolMetrics>>,
}

#[derive(Clone)]
struct ToolMetrics {
    calls: metrics::Counter,
    duration: metrics::Histogram,
}

/// Tools whose handles are kept; past it (a registry churning through names) the recorder is
/// asked each time, as before.
const MAX_CACHED_TOOLS: usize = 4096;

impl CallMetrics {
    fn for_tool(&self, tool: &str) -> ToolMetrics {
        if let Some(found) = self
            .by_tool
            .read()
            .ok()
            .and_then(|map| map.get(tool).cloned())
        {
            return found;
        }
        let handles = ToolMetrics {
            calls: metrics::counter!(telemetry::CALLS, "tool" => tool.to_owned()),
            duration: metrics::histogram!(telemetry::CALL_DURATION, "tool" => tool.to_owned()),
        };
        if let Ok(mut map) = self.by_tool.write()
            && map.len() < MAX_CACHED_TOOLS
        {
            map.insert(tool.to_owned(), handles.clone());
        }
        handles
    }
}

/// The call pipeline. Cheap to clone; share one per process.
#[derive(Clone)]
pub struct Pipeline {
    registry: Arc<Registry>,
    chain: Arc<[Arc<dyn Stage>]>,
    executor: Arc<dyn Executor>,
    observers: Arc<[Arc<dyn CallObserver>]>,
    http: Option<Arc<dyn HttpClient>>,
    metrics: Arc<CallMetrics>,
}

impl fmt::Debug for Pipeline {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = self.chain.iter().map(|s| s.name()).collect();
        f.debug_struct("Pipeline").field("stages", &names).finish()
    }
}

impl Pipeline {
    /// A pipeline with every default (see [`PipelineBuilder::new`]).
    pub fn new(registry: Arc<Registry>) -> Self {
        PipelineBuilder::new(registry).build()
    }

    /// The registry this pipeline resolves tools in.
    pub fn registry(&self) -> &Arc<Registry> {
        &self.registry
    }

    /// Names of the stages, in order.
    pub fn stage_names(&self) -> Vec<&'static str> {
        self.chain.iter().map(|s| s.name()).collect()
    }

    /// Runs one call through every stage. Never fails and never panics: every outcome, a
    /// panicking handler, stage or observer included, is a [`ToolResult`].
    pub async fn call(&self, request: CallRequest) -> ToolResult {
        let fetched_at: DateTime<Utc> = Utc::now();
        let started = Instant::now();
        let span = tracing::info_span!(
            "execute_tool",
            otel.name = %format_args!("execute_tool {}", request.tool),
            gen_ai.operation.name = "execute_tool",
            gen_ai.tool.name = %request.tool,
            gen_ai.tool.call.id = %request.call_id,
            toolgate.principal = %request.principal.id,
            toolgate.error_kind = tracing::field::Empty,
        );
        let cancel = request.cancel.clone();
        let mut call = Call {
            input: request.arguments.clone(),
            request,
            tool: None,
            attempts: 0,
            truncated: false,
            output_ref: None,
            fetched_at,
            http: self.http.clone(),
            attachments: Attachments::default(),
        };
        let next = Next {
            rest: &self.chain,
            executor: &*self.executor,
        };
        // Handler panics become results in the executor; this contains panics of any stage too,
        // whether raised while building the chain's future or while polling it.
        let stage_panic = |panic: Box<dyn std::any::Any + Send>| -> ToolOutput {
            let detail = panic_message(panic.as_ref());
            tracing::error!(panic = %detail, "a pipeline stage panicked");
            Err(ToolError::execution(format!(
                "The call failed inside toolgate (a pipeline stage panicked: {detail}); please report this"
            ))
            .permanent())
        };
        let call_ref = &mut call;
        let chain: BoxFuture<'_, ToolOutput> =
            match std::panic::catch_unwind(AssertUnwindSafe(move || {
                let call = call_ref; // moved, so the closure is FnOnce
                next.run(call)
            })) {
                Ok(future) => Box::pin(async move {
                    AssertUnwindSafe(future)
                        .catch_unwind()
                        .await
                        .unwrap_or_else(stage_panic)
                }),
                Err(panic) => {
                    let out = stage_panic(panic);
                    Box::pin(async move { out })
                }
            };
        let outcome = async {
            tokio::select! {
                biased;
                () = cancel.cancelled() => Err(ToolError::cancelled()),
                out = chain => out,
            }
        }
        .instrument(span.clone())
        .await;
        let mut content = match &outcome {
            Ok(_) => call.attachments.take(),
            Err(_) => Vec::new(),
        };
        // Attached content shares the tool's output limit with the data (after the data's own
        // cap): blocks are kept in order while they fit, the rest are left out and named.
        let content_cut = match (&outcome, call.spec()) {
            (Ok(data), Some(spec)) if !content.is_empty() => {
                let max = usize::try_from(spec.limits().max_output_bytes).unwrap_or(usize::MAX);
                fit_content(&mut content, max.saturating_sub(output_len(data)))
            }
            _ => false,
        };
        if content_cut {
            call.truncated = true;
        }
        let mut result = self.envelope(
            call_parts(&call),
            call.fetched_at,
            started.elapsed(),
            outcome,
        );
        result.content = content;
        if let Some(kind) = result.error_kind() {
            span.record("toolgate.error_kind", kind.as_str());
        }
        self.record_metrics(&result, call.tool.is_some());
        let cancelled_by = match result.error_kind() {
            Some(crate::ErrorKind::Cancelled) => call.request.cancelled_by.get(),
            Some(crate::ErrorKind::Timeout) => Some("timeout"),
            _ => None,
        };
        let record = CallRecord {
            result: &result,
            spec: call.spec(),
            principal: &call.request.principal,
            origin: call.request.origin.as_ref(),
            cancelled_by,
        };
        for observer in self.observers.iter() {
            let observed =
                match std::panic::catch_unwind(AssertUnwindSafe(|| observer.on_call(&record))) {
                    Ok(future) => {
                        AssertUnwindSafe(future)
                            .catch_unwind()
                            .instrument(span.clone())
                            .await
                    }
                    Err(panic) => Err(panic),
                };
            if let Err(panic) = observed {
                tracing::error!(panic = %panic_message(panic.as_ref()), "a call observer panicked");
            }
        }
        result
    }

    /// Counts the call and its latency per tool, and a failure per tool and error kind.
    fn record_metrics(&self, result: &ToolResult, resolved: bool) {
        // Label by the tool only when it exists: callers' made-up names must not mint label values.
        let tool = if resolved {
            result.tool.as_str()
        } else {
            "(unknown)"
        };
        let handles = self.metrics.for_tool(tool);
        handles.calls.increment(1);
        handles.duration.record(result.duration_ms / 1000.0);
        if let Some(kind) = result.error_kind() {
            metrics::counter!(telemetry::CALL_ERRORS, "tool" => tool.to_owned(), "error_kind" => kind.as_str())
                .increment(1);
            tracing::info!(target: "toolgate::calls", tool = %result.tool, call_id = %result.call_id, error_kind = %kind, error = result.error().unwrap_or_default(), "tool call failed");
        } else {
            tracing::debug!(target: "toolgate::calls", tool = %result.tool, call_id = %result.call_id, attempts = result.attempts, "tool call succeeded");
        }
    }

    fn envelope(
        &self,
        parts: Parts<'_>,
        fetched_at: DateTime<Utc>,
        took: Duration,
        outcome: ToolOutput,
    ) -> ToolResult {
        let input = match parts.spec {
            Some(spec) => spec.redact(parts.input),
            None => parts.input.clone(),
        };
        let approval_id = outcome
            .as_ref()
            .err()
            .and_then(|e| e.approval_id().map(str::to_owned));
        ToolResult {
            tool: parts.tool.to_owned(),
            call_id: parts.call_id,
            fetched_at,
            input,
            approval_id,
            outcome: match outcome {
                Ok(data) => Outcome::Data(data),
                Err(e) => Outcome::Error {
                    kind: e.kind(),
                    message: e.message().to_owned(),
                },
            },
            attempts: parts.attempts,
            duration_ms: took.as_secs_f64() * 1000.0,
            truncated: parts.truncated,
            output_ref: parts.output_ref.clone(),
            content: Vec::new(),
        }
    }
}

struct Parts<'a> {
    tool: &'a str,
    call_id: CallId,
    spec: Option<&'a ToolSpec>,
    input: &'a Value,
    attempts: u32,
    truncated: bool,
    output_ref: &'a Option<String>,
}

fn call_parts(call: &Call) -> Parts<'_> {
    Parts {
        tool: &call.request.tool,
        call_id: call.request.call_id,
        spec: call.spec(),
        input: &call.input,
        attempts: call.attempts,
        truncated: call.truncated,
        output_ref: &call.output_ref,
    }
}

/// Bytes `data` counts toward the output limit: a string's text, anything else its compact JSON.
fn output_len(data: &Value) -> usize {
    match data {
        Value::String(s) => s.len(),
        other => stages::json_len(other),
    }
}

/// Keeps the longest run of leading blocks whose payloads fit in `budget` bytes; when blocks are
/// left out, a text block saying so takes their place (it does not count). Whether any was.
fn fit_content(content: &mut Vec<Content>, budget: usize) -> bool {
    let mut used = 0usize;
    let keep = content
        .iter()
        .take_while(|block| {
            used = used.saturating_add(block.payload_len());
            used <= budget
        })
        .count();
    if keep == content.len() {
        return false;
    }
    let left_out: usize = content[keep..].iter().map(Content::payload_len).sum();
    let count = content.len() - keep;
    content.truncate(keep);
    content.push(Content::text(format!(
        "[toolgate: {count} content block(s) of {left_out} bytes left out: the result is over the tool's max_output_bytes]"
    )));
    true
}

/// The text of a panic payload.
pub(crate) fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".to_owned())
}
