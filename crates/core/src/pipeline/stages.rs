//! The built-in stages: resolve, authorize, validate input, approval, output checks and retry.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use super::approval::{ApprovalHandler, ApprovalRequest, Decision};
use super::output_limit;
use super::{Call, Next, Stage};
use crate::envelope::ErrorKind;
use crate::error::ToolError;
use crate::registry::Registry;
use crate::schema;
use crate::tool::{BoxFuture, ToolOutput};

/// Finds the tool; an unknown name is a `not_found` result (`docs/envelope.md#error-kinds`), a
/// withheld one ([`Registry::withhold`]) an `unavailable` result with the withholding's reason.
pub(super) struct Resolve {
    pub(super) registry: Arc<Registry>,
}

impl Stage for Resolve {
    fn name(&self) -> &'static str {
        "resolve"
    }

    fn run<'a>(&'a self, call: &'a mut Call, next: Next<'a>) -> BoxFuture<'a, ToolOutput> {
        let snapshot = self.registry.snapshot();
        let principal = &call.request.principal;
        // A tool outside the principal's allowed tools is "not found", word for word like a
        // tool that does not exist: authorization failures never reveal that it exists.
        match snapshot
            .get(&call.request.tool)
            .filter(|t| principal.may_call(t.spec().name().as_str()))
        {
            Some(tool) => {
                call.tool = Some(tool.clone());
                next.run(call)
            }
            // A withheld tool is unavailable, with the reason — only to a principal that may
            // call it; to the others it does not exist.
            None if principal.may_call(&call.request.tool)
                && snapshot.withheld_reason(&call.request.tool).is_some() =>
            {
                let reason = snapshot
                    .withheld_reason(&call.request.tool)
                    .unwrap_or_default();
                let error = ToolError::unavailable(reason).permanent();
                Box::pin(async move { Err(error) })
            }
            None => {
                let hint = suggest(&snapshot, &call.request.tool, principal)
                    .map(|s| format!(" Did you mean {s}?"))
                    .unwrap_or_default();
                let msg = format!(
                    "Tool not found: {}.{hint} List the available tools to find the right name.",
                    call.request.tool
                );
                Box::pin(async move { Err(ToolError::new(ErrorKind::NotFound, msg)) })
            }
        }
    }
}

/// The closest registered name, for registries small enough to scan.
fn suggest(
    snapshot: &crate::registry::Snapshot,
    wanted: &str,
    principal: &crate::context::Principal,
) -> Option<String> {
    if snapshot.len() > 2000 || wanted.len() > 128 {
        return None;
    }
    let wanted_lower = wanted.to_lowercase().replace(['-', ' '], "_");
    snapshot
        .iter()
        .filter(|t| principal.may_call(t.spec().name().as_str()))
        .map(|t| {
            (
                edit_distance(&wanted_lower, t.spec().name().as_str()),
                t.spec().name().to_string(),
            )
        })
        .filter(|(d, name)| *d <= 2.max(name.len() / 4))
        .min()
        .map(|(_, n)| n)
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let cost = usize::from(ca != *cb);
            cur[j + 1] = (prev[j] + cost).min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

/// Checks the principal's tool list and that it holds every required permission.
pub(super) struct Authorize;

impl Stage for Authorize {
    fn name(&self) -> &'static str {
        "authorize"
    }

    fn run<'a>(&'a self, call: &'a mut Call, next: Next<'a>) -> BoxFuture<'a, ToolOutput> {
        if let Some(spec) = call.spec() {
            let principal = &call.request.principal;
            let missing: Vec<&str> = spec
                .required_permissions()
                .iter()
                .filter(|p| !principal.holds(p))
                .map(|p| p.as_str())
                .collect();
            if !missing.is_empty() {
                let msg = format!(
                    "Principal {} lacks permission {} required by tool {}; grant it to the principal to allow this call",
                    principal.id,
                    missing.join(", "),
                    spec.name()
                );
                return Box::pin(async move { Err(ToolError::authorization(msg)) });
            }
        }
        next.run(call)
    }
}

/// Applies defaults and validates arguments against the input schema, listing every violation.
pub(super) struct ValidateInput;

impl Stage for ValidateInput {
    fn name(&self) -> &'static str {
        "validate_input"
    }

    fn run<'a>(&'a self, call: &'a mut Call, next: Next<'a>) -> BoxFuture<'a, ToolOutput> {
        let Some(spec) = call.spec().cloned() else {
            return next.run(call);
        };
        if call.input.is_null() {
            call.input = Value::Object(Default::default());
        }
        schema::strip_optional_nulls(spec.input_schema(), &mut call.input);
        schema::apply_defaults(spec.input_schema(), &mut call.input);
        let problems = violations(spec.input_validator(), &call.input);
        if problems.is_empty() {
            return next.run(call);
        }
        let msg = format!(
            "Invalid arguments for {}: {}",
            spec.name(),
            problems.join("; ")
        );
        Box::pin(async move { Err(ToolError::validation(msg)) })
    }
}

/// Every way `value` breaks the schema, each as `path: problem` (`(root)` for the top level).
fn violations(validator: &jsonschema::Validator, value: &Value) -> Vec<String> {
    validator
        .iter_errors(value)
        .map(|e| {
            let path = e.instance_path().to_string();
            let at = if path.is_empty() {
                "(root)"
            } else {
                path.as_str()
            };
            format!("{at}: {}", e.masked())
        })
        .collect()
}

/// Asks for an explicit yes before running tools that require confirmation.
pub(super) struct Approval {
    pub(super) default: Arc<dyn ApprovalHandler>,
}

impl Stage for Approval {
    fn name(&self) -> &'static str {
        "approval"
    }

    fn run<'a>(&'a self, call: &'a mut Call, next: Next<'a>) -> BoxFuture<'a, ToolOutput> {
        let Some(spec) = call.spec().cloned() else {
            return next.run(call);
        };
        if !spec.requires_confirmation() {
            return next.run(call);
        }
        Box::pin(async move {
            let handler = call
                .request
                .approval
                .clone()
                .unwrap_or_else(|| Arc::clone(&self.default));
            let request = ApprovalRequest {
                spec: &spec,
                principal: &call.request.principal,
                call_id: call.request.call_id,
                arguments: spec.redact(&call.input),
                input: &call.input,
                reason: call.request.reason.as_deref(),
                idempotency_key: call.request.idempotency_key.as_deref(),
                origin: call.request.origin.as_ref(),
                run: call.request.run,
            };
            match handler.decide(&request).await {
                Decision::Approved => next.run(call).await,
                Decision::Denied { reason } => Err(ToolError::new(
                    ErrorKind::Rejected,
                    match reason {
                        Some(r) => format!("Call to {} was rejected: {r}", spec.name()),
                        None => format!("Call to {} was rejected by the approver", spec.name()),
                    },
                )),
                Decision::Unanswered { hint } => Err(ToolError::new(
                    ErrorKind::ConfirmationRequired,
                    format!(
                        "Tool {} requires confirmation and nobody approved this call: {hint}",
                        spec.name()
                    ),
                )),
                Decision::Pending { id, hint } => Err(ToolError::new(
                    ErrorKind::ConfirmationRequired,
                    format!(
                        "Tool {} requires confirmation: the call waits as approval {id}; {hint}",
                        spec.name()
                    ),
                )
                .with_approval(id)),
            }
        })
    }
}

/// Validates output against the output schema, then applies `max_output_bytes` to the data and
/// the content blocks attached beside it (see [`output_limit::cap`]).
///
/// Validation runs on the full output: a cut output could never match its schema, and cutting
/// is not an error (`docs/envelope.md#truncation`), so checking first keeps both promises.
pub(super) struct OutputChecks;

impl Stage for OutputChecks {
    fn name(&self) -> &'static str {
        "output_checks"
    }

    fn run<'a>(&'a self, call: &'a mut Call, next: Next<'a>) -> BoxFuture<'a, ToolOutput> {
        Box::pin(async move {
            let data = next.run(call).await?;
            let Some(spec) = call.spec() else {
                return Ok(data);
            };
            if let Some(validator) = spec.output_validator() {
                let problems = violations(validator, &data);
                if !problems.is_empty() {
                    return Err(ToolError::new(
                        ErrorKind::OutputInvalid,
                        format!(
                            "Tool {} returned output that does not match its output schema: {}",
                            spec.name(),
                            problems.join("; ")
                        ),
                    ));
                }
            }
            let max = usize::try_from(spec.limits().max_output_bytes).unwrap_or(usize::MAX);
            let capped = output_limit::cap(data, call.attachments.take(), max);
            call.truncated = capped.truncated;
            if !capped.content.is_empty() {
                call.attachments.set(capped.content);
            }
            Ok(capped.data)
        })
    }
}

/// Backoff between attempts: `base * 2^(attempt-1)`, capped at `max`, with jitter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RetryPolicy {
    /// The wait before the second attempt.
    pub base: Duration,
    /// The longest wait between attempts.
    pub max: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            base: Duration::from_millis(100),
            max: Duration::from_secs(2),
        }
    }
}

impl RetryPolicy {
    /// The wait before attempt `attempt + 1`, jittered by `seed` between 50% and 100%.
    pub fn delay(&self, attempt: u32, seed: u64) -> Duration {
        let exp = self
            .base
            .saturating_mul(1u32 << attempt.saturating_sub(1).min(16))
            .min(self.max);
        let jitter = 50
            + (seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(u64::from(attempt))
                >> 58);
        exp.mul_f64(jitter.min(100) as f64 / 100.0)
    }
}

/// Retries retryable failures of idempotent, retryable tools, up to `max_attempts`.
pub(super) struct Retry {
    pub(super) policy: RetryPolicy,
}

impl Stage for Retry {
    fn name(&self) -> &'static str {
        "retry"
    }

    fn run<'a>(&'a self, call: &'a mut Call, next: Next<'a>) -> BoxFuture<'a, ToolOutput> {
        Box::pin(async move {
            let (may_retry, max) = match call.spec() {
                Some(s) => (
                    s.idempotent() && s.limits().retryable,
                    s.limits().max_attempts.max(1),
                ),
                None => (false, 1),
            };
            let seed = call
                .request
                .call_id
                .to_string()
                .bytes()
                .fold(0u64, |h, b| h.wrapping_mul(31).wrapping_add(u64::from(b)));
            loop {
                call.attempts += 1;
                let out = next.run(call).await;
                match out {
                    Err(e) if may_retry && e.is_retryable() && call.attempts < max => {
                        let wait = self.policy.delay(call.attempts, seed);
                        tracing::debug!(attempt = call.attempts, wait_ms = wait.as_millis() as u64, error = %e, "retrying tool call");
                        tokio::select! {
                            biased;
                            () = call.request.cancel.cancelled() => return Err(ToolError::cancelled()),
                            () = tokio::time::sleep(wait) => {}
                        }
                    }
                    other => return other,
                }
            }
        })
    }
}
