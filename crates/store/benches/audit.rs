//! Criterion benchmarks: what the audit log adds per call. A no-op read tool and a no-op
//! side-effecting tool, each called through the pipeline without a store (the baseline), with
//! `AuditStage` + `AuditObserver` on SQLite (a temp file) and on PostgreSQL (the tests' server,
//! `toolgate_test_support::pg::url()`, a fresh schema, dropped afterwards) — all in the same run.
//! Without a reachable PostgreSQL its benchmarks are skipped with a note.
//!
//! `sqlite` uses the default audit anchor (signed checkpoints of the chain's head, kept in the
//! database and a file next to it); `sqlite_no_checkpoints` opens the same kind of database
//! without a key, so the difference is what checkpoints add to a call. `audit_head_publish` times
//! the one step the writer adds per commit (hand the new head to the checkpointer and wake its
//! background task); signing and writing happen in that task.
//!
//! A read call gets one audit entry (`finished`, written after the call); a side-effecting call
//! gets two (`started`, committed before the handler runs, and `finished`). Every entry is one
//! durable (fsynced) commit.
//!
//! A benchmark is not a test: a setup step that fails ends the run with its error (`main`
//! returns it) instead of unwrapping.

use std::error::Error;
use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use criterion::{BatchSize, Criterion};
use serde_json::json;
use toolgate_core::{CallRequest, Effect, Pipeline, PipelineBuilder, Registry, ToolBuilder};
use toolgate_store::{AuditAnchor, AuditObserver, AuditStage, DbUrl, Store, StoreOptions};
use toolgate_test_support::pg;

const READ_TOOL: &str = "noop_read";
const SIDE_EFFECT_TOOL: &str = "noop_side_effect";

type BoxError = Box<dyn Error>;

fn registry() -> Result<Arc<Registry>, BoxError> {
    let registry = Arc::new(Registry::new());
    registry.register(Arc::new(
        ToolBuilder::new(
            READ_TOOL,
            "Reads nothing and returns an empty object. Used to measure overhead.",
        )
        .handler(|_args, _ctx| async { Ok(json!({})) }),
    ))?;
    registry.register(Arc::new(
        ToolBuilder::new(
            SIDE_EFFECT_TOOL,
            "Pretends to change something and returns an empty object. Used to measure overhead.",
        )
        .effect(Effect::SideEffect)
        .requires_confirmation(false)
        .handler(|_args, _ctx| async { Ok(json!({})) }),
    ))?;
    Ok(registry)
}

fn audited(store: &Store) -> Result<Pipeline, BoxError> {
    Ok(PipelineBuilder::new(registry()?)
        .stage(Arc::new(AuditStage::new(store.clone())))
        .observer(Arc::new(AuditObserver::new(store.clone())))
        .build())
}

/// A store on a fresh schema of the tests' PostgreSQL, with its URL and the schema's name, or
/// `None` (with a note) when PostgreSQL is unreachable.
async fn postgres() -> Result<Option<(Store, String, String)>, BoxError> {
    let url = pg::url();
    if let Err(e) = pg::reachable(&url).await {
        eprintln!("note: skipping the PostgreSQL benchmarks: {url} unreachable: {e}");
        return Ok(None);
    }
    let schema = pg::unique_schema("tg_bench");
    let options = StoreOptions {
        pg_schema: Some(schema.clone()),
        ..StoreOptions::default()
    };
    let store = Store::open(&DbUrl::parse(&url)?, &options).await?;
    Ok(Some((store, url, schema)))
}

fn bench_audit(c: &mut Criterion) -> Result<(), BoxError> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let dir = tempfile::tempdir()?;
    let sqlite = rt.block_on(Store::open(
        &DbUrl::Sqlite(dir.path().join("bench.db")),
        &StoreOptions::default(),
    ))?;
    let bare = rt.block_on(Store::open_with(
        &DbUrl::Sqlite(dir.path().join("bare.db")),
        &StoreOptions::default(),
        &AuditAnchor::none(),
    ))?;
    let pg = rt.block_on(postgres())?;

    let mut pipelines = vec![
        (
            "baseline_no_store",
            PipelineBuilder::new(registry()?).build(),
        ),
        ("sqlite", audited(&sqlite)?),
        ("sqlite_no_checkpoints", audited(&bare)?),
    ];
    if let Some((store, _, _)) = &pg {
        pipelines.push(("postgres", audited(store)?));
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

    // The writer's added step per commit, as `Checkpointer::publish` does it: the new head (its
    // hash String already made by the writer, so made outside the timing here) replaces the
    // slot's, the background task is woken, the old head is dropped.
    let slot = std::sync::Mutex::new(None::<(i64, String)>);
    let wake = tokio::sync::Notify::new();
    let hash = "ab".repeat(32);
    let mut seq = 0i64;
    c.bench_function("audit_head_publish", |b| {
        b.iter_batched(
            || hash.clone(),
            |h| {
                seq += 1;
                let old = slot.lock().map(|mut slot| slot.replace((seq, h)));
                wake.notify_one();
                drop(old);
            },
            BatchSize::SmallInput,
        )
    });

    rt.block_on(async {
        sqlite.close().await;
        bare.close().await;
        if let Some((store, url, schema)) = pg {
            store.close().await;
            pg::drop_schema(&url, &schema).await;
        }
    });
    Ok(())
}

/// What `criterion_main!` would write, except that a failed setup ends the run with its error.
fn main() -> Result<(), BoxError> {
    let mut criterion = Criterion::default().configure_from_args();
    bench_audit(&mut criterion)?;
    criterion.final_summary();
    Ok(())
}
