//! A transaction whose `BEGIN` is cancelled (a statement deadline, `inbox::within`; or a task
//! aborted while it starts one, as a stopping worker aborts its retention janitor) must not leave
//! its pooled connection inside that transaction. With sqlx 0.9.0 it did (launchbadge/sqlx#4393,
//! fixed in 0.9.1): the pool handed the connection on, and the next statement on it, however
//! autocommit, ran inside the stale transaction, held its row locks and was never committed. CI
//! caught it as a stopping worker whose released claim read back as still `processing`.

use crate::common::*;
use chrono::{Duration, Utc};
use futures::FutureExt;
use hookgate::inbox::Inbox;
use sqlx::PgPool;
use sqlx::postgres::PgPoolOptions;

#[sqlx::test(migrations = "migrations/postgres")]
async fn a_write_on_the_connection_of_a_cancelled_begin_is_committed(pool: PgPool) {
    let body = stripe_body("evt_cancelled_begin", "invoice.paid");
    let h = harness(Inbox::Postgres(pool.clone()));
    let (path, headers) = h.sign("t/stripe", &body, opts());
    let stored = h.post(&path, &headers, body).await;
    assert!(stored.status.is_success(), "{}", stored.json);

    // One connection, so that the release below runs on the one whose BEGIN was cancelled.
    let one = PgPoolOptions::new()
        .max_connections(1)
        .connect_with((*pool.connect_options()).clone())
        .await
        .unwrap();
    let inbox = Inbox::Postgres(one.clone());
    let now = Utc::now();
    let claimed = inbox
        .claim(now, now + Duration::seconds(60), 10)
        .await
        .unwrap();
    assert_eq!(claimed.len(), 1);

    // BEGIN cancelled while it waits for the server's answer. A statement sent just before it and
    // left running (a second's sleep) holds that answer back, so the BEGIN is on the wire and
    // unanswered when it is dropped, however quickly a loaded machine would answer it alone (CI
    // once had the answer by the first poll).
    let mut conn = one.acquire().await.unwrap();
    // The simple protocol: sent by the first poll, where a prepared statement would first wait
    // for its Parse to be answered.
    let sleeping = sqlx::raw_sql("SELECT pg_sleep(1)")
        .execute(&mut *conn)
        .now_or_never()
        .is_some();
    assert!(!sleeping, "the sleep is still running");
    let answered = sqlx::Connection::begin(&mut *conn).now_or_never().is_some();
    assert!(
        !answered,
        "BEGIN waits behind the sleep for the server's answer: cancelled while it does"
    );
    drop(conn);

    assert!(inbox.release(&claimed[0], Utc::now()).await.unwrap());
    // Read on another connection: what was committed.
    let (status, attempts): (String, i64) =
        sqlx::query_as("SELECT status, attempts FROM inbox_events WHERE event_id = $1")
            .bind("evt_cancelled_begin")
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(
        (status.as_str(), attempts),
        ("pending", 0),
        "the release was committed, not left inside the cancelled transaction"
    );
}
