//! What a shared quota costs per call: a no-op tool called through the pipeline with a
//! principal's quota counted in this process (core's stage alone), in PostgreSQL
//! (`Store::shared_quotas`, the tests' server, a fresh schema dropped afterwards) and in Redis
//! (toolgate-redis's `RedisQuotas`, the tests' Redis, a key prefix of the run's own), in the
//! same run, and the pipeline without a quota as the baseline. Prints the median and the 99th
//! percentile per call in µs, the difference to the baseline, and how many times the in-process
//! count of the same quota (measured in the same run) a shared count takes.
//!
//! Two quotas are timed: a rate (one token-bucket upsert, or one Redis script, per call) and a
//! concurrency cap (a slot leased before the call and given back after it: two statements, or
//! two Redis round trips, per call).
//!
//! `cargo bench -p toolgate-store --bench quota` (`-- --test`: a few calls each, as
//! `scripts/test.sh` runs every benchmark once). Without a reachable PostgreSQL or Redis their
//! rows are skipped with a note (a failure with `CI=true`).

use std::error::Error;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use toolgate_core::{
    CallRequest, Pipeline, PipelineBuilder, Principal, PrincipalId, PrincipalQuotaStage, Quota,
    RateLimit, Registry, SharedCounter, ToolBuilder,
};
use toolgate_redis::{KeyPrefix, RedisQuotas, RedisUrl};
use toolgate_store::{DbUrl, Store, StoreOptions};
use toolgate_test_support::{pg, redis as test_redis};

type BoxError = Box<dyn Error>;

fn pipeline(
    quota: Option<Quota>,
    shared: Option<Arc<dyn SharedCounter>>,
) -> Result<Pipeline, BoxError> {
    let registry = Arc::new(Registry::new());
    registry.register(Arc::new(
        ToolBuilder::new("noop", "Does nothing; the quota benchmark's tool.")
            .input_schema(json!({"type": "object"}))
            .handler(|_, _| async { Ok(json!(null)) }),
    ))?;
    let mut builder = PipelineBuilder::new(registry);
    if let Some(quota) = quota {
        let mut stage = PrincipalQuotaStage::new([("bench".to_owned(), quota)]);
        if let Some(shared) = shared {
            stage = stage.shared(shared);
        }
        builder = builder.stage(Arc::new(stage));
    }
    Ok(builder.build())
}

/// Median and 99th percentile of `n` sequential calls, in µs.
async fn time(p: &Pipeline, n: usize) -> Result<(f64, f64), BoxError> {
    let principal = Principal::new(PrincipalId::parse("bench")?);
    let mut samples = Vec::with_capacity(n);
    for _ in 0..n {
        let start = Instant::now();
        let r = p
            .call(CallRequest::new("noop", json!({})).principal(principal.clone()))
            .await;
        samples.push(start.elapsed());
        if !r.is_ok() {
            return Err(format!("the benchmark's call failed: {:?}", r.error()).into());
        }
    }
    samples.sort();
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    Ok((us(samples[n / 2]), us(samples[(n * 99 / 100).min(n - 1)])))
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), BoxError> {
    let quick = std::env::args().any(|a| a == "--test");
    let n = if quick { 20 } else { 5000 };
    // A rate no call of the run reaches, so every call takes a token and runs.
    let rate = Quota {
        rate: Some(RateLimit::new(1_000_000, 1_000_000.0)?),
        max_concurrent: None,
    };
    let cap = Quota {
        rate: None,
        max_concurrent: Some(8),
    };
    let url = pg::available("the shared-quota benchmark's PostgreSQL rows").await;
    let schema = pg::unique_schema("tg_bench_quota");
    let store = match &url {
        Some(url) => Some(
            Store::open(
                &DbUrl::parse(url)?,
                &StoreOptions {
                    pg_schema: Some(schema.clone()),
                    ..StoreOptions::default()
                },
            )
            .await?,
        ),
        None => None,
    };
    let shared = store
        .as_ref()
        .and_then(Store::shared_quotas)
        .map(|q| q as Arc<dyn SharedCounter>);
    let redis = match test_redis::available("the shared-quota benchmark's Redis rows") {
        Some(url) => Some(Arc::new(RedisQuotas::new(
            &RedisUrl::parse(&url)?,
            KeyPrefix::parse(&test_redis::unique_prefix("bench"))?,
        )?) as Arc<dyn SharedCounter>),
        None => None,
    };

    let mut rows = Vec::new();
    let (base, base99) = time(&pipeline(None, None)?, n).await?;
    rows.push(("no quota (baseline)", base, base99, None, None));
    for (label, quota) in [("rate", rate), ("concurrency cap", cap)] {
        let (local, local99) = time(&pipeline(Some(quota), None)?, n).await?;
        rows.push((
            if label == "rate" {
                "rate, in process"
            } else {
                "concurrency cap, in process"
            },
            local,
            local99,
            Some(local - base),
            None,
        ));
        for (backend, counter) in [("PostgreSQL", &shared), ("Redis", &redis)] {
            let Some(counter) = counter else {
                continue;
            };
            let (median, p99) = time(&pipeline(Some(quota), Some(counter.clone()))?, n).await?;
            rows.push((
                match (label, backend) {
                    ("rate", "PostgreSQL") => "rate, PostgreSQL",
                    ("rate", _) => "rate, Redis",
                    (_, "PostgreSQL") => "concurrency cap, PostgreSQL",
                    _ => "concurrency cap, Redis",
                },
                median,
                p99,
                Some(median - base),
                Some(median / local),
            ));
        }
    }
    println!("shared quota cost per call ({n} sequential calls each, µs)");
    println!(
        "{:<32} {:>10} {:>10} {:>14} {:>13}",
        "count", "median", "p99", "added (median)", "× in process"
    );
    for (label, median, p99, added, ratio) in rows {
        let added = added.map_or_else(|| "-".to_owned(), |a| format!("{a:.1}"));
        let ratio = ratio.map_or_else(|| "-".to_owned(), |r| format!("{r:.0}×"));
        println!("{label:<32} {median:>10.1} {p99:>10.1} {added:>14} {ratio:>13}");
    }
    drop((shared, redis));
    if let (Some(store), Some(url)) = (store, url) {
        store.close().await;
        pg::drop_schema(&url, &schema).await;
    }
    Ok(())
}
