//! Runs in the store, on each backend: tool calls counted atomically (two instances racing for
//! the last calls of a run take exactly the budget), failed attempts per tool, wall time, turns,
//! a run another principal cannot use, and counters kept across a reopen (a restart); the
//! pipeline's budget stage over the store, refusing the third failed attempt of a tool; and the
//! leases on what an instance reserved: a crashed instance's calls and attempts come back after
//! its lease, a live one keeps them while it renews, a paused one notices it lost them.
#![cfg(test)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::TestDb;
use serde_json::json;
use toolgate_core::{
    Budget, CallId, CallRequest, ErrorKind, Exhausted, PipelineBuilder, Registry, RunBudgetStage,
    RunLedger, RunStatus, Settled, ToolBuilder, ToolError,
};
use toolgate_store::{Admission, Store, StoreOptions};

on_each_backend! {
    tool_calls_are_counted_and_kept_across_a_reopen => counted_body;
    two_instances_never_overspend_a_run => race_body;
    failed_attempts_time_and_turns_are_budgets => other_budgets_body;
    the_budget_stage_over_the_store_refuses_the_third_failure => stage_body;
    many_concurrent_calls_on_two_instances_never_pass_the_budgets => concurrent_body;
    an_approved_call_runs_in_the_run_it_was_asked_in => approval_body;
    cached_counters_reserve_blocks_and_give_them_back => blocks_body;
    a_crash_loses_reserved_calls_and_never_grants_them_twice => crash_body;
    every_call_of_a_long_run_is_recorded_once => many_calls_body;
    a_crashed_instances_attempts_come_back_after_its_lease => crashed_attempts_body;
    a_live_instance_keeps_its_lease_while_it_renews => renewal_body;
    an_instance_whose_lease_was_taken_back_stops_using_it => paused_body;
}

/// The run lease of the lease tests: short, so they wait a second or two, not the default 5 s.
const LEASE: Duration = Duration::from_millis(500);

/// Two instances on `db`'s database, as two toolgate processes would be (each its own run
/// cache, sweeper and instance id): `db`'s store and another one when `lease` is `None`, else
/// two new ones whose run leases last `lease`.
async fn two_instances(db: &TestDb, lease: Option<Duration>) -> (Store, Store) {
    let options = StoreOptions {
        run_lease: lease,
        ..db.options.clone()
    };
    let a = match lease {
        None => db.store.clone(),
        Some(_) => Store::open(&db.url, &options).await.unwrap(),
    };
    (a, Store::open(&db.url, &options).await.unwrap())
}

fn failed(tool_failed: bool) -> Settled {
    Settled {
        failed: tool_failed,
        output_bytes: if tool_failed { 0 } else { 10 },
    }
}

async fn counted_body(db: &TestDb) {
    let store = &db.store;
    let budget = Budget {
        max_tool_calls: Some(2),
        ..Budget::default()
    };
    let run = store.create_run("agent", &budget).await.unwrap();
    assert_eq!(
        run.budget.max_attempts_per_tool,
        Some(3),
        "the default is stored"
    );
    for n in 1..=2 {
        assert_eq!(
            store.admit_run_call(run.id, "agent", "t").await.unwrap(),
            Admission::Counted(n)
        );
        store
            .settle_run_call(run.id, "t", CallId::new(), failed(false))
            .await
            .unwrap();
    }
    // Another principal: not found, as if the run did not exist.
    assert_eq!(
        store.admit_run_call(run.id, "intruder", "t").await.unwrap(),
        Admission::NotFound
    );
    // A restart: a new store on the same database keeps the counters and refuses the third call.
    let reopened = db.reopen().await;
    let again = reopened.run(run.id).await.unwrap().unwrap();
    assert_eq!(again.tool_calls, 2);
    assert_eq!(again.output_bytes, 20);
    assert_eq!(reopened.run_calls(run.id).await.unwrap().len(), 2);
    assert_eq!(
        reopened.admit_run_call(run.id, "agent", "t").await.unwrap(),
        Admission::Refused(Exhausted::ToolCalls { used: 2, max: 2 })
    );
    let after = store.run(run.id).await.unwrap().unwrap();
    assert_eq!(after.status, RunStatus::Exhausted);
    // The list carries each run's failures per tool, as reading one run does.
    let failing = store.create_run("agent", &Budget::default()).await.unwrap();
    for tool in ["t", "t", "u"] {
        store
            .admit_run_call(failing.id, "agent", tool)
            .await
            .unwrap();
        store
            .settle_run_call(failing.id, tool, CallId::new(), failed(true))
            .await
            .unwrap();
    }
    let listed = store.runs(Some("agent"), 10).await.unwrap();
    assert_eq!(listed.len(), 2);
    assert_eq!(listed[0].id, failing.id, "newest first");
    assert_eq!(
        listed[0].failures,
        [("t".to_owned(), 2), ("u".to_owned(), 1)].into()
    );
    assert!(listed[1].failures.is_empty());
    assert_eq!(
        store.runs(Some("agent"), 1).await.unwrap()[0].failures,
        listed[0].failures
    );
    assert!(store.runs(Some("other"), 10).await.unwrap().is_empty());
    reopened.close().await;
}

async fn race_body(db: &TestDb) {
    let (a, b) = two_instances(db, None).await;
    let run = a
        .create_run(
            "agent",
            &Budget {
                max_tool_calls: Some(5),
                // None of these calls settles: each holds one attempt of the tool.
                max_attempts_per_tool: Some(20),
                ..Budget::default()
            },
        )
        .await
        .unwrap();
    let mut tasks = Vec::new();
    for i in 0..20 {
        let store: Store = if i % 2 == 0 { a.clone() } else { b.clone() };
        tasks.push(tokio::spawn(async move {
            store.admit_run_call(run.id, "agent", "t").await.unwrap()
        }));
    }
    let mut counted = 0;
    for task in tasks {
        if matches!(task.await.unwrap(), Admission::Counted(_)) {
            counted += 1;
        }
    }
    assert_eq!(counted, 5, "exactly the budget, across two instances");
    assert_eq!(a.run(run.id).await.unwrap().unwrap().tool_calls, 5);
    b.close().await;
}

async fn other_budgets_body(db: &TestDb) {
    let store = &db.store;
    let run = store.create_run("agent", &Budget::default()).await.unwrap();
    for _ in 0..3 {
        assert!(matches!(
            store
                .admit_run_call(run.id, "agent", "flaky")
                .await
                .unwrap(),
            Admission::Counted(_)
        ));
        store
            .settle_run_call(run.id, "flaky", CallId::new(), failed(true))
            .await
            .unwrap();
    }
    match store
        .admit_run_call(run.id, "agent", "flaky")
        .await
        .unwrap()
    {
        Admission::Refused(Exhausted::Attempts { tool, failed, max }) => {
            assert_eq!((tool.as_str(), failed, max), ("flaky", 3, 3));
        }
        other => panic!("{other:?}"),
    }
    // Only that tool: the run goes on.
    assert!(matches!(
        store
            .admit_run_call(run.id, "agent", "other")
            .await
            .unwrap(),
        Admission::Counted(_)
    ));
    assert_eq!(
        store.run(run.id).await.unwrap().unwrap().failures["flaky"],
        3
    );

    let timed = store
        .create_run(
            "agent",
            &Budget {
                // Long enough for the first call on a loaded machine (20 ms was not).
                timeout_ms: Some(1000),
                ..Budget::default()
            },
        )
        .await
        .unwrap();
    assert!(matches!(
        store.admit_run_call(timed.id, "agent", "t").await.unwrap(),
        Admission::Counted(1)
    ));
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert!(matches!(
        store.admit_run_call(timed.id, "agent", "t").await.unwrap(),
        Admission::Refused(Exhausted::Timeout { max: 1000, .. })
    ));

    let turns = store
        .create_run(
            "agent",
            &Budget {
                max_turns: Some(1),
                ..Budget::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(
        store.run_turn(turns.id, "agent").await.unwrap(),
        Admission::Counted(1)
    );
    assert_eq!(
        store.run_turn(turns.id, "agent").await.unwrap(),
        Admission::Refused(Exhausted::Turns { used: 1, max: 1 })
    );
    assert_eq!(
        store.run_turn(turns.id, "intruder").await.unwrap(),
        Admission::NotFound
    );
    assert!(
        !store.finish_run(turns.id, "agent").await.unwrap(),
        "already exhausted"
    );
    let open = store.create_run("agent", &Budget::default()).await.unwrap();
    assert!(store.finish_run(open.id, "agent").await.unwrap());
    assert_eq!(
        store.admit_run_call(open.id, "agent", "t").await.unwrap(),
        Admission::Refused(Exhausted::Closed {
            status: RunStatus::Finished
        })
    );
}

async fn stage_body(db: &TestDb) {
    let registry = Arc::new(Registry::new());
    registry
        .register(Arc::new(
            ToolBuilder::new("always_fails", "Fails every time.")
                .handler(|_, _| async { Err(ToolError::execution("it broke")) }),
        ))
        .unwrap();
    let pipeline = PipelineBuilder::new(registry)
        .stage(Arc::new(RunBudgetStage::new(
            Arc::new(db.store.clone()) as Arc<dyn toolgate_core::RunLedger>
        )))
        .build();
    let run = db
        .store
        .create_run("local", &Budget::default())
        .await
        .unwrap();
    for _ in 0..3 {
        let r = pipeline
            .call(CallRequest::new("always_fails", json!({})).run(run.id))
            .await;
        assert_eq!(r.error_kind(), Some(ErrorKind::Execution));
    }
    let r = pipeline
        .call(CallRequest::new("always_fails", json!({})).run(run.id))
        .await;
    assert_eq!(r.error_kind(), Some(ErrorKind::BudgetExhausted));
    let message = r.error().unwrap();
    assert!(
        message.contains("Change course: this tool failed 3 times"),
        "{message}"
    );
    // A call without a run is not counted.
    let r = pipeline
        .call(CallRequest::new("always_fails", json!({})))
        .await;
    assert_eq!(r.error_kind(), Some(ErrorKind::Execution));
    assert_eq!(db.store.run_calls(run.id).await.unwrap().len(), 3);
}

/// A pipeline over `store` with the budget stage, a tool that fails and one that works (both
/// slow enough for calls to overlap), and `send` that needs an approval (durable, in `store`).
fn pipeline_on(store: &Store) -> toolgate_core::Pipeline {
    let registry = Arc::new(Registry::new());
    registry
        .register(Arc::new(
            ToolBuilder::new("always_fails", "Fails every time.").handler(|_, _| async {
                tokio::time::sleep(Duration::from_millis(5)).await;
                Err(ToolError::execution("it broke"))
            }),
        ))
        .unwrap();
    registry
        .register(Arc::new(ToolBuilder::new("works", "Works.").handler(
            |_, _| async {
                tokio::time::sleep(Duration::from_millis(2)).await;
                Ok(json!({"ok": true}))
            },
        )))
        .unwrap();
    registry
        .register(Arc::new(
            ToolBuilder::new("send", "Needs a yes.")
                .requires_confirmation(true)
                .handler(|_, _| async { Ok(json!({"sent": true})) }),
        ))
        .unwrap();
    PipelineBuilder::new(registry)
        .stage(Arc::new(RunBudgetStage::new(
            Arc::new(store.clone()) as Arc<dyn toolgate_core::RunLedger>
        )))
        .approval(Arc::new(toolgate_store::DurableApproval::new(
            store.clone(),
            Duration::from_secs(60),
            Arc::new(|a| format!("approve {}", a.id)),
        )))
        .build()
}

async fn concurrent_body(db: &TestDb) {
    let (a, b) = two_instances(db, None).await;
    let pipelines = [pipeline_on(&a), pipeline_on(&b)];
    let pipelines = Arc::new(pipelines);
    // Forty calls at once of a failing tool, half on each instance: exactly three fail (the
    // attempts budget), the rest are refused, never run.
    let failing = db
        .store
        .create_run("local", &Budget::default())
        .await
        .unwrap();
    // Forty calls at once of a working tool: exactly ten run (max_tool_calls).
    let capped = db
        .store
        .create_run(
            "local",
            &Budget {
                max_tool_calls: Some(10),
                ..Budget::default()
            },
        )
        .await
        .unwrap();
    let mut tasks = Vec::new();
    for i in 0..80 {
        let pipelines = Arc::clone(&pipelines);
        let (tool, run) = if i % 2 == 0 {
            ("always_fails", failing.id)
        } else {
            ("works", capped.id)
        };
        tasks.push(tokio::spawn(async move {
            let r = pipelines[(i / 2) % 2]
                .call(CallRequest::new(tool, json!({})).run(run))
                .await;
            (tool, r.error_kind())
        }));
    }
    let (mut failed, mut ran, mut refused) = (0, 0, 0);
    for task in tasks {
        match task.await.unwrap() {
            ("always_fails", Some(ErrorKind::Execution)) => failed += 1,
            ("works", None) => ran += 1,
            (_, Some(ErrorKind::BudgetExhausted)) => refused += 1,
            other => panic!("unexpected outcome {other:?}"),
        }
    }
    assert_eq!(
        failed, 3,
        "the tool ran and failed exactly max_attempts_per_tool times"
    );
    assert_eq!(ran, 10, "exactly max_tool_calls ran");
    assert_eq!(refused, 80 - 3 - 10);
    let failing = db.store.run(failing.id).await.unwrap().unwrap();
    assert_eq!(failing.failures["always_fails"], 3);
    assert_eq!(failing.tool_calls, 3, "refused calls are not counted");
    let capped = db.store.run(capped.id).await.unwrap().unwrap();
    assert_eq!(capped.tool_calls, 10);
    assert_eq!(capped.status, RunStatus::Exhausted);
    assert_eq!(db.store.run_calls(capped.id).await.unwrap().len(), 10);
    b.close().await;
}

async fn approval_body(db: &TestDb) {
    let store = &db.store;
    let pipeline = pipeline_on(store);
    let run = store
        .create_run(
            "local",
            &Budget {
                max_tool_calls: Some(3),
                ..Budget::default()
            },
        )
        .await
        .unwrap();
    let asked = pipeline
        .call(CallRequest::new("send", json!({})).run(run.id))
        .await;
    assert_eq!(asked.error_kind(), Some(ErrorKind::ConfirmationRequired));
    let id = asked.approval_id.clone().unwrap();
    assert_eq!(
        store.approval(&id).await.unwrap().unwrap().run,
        Some(run.id)
    );
    let waiting = store.run(run.id).await.unwrap().unwrap();
    assert!(
        waiting.failures.get("send").copied().unwrap_or(0) == 0,
        "waiting for a yes is not a failure of the tool"
    );
    store
        .decide_approval(&id, true, "alice", None)
        .await
        .unwrap();
    let (_, result) =
        toolgate_store::run_approved(store, &pipeline, &id, toolgate_core::Principal::local())
            .await
            .unwrap()
            .unwrap();
    assert_eq!(result.error_kind(), None, "{result:?}");
    let after = store.run(run.id).await.unwrap().unwrap();
    assert_eq!(
        after.tool_calls, 1,
        "the approved call is counted in the run it was asked in, once: when it runs"
    );
    let calls = store.run_calls(run.id).await.unwrap();
    assert_eq!(
        calls.last().unwrap().call_id.to_string(),
        store.approval(&id).await.unwrap().unwrap().call_id
    );

    // Asked in a run that is finished by the time it is approved: refused, never run.
    let asked = pipeline
        .call(CallRequest::new("send", json!({})).run(run.id))
        .await;
    let id = asked.approval_id.clone().unwrap();
    store
        .decide_approval(&id, true, "alice", None)
        .await
        .unwrap();
    assert!(store.finish_run(run.id, "local").await.unwrap());
    let (done, result) =
        toolgate_store::run_approved(store, &pipeline, &id, toolgate_core::Principal::local())
            .await
            .unwrap()
            .unwrap();
    assert_eq!(result.error_kind(), Some(ErrorKind::BudgetExhausted));
    assert!(
        result.error().unwrap().contains("is finished"),
        "{result:?}"
    );
    assert_eq!(done.run, Some(run.id));
    assert_eq!(store.run(run.id).await.unwrap().unwrap().tool_calls, 1);
}

/// Admits one call of `tool` in `run` through `store`'s cached ledger and settles it as a
/// success; the admission's error kind, if refused.
async fn ledger_call(store: &Store, run: toolgate_core::RunId) -> Result<(), ToolError> {
    let call = CallId::new();
    RunLedger::admit(store, run, "agent", "t", call).await?;
    RunLedger::settle(store, run, "t", call, failed(false)).await;
    Ok(())
}

async fn blocks_body(db: &TestDb) {
    let (a, b) = two_instances(db, None).await;
    let run = a
        .create_run(
            "agent",
            &Budget {
                max_tool_calls: Some(100),
                ..Budget::default()
            },
        )
        .await
        .unwrap();
    for _ in 0..10 {
        ledger_call(&a, run.id).await.unwrap();
    }
    // Another instance sees a's block (a quarter of the budget) reserved, its calls not yet
    // reported: at most one block behind.
    let seen = b.run(run.id).await.unwrap().unwrap();
    assert_eq!(seen.reserved_calls, 25, "{seen:?}");
    assert_eq!(seen.tool_calls, 0);
    // Read through a, the store shows a's calls exactly.
    let seen = a.run(run.id).await.unwrap().unwrap();
    assert_eq!((seen.tool_calls, seen.reserved_calls), (10, 15));
    assert_eq!(a.run_calls(run.id).await.unwrap().len(), 10);
    assert_eq!(seen.output_bytes, 100);
    // b takes what is free; then the last calls are a's (a uses one more, so it is not idle):
    // b is asked to retry, not told the run is spent.
    for _ in 0..75 {
        ledger_call(&b, run.id).await.unwrap();
    }
    ledger_call(&a, run.id).await.unwrap();
    let e = ledger_call(&b, run.id).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::RateLimited, "{e:?}");
    assert!(
        e.message()
            .contains("are reserved by calls still running or by other toolgate instances"),
        "{e:?}"
    );
    assert!(e.message().contains("used 85 of its 100"), "{e:?}");
    // a goes idle: its sweeper gives the rest of its block back, and b makes exactly the rest.
    tokio::time::sleep(Duration::from_millis(2000)).await;
    let seen = b.run(run.id).await.unwrap().unwrap();
    assert_eq!((seen.tool_calls, seen.reserved_calls), (86, 0), "{seen:?}");
    for _ in 0..14 {
        ledger_call(&b, run.id).await.unwrap();
    }
    let e = ledger_call(&b, run.id).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::BudgetExhausted, "{e:?}");
    assert!(e.message().contains("100 of its 100 tool calls"), "{e:?}");
    let done = a.run(run.id).await.unwrap().unwrap();
    assert_eq!((done.tool_calls, done.reserved_calls), (100, 0));
    assert_eq!(done.status, RunStatus::Exhausted);
    assert_eq!(a.run_calls(run.id).await.unwrap().len(), 100);

    // Closing an instance gives its reservations and held attempts back at once.
    let other = a
        .create_run(
            "agent",
            &Budget {
                max_tool_calls: Some(40),
                max_attempts_per_tool: Some(1),
                ..Budget::default()
            },
        )
        .await
        .unwrap();
    ledger_call(&b, other.id).await.unwrap();
    let seen = a.run(other.id).await.unwrap().unwrap();
    assert_eq!(seen.reserved_calls, 10);
    b.close().await;
    let seen = a.run(other.id).await.unwrap().unwrap();
    assert_eq!((seen.tool_calls, seen.reserved_calls), (1, 0), "{seen:?}");
    // The one attempt of `t` b held is free again: a may take it.
    ledger_call(&a, other.id).await.unwrap();
}

async fn crash_body(db: &TestDb) {
    let (crashed, b) = two_instances(db, Some(LEASE)).await;
    let run = b
        .create_run(
            "agent",
            &Budget {
                max_tool_calls: Some(8),
                ..Budget::default()
            },
        )
        .await
        .unwrap();
    // An instance reserves a block of two, uses one and dies without giving it back.
    ledger_call(&crashed, run.id).await.unwrap();
    drop(crashed);
    // While its lease runs, the other instance makes what is free and is asked to retry for
    // the rest (it may be a live instance's).
    let mut made = 0;
    let e = loop {
        match ledger_call(&b, run.id).await {
            Ok(()) => made += 1,
            Err(e) => break e,
        }
    };
    assert_eq!(made, 6);
    assert_eq!(e.kind(), ErrorKind::RateLimited, "{e:?}");
    // Once the lease has expired, the next sync takes it back: its two calls count as used (the
    // one made was not reported: lost with the crash, never granted twice), and the run ends
    // with its budget spent, exactly.
    tokio::time::sleep(LEASE * 2).await;
    let e = ledger_call(&b, run.id).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::BudgetExhausted, "{e:?}");
    assert!(e.message().contains("8 of its 8 tool calls"), "{e:?}");
    let seen = b.run(run.id).await.unwrap().unwrap();
    assert_eq!((seen.tool_calls, seen.reserved_calls), (8, 0), "{seen:?}");
    assert_eq!(seen.status, RunStatus::Exhausted);
    assert_eq!(b.run_calls(run.id).await.unwrap().len(), 6);
    assert_eq!(db.count("SELECT COUNT(*) FROM run_leases").await, 0);
    b.close().await;
}

async fn crashed_attempts_body(db: &TestDb) {
    let (crashed, b) = two_instances(db, Some(LEASE)).await;
    let run = b
        .create_run(
            "agent",
            &Budget {
                max_attempts_per_tool: Some(2),
                ..Budget::default()
            },
        )
        .await
        .unwrap();
    // An instance holds both attempts of `t` (two calls running) and dies.
    for _ in 0..2 {
        RunLedger::admit(&crashed, run.id, "agent", "t", CallId::new())
            .await
            .unwrap();
    }
    drop(crashed);
    let e = ledger_call(&b, run.id).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::RateLimited, "{e:?}");
    assert!(e.message().contains("2 calls still running"), "{e:?}");
    // After its lease the attempts are free again: the tool may fail twice, exactly.
    tokio::time::sleep(LEASE * 2).await;
    for _ in 0..2 {
        let call = CallId::new();
        RunLedger::admit(&b, run.id, "agent", "t", call)
            .await
            .unwrap();
        RunLedger::settle(&b, run.id, "t", call, failed(true)).await;
    }
    let e = ledger_call(&b, run.id).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::BudgetExhausted, "{e:?}");
    assert!(e.message().contains("failed 2 times"), "{e:?}");
    assert_eq!(b.run(run.id).await.unwrap().unwrap().failures["t"], 2);
    assert_eq!(
        db.count("SELECT COUNT(*) FROM run_tools WHERE failures + in_flight > 2")
            .await,
        0
    );
    b.close().await;
    assert_eq!(db.count("SELECT COUNT(*) FROM run_lease_attempts").await, 0);
}

async fn renewal_body(db: &TestDb) {
    let (a, b) = two_instances(db, Some(LEASE)).await;
    let run = a
        .create_run(
            "agent",
            &Budget {
                max_tool_calls: Some(8),
                ..Budget::default()
            },
        )
        .await
        .unwrap();
    // a reserves a block of two and keeps one call running well past its lease: the call is
    // reported at the next sweep, and then only the renewal keeps the lease alive (a
    // report of a run with nothing new comes every second only).
    let call = CallId::new();
    RunLedger::admit(&a, run.id, "agent", "t", call)
        .await
        .unwrap();
    tokio::time::sleep(LEASE * 3).await;
    // b makes what is free; a's unused call is still a's.
    let mut made = 0;
    let e = loop {
        match ledger_call(&b, run.id).await {
            Ok(()) => made += 1,
            Err(e) => break e,
        }
    };
    assert_eq!(made, 6, "a's lease was taken back while a renewed it");
    assert_eq!(e.kind(), ErrorKind::RateLimited, "{e:?}");
    let seen = b.run(run.id).await.unwrap().unwrap();
    assert_eq!((seen.tool_calls, seen.reserved_calls), (7, 1), "{seen:?}");
    // a's call ends and a closes: its last call goes to b, and the count is exact.
    RunLedger::settle(&a, run.id, "t", call, failed(false)).await;
    a.close().await;
    ledger_call(&b, run.id).await.unwrap();
    let e = ledger_call(&b, run.id).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::BudgetExhausted, "{e:?}");
    let seen = b.run(run.id).await.unwrap().unwrap();
    assert_eq!((seen.tool_calls, seen.reserved_calls), (8, 0), "{seen:?}");
    assert_eq!(b.run_calls(run.id).await.unwrap().len(), 8);
    b.close().await;
}

async fn paused_body(db: &TestDb) {
    let (a, b) = two_instances(db, Some(LEASE)).await;
    let run = a
        .create_run(
            "agent",
            &Budget {
                max_tool_calls: Some(8),
                ..Budget::default()
            },
        )
        .await
        .unwrap();
    // a reserves a block of two and makes one call.
    ledger_call(&a, run.id).await.unwrap();
    // a pauses past its lease (simulated: its lease goes to a holder that never renews, and
    // has expired) and b takes it back: the block counts as used.
    db.exec("UPDATE run_leases SET holder = 'paused', expires_ms = 0")
        .await;
    db.exec("UPDATE run_lease_attempts SET holder = 'paused'")
        .await;
    let mut made = 0;
    let e = loop {
        match ledger_call(&b, run.id).await {
            Ok(()) => made += 1,
            Err(e) => break e,
        }
    };
    assert_eq!(made, 6);
    assert_eq!(e.kind(), ErrorKind::BudgetExhausted, "{e:?}");
    // a resumes: its next sync finds the lease gone. Its call is reported (its record kept)
    // but not counted again: the block it came from was counted when taken back.
    let seen = a.run(run.id).await.unwrap().unwrap();
    assert_eq!((seen.tool_calls, seen.reserved_calls), (8, 0), "{seen:?}");
    assert_eq!(a.run_calls(run.id).await.unwrap().len(), 7);
    // And a no longer uses the call left in that block.
    let e = ledger_call(&a, run.id).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::BudgetExhausted, "{e:?}");
    let seen = b.run(run.id).await.unwrap().unwrap();
    assert_eq!((seen.tool_calls, seen.reserved_calls), (8, 0), "{seen:?}");
    a.close().await;
    b.close().await;
    assert_eq!(db.count("SELECT COUNT(*) FROM run_leases").await, 0);
}

/// More calls than one statement records (the cached ledger writes call records in chunks):
/// each is in `run_calls` exactly once, and the counters agree.
async fn many_calls_body(db: &TestDb) {
    let store = &db.store;
    let run = store.create_run("agent", &Budget::default()).await.unwrap();
    for _ in 0..2345 {
        ledger_call(store, run.id).await.unwrap();
    }
    let calls = store.run_calls(run.id).await.unwrap();
    assert_eq!(calls.len(), 2345);
    let ids: std::collections::HashSet<_> = calls.iter().map(|c| c.call_id).collect();
    assert_eq!(ids.len(), 2345, "each call recorded once");
    let seen = store.run(run.id).await.unwrap().unwrap();
    assert_eq!(seen.tool_calls, 2345);
    assert_eq!(seen.output_bytes, 23450);
}
