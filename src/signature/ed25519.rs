//! The configurable `ed25519` scheme (Discord-style): the header layout comes from
//! [`GenericScheme`], the signature is Ed25519 over the rendered `signedPayload`.

use super::{Candidate, Envelope, GenericScheme, Rejection, SignInput, SigningKey};
use axum::http::HeaderMap;
use ed25519_dalek::{Signature, Signer};

pub fn envelope(g: &GenericScheme, headers: &HeaderMap) -> Result<Envelope, Rejection> {
    let (mut env, signature) = g.read(headers)?;
    if let Some(bytes) = signature {
        // Well-formed encoding but not 64 bytes: a signature that cannot be valid, so 401 like any
        // other bad signature rather than 400.
        let sig = Signature::from_slice(&bytes)
            .map_err(|_| Rejection::InvalidSignature("bad_signature_length"))?;
        env.candidates.push(Candidate::Ed25519(sig));
    }
    Ok(env)
}

pub fn sign(
    g: &GenericScheme,
    key: &SigningKey,
    input: &SignInput,
) -> Result<Vec<(String, String)>, String> {
    let SigningKey::Ed25519(private) = key else {
        return Err("ed25519 needs a private key (--signing-key-file)".into());
    };
    let payload = g.payload(input.timestamp, input.event_id, input.body);
    let signature = private.sign(&payload).to_bytes();
    Ok(g.headers(&signature, input.key_id, input.timestamp, input.event_id))
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use super::super::{
        Encoding, GenericScheme, KeyMaterial, Rejection, Scheme, SigningKey, Template, Verifier,
    };

    /// Discord's interaction signing: hex Ed25519 over `{timestamp}{body}`, no event or key id.
    fn discord() -> Scheme {
        Scheme::Ed25519(GenericScheme {
            signature_header: "x-signature-ed25519".into(),
            timestamp_header: Some("x-signature-timestamp".into()),
            event_id_header: None,
            key_id_header: None,
            template: Template::parse("{timestamp}{body}").unwrap(),
            encoding: Encoding::Hex,
            signature_prefix: String::new(),
        })
    }

    fn verifier() -> Verifier {
        let public = const_hex::encode(ed_signer(9).verifying_key().to_bytes());
        let material = discord()
            .parse_key(public.as_bytes())
            .expect("hex public key parses");
        Verifier::new(discord(), vec![key(KEY_ID, material, None)])
    }

    #[test]
    fn discord_style_round_trip_and_tampering() {
        assert_round_trip(RoundTrip {
            scheme: discord(),
            signer: SigningKey::Ed25519(ed_signer(9)),
            key: KeyMaterial::Ed25519(ed_signer(9).verifying_key()),
            wrong: KeyMaterial::Ed25519(ed_signer(10).verifying_key()),
            signature_header: "x-signature-ed25519",
            corrupt: |v| flip_at(v, 0),
            retime: Some(|h| set(h, "x-signature-timestamp", "1700000001")),
        });
    }

    #[test]
    fn signs_exactly_timestamp_then_body() {
        let h = headers(
            discord()
                .sign(&SigningKey::Ed25519(ed_signer(9)), &input(b"{\"type\":1}"))
                .unwrap(),
        );
        assert_eq!(h.len(), 2, "no event id or key id headers: {h:?}");
        assert!(verify(&verifier(), &h, b"{\"type\":1}").is_ok());
    }

    #[test]
    fn bad_signatures_are_refused_with_the_right_status() {
        let mut h = headers(
            discord()
                .sign(&SigningKey::Ed25519(ed_signer(9)), &input(b"{}"))
                .unwrap(),
        );
        set(&mut h, "x-signature-ed25519", "zz");
        assert_eq!(
            verify(&verifier(), &h, b"{}").unwrap_err(),
            Rejection::Malformed("bad_signature_header")
        );
        set(&mut h, "x-signature-ed25519", &"ab".repeat(63));
        assert_eq!(
            verify(&verifier(), &h, b"{}").unwrap_err(),
            Rejection::InvalidSignature("bad_signature_length")
        );
        h.remove("x-signature-timestamp");
        assert_eq!(
            verify(&verifier(), &h, b"{}").unwrap_err(),
            Rejection::Malformed("missing_timestamp")
        );
    }

    #[test]
    fn signing_needs_a_private_key() {
        let err = discord()
            .sign(&SigningKey::Hmac(b"secret".to_vec()), &input(b"{}"))
            .unwrap_err();
        assert_eq!(err, "ed25519 needs a private key (--signing-key-file)");
    }
}
