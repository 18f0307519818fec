//! Reading the audit log: [`Store::audit`] lists finished calls (filtered by tool, paged by
//! `seq`), [`Store::audit_call`] gathers one call's entries.

use toolgate_core::CallId;

use super::record::{AuditCall, AuditRecord, Entry};
use crate::error::StoreError;
use crate::{Store, on_pool};

/// What [`Store::audit`] lists.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AuditQuery {
    /// Only calls of this tool.
    pub tool: Option<String>,
    /// At most this many records (default 50).
    pub limit: u32,
    /// Only records with a smaller `seq` (the cursor: pass the last record's `seq`).
    pub before: Option<i64>,
}

impl Default for AuditQuery {
    fn default() -> Self {
        Self {
            tool: None,
            limit: 50,
            before: None,
        }
    }
}

const ENTRY_COLUMNS: &str = "seq, kind, call_id, tool, definition_hash, principal, input_json, error_kind, error, data_json, output_ref, output_sha256, content_json, origin_json, cancelled_by, attempts, duration_ms, fetched_at, truncated, recorded_at, prev_hash, hash";

/// Reads an [`Entry`] from a row of either backend (the row types differ, so a macro).
macro_rules! entry_from_row {
    ($row:expr) => {{
        use sqlx::Row;
        let row = &$row;
        let e = || StoreError::db("reading the audit log");
        Entry {
            seq: row.try_get("seq").map_err(e())?,
            kind: row.try_get("kind").map_err(e())?,
            call_id: row.try_get("call_id").map_err(e())?,
            tool: row.try_get("tool").map_err(e())?,
            definition_hash: row.try_get("definition_hash").map_err(e())?,
            principal: row.try_get("principal").map_err(e())?,
            input_json: row.try_get("input_json").map_err(e())?,
            error_kind: row.try_get("error_kind").map_err(e())?,
            error: row.try_get("error").map_err(e())?,
            data_json: row.try_get("data_json").map_err(e())?,
            output_ref: row.try_get("output_ref").map_err(e())?,
            output_sha256: row.try_get("output_sha256").map_err(e())?,
            content_json: row.try_get("content_json").map_err(e())?,
            origin_json: row.try_get("origin_json").map_err(e())?,
            cancelled_by: row.try_get("cancelled_by").map_err(e())?,
            attempts: row.try_get("attempts").map_err(e())?,
            duration_ms: row.try_get("duration_ms").map_err(e())?,
            fetched_at: row.try_get("fetched_at").map_err(e())?,
            truncated: row.try_get("truncated").map_err(e())?,
            recorded_at: row.try_get("recorded_at").map_err(e())?,
            prev_hash: row.try_get("prev_hash").map_err(e())?,
            hash: row.try_get("hash").map_err(e())?,
        }
    }};
}
pub(super) use entry_from_row;

/// `SELECT` of every entry column from `audit_log`, then `filter` (a trusted SQL fragment).
pub(super) fn entries_sql(filter: &str) -> sqlx::AssertSqlSafe<String> {
    sqlx::AssertSqlSafe(format!("SELECT {ENTRY_COLUMNS} FROM audit_log {filter}"))
}

impl Store {
    /// Finished calls, newest first.
    pub async fn audit(&self, query: &AuditQuery) -> Result<Vec<AuditRecord>, StoreError> {
        // Read your writes: entries queued for the next group commit are written first.
        self.flush_audit().await?;
        let sql = entries_sql(
            "WHERE kind = 'finished' AND ($1 IS NULL OR tool = $1) AND ($2 IS NULL OR seq < $2) \
             ORDER BY seq DESC LIMIT $3",
        );
        on_pool!(self, p => {
            let rows = sqlx::query(sql)
                .bind(query.tool.as_deref())
                .bind(query.before)
                .bind(i64::from(query.limit))
                .fetch_all(p)
                .await
                .map_err(StoreError::db("reading the audit log"))?;
            let mut out = Vec::with_capacity(rows.len());
            for row in rows {
                out.push(entry_from_row!(row).into_record()?);
            }
            Ok(out)
        })
    }

    /// The `started` and `finished` entries of one call; `None` if the log has neither.
    pub async fn audit_call(&self, call_id: CallId) -> Result<Option<AuditCall>, StoreError> {
        // Read your writes: entries queued for the next group commit are written first.
        self.flush_audit().await?;
        let sql = entries_sql("WHERE call_id = $1 ORDER BY seq");
        let entries: Vec<Entry> = on_pool!(self, p => {
            let rows = sqlx::query(sql)
                .bind(call_id.to_string())
                .fetch_all(p)
                .await
                .map_err(StoreError::db("reading the audit log"))?;
            let mut out = Vec::with_capacity(rows.len());
            for row in rows {
                out.push(entry_from_row!(row));
            }
            out
        });
        if entries.is_empty() {
            return Ok(None);
        }
        let mut call = AuditCall {
            started: None,
            finished: None,
        };
        for entry in entries {
            match entry.kind.as_str() {
                "started" => call.started = Some(entry.into_start()?),
                _ => call.finished = Some(entry.into_record()?),
            }
        }
        Ok(Some(call))
    }
}
