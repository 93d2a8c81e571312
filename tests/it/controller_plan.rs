//! The controller's reconcile plan, as plain tests: status, compiled route, events and requeue for
//! each situation, without an API server.

use chrono::{DateTime, Duration, Utc};
use hookgate::controller::ownership::Claim;
use hookgate::controller::plan::{self, Inputs, Plan, RESYNC, RETRY_CONFLICT, RETRY_MISSING};
use hookgate::crd::WebhookIntegration;
use std::collections::HashMap;

fn at(s: &str) -> DateTime<Utc> {
    s.parse().unwrap()
}

fn stripe(keys: &str) -> String {
    format!(
        r#"
apiVersion: v1
kind: Secret
metadata: {{name: stripe-keys, namespace: pay}}
stringData: {{v1: whsec_one, v2: whsec_two}}
---
apiVersion: hookgate.dev/v1alpha1
kind: WebhookIntegration
metadata: {{name: stripe, namespace: pay, generation: 3}}
spec:
  scheme: {{type: stripe}}
  keys: {keys}
  rotation: {{overlap: 24h, keepRetired: 48h}}
  delivery: {{url: "http://billing:8080/hooks"}}
"#
    )
}

const ONE: &str = "[{id: v1, secretRef: {name: stripe-keys, key: v1}}]";
const TWO: &str = "[{id: v1, secretRef: {name: stripe-keys, key: v1}}, {id: v2, secretRef: {name: stripe-keys, key: v2}}]";

struct World {
    m: hookgate::manifest::Manifests,
}

impl World {
    fn new(keys: &str) -> Self {
        Self {
            m: crate::common::load(&stripe(keys)),
        }
    }
    fn wi(&self) -> WebhookIntegration {
        self.m.find("pay/stripe").unwrap().integration.clone()
    }
    fn plan(&self, wi: &WebhookIntegration, now: DateTime<Utc>) -> Plan {
        plan::plan(&Inputs {
            wi,
            secrets: &self.m.secrets,
            missing: &[],
            last_used: &HashMap::new(),
            claims: &[],
            retired: &[],
            foreign_secret: None,
            now,
        })
    }
}

fn cond<'a>(p: &'a Plan, t: &str) -> &'a hookgate::crd::Condition {
    p.status.conditions.iter().find(|c| c.type_ == t).unwrap()
}

fn phases(p: &Plan) -> Vec<(String, String)> {
    p.status
        .keys
        .iter()
        .map(|k| (k.id.clone(), k.phase.clone()))
        .collect()
}

#[test]
fn first_apply_programs_the_route_with_one_active_key() {
    let w = World::new(ONE);
    let now = at("2026-12-01T00:00:00Z");
    let p = w.plan(&w.wi(), now);
    assert_eq!(p.status.observed_generation, Some(3));
    assert_eq!(p.status.route.as_deref(), Some("/hooks/pay/stripe"));
    assert_eq!(phases(&p), [("v1".into(), "Active".into())]);
    for t in ["Ready", "KeysReady", "RouteProgrammed"] {
        assert_eq!(cond(&p, t).status, "True", "{t}");
        assert_eq!(cond(&p, t).last_transition_time, "2026-12-01T00:00:00Z");
    }
    assert_eq!(p.requeue_after, RESYNC, "nothing scheduled");
    assert_eq!(
        p.notes.iter().map(|n| n.reason).collect::<Vec<_>>(),
        ["KeyActivated"]
    );
    let manifests = p.manifests.unwrap();
    assert!(manifests.contains("kind: WebhookIntegration") && manifests.contains("kind: Secret"));
    assert!(
        !manifests.contains("whsec_one"),
        "values travel base64-encoded in data"
    );
}

#[test]
fn adding_a_key_retires_the_old_one_after_the_overlap_and_requeues_for_it() {
    let w1 = World::new(ONE);
    let t0 = at("2026-12-01T00:00:00Z");
    let first = w1.plan(&w1.wi(), t0);
    let w2 = World::new(TWO);
    let mut wi = w2.wi();
    wi.status = Some(first.status.clone());
    let t1 = t0 + Duration::hours(2);
    let p = w2.plan(&wi, t1);
    assert_eq!(
        phases(&p),
        [
            ("v1".into(), "Retiring".into()),
            ("v2".into(), "Active".into())
        ]
    );
    let v1 = &p.status.keys[0];
    assert_eq!(
        v1.retire_at.as_deref(),
        Some("2026-12-02T02:00:00Z"),
        "now + 24h overlap"
    );
    assert_eq!(
        p.status.next_rotation_at.as_deref(),
        Some("2026-12-02T02:00:00Z")
    );
    assert_eq!(p.requeue_after, RESYNC, "capped at the resync period");
    let reasons: Vec<&str> = p.notes.iter().map(|n| n.reason).collect();
    assert!(
        reasons.contains(&"KeyRetiring") && reasons.contains(&"KeyActivated"),
        "{reasons:?}"
    );
    // The compiled route carries the not-after, so receivers retire v1 on time by themselves.
    assert!(
        p.manifests
            .as_ref()
            .unwrap()
            .contains("retireAt: 2026-12-02T02:00:00Z")
    );
    // Conditions that stayed True keep their first transition time.
    assert_eq!(
        cond(&p, "Ready").last_transition_time,
        "2026-12-01T00:00:00Z"
    );

    // 30 minutes before the retire time the requeue lands exactly on it.
    wi.status = Some(p.status.clone());
    let near = at("2026-12-02T01:30:00Z");
    let p = w2.plan(&wi, near);
    assert_eq!(p.requeue_after, std::time::Duration::from_secs(1800));
    assert!(p.notes.is_empty(), "no change, no event: {:?}", p.notes);

    wi.status = Some(p.status.clone());
    let p = w2.plan(&wi, at("2026-12-02T02:00:00Z"));
    assert_eq!(phases(&p)[0], ("v1".into(), "Retired".into()));
    assert_eq!(
        p.notes.iter().map(|n| n.reason).collect::<Vec<_>>(),
        ["KeyRetired"]
    );
}

#[test]
fn missing_secret_is_a_false_condition_with_a_bounded_retry() {
    let w = World::new(ONE);
    let wi = w.wi();
    let p = plan::plan(&Inputs {
        wi: &wi,
        secrets: &Default::default(),
        missing: &["stripe-keys".to_string()],
        last_used: &HashMap::new(),
        claims: &[],
        retired: &[],
        foreign_secret: None,
        now: at("2026-12-01T00:00:00Z"),
    });
    assert_eq!(cond(&p, "KeysReady").status, "False");
    assert_eq!(cond(&p, "KeysReady").reason, "SecretNotFound");
    assert_eq!(
        cond(&p, "Ready").message,
        "Secret pay/stripe-keys not found"
    );
    assert_eq!(p.manifests, None, "the current route is left as it is");
    assert_eq!(p.requeue_after, RETRY_MISSING);
    assert!(p.notes[0].warning);
}

#[test]
fn invalid_spec_is_reported_with_the_field_and_waits_for_a_change() {
    let w = World::new(ONE);
    let mut wi = w.wi();
    wi.spec.replay = Some(hookgate::crd::ReplaySpec {
        tolerance: Some("5 minutes".into()),
        nonce_retention: None,
    });
    let p = w.plan(&wi, at("2026-12-01T00:00:00Z"));
    assert_eq!(cond(&p, "Ready").reason, "InvalidSpec");
    assert!(
        cond(&p, "Ready")
            .message
            .starts_with("spec.replay.tolerance:"),
        "{}",
        cond(&p, "Ready").message
    );
    assert_eq!(p.manifests, None);
    assert_eq!(p.requeue_after, RESYNC);
}

#[test]
fn a_metadata_destination_is_an_invalid_spec_in_status() {
    let yaml = stripe(ONE).replace(
        "http://billing:8080/hooks",
        "http://169.254.169.254/latest/meta-data/iam/",
    );
    let w = World {
        m: crate::common::load(&yaml),
    };
    let p = w.plan(&w.wi(), at("2026-12-01T00:00:00Z"));
    let ready = cond(&p, "Ready");
    assert_eq!(
        (ready.status.as_str(), ready.reason.as_str()),
        ("False", "InvalidSpec")
    );
    assert_eq!(
        ready.message,
        "spec.delivery.url: 169.254.169.254 is a cloud metadata address; deliveries never go there"
    );
    assert_eq!(p.manifests, None, "no route is compiled for it");
}

#[test]
fn an_unusable_key_is_invalid_key_and_never_echoes_the_value() {
    let yaml = stripe(ONE).replace("scheme: {type: stripe}", "scheme: {type: ed25519}");
    let w = World {
        m: crate::common::load(&yaml),
    };
    let p = w.plan(&w.wi(), at("2026-12-01T00:00:00Z"));
    assert_eq!(cond(&p, "KeysReady").reason, "InvalidKey");
    let text = serde_json::to_string(&p.status).unwrap() + &format!("{:?}", p.notes);
    assert!(!text.contains("whsec_one"), "{text}");
}

#[test]
fn a_retiring_key_still_in_use_raises_a_warning() {
    let w1 = World::new(ONE);
    let t0 = at("2026-12-01T00:00:00Z");
    let w2 = World::new(TWO);
    let mut wi = w2.wi();
    wi.status = Some(w1.plan(&w1.wi(), t0).status);
    let last_used = HashMap::from([("v1".to_string(), t0 + Duration::minutes(50))]);
    let p = plan::plan(&Inputs {
        wi: &wi,
        secrets: &w2.m.secrets,
        missing: &[],
        last_used: &last_used,
        claims: &[],
        retired: &[],
        foreign_secret: None,
        now: t0 + Duration::hours(1),
    });
    assert_eq!(cond(&p, "RetiringKeyInUse").status, "True");
    assert!(
        p.notes
            .iter()
            .any(|n| n.warning && n.reason == "RetiringKeyInUse")
    );
    assert_eq!(
        p.status.keys[0].last_used_at.as_deref(),
        Some("2026-12-01T00:50:00Z")
    );
}

fn claim(integration: &str, path: &str, at_: &str, uid: &str) -> Claim {
    Claim {
        integration: integration.into(),
        path: path.into(),
        claimed_at: Some(at(at_)),
        uid: uid.into(),
    }
}

/// A path claimed first by another namespace's integration is not taken over: the newcomer is
/// refused with PathConflict naming the owner, gets no route and loses any it had.
#[test]
fn a_path_claimed_first_elsewhere_is_a_conflict_and_removes_the_route() {
    let w = World::new(ONE);
    let mut wi = w.wi();
    wi.spec.path = Some("/hooks/payments/stripe".into());
    wi.metadata.creation_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        "2026-03-01T00:00:00Z".parse().unwrap(),
    ));
    wi.metadata.uid = Some("newcomer".into());
    let now = at("2026-06-01T00:00:00Z");
    let owner = claim(
        "payments/stripe",
        "/hooks/payments/stripe",
        "2026-01-01T00:00:00Z",
        "owner",
    );
    let other = claim("x/y", "/hooks/x/y", "2025-01-01T00:00:00Z", "z");
    let run = |claims: &[Claim]| {
        plan::plan(&Inputs {
            wi: &wi,
            secrets: &w.m.secrets,
            missing: &[],
            last_used: &HashMap::new(),
            claims,
            retired: &[],
            foreign_secret: None,
            now,
        })
    };
    let p = run(&[owner.clone(), other.clone()]);
    let ready = cond(&p, "Ready");
    assert_eq!(
        (ready.status.as_str(), ready.reason.as_str()),
        ("False", "PathConflict")
    );
    assert!(
        ready.message.contains("payments/stripe"),
        "{}",
        ready.message
    );
    assert_eq!(cond(&p, "RouteProgrammed").status, "False");
    assert!(p.manifests.is_none() && p.remove_route);
    assert_eq!(p.requeue_after, RETRY_CONFLICT);

    // Its own recorded claim, or another path's, is no conflict; the owner's deletion hands over.
    let mine = claim(
        "pay/stripe",
        "/hooks/payments/stripe",
        "2026-03-01T00:00:00Z",
        "newcomer",
    );
    let p = run(&[mine, other]);
    assert_eq!(cond(&p, "Ready").status, "True");
    assert!(p.manifests.is_some() && !p.remove_route);
}

/// A retired key stays retired when the integration's status is lost (a restore, a `kubectl
/// replace`): its retirement is also recorded on the compiled route, which the plan reads.
#[test]
fn a_retired_key_is_not_revived_when_status_is_lost() {
    let w = World::new(TWO);
    let mut wi = w.wi();
    wi.status = None;
    let now = at("2026-06-01T00:00:00Z");
    let run = |retired: &[String]| {
        plan::plan(&Inputs {
            wi: &wi,
            secrets: &w.m.secrets,
            missing: &[],
            last_used: &HashMap::new(),
            claims: &[],
            retired,
            foreign_secret: None,
            now,
        })
    };
    // Without the record, v1 would be merely Retiring again, accepted for a new overlap.
    assert_eq!(
        phases(&run(&[])),
        [
            ("v1".into(), "Retiring".into()),
            ("v2".into(), "Active".into())
        ]
    );
    let p = run(&["v1".to_string()]);
    assert_eq!(
        phases(&p),
        [
            ("v1".into(), "Retired".into()),
            ("v2".into(), "Active".into())
        ]
    );
    assert_eq!(p.retired, ["v1"], "and the record is written again");
}
