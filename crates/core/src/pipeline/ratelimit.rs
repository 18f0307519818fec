//! A rate-limit stage: a token bucket per (principal, tool), kept in memory.

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

struct Bucket {
    tokens: f64,
    at: Instant,
}

/// Refuses calls over the limit with `rate_limited`, saying when to try again.
pub struct RateLimitStage {
    default: RateLimit,
    per_tool: HashMap<String, RateLimit>,
    buckets: Mutex<HashMap<(String, String), Bucket>>,
}

impl RateLimitStage {
    /// One limit for every tool.
    pub fn new(default: RateLimit) -> Self {
        Self {
            default,
            per_tool: HashMap::new(),
            buckets: Mutex::new(HashMap::new()),
        }
    }

    /// A different limit for one tool.
    #[must_use]
    pub fn tool(mut self, name: impl Into<String>, limit: RateLimit) -> Self {
        self.per_tool.insert(name.into(), limit);
        self
    }

    fn take(&self, principal: &str, tool: &str, now: Instant) -> Result<(), Duration> {
        let limit = self.per_tool.get(tool).copied().unwrap_or(self.default);
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
        match self.take(
            call.request.principal.id.as_str(),
            spec.name().as_str(),
            Instant::now(),
        ) {
            Ok(()) => next.run(call),
            Err(wait) => {
                let msg = format!(
                    "Rate limit exceeded for tool {}; retry in {} ms",
                    spec.name(),
                    wait.as_millis().max(1)
                );
                Box::pin(
                    async move { Err(ToolError::new(ErrorKind::RateLimited, msg).permanent()) },
                )
            }
        }
    }
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
        Self { quotas }
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
        if let Some(rate) = state.quota.rate {
            let now = Instant::now();
            let mut bucket = state.bucket.lock().unwrap_or_else(|p| p.into_inner());
            let taken = bucket
                .get_or_insert_with(|| Bucket::full(rate, now))
                .take(rate, now);
            if let Err(wait) = taken {
                let msg = format!(
                    "Rate limit exceeded for principal {principal} ({} calls per second, bursts of {}); retry in {} ms",
                    rate.per_second,
                    rate.burst,
                    wait.as_millis().max(1)
                );
                return Box::pin(async move {
                    Err(ToolError::new(ErrorKind::RateLimited, msg).permanent())
                });
            }
        }
        let permit = match &state.in_flight {
            None => None,
            Some(semaphore) => match Arc::clone(semaphore).try_acquire_owned() {
                Ok(permit) => Some(permit),
                Err(_) => {
                    let msg = format!(
                        "Too many calls in flight for principal {principal} (at most {}); retry when one finishes",
                        state.quota.max_concurrent.unwrap_or(1)
                    );
                    return Box::pin(async move {
                        Err(ToolError::new(ErrorKind::RateLimited, msg).permanent())
                    });
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
