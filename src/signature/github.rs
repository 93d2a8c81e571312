//! GitHub: `X-Hub-Signature-256: sha256=<hex>`, HMAC-SHA256 over the raw body. GitHub signs no
//! timestamp, so replay protection rests on the delivery id and the signature digest alone.

use super::{
    Candidate, Encoding, Envelope, Rejection, SignInput, SigningKey, hmac_secret, hmac_sha256,
    signature_header,
};
use axum::http::HeaderMap;

const SIGNATURE: &str = "x-hub-signature-256";
const DELIVERY: &str = "x-github-delivery";
const EVENT: &str = "x-github-event";

pub fn envelope(headers: &HeaderMap) -> Result<Envelope, Rejection> {
    let candidates =
        signature_header(headers, SIGNATURE, "sha256=", Encoding::Hex)?.map(Candidate::HmacSha256);
    Ok(Envelope::signed(Vec::new(), candidates))
}

pub fn sign(key: &SigningKey, input: &SignInput) -> Result<Vec<(String, String)>, String> {
    let secret = hmac_secret(key, "github")?;
    let sig = hmac_sha256(secret, &[input.body]);
    let mut out = vec![
        (
            SIGNATURE.into(),
            format!("sha256={}", const_hex::encode(sig)),
        ),
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
    fn round_trip_and_tampering() {
        assert_round_trip(RoundTrip {
            scheme: Scheme::Github,
            signer: SigningKey::Hmac(b"right".to_vec()),
            key: KeyMaterial::Hmac(b"right".to_vec()),
            wrong: KeyMaterial::Hmac(b"wrong".to_vec()),
            signature_header: "x-hub-signature-256",
            corrupt: |v| flip_at(v, "sha256=".len()),
            retime: None,
        });
    }

    /// github/docs, content/webhooks/using-webhooks/validating-webhook-deliveries.md, "Testing the
    /// webhook payload validation":
    /// https://docs.github.com/en/webhooks/using-webhooks/validating-webhook-deliveries
    #[test]
    fn github_docs_published_vector() {
        const SECRET: &[u8] = b"It's a Secret to Everybody";
        const HEADER: &str =
            "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17";
        let v = Verifier::new(
            Scheme::Github,
            vec![key("gh", Scheme::Github.parse_key(SECRET).unwrap(), None)],
        );
        let h = headers([("X-Hub-Signature-256", HEADER)]);
        assert_eq!(verify(&v, &h, b"Hello, World!").unwrap().timestamp(), None);
        assert_eq!(verify(&v, &h, b"Hello, World?").unwrap_err(), MISMATCH);

        let signed = Scheme::Github
            .sign(&SigningKey::Hmac(SECRET.to_vec()), &input(b"Hello, World!"))
            .unwrap();
        assert_eq!(
            signed,
            [
                ("x-hub-signature-256".to_string(), HEADER.to_string()),
                ("x-github-delivery".to_string(), "evt_1".to_string()),
                ("x-github-event".to_string(), "thing.created".to_string()),
            ]
        );
    }

    #[test]
    fn header_shape_decides_400_or_401() {
        let v = Verifier::new(
            Scheme::Github,
            vec![key("gh", KeyMaterial::Hmac(b"s".to_vec()), None)],
        );
        let check =
            |value: &str| verify(&v, &headers([("x-hub-signature-256", value)]), b"x").map(|_| ());
        let malformed: Result<(), Rejection> = Err(Rejection::Malformed("bad_signature_header"));
        assert_eq!(check(&"0".repeat(64)), malformed, "no sha256= prefix");
        assert_eq!(check("sha1=00"), malformed);
        assert_eq!(check("sha256=xyz"), malformed);
        let none: [(&str, &str); 0] = [];
        let err = verify(&v, &headers(none), b"x").unwrap_err();
        assert_eq!(err, Rejection::InvalidSignature("missing_signature"));
    }
}
