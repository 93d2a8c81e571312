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
mod tests {
    use super::*;

    fn cx<'a>(secret: Option<&'a [u8]>, token: Option<&'a [u8]>) -> Context<'a> {
        Context {
            challenge: "hs_c1",
            now: DateTime::from_timestamp(1_700_000_000, 0).unwrap(),
            event_type: None,
            secret,
            verify_token: token,
        }
    }

    fn json_body(p: &Probe) -> Value {
        serde_json::from_slice(&p.body).unwrap()
    }

    /// Each request is what the provider's own handler recognises: the receiver's handshake
    /// detectors (`Scheme::handshake`, `meta::subscribe`) answer it with exactly `expect`.
    #[test]
    fn every_handshake_is_recognised_by_the_scheme_and_expects_its_answer() {
        use crate::signature::{Handshake, KeyMaterial, Subscription};
        use axum::http::{HeaderMap, HeaderName, HeaderValue};
        let secret = b"zoom-secret".as_slice();
        let key = KeyMaterial::Hmac(secret.to_vec());
        let cases = [
            (Scheme::Slack, None),
            (Scheme::Discord, None),
            (Scheme::Discord, Some(HandshakeVariant::Interactions)),
            (Scheme::Discord, Some(HandshakeVariant::Events)),
            (Scheme::Twitch, None),
            (Scheme::Zoom, None),
        ];
        for (scheme, variant) in cases {
            let p = build(&scheme, variant, &cx(Some(secret), None)).unwrap();
            assert_eq!(p.method, Method::Post, "{}", p.label);
            let mut headers = HeaderMap::new();
            for (k, v) in &p.headers {
                headers.insert(
                    HeaderName::try_from(k.as_str()).unwrap(),
                    HeaderValue::from_str(v).unwrap(),
                );
            }
            let answer = scheme.handshake(&headers, &p.body, &key);
            let (status, ct, body) = match answer.clone().expect(p.label) {
                Handshake::Json(b) => (200, Some("application/json"), b),
                Handshake::Text(b) => (200, Some("text/plain; charset=utf-8"), b),
                Handshake::NoContent => (204, None, String::new()),
            };
            check(&p, status, ct, &body).unwrap_or_else(|e| panic!("{e}: {answer:?}"));
        }
        let token = b"my token&x=1".as_slice();
        let p = build(&Scheme::Meta, None, &cx(None, Some(token))).unwrap();
        assert_eq!(p.method, Method::Get);
        let q = p.query.as_deref().unwrap();
        assert_eq!(
            q,
            "hub.mode=subscribe&hub.challenge=hs_c1&hub.verify_token=my+token%26x%3D1"
        );
        assert_eq!(
            crate::signature::meta::subscribe(Some(q), token),
            Subscription::Challenge("hs_c1".into())
        );
        check(&p, 200, Some("text/plain; charset=utf-8"), "hs_c1").unwrap();
    }

    #[test]
    fn requests_carry_what_each_provider_sends() {
        let p = build(&Scheme::Slack, None, &cx(None, None)).unwrap();
        assert_eq!(
            json_body(&p),
            json!({"type": "url_verification", "challenge": "hs_c1"})
        );
        let p = build(&Scheme::Discord, None, &cx(None, None)).unwrap();
        assert_eq!(json_body(&p)["type"], 1);
        assert!(json_body(&p).get("event").is_none());
        let p = build(
            &Scheme::Discord,
            Some(HandshakeVariant::Events),
            &cx(None, None),
        )
        .unwrap();
        assert_eq!(json_body(&p)["type"], 0);
        assert_eq!(p.expect, Expect::NoContent);
        let p = build(&Scheme::Twitch, None, &cx(None, None)).unwrap();
        assert_eq!(json_body(&p)["challenge"], "hs_c1");
        assert_eq!(
            p.headers,
            [(
                "twitch-eventsub-message-type".to_string(),
                "webhook_callback_verification".to_string()
            )]
        );
        let p = build(&Scheme::Zoom, None, &cx(Some(b"s"), None)).unwrap();
        assert_eq!(json_body(&p)["event"], "endpoint.url_validation");
        assert_eq!(json_body(&p)["payload"]["plainToken"], "hs_c1");
        assert_eq!(json_body(&p)["event_ts"], 1_700_000_000_000i64);
        // The answer Zoom checks: hex HMAC-SHA256(secret, plainToken).
        let Expect::Json(answer) = &p.expect else {
            panic!("zoom answers JSON")
        };
        assert_eq!(
            answer["encryptedToken"],
            const_hex::encode(hmac_sha256(b"s", &[b"hs_c1"]))
        );
    }

    #[test]
    fn schemes_and_variants_without_a_handshake_are_named() {
        let e = supported(&Scheme::Stripe, None).unwrap_err();
        assert!(e.contains("scheme stripe has no endpoint handshake"), "{e}");
        assert!(e.contains(SCHEMES), "{e}");
        for scheme in [Scheme::Github, Scheme::Gitlab, Scheme::Sendgrid] {
            let e = supported(&scheme, None).unwrap_err();
            assert!(e.contains(scheme.name()), "{e}");
        }
        let e = supported(&Scheme::Slack, Some(HandshakeVariant::Events)).unwrap_err();
        assert!(
            e.contains("--handshake=events") && e.contains("slack"),
            "{e}"
        );
        let e = build(&Scheme::Zoom, None, &cx(None, None)).unwrap_err();
        assert!(e.contains("zoom"), "{e}");
    }

    #[test]
    fn wrong_answers_fail_with_what_was_expected() {
        let p = build(&Scheme::Zoom, None, &cx(Some(b"s"), None)).unwrap();
        let Expect::Json(right) = p.expect.clone() else {
            unreachable!()
        };
        check(&p, 200, Some("application/json"), &right.to_string()).unwrap();
        let mut bad = right.clone();
        bad["encryptedToken"] = json!(const_hex::encode(hmac_sha256(b"other", &[b"hs_c1"])));
        let e = check(&p, 200, Some("application/json"), &bad.to_string()).unwrap_err();
        assert!(e.contains("with another body"), "{e}");
        let e = check(&p, 200, Some("text/plain"), &right.to_string()).unwrap_err();
        assert!(e.contains("content-type"), "{e}");
        // An ordinary event answer is not the handshake's.
        let e = check(
            &p,
            200,
            Some("application/json"),
            r#"{"received":true,"duplicate":false}"#,
        )
        .unwrap_err();
        assert!(
            e.starts_with("zoom endpoint.url_validation: expected 200"),
            "{e}"
        );
        assert!(e.contains("stored the handshake as an event"), "{e}");
        let e = check(
            &p,
            401,
            Some("application/json"),
            r#"{"error":"invalid_signature"}"#,
        )
        .unwrap_err();
        assert!(e.contains("got 401: the signature was refused"), "{e}");
        let e = check(
            &p,
            400,
            Some("application/json"),
            r#"{"error":"timestamp_outside_window"}"#,
        )
        .unwrap_err();
        assert!(
            e.contains("got 400: the signed timestamp is outside"),
            "{e}"
        );

        let p = build(&Scheme::Twitch, None, &cx(None, None)).unwrap();
        check(&p, 200, Some("text/plain; charset=utf-8"), "hs_c1").unwrap();
        assert!(check(&p, 200, Some("text/plain"), "hs_c2").is_err());
        assert!(check(&p, 200, Some("application/json"), "hs_c1").is_err());

        let p = build(&Scheme::Meta, None, &cx(None, Some(b"t"))).unwrap();
        let e = check(
            &p,
            403,
            Some("application/json"),
            r#"{"error":"invalid_verify_token"}"#,
        )
        .unwrap_err();
        assert!(e.contains("got 403: the verify token differs"), "{e}");
        assert!(!e.contains("hub.verify_token"), "the token stays out: {e}");

        let p = build(
            &Scheme::Discord,
            Some(HandshakeVariant::Events),
            &cx(None, None),
        )
        .unwrap();
        check(&p, 204, None, "").unwrap();
        assert!(check(&p, 200, Some("application/json"), "{}").is_err());
        assert!(check(&p, 204, None, "x").is_err());
    }
}
