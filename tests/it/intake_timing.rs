//! How long the receiver's answers and its intake transactions took, as `/metrics` shows them:
//! `hookgate_receiver_request_duration_seconds` (2xx answers, per integration) and
//! `hookgate_intake_commit_duration_seconds` (one observation per transaction).

use crate::common::timing::{held_lock, under};
use crate::common::*;
use hookgate::inbox::Inbox;
use hookgate::metrics::counter_sum;
use std::time::Duration;

const ANSWERS: &str = "hookgate_receiver_request_duration_seconds";
const COMMITS: &str = "hookgate_intake_commit_duration_seconds";

/// A new event, its retry and a forged copy: the two 2xx answers are timed under their
/// integration, the 401 is not, and each transaction is timed once.
async fn two_xx_answers_and_each_transaction_are_timed(inbox: Inbox) {
    let h = harness(inbox);
    let body = stripe_body("evt_timed", "invoice.paid");
    assert_eq!(h.send("t/stripe", &body, opts()).await.json, accepted());
    assert_eq!(h.send("t/stripe", &body, opts()).await.json, duplicate());
    let (path, headers) = h.sign("t/stripe", &body, opts());
    let forged = h
        .post(&path, &headers, body.replace("paid", "voided"))
        .await;
    assert_eq!(forged.json, error("invalid_signature"));

    let text = h.metrics.encode();
    let count = |name: &str| counter_sum(&text, &format!("{name}_count"));
    assert_eq!(count(ANSWERS), 2.0, "the 2xx answers, not the 401");
    assert!(
        text.contains(&format!("{ANSWERS}_count{{integration=\"t/stripe\"}} 2")),
        "timed under its integration:\n{text}"
    );
    assert!(
        count(COMMITS) >= 1.0,
        "the new event's transaction was timed"
    );
    assert_eq!(
        count(COMMITS),
        count("hookgate_intake_batch_size"),
        "each transaction whose size was counted was timed once"
    );
    assert!(counter_sum(&text, &format!("{COMMITS}_sum")) > 0.0);
}

on_both_backends!(two_xx_answers_and_each_transaction_are_timed);

/// A transaction held 300 ms by another session's lock on the inbox shows in both histograms
/// above 256 ms: the time is taken around the commit, not around the hand-off to the batch.
#[sqlx::test(migrations = "migrations/postgres")]
async fn a_commit_held_by_a_lock_is_timed_whole(pool: sqlx::PgPool) {
    let h = harness(Inbox::Postgres(pool.clone()));
    let release_once_blocked = held_lock(
        &pool,
        "LOCK TABLE inbox_events IN EXCLUSIVE MODE",
        Duration::from_millis(300),
    )
    .await;
    let body = stripe_body("evt_held", "invoice.paid");
    let (reply, ()) = tokio::join!(h.send("t/stripe", &body, opts()), release_once_blocked);
    assert_eq!(reply.json, accepted());
    assert_eq!(
        under(&h.metrics.encode(), COMMITS, 0.3),
        (0.0, 1.0),
        "the commit waited 300 ms"
    );
    assert_eq!(
        under(&h.metrics.encode(), ANSWERS, 0.3),
        (0.0, 1.0),
        "so did its answer"
    );
}
