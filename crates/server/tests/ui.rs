//! The web UI is served from the binary: `/` and every file under `crates/server/ui/` with the
//! right content type, a strict Content-Security-Policy, `nosniff` and an ETag (304 when it
//! matches); no inline script or style, nothing loaded from another origin; the Host/Origin
//! check covers these routes too; and the UI routes stay out of `/openapi.json`.
#![cfg(test)]

mod common;

use std::path::Path;

use axum::http::{Method, StatusCode};
use common::Harness;

/// Every file in `crates/server/ui/`, relative to it, with `/` separators.
fn files_on_disk(dir: &Path, prefix: &str, out: &mut Vec<String>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name().to_string_lossy().into_owned();
        let path = format!("{prefix}{name}");
        if entry.file_type().unwrap().is_dir() {
            files_on_disk(&entry.path(), &format!("{path}/"), out);
        } else {
            out.push(path);
        }
    }
}

#[tokio::test]
async fn the_page_and_every_asset_are_served_with_a_strict_policy() {
    let h = Harness::new(Vec::new()).await;
    let page = h.send(Method::GET, "/", None, None).await;
    assert_eq!(page.status, StatusCode::OK);
    assert_eq!(page.headers["content-type"], "text/html; charset=utf-8");
    let csp = page.headers["content-security-policy"].to_str().unwrap();
    assert_eq!(csp, toolgate_server::CONTENT_SECURITY_POLICY);
    assert!(csp.contains("default-src 'self'"), "{csp}");
    assert!(csp.contains("script-src 'self'"), "{csp}");
    assert!(!csp.contains("unsafe-inline"), "{csp}");
    assert_eq!(page.headers["x-content-type-options"], "nosniff");
    assert_eq!(page.headers["cache-control"], "no-cache");
    assert!(
        page.text
            .contains("<script type=\"module\" src=\"/ui/app.js\">")
    );

    // Every file on disk is embedded (a new file must be added to the list in ui.rs).
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("ui");
    let mut on_disk = Vec::new();
    files_on_disk(&dir, "", &mut on_disk);
    on_disk.sort();
    let mut embedded: Vec<String> = toolgate_server::ui_files()
        .into_iter()
        .map(str::to_owned)
        .collect();
    embedded.sort();
    assert_eq!(embedded, on_disk, "crates/server/ui and ui.rs disagree");

    for file in &on_disk {
        let reply = h
            .send(Method::GET, &format!("/ui/{file}"), None, None)
            .await;
        assert_eq!(reply.status, StatusCode::OK, "{file}");
        let ctype = reply.headers["content-type"].to_str().unwrap();
        let want = match file.rsplit('.').next().unwrap() {
            "js" => "text/javascript; charset=utf-8",
            "css" => "text/css; charset=utf-8",
            "html" => "text/html; charset=utf-8",
            "svg" => "image/svg+xml",
            other => panic!("unexpected file type {other}"),
        };
        assert_eq!(ctype, want, "{file}");
        assert!(reply.headers.contains_key("content-security-policy"));
        assert_eq!(reply.headers["x-content-type-options"], "nosniff");
        let on_disk = std::fs::read_to_string(dir.join(file)).unwrap();
        assert_eq!(reply.text, on_disk, "{file} is served as it is on disk");
        // Nothing from the internet, no inline handlers or styles (the CSP would block them).
        for banned in [
            "http://",
            "https://",
            "innerHTML",
            "eval(",
            "style=\"",
            " onclick=\"",
        ] {
            let allowed = banned == "http://" && file == "icon.svg";
            assert!(
                allowed || !on_disk.contains(banned),
                "{file} contains {banned:?}"
            );
        }
        if file.ends_with(".html") {
            // Every <script> has a src: no inline script.
            for tag in on_disk.split("<script").skip(1) {
                assert!(
                    tag.split('>').next().unwrap().contains("src="),
                    "inline script in {file}"
                );
            }
        }
        // JavaScript imports point at embedded files.
        if file.ends_with(".js") {
            let base = Path::new(file).parent().unwrap();
            for line in on_disk.lines().filter(|l| l.starts_with("import ")) {
                let target = line.split(['\'', '"']).nth(1).unwrap();
                let resolved = base.join(target);
                let resolved = normalize(&resolved);
                assert!(
                    embedded.contains(&resolved),
                    "{file} imports {target} ({resolved}), which is not served"
                );
            }
        }
    }
    let missing = h.send(Method::GET, "/ui/nothing.js", None, None).await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
    let escape = h.send(Method::GET, "/ui/../Cargo.toml", None, None).await;
    assert_ne!(escape.status, StatusCode::OK);
}

fn normalize(path: &Path) -> String {
    let mut parts: Vec<String> = Vec::new();
    for c in path.components() {
        match c {
            std::path::Component::ParentDir => {
                parts.pop();
            }
            std::path::Component::Normal(s) => parts.push(s.to_string_lossy().into_owned()),
            _ => {}
        }
    }
    parts.join("/")
}

#[tokio::test]
async fn etags_let_browsers_revalidate() {
    let h = Harness::new(Vec::new()).await;
    let first = h.send(Method::GET, "/ui/app.js", None, None).await;
    let etag = first.headers["etag"].to_str().unwrap().to_owned();
    assert!(etag.starts_with('"') && etag.len() > 10, "{etag}");
    let again = h
        .send_with(
            Method::GET,
            "/ui/app.js",
            None,
            None,
            &[("if-none-match", &etag)],
        )
        .await;
    assert_eq!(again.status, StatusCode::NOT_MODIFIED);
    assert!(again.text.is_empty());
    assert_eq!(again.headers["etag"].to_str().unwrap(), etag);
    let stale = h
        .send_with(
            Method::GET,
            "/ui/app.js",
            None,
            None,
            &[("if-none-match", "\"stale\"")],
        )
        .await;
    assert_eq!(stale.status, StatusCode::OK);
}

#[tokio::test]
async fn the_ui_needs_no_token_but_keeps_the_host_check_and_stays_out_of_the_api_document() {
    // With principals the page and its files load without a token (they hold no data; the
    // API calls they make need one).
    let h = Harness::new(vec![common::principal(
        "admin",
        &["*"],
        None,
        "t",
        toolgate_core::Quota::default(),
    )])
    .await;
    assert_eq!(
        h.send(Method::GET, "/", None, None).await.status,
        StatusCode::OK
    );
    assert_eq!(
        h.send(Method::GET, "/ui/app.js", None, None).await.status,
        StatusCode::OK
    );
    assert_eq!(
        h.send(Method::GET, "/v1/tools", None, None).await.status,
        StatusCode::UNAUTHORIZED
    );
    for path in ["/", "/ui/app.js"] {
        let req = axum::http::Request::builder()
            .uri(path)
            .header("host", "evil.example.com")
            .body(axum::body::Body::empty())
            .unwrap();
        let resp = tower::ServiceExt::oneshot(h.router.clone(), req)
            .await
            .unwrap();
        assert_eq!(resp.status(), StatusCode::FORBIDDEN, "{path}");
        let req = axum::http::Request::builder()
            .uri(path)
            .header("host", "localhost:7878")
            .header("origin", "http://evil.example.com")
            .body(axum::body::Body::empty())
            .unwrap();
        let resp = tower::ServiceExt::oneshot(h.router.clone(), req)
            .await
            .unwrap();
        assert_eq!(resp.status(), StatusCode::FORBIDDEN, "{path}");
    }
    let paths = h.doc["paths"].as_object().unwrap();
    for (_, route) in toolgate_server::UI_ROUTES {
        assert!(!paths.contains_key(route), "{route} is in /openapi.json");
    }
}
