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

use std::net::{IpAddr, SocketAddr};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use reqwest::Url;
use reqwest::header::{HOST, HeaderMap, HeaderValue, USER_AGENT};
use toolgate_core::ToolError;

use crate::{PolicyClient, Refusal, USER_AGENT_VALUE, redacted, refused};

/// Idle connections kept per endpoint at most (more are closed as they come back).
const MAX_IDLE: usize = 64;
/// An idle connection older than this is closed rather than reused (reqwest's default).
const IDLE_TIMEOUT: Duration = Duration::from_secs(90);

/// A connection waiting for its next request (or still streaming its last answer).
struct Idle {
    sender: SendRequest<Full<Bytes>>,
    since: Instant,
}

/// The connections of one plain-http endpoint.
pub(crate) struct DirectPool {
    /// `host[:port]` as the `Host` header says it.
    host_header: HeaderValue,
    /// The request target (`/path?query`).
    target: http::Uri,
    port: u16,
    idle: Mutex<Vec<Idle>>,
}

impl std::fmt::Debug for DirectPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DirectPool")
            .field("target", &self.target)
            .finish_non_exhaustive()
    }
}

/// A response's head and its body still to read, from reqwest or from a direct connection.
pub(crate) enum Body {
    Reqwest(reqwest::Response),
    Direct(http::Response<Incoming>),
}

impl Body {
    pub(crate) fn headers(&self) -> &HeaderMap {
        match self {
            Self::Reqwest(r) => r.headers(),
            Self::Direct(r) => r.headers(),
        }
    }

    pub(crate) fn content_length(&self) -> Option<u64> {
        match self {
            Self::Reqwest(r) => r.content_length(),
            Self::Direct(r) => hyper::body::Body::size_hint(r.body()).exact(),
        }
    }

    /// The next piece of the body; `None` at its end.
    pub(crate) async fn chunk(&mut self, url: &Url) -> Result<Option<Bytes>, ToolError> {
        match self {
            Self::Reqwest(r) => r.chunk().await.map_err(|e| crate::send_error(&e, url)),
            Self::Direct(r) => loop {
                match r.body_mut().frame().await {
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
            idle: Mutex::new(Vec::new()),
        })
    }

    fn idle(&self) -> std::sync::MutexGuard<'_, Vec<Idle>> {
        self.idle.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A connection ready for a request, if one is idle; closed and stale ones are dropped.
    fn reuse(&self) -> Option<SendRequest<Full<Bytes>>> {
        let mut idle = self.idle();
        idle.retain(|c| !c.sender.is_closed() && c.since.elapsed() < IDLE_TIMEOUT);
        let at = idle.iter().position(|c| c.sender.is_ready())?;
        Some(idle.swap_remove(at).sender)
    }

    /// Keeps `sender` for a later request (it becomes ready once its answer has been read).
    fn check_in(&self, sender: SendRequest<Full<Bytes>>) {
        if sender.is_closed() {
            return;
        }
        let mut idle = self.idle();
        if idle.len() < MAX_IDLE {
            idle.push(Idle {
                sender,
                since: Instant::now(),
            });
        }
    }

    /// A new connection to a checked address of `url`'s host.
    async fn connect(
        &self,
        client: &PolicyClient,
        url: &Url,
    ) -> Result<SendRequest<Full<Bytes>>, ToolError> {
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
            match tokio::time::timeout(limit, tokio::net::TcpStream::connect(addr)).await {
                Ok(Ok(stream)) => {
                    // Requests and answers are small and answered at once: no Nagle delay.
                    let _ = stream.set_nodelay(true);
                    let (sender, connection) =
                        hyper::client::conn::http1::handshake(TokioIo::new(stream))
                            .await
                            .map_err(|e| failed(&e, url))?;
                    tokio::spawn(async move {
                        if let Err(e) = connection.await {
                            tracing::debug!(error = %e, "an upstream connection ended");
                        }
                    });
                    return Ok(sender);
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

    /// Sends one request on an idle connection (a new one if none is ready, or if the idle one
    /// turns out closed before the request went out) and returns at the response head.
    pub(crate) async fn send(
        &self,
        client: &PolicyClient,
        url: &Url,
        method: reqwest::Method,
        mut headers: HeaderMap,
        body: Option<Bytes>,
    ) -> Result<http::Response<Incoming>, ToolError> {
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
        if let Some(mut sender) = self.reuse() {
            match sender.try_send_request(request).await {
                Ok(response) => {
                    self.check_in(sender);
                    return Ok(response);
                }
                // Not sent (the server closed the idle connection): once more, on a new one.
                Err(mut e) => match e.take_message() {
                    Some(unsent) => request = unsent,
                    None => return Err(failed(e.error(), url)),
                },
            }
        }
        let mut sender = self.connect(client, url).await?;
        let response = sender
            .send_request(request)
            .await
            .map_err(|e| failed(&e, url))?;
        self.check_in(sender);
        Ok(response)
    }
}
