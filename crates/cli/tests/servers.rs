//! `toolgate servers …` end to end through the binary: the help teaches with examples, the
//! grammar refuses what makes no sense (exit 2), and against real MCP servers (the Python
//! fixture on the official SDK) the commands list, show, approve and remove.
#![cfg(test)]

use std::process::Output;

use toolgate_test_support::cli::Toolgate;

const BIN: &str = env!("CARGO_BIN_EXE_toolgate");

struct Scratch {
    dir: tempfile::TempDir,
}

impl Scratch {
    fn new() -> Self {
        Self {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    fn toolgate(&self) -> Toolgate {
        Toolgate::new(BIN, self.dir.path()).with_sqlite("state/toolgate.db")
    }

    fn run(&self, args: &[&str]) -> Output {
        self.toolgate()
            .command()
            .args(args)
            // The default database path (shown in --help) derives from it.
            .env("XDG_DATA_HOME", "/home/user/.local/share")
            .output()
            .unwrap()
    }
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn servers_help_teaches_with_examples() {
    let s = Scratch::new();
    let out = s.run(&["servers", "--help"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    insta::assert_snapshot!(text(&out.stdout));
    let out = s.run(&["servers", "add", "--help"]);
    assert_eq!(out.status.code(), Some(0));
    let help = text(&out.stdout);
    for needle in [
        "--command <PROG>",
        "--url <URL>",
        "--approve",
        "--isolation",
        "[ARGS]...",
    ] {
        assert!(help.contains(needle), "{needle} missing from:\n{help}");
    }
}

#[test]
fn the_grammar_refuses_what_makes_no_sense() {
    let s = Scratch::new();
    for args in [
        // approve needs a tool or --all, not both
        &["servers", "approve", "py"][..],
        &["servers", "approve", "py", "echo", "--all"],
        // add needs exactly one of --command and --url
        &["servers", "add", "py"],
        &[
            "servers",
            "add",
            "py",
            "--command",
            "/usr/bin/python3",
            "--url",
            "http://127.0.0.1:9/mcp",
        ],
        // arguments and isolation belong to a command
        &[
            "servers",
            "add",
            "py",
            "--url",
            "http://127.0.0.1:9/mcp",
            "--",
            "x",
        ],
        &[
            "servers",
            "add",
            "py",
            "--url",
            "http://127.0.0.1:9/mcp",
            "--isolation",
            "strict",
        ],
        // import writes to a config file or to the store, not both
        &[
            "servers", "import", "x.json", "--write", "t.toml", "--store",
        ],
    ] {
        let out = s.run(args);
        assert_eq!(
            out.status.code(),
            Some(2),
            "{args:?} should be a usage error (exit 2): {}",
            text(&out.stderr)
        );
    }
}

#[test]
fn with_no_servers_the_list_says_how_to_add_one_and_unknown_names_exit_1() {
    let s = Scratch::new();
    let out = s.run(&["servers", "list"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).starts_with("No servers."),
        "{}",
        text(&out.stdout)
    );
    let out = s.run(&["servers", "list", "--json"]);
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json, serde_json::json!({ "servers": [] }));
    for args in [
        &["servers", "show", "nope"][..],
        &["servers", "tools", "nope"],
        &["servers", "approve", "nope", "--all"],
        &["servers", "restart", "nope"],
        &["servers", "rm", "nope"],
    ] {
        let out = s.run(args);
        assert_eq!(
            out.status.code(),
            Some(1),
            "{args:?}: {}",
            text(&out.stderr)
        );
        let err = text(&out.stderr);
        assert!(
            err.contains("No server named nope") && err.contains("toolgate servers list"),
            "{args:?}: the message names the server and the way to list them: {err}"
        );
    }
}
