//! Run budgets in the pipeline (over core's in-process ledger): `max_tool_calls`, `timeout_ms`,
//! the third failed attempt of a tool, `max_output_bytes`, a run of another principal, calls
//! without a run, and tighter-only overrides.
#![cfg(test)]

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use toolgate_core::{
    Budget, CallRequest, ErrorKind, MemoryRuns, Pipeline, PipelineBuilder, Principal, PrincipalId,
    Registry, RunBudgetStage, RunId, RunStatus, ToolBuilder, ToolError,
};

fn setup() -> (Pipeline, Arc<MemoryRuns>) {
    let registry = Arc::new(Registry::new());
    registry
        .register(Arc::new(
            ToolBuilder::new("echo", "Echoes its arguments.")
                .input_schema(json!({"type": "object", "properties": {"x": {"type": "integer"}}}))
                .handler(|args, _| async move { Ok(args) }),
        ))
        .unwrap();
    registry
        .register(Arc::new(
            ToolBuilder::new("broken", "Fails every time.")
                .input_schema(json!({"type": "object", "properties": {"x": {"type": "integer"}}}))
                .handler(|_, _| async { Err(ToolError::execution("it broke")) }),
        ))
        .unwrap();
    let runs = Arc::new(MemoryRuns::new());
    let pipeline = PipelineBuilder::new(registry)
        .stage(Arc::new(RunBudgetStage::new(
            Arc::clone(&runs) as Arc<dyn toolgate_core::RunLedger>
        )))
        .build();
    (pipeline, runs)
}

async fn call(pipeline: &Pipeline, tool: &str, run: Option<RunId>) -> toolgate_core::ToolResult {
    let mut request = CallRequest::new(tool, json!({"x": 1}));
    if let Some(run) = run {
        request = request.run(run);
    }
    pipeline.call(request).await
}

#[tokio::test]
async fn max_tool_calls_refuses_the_next_call_and_ends_the_run() {
    let (pipeline, runs) = setup();
    let run = runs.create(
        "local",
        Budget {
            max_tool_calls: Some(2),
            ..Budget::default()
        },
    );
    for _ in 0..2 {
        assert!(call(&pipeline, "echo", Some(run)).await.data().is_some());
    }
    let r = call(&pipeline, "echo", Some(run)).await;
    assert_eq!(r.error_kind(), Some(ErrorKind::BudgetExhausted));
    assert_eq!(r.attempts, 0, "refused before the tool ran");
    let message = r.error().unwrap();
    assert!(
        message.contains("2 of its 2 tool calls (max_tool_calls)"),
        "{message}"
    );
    assert!(
        message.contains("Summarise what you have and stop"),
        "{message}"
    );
    assert_eq!(runs.usage(run).unwrap().0, RunStatus::Exhausted);
    // Without a run nothing is counted or refused.
    for _ in 0..5 {
        assert!(call(&pipeline, "echo", None).await.data().is_some());
    }
}

#[tokio::test]
async fn timeout_ms_is_the_wall_clock_since_the_run_started() {
    let (pipeline, runs) = setup();
    let run = runs.create(
        "local",
        Budget {
            timeout_ms: Some(30),
            ..Budget::default()
        },
    );
    assert!(call(&pipeline, "echo", Some(run)).await.data().is_some());
    tokio::time::sleep(Duration::from_millis(50)).await;
    let r = call(&pipeline, "echo", Some(run)).await;
    assert_eq!(r.error_kind(), Some(ErrorKind::BudgetExhausted));
    assert!(
        r.error().unwrap().contains("(timeout_ms)"),
        "{}",
        r.error().unwrap()
    );
}

#[tokio::test]
async fn the_third_failed_attempt_of_a_tool_closes_that_tool_only() {
    let (pipeline, runs) = setup();
    let run = runs.create("local", Budget::default());
    for _ in 0..3 {
        let r = call(&pipeline, "broken", Some(run)).await;
        assert_eq!(r.error_kind(), Some(ErrorKind::Execution));
    }
    let r = call(&pipeline, "broken", Some(run)).await;
    assert_eq!(r.error_kind(), Some(ErrorKind::BudgetExhausted));
    let message = r.error().unwrap();
    assert!(
        message.contains("Change course: this tool failed 3 times"),
        "{message}"
    );
    assert!(message.contains("max_attempts_per_tool 3"), "{message}");
    // Other tools still run, and the run stays open.
    assert!(call(&pipeline, "echo", Some(run)).await.data().is_some());
    let (status, usage, failures) = runs.usage(run).unwrap();
    assert_eq!(status, RunStatus::Open);
    assert_eq!(usage.tool_calls, 4);
    assert_eq!(failures["broken"], 3);
}

#[tokio::test]
async fn max_output_bytes_counts_the_data_returned() {
    let (pipeline, runs) = setup();
    let run = runs.create(
        "local",
        Budget {
            max_output_bytes: Some(10),
            ..Budget::default()
        },
    );
    // {"x":1} is 7 bytes: the second call starts under the cap, the third does not.
    assert!(call(&pipeline, "echo", Some(run)).await.data().is_some());
    assert!(call(&pipeline, "echo", Some(run)).await.data().is_some());
    let r = call(&pipeline, "echo", Some(run)).await;
    assert_eq!(r.error_kind(), Some(ErrorKind::BudgetExhausted));
    assert!(
        r.error().unwrap().contains("14 bytes"),
        "{}",
        r.error().unwrap()
    );
}

#[tokio::test]
async fn a_run_of_another_principal_or_unknown_is_not_found() {
    let (pipeline, runs) = setup();
    let run = runs.create("alice", Budget::default());
    let r = call(&pipeline, "echo", Some(run)).await;
    assert_eq!(r.error_kind(), Some(ErrorKind::NotFound), "{:?}", r.error());
    assert!(r.error().unwrap().contains("POST /v1/runs"));
    let alice = Principal::new(PrincipalId::parse("alice").unwrap());
    let r = pipeline
        .call(
            CallRequest::new("echo", json!({}))
                .principal(alice)
                .run(run),
        )
        .await;
    assert!(r.data().is_some(), "{:?}", r.error());
    let r = call(&pipeline, "echo", Some(RunId::new())).await;
    assert_eq!(r.error_kind(), Some(ErrorKind::NotFound));
}

#[tokio::test]
async fn turns_are_counted_up_to_max_turns() {
    let (_, runs) = setup();
    let run = runs.create(
        "local",
        Budget {
            max_turns: Some(2),
            ..Budget::default()
        },
    );
    assert_eq!(runs.turn(run, "local").unwrap(), 1);
    assert_eq!(runs.turn(run, "local").unwrap(), 2);
    let e = runs.turn(run, "local").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::BudgetExhausted);
    assert!(e.message().contains("2 of its 2 model turns (max_turns)"));
}

#[test]
fn a_per_run_override_may_only_tighten() {
    let ceiling = Budget {
        max_tool_calls: Some(10),
        ..Budget::default()
    };
    let e = ceiling
        .tightened(&Budget {
            max_tool_calls: Some(11),
            ..Budget::default()
        })
        .unwrap_err();
    assert!(e.contains("max_tool_calls 11"), "{e}");
    assert!(e.contains("ceiling of 10"), "{e}");
    assert_eq!(
        ceiling
            .tightened(&Budget {
                max_tool_calls: Some(3),
                ..Budget::default()
            })
            .unwrap()
            .max_tool_calls,
        Some(3)
    );
}
