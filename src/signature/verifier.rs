//! The one [`Verifier`]: key selection, retirement, constant-time comparison, for every scheme.

use super::{
    Candidate, Envelope, Key, KeyMaterial, MAX_SIGNATURES, Rejection, Scheme, SignedBody,
    Unverified, Verified,
};
use axum::http::HeaderMap;
use chrono::{DateTime, Utc};
use hmac::{KeyInit, Mac};
use sha2::{Digest, Sha256};
use subtle::{Choice, ConstantTimeEq};

type HmacSha256 = hmac::Hmac<Sha256>;
type HmacSha1 = hmac::Hmac<sha1::Sha1>;

/// An HMAC-SHA256 tag's length; a candidate of any other length cannot match.
const HMAC_LEN: usize = 32;
/// An HMAC-SHA1 tag's length.
const HMAC_SHA1_LEN: usize = 20;

/// A scheme plus the keys that may sign for one integration. Built once per route build.
#[derive(Clone)]
pub struct Verifier {
    scheme: Scheme,
    keys: Vec<Key>,
    /// Per key (same index): the HMAC state already keyed with the secret. Keying costs two
    /// SHA-256 blocks, as much as hashing 128 bytes of body, so it is done once per route build.
    keyed: Vec<Option<HmacSha256>>,
}

// The keyed states are secret material; Debug shows the scheme and the keys' ids only.
impl std::fmt::Debug for Verifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Verifier")
            .field("scheme", &self.scheme)
            .field("keys", &self.keys)
            .finish()
    }
}

impl Verifier {
    pub fn new(scheme: Scheme, keys: Vec<Key>) -> Self {
        let keyed = keys
            .iter()
            .map(|k| match &k.material {
                KeyMaterial::Hmac(secret) => <HmacSha256 as KeyInit>::new_from_slice(secret).ok(),
                KeyMaterial::Ed25519(_) | KeyMaterial::EcdsaP256(_) => None,
            })
            .collect();
        Self {
            scheme,
            keys,
            keyed,
        }
    }

    pub fn scheme(&self) -> &Scheme {
        &self.scheme
    }

    pub fn keys(&self) -> &[Key] {
        &self.keys
    }

    /// Checks the signature on the raw bytes. `now` decides which keys are retired, so a key stops
    /// working at its `retireAt` even if nothing rebuilt the route.
    pub fn verify(&self, req: Unverified<'_>, now: DateTime<Utc>) -> Result<Verified, Rejection> {
        let prepared = self.prepare(req.headers, req.query, now)?;
        self.check(prepared, req.body)
    }

    /// The cheap half of [`Verifier::verify`], from the headers alone, so that the receiver can
    /// refuse before it reads the body: header shape, the number of signatures, the key id.
    /// `query` is the raw query string (Twilio signs the URL).
    pub fn prepare(
        &self,
        headers: &HeaderMap,
        query: Option<&str>,
        now: DateTime<Utc>,
    ) -> Result<Prepared, Rejection> {
        let env = self.scheme.envelope(headers, query)?;
        if env.candidates.is_empty() {
            return Err(Rejection::InvalidSignature("missing_signature"));
        }
        // The one place the cap is enforced, for every scheme.
        if env.candidates.len() > MAX_SIGNATURES {
            return Err(Rejection::Malformed("too_many_signatures"));
        }
        let named = match &env.key_id {
            Some(id) => {
                let key = (0..self.keys.len())
                    .find(|&i| &self.keys[i].id == id)
                    .ok_or(Rejection::InvalidSignature("unknown_key_id"))?;
                if !self.usable(key, now) {
                    return Err(Rejection::InvalidSignature("retired_key"));
                }
                Some(key)
            }
            None if !(0..self.keys.len()).any(|i| self.usable(i, now)) => {
                return Err(Rejection::InvalidSignature("no_usable_key"));
            }
            None => None,
        };
        Ok(Prepared { env, named, now })
    }

    fn usable(&self, key: usize, now: DateTime<Utc>) -> bool {
        self.keys[key].not_after.is_none_or(|t| now < t)
    }

    /// The expensive half: the MACs and signatures over the body.
    pub fn check(&self, prepared: Prepared, body: &[u8]) -> Result<Verified, Rejection> {
        let Prepared {
            mut env,
            named,
            now,
        } = prepared;
        let form;
        let signed_body: &[u8] = match env.body {
            SignedBody::Raw => body,
            SignedBody::FormPairs => {
                form = super::twilio::form_pairs(body)?;
                &form
            }
            SignedBody::Sha256(want) => {
                // The signature covers the hash (in the URL), so the body must be the one hashed.
                if !ct_equal(&Sha256::digest(body), &want) {
                    return Err(Rejection::InvalidSignature("body_hash_mismatch"));
                }
                &[]
            }
        };
        let mut message: Option<Vec<u8>> = None;
        let keys = match named {
            Some(key) => key..key + 1,
            None => 0..self.keys.len(),
        };
        for i in keys.filter(|&i| self.usable(i, now)) {
            let (key, keyed) = (&self.keys[i], self.keyed[i].as_ref());
            if let Some(at) = matching_candidate(key, keyed, &env, signed_body, &mut message) {
                let timestamp = match env.body_timestamp {
                    Some(read) => Some(read(body)?),
                    None => env.timestamp,
                };
                let signature = env.candidates.swap_remove(at).into_nonce(&env.signed_id);
                return Ok(Verified {
                    key_id: key.id.clone(),
                    signed_id: env.signed_id,
                    timestamp,
                    signature,
                });
            }
        }
        Err(Rejection::InvalidSignature("signature_mismatch"))
    }
}

impl Verifier {
    /// The answer to a provider's endpoint check, when the verified request is one.
    pub fn handshake(
        &self,
        verified: &Verified,
        headers: &HeaderMap,
        body: &[u8],
    ) -> Option<super::Handshake> {
        let key = self.keys.iter().find(|k| k.id == verified.key_id)?;
        self.scheme.handshake(headers, body, &key.material)
    }
}

/// A request whose headers passed [`Verifier::prepare`]: its envelope and the keys to try (the
/// one it names, or every key usable at `now`). Only [`Verifier::check`] turns it into a
/// [`Verified`].
pub struct Prepared {
    env: Envelope,
    named: Option<usize>,
    now: DateTime<Utc>,
}

impl Candidate {
    /// The bytes remembered as the replay nonce once this candidate matched.
    fn into_nonce(self, signed_id: &Option<String>) -> Vec<u8> {
        match self {
            Candidate::HmacSha256(sig) | Candidate::HmacSha1(sig) => sig,
            Candidate::Ed25519(sig) => sig.to_bytes().to_vec(),
            // (r, n - s) verifies as well as (r, s): the low-s form is the one remembered, so
            // a flipped copy of a captured signature is still a replay of the same nonce.
            Candidate::EcdsaP256(sig) => sig.normalize_s().to_bytes().to_vec(),
            // The token is the same on every request: what is remembered is the event id it came
            // with.
            Candidate::Token(_) => signed_id.clone().unwrap_or_default().into_bytes(),
        }
    }
}

/// Equal, in constant time. subtle pays an optimisation barrier per element, so the bytes are
/// compared as 64-bit words: 4 barriers for a 32-byte tag instead of 32.
fn ct_equal(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let ((a_words, a_rest), (b_words, b_rest)) = (a.as_chunks::<8>(), b.as_chunks::<8>());
    let words = a_words
        .iter()
        .zip(b_words)
        .fold(Choice::from(1), |eq, (x, y)| {
            eq & u64::from_ne_bytes(*x).ct_eq(&u64::from_ne_bytes(*y))
        });
    bool::from(words & a_rest.ct_eq(b_rest))
}

/// The index in `env.candidates` of the first signature that `key` produced, if any.
fn matching_candidate(
    key: &Key,
    keyed: Option<&HmacSha256>,
    env: &Envelope,
    body: &[u8],
    message: &mut Option<Vec<u8>>,
) -> Option<usize> {
    match &key.material {
        KeyMaterial::Hmac(secret) => {
            if let Some(found) = matching_sha1_or_token(secret, env, body) {
                return Some(found);
            }
            // No candidate of a tag's length: nothing can match, so the body is not hashed.
            let sized =
                |c: &Candidate| matches!(c, Candidate::HmacSha256(s) if s.len() == HMAC_LEN);
            if !env.candidates.iter().any(sized) {
                return None;
            }
            let mut mac = keyed?.clone();
            mac.update(&env.prefix);
            mac.update(body);
            mac.update(&env.suffix);
            let tag = mac.finalize().into_bytes();
            env.candidates.iter().position(
                |c| matches!(c, Candidate::HmacSha256(sig) if ct_equal(sig, tag.as_slice())),
            )
        }
        KeyMaterial::Ed25519(public) => {
            // Ed25519 needs the message contiguous; build it once for all keys.
            let msg =
                message.get_or_insert_with(|| [&env.prefix[..], body, &env.suffix[..]].concat());
            env.candidates.iter().position(
                |c| matches!(c, Candidate::Ed25519(sig) if public.verify_strict(msg, sig).is_ok()),
            )
        }
        KeyMaterial::EcdsaP256(public) => {
            use p256::ecdsa::signature::Verifier as _;
            let msg =
                message.get_or_insert_with(|| [&env.prefix[..], body, &env.suffix[..]].concat());
            env.candidates.iter().position(
                |c| matches!(c, Candidate::EcdsaP256(sig) if public.verify(msg, sig).is_ok()),
            )
        }
    }
}

/// The shared-secret candidates other than HMAC-SHA256: Twilio's HMAC-SHA1 and GitLab's token.
fn matching_sha1_or_token(secret: &[u8], env: &Envelope, body: &[u8]) -> Option<usize> {
    let mut sha1_tag = None;
    env.candidates.iter().position(|c| match c {
        Candidate::HmacSha1(sig) if sig.len() == HMAC_SHA1_LEN => {
            let tag = sha1_tag.get_or_insert_with(|| {
                let mut mac = <HmacSha1 as KeyInit>::new_from_slice(secret)
                    .expect("HMAC takes any key length");
                mac.update(&env.prefix);
                mac.update(body);
                mac.update(&env.suffix);
                mac.finalize().into_bytes().to_vec()
            });
            ct_equal(sig, tag)
        }
        // Digests of equal length, so the comparison leaks neither the token nor its length.
        Candidate::Token(token) => ct_equal(&Sha256::digest(token), &Sha256::digest(secret)),
        _ => false,
    })
}

/// HMAC-SHA1 of the parts; Twilio's signer.
pub fn hmac_sha1(secret: &[u8], parts: &[&[u8]]) -> Vec<u8> {
    let mut mac = <HmacSha1 as KeyInit>::new_from_slice(secret).expect("HMAC takes any key length");
    for p in parts {
        mac.update(p);
    }
    mac.finalize().into_bytes().to_vec()
}

/// HMAC-SHA256 of `prefix ++ body ++ suffix`; shared by every HMAC scheme's signer.
pub fn hmac_sha256(secret: &[u8], parts: &[&[u8]]) -> Vec<u8> {
    let mut mac =
        <HmacSha256 as KeyInit>::new_from_slice(secret).expect("HMAC takes any key length");
    for p in parts {
        mac.update(p);
    }
    mac.finalize().into_bytes().to_vec()
}

#[cfg(test)]
mod tests {
    use super::ct_equal;

    #[test]
    fn ct_equal_sees_every_byte_of_the_words_and_of_the_rest() {
        for len in [0, 1, 7, 8, 20, 32, 33] {
            let a: Vec<u8> = (0..len as u8).collect();
            assert!(ct_equal(&a, &a.clone()), "length {len}");
            for i in 0..len {
                let mut b = a.clone();
                b[i] ^= 0x80;
                assert!(!ct_equal(&a, &b), "length {len}, byte {i}");
            }
        }
        assert!(!ct_equal(&[1, 2, 3], &[1, 2]), "a prefix is not equal");
        assert!(!ct_equal(&[], &[0]));
    }
}
