//! The hash chain: how an entry is hashed (`SHA-256(prev_hash || canonical JSON of its content)`)
//! and linked after the head, and [`Store::verify`], which walks the chain and checks it against
//! the checkpoints.

use std::fmt;

use serde::Serialize;
use serde_json::Value;
use sha2::{Digest, Sha256};
use toolgate_core::{write_canonical, write_json_string};

use super::query::{entries_sql, entry_from_row};
use super::record::Entry;
use crate::checkpoint::{CheckpointProblem, CutTail};
use crate::error::StoreError;
use crate::{Store, on_pool};

/// `prev_hash` of the first entry.
pub(super) const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";
/// Rows read per round trip by [`Store::verify`].
const VERIFY_PAGE: i64 = 1000;

/// The result of [`Store::verify`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct VerifyReport {
    /// Entries checked.
    pub entries: u64,
    /// The chain is intact, no checkpoint shows a cut or rewritten log, none is forged.
    pub ok: bool,
    /// The first entry that does not check out, when the chain is broken.
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
    /// What is wrong with it, for people.
    pub reason: String,
}

impl fmt::Display for BrokenLink {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "entry {}: {}", self.seq, self.reason)
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

    /// Links the entry into the chain as entry `seq`, after the entry whose hash is `prev_hash`,
    /// recorded at `recorded_at` (when its batch is written, as stored): sets its place,
    /// its recording time and then its hash (which covers both).
    pub(super) fn link(&mut self, seq: i64, prev_hash: String, recorded_at: &str) {
        self.seq = seq;
        self.prev_hash = prev_hash;
        recorded_at.clone_into(&mut self.recorded_at);
        self.hash = self.compute_hash();
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

pub(super) fn hex_sha256(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

impl Store {
    /// Walks the chain in `seq` order and reports the first entry that was altered (its content
    /// no longer matches its hash) or follows a removed one (a gap in `seq`, or a `prev_hash` that
    /// is not the previous entry's hash); then checks the chain against every checkpoint kept
    /// (signed checkpoints, `checkpoint.rs`): removed newest entries show as a [`CutTail`], a
    /// checkpoint with a bad MAC or naming a rewritten entry as a [`CheckpointProblem`].
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

#[cfg(test)]
mod tests {
    use toolgate_core::CallId;

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
