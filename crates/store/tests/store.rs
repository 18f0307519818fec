//! The store's behaviour, run once per backend (SQLite always, PostgreSQL when reachable).
#![cfg(test)]

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use chrono::Utc;
use common::{TestDb, spec, spec_of};
use serde_json::{Value, json};
use toolgate_core::{
    CallId, CallOrigin, Category, Effect, ErrorKind, Outcome, ParamType, Parameter,
    PipelineBuilder, Registry, ToolBuilder, ToolError,
};
use toolgate_store::{
    AuditObserver, AuditQuery, AuditRecord, AuditStage, AuditStart, EventKind, Store,
    StoreErrorKind, Tier,
};

const DESC: &str = "Looks up a thing by its name. Use when the user names a thing.";

fn plan(name: &str) -> Tier {
    Tier::named(name).unwrap()
}

on_each_backend! {
    definitions_round_trip => definitions_round_trip_body;
    conflict_and_not_found => conflict_and_not_found_body;
    core_plan_cannot_create_custom_definitions => core_plan_body;
    writer_pro_is_limited_to_ten => writer_pro_body;
    concurrent_inserts_cannot_pass_the_limit => concurrent_limit_body;
    events_are_written_and_published => events_body;
    audit_records_success_and_every_error_kind => audit_records_body;
    large_output_round_trips_byte_for_byte => large_output_body;
    verify_detects_an_edited_row => verify_edit_body;
    verify_detects_a_deleted_row => verify_delete_body;
    started_without_finished_is_interrupted => interrupted_body;
    concurrent_audit_appends_keep_one_chain => concurrent_audit_body;
    queued_outcomes_commit_on_their_own_and_before_a_later_awaited_one => queued_audit_body;
    content_digests_are_kept_and_chained => content_digests_body;
    audit_stage_refuses_side_effects_when_the_log_is_unwritable => stage_refuses_body;
    pipeline_end_to_end => pipeline_body;
    another_instance_sees_changes => cross_instance_body;
}

async fn definitions_round_trip_body(db: &TestDb) {
    let store = &db.store;
    let v1 = spec("lookup_thing", DESC);
    let stored = store
        .insert_definition(&v1, "alice", &plan("enterprise"))
        .await
        .unwrap();
    assert_eq!(stored.version, 1);
    assert_eq!(stored.definition_hash, v1.definition_hash());
    assert_eq!(stored.created_by, "alice");
    let read = store.definition("lookup_thing").await.unwrap().unwrap();
    assert_eq!(read, stored);
    assert_eq!(store.definitions().await.unwrap(), vec![stored.clone()]);

    // update: new version, changed fields, history keeps v1
    let mut def2 = v1.definition().clone();
    def2.description = "Looks up a thing by its exact name. Use when the user names one.".into();
    def2.tags = vec!["test".into(), "lookup".into()];
    def2.effect = Some(Effect::Write);
    let v2 = spec_of(&def2);
    let (stored2, changed) = store.update_definition(&v2, "bob").await.unwrap();
    assert_eq!(stored2.version, 2);
    assert_eq!(changed, vec!["description", "effect", "tags"]);
    assert_eq!(stored2.created_at, stored.created_at);
    assert!(stored2.updated_at >= stored.updated_at);
    assert_eq!(stored2.created_by, "bob");
    assert_eq!(
        store.definition("lookup_thing").await.unwrap().unwrap(),
        stored2
    );

    // an update that changes nothing writes nothing
    let (same, none) = store.update_definition(&v2, "bob").await.unwrap();
    assert!(none.is_empty());
    assert_eq!(same.version, 2);

    let history = store.history("lookup_thing").await.unwrap();
    assert_eq!(history.len(), 2);
    assert_eq!(history[0].definition, *v1.definition());
    assert_eq!(history[0].definition_hash, v1.definition_hash());
    assert_eq!(history[1].definition, def2);
    assert_eq!(history[1].definition_hash, v2.definition_hash());

    // remove: gone from the live set, history kept with deleted_at
    let removed = store
        .delete_definition("lookup_thing", "carol")
        .await
        .unwrap();
    assert_eq!(removed.version, 2);
    assert!(removed.deleted_at.is_some());
    assert!(store.definition("lookup_thing").await.unwrap().is_none());
    assert!(store.definitions().await.unwrap().is_empty());
    let history = store.history("lookup_thing").await.unwrap();
    assert_eq!(history.len(), 2);
    assert!(history.iter().all(|v| v.deleted_at.is_some()));

    // re-adding continues the numbering
    let again = store
        .insert_definition(&v1, "alice", &plan("enterprise"))
        .await
        .unwrap();
    assert_eq!(again.version, 3);
    let history = store.history("lookup_thing").await.unwrap();
    assert_eq!(
        history.iter().map(|v| v.version).collect::<Vec<_>>(),
        vec![1, 2, 3]
    );
    assert!(history[2].deleted_at.is_none());
    assert!(store.history("never_stored").await.unwrap().is_empty());

    // the stored definition survives a reopen (a second instance reads the same)
    let other = db.reopen().await;
    assert_eq!(
        other.definition("lookup_thing").await.unwrap().unwrap(),
        again
    );
    other.close().await;
}

async fn conflict_and_not_found_body(db: &TestDb) {
    let store = &db.store;
    let s = spec("dup_tool", DESC);
    store
        .insert_definition(&s, "a", &plan("enterprise"))
        .await
        .unwrap();
    let err = store
        .insert_definition(&s, "a", &plan("enterprise"))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), StoreErrorKind::Conflict);
    assert!(err.to_string().contains("dup_tool"), "{err}");

    let missing = spec("missing_tool", DESC);
    let err = store.update_definition(&missing, "a").await.unwrap_err();
    assert_eq!(err.kind(), StoreErrorKind::NotFound);
    assert!(err.to_string().contains("missing_tool"), "{err}");
    let err = store
        .delete_definition("missing_tool", "a")
        .await
        .unwrap_err();
    assert_eq!(err.kind(), StoreErrorKind::NotFound);
    // a conflict writes nothing: one version, one event
    assert_eq!(store.history("dup_tool").await.unwrap().len(), 1);
    assert_eq!(store.events(0, 100).await.unwrap().len(), 1);
}

/// The `core` plan cannot create custom definitions (`docs/tool-model.md#plans`).
async fn core_plan_body(db: &TestDb) {
    let store = &db.store;
    let err = store
        .insert_definition(&spec("custom_one", DESC), "a", &plan("core"))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), StoreErrorKind::PlanLimit);
    let msg = err.to_string();
    assert!(msg.contains("`core`"), "{msg}");
    assert!(
        msg.contains("plan = \"writer_pro\"") && msg.contains("(10)"),
        "{msg}"
    );
    assert!(store.definitions().await.unwrap().is_empty());
    assert!(store.history("custom_one").await.unwrap().is_empty());
    assert!(store.events(0, 10).await.unwrap().is_empty());
}

/// `writer_pro` is limited to 10 custom definitions (`docs/tool-model.md#plans`).
async fn writer_pro_body(db: &TestDb) {
    let store = &db.store;
    let wp = plan("writer_pro");
    for i in 0..10 {
        store
            .insert_definition(&spec(&format!("tool_{i}"), DESC), "a", &wp)
            .await
            .unwrap();
    }
    let err = store
        .insert_definition(&spec("tool_10", DESC), "a", &wp)
        .await
        .unwrap_err();
    assert_eq!(err.kind(), StoreErrorKind::PlanLimit);
    let msg = err.to_string();
    assert!(
        msg.contains("`writer_pro`")
            && msg.contains("10")
            && msg.contains("plan = \"teams\"` (50)"),
        "{msg}"
    );
    assert_eq!(store.definitions().await.unwrap().len(), 10);
    // updates do not count; removing one frees a slot
    let mut def = spec("tool_3", DESC).definition().clone();
    def.title = Some("Tool three".into());
    store.update_definition(&spec_of(&def), "a").await.unwrap();
    store.delete_definition("tool_0", "a").await.unwrap();
    store
        .insert_definition(&spec("tool_10", DESC), "a", &wp)
        .await
        .unwrap();
    assert_eq!(store.definitions().await.unwrap().len(), 10);
    // a bigger plan allows more
    store
        .insert_definition(&spec("tool_11", DESC), "a", &plan("teams"))
        .await
        .unwrap();
}

async fn concurrent_limit_body(db: &TestDb) {
    let wp = plan("writer_pro");
    for i in 0..9 {
        db.store
            .insert_definition(&spec(&format!("base_{i}"), DESC), "a", &wp)
            .await
            .unwrap();
    }
    // two instances, eight racers for the last slot
    let second = db.reopen().await;
    let mut tasks = Vec::new();
    for i in 0..8 {
        let store = if i % 2 == 0 {
            db.store.clone()
        } else {
            second.clone()
        };
        let wp = wp.clone();
        tasks.push(tokio::spawn(async move {
            store
                .insert_definition(&spec(&format!("racer_{i}"), DESC), "a", &wp)
                .await
        }));
    }
    let mut ok = 0;
    for t in tasks {
        match t.await.unwrap() {
            Ok(_) => ok += 1,
            Err(e) => assert_eq!(e.kind(), StoreErrorKind::PlanLimit, "{e}"),
        }
    }
    assert_eq!(ok, 1, "exactly one racer may take the last slot");
    assert_eq!(db.store.definitions().await.unwrap().len(), 10);
    second.close().await;
}

async fn events_body(db: &TestDb) {
    let store = &db.store;
    let mut rx = store.subscribe();
    let s1 = spec("evented", DESC);
    store
        .insert_definition(&s1, "alice", &plan("enterprise"))
        .await
        .unwrap();
    let mut def2 = s1.definition().clone();
    def2.category = Some(Category::Knowledge);
    store
        .update_definition(&spec_of(&def2), "bob")
        .await
        .unwrap();
    store.delete_definition("evented", "carol").await.unwrap();
    store
        .record_validated("evented", Category::Knowledge, 2, Duration::from_micros(40))
        .await
        .unwrap();

    let mut seen = Vec::new();
    for _ in 0..4 {
        let ev = tokio::time::timeout(Duration::from_secs(5), rx.recv())
            .await
            .expect("event published in-process")
            .unwrap();
        seen.push(ev);
    }
    let kinds: Vec<EventKind> = seen.iter().map(|e| e.kind).collect();
    assert_eq!(
        kinds,
        vec![
            EventKind::Created,
            EventKind::Updated,
            EventKind::Deleted,
            EventKind::Validated
        ]
    );
    assert_eq!(seen[1].changed_fields, vec!["category"]);
    assert_eq!(seen[0].actor, "alice");
    assert_eq!(seen[2].actor, "carol");
    assert_eq!(seen[3].detail.as_ref().unwrap()["parameterCount"], json!(2));
    assert!(seen.windows(2).all(|w| w[0].id < w[1].id));

    // the same events are stored
    let stored = store.events(0, 100).await.unwrap();
    assert_eq!(stored, seen);
    let after = store.events(seen[0].id, 2).await.unwrap();
    assert_eq!(after, seen[1..3].to_vec());
    // wire shape
    let wire = serde_json::to_value(&seen[1]).unwrap();
    assert_eq!(wire["kind"], json!("updated"));
    assert_eq!(wire["changedFields"], json!(["category"]));
    assert!(wire["at"].is_string());
}

fn record(call_id: CallId, tool: &str, outcome: Outcome) -> AuditRecord {
    AuditRecord {
        seq: None,
        call_id,
        tool: tool.into(),
        definition_hash: Some("ab".repeat(32)),
        principal: "alice".into(),
        input: json!({"q": "x", "n": 1.5}),
        outcome,
        attempts: 2,
        duration_ms: 12.25,
        fetched_at: Utc::now(),
        truncated: false,
        output_ref: None,
        content: Vec::new(),
        recorded_at: None,
        origin: None,
        cancelled_by: None,
    }
}

async fn audit_records_body(db: &TestDb) {
    let store = &db.store;
    let ok_id = CallId::new();
    store
        .audit_finished(&record(
            ok_id,
            "reader",
            Outcome::Data(json!({"rows": [1, 2, 3]})),
        ))
        .await
        .unwrap();
    let mut ids = Vec::new();
    for kind in ErrorKind::ALL {
        let id = CallId::new();
        ids.push((id, kind));
        let message = format!("it failed: {kind}");
        store
            .audit_finished(&record(id, "failing", Outcome::Error { kind, message }))
            .await
            .unwrap();
    }
    let all = store
        .audit(&AuditQuery {
            limit: 100,
            ..AuditQuery::default()
        })
        .await
        .unwrap();
    assert_eq!(all.len(), 1 + ErrorKind::ALL.len());
    assert!(all.windows(2).all(|w| w[0].seq > w[1].seq), "newest first");
    let first = all.last().unwrap();
    assert_eq!(first.call_id, ok_id);
    assert_eq!(first.outcome, Outcome::Data(json!({"rows": [1, 2, 3]})));
    assert_eq!(first.input, json!({"q": "x", "n": 1.5}));
    assert_eq!((first.attempts, first.duration_ms), (2, 12.25));
    assert_eq!(first.principal, "alice");
    assert_eq!(
        first.definition_hash.as_deref(),
        Some("ab".repeat(32).as_str())
    );

    for (id, kind) in &ids {
        let call = store.audit_call(*id).await.unwrap().unwrap();
        assert!(call.started.is_none());
        let fin = call.finished.unwrap();
        assert_eq!(fin.error_kind(), Some(*kind));
        assert_eq!(
            fin.outcome,
            Outcome::Error {
                kind: *kind,
                message: format!("it failed: {kind}")
            }
        );
    }
    // filters and cursor
    let readers = store
        .audit(&AuditQuery {
            tool: Some("reader".into()),
            ..AuditQuery::default()
        })
        .await
        .unwrap();
    assert_eq!(readers.len(), 1);
    let page1 = store
        .audit(&AuditQuery {
            limit: 5,
            ..AuditQuery::default()
        })
        .await
        .unwrap();
    let page2 = store
        .audit(&AuditQuery {
            limit: 100,
            before: page1.last().unwrap().seq,
            ..AuditQuery::default()
        })
        .await
        .unwrap();
    assert_eq!(page1.len() + page2.len(), all.len());
    assert!(page2[0].seq < page1[4].seq);
    assert!(store.audit_call(CallId::new()).await.unwrap().is_none());
    let wire = serde_json::to_value(&all[0]).unwrap();
    assert!(wire.get("errorKind").is_some() && wire.get("data").is_none());
    assert!(store.verify().await.unwrap().ok);

    // Where a call came from and who cancelled it are kept, covered by the hash chain.
    let from_client = CallId::new();
    let mut cancelled = record(
        from_client,
        "writer",
        Outcome::Error {
            kind: ErrorKind::Cancelled,
            message: "Request was cancelled".into(),
        },
    );
    cancelled.origin = Some(CallOrigin::mcp("Claude Desktop", "0.9.1"));
    cancelled.cancelled_by = Some("client".into());
    store.audit_finished(&cancelled).await.unwrap();
    let fin = store
        .audit_call(from_client)
        .await
        .unwrap()
        .unwrap()
        .finished
        .unwrap();
    assert_eq!(fin.origin, Some(CallOrigin::mcp("Claude Desktop", "0.9.1")));
    assert_eq!(fin.cancelled_by.as_deref(), Some("client"));
    let wire = serde_json::to_value(&fin).unwrap();
    assert_eq!(
        wire["origin"],
        json!({"via": "mcp", "client": "Claude Desktop", "version": "0.9.1"})
    );
    assert_eq!(wire["cancelledBy"], "client");
    assert!(store.verify().await.unwrap().ok);
    // An entry without them has neither key.
    let wire = serde_json::to_value(&all[0]).unwrap();
    assert!(wire.get("origin").is_none() && wire.get("cancelledBy").is_none());
}

async fn large_output_body(db: &TestDb) {
    let store = &db.store;
    let id = CallId::new();
    let bytes: Vec<u8> = (0..50_000u32).map(|i| (i * 7 % 256) as u8).collect();
    let reference = store.store_output(id, &bytes).await.unwrap();
    assert_eq!(reference, format!("toolgate:output/{id}"));
    assert_eq!(store.output(id).await.unwrap().unwrap(), bytes);
    assert!(store.output(CallId::new()).await.unwrap().is_none());
}

async fn fill_log(store: &Store, n: usize) {
    for i in 0..n {
        store
            .audit_finished(&record(CallId::new(), "t", Outcome::Data(json!(i))))
            .await
            .unwrap();
    }
}

async fn verify_edit_body(db: &TestDb) {
    fill_log(&db.store, 5).await;
    let report = db.store.verify().await.unwrap();
    assert!(report.ok && report.entries == 5, "{report:?}");
    let n = db
        .exec("UPDATE audit_log SET input_json = '{\"q\":\"edited\"}' WHERE seq = 3")
        .await;
    assert_eq!(n, 1);
    let report = db.store.verify().await.unwrap();
    assert!(!report.ok);
    assert_eq!(report.entries, 2);
    let broken = report.first_broken.unwrap();
    assert_eq!(broken.seq, 3);
    assert!(broken.reason.contains("altered"), "{}", broken.reason);
}

async fn verify_delete_body(db: &TestDb) {
    fill_log(&db.store, 5).await;
    assert_eq!(db.exec("DELETE FROM audit_log WHERE seq = 2").await, 1);
    let report = db.store.verify().await.unwrap();
    let broken = report.first_broken.unwrap();
    assert_eq!(broken.seq, 3);
    assert!(broken.reason.contains("missing"), "{}", broken.reason);

    // a deleted row whose successors were renumbered is caught by prev_hash
    assert_eq!(
        db.exec("UPDATE audit_log SET seq = seq - 1 WHERE seq > 2")
            .await,
        3
    );
    let report = db.store.verify().await.unwrap();
    let broken = report.first_broken.unwrap();
    assert_eq!(broken.seq, 2);
    assert!(broken.reason.contains("prev_hash"), "{}", broken.reason);
}

async fn interrupted_body(db: &TestDb) {
    let id = CallId::new();
    let start = AuditStart {
        call_id: id,
        tool: "writer".into(),
        definition_hash: "cd".repeat(32),
        principal: "bob".into(),
        input: json!({"path": "a.txt"}),
        fetched_at: Utc::now(),
    };
    db.store.audit_started(&start).await.unwrap();
    let call = db.store.audit_call(id).await.unwrap().unwrap();
    assert!(call.interrupted());
    let got = call.started.unwrap();
    assert_eq!(
        (got.tool.as_str(), got.input),
        ("writer", json!({"path": "a.txt"}))
    );
    // started entries are not listed as calls
    assert!(
        db.store
            .audit(&AuditQuery::default())
            .await
            .unwrap()
            .is_empty()
    );
}

async fn concurrent_audit_body(db: &TestDb) {
    let second = db.reopen().await;
    let mut tasks = Vec::new();
    for i in 0..40 {
        let store = if i % 2 == 0 {
            db.store.clone()
        } else {
            second.clone()
        };
        tasks.push(tokio::spawn(async move {
            store
                .audit_finished(&record(CallId::new(), "t", Outcome::Data(json!(i))))
                .await
        }));
    }
    for t in tasks {
        t.await.unwrap().unwrap();
    }
    let report = db.store.verify().await.unwrap();
    assert!(report.ok, "{report:?}");
    assert_eq!(report.entries, 40);
    second.close().await;
}

async fn queued_audit_body(db: &TestDb) {
    let store = &db.store;
    // Queued outcomes wait for company (group commit); an outcome someone waits for is
    // committed together with everything queued before it, in order.
    for i in 0..3 {
        store
            .audit_finished_queued(&record(CallId::new(), "t", Outcome::Data(json!(i))))
            .await
            .unwrap();
    }
    store
        .audit_finished(&record(CallId::new(), "t", Outcome::Data(json!(3))))
        .await
        .unwrap();
    // Read behind the store's back: `audit` would flush first.
    assert_eq!(db.count("SELECT COUNT(*) FROM audit_log").await, 4);

    // Queued outcomes with nothing after them are committed without a flush.
    for i in 4..6 {
        store
            .audit_finished_queued(&record(CallId::new(), "t", Outcome::Data(json!(i))))
            .await
            .unwrap();
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while db.count("SELECT COUNT(*) FROM audit_log").await < 6 {
        assert!(
            std::time::Instant::now() < deadline,
            "queued audit entries were not committed without a flush"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let records = store
        .audit(&AuditQuery {
            limit: 10,
            ..AuditQuery::default()
        })
        .await
        .unwrap();
    // Arrival order is chain order.
    let mut chain: Vec<(i64, Value)> = records
        .iter()
        .map(|r| match &r.outcome {
            Outcome::Data(d) => (r.seq.unwrap(), d.clone()),
            Outcome::Error { .. } => (r.seq.unwrap(), Value::Null),
        })
        .collect();
    chain.sort_by_key(|(seq, _)| *seq);
    assert_eq!(chain, (0..6).map(|i| (i + 1, json!(i))).collect::<Vec<_>>());
    assert!(store.verify().await.unwrap().ok);
}

async fn content_digests_body(db: &TestDb) {
    let store = &db.store;
    // Through the pipeline: a tool that returns an image and an embedded resource beside its data.
    let png = "iVBORw0KGgo=";
    let tool = ToolBuilder::new(
        "draw_chart",
        "Draws a chart of the numbers. Use when the user asks for a picture of data.",
    )
    .handler(move |_, ctx| async move {
        ctx.attach(toolgate_core::Content::image(png, "image/png"));
        ctx.attach(toolgate_core::Content::resource_text(
            "chart://1",
            "text/csv",
            "a,b\n1,2",
        ));
        // A link (annotated, as upstream MCP servers send them) is recorded like the others.
        let mut link = toolgate_core::Content::resource_link("chart://1.csv", "chart.csv");
        if let toolgate_core::Content::ResourceLink { mime_type, .. } = &mut link {
            *mime_type = Some("text/csv".into());
        }
        ctx.attach(link.with_annotations(toolgate_core::Annotations {
            audience: Some(vec![toolgate_core::Role::User]),
            ..Default::default()
        }));
        Ok(json!({"points": 2}))
    });
    let registry = Arc::new(Registry::new());
    registry.register(Arc::new(tool)).unwrap();
    let pipeline = PipelineBuilder::new(registry)
        .observer(Arc::new(AuditObserver::new(store.clone())))
        .build();
    let result = pipeline
        .call(toolgate_core::CallRequest::new("draw_chart", json!({})))
        .await;
    assert!(result.is_ok(), "{result:?}");
    let call = store.audit_call(result.call_id).await.unwrap().unwrap();
    let finished = call.finished.unwrap();
    let sha = |s: &str| {
        use sha2::Digest;
        sha2::Sha256::digest(s.as_bytes())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<String>()
    };
    assert_eq!(
        serde_json::to_value(&finished.content).unwrap(),
        json!([
            {"type": "image", "mimeType": "image/png", "bytes": png.len(), "sha256": sha(png)},
            {"type": "resource", "mimeType": "text/csv", "uri": "chart://1", "bytes": 7, "sha256": sha("a,b\n1,2")},
            {"type": "resource_link", "mimeType": "text/csv", "uri": "chart://1.csv", "bytes": 13, "sha256": sha("chart://1.csv")}
        ])
    );
    let wire = serde_json::to_value(&finished).unwrap();
    assert_eq!(wire["content"][0]["type"], json!("image"));
    assert!(store.verify().await.unwrap().ok);

    // A call without content has no `content` on the wire.
    store
        .audit_finished(&record(CallId::new(), "t", Outcome::Data(json!(1))))
        .await
        .unwrap();
    let plain = store
        .audit(&AuditQuery {
            limit: 1,
            ..AuditQuery::default()
        })
        .await
        .unwrap();
    assert!(plain[0].content.is_empty());
    assert!(
        serde_json::to_value(&plain[0])
            .unwrap()
            .get("content")
            .is_none()
    );

    // The chain covers the digests: editing one is detected.
    assert_eq!(
        db.exec("UPDATE audit_log SET content_json = replace(content_json, 'image/png', 'image/gif') WHERE content_json IS NOT NULL")
            .await,
        1
    );
    let report = store.verify().await.unwrap();
    assert!(!report.ok, "{report:?}");
}

fn counting_write_tool(runs: Arc<AtomicU32>) -> toolgate_core::FnTool {
    ToolBuilder::new(
        "write_note",
        "Writes a note to the notebook. Use when the user asks to remember something.",
    )
    .effect(Effect::Write)
    .param(
        Parameter::new("text", ParamType::String)
            .description("The note")
            .required(),
    )
    .param(
        Parameter::new("token", ParamType::String)
            .description("API token")
            .sensitive(),
    )
    .handler(move |args, _ctx| {
        let runs = Arc::clone(&runs);
        async move {
            runs.fetch_add(1, Ordering::SeqCst);
            Ok(json!({"saved": args["text"]}))
        }
    })
}

fn read_tool() -> toolgate_core::FnTool {
    ToolBuilder::new(
        "read_notes",
        "Reads the notes in the notebook. Use when the user asks what was remembered.",
    )
    .handler(|_args, _ctx| async move { Ok(json!(["a", "b"])) })
}

fn big_tool() -> toolgate_core::FnTool {
    ToolBuilder::new(
        "big_report",
        "Produces a long report of every note. Use when the user wants everything.",
    )
    .handler(|_args, _ctx| async move { Ok(Value::String("é".repeat(8_000))) })
}

fn failing_side_effect() -> toolgate_core::FnTool {
    ToolBuilder::new(
        "send_mail",
        "Sends an email to a colleague. Use only when the user asks to send mail.",
    )
    .effect(Effect::SideEffect)
    .handler(|_args, _ctx| async move { Err(ToolError::execution("SMTP server said no")) })
}

fn pipeline(store: &Store, runs: Arc<AtomicU32>) -> toolgate_core::Pipeline {
    let registry = Arc::new(Registry::new());
    registry
        .register(Arc::new(counting_write_tool(runs)))
        .unwrap();
    registry.register(Arc::new(read_tool())).unwrap();
    registry.register(Arc::new(big_tool())).unwrap();
    registry.register(Arc::new(failing_side_effect())).unwrap();
    PipelineBuilder::new(registry)
        .stage(Arc::new(AuditStage::new(store.clone())))
        .observer(Arc::new(AuditObserver::new(store.clone())))
        .build()
}

async fn stage_refuses_body(db: &TestDb) {
    let runs = Arc::new(AtomicU32::new(0));
    let store = db.reopen().await;
    let p = pipeline(&store, Arc::clone(&runs));
    store.close().await;
    let result = p
        .call(toolgate_core::CallRequest::new(
            "write_note",
            json!({"text": "hi"}),
        ))
        .await;
    assert_eq!(
        result.error_kind(),
        Some(ErrorKind::Unavailable),
        "{result:?}"
    );
    assert!(result.error().unwrap().contains("audit log"), "{result:?}");
    assert_eq!(runs.load(Ordering::SeqCst), 0, "the write must not run");
    // a read-only call still runs (its record cannot be written; that is logged)
    let read = p
        .call(toolgate_core::CallRequest::new("read_notes", json!({})))
        .await;
    assert!(read.is_ok(), "{read:?}");
}

async fn pipeline_body(db: &TestDb) {
    let store = &db.store;
    let runs = Arc::new(AtomicU32::new(0));
    let p = pipeline(store, Arc::clone(&runs));

    let write = p
        .call(toolgate_core::CallRequest::new(
            "write_note",
            json!({"text": "milk", "token": "s3cret"}),
        ))
        .await;
    assert!(write.is_ok(), "{write:?}");
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    let call = store.audit_call(write.call_id).await.unwrap().unwrap();
    assert!(!call.interrupted());
    let started = call.started.unwrap();
    let finished = call.finished.unwrap();
    assert_eq!(started.tool, "write_note");
    assert_eq!(started.input["token"], json!("[REDACTED]"));
    assert_eq!(finished.input["token"], json!("[REDACTED]"));
    assert_eq!(finished.outcome, Outcome::Data(json!({"saved": "milk"})));
    assert_eq!(started.definition_hash, finished.definition_hash.unwrap());
    assert!(started.fetched_at <= Utc::now());
    // One call, one time: both entries carry the envelope's fetchedAt.
    // (the store keeps microseconds).
    let at = chrono::SubsecRound::trunc_subsecs(write.fetched_at, 6);
    assert_eq!(started.fetched_at, at);
    assert_eq!(finished.fetched_at, at);

    let read = p
        .call(toolgate_core::CallRequest::new("read_notes", json!({})))
        .await;
    let call = store.audit_call(read.call_id).await.unwrap().unwrap();
    assert!(
        call.started.is_none(),
        "read-only calls get no started entry"
    );
    assert_eq!(
        call.finished.unwrap().outcome,
        Outcome::Data(json!(["a", "b"]))
    );

    let failed = p
        .call(toolgate_core::CallRequest::new("send_mail", json!({})))
        .await;
    let call = store.audit_call(failed.call_id).await.unwrap().unwrap();
    assert!(call.started.is_some());
    assert_eq!(
        call.finished.unwrap().error_kind(),
        Some(ErrorKind::Execution)
    );

    // a made-up name (NUL included) is recorded too; PostgreSQL text cannot hold NUL
    let unknown = p
        .call(toolgate_core::CallRequest::new("no_such\0tool", json!({})))
        .await;
    let call = store.audit_call(unknown.call_id).await.unwrap().unwrap();
    let fin = call.finished.unwrap();
    assert_eq!(fin.error_kind(), Some(ErrorKind::NotFound));
    assert!(fin.definition_hash.is_none());
    assert_eq!(fin.tool, "no_such\u{fffd}tool");

    let big = p
        .call(toolgate_core::CallRequest::new("big_report", json!({})))
        .await;
    let reference = big
        .output_ref
        .clone()
        .expect("a >10 KB output is stored apart");
    assert_eq!(reference, format!("toolgate:output/{}", big.call_id));
    let bytes = store.output(big.call_id).await.unwrap().unwrap();
    assert_eq!(bytes, "é".repeat(8_000).into_bytes());
    let rec = store
        .audit_call(big.call_id)
        .await
        .unwrap()
        .unwrap()
        .finished
        .unwrap();
    assert_eq!(rec.output_ref.as_deref(), Some(reference.as_str()));
    assert_eq!(rec.outcome, Outcome::Data(Value::Null), "data kept apart");

    let report = store.verify().await.unwrap();
    assert!(report.ok, "{report:?}");
    assert_eq!(report.entries, 2 + 1 + 2 + 1 + 1);

    // the chain covers the output kept apart: altering it is detected at its record
    assert_eq!(
        db.exec("UPDATE audit_outputs SET bytes = bytes || bytes")
            .await,
        1
    );
    let report = store.verify().await.unwrap();
    let broken = report
        .first_broken
        .expect("an altered output breaks verification");
    assert_eq!(Some(broken.seq), rec.seq);
    assert!(broken.reason.contains("output"), "{}", broken.reason);
}

/// PostgreSQL: an instance learns about changes made by another (LISTEN/NOTIFY), and does not see
/// its own changes twice. SQLite has one process's in-process events only.
async fn cross_instance_body(db: &TestDb) {
    if db.backend() != "postgres" {
        return;
    }
    let other = db.reopen().await;
    let mut theirs = other.subscribe();
    let mut ours = db.store.subscribe();
    tokio::time::timeout(Duration::from_secs(10), other.listening())
        .await
        .expect("the second instance listens");
    tokio::time::timeout(Duration::from_secs(10), db.store.listening())
        .await
        .expect("the first instance listens");

    let s = spec("shared_tool", DESC);
    db.store
        .insert_definition(&s, "alice", &plan("enterprise"))
        .await
        .unwrap();
    let seen = tokio::time::timeout(Duration::from_secs(10), theirs.recv())
        .await
        .expect("the other instance hears about the change")
        .unwrap();
    assert_eq!(
        (seen.kind, seen.tool.as_str()),
        (EventKind::Created, "shared_tool")
    );
    assert_eq!(seen, db.store.events(0, 10).await.unwrap()[0]);
    // and it reads the new definition
    assert!(other.definition("shared_tool").await.unwrap().is_some());

    // the writer sees its own event exactly once
    let mine = tokio::time::timeout(Duration::from_secs(5), ours.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(mine, seen);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(matches!(
        ours.try_recv(),
        Err(tokio::sync::broadcast::error::TryRecvError::Empty)
    ));

    // the other way round
    other.delete_definition("shared_tool", "bob").await.unwrap();
    let back = tokio::time::timeout(Duration::from_secs(10), ours.recv())
        .await
        .expect("the first instance hears about the removal")
        .unwrap();
    assert_eq!(
        (back.kind, back.actor.as_str()),
        (EventKind::Deleted, "bob")
    );
    other.close().await;
}

/// The questions an MCP task waits on, asked by one instance and answered through another
/// (see src/cluster.rs).
async fn task_questions_are_answered_anywhere_and_taken_once(db: &TestDb) {
    let store = &db.store;
    // Another instance on the same database reads and answers.
    let other = db.reopen().await;
    store
        .ask_task_question("call_1", "b", "alice", r#"{"method":"roots/list"}"#)
        .await
        .unwrap();
    store
        .ask_task_question("call_1", "a", "alice", r#"{"method":"elicitation/create"}"#)
        .await
        .unwrap();
    store
        .ask_task_question("call_2", "a", "bob", "{}")
        .await
        .unwrap();
    let waiting = other.task_questions("call_1", "alice").await.unwrap();
    assert_eq!(
        waiting.iter().map(|(k, _)| k.as_str()).collect::<Vec<_>>(),
        ["a", "b"]
    );
    // Another principal sees and answers nothing of it.
    assert!(
        store
            .task_questions("call_1", "bob")
            .await
            .unwrap()
            .is_empty()
    );
    let answer = vec![("a".to_owned(), r#"{"action":"accept"}"#.to_owned())];
    assert_eq!(
        other
            .answer_task_questions("call_1", "bob", &answer)
            .await
            .unwrap(),
        0
    );
    // An unknown key is ignored; an answered question no longer waits, and is answered once.
    let answers = vec![answer[0].clone(), ("zz".to_owned(), "{}".to_owned())];
    assert_eq!(
        other
            .answer_task_questions("call_1", "alice", &answers)
            .await
            .unwrap(),
        1
    );
    assert_eq!(
        other
            .answer_task_questions("call_1", "alice", &answer)
            .await
            .unwrap(),
        0
    );
    let waiting = store.task_questions("call_1", "alice").await.unwrap();
    assert_eq!(waiting.len(), 1);
    assert_eq!(waiting[0].0, "b");
    assert_eq!(store.take_task_answers("call_1").await.unwrap(), answer);
    assert!(store.take_task_answers("call_1").await.unwrap().is_empty());
    // Asked again, a key waits anew.
    store
        .ask_task_question("call_1", "a", "alice", "{}")
        .await
        .unwrap();
    assert_eq!(
        store.task_questions("call_1", "alice").await.unwrap().len(),
        2
    );
    store
        .forget_task_questions("call_1", Some("a"))
        .await
        .unwrap();
    assert_eq!(
        store.task_questions("call_1", "alice").await.unwrap().len(),
        1
    );
    store.forget_task_questions("call_1", None).await.unwrap();
    assert!(
        store
            .task_questions("call_1", "alice")
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        store.task_questions("call_2", "bob").await.unwrap().len(),
        1
    );
    other.close().await;
}

on_each_backend! {
    task_questions_across_instances => task_questions_are_answered_anywhere_and_taken_once;
}
