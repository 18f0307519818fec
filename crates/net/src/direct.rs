//! Plain `http://` requests of an [`Endpoint`](crate::Endpoint) sent straight over hyper's
//! HTTP/1.1 connections, kept open between requests ([`DirectPool`]).
//!
//! An MCP server's endpoint gets one request per tool call; through reqwest each request also
//! pays for layers an endpoint never uses (its redirect policy and retry wrapper, the URL parsed
//! again from the request's URI after every response, the request's headers cloned twice) and
//! its pool's task per response. Measured with callgrind: ~38,000 instructions per call in
//! reqwest and its pool, against a few thousand here. `https://` endpoints stay on reqwest
//! (its TLS set-up).
//!
//! The policy is kept exactly: every new connection resolves the host with the policy
//! client's resolver, refuses the host if any of its addresses is refused (the message of the
//! checking resolver), and connects to one of the addresses it checked (pinned; a DNS answer
//! that changes between the check and the connection cannot slip through). Literal addresses
//! were checked when the endpoint was made (the policy never changes). No proxy; the connect
//! timeout is the policy client's. Redirects are refused by the endpoint as before.
//!
//! A connection serves one request at a time and is driven by the task that sent it: hyper's
//! `Connection` is polled together with the request and then with the body reads, not in a
//! task of its own, so a call crosses no task boundary (two wake-ups of another task less per
//! request). The pool keeps idle connections as pairs of `SendRequest` and `Connection`; a
//! response read to its end gives its pair back. A response dropped before its end (a call's
//! event stream left once its answer came, the stream's last chunk perhaps still on its way)
//! gives its pair back with the rest of its body; whoever takes it next reads that rest
//! without waiting, and leaves the connection idle if it has not all arrived (closed once it has
//! waited a second for it). A connection the
//! server closed while idle is found out when next taken (its request comes back unsent and
//! goes to the next idle one, or to a new one).

use std::future::{Future, poll_fn};
use std::net::{IpAddr, SocketAddr};
use std::pin::{Pin, pin};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::{Body as _, Frame, Incoming};
use hyper::client::conn::http1::{Connection, SendRequest};
use hyper_util::rt::TokioIo;
use reqwest::Url;
use reqwest::header::{HOST, HeaderMap, HeaderValue, USER_AGENT};
use tokio::net::TcpStream;
use toolgate_core::ToolError;

use crate::{PolicyClient, Refusal, USER_AGENT_VALUE, redacted, refused};

/// Idle connections kept per endpoint at most (more are closed as they come back).
const MAX_IDLE: usize = 64;
/// An idle connection older than this is closed rather than reused (reqwest's default).
const IDLE_TIMEOUT: Duration = Duration::from_secs(90);

/// One HTTP/1.1 connection: the request side and the state machine that reads and writes it
/// (boxed once when made, then moved between the pool and its responses by pointer).
struct Link {
    sender: SendRequest<Full<Bytes>>,
    conn: Connection<TokioIo<TcpStream>, Full<Bytes>>,
}

/// Most frames of an abandoned body read when its connection is taken again.
const MAX_DRAIN: usize = 16;
/// How long a connection whose abandoned body has not all arrived is kept for its end.
const END_GRACE: Duration = Duration::from_secs(1);

/// A connection waiting for its next request.
struct Idle {
    link: Box<Link>,
    /// The unread rest of the last response's body (dropped before its end).
    rest: Option<Incoming>,
    since: Instant,
}

/// The idle connections of one endpoint, shared with the responses that will give theirs back.
type IdleList = Arc<Mutex<Vec<Idle>>>;

fn lock(idle: &IdleList) -> std::sync::MutexGuard<'_, Vec<Idle>> {
    idle.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Gives `link` back to `idle` for a later request (closed if the pool is full).
fn check_in(idle: &IdleList, link: Box<Link>, rest: Option<Incoming>) {
    let mut idle = lock(idle);
    if idle.len() < MAX_IDLE {
        idle.push(Idle {
            link,
            rest,
            since: Instant::now(),
        });
    }
}

/// What an idle connection can do when a request wants it.
enum Readiness {
    /// Take the request.
    Ready(Box<Link>),
    /// Not yet: the end of its last body is still on its way (kept idle for a later request).
    Receiving(Idle),
    /// Nothing: it is closed (or given up).
    Closed,
}

impl Idle {
    /// Whether the connection can take a request: the rest of an abandoned body is read as far
    /// as it has arrived. One whose end has not all arrived is kept for a while (a call's event
    /// stream left at its answer has its last chunk on the way: closing the connection would
    /// cost both sides a new one), then given up (a stream that goes on).
    fn ready(self) -> Readiness {
        let Idle {
            mut link,
            rest,
            since,
        } = self;
        let Some(mut rest) = rest else {
            return Readiness::Ready(link);
        };
        let mut cx = Context::from_waker(Waker::noop());
        for _ in 0..MAX_DRAIN {
            if link.conn.poll_without_shutdown(&mut cx).is_ready() {
                return Readiness::Closed;
            }
            match Pin::new(&mut rest).poll_frame(&mut cx) {
                Poll::Ready(None) => return Readiness::Ready(link),
                Poll::Ready(Some(Ok(_))) => {}
                Poll::Ready(Some(Err(_))) => return Readiness::Closed,
                Poll::Pending if since.elapsed() < END_GRACE => {
                    return Readiness::Receiving(Idle {
                        link,
                        rest: Some(rest),
                        since,
                    });
                }
                Poll::Pending => return Readiness::Closed,
            }
        }
        Readiness::Closed
    }
}

/// The connections of one plain-http endpoint.
pub(crate) struct DirectPool {
    /// `host[:port]` as the `Host` header says it.
    host_header: HeaderValue,
    /// The request target (`/path?query`).
    target: http::Uri,
    port: u16,
    idle: IdleList,
}

impl std::fmt::Debug for DirectPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DirectPool")
            .field("target", &self.target)
            .finish_non_exhaustive()
    }
}

/// A response from a direct connection: its head, its body, and the connection that is still
/// delivering the body (driven by whoever reads it).
pub(crate) struct DirectResponse {
    head: http::response::Parts,
    /// `None` only once given back with its connection.
    body: Option<Incoming>,
    /// `None` once the connection has ended or has been given back.
    link: Option<Box<Link>>,
    idle: IdleList,
}

impl DirectResponse {
    pub(crate) fn status(&self) -> http::StatusCode {
        self.head.status
    }

    /// The next frame of the body, the connection driven meanwhile; at the body's end the
    /// connection goes back to the pool.
    fn poll_frame(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        if let Some(link) = self.link.as_mut()
            && link.conn.poll_without_shutdown(cx).is_ready()
        {
            // Closed, or failed (the body then holds the error): what it delivered is
            // buffered in the body.
            self.link = None;
        }
        let Some(body) = self.body.as_mut() else {
            return Poll::Ready(None);
        };
        let frame = Pin::new(body).poll_frame(cx);
        if let Poll::Ready(None) = frame
            && let Some(link) = self.link.take()
        {
            check_in(&self.idle, link, None);
        }
        frame
    }
}

impl Drop for DirectResponse {
    /// A body not read to its end: its connection goes back with the rest of it, for the next
    /// taker to finish reading (see [`Idle::ready`]).
    fn drop(&mut self) {
        if let Some(link) = self.link.take() {
            check_in(&self.idle, link, self.body.take());
        }
    }
}

/// A response's head and its body still to read, from reqwest or from a direct connection.
pub(crate) enum Body {
    Reqwest(reqwest::Response),
    Direct(DirectResponse),
}

impl Body {
    pub(crate) fn headers(&self) -> &HeaderMap {
        match self {
            Self::Reqwest(r) => r.headers(),
            Self::Direct(r) => &r.head.headers,
        }
    }

    pub(crate) fn content_length(&self) -> Option<u64> {
        match self {
            Self::Reqwest(r) => r.content_length(),
            Self::Direct(r) => r.body.as_ref().and_then(|b| b.size_hint().exact()),
        }
    }

    /// The next piece of the body; `None` at its end.
    pub(crate) async fn chunk(&mut self, url: &Url) -> Result<Option<Bytes>, ToolError> {
        match self {
            Self::Reqwest(r) => r.chunk().await.map_err(|e| crate::send_error(&e, url)),
            Self::Direct(r) => loop {
                match poll_fn(|cx| r.poll_frame(cx)).await {
                    None => return Ok(None),
                    Some(Ok(frame)) => {
                        if let Ok(data) = frame.into_data() {
                            return Ok(Some(data));
                        }
                    }
                    Some(Err(e)) => return Err(failed(&e, url)),
                }
            },
        }
    }
}

/// A hyper failure as a tool error, like [`send_error`](crate::send_error) for reqwest's.
fn failed(e: &hyper::Error, url: &Url) -> ToolError {
    let at = redacted(url);
    let mut cause = e.to_string();
    let mut s = std::error::Error::source(e);
    while let Some(inner) = s {
        cause = inner.to_string();
        s = inner.source();
    }
    ToolError::unavailable(format!("Request to {at} failed: {cause}"))
}

/// Why an exchange on a connection gave no response.
enum Failure {
    /// The request never left: the connection had closed (try another).
    Unsent(http::Request<Full<Bytes>>),
    /// The request may have reached the server.
    Failed(ToolError),
}

impl Link {
    /// Sends `request` and drives the connection until the response head (or the end of the
    /// connection) arrives; the response keeps the connection for its body.
    async fn exchange(
        self: Box<Self>,
        request: http::Request<Full<Bytes>>,
        idle: &IdleList,
        url: &Url,
    ) -> Result<DirectResponse, Failure> {
        let mut this = self;
        // Queued for the connection, which takes it at its next poll (or hands it back
        // unsent if it has closed). The future holds no borrow of the sender.
        let mut sent = pin!(this.sender.try_send_request(request));
        let mut link = Some(this);
        let outcome = poll_fn(|cx| {
            if let Some(l) = link.as_mut()
                && l.conn.poll_without_shutdown(cx).is_ready()
            {
                // Dropping the connection answers a request still queued (unsent, given
                // back) or in flight (an error), so the next poll of `sent` is ready.
                link = None;
            }
            match sent.as_mut().poll(cx) {
                Poll::Pending if link.is_none() => Poll::Ready(None),
                Poll::Pending => Poll::Pending,
                Poll::Ready(out) => Poll::Ready(Some(out)),
            }
        })
        .await;
        match outcome {
            Some(Ok(response)) => {
                let (head, body) = response.into_parts();
                Ok(DirectResponse {
                    head,
                    body: Some(body),
                    link,
                    idle: Arc::clone(idle),
                })
            }
            Some(Err(mut e)) => match e.take_message() {
                Some(unsent) => Err(Failure::Unsent(unsent)),
                None => Err(Failure::Failed(failed(e.error(), url))),
            },
            None => Err(Failure::Failed(ToolError::unavailable(format!(
                "Request to {} failed: the connection closed before the answer",
                redacted(url)
            )))),
        }
    }
}

impl DirectPool {
    /// The pool of `url` if it is a plain-http URL (`None`: send through reqwest).
    pub(crate) fn new(url: &Url) -> Option<Self> {
        if url.scheme() != "http" {
            return None;
        }
        let host = url.host_str()?;
        let port = url.port_or_known_default()?;
        let host_header = match url.port() {
            Some(p) => HeaderValue::from_str(&format!("{host}:{p}")).ok()?,
            None => HeaderValue::from_str(host).ok()?,
        };
        let target = match url.query() {
            Some(q) => format!("{}?{q}", url.path()),
            None => url.path().to_owned(),
        };
        Some(Self {
            host_header,
            target: target.parse().ok()?,
            port,
            idle: IdleList::default(),
        })
    }

    /// The most recently used idle connection that is not too old and can take a request
    /// (the others are closed).
    fn reuse(&self) -> Option<Box<Link>> {
        let mut idle = lock(&self.idle);
        // Oldest first (given back in order, taken from the end): the stale ones are a prefix,
        // so one clock reading usually settles it rather than one per idle connection.
        let stale = idle
            .iter()
            .take_while(|c| c.since.elapsed() >= IDLE_TIMEOUT)
            .count();
        idle.drain(..stale);
        // Those still receiving the end of their last body go back, in their order.
        let mut receiving = Vec::new();
        let mut taken = None;
        while let Some(c) = idle.pop() {
            match c.ready() {
                Readiness::Ready(link) => {
                    taken = Some(link);
                    break;
                }
                Readiness::Receiving(c) => receiving.push(c),
                Readiness::Closed => {}
            }
        }
        idle.extend(receiving.into_iter().rev());
        taken
    }

    /// A new connection to a checked address of `url`'s host.
    async fn connect(&self, client: &PolicyClient, url: &Url) -> Result<Box<Link>, ToolError> {
        let at = redacted(url);
        let ips: Vec<IpAddr> = match url.host() {
            Some(url::Host::Ipv4(v4)) => vec![IpAddr::V4(v4)],
            Some(url::Host::Ipv6(v6)) => vec![IpAddr::V6(v6)],
            Some(url::Host::Domain(host)) => {
                let ips = client.resolver.lookup(host).await.map_err(|e| {
                    ToolError::unavailable(format!("Cannot connect to {at}: {host}: {e}"))
                })?;
                if ips.is_empty() {
                    return Err(ToolError::unavailable(format!(
                        "Cannot connect to {at}: {host} has no addresses"
                    )));
                }
                if let Some((ip, class)) = ips
                    .iter()
                    .find_map(|ip| client.policy.refuses(host, *ip).map(|c| (*ip, c)))
                {
                    return Err(refused(Refusal {
                        host: host.to_owned(),
                        ip,
                        class,
                    }));
                }
                ips
            }
            None => {
                return Err(ToolError::validation(format!("URL {at} has no host")).permanent());
            }
        };
        let limit = client.connect_timeout();
        let mut last = None;
        for ip in ips {
            let addr = SocketAddr::new(ip, self.port);
            match tokio::time::timeout(limit, TcpStream::connect(addr)).await {
                Ok(Ok(stream)) => {
                    // Requests and answers are small and answered at once: no Nagle delay.
                    let _ = stream.set_nodelay(true);
                    let (sender, conn) =
                        hyper::client::conn::http1::handshake(TokioIo::new(stream))
                            .await
                            .map_err(|e| failed(&e, url))?;
                    return Ok(Box::new(Link { sender, conn }));
                }
                Ok(Err(e)) => last = Some(e.to_string()),
                Err(_) => last = Some(format!("no answer within {} ms", limit.as_millis())),
            }
        }
        Err(ToolError::unavailable(format!(
            "Cannot connect to {at}: {}",
            last.unwrap_or_else(|| "no address".into())
        )))
    }

    /// Sends one request on an idle connection (the next one, then a new one, while the
    /// request comes back unsent because the server had closed the connection) and returns at
    /// the response head.
    pub(crate) async fn send(
        &self,
        client: &PolicyClient,
        url: &Url,
        method: reqwest::Method,
        mut headers: HeaderMap,
        body: Option<Bytes>,
    ) -> Result<DirectResponse, ToolError> {
        if !headers.contains_key(HOST) {
            headers.insert(HOST, self.host_header.clone());
        }
        if !headers.contains_key(USER_AGENT) {
            headers.insert(USER_AGENT, HeaderValue::from_static(USER_AGENT_VALUE));
        }
        let mut request = http::Request::new(Full::new(body.unwrap_or_default()));
        *request.method_mut() = method;
        *request.uri_mut() = self.target.clone();
        *request.headers_mut() = headers;
        while let Some(link) = self.reuse() {
            match link.exchange(request, &self.idle, url).await {
                Ok(response) => return Ok(response),
                Err(Failure::Unsent(unsent)) => request = unsent,
                Err(Failure::Failed(e)) => return Err(e),
            }
        }
        let link = self.connect(client, url).await?;
        match link.exchange(request, &self.idle, url).await {
            Ok(response) => Ok(response),
            Err(Failure::Unsent(_)) => Err(ToolError::unavailable(format!(
                "Request to {} failed: the server closed a new connection before the request",
                redacted(url)
            ))),
            Err(Failure::Failed(e)) => Err(e),
        }
    }
}
