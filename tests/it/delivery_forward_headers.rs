//! `spec.delivery.forwardHeaders` passes original request headers through to the destination,
//! never a provider's signature or a credential (README, Delivery): naming one is a field error,
//! from a manifest file (standalone) and from a CR (the controller's plan), and a request's
//! `Authorization`, `Proxy-Authorization`, `Cookie` and signature never reach the inbox nor the
//! destination while the listed headers do.

use crate::common::destination::Destination;
use crate::common::*;
use base64::Engine;
use hookgate::cli::send::SendOptions;
use hookgate::controller::plan::{self, Inputs};
use hookgate::inbox::Inbox;
use hookgate::metrics::Metrics;
use hookgate::worker::{self, Worker, WorkerConfig};
use std::collections::HashMap;
use std::sync::Arc;

const CREDENTIALS: [&str; 3] = ["Authorization", "Proxy-Authorization", "Cookie"];

/// (scheme line, key value, the scheme's signature headers as a provider spells them).
fn schemes() -> Vec<(&'static str, String, Vec<&'static str>)> {
    let ed_public =
        base64::engine::general_purpose::STANDARD.encode(ed_key(1).verifying_key().to_bytes());
    vec![
        (
            "{type: stripe}",
            "whsec_fwd".into(),
            vec!["Stripe-Signature"],
        ),
        (
            "{type: github}",
            "gh-secret".into(),
            vec!["X-Hub-Signature-256", "X-Hub-Signature"],
        ),
        (
            "{type: standard-webhooks}",
            "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw".into(),
            vec!["webhook-signature", "Svix-Signature"],
        ),
        (
            "{type: slack}",
            "slack-secret".into(),
            vec!["X-Slack-Signature"],
        ),
        (
            "{type: shopify}",
            "shopify-secret".into(),
            vec!["X-Shopify-Hmac-Sha256"],
        ),
        (
            "{type: hmac-sha256, keyIdHeader: \"\"}",
            "hmac-secret".into(),
            vec!["X-Signature"],
        ),
        (
            "{type: hmac-sha256, keyIdHeader: \"\", signatureHeader: X-Partner-Sig}",
            "hmac-secret".into(),
            vec!["X-Partner-Sig"],
        ),
        (
            "{type: ed25519, keyIdHeader: \"\", signatureHeader: X-Signature-Ed25519, timestampHeader: X-Signature-Timestamp, signedPayload: \"{timestamp}{body}\", encoding: hex}",
            ed_public,
            vec!["X-Signature-Ed25519"],
        ),
    ]
}

/// One integration `h/hook` with `forwardHeaders: [X-Request-Id, {header}]`.
fn manifest(scheme: &str, key: &str, header: &str) -> String {
    format!(
        r#"
apiVersion: v1
kind: Secret
metadata: {{name: keys, namespace: h}}
stringData: {{k: "{key}"}}
---
apiVersion: hookgate.dev/v1alpha1
kind: WebhookIntegration
metadata: {{name: hook, namespace: h}}
spec:
  scheme: {scheme}
  keys: [{{id: k1, secretRef: {{name: keys, key: k}}}}]
  delivery:
    url: "http://127.0.0.1:9000/hook"
    forwardHeaders: [X-Request-Id, "{header}"]
"#
    )
}

/// What the controller's plan says about `yaml`'s integration: (Ready status, message, routed).
fn planned(yaml: &str) -> (String, String, bool) {
    let m = load(yaml);
    let wi = m.find("h/hook").unwrap().integration.clone();
    let p = plan::plan(&Inputs {
        wi: &wi,
        secrets: &m.secrets,
        missing: &[],
        last_used: &HashMap::new(),
        claims: &[],
        retired: &[],
        foreign_secret: None,
        now: t0(),
    });
    let ready = p
        .status
        .conditions
        .iter()
        .find(|c| c.type_ == "Ready")
        .unwrap();
    (
        ready.status.clone(),
        ready.message.clone(),
        p.manifests.is_some(),
    )
}

#[test]
fn a_signature_or_credential_header_in_forward_headers_is_a_field_error() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("hook.yaml");
    for (scheme, key, signatures) in schemes() {
        // The same integration forwarding a harmless header is fine, so what is refused below is
        // the header and nothing else.
        let fine = manifest(scheme, &key, "X-Trace-Id");
        std::fs::write(&file, &fine).unwrap();
        let loaded = hookgate::manifest::load(std::slice::from_ref(&file)).unwrap();
        assert!(loaded.route_table().is_ok(), "{scheme}");
        assert_eq!(
            planned(&fine),
            ("True".into(), String::new(), true),
            "{scheme}"
        );

        let refused = signatures.iter().chain(CREDENTIALS.iter());
        for header in refused.flat_map(|h| [h.to_string(), h.to_ascii_uppercase()]) {
            let lower = header.to_ascii_lowercase();
            let reason = format!(
                "spec.delivery.forwardHeaders[1]: {lower} carries a signature or credential and is never forwarded"
            );
            // Standalone: the manifest stops start-up, naming file, object and field.
            std::fs::write(&file, manifest(scheme, &key, &header)).unwrap();
            let shown = hookgate::manifest::load(std::slice::from_ref(&file))
                .unwrap()
                .route_table()
                .err()
                .unwrap_or_else(|| panic!("{scheme}: forwardHeaders [{header}] was accepted"))
                .to_string();
            let want = format!("{}: WebhookIntegration h/hook: {reason}", file.display());
            assert_eq!(shown, want, "{scheme}");

            // Cluster: the controller's plan refuses the CR with the same field and routes
            // nothing. (Its reason is the one every compile error gets, InvalidKey.)
            let (ready, message, routed) = planned(&manifest(scheme, &key, &header));
            assert_eq!(
                (ready.as_str(), message.as_str(), routed),
                ("False", reason.as_str(), false),
                "{scheme}: {header}"
            );
        }
    }
}

fn delivery_manifest(dest: &str) -> String {
    format!(
        r#"
apiVersion: v1
kind: Secret
metadata: {{name: keys, namespace: h}}
stringData: {{k: fwd-secret}}
---
apiVersion: hookgate.dev/v1alpha1
kind: WebhookIntegration
metadata: {{name: hook, namespace: h}}
spec:
  scheme: {{type: hmac-sha256, keyIdHeader: ""}}
  keys: [{{id: k1, secretRef: {{name: keys, key: k}}}}]
  delivery:
    url: "{dest}"
    forwardHeaders: [X-Request-Id, X-Trace-Id]
"#
    )
}

/// A request carrying credentials next to the listed headers: the listed ones arrive with their
/// values; the credentials and the provider's signature are neither stored nor delivered.
async fn credentials_and_signatures_never_reach_the_destination(inbox: Inbox) {
    let dest = Destination::start().await;
    let h = harness_with(inbox, &delivery_manifest(&dest.url));
    let body = r#"{"n":1}"#;
    let sent = SendOptions {
        event_id: Some("fwd-1".into()),
        ..opts()
    };
    let (path, mut headers) = h.sign("h/hook", body, sent);
    assert!(
        headers
            .iter()
            .any(|(k, _)| k.eq_ignore_ascii_case("x-signature")),
        "signed"
    );
    for (k, v) in [
        ("Authorization", "Bearer s3cret-token"),
        ("Proxy-Authorization", "Basic cHJveHk6czNjcmV0"),
        ("Cookie", "session=s3cret-session"),
        ("X-Request-Id", "req-1"),
        ("X-Trace-Id", "trace-1"),
        ("X-Unlisted", "kept-but-not-forwarded"),
    ] {
        headers.push((k.into(), v.into()));
    }
    assert_eq!(h.post(&path, &headers, body).await.json, accepted());

    let never = [
        "authorization",
        "proxy-authorization",
        "cookie",
        "x-signature",
    ];
    let summary = h.receiver.inbox().list(&Default::default()).await.unwrap();
    let detail = h
        .receiver
        .inbox()
        .event_detail(summary[0].id)
        .await
        .unwrap()
        .unwrap();
    let stored: Vec<String> = detail
        .headers
        .as_array()
        .unwrap()
        .iter()
        .map(|pair| pair[0].as_str().unwrap().to_ascii_lowercase())
        .collect();
    for name in never {
        assert!(
            !stored.contains(&name.to_string()),
            "{name} stored: {stored:?}"
        );
    }
    assert!(stored.contains(&"x-unlisted".to_string()), "{stored:?}");

    let w = Worker::new(
        h.receiver.inbox().clone(),
        worker::targets(&h.receiver.routes()),
        WorkerConfig::default(),
        Arc::new(Metrics::new()),
    );
    assert_eq!(w.run_once().await.unwrap(), 1);
    let got = dest.received();
    assert_eq!(got.len(), 1);
    let r = &got[0];
    assert_eq!(
        (r.header("x-request-id"), r.header("x-trace-id")),
        ("req-1".to_string(), "trace-1".to_string())
    );
    for name in never.iter().chain(&["x-unlisted"]) {
        assert!(!r.headers.contains_key(*name), "{name} delivered");
    }
    let delivered = format!("{:?}", r.headers);
    assert!(!delivered.contains("s3cret"), "{delivered}");
}

on_both_backends!(credentials_and_signatures_never_reach_the_destination);
