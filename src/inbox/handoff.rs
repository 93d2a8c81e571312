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

use super::{Arrivals, Claimed};
use chrono::{DateTime, DurationRound, TimeDelta, Utc};
use std::time::Duration;
use tokio::sync::mpsc;

/// The receiver's end. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Handoff {
    tx: mpsc::Sender<Claimed>,
    lease: Duration,
    /// The same workers' arrivals: an event stored without a place waits for their claim, and
    /// they must know it, idle or kept busy by hand-overs (`worker::slots::Share`).
    arrivals: Arrivals,
}

/// The workers' end: the events handed over, in commit order.
#[derive(Debug)]
pub struct Handed {
    rx: mpsc::Receiver<Claimed>,
}

/// A place held for one event, taken before its insert so that the row can be stored leased.
/// Dropped without [`Reservation::send`] (a duplicate, a failed insert), it frees the place.
#[derive(Debug)]
pub struct Reservation {
    permit: mpsc::OwnedPermit<Claimed>,
    lease_until: DateTime<Utc>,
}

/// A hand-over for workers that hold at most `room` handed events not yet started, leasing each
/// for `lease`, and learn of events stored for a claim through `arrivals`.
pub fn handoff(room: usize, lease: Duration, arrivals: Arrivals) -> (Handoff, Handed) {
    let (tx, rx) = mpsc::channel(room.max(1));
    (
        Handoff {
            tx,
            lease,
            arrivals,
        },
        Handed { rx },
    )
}

impl Handoff {
    /// An event to deliver was committed `pending` instead (the workers had no room): they
    /// claim it, and wake for it if idle.
    pub fn stored_for_claim(&self) {
        self.arrivals.committed();
    }

    /// A place for one event leased from `now`, or `None` when the workers have no room (or have
    /// stopped): the event is then stored `pending` for a claim.
    pub fn reserve(&self, now: DateTime<Utc>) -> Option<Reservation> {
        let permit = self.tx.clone().try_reserve_owned().ok()?;
        Some(Reservation {
            permit,
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
        self.permit.send(event);
    }
}

impl Handed {
    /// The next event handed over; `None` once closed and every reservation is spent.
    pub async fn recv(&mut self) -> Option<Claimed> {
        self.rx.recv().await
    }

    /// An event handed over and waiting, without waiting for one.
    pub fn try_recv(&mut self) -> Option<Claimed> {
        self.rx.try_recv().ok()
    }

    /// No new reservations: the receiver stores what follows `pending`. Events of reservations
    /// already made still arrive through [`Handed::recv`].
    pub fn close(&mut self) {
        self.rx.close();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(id: i64, lease_until: DateTime<Utc>) -> Claimed {
        Claimed {
            id,
            integration: "t/a".into(),
            event_id: format!("evt_{id}"),
            event_type: None,
            headers: serde_json::Value::Null,
            content_type: None,
            body: Vec::new(),
            attempt: 1,
            lease_until,
            received_at: lease_until,
            signed_at: None,
            due_at: None,
        }
    }

    #[test]
    fn the_lease_is_whole_microseconds_after_now() {
        let now = DateTime::from_timestamp(1_700_000_000, 123_456_789).unwrap();
        let until = lease_until(now, Duration::from_secs(60));
        assert_eq!(until.timestamp(), 1_700_000_060);
        assert_eq!(until.timestamp_subsec_nanos(), 123_456_000);
    }

    #[tokio::test]
    async fn places_run_out_and_come_back_when_an_unused_reservation_is_dropped() {
        let (handoff, mut handed) = handoff(2, Duration::from_secs(60), Arrivals::default());
        let now = Utc::now();
        let a = handoff.reserve(now).expect("room for one");
        let b = handoff.reserve(now).expect("room for two");
        assert!(handoff.reserve(now).is_none(), "no third place");
        drop(b);
        let c = handoff
            .reserve(now)
            .expect("the dropped place is free again");
        let until = a.lease_until();
        a.send(event(1, until));
        assert_eq!(handed.try_recv().map(|e| e.id), Some(1));
        drop(c);
        assert!(handed.try_recv().is_none(), "nothing was sent for c");
    }

    #[tokio::test]
    async fn after_close_no_place_is_given_but_reserved_events_still_arrive() {
        let (handoff, mut handed) = handoff(4, Duration::from_secs(60), Arrivals::default());
        let now = Utc::now();
        let held = handoff.reserve(now).expect("room");
        handed.close();
        assert!(
            handoff.reserve(now).is_none(),
            "closed: stored pending instead"
        );
        let until = held.lease_until();
        held.send(event(7, until));
        assert_eq!(handed.recv().await.map(|e| e.id), Some(7));
        assert!(handed.recv().await.is_none(), "every reservation spent");
    }
}
