//! The receiver's memory of the keys it committed (`--dedupe-cache-mib`): a provider's retry of
//! a committed event is answered as a duplicate without the database, and everything the memory
//! cannot answer for still reaches the inbox.

use crate::common::procs::{drop_database, fresh_database};
use crate::common::*;
use hookgate::cli::send::SendOptions;
use hookgate::inbox::Inbox;
use sqlx::PgPool;
use std::time::Duration;

/// A counter of the receiver's metrics (without labels, or summed over them).
fn counter(h: &Harness, name: &str) -> f64 {
    hookgate::metrics::counter_sum(&h.metrics.encode(), name)
}

#[sqlx::test(migrations = "migrations/postgres")]
async fn a_retry_is_answered_from_memory_while_the_inbox_is_locked(pool: PgPool) {
    let h = harness(Inbox::Postgres(pool.clone()));
    await_dedupe_memory(&h).await;
    let body = stripe_body("evt_mem", "invoice.paid");
    assert_eq!(h.send("t/stripe", &body, opts()).await.json, accepted());

    let lock = lock_inbox(&pool).await;
    let retry = tokio::time::timeout(Duration::from_secs(5), h.send("t/stripe", &body, opts()))
        .await
        .expect("answered while the inbox is locked");
    assert_eq!(retry.json, duplicate());
    lock.rollback().await.unwrap();

    assert_eq!(counter(&h, "hookgate_duplicates_remembered_total"), 1.0);
    assert_eq!(counter(&h, "hookgate_duplicates_total"), 1.0);
    let rows: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM inbox_events")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(rows, 1);
}

#[sqlx::test(migrations = "migrations/postgres")]
async fn without_the_memory_a_retry_waits_for_the_inbox(pool: PgPool) {
    let mut h = harness(Inbox::Postgres(pool.clone()));
    without_dedupe_memory(&mut h);
    let body = stripe_body("evt_db", "invoice.paid");
    assert_eq!(h.send("t/stripe", &body, opts()).await.json, accepted());

    let lock = lock_inbox(&pool).await;
    let retry = h.send("t/stripe", &body, opts());
    tokio::pin!(retry);
    // Still waiting on the lock after 300 ms: the database is asked.
    let early = tokio::time::timeout(Duration::from_millis(300), &mut retry).await;
    assert!(early.is_err(), "answered without the database");
    lock.rollback().await.unwrap();
    assert_eq!(retry.await.json, duplicate());
    assert_eq!(counter(&h, "hookgate_duplicates_remembered_total"), 0.0);
    assert_eq!(counter(&h, "hookgate_duplicates_total"), 1.0);
}

#[sqlx::test(migrations = "migrations/postgres")]
async fn a_known_id_with_another_body_still_reaches_the_inbox(pool: PgPool) {
    let h = harness(Inbox::Postgres(pool.clone()));
    await_dedupe_memory(&h).await;
    let first = stripe_body("evt_conflict", "invoice.paid");
    assert_eq!(h.send("t/stripe", &first, opts()).await.json, accepted());
    let other = first.replace("invoice.paid", "invoice.created");
    // Answered as a duplicate, as the inbox does, and counted there as a conflict.
    assert_eq!(h.send("t/stripe", &other, opts()).await.json, duplicate());
    let conflicts: i64 = sqlx::query_scalar(
        "SELECT dedupe_conflicts FROM inbox_events WHERE event_id = 'evt_conflict'",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(conflicts, 1);
    assert_eq!(counter(&h, "hookgate_dedupe_conflicts_total"), 1.0);
    assert_eq!(counter(&h, "hookgate_duplicates_remembered_total"), 0.0);
    // The first body is still the one remembered.
    assert_eq!(h.send("t/stripe", &first, opts()).await.json, duplicate());
    assert_eq!(counter(&h, "hookgate_duplicates_remembered_total"), 1.0);
}

/// GitHub signs the body but not the delivery id: a re-sent capture is a replay only the
/// inbox's record of signature digests can tell.
#[sqlx::test(migrations = "migrations/postgres")]
async fn an_event_whose_id_is_not_signed_is_left_to_the_inbox(pool: PgPool) {
    let h = harness(Inbox::Postgres(pool.clone()));
    await_dedupe_memory(&h).await;
    let body = r#"{"action":"opened"}"#;
    let sent = SendOptions {
        event_id: Some("delivery-1".into()),
        ..opts()
    };
    let (path, headers) = h.sign("t/github", body, sent);
    assert_eq!(h.post(&path, &headers, body).await.json, accepted());
    assert_eq!(h.post(&path, &headers, body).await.json, duplicate());
    assert_eq!(counter(&h, "hookgate_duplicates_remembered_total"), 0.0);
    assert_eq!(counter(&h, "hookgate_duplicates_total"), 1.0);
}

#[tokio::test]
async fn retries_are_answered_from_memory_on_sqlite_too() {
    let (_dir, inbox) = sqlite_inbox().await;
    let h = harness(inbox);
    await_dedupe_memory(&h).await;
    for i in 0..3 {
        let body = stripe_body(&format!("evt_{i}"), "invoice.paid");
        assert_eq!(h.send("t/stripe", &body, opts()).await.json, accepted());
        assert_eq!(h.send("t/stripe", &body, opts()).await.json, duplicate());
        assert_eq!(h.send("t/stripe", &body, opts()).await.json, duplicate());
    }
    assert_eq!(counter(&h, "hookgate_duplicates_remembered_total"), 6.0);
    assert_eq!(counter(&h, "hookgate_duplicates_total"), 6.0);
}

/// Sends two events and gets their retries answered from memory, dead-letters one and purges it
/// with `hookgate dlq purge` on `url`: once the command has returned, a re-send of it is a new
/// event, not a duplicate of a row that is gone, and the other's retry is still answered from
/// memory (a purge forgets the keys it deleted, not the rest).
async fn a_purged_dead_letter_is_new_again(h: &Harness, inbox: &Inbox, url: &str) {
    await_dedupe_memory(h).await;
    let purged = stripe_body("evt_purged", "invoice.paid");
    let kept = stripe_body("evt_kept", "invoice.paid");
    for body in [&purged, &kept] {
        assert_eq!(h.send("t/stripe", body, opts()).await.json, accepted());
        assert_eq!(h.send("t/stripe", body, opts()).await.json, duplicate());
    }
    assert_eq!(counter(h, "hookgate_duplicates_remembered_total"), 2.0);
    dead_letter(inbox, "evt_purged").await;

    let purge = hookgate::cli::dlq::DlqCommand::Purge {
        database_url: url.to_string(),
        selection: hookgate::cli::dlq::Selection {
            all: true,
            ..Default::default()
        },
        dry_run: false,
    };
    hookgate::cli::dlq::run_as(purge, &tester()).await.unwrap();

    assert_eq!(h.send("t/stripe", &purged, opts()).await.json, accepted());
    assert_eq!(h.send("t/stripe", &purged, opts()).await.json, duplicate());
    let (rows, status) = stored(inbox, "evt_purged").await;
    assert_eq!((rows, status.as_str()), (1, "pending"));
    assert_eq!(h.send("t/stripe", &kept, opts()).await.json, duplicate());
    // The two before the purge, the re-sent event's own retry, and the kept one's.
    assert_eq!(counter(h, "hookgate_duplicates_remembered_total"), 4.0);
}

/// The event dead-lettered, as a worker leaves one whose attempts ran out.
async fn dead_letter(inbox: &Inbox, event_id: &str) {
    let sql = "UPDATE inbox_events SET status = 'dead_letter', locked_until = NULL \
               WHERE event_id = $1";
    on!(inbox, pool => sqlx::query(sql).bind(event_id).execute(pool).await.map(drop)).unwrap();
}

/// How many rows the inbox holds of `event_id`, and the status of one.
async fn stored(inbox: &Inbox, event_id: &str) -> (i64, String) {
    let sql = "SELECT COUNT(*), MAX(status) FROM inbox_events WHERE event_id = $1";
    match inbox {
        Inbox::Postgres(pool) => sqlx::query_as(sql).bind(event_id).fetch_one(pool).await,
        Inbox::Sqlite(pool) => sqlx::query_as(sql).bind(event_id).fetch_one(pool).await,
    }
    .unwrap()
}

#[tokio::test]
async fn a_purged_dead_letter_is_new_again_on_postgres() {
    let Some((admin, url)) = fresh_database().await else {
        return;
    };
    let inbox = Inbox::connect(&url).await.unwrap();
    inbox.migrate().await.unwrap();
    let h = harness(inbox.clone());
    a_purged_dead_letter_is_new_again(&h, &inbox, &url).await;
    drop(h);
    inbox.close().await;
    drop_database(&admin, &url).await;
}

#[tokio::test]
async fn a_purged_dead_letter_is_new_again_on_sqlite() {
    let (_dir, url, inbox) = sqlite_inbox_named("inbox.db").await;
    let h = harness(inbox.clone());
    a_purged_dead_letter_is_new_again(&h, &inbox, &url).await;
}

/// The memory answers for at most half the dedupe retention in force when the retry comes: an
/// integration whose retention was shortened after the commit (the janitor may delete the row
/// sooner) sends the retry to the inbox.
#[sqlx::test(migrations = "migrations/postgres")]
async fn a_shortened_retention_shortens_what_the_memory_answers_for(pool: PgPool) {
    let h = harness(Inbox::Postgres(pool.clone()));
    await_dedupe_memory(&h).await;
    let body = stripe_body("evt_short", "invoice.paid");
    assert_eq!(h.send("t/stripe", &body, opts()).await.json, accepted());
    assert_eq!(h.send("t/stripe", &body, opts()).await.json, duplicate());
    assert_eq!(counter(&h, "hookgate_duplicates_remembered_total"), 1.0);

    let shorter = test_manifests().replace(
        "  events: {allow: [\"invoice.*\"]}\n",
        "  events: {allow: [\"invoice.*\"]}\n  retention: {dedupe: 2s}\n",
    );
    assert_ne!(shorter, test_manifests());
    h.receiver
        .swap_routes(load(&shorter).route_table().unwrap());
    tokio::time::sleep(Duration::from_millis(1100)).await;
    await_dedupe_memory(&h).await;
    assert_eq!(h.send("t/stripe", &body, opts()).await.json, duplicate());
    assert_eq!(counter(&h, "hookgate_duplicates_remembered_total"), 1.0);
    assert_eq!(counter(&h, "hookgate_duplicates_total"), 2.0);
}

/// The memory's use is published every second: the bytes it holds against its budget, and the
/// entries it dropped for room before their ttl (a budget that holds less than the ttl).
#[tokio::test]
async fn the_memory_publishes_what_it_holds_and_what_it_dropped_for_room() {
    let (_dir, inbox) = sqlite_inbox().await;
    let mut h = harness(inbox);
    // Room for two Stripe-sized keys (about 200 bytes each), not three.
    let budget = 500;
    with_dedupe_memory_of(&mut h, budget);
    await_dedupe_memory(&h).await;
    for i in 0..5 {
        let body = stripe_body(&format!("evt_room_{i}"), "invoice.paid");
        assert_eq!(h.send("t/stripe", &body, opts()).await.json, accepted());
    }
    let published = tokio::time::timeout(Duration::from_secs(5), async {
        while counter(&h, "hookgate_dedupe_cache_evicted_total") < 3.0 {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    });
    published.await.expect("three entries dropped for room");
    assert_eq!(counter(&h, "hookgate_dedupe_cache_evicted_total"), 3.0);
    let bytes = counter(&h, "hookgate_dedupe_cache_bytes");
    assert!(bytes > 0.0 && bytes <= budget as f64, "{bytes} bytes held");
}
