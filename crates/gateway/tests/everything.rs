//! The client side against a real MCP server nobody here wrote: `@modelcontextprotocol/server-
//! everything` from npm, run by Node over stdio. It must be installed under
//! `$TOOLGATE_TEST_NPM_DIR/node_modules` (scripts/test.sh does); without it the tests are
//! skipped with a message, and fail in CI (`CI=true`).
#![cfg(test)]

mod common;

use std::path::PathBuf;
use std::sync::Arc;

use common::*;
use serde_json::json;
use toolgate_core::{Content, ErrorKind, Role};
use toolgate_gateway::upstream::Upstream;

const PACKAGE: &str = "node_modules/@modelcontextprotocol/server-everything/dist/index.js";

/// The server's entry point, or `None` (after saying why) when the test is skipped.
fn entry_point() -> Option<PathBuf> {
    let ci = std::env::var("CI").is_ok_and(|v| v == "true");
    // A relative directory is the workspace root's (tests run in the crate's directory).
    let workspace = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let found = std::env::var_os("TOOLGATE_TEST_NPM_DIR")
        .map(|dir| workspace.join(dir).join(PACKAGE))
        .filter(|p| p.is_file());
    if found.is_none() {
        let message = "@modelcontextprotocol/server-everything is not installed: set TOOLGATE_TEST_NPM_DIR to a directory where `npm install --prefix DIR @modelcontextprotocol/server-everything` ran (scripts/test.sh does)";
        assert!(!ci, "{message}");
        eprintln!("skipped: {message}");
    }
    found
}

/// Node's absolute path, from PATH.
fn node() -> PathBuf {
    std::env::var_os("PATH")
        .and_then(|path| {
            std::env::split_paths(&path)
                .map(|dir| dir.join("node"))
                .find(|p| p.is_file())
        })
        .expect("node is on PATH")
}

fn everything() -> Option<Upstream> {
    let script = entry_point()?;
    let script = script.to_string_lossy();
    let (up, _) = upstream("everything", entry(&node(), &[&script, "stdio"]));
    Some(up)
}

#[tokio::test]
async fn lists_the_everything_servers_tools() {
    let Some(up) = everything() else { return };
    let tools = up.tools().await.unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
    for expected in [
        "echo",
        "get-sum",
        "get-structured-content",
        "get-annotated-message",
        "get-tiny-image",
        "get-resource-reference",
        "get-resource-links",
        "trigger-long-running-operation",
    ] {
        assert!(
            names.contains(&expected),
            "{expected} missing from {names:?}"
        );
    }
    let structured = tools
        .iter()
        .find(|t| t.name == "get-structured-content")
        .unwrap();
    assert_eq!(
        structured.output_schema.as_ref().unwrap()["properties"]["temperature"]["type"],
        json!("number")
    );
    let echo = tools.iter().find(|t| t.name == "echo").unwrap();
    assert_eq!(echo.title.as_deref(), Some("Echo Tool"));
    assert_eq!(
        echo.annotations.as_ref().unwrap()["readOnlyHint"],
        json!(true)
    );
    up.stop().await;
}

#[tokio::test]
async fn echo_sum_structured_content_images_and_resources() {
    let Some(up) = everything() else { return };
    let p = pipeline(&up);

    let r = call(&p, "echo", json!({"message": "hello"})).await;
    assert_eq!(r.data(), Some(&json!("Echo: hello")), "{:?}", r.error());

    let r = call(&p, "get-sum", json!({"a": 2, "b": 3})).await;
    assert_eq!(r.data(), Some(&json!("The sum of 2 and 3 is 5.")));

    let r = call(&p, "get-structured-content", json!({"location": "Chicago"})).await;
    assert_eq!(
        r.data(),
        Some(&json!({"temperature": 36, "conditions": "Light rain / drizzle", "humidity": 82}))
    );
    assert!(r.content.is_empty(), "{:?}", r.content);

    let r = call(
        &p,
        "get-annotated-message",
        json!({"messageType": "success", "includeImage": true}),
    )
    .await;
    // The message is annotated: it is attached as it came, not made a plain string.
    assert_eq!(r.data(), Some(&json!(null)), "{:?}", r.error());
    assert_eq!(
        serde_json::to_value(&r.content[0]).unwrap(),
        json!({"type": "text", "text": "Operation completed successfully", "annotations": {"priority": 0.7, "audience": ["user"]}})
    );
    assert!(
        matches!(&r.content[1..], [Content::Image { mime_type, annotations: Some(a), .. }]
            if mime_type == "image/png" && a.audience == Some(vec![Role::User]) && a.priority.map(|p| p.get()) == Some(0.5)),
        "{:?}",
        r.content
    );

    let r = call(&p, "get-tiny-image", json!({})).await;
    assert_eq!(r.data(), Some(&json!("Here's the image you requested:")));
    assert!(
        matches!(&r.content[..], [Content::Image { .. }, Content::Text { text, .. }] if text == "The image above is the MCP logo."),
        "{:?}",
        r.content
    );

    let r = call(
        &p,
        "get-resource-reference",
        json!({"resourceType": "Text", "resourceId": 1}),
    )
    .await;
    assert_eq!(r.error(), None);
    assert!(
        matches!(&r.content[..], [Content::Resource { resource, .. }, Content::Text { .. }] if resource.text.is_some()),
        "{:?}",
        r.content
    );

    let r = call(&p, "get-resource-links", json!({"count": 2})).await;
    assert_eq!(r.error(), None);
    let links: Vec<&str> = r
        .content
        .iter()
        .filter_map(|c| match c {
            Content::ResourceLink {
                name, description, ..
            } if description.is_some() => Some(name.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(
        links,
        ["Blob Resource 1", "Text Resource 2"],
        "{:?}",
        r.content
    );
    up.stop().await;
}

#[tokio::test]
async fn a_long_running_operation_reports_progress() {
    let Some(up) = everything() else { return };
    let p = pipeline(&up);
    let progress = Arc::new(Progress::default());
    let r = p
        .call(
            request(
                "trigger-long-running-operation",
                json!({"duration": 1, "steps": 4}),
            )
            .progress(progress.clone()),
        )
        .await;
    assert_eq!(
        r.data(),
        Some(&json!(
            "Long running operation completed. Duration: 1 seconds, Steps: 4."
        )),
        "{:?}",
        r.error()
    );
    let reports = progress.0.lock().unwrap().clone();
    assert_eq!(
        reports,
        [
            (1.0, Some(4.0), None),
            (2.0, Some(4.0), None),
            (3.0, Some(4.0), None),
            (4.0, Some(4.0), None),
        ]
    );
    up.stop().await;
}

#[tokio::test]
async fn sampling_and_elicitation_are_relayed_to_a_client_that_can() {
    let Some(up) = everything() else { return };
    let p = pipeline(&up);
    let client = Arc::new(Client {
        can: true,
        ..Client::default()
    });
    let r = p
        .call(
            request("trigger-sampling-request", json!({"prompt": "Say hi"})).client(client.clone()),
        )
        .await;
    let text = r.data().and_then(|d| d.as_str()).unwrap_or_default();
    assert!(text.contains("\"model\": \"test-model\""), "{r:?}");
    assert!(text.contains("Hi!"), "{text}");

    let r = p
        .call(request("trigger-elicitation-request", json!({})).client(client.clone()))
        .await;
    let text = r.data().and_then(|d| d.as_str()).unwrap_or_default();
    assert!(
        text.contains("User provided the requested information"),
        "{r:?}"
    );
    assert!(
        r.content
            .iter()
            .any(|c| matches!(c, Content::Text { text, .. } if text.contains("- Name: Ada"))),
        "{:?}",
        r.content
    );

    // A client that cannot: the upstream's tool fails with toolgate's reason.
    let r = p
        .call(
            request("trigger-sampling-request", json!({"prompt": "Say hi"}))
                .client(Arc::new(Client::default())),
        )
        .await;
    assert!(
        matches!(r.error_kind(), Some(ErrorKind::Execution)),
        "{r:?}"
    );
    assert!(
        r.error()
            .unwrap_or_default()
            .contains("toolgate's client cannot answer sampling requests"),
        "{:?}",
        r.error()
    );
    up.stop().await;
}
