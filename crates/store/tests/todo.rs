//! `todo_manager`'s plans in the store, on each backend: round trip, upsert, isolation between
//! principals and plan keys, atomic read-modify-write under concurrency, a failed edit writes
//! nothing, and plans survive closing and reopening the database (a restart).
#![cfg(test)]

mod common;

use common::TestDb;
use serde_json::{Value, json};
use toolgate_store::{Store, StoreErrorKind};

on_each_backend! {
    plans_round_trip => round_trip_body;
    principals_and_plan_keys_are_separate => separate_body;
    concurrent_updates_lose_nothing => concurrent_body;
    a_failed_edit_writes_nothing => failed_edit_body;
    plans_survive_a_restart => restart_body;
    bad_keys_are_refused => bad_keys_body;
}

fn item(id: &str, status: &str) -> Value {
    json!({"id": id, "content": format!("Step {id}"), "status": status})
}

async fn round_trip_body(db: &TestDb) {
    let store = &db.store;
    assert_eq!(
        store.load_todo_plan("alice", "default").await.unwrap(),
        None
    );
    let items = json!([item("1", "in_progress"), item("2", "pending")]);
    store
        .save_todo_plan("alice", "default", &items)
        .await
        .unwrap();
    assert_eq!(
        store.load_todo_plan("alice", "default").await.unwrap(),
        Some(items)
    );
    // A second save replaces the first (upsert), and unicode survives.
    let replaced = json!([{"id": "a", "content": "Überprüfen ✓ 検証", "status": "completed"}]);
    store
        .save_todo_plan("alice", "default", &replaced)
        .await
        .unwrap();
    assert_eq!(
        store.load_todo_plan("alice", "default").await.unwrap(),
        Some(replaced)
    );
    assert_eq!(db.count("SELECT COUNT(*) FROM todo_plans").await, 1);
}

async fn separate_body(db: &TestDb) {
    let store = &db.store;
    store
        .save_todo_plan("alice", "default", &json!([item("1", "pending")]))
        .await
        .unwrap();
    store
        .save_todo_plan("alice", "release", &json!([item("9", "pending")]))
        .await
        .unwrap();
    store
        .save_todo_plan("bob", "default", &json!([]))
        .await
        .unwrap();
    assert_eq!(
        store.load_todo_plan("alice", "default").await.unwrap(),
        Some(json!([item("1", "pending")]))
    );
    assert_eq!(
        store.load_todo_plan("alice", "release").await.unwrap(),
        Some(json!([item("9", "pending")]))
    );
    assert_eq!(
        store.load_todo_plan("bob", "default").await.unwrap(),
        Some(json!([]))
    );
    assert_eq!(store.load_todo_plan("bob", "release").await.unwrap(), None);
    assert_eq!(
        store.load_todo_plan("carol", "default").await.unwrap(),
        None
    );
}

/// Twenty tasks append one item each to the same plan, through two store instances; every
/// item arrives (no update is lost) and each edit saw the previous one's result.
async fn concurrent_body(db: &TestDb) {
    let other = db.reopen().await;
    let stores = [db.store.clone(), other.clone()];
    let mut tasks = Vec::new();
    for i in 0..20 {
        let store = stores[i % 2].clone();
        tasks.push(tokio::spawn(async move {
            store
                .update_todo_plan("alice", "default", move |current| {
                    let mut items = match current {
                        Some(Value::Array(items)) => items,
                        _ => Vec::new(),
                    };
                    items.push(item(&i.to_string(), "pending"));
                    Ok::<_, String>(Value::Array(items))
                })
                .await
                .unwrap()
                .unwrap()
        }));
    }
    let mut lengths = Vec::new();
    for t in tasks {
        lengths.push(t.await.unwrap().as_array().unwrap().len());
    }
    lengths.sort_unstable();
    assert_eq!(lengths, (1..=20).collect::<Vec<_>>());
    let stored = db.store.load_todo_plan("alice", "default").await.unwrap();
    let mut ids: Vec<u32> = stored
        .unwrap()
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["id"].as_str().unwrap().parse().unwrap())
        .collect();
    ids.sort_unstable();
    assert_eq!(ids, (0..20).collect::<Vec<_>>());
    other.close().await;
}

async fn failed_edit_body(db: &TestDb) {
    let store = &db.store;
    let before = json!([item("1", "pending")]);
    store
        .save_todo_plan("alice", "default", &before)
        .await
        .unwrap();
    let out = store
        .update_todo_plan("alice", "default", |current| {
            assert_eq!(current, Some(json!([item("1", "pending")])));
            Err::<Value, _>("no such item")
        })
        .await
        .unwrap();
    assert_eq!(out, Err("no such item"));
    assert_eq!(
        store.load_todo_plan("alice", "default").await.unwrap(),
        Some(before)
    );
    // A failed edit of a plan that never existed creates nothing.
    let out = store
        .update_todo_plan("alice", "fresh", |current| {
            assert_eq!(current, None);
            Err::<Value, _>(())
        })
        .await
        .unwrap();
    assert_eq!(out, Err(()));
    assert_eq!(store.load_todo_plan("alice", "fresh").await.unwrap(), None);
    // The next update still works (the failed one released the lock).
    let saved = store
        .update_todo_plan("alice", "fresh", |_| {
            Ok::<_, ()>(json!([item("7", "pending")]))
        })
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        store.load_todo_plan("alice", "fresh").await.unwrap(),
        Some(saved)
    );
}

/// Saved through one store, closed, opened again from the same location: the plan is there.
async fn restart_body(db: &TestDb) {
    let first = db.reopen().await;
    let items = json!([item("1", "completed"), item("2", "in_progress")]);
    first
        .update_todo_plan("alice", "default", |_| Ok::<_, ()>(items.clone()))
        .await
        .unwrap()
        .unwrap();
    first.close().await;
    drop(first);
    let second = Store::open(&db.url, &db.options).await.unwrap();
    assert_eq!(
        second.load_todo_plan("alice", "default").await.unwrap(),
        Some(items)
    );
    second.close().await;
}

async fn bad_keys_body(db: &TestDb) {
    let store = &db.store;
    for (principal, plan) in [("", "default"), ("alice", ""), ("alice", &"x".repeat(257))] {
        let err = store.load_todo_plan(principal, plan).await.unwrap_err();
        assert_eq!(err.kind(), StoreErrorKind::Invalid, "{err}");
        let err = store
            .save_todo_plan(principal, plan, &json!([]))
            .await
            .unwrap_err();
        assert_eq!(err.kind(), StoreErrorKind::Invalid, "{err}");
    }
}
