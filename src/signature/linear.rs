//! Linear: `Linear-Signature` is hex HMAC-SHA256 with the webhook's signing secret over the raw
//! body. The signed timestamp is the body's `webhookTimestamp` (unix milliseconds).

use super::{
    Candidate, Encoding, Envelope, Rejection, SignInput, SigningKey, hmac_secret, hmac_sha256,
    signature_header,
};
use axum::http::HeaderMap;

pub const SIGNATURE: &str = "linear-signature";
pub const DELIVERY: &str = "linear-delivery";
pub const EVENT: &str = "linear-event";

pub fn envelope(headers: &HeaderMap) -> Result<Envelope, Rejection> {
    let candidates =
        signature_header(headers, SIGNATURE, "", Encoding::Hex)?.map(Candidate::HmacSha256);
    let mut env = Envelope::signed(Vec::new(), candidates);
    env.body_timestamp = Some(body_timestamp);
    Ok(env)
}

/// The body's `/webhookTimestamp`, milliseconds, as unix seconds (rounded down).
pub fn body_timestamp(body: &[u8]) -> Result<i64, Rejection> {
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Stamp {
        webhook_timestamp: Option<serde_json::Value>,
    }
    let stamp: Stamp =
        serde_json::from_slice(body).map_err(|_| Rejection::Malformed("missing_timestamp"))?;
    let ms = stamp
        .webhook_timestamp
        .ok_or(Rejection::Malformed("missing_timestamp"))?
        .as_i64()
        .ok_or(Rejection::Malformed("bad_timestamp"))?;
    Ok(ms.div_euclid(1000))
}

pub fn sign(key: &SigningKey, input: &SignInput) -> Result<Vec<(String, String)>, String> {
    let secret = hmac_secret(key, "linear")?;
    let sig = hmac_sha256(secret, &[input.body]);
    let mut out = vec![
        (SIGNATURE.into(), const_hex::encode(sig)),
        (DELIVERY.into(), input.event_id.into()),
    ];
    if let Some(t) = input.event_type {
        out.push((EVENT.into(), t.into()));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use super::super::{KeyMaterial, Rejection, Scheme, SigningKey, Verifier};

    #[test]
    fn the_timestamp_is_the_bodys_webhook_timestamp_in_ms() {
        let body = br#"{"action":"create","type":"Issue","webhookTimestamp":1700000000999}"#;
        let h = headers(super::sign(&SigningKey::Hmac(b"s".to_vec()), &input(body)).unwrap());
        let v = Verifier::new(
            Scheme::Linear,
            vec![key(KEY_ID, KeyMaterial::Hmac(b"s".to_vec()), None)],
        );
        assert_eq!(
            verify(&v, &h, body).unwrap().timestamp(),
            Some(1_700_000_000)
        );
        let unstamped = br#"{"action":"create"}"#;
        let h = headers(super::sign(&SigningKey::Hmac(b"s".to_vec()), &input(unstamped)).unwrap());
        assert_eq!(
            verify(&v, &h, unstamped).unwrap_err(),
            Rejection::Malformed("missing_timestamp")
        );
        let tampered = br#"{"action":"create","type":"Issue","webhookTimestamp":1700000099999}"#;
        assert_eq!(verify(&v, &h, tampered).unwrap_err(), MISMATCH);
    }
}
