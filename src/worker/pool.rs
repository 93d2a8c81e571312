//! The claim loop of a process's worker pool: claim due events in batches, deliver them on a
//! bounded number of tasks, and on shutdown give in-flight deliveries the grace period before
//! releasing their claims.

use super::{Worker, janitor};
use crate::inbox::{Claimed, Handed, Inbox};
use crate::metrics::Metrics;
use chrono::Utc;
use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;

impl Worker {
    /// Claims and delivers until `shutdown` resolves; then stops claiming, lets in-flight
    /// deliveries finish within the grace period and releases the claims of the rest.
    pub async fn run(&self, shutdown: impl Future<Output = ()>) {
        let cfg = &self.inner.cfg;
        let permits = Arc::new(Semaphore::new(cfg.concurrency));
        let in_flight: Arc<Mutex<HashMap<i64, Claimed>>> = Arc::default();
        let mut tasks = JoinSet::new();
        let janitor = tokio::spawn(janitor::run(
            self.inner.inbox.clone(),
            self.clone(),
            cfg.janitor_every,
        ));
        let gauges = tokio::spawn(refresh_inbox_gauges(
            self.inner.inbox.clone(),
            self.inner.metrics.clone(),
        ));

        let mut handed = self.inner.handed.lock().expect("lock poisoned").take();
        // One handed-over event taken while waiting, started as soon as a slot is free.
        let mut waiting: Option<Claimed> = None;
        let mut cursor = super::cursor::Cursor::default();
        tokio::pin!(shutdown);
        loop {
            while tasks.try_join_next().is_some() {}
            // Handed-over events are leased already: they take free slots before any claim.
            while let Ok(permit) = permits.clone().try_acquire_owned() {
                let Some(event) = waiting.take().or_else(|| handed.as_mut()?.try_recv()) else {
                    break;
                };
                self.start(&mut tasks, &in_flight, event, permit);
            }
            // Slots come back when destinations answer. Events held (delivering, or having
            // their outcome written) stay within HELD_PER_SLOT times the slots, so a slow
            // database slows claiming too.
            let slots = permits.available_permits();
            let free = slots.min(held_limit(cfg.concurrency).saturating_sub(tasks.len()));
            if !claim_now(free, cfg.concurrency) {
                // Woken by a task that ended, or by enough slots coming back when the slots
                // (not events being recorded) are what holds the claim back.
                let enough = cfg.concurrency.div_ceil(4);
                let wait = u32::try_from(enough).unwrap_or(u32::MAX);
                tokio::select! {
                    _ = &mut shutdown => break,
                    _ = tasks.join_next() => continue,
                    _ = permits.acquire_many(wait), if slots < enough => continue,
                    Some(event) = next_handed(&mut handed), if waiting.is_none() => {
                        waiting = Some(event);
                        continue;
                    }
                }
            }
            // A cluster worker learns its targets from a watch: an event claimed before the
            // first complete list would be deferred for a minute as unconfigured.
            if !self.targets_loaded() {
                tokio::select! {
                    _ = &mut shutdown => break,
                    _ = tokio::time::sleep(cfg.poll) => continue,
                }
            }
            let now = Utc::now();
            let until = crate::time::after(now, cfg.lease);
            let claim = cursor.next(Instant::now());
            let batch = match self.claim_as(claim, now, until, free as i64).await {
                Ok(b) => b,
                Err(e) => {
                    tracing::warn!(error = %e, "claiming events failed; retrying");
                    Vec::new()
                }
            };
            cursor.claimed(claim, &batch, Instant::now());
            if batch.is_empty() {
                if claim != super::cursor::Claim::Full {
                    // Drained past the cursor: look from the start before going idle.
                    continue;
                }
                tokio::select! {
                    _ = &mut shutdown => break,
                    _ = tokio::time::sleep(cfg.poll) => continue,
                    _ = self.inner.arrivals.wait() => continue,
                    Some(event) = next_handed(&mut handed), if waiting.is_none() => {
                        waiting = Some(event);
                        continue;
                    }
                }
            }
            for event in batch {
                let permit = slot(&permits).await;
                self.start(&mut tasks, &in_flight, event, permit);
            }
        }
        janitor.abort();
        gauges.abort();
        // From here the receiver stores new events pending for a claim.
        if let Some(h) = handed.as_mut() {
            h.close();
        }
        let drained = tokio::time::timeout(cfg.grace, async {
            while tasks.join_next().await.is_some() {}
        })
        .await;
        if drained.is_err() {
            tasks.abort_all();
            while tasks.join_next().await.is_some() {}
        }
        let mut left: Vec<Claimed> = in_flight
            .lock()
            .expect("lock poisoned")
            .drain()
            .map(|(_, c)| c)
            .collect();
        left.extend(waiting);
        if let Some(mut h) = handed {
            // Events handed over and not started, and those of inserts still committing (they
            // give up by the database deadline): released, so they need not wait for the lease.
            let _ = tokio::time::timeout(cfg.db.deadline(), async {
                while let Some(event) = h.recv().await {
                    left.push(event);
                }
            })
            .await;
        }
        for event in left {
            if let Err(e) = self.inner.inbox.release(&event, Utc::now()).await {
                tracing::warn!(event_id = %event.event_id, error = %e, "could not release claim; it returns after the lease");
            }
        }
    }
}

impl Worker {
    /// Delivers `event` on a task of its own in the slot `permit`, keeping its claim in
    /// `in_flight` until it ends.
    fn start(
        &self,
        tasks: &mut JoinSet<()>,
        in_flight: &Arc<Mutex<HashMap<i64, Claimed>>>,
        event: Claimed,
        permit: OwnedSemaphorePermit,
    ) {
        in_flight
            .lock()
            .expect("lock poisoned")
            .insert(event.id, event.lease_only());
        let (worker, in_flight) = (self.clone(), in_flight.clone());
        tasks.spawn(async move {
            let id = event.id;
            worker.deliver_in(event, Some(permit)).await;
            in_flight.lock().expect("lock poisoned").remove(&id);
        });
    }
}

/// A delivery slot, once one is free.
async fn slot(permits: &Arc<Semaphore>) -> OwnedSemaphorePermit {
    permits
        .clone()
        .acquire_owned()
        .await
        .expect("semaphore is never closed")
}

/// The next handed-over event; never, for a pool without a hand-over.
async fn next_handed(handed: &mut Option<Handed>) -> Option<Claimed> {
    match handed {
        Some(h) => h.recv().await,
        None => std::future::pending().await,
    }
}

/// The most events the pool holds at once: delivering (at most `concurrency`, with their bodies)
/// plus those whose outcome is being written (without them).
fn held_limit(concurrency: usize) -> usize {
    concurrency.saturating_mul(super::defaults::HELD_PER_SLOT)
}

/// Whether to claim now with `free` of `concurrency` delivery slots free. While deliveries run,
/// a claim waits until a quarter of the slots are free, so that a busy worker spends one claim
/// commit on several events rather than one per event. An idle worker claims at once.
fn claim_now(free: usize, concurrency: usize) -> bool {
    free > 0 && (free >= concurrency || free >= concurrency.div_ceil(4))
}

/// Keeps the inbox gauges (events by status, oldest pending age) current for `/metrics`.
async fn refresh_inbox_gauges(inbox: Inbox, metrics: Arc<Metrics>) {
    let mut tick = tokio::time::interval(Duration::from_secs(15));
    loop {
        tick.tick().await;
        match inbox.stats(Utc::now()).await {
            Ok(stats) => metrics.set_inbox(&stats),
            Err(e) => tracing::debug!(error = %e, "could not read inbox figures for metrics"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::claim_now;

    #[test]
    fn a_busy_worker_claims_once_a_quarter_of_its_slots_are_free() {
        let cases = [
            // (free, concurrency, claim)
            (16, 16, true),
            (4, 16, true),
            (3, 16, false),
            (0, 16, false),
            (1, 1, true),
            (0, 1, false),
            (1, 2, true),
            (1, 5, false),
            (2, 5, true),
        ];
        for (free, concurrency, want) in cases {
            assert_eq!(claim_now(free, concurrency), want, "{free}/{concurrency}");
        }
    }
}
