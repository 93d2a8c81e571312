//! `worker::fair`'s rules, one scenario each, on a clock the tests move by hand.

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

/// Each of `integrations` had one delivery answered and its outcome written at `at`.
fn delivered(f: &mut Fair, integrations: &[&str], at: Instant) {
    for name in integrations {
        f.started(name, at);
        f.ended(name, false, at);
        f.finished(name);
    }
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

/// `b` delivers a trickle: a slot for a moment, then none. `a`'s backlog, which answers,
/// takes all but the last slot while `b`'s last delivery ended a moment ago.
#[test]
fn the_last_slot_is_kept_for_an_integration_that_holds_none_and_delivered_a_moment_ago() {
    let t = Instant::now();
    let mut f = Fair::new(8);
    delivered(&mut f, &["a", "b"], t);
    assert_eq!(fill(&mut f, "a", t + MS, 8), 7, "the eighth is kept for b");
    assert_eq!(f.turn("b", t + MS), Turn::Start);
    delivered(&mut f, &["b"], t + MS);
    assert_eq!(f.turn("a", t + 2 * MS), Turn::Wait, "b holds none again");
    f.ended("a", false, t + STALL + 2 * MS);
    assert_eq!(
        fill(&mut f, "a", t + STALL + 2 * MS, 2),
        2,
        "b idle for a second is forgotten: a takes every slot"
    );
}

#[test]
fn no_slot_is_kept_for_integrations_that_hold_slots_or_are_stuck_or_in_a_small_pool() {
    let t = Instant::now();
    let mut f = Fair::new(8);
    delivered(&mut f, &["a", "b"], t);
    f.started("b", t);
    assert_eq!(fill(&mut f, "a", t, 7), 7, "b holds one: all eight in use");
    let mut f = Fair::new(8);
    delivered(&mut f, &["a"], t);
    stuck(&mut f, "b", t, 1);
    assert_eq!(
        fill(&mut f, "a", t, 8),
        8,
        "b is stuck: nothing kept for it"
    );
    assert_eq!(f.turn("a", t), Turn::Start);
    let mut f = Fair::new(KEEP_LAST_FROM - 1);
    delivered(&mut f, &["a", "b"], t);
    assert_eq!(
        fill(&mut f, "a", t, KEEP_LAST_FROM - 1),
        KEEP_LAST_FROM - 1,
        "a small pool"
    );
}

#[test]
fn idle_integrations_are_forgotten_a_while_after_their_last_delivery_ended() {
    let t = Instant::now();
    let mut f = Fair::new(8);
    for name in ["a", "b", "c"] {
        f.started(name, t);
    }
    f.ended("a", false, t);
    f.ended("b", true, t);
    f.ended("c", false, t);
    for name in ["a", "b"] {
        f.finished(name);
    }
    assert_eq!(f.by.len(), 3, "all ended a moment ago");
    f.ended("gone", false, t + STALL);
    assert!(!f.by.contains_key("a"), "idle for a second");
    assert!(f.by["b"].stuck_since.is_some(), "b timed out: kept");
    assert_eq!(
        f.unfinished("c"),
        1,
        "c's outcome is still being written: kept"
    );
    assert_eq!(
        (f.by.len(), f.total),
        (2, 0),
        "an end without a start changes nothing"
    );
    f.finished("c");
    f.ended("gone", false, t + FORGET_STUCK);
    assert!(
        f.by.is_empty(),
        "no event of b's for two of its longest deferrals, c's written: gone"
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
