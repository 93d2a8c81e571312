//! What crosses the signature boundary: the raw request in, a [`Verified`] proof or a
//! [`Rejection`] out, and the [`Envelope`] a scheme reads from the headers.

use axum::http::HeaderMap;
use ed25519_dalek::Signature;
use sha2::{Digest, Sha256};

/// A request as it arrived: raw headers and raw body bytes, nothing parsed yet.
#[derive(Clone, Copy)]
pub struct Unverified<'a> {
    pub headers: &'a HeaderMap,
    /// The raw query string, without `?`; only Twilio signs it (inside its URL).
    pub query: Option<&'a str>,
    pub body: &'a [u8],
}

/// Proof that a request carried a valid signature from a key that was usable at `now`.
/// Fields are private to `signature` so nothing outside it can forge one.
#[derive(Debug, Clone)]
pub struct Verified {
    pub(super) key_id: String,
    pub(super) signed_id: Option<String>,
    pub(super) timestamp: Option<i64>,
    /// The signature that matched; hashed only if the inbox needs its digest (unsigned ids).
    pub(super) signature: Vec<u8>,
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
    /// Twilio's: HMAC-SHA1.
    HmacSha1(Vec<u8>),
    Ed25519(Signature),
    /// SendGrid's: ECDSA P-256 over SHA-256.
    EcdsaP256(p256::ecdsa::Signature),
    /// GitLab's: the shared token itself, compared in constant time; proves the token, not the body.
    Token(Vec<u8>),
}

/// Reads the signed timestamp (unix seconds) from a verified body.
pub type BodyTimestamp = fn(&[u8]) -> Result<i64, Rejection>;

/// Which bytes of the body the signature covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SignedBody {
    /// `prefix ++ body ++ suffix`.
    Raw,
    /// `prefix ++` each form parameter's name and value, sorted (Twilio form posts).
    FormPairs,
    /// `prefix ++ suffix` only, and the body must hash to this SHA-256 (Twilio JSON posts, where
    /// the hash travels in the signed URL).
    Sha256([u8; 32]),
}

/// What a scheme reads from the headers (and the query): what was signed, which signatures were
/// offered, and the signed timestamp.
pub struct Envelope {
    pub timestamp: Option<i64>,
    /// Set when the scheme names the key that signed; then only that key is tried.
    pub key_id: Option<String>,
    pub prefix: Vec<u8>,
    pub suffix: Vec<u8>,
    pub body: SignedBody,
    pub candidates: Vec<Candidate>,
    /// An event id header value that is part of the signed message (Standard Webhooks, a
    /// generic `signedPayload` with `{event_id}`), or that alone proves the event (GitLab's UUID).
    pub signed_id: Option<String>,
    /// For schemes whose signed timestamp is inside the body (Linear): read after the signature
    /// matched, as unix seconds.
    pub body_timestamp: Option<BodyTimestamp>,
}

impl Envelope {
    /// The common case: `prefix ++ body ++ suffix` signed, nothing else. `candidates` may be
    /// the one signature a header carried, or none (an `Option`).
    pub fn signed(prefix: Vec<u8>, candidates: impl IntoIterator<Item = Candidate>) -> Self {
        Self {
            timestamp: None,
            key_id: None,
            prefix,
            suffix: Vec::new(),
            body: SignedBody::Raw,
            candidates: candidates.into_iter().collect(),
            signed_id: None,
            body_timestamp: None,
        }
    }
}

/// Everything a scheme's signer needs to produce the provider's headers.
pub struct SignInput<'a> {
    pub key_id: &'a str,
    pub timestamp: i64,
    pub event_id: &'a str,
    pub event_type: Option<&'a str>,
    pub body: &'a [u8],
}
