//! Signature verification. Each provider scheme lives in its own file and only knows how to read its
//! headers into an [`Envelope`] (what was signed, which signatures were offered) and how to sign like
//! the provider does. The cryptography, key selection and retirement rules live here, once, so every
//! scheme gets constant-time comparison and the same key-ring semantics.
//!
//! Only [`Verifier::verify`] can produce a [`Verified`], and the inbox only accepts events built from
//! one: an unverified request has no path to storage.

pub mod ed25519;
pub mod generic;
pub mod github;
pub mod hmac_sha256;
pub mod keys;
pub mod shopify;
pub mod slack;
pub mod standard_webhooks;
pub mod stripe;

use axum::http::HeaderMap;
use chrono::{DateTime, Utc};
use ed25519_dalek::Signature;
use hmac::{KeyInit, Mac};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

pub use generic::{Encoding, GenericScheme, Template};
pub use keys::{Key, KeyMaterial, SigningKey};

type HmacSha256 = hmac::Hmac<Sha256>;

/// Most signatures one request may offer. Providers send one, or two while a secret rolls; the cap
/// keeps a request from costing keys x thousands of Ed25519 or HMAC checks. More is 400.
pub const MAX_SIGNATURES: usize = 8;

/// An HMAC-SHA256 tag's length; a candidate of any other length cannot match.
const HMAC_LEN: usize = 32;

/// A request as it arrived: raw headers and raw body bytes, nothing parsed yet.
#[derive(Clone, Copy)]
pub struct Unverified<'a> {
    pub headers: &'a HeaderMap,
    pub body: &'a [u8],
}

/// Proof that a request carried a valid signature from a key that was usable at `now`.
/// Fields are private so nothing outside this module can forge one.
#[derive(Debug, Clone)]
pub struct Verified {
    key_id: String,
    signed_id: Option<String>,
    timestamp: Option<i64>,
    /// The signature that matched; hashed only if the inbox needs its digest (unsigned ids).
    signature: Vec<u8>,
}

impl Verified {
    /// Id of the key whose signature matched.
    pub fn key_id(&self) -> &str {
        &self.key_id
    }
    /// The signed timestamp (unix seconds), when the scheme signs one.
    pub fn timestamp(&self) -> Option<i64> {
        self.timestamp
    }
    /// SHA-256 of the matching signature bytes: the replay nonce.
    /// SHA-256 of the signature that matched: the replay nonce for events with unsigned ids.
    pub fn signature_digest(&self) -> [u8; 32] {
        Sha256::digest(&self.signature).into()
    }
    /// The event id header value the signature covers, when the scheme signs one.
    pub fn signed_id(&self) -> Option<&str> {
        self.signed_id.as_deref()
    }
}

/// Why a request was refused. The `&'static str` is a reason code for logs and metrics; it never
/// carries header values, so nothing secret can leak through it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rejection {
    /// 400 `malformed_request`: a header the scheme needs is missing or unparseable.
    Malformed(&'static str),
    /// 401 `invalid_signature`: no signature, no usable key, or no match.
    InvalidSignature(&'static str),
}

impl Rejection {
    pub fn reason(&self) -> &'static str {
        match self {
            Rejection::Malformed(r) | Rejection::InvalidSignature(r) => r,
        }
    }
}

/// One signature offered by the request.
#[derive(Clone)]
pub enum Candidate {
    HmacSha256(Vec<u8>),
    Ed25519(Signature),
}

/// What a scheme reads from the headers: the signed message is `prefix ++ body ++ suffix`.
pub struct Envelope {
    pub timestamp: Option<i64>,
    /// Set when the scheme names the key that signed; then only that key is tried.
    pub key_id: Option<String>,
    pub prefix: Vec<u8>,
    pub suffix: Vec<u8>,
    pub candidates: Vec<Candidate>,
    /// An event id header value that is part of the signed message (Standard Webhooks, a
    /// generic `signedPayload` with `{event_id}`).
    pub signed_id: Option<String>,
}

/// Everything a scheme's signer needs to produce the provider's headers.
pub struct SignInput<'a> {
    pub key_id: &'a str,
    pub timestamp: i64,
    pub event_id: &'a str,
    pub event_type: Option<&'a str>,
    pub body: &'a [u8],
}

/// The provider formats hookgate understands.
#[derive(Debug, Clone)]
pub enum Scheme {
    Stripe,
    Github,
    StandardWebhooks,
    Slack,
    Shopify,
    HmacSha256(GenericScheme),
    Ed25519(GenericScheme),
}

impl Scheme {
    /// The `spec.scheme.type` spelling.
    pub fn name(&self) -> &'static str {
        match self {
            Scheme::Stripe => "stripe",
            Scheme::Github => "github",
            Scheme::StandardWebhooks => "standard-webhooks",
            Scheme::Slack => "slack",
            Scheme::Shopify => "shopify",
            Scheme::HmacSha256(_) => "hmac-sha256",
            Scheme::Ed25519(_) => "ed25519",
        }
    }

    /// Headers that carry signatures; they are never stored or forwarded.
    pub fn signature_headers(&self) -> Vec<&str> {
        match self {
            Scheme::Stripe => vec!["stripe-signature"],
            Scheme::Github => vec!["x-hub-signature-256", "x-hub-signature"],
            Scheme::StandardWebhooks => vec!["webhook-signature", "svix-signature"],
            Scheme::Slack => vec!["x-slack-signature"],
            Scheme::Shopify => vec!["x-shopify-hmac-sha256"],
            Scheme::HmacSha256(g) | Scheme::Ed25519(g) => vec![g.signature_header.as_str()],
        }
    }

    /// Reads the scheme's headers. Runs before any key is touched and before the body is parsed.
    pub fn envelope(&self, headers: &HeaderMap) -> Result<Envelope, Rejection> {
        match self {
            Scheme::Stripe => stripe::envelope(headers),
            Scheme::Github => github::envelope(headers),
            Scheme::StandardWebhooks => standard_webhooks::envelope(headers),
            Scheme::Slack => slack::envelope(headers),
            Scheme::Shopify => shopify::envelope(headers),
            Scheme::HmacSha256(g) => hmac_sha256::envelope(g, headers),
            Scheme::Ed25519(g) => ed25519::envelope(g, headers),
        }
    }

    /// Turns the bytes stored in a Secret into key material the way this provider means them.
    pub fn parse_key(&self, raw: &[u8]) -> Result<KeyMaterial, String> {
        // Anyone can compute an HMAC with an empty key: refuse it instead of accepting forgeries.
        if keys::trim_newline(raw).is_empty() {
            return Err("the key is empty".into());
        }
        match self {
            Scheme::Stripe => Ok(KeyMaterial::Hmac(keys::trim_newline(raw).to_vec())),
            Scheme::StandardWebhooks => standard_webhooks::parse_key(raw),
            Scheme::Github | Scheme::Slack | Scheme::Shopify | Scheme::HmacSha256(_) => {
                Ok(KeyMaterial::Hmac(keys::trim_newline(raw).to_vec()))
            }
            Scheme::Ed25519(_) => keys::parse_ed25519_public(raw).map(KeyMaterial::Ed25519),
        }
    }

    /// Headers a provider would send for `input`, signed with `key`.
    pub fn sign(
        &self,
        key: &SigningKey,
        input: &SignInput,
    ) -> Result<Vec<(String, String)>, String> {
        match self {
            Scheme::Stripe => stripe::sign(key, input),
            Scheme::Github => github::sign(key, input),
            Scheme::StandardWebhooks => standard_webhooks::sign(key, input),
            Scheme::Slack => slack::sign(key, input),
            Scheme::Shopify => shopify::sign(key, input),
            Scheme::HmacSha256(g) => hmac_sha256::sign(g, key, input),
            Scheme::Ed25519(g) => ed25519::sign(g, key, input),
        }
    }
}

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
                KeyMaterial::Ed25519(_) => None,
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
        let prepared = self.prepare(req.headers, now)?;
        self.check(prepared, req.body)
    }

    /// The cheap half of [`Verifier::verify`], from the headers alone, so that the receiver can
    /// refuse before it reads the body: header shape, the number of signatures, the key id.
    pub fn prepare(&self, headers: &HeaderMap, now: DateTime<Utc>) -> Result<Prepared, Rejection> {
        let env = self.scheme.envelope(headers)?;
        if env.candidates.is_empty() {
            return Err(Rejection::InvalidSignature("missing_signature"));
        }
        // The one place the cap is enforced, for every scheme.
        if env.candidates.len() > MAX_SIGNATURES {
            return Err(Rejection::Malformed("too_many_signatures"));
        }
        let usable = |i: &usize| self.keys[*i].not_after.is_none_or(|t| now < t);
        let keys: Vec<usize> = match &env.key_id {
            Some(id) => {
                let key = (0..self.keys.len())
                    .find(|&i| &self.keys[i].id == id)
                    .ok_or(Rejection::InvalidSignature("unknown_key_id"))?;
                if !usable(&key) {
                    return Err(Rejection::InvalidSignature("retired_key"));
                }
                vec![key]
            }
            None => (0..self.keys.len()).filter(usable).collect(),
        };
        if keys.is_empty() {
            return Err(Rejection::InvalidSignature("no_usable_key"));
        }
        Ok(Prepared { env, keys })
    }

    /// The expensive half: the MACs and signatures over the body.
    pub fn check(&self, prepared: Prepared, body: &[u8]) -> Result<Verified, Rejection> {
        let Prepared { env, keys } = prepared;
        let mut message: Option<Vec<u8>> = None;
        for i in keys {
            let (key, keyed) = (&self.keys[i], self.keyed[i].as_ref());
            if let Some(sig) = matching_candidate(key, keyed, &env, body, &mut message) {
                return Ok(Verified {
                    key_id: key.id.clone(),
                    signed_id: env.signed_id,
                    timestamp: env.timestamp,
                    signature: sig,
                });
            }
        }
        Err(Rejection::InvalidSignature("signature_mismatch"))
    }
}

/// A request whose headers passed [`Verifier::prepare`]: its envelope and the keys to try. Only
/// [`Verifier::check`] turns it into a [`Verified`].
pub struct Prepared {
    env: Envelope,
    keys: Vec<usize>,
}

/// Returns the bytes of the first candidate signature that `key` produced, if any.
fn matching_candidate(
    key: &Key,
    keyed: Option<&HmacSha256>,
    env: &Envelope,
    body: &[u8],
    message: &mut Option<Vec<u8>>,
) -> Option<Vec<u8>> {
    match &key.material {
        KeyMaterial::Hmac(_) => {
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
            env.candidates.iter().find_map(|c| match c {
                Candidate::HmacSha256(sig) if bool::from(sig.as_slice().ct_eq(tag.as_slice())) => {
                    Some(sig.clone())
                }
                _ => None,
            })
        }
        KeyMaterial::Ed25519(public) => {
            // Ed25519 needs the message contiguous; build it once for all keys.
            let msg =
                message.get_or_insert_with(|| [&env.prefix[..], body, &env.suffix[..]].concat());
            env.candidates.iter().find_map(|c| match c {
                Candidate::Ed25519(sig) if public.verify_strict(msg, sig).is_ok() => {
                    Some(sig.to_bytes().to_vec())
                }
                _ => None,
            })
        }
    }
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

/// A header's value exactly as sent; `None` when absent, an error when present but not visible ASCII.
pub fn header_str<'h>(headers: &'h HeaderMap, name: &str) -> Result<Option<&'h str>, Rejection> {
    match headers.get(name) {
        None => Ok(None),
        Some(v) => v
            .to_str()
            .map(Some)
            .map_err(|_| Rejection::Malformed("non_ascii_header")),
    }
}

/// Parses a unix-seconds timestamp header value.
pub fn parse_unix_seconds(s: &str) -> Result<i64, Rejection> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return Err(Rejection::Malformed("bad_timestamp"));
    }
    s.parse::<i64>()
        .map_err(|_| Rejection::Malformed("bad_timestamp"))
}

#[cfg(test)]
pub(crate) mod testutil;
