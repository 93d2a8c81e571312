//! How long a watch waits before it retries after an error.
//!
//! kube's default (client-go's reflector: 0.8 s doubling to 30 s, with jitter, reset after 120 s
//! without errors) is tuned for thousands of clients. It made hookgate slow to recover from an
//! API-server restart: every watch meets at least one `410 Gone` for its old resourceVersion (and
//! an RBAC `403` while the new server's caches warm up), each counted as a failure, so the delays
//! had grown to 25-50 s by the time the server was back, and a new integration was not routed for
//! over a minute. hookgate runs a handful of watches per pod, so it retries sooner and caps lower.

use kube::runtime::utils::Backoff;
use std::time::Duration;

pub const FIRST: Duration = Duration::from_millis(250);
pub const MAX: Duration = Duration::from_secs(5);

/// 250 ms, 500 ms, 1 s, 2 s, 4 s, then 5 s; back to 250 ms after a success (`reset`).
#[derive(Debug, Clone)]
pub struct WatchBackoff {
    next: Duration,
}

impl Default for WatchBackoff {
    fn default() -> Self {
        WatchBackoff { next: FIRST }
    }
}

impl Iterator for WatchBackoff {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        let delay = self.next;
        self.next = (delay * 2).min(MAX);
        Some(delay)
    }
}

impl Backoff for WatchBackoff {
    fn reset(&mut self) {
        self.next = FIRST;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_from_a_quarter_second_to_five_and_resets() {
        let mut b = WatchBackoff::default();
        let ms: Vec<u128> = b.by_ref().take(8).map(|d| d.as_millis()).collect();
        assert_eq!(ms, [250, 500, 1000, 2000, 4000, 5000, 5000, 5000]);
        b.reset();
        assert_eq!(b.next(), Some(FIRST));
    }
}
