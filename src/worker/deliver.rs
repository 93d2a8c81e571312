//! One delivery attempt: the destination request (original body and content type, a stable
//! `webhook-id`, a per-attempt Standard Webhooks signature, hookgate headers) and its result.

use super::resolver;
use super::retry::{AttemptResult, parse_retry_after};
use crate::destination::{self, Host, Policy};
use crate::inbox::Claimed;
use crate::route::target::DeliveryTarget;
use crate::signature::{Scheme, SignInput, SigningKey};
use chrono::{DateTime, Utc};
use sha2::{Digest, Sha256};

/// The same on every attempt and replay of an event, so destinations can dedupe on it. Derived
/// from (integration, event id), not from the row id, so it survives a re-import too.
pub fn webhook_id(integration: &str, event_id: &str) -> String {
    let digest = Sha256::digest([integration.as_bytes(), b"\0", event_id.as_bytes()].concat());
    format!("msg_{}", &const_hex::encode(digest)[..32])
}

/// Headers sent with an attempt, in order. Pure, so it can be tested without a network.
pub fn headers(
    target: &DeliveryTarget,
    event: &Claimed,
    now: DateTime<Utc>,
) -> Vec<(String, String)> {
    let id = webhook_id(&event.integration, &event.event_id);
    let mut out = match &target.signing_secret {
        Some(secret) => {
            let input = SignInput {
                key_id: "",
                timestamp: now.timestamp(),
                event_id: &id,
                event_type: None,
                body: &event.body,
            };
            Scheme::StandardWebhooks
                .sign(&SigningKey::Hmac(secret.clone()), &input)
                .expect("HMAC signing cannot fail")
        }
        None => vec![
            ("webhook-id".into(), id),
            ("webhook-timestamp".into(), now.timestamp().to_string()),
        ],
    };
    if let Some(ct) = &event.content_type {
        out.push(("content-type".into(), ct.clone()));
    }
    out.push(("hookgate-integration".into(), event.integration.clone()));
    if let Some(t) = &event.event_type {
        out.push(("hookgate-event-type".into(), t.clone()));
    }
    out.push(("hookgate-attempt".into(), event.attempt.to_string()));
    // Most integrations forward nothing: the stored text is then never parsed.
    if !target.forward_headers.is_empty() {
        for (name, value) in event.headers.pairs() {
            if target.forward_headers.contains(&name) {
                out.push((name, value));
            }
        }
    }
    out
}

/// The host checks for one integration, before any lookup. Literal addresses never reach the
/// client's resolver, so they are checked here too; names have their addresses checked there.
pub fn check(target: &DeliveryTarget, policy: &Policy) -> Result<(), destination::Refusal> {
    match Host::of(&target.url) {
        Some(host) => destination::check_host(&host, &target.namespace, policy),
        // reqwest reports an unusable URL itself, as a connection error.
        None => Ok(()),
    }
}

/// POSTs one signed attempt to the destination. Errors are reduced to text without the URL, which may carry credentials.
/// `client` must resolve through [`resolver::Guarded`] with the same `policy`.
pub async fn post_attempt(
    client: &reqwest::Client,
    policy: &Policy,
    target: &DeliveryTarget,
    event: &Claimed,
    now: DateTime<Utc>,
) -> AttemptResult {
    if let Err(refusal) = check(target, policy) {
        return AttemptResult::Refused(refusal.to_string());
    }
    let mut req = client
        .post(target.url.clone())
        .timeout(target.timeout)
        .body(event.body.clone());
    for (k, v) in headers(target, event, now) {
        req = req.header(k, v);
    }
    match req.send().await {
        Ok(res) => {
            let code = res.status().as_u16();
            let retry_after = res
                .headers()
                .get(reqwest::header::RETRY_AFTER)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| parse_retry_after(v, now));
            AttemptResult::Status { code, retry_after }
        }
        Err(e) => match resolver::refusal_in(&e) {
            Some(refusal) => AttemptResult::Refused(refusal.to_string()),
            None if e.is_timeout() => AttemptResult::Timeout,
            None => AttemptResult::Connect(error_text(e.without_url())),
        },
    }
}

fn error_text(e: reqwest::Error) -> String {
    // reqwest's Display is generic ("error sending request"); the source chain says what happened.
    let mut text = e.to_string();
    let mut source = std::error::Error::source(&e);
    while let Some(s) = source {
        text = format!("{text}: {s}");
        source = s.source();
    }
    text
}
