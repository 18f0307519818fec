//! A rate-limit stage: a token bucket per (principal, tool), kept in memory.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

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
        let bucket = buckets
            .entry((principal.to_owned(), tool.to_owned()))
            .or_insert(Bucket {
                tokens: f64::from(limit.burst),
                at: now,
            });
        let elapsed = now.saturating_duration_since(bucket.at).as_secs_f64();
        bucket.tokens = (bucket.tokens + elapsed * limit.per_second).min(f64::from(limit.burst));
        bucket.at = now;
        if bucket.tokens >= 1.0 {
            bucket.tokens -= 1.0;
            Ok(())
        } else {
            // `RateLimit::new` keeps per_second finite and positive; saturate all the same.
            Err(
                Duration::try_from_secs_f64((1.0 - bucket.tokens) / limit.per_second)
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
