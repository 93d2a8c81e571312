//! Twitch EventSub: `Twitch-Eventsub-Message-Signature: sha256=<hex>`, HMAC-SHA256 with the
//! subscription's secret over message id + timestamp + body. The timestamp is RFC 3339. Twitch
//! confirms a subscription with a signed `webhook_callback_verification`, answered with its
//! `challenge` as plain text.

use super::{
    Candidate, Envelope, Handshake, Rejection, SignInput, SigningKey, header_str, hmac_secret,
    hmac_sha256, parse_rfc3339_seconds,
};
use axum::http::HeaderMap;
use serde_json::Value;

pub const SIGNATURE: &str = "twitch-eventsub-message-signature";
pub const MESSAGE_ID: &str = "twitch-eventsub-message-id";
pub const TIMESTAMP: &str = "twitch-eventsub-message-timestamp";
pub const MESSAGE_TYPE: &str = "twitch-eventsub-message-type";
pub const SUBSCRIPTION_TYPE: &str = "twitch-eventsub-subscription-type";

pub fn envelope(headers: &HeaderMap) -> Result<Envelope, Rejection> {
    let ts = header_str(headers, TIMESTAMP)?.ok_or(Rejection::Malformed("missing_timestamp"))?;
    let timestamp = parse_rfc3339_seconds(ts)?;
    let id = header_str(headers, MESSAGE_ID)?.ok_or(Rejection::Malformed("missing_event_id"))?;
    let candidates = match header_str(headers, SIGNATURE)? {
        None => Vec::new(),
        Some(v) => {
            let sig = v
                .strip_prefix("sha256=")
                .and_then(|h| hex::decode(h).ok())
                .ok_or(Rejection::Malformed("bad_signature_header"))?;
            vec![Candidate::HmacSha256(sig)]
        }
    };
    let mut env = Envelope::signed(format!("{id}{ts}").into_bytes(), candidates);
    env.timestamp = Some(timestamp);
    env.signed_id = Some(id.to_string());
    Ok(env)
}

pub fn handshake(headers: &HeaderMap, body: &[u8]) -> Option<Handshake> {
    let kind = headers.get(MESSAGE_TYPE)?.to_str().ok()?;
    if kind != "webhook_callback_verification" {
        return None;
    }
    let json: Value = serde_json::from_slice(body).ok()?;
    Some(Handshake::Text(json.get("challenge")?.as_str()?.to_string()))
}

pub fn sign(key: &SigningKey, input: &SignInput) -> Result<Vec<(String, String)>, String> {
    let secret = hmac_secret(key, "twitch")?;
    let ts = chrono::DateTime::from_timestamp(input.timestamp, 0)
        .ok_or("timestamp out of range")?
        .to_rfc3339_opts(chrono::SecondsFormat::Nanos, true);
    let sig = hmac_sha256(secret, &[input.event_id.as_bytes(), ts.as_bytes(), input.body]);
    let mut out = vec![
        (SIGNATURE.into(), format!("sha256={}", hex::encode(sig))),
        (MESSAGE_ID.into(), input.event_id.into()),
        (TIMESTAMP.into(), ts),
        (MESSAGE_TYPE.into(), "notification".into()),
    ];
    if let Some(t) = input.event_type {
        out.push((SUBSCRIPTION_TYPE.into(), t.into()));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use super::super::{Handshake, KeyMaterial, Scheme, SigningKey};

    #[test]
    fn round_trip_and_tampering() {
        assert_round_trip(RoundTrip {
            scheme: Scheme::Twitch,
            signer: SigningKey::Hmac(b"right".to_vec()),
            key: KeyMaterial::Hmac(b"right".to_vec()),
            wrong: KeyMaterial::Hmac(b"wrong".to_vec()),
            signature_header: "twitch-eventsub-message-signature",
            corrupt: |v| flip_at(v, "sha256=".len()),
            retime: Some(|h| {
                set(
                    h,
                    "twitch-eventsub-message-timestamp",
                    "2023-11-14T22:13:21.000000000Z",
                )
            }),
        });
    }

    #[test]
    fn callback_verification_answers_the_challenge() {
        let h = headers([("Twitch-Eventsub-Message-Type", "webhook_callback_verification")]);
        let body = br#"{"challenge":"pogchamp-kappa-360noscope-vohiyo","subscription":{}}"#;
        assert_eq!(
            super::handshake(&h, body),
            Some(Handshake::Text("pogchamp-kappa-360noscope-vohiyo".into()))
        );
        let n = headers([("Twitch-Eventsub-Message-Type", "notification")]);
        assert_eq!(super::handshake(&n, body), None);
    }
}
