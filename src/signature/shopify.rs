//! Shopify: `X-Shopify-Hmac-Sha256: <base64>`, HMAC-SHA256 over the raw body. No timestamp is
//! signed, so replay protection rests on the webhook id and the signature digest.

use super::{
    Candidate, Encoding, Envelope, Rejection, SignInput, SigningKey, hmac_secret, hmac_sha256,
    signature_header,
};
use axum::http::HeaderMap;
use base64::Engine;
use base64::engine::general_purpose::STANDARD;

const SIGNATURE: &str = "x-shopify-hmac-sha256";
const WEBHOOK_ID: &str = "x-shopify-webhook-id";
const TOPIC: &str = "x-shopify-topic";

pub fn envelope(headers: &HeaderMap) -> Result<Envelope, Rejection> {
    let candidates =
        signature_header(headers, SIGNATURE, "", Encoding::Base64)?.map(Candidate::HmacSha256);
    Ok(Envelope::signed(Vec::new(), candidates))
}

pub fn sign(key: &SigningKey, input: &SignInput) -> Result<Vec<(String, String)>, String> {
    let secret = hmac_secret(key, "shopify")?;
    let sig = hmac_sha256(secret, &[input.body]);
    let mut out = vec![
        (SIGNATURE.into(), STANDARD.encode(sig)),
        (WEBHOOK_ID.into(), input.event_id.into()),
    ];
    if let Some(t) = input.event_type {
        out.push((TOPIC.into(), t.into()));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use super::super::{KeyMaterial, Rejection, Scheme, SigningKey, Verifier};

    #[test]
    fn round_trip_and_tampering() {
        assert_round_trip(RoundTrip {
            scheme: Scheme::Shopify,
            signer: SigningKey::Hmac(b"right".to_vec()),
            key: KeyMaterial::Hmac(b"right".to_vec()),
            wrong: KeyMaterial::Hmac(b"wrong".to_vec()),
            signature_header: "x-shopify-hmac-sha256",
            corrupt: |v| flip_at(v, 0),
            retime: None,
        });
    }

    /// Shopify publishes no test vector; this one was computed independently with Python's hmac
    /// module: base64(hmac.new(b"shpss_hookgate_test_secret", BODY, hashlib.sha256).digest()).
    #[test]
    fn independently_computed_vector() {
        const SECRET: &[u8] = b"shpss_hookgate_test_secret\n";
        const BODY: &[u8] =
            br#"{"id":820982911946154508,"email":"jon@example.com","topic":"orders/create"}"#;
        const SIG: &str = "SxeQI1piTzdbQMQhOa1HjSaa/CV7fmmH+Pur8q1A3KI=";
        let material = Scheme::Shopify.parse_key(SECRET).unwrap();
        let v = Verifier::new(Scheme::Shopify, vec![key("shop", material, None)]);
        let h = headers([("X-Shopify-Hmac-Sha256", SIG)]);
        assert_eq!(verify(&v, &h, BODY).unwrap().timestamp(), None);
        assert_eq!(verify(&v, &h, &BODY[1..]).unwrap_err(), MISMATCH);
    }

    #[test]
    fn sign_emits_id_and_topic() {
        let signed = Scheme::Shopify
            .sign(&SigningKey::Hmac(b"k".to_vec()), &input(b"{}"))
            .unwrap();
        let names: Vec<&str> = signed.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names,
            [
                "x-shopify-hmac-sha256",
                "x-shopify-webhook-id",
                "x-shopify-topic"
            ]
        );
        assert_eq!(signed[1].1, "evt_1");
        assert_eq!(signed[2].1, "thing.created");
    }

    #[test]
    fn header_shape_decides_400_or_401() {
        let v = Verifier::new(
            Scheme::Shopify,
            vec![key("s", KeyMaterial::Hmac(b"s".to_vec()), None)],
        );
        let h = headers([("x-shopify-hmac-sha256", "not base64!")]);
        assert_eq!(
            verify(&v, &h, b"x").unwrap_err(),
            Rejection::Malformed("bad_signature_header")
        );
        let none: [(&str, &str); 0] = [];
        let err = verify(&v, &headers(none), b"x").unwrap_err();
        assert_eq!(err, Rejection::InvalidSignature("missing_signature"));
    }
}
