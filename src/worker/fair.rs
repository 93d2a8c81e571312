//! Each integration's share of a pool's delivery slots, free of I/O so that the rule is tested on
//! its own. Workers take due events oldest first, whatever their integration: without a share, an
//! integration whose destination hangs holds every slot until its timeout, and every other
//! integration's events wait behind its own (README, "Delivery").
//!
//! No integration holds more than three quarters of the slots the others leave it ([`cap`]): a
//! stuck destination leaves the rest a quarter, a second one a quarter of that. Past that, its next
//! event waits in memory while its deliveries keep ending (a busy destination frees a slot within
//! moments), and goes back to the inbox, not counted as an attempt, once none has ended for
//! [`STALL`]: deferred for as long as the destination has been stuck (its attempts timing out),
//! at least [`STALL`] and at most [`DEFER_MAX`]. A destination down for an hour then costs each
//! of its events a few deferrals, not one a second.

use super::defaults::{DEFER_MAX, STALL};
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// The most slots one integration holds when the others leave it `left`: all but a quarter
/// (rounded up), at least one.
pub(super) fn cap(left: usize) -> usize {
    left.saturating_sub(super::slots::quarter(left)).max(1)
}

/// What becomes of an integration's next event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Turn {
    Start,
    /// In memory, until the integration has a slot again.
    Wait,
    /// Back to the inbox, due again after this long.
    Defer(Duration),
}

#[derive(Debug)]
struct Entry {
    held: usize,
    /// When it last started a delivery.
    last_start: Instant,
    /// When one of its deliveries last ended, however.
    last_end: Option<Instant>,
    /// Its first attempt to time out since one last ended otherwise.
    stuck_since: Option<Instant>,
    /// Whether its deferral was reported since it last made progress.
    reported: bool,
}

/// The slots each integration holds in one pool, and how its deliveries have been ending.
#[derive(Debug)]
pub(super) struct Fair {
    concurrency: usize,
    /// The slots held, all integrations together.
    total: usize,
    by: HashMap<String, Entry>,
}

impl Fair {
    pub(super) fn new(concurrency: usize) -> Self {
        Self {
            concurrency,
            total: 0,
            by: HashMap::new(),
        }
    }

    pub(super) fn turn(&self, integration: &str, now: Instant) -> Turn {
        let Some(e) = self
            .by
            .get(integration)
            .filter(|e| e.held >= self.cap_of(e))
        else {
            return Turn::Start;
        };
        let since = e.last_end.map_or(e.last_start, |end| end.max(e.last_start));
        let quiet = now.saturating_duration_since(since);
        if quiet < STALL {
            return Turn::Wait;
        }
        let stuck = e
            .stuck_since
            .map_or(Duration::ZERO, |s| now.saturating_duration_since(s));
        Turn::Defer(quiet.max(stuck).clamp(STALL, DEFER_MAX))
    }

    fn cap_of(&self, e: &Entry) -> usize {
        let others = self.total.saturating_sub(e.held);
        cap(self.concurrency.saturating_sub(others))
    }

    pub(super) fn started(&mut self, integration: &str, now: Instant) {
        self.total += 1;
        let e = match self.by.get_mut(integration) {
            Some(e) => e,
            None => self.by.entry(integration.to_owned()).or_insert(Entry {
                held: 0,
                last_start: now,
                last_end: None,
                stuck_since: None,
                reported: false,
            }),
        };
        e.held += 1;
        e.last_start = now;
    }

    /// One of its deliveries ended; `timed_out` when the destination never answered in time.
    pub(super) fn ended(&mut self, integration: &str, timed_out: bool, now: Instant) {
        let Some(e) = self.by.get_mut(integration) else {
            return;
        };
        self.total = self.total.saturating_sub(1);
        e.held = e.held.saturating_sub(1);
        e.last_end = Some(now);
        if timed_out {
            e.stuck_since.get_or_insert(now);
        } else {
            e.stuck_since = None;
            e.reported = false;
        }
        // An idle integration that is not stuck has nothing worth remembering.
        if e.held == 0 && e.stuck_since.is_none() {
            self.by.remove(integration);
        }
    }
}

impl Fair {
    /// Whether this is the integration's first deferral since it last made progress: the one a
    /// log line reports.
    pub(super) fn first_deferral(&mut self, integration: &str) -> bool {
        self.by
            .get_mut(integration)
            .is_some_and(|e| !std::mem::replace(&mut e.reported, true))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    /// Starts deliveries of `integration` until it is at its share; how many.
    fn full(f: &mut Fair, integration: &str, at: Instant) -> usize {
        let mut n = 0;
        while f.turn(integration, at) == Turn::Start {
            f.started(integration, at);
            n += 1;
        }
        n
    }

    #[test]
    fn no_integration_holds_more_than_three_quarters_of_the_slots() {
        for (concurrency, most) in [(1, 1), (2, 1), (4, 3), (8, 6), (32, 24), (10_000, 7_500)] {
            assert_eq!(cap(concurrency), most, "{concurrency} slots");
        }
        let t = Instant::now();
        let mut f = Fair::new(32);
        assert_eq!(full(&mut f, "a", t), 24);
        assert_eq!(f.turn("a", t), Turn::Wait, "a holds 24 of 32");
        assert_eq!(f.turn("b", t), Turn::Start, "the other quarter is b's");
        f.ended("a", false, t + MS);
        assert_eq!(f.turn("a", t + MS), Turn::Start, "a slot of a's ended");
    }

    #[test]
    fn a_second_stuck_integration_takes_three_quarters_of_what_the_first_left() {
        let t = Instant::now();
        let mut f = Fair::new(32);
        assert_eq!(full(&mut f, "a", t), 24);
        assert_eq!(full(&mut f, "b", t), 6, "three quarters of 8");
        assert_eq!(full(&mut f, "c", t), 1, "of 2");
        assert_eq!(full(&mut f, "d", t), 1, "the last one: at least one each");
        assert_eq!(f.total, 32);
        assert_eq!(
            f.turn("a", t + STALL),
            Turn::Defer(STALL),
            "a holds more than its share of what the others leave, and is stuck"
        );
    }

    #[test]
    fn a_busy_integration_waits_in_memory_while_its_deliveries_keep_ending() {
        let t = Instant::now();
        let mut f = Fair::new(8);
        assert_eq!(full(&mut f, "a", t), 6);
        let mut now = t;
        for _ in 0..20 {
            now += STALL / 2;
            f.ended("a", false, now);
            f.started("a", now);
            assert_eq!(f.turn("a", now + STALL / 2 - MS), Turn::Wait);
        }
    }

    #[test]
    fn an_integration_whose_deliveries_stop_ending_is_deferred_for_longer_the_longer_it_is_stuck() {
        let t = Instant::now();
        let mut f = Fair::new(8);
        full(&mut f, "a", t);
        assert_eq!(f.turn("a", t + STALL - MS), Turn::Wait);
        assert_eq!(f.turn("a", t + STALL), Turn::Defer(STALL));
        assert_eq!(
            f.turn("a", t + 3 * STALL),
            Turn::Defer(3 * STALL),
            "as long as nothing ended"
        );
        // Its attempts time out at 10 s and it fills its slots again at once: it is stuck since
        // the first timeout, and each refill is deferred for longer.
        let mut now = t;
        for wave in 1..=30u32 {
            now = t + Duration::from_secs(10) * wave;
            for _ in 0..6 {
                f.ended("a", true, now);
            }
            assert_eq!(f.turn("a", now), Turn::Start, "its slots ended");
            full(&mut f, "a", now);
            let stuck = now + STALL - t - Duration::from_secs(10);
            assert_eq!(
                f.turn("a", now + STALL),
                Turn::Defer(stuck.clamp(STALL, DEFER_MAX)),
                "wave {wave}"
            );
        }
        assert_eq!(
            f.turn("a", now + Duration::from_secs(3600)),
            Turn::Defer(DEFER_MAX)
        );
        assert_eq!(f.turn("b", now), Turn::Start, "b is never held back by a");
        // One answer and it is no longer stuck.
        f.ended("a", false, now + STALL);
        f.started("a", now + STALL);
        assert_eq!(f.turn("a", now + STALL), Turn::Wait);
    }

    #[test]
    fn a_burst_after_a_quiet_spell_waits_rather_than_being_deferred() {
        let t = Instant::now();
        let mut f = Fair::new(8);
        f.started("a", t);
        f.ended("a", false, t + MS);
        let later = t + Duration::from_secs(600);
        full(&mut f, "a", later);
        assert_eq!(f.turn("a", later + MS), Turn::Wait);
    }

    #[test]
    fn idle_integrations_are_forgotten_unless_stuck() {
        let t = Instant::now();
        let mut f = Fair::new(8);
        f.started("a", t);
        f.started("b", t);
        f.ended("a", false, t);
        f.ended("b", true, t);
        assert!(!f.by.contains_key("a"));
        assert!(f.by["b"].stuck_since.is_some(), "b timed out: kept");
        f.ended("gone", false, t);
        assert_eq!(f.by.len(), 1, "an end without a start changes nothing");
    }

    #[test]
    fn a_deferral_is_reported_once_until_the_integration_makes_progress() {
        let t = Instant::now();
        let mut f = Fair::new(4);
        full(&mut f, "a", t);
        assert!(f.first_deferral("a"));
        assert!(!f.first_deferral("a"));
        f.ended("a", true, t + STALL);
        assert!(!f.first_deferral("a"), "a timeout is no progress");
        f.ended("a", false, t + STALL);
        assert!(f.first_deferral("a"), "an answer was");
        assert!(!f.first_deferral("b"), "b holds nothing");
    }
}
