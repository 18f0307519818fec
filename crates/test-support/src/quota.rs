//! The shared-quota scenarios every [`SharedCounter`] must pass (feature `quota`): the same
//! checks run against the PostgreSQL counter (toolgate-store's tests) and the Redis one
//! (toolgate-redis's), so both count and refuse alike. Two counters over one backend stand for
//! two instances; each scenario takes them with the keys of a fresh backend (a new schema, a new
//! key prefix).

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use serde_json::json;
use tokio::sync::Notify;
use toolgate_core::{
    CallRequest, ErrorKind, Pipeline, PipelineBuilder, Principal, PrincipalId, PrincipalQuotaStage,
    Quota, RateLimit, RateLimitStage, Registry, SharedCounter, Tool, ToolBuilder,
};

/// A shared counter as the scenarios hold it.
pub type Counter = Arc<dyn SharedCounter>;

/// 40 takes at once from two instances of a burst of 5 that practically never refills: exactly
/// 5 are granted, the others told to wait (long); another key has its own bucket.
///
/// # Panics
///
/// When the counters do not count so.
pub async fn a_rate_limit_holds_across_instances(a: Counter, b: Counter) {
    let limit = RateLimit::new(5, 0.001).unwrap_or_else(|e| panic!("{e}"));
    let mut takes = Vec::new();
    for i in 0..40 {
        let c = if i % 2 == 0 { a.clone() } else { b.clone() };
        takes.push(tokio::spawn(async move {
            c.take("principal/ann", limit)
                .await
                .unwrap_or_else(|e| panic!("{e}"))
        }));
    }
    let mut granted = 0;
    for take in takes {
        match take.await.unwrap_or_else(|e| panic!("{e}")) {
            Ok(()) => granted += 1,
            Err(wait) => assert!(wait > Duration::from_secs(100), "{wait:?}"),
        }
    }
    assert_eq!(granted, 5, "the burst is shared, not per instance");
    assert_eq!(
        b.take("principal/bob", limit).await.ok(),
        Some(Ok(())),
        "another key has its own bucket"
    );
}

/// A bucket of 2 refilled at 20 per second, taken from both instances: the third take waits at
/// most 50 ms, and after 120 ms a token is back.
///
/// # Panics
///
/// When the counters do not count so.
pub async fn a_shared_bucket_refills(a: Counter, b: Counter) {
    let limit = RateLimit::new(2, 20.0).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(a.take("k", limit).await.ok(), Some(Ok(())));
    assert_eq!(b.take("k", limit).await.ok(), Some(Ok(())));
    let Ok(Err(wait)) = a.take("k", limit).await else {
        panic!("a third take from a bucket of 2 was not refused");
    };
    assert!(wait <= Duration::from_millis(50), "{wait:?}");
    tokio::time::sleep(Duration::from_millis(120)).await;
    assert_eq!(b.take("k", limit).await.ok(), Some(Ok(())));
}

async fn lease(c: &Counter, key: &str, max: u32) -> Option<toolgate_core::SharedSlot> {
    c.acquire(key, max).await.unwrap_or_else(|e| panic!("{e}"))
}

/// 20 leases of a cap of 3 asked at once from two instances: exactly 3 are given; a slot given
/// back is free on both; a slot dropped without release (a cancelled call) comes back soon.
///
/// # Panics
///
/// When the counters do not count so.
pub async fn concurrency_slots_are_shared_and_given_back(a: Counter, b: Counter) {
    let mut asks = Vec::new();
    for i in 0..20 {
        let c = if i % 2 == 0 { a.clone() } else { b.clone() };
        asks.push(tokio::spawn(
            async move { lease(&c, "principal/ann", 3).await },
        ));
    }
    let mut held = Vec::new();
    for ask in asks {
        held.extend(ask.await.unwrap_or_else(|e| panic!("{e}")));
    }
    assert_eq!(held.len(), 3);
    assert!(lease(&a, "principal/ann", 3).await.is_none());
    if let Some(slot) = held.pop() {
        slot.release().await;
    }
    let again = lease(&b, "principal/ann", 3).await;
    assert!(
        again.is_some(),
        "a given-back slot is free on every instance"
    );
    drop(again);
    let mut freed = false;
    for _ in 0..50 {
        if let Some(slot) = lease(&a, "principal/ann", 3).await {
            slot.release().await;
            freed = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(freed, "a dropped slot is given back in the background");
    for slot in held {
        slot.release().await;
    }
}

/// `alive` and `dying` lease a slot each of a cap of 2 (leases of `lease`); `dying` stops
/// without giving its slot back (as `kill -9` would) and is dropped. After two leases the dead
/// one's slot is free again and the live one's still held (renewed).
///
/// # Panics
///
/// When the counters do not count so.
pub async fn a_dead_instances_slots_come_back(alive: Counter, dying: Counter, lease_for: Duration) {
    let kept = lease(&alive, "principal/ann", 2).await;
    let lost = lease(&dying, "principal/ann", 2).await;
    assert!(kept.is_some() && lost.is_some());
    std::mem::forget(lost);
    drop(dying);
    assert!(lease(&alive, "principal/ann", 2).await.is_none());
    tokio::time::sleep(lease_for * 2).await;
    let back = lease(&alive, "principal/ann", 2).await;
    assert!(back.is_some(), "the killed instance's slot comes back");
    assert!(
        lease(&alive, "principal/ann", 2).await.is_none(),
        "the live instance's slot is renewed, not expired"
    );
    for slot in [kept, back].into_iter().flatten() {
        slot.release().await;
    }
}

/// The test's hold on the `wait` tool: calls wait for `go`; `started` counts calls that began.
#[derive(Clone, Default)]
pub struct Gate {
    go: Arc<Notify>,
    started: Arc<AtomicU32>,
}

/// A pipeline with tools `quick`, `limited` (a per-tool limit of 4 that practically never
/// refills) and `wait` (held by `gate`), ann's `quota` and the per-tool limit counted in
/// `shared`.
///
/// # Panics
///
/// When the tools do not register (a bug in this helper).
pub fn pipeline(shared: Counter, quota: Quota, gate: Gate) -> Pipeline {
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
        .unwrap_or_else(|e| panic!("{e}"));
    let rate =
        |burst, per_second| RateLimit::new(burst, per_second).unwrap_or_else(|e| panic!("{e}"));
    let quotas = PrincipalQuotaStage::new([("ann".to_owned(), quota)]).shared(shared.clone());
    let per_tool = RateLimitStage::new(rate(1000, 1000.0))
        .tool("limited", rate(4, 0.001))
        .shared(shared);
    PipelineBuilder::new(registry)
        .stage(Arc::new(quotas))
        .stage(Arc::new(per_tool))
        .build()
}

/// A call of `tool` by principal `who`.
///
/// # Panics
///
/// When `who` is not a valid principal id.
pub fn call(tool: &str, who: &str) -> CallRequest {
    let id = PrincipalId::parse(who).unwrap_or_else(|e| panic!("{e}"));
    CallRequest::new(tool, json!({})).principal(Principal::new(id))
}

/// The pipeline's stages over two instances refuse as in one process: ann's rate of 3 gives 3
/// calls of 6; bob's per-tool limit of 4 gives 4 of 8; two of ann's calls in flight on one
/// instance (a cap of 2) make the other refuse a third, until they end.
///
/// # Panics
///
/// When the stages do not refuse so.
pub async fn the_stages_refuse_as_before_across_instances(a: Counter, b: Counter) {
    let gate = Gate::default();
    let rate = Quota {
        rate: Some(RateLimit::new(3, 0.001).unwrap_or_else(|e| panic!("{e}"))),
        max_concurrent: None,
    };
    let (p1, p2) = (
        pipeline(a.clone(), rate, gate.clone()),
        pipeline(b.clone(), rate, gate.clone()),
    );
    let mut ok = 0;
    let mut refused = Vec::new();
    for i in 0..6 {
        let p = if i % 2 == 0 { &p1 } else { &p2 };
        let r = p.call(call("quick", "ann")).await;
        if r.is_ok() {
            ok += 1;
        } else {
            assert_eq!(
                r.error_kind(),
                Some(ErrorKind::RateLimited),
                "{:?}",
                r.error()
            );
            refused.push(r.error().unwrap_or_default().to_owned());
        }
    }
    assert_eq!(ok, 3, "ann's rate is counted once for both instances");
    assert!(
        refused[0].starts_with(
            "Rate limit exceeded for principal ann (0.001 calls per second, bursts of 3); retry in"
        ),
        "{refused:?}"
    );
    let mut ok = 0;
    for i in 0..8 {
        let p = if i % 2 == 0 { &p1 } else { &p2 };
        let r = p.call(call("limited", "bob")).await;
        if r.is_ok() {
            ok += 1;
        } else {
            let msg = r.error().unwrap_or_default();
            assert!(
                msg.starts_with("Rate limit exceeded for tool limited; retry in"),
                "{msg}"
            );
        }
    }
    assert_eq!(
        ok, 4,
        "bob's per-tool limit is counted once for both instances"
    );

    let cap = Quota {
        rate: None,
        max_concurrent: Some(2),
    };
    let (p1, p2) = (
        Arc::new(pipeline(a, cap, gate.clone())),
        Arc::new(pipeline(b, cap, gate.clone())),
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
    let r = p2.call(call("quick", "ann")).await;
    assert_eq!(r.error_kind(), Some(ErrorKind::RateLimited));
    assert_eq!(
        r.error(),
        Some("Too many calls in flight for principal ann (at most 2); retry when one finishes")
    );
    while running.iter().any(|t| !t.is_finished()) {
        gate.go.notify_waiters();
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    for t in running {
        assert!(t.await.is_ok_and(|r| r.is_ok()));
    }
    assert!(p2.call(call("quick", "ann")).await.is_ok());
}

/// A counter that cannot reach its backend refuses ann's call `unavailable` with a message that
/// starts with `message` — never runs it uncounted (a counter that granted on error fails here),
/// for a rate and for a concurrency cap alike.
///
/// # Panics
///
/// When a call runs, or is refused otherwise.
pub async fn an_unreachable_count_refuses_the_call(counter: Counter, message: &str) {
    for quota in [
        Quota {
            rate: Some(RateLimit::new(3, 1.0).unwrap_or_else(|e| panic!("{e}"))),
            max_concurrent: None,
        },
        Quota {
            rate: None,
            max_concurrent: Some(2),
        },
    ] {
        let p = pipeline(counter.clone(), quota, Gate::default());
        let r = p.call(call("quick", "ann")).await;
        assert!(
            !r.is_ok(),
            "the call ran although its limit was not counted"
        );
        assert_eq!(
            r.error_kind(),
            Some(ErrorKind::Unavailable),
            "{:?}",
            r.error()
        );
        let msg = r.error().unwrap_or_default();
        assert!(msg.starts_with(message), "{msg}");
    }
}
