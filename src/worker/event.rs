//! One claimed event, from its integration's target through the ordering gate and the attempt to
//! its recorded outcome. The decisions are [`retry`]'s and [`ordering`]'s; this file carries out
//! their I/O: locks, the HTTP call, completions and metrics.

use super::ordering::{self, Entry, Lock, Verdict};
use super::parked::Slot;
use super::retry::{self, AttemptResult, Outcome, Unconfigured};
use super::{Worker, deliver};
use crate::inbox::{Advance, Attempt, Claimed, Completion};
use crate::metrics::Metrics;
use crate::route::target::DeliveryTarget;
use chrono::Utc;
use std::time::Instant;

/// A resource lock this delivery holds until its outcome is recorded.
struct Held {
    resource: String,
    token: String,
}

/// An event past the gate: the lock to release after it, and the version to record on success.
#[derive(Default)]
struct Passed {
    held: Option<Held>,
    version: Option<Advance>,
}

impl Worker {
    /// One claimed event through gate, delivery and completion.
    pub async fn deliver(&self, event: &Claimed) {
        self.deliver_in(event.clone(), None).await
    }

    /// [`Worker::deliver`] in one of the pool's delivery slots, given back as soon as the
    /// destination has answered: the slots bound the requests in flight to destinations
    /// (`--concurrency`), and holding one while the outcome is written made every slot wait on
    /// database commits as well (docs/performance.md).
    ///
    /// Once answered, the event also sheds its body and headers: the outcome is written without
    /// them, so the events waiting on that commit (the pool holds up to
    /// [`HELD_PER_SLOT`](super::defaults::HELD_PER_SLOT) times the slots) hold little memory.
    /// The slot says whether the attempt timed out: how the pool tells a stuck destination from
    /// a busy one (`super::fair`).
    pub(crate) async fn deliver_in(&self, mut event: Claimed, mut slot: Option<Slot>) {
        let Some(target) = self.inner.targets.load().get(&event.integration).cloned() else {
            return self.unconfigured(&event).await;
        };
        let Some(Passed { held, version }) = self.gate(&event, &target).await else {
            return;
        };
        let (result, attempt) = self.attempt(&event, &target).await;
        if let (Some(slot), AttemptResult::Timeout) = (slot.as_mut(), &result) {
            slot.timed_out();
        }
        drop(slot);
        event.shed_payload();
        let event = &event;
        let jitter = rand::random_range(-1.0..=1.0);
        let attempt_no = u32::try_from(event.attempt).unwrap_or(u32::MAX);
        let completion = match retry::decide(&result, attempt_no, &target.schedule, jitter) {
            Outcome::Processed => {
                // The number that says whether webhooks are healthy: provider's signature to done.
                let since = event.signed_at.unwrap_or(event.received_at);
                let latency = (Utc::now() - since).num_milliseconds().max(0) as f64 / 1000.0;
                let metrics = &self.inner.metrics;
                Metrics::observe(&metrics.completion_latency, &event.integration, latency);
                Completion::Processed { version }
            }
            Outcome::Retry { delay, error } => Completion::Retry {
                next_attempt_at: crate::time::after(Utc::now(), delay),
                error,
            },
            Outcome::DeadLetter { error } => Completion::DeadLetter { error },
        };
        self.finish(event, completion, Some(&attempt)).await;
        self.unlock(event, held).await;
    }

    async fn unconfigured(&self, event: &Claimed) {
        let grace = self.inner.cfg.orphan_grace;
        match retry::unconfigured(event.received_at, Utc::now(), grace) {
            Unconfigured::DeadLetter => {
                tracing::warn!(integration = %event.integration, event_id = %event.event_id, "integration no longer configured; dead-lettered as integration_missing");
                let error = retry::INTEGRATION_MISSING.to_string();
                self.finish(event, Completion::DeadLetter { error }, None)
                    .await;
            }
            Unconfigured::Recheck(after) => {
                tracing::warn!(integration = %event.integration, event_id = %event.event_id, "no configuration for this integration; will look again in a minute");
                let at = crate::time::after(Utc::now(), after);
                release_or_log(&self.inner.inbox, event, at).await;
            }
        }
    }

    /// The ordering gate: hold the resource's lock while delivering, compare versions. `None`
    /// when the event goes no further now (put back, or ended as ignored).
    async fn gate(&self, event: &Claimed, target: &DeliveryTarget) -> Option<Passed> {
        let inner = &self.inner;
        let ungated = || Metrics::count(&inner.metrics.ordering_ungated, &event.integration);
        let (resource, incoming) = match ordering::entry(target.ordering.as_ref(), &event.body) {
            Entry::Unordered => return Some(Passed::default()),
            Entry::Unkeyed => {
                ungated();
                return Some(Passed::default());
            }
            Entry::Keyed { resource, version } => (resource, version),
        };
        let token = format!("{:032x}", rand::random::<u128>());
        let now = Utc::now();
        let until = crate::time::after(now, inner.cfg.lease);
        let lock = match inner
            .inbox
            .lock_resource(&event.integration, &resource, now, until, &token)
            .await
        {
            Ok(Some(stored)) => Lock::Held(stored),
            Ok(None) => Lock::Busy,
            // Treated as busy, so the event waits its turn; the log says it was not contention.
            Err(e) => {
                tracing::warn!(integration = %event.integration, error = %e, "could not take the ordering lock; will try again shortly");
                Lock::Busy
            }
        };
        let held = Held { resource, token };
        match ordering::verdict(lock, &incoming) {
            Verdict::Requeue(after) => {
                let at = crate::time::after(Utc::now(), after);
                release_or_log(&inner.inbox, event, at).await;
                None
            }
            Verdict::Deliver { from, to } => {
                let version = Some(Advance {
                    resource: held.resource.clone(),
                    version: to,
                    token: held.token.clone(),
                    previous: from,
                });
                let held = Some(held);
                Some(Passed { held, version })
            }
            Verdict::DeliverUnfenced => {
                ungated();
                let held = Some(held);
                Some(Passed {
                    held,
                    version: None,
                })
            }
            Verdict::Ignore { reason } => {
                self.finish(event, Completion::Ignored { reason }, None)
                    .await;
                self.unlock(event, Some(held)).await;
                None
            }
        }
    }

    /// Sends one attempt within its time limit and measures it.
    async fn attempt(&self, event: &Claimed, target: &DeliveryTarget) -> (AttemptResult, Attempt) {
        let inner = &self.inner;
        let started_at = Utc::now();
        let clock = Instant::now();
        // The attempt ends inside the claim's lease: past it another worker may claim the event
        // and send it again while this attempt still runs.
        let limit = retry::attempt_timeout(target.timeout, inner.cfg.lease);
        let attempt = deliver::post_attempt(
            &inner.client,
            &inner.destinations,
            target,
            event,
            started_at,
        );
        let result = tokio::time::timeout(limit, attempt)
            .await
            .unwrap_or(AttemptResult::Timeout);
        if let AttemptResult::Refused(reason) = &result {
            tracing::warn!(integration = %event.integration, event_id = %event.event_id, reason = %reason, "destination refused; the event is dead-lettered");
        }
        let elapsed = clock.elapsed();
        let duration = &inner.metrics.delivery_duration;
        Metrics::observe(duration, &event.integration, elapsed.as_secs_f64());
        let (status_code, error) = result.record();
        let attempt = Attempt {
            started_at,
            duration_ms: elapsed.as_millis() as i64,
            status_code,
            error,
        };
        (result, attempt)
    }

    async fn unlock(&self, event: &Claimed, held: Option<Held>) {
        let Some(Held { resource, token }) = held else {
            return;
        };
        let unlocked = self
            .inner
            .inbox
            .unlock_resource(&event.integration, &resource, &token)
            .await;
        if let Err(e) = unlocked {
            tracing::warn!(integration = %event.integration, error = %e, "could not release a resource lease; it expires by itself");
        }
    }

    async fn finish(&self, event: &Claimed, completion: Completion, attempt: Option<&Attempt>) {
        let label = outcome(&completion);
        self.inner.metrics.delivery(&event.integration, label);
        let status = attempt.and_then(|a| a.status_code);
        match self
            .inner
            .completer
            .complete(event, completion, attempt.cloned(), Utc::now())
            .await
        {
            Ok(true) => tracing::info!(
                integration = %event.integration, event_id = %event.event_id,
                event_type = event.event_type.as_deref().unwrap_or("-"), attempt = event.attempt,
                outcome = label, status, "delivery finished"
            ),
            Ok(false) => tracing::warn!(
                integration = %event.integration, event_id = %event.event_id, attempt = event.attempt,
                "lease lost before the outcome was recorded; another worker owns the event now"
            ),
            Err(e) => tracing::error!(
                integration = %event.integration, event_id = %event.event_id, attempt = event.attempt, error = %e,
                "recording the outcome failed; the event is retried after its lease"
            ),
        }
    }
}

/// Every value of `hookgate_delivery_attempts_total`'s `outcome` label.
pub(super) const OUTCOMES: [&str; 4] = ["processed", "retry", "dead_letter", "ignored"];

fn outcome(completion: &Completion) -> &'static str {
    match completion {
        Completion::Processed { .. } => OUTCOMES[0],
        Completion::Retry { .. } => OUTCOMES[1],
        Completion::DeadLetter { .. } => OUTCOMES[2],
        Completion::Ignored { .. } => OUTCOMES[3],
    }
}

/// Puts a claimed event back for later. A failure costs only time (the claim's lease expires and
/// the event is claimed again), so it is logged, not raised.
async fn release_or_log(inbox: &crate::inbox::Inbox, event: &Claimed, at: chrono::DateTime<Utc>) {
    if let Err(e) = inbox.release(event, at).await {
        tracing::warn!(integration = %event.integration, event_id = %event.event_id, error = %e, "could not put an event back; it is claimed again when its lease expires");
    }
}
