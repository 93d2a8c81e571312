//! How a pool gives out its delivery slots, free of I/O so that the rules are tested on their
//! own: when a busy pool claims, how events handed over by the receiver of the process share the
//! slots with claimed ones, and when a handed-over event is too late to start.

use chrono::{DateTime, Utc};
use std::time::Duration;

/// A quarter of the slots, rounded up: what a busy pool waits for before it claims, and what
/// claims keep while they find a backlog.
pub(super) fn quarter(concurrency: usize) -> usize {
    concurrency.div_ceil(4)
}

/// Whether to claim now with `free` of `concurrency` delivery slots free. While deliveries run,
/// a claim waits until a quarter of the slots are free, so that a busy worker spends one claim
/// commit on several events rather than one per event. An idle worker claims at once, and so
/// does one told that events were stored for a claim of an integration holding none of its slots
/// (`for_idle`): that integration's next event would otherwise wait for a quarter of another's
/// deliveries to end (docs/performance.md, round 35). Stores are signalled at most once per
/// commit batch in the process, or per 10 ms and receiver in a notification, which bounds such
/// claims.
pub(super) fn claim_now(free: usize, concurrency: usize, for_idle: bool) -> bool {
    free > 0 && (free >= concurrency || free >= quarter(concurrency) || for_idle)
}

/// Whether a handed-over event may start on a free slot: `within` the hand-over's share of the
/// slots and the events the pool may hold, or past both when its integration has no delivery
/// `unfinished` (none holding a slot or having its outcome written). That is the integration a
/// pool's last free slot is kept for (`worker::fair`): a busy integration's handed-over events,
/// waiting in memory for a slot within its share, fill the held bound, and the quiet one's next
/// event waited for one of the busy one's deliveries to end (docs/performance.md, round 36). One
/// such event per integration at a time, as it is then unfinished; and not while its own
/// outcomes wait on the database, which is what the held bound is for.
/// `unfinished` is asked only past the bounds: it takes the share's lock.
pub(super) fn handed_may_start(within: bool, unfinished: impl FnOnce() -> usize) -> bool {
    within || unfinished() == 0
}

/// How the slots are shared between handed-over and claimed events. A hand-over jumps the queue:
/// while events wait in the inbox (claims come back full, or the receiver of the process stored
/// events it had no place for, or another tenant's retries are due), handed-over events may hold
/// only three quarters of the slots, so that claims keep a quarter and the oldest waiting events
/// keep moving however fast new ones arrive. Otherwise they may take all.
#[derive(Debug)]
pub(super) struct Share {
    concurrency: usize,
    handed_running: usize,
    backlog: bool,
}

impl Share {
    pub(super) fn new(concurrency: usize) -> Self {
        Self {
            concurrency,
            handed_running: 0,
            backlog: false,
        }
    }

    pub(super) fn may_start_handed(&self) -> bool {
        !self.backlog || self.handed_running < self.concurrency - quarter(self.concurrency)
    }

    pub(super) fn started_handed(&mut self) {
        self.handed_running += 1;
    }

    /// A delivery task ended (`Err`: it panicked or was aborted; counted as claimed, which at
    /// worst lets one more handed-over event start).
    pub(super) fn ended(&mut self, done: Result<bool, tokio::task::JoinError>) {
        if done.unwrap_or(false) {
            self.handed_running = self.handed_running.saturating_sub(1);
        }
    }

    /// Events were stored for a claim since the last one: they wait until a claim runs, and a
    /// claim runs only with a quarter of the slots free, which handed-over events arriving as
    /// fast as slots free up would never leave.
    pub(super) fn events_waiting(&mut self) {
        self.backlog = true;
    }

    /// A claim asked for `asked` events and got `got`: as many means more may be waiting.
    pub(super) fn claimed(&mut self, asked: usize, got: usize) {
        self.backlog = got >= asked && asked > 0;
    }
}

/// Whether an event leased until `lease_until` may still start an attempt at `now`: an attempt
/// lasts at most ¾ of the lease (`retry::attempt_timeout`), and must end inside it. A claimed event
/// starts at once; a handed-over event may have waited for a slot since its insert.
pub(super) fn lease_left_for_an_attempt(
    lease_until: DateTime<Utc>,
    now: DateTime<Utc>,
    lease: Duration,
) -> bool {
    let left = (lease_until - now).to_std().unwrap_or_default();
    left >= super::retry::attempt_timeout(Duration::MAX, lease)
}

#[cfg(test)]
mod tests {
    use super::{Share, claim_now, handed_may_start, lease_left_for_an_attempt};
    use chrono::{TimeDelta, Utc};
    use std::time::Duration;

    #[test]
    fn a_handed_event_starts_only_with_three_quarters_of_its_lease_left() {
        let lease = Duration::from_secs(60);
        let now = Utc::now();
        let at = |s| now + TimeDelta::seconds(s);
        assert!(
            lease_left_for_an_attempt(at(60), now, lease),
            "just handed over"
        );
        assert!(
            lease_left_for_an_attempt(at(45), now, lease),
            "waited a quarter"
        );
        assert!(
            !lease_left_for_an_attempt(at(44), now, lease),
            "waited longer"
        );
        assert!(!lease_left_for_an_attempt(at(-5), now, lease), "lease over");
    }

    #[test]
    fn events_stored_for_a_claim_keep_handed_over_ones_to_three_quarters_until_a_claim_runs() {
        let mut s = Share::new(8);
        for _ in 0..6 {
            s.started_handed();
        }
        assert!(s.may_start_handed(), "nothing waits: all the slots");
        s.events_waiting();
        assert!(!s.may_start_handed(), "events wait: a quarter is kept");
        s.claimed(2, 1);
        assert!(s.may_start_handed(), "the claim took what waited");
    }

    #[test]
    fn while_claims_find_a_backlog_handed_over_events_keep_to_three_quarters_of_the_slots() {
        let mut s = Share::new(8);
        for _ in 0..8 {
            assert!(s.may_start_handed(), "no backlog: all the slots");
            s.started_handed();
        }
        s.claimed(4, 4);
        assert!(
            !s.may_start_handed(),
            "a full claim: a quarter is kept for claims"
        );
        s.ended(Ok(false));
        assert!(
            !s.may_start_handed(),
            "a claimed event ending frees no handed share"
        );
        for _ in 0..2 {
            s.ended(Ok(true));
        }
        assert!(!s.may_start_handed(), "6 of 8 handed: at the share");
        s.ended(Ok(true));
        assert!(s.may_start_handed(), "5 of 8 handed: under the share");
        s.claimed(4, 3);
        s.started_handed();
        s.started_handed();
        assert!(
            s.may_start_handed(),
            "a short claim: nothing waits, all the slots again"
        );
        let mut one = Share::new(1);
        one.claimed(1, 1);
        assert!(
            !one.may_start_handed(),
            "one slot and a backlog: the claim's turn"
        );
        one.claimed(1, 0);
        assert!(one.may_start_handed());
    }

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
            assert_eq!(
                claim_now(free, concurrency, false),
                want,
                "{free}/{concurrency}"
            );
        }
        assert!(
            claim_now(1, 16, true),
            "an idle integration's event stored: one slot"
        );
        assert!(!claim_now(0, 16, true), "but a slot");
    }

    #[test]
    fn past_the_share_and_the_held_bound_only_an_integration_with_nothing_unfinished_starts() {
        assert!(
            handed_may_start(true, || unreachable!("not asked within the bounds")),
            "within: any"
        );
        assert!(
            handed_may_start(false, || 0),
            "nothing unfinished: it starts"
        );
        assert!(
            !handed_may_start(false, || 1),
            "a delivery unfinished: it waits"
        );
    }
}
