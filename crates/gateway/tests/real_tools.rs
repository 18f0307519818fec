//! The pure model against real upstreams: the official everything and filesystem servers
//! (npm, pinned in tests/mcp-servers/) are started, their `tools/list` read over stdio, and
//! every tool named (`naming::assign`), governed (`govern::definition`), registered in a core
//! `Registry` and pinned (`pin::hash`, stable across two listings).
#![cfg(test)]

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::mpsc;
use std::time::Duration;

use serde_json::{Value, json};
use toolgate_core::{Consequence, Effect, Registry, ToolBuilder, validate};
use toolgate_gateway::config::PrefixMode;
use toolgate_gateway::{ServerEntry, ServerName, UpstreamTool, govern, naming, pin};
use toolgate_test_support::mcp_fixtures::{self, Launch};

/// Starts `launch`, initialises, and returns its `tools/list` (the server is killed after).
fn list_tools(launch: &Launch) -> Vec<UpstreamTool> {
    let mut child = Command::new(&launch.program)
        .args(&launch.args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel::<Value>();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if let Ok(v) = serde_json::from_str::<Value>(&line)
                && tx.send(v).is_err()
            {
                break;
            }
        }
    });
    let mut send = |m: Value| {
        writeln!(stdin, "{m}").unwrap();
        stdin.flush().unwrap();
    };
    let reply = |id: u64| loop {
        let m = rx
            .recv_timeout(Duration::from_secs(60))
            .expect("the server answers within 60 s");
        if m["id"] == json!(id) {
            return m;
        }
    };
    send(
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "toolgate-gateway-test", "version": "0"}}}),
    );
    reply(1);
    send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    send(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}));
    let listed = reply(2);
    let _ = child.kill();
    let _ = child.wait();
    listed["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| UpstreamTool::from_json(t).unwrap())
        .collect()
}

fn entry(text: &str) -> ServerEntry {
    toml::from_str(text).unwrap()
}

/// Names, governs and registers every tool of `server`, as the runtime does.
fn register(
    registry: &Registry,
    server: &ServerName,
    entry: &ServerEntry,
    tools: &[UpstreamTool],
) -> Vec<String> {
    let upstream: Vec<String> = tools.iter().map(|t| t.name.clone()).collect();
    let taken = |n: &str| registry.get(n).map(|_| format!("the tool {n}"));
    let assigned = naming::assign(server, entry.prefix, &upstream, &taken).unwrap();
    let mut names = Vec::new();
    for (tool, (up, name)) in tools.iter().zip(&assigned) {
        assert_eq!(&tool.name, up);
        let def = govern::definition(server, entry, tool, name)
            .unwrap_or_else(|issues| panic!("{}: {issues:?}", tool.name));
        assert_eq!(def.input_schema.as_ref(), Some(&tool.input_schema));
        assert_eq!(def.output_schema, tool.output_schema);
        assert_eq!(Some(&def.description), tool.description.as_ref());
        let up = govern::Upstream::of(&def).unwrap();
        assert_eq!(up.hash, pin::hash(tool));
        let handler = ToolBuilder::from_definition(def).handler(|args, _| async move { Ok(args) });
        registry.register(Arc::new(handler)).unwrap();
        names.push(name.to_string());
    }
    names
}

#[test]
fn the_official_servers_tools_become_valid_governed_toolgate_tools() {
    let what = "the gateway model against the real npm servers";
    let Some(everything) = mcp_fixtures::everything(what) else {
        return;
    };
    let root = tempfile::tempdir().unwrap();
    let Some(filesystem) = mcp_fixtures::filesystem(what, &[root.path()]) else {
        return;
    };
    let ev_tools = list_tools(&everything);
    let fs_tools = list_tools(&filesystem);
    assert!(ev_tools.len() >= 5 && fs_tools.len() >= 10);

    // Pinned: a second listing gives the same hashes (nothing volatile is hashed).
    let again: Vec<String> = list_tools(&everything).iter().map(pin::hash).collect();
    let first: Vec<String> = ev_tools.iter().map(pin::hash).collect();
    assert_eq!(first, again);
    assert!(pin::diff(&ev_tools[0], &ev_tools[0]).is_empty());

    let registry = Registry::new();
    let untrusted = entry("command = \"/usr/bin/node\"\n");
    let ev = register(
        &registry,
        &ServerName::parse("everything").unwrap(),
        &untrusted,
        &ev_tools,
    );
    let fs = register(
        &registry,
        &ServerName::parse("files").unwrap(),
        &untrusted,
        &fs_tools,
    );
    insta::assert_snapshot!("real_tool_names", [ev, fs].concat().join("\n"));

    let resolved = |name: &str| *registry.get(name).unwrap().spec().resolved();
    // Untrusted: read-only tools run without confirmation, everything else needs it.
    let echo = resolved("everything__echo");
    assert_eq!(
        (echo.effect, echo.requires_confirmation),
        (Effect::Read, false)
    );
    let logging = resolved("everything__toggle_simulated_logging");
    assert_eq!(
        (logging.effect, logging.requires_confirmation),
        (Effect::SideEffect, true)
    );
    let write = resolved("files__write_file");
    assert_eq!(
        (write.effect, write.requires_confirmation),
        (Effect::SideEffect, true)
    );
    assert!(!resolved("files__create_directory").idempotent);

    // Trusted: the annotations decide.
    let trusted = entry("command = \"/usr/bin/node\"\ntrust_annotations = true\n");
    let s = ServerName::parse("files").unwrap();
    let by_name = |n: &str| fs_tools.iter().find(|t| t.name == n).unwrap();
    let governed = |n: &str| {
        let name = toolgate_core::ToolName::parse(&naming::prefixed(&s, n)).unwrap();
        let def = govern::definition(&s, &trusted, by_name(n), &name).unwrap();
        *validate(&def).unwrap().resolved()
    };
    let w = governed("write_file"); // destructive, idempotent
    assert_eq!(
        (
            w.effect,
            w.consequence,
            w.requires_confirmation,
            w.idempotent
        ),
        (Effect::SideEffect, Consequence::High, true, true)
    );
    let mkdir = governed("create_directory"); // not destructive
    assert_eq!(
        (mkdir.requires_confirmation, mkdir.idempotent),
        (false, true)
    );

    // Conditional prefixes: the filesystem tools keep their bare names when free.
    let conditional = ServerEntry {
        prefix: PrefixMode::Conditional,
        ..untrusted.clone()
    };
    let other = Registry::new();
    let bare = register(&other, &s, &conditional, &fs_tools);
    assert!(bare.iter().any(|n| n == "read_text_file"), "{bare:?}");
    // And then collide with a second server that lists the same tools without a prefix.
    let names: Vec<String> = fs_tools.iter().map(|t| t.name.clone()).collect();
    let taken = |n: &str| {
        other
            .get(n)
            .map(|_| format!("upstream tool {n:?} of server files"))
    };
    let err = naming::assign(
        &ServerName::parse("files2").unwrap(),
        PrefixMode::Never,
        &names,
        &taken,
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("Tool name read_text_file is already used by upstream tool \"read_text_file\" of server files"),
        "{err}"
    );
}
