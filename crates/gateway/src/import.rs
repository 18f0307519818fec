//! `toolgate servers import`: the `mcpServers` JSON of Claude Desktop, Cursor and VS Code turned into server entries.
//!
//! Two shapes are read: `{"mcpServers": {NAME: {...}}}` (Claude Desktop, Cursor, Windsurf,
//! Cline) and VS Code's `{"servers": {NAME: {"type": "stdio" | "http" | "sse", ...}}}`. An entry
//! is `command`/`args`/`env` (stdio) or `url`/`headers` (Streamable HTTP); `cwd` is kept.
//!
//! - A bare command (`npx`) is resolved to an absolute path at import time by the resolver the
//!   caller passes (a search of `PATH`, see [`path_resolver`]); one that cannot be resolved is
//!   reported, not guessed.
//! - Names become [`ServerName`]s ([`ServerName::sanitized`]); a changed name is noted.
//! - Values are imported as written, `env` values included: a token written in the file stays
//!   a literal token in the entry, and a note suggests `${env:NAME}` for values whose key looks
//!   like a secret. `${env:NAME}` (which VS Code uses too) carries over unchanged.
//! - What toolgate cannot run is skipped with a reason (an SSE-only server, a relative or
//!   unresolvable command, an entry that fails [`ServerEntry::validate`], `${input:…}` prompts),
//!   and the rest is still imported.
//!
//! [`to_toml`] renders entries as `[servers.NAME]` tables for the config file.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde::ser::{SerializeMap, SerializeStruct};
use serde::{Serialize, Serializer};
use serde_json::{Map, Value};

use crate::GatewayError;
use crate::config::{ServerEntry, ServerName};

/// What an import found: the entries to add, notes on what was changed on the way, and the
/// entries that were left out with the reason.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Import {
    /// The entries, valid, in the file's order.
    pub servers: Vec<(ServerName, ServerEntry)>,
    /// What was changed or ignored on the way, one sentence each.
    pub notes: Vec<String>,
    /// The entries that were not imported.
    pub skipped: Vec<Skipped>,
}

/// An entry of the file that was not imported.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Skipped {
    /// Its name in the file.
    pub name: String,
    /// Why, and what to do.
    pub reason: String,
}

/// Keys of an entry that are read.
const READ: &[&str] = &["command", "args", "env", "cwd", "url", "headers", "type"];

/// Keys of other clients' entries that toolgate has its own settings for; ignored with a note.
const IGNORED: &[(&str, &str)] = &[
    (
        "autoApprove",
        "toolgate decides approvals itself (requires_confirmation per tool)",
    ),
    (
        "alwaysAllow",
        "toolgate decides approvals itself (requires_confirmation per tool)",
    ),
    (
        "timeout",
        "set timeout_ms in [servers.NAME.defaults] instead",
    ),
    (
        "envFile",
        "toolgate does not read env files; put the variables in env (as ${env:NAME} to read them from toolgate's environment)",
    ),
];

/// Reads an `mcpServers` (or VS Code `servers`) JSON document. `resolve` turns a bare program
/// name (`npx`) into its absolute path, or `None` when it is not found.
pub fn from_mcp_servers(
    json: &str,
    resolve: &dyn Fn(&str) -> Option<PathBuf>,
) -> Result<Import, GatewayError> {
    let doc: Value = serde_json::from_str(json).map_err(|e| {
        GatewayError::Invalid(format!(
            "The file is not JSON ({e}); import reads the mcpServers file of Claude Desktop or Cursor, or VS Code's mcp.json"
        ))
    })?;
    let (servers, vs_code) = match (doc.get("mcpServers"), doc.get("servers")) {
        (Some(Value::Object(m)), _) => (m, false),
        (None, Some(Value::Object(m))) => (m, true),
        _ => {
            return Err(GatewayError::Invalid(
                "The file has no \"mcpServers\" object (Claude Desktop, Cursor) and no \"servers\" object (VS Code); import reads one of them".to_owned(),
            ));
        }
    };
    let mut out = Import::default();
    let mut used = BTreeSet::new();
    for (raw, value) in servers {
        let Some(fields) = value.as_object() else {
            out.skipped.push(Skipped {
                name: raw.clone(),
                reason: "The entry is not a JSON object".to_owned(),
            });
            continue;
        };
        let name = unique_name(raw, &mut used);
        // Notes on an entry count only when it is imported.
        let mut notes = Vec::new();
        if name.as_str() != raw {
            notes.push(format!(
                "Server {raw:?} is imported as {name} (names are lowercase letters, digits and single underscores)"
            ));
        }
        let checked = entry(&name, fields, vs_code, resolve, &mut notes).and_then(|entry| {
            let prefix = format!("servers.{name}.");
            match entry.validate(&name) {
                Ok(()) => Ok(entry),
                Err(issues) => Err(issues
                    .iter()
                    .map(|i| match i.path.strip_prefix(&prefix) {
                        Some(field) => format!("{field}: {}", i.message),
                        None => i.message.clone(),
                    })
                    .collect::<Vec<_>>()
                    .join("; ")),
            }
        });
        match checked {
            Ok(entry) => {
                out.notes.append(&mut notes);
                out.servers.push((name, entry));
            }
            Err(reason) => {
                used.remove(name.as_str());
                out.skipped.push(Skipped {
                    name: raw.clone(),
                    reason,
                });
            }
        }
    }
    Ok(out)
}

/// A name not yet used in this import: the sanitised name, else with `_2`, `_3`, … appended.
fn unique_name(raw: &str, used: &mut BTreeSet<String>) -> ServerName {
    let base = ServerName::sanitized(raw);
    let mut candidate = base.clone();
    let mut n = 2;
    while used.contains(candidate.as_str()) {
        let suffix = format!("_{n}");
        let mut s = base.as_str().to_owned();
        s.truncate(crate::config::MAX_SERVER_NAME_LEN - suffix.len());
        candidate = ServerName::sanitized(&format!("{}{suffix}", s.trim_end_matches('_')));
        n += 1;
    }
    used.insert(candidate.as_str().to_owned());
    candidate
}

fn entry(
    name: &ServerName,
    fields: &Map<String, Value>,
    vs_code: bool,
    resolve: &dyn Fn(&str) -> Option<PathBuf>,
    notes: &mut Vec<String>,
) -> Result<ServerEntry, String> {
    if fields.get("disabled").and_then(Value::as_bool) == Some(true) {
        return Err("The entry is disabled in the file; enable it there to import it".to_owned());
    }
    for (key, _) in fields {
        if READ.contains(&key.as_str()) || key == "disabled" {
            continue;
        }
        match IGNORED.iter().find(|(k, _)| k == key) {
            Some((_, why)) => notes.push(format!("Server {name}: {key} is not imported: {why}")),
            None => notes.push(format!(
                "Server {name}: {key} is not imported (toolgate has no such setting)"
            )),
        }
    }
    let kind = fields.get("type").and_then(Value::as_str);
    let mut e = ServerEntry::default();
    match kind {
        Some("sse") => {
            return Err(
                "It uses the SSE transport, which toolgate does not speak: if the server also serves Streamable HTTP (often at /mcp instead of /sse), add it with that url".to_owned(),
            );
        }
        Some("stdio") | Some("http") | Some("streamable-http") | Some("streamableHttp") | None => {}
        Some(other) => return Err(format!("Its type {other:?} is not stdio or http")),
    }
    let command = string(fields, "command")?;
    let url = string(fields, "url")?;
    if kind == Some("stdio") && command.is_none() {
        return Err("A stdio entry needs a command".to_owned());
    }
    if matches!(kind, Some("http" | "streamable-http" | "streamableHttp")) && url.is_none() {
        return Err("An http entry needs a url".to_owned());
    }
    if let Some(command) = command {
        e.command = Some(program(&command, name, resolve, notes)?);
        e.args = strings(fields, "args")?;
        e.env = table(fields, "env")?;
        if let Some(cwd) = string(fields, "cwd")? {
            e.cwd = Some(PathBuf::from(cwd));
        }
        for (i, a) in e.args.iter().enumerate() {
            if a.contains("${") && !a.contains("${env:") {
                notes.push(format!(
                    "Server {name}: args[{i}] {a:?} is passed as written; toolgate does not expand {} variables",
                    if vs_code { "VS Code's" } else { "client" }
                ));
            }
        }
        for (key, value) in &e.env {
            if looks_secret(key) && !value.contains("${env:") && !value.is_empty() {
                notes.push(format!(
                    "Server {name}: env.{key} is imported as the literal value written in the file; to keep it out of toolgate's config, write env.{key} = \"${{env:{key}}}\" and set {key} in toolgate's environment"
                ));
            }
        }
    }
    if let Some(url) = url {
        if kind.is_none() && url.trim_end_matches('/').ends_with("/sse") {
            notes.push(format!(
                "Server {name}: its url ends in /sse, which usually is the SSE transport; toolgate speaks Streamable HTTP (often at /mcp), so check the url if it fails to connect"
            ));
        }
        e.url = Some(url);
        e.headers = table(fields, "headers")?;
    }
    Ok(e)
}

/// The absolute program of `command`: as written when absolute, resolved when a bare name.
fn program(
    command: &str,
    name: &ServerName,
    resolve: &dyn Fn(&str) -> Option<PathBuf>,
    notes: &mut Vec<String>,
) -> Result<PathBuf, String> {
    let path = Path::new(command);
    if path.is_absolute() {
        return Ok(path.to_path_buf());
    }
    if command.contains('/') || command.contains('\\') || command.is_empty() {
        return Err(format!(
            "Its command {command:?} is a relative path; write the absolute path in the file (or in the entry after importing)"
        ));
    }
    match resolve(command) {
        Some(found) if found.is_absolute() => {
            notes.push(format!(
                "Server {name}: command {command} is resolved to {} (toolgate runs an absolute program, without a PATH lookup)",
                found.display()
            ));
            Ok(found)
        }
        _ => Err(format!(
            "Its command {command:?} is not found in PATH; install it, or write its absolute path in the file (toolgate runs an absolute program, without a PATH lookup)"
        )),
    }
}

fn string(fields: &Map<String, Value>, key: &str) -> Result<Option<String>, String> {
    match fields.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(format!("Its {key} is not a string")),
    }
}

fn strings(fields: &Map<String, Value>, key: &str) -> Result<Vec<String>, String> {
    match fields.get(key) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .iter()
            .map(|v| match v {
                Value::String(s) => Ok(s.clone()),
                Value::Number(n) => Ok(n.to_string()),
                Value::Bool(b) => Ok(b.to_string()),
                _ => Err(format!("Its {key} holds a value that is not a string")),
            })
            .collect(),
        Some(_) => Err(format!("Its {key} is not a list of strings")),
    }
}

fn table(
    fields: &Map<String, Value>,
    key: &str,
) -> Result<std::collections::BTreeMap<String, String>, String> {
    match fields.get(key) {
        None | Some(Value::Null) => Ok(Default::default()),
        Some(Value::Object(m)) => m
            .iter()
            .map(|(k, v)| match v {
                Value::String(s) => Ok((k.clone(), s.clone())),
                Value::Number(n) => Ok((k.clone(), n.to_string())),
                Value::Bool(b) => Ok((k.clone(), b.to_string())),
                _ => Err(format!("Its {key}.{k} is not a string")),
            })
            .collect(),
        Some(_) => Err(format!("Its {key} is not an object of strings")),
    }
}

fn looks_secret(key: &str) -> bool {
    let k = key.to_ascii_uppercase();
    [
        "TOKEN",
        "SECRET",
        "PASSWORD",
        "PASSWD",
        "API_KEY",
        "APIKEY",
        "_KEY",
        "CREDENTIAL",
        "AUTH",
    ]
    .iter()
    .any(|w| k.contains(w))
}

/// A resolver for [`from_mcp_servers`] that searches `path_var` (the value of `PATH`) in order
/// for `program`, asking `is_executable` about each candidate (the caller's one look at the
/// filesystem). Only bare names are searched.
pub fn path_resolver(
    path_var: String,
    is_executable: impl Fn(&Path) -> bool,
) -> impl Fn(&str) -> Option<PathBuf> {
    move |program: &str| {
        if program.is_empty() || program.contains('/') {
            return None;
        }
        path_var
            .split(':')
            .filter(|dir| Path::new(dir).is_absolute())
            .map(|dir| Path::new(dir).join(program))
            .find(|candidate| is_executable(candidate))
    }
}

/// The entries as `[servers.NAME]` tables of the config file, in the given order; parsing the
/// text back gives the same entries.
pub fn to_toml(entries: &[(ServerName, ServerEntry)]) -> Result<String, GatewayError> {
    struct Servers<'a>(&'a [(ServerName, ServerEntry)]);
    impl Serialize for Servers<'_> {
        fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            let mut map = s.serialize_map(Some(self.0.len()))?;
            for (name, entry) in self.0 {
                map.serialize_entry(name.as_str(), entry)?;
            }
            map.end()
        }
    }
    struct Doc<'a>(Servers<'a>);
    impl Serialize for Doc<'_> {
        fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            let mut doc = s.serialize_struct("Doc", 1)?;
            doc.serialize_field("servers", &self.0)?;
            doc.end()
        }
    }
    toml::to_string(&Doc(Servers(entries)))
        .map_err(|e| GatewayError::Invalid(format!("The entries cannot be written as TOML: {e}")))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde::Deserialize;

    use super::*;

    fn resolver(program: &str) -> Option<PathBuf> {
        match program {
            "npx" => Some(PathBuf::from("/usr/bin/npx")),
            "uvx" => Some(PathBuf::from("/home/me/.local/bin/uvx")),
            "docker" => Some(PathBuf::from("/usr/bin/docker")),
            _ => None,
        }
    }

    const CLAUDE: &str = r#"{
  "globalShortcut": "Ctrl+Space",
  "mcpServers": {
    "filesystem": {
      "command": "npx",
      "args": ["-y", "@modelcontextprotocol/server-filesystem", "/Users/me/Desktop"]
    },
    "GitHub-Server": {
      "command": "docker",
      "args": ["run", "-i", "--rm", "-e", "GITHUB_PERSONAL_ACCESS_TOKEN", "ghcr.io/github/github-mcp-server"],
      "env": { "GITHUB_PERSONAL_ACCESS_TOKEN": "ghp_literal123" }
    },
    "time": { "command": "uvx", "args": ["mcp-server-time"], "autoApprove": ["get_current_time"] },
    "local-script": { "command": "./run.sh" },
    "shell": { "command": "/bin/bash", "args": ["-c", "npx foo"] },
    "missing": { "command": "deno", "args": ["run", "server.ts"] },
    "remote": { "url": "https://mcp.example.com/mcp", "headers": { "Authorization": "Bearer ${env:TICKETS_TOKEN}" } },
    "legacy": { "url": "https://old.example.com/sse" },
    "off": { "command": "npx", "disabled": true },
    "filesystem!": { "command": "/usr/local/bin/mcp-fs" }
  }
}"#;

    const VS_CODE: &str = r#"{
  "inputs": [{ "type": "promptString", "id": "perplexity-key", "description": "Perplexity API Key", "password": true }],
  "servers": {
    "Perplexity": {
      "type": "stdio",
      "command": "npx",
      "args": ["-y", "server-perplexity-ask"],
      "env": { "PERPLEXITY_API_KEY": "${input:perplexity-key}" }
    },
    "fetch": { "type": "stdio", "command": "uvx", "args": ["mcp-server-fetch"], "envFile": "${workspaceFolder}/.env" },
    "github": { "type": "http", "url": "https://api.githubcopilot.com/mcp/", "headers": { "Authorization": "Bearer ${env:GITHUB_TOKEN}" } },
    "events": { "type": "sse", "url": "https://events.example.com/sse" },
    "memory": { "command": "npx", "args": ["-y", "@modelcontextprotocol/server-memory"], "cwd": "/srv/memory" }
  }
}"#;

    fn report(i: &Import) -> String {
        let mut out = String::from("imported:\n");
        for (n, _) in &i.servers {
            out.push_str(&format!("  {n}\n"));
        }
        out.push_str("notes:\n");
        for n in &i.notes {
            out.push_str(&format!("  {n}\n"));
        }
        out.push_str("skipped:\n");
        for s in &i.skipped {
            out.push_str(&format!("  {}: {}\n", s.name, s.reason));
        }
        out
    }

    #[test]
    fn claude_desktop_and_cursor_files_are_imported() {
        let i = from_mcp_servers(CLAUDE, &resolver).unwrap();
        insta::assert_snapshot!("claude_import", report(&i));
        let fs = &i.servers[0].1;
        assert_eq!(fs.command.as_deref(), Some(Path::new("/usr/bin/npx")));
        assert_eq!(fs.args[1], "@modelcontextprotocol/server-filesystem");
        let gh = &i.servers[1];
        assert_eq!(gh.0.as_str(), "github_server");
        // Kept as written (documented): the note suggests ${env:…}.
        assert_eq!(gh.1.env["GITHUB_PERSONAL_ACCESS_TOKEN"], "ghp_literal123");
        let remote = i
            .servers
            .iter()
            .find(|(n, _)| n.as_str() == "remote")
            .unwrap();
        assert_eq!(
            remote.1.headers["Authorization"],
            "Bearer ${env:TICKETS_TOKEN}"
        );
        // Two names that sanitise alike stay apart.
        assert!(i.servers.iter().any(|(n, _)| n.as_str() == "filesystem_2"));
    }

    #[test]
    fn vs_code_files_are_imported() {
        let i = from_mcp_servers(VS_CODE, &resolver).unwrap();
        insta::assert_snapshot!("vs_code_import", report(&i));
        let memory = i
            .servers
            .iter()
            .find(|(n, _)| n.as_str() == "memory")
            .unwrap();
        assert_eq!(memory.1.cwd.as_deref(), Some(Path::new("/srv/memory")));
    }

    #[test]
    fn what_is_not_an_mcp_servers_file_is_refused() {
        for text in ["not json", "{}", r#"{"mcpServers": []}"#] {
            let err = from_mcp_servers(text, &resolver).unwrap_err();
            assert_eq!(err.kind(), crate::GatewayErrorKind::Invalid, "{text}");
        }
        let empty = from_mcp_servers(r#"{"mcpServers": {}}"#, &resolver).unwrap();
        assert!(empty.servers.is_empty() && empty.skipped.is_empty());
    }

    #[derive(Deserialize)]
    struct File {
        servers: BTreeMap<String, ServerEntry>,
    }

    #[test]
    fn toml_output_parses_back_to_the_same_entries() {
        let mut servers = from_mcp_servers(CLAUDE, &resolver).unwrap().servers;
        servers.extend(from_mcp_servers(VS_CODE, &resolver).unwrap().servers);
        let mut full: ServerEntry = toml::from_str(
            "command = \"/usr/bin/npx\"\nisolation = \"strict\"\nprefix = \"conditional\"\n[sandbox]\nread_paths = [\"/srv\"]\n[defaults]\neffect = \"write\"\n[tools.\"odd name\"]\ndisabled = true\n",
        )
        .unwrap();
        full.env.insert("A".into(), "${env:A}".into());
        servers.push((ServerName::parse("full").unwrap(), full));
        let text = to_toml(&servers).unwrap();
        insta::assert_snapshot!("imported_toml", text);
        let back: File = toml::from_str(&text).unwrap();
        assert_eq!(back.servers.len(), servers.len());
        for (name, entry) in &servers {
            assert_eq!(&back.servers[name.as_str()], entry, "{name}");
        }
        assert_eq!(to_toml(&[]).unwrap().trim(), "[servers]");
    }

    #[test]
    fn the_path_resolver_searches_path_in_order() {
        let exists =
            |p: &Path| p == Path::new("/opt/node/bin/npx") || p == Path::new("/usr/bin/npx");
        let r = path_resolver("relative/bin:/opt/node/bin:/usr/bin".into(), exists);
        assert_eq!(r("npx"), Some(PathBuf::from("/opt/node/bin/npx")));
        assert_eq!(r("uvx"), None);
        assert_eq!(r("bin/npx"), None);
        let i = from_mcp_servers(r#"{"mcpServers": {"a": {"command": "npx"}}}"#, &r).unwrap();
        assert_eq!(
            i.servers[0].1.command.as_deref(),
            Some(Path::new("/opt/node/bin/npx"))
        );
    }
}
