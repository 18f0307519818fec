//! The web Tool Manager (README.md, "Web UI"): static HTML, CSS and JavaScript modules from
//! `crates/server/ui/`, compiled into the binary and served at `/` and `/ui/…`. The pages talk
//! only to the public REST API; nothing here reads the registry or the store. Every answer
//! carries a strict Content-Security-Policy (no inline script or style, nothing from another
//! origin), `nosniff`, and an `ETag` so browsers revalidate instead of refetching.

use std::sync::LazyLock;

use axum::extract::{Path, Request};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use sha2::{Digest, Sha256};

use crate::error::ServerError;

/// The routes the UI adds, in the router's spelling. They are not API routes, so they are not in
/// `/openapi.json` (see [`crate::ROUTES`] for those).
pub const UI_ROUTES: [(&str, &str); 2] = [("get", "/"), ("get", "/ui/{*path}")];

/// The policy every UI response carries: scripts, styles, images and fetches from this origin
/// only; no plugins, no framing, no `<base>` tricks, forms post only here.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// One embedded file.
struct Asset {
    /// Path under `/ui/` (the page itself is `index.html`, served at `/`).
    path: &'static str,
    content_type: &'static str,
    body: &'static [u8],
}

macro_rules! assets {
    ($($path:literal => $type:expr),+ $(,)?) => {
        &[$(Asset {
            path: $path,
            content_type: $type,
            body: include_bytes!(concat!("../ui/", $path)),
        }),+]
    };
}

const JS: &str = "text/javascript; charset=utf-8";

/// Every file of `crates/server/ui/` (a test checks that none is missing).
static ASSETS: &[Asset] = assets! {
    "index.html" => "text/html; charset=utf-8",
    "style.css" => "text/css; charset=utf-8",
    "icon.svg" => "image/svg+xml",
    "app.js" => JS,
    "api.js" => JS,
    "dom.js" => JS,
    "format.js" => JS,
    "views/approvals.js" => JS,
    "views/calls.js" => JS,
    "views/definition-text.js" => JS,
    "views/playground.js" => JS,
    "views/runs.js" => JS,
    "views/servers.js" => JS,
    "views/tool-detail.js" => JS,
    "views/tool-form.js" => JS,
    "views/tools.js" => JS,
};

/// Strong ETags (a hash of each file), computed once.
static ETAGS: LazyLock<Vec<HeaderValue>> = LazyLock::new(|| {
    ASSETS
        .iter()
        .map(|a| {
            let digest = Sha256::digest(a.body);
            let hex: String = digest[..12].iter().map(|b| format!("{b:02x}")).collect();
            HeaderValue::from_str(&format!("\"{hex}\""))
                .unwrap_or_else(|_| HeaderValue::from_static("\"0\""))
        })
        .collect()
});

/// The paths of every embedded file (for tests and diagnostics).
pub fn ui_files() -> Vec<&'static str> {
    ASSETS.iter().map(|a| a.path).collect()
}

/// The UI routes; the caller adds the Host/Origin check around them.
pub(crate) fn routes<S: Clone + Send + Sync + 'static>() -> axum::Router<S> {
    axum::Router::new()
        .route("/", get(index))
        .route("/ui/{*path}", get(asset))
}

async fn index(request: Request) -> Response {
    serve("index.html", request.headers())
}

async fn asset(Path(path): Path<String>, request: Request) -> Response {
    serve(&path, request.headers())
}

fn serve(path: &str, headers: &HeaderMap) -> Response {
    let Some(i) = ASSETS.iter().position(|a| a.path == path) else {
        return ServerError::NotFound(format!("No file /ui/{path} in the web UI")).into_response();
    };
    let asset = &ASSETS[i];
    let etag = ETAGS.get(i).cloned();
    let fresh = match (&etag, headers.get(header::IF_NONE_MATCH)) {
        (Some(tag), Some(sent)) => sent
            .to_str()
            .is_ok_and(|s| s.split(',').any(|t| t.trim() == tag.to_str().unwrap_or(""))),
        _ => false,
    };
    let mut response = if fresh {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        let mut r = asset.body.into_response();
        r.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static(asset.content_type),
        );
        r
    };
    let h = response.headers_mut();
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CONTENT_SECURITY_POLICY),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    // Embedded files change only with the binary: revalidate each time (cheap, 304).
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    if let Some(tag) = etag {
        h.insert(header::ETAG, tag);
    }
    response
}
