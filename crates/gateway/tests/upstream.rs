//! The client side of upstream servers against a real MCP server process (the test upstream
//! binary, built on rmcp's server side): listing, calls through the pipeline with every content
//! type, progress, logs, cancellation seen upstream, elicitation and sampling relayed or
//! refused, a process killed mid-call, restart, backoff, idle stop and no process left behind.
#![cfg(test)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use serde_json::json;
use toolgate_core::{CancellationToken, Content, EmbeddedResource, ErrorKind, LogLevel};
use toolgate_gateway::upstream::{ServerState, UpstreamEvent};
use toolgate_gateway::{GatewayErrorKind, ServerEntry};

/// An entry for the test upstream recording into a fresh file.
fn recording() -> (ServerEntry, tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let record = dir.path().join("record.txt");
    let mut e = entry(&test_upstream(), &[]);
    e.env.insert(
        "TOOLGATE_TEST_UPSTREAM_RECORD".into(),
        record.display().to_string(),
    );
    (e, dir, record)
}

async fn pid(p: &toolgate_core::Pipeline) -> u32 {
    let r = call(p, "pid", json!({})).await;
    r.data().unwrap().as_str().unwrap().parse().unwrap()
}

#[tokio::test]
async fn lists_tools_with_their_schemas_and_starts_once() {
    let (e, _dir, record) = recording();
    let (up, spawner) = upstream("tests", e);
    let mut events = up.subscribe();
    assert_eq!(up.state(), ServerState::Stopped);
    let tools = up.tools().await.unwrap();
    assert_eq!(up.state(), ServerState::Ready);
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
    assert!(
        names.contains(&"echo") && names.contains(&"media"),
        "{names:?}"
    );
    let add = tools.iter().find(|t| t.name == "add").unwrap();
    assert_eq!(add.title.as_deref(), Some("Add"));
    assert_eq!(add.description.as_deref(), Some("Adds two numbers."));
    assert_eq!(add.input_schema["required"], json!(["a", "b"]));
    assert_eq!(
        add.output_schema.as_ref().unwrap()["properties"]["sum"],
        json!({"type": "number"})
    );
    let echo = tools.iter().find(|t| t.name == "echo").unwrap();
    assert_eq!(echo.annotations, Some(json!({"readOnlyHint": true})));
    // Concurrent users share the one process.
    let (a, b) = tokio::join!(up.tools(), up.tools());
    assert_eq!(a.unwrap(), b.unwrap());
    assert_eq!(spawner.launches.lock().unwrap().len(), 1);
    assert_eq!(
        recorded(&record)
            .iter()
            .filter(|l| l.starts_with("started"))
            .count(),
        1
    );
    assert_eq!(
        events.recv().await.unwrap(),
        UpstreamEvent::State(ServerState::Starting)
    );
    assert_eq!(
        events.recv().await.unwrap(),
        UpstreamEvent::State(ServerState::Ready)
    );
}

#[tokio::test]
async fn an_upstream_declaring_logging_is_asked_for_every_level_once_per_start() {
    // One connection serves every caller and toolgate's server filters by each caller's own
    // level, so the upstream must send its debug messages too.
    let (e, _dir, record) = recording();
    let (up, _spawner) = upstream("levels", e);
    up.tools().await.unwrap();
    let asked = |lines: &[String]| {
        lines
            .iter()
            .filter(|l| l.starts_with("set_level"))
            .cloned()
            .collect::<Vec<_>>()
    };
    assert_eq!(asked(&recorded(&record)), ["set_level \"debug\""]);
    up.restart().await.unwrap();
    assert_eq!(
        asked(&recorded(&record)),
        ["set_level \"debug\"", "set_level \"debug\""]
    );
}

#[tokio::test]
async fn the_stdio_launch_carries_only_the_entrys_environment() {
    let (mut e, _dir, record) = recording();
    e.env.insert("ONLY_THIS".into(), "yes".into());
    e.args = vec!["--flag".into()];
    e.isolation = None;
    let (up, spawner) = upstream("env-check", e);
    let p = pipeline(&up);
    let r = p
        .call(
            request("echo", json!({"text": "hi"}))
                .auth(serde_json::from_value(json!({"token": "caller-secret"})).unwrap()),
        )
        .await;
    assert!(r.is_ok(), "{:?}", r.error());
    let launch = spawner.launches.lock().unwrap()[0].clone();
    assert_eq!(launch.label, "env-check");
    assert_eq!(launch.args, ["--flag"]);
    assert_eq!(launch.level, toolgate_core::Isolation::Standard);
    let mut names: Vec<&str> = launch.env.iter().map(|(k, _)| k.as_str()).collect();
    names.sort_unstable();
    assert_eq!(names, ["ONLY_THIS", "TOOLGATE_TEST_UPSTREAM_RECORD"]);
    assert!(!format!("{launch:?}").contains("caller-secret"));
    // The request carried the arguments and a progress token, nothing of the caller's.
    let lines = recorded(&record);
    let echo = lines.iter().find(|l| l.starts_with("echo meta")).unwrap();
    let meta: serde_json::Value =
        serde_json::from_str(echo["echo meta ".len()..].split(" args ").next().unwrap()).unwrap();
    assert_eq!(
        meta.as_object().unwrap().keys().collect::<Vec<_>>(),
        ["progressToken"]
    );
    assert!(echo.ends_with(r#"args {"text":"hi"}"#), "{echo}");
    assert!(!lines.iter().any(|l| l.contains("caller-secret")));
}

#[tokio::test]
async fn results_keep_text_structured_content_and_every_content_block() {
    let (e, _dir, _record) = recording();
    let (up, _) = upstream("tests", e);
    let p = pipeline(&up);

    let r = call(&p, "echo", json!({"text": "hello"})).await;
    assert_eq!(r.data(), Some(&json!("hello")), "{:?}", r.error());
    assert!(r.content.is_empty());

    let r = call(&p, "add", json!({"a": 1, "b": 2})).await;
    assert_eq!(r.data(), Some(&json!({"sum": 3.0})));
    assert!(
        r.content.is_empty(),
        "the JSON text block is the data's own"
    );

    let r = call(&p, "media", json!({})).await;
    assert_eq!(r.data(), Some(&json!({"kind": "media"})));
    let png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==";
    assert_eq!(
        r.content,
        vec![
            Content::text("a picture and a sound"),
            Content::image(png, "image/png"),
            Content::audio(
                "UklGRiQAAABXQVZFZm10IBAAAAABAAEAQB8AAIA+AAACABAAZGF0YQAAAAA=",
                "audio/wav"
            ),
            Content::resource_text("test://doc", "text/plain", "a document"),
            Content::Resource {
                resource: EmbeddedResource {
                    uri: "test://bin".into(),
                    mime_type: Some("application/octet-stream".into()),
                    text: None,
                    blob: Some("AAEC".into()),
                    meta: None,
                },
                annotations: None,
                meta: None,
            },
            Content::ResourceLink {
                uri: "test://linked".into(),
                name: "linked".into(),
                title: None,
                description: None,
                mime_type: Some("text/plain".into()),
                size: None,
                icons: None,
                annotations: None,
                meta: None,
            },
        ]
    );

    let r = call(&p, "image_first", json!({})).await;
    assert_eq!(r.data(), Some(&json!(null)));
    assert_eq!(
        r.content,
        vec![
            Content::image(png, "image/png"),
            Content::text("after the image")
        ]
    );
}

#[tokio::test]
async fn annotations_meta_and_resource_links_are_kept() {
    let (e, _dir, _record) = recording();
    let (up, _) = upstream("tests", e);
    let p = pipeline(&up);
    let r = call(&p, "annotated", json!({})).await;
    // The first text block carries annotations: it is no plain string, so every block is
    // attached and the data is null (toolgate's MCP server then emits the blocks alone).
    assert_eq!(r.data(), Some(&json!(null)), "{:?}", r.error());
    let png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==";
    assert_eq!(
        serde_json::to_value(&r.content).unwrap(),
        json!([
            {"type": "text", "text": "for the model", "annotations": {"audience": ["assistant"], "priority": 0.3, "lastModified": "2025-01-12T15:00:58Z"}},
            {"type": "image", "data": png, "mimeType": "image/png", "annotations": {"audience": ["user"], "priority": 0.7}},
            {"type": "resource_link", "uri": "test://linked", "name": "linked", "title": "Linked", "description": "A linked file", "mimeType": "text/plain", "size": 42,
             "icons": [{"src": "https://example.com/icon.png", "mimeType": "image/png", "sizes": ["48x48"], "theme": "dark"}],
             "annotations": {"priority": 1.0}, "_meta": {"example.com/origin": "test"}},
            {"type": "resource", "resource": {"uri": "test://doc", "mimeType": "text/plain", "text": "a document", "_meta": {"version": 2}},
             "_meta": {"example.com/note": "embedded"}, "annotations": {"audience": ["user", "assistant"]}}
        ])
    );
    let Content::Image { annotations, .. } = &r.content[1] else {
        panic!("{:?}", r.content)
    };
    let priority = annotations.as_ref().unwrap().priority.unwrap();
    assert_eq!(priority.get(), 0.7);
}

#[tokio::test]
async fn is_error_is_an_execution_error_with_the_upstreams_text() {
    let (e, _dir, _record) = recording();
    let (up, _) = upstream("tests", e);
    let p = pipeline(&up);
    let r = call(&p, "fail", json!({})).await;
    assert_eq!(r.error_kind(), Some(ErrorKind::Execution));
    assert_eq!(r.error(), Some("the upstream failed on purpose"));
    // An unknown tool is the upstream's own refusal, as a validation error.
    let r = call(&p, "nope", json!({})).await;
    assert_eq!(r.error_kind(), Some(ErrorKind::Validation));
    assert!(r.error().unwrap().contains("no tool named nope"));
    // The server is still up.
    assert_eq!(up.state(), ServerState::Ready);
}

// On the multi-threaded runtime, as in production, where notification tasks run in parallel.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_and_log_messages_reach_the_caller() {
    let (e, _dir, _record) = recording();
    let (up, _) = upstream("tests", e);
    let p = pipeline(&up);
    let progress = Arc::new(Progress::default());
    let client = Arc::new(Client::default());
    let r = p
        .call(
            request("progress", json!({"steps": 3}))
                .progress(progress.clone())
                .client(client.clone()),
        )
        .await;
    assert_eq!(r.data(), Some(&json!("3 steps done")));
    // Every report reached the caller before the result did (toolgate's MCP server closes a
    // call's channel to its client with the result).
    let reports = progress.0.lock().unwrap().clone();
    assert_eq!(
        reports,
        [
            (1.0, Some(3.0), Some("step 1".to_owned())),
            (2.0, Some(3.0), Some("step 2".to_owned())),
            (3.0, Some(3.0), Some("step 3".to_owned())),
        ]
    );

    let r = p
        .call(request("log", json!({})).client(client.clone()))
        .await;
    assert_eq!(r.data(), Some(&json!("logged")));
    assert_eq!(
        client.logs.lock().unwrap()[0],
        (
            LogLevel::Warning,
            Some("test-upstream".to_owned()),
            json!("careful")
        )
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_calls_on_the_fast_lane_each_get_their_progress_before_their_result() {
    let (e, _dir, record) = recording();
    let (up, _) = upstream("tests", e);
    let p = pipeline(&up);
    // Calls to a stdio upstream go on the fast lane: the request id and progress token are
    // toolgate's own (`tg-<n>`), not rmcp's numbers.
    assert!(call_echo(&p).await);
    let lines = recorded(&record);
    let echo = lines.iter().find(|l| l.starts_with("echo meta")).unwrap();
    assert!(echo.contains(r#"{"progressToken":"tg-"#), "{echo}");
    let calls = (1..=8u32).map(|steps| {
        let p = &p;
        async move {
            let progress = Arc::new(Progress::default());
            let r = p
                .call(request("progress", json!({"steps": steps})).progress(progress.clone()))
                .await;
            (steps, r, progress)
        }
    });
    for (steps, r, progress) in futures_util::future::join_all(calls).await {
        assert_eq!(r.data(), Some(&json!(format!("{steps} steps done"))));
        let want: Vec<_> = (1..=steps)
            .map(|s| {
                (
                    f64::from(s),
                    Some(f64::from(steps)),
                    Some(format!("step {s}")),
                )
            })
            .collect();
        assert_eq!(*progress.0.lock().unwrap(), want, "{steps} steps");
    }
}

#[tokio::test]
async fn cancellation_reaches_the_upstream() {
    let (e, _dir, record) = recording();
    let (up, _) = upstream("tests", e);
    let p = pipeline(&up);
    let cancel = CancellationToken::new();
    let call = p.call(request("slow", json!({"seconds": 30})).cancel_token(cancel.clone()));
    let waiter = async {
        eventually("the slow tool starts", || {
            recorded(&record).contains(&"slow started".to_owned())
        })
        .await;
        cancel.cancel();
    };
    let (r, ()) = tokio::join!(call, waiter);
    assert_eq!(r.error_kind(), Some(ErrorKind::Cancelled));
    eventually("the upstream sees the cancellation", || {
        recorded(&record).contains(&"slow cancelled".to_owned())
    })
    .await;
    // The connection is still good.
    let r = call_echo(&p).await;
    assert!(r, "echo after a cancellation");
}

async fn call_echo(p: &toolgate_core::Pipeline) -> bool {
    call(p, "echo", json!({"text": "again"})).await.data() == Some(&json!("again"))
}

#[tokio::test]
async fn a_process_killed_mid_call_is_unavailable_and_the_next_call_restarts_it() {
    let (e, _dir, record) = recording();
    let (up, spawner) = upstream("tests", e);
    let p = pipeline(&up);
    let first = pid(&p).await;
    let slow = call(&p, "slow", json!({"seconds": 30}));
    let killer = async {
        eventually("the slow tool starts", || {
            recorded(&record).contains(&"slow started".to_owned())
        })
        .await;
        let status = std::process::Command::new("kill")
            .args(["-9", &first.to_string()])
            .status()
            .unwrap();
        assert!(status.success());
    };
    let (r, ()) = tokio::join!(slow, killer);
    assert_eq!(r.error_kind(), Some(ErrorKind::Unavailable));
    let message = r.error().unwrap();
    assert!(
        message.starts_with("Server tests is unavailable: it exited"),
        "{message}"
    );
    assert!(message.contains("test upstream: started"), "{message}");
    match up.state() {
        ServerState::Failed { error, stderr_tail } => {
            assert!(error.starts_with("Server tests exited"), "{error}");
            assert_eq!(stderr_tail, "test upstream: started");
        }
        other => panic!("state {other:?}"),
    }
    // The next call starts a new process and works.
    assert!(call_echo(&p).await);
    assert_eq!(up.state(), ServerState::Ready);
    let second = pid(&p).await;
    assert_ne!(first, second);
    assert!(!alive(first));
    assert_eq!(spawner.launches.lock().unwrap().len(), 2);

    // A tool that makes the process exit: its own stderr line is in the error.
    let r = call(&p, "exit", json!({})).await;
    assert_eq!(r.error_kind(), Some(ErrorKind::Unavailable));
    assert!(
        r.error().unwrap().contains("exiting on purpose"),
        "{:?}",
        r.error()
    );
    assert!(
        r.error().unwrap().contains("exit status: 3"),
        "{:?}",
        r.error()
    );
    assert!(call_echo(&p).await);
}

#[tokio::test]
async fn a_server_that_cannot_start_backs_off() {
    let (up, spawner) = upstream("broken", entry(std::path::Path::new("/bin/false"), &[]));
    let e = up.start().await.unwrap_err();
    assert_eq!(e.kind(), GatewayErrorKind::Unavailable);
    assert!(
        e.to_string().starts_with("Server broken could not start"),
        "{e}"
    );
    assert!(matches!(up.state(), ServerState::Failed { .. }));
    // The first failure is retried at once, the second waits.
    let p = pipeline(&up);
    let r = call(&p, "echo", json!({})).await;
    assert_eq!(r.error_kind(), Some(ErrorKind::Unavailable));
    assert_eq!(spawner.launches.lock().unwrap().len(), 2);
    let r = call(&p, "echo", json!({})).await;
    assert_eq!(r.error_kind(), Some(ErrorKind::Unavailable));
    assert!(
        r.error().unwrap().contains("retrying in"),
        "{:?}",
        r.error()
    );
    assert_eq!(spawner.launches.lock().unwrap().len(), 2);
    tokio::time::sleep(Duration::from_millis(600)).await;
    let _ = call(&p, "echo", json!({})).await;
    assert_eq!(spawner.launches.lock().unwrap().len(), 3);
}

#[tokio::test]
async fn a_url_entry_without_an_http_connector_is_unavailable() {
    let e = ServerEntry {
        url: Some("http://127.0.0.1:9/mcp".into()),
        ..ServerEntry::default()
    };
    let (up, _) = upstream("remote", e);
    let err = up.tools().await.unwrap_err();
    assert_eq!(err.kind(), GatewayErrorKind::Unavailable);
    assert!(err.to_string().contains("cannot reach yet"), "{err}");
}

#[tokio::test]
async fn an_idle_server_stops_and_comes_back() {
    let (mut e, _dir, _record) = recording();
    e.idle_timeout_secs = Some(1);
    let (up, _) = upstream("tests", e);
    let p = pipeline(&up);
    let first = pid(&p).await;
    eventually("the idle server stops", || {
        up.state() == ServerState::Stopped
    })
    .await;
    eventually("its process is gone", || !alive(first)).await;
    let second = pid(&p).await;
    assert_ne!(first, second);
}

#[tokio::test]
async fn stop_and_drop_leave_no_process() {
    let (e, _dir, _record) = recording();
    let (up, _) = upstream("tests", e);
    let p = pipeline(&up);
    let first = pid(&p).await;
    up.stop().await;
    assert_eq!(up.state(), ServerState::Stopped);
    assert!(!alive(first), "stop returns once the process is gone");
    up.restart().await.unwrap();
    let second = pid(&p).await;
    assert_ne!(first, second);
    drop(p);
    drop(up);
    eventually("the dropped upstream's process is gone", || !alive(second)).await;
}

#[tokio::test]
async fn a_call_in_flight_when_the_server_is_stopped_is_unavailable() {
    let (e, _dir, record) = recording();
    let (up, _) = upstream("tests", e);
    let p = pipeline(&up);
    let slow = call(&p, "slow", json!({"seconds": 30}));
    let stopper = async {
        eventually("the slow tool starts", || {
            recorded(&record).contains(&"slow started".to_owned())
        })
        .await;
        up.stop().await;
    };
    let (r, ()) = tokio::join!(slow, stopper);
    assert_eq!(r.error_kind(), Some(ErrorKind::Unavailable));
    assert!(
        r.error().unwrap().contains("it was stopped"),
        "{:?}",
        r.error()
    );
}

#[tokio::test]
async fn elicitation_and_sampling_are_relayed_when_the_client_can() {
    let (e, _dir, _record) = recording();
    let (up, _) = upstream("tests", e);
    let p = pipeline(&up);
    let client = Arc::new(Client {
        can: true,
        ..Client::default()
    });
    let r = p
        .call(request("elicit", json!({})).client(client.clone()))
        .await;
    let answer: serde_json::Value =
        serde_json::from_str(r.data().unwrap().as_str().unwrap()).unwrap();
    assert_eq!(
        answer,
        json!({"action": "accept", "content": {"name": "Ada"}})
    );
    let r = p
        .call(request("sample", json!({})).client(client.clone()))
        .await;
    let reply: serde_json::Value =
        serde_json::from_str(r.data().unwrap().as_str().unwrap()).unwrap();
    assert_eq!(reply["content"], json!({"type": "text", "text": "Hi!"}));
    assert_eq!(reply["model"], json!("test-model"));
    assert_eq!(*client.asked.lock().unwrap(), ["Your name?", "Say hi"]);
}

#[tokio::test]
async fn elicitation_and_sampling_are_refused_when_the_client_cannot() {
    let (e, _dir, _record) = recording();
    let (up, _) = upstream("tests", e);
    let p = pipeline(&up);
    let client = Arc::new(Client::default());
    let r = p
        .call(request("elicit", json!({})).client(client.clone()))
        .await;
    assert_eq!(r.error_kind(), Some(ErrorKind::Execution));
    assert!(
        r.error()
            .unwrap()
            .contains("toolgate's client cannot answer elicitation requests"),
        "{:?}",
        r.error()
    );
    // No client at all (a REST call).
    let r = call(&p, "sample", json!({})).await;
    assert_eq!(r.error_kind(), Some(ErrorKind::Execution));
    assert!(
        r.error()
            .unwrap()
            .contains("the call did not come from an MCP client"),
        "{:?}",
        r.error()
    );
}

#[tokio::test]
async fn a_changed_tool_list_is_reported_and_listed_anew() {
    let (e, _dir, _record) = recording();
    let (up, _) = upstream("tests", e);
    let p = pipeline(&up);
    let before = up.tools().await.unwrap();
    let mut events = up.subscribe();
    let r = call(&p, "change_tools", json!({})).await;
    assert!(r.is_ok());
    let event = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            match events.recv().await.unwrap() {
                UpstreamEvent::ToolsChanged => return,
                UpstreamEvent::State(_) => {}
                _ => {}
            }
        }
    })
    .await;
    assert!(event.is_ok(), "no ToolsChanged event");
    let after = up.tools().await.unwrap();
    let echo = |tools: &[toolgate_gateway::UpstreamTool]| {
        tools
            .iter()
            .find(|t| t.name == "echo")
            .unwrap()
            .description
            .clone()
    };
    assert_eq!(echo(&before).as_deref(), Some("Echoes the text back."));
    assert_eq!(
        echo(&after).as_deref(),
        Some("Echoes the text back. Changed.")
    );

    // A restart that lists other tools than the last listing is a change too.
    let r = call(&p, "exit", json!({})).await;
    assert_eq!(r.error_kind(), Some(ErrorKind::Unavailable));
    let mut events = up.subscribe();
    assert!(call_echo(&p).await);
    let mut seen = Vec::new();
    while let Ok(event) = events.try_recv() {
        seen.push(event);
    }
    assert_eq!(
        seen,
        [
            UpstreamEvent::State(ServerState::Starting),
            UpstreamEvent::State(ServerState::Ready),
            UpstreamEvent::ToolsChanged
        ]
    );
    let restarted = up.tools().await.unwrap();
    assert_eq!(echo(&restarted).as_deref(), Some("Echoes the text back."));
}

#[tokio::test]
async fn log_messages_reach_no_one_when_their_call_is_unclear() {
    let (e, _dir, record) = recording();
    let (up, _) = upstream("tests", e);
    let p = pipeline(&up);
    let slow_client = Arc::new(Client::default());
    let log_client = Arc::new(Client::default());
    let cancel = CancellationToken::new();
    let slow = p.call(
        request("slow", json!({"seconds": 30}))
            .cancel_token(cancel.clone())
            .client(slow_client.clone()),
    );
    let logger = async {
        eventually("the slow tool starts", || {
            recorded(&record).contains(&"slow started".to_owned())
        })
        .await;
        // Two calls in flight and stdio names neither: the log goes to neither caller.
        let r = p
            .call(request("log", json!({})).client(log_client.clone()))
            .await;
        cancel.cancel();
        r
    };
    let (_, logged) = tokio::join!(slow, logger);
    assert_eq!(logged.data(), Some(&json!("logged")));
    assert!(log_client.logs.lock().unwrap().is_empty());
    assert!(slow_client.logs.lock().unwrap().is_empty());
}

#[tokio::test]
async fn a_url_entry_runs_over_the_connectors_transport_and_reconnects() {
    use rmcp::RoleClient;
    use rmcp::transport::async_rw::AsyncRwTransport;
    use toolgate_gateway::upstream::{Connector, HttpConnector, HttpTarget, Upstream};

    // The connector's transport is the test upstream's pipes: the lifecycle of a connection
    // without a process of its own (what Streamable HTTP gives), without an HTTP server.
    let targets: Arc<std::sync::Mutex<Vec<HttpTarget>>> = Arc::default();
    let children: Arc<std::sync::Mutex<Vec<tokio::process::Child>>> = Arc::default();
    let (seen, kept) = (targets.clone(), children.clone());
    let http = HttpConnector::new(move |target: HttpTarget| {
        seen.lock().unwrap().push(target);
        let kept = kept.clone();
        async move {
            let mut child = tokio::process::Command::new(test_upstream())
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::null())
                .kill_on_drop(true)
                .spawn()
                .unwrap();
            let (stdout, stdin) = (child.stdout.take().unwrap(), child.stdin.take().unwrap());
            kept.lock().unwrap().push(child);
            Ok(AsyncRwTransport::<RoleClient, _, _>::new(stdout, stdin))
        }
    });
    let e = ServerEntry {
        url: Some("https://mcp.example.com/mcp".into()),
        headers: [("X-Api-Key".to_owned(), "entry-secret".to_owned())].into(),
        idle_timeout_secs: Some(1),
        ..ServerEntry::default()
    };
    let connector = Connector {
        stdio: Arc::new(TestSpawner::default()),
        http: Some(http),
    };
    let up = Upstream::new(server_name("remote"), e, connector);
    let p = pipeline(&up);
    let r = p
        .call(
            request("echo", json!({"text": "over the wire"}))
                .auth(serde_json::from_value(json!({"token": "caller-secret"})).unwrap()),
        )
        .await;
    assert_eq!(r.data(), Some(&json!("over the wire")), "{:?}", r.error());
    {
        let targets = targets.lock().unwrap();
        assert_eq!(targets.len(), 1);
        assert_eq!(targets[0].label, "remote");
        assert_eq!(targets[0].url, "https://mcp.example.com/mcp");
        assert_eq!(
            targets[0].headers,
            [("X-Api-Key".to_owned(), "entry-secret".to_owned())].into()
        );
    }
    // The idle timeout is for processes: a remote connection stays.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(up.state(), ServerState::Ready);

    // The far end goes away: the state says so and the next call reconnects.
    children.lock().unwrap()[0].start_kill().unwrap();
    eventually("the lost connection shows", || {
        matches!(up.state(), ServerState::Failed { error, .. } if error.contains("ended the connection"))
    })
    .await;
    assert!(call_echo(&p).await);
    assert_eq!(targets.lock().unwrap().len(), 2);
    up.stop().await;
}
