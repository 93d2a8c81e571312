//! Shared by the targets: every scheme hookgate has, with the header names it reads, and a header
//! map built from fuzzer bytes (values that are not valid header bytes are dropped, as hyper would).

use hookgate::signature::{
    Encoding, GenericScheme, Key, KeyMaterial, Scheme, Template, Unverified, Verifier,
};
use http::{HeaderMap, HeaderName, HeaderValue};

/// The `header_parsers` target: every scheme's parser on arbitrary values may refuse, never panic.
pub fn parse_headers(data: &[u8]) {
    for (scheme, names) in schemes() {
        let (headers, _) = headers(&names, data);
        let _ = scheme.envelope(&headers);
    }
}

/// The `verify` target: arbitrary headers and body against real keys never panic and never
/// verify (nobody signed them, and neither a fuzzer nor a PRNG can forge HMAC or Ed25519).
pub fn verify_unsigned(data: &[u8]) {
    let now = chrono::DateTime::from_timestamp(1_700_000_000, 0).unwrap();
    for (scheme, names) in schemes() {
        let material = match &scheme {
            Scheme::Ed25519(_) => KeyMaterial::Ed25519(
                ed25519_dalek::SigningKey::from_bytes(&[7u8; 32]).verifying_key(),
            ),
            _ => KeyMaterial::Hmac(b"fuzz-secret-key".to_vec()),
        };
        let keys = vec![Key {
            id: "k1".into(),
            material,
            not_after: None,
        }];
        let verifier = Verifier::new(scheme, keys);
        let (headers, body) = headers(&names, data);
        let result = verifier.verify(
            Unverified {
                headers: &headers,
                body,
            },
            now,
        );
        assert!(result.is_err(), "a forged request verified");
    }
}

pub fn schemes() -> Vec<(Scheme, Vec<&'static str>)> {
    let generic = |encoding, template: &str| GenericScheme {
        signature_header: "x-signature".into(),
        timestamp_header: Some("x-timestamp".into()),
        event_id_header: Some("x-event-id".into()),
        key_id_header: Some("x-key-id".into()),
        template: Template::parse(template).unwrap(),
        encoding,
        signature_prefix: "sha256=".into(),
    };
    let g = ["x-signature", "x-timestamp", "x-event-id", "x-key-id"].to_vec();
    vec![
        (Scheme::Stripe, vec!["stripe-signature"]),
        (
            Scheme::Github,
            vec!["x-hub-signature-256", "x-github-delivery"],
        ),
        (
            Scheme::StandardWebhooks,
            vec![
                "webhook-signature",
                "webhook-id",
                "webhook-timestamp",
                "svix-signature",
                "svix-id",
                "svix-timestamp",
            ],
        ),
        (
            Scheme::Slack,
            vec!["x-slack-signature", "x-slack-request-timestamp"],
        ),
        (Scheme::Shopify, vec!["x-shopify-hmac-sha256"]),
        (
            Scheme::HmacSha256(generic(Encoding::Hex, "{timestamp}.{event_id}.{body}")),
            g.clone(),
        ),
        (
            Scheme::Ed25519(generic(Encoding::Base64, "{timestamp}{body}")),
            g,
        ),
    ]
}

/// Splits `data` on 0xff into header values assigned to `names` in turn; the rest is the body.
pub fn headers<'a>(names: &[&'static str], data: &'a [u8]) -> (HeaderMap, &'a [u8]) {
    let mut parts = data.split(|b| *b == 0xff);
    let mut map = HeaderMap::new();
    for name in names {
        if let Some(value) = parts.next()
            && let Ok(v) = HeaderValue::from_bytes(value)
        {
            map.append(HeaderName::from_static(name), v);
        }
    }
    let used: usize = names
        .iter()
        .zip(data.split(|b| *b == 0xff))
        .map(|(_, p)| p.len() + 1)
        .sum();
    (map, data.get(used.min(data.len())..).unwrap_or_default())
}
