//! The MCP fixture servers start over stdio as [`mcp_fixtures`] launches them (absolute program,
//! an empty environment but for what a test gives) and answer `initialize` and `tools/list` with
//! the tools the gateway's tests rely on; the Python fixture's `drifting` tool changes its
//! description while its drift file exists. Skipped without the fixtures, failing with `CI=true`.
#![cfg(test)]

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use toolgate_test_support::mcp_fixtures::{self, Launch};

/// Starts `launch` with only `env` in its environment, sends initialize, initialized and one
/// `tools/list` per element of `between` (running that closure first), and returns each list's
/// tools.
fn list_tools(launch: &Launch, env: &[(&str, &str)], between: &[&dyn Fn()]) -> Vec<Vec<Value>> {
    let mut child = Command::new(&launch.program)
        .args(&launch.args)
        .env_clear()
        .envs(env.iter().copied())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("starting {launch:?}: {e}"));
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut send = |v: Value| {
        writeln!(stdin, "{v}").unwrap();
        stdin.flush().unwrap();
    };
    let mut read_reply = |id: u64| -> Value {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            assert!(Instant::now() < deadline, "no reply {id} from {launch:?}");
            let mut line = String::new();
            assert!(
                stdout.read_line(&mut line).unwrap() > 0,
                "{launch:?} closed stdout"
            );
            let Ok(msg) = serde_json::from_str::<Value>(&line) else {
                continue;
            };
            if msg["id"] == json!(id) {
                return msg;
            }
        }
    };
    send(
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "toolgate-test", "version": "0"}}}),
    );
    let init = read_reply(1);
    assert!(
        init["result"]["capabilities"]["tools"].is_object(),
        "{init}"
    );
    send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    let mut lists = Vec::new();
    for (i, before) in between.iter().enumerate() {
        before();
        let id = 2 + i as u64;
        send(json!({"jsonrpc": "2.0", "id": id, "method": "tools/list"}));
        let reply = read_reply(id);
        lists.push(
            reply["result"]["tools"]
                .as_array()
                .cloned()
                .unwrap_or_default(),
        );
    }
    child.kill().ok();
    child.wait().ok();
    lists
}

fn names(tools: &[Value]) -> Vec<&str> {
    tools.iter().filter_map(|t| t["name"].as_str()).collect()
}

#[test]
fn the_python_fixture_lists_its_tools_and_drifts() {
    let Some(launch) = mcp_fixtures::py_server("the Python MCP fixture test") else {
        return;
    };
    assert!(launch.program.is_absolute());
    let dir = tempfile::tempdir().unwrap();
    let drift = dir.path().join("drift");
    let drift_str = drift.to_string_lossy().into_owned();
    let create = || std::fs::write(&drift, "x").unwrap();
    let lists = list_tools(
        &launch,
        &[("PY_SERVER_DRIFT_FILE", &drift_str)],
        &[&|| {}, &create],
    );
    let tools = names(&lists[0]);
    for expected in [
        "echo",
        "pixel",
        "weather",
        "count",
        "slow",
        "fail",
        "drifting",
        "environment",
        "notify_tools_changed",
    ] {
        assert!(
            tools.contains(&expected),
            "{expected} missing from {tools:?}"
        );
    }
    let description = |list: &[Value]| {
        list.iter()
            .find(|t| t["name"] == "drifting")
            .map(|t| t["description"].clone())
            .unwrap()
    };
    assert_ne!(description(&lists[0]), description(&lists[1]));
    assert!(
        lists[0]
            .iter()
            .any(|t| t["name"] == "weather" && t["outputSchema"].is_object())
    );
}

#[test]
fn the_official_everything_server_starts_over_stdio() {
    let Some(launch) = mcp_fixtures::everything("the everything-server fixture test") else {
        return;
    };
    let lists = list_tools(&launch, &[], &[&|| {}]);
    let tools = names(&lists[0]);
    assert!(tools.contains(&"echo"), "{tools:?}");
}

#[test]
fn the_official_filesystem_server_starts_with_its_root() {
    let dir = tempfile::tempdir().unwrap();
    let Some(launch) =
        mcp_fixtures::filesystem("the filesystem-server fixture test", &[dir.path()])
    else {
        return;
    };
    assert_eq!(
        launch.args.last().map(String::as_str),
        dir.path().to_str(),
        "the root is the last argument"
    );
    let lists = list_tools(&launch, &[], &[&|| {}]);
    let tools = names(&lists[0]);
    assert!(tools.contains(&"read_text_file"), "{tools:?}");
}
