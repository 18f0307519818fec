//! Exit codes of the `toolgate` binary that the other suites do not reach: a reader that closes
//! standard output early (`toolgate tools list | head -1`) ends the run quietly with 0.

#![cfg(test)]

use std::io::{BufRead, BufReader, Read};
use std::process::Stdio;

use toolgate_test_support::cli::Toolgate;

const BIN: &str = env!("CARGO_BIN_EXE_toolgate");

/// Reads one line of `args`' output, closes the pipe, and returns the exit code and stderr.
fn read_one_line_then_close(dir: &std::path::Path, args: &[&str]) -> (i32, String) {
    let mut child = Toolgate::new(BIN, dir)
        .with_sqlite("state/toolgate.db")
        .command()
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    assert!(!line.is_empty(), "no output from toolgate {args:?}");
    drop(stdout);
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    let status = child.wait().unwrap();
    (status.code().unwrap(), stderr)
}

#[test]
fn a_closed_stdout_exits_0_quietly() {
    let dir = tempfile::tempdir().unwrap();
    // Far more output than a pipe holds (64 KiB), so toolgate is still writing when the pipe
    // closes: 200 tools with long descriptions.
    let tools = dir.path().join("tools");
    std::fs::create_dir_all(&tools).unwrap();
    let description = "Looks up one thing and returns it; use it when the user asks. ".repeat(14);
    for i in 0..200 {
        let definition = serde_json::json!({
            "name": format!("lookup_{i:03}"),
            "description": description.trim(),
            "category": "knowledge",
            "parameters": [],
        });
        std::fs::write(
            tools.join(format!("lookup_{i:03}.json")),
            definition.to_string(),
        )
        .unwrap();
    }
    for args in [
        &["--tools-dir", "tools", "tools", "list", "--json"][..],
        &[
            "--tools-dir",
            "tools",
            "tools",
            "export",
            "--format",
            "openai",
        ][..],
    ] {
        let (code, stderr) = read_one_line_then_close(dir.path(), args);
        assert_eq!(code, 0, "toolgate {args:?} exited {code}: {stderr}");
        assert!(
            stderr.is_empty(),
            "toolgate {args:?} wrote to stderr: {stderr}"
        );
    }
}
