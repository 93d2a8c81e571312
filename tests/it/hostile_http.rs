//! The hostile-input cases whose answer depends on HTTP parsing, sent as exact bytes over a raw
//! TCP connection to the receiver served through the real listener (hyper's HTTP/1.1 parser) on
//! 127.0.0.1:0: header bytes that are not text, folded and repeated headers, chunked framing, and
//! request targets `Router::oneshot` never sees as a client wrote them. Each case checks the exact
//! status and body, and that nothing but the positive controls reached the inbox. Real PostgreSQL.

use crate::common::loopback::{RawReply, Served, try_raw};
use crate::common::*;
use hookgate::cli::send::SendOptions;
use hookgate::inbox::Inbox;
use sqlx::PgPool;

/// The shared integrations plus `t/chunky`: a generic HMAC route with a 64-byte body cap and no
/// rate limit, so positive controls never meet a limiter.
fn manifests() -> String {
    test_manifests()
        + r#"
---
apiVersion: hookgate.dev/v1alpha1
kind: WebhookIntegration
metadata: {name: chunky, namespace: t}
spec:
  scheme: {type: hmac-sha256, keyIdHeader: ""}
  eventId: {header: X-Event-Id}
  keys: [{id: h1, secretRef: {name: keys, key: hmac}}]
  limits: {maxBodyBytes: 64}
  delivery: {url: "http://127.0.0.1:1/sink"}
"#
}

type Headers = Vec<(String, String)>;

/// What the server must answer.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Expect {
    /// 200 `{"received":true,"duplicate":false}`: one more row.
    Accepted,
    /// hookgate's own refusal: this status and `{"error": code}`.
    Refused(u16, &'static str),
    /// hyper refuses the bytes before any route runs: this status, no body, connection closed.
    NotHttp(u16),
}

struct Case {
    name: &'static str,
    bytes: Vec<u8>,
    /// Half-close after writing (a body cut short).
    eof: bool,
    expect: Expect,
}

fn case(name: &'static str, bytes: Vec<u8>, expect: Expect) -> Case {
    Case {
        name,
        bytes,
        eof: false,
        expect,
    }
}

/// Request line and headers, without the blank line that ends them.
fn head(method: &str, target: &str, headers: &Headers) -> Vec<u8> {
    let mut out = format!("{method} {target} HTTP/1.1\r\nhost: hookgate\r\nconnection: close\r\n")
        .into_bytes();
    for (k, v) in headers {
        out.extend_from_slice(format!("{k}: {v}\r\n").as_bytes());
    }
    out
}

/// `head` plus raw header lines, a Content-Length and the body.
fn sized(head: Vec<u8>, body: &[u8]) -> Vec<u8> {
    [
        head,
        format!("content-length: {}\r\n\r\n", body.len()).into_bytes(),
        body.to_vec(),
    ]
    .concat()
}

/// `head` plus a chunked body: each chunk framed as sent, then the last-chunk.
fn chunked(head: Vec<u8>, chunks: &[&[u8]]) -> Vec<u8> {
    let mut out = [head, b"transfer-encoding: chunked\r\n\r\n".to_vec()].concat();
    for c in chunks {
        out.extend_from_slice(format!("{:x}\r\n", c.len()).as_bytes());
        out.extend_from_slice(c);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"0\r\n\r\n");
    out
}

/// The value of `name` in a signed header list.
fn value(headers: &Headers, name: &str) -> String {
    headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(name))
        .unwrap_or_else(|| panic!("{name} in {headers:?}"))
        .1
        .clone()
}

fn catalogue(h: &Harness) -> Vec<Case> {
    use Expect::*;
    let now = t0().timestamp();
    let stripe = |id: &str| {
        let body = stripe_body(id, "invoice.paid");
        let (path, headers) = h.sign("t/stripe", &body, opts());
        (path, headers, body.into_bytes())
    };
    let chunky = |id: &str, body: &[u8]| {
        let sent = SendOptions {
            event_id: Some(id.into()),
            ..opts()
        };
        let (path, headers) = h.sign("t/chunky", std::str::from_utf8(body).unwrap(), sent);
        (path, headers)
    };
    let post =
        |target: &str, headers: &Headers, body: &[u8]| sized(head("POST", target, headers), body);

    let mut cases = Vec::new();

    // Header values that are not text. hyper passes obs-text bytes through; hookgate refuses them
    // in a header it has to read, and only there.
    let (path, headers, body) = stripe("evt_bytes_sig");
    let sig = value(&headers, "stripe-signature");
    let mut bytes = head("POST", &path, &without_header(&headers, "stripe-signature"));
    bytes.extend_from_slice(b"stripe-signature: ");
    bytes.extend_from_slice(sig.as_bytes());
    bytes.extend_from_slice(b"\xff\xfe\r\n");
    cases.push(case(
        "signature header with non-UTF-8 bytes",
        sized(bytes, &body),
        Refused(400, "malformed_request"),
    ));
    let (path, headers, body) = stripe("evt_bytes_other");
    let mut bytes = head("POST", &path, &headers);
    bytes.extend_from_slice(b"x-note: caf\xe9 \xff\r\n");
    cases.push(case(
        "non-UTF-8 bytes in a header hookgate does not read",
        sized(bytes, &body),
        Accepted,
    ));
    let (path, headers, body) = stripe("evt_nul");
    let mut bytes = head("POST", &path, &headers);
    bytes.extend_from_slice(b"x-note: a\x00b\r\n");
    cases.push(case(
        "NUL in a header value",
        sized(bytes, &body),
        NotHttp(400),
    ));

    // obs-fold: RFC 9112 lets a server refuse it with 400, and hyper does, wherever it appears.
    let (path, headers, body) = stripe("evt_fold");
    let (t, v1) = sig_parts(&value(&headers, "stripe-signature"));
    let mut bytes = head("POST", &path, &without_header(&headers, "stripe-signature"));
    bytes.extend_from_slice(format!("stripe-signature: {t},\r\n v1={v1}\r\n").as_bytes());
    cases.push(case(
        "signature header folded over two lines",
        sized(bytes, &body),
        NotHttp(400),
    ));
    let mut bytes = head("POST", &path, &headers);
    bytes.extend_from_slice(b"x-note: one\r\n\ttwo\r\n");
    cases.push(case(
        "folded header hookgate does not read",
        sized(bytes, &body),
        NotHttp(400),
    ));
    let mut bytes = head("POST", &path, &without_header(&headers, "stripe-signature"));
    bytes.extend_from_slice(format!("stripe-signature : {t},v1={v1}\r\n").as_bytes());
    cases.push(case(
        "space before the colon",
        sized(bytes, &body),
        NotHttp(400),
    ));

    // A header the scheme reads, sent twice: which line counts would depend on the proxies on
    // the way, so neither does.
    let (path, headers, body) = stripe("evt_twice");
    let sig = value(&headers, "stripe-signature");
    let forged = format!("{t},v1={}", "0".repeat(64));
    for (name, first, second) in [
        ("signature header twice, the valid one first", &sig, &forged),
        (
            "signature header twice, the valid one second",
            &forged,
            &sig,
        ),
        ("signature header twice, identical", &sig, &sig),
    ] {
        let mut hdrs = without_header(&headers, "stripe-signature");
        hdrs.push(("stripe-signature".into(), first.clone()));
        hdrs.push(("Stripe-Signature".into(), second.clone()));
        cases.push(case(
            name,
            post(&path, &hdrs, &body),
            Refused(400, "malformed_request"),
        ));
    }
    let body = br#"{"n":1}"#;
    let (path, headers) = chunky("c-twice", body);
    let mut hdrs = headers.clone();
    hdrs.push(("X-Timestamp".into(), (now - 1).to_string()));
    cases.push(case(
        "timestamp header twice",
        post(&path, &hdrs, body),
        Refused(400, "malformed_request"),
    ));
    let mut hdrs = headers.clone();
    hdrs.push(("x-event-id".into(), "c-other".into()));
    cases.push(case(
        "signed event id header twice",
        post(&path, &hdrs, body),
        Refused(400, "malformed_request"),
    ));

    // Chunked bodies: the cap holds while reading, the framing is hyper's to check.
    let body = br#"{"n":"chunked body in three parts"}"#;
    let (path, headers) = chunky("c-ok", body);
    cases.push(case(
        "chunked body in three chunks",
        chunked(
            head("POST", &path, &headers),
            &[&body[..5], &body[5..6], &body[6..]],
        ),
        Accepted,
    ));
    let body = format!(r#"{{"pad":"{}"}}"#, "x".repeat(64 - 10));
    assert_eq!(body.len(), 64);
    let (path, headers) = chunky("c-at-cap", body.as_bytes());
    cases.push(case(
        "chunked body exactly at the cap",
        chunked(
            head("POST", &path, &headers),
            &[&body.as_bytes()[..32], &body.as_bytes()[32..]],
        ),
        Accepted,
    ));
    let over = format!(r#"{{"pad":"{}"}}"#, "x".repeat(65 - 10));
    let (path, headers) = chunky("c-over", over.as_bytes());
    cases.push(case(
        "chunked body one byte over the cap",
        chunked(
            head("POST", &path, &headers),
            &[&over.as_bytes()[..40], &over.as_bytes()[40..]],
        ),
        Refused(413, "body_too_large"),
    ));
    // Announces 1 MiB and sends 100 bytes: refused on what arrived, without waiting for the rest.
    let mut bytes = [
        head("POST", &path, &headers),
        b"transfer-encoding: chunked\r\n\r\n100000\r\n".to_vec(),
    ]
    .concat();
    bytes.extend_from_slice(&[b'x'; 100]);
    cases.push(case(
        "one chunk announced far over the cap, cut short",
        bytes,
        Refused(413, "body_too_large"),
    ));
    let body = br#"{"n":2}"#;
    let (path, headers) = chunky("c-bad", body);
    let framed = |rest: &[u8]| {
        [
            head("POST", &path, &headers),
            b"transfer-encoding: chunked\r\n\r\n".to_vec(),
            rest.to_vec(),
        ]
        .concat()
    };
    cases.push(case(
        "chunk size that is not hex",
        framed(b"zz\r\n{\"n\":2}\r\n0\r\n\r\n"),
        Refused(400, "malformed_request"),
    ));
    cases.push(case(
        "chunk size that overflows",
        framed(b"fffffffffffffffffffff\r\n{\"n\":2}\r\n0\r\n\r\n"),
        Refused(400, "malformed_request"),
    ));
    cases.push(case(
        "chunk data longer than its size",
        framed(b"3\r\n{\"n\":2}\r\n0\r\n\r\n"),
        Refused(400, "malformed_request"),
    ));
    let mut c = case(
        "connection closed before the last chunk",
        framed(b"7\r\n{\"n\":2}\r\n"),
        Refused(400, "malformed_request"),
    );
    c.eof = true;
    cases.push(c);
    let mut c = case(
        "body shorter than its Content-Length",
        [
            head("POST", &path, &headers),
            b"content-length: 60\r\n\r\n{\"n\":2}".to_vec(),
        ]
        .concat(),
        Refused(400, "malformed_request"),
    );
    c.eof = true;
    cases.push(c);
    cases.push(case(
        "Transfer-Encoding gzip (not ending in chunked) beside a Content-Length",
        sized(
            [
                head("POST", &path, &headers),
                b"transfer-encoding: gzip\r\n".to_vec(),
            ]
            .concat(),
            body,
        ),
        NotHttp(400),
    ));
    cases.push(case(
        "two different Content-Lengths",
        [
            head("POST", &path, &headers),
            b"content-length: 7\r\ncontent-length: 8\r\n\r\n{\"n\":2}".to_vec(),
        ]
        .concat(),
        NotHttp(400),
    ));
    cases.push(case(
        "Content-Length not a number",
        [
            head("POST", &path, &headers),
            b"content-length: 7x\r\n\r\n{\"n\":2}".to_vec(),
        ]
        .concat(),
        NotHttp(400),
    ));

    // Request targets: the route is the exact path, never decoded or normalised; a query string
    // and the absolute form (which RFC 9112 says a server must accept) do not change it.
    let (path, headers, body) = stripe("evt_query");
    cases.push(case(
        "query string",
        post(&format!("{path}?source=test&x=%2F"), &headers, &body),
        Accepted,
    ));
    let (path, headers, body) = stripe("evt_absolute");
    cases.push(case(
        "absolute-form target",
        post(&format!("http://other.example{path}"), &headers, &body),
        Accepted,
    ));
    let (path, headers, body) = stripe("evt_paths");
    let odd = [
        "//hooks/t/stripe",
        "/hooks//t/stripe",
        "/hooks/t%2Fstripe",
        "/hooks%2Ft%2Fstripe",
        "/hooks/t/%73tripe",
        "/hooks/t/../t/stripe",
        "/hooks/t/./stripe",
        "/hooks/x/../t/stripe",
        "/hooks/t/%2e%2e/t/stripe",
        "/HOOKS/t/stripe",
        "/hooks/t/stripe/",
        "/hooks/t/stripe;v=1",
        "http://other.example/hooks/t/nope",
    ];
    assert_eq!(path, "/hooks/t/stripe");
    for target in odd {
        let mut c = case(
            "odd path",
            post(target, &headers, &body),
            Refused(404, "unknown_route"),
        );
        c.name = Box::leak(format!("path {target}").into_boxed_str());
        cases.push(c);
    }
    cases.push(case(
        "asterisk-form target",
        post("*", &headers, &body),
        Refused(404, "unknown_route"),
    ));
    cases.push(case(
        "a byte that is not allowed in a target",
        post("/hooks/t/str\u{7f}ipe", &headers, &body),
        NotHttp(400),
    ));
    // hyper drops a fragment (which no client should send) before the path is read.
    let (path, headers, body) = stripe("evt_fragment");
    cases.push(case(
        "a fragment in the target",
        post(&format!("{path}#frag"), &headers, &body),
        Accepted,
    ));
    cases.push(case(
        "method in lower case",
        sized(head("post", &path, &headers), &body),
        Refused(405, "method_not_allowed"),
    ));
    cases
}

/// `t=…` and the hex of `v1=…` from a Stripe-Signature value.
fn sig_parts(sig: &str) -> (String, String) {
    let (t, v1) = sig.split_once(",v1=").unwrap();
    (t.to_string(), v1.to_string())
}

fn check(c: &Case, r: &RawReply) -> Result<(), String> {
    let got = (r.status, r.json());
    let ok = match c.expect {
        Expect::Accepted => got == (200, accepted()),
        Expect::Refused(status, code) => got == (status, error(code)),
        Expect::NotHttp(status) => {
            r.status == status && r.body.is_empty() && r.head.contains("connection: close")
        }
    };
    if ok {
        Ok(())
    } else {
        Err(format!(
            "{}: expected {:?}, got {} {:?} {:?}",
            c.name,
            c.expect,
            r.status,
            r.head.lines().skip(1).collect::<Vec<_>>(),
            String::from_utf8_lossy(&r.body)
        ))
    }
}

#[sqlx::test(migrations = "migrations/postgres")]
async fn parsing_cases_get_their_exact_answer_over_loopback_and_write_nothing(pool: PgPool) {
    let h = harness_with(Inbox::Postgres(pool.clone()), &manifests());
    let served = Served::start(&h.receiver).await;
    let cases = catalogue(&h);
    assert!(cases.len() >= 40, "{} cases", cases.len());
    let mut failures = Vec::new();
    let mut rows = 0;
    for c in &cases {
        match try_raw(served.addr, &c.bytes, c.eof).await {
            Ok(r) => failures.extend(check(c, &r).err()),
            Err(e) => failures.push(format!("{}: {e}", c.name)),
        }
        rows += i64::from(c.expect == Expect::Accepted);
        // Every accepted case has a signed id, so no nonce is ever kept.
        let counts = h.receiver.inbox().counts().await.unwrap();
        if counts != (rows, 0) {
            failures.push(format!(
                "{}: the inbox holds {counts:?} (events, nonces), expected ({rows}, 0)",
                c.name
            ));
            rows = counts.0;
        }
    }
    // Bytes that are not text in a header nobody verifies are kept, readable.
    let stored: serde_json::Value =
        sqlx::query_scalar("SELECT headers FROM inbox_events WHERE event_id = 'evt_bytes_other'")
            .fetch_one(&pool)
            .await
            .unwrap();
    assert!(
        stored
            .as_array()
            .unwrap()
            .contains(&serde_json::json!(["x-note", "caf\u{fffd} \u{fffd}"])),
        "{stored}"
    );
    assert!(
        failures.is_empty(),
        "{} failures in {} cases:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}
