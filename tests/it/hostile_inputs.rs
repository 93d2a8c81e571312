//! The hostile-input catalogue: malformed, forged, replayed and oversized requests, each with the
//! status the HTTP contract promises, and never a row or a nonce written. Real router, real
//! crypto, real PostgreSQL. The provider schemes' header parsers are in `provider_cases`.

use crate::common::*;
use axum::body::Body;
use axum::http::{HeaderValue, Request, StatusCode};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use hookgate::cli::send::SendOptions;
use hookgate::inbox::Inbox;
use sqlx::PgPool;

/// The shared test integrations, one per provider scheme (namespace `p`, see `providers_fixtures`), plus
/// one whose event id is a JSON pointer, with a 1 KiB limit.
fn manifests() -> String {
    test_manifests()
        + "---\n"
        + &crate::providers_fixtures::manifests()
        + r#"
---
apiVersion: hookgate.dev/v1alpha1
kind: WebhookIntegration
metadata: {name: ptr, namespace: t}
spec:
  scheme: {type: hmac-sha256, keyIdHeader: "", eventIdHeader: "", signedPayload: "{timestamp}.{body}"}
  eventId: {jsonPointer: /id}
  keys: [{id: h1, secretRef: {name: keys, key: hmac}}]
  limits: {maxBodyBytes: 1024}
  delivery: {url: "http://127.0.0.1:1/sink"}
"#
}

type Headers = Vec<(String, String)>;

struct Case {
    name: &'static str,
    method: &'static str,
    path: String,
    headers: Headers,
    /// Header values that are not valid text (set as raw bytes).
    raw_headers: Vec<(&'static str, Vec<u8>)>,
    body: Vec<u8>,
    status: StatusCode,
    error: &'static str,
}

fn case(
    name: &'static str,
    path: &str,
    headers: Headers,
    body: impl Into<Vec<u8>>,
    status: StatusCode,
    error: &'static str,
) -> Case {
    Case {
        name,
        method: "POST",
        path: path.into(),
        headers,
        raw_headers: vec![],
        body: body.into(),
        status,
        error,
    }
}

const BAD: StatusCode = StatusCode::BAD_REQUEST;
const UNAUTH: StatusCode = StatusCode::UNAUTHORIZED;

async fn catalogue(h: &Harness) -> Vec<Case> {
    let now = t0().timestamp();
    let stripe = stripe_body("evt_h", "invoice.paid");
    let (sp, sh) = h.sign("t/stripe", &stripe, opts());
    let stripe_sig = sh
        .iter()
        .find(|(k, _)| k == "stripe-signature")
        .unwrap()
        .1
        .clone();
    let v1 = stripe_sig.split_once(",v1=").unwrap().1.to_string();
    let with_sig = |v: &str| with_header(&sh, "Stripe-Signature", v);
    let far = SendOptions {
        timestamp: Some(now + 365 * 86400),
        ..opts()
    };
    let (_, far_headers) = h.sign("t/stripe", &stripe, far);

    let gh_body = r#"{"ref":"refs/heads/main"}"#;
    let gh_opts = || SendOptions {
        event_id: Some("d-1".into()),
        event_type: Some("push".into()),
        ..opts()
    };
    let (gp, gh) = h.sign("t/github", gh_body, gh_opts());
    let gh_sig = gh
        .iter()
        .find(|(k, _)| k == "x-hub-signature-256")
        .unwrap()
        .1
        .clone();

    let ed_body = r#"{"id":"p"}"#;
    let ed = |seed, key: &str| SendOptions {
        event_id: Some("e-1".into()),
        ..ed_opts(seed, key)
    };
    let (pp, ph) = h.sign("t/partner", ed_body, ed(3, "new"));
    let (_, far_ed) = h.sign(
        "t/partner",
        ed_body,
        SendOptions {
            timestamp: Some(now + 86400),
            ..ed(3, "new")
        },
    );

    // A body signed for t/ptr, with whatever id it carries.
    let ptr = |body: &str| h.sign("t/ptr", body, opts());
    // Valid JSON with an id, but nested far deeper than the parser's recursion limit (128).
    let deep = format!(
        r#"{{"id":"deep","n":{}{}}}"#,
        "[".repeat(480),
        "]".repeat(480)
    );
    let at_limit = format!(r#"{{"id":"ok","pad":"{}"}}"#, "x".repeat(1024 - 20));
    let over = format!(r#"{{"id":"no","pad":"{}"}}"#, "x".repeat(1024 - 19));

    let mut cases = vec![
        // Stripe-Signature parsing.
        case(
            "stripe: no signature header",
            &sp,
            without_header(&sh, "Stripe-Signature"),
            stripe.clone(),
            UNAUTH,
            "invalid_signature",
        ),
        case(
            "stripe: empty header",
            &sp,
            with_sig(""),
            stripe.clone(),
            BAD,
            "malformed_request",
        ),
        case(
            "stripe: empty t",
            &sp,
            with_sig(&format!("t=,v1={v1}")),
            stripe.clone(),
            BAD,
            "malformed_request",
        ),
        case(
            "stripe: t not a number",
            &sp,
            with_sig(&format!("t=abc,v1={v1}")),
            stripe.clone(),
            BAD,
            "malformed_request",
        ),
        case(
            "stripe: negative t",
            &sp,
            with_sig(&format!("t=-5,v1={v1}")),
            stripe.clone(),
            BAD,
            "malformed_request",
        ),
        case(
            "stripe: t overflows i64",
            &sp,
            with_sig(&format!("t=99999999999999999999999,v1={v1}")),
            stripe.clone(),
            BAD,
            "malformed_request",
        ),
        case(
            "stripe: two t values",
            &sp,
            with_sig(&format!("t={now},t={now},v1={v1}")),
            stripe.clone(),
            BAD,
            "malformed_request",
        ),
        case(
            "stripe: no v1",
            &sp,
            with_sig(&format!("t={now}")),
            stripe.clone(),
            UNAUTH,
            "invalid_signature",
        ),
        case(
            "stripe: v1 not hex",
            &sp,
            with_sig(&format!("t={now},v1=zz{}", &v1[2..])),
            stripe.clone(),
            UNAUTH,
            "invalid_signature",
        ),
        case(
            "stripe: v1 too short",
            &sp,
            with_sig(&format!("t={now},v1={}", &v1[..16])),
            stripe.clone(),
            UNAUTH,
            "invalid_signature",
        ),
        case(
            "stripe: v1 too long",
            &sp,
            with_sig(&format!("t={now},v1={v1}00")),
            stripe.clone(),
            UNAUTH,
            "invalid_signature",
        ),
        case(
            "stripe: thousands of v1 values",
            &sp,
            with_sig(&format!("t={now}{}", ",v1=00".repeat(4000))),
            stripe.clone(),
            BAD,
            "malformed_request",
        ),
        case(
            "stripe: valid signature, other t",
            &sp,
            with_sig(&format!("t={},v1={v1}", now - 1)),
            stripe.clone(),
            UNAUTH,
            "invalid_signature",
        ),
        case(
            "stripe: body changed after signing",
            &sp,
            sh.clone(),
            stripe.replace("paid", "void"),
            UNAUTH,
            "invalid_signature",
        ),
        case(
            "stripe: validly signed, a year ahead",
            &sp,
            far_headers,
            stripe.clone(),
            BAD,
            "timestamp_outside_window",
        ),
        case(
            "stripe: signature replayed to another route",
            &gp,
            sh.clone(),
            stripe.clone(),
            UNAUTH,
            "invalid_signature",
        ),
        // GitHub.
        case(
            "github: no sha256= prefix",
            &gp,
            with_header(
                &gh,
                "X-Hub-Signature-256",
                gh_sig.trim_start_matches("sha256="),
            ),
            gh_body,
            BAD,
            "malformed_request",
        ),
        case(
            "github: sha1= instead",
            &gp,
            with_header(
                &gh,
                "X-Hub-Signature-256",
                &gh_sig.replace("sha256=", "sha1="),
            ),
            gh_body,
            BAD,
            "malformed_request",
        ),
        case(
            "github: empty signature value",
            &gp,
            with_header(&gh, "X-Hub-Signature-256", "sha256="),
            gh_body,
            UNAUTH,
            "invalid_signature",
        ),
        case(
            "github: valid, delivery id missing",
            &gp,
            without_header(&gh, "X-GitHub-Delivery"),
            gh_body,
            BAD,
            "malformed_request",
        ),
        case(
            "github: signature of the empty body",
            &gp,
            gh.clone(),
            "",
            UNAUTH,
            "invalid_signature",
        ),
        // Ed25519 with key ids.
        case(
            "ed25519: forged signature",
            &pp,
            with_header(&ph, "X-Signature", &STANDARD.encode([7u8; 64])),
            ed_body,
            UNAUTH,
            "invalid_signature",
        ),
        case(
            "ed25519: signature of 32 bytes",
            &pp,
            with_header(&ph, "X-Signature", &STANDARD.encode([7u8; 32])),
            ed_body,
            UNAUTH,
            "invalid_signature",
        ),
        case(
            "ed25519: signature not base64",
            &pp,
            with_header(&ph, "X-Signature", "***"),
            ed_body,
            BAD,
            "malformed_request",
        ),
        case(
            "ed25519: key id of a retired key",
            &pp,
            with_header(&ph, "X-Key-Id", "old"),
            ed_body,
            UNAUTH,
            "invalid_signature",
        ),
        case(
            "ed25519: key id of another integration",
            &pp,
            with_header(&ph, "X-Key-Id", "main"),
            ed_body,
            UNAUTH,
            "invalid_signature",
        ),
        case(
            "ed25519: key id header missing",
            &pp,
            without_header(&ph, "X-Key-Id"),
            ed_body,
            BAD,
            "malformed_request",
        ),
        case(
            "ed25519: event id header missing",
            &pp,
            without_header(&ph, "X-Event-Id"),
            ed_body,
            BAD,
            "malformed_request",
        ),
        case(
            "ed25519: timestamp negative",
            &pp,
            with_header(&ph, "X-Timestamp", "-1"),
            ed_body,
            BAD,
            "malformed_request",
        ),
        case(
            "ed25519: timestamp empty",
            &pp,
            with_header(&ph, "X-Timestamp", ""),
            ed_body,
            BAD,
            "malformed_request",
        ),
        case(
            "ed25519: validly signed, a day ahead",
            &pp,
            far_ed,
            ed_body,
            BAD,
            "timestamp_outside_window",
        ),
        case(
            "ed25519: other key's signature under this id",
            &pp,
            h.sign("t/partner", ed_body, ed(2, "mid"))
                .1
                .into_iter()
                .map(|(k, v)| {
                    if k.eq_ignore_ascii_case("x-key-id") {
                        (k, "new".into())
                    } else {
                        (k, v)
                    }
                })
                .collect(),
            ed_body,
            UNAUTH,
            "invalid_signature",
        ),
        // JSON-pointer event ids: parsed only after verification, and only within the limit.
        case(
            "pointer: body is not JSON",
            &ptr("id=1").0,
            ptr("id=1").1,
            "id=1",
            BAD,
            "malformed_request",
        ),
        case(
            "pointer: 480-deep nesting within the limit",
            &ptr(&deep).0,
            ptr(&deep).1,
            deep.clone(),
            BAD,
            "malformed_request",
        ),
        case(
            "pointer: id is an object",
            &ptr(r#"{"id":{"a":1}}"#).0,
            ptr(r#"{"id":{"a":1}}"#).1,
            r#"{"id":{"a":1}}"#,
            BAD,
            "malformed_request",
        ),
        case(
            "pointer: id is empty",
            &ptr(r#"{"id":""}"#).0,
            ptr(r#"{"id":""}"#).1,
            r#"{"id":""}"#,
            BAD,
            "malformed_request",
        ),
        case(
            "pointer: id has a NUL",
            &ptr(r#"{"id":"a\u0000b"}"#).0,
            ptr(r#"{"id":"a\u0000b"}"#).1,
            r#"{"id":"a\u0000b"}"#,
            BAD,
            "malformed_request",
        ),
        case(
            "pointer: id missing",
            &ptr(r#"{"type":"x"}"#).0,
            ptr(r#"{"type":"x"}"#).1,
            r#"{"type":"x"}"#,
            BAD,
            "malformed_request",
        ),
        case(
            "pointer: body one byte over the limit",
            &ptr(&over).0,
            ptr(&over).1,
            over.clone(),
            StatusCode::PAYLOAD_TOO_LARGE,
            "body_too_large",
        ),
        // Routes and methods.
        case(
            "unknown path",
            "/hooks/t/nope",
            sh.clone(),
            stripe.clone(),
            StatusCode::NOT_FOUND,
            "unknown_route",
        ),
        case(
            "trailing slash is another path",
            &format!("{sp}/"),
            sh.clone(),
            stripe.clone(),
            StatusCode::NOT_FOUND,
            "unknown_route",
        ),
        case(
            "path traversal",
            "/hooks/t/../t/stripe",
            sh.clone(),
            stripe.clone(),
            StatusCode::NOT_FOUND,
            "unknown_route",
        ),
    ];
    for method in ["GET", "PUT", "DELETE", "PATCH"] {
        let mut c = case(
            "wrong method",
            &sp,
            sh.clone(),
            stripe.clone(),
            StatusCode::METHOD_NOT_ALLOWED,
            "method_not_allowed",
        );
        c.method = method;
        cases.push(c);
    }
    let mut c = case(
        "non-UTF-8 signature header",
        &sp,
        without_header(&sh, "Stripe-Signature"),
        stripe.clone(),
        BAD,
        "malformed_request",
    );
    c.raw_headers = vec![("stripe-signature", b"t=1,v1=\xff\xfe".to_vec())];
    cases.push(c);
    // The signer takes text, so these exact bytes are signed by hand.
    let mut c = case(
        "non-UTF-8 body, valid signature, pointer id",
        "",
        vec![],
        vec![0xff, 0xfe, b'{'],
        BAD,
        "malformed_request",
    );
    let sig = hookgate::signature::hmac_sha256(
        b"test-hmac-secret",
        &[format!("{now}.").as_bytes(), &[0xff, 0xfe, b'{']],
    );
    c.path = "/hooks/t/ptr".into();
    c.headers = vec![
        ("X-Signature".into(), const_hex::encode(sig)),
        ("X-Timestamp".into(), now.to_string()),
    ];
    cases.push(c);
    // Positive control: the exact limit passes.
    cases.push(case(
        "pointer: body exactly at the limit",
        &ptr(&at_limit).0,
        ptr(&at_limit).1,
        at_limit.clone(),
        StatusCode::OK,
        "",
    ));
    cases
}

#[sqlx::test(migrations = "migrations/postgres")]
async fn every_hostile_request_gets_its_documented_answer_and_writes_nothing(pool: PgPool) {
    let h = harness_with(Inbox::Postgres(pool), &manifests());
    let mut cases = catalogue(&h).await;
    cases.extend(provider_cases(&h));
    assert!(cases.len() >= 90, "{} cases", cases.len());
    let mut failures = Vec::new();
    for c in &cases {
        let before = h.receiver.inbox().counts().await.unwrap();
        let mut req = Request::builder()
            .method(c.method)
            .uri(&c.path)
            .header("content-length", c.body.len());
        for (k, v) in &c.headers {
            req = req.header(k, v);
        }
        for (k, v) in &c.raw_headers {
            req = req.header(*k, HeaderValue::from_bytes(v).unwrap());
        }
        let r = h.call(req.body(Body::from(c.body.clone())).unwrap()).await;
        let expected = if c.status == StatusCode::OK {
            accepted()
        } else {
            error(c.error)
        };
        if (r.status, &r.json) != (c.status, &expected) {
            failures.push(format!(
                "{}: got {} {}, expected {} {}",
                c.name, r.status, r.json, c.status, expected
            ));
        }
        // Only the positive controls may write, and then one event (and at most its nonce).
        let after = h.receiver.inbox().counts().await.unwrap();
        let (rows, nonces) = (after.0 - before.0, after.1 - before.1);
        let allowed = i64::from(c.status == StatusCode::OK);
        if rows != allowed || nonces > allowed {
            failures.push(format!("{}: wrote {rows} rows and {nonces} nonces", c.name));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases failed:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

/// `headers` with the line `name` sent twice (same value): which one counts would depend on the
/// proxies in between, so a signed value is never taken from a pair.
fn twice(headers: &Headers, name: &str) -> Headers {
    let mut out = headers.clone();
    let line = headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name));
    out.push(line.expect(name).clone());
    out
}

fn value(headers: &Headers, name: &str) -> String {
    let line = headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name));
    line.expect(name).1.clone()
}

/// The header parsers of the provider schemes (issue 15), signed by `Scheme::sign` and then bent.
// A table, one case per line, so that each case's status and code stay next to its name.
#[rustfmt::skip]
fn provider_cases(h: &Harness) -> Vec<Case> {
    use crate::providers_fixtures::{Req, Signer, VERIFY_TOKEN, sign};
    let now = t0().timestamp();
    let signed = |name: &'static str, body: &'static str| {
        let req = Req {
            id: "evt-hostile",
            ty: Some("x.y"),
            ..Req::new(name, body)
        };
        let (path, headers) = sign(h, &req);
        (path, headers, body)
    };

    let (pp, ph, pb) = signed("paddle", r#"{"event_id":"evt_p","event_type":"a.b"}"#);
    let h1 = value(&ph, "paddle-signature").split_once(";h1=").unwrap().1.to_string();
    let paddle = |v: String| with_header(&ph, "Paddle-Signature", &v);
    let (tp, th, tb) = signed("twitch", r#"{"event":{}}"#);
    let (gp, gh, gb) = signed("sendgrid", r#"[{"event":"open"}]"#);
    let (wp, wh, wb) = signed("twilio", r#"{"sid":"SM1"}"#);
    let bare = wp.split('?').next().unwrap().to_string();
    let hash = wp.split_once("bodySHA256=").unwrap().1.to_string();
    let (mp, mh, mb) = signed("meta", r#"{"object":"page"}"#);
    let (lp, lh, lb) = signed("gitlab", r#"{"object_kind":"push"}"#);
    let unstamped = r#"{"action":"create","type":"Issue"}"#;
    let (np, nh, nb) = signed("linear", unstamped);
    let forged_unstamped = sign(
        h,
        &Req {
            signer: Signer::Wrong,
            ..Req::new("linear", unstamped)
        },
    )
    .1;
    let string_stamp = r#"{"action":"create","webhookTimestamp":"1780315200000"}"#;
    let (_, sh_string, _) = signed("linear", string_stamp);
    let (zp, zh, zb) = signed("zoom", r#"{"event":"meeting.started"}"#);
    let (dp, dh, db) = signed("discord", r#"{"id":"1","type":2}"#);
    let (qp, qh, qb) = signed("square", r#"{"event_id":"e","type":"t"}"#);
    let meta_get = |query: String| {
        let mut c = case("", &format!("{mp}?{query}"), vec![], "", BAD, "malformed_request");
        c.method = "GET";
        c
    };

    let named = |name: &'static str, mut c: Case| {
        c.name = name;
        c
    };
    vec![
        // Paddle-Signature: ts=<unix>;h1=<hex>[;h1=...]
        case("paddle: ts twice", &pp, paddle(format!("ts={now};ts={now};h1={h1}")), pb, BAD, "malformed_request"),
        case("paddle: no h1", &pp, paddle(format!("ts={now}")), pb, UNAUTH, "invalid_signature"),
        case("paddle: h1 not hex", &pp, paddle(format!("ts={now};h1=zz{}", &h1[2..])), pb, UNAUTH, "invalid_signature"),
        case("paddle: empty ts", &pp, paddle(format!("ts=;h1={h1}")), pb, BAD, "malformed_request"),
        case("paddle: ts not a number", &pp, paddle(format!("ts=soon;h1={h1}")), pb, BAD, "malformed_request"),
        case("paddle: valid h1, other ts", &pp, paddle(format!("ts={};h1={h1}", now - 1)), pb, UNAUTH, "invalid_signature"),
        case("paddle: nine h1 values", &pp, paddle(format!("ts={now}{}", ";h1=00".repeat(9))), pb, BAD, "malformed_request"),
        // The timestamp travels in the same header, so no header is a missing timestamp (400),
        // where Stripe's missing header is 401: reported, kept explicit here.
        case("paddle: no Paddle-Signature", &pp, without_header(&ph, "Paddle-Signature"), pb, UNAUTH, "invalid_signature"),
        // Positive control: an h1 that is not hex is skipped, the valid one beside it counts.
        case("paddle: a non-hex h1 beside the valid one", &pp, paddle(format!("ts={now};h1=zz;h1={h1}")), pb, StatusCode::OK, ""),
        // Twitch: RFC 3339 timestamps only.
        case("twitch: timestamp in unix seconds", &tp, with_header(&th, "Twitch-Eventsub-Message-Timestamp", &now.to_string()), tb, BAD, "malformed_request"),
        case("twitch: timestamp in RFC 2822", &tp, with_header(&th, "Twitch-Eventsub-Message-Timestamp", "Mon, 01 Jun 2026 12:00:00 GMT"), tb, BAD, "malformed_request"),
        case("twitch: same instant, other spelling", &tp, with_header(&th, "Twitch-Eventsub-Message-Timestamp", "2026-06-01T12:00:00Z"), tb, UNAUTH, "invalid_signature"),
        case("twitch: message id missing", &tp, without_header(&th, "Twitch-Eventsub-Message-Id"), tb, BAD, "malformed_request"),
        case("twitch: signature without sha256=", &tp, with_header(&th, "Twitch-Eventsub-Message-Signature", value(&th, "twitch-eventsub-message-signature").trim_start_matches("sha256=")), tb, BAD, "malformed_request"),
        case("twitch: timestamp twice", &tp, twice(&th, "twitch-eventsub-message-timestamp"), tb, BAD, "malformed_request"),
        // SendGrid: base64 DER ECDSA.
        case("sendgrid: signature not base64", &gp, with_header(&gh, "X-Twilio-Email-Event-Webhook-Signature", "***"), gb, BAD, "malformed_request"),
        case("sendgrid: base64, not DER", &gp, with_header(&gh, "X-Twilio-Email-Event-Webhook-Signature", &STANDARD.encode([7u8; 64])), gb, UNAUTH, "invalid_signature"),
        case("sendgrid: timestamp missing", &gp, without_header(&gh, "X-Twilio-Email-Event-Webhook-Timestamp"), gb, BAD, "malformed_request"),
        case("sendgrid: timestamp not a number", &gp, with_header(&gh, "X-Twilio-Email-Event-Webhook-Timestamp", "1e9"), gb, BAD, "malformed_request"),
        // Twilio: base64 HMAC-SHA1; bodySHA256 in the signed query.
        case("twilio: bodySHA256 twice", &format!("{wp}&bodySHA256={hash}"), wh.clone(), wb, BAD, "malformed_request"),
        case("twilio: bodySHA256 not hex", &format!("{bare}?bodySHA256={}", "z".repeat(64)), wh.clone(), wb, BAD, "malformed_request"),
        case("twilio: bodySHA256 of 31 bytes", &format!("{bare}?bodySHA256={}", &hash[2..]), wh.clone(), wb, BAD, "malformed_request"),
        case("twilio: signature not base64", &wp, with_header(&wh, "X-Twilio-Signature", "***"), wb, BAD, "malformed_request"),
        case("twilio: signature twice", &wp, twice(&wh, "x-twilio-signature"), wb, BAD, "malformed_request"),
        case("twilio: no signature", &wp, without_header(&wh, "X-Twilio-Signature"), wb, UNAUTH, "invalid_signature"),
        // Meta: the subscription GET and the POST signature.
        named("meta: GET with hub.mode twice", meta_get(format!("hub.mode=subscribe&hub.mode=subscribe&hub.verify_token={VERIFY_TOKEN}&hub.challenge=1"))),
        named("meta: GET with hub.verify_token twice", meta_get(format!("hub.mode=subscribe&hub.verify_token={VERIFY_TOKEN}&hub.verify_token={VERIFY_TOKEN}&hub.challenge=1"))),
        // The challenge is echoed into the response: only visible ASCII is.
        named("meta: GET with CR LF in the challenge", meta_get(format!("hub.mode=subscribe&hub.verify_token={VERIFY_TOKEN}&hub.challenge=1%0d%0aSet-Cookie:%20x"))),
        named("meta: GET with an empty challenge", meta_get(format!("hub.mode=subscribe&hub.verify_token={VERIFY_TOKEN}&hub.challenge="))),
        case("meta: signature without sha256=", &mp, with_header(&mh, "X-Hub-Signature-256", value(&mh, "x-hub-signature-256").trim_start_matches("sha256=")), mb, BAD, "malformed_request"),
        // GitLab: the token and the UUID that dedupes.
        case("gitlab: event UUID missing", &lp, without_header(&lh, "X-Gitlab-Event-UUID"), lb, BAD, "malformed_request"),
        case("gitlab: token twice", &lp, twice(&lh, "x-gitlab-token"), lb, BAD, "malformed_request"),
        case("gitlab: empty token", &lp, with_header(&lh, "X-Gitlab-Token", ""), lb, UNAUTH, "invalid_signature"),
        // Linear: the signed timestamp is the body's webhookTimestamp, read once the body verified.
        case("linear: signed body without webhookTimestamp", &np, nh.clone(), nb, BAD, "malformed_request"),
        case("linear: forged body without webhookTimestamp", &np, forged_unstamped, nb, UNAUTH, "invalid_signature"),
        case("linear: webhookTimestamp a string", &np, sh_string, string_stamp, BAD, "malformed_request"),
        case("linear: signature not hex", &np, with_header(&nh, "Linear-Signature", "xyz"), nb, BAD, "malformed_request"),
        // Zoom and Discord: every header they read, once.
        case("zoom: signature twice", &zp, twice(&zh, "x-zm-signature"), zb, BAD, "malformed_request"),
        case("zoom: timestamp twice", &zp, twice(&zh, "x-zm-request-timestamp"), zb, BAD, "malformed_request"),
        case("zoom: signature without v0=", &zp, with_header(&zh, "x-zm-signature", value(&zh, "x-zm-signature").trim_start_matches("v0=")), zb, BAD, "malformed_request"),
        case("discord: signature twice", &dp, twice(&dh, "x-signature-ed25519"), db, BAD, "malformed_request"),
        case("discord: timestamp twice", &dp, twice(&dh, "x-signature-timestamp"), db, BAD, "malformed_request"),
        case("discord: timestamp missing", &dp, without_header(&dh, "X-Signature-Timestamp"), db, BAD, "malformed_request"),
        case("discord: signature not hex", &dp, with_header(&dh, "X-Signature-Ed25519", "zz"), db, BAD, "malformed_request"),
        case("discord: signature of 32 bytes", &dp, with_header(&dh, "X-Signature-Ed25519", &const_hex::encode([7u8; 32])), db, UNAUTH, "invalid_signature"),
        // Square: base64 HMAC over publicUrl + body.
        case("square: signature not base64", &qp, with_header(&qh, "x-square-hmacsha256-signature", "***"), qb, BAD, "malformed_request"),
        case("square: signature twice", &qp, twice(&qh, "x-square-hmacsha256-signature"), qb, BAD, "malformed_request"),
    ]
}
