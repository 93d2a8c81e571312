//! How long the workers' transactions took, as `/metrics` shows them:
//! `hookgate_claim_duration_seconds` (each claim statement), `hookgate_completion_commit_duration_seconds`
//! (each transaction that records outcomes, by `transaction`: `batch` or `single`) and
//! `hookgate_completion_batch_size` (PostgreSQL's batched completions).

use super::Setup;
use crate::common::timing::{held_lock, under};
use hookgate::inbox::Inbox;
use hookgate::metrics::counter_sum;
use sqlx::PgPool;
use std::time::Duration;

const CLAIMS: &str = "hookgate_claim_duration_seconds";
const COMPLETIONS: &str = "hookgate_completion_commit_duration_seconds";
const BATCHES: &str = "hookgate_completion_batch_size";

/// The count of the completion transactions labelled `transaction` (`None`: no such series).
fn completions_of(text: &str, transaction: &str) -> Option<f64> {
    let series = format!("{COMPLETIONS}_count{{transaction=\"{transaction}\"}}");
    text.contains(&format!("{series} "))
        .then(|| counter_sum(text, &series))
}

/// Three events claimed at once and delivered one after another: one claim timed, and each
/// completion transaction timed once; on PostgreSQL each is a batch whose size is counted, on
/// SQLite each completion has a transaction of its own and no batch.
async fn each_claim_and_completion_transaction_is_timed(inbox: Inbox) {
    let batched = matches!(inbox, Inbox::Postgres(_));
    let s = Setup::new(inbox).await;
    for id in ["t-1", "t-2", "t-3"] {
        s.event("w/orders", id, "{}").await;
    }
    assert_eq!(s.worker().run_once().await.unwrap(), 3);

    let text = s.metrics.encode();
    let sum = |name: &str| counter_sum(&text, name);
    assert_eq!(sum(&format!("{CLAIMS}_count")), 1.0, "one claim:\n{text}");
    assert!(sum(&format!("{CLAIMS}_sum")) > 0.0);
    let completions = sum(&format!("{COMPLETIONS}_count"));
    if batched {
        assert_eq!(
            sum(&format!("{BATCHES}_sum")),
            3.0,
            "three outcomes batched"
        );
        assert_eq!(
            completions,
            sum(&format!("{BATCHES}_count")),
            "each batch whose size was counted was timed once"
        );
        assert_eq!(completions_of(&text, "batch"), Some(completions), "{text}");
        assert_eq!(completions_of(&text, "single"), Some(0.0), "{text}");
    } else {
        assert_eq!(completions, 3.0, "one transaction per outcome");
        assert_eq!(sum(&format!("{BATCHES}_count")), 0.0, "no batches");
        assert_eq!(completions_of(&text, "single"), Some(3.0), "{text}");
        assert_eq!(completions_of(&text, "batch"), Some(0.0), "{text}");
    }
}

/// On PostgreSQL an event that passes an ordering gate is completed in a transaction of its own
/// (its version is written with it), and is timed as `single`, apart from the batch of an
/// unordered event delivered beside it.
#[sqlx::test(migrations = "migrations/postgres")]
async fn an_ordered_completion_is_timed_apart_from_the_batches(pool: PgPool) {
    let s = Setup::new(Inbox::Postgres(pool)).await;
    s.event("w/orders", "plain", "{}").await;
    let versioned = r#"{"data":{"id":"res-1","version":3}}"#;
    s.event("w/ordered", "versioned", versioned).await;
    assert_eq!(s.worker().run_once().await.unwrap(), 2);

    let text = s.metrics.encode();
    assert_eq!(completions_of(&text, "single"), Some(1.0), "{text}");
    assert_eq!(completions_of(&text, "batch"), Some(1.0), "{text}");
    assert_eq!(counter_sum(&text, &format!("{BATCHES}_sum")), 1.0, "{text}");
}

on_both_backends!(each_claim_and_completion_transaction_is_timed);

/// One event delivered by `run_once` while another session holds `lock` for 300 ms once the
/// worker waits for it; the worker's metrics afterwards.
async fn delivered_beside_a_held_lock(pool: PgPool, lock: &'static str) -> String {
    let s = Setup::new(Inbox::Postgres(pool.clone())).await;
    s.event("w/orders", "held", "{}").await;
    let release = held_lock(&pool, lock, Duration::from_millis(300)).await;
    let worker = s.worker();
    let (delivered, ()) = tokio::join!(worker.run_once(), release);
    assert_eq!(delivered.unwrap(), 1);
    s.metrics.encode()
}

/// A claim held 300 ms by another session's lock on the inbox is timed above 256 ms: the time is
/// taken around the statement, not after it.
#[sqlx::test(migrations = "migrations/postgres")]
async fn a_claim_held_by_a_lock_is_timed_whole(pool: PgPool) {
    let text =
        delivered_beside_a_held_lock(pool, "LOCK TABLE inbox_events IN EXCLUSIVE MODE").await;
    assert_eq!(under(&text, CLAIMS, 0.3), (0.0, 1.0), "{text}");
}

/// A completion held 300 ms by a lock on the attempts' table (which the claim does not touch) is
/// timed above 256 ms, and its batch counted once.
#[sqlx::test(migrations = "migrations/postgres")]
async fn a_completion_held_by_a_lock_is_timed_whole(pool: PgPool) {
    let lock = "LOCK TABLE delivery_attempts IN EXCLUSIVE MODE";
    let text = delivered_beside_a_held_lock(pool, lock).await;
    assert_eq!(under(&text, COMPLETIONS, 0.3), (0.0, 1.0), "{text}");
    assert_eq!(counter_sum(&text, &format!("{BATCHES}_count")), 1.0);
}
