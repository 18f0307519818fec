//! The `command` run kind through the pipeline and the sandbox executor, at every level.
#![cfg(test)]

mod common;

use common::{Harness, command_tool};
use serde_json::json;
use toolgate_core::ErrorKind;

#[tokio::test]
async fn a_trivial_command_runs_at_every_level() {
    let h = Harness::new();
    for level in ["none", "standard", "strict", "restricted"] {
        h.add_toml(&command_tool(
            &format!("echo_{level}"),
            level,
            "/bin/echo",
            &["hello", "{arg}"],
            "",
        ));
        let r = h
            .call(&format!("echo_{level}"), json!({"arg": "world; rm -rf /"}))
            .await;
        assert_eq!(
            r.data(),
            Some(&json!("hello world; rm -rf /")),
            "{level}: {r:?}"
        );
    }
}

#[tokio::test]
async fn arguments_arrive_as_json_on_stdin_and_json_output_is_parsed() {
    let h = Harness::new();
    let def = command_tool("cat_json", "strict", "/bin/cat", &[], "")
        .replace("output = \"text\"", "output = \"json\"");
    h.add_toml(&def);
    let r = h.call("cat_json", json!({"arg": "x"})).await;
    assert_eq!(r.data(), Some(&json!({"arg": "x"})), "{r:?}");
}

#[tokio::test]
async fn a_failing_command_is_an_execution_error_with_its_exit_code_and_stderr() {
    let h = Harness::new();
    h.add_toml(&command_tool(
        "ls_missing",
        "strict",
        "/bin/ls",
        &["/definitely/not/here"],
        "",
    ));
    let r = h.call("ls_missing", json!({})).await;
    assert_eq!(r.error_kind(), Some(ErrorKind::Execution), "{r:?}");
    let e = r.error().unwrap();
    assert!(e.contains("exited with code 2"), "{e}");
    assert!(e.contains("No such file"), "{e}");
}

#[tokio::test]
async fn the_timeout_kills_the_process() {
    let h = Harness::new();
    let def = command_tool("sleepy", "standard", "/bin/sleep", &["30"], "")
        .replace("timeout_ms = 3000", "timeout_ms = 1000");
    h.add_toml(&def);
    let t = std::time::Instant::now();
    let r = h.call("sleepy", json!({})).await;
    assert_eq!(r.error_kind(), Some(ErrorKind::Timeout), "{r:?}");
    assert!(
        t.elapsed() < std::time::Duration::from_secs(3),
        "{:?}",
        t.elapsed()
    );
}

/// A host that refuses a step of the level (here: user namespaces, refused because the launcher
/// itself runs inside a strict sandbox, whose seccomp filter denies `unshare`) gets an
/// `unavailable` error naming what is missing — and the program never runs.
#[tokio::test]
async fn a_level_the_host_cannot_enforce_is_unavailable_never_weaker() {
    use std::time::Duration;
    use toolgate_core::{CancellationToken, Isolation};
    use toolgate_sandbox::launch_spec::{
        LAUNCH_ARG, LaunchSpec, NetMode, ResourceLimits, SPEC_ENV,
    };
    use toolgate_sandbox::{Job, Runner, SandboxError};

    let scratch = tempfile::tempdir().unwrap();
    let inner = LaunchSpec {
        level: Isolation::Standard,
        program: "/bin/echo".into(),
        args: vec!["the program ran".into()],
        env: vec![],
        cwd: "/".into(),
        read_paths: vec![],
        write_paths: vec![],
        net: NetMode::Host,
        limits: ResourceLimits {
            cpu_seconds: 5,
            address_space_bytes: 0,
            data_bytes: 0,
            open_files: 64,
            file_size_bytes: 0,
            processes: 0,
        },
        cgroup_procs: vec![],
        outside_uid: 65534,
        outside_gid: 65534,
        session: false,
    };
    let runner = Runner::new(common::config());
    let outer = Job {
        level: Isolation::Strict,
        program: common::FIXTURE.into(),
        args: vec![LAUNCH_ARG.into()],
        env: vec![(SPEC_ENV.into(), serde_json::to_string(&inner).unwrap())],
        read_paths: vec![],
        write_paths: vec![scratch.path().to_owned()],
        allowed_hosts: vec![],
        stdin: vec![],
        timeout: Duration::from_secs(5),
        max_stdout: 4096,
        label: "Tool nested".into(),
    };
    let err = runner
        .run(outer, &CancellationToken::new())
        .await
        .unwrap_err();
    let SandboxError::Unavailable(message) = &err else {
        panic!("{err:?}")
    };
    assert!(
        message.contains("needs user, PID and network namespaces")
            || message.contains("could not drop supplementary groups"),
        "{message}"
    );
    assert!(!message.contains("the program ran"), "{message}");
}

#[test]
fn a_bad_run_section_reports_every_problem_with_its_path() {
    use std::sync::Arc;
    use toolgate_core::{Format, Registry, ToolDefinition};
    let text = r#"
name = "bad_command"
description = "A command tool with every mistake. Use in tests only."
[[parameters]]
name = "path"
type = "string"
description = "A path"
[run]
kind = "command"
program = "wc"
args = ["-w", "{missing}", "--file={path}"]
env = ["NOT-A-NAME"]
output = "yaml"
shell = true
[run.sandbox]
read_paths = ["relative/dir", "/srv/../etc"]
allowed_hosts = ["example.com", "example.com:0"]
"#;
    let registry = Arc::new(Registry::new());
    registry.add_run_kind(Arc::new(toolgate_sandbox::CommandKind));
    let err = registry
        .register_definition(ToolDefinition::parse(text, Format::Toml).unwrap())
        .unwrap_err();
    let text = format!("{err:?}");
    for path in [
        "run.program",
        "run.args[1]",
        "run.args[2]",
        "run.env[0]",
        "run.output",
        "run.shell",
        "run.sandbox.read_paths[0]",
        "run.sandbox.read_paths[1]",
        "run.sandbox.allowed_hosts[0]",
        "run.sandbox.allowed_hosts[1]",
    ] {
        assert!(
            text.contains(&format!("path: \"{path}\"")),
            "{path} missing from {text}"
        );
    }
}
