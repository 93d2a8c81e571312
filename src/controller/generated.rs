//! Keys the controller generates and owns (`spec.rotation.generate`), for HMAC schemes where we
//! choose the secret. They live in the Secret `<name>-signing-keys`, one data entry per key id;
//! ids carry their creation time (`g-YYYYMMDD-HHMMSS`) so order and age need no extra state. The
//! last handled value of the `hookgate.dev/rotate` annotation is kept on that Secret.

use crate::crd::{KeySpec, SchemeType, SecretKeyRef, WebhookIntegration};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use chrono::{DateTime, NaiveDateTime, Utc};
use k8s_openapi::api::core::v1::Secret;
use kube::api::ObjectMeta;
use kube::{Resource, ResourceExt};
use std::collections::BTreeMap;
use std::time::Duration;

/// Change this annotation (`kubectl annotate --overwrite`) to rotate a generated key.
pub const ROTATE_ANNOTATION: &str = "hookgate.dev/rotate";
/// On the owned Secret: the rotate annotation value already handled.
pub const HANDLED_ANNOTATION: &str = "hookgate.dev/rotate-handled";

/// `<name>-signing-keys`; for a name too long for that, its first 180 characters and a hash of
/// the whole (Secret names stop at 253).
pub fn secret_name(integration: &str) -> String {
    const SUFFIX: &str = "-signing-keys";
    if integration.len() + SUFFIX.len() <= 253 {
        return format!("{integration}{SUFFIX}");
    }
    use sha2::{Digest, Sha256};
    let hash = const_hex::encode(Sha256::digest(integration.as_bytes()));
    let stem = integration[..180].trim_end_matches(['-', '.']);
    format!("{stem}-{}{SUFFIX}", &hash[..16])
}

/// The owned Secret, whole: applied with server-side apply, so any key left out is dropped.
/// Its controller owner reference is what marks it as made for `wi` (see `plan::rotation::owns`).
pub fn secret(
    wi: &WebhookIntegration,
    namespace: &str,
    values: &BTreeMap<String, Vec<u8>>,
    handled: Option<String>,
) -> Secret {
    Secret {
        metadata: ObjectMeta {
            name: Some(secret_name(&wi.name_any())),
            namespace: Some(namespace.to_string()),
            annotations: handled.map(|h| [(HANDLED_ANNOTATION.to_string(), h)].into()),
            owner_references: wi.controller_owner_ref(&()).map(|o| vec![o]),
            ..Default::default()
        },
        data: Some(
            values
                .iter()
                .map(|(k, v)| (k.clone(), k8s_openapi::ByteString(v.clone())))
                .collect(),
        ),
        ..Default::default()
    }
}

pub fn key_id(created: DateTime<Utc>) -> String {
    created.format("g-%Y%m%d-%H%M%S").to_string()
}

pub fn created_at(id: &str) -> Option<DateTime<Utc>> {
    NaiveDateTime::parse_from_str(id, "g-%Y%m%d-%H%M%S")
        .ok()
        .map(|t| t.and_utc())
}

/// A fresh random 32-byte secret in the form the scheme's senders use.
pub fn new_secret(scheme: SchemeType) -> String {
    let bytes: [u8; 32] = rand::random();
    match scheme {
        SchemeType::StandardWebhooks => format!("whsec_{}", STANDARD.encode(bytes)),
        _ => const_hex::encode(bytes),
    }
}

/// What the owned Secret says today.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Owned {
    /// Generated key ids, oldest first.
    pub ids: Vec<String>,
    pub handled: Option<String>,
}

impl Owned {
    pub fn new(mut ids: Vec<String>, handled: Option<String>) -> Self {
        ids.retain(|id| created_at(id).is_some());
        ids.sort_by_key(|id| created_at(id));
        Self { ids, handled }
    }

    /// The generated keys as spec entries, appended after the user's own.
    pub fn key_specs(&self, integration: &str) -> Vec<KeySpec> {
        self.ids
            .iter()
            .map(|id| KeySpec {
                id: id.clone(),
                secret_ref: SecretKeyRef {
                    name: secret_name(integration),
                    key: id.clone(),
                },
                retire_at: None,
            })
            .collect()
    }
}

/// Why a new key is due, if one is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rotation {
    First,
    Requested,
    Scheduled,
}

/// Decides whether to generate a key now. `requested` is the current rotate annotation value.
pub fn due(
    owned: &Owned,
    requested: Option<&str>,
    every: Option<Duration>,
    now: DateTime<Utc>,
) -> Option<Rotation> {
    let Some(newest) = owned.ids.last().and_then(|id| created_at(id)) else {
        return Some(Rotation::First);
    };
    let fresh_request = requested.filter(|r| !r.is_empty() && owned.handled.as_deref() != Some(*r));
    if fresh_request.is_some() {
        return Some(Rotation::Requested);
    }
    (now >= crate::time::after(newest, every?)).then_some(Rotation::Scheduled)
}

/// When the next scheduled rotation is due.
pub fn next_scheduled(owned: &Owned, every: Option<Duration>) -> Option<DateTime<Utc>> {
    let newest = owned.ids.last().and_then(|id| created_at(id))?;
    Some(crate::time::after(newest, every?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> DateTime<Utc> {
        s.parse().unwrap()
    }

    #[test]
    fn ids_sort_by_the_time_they_carry() {
        let t = at("2026-12-01T10:20:30Z");
        assert_eq!(key_id(t), "g-20261201-102030");
        assert_eq!(created_at("g-20261201-102030"), Some(t));
        let o = Owned::new(
            vec![
                "g-20261201-000000".into(),
                "user-key".into(),
                "g-20251201-000000".into(),
            ],
            None,
        );
        assert_eq!(
            o.ids,
            ["g-20251201-000000", "g-20261201-000000"],
            "foreign entries ignored"
        );
    }

    #[test]
    fn a_key_is_due_first_on_request_and_on_schedule() {
        let now = at("2026-12-01T00:00:00Z");
        assert_eq!(
            due(&Owned::default(), None, None, now),
            Some(Rotation::First)
        );
        let o = Owned::new(vec!["g-20261101-000000".into()], Some("t1".into()));
        assert_eq!(due(&o, Some("t1"), None, now), None, "already handled");
        assert_eq!(due(&o, Some("t2"), None, now), Some(Rotation::Requested));
        assert_eq!(due(&o, Some(""), None, now), None);
        let month = Some(Duration::from_secs(30 * 86400));
        assert_eq!(
            due(&o, Some("t1"), month, now),
            Some(Rotation::Scheduled),
            "exactly 30 days old"
        );
        assert_eq!(
            due(&o, Some("t1"), month, now - chrono::Duration::seconds(1)),
            None
        );
        assert_eq!(next_scheduled(&o, month), Some(now));
    }

    #[test]
    fn secrets_have_the_scheme_format_and_32_random_bytes() {
        let sw = new_secret(SchemeType::StandardWebhooks);
        let raw = STANDARD.decode(sw.strip_prefix("whsec_").unwrap()).unwrap();
        assert_eq!(raw.len(), 32);
        let gh = new_secret(SchemeType::Github);
        assert_eq!(const_hex::decode(&gh).unwrap().len(), 32);
        assert_ne!(new_secret(SchemeType::Github), gh);
    }
}
