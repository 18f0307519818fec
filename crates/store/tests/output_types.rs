//! `validate_output`'s output types in the store, on each backend: add, replace, list, remove,
//! survive a restart, bad names refused.
#![cfg(test)]

mod common;

use common::TestDb;
use serde_json::json;
use toolgate_store::{Store, StoreErrorKind};

on_each_backend! {
    output_types_round_trip => round_trip_body;
    output_types_survive_a_restart => restart_body;
    bad_output_type_names_are_refused => bad_names_body;
}

async fn round_trip_body(db: &TestDb) {
    let store = &db.store;
    assert!(store.output_types().await.unwrap().is_empty());
    let v1 = json!({"type": "object", "required": ["a"]});
    assert!(!store.put_output_type("report", &v1).await.unwrap());
    let v2 = json!({"schema": {"type": "object"}, "description": "A report"});
    assert!(
        store.put_output_type("report", &v2).await.unwrap(),
        "second put replaces"
    );
    store.put_output_type("alpha.v1", &v1).await.unwrap();
    let all = store.output_types().await.unwrap();
    assert_eq!(
        all,
        vec![("alpha.v1".to_owned(), v1), ("report".to_owned(), v2)]
    );
    assert!(store.remove_output_type("report").await.unwrap());
    assert!(!store.remove_output_type("report").await.unwrap());
    assert_eq!(store.output_types().await.unwrap().len(), 1);
}

async fn restart_body(db: &TestDb) {
    db.store
        .put_output_type("kept", &json!({"type": "string"}))
        .await
        .unwrap();
    let again = Store::open(&db.url, &db.options).await.unwrap();
    assert_eq!(
        again.output_types().await.unwrap(),
        vec![("kept".to_owned(), json!({"type": "string"}))]
    );
}

async fn bad_names_body(db: &TestDb) {
    for bad in ["", "has space", "semi;colon", &"x".repeat(129)] {
        let e = db.store.put_output_type(bad, &json!({})).await.unwrap_err();
        assert_eq!(e.kind(), StoreErrorKind::Invalid, "{bad:?}");
    }
}
