//! Server entries: `[servers.NAME]` in the config file and in the store, validated, with `${env:NAME}` expansion.
//!
//! The shared shape (fields) is fixed here; parsing, validation (every problem at once) and
//! expansion live beside it.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use toolgate_core::Isolation;

/// A validated server name: the `NAME` of `[servers.NAME]` and the `SERVER` of `SERVER__TOOL`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(transparent)]
pub struct ServerName(String);

impl ServerName {
    /// The name as written.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Wraps a name that the caller has already validated (see `config.rs` for the rule).
    #[allow(dead_code)] // the parser in this file is its first user
    pub(crate) fn new_unchecked(name: String) -> Self {
        Self(name)
    }
}

impl fmt::Display for ServerName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// When an upstream tool's name carries its server's prefix.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PrefixMode {
    /// Always `SERVER__TOOL` (the default).
    #[default]
    Always,
    /// `TOOL`, and `SERVER__TOOL` only when the bare name collides.
    Conditional,
    /// Always the bare `TOOL`; a collision is refused.
    Never,
}

/// `[servers.NAME.sandbox]`: what a stdio server may reach at `strict` and above.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SandboxAccess {
    /// Paths the server may read.
    #[serde(default)]
    pub read_paths: Vec<PathBuf>,
    /// Paths the server may write.
    #[serde(default)]
    pub write_paths: Vec<PathBuf>,
    /// `host:port` pairs the server may connect to.
    #[serde(default)]
    pub allowed_hosts: Vec<String>,
}

/// Governance fields an entry sets for all its tools (`[servers.NAME.defaults]`) or for one
/// (`[servers.NAME.tools.TOOL]`). Every field is optional; a per-tool value wins over the
/// server default, which wins over what the annotations give.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Governance {
    /// `read_only`, `side_effect`, …, as in a definition.
    pub effect: Option<String>,
    /// `low`, `medium`, `high`, …, as in a definition.
    pub consequence: Option<String>,
    /// Whether a person must say yes before each call.
    pub requires_confirmation: Option<bool>,
    /// Permissions a principal needs to call.
    pub required_permissions: Option<Vec<String>>,
    /// Tags added to the tool.
    pub tags: Option<Vec<String>>,
    /// Per-call timeout in milliseconds.
    pub timeout_ms: Option<u64>,
    /// Output cap in bytes.
    pub max_output_bytes: Option<u64>,
    /// Whether a failed call may be retried.
    pub retryable: Option<bool>,
    /// Whether this tool's (or server's) annotations are trusted.
    pub trust_annotations: Option<bool>,
    /// Hides the tool altogether.
    pub disabled: Option<bool>,
}

/// One upstream server as declared: exactly one of `command` (stdio) or `url` (Streamable HTTP).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerEntry {
    /// stdio: the absolute path of the program (never a shell).
    pub command: Option<PathBuf>,
    /// stdio: its arguments, each passed as is.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// stdio: the only environment the program gets besides the sandbox's own; values may hold
    /// `${env:NAME}`, read from toolgate's environment when the server starts.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// stdio: the working directory, if not the sandbox's.
    pub cwd: Option<PathBuf>,
    /// Streamable HTTP: the server's MCP endpoint.
    pub url: Option<String>,
    /// Streamable HTTP: the only headers sent; values may hold `${env:NAME}`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
    /// stdio: the isolation level (default `standard`).
    pub isolation: Option<Isolation>,
    /// stdio: what the server may reach from `strict` up.
    #[serde(default)]
    pub sandbox: SandboxAccess,
    /// When tool names carry the `SERVER__` prefix.
    #[serde(default)]
    pub prefix: PrefixMode,
    /// Trust the server's annotations (read-only, destructive, …) for every tool.
    #[serde(default)]
    pub trust_annotations: bool,
    /// Tools the server adds later join without review.
    #[serde(default)]
    pub auto_approve_new_tools: bool,
    /// Start the server with toolgate instead of on first use.
    #[serde(default)]
    pub eager: bool,
    /// Seconds without calls after which a stdio server is stopped (default 600; 0 = never).
    pub idle_timeout_secs: Option<u64>,
    /// Governance for every tool of this server.
    #[serde(default)]
    pub defaults: Governance,
    /// Per-tool overrides, keyed by the upstream tool name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tools: BTreeMap<String, Governance>,
    /// Anything else the entry carries, kept for round trips (rejected by validation).
    #[serde(skip)]
    pub extra: BTreeMap<String, Value>,
}
