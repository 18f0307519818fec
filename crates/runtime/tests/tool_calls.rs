//! The provider round trip end to end: a recorded response from each provider
//! (`crates/export/tests/provider-responses/`) → `toolgate_export`'s parser → the production
//! runtime with the built-ins (`calculator` and `read_file` read, `write_file` writes) →
//! the provider's tool-result message, snapshot-tested; `scripts/export-sdk.sh`
//! (`tests/export-sdk/check_results.py`) validates these snapshots, with the responses they
//! answer, as the official Python SDKs' types. And the
//! order: read-only calls overlap (a barrier only two concurrent calls pass), the others run one
//! at a time in the model's order.
#![cfg(test)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use toolgate_core::{Effect, ErrorKind, ParamType, Parameter, PreApproved, ToolBuilder, ToolError};
use toolgate_export::{ToolCall, ToolOutcome, anthropic_calls, gemini_calls, openai_calls};
use toolgate_runtime::{Runtime, RuntimeOptions};
use toolgate_store::DbUrl;
use toolgate_test_support::mcp_fixtures::repo_root;

fn options(dir: &tempfile::TempDir) -> RuntimeOptions {
    RuntimeOptions {
        db: Some(DbUrl::Sqlite(dir.path().join("toolgate.db"))),
        root: Some(dir.path().to_path_buf()),
        ..RuntimeOptions::default()
    }
}

fn recorded(name: &str) -> Value {
    let path = repo_root()
        .join("crates/export/tests/provider-responses")
        .join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap()
}

/// Parses `file`, runs its calls through a fresh runtime (write_file approved up front, as the
/// CLI's `--yes` does) and checks the outcomes every recorded scenario shares.
async fn run(
    file: &str,
    parse: fn(&Value) -> Result<Vec<ToolCall>, toolgate_export::CallsError>,
) -> Vec<ToolOutcome> {
    let dir = tempfile::tempdir().unwrap();
    let runtime = Runtime::open(options(&dir)).await.unwrap();
    let response = recorded(file);
    let calls = parse(&response).unwrap();
    let outcomes = runtime
        .run_tool_calls(calls, |request| request.approval(Arc::new(PreApproved)))
        .await;
    let summary: Vec<_> = outcomes
        .iter()
        .map(|o| (o.call.name.as_str(), o.result.error_kind()))
        .collect();
    assert_eq!(
        summary,
        [
            ("calculator", None),
            ("calculator", None),
            ("write_file", None),
            ("read_file", None),
            ("calculator", Some(ErrorKind::Validation)),
            ("get_weather", Some(ErrorKind::NotFound)),
        ],
        "{outcomes:#?}"
    );
    assert_eq!(
        outcomes[0].result.data().unwrap()["result"].as_f64(),
        Some(391.0)
    );
    assert_eq!(
        outcomes[1].result.data().unwrap()["result"].as_f64(),
        Some(1024.0)
    );
    // The read comes after the write the model asked for first, so it sees the file.
    assert_eq!(outcomes[3].result.data().unwrap()["content"], "391");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("result.txt")).unwrap(),
        "391"
    );
    runtime.drain(Duration::from_secs(1)).await;
    outcomes
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openai_chat_completions_round_trip() {
    let outcomes = run("openai-chat.json", openai_calls::parse_chat_completion).await;
    let messages = Value::Array(openai_calls::chat_tool_messages(&outcomes).unwrap());
    insta::assert_json_snapshot!("openai_chat", messages);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openai_responses_round_trip() {
    let outcomes = run("openai-responses.json", openai_calls::parse_responses).await;
    let items = Value::Array(openai_calls::responses_outputs(&outcomes).unwrap());
    insta::assert_json_snapshot!("openai_responses", items);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anthropic_messages_round_trip() {
    let outcomes = run("anthropic-messages.json", anthropic_calls::parse_message).await;
    let message = anthropic_calls::tool_results_message(&outcomes).unwrap();
    insta::assert_json_snapshot!("anthropic", message);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gemini_round_trip() {
    let outcomes = run(
        "gemini-generate-content.json",
        gemini_calls::parse_generate_content,
    )
    .await;
    let content = gemini_calls::function_responses(&outcomes);
    insta::assert_json_snapshot!("gemini", content);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_overlap_and_the_others_run_alone_in_the_models_order() {
    let dir = tempfile::tempdir().unwrap();
    let parts = Runtime::prepare(options(&dir)).await.unwrap();
    let log = Arc::new(Mutex::new(Vec::<String>::new()));
    // Two calls pass the barrier only together: a read that ran alone times out.
    let barrier = Arc::new(tokio::sync::Barrier::new(2));
    let (l, b) = (log.clone(), barrier.clone());
    let meet = ToolBuilder::new(
        "meet_partner",
        "Waits until a second call of this tool arrives. Use to test concurrency.",
    )
    .effect(Effect::Read)
    .param(
        Parameter::new("who", ParamType::String)
            .description("Who waits")
            .required(),
    )
    .handler(move |args, _ctx| {
        let (log, barrier) = (l.clone(), b.clone());
        async move {
            let who = args["who"].as_str().unwrap_or_default().to_owned();
            log.lock().unwrap().push(format!("read {who}"));
            tokio::time::timeout(Duration::from_secs(10), barrier.wait())
                .await
                .map_err(|_| {
                    ToolError::new(
                        ErrorKind::Execution,
                        format!("{who} met nobody: the reads did not overlap"),
                    )
                })?;
            Ok(json!({"met": who}))
        }
    });
    let l = log.clone();
    let step = ToolBuilder::new(
        "record_step",
        "Records a numbered step. Use to test that writes run in order, one at a time.",
    )
    .effect(Effect::Write)
    .requires_confirmation(false)
    .param(
        Parameter::new("n", ParamType::Integer)
            .description("The step")
            .required(),
    )
    .handler(move |args, _ctx| {
        let log = l.clone();
        async move {
            let n = args["n"].as_i64().unwrap_or_default();
            log.lock().unwrap().push(format!("start {n}"));
            // Long enough for an overlapping call to start, if one could.
            tokio::time::sleep(Duration::from_millis(50)).await;
            log.lock().unwrap().push(format!("end {n}"));
            Ok(json!({"step": n}))
        }
    });
    parts.registry.register(Arc::new(meet)).unwrap();
    parts.registry.register(Arc::new(step)).unwrap();
    let runtime = Runtime::assemble(parts);

    let call = |name: &str, args: Value| {
        ToolCall::from_json_value(Some(format!("c-{}", args)), name.into(), args)
    };
    let calls = vec![
        call("meet_partner", json!({"who": "a"})),
        call("meet_partner", json!({"who": "b"})),
        call("record_step", json!({"n": 3})),
        call("record_step", json!({"n": 1})),
        call("record_step", json!({"n": 2})),
        call("meet_partner", json!({"who": "c"})),
        call("meet_partner", json!({"who": "d"})),
    ];
    let outcomes = runtime.run_tool_calls(calls, |r| r).await;
    for o in &outcomes {
        assert!(o.result.is_ok(), "{}: {:?}", o.call.name, o.result.error());
    }
    let ids: Vec<_> = outcomes
        .iter()
        .map(|o| o.call.id.clone().unwrap())
        .collect();
    assert_eq!(ids[2], "c-{\"n\":3}", "outcomes keep the model's order");
    let log = log.lock().unwrap().clone();
    let mut first_reads = log[..2].to_vec();
    first_reads.sort();
    assert_eq!(first_reads, ["read a", "read b"], "{log:?}");
    assert_eq!(
        log[2..8],
        ["start 3", "end 3", "start 1", "end 1", "start 2", "end 2"],
        "writes one at a time, in the model's order, after the reads before them"
    );
    let mut last_reads = log[8..].to_vec();
    last_reads.sort();
    assert_eq!(
        last_reads,
        ["read c", "read d"],
        "reads after a write wait for it: {log:?}"
    );
    runtime.drain(Duration::from_secs(1)).await;
}
