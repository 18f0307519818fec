//! Durable approvals in the store, on each backend: every transition and the ones refused,
//! idempotency keys, expiry, racing deciders and runners (exactly one wins), and recovery after
//! a restart (approved → run once, running → indeterminate), and following every change from
//! another instance by revision.
#![cfg(test)]

mod common;

use std::time::Duration;

use common::TestDb;
use serde_json::json;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use toolgate_core::{
    CallOrigin, CallRequest, Effect, ErrorKind, PipelineBuilder, Principal, PrincipalId, Registry,
    ToolBuilder, ToolDefinition,
};
use toolgate_store::{
    Approval, ApprovalCursor, ApprovalStatus, DurableApproval, NewApproval, Store, StoreErrorKind,
    arguments_sha256, run_approved,
};

on_each_backend! {
    approvals_move_through_every_transition => transitions_body;
    refused_transitions_name_the_status => refused_body;
    idempotency_keys_return_the_same_approval => idempotency_body;
    approvals_expire => expiry_body;
    racing_deciders_and_runners_have_one_winner => race_body;
    recovery_runs_approved_calls_and_marks_interrupted_ones => recovery_body;
    a_durable_approval_runs_the_approved_call_once => gate_body;
    an_approval_is_bound_to_principal_definition_and_arguments => binding_body;
    approval_changes_are_followed_from_another_instance => changes_body;
    concurrent_changes_are_all_followed => concurrent_changes_body;
}

fn new(key: Option<&str>) -> NewApproval {
    NewApproval {
        call_id: uuid_like(),
        tool: "send_email".into(),
        definition_hash: "abc123".into(),
        arguments: json!({"to": "a@example.com", "token": "secret"}),
        display: json!({"to": "a@example.com", "token": "[REDACTED]"}),
        principal: "agent".into(),
        reason: Some("weekly report".into()),
        idempotency_key: key.map(str::to_owned),
        ttl: Duration::from_secs(3600),
        origin: Some(CallOrigin::rest(Some("ci-bot"))),
        run: None,
    }
}

fn uuid_like() -> String {
    use std::sync::atomic::{AtomicU32, Ordering};
    static N: AtomicU32 = AtomicU32::new(0);
    format!("call-{}", N.fetch_add(1, Ordering::SeqCst))
}

async fn transitions_body(db: &TestDb) {
    let store = &db.store;
    let (a, created) = store.request_approval(new(None)).await.unwrap();
    assert!(created);
    assert_eq!(a.status, ApprovalStatus::Pending);
    assert!(a.id.starts_with("apr_"));
    assert_eq!(a.origin, Some(CallOrigin::rest(Some("ci-bot"))));
    let stored = store.approval(&a.id).await.unwrap().unwrap();
    assert_eq!(
        stored.origin, a.origin,
        "the origin is kept with the request"
    );
    assert_eq!(
        a.arguments_sha256,
        arguments_sha256(&json!({"token": "secret", "to": "a@example.com"})),
        "canonical: key order does not matter"
    );
    // What people see never holds the secret.
    let shown = serde_json::to_string(&a).unwrap();
    assert!(!shown.contains("secret"), "{shown}");
    assert!(shown.contains("[REDACTED]"));

    let approved = store
        .decide_approval(&a.id, true, "alice", Some("looks fine"))
        .await
        .unwrap();
    assert_eq!(approved.status, ApprovalStatus::Approved);
    assert_eq!(approved.decided_by.as_deref(), Some("alice"));
    assert_eq!(approved.decision_reason.as_deref(), Some("looks fine"));

    let running = store.claim_approval(&a.id).await.unwrap().unwrap();
    assert_eq!(running.status, ApprovalStatus::Running);
    assert!(running.started_at.is_some());
    assert_eq!(
        running.arguments["token"], "secret",
        "the runner gets the real arguments"
    );

    let done = store
        .finish_approval(&a.id, &json!({"data": {"sent": true}}))
        .await
        .unwrap();
    assert_eq!(done.status, ApprovalStatus::Executed);
    assert_eq!(done.result, Some(json!({"data": {"sent": true}})));

    let (b, _) = store.request_approval(new(None)).await.unwrap();
    let denied = store
        .decide_approval(&b.id, false, "bob", Some("wrong recipient"))
        .await
        .unwrap();
    assert_eq!(denied.status, ApprovalStatus::Denied);
    let listed = store
        .approvals(Some(ApprovalStatus::Denied), None, 10)
        .await
        .unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].id, b.id);
    assert_eq!(
        store
            .approvals(None, Some("agent"), 10)
            .await
            .unwrap()
            .len(),
        2
    );
    assert!(
        store
            .approvals(None, Some("other"), 10)
            .await
            .unwrap()
            .is_empty()
    );
}

async fn refused_body(db: &TestDb) {
    let store = &db.store;
    let (a, _) = store.request_approval(new(None)).await.unwrap();
    // Not approved: cannot be claimed or finished.
    assert!(store.claim_approval(&a.id).await.unwrap().is_none());
    let err = store.finish_approval(&a.id, &json!({})).await.unwrap_err();
    assert_eq!(err.kind(), StoreErrorKind::Conflict);
    store
        .decide_approval(&a.id, false, "bob", None)
        .await
        .unwrap();
    // A denied call can never be approved or claimed.
    let err = store
        .decide_approval(&a.id, true, "alice", None)
        .await
        .unwrap_err();
    assert_eq!(err.kind(), StoreErrorKind::Conflict);
    assert_eq!(
        err.to_string(),
        format!("Approval {} is denied, so it cannot be approved", a.id)
    );
    assert!(store.claim_approval(&a.id).await.unwrap().is_none());
    let err = store
        .decide_approval("apr_missing", true, "alice", None)
        .await
        .unwrap_err();
    assert_eq!(err.kind(), StoreErrorKind::NotFound);
}

async fn idempotency_body(db: &TestDb) {
    let store = &db.store;
    let (a, created) = store.request_approval(new(Some("k-1"))).await.unwrap();
    assert!(created);
    let (again, created) = store.request_approval(new(Some("k-1"))).await.unwrap();
    assert!(!created);
    assert_eq!(again.id, a.id);
    // The same key with other arguments is a conflict, not a new approval.
    let mut other = new(Some("k-1"));
    other.arguments = json!({"to": "b@example.com"});
    let err = store.request_approval(other).await.unwrap_err();
    assert_eq!(err.kind(), StoreErrorKind::Conflict);
    assert!(err.to_string().contains("k-1"), "{err}");
    // Keys belong to a principal.
    let mut elsewhere = new(Some("k-1"));
    elsewhere.principal = "other".into();
    let (b, created) = store.request_approval(elsewhere).await.unwrap();
    assert!(created);
    assert_ne!(b.id, a.id);
    assert_eq!(db.count("SELECT COUNT(*) FROM approvals").await, 2);
}

async fn expiry_body(db: &TestDb) {
    let store = &db.store;
    let mut short = new(None);
    short.ttl = Duration::from_millis(50);
    let (a, _) = store.request_approval(short).await.unwrap();
    tokio::time::sleep(Duration::from_millis(120)).await;
    let err = store
        .decide_approval(&a.id, true, "alice", None)
        .await
        .unwrap_err();
    assert_eq!(err.kind(), StoreErrorKind::Conflict);
    assert!(err.to_string().contains("is expired"), "{err}");
    assert_eq!(
        store.approval(&a.id).await.unwrap().unwrap().status,
        ApprovalStatus::Expired
    );
    assert!(store.claim_approval(&a.id).await.unwrap().is_none());
}

async fn race_body(db: &TestDb) {
    let (a, _) = db.store.request_approval(new(None)).await.unwrap();
    let other = db.reopen().await;
    // Eight deciders, two processes' worth of stores: exactly one decision holds.
    let mut tasks = Vec::new();
    for i in 0..8 {
        let store = if i % 2 == 0 {
            db.store.clone()
        } else {
            other.clone()
        };
        let id = a.id.clone();
        tasks.push(tokio::spawn(async move {
            store
                .decide_approval(&id, i % 3 != 0, &format!("p{i}"), None)
                .await
                .is_ok()
        }));
    }
    let mut wins = 0;
    for t in tasks {
        wins += usize::from(t.await.unwrap());
    }
    assert_eq!(wins, 1);
    let decided = db.store.approval(&a.id).await.unwrap().unwrap();
    if decided.status == ApprovalStatus::Approved {
        let mut tasks = Vec::new();
        for i in 0..8 {
            let store = if i % 2 == 0 {
                db.store.clone()
            } else {
                other.clone()
            };
            let id = a.id.clone();
            tasks.push(tokio::spawn(async move {
                store.claim_approval(&id).await.unwrap().is_some()
            }));
        }
        let mut claims = 0;
        for t in tasks {
            claims += usize::from(t.await.unwrap());
        }
        assert_eq!(claims, 1, "one runner, however many try");
    }
    other.close().await;
}

async fn recovery_body(db: &TestDb) {
    let store = &db.store;
    let (ready, _) = store.request_approval(new(None)).await.unwrap();
    store
        .decide_approval(&ready.id, true, "alice", None)
        .await
        .unwrap();
    let (started, _) = store.request_approval(new(None)).await.unwrap();
    store
        .decide_approval(&started.id, true, "alice", None)
        .await
        .unwrap();
    store.claim_approval(&started.id).await.unwrap().unwrap();
    let (waiting, _) = store.request_approval(new(None)).await.unwrap();

    // The process dies here; a new one opens the same database.
    let restarted = db.reopen().await;
    let recovered = restarted.recover_approvals().await.unwrap();
    let ready_ids: Vec<&str> = recovered.ready.iter().map(|a| a.id.as_str()).collect();
    assert_eq!(ready_ids, [ready.id.as_str()]);
    let interrupted: Vec<&str> = recovered
        .indeterminate
        .iter()
        .map(|a| a.id.as_str())
        .collect();
    assert_eq!(interrupted, [started.id.as_str()]);
    let status = |id: String| {
        let s = restarted.clone();
        async move { s.approval(&id).await.unwrap().unwrap().status }
    };
    assert_eq!(
        status(started.id.clone()).await,
        ApprovalStatus::Indeterminate
    );
    assert_eq!(status(waiting.id.clone()).await, ApprovalStatus::Pending);
    // An indeterminate call is never claimed again.
    assert!(
        restarted
            .claim_approval(&started.id)
            .await
            .unwrap()
            .is_none()
    );
    restarted.close().await;
}

/// A registry with `send_email` (confirmation required) whose executions are counted.
fn gated(count: Arc<AtomicU32>, description: &str) -> Arc<Registry> {
    let registry = Arc::new(Registry::new());
    let tool = ToolBuilder::new("send_email", description)
        .effect(Effect::SideEffect)
        .requires_confirmation(true)
        .permission("tool.email.send")
        .input_schema(
            json!({"type": "object", "properties": {"to": {"type": "string"}}, "required": ["to"]}),
        )
        .handler(move |args, _ctx| {
            let count = Arc::clone(&count);
            async move {
                count.fetch_add(1, Ordering::SeqCst);
                Ok(json!({"sent": args["to"]}))
            }
        });
    registry.register(Arc::new(tool)).unwrap();
    registry
}

fn durable(db: &TestDb) -> Arc<DurableApproval> {
    Arc::new(DurableApproval::new(
        db.store.clone(),
        Duration::from_secs(600),
        Arc::new(|a| format!("approve it with `toolgate approvals approve {}`", a.id)),
    ))
}

async fn gate_body(db: &TestDb) {
    let count = Arc::new(AtomicU32::new(0));
    let registry = gated(Arc::clone(&count), "Sends an email.");
    let pipeline = PipelineBuilder::new(registry).approval(durable(db)).build();
    let r = pipeline
        .call(CallRequest::new("send_email", json!({"to": "a@example.com"})).reason("report"))
        .await;
    assert_eq!(r.error_kind(), Some(ErrorKind::ConfirmationRequired));
    let id = r
        .approval_id
        .clone()
        .expect("the result names the approval");
    assert!(r.error().unwrap().contains(&id), "{r:?}");
    assert!(
        r.error().unwrap().contains("toolgate approvals approve"),
        "{r:?}"
    );
    assert_eq!(count.load(Ordering::SeqCst), 0, "nothing runs before a yes");
    let envelope = serde_json::to_value(&r).unwrap();
    assert_eq!(envelope["approvalId"], json!(id));

    // Not approved yet: the runner refuses to run it.
    assert!(
        run_approved(&db.store, &pipeline, &id, Principal::local())
            .await
            .unwrap()
            .is_none()
    );
    db.store
        .decide_approval(&id, true, "alice", None)
        .await
        .unwrap();
    let (done, result) = run_approved(&db.store, &pipeline, &id, Principal::local())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        result.data(),
        Some(&json!({"sent": "a@example.com"})),
        "{result:?}"
    );
    assert_eq!(
        result.call_id, r.call_id,
        "the run keeps the call id it was asked with"
    );
    assert_eq!(done.status, ApprovalStatus::Executed);
    assert_eq!(
        done.result.unwrap()["data"],
        json!({"sent": "a@example.com"})
    );
    // Never twice.
    assert!(
        run_approved(&db.store, &pipeline, &id, Principal::local())
            .await
            .unwrap()
            .is_none()
    );
    assert_eq!(count.load(Ordering::SeqCst), 1);

    // A denied call never runs.
    let r = pipeline
        .call(CallRequest::new(
            "send_email",
            json!({"to": "b@example.com"}),
        ))
        .await;
    let denied = r.approval_id.unwrap();
    db.store
        .decide_approval(&denied, false, "alice", Some("no"))
        .await
        .unwrap();
    assert!(
        run_approved(&db.store, &pipeline, &denied, Principal::local())
            .await
            .unwrap()
            .is_none()
    );
    assert_eq!(count.load(Ordering::SeqCst), 1);

    // The same idempotency key gives the same approval.
    let keyed = |to: &str| CallRequest::new("send_email", json!({"to": to})).idempotency_key("k");
    let a = pipeline
        .call(keyed("c@example.com"))
        .await
        .approval_id
        .unwrap();
    let b = pipeline
        .call(keyed("c@example.com"))
        .await
        .approval_id
        .unwrap();
    assert_eq!(a, b);
}

async fn binding_body(db: &TestDb) {
    let count = Arc::new(AtomicU32::new(0));
    let registry = gated(Arc::clone(&count), "Sends an email.");
    let pipeline = PipelineBuilder::new(Arc::clone(&registry))
        .approval(durable(db))
        .build();
    let ask = |who: &str| {
        CallRequest::new("send_email", json!({"to": "a@example.com"})).principal(
            Principal::new(PrincipalId::parse(who).unwrap())
                .grant(toolgate_core::Permission::parse("*").unwrap()),
        )
    };

    // Approved for alice, run as bob: rejected, nothing runs.
    let id = pipeline.call(ask("alice")).await.approval_id.unwrap();
    db.store
        .decide_approval(&id, true, "root", None)
        .await
        .unwrap();
    let bob = Principal::new(PrincipalId::parse("bob").unwrap())
        .grant(toolgate_core::Permission::parse("*").unwrap());
    let (done, result) = run_approved(&db.store, &pipeline, &id, bob)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(result.error_kind(), Some(ErrorKind::Rejected));
    assert!(result.error().unwrap().contains("not bob"), "{result:?}");
    assert_eq!(done.status, ApprovalStatus::Executed);

    // Approved, then the tool changed: rejected, saying so.
    let id = pipeline.call(ask("alice")).await.approval_id.unwrap();
    db.store
        .decide_approval(&id, true, "root", None)
        .await
        .unwrap();
    let mut def: ToolDefinition = registry
        .get("send_email")
        .unwrap()
        .spec()
        .definition()
        .clone();
    def.description = "Sends an email to anyone, now with attachments.".into();
    registry.replace_definition(def).unwrap();
    let alice = Principal::new(PrincipalId::parse("alice").unwrap())
        .grant(toolgate_core::Permission::parse("*").unwrap());
    let (_, result) = run_approved(&db.store, &pipeline, &id, alice.clone())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(result.error_kind(), Some(ErrorKind::Rejected));
    assert!(
        result.error().unwrap().contains("the tool changed since"),
        "{result:?}"
    );

    // Approved with other arguments than it runs with (a tampered row): rejected.
    let id = pipeline.call(ask("alice")).await.approval_id.unwrap();
    db.store
        .decide_approval(&id, true, "root", None)
        .await
        .unwrap();
    db.exec("UPDATE approvals SET request_json = replace(request_json, 'a@example.com', 'evil@example.com')").await;
    let (_, result) = run_approved(&db.store, &pipeline, &id, alice)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(result.error_kind(), Some(ErrorKind::Rejected));
    assert!(
        result.error().unwrap().contains("other arguments"),
        "{result:?}"
    );

    // Permissions are checked again when it runs: a grant withdrawn since the request wins.
    let id = pipeline.call(ask("alice")).await.approval_id.unwrap();
    db.store
        .decide_approval(&id, true, "root", None)
        .await
        .unwrap();
    let stripped = Principal::new(PrincipalId::parse("alice").unwrap());
    let (_, result) = run_approved(&db.store, &pipeline, &id, stripped)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        result.error_kind(),
        Some(ErrorKind::Authorization),
        "{result:?}"
    );
    assert_eq!(count.load(Ordering::SeqCst), 0);
}

/// Every change after `cursor`, read `limit` at a time as a follower would; moves `cursor`.
async fn changes(store: &Store, cursor: &mut ApprovalCursor, limit: u32) -> Vec<Approval> {
    let mut out = Vec::new();
    loop {
        let (batch, next) = store.approval_changes(cursor, limit).await.unwrap();
        *cursor = next;
        let done = batch.len() < limit as usize;
        out.extend(batch);
        if done {
            return out;
        }
    }
}

fn statuses(changed: &[Approval]) -> Vec<(String, ApprovalStatus)> {
    changed.iter().map(|a| (a.id.clone(), a.status)).collect()
}

async fn changes_body(db: &TestDb) {
    let store = &db.store;
    // The follower starts where things stand: nothing before is replayed.
    let (old, _) = store.request_approval(new(None)).await.unwrap();
    let mut cursor = store.approval_cursor().await.unwrap();
    assert!(changes(store, &mut cursor, 10).await.is_empty());

    // Another instance (the CLI, say) on the same database makes the changes.
    let other = db.reopen().await;
    let (a, _) = other.request_approval(new(None)).await.unwrap();
    let (b, _) = other.request_approval(new(None)).await.unwrap();
    assert_eq!(
        statuses(&changes(store, &mut cursor, 1).await),
        [
            (a.id.clone(), ApprovalStatus::Pending),
            (b.id.clone(), ApprovalStatus::Pending)
        ]
    );
    other
        .decide_approval(&b.id, false, "cli:alice", Some("no"))
        .await
        .unwrap();
    other
        .decide_approval(&a.id, true, "cli:alice", None)
        .await
        .unwrap();
    let seen = changes(store, &mut cursor, 10).await;
    assert_eq!(
        statuses(&seen),
        [
            (b.id.clone(), ApprovalStatus::Denied),
            (a.id.clone(), ApprovalStatus::Approved)
        ]
    );
    assert_eq!(seen[0].decided_by.as_deref(), Some("cli:alice"));
    // Two changes between reads: the approval appears once, as it stands.
    other.claim_approval(&a.id).await.unwrap().unwrap();
    other
        .finish_approval(&a.id, &json!({"data": 1}))
        .await
        .unwrap();
    assert_eq!(
        statuses(&changes(store, &mut cursor, 10).await),
        [(a.id.clone(), ApprovalStatus::Executed)]
    );

    // Expiry is a change too, found by the read itself; approvals expiring together (one
    // revision) are each read once, however small the pages.
    let mut expiring = Vec::new();
    for _ in 0..3 {
        let mut short = new(None);
        short.ttl = Duration::from_millis(300);
        expiring.push(other.request_approval(short).await.unwrap().0.id);
    }
    expiring.sort();
    let created = changes(store, &mut cursor, 2).await;
    assert_eq!(created.len(), 3);
    tokio::time::sleep(Duration::from_millis(400)).await;
    let expired = changes(store, &mut cursor, 1).await;
    assert!(expired.iter().all(|a| a.status == ApprovalStatus::Expired));
    let mut ids: Vec<String> = expired.iter().map(|a| a.id.clone()).collect();
    ids.sort();
    if created.iter().all(|a| a.status == ApprovalStatus::Pending) {
        assert_eq!(ids, expiring);
    } else {
        // A slow machine: some expired before the first read, which reported them so.
        ids.dedup();
        assert_eq!(ids.len(), expired.len(), "each read once");
    }
    // The untouched approval from before never appeared; the cursor is where a new follower
    // would start.
    assert_eq!(
        store.approval(&old.id).await.unwrap().unwrap().status,
        ApprovalStatus::Pending
    );
    assert_eq!(store.approval_cursor().await.unwrap(), cursor);
    // Recovery after a restart marks running approvals indeterminate: a change.
    let (c, _) = store.request_approval(new(None)).await.unwrap();
    store
        .decide_approval(&c.id, true, "alice", None)
        .await
        .unwrap();
    store.claim_approval(&c.id).await.unwrap().unwrap();
    let _ = changes(store, &mut cursor, 10).await;
    other.recover_approvals().await.unwrap();
    assert_eq!(
        statuses(&changes(store, &mut cursor, 10).await),
        [(c.id.clone(), ApprovalStatus::Indeterminate)]
    );
    other.close().await;
}

async fn concurrent_changes_body(db: &TestDb) {
    // Two instances create and decide approvals at once while a third follows: every approval's
    // final status reaches the follower (revisions grow in commit order, so none is skipped).
    let follower = db.reopen().await;
    let mut cursor = follower.approval_cursor().await.unwrap();
    let other = db.reopen().await;
    let mut writers = Vec::new();
    for store in [db.store.clone(), other.clone()] {
        writers.push(tokio::spawn(async move {
            let mut ids = Vec::new();
            for i in 0..6 {
                let (a, _) = store.request_approval(new(None)).await.unwrap();
                store
                    .decide_approval(&a.id, i % 2 == 0, "racer", None)
                    .await
                    .unwrap();
                ids.push(a.id);
            }
            ids
        }));
    }
    let mut last = std::collections::HashMap::new();
    while !writers.iter().all(tokio::task::JoinHandle::is_finished) {
        for a in changes(&follower, &mut cursor, 3).await {
            last.insert(a.id, a.status);
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let mut ids = Vec::new();
    for w in writers {
        ids.extend(w.await.unwrap());
    }
    for a in changes(&follower, &mut cursor, 3).await {
        last.insert(a.id, a.status);
    }
    assert_eq!(last.len(), ids.len());
    for id in &ids {
        let stored = db.store.approval(id).await.unwrap().unwrap().status;
        assert_eq!(last.get(id), Some(&stored), "{id}");
    }
    follower.close().await;
    other.close().await;
}
