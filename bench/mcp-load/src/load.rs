//! The load generator: one MCP session per worker, `tools/call` in a tight loop.
//!
//! Every worker owns one HTTP/1.1 keep-alive connection (hyper's low-level
//! client, no pool) and one MCP session: `initialize`, then
//! `notifications/initialized`, then back-to-back `tools/call` requests, each
//! sent as soon as the previous one's JSON-RPC response has arrived (closed
//! loop, concurrency = number of workers). Responses may come back as
//! `application/json` or as a `text/event-stream`; for the latter the SSE
//! `data:` payloads are parsed until the JSON-RPC response with the request's
//! id shows up, and the rest of the stream is drained so the connection can
//! be reused. Latency is measured from just before the request is sent until
//! that response has been parsed.

use std::{
    fmt::Write as _,
    sync::Arc,
    time::{Duration, Instant},
};

use anyhow::{Context as _, anyhow, bail};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{
    Method, Request, Response, StatusCode, Uri,
    body::Incoming,
    client::conn::http1::SendRequest,
    header::{self, HeaderMap, HeaderName, HeaderValue},
};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};

use crate::stats::Latencies;

const SESSION_HEADER: HeaderName = HeaderName::from_static("mcp-session-id");
const PROTOCOL_HEADER: HeaderName = HeaderName::from_static("mcp-protocol-version");
/// How many distinct error messages to print at the end.
const MAX_ERROR_SAMPLES: usize = 5;

/// Arguments of the `load` subcommand.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// MCP endpoint, e.g. http://127.0.0.1:8080/mcp (plain http only).
    #[arg(long)]
    url: String,
    /// Name of the tool to call.
    #[arg(long)]
    tool: String,
    /// Tool arguments as a JSON object.
    #[arg(long, default_value = "{}")]
    args: String,
    /// Number of concurrent workers, each with its own connection and session.
    #[arg(long, default_value_t = 16)]
    concurrency: usize,
    /// Measured duration in seconds (after the warm-up).
    #[arg(long, default_value_t = 10.0)]
    duration: f64,
    /// Warm-up in seconds: requests are sent but not counted.
    #[arg(long, default_value_t = 2.0)]
    warmup: f64,
    /// Bearer token sent as `Authorization: Bearer TOKEN`.
    #[arg(long, env = "MCP_LOAD_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// Protocol version requested in `initialize`.
    #[arg(long, default_value = "2025-06-18")]
    protocol_version: String,
    /// Tokio worker threads (default: one per CPU this process may run on).
    #[arg(long)]
    threads: Option<usize>,
    /// Label copied into the JSON result line.
    #[arg(long, default_value = "")]
    label: String,
    /// Print the first `tools/call` response to stderr.
    #[arg(long)]
    show_sample: bool,
}

/// Run the load generator and print one JSON result line on stdout.
pub fn run(args: Args) -> anyhow::Result<()> {
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    builder.enable_all();
    if let Some(threads) = args.threads {
        builder.worker_threads(threads.max(1));
    }
    let runtime = builder.build().context("building the tokio runtime")?;
    let threads = runtime.metrics().num_workers();
    let report = runtime.block_on(drive(&args))?;
    let result = json!({
        "label": args.label,
        "url": args.url,
        "tool": args.tool,
        "concurrency": args.concurrency,
        "threads": threads,
        "warmup_s": args.warmup,
        "duration_s": args.duration,
        "window_s": round(report.window.as_secs_f64(), 3),
        "total": report.ok + report.errors,
        "ok": report.ok,
        "errors": report.errors,
        "warmup_requests": report.warmup_requests,
        "rps": round(report.rps, 1),
        "p50_ms": round(report.summary.p50_ms, 3),
        "p90_ms": round(report.summary.p90_ms, 3),
        "p99_ms": round(report.summary.p99_ms, 3),
        "p999_ms": round(report.summary.p999_ms, 3),
        "max_ms": round(report.summary.max_ms, 3),
        "mean_ms": round(report.summary.mean_ms, 3),
    });
    println!("{result}");
    Ok(())
}

fn round(value: f64, decimals: i32) -> f64 {
    let factor = 10f64.powi(decimals);
    (value * factor).round() / factor
}

/// Where to connect and what to put in the request line and `Host`.
#[derive(Debug)]
struct Target {
    /// `host:port` for `TcpStream::connect`.
    connect: String,
    /// The path (and query) of the MCP endpoint.
    path: Uri,
    /// Headers sent with every request (static ones only).
    base_headers: HeaderMap,
    /// `{"jsonrpc":"2.0","id":` — the id follows.
    call_prefix: Bytes,
    /// `,"method":"tools/call","params":{...}}` — after the id.
    call_suffix: Bytes,
    protocol_version: String,
}

impl Target {
    fn new(args: &Args) -> anyhow::Result<Self> {
        let uri: Uri = args
            .url
            .parse()
            .with_context(|| format!("bad --url {}", args.url))?;
        if uri.scheme_str() != Some("http") {
            bail!("only http:// URLs are supported, got {}", args.url);
        }
        let authority = uri
            .authority()
            .ok_or_else(|| anyhow!("--url has no host: {}", args.url))?;
        let port = authority.port_u16().unwrap_or(80);
        let connect = format!("{}:{port}", authority.host());
        let path: Uri = uri
            .path_and_query()
            .map_or("/", |p| p.as_str())
            .parse()
            .context("bad path in --url")?;
        let host = HeaderValue::from_str(authority.as_str()).context("bad host in --url")?;

        let mut base_headers = HeaderMap::new();
        base_headers.insert(header::HOST, host);
        base_headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        base_headers.insert(
            header::ACCEPT,
            HeaderValue::from_static("application/json, text/event-stream"),
        );
        if let Some(token) = &args.token {
            let mut value = HeaderValue::from_str(&format!("Bearer {token}"))
                .context("--token is not a valid header value")?;
            value.set_sensitive(true);
            base_headers.insert(header::AUTHORIZATION, value);
        }

        let arguments: Value = serde_json::from_str(&args.args).context("--args is not JSON")?;
        if !arguments.is_object() {
            bail!("--args must be a JSON object");
        }
        let params = json!({ "name": args.tool, "arguments": arguments });
        let call_suffix = format!(r#","method":"tools/call","params":{params}}}"#);
        Ok(Self {
            connect,
            path,
            base_headers,
            call_prefix: Bytes::from_static(br#"{"jsonrpc":"2.0","id":"#),
            call_suffix: Bytes::from(call_suffix),
            protocol_version: args.protocol_version.clone(),
        })
    }

    fn call_body(&self, id: u64) -> Bytes {
        let mut body = Vec::with_capacity(self.call_prefix.len() + 20 + self.call_suffix.len());
        body.extend_from_slice(&self.call_prefix);
        let mut digits = String::with_capacity(20);
        let _ = write!(digits, "{id}");
        body.extend_from_slice(digits.as_bytes());
        body.extend_from_slice(&self.call_suffix);
        Bytes::from(body)
    }
}

/// The aggregated outcome of a run.
struct Report {
    ok: u64,
    errors: u64,
    warmup_requests: u64,
    window: Duration,
    rps: f64,
    summary: crate::stats::Summary,
}

async fn drive(args: &Args) -> anyhow::Result<Report> {
    if args.concurrency == 0 {
        bail!("--concurrency must be at least 1");
    }
    let warmup = Duration::try_from_secs_f64(args.warmup).context("bad --warmup")?;
    let duration = Duration::try_from_secs_f64(args.duration).context("bad --duration")?;
    if duration.is_zero() {
        bail!("--duration must be > 0");
    }
    let target = Arc::new(Target::new(args)?);

    // Phase 1: open every connection and session before the clock starts.
    let mut inits = tokio::task::JoinSet::new();
    for _ in 0..args.concurrency {
        let target = Arc::clone(&target);
        inits.spawn(async move { Session::open(target).await });
    }
    let mut sessions = Vec::with_capacity(args.concurrency);
    while let Some(joined) = inits.join_next().await {
        sessions.push(joined.context("session setup task panicked")??);
    }
    if args.show_sample
        && let Some(session) = sessions.first_mut()
    {
        let sample = session.call().await?;
        eprintln!("sample tools/call response: {sample}");
    }

    // Phase 2: closed-loop load.
    let start = Instant::now();
    let measure_from = start + warmup;
    let end = measure_from + duration;
    let mut workers = tokio::task::JoinSet::new();
    for session in sessions {
        workers.spawn(worker(session, measure_from, end));
    }
    let mut latencies = Latencies::default();
    let mut ok = 0u64;
    let mut errors = 0u64;
    let mut warmup_requests = 0u64;
    let mut last_done = measure_from;
    let mut error_samples: Vec<String> = Vec::new();
    let mut finished = Vec::new();
    while let Some(joined) = workers.join_next().await {
        let outcome = joined.context("worker task panicked")?;
        ok += outcome.ok;
        errors += outcome.errors;
        warmup_requests += outcome.warmup_requests;
        last_done = last_done.max(outcome.last_done);
        latencies.merge(outcome.latencies);
        for message in outcome.error_samples {
            if error_samples.len() < MAX_ERROR_SAMPLES && !error_samples.contains(&message) {
                error_samples.push(message);
            }
        }
        finished.push(outcome.session);
    }
    for message in &error_samples {
        eprintln!("error sample: {message}");
    }
    // Be polite: end the sessions (best effort, bounded).
    let _ = tokio::time::timeout(
        Duration::from_secs(2),
        futures_join_all(finished.into_iter().map(Session::close)),
    )
    .await;

    let window = last_done.saturating_duration_since(measure_from);
    let rps = if window.is_zero() {
        0.0
    } else {
        ok as f64 / window.as_secs_f64()
    };
    debug_assert_eq!(latencies.len() as u64, ok);
    Ok(Report {
        ok,
        errors,
        warmup_requests,
        window,
        rps,
        summary: latencies.summary(),
    })
}

/// Await a set of futures concurrently (tiny stand-in for `join_all`).
async fn futures_join_all<F>(futures: impl Iterator<Item = F>)
where
    F: Future<Output = ()> + Send + 'static,
{
    let mut set = tokio::task::JoinSet::new();
    for future in futures {
        set.spawn(future);
    }
    while set.join_next().await.is_some() {}
}

/// What one worker measured.
struct WorkerOutcome {
    session: Session,
    ok: u64,
    errors: u64,
    warmup_requests: u64,
    last_done: Instant,
    latencies: Latencies,
    error_samples: Vec<String>,
}

async fn worker(mut session: Session, measure_from: Instant, end: Instant) -> WorkerOutcome {
    let mut latencies = Latencies::with_capacity(64 * 1024);
    let mut ok = 0u64;
    let mut errors = 0u64;
    let mut warmup_requests = 0u64;
    let mut last_done = measure_from;
    let mut error_samples = Vec::new();
    loop {
        let started = Instant::now();
        if started >= end {
            break;
        }
        let result = session.call().await;
        let done = Instant::now();
        let measured = started >= measure_from;
        if measured {
            last_done = done;
        }
        match result {
            Ok(_) if measured => {
                ok += 1;
                latencies.record(done - started);
            }
            Ok(_) => warmup_requests += 1,
            Err(error) => {
                if measured {
                    errors += 1;
                } else {
                    warmup_requests += 1;
                }
                if error_samples.len() < MAX_ERROR_SAMPLES {
                    error_samples.push(format!("{error:#}"));
                }
                if let Err(error) = session.recover(&error).await {
                    if error_samples.len() < MAX_ERROR_SAMPLES {
                        error_samples.push(format!("recovering: {error:#}"));
                    }
                    // Do not spin on a dead server.
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            }
        }
    }
    WorkerOutcome {
        session,
        ok,
        errors,
        warmup_requests,
        last_done,
        latencies,
        error_samples,
    }
}

/// A failed request, with whether the session must be renewed.
#[derive(Debug)]
struct SessionGone;

impl std::fmt::Display for SessionGone {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("session not found (HTTP 404)")
    }
}

impl std::error::Error for SessionGone {}

/// One connection plus one MCP session.
struct Session {
    target: Arc<Target>,
    sender: Option<SendRequest<Full<Bytes>>>,
    /// Static headers plus the session id and protocol version.
    headers: HeaderMap,
    next_id: u64,
}

impl Session {
    async fn open(target: Arc<Target>) -> anyhow::Result<Self> {
        let mut session = Self {
            headers: target.base_headers.clone(),
            target,
            sender: None,
            next_id: 1,
        };
        session.initialize().await?;
        Ok(session)
    }

    async fn connect(&self) -> anyhow::Result<SendRequest<Full<Bytes>>> {
        let stream = tokio::net::TcpStream::connect(&self.target.connect)
            .await
            .with_context(|| format!("connecting to {}", self.target.connect))?;
        stream.set_nodelay(true).context("setting TCP_NODELAY")?;
        let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .context("HTTP/1.1 handshake")?;
        tokio::spawn(async move {
            let _ = connection.await;
        });
        Ok(sender)
    }

    /// Send a POST with the current headers; reconnects if the connection is gone.
    async fn post(&mut self, body: Bytes) -> anyhow::Result<Response<Incoming>> {
        let mut request = Request::new(Full::new(body));
        *request.method_mut() = Method::POST;
        *request.uri_mut() = self.target.path.clone();
        *request.headers_mut() = self.headers.clone();
        self.send(request).await
    }

    async fn send(&mut self, request: Request<Full<Bytes>>) -> anyhow::Result<Response<Incoming>> {
        let mut sender = match self.sender.take() {
            Some(sender) if !sender.is_closed() => sender,
            _ => self.connect().await?,
        };
        if sender.ready().await.is_err() {
            sender = self.connect().await?;
            sender.ready().await.context("connection not ready")?;
        }
        let response = sender
            .send_request(request)
            .await
            .context("sending request")?;
        self.sender = Some(sender);
        Ok(response)
    }

    /// `initialize` + `notifications/initialized`; (re)sets the session headers.
    async fn initialize(&mut self) -> anyhow::Result<()> {
        self.headers.remove(SESSION_HEADER);
        self.headers.remove(PROTOCOL_HEADER);
        let body = json!({
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {
                "protocolVersion": self.target.protocol_version,
                "capabilities": {},
                "clientInfo": {"name": "toolgate-mcp-load", "version": env!("CARGO_PKG_VERSION")},
            },
        });
        let response = self.post(Bytes::from(body.to_string())).await?;
        let session_id = response.headers().get(SESSION_HEADER).cloned();
        let message = read_rpc_response(response, 0).await.context("initialize")?;
        let result = message
            .get("result")
            .ok_or_else(|| anyhow!("initialize failed: {message}"))?;
        let negotiated = result
            .get("protocolVersion")
            .and_then(Value::as_str)
            .unwrap_or(&self.target.protocol_version);
        self.headers.insert(
            PROTOCOL_HEADER,
            HeaderValue::from_str(negotiated).context("bad negotiated protocolVersion")?,
        );
        if let Some(session_id) = session_id {
            self.headers.insert(SESSION_HEADER, session_id);
        }

        let notification =
            Bytes::from_static(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
        let response = self.post(notification).await?;
        let status = response.status();
        let body = response
            .into_body()
            .collect()
            .await
            .context("reading notifications/initialized response")?
            .to_bytes();
        if !status.is_success() {
            bail!(
                "notifications/initialized: HTTP {status}: {}",
                String::from_utf8_lossy(&body)
            );
        }
        Ok(())
    }

    /// One `tools/call`; returns the JSON-RPC response when it succeeded.
    async fn call(&mut self) -> anyhow::Result<Value> {
        let id = self.next_id;
        self.next_id += 1;
        let response = self.post(self.target.call_body(id)).await?;
        let message = read_rpc_response(response, id).await?;
        if let Some(error) = message.get("error") {
            bail!("JSON-RPC error: {error}");
        }
        let result = message
            .get("result")
            .ok_or_else(|| anyhow!("response has neither result nor error: {message}"))?;
        if result.get("isError").and_then(Value::as_bool) == Some(true) {
            bail!("tool returned isError: {result}");
        }
        Ok(message)
    }

    /// After a failed call: renew the session if the server forgot it, and
    /// drop the connection if the transport failed.
    async fn recover(&mut self, error: &anyhow::Error) -> anyhow::Result<()> {
        if error.downcast_ref::<SessionGone>().is_some() {
            return self.initialize().await;
        }
        if error.downcast_ref::<hyper::Error>().is_some() {
            self.sender = None;
        }
        Ok(())
    }

    /// `DELETE` the session (best effort).
    async fn close(mut self) {
        if !self.headers.contains_key(SESSION_HEADER) {
            return;
        }
        let mut request = Request::new(Full::new(Bytes::new()));
        *request.method_mut() = Method::DELETE;
        *request.uri_mut() = self.target.path.clone();
        *request.headers_mut() = self.headers.clone();
        request.headers_mut().remove(header::CONTENT_TYPE);
        if let Ok(response) = self.send(request).await {
            let _ = response.into_body().collect().await;
        }
    }
}

/// Read an HTTP response carrying a JSON-RPC message (JSON body or SSE
/// stream) and return the JSON-RPC response whose id is `id`.
async fn read_rpc_response(response: Response<Incoming>, id: u64) -> anyhow::Result<Value> {
    let status = response.status();
    if status == StatusCode::NOT_FOUND {
        let _ = response.into_body().collect().await;
        return Err(SessionGone.into());
    }
    let content_type = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .unwrap_or("")
        .to_ascii_lowercase();
    let mut body = response.into_body();
    if !status.is_success() {
        let bytes = body
            .collect()
            .await
            .context("reading error body")?
            .to_bytes();
        bail!("HTTP {status}: {}", snippet(&bytes));
    }
    if content_type.starts_with("text/event-stream") {
        let mut parser = SseParser::default();
        let mut found = None;
        while let Some(frame) = body.frame().await {
            let frame = frame.context("reading SSE stream")?;
            let Ok(data) = frame.into_data() else {
                continue;
            };
            if found.is_some() {
                continue; // drain the rest so the connection can be reused
            }
            parser.push(&data);
            while let Some(payload) = parser.next_data() {
                if let Some(message) = match_response(&payload, id)? {
                    found = Some(message);
                    break;
                }
            }
        }
        found.ok_or_else(|| anyhow!("SSE stream ended without a response to id {id}"))
    } else if content_type.starts_with("application/json") {
        let bytes = body
            .collect()
            .await
            .context("reading JSON body")?
            .to_bytes();
        match_response(&bytes, id)?.ok_or_else(|| {
            anyhow!(
                "JSON body is not the response to id {id}: {}",
                snippet(&bytes)
            )
        })
    } else {
        let bytes = body.collect().await.context("reading body")?.to_bytes();
        bail!(
            "unexpected content type {content_type:?} (HTTP {status}): {}",
            snippet(&bytes)
        )
    }
}

/// Parse one JSON-RPC payload (or batch) and return the response to `id`.
fn match_response(payload: &[u8], id: u64) -> anyhow::Result<Option<Value>> {
    let value: Value = serde_json::from_slice(payload)
        .with_context(|| format!("invalid JSON-RPC payload: {}", snippet(payload)))?;
    let is_match = |message: &Value| {
        message.get("id").and_then(Value::as_u64) == Some(id)
            && (message.get("result").is_some() || message.get("error").is_some())
    };
    Ok(match value {
        Value::Array(batch) => batch.into_iter().find(is_match),
        message => is_match(&message).then_some(message),
    })
}

fn snippet(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let mut out: String = text.chars().take(300).collect();
    if text.chars().count() > 300 {
        out.push('…');
    }
    out
}

/// Incremental `text/event-stream` parser that yields each event's `data`.
#[derive(Debug, Default)]
struct SseParser {
    buffer: Vec<u8>,
    /// Where the next event starts in `buffer`.
    start: usize,
}

impl SseParser {
    fn push(&mut self, chunk: &[u8]) {
        if self.start > 0 && self.start == self.buffer.len() {
            self.buffer.clear();
            self.start = 0;
        }
        self.buffer.extend_from_slice(chunk);
    }

    /// The joined `data:` lines of the next complete event that has data.
    fn next_data(&mut self) -> Option<Vec<u8>> {
        loop {
            let (event_end, next_start) = find_event_end(&self.buffer[self.start..])?;
            let event = &self.buffer[self.start..self.start + event_end];
            let mut data: Option<Vec<u8>> = None;
            for line in event.split(|&b| b == b'\n') {
                let line = line.strip_suffix(b"\r").unwrap_or(line);
                let Some(rest) = line.strip_prefix(b"data:") else {
                    continue;
                };
                let rest = rest.strip_prefix(b" ").unwrap_or(rest);
                match &mut data {
                    Some(data) => {
                        data.push(b'\n');
                        data.extend_from_slice(rest);
                    }
                    None => data = Some(rest.to_vec()),
                }
            }
            self.start += next_start;
            if let Some(data) = data
                && !data.iter().all(u8::is_ascii_whitespace)
            {
                return Some(data);
            }
        }
    }
}

/// Find the blank line ending the first event: `(event length, next event start)`.
fn find_event_end(buffer: &[u8]) -> Option<(usize, usize)> {
    let mut i = 0;
    while i < buffer.len() {
        if buffer[i] == b'\n' {
            match buffer.get(i + 1) {
                Some(b'\n') => return Some((i, i + 2)),
                Some(b'\r') if buffer.get(i + 2) == Some(&b'\n') => return Some((i, i + 3)),
                _ => {}
            }
        }
        i += 1;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sse_events_split_across_chunks() {
        let mut parser = SseParser::default();
        parser.push(b"id: 0\nretry: 3000\ndata:\n\nevent: message\ndata: {\"a\"");
        assert_eq!(parser.next_data(), None);
        parser.push(b":1}\r\n\r\ndata: x\ndata: y\n\n");
        assert_eq!(parser.next_data().as_deref(), Some(&b"{\"a\":1}"[..]));
        assert_eq!(parser.next_data().as_deref(), Some(&b"x\ny"[..]));
        assert_eq!(parser.next_data(), None);
    }

    #[test]
    fn matches_response_by_id() -> anyhow::Result<()> {
        let payload = br#"{"jsonrpc":"2.0","id":7,"result":{}}"#;
        assert!(match_response(payload, 7)?.is_some());
        assert!(match_response(payload, 8)?.is_none());
        let notification = br#"{"jsonrpc":"2.0","method":"notifications/progress"}"#;
        assert!(match_response(notification, 7)?.is_none());
        Ok(())
    }

    #[test]
    fn call_body_is_valid_json() -> anyhow::Result<()> {
        let args = Args {
            url: "http://127.0.0.1:9/mcp".into(),
            tool: "echo".into(),
            args: r#"{"text":"hi"}"#.into(),
            concurrency: 1,
            duration: 1.0,
            warmup: 0.0,
            token: None,
            protocol_version: "2025-06-18".into(),
            threads: None,
            label: String::new(),
            show_sample: false,
        };
        let target = Target::new(&args)?;
        let body: Value = serde_json::from_slice(&target.call_body(42))?;
        assert_eq!(body["id"], 42);
        assert_eq!(body["method"], "tools/call");
        assert_eq!(body["params"]["arguments"]["text"], "hi");
        assert_eq!(target.base_headers[header::HOST], "127.0.0.1:9");
        Ok(())
    }
}
