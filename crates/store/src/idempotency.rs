//! Idempotency keys of calls that run at once: the first call with a key runs, a repeat with the
//! same key, tool and arguments gets the first call's result without running the tool again.
//!
//! Calls that wait for an approval keep their key on the approval instead (see
//! [`Store::request_approval`]); [`Store::call_once`] hands such a call's key back, so a repeat
//! goes through the approval gate and finds that approval.

use std::future::Future;
use std::time::Duration;

use serde_json::Value;
use toolgate_core::{CallId, ToolResult};

use crate::approvals::arguments_sha256;
use crate::error::StoreError;
use crate::{Store, from_json, now, parse_ts, ts, write_tx};

/// Advisory lock key (PostgreSQL) for claiming idempotency keys.
const LOCK_IDEMPOTENCY: i64 = 0x7467_0004;

/// How long a key is remembered after its call started.
pub const IDEMPOTENCY_KEY_TTL: Duration = Duration::from_secs(24 * 3600);

/// Longest key accepted, in characters.
const MAX_KEY_CHARS: usize = 255;

/// A caller's idempotency key: 1 to 255 characters of text without control characters.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct IdempotencyKey(String);

impl IdempotencyKey {
    /// Checks `raw`; the error says what is wrong with it.
    pub fn parse(raw: &str) -> Result<Self, StoreError> {
        if raw.is_empty() {
            return Err(StoreError::Invalid(
                "The idempotency key is empty; send a unique string per call, for example a UUID"
                    .to_owned(),
            ));
        }
        let length = raw.chars().count();
        if length > MAX_KEY_CHARS {
            return Err(StoreError::Invalid(format!(
                "The idempotency key is {length} characters long; use at most {MAX_KEY_CHARS} (a UUID is 36)"
            )));
        }
        if raw.chars().any(char::is_control) {
            return Err(StoreError::Invalid(
                "The idempotency key contains control characters; use printable text".to_owned(),
            ));
        }
        Ok(Self(raw.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for IdempotencyKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// The call a key is claimed for.
#[derive(Clone, Copy, Debug)]
pub struct KeyedCall<'a> {
    pub key: &'a IdempotencyKey,
    /// The caller's principal id: keys are per principal.
    pub principal: &'a str,
    /// The tool as the caller named it.
    pub tool: &'a str,
    /// The arguments as the caller sent them (compared in canonical form).
    pub arguments: &'a Value,
    /// The id the call runs under if it runs.
    pub call_id: CallId,
}

/// What a claim found.
enum Claim {
    /// The key is new (or its earlier call never reached the tool): run the call.
    Run,
    /// The key's call already ran: its result.
    Replay(Box<ToolResult>),
}

/// A stored key: tool, arguments_sha256, call_id, status, result_json, created_at.
type Row = (String, String, String, String, Option<String>, String);

impl Store {
    /// Runs `run` (the call through the pipeline) unless `call.key` was used before by the same
    /// principal; then returns that call's result instead. The key is claimed, and committed,
    /// before `run` starts, so two requests with one key never both run the tool.
    ///
    /// Errors (kind `conflict`): the key was used for another tool or other arguments, or its
    /// call has not finished (it is still running, or toolgate stopped while it ran: the
    /// message names the call to look up). Kind `invalid`: never; keys are checked by
    /// [`IdempotencyKey::parse`].
    ///
    /// Only results of calls that reached the tool (`attempts > 0`) are kept. A call refused
    /// before running (validation, authorization, rate limit, …) or waiting for an approval
    /// gives its key back. If the result cannot be recorded, it is still returned (the call
    /// happened) and the failure is logged.
    pub async fn call_once<F>(&self, call: KeyedCall<'_>, run: F) -> Result<ToolResult, StoreError>
    where
        F: Future<Output = ToolResult>,
    {
        let arguments = arguments_sha256(call.arguments);
        if let Claim::Replay(result) = self.claim_key(&call, &arguments).await? {
            return Ok(*result);
        }
        let result = run.await;
        let kept = result.attempts > 0 && result.approval_id.is_none();
        if let Err(e) = self.settle_key(&call, kept.then_some(&result)).await {
            tracing::error!(error = %e, call_id = %call.call_id, key = %call.key, "cannot record the result of an idempotent call; a repeat with its key will be refused as unfinished");
        }
        Ok(result)
    }

    async fn claim_key(&self, call: &KeyedCall<'_>, arguments: &str) -> Result<Claim, StoreError> {
        let created = now();
        let ttl = chrono::Duration::from_std(IDEMPOTENCY_KEY_TTL)
            .unwrap_or_else(|_| chrono::Duration::hours(24));
        let cutoff = ts(created - ttl);
        let claim = write_tx!(self, LOCK_IDEMPOTENCY, tx => {
            sqlx::query("DELETE FROM idempotency_keys WHERE created_at < $1")
                .bind(&cutoff)
                .execute(&mut *tx)
                .await
                .map_err(StoreError::db("forgetting old idempotency keys"))?;
            let found: Option<Row> = sqlx::query_as(
                "SELECT tool, arguments_sha256, call_id, status, result_json, created_at \
                 FROM idempotency_keys WHERE principal = $1 AND idem_key = $2",
            )
            .bind(call.principal)
            .bind(call.key.as_str())
            .fetch_optional(&mut *tx)
            .await
            .map_err(StoreError::db("reading an idempotency key"))?;
            match found {
                Some(row) => Self::repeat(call, arguments, row)?,
                None => {
                    sqlx::query(
                        "INSERT INTO idempotency_keys \
                         (principal, idem_key, tool, arguments_sha256, call_id, status, created_at) \
                         VALUES ($1, $2, $3, $4, $5, 'running', $6)",
                    )
                    .bind(call.principal)
                    .bind(call.key.as_str())
                    .bind(call.tool)
                    .bind(arguments)
                    .bind(call.call_id.to_string())
                    .bind(ts(created))
                    .execute(&mut *tx)
                    .await
                    .map_err(StoreError::db("claiming an idempotency key"))?;
                    Claim::Run
                }
            }
        });
        Ok(claim)
    }

    /// A key seen before: its result, or why the call cannot be answered.
    fn repeat(call: &KeyedCall<'_>, arguments: &str, row: Row) -> Result<Claim, StoreError> {
        let (tool, arguments_sha256, call_id, status, result_json, created_at) = row;
        if tool != call.tool || arguments_sha256 != arguments {
            let what = if tool == call.tool {
                format!("{tool} with other arguments")
            } else {
                format!("tool {tool}")
            };
            return Err(StoreError::IdempotencyKey(format!(
                "Idempotency key {:?} was already used for another call ({what}, call {}); use a new key for a new call",
                call.key.as_str(),
                call_id
            )));
        }
        match (status.as_str(), result_json) {
            ("finished", Some(raw)) => Ok(Claim::Replay(Box::new(from_json(
                &raw,
                "an idempotent call's result",
            )?))),
            _ => {
                let started = parse_ts(&created_at)?;
                Err(StoreError::IdempotencyKey(format!(
                    "Call {} with idempotency key {:?} started at {} and has not finished: it is still running, or toolgate stopped while it ran and it may have had its effect. \
                     Look it up (`toolgate audit show {}`, GET /v1/calls/{}) before you run it again with a new key",
                    call_id,
                    call.key.as_str(),
                    started.format("%Y-%m-%d %H:%M:%S UTC"),
                    call_id,
                    call_id
                )))
            }
        }
    }

    /// Records the result of the key's call, or (`None`) gives the key back.
    async fn settle_key(
        &self,
        call: &KeyedCall<'_>,
        result: Option<&ToolResult>,
    ) -> Result<(), StoreError> {
        let call_id = call.call_id.to_string();
        write_tx!(self, LOCK_IDEMPOTENCY, tx => { match result {
            Some(result) => {
                let json = serde_json::to_string(result).map_err(|e| {
                    StoreError::Invalid(format!("Cannot encode the call's result: {e}"))
                })?;
                sqlx::query(
                    "UPDATE idempotency_keys SET status = 'finished', result_json = $1 \
                     WHERE principal = $2 AND idem_key = $3 AND call_id = $4",
                )
                .bind(json)
                .bind(call.principal)
                .bind(call.key.as_str())
                .bind(&call_id)
                .execute(&mut *tx)
                .await
                .map_err(StoreError::db("recording an idempotent call's result"))?;
            }
            None => {
                sqlx::query(
                    "DELETE FROM idempotency_keys WHERE principal = $1 AND idem_key = $2 AND call_id = $3",
                )
                .bind(call.principal)
                .bind(call.key.as_str())
                .bind(&call_id)
                .execute(&mut *tx)
                .await
                .map_err(StoreError::db("giving an idempotency key back"))?;
            }
        }});
        Ok(())
    }
}
