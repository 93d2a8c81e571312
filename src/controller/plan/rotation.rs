//! Keys the controller generates and owns (`spec.rotation.generate`): whether the Secret under
//! their name is ours, when a key is added, which keys leave the Secret, and when the next
//! rotation is due. The random value of a new key is the caller's: everything here is repeatable.

use super::{Note, Plan, requeue};
use crate::controller::generated::{self, Owned, Rotation};
use crate::crd::{SchemeType, WebhookIntegration};
use crate::route::{self, Secrets};
use chrono::{DateTime, SecondsFormat, Utc};
use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;
use std::collections::BTreeMap;
use std::time::Duration;

/// The generated keys for one reconcile. Not `Debug`: it holds key values.
#[derive(Default)]
pub struct Keys {
    /// The generated keys, including one added now.
    pub owned: Owned,
    pub values: BTreeMap<String, Vec<u8>>,
    /// The owned Secret to apply before planning, when a key was added.
    pub write: Option<Secret>,
    /// The KeyGenerated event of a key added now.
    pub note: Option<Note>,
    /// A key is due but an id of this second already exists: come back in a second rather than
    /// at the next resync.
    pub deferred: bool,
    /// `namespace/name` of a Secret under the generated keys' name that `wi` does not own: it is
    /// never adopted, and no key comes from it.
    pub foreign: Option<String>,
}

/// `spec.rotation.every`; an invalid value schedules nothing (the plan refuses it as InvalidSpec).
pub fn every(wi: &WebhookIntegration) -> Option<Duration> {
    let every = wi.spec.rotation.as_ref()?.every.as_deref()?;
    crate::crd::validate::duration("spec.rotation.every", every).ok()
}

/// Whether `wi` is the controller owner of `secret`, as on every Secret this controller creates
/// for generated keys; a Secret made by anyone else under that name is not adopted.
pub fn owns(wi: &WebhookIntegration, secret: &Secret) -> bool {
    secret
        .owner_references()
        .iter()
        .any(|o| o.controller == Some(true) && Some(&o.uid) == wi.metadata.uid.as_ref())
}

/// The generated keys as the Secret under their name (`existing`) holds them, plus a key when
/// one is due: the first, a changed rotate annotation, or `rotation.every` elapsed. `fresh`
/// makes a new key's value in the scheme's format.
pub fn generate(
    wi: &WebhookIntegration,
    namespace: &str,
    existing: Option<Secret>,
    now: DateTime<Utc>,
    fresh: impl FnOnce(SchemeType) -> String,
) -> Keys {
    let name = generated::secret_name(&wi.name_any());
    if existing.as_ref().is_some_and(|s| !owns(wi, s)) {
        let foreign = Some(format!("{namespace}/{name}"));
        return Keys {
            foreign,
            ..Keys::default()
        };
    }
    let handled = existing
        .as_ref()
        .and_then(|s| s.annotations().get(generated::HANDLED_ANNOTATION).cloned());
    let mut values = existing.map(route::secret_values).unwrap_or_default();
    let owned = Owned::new(values.keys().cloned().collect(), handled);
    let requested = wi.annotations().get(generated::ROTATE_ANNOTATION).cloned();
    let Some(why) = generated::due(&owned, requested.as_deref(), every(wi), now) else {
        return Keys {
            owned,
            values,
            ..Keys::default()
        };
    };
    let id = generated::key_id(now);
    if values.contains_key(&id) {
        // Ids carry the second they were made in, and this second's key exists (a rotation
        // asked for right after the first key).
        return Keys {
            owned,
            values,
            deferred: true,
            ..Keys::default()
        };
    }
    values.insert(id.clone(), fresh(wi.spec.scheme.type_).into_bytes());
    let owned = Owned::new(
        values.keys().cloned().collect(),
        requested.or(owned.handled),
    );
    let reason = match why {
        Rotation::First => "first key",
        Rotation::Requested => "rotation requested with the hookgate.dev/rotate annotation",
        Rotation::Scheduled => "rotation.every elapsed",
    };
    let note = format!("generated key {id} in Secret {namespace}/{name} ({reason})");
    Keys {
        write: Some(generated::secret(
            wi,
            namespace,
            &values,
            owned.handled.clone(),
        )),
        note: Some(Note::normal("KeyGenerated", note)),
        owned,
        values,
        deferred: false,
        foreign: None,
    }
}

/// The integration as planned: its own keys, then the generated ones, whose values join
/// `secrets` under the owned Secret's name.
pub fn effective(
    wi: &WebhookIntegration,
    namespace: &str,
    keys: &Keys,
    secrets: &mut Secrets,
) -> WebhookIntegration {
    let mut effective = wi.clone();
    effective
        .spec
        .keys
        .extend(keys.owned.key_specs(&wi.name_any()));
    let name = generated::secret_name(&wi.name_any());
    secrets.insert((namespace.to_string(), name), keys.values.clone());
    effective
}

/// After the plan: a key generated now is announced first; generated keys that left status
/// (retired for longer than keepRetired) leave the owned Secret too, which is returned to apply;
/// the next scheduled rotation shows in `nextRotationAt` when it comes first, and is requeued for.
pub fn finish(
    plan: &mut Plan,
    wi: &WebhookIntegration,
    namespace: &str,
    keys: Keys,
    now: DateTime<Utc>,
) -> Option<Secret> {
    if let Some(note) = keys.note {
        plan.notes.insert(0, note);
    }
    // Only after a successful plan: a failed one carries the old status over unchanged, so a key
    // missing from it says nothing.
    let listed: Vec<&str> = plan.status.keys.iter().map(|k| k.id.as_str()).collect();
    let expired: Vec<String> = match plan.manifests {
        Some(_) => keys
            .owned
            .ids
            .iter()
            .filter(|id| !listed.contains(&id.as_str()))
            .cloned()
            .collect(),
        None => Vec::new(),
    };
    let mut write = None;
    if !expired.is_empty() {
        let mut values = keys.values;
        values.retain(|id, _| !expired.contains(id));
        write = Some(generated::secret(
            wi,
            namespace,
            &values,
            keys.owned.handled.clone(),
        ));
        let name = generated::secret_name(&wi.name_any());
        let note = format!(
            "removed retired generated key(s) {} from Secret {namespace}/{name}",
            expired.join(", ")
        );
        plan.notes.push(Note::normal("KeyRemoved", note));
    }
    if let Some(at) = generated::next_scheduled(&keys.owned, every(wi)) {
        let next = plan.status.next_rotation_at.as_deref();
        let next = next.and_then(|t| t.parse::<DateTime<Utc>>().ok());
        if next.is_none_or(|n| at < n) {
            plan.status.next_rotation_at = Some(at.to_rfc3339_opts(SecondsFormat::Secs, true));
        }
        requeue::by(plan, at, now);
    }
    if keys.deferred {
        requeue::within(plan, requeue::NEXT_SECOND);
    }
    write
}

#[cfg(test)]
#[path = "rotation_tests.rs"]
mod tests;
