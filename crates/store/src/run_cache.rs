//! The runs' counters cached in this process, so that checking a call against its run's budget
//! is an in-memory step ([`RunLedger`] for [`Store`]).
//!
//! The invariant (also in ARCHITECTURE.md, "Run budgets"): in the store, `runs.tool_calls +
//! runs.reserved_calls` never passes `max_tool_calls`, and per tool `run_tools.failures +
//! run_tools.in_flight` never passes `max_attempts_per_tool`; an instance only lets a call
//! through with one call of a block it reserved (`reserved_calls`) and one attempt of the tool it
//! holds (`in_flight`). So the budgets hold across instances.
//!
//! - **Leases**: what an instance reserves and holds is recorded under its instance id (the
//!   store's `origin`, also its NOTIFY id) in `run_leases` (calls, with an expiry) and
//!   `run_lease_attempts` (attempts per tool); `reserved_calls` and `in_flight` stay the totals
//!   the checks read. Every sync of a run renews its lease, and the sweeper renews all of this
//!   instance's leases in one statement every [`SWEEP`] (a quarter of the lease if shorter).
//!   A lease lasts [`RUN_LEASE`] (5 s, [`crate::StoreOptions::run_lease`]); an instance uses
//!   what it holds without asking the store only for three quarters of it after a renewal began.
//! - **Taking back**: every sync of a run first deletes the run's expired leases, in the same
//!   transaction and under the same row lock that guards the budget: their calls are counted as
//!   used (`tool_calls`; the holder may have made some and not reported them: calls lost, never
//!   granted twice — a run without a cap on calls just drops them), their attempts are freed
//!   (`in_flight`). So a crashed (`kill -9`) instance's calls and attempts come back one lease
//!   after its last renewal, and the run then ends `budget_exhausted` with its count exact.
//! - **A lease lost while alive** (paused, or the database out of reach for longer than the
//!   lease): the holder stops using its block at the fence above, and its next sync finds no
//!   lease row: the entry drops its reserved calls and held attempts. The overlap: what that sync
//!   reports of the old lease — used and returned calls, released attempts — is not applied (the
//!   taking back counted the whole block as used); its calls' records and output bytes are
//!   written. A call still running on an attempt of the lost lease is an orphan: its failure is
//!   counted only where `failures + in_flight` stays within the budget (the attempt may have been
//!   given to another instance), else it stays a failed call in `run_calls`.
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
//!   or exhausted, and every run on [`Store::close`] give back unused calls and held attempts
//!   (the lease ends with them). An instance refused because other instances hold the last
//!   calls gets `rate_limited` (the budget stage waits and asks again), never
//!   `budget_exhausted`; once their leases expire, the run's true end shows.
//! - **Order**: a run's syncs in one process take a lock from reading the entry to applying the
//!   answer, so a lost lease resets the entry once, before any later grant.
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

use crate::{Store, StoreError, on_pool, ts};

/// The most calls one block reserves.
pub(crate) const BLOCK_MAX: u64 = 4096;
/// How long a run goes without calls before this instance gives its reservations back.
pub(crate) const IDLE: Duration = Duration::from_secs(1);
/// How many reservations one admission makes before it asks to be retried.
const ADMIT_ROUNDS: usize = 8;
/// Call records written by one `INSERT` (6 parameters each: far below SQLite's 32,766 and
/// PostgreSQL's 65,535 bound parameters per statement).
const CALLS_PER_INSERT: usize = 1000;
/// How often cached counters are reported, idle runs given back and leases renewed (more
/// often with a lease shorter than 2 s: a quarter of it).
pub(crate) const SWEEP: Duration = Duration::from_millis(500);
/// How long an instance's lease on a run's reserved calls and held attempts lasts without
/// renewal. The holder renews every half second (its sweep), so 5 s is ten renewals missed in a row
/// (a database round trip stuck that long, or a paused process) before another instance may take
/// them back: long enough that a live instance under load keeps what it holds, short enough that
/// a killed instance's calls come back within a few seconds (the stage's retries of a
/// `rate_limited` refusal reach that far).
pub const RUN_LEASE: Duration = Duration::from_secs(5);

/// How long after a renewal began this instance still uses what the lease holds without asking
/// the store: three quarters of the lease, so it stops before another instance may take the
/// lease back (clocks agreeing to within a quarter of the lease).
fn fence(lease: Duration) -> Duration {
    lease - lease / 4
}

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
    /// Calls running on attempts of a lease this instance lost: their failures are written only
    /// where the tool's budget has room (the attempt may have been given to another instance).
    orphans: u32,
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
    /// Failures of calls admitted under a lease this instance lost, not yet written.
    orphan_failed: Vec<String>,
    tools: HashMap<String, Hold>,
    /// Calls of the run running here.
    busy: u32,
    last_used: Instant,
    synced: Instant,
    /// This instance holds a lease on the run in the store (`run_leases`), as last synced.
    leased: bool,
    /// Until when the lease may be used without asking the store (see [`fence`]).
    valid_until: Instant,
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
            orphan_failed: std::mem::take(&mut self.orphan_failed),
            leased: self.leased,
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
        self.orphan_failed.extend(sync.orphan_failed);
        for (tool, n) in sync.release {
            self.tools.entry(tool).or_default().held += n;
        }
    }

    /// The store says this instance's lease was taken back: what it reserved and held is no
    /// longer its own. Calls running go on; their failures are written as orphans.
    fn lose_lease(&mut self) {
        self.reserved = 0;
        self.used = 0;
        self.leased = false;
        for hold in self.tools.values_mut() {
            hold.orphans += hold.busy;
            hold.busy = 0;
            hold.held = 0;
        }
        self.orphan_failed.append(&mut self.failed);
    }

    /// Applies what the store said after a sync started at `began` (under the run's lock).
    fn apply(&mut self, synced: &Synced, began: Instant, lease: Duration) {
        if synced.lost {
            self.lose_lease();
        }
        self.status = synced.status;
        self.reserved += synced.granted;
        self.output_bytes = synced.output_bytes + self.bytes_pending;
        self.synced = Instant::now();
        self.leased = synced.leased;
        if synced.leased {
            self.valid_until = began + fence(lease);
        }
    }

    fn dirty(&self) -> bool {
        self.used > 0
            || self.bytes_pending > 0
            || !self.calls.is_empty()
            || !self.failed.is_empty()
            || !self.orphan_failed.is_empty()
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
    /// Failures of calls whose attempt was held under a lease since taken back: each is
    /// counted only where `failures + in_flight` stays within the budget.
    orphan_failed: Vec<String>,
    /// The entry believes it holds a lease on the run (so a missing lease row means lost).
    leased: bool,
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
    /// The sync said it held a lease and the store has none for this instance: taken back.
    lost: bool,
    /// This instance holds a lease on the run after the sync.
    leased: bool,
}

/// This process's cached runs (in [`crate::Inner`]).
#[derive(Default)]
pub(crate) struct RunCache {
    runs: Mutex<HashMap<RunId, Entry>>,
    sweeping: std::sync::atomic::AtomicBool,
    /// One lock per run held from taking what to sync to applying what the store said, so this
    /// process applies a run's syncs in the order the store made them (a lost lease resets).
    locks: Mutex<HashMap<RunId, Arc<tokio::sync::Mutex<()>>>>,
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

    /// Waits for run `id`'s sync lock.
    async fn run_lock(&self, id: RunId) -> tokio::sync::OwnedMutexGuard<()> {
        let lock = {
            let mut locks = self.locks.lock().unwrap_or_else(|p| p.into_inner());
            Arc::clone(locks.entry(id).or_default())
        };
        lock.lock_owned().await
    }

    /// Forgets the sync locks of runs no longer cached and not being synced.
    fn forget_locks(&self) {
        let cached: std::collections::HashSet<RunId> = self.lock().keys().copied().collect();
        self.locks
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|id, lock| cached.contains(id) || Arc::strong_count(lock) > 1);
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
        if e.status != RunStatus::Open || e.used >= e.reserved || Instant::now() >= e.valid_until {
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

fn signed_ms(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
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
fn reserved_elsewhere(
    run: RunId,
    used: u64,
    reserved: u64,
    max: u32,
    lease: Duration,
) -> ToolError {
    ToolError::new(
        ErrorKind::RateLimited,
        format!(
            "Run {run} has used {used} of its {max} tool calls and the last {reserved} are reserved by calls still running or by other toolgate instances, which give back what they do not use within about {} s of going idle (an instance that stopped, within {} s). Retry shortly.",
            IDLE.as_secs() + 1,
            lease.as_secs_f64().ceil()
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
        let holder = self.inner.origin.as_str();
        let now = Utc::now();
        let now_ms = now.timestamp_millis();
        let expires_ms = now_ms.saturating_add(signed_ms(self.inner.run_lease));
        // A failure of a call whose attempt this instance no longer holds (its lease was taken
        // back, the attempt perhaps given to another instance): counted only where the tool's
        // budget has room, so `failures + in_flight` never passes it; else it stays a failed
        // call in `run_calls` only. The tool's failures, when counted.
        macro_rules! orphan_failure {
            ($tx:ident, $tool:expr, $attempts:expr) => {{
                let n: Option<i64> = sqlx::query_scalar(
                    "UPDATE run_tools SET failures = failures + 1 \
                     WHERE run_id = $1 AND tool = $2 AND failures + in_flight < $3 RETURNING failures",
                )
                .bind(&key)
                .bind($tool)
                .bind($attempts)
                .fetch_optional(&mut *$tx)
                .await
                .map_err(StoreError::db("counting a failed attempt of a tool in a run"))?;
                if n.is_none() {
                    tracing::warn!(run = %id, tool = %$tool, "a call that ran on an attempt of a lease taken back failed where the tool's attempts are all taken; recorded as a failed call, not counted again");
                }
                n
            }};
        }
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
                let mut tool_calls = unsigned(tool_calls);
                let mut reserved_calls = unsigned(reserved_calls);
                // Other instances' leases whose holder stopped renewing are taken back under the
                // run's row lock: their calls count as used (some may have run and not been
                // reported: lost, never granted twice), their attempts are freed. This
                // instance's own lease, late because its sweeper was starved, is not: the row
                // is still there (nobody took it back, and nobody can while this transaction
                // holds the lock), its calls are reported exactly by this sync, and the sync
                // renews it. Taking it back would count its unused calls as spent.
                let expired: Vec<(String, i64)> = sqlx::query_as(
                    "DELETE FROM run_leases WHERE run_id = $1 AND expires_ms < $2 AND holder <> $3 \
                     RETURNING holder, reserved_calls",
                )
                .bind(&key)
                .bind(now_ms)
                .bind(holder)
                .fetch_all(&mut *$tx)
                .await
                .map_err(StoreError::db("taking back a run's expired leases"))?;
                for (gone, n) in &expired {
                    let n = unsigned(*n).min(reserved_calls);
                    reserved_calls -= n;
                    if budget.max_tool_calls.is_some() {
                        tool_calls = tool_calls.saturating_add(n);
                    }
                    let holds: Vec<(String, i64)> = sqlx::query_as(
                        "DELETE FROM run_lease_attempts WHERE run_id = $1 AND holder = $2 RETURNING tool, in_flight",
                    )
                    .bind(&key)
                    .bind(gone)
                    .fetch_all(&mut *$tx)
                    .await
                    .map_err(StoreError::db("taking back a run's expired attempts"))?;
                    for (tool, held) in &holds {
                        sqlx::query(
                            "UPDATE run_tools SET in_flight = CASE WHEN in_flight > $3 THEN in_flight - $3 ELSE 0 END \
                             WHERE run_id = $1 AND tool = $2",
                        )
                        .bind(&key)
                        .bind(tool)
                        .bind(*held)
                        .execute(&mut *$tx)
                        .await
                        .map_err(StoreError::db("freeing a tool's expired attempts in a run"))?;
                    }
                    tracing::info!(run = %id, holder = %gone, calls = n, attempts = holds.len(), "took back an expired run lease: its calls count as used, its attempts are free");
                }
                let mine: Option<i64> = sqlx::query_scalar(
                    "SELECT reserved_calls FROM run_leases WHERE run_id = $1 AND holder = $2",
                )
                .bind(&key)
                .bind(holder)
                .fetch_optional(&mut *$tx)
                .await
                .map_err(StoreError::db("reading this instance's run lease"))?;
                // Held and gone: what the sync reports of the lease (used and returned calls,
                // released attempts) was counted when it was taken back.
                let lost = sync.leased && mine.is_none();
                let mut mine = unsigned(mine.unwrap_or(0));
                if !lost {
                    let returned = sync.returned.min(mine);
                    tool_calls = tool_calls.saturating_add(sync.used);
                    reserved_calls = reserved_calls.saturating_sub(returned);
                    mine -= returned;
                    for (tool, n) in &sync.release {
                        let freed: Option<i64> = sqlx::query_scalar(
                            "UPDATE run_lease_attempts SET in_flight = in_flight - $4 \
                             WHERE run_id = $1 AND holder = $2 AND tool = $3 AND in_flight >= $4 RETURNING in_flight",
                        )
                        .bind(&key)
                        .bind(holder)
                        .bind(tool)
                        .bind(i64::from(*n))
                        .fetch_optional(&mut *$tx)
                        .await
                        .map_err(StoreError::db("giving back a tool's attempts in a run"))?;
                        if freed.is_none() {
                            continue;
                        }
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
                }
                let output_bytes = unsigned(output_bytes).saturating_add(sync.bytes);
                let mut failures = 0;
                let held_failures: &[String] = if lost { &[] } else { &sync.failed };
                let orphans = sync
                    .orphan_failed
                    .iter()
                    .chain(if lost { sync.failed.iter() } else { [].iter() });
                for tool in held_failures {
                    let held: Option<i64> = sqlx::query_scalar(
                        "UPDATE run_lease_attempts SET in_flight = in_flight - 1 \
                         WHERE run_id = $1 AND holder = $2 AND tool = $3 AND in_flight > 0 RETURNING in_flight",
                    )
                    .bind(&key)
                    .bind(holder)
                    .bind(tool)
                    .fetch_optional(&mut *$tx)
                    .await
                    .map_err(StoreError::db("ending a held attempt of a tool in a run"))?;
                    let n: Option<i64> = if held.is_some() {
                        sqlx::query_scalar(
                            "UPDATE run_tools SET failures = failures + 1, \
                             in_flight = CASE WHEN in_flight > 0 THEN in_flight - 1 ELSE 0 END \
                             WHERE run_id = $1 AND tool = $2 RETURNING failures",
                        )
                        .bind(&key)
                        .bind(tool)
                        .fetch_optional(&mut *$tx)
                        .await
                        .map_err(StoreError::db("counting a failed attempt of a tool in a run"))?
                    } else {
                        // No attempt of it held here any more: counted as an orphan.
                        orphan_failure!($tx, tool, attempts)
                    };
                    failures = small(n.unwrap_or(0));
                }
                for tool in orphans {
                    if let Some(n) = orphan_failure!($tx, tool, attempts) {
                        failures = small(n);
                    }
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
                    lost,
                    leased: false,
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
                                mine += synced.granted;
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
                            Some(_) => {
                                synced.attempt = true;
                                sqlx::query(
                                    "INSERT INTO run_lease_attempts (run_id, holder, tool, in_flight) VALUES ($1, $2, $3, 1) \
                                     ON CONFLICT (run_id, holder, tool) DO UPDATE SET in_flight = run_lease_attempts.in_flight + 1",
                                )
                                .bind(&key)
                                .bind(holder)
                                .bind(tool)
                                .execute(&mut *$tx)
                                .await
                                .map_err(StoreError::db("holding an attempt of a tool in a run"))?;
                            }
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
                // The lease lives while it holds calls or attempts, renewed by this sync.
                sqlx::query("DELETE FROM run_lease_attempts WHERE run_id = $1 AND holder = $2 AND in_flight <= 0")
                    .bind(&key)
                    .bind(holder)
                    .execute(&mut *$tx)
                    .await
                    .map_err(StoreError::db("forgetting a run's ended attempts"))?;
                let holds: i64 = sqlx::query_scalar(
                    "SELECT COUNT(*) FROM run_lease_attempts WHERE run_id = $1 AND holder = $2",
                )
                .bind(&key)
                .bind(holder)
                .fetch_one(&mut *$tx)
                .await
                .map_err(StoreError::db("reading this instance's held attempts"))?;
                synced.leased = mine > 0 || holds > 0;
                if synced.leased {
                    sqlx::query(
                        "INSERT INTO run_leases (run_id, holder, reserved_calls, expires_ms) VALUES ($1, $2, $3, $4) \
                         ON CONFLICT (run_id, holder) DO UPDATE SET reserved_calls = excluded.reserved_calls, \
                         expires_ms = excluded.expires_ms",
                    )
                    .bind(&key)
                    .bind(holder)
                    .bind(signed(mine))
                    .bind(expires_ms)
                    .execute(&mut *$tx)
                    .await
                    .map_err(StoreError::db("renewing this instance's run lease"))?;
                } else {
                    sqlx::query("DELETE FROM run_leases WHERE run_id = $1 AND holder = $2")
                        .bind(&key)
                        .bind(holder)
                        .execute(&mut *$tx)
                        .await
                        .map_err(StoreError::db("ending this instance's run lease"))?;
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
        let every = SWEEP.min(self.inner.run_lease / 4);
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    () = shutdown.cancelled() => break,
                    () = tokio::time::sleep(every) => {}
                }
                let Some(inner) = weak.upgrade() else { break };
                Store { inner }.sweep_runs().await;
            }
        });
    }

    /// Renews every lease this instance holds, in one statement, and lets the runs it still
    /// holds use them for another [`fence`]. A lease already taken back is not in the answer:
    /// its run finds out at its next sync.
    async fn renew_leases(&self) -> Result<(), StoreError> {
        let began = Instant::now();
        let expires_ms = Utc::now()
            .timestamp_millis()
            .saturating_add(signed_ms(self.inner.run_lease));
        let holder = self.inner.origin.as_str();
        let renewed: Vec<String> = on_pool!(self, p => {
            sqlx::query_scalar(
                "UPDATE run_leases SET expires_ms = $2 WHERE holder = $1 RETURNING run_id",
            )
            .bind(holder)
            .bind(expires_ms)
            .fetch_all(p)
            .await
            .map_err(StoreError::db("renewing this instance's run leases"))?
        });
        let mut runs = self.cache().lock();
        for run in renewed {
            if let Some(e) = RunId::parse(&run).ok().and_then(|id| runs.get_mut(&id))
                && e.leased
            {
                e.valid_until = e.valid_until.max(began + fence(self.inner.run_lease));
            }
        }
        Ok(())
    }

    /// Renews the leases, gives back idle runs, reports the others.
    async fn sweep_runs(&self) {
        if let Err(e) = self.renew_leases().await {
            tracing::warn!(error = %ErrorChain(&e), "this instance's run leases could not be renewed; other instances take them back {} s after the last renewal", self.inner.run_lease.as_secs_f64());
        }
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
        self.cache().forget_locks();
    }

    /// Writes a failed sync's work back into the entry, if there still is one; else logs it.
    fn restore_cached(&self, id: RunId, sync: Sync, e: &StoreError) {
        tracing::warn!(error = %ErrorChain(e), run = %id, "a run's counted calls could not be written; kept in memory");
        if let Some(entry) = self.cache().lock().get_mut(&id) {
            entry.restore(sync);
        }
    }

    /// Syncs what `take` takes from run `id`'s entry (under the run's lock, so syncs apply in
    /// order) and applies the answer; `None` without an entry. Whether the run is closed.
    async fn sync_entry(
        &self,
        id: RunId,
        take: impl FnOnce(&mut Entry) -> Sync,
    ) -> Result<Option<bool>, StoreError> {
        let _order = self.cache().run_lock(id).await;
        let began = Instant::now();
        let Some(sync) = self.cache().lock().get_mut(&id).map(take) else {
            return Ok(None);
        };
        match self.sync_run(id, None, &sync).await {
            Ok(Some(synced)) => {
                let mut runs = self.cache().lock();
                Ok(runs.get_mut(&id).map(|e| {
                    e.apply(&synced, began, self.inner.run_lease);
                    if let Some(hold) = sync.failed.first().and_then(|t| e.tools.get_mut(t)) {
                        hold.failures = hold.failures.max(synced.failures);
                    }
                    e.status != RunStatus::Open
                }))
            }
            Ok(None) => {
                self.cache().lock().remove(&id);
                Ok(None)
            }
            Err(e) => {
                self.restore_cached(id, sync, &e);
                Err(e)
            }
        }
    }

    /// Reports run `id`'s used calls, bytes and call records (keeping its reservations, renewing
    /// its lease) and reads its status back.
    pub(crate) async fn report_cached(&self, id: RunId) -> Result<(), StoreError> {
        if self.sync_entry(id, |e| e.take(false)).await? == Some(true) {
            self.release_cached(id).await;
        }
        Ok(())
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
    /// (a call still running reports itself when it settles; its attempt keeps the lease).
    pub(crate) async fn release_cached(&self, id: RunId) {
        let _order = self.cache().run_lock(id).await;
        let Some(mut entry) = self.cache().lock().remove(&id) else {
            return;
        };
        let sync = entry.take(true);
        if let Err(e) = self.sync_run(id, None, &sync).await {
            // Conservative: what stays reserved is lost, never granted twice (until the lease
            // expires and another instance takes it back).
            tracing::warn!(error = %ErrorChain(&e), run = %id, "a run's reserved calls could not be given back; they stay reserved until this instance's lease expires");
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
            match self.cache().try_admit(run, principal, tool) {
                Fast::Admitted => return Ok(()),
                Fast::NotFound => return Err(toolgate_core::run_not_found(&run)),
                Fast::Slow => {}
            }
            let order = self.cache().run_lock(run).await;
            let began = Instant::now();
            // Reserve only what is missing; the budget is checked either way. Failures and
            // orphans waiting to be written go along (a lost lease resets the entry).
            let mut sync = {
                let mut runs = self.cache().lock();
                match runs.get_mut(&run) {
                    Some(e) => {
                        let mut sync = Sync {
                            leased: e.leased,
                            failed: std::mem::take(&mut e.failed),
                            orphan_failed: std::mem::take(&mut e.orphan_failed),
                            ..Sync::default()
                        };
                        sync.want_calls = e.used >= e.reserved;
                        sync.take_attempt = e.tools.get(tool).is_none_or(|h| h.busy >= h.held);
                        sync
                    }
                    None => Sync {
                        want_calls: true,
                        take_attempt: true,
                        ..Sync::default()
                    },
                }
            };
            sync.check = Some(tool.to_owned());
            let synced = match self.sync_run(run, Some(principal), &sync).await {
                Ok(Some(s)) => s,
                Ok(None) => return Err(toolgate_core::run_not_found(&run)),
                Err(e) => {
                    self.restore_cached(run, sync, &e);
                    return Err(unreachable(run, &e));
                }
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
                    orphan_failed: Vec::new(),
                    tools: HashMap::new(),
                    busy: 0,
                    last_used: Instant::now(),
                    synced: Instant::now(),
                    leased: false,
                    valid_until: began,
                });
                e.apply(&synced, began, self.inner.run_lease);
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
            drop(order);
            if let Some((used, reserved, max)) = synced.elsewhere {
                return Err(reserved_elsewhere(
                    run,
                    used,
                    reserved,
                    max,
                    self.inner.run_lease,
                ));
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
        // Some(write now?) with an entry; None when the run was released while the call ran.
        let write = {
            let mut runs = self.cache().lock();
            runs.get_mut(&run).map(|e| {
                e.busy = e.busy.saturating_sub(1);
                e.bytes_pending += settled.output_bytes;
                e.output_bytes += settled.output_bytes;
                e.calls.extend(record.take());
                let hold = e.tools.entry(tool.to_owned()).or_default();
                if hold.orphans > 0 {
                    // Admitted under a lease since lost: the attempt is no longer held here.
                    hold.orphans -= 1;
                    if settled.failed {
                        hold.failures += 1;
                        e.orphan_failed.push(tool.to_owned());
                    }
                } else {
                    hold.busy = hold.busy.saturating_sub(1);
                    if settled.failed {
                        hold.held = hold.held.saturating_sub(1);
                        hold.failures += 1;
                        e.failed.push(tool.to_owned());
                    }
                }
                settled.failed
                    || (e.used >= e.reserved && e.busy == 0)
                    || e.budget.max_output_bytes.is_some()
            })
        };
        match write {
            Some(false) => {}
            Some(true) => match self.sync_entry(run, |e| e.take(false)).await {
                Ok(Some(true)) => self.release_cached(run).await,
                Ok(_) => {}
                Err(_) => {} // kept in the entry (restored) and logged; the sweep retries.
            },
            None => {
                // Released while the call ran: its attempt is still held in the store, under
                // this instance's lease if it was not taken back.
                let sync = Sync {
                    leased: true,
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
                };
                let _order = self.cache().run_lock(run).await;
                if let Err(e) = self.sync_run(run, None, &sync).await {
                    tracing::warn!(error = %ErrorChain(&e), run = %run, "a settled call of a released run could not be written; its attempt stays held until this instance's lease expires");
                }
            }
        }
    }
}
