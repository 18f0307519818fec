//! Streamed exchanges ([`PolicyClient::open`](crate::PolicyClient::open)): the request, the
//! response head, and the body read in a capped whole or as capped server-sent events.

use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use futures_util::stream::{self, BoxStream, StreamExt};
use reqwest::Url;
use tokio_util::sync::CancellationToken;
use toolgate_core::{ErrorKind, ToolError};

use crate::direct::Body;
use crate::human_bytes;
use crate::redacted;
use crate::sse::{SseEvent, SseParser};

/// What a streamed request does with a redirect.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Redirects {
    /// Refuse it with a message naming the target (MCP requests: a POST's body and the
    /// session must not move to another address behind the configured one's back).
    #[default]
    Refuse,
    /// Follow it by hand, at most the policy's `max_redirects`, each target checked again and
    /// the caller's headers dropped when it leaves the origin.
    Follow,
}

/// A request for [`PolicyClient::open`](crate::PolicyClient::open).
#[derive(Clone, Debug, Default)]
pub struct StreamRequest {
    /// `GET`, `POST`, `DELETE`, …
    pub method: String,
    /// An absolute `http://` or `https://` URL.
    pub url: String,
    /// Every header sent (the client adds only its user agent and the body's length).
    pub headers: Vec<(String, String)>,
    /// The body, if any.
    pub body: Option<Vec<u8>>,
    /// Redirects refused (the default) or followed.
    pub redirects: Redirects,
    /// The longest wait for the response head; `None` waits until cancelled.
    pub timeout: Option<Duration>,
}

/// A response whose head has arrived; the body is still to be read.
pub struct StreamResponse {
    pub(crate) status: u16,
    pub(crate) response: Body,
    pub(crate) url: Arc<Url>,
    pub(crate) cancel: CancellationToken,
    pub(crate) timeout: Duration,
    pub(crate) max_bytes: u64,
}

impl std::fmt::Debug for StreamResponse {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StreamResponse")
            .field("status", &self.status)
            .field("url", &redacted(&self.url))
            .finish_non_exhaustive()
    }
}

/// Server-sent events as they arrive; ends with the body, an error, or cancellation.
pub type SseEvents = BoxStream<'static, Result<SseEvent, ToolError>>;

impl StreamResponse {
    /// The HTTP status code.
    pub fn status(&self) -> u16 {
        self.status
    }

    /// Every header whose value is text, names in lower case.
    pub fn headers(&self) -> impl Iterator<Item = (&str, &str)> {
        self.response
            .headers()
            .iter()
            .filter_map(|(k, v)| Some((k.as_str(), v.to_str().ok()?)))
    }

    /// The first text value of header `name` (any case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.response
            .headers()
            .get_all(name)
            .iter()
            .find_map(|v| v.to_str().ok())
    }

    /// The `Content-Length` the server announced, if any.
    pub fn content_length(&self) -> Option<u64> {
        self.response.content_length()
    }

    /// The URL as messages may show it (no query).
    pub fn shown_url(&self) -> String {
        redacted(&self.url)
    }

    /// The whole body, refused beyond `cap` bytes (and beyond the policy's
    /// `max_response_bytes`), read within the policy's timeout. A body that arrives in one
    /// piece is returned as it came, without a copy.
    pub async fn bytes(self, cap: u64) -> Result<Bytes, ToolError> {
        let cap = cap.min(self.max_bytes);
        let too_big = |url: &Url| {
            ToolError::execution(format!(
                "The response from {} is larger than the {} limit; ask for a smaller resource",
                redacted(url),
                human_bytes(cap)
            ))
            .permanent()
        };
        if self.response.content_length().is_some_and(|n| n > cap) {
            return Err(too_big(&self.url));
        }
        let url = self.url;
        let mut response = self.response;
        let read = async {
            let mut first: Option<Bytes> = None;
            let mut more = BytesMut::new();
            while let Some(chunk) = response.chunk(&url).await? {
                let held = first.as_ref().map_or(0, Bytes::len) + more.len();
                if held as u64 + chunk.len() as u64 > cap {
                    return Err(too_big(&url));
                }
                match first.take() {
                    None if more.is_empty() => first = Some(chunk),
                    None => more.extend_from_slice(&chunk),
                    Some(earlier) => {
                        more.extend_from_slice(&earlier);
                        more.extend_from_slice(&chunk);
                    }
                }
            }
            Ok(first.unwrap_or_else(|| more.freeze()))
        };
        tokio::select! {
            biased;
            () = self.cancel.cancelled() => Err(ToolError::cancelled()),
            out = tokio::time::timeout(self.timeout, read) => out.unwrap_or_else(|_| {
                Err(ToolError::new(
                    ErrorKind::Timeout,
                    format!(
                        "{} did not finish its answer within {} ms",
                        redacted(&url),
                        self.timeout.as_millis()
                    ),
                )
                .retryable())
            }),
        }
    }

    /// The body as server-sent events, each refused beyond `max_event_bytes` (and beyond the
    /// policy's `max_response_bytes`); the stream as a whole has no size or time cap. The
    /// stream ends after its first error; cancellation ends it with a `cancelled` error.
    pub fn events(self, max_event_bytes: u64) -> SseEvents {
        let cap = max_event_bytes.min(self.max_bytes);
        let state = EventState {
            response: self.response,
            url: self.url,
            cancel: self.cancel,
            parser: SseParser::new(cap),
            failed: None,
            done: false,
        };
        stream::unfold(state, |mut st| async move {
            loop {
                if let Some(event) = st.parser.next_event() {
                    return Some((Ok(event), st));
                }
                if let Some(err) = st.failed.take() {
                    return Some((Err(err), st));
                }
                if st.done {
                    return None;
                }
                let chunk = tokio::select! {
                    biased;
                    () = st.cancel.cancelled() => Err(ToolError::cancelled()),
                    c = st.response.chunk(&st.url) => c,
                };
                match chunk {
                    Ok(Some(bytes)) => {
                        if let Err(big) = st.parser.feed(&bytes) {
                            st.done = true;
                            st.failed = Some(ToolError::execution(format!(
                                "An event in the stream from {} is larger than the {} limit; raise [network] max_response_bytes if the server's events are that large",
                                redacted(&st.url),
                                human_bytes(big.cap)
                            ))
                            .permanent());
                        }
                    }
                    Ok(None) => st.done = true,
                    Err(e) => {
                        st.done = true;
                        st.failed = Some(e);
                    }
                }
            }
        })
        .boxed()
    }
}

struct EventState {
    response: Body,
    url: Arc<Url>,
    cancel: CancellationToken,
    parser: SseParser,
    /// The error to deliver once the events parsed before it are out.
    failed: Option<ToolError>,
    done: bool,
}
