//! A rate-limit stage: a token bucket per (principal, tool), kept in memory.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::{Call, Next, Stage};
use crate::envelope::ErrorKind;
use crate::error::ToolError;
use crate::tool::{BoxFuture, ToolOutput};

/// At most `burst` calls at once, refilled at `per_second`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RateLimit {
    pub burst: u32,
    pub per_second: f64,
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
        } else if limit.per_second > 0.0 {
            Err(Duration::from_secs_f64(
                (1.0 - bucket.tokens) / limit.per_second,
            ))
        } else {
            Err(Duration::MAX)
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
                let msg = if wait == Duration::MAX {
                    format!("Rate limit for tool {} allows no calls", spec.name())
                } else {
                    format!(
                        "Rate limit exceeded for tool {}; retry in {} ms",
                        spec.name(),
                        wait.as_millis().max(1)
                    )
                };
                Box::pin(
                    async move { Err(ToolError::new(ErrorKind::RateLimited, msg).permanent()) },
                )
            }
        }
    }
}
