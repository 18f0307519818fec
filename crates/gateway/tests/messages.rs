//! The messages people read when an upstream misbehaves, snapshotted: a server that cannot
//! start, the backoff, a process killed or exiting mid-call, a server stopped mid-call, an
//! entry this build cannot reach, and an elicitation refused because the client cannot answer.
#![cfg(test)]

mod common;

use std::path::Path;
use std::sync::Arc;

use common::*;
use serde_json::json;
use toolgate_gateway::ServerEntry;
use toolgate_gateway::upstream::ServerState;

/// Replaces what changes from run to run: temporary paths, seconds left, process ids.
fn stable(text: &str, upstream_bin: &Path) -> String {
    let text = text.replace(&upstream_bin.display().to_string(), "[TEST-UPSTREAM]");
    let mut out = String::new();
    let mut rest = text.as_str();
    while let Some(at) = rest.find("retrying in ") {
        out.push_str(&rest[..at + "retrying in ".len()]);
        rest = &rest[at + "retrying in ".len()..];
        let end = rest.find(" s").unwrap_or(0);
        out.push('N');
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

#[tokio::test]
async fn messages_people_read() {
    let bin = test_upstream();
    let mut transcript = String::new();
    let mut note = |title: &str, text: &str| {
        transcript.push_str(&format!("## {title}\n{}\n\n", stable(text, &bin)));
    };

    let (broken, _) = upstream("broken", entry(Path::new("/bin/false"), &[]));
    note(
        "start failure",
        &broken.start().await.unwrap_err().to_string(),
    );
    let _ = broken.tools().await;
    note("backoff", &broken.tools().await.unwrap_err().to_string());
    if let ServerState::Failed { error, .. } = broken.state() {
        note("failed state", &error);
    }

    let dir = tempfile::tempdir().unwrap();
    let record = dir.path().join("record.txt");
    let mut e = entry(&bin, &[]);
    e.env.insert(
        "TOOLGATE_TEST_UPSTREAM_RECORD".into(),
        record.display().to_string(),
    );
    let (up, _) = upstream("tests", e);
    let p = pipeline(&up);
    let pid = call(&p, "pid", json!({}))
        .await
        .data()
        .unwrap()
        .as_str()
        .unwrap()
        .to_owned();
    let slow = call(&p, "slow", json!({"seconds": 30}));
    let killer = async {
        eventually("the slow tool starts", || {
            recorded(&record).contains(&"slow started".to_owned())
        })
        .await;
        std::process::Command::new("kill")
            .args(["-9", &pid])
            .status()
            .unwrap();
    };
    let (r, ()) = tokio::join!(slow, killer);
    note("killed mid-call", r.error().unwrap());
    if let ServerState::Failed { error, stderr_tail } = up.state() {
        note(
            "failed state after the kill",
            &format!("{error}\nstderr: {stderr_tail}"),
        );
    }
    note(
        "exited mid-call",
        call(&p, "exit", json!({})).await.error().unwrap(),
    );

    // Two deaths in a row: the next start waits out the first backoff step.
    tokio::time::sleep(std::time::Duration::from_millis(600)).await;
    let slow = call(&p, "slow", json!({"seconds": 30}));
    let stopper = async {
        eventually("the slow tool starts again", || {
            recorded(&record)
                .iter()
                .filter(|l| *l == "slow started")
                .count()
                == 2
        })
        .await;
        up.stop().await;
    };
    let (r, ()) = tokio::join!(slow, stopper);
    note("stopped mid-call", r.error().unwrap());

    let r = p
        .call(request("elicit", json!({})).client(Arc::new(Client::default())))
        .await;
    note("elicitation refused", r.error().unwrap());

    let (remote, _) = upstream(
        "remote",
        ServerEntry {
            url: Some("https://mcp.example.com/mcp".into()),
            ..ServerEntry::default()
        },
    );
    note(
        "no http connector",
        &remote.tools().await.unwrap_err().to_string(),
    );

    insta::assert_snapshot!(transcript);
}
