//! `toolgate serve` end to end on the built binary: the banner, a call over REST, graceful
//! SIGTERM with the call audited, MCP over stdio, and refusing a public address without
//! principals.
#![cfg(test)]

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Command, Stdio};
use std::time::Duration;

use toolgate_test_support::cli::{Toolgate, sqlite_url};

const BIN: &str = env!("CARGO_BIN_EXE_toolgate");

fn toolgate(dir: &std::path::Path) -> Command {
    let mut cmd = Toolgate::new(BIN, dir).with_sqlite("t.db").command();
    cmd.env("XDG_DATA_HOME", dir);
    cmd
}

fn http(addr: &str, method: &str, path: &str, body: &str) -> String {
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    response
}

/// A child's stderr read on a thread, so that a wait for it is bounded: a serve that hangs
/// fails the test with what it printed and the process tree instead of hanging the suite.
struct Lines(std::sync::mpsc::Receiver<String>);

impl Lines {
    const WAIT: Duration = Duration::from_secs(60);

    fn of(stderr: std::process::ChildStderr) -> Self {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Self(rx)
    }

    fn next_line(&self, child: &mut std::process::Child, what: &str) -> String {
        match self.0.recv_timeout(Self::WAIT) {
            Ok(line) => line,
            Err(e) => hung(child, what, &format!("{e:?}")),
        }
    }

    /// Every line until the last writer closes stderr.
    fn until_closed(&self, child: &mut std::process::Child, what: &str) -> String {
        let deadline = std::time::Instant::now() + Self::WAIT;
        let mut text = String::new();
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match self.0.recv_timeout(left) {
                Ok(line) => {
                    text.push_str(&line);
                    text.push('\n');
                }
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => return text,
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => hung(child, what, &text),
            }
        }
    }
}

fn hung(child: &mut std::process::Child, what: &str, seen: &str) -> ! {
    let tree = Command::new("ps")
        .args(["-eo", "pid,ppid,stat,etime,args", "--forest"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    let state = child.try_wait();
    let _ = child.kill();
    panic!(
        "waited {:?} for {what}; serve pid {} state {state:?}; stderr so far:\n{seen}\nprocesses:\n{tree}",
        Lines::WAIT,
        child.id()
    );
}

#[test]
fn serve_prints_where_everything_is_answers_and_stops_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let Serve {
        mut child,
        stderr,
        banner,
        addr,
    } = start_serve(dir.path(), Stdio::piped());
    assert!(banner.contains("MCP http://127.0.0.1:"), "{banner}");
    assert!(banner.contains("/mcp · REST http://127.0.0.1:"), "{banner}");
    // Every startup line names the file tools' root.
    let cwd = std::fs::canonicalize(dir.path()).unwrap();
    assert!(
        banner.contains(&format!("file root {}", cwd.display()))
            || banner.contains(&format!("file root {}", dir.path().display())),
        "{banner}"
    );
    assert!(
        banner.contains(&format!(
            "data sqlite:{}",
            dir.path().join("t.db").display()
        )),
        "{banner}"
    );
    let reply = http(
        &addr,
        "POST",
        "/v1/tools/calculator/call",
        r#"{"arguments": {"expression": "6*7"}}"#,
    );
    assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
    assert!(reply.contains(r#""data":{"result":42}"#), "{reply}");
    send_signal(child.id(), "-TERM");
    let rest = stderr.until_closed(&mut child, "serve to stop after SIGTERM");
    let exit = child.wait().unwrap();
    assert!(exit.success(), "{exit:?}: {rest}");
    assert!(rest.contains("shutting down"), "{rest}");
    assert!(rest.contains("toolgate stopped"), "{rest}");
    let mut out = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    assert!(
        out.is_empty(),
        "serve writes nothing on stdout over HTTP: {out}"
    );
    // The call is in the audit log after the restart.
    let audit = toolgate(dir.path())
        .args(["audit", "--json"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&audit.stdout);
    assert!(text.contains("\"tool\": \"calculator\""), "{text}");
}

fn send_signal(pid: u32, signal: &str) {
    let status = Command::new("kill")
        .args([signal, &pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

#[test]
fn serve_refuses_a_public_address_without_principals() {
    let dir = tempfile::tempdir().unwrap();
    let out = toolgate(dir.path())
        .args(["serve", "--http", "0.0.0.0:0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("without principals"), "{err}");
    assert!(err.contains("token_sha256"), "{err}");
}

#[test]
fn serve_stdio_speaks_only_mcp_on_stdout() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = toolgate(dir.path())
        .args(["serve", "--stdio"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    mcp_handshake(&mut stdin, "t", "1");
    writeln!(stdin, r#"{{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{{"name":"calculator","arguments":{{"expression":"1+"}}}}}}"#).unwrap();
    writeln!(stdin, r#"{{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{{"name":"nope","arguments":{{}}}}}}"#).unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut lines = Vec::new();
    for _ in 0..3 {
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        lines.push(
            serde_json::from_str::<serde_json::Value>(&line)
                .expect("every stdout line is JSON-RPC"),
        );
    }
    // Calls run concurrently: answers come in any order.
    lines.sort_by_key(|l| l["id"].as_i64());
    drop(stdin);
    let exit = child.wait().unwrap();
    assert!(exit.success());
    assert_eq!(lines[0]["result"]["protocolVersion"], "2025-11-25");
    assert_eq!(lines[1]["result"]["isError"], true);
    assert_eq!(
        lines[1]["result"]["_meta"]["dev.toolgate/result"]["errorKind"],
        "validation"
    );
    assert_eq!(lines[2]["error"]["code"], -32602);
}

#[test]
fn mcp_tools_list_pages_with_a_cursor() {
    let dir = tempfile::tempdir().unwrap();
    let tools = dir.path().join("tools");
    std::fs::create_dir(&tools).unwrap();
    for i in 0..150 {
        std::fs::write(
            tools.join(format!("t{i:03}.toml")),
            format!(
                "name = \"paged_tool_{i:03}\"\ndescription = \"Tool number {i}, defined to test tools/list pagination.\"\ncategory = \"knowledge\"\n"
            ),
        )
        .unwrap();
    }
    let mut child = toolgate(dir.path())
        .args(["--tools-dir", tools.to_str().unwrap(), "serve", "--stdio"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut request = |line: String| -> serde_json::Value {
        writeln!(stdin, "{line}").unwrap();
        let mut reply = String::new();
        stdout.read_line(&mut reply).unwrap();
        serde_json::from_str(&reply).unwrap()
    };
    request(r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#.to_owned());
    let mut names = Vec::new();
    let mut cursor: Option<String> = None;
    let mut pages = 0;
    loop {
        let params = match &cursor {
            Some(c) => serde_json::json!({ "cursor": c }),
            None => serde_json::json!({}),
        };
        let reply = request(
            serde_json::json!({"jsonrpc": "2.0", "id": 10 + pages, "method": "tools/list", "params": params}).to_string(),
        );
        pages += 1;
        let result = &reply["result"];
        for tool in result["tools"].as_array().unwrap() {
            names.push(tool["name"].as_str().unwrap().to_owned());
        }
        match result["nextCursor"].as_str() {
            Some(next) => cursor = Some(next.to_owned()),
            None => break,
        }
    }
    let total = 150 + toolgate_builtins::BUILTIN_NAMES.len();
    assert_eq!(pages, total.div_ceil(100), "{total} tools in pages of 100");
    assert_eq!(names.len(), total);
    let mut sorted = names.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(sorted.len(), total, "no tool listed twice");
    let bad = request(
        r#"{"jsonrpc":"2.0","id":99,"method":"tools/list","params":{"cursor":"bogus"}}"#.to_owned(),
    );
    assert_eq!(bad["error"]["code"], -32602);
    drop(stdin);
    assert!(child.wait().unwrap().success());
}

/// `toolgate serve --stdio` started in `cwd` with `HOME` and the extra arguments: the stderr
/// startup lines and the answer to `read_file` of `path`.
fn stdio_read_file(
    cwd: &std::path::Path,
    home: &std::path::Path,
    db: &std::path::Path,
    extra: &[&str],
    path: &str,
) -> (String, serde_json::Value) {
    let mut child = Toolgate::new(BIN, cwd)
        .with_db(sqlite_url(db))
        .command()
        .env("HOME", home)
        .env("XDG_DATA_HOME", home)
        .args(extra)
        .args(["serve", "--stdio"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    mcp_handshake(&mut stdin, "desktop", "1");
    let call = serde_json::json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "read_file", "arguments": {"path": path}}});
    writeln!(stdin, "{call}").unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut reply = serde_json::Value::Null;
    for _ in 0..2 {
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        let value: serde_json::Value = serde_json::from_str(&line).unwrap();
        if value["id"] == 2 {
            reply = value;
        }
    }
    drop(stdin);
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    assert!(child.wait().unwrap().success(), "{stderr}");
    (stderr, reply)
}

fn error_kind(reply: &serde_json::Value) -> &serde_json::Value {
    &reply["result"]["_meta"]["dev.toolgate/result"]["errorKind"]
}

fn text_of(reply: &serde_json::Value) -> String {
    reply["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

#[test]
fn stdio_started_in_the_filesystem_root_serves_no_files() {
    let data = tempfile::tempdir().unwrap();
    let db = data.path().join("t.db");
    let root = std::path::Path::new("/");
    for path in ["etc/passwd", "/etc/passwd"] {
        let (stderr, reply) = stdio_read_file(root, data.path(), &db, &[], path);
        assert_eq!(reply["result"]["isError"], true, "{reply}");
        assert_eq!(error_kind(&reply), "unavailable", "{reply}");
        let text = text_of(&reply);
        assert!(text.contains("--root DIR"), "{text}");
        assert!(text.contains("TOOLGATE_ROOT"), "{text}");
        assert!(!text.contains("root:x:0:0"), "{text}");
        let first = stderr.lines().next().unwrap();
        assert!(first.contains("file tools off"), "{stderr}");
        assert!(
            stderr.contains("warning: The file tools are off"),
            "{stderr}"
        );
        let version = env!("CARGO_PKG_VERSION");
        let redacted = stderr
            .replace(&db.display().to_string(), "[DB]")
            .replace(version, "[VERSION]");
        insta::assert_snapshot!("stdio_startup_without_root", redacted);
    }
    // An explicit root is used as given, even `/`.
    let (stderr, reply) = stdio_read_file(root, data.path(), &db, &["--root", "/"], "etc/passwd");
    assert_eq!(reply["result"]["isError"], false, "{reply}");
    assert!(text_of(&reply).contains("root:"), "{reply}");
    assert!(
        stderr.lines().next().unwrap().contains("file root /"),
        "{stderr}"
    );
}

#[test]
fn stdio_started_in_the_home_folder_serves_no_files() {
    let home = tempfile::tempdir().unwrap();
    let db = home.path().join("t.db");
    std::fs::write(home.path().join("secret.txt"), "s3cret").unwrap();
    for path in ["secret.txt", "/etc/passwd"] {
        let (stderr, reply) = stdio_read_file(home.path(), home.path(), &db, &[], path);
        assert_eq!(error_kind(&reply), "unavailable", "{reply}");
        let text = text_of(&reply);
        assert!(text.contains("--root DIR"), "{text}");
        assert!(text.contains("your home folder"), "{text}");
        assert!(!text.contains("s3cret"), "{text}");
        assert!(stderr.contains("file tools off"), "{stderr}");
    }
    // TOOLGATE_ROOT (here: --root, its flag) names the folder: it works.
    let work = home.path().join("work");
    std::fs::create_dir(&work).unwrap();
    std::fs::write(work.join("notes.txt"), "hello").unwrap();
    let (stderr, reply) = stdio_read_file(
        home.path(),
        home.path(),
        &db,
        &["--root", work.to_str().unwrap()],
        "notes.txt",
    );
    assert_eq!(reply["result"]["isError"], false, "{reply}");
    assert!(text_of(&reply).contains("hello"), "{reply}");
    assert!(
        stderr.contains(&format!("file root {}", work.display())),
        "{stderr}"
    );
    // Any other working directory is the root, as before.
    let (stderr, reply) = stdio_read_file(&work, home.path(), &db, &[], "notes.txt");
    assert_eq!(reply["result"]["isError"], false, "{reply}");
    assert!(
        stderr.contains(&format!("file root {}", work.display())),
        "{stderr}"
    );
}

#[test]
fn the_audit_log_says_which_client_called_and_who_cancelled() {
    let dir = tempfile::tempdir().unwrap();
    let tools = dir.path().join("tools");
    std::fs::create_dir(&tools).unwrap();
    std::fs::write(
        tools.join("nap.toml"),
        "name = \"nap\"\ndescription = \"Sleeps for thirty seconds, to be cancelled.\"\neffect = \"read\"\n[constraints]\nisolation = \"none\"\ntimeout_ms = 20000\n[run]\nkind = \"command\"\nprogram = \"/bin/sleep\"\nargs = [\"30\"]\n",
    )
    .unwrap();
    let mut child = toolgate(dir.path())
        .args(["--tools-dir", tools.to_str().unwrap(), "serve", "--stdio"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    writeln!(stdin, r#"{{"jsonrpc":"2.0","id":1,"method":"initialize","params":{{"protocolVersion":"2025-11-25","capabilities":{{}},"clientInfo":{{"name":"Desk Client","version":"4.5.6"}}}}}}"#).unwrap();
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    writeln!(
        stdin,
        r#"{{"jsonrpc":"2.0","method":"notifications/initialized"}}"#
    )
    .unwrap();
    writeln!(stdin, r#"{{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{{"name":"calculator","arguments":{{"expression":"1+1"}}}}}}"#).unwrap();
    line.clear();
    stdout.read_line(&mut line).unwrap();
    writeln!(stdin, r#"{{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{{"name":"nap","arguments":{{}}}}}}"#).unwrap();
    // Long enough for the call to be under way (a cancellation for an unknown id is ignored).
    std::thread::sleep(Duration::from_millis(1500));
    writeln!(stdin, r#"{{"jsonrpc":"2.0","method":"notifications/cancelled","params":{{"requestId":3,"reason":"user pressed stop"}}}}"#).unwrap();
    std::thread::sleep(Duration::from_millis(700));
    drop(stdin);
    assert!(child.wait().unwrap().success());
    let audit = toolgate(dir.path())
        .args(["--tools-dir", tools.to_str().unwrap(), "audit", "--json"])
        .output()
        .unwrap();
    let calls: serde_json::Value = serde_json::from_slice(&audit.stdout).unwrap();
    let calls = calls["calls"].as_array().unwrap();
    let of = |tool: &str| calls.iter().find(|c| c["tool"] == tool).unwrap().clone();
    let origin = serde_json::json!({"via": "mcp", "client": "Desk Client", "version": "4.5.6"});
    let calc = of("calculator");
    assert_eq!(calc["origin"], origin, "{calc}");
    assert!(calc.get("cancelledBy").is_none(), "{calc}");
    let nap = of("nap");
    assert_eq!(nap["errorKind"], "cancelled", "{nap}");
    assert_eq!(nap["origin"], origin, "{nap}");
    assert_eq!(nap["cancelledBy"], "client", "{nap}");
    // The command line is an origin too.
    let out = toolgate(dir.path())
        .args([
            "call",
            "calculator",
            "--args",
            r#"{"expression": "2"}"#,
            "--json",
        ])
        .output()
        .unwrap();
    assert!(out.status.success());
    let audit = toolgate(dir.path())
        .args(["audit", "--json", "--limit", "1"])
        .output()
        .unwrap();
    let calls: serde_json::Value = serde_json::from_slice(&audit.stdout).unwrap();
    assert_eq!(
        calls["calls"][0]["origin"],
        serde_json::json!({"via": "cli"})
    );
    let verify = toolgate(dir.path())
        .args(["audit", "verify"])
        .output()
        .unwrap();
    assert!(
        verify.status.success(),
        "{}",
        String::from_utf8_lossy(&verify.stdout)
    );
}

/// Opens an MCP session on a `serve --stdio` child: `initialize` (id 1, as `client` `version`)
/// and `notifications/initialized`.
fn mcp_handshake(stdin: &mut impl Write, client: &str, version: &str) {
    let initialize = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": client, "version": version}}});
    writeln!(stdin, "{initialize}").unwrap();
    writeln!(
        stdin,
        r#"{{"jsonrpc":"2.0","method":"notifications/initialized"}}"#
    )
    .unwrap();
}

/// A running `toolgate serve`: the process, its stderr, its startup banner and the address
/// it listens on.
struct Serve {
    child: std::process::Child,
    stderr: Lines,
    banner: String,
    addr: String,
}

/// Starts `toolgate serve` on a free loopback port in `dir`, its stdout sent to `stdout`, and
/// waits for the banner.
fn start_serve(dir: &std::path::Path, stdout: Stdio) -> Serve {
    let mut child = toolgate(dir)
        .args(["serve", "--http", "127.0.0.1:0"])
        .stdout(stdout)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = Lines::of(child.stderr.take().unwrap());
    let banner = stderr.next_line(&mut child, "the startup banner");
    let addr = banner
        .split("MCP http://")
        .nth(1)
        .and_then(|rest| rest.split('/').next())
        .unwrap_or_else(|| panic!("no MCP address in the banner: {banner}"))
        .to_owned();
    Serve {
        child,
        stderr,
        banner,
        addr,
    }
}

fn stop_serve(serve: Serve) {
    let Serve {
        mut child, stderr, ..
    } = serve;
    send_signal(child.id(), "-TERM");
    let rest = stderr.until_closed(&mut child, "serve to stop after SIGTERM");
    assert!(child.wait().unwrap().success(), "{rest}");
}

#[test]
fn a_runs_budget_holds_across_a_restart_of_serve() {
    let dir = tempfile::tempdir().unwrap();
    let serve = start_serve(dir.path(), Stdio::null());
    let reply = http(
        &serve.addr,
        "POST",
        "/v1/runs",
        r#"{"budget": {"max_tool_calls": 2}}"#,
    );
    assert!(reply.starts_with("HTTP/1.1 201"), "{reply}");
    let id = reply
        .split(r#""id":""#)
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .unwrap()
        .to_owned();
    let call = format!(r#"{{"arguments": {{"expression": "6*7"}}, "run": "{id}"}}"#);
    let reply = http(&serve.addr, "POST", "/v1/tools/calculator/call", &call);
    assert!(reply.contains(r#""data":{"result":42}"#), "{reply}");
    stop_serve(serve);

    // Another process on the same database: one call left, then the budget is spent.
    let serve = start_serve(dir.path(), Stdio::null());
    let reply = http(&serve.addr, "POST", "/v1/tools/calculator/call", &call);
    assert!(reply.contains(r#""data":{"result":42}"#), "{reply}");
    let reply = http(&serve.addr, "POST", "/v1/tools/calculator/call", &call);
    assert!(reply.contains("budget_exhausted"), "{reply}");
    assert!(
        reply.contains("2 of its 2 tool calls (max_tool_calls)"),
        "{reply}"
    );
    stop_serve(serve);
}

#[test]
fn serve_gives_back_the_code_pages_only_its_startup_touched() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = toolgate(dir.path())
        .args(["serve", "--http", "127.0.0.1:0"])
        .env("TOOLGATE_LOG", "toolgate=debug")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = Lines::of(child.stderr.take().unwrap());
    let released = loop {
        let line = stderr.next_line(&mut child, "the startup code's release");
        if line.contains("startup code's resident pages") {
            break line;
        }
    };
    // The executable's code and read-only data at least (two mappings), with pages in them.
    assert!(released.contains("released the startup code"), "{released}");
    let figure = |key: &str| -> u64 {
        released
            .split(&format!("{key}="))
            .nth(1)
            .and_then(|rest| {
                rest.trim_start_matches(|c: char| !c.is_ascii_digit())
                    .split(|c: char| !c.is_ascii_digit())
                    .next()
            })
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no {key} in {released}"))
    };
    assert!(figure("mappings") >= 2, "{released}");
    assert!(figure("kib") > 1024, "{released}");
    send_signal(child.id(), "-TERM");
    let rest = stderr.until_closed(&mut child, "serve to stop after SIGTERM");
    assert!(child.wait().unwrap().success(), "{rest}");
}
