//! Audit entries of the MCP gateway's events (a tool quarantined because its upstream changed
//! its definition, a definition approved): ordinary `finished` entries in the one hash chain,
//! so `toolgate audit` lists them beside calls and `verify` covers them. Such an entry is for
//! the tool's toolgate name (`SERVER__TOOL`), by principal `toolgate` (or the approver), with
//! origin `{"via": "gateway", "client": SERVER}`, no attempts, the event's facts as its input
//! and, for a quarantine, the change summary as an `unavailable` error: what a call to the tool
//! gets until a person approves the new definition.

use serde_json::{Value, json};
use toolgate_core::{CallId, CallOrigin, ErrorKind};

use super::record::{Entry, clean};
use crate::error::StoreError;
use crate::{Store, now, ts};

/// The principal of entries for what the gateway itself saw.
pub const GATEWAY_PRINCIPAL: &str = "toolgate";
/// The `via` of the origin of gateway entries.
pub const GATEWAY_VIA: &str = "gateway";

/// A gateway event to record in the audit log ([`Store::audit_gateway_event`]).
#[derive(Clone, Debug, PartialEq)]
pub struct GatewayAudit {
    /// The tool's name in toolgate (`SERVER__TOOL` by default): what `toolgate audit --tool`
    /// finds it by.
    pub tool: String,
    /// The upstream server.
    pub server: String,
    /// The definition hash the event is about (for a quarantine, the new, unapproved one).
    pub definition_hash: Option<String>,
    /// Who: [`GATEWAY_PRINCIPAL`] for what the gateway saw, the approver for an approval.
    pub principal: String,
    /// The event's facts (the entry's input): `{"event": …, "server": …, "tool": …, …}`.
    pub detail: Value,
    /// One line for people: the error of a refusal, the data otherwise.
    pub summary: String,
    /// Whether calls to the tool are refused because of the event (the entry is then an
    /// `unavailable` error with the summary as its message).
    pub refused: bool,
}

impl GatewayAudit {
    /// A tool quarantined because `server` changed the definition of its tool `upstream_tool`
    /// (known to toolgate as `tool`) from `approved_hash` to `hash`; `changes` says what changed
    /// (the gateway's `pin::diff`, as JSON), `summary` says it in one line.
    pub fn quarantined(
        tool: &str,
        server: &str,
        upstream_tool: &str,
        approved_hash: &str,
        hash: &str,
        changes: Value,
        summary: &str,
    ) -> Self {
        Self {
            tool: tool.to_owned(),
            server: server.to_owned(),
            definition_hash: Some(hash.to_owned()),
            principal: GATEWAY_PRINCIPAL.to_owned(),
            detail: json!({
                "event": "quarantined",
                "server": server,
                "tool": upstream_tool,
                "approvedHash": approved_hash,
                "hash": hash,
                "changes": changes,
            }),
            summary: summary.to_owned(),
            refused: true,
        }
    }

    /// The definition `hash` of `server`'s tool `upstream_tool` (toolgate's `tool`) approved by
    /// `by`, replacing `previous_hash` if one was approved before.
    pub fn approved(
        tool: &str,
        server: &str,
        upstream_tool: &str,
        hash: &str,
        previous_hash: Option<&str>,
        by: &str,
    ) -> Self {
        Self {
            tool: tool.to_owned(),
            server: server.to_owned(),
            definition_hash: Some(hash.to_owned()),
            principal: by.to_owned(),
            detail: json!({
                "event": "pin_approved",
                "server": server,
                "tool": upstream_tool,
                "hash": hash,
                "previousHash": previous_hash,
            }),
            summary: format!(
                "definition {hash} of `{upstream_tool}` (server `{server}`) approved by {by}"
            ),
            refused: false,
        }
    }
}

impl Store {
    /// Appends `event` to the audit log as a `finished` entry with a new call id (returned) and
    /// waits until it is committed.
    pub async fn audit_gateway_event(&self, event: &GatewayAudit) -> Result<CallId, StoreError> {
        let call_id = CallId::new();
        let mut e = Entry::new(
            "finished",
            call_id,
            &event.tool,
            &event.principal,
            &event.detail,
        );
        e.definition_hash = event.definition_hash.clone();
        if event.refused {
            e.error_kind = Some(ErrorKind::Unavailable.as_str().to_owned());
            e.error = Some(clean(&event.summary));
        } else {
            e.data_json = Some(Value::String(event.summary.clone()).to_string());
        }
        let origin = CallOrigin {
            via: GATEWAY_VIA.to_owned(),
            client: Some(event.server.clone()),
            version: None,
        };
        e.origin_json = serde_json::to_string(&origin).ok();
        e.attempts = Some(0);
        e.duration_ms = Some(0.0);
        e.fetched_at = ts(now());
        self.append(e).await?;
        Ok(call_id)
    }
}
