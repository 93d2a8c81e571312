//! Staged key rotation as a pure function: spec keys, the previous status and a clock reading go
//! in; phases, the next status and the requeue instant come out. Keeping the clock and I/O outside
//! lets every edge (exactly at retireAt, rollback, restarts) be tested with fixed instants.

use std::collections::HashMap;
use std::time::Duration;

use chrono::{DateTime, SecondsFormat, SubsecRound, TimeDelta, Utc};

use crate::crd::{KeySpec, KeyStatus};

/// A Retiring key used this recently still has senders that have not switched to the new key.
const IN_USE_WINDOW: TimeDelta = TimeDelta::hours(1);

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Phase {
    Active,
    Retiring,
    Retired,
}

impl Phase {
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Active => "Active",
            Phase::Retiring => "Retiring",
            Phase::Retired => "Retired",
        }
    }

    pub fn parse(s: &str) -> Option<Phase> {
        [Phase::Active, Phase::Retiring, Phase::Retired]
            .into_iter()
            .find(|p| p.as_str() == s)
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct KeyPlan {
    pub id: String,
    pub phase: Phase,
    pub since: DateTime<Utc>,
    pub retire_at: Option<DateTime<Utc>>,
    pub last_used_at: Option<DateTime<Utc>>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct PhaseChange {
    pub id: String,
    pub from: Option<Phase>,
    pub to: Phase,
}

#[derive(Debug, Clone, PartialEq)]
pub struct KeysPlan {
    /// Every spec key in spec order with its phase and effective retire time (the receiver's not-after), INCLUDING retired ones.
    pub keys: Vec<KeyPlan>,
    /// What goes into status.keys: `keys` minus retired keys older than keep_retired.
    pub status: Vec<KeyStatus>,
    pub active: Option<String>,
    pub retiring_in_use: Vec<String>,
    pub next_transition: Option<DateTime<Utc>>,
    pub changes: Vec<PhaseChange>,
}

/// The previous status entry with its strings parsed; anything unparseable counts as absent.
struct Prev {
    phase: Option<Phase>,
    since: Option<DateTime<Utc>>,
    retire_at: Option<DateTime<Utc>>,
    last_used_at: Option<DateTime<Utc>>,
}

fn parse_time(s: Option<&String>) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(s?)
        .ok()
        .map(|t| t.with_timezone(&Utc))
}

fn format_time(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Secs, true)
}

/// Saturates instead of panicking: an absurd overlap from config must not crash the controller.
fn add(t: DateTime<Utc>, d: Duration) -> DateTime<Utc> {
    TimeDelta::from_std(d)
        .ok()
        .and_then(|d| t.checked_add_signed(d))
        .unwrap_or(DateTime::<Utc>::MAX_UTC)
}

pub fn plan_keys(
    spec_keys: &[KeySpec],
    previous: &[KeyStatus],
    last_used: &HashMap<String, DateTime<Utc>>,
    overlap: Duration,
    keep_retired: Duration,
    now: DateTime<Utc>,
) -> KeysPlan {
    let mut prev: HashMap<&str, Prev> = HashMap::new();
    for s in previous {
        prev.entry(s.id.as_str()).or_insert_with(|| Prev {
            phase: Phase::parse(&s.phase),
            since: parse_time(s.since.as_ref()),
            retire_at: parse_time(s.retire_at.as_ref()),
            last_used_at: parse_time(s.last_used_at.as_ref()),
        });
    }
    // Status keeps whole seconds; recording whole seconds from the start makes the next
    // reconcile, which reads them back, compute exactly the same instants.
    let stamp = now.trunc_subsecs(0);
    // Keys are appended newest-last, so an unrecorded key older than a recorded one is not new:
    // it was dropped from status after keep_retired. Treating it as new would restart its overlap
    // and let the receiver accept a retired key again.
    let last_recorded = spec_keys
        .iter()
        .rposition(|k| prev.contains_key(k.id.as_str()));

    let mut keys = Vec::with_capacity(spec_keys.len());
    let mut newer_usable = false;
    // Newest first: whether a key is superseded depends only on the keys after it.
    for (i, spec) in spec_keys.iter().enumerate().rev() {
        let p = prev.get(spec.id.as_str());
        let prev_phase = p.and_then(|p| p.phase);
        let retire_at = if let Some(explicit) = spec.retire_at {
            Some(explicit)
        } else if let Some(p) = p.filter(|_| prev_phase == Some(Phase::Retired)) {
            // Retirement is sticky without an explicit retireAt, so a rollback cannot revive it.
            Some(p.retire_at.or(p.since).map_or(stamp, |t| t.min(stamp)))
        } else if p.is_none() && last_recorded.is_some_and(|r| i < r) {
            // Real retire time forgotten; any past instant rejects it, a fixed one keeps it stable.
            Some(DateTime::UNIX_EPOCH)
        } else if newer_usable {
            let superseded_at = p
                .filter(|_| prev_phase == Some(Phase::Retiring))
                .and_then(|p| p.since)
                .unwrap_or(stamp);
            Some(add(superseded_at, overlap).trunc_subsecs(0))
        } else {
            None
        };
        let phase = match retire_at {
            Some(t) if now >= t => Phase::Retired,
            _ if newer_usable => Phase::Retiring,
            _ => Phase::Active,
        };
        newer_usable |= phase != Phase::Retired;
        let since = p
            .filter(|_| prev_phase == Some(phase))
            .and_then(|p| p.since)
            .unwrap_or(stamp);
        // The inbox may have restarted and forgotten a use the status still remembers.
        let last_used_at = last_used
            .get(&spec.id)
            .copied()
            .max(p.and_then(|p| p.last_used_at));
        keys.push(KeyPlan {
            id: spec.id.clone(),
            phase,
            since,
            retire_at,
            last_used_at,
        });
    }
    keys.reverse();

    let drop_at = |k: &KeyPlan| match (k.phase, k.retire_at) {
        (Phase::Retired, Some(t)) => Some(add(t, keep_retired)),
        _ => None,
    };
    // Strictly within the window, so the flag clears exactly at last_used + 1h and that instant
    // can be scheduled.
    let in_use_until = |k: &KeyPlan| match (k.phase, k.last_used_at) {
        (Phase::Retiring, Some(t)) => Some(t + IN_USE_WINDOW).filter(|&u| u > now),
        _ => None,
    };

    let mut plan = KeysPlan {
        keys: Vec::new(),
        status: Vec::new(),
        active: None,
        retiring_in_use: Vec::new(),
        next_transition: None,
        changes: Vec::new(),
    };
    for k in &keys {
        let listed = drop_at(k).is_none_or(|d| now < d);
        if listed {
            plan.status.push(KeyStatus {
                id: k.id.clone(),
                phase: k.phase.as_str().to_string(),
                since: Some(format_time(k.since)),
                retire_at: k.retire_at.map(format_time),
                last_used_at: k.last_used_at.map(format_time),
            });
        }
        let from = prev.get(k.id.as_str()).and_then(|p| p.phase);
        // A key in neither the old nor the new status changed nothing anyone can see; reporting
        // it would repeat the same event on every reconcile.
        if from != Some(k.phase) && (listed || prev.contains_key(k.id.as_str())) {
            plan.changes.push(PhaseChange {
                id: k.id.clone(),
                from,
                to: k.phase,
            });
        }
        if k.phase == Phase::Active {
            plan.active = Some(k.id.clone());
        }
        if in_use_until(k).is_some() {
            plan.retiring_in_use.push(k.id.clone());
        }
        plan.next_transition = [k.retire_at, drop_at(k), in_use_until(k)]
            .into_iter()
            .flatten()
            .filter(|&t| t > now)
            .chain(plan.next_transition)
            .min();
    }
    plan.keys = keys;
    plan
}

#[cfg(test)]
mod tests {
    use super::Phase::{Active, Retired, Retiring};
    use super::*;
    use crate::crd::SecretKeyRef;

    const OVERLAP: Duration = Duration::from_secs(24 * 3600);
    const KEEP: Duration = Duration::from_secs(7 * 24 * 3600);

    fn t(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().to_utc()
    }

    fn key(id: &str, retire_at: Option<&str>) -> KeySpec {
        KeySpec {
            id: id.into(),
            secret_ref: SecretKeyRef {
                name: "s".into(),
                key: id.into(),
            },
            retire_at: retire_at.map(t),
        }
    }

    fn plan(spec: &[KeySpec], prev: &[KeyStatus], now: &str) -> KeysPlan {
        plan_keys(spec, prev, &HashMap::new(), OVERLAP, KEEP, t(now))
    }

    fn phases(p: &KeysPlan) -> Vec<(&str, Phase, Option<DateTime<Utc>>)> {
        p.keys
            .iter()
            .map(|k| (k.id.as_str(), k.phase, k.retire_at))
            .collect()
    }

    fn change(id: &str, from: Option<Phase>, to: Phase) -> PhaseChange {
        PhaseChange {
            id: id.into(),
            from,
            to,
        }
    }

    fn ids(status: &[KeyStatus]) -> Vec<&str> {
        status.iter().map(|s| s.id.as_str()).collect()
    }

    /// `a` alone at 2026-12-01, then `b` added a day later: `a` retires at 2026-12-03.
    fn rotated() -> KeysPlan {
        let first = plan(&[key("a", None)], &[], "2026-12-01T00:00:00Z");
        plan(
            &[key("a", None), key("b", None)],
            &first.status,
            "2026-12-02T00:00:00Z",
        )
    }

    #[test]
    fn first_apply_of_one_key_is_active_forever() {
        let p = plan(&[key("a", None)], &[], "2026-12-01T00:00:00Z");
        assert_eq!(phases(&p), [("a", Active, None)]);
        assert_eq!(p.active.as_deref(), Some("a"));
        assert_eq!(p.next_transition, None);
        assert_eq!(p.changes, [change("a", None, Active)]);
        assert_eq!(
            p.status,
            [KeyStatus {
                id: "a".into(),
                phase: "Active".into(),
                since: Some("2026-12-01T00:00:00Z".into()),
                ..Default::default()
            }]
        );
    }

    #[test]
    fn adding_a_key_starts_the_overlap_of_the_old_one() {
        let p = rotated();
        let retire = t("2026-12-03T00:00:00Z");
        assert_eq!(
            phases(&p),
            [("a", Retiring, Some(retire)), ("b", Active, None)]
        );
        assert_eq!(p.keys[0].since, t("2026-12-02T00:00:00Z"));
        assert_eq!(p.active.as_deref(), Some("b"));
        assert_eq!(p.next_transition, Some(retire));
        assert_eq!(
            p.changes,
            [
                change("a", Some(Active), Retiring),
                change("b", None, Active)
            ]
        );
        assert_eq!(
            p.status[0].retire_at.as_deref(),
            Some("2026-12-03T00:00:00Z")
        );
    }

    #[test]
    fn reconciling_later_carries_since_and_retire_time_over() {
        let before = rotated();
        let spec = [key("a", None), key("b", None)];
        let p = plan(&spec, &before.status, "2026-12-02T01:00:00Z");
        assert_eq!(p.keys, before.keys);
        assert_eq!(p.status, before.status);
        assert_eq!(p.changes, []);
    }

    #[test]
    fn retires_exactly_at_retire_time_then_drops_after_keep_retired() {
        let spec = [key("a", None), key("b", None)];
        let retire = t("2026-12-03T00:00:00Z");
        let almost = plan(&spec, &rotated().status, "2026-12-02T23:59:59Z");
        assert_eq!(almost.keys[0].phase, Retiring);
        assert_eq!(almost.next_transition, Some(retire));

        let at = plan(&spec, &almost.status, "2026-12-03T00:00:00Z");
        assert_eq!(
            phases(&at),
            [("a", Retired, Some(retire)), ("b", Active, None)]
        );
        assert_eq!(at.changes, [change("a", Some(Retiring), Retired)]);
        assert_eq!(at.next_transition, Some(t("2026-12-10T00:00:00Z")));

        let kept = plan(&spec, &at.status, "2026-12-09T23:59:59Z");
        assert_eq!(ids(&kept.status), ["a", "b"]);
        let gone = plan(&spec, &kept.status, "2026-12-10T00:00:00Z");
        assert_eq!(ids(&gone.status), ["b"]);
        assert_eq!(phases(&gone), phases(&at));
        assert_eq!((gone.next_transition, gone.changes), (None, vec![]));

        // Dropped from status must not read as a brand-new key: that would restart its overlap.
        let later = plan(&spec, &gone.status, "2026-12-20T00:00:00Z");
        assert_eq!(later.keys[0].phase, Retired);
        assert!(later.keys[0].retire_at.unwrap() <= t("2026-12-20T00:00:00Z"));
        assert_eq!(ids(&later.status), ["b"]);
        assert_eq!((later.next_transition, later.changes), (None, vec![]));
    }

    #[test]
    fn explicit_retire_at_beats_overlap_both_ways() {
        let first = plan(&[key("a", None)], &[], "2026-12-01T00:00:00Z");
        for explicit in ["2026-12-02T02:00:00Z", "2026-12-05T00:00:00Z"] {
            let spec = [key("a", Some(explicit)), key("b", None)];
            let p = plan(&spec, &first.status, "2026-12-02T00:00:00Z");
            assert_eq!(p.keys[0].phase, Retiring);
            assert_eq!(p.keys[0].retire_at, Some(t(explicit)));
            assert_eq!(p.next_transition, Some(t(explicit)));
        }
    }

    #[test]
    fn explicit_retire_at_on_the_only_key() {
        let spec = [key("a", Some("2026-12-05T00:00:00Z"))];
        let p = plan(&spec, &[], "2026-12-01T00:00:00Z");
        assert_eq!(phases(&p), [("a", Active, Some(t("2026-12-05T00:00:00Z")))]);
        assert_eq!(p.next_transition, Some(t("2026-12-05T00:00:00Z")));
        let p = plan(&spec, &p.status, "2026-12-05T00:00:00Z");
        assert_eq!(p.keys[0].phase, Retired);
        assert_eq!(p.active, None);
        assert_eq!(p.changes, [change("a", Some(Active), Retired)]);
        assert_eq!(p.next_transition, Some(t("2026-12-12T00:00:00Z")));
    }

    #[test]
    fn removing_the_new_key_rolls_back_to_the_old_one() {
        let p = plan(&[key("a", None)], &rotated().status, "2026-12-02T01:00:00Z");
        assert_eq!(phases(&p), [("a", Active, None)]);
        assert_eq!(p.keys[0].since, t("2026-12-02T01:00:00Z"));
        assert_eq!(ids(&p.status), ["a"]);
        assert_eq!(p.changes, [change("a", Some(Retiring), Active)]);
        assert_eq!(p.next_transition, None);
    }

    #[test]
    fn rollback_cannot_revive_an_implicitly_retired_key() {
        let spec = [key("a", None), key("b", None)];
        let retired = plan(&spec, &rotated().status, "2026-12-03T00:00:00Z");
        let p = plan(&[key("a", None)], &retired.status, "2026-12-03T01:00:00Z");
        assert_eq!(
            phases(&p),
            [("a", Retired, Some(t("2026-12-03T00:00:00Z")))]
        );
        assert_eq!(p.active, None);
        assert_eq!(p.changes, []);
    }

    #[test]
    fn later_explicit_retire_at_extends_or_revives() {
        let spec = [key("a", Some("2026-12-06T00:00:00Z")), key("b", None)];
        let p = plan(&spec, &rotated().status, "2026-12-02T01:00:00Z");
        assert_eq!(p.keys[0].phase, Retiring);
        assert_eq!(p.keys[0].retire_at, Some(t("2026-12-06T00:00:00Z")));
        assert_eq!(p.keys[0].since, t("2026-12-02T00:00:00Z"));
        assert_eq!(p.changes, []);

        let implicit = [key("a", None), key("b", None)];
        let retired = plan(&implicit, &rotated().status, "2026-12-03T00:00:00Z");
        let p = plan(&spec, &retired.status, "2026-12-03T01:00:00Z");
        assert_eq!(p.keys[0].phase, Retiring);
        assert_eq!(p.changes, [change("a", Some(Retired), Retiring)]);
    }

    #[test]
    fn several_keys_at_once_only_the_newest_is_active() {
        let spec = [key("a", None), key("b", None), key("c", None)];
        let p = plan(&spec, &[], "2026-12-01T00:00:00Z");
        let retire = Some(t("2026-12-02T00:00:00Z"));
        assert_eq!(
            phases(&p),
            [
                ("a", Retiring, retire),
                ("b", Retiring, retire),
                ("c", Active, None)
            ]
        );
        assert_eq!(p.active.as_deref(), Some("c"));
    }

    #[test]
    fn a_newer_key_already_past_its_retire_at_does_not_supersede() {
        let spec = [key("a", None), key("b", Some("2026-11-01T00:00:00Z"))];
        let p = plan(&spec, &[], "2026-12-01T00:00:00Z");
        assert_eq!(
            phases(&p),
            [
                ("a", Active, None),
                ("b", Retired, Some(t("2026-11-01T00:00:00Z")))
            ]
        );
        // Retired 30 days ago with a 7-day keep: never shown, so no event either.
        assert_eq!(ids(&p.status), ["a"]);
        assert_eq!(p.changes, [change("a", None, Active)]);
    }

    #[test]
    fn last_used_is_copied_and_recent_use_of_a_retiring_key_is_flagged() {
        let spec = [key("a", None), key("b", None), key("c", None)];
        let now = t("2026-12-01T12:00:00Z");
        let used: HashMap<_, _> = [
            ("a".to_string(), t("2026-12-01T11:30:00Z")),
            ("b".to_string(), t("2026-12-01T10:00:00Z")),
            ("c".to_string(), t("2026-12-01T11:59:00Z")),
        ]
        .into();
        let p = plan_keys(&spec, &[], &used, OVERLAP, KEEP, now);
        assert_eq!(p.retiring_in_use, ["a"]);
        assert_eq!(
            p.status[0].last_used_at.as_deref(),
            Some("2026-12-01T11:30:00Z")
        );
        assert_eq!(p.keys[2].last_used_at, Some(t("2026-12-01T11:59:00Z")));
        assert_eq!(p.next_transition, Some(t("2026-12-01T12:30:00Z")));
        let p = plan_keys(
            &spec,
            &p.status,
            &used,
            OVERLAP,
            KEEP,
            t("2026-12-01T12:30:00Z"),
        );
        assert_eq!(p.retiring_in_use, Vec::<String>::new());
    }

    #[test]
    fn keys_removed_from_the_spec_leave_the_status() {
        let all = [key("a", None), key("b", None), key("c", None)];
        let p = plan(&all, &[], "2026-12-01T00:00:00Z");
        let p = plan(&all[1..], &p.status, "2026-12-01T01:00:00Z");
        assert_eq!(ids(&p.status), ["b", "c"]);
        assert_eq!(p.keys.len(), 2);
        assert_eq!(p.changes, []);
    }

    #[test]
    fn feeding_the_status_back_at_the_same_instant_is_idempotent() {
        let spec = [key("a", None), key("b", Some("2026-12-03T00:00:00.250Z"))];
        let overlap = Duration::from_millis(90_000_700);
        for now in ["2026-12-01T00:00:00.600Z", "2026-12-03T00:00:00.600Z"] {
            let now = t(now);
            let once = plan_keys(&spec, &[], &HashMap::new(), overlap, KEEP, now);
            let twice = plan_keys(&spec, &once.status, &HashMap::new(), overlap, KEEP, now);
            assert_eq!(twice.changes, []);
            assert_eq!(
                KeysPlan {
                    changes: vec![],
                    ..once
                },
                twice,
                "at {now}"
            );
        }
    }

    #[test]
    fn unparseable_previous_values_are_treated_as_absent() {
        let spec = [key("a", None), key("b", None)];
        let junk = |id: &str, phase: &str| KeyStatus {
            id: id.into(),
            phase: phase.into(),
            since: Some("yesterday".into()),
            retire_at: Some("soon".into()),
            last_used_at: Some("".into()),
        };
        let prev = [junk("a", "Retiring"), junk("b", "Bogus")];
        let p = plan(&spec, &prev, "2026-12-01T00:00:00Z");
        let retire = Some(t("2026-12-02T00:00:00Z"));
        assert_eq!(phases(&p), [("a", Retiring, retire), ("b", Active, None)]);
        assert_eq!(p.keys[0].since, t("2026-12-01T00:00:00Z"));
        assert_eq!(p.keys[0].last_used_at, None);
        assert_eq!(p.changes, [change("b", None, Active)]);
        let again = plan(&spec, &p.status, "2026-12-01T01:00:00Z");
        assert_eq!((again.keys, again.changes), (p.keys, vec![]));
    }
}
