//! What the front-ends list and show about upstream servers, as typed views with one JSON shape:
//! `toolgate servers … --json`, `GET /v1/servers…` and the web UI read the same fields.

use serde::Serialize;
use serde_json::Value;

/// How a server is reached.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Transport {
    /// A program started in the sandbox, spoken to over its stdin and stdout.
    Stdio,
    /// A Streamable HTTP endpoint, reached through the network policy.
    Http,
}

/// Where a server entry is declared.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ServerSource {
    /// `[servers.NAME]` in the config file: change it there (it cannot be removed here).
    Config,
    /// Added with `toolgate servers add|import` or `POST /v1/servers`, kept in the store.
    Store,
}

/// Where a server is in its lifecycle, flattened into [`ServerSummary`]: `state` is `stopped`,
/// `starting`, `ready` or `failed` (then with `error` and `stderrTail`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StateView {
    /// `stopped`, `starting`, `ready` or `failed`.
    pub state: &'static str,
    /// The last error (failed servers, or a tools listing that could not be read).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The last lines the server's process wrote to stderr (failed stdio servers).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stderr_tail: Option<String>,
}

/// A server as lists show it: `GET /v1/servers`, `toolgate servers list --json`, `/healthz`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ServerSummary {
    /// The server's name (the `SERVER` of `SERVER__TOOL`).
    pub name: String,
    /// How it is reached.
    pub transport: Transport,
    /// Where it is declared.
    pub source: ServerSource,
    /// Its lifecycle state.
    #[serde(flatten)]
    pub state: StateView,
    /// Whether it starts with toolgate (`eager = true`) rather than on first use.
    pub eager: bool,
    /// How many of its tools are served (approved and registered). Not `tools`: a server's
    /// detail flattens this summary beside its `tools` list, and one JSON object has one key.
    pub tools_served: usize,
    /// How many of its tools wait for a person's approval (new, or changed since approved).
    pub pending_changes: usize,
}

/// Every server: `{"servers": [...]}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ServerList {
    /// The servers, by name.
    pub servers: Vec<ServerSummary>,
}

/// Whether an upstream tool is served.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolStatus {
    /// Approved and unchanged: registered under its toolgate name and callable.
    Approved,
    /// Never approved (a new tool of a known server, or every tool of a server seen for the
    /// first time): withheld until approved.
    Pending,
    /// Changed since it was approved: withheld until the new version is approved.
    Quarantined,
    /// Cannot be served at all (its name collides, its governance is invalid): `reason` says
    /// why and what to change in the entry.
    Refused,
}

impl ToolStatus {
    /// Whether a person's approval would serve it.
    pub fn awaits_approval(self) -> bool {
        matches!(self, Self::Pending | Self::Quarantined)
    }
}

/// One field of a tool definition that changed between the approved and the current version.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FieldChange {
    /// The field (`description`, `inputSchema`, `annotations`, …).
    pub field: String,
    /// Its approved value (`null` when absent).
    pub old: Value,
    /// Its current value (`null` when absent).
    pub new: Value,
}

/// One tool of a server: `toolgate servers tools NAME --json`, the web UI's review page.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ServerToolView {
    /// The upstream's own name for the tool.
    pub upstream_name: String,
    /// The toolgate name it is (or would be) served under; absent when none could be given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Whether it is served.
    pub status: ToolStatus,
    /// The description the upstream gives now.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// SHA-256 (hex) of the current definition's canonical JSON (what approving pins).
    pub hash: String,
    /// The hash approved before, when it differs from `hash` (quarantined tools).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approved_hash: Option<String>,
    /// What changed since the approved version (quarantined tools).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub changes: Vec<FieldChange>,
    /// Why it is not served, and what to do.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// A server in full: `GET /v1/servers/{name}`, `toolgate servers show NAME --json`.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ServerDetail {
    /// Every field of the summary.
    #[serde(flatten)]
    pub summary: ServerSummary,
    /// The entry as declared, with literal secrets replaced by `[REDACTED]` (environment and
    /// header values that are not `${env:NAME}` references).
    pub entry: Value,
    /// Its tools, by upstream name (as last listed, or as stored when not started yet).
    pub tools: Vec<ServerToolView>,
}

/// A server's tools: `GET /v1/servers/{name}/tools`, `toolgate servers tools NAME --json`.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ServerTools {
    /// The server's name.
    pub server: String,
    /// Its tools, by upstream name.
    pub tools: Vec<ServerToolView>,
}

/// What an approval did: `POST /v1/servers/{name}/approve`, `toolgate servers approve`.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ApprovedTools {
    /// The server's name.
    pub server: String,
    /// Who approved (`cli:alice`, `api:ops`, …).
    pub by: String,
    /// The tools approved now, as they are after it (served).
    pub approved: Vec<ServerToolView>,
}

/// What removing a server did: `DELETE /v1/servers/{name}`, `toolgate servers rm NAME`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RemovedServer {
    /// The server's name.
    pub name: String,
    /// The toolgate names no longer served.
    pub tools_removed: Vec<String>,
    /// How many tool pins (approved definition hashes) were forgotten: if a server of this
    /// name is declared again, its tools wait for review as new tools.
    pub pins_removed: u64,
}

/// What an import did: `toolgate servers import FILE`, `POST /v1/servers/import`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ImportReport {
    /// The servers added (stored), by name.
    pub added: Vec<String>,
    /// The servers left out, each with why.
    pub skipped: Vec<SkippedServer>,
    /// What was changed or ignored on the way (a renamed server, a literal secret to move to
    /// `${env:NAME}`), one sentence each.
    pub notes: Vec<String>,
}

/// A server an import left out.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SkippedServer {
    /// Its name in the imported file.
    pub name: String,
    /// Why it was left out, and what to do.
    pub reason: String,
}
