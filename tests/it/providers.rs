//! The receiver contract for each provider scheme of issue 15, through the real router on
//! 127.0.0.1:0 and a real inbox (PostgreSQL and SQLite): accepted and stored under the documented
//! event id and type, forged 401, stale 400, re-sent a duplicate. Requests are signed with
//! hookgate's own `Scheme::sign` (fixtures: `providers_fixtures`).

use crate::common::*;
use crate::providers_fixtures::*;
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use hookgate::inbox::Inbox;
use hookgate::signature::Scheme;
use serde_json::Value;
use sha2::{Digest, Sha256};

fn value<'h>(h: &'h Headers, name: &str) -> &'h str {
    let line = h.iter().find(|(k, _)| k.eq_ignore_ascii_case(name));
    &line.expect(name).1
}

fn hex_after(v: &str, prefix: &str) -> Vec<u8> {
    const_hex::decode(v.strip_prefix(prefix).expect(prefix)).unwrap()
}

/// Where the stored event id comes from.
enum Want {
    Id(&'static str),
    /// A provider that sends no id: the hex SHA-256 of these signature bytes.
    Digest(fn(&Headers) -> Vec<u8>),
}

struct Case {
    label: &'static str,
    name: &'static str,
    /// The body as the provider sends it at unix time `ts` (Linear's timestamp is inside it).
    body: fn(i64) -> String,
    /// What the signer puts in the headers that carry an id or type (where the scheme has them).
    id: &'static str,
    ty: Option<&'static str>,
    /// Unsigned headers a provider may leave out, removed after signing.
    drop: &'static [&'static str],
    want_id: Want,
    want_type: Option<&'static str>,
    /// Ages in seconds that are (accepted, refused), for schemes with a signed timestamp.
    window: Option<(i64, i64)>,
}

impl Case {
    fn new(label: &'static str, name: &'static str, body: fn(i64) -> String) -> Self {
        Case {
            label,
            name,
            body,
            id: "-",
            ty: None,
            drop: &[],
            want_id: Want::Id(""),
            want_type: None,
            window: None,
        }
    }
    /// The id and type headers as the provider sends them.
    fn sent(self, id: &'static str, ty: Option<&'static str>) -> Self {
        Self { id, ty, ..self }
    }
    fn stored(self, want_id: Want, want_type: Option<&'static str>) -> Self {
        Self {
            want_id,
            want_type,
            ..self
        }
    }
    fn window(self, accepted: i64, refused: i64) -> Self {
        let window = Some((accepted, refused));
        Self { window, ..self }
    }
}

const MIN: i64 = 60;

fn cases() -> Vec<Case> {
    vec![
        Case::new("discord interaction with /id", "discord", |_| {
            r#"{"id":"1100000000000000001","type":2,"data":{"name":"ping"}}"#.into()
        })
        // No /event/type: the numeric /type, in decimal.
        .stored(Want::Id("1100000000000000001"), Some("2"))
        .window(4 * MIN, 6 * MIN),
        Case::new("discord webhook event without /id", "discord", |_| {
            r#"{"version":1,"application_id":"7","type":1,"event":{"type":"APPLICATION_AUTHORIZED"}}"#.into()
        })
        .stored(
            Want::Digest(|h| const_hex::decode(value(h, "x-signature-ed25519")).unwrap()),
            Some("APPLICATION_AUTHORIZED"),
        )
        .window(4 * MIN, 6 * MIN),
        Case::new("twilio form with idempotency token", "twilio", |_| {
            "AccountSid=AC1&EventType=com.twilio.messaging.inbound-message.received&Body=hi".into()
        })
        .sent("idem-twilio-1", None)
        .stored(
            Want::Id("idem-twilio-1"),
            Some("com.twilio.messaging.inbound-message.received"),
        ),
        Case {
            drop: &["i-twilio-idempotency-token"],
            ..Case::new("twilio form without idempotency token", "twilio", |_| {
                "CallSid=CA1&CallStatus=ringing&From=%2B15005550006".into()
            })
            .stored(
                Want::Digest(|h| STANDARD.decode(value(h, "x-twilio-signature")).unwrap()),
                None,
            )
        },
        Case::new("twilio JSON, bodySHA256 in the query", "twilio", |_| {
            r#"{"sid":"SM1","status":"delivered"}"#.into()
        })
        .sent("idem-twilio-json", None)
        .stored(Want::Id("idem-twilio-json"), None),
        Case::new("twitch notification", "twitch", |_| {
            r#"{"subscription":{"type":"channel.follow"},"event":{"user_id":"1"}}"#.into()
        })
        .sent("twitch-msg-1", Some("channel.follow"))
        .stored(Want::Id("twitch-msg-1"), Some("channel.follow"))
        // The default tolerance is Twitch's own 10 minutes.
        .window(9 * MIN, 11 * MIN),
        Case::new("zoom event", "zoom", |_| {
            r#"{"event":"meeting.started","payload":{"object":{"id":"1"}}}"#.into()
        })
        .stored(
            Want::Digest(|h| hex_after(value(h, "x-zm-signature"), "v0=")),
            Some("meeting.started"),
        )
        .window(4 * MIN, 6 * MIN),
        Case::new("meta event", "meta", |_| {
            r#"{"object":"whatsapp_business_account","entry":[{"id":"1"}]}"#.into()
        })
        .stored(
            Want::Digest(|h| hex_after(value(h, "x-hub-signature-256"), "sha256=")),
            Some("whatsapp_business_account"),
        ),
        Case::new("gitlab push", "gitlab", |_| {
            r#"{"object_kind":"push","ref":"refs/heads/main"}"#.into()
        })
        .sent("5a0c2b0e-1111-4c8b-9d1e-000000000001", Some("Push Hook"))
        .stored(
            Want::Id("5a0c2b0e-1111-4c8b-9d1e-000000000001"),
            Some("Push Hook"),
        ),
        Case::new("paddle event", "paddle", |_| {
            r#"{"event_id":"evt_01paddle","event_type":"transaction.completed","data":{}}"#.into()
        })
        .stored(Want::Id("evt_01paddle"), Some("transaction.completed"))
        .window(4 * MIN, 6 * MIN),
        Case::new("square event", "square", |_| {
            r#"{"merchant_id":"M1","type":"payment.created","event_id":"sq-evt-1"}"#.into()
        })
        .stored(Want::Id("sq-evt-1"), Some("payment.created")),
        Case::new("sendgrid batch", "sendgrid", |_| {
            r#"[{"email":"a@example.com","event":"delivered","sg_event_id":"s1"}]"#.into()
        })
        // The low-s form of the signature is what is remembered (ECDSA malleability).
        .stored(
            Want::Digest(|h| {
                let der = STANDARD.decode(value(h, "x-twilio-email-event-webhook-signature"));
                let sig = p256::ecdsa::Signature::from_der(&der.unwrap()).unwrap();
                sig.normalize_s().to_bytes().to_vec()
            }),
            None,
        )
        .window(4 * MIN, 6 * MIN),
        // Milliseconds; 250 ms past the second checks they are rounded down, not up.
        Case::new("linear issue", "linear", |ts| {
            let ms = ts * 1000 + 250;
            format!(r#"{{"action":"create","type":"Issue","webhookTimestamp":{ms}}}"#)
        })
        .sent("linear-delivery-1", Some("Issue"))
        .stored(Want::Id("linear-delivery-1"), Some("Issue"))
        // The default tolerance is 60 s.
        .window(59, 61),
    ]
}

fn post_signed<'a>(
    h: &Harness,
    c: &'a Case,
    body: &'a str,
    at: i64,
    signer: Signer,
) -> (String, Headers) {
    let (path, headers) = sign(
        h,
        &Req {
            name: c.name,
            body,
            at,
            id: c.id,
            ty: c.ty,
            signer,
        },
    );
    let kept = headers
        .into_iter()
        .filter(|(k, _)| !c.drop.contains(&k.to_ascii_lowercase().as_str()))
        .collect();
    (path, kept)
}

async fn counts(h: &Harness) -> (i64, i64) {
    h.receiver.inbox().counts().await.unwrap()
}

fn invalid_signature() -> (u16, Value) {
    (401, error("invalid_signature"))
}

on_both_backends!(
    each_provider_stores_its_documented_id_and_type_once,
    forged_requests_are_401_and_write_nothing,
    timestamps_outside_the_window_are_400_and_inside_pass,
    twilio_and_square_verify_the_url_they_were_configured_with,
    gitlab_token_proves_the_sender_not_the_body,
);

/// Accepted, stored under the provider's documented id and type, without its signature
/// headers; the exact same request again is a duplicate and adds no row.
async fn each_provider_stores_its_documented_id_and_type_once(inbox: Inbox) {
    let (h, s) = start(inbox).await;
    let at = t0().timestamp();
    for c in cases() {
        let body = (c.body)(at);
        let (path, headers) = post_signed(&h, &c, &body, at, Signer::Right);
        let before = counts(&h).await.0;
        let first = post(&s, &path, &headers, &body).await;
        assert_eq!(first.reply(), (200, accepted()), "{}", c.label);
        let again = post(&s, &path, &headers, &body).await;
        assert_eq!(again.reply(), (200, duplicate()), "{}: re-sent", c.label);
        assert_eq!(counts(&h).await.0, before + 1, "{}: one row", c.label);

        let filter = hookgate::inbox::ListFilter {
            integration: Some(format!("p/{}", c.name)),
            ..Default::default()
        };
        let row = h.receiver.inbox().list(&filter).await.unwrap().remove(0);
        let want_id = match c.want_id {
            Want::Id(id) => id.to_string(),
            Want::Digest(sig) => const_hex::encode(Sha256::digest(sig(&headers))),
        };
        assert_eq!(row.event_id, want_id, "{}: event id", c.label);
        assert_eq!(row.event_type.as_deref(), c.want_type, "{}: type", c.label);
        assert_eq!((row.scheme.as_str(), row.key_id.as_str()), (c.name, "k1"));
        assert_eq!(row.signed_at, c.window.map(|_| t0()), "{}", c.label);
        let detail = h.receiver.inbox().event_detail(row.id).await.unwrap();
        let detail = detail.expect("stored");
        assert_eq!(detail.body, body.as_bytes(), "{}", c.label);
        let stored = detail.headers.to_string();
        assert!(stored.contains("\"content-type\""), "{}: {stored}", c.label);
        // GitLab's header is the secret token itself: keeping it would hand it to DB readers.
        for sig in scheme(&h, c.name).signature_headers() {
            assert!(
                !stored.contains(&format!("\"{sig}\"")),
                "{}: {stored}",
                c.label
            );
        }
    }
}

/// Signed with a key the integration does not hold, or the body changed after signing: 401,
/// and neither an event nor a nonce is written. (GitLab signs no body: see below.)
async fn forged_requests_are_401_and_write_nothing(inbox: Inbox) {
    let (h, s) = start(inbox).await;
    let at = t0().timestamp();
    for c in cases() {
        let body = (c.body)(at);
        let (path, wrong) = post_signed(&h, &c, &body, at, Signer::Wrong);
        let r = post(&s, &path, &wrong, &body).await;
        assert_eq!(r.reply(), invalid_signature(), "{}: wrong key", c.label);
        if c.name != "gitlab" {
            let (path, right) = post_signed(&h, &c, &body, at, Signer::Right);
            // One byte more: for Twilio forms a changed parameter value, for Twilio JSON a body
            // that no longer hashes to the signed bodySHA256.
            let r = post(&s, &path, &right, &format!("{body} ")).await;
            assert_eq!(r.reply(), invalid_signature(), "{}: tampered", c.label);
        }
    }
    assert_eq!(counts(&h).await, (0, 0));
}

/// Signed `refused` seconds ago or ahead: 400; `accepted` seconds ago: stored, and a retry signed
/// now is a duplicate where the provider sends an id. Twitch's default window is 10 minutes,
/// Linear's 60 s (its timestamp is the body's webhookTimestamp), the others' 5 minutes.
async fn timestamps_outside_the_window_are_400_and_inside_pass(inbox: Inbox) {
    let (h, s) = start(inbox).await;
    let now = t0().timestamp();
    let mut stored = 0;
    for c in cases() {
        let Some((ok, refused)) = c.window else {
            continue;
        };
        for (offset, want) in [(-refused, 400), (refused, 400), (-ok, 200)] {
            let body = (c.body)(now + offset);
            let (path, headers) = post_signed(&h, &c, &body, now + offset, Signer::Right);
            let r = post(&s, &path, &headers, &body).await;
            let expected = match want {
                200 => accepted(),
                _ => error("timestamp_outside_window"),
            };
            assert_eq!(r.reply(), (want, expected), "{}: {offset:+}s", c.label);
        }
        // The provider's retry of that event, signed again now, carries the same id.
        if let Want::Id(_) = c.want_id {
            let body = (c.body)(now);
            let (path, headers) = post_signed(&h, &c, &body, now, Signer::Right);
            let r = post(&s, &path, &headers, &body).await;
            assert_eq!(r.reply(), (200, duplicate()), "{}: retried", c.label);
        }
        stored += 1;
        assert_eq!(counts(&h).await.0, stored, "{}", c.label);
    }
    assert_eq!(stored, 7, "every scheme with a timestamp was tried");
}

/// Twilio signs `publicUrl` + the request's query (and a JSON body through `bodySHA256` in it);
/// Square signs `publicUrl` + body. Anything signed for another URL, or a body that is not the
/// one hashed, is 401.
async fn twilio_and_square_verify_the_url_they_were_configured_with(inbox: Inbox) {
    let (h, s) = start(inbox).await;
    let json = r#"{"sid":"SM2","status":"sent"}"#;
    let (path, headers) = sign(&h, &Req::new("twilio", json));
    assert!(path.contains("?bodySHA256="), "{path}");
    let other = r#"{"sid":"SM2","status":"failed"}"#;
    let r = post(&s, &path, &headers, other).await;
    assert_eq!(r.reply(), invalid_signature(), "body not the one hashed");
    let bare = path.split('?').next().unwrap();
    let r = post(&s, bare, &headers, json).await;
    assert_eq!(r.reply(), invalid_signature(), "bodySHA256 left out");
    let r = post(&s, &format!("{path}&extra=1"), &headers, json).await;
    assert_eq!(r.reply(), invalid_signature(), "a parameter nobody signed");

    let form = "CallSid=CA9&CallStatus=completed";
    let elsewhere = |url: &str| url.replace("hooks.example.com", "other.example.com");
    let square = r#"{"type":"payment.created","event_id":"sq-2"}"#;
    for (name, body, scheme) in [
        (
            "twilio",
            form,
            Scheme::Twilio {
                public_url: elsewhere(TWILIO_URL),
            },
        ),
        (
            "twilio",
            json,
            Scheme::Twilio {
                public_url: elsewhere(TWILIO_URL),
            },
        ),
        (
            "square",
            square,
            Scheme::Square {
                public_url: elsewhere(SQUARE_URL),
            },
        ),
    ] {
        let (path, headers) = sign_as(&h, &Req::new(name, body), &scheme);
        let r = post(&s, &path, &headers, body).await;
        assert_eq!(
            r.reply(),
            invalid_signature(),
            "{name} for another URL: {body}"
        );
    }
    assert_eq!(counts(&h).await, (0, 0));

    // The query the request arrives with is part of the URL Twilio signed.
    let with_query = Scheme::Twilio {
        public_url: format!("{TWILIO_URL}?tenant=a"),
    };
    let req = Req {
        id: "idem-q",
        ..Req::new("twilio", form)
    };
    let (_, headers) = sign_as(&h, &req, &with_query);
    let r = post(&s, "/hooks/p/twilio?tenant=a", &headers, form).await;
    assert_eq!(r.reply(), (200, accepted()));
    // Re-sent under a new (unsigned) idempotency token: the signature digest catches it.
    let replay = with_header(&headers, "I-Twilio-Idempotency-Token", "idem-q2");
    let r = post(&s, "/hooks/p/twilio?tenant=a", &replay, form).await;
    assert_eq!(r.reply(), (200, duplicate()));
    assert_eq!(counts(&h).await.0, 1);
}

/// GitLab's X-Gitlab-Token proves the sender knows the token, nothing about the body (README):
/// a changed body with the token is accepted, and the event UUID is what dedupes.
async fn gitlab_token_proves_the_sender_not_the_body(inbox: Inbox) {
    let (h, s) = start(inbox).await;
    let sent = |id: &'static str, body: &'static str| Req {
        id,
        ty: Some("Push Hook"),
        ..Req::new("gitlab", body)
    };
    let (path, headers) = sign(&h, &sent("uuid-1", r#"{"ref":"a"}"#));
    assert_eq!(
        post(&s, &path, &headers, r#"{"ref":"a"}"#).await.reply(),
        (200, accepted())
    );
    let r = post(&s, &path, &headers, r#"{"ref":"b"}"#).await;
    assert_eq!(r.reply(), (200, duplicate()), "same UUID, other body");
    let (path, headers) = sign(&h, &sent("uuid-2", r#"{"ref":"a"}"#));
    let r = post(&s, &path, &headers, r#"{"ref":"c"}"#).await;
    assert_eq!(
        r.reply(),
        (200, accepted()),
        "the token does not cover the body"
    );
    assert_eq!(counts(&h).await.0, 2);
}
