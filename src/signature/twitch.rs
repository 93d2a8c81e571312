//! Twitch EventSub: `Twitch-Eventsub-Message-Signature: sha256=<hex>`, HMAC-SHA256 with the
//! subscription's secret over message id + timestamp + body. The timestamp is RFC 3339. Twitch
//! confirms a subscription with a signed `webhook_callback_verification`, answered with its
//! `challenge` as plain text.

use super::{
    Candidate, Encoding, Envelope, Handshake, Rejection, SignInput, SigningKey, header_str,
    hmac_secret, hmac_sha256, parse_rfc3339_seconds, signature_header,
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
    let candidates =
        signature_header(headers, SIGNATURE, "sha256=", Encoding::Hex)?.map(Candidate::HmacSha256);
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
    Some(Handshake::Text(
        json.get("challenge")?.as_str()?.to_string(),
    ))
}

pub fn sign(key: &SigningKey, input: &SignInput) -> Result<Vec<(String, String)>, String> {
    let secret = hmac_secret(key, "twitch")?;
    let ts = chrono::DateTime::from_timestamp(input.timestamp, 0)
        .ok_or("timestamp out of range")?
        .to_rfc3339_opts(chrono::SecondsFormat::Nanos, true);
    let sig = hmac_sha256(
        secret,
        &[input.event_id.as_bytes(), ts.as_bytes(), input.body],
    );
    let mut out = vec![
        (
            SIGNATURE.into(),
            format!("sha256={}", const_hex::encode(sig)),
        ),
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
    use super::super::{Handshake, KeyMaterial, Scheme, SigningKey, Verifier};

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
        let h = headers([(
            "Twitch-Eventsub-Message-Type",
            "webhook_callback_verification",
        )]);
        let body = br#"{"challenge":"pogchamp-kappa-360noscope-vohiyo","subscription":{}}"#;
        assert_eq!(
            super::handshake(&h, body),
            Some(Handshake::Text("pogchamp-kappa-360noscope-vohiyo".into()))
        );
        let n = headers([("Twitch-Eventsub-Message-Type", "notification")]);
        assert_eq!(super::handshake(&n, body), None);
    }

    /// Twitch publishes no worked example with a secret, and its docs' sample signature is cut
    /// short. This `channel.follow` notification, secret `secretabcd`, is pinned by the community
    /// client twitch-rs/twitch_api (src/eventsub/mod.rs, test `verify_request`): a whole request,
    /// its Content-Length (458) matching the body, whose timestamp has seven fractional digits.
    #[test]
    fn twitch_cli_request_pinned_by_twitch_api() {
        const BODY: &[u8] = br#"{"subscription":{"id":"ae2ff348-e102-16be-a3eb-6830c1bf38d2","status":"enabled","type":"channel.follow","version":"1","condition":{"broadcaster_user_id":"44429626"},"transport":{"method":"webhook","callback":"null"},"created_at":"2021-02-19T23:47:00.7621315Z"},"event":{"user_id":"28408015","user_login":"testFromUser","user_name":"testFromUser","broadcaster_user_id":"44429626","broadcaster_user_login":"44429626","broadcaster_user_name":"testBroadcaster"}}"#;
        const SIG: &str = "sha256=d10f5bd9474b7ac7bd7105eb79c2d52768b4d0cd2a135982c3bf5a1d59a78823";
        assert_eq!(BODY.len(), 458);
        let v = Verifier::new(
            Scheme::Twitch,
            vec![key(
                KEY_ID,
                Scheme::Twitch.parse_key(b"secretabcd").unwrap(),
                None,
            )],
        );
        let h = headers([
            (
                "Twitch-Eventsub-Message-Id",
                "ae2ff348-e102-16be-a3eb-6830c1bf38d2",
            ),
            ("Twitch-Eventsub-Message-Retry", "0"),
            ("Twitch-Eventsub-Message-Signature", SIG),
            (
                "Twitch-Eventsub-Message-Timestamp",
                "2021-02-19T23:47:00.8091512Z",
            ),
            ("Twitch-Eventsub-Message-Type", "notification"),
            ("Twitch-Eventsub-Subscription-Type", "channel.follow"),
            ("Twitch-Eventsub-Subscription-Version", "1"),
        ]);
        let ok = verify(&v, &h, BODY).expect("the CLI's request verifies");
        assert_eq!(ok.signed_id(), Some("ae2ff348-e102-16be-a3eb-6830c1bf38d2"));
        assert_eq!(ok.timestamp(), Some(1_613_778_420));

        let one_byte = String::from_utf8(BODY.to_vec())
            .unwrap()
            .replace("28408015", "28408016");
        assert_eq!(verify(&v, &h, one_byte.as_bytes()).unwrap_err(), MISMATCH);
        // The id is signed too: the same body and signature under another message id is refused.
        let mut other_id = h.clone();
        set(
            &mut other_id,
            "twitch-eventsub-message-id",
            "ae2ff348-e102-16be-a3eb-6830c1bf38d3",
        );
        assert_eq!(verify(&v, &other_id, BODY).unwrap_err(), MISMATCH);
        let mut flipped = h.clone();
        set(
            &mut flipped,
            "twitch-eventsub-message-signature",
            &flip_at(SIG, SIG.len() - 1),
        );
        assert_eq!(verify(&v, &flipped, BODY).unwrap_err(), MISMATCH);
    }
}
