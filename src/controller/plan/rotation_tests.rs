//! The generated-keys rules with fixed instants and a fixed "random" value.

use super::*;
use crate::crd::KeyStatus;
use serde_json::{Value, json};

const NOW: &str = "2026-12-01T00:00:00Z";
const OLD: &str = "g-20261101-000000";
const THIS_SECOND: &str = "g-20261201-000000";

fn now() -> DateTime<Utc> {
    NOW.parse().unwrap()
}

fn wi(rotate: Option<&str>, every: Option<&str>) -> WebhookIntegration {
    let mut wi = json!({
        "apiVersion": "hookgate.dev/v1alpha1", "kind": "WebhookIntegration",
        "metadata": {"name": "stripe", "namespace": "pay", "uid": "u-1"},
        "spec": {"scheme": {"type": "github"}, "keys": [],
                 "rotation": {"generate": true, "every": every},
                 "delivery": {"url": "http://billing:8080/hooks"}}
    });
    if let Some(r) = rotate {
        wi["metadata"]["annotations"] = json!({"hookgate.dev/rotate": r});
    }
    serde_json::from_value(wi).unwrap()
}

fn owner(uid: &str, controller: bool) -> Value {
    json!({"apiVersion": "hookgate.dev/v1alpha1", "kind": "WebhookIntegration",
           "name": "stripe", "uid": uid, "controller": controller})
}

fn secret(owners: Value, ids: &[&str]) -> Secret {
    let data: serde_json::Map<String, Value> = ids
        .iter()
        .map(|id| (id.to_string(), json!("c2VjcmV0")))
        .collect();
    serde_json::from_value(json!({
        "metadata": {"name": "stripe-signing-keys", "namespace": "pay", "ownerReferences": owners,
                     "annotations": {"hookgate.dev/rotate-handled": "t1"}},
        "data": data
    }))
    .unwrap()
}

fn ours(ids: &[&str]) -> Option<Secret> {
    Some(secret(json!([owner("u-1", true)]), ids))
}

/// Every outcome of `generate` in one line; the new key's value is `fresh-<scheme>`.
fn show(k: &Keys) -> String {
    let written = k.write.as_ref().map(|s| {
        let ids: Vec<&String> = s.data.as_ref().unwrap().keys().collect();
        format!(" write={ids:?}")
    });
    let note = k.note.as_ref().map(|n| format!(" note={:?}", n.note));
    format!(
        "ids={:?} handled={:?}{}{}{}{}",
        k.owned.ids,
        k.owned.handled,
        written.unwrap_or_default(),
        note.unwrap_or_default(),
        if k.deferred { " deferred" } else { "" },
        k.foreign
            .as_ref()
            .map(|f| format!(" foreign={f}"))
            .unwrap_or_default(),
    )
}

#[test]
fn a_key_is_added_when_due_and_never_to_a_secret_we_do_not_own() {
    let made = |why: &str| {
        format!("generated key {THIS_SECOND} in Secret pay/stripe-signing-keys ({why})")
    };
    let both = format!("[{OLD:?}, {THIS_SECOND:?}]");
    let cases = [
        (
            wi(None, None),
            None,
            format!(
                "ids=[{THIS_SECOND:?}] handled=None write=[{THIS_SECOND:?}] note={:?}",
                made("first key")
            ),
        ),
        (
            wi(Some("t1"), None),
            ours(&[OLD]),
            format!("ids=[{OLD:?}] handled=Some(\"t1\")"),
        ),
        (
            wi(Some("t2"), None),
            ours(&[OLD]),
            format!(
                "ids={both} handled=Some(\"t2\") write={both} note={:?}",
                made("rotation requested with the hookgate.dev/rotate annotation")
            ),
        ),
        (
            wi(Some("t1"), Some("720h")),
            ours(&[OLD]),
            format!(
                "ids={both} handled=Some(\"t1\") write={both} note={:?}",
                made("rotation.every elapsed")
            ),
        ),
        (
            wi(Some("t1"), Some("721h")),
            ours(&[OLD]),
            format!("ids=[{OLD:?}] handled=Some(\"t1\")"),
        ),
        (
            wi(Some("t1"), Some("soon")),
            ours(&[OLD]),
            format!("ids=[{OLD:?}] handled=Some(\"t1\")"),
        ),
        (
            wi(Some("t2"), None),
            ours(&[THIS_SECOND]),
            format!("ids=[{THIS_SECOND:?}] handled=Some(\"t1\") deferred"),
        ),
        (
            wi(None, None),
            Some(secret(json!([]), &[OLD])),
            "ids=[] handled=None foreign=pay/stripe-signing-keys".into(),
        ),
        (
            wi(None, None),
            Some(secret(json!([owner("u-9", true)]), &[OLD])),
            "ids=[] handled=None foreign=pay/stripe-signing-keys".into(),
        ),
        (
            wi(None, None),
            Some(secret(json!([owner("u-1", false)]), &[OLD])),
            "ids=[] handled=None foreign=pay/stripe-signing-keys".into(),
        ),
    ];
    for (n, (wi, existing, want)) in cases.into_iter().enumerate() {
        let keys = generate(&wi, "pay", existing, now(), |s| format!("fresh-{s:?}"));
        assert_eq!(show(&keys), want, "case {n}");
    }
}

#[test]
fn a_new_key_gets_the_schemes_value_and_the_secret_is_ours() {
    let keys = generate(&wi(Some("t2"), None), "pay", ours(&[OLD]), now(), |s| {
        format!("fresh-{s:?}")
    });
    assert_eq!(keys.values[THIS_SECOND], b"fresh-Github");
    let written = keys.write.unwrap();
    assert!(
        owns(&wi(None, None), &written),
        "the next reconcile must not see it as foreign"
    );
    assert_eq!(written.annotations()[generated::HANDLED_ANNOTATION], "t2");
    assert_eq!(
        written.data.unwrap()[OLD].0,
        b"secret",
        "existing keys are kept"
    );
}

#[test]
fn the_plan_sees_the_generated_keys_after_the_users_own() {
    let mut wi = wi(None, None);
    wi.spec.keys =
        serde_json::from_value(json!([{"id": "mine", "secretRef": {"name": "s", "key": "k"}}]))
            .unwrap();
    let keys = generate(&wi, "pay", ours(&[OLD]), now(), |_| unreachable!());
    let mut secrets = Secrets::new();
    let planned = effective(&wi, "pay", &keys, &mut secrets);
    let ids: Vec<&str> = planned.spec.keys.iter().map(|k| k.id.as_str()).collect();
    assert_eq!(ids, ["mine", OLD]);
    assert_eq!(planned.spec.keys[1].secret_ref.name, "stripe-signing-keys");
    let values = &secrets[&("pay".to_string(), "stripe-signing-keys".to_string())];
    assert_eq!(values[OLD], b"secret");
}

fn plan(listed: &[&str], programmed: bool, next: Option<&str>) -> Plan {
    let keys = listed.iter().map(|id| KeyStatus {
        id: id.to_string(),
        ..Default::default()
    });
    let mut plan = Plan {
        status: Default::default(),
        manifests: programmed.then(String::new),
        remove_route: false,
        retired: Vec::new(),
        notes: vec![Note::normal(
            "KeyActivated",
            "key x is now the active key".into(),
        )],
        requeue_after: requeue::RESYNC,
    };
    plan.status.keys = keys.collect();
    plan.status.next_rotation_at = next.map(String::from);
    plan
}

#[test]
fn generated_keys_that_left_status_leave_the_secret_after_a_programmed_plan_only() {
    let newer = "g-20261115-000000";
    for (listed, programmed, removed) in [
        (
            &[newer][..],
            true,
            Some(format!(
                "removed retired generated key(s) {OLD} from Secret pay/stripe-signing-keys"
            )),
        ),
        (&[OLD, newer][..], true, None),
        (&[][..], false, None),
    ] {
        let keys = generate(
            &wi(None, None),
            "pay",
            ours(&[OLD, newer]),
            now(),
            |_| unreachable!(),
        );
        let mut p = plan(listed, programmed, None);
        let write = finish(&mut p, &wi(None, None), "pay", keys, now());
        let left = write.map(|s| s.data.unwrap().into_keys().collect::<Vec<_>>());
        assert_eq!(
            left,
            removed.as_ref().map(|_| vec![newer.to_string()]),
            "{listed:?}"
        );
        let last = p.notes.last().unwrap();
        assert_eq!(removed.is_some(), last.reason == "KeyRemoved");
        assert_eq!(
            removed.is_some_and(|r| r == last.note),
            last.reason == "KeyRemoved"
        );
    }
}

#[test]
fn the_scheduled_rotation_shows_in_status_when_it_comes_first_and_is_requeued_for() {
    let hour = Duration::from_secs(3600);
    // The newest key was made on 11-01; with every=721h the next one is due 12-01T01:00.
    let cases = [
        (None, Some("2026-12-01T01:00:00Z"), hour),
        (
            Some("2026-12-01T00:30:00Z"),
            Some("2026-12-01T00:30:00Z"),
            hour,
        ),
        (
            Some("2026-12-02T00:00:00Z"),
            Some("2026-12-01T01:00:00Z"),
            hour,
        ),
        (Some("unparseable"), Some("2026-12-01T01:00:00Z"), hour),
    ];
    for (next, shown, requeue) in cases {
        let wi = wi(Some("t1"), Some("721h"));
        let keys = generate(&wi, "pay", ours(&[OLD]), now(), |_| unreachable!());
        let mut p = plan(&[OLD], true, next);
        assert!(finish(&mut p, &wi, "pay", keys, now()).is_none());
        assert_eq!(p.status.next_rotation_at.as_deref(), shown, "{next:?}");
        assert_eq!(p.requeue_after, requeue, "{next:?}");
    }
}

#[test]
fn a_new_key_is_announced_first_and_a_deferred_one_comes_back_in_a_second() {
    let wi = wi(Some("t2"), None);
    let keys = generate(&wi, "pay", ours(&[OLD]), now(), |_| "v".into());
    let mut p = plan(&[OLD, THIS_SECOND], true, None);
    assert!(
        finish(&mut p, &wi, "pay", keys, now()).is_none(),
        "written before planning"
    );
    let reasons: Vec<&str> = p.notes.iter().map(|n| n.reason).collect();
    assert_eq!(reasons, ["KeyGenerated", "KeyActivated"]);
    assert_eq!(p.requeue_after, requeue::RESYNC);

    let keys = generate(&wi, "pay", ours(&[THIS_SECOND]), now(), |_| unreachable!());
    let mut p = plan(&[THIS_SECOND], true, None);
    finish(&mut p, &wi, "pay", keys, now());
    assert_eq!(p.requeue_after, requeue::NEXT_SECOND);
}
