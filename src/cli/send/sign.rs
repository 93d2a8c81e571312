//! Signing a request as the integration's provider would: the key to sign with, the body as the
//! scheme needs it, and the headers (or query) the scheme reads, for an event or for a
//! provider's endpoint check.

use super::{HandshakeRequest, SendOptions, SignedRequest, handshake};
use crate::crd::WebhookIntegration;
use crate::crd::defaults;
use crate::route::{self, CompiledRoute, Secrets};
use crate::signature::keys::{parse_ed25519_private, parse_p256_private};
use crate::signature::{Key, KeyMaterial, Scheme, SignInput, SigningKey};
use chrono::{DateTime, Utc};
use kube::ResourceExt;

/// The newest usable key (or `opts.key_id`) and what signs with it. A public key needs its
/// private half from `opts.signing_key`, and it must be that key's.
fn signing_key<'r>(
    compiled: &'r CompiledRoute,
    opts: &SendOptions,
    now: DateTime<Utc>,
) -> Result<(&'r Key, SigningKey), String> {
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
    let private = || {
        opts.signing_key.as_ref().ok_or_else(|| {
            format!(
                "key {:?} is a public key: pass its private key with --signing-key-file",
                key.id
            )
        })
    };
    let not_its = || format!("--signing-key-file does not belong to key {:?}", key.id);
    let signing = match &key.material {
        KeyMaterial::Hmac(secret) => SigningKey::Hmac(secret.clone()),
        KeyMaterial::Ed25519(public) => {
            let private = parse_ed25519_private(private()?)
                .map_err(|e| format!("--signing-key-file: {e}"))?;
            if private.verifying_key() != *public {
                return Err(not_its());
            }
            SigningKey::Ed25519(private)
        }
        KeyMaterial::EcdsaP256(public) => {
            let private =
                parse_p256_private(private()?).map_err(|e| format!("--signing-key-file: {e}"))?;
            if private.verifying_key() != public {
                return Err(not_its());
            }
            SigningKey::EcdsaP256(private)
        }
    };
    Ok((key, signing))
}

pub(super) fn route_path(wi: &WebhookIntegration) -> String {
    let namespace = wi.namespace().unwrap_or_else(|| "default".into());
    wi.spec
        .path
        .clone()
        .unwrap_or_else(|| defaults::path(&namespace, &wi.name_any()))
}

/// `application/json` for a body that starts with `{` or `[`, else
/// `application/x-www-form-urlencoded`: the same test Twilio's signer applies to choose between
/// a body hash in the URL and signed form parameters, so the header never contradicts what was
/// signed.
pub fn content_type(body: &[u8]) -> &'static str {
    match body.iter().find(|b| !b.is_ascii_whitespace()) {
        Some(b'{' | b'[') => "application/json",
        _ => "application/x-www-form-urlencoded",
    }
}

/// Linear signs the time inside the body (`webhookTimestamp`, unix milliseconds) and refuses it
/// after 60 s, so a body file could only ever be sent once. When a JSON object has no
/// `webhookTimestamp`, the signed timestamp is written into it, the rest of the bytes unchanged.
pub(super) fn linear_body(
    body: Vec<u8>,
    timestamp: i64,
    explicit: bool,
) -> Result<Vec<u8>, String> {
    let Ok(serde_json::Value::Object(fields)) = serde_json::from_slice(&body) else {
        return Ok(body);
    };
    if fields.contains_key("webhookTimestamp") {
        if explicit {
            return Err(
                "--timestamp: the body already carries webhookTimestamp, which is \
                        what linear signs; drop one of them"
                    .into(),
            );
        }
        return Ok(body);
    }
    let open = body.iter().position(|&b| b == b'{').expect("a JSON object");
    let empty = body[open + 1..]
        .iter()
        .find(|b| !b.is_ascii_whitespace())
        .is_some_and(|&b| b == b'}');
    let ms = timestamp
        .checked_mul(1000)
        .ok_or("--timestamp: out of range")?;
    let field = format!("\"webhookTimestamp\":{ms}{}", if empty { "" } else { "," });
    let mut out = Vec::with_capacity(body.len() + field.len());
    out.extend_from_slice(&body[..=open]);
    out.extend_from_slice(field.as_bytes());
    out.extend_from_slice(&body[open + 1..]);
    Ok(out)
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
    let (key, signing) = signing_key(&compiled, opts, now)?;
    let scheme = compiled.verifier.scheme();
    let timestamp = opts.timestamp.unwrap_or_else(|| now.timestamp());
    let body = match scheme {
        Scheme::Linear => linear_body(body, timestamp, opts.timestamp.is_some())?,
        _ => body,
    };
    let event_id = event_id(opts);
    let input = SignInput {
        key_id: &key.id,
        timestamp,
        event_id: &event_id,
        event_type: opts.event_type.as_deref(),
        body: &body,
    };
    let mut headers = scheme.sign(&signing, &input)?;
    let ct = opts.content_type.as_deref().unwrap_or(content_type(&body));
    headers.push(("content-type".into(), ct.into()));
    let mut path = route_path(wi);
    if let Some(q) = scheme.signed_query(&body) {
        path = format!("{path}?{q}");
    }
    Ok(SignedRequest {
        path,
        headers,
        body,
        key_id: key.id.clone(),
    })
}

/// The scheme's endpoint check (`--handshake`), signed with the key an event would be signed
/// with (`opts.key_id`, `--signing-key-file`, `--timestamp` apply), or Meta's unsigned GET with
/// the verify token from `spec.scheme.verifyTokenRef`.
pub fn sign_handshake(
    wi: &WebhookIntegration,
    secrets: &Secrets,
    variant: Option<crate::cli::HandshakeVariant>,
    opts: &SendOptions,
    now: DateTime<Utc>,
) -> Result<HandshakeRequest, String> {
    let compiled = route::compile(wi, secrets).map_err(|e| e.to_string())?;
    let scheme = compiled.verifier.scheme();
    // Before any key is looked at: a scheme without a handshake is the error to report.
    handshake::supported(scheme, variant)?;
    let challenge = format!("hs_{:032x}", rand::random::<u128>());
    let mut cx = handshake::Context {
        challenge: &challenge,
        now,
        event_type: opts.event_type.as_deref(),
        secret: None,
        verify_token: compiled.verify_token.as_ref().map(|t| t.0.as_slice()),
    };
    if let Scheme::Meta = scheme {
        let probe = handshake::build(scheme, variant, &cx)?;
        let query = probe.query.clone().unwrap_or_default();
        return Ok(HandshakeRequest {
            method: probe.method,
            path: format!("{}?{query}", route_path(wi)),
            headers: Vec::new(),
            body: Vec::new(),
            key_id: None,
            probe,
        });
    }
    let (key, signing) = signing_key(&compiled, opts, now)?;
    if let SigningKey::Hmac(secret) = &signing {
        cx.secret = Some(secret);
    }
    let probe = handshake::build(scheme, variant, &cx)?;
    let event_id = event_id(opts);
    let input = SignInput {
        key_id: &key.id,
        timestamp: opts.timestamp.unwrap_or_else(|| now.timestamp()),
        event_id: &event_id,
        event_type: opts.event_type.as_deref(),
        body: &probe.body,
    };
    let mut headers = scheme.sign(&signing, &input)?;
    for (name, value) in &probe.headers {
        headers.retain(|(n, _)| !n.eq_ignore_ascii_case(name));
        headers.push((name.clone(), value.clone()));
    }
    let ct = opts.content_type.as_deref().unwrap_or("application/json");
    headers.push(("content-type".into(), ct.into()));
    Ok(HandshakeRequest {
        method: probe.method,
        path: route_path(wi),
        headers,
        body: probe.body.clone(),
        key_id: Some(key.id.clone()),
        probe,
    })
}

/// The `--event-id` given, or a fresh random one in the shape providers use.
fn event_id(opts: &SendOptions) -> String {
    opts.event_id
        .clone()
        .unwrap_or_else(|| format!("evt_{:032x}", rand::random::<u128>()))
}
