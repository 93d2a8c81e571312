//! Where a busy worker's next claim starts. Pure: the pool asks it which claim to make and tells
//! it what the claim returned.
//!
//! A full claim looks for expired leases and walks the due index from its oldest end, where the
//! entries of events processed since the last VACUUM pile up; while a backlog lasts, that walk
//! grows with every event delivered. Between full claims, a worker starts at the oldest due time
//! it last claimed, past those entries. Rows due before that point are only ever an insert that
//! committed late, a released event or an expired lease: the next full claim, at most
//! [`FULL_CLAIM_EVERY`] later, finds them.
//!
//! A full claim that finds nothing, or fewer events than it asked for, took all that was due.
//! Until events are stored for a claim (the signal of `inbox::Arrivals`) or a poll interval has
//! passed (a retry coming due, a lease expiring), another claim would find nothing either: the
//! pool waits instead. Without this rule a pool kept busy by handed-over events claimed each time
//! one of them woke it: hundreds of empty claims a second at 3,400 events/s (docs/performance.md,
//! round 14).

use crate::inbox::Claimed;
use chrono::{DateTime, Utc};
use std::time::{Duration, Instant};

/// Longest time between two full claims of a busy worker.
pub const FULL_CLAIM_EVERY: Duration = Duration::from_secs(1);

/// Which claim to make.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Claim {
    /// Expired leases and every due row ([`crate::inbox::Inbox::claim`]).
    Full,
    /// Due rows from this due time on ([`crate::inbox::Inbox::claim_due_from`]).
    From(DateTime<Utc>),
}

#[derive(Debug, Default)]
pub struct Cursor {
    from: Option<DateTime<Utc>>,
    full_at: Option<Instant>,
    /// When a full claim last found less than it asked for, until events are stored for a claim.
    drained_at: Option<Instant>,
}

impl Cursor {
    pub fn next(&self, now: Instant) -> Claim {
        match (self.from, self.full_at) {
            (Some(from), Some(at)) if now.saturating_duration_since(at) < FULL_CLAIM_EVERY => {
                Claim::From(from)
            }
            _ => Claim::Full,
        }
    }

    /// Records what `claim`, asking for `asked` events, returned. An empty claim sends the next
    /// one back to a full claim: the region past the cursor is drained. A full claim that got
    /// fewer than it asked for took everything due: the pool waits before the next.
    pub fn claimed(&mut self, claim: Claim, batch: &[Claimed], asked: usize, now: Instant) {
        if claim == Claim::Full {
            self.full_at = Some(now);
        }
        self.drained_at = (claim == Claim::Full && batch.len() < asked).then_some(now);
        self.from = batch.iter().filter_map(|c| c.due_at).min();
    }

    /// Events were stored for a claim: the next claim may find them.
    pub fn events_stored(&mut self) {
        self.drained_at = None;
    }

    /// How long to wait before a claim could find anything: zero unless the last full claim
    /// found less than it asked for and no event has been stored for a claim since, in which
    /// case the rest of the `poll` interval that began with that claim.
    pub fn wait_before_claim(&self, now: Instant, poll: Duration) -> Duration {
        match self.drained_at {
            Some(at) => poll.saturating_sub(now.saturating_duration_since(at)),
            None => Duration::ZERO,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(due_secs: i64) -> Claimed {
        Claimed {
            id: due_secs,
            integration: "ns/x".into(),
            event_id: format!("e{due_secs}"),
            event_type: None,
            headers: crate::inbox::StoredHeaders::none(),
            content_type: None,
            body: bytes::Bytes::new(),
            attempt: 1,
            lease_until: DateTime::from_timestamp(10_000, 0).unwrap(),
            received_at: DateTime::from_timestamp(due_secs, 0).unwrap(),
            signed_at: None,
            due_at: DateTime::from_timestamp(due_secs, 0),
        }
    }

    #[test]
    fn a_busy_worker_starts_at_the_oldest_due_time_it_claimed_and_goes_full_every_second() {
        let t0 = Instant::now();
        let mut c = Cursor::default();
        assert_eq!(c.next(t0), Claim::Full, "the first claim is full");
        c.claimed(Claim::Full, &[event(30), event(10), event(20)], 3, t0);
        let from = DateTime::from_timestamp(10, 0).unwrap();
        assert_eq!(c.next(t0 + Duration::from_millis(10)), Claim::From(from));
        c.claimed(
            Claim::From(from),
            &[event(40), event(35)],
            2,
            t0 + Duration::from_millis(10),
        );
        let from = DateTime::from_timestamp(35, 0).unwrap();
        assert_eq!(c.next(t0 + Duration::from_millis(999)), Claim::From(from));
        // A second after the last full claim, the next one is full again, whatever the cursor.
        assert_eq!(c.next(t0 + FULL_CLAIM_EVERY), Claim::Full);
    }

    #[test]
    fn after_a_full_claim_found_nothing_the_next_waits_for_stored_events_or_the_poll() {
        let t0 = Instant::now();
        let poll = Duration::from_millis(250);
        let mut c = Cursor::default();
        assert_eq!(
            c.wait_before_claim(t0, poll),
            Duration::ZERO,
            "never claimed"
        );
        c.claimed(Claim::Full, &[], 4, t0);
        let at = |ms| t0 + Duration::from_millis(ms);
        assert_eq!(c.wait_before_claim(at(0), poll), poll);
        assert_eq!(
            c.wait_before_claim(at(100), poll),
            Duration::from_millis(150)
        );
        assert_eq!(
            c.wait_before_claim(at(250), poll),
            Duration::ZERO,
            "a poll later"
        );
        assert_eq!(c.wait_before_claim(at(900), poll), Duration::ZERO);
        c.events_stored();
        assert_eq!(
            c.wait_before_claim(at(1), poll),
            Duration::ZERO,
            "stored: claim"
        );
    }

    #[test]
    fn only_a_full_claim_that_got_less_than_it_asked_makes_the_pool_wait() {
        let t0 = Instant::now();
        let poll = Duration::from_millis(250);
        let mut c = Cursor::default();
        c.claimed(Claim::Full, &[event(5)], 1, t0);
        assert_eq!(c.wait_before_claim(t0, poll), Duration::ZERO, "found some");
        let from = DateTime::from_timestamp(5, 0).unwrap();
        c.claimed(Claim::From(from), &[], 4, t0);
        assert_eq!(
            c.wait_before_claim(t0, poll),
            Duration::ZERO,
            "drained past the cursor only: look from the start first"
        );
        c.claimed(Claim::Full, &[], 4, t0);
        assert_eq!(c.wait_before_claim(t0, poll), poll);
        c.claimed(Claim::Full, &[event(7)], 4, t0);
        assert_eq!(
            c.wait_before_claim(t0, poll),
            poll,
            "one of four: all that was due"
        );
        c.claimed(Claim::Full, &[event(6)], 1, t0);
        assert_eq!(
            c.wait_before_claim(t0, poll),
            Duration::ZERO,
            "a later find"
        );
    }

    #[test]
    fn an_empty_claim_sends_the_next_one_back_to_a_full_claim() {
        let t0 = Instant::now();
        let mut c = Cursor::default();
        c.claimed(Claim::Full, &[event(5)], 1, t0);
        let from = DateTime::from_timestamp(5, 0).unwrap();
        assert_eq!(c.next(t0), Claim::From(from));
        c.claimed(Claim::From(from), &[], 4, t0);
        assert_eq!(c.next(t0), Claim::Full);
        // A full claim that finds nothing keeps it full.
        c.claimed(Claim::Full, &[], 4, t0);
        assert_eq!(c.next(t0), Claim::Full);
    }
}
