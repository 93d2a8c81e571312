//! Connections the server closed. The PostgreSQL pool does not ping a connection before each use
//! (that was a round trip ahead of every batch), so a dead connection is found by the statement
//! that uses it: that batch's requests get a 503 at most, never a hang, a 2xx for an event that
//! was not stored, or a receiver that stays broken.

use crate::common::procs::{drop_database, fresh_database};
use crate::common::*;
use futures::future::join_all;
use hookgate::inbox::Inbox;
use sqlx::{Connection, PgConnection};
use std::time::{Duration, Instant};

/// Ends every server process of `database` but the caller's, and waits until none is left. The
/// receiver's notifier can open a connection just after the first round (its last notification
/// goes out up to 10 ms after the request that asked for it), so later rounds end those too.
async fn terminate_connections(admin_url: &str, database: &str) -> i64 {
    let mut admin = PgConnection::connect(admin_url).await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut ended = std::collections::HashSet::new();
    loop {
        // pg_terminate_backend only signals; a process is gone when pg_stat_activity drops it.
        let left: Vec<i32> = sqlx::query_scalar(
            "SELECT pid FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()",
        )
        .bind(database)
        .fetch_all(&mut admin)
        .await
        .unwrap();
        if left.is_empty() {
            return ended.len() as i64;
        }
        assert!(
            Instant::now() < deadline,
            "connections still open: {left:?}"
        );
        for pid in left {
            if ended.insert(pid) {
                sqlx::query("SELECT pg_terminate_backend($1)")
                    .bind(pid)
                    .execute(&mut admin)
                    .await
                    .unwrap();
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn connections_the_server_closed_cost_a_503_at_most_and_the_receiver_recovers() {
    let Some((admin_url, url)) = fresh_database().await else {
        skip_or_fail("DATABASE_URL is not set");
        return;
    };
    let database = reqwest::Url::parse(&url).unwrap().path()[1..].to_string();
    let inbox = Inbox::connect(&url).await.unwrap();
    inbox.migrate().await.unwrap();
    let h = harness(inbox);

    // Several pooled connections, open and idle.
    let bodies: Vec<String> = (0..16)
        .map(|i| stripe_body(&format!("evt_warm_{i}"), "invoice.paid"))
        .collect();
    let warm = join_all(bodies.iter().map(|b| h.send("t/stripe", b, opts()))).await;
    let warm: Vec<u16> = warm.iter().map(|r| r.status.as_u16()).collect();
    assert!(warm.iter().all(|&s| s == 200), "{warm:?}");

    let ended = terminate_connections(&admin_url, &database).await;
    assert!(ended >= 1, "the pool held no connection to end");

    let mut accepted_after = 0;
    let mut refused = 0;
    let mut statuses = Vec::new();
    for i in 0..40 {
        let body = stripe_body(&format!("evt_after_{i}"), "invoice.paid");
        let r = tokio::time::timeout(Duration::from_secs(30), h.send("t/stripe", &body, opts()))
            .await
            .expect("a request hung on a closed connection");
        statuses.push(r.status.as_u16());
        match r.status.as_u16() {
            200 => {
                assert_eq!(r.json, accepted());
                accepted_after += 1;
            }
            503 => {
                assert_eq!(r.json, error("inbox_unavailable"));
                refused += 1;
            }
            other => panic!("request {i}: {other} {}", r.json),
        }
    }
    println!("{ended} connections ended; then {statuses:?}");
    // Each dead connection fails at most the one batch that used it, and is then discarded.
    assert!(
        refused <= ended,
        "{refused} refusals for {ended} closed connections: {statuses:?}"
    );
    assert!(
        statuses[statuses.len() - 10..].iter().all(|&s| s == 200),
        "not recovered: {statuses:?}"
    );
    let (stored, _) = h.receiver.inbox().counts().await.unwrap();
    assert_eq!(stored, 16 + accepted_after, "every 200 is stored");
    h.receiver.inbox().close().await;
    drop_database(&admin_url, &url).await;
}

/// The receiver's batch writer and the workers' completion writer keep their connections between
/// statements; closing the inbox (shutdown) must not wait for them.
#[tokio::test]
async fn closing_the_inbox_does_not_wait_for_the_connections_batch_writers_keep() {
    let Some((admin_url, url)) = fresh_database().await else {
        skip_or_fail("DATABASE_URL is not set");
        return;
    };
    let inbox = Inbox::connect(&url).await.unwrap();
    inbox.migrate().await.unwrap();
    let h = harness(inbox.clone());
    let sent = h
        .send("t/stripe", &stripe_body("evt_kept", "invoice.paid"), opts())
        .await;
    assert_eq!(sent.json, accepted());
    let worker = hookgate::worker::Worker::new(
        inbox.clone(),
        hookgate::worker::targets(&h.receiver.routes()),
        Default::default(),
        h.metrics.clone(),
    );
    // The destination refuses connections: the attempt is written as a retry by the completer.
    assert_eq!(worker.run_once().await.unwrap(), 1);
    let (events, _) = inbox.counts().await.unwrap();
    assert_eq!(events, 1);

    tokio::time::timeout(Duration::from_secs(10), inbox.close())
        .await
        .expect("closing the inbox waited for connections kept by the batch writers");
    drop_database(&admin_url, &url).await;
}
