//! The run budget stage: a call that names a run ([`super::CallRequest::run`]) is checked and
//! counted against the run's budget before it runs, and its outcome (a failure of the tool, the
//! output's bytes) is recorded after. The counts live in a [`RunLedger`]: the store's (durable,
//! shared by instances) or [`MemoryRuns`] (one process, for the library and tests). A call
//! without a run is not counted.

use std::collections::HashMap;
use std::io;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use serde_json::Value;

use super::{Call, Next, Stage};
use crate::budget::{Budget, Exhausted, RunId, RunStatus, Usage};
use crate::envelope::{CallId, ErrorKind};
use crate::error::ToolError;
use crate::tool::{BoxFuture, ToolOutput};

/// A finished call as a run counts it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Settled {
    /// The tool failed (any error but a cancellation or a later stage's rate limit): it counts
    /// towards `max_attempts_per_tool`.
    pub failed: bool,
    /// Bytes of the output's JSON (0 for a failure).
    pub output_bytes: u64,
}

/// Where runs are counted.
pub trait RunLedger: Send + Sync + 'static {
    /// Checks `run`'s budget for one call of `tool` by `principal` and counts the call, as one
    /// step (two instances cannot both take the last call). `Err` is the call's result:
    /// `budget_exhausted` naming the budget, `not_found` for a run that does not exist or
    /// belongs to another principal, `unavailable` when the count cannot be reached.
    fn admit<'a>(
        &'a self,
        run: RunId,
        principal: &'a str,
        tool: &'a str,
        call: CallId,
    ) -> BoxFuture<'a, Result<(), ToolError>>;

    /// Records the outcome of a call [`Self::admit`] let through. Must not fail the call: a
    /// ledger that cannot record logs it.
    fn settle<'a>(
        &'a self,
        run: RunId,
        tool: &'a str,
        call: CallId,
        settled: Settled,
    ) -> BoxFuture<'a, ()>;
}

/// The `not_found` result for a run the caller does not own or that does not exist (the same
/// words for both: a run of another principal is not revealed).
pub fn run_not_found(run: &RunId) -> ToolError {
    ToolError::new(
        ErrorKind::NotFound,
        format!(
            "Run {run} not found for this principal: create a run with POST /v1/runs (or leave the run out to call without a budget)"
        ),
    )
    .permanent()
}

/// Enforces run budgets; see the module docs.
pub struct RunBudgetStage {
    ledger: Arc<dyn RunLedger>,
}

impl RunBudgetStage {
    /// Counts in `ledger`.
    pub fn new(ledger: Arc<dyn RunLedger>) -> Self {
        Self { ledger }
    }
}

impl Stage for RunBudgetStage {
    fn name(&self) -> &'static str {
        "run_budget"
    }

    fn run<'a>(&'a self, call: &'a mut Call, next: Next<'a>) -> BoxFuture<'a, ToolOutput> {
        let Some(run) = call.request.run else {
            return next.run(call);
        };
        let Some(spec) = call.spec() else {
            return next.run(call);
        };
        let tool = spec.name().as_str().to_owned();
        Box::pin(async move {
            let call_id = call.request.call_id;
            self.ledger
                .admit(run, call.request.principal.id.as_str(), &tool, call_id)
                .await?;
            let out = next.run(call).await;
            let settled = Settled {
                failed: out.as_ref().is_err_and(|e| counts_as_failure(e.kind())),
                output_bytes: out.as_ref().map_or(0, json_len),
            };
            self.ledger.settle(run, &tool, call_id, settled).await;
            out
        })
    }
}

/// Whether an error is the tool failing (a cancellation or a rate limit is not).
fn counts_as_failure(kind: ErrorKind) -> bool {
    !matches!(
        kind,
        ErrorKind::Cancelled | ErrorKind::RateLimited | ErrorKind::BudgetExhausted
    )
}

/// The length of `value`'s compact JSON, without building it.
fn json_len(value: &Value) -> u64 {
    struct Count(u64);
    impl io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.0 += buf.len() as u64;
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    match serde_json::to_writer(&mut count, value) {
        Ok(()) => count.0,
        Err(_) => 0,
    }
}

struct MemoryRun {
    principal: String,
    budget: Budget,
    started: Instant,
    status: RunStatus,
    usage: Usage,
    failures: HashMap<String, u32>,
}

/// Runs counted in this process only (the library without a store, tests, benchmarks).
#[derive(Default)]
pub struct MemoryRuns {
    runs: Mutex<HashMap<RunId, MemoryRun>>,
}

impl std::fmt::Debug for MemoryRuns {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryRuns").finish_non_exhaustive()
    }
}

impl MemoryRuns {
    /// No runs yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Starts a run of `principal` with `budget`, now.
    pub fn create(&self, principal: &str, budget: Budget) -> RunId {
        let id = RunId::new();
        self.lock().insert(
            id,
            MemoryRun {
                principal: principal.to_owned(),
                budget,
                started: Instant::now(),
                status: RunStatus::Open,
                usage: Usage::default(),
                failures: HashMap::new(),
            },
        );
        id
    }

    /// Counts one model turn of `run`; `Err` once `max_turns` is spent.
    pub fn turn(&self, run: RunId, principal: &str) -> Result<u64, ToolError> {
        let mut runs = self.lock();
        let Some(state) = runs.get_mut(&run).filter(|r| r.principal == principal) else {
            return Err(run_not_found(&run));
        };
        if let Some(max) = state.budget.max_turns
            && state.usage.turns >= u64::from(max)
        {
            state.status = RunStatus::Exhausted;
            return Err(Exhausted::Turns {
                used: state.usage.turns,
                max,
            }
            .error(&run));
        }
        state.usage.turns += 1;
        Ok(state.usage.turns)
    }

    /// What `run` has used, with its status and failures per tool.
    pub fn usage(&self, run: RunId) -> Option<(RunStatus, Usage, HashMap<String, u32>)> {
        let runs = self.lock();
        let r = runs.get(&run)?;
        let mut usage = r.usage;
        usage.elapsed_ms = elapsed_ms(r.started);
        Some((r.status, usage, r.failures.clone()))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<RunId, MemoryRun>> {
        self.runs.lock().unwrap_or_else(|p| p.into_inner())
    }
}

fn elapsed_ms(started: Instant) -> u64 {
    u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX)
}

impl RunLedger for MemoryRuns {
    fn admit<'a>(
        &'a self,
        run: RunId,
        principal: &'a str,
        tool: &'a str,
        _call: CallId,
    ) -> BoxFuture<'a, Result<(), ToolError>> {
        let admitted = (|| {
            let mut runs = self.lock();
            let Some(state) = runs.get_mut(&run).filter(|r| r.principal == principal) else {
                return Err(run_not_found(&run));
            };
            state.usage.elapsed_ms = elapsed_ms(state.started);
            let failed = state.failures.get(tool).copied().unwrap_or(0);
            if let Some(refusal) = state
                .budget
                .refusal(state.status, &state.usage, tool, failed)
            {
                if refusal.ends_run() {
                    state.status = RunStatus::Exhausted;
                }
                return Err(refusal.error(&run));
            }
            state.usage.tool_calls += 1;
            Ok(())
        })();
        Box::pin(std::future::ready(admitted))
    }

    fn settle<'a>(
        &'a self,
        run: RunId,
        tool: &'a str,
        _call: CallId,
        settled: Settled,
    ) -> BoxFuture<'a, ()> {
        if let Some(state) = self.lock().get_mut(&run) {
            state.usage.output_bytes += settled.output_bytes;
            if settled.failed {
                *state.failures.entry(tool.to_owned()).or_default() += 1;
            }
        }
        Box::pin(std::future::ready(()))
    }
}
