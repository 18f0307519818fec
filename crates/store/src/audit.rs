//! The audit log: append-only entries in one SHA-256 hash chain, plus large outputs kept apart.
//!
//! Each entry is `started` (written before a write/delete/side_effect call runs) or `finished`
//! (every call's outcome). `hash = SHA-256(prev_hash || canonical JSON of the entry's content)`,
//! where the content is every stored column except `prev_hash` and `hash` (and includes `seq`),
//! and the first entry's `prev_hash` is 64 zeros. Appends are serialized by the store's write lock,
//! so the chain cannot fork. A `finished` entry whose output was stored apart carries the
//! output's SHA-256, so [`Store::verify`] also detects an altered or removed output. Content
//! blocks a call returned beside its data (images, audio, resources) are kept as digests (kind,
//! MIME type or URI, size, SHA-256), which the hash covers too; entries without content hash
//! exactly as they did before digests existed.

use std::fmt;
use std::sync::{Arc, OnceLock, Weak};

use chrono::{DateTime, SecondsFormat, Utc};
use serde::ser::SerializeMap;
use serde::{Deserialize, Serialize, Serializer};
use serde_json::Value;
use sha2::{Digest, Sha256};
use toolgate_core::ErrorChain;
use toolgate_core::{
    CallId, CallOrigin, Content, ErrorKind, Outcome, Principal, ToolResult, ToolSpec,
    write_canonical, write_json_string,
};

use tokio::sync::{mpsc, oneshot};

use crate::checkpoint::{CheckpointProblem, CutTail, Head};
use crate::error::StoreError;
use crate::{Inner, LOCK_AUDIT, Store, from_json, now, on_pool, parse_ts, ts, write_tx};

/// `prev_hash` of the first entry.
const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";
/// Rows read per round trip by [`Store::verify`].
const VERIFY_PAGE: i64 = 1000;

/// The entry written before a side-effecting call runs.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AuditStart {
    pub call_id: CallId,
    pub tool: String,
    pub definition_hash: String,
    /// The principal's id.
    pub principal: String,
    /// Arguments with sensitive values already redacted by the caller.
    pub input: Value,
    /// When the call was about to run.
    #[serde(serialize_with = "millis")]
    pub fetched_at: DateTime<Utc>,
}

/// The outcome of one call, as kept in the log.
#[derive(Clone, Debug, PartialEq)]
pub struct AuditRecord {
    /// Position in the chain; `None` until stored.
    pub seq: Option<i64>,
    pub call_id: CallId,
    pub tool: String,
    /// `None` when the tool was not found.
    pub definition_hash: Option<String>,
    /// The principal's id.
    pub principal: String,
    /// Arguments with sensitive values redacted.
    pub input: Value,
    /// Data or error. When `output_ref` is set the data is kept apart and this is `Data(Null)`;
    /// read it with [`Store::output`].
    pub outcome: Outcome,
    pub attempts: u32,
    pub duration_ms: f64,
    pub fetched_at: DateTime<Utc>,
    pub truncated: bool,
    pub output_ref: Option<String>,
    /// Digests of the content blocks returned beside the data, in order.
    pub content: Vec<ContentDigest>,
    /// When the entry was appended; `None` until stored.
    pub recorded_at: Option<DateTime<Utc>>,
    /// Where the call came from (MCP client, REST, command line), when known.
    pub origin: Option<CallOrigin>,
    /// Who cancelled the call (`client`, `user:cli`, `shutdown`, … see
    /// [`toolgate_core::CancelNote`]) or `timeout`; `None` for calls that were not cut short.
    pub cancelled_by: Option<String>,
}

/// What the audit log keeps of one content block a call returned: its kind, MIME type or URI,
/// size and SHA-256 — not the bytes, which for images and audio would swell the log.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ContentDigest {
    /// `text`, `image`, `audio` or `resource`.
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    /// The URI of an embedded resource.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uri: Option<String>,
    /// Length in bytes of the payload as returned (base64 text for images, audio and blobs).
    pub bytes: u64,
    /// SHA-256 (hex) of that payload.
    pub sha256: String,
}

impl ContentDigest {
    /// The digest of `block`.
    pub fn of(block: &Content) -> Self {
        let (kind, mime_type, uri, payload) = match block {
            Content::Text { text } => ("text", None, None, text.as_str()),
            Content::Image { data, mime_type } => ("image", Some(mime_type), None, data.as_str()),
            Content::Audio { data, mime_type } => ("audio", Some(mime_type), None, data.as_str()),
            Content::Resource { resource } => (
                "resource",
                resource.mime_type.as_ref(),
                Some(&resource.uri),
                resource
                    .text
                    .as_deref()
                    .or(resource.blob.as_deref())
                    .unwrap_or_default(),
            ),
        };
        Self {
            kind: kind.to_owned(),
            mime_type: mime_type.cloned(),
            uri: uri.cloned(),
            bytes: u64::try_from(payload.len()).unwrap_or(u64::MAX),
            sha256: hex_sha256(payload.as_bytes()),
        }
    }
}

impl AuditRecord {
    /// The record of a finished call (what [`crate::AuditObserver`] writes). The envelope's input
    /// is already redacted by the pipeline. Data is dropped when the output was stored apart.
    pub fn from_result(
        result: &ToolResult,
        spec: Option<&ToolSpec>,
        principal: &Principal,
    ) -> Self {
        let outcome = match (&result.outcome, &result.output_ref) {
            (Outcome::Data(_), Some(_)) => Outcome::Data(Value::Null),
            (other, _) => other.clone(),
        };
        Self {
            seq: None,
            call_id: result.call_id,
            tool: result.tool.clone(),
            definition_hash: spec.map(|s| s.definition_hash().to_owned()),
            principal: principal.id.as_str().to_owned(),
            input: result.input.clone(),
            outcome,
            attempts: result.attempts,
            duration_ms: result.duration_ms,
            fetched_at: result.fetched_at,
            truncated: result.truncated,
            output_ref: result.output_ref.clone(),
            content: result.content.iter().map(ContentDigest::of).collect(),
            recorded_at: None,
            origin: None,
            cancelled_by: None,
        }
    }

    /// The error kind, if the call failed.
    pub fn error_kind(&self) -> Option<ErrorKind> {
        match &self.outcome {
            Outcome::Error { kind, .. } => Some(*kind),
            Outcome::Data(_) => None,
        }
    }
}

fn millis<S: Serializer>(at: &DateTime<Utc>, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&at.to_rfc3339_opts(SecondsFormat::Millis, true))
}

impl Serialize for AuditRecord {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(None)?;
        if let Some(seq) = self.seq {
            map.serialize_entry("seq", &seq)?;
        }
        map.serialize_entry("callId", &self.call_id)?;
        map.serialize_entry("tool", &self.tool)?;
        map.serialize_entry("definitionHash", &self.definition_hash)?;
        map.serialize_entry("principal", &self.principal)?;
        map.serialize_entry("input", &self.input)?;
        match &self.outcome {
            Outcome::Data(data) => {
                if self.output_ref.is_none() {
                    map.serialize_entry("data", data)?;
                }
            }
            Outcome::Error { kind, message } => {
                map.serialize_entry("error", message)?;
                map.serialize_entry("errorKind", kind)?;
            }
        }
        map.serialize_entry("attempts", &self.attempts)?;
        map.serialize_entry("durationMs", &self.duration_ms)?;
        map.serialize_entry(
            "fetchedAt",
            &self.fetched_at.to_rfc3339_opts(SecondsFormat::Millis, true),
        )?;
        if self.truncated {
            map.serialize_entry("truncated", &true)?;
        }
        if let Some(r) = &self.output_ref {
            map.serialize_entry("outputRef", r)?;
        }
        if !self.content.is_empty() {
            map.serialize_entry("content", &self.content)?;
        }
        if let Some(at) = &self.recorded_at {
            map.serialize_entry(
                "recordedAt",
                &at.to_rfc3339_opts(SecondsFormat::Millis, true),
            )?;
        }
        if let Some(origin) = &self.origin {
            map.serialize_entry("origin", origin)?;
        }
        if let Some(who) = &self.cancelled_by {
            map.serialize_entry("cancelledBy", who)?;
        }
        map.end()
    }
}

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

/// Everything the log knows about one call.
#[derive(Clone, Debug, PartialEq)]
pub struct AuditCall {
    /// The entry written before a side-effecting call ran (none for read-only tools).
    pub started: Option<AuditStart>,
    /// The outcome, if the call finished.
    pub finished: Option<AuditRecord>,
}

impl AuditCall {
    /// Started but never finished: the process died during the call, which may have had its effect.
    pub fn interrupted(&self) -> bool {
        self.started.is_some() && self.finished.is_none()
    }
}

impl Serialize for AuditCall {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(3))?;
        map.serialize_entry("started", &self.started)?;
        map.serialize_entry("finished", &self.finished)?;
        map.serialize_entry("interrupted", &self.interrupted())?;
        map.end()
    }
}

/// The result of [`Store::verify`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct VerifyReport {
    /// Entries checked.
    pub entries: u64,
    /// The chain is intact, no checkpoint shows a cut or rewritten log, none is forged.
    pub ok: bool,
    pub first_broken: Option<BrokenLink>,
    /// Whether the store has a checkpoint key (without one a cut tail goes unnoticed).
    pub anchored: bool,
    /// The newest checkpointed entry that still matches its checkpoint.
    pub checkpointed: Option<i64>,
    /// The newest entries are gone: the range a checkpoint proves existed.
    pub cut: Option<CutTail>,
    /// Checkpoints that are forged, unreadable, or name a rewritten or missing entry.
    pub checkpoint_problems: Vec<CheckpointProblem>,
}

/// Where the chain first breaks.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BrokenLink {
    /// The first entry that does not check out.
    pub seq: i64,
    pub reason: String,
}

impl fmt::Display for BrokenLink {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "entry {}: {}", self.seq, self.reason)
    }
}

/// One row of `audit_log`, as stored.
#[derive(Clone, Debug)]
struct Entry {
    seq: i64,
    kind: String,
    call_id: String,
    tool: String,
    definition_hash: Option<String>,
    principal: String,
    input_json: String,
    error_kind: Option<String>,
    error: Option<String>,
    data_json: Option<String>,
    output_ref: Option<String>,
    output_sha256: Option<String>,
    /// JSON array of [`ContentDigest`]s; `None` when the call returned no content blocks.
    content_json: Option<String>,
    /// JSON of the call's [`CallOrigin`]; `None` when unknown (and for older entries).
    origin_json: Option<String>,
    /// Who cancelled the call; `None` when it was not cut short (and for older entries).
    cancelled_by: Option<String>,
    attempts: Option<i64>,
    duration_ms: Option<f64>,
    fetched_at: String,
    truncated: bool,
    recorded_at: String,
    prev_hash: String,
    hash: String,
}

impl Entry {
    /// SHA-256 over `prev_hash` followed by the canonical JSON of the content columns.
    fn compute_hash(&self) -> String {
        let mut hasher = Sha256::new();
        hasher.update(self.prev_hash.as_bytes());
        hasher.update(self.canonical_content().as_bytes());
        hex(&hasher.finalize())
    }

    /// The content columns as canonical JSON (keys sorted, see `write_canonical`), written
    /// directly: this runs once per audit entry, on the hot path of every call.
    fn canonical_content(&self) -> String {
        fn opt_str(out: &mut String, v: Option<&str>) {
            match v {
                Some(s) => write_json_string(s, out),
                None => out.push_str("null"),
            }
        }
        fn number(out: &mut String, v: Value) {
            write_canonical(&v, out);
        }
        let mut out = String::with_capacity(
            256 + self.input_json.len() + self.data_json.as_ref().map_or(0, String::len),
        );
        // Keys in code-point order, as `write_canonical` sorts them.
        out.push_str("{\"attempts\":");
        number(&mut out, self.attempts.map_or(Value::Null, Value::from));
        out.push_str(",\"callId\":");
        write_json_string(&self.call_id, &mut out);
        // Origin and canceller joined later, as keys only there when set: older entries keep
        // their hashes.
        if let Some(who) = &self.cancelled_by {
            out.push_str(",\"cancelledBy\":");
            write_json_string(who, &mut out);
        }
        // Only when present, so entries without content keep the hash they always had.
        if let Some(content) = &self.content_json {
            out.push_str(",\"content\":");
            write_json_string(content, &mut out);
        }
        out.push_str(",\"data\":");
        opt_str(&mut out, self.data_json.as_deref());
        out.push_str(",\"definitionHash\":");
        opt_str(&mut out, self.definition_hash.as_deref());
        out.push_str(",\"durationMs\":");
        number(&mut out, self.duration_ms.map_or(Value::Null, Value::from));
        out.push_str(",\"error\":");
        opt_str(&mut out, self.error.as_deref());
        out.push_str(",\"errorKind\":");
        opt_str(&mut out, self.error_kind.as_deref());
        out.push_str(",\"fetchedAt\":");
        write_json_string(&self.fetched_at, &mut out);
        out.push_str(",\"input\":");
        write_json_string(&self.input_json, &mut out);
        out.push_str(",\"kind\":");
        write_json_string(&self.kind, &mut out);
        if let Some(origin) = &self.origin_json {
            out.push_str(",\"origin\":");
            write_json_string(origin, &mut out);
        }
        out.push_str(",\"outputRef\":");
        opt_str(&mut out, self.output_ref.as_deref());
        out.push_str(",\"outputSha256\":");
        opt_str(&mut out, self.output_sha256.as_deref());
        out.push_str(",\"principal\":");
        write_json_string(&self.principal, &mut out);
        out.push_str(",\"recordedAt\":");
        write_json_string(&self.recorded_at, &mut out);
        out.push_str(",\"seq\":");
        number(&mut out, Value::from(self.seq));
        out.push_str(",\"tool\":");
        write_json_string(&self.tool, &mut out);
        out.push_str(",\"truncated\":");
        out.push_str(if self.truncated { "true" } else { "false" });
        out.push('}');
        out
    }

    fn new(kind: &str, call_id: CallId, tool: &str, principal: &str, input: &Value) -> Self {
        Self {
            seq: 0,
            kind: kind.to_owned(),
            call_id: call_id.to_string(),
            tool: clean(tool),
            definition_hash: None,
            principal: clean(principal),
            input_json: input.to_string(),
            error_kind: None,
            error: None,
            data_json: None,
            output_ref: None,
            output_sha256: None,
            content_json: None,
            origin_json: None,
            cancelled_by: None,
            attempts: None,
            duration_ms: None,
            fetched_at: String::new(),
            truncated: false,
            recorded_at: String::new(),
            prev_hash: String::new(),
            hash: String::new(),
        }
    }

    fn call_id(&self) -> Result<CallId, StoreError> {
        CallId::parse(&self.call_id).map_err(StoreError::Corrupt)
    }

    fn into_start(self) -> Result<AuditStart, StoreError> {
        Ok(AuditStart {
            call_id: self.call_id()?,
            input: from_json(&self.input_json, "audit input")?,
            fetched_at: parse_ts(&self.fetched_at)?,
            definition_hash: self.definition_hash.unwrap_or_default(),
            tool: self.tool,
            principal: self.principal,
        })
    }

    fn into_record(self) -> Result<AuditRecord, StoreError> {
        let outcome = match (&self.error_kind, &self.error) {
            (Some(kind), message) => Outcome::Error {
                kind: serde_json::from_value(Value::String(kind.clone()))
                    .map_err(|e| StoreError::Corrupt(format!("audit error kind {kind:?}: {e}")))?,
                message: message.clone().unwrap_or_default(),
            },
            (None, _) => Outcome::Data(match &self.data_json {
                Some(d) => from_json(d, "audit data")?,
                None => Value::Null,
            }),
        };
        Ok(AuditRecord {
            seq: Some(self.seq),
            call_id: self.call_id()?,
            input: from_json(&self.input_json, "audit input")?,
            outcome,
            attempts: u32::try_from(self.attempts.unwrap_or(0)).unwrap_or(0),
            duration_ms: self.duration_ms.unwrap_or(0.0),
            fetched_at: parse_ts(&self.fetched_at)?,
            truncated: self.truncated,
            recorded_at: Some(parse_ts(&self.recorded_at)?),
            tool: self.tool,
            definition_hash: self.definition_hash,
            principal: self.principal,
            output_ref: self.output_ref,
            content: match &self.content_json {
                Some(raw) => from_json(raw, "audit content digests")?,
                None => Vec::new(),
            },
            origin: match &self.origin_json {
                Some(raw) => Some(from_json(raw, "audit call origin")?),
                None => None,
            },
            cancelled_by: self.cancelled_by,
        })
    }
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 0x0f)]));
    }
    out
}

fn hex_sha256(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

/// PostgreSQL text cannot hold NUL; free text from callers and tools has it replaced (before
/// hashing, so the stored row is what was hashed).
fn clean(text: &str) -> String {
    text.replace('\0', "\u{fffd}")
}

const ENTRY_COLUMNS: &str = "seq, kind, call_id, tool, definition_hash, principal, input_json, error_kind, error, data_json, output_ref, output_sha256, content_json, origin_json, cancelled_by, attempts, duration_ms, fetched_at, truncated, recorded_at, prev_hash, hash";

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

fn entries_sql(filter: &str) -> sqlx::AssertSqlSafe<String> {
    sqlx::AssertSqlSafe(format!("SELECT {ENTRY_COLUMNS} FROM audit_log {filter}"))
}

impl Store {
    /// Appends `entry` to the chain and waits until it is committed (durably). Entries of
    /// concurrent calls share one transaction (group commit; see [`AuditWriter`]).
    async fn append(&self, entry: Entry) -> Result<i64, StoreError> {
        self.inner.audit_writer.append(entry).await
    }

    /// Queues `entry` without waiting for its commit; [`Store::flush_audit`] (and
    /// [`Store::close`]) wait for everything queued.
    async fn append_queued(&self, entry: Entry) -> Result<(), StoreError> {
        self.inner.audit_writer.queue(entry).await
    }

    /// Waits until every audit entry queued so far is committed.
    pub async fn flush_audit(&self) -> Result<(), StoreError> {
        self.inner.audit_writer.flush().await
    }

    /// Appends `entries` to the chain in one transaction under the audit write lock; fills in
    /// each one's `seq` (the other columns are moved into the statement). Returns the new head
    /// for the checkpointer, when the store has one.
    async fn append_batch(&self, entries: &mut [Entry]) -> Result<Option<Head>, StoreError> {
        let placeholders = match &self.inner.pool {
            crate::Pool::Sqlite(_) => Placeholders::Question,
            crate::Pool::Postgres(_) => Placeholders::Numbered,
        };
        let head = write_tx!(self, LOCK_AUDIT, tx => {
            let last: Option<(i64, String)> =
                sqlx::query_as("SELECT seq, hash FROM audit_log ORDER BY seq DESC LIMIT 1")
                    .fetch_optional(&mut *tx)
                    .await
                    .map_err(StoreError::db("reading the audit log"))?;
            let (mut seq, mut prev) = last.unwrap_or((0, GENESIS.to_owned()));
            for entry in entries.iter_mut() {
                if entry.output_ref.is_some() {
                    entry.output_sha256 =
                        sqlx::query_scalar("SELECT sha256 FROM audit_outputs WHERE call_id = $1")
                            .bind(&entry.call_id)
                            .fetch_optional(&mut *tx)
                            .await
                            .map_err(StoreError::db("reading a stored output's hash"))?;
                }
                seq += 1;
                entry.seq = seq;
                entry.prev_hash = std::mem::take(&mut prev);
                entry.recorded_at = ts(now());
                entry.hash = entry.compute_hash();
                prev = entry.hash.clone();
            }
            let head = self.inner.checkpoints.as_ref().map(|_| Head { seq, hash: prev });
            // Multi-row INSERTs: each statement is a round trip to the database (a thread hop
            // for SQLite), so a batch costs a few instead of one per entry. Chunks hold
            // INSERT_ROWS rows or a power of two fewer, so only a handful of distinct
            // statements exist, each built once and kept prepared in the connection's cache.
            // The entries' text moves into the statement: nothing reads it after the insert.
            let mut rest = &mut entries[..];
            for size in insert_chunk_sizes(rest.len()) {
                let (chunk, tail) = rest.split_at_mut(size);
                rest = tail;
                let mut insert = sqlx::query(insert_sql(size, placeholders));
                for entry in chunk.iter_mut() {
                    insert = insert
                        .bind(entry.seq)
                        .bind(std::mem::take(&mut entry.kind))
                        .bind(std::mem::take(&mut entry.call_id))
                        .bind(std::mem::take(&mut entry.tool))
                        .bind(entry.definition_hash.take())
                        .bind(std::mem::take(&mut entry.principal))
                        .bind(std::mem::take(&mut entry.input_json))
                        .bind(entry.error_kind.take())
                        .bind(entry.error.take())
                        .bind(entry.data_json.take())
                        .bind(entry.output_ref.take())
                        .bind(entry.output_sha256.take())
                        .bind(entry.content_json.take())
                        .bind(entry.origin_json.take())
                        .bind(entry.cancelled_by.take())
                        .bind(entry.attempts)
                        .bind(entry.duration_ms)
                        .bind(std::mem::take(&mut entry.fetched_at))
                        .bind(entry.truncated)
                        .bind(std::mem::take(&mut entry.recorded_at))
                        .bind(std::mem::take(&mut entry.prev_hash))
                        .bind(std::mem::take(&mut entry.hash));
                }
                insert
                    .execute(&mut *tx)
                    .await
                    .map_err(StoreError::db("writing the audit log"))?;
            }
            head
        });
        Ok(head)
    }

    /// Records, durably, that a side-effecting call is about to run. Commits before returning.
    pub async fn audit_started(&self, entry: &AuditStart) -> Result<(), StoreError> {
        let mut e = Entry::new(
            "started",
            entry.call_id,
            &entry.tool,
            &entry.principal,
            &entry.input,
        );
        e.definition_hash = Some(entry.definition_hash.clone());
        e.fetched_at = ts(entry.fetched_at);
        self.append(e).await.map(|_| ())
    }

    /// Records a call's outcome and waits until it is committed. Data is not stored when
    /// `output_ref` is set.
    pub async fn audit_finished(&self, record: &AuditRecord) -> Result<(), StoreError> {
        self.append(finished_entry(record)).await.map(|_| ())
    }

    /// Queues a call's outcome for the next group commit without waiting for it (read-only
    /// calls: nothing happened that the log must prove before the caller sees the result).
    pub async fn audit_finished_queued(&self, record: &AuditRecord) -> Result<(), StoreError> {
        self.append_queued(finished_entry(record)).await
    }

    /// Keeps a large output apart from the log; returns its reference,
    /// `toolgate:output/<call id>`. Storing again for the same call replaces the bytes.
    pub async fn store_output(&self, call_id: CallId, bytes: &[u8]) -> Result<String, StoreError> {
        let digest = hex_sha256(bytes);
        let size = i64::try_from(bytes.len()).unwrap_or(i64::MAX);
        on_pool!(self, p => {
            sqlx::query(
                "INSERT INTO audit_outputs (call_id, bytes, size, sha256, stored_at) VALUES ($1, $2, $3, $4, $5) \
                 ON CONFLICT (call_id) DO UPDATE SET bytes = excluded.bytes, size = excluded.size, \
                 sha256 = excluded.sha256, stored_at = excluded.stored_at",
            )
            .bind(call_id.to_string())
            .bind(bytes)
            .bind(size)
            .bind(&digest)
            .bind(ts(now()))
            .execute(p)
            .await
            .map_err(StoreError::db("storing a call's output"))?;
        });
        Ok(format!("toolgate:output/{call_id}"))
    }

    /// A stored output, byte for byte, if the call's output was kept apart.
    pub async fn output(&self, call_id: CallId) -> Result<Option<Vec<u8>>, StoreError> {
        on_pool!(self, p => {
            sqlx::query_scalar("SELECT bytes FROM audit_outputs WHERE call_id = $1")
                .bind(call_id.to_string())
                .fetch_optional(p)
                .await
                .map_err(StoreError::db("reading a call's output"))
        })
    }

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

    /// Walks the chain in `seq` order and reports the first entry that was altered (its content
    /// no longer matches its hash) or follows a removed one (a gap in `seq`, or a `prev_hash` that
    /// is not the previous entry's hash); then checks the chain against every checkpoint kept
    /// (see [`crate::checkpoint`]): removed newest entries show as a [`CutTail`], a checkpoint
    /// with a bad MAC or naming a rewritten entry as a [`CheckpointProblem`].
    pub async fn verify(&self) -> Result<VerifyReport, StoreError> {
        let mut report = self.verify_chain().await?;
        let findings = self.check_checkpoints().await?;
        report.ok = report.ok && findings.cut.is_none() && findings.problems.is_empty();
        report.anchored = findings.anchored;
        report.checkpointed = findings.checkpointed;
        report.cut = findings.cut;
        report.checkpoint_problems = findings.problems;
        Ok(report)
    }

    /// The hash chain alone.
    async fn verify_chain(&self) -> Result<VerifyReport, StoreError> {
        // Read your writes: entries queued for the next group commit are written first.
        self.flush_audit().await?;
        let sql = entries_sql("WHERE seq > $1 ORDER BY seq LIMIT $2");
        let sql: sqlx::SqlStr = sqlx::SqlSafeStr::into_sql_str(sql);
        let mut entries = 0u64;
        let mut last_seq = 0i64;
        let mut last_hash = GENESIS.to_owned();
        loop {
            let page: Vec<Entry> = on_pool!(self, p => {
                let rows = sqlx::query(sql.clone())
                    .bind(last_seq)
                    .bind(VERIFY_PAGE)
                    .fetch_all(p)
                    .await
                    .map_err(StoreError::db("reading the audit log"))?;
                let mut out = Vec::with_capacity(rows.len());
                for row in rows {
                    out.push(entry_from_row!(row));
                }
                out
            });
            if page.is_empty() {
                break;
            }
            for entry in page {
                let broken = |reason: String| {
                    Ok(VerifyReport {
                        entries,
                        ok: false,
                        first_broken: Some(BrokenLink {
                            seq: entry.seq,
                            reason,
                        }),
                        ..VerifyReport::intact(0)
                    })
                };
                if entry.seq != last_seq + 1 {
                    return broken(format!(
                        "entries {} to {} are missing (removed from the log)",
                        last_seq + 1,
                        entry.seq - 1
                    ));
                }
                if entry.prev_hash != last_hash {
                    return broken(
                        "its prev_hash is not the hash of the entry before it (an earlier entry was altered or replaced)"
                            .to_owned(),
                    );
                }
                if entry.compute_hash() != entry.hash {
                    return broken(
                        "its content does not match its hash (the entry was altered)".to_owned(),
                    );
                }
                if let Some(expected) = &entry.output_sha256 {
                    let id = entry.call_id()?;
                    let actual = self.output(id).await?.map(|b| hex_sha256(&b));
                    if actual.as_deref() != Some(expected.as_str()) {
                        return broken(
                            "the output stored apart for this call was altered or removed"
                                .to_owned(),
                        );
                    }
                }
                entries += 1;
                last_seq = entry.seq;
                last_hash = entry.hash;
            }
        }
        Ok(VerifyReport::intact(entries))
    }
}

impl VerifyReport {
    fn intact(entries: u64) -> Self {
        Self {
            entries,
            ok: true,
            first_broken: None,
            anchored: false,
            checkpointed: None,
            cut: None,
            checkpoint_problems: Vec::new(),
        }
    }
}

/// The `finished` entry of a call.
fn finished_entry(record: &AuditRecord) -> Entry {
    let mut e = Entry::new(
        "finished",
        record.call_id,
        &record.tool,
        &record.principal,
        &record.input,
    );
    e.definition_hash = record.definition_hash.clone();
    match &record.outcome {
        Outcome::Data(data) => {
            if record.output_ref.is_none() {
                e.data_json = Some(data.to_string());
            }
        }
        Outcome::Error { kind, message } => {
            e.error_kind = Some(kind.as_str().to_owned());
            e.error = Some(clean(message));
        }
    }
    e.output_ref = record.output_ref.clone();
    if !record.content.is_empty() {
        e.content_json = serde_json::to_string(&record.content).ok();
    }
    e.origin_json = record
        .origin
        .as_ref()
        .and_then(|o| serde_json::to_string(o).ok());
    e.cancelled_by = record.cancelled_by.as_deref().map(clean);
    e.attempts = Some(i64::from(record.attempts));
    e.duration_ms = Some(record.duration_ms);
    e.fetched_at = ts(record.fetched_at);
    e.truncated = record.truncated;
    e
}

/// Most entries one audit transaction writes.
const MAX_BATCH: usize = 512;
/// Rows per INSERT statement (22 bound values each, far below SQLite's and PostgreSQL's limits).
const INSERT_ROWS: usize = 128;
/// Entries that may wait for the writer before queueing callers wait too.
const QUEUE_CAPACITY: usize = 8192;
/// How long a batch of queued entries (nobody waits for their commit) waits for more before it
/// is committed. A commit (one fsync) costs far more than an entry, so under load this turns
/// many small transactions into a few large ones; an entry someone waits for (or a flush) ends
/// the wait at once, so no caller ever waits for it.
const LINGER: std::time::Duration = std::time::Duration::from_millis(20);

/// One request to the audit writer: an entry to append (answered with its `seq` once
/// committed, if `done` is set), or a flush barrier (no entry).
pub(crate) struct Job {
    entry: Option<Entry>,
    done: Option<oneshot::Sender<Result<i64, String>>>,
}

/// The audit log's single writer. Appends from concurrent calls are committed together, one
/// transaction (one fsync) per batch, in arrival order, so the hash chain stays a chain and the
/// cost of durability is shared (group commit). Waiting callers are answered only after their
/// batch is committed.
#[derive(Debug)]
pub(crate) struct AuditWriter {
    jobs: mpsc::Sender<Job>,
}

impl AuditWriter {
    pub(crate) fn new() -> (Self, mpsc::Receiver<Job>) {
        let (jobs, receiver) = mpsc::channel(QUEUE_CAPACITY);
        (Self { jobs }, receiver)
    }

    /// Runs the writer until the store is dropped. It holds the store weakly, so an unused
    /// store still closes.
    pub(crate) fn spawn(store: Weak<Inner>, mut receiver: mpsc::Receiver<Job>) {
        tokio::spawn(async move {
            let mut batch: Vec<Job> = Vec::with_capacity(MAX_BATCH);
            while receiver.recv_many(&mut batch, MAX_BATCH).await > 0 {
                linger(&mut receiver, &mut batch).await;
                let had_entry: Vec<bool> = batch.iter().map(|j| j.entry.is_some()).collect();
                let mut entries: Vec<Entry> =
                    batch.iter_mut().filter_map(|j| j.entry.take()).collect();
                let inner = store.upgrade();
                let result = match &inner {
                    None => Err("the store is closed".to_owned()),
                    Some(_) if entries.is_empty() => Ok(None),
                    Some(inner) => Store {
                        inner: Arc::clone(inner),
                    }
                    .append_batch(&mut entries)
                    .await
                    .map_err(|e| ErrorChain(&e).to_string()),
                };
                if let Err(e) = &result {
                    tracing::error!(error = %e, entries = entries.len(), "audit entries could not be written");
                }
                let mut seqs = entries.iter().map(|e| e.seq);
                for (job, had_entry) in batch.drain(..).zip(had_entry) {
                    // Jobs with an entry took one seq each, in order; barriers take none.
                    let seq = if had_entry { seqs.next() } else { None };
                    let answer = match &result {
                        Ok(_) => Ok(seq.unwrap_or(0)),
                        Err(e) => Err(e.clone()),
                    };
                    if let Some(done) = job.done {
                        let _ = done.send(answer);
                    }
                }
                // After the callers are answered: the checkpointer signs the new head in the
                // background (handing it over here costs a lock and a wake-up, no I/O).
                if let (Ok(Some(head)), Some(inner)) = (result, inner)
                    && let Some(checkpoints) = &inner.checkpoints
                {
                    checkpoints.publish(head);
                }
            }
        });
    }

    /// Appends and waits for the commit.
    async fn append(&self, entry: Entry) -> Result<i64, StoreError> {
        let (done, answer) = oneshot::channel();
        self.send(Job {
            entry: Some(entry),
            done: Some(done),
        })
        .await?;
        answer
            .await
            .map_err(|_| stopped())?
            .map_err(StoreError::AuditWrite)
    }

    /// Queues without waiting for the commit (waits only while the queue is full).
    async fn queue(&self, entry: Entry) -> Result<(), StoreError> {
        self.send(Job {
            entry: Some(entry),
            done: None,
        })
        .await
    }

    /// Waits until everything queued before this call is committed.
    async fn flush(&self) -> Result<(), StoreError> {
        let (done, answer) = oneshot::channel();
        self.send(Job {
            entry: None,
            done: Some(done),
        })
        .await?;
        answer
            .await
            .map_err(|_| stopped())?
            .map(|_| ())
            .map_err(StoreError::AuditWrite)
    }

    async fn send(&self, job: Job) -> Result<(), StoreError> {
        self.jobs.send(job).await.map_err(|_| stopped())
    }
}

/// Sizes `len` entries are inserted in: chunks of [`INSERT_ROWS`], then powers of two (64, 32,
/// …, 1) for the rest.
fn insert_chunk_sizes(len: usize) -> impl Iterator<Item = usize> {
    let mut rest = len;
    std::iter::from_fn(move || {
        if rest == 0 {
            return None;
        }
        let size = if rest >= INSERT_ROWS {
            INSERT_ROWS
        } else {
            1 << rest.ilog2()
        };
        rest -= size;
        Some(size)
    })
}

/// Columns of an `audit_log` row, in the order [`Store::append_batch`] binds them.
const INSERT_COLUMNS: [&str; 22] = [
    "seq",
    "kind",
    "call_id",
    "tool",
    "definition_hash",
    "principal",
    "input_json",
    "error_kind",
    "error",
    "data_json",
    "output_ref",
    "output_sha256",
    "content_json",
    "origin_json",
    "cancelled_by",
    "attempts",
    "duration_ms",
    "fetched_at",
    "truncated",
    "recorded_at",
    "prev_hash",
    "hash",
];

/// How a statement marks its parameters: SQLite binds `?` by position (numbered names would
/// make it look every parameter up by name, which grows with the square of their count);
/// PostgreSQL wants `$1`, `$2`, ….
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Placeholders {
    Question,
    Numbered,
}

/// The INSERT of `rows` entries (a size [`insert_chunk_sizes`] yields), built once per size.
fn insert_sql(rows: usize, placeholders: Placeholders) -> &'static str {
    static SQL: OnceLock<[Vec<String>; 2]> = OnceLock::new();
    let [question, numbered] = SQL.get_or_init(|| {
        let sizes = 0..=INSERT_ROWS.ilog2();
        [
            sizes
                .clone()
                .map(|k| build_insert_sql(1 << k, Placeholders::Question))
                .collect(),
            sizes
                .map(|k| build_insert_sql(1 << k, Placeholders::Numbered))
                .collect(),
        ]
    });
    let all = match placeholders {
        Placeholders::Question => question,
        Placeholders::Numbered => numbered,
    };
    // Sizes are powers of two up to INSERT_ROWS, so the index is always in range.
    all.get(rows.ilog2() as usize).map_or("", String::as_str)
}

fn build_insert_sql(rows: usize, placeholders: Placeholders) -> String {
    let width = INSERT_COLUMNS.len();
    let mut sql = format!(
        "INSERT INTO audit_log ({}) VALUES ",
        INSERT_COLUMNS.join(", ")
    );
    for row in 0..rows {
        if row > 0 {
            sql.push_str(", ");
        }
        sql.push('(');
        for column in 0..width {
            if column > 0 {
                sql.push_str(", ");
            }
            match placeholders {
                Placeholders::Question => sql.push('?'),
                Placeholders::Numbered => {
                    sql.push('$');
                    sql.push_str(&(row * width + column + 1).to_string());
                }
            }
        }
        sql.push(')');
    }
    sql
}

/// Lets a batch of queued entries grow for up to [`LINGER`], until it is full or holds a job
/// someone waits for.
async fn linger(receiver: &mut mpsc::Receiver<Job>, batch: &mut Vec<Job>) {
    if batch.iter().any(|j| j.done.is_some()) {
        return;
    }
    let deadline = tokio::time::Instant::now() + LINGER;
    while batch.len() < MAX_BATCH {
        let seen = batch.len();
        tokio::select! {
            biased;
            received = receiver.recv_many(batch, MAX_BATCH - seen) => {
                if received == 0 || batch[seen..].iter().any(|j| j.done.is_some()) {
                    return;
                }
            }
            () = tokio::time::sleep_until(deadline) => return,
        }
    }
}

fn stopped() -> StoreError {
    StoreError::AuditWrite(
        "The audit writer has stopped (its runtime ended); open the store again".into(),
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    /// The hash input as it was first defined: a JSON object of the content columns, written
    /// canonically. Stored chains were hashed over this text, so the direct writer must match it.
    fn reference(e: &Entry) -> String {
        let content = serde_json::json!({
            "seq": e.seq, "kind": e.kind, "callId": e.call_id, "tool": e.tool,
            "definitionHash": e.definition_hash, "principal": e.principal, "input": e.input_json,
            "errorKind": e.error_kind, "error": e.error, "data": e.data_json,
            "outputRef": e.output_ref, "outputSha256": e.output_sha256, "attempts": e.attempts,
            "durationMs": e.duration_ms, "fetchedAt": e.fetched_at, "truncated": e.truncated,
            "recordedAt": e.recorded_at,
        });
        let mut content = content;
        // Digests joined the content later, as a key that is only there when set.
        if let Some(digests) = &e.content_json {
            content["content"] = Value::String(digests.clone());
        }
        // So did the origin and the canceller.
        if let Some(origin) = &e.origin_json {
            content["origin"] = Value::String(origin.clone());
        }
        if let Some(who) = &e.cancelled_by {
            content["cancelledBy"] = Value::String(who.clone());
        }
        let mut out = String::new();
        write_canonical(&content, &mut out);
        out
    }

    #[test]
    fn insert_chunks_are_full_or_powers_of_two_and_cover_every_entry() {
        for n in [0, 1, 2, 3, 7, 127, 128, 129, 300, 511, 512] {
            let sizes: Vec<usize> = insert_chunk_sizes(n).collect();
            assert_eq!(sizes.iter().sum::<usize>(), n, "{n}: {sizes:?}");
            assert!(
                sizes
                    .iter()
                    .all(|&s| s == INSERT_ROWS || (s.is_power_of_two() && s < INSERT_ROWS)),
                "{n}: {sizes:?}"
            );
            assert!(sizes.windows(2).all(|w| w[0] >= w[1]), "{n}: {sizes:?}");
            for size in sizes {
                // One placeholder per column and row; PostgreSQL's numbered without gaps.
                let width = INSERT_COLUMNS.len();
                let sql = insert_sql(size, Placeholders::Question);
                assert_eq!(sql.matches('?').count(), size * width, "{size}");
                assert!(!sql.contains('$'), "{size}");
                let sql = insert_sql(size, Placeholders::Numbered);
                assert_eq!(sql.matches('$').count(), size * width, "{size}");
                assert!(sql.ends_with(&format!("${})", size * width)), "{size}");
                assert!(!sql.contains(&format!("${}", size * width + 1)), "{size}");
            }
        }
    }

    #[test]
    fn canonical_content_matches_the_reference_encoding() {
        let mut e = Entry::new(
            "finished",
            CallId::new(),
            "tool_\u{1}\"x\"",
            "ops \\ team",
            &serde_json::json!({"a": "line\nbreak\t\u{7f}é😀", "n": 1.5e300}),
        );
        assert_eq!(e.canonical_content(), reference(&e));
        e.seq = 42;
        e.attempts = Some(3);
        e.duration_ms = Some(0.1 + 0.2);
        e.data_json = Some("{\"ok\":true}".into());
        e.error = Some("bad \u{8}\u{c}\r".into());
        e.error_kind = Some("execution".into());
        e.definition_hash = Some("ab".repeat(32));
        e.output_ref = Some("outputs/x".into());
        e.output_sha256 = Some("cd".repeat(32));
        e.fetched_at = "2026-11-22T00:00:00.000Z".into();
        e.recorded_at = "2026-11-22T00:00:00.001Z".into();
        e.truncated = true;
        assert_eq!(e.canonical_content(), reference(&e));
        for d in [
            0.0,
            -0.0,
            1.0,
            1e-7,
            123_456_789.125,
            f64::NAN,
            f64::INFINITY,
        ] {
            e.duration_ms = Some(d);
            assert_eq!(e.canonical_content(), reference(&e), "durationMs {d}");
        }
        e.content_json =
            Some(r#"[{"type":"image","mimeType":"image/png","bytes":4,"sha256":"00"}]"#.into());
        assert_eq!(e.canonical_content(), reference(&e));
        assert!(e.canonical_content().contains(r#","content":"[{\"type\""#));
        e.origin_json = Some(r#"{"via":"mcp","client":"Claude \"D\"","version":"1"}"#.into());
        assert_eq!(e.canonical_content(), reference(&e));
        e.cancelled_by = Some("client".into());
        assert_eq!(e.canonical_content(), reference(&e));
        e.content_json = None;
        assert_eq!(e.canonical_content(), reference(&e));
    }
}
