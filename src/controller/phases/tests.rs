//! The phase rules at fixed instants: each edge (exactly at retireAt, rollback, a key dropped
//! from status, sub-second clocks) pinned by one exact string.

use super::*;
use crate::crd::SecretKeyRef;

const DAY: Duration = Duration::from_secs(24 * 3600);
const NONE: &[KeyStatus] = &[];

/// `t("12-03T00:00:00")` is 2026-12-03T00:00:00Z; the year never matters here.
fn t(s: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(&format!("2026-{s}Z"))
        .unwrap()
        .to_utc()
}

fn key(id: &str, retire_at: Option<&str>) -> KeySpec {
    let secret_ref = SecretKeyRef {
        name: "s".into(),
        key: id.into(),
    };
    KeySpec {
        id: id.into(),
        secret_ref,
        retire_at: retire_at.map(t),
    }
}

/// `keys("a,b")`: keys without an explicit retireAt, oldest first.
fn keys(ids: &str) -> Vec<KeySpec> {
    ids.split(',').map(|id| key(id, None)).collect()
}

/// One day of overlap, retired keys listed for a week, no usage.
fn plan(spec: &[KeySpec], prev: &[KeyStatus], now: &str) -> KeysPlan {
    plan_keys(spec, prev, &HashMap::new(), DAY, 7 * DAY, t(now))
}

/// Every key as `id:Phase@retire_at`, so one exact string pins all phases and times.
fn show(p: &KeysPlan) -> String {
    let key = |k: &KeyPlan| match k.retire_at {
        Some(r) => format!("{}:{:?}@{}", k.id, k.phase, r.format("%m-%dT%H:%M:%S")),
        None => format!("{}:{:?}", k.id, k.phase),
    };
    p.keys.iter().map(key).collect::<Vec<_>>().join(" ")
}

/// Phase changes as `id:From>To`, `new` for a key not in the previous status.
fn moves(p: &KeysPlan) -> String {
    let from = |c: &PhaseChange| c.from.map_or("new".into(), |f| format!("{f:?}"));
    let change = |c: &PhaseChange| format!("{}:{}>{:?}", c.id, from(c), c.to);
    p.changes.iter().map(change).collect::<Vec<_>>().join(" ")
}

fn listed(p: &KeysPlan) -> Vec<&str> {
    p.status.iter().map(|s| s.id.as_str()).collect()
}

fn next(p: &KeysPlan) -> Option<DateTime<Utc>> {
    p.next_transition
}

/// `a` alone on 12-01, `b` added on 12-02, so `a` retires on 12-03.
fn rotated() -> KeysPlan {
    let first = plan(&keys("a"), NONE, "12-01T00:00:00");
    plan(&keys("a,b"), &first.status, "12-02T00:00:00")
}

#[test]
fn first_apply_of_one_key_is_active_forever() {
    let p = plan(&keys("a"), NONE, "12-01T00:00:00");
    assert_eq!(show(&p), "a:Active");
    assert_eq!(moves(&p), "a:new>Active");
    assert_eq!(p.active.as_deref(), Some("a"));
    assert_eq!(next(&p), None);
    let since = Some("2026-12-01T00:00:00Z".into());
    let want = KeyStatus {
        id: "a".into(),
        phase: "Active".into(),
        since,
        ..Default::default()
    };
    assert_eq!(p.status, [want]);
}

#[test]
fn adding_a_key_starts_the_overlap_of_the_old_one() {
    let p = rotated();
    assert_eq!(show(&p), "a:Retiring@12-03T00:00:00 b:Active");
    assert_eq!(moves(&p), "a:Active>Retiring b:new>Active");
    assert_eq!(p.keys[0].since, t("12-02T00:00:00"));
    assert_eq!(p.active.as_deref(), Some("b"));
    assert_eq!(next(&p), Some(t("12-03T00:00:00")));
    let retire_at = p.status[0].retire_at.as_deref();
    assert_eq!(retire_at, Some("2026-12-03T00:00:00Z"));
}

#[test]
fn reconciling_later_carries_since_and_retire_time_over() {
    let before = rotated();
    let p = plan(&keys("a,b"), &before.status, "12-02T01:00:00");
    assert_eq!((&p.keys, &p.status), (&before.keys, &before.status));
    assert_eq!(moves(&p), "");
}

#[test]
fn retires_exactly_at_retire_time_then_drops_after_keep_retired() {
    let spec = keys("a,b");
    let almost = plan(&spec, &rotated().status, "12-02T23:59:59");
    assert_eq!(show(&almost), "a:Retiring@12-03T00:00:00 b:Active");
    assert_eq!(next(&almost), Some(t("12-03T00:00:00")));

    let at = plan(&spec, &almost.status, "12-03T00:00:00");
    assert_eq!(show(&at), "a:Retired@12-03T00:00:00 b:Active");
    assert_eq!(moves(&at), "a:Retiring>Retired");
    assert_eq!(next(&at), Some(t("12-10T00:00:00")));

    let kept = plan(&spec, &at.status, "12-09T23:59:59");
    assert_eq!(listed(&kept), ["a", "b"]);
    let gone = plan(&spec, &kept.status, "12-10T00:00:00");
    assert_eq!(show(&gone), "a:Retired@12-03T00:00:00 b:Active");
    assert_eq!(listed(&gone), ["b"]);
    assert_eq!(moves(&gone), "");
    assert_eq!(next(&gone), None);

    // Gone from status must not read as a brand-new key: that would restart its overlap.
    let later = plan(&spec, &gone.status, "12-20T00:00:00");
    assert_eq!(later.keys[0].phase, Phase::Retired);
    assert!(later.keys[0].retire_at.unwrap() <= t("12-20T00:00:00"));
    assert_eq!(listed(&later), ["b"]);
    assert_eq!(moves(&later), "");
    assert_eq!(next(&later), None);
}

#[test]
fn explicit_retire_at_beats_overlap_both_ways() {
    let first = plan(&keys("a"), NONE, "12-01T00:00:00");
    for explicit in ["12-02T02:00:00", "12-05T00:00:00"] {
        let spec = [key("a", Some(explicit)), key("b", None)];
        let p = plan(&spec, &first.status, "12-02T00:00:00");
        assert_eq!(show(&p), format!("a:Retiring@{explicit} b:Active"));
        assert_eq!(next(&p), Some(t(explicit)));
    }
}

#[test]
fn explicit_retire_at_on_the_only_key() {
    let spec = [key("a", Some("12-05T00:00:00"))];
    let p = plan(&spec, NONE, "12-01T00:00:00");
    assert_eq!(show(&p), "a:Active@12-05T00:00:00");
    assert_eq!(next(&p), Some(t("12-05T00:00:00")));
    let p = plan(&spec, &p.status, "12-05T00:00:00");
    assert_eq!(show(&p), "a:Retired@12-05T00:00:00");
    assert_eq!(moves(&p), "a:Active>Retired");
    assert_eq!(p.active, None);
    assert_eq!(next(&p), Some(t("12-12T00:00:00")));
}

#[test]
fn removing_the_new_key_rolls_back_to_the_old_one() {
    let p = plan(&keys("a"), &rotated().status, "12-02T01:00:00");
    assert_eq!(show(&p), "a:Active");
    assert_eq!(moves(&p), "a:Retiring>Active");
    assert_eq!(p.keys[0].since, t("12-02T01:00:00"));
    assert_eq!(listed(&p), ["a"]);
    assert_eq!(next(&p), None);

    // Retiring the new key instead rolls back the same way.
    let spec = [key("a", None), key("b", Some("12-02T00:30:00"))];
    let p = plan(&spec, &rotated().status, "12-02T01:00:00");
    assert_eq!(show(&p), "a:Active b:Retired@12-02T00:30:00");
    assert_eq!(moves(&p), "a:Retiring>Active b:Active>Retired");
}

#[test]
fn rollback_cannot_revive_an_implicitly_retired_key() {
    let retired = plan(&keys("a,b"), &rotated().status, "12-03T00:00:00");
    let p = plan(&keys("a"), &retired.status, "12-03T01:00:00");
    assert_eq!(show(&p), "a:Retired@12-03T00:00:00");
    assert_eq!(moves(&p), "");
    assert_eq!(p.active, None);
}

#[test]
fn later_explicit_retire_at_extends_or_revives() {
    let spec = [key("a", Some("12-06T00:00:00")), key("b", None)];
    let p = plan(&spec, &rotated().status, "12-02T01:00:00");
    assert_eq!(show(&p), "a:Retiring@12-06T00:00:00 b:Active");
    assert_eq!(moves(&p), "");
    assert_eq!(p.keys[0].since, t("12-02T00:00:00"));

    let retired = plan(&keys("a,b"), &rotated().status, "12-03T00:00:00");
    let p = plan(&spec, &retired.status, "12-03T01:00:00");
    assert_eq!(show(&p), "a:Retiring@12-06T00:00:00 b:Active");
    assert_eq!(moves(&p), "a:Retired>Retiring");
}

#[test]
fn several_keys_at_once_only_the_newest_is_active() {
    let p = plan(&keys("a,b,c"), NONE, "12-01T00:00:00");
    let want = "a:Retiring@12-02T00:00:00 b:Retiring@12-02T00:00:00 c:Active";
    assert_eq!(show(&p), want);
    assert_eq!(p.active.as_deref(), Some("c"));
}

#[test]
fn a_newer_key_already_past_its_retire_at_does_not_supersede() {
    let spec = [key("a", None), key("b", Some("11-01T00:00:00"))];
    let p = plan(&spec, NONE, "12-01T00:00:00");
    assert_eq!(show(&p), "a:Active b:Retired@11-01T00:00:00");
    // Retired a month ago with a week's keep: never listed, so no event for it either.
    assert_eq!(listed(&p), ["a"]);
    assert_eq!(moves(&p), "a:new>Active");
}

#[test]
fn last_used_is_copied_and_recent_use_of_a_retiring_key_is_flagged() {
    let spec = keys("a,b,c");
    let used = [("a", "11:30"), ("b", "10:00"), ("c", "11:59")];
    let used = used.map(|(id, at)| (id.to_string(), t(&format!("12-01T{at}:00"))));
    let p = plan_keys(&spec, NONE, &used.into(), DAY, DAY, t("12-01T12:00:00"));
    assert_eq!(p.retiring_in_use, ["a"]);
    let a_used = p.status[0].last_used_at.as_deref();
    assert_eq!(a_used, Some("2026-12-01T11:30:00Z"));
    assert_eq!(p.keys[2].last_used_at, Some(t("12-01T11:59:00")));
    assert_eq!(next(&p), Some(t("12-01T12:30:00")));
    // An inbox that restarted and forgot the use must not erase it from status.
    let p = plan(&spec, &p.status, "12-01T12:30:00");
    assert_eq!(p.retiring_in_use, Vec::<String>::new());
    assert_eq!(p.keys[0].last_used_at, Some(t("12-01T11:30:00")));
}

#[test]
fn keys_removed_from_the_spec_leave_the_status() {
    let all = keys("a,b,c");
    let p = plan(&all, NONE, "12-01T00:00:00");
    let p = plan(&all[1..], &p.status, "12-01T01:00:00");
    assert_eq!(show(&p), "b:Retiring@12-02T00:00:00 c:Active");
    assert_eq!(listed(&p), ["b", "c"]);
    assert_eq!(moves(&p), "");
}

#[test]
fn feeding_the_status_back_at_the_same_instant_is_idempotent() {
    // Sub-second instants everywhere, since status keeps only whole seconds.
    let overlap = Duration::from_millis(90_000_700);
    let run = |spec: &[KeySpec], prev: &[KeyStatus], now: &str| {
        plan_keys(spec, prev, &HashMap::new(), overlap, DAY, t(now))
    };
    let explicit = [key("a", None), key("b", Some("12-03T00:00:00.250"))];
    let start = run(&keys("a,b"), NONE, "12-01T00:00:00.600");
    let cases = [
        (&explicit[..], NONE, "12-01T00:00:00.600"),
        (&explicit[..], NONE, "12-03T00:00:00.600"),
        (&keys("a,b")[..], &start.status[..], "12-02T02:00:00.600"),
    ];
    for (spec, prev, now) in cases {
        let mut once = run(spec, prev, now);
        once.changes.clear();
        assert_eq!(once, run(spec, &once.status, now), "at {now}");
    }
}

#[test]
fn unparseable_previous_values_are_treated_as_absent() {
    let junk = |id: &str, phase: &str| KeyStatus {
        id: id.into(),
        phase: phase.into(),
        since: Some("yesterday".into()),
        retire_at: Some("soon".into()),
        last_used_at: Some(String::new()),
    };
    let spec = keys("a,b");
    let prev = [junk("a", "Retiring"), junk("b", "Bogus")];
    let p = plan(&spec, &prev, "12-01T00:00:00");
    assert_eq!(show(&p), "a:Retiring@12-02T00:00:00 b:Active");
    assert_eq!(moves(&p), "b:new>Active");
    assert_eq!(p.keys[0].since, t("12-01T00:00:00"));
    assert_eq!(p.keys[0].last_used_at, None);
    let again = plan(&spec, &p.status, "12-01T01:00:00");
    assert_eq!((moves(&again), again.keys), (String::new(), p.keys));
}
