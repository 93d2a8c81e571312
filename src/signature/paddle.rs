//! Paddle Billing: `Paddle-Signature: ts=<unix>;h1=<hex>`, HMAC-SHA256 with the notification
//! destination's secret over `{ts}:{body}`. While a secret rotates Paddle sends several `h1`.

use super::{
    Candidate, Envelope, Rejection, SignInput, SigningKey, header_str, hmac_secret, hmac_sha256,
    parse_unix_seconds,
};
use axum::http::HeaderMap;

pub const SIGNATURE: &str = "paddle-signature";

pub fn envelope(headers: &HeaderMap) -> Result<Envelope, Rejection> {
    let Some(value) = header_str(headers, SIGNATURE)? else {
        // Paddle's timestamp travels in the signature header, as Stripe's does: no header is no
        // signature (401), as it is for Stripe.
        return Ok(Envelope::signed(Vec::new(), Vec::new()));
    };
    let mut ts = None;
    let mut candidates = Vec::new();
    for part in value.split(';') {
        match part.split_once('=') {
            Some(("ts", v)) if ts.is_none() => ts = Some(v),
            Some(("ts", _)) => return Err(Rejection::Malformed("bad_signature_header")),
            // An h1 that is not hex cannot match; the others stay usable.
            Some(("h1", v)) => {
                candidates.extend(super::decode_hex(v).ok().map(Candidate::HmacSha256))
            }
            _ => {}
        }
    }
    let ts = ts.ok_or(Rejection::Malformed("missing_timestamp"))?;
    let mut env = Envelope::signed(format!("{ts}:").into_bytes(), candidates);
    env.timestamp = Some(parse_unix_seconds(ts)?);
    Ok(env)
}

pub fn sign(key: &SigningKey, input: &SignInput) -> Result<Vec<(String, String)>, String> {
    let secret = hmac_secret(key, "paddle")?;
    let ts = input.timestamp.to_string();
    let sig = hmac_sha256(secret, &[ts.as_bytes(), b":", input.body]);
    Ok(vec![(
        SIGNATURE.into(),
        format!("ts={ts};h1={}", const_hex::encode(sig)),
    )])
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use super::super::{KeyMaterial, Scheme, SigningKey, Verifier};

    #[test]
    fn round_trip_and_tampering() {
        assert_round_trip(RoundTrip {
            scheme: Scheme::Paddle,
            signer: SigningKey::Hmac(b"right".to_vec()),
            key: KeyMaterial::Hmac(b"right".to_vec()),
            wrong: KeyMaterial::Hmac(b"wrong".to_vec()),
            signature_header: "paddle-signature",
            corrupt: |v| flip_at(v, "ts=1700000000;h1=".len()),
            retime: Some(|h| {
                let v = h["paddle-signature"]
                    .to_str()
                    .unwrap()
                    .replace("ts=1700000000", "ts=1700000001");
                set(h, "paddle-signature", &v)
            }),
        });
    }

    /// The vector pinned by Paddle's own SDK (PaddleHQ/paddle-python-sdk,
    /// tests/Unit/Notification/test_Verifier.py): a header with a malformed `h1` and a valid one,
    /// and three notification secrets of which only the third signed. It covers what rotation
    /// looks like on the wire: several `h1`, several keys, one match.
    #[test]
    fn paddle_sdk_published_vector() {
        const HEADER: &str = "ts=1696195954;h1=dummy;\
            h1=d96299976a6eb066f484d7fde011ac56fc32b38fc9940bc419d6e537fdc6ef02";
        const SECRETS: [&str; 3] = [
            "pdl_ntf_01hbpjmytsa32fhr36nqgc3kgb_TjIG2BXbm83HPXqNfziwe506sBEdqL/4",
            "pdl_ntf_01hbpjmytsa32fhr36nqgc3kgb_vB/yIOnTOCWIvpBadM5jzBZPHc7OmdSo",
            "pdl_ntf_01hbpjmytsa32fhr36nqgc3kgb_WvRO0eL4Bj9rgYYIBZY6wZhG4EHy9jzh",
        ];
        let keys = SECRETS
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let material = Scheme::Paddle.parse_key(s.as_bytes()).unwrap();
                key(&format!("k{i}"), material, None)
            })
            .collect();
        let v = Verifier::new(Scheme::Paddle, keys);
        let h = headers([("Paddle-Signature", HEADER)]);
        let ok = verify_at(&v, &h, b"hello-world", at(1_696_195_954)).unwrap();
        assert_eq!(ok.key_id(), "k2", "only the third secret signed");
        assert_eq!(ok.timestamp(), Some(1_696_195_954));

        assert_eq!(
            verify_at(&v, &h, b"hello-worle", at(1_696_195_954)).unwrap_err(),
            MISMATCH,
            "one byte of the body"
        );
        let mut flipped = h.clone();
        set(
            &mut flipped,
            "paddle-signature",
            &flip_at(HEADER, HEADER.len() - 1),
        );
        assert_eq!(
            verify_at(&v, &flipped, b"hello-world", at(1_696_195_954)).unwrap_err(),
            MISMATCH,
            "one digit of the valid h1"
        );
    }
}
