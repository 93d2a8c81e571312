//! Twilio: `X-Twilio-Signature` is base64 HMAC-SHA1 with the account's auth token over the URL
//! Twilio was configured with (`spec.scheme.publicUrl` plus the request's query string) followed
//! by each form parameter's name and value, sorted by name. For a JSON body Twilio puts
//! `bodySHA256=<hex sha256(body)>` in the query and signs the URL alone; the body must then hash
//! to it. Twilio signs no timestamp: replay protection is the signature digest.

use super::{
    Candidate, Encoding, Envelope, Rejection, SignInput, SignedBody, SigningKey, hmac_secret,
    hmac_sha1, signature_header,
};
use axum::http::HeaderMap;
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;

pub const SIGNATURE: &str = "x-twilio-signature";
pub const IDEMPOTENCY_TOKEN: &str = "i-twilio-idempotency-token";
const BODY_HASH: &str = "bodySHA256";

pub fn envelope(
    public_url: &str,
    headers: &HeaderMap,
    query: Option<&str>,
) -> Result<Envelope, Rejection> {
    let candidates =
        signature_header(headers, SIGNATURE, "", Encoding::Base64)?.map(Candidate::HmacSha1);
    let query = query.filter(|q| !q.is_empty());
    let mut hashes = form_urlencoded::parse(query.unwrap_or("").as_bytes())
        .filter(|(name, _)| name == BODY_HASH)
        .map(|(_, value)| value);
    let body = match (hashes.next(), hashes.next()) {
        (None, _) => SignedBody::FormPairs,
        (Some(hash), None) => {
            let mut want = [0u8; 32];
            super::decode_hex_to_slice(hash.as_bytes(), &mut want)
                .map_err(|_| Rejection::Malformed("bad_body_hash"))?;
            SignedBody::Sha256(want)
        }
        (Some(_), Some(_)) => return Err(Rejection::Malformed("bad_body_hash")),
    };
    let url = match query {
        Some(q) => format!("{public_url}?{q}"),
        None => public_url.to_string(),
    };
    let mut env = Envelope::signed(url.into_bytes(), candidates);
    env.body = body;
    Ok(env)
}

/// What Twilio appends to the URL for a form body: for each parameter name in order, the name
/// then each of its distinct values in order (as twilio-python's `RequestValidator` does).
pub fn form_pairs(body: &[u8]) -> Result<Vec<u8>, Rejection> {
    let mut params: BTreeMap<String, std::collections::BTreeSet<String>> = BTreeMap::new();
    for (name, value) in form_urlencoded::parse(body) {
        params
            .entry(name.into_owned())
            .or_default()
            .insert(value.into_owned());
    }
    let mut out = Vec::with_capacity(body.len());
    for (name, values) in params {
        for value in values {
            out.extend_from_slice(name.as_bytes());
            out.extend_from_slice(value.as_bytes());
        }
    }
    Ok(out)
}

fn is_json(body: &[u8]) -> bool {
    matches!(
        body.iter().find(|b| !b.is_ascii_whitespace()),
        Some(b'{' | b'[')
    )
}

/// `bodySHA256=<hex>` for a JSON body, which Twilio puts in the URL it signs.
pub fn signed_query(body: &[u8]) -> Option<String> {
    is_json(body).then(|| format!("{BODY_HASH}={}", const_hex::encode(Sha256::digest(body))))
}

pub fn sign(
    public_url: &str,
    key: &SigningKey,
    input: &SignInput,
) -> Result<Vec<(String, String)>, String> {
    let secret = hmac_secret(key, "twilio")?;
    let sig = match signed_query(input.body) {
        Some(q) => hmac_sha1(secret, &[public_url.as_bytes(), b"?", q.as_bytes()]),
        None => {
            let pairs = form_pairs(input.body).map_err(|r| r.reason().to_string())?;
            hmac_sha1(secret, &[public_url.as_bytes(), &pairs])
        }
    };
    Ok(vec![
        (SIGNATURE.into(), STANDARD.encode(sig)),
        (IDEMPOTENCY_TOKEN.into(), input.event_id.into()),
    ])
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use super::super::{KeyMaterial, Rejection, Scheme, SigningKey, Unverified, Verifier};

    const URL: &str = "https://mycompany.com/myapp.php?foo=1&bar=2";

    /// Twilio's documented example (request validation, twilio-php's validation docs): auth token
    /// 12345, this URL and these form parameters sign to `RSOYDt4T1cUTdK1PDd93/VVr8B8=`, the
    /// value pinned in twilio-python's tests/unit/test_request_validator.py.
    #[test]
    fn twilio_docs_published_vector() {
        let scheme = Scheme::Twilio {
            public_url: "https://mycompany.com/myapp.php".into(),
        };
        let v = Verifier::new(
            scheme,
            vec![key(KEY_ID, KeyMaterial::Hmac(b"12345".to_vec()), None)],
        );
        // Field order on the wire does not matter: Twilio sorts by name.
        let body = b"To=%2B18005551212&Digits=1234&From=%2B14158675309&Caller=%2B14158675309&CallSid=CA1234567890ABCDE";
        let h = headers([("X-Twilio-Signature", "RSOYDt4T1cUTdK1PDd93/VVr8B8=")]);
        let query = URL.split_once('?').map(|(_, q)| q);
        let req = |body: &'static [u8]| Unverified {
            headers: &h,
            query,
            body,
        };
        v.verify(req(body), now())
            .expect("Twilio's own example verifies");
        assert_eq!(
            v.verify(req(b"CallSid=CA1234567890ABCDE&Digits=9"), now())
                .unwrap_err(),
            MISMATCH
        );
    }

    /// twilio-python's tests/unit/test_request_validator.py (`test_validation_of_body_succeeds`):
    /// a JSON body whose SHA-256 travels as `bodySHA256` in the signed URL, token 12345.
    #[test]
    fn twilio_json_body_published_vector() {
        const BODY: &[u8] = br#"{"property": "value", "boolean": true}"#;
        const QUERY: &str = "foo=1&bar=2&bodySHA256=0a1ff7634d9ab3b95db5c9a2dfe9416e41502b283a80c7cf19632632f96e6620";
        let v = Verifier::new(
            Scheme::Twilio {
                public_url: "https://mycompany.com/myapp.php".into(),
            },
            vec![key(KEY_ID, KeyMaterial::Hmac(b"12345".to_vec()), None)],
        );
        let h = headers([("X-Twilio-Signature", "a9nBmqA0ju/hNViExpshrM61xv4=")]);
        let req = |query: &'static str, body: &'static [u8]| Unverified {
            headers: &h,
            query: Some(query),
            body,
        };
        v.verify(req(QUERY, BODY), now())
            .expect("Twilio's own example verifies");
        assert_eq!(
            v.verify(
                req(QUERY, br#"{"property": "value", "boolean": True}"#),
                now()
            )
            .unwrap_err(),
            Rejection::InvalidSignature("body_hash_mismatch"),
            "one byte of the body"
        );
        let other_url = QUERY.replace("foo=1", "foo=2");
        let other_url: &'static str = Box::leak(other_url.into_boxed_str());
        assert_eq!(
            v.verify(req(other_url, BODY), now()).unwrap_err(),
            MISMATCH,
            "one byte of the signed URL"
        );
    }

    /// twilio-python's tests/unit/test_request_validator.py (`test_compute_signature_duplicate_*`):
    /// a parameter sent twice counts with each value, values sorted.
    #[test]
    fn twilio_repeated_parameter_published_vector() {
        let v = Verifier::new(
            Scheme::Twilio {
                public_url: "https://mycompany.com/myapp.php".into(),
            },
            vec![key(KEY_ID, KeyMaterial::Hmac(b"12345".to_vec()), None)],
        );
        let h = headers([("X-Twilio-Signature", "IK+Dwps556ElfBT0I3Rgjkr1wJU=")]);
        let req = |body: &'static [u8]| Unverified {
            headers: &h,
            query: Some("foo=1&bar=2"),
            body,
        };
        v.verify(
            req(b"Sid=CA123&SidAccount=AC123&Digits=5678&Digits=1234"),
            now(),
        )
        .expect("Twilio's own example verifies");
        assert_eq!(
            v.verify(
                req(b"Sid=CA123&SidAccount=AC123&Digits=5678&Digits=1235"),
                now()
            )
            .unwrap_err(),
            MISMATCH
        );
    }

    #[test]
    fn json_bodies_are_signed_through_their_hash_in_the_url() {
        let public_url = "https://example.com/hooks/ns/twilio";
        let scheme = Scheme::Twilio {
            public_url: public_url.into(),
        };
        let body = br#"{"property":"value","boolean":true}"#;
        let h = headers(
            scheme
                .sign(&SigningKey::Hmac(b"tok".to_vec()), &input(body))
                .unwrap(),
        );
        let q = scheme.signed_query(body).expect("json gets a body hash");
        let v = Verifier::new(
            scheme,
            vec![key(KEY_ID, KeyMaterial::Hmac(b"tok".to_vec()), None)],
        );
        let req = |query: Option<&'static str>, body: &'static [u8]| Unverified {
            headers: &h,
            query,
            body,
        };
        let q: &'static str = Box::leak(q.into_boxed_str());
        v.verify(req(Some(q), body), now()).expect("verifies");
        assert_eq!(
            v.verify(
                req(Some(q), br#"{"property":"other","boolean":true}"#),
                now()
            )
            .unwrap_err(),
            Rejection::InvalidSignature("body_hash_mismatch")
        );
        assert_eq!(v.verify(req(None, body), now()).unwrap_err(), MISMATCH);
        assert_eq!(
            v.verify(req(Some("bodySHA256=zz"), body), now())
                .unwrap_err(),
            Rejection::Malformed("bad_body_hash")
        );
    }

    #[test]
    fn form_pairs_sort_names_and_distinct_values() {
        assert_eq!(
            super::form_pairs(b"b=2&a=z&a=y&a=z&c=%2B1+2").unwrap(),
            b"ayazb2c+1 2".to_vec()
        );
    }
}
