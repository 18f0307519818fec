//! The audit log's hooks into the call pipeline: [`AuditStage`] (durable pre-run entry, large
//! outputs kept apart) and [`AuditObserver`] (every call's outcome).

use serde_json::Value;
use toolgate_core::ErrorChain;
use toolgate_core::{
    BoxFuture, Call, CallObserver, CallRecord, Effect, Next, Stage, ToolError, ToolOutput,
    json_len_at_most,
};

use super::record::AuditStart;
use crate::Store;

/// Outputs larger than this (in bytes, as stored) are kept apart and referenced
/// (`docs/envelope.md#truncation`).
pub const LARGE_OUTPUT_BYTES: usize = 10 * 1024;

/// A pipeline stage (add it with `PipelineBuilder::stage`) that, for tools whose effect is
/// `write`, `delete` or `side_effect` and for calls asking for it (`CallRequest::record_start`,
/// background tasks), commits a `started` audit entry before the call runs — and
/// refuses the call with an `unavailable` error if it cannot — and that keeps outputs larger than
/// [`LARGE_OUTPUT_BYTES`] apart, setting the call's `output_ref`.
///
/// The stage runs after approval and before output checks and retries, so one call (whatever its
/// attempts) gets one `started` entry, and what it stores is the output after the tool's cap.
/// A string output is stored as its UTF-8 text; any other value as its compact JSON.
#[derive(Clone, Debug)]
pub struct AuditStage {
    store: Store,
}

impl AuditStage {
    /// A stage that writes `started` entries and keeps large outputs in `store`.
    pub fn new(store: Store) -> Self {
        Self { store }
    }
}

/// The bytes kept for a large output.
fn output_bytes(output: &Value) -> Vec<u8> {
    match output {
        Value::String(s) => s.as_bytes().to_vec(),
        other => other.to_string().into_bytes(),
    }
}

impl Stage for AuditStage {
    fn name(&self) -> &'static str {
        "audit"
    }

    fn run<'a>(&'a self, call: &'a mut Call, next: Next<'a>) -> BoxFuture<'a, ToolOutput> {
        Box::pin(async move {
            if let Some(spec) = call.spec()
                && (call.request.record_start.is_some()
                    || matches!(
                        spec.effect(),
                        Effect::Write | Effect::Delete | Effect::SideEffect
                    ))
            {
                let entry = AuditStart {
                    call_id: call.request.call_id,
                    tool: spec.name().as_str().to_owned(),
                    definition_hash: spec.definition_hash().to_owned(),
                    principal: call.request.principal.id.as_str().to_owned(),
                    input: spec.redact(&call.input),
                    fetched_at: call.fetched_at,
                };
                if let Err(e) = self.store.audit_started(&entry).await {
                    tracing::error!(error = %ErrorChain(&e), tool = %entry.tool, call_id = %entry.call_id, "cannot write the audit log; call refused");
                    let why = if call.request.record_start.is_some() {
                        "runs as a task"
                    } else {
                        "changes things"
                    };
                    return Err(ToolError::unavailable(format!(
                        "The call was not run: `{}` {why}, and toolgate records such calls in the audit log before running them, but the audit log cannot be written ({})",
                        entry.tool,
                        ErrorChain(&e)
                    ))
                    .permanent());
                }
                if let Some(committed) = &call.request.record_start {
                    committed.notify_one();
                }
            }
            let output = next.run(call).await?;
            // Measured without building the text: most outputs are small.
            let large = match &output {
                Value::String(s) => s.len() > LARGE_OUTPUT_BYTES,
                other => !json_len_at_most(other, LARGE_OUTPUT_BYTES),
            };
            if large {
                let bytes = output_bytes(&output);
                match self.store.store_output(call.request.call_id, &bytes).await {
                    Ok(reference) => call.output_ref = Some(reference),
                    Err(e) => {
                        tracing::error!(error = %ErrorChain(&e), call_id = %call.request.call_id, "cannot store a large output apart; it stays in the audit record");
                    }
                }
            }
            Ok(output)
        })
    }
}

/// A call observer (add it with `PipelineBuilder::observer`) that appends every call's outcome to
/// the audit log. A failed write is logged (the call has already happened).
#[derive(Clone, Debug)]
pub struct AuditObserver {
    store: Store,
}

impl AuditObserver {
    /// An observer that records every call's outcome in `store`.
    pub fn new(store: Store) -> Self {
        Self { store }
    }
}

impl CallObserver for AuditObserver {
    fn on_call<'a>(&'a self, record: &'a CallRecord<'a>) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            // Calls that changed nothing (read-only tools, and calls refused before running)
            // are queued for the next group commit; the outcome of anything that may have had
            // an effect is committed before the caller sees it.
            let may_have_effect = record.spec.is_some_and(|s| s.effect() != Effect::Read)
                && record.result.attempts > 0;
            let written = self
                .store
                .audit_call_finished(record, !may_have_effect)
                .await;
            if let Err(e) = written {
                tracing::error!(error = %ErrorChain(&e), tool = %record.result.tool, call_id = %record.result.call_id, "cannot write a call's outcome to the audit log");
            }
        })
    }
}
