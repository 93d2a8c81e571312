//! The HTTP contract, case by case, on real PostgreSQL. Every refusal also checks that no row and
//! no nonce were written.

use crate::common::*;
use axum::body::Body;
use axum::http::{Request, StatusCode};
use chrono::Duration;
use futures::StreamExt;
use hookgate::cli::send::SendOptions;
use hookgate::inbox::Inbox;
use sqlx::PgPool;

type Headers = Vec<(String, String)>;

async fn assert_nothing_written(h: &Harness) {
    assert_eq!(
        h.receiver.inbox().counts().await.unwrap(),
        (0, 0),
        "no event and no nonce may be stored"
    );
}

#[sqlx::test(migrations = "migrations/postgres")]
async fn replay_window_edges_are_inclusive(pool: PgPool) {
    let h = harness(Inbox::Postgres(pool));
    let now = t0().timestamp();
    for (offset, expected) in [(-300, 200), (300, 200), (-301, 400), (301, 400)] {
        let body = stripe_body(&format!("evt_window_{offset}"), "invoice.paid");
        let sent = SendOptions {
            timestamp: Some(now + offset),
            ..opts()
        };
        let r = h.send("t/stripe", &body, sent).await;
        assert_eq!(
            r.status.as_u16(),
            expected,
            "offset {offset}s: {:?}",
            r.json
        );
        if expected == 400 {
            assert_eq!(r.json, error("timestamp_outside_window"));
        }
    }
    assert_eq!(h.receiver.inbox().counts().await.unwrap().0, 2);
}

#[sqlx::test(migrations = "migrations/postgres")]
async fn window_is_exact_to_the_millisecond(pool: PgPool) {
    let h = harness(Inbox::Postgres(pool));
    let body = stripe_body("evt_ms", "invoice.paid");
    let (path, headers) = h.sign("t/stripe", &body, opts());
    h.set_now(t0() + Duration::milliseconds(300_001));
    let late = h.post(&path, &headers, body.clone()).await;
    assert_eq!(
        (late.status, late.json),
        (StatusCode::BAD_REQUEST, error("timestamp_outside_window"))
    );
    h.set_now(t0() + Duration::milliseconds(300_000));
    assert_eq!(h.post(&path, &headers, body).await.json, accepted());
}

#[sqlx::test(migrations = "migrations/postgres")]
async fn key_ids_select_keys_and_retirement_is_enforced(pool: PgPool) {
    let h = harness(Inbox::Postgres(pool));
    let body = r#"{"id":"x"}"#;
    // `mid` retires 2026-07-01: still accepted at t0 (retiring), recorded as the verifying key.
    let r = h
        .send(
            "t/partner",
            body,
            SendOptions {
                event_id: Some("e-mid".into()),
                ..ed_opts(2, "mid")
            },
        )
        .await;
    assert_eq!(r.json, accepted());
    // `old` retired 2026-05-01: refused even though the route was never rebuilt.
    let r = h
        .send(
            "t/partner",
            body,
            SendOptions {
                event_id: Some("e-old".into()),
                ..ed_opts(1, "old")
            },
        )
        .await;
    assert_eq!(
        (r.status, r.json),
        (StatusCode::UNAUTHORIZED, error("invalid_signature"))
    );
    // After mid's retireAt passes, the same valid signature is refused too.
    h.set_now("2026-07-01T00:00:00Z".parse().unwrap());
    let r = h
        .send(
            "t/partner",
            body,
            SendOptions {
                event_id: Some("e-mid-2".into()),
                ..ed_opts(2, "mid")
            },
        )
        .await;
    assert_eq!(r.status, StatusCode::UNAUTHORIZED);
    let r = h
        .send(
            "t/partner",
            body,
            SendOptions {
                event_id: Some("e-new".into()),
                ..ed_opts(3, "new")
            },
        )
        .await;
    assert_eq!(r.json, accepted());

    // An unknown key id is 401; a missing key id header is 400 (found before verification).
    let (path, headers) = h.sign(
        "t/partner",
        body,
        SendOptions {
            event_id: Some("e-x".into()),
            ..ed_opts(3, "new")
        },
    );
    let r = h
        .post(&path, &with_header(&headers, "X-Key-Id", "nope"), body)
        .await;
    assert_eq!(
        (r.status, r.json),
        (StatusCode::UNAUTHORIZED, error("invalid_signature"))
    );
    let r = h
        .post(&path, &without_header(&headers, "X-Key-Id"), body)
        .await;
    assert_eq!(
        (r.status, r.json),
        (StatusCode::BAD_REQUEST, error("malformed_request"))
    );
    // The header names key `new` but the signature was made by `mid`'s private key.
    let (_, forged) = h.sign(
        "t/partner",
        body,
        SendOptions {
            event_id: Some("e-y".into()),
            ..ed_opts(2, "mid")
        },
    );
    let r = h
        .post(&path, &with_header(&forged, "X-Key-Id", "new"), body)
        .await;
    assert_eq!(r.status, StatusCode::UNAUTHORIZED);

    let keys: Vec<String> = h
        .receiver
        .inbox()
        .list(&Default::default())
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.key_id)
        .collect();
    assert_eq!(keys, vec!["new".to_string(), "mid".to_string()]);
}

#[sqlx::test(migrations = "migrations/postgres")]
async fn bad_signatures_are_401_and_malformed_headers_400(pool: PgPool) {
    let h = harness(Inbox::Postgres(pool));
    let body = stripe_body("evt_bad", "invoice.paid");
    let (path, headers) = h.sign("t/stripe", &body, opts());
    let cases: Vec<(Headers, String, StatusCode, &str)> = vec![
        (
            headers.clone(),
            body.replace("in_1", "in_2"),
            StatusCode::UNAUTHORIZED,
            "invalid_signature",
        ),
        (
            without_header(&headers, "Stripe-Signature"),
            body.clone(),
            StatusCode::UNAUTHORIZED,
            "invalid_signature",
        ),
        (
            with_header(&headers, "Stripe-Signature", "t=1780315200"),
            body.clone(),
            StatusCode::UNAUTHORIZED,
            "invalid_signature",
        ),
        (
            with_header(&headers, "Stripe-Signature", "v1=abcd"),
            body.clone(),
            StatusCode::BAD_REQUEST,
            "malformed_request",
        ),
        (
            with_header(&headers, "Stripe-Signature", "t=soon,v1=abcd"),
            body.clone(),
            StatusCode::BAD_REQUEST,
            "malformed_request",
        ),
    ];
    for (i, (hdrs, b, status, code)) in cases.into_iter().enumerate() {
        let r = h.post(&path, &hdrs, b).await;
        assert_eq!((r.status, r.json), (status, error(code)), "case {i}");
    }
    // A verified request whose event id cannot be found is malformed, never a 5xx.
    let no_id = r#"{"type":"invoice.paid"}"#;
    let r = h.send("t/stripe", no_id, opts()).await;
    assert_eq!(
        (r.status, r.json),
        (StatusCode::BAD_REQUEST, error("malformed_request"))
    );
    assert_nothing_written(&h).await;
    let metrics = h.metrics.encode();
    assert!(
        metrics.contains(r#"reason="signature_mismatch""#),
        "{metrics}"
    );
    assert!(
        !metrics.contains(&headers[0].1),
        "metrics must not echo signatures"
    );
}

#[sqlx::test(migrations = "migrations/postgres")]
async fn unknown_route_and_wrong_method(pool: PgPool) {
    let h = harness(Inbox::Postgres(pool));
    let r = h.post("/hooks/t/nope", &[], "{}").await;
    assert_eq!(
        (r.status, r.json),
        (StatusCode::NOT_FOUND, error("unknown_route"))
    );
    let r = h
        .call(Request::get("/hooks/t/stripe").body(Body::empty()).unwrap())
        .await;
    assert_eq!(
        (r.status, r.json),
        (StatusCode::METHOD_NOT_ALLOWED, error("method_not_allowed"))
    );
    assert_eq!(r.headers["allow"], "POST");
}

#[sqlx::test(migrations = "migrations/postgres")]
async fn body_limit_applies_with_and_without_content_length(pool: PgPool) {
    let h = harness(Inbox::Postgres(pool));
    let at_limit = format!(r#"{{"id":"e1","pad":"{}"}}"#, "x".repeat(64 - 20));
    assert_eq!(at_limit.len(), 64);
    let r = h.send("t/limited", &at_limit, opts()).await;
    assert_eq!(r.json, accepted());

    let over = format!(r#"{{"id":"e2","pad":"{}"}}"#, "x".repeat(64 - 19));
    let (path, headers) = h.sign("t/limited", &over, opts());
    let r = h.post(&path, &headers, over.clone()).await;
    assert_eq!(
        (r.status, r.json),
        (StatusCode::PAYLOAD_TOO_LARGE, error("body_too_large"))
    );
    // Chunked: no Content-Length to reject early, the limit still holds while reading.
    let stream = futures::stream::iter(vec![Ok::<_, std::io::Error>(over.into_bytes())]);
    let mut req = Request::post(&path);
    for (k, v) in &headers {
        req = req.header(k, v);
    }
    let r = h.call(req.body(Body::from_stream(stream)).unwrap()).await;
    assert_eq!(
        (r.status, r.json),
        (StatusCode::PAYLOAD_TOO_LARGE, error("body_too_large"))
    );
    assert_eq!(h.receiver.inbox().counts().await.unwrap().0, 1);
}

/// t/limited allows 1 verified request per second with a burst of 2. The limiter runs on the
/// wall clock, so nothing here depends on how fast this machine is: the burst passes whatever the
/// speed, a request past it is refused unless the clock has refilled a token (at most one more
/// per elapsed second, the exact bound), and once `Retry-After` has passed a request is accepted.
#[sqlx::test(migrations = "migrations/postgres")]
async fn rate_limit_answers_429_with_retry_after(pool: PgPool) {
    let h = harness(Inbox::Postgres(pool));
    let start = std::time::Instant::now();
    let mut accepted_ids: i64 = 0;
    let limited = loop {
        assert!(accepted_ids < 1000, "no 429 after {accepted_ids} requests");
        let r = h
            .send(
                "t/limited",
                &format!(r#"{{"id":"r{accepted_ids}"}}"#),
                opts(),
            )
            .await;
        match r.status {
            StatusCode::OK => accepted_ids += 1,
            StatusCode::TOO_MANY_REQUESTS => break r,
            other => panic!("{other}: {}", r.json),
        }
    };
    let elapsed = start.elapsed();
    assert!(accepted_ids >= 2, "the burst of 2 always passes");
    // The limiter's clock (quanta) is calibrated against the one measuring here: 1 % slack for
    // that, never for speed.
    let refills = (accepted_ids - 2) as f64;
    assert!(
        refills <= elapsed.as_secs_f64() * 1.01 + 0.01,
        "{accepted_ids} accepted in {elapsed:?}: more than the burst plus one per second"
    );
    assert_eq!(limited.json, error("rate_limited"));
    // The next token is less than a second away at 1 per second, rounded up to whole seconds.
    assert_eq!(limited.headers["retry-after"], "1");
    assert_eq!(
        h.receiver.inbox().counts().await.unwrap().0,
        accepted_ids,
        "a 429 writes nothing"
    );
    // Waiting as told (plus a little, for the two clocks) is enough.
    tokio::time::sleep(std::time::Duration::from_millis(1050)).await;
    let r = h.send("t/limited", r#"{"id":"after-wait"}"#, opts()).await;
    assert_eq!((r.status, r.json), (StatusCode::OK, accepted()));
}

/// The store fails in the middle of the transaction (after the nonce insert): the client gets 503
/// with Retry-After and no part of the attempt survives, so a retry later is a new event.
#[sqlx::test(migrations = "migrations/postgres")]
async fn store_failure_is_503_and_nothing_half_written(pool: PgPool) {
    sqlx::raw_sql(
        "CREATE FUNCTION fail_insert() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'disk on fire'; END $$;
         CREATE TRIGGER fail BEFORE INSERT ON inbox_events FOR EACH ROW EXECUTE FUNCTION fail_insert();",
    )
    .execute(&pool)
    .await
    .unwrap();
    let h = harness(Inbox::Postgres(pool.clone()));
    // GitHub ids are unsigned, so the signature digest is written before the event fails.
    let body = r#"{"ref":"refs/heads/down"}"#.to_string();
    let sent = hookgate::cli::send::SendOptions {
        event_id: Some("delivery-down".into()),
        event_type: Some("push".into()),
        ..opts()
    };
    let (path, headers) = h.sign("t/github", &body, sent);
    let r = h.post(&path, &headers, body.clone()).await;
    assert_eq!(
        (r.status, r.json),
        (StatusCode::SERVICE_UNAVAILABLE, error("inbox_unavailable"))
    );
    assert_eq!(r.headers["retry-after"], "5");
    assert_nothing_written(&h).await;

    sqlx::raw_sql("DROP TRIGGER fail ON inbox_events")
        .execute(&pool)
        .await
        .unwrap();
    let r = h.post(&path, &headers, body).await;
    assert_eq!(
        r.json,
        accepted(),
        "the provider's retry is a new event, not a replay"
    );
}

/// A closed pool (database gone) is a 503, not a hang and not a 2xx.
#[sqlx::test(migrations = "migrations/postgres")]
async fn unreachable_store_is_503(pool: PgPool) {
    let h = harness(Inbox::Postgres(pool.clone()));
    pool.close().await;
    let r = h
        .send("t/stripe", &stripe_body("evt_gone", "invoice.paid"), opts())
        .await;
    assert_eq!(
        (r.status, r.json),
        (StatusCode::SERVICE_UNAVAILABLE, error("inbox_unavailable"))
    );
}

/// Signature headers and credentials are not kept with the event.
#[sqlx::test(migrations = "migrations/postgres")]
async fn stored_headers_exclude_signatures_and_credentials(pool: PgPool) {
    let h = harness(Inbox::Postgres(pool.clone()));
    let body = stripe_body("evt_hdr", "invoice.paid");
    let (path, mut headers) = h.sign("t/stripe", &body, opts());
    headers.push(("Authorization".into(), "Bearer secret-token".into()));
    headers.push(("X-Request-Id".into(), "req-42".into()));
    assert_eq!(h.post(&path, &headers, body).await.json, accepted());
    let stored: serde_json::Value = sqlx::query_scalar("SELECT headers FROM inbox_events")
        .fetch_one(&pool)
        .await
        .unwrap();
    let text = stored.to_string();
    assert!(text.contains("req-42"), "{text}");
    assert!(
        !text.contains("stripe-signature") && !text.contains("secret-token"),
        "{text}"
    );
}

/// A client that never finishes its body gets 408 instead of holding a connection forever.
#[sqlx::test(migrations = "migrations/postgres")]
async fn slow_body_times_out_with_408(pool: PgPool) {
    let mut h = harness(Inbox::Postgres(pool));
    h.receiver = h
        .receiver
        .clone()
        .with_body_timeout(std::time::Duration::from_millis(200));
    let (path, headers) = h.sign("t/stripe", "{}", opts());
    let stream = futures::stream::once(async { Ok::<_, std::io::Error>(b"{".to_vec()) })
        .chain(futures::stream::pending());
    let mut req = Request::post(&path);
    for (k, v) in &headers {
        req = req.header(k, v);
    }
    let r = h.call(req.body(Body::from_stream(stream)).unwrap()).await;
    assert_eq!(
        (r.status, r.json),
        (StatusCode::REQUEST_TIMEOUT, error("request_timeout"))
    );
    assert_nothing_written(&h).await;
}

/// Ids and types the store cannot hold as text are a bad request (400), never a 503.
#[sqlx::test(migrations = "migrations/postgres")]
async fn unstorable_event_ids_and_types_are_400(pool: PgPool) {
    let h = harness(Inbox::Postgres(pool));
    let long = "x".repeat(513);
    for body in [
        r#"{"id":"evt\u0000nul","type":"invoice.paid"}"#.to_string(),
        r#"{"id":"evt_ok","type":"invoice.\u0000"}"#.to_string(),
        format!(r#"{{"id":"{long}","type":"invoice.paid"}}"#),
        r#"{"id":"","type":"invoice.paid"}"#.to_string(),
        r#"{"id":{"nested":1},"type":"invoice.paid"}"#.to_string(),
        "not json".to_string(),
    ] {
        let r = h.send("t/stripe", &body, opts()).await;
        assert_eq!(
            (r.status, r.json),
            (StatusCode::BAD_REQUEST, error("malformed_request")),
            "{body}"
        );
    }
    assert_nothing_written(&h).await;
    let ok = format!(r#"{{"id":"{}","type":"invoice.paid"}}"#, "x".repeat(512));
    assert_eq!(h.send("t/stripe", &ok, opts()).await.json, accepted());
}
