//! `toolgate install CLIENT` on the built binary with a fresh `HOME`: each client's entry and
//! file, merging into an existing file with a backup, idempotence, refusals that change nothing,
//! and an MCP session started from exactly the written entry.
#![cfg(test)]

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::{Value, json};
use toolgate_test_support::cli::Toolgate;

const BIN: &str = env!("CARGO_BIN_EXE_toolgate");

/// A fresh home, a work folder (the file root) and a database, all under one temp dir.
struct Home {
    dir: tempfile::TempDir,
}

impl Home {
    fn new() -> Self {
        let home = Self {
            dir: tempfile::tempdir().unwrap(),
        };
        std::fs::create_dir_all(home.home()).unwrap();
        std::fs::create_dir_all(home.work()).unwrap();
        std::fs::write(home.work().join("notes.txt"), "from the work folder\n").unwrap();
        home
    }

    fn home(&self) -> PathBuf {
        self.dir.path().join("home")
    }

    fn work(&self) -> PathBuf {
        self.dir.path().join("work")
    }

    fn run(&self, args: &[&str]) -> Output {
        Toolgate::new(BIN, self.work())
            .with_sqlite(self.dir.path().join("t.db"))
            .command()
            .env("HOME", self.home())
            .env_remove("XDG_CONFIG_HOME")
            .args(["--root", self.work().to_str().unwrap()])
            .args(args)
            .output()
            .unwrap()
    }

    fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(out.status.success(), "{args:?}: {out:?}");
        String::from_utf8(out.stdout).unwrap()
    }

    /// `--print`'s stderr (where the entry goes) and stdout (the entry, as JSON).
    fn print(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(out.status.success(), "{args:?}: {out:?}");
        let stdout = String::from_utf8(out.stdout).unwrap();
        serde_json::from_str::<Value>(&stdout).expect("--print writes only JSON on stdout");
        format!("{}{stdout}", String::from_utf8_lossy(&out.stderr))
    }

    /// `text` with this run's paths replaced by names, for snapshots.
    fn stable(&self, text: &str) -> String {
        let bin = std::fs::canonicalize(BIN).unwrap();
        text.replace(&bin.display().to_string(), "[BIN]")
            .replace(&self.home().display().to_string(), "[HOME]")
            .replace(&self.dir.path().display().to_string(), "[TMP]")
    }

    fn backups(&self, dir: &Path) -> Vec<PathBuf> {
        let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
            .unwrap()
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.to_string_lossy().contains(".toolgate-backup-"))
            .collect();
        found.sort();
        found
    }
}

#[test]
fn print_shows_each_clients_entry_in_its_own_format_and_file() {
    let home = Home::new();
    let mut shown = String::new();
    for client in [
        "claude-desktop",
        "claude-code",
        "cursor",
        "vscode",
        "windsurf",
    ] {
        shown.push_str(&home.print(&["install", client, "--print"]));
    }
    for client in ["claude-code", "cursor", "vscode", "windsurf"] {
        shown.push_str(&home.print(&[
            "install",
            client,
            "--print",
            "--http",
            "http://127.0.0.1:7878/mcp",
            "--token",
            "tok",
        ]));
    }
    insta::assert_snapshot!(home.stable(&shown));
    // --print writes nothing.
    assert_eq!(std::fs::read_dir(home.home()).unwrap().count(), 0);
}

#[test]
fn cursor_install_keeps_other_entries_backs_up_and_changes_nothing_the_second_time() {
    let home = Home::new();
    let file = home.home().join(".cursor").join("mcp.json");
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    let before = json!({
        "mcpServers": {"other": {"command": "/usr/bin/other", "args": ["x"]}},
        "someSetting": true
    });
    std::fs::write(&file, serde_json::to_string_pretty(&before).unwrap()).unwrap();

    let first = home.ok(&["install", "cursor"]);
    assert!(
        first.starts_with("Added server \"toolgate\" in "),
        "{first}"
    );
    let written: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    assert_eq!(
        written["mcpServers"]["other"],
        before["mcpServers"]["other"]
    );
    assert_eq!(written["someSetting"], true);
    let entry = &written["mcpServers"]["toolgate"];
    assert_eq!(
        entry["command"],
        std::fs::canonicalize(BIN).unwrap().to_str().unwrap()
    );
    let backups = home.backups(file.parent().unwrap());
    assert_eq!(backups.len(), 1, "{backups:?}");
    assert_eq!(
        serde_json::from_str::<Value>(&std::fs::read_to_string(&backups[0]).unwrap()).unwrap(),
        before
    );

    let bytes = std::fs::read(&file).unwrap();
    let second = home.ok(&["install", "cursor"]);
    assert!(
        second.contains("already up to date; nothing written"),
        "{second}"
    );
    assert_eq!(std::fs::read(&file).unwrap(), bytes);
    assert_eq!(home.backups(file.parent().unwrap()).len(), 1);

    // Other options replace the entry (and back up again).
    let third = home.ok(&["install", "cursor", "--http", "http://127.0.0.1:7878/mcp"]);
    assert!(third.starts_with("Replaced server \"toolgate\""), "{third}");
    let written: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    assert_eq!(
        written["mcpServers"]["toolgate"],
        json!({"url": "http://127.0.0.1:7878/mcp"})
    );
    assert_eq!(home.backups(file.parent().unwrap()).len(), 2);
}

#[test]
fn a_file_that_is_not_plain_json_or_a_wrong_request_changes_nothing() {
    let home = Home::new();
    // VS Code allows comments in mcp.json; rewriting would drop them, so it is refused.
    let file = home
        .home()
        .join(".config")
        .join("Code")
        .join("User")
        .join("mcp.json");
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    let text = "{\n  // my servers\n  \"servers\": {}\n}\n";
    std::fs::write(&file, text).unwrap();
    let out = home.run(&["install", "vscode"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("is not plain JSON"), "{err}");
    assert!(err.contains("--print"), "{err}");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), text);
    assert!(home.backups(file.parent().unwrap()).is_empty());

    let out = home.run(&[
        "install",
        "claude-desktop",
        "--http",
        "http://127.0.0.1:7878/mcp",
    ]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("only starts local servers"), "{err}");

    let out = home.run(&["install", "cursor", "--token", "t"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(!home.home().join(".cursor").exists());
}

#[test]
fn an_mcp_session_started_from_exactly_the_written_entry_lists_and_calls_tools() {
    let home = Home::new();
    home.ok(&["install", "claude-desktop"]);
    let file = home
        .home()
        .join(".config")
        .join("Claude")
        .join("claude_desktop_config.json");
    let config: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    let entry = &config["mcpServers"]["toolgate"];
    // Started as a client starts it: its own working directory (here `/`), nothing of
    // toolgate's environment but what the entry says, and HOME.
    let mut command = Command::new(entry["command"].as_str().unwrap());
    command
        .args(
            entry["args"]
                .as_array()
                .unwrap()
                .iter()
                .map(|a| a.as_str().unwrap()),
        )
        .env_clear()
        .env("HOME", home.home())
        .current_dir("/");
    for (name, value) in entry["env"].as_object().unwrap() {
        command.env(name, value.as_str().unwrap());
    }
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut ask = |message: Value| -> Value {
        writeln!(stdin, "{message}").unwrap();
        if message.get("id").is_none() {
            return Value::Null;
        }
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        serde_json::from_str(&line).unwrap()
    };
    let init = ask(
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "installed-entry", "version": "1"}}}),
    );
    assert_eq!(init["result"]["protocolVersion"], "2025-06-18", "{init}");
    ask(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    let list = ask(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}));
    let names: Vec<&str> = list["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(names.contains(&"read_file"), "{names:?}");
    // The file tools are jailed to the folder install was run with, though the client started
    // toolgate in `/`.
    let call = ask(
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
        "name": "read_file", "arguments": {"path": "notes.txt"}}}),
    );
    assert_eq!(call["result"]["isError"], false, "{call}");
    assert!(
        call["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("from the work folder"),
        "{call}"
    );
    drop(stdin);
    assert!(child.wait().unwrap().success());
}
