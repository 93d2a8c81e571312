//! `hookgate send`: build a request exactly as the integration's provider would sign it.

use crate::crd::WebhookIntegration;
use crate::crd::defaults;
use crate::receiver::route::{self, Secrets};
use crate::receiver::verify::keys::parse_ed25519_private;
use crate::receiver::verify::{KeyMaterial, SignInput, SigningKey};
use chrono::{DateTime, Utc};
use kube::ResourceExt;

/// What to send. `event_id` is generated when `None`.
#[derive(Debug, Default, Clone)]
pub struct SendOptions {
    pub key_id: Option<String>,
    pub event_id: Option<String>,
    pub event_type: Option<String>,
    /// Ed25519 private key (raw, base64, hex or PKCS#8 PEM), for schemes verified by public key.
    pub signing_key: Option<Vec<u8>>,
    pub timestamp: Option<i64>,
}

/// A signed request ready to POST.
#[derive(Debug, Clone)]
pub struct SignedRequest {
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    pub key_id: String,
}

/// Signs `body` for `wi` with the newest usable key (or `opts.key_id`).
pub fn sign_request(
    wi: &WebhookIntegration,
    secrets: &Secrets,
    body: Vec<u8>,
    opts: &SendOptions,
    now: DateTime<Utc>,
) -> Result<SignedRequest, String> {
    let compiled = route::compile(wi, secrets).map_err(|e| e.to_string())?;
    let key = match &opts.key_id {
        Some(id) => compiled
            .verifier
            .keys()
            .iter()
            .find(|k| &k.id == id)
            .ok_or_else(|| format!("integration has no key {id:?}"))?,
        None => compiled
            .verifier
            .keys()
            .iter()
            .rev()
            .find(|k| k.not_after.is_none_or(|t| now < t))
            .ok_or("every key of this integration is retired")?,
    };
    let signing = match &key.material {
        KeyMaterial::Hmac(secret) => SigningKey::Hmac(secret.clone()),
        KeyMaterial::Ed25519(public) => {
            let raw = opts.signing_key.as_ref().ok_or_else(|| {
                format!(
                    "key {:?} is a public key: pass its private key with --signing-key-file",
                    key.id
                )
            })?;
            let private =
                parse_ed25519_private(raw).map_err(|e| format!("--signing-key-file: {e}"))?;
            if private.verifying_key() != *public {
                return Err(format!(
                    "--signing-key-file does not belong to key {:?}",
                    key.id
                ));
            }
            SigningKey::Ed25519(private)
        }
    };
    let event_id = opts
        .event_id
        .clone()
        .unwrap_or_else(|| format!("evt_{:032x}", rand::random::<u128>()));
    let input = SignInput {
        key_id: &key.id,
        timestamp: opts.timestamp.unwrap_or_else(|| now.timestamp()),
        event_id: &event_id,
        event_type: opts.event_type.as_deref(),
        body: &body,
    };
    let mut headers = compiled.verifier.scheme().sign(&signing, &input)?;
    headers.push(("content-type".into(), "application/json".into()));
    let namespace = wi.namespace().unwrap_or_else(|| "default".into());
    Ok(SignedRequest {
        path: wi
            .spec
            .path
            .clone()
            .unwrap_or_else(|| defaults::path(&namespace, &wi.name_any())),
        headers,
        body,
        key_id: key.id.clone(),
    })
}
