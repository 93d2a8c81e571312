//! Events the receiver stores already leased to the workers of its own process.
//!
//! When both roles share a process (`hookgate standalone`), a claim would only read back what the
//! receiver has just written: the body is still in memory. So while the workers have room, the
//! receiver inserts a new event as `processing`, leased to them exactly as a claim would have
//! leased it (attempt 1, the workers' lease), and passes it over once the insert has committed.
//! That saves each such event a claim statement, its commit, and a second rewrite of the row.
//!
//! Nothing else changes: the lease fences the completion like any claim's, and an event whose
//! hand-over never happens (the process dies, the workers stopped) is claimed again when its
//! lease expires, like the claim of a killed worker. When the workers have no room the receiver
//! stores the event `pending` and workers claim it as before; workers in other processes only
//! ever claim. How handed-over events share the slots with claims (so that older events are not
//! left behind new ones) is the pool's rule, in `worker::slots`.
//!
//! How much room: as many events of each integration as the workers have slots, always; beyond
//! that, up to a bound in events and in body bytes, but only while the pool keeps taking them
//! promptly ([`may_hold`]).
//! An event stored for a claim costs PostgreSQL a second rewrite of its row, so a moment in which
//! the pool falls behind used to turn into claims that slowed it further (docs/performance.md,
//! round 15); held in memory instead, the event waits for a slot at no cost to the database.
//!
//! The pool takes the events held in turns by integration ([`Turns`]), not in commit order: held
//! in one queue, a burst of one integration put up to a second of its events ahead of every
//! other integration's next one (docs/performance.md, round 34).

use super::turns::{Integration, Turns};
use super::{Arrivals, Claimed};
use chrono::{DateTime, DurationRound, TimeDelta, Utc};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};

/// How much a hand-over holds: events handed over and not yet started by the pool.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Room {
    /// Held whatever the pool's pace: the pool's delivery slots.
    pub slots: usize,
    /// The most events held; 0 hands nothing over.
    pub events: usize,
    /// The most body bytes held.
    pub body_bytes: usize,
    /// Beyond `slots`, events are held only while the pool took one within this, and the last one
    /// it took had waited less than this.
    pub max_wait: Duration,
}

/// Whether one more event of an integration may be held, with `held` held now (`own` of them
/// that integration's), the pool's last take `since_taken` ago and that event's wait `last_wait`.
/// Past the slots, an integration whose events the pool stopped taking (its slots hang on a slow
/// destination) or whose events wait long gets no more: they would wait in memory for a slot
/// until their lease is too short for an attempt, and be put back one by one.
///
/// The slots count per integration: the pool takes the events held in turns, so another
/// integration's next event waits for one of each integration's, not for the whole backlog
/// held. Counted over all of them, one integration's backlog sent every other's events to wait
/// for a claim (docs/performance.md, round 35).
pub fn may_hold(
    room: &Room,
    held: usize,
    own: usize,
    since_taken: Duration,
    last_wait: Duration,
) -> bool {
    held < room.events
        && (own < room.slots || (since_taken < room.max_wait && last_wait < room.max_wait))
}

/// The pool's pace, as the receiver reads it: when it last took an event, and how long that one
/// had waited.
#[derive(Debug)]
struct Pace {
    start: Instant,
    taken_at_ms: AtomicU64,
    last_wait_ms: AtomicU64,
}

impl Pace {
    fn new() -> Self {
        Self {
            start: Instant::now(),
            taken_at_ms: AtomicU64::new(0),
            last_wait_ms: AtomicU64::new(0),
        }
    }

    fn ms(d: Duration) -> u64 {
        u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
    }

    fn took(&self, waited: Duration) {
        let now = Self::ms(self.start.elapsed());
        self.taken_at_ms.store(now, Ordering::Relaxed);
        self.last_wait_ms.store(Self::ms(waited), Ordering::Relaxed);
    }

    /// (since the last take, that event's wait)
    fn read(&self) -> (Duration, Duration) {
        let now = Self::ms(self.start.elapsed());
        let taken = self.taken_at_ms.load(Ordering::Relaxed);
        (
            Duration::from_millis(now.saturating_sub(taken)),
            Duration::from_millis(self.last_wait_ms.load(Ordering::Relaxed)),
        )
    }
}

/// One event handed over, with the share of the body budget it holds until the pool takes it.
#[derive(Debug)]
struct Held {
    event: Claimed,
    _bytes: OwnedSemaphorePermit,
}

impl Integration for Held {
    fn integration(&self) -> &str {
        &self.event.integration
    }
}

/// What the receiver's end and the workers' end share.
#[derive(Debug, Default)]
struct Shared {
    state: Mutex<State>,
    /// Wakes the pool for an event held, or for the last reservation spent after the close.
    ready: Notify,
}

#[derive(Debug, Default)]
struct State {
    /// Events handed over and not yet taken, taken in turns by integration.
    held: Turns<Held>,
    /// Places reserved whose event is not yet sent nor the place given back.
    reserved: usize,
    /// Those places by integration; none kept at zero.
    reserved_by: HashMap<String, usize>,
    closed: bool,
    /// The workers' end was dropped: an event sent now is dropped with it.
    gone: bool,
}

impl State {
    /// The places of `integration`: its events held and its reservations.
    fn own(&self, integration: &str) -> usize {
        self.held.len_of(integration) + self.reserved_by.get(integration).copied().unwrap_or(0)
    }

    fn reserve(&mut self, integration: &str) {
        self.reserved += 1;
        match self.reserved_by.get_mut(integration) {
            Some(n) => *n += 1,
            None => {
                self.reserved_by.insert(integration.to_owned(), 1);
            }
        }
    }

    fn unreserve(&mut self, integration: &str) {
        self.reserved -= 1;
        if let Some(n) = self.reserved_by.get_mut(integration) {
            *n -= 1;
            if *n == 0 {
                self.reserved_by.remove(integration);
            }
        }
    }
}

impl Shared {
    /// A poisoned lock still holds counts worth reading: a panicking request cannot stop
    /// hand-overs.
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The receiver's end. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Handoff {
    shared: Arc<Shared>,
    room: Room,
    bytes: Arc<Semaphore>,
    pace: Arc<Pace>,
    lease: Duration,
    /// The same workers' arrivals: an event stored without a place waits for their claim, and
    /// they must know it, idle or kept busy by hand-overs (`worker::slots::Share`).
    arrivals: Arrivals,
}

/// The workers' end: the events handed over, each integration's in commit order and the
/// integrations in turns ([`Turns`]).
#[derive(Debug)]
pub struct Handed {
    shared: Arc<Shared>,
    pace: Arc<Pace>,
    lease: Duration,
}

/// A place held for one event, taken before its insert so that the row can be stored leased.
/// Dropped without [`Reservation::send`] (a duplicate, a failed insert), it frees the place.
#[derive(Debug)]
pub struct Reservation {
    shared: Arc<Shared>,
    integration: String,
    /// `None` once sent.
    bytes: Option<OwnedSemaphorePermit>,
    lease_until: DateTime<Utc>,
}

/// A hand-over with `room`, leasing each event for `lease`, for workers that learn of events
/// stored for a claim through `arrivals`.
pub fn handoff(room: Room, lease: Duration, arrivals: Arrivals) -> (Handoff, Handed) {
    let shared = Arc::new(Shared::default());
    let pace = Arc::new(Pace::new());
    let bytes = Arc::new(Semaphore::new(room.body_bytes.min(Semaphore::MAX_PERMITS)));
    (
        Handoff {
            shared: shared.clone(),
            room,
            bytes,
            pace: pace.clone(),
            lease,
            arrivals,
        },
        Handed {
            shared,
            pace,
            lease,
        },
    )
}

impl Handoff {
    /// An event of `integration` to deliver was committed `pending` instead (the workers had no
    /// room): they claim it, and wake for it if idle.
    pub fn stored_for_claim(&self, integration: &str) {
        self.arrivals.committed_for(integration);
    }

    /// A place for one event of `integration` of `body_len` bytes leased from `now`, or `None`
    /// when the workers have no room for it (or have stopped): the event is then stored
    /// `pending` for a claim.
    pub fn reserve(
        &self,
        integration: &str,
        now: DateTime<Utc>,
        body_len: usize,
    ) -> Option<Reservation> {
        let (since_taken, last_wait) = self.pace.read();
        let bytes = u32::try_from(body_len).ok()?;
        let mut state = self.shared.lock();
        let held = state.held.len() + state.reserved;
        let own = state.own(integration);
        if state.closed || !may_hold(&self.room, held, own, since_taken, last_wait) {
            return None;
        }
        let bytes = self.bytes.clone().try_acquire_many_owned(bytes).ok()?;
        state.reserve(integration);
        drop(state);
        Some(Reservation {
            shared: self.shared.clone(),
            integration: integration.to_owned(),
            bytes: Some(bytes),
            lease_until: lease_until(now, self.lease),
        })
    }
}

/// The lease deadline as both databases store it (whole microseconds), so that the value the
/// completion is fenced on is the value in the row.
fn lease_until(now: DateTime<Utc>, lease: Duration) -> DateTime<Utc> {
    let until = crate::time::after(now, lease);
    until
        .duration_trunc(TimeDelta::microseconds(1))
        .unwrap_or(until)
}

impl Reservation {
    pub fn lease_until(&self) -> DateTime<Utc> {
        self.lease_until
    }

    /// Hands the committed event over.
    pub fn send(mut self, event: Claimed) {
        let bytes = self.bytes.take().expect("a reservation is sent once");
        let mut state = self.shared.lock();
        state.unreserve(&self.integration);
        if !state.gone {
            state.held.push(Held {
                event,
                _bytes: bytes,
            });
        }
        drop(state);
        self.shared.ready.notify_one();
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        if self.bytes.is_none() {
            return;
        }
        let mut state = self.shared.lock();
        state.unreserve(&self.integration);
        let last = state.closed && state.reserved == 0;
        drop(state);
        if last {
            self.shared.ready.notify_one();
        }
    }
}

impl Handed {
    /// The next event handed over; `None` once closed and every reservation is spent.
    pub async fn recv(&mut self) -> Option<Claimed> {
        loop {
            {
                let mut state = self.shared.lock();
                if let Some(held) = state.held.pop() {
                    drop(state);
                    return Some(self.took(held));
                }
                if state.closed && state.reserved == 0 {
                    return None;
                }
            }
            // A send between the unlock and this wait leaves a permit: the wait ends at once.
            self.shared.ready.notified().await;
        }
    }

    /// An event handed over and waiting, without waiting for one.
    pub fn try_recv(&mut self) -> Option<Claimed> {
        let held = self.shared.lock().held.pop()?;
        Some(self.took(held))
    }

    /// The next event held of an integration `pick` accepts (in turns among those), without
    /// waiting: the pool's one taker past its bounds (`worker::slots::handed_may_start`).
    pub fn try_recv_for(&mut self, pick: impl Fn(&str) -> bool) -> Option<Claimed> {
        let held = self.shared.lock().held.pop_first(pick)?;
        Some(self.took(held))
    }

    /// Whether an event of an integration `pick` accepts is held.
    pub fn holds_for(&self, pick: impl Fn(&str) -> bool) -> bool {
        self.shared.lock().held.any(pick)
    }

    /// Returns once an event of an integration `pick` accepts is held, and leaves it held.
    pub async fn held_for(&self, pick: impl Fn(&str) -> bool) {
        loop {
            if self.holds_for(&pick) {
                return;
            }
            // A send between the unlock and this wait leaves a permit: the wait ends at once.
            self.shared.ready.notified().await;
        }
    }

    /// Notes the pool's pace for the receiver; the body's bytes go back to the budget.
    fn took(&self, held: Held) -> Claimed {
        let handed_at = crate::time::before(held.event.lease_until, self.lease);
        let waited = (Utc::now() - handed_at).to_std().unwrap_or_default();
        self.pace.took(waited);
        held.event
    }

    /// No new reservations: the receiver stores what follows `pending`. Events of reservations
    /// already made still arrive through [`Handed::recv`].
    pub fn close(&mut self) {
        self.shared.lock().closed = true;
    }
}

impl Drop for Handed {
    /// The pool is gone: nothing more is held for it, and what was held is dropped with its
    /// bytes (each event is claimed again when its lease expires).
    fn drop(&mut self) {
        let mut state = self.shared.lock();
        (state.closed, state.gone) = (true, true);
        let held = std::mem::take(&mut state.held);
        drop(state);
        drop(held);
    }
}

#[cfg(test)]
#[path = "handoff_tests.rs"]
mod tests;
