//! The plan in force on the command line (seed 003 §3.2): `tools list`, `tools show`, `tools
//! export` and `call` see exactly the plan's built-ins (a hidden one is "not found", like a tool
//! that does not exist), and `tools validate`/`add` hold custom schemas to the plan's JSON
//! Schema level.
#![cfg(test)]

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Output;

use serde_json::Value;
use toolgate_test_support::cli::Toolgate;

const BIN: &str = env!("CARGO_BIN_EXE_toolgate");

/// The ten built-ins and each plan's share, as the README's plan table states them.
const ALL: [&str; 10] = [
    "calculator",
    "read_file",
    "write_file",
    "list_directory",
    "delete_file",
    "web_search",
    "wikipedia",
    "web_scraper",
    "todo_manager",
    "validate_output",
];
const FIVE: [&str; 5] = [
    "calculator",
    "read_file",
    "list_directory",
    "todo_manager",
    "validate_output",
];
const TEAMS_EXTRA: [&str; 3] = ["write_file", "delete_file", "wikipedia"];

fn expected(plan: &str) -> BTreeSet<String> {
    let mut set: BTreeSet<String> = FIVE.iter().map(|s| (*s).to_owned()).collect();
    if plan == "teams" || plan == "enterprise" {
        set.extend(TEAMS_EXTRA.iter().map(|s| (*s).to_owned()));
    }
    if plan == "enterprise" {
        set.extend(ALL.iter().map(|s| (*s).to_owned()));
    }
    set
}

fn run<S: AsRef<std::ffi::OsStr>>(dir: &Path, args: &[S]) -> Output {
    Toolgate::new(BIN, dir)
        .with_sqlite("state/toolgate.db")
        .output(args)
}

fn json(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}): {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

fn builtin_names(items: &[Value]) -> BTreeSet<String> {
    items
        .iter()
        .filter_map(|t| t["name"].as_str())
        .filter(|n| ALL.contains(n))
        .map(str::to_owned)
        .collect()
}

#[test]
fn each_plan_lists_shows_exports_and_calls_only_its_built_ins() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("hello.txt"), "hi\n").unwrap();
    for plan in ["core", "writer_pro", "teams", "enterprise"] {
        let config = format!("{plan}.toml");
        std::fs::write(d.join(&config), format!("plan = \"{plan}\"\n")).unwrap();
        let base = ["--config", config.as_str()];
        let with = |rest: &[&str]| -> Vec<String> {
            base.iter().chain(rest).map(|s| (*s).to_owned()).collect()
        };
        let want = expected(plan);
        assert_eq!(
            want.len(),
            [5, 5, 8, 10][["core", "writer_pro", "teams", "enterprise"]
                .iter()
                .position(|p| *p == plan)
                .unwrap()]
        );

        let out = run(d, &with(&["tools", "list", "--json"]));
        assert!(out.status.success(), "{out:?}");
        let listed = builtin_names(json(&out)["tools"].as_array().unwrap());
        assert_eq!(listed, want, "{plan}: tools list");

        let out = run(d, &with(&["tools", "export", "--format", "mcp"]));
        assert!(out.status.success(), "{out:?}");
        let exported = builtin_names(json(&out)["tools"].as_array().unwrap());
        assert_eq!(exported, want, "{plan}: tools export");

        // A built-in of every plan runs.
        let out = run(
            d,
            &with(&[
                "call",
                "read_file",
                "--args",
                r#"{"path": "hello.txt"}"#,
                "--json",
            ]),
        );
        assert!(out.status.success(), "{plan}: {out:?}");

        // The others are not found, exactly like a tool that does not exist.
        let unknown = run(d, &with(&["call", "no_such_tool", "--json"]));
        let unknown_show = run(d, &with(&["tools", "show", "no_such_tool"]));
        for name in ALL.iter().filter(|n| !want.contains(**n)) {
            let out = run(
                d,
                &with(&[
                    "call",
                    name,
                    "--args",
                    r#"{"path": "x.txt", "content": "x"}"#,
                    "--json",
                ]),
            );
            assert_eq!(
                out.status.code(),
                unknown.status.code(),
                "{plan}: call {name}"
            );
            let env = json(&out);
            assert_eq!(env["errorKind"], "not_found", "{plan}: {env}");
            assert_eq!(env["attempts"], 0);
            assert!(
                env["error"]
                    .as_str()
                    .unwrap()
                    .starts_with(&format!("Tool not found: {name}.")),
                "{env}"
            );
            let out = run(d, &with(&["tools", "show", name]));
            assert_eq!(
                out.status.code(),
                unknown_show.status.code(),
                "{plan}: show {name}"
            );
            assert_eq!(
                String::from_utf8_lossy(&out.stderr),
                String::from_utf8_lossy(&unknown_show.stderr).replace("no_such_tool", name)
            );
        }
        if plan == "core" {
            // write_file is outside core: nothing was written.
            assert!(!d.join("x.txt").exists());
        }
    }
}

#[test]
fn tools_validate_holds_schemas_to_the_plans_level() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    for plan in ["writer_pro", "teams", "enterprise"] {
        std::fs::write(
            d.join(format!("{plan}.toml")),
            format!("plan = \"{plan}\"\n"),
        )
        .unwrap();
    }
    std::fs::write(
        d.join("advanced.json"),
        r#"{"name": "code_lookup", "description": "Looks up an airport by its three-letter code.",
            "input_schema": {"type": "object", "properties": {"code": {"type": "string", "pattern": "^[A-Z]{3}$"}}, "required": ["code"]}}"#,
    )
    .unwrap();
    std::fs::write(
        d.join("full.json"),
        r#"{"name": "ticket_lookup", "description": "Looks up a support ticket by its identifier.",
            "input_schema": {"type": "object", "properties": {"id": {"type": "string", "format": "ticket-id"}}, "required": ["id"]}}"#,
    )
    .unwrap();
    let validate = |plan: &str, file: &str| {
        run(
            d,
            &[
                "--config",
                &format!("{plan}.toml"),
                "tools",
                "validate",
                file,
            ],
        )
    };
    let refused = |out: &Output, lowest: &str| {
        assert_eq!(out.status.code(), Some(1), "{out:?}");
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(text.contains("schema.plan_level"), "{text}");
        assert!(text.contains(&format!("plan = \"{lowest}\"")), "{text}");
    };
    refused(&validate("writer_pro", "advanced.json"), "teams");
    refused(&validate("writer_pro", "full.json"), "enterprise");
    assert!(validate("teams", "advanced.json").status.success());
    refused(&validate("teams", "full.json"), "enterprise");
    assert!(validate("enterprise", "full.json").status.success());
    // Adding is refused the same way, and nothing is stored.
    let out = run(
        d,
        &[
            "--config",
            "writer_pro.toml",
            "tools",
            "add",
            "advanced.json",
        ],
    );
    refused(&out, "teams");
    let out = run(
        d,
        &["--config", "enterprise.toml", "tools", "list", "--json"],
    );
    assert!(!String::from_utf8_lossy(&out.stdout).contains("code_lookup"));
}
