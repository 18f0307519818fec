//! Validated names: tool names, principal ids and permissions.

use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Longest allowed tool or parameter name.
pub const MAX_NAME_LEN: usize = 64;

/// Names a tool may not take because they read as the act of calling
/// (`docs/tool-model.md#naming-rules`).
pub const RESERVED_NAMES: &[&str] = &["execute", "run", "call", "invoke"];

/// Why a name is not a valid tool name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NameProblem {
    /// The name is empty.
    Empty,
    /// Longer than [`MAX_NAME_LEN`].
    TooLong,
    /// Not `^[a-z][a-z0-9_]*$`.
    BadFormat,
    /// One of [`RESERVED_NAMES`].
    Reserved,
}

/// Checks the snake_case rule `^[a-z][a-z0-9_]*$` and the length limit (not the reserved words).
pub(crate) fn check_snake_case(name: &str) -> Result<(), NameProblem> {
    let bytes = name.as_bytes();
    let Some(first) = bytes.first() else {
        return Err(NameProblem::Empty);
    };
    if bytes.len() > MAX_NAME_LEN {
        return Err(NameProblem::TooLong);
    }
    if !first.is_ascii_lowercase()
        || !bytes
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'_')
    {
        return Err(NameProblem::BadFormat);
    }
    Ok(())
}

/// A valid tool name: snake_case, at most 64 characters, not reserved. Cheap to clone.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ToolName(Arc<str>);

impl ToolName {
    /// Validates `name`.
    pub fn parse(name: &str) -> Result<Self, NameProblem> {
        check_snake_case(name)?;
        if RESERVED_NAMES.contains(&name) {
            return Err(NameProblem::Reserved);
        }
        Ok(Self(Arc::from(name)))
    }

    /// The name as a string slice.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ToolName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for ToolName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

impl AsRef<str> for ToolName {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl std::borrow::Borrow<str> for ToolName {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl Serialize for ToolName {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for ToolName {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw = String::deserialize(d)?;
        Self::parse(&raw)
            .map_err(|p| serde::de::Error::custom(format!("invalid tool name {raw:?}: {p:?}")))
    }
}

/// Who is calling: a non-empty identifier without control characters, at most 256 bytes.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(transparent)]
pub struct PrincipalId(Arc<str>);

impl PrincipalId {
    /// Validates an identifier.
    pub fn parse(id: &str) -> Result<Self, String> {
        if id.is_empty() || id.len() > 256 || id.chars().any(char::is_control) {
            return Err(format!(
                "invalid principal id {id:?}: use 1-256 printable characters"
            ));
        }
        Ok(Self(Arc::from(id)))
    }

    /// The principal used when nobody says otherwise: the local operator.
    pub fn local() -> Self {
        Self(Arc::from("local"))
    }

    /// The id as a string slice.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for PrincipalId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for PrincipalId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

impl<'de> Deserialize<'de> for PrincipalId {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw = String::deserialize(d)?;
        Self::parse(&raw).map_err(serde::de::Error::custom)
    }
}

/// A permission string: dot-separated segments of `[a-z0-9_-]`, e.g. `tool.filesystem.read`.
/// As a *grant*, a final `*` segment matches any suffix (`tool.filesystem.*`, or `*` for all).
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(transparent)]
pub struct Permission(Arc<str>);

impl Permission {
    /// Validates a permission (wildcards allowed only as the last segment).
    pub fn parse(raw: &str) -> Result<Self, String> {
        let segments: Vec<&str> = raw.split('.').collect();
        let ok = !raw.is_empty()
            && raw.len() <= 128
            && segments.iter().enumerate().all(|(i, seg)| {
                (*seg == "*" && i == segments.len() - 1)
                    || (!seg.is_empty()
                        && seg.bytes().all(|b| {
                            b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-'
                        }))
            });
        if ok {
            Ok(Self(Arc::from(raw)))
        } else {
            Err(format!(
                "invalid permission {raw:?}: use dot-separated lowercase segments like tool.filesystem.read (a final * is a wildcard)"
            ))
        }
    }

    /// The permission as a string slice.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether this grant covers `required`.
    pub fn covers(&self, required: &Permission) -> bool {
        let grant = &*self.0;
        if grant == "*" || grant == &*required.0 {
            return true;
        }
        grant
            .strip_suffix('*')
            .is_some_and(|prefix| required.0.starts_with(prefix))
    }
}

impl fmt::Display for Permission {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for Permission {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

impl<'de> Deserialize<'de> for Permission {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw = String::deserialize(d)?;
        Self::parse(&raw).map_err(serde::de::Error::custom)
    }
}

impl schemars::JsonSchema for Permission {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Permission".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        // The rule of [`Permission::parse`].
        schemars::json_schema!({
            "type": "string",
            "maxLength": 128,
            "pattern": r"^(\*|[a-z0-9_-]+(\.[a-z0-9_-]+)*(\.\*)?)$",
            "description": "Dot-separated lowercase segments like `tool.filesystem.read`; as a grant, a final `*` is a wildcard (`tool.filesystem.*`, or `*` for all)."
        })
    }
}

/// A `host:port` allow-list entry (a command tool's or an MCP server's `allowed_hosts`): a DNS
/// name or IPv4 address, lowercased, and a port 1-65535; `None` when it is not one.
pub fn parse_host_port(s: &str) -> Option<(String, u16)> {
    let (host, port) = s.rsplit_once(':')?;
    let port: u16 = port.parse().ok().filter(|p| *p > 0)?;
    let ok = !host.is_empty()
        && host.len() <= 253
        && host.split('.').all(|l| {
            !l.is_empty()
                && l.len() <= 63
                && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
        });
    ok.then(|| (host.to_ascii_lowercase(), port))
}

#[cfg(test)]
mod tests {
    use super::parse_host_port;

    #[test]
    fn host_port_entries_are_names_or_ipv4_with_a_port() {
        assert_eq!(
            parse_host_port("API.example.com:443"),
            Some(("api.example.com".to_owned(), 443))
        );
        assert_eq!(
            parse_host_port("10.0.0.7:8080"),
            Some(("10.0.0.7".to_owned(), 8080))
        );
        for bad in [
            "example.com",
            "example.com:0",
            "example.com:70000",
            ":443",
            "a..b:1",
            "a b:1",
            "[::1]:443",
        ] {
            assert_eq!(parse_host_port(bad), None, "{bad}");
        }
    }
}
