//! Latency statistics: every sample is kept, percentiles are exact.
//!
//! A 10 s run at a few tens of thousands of requests per second is well under
//! a million samples (8 bytes each), so there is no need for a histogram.

use std::time::Duration;

/// Latency samples in nanoseconds.
#[derive(Debug, Default)]
pub struct Latencies {
    samples: Vec<u64>,
}

impl Latencies {
    pub fn with_capacity(capacity: usize) -> Self {
        Self {
            samples: Vec::with_capacity(capacity),
        }
    }

    pub fn record(&mut self, latency: Duration) {
        self.samples
            .push(u64::try_from(latency.as_nanos()).unwrap_or(u64::MAX));
    }

    pub fn merge(&mut self, other: Latencies) {
        self.samples.extend(other.samples);
    }

    pub fn len(&self) -> usize {
        self.samples.len()
    }

    /// Sort the samples and summarise them.
    pub fn summary(mut self) -> Summary {
        self.samples.sort_unstable();
        let samples = &self.samples;
        let total: u128 = samples.iter().map(|&s| u128::from(s)).sum();
        let mean_ns = if samples.is_empty() {
            0.0
        } else {
            total as f64 / samples.len() as f64
        };
        Summary {
            p50_ms: ms(percentile(samples, 50.0)),
            p90_ms: ms(percentile(samples, 90.0)),
            p99_ms: ms(percentile(samples, 99.0)),
            p999_ms: ms(percentile(samples, 99.9)),
            max_ms: ms(samples.last().copied().unwrap_or(0)),
            mean_ms: mean_ns / 1e6,
        }
    }
}

/// Percentiles in milliseconds.
#[derive(Debug, Clone, Copy)]
pub struct Summary {
    pub p50_ms: f64,
    pub p90_ms: f64,
    pub p99_ms: f64,
    pub p999_ms: f64,
    pub max_ms: f64,
    pub mean_ms: f64,
}

/// Nearest-rank percentile of sorted samples (0 when there are none).
fn percentile(sorted: &[u64], pct: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = ((pct / 100.0) * sorted.len() as f64).ceil() as usize;
    let index = rank.clamp(1, sorted.len()) - 1;
    sorted[index]
}

fn ms(ns: u64) -> f64 {
    ns as f64 / 1e6
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let mut latencies = Latencies::default();
        for ms in 1..=100u64 {
            latencies.record(Duration::from_millis(ms));
        }
        let summary = latencies.summary();
        assert!((summary.p50_ms - 50.0).abs() < 1e-9);
        assert!((summary.p99_ms - 99.0).abs() < 1e-9);
        assert!((summary.max_ms - 100.0).abs() < 1e-9);
        assert!((summary.mean_ms - 50.5).abs() < 1e-9);
    }

    #[test]
    fn empty_is_zero() {
        let summary = Latencies::default().summary();
        assert!(summary.p50_ms.abs() < 1e-12);
        assert!(summary.max_ms.abs() < 1e-12);
    }
}
