//! `web_scraper` against a local fake web server, through a real pipeline and toolgate-net's
//! policy client: title and readable text of HTML pages (scripts and styles dropped, blocks as
//! lines, whitespace collapsed), CSS selectors, plain text and JSON, refused content types,
//! HTTP errors, size and time limits, charsets and hostile nesting.
#![cfg(test)]

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{FakeServer, Reply, call, data, failure, pipeline};
use serde_json::{Value, json};
use toolgate_builtins::{WEB_SCRAPER, WEB_USER_AGENT, WebScraper};
use toolgate_core::{Category, Effect, ErrorKind, Tool, ToolResult, validate};
use toolgate_net::NetPolicy;

const ARTICLE: &str = r#"<!DOCTYPE html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <title>  The   Rust
     Blog &amp; News </title>
  <style>body { font-family: serif; } .ad { display: none }</style>
  <script>window.analytics = {track: function () {}};</script>
  <link rel="stylesheet" href="/site.css">
</head>
<body>
  <nav><a href="/">Home</a> <a href="/about">About</a></nav>
  <noscript>Please enable JavaScript to see comments.</noscript>
  <template><p>Template content never shown</p></template>
  <article id="post">
    <h1>Announcing   Rust 1.80</h1>
    <p class="meta">Posted by <b>The Release Team</b>   on July 25</p>
    <p>The Rust team is happy to announce a new version.
       It brings <code>LazyCell</code> and
       <code>LazyLock</code>.</p>
    <svg width="10" height="10"><title>icon</title><text>SVG TEXT</text></svg>
    <h2>What's in 1.80</h2>
    <ul>
      <li>Exclusive ranges in patterns</li>
      <li>Checked <code>cfg</code> names</li>
    </ul>
    <pre>rustup update stable
cargo build</pre>
    <table>
      <tr><th>Version</th><th>Date</th></tr>
      <tr><td>1.80</td><td>2024-07-25</td></tr>
    </table>
    <script type="application/ld+json">{"@type": "BlogPosting"}</script>
    <div class="ad" hidden>Buy now!</div>
  </article>
  <footer>© Rust Foundation</footer>
</body>
</html>"#;

async fn scrape_with(tool: WebScraper, args: Value) -> ToolResult {
    call(&pipeline(Arc::new(tool)), WEB_SCRAPER, args).await
}

async fn scrape(args: Value) -> ToolResult {
    scrape_with(WebScraper::new(), args).await
}

async fn article_server() -> FakeServer {
    FakeServer::always(Reply::html(ARTICLE)).await
}

#[tokio::test]
async fn title_and_readable_text_of_a_page() {
    let server = article_server().await;
    let result = scrape(json!({"url": server.url("/blog/1.80")})).await;
    let out = data(&result);
    assert_eq!(out["title"], "The Rust Blog & News");
    insta::assert_snapshot!("article_text", out["text"].as_str().unwrap());

    let request = server.only_request();
    assert_eq!(request.method, "GET");
    assert_eq!(request.raw_path, "/blog/1.80");
    assert_eq!(request.header("user-agent"), Some(WEB_USER_AGENT));
    assert!(request.header("accept").unwrap().starts_with("text/html"));
}

#[tokio::test]
async fn scripts_styles_and_invisible_elements_are_dropped() {
    let server = article_server().await;
    let result = scrape(json!({"url": server.url("/")})).await;
    let text = data(&result)["text"].as_str().unwrap().to_owned();
    for gone in [
        "analytics",
        "font-family",
        "enable JavaScript",
        "Template content",
        "SVG TEXT",
        "icon",
        "BlogPosting",
        "Buy now",
        "meta charset",
    ] {
        assert!(!text.contains(gone), "{gone:?} should be gone:\n{text}");
    }
    for kept in [
        "Announcing Rust 1.80",
        "Posted by The Release Team on July 25",
        "It brings LazyCell and LazyLock.",
        "- Exclusive ranges in patterns",
        "rustup update stable\ncargo build",
        "Version | Date\n1.80 | 2024-07-25",
        "© Rust Foundation",
    ] {
        assert!(text.contains(kept), "{kept:?} missing:\n{text}");
    }
    assert!(!text.contains("  "), "runs of spaces remain:\n{text}");
    assert!(
        !text.contains("\n\n\n"),
        "runs of blank lines remain:\n{text}"
    );
    assert_eq!(text.trim(), text);
}

#[tokio::test]
async fn a_selector_returns_the_text_of_every_match() {
    let server = article_server().await;
    let result = scrape(json!({"url": server.url("/"), "selector": "article p"})).await;
    assert_eq!(
        data(&result),
        &json!({
            "text": "Posted by The Release Team on July 25\n\nThe Rust team is happy to announce a new version. It brings LazyCell and LazyLock.",
            "title": "The Rust Blog & News"
        })
    );

    let result = scrape(json!({"url": server.url("/"), "selector": "h1, h2"})).await;
    assert_eq!(
        data(&result)["text"],
        "Announcing Rust 1.80\n\nWhat's in 1.80"
    );

    // Nested matches are not repeated: the outer match already holds the inner text.
    let result = scrape(json!({"url": server.url("/"), "selector": "article, p"})).await;
    let text = data(&result)["text"].as_str().unwrap();
    assert_eq!(text.matches("happy to announce").count(), 1, "{text}");

    // A selected script is returned as written (JSON-LD, for instance).
    let result =
        scrape(json!({"url": server.url("/"), "selector": "script[type=\"application/ld+json\"]"}))
            .await;
    assert_eq!(data(&result)["text"], "{\"@type\": \"BlogPosting\"}");
}

#[tokio::test]
async fn an_invalid_selector_is_a_validation_error_before_any_request() {
    let server = article_server().await;
    for selector in ["div[", "p >", "##x", ":not-a-pseudo"] {
        let result = scrape(json!({"url": server.url("/"), "selector": selector})).await;
        let (kind, message) = failure(&result);
        assert_eq!(kind, ErrorKind::Validation, "{selector}: {message}");
        assert!(
            message.starts_with(&format!("Invalid CSS selector {selector:?}: ")),
            "{message}"
        );
    }
    assert!(server.requests().is_empty());
}

#[tokio::test]
async fn a_selector_without_matches_is_an_execution_error() {
    let server = article_server().await;
    let result = scrape(json!({"url": server.url("/post"), "selector": "main .content"})).await;
    assert_eq!(
        server.mask(&failure(&result).1),
        "No element on http://fake/post matches the selector \"main .content\"; try a broader selector, or call again without selector to get the whole page's text"
    );
    assert_eq!(failure(&result).0, ErrorKind::Execution);
    assert_eq!(result.attempts, 1);
}

#[tokio::test]
async fn plain_text_and_json_are_returned_as_they_are() {
    let server = FakeServer::always(Reply::raw(
        200,
        "text/plain; charset=utf-8",
        "line one\n  line two  \n",
    ))
    .await;
    let result = scrape(json!({"url": server.url("/robots.txt")})).await;
    assert_eq!(
        data(&result),
        &json!({"text": "line one\n  line two", "title": ""})
    );

    let body = json!({"name": "toolgate", "tags": ["a", "b"]}).to_string();
    let server = FakeServer::always(Reply::raw(200, "application/json", body.clone())).await;
    let result = scrape(json!({"url": server.url("/api")})).await;
    assert_eq!(data(&result), &json!({"text": body, "title": ""}));

    let result = scrape(json!({"url": server.url("/api"), "selector": "p"})).await;
    let (kind, message) = failure(&result);
    assert_eq!(kind, ErrorKind::Validation);
    assert_eq!(
        server.mask(&message),
        "selector \"p\" needs an HTML page, but http://fake/api is application/json content; call again without selector"
    );
}

#[tokio::test]
async fn binary_content_types_are_refused_by_name() {
    for (content_type, body) in [
        ("image/png", b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR".to_vec()),
        ("application/pdf", b"%PDF-1.7\n%\xe2\xe3\xcf\xd3".to_vec()),
        ("application/octet-stream", vec![0, 1, 2, 3]),
    ] {
        let server = FakeServer::always(Reply::raw(200, content_type, body)).await;
        let result = scrape(json!({"url": server.url("/file")})).await;
        let (kind, message) = failure(&result);
        assert_eq!(kind, ErrorKind::Execution);
        assert_eq!(
            server.mask(&message),
            format!(
                "http://fake/file is {content_type} content, not a web page; web_scraper reads HTML, plain text and JSON only"
            )
        );
        assert_eq!(result.attempts, 1);
    }
}

#[tokio::test]
async fn a_response_without_content_type_is_sniffed() {
    let server = FakeServer::always(Reply::raw(
        200,
        "",
        "<!doctype html><title>T</title><p>Hi</p>",
    ))
    .await;
    let result = scrape(json!({"url": server.url("/")})).await;
    assert_eq!(data(&result), &json!({"text": "Hi", "title": "T"}));

    let server = FakeServer::always(Reply::raw(200, "", vec![0u8, 159, 146, 150])).await;
    let result = scrape(json!({"url": server.url("/")})).await;
    assert!(
        failure(&result).1.contains("of an unknown type"),
        "{:?}",
        result.error()
    );
}

#[tokio::test]
async fn latin1_pages_are_decoded_by_their_charset() {
    let server = FakeServer::always(Reply::raw(
        200,
        "text/html; charset=ISO-8859-1",
        b"<title>Caf\xe9</title><p>cr\xe8me br\xfbl\xe9e</p>".to_vec(),
    ))
    .await;
    let result = scrape(json!({"url": server.url("/")})).await;
    assert_eq!(
        data(&result),
        &json!({"text": "crème brûlée", "title": "Café"})
    );
}

#[tokio::test]
async fn a_page_without_title_has_an_empty_one() {
    let server = FakeServer::always(Reply::html("<p>No head here</p>")).await;
    let result = scrape(json!({"url": server.url("/")})).await;
    assert_eq!(data(&result), &json!({"text": "No head here", "title": ""}));
}

#[tokio::test]
async fn http_errors_map_to_kinds() {
    let cases = [
        (
            Reply::html("<h1>Not Found</h1>").header("x", "y"),
            404,
            ErrorKind::Execution,
            1,
            "http://fake/page answered HTTP 404 Not Found: there is no such page; check the address",
        ),
        (
            Reply::raw(403, "text/html", "denied"),
            403,
            ErrorKind::Execution,
            1,
            "http://fake/page answered HTTP 403 Forbidden: the site refuses access (it may need a login, or block automated clients); web_scraper cannot log in",
        ),
        (
            Reply::raw(429, "text/plain", "slow down").header("retry-after", "7"),
            429,
            ErrorKind::RateLimited,
            3,
            "http://fake/page answered HTTP 429 Too Many Requests: the site is rate limiting requests; retry after 7 seconds",
        ),
        (
            Reply::raw(502, "text/html", "bad gateway"),
            502,
            ErrorKind::Unavailable,
            3,
            "http://fake/page answered HTTP 502 Bad Gateway: the site has a problem; try again later",
        ),
    ];
    for (mut reply, status, kind, attempts, message) in cases {
        reply.status = status;
        let server = FakeServer::always(reply).await;
        let result = scrape(json!({"url": server.url("/page")})).await;
        let (got_kind, got) = failure(&result);
        assert_eq!((got_kind, server.mask(&got)), (kind, message.to_owned()));
        assert_eq!(result.attempts, attempts, "{message}");
    }
}

#[tokio::test]
async fn an_oversized_page_is_refused() {
    let big = format!("<p>{}</p>", "word ".repeat(10_000));
    let server = FakeServer::always(Reply::html(&big)).await;
    let tool = WebScraper::new().with_max_response_bytes(16 * 1024);
    let result = scrape_with(tool, json!({"url": server.url("/big")})).await;
    let (kind, message) = failure(&result);
    assert_eq!(kind, ErrorKind::Execution);
    assert_eq!(
        server.mask(&message),
        "The response from http://fake/big is larger than the 16 KiB limit; ask for a smaller resource"
    );
    assert_eq!(result.attempts, 1);
}

#[tokio::test]
async fn a_slow_page_times_out() {
    let server = FakeServer::always(Reply::html(ARTICLE).delayed(Duration::from_secs(5))).await;
    let tool = WebScraper::new().with_request_timeout(Duration::from_millis(200));
    let started = Instant::now();
    let result = scrape_with(tool, json!({"url": server.url("/slow")})).await;
    let (kind, message) = failure(&result);
    assert_eq!(kind, ErrorKind::Timeout);
    assert_eq!(
        server.mask(&message),
        "http://fake/slow did not answer within 200 ms"
    );
    assert!(started.elapsed() < Duration::from_secs(4));
}

#[tokio::test]
async fn a_hostile_deeply_nested_page_stops_at_the_time_limit() {
    // html5ever needs time quadratic in the nesting depth: this page would take minutes.
    let hostile = "<div>".repeat(300_000);
    let server = FakeServer::always(Reply::html(&hostile)).await;
    let tool = WebScraper::new().with_request_timeout(Duration::from_secs(1));
    let started = Instant::now();
    let result = scrape_with(tool, json!({"url": server.url("/deep")})).await;
    let (kind, message) = failure(&result);
    assert_eq!(kind, ErrorKind::Execution);
    assert_eq!(
        server.mask(&message),
        "Reading http://fake/deep took longer than the time limit: its HTML is too large or too deeply nested to parse"
    );
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn only_http_and_https_addresses_are_accepted() {
    for url in [
        "ftp://example.org/file",
        "file:///etc/passwd",
        "not a url",
        "/relative/path",
        "javascript:alert(1)",
        "",
    ] {
        let result = scrape(json!({"url": url})).await;
        let (kind, message) = failure(&result);
        assert_eq!(kind, ErrorKind::Validation, "{url}: {message}");
    }
    let result = scrape(json!({"url": "ftp://example.org/file"})).await;
    assert_eq!(
        failure(&result).1,
        "url must be an absolute http:// or https:// address, got \"ftp://example.org/file\""
    );
}

#[tokio::test]
async fn the_network_policy_refusal_passes_through() {
    let server = article_server().await;
    let pipeline = common::pipeline_with(Arc::new(WebScraper::new()), NetPolicy::default());
    let result = call(&pipeline, WEB_SCRAPER, json!({"url": server.url("/")})).await;
    let (kind, message) = failure(&result);
    assert_eq!(kind, ErrorKind::Authorization, "{message}");
    assert!(message.contains("127.0.0.1"), "{message}");
    assert!(server.requests().is_empty());
}

#[test]
fn the_definition_declares_governance_and_validates_cleanly() {
    let def = WebScraper::new().definition();
    let spec = validate(&def).unwrap();
    assert!(spec.warnings().is_empty(), "{:?}", spec.warnings());
    assert_eq!(def.name, WEB_SCRAPER);
    assert_eq!(def.category, Some(Category::Network));
    assert_eq!(def.effect, Some(Effect::Read));
    assert_eq!(def.idempotent, Some(true));
    assert_eq!(def.required_permissions, ["tool.network.fetch"]);
    assert!(def.output_schema.is_some());
    assert!(def.description.len() >= 300);
}
