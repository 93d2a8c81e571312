//! Key material as the verifier holds it, parsed once per route build.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use chrono::{DateTime, Utc};
use ed25519_dalek::pkcs8::{DecodePrivateKey, DecodePublicKey};
use ed25519_dalek::{SigningKey as EdSigningKey, VerifyingKey};
use std::fmt;

/// Verification material for one key.
#[derive(Clone)]
pub enum KeyMaterial {
    /// A shared secret: HMAC key (SHA-256 or SHA-1 by scheme), or GitLab's token.
    Hmac(Vec<u8>),
    Ed25519(VerifyingKey),
    EcdsaP256(p256::ecdsa::VerifyingKey),
}

/// One entry of an integration's key ring.
#[derive(Clone)]
pub struct Key {
    pub id: String,
    pub material: KeyMaterial,
    /// From `retireAt`: the key is refused from this instant on.
    pub not_after: Option<DateTime<Utc>>,
}

// Secrets must never reach logs, so Debug shows only the id and kind.
impl fmt::Debug for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match self.material {
            KeyMaterial::Hmac(_) => "hmac",
            KeyMaterial::Ed25519(_) => "ed25519",
            KeyMaterial::EcdsaP256(_) => "ecdsa-p256",
        };
        f.debug_struct("Key")
            .field("id", &self.id)
            .field("kind", &kind)
            .field("not_after", &self.not_after)
            .finish()
    }
}

/// What a sender signs with: the HMAC secret, or an Ed25519 private key.
#[derive(Clone)]
pub enum SigningKey {
    Hmac(Vec<u8>),
    Ed25519(EdSigningKey),
    EcdsaP256(p256::ecdsa::SigningKey),
}

impl fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SigningKey::Hmac(_) => "SigningKey::Hmac([redacted])",
            SigningKey::Ed25519(_) => "SigningKey::Ed25519([redacted])",
            SigningKey::EcdsaP256(_) => "SigningKey::EcdsaP256([redacted])",
        })
    }
}

/// Secrets written with `echo` or `--from-file` often end in a newline that the provider never had.
pub fn trim_newline(raw: &[u8]) -> &[u8] {
    let raw = raw.strip_suffix(b"\n").unwrap_or(raw);
    raw.strip_suffix(b"\r").unwrap_or(raw)
}

/// An Ed25519 public key given as raw 32 bytes, base64, hex or PEM (SPKI).
pub fn parse_ed25519_public(raw: &[u8]) -> Result<VerifyingKey, String> {
    let bytes = decode_32(raw, "-----BEGIN PUBLIC KEY-----", |pem| {
        VerifyingKey::from_public_key_pem(pem)
            .map(|k| k.to_bytes())
            .map_err(|_| "not a valid PEM (SPKI) Ed25519 public key".to_string())
    })?;
    VerifyingKey::from_bytes(&bytes).map_err(|_| "not a valid Ed25519 public key".to_string())
}

/// An Ed25519 private key given as raw 32-byte seed, base64, hex or PEM (PKCS#8).
pub fn parse_ed25519_private(raw: &[u8]) -> Result<EdSigningKey, String> {
    let bytes = decode_32(raw, "-----BEGIN PRIVATE KEY-----", |pem| {
        EdSigningKey::from_pkcs8_pem(pem)
            .map(|k| k.to_bytes())
            .map_err(|_| "not a valid PEM (PKCS#8) Ed25519 private key".to_string())
    })?;
    Ok(EdSigningKey::from_bytes(&bytes))
}

/// A P-256 public key as SendGrid shows it: base64 of the DER SubjectPublicKeyInfo; PEM too.
pub fn parse_p256_public(raw: &[u8]) -> Result<p256::ecdsa::VerifyingKey, String> {
    use p256::pkcs8::DecodePublicKey;
    let text = std::str::from_utf8(raw)
        .map_err(|_| "key is not text: expected base64 DER or PEM".to_string())?
        .trim();
    if text.starts_with("-----BEGIN PUBLIC KEY-----") {
        return p256::ecdsa::VerifyingKey::from_public_key_pem(text)
            .map_err(|_| "not a valid PEM (SPKI) P-256 public key".to_string());
    }
    let der = STANDARD
        .decode(text)
        .map_err(|_| "key must be base64 DER (SubjectPublicKeyInfo) or PEM".to_string())?;
    p256::ecdsa::VerifyingKey::from_public_key_der(&der)
        .map_err(|_| "not a valid DER (SPKI) P-256 public key".to_string())
}

/// A P-256 private key: PEM (PKCS#8 or SEC1 `EC PRIVATE KEY`), or base64 of the PKCS#8 DER.
pub fn parse_p256_private(raw: &[u8]) -> Result<p256::ecdsa::SigningKey, String> {
    use p256::pkcs8::DecodePrivateKey;
    let text = std::str::from_utf8(raw)
        .map_err(|_| "key is not text: expected PEM or base64 DER".to_string())?
        .trim();
    let bad = |_: p256::pkcs8::Error| "not a valid P-256 private key (PKCS#8 or SEC1)".to_string();
    if text.starts_with("-----BEGIN EC PRIVATE KEY-----") {
        let secret = p256::SecretKey::from_sec1_pem(text)
            .map_err(|_| "not a valid SEC1 P-256 private key".to_string())?;
        return Ok(secret.into());
    }
    if text.starts_with("-----BEGIN PRIVATE KEY-----") {
        return p256::ecdsa::SigningKey::from_pkcs8_pem(text).map_err(bad);
    }
    let der = STANDARD
        .decode(text)
        .map_err(|_| "key must be PEM or base64 PKCS#8 DER".to_string())?;
    p256::ecdsa::SigningKey::from_pkcs8_der(&der).map_err(bad)
}

fn decode_32(
    raw: &[u8],
    pem_header: &str,
    from_pem: impl Fn(&str) -> Result<[u8; 32], String>,
) -> Result<[u8; 32], String> {
    if raw.len() == 32 && std::str::from_utf8(raw).is_err() {
        return Ok(raw.try_into().expect("length checked"));
    }
    let text = std::str::from_utf8(raw)
        .map_err(|_| "key is neither 32 raw bytes nor text".to_string())?
        .trim();
    if text.starts_with(pem_header) {
        return from_pem(text);
    }
    let decoded = if text.len() == 64 && text.bytes().all(|b| b.is_ascii_hexdigit()) {
        super::decode_hex(text).map_err(|e| e.to_string())?
    } else if let Ok(b) = STANDARD.decode(text) {
        b
    } else if raw.len() == 32 {
        raw.to_vec()
    } else {
        return Err("key must be 32 raw bytes, base64, hex or PEM".into());
    };
    decoded
        .try_into()
        .map_err(|v: Vec<u8>| format!("key decodes to {} bytes, expected 32", v.len()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use ed25519_dalek::pkcs8::{EncodePrivateKey, EncodePublicKey};

    fn pair() -> EdSigningKey {
        EdSigningKey::from_bytes(&[7u8; 32])
    }

    #[test]
    fn public_key_in_every_encoding_parses_to_the_same_key() {
        let public = pair().verifying_key();
        let raw = public.to_bytes();
        let pem = public
            .to_public_key_pem(Default::default())
            .expect("pem encodes");
        for form in [
            raw.to_vec(),
            STANDARD.encode(raw).into_bytes(),
            const_hex::encode(raw).into_bytes(),
            format!("{}\n", const_hex::encode(raw)).into_bytes(),
            pem.into_bytes(),
        ] {
            assert_eq!(parse_ed25519_public(&form).expect("parses"), public);
        }
    }

    #[test]
    fn private_key_in_every_encoding_parses_to_the_same_key() {
        let key = pair();
        let pem = key.to_pkcs8_pem(Default::default()).expect("pem encodes");
        for form in [
            STANDARD.encode(key.to_bytes()).into_bytes(),
            const_hex::encode(key.to_bytes()).into_bytes(),
            pem.as_bytes().to_vec(),
        ] {
            assert_eq!(
                parse_ed25519_private(&form).expect("parses").to_bytes(),
                key.to_bytes()
            );
        }
    }

    #[test]
    fn wrong_length_keys_are_refused_with_a_reason() {
        let err = parse_ed25519_public(STANDARD.encode([1u8; 31]).as_bytes()).unwrap_err();
        assert!(err.contains("31 bytes"), "{err}");
        assert!(parse_ed25519_public(b"not a key at all!").is_err());
    }

    #[test]
    fn p256_keys_parse_from_base64_der_and_pem_and_pair_up() {
        use p256::pkcs8::{EncodePrivateKey, EncodePublicKey};
        let private = p256::ecdsa::SigningKey::from_slice(&[9u8; 32]).expect("scalar in range");
        let public = *private.verifying_key();
        let der = public.to_public_key_der().expect("der").into_vec();
        let pem = public.to_public_key_pem(Default::default()).expect("pem");
        for form in [STANDARD.encode(&der).into_bytes(), pem.into_bytes()] {
            assert_eq!(parse_p256_public(&form).expect("parses"), public);
        }
        let pkcs8 = private.to_pkcs8_pem(Default::default()).expect("pem");
        assert_eq!(
            parse_p256_private(pkcs8.as_bytes())
                .expect("parses")
                .verifying_key(),
            &public
        );
        let err = parse_p256_public(STANDARD.encode([1u8; 40]).as_bytes()).unwrap_err();
        assert!(err.contains("P-256"), "{err}");
        assert!(parse_p256_public(b"\xff\xfe").is_err());
    }

    #[test]
    fn debug_never_shows_secret_bytes() {
        let key = Key {
            id: "v1".into(),
            material: KeyMaterial::Hmac(b"whsec_supersecret".to_vec()),
            not_after: None,
        };
        let shown = format!(
            "{key:?} {:?}",
            SigningKey::Hmac(b"whsec_supersecret".to_vec())
        );
        assert!(!shown.contains("supersecret"), "{shown}");
        assert!(shown.contains("v1"));
    }
}
