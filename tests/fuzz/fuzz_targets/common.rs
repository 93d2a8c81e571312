//! Shared by the targets: every scheme hookgate has, with the header names it reads, and a header
//! map built from fuzzer bytes (values that are not valid header bytes are dropped, as hyper would).
//! The name `?` stands for the query string (Twilio signs it; Meta's subscription reads it).

use hookgate::signature::{
    Encoding, GenericScheme, Key, KeyMaterial, Scheme, Template, Unverified, Verifier,
};
use http::{HeaderMap, HeaderName, HeaderValue};

/// The `header_parsers` target: every scheme's parser on arbitrary values may refuse, never panic.
pub fn parse_headers(data: &[u8]) {
    for (scheme, names) in schemes() {
        let (headers, query, body) = headers(&names, data);
        let _ = scheme.envelope(&headers, query.as_deref());
        let _ = hookgate::signature::meta::subscribe(query.as_deref(), b"verify-token");
        let _ = hookgate::signature::twilio::form_pairs(body);
        let _ = hookgate::signature::linear::body_timestamp(body);
    }
}

/// The `verify` target: arbitrary headers and body against real keys never panic and never
/// verify (nobody signed them, and neither a fuzzer nor a PRNG can forge HMAC or Ed25519).
pub fn verify_unsigned(data: &[u8]) {
    let now = chrono::DateTime::from_timestamp(1_700_000_000, 0).unwrap();
    for (scheme, names) in schemes() {
        let material = match &scheme {
            Scheme::Ed25519(_) | Scheme::Discord => KeyMaterial::Ed25519(
                ed25519_dalek::SigningKey::from_bytes(&[7u8; 32]).verifying_key(),
            ),
            Scheme::Sendgrid => KeyMaterial::EcdsaP256(
                *p256::ecdsa::SigningKey::from_slice(&[7u8; 32])
                    .expect("scalar in range")
                    .verifying_key(),
            ),
            _ => KeyMaterial::Hmac(b"fuzz-secret-key".to_vec()),
        };
        let keys = vec![Key {
            id: "k1".into(),
            material,
            not_after: None,
        }];
        let verifier = Verifier::new(scheme, keys);
        let (headers, query, body) = headers(&names, data);
        let result = verifier.verify(
            Unverified {
                headers: &headers,
                query: query.as_deref(),
                body,
            },
            now,
        );
        // GitLab's token is a password, not a signature: a fuzzer that guessed
        // "fuzz-secret-key" would pass, and is not a forgery of a signature.
        if !matches!(verifier.scheme(), Scheme::Gitlab) {
            assert!(result.is_err(), "a forged request verified");
        }
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
        (
            Scheme::Discord,
            vec!["x-signature-ed25519", "x-signature-timestamp"],
        ),
        (
            Scheme::Twilio {
                public_url: "https://example.com/hooks/t".into(),
            },
            vec!["x-twilio-signature", "?"],
        ),
        (
            Scheme::Twitch,
            vec![
                "twitch-eventsub-message-signature",
                "twitch-eventsub-message-id",
                "twitch-eventsub-message-timestamp",
                "twitch-eventsub-message-type",
            ],
        ),
        (
            Scheme::Zoom,
            vec!["x-zm-signature", "x-zm-request-timestamp"],
        ),
        (Scheme::Meta, vec!["x-hub-signature-256", "?"]),
        (
            Scheme::Gitlab,
            vec!["x-gitlab-token", "x-gitlab-event-uuid"],
        ),
        (Scheme::Paddle, vec!["paddle-signature"]),
        (
            Scheme::Square {
                public_url: "https://example.com/hooks/s".into(),
            },
            vec!["x-square-hmacsha256-signature"],
        ),
        (
            Scheme::Sendgrid,
            vec![
                "x-twilio-email-event-webhook-signature",
                "x-twilio-email-event-webhook-timestamp",
            ],
        ),
        (Scheme::Linear, vec!["linear-signature"]),
    ]
}

/// Splits `data` on 0xff into header values assigned to `names` in turn (`?`: the query
/// string); the rest is the body.
pub fn headers<'a>(
    names: &[&'static str],
    data: &'a [u8],
) -> (HeaderMap, Option<String>, &'a [u8]) {
    let mut parts = data.split(|b| *b == 0xff);
    let mut map = HeaderMap::new();
    let mut query = None;
    for name in names {
        let Some(value) = parts.next() else { continue };
        if *name == "?" {
            // As hyper hands it over: a URI's query is visible ASCII.
            query = std::str::from_utf8(value)
                .ok()
                .filter(|q| q.bytes().all(|b| b.is_ascii_graphic()))
                .map(str::to_string);
        } else if let Ok(v) = HeaderValue::from_bytes(value) {
            map.append(HeaderName::from_static(name), v);
        }
    }
    let used: usize = names
        .iter()
        .zip(data.split(|b| *b == 0xff))
        .map(|(_, p)| p.len() + 1)
        .sum();
    (
        map,
        query,
        data.get(used.min(data.len())..).unwrap_or_default(),
    )
}
