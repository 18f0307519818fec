//! The run budget stage: a call that names a run ([`super::CallRequest::run`]) is checked and
//! counted against the run's budget before it runs, and its outcome (a failure of the tool, the
//! output's bytes) is recorded after. An admitted call holds one of its tool's remaining
//! attempts until it settles, so concurrent calls can never fail more often than
//! `max_attempts_per_tool`: a call finding them all held waits for the running ones. The counts live in a [`RunLedger`]: the store's (durable,
//! shared by instances) or [`MemoryRuns`] (one process, for the library and tests). A call
//! without a run is not counted.

use std::collections::HashMap;
use std::io;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

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
    /// step (two instances cannot both take the last call), taking one of the tool's remaining
    /// attempts until [`Self::settle`] (failed plus running calls of a tool never pass
    /// `max_attempts_per_tool`; when running calls hold them all, the refusal is
    /// [`crate::Exhausted::AttemptsInFlight`], `rate_limited`). `Err` is the call's result:
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

/// The first pause of a call waiting for the tool's calls in flight, doubled up to
/// [`ATTEMPT_POLL_MAX`]; after [`ATTEMPT_WAIT_MAX`] of waiting the call is refused `rate_limited`.
const ATTEMPT_POLL_START: Duration = Duration::from_millis(5);
const ATTEMPT_POLL_MAX: Duration = Duration::from_millis(200);
const ATTEMPT_WAIT_MAX: Duration = Duration::from_secs(60);

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
            // A call refused only because earlier calls of the tool are still running (they
            // hold the tool's remaining attempts) waits for their outcome, then asks again.
            let mut pause = ATTEMPT_POLL_START;
            let mut waited = Duration::ZERO;
            loop {
                let admitted = self
                    .ledger
                    .admit(run, call.request.principal.id.as_str(), &tool, call_id)
                    .await;
                match admitted {
                    Err(e) if e.kind() == ErrorKind::RateLimited && waited < ATTEMPT_WAIT_MAX => {
                        tokio::select! {
                            () = call.request.cancel.cancelled() => return Err(e),
                            () = tokio::time::sleep(pause) => {}
                        }
                        waited += pause;
                        pause = (pause * 2).min(ATTEMPT_POLL_MAX);
                    }
                    other => break other?,
                }
            }
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

/// Whether an error is the tool failing (a cancellation, a rate limit, a call waiting for or
/// refused by an approver is not).
fn counts_as_failure(kind: ErrorKind) -> bool {
    !matches!(
        kind,
        ErrorKind::Cancelled
            | ErrorKind::RateLimited
            | ErrorKind::BudgetExhausted
            | ErrorKind::ConfirmationRequired
            | ErrorKind::Rejected
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
    /// Calls per tool admitted and not yet settled (they may still fail).
    in_flight: HashMap<String, u32>,
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
                in_flight: HashMap::new(),
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
            // Calls still running may fail too: together they stay within the attempts.
            let running = state.in_flight.get(tool).copied().unwrap_or(0);
            let max = state.budget.attempts_per_tool();
            if failed.saturating_add(running) >= max {
                return Err(Exhausted::AttemptsInFlight {
                    tool: tool.to_owned(),
                    failed,
                    in_flight: running,
                    max,
                }
                .error(&run));
            }
            *state.in_flight.entry(tool.to_owned()).or_default() += 1;
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
            if let Some(n) = state.in_flight.get_mut(tool) {
                *n = n.saturating_sub(1);
            }
            if settled.failed {
                *state.failures.entry(tool.to_owned()).or_default() += 1;
            }
        }
        Box::pin(std::future::ready(()))
    }
}
