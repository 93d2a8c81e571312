//! A quiet integration's event handed over while another integration's deliveries hold the
//! pool's slots (PostgreSQL: a lock on `delivery_attempts` holds every outcome, which is how the
//! slots come back before the tasks that held them end).

use crate::common::destination::Answer;
use crate::handoff::{pool_with_handoff, stored};
use crate::worker::{bulk_and_orders, bulk_answers_while_one_hangs};
use hookgate::inbox::Inbox;
use std::time::Duration;

/// Eight slots. Seven of `w/bulk`'s deliveries hang and an eighth answers while every outcome
/// waits on a lock: one slot is free, and the deliveries that held the others are still running.
/// `w/orders`'s event, handed over meanwhile, takes that slot. (Until round 35 it waited for a
/// quarter of the slots, two, which a claim waits for: here, until the lock went.)
#[sqlx::test(migrations = "migrations/postgres")]
async fn a_handed_event_takes_the_first_slot_that_comes_back(pool: sqlx::PgPool) {
    let (mut s, bulk) = bulk_and_orders(Inbox::Postgres(pool.clone())).await;
    let w = pool_with_handoff(&mut s, 8);
    let running = crate::common::running::start([w]);
    s.past_empty_claims(1).await;
    bulk_answers_while_one_hangs(&s, &bulk).await;
    wait_processed(&pool, &["b-0", "b-2"]).await;

    let mut blocker = pool.begin().await.unwrap();
    sqlx::raw_sql("LOCK TABLE delivery_attempts IN EXCLUSIVE MODE")
        .execute(&mut *blocker)
        .await
        .unwrap();
    bulk.script((0..6).map(|_| Answer::Hang));
    bulk.always(Answer::After(Duration::from_millis(300)));
    for i in 3..10 {
        s.event("w/bulk", &format!("b-{i}"), "{}").await;
    }
    assert_eq!(
        bulk.wait_for(10, Duration::from_secs(10)).await.len(),
        10,
        "w/bulk holds every slot"
    );
    s.event("w/orders", "o-0", "{}").await;
    let got = s.dest.wait_for(1, Duration::from_secs(5)).await.len();
    blocker.rollback().await.unwrap();
    running.stop().await;
    assert_eq!(got, 1, "w/orders's event took the slot b-9's answer freed");
}

async fn wait_processed(pool: &sqlx::PgPool, ids: &[&str]) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    for id in ids {
        loop {
            let status: String =
                sqlx::query_scalar("SELECT status FROM inbox_events WHERE event_id = $1")
                    .bind(id)
                    .fetch_one(pool)
                    .await
                    .unwrap();
            if status == "processed" {
                break;
            }
            assert!(tokio::time::Instant::now() < deadline, "{id} not processed");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// One slot, held by `w/bulk`'s delivery that never answers; three more of its events are held
/// for it. After a second without a take, `w/bulk`'s next is stored for a claim, but `w/orders`'s
/// is still held: the slots' worth held whatever the pool's pace is each integration's. (Until
/// round 35 it was every integration's together, and `w/orders`'s event waited for a claim.)
async fn past_a_backlogs_slots_another_integrations_event_is_still_handed_over(inbox: Inbox) {
    let (mut s, bulk) = bulk_and_orders(inbox).await;
    bulk.always(Answer::Hang);
    let w = pool_with_handoff(&mut s, 1);
    let running = crate::common::running::start([w]);
    s.past_empty_claims(1).await;
    s.event("w/bulk", "b-0", "{}").await;
    bulk.wait_for(1, Duration::from_secs(10)).await;
    for id in ["b-1", "b-2", "b-3"] {
        s.event("w/bulk", id, "{}").await;
    }
    tokio::time::sleep(Duration::from_millis(1200)).await;
    s.event("w/bulk", "b-4", "{}").await;
    s.event("w/orders", "o-0", "{}").await;
    let (bulk_next, orders_next) = (stored(&s, "b-4").await.0, stored(&s, "o-0").await.0);
    tokio::time::timeout(Duration::from_secs(30), running.stop())
        .await
        .expect("the pool stops within its grace and the database deadline");
    assert_eq!(
        (bulk_next.as_str(), orders_next.as_str()),
        ("pending", "processing"),
        "w/bulk's next stored for a claim, w/orders's handed over"
    );
}

on_both_backends!(past_a_backlogs_slots_another_integrations_event_is_still_handed_over);
