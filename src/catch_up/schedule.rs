//! When an integration's pass runs. Each process looks on its own clock (with jitter, so that
//! replicas and integrations spread out); the database record decides whether a pass is due, so
//! that all replicas together run about one pass per interval.

use chrono::{DateTime, Utc};
use std::collections::{HashMap, HashSet};
use std::time::Duration;

/// The share of the interval a pass may come early, which the jitter of [`next_look`] needs.
const SLACK: f64 = 0.1;

/// Whether a pass is due, given when the last one (by any process) ended.
pub fn due(last_run_at: Option<DateTime<Utc>>, interval: Duration, now: DateTime<Utc>) -> bool {
    let Some(last) = last_run_at else {
        return true;
    };
    let early = interval.mul_f64(1.0 - SLACK);
    crate::time::after(last, early) <= now
}

/// When this process looks again after a look at `now`: the interval ±10 %. `u` is uniform in [0, 1).
pub fn next_look(now: DateTime<Utc>, interval: Duration, u: f64) -> DateTime<Utc> {
    let factor = 1.0 - SLACK + 2.0 * SLACK * u.clamp(0.0, 1.0);
    crate::time::after(now, interval.mul_f64(factor))
}

/// The first look after start: within `window` (a minute by default) or the interval, if shorter,
/// so that a restart does not postpone catch-up by a whole interval and replicas started together
/// spread out.
pub fn first_look(
    now: DateTime<Utc>,
    interval: Duration,
    window: Duration,
    u: f64,
) -> DateTime<Utc> {
    let window = interval.min(window);
    crate::time::after(now, window.mul_f64(u.clamp(0.0, 1.0)))
}

/// The look of an integration whose `spec.catchUp.interval` changed from `old` to `new` while it
/// was scheduled for `at`: a shorter interval brings it to a first look's time, so that the record
/// decides at once whether a pass is due under the new interval (a look planned a day ahead would
/// otherwise keep a shortened interval from taking effect for a day); a longer one keeps it, since
/// a look that comes early finds the pass not due.
pub fn rescheduled(
    at: DateTime<Utc>,
    old: Duration,
    new: Duration,
    now: DateTime<Utc>,
    window: Duration,
    u: f64,
) -> DateTime<Utc> {
    if new >= old {
        return at;
    }
    at.min(first_look(now, new, window, u))
}

/// What to do with the due integrations at one look of the loop.
#[derive(Debug, PartialEq, Eq)]
pub struct Due {
    /// Start their passes now.
    pub start: Vec<String>,
    /// Due, with no pass running, but no slot left for them.
    pub waiting: usize,
}

/// The integrations to start a pass for at `now`: those whose look has come and that have no
/// pass running in this process, the longest waiting first (so that when more are due than there
/// are free slots, none is passed over for long), at most `free`.
pub fn to_start(
    looks: &HashMap<String, DateTime<Utc>>,
    running: &HashSet<String>,
    now: DateTime<Utc>,
    free: usize,
) -> Due {
    let mut due: Vec<(&DateTime<Utc>, &String)> = looks
        .iter()
        .filter(|(name, at)| **at <= now && !running.contains(*name))
        .map(|(name, at)| (at, name))
        .collect();
    due.sort();
    let waiting = due.len().saturating_sub(free);
    let start = due
        .into_iter()
        .take(free)
        .map(|(_, name)| name.clone())
        .collect();
    Due { start, waiting }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> DateTime<Utc> {
        s.parse().unwrap()
    }

    #[test]
    fn a_pass_is_due_an_interval_less_the_slack_after_the_last() {
        let ten = Duration::from_secs(600);
        let cases = [
            (None, "2026-12-01T10:00:00Z", true),
            (Some("2026-12-01T10:00:00Z"), "2026-12-01T10:08:59Z", false),
            (Some("2026-12-01T10:00:00Z"), "2026-12-01T10:09:00Z", true),
            (Some("2026-12-01T10:00:00Z"), "2026-12-01T11:00:00Z", true),
            // A clock behind the record's: not due, rather than a burst of passes.
            (Some("2026-12-01T10:00:00Z"), "2026-12-01T09:00:00Z", false),
        ];
        for (last, now, want) in cases {
            assert_eq!(due(last.map(at), ten, at(now)), want, "{last:?} {now}");
        }
    }

    #[test]
    fn looks_are_jittered_within_bounds() {
        let now = at("2026-12-01T10:00:00Z");
        let ten = Duration::from_secs(600);
        assert_eq!(next_look(now, ten, 0.0), at("2026-12-01T10:09:00Z"));
        assert_eq!(next_look(now, ten, 0.5), at("2026-12-01T10:10:00Z"));
        assert_eq!(next_look(now, ten, 1.0), at("2026-12-01T10:11:00Z"));
        let minute = Duration::from_secs(60);
        assert_eq!(
            first_look(now, ten, minute, 0.5),
            at("2026-12-01T10:00:30Z")
        );
        let short = Duration::from_secs(20);
        assert_eq!(
            first_look(now, short, minute, 1.0),
            at("2026-12-01T10:00:20Z")
        );
        assert_eq!(first_look(now, ten, Duration::ZERO, 0.7), now);
    }

    #[test]
    fn a_shortened_interval_brings_a_far_look_in_and_a_lengthened_one_keeps_it() {
        let now = at("2026-12-01T10:00:00Z");
        let (minute, day) = (Duration::from_secs(60), Duration::from_secs(24 * 3600));
        let tomorrow = at("2026-12-02T09:50:00Z");
        let ten = Duration::from_secs(600);
        assert_eq!(
            rescheduled(tomorrow, day, ten, now, minute, 0.5),
            at("2026-12-01T10:00:30Z")
        );
        // Already sooner than a first look would be: kept.
        let soon = at("2026-12-01T10:00:10Z");
        assert_eq!(rescheduled(soon, day, ten, now, minute, 0.5), soon);
        assert_eq!(rescheduled(soon, ten, day, now, minute, 0.5), soon);
        assert_eq!(rescheduled(tomorrow, ten, ten, now, minute, 0.0), tomorrow);
    }

    #[test]
    fn the_longest_waiting_due_integrations_start_first_up_to_the_free_slots() {
        let now = at("2026-12-01T10:00:00Z");
        let looks: HashMap<String, DateTime<Utc>> = [
            ("t/late", "2026-12-01T09:59:58Z"),
            ("t/early", "2026-12-01T09:50:00Z"),
            ("t/running", "2026-12-01T09:40:00Z"),
            ("t/later", "2026-12-01T10:00:01Z"),
            ("t/now", "2026-12-01T10:00:00Z"),
        ]
        .into_iter()
        .map(|(n, t)| (n.to_string(), at(t)))
        .collect();
        let running: HashSet<String> = ["t/running".to_string()].into();
        let due = |start: &[&str], waiting| Due {
            start: start.iter().map(|s| s.to_string()).collect(),
            waiting,
        };
        assert_eq!(
            to_start(&looks, &running, now, 10),
            due(&["t/early", "t/late", "t/now"], 0)
        );
        assert_eq!(
            to_start(&looks, &running, now, 2),
            due(&["t/early", "t/late"], 1)
        );
        assert_eq!(to_start(&looks, &running, now, 0), due(&[], 3));
        // Looks at the same instant start in name order, so a run is repeatable.
        let tied: HashMap<String, DateTime<Utc>> = [("t/b", now), ("t/a", now)]
            .into_iter()
            .map(|(n, t)| (n.to_string(), t))
            .collect();
        assert_eq!(to_start(&tied, &HashSet::new(), now, 1), due(&["t/a"], 1));
    }
}
