//! Shared helpers of the web tools' tests: a fake HTTP server on 127.0.0.1 that answers with
//! canned replies and records every request (path, query, headers), and a real pipeline with
//! toolgate-net's policy client (private network allowed, so the fake server is reachable).
#![cfg(test)]
#![allow(dead_code)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::Request;
use axum::response::Response;
use serde_json::Value;
use toolgate_core::{
    CallRequest, CancellationToken, ErrorKind, Pipeline, PipelineBuilder, Registry, RetryPolicy,
    Tool, ToolResult,
};
use toolgate_net::{NetPolicy, PolicyClient};

/// One request the fake server received.
#[derive(Clone, Debug)]
pub struct Recorded {
    pub method: String,
    /// The path as sent, percent-encoding kept.
    pub raw_path: String,
    /// The query string as sent (empty when there is none).
    pub raw_query: String,
    /// The query decoded into pairs, in order.
    pub params: Vec<(String, String)>,
    pub headers: Vec<(String, String)>,
}

impl Recorded {
    /// The first value of query parameter `name`.
    pub fn param(&self, name: &str) -> Option<&str> {
        self.params
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// The names of the query parameters, in order.
    pub fn param_names(&self) -> Vec<&str> {
        self.params.iter().map(|(k, _)| k.as_str()).collect()
    }

    /// The first header `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// Everything the request carried, as one string (to look for leaked secrets).
    pub fn everything(&self) -> String {
        format!(
            "{} {}?{} {:?}",
            self.method, self.raw_path, self.raw_query, self.headers
        )
    }
}

/// A canned answer.
#[derive(Clone, Debug)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    pub delay: Option<Duration>,
}

impl Reply {
    /// A JSON body with `status`.
    pub fn json(status: u16, body: &Value) -> Self {
        Self::raw(status, "application/json; charset=utf-8", body.to_string())
    }

    /// A body of the given content type.
    pub fn raw(status: u16, content_type: &str, body: impl Into<Vec<u8>>) -> Self {
        let mut headers = Vec::new();
        if !content_type.is_empty() {
            headers.push(("content-type".to_owned(), content_type.to_owned()));
        }
        Self {
            status,
            headers,
            body: body.into(),
            delay: None,
        }
    }

    /// An HTML page.
    pub fn html(body: &str) -> Self {
        Self::raw(200, "text/html; charset=utf-8", body.to_owned())
    }

    /// Adds a header.
    #[must_use]
    pub fn header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.to_owned(), value.to_owned()));
        self
    }

    /// Waits this long before answering.
    #[must_use]
    pub fn delayed(mut self, delay: Duration) -> Self {
        self.delay = Some(delay);
        self
    }
}

type Handler = dyn Fn(&Recorded) -> Reply + Send + Sync;

/// A fake server on 127.0.0.1 (a port of its own) answering every request with `handler`.
pub struct FakeServer {
    /// `http://127.0.0.1:PORT`, no trailing slash.
    pub base: String,
    requests: Arc<Mutex<Vec<Recorded>>>,
}

impl FakeServer {
    pub async fn start(handler: impl Fn(&Recorded) -> Reply + Send + Sync + 'static) -> Self {
        let handler: Arc<Handler> = Arc::new(handler);
        let requests = Arc::new(Mutex::new(Vec::new()));
        let log = Arc::clone(&requests);
        let app = Router::new().fallback(move |request: Request| {
            let handler = Arc::clone(&handler);
            let log = Arc::clone(&log);
            async move { answer(handler.as_ref(), &log, request).await }
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        Self { base, requests }
    }

    /// A server that always gives the same reply.
    pub async fn always(reply: Reply) -> Self {
        Self::start(move |_| reply.clone()).await
    }

    /// The requests received so far.
    pub fn requests(&self) -> Vec<Recorded> {
        self.requests.lock().unwrap().clone()
    }

    /// The only request received (panics unless there was exactly one).
    pub fn only_request(&self) -> Recorded {
        let all = self.requests();
        assert_eq!(all.len(), 1, "expected one request, got {all:#?}");
        all.into_iter().next().unwrap()
    }

    /// `base` + `path`.
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// `text` with this server's address replaced by `http://fake` (stable snapshots).
    pub fn mask(&self, text: &str) -> String {
        text.replace(&self.base, "http://fake")
    }
}

async fn answer(handler: &Handler, log: &Mutex<Vec<Recorded>>, request: Request) -> Response {
    let uri = request.uri().clone();
    let raw_query = uri.query().unwrap_or("").to_owned();
    let recorded = Recorded {
        method: request.method().to_string(),
        raw_path: uri.path().to_owned(),
        params: url::form_urlencoded::parse(raw_query.as_bytes())
            .into_owned()
            .collect(),
        raw_query,
        headers: request
            .headers()
            .iter()
            .map(|(k, v)| {
                (
                    k.as_str().to_owned(),
                    v.to_str().unwrap_or("<bytes>").to_owned(),
                )
            })
            .collect(),
    };
    log.lock().unwrap().push(recorded.clone());
    let reply = handler(&recorded);
    if let Some(delay) = reply.delay {
        tokio::time::sleep(delay).await;
    }
    let mut response = Response::builder().status(reply.status);
    for (k, v) in &reply.headers {
        response = response.header(k, v);
    }
    response.body(Body::from(reply.body)).unwrap()
}

/// A pipeline with `tool` registered as a built-in and the policy client (private network
/// allowed) as its HTTP client; retries wait a millisecond.
pub fn pipeline(tool: Arc<dyn Tool>) -> Pipeline {
    pipeline_with(
        tool,
        NetPolicy {
            allow_private_network: true,
            ..NetPolicy::default()
        },
    )
}

/// [`pipeline`] with another network policy.
pub fn pipeline_with(tool: Arc<dyn Tool>, policy: NetPolicy) -> Pipeline {
    let registry = Arc::new(Registry::new());
    registry.register_builtin(tool).unwrap();
    let client = PolicyClient::new(policy).unwrap();
    PipelineBuilder::new(registry)
        .http_client(Arc::new(client))
        .retry_policy(RetryPolicy {
            base: Duration::from_millis(1),
            max: Duration::from_millis(2),
        })
        .build()
}

/// Calls `tool` through `pipeline` as the local operator.
pub async fn call(pipeline: &Pipeline, tool: &str, args: Value) -> ToolResult {
    pipeline.call(CallRequest::new(tool, args)).await
}

/// Calls `tool`, cancelling the call after `after`.
pub async fn call_cancelled_after(
    pipeline: &Pipeline,
    tool: &str,
    args: Value,
    after: Duration,
) -> ToolResult {
    let token = CancellationToken::new();
    let trigger = token.clone();
    tokio::spawn(async move {
        tokio::time::sleep(after).await;
        trigger.cancel();
    });
    pipeline
        .call(CallRequest::new(tool, args).cancel_token(token))
        .await
}

/// The data of a successful result (panics with the error otherwise).
pub fn data(result: &ToolResult) -> &Value {
    result.data().unwrap_or_else(|| {
        panic!(
            "expected data, got {:?}: {:?}",
            result.error_kind(),
            result.error()
        )
    })
}

/// The kind and message of a failed result (panics with the data otherwise).
pub fn failure(result: &ToolResult) -> (ErrorKind, String) {
    match (result.error_kind(), result.error()) {
        (Some(kind), Some(message)) => (kind, message.to_owned()),
        _ => panic!("expected an error, got {:?}", result.data()),
    }
}
