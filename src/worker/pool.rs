//! The claim loop of a process's worker pool: claim due events in batches, deliver them on a
//! bounded number of tasks, and on shutdown give in-flight deliveries the grace period before
//! releasing their claims.

use super::defaults::STALL;
use super::fair::{Fair, Turn};
use super::in_flight::InFlight;
use super::parked::{Slot, Starts, lock};
use super::slots::{Share, claim_now, handed_may_start, lease_left_for_an_attempt, quarter};
use super::{Stopped, Worker, gauges, janitor};
use crate::inbox::{Claimed, Handed, Inbox};
use chrono::Utc;
use futures::FutureExt;
use std::collections::VecDeque;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;

impl Worker {
    /// Claims and delivers until `shutdown` resolves; then stops claiming, lets in-flight
    /// deliveries finish within the grace period and releases the claims of the rest.
    pub async fn run(&self, shutdown: impl Future<Output = ()>) -> Stopped {
        let cfg = &self.inner.cfg;
        let permits = Arc::new(Semaphore::new(cfg.concurrency));
        let in_flight = InFlight::default();
        // Each task says whether its event was handed over (true) or claimed.
        let mut tasks: JoinSet<bool> = JoinSet::new();
        let mut share = Share::new(cfg.concurrency);
        let fair = Arc::new(Mutex::new(Fair::new(cfg.concurrency)));
        // Read from the shares, not the semaphore: the claim loop takes a permit for a moment
        // before it knows whether an event waits for it.
        self.inner.metrics.watch_delivery_slots({
            let (fair, max) = (fair.clone(), cfg.concurrency);
            Arc::new(move || crate::metrics::SlotLoad {
                in_use: lock(&fair).held(),
                max,
            })
        });
        // Events whose integration holds its most slots, waiting for one of them: (event, handed).
        let mut parked: VecDeque<(Claimed, bool)> = VecDeque::new();
        // The chores end the statement they are on when the pool stops (see below).
        let (stop_chores, chores_stop) = tokio::sync::watch::channel(false);
        let janitor = tokio::spawn(janitor::run(
            self.inner.inbox.clone(),
            self.clone(),
            cfg.janitor_every,
            chores_stop.clone(),
        ));
        let gauges = tokio::spawn(gauges::refresh(
            self.inner.inbox.clone(),
            self.inner.metrics.clone(),
            cfg.gauges_every,
            chores_stop,
        ));
        // Receivers in other processes notify when they store events for a claim.
        let listening = match &self.inner.inbox {
            Inbox::Postgres(pool) => Some(tokio::spawn(crate::inbox::listen(
                pool.clone(),
                self.inner.arrivals.clone(),
            ))),
            Inbox::Sqlite(_) => None,
        };

        let mut handed = self.inner.handed.lock().expect("lock poisoned").take();
        // One handed-over event taken while waiting, started as soon as a slot is free.
        let mut waiting: Option<Claimed> = None;
        let mut cursor = super::cursor::Cursor::default();
        // Events were stored for a claim of an integration holding none of the slots.
        let mut for_idle = false;
        tokio::pin!(shutdown);
        // The listener wakes the pool once it listens, for what was committed before: a first
        // claim made before that would be followed by a second, empty one. So the first claim
        // waits for that wake-up, at most the poll interval (no longer than an idle pool waits
        // between claims) or as long as a claim may take, whichever is shorter. A future that
        // has resolved must not be polled again: hence `stopped`.
        let stopped = listening.is_some()
            && tokio::select! {
                _ = &mut shutdown => true,
                _ = self.inner.arrivals.wait() => false,
                _ = tokio::time::sleep(cfg.poll.min(cfg.db.deadline())) => false,
            };
        loop {
            // The waits below watch for the stop too, but a loop whose claims always find work
            // (or a zero poll) may never wait.
            if stopped || shutdown.as_mut().now_or_never().is_some() {
                break;
            }
            while let Some(done) = tasks.try_join_next() {
                share.ended(done);
            }
            if self.inner.arrivals.take() {
                share.events_waiting();
                let named = self.inner.arrivals.take_integrations();
                let shares = lock(&fair);
                for_idle |= named.iter().any(|n| shares.holds(n) == 0);
                drop(shares);
                cursor.events_stored(named);
            }
            let mut deferred: Vec<(Claimed, Duration)> = Vec::new();
            self.start_parked(&mut Starts {
                tasks: &mut tasks,
                in_flight: &in_flight,
                fair: &fair,
                permits: &permits,
                share: &mut share,
                parked: &mut parked,
                deferred: &mut deferred,
            });
            // Handed-over events are leased already: they take free slots before any claim,
            // up to their share while claims find events waiting, and within the events held
            // like claims, so that a slow database slows hand-overs too.
            while let Ok(permit) = permits.clone().try_acquire_owned() {
                let within = share.may_start_handed()
                    && tasks.len() + parked.len() < held_limit(cfg.concurrency);
                let may_start = may_start(&fair, within);
                let next = match waiting.take() {
                    Some(event) if may_start(&event.integration) => Some(event),
                    other if within => other.or_else(|| handed.as_mut()?.try_recv()),
                    // Past its bounds, the pool still takes an integration with no delivery
                    // unfinished: the one it keeps the last free slot for.
                    other => {
                        waiting = other;
                        let kept = lock(&fair).keeps_last_slot();
                        handed
                            .as_mut()
                            .filter(|_| kept)
                            .and_then(|h| h.try_recv_for(may_start))
                    }
                };
                let Some(event) = next else {
                    break;
                };
                if !lease_left_for_an_attempt(event.lease_until, Utc::now(), cfg.lease) {
                    // It waited too long for a slot: its attempt could outlive its lease.
                    drop(permit);
                    tasks.spawn(self.clone().put_back(event));
                    continue;
                }
                let turn = lock(&fair).turn(&event.integration, Instant::now());
                match turn {
                    Turn::Start => {
                        share.started_handed();
                        let slot = Slot::new(permit, &fair, &event.integration);
                        self.start(&mut tasks, &in_flight, event, slot, true);
                    }
                    Turn::Wait => parked.push_back((event, true)),
                    Turn::Defer(after) => deferred.push((event, after)),
                }
            }
            self.defer(&mut tasks, &fair, &mut deferred);
            // Slots come back when destinations answer. Events held (delivering, having their
            // outcome written, or waiting for their integration's share) stay within
            // HELD_PER_SLOT times the slots, so a slow database slows claiming too.
            let slots = permits.available_permits();
            let held = tasks.len() + parked.len();
            let free = slots.min(held_limit(cfg.concurrency).saturating_sub(held));
            if !claim_now(free, cfg.concurrency, for_idle) {
                // Woken by a task that ended, by a store, or by enough slots coming back when the
                // slots (not events being recorded) are what holds the claim back. A handed-over
                // event that may start, or the claim of an integration holding no slot, needs one
                // slot, not the claim's quarter: that integration's next event waited for a
                // claim's worth of another's deliveries to answer.
                let within = share.may_start_handed() && held < held_limit(cfg.concurrency);
                let may_start = may_start(&fair, within);
                // Past the bounds only an integration the last slot is kept for starts: without
                // one, a pool that lags (one integration's events waiting on their outcomes)
                // looks no further and is not woken by every hand-over.
                let kept = !within && lock(&fair).keeps_last_slot();
                let handed_may_start = waiting.as_ref().is_some_and(|e| may_start(&e.integration))
                    || (kept && handed.as_ref().is_some_and(|h| h.holds_for(may_start)));
                let enough = if handed_may_start || for_idle {
                    1
                } else {
                    quarter(cfg.concurrency)
                };
                let wait = u32::try_from(enough).unwrap_or(u32::MAX);
                tokio::select! {
                    _ = &mut shutdown => break,
                    Some(done) = tasks.join_next() => {
                        share.ended(done);
                        continue;
                    }
                    _ = permits.acquire_many(wait), if slots < enough => continue,
                    // An integration holding no slot may have had events stored meanwhile.
                    _ = self.inner.arrivals.wait() => continue,
                    // The next event handed over; or, while the one waiting cannot start yet,
                    // one held for an integration with no delivery unfinished, which may take
                    // a free one.
                    event = from_handoff(&mut handed, &fair, waiting.is_none()),
                        if waiting.is_none() || (slots > 0 && kept) => {
                        waiting = waiting.or(event);
                        continue;
                    }
                    // A parked event's integration may have stalled meanwhile: it is deferred.
                    _ = tokio::time::sleep(STALL), if !parked.is_empty() => continue,
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
            // The last full claim took all that was due and nothing has been stored since: wait
            // for a store, the poll, or a handed-over event, rather than claim nothing again.
            let idle = cursor.wait_before_claim(Instant::now(), cfg.poll);
            if !idle.is_zero() {
                tokio::select! {
                    _ = &mut shutdown => break,
                    _ = tokio::time::sleep(idle) => continue,
                    _ = self.inner.arrivals.wait() => continue,
                    Some(done) = tasks.join_next() => {
                        share.ended(done);
                        continue;
                    }
                    event = from_handoff(&mut handed, &fair, waiting.is_none()),
                        if waiting.is_none()
                            || (permits.available_permits() > 0 && lock(&fair).keeps_last_slot()) => {
                        waiting = waiting.or(event);
                        continue;
                    }
                    _ = tokio::time::sleep(STALL), if !parked.is_empty() => continue,
                }
            }
            let now = Utc::now();
            let until = crate::time::after(now, cfg.lease);
            let claim = cursor.next(Instant::now());
            let served = cursor.served();
            let batch = match self
                .claim_as(&claim, &served, now, until, free as i64)
                .await
            {
                Ok(b) => b,
                Err(e) => {
                    tracing::warn!(error = %e, "claiming events failed; retrying");
                    Vec::new()
                }
            };
            for_idle = false;
            self.inner.metrics.claim(batch.len());
            cursor.claimed(&claim, &batch, free, Instant::now());
            share.claimed(free, batch.len());
            if batch.is_empty() {
                // Drained past the cursor: the next claim looks from the start. Drained from the
                // start: the cursor holds the next claim back until the poll or a store.
                continue;
            }
            let mut deferred = Vec::new();
            for event in batch {
                let turn = lock(&fair).turn(&event.integration, Instant::now());
                match turn {
                    Turn::Start => {}
                    Turn::Wait => {
                        parked.push_back((event, false));
                        continue;
                    }
                    Turn::Defer(after) => {
                        deferred.push((event, after));
                        continue;
                    }
                }
                let slot = Slot::new(slot(&permits).await, &fair, &event.integration);
                self.start(&mut tasks, &in_flight, event, slot, false);
            }
            self.defer(&mut tasks, &fair, &mut deferred);
        }
        // Aborted mid-statement, a retention pass would lose the batch it was on and leave the
        // rest to the next period; stopped, it ends between two batches within the grace.
        let _ = stop_chores.send(true);
        let grace_ends = tokio::time::Instant::now() + cfg.grace;
        if let Some(l) = listening {
            l.abort();
        }
        // From here the receiver stores new events pending for a claim.
        if let Some(h) = handed.as_mut() {
            h.close();
        }
        let drained = tokio::time::timeout_at(grace_ends, async {
            while tasks.join_next().await.is_some() {}
        })
        .await;
        if drained.is_err() {
            tasks.abort_all();
            while tasks.join_next().await.is_some() {}
        }
        let mut left = in_flight.take();
        left.extend(waiting);
        left.extend(parked.into_iter().map(|(event, _)| event));
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
        // A thousand per statement: up to `--handoff-events` may have been held for this pool.
        let released = self.inner.inbox.release_many(&left, Utc::now()).await;
        let stopped = Stopped::after_release(left.len() as u64, released);
        for mut chore in [janitor, gauges] {
            if tokio::time::timeout_at(grace_ends, &mut chore)
                .await
                .is_err()
            {
                chore.abort();
            }
        }
        stopped.log();
        stopped
    }
}

impl Worker {
    /// Delivers `event` on a task of its own in `slot`, keeping its claim in `in_flight` until it
    /// ends.
    pub(super) fn start(
        &self,
        tasks: &mut JoinSet<bool>,
        in_flight: &InFlight,
        event: Claimed,
        slot: Slot,
        handed: bool,
    ) {
        in_flight.started(&event);
        let (worker, in_flight) = (self.clone(), in_flight.clone());
        let unfinished = slot.unfinished();
        tasks.spawn(async move {
            let _unfinished = unfinished;
            let (id, lease_until) = (event.id, event.lease_until);
            worker.deliver_in(event, Some(slot)).await;
            in_flight.ended(id, lease_until);
            handed
        });
    }

    /// Gives a handed-over event back for a claim in due order (not counted as an attempt).
    pub(super) async fn put_back(self, event: Claimed) -> bool {
        match self.inner.inbox.release(&event, Utc::now()).await {
            // The pool's claim may have run before this commit and gone idle: it would find the
            // event only at its next poll.
            Ok(_) => self.inner.arrivals.committed_for(&event.integration),
            Err(e) => {
                tracing::warn!(integration = %event.integration, event_id = %event.event_id, error = %e, "could not put a handed-over event back; it is claimed again when its lease expires")
            }
        }
        false
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

/// With `take`, the next event handed over (never, for a pool without a hand-over or once it is
/// closed and spent). Without, `None` once the hand-over holds an event of an integration with no
/// delivery unfinished, left held for the pool to take past its bounds.
async fn from_handoff(
    handed: &mut Option<Handed>,
    fair: &Mutex<Fair>,
    take: bool,
) -> Option<Claimed> {
    let Some(h) = handed else {
        return std::future::pending().await;
    };
    if !take {
        h.held_for(may_start(fair, false)).await;
        return None;
    }
    match h.recv().await {
        Some(event) => Some(event),
        None => std::future::pending().await,
    }
}

/// Whether a handed-over event of an integration may start (`slots::handed_may_start`),
/// `within` the hand-over's share and the held bound or past them.
fn may_start(fair: &Mutex<Fair>, within: bool) -> impl Fn(&str) -> bool + '_ {
    move |i| handed_may_start(within, || lock(fair).unfinished(i))
}

/// The most events the pool holds at once: delivering (at most `concurrency`, with their bodies)
/// plus those whose outcome is being written (without them).
fn held_limit(concurrency: usize) -> usize {
    concurrency.saturating_mul(super::defaults::HELD_PER_SLOT)
}
