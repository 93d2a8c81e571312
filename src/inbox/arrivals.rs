//! A signal to the workers of a process that events were committed for a claim: stored `pending`
//! by the receiver of the same process (through the hand-over, when the workers had no room), or
//! put back by the workers themselves.
//!
//! Workers poll the inbox when idle. In `hookgate standalone` both roles share a process, so an
//! idle worker can be woken the moment an insert commits instead of at its next poll: an event's
//! completion latency then no longer includes up to a poll interval of waiting. A busy worker
//! reads the same signal to keep a quarter of its slots for claims. Workers in other processes
//! get it from PostgreSQL's notifications (`super::notify`).
//!
//! The signal names the integrations whose events were stored, when the sender knows them, so
//! that a busy PostgreSQL pool's next claim looks at an integration its recent claims did not
//! serve at once, rather than at the next full claim, up to a second later (`worker::cursor`).

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::Notify;

/// The most integrations one signal names: past them, the rest are found by the full claim, as
/// any stored without a name are. A pool's claims look at no more integrations than this either
/// (`worker::cursor::KEPT`).
pub const NAMED: usize = 64;

/// Cheap to clone; every clone signals the same workers.
#[derive(Clone, Debug, Default)]
pub struct Arrivals(Arc<Signal>);

#[derive(Debug, Default)]
struct Signal {
    wake: Notify,
    /// Set by every commit, cleared by [`Arrivals::take`]: a busy pool is never waiting on
    /// `wake`, and still has to know that events wait for a claim.
    since_taken: AtomicBool,
    /// The integrations named since the last [`Arrivals::take_integrations`], at most [`NAMED`].
    integrations: Mutex<BTreeSet<String>>,
}

impl Arrivals {
    /// New events were committed for a claim. A worker already waiting wakes; otherwise the
    /// next wait returns at once, so a signal sent while the worker was busy is not lost.
    pub fn committed(&self) {
        self.0.since_taken.store(true, Ordering::Release);
        self.0.wake.notify_one();
    }

    /// [`Arrivals::committed`] for events of `integration`.
    pub fn committed_for(&self, integration: &str) {
        {
            let mut names = self.lock();
            if names.len() < NAMED && !names.contains(integration) {
                names.insert(integration.to_owned());
            }
        }
        self.committed();
    }

    /// The integrations named since the last call (not every one stored for a claim: some are
    /// stored without a name).
    pub fn take_integrations(&self) -> BTreeSet<String> {
        std::mem::take(&mut *self.lock())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeSet<String>> {
        self.0
            .integrations
            .lock()
            .unwrap_or_else(|p| p.into_inner())
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

    #[test]
    fn the_integrations_named_are_taken_once_and_at_most_named() {
        let a = Arrivals::default();
        a.committed_for("t/b");
        a.committed_for("t/a");
        a.committed_for("t/b");
        a.committed();
        assert!(a.take());
        let names: Vec<String> = a.take_integrations().into_iter().collect();
        assert_eq!(names, ["t/a", "t/b"]);
        assert!(a.take_integrations().is_empty(), "taken");
        for i in 0..super::NAMED + 10 {
            a.committed_for(&format!("t/{i:03}"));
        }
        assert_eq!(a.take_integrations().len(), super::NAMED);
        assert!(a.take(), "every one signalled");
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
