//! `wikipedia` against a local fake MediaWiki (action API search + REST summary), through a
//! real pipeline and toolgate-net's policy client: standard articles, disambiguation pages, no
//! hits, 404 summaries, language routing, title encoding, API errors, malformed JSON, HTTP
//! errors, timeouts and oversized bodies.
#![cfg(test)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{FakeServer, Recorded, Reply, call, data, failure, pipeline};
use serde_json::{Value, json};
use toolgate_builtins::{WEB_USER_AGENT, WIKIPEDIA, Wikipedia, WikipediaConfig};
use toolgate_core::{Category, Effect, ErrorKind, Tool, ToolResult, validate};

const SEARCH_PATH: &str = "/w/api.php";
const SUMMARY_PREFIX: &str = "/api/rest_v1/page/summary/";

fn hits(titles: &[&str]) -> Value {
    let search: Vec<Value> = titles
        .iter()
        .enumerate()
        .map(|(i, t)| {
            json!({"ns": 0, "title": t, "pageid": 1000 + i, "size": 50_000, "wordcount": 5000,
                   "snippet": format!("<span class=\"searchmatch\">{t}</span> is …"),
                   "timestamp": "2024-05-01T12:00:00Z"})
        })
        .collect();
    json!({
        "batchcomplete": true,
        "continue": {"sroffset": titles.len(), "continue": "-||"},
        "query": {"searchinfo": {"totalhits": 2874}, "search": search}
    })
}

fn ada_summary() -> Value {
    json!({
        "type": "standard",
        "title": "Ada Lovelace",
        "displaytitle": "<span class=\"mw-page-title-main\">Ada Lovelace</span>",
        "namespace": {"id": 0, "text": ""},
        "wikibase_item": "Q7259",
        "titles": {"canonical": "Ada_Lovelace", "normalized": "Ada Lovelace", "display": "<span class=\"mw-page-title-main\">Ada Lovelace</span>"},
        "pageid": 974,
        "lang": "en",
        "dir": "ltr",
        "revision": "1222000000",
        "timestamp": "2024-05-01T12:00:00Z",
        "description": "English mathematician (1815–1852)",
        "description_source": "local",
        "content_urls": {
            "desktop": {"page": "https://en.wikipedia.org/wiki/Ada_Lovelace", "revisions": "https://en.wikipedia.org/wiki/Ada_Lovelace?action=history", "edit": "https://en.wikipedia.org/wiki/Ada_Lovelace?action=edit", "talk": "https://en.wikipedia.org/wiki/Talk:Ada_Lovelace"},
            "mobile": {"page": "https://en.m.wikipedia.org/wiki/Ada_Lovelace"}
        },
        "extract": "Augusta Ada King, Countess of Lovelace was an English mathematician and writer, chiefly known for her work on Charles Babbage's proposed mechanical general-purpose computer, the Analytical Engine.",
        "extract_html": "<p><b>Augusta Ada King, Countess of Lovelace</b> was an English mathematician and writer…</p>"
    })
}

/// A wiki whose search answers `search` and whose summaries answer `summary(title_segment)`.
async fn wiki(
    search: impl Fn(&Recorded) -> Reply + Send + Sync + 'static,
    summary: impl Fn(&str) -> Reply + Send + Sync + 'static,
) -> FakeServer {
    FakeServer::start(move |r| {
        let path = r.raw_path.as_str();
        let path = path.strip_prefix("/de").unwrap_or(path);
        if path == SEARCH_PATH {
            search(r)
        } else if let Some(segment) = path.strip_prefix(SUMMARY_PREFIX) {
            summary(segment)
        } else {
            Reply::json(404, &json!({"detail": "no such route"}))
        }
    })
    .await
}

fn tool(server: &FakeServer) -> Wikipedia {
    Wikipedia::new(WikipediaConfig {
        base_url: Some(server.base.clone()),
    })
}

async fn look_up_with(tool: Wikipedia, args: Value) -> ToolResult {
    call(&pipeline(Arc::new(tool)), WIKIPEDIA, args).await
}

async fn look_up(server: &FakeServer, args: Value) -> ToolResult {
    look_up_with(tool(server), args).await
}

#[tokio::test]
async fn a_standard_article_is_summarized_from_the_best_hit() {
    let server = wiki(
        |_| {
            Reply::json(
                200,
                &hits(&[
                    "Ada Lovelace",
                    "Lovelace (film)",
                    "Ada (programming language)",
                ]),
            )
        },
        |_| Reply::json(200, &ada_summary()),
    )
    .await;
    let result = look_up(&server, json!({"query": "ada lovelace"})).await;
    insta::assert_json_snapshot!("standard", data(&result));
    assert_eq!(result.input, json!({"query": "ada lovelace", "lang": "en"}));

    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    let search = &requests[0];
    assert_eq!(search.raw_path, SEARCH_PATH);
    assert_eq!(
        search.params,
        [
            ("action", "query"),
            ("list", "search"),
            ("srsearch", "ada lovelace"),
            ("format", "json"),
            ("srlimit", "5"),
            ("formatversion", "2"),
        ]
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
    );
    let summary = &requests[1];
    assert_eq!(summary.raw_path, "/api/rest_v1/page/summary/Ada_Lovelace");
    assert_eq!(summary.raw_query, "");
    for r in &requests {
        assert_eq!(r.method, "GET");
        assert_eq!(r.header("user-agent"), Some(WEB_USER_AGENT));
        assert_eq!(r.header("accept"), Some("application/json"));
    }
}

#[tokio::test]
async fn titles_are_sent_with_underscores_and_percent_encoding() {
    for (title, segment) in [
        ("Mercury (planet)", "Mercury_%28planet%29"),
        ("AC/DC", "AC%2FDC"),
        ("Zürich", "Z%C3%BCrich"),
        ("C++", "C%2B%2B"),
        ("What? & Why", "What%3F_%26_Why"),
    ] {
        let server = wiki(
            move |_| Reply::json(200, &hits(&[title])),
            move |_| {
                Reply::json(
                    200,
                    &json!({"type": "standard", "title": title, "extract": "Text."}),
                )
            },
        )
        .await;
        let result = look_up(&server, json!({"query": title})).await;
        assert_eq!(data(&result)["title"], title);
        let requests = server.requests();
        assert_eq!(requests[0].param("srsearch"), Some(title));
        assert_eq!(requests[1].raw_path, format!("{SUMMARY_PREFIX}{segment}"));
        // Without content_urls the address is built from the wiki's base.
        assert_eq!(
            server.mask(data(&result)["url"].as_str().unwrap()),
            format!("http://fake/wiki/{segment}")
        );
    }
}

#[tokio::test]
async fn a_disambiguation_page_says_so_and_lists_the_other_hits() {
    let server = wiki(
        |_| {
            Reply::json(
                200,
                &hits(&[
                    "Mercury",
                    "Mercury (planet)",
                    "Mercury (element)",
                    "Freddie Mercury",
                ]),
            )
        },
        |_| {
            Reply::json(
                200,
                &json!({
                    "type": "disambiguation",
                    "title": "Mercury",
                    "description": "Topics referred to by the same term",
                    "content_urls": {"desktop": {"page": "https://en.wikipedia.org/wiki/Mercury"}},
                    "extract": "Mercury commonly refers to:"
                }),
            )
        },
    )
    .await;
    let result = look_up(&server, json!({"query": "Mercury"})).await;
    insta::assert_json_snapshot!("disambiguation", data(&result));
    assert_eq!(data(&result)["kind"], "disambiguation");
}

#[tokio::test]
async fn no_hits_is_an_execution_error_with_the_suggestion() {
    let server = wiki(
        |_| {
            Reply::json(
                200,
                &json!({"batchcomplete": true, "query": {"searchinfo": {"totalhits": 0, "suggestion": "ada lovelace", "suggestionsnippet": "ada lovelace"}, "search": []}}),
            )
        },
        |_| panic!("no summary is asked for without a hit"),
    )
    .await;
    let result = look_up(&server, json!({"query": "ada lovelcae"})).await;
    assert_eq!(
        failure(&result),
        (
            ErrorKind::Execution,
            "No Wikipedia article matches \"ada lovelcae\" (Wikipedia suggests \"ada lovelace\"); try other words".to_owned()
        )
    );
    assert_eq!(result.attempts, 1);
    assert_eq!(server.requests().len(), 1);

    let server = wiki(
        |_| Reply::json(200, &json!({"batchcomplete": true, "query": {"searchinfo": {"totalhits": 0}, "search": []}})),
        |_| panic!("no summary is asked for without a hit"),
    )
    .await;
    let result = look_up(&server, json!({"query": "qqxqzz"})).await;
    assert_eq!(
        failure(&result).1,
        "No Wikipedia article matches \"qqxqzz\"; try other words"
    );
}

#[tokio::test]
async fn a_missing_summary_is_an_execution_error_naming_the_title() {
    let server = wiki(
        |_| Reply::json(200, &hits(&["Ghost page"])),
        |_| {
            Reply::raw(
                404,
                "application/problem+json",
                json!({"type": "https://mediawiki.org/wiki/HyperSwitch/errors/not_found", "title": "Not found.", "method": "get", "detail": "Page or revision not found.", "uri": "/en.wikipedia.org/v1/page/summary/Ghost_page"}).to_string(),
            )
        },
    )
    .await;
    let result = look_up(&server, json!({"query": "ghost page"})).await;
    assert_eq!(
        failure(&result),
        (
            ErrorKind::Execution,
            "Wikipedia has no page titled \"Ghost page\" (HTTP 404: Page or revision not found); try other words".to_owned()
        )
    );
    assert_eq!(result.attempts, 1);
}

#[tokio::test]
async fn the_language_picks_the_wiki() {
    let server = wiki(
        |_| Reply::json(200, &hits(&["Ada Lovelace"])),
        |_| {
            Reply::json(
                200,
                &json!({"type": "standard", "title": "Ada Lovelace", "extract": "Ada Lovelace war eine britische Mathematikerin.",
                        "content_urls": {"desktop": {"page": "https://de.wikipedia.org/wiki/Ada_Lovelace"}}}),
            )
        },
    )
    .await;
    let tool = Wikipedia::new(WikipediaConfig {
        base_url: Some(format!("{}/{{lang}}", server.base)),
    });
    let result = look_up_with(tool, json!({"query": "Ada Lovelace", "lang": "de"})).await;
    assert_eq!(
        data(&result)["summary"],
        "Ada Lovelace war eine britische Mathematikerin."
    );
    let paths: Vec<String> = server.requests().into_iter().map(|r| r.raw_path).collect();
    assert_eq!(
        paths,
        ["/de/w/api.php", "/de/api/rest_v1/page/summary/Ada_Lovelace"]
    );
}

#[tokio::test]
async fn invalid_languages_are_refused_before_any_request() {
    let server = wiki(|_| panic!("no request"), |_| panic!("no request")).await;
    for lang in ["EN", "english", "e", "en_GB", "../x", "en.evil.test"] {
        let result = look_up(&server, json!({"query": "x", "lang": lang})).await;
        assert_eq!(failure(&result).0, ErrorKind::Validation, "{lang}");
    }
    let result = look_up(&server, json!({"query": ""})).await;
    assert_eq!(failure(&result).0, ErrorKind::Validation);
    assert!(server.requests().is_empty());
}

#[tokio::test]
async fn an_api_error_object_is_an_execution_error() {
    let server = wiki(
        |_| {
            Reply::json(
                200,
                &json!({"error": {"code": "nosrsearch", "info": "The \"srsearch\" parameter must be set.", "*": "See https://en.wikipedia.org/w/api.php for API usage."}, "servedby": "mw1234"}),
            )
        },
        |_| panic!("no summary"),
    )
    .await;
    let result = look_up(&server, json!({"query": "x"})).await;
    assert_eq!(
        failure(&result),
        (
            ErrorKind::Execution,
            "Wikipedia search failed: The \"srsearch\" parameter must be set. (nosrsearch)"
                .to_owned()
        )
    );
}

#[tokio::test]
async fn malformed_json_is_an_execution_error() {
    let server = wiki(
        |_| Reply::raw(200, "application/json", "{\"query\": {\"search\": ["),
        |_| panic!("no summary"),
    )
    .await;
    let result = look_up(&server, json!({"query": "x"})).await;
    let (kind, message) = failure(&result);
    assert_eq!(kind, ErrorKind::Execution);
    assert!(
        message.starts_with("Wikipedia search returned a response that is not valid JSON ("),
        "{message}"
    );

    let server = wiki(
        |_| Reply::json(200, &hits(&["Ada Lovelace"])),
        |_| Reply::raw(200, "application/json", "<html>oops</html>"),
    )
    .await;
    let result = look_up(&server, json!({"query": "x"})).await;
    let (kind, message) = failure(&result);
    assert_eq!(kind, ErrorKind::Execution);
    assert!(
        message.starts_with("Wikipedia returned a response that is not valid JSON ("),
        "{message}"
    );
    assert_eq!(result.attempts, 1);
}

#[tokio::test]
async fn http_errors_map_to_kinds_and_transient_ones_are_retried() {
    let cases = [
        (
            Reply::raw(
                503,
                "text/html",
                "<html><body><h1>Wikimedia Error</h1><p>Our servers are currently under maintenance.</p></body></html>",
            ),
            ErrorKind::Unavailable,
            3,
            "Wikipedia search failed (HTTP 503 Service Unavailable): Wikimedia Error. Our servers are currently under maintenance; try again later",
        ),
        (
            Reply::raw(429, "text/plain", "Too many requests").header("retry-after", "2"),
            ErrorKind::RateLimited,
            3,
            "Wikipedia search is rate limiting requests (HTTP 429 Too Many Requests): Too many requests; retry after 2 seconds",
        ),
        (
            Reply::raw(
                403,
                "text/plain",
                "Please set a user-agent and respect our robot policy.",
            ),
            ErrorKind::Authorization,
            1,
            "Wikipedia search refused the request (HTTP 403 Forbidden): Please set a user-agent and respect our robot policy; if TOOLGATE_WIKIPEDIA_BASE_URL points at a private wiki, it must allow anonymous reads",
        ),
        (
            Reply::json(
                400,
                &json!({"error": {"code": "badvalue", "info": "Unrecognized value for parameter \"list\"."}}),
            ),
            ErrorKind::Execution,
            1,
            "Wikipedia search refused the request (HTTP 400 Bad Request): Unrecognized value for parameter \"list\"",
        ),
    ];
    for (reply, kind, attempts, message) in cases {
        let server = FakeServer::always(reply).await;
        let result = look_up(&server, json!({"query": "x"})).await;
        assert_eq!(failure(&result), (kind, message.to_owned()));
        assert_eq!(result.attempts, attempts, "{message}");
    }
}

#[tokio::test]
async fn a_slow_wiki_times_out() {
    let server = FakeServer::always(
        Reply::json(200, &hits(&["Ada Lovelace"])).delayed(Duration::from_secs(5)),
    )
    .await;
    let tool = tool(&server).with_request_timeout(Duration::from_millis(200));
    let result = look_up_with(tool, json!({"query": "x"})).await;
    let (kind, message) = failure(&result);
    assert_eq!(kind, ErrorKind::Timeout);
    assert_eq!(
        server.mask(&message),
        "Searching Wikipedia failed: http://fake/w/api.php did not answer within 200 ms"
    );
}

#[tokio::test]
async fn an_oversized_summary_is_refused() {
    let server = wiki(
        |_| Reply::json(200, &hits(&["Ada Lovelace"])),
        |_| {
            let mut s = ada_summary();
            s["extract_html"] = json!("x".repeat(20_000));
            Reply::json(200, &s)
        },
    )
    .await;
    let tool = tool(&server).with_max_response_bytes(8 * 1024);
    let result = look_up_with(tool, json!({"query": "x"})).await;
    let (kind, message) = failure(&result);
    assert_eq!(kind, ErrorKind::Execution);
    assert_eq!(
        server.mask(&message),
        "Fetching the Wikipedia summary of \"Ada Lovelace\" failed: The response from http://fake/api/rest_v1/page/summary/Ada_Lovelace is larger than the 8 KiB limit; ask for a smaller resource"
    );
}

#[test]
fn the_definition_declares_governance_and_validates_cleanly() {
    let def = Wikipedia::default().definition();
    let spec = validate(&def).unwrap();
    assert!(spec.warnings().is_empty(), "{:?}", spec.warnings());
    assert_eq!(def.name, WIKIPEDIA);
    assert_eq!(def.category, Some(Category::Knowledge));
    assert_eq!(def.effect, Some(Effect::Read));
    assert_eq!(def.idempotent, Some(true));
    assert_eq!(def.required_permissions, ["tool.network.search"]);
    assert!(def.output_schema.is_some());
    assert!(def.description.len() >= 300);
}

#[test]
fn the_base_url_comes_from_the_environment_when_set() {
    let config = WikipediaConfig {
        base_url: Some("https://file.test".into()),
    };
    let same = config
        .clone()
        .with_vars(|name| (name == "TOOLGATE_WIKIPEDIA_BASE_URL").then(String::new));
    assert_eq!(same, config);
    let env = config.with_vars(|name| {
        (name == "TOOLGATE_WIKIPEDIA_BASE_URL").then(|| "http://127.0.0.1:8080/{lang}".to_owned())
    });
    assert_eq!(
        env.base_url.as_deref(),
        Some("http://127.0.0.1:8080/{lang}")
    );
}
