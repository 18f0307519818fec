//! An MCP session belongs to the principal that opened it: the Streamable HTTP session id
//! returned by `initialize` is bound to the authenticated caller of that request, and a request
//! that carries the id with another principal's credentials is answered exactly as if the
//! session did not exist — rmcp's own unknown-session 404, reached by swapping the id for one
//! that was never issued (a DELETE, which rmcp would accept with 202, gets the same 404 here).
//! Sessions with no recorded owner are treated the same way, so a missing record never grants.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Mutex;

use axum::body::Body;
use axum::extract::Request;
use axum::http::StatusCode;
use axum::http::{HeaderValue, Method};
use axum::response::{IntoResponse, Response};

use toolgate_core::PrincipalId;

use crate::auth::Caller;

/// The Streamable HTTP session header (rmcp's `HEADER_SESSION_ID`; header names are
/// case-insensitive).
const SESSION_HEADER: &str = "mcp-session-id";

/// Below this many recorded sessions the table is never pruned.
const PRUNE_FLOOR: usize = 64;

/// rmcp's answer to a request on a session it does not hold (`Not Found: Session not found`,
/// no content type), for the DELETE that rmcp itself would accept.
fn not_found() -> Response {
    let mut response = Response::new(Body::from("Not Found: Session not found"));
    *response.status_mut() = StatusCode::NOT_FOUND;
    response
}

/// Session id → the id of the principal that initialized it.
#[derive(Debug, Default)]
pub(crate) struct SessionOwners {
    table: Mutex<Table>,
}

#[derive(Debug, Default)]
struct Table {
    owners: HashMap<String, PrincipalId>,
    /// The table's size after the last prune; the next prune waits until it has doubled.
    pruned_at: usize,
}

impl SessionOwners {
    /// Serves one `/mcp` request through `serve` (rmcp), enforcing the binding: a session id the
    /// caller does not own is replaced by a fresh, never-issued one before rmcp sees it; a new
    /// session id in the response is recorded as the caller's; a successful DELETE forgets it.
    /// `live` says whether rmcp still holds a session, for pruning ended sessions.
    pub(crate) async fn serve<R, F, L, LF>(
        &self,
        mut request: Request,
        serve: impl FnOnce(Request) -> F,
        live: L,
    ) -> Response
    where
        R: IntoResponse,
        F: Future<Output = R>,
        L: Fn(String) -> LF,
        LF: Future<Output = bool>,
    {
        let principal = request
            .extensions()
            .get::<std::sync::Arc<Caller>>()
            .map(|c| c.principal.id.clone());
        let asked = request
            .headers()
            .get(SESSION_HEADER)
            .map(|v| v.to_str().map(str::to_owned));
        let owned = match (&asked, &principal) {
            (Some(Ok(id)), Some(principal)) => self.owned_by(id, principal),
            _ => false,
        };
        let deleting = request.method() == Method::DELETE;
        if asked.is_some() && !owned && deleting {
            // rmcp answers a DELETE of an unknown session 202 (and would end a session that is
            // not the caller's); the MCP rule is 404 for a session that does not exist.
            return not_found();
        }
        if asked.is_some() && !owned {
            // Not this caller's session (or none we know of): rmcp answers it as unknown.
            let never_issued = uuid::Uuid::new_v4().to_string();
            if let Ok(value) = HeaderValue::from_str(&never_issued) {
                request.headers_mut().insert(SESSION_HEADER, value);
            }
        }
        let response = serve(request).await.into_response();
        let success = response.status().is_success();
        match (asked, principal) {
            (Some(Ok(id)), Some(_)) if owned && deleting && success => self.forget(&id),
            (None, Some(principal)) => {
                let issued = response
                    .headers()
                    .get(SESSION_HEADER)
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_owned);
                if let Some(id) = issued {
                    self.record(id, principal, live).await;
                }
            }
            _ => {}
        }
        response
    }

    fn owned_by(&self, session: &str, principal: &PrincipalId) -> bool {
        self.lock().owners.get(session) == Some(principal)
    }

    fn forget(&self, session: &str) {
        self.lock().owners.remove(session);
    }

    /// Records `session` as `principal`'s, first dropping sessions rmcp no longer holds once the
    /// table has doubled since the last prune (amortised constant cost per session).
    async fn record<L, LF>(&self, session: String, principal: PrincipalId, live: L)
    where
        L: Fn(String) -> LF,
        LF: Future<Output = bool>,
    {
        let candidates: Vec<String> = {
            let table = self.lock();
            if table.owners.len() >= PRUNE_FLOOR.max(2 * table.pruned_at) {
                table.owners.keys().cloned().collect()
            } else {
                Vec::new()
            }
        };
        let pruning = !candidates.is_empty();
        let mut ended = Vec::new();
        for id in candidates {
            if !live(id.clone()).await {
                ended.push(id);
            }
        }
        let mut table = self.lock();
        for id in &ended {
            table.owners.remove(id);
        }
        table.owners.insert(session, principal);
        if pruning {
            table.pruned_at = table.owners.len();
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(|p| p.into_inner())
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.lock().owners.len()
    }

    #[cfg(test)]
    fn owner(&self, session: &str) -> Option<String> {
        self.lock()
            .owners
            .get(session)
            .map(|p| p.as_str().to_owned())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use std::sync::Arc;

    use http_body_util::BodyExt;
    use toolgate_core::Principal;

    use super::*;

    fn request(principal: &str, session: Option<&str>, method: Method) -> Request {
        let mut builder = Request::builder().method(method).uri("/mcp");
        if let Some(s) = session {
            builder = builder.header(SESSION_HEADER, s);
        }
        let mut r = builder.body(axum::body::Body::empty()).unwrap();
        let principal = Principal::new(PrincipalId::parse(principal).unwrap());
        r.extensions_mut().insert(Arc::new(Caller {
            principal: Arc::new(principal),
            plan: toolgate_store::Plan::named("enterprise").unwrap(),
        }));
        r
    }

    /// A stand-in for rmcp: issues `issue` on a request without a session id, and reports the
    /// session id it was asked for.
    async fn fake(r: Request, issue: impl Into<String>) -> Response<String> {
        let seen = r
            .headers()
            .get(SESSION_HEADER)
            .map(|v| v.to_str().unwrap().to_owned());
        let mut builder = Response::builder().status(StatusCode::OK);
        if seen.is_none() {
            builder = builder.header(SESSION_HEADER, issue.into());
        }
        builder.body(seen.unwrap_or_default()).unwrap()
    }

    async fn live(_: String) -> bool {
        true
    }

    async fn text(r: Response) -> String {
        let bytes = r.into_body().collect().await.unwrap().to_bytes();
        String::from_utf8(bytes.to_vec()).unwrap()
    }

    #[tokio::test]
    async fn a_session_answers_only_its_owner() {
        let owners = SessionOwners::default();
        owners
            .serve(
                request("alice", None, Method::POST),
                |r| fake(r, "s-1"),
                live,
            )
            .await;
        assert_eq!(owners.owner("s-1").as_deref(), Some("alice"));

        // Its owner reaches it.
        let seen = owners
            .serve(
                request("alice", Some("s-1"), Method::POST),
                |r| fake(r, "x"),
                live,
            )
            .await;
        assert_eq!(text(seen).await, "s-1");

        // Another principal and an unknown id reach a session id that was never issued.
        let seen = owners
            .serve(
                request("bob", Some("s-1"), Method::POST),
                |r| fake(r, "x"),
                live,
            )
            .await;
        let seen = text(seen).await;
        assert_ne!(seen, "s-1");
        assert!(!seen.is_empty());
        // Another principal's DELETE does not reach rmcp (which would end it): 404.
        let r = owners
            .serve(
                request("bob", Some("s-1"), Method::DELETE),
                |r| fake(r, "x"),
                live,
            )
            .await;
        assert_eq!(r.status(), StatusCode::NOT_FOUND);
        assert_eq!(owners.owner("s-1").as_deref(), Some("alice"));
        let seen = owners
            .serve(
                request("alice", Some("s-404"), Method::GET),
                |r| fake(r, "x"),
                live,
            )
            .await;
        assert_ne!(text(seen).await, "s-404");

        // The owner's DELETE forgets it.
        owners
            .serve(
                request("alice", Some("s-1"), Method::DELETE),
                |r| fake(r, "x"),
                live,
            )
            .await;
        assert_eq!(owners.owner("s-1"), None);
    }

    #[tokio::test]
    async fn ended_sessions_are_pruned() {
        let owners = SessionOwners::default();
        for i in 0..1000 {
            owners
                .serve(
                    request("alice", None, Method::POST),
                    |r| fake(r, format!("s-{i}")),
                    |_| async { false },
                )
                .await;
        }
        assert!(owners.len() < 2 * PRUNE_FLOOR, "{} left", owners.len());
    }
}
