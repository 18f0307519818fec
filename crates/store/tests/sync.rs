//! A registry kept in step with the store follows changes made through another instance (as
//! another process or toolgate instance would make them), on both backends.
#![cfg(test)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use toolgate_core::{CancellationToken, Registry};
use toolgate_store::Tier;

use crate::common::TestDb;

on_each_backend! {
    registry_follows_changes_from_another_instance => follows_body;
}

/// Waits (at most 10 s) until `check` holds.
async fn eventually(what: &str, check: impl Fn() -> bool) {
    for _ in 0..200 {
        if check() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("timed out waiting until {what}");
}

async fn follows_body(db: &TestDb) {
    let plan = Tier::named("enterprise").unwrap();
    // One definition exists before the follower starts: it joins at start.
    db.store
        .insert_definition(
            &common::spec("first_tool", "The first tool, stored before start."),
            "t",
            &plan,
        )
        .await
        .unwrap();
    let follower_store = db.reopen().await;
    let registry = Arc::new(Registry::new());
    let from = follower_store.load_into(&registry).await.unwrap();
    assert!(registry.get("first_tool").is_some());
    let stop = CancellationToken::new();
    let task = follower_store.keep_in_sync(Arc::clone(&registry), from, stop.clone());

    // Changes through the other instance reach the follower's registry.
    db.store
        .insert_definition(
            &common::spec("second_tool", "A second tool, added while running."),
            "t",
            &plan,
        )
        .await
        .unwrap();
    eventually("second_tool is registered", || {
        registry.get("second_tool").is_some()
    })
    .await;

    let mut changed = common::spec("second_tool", "x").definition().clone();
    changed.description = "The second tool, described anew by an update.".into();
    db.store
        .update_definition(&common::spec_of(&changed), "t")
        .await
        .unwrap();
    eventually("the update is applied", || {
        registry
            .get("second_tool")
            .is_some_and(|t| t.spec().description().contains("described anew"))
    })
    .await;

    db.store.delete_definition("first_tool", "t").await.unwrap();
    eventually("first_tool is removed", || {
        registry.get("first_tool").is_none()
    })
    .await;

    stop.cancel();
    tokio::time::timeout(Duration::from_secs(5), task)
        .await
        .expect("the sync task stops when told")
        .unwrap();
    follower_store.close().await;
}
