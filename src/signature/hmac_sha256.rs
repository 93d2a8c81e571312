//! The configurable `hmac-sha256` scheme: the header layout comes from [`GenericScheme`], the
//! signature is an HMAC-SHA256 of the rendered `signedPayload`.

use super::{Candidate, Envelope, GenericScheme, Rejection, SignInput, SigningKey, hmac_sha256};
use axum::http::HeaderMap;

pub fn envelope(g: &GenericScheme, headers: &HeaderMap) -> Result<Envelope, Rejection> {
    let (mut env, signature) = g.read(headers)?;
    env.candidates.extend(signature.map(Candidate::HmacSha256));
    Ok(env)
}

pub fn sign(
    g: &GenericScheme,
    key: &SigningKey,
    input: &SignInput,
) -> Result<Vec<(String, String)>, String> {
    let secret = super::hmac_secret(key, "hmac-sha256")?;
    let payload = g.payload(input.timestamp, input.event_id, input.body);
    let signature = hmac_sha256(secret, &[&payload]);
    Ok(g.headers(&signature, input.key_id, input.timestamp, input.event_id))
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use super::super::{
        Encoding, GenericScheme, KeyMaterial, Rejection, Scheme, SigningKey, Template, Verifier,
    };

    fn scheme(key_id_header: Option<&str>) -> Scheme {
        Scheme::HmacSha256(GenericScheme {
            signature_header: "x-sig".into(),
            timestamp_header: Some("x-ts".into()),
            event_id_header: Some("x-id".into()),
            key_id_header: key_id_header.map(Into::into),
            template: Template::parse("{timestamp}.{event_id}.{body}").unwrap(),
            encoding: Encoding::Base64,
            signature_prefix: "sha256=".into(),
        })
    }

    fn hmac(secret: &str) -> KeyMaterial {
        KeyMaterial::Hmac(secret.as_bytes().to_vec())
    }

    fn signed(scheme: &Scheme, secret: &str) -> axum::http::HeaderMap {
        headers(
            scheme
                .sign(&SigningKey::Hmac(secret.as_bytes().to_vec()), &input(b"{}"))
                .unwrap(),
        )
    }

    #[test]
    fn round_trip_and_tampering() {
        assert_round_trip(RoundTrip {
            scheme: scheme(Some("x-key-id")),
            signer: SigningKey::Hmac(b"right".to_vec()),
            key: hmac("right"),
            wrong: hmac("wrong"),
            signature_header: "x-sig",
            corrupt: |v| flip_at(v, "sha256=".len()),
            retime: Some(|h| set(h, "x-ts", "1700000001")),
        });
    }

    #[test]
    fn event_id_is_signed() {
        let s = scheme(None);
        let mut h = signed(&s, "right");
        set(&mut h, "x-id", "evt_2");
        let v = Verifier::new(s, vec![key(KEY_ID, hmac("right"), None)]);
        assert_eq!(verify(&v, &h, b"{}").unwrap_err(), MISMATCH);
    }

    #[test]
    fn key_id_header_selects_the_key() {
        let s = scheme(Some("x-key-id"));
        let h = signed(&s, "right");
        let ring = |not_after| {
            vec![
                key("other", hmac("right"), None),
                key(KEY_ID, hmac("right"), not_after),
            ]
        };
        let result = |keys| {
            verify(&Verifier::new(s.clone(), keys), &h, b"{}").map(|v| v.key_id().to_string())
        };

        assert_eq!(result(ring(None)), Ok(KEY_ID.to_string()));
        assert_eq!(
            result(ring(Some(at(NOW_SECS + 1)))),
            Ok(KEY_ID.to_string()),
            "not yet retired"
        );
        let retired = Err(Rejection::InvalidSignature("retired_key"));
        assert_eq!(result(ring(Some(now()))), retired, "retired at exactly now");
        assert_eq!(result(ring(Some(at(NOW_SECS - 1)))), retired);
        let unknown = vec![key("other", hmac("right"), None)];
        assert_eq!(
            result(unknown),
            Err(Rejection::InvalidSignature("unknown_key_id"))
        );
        // The named key is the only one tried, even if another would match.
        let named_wrong = vec![
            key("other", hmac("right"), None),
            key(KEY_ID, hmac("wrong"), None),
        ];
        assert_eq!(result(named_wrong), Err(MISMATCH));

        let mut no_id = h.clone();
        no_id.remove("x-key-id");
        let err = verify(&Verifier::new(s.clone(), ring(None)), &no_id, b"{}").unwrap_err();
        assert_eq!(err, Rejection::Malformed("missing_key_id"));
    }

    #[test]
    fn without_key_id_every_usable_key_is_tried() {
        let s = scheme(None);
        let h = signed(&s, "right");
        let result = |keys| {
            verify(&Verifier::new(s.clone(), keys), &h, b"{}").map(|v| v.key_id().to_string())
        };
        let ring = vec![
            key("old", hmac("wrong"), None),
            key("retired", hmac("right"), Some(now())),
            key("new", hmac("right"), Some(at(NOW_SECS + 60))),
        ];
        assert_eq!(result(ring), Ok("new".to_string()));
        let only_retired = vec![key("retired", hmac("right"), Some(now()))];
        assert_eq!(
            result(only_retired),
            Err(Rejection::InvalidSignature("no_usable_key"))
        );
        let retired_match = vec![
            key("old", hmac("wrong"), None),
            key("retired", hmac("right"), Some(now())),
        ];
        assert_eq!(result(retired_match), Err(MISMATCH));
    }

    #[test]
    fn header_shape_decides_400_or_401() {
        let s = scheme(None);
        let v = Verifier::new(s.clone(), vec![key(KEY_ID, hmac("right"), None)]);
        let check = |name: &'static str, value: &str| {
            let mut h = signed(&s, "right");
            set(&mut h, name, value);
            verify(&v, &h, b"{}").map(|_| ())
        };
        let malformed = |r| Err::<(), _>(Rejection::Malformed(r));
        assert_eq!(
            check("x-sig", "sha256=@@@"),
            malformed("bad_signature_header")
        );
        assert_eq!(
            check("x-sig", "c2lnbmF0dXJl"),
            malformed("bad_signature_header")
        );
        assert_eq!(check("x-ts", "1.5"), malformed("bad_timestamp"));
        let mut h = signed(&s, "right");
        h.remove("x-sig");
        assert_eq!(
            verify(&v, &h, b"{}").unwrap_err(),
            Rejection::InvalidSignature("missing_signature")
        );
    }
}
