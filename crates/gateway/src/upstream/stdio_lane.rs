//! The stdio transport of an upstream connection and its fast lane: newline-delimited JSON-RPC
//! over the server's stdin and stdout, with one writer shared by rmcp's sends and the lane.
//!
//! [`StdioTransport`] is what rmcp's client runs on: its `receive` (polled by rmcp's service
//! loop) reads the server's lines in order and hands a response to a lane request (string id
//! `tg-<n>`, an id space rmcp's numeric ids never meet) straight to the waiting caller, parsed as
//! a `tools/call` result; everything else goes to rmcp as before. [`StdioLane`] writes a
//! `tools/call` request from the caller's own task and waits for that answer, so a call costs
//! one wake of rmcp's loop (the pipe became readable) and one of the caller, not the four hops
//! of rmcp's request path (caller → service loop → send task → pipe; reply → loop → caller).

use std::collections::HashMap;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use rmcp::RoleClient;
use rmcp::model::{CallToolResult, ErrorData, JsonObject, NumberOrString, ProgressToken};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::{OwnedMutexGuard, oneshot};
use toolgate_core::{BoxFuture, ToolContext};

use super::client::RouteGuard;
use super::lane::{CallRequest, Lane, LaneOutcome};

/// The longest line read from a server (one JSON-RPC message); a longer one is dropped, so
/// that a server that never ends a line cannot grow toolgate's memory without bound.
const MAX_LINE: usize = 16 * 1024 * 1024;

/// The prefix of the lane's request ids and progress tokens.
const LANE_ID: &str = "tg-";

type Writer = Option<Pin<Box<dyn AsyncWrite + Send>>>;

/// What the transport and the lane share: the server's stdin and the lane's calls awaiting an
/// answer.
struct Shared {
    writer: Arc<tokio::sync::Mutex<Writer>>,
    waiting: Mutex<Waiting>,
    next: AtomicU64,
}

#[derive(Default)]
struct Waiting {
    /// Set once no answer can come any more (the server's output ended).
    closed: bool,
    calls: HashMap<u64, oneshot::Sender<LaneOutcome>>,
}

impl Shared {
    fn waiting(&self) -> std::sync::MutexGuard<'_, Waiting> {
        self.waiting.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// No answer will come: every waiting call learns that its connection is lost.
    fn close(&self) {
        let mut waiting = self.waiting();
        waiting.closed = true;
        waiting.calls.clear();
    }

    /// Hands an answer to the lane call `n`, if it still waits.
    fn answer(&self, n: u64, outcome: LaneOutcome) {
        let sender = self.waiting().calls.remove(&n);
        if let Some(sender) = sender {
            let _ = sender.send(outcome);
        }
    }
}

/// One line being written to the server's stdin. A line is never left half-written: if the
/// writing future is dropped after part of it went out, the rest is written by a task of its
/// own (still holding the writer), so the server never sees two messages spliced together.
struct Writing {
    guard: Option<OwnedMutexGuard<Writer>>,
    line: Vec<u8>,
    done: usize,
}

impl Writing {
    async fn run(&mut self, started: &mut bool) -> io::Result<()> {
        let Some(Some(writer)) = self.guard.as_deref_mut() else {
            return Err(io::Error::new(
                io::ErrorKind::NotConnected,
                "the server's input is closed",
            ));
        };
        while self.done < self.line.len() {
            let n = writer.write(&self.line[self.done..]).await?;
            if n == 0 {
                return Err(io::ErrorKind::WriteZero.into());
            }
            self.done += n;
            *started = true;
        }
        writer.flush().await?;
        self.guard = None;
        Ok(())
    }
}

impl Drop for Writing {
    fn drop(&mut self) {
        let Some(guard) = self.guard.take() else {
            return;
        };
        if self.done == 0 || self.done == self.line.len() {
            return;
        }
        let mut rest = Writing {
            guard: Some(guard),
            line: std::mem::take(&mut self.line),
            done: self.done,
        };
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                let _ = rest.run(&mut true).await;
            });
        }
    }
}

/// Writes one line (`line` ends with `\n`); `started` is set once any of it went out.
async fn write_line(
    writer: &Arc<tokio::sync::Mutex<Writer>>,
    line: Vec<u8>,
    started: &mut bool,
) -> io::Result<()> {
    let guard = Arc::clone(writer).lock_owned().await;
    let mut writing = Writing {
        guard: Some(guard),
        line,
        done: 0,
    };
    writing.run(started).await
}

/// A message serialised as one line.
fn to_line<T: Serialize>(message: &T) -> io::Result<Vec<u8>> {
    let mut line = Vec::with_capacity(256);
    serde_json::to_writer(&mut line, message)?;
    line.push(b'\n');
    Ok(line)
}

/// The transport rmcp's client runs over a stdio server.
pub(crate) struct StdioTransport {
    read: BufReader<Pin<Box<dyn AsyncRead + Send>>>,
    /// The line being read; kept across a cancelled `receive` (rmcp polls it in a `select!`).
    line: Vec<u8>,
    /// Dropping the rest of a line that was too long.
    discarding: bool,
    shared: Arc<Shared>,
}

/// The fast lane of one stdio connection.
pub(crate) struct StdioLane {
    shared: Arc<Shared>,
}

/// The transport and its lane over a server's stdout and stdin.
pub(crate) fn stdio(
    stdout: Pin<Box<dyn AsyncRead + Send>>,
    stdin: Pin<Box<dyn AsyncWrite + Send>>,
) -> (StdioTransport, StdioLane) {
    let shared = Arc::new(Shared {
        writer: Arc::new(tokio::sync::Mutex::new(Some(stdin))),
        waiting: Mutex::new(Waiting::default()),
        next: AtomicU64::new(1),
    });
    let transport = StdioTransport {
        read: BufReader::with_capacity(64 * 1024, stdout),
        line: Vec::new(),
        discarding: false,
        shared: Arc::clone(&shared),
    };
    (transport, StdioLane { shared })
}

/// How reading a line ended.
enum Read {
    Line,
    TooLong,
    End,
}

/// The fields that tell a lane answer from everything else.
#[derive(Deserialize)]
struct Envelope {
    #[serde(default)]
    id: Option<NumberOrString>,
    #[serde(default)]
    method: Option<serde::de::IgnoredAny>,
}

/// A lane answer's payload.
#[derive(Deserialize)]
struct Answer {
    #[serde(default)]
    result: Option<CallToolResult>,
    #[serde(default)]
    error: Option<ErrorData>,
}

/// The lane call a response id names: `tg-<n>`.
fn lane_call(id: &NumberOrString) -> Option<u64> {
    match id {
        NumberOrString::String(s) => s.strip_prefix(LANE_ID)?.parse().ok(),
        NumberOrString::Number(_) => None,
    }
}

impl StdioTransport {
    /// Reads one line into `self.line` (cancel-safe: a partial line stays there).
    async fn read_line(&mut self) -> io::Result<Read> {
        loop {
            let available = self.read.fill_buf().await?;
            if available.is_empty() {
                return Ok(Read::End);
            }
            let newline = available.iter().position(|b| *b == b'\n');
            let take = newline.map_or(available.len(), |i| i + 1);
            let mut outcome = None;
            if self.discarding {
                if newline.is_some() {
                    self.discarding = false;
                }
            } else if self.line.len().saturating_add(take) > MAX_LINE {
                self.line.clear();
                self.discarding = newline.is_none();
                outcome = Some(Read::TooLong);
            } else {
                self.line.extend_from_slice(&available[..take]);
                if newline.is_some() {
                    outcome = Some(Read::Line);
                }
            }
            self.read.consume(take);
            if let Some(outcome) = outcome {
                return Ok(outcome);
            }
        }
    }

    /// What one line is: a lane answer (delivered here, `None`), or a message for rmcp.
    fn take(&self, line: &[u8]) -> Option<RxJsonRpcMessage<RoleClient>> {
        let line = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
        let line = line.strip_suffix(b"\n").unwrap_or(line);
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.iter().all(u8::is_ascii_whitespace) {
            return None;
        }
        if let Ok(Envelope {
            id: Some(id),
            method: None,
        }) = serde_json::from_slice::<Envelope>(line)
            && let Some(n) = lane_call(&id)
        {
            let outcome = match serde_json::from_slice::<Answer>(line) {
                Ok(Answer {
                    result: Some(result),
                    error: None,
                }) => LaneOutcome::Done(result),
                Ok(Answer {
                    result: None,
                    error: Some(error),
                }) => LaneOutcome::Refused(error),
                Ok(_) => LaneOutcome::Refused(ErrorData::internal_error(
                    "its answer holds neither a result nor an error",
                    None,
                )),
                Err(e) => LaneOutcome::Refused(ErrorData::internal_error(
                    format!("its answer is not a tool result toolgate can read ({e})"),
                    None,
                )),
            };
            self.shared.answer(n, outcome);
            return None;
        }
        match serde_json::from_slice::<RxJsonRpcMessage<RoleClient>>(line) {
            Ok(message) => Some(message),
            Err(e) => {
                self.unreadable(line, &e);
                None
            }
        }
    }

    /// A line rmcp cannot read either: a request (it has an id and a method) is answered with
    /// an Invalid Request error, as JSON-RPC asks; anything else is ignored (a notification
    /// cannot be answered, and answering unparsable text could start an error storm with a
    /// server that echoes it).
    fn unreadable(&self, line: &[u8], e: &serde_json::Error) {
        tracing::debug!(error = %e, "an upstream sent a line toolgate cannot read");
        let Ok(Envelope {
            id: Some(id),
            method: Some(_),
        }) = serde_json::from_slice::<Envelope>(line)
        else {
            return;
        };
        let reply = serde_json::json!({
            "jsonrpc": "2.0",
            "id": id,
            "error": {"code": -32600, "message": format!("toolgate cannot read this request: {e}")},
        });
        let writer = Arc::clone(&self.shared.writer);
        if let (Ok(line), Ok(runtime)) = (to_line(&reply), tokio::runtime::Handle::try_current()) {
            runtime.spawn(async move {
                let _ = write_line(&writer, line, &mut false).await;
            });
        }
    }
}

impl Drop for StdioTransport {
    fn drop(&mut self) {
        self.shared.close();
    }
}

impl Transport<RoleClient> for StdioTransport {
    type Error = io::Error;

    fn name() -> std::borrow::Cow<'static, str> {
        "stdio".into()
    }

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let writer = Arc::clone(&self.shared.writer);
        let line = to_line(&item);
        async move { write_line(&writer, line?, &mut false).await }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        loop {
            match self.read_line().await {
                Ok(Read::Line) => {}
                Ok(Read::TooLong) => {
                    tracing::warn!(
                        max = MAX_LINE,
                        "an upstream sent a line longer than toolgate reads; it was dropped"
                    );
                    continue;
                }
                Ok(Read::End) => {
                    self.shared.close();
                    return None;
                }
                Err(e) => {
                    tracing::debug!(error = %e, "reading an upstream's output failed");
                    self.shared.close();
                    return None;
                }
            }
            let line = std::mem::take(&mut self.line);
            let message = self.take(&line);
            self.line = line;
            self.line.clear();
            if let Some(message) = message {
                return Some(message);
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.shared.close();
        let mut writer = self.shared.writer.lock().await;
        if let Some(mut stdin) = writer.take() {
            let _ = stdin.shutdown().await;
        }
        Ok(())
    }
}

/// `notifications/cancelled` for a lane request.
#[derive(Serialize)]
struct Cancelled<'a> {
    jsonrpc: &'static str,
    method: &'static str,
    params: CancelledParams<'a>,
}

#[derive(Serialize)]
struct CancelledParams<'a> {
    #[serde(rename = "requestId")]
    request_id: &'a str,
    reason: &'static str,
}

/// A lane call awaiting its answer: dropped before it, it stops waiting and, if the request
/// went out, tells the server with `notifications/cancelled`.
struct Pending<'a> {
    shared: &'a Arc<Shared>,
    n: u64,
    id: Arc<str>,
    sent: bool,
}

impl Drop for Pending<'_> {
    fn drop(&mut self) {
        let waited = self.shared.waiting().calls.remove(&self.n).is_some();
        if !(waited && self.sent) {
            return;
        }
        let cancelled = Cancelled {
            jsonrpc: "2.0",
            method: "notifications/cancelled",
            params: CancelledParams {
                request_id: &self.id,
                reason: "toolgate's caller cancelled the call, or it timed out",
            },
        };
        let (Ok(line), Ok(runtime)) = (to_line(&cancelled), tokio::runtime::Handle::try_current())
        else {
            return;
        };
        let writer = Arc::clone(&self.shared.writer);
        runtime.spawn(async move {
            let _ = write_line(&writer, line, &mut false).await;
        });
    }
}

impl Lane for StdioLane {
    fn call<'a>(
        &'a self,
        tool: &'a str,
        arguments: Option<&'a JsonObject>,
        route: &'a RouteGuard,
        _ctx: &'a ToolContext,
    ) -> BoxFuture<'a, LaneOutcome> {
        Box::pin(async move {
            let shared = &self.shared;
            let n = shared.next.fetch_add(1, Ordering::Relaxed);
            let id: Arc<str> = format!("{LANE_ID}{n}").into();
            let (tx, rx) = oneshot::channel();
            {
                let mut waiting = shared.waiting();
                if waiting.closed {
                    return LaneOutcome::Lost;
                }
                waiting.calls.insert(n, tx);
            }
            let mut pending = Pending {
                shared,
                n,
                id: Arc::clone(&id),
                sent: false,
            };
            let request = CallRequest::new(&id, tool, arguments);
            let line = match to_line(&request) {
                Ok(line) => line,
                Err(e) => {
                    return LaneOutcome::Refused(ErrorData::invalid_params(
                        format!("toolgate cannot write the call's arguments as JSON ({e})"),
                        None,
                    ));
                }
            };
            let key = NumberOrString::String(id);
            route.bind(ProgressToken(key.clone()), key);
            if write_line(&shared.writer, line, &mut pending.sent)
                .await
                .is_err()
            {
                return LaneOutcome::Lost;
            }
            pending.sent = true;
            rx.await.unwrap_or(LaneOutcome::Lost)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::upstream::client::Routes;
    use rmcp::model::{JsonRpcMessage, ServerNotification};
    use serde_json::{Value, json};
    use tokio::io::{AsyncBufReadExt, DuplexStream, Lines};
    use toolgate_core::{Principal, ToolName};

    /// The server's end of the pipes.
    struct Server {
        input: Lines<BufReader<DuplexStream>>,
        output: DuplexStream,
    }

    impl Server {
        async fn read(&mut self) -> Value {
            let line = self.input.next_line().await.unwrap().unwrap();
            serde_json::from_str(&line).unwrap()
        }

        async fn write(&mut self, message: Value) {
            self.output
                .write_all(format!("{message}\n").as_bytes())
                .await
                .unwrap();
        }
    }

    fn connected() -> (StdioTransport, StdioLane, Server) {
        let (stdin, input) = tokio::io::duplex(64 * 1024);
        let (output, stdout) = tokio::io::duplex(64 * 1024);
        let (transport, lane) = stdio(Box::pin(stdout), Box::pin(stdin));
        let server = Server {
            input: BufReader::new(input).lines(),
            output,
        };
        (transport, lane, server)
    }

    fn ctx() -> ToolContext {
        ToolContext::detached(ToolName::parse("t").unwrap(), Principal::local())
    }

    fn route(ctx: &ToolContext) -> RouteGuard {
        Routes::new("s", Arc::new(|| {})).open(ctx)
    }

    #[test]
    fn only_tg_string_ids_are_the_lanes() {
        assert_eq!(lane_call(&NumberOrString::String("tg-7".into())), Some(7));
        assert_eq!(lane_call(&NumberOrString::String("7".into())), None);
        assert_eq!(lane_call(&NumberOrString::String("tg-x".into())), None);
        assert_eq!(lane_call(&NumberOrString::Number(7)), None);
    }

    #[tokio::test]
    async fn a_lane_answer_goes_to_its_caller_and_never_to_rmcp() {
        let (mut transport, lane, mut server) = connected();
        let ctx = ctx();
        let route = route(&ctx);
        let args = json!({"text": "hi"}).as_object().cloned();
        let call = lane.call("echo", args.as_ref(), &route, &ctx);
        let upstream = async {
            let request = server.read().await;
            assert_eq!(
                request,
                json!({"jsonrpc": "2.0", "id": "tg-1", "method": "tools/call",
                       "params": {"name": "echo", "arguments": {"text": "hi"},
                                  "_meta": {"progressToken": "tg-1"}}})
            );
            server
                .write(json!({"jsonrpc": "2.0", "method": "notifications/progress",
                              "params": {"progressToken": "tg-1", "progress": 1}}))
                .await;
            server
                .write(json!({"jsonrpc": "2.0", "id": "tg-1",
                              "result": {"content": [{"type": "text", "text": "hi"}]}}))
                .await;
            // The answer to a request of rmcp's own.
            server
                .write(json!({"jsonrpc": "2.0", "id": 0, "result": {}}))
                .await;
        };
        let rmcp = async {
            let first = transport.receive().await.unwrap();
            let second = transport.receive().await.unwrap();
            (first, second)
        };
        let (outcome, (), (first, second)) = tokio::join!(call, upstream, rmcp);
        let LaneOutcome::Done(result) = outcome else {
            panic!("{outcome:?}");
        };
        assert_eq!(
            serde_json::to_value(&result).unwrap()["content"],
            json!([{"type": "text", "text": "hi"}])
        );
        assert!(matches!(
            first,
            JsonRpcMessage::Notification(n)
                if matches!(n.notification, ServerNotification::ProgressNotification(_))
        ));
        assert!(
            matches!(&second, JsonRpcMessage::Response(r) if r.id == NumberOrString::Number(0)),
            "{second:?}"
        );
    }

    #[tokio::test]
    async fn a_dropped_lane_call_is_cancelled_upstream_and_its_late_answer_dropped() {
        let (mut transport, lane, mut server) = connected();
        let ctx = ctx();
        let route = route(&ctx);
        let call = lane.call("slow", None, &route, &ctx);
        let request = tokio::select! {
            outcome = call => panic!("answered without an answer: {outcome:?}"),
            request = server.read() => request,
        };
        assert_eq!(request["id"], "tg-1");
        assert_eq!(
            request["params"],
            json!({"name": "slow", "_meta": {"progressToken": "tg-1"}})
        );
        let cancelled = server.read().await;
        assert_eq!(cancelled["method"], "notifications/cancelled");
        assert_eq!(cancelled["params"]["requestId"], "tg-1");
        assert!(cancelled.get("id").is_none());
        server
            .write(json!({"jsonrpc": "2.0", "id": "tg-1", "result": {"content": []}}))
            .await;
        server
            .write(json!({"jsonrpc": "2.0", "id": 3, "result": {}}))
            .await;
        let next = transport.receive().await.unwrap();
        assert!(
            matches!(&next, JsonRpcMessage::Response(r) if r.id == NumberOrString::Number(3)),
            "{next:?}"
        );
    }

    #[tokio::test]
    async fn errors_and_unreadable_answers_are_refusals_and_a_closed_connection_is_lost() {
        let (mut transport, lane, mut server) = connected();
        let ctx = ctx();
        let route = route(&ctx);
        let reader = tokio::spawn(async move { while transport.receive().await.is_some() {} });
        let refused = async {
            let outcome = lane.call("a", None, &route, &ctx).await;
            let LaneOutcome::Refused(e) = outcome else {
                panic!("{outcome:?}");
            };
            assert_eq!(e.code, rmcp::model::ErrorCode::INVALID_PARAMS);
            let outcome = lane.call("b", None, &route, &ctx).await;
            let LaneOutcome::Refused(e) = outcome else {
                panic!("{outcome:?}");
            };
            assert!(e.message.contains("not a tool result"), "{}", e.message);
        };
        let upstream = async {
            let request = server.read().await;
            server
                .write(json!({"jsonrpc": "2.0", "id": request["id"],
                              "error": {"code": -32602, "message": "bad a"}}))
                .await;
            let request = server.read().await;
            server
                .write(json!({"jsonrpc": "2.0", "id": request["id"], "result": {"content": 7}}))
                .await;
        };
        tokio::join!(refused, upstream);
        // The server's output ends while a call waits: the call is lost, and so is the next.
        let waiting = lane.call("c", None, &route, &ctx);
        let closer = async {
            server.read().await;
            drop(server);
        };
        let (outcome, ()) = tokio::join!(waiting, closer);
        assert!(matches!(outcome, LaneOutcome::Lost), "{outcome:?}");
        reader.await.unwrap();
        let outcome = lane.call("d", None, &route, &ctx).await;
        assert!(matches!(outcome, LaneOutcome::Lost), "{outcome:?}");
    }
}
