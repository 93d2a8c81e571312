//! When to look at an integration again. The controller does not poll: it comes back exactly
//! when something it decided is due (a retire time, a scheduled rotation), or soon after a state
//! that may clear by itself.

use super::Plan;
use chrono::{DateTime, Utc};
use std::time::Duration;

/// Look again at least this often, even with nothing scheduled (drift, missed watch events).
pub const RESYNC: Duration = Duration::from_secs(3600);
/// After a missing Secret: the Secret watch usually triggers sooner.
pub const RETRY_MISSING: Duration = Duration::from_secs(60);
/// After a path conflict: how soon a deleted owner's path passes to the next claimant.
pub const RETRY_CONFLICT: Duration = Duration::from_secs(15);
/// How often status traffic figures (pending, deadLetters, ...) are refreshed at most.
pub const TRAFFIC_REFRESH: Duration = Duration::from_secs(30);
/// The soonest anything is looked at again: ids and status times have whole seconds.
pub const NEXT_SECOND: Duration = Duration::from_secs(1);

/// Until the next phase transition, within [1 s, RESYNC]; RESYNC with none scheduled.
pub fn at_transition(next: Option<DateTime<Utc>>, now: DateTime<Utc>) -> Duration {
    next.and_then(|t| (t - now).to_std().ok())
        .map_or(RESYNC, |d| d.clamp(NEXT_SECOND, RESYNC))
}

/// Comes back by `at` as well: at least a second from now, and never later than already planned.
/// An instant already past changes nothing; whatever made it due acts on this reconcile.
pub fn by(plan: &mut Plan, at: DateTime<Utc>, now: DateTime<Utc>) {
    if let Ok(wait) = (at - now).to_std() {
        within(plan, wait.max(NEXT_SECOND));
    }
}

/// Comes back within `wait`, or sooner if already planned.
pub fn within(plan: &mut Plan, wait: Duration) {
    plan.requeue_after = plan.requeue_after.min(wait);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> DateTime<Utc> {
        format!("2026-12-01T{s}Z").parse().unwrap()
    }

    fn plan(requeue_after: Duration) -> Plan {
        Plan {
            status: Default::default(),
            manifests: None,
            remove_route: false,
            retired: Vec::new(),
            notes: Vec::new(),
            requeue_after,
        }
    }

    #[test]
    fn the_next_transition_sets_the_requeue_within_bounds() {
        let now = at("10:00:00");
        let cases = [
            (None, RESYNC),
            (Some(at("10:00:30")), Duration::from_secs(30)),
            (Some(at("10:00:00.200")), NEXT_SECOND),
            (Some(at("10:00:00")), NEXT_SECOND),
            (Some(at("09:00:00")), RESYNC),
            (Some(at("23:00:00")), RESYNC),
        ];
        for (next, want) in cases {
            assert_eq!(at_transition(next, now), want, "{next:?}");
        }
    }

    #[test]
    fn a_due_instant_only_brings_the_requeue_forward() {
        let now = at("10:00:00");
        let secs = Duration::from_secs;
        let cases = [
            (secs(60), at("10:00:30"), secs(30)),
            (secs(60), at("10:05:00"), secs(60)),
            (secs(60), at("10:00:00.300"), NEXT_SECOND),
            (secs(60), at("10:00:00"), NEXT_SECOND),
            (secs(60), at("09:59:59"), secs(60)),
        ];
        for (planned, due, want) in cases {
            let mut p = plan(planned);
            by(&mut p, due, now);
            assert_eq!(p.requeue_after, want, "{due}");
        }
        let mut p = plan(secs(60));
        within(&mut p, TRAFFIC_REFRESH);
        within(&mut p, RESYNC);
        assert_eq!(p.requeue_after, TRAFFIC_REFRESH);
    }
}
