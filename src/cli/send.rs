//! `hookgate send`: build a request exactly as the integration's provider would sign it.

use super::{SendArgs, SendRequestArgs};
use crate::crd::WebhookIntegration;
use crate::crd::defaults;
use crate::manifest;
use crate::route::{self, CompiledRoute, Secrets};
use crate::signature::keys::{parse_ed25519_private, parse_p256_private};
use crate::signature::{Key, KeyMaterial, Scheme, SignInput, SigningKey};
use anyhow::{Context, bail};
use chrono::{DateTime, Utc};
use kube::ResourceExt;

pub mod handshake;

/// What to send. `event_id` is generated when `None`.
#[derive(Debug, Default, Clone)]
pub struct SendOptions {
    pub key_id: Option<String>,
    pub event_id: Option<String>,
    pub event_type: Option<String>,
    /// Private key for schemes verified by public key: Ed25519 (raw, base64, hex or PKCS#8 PEM)
    /// or ECDSA P-256 (PKCS#8 or SEC1 PEM, or base64 DER).
    pub signing_key: Option<Vec<u8>>,
    pub timestamp: Option<i64>,
    /// Default: from the body (see [`content_type`]).
    pub content_type: Option<String>,
}

/// A signed request ready to POST.
#[derive(Debug, Clone)]
pub struct SignedRequest {
    /// Where to POST it: the route's path, followed by the query the scheme signs when it signs
    /// one (Twilio's `?bodySHA256=<hex>` for a JSON body), so `base + path` is the whole target.
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    pub key_id: String,
}

/// A provider's endpoint check, ready to send, with the answer the provider accepts.
#[derive(Debug, Clone)]
pub struct HandshakeRequest {
    pub method: handshake::Method,
    /// The route's path, with Meta's subscription query for its GET. That query holds the verify
    /// token: never print it.
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// The key that signed it; `None` for Meta's unsigned GET.
    pub key_id: Option<String>,
    pub probe: handshake::Probe,
}

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

fn route_path(wi: &WebhookIntegration) -> String {
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
fn linear_body(body: Vec<u8>, timestamp: i64, explicit: bool) -> Result<Vec<u8>, String> {
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
    let event_id = opts
        .event_id
        .clone()
        .unwrap_or_else(|| format!("evt_{:032x}", rand::random::<u128>()));
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
    variant: Option<super::HandshakeVariant>,
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
    let event_id = opts
        .event_id
        .clone()
        .unwrap_or_else(|| format!("evt_{:032x}", rand::random::<u128>()));
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

/// What came back.
#[derive(Debug)]
pub struct Sent {
    pub status: u16,
    pub body: String,
    /// The key that signed the request; `None` for Meta's unsigned GET.
    pub key_id: Option<String>,
    /// For `--handshake`: what was sent, and whether the answer is the one the provider accepts.
    pub handshake: Option<(&'static str, Result<(), String>)>,
}

/// `hookgate send -f FILES --integration NS/NAME`.
pub async fn run(a: SendArgs) -> anyhow::Result<()> {
    let manifests = manifest::load(&a.files)?;
    let loaded = manifests
        .find(&a.integration)
        .with_context(|| format!("no WebhookIntegration {} in the given files", a.integration))?;
    let source = format!("{}: {}", loaded.file, loaded.object());
    let sent = send(&loaded.integration, &manifests.secrets, &a.request, &source).await?;
    println!("{}", format!("{} {}", sent.status, sent.body).trim_end());
    let signed = match &sent.key_id {
        Some(k) => format!("signed with key {k:?}"),
        None => "unsigned, as the provider sends it".into(),
    };
    match sent.handshake {
        None => eprintln!("({signed})"),
        Some((label, Ok(()))) => eprintln!("({label} answered as the provider requires; {signed})"),
        Some((_, Err(why))) => bail!("{source}: {why}"),
    }
    Ok(())
}

/// Signs the request as the integration's provider would and sends it. `source` names the
/// integration in errors.
pub async fn send(
    wi: &WebhookIntegration,
    secrets: &Secrets,
    a: &SendRequestArgs,
    source: &str,
) -> anyhow::Result<Sent> {
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
        content_type: a.content_type.clone(),
    };
    // Errors about the private key name its file too.
    let failed = |e: String| match &a.signing_key_file {
        Some(f) if e.starts_with("--signing-key-file") => anyhow::anyhow!(
            "{source}: {}",
            e.replacen(
                "--signing-key-file",
                &format!("--signing-key-file {}", f.display()),
                1
            )
        ),
        _ => anyhow::anyhow!("{source}: {e}"),
    };
    let signs_url = matches!(wi.spec.scheme.type_, crate::crd::SchemeType::Twilio);
    let now = chrono::Utc::now();
    let client = reqwest::Client::new();
    let (builder, url, key_id, probe) = match a.handshake {
        Some(variant) => {
            let req = sign_handshake(wi, secrets, variant, &opts, now).map_err(failed)?;
            let url = target_url(&a.url, &req.path, signs_url)?;
            let builder = match req.method {
                handshake::Method::Get => client.get(&url),
                handshake::Method::Post => client.post(&url).body(req.body),
            };
            let builder = req.headers.iter().fold(builder, |b, (k, v)| b.header(k, v));
            (builder, url, req.key_id, Some(req.probe))
        }
        None => {
            let body = match (&a.body, &a.body_file) {
                (Some(b), _) => b.clone().into_bytes(),
                (None, Some(f)) => {
                    std::fs::read(f).with_context(|| format!("--body-file {}", f.display()))?
                }
                (None, None) => bail!("pass --body, --body-file or --handshake"),
            };
            let req = sign_request(wi, secrets, body, &opts, now).map_err(failed)?;
            let url = target_url(&a.url, &req.path, signs_url)?;
            let builder = req
                .headers
                .iter()
                .fold(client.post(&url).body(req.body), |b, (k, v)| b.header(k, v));
            (builder, url, Some(req.key_id), None)
        }
    };
    // The URL of a Meta handshake carries the verify token, and reqwest's errors print their
    // URL: errors name the route only.
    let shown = url.split('?').next().unwrap_or_default();
    let res = builder
        .send()
        .await
        .map_err(|e| anyhow::Error::new(e.without_url()))
        .with_context(|| format!("{source}: sending to {shown}"))?;
    let status = res.status().as_u16();
    let content_type = res
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let body = res.text().await.unwrap_or_default();
    let handshake = probe.map(|p| {
        let verdict = handshake::check(&p, status, content_type.as_deref(), &body);
        (p.label, verdict)
    });
    Ok(Sent {
        status,
        body,
        key_id,
        handshake,
    })
}

/// [`send`] for callers that print `status body` and the key: a handshake answered wrongly is an
/// error that carries the status and body. For Meta's unsigned GET the key id is empty.
pub async fn send_signed(
    wi: &WebhookIntegration,
    secrets: &crate::route::Secrets,
    a: &SendRequestArgs,
    source: &str,
) -> anyhow::Result<(u16, String, String)> {
    let sent = send(wi, secrets, a, source).await?;
    if let Some((_, Err(why))) = &sent.handshake {
        bail!("{source}: {why} ({} {})", sent.status, sent.body);
    }
    Ok((sent.status, sent.body, sent.key_id.unwrap_or_default()))
}

/// `--url` with no path gets the integration's route; a URL with a path is taken as given.
/// `path` may end in a query (what the scheme signs, Meta's subscription query): it is kept in
/// either case. `signs_url`: the scheme signs the URL (Twilio), so a query of the user's own
/// would make the signature wrong.
fn target_url(url: &str, path: &str, signs_url: bool) -> anyhow::Result<String> {
    let parsed = reqwest::Url::parse(url).with_context(|| format!("--url {url:?}"))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        bail!("--url {url:?}: use an http:// or https:// URL");
    }
    if parsed.fragment().is_some() {
        bail!("--url {url:?}: a URL with a #fragment cannot be sent");
    }
    let query = path.split_once('?').map(|(_, q)| q);
    let bare = matches!(parsed.path(), "" | "/");
    match parsed.query() {
        Some(_) if signs_url => bail!(
            "--url {url:?}: twilio signs the URL's query (spec.scheme.publicUrl + query): leave \
             the query out"
        ),
        Some(_) if bare => bail!("--url {url:?}: a query needs a path before it"),
        _ => {}
    }
    Ok(match (bare, query) {
        (true, _) => format!("{}{path}", url.trim_end_matches('/')),
        (false, None) => url.to_string(),
        (false, Some(q)) if parsed.query().is_none() => format!("{url}?{q}"),
        (false, Some(q)) => format!("{url}&{q}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn send_url_appends_the_route_only_to_a_bare_base() {
        let route = "/hooks/payments/stripe";
        assert_eq!(
            target_url("http://127.0.0.1:8080", route, false).unwrap(),
            "http://127.0.0.1:8080/hooks/payments/stripe"
        );
        assert_eq!(
            target_url("https://h.example/", route, false).unwrap(),
            "https://h.example/hooks/payments/stripe"
        );
        assert_eq!(
            target_url("https://h.example/in/stripe", route, false).unwrap(),
            "https://h.example/in/stripe"
        );
        assert!(
            target_url("ftp://h.example", route, false)
                .unwrap_err()
                .to_string()
                .contains("--url")
        );
        assert!(target_url("not a url", route, false).is_err());
    }

    #[test]
    fn a_signed_query_is_kept_wherever_the_request_goes() {
        let path = "/hooks/comms/twilio?bodySHA256=ab";
        assert_eq!(
            target_url("http://127.0.0.1:8080/", path, true).unwrap(),
            "http://127.0.0.1:8080/hooks/comms/twilio?bodySHA256=ab"
        );
        assert_eq!(
            target_url("https://h.example/in/twilio", path, true).unwrap(),
            "https://h.example/in/twilio?bodySHA256=ab"
        );
        let meta = "/hooks/m/meta?hub.mode=subscribe";
        assert_eq!(
            target_url("https://h.example/in/meta?tenant=1", meta, false).unwrap(),
            "https://h.example/in/meta?tenant=1&hub.mode=subscribe"
        );
        // Twilio signs publicUrl + the request's query: one of the user's own breaks it.
        let e = target_url("https://h.example/in/twilio?x=1", path, true).unwrap_err();
        assert!(
            e.to_string().contains("twilio signs the URL's query"),
            "{e}"
        );
        assert!(target_url("http://127.0.0.1:8080/?x=1", "/hooks/a/b", false).is_err());
        assert!(target_url("http://h.example/in#f", "/hooks/a/b", false).is_err());
    }

    #[test]
    fn the_content_type_follows_the_body_as_twilio_tells_them_apart() {
        assert_eq!(content_type(b" {\"a\":1}"), "application/json");
        assert_eq!(content_type(b"[1]"), "application/json");
        assert_eq!(
            content_type(b"CallSid=CA1&From=%2B1"),
            "application/x-www-form-urlencoded"
        );
    }

    #[test]
    fn linear_bodies_get_the_signed_time_unless_they_carry_one() {
        let b = |s: &str| s.as_bytes().to_vec();
        let text = |v: Vec<u8>| String::from_utf8(v).unwrap();
        assert_eq!(
            text(linear_body(b(r#"{"action":"create"}"#), 1_700_000_000, false).unwrap()),
            r#"{"webhookTimestamp":1700000000000,"action":"create"}"#
        );
        assert_eq!(
            text(linear_body(b(" { } "), 5, false).unwrap()),
            r#" {"webhookTimestamp":5000 } "#
        );
        let stamped = r#"{"webhookTimestamp":1,"a":2}"#;
        assert_eq!(
            text(linear_body(b(stamped), 9, false).unwrap()),
            stamped,
            "the body's own value is what Linear signed"
        );
        let e = linear_body(b(stamped), 9, true).unwrap_err();
        assert!(
            e.contains("--timestamp") && e.contains("webhookTimestamp"),
            "{e}"
        );
        assert_eq!(
            text(linear_body(b("[1]"), 9, false).unwrap()),
            "[1]",
            "not an object: the receiver says what is wrong"
        );
    }
}
