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
//! How much room: as many events as the workers have slots, always; beyond that, up to a bound in
//! events and in body bytes, but only while the pool keeps taking them promptly ([`may_hold`]).
//! An event stored for a claim costs PostgreSQL a second rewrite of its row, so a moment in which
//! the pool falls behind used to turn into claims that slowed it further (docs/performance.md,
//! round 15); held in memory instead, the event waits for a slot at no cost to the database.

use super::{Arrivals, Claimed};
use chrono::{DateTime, DurationRound, TimeDelta, Utc};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};

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

/// Whether one more event may be held, with `held` held now, the pool's last take `since_taken`
/// ago and that event's wait `last_wait`. Past the slots, a pool that stopped taking (its slots
/// hang on a slow destination) or whose events wait long gets no more: they would wait in memory
/// for a slot until their lease is too short for an attempt, and be put back one by one.
pub fn may_hold(room: &Room, held: usize, since_taken: Duration, last_wait: Duration) -> bool {
    held < room.events
        && (held < room.slots || (since_taken < room.max_wait && last_wait < room.max_wait))
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

/// The receiver's end. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Handoff {
    tx: mpsc::Sender<Held>,
    room: Room,
    bytes: Arc<Semaphore>,
    pace: Arc<Pace>,
    lease: Duration,
    /// The same workers' arrivals: an event stored without a place waits for their claim, and
    /// they must know it, idle or kept busy by hand-overs (`worker::slots::Share`).
    arrivals: Arrivals,
}

/// The workers' end: the events handed over, in commit order.
#[derive(Debug)]
pub struct Handed {
    rx: mpsc::Receiver<Held>,
    pace: Arc<Pace>,
    lease: Duration,
}

/// A place held for one event, taken before its insert so that the row can be stored leased.
/// Dropped without [`Reservation::send`] (a duplicate, a failed insert), it frees the place.
#[derive(Debug)]
pub struct Reservation {
    permit: mpsc::OwnedPermit<Held>,
    bytes: OwnedSemaphorePermit,
    lease_until: DateTime<Utc>,
}

/// A hand-over with `room`, leasing each event for `lease`, for workers that learn of events
/// stored for a claim through `arrivals`.
pub fn handoff(room: Room, lease: Duration, arrivals: Arrivals) -> (Handoff, Handed) {
    let (tx, rx) = mpsc::channel(room.events.max(1));
    let pace = Arc::new(Pace::new());
    let bytes = Arc::new(Semaphore::new(room.body_bytes.min(Semaphore::MAX_PERMITS)));
    (
        Handoff {
            tx,
            room,
            bytes,
            pace: pace.clone(),
            lease,
            arrivals,
        },
        Handed { rx, pace, lease },
    )
}

impl Handoff {
    /// An event to deliver was committed `pending` instead (the workers had no room): they
    /// claim it, and wake for it if idle.
    pub fn stored_for_claim(&self) {
        self.arrivals.committed();
    }

    /// A place for one event of `body_len` bytes leased from `now`, or `None` when the workers
    /// have no room (or have stopped): the event is then stored `pending` for a claim.
    pub fn reserve(&self, now: DateTime<Utc>, body_len: usize) -> Option<Reservation> {
        let held = self.tx.max_capacity() - self.tx.capacity();
        let (since_taken, last_wait) = self.pace.read();
        if !may_hold(&self.room, held, since_taken, last_wait) {
            return None;
        }
        let bytes = u32::try_from(body_len).ok()?;
        let bytes = self.bytes.clone().try_acquire_many_owned(bytes).ok()?;
        let permit = self.tx.clone().try_reserve_owned().ok()?;
        Some(Reservation {
            permit,
            bytes,
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
    pub fn send(self, event: Claimed) {
        self.permit.send(Held {
            event,
            _bytes: self.bytes,
        });
    }
}

impl Handed {
    /// The next event handed over; `None` once closed and every reservation is spent.
    pub async fn recv(&mut self) -> Option<Claimed> {
        let held = self.rx.recv().await?;
        Some(self.took(held))
    }

    /// An event handed over and waiting, without waiting for one.
    pub fn try_recv(&mut self) -> Option<Claimed> {
        let held = self.rx.try_recv().ok()?;
        Some(self.took(held))
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
        self.rx.close();
    }
}

#[cfg(test)]
#[path = "handoff_tests.rs"]
mod tests;
