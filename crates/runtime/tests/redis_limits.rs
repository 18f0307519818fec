//! `[cluster] redis_url`: the runtime counts its principals' limits in Redis, so two runtimes
//! (two instances, here each on its own SQLite file) share them; with Redis unreachable a limited
//! principal's calls are refused `unavailable`, an unlimited principal's run. Skipped without
//! Redis (a failure with `CI=true`).
#![cfg(test)]

use std::sync::Arc;

use serde_json::json;
use toolgate_core::{CallRequest, ErrorKind};
use toolgate_runtime::{ConfigSource, Runtime, RuntimeOptions};
use toolgate_store::DbUrl;
use toolgate_test_support::redis as test_redis;

/// A runtime on a fresh SQLite file in `dir` whose principal `ann` may make 3 calls (the bucket
/// practically never refills) and `bob` any, counted in the Redis at `url` under `prefix`.
async fn open(dir: &tempfile::TempDir, name: &str, url: &str, prefix: &str) -> Arc<Runtime> {
    let config: toolgate_runtime::Config = toml::from_str(&format!(
        "[principals.ann]\ngrants = [\"tool.*\"]\nrate_limit = {{ burst = 3, per_second = 0.001 }}\n\
         [principals.bob]\ngrants = [\"tool.*\"]\n\
         [cluster]\nredis_url = \"{url}\"\nkey_prefix = \"{prefix}\"\n"
    ))
    .unwrap();
    Runtime::open(RuntimeOptions {
        config: ConfigSource::Value(Box::new(config)),
        db: Some(DbUrl::Sqlite(dir.path().join(format!("{name}.db")))),
        root: Some(dir.path().to_path_buf()),
        ..RuntimeOptions::default()
    })
    .await
    .unwrap()
}

fn call(runtime: &Runtime, who: &str) -> CallRequest {
    CallRequest::new("calculator", json!({ "expression": "1+1" }))
        .principal(runtime.principal(Some(who)).unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_runtimes_share_a_principals_rate_in_redis() {
    let Some(url) = test_redis::available("this Redis test") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let prefix = test_redis::unique_prefix("runtime");
    let (one, two) = (
        open(&dir, "one", &url, &prefix).await,
        open(&dir, "two", &url, &prefix).await,
    );
    assert_eq!(one.redis().unwrap().prefix().as_str(), prefix);
    let mut ok = 0;
    for i in 0..8 {
        let runtime = if i % 2 == 0 { &one } else { &two };
        let r = runtime.call(call(runtime, "ann"), None).await;
        if r.is_ok() {
            ok += 1;
        } else {
            assert_eq!(
                r.error_kind(),
                Some(ErrorKind::RateLimited),
                "{:?}",
                r.error()
            );
        }
    }
    assert_eq!(
        ok, 3,
        "ann's 3 calls are counted once for both runtimes, not 3 each"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_redis_refuses_limited_calls() {
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let dir = tempfile::tempdir().unwrap();
    let url = format!("redis://:s3cret@127.0.0.1:{port}");
    let runtime = open(&dir, "one", &url, "tg-test:down:").await;
    assert_eq!(
        runtime.redis().unwrap().url().to_string(),
        format!("redis://:***@127.0.0.1:{port}")
    );
    let r = runtime.call(call(&runtime, "ann"), None).await;
    assert_eq!(
        r.error_kind(),
        Some(ErrorKind::Unavailable),
        "{:?}",
        r.error()
    );
    let msg = r.error().unwrap();
    assert!(
        msg.contains("could not be counted in Redis") && !msg.contains("s3cret"),
        "{msg}"
    );
    // A principal without limits is not counted anywhere: its call runs.
    let r = runtime.call(call(&runtime, "bob"), None).await;
    assert!(r.is_ok(), "{:?}", r.error());
}
