//! What the plan is computed from, and which objects the reconciler reads to get it.

use crate::controller::compiled;
use crate::controller::ownership::Claim;
use crate::crd::WebhookIntegration;
use crate::route::Secrets;
use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;
use std::collections::HashMap;

/// Inputs read by the reconciler.
pub struct Inputs<'a> {
    pub wi: &'a WebhookIntegration,
    /// The referenced Secrets that exist (values decoded).
    pub secrets: &'a Secrets,
    /// Names of referenced Secrets that do not exist.
    pub missing: &'a [String],
    pub last_used: &'a HashMap<String, DateTime<Utc>>,
    /// The path claims recorded on the compiled routes (every integration's, this one's too).
    pub claims: &'a [Claim],
    /// Key ids recorded as retired on this integration's compiled route.
    pub retired: &'a [String],
    /// `namespace/name` of a Secret where the generated keys belong that this integration does
    /// not own (someone else created it): never adopted or overwritten.
    pub foreign_secret: Option<&'a str>,
    pub now: DateTime<Utc>,
}

/// The Secrets the spec references (keys, delivery signing, Meta's verify token), each named
/// once, in name order so the reads come in a stable order.
pub fn referenced_secrets(wi: &WebhookIntegration) -> Vec<&str> {
    let mut names: Vec<&str> = wi
        .spec
        .secret_refs()
        .into_iter()
        .map(|r| r.name.as_str())
        .collect();
    names.sort_unstable();
    names.dedup();
    names
}

/// The path claims recorded on every compiled route, and the retired key ids recorded on `own`
/// (this integration's route). Only metadata is needed: the routes' data is never read here.
pub fn route_records(
    routes: impl IntoIterator<Item = Secret>,
    own: &str,
) -> (Vec<Claim>, Vec<String>) {
    let (mut claims, mut retired) = (Vec::new(), Vec::new());
    for secret in routes {
        if secret.name_any() == own {
            retired = compiled::recorded_retired(&secret);
        }
        claims.extend(compiled::recorded_claim(&secret));
    }
    (claims, retired)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn each_referenced_secret_is_read_once_in_name_order() {
        let wi = |signing: serde_json::Value| -> WebhookIntegration {
            serde_json::from_value(serde_json::json!({
                "apiVersion": "hookgate.dev/v1alpha1", "kind": "WebhookIntegration",
                "metadata": {"name": "s", "namespace": "pay"},
                "spec": {"scheme": {"type": "stripe"},
                         "keys": [{"id": "a", "secretRef": {"name": "zeta", "key": "a"}},
                                  {"id": "b", "secretRef": {"name": "alpha", "key": "b"}},
                                  {"id": "c", "secretRef": {"name": "zeta", "key": "c"}}],
                         "delivery": {"url": "http://x", "signingSecretRef": signing}}
            }))
            .unwrap()
        };
        let cases = [
            (serde_json::Value::Null, vec!["alpha", "zeta"]),
            (
                serde_json::json!({"name": "mid", "key": "k"}),
                vec!["alpha", "mid", "zeta"],
            ),
            (
                serde_json::json!({"name": "zeta", "key": "k"}),
                vec!["alpha", "zeta"],
            ),
        ];
        for (signing, want) in cases {
            assert_eq!(referenced_secrets(&wi(signing)), want);
        }
    }

    fn route(name: &str, annotations: &[(&str, &str)]) -> Secret {
        let annotations: BTreeMap<String, String> = annotations
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let mut s = Secret::default();
        s.metadata.name = Some(name.into());
        s.metadata.annotations = Some(annotations);
        s
    }

    #[test]
    fn claims_come_from_every_route_and_retirements_from_our_own() {
        use compiled::RETIRED_ANNOTATION as RETIRED;
        use compiled::{INTEGRATION_ANNOTATION as WHO, PATH_ANNOTATION as PATH};
        let routes = [
            route(
                "route.pay.a",
                &[(WHO, "pay/a"), (PATH, "/p"), (RETIRED, "v1,v2")],
            ),
            route(
                "route.shop.b",
                &[(WHO, "shop/b"), (PATH, "/p"), (RETIRED, "x1")],
            ),
            route("route.old", &[]),
        ];
        let (claims, retired) = route_records(routes.clone(), "route.pay.a");
        let who: Vec<&str> = claims.iter().map(|c| c.integration.as_str()).collect();
        assert_eq!(
            who,
            ["pay/a", "shop/b"],
            "a route recording no claim adds none"
        );
        assert_eq!(retired, ["v1", "v2"]);
        let (_, retired) = route_records(routes, "route.pay.new");
        assert!(retired.is_empty(), "a new integration has no route yet");
    }
}
