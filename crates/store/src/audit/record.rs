//! The audit log's entries: what callers write ([`AuditStart`], [`AuditRecord`]) and read
//! ([`AuditCall`], with [`ContentDigest`]s of returned content), and `Entry`, the stored row
//! each of them becomes.

use chrono::{DateTime, SecondsFormat, Utc};
use serde::ser::SerializeMap;
use serde::{Deserialize, Serialize, Serializer};
use serde_json::Value;
use toolgate_core::{
    CallId, CallOrigin, CallRecord, Content, ErrorKind, Outcome, Principal, ToolResult, ToolSpec,
};

use super::chain::hex_sha256;
use crate::error::StoreError;
use crate::{from_json, parse_ts, ts};

/// The entry written before a side-effecting call runs.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AuditStart {
    /// The call's id.
    pub call_id: CallId,
    /// The tool's name.
    pub tool: String,
    /// The tool's definition hash: which version of it ran.
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
    /// The call's id (the envelope's `callId`).
    pub call_id: CallId,
    /// The tool's name as the caller asked for it.
    pub tool: String,
    /// `None` when the tool was not found.
    pub definition_hash: Option<String>,
    /// The principal's id.
    pub principal: String,
    /// Arguments with sensitive values redacted.
    pub input: Value,
    /// Data or error. When `output_ref` is set the data is kept apart and this is `Data(Null)`;
    /// read it with [`Store::output`](crate::Store::output).
    pub outcome: Outcome,
    /// How many times the handler was started.
    pub attempts: u32,
    /// Wall time of the call in milliseconds.
    pub duration_ms: f64,
    /// When the call started (the envelope's `fetchedAt`).
    pub fetched_at: DateTime<Utc>,
    /// Whether the output was cut to the tool's limit.
    pub truncated: bool,
    /// Where the output is kept apart (`toolgate:output/<call id>`), when it is.
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
    /// `text`, `image`, `audio`, `resource` or `resource_link`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The MIME type of an image, audio, resource or resource link block.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    /// The URI of an embedded resource or a resource link.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uri: Option<String>,
    /// Length in bytes of the payload as returned (base64 text for images, audio and blobs; the
    /// URI for a resource link).
    pub bytes: u64,
    /// SHA-256 (hex) of that payload.
    pub sha256: String,
}

impl ContentDigest {
    /// The digest of `block`.
    pub fn of(block: &Content) -> Self {
        let (kind, mime_type, uri, payload) = match block {
            Content::Text { text, .. } => ("text", None, None, text.as_str()),
            Content::Image {
                data, mime_type, ..
            } => ("image", Some(mime_type), None, data.as_str()),
            Content::Audio {
                data, mime_type, ..
            } => ("audio", Some(mime_type), None, data.as_str()),
            Content::Resource { resource, .. } => (
                "resource",
                resource.mime_type.as_ref(),
                Some(&resource.uri),
                resource
                    .text
                    .as_deref()
                    .or(resource.blob.as_deref())
                    .unwrap_or_default(),
            ),
            // A link carries no content: what was returned is the reference itself.
            Content::ResourceLink { uri, mime_type, .. } => {
                ("resource_link", mime_type.as_ref(), Some(uri), uri.as_str())
            }
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

/// One row of `audit_log`, as stored.
#[derive(Clone, Debug)]
pub(super) struct Entry {
    pub(super) seq: i64,
    pub(super) kind: String,
    pub(super) call_id: String,
    pub(super) tool: String,
    pub(super) definition_hash: Option<String>,
    pub(super) principal: String,
    pub(super) input_json: String,
    pub(super) error_kind: Option<String>,
    pub(super) error: Option<String>,
    pub(super) data_json: Option<String>,
    pub(super) output_ref: Option<String>,
    pub(super) output_sha256: Option<String>,
    /// JSON array of [`ContentDigest`]s; `None` when the call returned no content blocks.
    pub(super) content_json: Option<String>,
    /// JSON of the call's [`CallOrigin`]; `None` when unknown (and for older entries).
    pub(super) origin_json: Option<String>,
    /// Who cancelled the call; `None` when it was not cut short (and for older entries).
    pub(super) cancelled_by: Option<String>,
    pub(super) attempts: Option<i64>,
    pub(super) duration_ms: Option<f64>,
    pub(super) fetched_at: String,
    pub(super) truncated: bool,
    pub(super) recorded_at: String,
    pub(super) prev_hash: String,
    pub(super) hash: String,
}

impl Entry {
    pub(super) fn new(
        kind: &str,
        call_id: CallId,
        tool: &str,
        principal: &str,
        input: &Value,
    ) -> Self {
        Self {
            seq: 0,
            kind: kind.to_owned(),
            call_id: call_id.to_string(),
            tool: clean(tool),
            definition_hash: None,
            principal: clean(principal),
            input_json: json_text(input),
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

    pub(super) fn call_id(&self) -> Result<CallId, StoreError> {
        CallId::parse(&self.call_id).map_err(StoreError::Corrupt)
    }

    pub(super) fn into_start(self) -> Result<AuditStart, StoreError> {
        Ok(AuditStart {
            call_id: self.call_id()?,
            input: from_json(&self.input_json, "audit input")?,
            fetched_at: parse_ts(&self.fetched_at)?,
            definition_hash: self.definition_hash.unwrap_or_default(),
            tool: self.tool,
            principal: self.principal,
        })
    }

    pub(super) fn into_record(self) -> Result<AuditRecord, StoreError> {
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

/// What a `finished` entry is made of, borrowed from an [`AuditRecord`] or straight from the
/// pipeline's [`CallRecord`] (the observer's path, which so copies nothing it does not store).
struct Finished<'a> {
    call_id: CallId,
    tool: &'a str,
    definition_hash: Option<&'a str>,
    principal: &'a str,
    input: &'a Value,
    outcome: &'a Outcome,
    output_ref: Option<&'a str>,
    /// JSON array of the content digests; `None` when there are none.
    content_json: Option<String>,
    origin: Option<&'a CallOrigin>,
    cancelled_by: Option<&'a str>,
    attempts: u32,
    duration_ms: f64,
    fetched_at: DateTime<Utc>,
    truncated: bool,
}

impl Finished<'_> {
    fn into_entry(self) -> Entry {
        let mut e = Entry::new(
            "finished",
            self.call_id,
            self.tool,
            self.principal,
            self.input,
        );
        e.definition_hash = self.definition_hash.map(str::to_owned);
        match self.outcome {
            // Data kept apart is not stored in the log (its hash is, through `output_sha256`).
            Outcome::Data(data) => {
                if self.output_ref.is_none() {
                    e.data_json = Some(json_text(data));
                }
            }
            Outcome::Error { kind, message } => {
                e.error_kind = Some(kind.as_str().to_owned());
                e.error = Some(clean(message));
            }
        }
        e.output_ref = self.output_ref.map(str::to_owned);
        e.content_json = self.content_json;
        e.origin_json = self.origin.and_then(|o| serde_json::to_string(o).ok());
        e.cancelled_by = self.cancelled_by.map(clean);
        e.attempts = Some(i64::from(self.attempts));
        e.duration_ms = Some(self.duration_ms);
        e.fetched_at = ts(self.fetched_at);
        e.truncated = self.truncated;
        e
    }
}

/// The `finished` entry of a call.
pub(super) fn finished_entry(record: &AuditRecord) -> Entry {
    Finished {
        call_id: record.call_id,
        tool: &record.tool,
        definition_hash: record.definition_hash.as_deref(),
        principal: &record.principal,
        input: &record.input,
        outcome: &record.outcome,
        output_ref: record.output_ref.as_deref(),
        content_json: if record.content.is_empty() {
            None
        } else {
            serde_json::to_string(&record.content).ok()
        },
        origin: record.origin.as_ref(),
        cancelled_by: record.cancelled_by.as_deref(),
        attempts: record.attempts,
        duration_ms: record.duration_ms,
        fetched_at: record.fetched_at,
        truncated: record.truncated,
    }
    .into_entry()
}

/// The `finished` entry of a call the pipeline just ran: the same entry as
/// `finished_entry(&AuditRecord::from_result(..))` with the origin and canceller set, built
/// without first copying the call's input and outcome into an [`AuditRecord`].
pub(super) fn finished_entry_of(record: &CallRecord<'_>) -> Entry {
    let result = record.result;
    let content_json = if result.content.is_empty() {
        None
    } else {
        let digests: Vec<ContentDigest> = result.content.iter().map(ContentDigest::of).collect();
        serde_json::to_string(&digests).ok()
    };
    Finished {
        call_id: result.call_id,
        tool: &result.tool,
        definition_hash: record.spec.map(ToolSpec::definition_hash),
        principal: record.principal.id.as_str(),
        input: &result.input,
        outcome: &result.outcome,
        output_ref: result.output_ref.as_deref(),
        content_json,
        origin: record.origin,
        cancelled_by: record.cancelled_by,
        attempts: result.attempts,
        duration_ms: result.duration_ms,
        fetched_at: result.fetched_at,
        truncated: result.truncated,
    }
    .into_entry()
}

/// `value` as compact JSON, the text `Value`'s `Display` gives, written straight into a buffer
/// instead of through `fmt` (this runs for every call's input and data).
fn json_text(value: &Value) -> String {
    serde_json::to_string(value).unwrap_or_else(|_| value.to_string())
}

/// PostgreSQL text cannot hold NUL; free text from callers and tools has it replaced (before
/// hashing, so the stored row is what was hashed).
pub(super) fn clean(text: &str) -> String {
    text.replace('\0', "\u{fffd}")
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use toolgate_core::{CallId, CallOrigin, CallRecord, Content, ErrorKind, Outcome, Principal};

    use super::*;

    /// The observer builds its entry straight from the pipeline's record; it must be the entry
    /// the [`AuditRecord`] path writes (the stored row and so the hash depend on it).
    #[test]
    fn observer_entry_matches_the_record_path() {
        let principal = Principal::local();
        let origin = CallOrigin {
            via: "mcp".into(),
            client: Some("c".into()),
            version: None,
        };
        let base = ToolResult {
            tool: "calc\0x".into(),
            call_id: CallId::new(),
            fetched_at: Utc::now(),
            input: json!({"expression": "1+1"}),
            outcome: Outcome::Data(json!({"value": 2})),
            attempts: 1,
            duration_ms: 0.25,
            truncated: false,
            output_ref: None,
            content: vec![Content::text("2"), Content::image("AAAA", "image/png")],
            approval_id: None,
        };
        let failed = ToolResult {
            outcome: Outcome::Error {
                kind: ErrorKind::Execution,
                message: "bad\0".into(),
            },
            content: Vec::new(),
            ..base.clone()
        };
        let kept_apart = ToolResult {
            output_ref: Some("toolgate:output/x".into()),
            truncated: true,
            ..base.clone()
        };
        for result in [&base, &failed, &kept_apart] {
            for (origin, cancelled_by) in [(None, None), (Some(&origin), Some("client"))] {
                let call = CallRecord {
                    result,
                    spec: None,
                    principal: &principal,
                    origin,
                    cancelled_by,
                };
                let mut record = AuditRecord::from_result(result, None, &principal);
                record.origin = origin.cloned();
                record.cancelled_by = cancelled_by.map(str::to_owned);
                assert_eq!(
                    format!("{:?}", finished_entry_of(&call)),
                    format!("{:?}", finished_entry(&record))
                );
            }
        }
    }
}
