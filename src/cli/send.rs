//! `hookgate send`: build a request exactly as the integration's provider would sign it.

use super::{SendArgs, SendRequestArgs};
use crate::crd::WebhookIntegration;
use crate::manifest;
use crate::route::Secrets;
use anyhow::{Context, bail};

pub mod handshake;
mod sign;

pub use sign::{content_type, sign_handshake, sign_request};

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
mod tests;
