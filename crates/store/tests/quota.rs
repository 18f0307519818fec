//! Shared quotas: rate limits and concurrency caps counted in PostgreSQL hold across instances
//! (two stores on one schema stand for two instances), a killed instance's slots come back, and
//! SQLite keeps counting in process.
#![cfg(test)]

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use serde_json::json;
use tokio::sync::Notify;
use toolgate_core::{
    CallRequest, ErrorKind, Pipeline, PipelineBuilder, Principal, PrincipalId, PrincipalQuotaStage,
    Quota, RateLimit, RateLimitStage, Registry, SharedCounter, Tool, ToolBuilder,
};
use toolgate_store::{SharedQuotas, Store};

/// Two instances on one fresh PostgreSQL schema (None when PostgreSQL is skipped).
async fn two_instances() -> Option<(common::TestDb, Store)> {
    if !common::postgres_available().await {
        return None;
    }
    let (url, options) = common::postgres_target();
    let store = Store::open(&url, &options).await.unwrap();
    let db = common::TestDb {
        store,
        url,
        options,
        dir: None,
    };
    let other = db.reopen().await;
    Some((db, other))
}

fn counter(store: &Store) -> Arc<SharedQuotas> {
    store
        .shared_quotas()
        .expect("PostgreSQL has a shared counter")
}

#[tokio::test]
async fn sqlite_counts_in_process() {
    let (url, options, _dir) = common::sqlite_target();
    let store = Store::open(&url, &options).await.unwrap();
    assert!(store.shared_quotas().is_none());
    store.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_rate_limit_holds_across_instances() {
    let Some((db, other)) = two_instances().await else {
        return;
    };
    let (a, b) = (counter(&db.store), counter(&other));
    // A burst of 5 that practically never refills, taken 40 times at once from two instances.
    let limit = RateLimit::new(5, 0.001).unwrap();
    let mut takes = Vec::new();
    for i in 0..40 {
        let c = if i % 2 == 0 { a.clone() } else { b.clone() };
        takes.push(tokio::spawn(async move {
            c.take_token("principal/ann", limit).await.unwrap()
        }));
    }
    let mut granted = 0;
    for take in takes {
        match take.await.unwrap() {
            Ok(()) => granted += 1,
            Err(wait) => assert!(wait > Duration::from_secs(100), "{wait:?}"),
        }
    }
    assert_eq!(granted, 5, "the burst is shared, not per instance");
    // Another key has its own bucket.
    assert_eq!(b.take_token("principal/bob", limit).await.unwrap(), Ok(()));
    drop((a, b));
    other.close().await;
    db.cleanup().await;
}

#[tokio::test]
async fn a_shared_bucket_refills_on_the_database_clock() {
    let Some((db, other)) = two_instances().await else {
        return;
    };
    let (a, b) = (counter(&db.store), counter(&other));
    let limit = RateLimit::new(2, 20.0).unwrap();
    assert_eq!(a.take_token("k", limit).await.unwrap(), Ok(()));
    assert_eq!(b.take_token("k", limit).await.unwrap(), Ok(()));
    let wait = a.take_token("k", limit).await.unwrap().unwrap_err();
    assert!(wait <= Duration::from_millis(50), "{wait:?}");
    tokio::time::sleep(Duration::from_millis(120)).await;
    assert_eq!(b.take_token("k", limit).await.unwrap(), Ok(()));
    drop((a, b));
    other.close().await;
    db.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrency_slots_are_shared_and_given_back() {
    let Some((db, other)) = two_instances().await else {
        return;
    };
    let (a, b) = (counter(&db.store), counter(&other));
    // 20 leases asked at once from two instances: exactly 3 are given.
    let mut asks = Vec::new();
    for i in 0..20 {
        let c = if i % 2 == 0 { a.clone() } else { b.clone() };
        asks.push(tokio::spawn(async move {
            c.lease_slot("principal/ann", 3).await.unwrap()
        }));
    }
    let mut held = Vec::new();
    for ask in asks {
        held.extend(ask.await.unwrap());
    }
    assert_eq!(held.len(), 3);
    assert!(a.lease_slot("principal/ann", 3).await.unwrap().is_none());
    held.pop().unwrap().release().await;
    let again = b.lease_slot("principal/ann", 3).await.unwrap();
    assert!(
        again.is_some(),
        "a given-back slot is free on every instance"
    );
    // A slot dropped without release (a cancelled call) is given back in the background.
    drop(again);
    let mut freed = false;
    for _ in 0..50 {
        if let Some(slot) = a.lease_slot("principal/ann", 3).await.unwrap() {
            slot.release().await;
            freed = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(freed);
    for slot in held {
        slot.release().await;
    }
    drop((a, b));
    other.close().await;
    db.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_instances_slots_come_back_and_a_live_ones_are_renewed() {
    let Some((db, other)) = two_instances().await else {
        return;
    };
    let lease = Duration::from_millis(900);
    let alive = db.store.shared_quotas_with(lease).unwrap();
    let dying = other.shared_quotas_with(lease).unwrap();
    let kept = alive.lease_slot("principal/ann", 2).await.unwrap().unwrap();
    let lost = dying.lease_slot("principal/ann", 2).await.unwrap().unwrap();
    // The dying instance stops without giving its slot back (as `kill -9` would).
    std::mem::forget(lost);
    drop(dying);
    assert!(
        alive
            .lease_slot("principal/ann", 2)
            .await
            .unwrap()
            .is_none()
    );
    tokio::time::sleep(lease * 2).await;
    // The dead instance's slot expired; the live one's lease was renewed and still holds.
    let back = alive.lease_slot("principal/ann", 2).await.unwrap();
    assert!(back.is_some(), "the killed instance's slot comes back");
    assert!(
        alive
            .lease_slot("principal/ann", 2)
            .await
            .unwrap()
            .is_none(),
        "the live instance's slot is renewed, not expired"
    );
    kept.release().await;
    back.unwrap().release().await;
    drop(alive);
    other.close().await;
    db.cleanup().await;
}

// ---- the pipeline's stages over the shared counter -------------------------------------------

/// The test's hold on the `wait` tool: calls wait for `go`; `started` counts calls that began.
#[derive(Clone, Default)]
struct Gate {
    go: Arc<Notify>,
    started: Arc<AtomicU32>,
}

fn pipeline(store: &Store, quota: Quota, gate: Gate) -> Pipeline {
    let registry = Arc::new(Registry::new());
    let quick = ToolBuilder::new("quick", "Answers at once. Used by the quota tests only.")
        .input_schema(json!({"type": "object"}))
        .handler(|_, _| async { Ok(json!("ok")) });
    let limited = ToolBuilder::new("limited", "Answers at once. Used by the quota tests only.")
        .input_schema(json!({"type": "object"}))
        .handler(|_, _| async { Ok(json!("ok")) });
    let wait = ToolBuilder::new("wait", "Waits for the test. Used by the quota tests only.")
        .input_schema(json!({"type": "object"}))
        .handler(move |_, _| {
            let gate = gate.clone();
            async move {
                gate.started.fetch_add(1, Ordering::SeqCst);
                gate.go.notified().await;
                Ok(json!("done"))
            }
        });
    registry
        .register_all(
            vec![
                Arc::new(quick) as Arc<dyn Tool>,
                Arc::new(limited),
                Arc::new(wait),
            ],
            false,
        )
        .unwrap();
    let shared: Arc<dyn SharedCounter> = counter(store);
    let quotas = PrincipalQuotaStage::new([("ann".to_owned(), quota)]).shared(shared.clone());
    let per_tool = RateLimitStage::new(RateLimit::new(1000, 1000.0).unwrap())
        .tool("limited", RateLimit::new(4, 0.001).unwrap())
        .shared(shared);
    PipelineBuilder::new(registry)
        .stage(Arc::new(quotas))
        .stage(Arc::new(per_tool))
        .build()
}

fn call(tool: &str, who: &str) -> CallRequest {
    CallRequest::new(tool, json!({})).principal(Principal::new(PrincipalId::parse(who).unwrap()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_stages_refuse_as_before_across_instances() {
    let Some((db, other)) = two_instances().await else {
        return;
    };
    let gate = Gate::default();
    let rate = Quota {
        rate: Some(RateLimit::new(3, 0.001).unwrap()),
        max_concurrent: None,
    };
    let (p1, p2) = (
        pipeline(&db.store, rate, gate.clone()),
        pipeline(&other, rate, gate.clone()),
    );
    let mut ok = 0;
    let mut refused = Vec::new();
    for i in 0..6 {
        let p = if i % 2 == 0 { &p1 } else { &p2 };
        let r = p.call(call("quick", "ann")).await;
        if r.is_ok() {
            ok += 1;
        } else {
            assert_eq!(r.error_kind(), Some(ErrorKind::RateLimited));
            refused.push(r.error().unwrap().to_owned());
        }
    }
    assert_eq!(ok, 3, "ann's rate is counted once for both instances");
    assert!(
        refused[0].starts_with(
            "Rate limit exceeded for principal ann (0.001 calls per second, bursts of 3); retry in"
        ),
        "{refused:?}"
    );
    // The per-(principal, tool) limit is shared too: bob has no quota, 4 calls of `limited`.
    let mut ok = 0;
    for i in 0..8 {
        let p = if i % 2 == 0 { &p1 } else { &p2 };
        let r = p.call(call("limited", "bob")).await;
        if r.is_ok() {
            ok += 1;
        } else {
            assert!(
                r.error()
                    .unwrap()
                    .starts_with("Rate limit exceeded for tool limited; retry in"),
                "{:?}",
                r.error()
            );
        }
    }
    assert_eq!(ok, 4);

    // The concurrency cap: two calls of ann's in flight on one instance fill it for both.
    let cap = Quota {
        rate: None,
        max_concurrent: Some(2),
    };
    let (p1, p2) = (
        Arc::new(pipeline(&db.store, cap, gate.clone())),
        Arc::new(pipeline(&other, cap, gate.clone())),
    );
    let running: Vec<_> = (0..2)
        .map(|_| {
            let p = p1.clone();
            tokio::spawn(async move { p.call(call("wait", "ann")).await })
        })
        .collect();
    while gate.started.load(Ordering::SeqCst) < 2 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // Both hold a slot now: the other instance refuses a third call.
    let r = p2.call(call("quick", "ann")).await;
    assert_eq!(r.error_kind(), Some(ErrorKind::RateLimited));
    assert_eq!(
        r.error().unwrap(),
        "Too many calls in flight for principal ann (at most 2); retry when one finishes"
    );
    // When the waiting calls end, their slots are given back before they answer.
    while running.iter().any(|t| !t.is_finished()) {
        gate.go.notify_waiters();
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    for t in running {
        assert!(t.await.unwrap().is_ok());
    }
    assert!(p2.call(call("quick", "ann")).await.is_ok());
    drop((p1, p2));
    other.close().await;
    db.cleanup().await;
}

#[tokio::test]
async fn an_unreachable_count_refuses_the_call() {
    let Some((db, other)) = two_instances().await else {
        return;
    };
    let gate = Gate::default();
    let quota = Quota {
        rate: Some(RateLimit::new(3, 1.0).unwrap()),
        max_concurrent: None,
    };
    let p = pipeline(&other, quota, gate);
    other.close().await;
    let r = p.call(call("quick", "ann")).await;
    assert_eq!(r.error_kind(), Some(ErrorKind::Unavailable));
    let msg = r.error().unwrap();
    assert!(
        msg.starts_with("The shared limit principal/ann could not be counted in the database"),
        "{msg}"
    );
    db.cleanup().await;
}
