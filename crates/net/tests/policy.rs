//! The network policy against real local servers: refused address classes (by literal and by
//! name), redirects, size and time caps, cancellation, and what refusals say.
#![cfg(test)]

use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::Request;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use toolgate_core::{BoxFuture, CancellationToken, ErrorKind, HttpClient, HttpRequest, ToolError};
use toolgate_net::{NetPolicy, PolicyClient, Resolver};

/// A fake server on 127.0.0.1 that records every request it gets.
struct Server {
    addr: SocketAddr,
    seen: Arc<Mutex<Vec<(String, HeaderMap)>>>,
}

impl Server {
    async fn start(routes: Router) -> Self {
        let seen: Arc<Mutex<Vec<(String, HeaderMap)>>> = Arc::default();
        let log = Arc::clone(&seen);
        let app = routes.layer(axum::middleware::from_fn(
            move |req: Request, next: axum::middleware::Next| {
                let log = Arc::clone(&log);
                async move {
                    let uri = req.uri().to_string();
                    log.lock().unwrap().push((uri, req.headers().clone()));
                    next.run(req).await
                }
            },
        ));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        Self { addr, seen }
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    fn hits(&self) -> usize {
        self.seen.lock().unwrap().len()
    }
}

fn routes() -> Router {
    Router::new()
        .route("/ok", get(|| async { "hello" }))
        .route(
            "/big",
            get(|| async { "x".repeat(64 * 1024) }), // with Content-Length
        )
        .route(
            "/big-chunked",
            get(|| async {
                let chunks = (0..64).map(|_| Ok::<_, io::Error>(vec![b'y'; 1024]));
                axum::body::Body::from_stream(futures_util::stream::iter(chunks))
            }),
        )
        .route(
            "/slow",
            get(|| async {
                tokio::time::sleep(Duration::from_secs(10)).await;
                "late"
            }),
        )
        .route(
            "/headers",
            get(|headers: HeaderMap| async move {
                let mut names: Vec<String> =
                    headers.keys().map(|k| k.as_str().to_owned()).collect();
                names.sort();
                names.join(",")
            }),
        )
}

fn redirect(to: String) -> Response {
    (StatusCode::FOUND, [(header::LOCATION, to)]).into_response()
}

/// Resolves names from a fixed table (anything else: no such host).
struct Table(HashMap<&'static str, Vec<IpAddr>>);

impl Resolver for Table {
    fn lookup<'a>(&'a self, host: &'a str) -> BoxFuture<'a, io::Result<Vec<IpAddr>>> {
        let found = self.0.get(host).cloned();
        Box::pin(async move {
            found.ok_or_else(|| {
                io::Error::new(io::ErrorKind::NotFound, format!("no such host {host}"))
            })
        })
    }
}

fn table(entries: &[(&'static str, &str)]) -> Arc<Table> {
    let mut map: HashMap<&'static str, Vec<IpAddr>> = HashMap::new();
    for (name, ip) in entries {
        map.entry(name).or_default().push(ip.parse().unwrap());
    }
    Arc::new(Table(map))
}

fn open() -> NetPolicy {
    NetPolicy {
        allow_private_network: true,
        ..NetPolicy::default()
    }
}

async fn fetch(client: &PolicyClient, url: &str) -> Result<toolgate_core::HttpResponse, ToolError> {
    client
        .send(HttpRequest::get(url), &CancellationToken::new())
        .await
}

fn refusal(result: Result<toolgate_core::HttpResponse, ToolError>) -> String {
    let err = result.expect_err("the policy should refuse this request");
    assert_eq!(err.kind(), ErrorKind::Authorization, "{err}");
    err.message().to_owned()
}

#[tokio::test]
async fn the_default_policy_refuses_the_local_server_before_connecting() {
    let server = Server::start(routes()).await;
    let client = PolicyClient::new(NetPolicy::default()).unwrap();
    let message = refusal(fetch(&client, &server.url("/ok")).await);
    assert!(message.contains("127.0.0.1"), "{message}");
    assert!(message.contains("loopback"), "{message}");
    assert!(
        message.contains("TOOLGATE_ALLOW_PRIVATE_NETWORK"),
        "{message}"
    );
    assert_eq!(server.hits(), 0, "no request may reach a refused address");

    // The switch opens it: the same request, same server, now answered.
    let allowed = PolicyClient::new(open()).unwrap();
    let ok = fetch(&allowed, &server.url("/ok")).await.unwrap();
    assert_eq!((ok.status, ok.body.as_slice()), (200, b"hello".as_slice()));
    assert_eq!(server.hits(), 1);
}

#[tokio::test]
async fn every_refused_address_class_is_refused_by_default_and_says_why() {
    let client = PolicyClient::new(NetPolicy::default()).unwrap();
    let cases = [
        ("http://127.0.0.1/", "loopback"),
        ("http://[::1]/", "loopback"),
        ("http://10.0.0.1/", "private network"),
        ("http://172.16.5.4/", "private network"),
        ("http://192.168.0.1/", "private network"),
        ("http://[fd00::1]/", "private network"),
        ("http://169.254.10.10/", "link-local"),
        ("http://[fe80::1]/", "link-local"),
        ("http://100.64.0.1/", "carrier-grade NAT"),
        ("http://169.254.169.254/latest/meta-data/", "metadata"),
        ("http://[fd00:ec2::254]/", "metadata"),
        ("http://[::ffff:127.0.0.1]/", "IPv4-mapped"),
        ("http://[::ffff:8.8.8.8]/", "IPv4-mapped"),
        ("http://0.0.0.0/", "unspecified"),
        // Other spellings of loopback that URL parsers turn into 127.0.0.1.
        ("http://2130706433/", "loopback"),
        ("http://0x7f.1/", "loopback"),
    ];
    let mut report = String::new();
    for (url, why) in cases {
        let message = refusal(fetch(&client, url).await);
        assert!(message.contains(why), "{url}: {message}");
        report.push_str(&format!("{url}\n  {message}\n"));
    }
    insta::assert_snapshot!(report);
}

#[tokio::test]
async fn names_are_checked_after_resolution() {
    let resolver = table(&[
        ("intranet.test", "10.1.2.3"),
        ("mixed.test", "93.184.216.34"),
        ("mixed.test", "192.168.1.20"),
        ("metadata.test", "169.254.169.254"),
    ]);
    let client = PolicyClient::with_resolver(NetPolicy::default(), resolver.clone()).unwrap();
    let m = refusal(fetch(&client, "http://intranet.test/").await);
    assert!(
        m.contains("intranet.test (10.1.2.3)") && m.contains("private"),
        "{m}"
    );
    // One bad address among good ones refuses the host: the connection could pick it.
    let m = refusal(fetch(&client, "https://mixed.test/").await);
    assert!(m.contains("192.168.1.20"), "{m}");
    // The private switch never opens metadata addresses.
    let open_client = PolicyClient::with_resolver(open(), resolver).unwrap();
    let m = refusal(fetch(&open_client, "http://metadata.test/").await);
    assert!(
        m.contains("metadata") && !m.contains("allow_private_network"),
        "{m}"
    );

    // The system resolver: localhost is a name that resolves to loopback.
    let server = Server::start(routes()).await;
    let system = PolicyClient::new(NetPolicy::default()).unwrap();
    let url = format!("http://localhost:{}/ok", server.addr.port());
    let m = refusal(fetch(&system, &url).await);
    assert!(m.contains("localhost") && m.contains("loopback"), "{m}");
    assert_eq!(server.hits(), 0);
}

#[tokio::test]
async fn a_redirect_from_an_allowed_host_to_a_private_one_is_refused() {
    let server = Server::start(Router::new()).await;
    let port = server.addr.port();
    let target = Server::start(routes()).await;
    let target_port = target.addr.port();
    let server = Server::start(
        Router::new()
            .route(
                "/to-intranet",
                get(move || async move { redirect(format!("http://intranet.test:{target_port}/ok")) }),
            )
            .route(
                "/to-literal",
                get(move || async move { redirect(format!("http://127.0.0.1:{target_port}/ok")) }),
            )
            .route(
                "/to-metadata",
                get(|| async { redirect("http://169.254.169.254/latest/meta-data/".into()) }),
            )
            .route("/to-ok", get(|| async { redirect("/final".into()) }))
            .route("/final", get(|| async { "arrived" })),
    )
    .await;
    let _ = port;
    // api.test is allowed explicitly (private_hosts); intranet.test is not.
    let resolver = table(&[("api.test", "127.0.0.1"), ("intranet.test", "127.0.0.1")]);
    let policy = NetPolicy {
        private_hosts: vec!["api.test".into()],
        ..NetPolicy::default()
    };
    let client = PolicyClient::with_resolver(policy, resolver).unwrap();
    let api = |path: &str| format!("http://api.test:{}{path}", server.addr.port());

    let ok = fetch(&client, &api("/to-ok")).await.unwrap();
    assert_eq!(ok.body, b"arrived");
    for path in ["/to-intranet", "/to-literal", "/to-metadata"] {
        let m = refusal(fetch(&client, &api(path)).await);
        assert!(m.contains("Network policy refused"), "{path}: {m}");
    }
    assert_eq!(target.hits(), 0, "the private target was never reached");
}

#[tokio::test]
async fn redirects_are_capped() {
    let server = Server::start(Router::new().route(
        "/loop/{n}",
        get(
            |axum::extract::Path(n): axum::extract::Path<u32>| async move {
                redirect(format!("/loop/{}", n + 1))
            },
        ),
    ))
    .await;
    let client = PolicyClient::new(NetPolicy {
        max_redirects: 3,
        ..open()
    })
    .unwrap();
    let err = fetch(&client, &server.url("/loop/0")).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Execution);
    assert!(err.message().contains("more than 3 times"), "{err}");
    assert_eq!(server.hits(), 4, "the first request and three redirects");
}

#[tokio::test]
async fn caller_headers_stay_behind_when_a_redirect_leaves_the_origin() {
    let other = Server::start(routes()).await;
    let other_url = other.url("/headers");
    let server = Server::start(
        routes()
            .route(
                "/away",
                get(move || {
                    let to = other_url.clone();
                    async move { redirect(to) }
                }),
            )
            .route("/here", get(|| async { redirect("/headers".into()) })),
    )
    .await;
    let client = PolicyClient::new(open()).unwrap();
    let request = |path: &str| {
        HttpRequest::get(server.url(path))
            .header("X-Subscription-Token", "secret-key")
            .header("Accept", "application/json")
    };
    let cancel = CancellationToken::new();
    let same = client.send(request("/here"), &cancel).await.unwrap();
    let same = String::from_utf8(same.body).unwrap();
    assert!(same.contains("x-subscription-token"), "{same}");
    let away = client.send(request("/away"), &cancel).await.unwrap();
    let away = String::from_utf8(away.body).unwrap();
    assert!(!away.contains("x-subscription-token"), "{away}");
    assert!(away.contains("accept"), "{away}");
}

#[tokio::test]
async fn oversized_bodies_are_refused_with_or_without_content_length() {
    let server = Server::start(routes()).await;
    let client = PolicyClient::new(NetPolicy {
        max_response_bytes: 16 * 1024,
        ..open()
    })
    .unwrap();
    for path in ["/big", "/big-chunked"] {
        let err = fetch(&client, &server.url(path)).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Execution, "{path}");
        assert!(
            err.message().contains("larger than the 16 KiB limit"),
            "{err}"
        );
    }
    // A request may tighten the cap, never loosen it.
    let mut req = HttpRequest::get(server.url("/ok"));
    req.max_response_bytes = Some(3);
    let err = client
        .send(req, &CancellationToken::new())
        .await
        .unwrap_err();
    assert!(err.message().contains("3 bytes"), "{err}");
    let mut req = HttpRequest::get(server.url("/big"));
    req.max_response_bytes = Some(1 << 30);
    assert!(client.send(req, &CancellationToken::new()).await.is_err());
}

#[tokio::test]
async fn slow_servers_time_out_and_cancellation_stops_at_once() {
    let server = Server::start(routes()).await;
    let client = PolicyClient::new(NetPolicy {
        timeout_ms: 300,
        ..open()
    })
    .unwrap();
    let started = std::time::Instant::now();
    let err = fetch(&client, &server.url("/slow")).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Timeout, "{err}");
    assert!(err.message().contains("300 ms"), "{err}");
    assert!(started.elapsed() < Duration::from_secs(5));

    let mut req = HttpRequest::get(server.url("/slow"));
    req.timeout = Some(Duration::from_millis(100));
    let client = PolicyClient::new(open()).unwrap();
    let err = client
        .send(req, &CancellationToken::new())
        .await
        .unwrap_err();
    assert!(err.message().contains("100 ms"), "{err}");

    let cancel = CancellationToken::new();
    let trigger = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(100)).await;
        trigger.cancel();
    });
    let err = client
        .send(HttpRequest::get(server.url("/slow")), &cancel)
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Cancelled);
}

#[tokio::test]
async fn only_http_urls_and_messages_never_show_the_query() {
    let client = PolicyClient::new(NetPolicy::default()).unwrap();
    for url in [
        "file:///etc/passwd",
        "ftp://example.com/x",
        "gopher://example.com/",
    ] {
        let m = refusal(fetch(&client, url).await);
        assert!(m.contains("only http and https"), "{url}: {m}");
    }
    let m = refusal(fetch(&client, "http://10.0.0.1/search?api_key=SECRET123").await);
    assert!(!m.contains("SECRET123"), "{m}");
    let resolver = table(&[]);
    let client = PolicyClient::with_resolver(open(), resolver).unwrap();
    let err = fetch(&client, "https://nowhere.test/x?api_key=SECRET123")
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
    assert!(!err.message().contains("SECRET123"), "{err}");
    assert!(err.message().contains("nowhere.test"), "{err}");
}

#[test]
fn the_environment_switch_turns_on_private_networks() {
    let on = NetPolicy::default()
        .with_vars(|k| (k == "TOOLGATE_ALLOW_PRIVATE_NETWORK").then(|| "1".into()));
    assert!(on.allow_private_network);
    let off = NetPolicy::default().with_vars(|_| Some("0".into()));
    assert!(!off.allow_private_network);
}
