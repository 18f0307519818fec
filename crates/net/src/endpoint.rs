//! One fixed destination for many streamed requests ([`Endpoint`]): what does not change from
//! one request to the next is parsed and checked once.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use reqwest::Url;
use reqwest::header::HeaderMap;
use tokio_util::sync::CancellationToken;
use toolgate_core::ToolError;

use crate::direct::{Body, DirectPool};
use crate::{PolicyClient, StreamResponse, parse_url, redacted, redirect_target, refused_redirect};

/// A URL under a [`PolicyClient`]'s policy, for many requests to it (an MCP server's endpoint).
///
/// [`PolicyClient::endpoint`] parses the URL and applies the policy's scheme and literal
/// address checks once (the URL and the policy never change afterwards); every connection is
/// still made through the checking resolver, so a name's addresses are checked (and the
/// connection pinned to a checked one) as for any other request. A request here is never
/// redirected: a redirect is refused with its target named, like
/// [`Redirects::Refuse`](crate::Redirects::Refuse). The caller builds the headers (send only what the destination
/// may see); the client adds its user agent and the body's length, nothing else.
#[derive(Clone)]
pub struct Endpoint {
    inner: Arc<Inner>,
}

struct Inner {
    client: PolicyClient,
    url: Arc<Url>,
    /// The connections of a plain-http endpoint, used instead of reqwest's (`direct.rs`).
    direct: Option<DirectPool>,
}

impl fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Endpoint")
            .field("url", &redacted(&self.inner.url))
            .finish_non_exhaustive()
    }
}

impl PolicyClient {
    /// `url` as an [`Endpoint`] of this client: refused now if the policy refuses its scheme
    /// or its literal address (a name's addresses are checked as each connection is made).
    pub fn endpoint(&self, url: &str) -> Result<Endpoint, ToolError> {
        let url = parse_url(url)?;
        self.check_url(&url)?;
        Ok(Endpoint {
            inner: Arc::new(Inner {
                client: self.clone(),
                direct: DirectPool::new(&url),
                url: Arc::new(url),
            }),
        })
    }
}

impl Endpoint {
    /// The URL as messages may show it (no query).
    pub fn shown_url(&self) -> String {
        redacted(&self.inner.url)
    }

    /// Sends `method` with `headers` and `body` and returns at the response head, as
    /// [`PolicyClient::open`] does with a request that refuses redirects: `timeout` bounds the
    /// wait for the head (`None`: only the connect timeout; cancel with `cancel`), and `cancel`
    /// stops the request and, later, the body reads at once.
    pub async fn open(
        &self,
        method: reqwest::Method,
        headers: HeaderMap,
        body: Option<Bytes>,
        timeout: Option<Duration>,
        cancel: &CancellationToken,
    ) -> Result<StreamResponse, ToolError> {
        if cancel.is_cancelled() {
            return Err(ToolError::cancelled());
        }
        let Inner {
            client,
            url,
            direct,
        } = &*self.inner;
        let head = async {
            let response = match direct {
                Some(pool) => Body::Direct(pool.send(client, url, method, headers, body).await?),
                None => {
                    let mut request = reqwest::Request::new(method, Url::clone(url));
                    *request.headers_mut() = headers;
                    *request.body_mut() = body.map(reqwest::Body::from);
                    Body::Reqwest(
                        client
                            .client
                            .execute(request)
                            .await
                            .map_err(|e| crate::send_error(&e, url))?,
                    )
                }
            };
            let status = match &response {
                Body::Reqwest(r) => r.status(),
                Body::Direct(r) => r.status(),
            };
            match redirect_target(status, response.headers(), url)? {
                Some(next) => Err(refused_redirect(url, status, &next)),
                None => Ok(response),
            }
        };
        let response = client
            .await_head(head, timeout, cancel, || redacted(url))
            .await?;
        Ok(client.stream_response(response, Arc::clone(url), cancel))
    }
}
