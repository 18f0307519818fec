//! What the runtime knows of each server and each of its tools, and how that becomes a view.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use toolgate_core::{Principal, ToolDefinition, ToolName};
use toolgate_gateway::pin::Change;
use toolgate_gateway::upstream::{ServerState, Upstream};
use toolgate_gateway::{ServerEntry, ServerName, UpstreamTool};

use super::views::{
    FieldChange, ServerSource, ServerSummary, ServerToolView, StateView, ToolStatus, Transport,
};

/// One server: its entry, where it is declared, its connection and its tools.
pub(super) struct Server {
    pub(super) name: ServerName,
    /// The entry as declared (`${env:…}` not expanded).
    pub(super) entry: ServerEntry,
    pub(super) source: ServerSource,
    /// The connection; `None` when the entry cannot be used as it is (a variable it refers to
    /// is not set): `problem` says why.
    pub(super) upstream: Option<Upstream>,
    /// Why the server cannot start, or why its last tools listing failed.
    pub(super) problem: Option<String>,
    /// Its tools by upstream name.
    pub(super) tools: BTreeMap<String, ToolState>,
    /// Serializes the listings of this server.
    pub(super) listing: Arc<tokio::sync::Mutex<()>>,
    /// Whether the tools were listed (and checked against their pins) since the connection
    /// last (re)started: a call waits for that first.
    pub(super) verified: bool,
    /// Nothing is pinned for this server yet: its first listing is its first sight.
    pub(super) first_sight: bool,
    /// Approve every tool of the first sight (`servers add --approve`).
    pub(super) approve_first_sight: bool,
    /// Ends the server's watcher.
    pub(super) stop: CancellationToken,
}

/// One tool of a server.
#[derive(Clone, Debug)]
pub(super) struct ToolState {
    /// The toolgate name, when one could be given.
    pub(super) name: Option<ToolName>,
    pub(super) status: ToolStatus,
    /// The definition the upstream gives now (as last listed, or as stored).
    pub(super) upstream: UpstreamTool,
    /// The governed definition it is (or would be) served with.
    pub(super) definition: Option<ToolDefinition>,
    /// The pin hash of `upstream`.
    pub(super) hash: String,
    /// The approved hash, when it differs from `hash`.
    pub(super) approved_hash: Option<String>,
    pub(super) changes: Vec<FieldChange>,
    pub(super) reason: Option<String>,
}

impl Server {
    /// The server's state as the views show it.
    pub(super) fn state_view(&self) -> StateView {
        let Some(upstream) = &self.upstream else {
            return StateView {
                state: "failed",
                error: self.problem.clone(),
                stderr_tail: None,
            };
        };
        match upstream.state() {
            ServerState::Stopped => plain("stopped", self.problem.clone()),
            ServerState::Starting => plain("starting", None),
            ServerState::Ready => plain("ready", self.problem.clone()),
            ServerState::Failed { error, stderr_tail } => StateView {
                state: "failed",
                error: Some(error),
                stderr_tail: (!stderr_tail.is_empty()).then_some(stderr_tail),
            },
            _ => plain("unknown", None),
        }
    }

    /// The summary `principal` sees: counts only of the tools it may see.
    pub(super) fn summary(&self, principal: &Principal) -> ServerSummary {
        let visible = self.visible_tools(principal);
        ServerSummary {
            name: self.name.to_string(),
            transport: if self.entry.is_stdio() {
                Transport::Stdio
            } else {
                Transport::Http
            },
            source: self.source,
            state: self.state_view(),
            eager: self.entry.eager,
            tools_served: visible
                .iter()
                .filter(|(_, t)| t.status == ToolStatus::Approved)
                .count(),
            pending_changes: visible
                .iter()
                .filter(|(_, t)| t.status.awaits_approval())
                .count(),
        }
    }

    /// The tools `principal` may see (a tool outside its allowed tools does not exist for it).
    pub(super) fn visible_tools(&self, principal: &Principal) -> Vec<(&String, &ToolState)> {
        self.tools
            .iter()
            .filter(|(_, t)| {
                t.name
                    .as_ref()
                    .is_none_or(|n| principal.may_call(n.as_str()))
            })
            .collect()
    }

    /// The tool views `principal` sees, by upstream name.
    pub(super) fn tool_views(&self, principal: &Principal) -> Vec<ServerToolView> {
        self.visible_tools(principal)
            .into_iter()
            .map(|(upstream, t)| t.view(upstream))
            .collect()
    }

    /// The entry with literal secrets replaced: environment and header values that are not
    /// `${env:NAME}` references.
    pub(super) fn redacted_entry(&self) -> Value {
        let mut entry = serde_json::to_value(&self.entry).unwrap_or(Value::Null);
        for key in ["env", "headers"] {
            if let Some(map) = entry.get_mut(key).and_then(Value::as_object_mut) {
                for value in map.values_mut() {
                    if !value.as_str().is_some_and(is_env_reference) {
                        *value = json!("[REDACTED]");
                    }
                }
            }
        }
        entry
    }
}

fn plain(state: &'static str, error: Option<String>) -> StateView {
    StateView {
        state,
        error,
        stderr_tail: None,
    }
}

impl ToolState {
    pub(super) fn view(&self, upstream: &str) -> ServerToolView {
        ServerToolView {
            upstream_name: upstream.to_owned(),
            name: self.name.as_ref().map(ToString::to_string),
            status: self.status,
            description: self.upstream.description.clone(),
            hash: self.hash.clone(),
            approved_hash: self.approved_hash.clone(),
            changes: self.changes.clone(),
            reason: self.reason.clone(),
        }
    }
}

/// The gateway's diff as the views show it.
pub(super) fn field_changes(changes: &[Change]) -> Vec<FieldChange> {
    changes
        .iter()
        .map(|c| FieldChange {
            field: c.field.clone(),
            old: c.old.clone().unwrap_or(Value::Null),
            new: c.new.clone().unwrap_or(Value::Null),
        })
        .collect()
}

/// Whether `value` holds references to toolgate's environment (`${env:NAME}`, possibly inside
/// text such as `Bearer ${env:TOKEN}`) rather than a literal secret.
fn is_env_reference(value: &str) -> bool {
    let mut rest = value;
    let mut found = false;
    while let Some(start) = rest.find("${env:") {
        let Some(end) = rest[start..].find('}') else {
            return false;
        };
        found = true;
        rest = &rest[start + end + 1..];
    }
    found
}

#[cfg(test)]
mod tests {
    use super::is_env_reference;

    #[test]
    fn only_env_references_are_shown() {
        assert!(is_env_reference("${env:TOKEN}"));
        assert!(is_env_reference("Bearer ${env:TOKEN}"));
        assert!(!is_env_reference("Bearer abc123"));
        assert!(!is_env_reference("${env:TOKEN"));
        assert!(!is_env_reference(""));
    }
}
