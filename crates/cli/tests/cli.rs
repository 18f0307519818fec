//! End-to-end tests of the `toolgate` binary: every command, exit codes, output snapshots.
#![cfg(test)]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::{Value, json};
use toolgate_test_support::cli::Toolgate;

const BIN: &str = env!("CARGO_BIN_EXE_toolgate");

/// A scratch directory used as the working directory and file-tool root.
struct Sandbox {
    dir: tempfile::TempDir,
}

impl Sandbox {
    fn new() -> Self {
        Self {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    /// The binary in this sandbox with its own database, so tests never touch the user's data
    /// directory, and none of the caller's `TOOLGATE_*` settings.
    fn toolgate(&self) -> Toolgate {
        Toolgate::new(BIN, self.path()).with_sqlite("state/toolgate.db")
    }

    fn write(&self, rel: &str, text: &str) -> PathBuf {
        let p = self.path().join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, text).unwrap();
        p
    }

    fn run(&self, args: &[&str]) -> Run {
        self.run_with_stdin(args, None)
    }

    fn run_with_stdin(&self, args: &[&str], stdin: Option<&str>) -> Run {
        let mut child = self
            .toolgate()
            .command()
            .args(args)
            // The default database path (shown in --help) derives from it.
            .env("XDG_DATA_HOME", "/home/user/.local/share")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        {
            let mut input = child.stdin.take().unwrap();
            if let Some(text) = stdin {
                input.write_all(text.as_bytes()).unwrap();
            }
        }
        Run(child.wait_with_output().unwrap())
    }
}

struct Run(Output);

impl Run {
    fn code(&self) -> i32 {
        self.0.status.code().unwrap()
    }

    fn stdout(&self) -> String {
        String::from_utf8(self.0.stdout.clone()).unwrap()
    }

    fn stderr(&self) -> String {
        String::from_utf8(self.0.stderr.clone()).unwrap()
    }

    fn json(&self) -> Value {
        serde_json::from_slice(&self.0.stdout).unwrap_or_else(|e| {
            panic!(
                "stdout is not JSON ({e}): {}\nstderr: {}",
                self.stdout(),
                self.stderr()
            )
        })
    }

    #[track_caller]
    fn expect(self, code: i32) -> Self {
        assert_eq!(
            self.code(),
            code,
            "stdout:\n{}\nstderr:\n{}",
            self.stdout(),
            self.stderr()
        );
        self
    }
}

/// Replaces the volatile parts of output (ids, times, durations) for snapshots.
macro_rules! stable {
    ($($body:tt)*) => {
        insta::with_settings!({filters => vec![
            (r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", "[CALL_ID]"),
            (r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", "[TIME]"),
            (r#""durationMs": [0-9.e-]+"#, r#""durationMs": "[MS]""#),
            (r"\d+\.\d ms\)", "[MS])"),
            (r"[0-9a-f]{64}", "[HASH]"),
        ]}, { $($body)* });
    };
}

// ---------------------------------------------------------------- call

#[test]
fn call_calculator_prints_readable_result_and_exits_0() {
    let sb = Sandbox::new();
    let run = sb
        .run(&[
            "call",
            "calculator",
            "--args",
            r#"{"expression": "2 * (3 + 4) ^ 2"}"#,
        ])
        .expect(0);
    stable!(insta::assert_snapshot!(run.stdout()));
}

#[test]
fn call_json_prints_the_envelope() {
    let sb = Sandbox::new();
    let run = sb
        .run(&[
            "call",
            "calculator",
            "--args",
            r#"{"expression": "1/4"}"#,
            "--json",
        ])
        .expect(0);
    let env = run.json();
    assert_eq!(env["data"], json!({"result": 0.25}));
    assert_eq!(env["tool"], "calculator");
    assert_eq!(env["attempts"], 1);
    assert!(env.get("error").is_none());
    stable!(insta::assert_json_snapshot!(env));
}

#[test]
fn global_options_are_accepted_after_the_subcommand() {
    let sb = Sandbox::new();
    sb.write("inner/a.txt", "A");
    let run = sb
        .run(&[
            "call",
            "read_file",
            "--args",
            r#"{"path": "a.txt"}"#,
            "--root",
            "inner",
            "--json",
        ])
        .expect(0);
    assert_eq!(run.json()["data"]["content"], "A");
}

#[test]
fn error_results_exit_1_with_their_kind() {
    let sb = Sandbox::new();
    let cases: &[(&[&str], &str, &str)] = &[
        (
            &["call", "no_such_tool"],
            "not_found",
            "Tool not found: no_such_tool",
        ),
        (
            &["call", "calculator", "--args", r#"{"expression": 5}"#],
            "validation",
            "/expression",
        ),
        (
            &["call", "calculator", "--args", r#"{"expression": "1/0"}"#],
            "execution",
            "Division by zero",
        ),
        (
            &["call", "calculator", "--args", r#"{"expression": "(1"}"#],
            "validation",
            "missing ')'",
        ),
        (
            &["call", "read_file", "--args", r#"{"path": "missing.txt"}"#],
            "execution",
            "File not found: missing.txt",
        ),
    ];
    for (args, kind, message) in cases {
        let mut all: Vec<&str> = args.to_vec();
        all.push("--json");
        let run = sb.run(&all).expect(1);
        let env = run.json();
        assert_eq!(env["errorKind"], *kind, "{args:?}");
        assert!(
            env["error"].as_str().unwrap().contains(message),
            "{args:?}: {}",
            env["error"]
        );
        assert!(env.get("data").is_none());
    }
}

#[test]
fn calculator_calculator_validation_lists_every_violation() {
    let sb = Sandbox::new();
    let run = sb
        .run(&[
            "call",
            "calculator",
            "--args",
            r#"{"expression": 5, "extra": true}"#,
        ])
        .expect(1);
    stable!(insta::assert_snapshot!(run.stdout()));
}

#[test]
fn usage_errors_exit_2() {
    let sb = Sandbox::new();
    for args in [
        vec!["call", "calculator", "--args", "{not json"],
        vec!["call", "calculator", "--args", "[1, 2]"],
        vec!["call", "calculator", "--args", "@does-not-exist.json"],
        vec!["call"],
        vec!["frobnicate"],
        vec!["tools", "list", "--category", "nonsense"],
        vec!["tools", "export", "--format", "gemini", "--strict"],
        vec!["tools", "export", "--format", "mcp", "--require-strict"],
    ] {
        let run = sb.run(&args).expect(2);
        assert!(!run.stderr().is_empty(), "{args:?} printed no error");
        assert!(
            run.stdout().is_empty(),
            "{args:?} printed to stdout: {}",
            run.stdout()
        );
    }
}

#[test]
fn arguments_from_a_file_and_from_stdin() {
    let sb = Sandbox::new();
    sb.write("args.json", r#"{"expression": "3*3"}"#);
    let run = sb
        .run(&["call", "calculator", "--args", "@args.json", "--json"])
        .expect(0);
    assert_eq!(run.json()["data"]["result"], 9);
    let run = sb
        .run_with_stdin(
            &["call", "calculator", "--args", "-", "--json"],
            Some(r#"{"expression": "2^10"}"#),
        )
        .expect(0);
    assert_eq!(run.json()["data"]["result"], 1024);
}

#[test]
fn without_a_terminal_a_call_waits_as_an_approval_and_yes_approves() {
    let sb = Sandbox::new();
    let args = r#"{"path": "out.txt", "content": "hi"}"#;
    let run = sb
        .run(&["call", "write_file", "--args", args, "--json"])
        .expect(3);
    let env = run.json();
    assert_eq!(env["errorKind"], "confirmation_required");
    let id = env["approvalId"].as_str().unwrap().to_owned();
    assert!(env["error"].as_str().unwrap().contains(&id));
    assert!(
        env["error"]
            .as_str()
            .unwrap()
            .contains("toolgate approvals approve")
    );
    assert!(
        !sb.path().join("out.txt").exists(),
        "a pending call must not write"
    );

    let run = sb.run(&["approvals", "list"]).expect(0);
    assert!(run.stdout().contains(&id) && run.stdout().contains("pending"));
    let run = sb.run(&["approvals", "show", &id]).expect(0);
    assert!(run.stdout().contains("write_file"), "{}", run.stdout());

    // Approving runs it, once, and prints its result.
    let run = sb
        .run(&["approvals", "approve", &id, "--reason", "fine", "--json"])
        .expect(0);
    assert_eq!(run.json()["data"]["bytesWritten"], 2);
    assert_eq!(
        std::fs::read_to_string(sb.path().join("out.txt")).unwrap(),
        "hi"
    );
    let run = sb.run(&["approvals", "approve", &id]).expect(1);
    assert!(run.stderr().contains("is executed"), "{}", run.stderr());
    let shown = sb
        .run(&["approvals", "show", &id, "--json"])
        .expect(0)
        .json();
    assert_eq!(shown["status"], "executed");
    assert_eq!(shown["decisionReason"], "fine");

    // A denied call never runs.
    let other = r#"{"path": "no.txt", "content": "x"}"#;
    let env = sb
        .run(&["call", "write_file", "--args", other, "--json"])
        .expect(3)
        .json();
    let denied = env["approvalId"].as_str().unwrap().to_owned();
    sb.run(&["approvals", "deny", &denied]).expect(0);
    sb.run(&["approvals", "approve", &denied]).expect(1);
    assert!(!sb.path().join("no.txt").exists());

    // The same idempotency key: the same approval, then (once run) the same result.
    let keyed = |extra: &[&str]| {
        let mut all = vec![
            "call",
            "write_file",
            "--args",
            r#"{"path": "k.txt", "content": "k"}"#,
            "--idempotency-key",
            "job-7",
            "--json",
        ];
        all.extend_from_slice(extra);
        all.into_iter().map(str::to_owned).collect::<Vec<_>>()
    };
    let run_keyed = |extra: &[&str], code: i32| {
        let owned = keyed(extra);
        let refs: Vec<&str> = owned.iter().map(String::as_str).collect();
        sb.run(&refs).expect(code)
    };
    let first = run_keyed(&[], 3).json()["approvalId"].clone();
    let again = run_keyed(&[], 3).json()["approvalId"].clone();
    assert_eq!(first, again);
    sb.run(&["approvals", "approve", first.as_str().unwrap()])
        .expect(0);
    let replay = run_keyed(&[], 0).json();
    assert_eq!(replay["data"]["bytesWritten"], 1);

    // --yes still pre-approves on the spot.
    let run = sb
        .run(&["call", "write_file", "--args", args, "--yes", "--json"])
        .expect(0);
    assert_eq!(run.json()["data"]["bytesWritten"], 2);
}

#[test]
fn call_wait_blocks_until_the_decision_and_prints_the_result() {
    let sb = Sandbox::new();
    let child = sb
        .toolgate()
        .command()
        .args([
            "call",
            "write_file",
            "--args",
            r#"{"path": "w.txt", "content": "waited"}"#,
            "--wait",
            "--json",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Find the pending approval, approve it from another process.
    let id = loop {
        let listed = sb
            .run(&["approvals", "list", "--status", "pending", "--json"])
            .expect(0)
            .json();
        if let Some(id) = listed["approvals"][0]["id"].as_str() {
            break id.to_owned();
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    sb.run(&["approvals", "approve", &id, "--json"]).expect(0);
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let env: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(env["data"]["bytesWritten"], 6);
    assert_eq!(
        std::fs::read_to_string(sb.path().join("w.txt")).unwrap(),
        "waited",
        "written once"
    );
}

#[test]
fn terminal_prompt_answers_yes_and_no() {
    // `script` gives the binary a real terminal on stdin, as a person would have.
    if Command::new("script").arg("--version").output().is_err() {
        eprintln!("skipping: util-linux `script` is not installed");
        return;
    }
    let sb = Sandbox::new();
    // Enter alone takes the prompt's default, which is No.
    for (answer, should_write) in [("y", true), ("n", false), ("", false)] {
        let file = format!(
            "prompt_{}.txt",
            if answer.is_empty() { "enter" } else { answer }
        );
        let cmd =
            format!("{BIN} call write_file --args '{{\"path\": \"{file}\", \"content\": \"x\"}}'");
        let out = sb
            .toolgate()
            .wrapped("script")
            .args(["-qec", &cmd, "/dev/null"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .and_then(|mut child| {
                // Give the prompt time to appear, then answer.
                std::thread::sleep(std::time::Duration::from_millis(800));
                child
                    .stdin
                    .take()
                    .unwrap()
                    .write_all(format!("{answer}\n").as_bytes())?;
                child.wait_with_output()
            })
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains("Run it? [y/N]"), "no prompt shown: {text}");
        assert_eq!(
            sb.path().join(&file).exists(),
            should_write,
            "{answer}: {text}"
        );
        if !should_write {
            assert!(text.contains("rejected"), "{text}");
        }
    }
}

#[test]
fn file_jail_refuses_escapes() {
    let sb = Sandbox::new();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret.txt"), "secret").unwrap();
    std::fs::create_dir(sb.path().join("root")).unwrap();
    std::os::unix::fs::symlink(
        outside.path().join("secret.txt"),
        sb.path().join("root/link.txt"),
    )
    .unwrap();
    std::os::unix::fs::symlink(outside.path(), sb.path().join("root/linkdir")).unwrap();
    let abs = outside.path().join("secret.txt").display().to_string();
    for path in [
        "../x.txt",
        "a/../../x.txt",
        abs.as_str(),
        "link.txt",
        "linkdir/secret.txt",
    ] {
        let args = json!({"path": path}).to_string();
        let run = sb
            .run(&[
                "--root",
                "root",
                "call",
                "read_file",
                "--args",
                &args,
                "--json",
            ])
            .expect(1);
        let env = run.json();
        assert_eq!(env["errorKind"], "authorization", "{path}");
        assert_eq!(env["error"], format!("Permission denied: {path}"));
    }
}

#[test]
fn principals_from_config_are_authorized() {
    let sb = Sandbox::new();
    sb.write(
        "toolgate.toml",
        r#"
[principals.agent]
grants = ["tool.filesystem.read"]
tools = ["read_file", "write_file", "list_directory"]
"#,
    );
    sb.write("a.txt", "A");
    let cfg = ["--config", "toolgate.toml"];
    let read = [
        &cfg[..],
        &[
            "call",
            "read_file",
            "--principal",
            "agent",
            "--args",
            r#"{"path": "a.txt"}"#,
            "--json",
        ],
    ]
    .concat();
    sb.run(&read).expect(0);

    let write = [
        &cfg[..],
        &[
            "call",
            "write_file",
            "--principal",
            "agent",
            "--yes",
            "--args",
            r#"{"path": "b.txt", "content": "B"}"#,
            "--json",
        ],
    ]
    .concat();
    let env = sb.run(&write).expect(1).json();
    assert_eq!(env["errorKind"], "authorization");
    assert!(
        env["error"]
            .as_str()
            .unwrap()
            .contains("tool.filesystem.write")
    );

    let calc = [
        &cfg[..],
        &[
            "call",
            "calculator",
            "--principal",
            "agent",
            "--args",
            r#"{"expression": "1"}"#,
            "--json",
        ],
    ]
    .concat();
    let env = sb.run(&calc).expect(1).json();
    // Outside the principal's allowed tools: reported exactly like a tool that does not exist.
    assert_eq!(env["errorKind"], "not_found");

    let unknown = [&cfg[..], &["call", "calculator", "--principal", "mallory"]].concat();
    let run = sb.run(&unknown).expect(2);
    assert!(run.stderr().contains("Unknown principal: mallory"));
}

#[test]
fn logs_go_to_stderr_never_stdout() {
    let sb = Sandbox::new();
    let out = sb
        .toolgate()
        .command()
        .args([
            "call",
            "calculator",
            "--args",
            r#"{"expression": "1"}"#,
            "--json",
        ])
        .env("TOOLGATE_LOG", "trace")
        .output()
        .unwrap();
    let env: Value =
        serde_json::from_slice(&out.stdout).expect("stdout must be only the JSON envelope");
    assert_eq!(env["data"]["result"], 1);
    assert!(
        !out.stderr.is_empty(),
        "trace logging should have written to stderr"
    );
}

// ---------------------------------------------------------------- tools list / show

#[test]
fn tools_list_table() {
    let sb = Sandbox::new();
    let run = sb.run(&["tools", "list"]).expect(0);
    insta::assert_snapshot!(run.stdout());
}

#[test]
fn tools_list_filters() {
    let sb = Sandbox::new();
    sb.write(
        "tools/get_weather.toml",
        include_str!("fixtures/get_weather.toml"),
    );
    let names = |args: &[&str]| -> Vec<String> {
        let mut all = vec!["--tools-dir", "tools", "tools", "list", "--json"];
        all.extend_from_slice(args);
        sb.run(&all).expect(0).json()["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(names(&[]).len(), toolgate_builtins::BUILTIN_NAMES.len() + 1);
    assert_eq!(names(&["--category", "external_api"]), ["get_weather"]);
    assert_eq!(names(&["--effect", "delete"]), ["delete_file"]);
    assert_eq!(names(&["--consequence", "medium"]), ["write_file"]);
    assert_eq!(names(&["--tag", "weather"]), ["get_weather"]);
    assert_eq!(names(&["--search", "ARITHMETIC"]), ["calculator"]);
    assert_eq!(
        names(&["--category", "filesystem", "--effect", "read"]),
        ["list_directory", "read_file"]
    );
    assert!(names(&["--search", "no tool says this"]).is_empty());
}

#[test]
fn tools_show_readable_and_json() {
    let sb = Sandbox::new();
    let run = sb.run(&["tools", "show", "write_file"]).expect(0);
    stable!(insta::assert_snapshot!(run.stdout()));
    let run = sb.run(&["tools", "show", "calculator", "--json"]).expect(0);
    let def = run.json();
    assert_eq!(def["name"], "calculator");
    // The JSON form is itself a definition file: it validates (as a built-in name it is refused,
    // which proves the file was understood).
    let file = sb.write("calc.json", &run.stdout());
    let run = sb
        .run(&["tools", "validate", file.to_str().unwrap(), "--json"])
        .expect(1);
    assert_eq!(run.json()["files"][0]["errors"][0]["code"], "name.builtin");
    sb.run(&["tools", "show", "nope"]).expect(1);
}

// ---------------------------------------------------------------- tools validate

#[test]
fn tools_validate_valid_file_exits_0_with_warnings_allowed() {
    let sb = Sandbox::new();
    let file = sb.write(
        "tools/get_weather.toml",
        include_str!("fixtures/get_weather.toml"),
    );
    let short = sb.write(
        "tools/short.yaml",
        "name: short_desc\ndescription: Does a thing\n",
    );
    let run = sb
        .run(&[
            "tools",
            "validate",
            file.to_str().unwrap(),
            short.to_str().unwrap(),
        ])
        .expect(0);
    let text = run
        .stdout()
        .replace(&sb.path().display().to_string(), "[DIR]");
    insta::assert_snapshot!(text);
}

#[test]
fn tools_validate_invalid_file_lists_every_problem() {
    let sb = Sandbox::new();
    let file = sb.write("bad.toml", include_str!("fixtures/bad.toml"));
    let run = sb
        .run(&["tools", "validate", file.to_str().unwrap()])
        .expect(1);
    let text = run
        .stdout()
        .replace(&sb.path().display().to_string(), "[DIR]");
    insta::assert_snapshot!(text);
    let run = sb
        .run(&["tools", "validate", file.to_str().unwrap(), "--json"])
        .expect(1);
    let report = run.json();
    assert_eq!(report["valid"], false);
    let codes: Vec<&str> = report["files"][0]["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["code"].as_str().unwrap())
        .collect();
    for code in [
        "name.format",
        "description.empty",
        "parameter.required_default",
        "parameter.enum_type",
        "constraints.timeout_range",
    ] {
        assert!(codes.contains(&code), "missing {code} in {codes:?}");
    }
}

#[test]
fn tools_validate_parse_errors_and_dependencies_between_files() {
    let sb = Sandbox::new();
    let broken = sb.write("broken.json", r#"{"name": "x", "descripton": "typo"}"#);
    let run = sb
        .run(&["tools", "validate", broken.to_str().unwrap()])
        .expect(1);
    assert!(run.stdout().contains("descripton"), "{}", run.stdout());

    let a = sb.write("a.toml", "name = \"tool_a\"\ndescription = \"Calls tool_b to do its work, then reports.\"\ndepends_on = [\"tool_b\"]\n");
    let b = sb.write(
        "b.toml",
        "name = \"tool_b\"\ndescription = \"Does the work that tool_a reports on.\"\n",
    );
    sb.run(&[
        "tools",
        "validate",
        a.to_str().unwrap(),
        b.to_str().unwrap(),
    ])
    .expect(0);
    let run = sb
        .run(&["tools", "validate", a.to_str().unwrap()])
        .expect(1);
    assert!(
        run.stdout().contains("depends_on.unknown"),
        "{}",
        run.stdout()
    );
    let run = sb
        .run(&[
            "tools",
            "validate",
            sb.path().join("missing.toml").to_str().unwrap(),
        ])
        .expect(1);
    assert!(run.stdout().contains("Cannot read"), "{}", run.stdout());
}

#[test]
fn tools_dir_reports_bad_files_and_loads_the_rest() {
    let sb = Sandbox::new();
    sb.write(
        "tools/get_weather.toml",
        include_str!("fixtures/get_weather.toml"),
    );
    sb.write("tools/bad.toml", include_str!("fixtures/bad.toml"));
    sb.write("tools/notes.txt", "not a definition");
    let run = sb
        .run(&["--tools-dir", "tools", "tools", "list", "--json"])
        .expect(0);
    let listed = run.json();
    let names: Vec<&str> = listed["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names.len(),
        toolgate_builtins::BUILTIN_NAMES.len() + 1,
        "the built-ins and get_weather: {names:?}"
    );
    assert!(names.contains(&"get_weather"));
    assert!(run.stderr().contains("bad.toml"), "{}", run.stderr());
    assert!(run.stderr().contains("name.format"), "{}", run.stderr());
    // A definition without an implementation is listed but calling it is an error result.
    let env = sb
        .run(&[
            "--tools-dir",
            "tools",
            "call",
            "get_weather",
            "--args",
            r#"{"city": "Oslo"}"#,
            "--json",
        ])
        .expect(1)
        .json();
    assert_eq!(env["errorKind"], "unavailable");
    assert_eq!(env["input"], json!({"city": "Oslo", "units": "metric"}));
}

// ---------------------------------------------------------------- export

#[test]
fn tools_export_every_format() {
    let sb = Sandbox::new();
    sb.write(
        "tools/get_weather.toml",
        include_str!("fixtures/get_weather.toml"),
    );
    for format in [
        "openai",
        "openai-responses",
        "anthropic",
        "gemini",
        "gemini-json-schema",
        "mcp",
    ] {
        let run = sb
            .run(&[
                "--tools-dir",
                "tools",
                "tools",
                "export",
                "--format",
                format,
            ])
            .expect(0);
        let doc = run.json();
        let text = doc.to_string();
        assert!(
            text.contains("get_weather") && text.contains("read_file"),
            "{format}: {text}"
        );
        stable!(insta::assert_json_snapshot!(
            format!("export_{format}"),
            doc
        ));
    }
    let run = sb
        .run(&[
            "--tools-dir",
            "tools",
            "tools",
            "export",
            "--format",
            "openai",
            "--strict",
        ])
        .expect(0);
    stable!(insta::assert_json_snapshot!(
        "export_openai_strict",
        run.json()
    ));
    let run = sb
        .run(&[
            "--tools-dir",
            "tools",
            "tools",
            "export",
            "--format",
            "anthropic",
            "--strict",
        ])
        .expect(0);
    stable!(insta::assert_json_snapshot!(
        "export_anthropic_strict",
        run.json()
    ));
}

#[test]
fn require_strict_exits_1_listing_every_tool_and_reason() {
    let sb = Sandbox::new();
    sb.write(
        "tools/get_weather.toml",
        include_str!("fixtures/get_weather.toml"),
    );
    sb.write(
        "tools/tag_items.json",
        r#"{"name": "tag_items", "description": "Tag items with free-form labels for later search.",
            "input_schema": {"type": "object", "properties": {"labels": {"type": "object"}}}}"#,
    );
    sb.write(
        "tools/match_keys.json",
        r#"{"name": "match_keys", "description": "Match keys by pattern and return what they hold.",
            "input_schema": {"type": "object", "properties": {"keys": {"type": "object",
              "patternProperties": {"^k_": {"type": "string"}}}}}}"#,
    );
    for format in ["openai", "openai-responses", "anthropic"] {
        let run = sb
            .run(&[
                "--tools-dir",
                "tools",
                "tools",
                "export",
                "--format",
                format,
                "--require-strict",
            ])
            .expect(1);
        assert!(run.stdout().is_empty(), "{format}: {}", run.stdout());
        let err = run.stderr();
        // The built-in validate_output takes any JSON value, which no strict subset expresses.
        assert!(
            err.contains("with strict mode required: 3 tools cannot be strict"),
            "{format}: {err}"
        );
        assert_eq!(err.matches("\n  - Cannot export tool ").count(), 3, "{err}");
        assert!(
            err.contains("\n  - Cannot export tool validate_output")
                && err.contains("has no `type`, so it accepts any JSON value"),
            "{format}: {err}"
        );
        assert!(
            err.contains("\n  - Cannot export tool match_keys")
                && err.contains("uses `patternProperties`"),
            "{format}: {err}"
        );
        assert!(
            err.contains("\n  - Cannot export tool tag_items")
                && err.contains("is an object without declared properties (free-form)"),
            "{format}: {err}"
        );
        assert!(!err.contains("get_weather"), "{format}: {err}");
        // Narrowed with --tool to tools that can be strict, the same flag succeeds.
        let run = sb
            .run(&[
                "--tools-dir",
                "tools",
                "tools",
                "export",
                "--format",
                format,
                "--require-strict",
                "--tool",
                "get_weather",
                "--tool",
                "calculator",
            ])
            .expect(0);
        let names = run.stdout();
        assert!(
            names.contains("get_weather") && names.contains("calculator"),
            "{names}"
        );
        assert!(!names.contains("validate_output"), "{names}");
        // Without --require-strict the same tools export, each non-strict one with a note.
        let run = sb
            .run(&[
                "--tools-dir",
                "tools",
                "tools",
                "export",
                "--format",
                format,
                "--strict",
            ])
            .expect(0);
        assert!(
            run.stderr()
                .contains("note: tag_items: strict: Exported without strict"),
            "{format}: {}",
            run.stderr()
        );
    }
}

#[test]
fn help_teaches() {
    let sb = Sandbox::new();
    let run = sb.run(&["--help"]).expect(0);
    insta::assert_snapshot!(run.stdout());
    let run = sb.run(&["call", "--help"]).expect(0);
    insta::assert_snapshot!(run.stdout());
}

#[test]
fn ctrl_c_at_the_prompt_cancels_and_exits() {
    if Command::new("script").arg("--version").output().is_err() {
        eprintln!("skipping: util-linux `script` is not installed");
        return;
    }
    let sb = Sandbox::new();
    let cmd = format!("{BIN} call write_file --args '{{\"path\": \"p.txt\", \"content\": \"x\"}}'");
    let mut child = sb
        .toolgate()
        .wrapped("script")
        .args(["-qec", &cmd, "/dev/null"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(800));
    // ^C on the terminal: the line discipline sends SIGINT to toolgate.
    child.stdin.as_mut().unwrap().write_all(b"\x03").unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while child.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > deadline {
            child.kill().unwrap();
            panic!("toolgate did not exit after Ctrl-C at the confirmation prompt");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("Request was cancelled"), "{text}");
    assert!(!sb.path().join("p.txt").exists());
}

#[test]
fn tools_validate_reports_a_name_clash_with_every_other_problem_and_names_cycles() {
    let sb = Sandbox::new();
    let clash = sb.write(
        "clash.json",
        r#"{"name": "read_file", "description": "", "constraints": {"timeout_ms": 1}}"#,
    );
    let report = sb
        .run(&["tools", "validate", clash.to_str().unwrap(), "--json"])
        .expect(1)
        .json();
    let issues: Vec<(String, String)> = report["files"][0]["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["path"].as_str().unwrap().to_owned(),
                e["code"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    for want in [
        ("name", "name.builtin"),
        ("description", "description.empty"),
        ("constraints.timeout_ms", "constraints.timeout_range"),
    ] {
        assert!(
            issues.contains(&(want.0.into(), want.1.into())),
            "{want:?} missing in {issues:?}"
        );
    }

    let a = sb.write("a.toml", "name = \"alpha_tool\"\ndescription = \"Uses beta_tool to do its job well.\"\ndepends_on = [\"beta_tool\"]\n");
    let b = sb.write("b.yaml", "name: beta_tool\ndescription: Uses alpha_tool to do its job well.\ndepends_on: [alpha_tool]\n");
    let report = sb
        .run(&[
            "tools",
            "validate",
            a.to_str().unwrap(),
            b.to_str().unwrap(),
            "--json",
        ])
        .expect(1)
        .json();
    for file in report["files"].as_array().unwrap() {
        assert_eq!(file["errors"][0]["code"], "depends_on.cycle", "{file}");
        assert!(
            file["errors"][0]["message"]
                .as_str()
                .unwrap()
                .contains("alpha_tool, beta_tool")
        );
    }
}

// ---------------------------------------------------------------- store: definitions and audit

#[test]
fn stored_definitions_add_update_history_remove() {
    let sb = Sandbox::new();
    let v1 = sb.write(
        "get_weather.toml",
        include_str!("fixtures/get_weather.toml"),
    );
    let run = sb.run(&["tools", "add", v1.to_str().unwrap()]).expect(0);
    assert!(
        run.stdout().contains("Added get_weather (version 1"),
        "{}",
        run.stdout()
    );
    // Stored definitions join the registry of every later command.
    let listed = sb.run(&["tools", "list", "--json"]).expect(0).json();
    assert!(
        listed["tools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["name"] == "get_weather")
    );
    // Adding again is a conflict; a built-in name is refused with its other problems listed.
    sb.run(&["tools", "add", v1.to_str().unwrap()]).expect(1);
    let clash = sb.write("clash.json", r#"{"name": "read_file", "description": ""}"#);
    let run = sb.run(&["tools", "add", clash.to_str().unwrap()]).expect(1);
    assert!(
        run.stderr().contains("name.builtin") && run.stderr().contains("description.empty"),
        "{}",
        run.stderr()
    );
    // An invalid definition writes nothing.
    let bad = sb.write("bad.toml", include_str!("fixtures/bad.toml"));
    sb.run(&["tools", "add", bad.to_str().unwrap()]).expect(1);

    let v2 = sb.write(
        "get_weather_v2.toml",
        &include_str!("fixtures/get_weather.toml")
            .replace("timeout_ms = 5000", "timeout_ms = 8000"),
    );
    let run = sb.run(&["tools", "update", v2.to_str().unwrap()]).expect(0);
    assert!(
        run.stdout().contains("version 2") && run.stdout().contains("constraints"),
        "{}",
        run.stdout()
    );
    let history = sb
        .run(&["tools", "history", "get_weather", "--json"])
        .expect(0)
        .json();
    let versions = history["versions"].as_array().unwrap();
    assert_eq!(versions.len(), 2);
    assert_eq!(versions[0]["definition"]["constraints"]["timeout_ms"], 5000);
    // Every earlier version is retrievable as a definition file.
    let old = sb
        .run(&["tools", "history", "get_weather", "--version", "1"])
        .expect(0)
        .json();
    assert_eq!(old["constraints"]["timeout_ms"], 5000);

    sb.run(&["tools", "rm", "read_file"]).expect(1);
    let run = sb.run(&["tools", "rm", "get_weather"]).expect(0);
    assert!(
        run.stdout().contains("Removed get_weather"),
        "{}",
        run.stdout()
    );
    let listed = sb.run(&["tools", "list", "--json"]).expect(0).json();
    assert!(
        !listed["tools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["name"] == "get_weather")
    );
    // History survives removal.
    let history = sb
        .run(&["tools", "history", "get_weather", "--json"])
        .expect(0)
        .json();
    assert_eq!(history["versions"].as_array().unwrap().len(), 2);
    sb.run(&["tools", "update", v2.to_str().unwrap()]).expect(1);
}

#[test]
fn the_plan_in_force_limits_custom_definitions() {
    let sb = Sandbox::new();
    sb.write("toolgate.toml", "plan = \"core\"\n");
    let def = sb.write(
        "get_weather.toml",
        include_str!("fixtures/get_weather.toml"),
    );
    let run = sb
        .run(&[
            "--config",
            "toolgate.toml",
            "tools",
            "add",
            def.to_str().unwrap(),
        ])
        .expect(1);
    assert!(
        run.stderr().contains("core") && run.stderr().contains("plan"),
        "{}",
        run.stderr()
    );
    // The plan also caps isolation: strict needs teams or enterprise.
    sb.write("writer.toml", "plan = \"writer_pro\"\n");
    let strict = sb.write(
        "strict_tool.toml",
        "name = \"sandboxed\"\ndescription = \"Runs a script in strict isolation when asked to.\"\n\n[constraints]\nisolation = \"strict\"\n",
    );
    let run = sb
        .run(&[
            "--config",
            "writer.toml",
            "tools",
            "add",
            strict.to_str().unwrap(),
        ])
        .expect(1);
    assert!(
        run.stderr().contains("constraints.isolation_plan"),
        "{}",
        run.stderr()
    );
    sb.write("teams.toml", "plan = \"teams\"\n");
    sb.run(&[
        "--config",
        "teams.toml",
        "tools",
        "add",
        strict.to_str().unwrap(),
    ])
    .expect(0);
    sb.write("bad_plan.toml", "plan = \"platinum\"\n");
    sb.run(&["--config", "bad_plan.toml", "tools", "list"])
        .expect(2);
}

#[test]
fn every_call_is_audited_and_large_outputs_come_back_byte_for_byte() {
    let sb = Sandbox::new();
    sb.write("big.txt", &"x".repeat(20 * 1024));
    let ok = sb
        .run(&[
            "call",
            "calculator",
            "--args",
            r#"{"expression": "1+1"}"#,
            "--json",
        ])
        .expect(0)
        .json();
    let failed = sb
        .run(&[
            "call",
            "calculator",
            "--args",
            r#"{"expression": "1/0"}"#,
            "--json",
        ])
        .expect(1)
        .json();
    let large = sb
        .run(&[
            "call",
            "read_file",
            "--args",
            r#"{"path": "big.txt"}"#,
            "--json",
        ])
        .expect(0)
        .json();
    let output_ref = large["outputRef"]
        .as_str()
        .expect("a large output is stored apart");
    assert!(
        output_ref.contains(large["callId"].as_str().unwrap()),
        "{output_ref}"
    );

    let listed = sb.run(&["audit", "--json"]).expect(0).json();
    let calls = listed["calls"].as_array().unwrap();
    assert_eq!(calls.len(), 3, "{listed}");
    let ids: Vec<&str> = calls
        .iter()
        .map(|c| c["callId"].as_str().unwrap())
        .collect();
    for env in [&ok, &failed, &large] {
        assert!(ids.contains(&env["callId"].as_str().unwrap()));
    }
    let table = sb
        .run(&["audit", "--tool", "calculator"])
        .expect(0)
        .stdout();
    assert!(
        table.contains("error: execution") && table.contains("ok"),
        "{table}"
    );

    let shown = sb
        .run(&["audit", "show", failed["callId"].as_str().unwrap()])
        .expect(0);
    assert!(
        shown.stdout().contains("Division by zero"),
        "{}",
        shown.stdout()
    );

    let out = sb
        .toolgate()
        .command()
        .args(["audit", "output", large["callId"].as_str().unwrap()])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        out.stdout,
        serde_json::to_vec(&large["data"]).unwrap(),
        "the stored output is the call's data, byte for byte"
    );

    sb.run(&["audit", "output", ok["callId"].as_str().unwrap()])
        .expect(1);
    sb.run(&["audit", "show", "not-a-call-id"]).expect(2);
    let run = sb.run(&["audit", "verify"]).expect(0);
    assert!(
        run.stdout().contains("hash chain intact"),
        "{}",
        run.stdout()
    );
}

#[test]
fn definition_changes_and_validations_are_recorded_as_events() {
    let sb = Sandbox::new();
    let v1 = sb.write(
        "get_weather.toml",
        include_str!("fixtures/get_weather.toml"),
    );
    let v2 = sb.write(
        "get_weather_v2.toml",
        &include_str!("fixtures/get_weather.toml")
            .replace("timeout_ms = 5000", "timeout_ms = 8000"),
    );
    sb.run(&["tools", "add", v1.to_str().unwrap()]).expect(0);
    sb.run(&["tools", "update", v2.to_str().unwrap()]).expect(0);
    sb.run(&["tools", "rm", "get_weather"]).expect(0);

    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let events = rt.block_on(async {
        let url = toolgate_store::DbUrl::parse(sb.toolgate().db()).unwrap();
        let store = toolgate_store::Store::open(&url, &Default::default())
            .await
            .unwrap();
        store.events(0, 100).await.unwrap()
    });
    let kinds: Vec<(&str, &str)> = events
        .iter()
        .map(|e| (e.kind.as_str(), e.tool.as_str()))
        .collect();
    assert_eq!(
        kinds,
        [
            ("validated", "get_weather"),
            ("created", "get_weather"),
            ("validated", "get_weather"),
            ("updated", "get_weather"),
            ("deleted", "get_weather"),
        ]
    );
    assert_eq!(events[3].changed_fields, ["constraints"]);
}

/// Replaces every `YYYY-MM-DD HH:MM:SS` timestamp with a placeholder of the same width.
fn redact_timestamps(text: &str) -> String {
    let shape = "dddd-dd-dd dd:dd:dd";
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::new();
    let mut i = 0;
    while i < chars.len() {
        let fits = chars.len() - i >= shape.len()
            && shape.chars().zip(&chars[i..]).all(|(s, c)| match s {
                'd' => c.is_ascii_digit(),
                s => s == *c,
            });
        if fits {
            out.push_str("YYYY-MM-DD hh:mm:ss");
            i += shape.len();
        } else {
            out.push(chars[i]);
            i += 1;
        }
    }
    out
}

#[test]
fn approvals_list_aligns_its_columns() {
    let sb = Sandbox::new();
    sb.write("gone.txt", "x");
    let mut ids = Vec::new();
    for (tool, args) in [
        ("write_file", r#"{"path": "a.txt", "content": "x"}"#),
        ("delete_file", r#"{"path": "gone.txt"}"#),
    ] {
        let env = sb
            .run(&["call", tool, "--args", args, "--json"])
            .expect(3)
            .json();
        ids.push(env["approvalId"].as_str().unwrap().to_owned());
    }
    sb.run(&["approvals", "deny", &ids[0]]).expect(0);
    // Where the call came from is kept with its approval.
    let shown = sb.run(&["approvals", "show", &ids[1]]).expect(0);
    assert!(
        shown.stdout().contains("from:        command line"),
        "{}",
        shown.stdout()
    );
    let shown = sb
        .run(&["approvals", "show", &ids[1], "--json"])
        .expect(0)
        .json();
    assert_eq!(shown["origin"], serde_json::json!({"via": "cli"}));
    let run = sb.run(&["approvals", "list"]).expect(0);
    let mut text = redact_timestamps(&run.stdout());
    for (i, id) in ids.iter().enumerate() {
        // Same width as a UUID, so the alignment shows.
        text = text.replace(id, &format!("00000000-0000-0000-0000-00000000000{i}"));
    }
    insta::assert_snapshot!(text);
}

#[test]
fn bash_completes_commands_and_their_options_from_the_generated_script() {
    let sb = Sandbox::new();
    let script = sb.write(
        "toolgate.bash",
        &sb.run(&["completions", "bash"]).expect(0).stdout(),
    );
    // Sourced into a real bash, the script completes subcommands and a subcommand's options
    // (bash calls the function with the command, the current word and the previous one).
    let complete = |words: &str| {
        let probe = format!(
            "source {}; COMP_WORDS=({words}); COMP_CWORD=$((${{#COMP_WORDS[@]}} - 1)); COMP_LINE=\"{words}\"; COMP_POINT=${{#COMP_LINE}}; _toolgate toolgate \"${{COMP_WORDS[COMP_CWORD]}}\" \"${{COMP_WORDS[COMP_CWORD-1]}}\"; printf '%s\\n' \"${{COMPREPLY[@]}}\"",
            script.display()
        );
        let out = std::process::Command::new("bash")
            .args(["--norc", "-c", &probe])
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let commands = complete("toolgate ser");
    assert_eq!(commands.lines().collect::<Vec<_>>(), ["serve", "servers"]);
    let options = complete("toolgate serve --");
    assert!(options.lines().any(|o| o == "--stdio"), "{options}");
    assert!(options.lines().any(|o| o == "--grace"), "{options}");
    for shell in ["zsh", "fish", "powershell", "elvish"] {
        let text = sb.run(&["completions", shell]).expect(0).stdout();
        assert!(text.contains("servers"), "{shell}: {text}");
    }
    let bad = sb.run(&["completions", "tcsh"]).expect(2);
    assert!(bad.stderr().contains("possible values"), "{}", bad.stderr());
}

#[test]
fn export_of_an_unknown_tool_says_which_and_exports_nothing() {
    let sb = Sandbox::new();
    let run = sb
        .run(&["tools", "export", "--format", "openai", "--tool", "nope"])
        .expect(2);
    assert!(run.stdout().is_empty(), "{}", run.stdout());
    assert!(
        run.stderr()
            .contains("Tool not found: nope; `toolgate tools list`"),
        "{}",
        run.stderr()
    );
}

#[test]
fn runs_list_and_show_say_what_there_is_and_how_to_find_it() {
    let sb = Sandbox::new();
    let run = sb.run(&["runs", "list"]).expect(0);
    assert!(
        run.stdout()
            .contains("No runs. Start one with POST /v1/runs"),
        "{}",
        run.stdout()
    );
    let run = sb.run(&["runs", "list", "--json"]).expect(0);
    assert_eq!(run.json(), json!({"runs": []}));
    let run = sb
        .run(&["runs", "show", "01890a5d-ac96-774b-bcce-b302099a8057"])
        .expect(1);
    assert!(run.stderr().contains("Run not found"), "{}", run.stderr());
    let run = sb.run(&["runs", "show", "nope"]).expect(2);
    assert!(run.stderr().contains("invalid run id"), "{}", run.stderr());
}
