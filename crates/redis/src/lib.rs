//! Rate limits and concurrency caps shared by several toolgate instances, counted in Redis:
//! core's [`SharedCounter`] for deployments that set `[cluster] redis_url` (instead of the
//! PostgreSQL counter of toolgate-store, with the same behaviour).
//!
//! A rate limit is a token bucket per key (a hash), refilled and taken by one Lua script on the
//! server's clock; a concurrency cap is a sorted set per key of leases (lease id → when it ends),
//! leased and renewed by scripts. Every check is one round trip (EVALSHA over one multiplexed
//! connection). This instance renews its leases every [`LEASE`]` / 3`, so the slots of an instance
//! that died (`kill -9`) come back within [`LEASE`]. When Redis cannot be reached the call is
//! refused `unavailable`, never let through uncounted. Every key starts with a [`KeyPrefix`]
//! (`toolgate:` unless configured), so tests and several deployments can share one Redis.

#![warn(missing_docs, unreachable_pub)]

mod scripts;

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use tokio::sync::OnceCell;
use toolgate_core::{
    BoxFuture, CancellationToken, ErrorChain, ErrorKind, RateLimit, SharedCounter, SharedSlot,
    ToolError,
};
use uuid::Uuid;

use crate::scripts::Scripts;

/// How long a concurrency slot stays held without its instance renewing it: the longest a
/// killed instance's slots stay taken (the PostgreSQL counter's lease too).
pub const LEASE: Duration = Duration::from_secs(30);

/// How long connecting to Redis, and one answer from it, may take before the call is refused.
const TIMEOUT: Duration = Duration::from_secs(2);

/// What went wrong, as [`RedisError::kind`] tells it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RedisErrorKind {
    /// `[cluster] redis_url` or `key_prefix` is not usable as written.
    Config,
    /// Redis did not answer, or answered with an error.
    Unavailable,
}

/// An error of the Redis counter. Never shows a password of the URL.
#[derive(Debug, thiserror::Error)]
pub enum RedisError {
    /// The URL is not a Redis URL this counter connects to.
    #[error(
        "Invalid [cluster] redis_url {url}: {reason}; write redis://HOST:PORT (or rediss://HOST:PORT for TLS, redis://:PASSWORD@HOST:PORT/DB with a password and database), such as redis://127.0.0.1:6379"
    )]
    Url {
        /// The URL as written, its password replaced by `***`.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The key prefix is not usable.
    #[error(
        "Invalid [cluster] key_prefix {prefix:?}: {reason}; use 1 to 64 visible characters without spaces, such as \"toolgate:\""
    )]
    Prefix {
        /// The prefix as written.
        prefix: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A command failed or Redis could not be reached.
    #[error("Redis at {url} failed while {what}")]
    Redis {
        /// The server, its password replaced by `***`.
        url: String,
        /// What the counter was doing.
        what: &'static str,
        /// The client's error.
        #[source]
        source: redis::RedisError,
    },
}

impl RedisError {
    /// What kind of failure this is.
    pub fn kind(&self) -> RedisErrorKind {
        match self {
            Self::Url { .. } | Self::Prefix { .. } => RedisErrorKind::Config,
            Self::Redis { .. } => RedisErrorKind::Unavailable,
        }
    }
}

/// A checked `redis://` or `rediss://` URL. Its [`fmt::Display`] and [`fmt::Debug`] replace the
/// password with `***`; only the client sees it.
#[derive(Clone)]
pub struct RedisUrl {
    raw: String,
    shown: String,
}

impl RedisUrl {
    /// Checks `raw`: scheme `redis` or `rediss` (TLS), a host, and what the Redis client accepts
    /// (a database number as the path, `redis://:PASSWORD@HOST` or `redis://USER:PASSWORD@HOST`).
    ///
    /// # Errors
    ///
    /// [`RedisError::Url`] saying what to write instead.
    pub fn parse(raw: &str) -> Result<Self, RedisError> {
        let raw = raw.trim();
        let bad = |shown: String, reason: String| RedisError::Url { url: shown, reason };
        let parsed = match url::Url::parse(raw) {
            Ok(parsed) => parsed,
            Err(e) => return Err(bad(hide_userinfo(raw), format!("not a URL ({e})"))),
        };
        let shown = redacted(&parsed);
        if !matches!(parsed.scheme(), "redis" | "rediss") {
            return Err(bad(
                shown,
                format!(
                    "the scheme {}:// is not supported (only redis:// and rediss://)",
                    parsed.scheme()
                ),
            ));
        }
        if parsed.host_str().is_none_or(str::is_empty) {
            return Err(bad(shown, "it names no host".into()));
        }
        if let Err(e) = redis::Client::open(raw) {
            return Err(bad(shown, format!("the Redis client refuses it ({e})")));
        }
        Ok(Self {
            raw: raw.to_owned(),
            shown,
        })
    }
}

impl fmt::Display for RedisUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.shown)
    }
}

impl fmt::Debug for RedisUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "RedisUrl({})", self.shown)
    }
}

/// `url` with its password, if any, replaced by `***`.
fn redacted(url: &url::Url) -> String {
    let mut shown = url.clone();
    if shown.password().is_some() {
        // Only URLs that cannot have a password refuse one; this one has one.
        let _ = shown.set_password(Some("***"));
    }
    shown.to_string()
}

/// A string that did not parse as a URL, without anything between `://` and a `@` (where a
/// password would be).
fn hide_userinfo(raw: &str) -> String {
    match (raw.split_once("://"), raw.rfind('@')) {
        (Some((scheme, _)), Some(at)) => format!("{scheme}://***{}", &raw[at..]),
        _ => raw.to_owned(),
    }
}

/// What every key of this counter starts with (`toolgate:` by default): 1 to 64 visible ASCII
/// characters, no spaces.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyPrefix(String);

impl KeyPrefix {
    /// The default prefix, `toolgate:`.
    pub const DEFAULT: &'static str = "toolgate:";

    /// Checks `raw`.
    ///
    /// # Errors
    ///
    /// [`RedisError::Prefix`] when it is empty, longer than 64 characters, or has a space or a
    /// control or non-ASCII character.
    pub fn parse(raw: &str) -> Result<Self, RedisError> {
        let bad = |reason| RedisError::Prefix {
            prefix: raw.to_owned(),
            reason,
        };
        if raw.is_empty() {
            return Err(bad("it is empty"));
        }
        if raw.len() > 64 {
            return Err(bad("it is longer than 64 characters"));
        }
        if !raw.chars().all(|c| c.is_ascii_graphic()) {
            return Err(bad("it has a space, a control or a non-ASCII character"));
        }
        Ok(Self(raw.to_owned()))
    }

    /// The prefix.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl Default for KeyPrefix {
    fn default() -> Self {
        Self(Self::DEFAULT.to_owned())
    }
}

/// Quotas counted in one Redis, shared by every instance that uses it with the same prefix.
/// Connects on first use (and reconnects after a failure); renews this instance's leases until
/// dropped. Cheap to share as `Arc<RedisQuotas>`.
pub struct RedisQuotas {
    inner: Arc<Inner>,
}

struct Inner {
    client: redis::Client,
    url: RedisUrl,
    prefix: KeyPrefix,
    lease: Duration,
    conn: OnceCell<ConnectionManager>,
    scripts: Scripts,
    /// This instance's leases in force: lease id → the slot set's key.
    held: Mutex<HashMap<String, String>>,
    /// Whether the renewing task runs (started with the first lease).
    renewing: AtomicBool,
    /// Stops the renewing task: the counter was dropped (slots still held stop being renewed,
    /// as those of an instance that died).
    stop: CancellationToken,
}

impl Drop for RedisQuotas {
    fn drop(&mut self) {
        self.inner.stop.cancel();
    }
}

impl fmt::Debug for RedisQuotas {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisQuotas")
            .field("url", &self.inner.url)
            .field("prefix", &self.inner.prefix)
            .field("lease", &self.inner.lease)
            .finish_non_exhaustive()
    }
}

impl RedisQuotas {
    /// A counter in the Redis at `url`, its keys starting with `prefix`, leases of [`LEASE`].
    /// Does not connect yet: the first check does (see [`RedisQuotas::ping`]).
    ///
    /// # Errors
    ///
    /// [`RedisError::Url`] when the client refuses the URL.
    pub fn new(url: &RedisUrl, prefix: KeyPrefix) -> Result<Self, RedisError> {
        Self::with_lease(url, prefix, LEASE)
    }

    /// [`RedisQuotas::new`] with another lease (tests shorten it; at least 100 ms).
    ///
    /// # Errors
    ///
    /// [`RedisError::Url`] when the client refuses the URL.
    pub fn with_lease(
        url: &RedisUrl,
        prefix: KeyPrefix,
        lease: Duration,
    ) -> Result<Self, RedisError> {
        let client = redis::Client::open(url.raw.as_str()).map_err(|e| RedisError::Url {
            url: url.shown.clone(),
            reason: format!("the Redis client refuses it ({e})"),
        })?;
        Ok(Self {
            inner: Arc::new(Inner {
                client,
                url: url.clone(),
                prefix,
                lease: lease.max(Duration::from_millis(100)),
                conn: OnceCell::new(),
                scripts: Scripts::new(),
                held: Mutex::new(HashMap::new()),
                renewing: AtomicBool::new(false),
                stop: CancellationToken::new(),
            }),
        })
    }

    /// The server, its password hidden.
    pub fn url(&self) -> &RedisUrl {
        &self.inner.url
    }

    /// What every key starts with.
    pub fn prefix(&self) -> &KeyPrefix {
        &self.inner.prefix
    }

    /// Asks Redis for a PONG: whether the counter can count now.
    ///
    /// # Errors
    ///
    /// [`RedisError::Redis`] when Redis does not answer.
    pub async fn ping(&self) -> Result<(), RedisError> {
        let mut conn = self.inner.connection().await?;
        redis::cmd("PING")
            .query_async::<String>(&mut conn)
            .await
            .map_err(self.inner.failed("answering PING"))?;
        Ok(())
    }

    /// Takes one token from `key`'s bucket: `Ok(Ok(()))`, or `Ok(Err(wait))` when none is left.
    ///
    /// # Errors
    ///
    /// [`RedisError::Redis`] when Redis does not answer or the script fails.
    pub async fn take_token(
        &self,
        key: &str,
        limit: RateLimit,
    ) -> Result<Result<(), Duration>, RedisError> {
        let inner = &self.inner;
        let mut conn = inner.connection().await?;
        let (granted, tokens): (i64, String) = inner
            .scripts
            .take
            .key(inner.key("rate", key))
            .arg(limit.burst())
            .arg(limit.per_second())
            .invoke_async(&mut conn)
            .await
            .map_err(inner.failed("taking a call from a shared rate limit"))?;
        if granted == 1 {
            return Ok(Ok(()));
        }
        // The script writes the number itself; a value it did not write counts as none left.
        let tokens: f64 = tokens.parse().unwrap_or(0.0);
        let wait = (1.0 - tokens).max(0.0) / limit.per_second();
        Ok(Err(
            Duration::try_from_secs_f64(wait).unwrap_or(Duration::MAX)
        ))
    }

    /// Leases one of `key`'s `max` slots: `Ok(Some(slot))`, or `Ok(None)` when all are held.
    ///
    /// # Errors
    ///
    /// [`RedisError::Redis`] when Redis does not answer or the script fails.
    pub async fn lease_slot(&self, key: &str, max: u32) -> Result<Option<SharedSlot>, RedisError> {
        let inner = &self.inner;
        let mut conn = inner.connection().await?;
        let set = inner.key("slots", key);
        let lease = Uuid::now_v7().simple().to_string();
        let leased: i64 = inner
            .scripts
            .acquire
            .key(&set)
            .arg(max.max(1))
            .arg(&lease)
            .arg(lease_ms(inner.lease))
            .invoke_async(&mut conn)
            .await
            .map_err(inner.failed("leasing a shared concurrency slot"))?;
        if leased != 1 {
            return Ok(None);
        }
        inner.hold(&lease, &set);
        self.start_renewing();
        let inner = Arc::clone(&self.inner);
        Ok(Some(SharedSlot::new(move || {
            Box::pin(async move { inner.give_back(&set, &lease).await })
        })))
    }

    /// Starts the task that renews this instance's leases, once (from inside a tokio runtime:
    /// a lease was just taken in one).
    fn start_renewing(&self) {
        if self.inner.renewing.swap(true, Ordering::SeqCst) {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            self.inner.renewing.store(false, Ordering::SeqCst);
            return;
        };
        let weak = Arc::downgrade(&self.inner);
        let stop = self.inner.stop.clone();
        runtime.spawn(renew_leases(weak, self.inner.lease / 3, stop));
    }
}

/// Renews the leases of the counter behind `weak` every `every`, until the counter is dropped
/// (`stop`).
async fn renew_leases(weak: Weak<Inner>, every: Duration, stop: CancellationToken) {
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(every) => {}
        }
        let Some(inner) = weak.upgrade() else {
            return;
        };
        if let Err(e) = inner.renew().await {
            tracing::warn!(
                error = %ErrorChain(&e),
                "concurrency slots not renewed in Redis; they are given back {} s after the last renewal",
                inner.lease.as_secs()
            );
        }
    }
}

fn lease_ms(lease: Duration) -> u64 {
    u64::try_from(lease.as_millis()).unwrap_or(u64::MAX)
}

impl Inner {
    /// The connection, made on first use (reconnecting after a failure is the manager's job).
    async fn connection(&self) -> Result<ConnectionManager, RedisError> {
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(TIMEOUT))
            .set_response_timeout(Some(TIMEOUT))
            .set_number_of_retries(1);
        let conn = self
            .conn
            .get_or_try_init(|| async {
                ConnectionManager::new_lazy_with_config(self.client.clone(), config)
            })
            .await
            .map_err(self.failed("connecting"))?;
        Ok(conn.clone())
    }

    /// The Redis key of `key`'s `kind` (`rate` or `slots`).
    fn key(&self, kind: &str, key: &str) -> String {
        format!("{}{kind}:{key}", self.prefix.as_str())
    }

    fn failed(&self, what: &'static str) -> impl FnOnce(redis::RedisError) -> RedisError + '_ {
        move |source| RedisError::Redis {
            url: self.url.shown.clone(),
            what,
            source,
        }
    }

    fn hold(&self, lease: &str, set: &str) {
        self.held
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(lease.to_owned(), set.to_owned());
    }

    /// Gives a slot back (only while this lease still holds it). A failure leaves it to expire.
    async fn give_back(&self, set: &str, lease: &str) {
        self.held
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(lease);
        let released = match self.connection().await {
            Ok(mut conn) => redis::cmd("ZREM")
                .arg(set)
                .arg(lease)
                .query_async::<i64>(&mut conn)
                .await
                .map(drop)
                .map_err(self.failed("giving back a shared concurrency slot")),
            Err(e) => Err(e),
        };
        if let Err(e) = released {
            tracing::warn!(error = %ErrorChain(&e), key = set, "the slot is given back when its lease expires");
        }
    }

    /// Renews every lease this instance holds, in one script.
    async fn renew(&self) -> Result<(), RedisError> {
        let held: Vec<(String, String)> = self
            .held
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .map(|(lease, set)| (lease.clone(), set.clone()))
            .collect();
        if held.is_empty() {
            return Ok(());
        }
        let mut conn = self.connection().await?;
        let mut invocation = self.scripts.renew.prepare_invoke();
        invocation.arg(lease_ms(self.lease));
        for (lease, set) in &held {
            invocation.key(set).arg(lease);
        }
        invocation
            .invoke_async::<i64>(&mut conn)
            .await
            .map_err(self.failed("renewing this instance's concurrency slots"))?;
        Ok(())
    }
}

/// The refusal when the shared count cannot be reached: the call does not run uncounted.
fn unreachable(key: &str, e: &RedisError) -> ToolError {
    ToolError::new(
        ErrorKind::Unavailable,
        format!(
            "The shared limit {key} could not be counted in Redis, so the call was not run: {} (check that Redis is reachable, or remove [cluster] redis_url)",
            ErrorChain(e)
        ),
    )
}

impl SharedCounter for RedisQuotas {
    fn take<'a>(
        &'a self,
        key: &'a str,
        limit: RateLimit,
    ) -> BoxFuture<'a, Result<Result<(), Duration>, ToolError>> {
        Box::pin(async move {
            self.take_token(key, limit)
                .await
                .map_err(|e| unreachable(key, &e))
        })
    }

    fn acquire<'a>(
        &'a self,
        key: &'a str,
        max: u32,
    ) -> BoxFuture<'a, Result<Option<SharedSlot>, ToolError>> {
        Box::pin(async move {
            self.lease_slot(key, max)
                .await
                .map_err(|e| unreachable(key, &e))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_checked_and_passwords_never_shown() {
        let url = RedisUrl::parse("redis://:s3cret@cache.internal:6380/2").unwrap();
        assert_eq!(url.to_string(), "redis://:***@cache.internal:6380/2");
        assert!(!format!("{url:?}").contains("s3cret"));
        let url = RedisUrl::parse("rediss://app:s3cret@cache.internal").unwrap();
        assert_eq!(url.to_string(), "rediss://app:***@cache.internal");
        assert_eq!(
            RedisUrl::parse(" redis://127.0.0.1:6379 ")
                .unwrap()
                .to_string(),
            "redis://127.0.0.1:6379"
        );
        for bad in [
            "http://:s3cret@cache.internal:6379",
            "unix:///run/redis.sock",
            "127.0.0.1:6379",
            "redis://:s3cret@",
            "cache.internal",
            "redis://a:s3cret@host:notaport",
        ] {
            let err = RedisUrl::parse(bad).unwrap_err();
            assert_eq!(err.kind(), RedisErrorKind::Config);
            let msg = ErrorChain(&err).to_string();
            assert!(!msg.contains("s3cret"), "{msg}");
            assert!(msg.contains("write redis://HOST:PORT"), "{msg}");
        }
        let msg = RedisUrl::parse("http://:s3cret@cache.internal:6379")
            .unwrap_err()
            .to_string();
        assert!(msg.contains("the scheme http:// is not supported"), "{msg}");
    }

    #[test]
    fn prefixes_are_checked() {
        assert_eq!(KeyPrefix::default().as_str(), "toolgate:");
        assert_eq!(
            KeyPrefix::parse("tg-test:42:").unwrap().as_str(),
            "tg-test:42:"
        );
        for bad in ["", "with space", "tab\t", &"x".repeat(65), "é:"] {
            let err = KeyPrefix::parse(bad).unwrap_err();
            assert_eq!(err.kind(), RedisErrorKind::Config, "{bad:?}");
        }
    }
}
