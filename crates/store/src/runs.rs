//! Runs and their budgets, on both backends: the `runs`, `run_tools` and `run_calls` tables, so
//! a run's counters hold across a restart and across instances on one database. Core's
//! [`RunLedger`] for [`Store`] counts calls in memory out of blocks reserved here (see
//! `run_cache.rs`); reading a run through this store first reports its cached calls.
//!
//! [`Store::admit_run_call`] is the durable path, one call per transaction of two conditional
//! statements, nothing read before: `UPDATE runs SET tool_calls = tool_calls + 1 WHERE … status =
//! 'open' AND tool_calls + reserved_calls < max_tool_calls AND <wall time left> AND <output
//! bytes left> RETURNING`, then an attempt of the tool, `run_tools.in_flight + 1 WHERE failures +
//! in_flight < max_attempts_per_tool` (rolled back with the call when refused). Each statement
//! is atomic on both backends (SQLite serializes writers; PostgreSQL locks the row and re-checks
//! the condition), so two instances or two calls at once can never both take a run's last call,
//! nor more attempts of a tool than it may fail. Settling a call ends its attempt: a failure, or
//! released. An attempt of this durable path whose instance crashed stays in flight (its outcome
//! is unknown, so it counts); the cached ledger's reservations and attempts are leased per
//! instance instead and come back when a crashed holder's lease expires (`run_cache.rs`). When the store cannot be reached the call is refused `unavailable`, never let
//! through uncounted.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::Serialize;
use toolgate_core::{
    BoxFuture, Budget, CallId, Exhausted, RunId, RunLedger, RunStatus, Settled, ToolError, Usage,
};

use crate::{Store, StoreError, on_pool, parse_ts, ts};

/// Takes an attempt of tool `$2` in run `$1` (one more in flight) unless its failures and calls
/// in flight already reach `$3`, the run's `max_attempts_per_tool`; answers the tool's failures,
/// no row when refused. The durable ledger and the cached one both take attempts with it.
pub(crate) const TAKE_ATTEMPT: &str = "INSERT INTO run_tools (run_id, tool, failures, in_flight) VALUES ($1, $2, 0, 1) \
     ON CONFLICT (run_id, tool) DO UPDATE SET in_flight = run_tools.in_flight + 1 \
     WHERE run_tools.failures + run_tools.in_flight < $3 RETURNING failures";

/// A run as stored: who owns it, its budget, what it has used.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StoredRun {
    /// Its id.
    pub id: RunId,
    /// The principal that owns it (the only one that may call under it or read it).
    pub principal: String,
    /// Its budget (every key resolved: the principal's ceiling, tightened by the run's own).
    pub budget: Budget,
    /// When it started.
    pub started_at: DateTime<Utc>,
    /// Open, exhausted or finished.
    pub status: RunStatus,
    /// Model turns reported.
    pub turns: u64,
    /// Tool calls counted (used).
    pub tool_calls: u64,
    /// Tool calls instances reserved in blocks and have not reported as used or given back
    /// yet (see `run_cache`): the run may still make at most `max_tool_calls - tool_calls -
    /// reserved_calls` calls beyond them. Each instance's share is leased: a crashed
    /// instance's is counted as used once its lease expires and another instance syncs the run.
    pub reserved_calls: u64,
    /// Output bytes returned.
    pub output_bytes: u64,
    /// Failed calls per tool.
    pub failures: BTreeMap<String, u32>,
}

impl StoredRun {
    /// Wall time since the run started, now.
    pub fn elapsed_ms(&self) -> u64 {
        self.usage(Utc::now()).elapsed_ms
    }

    /// What the run has used, its wall time measured at `now`.
    pub fn usage(&self, now: DateTime<Utc>) -> Usage {
        Usage {
            elapsed_ms: u64::try_from((now - self.started_at).num_milliseconds()).unwrap_or(0),
            turns: self.turns,
            tool_calls: self.tool_calls,
            output_bytes: self.output_bytes,
        }
    }
}

/// A call counted against a run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RunCall {
    /// The call's id (its audit entry: `GET /v1/calls/{id}`).
    pub call_id: CallId,
    /// The tool.
    pub tool: String,
    /// Whether it counted as a failure of the tool.
    pub failed: bool,
    /// Bytes of output returned.
    pub output_bytes: u64,
    /// When it finished.
    pub at: String,
}

/// What the store says to one more call or turn of a run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Admission {
    /// Counted; the new count (tool calls or turns).
    Counted(u64),
    /// Refused by a budget.
    Refused(Exhausted),
    /// No such run for this principal.
    NotFound,
}

/// How far [`Store::admit_run_call`]'s transaction got.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Step {
    /// The call and an attempt were taken: the run's new call count.
    Counted(i64),
    /// The run refused the call (closed, out of calls, time or output bytes, or not found).
    Run,
    /// The tool's attempts are taken.
    Tool,
}

/// Commits `tx` when `step` counted the call, else rolls it back.
async fn finish<DB: sqlx::Database>(
    tx: sqlx::Transaction<'_, DB>,
    step: &Step,
) -> Result<(), StoreError> {
    if matches!(step, Step::Counted(_)) {
        tx.commit().await.map_err(StoreError::db("committing"))
    } else {
        tx.rollback().await.map_err(StoreError::db("rolling back"))
    }
}

type Row = (
    String,
    String,
    String,
    String,
    Option<i64>,
    Option<i64>,
    Option<i64>,
    i64,
    Option<i64>,
    i64,
    i64,
    i64,
    i64,
);

/// A `SELECT` of a [`Row`] from `runs`, followed by `$tail`.
macro_rules! select {
    ($tail:literal) => {
        concat!(
            "SELECT id, principal, started_at, status, max_turns, max_tool_calls, timeout_ms, ",
            "max_attempts_per_tool, max_output_bytes, turns, tool_calls, reserved_calls, output_bytes FROM runs ",
            $tail
        )
    };
}

fn unsigned(v: i64) -> u64 {
    u64::try_from(v).unwrap_or(0)
}

fn small(v: i64) -> u32 {
    u32::try_from(v).unwrap_or(u32::MAX)
}

fn signed(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

fn from_row(row: Row) -> Result<StoredRun, StoreError> {
    let (
        id,
        principal,
        started_at,
        status,
        turns_max,
        calls_max,
        timeout,
        attempts,
        bytes_max,
        turns,
        calls,
        reserved,
        bytes,
    ) = row;
    Ok(StoredRun {
        id: RunId::parse(&id).map_err(StoreError::Corrupt)?,
        principal,
        budget: Budget {
            max_turns: turns_max.map(small),
            max_tool_calls: calls_max.map(small),
            timeout_ms: timeout.map(unsigned),
            max_attempts_per_tool: Some(small(attempts)),
            max_output_bytes: bytes_max.map(unsigned),
        },
        started_at: parse_ts(&started_at)?,
        status: RunStatus::parse(&status)
            .ok_or_else(|| StoreError::Corrupt(format!("unknown run status {status:?}")))?,
        turns: unsigned(turns),
        tool_calls: unsigned(calls),
        reserved_calls: unsigned(reserved),
        output_bytes: unsigned(bytes),
        failures: BTreeMap::new(),
    })
}

impl Store {
    /// Starts a run of `principal` with `budget` (already resolved and checked by the caller).
    ///
    /// # Errors
    ///
    /// `Database` when the insert fails.
    pub async fn create_run(
        &self,
        principal: &str,
        budget: &Budget,
    ) -> Result<StoredRun, StoreError> {
        let id = RunId::new();
        let at = crate::now();
        let budget = Budget {
            max_attempts_per_tool: Some(budget.attempts_per_tool()),
            ..*budget
        };
        on_pool!(self, p => {
            sqlx::query(
                "INSERT INTO runs (id, principal, started_at, started_ms, status, max_turns, max_tool_calls, \
                 timeout_ms, max_attempts_per_tool, max_output_bytes) VALUES ($1, $2, $3, $4, 'open', $5, $6, $7, $8, $9)",
            )
            .bind(id.to_string())
            .bind(principal)
            .bind(ts(at))
            .bind(at.timestamp_millis())
            .bind(budget.max_turns.map(i64::from))
            .bind(budget.max_tool_calls.map(i64::from))
            .bind(budget.timeout_ms.map(signed))
            .bind(i64::from(budget.attempts_per_tool()))
            .bind(budget.max_output_bytes.map(signed))
            .execute(p)
            .await
            .map_err(StoreError::db("starting a run"))?;
        });
        Ok(StoredRun {
            id,
            principal: principal.to_owned(),
            budget,
            started_at: at,
            status: RunStatus::Open,
            turns: 0,
            tool_calls: 0,
            reserved_calls: 0,
            output_bytes: 0,
            failures: BTreeMap::new(),
        })
    }

    /// The run `id` with its failures per tool (the tools that failed at least once: admitting a
    /// call creates its tool's row with none), or `None`.
    ///
    /// # Errors
    ///
    /// `Database` when a read fails; `Corrupt` for a row that does not read back.
    pub async fn run(&self, id: RunId) -> Result<Option<StoredRun>, StoreError> {
        self.report_if_dirty(id).await?;
        let key = id.to_string();
        let (row, failures): (Option<Row>, Vec<(String, i64)>) = on_pool!(self, p => {
            let row = sqlx::query_as(select!("WHERE id = $1"))
                .bind(&key)
                .fetch_optional(p)
                .await
                .map_err(StoreError::db("reading a run"))?;
            let failures = sqlx::query_as(
                "SELECT tool, failures FROM run_tools WHERE run_id = $1 AND failures > 0 ORDER BY tool",
            )
            .bind(&key)
            .fetch_all(p)
            .await
            .map_err(StoreError::db("reading a run's failures"))?;
            (row, failures)
        });
        let Some(row) = row else {
            return Ok(None);
        };
        let mut run = from_row(row)?;
        run.failures = failures
            .into_iter()
            .map(|(tool, n)| (tool, small(n)))
            .collect();
        Ok(Some(run))
    }

    /// Runs, newest first, each with its failures per tool: `principal`'s only when given; at
    /// most `limit`.
    ///
    /// # Errors
    ///
    /// `Database` when the read fails.
    pub async fn runs(
        &self,
        principal: Option<&str>,
        limit: u32,
    ) -> Result<Vec<StoredRun>, StoreError> {
        self.report_all_cached().await?;
        let (rows, failures): (Vec<Row>, Vec<(String, String, i64)>) = on_pool!(self, p => {
            let rows = sqlx::query_as(select!(
                "WHERE ($1 IS NULL OR principal = $1) ORDER BY id DESC LIMIT $2"
            ))
            .bind(principal)
            .bind(i64::from(limit))
            .fetch_all(p)
            .await
            .map_err(StoreError::db("listing runs"))?;
            let failures = sqlx::query_as(
                "SELECT run_id, tool, failures FROM run_tools WHERE failures > 0 AND run_id IN \
                 (SELECT id FROM runs WHERE ($1 IS NULL OR principal = $1) ORDER BY id DESC LIMIT $2) \
                 ORDER BY run_id, tool",
            )
            .bind(principal)
            .bind(i64::from(limit))
            .fetch_all(p)
            .await
            .map_err(StoreError::db("reading the runs' failures"))?;
            (rows, failures)
        });
        let mut runs = rows
            .into_iter()
            .map(from_row)
            .collect::<Result<Vec<_>, _>>()?;
        for (run_id, tool, n) in failures {
            if let Some(run) = runs.iter_mut().find(|r| r.id.to_string() == run_id) {
                run.failures.insert(tool, small(n));
            }
        }
        Ok(runs)
    }

    /// The calls counted against run `id`, oldest first.
    ///
    /// # Errors
    ///
    /// `Database` when the read fails.
    pub async fn run_calls(&self, id: RunId) -> Result<Vec<RunCall>, StoreError> {
        self.report_if_dirty(id).await?;
        let rows: Vec<(String, String, bool, i64, String)> = on_pool!(self, p => {
            sqlx::query_as(
                "SELECT call_id, tool, failed, output_bytes, at FROM run_calls WHERE run_id = $1 ORDER BY at, call_id",
            )
            .bind(id.to_string())
            .fetch_all(p)
            .await
            .map_err(StoreError::db("reading a run's calls"))?
        });
        rows.into_iter()
            .map(|(call_id, tool, failed, bytes, at)| {
                Ok(RunCall {
                    call_id: CallId::parse(&call_id).map_err(StoreError::Corrupt)?,
                    tool,
                    failed,
                    output_bytes: unsigned(bytes),
                    at,
                })
            })
            .collect()
    }

    async fn mark_exhausted(&self, id: &str) -> Result<(), StoreError> {
        on_pool!(self, p => {
            sqlx::query("UPDATE runs SET status = 'exhausted' WHERE id = $1 AND status = 'open'")
                .bind(id)
                .execute(p)
                .await
                .map_err(StoreError::db("marking a run exhausted"))?;
        });
        Ok(())
    }

    /// Checks run `id`'s budget for one call of `tool` by `principal` and counts it: the call
    /// and an attempt of the tool (in flight until [`Self::settle_run_call`]) are taken in one
    /// transaction, each by one conditional statement (see the module docs).
    ///
    /// # Errors
    ///
    /// `Database` when a statement fails.
    pub async fn admit_run_call(
        &self,
        id: RunId,
        principal: &str,
        tool: &str,
    ) -> Result<Admission, StoreError> {
        let key = id.to_string();
        let now = Utc::now();
        let now_ms = now.timestamp_millis();
        // Both statements, then commit (counted) or roll back (refused), in transaction `$tx`.
        macro_rules! take {
            ($tx:ident) => {{
                let call: Option<(i64, i64)> = sqlx::query_as(
                    "UPDATE runs SET tool_calls = tool_calls + 1 WHERE id = $1 AND principal = $2 \
                     AND status = 'open' AND (max_tool_calls IS NULL OR tool_calls + reserved_calls < max_tool_calls) \
                     AND (timeout_ms IS NULL OR $3 - started_ms < timeout_ms) \
                     AND (max_output_bytes IS NULL OR output_bytes < max_output_bytes) \
                     RETURNING tool_calls, max_attempts_per_tool",
                )
                .bind(&key)
                .bind(principal)
                .bind(now_ms)
                .fetch_optional(&mut *$tx)
                .await
                .map_err(StoreError::db("counting a call against its run"))?;
                match call {
                    None => Step::Run,
                    Some((n, attempts)) => {
                        let attempt: Option<i64> = sqlx::query_scalar(
                            TAKE_ATTEMPT,
                        )
                        .bind(&key)
                        .bind(tool)
                        .bind(attempts)
                        .fetch_optional(&mut *$tx)
                        .await
                        .map_err(StoreError::db("taking an attempt of a tool in a run"))?;
                        match attempt {
                            Some(_) => Step::Counted(n),
                            None => Step::Tool,
                        }
                    }
                }
            }};
        }
        let step = match &self.inner.pool {
            crate::Pool::Sqlite(pool) => {
                let mut tx = pool
                    .begin_with("BEGIN IMMEDIATE")
                    .await
                    .map_err(StoreError::db("starting a write transaction"))?;
                let step = take!(tx);
                finish(tx, &step).await?;
                step
            }
            crate::Pool::Postgres(pool) => {
                let mut tx = pool
                    .begin()
                    .await
                    .map_err(StoreError::db("starting a write transaction"))?;
                let step = take!(tx);
                finish(tx, &step).await?;
                step
            }
        };
        if let Step::Counted(n) = step {
            return Ok(Admission::Counted(unsigned(n)));
        }
        // Refused: say why, from the run as it is now.
        let Some(run) = self.run(id).await?.filter(|r| r.principal == principal) else {
            return Ok(Admission::NotFound);
        };
        let failed = run.failures.get(tool).copied().unwrap_or(0);
        if let Some(refusal) = run
            .budget
            .refusal(run.status, &run.usage(now), tool, failed)
        {
            if refusal.ends_run() {
                self.mark_exhausted(&key).await?;
            }
            return Ok(Admission::Refused(refusal));
        }
        if step == Step::Tool {
            let in_flight: Option<i64> = on_pool!(self, p => {
                sqlx::query_scalar("SELECT in_flight FROM run_tools WHERE run_id = $1 AND tool = $2")
                    .bind(&key)
                    .bind(tool)
                    .fetch_optional(p)
                    .await
                    .map_err(StoreError::db("reading a tool's calls in flight in a run"))?
            });
            return Ok(Admission::Refused(Exhausted::AttemptsInFlight {
                tool: tool.to_owned(),
                failed,
                in_flight: small(in_flight.unwrap_or(0)),
                max: run.budget.attempts_per_tool(),
            }));
        }
        // The statement refused what the read no longer shows (a call settled meanwhile):
        // the run's last call was taken.
        Ok(Admission::Refused(Exhausted::ToolCalls {
            used: run.tool_calls,
            max: run.budget.max_tool_calls.unwrap_or(0),
        }))
    }

    /// Records the outcome of a call counted against run `id`.
    ///
    /// # Errors
    ///
    /// `Database` when a statement fails.
    pub async fn settle_run_call(
        &self,
        id: RunId,
        tool: &str,
        call: CallId,
        settled: Settled,
    ) -> Result<(), StoreError> {
        let key = id.to_string();
        let at = ts(crate::now());
        // One transaction: one durable commit per settled call.
        macro_rules! settle_in {
            ($p:ident) => {{
                sqlx::query("UPDATE runs SET output_bytes = output_bytes + $2 WHERE id = $1")
                    .bind(&key)
                    .bind(signed(settled.output_bytes))
                    .execute(&mut *$p)
                    .await
                    .map_err(StoreError::db("counting a run's output bytes"))?;
                // The attempt taken at admission ends: a failure, or released.
                sqlx::query(
                    "UPDATE run_tools SET failures = failures + $3, \
                 in_flight = CASE WHEN in_flight > 0 THEN in_flight - 1 ELSE 0 END \
                 WHERE run_id = $1 AND tool = $2",
                )
                .bind(&key)
                .bind(tool)
                .bind(i64::from(settled.failed))
                .execute(&mut *$p)
                .await
                .map_err(StoreError::db(
                    "counting a failed attempt of a tool in a run",
                ))?;
                sqlx::query(
                    "INSERT INTO run_calls (run_id, call_id, tool, failed, output_bytes, at) \
                 VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (run_id, call_id) DO NOTHING",
                )
                .bind(&key)
                .bind(call.to_string())
                .bind(tool)
                .bind(settled.failed)
                .bind(signed(settled.output_bytes))
                .bind(&at)
                .execute(&mut *$p)
                .await
                .map_err(StoreError::db("recording a run's call"))?;
            }};
        }
        match &self.inner.pool {
            crate::Pool::Sqlite(pool) => {
                let mut tx = pool
                    .begin_with("BEGIN IMMEDIATE")
                    .await
                    .map_err(StoreError::db("starting a write transaction"))?;
                settle_in!(tx);
                tx.commit().await.map_err(StoreError::db("committing"))?;
            }
            crate::Pool::Postgres(pool) => {
                let mut tx = pool
                    .begin()
                    .await
                    .map_err(StoreError::db("starting a write transaction"))?;
                settle_in!(tx);
                tx.commit().await.map_err(StoreError::db("committing"))?;
            }
        }
        Ok(())
    }

    /// Counts one model turn of run `id` (reported by a client or the agent loop).
    ///
    /// # Errors
    ///
    /// `Database` when a statement fails.
    pub async fn run_turn(&self, id: RunId, principal: &str) -> Result<Admission, StoreError> {
        let key = id.to_string();
        let counted: Option<i64> = on_pool!(self, p => {
            sqlx::query_scalar(
                "UPDATE runs SET turns = turns + 1 WHERE id = $1 AND principal = $2 AND status = 'open' \
                 AND (max_turns IS NULL OR turns < max_turns) RETURNING turns",
            )
            .bind(&key)
            .bind(principal)
            .fetch_optional(p)
            .await
            .map_err(StoreError::db("counting a run's turn"))?
        });
        if let Some(n) = counted {
            return Ok(Admission::Counted(unsigned(n)));
        }
        let Some(run) = self.run(id).await?.filter(|r| r.principal == principal) else {
            return Ok(Admission::NotFound);
        };
        if run.status != RunStatus::Open {
            return Ok(Admission::Refused(Exhausted::Closed { status: run.status }));
        }
        self.mark_exhausted(&key).await?;
        self.release_cached(id).await;
        Ok(Admission::Refused(Exhausted::Turns {
            used: run.turns,
            max: run.budget.max_turns.unwrap_or(0),
        }))
    }

    /// Finishes `principal`'s open run `id`: further calls are refused. `false` when there is
    /// no such open run.
    ///
    /// # Errors
    ///
    /// `Database` when the statement fails.
    pub async fn finish_run(&self, id: RunId, principal: &str) -> Result<bool, StoreError> {
        // This instance's reservations go back first (a finished run takes no more calls).
        self.release_cached(id).await;
        let changed = on_pool!(self, p => {
            sqlx::query("UPDATE runs SET status = 'finished' WHERE id = $1 AND principal = $2 AND status = 'open'")
                .bind(id.to_string())
                .bind(principal)
                .execute(p)
                .await
                .map_err(StoreError::db("finishing a run"))?
                .rows_affected()
        });
        Ok(changed > 0)
    }
}

impl RunLedger for Store {
    fn admit<'a>(
        &'a self,
        run: RunId,
        principal: &'a str,
        tool: &'a str,
        _call: CallId,
    ) -> BoxFuture<'a, Result<(), ToolError>> {
        Box::pin(self.admit_cached(run, principal, tool))
    }

    fn settle<'a>(
        &'a self,
        run: RunId,
        tool: &'a str,
        call: CallId,
        settled: Settled,
    ) -> BoxFuture<'a, ()> {
        Box::pin(self.settle_cached(run, tool, call, settled))
    }
}
