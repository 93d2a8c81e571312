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

mod request;
mod verifier;

use axum::http::HeaderMap;

pub use generic::{Encoding, GenericScheme, Template};
pub use keys::{Key, KeyMaterial, SigningKey};
pub use request::{Candidate, Envelope, Rejection, SignInput, Unverified, Verified};
pub use verifier::{Prepared, Verifier, hmac_sha256};

/// Most signatures one request may offer. Providers send one, or two while a secret rolls; the cap
/// keeps a request from costing keys x thousands of Ed25519 or HMAC checks. More is 400.
pub const MAX_SIGNATURES: usize = 8;

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

/// A header's value exactly as sent; `None` when absent, an error when present but not visible
/// ASCII, or when sent more than once.
pub fn header_str<'h>(headers: &'h HeaderMap, name: &str) -> Result<Option<&'h str>, Rejection> {
    let mut lines = headers.get_all(name).iter();
    let Some(v) = lines.next() else {
        return Ok(None);
    };
    // Which of two lines counts would otherwise depend on the proxies on the way (one keeps the
    // first, one the last, one joins them), so a signed value is never taken from a pair.
    if lines.next().is_some() {
        return Err(Rejection::Malformed("repeated_header"));
    }
    v.to_str()
        .map(Some)
        .map_err(|_| Rejection::Malformed("non_ascii_header"))
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

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    #[test]
    fn a_header_is_read_once_as_visible_ascii() {
        let mut h = HeaderMap::new();
        assert_eq!(header_str(&h, "x-sig"), Ok(None));
        h.append("x-sig", HeaderValue::from_static("abc"));
        assert_eq!(header_str(&h, "x-sig"), Ok(Some("abc")));
        h.append("x-sig", HeaderValue::from_static("abc"));
        assert_eq!(
            header_str(&h, "x-sig"),
            Err(Rejection::Malformed("repeated_header")),
            "even two identical lines"
        );
        h.insert("x-sig", HeaderValue::from_bytes(b"ab\xff").unwrap());
        assert_eq!(
            header_str(&h, "x-sig"),
            Err(Rejection::Malformed("non_ascii_header"))
        );
    }
}
