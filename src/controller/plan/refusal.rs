//! The reasons not to program an integration's route. Each leaves the current route as it is
//! (except a lost path, whose route goes), says why in status and one Warning event, and picks
//! how soon the reason could go away.

use super::conditions::Conditions;
use super::{Inputs, Note, Plan, RESYNC, RETRY_CONFLICT, RETRY_MISSING};
use crate::controller::{compiled, ownership};
use crate::crd::validate::{self, FieldError};
use crate::crd::{WebhookIntegration, WebhookIntegrationStatus, defaults};
use crate::route::{self, Secrets};
use chrono::{DateTime, Utc};
use kube::ResourceExt;
use std::time::Duration;

#[derive(Debug, PartialEq)]
pub(super) struct Refusal {
    /// The keys are fine; something else keeps the route from being programmed.
    keys_ok: bool,
    reason: &'static str,
    message: String,
    requeue: Duration,
    remove_route: bool,
}

impl Refusal {
    fn new(reason: &'static str, message: String, requeue: Duration) -> Self {
        Refusal {
            keys_ok: false,
            reason,
            message,
            requeue,
            remove_route: false,
        }
    }

    pub fn into_plan(self, mut status: WebhookIntegrationStatus, cond: &Conditions) -> Plan {
        status.conditions = cond.refused(self.keys_ok, self.reason, &self.message);
        Plan {
            status,
            manifests: None,
            remove_route: self.remove_route,
            retired: Vec::new(),
            notes: vec![Note::warning(self.reason, self.message)],
            requeue_after: self.requeue,
        }
    }
}

/// The rotation durations of a valid spec.
#[derive(Debug, PartialEq)]
pub(super) struct Timings {
    pub overlap: Duration,
    pub keep_retired: Duration,
}

fn duration(
    value: Option<&String>,
    field: &str,
    default: Duration,
) -> Result<Duration, FieldError> {
    value.map_or(Ok(default), |v| validate::duration(field, v))
}

fn timings(wi: &WebhookIntegration) -> Result<Timings, FieldError> {
    validate::spec(&wi.spec)?;
    let rotation = wi.spec.rotation.clone().unwrap_or_default();
    Ok(Timings {
        overlap: duration(
            rotation.overlap.as_ref(),
            "spec.rotation.overlap",
            defaults::ROTATION_OVERLAP,
        )?,
        keep_retired: duration(
            rotation.keep_retired.as_ref(),
            "spec.rotation.keepRetired",
            defaults::KEEP_RETIRED,
        )?,
    })
}

/// What the inputs refuse before any key is planned, in this order: an invalid spec, a foreign
/// Secret under the generated keys' name, a path another integration claimed first, missing
/// Secrets.
pub(super) fn before_keys(i: &Inputs) -> Result<Timings, Refusal> {
    // Nothing changes until the spec does: no requeue beyond the resync.
    let timings = timings(i.wi).map_err(|e| Refusal::new("InvalidSpec", e.to_string(), RESYNC))?;
    if let Some(name) = i.foreign_secret {
        let message = format!(
            "Secret {name} exists but was not created by hookgate for this integration; it is \
             left untouched: delete or rename it, or stop using rotation.generate"
        );
        return Err(Refusal::new("SecretNotOwned", message, RETRY_MISSING));
    }
    if let Some(owner) = ownership::owner_other_than(&compiled::claim(i.wi), i.claims) {
        let message = format!(
            "path {} is served by {}, which claimed it first; this integration is not routed",
            owner.path, owner.integration
        );
        return Err(Refusal {
            keys_ok: true,
            remove_route: true,
            ..Refusal::new("PathConflict", message, RETRY_CONFLICT)
        });
    }
    if !i.missing.is_empty() {
        let namespace = i.wi.namespace().unwrap_or_default();
        let names: Vec<String> = i
            .missing
            .iter()
            .map(|n| format!("{namespace}/{n}"))
            .collect();
        let message = format!("Secret {} not found", names.join(", "));
        return Err(Refusal::new("SecretNotFound", message, RETRY_MISSING));
    }
    Ok(timings)
}

/// Compiles exactly what receivers will compile (each key with its planned retire time), so an
/// unusable key is caught here rather than by every receiver.
pub(super) fn compiles(
    wi: &WebhookIntegration,
    not_after: &[Option<DateTime<Utc>>],
    secrets: &Secrets,
) -> Result<(), Refusal> {
    let mut effective = wi.clone();
    for (k, t) in effective.spec.keys.iter_mut().zip(not_after) {
        k.retire_at = *t;
    }
    match route::compile(&effective, secrets) {
        Ok(_) => Ok(()),
        // A key or signing secret may be fixed by editing its Secret, so look again soon; any
        // other field only changes with the spec, whose edit triggers a reconcile anyway.
        Err(e) if is_key_field(&e.field) => {
            Err(Refusal::new("InvalidKey", e.to_string(), RETRY_MISSING))
        }
        Err(e) => Err(Refusal::new("InvalidSpec", e.to_string(), RESYNC)),
    }
}

/// Fields whose value comes from a Secret: the keys and the delivery signing secret.
fn is_key_field(field: &str) -> bool {
    field.starts_with("spec.keys") || field.starts_with("spec.delivery.signingSecretRef")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::ownership::Claim;
    use std::collections::HashMap;

    fn wi(rotation: serde_json::Value) -> WebhookIntegration {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "hookgate.dev/v1alpha1", "kind": "WebhookIntegration",
            "metadata": {"name": "stripe", "namespace": "pay", "uid": "u-1",
                         "creationTimestamp": "2026-11-02T00:00:00Z"},
            "spec": {"scheme": {"type": "stripe"}, "rotation": rotation,
                     "keys": [{"id": "v1", "secretRef": {"name": "keys", "key": "v1"}}],
                     "delivery": {"url": "http://billing:8080/hooks"}}
        }))
        .unwrap()
    }

    fn claim(integration: &str, day: u32) -> Claim {
        Claim {
            integration: integration.into(),
            path: "/hooks/pay/stripe".into(),
            claimed_at: Some(format!("2026-11-{day:02}T00:00:00Z").parse().unwrap()),
            uid: format!("uid-{integration}"),
        }
    }

    /// `(reason, keys_ok, remove_route, requeue seconds)`, or the timings in hours.
    fn check(
        wi: &WebhookIntegration,
        foreign: Option<&str>,
        claims: &[Claim],
        missing: &[String],
    ) -> Result<(u64, u64), (&'static str, bool, bool, u64)> {
        let i = Inputs {
            wi,
            secrets: &Secrets::new(),
            missing,
            last_used: &HashMap::new(),
            claims,
            retired: &[],
            foreign_secret: foreign,
            now: DateTime::UNIX_EPOCH,
        };
        match before_keys(&i) {
            Ok(t) => Ok((t.overlap.as_secs() / 3600, t.keep_retired.as_secs() / 3600)),
            Err(r) => Err((r.reason, r.keys_ok, r.remove_route, r.requeue.as_secs())),
        }
    }

    #[test]
    fn each_refusal_and_how_soon_it_is_looked_at_again() {
        let ok = wi(serde_json::json!({"overlap": "2h", "keepRetired": "48h"}));
        let bad = wi(serde_json::json!({"overlap": "soon"}));
        let missing = ["keys".to_string()];
        let other = [claim("shop/stripe", 1)];
        let later = [claim("shop/stripe", 3)];
        let foreign = Some("pay/stripe-signing-keys");
        let cases: [(_, _, &[Claim], &[String], _); 7] = [
            (&ok, None, &[], &[], Ok((2, 48))),
            (&wi(serde_json::json!({})), None, &[], &[], Ok((72, 168))),
            (
                &bad,
                foreign,
                &other,
                &missing,
                Err(("InvalidSpec", false, false, 3600)),
            ),
            (
                &ok,
                foreign,
                &other,
                &missing,
                Err(("SecretNotOwned", false, false, 60)),
            ),
            (
                &ok,
                None,
                &other,
                &missing,
                Err(("PathConflict", true, true, 15)),
            ),
            (
                &ok,
                None,
                &later,
                &missing,
                Err(("SecretNotFound", false, false, 60)),
            ),
            (&ok, None, &later, &[], Ok((2, 48))),
        ];
        for (n, (wi, foreign, claims, missing, want)) in cases.into_iter().enumerate() {
            assert_eq!(check(wi, foreign, claims, missing), want, "case {n}");
        }
    }

    #[test]
    fn a_key_receivers_could_not_compile_is_refused() {
        let wi = wi(serde_json::json!({}));
        let mut secrets = Secrets::new();
        let refused = compiles(&wi, &[None], &secrets).unwrap_err();
        assert_eq!(
            (refused.reason, refused.requeue),
            ("InvalidKey", RETRY_MISSING)
        );
        let value = [("v1".to_string(), b"whsec_b25l".to_vec())].into();
        secrets.insert(("pay".into(), "keys".into()), value);
        assert_eq!(compiles(&wi, &[None], &secrets), Ok(()));
    }

    /// A spec that only fails at compile time (forwardHeaders naming a credential) is a spec
    /// problem, not a key problem: the reason says which to fix, and a Secret changing cannot cure it.
    #[test]
    fn a_compile_error_outside_the_keys_is_an_invalid_spec() {
        let mut wi = wi(serde_json::json!({}));
        wi.spec.delivery.forward_headers = vec!["Cookie".into()];
        let value = [("v1".to_string(), b"whsec_b25l".to_vec())].into();
        let secrets: Secrets = [(("pay".into(), "keys".into()), value)].into();
        let refused = compiles(&wi, &[None], &secrets).unwrap_err();
        assert_eq!((refused.reason, refused.requeue), ("InvalidSpec", RESYNC));
        assert!(
            refused.message.contains("spec.delivery.forwardHeaders[0]"),
            "{}",
            refused.message
        );
        // A missing delivery signing secret is fixed in a Secret: a key problem again.
        wi.spec.delivery.forward_headers.clear();
        wi.spec.delivery.signing_secret_ref = Some(crate::crd::SecretKeyRef {
            name: "signing".into(),
            key: "k".into(),
        });
        let refused = compiles(&wi, &[None], &secrets).unwrap_err();
        assert_eq!(
            (refused.reason, refused.requeue),
            ("InvalidKey", RETRY_MISSING)
        );
    }
}
