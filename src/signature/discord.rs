//! Discord (interactions endpoint and webhook events): `X-Signature-Ed25519` is hex Ed25519 over
//! `{X-Signature-Timestamp}{body}`, verified with the application's public key (hex, as the
//! developer portal shows it). Discord checks the endpoint with signed PINGs.

use super::{
    Candidate, Encoding, Envelope, Handshake, Rejection, SignInput, SigningKey, signature_header,
    unix_seconds_header,
};
use axum::http::HeaderMap;
use ed25519_dalek::{Signature, Signer};
use serde_json::Value;

pub const SIGNATURE: &str = "x-signature-ed25519";
pub const TIMESTAMP: &str = "x-signature-timestamp";

pub fn envelope(headers: &HeaderMap) -> Result<Envelope, Rejection> {
    let (ts, timestamp) = unix_seconds_header(headers, TIMESTAMP)?;
    let candidates = match signature_header(headers, SIGNATURE, "", Encoding::Hex)? {
        None => Vec::new(),
        Some(bytes) => {
            let sig = Signature::from_slice(&bytes)
                .map_err(|_| Rejection::InvalidSignature("bad_signature_length"))?;
            vec![Candidate::Ed25519(sig)]
        }
    };
    let mut env = Envelope::signed(ts.as_bytes().to_vec(), candidates);
    env.timestamp = Some(timestamp);
    Ok(env)
}

/// Interactions PING (`"type":1`, no `event`) is answered `{"type":1}` (PONG); a webhook-events
/// PING (`"type":0`) is answered 204. A `"type":1` with an `event` is a real webhook event.
pub fn handshake(body: &[u8]) -> Option<Handshake> {
    let json: Value = serde_json::from_slice(body).ok()?;
    match json.get("type")?.as_i64()? {
        1 if json.get("event").is_none() => Some(Handshake::Json(r#"{"type":1}"#.into())),
        0 => Some(Handshake::NoContent),
        _ => None,
    }
}

pub fn sign(key: &SigningKey, input: &SignInput) -> Result<Vec<(String, String)>, String> {
    let SigningKey::Ed25519(private) = key else {
        return Err(
            "discord needs the application's Ed25519 private key (--signing-key-file)".into(),
        );
    };
    let ts = input.timestamp.to_string();
    let message = [ts.as_bytes(), input.body].concat();
    let sig = private.sign(&message).to_bytes();
    Ok(vec![
        (SIGNATURE.into(), const_hex::encode(sig)),
        (TIMESTAMP.into(), ts),
    ])
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use super::super::{Handshake, KeyMaterial, Scheme, SigningKey};

    #[test]
    fn round_trip_and_tampering() {
        assert_round_trip(RoundTrip {
            scheme: Scheme::Discord,
            signer: SigningKey::Ed25519(ed_signer(3)),
            key: KeyMaterial::Ed25519(ed_signer(3).verifying_key()),
            wrong: KeyMaterial::Ed25519(ed_signer(4).verifying_key()),
            signature_header: "x-signature-ed25519",
            corrupt: |v| flip_at(v, 0),
            retime: Some(|h| set(h, "x-signature-timestamp", "1700000001")),
        });
    }

    #[test]
    fn pings_are_recognised_and_events_are_not() {
        assert_eq!(
            super::handshake(br#"{"type":1,"id":"1","application_id":"2"}"#),
            Some(Handshake::Json(r#"{"type":1}"#.into()))
        );
        assert_eq!(
            super::handshake(br#"{"version":1,"application_id":"2","type":0}"#),
            Some(Handshake::NoContent)
        );
        for body in [
            &br#"{"type":1,"event":{"type":"APPLICATION_AUTHORIZED"}}"#[..],
            br#"{"type":2,"id":"1"}"#,
            br#"{"type":"1"}"#,
            b"not json",
        ] {
            assert_eq!(
                super::handshake(body),
                None,
                "{}",
                String::from_utf8_lossy(body)
            );
        }
    }
}
