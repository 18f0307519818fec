//! An MCP session belongs to the principal that opened it: a request that carries a session id
//! with another principal's credentials is answered exactly as if the session did not exist —
//! rmcp's own unknown-session 404, reached by swapping the id for one that was never issued (a
//! DELETE, which rmcp would accept with 202, gets the same 404 here). Who owns a session is what
//! the session table (`mcp_sessions`) recorded when it admitted the session; a session with no
//! recorded owner is treated the same way, so a missing record never grants.

use std::future::Future;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::Request;
use axum::http::{HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};

use crate::auth::Caller;

/// The Streamable HTTP session header (rmcp's `HEADER_SESSION_ID`; header names are
/// case-insensitive).
const SESSION_HEADER: &str = "mcp-session-id";

/// rmcp's answer to a request on a session it does not hold (`Not Found: Session not found`,
/// no content type), for the DELETE that rmcp itself would accept.
fn not_found() -> Response {
    let mut response = Response::new(Body::from("Not Found: Session not found"));
    *response.status_mut() = StatusCode::NOT_FOUND;
    response
}

/// Serves one `/mcp` request through `serve` (rmcp), enforcing the binding: a session id whose
/// owner (`owner_of`, the session table's record) is not the caller is replaced by a fresh,
/// never-issued one before rmcp sees it, and such a DELETE is answered 404 here.
pub(crate) async fn serve_owned<R, F>(
    mut request: Request,
    owner_of: impl FnOnce(&str) -> Option<Arc<str>>,
    serve: impl FnOnce(Request) -> F,
) -> Response
where
    R: IntoResponse,
    F: Future<Output = R>,
{
    let Some(asked) = request.headers().get(SESSION_HEADER) else {
        return serve(request).await.into_response();
    };
    let caller = request
        .extensions()
        .get::<Arc<Caller>>()
        .map(|c| c.principal.id.clone());
    let owned = match (asked.to_str(), caller) {
        (Ok(id), Some(caller)) => owner_of(id).is_some_and(|owner| *owner == *caller.as_str()),
        _ => false,
    };
    if !owned {
        if request.method() == Method::DELETE {
            // rmcp answers a DELETE of an unknown session 202 (and would end a session that is
            // not the caller's); the MCP rule is 404 for a session that does not exist.
            return not_found();
        }
        // Not this caller's session (or none we know of): rmcp answers it as unknown.
        let never_issued = uuid::Uuid::new_v4().to_string();
        if let Ok(value) = HeaderValue::from_str(&never_issued) {
            request.headers_mut().insert(SESSION_HEADER, value);
        }
    }
    serve(request).await.into_response()
}

#[cfg(test)]
mod tests {
    use http_body_util::BodyExt;
    use toolgate_core::{Principal, PrincipalId};

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
            plan: toolgate_store::Tier::named("enterprise").unwrap(),
        }));
        r
    }

    /// The session table of these tests: `s-1` is alice's, nothing else exists.
    fn owner_of(id: &str) -> Option<Arc<str>> {
        (id == "s-1").then(|| Arc::from("alice"))
    }

    /// A stand-in for rmcp that reports the session id it was asked for.
    async fn fake(r: Request) -> Response<String> {
        let seen = r
            .headers()
            .get(SESSION_HEADER)
            .map(|v| v.to_str().unwrap().to_owned());
        Response::builder()
            .status(StatusCode::OK)
            .body(seen.unwrap_or_default())
            .unwrap()
    }

    async fn seen(principal: &str, session: Option<&str>, method: Method) -> Response {
        serve_owned(request(principal, session, method), owner_of, fake).await
    }

    async fn text(r: Response) -> String {
        let bytes = r.into_body().collect().await.unwrap().to_bytes();
        String::from_utf8(bytes.to_vec()).unwrap()
    }

    #[tokio::test]
    async fn a_session_answers_only_its_owner() {
        // A request without a session id (an initialize) passes untouched.
        assert_eq!(text(seen("bob", None, Method::POST).await).await, "");
        // Its owner reaches it.
        assert_eq!(
            text(seen("alice", Some("s-1"), Method::POST).await).await,
            "s-1"
        );
        // Another principal and an unknown id reach a session id that was never issued.
        let other = text(seen("bob", Some("s-1"), Method::POST).await).await;
        assert_ne!(other, "s-1");
        assert!(!other.is_empty());
        assert_ne!(
            text(seen("alice", Some("s-404"), Method::GET).await).await,
            "s-404"
        );
        // Another principal's DELETE does not reach rmcp (which would end it): 404.
        let r = seen("bob", Some("s-1"), Method::DELETE).await;
        assert_eq!(r.status(), StatusCode::NOT_FOUND);
        // The owner's DELETE reaches rmcp.
        assert_eq!(
            text(seen("alice", Some("s-1"), Method::DELETE).await).await,
            "s-1"
        );
    }
}
