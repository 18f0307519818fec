//! Criterion benchmarks: what the audit log adds per call. A no-op read tool and a no-op
//! side-effecting tool, each called through the pipeline without a store (the baseline), with
//! `AuditStage` + `AuditObserver` on SQLite (a temp file) and on PostgreSQL
//! (`postgres://postgres@127.0.0.1:5432/test`, a fresh schema, dropped afterwards) — all in the
//! same run. Without a reachable PostgreSQL its benchmarks are skipped with a note.
//!
//! `sqlite` uses the default audit anchor (signed checkpoints of the chain's head, kept in the
//! database and a file next to it); `sqlite_no_checkpoints` opens the same kind of database
//! without a key, so the difference is what checkpoints add to a call. `audit_head_publish` times
//! the one step the writer adds per commit (hand the new head to the checkpointer: clone its hash,
//! send it on a `watch` channel); signing and writing happen in a background task.
//!
//! A read call gets one audit entry (`finished`, written after the call); a side-effecting call
//! gets two (`started`, committed before the handler runs, and `finished`). Every entry is one
//! durable (fsynced) commit.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::json;
use sqlx::Connection;
use toolgate_core::{CallRequest, Effect, Pipeline, PipelineBuilder, Registry, ToolBuilder};
use toolgate_store::{AuditAnchor, AuditObserver, AuditStage, DbUrl, Store, StoreOptions};

const PG_URL: &str = "postgres://postgres@127.0.0.1:5432/test";
const READ_TOOL: &str = "noop_read";
const SIDE_EFFECT_TOOL: &str = "noop_side_effect";

fn registry() -> Arc<Registry> {
    let registry = Arc::new(Registry::new());
    registry
        .register(Arc::new(
            ToolBuilder::new(
                READ_TOOL,
                "Reads nothing and returns an empty object. Used to measure overhead.",
            )
            .handler(|_args, _ctx| async { Ok(json!({})) }),
        ))
        .unwrap();
    registry
        .register(Arc::new(
            ToolBuilder::new(
                SIDE_EFFECT_TOOL,
                "Pretends to change something and returns an empty object. Used to measure overhead.",
            )
            .effect(Effect::SideEffect)
            .requires_confirmation(false)
            .handler(|_args, _ctx| async { Ok(json!({})) }),
        ))
        .unwrap();
    registry
}

fn audited(store: &Store) -> Pipeline {
    PipelineBuilder::new(registry())
        .stage(Arc::new(AuditStage::new(store.clone())))
        .observer(Arc::new(AuditObserver::new(store.clone())))
        .build()
}

async fn postgres() -> Option<(Store, String)> {
    match sqlx::PgConnection::connect(PG_URL).await {
        Ok(conn) => {
            let _ = conn.close().await;
        }
        Err(e) => {
            eprintln!("note: skipping the PostgreSQL benchmarks: {PG_URL} unreachable: {e}");
            return None;
        }
    }
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let schema = format!("tg_bench_{}_{nanos}", std::process::id());
    let options = StoreOptions {
        pg_schema: Some(schema.clone()),
    };
    let store = Store::open(&DbUrl::parse(PG_URL).unwrap(), &options)
        .await
        .unwrap();
    Some((store, schema))
}

async fn drop_schema(schema: &str) {
    if let Ok(mut conn) = sqlx::PgConnection::connect(PG_URL).await {
        let _ = sqlx::query(sqlx::AssertSqlSafe(format!(
            "DROP SCHEMA IF EXISTS \"{schema}\" CASCADE"
        )))
        .execute(&mut conn)
        .await;
        let _ = conn.close().await;
    }
}

fn bench_audit(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let sqlite = rt
        .block_on(Store::open(
            &DbUrl::Sqlite(dir.path().join("bench.db")),
            &StoreOptions::default(),
        ))
        .unwrap();
    let bare = rt
        .block_on(Store::open_with(
            &DbUrl::Sqlite(dir.path().join("bare.db")),
            &StoreOptions::default(),
            &AuditAnchor::none(),
        ))
        .unwrap();
    let pg = rt.block_on(postgres());

    let mut pipelines = vec![
        (
            "baseline_no_store",
            PipelineBuilder::new(registry()).build(),
        ),
        ("sqlite", audited(&sqlite)),
        ("sqlite_no_checkpoints", audited(&bare)),
    ];
    if let Some((store, _)) = &pg {
        pipelines.push(("postgres", audited(store)));
    }

    for (group, tool) in [
        ("audit_read_tool", READ_TOOL),
        ("audit_side_effect_tool", SIDE_EFFECT_TOOL),
    ] {
        let mut g = c.benchmark_group(group);
        g.sample_size(20)
            .warm_up_time(Duration::from_millis(500))
            .measurement_time(Duration::from_secs(3));
        for (name, pipeline) in &pipelines {
            g.bench_function(*name, |b| {
                b.iter(|| {
                    let r =
                        rt.block_on(pipeline.call(CallRequest::new(tool, black_box(json!({})))));
                    assert!(r.is_ok(), "{r:?}");
                    r
                })
            });
        }
        g.finish();
    }

    // The writer's added step per commit, as it does it (see `AuditWriter::spawn`).
    let (head, _keep) = tokio::sync::watch::channel(None::<(i64, String)>);
    let hash = "ab".repeat(32);
    let mut seq = 0i64;
    c.bench_function("audit_head_publish", |b| {
        b.iter(|| {
            seq += 1;
            head.send_replace(Some((seq, black_box(&hash).clone())));
        })
    });

    rt.block_on(async {
        sqlite.close().await;
        bare.close().await;
        if let Some((store, schema)) = pg {
            store.close().await;
            drop_schema(&schema).await;
        }
    });
}

criterion_group!(benches, bench_audit);
criterion_main!(benches);
