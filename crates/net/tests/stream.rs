//! Streamed exchanges (`PolicyClient::open`, and `Endpoint::open` to a fixed URL) against real
//! local servers: the policy's address check, redirects refused or followed, server-sent events
//! capped one by one (a long stream passes, one large event does not), whole bodies capped, and
//! cancellation mid-stream.
#![cfg(test)]

use std::convert::Infallible;
use std::net::SocketAddr;
use std::time::Duration;

use axum::Router;
use axum::http::{StatusCode, header};
use axum::routing::{get, post};
use futures_util::StreamExt;
use toolgate_core::{CancellationToken, ErrorKind};
use toolgate_net::{
    Bytes, HeaderMap, HeaderValue, Method, NetPolicy, PolicyClient, Redirects, StreamRequest,
};

async fn serve() -> SocketAddr {
    let app = Router::new()
        .route(
            "/events",
            get(|| async {
                // 200 events of ~1 KiB each: 200 KiB in all, under a 4 KiB per-event cap.
                let chunks = (0..200).map(|i| {
                    Ok::<_, Infallible>(format!("id: {i}\ndata: {}\n\n", "e".repeat(1000)))
                });
                (
                    [(header::CONTENT_TYPE, "text/event-stream")],
                    axum::body::Body::from_stream(futures_util::stream::iter(chunks)),
                )
            }),
        )
        .route(
            "/big-event",
            get(|| async {
                (
                    [(header::CONTENT_TYPE, "text/event-stream")],
                    format!("data: small\n\ndata: {}\n\n", "b".repeat(8000)),
                )
            }),
        )
        .route(
            "/endless",
            get(|| async {
                let ticks = futures_util::stream::unfold(0u32, |i| async move {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    Some((Ok::<_, Infallible>(format!("data: {i}\n\n")), i + 1))
                });
                (
                    [(header::CONTENT_TYPE, "text/event-stream")],
                    axum::body::Body::from_stream(ticks),
                )
            }),
        )
        .route("/json", post(|body: String| async move { body }))
        .route(
            "/moved",
            post(|| async {
                (
                    StatusCode::TEMPORARY_REDIRECT,
                    [(header::LOCATION, "/json")],
                )
            })
            .get(|| async { (StatusCode::FOUND, [(header::LOCATION, "/events")]) }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        axum::serve(listener, app.into_make_service())
            .await
            .unwrap()
    });
    addr
}

fn local() -> PolicyClient {
    PolicyClient::new(NetPolicy {
        private_hosts: vec!["127.0.0.1".into()],
        ..NetPolicy::default()
    })
    .unwrap()
}

fn get_req(addr: SocketAddr, path: &str) -> StreamRequest {
    StreamRequest {
        method: "GET".into(),
        url: format!("http://{addr}{path}"),
        timeout: Some(Duration::from_secs(5)),
        ..StreamRequest::default()
    }
}

#[tokio::test]
async fn a_long_stream_passes_a_per_event_cap() {
    let addr = serve().await;
    let response = local()
        .open(get_req(addr, "/events"), &CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.header("Content-Type"), Some("text/event-stream"));
    let events: Vec<_> = response.events(4096).collect().await;
    assert_eq!(events.len(), 200);
    let last = events.last().unwrap().as_ref().unwrap();
    assert_eq!(last.id.as_deref(), Some("199"));
    assert_eq!(last.data.len(), 1000);
}

#[tokio::test]
async fn one_event_over_the_cap_ends_the_stream_with_a_message() {
    let addr = serve().await;
    let response = local()
        .open(get_req(addr, "/big-event"), &CancellationToken::new())
        .await
        .unwrap();
    let events: Vec<_> = response.events(4096).collect().await;
    assert_eq!(events.len(), 2, "the small event, then the error");
    assert_eq!(events[0].as_ref().unwrap().data, "small");
    let err = events[1].as_ref().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Execution);
    assert_eq!(
        err.message(),
        format!(
            "An event in the stream from http://127.0.0.1:{}/big-event is larger than the 4 KiB limit; raise [network] max_response_bytes if the server's events are that large",
            addr.port()
        )
    );
}

#[tokio::test]
async fn the_default_policy_refuses_loopback_before_any_request() {
    let addr = serve().await;
    let client = PolicyClient::new(NetPolicy::default()).unwrap();
    let err = client
        .open(get_req(addr, "/events"), &CancellationToken::new())
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Authorization);
    assert!(err.message().contains("private_hosts"), "{}", err.message());
    let err = client
        .check_destination(&format!("http://localhost:{}/", addr.port()))
        .await
        .unwrap_err();
    assert!(
        err.message()
            .starts_with("Network policy refused localhost ("),
        "{}",
        err.message()
    );
}

#[tokio::test]
async fn redirects_are_refused_unless_asked_for() {
    let addr = serve().await;
    let client = local();
    let post = StreamRequest {
        method: "POST".into(),
        url: format!("http://{addr}/moved"),
        body: Some(b"{}".to_vec()),
        ..StreamRequest::default()
    };
    let err = client
        .open(post, &CancellationToken::new())
        .await
        .unwrap_err();
    assert_eq!(
        err.message(),
        format!(
            "http://{addr}/moved answered with a redirect (307) to http://{addr}/json; this request is not redirected: use the final address instead"
        )
    );
    let follow = StreamRequest {
        redirects: Redirects::Follow,
        ..get_req(addr, "/moved")
    };
    let response = client
        .open(follow, &CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(response.shown_url(), format!("http://{addr}/events"));
}

#[tokio::test]
async fn a_whole_body_is_capped() {
    let addr = serve().await;
    let post = |body: &str| StreamRequest {
        method: "POST".into(),
        url: format!("http://{addr}/json"),
        body: Some(body.as_bytes().to_vec()),
        ..StreamRequest::default()
    };
    let client = local();
    let cancel = CancellationToken::new();
    let small = client.open(post("{\"a\":1}"), &cancel).await.unwrap();
    assert_eq!(&small.bytes(100).await.unwrap()[..], b"{\"a\":1}");
    let big = client.open(post(&"x".repeat(200)), &cancel).await.unwrap();
    let err = big.bytes(100).await.unwrap_err();
    assert!(
        err.message().contains("larger than the 100 bytes limit"),
        "{}",
        err.message()
    );
}

#[tokio::test]
async fn cancelling_ends_an_endless_stream() {
    let addr = serve().await;
    let cancel = CancellationToken::new();
    let response = local()
        .open(get_req(addr, "/endless"), &cancel)
        .await
        .unwrap();
    let mut events = response.events(1024);
    assert_eq!(events.next().await.unwrap().unwrap().data, "0");
    cancel.cancel();
    let end = tokio::time::timeout(Duration::from_secs(2), async {
        let mut last = None;
        while let Some(item) = events.next().await {
            last = Some(item);
        }
        last
    })
    .await
    .expect("the stream ends once cancelled");
    assert_eq!(end.unwrap().unwrap_err().kind(), ErrorKind::Cancelled);
}

fn json_headers() -> HeaderMap {
    let mut headers = HeaderMap::new();
    headers.insert("content-type", HeaderValue::from_static("application/json"));
    headers
}

#[tokio::test]
async fn an_endpoint_sends_its_request_and_refuses_a_redirect() {
    let addr = serve().await;
    let client = local();
    let cancel = CancellationToken::new();
    let body = || Some(Bytes::from_static(b"{\"a\":1}"));
    let json = client.endpoint(&format!("http://{addr}/json")).unwrap();
    let answer = json
        .open(Method::POST, json_headers(), body(), None, &cancel)
        .await
        .unwrap();
    assert_eq!(answer.status(), 200);
    assert_eq!(&answer.bytes(100).await.unwrap()[..], b"{\"a\":1}");
    // The 307 would come back as an answer (the client follows nothing by itself): the
    // endpoint refuses it, naming where it pointed.
    let moved = client.endpoint(&format!("http://{addr}/moved")).unwrap();
    let err = moved
        .open(Method::POST, json_headers(), body(), None, &cancel)
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Execution);
    assert_eq!(
        err.message(),
        format!(
            "http://{addr}/moved answered with a redirect (307) to http://{addr}/json; this request is not redirected: use the final address instead"
        )
    );
}

#[tokio::test]
async fn an_endpoint_is_under_the_policy() {
    let addr = serve().await;
    let strict = PolicyClient::new(NetPolicy::default()).unwrap();
    // Refused when made: a scheme other than http(s), a literal address the policy refuses.
    let err = strict.endpoint("file:///etc/passwd").unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Authorization, "{err}");
    let err = strict.endpoint(&format!("http://{addr}/json")).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Authorization, "{err}");
    assert!(err.message().contains("private_hosts"), "{}", err.message());
    // A name is checked as each connection is made: localhost is not 127.0.0.1's exemption.
    let by_name = local()
        .endpoint(&format!("http://localhost:{}/json", addr.port()))
        .unwrap();
    let err = by_name
        .open(
            Method::POST,
            json_headers(),
            None,
            Some(Duration::from_secs(5)),
            &CancellationToken::new(),
        )
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Authorization, "{err}");
    assert!(
        err.message()
            .starts_with("Network policy refused localhost ("),
        "{}",
        err.message()
    );
}

#[tokio::test]
async fn an_endpoint_reuses_its_connection_and_survives_an_abandoned_stream() {
    use std::collections::HashSet;
    use std::sync::{Arc, Mutex};
    // A server noting the client port of every request: one port, one connection.
    let peers: Arc<Mutex<HashSet<SocketAddr>>> = Arc::default();
    let seen = Arc::clone(&peers);
    let app = Router::new()
        .route("/json", post(|body: String| async move { body }))
        .route(
            "/events",
            get(|| async {
                let ticks = futures_util::stream::unfold(0u32, |i| async move {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                    Some((Ok::<_, Infallible>(format!("data: {i}\n\n")), i + 1))
                });
                (
                    [(header::CONTENT_TYPE, "text/event-stream")],
                    axum::body::Body::from_stream(ticks),
                )
            }),
        )
        .layer(axum::middleware::from_fn(
            move |info: axum::extract::ConnectInfo<SocketAddr>,
                  request: axum::extract::Request,
                  next: axum::middleware::Next| {
                seen.lock().unwrap().insert(info.0);
                next.run(request)
            },
        ));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        axum::serve(
            listener,
            app.into_make_service_with_connect_info::<SocketAddr>(),
        )
        .await
        .unwrap()
    });
    let client = local();
    let cancel = CancellationToken::new();
    let json = client.endpoint(&format!("http://{addr}/json")).unwrap();
    for i in 0..20 {
        let body = format!("{{\"n\":{i}}}");
        let answer = json
            .open(
                Method::POST,
                json_headers(),
                Some(Bytes::from(body.clone())),
                None,
                &cancel,
            )
            .await
            .unwrap();
        assert_eq!(answer.status(), 200);
        assert_eq!(answer.bytes(100).await.unwrap(), body.as_bytes());
    }
    assert_eq!(
        peers.lock().unwrap().len(),
        1,
        "one connection for 20 requests"
    );
    // A stream dropped before its end: that connection is given up, the next request works.
    let events = client.endpoint(&format!("http://{addr}/events")).unwrap();
    let mut stream = events
        .open(Method::GET, HeaderMap::new(), None, None, &cancel)
        .await
        .unwrap()
        .events(1024);
    assert_eq!(stream.next().await.unwrap().unwrap().data, "0");
    drop(stream);
    let again = events
        .open(Method::GET, HeaderMap::new(), None, None, &cancel)
        .await
        .unwrap()
        .events(1024)
        .next()
        .await
        .unwrap()
        .unwrap();
    assert_eq!(again.data, "0");
}

/// A raw HTTP/1.1 server: every connection gets `answer` for each request it sends (read up
/// to the blank line; the requests here have no body or a small one sent with the head), then
/// is closed if `close_after` says so. Returns the address and the number of connections.
async fn raw_server(
    answer: &'static [&'static [u8]],
    pause: Duration,
    close_after: bool,
) -> (SocketAddr, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let connections = std::sync::Arc::new(AtomicUsize::new(0));
    let counted = std::sync::Arc::clone(&connections);
    tokio::spawn(async move {
        loop {
            let (mut socket, _) = listener.accept().await.unwrap();
            counted.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(async move {
                let mut buf = vec![0u8; 8192];
                loop {
                    let mut seen = Vec::new();
                    while !seen.windows(4).any(|w| w == b"\r\n\r\n") {
                        match socket.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => seen.extend_from_slice(&buf[..n]),
                        }
                    }
                    for (i, part) in answer.iter().enumerate() {
                        if i > 0 {
                            tokio::time::sleep(pause).await;
                        }
                        if socket.write_all(part).await.is_err() {
                            return;
                        }
                    }
                    if close_after {
                        return;
                    }
                }
            });
        }
    });
    (addr, connections)
}

#[tokio::test]
async fn an_endpoint_reports_a_connection_closed_mid_answer_and_does_not_hang() {
    let cancel = CancellationToken::new();
    // A JSON answer announcing 100 bytes and sending 11 before the connection closes.
    let (addr, _) = raw_server(
        &[b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{\"partial\":"],
        Duration::ZERO,
        true,
    )
    .await;
    let json = local().endpoint(&format!("http://{addr}/mcp")).unwrap();
    let answer = json
        .open(Method::POST, json_headers(), None, None, &cancel)
        .await
        .unwrap();
    let err = tokio::time::timeout(Duration::from_secs(5), answer.bytes(1000))
        .await
        .expect("a cut answer ends at once")
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
    assert!(
        err.message()
            .starts_with(&format!("Request to http://{addr}/mcp failed: ")),
        "{}",
        err.message()
    );
    // An event stream (chunked) cut after its first event: the event, then the error.
    let (addr, _) = raw_server(
        &[b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\nb\r\ndata: one\n\n\r\n"],
        Duration::ZERO,
        true,
    )
    .await;
    let events = local().endpoint(&format!("http://{addr}/mcp")).unwrap();
    let mut stream = events
        .open(Method::POST, json_headers(), None, None, &cancel)
        .await
        .unwrap()
        .events(1024);
    let limit = Duration::from_secs(5);
    let first = tokio::time::timeout(limit, stream.next()).await.unwrap();
    assert_eq!(first.unwrap().unwrap().data, "one");
    let cut = tokio::time::timeout(limit, stream.next())
        .await
        .expect("a cut stream ends at once")
        .unwrap()
        .unwrap_err();
    assert_eq!(cut.kind(), ErrorKind::Unavailable, "{cut}");
    assert!(
        tokio::time::timeout(limit, stream.next())
            .await
            .unwrap()
            .is_none()
    );
}

#[tokio::test]
async fn an_endpoint_resends_a_request_its_idle_connection_could_not_take() {
    use std::sync::atomic::Ordering;
    // Each connection answers one request (keep-alive, by HTTP/1.1's default) and then the
    // server closes it: the next request finds its idle connection closed.
    let (addr, connections) = raw_server(
        &[b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}"],
        Duration::ZERO,
        true,
    )
    .await;
    let cancel = CancellationToken::new();
    let json = local().endpoint(&format!("http://{addr}/mcp")).unwrap();
    for _ in 0..3 {
        let answer = json
            .open(Method::POST, json_headers(), None, None, &cancel)
            .await
            .unwrap();
        assert_eq!(&answer.bytes(100).await.unwrap()[..], b"{}");
        // The server's close reaches the client before its next request.
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(connections.load(Ordering::SeqCst), 3);
}

/// Opens `pairs` × `per_pair` calls whose event streams are left at the answer, with `pause`
/// after each pair, against a server sending each stream's end `end_after` its answer; how many
/// connections the server saw.
async fn streams_left_at_the_answer(
    end_after: Duration,
    pairs: usize,
    per_pair: usize,
    pause: Duration,
) -> usize {
    let (addr, connections) = raw_server(
        &[
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\ne\r\ndata: answer\n\n\r\n",
            b"0\r\n\r\n",
        ],
        end_after,
        false,
    )
    .await;
    let cancel = CancellationToken::new();
    let events = local().endpoint(&format!("http://{addr}/mcp")).unwrap();
    for _ in 0..pairs {
        for _ in 0..per_pair {
            let mut stream = events
                .open(Method::POST, json_headers(), None, None, &cancel)
                .await
                .unwrap()
                .events(1024);
            assert_eq!(stream.next().await.unwrap().unwrap().data, "answer");
            // Left at the answer, as the lane does; the end arrives while the connection is idle.
            drop(stream);
        }
        tokio::time::sleep(pause).await;
    }
    connections.load(std::sync::atomic::Ordering::SeqCst)
}

#[tokio::test]
async fn an_endpoint_reuses_a_connection_whose_stream_was_left_before_its_last_chunk() {
    // One call at a time, each stream's end 20 ms after its answer.
    let connections =
        streams_left_at_the_answer(Duration::from_millis(20), 3, 1, Duration::from_millis(100))
            .await;
    assert_eq!(
        connections, 1,
        "the connection is taken again once the rest of its stream is read"
    );
}

#[tokio::test]
async fn a_connection_still_receiving_its_last_chunk_is_kept_for_a_later_request() {
    // The end of each stream comes 300 ms after its answer; two calls in a row, then a pause.
    let connections =
        streams_left_at_the_answer(Duration::from_millis(300), 3, 2, Duration::from_millis(500))
            .await;
    // The second call of each pair finds the first's connection still receiving: it opens a
    // second one and the first stays idle (closing it would make each pair open a new one).
    assert_eq!(connections, 2, "two connections serve every pair");
}
