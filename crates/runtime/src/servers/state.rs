//! What the runtime knows of each server and each of its tools, and how that becomes a view.

use std::collections::BTreeMap;

use serde_json::{Value, json};
use toolgate_core::Principal;

use super::views::{
    FieldChange, ServerSource, ServerSummary, ServerToolView, StateView, ToolStatus, Transport,
};

/// One server: its entry, where it is declared, its state and its tools.
#[derive(Clone, Debug)]
pub(super) struct Server {
    pub(super) name: String,
    /// The entry as declared (`${env:…}` not expanded), as JSON.
    pub(super) entry: Value,
    pub(super) transport: Transport,
    pub(super) source: ServerSource,
    pub(super) eager: bool,
    pub(super) state: StateView,
    /// Its tools by upstream name.
    pub(super) tools: BTreeMap<String, ToolState>,
}

/// One tool of a server.
#[derive(Clone, Debug)]
pub(super) struct ToolState {
    /// The toolgate name, when one could be given.
    pub(super) name: Option<String>,
    pub(super) status: ToolStatus,
    pub(super) description: Option<String>,
    pub(super) hash: String,
    pub(super) approved_hash: Option<String>,
    pub(super) changes: Vec<FieldChange>,
    pub(super) reason: Option<String>,
}

/// The state of a server that has not started.
pub(super) fn stopped() -> StateView {
    StateView {
        state: "stopped",
        error: None,
        stderr_tail: None,
    }
}

impl Server {
    /// The summary `principal` sees: counts only of the tools it may see.
    pub(super) fn summary(&self, principal: &Principal) -> ServerSummary {
        let visible = self.visible_tools(principal);
        ServerSummary {
            name: self.name.clone(),
            transport: self.transport,
            source: self.source,
            state: self.state.clone(),
            eager: self.eager,
            tools: visible
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
            .filter(|(_, t)| t.name.as_deref().is_none_or(|n| principal.may_call(n)))
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
        let mut entry = self.entry.clone();
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

impl ToolState {
    pub(super) fn view(&self, upstream: &str) -> ServerToolView {
        ServerToolView {
            upstream_name: upstream.to_owned(),
            name: self.name.clone(),
            status: self.status,
            description: self.description.clone(),
            hash: self.hash.clone(),
            approved_hash: self.approved_hash.clone(),
            changes: self.changes.clone(),
            reason: self.reason.clone(),
        }
    }
}

/// Whether `value` is only references to toolgate's environment (`${env:NAME}`, possibly inside
/// text such as `Bearer ${env:TOKEN}`) and no literal secret.
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
    found && value.len() < 200 && !value.contains(char::is_control)
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
