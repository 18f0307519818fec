//! Paging for the read tools: the `limit` argument and the opaque `cursor` / `nextCursor` token.
//!
//! A cursor is `base64url(JSON) "." base64url(check)`, where the JSON is
//! `{"v": 1, "t": tool, "s": scope, "p": position}`: the format version, the tool that made
//! it, what it pages (a path, a plan, a file's digest: each tool checks its own scope against
//! the call) and where the next page starts. `check` is the start of a SHA-256 of the JSON, so
//! a cursor that was cut, edited or made up is refused as `validation` instead of being
//! half-understood. A cursor is not a secret and grants nothing: the tools check every call's
//! path, plan and permissions as they would without one, so forging a valid-looking cursor
//! only moves where a page starts.

use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};
use toolgate_core::{ParamType, Parameter, ToolError};

/// The cursor format's version; a cursor of another version is refused with a clear message.
const VERSION: u64 = 1;

/// Bytes of the SHA-256 kept as the cursor's check.
const CHECK_BYTES: usize = 9;

/// Longest cursor accepted, in bytes (a cursor of a long path stays far below it).
pub(crate) const MAX_CURSOR_BYTES: usize = 16 * 1024;

/// A decoded cursor: what it pages and where the next page starts.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Cursor {
    pub scope: Map<String, Value>,
    pub position: Value,
}

impl Cursor {
    /// A string field of the scope.
    pub fn scope_str(&self, key: &str) -> Option<&str> {
        self.scope.get(key).and_then(Value::as_str)
    }
}

/// The token for the page of `tool` over `scope` that starts at `position`.
pub(crate) fn encode(tool: &str, scope: Map<String, Value>, position: Value) -> String {
    let payload = json!({"v": VERSION, "t": tool, "s": scope, "p": position}).to_string();
    let check = check(payload.as_bytes());
    format!(
        "{}.{}",
        crate::base64::url(payload.as_bytes()),
        crate::base64::url(&check[..CHECK_BYTES])
    )
}

/// Reads the `cursor` argument of `tool` (absent or null: the first page).
pub(crate) fn cursor_arg(args: &Value, tool: &str) -> Result<Option<Cursor>, ToolError> {
    match args.get("cursor") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(raw)) => decode(tool, raw).map(Some),
        Some(_) => Err(ToolError::validation(format!(
            "Argument cursor must be a string: pass the nextCursor of the previous {tool} result unchanged, or leave cursor out to start from the beginning"
        ))),
    }
}

/// Decodes a token made by [`encode`] for `tool`.
pub(crate) fn decode(tool: &str, raw: &str) -> Result<Cursor, ToolError> {
    let garbage = || {
        ToolError::validation(format!(
            "cursor is not a cursor of {tool} (it was cut, changed or made up): pass the nextCursor of the previous {tool} result unchanged, or leave cursor out to start from the beginning"
        ))
    };
    if raw.len() > MAX_CURSOR_BYTES {
        return Err(garbage());
    }
    let (body, sum) = raw.split_once('.').ok_or_else(garbage)?;
    let payload = crate::base64::decode_url(body).ok_or_else(garbage)?;
    let sum = crate::base64::decode_url(sum).ok_or_else(garbage)?;
    if sum.as_slice() != &check(&payload)[..CHECK_BYTES] {
        return Err(garbage());
    }
    let Ok(Value::Object(mut fields)) = serde_json::from_slice::<Value>(&payload) else {
        return Err(garbage());
    };
    if fields.get("v").and_then(Value::as_u64) != Some(VERSION) {
        return Err(ToolError::validation(format!(
            "cursor comes from another version of toolgate: leave cursor out to start {tool} from the beginning"
        )));
    }
    match fields.get("t").and_then(Value::as_str) {
        Some(t) if t == tool => {}
        Some(other) => {
            return Err(ToolError::validation(format!(
                "cursor belongs to {other}, not to {tool}: pass the nextCursor of the previous {tool} result, or leave cursor out to start from the beginning"
            )));
        }
        None => return Err(garbage()),
    }
    let Some(Value::Object(scope)) = fields.remove("s") else {
        return Err(garbage());
    };
    let position = fields.remove("p").ok_or_else(garbage)?;
    Ok(Cursor { scope, position })
}

/// The `validation` error for a cursor used with other arguments than the ones it was made for.
pub(crate) fn mismatch(tool: &str, what: &str) -> ToolError {
    ToolError::validation(format!(
        "cursor was made for {what}: call {tool} with the same arguments as the call that returned it, or leave cursor out to start from the beginning"
    ))
}

/// The optional `limit` argument: a whole number from 1 to `max`, `default` when absent.
pub(crate) fn limit_arg(args: &Value, default: usize, max: usize) -> Result<usize, ToolError> {
    let raw = match args.get("limit") {
        None | Some(Value::Null) => return Ok(default),
        Some(v) => v,
    };
    raw.as_u64()
        .and_then(|n| usize::try_from(n).ok())
        .filter(|n| (1..=max).contains(n))
        .ok_or_else(|| {
            ToolError::validation(format!(
                "Argument limit must be a whole number from 1 to {max}, not {raw}; leave it out for {default}"
            ))
        })
}

/// The `limit` parameter: most `unit` per page, 1 to `max`, `default` when left out.
pub(crate) fn limit_param(default: usize, max: usize, unit: &str) -> Parameter {
    Parameter::new("limit", ParamType::Integer)
        .description(format!(
            "Most {unit} to return (1-{max}, default {default}); when there are more, the result has nextCursor"
        ))
        .default_value(json!(default))
        .schema(json!({"minimum": 1, "maximum": max}))
}

/// The `cursor` parameter.
pub(crate) fn cursor_param() -> Parameter {
    Parameter::new("cursor", ParamType::String)
        .description(
            "nextCursor of the previous result, unchanged, to get the next page (with the same other arguments); leave it out for the first page",
        )
        .schema(json!({"minLength": 1, "maxLength": MAX_CURSOR_BYTES}))
}

/// The JSON Schema of a `nextCursor` output field.
pub(crate) fn next_cursor_schema() -> Value {
    json!({
        "type": "string",
        "description": "Present when there is more: pass it as cursor, with the same other arguments, to get the next page"
    })
}

/// The first bytes of SHA-256 over the payload, with a domain prefix.
fn check(payload: &[u8]) -> [u8; 32] {
    let mut hash = Sha256::new();
    hash.update(b"toolgate-cursor\0");
    hash.update(payload);
    hash.finalize().into()
}

/// Hex of the SHA-256 of `bytes` (a file's digest in a cursor's scope).
pub(crate) fn digest_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .take(16)
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use toolgate_core::ErrorKind;

    fn scope(path: &str) -> Map<String, Value> {
        let mut m = Map::new();
        m.insert("path".into(), json!(path));
        m
    }

    #[test]
    fn base64url_round_trips_and_refuses_other_text() {
        for len in 0..40 {
            let bytes: Vec<u8> = (0..len).map(|i| (i * 37 + 11) as u8).collect();
            let text = crate::base64::url(&bytes);
            assert!(!text.contains(['+', '/', '=']), "{text}");
            assert_eq!(crate::base64::decode_url(&text), Some(bytes));
        }
        assert_eq!(crate::base64::url(b"foobar"), "Zm9vYmFy");
        assert_eq!(crate::base64::url(&[0xfb, 0xff]), "-_8");
        assert_eq!(crate::base64::decode_url("Zm9v+"), None);
        assert_eq!(crate::base64::decode_url("Zg=="), None);
        assert_eq!(
            crate::base64::decode_url("Zh"),
            None,
            "non-zero unused bits"
        );
        assert_eq!(crate::base64::decode_url("Z"), None);
    }

    #[test]
    fn a_cursor_round_trips_for_its_tool_only() {
        let token = encode("list_directory", scope("docs"), json!("b.md"));
        let back = decode("list_directory", &token).unwrap();
        assert_eq!(back.scope_str("path"), Some("docs"));
        assert_eq!(back.position, json!("b.md"));
        let err = decode("read_file", &token).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Validation);
        assert!(err.message().contains("belongs to list_directory"), "{err}");
    }

    #[test]
    fn changed_cut_and_made_up_cursors_are_refused() {
        let token = encode("read_file", scope("a.txt"), json!(2001));
        let (body, sum) = token.split_once('.').unwrap();
        // The same structure with another position, but the old check.
        let forged_body = crate::base64::url(
            json!({"v": 1, "t": "read_file", "s": scope("a.txt"), "p": 1})
                .to_string()
                .as_bytes(),
        );
        for bad in [
            format!("{forged_body}.{sum}"),
            body.to_owned(),
            token[..token.len() - 1].to_owned(),
            format!("x{token}"),
            "not a cursor".to_owned(),
            String::new(),
            "a".repeat(MAX_CURSOR_BYTES + 1),
        ] {
            let err = decode("read_file", &bad).unwrap_err();
            assert_eq!(err.kind(), ErrorKind::Validation, "{bad}");
            assert!(
                err.message().contains("leave cursor out"),
                "{bad}: {}",
                err.message()
            );
        }
    }

    #[test]
    fn limits_are_checked() {
        assert_eq!(limit_arg(&json!({}), 10, 20).unwrap(), 10);
        assert_eq!(limit_arg(&json!({"limit": 20}), 10, 20).unwrap(), 20);
        for bad in [json!(0), json!(21), json!(-1), json!(1.5), json!("5")] {
            let err = limit_arg(&json!({ "limit": bad }), 10, 20).unwrap_err();
            assert!(err.message().contains("from 1 to 20"), "{err}");
        }
    }

    /// Cursors are not signed with a secret (anyone can build one), so a forged cursor must get
    /// nothing a plain call would not: the jail still decides.
    #[tokio::test]
    async fn a_forged_cursor_for_a_path_outside_the_root_is_still_denied() {
        use std::sync::Arc;
        use toolgate_core::{Principal, Tool, ToolContext, ToolName};

        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("root");
        std::fs::create_dir_all(&root).unwrap();
        std::fs::write(tmp.path().join("secret.txt"), "top\nsecret\n").unwrap();
        let jail = Arc::new(crate::Jail::new(&root).unwrap());
        let ctx = || ToolContext::detached(ToolName::parse("x").unwrap(), Principal::local());

        let mut list_scope = scope("..");
        list_scope.insert("recursive".into(), json!(false));
        let forged = encode("list_directory", list_scope, json!(""));
        let list = crate::ListDirectory::new(Arc::clone(&jail));
        let err = list
            .call(json!({"path": "..", "cursor": forged}), ctx())
            .await
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Authorization, "{err}");

        let mut read_scope = scope("../secret.txt");
        read_scope.insert("digest".into(), json!(digest_hex(b"top\nsecret\n")));
        let forged = encode("read_file", read_scope, json!(1));
        let read = crate::ReadFile::new(jail);
        let err = read
            .call(json!({"path": "../secret.txt", "cursor": forged}), ctx())
            .await
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Authorization, "{err}");
    }
}
