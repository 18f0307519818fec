//! The rate-limit and quota stages: a token bucket per (principal, tool) and per principal, and a
//! cap on a principal's calls in flight — counted in this process, or in a [`SharedCounter`] that
//! several instances share (the store's PostgreSQL), so that limits hold across all of them.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use std::time::{Duration, Instant};
use tokio::sync::Semaphore;

use super::{Call, Next, Stage};
use crate::envelope::ErrorKind;
use crate::error::ToolError;
use crate::tool::{BoxFuture, ToolOutput};

/// At most `burst` calls at once, refilled at `per_second`. Make one with [`RateLimit::new`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RateLimit {
    burst: u32,
    per_second: f64,
}

impl RateLimit {
    /// A limit of `burst` ≥ 1 calls at once, refilled at a finite `per_second` > 0.
    pub fn new(burst: u32, per_second: f64) -> Result<Self, String> {
        if burst == 0 {
            return Err(
                "rate limit burst must be at least 1 (how many calls may start at once)".into(),
            );
        }
        if !per_second.is_finite() || per_second <= 0.0 {
            return Err(format!(
                "rate limit per_second must be a positive number, not {per_second}"
            ));
        }
        Ok(Self { burst, per_second })
    }

    /// Calls that may start at once.
    pub fn burst(&self) -> u32 {
        self.burst
    }

    /// Refill rate per second.
    pub fn per_second(&self) -> f64 {
        self.per_second
    }
}

/// Where limits are counted when several processes serve the same principals: a token bucket
/// and a set of leased concurrency slots per key, kept outside the process (toolgate's store
/// implements it over PostgreSQL). A key names one limit (`principal/ID`, `tool/ID/TOOL`).
pub trait SharedCounter: Send + Sync {
    /// Takes one call from `key`'s bucket under `limit`: `Ok(Ok(()))` when taken, `Ok(Err(wait))`
    /// when none is left (how long until one is), `Err` when the count cannot be reached (the
    /// error becomes the call's result: an `unavailable` error saying so).
    fn take<'a>(
        &'a self,
        key: &'a str,
        limit: RateLimit,
    ) -> BoxFuture<'a, Result<Result<(), Duration>, ToolError>>;

    /// One of `key`'s at most `max` slots: `Ok(Some(slot))` when one was free, `Ok(None)` when
    /// all are held, `Err` when the count cannot be reached.
    fn acquire<'a>(
        &'a self,
        key: &'a str,
        max: u32,
    ) -> BoxFuture<'a, Result<Option<SharedSlot>, ToolError>>;
}

type Release = Box<dyn FnOnce() -> BoxFuture<'static, ()> + Send>;

/// A concurrency slot held in a [`SharedCounter`]. [`SharedSlot::release`] gives it back; a slot
/// dropped without (a cancelled call) is given back by a background task, and one whose process
/// died comes back when its lease expires.
pub struct SharedSlot {
    release: Option<Release>,
}

impl SharedSlot {
    /// A slot that `release` gives back.
    pub fn new(release: impl FnOnce() -> BoxFuture<'static, ()> + Send + 'static) -> Self {
        Self {
            release: Some(Box::new(release)),
        }
    }

    /// Gives the slot back and waits until that is done.
    pub async fn release(mut self) {
        if let Some(release) = self.release.take() {
            release().await;
        }
    }
}

impl Drop for SharedSlot {
    fn drop(&mut self) {
        if let Some(release) = self.release.take()
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            runtime.spawn(release());
        }
    }
}

impl std::fmt::Debug for SharedSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedSlot")
            .field("held", &self.release.is_some())
            .finish()
    }
}

struct Bucket {
    tokens: f64,
    at: Instant,
}

/// Refuses calls over the limit with `rate_limited`, saying when to try again.
pub struct RateLimitStage {
    default: RateLimit,
    per_tool: HashMap<String, RateLimit>,
    buckets: Mutex<HashMap<(String, String), Bucket>>,
    shared: Option<Arc<dyn SharedCounter>>,
}

impl RateLimitStage {
    /// One limit for every tool.
    pub fn new(default: RateLimit) -> Self {
        Self {
            default,
            per_tool: HashMap::new(),
            buckets: Mutex::new(HashMap::new()),
            shared: None,
        }
    }

    /// Counts in `counter` (shared by instances) instead of in this process.
    #[must_use]
    pub fn shared(mut self, counter: Arc<dyn SharedCounter>) -> Self {
        self.shared = Some(counter);
        self
    }

    /// A different limit for one tool.
    #[must_use]
    pub fn tool(mut self, name: impl Into<String>, limit: RateLimit) -> Self {
        self.per_tool.insert(name.into(), limit);
        self
    }

    fn limit(&self, tool: &str) -> RateLimit {
        self.per_tool.get(tool).copied().unwrap_or(self.default)
    }

    fn take(&self, principal: &str, tool: &str, now: Instant) -> Result<(), Duration> {
        let limit = self.limit(tool);
        let mut buckets = self.buckets.lock().unwrap_or_else(|p| p.into_inner());
        buckets
            .entry((principal.to_owned(), tool.to_owned()))
            .or_insert_with(|| Bucket::full(limit, now))
            .take(limit, now)
    }
}

impl Bucket {
    fn full(limit: RateLimit, now: Instant) -> Self {
        Self {
            tokens: f64::from(limit.burst),
            at: now,
        }
    }

    /// Takes one token, or says how long until one is available.
    fn take(&mut self, limit: RateLimit, now: Instant) -> Result<(), Duration> {
        let elapsed = now.saturating_duration_since(self.at).as_secs_f64();
        self.tokens = (self.tokens + elapsed * limit.per_second).min(f64::from(limit.burst));
        self.at = now;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            Ok(())
        } else {
            // `RateLimit::new` keeps per_second finite and positive; saturate all the same.
            Err(
                Duration::try_from_secs_f64((1.0 - self.tokens) / limit.per_second)
                    .unwrap_or(Duration::MAX),
            )
        }
    }
}

impl Stage for RateLimitStage {
    fn name(&self) -> &'static str {
        "rate_limit"
    }

    fn run<'a>(&'a self, call: &'a mut Call, next: Next<'a>) -> BoxFuture<'a, ToolOutput> {
        let Some(spec) = call.spec() else {
            return next.run(call);
        };
        let tool = spec.name().as_str().to_owned();
        let principal = call.request.principal.id.as_str();
        let Some(counter) = &self.shared else {
            return match self.take(principal, &tool, Instant::now()) {
                Ok(()) => next.run(call),
                Err(wait) => Box::pin(async move { Err(tool_limited(&tool, wait)) }),
            };
        };
        let key = format!("tool/{principal}/{tool}");
        let limit = self.limit(&tool);
        Box::pin(async move {
            match counter.take(&key, limit).await? {
                Ok(()) => next.run(call).await,
                Err(wait) => Err(tool_limited(&tool, wait)),
            }
        })
    }
}

fn tool_limited(tool: &str, wait: Duration) -> ToolError {
    let msg = format!(
        "Rate limit exceeded for tool {tool}; retry in {} ms",
        wait.as_millis().max(1)
    );
    ToolError::new(ErrorKind::RateLimited, msg).permanent()
}

fn principal_limited(principal: &str, rate: RateLimit, wait: Duration) -> ToolError {
    let msg = format!(
        "Rate limit exceeded for principal {principal} ({} calls per second, bursts of {}); retry in {} ms",
        rate.per_second,
        rate.burst,
        wait.as_millis().max(1)
    );
    ToolError::new(ErrorKind::RateLimited, msg).permanent()
}

fn too_many_in_flight(principal: &str, max: u32) -> ToolError {
    let msg = format!(
        "Too many calls in flight for principal {principal} (at most {max}); retry when one finishes"
    );
    ToolError::new(ErrorKind::RateLimited, msg).permanent()
}

/// One principal's quota: a rate over all its calls and a cap on its calls in flight.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Quota {
    /// A rate over all the principal's calls.
    pub rate: Option<RateLimit>,
    /// At most this many calls of the principal run at once (≥ 1).
    pub max_concurrent: Option<u32>,
}

struct QuotaState {
    quota: Quota,
    bucket: Mutex<Option<Bucket>>,
    in_flight: Option<Arc<Semaphore>>,
}

/// Per-principal quotas: refuses calls over a principal's rate or concurrency cap with
/// `rate_limited`. Principals without a quota are not limited.
pub struct PrincipalQuotaStage {
    quotas: HashMap<String, QuotaState>,
    shared: Option<Arc<dyn SharedCounter>>,
}

impl PrincipalQuotaStage {
    /// Quotas by principal id.
    pub fn new(quotas: impl IntoIterator<Item = (String, Quota)>) -> Self {
        let quotas = quotas
            .into_iter()
            .map(|(id, quota)| {
                let in_flight = quota
                    .max_concurrent
                    .map(|n| Arc::new(Semaphore::new(n.max(1) as usize)));
                (
                    id,
                    QuotaState {
                        quota,
                        bucket: Mutex::new(None),
                        in_flight,
                    },
                )
            })
            .collect();
        Self {
            quotas,
            shared: None,
        }
    }

    /// Counts in `counter` (shared by instances) instead of in this process: the rate in a
    /// shared bucket, the calls in flight as leased slots.
    #[must_use]
    pub fn shared(mut self, counter: Arc<dyn SharedCounter>) -> Self {
        self.shared = Some(counter);
        self
    }
}

impl Stage for PrincipalQuotaStage {
    fn name(&self) -> &'static str {
        "principal_quota"
    }

    fn run<'a>(&'a self, call: &'a mut Call, next: Next<'a>) -> BoxFuture<'a, ToolOutput> {
        let principal = call.request.principal.id.as_str();
        let Some(state) = self.quotas.get(principal) else {
            return next.run(call);
        };
        if let Some(counter) = &self.shared {
            return shared_quota(
                counter.as_ref(),
                state.quota,
                principal.to_owned(),
                call,
                next,
            );
        }
        if let Some(rate) = state.quota.rate {
            let now = Instant::now();
            let mut bucket = state.bucket.lock().unwrap_or_else(|p| p.into_inner());
            let taken = bucket
                .get_or_insert_with(|| Bucket::full(rate, now))
                .take(rate, now);
            if let Err(wait) = taken {
                let refused = principal_limited(principal, rate, wait);
                return Box::pin(async move { Err(refused) });
            }
        }
        let permit = match &state.in_flight {
            None => None,
            Some(semaphore) => match Arc::clone(semaphore).try_acquire_owned() {
                Ok(permit) => Some(permit),
                Err(_) => {
                    let refused =
                        too_many_in_flight(principal, state.quota.max_concurrent.unwrap_or(1));
                    return Box::pin(async move { Err(refused) });
                }
            },
        };
        Box::pin(async move {
            let out = next.run(call).await;
            drop(permit);
            out
        })
    }
}

/// The quota stage over a shared counter: the same checks, in the same order, with the same
/// refusals as in this process.
fn shared_quota<'a>(
    counter: &'a dyn SharedCounter,
    quota: Quota,
    principal: String,
    call: &'a mut Call,
    next: Next<'a>,
) -> BoxFuture<'a, ToolOutput> {
    Box::pin(async move {
        let key = format!("principal/{principal}");
        if let Some(rate) = quota.rate
            && let Err(wait) = counter.take(&key, rate).await?
        {
            return Err(principal_limited(&principal, rate, wait));
        }
        let Some(max) = quota.max_concurrent else {
            return next.run(call).await;
        };
        let Some(slot) = counter.acquire(&key, max.max(1)).await? else {
            return Err(too_many_in_flight(&principal, max));
        };
        let out = next.run(call).await;
        slot.release().await;
        out
    })
}
