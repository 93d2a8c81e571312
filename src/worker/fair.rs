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
//!
//! The last free slot is kept for an integration that holds none and whose delivery ended a
//! moment ago (a tenant with a trickle of events: it holds a slot for a millisecond in fifty), in
//! pools of [`KEEP_LAST_FROM`] slots or more: taken by another's backlog, each of its events
//! waited for one of that backlog's deliveries to end (8-9 ms at p50 beside 32 ms deliveries,
//! 1.5 ms alone; docs/performance.md, round 36). Integrations that all hold slots share every
//! one, and one alone in the pool keeps them all.

use super::defaults::{DEFER_MAX, STALL};
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// The smallest pool that keeps its last slot for an integration that delivered a moment ago: in
/// smaller ones a slot is a third of the pool or more, too much to leave idle for a trickle.
pub(super) const KEEP_LAST_FROM: usize = 4;

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
    /// Its deliveries started and not ended, their outcome written: at least `held`.
    unfinished: usize,
    /// When it last went from holding no slot to holding one.
    busy_since: Instant,
    /// When one of its deliveries last ended, however.
    last_end: Option<Instant>,
    /// Its first attempt to time out since one last ended otherwise.
    stuck_since: Option<Instant>,
    /// Whether its deferral was reported since it last made progress.
    reported: bool,
}

/// Whether the entry is an integration that holds no slot, is not stuck, and had a delivery end
/// lately (it is forgotten a second or two after that): one the pool's last slot is kept for.
fn slot_kept_for(e: &Entry) -> bool {
    e.held == 0 && e.stuck_since.is_none() && e.last_end.is_some()
}

/// How long a stuck integration that holds no slot is remembered: past two of its longest
/// deferrals, none of its events came back, and the integration is likely gone.
const FORGET_STUCK: Duration = Duration::from_secs(2 * DEFER_MAX.as_secs());

impl Entry {
    fn new(now: Instant) -> Self {
        Self {
            held: 0,
            unfinished: 0,
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
            && self.unfinished == 0
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
    /// How many entries the last slot is kept for ([`slot_kept_for`]), so that a start does not
    /// look over every entry.
    idle: usize,
    /// When entries were last looked over for ones to forget.
    swept: Option<Instant>,
}

impl Fair {
    pub(super) fn new(concurrency: usize) -> Self {
        Self {
            concurrency,
            total: 0,
            by: HashMap::new(),
            idle: 0,
            swept: None,
        }
    }

    pub(super) fn turn(&self, integration: &str, now: Instant) -> Turn {
        let e = self.by.get(integration);
        if let Some(e) = e.filter(|e| e.held >= self.cap_of(e)) {
            let since = e.last_end.map_or(e.busy_since, |end| end.max(e.busy_since));
            let quiet = now.saturating_duration_since(since);
            // Until one of its deliveries has ended since it became busy, nothing says that its
            // destination answers: a burst to one that hangs took every free slot for a whole
            // timeout before anything showed it was stuck.
            let answered = e.last_end.is_some_and(|end| end >= e.busy_since);
            match (e.stuck_since, quiet >= STALL) {
                (None, false) if answered => {}
                (_, false) => return Turn::Wait,
                (stuck, true) => {
                    let stuck = stuck.map_or(Duration::ZERO, |s| now.saturating_duration_since(s));
                    // Whole seconds, so that the events deferred in one pass share one statement.
                    let after = quiet.max(stuck).clamp(STALL, DEFER_MAX);
                    return Turn::Defer(Duration::from_secs(after.as_secs()));
                }
            }
        }
        // An integration that holds slots leaves the last one to one that holds none and may
        // be back within moments; one that holds none is that integration.
        let holds_some = e.is_some_and(|e| e.held > 0);
        if holds_some && self.keeps_last_slot() && self.total + 1 >= self.concurrency {
            return Turn::Wait;
        }
        Turn::Start
    }

    fn cap_of(&self, e: &Entry) -> usize {
        let others = self.total.saturating_sub(e.held);
        cap(self.concurrency.saturating_sub(others))
    }

    /// The slots held, all integrations together.
    pub(super) fn held(&self) -> usize {
        self.total
    }

    /// The slots `integration` holds.
    pub(super) fn holds(&self, integration: &str) -> usize {
        self.by.get(integration).map_or(0, |e| e.held)
    }

    /// Whether the pool's last free slot is kept for some integration now.
    pub(super) fn keeps_last_slot(&self) -> bool {
        self.idle > 0 && self.concurrency >= KEEP_LAST_FROM
    }

    /// The deliveries of `integration` started and not ended (answered or not, their outcome
    /// not yet written).
    pub(super) fn unfinished(&self, integration: &str) -> usize {
        self.by.get(integration).map_or(0, |e| e.unfinished)
    }

    /// A delivery of `integration` ended, its outcome written (or its task gone).
    pub(super) fn finished(&mut self, integration: &str) {
        if let Some(e) = self.by.get_mut(integration) {
            e.unfinished = e.unfinished.saturating_sub(1);
        }
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
        if slot_kept_for(e) {
            self.idle -= 1;
        }
        // Idle for a while, it is new to the slots again; idle a moment, its last answer counts.
        if e.held == 0 && e.forgettable(now) {
            *e = Entry::new(now);
        }
        e.held += 1;
        e.unfinished += 1;
    }

    /// One of its deliveries ended; `timed_out` when the destination never answered in time.
    pub(super) fn ended(&mut self, integration: &str, timed_out: bool, now: Instant) {
        self.sweep(now);
        let Some(e) = self.by.get_mut(integration) else {
            return;
        };
        let before = slot_kept_for(e);
        self.total = self.total.saturating_sub(1);
        e.held = e.held.saturating_sub(1);
        e.last_end = Some(now);
        if timed_out {
            e.stuck_since.get_or_insert(now);
        } else {
            e.stuck_since = None;
            e.reported = false;
        }
        match (before, slot_kept_for(e)) {
            (false, true) => self.idle += 1,
            (true, false) => self.idle -= 1,
            _ => {}
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
        self.idle = self.by.values().filter(|e| slot_kept_for(e)).count();
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
#[path = "fair_tests.rs"]
mod tests;
