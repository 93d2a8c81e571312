//! Endpoint handshakes (issue 15) through the real router on loopback: answered in each
//! provider's format only after the signature and the timestamp window, never written to the
//! inbox, and counted in `hookgate_handshakes_total`. Fixtures: `providers_fixtures`.

use crate::common::*;
use crate::providers_fixtures::{
    Answer, Headers, Req, Signer, VERIFY_TOKEN, get, post, scheme, sign, start,
};
use hmac::{KeyInit, Mac};
use hookgate::inbox::Inbox;
use serde_json::{Value, json};

const ZOOM_SECRET: &[u8] = b"zoom-shared-secret";
const PLAIN_TOKEN: &str = "qgg8vlvZRS6UYooatFL8Aw";

enum Expect {
    /// 200 `application/json`, compared as JSON.
    Json(Value),
    /// 200 `text/plain`, byte for byte.
    Text(&'static str),
    /// 204 and no body.
    NoContent,
}

struct Shake {
    label: &'static str,
    name: &'static str,
    body: &'static str,
    /// Twitch says what a message is in an (unsigned) header.
    twitch_type: Option<&'static str>,
    expect: Expect,
    /// An age outside the scheme's default window.
    stale: i64,
}

/// What Zoom expects back: hex HMAC-SHA256 of the plain token under the secret token, computed
/// here with the hmac crate rather than hookgate's helper.
fn zoom_encrypted(secret: &[u8], plain: &str) -> String {
    let mut mac = <hmac::Hmac<sha2::Sha256> as KeyInit>::new_from_slice(secret).unwrap();
    mac.update(plain.as_bytes());
    const_hex::encode(mac.finalize().into_bytes())
}

fn shakes() -> Vec<Shake> {
    let challenge = "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P";
    vec![
        Shake {
            label: "slack url_verification",
            name: "slack",
            body: r#"{"token":"Jhj5dZrVaK7ZwHHjRyZWjbDl","challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P","type":"url_verification"}"#,
            twitch_type: None,
            expect: Expect::Json(json!({ "challenge": challenge })),
            stale: 6 * 60,
        },
        Shake {
            label: "discord interactions PING",
            name: "discord",
            body: r#"{"id":"1","application_id":"2","type":1,"token":"t","version":1}"#,
            twitch_type: None,
            expect: Expect::Json(json!({"type": 1})),
            stale: 6 * 60,
        },
        Shake {
            label: "discord webhook-events PING",
            name: "discord",
            body: r#"{"version":1,"application_id":"2","type":0}"#,
            twitch_type: None,
            expect: Expect::NoContent,
            stale: 6 * 60,
        },
        Shake {
            label: "twitch webhook_callback_verification",
            name: "twitch",
            body: r#"{"challenge":"pogchamp-kappa-360noscope-vohiyo","subscription":{"type":"channel.follow"}}"#,
            twitch_type: Some("webhook_callback_verification"),
            expect: Expect::Text("pogchamp-kappa-360noscope-vohiyo"),
            stale: 11 * 60,
        },
        Shake {
            label: "zoom endpoint.url_validation",
            name: "zoom",
            body: r#"{"payload":{"plainToken":"qgg8vlvZRS6UYooatFL8Aw"},"event_ts":1654503849680,"event":"endpoint.url_validation"}"#,
            twitch_type: None,
            expect: Expect::Json(
                json!({"plainToken": PLAIN_TOKEN, "encryptedToken": zoom_encrypted(ZOOM_SECRET, PLAIN_TOKEN)}),
            ),
            stale: 6 * 60,
        },
    ]
}

fn signed(h: &Harness, s: &Shake, at: i64, signer: Signer) -> (String, Headers) {
    let req = Req {
        at,
        id: "twitch-verify-1",
        ty: Some("channel.follow"),
        signer,
        ..Req::new(s.name, s.body)
    };
    let (path, headers) = sign(h, &req);
    match s.twitch_type {
        Some(t) => (
            path,
            with_header(&headers, "Twitch-Eventsub-Message-Type", t),
        ),
        None => (path, headers),
    }
}

fn check(label: &str, r: &Answer, expect: &Expect) {
    let ct = r.content_type.as_deref().unwrap_or("");
    match expect {
        Expect::Json(v) => {
            assert_eq!((r.status, ct), (200, "application/json"), "{label}");
            assert_eq!(&r.json(), v, "{label}");
        }
        Expect::Text(t) => {
            assert_eq!(r.status, 200, "{label}");
            assert!(ct.starts_with("text/plain"), "{label}: {ct}");
            assert_eq!(String::from_utf8_lossy(&r.body), *t, "{label}");
        }
        Expect::NoContent => {
            assert_eq!(r.status, 204, "{label}");
            assert!(r.body.is_empty(), "{label}: {:?}", r.body);
        }
    }
}

fn handshakes_counted(h: &Harness, integration: &str) -> Option<u64> {
    let text = h.metrics.encode();
    let prefix = format!("hookgate_handshakes_total{{integration=\"{integration}\"}} ");
    text.lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .map(|n| n.parse().unwrap())
}

on_both_backends!(
    each_handshake_is_answered_in_the_providers_format_and_never_stored,
    look_alikes_of_handshakes_are_stored_as_events,
    meta_subscription_answers_the_challenge_only_for_the_verify_token,
    forged_and_stale_handshakes_are_refused_and_not_counted,
    zoom_answers_with_the_key_that_verified,
);

/// Each handshake, sent twice (providers retry them): the same answer both times, no row, no
/// nonce, and one count per answer.
async fn each_handshake_is_answered_in_the_providers_format_and_never_stored(inbox: Inbox) {
    let (h, served) = start(inbox).await;
    for s in shakes() {
        let (path, headers) = signed(&h, &s, t0().timestamp(), Signer::Right);
        for attempt in ["first", "again"] {
            let r = post(&served, &path, &headers, s.body).await;
            check(&format!("{} ({attempt})", s.label), &r, &s.expect);
        }
    }
    assert_eq!(h.receiver.inbox().counts().await.unwrap(), (0, 0));
    for (integration, answered) in [
        ("p/slack", 2),
        ("p/discord", 4),
        ("p/twitch", 2),
        ("p/zoom", 2),
    ] {
        assert_eq!(
            handshakes_counted(&h, integration),
            Some(answered),
            "{integration}"
        );
    }
}

/// Requests that resemble a handshake but are events: stored like any event, not answered.
async fn look_alikes_of_handshakes_are_stored_as_events(inbox: Inbox) {
    let (h, served) = start(inbox).await;
    let cases = [
        // Discord's webhook events carry type 1 too; the `event` field makes them events.
        (
            "discord",
            r#"{"version":1,"application_id":"2","type":1,"event":{"type":"ENTITLEMENT_CREATE","data":{}}}"#,
            Some("ENTITLEMENT_CREATE"),
        ),
        // A challenge in the body of a notification is data, not a verification.
        (
            "twitch",
            r#"{"challenge":"x","subscription":{"type":"channel.follow"}}"#,
            Some("channel.follow"),
        ),
        (
            "zoom",
            r#"{"event":"meeting.ended","payload":{"plainToken":"x"}}"#,
            Some("meeting.ended"),
        ),
        (
            "slack",
            r#"{"type":"event_callback","event_id":"Ev1","challenge":"x","event":{"type":"app_mention"}}"#,
            Some("app_mention"),
        ),
    ];
    for (name, body, ty) in cases {
        let req = Req {
            id: "look-alike-1",
            ty: Some("channel.follow"),
            ..Req::new(name, body)
        };
        let (path, headers) = sign(&h, &req);
        let r = post(&served, &path, &headers, body).await;
        assert_eq!(r.reply(), (200, accepted()), "{name}");
        let filter = hookgate::inbox::ListFilter {
            integration: Some(format!("p/{name}")),
            ..Default::default()
        };
        let rows = h.receiver.inbox().list(&filter).await.unwrap();
        assert_eq!(rows.len(), 1, "{name}");
        assert_eq!(rows[0].event_type.as_deref(), ty, "{name}");
        assert_eq!(handshakes_counted(&h, &format!("p/{name}")), None, "{name}");
    }
}

/// Meta's unsigned `GET ?hub.mode=subscribe`: the challenge as text only for the configured verify
/// token; 403 for any other token; 400 when it is not a subscription request.
async fn meta_subscription_answers_the_challenge_only_for_the_verify_token(inbox: Inbox) {
    let (h, served) = start(inbox).await;
    let q = |query: &str| format!("/hooks/p/meta?{query}");
    let ok = get(
        &served,
        &q(&format!(
            "hub.mode=subscribe&hub.verify_token={VERIFY_TOKEN}&hub.challenge=1158201444"
        )),
    )
    .await;
    check("subscribe", &ok, &Expect::Text("1158201444"));
    let refused = [
        (
            "hub.mode=subscribe&hub.verify_token=meta-verify-token-2&hub.challenge=1",
            403,
            "invalid_verify_token",
        ),
        (
            "hub.mode=subscribe&hub.verify_token=&hub.challenge=1",
            403,
            "invalid_verify_token",
        ),
        (
            "hub.mode=subscribe&hub.challenge=1",
            403,
            "invalid_verify_token",
        ),
        (
            &format!("hub.mode=subscribe&hub.verify_token={VERIFY_TOKEN}"),
            400,
            "malformed_request",
        ),
        (
            &format!("hub.mode=unsubscribe&hub.verify_token={VERIFY_TOKEN}&hub.challenge=1"),
            400,
            "malformed_request",
        ),
        ("", 400, "malformed_request"),
    ];
    for (query, status, code) in refused {
        let r = get(&served, &q(query)).await;
        assert_eq!(r.reply(), (status, error(code)), "{query:?}");
    }
    // The GET exists only where a verify token is configured.
    let r = get(&served, "/hooks/p/slack?hub.mode=subscribe&hub.challenge=1").await;
    assert_eq!(r.reply(), (405, error("method_not_allowed")));
    assert_eq!(r.allow.as_deref(), Some("POST"));
    // Meta's endpoint takes both, and its 405 says so.
    let res = reqwest::Client::new()
        .put(served.url("/hooks/p/meta"))
        .send()
        .await
        .expect("the receiver answers");
    assert_eq!(res.status(), 405);
    assert_eq!(res.headers()["allow"], "GET, POST");
    assert_eq!(handshakes_counted(&h, "p/meta"), Some(1));
    assert_eq!(h.receiver.inbox().counts().await.unwrap(), (0, 0));
}

/// A handshake is verified like any request: a wrong key or no signature is 401, a stale one
/// 400. None of them is answered, stored or counted.
async fn forged_and_stale_handshakes_are_refused_and_not_counted(inbox: Inbox) {
    let (h, served) = start(inbox).await;
    let now = t0().timestamp();
    for s in shakes() {
        let (path, wrong) = signed(&h, &s, now, Signer::Wrong);
        let r = post(&served, &path, &wrong, s.body).await;
        assert_eq!(
            r.reply(),
            (401, error("invalid_signature")),
            "{}: wrong key",
            s.label
        );
        let (_, mut unsigned) = signed(&h, &s, now, Signer::Right);
        for name in scheme(&h, s.name).signature_headers() {
            unsigned = without_header(&unsigned, name);
        }
        let r = post(&served, &path, &unsigned, s.body).await;
        assert_eq!(
            r.reply(),
            (401, error("invalid_signature")),
            "{}: unsigned",
            s.label
        );
        let (_, stale) = signed(&h, &s, now - s.stale, Signer::Right);
        let r = post(&served, &path, &stale, s.body).await;
        assert_eq!(
            r.reply(),
            (400, error("timestamp_outside_window")),
            "{}: stale",
            s.label
        );
    }
    assert_eq!(h.receiver.inbox().counts().await.unwrap(), (0, 0));
    let metrics = h.metrics.encode();
    assert!(!metrics.contains("hookgate_handshakes_total{"), "{metrics}");
}

/// While a Zoom secret rotates, the url_validation answer is keyed with whichever key verified
/// the request: Zoom checks it against the secret it signed with.
async fn zoom_answers_with_the_key_that_verified(inbox: Inbox) {
    let yaml = r#"
---
apiVersion: v1
kind: Secret
metadata: {name: zoom-keys, namespace: p}
stringData: {old: zoom-old-secret, new: zoom-new-secret}
---
apiVersion: hookgate.dev/v1alpha1
kind: WebhookIntegration
metadata: {name: zoom-rotating, namespace: p}
spec:
  scheme: {type: zoom}
  keys:
    - {id: old, secretRef: {name: zoom-keys, key: old}, retireAt: "2030-01-01T00:00:00Z"}
    - {id: new, secretRef: {name: zoom-keys, key: new}}
  delivery: {url: "http://127.0.0.1:1/sink"}
"#;
    let h = harness_with(inbox, &(crate::providers_fixtures::manifests() + yaml));
    let served = crate::common::loopback::Served::start(&h.receiver).await;
    let body = shakes().pop().expect("zoom is last").body;
    for secret in [&b"zoom-old-secret"[..], b"zoom-new-secret"] {
        let input = hookgate::signature::SignInput {
            key_id: "-",
            timestamp: t0().timestamp(),
            event_id: "-",
            event_type: None,
            body: body.as_bytes(),
        };
        let key = hookgate::signature::SigningKey::Hmac(secret.to_vec());
        let headers = hookgate::signature::Scheme::Zoom
            .sign(&key, &input)
            .unwrap();
        let r = post(&served, "/hooks/p/zoom-rotating", &headers, body).await;
        let want = zoom_encrypted(secret, PLAIN_TOKEN);
        let label = String::from_utf8_lossy(secret);
        check(
            &label,
            &r,
            &Expect::Json(json!({"plainToken": PLAIN_TOKEN, "encryptedToken": want})),
        );
    }
    assert_eq!(handshakes_counted(&h, "p/zoom-rotating"), Some(2));
}
