//! Retention: purging the payloads of finished events and deleting finished events, on real
//! PostgreSQL (`#[sqlx::test]`) and on SQLite files.
//!
//! Fixture rows are written with plain SQL: the real insert path needs a verified request.

use chrono::{DateTime, Duration, Utc};
use hookgate::inbox::Inbox;
use serde_json::{Value, json};
use sha2::Digest;
use sqlx::Row;
use sqlx::types::Json;

use crate::common::t0;

fn days(d: i64) -> Duration {
    Duration::days(d)
}

/// One inbox row as the tests write it.
#[derive(Clone, Debug)]
struct Ev {
    integration: &'static str,
    event_id: &'static str,
    status: &'static str,
    body: Vec<u8>,
    received_at: DateTime<Utc>,
    processed_at: Option<DateTime<Utc>>,
    dead_lettered_at: Option<DateTime<Utc>>,
    body_purged_at: Option<DateTime<Utc>>,
}

/// A row of `integration` received `received_ago` before t0, still in `status`.
fn ev(
    integration: &'static str,
    event_id: &'static str,
    status: &'static str,
    received_ago: Duration,
) -> Ev {
    Ev {
        integration,
        event_id,
        status,
        body: format!("{{\"id\":\"{event_id}\"}}").into_bytes(),
        received_at: t0() - received_ago,
        processed_at: None,
        dead_lettered_at: None,
        body_purged_at: None,
    }
}

/// Received `received_ago` before t0 and finished (`processed` / `ignored`) `finished_ago` before.
fn finished(
    event_id: &'static str,
    status: &'static str,
    received_ago: Duration,
    finished_ago: Duration,
) -> Ev {
    Ev {
        processed_at: Some(t0() - finished_ago),
        ..ev("t/a", event_id, status, received_ago)
    }
}

const INSERT_EVENT: &str = "INSERT INTO inbox_events (integration, event_id, event_type, scheme, \
     key_id, headers, content_type, body, body_sha256, status, attempts, received_at, \
     processed_at, dead_lettered_at, body_purged_at) \
     VALUES ($1, $2, 'invoice.paid', 'stripe', 'v1', $3, 'application/json', $4, $5, $6, 1, $7, \
     $8, $9, $10) RETURNING id";

async fn insert(inbox: &Inbox, e: &Ev) -> i64 {
    let sha = sha2::Sha256::digest(&e.body).to_vec();
    let headers = json!([["content-type", "application/json"]]);
    on!(inbox, pool => {
        sqlx::query(INSERT_EVENT)
            .bind(e.integration)
            .bind(e.event_id)
            .bind(Json(&headers))
            .bind(&e.body)
            .bind(&sha)
            .bind(e.status)
            .bind(e.received_at)
            .bind(e.processed_at)
            .bind(e.dead_lettered_at)
            .bind(e.body_purged_at)
            .fetch_one(pool)
            .await
            .unwrap()
            .get::<i64, _>(0)
    })
}

async fn attempt(inbox: &Inbox, row: i64) {
    on!(inbox, pool => {
        sqlx::query(
            "INSERT INTO delivery_attempts (event_row, attempt, started_at, duration_ms, \
             status_code, error, outcome) VALUES ($1, 1, $2, 12, 200, NULL, 'processed')",
        )
        .bind(row)
        .bind(t0() - days(40))
        .execute(pool)
        .await
        .unwrap();
    })
}

/// What retention may change on a row: body, its hash, headers, body_purged_at, status.
#[derive(Debug, Clone, PartialEq)]
struct Stored {
    body: Vec<u8>,
    body_sha256: Vec<u8>,
    headers: Value,
    body_purged_at: Option<DateTime<Utc>>,
    status: String,
}

async fn stored(inbox: &Inbox, id: i64) -> Option<Stored> {
    const SQL: &str = "SELECT body, body_sha256, headers, body_purged_at, status \
         FROM inbox_events WHERE id = $1";
    on!(inbox, pool => {
        sqlx::query(SQL).bind(id).fetch_optional(pool).await.unwrap().map(|r| Stored {
            body: r.get("body"),
            body_sha256: r.get("body_sha256"),
            headers: r.get::<Json<Value>, _>("headers").0,
            body_purged_at: r.get("body_purged_at"),
            status: r.get("status"),
        })
    })
}

async fn event_rows(inbox: &Inbox) -> Vec<i64> {
    on!(inbox, pool => {
        sqlx::query("SELECT id FROM inbox_events ORDER BY id")
            .fetch_all(pool)
            .await
            .unwrap()
            .iter()
            .map(|r| r.get::<i64, _>(0))
            .collect()
    })
}

async fn attempt_rows(inbox: &Inbox) -> Vec<i64> {
    on!(inbox, pool => {
        sqlx::query("SELECT event_row FROM delivery_attempts ORDER BY id")
            .fetch_all(pool)
            .await
            .unwrap()
            .iter()
            .map(|r| r.get::<i64, _>(0))
            .collect()
    })
}

/// Every row the retention functions must leave alone, whatever the cutoff: unfinished, dead
/// letters, and another integration's old events. Returns their ids.
async fn never_touched(inbox: &Inbox) -> Vec<i64> {
    let mut ids = Vec::new();
    for status in ["pending", "processing", "retry"] {
        let event_id = match status {
            "pending" => "old-pending",
            "processing" => "old-processing",
            _ => "old-retry",
        };
        ids.push(insert(inbox, &ev("t/a", event_id, status, days(60))).await);
    }
    let dead = Ev {
        dead_lettered_at: Some(t0() - days(50)),
        ..ev("t/a", "old-dead", "dead_letter", days(60))
    };
    ids.push(insert(inbox, &dead).await);
    let other = Ev {
        processed_at: Some(t0() - days(59)),
        ..ev("t/b", "other-integration", "processed", days(60))
    };
    ids.push(insert(inbox, &other).await);
    ids
}

// ---------------------------------------------------------------------------------------------
// Scenarios, each run on both backends (see the bottom of the file).

/// Only finished rows of the integration that finished strictly before the cutoff lose their
/// body; the hash and headers stay; already purged rows are not counted again.
async fn purge_payloads_only_of_old_finished_events(inbox: Inbox) {
    let cutoff = t0() - days(7);
    let keep = never_touched(&inbox).await;
    let old_processed = insert(
        &inbox,
        &finished("old-processed", "processed", days(10), days(10)),
    )
    .await;
    let old_ignored = insert(
        &inbox,
        &finished("old-ignored", "ignored", days(20), days(19)),
    )
    .await;
    // Ignored on arrival: no processed_at, so its arrival is when it finished.
    let ignored_on_arrival =
        insert(&inbox, &ev("t/a", "ignored-on-arrival", "ignored", days(9))).await;
    let late_finish = insert(
        &inbox,
        &finished("late-finish", "processed", days(30), days(1)),
    )
    .await;
    let fresh = insert(&inbox, &finished("fresh", "processed", days(1), days(1))).await;
    let at_cutoff = insert(
        &inbox,
        &finished("at-cutoff", "processed", days(8), days(7)),
    )
    .await;
    let purged_before = Some(t0() - days(2));
    let already = insert(
        &inbox,
        &Ev {
            body: Vec::new(),
            body_purged_at: purged_before,
            ..finished("already-purged", "processed", days(30), days(30))
        },
    )
    .await;

    let untouched_ids: Vec<i64> = keep
        .iter()
        .copied()
        .chain([late_finish, fresh, at_cutoff, already])
        .collect();
    let mut before = Vec::new();
    for &id in &untouched_ids {
        before.push(stored(&inbox, id).await.unwrap());
    }
    let old_before = stored(&inbox, old_processed).await.unwrap();

    assert_eq!(inbox.purge_payloads("t/a", cutoff, t0()).await.unwrap(), 3);

    for id in [old_processed, old_ignored, ignored_on_arrival] {
        let s = stored(&inbox, id).await.unwrap();
        assert_eq!(s.body, b"", "row {id}");
        assert_eq!(s.body_purged_at, Some(t0()), "row {id}");
    }
    let s = stored(&inbox, old_processed).await.unwrap();
    assert_eq!(
        s,
        Stored {
            body: Vec::new(),
            body_purged_at: Some(t0()),
            ..old_before
        },
        "only the body changes: hash, headers and status stay"
    );
    for (id, was) in untouched_ids.iter().zip(&before) {
        assert_eq!(
            &stored(&inbox, *id).await.unwrap(),
            was,
            "row {id} was touched"
        );
    }
    assert_eq!(
        stored(&inbox, already).await.unwrap().body_purged_at,
        purged_before
    );

    // Nothing left to purge: not counted twice, the first stamp stays.
    let later = t0() + Duration::hours(1);
    assert_eq!(inbox.purge_payloads("t/a", cutoff, later).await.unwrap(), 0);
    assert_eq!(
        stored(&inbox, old_ignored).await.unwrap().body_purged_at,
        Some(t0())
    );

    // A later cutoff reaches the rows that finished later; the other integration is its own.
    assert_eq!(inbox.purge_payloads("t/a", t0(), later).await.unwrap(), 3);
    for id in [late_finish, fresh, at_cutoff] {
        assert_eq!(
            stored(&inbox, id).await.unwrap().body_purged_at,
            Some(later)
        );
    }
    for (id, was) in keep.iter().zip(&before) {
        assert_eq!(
            &stored(&inbox, *id).await.unwrap(),
            was,
            "row {id} was touched"
        );
    }
    assert_eq!(inbox.purge_payloads("t/b", t0(), later).await.unwrap(), 1);
}

/// Deleting finished rows takes their attempts with them and frees their dedupe key; dead
/// letters and unfinished rows stay, with their attempts.
async fn delete_finished_keeps_dead_letters_and_unfinished_events(inbox: Inbox) {
    let cutoff = t0() - days(7);
    let keep = never_touched(&inbox).await;
    let old_processed = insert(
        &inbox,
        &finished("old-processed", "processed", days(10), days(10)),
    )
    .await;
    let ignored_on_arrival =
        insert(&inbox, &ev("t/a", "ignored-on-arrival", "ignored", days(9))).await;
    let purged = insert(
        &inbox,
        &Ev {
            body: Vec::new(),
            body_purged_at: Some(t0() - days(5)),
            ..finished("purged", "ignored", days(30), days(30))
        },
    )
    .await;
    let late_finish = insert(
        &inbox,
        &finished("late-finish", "processed", days(30), days(1)),
    )
    .await;
    let at_cutoff = insert(
        &inbox,
        &finished("at-cutoff", "processed", days(8), days(7)),
    )
    .await;
    for &id in keep.iter().chain([old_processed, late_finish].iter()) {
        attempt(&inbox, id).await;
    }

    assert_eq!(inbox.delete_finished("t/a", cutoff).await.unwrap(), 3);
    let mut remaining = keep.clone();
    remaining.extend([late_finish, at_cutoff]);
    remaining.sort_unstable();
    assert_eq!(event_rows(&inbox).await, remaining);
    let mut with_attempts = keep.clone();
    with_attempts.push(late_finish);
    assert_eq!(attempt_rows(&inbox).await, with_attempts);
    for id in [old_processed, ignored_on_arrival, purged] {
        assert_eq!(stored(&inbox, id).await, None);
    }
    assert_eq!(inbox.delete_finished("t/a", cutoff).await.unwrap(), 0);

    // The dedupe key went with the row: the same event id can be stored again.
    let again = insert(
        &inbox,
        &ev("t/a", "old-processed", "pending", Duration::zero()),
    )
    .await;
    assert!(again > old_processed);

    assert_eq!(inbox.delete_finished("t/a", t0()).await.unwrap(), 2);
    let mut remaining = keep.clone();
    remaining.push(again);
    assert_eq!(event_rows(&inbox).await, remaining);
    assert_eq!(attempt_rows(&inbox).await, keep);
    // The other integration's processed row is the last of `keep`.
    assert_eq!(inbox.delete_finished("t/b", t0()).await.unwrap(), 1);
    let mut remaining = keep[..keep.len() - 1].to_vec();
    remaining.push(again);
    assert_eq!(event_rows(&inbox).await, remaining);
}

/// `n` events of `t/a` processed 10 days before t0, with a body and one attempt each.
async fn bulk_finished(inbox: &Inbox, n: u64) {
    let body = br#"{"id":"bulk"}"#.to_vec();
    let sha = sha2::Sha256::digest(&body).to_vec();
    let headers = json!([["content-type", "application/json"]]);
    let at = t0() - days(10);
    on!(inbox, pool => {
        sqlx::query(
            "WITH RECURSIVE g(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM g WHERE i < $1) \
             INSERT INTO inbox_events (integration, event_id, event_type, scheme, key_id, \
             headers, content_type, body, body_sha256, status, attempts, received_at, \
             processed_at) SELECT 't/a', 'bulk-' || i, 'invoice.paid', 'stripe', 'v1', $2, \
             'application/json', $3, $4, 'processed', 1, $5, $5 FROM g",
        )
        .bind(i64::try_from(n).unwrap())
        .bind(Json(&headers))
        .bind(&body)
        .bind(&sha)
        .bind(at)
        .execute(pool)
        .await
        .unwrap();
        sqlx::query(
            "INSERT INTO delivery_attempts (event_row, attempt, started_at, duration_ms, \
             status_code, error, outcome) SELECT id, 1, $1, 12, 200, NULL, 'processed' \
             FROM inbox_events WHERE event_id LIKE 'bulk-%'",
        )
        .bind(at)
        .execute(pool)
        .await
        .unwrap();
    })
}

/// A pass changes its rows a batch a transaction, and goes on until none is left: more finished
/// events than two batches lose their bodies, then go with their attempts, and the rows retention
/// must not touch stay.
async fn retention_goes_through_more_events_than_a_batch(inbox: Inbox) {
    let keep = never_touched(&inbox).await;
    let n = 2 * hookgate::inbox::RETENTION_BATCH + 1;
    bulk_finished(&inbox, n).await;
    let cutoff = t0() - days(7);
    assert_eq!(inbox.purge_payloads("t/a", cutoff, t0()).await.unwrap(), n);
    assert_eq!(inbox.purge_payloads("t/a", cutoff, t0()).await.unwrap(), 0);
    assert_eq!(inbox.delete_finished("t/a", cutoff).await.unwrap(), n);
    assert_eq!(event_rows(&inbox).await, keep);
    assert_eq!(attempt_rows(&inbox).await, Vec::<i64>::new());
    for id in &keep {
        assert!(stored(&inbox, *id).await.unwrap().body_purged_at.is_none());
    }
}

/// `n` signature nonces of `t/a`, all expired an hour before t0.
async fn expired_nonces(inbox: &Inbox, n: u64) {
    let sql = "WITH RECURSIVE g(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM g WHERE i < $1) \
         INSERT INTO signature_nonces (integration, digest, expires_at) SELECT 't/a', DIGEST, $2 FROM g";
    let n = i64::try_from(n).unwrap();
    let at = t0() - Duration::hours(1);
    on!(inbox, pool => {
        let digest = match inbox {
            Inbox::Postgres(_) => "convert_to(i::text, 'UTF8')",
            Inbox::Sqlite(_) => "CAST(i AS BLOB)",
        };
        sqlx::query(sqlx::AssertSqlSafe(sql.replace("DIGEST", digest)))
            .bind(n)
            .bind(at)
            .execute(pool)
            .await
            .unwrap();
    })
}

async fn nonces_left(inbox: &Inbox) -> u64 {
    on!(inbox, pool => {
        sqlx::query_scalar::<_, i64>("SELECT count(*) FROM signature_nonces")
            .fetch_one(pool)
            .await
            .unwrap() as u64
    })
}

/// Expired nonces go a batch a statement, and a prune asked to stop (its worker process is
/// stopping) ends after the batch it is on; the next prune takes the rest. Until round 46 the prune
/// went on to the last nonce, and a stopping worker's pass could be cut off at the end of its
/// grace with its turn still taken.
async fn a_prune_asked_to_stop_ends_after_the_batch_it_is_on(inbox: Inbox) {
    use hookgate::inbox::RETENTION_BATCH as BATCH;
    use std::sync::atomic::{AtomicU32, Ordering};
    let n = 2 * BATCH + 1;
    expired_nonces(&inbox, n).await;
    let asked = AtomicU32::new(0);
    let after_one = || asked.fetch_add(1, Ordering::SeqCst) >= 1;
    assert_eq!(
        inbox.prune_nonces_until(t0(), &after_one).await.unwrap(),
        BATCH
    );
    assert_eq!(nonces_left(&inbox).await, n - BATCH);
    assert_eq!(inbox.prune_nonces_until(t0(), &|| true).await.unwrap(), 0);
    assert_eq!(inbox.prune_nonces(t0()).await.unwrap(), n - BATCH);
    assert_eq!(nonces_left(&inbox).await, 0);
}

on_both_backends!(
    purge_payloads_only_of_old_finished_events,
    delete_finished_keeps_dead_letters_and_unfinished_events,
    retention_goes_through_more_events_than_a_batch,
    a_prune_asked_to_stop_ends_after_the_batch_it_is_on,
);

/// delete_finished removes the attempts itself, so a SQLite pool opened without `foreign_keys`
/// (where the cascade does not happen) keeps no orphaned history either.
#[tokio::test]
async fn sqlite_delete_finished_without_foreign_keys_leaves_no_orphans() {
    use sqlx::sqlite::{SqliteConnectOptions, SqlitePoolOptions};
    use std::str::FromStr;
    let (dir, inbox) = crate::common::sqlite_inbox().await;
    inbox.close().await;
    let url = format!("sqlite://{}", dir.path().join("inbox.db").display());
    let opts = SqliteConnectOptions::from_str(&url)
        .unwrap()
        .foreign_keys(false);
    let pool = SqlitePoolOptions::new()
        .max_connections(1)
        .connect_with(opts)
        .await
        .unwrap();
    let inbox = Inbox::Sqlite(pool);
    let old = insert(&inbox, &finished("old", "processed", days(10), days(10))).await;
    let new = insert(&inbox, &finished("new", "processed", days(1), days(1))).await;
    attempt(&inbox, old).await;
    attempt(&inbox, new).await;
    assert_eq!(
        inbox.delete_finished("t/a", t0() - days(7)).await.unwrap(),
        1
    );
    assert_eq!(event_rows(&inbox).await, [new]);
    assert_eq!(attempt_rows(&inbox).await, [new]);
}

/// A receiver may claim an expired nonce again before the janitor prunes it: its upsert moves the
/// nonce's expiry, and the prune must leave that nonce alone, also when it found the nonce expired
/// a moment before. Here the receiver's claim is still uncommitted when the prune runs.
#[sqlx::test(migrations = "migrations/postgres")]
async fn a_nonce_claimed_again_during_the_prune_is_kept(pool: sqlx::PgPool) {
    let now = t0();
    sqlx::query(
        "INSERT INTO signature_nonces (integration, digest, expires_at) \
         SELECT 't/a', sha256(convert_to(g::text, 'UTF8')), $1 - g * interval '1 second' \
         FROM generate_series(1, 20) g",
    )
    .bind(now)
    .execute(&pool)
    .await
    .unwrap();
    let again = sha2::Sha256::digest(b"7").to_vec();
    let mut receiver = pool.begin().await.unwrap();
    sqlx::query("UPDATE signature_nonces SET expires_at = $1 WHERE digest = $2")
        .bind(now + days(1))
        .bind(&again)
        .execute(&mut *receiver)
        .await
        .unwrap();
    let inbox = Inbox::Postgres(pool.clone());
    let prune = tokio::spawn(async move { inbox.prune_nonces(now).await.unwrap() });
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    receiver.commit().await.unwrap();
    assert_eq!(prune.await.unwrap(), 19);
    let left: Vec<(Vec<u8>, DateTime<Utc>)> =
        sqlx::query_as("SELECT digest, expires_at FROM signature_nonces")
            .fetch_all(&pool)
            .await
            .unwrap();
    assert_eq!(left, [(again, now + days(1))]);
}
