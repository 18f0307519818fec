//! Deadlines and cancellation of sandboxed calls: they land within a small margin and leave no
//! child, zombie or descriptor behind in the executor's process.
#![cfg(test)]

mod common;

use std::time::{Duration, Instant};

use common::{Harness, command_tool};
use serde_json::json;
use toolgate_core::{CallRequest, CancellationToken, ErrorKind};

fn open_fds() -> Vec<String> {
    let mut fds: Vec<String> = std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .flatten()
        .map(|e| {
            format!(
                "{} -> {}",
                e.file_name().to_string_lossy(),
                std::fs::read_link(e.path())
                    .map(|p| p.display().to_string())
                    .unwrap_or_default()
            )
        })
        .collect();
    fds.sort();
    fds
}

/// Children of this process (any thread), from /proc.
fn children() -> Vec<String> {
    let mut out = Vec::new();
    for task in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
        let text = std::fs::read_to_string(task.path().join("children")).unwrap_or_default();
        out.extend(text.split_whitespace().map(str::to_owned));
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deadlines_and_cancellation_are_prompt_and_leave_nothing_behind() {
    let h = Harness::new();
    for level in ["standard", "strict", "restricted"] {
        let def = command_tool(&format!("sleep_{level}"), level, "/bin/sleep", &["30"], "")
            .replace("timeout_ms = 3000", "timeout_ms = 1000");
        h.add_toml(&def);
    }
    // Warm up (first spawn pays for page cache and cgroup setup).
    let _ = h.call("sleep_standard", json!({})).await;
    let fds_before = open_fds();
    let mut margins = Vec::new();
    for level in ["standard", "strict", "restricted"] {
        for _ in 0..3 {
            let t = Instant::now();
            let r = h.call(&format!("sleep_{level}"), json!({})).await;
            let took = t.elapsed();
            assert_eq!(r.error_kind(), Some(ErrorKind::Timeout), "{r:?}");
            margins.push(took.saturating_sub(Duration::from_millis(1000)));
        }
        let cancel = CancellationToken::new();
        let trigger = cancel.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(300)).await;
            trigger.cancel();
        });
        let t = Instant::now();
        let r = h
            .pipeline
            .call(CallRequest::new(format!("sleep_{level}"), json!({})).cancel_token(cancel))
            .await;
        assert_eq!(r.error_kind(), Some(ErrorKind::Cancelled), "{r:?}");
        margins.push(t.elapsed().saturating_sub(Duration::from_millis(300)));
    }
    margins.sort();
    let median = margins[margins.len() / 2];
    let worst = margins[margins.len() - 1];
    println!(
        "deadline/cancel margin over {} calls: median {median:?}, worst {worst:?}",
        margins.len()
    );
    assert!(worst < Duration::from_millis(500), "worst margin {worst:?}");
    // A cancelled call's future may be dropped by the pipeline; its cleanup (kill, reap by the
    // runtime, pipes closing) settles within moments.
    for _ in 0..100 {
        if open_fds() == fds_before && children().is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(open_fds(), fds_before, "descriptors leaked");
    assert!(children().is_empty(), "children left: {:?}", children());
    // The calls' cgroups are gone too.
    let mine = format!("call-{}-", std::process::id());
    for root in [
        "/sys/fs/cgroup/pids/toolgate",
        "/sys/fs/cgroup/memory/toolgate",
        "/sys/fs/cgroup/toolgate",
    ] {
        let left: Vec<_> = std::fs::read_dir(root)
            .into_iter()
            .flatten()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with(&mine))
            .collect();
        assert!(left.is_empty(), "cgroups left in {root}: {left:?}");
    }
}
