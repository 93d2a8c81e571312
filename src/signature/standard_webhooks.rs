//! Standard Webhooks (and Svix, which uses the same scheme under `svix-*` header names):
//! `webhook-signature` is a space-separated list of `v1,<base64 HMAC-SHA256>` and
//! `v1a,<base64 Ed25519>` over `{webhook-id}.{webhook-timestamp}.{body}`.

use super::keys::trim_newline;
use super::{
    Candidate, Envelope, KeyMaterial, Rejection, SignInput, SigningKey, header_str, hmac_sha256,
    parse_unix_seconds,
};
use axum::http::HeaderMap;
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use ed25519_dalek::{Signature, Signer, VerifyingKey};

struct Names {
    id: &'static str,
    timestamp: &'static str,
    signature: &'static str,
}

const WEBHOOK: Names = Names {
    id: "webhook-id",
    timestamp: "webhook-timestamp",
    signature: "webhook-signature",
};
const SVIX: Names = Names {
    id: "svix-id",
    timestamp: "svix-timestamp",
    signature: "svix-signature",
};

/// The header family the sender used: the one carrying a signature, else the one carrying an id, so
/// an unsigned request is reported as unsigned rather than as missing the other family's id.
fn family(headers: &HeaderMap) -> &'static Names {
    [&WEBHOOK, &SVIX]
        .into_iter()
        .find(|n| headers.contains_key(n.signature))
        .or_else(|| {
            [&WEBHOOK, &SVIX]
                .into_iter()
                .find(|n| headers.contains_key(n.id))
        })
        .unwrap_or(&WEBHOOK)
}

pub fn envelope(headers: &HeaderMap) -> Result<Envelope, Rejection> {
    let names = family(headers);
    let id = header_str(headers, names.id)?.ok_or(Rejection::Malformed("missing_event_id"))?;
    let ts =
        header_str(headers, names.timestamp)?.ok_or(Rejection::Malformed("missing_timestamp"))?;
    let timestamp = parse_unix_seconds(ts)?;
    // Entries of unknown versions, or that fail to decode, are skipped as the spec asks, so a sender
    // can add new signature kinds without breaking receivers that do not know them yet.
    let candidates = header_str(headers, names.signature)?
        .unwrap_or("")
        .split(' ')
        .filter_map(|entry| match entry.split_once(',')? {
            ("v1", b64) => STANDARD.decode(b64).ok().map(Candidate::HmacSha256),
            ("v1a", b64) => {
                let bytes = STANDARD.decode(b64).ok()?;
                Signature::from_slice(&bytes).ok().map(Candidate::Ed25519)
            }
            _ => None,
        })
        .collect();
    Ok(Envelope {
        timestamp: Some(timestamp),
        key_id: None,
        prefix: format!("{id}.{ts}.").into_bytes(),
        suffix: Vec::new(),
        body: super::SignedBody::Raw,
        candidates,
        body_timestamp: None,
        signed_id: Some(id.to_string()),
    })
}

fn key_text(raw: &[u8]) -> Result<&str, String> {
    std::str::from_utf8(trim_newline(raw))
        .map_err(|_| "standard-webhooks keys are base64 text".to_string())
}

fn decode(b64: &str, what: &str) -> Result<Vec<u8>, String> {
    match STANDARD.decode(b64) {
        Ok(b) if b.is_empty() => Err(format!("{what} is empty")),
        Ok(b) => Ok(b),
        Err(_) => Err(format!("{what} is not valid base64")),
    }
}

/// `whsec_<base64>` (the prefix is optional) is an HMAC secret; `whpk_<base64>` an Ed25519 public key.
pub fn parse_key(raw: &[u8]) -> Result<KeyMaterial, String> {
    let text = key_text(raw)?;
    if let Some(b64) = text.strip_prefix("whpk_") {
        let bytes: [u8; 32] = decode(b64, "whpk_ key")?
            .try_into()
            .map_err(|v: Vec<u8>| format!("whpk_ key decodes to {} bytes, expected 32", v.len()))?;
        let key =
            VerifyingKey::from_bytes(&bytes).map_err(|_| "whpk_ key is not an Ed25519 point")?;
        return Ok(KeyMaterial::Ed25519(key));
    }
    if text.starts_with("whsk_") {
        return Err(
            "whsk_ is a private signing key; give the receiver the whpk_ public key".into(),
        );
    }
    let secret = text.strip_prefix("whsec_").unwrap_or(text);
    Ok(KeyMaterial::Hmac(decode(secret, "webhook secret")?))
}

/// The sender's side: `whsk_<base64>` (32-byte seed or 64-byte keypair) or a `whsec_` secret.
pub fn parse_signing_secret(raw: &[u8]) -> Result<SigningKey, String> {
    let text = key_text(raw)?;
    let Some(b64) = text.strip_prefix("whsk_") else {
        return match parse_key(raw)? {
            KeyMaterial::Hmac(secret) => Ok(SigningKey::Hmac(secret)),
            KeyMaterial::Ed25519(_) | KeyMaterial::EcdsaP256(_) => {
                Err("a whpk_ public key cannot sign; use the whsk_ key".into())
            }
        };
    };
    let bytes = decode(b64, "whsk_ key")?;
    let key = match bytes.len() {
        32 => ed25519_dalek::SigningKey::from_bytes(bytes.as_slice().try_into().expect("32 bytes")),
        64 => ed25519_dalek::SigningKey::from_keypair_bytes(
            bytes.as_slice().try_into().expect("64 bytes"),
        )
        .map_err(|_| "whsk_ keypair's public half does not match its seed")?,
        n => return Err(format!("whsk_ key decodes to {n} bytes, expected 32 or 64")),
    };
    Ok(SigningKey::Ed25519(key))
}

pub fn sign(key: &SigningKey, input: &SignInput) -> Result<Vec<(String, String)>, String> {
    let ts = input.timestamp.to_string();
    let parts: [&[u8]; 5] = [
        input.event_id.as_bytes(),
        b".",
        ts.as_bytes(),
        b".",
        input.body,
    ];
    let signature = match key {
        SigningKey::Hmac(secret) => format!("v1,{}", STANDARD.encode(hmac_sha256(secret, &parts))),
        SigningKey::Ed25519(key) => format!(
            "v1a,{}",
            STANDARD.encode(key.sign(&parts.concat()).to_bytes())
        ),
        SigningKey::EcdsaP256(_) => {
            return Err("standard-webhooks signs with whsec_ or whsk_ keys, not ECDSA".into());
        }
    };
    Ok(vec![
        (WEBHOOK.id.into(), input.event_id.into()),
        (WEBHOOK.timestamp.into(), ts),
        (WEBHOOK.signature.into(), signature),
    ])
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use super::super::{KeyMaterial, Rejection, Scheme, SigningKey, Verifier};
    use super::{parse_key, parse_signing_secret};
    use base64::{Engine, engine::general_purpose::STANDARD};

    // standard-webhooks/standard-webhooks, libraries/go/webhook_symmetric_test.go (TestSymmetricWebhookSign)
    // and libraries/go/webhook_asymmetric_test.go (TestAsymmetricWebhookSign).
    const MSG_ID: &str = "msg_p5jXN8AQM9LWM0D4loKWxJek";
    const TS: i64 = 1_614_265_330;
    const BODY: &[u8] = br#"{"test": 2432232314}"#;
    const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    const V1: &str = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=";
    const SEED: &str = "whsk_VEVTVFNJR05JTkdLRVlET05PVFVTRVRISVNGT1JBTlk=";
    const V1A: &str = "v1a,tQ9V2XOqn7jL/DQenEFpqIugdBVtiMmER5mhSkXBNwM0mkATuDe6KYYUuxqtaiHeYGb7KaaBRdM5WqyeFiL8Ag==";

    fn verifier(raw_key: &str) -> Verifier {
        let material = Scheme::StandardWebhooks
            .parse_key(raw_key.as_bytes())
            .expect("key parses");
        Verifier::new(Scheme::StandardWebhooks, vec![key("k", material, None)])
    }

    fn vector_headers(prefix: &str, signature: &str) -> axum::http::HeaderMap {
        let ts = TS.to_string();
        headers([
            (format!("{prefix}-id"), MSG_ID),
            (format!("{prefix}-timestamp"), ts.as_str()),
            (format!("{prefix}-signature"), signature),
        ])
    }

    /// Verifies the published message, as sent under `prefix`-* headers, with `sig` and `body`.
    fn check(raw_key: &str, prefix: &str, sig: &str, body: &[u8]) -> Result<(), Rejection> {
        let ok = verify_at(
            &verifier(raw_key),
            &vector_headers(prefix, sig),
            body,
            at(TS + 10),
        )?;
        assert_eq!(ok.timestamp(), Some(TS));
        Ok(())
    }

    fn vector_input() -> super::SignInput<'static> {
        super::SignInput {
            event_id: MSG_ID,
            timestamp: TS,
            ..input(BODY)
        }
    }

    #[test]
    fn round_trip_and_tampering_hmac_and_ed25519() {
        assert_round_trip(RoundTrip {
            scheme: Scheme::StandardWebhooks,
            signer: SigningKey::Hmac(b"right secret bytes".to_vec()),
            key: KeyMaterial::Hmac(b"right secret bytes".to_vec()),
            wrong: KeyMaterial::Hmac(b"wrong secret bytes".to_vec()),
            signature_header: "webhook-signature",
            corrupt: |v| flip_at(v, "v1,".len()),
            retime: Some(|h| set(h, "webhook-timestamp", "1700000001")),
        });
        assert_round_trip(RoundTrip {
            scheme: Scheme::StandardWebhooks,
            signer: SigningKey::Ed25519(ed_signer(1)),
            key: KeyMaterial::Ed25519(ed_signer(1).verifying_key()),
            wrong: KeyMaterial::Ed25519(ed_signer(2).verifying_key()),
            signature_header: "webhook-signature",
            corrupt: |v| flip_at(v, "v1a,".len()),
            retime: Some(|h| set(h, "webhook-timestamp", "1700000001")),
        });
    }

    #[test]
    fn published_v1_vector_with_and_without_whsec_prefix() {
        let bare = &SECRET["whsec_".len()..];
        for raw in [SECRET, bare, format!("{SECRET}\n").as_str()] {
            assert_eq!(check(raw, "webhook", V1, BODY), Ok(()), "{raw}");
        }
        assert_eq!(
            check(SECRET, "webhook", V1, b"{\"test\": 1}"),
            Err(MISMATCH)
        );
        let mut other_id = vector_headers("webhook", V1);
        set(&mut other_id, "webhook-id", "msg_other");
        assert_eq!(
            verify_at(&verifier(SECRET), &other_id, BODY, at(TS)).unwrap_err(),
            MISMATCH
        );

        let signer = parse_signing_secret(SECRET.as_bytes()).unwrap();
        assert_eq!(super::sign(&signer, &vector_input()).unwrap()[2].1, V1);
    }

    /// The Go library signs with the published seed; the whpk_ key is derived from that seed here.
    #[test]
    fn published_v1a_vector() {
        let SigningKey::Ed25519(seed) = parse_signing_secret(SEED.as_bytes()).unwrap() else {
            panic!("whsk_ parses to an Ed25519 key")
        };
        let signed = super::sign(&SigningKey::Ed25519(seed.clone()), &vector_input()).unwrap();
        assert_eq!(signed[2].1, V1A);

        let whpk = format!("whpk_{}", STANDARD.encode(seed.verifying_key().to_bytes()));
        assert_eq!(check(&whpk, "webhook", V1A, BODY), Ok(()));
        assert_eq!(check(&whpk, "webhook", V1A, b"{}"), Err(MISMATCH));
        // An HMAC key never accepts a v1a signature, nor an Ed25519 key a v1 one.
        assert_eq!(check(SECRET, "webhook", V1A, BODY), Err(MISMATCH));
        assert_eq!(check(&whpk, "webhook", V1, BODY), Err(MISMATCH));
    }

    #[test]
    fn svix_headers_and_signature_lists() {
        assert_eq!(check(SECRET, "svix", V1, BODY), Ok(()));
        let other = "v1,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc=";
        let list = format!("v2,AAAA v1,@@notbase64@@ v1a,c2hvcnQ=  {V1} {other}");
        assert_eq!(check(SECRET, "webhook", &list, BODY), Ok(()));
        let missing: Result<(), _> = Err(Rejection::InvalidSignature("missing_signature"));
        assert_eq!(
            check(SECRET, "webhook", "v2,AAAA v1,@@ nocomma", BODY),
            missing
        );
    }

    #[test]
    fn header_shape_decides_400_or_401() {
        let check = |pairs: &[(&str, &str)]| {
            verify(&verifier(SECRET), &headers(pairs.iter().copied()), b"").map(|_| ())
        };
        let malformed = |r| Err::<(), _>(Rejection::Malformed(r));
        let (id, ts, sig) = (
            ("webhook-id", "m"),
            ("webhook-timestamp", "1"),
            ("webhook-signature", V1),
        );
        assert_eq!(check(&[ts, sig]), malformed("missing_event_id"));
        assert_eq!(check(&[id, sig]), malformed("missing_timestamp"));
        assert_eq!(
            check(&[id, ("webhook-timestamp", "-1"), sig]),
            malformed("bad_timestamp")
        );
        assert_eq!(
            check(&[("svix-id", "m"), ("svix-signature", V1)]),
            malformed("missing_timestamp")
        );
        let missing: Result<(), _> = Err(Rejection::InvalidSignature("missing_signature"));
        assert_eq!(check(&[id, ts]), missing);
        assert_eq!(check(&[("svix-id", "m"), ("svix-timestamp", "1")]), missing);
    }

    #[test]
    fn key_parsing_refuses_what_cannot_verify() {
        let err = |raw: &str| parse_key(raw.as_bytes()).err().unwrap_or_default();
        assert!(err("whsec_").contains("empty"));
        assert!(err("whsec_not base64!").contains("base64"));
        assert!(err(SEED).contains("whpk_"));
        assert!(err("whpk_AAAA").contains("3 bytes"));
        assert!(
            parse_signing_secret(format!("whsk_{}", STANDARD.encode([1u8; 31])).as_bytes())
                .is_err()
        );
        let pair = ed_signer(3).to_keypair_bytes();
        let from_pair = parse_signing_secret(format!("whsk_{}", STANDARD.encode(pair)).as_bytes());
        assert!(matches!(from_pair, Ok(SigningKey::Ed25519(k)) if k.to_bytes() == [3u8; 32]));
    }
}
