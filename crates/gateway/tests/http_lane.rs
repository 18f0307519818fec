//! The fast lane of Streamable HTTP upstreams against a server that, as the Python and
//! TypeScript SDKs do, sends a call's progress, log messages and requests on the call's own
//! POST stream: each caller gets its own upstream's logs and progress before the result (also
//! with several calls in flight), and the upstream's elicitation on a call's stream is answered
//! by that call's client.
#![cfg(test)]

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use futures_util::stream;
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};
use toolgate_core::LogLevel;
use toolgate_gateway::ServerEntry;
use toolgate_gateway::upstream::http::PolicyConnector;
use toolgate_gateway::upstream::{Connector, Upstream};
use toolgate_net::NetPolicy;

mod common;

const SESSION: &str = "raw-session";

/// A hand-written Streamable HTTP MCP server: `chatty` (two progress notifications and two log
/// messages on its stream, 30 ms apart, then the text back), `ask` (asks its client for a name
/// by elicitation on its stream, then greets it).
#[derive(Clone, Default)]
struct Raw {
    /// Answers the server awaits, by the id of its request.
    waiting: Arc<Mutex<HashMap<String, oneshot::Sender<Value>>>>,
    /// Every JSON-RPC message posted, in order.
    posted: Arc<Mutex<Vec<Value>>>,
}

fn json_reply(id: &Value, result: Value) -> Response {
    let body = json!({"jsonrpc": "2.0", "id": id, "result": result});
    (
        [
            ("content-type", "application/json"),
            ("mcp-session-id", SESSION),
        ],
        body.to_string(),
    )
        .into_response()
}

fn sse_event(message: &Value) -> Result<Bytes, Infallible> {
    Ok(Bytes::from(format!("event: message\ndata: {message}\n\n")))
}

impl Raw {
    async fn post(&self, headers: HeaderMap, body: Bytes) -> Response {
        let message: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        self.posted.lock().unwrap().push(message.clone());
        let method = message["method"].as_str().unwrap_or_default().to_owned();
        let id = message["id"].clone();
        if method != "initialize"
            && headers.get("mcp-session-id").and_then(|v| v.to_str().ok()) != Some(SESSION)
        {
            return (StatusCode::NOT_FOUND, "no such session").into_response();
        }
        if method.is_empty() {
            // An answer to one of our requests.
            if let Some(key) = id.as_str()
                && let Some(waiter) = self.waiting.lock().unwrap().remove(key)
            {
                let _ = waiter.send(message);
            }
            return StatusCode::ACCEPTED.into_response();
        }
        if id.is_null() {
            return StatusCode::ACCEPTED.into_response();
        }
        match method.as_str() {
            "initialize" => json_reply(
                &id,
                json!({
                    "protocolVersion": "2025-06-18",
                    // No `logging` capability: calls to an HTTP upstream that declares it
                    // keep rmcp's client (its logs may ride the shared stream), so the lane's
                    // routing of messages on a call's own stream is what these tests reach.
                    "capabilities": {"tools": {}},
                    "serverInfo": {"name": "raw", "version": "1"}
                }),
            ),
            "tools/list" => json_reply(
                &id,
                json!({"tools": [
                    {"name": "chatty", "inputSchema": {"type": "object"}},
                    {"name": "ask", "inputSchema": {"type": "object"}}
                ]}),
            ),
            "tools/call" => self.call(id, &message["params"]),
            _ => json_reply(&id, json!({})),
        }
    }

    fn call(&self, id: Value, params: &Value) -> Response {
        let (tx, rx) = mpsc::channel::<Result<Bytes, Infallible>>(16);
        let name = params["name"].as_str().unwrap_or_default().to_owned();
        let text = params["arguments"]["text"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let token = params["_meta"]["progressToken"].clone();
        let waiting = Arc::clone(&self.waiting);
        tokio::spawn(async move {
            let out = match name.as_str() {
                "chatty" => {
                    for step in 1..=2 {
                        let progress = json!({"jsonrpc": "2.0", "method": "notifications/progress",
                            "params": {"progressToken": token, "progress": step, "message": format!("{text} step {step}")}});
                        let log = json!({"jsonrpc": "2.0", "method": "notifications/message",
                            "params": {"level": "info", "logger": "raw", "data": format!("{text} log {step}")}});
                        let _ = tx.send(sse_event(&progress)).await;
                        let _ = tx.send(sse_event(&log)).await;
                        tokio::time::sleep(Duration::from_millis(30)).await;
                    }
                    format!("{text} done")
                }
                "ask" => {
                    let key = format!("elicit-{}", id);
                    let (answer_tx, answer_rx) = oneshot::channel();
                    waiting.lock().unwrap().insert(key.clone(), answer_tx);
                    let request = json!({"jsonrpc": "2.0", "id": key, "method": "elicitation/create",
                        "params": {"message": "Your name?", "requestedSchema": {"type": "object",
                            "properties": {"name": {"type": "string"}}}}});
                    let _ = tx.send(sse_event(&request)).await;
                    match tokio::time::timeout(Duration::from_secs(10), answer_rx).await {
                        Ok(Ok(answer)) => match answer["result"]["content"]["name"].as_str() {
                            Some(name) => format!("hello {name}"),
                            None => format!("no name: {answer}"),
                        },
                        _ => "no answer".to_owned(),
                    }
                }
                other => format!("no tool {other}"),
            };
            let result = json!({"jsonrpc": "2.0", "id": id,
                "result": {"content": [{"type": "text", "text": out}]}});
            let _ = tx.send(sse_event(&result)).await;
        });
        let body = stream::unfold(rx, |mut rx| async move {
            rx.recv().await.map(|item| (item, rx))
        });
        (
            [("content-type", "text/event-stream")],
            Body::from_stream(body),
        )
            .into_response()
    }
}

async fn serve() -> (String, Raw) {
    let raw = Raw::default();
    let state = raw.clone();
    let app = axum::Router::new().route(
        "/mcp",
        axum::routing::post(move |headers: HeaderMap, body: Bytes| {
            let state = state.clone();
            async move { state.post(headers, body).await }
        })
        .get(|| async { StatusCode::METHOD_NOT_ALLOWED })
        .delete(|| async { StatusCode::OK }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://{addr}/mcp"), raw)
}

fn upstream(url: String) -> Upstream {
    let policy = NetPolicy {
        private_hosts: vec!["127.0.0.1".into()],
        ..NetPolicy::default()
    };
    let entry = ServerEntry {
        url: Some(url),
        ..ServerEntry::default()
    };
    let connector = Connector {
        stdio: Arc::new(common::TestSpawner::default()),
        http: Some(PolicyConnector::new(policy).unwrap().http_connector()),
    };
    Upstream::new(common::server_name("raw"), entry, connector)
}

/// The ids of the `tools/call` requests the server got.
fn call_ids(raw: &Raw) -> Vec<Value> {
    raw.posted
        .lock()
        .unwrap()
        .iter()
        .filter(|m| m["method"] == "tools/call")
        .map(|m| m["id"].clone())
        .collect()
}

// On the multi-threaded runtime, as in production.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_and_logs_reach_the_caller_in_order_before_the_result() {
    let (url, raw) = serve().await;
    let up = upstream(url);
    let p = common::pipeline(&up);
    let progress = Arc::new(common::Progress::default());
    let client = Arc::new(common::Client::default());
    let r = p
        .call(
            common::request("chatty", json!({"text": "a"}))
                .progress(progress.clone())
                .client(client.clone()),
        )
        .await;
    assert_eq!(r.data(), Some(&json!("a done")), "{:?}", r.error());
    // Everything arrived before the result (toolgate's MCP server closes a call's channel to
    // its client with the result), in order.
    let reports = progress.0.lock().unwrap().clone();
    assert_eq!(
        reports,
        [
            (1.0, None, Some("a step 1".to_owned())),
            (2.0, None, Some("a step 2".to_owned())),
        ]
    );
    let logs = client.logs.lock().unwrap().clone();
    assert_eq!(
        logs,
        [
            (LogLevel::Info, Some("raw".to_owned()), json!("a log 1")),
            (LogLevel::Info, Some("raw".to_owned()), json!("a log 2")),
        ]
    );
    let ids = call_ids(&raw);
    assert!(
        ids.iter()
            .all(|id| id.as_str().is_some_and(|s| s.starts_with("tg-"))),
        "the call went through rmcp, not the lane: {ids:?}"
    );
    up.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_calls_in_flight_each_get_their_own_upstream_logs() {
    let (url, _raw) = serve().await;
    let up = upstream(url);
    let p = common::pipeline(&up);
    let one = Arc::new(common::Client::default());
    let two = Arc::new(common::Client::default());
    let (r1, r2) = tokio::join!(
        p.call(common::request("chatty", json!({"text": "one"})).client(one.clone())),
        p.call(common::request("chatty", json!({"text": "two"})).client(two.clone())),
    );
    assert_eq!(r1.data(), Some(&json!("one done")), "{:?}", r1.error());
    assert_eq!(r2.data(), Some(&json!("two done")), "{:?}", r2.error());
    let data = |c: &common::Client| -> Vec<Value> {
        c.logs.lock().unwrap().iter().map(|l| l.2.clone()).collect()
    };
    assert_eq!(data(&one), [json!("one log 1"), json!("one log 2")]);
    assert_eq!(data(&two), [json!("two log 1"), json!("two log 2")]);
    up.stop().await;
}

#[tokio::test]
async fn an_elicitation_on_a_calls_stream_is_answered_by_its_client() {
    let (url, raw) = serve().await;
    let up = upstream(url);
    let p = common::pipeline(&up);
    let client = Arc::new(common::Client {
        can: true,
        ..common::Client::default()
    });
    let r = p
        .call(common::request("ask", json!({})).client(client.clone()))
        .await;
    assert_eq!(r.data(), Some(&json!("hello Ada")), "{:?}", r.error());
    assert_eq!(*client.asked.lock().unwrap(), ["Your name?"]);
    // The answer went back in the session, to the request's id.
    let answers: Vec<Value> = raw
        .posted
        .lock()
        .unwrap()
        .iter()
        .filter(|m| m.get("method").is_none())
        .cloned()
        .collect();
    assert_eq!(answers.len(), 1, "{answers:?}");
    assert!(answers[0]["id"].as_str().unwrap().starts_with("elicit-"));
    // A client that cannot answer gets the request refused, and the call still ends.
    let r = p
        .call(common::request("ask", json!({})).client(Arc::new(common::Client::default())))
        .await;
    let said = r
        .data()
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    assert!(said.starts_with("no name"), "{said}");
    let refusal = raw
        .posted
        .lock()
        .unwrap()
        .iter()
        .rev()
        .find(|m| m.get("method").is_none())
        .cloned()
        .unwrap();
    let message = refusal["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("cannot answer elicitation requests"),
        "{refusal}"
    );
    up.stop().await;
}
