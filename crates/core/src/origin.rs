//! Where a call came from (an MCP client by name and version, the REST API, the command line)
//! and who cancelled it: recorded in the audit log and shown with approvals and call details.

use std::fmt;
use std::sync::{Arc, OnceLock};

use serde::{Deserialize, Serialize};

/// Longest client name or version kept (longer ones are cut).
pub const MAX_ORIGIN_FIELD_CHARS: usize = 100;

/// Where a call came from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CallOrigin {
    /// `mcp`, `rest` or `cli`.
    pub via: String,
    /// The client's name: MCP `clientInfo.name`, REST's `X-Toolgate-Client` header.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<String>,
    /// The client's version (MCP `clientInfo.version`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
}

/// Keeps printable characters only, at most [`MAX_ORIGIN_FIELD_CHARS`]; `None` when nothing
/// is left. Names come from clients: they must not smuggle control characters into logs.
fn clean(text: &str) -> Option<String> {
    // The usual name (short, printable) is kept as it is: no character-by-character copy on
    // every MCP call.
    if text.len() <= MAX_ORIGIN_FIELD_CHARS && !text.chars().any(char::is_control) {
        let kept = text.trim();
        return (!kept.is_empty()).then(|| kept.to_owned());
    }
    let kept: String = text
        .chars()
        .filter(|c| !c.is_control())
        .take(MAX_ORIGIN_FIELD_CHARS)
        .collect();
    let kept = kept.trim();
    (!kept.is_empty()).then(|| kept.to_owned())
}

impl CallOrigin {
    /// An MCP client, as it introduced itself in `initialize` (`clientInfo`).
    pub fn mcp(name: &str, version: &str) -> Self {
        Self {
            via: "mcp".into(),
            client: clean(name),
            version: clean(version),
        }
    }

    /// The REST API, with the client the `X-Toolgate-Client` header names, if any.
    pub fn rest(client: Option<&str>) -> Self {
        Self {
            via: "rest".into(),
            client: client.and_then(clean),
            version: None,
        }
    }

    /// The `toolgate` command line.
    pub fn cli() -> Self {
        Self {
            via: "cli".into(),
            client: None,
            version: None,
        }
    }
}

impl fmt::Display for CallOrigin {
    /// `MCP client Claude Desktop 1.2.3`, `REST (web-ui)`, `REST`, `command line`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.via.as_str() {
            "mcp" => {
                write!(f, "MCP client")?;
                if let Some(client) = &self.client {
                    write!(f, " {client}")?;
                }
                if let Some(version) = &self.version {
                    write!(f, " {version}")?;
                }
                Ok(())
            }
            "rest" => match &self.client {
                Some(client) => write!(f, "REST ({client})"),
                None => write!(f, "REST"),
            },
            "cli" => write!(f, "command line"),
            other => write!(f, "{other}"),
        }
    }
}

/// Who cancels a call: `client` (the MCP client's `notifications/cancelled`),
/// `client_disconnected` (the caller went away), `user:cli` (Ctrl-C), `shutdown` (the server
/// stopped after its grace period). Set by whoever fires the call's cancellation token, just
/// before; the first note wins. Cheap to clone (shared).
#[derive(Clone, Debug, Default)]
pub struct CancelNote(Arc<OnceLock<String>>);

impl CancelNote {
    /// Records who cancels, unless someone already did.
    pub fn set(&self, who: impl Into<String>) {
        let _ = self.0.set(who.into());
    }

    /// Who cancelled, if noted.
    pub fn get(&self) -> Option<&str> {
        self.0.get().map(String::as_str)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_read_well_and_drop_control_characters() {
        assert_eq!(
            CallOrigin::mcp("Claude Desktop", "1.2.3").to_string(),
            "MCP client Claude Desktop 1.2.3"
        );
        assert_eq!(
            CallOrigin::rest(Some("web-ui")).to_string(),
            "REST (web-ui)"
        );
        assert_eq!(CallOrigin::rest(Some("\n\t")).to_string(), "REST");
        assert_eq!(CallOrigin::cli().to_string(), "command line");
        let long = "x".repeat(500);
        let o = CallOrigin::mcp(&format!("evil\x1b[31m{long}"), "");
        assert_eq!(o.version, None);
        let name = o.client.unwrap_or_default();
        assert!(!name.contains('\x1b'));
        assert_eq!(name.chars().count(), MAX_ORIGIN_FIELD_CHARS);
        // Printable names: trimmed, and cut at the limit like any other.
        assert_eq!(
            CallOrigin::rest(Some("  ui  ")).client.as_deref(),
            Some("ui")
        );
        assert_eq!(CallOrigin::rest(Some("   ")).client, None);
        for len in [MAX_ORIGIN_FIELD_CHARS, MAX_ORIGIN_FIELD_CHARS + 1] {
            let client = CallOrigin::rest(Some(&"é".repeat(len))).client;
            assert_eq!(
                client.map(|c| c.chars().count()),
                Some(MAX_ORIGIN_FIELD_CHARS)
            );
        }
    }

    #[test]
    fn the_first_cancel_note_wins() {
        let note = CancelNote::default();
        assert_eq!(note.get(), None);
        let shared = note.clone();
        shared.set("client");
        note.set("shutdown");
        assert_eq!(note.get(), Some("client"));
    }
}
