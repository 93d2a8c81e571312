//! `hookgate send`: build a request exactly as the integration's provider would sign it.

use super::{SendArgs, SendRequestArgs};
use crate::crd::WebhookIntegration;
use crate::crd::defaults;
use crate::manifest;
use crate::route::{self, Secrets};
use crate::signature::keys::{parse_ed25519_private, parse_p256_private};
use crate::signature::{KeyMaterial, SignInput, SigningKey};
use anyhow::{Context, bail};
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
        KeyMaterial::EcdsaP256(public) => {
            let raw = opts.signing_key.as_ref().ok_or_else(|| {
                format!(
                    "key {:?} is a public key: pass its private key with --signing-key-file",
                    key.id
                )
            })?;
            let private =
                parse_p256_private(raw).map_err(|e| format!("--signing-key-file: {e}"))?;
            if private.verifying_key() != public {
                return Err(format!(
                    "--signing-key-file does not belong to key {:?}",
                    key.id
                ));
            }
            SigningKey::EcdsaP256(private)
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

/// `hookgate send -f FILES --integration NS/NAME`.
pub async fn run(a: SendArgs) -> anyhow::Result<()> {
    let manifests = manifest::load(&a.files)?;
    let loaded = manifests
        .find(&a.integration)
        .with_context(|| format!("no WebhookIntegration {} in the given files", a.integration))?;
    let source = format!("{}: {}", loaded.file, loaded.object());
    let (status, text, key_id) =
        send_signed(&loaded.integration, &manifests.secrets, &a.request, &source).await?;
    println!("{status} {text}");
    eprintln!("(signed with key {key_id:?})");
    Ok(())
}

/// Signs the request as the integration's provider would and POSTs it. Returns the status, the
/// response body and the id of the key used. `source` names the integration in errors.
pub async fn send_signed(
    wi: &WebhookIntegration,
    secrets: &crate::route::Secrets,
    a: &SendRequestArgs,
    source: &str,
) -> anyhow::Result<(u16, String, String)> {
    let body = match (&a.body, &a.body_file) {
        (Some(b), _) => b.clone().into_bytes(),
        (None, Some(f)) => {
            std::fs::read(f).with_context(|| format!("--body-file {}", f.display()))?
        }
        (None, None) => bail!("pass --body or --body-file"),
    };
    let signing_key = match &a.signing_key_file {
        Some(f) => {
            Some(std::fs::read(f).with_context(|| format!("--signing-key-file {}", f.display()))?)
        }
        None => None,
    };
    let opts = SendOptions {
        key_id: a.key_id.clone(),
        event_id: a.event_id.clone(),
        event_type: a.event_type.clone(),
        signing_key,
        timestamp: a.timestamp,
    };
    let req = sign_request(wi, secrets, body, &opts, chrono::Utc::now())
        .map_err(|e| anyhow::anyhow!("{source}: {e}"))?;
    let url = target_url(&a.url, &req.path)?;
    let mut builder = reqwest::Client::new().post(&url).body(req.body);
    for (k, v) in &req.headers {
        builder = builder.header(k, v);
    }
    let res = builder
        .send()
        .await
        .with_context(|| format!("POST {url}"))?;
    let status = res.status().as_u16();
    let text = res.text().await.unwrap_or_default();
    Ok((status, text, req.key_id))
}

/// `--url` with no path gets the integration's route; a URL with a path is taken as given.
fn target_url(url: &str, route: &str) -> anyhow::Result<String> {
    let parsed = reqwest::Url::parse(url).with_context(|| format!("--url {url:?}"))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        bail!("--url {url:?}: use an http:// or https:// URL");
    }
    Ok(match parsed.path() {
        "" | "/" => format!("{}{route}", url.trim_end_matches('/')),
        _ => url.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn send_url_appends_the_route_only_to_a_bare_base() {
        let route = "/hooks/payments/stripe";
        assert_eq!(
            target_url("http://127.0.0.1:8080", route).unwrap(),
            "http://127.0.0.1:8080/hooks/payments/stripe"
        );
        assert_eq!(
            target_url("https://h.example/", route).unwrap(),
            "https://h.example/hooks/payments/stripe"
        );
        assert_eq!(
            target_url("https://h.example/in/stripe", route).unwrap(),
            "https://h.example/in/stripe"
        );
        assert!(
            target_url("ftp://h.example", route)
                .unwrap_err()
                .to_string()
                .contains("--url")
        );
        assert!(target_url("not a url", route).is_err());
    }
}
