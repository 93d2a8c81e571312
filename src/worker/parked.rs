//! The pool's side of each integration's share of the slots (`super::fair` decides): the slot a
//! delivery holds in its integration's count, the events parked until their integration has a
//! slot again, and the events deferred back to the inbox while their destination is stuck.

use super::Worker;
use super::fair::{Fair, Turn};
use super::in_flight::InFlight;
use super::slots::{Share, lease_left_for_an_attempt};
use crate::inbox::Claimed;
use crate::metrics::Metrics;
use chrono::Utc;
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;

/// A delivery slot, counted in its integration's share until the destination has answered (or
/// timed out), or the delivery ended without an attempt.
pub(crate) struct Slot {
    _permit: OwnedSemaphorePermit,
    fair: Arc<Mutex<Fair>>,
    integration: Arc<str>,
    timed_out: bool,
}

/// A delivery in its integration's count of unfinished ones, until its task ends (its outcome
/// written, or the task aborted).
pub(super) struct Unfinished {
    fair: Arc<Mutex<Fair>>,
    integration: Arc<str>,
}

impl Drop for Unfinished {
    fn drop(&mut self) {
        lock(&self.fair).finished(&self.integration);
    }
}

impl Slot {
    pub(super) fn new(
        permit: OwnedSemaphorePermit,
        fair: &Arc<Mutex<Fair>>,
        integration: &str,
    ) -> Self {
        lock(fair).started(integration, Instant::now());
        Self {
            _permit: permit,
            fair: fair.clone(),
            integration: Arc::from(integration),
            timed_out: false,
        }
    }

    /// What the delivery's task holds until it ends.
    pub(super) fn unfinished(&self) -> Unfinished {
        Unfinished {
            fair: self.fair.clone(),
            integration: self.integration.clone(),
        }
    }

    /// The destination did not answer within the attempt's time: a sign that it is stuck.
    pub(crate) fn timed_out(&mut self) {
        self.timed_out = true;
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        lock(&self.fair).ended(&self.integration, self.timed_out, Instant::now());
    }
}

/// A poisoned share is still a count worth reading: a panicking delivery task cannot stop the pool.
pub(super) fn lock(fair: &Mutex<Fair>) -> MutexGuard<'_, Fair> {
    fair.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// What starting a parked event touches in the pool.
pub(super) struct Starts<'a> {
    pub tasks: &'a mut JoinSet<bool>,
    pub in_flight: &'a InFlight,
    pub fair: &'a Arc<Mutex<Fair>>,
    pub permits: &'a Arc<Semaphore>,
    pub share: &'a mut Share,
    pub parked: &'a mut VecDeque<(Claimed, bool)>,
    pub deferred: &'a mut Vec<(Claimed, Duration)>,
}

impl Worker {
    /// Starts the parked events whose integration has a slot again, oldest first; defers those
    /// whose integration has stalled, and puts back those left without lease for an attempt.
    pub(super) fn start_parked(&self, s: &mut Starts<'_>) {
        let lease = self.inner.cfg.lease;
        let mut i = 0;
        while i < s.parked.len() {
            let (event, handed) = &s.parked[i];
            if !lease_left_for_an_attempt(event.lease_until, Utc::now(), lease) {
                let (event, _) = s.parked.remove(i).expect("in range");
                s.tasks.spawn(self.clone().put_back(event));
                continue;
            }
            let turn = lock(s.fair).turn(&event.integration, Instant::now());
            match turn {
                Turn::Wait => i += 1,
                Turn::Defer(after) => {
                    let (event, _) = s.parked.remove(i).expect("in range");
                    s.deferred.push((event, after));
                }
                Turn::Start if *handed && !s.share.may_start_handed() => i += 1,
                Turn::Start => {
                    let Ok(permit) = s.permits.clone().try_acquire_owned() else {
                        break;
                    };
                    let (event, handed) = s.parked.remove(i).expect("in range");
                    if handed {
                        s.share.started_handed();
                    }
                    let slot = Slot::new(permit, s.fair, &event.integration);
                    self.start(s.tasks, s.in_flight, event, slot, handed);
                }
            }
        }
    }

    /// Gives the deferred events back to the inbox (not counted as attempts), due again after
    /// their integration's deferral; says so once each time an integration starts being deferred.
    pub(super) fn defer(
        &self,
        tasks: &mut JoinSet<bool>,
        fair: &Mutex<Fair>,
        deferred: &mut Vec<(Claimed, Duration)>,
    ) {
        if deferred.is_empty() {
            return;
        }
        let mut groups: HashMap<Duration, Vec<Claimed>> = HashMap::new();
        for (event, after) in deferred.drain(..) {
            Metrics::count(&self.inner.metrics.deferred, &event.integration);
            if lock(fair).first_deferral(&event.integration) {
                tracing::warn!(integration = %event.integration, deferred_for = ?after, "the integration holds its most delivery slots and none has ended for a while: its further events wait in the inbox");
            }
            groups.entry(after).or_default().push(event);
        }
        for (after, events) in groups {
            let inbox = self.inner.inbox.clone();
            tasks.spawn(async move {
                let at = crate::time::after(Utc::now(), after);
                if let Err(e) = inbox.release_many(&events, at).await {
                    tracing::warn!(error = %e, events = events.len(), "could not defer events; they are claimed again when their lease expires");
                }
                false
            });
        }
    }
}
