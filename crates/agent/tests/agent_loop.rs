//! The agent loop as a library: `toolgate_agent::run` over a real runtime (SQLite store, the
//! built-ins) against the fake model APIs, with the entries observed as they happen and the end
//! states read from the returned transcript.
#![cfg(test)]

use std::sync::Arc;

use serde_json::json;
use toolgate_agent::{AgentRequest, ApiKey, DEFAULT_MAX_TOKENS, End, Entry, ModelSpec, Provider};
use toolgate_core::Budget;
use toolgate_runtime::{Runtime, RuntimeOptions};
use toolgate_store::DbUrl;
use toolgate_test_support::fake_llm::{Api, FakeModel, KEY, Turn};

async fn runtime(dir: &tempfile::TempDir) -> Arc<Runtime> {
    Runtime::open(RuntimeOptions {
        db: Some(DbUrl::Sqlite(dir.path().join("toolgate.db"))),
        root: Some(dir.path().to_path_buf()),
        ..RuntimeOptions::default()
    })
    .await
    .unwrap()
}

fn request(runtime: &Runtime, model: &FakeModel, spec: &str, budget: Budget) -> AgentRequest {
    let model_spec: ModelSpec = spec.parse().unwrap();
    AgentRequest {
        key: ApiKey::from_env(model_spec.provider(), |_| Some(KEY.into())).unwrap(),
        model: model_spec,
        base_url: Some(model.base_url().parse().unwrap()),
        prompt: "What is 6 * 7?".into(),
        system: Some("You are terse.".into()),
        principal: runtime.principal(None).unwrap(),
        budget,
        approval: None,
        origin: None,
        tools: Some(vec!["calculator".into()]),
        max_tokens: DEFAULT_MAX_TOKENS,
        cancel: Default::default(),
        cancelled_by: Default::default(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_library_run_answers_and_each_entry_is_observed_as_it_happens() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = runtime(&dir).await;
    for (api, spec) in [
        (Api::OpenAi, "openai:fake"),
        (Api::Anthropic, "anthropic:fake"),
    ] {
        let model = FakeModel::start(
            api,
            Arc::new(|turn, _| match turn {
                0 => Turn::calls(&[("calculator", json!({"expression": "6 * 7"}))]),
                _ => Turn::answer("42"),
            }),
        );
        let mut seen = Vec::new();
        let t = toolgate_agent::run(
            &runtime,
            request(&runtime, &model, spec, Budget::default()),
            |e| seen.push(e.clone()),
        )
        .await
        .unwrap();
        assert!(
            matches!(&t.end, End::Answer { text } if text == "42"),
            "{:?}",
            t.end
        );
        assert_eq!(seen.len(), t.entries.len());
        assert!(matches!(&seen[2], Entry::ToolResults { results, .. } if results[0].ok));
        assert_eq!(t.consumption.turns, 2);
        assert_eq!(t.consumption.tool_calls, 1);
        assert_eq!(
            t.model.provider(),
            if api == Api::OpenAi {
                Provider::OpenAi
            } else {
                Provider::Anthropic
            }
        );
        // The system prompt goes where each API takes it.
        let first = &model.requests()[0];
        match api {
            Api::OpenAi => assert_eq!(first["messages"][0]["role"], "system"),
            Api::Anthropic => assert_eq!(first["system"], "You are terse."),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tighter_attempts_budget_stops_the_loop_sooner() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = runtime(&dir).await;
    let model = FakeModel::start(
        Api::Anthropic,
        Arc::new(|_, _| Turn::calls(&[("calculator", json!({"expression": "1 /"}))])),
    );
    let budget = Budget {
        max_attempts_per_tool: Some(2),
        ..Budget::default()
    };
    let t = toolgate_agent::run(
        &runtime,
        request(&runtime, &model, "anthropic:fake", budget),
        |_| {},
    )
    .await
    .unwrap();
    match &t.end {
        End::BudgetExhausted { budget, message } => {
            assert_eq!(*budget, "max_attempts_per_tool");
            assert!(message.contains("failed 2 times"), "{message}");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(model.requests().len(), 2);
    assert_eq!(t.consumption.failures.get("calculator"), Some(&2));
    // Looser than the ceiling (3 by default): refused before any request.
    let looser = Budget {
        max_attempts_per_tool: Some(5),
        ..Budget::default()
    };
    let e = toolgate_agent::run(
        &runtime,
        request(&runtime, &model, "anthropic:fake", looser),
        |_| {},
    )
    .await
    .unwrap_err();
    assert!(e.is_usage() && e.to_string().contains("looser"), "{e}");
    assert_eq!(model.requests().len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_any_max_turns_a_run_gets_the_default() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = runtime(&dir).await;
    let model = FakeModel::start(
        Api::OpenAi,
        Arc::new(|turn, _| {
            Turn::calls(&[("calculator", json!({"expression": format!("{turn} + 1")}))])
        }),
    );
    let t = toolgate_agent::run(
        &runtime,
        request(&runtime, &model, "openai:fake", Budget::default()),
        |_| {},
    )
    .await
    .unwrap();
    assert!(
        matches!(&t.end, End::BudgetExhausted { budget, .. } if *budget == "max_turns"),
        "{:?}",
        t.end
    );
    assert_eq!(
        t.consumption.budget.max_turns,
        Some(toolgate_agent::DEFAULT_MAX_TURNS)
    );
    assert_eq!(
        model.requests().len(),
        toolgate_agent::DEFAULT_MAX_TURNS as usize
    );
}
