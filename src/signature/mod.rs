//! Signature verification. Each provider scheme lives in its own file and only knows how to read its
//! headers into an [`Envelope`] (what was signed, which signatures were offered) and how to sign like
//! the provider does. The cryptography, key selection and retirement rules live here, once, so every
//! scheme gets constant-time comparison and the same key-ring semantics.
//!
//! Only [`Verifier::verify`] can produce a [`Verified`], and the inbox only accepts events built from
//! one: an unverified request has no path to storage.

pub mod discord;
pub mod ed25519;
pub mod generic;
pub mod github;
pub mod gitlab;
pub mod hmac_sha256;
pub mod keys;
pub mod linear;
pub mod meta;
pub mod paddle;
pub mod sendgrid;
pub mod shopify;
pub mod slack;
pub mod square;
pub mod standard_webhooks;
pub mod stripe;
pub mod twilio;
pub mod twitch;
pub mod zoom;

mod fields;
mod handshake;
mod request;
mod verifier;

use axum::http::HeaderMap;

pub use fields::{
    Encoding, decode_hex, decode_hex_to_slice, header_str, parse_rfc3339_seconds,
    parse_unix_seconds, signature_header, unix_seconds_header,
};
pub use generic::{GenericScheme, Template};
pub use handshake::{Handshake, Subscription};
pub use keys::{Key, KeyMaterial, SigningKey};
pub use request::{Candidate, Envelope, Rejection, SignInput, SignedBody, Unverified, Verified};
pub use verifier::{Prepared, Verifier, hmac_sha1, hmac_sha256};

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
    Discord,
    /// `public_url`: the exact URL configured in Twilio, which Twilio signs.
    Twilio {
        public_url: String,
    },
    Twitch,
    Zoom,
    Meta,
    Gitlab,
    Paddle,
    /// `public_url`: the notification URL configured in Square, which Square signs.
    Square {
        public_url: String,
    },
    Sendgrid,
    Linear,
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
            Scheme::Discord => "discord",
            Scheme::Twilio { .. } => "twilio",
            Scheme::Twitch => "twitch",
            Scheme::Zoom => "zoom",
            Scheme::Meta => "meta",
            Scheme::Gitlab => "gitlab",
            Scheme::Paddle => "paddle",
            Scheme::Square { .. } => "square",
            Scheme::Sendgrid => "sendgrid",
            Scheme::Linear => "linear",
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
            Scheme::Discord => vec![discord::SIGNATURE],
            Scheme::Twilio { .. } => vec![twilio::SIGNATURE],
            Scheme::Twitch => vec![twitch::SIGNATURE],
            Scheme::Zoom => vec![zoom::SIGNATURE],
            Scheme::Meta => vec![meta::SIGNATURE, "x-hub-signature"],
            Scheme::Gitlab => vec![gitlab::TOKEN],
            Scheme::Paddle => vec![paddle::SIGNATURE],
            Scheme::Square { .. } => vec![square::SIGNATURE, "x-square-signature"],
            Scheme::Sendgrid => vec![sendgrid::SIGNATURE],
            Scheme::Linear => vec![linear::SIGNATURE],
        }
    }

    /// Reads the scheme's headers (and for Twilio the query string, part of its signed URL).
    /// Runs before any key is touched and before the body is read.
    pub fn envelope(
        &self,
        headers: &HeaderMap,
        query: Option<&str>,
    ) -> Result<Envelope, Rejection> {
        match self {
            Scheme::Stripe => stripe::envelope(headers),
            Scheme::Github => github::envelope(headers),
            Scheme::StandardWebhooks => standard_webhooks::envelope(headers),
            Scheme::Slack => slack::envelope(headers),
            Scheme::Shopify => shopify::envelope(headers),
            Scheme::HmacSha256(g) => hmac_sha256::envelope(g, headers),
            Scheme::Ed25519(g) => ed25519::envelope(g, headers),
            Scheme::Discord => discord::envelope(headers),
            Scheme::Twilio { public_url } => twilio::envelope(public_url, headers, query),
            Scheme::Twitch => twitch::envelope(headers),
            Scheme::Zoom => zoom::envelope(headers),
            Scheme::Meta => meta::envelope(headers),
            Scheme::Gitlab => gitlab::envelope(headers),
            Scheme::Paddle => paddle::envelope(headers),
            Scheme::Square { public_url } => square::envelope(public_url, headers),
            Scheme::Sendgrid => sendgrid::envelope(headers),
            Scheme::Linear => linear::envelope(headers),
        }
    }

    /// A verified request that is the provider checking the endpoint, and the answer it expects.
    /// `key` is the key that verified it (Zoom answers with an HMAC under it).
    pub fn handshake(
        &self,
        headers: &HeaderMap,
        body: &[u8],
        key: &KeyMaterial,
    ) -> Option<Handshake> {
        match self {
            Scheme::Slack => slack::handshake(body),
            Scheme::Discord => discord::handshake(body),
            Scheme::Twitch => twitch::handshake(headers, body),
            Scheme::Zoom => zoom::handshake(body, key),
            _ => None,
        }
    }

    /// The query string a sender must add to the URL it posts to, when the scheme signs one
    /// (Twilio's `bodySHA256` for JSON bodies).
    pub fn signed_query(&self, body: &[u8]) -> Option<String> {
        match self {
            Scheme::Twilio { .. } => twilio::signed_query(body),
            _ => None,
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
            Scheme::Ed25519(_) | Scheme::Discord => {
                keys::parse_ed25519_public(raw).map(KeyMaterial::Ed25519)
            }
            Scheme::Sendgrid => keys::parse_p256_public(raw).map(KeyMaterial::EcdsaP256),
            Scheme::Github
            | Scheme::Slack
            | Scheme::Shopify
            | Scheme::HmacSha256(_)
            | Scheme::Twilio { .. }
            | Scheme::Twitch
            | Scheme::Zoom
            | Scheme::Meta
            | Scheme::Gitlab
            | Scheme::Paddle
            | Scheme::Square { .. }
            | Scheme::Linear => Ok(KeyMaterial::Hmac(keys::trim_newline(raw).to_vec())),
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
            Scheme::Discord => discord::sign(key, input),
            Scheme::Twilio { public_url } => twilio::sign(public_url, key, input),
            Scheme::Twitch => twitch::sign(key, input),
            Scheme::Zoom => zoom::sign(key, input),
            Scheme::Meta => meta::sign(key, input),
            Scheme::Gitlab => gitlab::sign(key, input),
            Scheme::Paddle => paddle::sign(key, input),
            Scheme::Square { public_url } => square::sign(public_url, key, input),
            Scheme::Sendgrid => sendgrid::sign(key, input),
            Scheme::Linear => linear::sign(key, input),
        }
    }
}

/// The HMAC secret a signer needs, or an error naming the scheme.
fn hmac_secret<'k>(key: &'k SigningKey, scheme: &str) -> Result<&'k [u8], String> {
    match key {
        SigningKey::Hmac(secret) => Ok(secret),
        _ => Err(format!(
            "{scheme} signs with a shared secret, not a private key"
        )),
    }
}

#[cfg(test)]
pub(crate) mod testutil;
