//! Tools that need the production pipeline, over REST: a `command` tool added with
//! `POST /v1/tools` runs its program through the sandbox executor (a pipeline without it refuses
//! the call as `unavailable`), and an `http` tool's request goes through the policy client under
//! the `[network]` policy: refused on a loopback address by default, let through when
//! `private_hosts` names the host (a pipeline without the client fails both as `unavailable`).
#![cfg(test)]

mod common;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use axum::http::{Method, StatusCode};
use common::Harness;
use serde_json::{Value, json};
use toolgate_net::NetPolicy;
use toolgate_server::GatewayOptions;

const CALL: &str = "/v1/tools/{name}/call";

/// Adds `definition` through `POST /v1/tools` and checks it was created.
async fn add(h: &Harness, definition: Value) {
    let r = h
        .api(
            Method::POST,
            "/v1/tools",
            "/v1/tools",
            None,
            Some(definition),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
}

/// Calls `tool` through `POST /v1/tools/{name}/call` and returns the envelope.
async fn call(h: &Harness, tool: &str, arguments: Value) -> Value {
    let uri = format!("/v1/tools/{tool}/call");
    let r = h
        .api(
            Method::POST,
            CALL,
            &uri,
            None,
            Some(json!({ "arguments": arguments })),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    r.json
}

/// A command tool running `/bin/echo said: {words}` (an argument list, never a shell) at
/// `isolation`.
fn echo_tool(name: &str, isolation: &str) -> Value {
    json!({
        "name": name,
        "description": "Echoes the words it is given; for the REST tests of command tools.",
        "category": "system",
        "effect": "read",
        "parameters": [
            { "name": "words", "type": "string", "description": "What to echo", "required": true }
        ],
        "constraints": { "isolation": isolation, "timeout_ms": 5000, "retryable": false },
        "run": {
            "kind": "command",
            "program": "/bin/echo",
            "args": ["said:", "{words}"],
            "output": "text"
        }
    })
}

#[tokio::test]
async fn a_command_tool_added_over_rest_runs_its_program_in_the_sandbox() {
    let h = Harness::new(Vec::new()).await;
    for isolation in ["none", "standard"] {
        let name = format!("echo_{isolation}");
        add(&h, echo_tool(&name, isolation)).await;
        let r = call(&h, &name, json!({ "words": "hello; rm -rf /" })).await;
        // One argument, passed as is: no shell ever saw it.
        assert_eq!(r["data"], "said: hello; rm -rf /", "{isolation}: {r}");

        // The call is audited like any other.
        let id = r["callId"].as_str().unwrap();
        let uri = format!("/v1/calls/{id}");
        let audited = h
            .api(Method::GET, "/v1/calls/{callId}", &uri, None, None)
            .await;
        assert_eq!(audited.status, StatusCode::OK, "{}", audited.text);
        assert_eq!(
            audited.json["finished"]["tool"],
            name.as_str(),
            "{}",
            audited.text
        );
    }
}

#[tokio::test]
async fn a_failing_command_is_an_execution_error_naming_its_exit_code() {
    let h = Harness::new(Vec::new()).await;
    let mut def = echo_tool("list_missing", "standard");
    def["run"]["program"] = json!("/bin/ls");
    def["run"]["args"] = json!(["{words}"]);
    add(&h, def).await;
    let r = call(
        &h,
        "list_missing",
        json!({ "words": "/definitely/not/here" }),
    )
    .await;
    assert_eq!(r["errorKind"], "execution", "{r}");
    let message = r["error"].as_str().unwrap();
    assert!(message.contains("exited with code 2"), "{message}");
}

/// A fake API on 127.0.0.1 that counts the requests it gets.
struct FakeApi {
    addr: SocketAddr,
    hits: Arc<AtomicU32>,
}

impl FakeApi {
    async fn start() -> Self {
        let hits = Arc::new(AtomicU32::new(0));
        let count = Arc::clone(&hits);
        let app = axum::Router::new().route(
            "/v1/status",
            axum::routing::get(move || {
                count.fetch_add(1, Ordering::SeqCst);
                async { axum::Json(json!({ "status": { "healthy": true, "version": "4.2" } })) }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Self { addr, hits }
    }

    fn hits(&self) -> u32 {
        self.hits.load(Ordering::SeqCst)
    }

    /// An `http` tool reading the fake API's status.
    fn status_tool(&self) -> Value {
        json!({
            "name": "intranet_status",
            "description": "Reads the status of the intranet service; for the REST tests of the network policy.",
            "category": "external_api",
            "effect": "read",
            "constraints": { "retryable": false },
            "run": {
                "kind": "http",
                "url": format!("http://{}/v1/status", self.addr),
                "response": "/status"
            }
        })
    }
}

#[tokio::test]
async fn the_default_network_policy_refuses_an_http_tool_aimed_at_loopback() {
    // The runtime applies TOOLGATE_ALLOW_PRIVATE_NETWORK as production does; set in the
    // environment of whoever runs the tests, it opens loopback to every tool.
    if NetPolicy::default().with_env().allow_private_network {
        eprintln!(
            "note: skipped: {} is set, which lets every tool reach loopback",
            toolgate_net::ALLOW_PRIVATE_ENV
        );
        return;
    }
    let api = FakeApi::start().await;
    let h = Harness::with_network(GatewayOptions::default(), NetPolicy::default()).await;
    add(&h, api.status_tool()).await;
    let r = call(&h, "intranet_status", json!({})).await;
    // The policy client's refusal (authorization), not a missing client (unavailable).
    assert_eq!(r["errorKind"], "authorization", "{r}");
    let message = r["error"].as_str().unwrap();
    assert!(message.contains("loopback"), "{message}");
    assert_eq!(api.hits(), 0, "nothing reached the fake API");
}

#[tokio::test]
async fn a_network_policy_naming_the_host_lets_the_http_tool_through() {
    let api = FakeApi::start().await;
    let network = NetPolicy {
        private_hosts: vec!["127.0.0.1".to_owned()],
        ..NetPolicy::default()
    };
    let h = Harness::with_network(GatewayOptions::default(), network).await;
    add(&h, api.status_tool()).await;
    let r = call(&h, "intranet_status", json!({})).await;
    assert_eq!(
        r["data"],
        json!({ "healthy": true, "version": "4.2" }),
        "{r}"
    );
    assert_eq!(api.hits(), 1);
}
