//! Names of upstream tools in toolgate: `SERVER__TOOL`, sanitised, with the per-server prefix modes and collision checks.
//!
//! An upstream may name its tools anything (`read-file`, `getTinyImage`, `Files.Search`);
//! toolgate's rule is snake_case `^[a-z][a-z0-9_]*$`, at most 64 characters, not a reserved word.
//! [`sanitize`] turns an upstream name into the tool part by that rule, and [`assign`] gives each
//! of a server's tools its toolgate name by the server's [`PrefixMode`], refusing collisions
//! (with another source, or between two upstream names that sanitise alike) with a message that
//! names both sources and the fix.

use sha2::{Digest, Sha256};
use toolgate_core::{MAX_NAME_LEN, RESERVED_NAMES, ToolName};

use crate::GatewayError;
use crate::config::{PrefixMode, ServerName};

/// The separator between the server and the tool in `SERVER__TOOL`.
pub const SEPARATOR: &str = "__";

/// Hex digits of the hash suffix that keeps a shortened name unique.
const HASH_CHARS: usize = 8;

/// Lowercase ASCII letters and digits of `raw`, every other run of characters (and each
/// lower-to-upper case change, as in `camelCase`) turned into a single `_`, with no `_` at
/// either end. May be empty or start with a digit.
pub(crate) fn snake_words(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len());
    let mut prev_lower = false;
    for c in raw.chars() {
        if c.is_ascii_uppercase() {
            if prev_lower {
                out.push('_');
            }
            out.push(c.to_ascii_lowercase());
            prev_lower = false;
        } else if c.is_ascii_lowercase() || c.is_ascii_digit() {
            out.push(c);
            prev_lower = true;
        } else {
            if !out.is_empty() && !out.ends_with('_') {
                out.push('_');
            }
            prev_lower = false;
        }
    }
    out.trim_end_matches('_').to_owned()
}

/// Like [`snake_words`] without splitting `camelCase` (`GitHub` → `github`): for server names.
pub(crate) fn snake(raw: &str) -> String {
    snake_words(&raw.to_ascii_lowercase())
}

/// The tool part of an upstream tool's toolgate name: the upstream name's lowercase ASCII
/// letters and digits, every other run of characters (and each `camelCase` hump) turned into a
/// single `_`, none at either end; `tool_…` before a leading digit, `tool` when nothing usable is left. Not shortened (see
/// [`prefixed`] and [`bare`]).
pub fn sanitize(upstream: &str) -> String {
    let mut name = snake_words(upstream);
    if name.is_empty() {
        name.push_str("tool");
    } else if name.starts_with(|c: char| c.is_ascii_digit()) {
        name.insert_str(0, "tool_");
    }
    name
}

/// `name` cut to `max` characters when longer, ending in `_` and a short hash of the upstream
/// name so that two long names with the same beginning stay apart.
fn fit(name: String, upstream: &str, max: usize) -> String {
    if name.len() <= max {
        return name;
    }
    let digest = Sha256::digest(upstream.as_bytes());
    let hash: String = digest
        .iter()
        .take(HASH_CHARS / 2)
        .map(|b| format!("{b:02x}"))
        .collect();
    let keep = max.saturating_sub(HASH_CHARS + 1);
    let head = name[..keep].trim_end_matches('_');
    format!("{head}_{hash}")
}

/// `SERVER__TOOL` for the upstream tool `upstream`, shortened to 64 characters when needed.
pub fn prefixed(server: &ServerName, upstream: &str) -> String {
    let max = MAX_NAME_LEN
        .saturating_sub(server.as_str().len() + SEPARATOR.len())
        .max(HASH_CHARS + 2);
    format!(
        "{server}{SEPARATOR}{}",
        fit(sanitize(upstream), upstream, max)
    )
}

/// The bare toolgate name of the upstream tool `upstream`, shortened to 64 characters when needed
/// (it may be reserved; [`ToolName::parse`] says).
pub fn bare(upstream: &str) -> String {
    fit(sanitize(upstream), upstream, MAX_NAME_LEN)
}

/// How the runtime names a built-in tool as the owner of a taken name (`the built-in tool NAME`):
/// a collision with one says to change the server's side only, since built-ins cannot be renamed.
pub const BUILTIN_OWNER: &str = "the built-in tool";

/// Assigns a toolgate name to each of `upstream` (the server's tool names as `tools/list` gives
/// them, without the disabled ones), in order, by `mode`:
///
/// - `always`: `SERVER__TOOL`;
/// - `conditional`: the bare name unless it is reserved or taken, then `SERVER__TOOL`;
/// - `never`: the bare name; reserved or taken is refused.
///
/// `taken` says who else holds a name (a definition, a built-in, another server's tool) as a
/// phrase for messages ("the custom tool read_file"); it must not answer for this server's own
/// tools. Every collision is reported at once: a name taken elsewhere, and two upstream names
/// that become the same toolgate name.
pub fn assign(
    server: &ServerName,
    mode: PrefixMode,
    upstream: &[String],
    taken: &dyn Fn(&str) -> Option<String>,
) -> Result<Vec<(String, ToolName)>, GatewayError> {
    let mut problems = Vec::new();
    let mut chosen: Vec<(String, String)> = Vec::with_capacity(upstream.len());
    for up in upstream {
        let full = prefixed(server, up);
        let plain = bare(up);
        let reserved = RESERVED_NAMES.contains(&plain.as_str());
        let name = match mode {
            PrefixMode::Always => full,
            PrefixMode::Conditional if reserved || taken(&plain).is_some() => full,
            PrefixMode::Conditional => plain,
            PrefixMode::Never if reserved => {
                problems.push(format!(
                    "Upstream tool {up:?} of server {server} would be named {plain}, a word toolgate reserves ({}): set prefix = \"conditional\" or \"always\" on [servers.{server}]",
                    RESERVED_NAMES.join(", ")
                ));
                continue;
            }
            PrefixMode::Never => plain,
        };
        if let Some(owner) = taken(&name) {
            // A built-in tool cannot be renamed: only the server's side can change.
            let other = if owner.starts_with(BUILTIN_OWNER) {
                String::new()
            } else {
                format!(", or rename {owner}")
            };
            let fix = if mode == PrefixMode::Never {
                format!("set prefix = \"always\" on [servers.{server}]{other}")
            } else {
                format!("rename the server (its name is the prefix){other}")
            };
            problems.push(format!(
                "Tool name {name} is already used by {owner}, so upstream tool {up:?} of server {server} cannot take it: {fix}"
            ));
            continue;
        }
        if let Some((other, _)) = chosen.iter().find(|(_, n)| *n == name) {
            problems.push(format!(
                "Upstream tools {other:?} and {up:?} of server {server} both become {name} in toolgate: hide one with [servers.{server}.tools.{}] disabled = true",
                toml_key(up)
            ));
            continue;
        }
        chosen.push((up.clone(), name));
    }
    if !problems.is_empty() {
        return Err(GatewayError::Invalid(problems.join("; ")));
    }
    chosen
        .into_iter()
        .map(|(up, name)| match ToolName::parse(&name) {
            Ok(n) => Ok((up, n)),
            Err(p) => Err(GatewayError::Invalid(format!(
                "Upstream tool {up:?} of server {server} gives the invalid tool name {name:?} ({p:?})"
            ))),
        })
        .collect()
}

/// A TOML key as written in a table header: bare when it can be, quoted otherwise.
pub(crate) fn toml_key(key: &str) -> String {
    let bare = !key.is_empty()
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if bare {
        key.to_owned()
    } else {
        format!("{key:?}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server(name: &str) -> ServerName {
        ServerName::parse(name).unwrap()
    }

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    fn nobody(_: &str) -> Option<String> {
        None
    }

    #[test]
    fn upstream_names_are_sanitised_to_toolgate_s_rule() {
        for (raw, want) in [
            ("read_text_file", "read_text_file"),
            ("read-file", "read_file"),
            ("getTinyImage", "get_tiny_image"),
            ("Files.Search  ", "files_search"),
            ("__weird__name__", "weird_name"),
            ("2fa", "tool_2fa"),
            ("日本", "tool"),
            ("", "tool"),
            ("HTTPGet", "httpget"),
        ] {
            assert_eq!(sanitize(raw), want, "{raw:?}");
            assert!(ToolName::parse(&sanitize(raw)).is_ok(), "{raw:?}");
        }
    }

    #[test]
    fn long_names_are_cut_to_64_with_a_hash_that_keeps_them_apart() {
        let s = server("a_rather_long_server_name_here");
        let one = format!("{}_one", "x".repeat(80));
        let two = format!("{}_two", "x".repeat(80));
        let (a, b) = (prefixed(&s, &one), prefixed(&s, &two));
        assert_eq!(a.len(), 64, "{a}");
        assert!(a.len() <= 64 && b.len() <= 64);
        assert_ne!(a, b);
        assert!(a.starts_with("a_rather_long_server_name_here__xxx"));
        assert!(ToolName::parse(&a).is_ok() && ToolName::parse(&b).is_ok());
        // Stable: the same upstream name gives the same toolgate name.
        assert_eq!(a, prefixed(&s, &one));
        let long_bare = bare(&one);
        assert_eq!(long_bare.len(), 64);
        // Short names are untouched.
        assert_eq!(prefixed(&s, "echo"), "a_rather_long_server_name_here__echo");
    }

    #[test]
    fn always_prefixes_every_tool() {
        let got = assign(
            &server("everything"),
            PrefixMode::Always,
            &names(&["echo", "add", "longRunningOperation"]),
            &nobody,
        )
        .unwrap();
        let got: Vec<(&str, &str)> = got.iter().map(|(u, n)| (u.as_str(), n.as_str())).collect();
        assert_eq!(
            got,
            [
                ("echo", "everything__echo"),
                ("add", "everything__add"),
                ("longRunningOperation", "everything__long_running_operation"),
            ]
        );
    }

    #[test]
    fn conditional_prefixes_only_what_collides_or_is_reserved() {
        let taken = |n: &str| (n == "echo").then(|| "the built-in tool echo".to_owned());
        let got = assign(
            &server("everything"),
            PrefixMode::Conditional,
            &names(&["echo", "add", "run"]),
            &taken,
        )
        .unwrap();
        let got: Vec<&str> = got.iter().map(|(_, n)| n.as_str()).collect();
        assert_eq!(got, ["everything__echo", "add", "everything__run"]);
    }

    #[test]
    fn never_keeps_bare_names_and_refuses_collisions() {
        let got = assign(
            &server("files"),
            PrefixMode::Never,
            &names(&["read_text_file"]),
            &nobody,
        )
        .unwrap();
        assert_eq!(got[0].1.as_str(), "read_text_file");
        let taken = |n: &str| {
            (n == "read_text_file")
                .then(|| "upstream tool \"read_text_file\" of server docs".to_owned())
        };
        let err = assign(
            &server("files"),
            PrefixMode::Never,
            &names(&["read_text_file", "execute"]),
            &taken,
        )
        .unwrap_err();
        insta::assert_snapshot!("never_collisions", err.to_string().replace("; ", "\n"));
    }

    #[test]
    fn a_collision_names_both_sources_and_the_fix() {
        let taken =
            |n: &str| (n == "files__read").then(|| "the custom tool files__read".to_owned());
        let err = assign(
            &server("files"),
            PrefixMode::Always,
            &names(&["read"]),
            &taken,
        )
        .unwrap_err();
        assert_eq!(err.kind(), crate::GatewayErrorKind::Invalid);
        insta::assert_snapshot!("always_collision", err.to_string());
    }

    #[test]
    fn a_collision_with_a_built_in_only_asks_to_change_the_server() {
        let taken = |n: &str| (n == "calculator").then(|| format!("{BUILTIN_OWNER} calculator"));
        let err = assign(
            &server("conf"),
            PrefixMode::Never,
            &names(&["calculator"]),
            &taken,
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("set prefix = \"always\" on [servers.conf]"),
            "{err}"
        );
        assert!(!err.contains("rename the built-in"), "{err}");
    }

    #[test]
    fn two_upstream_names_that_sanitise_alike_collide() {
        for mode in [
            PrefixMode::Always,
            PrefixMode::Conditional,
            PrefixMode::Never,
        ] {
            let err = assign(
                &server("files"),
                mode,
                &names(&["read-file", "read_file", "readFile", "list"]),
                &nobody,
            )
            .unwrap_err()
            .to_string();
            assert!(err.contains("\"read-file\" and \"read_file\""), "{err}");
            assert!(err.contains("\"read-file\" and \"readFile\""), "{err}");
            assert!(!err.contains("list"), "{err}");
            if mode == PrefixMode::Always {
                insta::assert_snapshot!("sanitised_collision", err.replace("; ", "\n"));
            }
        }
    }
}
