//! Criterion benchmark of what a run budget costs per call on SQLite (issue 22): a no-op tool
//! called through the pipeline with the run budget stage over the store, without a run
//! (`baseline_no_run`: the stage only looks at the request), with a run counted by the store's
//! ledger (`with_run_sqlite_cached`: the run's counters cached in the process, calls reserved in
//! blocks, one transaction per block — the production path), with every call counted in the
//! store (`with_run_sqlite_durable`: `Store::admit_run_call` and `settle_run_call`, two durable
//! commits per call, the path before the cache), and with a run counted in process
//! (`with_run_memory`, core's `MemoryRuns`), in the same run. After criterion's report it times
//! each again and prints the medians in µs and the ratios to the baseline.
//!
//! For instruction counts (valgrind), `TOOLGATE_BENCH_RUNS=baseline|cached|durable:N` makes N
//! calls of that one variant and exits, without criterion: the difference between two N is the
//! cost of those calls alone.
//!
//! A benchmark is not a test: a setup step that fails ends the run with its error (`main`
//! returns it). `cargo bench -p toolgate-store --bench runs -- --test` runs each once.

use std::error::Error;
use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::Criterion;
use serde_json::json;
use toolgate_core::{
    BoxFuture, Budget, CallId, CallRequest, MemoryRuns, Pipeline, PipelineBuilder, Registry,
    RunBudgetStage, RunId, RunLedger, Settled, ToolBuilder, ToolError,
};
use toolgate_store::{DbUrl, Store, StoreOptions};

type BoxError = Box<dyn Error>;

/// Every call counted by its own transactions in the store (the path before the cache).
struct Durable(Store);

impl RunLedger for Durable {
    fn admit<'a>(
        &'a self,
        run: RunId,
        principal: &'a str,
        tool: &'a str,
        _call: CallId,
    ) -> BoxFuture<'a, Result<(), ToolError>> {
        Box::pin(async move {
            match self.0.admit_run_call(run, principal, tool).await {
                Ok(toolgate_store::Admission::Counted(_)) => Ok(()),
                Ok(other) => Err(ToolError::execution(format!("not admitted: {other:?}"))),
                Err(e) => Err(ToolError::execution(e.to_string())),
            }
        })
    }

    fn settle<'a>(
        &'a self,
        run: RunId,
        tool: &'a str,
        call: CallId,
        settled: Settled,
    ) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            let _ = self.0.settle_run_call(run, tool, call, settled).await;
        })
    }
}

fn pipeline(ledger: Arc<dyn RunLedger>) -> Result<Pipeline, BoxError> {
    let registry = Arc::new(Registry::new());
    registry.register(Arc::new(
        ToolBuilder::new("noop", "Returns an empty object; for benchmarks.")
            .handler(|_, _| async { Ok(json!({})) }),
    ))?;
    Ok(PipelineBuilder::new(registry)
        .stage(Arc::new(RunBudgetStage::new(ledger)))
        .build())
}

fn call(run: Option<RunId>) -> CallRequest {
    let request = CallRequest::new("noop", json!({}));
    match run {
        Some(run) => request.run(run),
        None => request,
    }
}

/// The median of `n` timed calls, in µs.
fn median_us(
    rt: &tokio::runtime::Runtime,
    pipeline: &Pipeline,
    run: Option<RunId>,
    n: usize,
) -> f64 {
    let mut times: Vec<f64> = (0..n)
        .map(|_| {
            let started = Instant::now();
            black_box(rt.block_on(pipeline.call(call(run))));
            started.elapsed().as_secs_f64() * 1e6
        })
        .collect();
    times.sort_by(f64::total_cmp);
    times.get(n / 2).copied().unwrap_or(0.0)
}

fn bench_runs(c: &mut Criterion, quick: bool) -> Result<(), BoxError> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let dir = tempfile::tempdir()?;
    let store = rt.block_on(Store::open(
        &DbUrl::Sqlite(dir.path().join("bench.db")),
        &StoreOptions::default(),
    ))?;
    let on_store = pipeline(Arc::new(store.clone()))?;
    let durable = pipeline(Arc::new(Durable(store.clone())))?;
    let memory = Arc::new(MemoryRuns::new());
    let in_memory = pipeline(Arc::clone(&memory) as Arc<dyn RunLedger>)?;
    // No limit is ever reached: every timed call does the whole check and count.
    let cached = rt
        .block_on(store.create_run("local", &Budget::default()))?
        .id;
    let stored = rt
        .block_on(store.create_run("local", &Budget::default()))?
        .id;
    let held = memory.create("local", Budget::default());
    for (pipeline, run, what) in [
        (&on_store, cached, "the call under a cached run"),
        (&durable, stored, "the call under a stored run"),
        (&in_memory, held, "the call under a run in memory"),
    ] {
        let first = rt.block_on(pipeline.call(call(Some(run))));
        if !first.is_ok() {
            return Err(format!("{what} failed before the benchmark: {}", json!(first)).into());
        }
    }
    if let Ok(only) = std::env::var("TOOLGATE_BENCH_RUNS") {
        let (variant, n) = only
            .split_once(':')
            .ok_or("TOOLGATE_BENCH_RUNS is VARIANT:N, e.g. cached:10000")?;
        let n: usize = n.parse()?;
        let (pipeline, run) = match variant {
            "baseline" => (&on_store, None),
            "cached" => (&on_store, Some(cached)),
            "durable" => (&durable, Some(stored)),
            other => {
                return Err(
                    format!("unknown variant {other:?}: baseline, cached or durable").into(),
                );
            }
        };
        for _ in 0..n {
            black_box(rt.block_on(pipeline.call(call(run))));
        }
        rt.block_on(store.close());
        return Ok(());
    }
    let mut group = c.benchmark_group("runs");
    group.bench_function("baseline_no_run", |b| {
        b.iter(|| rt.block_on(on_store.call(black_box(call(None)))));
    });
    group.bench_function("with_run_sqlite_cached", |b| {
        b.iter(|| rt.block_on(on_store.call(black_box(call(Some(cached))))));
    });
    group.bench_function("with_run_sqlite_durable", |b| {
        b.iter(|| rt.block_on(durable.call(black_box(call(Some(stored))))));
    });
    group.bench_function("with_run_memory", |b| {
        b.iter(|| rt.block_on(in_memory.call(black_box(call(Some(held))))));
    });
    group.finish();
    let n = if quick { 3 } else { 2000 };
    let base = median_us(&rt, &on_store, None, n);
    let rows = [
        (
            "run on SQLite, cached",
            median_us(&rt, &on_store, Some(cached), n),
        ),
        (
            "run on SQLite, every call durable",
            median_us(&rt, &durable, Some(stored), n),
        ),
        ("run in memory", median_us(&rt, &in_memory, Some(held), n)),
    ];
    println!("runs: median per call over {n} calls (same run):");
    println!("  {:<36} {base:>10.2} µs", "no run (baseline)");
    for (what, us) in rows {
        println!(
            "  {what:<36} {us:>10.2} µs  {:>8.2}x  +{:.2} µs",
            us / base,
            us - base
        );
    }
    rt.block_on(store.close());
    Ok(())
}

fn main() -> Result<(), BoxError> {
    let quick = std::env::args().any(|a| a == "--test");
    let mut criterion = Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3))
        .configure_from_args();
    bench_runs(&mut criterion, quick)?;
    criterion.final_summary();
    Ok(())
}
