//! Tests of `handshake.rs`: each provider's check as that provider builds it, and the receiver's
//! answers it accepts or refuses.

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
