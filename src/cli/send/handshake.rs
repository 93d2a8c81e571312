//! `hookgate send --handshake`: the endpoint checks a provider sends before (or while) it delivers,
//! built the way that provider builds them, and the check of the receiver's answer. Pure: no key
//! selection, no I/O. `send.rs` signs the POSTs with the integration's key like any event (a
//! handshake is verified before it is answered) and sends them.

use crate::cli::HandshakeVariant;
use crate::signature::{Scheme, hmac_sha256};
use chrono::{DateTime, Utc};
use serde_json::{Value, json};

/// The schemes that have an endpoint check, for error messages.
pub const SCHEMES: &str = "slack, discord, twitch, zoom and meta";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// Signed like any event of the scheme.
    Post,
    /// Unsigned (Meta's subscription check).
    Get,
}

/// A handshake request and the answer the provider would accept.
#[derive(Debug, Clone, PartialEq)]
pub struct Probe {
    /// What it is, for messages: `slack url_verification`.
    pub label: &'static str,
    pub method: Method,
    /// The query string of a GET, without `?`. It holds Meta's verify token: never print it.
    pub query: Option<String>,
    pub body: Vec<u8>,
    /// Headers set after signing, replacing what the signer put there: Twitch's message type is
    /// what tells a verification from a notification, and its signature does not cover it.
    pub headers: Vec<(String, String)>,
    pub expect: Expect,
}

/// The answer the provider accepts; anything else fails its endpoint check.
#[derive(Debug, Clone, PartialEq)]
pub enum Expect {
    /// 200 `application/json` equal to this value (key order aside).
    Json(Value),
    /// 200 `text/plain` with exactly this body.
    Text(String),
    /// 204 and no body.
    NoContent,
}

/// What a handshake is built from.
pub struct Context<'a> {
    /// Random: Slack's `challenge`, Twitch's `challenge`, Zoom's `plainToken`, Meta's
    /// `hub.challenge`, Discord's interaction id.
    pub challenge: &'a str,
    pub now: DateTime<Utc>,
    /// Twitch's subscription type (`--event-type`), `channel.follow` when `None`.
    pub event_type: Option<&'a str>,
    /// The HMAC secret the POST is signed with: Zoom answers with an HMAC under it.
    pub secret: Option<&'a [u8]>,
    /// Meta's verify token (`spec.scheme.verifyTokenRef`).
    pub verify_token: Option<&'a [u8]>,
}

/// Refuses a scheme without a handshake, or a variant it does not have, before any key or file is
/// read, so the error is about the scheme.
pub fn supported(scheme: &Scheme, variant: Option<HandshakeVariant>) -> Result<(), String> {
    let name = scheme.name();
    match (scheme, variant) {
        (Scheme::Slack | Scheme::Twitch | Scheme::Zoom | Scheme::Meta, None)
        | (Scheme::Discord, _) => Ok(()),
        (Scheme::Slack | Scheme::Twitch | Scheme::Zoom | Scheme::Meta, Some(v)) => Err(format!(
            "--handshake={}: only discord has more than one handshake; {name} has one: pass --handshake",
            variant_name(v)
        )),
        _ => Err(format!(
            "scheme {name} has no endpoint handshake; --handshake applies to {SCHEMES}"
        )),
    }
}

fn variant_name(v: HandshakeVariant) -> &'static str {
    match v {
        HandshakeVariant::Interactions => "interactions",
        HandshakeVariant::Events => "events",
    }
}

/// The scheme's handshake as its provider sends it.
pub fn build(
    scheme: &Scheme,
    variant: Option<HandshakeVariant>,
    cx: &Context,
) -> Result<Probe, String> {
    supported(scheme, variant)?;
    let post = |label, body: Value, expect| Probe {
        label,
        method: Method::Post,
        query: None,
        body: body.to_string().into_bytes(),
        headers: Vec::new(),
        expect,
    };
    let c = cx.challenge;
    Ok(match scheme {
        // Events API: https://api.slack.com/events/url_verification
        Scheme::Slack => post(
            "slack url_verification",
            json!({"type": "url_verification", "challenge": c}),
            Expect::Json(json!({ "challenge": c })),
        ),
        // An interaction PING has no `event`; a webhook events PING is `type` 0.
        Scheme::Discord => match variant.unwrap_or(HandshakeVariant::Interactions) {
            HandshakeVariant::Interactions => post(
                "discord interactions PING",
                json!({"id": c, "application_id": "0", "type": 1, "version": 1}),
                Expect::Json(json!({"type": 1})),
            ),
            HandshakeVariant::Events => post(
                "discord webhook events PING",
                json!({"version": 1, "application_id": "0", "type": 0}),
                Expect::NoContent,
            ),
        },
        Scheme::Twitch => {
            let mut p = post(
                "twitch webhook_callback_verification",
                json!({
                    "challenge": c,
                    "subscription": {
                        "status": "webhook_callback_verification_pending",
                        "type": cx.event_type.unwrap_or("channel.follow"),
                        "created_at": cx.now.to_rfc3339_opts(chrono::SecondsFormat::Nanos, true),
                    }
                }),
                Expect::Text(c.to_string()),
            );
            p.headers.push((
                crate::signature::twitch::MESSAGE_TYPE.into(),
                "webhook_callback_verification".into(),
            ));
            p
        }
        Scheme::Zoom => {
            let secret = cx
                .secret
                .ok_or("zoom's answer is an HMAC under the integration's secret token, which this key is not")?;
            let encrypted = const_hex::encode(hmac_sha256(secret, &[c.as_bytes()]));
            post(
                "zoom endpoint.url_validation",
                json!({
                    "payload": {"plainToken": c},
                    "event_ts": cx.now.timestamp_millis(),
                    "event": "endpoint.url_validation",
                }),
                Expect::Json(json!({"plainToken": c, "encryptedToken": encrypted})),
            )
        }
        Scheme::Meta => {
            let token = cx
                .verify_token
                .ok_or("meta's subscription check needs spec.scheme.verifyTokenRef")?;
            // Meta's own parameter order; the token's bytes are sent as they are in the Secret.
            let enc = |b: &[u8]| form_urlencoded::byte_serialize(b).collect::<String>();
            let query = format!(
                "hub.mode=subscribe&hub.challenge={}&hub.verify_token={}",
                enc(c.as_bytes()),
                enc(token)
            );
            Probe {
                label: "meta subscribe",
                method: Method::Get,
                query: Some(query),
                body: Vec::new(),
                headers: Vec::new(),
                expect: Expect::Text(c.to_string()),
            }
        }
        _ => unreachable!("supported() refused it"),
    })
}

/// Whether the receiver answered as the provider requires. The error says what was expected and,
/// for the usual causes, what to look at.
pub fn check(
    probe: &Probe,
    status: u16,
    content_type: Option<&str>,
    body: &str,
) -> Result<(), String> {
    let want = match &probe.expect {
        Expect::Json(v) => format!("200 application/json {v}"),
        Expect::Text(t) => format!("200 text/plain {t:?}"),
        Expect::NoContent => "204 with no body".into(),
    };
    let wrong = |why: &str| {
        Err(format!(
            "{}: expected {want}, got {status}{why}",
            probe.label
        ))
    };
    // The receiver's error code says what to look at; an event's answer means it stored the
    // handshake, which a receiver that knows the provider never does.
    let code = serde_json::from_str::<Value>(body)
        .ok()
        .and_then(|v| v.get("error")?.as_str().map(str::to_string));
    let hint = match code.as_deref() {
        Some("invalid_signature") => {
            ": the signature was refused (is the key the receiver's?)".into()
        }
        Some("invalid_verify_token") => ": the verify token differs from the receiver's".into(),
        Some("timestamp_outside_window") => {
            ": the signed timestamp is outside the receiver's window".into()
        }
        Some("unknown_route") => ": no route at this path (is --url the receiver?)".into(),
        Some(other) => format!(": {other}"),
        None if body.contains("\"received\"") => {
            " with an event's answer: the receiver stored the handshake as an event".into()
        }
        None => String::new(),
    };
    let media = content_type
        .and_then(|c| c.split(';').next())
        .map(|c| c.trim().to_ascii_lowercase());
    match &probe.expect {
        Expect::Json(v) => {
            if status != 200 {
                return wrong(&hint);
            }
            if media.as_deref() != Some("application/json") {
                return wrong(&format!(" with content-type {content_type:?}"));
            }
            match serde_json::from_str::<Value>(body) {
                Ok(got) if &got == v => Ok(()),
                _ if !hint.is_empty() => wrong(&hint),
                _ => wrong(" with another body"),
            }
        }
        Expect::Text(t) => {
            if status != 200 {
                return wrong(&hint);
            }
            if media.as_deref() != Some("text/plain") {
                return wrong(&format!(" with content-type {content_type:?}"));
            }
            if body == t {
                Ok(())
            } else {
                wrong(" with another body")
            }
        }
        Expect::NoContent => match (status, body.is_empty()) {
            (204, true) => Ok(()),
            (204, false) => wrong(" with a body"),
            _ => wrong(&hint),
        },
    }
}

#[cfg(test)]
#[path = "handshake_tests.rs"]
mod tests;
