//! Each integration's share of a pool's delivery slots, free of I/O so that the rule is tested on
//! its own. Claims take the integrations' events in turns, but a slot stays taken until the
//! destination answers: without a share, an integration whose destination hangs holds every slot
//! until its timeout, wave after wave, and every other integration's events wait behind its own
//! (README, "Delivery").
//!
//! An integration whose deliveries keep ending may use every free slot: a busy destination frees
//! one within moments, and a cap would only slow a pool that delivers for one integration. The
//! share binds an integration that is stuck (its last delivery to end timed out), quiet (none has
//! ended for [`STALL`] while it held its share), or new to the pool's slots (none has ended since
//! it last held none, so nothing says yet that its destination answers): it then holds at most
//! three quarters of the slots the others leave it ([`cap`]), so a stuck destination leaves the
//! rest a quarter from its first event on, a second one a quarter of that. Past its share, its
//! next event waits in memory while some of its deliveries still end, and goes back to the inbox,
//! not counted as an attempt, once none has for [`STALL`]: deferred for as long as it has been
//! stuck or quiet, at least [`STALL`] and at most [`DEFER_MAX`], so an hour's outage costs each of
//! its events a few rewrites, not one a second.
//!
//! "New" means idle for [`STALL`]: an integration whose deliveries all ended a moment ago is
//! still known to answer. Forgotten the moment it held none, a backlog delivered in waves (a
//! claim's events start together and end together) was new again at every wave: bound to its
//! share, its further claimed events waited in memory, and took every slot ahead of other
//! integrations' events once one of the wave ended (docs/performance.md, round 35).

use super::defaults::{DEFER_MAX, STALL};
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// The most slots a bound integration holds when the others leave it `left`: all but a quarter
/// (rounded up), at least one.
pub(super) fn cap(left: usize) -> usize {
    left.saturating_sub(super::slots::quarter(left)).max(1)
}

/// What becomes of an integration's next event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Turn {
    Start,
    /// In memory, until the integration has a slot within its share again.
    Wait,
    /// Back to the inbox, due again after this long.
    Defer(Duration),
}

#[derive(Debug)]
struct Entry {
    held: usize,
    /// When it last went from holding no slot to holding one.
    busy_since: Instant,
    /// When one of its deliveries last ended, however.
    last_end: Option<Instant>,
    /// Its first attempt to time out since one last ended otherwise.
    stuck_since: Option<Instant>,
    /// Whether its deferral was reported since it last made progress.
    reported: bool,
}

/// How long a stuck integration that holds no slot is remembered: past two of its longest
/// deferrals, none of its events came back, and the integration is likely gone.
const FORGET_STUCK: Duration = Duration::from_secs(2 * DEFER_MAX.as_secs());

impl Entry {
    fn new(now: Instant) -> Self {
        Self {
            held: 0,
            busy_since: now,
            last_end: None,
            stuck_since: None,
            reported: false,
        }
    }

    /// Whether the entry says nothing worth keeping at `now`: it holds no slot, and its last
    /// answer (or timeout, if stuck) is too old to count.
    fn forgettable(&self, now: Instant) -> bool {
        let keep = if self.stuck_since.is_some() {
            FORGET_STUCK
        } else {
            STALL
        };
        self.held == 0
            && self
                .last_end
                .is_none_or(|end| now.saturating_duration_since(end) >= keep)
    }
}

/// The slots each integration holds in one pool, and how its deliveries have been ending.
#[derive(Debug)]
pub(super) struct Fair {
    concurrency: usize,
    /// The slots held, all integrations together.
    total: usize,
    by: HashMap<String, Entry>,
    /// When entries were last looked over for ones to forget.
    swept: Option<Instant>,
}

impl Fair {
    pub(super) fn new(concurrency: usize) -> Self {
        Self {
            concurrency,
            total: 0,
            by: HashMap::new(),
            swept: None,
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
        let since = e.last_end.map_or(e.busy_since, |end| end.max(e.busy_since));
        let quiet = now.saturating_duration_since(since);
        // Until one of its deliveries has ended since it became busy, nothing says that its
        // destination answers: a burst to one that hangs took every free slot for a whole
        // timeout before anything showed it was stuck.
        let answered = e.last_end.is_some_and(|end| end >= e.busy_since);
        match (e.stuck_since, quiet >= STALL) {
            (None, false) if answered => Turn::Start,
            (_, false) => Turn::Wait,
            (stuck, true) => {
                let stuck = stuck.map_or(Duration::ZERO, |s| now.saturating_duration_since(s));
                // Whole seconds, so that the events deferred in one pass share one statement.
                let after = quiet.max(stuck).clamp(STALL, DEFER_MAX);
                Turn::Defer(Duration::from_secs(after.as_secs()))
            }
        }
    }

    fn cap_of(&self, e: &Entry) -> usize {
        let others = self.total.saturating_sub(e.held);
        cap(self.concurrency.saturating_sub(others))
    }

    /// The slots `integration` holds.
    pub(super) fn holds(&self, integration: &str) -> usize {
        self.by.get(integration).map_or(0, |e| e.held)
    }

    pub(super) fn started(&mut self, integration: &str, now: Instant) {
        self.total += 1;
        let e = match self.by.get_mut(integration) {
            Some(e) => e,
            None => self
                .by
                .entry(integration.to_owned())
                .or_insert(Entry::new(now)),
        };
        // Idle for a while, it is new to the slots again; idle a moment, its last answer counts.
        if e.held == 0 && e.forgettable(now) {
            *e = Entry::new(now);
        }
        e.held += 1;
    }

    /// One of its deliveries ended; `timed_out` when the destination never answered in time.
    pub(super) fn ended(&mut self, integration: &str, timed_out: bool, now: Instant) {
        self.sweep(now);
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
    }

    /// Forgets the entries that say nothing any more, at most once per [`STALL`]: integrations
    /// come and go with their manifests.
    fn sweep(&mut self, now: Instant) {
        if self
            .swept
            .is_some_and(|at| now.saturating_duration_since(at) < STALL)
        {
            return;
        }
        self.swept = Some(now);
        self.by.retain(|_, e| !e.forgettable(now));
    }

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
    const TIMEOUT: Duration = Duration::from_secs(10);

    /// Starts deliveries of `integration` at `at` while its turn is to start, at most `most`.
    fn fill(f: &mut Fair, integration: &str, at: Instant, most: usize) -> usize {
        let mut n = 0;
        while n < most && f.turn(integration, at) == Turn::Start {
            f.started(integration, at);
            n += 1;
        }
        n
    }

    /// `integration` has had `n` deliveries time out at `at`: stuck from then on.
    fn stuck(f: &mut Fair, integration: &str, at: Instant, n: usize) {
        for _ in 0..n {
            f.started(integration, at - TIMEOUT);
        }
        for _ in 0..n {
            f.ended(integration, true, at);
        }
    }

    #[test]
    fn a_bound_integration_holds_three_quarters_of_what_the_others_leave() {
        for (left, most) in [
            (0, 1),
            (1, 1),
            (2, 1),
            (4, 3),
            (8, 6),
            (32, 24),
            (10_000, 7_500),
        ] {
            assert_eq!(cap(left), most, "{left} slots left");
        }
        let t = Instant::now();
        let mut f = Fair::new(32);
        stuck(&mut f, "a", t, 1);
        assert_eq!(fill(&mut f, "a", t, 32), 24, "stuck: 24 of 32");
        assert_eq!(f.turn("a", t), Turn::Wait);
        assert_eq!(f.turn("b", t), Turn::Start, "the other quarter is b's");
        f.ended("a", false, t + MS);
        assert_eq!(
            f.turn("a", t + MS),
            Turn::Start,
            "an answer: a is free again"
        );
    }

    #[test]
    fn a_second_stuck_integration_takes_three_quarters_of_what_the_first_left() {
        let t = Instant::now();
        let mut f = Fair::new(32);
        for name in ["a", "b", "c", "d"] {
            stuck(&mut f, name, t, 1);
        }
        assert_eq!(fill(&mut f, "a", t, 32), 24);
        assert_eq!(fill(&mut f, "b", t, 32), 6, "three quarters of 8");
        assert_eq!(fill(&mut f, "c", t, 32), 1, "of 2");
        assert_eq!(
            fill(&mut f, "d", t, 32),
            1,
            "the last one: at least one each"
        );
        assert_eq!(f.total, 32);
    }

    #[test]
    fn an_integration_whose_deliveries_keep_ending_may_take_every_slot() {
        let t = Instant::now();
        let mut f = Fair::new(8);
        assert_eq!(
            fill(&mut f, "a", t, 100),
            6,
            "a burst: its share, until one of its deliveries ends"
        );
        assert_eq!(f.turn("a", t + MS), Turn::Wait);
        f.ended("a", false, t + MS);
        assert_eq!(fill(&mut f, "a", t + MS, 100), 100, "it answers: no bound");
        let mut now = t + MS;
        for _ in 0..20 {
            now += STALL / 2;
            f.ended("a", false, now);
            assert_eq!(f.turn("a", now + STALL / 2 - MS), Turn::Start);
            f.started("a", now);
        }
    }

    #[test]
    fn an_integration_none_of_whose_deliveries_ends_is_bound_after_a_second() {
        let t = Instant::now();
        let mut f = Fair::new(8);
        assert_eq!(fill(&mut f, "a", t, 8), 6);
        assert_eq!(
            f.turn("a", t + STALL - MS),
            Turn::Wait,
            "not quiet yet: its next event waits for a slot in its share"
        );
        assert_eq!(f.turn("a", t + STALL), Turn::Defer(STALL), "quiet");
        assert_eq!(f.turn("a", t + 3 * STALL), Turn::Defer(3 * STALL));
        assert_eq!(
            f.turn("a", t + 3 * STALL + 999 * MS),
            Turn::Defer(3 * STALL),
            "whole seconds: one statement for a pass's deferrals"
        );
        assert_eq!(f.turn("b", t + 3 * STALL), Turn::Start);
    }

    #[test]
    fn a_stuck_integration_is_deferred_for_longer_the_longer_it_stays_stuck() {
        let t = Instant::now();
        let mut f = Fair::new(8);
        // Its attempts time out every 10 s and it fills its share again at once.
        let mut now = t;
        for wave in 1..=30u32 {
            now = t + TIMEOUT * wave;
            stuck(&mut f, "a", now, 6);
            assert_eq!(fill(&mut f, "a", now, 8), 6, "wave {wave}: its share");
            assert_eq!(
                f.turn("a", now + STALL - MS),
                Turn::Wait,
                "ended a moment ago"
            );
            let since_first_timeout = now + STALL - (t + TIMEOUT);
            assert_eq!(
                f.turn("a", now + STALL),
                Turn::Defer(since_first_timeout.clamp(STALL, DEFER_MAX)),
                "wave {wave}"
            );
            for _ in 0..6 {
                f.ended("a", true, now + TIMEOUT - MS);
            }
        }
        assert_eq!(f.turn("a", now + Duration::from_secs(3600)), Turn::Start);
        assert_eq!(fill(&mut f, "a", now + TIMEOUT, 8), 6);
        assert_eq!(
            f.turn("a", now + TIMEOUT + Duration::from_secs(3600)),
            Turn::Defer(DEFER_MAX)
        );
        // One answer and it is no longer stuck.
        f.ended("a", false, now + TIMEOUT + STALL);
        f.started("a", now + TIMEOUT + STALL);
        assert_eq!(f.turn("a", now + TIMEOUT + STALL), Turn::Start);
    }

    /// A backlog delivered in waves: a claim's eight start together and end together, and the
    /// next claim's start a moment later. Forgotten as soon as it held none, `a` was new at every
    /// wave and bound to 6 of the 8 slots.
    #[test]
    fn an_integration_whose_deliveries_all_ended_a_moment_ago_may_take_every_slot() {
        let t = Instant::now();
        let mut f = Fair::new(8);
        assert_eq!(fill(&mut f, "a", t, 8), 6, "new: its share");
        for _ in 0..6 {
            f.ended("a", false, t + MS);
        }
        assert_eq!(fill(&mut f, "a", t + MS, 8), 8, "it answers");
        let mut now = t + MS;
        for wave in 1..=5 {
            now += 30 * MS;
            for _ in 0..8 {
                f.ended("a", false, now);
            }
            now += 2 * MS;
            assert_eq!(fill(&mut f, "a", now, 8), 8, "wave {wave}");
        }
        for _ in 0..8 {
            f.ended("a", false, now);
        }
        assert_eq!(
            fill(&mut f, "a", now + STALL, 8),
            6,
            "idle for a second: new again"
        );
    }

    #[test]
    fn idle_integrations_are_forgotten_a_while_after_their_last_delivery_ended() {
        let t = Instant::now();
        let mut f = Fair::new(8);
        for name in ["a", "b"] {
            f.started(name, t);
        }
        f.ended("a", false, t);
        f.ended("b", true, t);
        assert_eq!(f.by.len(), 2, "both ended a moment ago");
        f.ended("gone", false, t + STALL);
        assert!(!f.by.contains_key("a"), "idle for a second");
        assert!(f.by["b"].stuck_since.is_some(), "b timed out: kept");
        assert_eq!(
            (f.by.len(), f.total),
            (1, 0),
            "an end without a start changes nothing"
        );
        f.ended("gone", false, t + FORGET_STUCK);
        assert!(
            f.by.is_empty(),
            "no event of b's for two of its longest deferrals: gone"
        );
    }

    #[test]
    fn a_deferral_is_reported_once_until_the_integration_makes_progress() {
        let t = Instant::now();
        let mut f = Fair::new(4);
        stuck(&mut f, "a", t, 1);
        assert!(f.first_deferral("a"));
        assert!(!f.first_deferral("a"));
        stuck(&mut f, "a", t + STALL, 1);
        assert!(!f.first_deferral("a"), "a timeout is no progress");
        f.started("a", t + STALL);
        f.started("a", t + STALL);
        f.ended("a", false, t + STALL);
        assert!(f.first_deferral("a"), "an answer was");
        assert!(!f.first_deferral("b"), "b holds nothing");
    }
}
