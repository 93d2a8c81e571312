//! A stalled database answers 503 within the deadline, never a hang: on the request path, and for
//! worker claims and completions. Real PostgreSQL, stalled by a lock held from another connection.

use crate::common::*;
use hookgate::inbox::{DbLimits, Inbox};
use sqlx::PgPool;
use std::time::{Duration, Instant};

/// What a hang looks like: the test gives up waiting long after any deadline.
const HANG: Duration = Duration::from_secs(60);

/// A bound on hanging, not a speed target: three times the whole deadline.
fn bound() -> Duration {
    DbLimits::default().deadline() * 3
}

#[sqlx::test(migrations = "migrations/postgres")]
async fn a_locked_inbox_is_503_within_the_deadline_then_recovers(pool: PgPool) {
    let h = harness(Inbox::Postgres(pool.clone()));
    let body = stripe_body("evt_locked", "invoice.paid");
    let (path, headers) = h.sign("t/stripe", &body, opts());
    let lock = lock_inbox(&pool).await;

    let start = Instant::now();
    let r = tokio::time::timeout(HANG, h.post(&path, &headers, body.clone()))
        .await
        .expect("the request hung on a locked inbox");
    let took = start.elapsed();
    println!(
        "locked inbox: {} {} after {took:?} (deadline {:?})",
        r.status,
        r.json,
        DbLimits::default().deadline()
    );
    assert_eq!(
        (r.status.as_u16(), &r.json),
        (503, &error("inbox_unavailable"))
    );
    assert_eq!(r.headers["retry-after"], "5");
    assert!(took < bound(), "answered after {took:?}");

    lock.rollback().await.unwrap();
    let r = h.post(&path, &headers, body).await;
    // The first attempt's statement was still queued on the lock when its request was answered
    // 503; once the lock goes it may commit before the provider's retry does (one run in ten
    // under load), and the retry is then a duplicate of it. Either way the retry is 200 and the
    // event is stored once: a 503 means "not known to be stored, send again".
    assert_eq!(r.status.as_u16(), 200, "{}", r.json);
    assert!(
        [accepted(), duplicate()].contains(&r.json),
        "not stored: {}",
        r.json
    );
    let rows: i64 =
        sqlx::query_scalar("SELECT COUNT(*) FROM inbox_events WHERE event_id = 'evt_locked'")
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(rows, 1);
}

#[sqlx::test(migrations = "migrations/postgres")]
async fn worker_claims_and_completions_give_up_within_the_deadline(pool: PgPool) {
    let h = harness(Inbox::Postgres(pool.clone()));
    let sent = h
        .send("t/stripe", &stripe_body("evt_w", "invoice.paid"), opts())
        .await;
    assert_eq!(sent.json, accepted());
    let targets = hookgate::worker::targets(&h.receiver.routes());
    let worker = hookgate::worker::Worker::new(
        h.receiver.inbox().clone(),
        targets,
        Default::default(),
        h.metrics.clone(),
    );

    // A claim against a locked inbox fails in time.
    let lock = lock_inbox(&pool).await;
    let start = Instant::now();
    let claimed = tokio::time::timeout(HANG, worker.run_once())
        .await
        .expect("the claim hung on a locked inbox");
    let took = start.elapsed();
    println!("locked claim: {claimed:?} after {took:?}");
    assert!(claimed.is_err(), "{claimed:?}");
    assert!(took < bound(), "gave up after {took:?}");
    lock.rollback().await.unwrap();

    // A completion against a locked inbox gives up in time too (the event returns after its lease).
    let now = chrono::Utc::now();
    let batch = h
        .receiver
        .inbox()
        .claim(now, now + chrono::Duration::seconds(60), 1)
        .await
        .unwrap();
    assert_eq!(batch.len(), 1);
    let lock = lock_inbox(&pool).await;
    let start = Instant::now();
    // The destination (127.0.0.1:1) refuses at once; recording the retry is what stalls.
    tokio::time::timeout(HANG, worker.deliver(&batch[0]))
        .await
        .expect("the completion hung on a locked inbox");
    let took = start.elapsed();
    println!("locked completion gave up after {took:?}");
    assert!(took < bound(), "gave up after {took:?}");
    lock.rollback().await.unwrap();
}

#[tokio::test]
async fn roles_connect_with_a_server_side_statement_timeout() {
    let Ok(url) = std::env::var("DATABASE_URL") else {
        skip_or_fail("DATABASE_URL is not set (a PostgreSQL superuser URL; tests/run.sh sets it)");
        return;
    };
    let limits = DbLimits {
        acquire_timeout: Duration::from_secs(2),
        statement_timeout: Duration::from_millis(1500),
        ..Default::default()
    };
    let inbox = Inbox::connect_with(&url, limits).await.unwrap();
    let Inbox::Postgres(pool) = &inbox else {
        panic!("a PostgreSQL URL")
    };
    let shown: String = sqlx::query_scalar("SHOW statement_timeout")
        .fetch_one(pool)
        .await
        .unwrap();
    assert_eq!(shown, "1500ms");
    // The server itself cancels a statement that runs past it.
    let err = sqlx::query("SELECT pg_sleep(5)")
        .execute(pool)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("statement timeout"), "{err}");
    inbox.close().await;
}
