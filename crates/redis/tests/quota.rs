//! Quotas counted in Redis hold across instances (two counters on one key prefix stand for two
//! instances): test-support's shared-quota scenarios, the ones the PostgreSQL counter passes, plus
//! what is Redis's own: a Redis that goes away and comes back, keys under the prefix only.
//! Every test uses a key prefix of its own; without Redis they skip (fail with `CI=true`).
#![cfg(test)]

use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;
use toolgate_core::{ErrorKind, Quota, RateLimit, SharedCounter};
use toolgate_redis::{KeyPrefix, RedisQuotas, RedisUrl};
use toolgate_test_support::quota as scenario;
use toolgate_test_support::redis as test_redis;

const UNREACHABLE: &str = "The shared limit principal/ann could not be counted in Redis, so the call was not run: Redis at";

fn counter(url: &str, prefix: &str, lease: Duration) -> Arc<RedisQuotas> {
    Arc::new(
        RedisQuotas::with_lease(
            &RedisUrl::parse(url).unwrap(),
            KeyPrefix::parse(prefix).unwrap(),
            lease,
        )
        .unwrap(),
    )
}

/// Two instances on the tests' Redis with a fresh prefix (None when Redis is skipped).
fn two_instances(name: &str) -> Option<(Arc<RedisQuotas>, Arc<RedisQuotas>)> {
    let url = test_redis::available("this Redis test")?;
    let prefix = test_redis::unique_prefix(name);
    Some((
        counter(&url, &prefix, toolgate_redis::LEASE),
        counter(&url, &prefix, toolgate_redis::LEASE),
    ))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_rate_limit_holds_across_instances() {
    let Some((a, b)) = two_instances("rate") else {
        return;
    };
    scenario::a_rate_limit_holds_across_instances(a, b).await;
}

#[tokio::test]
async fn a_shared_bucket_refills_on_the_servers_clock() {
    let Some((a, b)) = two_instances("refill") else {
        return;
    };
    scenario::a_shared_bucket_refills(a, b).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrency_slots_are_shared_and_given_back() {
    let Some((a, b)) = two_instances("slots") else {
        return;
    };
    scenario::concurrency_slots_are_shared_and_given_back(a, b).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_instances_slots_come_back_and_a_live_ones_are_renewed() {
    let Some(url) = test_redis::available("this Redis test") else {
        return;
    };
    let prefix = test_redis::unique_prefix("lease");
    let lease = Duration::from_millis(900);
    scenario::a_dead_instances_slots_come_back(
        counter(&url, &prefix, lease),
        counter(&url, &prefix, lease),
        lease,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_stages_refuse_as_before_across_instances() {
    let Some((a, b)) = two_instances("stages") else {
        return;
    };
    scenario::the_stages_refuse_as_before_across_instances(a, b).await;
}

#[tokio::test]
async fn an_unreachable_redis_refuses_the_call() {
    // A port nothing listens on: bound, then closed.
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let url = format!("redis://:s3cret@127.0.0.1:{port}");
    let c = counter(&url, "tg-test:nowhere:", toolgate_redis::LEASE);
    let err = c.ping().await.unwrap_err();
    assert_eq!(err.kind(), toolgate_redis::RedisErrorKind::Unavailable);
    scenario::an_unreachable_count_refuses_the_call(c.clone(), UNREACHABLE).await;
    let r = scenario::pipeline(
        c,
        Quota {
            rate: Some(RateLimit::new(3, 1.0).unwrap()),
            max_concurrent: None,
        },
        scenario::Gate::default(),
    )
    .call(scenario::call("quick", "ann"))
    .await;
    let msg = r.error().unwrap();
    assert!(!msg.contains("s3cret"), "{msg}");
    assert!(msg.contains("redis://:***@127.0.0.1"), "{msg}");
}

/// A TCP relay to Redis that the test can cut: a Redis that goes away after the counter
/// connected (a restart, a network cut).
struct Relay {
    port: u16,
    task: JoinHandle<()>,
    conns: Arc<std::sync::Mutex<Vec<JoinHandle<()>>>>,
}

impl Relay {
    async fn start(target: String) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        Self::serve(listener, target)
    }

    async fn restart(port: u16, target: String) -> Self {
        let listener = TcpListener::bind(("127.0.0.1", port)).await.unwrap();
        Self::serve(listener, target)
    }

    fn serve(listener: TcpListener, target: String) -> Self {
        let port = listener.local_addr().unwrap().port();
        let conns = Arc::new(std::sync::Mutex::new(Vec::new()));
        let held = Arc::clone(&conns);
        let task = tokio::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                let target = target.clone();
                held.lock().unwrap().push(tokio::spawn(async move {
                    if let Ok(mut outbound) = TcpStream::connect(target).await {
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                    }
                }));
            }
        });
        Self { port, task, conns }
    }

    /// Closes the port and every relayed connection.
    async fn cut(self) {
        self.task.abort();
        let _ = self.task.await;
        for conn in self.conns.lock().unwrap().drain(..) {
            conn.abort();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_that_goes_away_refuses_calls_until_it_is_back() {
    let Some(url) = test_redis::available("this Redis test") else {
        return;
    };
    let target = url
        .trim_start_matches("redis://")
        .split('/')
        .next()
        .unwrap()
        .to_owned();
    let relay = Relay::start(target.clone()).await;
    let port = relay.port;
    let prefix = test_redis::unique_prefix("away");
    let c = counter(
        &format!("redis://127.0.0.1:{port}"),
        &prefix,
        toolgate_redis::LEASE,
    );
    let limit = RateLimit::new(1000, 1000.0).unwrap();
    assert_eq!(c.take("principal/ann", limit).await.ok(), Some(Ok(())));
    relay.cut().await;
    // Every check while Redis is gone is refused (the first may find the old connection broken).
    for _ in 0..3 {
        let err = c.take("principal/ann", limit).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Unavailable, "{}", err.message());
        let err = c.acquire("principal/ann", 5).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Unavailable, "{}", err.message());
    }
    let relay = Relay::restart(port, target).await;
    let mut back = false;
    for _ in 0..50 {
        if matches!(c.take("principal/ann", limit).await, Ok(Ok(()))) {
            back = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(back, "the counter reconnects when Redis is back");
    relay.cut().await;
}

#[tokio::test]
async fn keys_stay_under_the_prefix_and_leave_when_idle() {
    let Some(url) = test_redis::available("this Redis test") else {
        return;
    };
    let prefix = test_redis::unique_prefix("keys");
    let c = counter(&url, &prefix, Duration::from_millis(500));
    // Refilled within 100 ms: the bucket key leaves about a second after (full again + 1 s).
    c.take_token("principal/ann", RateLimit::new(1, 10.0).unwrap())
        .await
        .unwrap()
        .unwrap();
    let slot = c.lease_slot("principal/ann", 1).await.unwrap().unwrap();
    assert_eq!(
        keys(&url, &prefix).await,
        [
            format!("{prefix}rate:principal/ann"),
            format!("{prefix}slots:principal/ann")
        ]
    );
    slot.release().await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(keys(&url, &prefix).await.is_empty());
}

/// The keys under `prefix`, sorted.
async fn keys(url: &str, prefix: &str) -> Vec<String> {
    let client = redis::Client::open(url).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let mut keys: Vec<String> = redis::cmd("KEYS")
        .arg(format!("{prefix}*"))
        .query_async(&mut conn)
        .await
        .unwrap();
    keys.sort();
    keys
}
