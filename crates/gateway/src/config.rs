//! Server entries: `[servers.NAME]` in the config file and in the store, validated, with `${env:NAME}` expansion.
//!
//! The shared shape (fields) is fixed here; parsing, validation (every problem at once) and
//! expansion live beside it. Validation reports [`Issue`]s whose path is the key in the config
//! file (`servers.files.command`), so a front-end prints them as they are.
//!
//! `${env:NAME}` is expanded only in `env` and `headers` values, when the server starts
//! ([`ServerEntry::expanded`]); a `${` anywhere in those values must start such a reference.
//! Arguments, the URL and paths are used as written.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Component, Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;
use toolgate_core::limits::{MAX_OUTPUT_BYTES, MAX_TIMEOUT_MS, MIN_OUTPUT_BYTES, MIN_TIMEOUT_MS};
use toolgate_core::{Consequence, Effect, Isolation, Issue, Permission, parse_host_port};

use crate::GatewayError;

/// Longest server name: leaves room for `__` and a tool name within toolgate's 64 characters.
pub const MAX_SERVER_NAME_LEN: usize = 32;

/// How long a stdio server may sit without calls before it is stopped, unless its entry says.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(600);

/// Programs that are shells (or run their arguments as one): never a server's `command`.
const SHELLS: &[&str] = &[
    "sh", "bash", "dash", "zsh", "ksh", "mksh", "csh", "tcsh", "fish", "ash", "busybox",
];

/// Headers the Streamable HTTP transport sets itself; an entry may not set them.
const TRANSPORT_HEADERS: &[&str] = &[
    "accept",
    "connection",
    "content-length",
    "content-type",
    "host",
    "keep-alive",
    "last-event-id",
    "mcp-protocol-version",
    "mcp-session-id",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
];

/// A validated server name: the `NAME` of `[servers.NAME]` and the `SERVER` of `SERVER__TOOL`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(transparent)]
pub struct ServerName(String);

impl ServerName {
    /// Validates a server name. The rule makes `NAME__TOOL` a valid toolgate tool name: 1 to
    /// [`MAX_SERVER_NAME_LEN`] lowercase letters, digits and single underscores, starting with a
    /// letter and not ending with an underscore.
    pub fn parse(raw: &str) -> Result<Self, GatewayError> {
        if is_server_name(raw) {
            return Ok(Self(raw.to_owned()));
        }
        let suggestion = Self::sanitized(raw);
        Err(GatewayError::Invalid(format!(
            "Server name {raw:?} is invalid: use 1-{MAX_SERVER_NAME_LEN} lowercase letters, digits and single underscores, starting with a letter and not ending with an underscore, because its tools are named SERVER__TOOL (e.g. {suggestion}, whose tools are {suggestion}__read_file)"
        )))
    }

    /// The nearest valid name to `raw` (lowercased, other characters turned into single
    /// underscores, cut to [`MAX_SERVER_NAME_LEN`]); `server` when nothing usable is left, and
    /// `server_…` before a leading digit. Equal to `raw` when `raw` is valid.
    pub fn sanitized(raw: &str) -> Self {
        let mut name = crate::naming::snake(raw);
        if name.starts_with(|c: char| c.is_ascii_digit()) {
            name.insert_str(0, "server_");
        }
        if name.is_empty() {
            name.push_str("server");
        }
        name.truncate(MAX_SERVER_NAME_LEN);
        let name = name.trim_end_matches('_').to_owned();
        Self(name)
    }

    /// The name as written.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Wraps a name that the caller has already validated (see `config.rs` for the rule).
    #[allow(dead_code)] // kept for the crate's own constructors
    pub(crate) fn new_unchecked(name: String) -> Self {
        Self(name)
    }
}

fn is_server_name(raw: &str) -> bool {
    let b = raw.as_bytes();
    !b.is_empty()
        && b.len() <= MAX_SERVER_NAME_LEN
        && b[0].is_ascii_lowercase()
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'_')
        && !raw.contains("__")
        && !raw.ends_with('_')
}

impl fmt::Display for ServerName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl AsRef<str> for ServerName {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl FromStr for ServerName {
    type Err = GatewayError;

    fn from_str(s: &str) -> Result<Self, GatewayError> {
        Self::parse(s)
    }
}

impl<'de> Deserialize<'de> for ServerName {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw = String::deserialize(d)?;
        Self::parse(&raw).map_err(serde::de::Error::custom)
    }
}

/// When an upstream tool's name carries its server's prefix.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
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

impl PrefixMode {
    /// The name in the config file: `always`, `conditional` or `never`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Always => "always",
            Self::Conditional => "conditional",
            Self::Never => "never",
        }
    }

    fn is_default(&self) -> bool {
        *self == Self::Always
    }
}

/// `[servers.NAME.sandbox]`: what a stdio server may reach at `strict` and above.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SandboxAccess {
    /// Paths the server may read.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub read_paths: Vec<PathBuf>,
    /// Paths the server may write.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub write_paths: Vec<PathBuf>,
    /// `host:port` pairs the server may connect to.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allowed_hosts: Vec<String>,
}

impl SandboxAccess {
    /// True when nothing is declared.
    pub fn is_empty(&self) -> bool {
        self.read_paths.is_empty() && self.write_paths.is_empty() && self.allowed_hosts.is_empty()
    }

    /// `allowed_hosts` as (lowercased host, port) pairs; entries that are not `host:port` are
    /// left out (validation reports them).
    pub fn host_ports(&self) -> Vec<(String, u16)> {
        self.allowed_hosts
            .iter()
            .filter_map(|h| parse_host_port(h))
            .collect()
    }
}

/// Governance fields an entry sets for all its tools (`[servers.NAME.defaults]`) or for one
/// (`[servers.NAME.tools.TOOL]`). Every field is optional; a per-tool value wins over the
/// server default, which wins over what the annotations give.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Governance {
    /// `read`, `write`, `delete` or `side_effect`, as in a definition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = ["read", "write", "delete", "side_effect"]))]
    pub effect: Option<String>,
    /// `low`, `medium` or `high`, as in a definition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = ["low", "medium", "high"]))]
    pub consequence: Option<String>,
    /// Whether a person must say yes before each call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requires_confirmation: Option<bool>,
    /// Permissions a principal needs to call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub required_permissions: Option<Vec<String>>,
    /// Tags added to the tool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tags: Option<Vec<String>>,
    /// Per-call timeout in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    /// Output cap in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_output_bytes: Option<u64>,
    /// Whether a failed call may be retried.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retryable: Option<bool>,
    /// Whether this tool's (or server's) annotations are trusted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trust_annotations: Option<bool>,
    /// Hides the tool altogether.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disabled: Option<bool>,
}

impl Governance {
    /// True when no field is set.
    pub fn is_empty(&self) -> bool {
        self == &Self::default()
    }

    /// `self` with every field `over` sets replaced by `over`'s value.
    #[must_use]
    pub fn overlaid(&self, over: &Governance) -> Governance {
        Governance {
            effect: over.effect.clone().or_else(|| self.effect.clone()),
            consequence: over
                .consequence
                .clone()
                .or_else(|| self.consequence.clone()),
            requires_confirmation: over.requires_confirmation.or(self.requires_confirmation),
            required_permissions: over
                .required_permissions
                .clone()
                .or_else(|| self.required_permissions.clone()),
            tags: over.tags.clone().or_else(|| self.tags.clone()),
            timeout_ms: over.timeout_ms.or(self.timeout_ms),
            max_output_bytes: over.max_output_bytes.or(self.max_output_bytes),
            retryable: over.retryable.or(self.retryable),
            trust_annotations: over.trust_annotations.or(self.trust_annotations),
            disabled: over.disabled.or(self.disabled),
        }
    }

    /// The effect, parsed (`None` when absent or invalid; validation reports the latter).
    pub fn effect(&self) -> Option<Effect> {
        self.effect.as_deref().and_then(|e| e.parse().ok())
    }

    /// The consequence, parsed (`None` when absent or invalid; validation reports the latter).
    pub fn consequence(&self) -> Option<Consequence> {
        self.consequence.as_deref().and_then(|c| c.parse().ok())
    }

    fn check(&self, at: &str, out: &mut Issues) {
        let field = |f: &str| format!("{at}.{f}");
        if let Some(e) = &self.effect
            && let Err(msg) = e.parse::<Effect>()
        {
            out.push(field("effect"), "server.effect", capitalized(&msg));
        }
        if let Some(c) = &self.consequence
            && let Err(msg) = c.parse::<Consequence>()
        {
            out.push(
                field("consequence"),
                "server.consequence",
                capitalized(&msg),
            );
        }
        for (i, p) in self.required_permissions.iter().flatten().enumerate() {
            let at = format!("{}[{i}]", field("required_permissions"));
            match Permission::parse(p) {
                Ok(p) if p.as_str().ends_with('*') => out.push(
                    at,
                    "server.permission",
                    "A required permission cannot be a wildcard; name the exact permission, like tool.files.read",
                ),
                Ok(_) => {}
                Err(msg) => out.push(at, "server.permission", capitalized(&msg)),
            }
        }
        for (i, t) in self.tags.iter().flatten().enumerate() {
            if t.trim().is_empty() || t.chars().count() > 64 {
                out.push(
                    format!("{}[{i}]", field("tags")),
                    "server.tag",
                    "Tags must be 1-64 characters",
                );
            }
        }
        if let Some(t) = self.timeout_ms
            && !(MIN_TIMEOUT_MS..=MAX_TIMEOUT_MS).contains(&t)
        {
            out.push(
                field("timeout_ms"),
                "server.timeout",
                format!("Timeout {t} ms is outside the allowed range {MIN_TIMEOUT_MS}-{MAX_TIMEOUT_MS} ms (1 s to 10 min)"),
            );
        }
        if let Some(b) = self.max_output_bytes
            && !(MIN_OUTPUT_BYTES..=MAX_OUTPUT_BYTES).contains(&b)
        {
            out.push(
                field("max_output_bytes"),
                "server.max_output",
                format!("Output limit {b} bytes is outside the allowed range {MIN_OUTPUT_BYTES}-{MAX_OUTPUT_BYTES} (1 KiB to 100 MiB)"),
            );
        }
    }
}

/// One upstream server as declared: exactly one of `command` (stdio) or `url` (Streamable HTTP).
///
/// Deserializing refuses unknown keys (serde names the misspelt key and the expected ones).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ServerEntry {
    /// stdio: the absolute path of the program (never a shell).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<PathBuf>,
    /// stdio: its arguments, each passed as is.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// stdio: the only environment the program gets besides the sandbox's own; values may hold
    /// `${env:NAME}`, read from toolgate's environment when the server starts.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// stdio: the working directory, if not the sandbox's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<PathBuf>,
    /// Streamable HTTP: the server's MCP endpoint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Streamable HTTP: the only headers sent; values may hold `${env:NAME}`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
    /// stdio: the isolation level (default `standard`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub isolation: Option<Isolation>,
    /// stdio: what the server may reach from `strict` up.
    #[serde(default, skip_serializing_if = "SandboxAccess::is_empty")]
    pub sandbox: SandboxAccess,
    /// When tool names carry the `SERVER__` prefix.
    #[serde(default, skip_serializing_if = "PrefixMode::is_default")]
    pub prefix: PrefixMode,
    /// Trust the server's annotations (read-only, destructive, …) for every tool.
    #[serde(default, skip_serializing_if = "is_false")]
    pub trust_annotations: bool,
    /// Tools the server adds later join without review.
    #[serde(default, skip_serializing_if = "is_false")]
    pub auto_approve_new_tools: bool,
    /// Start the server with toolgate instead of on first use.
    #[serde(default, skip_serializing_if = "is_false")]
    pub eager: bool,
    /// Seconds without calls after which a stdio server is stopped (default 600; 0 = never).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle_timeout_secs: Option<u64>,
    /// Governance for every tool of this server.
    #[serde(default, skip_serializing_if = "Governance::is_empty")]
    pub defaults: Governance,
    /// Per-tool overrides, keyed by the upstream tool name (or its sanitised form, see
    /// [`ServerEntry::tool_settings`]).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tools: BTreeMap<String, Governance>,
    /// Anything else the entry carries, kept for round trips (rejected by validation).
    #[serde(skip)]
    pub extra: BTreeMap<String, Value>,
}

fn is_false(b: &bool) -> bool {
    !*b
}

impl ServerEntry {
    /// True for a stdio server (`command`), false for a Streamable HTTP one (`url`).
    pub fn is_stdio(&self) -> bool {
        self.command.is_some()
    }

    /// The isolation level a stdio server runs at: its `isolation`, else `standard`.
    pub fn isolation_level(&self) -> Isolation {
        self.isolation.unwrap_or(Isolation::Standard)
    }

    /// How long the server may sit without calls before it is stopped: `idle_timeout_secs`,
    /// else [`DEFAULT_IDLE_TIMEOUT`]; `None` (never) for `idle_timeout_secs = 0`.
    pub fn idle_timeout(&self) -> Option<Duration> {
        match self.idle_timeout_secs {
            None => Some(DEFAULT_IDLE_TIMEOUT),
            Some(0) => None,
            Some(s) => Some(Duration::from_secs(s)),
        }
    }

    /// The `[servers.NAME.tools.KEY]` table of the upstream tool `tool`, with its key: the one
    /// keyed by the upstream name, else the one keyed by its sanitised name (`get_sum` for the
    /// upstream `get-sum`, as the tool part of its toolgate name reads).
    pub fn tool_settings(&self, tool: &str) -> Option<(&str, &Governance)> {
        self.tools
            .get_key_value(tool)
            .or_else(|| {
                self.tools
                    .get_key_value(crate::naming::sanitize(tool).as_str())
            })
            .map(|(k, g)| (k.as_str(), g))
    }

    /// The governance of the upstream tool `tool`: the server's `defaults` overlaid with its
    /// [`ServerEntry::tool_settings`].
    pub fn governance_for(&self, tool: &str) -> Governance {
        match self.tool_settings(tool) {
            Some((_, own)) => self.defaults.overlaid(own),
            None => self.defaults.clone(),
        }
    }

    /// The keys of `[servers.NAME.tools]` that match none of `upstream` (the tool names the
    /// server lists), for a warning: a misspelt key would otherwise change nothing unnoticed.
    pub fn unmatched_tool_keys<'a>(&'a self, upstream: &[String]) -> Vec<&'a str> {
        let matched: Vec<&str> = upstream
            .iter()
            .filter_map(|u| self.tool_settings(u).map(|(k, _)| k))
            .collect();
        self.tools
            .keys()
            .map(String::as_str)
            .filter(|k| !matched.contains(k))
            .collect()
    }

    /// Whether `tool`'s annotations are trusted: `tools.TOOL.trust_annotations`, else
    /// `defaults.trust_annotations`, else the server's `trust_annotations`.
    pub fn trusts_annotations(&self, tool: &str) -> bool {
        self.governance_for(tool)
            .trust_annotations
            .unwrap_or(self.trust_annotations)
    }

    /// Whether `tool` is hidden (`disabled = true` for it or in `defaults`).
    pub fn tool_disabled(&self, tool: &str) -> bool {
        self.governance_for(tool).disabled.unwrap_or(false)
    }

    /// Checks the entry; every problem at once, each [`Issue::path`] the key in the config file
    /// (`servers.NAME.command`).
    pub fn validate(&self, name: &ServerName) -> Result<(), Vec<Issue>> {
        let mut out = Issues {
            prefix: format!("servers.{name}"),
            issues: Vec::new(),
        };
        for key in self.extra.keys() {
            out.push(
                key_path(key),
                "server.unknown_field",
                format!("Unknown setting {key:?}; remove it or check its spelling against the [servers] reference"),
            );
        }
        match (&self.command, &self.url) {
            (Some(_), Some(_)) => out.push(
                "",
                "server.transport_conflict",
                format!("Server {name} sets both command and url: keep command for a stdio server or url for a Streamable HTTP server"),
            ),
            (None, None) => out.push(
                "",
                "server.transport_missing",
                format!("Server {name} sets neither command nor url: set command = \"/usr/bin/npx\" (with args) for a stdio server, or url = \"https://host/mcp\" for a Streamable HTTP server"),
            ),
            _ => {}
        }
        if let Some(command) = &self.command {
            check_command(command, &mut out);
        }
        if let Some(url) = &self.url {
            check_url(url, !self.headers.is_empty(), &mut out);
        }
        self.check_stdio_fields(&mut out);
        self.check_http_fields(&mut out);
        self.defaults.check("defaults", &mut out);
        for (tool, g) in &self.tools {
            let at = format!("tools{}", key_path(tool));
            if tool.trim().is_empty() {
                out.push(
                    at.clone(),
                    "server.tool_name",
                    "A [tools] key names an upstream tool; it cannot be empty",
                );
            }
            g.check(&at, &mut out);
        }
        if out.issues.is_empty() {
            Ok(())
        } else {
            Err(out.issues)
        }
    }

    fn check_stdio_fields(&self, out: &mut Issues) {
        let stdio = self.command.is_some() || self.url.is_none();
        let only = |field: &str, out: &mut Issues| {
            out.push(
                field,
                "server.stdio_only",
                format!("{field} applies to stdio servers (command); a Streamable HTTP server (url) runs elsewhere, so remove {field}"),
            );
        };
        if !stdio {
            if !self.args.is_empty() {
                only("args", out);
            }
            if !self.env.is_empty() {
                only("env", out);
            }
            if self.cwd.is_some() {
                only("cwd", out);
            }
            if self.isolation.is_some() {
                only("isolation", out);
            }
            if !self.sandbox.is_empty() {
                only("sandbox", out);
            }
        }
        for (i, a) in self.args.iter().enumerate() {
            let at = format!("args[{i}]");
            if a.contains('\0') {
                out.push(
                    at,
                    "server.arg",
                    "An argument cannot contain a NUL character",
                );
            } else if a.contains("${env:") {
                out.push(
                    at,
                    "server.arg_env",
                    "Arguments are passed as written: ${env:…} is expanded only in env and headers values, so pass the value through env (env = { NAME = \"${env:NAME}\" })",
                );
            }
        }
        for (key, value) in &self.env {
            let at = format!("env{}", key_path(key));
            if !is_env_name(key) {
                out.push(
                    at.clone(),
                    "server.env_name",
                    format!("{key:?} is not an environment variable name: use letters, digits and underscores, not starting with a digit (e.g. GITHUB_TOKEN)"),
                );
            }
            check_value(value, &at, "server.env_value", out);
        }
        if let Some(cwd) = &self.cwd
            && !is_absolute_clean(cwd)
        {
            out.push(
                "cwd",
                "server.cwd",
                format!("Working directory {:?} must be an absolute path without `.` or `..` (e.g. /srv/data)", cwd.display().to_string()),
            );
        }
        for (field, paths) in [
            ("read_paths", &self.sandbox.read_paths),
            ("write_paths", &self.sandbox.write_paths),
        ] {
            for (i, p) in paths.iter().enumerate() {
                if !is_absolute_clean(p) {
                    out.push(
                        format!("sandbox.{field}[{i}]"),
                        "server.sandbox_path",
                        format!(
                            "Path {:?} must be absolute and contain no `.` or `..` components",
                            p.display().to_string()
                        ),
                    );
                }
            }
        }
        for (i, h) in self.sandbox.allowed_hosts.iter().enumerate() {
            if parse_host_port(h).is_none() {
                out.push(
                    format!("sandbox.allowed_hosts[{i}]"),
                    "server.sandbox_host",
                    format!("{h:?} is not \"host:port\" (a DNS name or IPv4 address, and a port 1-65535, e.g. api.github.com:443)"),
                );
            }
        }
        if self.sandbox.allowed_hosts.len() > 200 {
            out.push(
                "sandbox.allowed_hosts",
                "server.sandbox_hosts",
                "At most 200 allowed hosts",
            );
        }
        let level = self.isolation_level();
        if stdio && !self.sandbox.is_empty() && level < Isolation::Strict {
            out.push(
                "sandbox",
                "server.sandbox_level",
                format!("[sandbox] takes effect from isolation = \"strict\"; at {level} the server can read, write and connect wherever toolgate's user can, so set isolation = \"strict\" (or remove [sandbox])"),
            );
        }
        if stdio && level == Isolation::Restricted && !self.sandbox.allowed_hosts.is_empty() {
            out.push(
                "sandbox.allowed_hosts",
                "server.sandbox_level",
                "isolation = \"restricted\" has no network at all; use isolation = \"strict\" to reach allowed_hosts",
            );
        }
    }

    fn check_http_fields(&self, out: &mut Issues) {
        if self.url.is_none() && !self.headers.is_empty() {
            out.push(
                "headers",
                "server.http_only",
                "headers applies to Streamable HTTP servers (url); a stdio server gets its settings through env, so move them there",
            );
        }
        for (key, value) in &self.headers {
            let at = format!("headers{}", key_path(key));
            if !is_header_name(key) {
                out.push(
                    at.clone(),
                    "server.header_name",
                    format!("{key:?} is not an HTTP header name: use letters, digits and - (e.g. Authorization, X-Api-Key)"),
                );
            } else if TRANSPORT_HEADERS.contains(&key.to_ascii_lowercase().as_str()) {
                out.push(
                    at.clone(),
                    "server.header_reserved",
                    format!(
                        "Header {key} is set by the Streamable HTTP transport itself; remove it"
                    ),
                );
            }
            if value.contains(['\r', '\n', '\0']) {
                out.push(
                    at.clone(),
                    "server.header_value",
                    "A header value cannot contain line breaks or NUL characters",
                );
            }
            check_value(value, &at, "server.header_value", out);
        }
    }

    /// The entry with every `${env:NAME}` in `env` and `headers` values replaced by the
    /// variable's value, read through `env` (only the referenced variables are read; nothing
    /// else of toolgate's environment reaches the server). A variable that is not set is an
    /// error naming the server, the key and the variable.
    pub fn expanded(
        &self,
        name: &ServerName,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<ServerEntry, GatewayError> {
        let mut out = self.clone();
        for (table, values) in [("env", &mut out.env), ("headers", &mut out.headers)] {
            for (key, value) in values.iter_mut() {
                *value = expand(value, env).map_err(|e| {
                    GatewayError::Invalid(match e {
                        Expand::Missing(var) => format!(
                            "Server {name}: {table}.{key} refers to ${{env:{var}}}, but {var} is not set in toolgate's environment; set it before starting toolgate, or change [servers.{name}.{table}]"
                        ),
                        Expand::Syntax(msg) => format!("Server {name}: {table}.{key}: {msg}"),
                    })
                })?;
            }
        }
        Ok(out)
    }
}

/// Collects issues under `servers.NAME`.
struct Issues {
    prefix: String,
    issues: Vec<Issue>,
}

impl Issues {
    fn push(&mut self, field: impl AsRef<str>, code: &str, message: impl Into<String>) {
        let field = field.as_ref();
        let path = if field.is_empty() {
            self.prefix.clone()
        } else if field.starts_with('.') || field.starts_with('[') {
            format!("{}{field}", self.prefix)
        } else {
            format!("{}.{field}", self.prefix)
        };
        self.issues.push(Issue {
            path,
            code: code.to_owned(),
            message: message.into(),
        });
    }
}

/// `.key` for a bare TOML key, `."odd key"` otherwise.
fn key_path(key: &str) -> String {
    let bare = !key.is_empty()
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if bare {
        format!(".{key}")
    } else {
        format!(".{key:?}")
    }
}

fn capitalized(msg: &str) -> String {
    let mut chars = msg.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

fn check_command(command: &Path, out: &mut Issues) {
    let shown = command.display().to_string();
    if !is_absolute_clean(command) {
        let message = if command.is_absolute() {
            format!(
                "Command {shown:?} must be an absolute path without `.` or `..` components, like /usr/bin/npx"
            )
        } else if command.components().count() == 1 && !shown.is_empty() {
            format!(
                "Command {shown:?} is not an absolute path: use the absolute path, e.g. /usr/bin/{shown} (`command -v {shown}` prints it); toolgate runs the program itself, without a PATH lookup or a shell"
            )
        } else {
            format!(
                "Command {shown:?} is not an absolute path: use the absolute path, e.g. /usr/bin/npx or /srv/app/server.js (a relative path would depend on the working directory); toolgate runs the program itself, without a PATH lookup or a shell"
            )
        };
        out.push("command", "server.command_relative", message);
        return;
    }
    let base = command
        .file_name()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_default();
    if SHELLS.contains(&base.as_str()) {
        out.push(
            "command",
            "server.command_shell",
            format!("Command {shown} is a shell, and toolgate never runs a server through a shell: set command to the server's own program (e.g. /usr/bin/npx) and list its arguments in args"),
        );
    } else if base == "env" {
        out.push(
            "command",
            "server.command_env",
            format!("Command {shown} looks the program up in PATH: set command to the program's absolute path and its variables in env"),
        );
    }
}

fn check_url(url: &str, has_headers: bool, out: &mut Issues) {
    let bad = |out: &mut Issues, why: &str| {
        out.push("url", "server.url", format!("URL {url:?} {why}"));
    };
    if url.contains("${") {
        return bad(
            out,
            "is used as written (${env:…} is expanded only in env and headers values): put the secret in a header",
        );
    }
    let Ok(uri) = url.parse::<http::Uri>() else {
        return bad(
            out,
            "is not a valid URL: write the server's MCP endpoint, like https://mcp.example.com/mcp",
        );
    };
    match uri.scheme_str() {
        Some("http" | "https") => {}
        Some(other) => {
            return bad(
                out,
                &format!(
                    "has scheme {other}: only http:// and https:// (Streamable HTTP) are supported"
                ),
            );
        }
        None => {
            return bad(
                out,
                "has no scheme: write the full endpoint, like https://mcp.example.com/mcp",
            );
        }
    }
    let Some(authority) = uri.authority() else {
        return bad(
            out,
            "has no host: write the full endpoint, like https://mcp.example.com/mcp",
        );
    };
    if authority.as_str().contains('@') {
        return bad(
            out,
            "carries credentials: remove user:password@ and send them in headers (headers = { Authorization = \"Bearer ${env:TOKEN}\" })",
        );
    }
    let host = authority.host();
    if host.is_empty() {
        return bad(
            out,
            "has no host: write the full endpoint, like https://mcp.example.com/mcp",
        );
    }
    let loopback = host.eq_ignore_ascii_case("localhost")
        || host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback());
    if has_headers && uri.scheme_str() == Some("http") && !loopback {
        out.push(
            "headers",
            "server.header_plaintext",
            format!("The headers would travel unencrypted to {host} over http://: use an https:// url (plain http is for loopback servers)"),
        );
    }
}

/// Checks the `${env:NAME}` references of a value.
fn check_value(value: &str, at: &str, code: &str, out: &mut Issues) {
    if let Err(Expand::Syntax(msg)) = expand(value, &|_| Some(String::new())) {
        out.push(at, code, msg);
    }
}

enum Expand {
    Missing(String),
    Syntax(String),
}

/// Replaces each `${env:NAME}` in `value`.
fn expand(value: &str, env: &dyn Fn(&str) -> Option<String>) -> Result<String, Expand> {
    let mut out = String::with_capacity(value.len());
    let mut rest = value;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else {
            return Err(Expand::Syntax(format!(
                "{value:?} has a ${{ without its closing }}: write ${{env:NAME}}"
            )));
        };
        let inner = &after[..end];
        let Some(var) = inner.strip_prefix("env:") else {
            return Err(Expand::Syntax(format!(
                "${{{inner}}} is not a reference toolgate expands: write ${{env:NAME}} to read the variable NAME of toolgate's environment"
            )));
        };
        if !is_env_name(var) {
            return Err(Expand::Syntax(format!(
                "${{env:{var}}} does not name an environment variable: use letters, digits and underscores (e.g. ${{env:GITHUB_TOKEN}})"
            )));
        }
        match env(var) {
            Some(v) => out.push_str(&v),
            None => return Err(Expand::Missing(var.to_owned())),
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

fn is_env_name(name: &str) -> bool {
    let b = name.as_bytes();
    !b.is_empty()
        && !b[0].is_ascii_digit()
        && b.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'_')
}

fn is_header_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

fn is_absolute_clean(p: &Path) -> bool {
    p.is_absolute()
        && p.components()
            .all(|c| matches!(c, Component::RootDir | Component::Normal(_)))
        && !p.to_string_lossy().contains('\0')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(n: &str) -> ServerName {
        ServerName::parse(n).unwrap()
    }

    fn entry(toml_text: &str) -> ServerEntry {
        toml::from_str(toml_text).unwrap()
    }

    fn lines(issues: &[Issue]) -> String {
        issues
            .iter()
            .map(|i| format!("{i}"))
            .collect::<Vec<_>>()
            .join("\n")
    }

    #[test]
    fn server_names_make_valid_tool_names() {
        for ok in ["files", "github2", "my_files", "a", &"s".repeat(32)] {
            let n = name(ok);
            assert!(ToolNameCheck::ok(&format!("{n}__read_file")), "{ok}");
        }
        for bad in [
            "",
            "Files",
            "my-files",
            "2fa",
            "a__b",
            "files_",
            "_files",
            "fi les",
            &"s".repeat(33),
        ] {
            assert!(ServerName::parse(bad).is_err(), "{bad:?}");
        }
        let err = ServerName::parse("My-Files").unwrap_err();
        assert_eq!(err.kind(), crate::GatewayErrorKind::Invalid);
        insta::assert_snapshot!("server_name_rule", err.to_string());
    }

    struct ToolNameCheck;
    impl ToolNameCheck {
        fn ok(n: &str) -> bool {
            toolgate_core::ToolName::parse(n).is_ok()
        }
    }

    #[test]
    fn sanitized_names_are_valid() {
        for (raw, want) in [
            ("files", "files"),
            ("My-Files", "my_files"),
            ("GitHub", "github"),
            ("brave-search", "brave_search"),
            ("7zip", "server_7zip"),
            ("___", "server"),
            ("a__b__", "a_b"),
            (&"x".repeat(40), &"x".repeat(32)),
            (
                "abcdefghijklmnopqrstuvwxyz_1234_6789",
                "abcdefghijklmnopqrstuvwxyz_1234",
            ),
        ] {
            let got = ServerName::sanitized(raw);
            assert_eq!(got.as_str(), want, "{raw:?}");
            assert!(ServerName::parse(got.as_str()).is_ok(), "{raw:?}");
        }
        let n: ServerName = serde_json::from_str("\"files\"").unwrap();
        assert_eq!(n.as_str(), "files");
        assert!(serde_json::from_str::<ServerName>("\"Files\"").is_err());
    }

    #[test]
    fn the_issue_s_examples_are_valid() {
        let stdio = entry(
            r#"
command = "/usr/bin/npx"
args = ["-y", "@modelcontextprotocol/server-filesystem", "/srv/data"]
env = { GITHUB_TOKEN = "${env:GITHUB_TOKEN}" }
isolation = "strict"
[sandbox]
read_paths = ["/srv/data"]
write_paths = []
allowed_hosts = ["api.github.com:443"]
"#,
        );
        stdio.validate(&name("files")).unwrap();
        assert!(stdio.is_stdio());
        assert_eq!(stdio.isolation_level(), Isolation::Strict);
        assert_eq!(
            stdio.sandbox.host_ports(),
            [("api.github.com".to_owned(), 443)]
        );
        let http = entry(
            r#"
url = "https://mcp.example.com/mcp"
headers = { Authorization = "Bearer ${env:TICKETS_TOKEN}" }
prefix = "conditional"
[defaults]
effect = "write"
consequence = "medium"
required_permissions = ["tool.tickets.write"]
[tools.delete_ticket]
effect = "delete"
requires_confirmation = true
"#,
        );
        http.validate(&name("tickets")).unwrap();
        assert!(!http.is_stdio());
        let g = http.governance_for("delete_ticket");
        assert_eq!(g.effect(), Some(Effect::Delete));
        assert_eq!(g.consequence(), Some(Consequence::Medium));
        assert_eq!(g.requires_confirmation, Some(true));
        assert_eq!(http.governance_for("other").effect(), Some(Effect::Write));
    }

    #[test]
    fn defaults_isolation_standard_and_idle_timeout_600s() {
        let e = entry("command = \"/usr/bin/node\"\n");
        assert_eq!(e.isolation_level(), Isolation::Standard);
        assert_eq!(e.idle_timeout(), Some(Duration::from_secs(600)));
        let e = entry("command = \"/usr/bin/node\"\nidle_timeout_secs = 0\n");
        assert_eq!(e.idle_timeout(), None);
        let e = entry("command = \"/usr/bin/node\"\nidle_timeout_secs = 5\n");
        assert_eq!(e.idle_timeout(), Some(Duration::from_secs(5)));
        assert_eq!(e.prefix, PrefixMode::Always);
    }

    #[test]
    fn every_problem_is_reported_at_once() {
        let e = entry(
            r#"
command = "npx"
url = "ftp://example.com/mcp"
args = ["--token", "${env:TOKEN}"]
env = { "BAD-NAME" = "x", GOOD = "${TOKEN}", OTHER = "${env:UNCLOSED" }
cwd = "relative/dir"
headers = { "Bad Header" = "v", Host = "example.com" }
[sandbox]
read_paths = ["data"]
allowed_hosts = ["example.com", "example.com:443"]
[defaults]
effect = "read_only"
consequence = "severe"
timeout_ms = 10
max_output_bytes = 1
required_permissions = ["tool.*", "Bad Perm"]
tags = [""]
[tools."weird.name"]
effect = "destroy"
"#,
        );
        let issues = e.validate(&name("files")).unwrap_err();
        insta::assert_snapshot!("every_problem", lines(&issues));
    }

    #[test]
    fn transports_and_their_fields() {
        let none = ServerEntry::default();
        let issues = none.validate(&name("empty")).unwrap_err();
        assert_eq!(issues[0].code, "server.transport_missing");
        assert_eq!(issues[0].path, "servers.empty");

        let http_with_stdio_fields = entry(
            r#"
url = "https://mcp.example.com/mcp"
args = ["x"]
env = { A = "b" }
cwd = "/tmp"
isolation = "strict"
[sandbox]
read_paths = ["/srv"]
"#,
        );
        let issues = http_with_stdio_fields
            .validate(&name("remote"))
            .unwrap_err();
        let codes: Vec<(&str, &str)> = issues
            .iter()
            .map(|i| (i.path.as_str(), i.code.as_str()))
            .collect();
        assert_eq!(
            codes,
            [
                ("servers.remote.args", "server.stdio_only"),
                ("servers.remote.env", "server.stdio_only"),
                ("servers.remote.cwd", "server.stdio_only"),
                ("servers.remote.isolation", "server.stdio_only"),
                ("servers.remote.sandbox", "server.stdio_only"),
            ]
        );

        let stdio_with_headers =
            entry("command = \"/usr/bin/node\"\nheaders = { Authorization = \"x\" }\n");
        let issues = stdio_with_headers.validate(&name("local")).unwrap_err();
        assert_eq!(issues.len(), 1);
        assert_eq!(issues[0].code, "server.http_only");
        assert_eq!(issues[0].path, "servers.local.headers");
    }

    #[test]
    fn shells_env_and_relative_programs_are_refused() {
        let mut messages = Vec::new();
        for command in [
            "npx",
            "./server.js",
            "/bin/sh",
            "/usr/bin/bash",
            "/usr/bin/env",
            "/usr/../bin/node",
        ] {
            let e = ServerEntry {
                command: Some(PathBuf::from(command)),
                args: vec!["-c".into(), "npx server".into()],
                ..ServerEntry::default()
            };
            let issues = e.validate(&name("x")).unwrap_err();
            assert_eq!(issues.len(), 1, "{command}: {issues:?}");
            messages.push(format!("{command}: {}", issues[0]));
        }
        insta::assert_snapshot!("command_refusals", messages.join("\n"));
        let ok = ServerEntry {
            command: Some(PathBuf::from("/usr/bin/python3")),
            args: vec!["-m".into(), "mcp_server_time".into()],
            ..ServerEntry::default()
        };
        ok.validate(&name("time")).unwrap();
    }

    #[test]
    fn urls_must_be_http_without_credentials() {
        for (url, ok) in [
            ("https://mcp.example.com/mcp", true),
            ("http://127.0.0.1:8080/mcp", true),
            ("http://localhost:8080/mcp", true),
            ("http://[::1]:8080/mcp", true),
            ("http://mcp.internal:8080/mcp", true),
            ("ws://example.com/mcp", false),
            ("example.com/mcp", false),
            ("https://user:pw@example.com/mcp", false),
            ("https://example.com/${env:PATH}", false),
            ("not a url", false),
        ] {
            let e = ServerEntry {
                url: Some(url.into()),
                ..ServerEntry::default()
            };
            assert_eq!(e.validate(&name("x")).is_ok(), ok, "{url}");
        }
        // Headers (credentials, usually) go to a remote host only over https.
        for (url, ok) in [
            ("https://mcp.example.com/mcp", true),
            ("http://127.0.0.1:8080/mcp", true),
            ("http://[::1]:8080/mcp", true),
            ("http://mcp.example.com/mcp", false),
        ] {
            let e = ServerEntry {
                url: Some(url.into()),
                headers: [("Authorization".to_owned(), "Bearer x".to_owned())].into(),
                ..ServerEntry::default()
            };
            let got = e.validate(&name("x"));
            assert_eq!(got.is_ok(), ok, "{url}: {got:?}");
            if let Err(issues) = got {
                assert_eq!(issues[0].code, "server.header_plaintext");
            }
        }
    }

    #[test]
    fn sandbox_settings_need_strict() {
        let e = entry("command = \"/usr/bin/node\"\n[sandbox]\nread_paths = [\"/srv\"]\n");
        let issues = e.validate(&name("x")).unwrap_err();
        assert_eq!(issues[0].code, "server.sandbox_level");
        assert!(
            issues[0].message.contains("isolation = \"strict\""),
            "{}",
            issues[0]
        );
        let e = entry(
            "command = \"/usr/bin/node\"\nisolation = \"restricted\"\n[sandbox]\nallowed_hosts = [\"a.example:443\"]\n",
        );
        let issues = e.validate(&name("x")).unwrap_err();
        assert_eq!(issues[0].path, "servers.x.sandbox.allowed_hosts");
    }

    #[test]
    fn unknown_keys_are_refused_by_name() {
        let err = toml::from_str::<ServerEntry>("comand = \"/usr/bin/npx\"\n")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("unknown field `comand`") && err.contains("`command`"),
            "{err}"
        );
        let err = serde_json::from_str::<ServerEntry>(r#"{"url":"https://x/mcp","header":{}}"#)
            .unwrap_err()
            .to_string();
        assert!(err.contains("unknown field `header`"), "{err}");
        let err = toml::from_str::<ServerEntry>(
            "command = \"/usr/bin/npx\"\n[sandbox]\nread_path = []\n",
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("read_path"), "{err}");
        let err = toml::from_str::<ServerEntry>(
            "command = \"/usr/bin/npx\"\n[tools.echo]\nefect = \"read\"\n",
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("efect"), "{err}");
        let mut e = entry("command = \"/usr/bin/npx\"\n");
        e.extra.insert("surprise".into(), Value::Bool(true));
        let issues = e.validate(&name("x")).unwrap_err();
        assert_eq!(issues[0].path, "servers.x.surprise");
    }

    fn full() -> ServerEntry {
        entry(
            r#"
command = "/usr/bin/npx"
args = ["-y", "@modelcontextprotocol/server-everything"]
env = { TOKEN = "${env:TOKEN}", PLAIN = "1" }
cwd = "/srv"
isolation = "strict"
prefix = "never"
trust_annotations = true
auto_approve_new_tools = true
eager = true
idle_timeout_secs = 60
[sandbox]
read_paths = ["/srv/data"]
write_paths = ["/srv/out"]
allowed_hosts = ["example.com:443"]
[defaults]
effect = "write"
consequence = "low"
requires_confirmation = false
required_permissions = ["tool.everything.use"]
tags = ["demo"]
timeout_ms = 30000
max_output_bytes = 65536
retryable = false
trust_annotations = false
[tools.longRunningOperation]
timeout_ms = 120000
disabled = false
[tools."odd name"]
disabled = true
"#,
        )
    }

    #[test]
    fn entries_round_trip_through_toml_and_json() {
        for e in [
            full(),
            entry("url = \"https://x.example/mcp\"\nheaders = { A = \"b\" }\n"),
            entry("command = \"/usr/bin/node\"\n"),
        ] {
            e.validate(&name("x")).unwrap();
            let text = toml::to_string(&e).unwrap();
            assert_eq!(toml::from_str::<ServerEntry>(&text).unwrap(), e, "{text}");
            let json = serde_json::to_string(&e).unwrap();
            assert_eq!(
                serde_json::from_str::<ServerEntry>(&json).unwrap(),
                e,
                "{json}"
            );
        }
        // Defaults are left out of what is written.
        assert_eq!(
            serde_json::to_string(&entry("command = \"/usr/bin/node\"\n")).unwrap(),
            r#"{"command":"/usr/bin/node"}"#
        );
        assert!(full().tool_disabled("odd name"));
        assert!(!full().tool_disabled("longRunningOperation"));
        assert!(!full().trusts_annotations("echo"));
    }

    #[test]
    fn trust_annotations_per_server_and_per_tool() {
        let e = entry(
            "command = \"/usr/bin/node\"\ntrust_annotations = true\n[tools.risky]\ntrust_annotations = false\n",
        );
        assert!(e.trusts_annotations("echo"));
        assert!(!e.trusts_annotations("risky"));
        let e = entry("command = \"/usr/bin/node\"\n[tools.echo]\ntrust_annotations = true\n");
        assert!(e.trusts_annotations("echo"));
        assert!(!e.trusts_annotations("add"));
    }

    #[test]
    fn tool_tables_match_the_upstream_or_the_sanitised_name() {
        let e = entry(
            "command = \"/usr/bin/node\"\n[tools.get_sum]\ndisabled = true\n[tools.get-tiny-image]\ntimeout_ms = 5000\n[tools.get_tiny_image]\ntimeout_ms = 9000\n[tools.nope]\ndisabled = true\n",
        );
        assert!(e.tool_disabled("get-sum"));
        assert!(e.tool_disabled("get_sum"));
        assert!(!e.tool_disabled("echo"));
        // The upstream name wins over the sanitised one.
        assert_eq!(e.governance_for("get-tiny-image").timeout_ms, Some(5000));
        let upstream = ["get-sum".to_owned(), "get-tiny-image".to_owned()];
        assert_eq!(e.unmatched_tool_keys(&upstream), ["get_tiny_image", "nope"]);
    }

    #[test]
    fn env_and_header_values_are_expanded_from_the_passed_environment_only() {
        let e = full();
        let read = std::cell::RefCell::new(Vec::new());
        let lookup = |var: &str| {
            read.borrow_mut().push(var.to_owned());
            (var == "TOKEN").then(|| "s3cret".to_owned())
        };
        let x = e.expanded(&name("everything"), &lookup).unwrap();
        assert_eq!(x.env["TOKEN"], "s3cret");
        assert_eq!(x.env["PLAIN"], "1");
        assert_eq!(x.env.len(), 2);
        assert_eq!(*read.borrow(), ["TOKEN"]);
        assert_eq!(x.args, e.args);

        let h = entry(
            "url = \"https://t.example/mcp\"\nheaders = { Authorization = \"Bearer ${env:TICKETS_TOKEN}\", X-Both = \"${env:A}-${env:B}\" }\n",
        );
        let vars = |v: &str| match v {
            "TICKETS_TOKEN" => Some("abc".to_owned()),
            "A" => Some("1".to_owned()),
            "B" => Some("2".to_owned()),
            _ => None,
        };
        let x = h.expanded(&name("tickets"), &vars).unwrap();
        assert_eq!(x.headers["Authorization"], "Bearer abc");
        assert_eq!(x.headers["X-Both"], "1-2");

        let err = h.expanded(&name("tickets"), &|_| None).unwrap_err();
        assert_eq!(err.kind(), crate::GatewayErrorKind::Invalid);
        insta::assert_snapshot!("missing_variable", err.to_string());
    }
}
