//! Square: `x-square-hmacsha256-signature` is base64 HMAC-SHA256 with the subscription's
//! signature key over the notification URL followed by the raw body. Square signs no timestamp.

use super::{
    Candidate, Envelope, Rejection, SignInput, SigningKey, header_str, hmac_secret, hmac_sha256,
};
use axum::http::HeaderMap;
use base64::Engine;
use base64::engine::general_purpose::STANDARD;

pub const SIGNATURE: &str = "x-square-hmacsha256-signature";

pub fn envelope(public_url: &str, headers: &HeaderMap) -> Result<Envelope, Rejection> {
    let candidates = match header_str(headers, SIGNATURE)? {
        None => Vec::new(),
        Some(v) => {
            let sig = STANDARD
                .decode(v)
                .map_err(|_| Rejection::Malformed("bad_signature_header"))?;
            vec![Candidate::HmacSha256(sig)]
        }
    };
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
        let h = headers(scheme().sign(&SigningKey::Hmac(b"k".to_vec()), &input(body)).unwrap());
        let elsewhere = Scheme::Square {
            public_url: "https://example.com/hooks/shop/other".into(),
        };
        let v = Verifier::new(elsewhere, vec![key(KEY_ID, KeyMaterial::Hmac(b"k".to_vec()), None)]);
        assert_eq!(verify(&v, &h, body).unwrap_err(), MISMATCH);
    }
}
