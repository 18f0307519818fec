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
    let mut session = Session::start(&config["mcpServers"]["toolgate"], &home.home());
    let names = session.tool_names();
    assert!(names.contains(&"read_file".to_owned()), "{names:?}");
    // The file tools are jailed to the folder install was run with, though the client started
    // toolgate in the home folder.
    let text = session.call_text("read_file", json!({"path": "notes.txt"}));
    assert!(text.contains("from the work folder"), "{text}");
    session.close();
}

/// An MCP session over stdio with a server started exactly as a client starts an entry
/// (`command`, `args`, `env`): in the home folder, with nothing of the test's environment but
/// `HOME`.
struct Session {
    child: std::process::Child,
    stdin: std::process::ChildStdin,
    stdout: BufReader<std::process::ChildStdout>,
}

impl Session {
    fn start(entry: &Value, home: &Path) -> Self {
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
            .env("HOME", home)
            // Where desktop clients often start servers; unlike `/`, a stray relative path
            // lands in the test's own folder.
            .current_dir(home);
        if let Some(env) = entry["env"].as_object() {
            for (name, value) in env {
                command.env(name, value.as_str().unwrap());
            }
        }
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let mut session = Self {
            child,
            stdin,
            stdout,
        };
        let init = session.ask(
            json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "installed-entry", "version": "1"}}}),
        );
        assert_eq!(init["result"]["protocolVersion"], "2025-06-18", "{init}");
        session.tell(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        session
    }

    fn tell(&mut self, message: Value) {
        writeln!(self.stdin, "{message}").unwrap();
    }

    fn ask(&mut self, message: Value) -> Value {
        self.tell(message);
        let mut line = String::new();
        self.stdout.read_line(&mut line).unwrap();
        serde_json::from_str(&line).unwrap()
    }

    fn tool_names(&mut self) -> Vec<String> {
        let list = self.ask(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}));
        list["result"]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|t| t["name"].as_str().map(str::to_owned))
            .collect()
    }

    /// The text of a successful call's first content block.
    fn call_text(&mut self, tool: &str, arguments: Value) -> String {
        let call = self.ask(json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
            "params": {"name": tool, "arguments": arguments}}));
        assert_eq!(call["result"]["isError"], false, "{call}");
        call["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .to_owned()
    }

    fn close(mut self) {
        drop(self.stdin);
        assert!(self.child.wait().unwrap().success());
    }
}

/// The newcomer path, in an empty folder with a fresh `HOME`: `init`, `serve` in the
/// background, `install claude-desktop --print`, `install cursor` (twice: the second changes
/// nothing), and an MCP session started from exactly the written entry calling a tool.
#[test]
fn the_newcomer_path_from_init_to_a_client_calling_a_tool() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    let project = tmp.path().join("project");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::create_dir_all(&project).unwrap();
    let toolgate = |args: &[&str]| {
        let mut command = toolgate_test_support::cli::isolated(BIN);
        command
            .current_dir(&project)
            .env("HOME", &home)
            .env_remove("XDG_CONFIG_HOME")
            .env_remove("XDG_DATA_HOME")
            .args(args);
        command
    };
    let run = |args: &[&str]| {
        let out = toolgate(args).output().unwrap();
        assert!(out.status.success(), "{args:?}: {out:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    let said = run(&["init"]);
    assert!(said.contains("toolgate.toml"), "{said}");
    std::fs::write(
        project.join("workspace").join("hello.txt"),
        "hello, newcomer\n",
    )
    .unwrap();

    // serve in the background, on the project's config and database.
    let global = ["--config", "toolgate.toml", "--db", "sqlite:toolgate.db"];
    let mut serve = toolgate(&[&global[..], &["serve", "--http", "127.0.0.1:0"]].concat())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Kept open to the end: serve writes to stderr when it stops.
    let mut stderr = BufReader::new(serve.stderr.take().unwrap());
    let mut banner = String::new();
    stderr.read_line(&mut banner).unwrap();
    assert!(banner.contains("MCP http://127.0.0.1:"), "{banner}");

    let shown = run(&[&global[..], &["install", "claude-desktop", "--print"]].concat());
    let shown: Value = serde_json::from_str(&shown).unwrap();
    let args = shown["mcpServers"]["toolgate"]["args"].to_string();
    assert!(
        args.contains("toolgate.toml") && args.contains("toolgate.db"),
        "{args}"
    );
    assert!(
        !home.join(".config").join("Claude").exists(),
        "--print writes nothing"
    );

    let first = run(&[&global[..], &["install", "cursor"]].concat());
    assert!(first.starts_with("Created "), "{first}");
    let file = home.join(".cursor").join("mcp.json");
    let written = std::fs::read(&file).unwrap();
    let second = run(&[&global[..], &["install", "cursor"]].concat());
    assert!(second.contains("nothing written"), "{second}");
    assert_eq!(std::fs::read(&file).unwrap(), written);

    let config: Value = serde_json::from_slice(&written).unwrap();
    let entry = &config["mcpServers"]["toolgate"];
    // Every path in the entry is absolute: the client starts toolgate in a folder of its own.
    let args: Vec<&str> = entry["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    for pair in args.windows(2) {
        if ["--config", "--db", "--root", "--tools-dir"].contains(&pair[0]) {
            let path = pair[1].strip_prefix("sqlite:").unwrap_or(pair[1]);
            assert!(Path::new(path).is_absolute(), "{} {}", pair[0], pair[1]);
        }
    }
    assert!(
        args.contains(&"--config") && args.contains(&"--db"),
        "{args:?}"
    );
    let mut session = Session::start(entry, &home);
    let names = session.tool_names();
    for tool in ["utc_time", "read_file", "calculator"] {
        assert!(names.iter().any(|n| n == tool), "{tool} in {names:?}");
    }
    // The config's root (workspace/) jails the file tools.
    let text = session.call_text("read_file", json!({"path": "hello.txt"}));
    assert!(text.contains("hello, newcomer"), "{text}");
    session.close();

    let _ = Command::new("kill")
        .args(["-TERM", &serve.id().to_string()])
        .status();
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stderr, &mut rest).unwrap();
    assert!(serve.wait().unwrap().success(), "{rest}");
}
