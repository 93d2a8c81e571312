//! What a phase measured: how many operations in how long, and their latencies.

use std::time::Duration;

/// One phase: how many operations in how long, and each one's latency.
#[derive(Debug, Clone, Default)]
pub struct Run {
    pub count: usize,
    pub elapsed: Duration,
    /// In the order measured (the percentile helpers sort a copy): the verify phase pairs its
    /// sides round by round.
    pub latencies: Vec<Duration>,
}

impl Run {
    pub fn rate(&self) -> f64 {
        self.count as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    fn percentile(&self, p: f64) -> Duration {
        let mut v = self.latencies.clone();
        if v.is_empty() {
            return Duration::ZERO;
        }
        v.sort_unstable();
        let i = ((v.len() as f64 * p).ceil() as usize).clamp(1, v.len()) - 1;
        v[i]
    }

    pub fn p50_ms(&self) -> f64 {
        self.percentile(0.50).as_secs_f64() * 1e3
    }

    pub fn p99_ms(&self) -> f64 {
        self.percentile(0.99).as_secs_f64() * 1e3
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_use_the_nearest_rank() {
        let run = Run {
            count: 100,
            elapsed: Duration::from_secs(2),
            latencies: (1..=100).rev().map(Duration::from_millis).collect(),
        };
        assert_eq!(run.rate(), 50.0);
        assert_eq!(run.p50_ms(), 50.0);
        assert_eq!(run.p99_ms(), 99.0);
        let one = Run {
            latencies: vec![Duration::from_millis(7)],
            ..Run::default()
        };
        assert_eq!((one.p50_ms(), one.p99_ms()), (7.0, 7.0));
    }
}
