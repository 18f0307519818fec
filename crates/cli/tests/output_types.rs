//! Output types kept in the store: `toolgate output-types add|list|show|rm`, and
//! `validate_output` checking against a stored type in a later process.
#![cfg(test)]

use std::path::Path;
use std::process::Output;

use serde_json::Value;
use toolgate_test_support::cli::Toolgate;

const BIN: &str = env!("CARGO_BIN_EXE_toolgate");

fn toolgate(dir: &Path, args: &[&str]) -> Output {
    Toolgate::new(BIN, dir).output(args)
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn a_stored_output_type_is_used_by_validate_output() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(
        d.join("ticket.json"),
        r#"{"description": "A support ticket.", "schema": {"type": "object", "required": ["title"], "properties": {"title": {"type": "string", "minLength": 3}}}}"#,
    )
    .unwrap();
    std::fs::write(d.join("broken.json"), r#"{"schema": {"type": 12}}"#).unwrap();

    let out = toolgate(d, &["output-types", "add", "ticket", "ticket.json"]);
    assert!(out.status.success(), "{}", text(&out));
    let out = toolgate(d, &["output-types", "add", "broken", "broken.json"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("broken"), "{}", text(&out));
    let out = toolgate(d, &["output-types", "list"]);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "ticket\tA support ticket.\n"
    );

    // A later process (a restart) checks against it.
    let out = toolgate(
        d,
        &[
            "call",
            "validate_output",
            "--args",
            r#"{"outputType": "ticket", "data": {"title": "x"}}"#,
            "--json",
        ],
    );
    let envelope: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(envelope["data"]["valid"], false, "{envelope}");
    assert!(
        envelope["data"]["errors"][0]
            .as_str()
            .unwrap()
            .contains("/title"),
        "{envelope}"
    );
    let out = toolgate(
        d,
        &[
            "call",
            "validate_output",
            "--args",
            r#"{"outputType": "ticket", "data": {"title": "Printer on fire"}}"#,
            "--json",
        ],
    );
    let envelope: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(envelope["data"]["valid"], true, "{envelope}");

    let out = toolgate(d, &["output-types", "rm", "ticket"]);
    assert!(out.status.success(), "{}", text(&out));
    let out = toolgate(d, &["output-types", "show", "ticket"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out).contains("Output type not found in the store: ticket"),
        "{}",
        text(&out)
    );
}
