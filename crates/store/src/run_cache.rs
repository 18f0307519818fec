//! The runs' counters cached in this process, so that checking a call against its run's budget
//! is an in-memory step ([`RunLedger`] for [`Store`]).
//!
//! The invariant (also in ARCHITECTURE.md, "Run budgets"): in the store, `runs.tool_calls +
//! runs.reserved_calls` never passes `max_tool_calls`, and per tool `run_tools.failures +
//! run_tools.in_flight` never passes `max_attempts_per_tool`; an instance only lets a call
//! through with one call of a block it reserved (`reserved_calls`) and one attempt of the tool it
//! holds (`in_flight`). So the budgets hold across instances and a crash leaves its reservations
//! in place: calls and attempts lost, never granted twice.
//!
//! - **Calls** are reserved in blocks, one transaction per block: a quarter of what is free, at
//!   least 1 and at most [`BLOCK_MAX`] (so a small budget goes one call at a time and another
//!   instance is never starved by a block). A run with `max_output_bytes` goes one call at a
//!   time, its bytes written as each call settles, so a crash never loses counted output.
//! - **Attempts** of a tool: an instance holds as many as it has calls of the tool running at
//!   once, taken one by one in the store; a call that succeeds gives its attempt back to the
//!   instance (memory), a call that fails writes the failure and gives the attempt up, in one
//!   transaction (exact across instances).
//! - **Reported**: used calls, output bytes and the calls' records go to the store when a block
//!   is spent and no call of the run is running, on a failure, when the store is read through
//!   this instance (so it reads its own calls exactly), and every [`SWEEP`] otherwise.
//! - **Given back**: a run idle for [`IDLE`] (no call admitted, none running), a run finished
//!   or exhausted, and every run on [`Store::close`] give back unused calls and held attempts.
//!   An instance refused because other instances hold the last calls gets `rate_limited`
//!   (the budget stage waits and asks again), never `budget_exhausted`.
//! - **Status**: a run finished or exhausted through another instance stops taking calls here at
//!   the next sweep (within [`SWEEP`]) or block, whichever comes first.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use toolgate_core::{
    Budget, CallId, ErrorChain, ErrorKind, Exhausted, RunId, RunStatus, Settled, ToolError, Usage,
};

use crate::{Store, StoreError, ts};

/// The most calls one block reserves.
pub(crate) const BLOCK_MAX: u64 = 4096;
/// How long a run goes without calls before this instance gives its reservations back.
pub(crate) const IDLE: Duration = Duration::from_secs(1);
/// How many reservations one admission makes before it asks to be retried.
const ADMIT_ROUNDS: usize = 8;
/// Call records written by one `INSERT` (6 parameters each: far below SQLite's 32,766 and
/// PostgreSQL's 65,535 bound parameters per statement).
const CALLS_PER_INSERT: usize = 1000;
/// How often cached counters are reported and idle runs given back.
pub(crate) const SWEEP: Duration = Duration::from_millis(500);

/// How many calls to reserve for `budget` when `free` remain (`None`: no limit).
pub(crate) fn block(budget: &Budget, free: Option<u64>) -> u64 {
    if budget.max_output_bytes.is_some() {
        return 1;
    }
    free.map_or(BLOCK_MAX, |f| (f / 4).clamp(1, BLOCK_MAX))
}

/// A settled call not yet written to `run_calls`.
struct PendingCall {
    call: CallId,
    tool: String,
    failed: bool,
    output_bytes: u64,
    at: DateTime<Utc>,
}

/// Attempts of one tool this instance holds.
#[derive(Default)]
struct Hold {
    /// The tool's failures in the run, as last read (they only grow).
    failures: u32,
    /// Attempts taken in the store (`in_flight`) and not given up.
    held: u32,
    /// Of them, calls running.
    busy: u32,
}

/// One run as this instance counts it.
struct Entry {
    principal: String,
    budget: Budget,
    started_ms: i64,
    status: RunStatus,
    /// Calls this instance reserved and has not reported (used or not).
    reserved: u64,
    /// Of them, calls used.
    used: u64,
    /// The run's output bytes: the store's at the last sync plus `bytes_pending`.
    output_bytes: u64,
    bytes_pending: u64,
    calls: Vec<PendingCall>,
    /// Failures counted here (in `tools`) and not yet written: the write failed.
    failed: Vec<String>,
    tools: HashMap<String, Hold>,
    /// Calls of the run running here.
    busy: u32,
    last_used: Instant,
    synced: Instant,
}

impl Entry {
    /// Takes what is to report: used calls (their reservation ends), bytes, call records; with
    /// `all`, every reservation and the attempts not in use too.
    fn take(&mut self, all: bool) -> Sync {
        let mut sync = Sync {
            used: self.used,
            returned: if all { self.reserved } else { self.used },
            bytes: std::mem::take(&mut self.bytes_pending),
            calls: std::mem::take(&mut self.calls),
            failed: std::mem::take(&mut self.failed),
            ..Sync::default()
        };
        self.reserved -= sync.returned;
        self.used = 0;
        if all {
            for (tool, hold) in &mut self.tools {
                let idle = hold.held.saturating_sub(hold.busy);
                if idle > 0 {
                    sync.release.push((tool.clone(), idle));
                    hold.held -= idle;
                }
            }
        }
        sync
    }

    /// Puts back what [`Self::take`] took, when it could not be written.
    fn restore(&mut self, sync: Sync) {
        self.reserved += sync.returned;
        self.used += sync.used;
        self.bytes_pending += sync.bytes;
        self.calls.splice(0..0, sync.calls);
        self.failed.extend(sync.failed);
        for (tool, n) in sync.release {
            self.tools.entry(tool).or_default().held += n;
        }
    }

    fn dirty(&self) -> bool {
        self.used > 0 || self.bytes_pending > 0 || !self.calls.is_empty() || !self.failed.is_empty()
    }
}

/// One transaction's work on a run: what to report, what to take.
#[derive(Default)]
pub(crate) struct Sync {
    used: u64,
    returned: u64,
    bytes: u64,
    calls: Vec<PendingCall>,
    /// Held attempts given back, per tool.
    release: Vec<(String, u32)>,
    /// Failures of these tools: each ends an attempt as a failure.
    failed: Vec<String>,
    /// Check the budget for one call of this tool (the refusal, if any, is in [`Synced`]).
    check: Option<String>,
    /// With `check`: reserve a block of calls.
    want_calls: bool,
    /// With `check`: take an attempt of the tool.
    take_attempt: bool,
}

/// What the store says after a [`Sync`].
pub(crate) struct Synced {
    principal: String,
    budget: Budget,
    started_ms: i64,
    status: RunStatus,
    output_bytes: u64,
    /// Calls reserved for this instance.
    granted: u64,
    /// An attempt taken for this instance.
    attempt: bool,
    /// The tool's failures (the attempt's or the failure's tool).
    failures: u32,
    /// Why the call is refused.
    refusal: Option<Exhausted>,
    /// Refused only because other instances hold the last calls: `(used, reserved, max)`.
    elsewhere: Option<(u64, u64, u32)>,
}

/// This process's cached runs (in [`crate::Inner`]).
#[derive(Default)]
pub(crate) struct RunCache {
    runs: Mutex<HashMap<RunId, Entry>>,
    sweeping: std::sync::atomic::AtomicBool,
}

enum Fast {
    Admitted,
    NotFound,
    Slow,
}

impl RunCache {
    fn lock(&self) -> MutexGuard<'_, HashMap<RunId, Entry>> {
        self.runs.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The in-memory check: a call of the reserved block and an attempt held, or `Slow`.
    fn try_admit(&self, run: RunId, principal: &str, tool: &str) -> Fast {
        let mut runs = self.lock();
        let Some(e) = runs.get_mut(&run) else {
            return Fast::Slow;
        };
        if e.principal != principal {
            return Fast::NotFound;
        }
        if e.status != RunStatus::Open || e.used >= e.reserved {
            return Fast::Slow;
        }
        if let Some(max) = e.budget.timeout_ms
            && Utc::now().timestamp_millis().saturating_sub(e.started_ms) >= signed(max)
        {
            return Fast::Slow;
        }
        if e.budget
            .max_output_bytes
            .is_some_and(|max| e.output_bytes >= max)
        {
            return Fast::Slow;
        }
        let max = e.budget.attempts_per_tool();
        let Some(hold) = e.tools.get_mut(tool) else {
            return Fast::Slow;
        };
        if hold.failures >= max || hold.busy >= hold.held {
            return Fast::Slow;
        }
        hold.busy += 1;
        e.busy += 1;
        e.used += 1;
        e.last_used = Instant::now();
        Fast::Admitted
    }
}

fn signed(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

fn unsigned(v: i64) -> u64 {
    u64::try_from(v).unwrap_or(0)
}

fn small(v: i64) -> u32 {
    u32::try_from(v).unwrap_or(u32::MAX)
}

/// The run row a sync reads.
type RunRow = (
    String,
    i64,
    String,
    Option<i64>,
    Option<i64>,
    Option<i64>,
    i64,
    Option<i64>,
    i64,
    i64,
    i64,
);

/// The refusal when other instances hold a run's last calls (retryable).
fn reserved_elsewhere(run: RunId, used: u64, reserved: u64, max: u32) -> ToolError {
    ToolError::new(
        ErrorKind::RateLimited,
        format!(
            "Run {run} has used {used} of its {max} tool calls and the last {reserved} are reserved by calls still running or by other toolgate instances, which give back what they do not use within about {} s of going idle. Retry shortly.",
            IDLE.as_secs() + 1
        ),
    )
}

/// The refusal when a run's count cannot be reached: the call does not run uncounted.
pub(crate) fn unreachable(id: RunId, e: &StoreError) -> ToolError {
    ToolError::new(
        ErrorKind::Unavailable,
        format!(
            "Run {id}'s budget could not be checked in the store, so the call was not run: {} (check that the database is reachable)",
            ErrorChain(e)
        ),
    )
}

impl Store {
    fn cache(&self) -> &RunCache {
        &self.inner.runs
    }

    /// One transaction doing `sync` on run `id`; `None` when the run does not exist or is not
    /// `principal`'s (then nothing is written).
    async fn sync_run(
        &self,
        id: RunId,
        principal: Option<&str>,
        sync: &Sync,
    ) -> Result<Option<Synced>, StoreError> {
        let key = id.to_string();
        let now = Utc::now();
        let now_ms = now.timestamp_millis();
        macro_rules! work {
            ($tx:ident, $select:literal) => {{
                let row: Option<RunRow> = sqlx::query_as($select)
                    .bind(&key)
                    .fetch_optional(&mut *$tx)
                    .await
                    .map_err(StoreError::db("reading a run to count its calls"))?;
                let Some((
                    owner,
                    started_ms,
                    status,
                    turns_max,
                    calls_max,
                    timeout,
                    attempts,
                    bytes_max,
                    tool_calls,
                    reserved_calls,
                    output_bytes,
                )) = row
                else {
                    return Ok(None);
                };
                if principal.is_some_and(|p| p != owner) {
                    return Ok(None);
                }
                let budget = Budget {
                    max_turns: turns_max.map(small),
                    max_tool_calls: calls_max.map(small),
                    timeout_ms: timeout.map(unsigned),
                    max_attempts_per_tool: Some(small(attempts)),
                    max_output_bytes: bytes_max.map(unsigned),
                };
                let mut status = RunStatus::parse(&status)
                    .ok_or_else(|| StoreError::Corrupt(format!("unknown run status {status:?}")))?;
                let tool_calls = unsigned(tool_calls).saturating_add(sync.used);
                let mut reserved_calls = unsigned(reserved_calls).saturating_sub(sync.returned);
                let output_bytes = unsigned(output_bytes).saturating_add(sync.bytes);
                for (tool, n) in &sync.release {
                    sqlx::query(
                        "UPDATE run_tools SET in_flight = CASE WHEN in_flight > $3 THEN in_flight - $3 ELSE 0 END \
                         WHERE run_id = $1 AND tool = $2",
                    )
                    .bind(&key)
                    .bind(tool)
                    .bind(i64::from(*n))
                    .execute(&mut *$tx)
                    .await
                    .map_err(StoreError::db("giving back a tool's attempts in a run"))?;
                }
                let mut failures = 0;
                for tool in &sync.failed {
                    let n: Option<i64> = sqlx::query_scalar(
                        "UPDATE run_tools SET failures = failures + 1, \
                         in_flight = CASE WHEN in_flight > 0 THEN in_flight - 1 ELSE 0 END \
                         WHERE run_id = $1 AND tool = $2 RETURNING failures",
                    )
                    .bind(&key)
                    .bind(tool)
                    .fetch_optional(&mut *$tx)
                    .await
                    .map_err(StoreError::db("counting a failed attempt of a tool in a run"))?;
                    failures = small(n.unwrap_or(0));
                }
                // One statement per chunk of call records, not one per call: a sweep reports
                // every call since the last one, and a statement per row made that write the
                // largest per-call cost of a cached run (issue 22's benchmark).
                for chunk in sync.calls.chunks(CALLS_PER_INSERT) {
                    let mut insert = sqlx::QueryBuilder::new(
                        "INSERT INTO run_calls (run_id, call_id, tool, failed, output_bytes, at) ",
                    );
                    insert.push_values(chunk, |mut row, c| {
                        row.push_bind(&key)
                            .push_bind(c.call.to_string())
                            .push_bind(&c.tool)
                            .push_bind(c.failed)
                            .push_bind(signed(c.output_bytes))
                            .push_bind(ts(c.at));
                    });
                    insert.push(" ON CONFLICT (run_id, call_id) DO NOTHING");
                    insert
                        .build()
                        .execute(&mut *$tx)
                        .await
                        .map_err(StoreError::db("recording a run's calls"))?;
                }
                let mut synced = Synced {
                    principal: owner,
                    budget,
                    started_ms,
                    status,
                    output_bytes,
                    granted: 0,
                    attempt: false,
                    failures,
                    refusal: None,
                    elsewhere: None,
                };
                if let Some(tool) = sync.check.as_deref() {
                    let (failed, in_flight): (i64, i64) = sqlx::query_as(
                        "SELECT failures, in_flight FROM run_tools WHERE run_id = $1 AND tool = $2",
                    )
                    .bind(&key)
                    .bind(tool)
                    .fetch_optional(&mut *$tx)
                    .await
                    .map_err(StoreError::db("reading a tool's attempts in a run"))?
                    .unwrap_or((0, 0));
                    synced.failures = small(failed);
                    let usage = Usage {
                        elapsed_ms: unsigned(now_ms.saturating_sub(started_ms)),
                        turns: 0,
                        tool_calls: 0,
                        output_bytes,
                    };
                    synced.refusal = budget.refusal(status, &usage, tool, synced.failures);
                    if synced.refusal.is_none() && sync.want_calls {
                        let free = budget
                            .max_tool_calls
                            .map(|max| u64::from(max).saturating_sub(tool_calls + reserved_calls));
                        match (free, budget.max_tool_calls) {
                            (Some(0), Some(max)) if reserved_calls > 0 => {
                                synced.elsewhere = Some((tool_calls, reserved_calls, max));
                            }
                            (Some(0), Some(max)) => {
                                synced.refusal = Some(Exhausted::ToolCalls {
                                    used: tool_calls,
                                    max,
                                });
                            }
                            _ => {
                                synced.granted = block(&budget, free);
                                reserved_calls += synced.granted;
                            }
                        }
                    }
                    if synced.refusal.is_none() && synced.elsewhere.is_none() && sync.take_attempt {
                        let taken: Option<i64> = sqlx::query_scalar(
                            crate::runs::TAKE_ATTEMPT,
                        )
                        .bind(&key)
                        .bind(tool)
                        .bind(attempts)
                        .fetch_optional(&mut *$tx)
                        .await
                        .map_err(StoreError::db("taking an attempt of a tool in a run"))?;
                        match taken {
                            Some(_) => synced.attempt = true,
                            None => {
                                synced.refusal = Some(Exhausted::AttemptsInFlight {
                                    tool: tool.to_owned(),
                                    failed: synced.failures,
                                    in_flight: small(in_flight),
                                    max: budget.attempts_per_tool(),
                                });
                            }
                        }
                    }
                    if synced.refusal.as_ref().is_some_and(Exhausted::ends_run)
                        && status == RunStatus::Open
                    {
                        status = RunStatus::Exhausted;
                        synced.status = status;
                    }
                }
                sqlx::query(
                    "UPDATE runs SET tool_calls = $2, reserved_calls = $3, output_bytes = $4, status = $5 WHERE id = $1",
                )
                .bind(&key)
                .bind(signed(tool_calls))
                .bind(signed(reserved_calls))
                .bind(signed(output_bytes))
                .bind(status.as_str())
                .execute(&mut *$tx)
                .await
                .map_err(StoreError::db("counting a run's calls"))?;
                synced
            }};
        }
        let synced = match &self.inner.pool {
            crate::Pool::Sqlite(pool) => {
                let mut tx = pool
                    .begin_with("BEGIN IMMEDIATE")
                    .await
                    .map_err(StoreError::db("starting a write transaction"))?;
                let synced = work!(
                    tx,
                    "SELECT principal, started_ms, status, max_turns, max_tool_calls, timeout_ms, \
                     max_attempts_per_tool, max_output_bytes, tool_calls, reserved_calls, output_bytes \
                     FROM runs WHERE id = $1"
                );
                tx.commit().await.map_err(StoreError::db("committing"))?;
                synced
            }
            crate::Pool::Postgres(pool) => {
                let mut tx = pool
                    .begin()
                    .await
                    .map_err(StoreError::db("starting a write transaction"))?;
                let synced = work!(
                    tx,
                    "SELECT principal, started_ms, status, max_turns, max_tool_calls, timeout_ms, \
                     max_attempts_per_tool, max_output_bytes, tool_calls, reserved_calls, output_bytes \
                     FROM runs WHERE id = $1 FOR UPDATE"
                );
                tx.commit().await.map_err(StoreError::db("committing"))?;
                synced
            }
        };
        Ok(Some(synced))
    }

    /// Starts the sweeper once (see the module docs).
    fn start_sweeper(&self) {
        if self.cache().sweeping.swap(true, Ordering::SeqCst) {
            return;
        }
        let weak = Arc::downgrade(&self.inner);
        let shutdown = self.inner.shutdown.clone();
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    () = shutdown.cancelled() => break,
                    () = tokio::time::sleep(SWEEP) => {}
                }
                let Some(inner) = weak.upgrade() else { break };
                Store { inner }.sweep_runs().await;
            }
        });
    }

    /// Gives back idle runs, reports the others.
    async fn sweep_runs(&self) {
        let (idle, active): (Vec<RunId>, Vec<RunId>) = {
            let runs = self.cache().lock();
            let idle = runs
                .iter()
                .filter(|(_, e)| e.busy == 0 && e.last_used.elapsed() >= IDLE)
                .map(|(id, _)| *id)
                .collect();
            let active = runs
                .iter()
                .filter(|(_, e)| {
                    !(e.busy == 0 && e.last_used.elapsed() >= IDLE)
                        && (e.dirty() || e.synced.elapsed() >= IDLE)
                })
                .map(|(id, _)| *id)
                .collect();
            (idle, active)
        };
        for id in idle {
            self.release_cached(id).await;
        }
        for id in active {
            if let Err(e) = self.report_cached(id).await {
                tracing::warn!(error = %ErrorChain(&e), run = %id, "a run's counted calls could not be reported; retrying at the next sweep");
            }
        }
    }

    /// Writes a failed sync's work back into the entry, if there still is one; else logs it.
    fn restore_cached(&self, id: RunId, sync: Sync, e: &StoreError) {
        tracing::warn!(error = %ErrorChain(e), run = %id, "a run's counted calls could not be written; kept in memory");
        if let Some(entry) = self.cache().lock().get_mut(&id) {
            entry.restore(sync);
        }
    }

    /// Reports run `id`'s used calls, bytes and call records (keeping its reservations) and
    /// reads its status back.
    pub(crate) async fn report_cached(&self, id: RunId) -> Result<(), StoreError> {
        let Some(sync) = self.cache().lock().get_mut(&id).map(|e| e.take(false)) else {
            return Ok(());
        };
        match self.sync_run(id, None, &sync).await {
            Ok(Some(synced)) => {
                let closed = {
                    let mut runs = self.cache().lock();
                    match runs.get_mut(&id) {
                        Some(e) => {
                            e.status = synced.status;
                            e.output_bytes = synced.output_bytes + e.bytes_pending;
                            e.synced = Instant::now();
                            e.status != RunStatus::Open
                        }
                        None => false,
                    }
                };
                if closed {
                    self.release_cached(id).await;
                }
                Ok(())
            }
            Ok(None) => {
                self.cache().lock().remove(&id);
                Ok(())
            }
            Err(e) => {
                self.restore_cached(id, sync, &e);
                Err(e)
            }
        }
    }

    /// Reports every cached run (before the store is read: it shows this instance's calls).
    pub(crate) async fn report_all_cached(&self) -> Result<(), StoreError> {
        let ids: Vec<RunId> = self
            .cache()
            .lock()
            .iter()
            .filter(|(_, e)| e.dirty())
            .map(|(id, _)| *id)
            .collect();
        for id in ids {
            self.report_cached(id).await?;
        }
        Ok(())
    }

    /// Reports run `id` when this instance has counted calls of it not yet written.
    pub(crate) async fn report_if_dirty(&self, id: RunId) -> Result<(), StoreError> {
        let dirty = self.cache().lock().get(&id).is_some_and(Entry::dirty);
        if dirty {
            self.report_cached(id).await?;
        }
        Ok(())
    }

    /// Stops caching run `id`: reports it and gives back its unused calls and idle attempts
    /// (a call still running reports itself when it settles).
    pub(crate) async fn release_cached(&self, id: RunId) {
        let Some(mut entry) = self.cache().lock().remove(&id) else {
            return;
        };
        let sync = entry.take(true);
        if let Err(e) = self.sync_run(id, None, &sync).await {
            // Conservative: what stays reserved is lost, never granted twice.
            tracing::warn!(error = %ErrorChain(&e), run = %id, "a run's reserved calls could not be given back; they stay reserved");
        }
    }

    /// Gives back every cached run (on close).
    pub(crate) async fn release_all_cached(&self) {
        let ids: Vec<RunId> = self.cache().lock().keys().copied().collect();
        for id in ids {
            self.release_cached(id).await;
        }
    }

    /// [`toolgate_core::RunLedger::admit`] with the cached counters.
    pub(crate) async fn admit_cached(
        &self,
        run: RunId,
        principal: &str,
        tool: &str,
    ) -> Result<(), ToolError> {
        // Each round either admits, refuses, or reserved what was missing; calls of this
        // instance racing for the same reservations may take a few.
        for _ in 0..ADMIT_ROUNDS {
            let (want_calls, want_attempt) = match self.cache().try_admit(run, principal, tool) {
                Fast::Admitted => return Ok(()),
                Fast::NotFound => return Err(toolgate_core::run_not_found(&run)),
                Fast::Slow => {
                    let runs = self.cache().lock();
                    match runs.get(&run) {
                        Some(e) => (
                            e.used >= e.reserved,
                            e.tools.get(tool).is_none_or(|h| h.busy >= h.held),
                        ),
                        None => (true, true),
                    }
                }
            };
            // Reserve only what is missing; the budget is checked either way.
            let sync = Sync {
                want_calls,
                check: Some(tool.to_owned()),
                take_attempt: want_attempt,
                ..Sync::default()
            };
            let synced = match self.sync_run(run, Some(principal), &sync).await {
                Ok(Some(s)) => s,
                Ok(None) => return Err(toolgate_core::run_not_found(&run)),
                Err(e) => return Err(unreachable(run, &e)),
            };
            let release = {
                let mut runs = self.cache().lock();
                let fresh = !runs.contains_key(&run);
                let e = runs.entry(run).or_insert_with(|| Entry {
                    principal: synced.principal.clone(),
                    budget: synced.budget,
                    started_ms: synced.started_ms,
                    status: synced.status,
                    reserved: 0,
                    used: 0,
                    output_bytes: 0,
                    bytes_pending: 0,
                    calls: Vec::new(),
                    failed: Vec::new(),
                    tools: HashMap::new(),
                    busy: 0,
                    last_used: Instant::now(),
                    synced: Instant::now(),
                });
                e.status = synced.status;
                e.reserved += synced.granted;
                e.output_bytes = synced.output_bytes + e.bytes_pending;
                e.synced = Instant::now();
                let hold = e.tools.entry(tool.to_owned()).or_default();
                hold.failures = hold.failures.max(synced.failures);
                if synced.attempt {
                    hold.held += 1;
                }
                if fresh {
                    self.start_sweeper();
                }
                e.status != RunStatus::Open
            };
            if let Some((used, reserved, max)) = synced.elsewhere {
                return Err(reserved_elsewhere(run, used, reserved, max));
            }
            if let Some(refusal) = synced.refusal {
                if release {
                    self.release_cached(run).await;
                }
                return Err(refusal.error(&run));
            }
        }
        Err(ToolError::new(
            ErrorKind::RateLimited,
            format!(
                "Run {run}'s reserved calls were taken by other calls of this instance {ADMIT_ROUNDS} times in a row. Retry shortly."
            ),
        ))
    }

    /// [`toolgate_core::RunLedger::settle`] with the cached counters.
    pub(crate) async fn settle_cached(
        &self,
        run: RunId,
        tool: &str,
        call: CallId,
        settled: Settled,
    ) {
        let mut record = Some(PendingCall {
            call,
            tool: tool.to_owned(),
            failed: settled.failed,
            output_bytes: settled.output_bytes,
            at: Utc::now(),
        });
        let sync = {
            let mut runs = self.cache().lock();
            match runs.get_mut(&run) {
                None => None,
                Some(e) => {
                    e.busy = e.busy.saturating_sub(1);
                    e.bytes_pending += settled.output_bytes;
                    e.output_bytes += settled.output_bytes;
                    e.calls.extend(record.take());
                    let hold = e.tools.entry(tool.to_owned()).or_default();
                    hold.busy = hold.busy.saturating_sub(1);
                    if settled.failed {
                        hold.held = hold.held.saturating_sub(1);
                        hold.failures += 1;
                        e.failed.push(tool.to_owned());
                        let sync = e.take(false);
                        Some(Some(sync))
                    } else if (e.used >= e.reserved && e.busy == 0)
                        || e.budget.max_output_bytes.is_some()
                    {
                        Some(Some(e.take(false)))
                    } else {
                        Some(None)
                    }
                }
            }
        };
        let sync = match sync {
            Some(Some(sync)) => sync,
            Some(None) => return,
            // Released while the call ran: its attempt is still taken in the store.
            None => Sync {
                bytes: settled.output_bytes,
                calls: record.into_iter().collect(),
                failed: settled
                    .failed
                    .then(|| tool.to_owned())
                    .into_iter()
                    .collect(),
                release: if settled.failed {
                    Vec::new()
                } else {
                    vec![(tool.to_owned(), 1)]
                },
                ..Sync::default()
            },
        };
        match self.sync_run(run, None, &sync).await {
            Ok(Some(synced)) => {
                let closed = {
                    let mut runs = self.cache().lock();
                    match runs.get_mut(&run) {
                        Some(e) => {
                            e.status = synced.status;
                            e.output_bytes = synced.output_bytes + e.bytes_pending;
                            if let Some(hold) = e.tools.get_mut(tool) {
                                hold.failures = hold.failures.max(synced.failures);
                            }
                            e.synced = Instant::now();
                            e.status != RunStatus::Open
                        }
                        None => false,
                    }
                };
                if closed {
                    self.release_cached(run).await;
                }
            }
            Ok(None) => {}
            Err(e) => self.restore_cached(run, sync, &e),
        }
    }
}
