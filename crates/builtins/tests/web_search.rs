//! `web_search` against local fake servers speaking each engine's documented API (SerpAPI,
//! Google Custom Search, Bing Web Search v7, Brave Search, SearXNG), through a real pipeline and
//! toolgate-net's policy client: parsed results, the exact request sent (path, query, key
//! placement, headers), each engine's error formats (401/403, 429, 5xx), malformed JSON,
//! timeouts, oversized bodies, missing settings — and the API key never appearing in a message.
#![cfg(test)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{FakeServer, Reply, call, call_cancelled_after, data, failure, pipeline};
use serde_json::{Value, json};
use toolgate_builtins::{
    MAX_SEARCH_RESULTS, SearchConfig, SearchEngine, WEB_SEARCH, WEB_USER_AGENT, WebSearch,
};
use toolgate_core::{
    CANCELLED_MESSAGE, Category, Consequence, Effect, ErrorKind, Tool, ToolResult, validate,
};
use toolgate_net::NetPolicy;

const KEY: &str = "sk-live-5ecret/Key+42";
const CX: &str = "017576662512468239146:omuauf_lfve";

fn config(engine: &str, server: &FakeServer) -> SearchConfig {
    SearchConfig {
        engine: Some(engine.to_owned()),
        api_key: Some(KEY.to_owned()),
        cx: Some(CX.to_owned()),
        base_url: Some(server.base.clone()),
    }
}

async fn search_with(tool: WebSearch, args: Value) -> ToolResult {
    call(&pipeline(Arc::new(tool)), WEB_SEARCH, args).await
}

async fn search(engine: &str, server: &FakeServer, args: Value) -> ToolResult {
    search_with(WebSearch::new(config(engine, server)), args).await
}

/// Fails when the key shows up in the result's message or data.
fn assert_no_key(result: &ToolResult) {
    let shown = serde_json::to_string(result).unwrap();
    assert!(!shown.contains(KEY), "the API key leaked: {shown}");
    assert!(
        !shown.contains("5ecret"),
        "part of the API key leaked: {shown}"
    );
}

// ---- documented success responses ---------------------------------------------------------

fn serpapi_results() -> Value {
    json!({
        "search_metadata": {"id": "64f0c0e1", "status": "Success", "json_endpoint": "https://serpapi.com/searches/64f0c0e1.json", "total_time_taken": 1.2},
        "search_parameters": {"engine": "google", "q": "rust async", "google_domain": "google.com", "num": "3", "device": "desktop"},
        "search_information": {"total_results": 1_830_000, "time_taken_displayed": 0.31, "organic_results_state": "Results for exact spelling"},
        "organic_results": [
            {"position": 1, "title": "Asynchronous Programming in Rust", "link": "https://rust-lang.github.io/async-book/", "displayed_link": "https://rust-lang.github.io › async-book", "snippet": "This book aims to be a comprehensive, up-to-date guide to using Rust's async language features and libraries.", "snippet_highlighted_words": ["Rust's async"], "source": "GitHub"},
            {"position": 2, "title": "Tokio - An asynchronous Rust runtime", "link": "https://tokio.rs/", "displayed_link": "https://tokio.rs", "snippet": "Tokio is an event-driven, non-blocking I/O platform for writing asynchronous applications with Rust."},
            {"position": 3, "title": "async - Rust", "link": "https://doc.rust-lang.org/std/keyword.async.html", "displayed_link": "https://doc.rust-lang.org › std › keyword.async"}
        ],
        "related_searches": [{"query": "rust async trait", "link": "https://www.google.com/search?q=rust+async+trait"}]
    })
}

fn google_results() -> Value {
    json!({
        "kind": "customsearch#search",
        "url": {"type": "application/json", "template": "https://www.googleapis.com/customsearch/v1?q={searchTerms}&num={count?}&key={key}&cx={cx}"},
        "queries": {"request": [{"title": "Google Custom Search - rust async", "totalResults": "1830000", "searchTerms": "rust async", "count": 2, "startIndex": 1, "inputEncoding": "utf8", "outputEncoding": "utf8", "safe": "off", "cx": CX}]},
        "context": {"title": "Whole web"},
        "searchInformation": {"searchTime": 0.31, "formattedSearchTime": "0.31", "totalResults": "1830000", "formattedTotalResults": "1,830,000"},
        "items": [
            {"kind": "customsearch#result", "title": "Asynchronous Programming in Rust", "htmlTitle": "Asynchronous Programming in <b>Rust</b>", "link": "https://rust-lang.github.io/async-book/", "displayLink": "rust-lang.github.io", "snippet": "This book aims to be a comprehensive, up-to-date guide to\nusing Rust's async language features.", "htmlSnippet": "This book aims to be a comprehensive, up-to-date guide to<br>\nusing <b>Rust&#39;s async</b> language features.", "formattedUrl": "https://rust-lang.github.io/async-book/"},
            {"kind": "customsearch#result", "title": "Tokio - An asynchronous Rust runtime", "link": "https://tokio.rs/", "displayLink": "tokio.rs", "snippet": "Tokio is an event-driven, non-blocking I/O platform.", "formattedUrl": "https://tokio.rs/"}
        ]
    })
}

fn bing_results() -> Value {
    json!({
        "_type": "SearchResponse",
        "queryContext": {"originalQuery": "rust async"},
        "webPages": {
            "webSearchUrl": "https://www.bing.com/search?q=rust+async",
            "totalEstimatedMatches": 1_830_000,
            "value": [
                {"id": "https://api.bing.microsoft.com/api/v7/#WebPages.0", "name": "Asynchronous Programming in Rust", "url": "https://rust-lang.github.io/async-book/", "isFamilyFriendly": true, "displayUrl": "https://rust-lang.github.io/async-book", "snippet": "This book aims to be a comprehensive, up-to-date guide to using Rust's async language features.", "dateLastCrawled": "2024-05-01T10:00:00.0000000Z", "language": "en", "isNavigational": false},
                {"id": "https://api.bing.microsoft.com/api/v7/#WebPages.1", "name": "Tokio - An asynchronous Rust runtime", "url": "https://tokio.rs/", "isFamilyFriendly": true, "displayUrl": "https://tokio.rs", "snippet": "Tokio is an event-driven, non-blocking I/O platform.", "language": "en", "isNavigational": false}
            ]
        },
        "rankingResponse": {"mainline": {"items": [{"answerType": "WebPages", "resultIndex": 0, "value": {"id": "https://api.bing.microsoft.com/api/v7/#WebPages.0"}}]}}
    })
}

fn brave_results() -> Value {
    json!({
        "type": "search",
        "query": {"original": "rust async", "show_strict_warning": false, "is_navigational": false, "more_results_available": true},
        "mixed": {"type": "mixed", "main": [{"type": "web", "index": 0, "all": false}]},
        "web": {
            "type": "search",
            "results": [
                {"title": "Asynchronous Programming in <strong>Rust</strong>", "url": "https://rust-lang.github.io/async-book/", "is_source_local": false, "is_source_both": false, "description": "This book aims to be a comprehensive, up-to-date guide to using <strong>Rust</strong>&#x27;s <strong>async</strong> language features &amp; libraries.", "page_age": "2024-04-02T00:00:00", "profile": {"name": "GitHub", "url": "https://rust-lang.github.io/async-book/", "long_name": "rust-lang.github.io", "img": "https://imgs.search.brave.com/x.png"}, "language": "en", "family_friendly": true, "type": "search_result", "subtype": "generic", "meta_url": {"scheme": "https", "netloc": "rust-lang.github.io", "hostname": "rust-lang.github.io", "path": "› async-book"}},
                {"title": "Tokio - An asynchronous Rust runtime", "url": "https://tokio.rs/", "description": "Tokio is an event-driven, non-blocking I/O platform.", "type": "search_result"}
            ],
            "family_friendly": true
        }
    })
}

fn searxng_results() -> Value {
    json!({
        "query": "rust async",
        "number_of_results": 0,
        "results": [
            {"url": "https://rust-lang.github.io/async-book/", "title": "Asynchronous Programming in Rust", "content": "This book aims to be a comprehensive guide to using <b>Rust</b>'s async language features.", "engine": "duckduckgo", "parsed_url": ["https", "rust-lang.github.io", "/async-book/", "", "", ""], "template": "default.html", "engines": ["duckduckgo", "brave"], "positions": [1, 1], "score": 4.0, "category": "general"},
            {"url": "https://tokio.rs/", "title": "Tokio - An asynchronous Rust runtime", "content": "Tokio is an event-driven, non-blocking I/O platform.", "engine": "brave", "engines": ["brave"], "positions": [2], "score": 1.0, "category": "general"}
        ],
        "answers": [], "corrections": [], "infoboxes": [], "suggestions": ["rust async await"], "unresponsive_engines": []
    })
}

/// The results every fake returns first, as the tool reports them.
fn expected_two() -> Value {
    json!({"results": [
        {"title": "Asynchronous Programming in Rust", "snippet": "", "url": "https://rust-lang.github.io/async-book/"},
        {"title": "Tokio - An asynchronous Rust runtime", "snippet": "Tokio is an event-driven, non-blocking I/O platform.", "url": "https://tokio.rs/"}
    ]})
}

/// `expected_two` with the first snippet filled in.
fn with_first_snippet(snippet: &str) -> Value {
    let mut v = expected_two();
    v["results"][0]["snippet"] = json!(snippet);
    v
}

// ---- success: parsed results and the request sent -----------------------------------------

#[tokio::test]
async fn serpapi_parses_organic_results_and_sends_the_key_as_a_query_parameter() {
    let server = FakeServer::always(Reply::json(200, &serpapi_results())).await;
    let result = search(
        "serpapi",
        &server,
        json!({"query": "rust async", "num_results": 3}),
    )
    .await;
    insta::assert_json_snapshot!("serpapi_results", data(&result));
    assert_eq!(result.attempts, 1);

    let request = server.only_request();
    assert_eq!(request.method, "GET");
    assert_eq!(request.raw_path, "/search.json");
    assert_eq!(request.param_names(), ["engine", "q", "num", "api_key"]);
    assert_eq!(request.param("engine"), Some("google"));
    assert_eq!(request.param("q"), Some("rust async"));
    assert_eq!(request.param("num"), Some("3"));
    assert_eq!(request.param("api_key"), Some(KEY));
    assert_eq!(request.header("accept"), Some("application/json"));
    assert_eq!(request.header("user-agent"), Some(WEB_USER_AGENT));
    assert!(WEB_USER_AGENT.starts_with("toolgate/"), "{WEB_USER_AGENT}");
    assert_eq!(request.header("x-subscription-token"), None);
    assert_eq!(request.header("ocp-apim-subscription-key"), None);
}

#[tokio::test]
async fn results_are_cut_to_num_results() {
    let server = FakeServer::always(Reply::json(200, &serpapi_results())).await;
    let result = search(
        "serpapi",
        &server,
        json!({"query": "rust async", "num_results": 1}),
    )
    .await;
    let results = data(&result)["results"].as_array().unwrap().clone();
    assert_eq!(results.len(), 1);
    assert_eq!(results[0]["url"], "https://rust-lang.github.io/async-book/");
    assert_eq!(server.only_request().param("num"), Some("1"));
}

#[tokio::test]
async fn num_results_defaults_to_five() {
    let server = FakeServer::always(Reply::json(200, &bing_results())).await;
    let result = search("bing", &server, json!({"query": "rust"})).await;
    assert_eq!(result.input, json!({"query": "rust", "num_results": 5}));
    assert_eq!(server.only_request().param("count"), Some("5"));
}

#[tokio::test]
async fn google_parses_items_and_sends_key_and_cx_as_query_parameters() {
    let server = FakeServer::always(Reply::json(200, &google_results())).await;
    let result = search(
        "google",
        &server,
        json!({"query": "rust async", "num_results": 15}),
    )
    .await;
    assert_eq!(
        data(&result),
        &with_first_snippet(
            "This book aims to be a comprehensive, up-to-date guide to using Rust's async language features."
        )
    );
    let request = server.only_request();
    assert_eq!(request.raw_path, "/customsearch/v1");
    assert_eq!(request.param_names(), ["key", "cx", "q", "num"]);
    assert_eq!(request.param("key"), Some(KEY));
    assert_eq!(request.param("cx"), Some(CX));
    assert_eq!(request.param("q"), Some("rust async"));
    // The Custom Search API returns at most 10 results per request.
    assert_eq!(request.param("num"), Some("10"));
    assert_eq!(request.header("user-agent"), Some(WEB_USER_AGENT));
}

#[tokio::test]
async fn bing_parses_web_pages_and_sends_the_key_in_its_header_only() {
    let server = FakeServer::always(Reply::json(200, &bing_results())).await;
    let result = search(
        "bing",
        &server,
        json!({"query": "rust async", "num_results": 20}),
    )
    .await;
    assert_eq!(
        data(&result),
        &with_first_snippet(
            "This book aims to be a comprehensive, up-to-date guide to using Rust's async language features."
        )
    );
    let request = server.only_request();
    assert_eq!(request.raw_path, "/v7.0/search");
    assert_eq!(request.param_names(), ["q", "count", "responseFilter"]);
    assert_eq!(request.param("count"), Some("20"));
    assert_eq!(request.param("responseFilter"), Some("Webpages"));
    assert_eq!(request.header("ocp-apim-subscription-key"), Some(KEY));
    assert!(
        !request.raw_query.contains("5ecret"),
        "{}",
        request.raw_query
    );
}

#[tokio::test]
async fn brave_parses_web_results_strips_highlights_and_sends_the_token_header() {
    let server = FakeServer::always(Reply::json(200, &brave_results())).await;
    let result = search(
        "brave",
        &server,
        json!({"query": "rust async", "num_results": 2}),
    )
    .await;
    assert_eq!(
        data(&result),
        &with_first_snippet(
            "This book aims to be a comprehensive, up-to-date guide to using Rust's async language features & libraries."
        )
    );
    let request = server.only_request();
    assert_eq!(request.raw_path, "/res/v1/web/search");
    assert_eq!(request.param_names(), ["q", "count"]);
    assert_eq!(request.param("count"), Some("2"));
    assert_eq!(request.header("x-subscription-token"), Some(KEY));
    assert_eq!(request.header("accept"), Some("application/json"));
    assert!(!request.raw_query.contains("5ecret"));
}

#[tokio::test]
async fn searxng_parses_results_under_a_path_prefix_and_sends_no_key() {
    let server = FakeServer::always(Reply::json(200, &searxng_results())).await;
    let config = SearchConfig {
        engine: Some("searxng".into()),
        api_key: Some(KEY.into()),
        cx: None,
        base_url: Some(format!("{}/searx/", server.base)),
    };
    let result = search_with(WebSearch::new(config), json!({"query": "rust async"})).await;
    assert_eq!(
        data(&result),
        &with_first_snippet(
            "This book aims to be a comprehensive guide to using Rust's async language features."
        )
    );
    let request = server.only_request();
    assert_eq!(request.raw_path, "/searx/search");
    assert_eq!(request.param_names(), ["q", "format"]);
    assert_eq!(request.param("format"), Some("json"));
    assert!(!request.everything().contains("5ecret"), "{request:?}");
}

#[tokio::test]
async fn queries_are_url_encoded() {
    let server = FakeServer::always(Reply::json(200, &serpapi_results())).await;
    let query = "C++ & Rust: \"a=b\" #1 100% café/?";
    search("serpapi", &server, json!({"query": query})).await;
    let request = server.only_request();
    assert_eq!(request.param("q"), Some(query));
    assert_eq!(request.params.len(), 4, "{:?}", request.params);
    for raw in ["&", "\"", "#", "%\" ", " ", "é"] {
        let q = request.raw_query.split("&num=").next().unwrap();
        assert!(
            !q.trim_start_matches("engine=google&q=").contains(raw),
            "{raw:?} unencoded in {q}"
        );
    }
}

#[tokio::test]
async fn engines_without_results_return_an_empty_list() {
    let cases = [
        (
            "serpapi",
            json!({"search_metadata": {"status": "Success"}, "search_information": {"organic_results_state": "Fully empty"}, "error": "Google hasn't returned any results for this query."}),
        ),
        (
            "google",
            json!({"kind": "customsearch#search", "searchInformation": {"totalResults": "0"}}),
        ),
        (
            "bing",
            json!({"_type": "SearchResponse", "queryContext": {"originalQuery": "zzqx"}, "rankingResponse": {}}),
        ),
        (
            "brave",
            json!({"type": "search", "query": {"original": "zzqx"}, "mixed": {}}),
        ),
        (
            "searxng",
            json!({"query": "zzqx", "number_of_results": 0, "results": [], "answers": []}),
        ),
    ];
    for (engine, body) in cases {
        let server = FakeServer::always(Reply::json(200, &body)).await;
        let result = search(engine, &server, json!({"query": "zzqx"})).await;
        assert_eq!(data(&result), &json!({"results": []}), "{engine}");
    }
}

// ---- errors -----------------------------------------------------------------------------

struct ErrorCase {
    engine: &'static str,
    reply: Reply,
    kind: ErrorKind,
}

fn case(engine: &'static str, status: u16, body: Value, kind: ErrorKind) -> ErrorCase {
    ErrorCase {
        engine,
        reply: Reply::json(status, &body),
        kind,
    }
}

fn error_cases() -> Vec<ErrorCase> {
    use ErrorKind::{Authorization, Execution, RateLimited, Unavailable};
    vec![
        // SerpAPI: {"error": "..."}.
        case(
            "serpapi",
            401,
            json!({"error": "Invalid API key. Your API key should be here: https://serpapi.com/manage-api-key"}),
            Authorization,
        ),
        case(
            "serpapi",
            403,
            json!({"error": "This account does not allow access to this API."}),
            Authorization,
        ),
        ErrorCase {
            engine: "serpapi",
            reply: Reply::json(
                429,
                &json!({"error": "Your account has run out of searches."}),
            )
            .header("retry-after", "30"),
            kind: RateLimited,
        },
        case(
            "serpapi",
            500,
            json!({"error": "We are experiencing issues; please try again."}),
            Unavailable,
        ),
        case(
            "serpapi",
            400,
            json!({"error": "Missing query `q` parameter."}),
            Execution,
        ),
        case(
            "serpapi",
            200,
            json!({"error": "Unsupported `xx` location - location parameter."}),
            Execution,
        ),
        // Google: {"error": {"code", "message", "errors", "status"}}; a bad key is a 400.
        case(
            "google",
            400,
            json!({"error": {"code": 400, "message": "API key not valid. Please pass a valid API key.", "errors": [{"message": "API key not valid. Please pass a valid API key.", "domain": "global", "reason": "badRequest"}], "status": "INVALID_ARGUMENT"}}),
            Authorization,
        ),
        case(
            "google",
            403,
            json!({"error": {"code": 403, "message": "Custom Search JSON API has not been used in project 123 before or it is disabled.", "errors": [{"message": "Custom Search JSON API has not been used in project 123 before or it is disabled.", "domain": "usageLimits", "reason": "accessNotConfigured"}], "status": "PERMISSION_DENIED"}}),
            Authorization,
        ),
        case(
            "google",
            429,
            json!({"error": {"code": 429, "message": "Quota exceeded for quota metric 'Queries' and limit 'Queries per day' of service 'customsearch.googleapis.com'.", "errors": [{"message": "Quota exceeded.", "domain": "global", "reason": "rateLimitExceeded"}], "status": "RESOURCE_EXHAUSTED"}}),
            RateLimited,
        ),
        case(
            "google",
            503,
            json!({"error": {"code": 503, "message": "The service is currently unavailable.", "errors": [{"message": "Backend Error", "domain": "global", "reason": "backendError"}], "status": "UNAVAILABLE"}}),
            Unavailable,
        ),
        // Bing: {"_type": "ErrorResponse", "errors": [{"code", "subCode", "message", "moreDetails"}]}.
        case(
            "bing",
            401,
            json!({"_type": "ErrorResponse", "errors": [{"code": "InvalidAuthorization", "subCode": "AuthorizationMissing", "message": "Authorization is required.", "moreDetails": "Subscription key is not recognized."}]}),
            Authorization,
        ),
        case(
            "bing",
            403,
            json!({"_type": "ErrorResponse", "errors": [{"code": "InsufficientAuthorization", "subCode": "AuthorizationDisabled", "message": "Authorization is disabled for this subscription."}]}),
            Authorization,
        ),
        case(
            "bing",
            429,
            json!({"_type": "ErrorResponse", "errors": [{"code": "RateLimitExceeded", "message": "Rate limit is exceeded. Try again in 1 seconds."}]}),
            RateLimited,
        ),
        case(
            "bing",
            500,
            json!({"_type": "ErrorResponse", "errors": [{"code": "ServerError", "subCode": "UnexpectedError", "message": "An unexpected error has occurred."}]}),
            Unavailable,
        ),
        case(
            "bing",
            400,
            json!({"_type": "ErrorResponse", "errors": [{"code": "InvalidRequest", "subCode": "ParameterInvalidValue", "message": "Parameter has invalid value.", "parameter": "count", "value": "0"}]}),
            Execution,
        ),
        // Brave: {"type": "ErrorResponse", "error": {"id", "status", "code", "detail"}}.
        case(
            "brave",
            422,
            json!({"type": "ErrorResponse", "error": {"id": "7b8c", "status": 422, "code": "SUBSCRIPTION_TOKEN_INVALID", "detail": "The provided subscription token is invalid.", "meta": {"component": "authentication"}}, "time": 1_714_000_000}),
            Authorization,
        ),
        case(
            "brave",
            401,
            json!({"type": "ErrorResponse", "error": {"id": "7b8d", "status": 401, "code": "SUBSCRIPTION_TOKEN_INVALID", "detail": "The provided subscription token is invalid."}, "time": 1_714_000_000}),
            Authorization,
        ),
        case(
            "brave",
            429,
            json!({"type": "ErrorResponse", "error": {"id": "7b8e", "status": 429, "code": "RATE_LIMITED", "detail": "Request rate limit exceeded for plan.", "meta": {"plan": "Free", "rate_limit": 1, "rate_current": 2, "quota_limit": 2000, "quota_current": 14, "component": "rate_limiter"}}, "time": 1_714_000_000}),
            RateLimited,
        ),
        case(
            "brave",
            502,
            json!({"type": "ErrorResponse", "error": {"id": "7b8f", "status": 502, "code": "BAD_GATEWAY", "detail": "Upstream unavailable."}, "time": 1_714_000_000}),
            Unavailable,
        ),
        // SearXNG: plain HTML pages (format not enabled, limiter, crash).
        ErrorCase {
            engine: "searxng",
            reply: Reply::raw(
                403,
                "text/html",
                "<!DOCTYPE html><html><head><title>403 Forbidden</title></head><body><h1>Forbidden</h1><p>You don't have the permission to access the requested resource.</p></body></html>",
            ),
            kind: Authorization,
        },
        ErrorCase {
            engine: "searxng",
            reply: Reply::raw(429, "text/plain", "Too Many Requests"),
            kind: RateLimited,
        },
        ErrorCase {
            engine: "searxng",
            reply: Reply::raw(
                500,
                "text/html",
                "<html><body><h1>Internal Server Error</h1></body></html>",
            ),
            kind: Unavailable,
        },
    ]
}

#[tokio::test]
async fn each_engines_error_format_maps_to_a_kind_and_quotes_the_engine() {
    let mut report = String::new();
    for c in error_cases() {
        let status = c.reply.status;
        let server = FakeServer::always(c.reply).await;
        let result = search(c.engine, &server, json!({"query": "rust"})).await;
        assert_no_key(&result);
        let (kind, message) = failure(&result);
        assert_eq!(kind, c.kind, "{} {status}: {message}", c.engine);
        // Rate limits and server errors are transient: the pipeline retries them (3 attempts).
        let retried = matches!(kind, ErrorKind::RateLimited | ErrorKind::Unavailable);
        let attempts = if retried { 3 } else { 1 };
        assert_eq!(
            result.attempts, attempts,
            "{} {status}: {message}",
            c.engine
        );
        assert_eq!(server.requests().len(), attempts as usize);
        report.push_str(&format!(
            "{} {status} → {}: {}\n",
            c.engine,
            kind.as_str(),
            server.mask(&message)
        ));
    }
    insta::assert_snapshot!("engine_errors", report);
}

#[tokio::test]
async fn malformed_json_is_an_execution_error_naming_the_engine() {
    let mut report = String::new();
    for engine in ["serpapi", "google", "bing", "brave", "searxng"] {
        let server = FakeServer::always(Reply::raw(
            200,
            "application/json",
            "{\"organic_results\": [{\"title\": \"cut off",
        ))
        .await;
        let result = search(engine, &server, json!({"query": "rust"})).await;
        let (kind, message) = failure(&result);
        assert_eq!(kind, ErrorKind::Execution, "{engine}: {message}");
        assert_eq!(result.attempts, 1);
        assert_no_key(&result);
        report.push_str(&format!("{engine}: {}\n", server.mask(&message)));
    }
    insta::assert_snapshot!("malformed_json", report);
}

#[tokio::test]
async fn an_html_page_instead_of_json_is_an_execution_error() {
    let server = FakeServer::always(Reply::html("<html><body>Captive portal</body></html>")).await;
    let result = search("bing", &server, json!({"query": "rust"})).await;
    let (kind, message) = failure(&result);
    assert_eq!(kind, ErrorKind::Execution);
    assert!(
        message.starts_with("Bing returned a response that is not valid JSON ("),
        "{message}"
    );
    assert!(message.contains("TOOLGATE_SEARCH_BASE_URL"), "{message}");
}

#[tokio::test]
async fn a_slow_engine_times_out_without_showing_the_key() {
    for engine in ["serpapi", "google", "bing"] {
        let server = FakeServer::always(
            Reply::json(200, &serpapi_results()).delayed(Duration::from_secs(5)),
        )
        .await;
        let tool = WebSearch::new(config(engine, &server))
            .with_request_timeout(Duration::from_millis(200));
        let started = std::time::Instant::now();
        let result = search_with(tool, json!({"query": "rust"})).await;
        let (kind, message) = failure(&result);
        assert_eq!(kind, ErrorKind::Timeout, "{message}");
        assert_no_key(&result);
        let label = engine.parse::<SearchEngine>().unwrap().label();
        assert!(
            message.starts_with(&format!("Searching with {label} failed: ")),
            "{message}"
        );
        assert!(
            message.contains("did not answer within 200 ms"),
            "{message}"
        );
        // Retried like any transient failure, each attempt cut at 200 ms.
        assert!(
            started.elapsed() < Duration::from_secs(4),
            "{:?}",
            started.elapsed()
        );
    }
}

#[tokio::test]
async fn an_oversized_response_is_refused() {
    let mut big = serpapi_results();
    big["padding"] = json!("x".repeat(64 * 1024));
    let server = FakeServer::always(Reply::json(200, &big)).await;
    let tool = WebSearch::new(config("google", &server)).with_max_response_bytes(16 * 1024);
    let result = search_with(tool, json!({"query": "rust"})).await;
    let (kind, message) = failure(&result);
    assert_eq!(kind, ErrorKind::Execution);
    assert_eq!(result.attempts, 1);
    assert_no_key(&result);
    assert_eq!(
        server.mask(&message),
        "Searching with Google Custom Search failed: The response from http://fake/customsearch/v1 is larger than the 16 KiB limit; ask for a smaller resource"
    );
}

#[tokio::test]
async fn cancellation_stops_a_search() {
    let server =
        FakeServer::always(Reply::json(200, &bing_results()).delayed(Duration::from_secs(5))).await;
    let pipeline = pipeline(Arc::new(WebSearch::new(config("bing", &server))));
    let result = call_cancelled_after(
        &pipeline,
        WEB_SEARCH,
        json!({"query": "rust"}),
        Duration::from_millis(100),
    )
    .await;
    assert_eq!(
        failure(&result),
        (ErrorKind::Cancelled, CANCELLED_MESSAGE.to_owned())
    );
}

#[tokio::test]
async fn the_network_policy_refusal_passes_through() {
    let server = FakeServer::always(Reply::json(200, &bing_results())).await;
    let pipeline = common::pipeline_with(
        Arc::new(WebSearch::new(config("bing", &server))),
        NetPolicy::default(),
    );
    let result = call(&pipeline, WEB_SEARCH, json!({"query": "rust"})).await;
    let (kind, message) = failure(&result);
    assert_eq!(kind, ErrorKind::Authorization, "{message}");
    assert!(
        message.starts_with("Searching with Bing failed: "),
        "{message}"
    );
    assert!(message.contains("127.0.0.1"), "{message}");
    assert!(server.requests().is_empty());
}

// ---- configuration ------------------------------------------------------------------------

#[tokio::test]
async fn missing_settings_are_unavailable_errors_naming_the_setting() {
    let server = FakeServer::always(Reply::json(200, &bing_results())).await;
    let cases = [
        (
            SearchConfig::default(),
            "web_search has no engine configured; set TOOLGATE_SEARCH_ENGINE (serpapi, google, bing, brave or searxng) or [search] engine in the config file",
        ),
        (
            SearchConfig {
                engine: Some("altavista".into()),
                ..SearchConfig::default()
            },
            "web_search engine \"altavista\" is not known; set TOOLGATE_SEARCH_ENGINE (serpapi, google, bing, brave or searxng) or [search] engine in the config file",
        ),
        (
            SearchConfig {
                engine: Some("serpapi".into()),
                ..SearchConfig::default()
            },
            "web_search with SerpAPI needs an API key; set TOOLGATE_SEARCH_API_KEY or [search] api_key in the config file",
        ),
        (
            SearchConfig {
                engine: Some("brave".into()),
                api_key: Some("  ".into()),
                ..SearchConfig::default()
            },
            "web_search with Brave Search needs an API key; set TOOLGATE_SEARCH_API_KEY or [search] api_key in the config file",
        ),
        (
            SearchConfig {
                engine: Some("google".into()),
                api_key: Some(KEY.into()),
                ..SearchConfig::default()
            },
            "web_search with Google Custom Search needs the id of a Programmable Search Engine (cx); set TOOLGATE_SEARCH_CX or [search] cx in the config file",
        ),
        (
            SearchConfig {
                engine: Some("searxng".into()),
                ..SearchConfig::default()
            },
            "web_search with SearXNG needs the address of a SearXNG instance (for example https://searx.example.org); set TOOLGATE_SEARCH_BASE_URL or [search] base_url in the config file",
        ),
        (
            SearchConfig {
                engine: Some("bing".into()),
                api_key: Some(KEY.into()),
                base_url: Some("api.bing.microsoft.com".into()),
                ..SearchConfig::default()
            },
            "web_search base URL \"api.bing.microsoft.com\" is not an http:// or https:// address; fix TOOLGATE_SEARCH_BASE_URL or [search] base_url in the config file",
        ),
    ];
    for (config, want) in cases {
        let result = search_with(WebSearch::new(config), json!({"query": "rust"})).await;
        assert_eq!(failure(&result), (ErrorKind::Unavailable, want.to_owned()));
        assert_eq!(result.attempts, 1, "a missing setting is not retried");
        assert_no_key(&result);
    }
    assert!(server.requests().is_empty());
}

#[tokio::test]
async fn environment_variables_choose_the_engine_and_key() {
    let server = FakeServer::always(Reply::json(200, &brave_results())).await;
    let file = SearchConfig {
        engine: Some("google".into()),
        api_key: Some("file-key".into()),
        ..SearchConfig::default()
    };
    let base = server.base.clone();
    let config = file.with_vars(move |name| match name {
        "TOOLGATE_SEARCH_ENGINE" => Some("brave".into()),
        "TOOLGATE_SEARCH_API_KEY" => Some(KEY.into()),
        "TOOLGATE_SEARCH_BASE_URL" => Some(base.clone()),
        "TOOLGATE_SEARCH_CX" => Some(String::new()),
        _ => None,
    });
    let result = search_with(WebSearch::new(config), json!({"query": "rust"})).await;
    assert!(result.is_ok(), "{:?}", result.error());
    let request = server.only_request();
    assert_eq!(request.raw_path, "/res/v1/web/search");
    assert_eq!(request.header("x-subscription-token"), Some(KEY));
}

#[test]
fn debug_output_never_shows_the_key() {
    let config = SearchConfig {
        engine: Some("serpapi".into()),
        api_key: Some(KEY.into()),
        cx: Some(CX.into()),
        base_url: None,
    };
    let tool = WebSearch::new(config.clone());
    for shown in [
        format!("{config:?}"),
        format!("{tool:?}"),
        format!("{config:#?}"),
    ] {
        assert!(!shown.contains("5ecret"), "{shown}");
        assert!(shown.contains("[REDACTED]"), "{shown}");
    }
}

#[tokio::test]
async fn invalid_arguments_are_refused_before_any_request() {
    let server = FakeServer::always(Reply::json(200, &bing_results())).await;
    for args in [
        json!({}),
        json!({"query": ""}),
        json!({"query": "   "}),
        json!({"query": "rust", "num_results": 0}),
        json!({"query": "rust", "num_results": MAX_SEARCH_RESULTS + 1}),
        json!({"query": "rust", "num_results": 2.5}),
        json!({"query": "rust", "engine": "google"}),
    ] {
        let result = search("bing", &server, args.clone()).await;
        assert_eq!(failure(&result).0, ErrorKind::Validation, "{args}");
    }
    assert!(server.requests().is_empty());
}

// ---- definition -----------------------------------------------------------------------------

#[test]
fn the_definition_declares_governance_and_validates_cleanly() {
    let def = WebSearch::new(SearchConfig::default()).definition();
    let spec = validate(&def).unwrap();
    assert!(spec.warnings().is_empty(), "{:?}", spec.warnings());
    assert_eq!(def.name, WEB_SEARCH);
    assert_eq!(def.category, Some(Category::Network));
    assert_eq!(def.effect, Some(Effect::Read));
    assert_eq!(def.consequence, Some(Consequence::Low));
    assert_eq!(def.idempotent, Some(true));
    assert_eq!(def.required_permissions, ["tool.network.search"]);
    assert!(def.output_schema.is_some());
    assert!(def.description.len() >= 300);
    insta::assert_json_snapshot!("web_search_input_schema", spec.input_schema());
}
