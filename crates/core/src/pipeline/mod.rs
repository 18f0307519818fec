//! The call pipeline (ARCHITECTURE.md, "One pipeline, fixed order"): one ordered chain of stages,
//! the same for every interface.
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
mod metrics;
mod output_limit;
mod ratelimit;
mod request;
mod runs;
mod stages;

use std::fmt;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
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
pub use output_limit::json_len_at_most;
pub use ratelimit::{
    PrincipalQuotaStage, Quota, RateLimit, RateLimitStage, SharedCounter, SharedSlot,
};
pub use request::CallRequest;
pub use runs::{MemoryRuns, RunBudgetStage, RunLedger, Settled, run_not_found};
pub use stages::RetryPolicy;

use crate::content::Attachments;
use crate::context::{HttpClient, Principal, ToolContext};
use crate::envelope::{CallId, Outcome, ToolResult};
use crate::error::ToolError;
use crate::registry::{RegisteredTool, Registry};
use crate::spec::ToolSpec;
use crate::tool::{BoxFuture, ToolOutput};
use metrics::CallMetrics;

/// The state of a call as it moves through the stages.
pub struct Call {
    /// The request as given.
    pub request: CallRequest,
    /// Set by the resolve stage.
    pub tool: Option<RegisteredTool>,
    /// The arguments; after input validation, with defaults applied.
    pub input: Value,
    /// Attempts made so far.
    pub attempts: u32,
    /// Whether output was cut to the tool's limit.
    pub truncated: bool,
    /// Where the full output is kept, when a stage kept it apart.
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
    /// The envelope the caller gets.
    pub result: &'a ToolResult,
    /// `None` when the tool was not found.
    pub spec: Option<&'a ToolSpec>,
    /// Who called.
    pub principal: &'a Principal,
    /// Where the call came from, when the caller said.
    pub origin: Option<&'a crate::CallOrigin>,
    /// Who cancelled it (see [`crate::CancelNote`]), or `timeout` for a call that ran out of
    /// time; `None` otherwise.
    pub cancelled_by: Option<&'a str>,
}

/// Sees every finished call: metrics, logs, the audit log, event streams.
pub trait CallObserver: Send + Sync + 'static {
    /// Sees one finished call; must not fail or block for long.
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
            let marker = crate::envelope::STAGE_PANICKED;
            Err(ToolError::execution(format!(
                "The call failed inside toolgate {marker}{detail}); please report this"
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
        // Attached content, already fitted into the output limit beside the data (the output
        // checks stage), goes out with data only.
        let content = match &outcome {
            Ok(_) => call.attachments.take(),
            Err(_) => Vec::new(),
        };
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
        self.metrics.record(&result, call.tool.is_some());
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

/// The text of a panic payload.
pub fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".to_owned())
}
