//! Durable approvals: a call that needs a person's yes waits here, bound to its principal, the
//! tool's definition hash and its canonical arguments, until it is decided, expires, or runs.
//!
//! Every status change is one conditional `UPDATE … WHERE status = <expected>` inside a write
//! transaction, so concurrent deciders, runners and processes agree on one outcome:
//! `pending → approved | denied | expired`, `approved → running → executed`, and after a crash
//! `running → indeterminate` (started, no recorded result: never re-run automatically).
//!
//! Every change also gives the row the next *revision* (one more than the largest, assigned under
//! the same serializing lock), so revisions grow in commit order and another process can follow
//! the changes with [`Store::approval_changes`] from an [`ApprovalCursor`].

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};
use toolgate_core::ErrorChain;
use toolgate_core::{CallOrigin, RunId};

use crate::error::StoreError;
use crate::{Store, from_json, now, on_pool, parse_ts, ts, write_tx};

/// The PostgreSQL advisory lock serializing approval changes.
const LOCK_APPROVALS: i64 = 0x7467_0003;

/// Where an approval stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalStatus {
    /// Waiting for a decision.
    Pending,
    /// Approved, not yet started.
    Approved,
    /// A person said no; it never runs.
    Denied,
    /// Not decided in time.
    Expired,
    /// Claimed by a runner; executing.
    Running,
    /// Ran; the result is stored.
    Executed,
    /// Started before a crash with no recorded result: a person must check what happened.
    Indeterminate,
}

impl ApprovalStatus {
    /// Every status, in the order an approval can reach them.
    pub const ALL: [Self; 7] = [
        Self::Pending,
        Self::Approved,
        Self::Denied,
        Self::Expired,
        Self::Running,
        Self::Executed,
        Self::Indeterminate,
    ];

    /// The snake_case name stored and sent on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Approved => "approved",
            Self::Denied => "denied",
            Self::Expired => "expired",
            Self::Running => "running",
            Self::Executed => "executed",
            Self::Indeterminate => "indeterminate",
        }
    }

    /// Whether nothing more will happen to the approval.
    pub fn is_final(self) -> bool {
        matches!(
            self,
            Self::Denied | Self::Expired | Self::Executed | Self::Indeterminate
        )
    }
}

impl fmt::Display for ApprovalStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for ApprovalStatus {
    type Err = StoreError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|v| v.as_str() == s)
            .ok_or_else(|| {
                StoreError::Invalid(format!(
                    "Unknown approval status {s:?}; use one of {}",
                    Self::ALL.map(Self::as_str).join(", ")
                ))
            })
    }
}

/// What a caller asks approval for.
#[derive(Clone, Debug)]
pub struct NewApproval {
    /// The id of the call that waits.
    pub call_id: String,
    /// The tool it calls.
    pub tool: String,
    /// The tool's definition hash: the approval holds only for this version.
    pub definition_hash: String,
    /// The canonical arguments the call will run with.
    pub arguments: Value,
    /// The same with sensitive values redacted, for people to read.
    pub display: Value,
    /// Who calls.
    pub principal: String,
    /// Why the caller wants to run it (shown to the approver).
    pub reason: Option<String>,
    /// Repeating a request with the same key returns the same approval.
    pub idempotency_key: Option<String>,
    /// How long it may wait for a decision.
    pub ttl: Duration,
    /// Where the call came from (MCP client, REST, command line), when known.
    pub origin: Option<CallOrigin>,
    /// The run the call was asked in: the approved call runs in it, counted against its budget.
    pub run: Option<RunId>,
}

/// The immutable part of an approval, stored as one JSON document.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Request {
    call_id: String,
    tool: String,
    definition_hash: String,
    arguments_sha256: String,
    arguments: Value,
    display: Value,
    principal: String,
    reason: Option<String>,
    idempotency_key: Option<String>,
    created_at: DateTime<Utc>,
    expires_at: DateTime<Utc>,
    /// Absent from approvals recorded before origins were kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    origin: Option<CallOrigin>,
    /// Absent from approvals asked outside a run (and from those recorded before runs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    run: Option<RunId>,
}

/// One approval as stored. Serializes (camelCase) without the unredacted arguments.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Approval {
    /// The approval's id, `apr_…`.
    pub id: String,
    /// The id of the call that waits.
    pub call_id: String,
    /// The tool it calls.
    pub tool: String,
    /// The definition hash the approval is bound to.
    pub definition_hash: String,
    /// SHA-256 of the canonical arguments, which the approval is bound to.
    pub arguments_sha256: String,
    /// The arguments the call runs with (sensitive values included): never shown.
    #[serde(skip)]
    pub arguments: Value,
    /// The arguments with sensitive values redacted.
    #[serde(rename = "arguments")]
    pub display: Value,
    /// Who calls; the approved call runs as this principal.
    pub principal: String,
    /// Why the caller wants to run it.
    pub reason: Option<String>,
    /// The caller's idempotency key, if it gave one.
    pub idempotency_key: Option<String>,
    /// Where the approval stands.
    pub status: ApprovalStatus,
    /// When it was requested.
    pub created_at: DateTime<Utc>,
    /// When it expires if nobody decides.
    pub expires_at: DateTime<Utc>,
    /// When it was approved or denied.
    pub decided_at: Option<DateTime<Utc>>,
    /// Who approved or denied it.
    pub decided_by: Option<String>,
    /// The reason given with the decision.
    pub decision_reason: Option<String>,
    /// When the approved call started running.
    pub started_at: Option<DateTime<Utc>>,
    /// When it finished.
    pub finished_at: Option<DateTime<Utc>>,
    /// The call's result envelope once executed.
    pub result: Option<Value>,
    /// Where the call came from (MCP client and version, REST, command line), when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub origin: Option<CallOrigin>,
    /// The run the call was asked in; the approved call runs in it (counted, and refused
    /// `budget_exhausted` when the run is spent, finished or out of time by then).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run: Option<RunId>,
}

/// SHA-256 (hex) of a value's canonical JSON (keys sorted, no whitespace).
pub fn arguments_sha256(arguments: &Value) -> String {
    let mut text = String::new();
    toolgate_core::write_canonical(arguments, &mut text);
    let digest = Sha256::digest(text.as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// Approvals found by [`Store::recover_approvals`] after a restart.
#[derive(Clone, Debug, Default)]
pub struct RecoveredApprovals {
    /// Approved and never started: to run now, once.
    pub ready: Vec<Approval>,
    /// Started before the crash with no recorded result: now `indeterminate`.
    pub indeterminate: Vec<Approval>,
}

/// A position in the order approvals changed in (see [`Store::approval_changes`]): after the
/// change with this revision to the approval with this id. The default is before every change.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ApprovalCursor {
    revision: i64,
    id: String,
}

type Row = (
    String,
    String,
    String,
    Option<String>,
    Option<String>,
    Option<String>,
    Option<String>,
    Option<String>,
    Option<String>,
);

/// A [`Row`] preceded by the row's revision.
type RevisionRow = (
    i64,
    String,
    String,
    String,
    Option<String>,
    Option<String>,
    Option<String>,
    Option<String>,
    Option<String>,
    Option<String>,
);

/// The columns of a [`Row`].
macro_rules! columns {
    () => {
        "id, request_json, status, decided_at, decided_by, decision_reason, started_at, finished_at, result_json"
    };
}

/// `SELECT <columns> FROM approvals <rest>` as a static string (sqlx takes no dynamic SQL).
macro_rules! select {
    ($rest:literal) => {
        concat!("SELECT ", columns!(), " FROM approvals ", $rest)
    };
}

/// The revision the next change gets: evaluated inside the serialized write transaction, so
/// revisions grow in commit order (every statement that changes an approval sets it).
macro_rules! next_revision {
    () => {
        "(SELECT COALESCE(MAX(revision), 0) + 1 FROM approvals)"
    };
}

fn from_row(row: Row) -> Result<Approval, StoreError> {
    let (id, request, status, decided_at, decided_by, decision_reason, started, finished, result) =
        row;
    let r: Request = from_json(&request, "approval request")?;
    let opt_ts = |v: Option<String>| v.as_deref().map(parse_ts).transpose();
    Ok(Approval {
        id,
        call_id: r.call_id,
        tool: r.tool,
        definition_hash: r.definition_hash,
        arguments_sha256: r.arguments_sha256,
        arguments: r.arguments,
        display: r.display,
        principal: r.principal,
        reason: r.reason,
        idempotency_key: r.idempotency_key,
        status: status.parse()?,
        created_at: r.created_at,
        expires_at: r.expires_at,
        decided_at: opt_ts(decided_at)?,
        decided_by,
        decision_reason,
        started_at: opt_ts(started)?,
        finished_at: opt_ts(finished)?,
        result: result
            .as_deref()
            .map(|j| from_json(j, "approval result"))
            .transpose()?,
        origin: r.origin,
        run: r.run,
    })
}

fn state_error(a: &Approval, wanted: &str) -> StoreError {
    StoreError::ApprovalState(format!(
        "Approval {} is {}, so it cannot be {wanted}{}",
        a.id,
        a.status,
        match a.status {
            ApprovalStatus::Expired => "; ask for a new approval by calling the tool again",
            ApprovalStatus::Indeterminate =>
                "; check whether the call had its effect before calling again",
            _ => "",
        }
    ))
}

fn not_found(id: &str) -> StoreError {
    StoreError::NotFound(format!(
        "No approval {id} (list them with `toolgate approvals list`)"
    ))
}

impl Store {
    /// Records a pending approval; with an idempotency key already used by this principal,
    /// returns that approval instead (`false`) — or a conflict when the key was used for another
    /// tool or other arguments.
    pub async fn request_approval(&self, new: NewApproval) -> Result<(Approval, bool), StoreError> {
        let created = now();
        let ttl = chrono::Duration::from_std(new.ttl).unwrap_or(chrono::Duration::hours(24));
        let request = Request {
            arguments_sha256: arguments_sha256(&new.arguments),
            call_id: new.call_id,
            tool: new.tool,
            definition_hash: new.definition_hash,
            arguments: new.arguments,
            display: new.display,
            principal: new.principal,
            reason: new.reason,
            idempotency_key: new.idempotency_key,
            created_at: created,
            expires_at: created + ttl,
            origin: new.origin,
            run: new.run,
        };
        let id = format!("apr_{}", uuid::Uuid::new_v4().simple());
        let json = serde_json::to_string(&request)
            .map_err(|e| StoreError::Invalid(format!("Cannot encode the approval: {e}")))?;
        let out = write_tx!(self, LOCK_APPROVALS, tx => {
            let existing: Option<Row> = match &request.idempotency_key {
                Some(key) => sqlx::query_as(select!("WHERE principal = $1 AND idempotency_key = $2"))
                    .bind(&request.principal)
                    .bind(key)
                    .fetch_optional(&mut *tx)
                    .await
                    .map_err(StoreError::db("reading an approval"))?,
                None => None,
            };
            match existing {
                Some(row) => {
                    let found = from_row(row)?;
                    if found.tool != request.tool || found.arguments_sha256 != request.arguments_sha256 {
                        return Err(StoreError::ApprovalState(format!(
                            "Idempotency key {:?} was already used for another call ({} with other arguments, approval {}); use a new key for a new call",
                            request.idempotency_key.as_deref().unwrap_or(""),
                            found.tool,
                            found.id
                        )));
                    }
                    (found, false)
                }
                None => {
                    sqlx::query(concat!(
                        "INSERT INTO approvals (id, call_id, tool, principal, idempotency_key, request_json, status, created_at, expires_at, revision) \
                         VALUES ($1, $2, $3, $4, $5, $6, 'pending', $7, $8, ",
                        next_revision!(),
                        ")"
                    ))
                    .bind(&id)
                    .bind(&request.call_id)
                    .bind(&request.tool)
                    .bind(&request.principal)
                    .bind(&request.idempotency_key)
                    .bind(&json)
                    .bind(ts(request.created_at))
                    .bind(ts(request.expires_at))
                    .execute(&mut *tx)
                    .await
                    .map_err(StoreError::db("recording an approval"))?;
                    let approval = Approval {
                        id: id.clone(),
                        call_id: request.call_id.clone(),
                        tool: request.tool.clone(),
                        definition_hash: request.definition_hash.clone(),
                        arguments_sha256: request.arguments_sha256.clone(),
                        arguments: request.arguments.clone(),
                        display: request.display.clone(),
                        principal: request.principal.clone(),
                        reason: request.reason.clone(),
                        idempotency_key: request.idempotency_key.clone(),
                        status: ApprovalStatus::Pending,
                        created_at: request.created_at,
                        expires_at: request.expires_at,
                        decided_at: None,
                        decided_by: None,
                        decision_reason: None,
                        started_at: None,
                        finished_at: None,
                        result: None,
                        origin: request.origin.clone(),
                        run: request.run,
                    };
                    (approval, true)
                }
            }
        });
        Ok(out)
    }

    /// One approval (expired first if its time ran out while pending).
    pub async fn approval(&self, id: &str) -> Result<Option<Approval>, StoreError> {
        self.expire_approvals().await?;
        let row: Option<Row> = on_pool!(self, p => {
            sqlx::query_as(select!("WHERE id = $1"))
                .bind(id)
                .fetch_optional(p)
                .await
                .map_err(StoreError::db("reading an approval"))?
        });
        row.map(from_row).transpose()
    }

    /// Approvals, newest first, optionally only those with `status` or of `principal`.
    pub async fn approvals(
        &self,
        status: Option<ApprovalStatus>,
        principal: Option<&str>,
        limit: u32,
    ) -> Result<Vec<Approval>, StoreError> {
        self.expire_approvals().await?;
        let rows: Vec<Row> = on_pool!(self, p => {
            sqlx::query_as(select!(
                "WHERE ($1 IS NULL OR status = $1) AND ($2 IS NULL OR principal = $2) ORDER BY created_at DESC, id DESC LIMIT $3"
            ))
                .bind(status.map(ApprovalStatus::as_str))
                .bind(principal)
                .bind(i64::from(limit))
                .fetch_all(p)
                .await
                .map_err(StoreError::db("listing approvals"))?
        });
        rows.into_iter().map(from_row).collect()
    }

    /// Approves or denies a pending approval. Anything but `pending` (an expired one included)
    /// is refused with its current status.
    pub async fn decide_approval(
        &self,
        id: &str,
        approve: bool,
        by: &str,
        reason: Option<&str>,
    ) -> Result<Approval, StoreError> {
        self.expire_approvals().await?;
        let to = if approve {
            ApprovalStatus::Approved
        } else {
            ApprovalStatus::Denied
        };
        let at = ts(now());
        let changed = write_tx!(self, LOCK_APPROVALS, tx => {
            sqlx::query(concat!(
                "UPDATE approvals SET status = $1, decided_at = $2, decided_by = $3, decision_reason = $4, revision = ",
                next_revision!(),
                " WHERE id = $5 AND status = 'pending'"
            ))
            .bind(to.as_str())
            .bind(&at)
            .bind(by)
            .bind(reason)
            .bind(id)
            .execute(&mut *tx)
            .await
            .map_err(StoreError::db("deciding an approval"))?
            .rows_affected()
        });
        let approval = self.approval(id).await?.ok_or_else(|| not_found(id))?;
        if changed == 0 {
            return Err(state_error(
                &approval,
                if approve { "approved" } else { "denied" },
            ));
        }
        Ok(approval)
    }

    /// Claims an approved approval for running (`approved → running`, durable before the call
    /// starts). `None` when it is not `approved` (another runner has it, or it was never
    /// approved): the caller must not run it.
    pub async fn claim_approval(&self, id: &str) -> Result<Option<Approval>, StoreError> {
        let at = ts(now());
        let changed = write_tx!(self, LOCK_APPROVALS, tx => {
            sqlx::query(concat!(
                "UPDATE approvals SET status = 'running', started_at = $1, revision = ",
                next_revision!(),
                " WHERE id = $2 AND status = 'approved'"
            ))
            .bind(&at)
            .bind(id)
            .execute(&mut *tx)
            .await
            .map_err(StoreError::db("claiming an approval"))?
            .rows_affected()
        });
        if changed == 0 {
            return Ok(None);
        }
        self.approval(id).await
    }

    /// Records the result of a claimed approval's call (`running → executed`).
    pub async fn finish_approval(&self, id: &str, result: &Value) -> Result<Approval, StoreError> {
        let at = ts(now());
        let json = result.to_string();
        let changed = write_tx!(self, LOCK_APPROVALS, tx => {
            sqlx::query(concat!(
                "UPDATE approvals SET status = 'executed', finished_at = $1, result_json = $2, revision = ",
                next_revision!(),
                " WHERE id = $3 AND status = 'running'"
            ))
            .bind(&at)
            .bind(&json)
            .bind(id)
            .execute(&mut *tx)
            .await
            .map_err(StoreError::db("recording an approval's result"))?
            .rows_affected()
        });
        let approval = self.approval(id).await?.ok_or_else(|| not_found(id))?;
        if changed == 0 {
            return Err(state_error(&approval, "finished"));
        }
        Ok(approval)
    }

    /// Marks pending approvals whose time ran out as `expired`; returns how many. A plain read
    /// finds them first, so the write lock is taken only when one expired.
    pub async fn expire_approvals(&self) -> Result<u64, StoreError> {
        let at = ts(now());
        let due: Option<String> = on_pool!(self, p => {
            sqlx::query_scalar(
                "SELECT id FROM approvals WHERE status = 'pending' AND expires_at <= $1 LIMIT 1",
            )
            .bind(&at)
            .fetch_optional(p)
            .await
            .map_err(StoreError::db("reading expired approvals"))?
        });
        if due.is_none() {
            return Ok(0);
        }
        let changed = write_tx!(self, LOCK_APPROVALS, tx => {
            sqlx::query(concat!(
                "UPDATE approvals SET status = 'expired', decided_at = expires_at, revision = ",
                next_revision!(),
                " WHERE status = 'pending' AND expires_at <= $1"
            ))
            .bind(&at)
            .execute(&mut *tx)
            .await
            .map_err(StoreError::db("expiring approvals"))?
            .rows_affected()
        });
        Ok(changed)
    }

    /// Where the approvals' changes stand now: follow later ones from here with
    /// [`Store::approval_changes`].
    pub async fn approval_cursor(&self) -> Result<ApprovalCursor, StoreError> {
        let newest: Option<(i64, String)> = on_pool!(self, p => {
            sqlx::query_as("SELECT revision, id FROM approvals ORDER BY revision DESC, id DESC LIMIT 1")
                .fetch_optional(p)
                .await
                .map_err(StoreError::db("reading the newest approval change"))?
        });
        Ok(newest
            .map(|(revision, id)| ApprovalCursor { revision, id })
            .unwrap_or_default())
    }

    /// Approvals changed after `after` (created, decided, expired, claimed, finished — by this
    /// process or any other sharing the database), oldest change first, at most `limit`, each
    /// as it stands now; and the cursor to continue from. Pending approvals whose time ran out
    /// are expired first, so their expiry shows up as a change. An approval that changed twice
    /// since `after` appears once, with its latest status; one whose row cannot be read is
    /// skipped with a warning (the cursor still moves past it).
    pub async fn approval_changes(
        &self,
        after: &ApprovalCursor,
        limit: u32,
    ) -> Result<(Vec<Approval>, ApprovalCursor), StoreError> {
        self.expire_approvals().await?;
        let rows: Vec<RevisionRow> = on_pool!(self, p => {
            sqlx::query_as(concat!(
                "SELECT revision, ",
                columns!(),
                " FROM approvals WHERE (revision, id) > ($1, $2) ORDER BY revision, id LIMIT $3"
            ))
            .bind(after.revision)
            .bind(&after.id)
            .bind(i64::from(limit))
            .fetch_all(p)
            .await
            .map_err(StoreError::db("reading approval changes"))?
        });
        let mut next = after.clone();
        let mut changed = Vec::with_capacity(rows.len());
        for (
            revision,
            id,
            request,
            status,
            decided_at,
            decided_by,
            reason,
            started,
            finished,
            result,
        ) in rows
        {
            next = ApprovalCursor {
                revision,
                id: id.clone(),
            };
            // An unreadable row is skipped (and said so), so it cannot stop a follower for good.
            match from_row((
                id.clone(),
                request,
                status,
                decided_at,
                decided_by,
                reason,
                started,
                finished,
                result,
            )) {
                Ok(a) => changed.push(a),
                Err(e) => {
                    tracing::warn!(approval = %id, error = %ErrorChain(&e), "a changed approval could not be read; skipped")
                }
            }
        }
        Ok((changed, next))
    }

    /// After a restart: approvals that were `running` (the process died mid-call, no result)
    /// become `indeterminate`; approved ones not yet started are returned to be run once.
    /// Call it once at startup, before anything claims approvals in this process; other
    /// live processes sharing the store must not be running approvals at that moment.
    pub async fn recover_approvals(&self) -> Result<RecoveredApprovals, StoreError> {
        let at = ts(now());
        let running: Vec<Row> = write_tx!(self, LOCK_APPROVALS, tx => {
            let rows: Vec<Row> = sqlx::query_as(select!("WHERE status = 'running'"))
                .fetch_all(&mut *tx)
                .await
                .map_err(StoreError::db("reading running approvals"))?;
            sqlx::query(concat!(
                "UPDATE approvals SET status = 'indeterminate', finished_at = $1, revision = ",
                next_revision!(),
                " WHERE status = 'running'"
            ))
            .bind(&at)
            .execute(&mut *tx)
            .await
            .map_err(StoreError::db("marking interrupted approvals"))?;
            rows
        });
        let mut indeterminate = Vec::with_capacity(running.len());
        for row in running {
            let mut a = from_row(row)?;
            a.status = ApprovalStatus::Indeterminate;
            indeterminate.push(a);
        }
        let ready = self
            .approvals(Some(ApprovalStatus::Approved), None, u32::MAX)
            .await?;
        Ok(RecoveredApprovals {
            ready,
            indeterminate,
        })
    }
}
