//! Shared quotas: rate limits and concurrency caps counted in PostgreSQL hold across instances
//! (two stores on one schema stand for two instances), a killed instance's slots come back, and
//! SQLite keeps counting in process. The scenarios are test-support's `quota` ones, which the
//! Redis counter passes too.
#![cfg(test)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use toolgate_core::SharedCounter;
use toolgate_store::Store;
use toolgate_test_support::quota as scenario;

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

fn counter(store: &Store) -> Arc<dyn SharedCounter> {
    store
        .shared_quotas()
        .expect("PostgreSQL has a shared counter")
}

async fn close(db: common::TestDb, other: Store) {
    other.close().await;
    db.cleanup().await;
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
    scenario::a_rate_limit_holds_across_instances(counter(&db.store), counter(&other)).await;
    close(db, other).await;
}

#[tokio::test]
async fn a_shared_bucket_refills_on_the_database_clock() {
    let Some((db, other)) = two_instances().await else {
        return;
    };
    scenario::a_shared_bucket_refills(counter(&db.store), counter(&other)).await;
    close(db, other).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrency_slots_are_shared_and_given_back() {
    let Some((db, other)) = two_instances().await else {
        return;
    };
    scenario::concurrency_slots_are_shared_and_given_back(counter(&db.store), counter(&other))
        .await;
    close(db, other).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_instances_slots_come_back_and_a_live_ones_are_renewed() {
    let Some((db, other)) = two_instances().await else {
        return;
    };
    let lease = Duration::from_millis(900);
    let alive = db.store.shared_quotas_with(lease).unwrap();
    let dying = other.shared_quotas_with(lease).unwrap();
    scenario::a_dead_instances_slots_come_back(alive, dying, lease).await;
    close(db, other).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_stages_refuse_as_before_across_instances() {
    let Some((db, other)) = two_instances().await else {
        return;
    };
    scenario::the_stages_refuse_as_before_across_instances(counter(&db.store), counter(&other))
        .await;
    close(db, other).await;
}

#[tokio::test]
async fn an_unreachable_count_refuses_the_call() {
    let Some((db, other)) = two_instances().await else {
        return;
    };
    let shared = counter(&other);
    other.close().await;
    scenario::an_unreachable_count_refuses_the_call(
        shared,
        "The shared limit principal/ann could not be counted in the database",
    )
    .await;
    db.cleanup().await;
}
