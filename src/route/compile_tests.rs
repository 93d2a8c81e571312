//! Table tests of `compile`: defaults, sources, keys and the refusals, each naming its field.

use super::*;
use crate::crd::WebhookIntegration;
use crate::crd::WebhookIntegrationSpec;
use crate::signature::KeyMaterial;
use crate::signature::{Encoding, GenericScheme, Scheme};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;

const NS: &str = "payments";
const SECRET: &str = "hook-secret";

/// An integration in `NS`, its spec written as YAML. `keys`/`delivery` default to one key `v1`
/// in Secret `hook-secret` and an https URL unless `yaml` sets them.
fn wi(name: &str, yaml: &str) -> WebhookIntegration {
    let mut spec: serde_yaml::Mapping = serde_yaml::from_str(
        r#"
keys:
  - id: v1
    secretRef: {name: hook-secret, key: v1}
delivery: {url: "https://app.example.com/in"}
"#,
    )
    .expect("base YAML parses");
    let extra: serde_yaml::Mapping =
        serde_yaml::from_str(yaml).unwrap_or_else(|e| panic!("test YAML: {e}\n{yaml}"));
    for (k, v) in extra {
        spec.insert(k, v);
    }
    let spec: WebhookIntegrationSpec =
        serde_yaml::from_value(serde_yaml::Value::Mapping(spec)).expect("spec deserializes");
    let mut wi = WebhookIntegration::new(name, spec);
    wi.metadata.namespace = Some(NS.into());
    wi
}

fn secrets(entries: &[(&str, &str, &str, &[u8])]) -> Secrets {
    let mut s = Secrets::new();
    for (ns, name, key, value) in entries {
        s.entry((ns.to_string(), name.to_string()))
            .or_default()
            .insert(key.to_string(), value.to_vec());
    }
    s
}

/// A key for `v1` that every HMAC scheme accepts (standard-webhooks wants base64).
fn hmac_secret() -> Secrets {
    secrets(&[(NS, SECRET, "v1", b"whsec_c2VjcmV0LWtleS1mb3ItdGVzdHM=")])
}

fn ed25519_public() -> String {
    let key = ed25519_dalek::SigningKey::from_bytes(&[7u8; 32]);
    STANDARD.encode(key.verifying_key().to_bytes())
}

fn compiled(name: &str, yaml: &str) -> CompiledRoute {
    let s = if yaml.contains("ed25519") {
        secrets(&[(NS, SECRET, "v1", ed25519_public().as_bytes())])
    } else {
        hmac_secret()
    };
    compile(&wi(name, yaml), &s).unwrap_or_else(|e| panic!("{name} compiles: {e}"))
}

fn headers(v: &[&str]) -> Source {
    Source::Headers(v.iter().map(|h| h.to_string()).collect())
}

fn pointer(p: &str) -> Source {
    Source::Pointer(p.into())
}

fn generic(route: &CompiledRoute) -> &GenericScheme {
    match route.verifier.scheme() {
        Scheme::HmacSha256(g) | Scheme::Ed25519(g) => g,
        other => panic!("not a generic scheme: {}", other.name()),
    }
}

#[test]
fn the_default_path_is_hooks_namespace_name() {
    let r = compiled("stripe", "scheme: {type: stripe}");
    assert_eq!(r.path, "/hooks/payments/stripe");
    assert_eq!(r.integration, "payments/stripe");
    assert_eq!(r.delivery.url.as_str(), "https://app.example.com/in");
}

#[test]
fn an_explicit_path_is_kept() {
    let r = compiled("stripe", "{scheme: {type: stripe}, path: /in/stripe-live}");
    assert_eq!(r.path, "/in/stripe-live");
    assert_eq!(r.integration, "payments/stripe");
}

#[test]
fn an_integration_without_namespace_lives_in_default() {
    let mut w = wi("gh", "scheme: {type: github}");
    w.metadata.namespace = None;
    let s = secrets(&[("default", SECRET, "v1", b"s3cret")]);
    let r = compile(&w, &s).expect("compiles");
    assert_eq!(r.path, "/hooks/default/gh");
    assert_eq!(r.integration, "default/gh");
}

#[test]
fn unset_options_take_the_documented_defaults() {
    let r = compiled("stripe", "scheme: {type: stripe}");
    assert_eq!(r.tolerance, Duration::from_secs(5 * 60));
    assert_eq!(r.nonce_retention, Duration::from_secs(24 * 60 * 60));
    assert_eq!(r.max_body_bytes, 1024 * 1024);
    assert!(r.rate.is_none());
    assert!(r.allow.is_open());
}

#[test]
fn set_options_are_compiled() {
    let r = compiled(
        "stripe",
        r#"
scheme: {type: stripe}
replay: {tolerance: 90s, nonceRetention: 1h30m}
limits: {maxBodyBytes: 4096, requestsPerSecond: 1, burst: 3}
"#,
    );
    assert_eq!(r.tolerance, Duration::from_secs(90));
    assert_eq!(r.nonce_retention, Duration::from_secs(5400));
    assert_eq!(r.max_body_bytes, 4096);
    let limiter = governor::RateLimiter::direct(r.rate.expect("a rate"));
    // A burst of 3 at 1/s: three immediate requests pass, the fourth is refused.
    let passed = (0..4).filter(|_| limiter.check().is_ok()).count();
    assert_eq!(passed, 3);
}

#[test]
fn the_burst_defaults_to_the_rate() {
    let r = compiled(
        "stripe",
        "{scheme: {type: stripe}, limits: {requestsPerSecond: 2}}",
    );
    let limiter = governor::RateLimiter::direct(r.rate.expect("a rate"));
    let passed = (0..5).filter(|_| limiter.check().is_ok()).count();
    assert_eq!(passed, 2);
}

#[test]
fn each_scheme_reads_event_id_and_type_where_the_provider_sends_them() {
    let cases = [
        ("stripe", pointer("/id"), pointer("/type")),
        (
            "github",
            headers(&["x-github-delivery"]),
            headers(&["x-github-event"]),
        ),
        (
            "standard-webhooks",
            headers(&["webhook-id", "svix-id"]),
            pointer("/type"),
        ),
        ("slack", pointer("/event_id"), pointer("/event/type")),
        (
            "shopify",
            headers(&["x-shopify-webhook-id"]),
            headers(&["x-shopify-topic"]),
        ),
        ("hmac-sha256", headers(&["x-event-id"]), pointer("/type")),
        ("ed25519", headers(&["x-event-id"]), pointer("/type")),
        (
            "discord",
            Source::FirstOf(vec![pointer("/id"), Source::SignatureDigest]),
            // A webhook event's type is `/event/type`; an interaction has only the numeric `/type`.
            Source::FirstOf(vec![pointer("/event/type"), pointer("/type")]),
        ),
        (
            "twilio",
            Source::FirstOf(vec![
                headers(&["i-twilio-idempotency-token"]),
                Source::SignatureDigest,
            ]),
            Source::Form("EventType".into()),
        ),
        (
            "twitch",
            headers(&["twitch-eventsub-message-id"]),
            headers(&["twitch-eventsub-subscription-type"]),
        ),
        ("zoom", Source::SignatureDigest, pointer("/event")),
        ("meta", Source::SignatureDigest, pointer("/object")),
        (
            "gitlab",
            headers(&["x-gitlab-event-uuid"]),
            headers(&["x-gitlab-event"]),
        ),
        ("paddle", pointer("/event_id"), pointer("/event_type")),
        ("square", pointer("/event_id"), pointer("/type")),
        // The body is an array of events: no one type for the request.
        ("sendgrid", Source::SignatureDigest, Source::FirstOf(vec![])),
        (
            "linear",
            headers(&["linear-delivery"]),
            headers(&["linear-event"]),
        ),
    ];
    for (scheme, id, ty) in cases {
        let r = compiled_type(scheme);
        assert_eq!(r.verifier.scheme().name(), scheme);
        assert_eq!(r.event_id, id, "{scheme} event id");
        assert_eq!(r.event_type, ty, "{scheme} event type");
    }
}

/// A `scheme: {type: t}` integration with what that type needs: the URL twilio and square sign,
/// meta's verify token, and a key in the form the type reads (Discord's hex Ed25519 public key,
/// SendGrid's base64 DER P-256 public key).
fn compiled_type(t: &str) -> CompiledRoute {
    use p256::pkcs8::EncodePublicKey;
    let extra = match t {
        "twilio" | "square" => ", publicUrl: https://hooks.example.com/in",
        "meta" => ", verifyTokenRef: {name: hook-secret, key: verify}",
        _ => "",
    };
    let ed = ed25519_dalek::SigningKey::from_bytes(&[7u8; 32]);
    let p256 = p256::ecdsa::SigningKey::from_slice(&[5u8; 32]).expect("scalar in range");
    let key = match t {
        "ed25519" => ed25519_public(),
        "discord" => const_hex::encode(ed.verifying_key().to_bytes()),
        "sendgrid" => {
            let der = p256.verifying_key().to_public_key_der().expect("encodes");
            STANDARD.encode(der.as_bytes())
        }
        _ => "whsec_c2VjcmV0LWtleS1mb3ItdGVzdHM=".into(),
    };
    let s = secrets(&[
        (NS, SECRET, "v1", key.as_bytes()),
        (NS, SECRET, "verify", b"meta-verify-token"),
    ]);
    let w = wi("x", &format!("scheme: {{type: {t}{extra}}}"));
    compile(&w, &s).unwrap_or_else(|e| panic!("{t} compiles: {e}"))
}

#[test]
fn provider_urls_tokens_and_windows_are_compiled() {
    for t in ["twilio", "square"] {
        match compiled_type(t).verifier.scheme() {
            Scheme::Twilio { public_url } | Scheme::Square { public_url } => {
                assert_eq!(public_url, "https://hooks.example.com/in", "{t}")
            }
            other => panic!("{t} compiled to {}", other.name()),
        }
    }
    let meta = compiled_type("meta");
    assert_eq!(
        meta.verify_token.as_ref().map(|t| t.0.as_slice()),
        Some(&b"meta-verify-token"[..])
    );
    assert!(
        !format!("{meta:?}").contains("meta-verify-token"),
        "the token is a secret"
    );
    assert!(compiled_type("gitlab").verify_token.is_none());
    // Twitch documents a 10-minute window, Linear's webhookTimestamp one of 60 s.
    for (t, secs) in [
        ("twitch", 600),
        ("linear", 60),
        ("zoom", 300),
        ("paddle", 300),
    ] {
        assert_eq!(compiled_type(t).tolerance, Duration::from_secs(secs), "{t}");
    }
}

#[test]
fn a_missing_verify_token_secret_names_the_verify_token_ref() {
    let w = wi(
        "m",
        "scheme: {type: meta, verifyTokenRef: {name: meta-app, key: verify}}",
    );
    let e = compile(&w, &hmac_secret()).unwrap_err();
    assert_eq!(e.field, "spec.scheme.verifyTokenRef.name");
    assert!(
        e.message.contains("Secret payments/meta-app not found"),
        "{e}"
    );
    // The Secret exists, the key in it does not.
    let w = wi(
        "m",
        "scheme: {type: meta, verifyTokenRef: {name: hook-secret, key: verify}}",
    );
    let e = compile(&w, &hmac_secret()).unwrap_err();
    assert_eq!(e.field, "spec.scheme.verifyTokenRef.key");
    assert!(
        e.message
            .contains("Secret payments/hook-secret has no key \"verify\""),
        "{e}"
    );
}

#[test]
fn the_delivery_signing_secret_is_read_like_a_key_and_named_when_missing() {
    let signed = |reference: &str| {
        wi(
            "d",
            &format!(
                r#"{{scheme: {{type: stripe}}, delivery: {{url: "https://app.example.com/in", signingSecretRef: {reference}}}}}"#
            ),
        )
    };
    let public = format!("whpk_{}", ed25519_public());
    let s = secrets(&[
        (NS, SECRET, "v1", b"whsec_c2VjcmV0LWtleS1mb3ItdGVzdHM="),
        (NS, SECRET, "out", b"whsec_c2lnbmluZy1rZXk="),
        (NS, SECRET, "public", public.as_bytes()),
    ]);

    let route = compile(&signed("{name: hook-secret, key: out}"), &s).unwrap();
    assert_eq!(
        route.delivery.signing_secret.as_deref(),
        Some(&b"signing-key"[..])
    );
    let e = compile(&signed("{name: elsewhere, key: out}"), &s).unwrap_err();
    assert_eq!(e.field, "spec.delivery.signingSecretRef.name");
    assert!(
        e.message.contains("Secret payments/elsewhere not found"),
        "{e}"
    );
    let e = compile(&signed("{name: hook-secret, key: gone}"), &s).unwrap_err();
    assert_eq!(e.field, "spec.delivery.signingSecretRef.key");
    assert!(
        e.message
            .contains("Secret payments/hook-secret has no key \"gone\""),
        "{e}"
    );
    let e = compile(&signed("{name: hook-secret, key: public}"), &s).unwrap_err();
    assert_eq!(e.field, "spec.delivery.signingSecretRef");
    assert!(e.message.contains("not a public key"), "{e}");
}

#[test]
fn a_verify_token_loses_its_trailing_newline_and_may_not_be_empty() {
    let w = wi(
        "m",
        "scheme: {type: meta, verifyTokenRef: {name: hook-secret, key: verify}}",
    );
    // `kubectl create secret --from-file` keeps the newline `echo` wrote; Meta never sends it.
    let key = b"whsec_c2VjcmV0LWtleS1mb3ItdGVzdHM=";
    let s = secrets(&[
        (NS, SECRET, "v1", key),
        (NS, SECRET, "verify", b"tok-123\n"),
    ]);
    let r = compile(&w, &s).expect("compiles");
    assert_eq!(
        r.verify_token.as_ref().map(|t| t.0.as_slice()),
        Some(&b"tok-123"[..])
    );
    // An empty token would let `hub.verify_token=` through: refuse it, naming the field.
    let s = secrets(&[(NS, SECRET, "v1", key), (NS, SECRET, "verify", b"\n")]);
    let e = compile(&w, &s).unwrap_err();
    assert_eq!(e.field, "spec.scheme.verifyTokenRef.key");
    assert!(e.message.contains("empty"), "{e}");
}

#[test]
fn a_generic_scheme_without_event_id_header_reads_the_body_id() {
    for scheme in ["hmac-sha256", "ed25519"] {
        let r = compiled(
            "x",
            &format!(
                r#"scheme: {{type: {scheme}, eventIdHeader: "", signedPayload: "{{timestamp}}.{{body}}"}}"#
            ),
        );
        assert_eq!(r.event_id, pointer("/id"), "{scheme}");
        assert_eq!(generic(&r).event_id_header, None, "{scheme}");
    }
}

#[test]
fn explicit_sources_override_the_scheme_defaults() {
    let r = compiled(
        "x",
        "{scheme: {type: stripe}, eventId: {header: X-Request-ID}, eventType: {jsonPointer: /data/kind}}",
    );
    assert_eq!(r.event_id, headers(&["x-request-id"]));
    assert_eq!(r.event_type, pointer("/data/kind"));
}

#[test]
fn header_names_are_lower_cased() {
    let r = compiled(
        "x",
        r#"
scheme:
  type: hmac-sha256
  signatureHeader: X-Partner-Signature
  timestampHeader: X-Partner-Timestamp
  eventIdHeader: X-Partner-Event
  keyIdHeader: X-Partner-Key
eventType: {header: X-Partner-Type}
"#,
    );
    let g = generic(&r);
    assert_eq!(g.signature_header, "x-partner-signature");
    assert_eq!(g.timestamp_header.as_deref(), Some("x-partner-timestamp"));
    assert_eq!(g.event_id_header.as_deref(), Some("x-partner-event"));
    assert_eq!(g.key_id_header.as_deref(), Some("x-partner-key"));
    assert_eq!(
        r.verifier.scheme().signature_headers(),
        ["x-partner-signature"]
    );
    assert_eq!(r.event_id, headers(&["x-partner-event"]));
    assert_eq!(r.event_type, headers(&["x-partner-type"]));
}

#[test]
fn generic_defaults_are_lower_cased_and_empty_headers_mean_none() {
    let r = compiled("x", "scheme: {type: hmac-sha256}");
    let g = generic(&r);
    assert_eq!(g.signature_header, "x-signature");
    assert_eq!(g.timestamp_header.as_deref(), Some("x-timestamp"));
    assert_eq!(g.key_id_header.as_deref(), Some("x-key-id"));
    assert_eq!(g.encoding, Encoding::Hex);
    assert_eq!(g.signature_prefix, "");

    let r = compiled(
        "x",
        r#"scheme: {type: ed25519, keyIdHeader: "", timestampHeader: "", signedPayload: "{event_id}:{body}"}"#,
    );
    let g = generic(&r);
    assert_eq!(g.key_id_header, None);
    assert_eq!(g.timestamp_header, None);
    assert_eq!(g.encoding, Encoding::Base64);
}

#[test]
fn an_empty_allow_list_means_no_filter() {
    for yaml in [
        "scheme: {type: stripe}",
        "{scheme: {type: stripe}, events: {allow: []}}",
        "{scheme: {type: stripe}, events: {}}",
    ] {
        let r = compiled("x", yaml);
        assert!(r.allow.is_open(), "{yaml}");
        assert!(r.allows(Some("x")), "{yaml}");
        assert!(r.allows(None), "{yaml}");
    }
}

#[test]
fn an_allow_list_filters_by_glob() {
    let r = compiled(
        "x",
        r#"{scheme: {type: stripe}, events: {allow: ["invoice.*", "charge.refun?ed"]}}"#,
    );
    assert!(r.allows(Some("invoice.paid")));
    assert!(r.allows(Some("invoice.payment_failed")));
    assert!(r.allows(Some("charge.refunded")));
    assert!(!r.allows(Some("charge.succeeded")));
    assert!(!r.allows(Some("invoice")));
    assert!(!r.allows(Some("xinvoice.paid")));
    assert!(!r.allows(None), "a missing type must not pass a filter");
}

#[test]
fn keys_carry_id_retirement_and_trimmed_material() {
    let w = wi(
        "gh",
        r#"
scheme: {type: github}
keys:
  - {id: old, secretRef: {name: hook-secret, key: a}, retireAt: "2030-01-02T03:04:05Z"}
  - {id: new, secretRef: {name: hook-secret, key: b}}
"#,
    );
    let s = secrets(&[(NS, SECRET, "a", b"first\n"), (NS, SECRET, "b", b"second")]);
    let r = compile(&w, &s).expect("compiles");
    let keys = r.verifier.keys();
    assert_eq!(keys.len(), 2);
    assert_eq!(keys[0].id, "old");
    assert_eq!(
        keys[0].not_after,
        Some("2030-01-02T03:04:05Z".parse().expect("time"))
    );
    assert_eq!(keys[1].id, "new");
    assert_eq!(keys[1].not_after, None);
    match (&keys[0].material, &keys[1].material) {
        (KeyMaterial::Hmac(a), KeyMaterial::Hmac(b)) => {
            assert_eq!(
                a, b"first",
                "the trailing newline is not part of the secret"
            );
            assert_eq!(b, b"second");
        }
        _ => panic!("github keys are HMAC secrets"),
    }
}

#[test]
fn an_invalid_spec_fails_with_its_field_before_secrets_are_read() {
    let e = compile(
        &wi("x", "{scheme: {type: stripe}, path: hooks/x}"),
        &Secrets::new(),
    )
    .unwrap_err();
    assert_eq!(e.field, "spec.path");
}

#[test]
fn a_missing_secret_names_the_secret_ref() {
    let e = compile(&wi("x", "scheme: {type: stripe}"), &Secrets::new()).unwrap_err();
    assert_eq!(e.field, "spec.keys[0].secretRef.name");
    assert!(
        e.message.contains("Secret payments/hook-secret not found"),
        "{e}"
    );
}

#[test]
fn a_secret_in_another_namespace_does_not_count() {
    let s = secrets(&[("other", SECRET, "v1", b"s3cret")]);
    let e = compile(&wi("x", "scheme: {type: stripe}"), &s).unwrap_err();
    assert_eq!(e.field, "spec.keys[0].secretRef.name");
    assert!(
        e.message.contains("Secret payments/hook-secret not found"),
        "{e}"
    );
}

#[test]
fn the_failing_key_is_named_by_index() {
    let w = wi(
        "x",
        r#"
scheme: {type: stripe}
keys:
  - {id: v1, secretRef: {name: hook-secret, key: v1}}
  - {id: v2, secretRef: {name: next-secret, key: v2}}
"#,
    );
    let e = compile(&w, &hmac_secret()).unwrap_err();
    assert_eq!(e.field, "spec.keys[1].secretRef.name");
    assert!(
        e.message.contains("Secret payments/next-secret not found"),
        "{e}"
    );
}

#[test]
fn a_missing_key_in_the_secret_names_the_key() {
    let s = secrets(&[(NS, SECRET, "other", b"s3cret")]);
    let e = compile(&wi("x", "scheme: {type: stripe}"), &s).unwrap_err();
    assert_eq!(e.field, "spec.keys[0].secretRef.key");
    assert!(
        e.message
            .contains("Secret payments/hook-secret has no key \"v1\""),
        "{e}"
    );
}

#[test]
fn an_unusable_key_is_refused_without_showing_it() {
    // (scheme, secret value, words of the reason)
    let cases: &[(&str, &[u8], &str)] = &[
        ("ed25519", b"tenbytes!!", "32 raw bytes, base64, hex or PEM"),
        // Base64 that decodes to the wrong length.
        ("ed25519", b"c2hvcnQtc2VjcmV0LWtleQ==", "expected 32"),
        (
            "standard-webhooks",
            b"whsec_not*base64*secret",
            "not valid base64",
        ),
        (
            "standard-webhooks",
            b"whsk_cHJpdmF0ZS1zaWduaW5nLWtleS1ieXRlcy0zMiE=",
            "private signing key",
        ),
    ];
    for (scheme, value, reason) in cases {
        let s = secrets(&[(NS, SECRET, "v1", value)]);
        let e = compile(&wi("x", &format!("scheme: {{type: {scheme}}}")), &s).unwrap_err();
        assert_eq!(e.field, "spec.keys[0].secretRef", "{scheme}");
        assert!(
            e.message
                .contains(&format!("key \"v1\" is unusable for {scheme}")),
            "{e}"
        );
        assert!(e.message.contains(reason), "{scheme}: {e}");
        let text = std::str::from_utf8(value).expect("utf-8");
        let secret_part = text
            .trim_start_matches("whsec_")
            .trim_start_matches("whsk_");
        for shown in [e.to_string(), format!("{e:?}")] {
            assert!(
                !shown.contains(secret_part),
                "{scheme}: the error shows the key: {shown}"
            );
        }
    }
}

#[test]
fn an_empty_hmac_secret_is_refused_without_showing_it() {
    for (scheme, value) in [
        ("stripe", &b""[..]),
        ("github", b"\n"),
        ("hmac-sha256", b"\r\n"),
        ("slack", b""),
        ("shopify", b""),
        ("standard-webhooks", b""),
    ] {
        let s = secrets(&[(NS, SECRET, "v1", value)]);
        let e = compile(&wi("x", &format!("scheme: {{type: {scheme}}}")), &s).unwrap_err();
        assert_eq!(e.field, "spec.keys[0].secretRef", "{scheme}");
        assert!(e.message.contains("the key is empty"), "{scheme}: {e}");
    }
    // A secret that is only a newline must not come back inside the message either.
    let s = secrets(&[(NS, SECRET, "v1", b"\n")]);
    let e = compile(&wi("x", "scheme: {type: github}"), &s).unwrap_err();
    assert!(!e.message.contains('\n'), "{e:?}");
}

#[test]
fn a_valid_key_with_a_secret_looking_value_never_appears_in_debug() {
    let s = secrets(&[(NS, SECRET, "v1", b"topsecret-value-1234")]);
    let r = compile(&wi("x", "scheme: {type: github}"), &s).expect("compiles");
    let shown = format!("{r:?}");
    assert!(!shown.contains("topsecret"), "{shown}");
    assert!(shown.contains("v1"), "{shown}");
}

#[test]
fn two_routes_on_one_path_are_refused_naming_both() {
    let s = hmac_secret();
    let a = compile(&wi("a", "{scheme: {type: stripe}, path: /in/shared}"), &s).unwrap();
    let b = compile(&wi("b", "{scheme: {type: github}, path: /in/shared}"), &s).unwrap();
    let e = RouteTable::new(vec![a, b]).unwrap_err();
    assert_eq!(
        e,
        "path /in/shared is claimed by both payments/a and payments/b"
    );
}

#[test]
fn a_route_table_finds_routes_by_path() {
    let s = hmac_secret();
    let a = compile(&wi("a", "scheme: {type: stripe}"), &s).unwrap();
    let b = compile(&wi("b", "{scheme: {type: github}, path: /in/b}"), &s).unwrap();
    let table = RouteTable::new(vec![a, b]).expect("distinct paths");
    assert_eq!(table.len(), 2);
    assert!(!table.is_empty());
    assert_eq!(
        table
            .get("/hooks/payments/a")
            .map(|r| r.integration.as_str()),
        Some("payments/a")
    );
    assert_eq!(
        table.get("/in/b").map(|r| r.integration.as_str()),
        Some("payments/b")
    );
    assert!(table.get("/hooks/payments/b").is_none());
    assert!(table.get("/in/b/").is_none());
    assert!(RouteTable::default().is_empty());
}
