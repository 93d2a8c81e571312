//! A signal to the workers of a process that events were committed for a claim: stored `pending`
//! by the receiver of the same process (through the hand-over, when the workers had no room), or
//! put back by the workers themselves.
//!
//! Workers poll the inbox when idle. In `hookgate standalone` both roles share a process, so an
//! idle worker can be woken the moment an insert commits instead of at its next poll: an event's
//! completion latency then no longer includes up to a poll interval of waiting. A busy worker
//! reads the same signal to keep a quarter of its slots for claims. Workers in other processes
//! get it from PostgreSQL's notifications (`super::notify`).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use tokio::sync::Notify;

/// Cheap to clone; every clone signals the same workers.
#[derive(Clone, Debug, Default)]
pub struct Arrivals(Arc<Signal>);

#[derive(Debug, Default)]
struct Signal {
    wake: Notify,
    /// Set by every commit, cleared by [`Arrivals::take`]: a busy pool is never waiting on
    /// `wake`, and still has to know that events wait for a claim.
    since_taken: AtomicBool,
}

impl Arrivals {
    /// New events were committed for a claim. A worker already waiting wakes; otherwise the
    /// next wait returns at once, so a signal sent while the worker was busy is not lost.
    pub fn committed(&self) {
        self.0.since_taken.store(true, Ordering::Release);
        self.0.wake.notify_one();
    }

    /// Resolves at the next [`Arrivals::committed`] (or at once if one is pending).
    pub async fn wait(&self) {
        self.0.wake.notified().await;
    }

    /// Whether events were committed for a claim since the last call.
    pub fn take(&self) -> bool {
        self.0.since_taken.swap(false, Ordering::AcqRel)
    }
}

#[cfg(test)]
mod tests {
    use super::Arrivals;
    use std::time::Duration;

    #[tokio::test]
    async fn a_signal_sent_before_the_wait_is_kept_and_spent_once() {
        let a = Arrivals::default();
        a.committed();
        a.committed();
        // The first wait takes the stored signal; two signals do not make two wake-ups.
        tokio::time::timeout(Duration::from_secs(5), a.wait())
            .await
            .expect("a pending signal wakes the waiter");
        let second = tokio::time::timeout(Duration::from_millis(50), a.wait()).await;
        assert!(second.is_err(), "the signal was spent");
    }

    #[test]
    fn a_commit_is_taken_once() {
        let a = Arrivals::default();
        assert!(!a.take(), "nothing committed yet");
        a.committed();
        a.committed();
        assert!(a.take());
        assert!(!a.take(), "taken");
    }

    #[tokio::test]
    async fn a_waiting_worker_wakes_on_commit() {
        let a = Arrivals::default();
        let waiter = tokio::spawn({
            let a = a.clone();
            async move { a.wait().await }
        });
        tokio::task::yield_now().await;
        a.committed();
        tokio::time::timeout(Duration::from_secs(5), waiter)
            .await
            .expect("woken")
            .unwrap();
    }
}
