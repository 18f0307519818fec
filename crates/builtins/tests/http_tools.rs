//! Declarative `http` tools end to end: definition files registered with the http run kind,
//! called through the pipeline and the policy client against a local fake API.
#![cfg(test)]

use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::Request;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::{any, get};
use serde_json::{Value, json};
use toolgate_builtins::HttpKind;
use toolgate_core::{
    CallRequest, ErrorKind, Format, PipelineBuilder, Registry, ToolDefinition, ToolResult,
};
use toolgate_net::{NetPolicy, PolicyClient};

/// What the fake API saw of one request.
#[derive(Clone, Debug)]
struct Seen {
    method: String,
    uri: String,
    headers: Vec<(String, String)>,
    body: String,
}

struct Api {
    addr: SocketAddr,
    seen: Arc<Mutex<Vec<Seen>>>,
    flaky: Arc<AtomicU32>,
}

impl Api {
    async fn start() -> Self {
        let seen: Arc<Mutex<Vec<Seen>>> = Arc::default();
        let flaky = Arc::new(AtomicU32::new(0));
        let log = Arc::clone(&seen);
        let count = Arc::clone(&flaky);
        let app = Router::new()
            .route(
                "/v1/cities/{city}/weather",
                get(|| async {
                    axum::Json(json!({"current": {"temp_c": 3.5, "condition": {"text": "Snow"}}, "units": "metric"}))
                }),
            )
            .route(
                "/v1/issues",
                any(|| async {
                    (StatusCode::CREATED, axum::Json(json!({"issue": {"id": 42, "url": "https://tracker/42"}, "ok": true})))
                }),
            )
            .route("/text", get(|| async { "plain words" }))
            .route(
                "/v1/items",
                get(|axum::extract::Query(q): axum::extract::Query<std::collections::HashMap<String, String>>| async move {
                    // Seven items, paged by an offset the API disguises as "tok-<offset>".
                    let start: usize = match q.get("page_token") {
                        None => 0,
                        Some(t) => match t.strip_prefix("tok-").and_then(|n| n.parse().ok()) {
                            Some(n) => n,
                            None => return (StatusCode::BAD_REQUEST, "bad page_token").into_response(),
                        },
                    };
                    let size: usize = q.get("per_page").and_then(|n| n.parse().ok()).unwrap_or(3);
                    let end = (start + size).min(7);
                    let data: Vec<Value> = (start..end).map(|i| json!({"id": i + 1})).collect();
                    let next = (end < 7).then(|| format!("tok-{end}"));
                    axum::Json(json!({"data": data, "meta": {"next": next}})).into_response()
                }),
            )
            .route(
                "/status/{code}",
                get(|axum::extract::Path(code): axum::extract::Path<u16>| async move {
                    (StatusCode::from_u16(code).unwrap(), format!("{{\"error\":\"status {code}\"}}"))
                }),
            )
            .route(
                "/flaky",
                get(move || {
                    let count = Arc::clone(&count);
                    async move {
                        if count.fetch_add(1, Ordering::SeqCst) < 2 {
                            (StatusCode::SERVICE_UNAVAILABLE, "busy").into_response()
                        } else {
                            axum::Json(json!({"fine": true})).into_response()
                        }
                    }
                }),
            )
            .route(
                "/slow",
                get(|| async {
                    tokio::time::sleep(Duration::from_secs(10)).await;
                    "late"
                }),
            )
            .layer(axum::middleware::from_fn(move |req: Request, next: axum::middleware::Next| {
                let log = Arc::clone(&log);
                async move {
                    let (parts, body) = req.into_parts();
                    let bytes = axum::body::to_bytes(body, 1 << 20).await.unwrap();
                    log.lock().unwrap().push(Seen {
                        method: parts.method.to_string(),
                        uri: parts.uri.to_string(),
                        headers: parts
                            .headers
                            .iter()
                            .map(|(k, v)| (k.to_string(), v.to_str().unwrap_or("").to_owned()))
                            .collect(),
                        body: String::from_utf8_lossy(&bytes).into_owned(),
                    });
                    next.run(Request::from_parts(parts, axum::body::Body::from(bytes))).await
                }
            }));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        Self { addr, seen, flaky }
    }

    fn last(&self) -> Seen {
        self.seen
            .lock()
            .unwrap()
            .last()
            .cloned()
            .expect("the API saw no request")
    }

    fn hits(&self) -> usize {
        self.seen.lock().unwrap().len()
    }
}

impl Seen {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

fn secrets(name: &str) -> Option<String> {
    (name == "WEATHER_TOKEN").then(|| "s3cr3t-token".to_owned())
}

fn registry() -> Arc<Registry> {
    let registry = Arc::new(Registry::new());
    registry.add_run_kind(Arc::new(HttpKind::with_secrets(secrets)));
    registry
}

fn definition(toml: &str, api: &Api) -> ToolDefinition {
    let text = toml.replace("BASE", &format!("http://{}", api.addr));
    ToolDefinition::parse(&text, Format::Toml).unwrap()
}

async fn call(registry: &Arc<Registry>, policy: NetPolicy, tool: &str, args: Value) -> ToolResult {
    let pipeline = PipelineBuilder::new(Arc::clone(registry))
        .http_client(Arc::new(PolicyClient::new(policy).unwrap()))
        .build();
    pipeline.call(CallRequest::new(tool, args)).await
}

fn local() -> NetPolicy {
    NetPolicy {
        allow_private_network: true,
        ..NetPolicy::default()
    }
}

const WEATHER: &str = r#"
name = "get_weather"
description = "Current weather for a city."
category = "external_api"
effect = "read"
idempotent = true

[[parameters]]
name = "city"
type = "string"
required = true

[[parameters]]
name = "units"
type = "string"
enum = ["metric", "imperial"]
default = "metric"

[[parameters]]
name = "lang"
type = "string"

[run]
kind = "http"
url = "BASE/v1/cities/{city}/weather"
query = { units = "{units}", lang = "{lang}", source = "toolgate" }
headers = { Authorization = "Bearer ${env:WEATHER_TOKEN}" }

[run.response]
temperature = "/current/temp_c"
conditions = "/current/condition/text"
humidity = "/current/humidity"
"#;

#[tokio::test]
async fn a_get_tool_fills_its_url_query_and_secret_headers_and_maps_the_response() {
    let api = Api::start().await;
    let registry = registry();
    registry
        .register_definition(definition(WEATHER, &api))
        .unwrap();
    let r = call(
        &registry,
        local(),
        "get_weather",
        json!({"city": "São Paulo/../x"}),
    )
    .await;
    assert_eq!(
        r.data(),
        Some(&json!({"temperature": 3.5, "conditions": "Snow", "humidity": null})),
        "{r:?}"
    );
    let seen = api.last();
    assert_eq!(seen.method, "GET");
    // The value is one path segment, whatever it contains; absent `lang` is left out.
    assert_eq!(
        seen.uri,
        "/v1/cities/S%C3%A3o%20Paulo%2F..%2Fx/weather?units=metric&source=toolgate"
    );
    assert_eq!(seen.header("authorization"), Some("Bearer s3cr3t-token"));
    assert_eq!(seen.header("accept"), Some("application/json"));

    let r = call(
        &registry,
        local(),
        "get_weather",
        json!({"city": "Oslo", "lang": "nb no"}),
    )
    .await;
    assert!(r.is_ok(), "{r:?}");
    assert_eq!(
        api.last().uri,
        "/v1/cities/Oslo/weather?units=metric&lang=nb%20no&source=toolgate"
    );
}

#[tokio::test]
async fn a_post_tool_builds_a_typed_json_body_and_checks_the_status() {
    let api = Api::start().await;
    let registry = registry();
    let def = definition(
        r#"
name = "create_issue"
description = "Opens an issue in the tracker."
category = "external_api"
effect = "write"

[[parameters]]
name = "title"
type = "string"
required = true

[[parameters]]
name = "priority"
type = "integer"

[[parameters]]
name = "labels"
type = "array"
schema = { items = { type = "string" } }

[run]
kind = "http"
method = "POST"
url = "BASE/v1/issues"
expect_status = [201]
response = "/issue"

[run.body]
title = "{title}"
priority = "{priority}"
labels = "{labels}"
summary = "New: {title}"
meta = { source = "toolgate" }
"#,
        &api,
    );
    registry.register_definition(def).unwrap();
    let r = call(
        &registry,
        local(),
        "create_issue",
        json!({"title": "Disk full", "labels": ["ops", "urgent"]}),
    )
    .await;
    assert_eq!(
        r.data(),
        Some(&json!({"id": 42, "url": "https://tracker/42"})),
        "{r:?}"
    );
    let seen = api.last();
    assert_eq!(seen.method, "POST");
    assert_eq!(seen.header("content-type"), Some("application/json"));
    let body: Value = serde_json::from_str(&seen.body).unwrap();
    assert_eq!(
        body,
        json!({"title": "Disk full", "labels": ["ops", "urgent"], "summary": "New: Disk full", "meta": {"source": "toolgate"}})
    );
}

#[tokio::test]
async fn http_errors_become_the_matching_error_kinds_and_5xx_is_retried() {
    let api = Api::start().await;
    let registry = registry();
    let def = definition(
        r#"
name = "probe"
description = "Fetches a status page."
category = "external_api"
effect = "read"
idempotent = true

[[parameters]]
name = "code"
type = "integer"
required = true

[run]
kind = "http"
url = "BASE/status/{code}"
"#,
        &api,
    );
    registry.register_definition(def).unwrap();
    for (code, kind) in [
        (401, ErrorKind::Authorization),
        (403, ErrorKind::Authorization),
        (404, ErrorKind::Execution),
        (422, ErrorKind::Execution),
        (429, ErrorKind::RateLimited),
        (503, ErrorKind::Unavailable),
    ] {
        let r = call(&registry, local(), "probe", json!({"code": code})).await;
        assert_eq!(r.error_kind(), Some(kind), "{code}: {r:?}");
        let message = r.error().unwrap();
        assert!(message.contains(&format!("HTTP {code}")), "{message}");
        assert!(
            message.contains(&format!("status {code}")),
            "the body excerpt: {message}"
        );
    }

    let def = definition(
        r#"
name = "flaky"
description = "Busy twice, then fine."
category = "external_api"
effect = "read"
idempotent = true
[run]
kind = "http"
url = "BASE/flaky"
"#,
        &api,
    );
    registry.register_definition(def).unwrap();
    let r = call(&registry, local(), "flaky", json!({})).await;
    assert_eq!(r.data(), Some(&json!({"fine": true})), "{r:?}");
    assert_eq!(r.attempts, 3);
    assert_eq!(api.flaky.load(Ordering::SeqCst), 3);
}

#[tokio::test]
async fn secrets_stay_out_of_results_and_a_missing_one_is_named() {
    let api = Api::start().await;
    let registry = Arc::new(Registry::new());
    registry.add_run_kind(Arc::new(HttpKind::with_secrets(|_| None)));
    registry
        .register_definition(definition(WEATHER, &api))
        .unwrap();
    let r = call(&registry, local(), "get_weather", json!({"city": "Oslo"})).await;
    assert_eq!(r.error_kind(), Some(ErrorKind::Unavailable));
    assert_eq!(
        r.error().unwrap(),
        "Tool get_weather needs the environment variable WEATHER_TOKEN, which is not set; set it where toolgate runs and restart"
    );
    assert_eq!(api.hits(), 0);

    // With the secret, a failing call's envelope still never shows it.
    let registry = registry_with_probe(&api);
    let r = call(&registry, local(), "probe_auth", json!({})).await;
    let text = serde_json::to_string(&r).unwrap();
    assert!(!text.contains("s3cr3t"), "{text}");
    assert_eq!(api.last().header("x-api-key"), Some("s3cr3t-token"));
}

fn registry_with_probe(api: &Api) -> Arc<Registry> {
    let registry = registry();
    let def = definition(
        r#"
name = "probe_auth"
description = "Always refused."
category = "external_api"
effect = "read"
[run]
kind = "http"
url = "BASE/status/401"
headers = { X-Api-Key = "${env:WEATHER_TOKEN}" }
query = { key = "${env:WEATHER_TOKEN}" }
"#,
        api,
    );
    registry.register_definition(def).unwrap();
    registry
}

#[tokio::test]
async fn the_default_network_policy_refuses_a_tool_pointing_at_a_private_address() {
    let api = Api::start().await;
    let registry = registry();
    registry
        .register_definition(definition(WEATHER, &api))
        .unwrap();
    let r = call(
        &registry,
        NetPolicy::default(),
        "get_weather",
        json!({"city": "Oslo"}),
    )
    .await;
    assert_eq!(r.error_kind(), Some(ErrorKind::Authorization), "{r:?}");
    assert!(r.error().unwrap().contains("loopback"), "{r:?}");
    assert_eq!(api.hits(), 0);
}

#[tokio::test]
async fn the_tools_timeout_stops_a_slow_api_and_text_bodies_are_wrapped() {
    let api = Api::start().await;
    let registry = registry();
    for (name, path) in [("slow_page", "/slow"), ("text_page", "/text")] {
        let def = definition(
            &format!(
                r#"
name = "{name}"
description = "A page."
category = "external_api"
effect = "read"
[constraints]
timeout_ms = 1000
max_attempts = 1
[run]
kind = "http"
url = "BASE{path}"
"#
            ),
            &api,
        );
        registry.register_definition(def).unwrap();
    }
    let started = std::time::Instant::now();
    let r = call(&registry, local(), "slow_page", json!({})).await;
    assert_eq!(r.error_kind(), Some(ErrorKind::Timeout), "{r:?}");
    assert!(started.elapsed() < Duration::from_secs(5));
    let r = call(&registry, local(), "text_page", json!({})).await;
    assert_eq!(r.data(), Some(&json!({"text": "plain words"})));
}

#[test]
fn bad_run_sections_report_every_problem_with_its_path() {
    let registry = registry();
    let def = ToolDefinition::parse(
        r#"
name = "broken"
description = "Everything wrong at once."
category = "external_api"
effect = "read"

[[parameters]]
name = "host"
type = "string"
required = true

[[parameters]]
name = "page"
type = "integer"

[run]
kind = "http"
method = "FETCH"
url = "https://{host}.example.com/items/{page}?key=${env:KEY}"
query = ["nope"]
headers = { "Bad Header" = "x", X-Ok = "{missing}" }
body = { a = "{host}" }
expect_status = [200, 700]
response = "data"
retries = 3
"#,
        Format::Toml,
    )
    .unwrap();
    let err = registry.register_definition(def).unwrap_err();
    let report = err.report().expect("a validation report");
    let lines: Vec<String> = report.errors.iter().map(ToString::to_string).collect();
    insta::assert_snapshot!(lines.join("\n"));
    assert!(registry.get("broken").is_none());
}

#[test]
fn the_example_definitions_all_register() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/http-tools");
    let registry = registry();
    let mut names = Vec::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "toml") {
            let def = ToolDefinition::load(&path).unwrap();
            let spec = registry
                .register_definition(def)
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            assert!(
                registry
                    .get(spec.name().as_str())
                    .unwrap()
                    .handler()
                    .is_some(),
                "{} has a handler",
                path.display()
            );
            names.push(spec.name().to_string());
        }
    }
    assert!(names.len() >= 3, "{names:?}");
}

const ITEMS: &str = r#"
name = "list_items"
description = "Items of the fake API, a page at a time."
category = "external_api"
effect = "read"
idempotent = true

[[parameters]]
name = "limit"
type = "integer"

[[parameters]]
name = "cursor"
type = "string"

[run]
kind = "http"
url = "BASE/v1/items"
query = { page_token = "{cursor}", per_page = "{limit}" }
response = "/data"

[run.pagination]
next_cursor = "/meta/next"
"#;

#[tokio::test]
async fn an_http_tool_with_pagination_passes_the_apis_cursor_and_answers_next_cursor() {
    let api = Api::start().await;
    let registry = registry();
    registry
        .register_definition(definition(ITEMS, &api))
        .unwrap();
    let mut ids = Vec::new();
    let mut args = json!({"limit": 3});
    let mut tokens = Vec::new();
    loop {
        let r = call(&registry, local(), "list_items", args.clone()).await;
        let data = r.data().unwrap_or_else(|| panic!("{r:?}")).clone();
        // A list result is wrapped so it has room for nextCursor.
        for item in data["items"].as_array().unwrap() {
            ids.push(item["id"].as_u64().unwrap());
        }
        match data.get("nextCursor") {
            Some(Value::String(c)) => {
                // Opaque: the API's own value is not shown.
                assert!(!c.contains("tok-"), "{c}");
                tokens.push(c.clone());
                args["cursor"] = json!(c);
            }
            None => break,
            Some(other) => panic!("nextCursor {other}"),
        }
    }
    assert_eq!(ids, [1, 2, 3, 4, 5, 6, 7]);
    let uris: Vec<String> = api
        .seen
        .lock()
        .unwrap()
        .iter()
        .map(|s| s.uri.clone())
        .collect();
    assert_eq!(
        uris,
        [
            "/v1/items?per_page=3",
            "/v1/items?page_token=tok-3&per_page=3",
            "/v1/items?page_token=tok-6&per_page=3",
        ]
    );
    // The same token gives the same page again (stable across calls).
    let again = call(
        &registry,
        local(),
        "list_items",
        json!({"limit": 3, "cursor": tokens[0]}),
    )
    .await;
    assert_eq!(
        again.data().unwrap()["items"],
        json!([{"id": 4}, {"id": 5}, {"id": 6}])
    );

    // A changed or made-up cursor is refused before any request is made.
    let before = api.hits();
    for bad in ["tok-3".to_owned(), format!("{}x", tokens[0])] {
        let r = call(&registry, local(), "list_items", json!({"cursor": bad})).await;
        assert_eq!(r.error_kind(), Some(ErrorKind::Validation), "{r:?}");
        assert!(
            r.error()
                .unwrap()
                .contains("pass the nextCursor of the previous list_items result"),
            "{r:?}"
        );
    }
    assert_eq!(api.hits(), before);

    // A cursor of another paged tool is not this tool's.
    let other = ITEMS.replace("list_items", "list_items_too");
    registry
        .register_definition(definition(&other, &api))
        .unwrap();
    let r = call(
        &registry,
        local(),
        "list_items_too",
        json!({"cursor": tokens[0]}),
    )
    .await;
    assert_eq!(r.error_kind(), Some(ErrorKind::Validation), "{r:?}");
    assert!(
        r.error()
            .unwrap()
            .starts_with("cursor belongs to list_items, not to list_items_too"),
        "{r:?}"
    );
    assert_eq!(api.hits(), before);
}

#[test]
fn bad_pagination_sections_are_refused_with_their_paths() {
    let registry = registry();
    let cases = [
        (
            ITEMS.replace("next_cursor = \"/meta/next\"", "next_cursor = \"meta.next\""),
            "run.pagination.next_cursor",
        ),
        (
            ITEMS.replace("page_token = \"{cursor}\", ", ""),
            "run.pagination.cursor_param: Parameter \"cursor\" carries the cursor but is not sent",
        ),
        (
            ITEMS.replace("next_cursor = \"/meta/next\"", "next_cursor = \"/meta/next\"\ncursor_param = \"page\""),
            "run.pagination.cursor_param: Pagination needs a parameter \"page\"",
        ),
        (
            ITEMS.replace("name = \"cursor\"\ntype = \"string\"", "name = \"cursor\"\ntype = \"string\"\nrequired = true"),
            "must be optional without a default",
        ),
        (
            ITEMS.replace("next_cursor = \"/meta/next\"", "next_cursor = \"/meta/next\"\npage_size = 3"),
            "run.pagination.page_size: Unknown pagination setting",
        ),
        (
            ITEMS.replace(
                "[run]",
                "[output_schema]\ntype = \"object\"\nadditionalProperties = false\n[output_schema.properties.items]\ntype = \"array\"\n\n[run]",
            ),
            "declare nextCursor",
        ),
    ];
    for (toml, want) in cases {
        let def = ToolDefinition::parse(&toml.replace("BASE", "http://127.0.0.1:9"), Format::Toml)
            .unwrap();
        let err = registry.register_definition(def).unwrap_err();
        let report = err.report().expect("a validation report");
        let lines: Vec<String> = report.errors.iter().map(ToString::to_string).collect();
        assert!(lines.iter().any(|l| l.contains(want)), "{want}: {lines:?}");
    }
}

#[tokio::test]
async fn the_cursor_parameter_can_have_another_name() {
    let api = Api::start().await;
    let registry = registry();
    let toml = ITEMS
        .replace("name = \"list_items\"", "name = \"list_after\"")
        .replace("name = \"cursor\"", "name = \"after\"")
        .replace("{cursor}", "{after}")
        .replace(
            "next_cursor = \"/meta/next\"",
            "next_cursor = \"/meta/next\"\ncursor_param = \"after\"",
        );
    registry
        .register_definition(definition(&toml, &api))
        .unwrap();
    let first = call(&registry, local(), "list_after", json!({"limit": 5})).await;
    let next = first.data().unwrap()["nextCursor"].clone();
    let second = call(
        &registry,
        local(),
        "list_after",
        json!({"limit": 5, "after": next}),
    )
    .await;
    assert_eq!(
        second.data().unwrap()["items"],
        json!([{"id": 6}, {"id": 7}])
    );
    assert!(second.data().unwrap().get("nextCursor").is_none());
    assert_eq!(api.last().uri, "/v1/items?page_token=tok-5&per_page=5");
    let bad = call(&registry, local(), "list_after", json!({"after": "tok-5"})).await;
    assert_eq!(bad.error_kind(), Some(ErrorKind::Validation));
    assert_eq!(
        bad.error().unwrap(),
        "after is not a cursor of list_after (it was cut, changed or made up): pass the nextCursor of the previous list_after result unchanged, or leave after out to start from the beginning"
    );
}
