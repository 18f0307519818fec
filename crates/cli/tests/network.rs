//! The binary's network wiring end to end: web_search configured by environment variables, an
//! `http` definition from the tools directory, todo plans surviving a restart, and the network
//! policy's default refusal of the local fake server (lifted by TOOLGATE_ALLOW_PRIVATE_NETWORK).
#![cfg(test)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use toolgate_test_support::cli::Toolgate;

const BIN: &str = env!("CARGO_BIN_EXE_toolgate");

/// A tiny HTTP server on 127.0.0.1 answering every request with `body` (JSON) and recording
/// each request line.
struct Fake {
    port: u16,
    requests: Arc<Mutex<Vec<String>>>,
}

impl Fake {
    fn start(body: &'static str) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let requests: Arc<Mutex<Vec<String>>> = Arc::default();
        let seen = Arc::clone(&requests);
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut line = String::new();
                reader.read_line(&mut line).unwrap();
                let mut length = 0usize;
                loop {
                    let mut header = String::new();
                    reader.read_line(&mut header).unwrap();
                    if header.trim().is_empty() {
                        break;
                    }
                    if let Some(v) = header.to_ascii_lowercase().strip_prefix("content-length:") {
                        length = v.trim().parse().unwrap();
                    }
                }
                let mut body_in = vec![0; length];
                reader.read_exact(&mut body_in).unwrap();
                seen.lock().unwrap().push(line.trim().to_owned());
                let reply = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                stream.write_all(reply.as_bytes()).unwrap();
            }
        });
        Self { port, requests }
    }

    fn requests(&self) -> Vec<String> {
        self.requests.lock().unwrap().clone()
    }
}

fn toolgate(dir: &Path, args: &[&str], env: &[(&str, String)]) -> (i32, Value) {
    let mut cmd = Toolgate::new(BIN, dir).command();
    cmd.args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let json = serde_json::from_str(&stdout).unwrap_or_else(|_| {
        panic!(
            "not JSON: {stdout}\nstderr: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code().unwrap(), json)
}

const SEARXNG: &str = r#"{"query":"rust","results":[{"title":"Rust","url":"https://www.rust-lang.org/","content":"A language empowering everyone."}]}"#;

#[test]
fn web_search_is_configured_from_the_environment_and_the_policy_guards_it() {
    let dir = tempfile::tempdir().unwrap();
    let fake = Fake::start(SEARXNG);
    let engine = [
        ("TOOLGATE_SEARCH_ENGINE", "searxng".to_owned()),
        (
            "TOOLGATE_SEARCH_BASE_URL",
            format!("http://127.0.0.1:{}", fake.port),
        ),
    ];
    let args = [
        "call",
        "web_search",
        "--args",
        r#"{"query": "rust", "num_results": 3}"#,
        "--json",
    ];

    // Default policy: the engine's address is loopback, so the call is refused unsent.
    let (code, env) = toolgate(dir.path(), &args, &engine);
    assert_eq!(code, 1, "{env}");
    assert_eq!(env["errorKind"], "authorization", "{env}");
    assert!(fake.requests().is_empty());

    let mut allowed = engine.to_vec();
    allowed.push(("TOOLGATE_ALLOW_PRIVATE_NETWORK", "1".to_owned()));
    let (code, env) = toolgate(dir.path(), &args, &allowed);
    assert_eq!(code, 0, "{env}");
    assert_eq!(
        env["data"],
        json!({"results": [{"title": "Rust", "snippet": "A language empowering everyone.", "url": "https://www.rust-lang.org/"}]})
    );
    let requests = fake.requests();
    assert_eq!(requests.len(), 1);
    assert!(
        requests[0].starts_with("GET /search?") && requests[0].contains("format=json"),
        "{requests:?}"
    );

    // No engine at all: unavailable, naming the setting.
    let (code, env) = toolgate(dir.path(), &args, &[]);
    assert_eq!(code, 1);
    assert_eq!(env["errorKind"], "unavailable");
    assert!(
        env["error"]
            .as_str()
            .unwrap()
            .contains("TOOLGATE_SEARCH_ENGINE"),
        "{env}"
    );
}

#[test]
fn an_http_definition_in_the_tools_directory_is_callable() {
    let dir = tempfile::tempdir().unwrap();
    let fake = Fake::start(r#"{"current": {"temp": 3.5}}"#);
    std::fs::create_dir(dir.path().join("tools")).unwrap();
    std::fs::write(
        dir.path().join("tools/temp.toml"),
        format!(
            r#"
name = "city_temperature"
description = "Temperature in a city."
category = "external_api"
effect = "read"

[[parameters]]
name = "city"
type = "string"
required = true

[run]
kind = "http"
url = "http://127.0.0.1:{}/weather/{{city}}"
response = "/current/temp"
"#,
            fake.port
        ),
    )
    .unwrap();
    let (code, env) = toolgate(
        dir.path(),
        &[
            "--tools-dir",
            "tools",
            "call",
            "city_temperature",
            "--args",
            r#"{"city": "New York"}"#,
            "--json",
        ],
        &[("TOOLGATE_ALLOW_PRIVATE_NETWORK", "1".to_owned())],
    );
    assert_eq!(code, 0, "{env}");
    assert_eq!(env["data"], json!(3.5));
    assert_eq!(fake.requests(), ["GET /weather/New%20York HTTP/1.1"]);
}

#[test]
fn todo_plans_survive_a_restart_of_the_binary() {
    let dir = tempfile::tempdir().unwrap();
    let create = json!({"action": "create", "items": [
        {"id": "1", "content": "Gather context", "status": "pending"},
        {"id": "2", "content": "Map domains", "status": "pending"}
    ]})
    .to_string();
    let (code, env) = toolgate(
        dir.path(),
        &["call", "todo_manager", "--args", &create, "--json"],
        &[],
    );
    assert_eq!(code, 0, "{env}");
    // A new process, the same database: the plan is still there.
    let (code, env) = toolgate(
        dir.path(),
        &[
            "call",
            "todo_manager",
            "--args",
            r#"{"action": "list"}"#,
            "--json",
        ],
        &[],
    );
    assert_eq!(code, 0, "{env}");
    assert_eq!(
        env["data"]["items"],
        json!([
            {"id": "1", "content": "Gather context", "status": "in_progress"},
            {"id": "2", "content": "Map domains", "status": "pending"}
        ])
    );
}
