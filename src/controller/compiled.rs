//! The compiled route object: everything a receiver and the workers need for one integration,
//! written by the controller as a Secret in its own namespace (so receivers only read their own
//! namespace). It holds the integration with each key's effective retire time, plus only the Secret
//! values its keys reference, as the same multi-document YAML `hookgate standalone` reads: both
//! modes go through one loader and one compile function.

use super::ownership::{self, Claim};
use crate::crd::WebhookIntegration;
use crate::manifest::Manifests;
use crate::route::{CompiledRoute, RouteTable, Secrets};
use chrono::{DateTime, Utc};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;
use kube::api::ObjectMeta;
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;

/// Label on every compiled route Secret; its value is `<namespace>.<name>` of the integration, or
/// a hash of it when that is not a valid label value (over 63 characters).
pub const ROUTE_LABEL: &str = "hookgate.dev/route";
/// Annotations recording the integration's claim on its path (see [`ownership`]).
pub const INTEGRATION_ANNOTATION: &str = "hookgate.dev/integration";
pub const PATH_ANNOTATION: &str = "hookgate.dev/path";
pub const CLAIMED_AT_ANNOTATION: &str = "hookgate.dev/claimed-at";
pub const UID_ANNOTATION: &str = "hookgate.dev/uid";
/// Comma-separated ids of the integration's retired keys: kept with the route, not only in the
/// integration's status, so a lost or restored status cannot revive a retired key.
pub const RETIRED_ANNOTATION: &str = "hookgate.dev/retired-keys";
/// Data key holding the manifests.
pub const MANIFESTS_KEY: &str = "manifests.yaml";

/// A label value naming `namespace/name`: readable when it fits in 63 characters, else hashed.
pub fn label_value(namespace: &str, name: &str) -> String {
    let plain = format!("{namespace}.{name}");
    if plain.len() <= 63 {
        return plain;
    }
    format!(
        "h{}",
        &const_hex::encode(Sha256::digest(plain.as_bytes()))[..40]
    )
}

/// The claim `wi` makes on its public path.
pub fn claim(wi: &WebhookIntegration) -> Claim {
    let namespace = wi.namespace().unwrap_or_else(|| "default".into());
    let path = wi
        .spec
        .path
        .clone()
        .unwrap_or_else(|| crate::crd::defaults::path(&namespace, &wi.name_any()));
    Claim {
        integration: format!("{namespace}/{}", wi.name_any()),
        path,
        claimed_at: wi.metadata.creation_timestamp.as_ref().and_then(|t| {
            DateTime::from_timestamp(t.0.as_second(), t.0.subsec_nanosecond().max(0) as u32)
        }),
        uid: wi.metadata.uid.clone().unwrap_or_default(),
    }
}

/// The claim recorded on a compiled route Secret; `None` when it records none (an older
/// controller's), in which case the compiled route itself is the only source.
pub fn recorded_claim(secret: &Secret) -> Option<Claim> {
    let a = secret.metadata.annotations.as_ref()?;
    Some(Claim {
        integration: a.get(INTEGRATION_ANNOTATION)?.clone(),
        path: a.get(PATH_ANNOTATION)?.clone(),
        claimed_at: a.get(CLAIMED_AT_ANNOTATION).and_then(|t| t.parse().ok()),
        uid: a.get(UID_ANNOTATION).cloned().unwrap_or_default(),
    })
}

/// The key ids recorded as retired on a compiled route Secret.
pub fn recorded_retired(secret: &Secret) -> Vec<String> {
    secret
        .annotations()
        .get(RETIRED_ANNOTATION)
        .map(|ids| {
            ids.split(',')
                .filter(|id| !id.is_empty())
                .map(String::from)
                .collect()
        })
        .unwrap_or_default()
}

/// `route.<namespace>.<name>`, or a hashed name when that would exceed the 253-character limit.
pub fn secret_name(namespace: &str, name: &str) -> String {
    let plain = format!("route.{namespace}.{name}");
    if plain.len() <= 253 {
        return plain;
    }
    format!(
        "route.{}",
        &const_hex::encode(Sha256::digest(plain.as_bytes()))[..40]
    )
}

/// The manifests of one compiled route. `not_after[i]` replaces `spec.keys[i].retireAt`: the
/// controller's effective retire time, enforced by receivers even when the controller is down.
pub fn render(
    wi: &WebhookIntegration,
    not_after: &[Option<DateTime<Utc>>],
    secrets: &Secrets,
) -> String {
    let namespace = wi.namespace().unwrap_or_else(|| "default".into());
    let mut spec = wi.spec.clone();
    for (key, t) in spec.keys.iter_mut().zip(not_after) {
        key.retire_at = *t;
    }
    let mut refs: BTreeMap<String, BTreeMap<String, ByteString>> = BTreeMap::new();
    let wanted: Vec<(&str, &str)> = spec
        .secret_refs()
        .into_iter()
        .map(|r| (r.name.as_str(), r.key.as_str()))
        .collect();
    for (name, key) in wanted {
        if let Some(value) = secrets
            .get(&(namespace.clone(), name.to_string()))
            .and_then(|d| d.get(key))
        {
            refs.entry(name.to_string())
                .or_default()
                .insert(key.to_string(), ByteString(value.clone()));
        }
    }
    let mut docs = Vec::new();
    for (name, data) in refs {
        let secret = Secret {
            metadata: ObjectMeta {
                name: Some(name),
                namespace: Some(namespace.clone()),
                ..Default::default()
            },
            data: Some(data),
            ..Default::default()
        };
        docs.push(serde_yaml::to_string(&secret).expect("Secret serializes"));
    }
    let mut compiled = WebhookIntegration::new(&wi.name_any(), spec);
    compiled.metadata.namespace = Some(namespace);
    docs.push(serde_yaml::to_string(&compiled).expect("WebhookIntegration serializes"));
    docs.join("---\n")
}

/// The Secret object the controller applies in its namespace.
pub fn secret(
    controller_namespace: &str,
    wi: &WebhookIntegration,
    manifests: String,
    retired: &[String],
) -> Secret {
    let namespace = wi.namespace().unwrap_or_else(|| "default".into());
    let claim = claim(wi);
    let mut annotations = BTreeMap::from([
        (INTEGRATION_ANNOTATION.to_string(), claim.integration),
        (PATH_ANNOTATION.to_string(), claim.path),
        (UID_ANNOTATION.to_string(), claim.uid),
    ]);
    if !retired.is_empty() {
        annotations.insert(RETIRED_ANNOTATION.to_string(), retired.join(","));
    }
    if let Some(at) = claim.claimed_at {
        annotations.insert(
            CLAIMED_AT_ANNOTATION.to_string(),
            at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        );
    }
    Secret {
        metadata: ObjectMeta {
            name: Some(secret_name(&namespace, &wi.name_any())),
            namespace: Some(controller_namespace.to_string()),
            labels: Some(
                [(
                    ROUTE_LABEL.to_string(),
                    label_value(&namespace, &wi.name_any()),
                )]
                .into(),
            ),
            annotations: Some(annotations),
            ..Default::default()
        },
        data: Some(
            [(
                MANIFESTS_KEY.to_string(),
                ByteString(manifests.into_bytes()),
            )]
            .into(),
        ),
        ..Default::default()
    }
}

/// Compiles one route Secret with the standalone loader.
pub fn compile_secret(secret: &Secret) -> crate::manifest::Result<CompiledRoute> {
    let source = format!(
        "Secret {}/{}",
        secret.namespace().unwrap_or_default(),
        secret.name_any()
    );
    let text = secret
        .data
        .as_ref()
        .and_then(|d| d.get(MANIFESTS_KEY))
        .map(|b| String::from_utf8_lossy(&b.0).into_owned())
        .ok_or_else(|| crate::manifest::Error::Unusable {
            origin: source.clone(),
            reason: format!("no {MANIFESTS_KEY}"),
        })?;
    let mut m = Manifests::default();
    m.add_text(&source, &text)?;
    let mut routes = m.compile()?;
    match (routes.pop(), routes.is_empty()) {
        (Some(route), true) => Ok(route),
        _ => Err(crate::manifest::Error::Unusable {
            origin: source,
            reason: "expected exactly one WebhookIntegration".into(),
        }),
    }
}

/// The receiver's table from every route Secret it sees. A broken Secret costs only that route,
/// and a path claimed twice goes to the first claimant ([`ownership`]), never to the name that
/// sorts first; the loser is logged.
pub fn table(secrets: &[Secret]) -> RouteTable {
    let mut compiled: Vec<(CompiledRoute, Claim)> = Vec::new();
    for s in secrets {
        match compile_secret(s) {
            Ok(r) => {
                let claim = recorded_claim(s).unwrap_or_else(|| Claim {
                    integration: r.integration.clone(),
                    path: r.path.clone(),
                    claimed_at: None,
                    uid: String::new(),
                });
                compiled.push((r, claim))
            }
            Err(e) => tracing::error!(error = %e, "route skipped: compiled route is unusable"),
        }
    }
    let claims: Vec<Claim> = compiled.iter().map(|(_, c)| c.clone()).collect();
    let won = ownership::winners(&claims);
    let mut routes: Vec<CompiledRoute> = Vec::new();
    for (i, (r, _)) in compiled.into_iter().enumerate() {
        if won.contains(&i) {
            routes.push(r);
        } else {
            tracing::error!(integration = %r.integration, path = %r.path, "route skipped: path claimed first by another integration");
        }
    }
    RouteTable::new(routes).expect("paths are unique by construction")
}
