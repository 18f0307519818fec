//! Idempotency keys of calls that run at once, on each backend: a repeat gets the first result
//! and runs nothing, a key bound to another call or to an unfinished one is refused, calls that
//! never reached the tool or wait for an approval give their key back, keys are per principal
//! and forgotten after a day, and racing repeats run the tool once.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use common::TestDb;
use serde_json::{Value, json};
use toolgate_core::{
    CallRequest, Effect, ErrorKind, Pipeline, PipelineBuilder, Principal, PrincipalId, Registry,
    ToolBuilder, ToolResult,
};
use toolgate_store::{
    DurableApproval, IdempotencyKey, KeyedCall, Store, StoreError, StoreErrorKind,
};

on_each_backend! {
    a_repeated_key_returns_the_first_result_and_runs_nothing => replay_body;
    a_key_is_bound_to_its_tool_and_arguments => binding_body;
    an_unfinished_call_refuses_its_key_and_names_the_call => unfinished_body;
    calls_that_never_ran_or_wait_for_approval_give_their_key_back => released_body;
    keys_are_per_principal_and_forgotten_after_a_day => scope_body;
    racing_repeats_run_the_tool_once => race_body;
}

/// A registry with `charge` (a side effect counting its runs, sleeping `pause` first) and
/// `send_email` (requires confirmation).
fn registry(count: &Arc<AtomicU32>, pause: Duration) -> Arc<Registry> {
    let registry = Arc::new(Registry::new());
    let runs = Arc::clone(count);
    let charge = ToolBuilder::new("charge", "Charges a card.")
        .effect(Effect::SideEffect)
        .input_schema(json!({"type": "object", "properties": {"cents": {"type": "integer"}}, "required": ["cents"]}))
        .handler(move |args, _ctx| {
            let runs = Arc::clone(&runs);
            async move {
                tokio::time::sleep(pause).await;
                let n = runs.fetch_add(1, Ordering::SeqCst) + 1;
                Ok(json!({"charged": args["cents"], "run": n}))
            }
        });
    registry.register(Arc::new(charge)).unwrap();
    let email = ToolBuilder::new("send_email", "Sends an email.")
        .effect(Effect::SideEffect)
        .requires_confirmation(true)
        .handler(|_args, _ctx| async { Ok(json!({"sent": true})) });
    registry.register(Arc::new(email)).unwrap();
    registry
}

fn pipeline(db: &TestDb, registry: Arc<Registry>) -> Pipeline {
    PipelineBuilder::new(registry)
        .approval(Arc::new(DurableApproval::new(
            db.store.clone(),
            Duration::from_secs(600),
            Arc::new(|a| format!("approve {}", a.id)),
        )))
        .build()
}

/// The tools' run counter and a pipeline over them (see [`registry`]).
fn counted(db: &TestDb, pause: Duration) -> (Arc<AtomicU32>, Pipeline) {
    let count = Arc::new(AtomicU32::new(0));
    let p = pipeline(db, registry(&count, pause));
    (count, p)
}

fn json(result: &ToolResult) -> Value {
    serde_json::to_value(result).unwrap()
}

fn key(raw: &str) -> IdempotencyKey {
    IdempotencyKey::parse(raw).unwrap()
}

/// One call of `tool` with `arguments` as `principal`, under `key`.
async fn call(
    db: &TestDb,
    pipeline: &Pipeline,
    principal: &str,
    key: &IdempotencyKey,
    tool: &str,
    arguments: Value,
) -> Result<ToolResult, StoreError> {
    call_on(&db.store, pipeline, principal, key, tool, arguments).await
}

/// [`call`] through `store` (another instance, or from a spawned task).
async fn call_on(
    store: &Store,
    pipeline: &Pipeline,
    principal: &str,
    key: &IdempotencyKey,
    tool: &str,
    arguments: Value,
) -> Result<ToolResult, StoreError> {
    let who = Principal::new(PrincipalId::parse(principal).unwrap());
    let request = CallRequest::new(tool, arguments.clone())
        .principal(who)
        .idempotency_key(key.as_str());
    let keyed = KeyedCall {
        key,
        principal,
        tool,
        arguments: &arguments,
        call_id: request.call_id,
    };
    store.call_once(keyed, pipeline.call(request)).await
}

async fn replay_body(db: &TestDb) {
    let (count, p) = counted(db, Duration::ZERO);
    let k = key("order-1001");
    let first = call(db, &p, "agent", &k, "charge", json!({"cents": 500}))
        .await
        .unwrap();
    assert_eq!(first.data(), Some(&json!({"charged": 500, "run": 1})));
    let again = call(db, &p, "agent", &k, "charge", json!({"cents": 500}))
        .await
        .unwrap();
    assert_eq!(count.load(Ordering::SeqCst), 1, "the repeat ran nothing");
    assert_eq!(
        json(&again),
        json(&first),
        "the repeat is the first call's envelope"
    );
    // From another instance too: the key lives in the database.
    let other = db.reopen().await;
    let third = call_on(&other, &p, "agent", &k, "charge", json!({"cents": 500}))
        .await
        .unwrap();
    assert_eq!(third.call_id, first.call_id);
    assert_eq!(count.load(Ordering::SeqCst), 1);
    // Without a key, calls run each time.
    let plain = p
        .call(CallRequest::new("charge", json!({"cents": 500})))
        .await;
    assert_eq!(plain.data(), Some(&json!({"charged": 500, "run": 2})));
}

async fn binding_body(db: &TestDb) {
    let (count, p) = counted(db, Duration::ZERO);
    let k = key("order-1002");
    let first = call(db, &p, "agent", &k, "charge", json!({"cents": 500}))
        .await
        .unwrap();
    let e = call(db, &p, "agent", &k, "charge", json!({"cents": 900}))
        .await
        .unwrap_err();
    assert_eq!(e.kind(), StoreErrorKind::Conflict);
    let message = e.to_string();
    assert!(message.contains("charge with other arguments"), "{message}");
    assert!(message.contains(&first.call_id.to_string()), "{message}");
    assert!(message.contains("use a new key"), "{message}");
    let e = call(db, &p, "agent", &k, "send_email", json!({"cents": 500}))
        .await
        .unwrap_err();
    assert!(e.to_string().contains("tool charge"), "{e}");
    assert_eq!(
        count.load(Ordering::SeqCst),
        1,
        "refused repeats run nothing"
    );
}

async fn unfinished_body(db: &TestDb) {
    let (count, p) = counted(db, Duration::from_millis(400));
    let k = key("order-1003");
    let running = {
        let p = p.clone();
        let k = k.clone();
        let store = db.store.clone();
        tokio::spawn(async move {
            call_on(&store, &p, "local", &k, "charge", json!({"cents": 1})).await
        })
    };
    tokio::time::sleep(Duration::from_millis(150)).await;
    let e = call(db, &p, "local", &k, "charge", json!({"cents": 1}))
        .await
        .unwrap_err();
    assert_eq!(e.kind(), StoreErrorKind::Conflict);
    let message = e.to_string();
    assert!(message.contains("has not finished"), "{message}");
    assert!(message.contains("toolgate audit show"), "{message}");
    let first = running.await.unwrap().unwrap();
    assert!(message.contains(&first.call_id.to_string()), "{message}");
    // Once it finished, the repeat gets its result.
    let again = call(db, &p, "local", &k, "charge", json!({"cents": 1}))
        .await
        .unwrap();
    assert_eq!(json(&again), json(&first));
    assert_eq!(count.load(Ordering::SeqCst), 1);

    // A call cut off with the process (its future dropped mid-run): the key stays claimed,
    // and a repeat is refused rather than run a second time.
    let k = key("order-1004");
    let cut = tokio::time::timeout(
        Duration::from_millis(100),
        call(db, &p, "local", &k, "charge", json!({"cents": 2})),
    )
    .await;
    assert!(cut.is_err(), "the call was still running");
    let e = call(db, &p, "local", &k, "charge", json!({"cents": 2}))
        .await
        .unwrap_err();
    assert!(e.to_string().contains("has not finished"), "{e}");
}

async fn released_body(db: &TestDb) {
    let (count, p) = counted(db, Duration::ZERO);
    // Invalid arguments: refused before the tool ran, so the key is free for the fixed call.
    let k = key("order-1005");
    let bad = call(db, &p, "agent", &k, "charge", json!({"cents": "five"}))
        .await
        .unwrap();
    assert_eq!(bad.error_kind(), Some(ErrorKind::Validation));
    let bad_again = call(db, &p, "agent", &k, "charge", json!({"cents": "five"}))
        .await
        .unwrap();
    assert_ne!(bad_again.call_id, bad.call_id, "validated afresh");
    let good = call(db, &p, "agent", &k, "charge", json!({"cents": 5}))
        .await
        .unwrap();
    assert_eq!(good.data(), Some(&json!({"charged": 5, "run": 1})));
    assert_eq!(
        count.load(Ordering::SeqCst),
        1,
        "the refused calls never ran"
    );

    // A call that waits for an approval: the approval keeps the key, so the repeat is the same
    // approval (through the gate), not a stored pending result.
    let k = key("mail-1");
    let pending = call(db, &p, "agent", &k, "send_email", json!({}))
        .await
        .unwrap();
    let id = pending.approval_id.clone().expect("pending");
    let repeat = call(db, &p, "agent", &k, "send_email", json!({}))
        .await
        .unwrap();
    assert_eq!(repeat.approval_id.as_deref(), Some(id.as_str()));
    let approvals = db.store.approvals(None, Some("agent"), 10).await.unwrap();
    assert_eq!(approvals.len(), 1, "one approval for the key");
}

async fn scope_body(db: &TestDb) {
    let (count, p) = counted(db, Duration::ZERO);
    let k = key("shared-key");
    let a = call(db, &p, "alice", &k, "charge", json!({"cents": 1}))
        .await
        .unwrap();
    let b = call(db, &p, "bob", &k, "charge", json!({"cents": 1}))
        .await
        .unwrap();
    assert_ne!(
        a.call_id, b.call_id,
        "another principal's key is another key"
    );
    assert_eq!(count.load(Ordering::SeqCst), 2);
    // A day later the key is forgotten and the call runs again.
    db.exec("UPDATE idempotency_keys SET created_at = '2000-01-01T00:00:00.000000Z'")
        .await;
    let later = call(db, &p, "alice", &k, "charge", json!({"cents": 1}))
        .await
        .unwrap();
    assert_ne!(later.call_id, a.call_id);
    assert_eq!(count.load(Ordering::SeqCst), 3);

    for (raw, says) in [
        ("", "empty"),
        ("a\nb", "control characters"),
        (&"k".repeat(256)[..], "at most 255"),
    ] {
        let e = IdempotencyKey::parse(raw).unwrap_err();
        assert_eq!(e.kind(), StoreErrorKind::Invalid);
        assert!(e.to_string().contains(says), "{e}");
    }
    assert!(
        IdempotencyKey::parse(&"é".repeat(255)).is_ok(),
        "counted in characters"
    );
}

async fn race_body(db: &TestDb) {
    let (count, p) = counted(db, Duration::from_millis(50));
    let k = key("order-race");
    let mut tasks = Vec::new();
    for _ in 0..8 {
        let (p, k, store) = (p.clone(), k.clone(), db.reopen().await);
        tasks.push(tokio::spawn(async move {
            call_on(&store, &p, "local", &k, "charge", json!({"cents": 7})).await
        }));
    }
    let mut ran = 0;
    for task in tasks {
        match task.await.unwrap() {
            Ok(result) => {
                assert!(result.is_ok(), "{result:?}");
                ran += 1;
            }
            Err(e) => assert!(e.to_string().contains("has not finished"), "{e}"),
        }
    }
    assert!(ran >= 1);
    assert_eq!(
        count.load(Ordering::SeqCst),
        1,
        "eight racing repeats ran the tool once"
    );
}
