//! toolgate's outbound HTTP client: [`PolicyClient`] sends every request a tool makes under the
//! [`NetPolicy`] and is what `ToolContext::http()` hands to tools.
//!
//! ```no_run
//! # fn main() -> Result<(), toolgate_net::NetError> {
//! let client = toolgate_net::PolicyClient::new(toolgate_net::NetPolicy::default())?;
//! # let _ = client; Ok(()) }
//! ```
//!
//! What the policy guarantees, for every hop of every request:
//! - only `http` and `https` URLs;
//! - the host's addresses are resolved once, checked, and the connection goes to a checked
//!   address (the check sits in the resolver the connection uses, so a DNS answer that changes
//!   between a check and the connection cannot slip through). Loopback, private, link-local,
//!   CGNAT, metadata, IPv4-mapped, unspecified, multicast and reserved addresses are refused;
//!   `allow_private_network` lifts the refusal for loopback, private, link-local and CGNAT
//!   only. A host with any refused address is refused as a whole;
//! - redirects are followed by hand, at most `max_redirects`, each target checked again;
//!   caller headers (they may carry API keys) are dropped when a redirect leaves the origin;
//! - the body is read up to `max_response_bytes`, the whole exchange within `timeout`, and the
//!   call's cancellation token stops it at once;
//! - no proxy from the environment is used (a proxy would resolve names where we cannot check).
//!
//! Refusals are `authorization` errors naming the host, the address and why. Messages and logs
//! show URLs without their query string, which may hold an API key.
//!
//! [`PolicyClient::open`] is the streamed form (MCP's Streamable HTTP): the same checks, the
//! response returned at its head; redirects refused unless asked for ([`Redirects`]); the body
//! read whole under a cap ([`StreamResponse::bytes`]) or as server-sent events capped one by
//! one ([`StreamResponse::events`], parsed by [`sse`]), the stream itself uncapped and ended by
//! cancellation.
//!
//! [`PolicyClient::endpoint`] is the same for many requests to one URL (an MCP server's): the
//! URL parsed and its scheme and literal address checked once, names still checked on every
//! connection, the caller's prebuilt headers and a shared body sent as they are, and every
//! redirect refused ([`Endpoint`]). A plain `http://` endpoint sends over its own pooled
//! hyper HTTP/1.1 connections rather than reqwest's (the same checks: each connection made to
//! an address the policy passed).

#![warn(missing_docs, unreachable_pub)]

mod addr;
mod direct;
mod endpoint;
pub mod sse;
mod stream;

use std::fmt;
use std::future::Future;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use reqwest::Url;
use serde::Deserialize;
use tokio_util::sync::CancellationToken;
use toolgate_core::{BoxFuture, ErrorKind, HttpClient, HttpRequest, HttpResponse, ToolError};

pub use addr::{AddressClass, classify};
pub use bytes::Bytes;
pub use endpoint::Endpoint;
pub use reqwest::Method;
pub use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
pub use stream::{Redirects, SseEvents, StreamRequest, StreamResponse};

/// The `User-Agent` of every request.
const USER_AGENT_VALUE: &str = concat!("toolgate/", env!("CARGO_PKG_VERSION"));

/// Redirects followed by default.
pub const DEFAULT_MAX_REDIRECTS: u32 = 5;
/// Response body cap by default: 10 MiB.
pub const DEFAULT_MAX_RESPONSE_BYTES: u64 = 10 * 1024 * 1024;
/// Time limit of one exchange (redirects included) by default.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
/// The environment variable that turns on `allow_private_network` (`1` or `true`).
pub const ALLOW_PRIVATE_ENV: &str = "TOOLGATE_ALLOW_PRIVATE_NETWORK";

/// The network policy (`[network]` in the config file).
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct NetPolicy {
    /// Allow loopback, private (RFC 1918, ULA), link-local and CGNAT addresses. Off by default;
    /// for tools that must reach an intranet service, and for tests with local fake servers.
    pub allow_private_network: bool,
    /// Most redirects followed per request (each hop checked again).
    pub max_redirects: u32,
    /// Most bytes of a response body read; more ends the request.
    pub max_response_bytes: u64,
    /// Milliseconds for one whole exchange (the tool's own timeout still applies).
    pub timeout_ms: u64,
    /// Host names (or literal addresses) that may be on loopback, private, link-local or CGNAT
    /// addresses even when `allow_private_network` is off: one intranet API without opening
    /// the whole private network. Metadata and the other classes stay refused.
    pub private_hosts: Vec<String>,
}

impl Default for NetPolicy {
    fn default() -> Self {
        Self {
            allow_private_network: false,
            max_redirects: DEFAULT_MAX_REDIRECTS,
            max_response_bytes: DEFAULT_MAX_RESPONSE_BYTES,
            timeout_ms: DEFAULT_TIMEOUT.as_millis() as u64,
            private_hosts: Vec::new(),
        }
    }
}

impl NetPolicy {
    /// The policy with `TOOLGATE_ALLOW_PRIVATE_NETWORK=1` (or `true`) applied.
    #[must_use]
    pub fn with_env(self) -> Self {
        self.with_vars(|name| std::env::var(name).ok())
    }

    /// Like [`NetPolicy::with_env`], reading variables through `var`.
    #[must_use]
    pub fn with_vars(mut self, var: impl Fn(&str) -> Option<String>) -> Self {
        if let Some(v) = var(ALLOW_PRIVATE_ENV)
            && matches!(v.trim(), "1" | "true" | "TRUE" | "yes")
        {
            self.allow_private_network = true;
        }
        self
    }

    /// Whether `host` may connect to `ip`; the class that refuses it otherwise.
    pub fn refuses(&self, host: &str, ip: IpAddr) -> Option<AddressClass> {
        let exempt = self.allow_private_network
            || self
                .private_hosts
                .iter()
                .any(|h| h.trim_matches(['[', ']']).eq_ignore_ascii_case(host));
        classify(ip).filter(|c| !(exempt && c.private_switch_allows()))
    }

    /// The time limit of one exchange (`timeout_ms`, at least 1 ms).
    pub fn timeout(&self) -> Duration {
        Duration::from_millis(self.timeout_ms.max(1))
    }
}

/// Building a client failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum NetError {
    /// The client could not be built; the message says why.
    #[error("Cannot build the HTTP client: {0}")]
    Build(String),
}

/// What kind of [`NetError`] this is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum NetErrorKind {
    /// The client could not be built (TLS or resolver set-up).
    Build,
}

impl NetError {
    /// The class of this error.
    pub fn kind(&self) -> NetErrorKind {
        match self {
            Self::Build(_) => NetErrorKind::Build,
        }
    }
}

/// Turns a host name into addresses. The system resolver by default; tests substitute one.
pub trait Resolver: Send + Sync + 'static {
    /// The addresses of `host`.
    fn lookup<'a>(&'a self, host: &'a str) -> BoxFuture<'a, io::Result<Vec<IpAddr>>>;
}

/// The operating system's resolver (`getaddrinfo` via tokio).
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemResolver;

impl Resolver for SystemResolver {
    fn lookup<'a>(&'a self, host: &'a str) -> BoxFuture<'a, io::Result<Vec<IpAddr>>> {
        Box::pin(async move {
            let addrs = tokio::net::lookup_host((host, 0)).await?;
            Ok(addrs.map(|a| a.ip()).collect())
        })
    }
}

/// A refused destination.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    /// The host as the URL names it.
    pub host: String,
    /// The address that was refused.
    pub ip: IpAddr,
    /// Why: the class of the address.
    pub class: AddressClass,
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let shown = if self.host == self.ip.to_string() {
            self.host.clone()
        } else {
            format!("{} ({})", self.host, self.ip)
        };
        write!(
            f,
            "Network policy refused {shown}: it is {}; toolgate reaches only public internet addresses unless told otherwise",
            self.class
        )?;
        if self.class.private_switch_allows() {
            f.write_str(" (to allow it, list the host in [network] private_hosts, or allow all private networks with [network] allow_private_network = true or TOOLGATE_ALLOW_PRIVATE_NETWORK=1)")?;
        }
        Ok(())
    }
}

impl std::error::Error for Refusal {}

/// The resolver the connections use: resolves, then refuses the host if any address is refused.
struct CheckingResolver {
    inner: Arc<dyn Resolver>,
    policy: NetPolicy,
}

type Resolving = Pin<
    Box<
        dyn Future<Output = Result<reqwest::dns::Addrs, Box<dyn std::error::Error + Send + Sync>>>
            + Send,
    >,
>;

impl reqwest::dns::Resolve for CheckingResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> Resolving {
        let inner = Arc::clone(&self.inner);
        let policy = self.policy.clone();
        Box::pin(async move {
            let host = name.as_str().to_owned();
            let ips = inner.lookup(&host).await?;
            if ips.is_empty() {
                return Err(Box::new(io::Error::new(
                    io::ErrorKind::NotFound,
                    format!("{host} has no addresses"),
                ))
                    as Box<dyn std::error::Error + Send + Sync>);
            }
            if let Some((ip, class)) = ips
                .iter()
                .find_map(|ip| policy.refuses(&host, *ip).map(|c| (*ip, c)))
            {
                return Err(Box::new(Refusal { host, ip, class }) as _);
            }
            let addrs: Vec<SocketAddr> = ips.into_iter().map(|ip| SocketAddr::new(ip, 0)).collect();
            Ok(Box::new(addrs.into_iter()) as reqwest::dns::Addrs)
        })
    }
}

/// The HTTP client that enforces a [`NetPolicy`]; implements [`HttpClient`] for tools.
#[derive(Clone)]
pub struct PolicyClient {
    client: reqwest::Client,
    policy: NetPolicy,
    resolver: Arc<dyn Resolver>,
}

impl fmt::Debug for PolicyClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PolicyClient")
            .field("policy", &self.policy)
            .finish_non_exhaustive()
    }
}

/// Headers kept when a redirect leaves the request's origin; every other caller header (API
/// keys, cookies, authorization) stays behind.
const CROSS_ORIGIN_HEADERS: &[&str] = &["accept", "accept-language", "user-agent"];

impl PolicyClient {
    /// A client using the system resolver.
    pub fn new(policy: NetPolicy) -> Result<Self, NetError> {
        Self::with_resolver(policy, Arc::new(SystemResolver))
    }

    /// A client resolving names with `resolver` (tests: make a name resolve to any address).
    pub fn with_resolver(policy: NetPolicy, resolver: Arc<dyn Resolver>) -> Result<Self, NetError> {
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .dns_resolver(Arc::new(CheckingResolver {
                inner: Arc::clone(&resolver),
                policy: policy.clone(),
            }))
            .connect_timeout(connect_timeout(&policy))
            .user_agent(USER_AGENT_VALUE)
            .build()
            .map_err(|e| NetError::Build(toolgate_core::error_chain(&e)))?;
        Ok(Self {
            client,
            policy,
            resolver,
        })
    }

    /// Checks now that `url` may be reached: its scheme, and every address its host has
    /// (a refusal message says how to allow a private host). For a clear error before a
    /// long-lived connection starts; every connection is checked again as it is made.
    pub async fn check_destination(&self, url: &str) -> Result<(), ToolError> {
        let url = parse_url(url)?;
        self.check_url(&url)?;
        let Some(url::Host::Domain(host)) = url.host() else {
            return Ok(());
        };
        let ips = self.resolver.lookup(host).await.map_err(|e| {
            ToolError::unavailable(format!("Cannot resolve {host} ({}): {e}", redacted(&url)))
        })?;
        if ips.is_empty() {
            return Err(ToolError::unavailable(format!(
                "Cannot resolve {host} ({}): it has no addresses",
                redacted(&url)
            )));
        }
        match ips
            .iter()
            .find_map(|ip| self.policy.refuses(host, *ip).map(|c| (*ip, c)))
        {
            Some((ip, class)) => Err(refused(Refusal {
                host: host.to_owned(),
                ip,
                class,
            })),
            None => Ok(()),
        }
    }

    /// The policy in force.
    pub fn policy(&self) -> &NetPolicy {
        &self.policy
    }

    /// The longest wait for a connection.
    fn connect_timeout(&self) -> Duration {
        connect_timeout(&self.policy)
    }

    async fn exchange(&self, request: HttpRequest, cap: u64) -> Result<HttpResponse, ToolError> {
        let method = parse_method(&request.method)?;
        let url = parse_url(&request.url)?;
        let (response, url) = self
            .head(
                method,
                url,
                request.headers,
                request.body.map(Bytes::from),
                Redirects::Follow,
            )
            .await?;
        read_response(response, &url, cap).await
    }

    /// Sends a request and waits for the response head, following redirects by hand (each
    /// target checked again) or refusing them; returns the response and the URL that gave it.
    async fn head(
        &self,
        mut method: reqwest::Method,
        mut url: Url,
        mut headers: Vec<(String, String)>,
        mut body: Option<Bytes>,
        redirects: Redirects,
    ) -> Result<(reqwest::Response, Url), ToolError> {
        let mut hops = 0u32;
        loop {
            self.check_url(&url)?;
            let mut builder = self.client.request(method.clone(), url.clone());
            for (name, value) in &headers {
                builder = builder.header(name.as_str(), value.as_str());
            }
            if let Some(b) = &body {
                builder = builder.body(b.clone());
            }
            let response = builder.send().await.map_err(|e| send_error(&e, &url))?;
            let Some(next) = redirect_target(response.status(), response.headers(), &url)? else {
                return Ok((response, url));
            };
            let status = response.status();
            if redirects == Redirects::Refuse {
                return Err(refused_redirect(&url, status, &next));
            }
            if hops >= self.policy.max_redirects {
                return Err(ToolError::execution(format!(
                    "Too many redirects: {} redirected more than {} times; ask for the final address directly",
                    redacted(&url),
                    self.policy.max_redirects
                ))
                .permanent());
            }
            if next.origin() != url.origin() {
                headers.retain(|(n, _)| {
                    CROSS_ORIGIN_HEADERS
                        .iter()
                        .any(|k| n.eq_ignore_ascii_case(k))
                });
            }
            let to_get = status == reqwest::StatusCode::SEE_OTHER
                || (matches!(status.as_u16(), 301 | 302) && method == reqwest::Method::POST);
            if to_get && method != reqwest::Method::HEAD {
                method = reqwest::Method::GET;
                body = None;
                headers.retain(|(n, _)| {
                    !n.eq_ignore_ascii_case("content-type")
                        && !n.eq_ignore_ascii_case("content-length")
                });
            }
            tracing::debug!(from = %redacted(&url), to = %redacted(&next), "following redirect");
            url = next;
            hops += 1;
        }
    }

    /// Sends `request` under the policy and returns as soon as the response head has arrived;
    /// the body is read afterwards, in a capped whole ([`StreamResponse::bytes`]) or as
    /// server-sent events capped one by one ([`StreamResponse::events`]). For MCP's Streamable
    /// HTTP, where a response may stream for as long as a call lasts.
    ///
    /// The scheme and address checks, the checking resolver, the connect timeout and the
    /// proxy refusal are those of every request. `request.timeout` bounds the wait for the
    /// head (`None`: no bound besides the connect timeout; cancel with `cancel`). `cancel`
    /// stops the request and, later, the body reads at once.
    pub async fn open(
        &self,
        request: StreamRequest,
        cancel: &CancellationToken,
    ) -> Result<StreamResponse, ToolError> {
        if cancel.is_cancelled() {
            return Err(ToolError::cancelled());
        }
        let method = parse_method(&request.method)?;
        let url = parse_url(&request.url)?;
        let head = self.head(
            method,
            url,
            request.headers,
            request.body.map(Bytes::from),
            request.redirects,
        );
        let (response, url) = self
            .await_head(head, request.timeout, cancel, || shown(&request.url))
            .await?;
        Ok(self.stream_response(direct::Body::Reqwest(response), Arc::new(url), cancel))
    }

    /// Waits for a response head within `timeout` (if any) unless `cancel` fires first;
    /// `target` names the URL in the timeout's message.
    async fn await_head<T>(
        &self,
        head: impl Future<Output = Result<T, ToolError>>,
        timeout: Option<Duration>,
        cancel: &CancellationToken,
        target: impl FnOnce() -> String,
    ) -> Result<T, ToolError> {
        let head = async {
            match timeout {
                Some(limit) => match tokio::time::timeout(limit, head).await {
                    Ok(out) => out,
                    Err(_) => Err(ToolError::new(
                        ErrorKind::Timeout,
                        format!(
                            "{} did not answer within {} ms",
                            target(),
                            limit.as_millis()
                        ),
                    )
                    .retryable()),
                },
                None => head.await,
            }
        };
        tokio::select! {
            biased;
            () = cancel.cancelled() => Err(ToolError::cancelled()),
            out = head => out,
        }
    }

    /// A response whose head has arrived from `url`, its body still to be read under the
    /// policy's caps.
    fn stream_response(
        &self,
        response: direct::Body,
        url: Arc<Url>,
        cancel: &CancellationToken,
    ) -> StreamResponse {
        let status = match &response {
            direct::Body::Reqwest(r) => r.status().as_u16(),
            direct::Body::Direct(r) => r.status().as_u16(),
        };
        StreamResponse {
            status,
            response,
            url,
            cancel: cancel.clone(),
            timeout: self.policy.timeout(),
            max_bytes: self.policy.max_response_bytes,
        }
    }

    /// Refuses non-HTTP schemes and literal addresses the policy does not allow (names are
    /// checked by the resolver the connection uses).
    fn check_url(&self, url: &Url) -> Result<(), ToolError> {
        if !matches!(url.scheme(), "http" | "https") {
            return Err(ToolError::authorization(format!(
                "Network policy refused {}: only http and https URLs may be fetched",
                redacted(url)
            ))
            .permanent());
        }
        let ip = match url.host() {
            Some(url::Host::Ipv4(v4)) => IpAddr::V4(v4),
            Some(url::Host::Ipv6(v6)) => IpAddr::V6(v6),
            Some(url::Host::Domain(_)) => return Ok(()),
            None => {
                return Err(
                    ToolError::validation(format!("URL {} has no host", redacted(url))).permanent(),
                );
            }
        };
        match self.policy.refuses(&ip.to_string(), ip) {
            Some(class) => Err(refused(Refusal {
                host: ip.to_string(),
                ip,
                class,
            })),
            None => Ok(()),
        }
    }
}

/// The longest wait for a connection under `policy`.
fn connect_timeout(policy: &NetPolicy) -> Duration {
    policy.timeout().min(Duration::from_secs(10))
}

fn parse_method(method: &str) -> Result<reqwest::Method, ToolError> {
    reqwest::Method::from_bytes(method.as_bytes()).map_err(|_| {
        ToolError::validation(format!(
            "Invalid HTTP method {method:?}; use GET, POST, PUT, PATCH, DELETE or HEAD"
        ))
        .permanent()
    })
}

fn parse_url(raw: &str) -> Result<Url, ToolError> {
    Url::parse(raw).map_err(|e| {
        ToolError::validation(format!(
            "Invalid URL {}: {e}; write an absolute http:// or https:// URL",
            shown(raw)
        ))
        .permanent()
    })
}

fn refused(r: Refusal) -> ToolError {
    ToolError::authorization(r.to_string()).permanent()
}

/// Where a response from `url` with `status` and `headers` redirects to, if it is a redirect
/// with a `Location`.
fn redirect_target(
    status: reqwest::StatusCode,
    headers: &reqwest::header::HeaderMap,
    url: &Url,
) -> Result<Option<Url>, ToolError> {
    if !status.is_redirection() {
        return Ok(None);
    }
    let Some(location) = headers
        .get(reqwest::header::LOCATION)
        .and_then(|v| v.to_str().ok())
    else {
        return Ok(None);
    };
    url.join(location).map(Some).map_err(|e| {
        ToolError::execution(format!(
            "{} redirected to an invalid location ({e})",
            redacted(url)
        ))
        .permanent()
    })
}

/// The refusal of a redirect from `url` to `next` (a request that is never redirected).
fn refused_redirect(url: &Url, status: reqwest::StatusCode, next: &Url) -> ToolError {
    ToolError::execution(format!(
        "{} answered with a redirect ({}) to {}; this request is not redirected: use the final address instead",
        redacted(url),
        status.as_u16(),
        redacted(next)
    ))
    .permanent()
}

impl HttpClient for PolicyClient {
    fn send<'a>(
        &'a self,
        request: HttpRequest,
        cancel: &'a CancellationToken,
    ) -> BoxFuture<'a, Result<HttpResponse, ToolError>> {
        Box::pin(async move {
            if cancel.is_cancelled() {
                return Err(ToolError::cancelled());
            }
            let limit = match request.timeout {
                Some(t) => t.min(self.policy.timeout()),
                None => self.policy.timeout(),
            };
            let cap = match request.max_response_bytes {
                Some(c) => c.min(self.policy.max_response_bytes),
                None => self.policy.max_response_bytes,
            };
            let target = shown(&request.url);
            tokio::select! {
                biased;
                () = cancel.cancelled() => Err(ToolError::cancelled()),
                out = tokio::time::timeout(limit, self.exchange(request, cap)) => match out {
                    Ok(result) => result,
                    Err(_) => Err(ToolError::new(
                        ErrorKind::Timeout,
                        format!("{target} did not answer within {} ms", limit.as_millis()),
                    )
                    .retryable()),
                },
            }
        })
    }
}

/// Reads the body up to `cap` bytes.
async fn read_response(
    mut response: reqwest::Response,
    url: &Url,
    cap: u64,
) -> Result<HttpResponse, ToolError> {
    let too_big = || {
        ToolError::execution(format!(
            "The response from {} is larger than the {} limit; ask for a smaller resource",
            redacted(url),
            human_bytes(cap)
        ))
        .permanent()
    };
    if response.content_length().is_some_and(|n| n > cap) {
        return Err(too_big());
    }
    let status = response.status().as_u16();
    let headers = response
        .headers()
        .iter()
        .filter_map(|(k, v)| Some((k.as_str().to_owned(), v.to_str().ok()?.to_owned())))
        .collect();
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(|e| send_error(&e, url))? {
        if body.len() as u64 + chunk.len() as u64 > cap {
            return Err(too_big());
        }
        body.extend_from_slice(&chunk);
    }
    Ok(HttpResponse {
        status,
        headers,
        body,
    })
}

/// A reqwest failure as a tool error; a refusal by the checking resolver keeps its message.
fn send_error(e: &reqwest::Error, url: &Url) -> ToolError {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(s) = source {
        if let Some(r) = s.downcast_ref::<Refusal>() {
            return refused(r.clone());
        }
        source = s.source();
    }
    let at = redacted(url);
    if e.is_timeout() {
        return ToolError::new(ErrorKind::Timeout, format!("{at} did not answer in time"))
            .retryable();
    }
    // The innermost cause says the most (connection refused, no such host, bad certificate).
    let mut cause = e.to_string();
    let mut s = std::error::Error::source(e);
    while let Some(inner) = s {
        cause = inner.to_string();
        s = inner.source();
    }
    let cause = cause.replace(url.as_str(), &at);
    if e.is_connect() {
        ToolError::unavailable(format!("Cannot connect to {at}: {cause}"))
    } else {
        ToolError::unavailable(format!("Request to {at} failed: {cause}"))
    }
}

/// A URL as messages and logs may show it: scheme, host, port and path, no query or userinfo.
pub fn redacted(url: &Url) -> String {
    let mut shown = format!("{}://", url.scheme());
    if let Some(host) = url.host_str() {
        shown.push_str(host);
    }
    if let Some(port) = url.port() {
        shown.push_str(&format!(":{port}"));
    }
    shown.push_str(url.path());
    shown
}

fn shown(raw: &str) -> String {
    match Url::parse(raw) {
        Ok(u) => redacted(&u),
        Err(_) => raw.split(['?', '#']).next().unwrap_or("").to_owned(),
    }
}

fn human_bytes(n: u64) -> String {
    if n >= 1024 * 1024 && n.is_multiple_of(1024 * 1024) {
        format!("{} MiB", n / (1024 * 1024))
    } else if n >= 1024 && n.is_multiple_of(1024) {
        format!("{} KiB", n / 1024)
    } else {
        format!("{n} bytes")
    }
}
