//! Square: `x-square-hmacsha256-signature` is base64 HMAC-SHA256 with the subscription's
//! signature key over the notification URL followed by the raw body. Square signs no timestamp.

use super::{
    Candidate, Encoding, Envelope, Rejection, SignInput, SigningKey, hmac_secret, hmac_sha256,
    signature_header,
};
use axum::http::HeaderMap;
use base64::Engine;
use base64::engine::general_purpose::STANDARD;

pub const SIGNATURE: &str = "x-square-hmacsha256-signature";

pub fn envelope(public_url: &str, headers: &HeaderMap) -> Result<Envelope, Rejection> {
    let candidates =
        signature_header(headers, SIGNATURE, "", Encoding::Base64)?.map(Candidate::HmacSha256);
    Ok(Envelope::signed(public_url.as_bytes().to_vec(), candidates))
}

pub fn sign(
    public_url: &str,
    key: &SigningKey,
    input: &SignInput,
) -> Result<Vec<(String, String)>, String> {
    let secret = hmac_secret(key, "square")?;
    let sig = hmac_sha256(secret, &[public_url.as_bytes(), input.body]);
    Ok(vec![(SIGNATURE.into(), STANDARD.encode(sig))])
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use super::super::{KeyMaterial, Scheme, SigningKey, Verifier};

    fn scheme() -> Scheme {
        Scheme::Square {
            public_url: "https://example.com/hooks/shop/square".into(),
        }
    }

    #[test]
    fn round_trip_and_tampering() {
        assert_round_trip(RoundTrip {
            scheme: scheme(),
            signer: SigningKey::Hmac(b"right".to_vec()),
            key: KeyMaterial::Hmac(b"right".to_vec()),
            wrong: KeyMaterial::Hmac(b"wrong".to_vec()),
            signature_header: "x-square-hmacsha256-signature",
            corrupt: |v| flip_at(v, 0),
            retime: None,
        });
    }

    #[test]
    fn the_url_is_signed() {
        let body = b"{}";
        let h = headers(
            scheme()
                .sign(&SigningKey::Hmac(b"k".to_vec()), &input(body))
                .unwrap(),
        );
        let elsewhere = Scheme::Square {
            public_url: "https://example.com/hooks/shop/other".into(),
        };
        let v = Verifier::new(
            elsewhere,
            vec![key(KEY_ID, KeyMaterial::Hmac(b"k".to_vec()), None)],
        );
        assert_eq!(verify(&v, &h, body).unwrap_err(), MISMATCH);
    }

    /// The vector pinned by Square's SDK (square/square-python-sdk,
    /// tests/utilities/test_webhooks_helper.py, for `is_valid_webhook_event_signature`): signature
    /// key, notification URL, a `webhooks.test_notification` body and its signature header.
    #[test]
    fn square_sdk_published_vector() {
        const URL: &str = "https://webhook.site/679a4f3a-dcfa-49ee-bac5-9d0edad886b9";
        const BODY: &[u8] = br#"{"merchant_id":"MLEFBHHSJGVHD","type":"webhooks.test_notification","event_id":"ac3ac95b-f97d-458c-a6e6-18981597e05f","created_at":"2022-07-13T20:30:59.037339943Z","data":{"type":"webhooks","id":"bc368e64-01aa-407e-b46e-3231809b1129"}}"#;
        const SIG: &str = "GF4YkrJgGBDZ9NIYbNXBnMzqb2HoL4RW/S6vkZ9/2N4=";
        let verifier = |url: &str| {
            let scheme = Scheme::Square {
                public_url: url.into(),
            };
            let material = scheme.parse_key(b"Ibxx_5AKakO-3qeNVR61Dw").unwrap();
            Verifier::new(scheme, vec![key(KEY_ID, material, None)])
        };
        let h = headers([("x-square-hmacsha256-signature", SIG)]);
        verify(&verifier(URL), &h, BODY).expect("Square's own example verifies");

        // The SDK's own negative cases: the body one month earlier, the URL one digit shorter.
        let earlier = String::from_utf8(BODY.to_vec())
            .unwrap()
            .replace("2022-07-13", "2022-06-13");
        assert_eq!(
            verify(&verifier(URL), &h, earlier.as_bytes()).unwrap_err(),
            MISMATCH
        );
        let shorter = URL.replace("/679a4f3a", "/79a4f3a");
        assert_eq!(verify(&verifier(&shorter), &h, BODY).unwrap_err(), MISMATCH);
        let mut flipped = h.clone();
        set(
            &mut flipped,
            "x-square-hmacsha256-signature",
            &flip_at(SIG, 0),
        );
        assert_eq!(
            verify(&verifier(URL), &flipped, BODY).unwrap_err(),
            MISMATCH
        );
    }
}
