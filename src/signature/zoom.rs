//! Zoom: `x-zm-signature: v0=<hex>`, HMAC-SHA256 with the app's secret token over
//! `v0:{x-zm-request-timestamp}:{body}`. Zoom validates the endpoint with a signed
//! `endpoint.url_validation` event that must be answered with an HMAC of its `plainToken`. The
//! signature is Slack's `v0` format under Zoom's header names.

use super::{
    Envelope, Handshake, KeyMaterial, Rejection, SignInput, SigningKey, hmac_secret, hmac_sha256,
};
use axum::http::HeaderMap;
use serde_json::{Value, json};

pub const SIGNATURE: &str = "x-zm-signature";
pub const TIMESTAMP: &str = "x-zm-request-timestamp";

pub fn envelope(headers: &HeaderMap) -> Result<Envelope, Rejection> {
    super::slack::v0_envelope(headers, SIGNATURE, TIMESTAMP)
}

/// `{"plainToken":P,"encryptedToken":hex(HMAC-SHA256(secret, P))}` for `endpoint.url_validation`.
pub fn handshake(body: &[u8], key: &KeyMaterial) -> Option<Handshake> {
    let json: Value = serde_json::from_slice(body).ok()?;
    if json.get("event")?.as_str()? != "endpoint.url_validation" {
        return None;
    }
    let plain = json.pointer("/payload/plainToken")?.as_str()?;
    let KeyMaterial::Hmac(secret) = key else {
        return None;
    };
    let encrypted = const_hex::encode(hmac_sha256(secret, &[plain.as_bytes()]));
    Some(Handshake::Json(
        json!({"plainToken": plain, "encryptedToken": encrypted}).to_string(),
    ))
}

pub fn sign(key: &SigningKey, input: &SignInput) -> Result<Vec<(String, String)>, String> {
    let secret = hmac_secret(key, "zoom")?;
    Ok(super::slack::v0_sign(secret, input, SIGNATURE, TIMESTAMP))
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use super::super::{Handshake, KeyMaterial, Scheme, SigningKey};

    #[test]
    fn round_trip_and_tampering() {
        assert_round_trip(RoundTrip {
            scheme: Scheme::Zoom,
            signer: SigningKey::Hmac(b"right".to_vec()),
            key: KeyMaterial::Hmac(b"right".to_vec()),
            wrong: KeyMaterial::Hmac(b"wrong".to_vec()),
            signature_header: "x-zm-signature",
            corrupt: |v| flip_at(v, "v0=".len()),
            retime: Some(|h| set(h, "x-zm-request-timestamp", "1700000001")),
        });
    }

    #[test]
    fn url_validation_is_answered_with_the_hmac_of_the_plain_token() {
        let body = br#"{"payload":{"plainToken":"qgg8vlvZRS6UYooatFL8Aw"},"event_ts":1654503849680,"event":"endpoint.url_validation"}"#;
        let Some(Handshake::Json(answer)) =
            super::handshake(body, &KeyMaterial::Hmac(b"secret".to_vec()))
        else {
            panic!("a url_validation is a handshake");
        };
        let answer: serde_json::Value = serde_json::from_str(&answer).unwrap();
        assert_eq!(answer["plainToken"], "qgg8vlvZRS6UYooatFL8Aw");
        let expected =
            const_hex::encode(super::hmac_sha256(b"secret", &[b"qgg8vlvZRS6UYooatFL8Aw"]));
        assert_eq!(answer["encryptedToken"], expected.as_str());
        let event = br#"{"event":"meeting.started","payload":{"plainToken":"x"}}"#;
        assert_eq!(
            super::handshake(event, &KeyMaterial::Hmac(b"s".to_vec())),
            None
        );
    }
}
