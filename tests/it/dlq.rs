//! Dead letters: list, show, replay and purge, on real PostgreSQL (`#[sqlx::test]`) and on SQLite
//! files; and the `hookgate dlq` commands against a SQLite file.
//!
//! Fixture rows are written with plain SQL: the real insert path needs a verified request.

use chrono::{DateTime, Duration, Utc};
use hookgate::inbox::{
    Apply, AttemptRecord, DeadLetter, DeadLetterFilter, EventDetail, Inbox, ReplaySelector,
};
use serde_json::{Value, json};
use sha2::Digest;
use sqlx::Row;
use sqlx::types::Json;

use crate::common::{sqlite_inbox_named, t0, tester};

fn hours(h: i64) -> Duration {
    Duration::hours(h)
}

/// One inbox row as the tests write it.
#[derive(Clone, Debug)]
struct Ev {
    integration: &'static str,
    event_id: &'static str,
    event_type: Option<&'static str>,
    status: &'static str,
    headers: Value,
    body: Vec<u8>,
    attempts: i64,
    next_attempt_at: Option<DateTime<Utc>>,
    locked_until: Option<DateTime<Utc>>,
    last_error: Option<&'static str>,
    received_at: DateTime<Utc>,
    processed_at: Option<DateTime<Utc>>,
    dead_lettered_at: Option<DateTime<Utc>>,
}

fn ev(integration: &'static str, event_id: &'static str, status: &'static str) -> Ev {
    Ev {
        integration,
        event_id,
        event_type: Some("invoice.paid"),
        status,
        headers: json!([["content-type", "application/json"]]),
        body: format!("{{\"id\":\"{event_id}\"}}").into_bytes(),
        attempts: 0,
        next_attempt_at: None,
        locked_until: None,
        last_error: None,
        received_at: t0() - hours(24),
        processed_at: None,
        dead_lettered_at: None,
    }
}

/// A dead letter after five failed attempts, dead-lettered `ago` before t0.
fn dead(integration: &'static str, event_id: &'static str, ago: Duration) -> Ev {
    Ev {
        attempts: 5,
        last_error: Some("HTTP 503 from target"),
        dead_lettered_at: Some(t0() - ago),
        ..ev(integration, event_id, "dead_letter")
    }
}

const INSERT_EVENT: &str = "INSERT INTO inbox_events (integration, event_id, event_type, scheme, \
     key_id, headers, content_type, body, body_sha256, status, attempts, next_attempt_at, \
     locked_until, last_error, received_at, processed_at, dead_lettered_at) \
     VALUES ($1, $2, $3, 'stripe', 'v1', $4, 'application/json', $5, $6, $7, $8, $9, $10, $11, \
     $12, $13, $14) RETURNING id";

async fn insert(inbox: &Inbox, e: &Ev) -> i64 {
    let sha = sha2::Sha256::digest(&e.body).to_vec();
    on!(inbox, pool => {
        sqlx::query(INSERT_EVENT)
            .bind(e.integration)
            .bind(e.event_id)
            .bind(e.event_type)
            .bind(Json(&e.headers))
            .bind(&e.body)
            .bind(&sha)
            .bind(e.status)
            .bind(e.attempts)
            .bind(e.next_attempt_at)
            .bind(e.locked_until)
            .bind(e.last_error)
            .bind(e.received_at)
            .bind(e.processed_at)
            .bind(e.dead_lettered_at)
            .fetch_one(pool)
            .await
            .unwrap()
            .get::<i64, _>(0)
    })
}

const INSERT_ATTEMPT: &str = "INSERT INTO delivery_attempts \
     (event_row, attempt, started_at, duration_ms, status_code, error, outcome) \
     VALUES ($1, $2, $3, $4, $5, $6, $7)";

/// Records attempt number `n` of `row`, failed with HTTP 503 (or an error without a status).
async fn attempt(inbox: &Inbox, row: i64, n: i64, status_code: Option<i64>, outcome: &str) {
    let started = t0() - hours(10) + Duration::minutes(n);
    let error = format!("attempt {n} failed");
    on!(inbox, pool => {
        sqlx::query(INSERT_ATTEMPT)
            .bind(row)
            .bind(n)
            .bind(started)
            .bind(100 * n)
            .bind(status_code)
            .bind(&error)
            .bind(outcome)
            .execute(pool)
            .await
            .unwrap();
    })
}

/// The queue columns of one row.
#[derive(Debug, Clone, PartialEq)]
struct State {
    status: String,
    attempts: i64,
    next_attempt_at: Option<DateTime<Utc>>,
    locked_until: Option<DateTime<Utc>>,
    last_error: Option<String>,
    dead_lettered_at: Option<DateTime<Utc>>,
    processed_at: Option<DateTime<Utc>>,
}

async fn state(inbox: &Inbox, id: i64) -> Option<State> {
    const SQL: &str = "SELECT status, attempts, next_attempt_at, locked_until, last_error, \
         dead_lettered_at, processed_at FROM inbox_events WHERE id = $1";
    on!(inbox, pool => {
        sqlx::query(SQL).bind(id).fetch_optional(pool).await.unwrap().map(|r| State {
            status: r.get("status"),
            attempts: r.get("attempts"),
            next_attempt_at: r.get("next_attempt_at"),
            locked_until: r.get("locked_until"),
            last_error: r.get("last_error"),
            dead_lettered_at: r.get("dead_lettered_at"),
            processed_at: r.get("processed_at"),
        })
    })
}

/// Every row id in the inbox, ascending.
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

/// `(event_row, attempt)` of every delivery attempt, in insertion order.
async fn attempt_rows(inbox: &Inbox) -> Vec<(i64, i64)> {
    on!(inbox, pool => {
        sqlx::query("SELECT event_row, attempt FROM delivery_attempts ORDER BY id")
            .fetch_all(pool)
            .await
            .unwrap()
            .iter()
            .map(|r| (r.get::<i64, _>(0), r.get::<i64, _>(1)))
            .collect()
    })
}

fn ids(rows: &[DeadLetter]) -> Vec<i64> {
    rows.iter().map(|r| r.id).collect()
}

fn filter(integration: Option<&str>, since: Option<DateTime<Utc>>, limit: i64) -> DeadLetterFilter {
    DeadLetterFilter {
        integration: integration.map(str::to_string),
        since,
        limit,
    }
}

fn by_integration(integration: &str, since: Option<DateTime<Utc>>) -> ReplaySelector {
    ReplaySelector::Integration {
        integration: integration.to_string(),
        since,
    }
}

// ---------------------------------------------------------------------------------------------
// Scenarios, each run on both backends (see the bottom of the file).

/// Newest dead letter first (by when it was dead-lettered, not by id); integration and since
/// filter; limit cuts; rows of other statuses never appear.
async fn list_filters_and_orders_dead_letters(inbox: Inbox) {
    let c = insert(&inbox, &dead("t/a", "c", hours(1))).await;
    let a = insert(&inbox, &dead("t/a", "a", hours(3))).await;
    let f = insert(&inbox, &dead("t/a", "f", hours(10))).await;
    let b = insert(&inbox, &dead("t/b", "b", hours(2))).await;
    insert(
        &inbox,
        &Ev {
            attempts: 2,
            ..ev("t/a", "retrying", "retry")
        },
    )
    .await;
    insert(
        &inbox,
        &Ev {
            processed_at: Some(t0() - hours(1)),
            ..ev("t/a", "done", "processed")
        },
    )
    .await;
    insert(&inbox, &ev("t/a", "new", "pending")).await;

    assert_eq!(
        ids(&inbox.dead_letters(&filter(None, None, 100)).await.unwrap()),
        [c, b, a, f]
    );
    assert_eq!(
        ids(&inbox.dead_letters(&filter(None, None, 0)).await.unwrap()),
        [c, b, a, f]
    );
    assert_eq!(
        ids(&inbox
            .dead_letters(&filter(Some("t/a"), None, 100))
            .await
            .unwrap()),
        [c, a, f]
    );
    assert_eq!(
        ids(&inbox
            .dead_letters(&filter(Some("t/b"), None, 100))
            .await
            .unwrap()),
        [b]
    );
    assert_eq!(
        ids(&inbox
            .dead_letters(&filter(Some("t/none"), None, 100))
            .await
            .unwrap()),
        Vec::<i64>::new()
    );
    let since = Some(t0() - Duration::minutes(150));
    assert_eq!(
        ids(&inbox.dead_letters(&filter(None, since, 100)).await.unwrap()),
        [c, b]
    );
    // `since` is inclusive.
    let since = Some(t0() - hours(3));
    assert_eq!(
        ids(&inbox
            .dead_letters(&filter(Some("t/a"), since, 100))
            .await
            .unwrap()),
        [c, a]
    );
    assert_eq!(
        ids(&inbox.dead_letters(&filter(None, None, 2)).await.unwrap()),
        [c, b]
    );

    let rows = inbox
        .dead_letters(&filter(Some("t/b"), None, 10))
        .await
        .unwrap();
    assert_eq!(
        rows,
        [DeadLetter {
            id: b,
            integration: "t/b".into(),
            event_id: "b".into(),
            event_type: Some("invoice.paid".into()),
            attempts: 5,
            last_error: Some("HTTP 503 from target".into()),
            received_at: t0() - hours(24),
            dead_lettered_at: Some(t0() - hours(2)),
        }]
    );
}

/// `event_detail` returns every column and this event's attempts only, oldest first.
async fn show_returns_the_event_with_its_attempts(inbox: Inbox) {
    let other = insert(&inbox, &dead("t/a", "other", hours(1))).await;
    let headers = json!([
        ["content-type", "application/json"],
        ["x-github-event", "push"]
    ]);
    let id = insert(
        &inbox,
        &Ev {
            headers: headers.clone(),
            body: b"{\"n\":1}".to_vec(),
            attempts: 3,
            last_error: Some("connection refused"),
            ..dead("t/b", "evt_1", hours(2))
        },
    )
    .await;
    attempt(&inbox, id, 1, Some(503), "retry").await;
    attempt(&inbox, other, 1, Some(500), "retry").await;
    attempt(&inbox, id, 2, None, "retry").await;
    attempt(&inbox, id, 3, Some(502), "dead_letter").await;

    let detail = inbox
        .event_detail(id)
        .await
        .unwrap()
        .expect("the event exists");
    let started = |n: i64| t0() - hours(10) + Duration::minutes(n);
    let expected = EventDetail {
        id,
        integration: "t/b".into(),
        event_id: "evt_1".into(),
        event_type: Some("invoice.paid".into()),
        status: "dead_letter".into(),
        scheme: "stripe".into(),
        key_id: "v1".into(),
        signed_at: None,
        headers,
        content_type: Some("application/json".into()),
        body: b"{\"n\":1}".to_vec(),
        body_sha256: const_hex::encode(sha2::Sha256::digest(b"{\"n\":1}")),
        attempt_count: 3,
        next_attempt_at: None,
        locked_until: None,
        last_error: Some("connection refused".into()),
        dedupe_conflicts: 0,
        received_at: t0() - hours(24),
        processed_at: None,
        ignored_reason: None,
        body_purged_at: None,
        dead_lettered_at: Some(t0() - hours(2)),
        attempts: vec![
            AttemptRecord {
                attempt: 1,
                started_at: started(1),
                duration_ms: 100,
                status_code: Some(503),
                error: Some("attempt 1 failed".into()),
                outcome: "retry".into(),
            },
            AttemptRecord {
                attempt: 2,
                started_at: started(2),
                duration_ms: 200,
                status_code: None,
                error: Some("attempt 2 failed".into()),
                outcome: "retry".into(),
            },
            AttemptRecord {
                attempt: 3,
                started_at: started(3),
                duration_ms: 300,
                status_code: Some(502),
                error: Some("attempt 3 failed".into()),
                outcome: "dead_letter".into(),
            },
        ],
    };
    assert_eq!(detail, expected);

    let json = serde_json::to_value(&detail).unwrap();
    assert_eq!(json["body_base64"], "eyJuIjoxfQ==");
    assert_eq!(json["attempts"].as_array().unwrap().len(), 3);

    // Any status can be shown; an id that does not exist is None.
    let done = insert(
        &inbox,
        &Ev {
            processed_at: Some(t0()),
            ..ev("t/a", "done", "processed")
        },
    )
    .await;
    let shown = inbox.event_detail(done).await.unwrap().unwrap();
    assert_eq!(
        (
            shown.status.as_str(),
            shown.processed_at,
            shown.attempts.len()
        ),
        ("processed", Some(t0()), 0)
    );
    assert_eq!(inbox.event_detail(done + 1000).await.unwrap(), None);
}

/// Replaying ids: only dead letters change; they get a fresh schedule, keep last_error and the
/// attempt history; other ids are left out of the result and untouched.
async fn replay_by_ids_resets_only_dead_letters(inbox: Inbox) {
    let d1 = insert(&inbox, &dead("t/a", "d1", hours(1))).await;
    let d2 = insert(
        &inbox,
        &Ev {
            locked_until: Some(t0() - hours(3)),
            next_attempt_at: Some(t0() - hours(4)),
            ..dead("t/b", "d2", hours(2))
        },
    )
    .await;
    let done = insert(
        &inbox,
        &Ev {
            attempts: 1,
            processed_at: Some(t0() - hours(1)),
            ..ev("t/a", "p", "processed")
        },
    )
    .await;
    let retrying = insert(
        &inbox,
        &Ev {
            attempts: 2,
            next_attempt_at: Some(t0() + hours(1)),
            last_error: Some("HTTP 500"),
            ..ev("t/a", "r", "retry")
        },
    )
    .await;
    let untouched = insert(&inbox, &dead("t/a", "d3", hours(1))).await;
    for n in 1..=2 {
        attempt(&inbox, d1, n, Some(503), "retry").await;
    }
    attempt(&inbox, done, 1, Some(200), "processed").await;
    let history = attempt_rows(&inbox).await;
    let before_done = state(&inbox, done).await;
    let before_retry = state(&inbox, retrying).await;
    let before_untouched = state(&inbox, untouched).await;

    let now = t0() + Duration::minutes(5);
    let sel = ReplaySelector::Ids(vec![d2, done, retrying, d1, 999_999, d1]);
    assert_eq!(
        inbox
            .replay_dead_letters(&sel, now, Apply::By(&tester()))
            .await
            .unwrap(),
        [d1, d2]
    );

    let fresh = |last_error: &str| State {
        status: "pending".into(),
        attempts: 0,
        next_attempt_at: Some(now),
        locked_until: None,
        last_error: Some(last_error.into()),
        dead_lettered_at: None,
        processed_at: None,
    };
    assert_eq!(state(&inbox, d1).await, Some(fresh("HTTP 503 from target")));
    assert_eq!(state(&inbox, d2).await, Some(fresh("HTTP 503 from target")));
    assert_eq!(state(&inbox, done).await, before_done);
    assert_eq!(state(&inbox, retrying).await, before_retry);
    assert_eq!(state(&inbox, untouched).await, before_untouched);
    assert_eq!(
        attempt_rows(&inbox).await,
        history,
        "the delivery history is kept"
    );
    assert_eq!(state(&inbox, 999_999).await, None);

    // They are no longer dead letters: a second replay finds nothing.
    assert_eq!(
        inbox
            .replay_dead_letters(&sel, now, Apply::By(&tester()))
            .await
            .unwrap(),
        Vec::<i64>::new()
    );
    assert_eq!(
        ids(&inbox.dead_letters(&filter(None, None, 0)).await.unwrap()),
        [untouched]
    );
    assert_eq!(
        inbox
            .replay_dead_letters(&ReplaySelector::Ids(vec![]), now, Apply::By(&tester()))
            .await
            .unwrap(),
        Vec::<i64>::new()
    );
}

/// Replaying an integration: only its dead letters, and with `since` only recent ones.
async fn replay_by_integration_and_since(inbox: Inbox) {
    let a_old = insert(&inbox, &dead("t/a", "a-old", hours(3))).await;
    let a_new = insert(&inbox, &dead("t/a", "a-new", hours(1))).await;
    let b_new = insert(&inbox, &dead("t/b", "b-new", hours(1))).await;
    let a_done = insert(
        &inbox,
        &Ev {
            processed_at: Some(t0()),
            ..ev("t/a", "a-done", "processed")
        },
    )
    .await;

    let sel = by_integration("t/a", Some(t0() - hours(2)));
    assert_eq!(
        inbox
            .replay_dead_letters(&sel, t0(), Apply::By(&tester()))
            .await
            .unwrap(),
        [a_new]
    );
    assert_eq!(state(&inbox, a_old).await.unwrap().status, "dead_letter");
    assert_eq!(state(&inbox, b_new).await.unwrap().status, "dead_letter");
    assert_eq!(state(&inbox, a_new).await.unwrap().status, "pending");

    assert_eq!(
        inbox
            .replay_dead_letters(&by_integration("t/a", None), t0(), Apply::By(&tester()))
            .await
            .unwrap(),
        [a_old]
    );
    assert_eq!(state(&inbox, b_new).await.unwrap().status, "dead_letter");
    assert_eq!(state(&inbox, a_done).await.unwrap().status, "processed");
    assert_eq!(
        inbox
            .replay_dead_letters(&by_integration("t/b", None), t0(), Apply::By(&tester()))
            .await
            .unwrap(),
        [b_new]
    );
}

/// A dry run reports exactly what the real run then does, and changes nothing itself.
async fn replay_all_and_dry_run(inbox: Inbox) {
    let x = insert(&inbox, &dead("t/a", "x", hours(3))).await;
    let y = insert(&inbox, &dead("t/b", "y", hours(1))).await;
    let done = insert(
        &inbox,
        &Ev {
            processed_at: Some(t0()),
            ..ev("t/a", "done", "processed")
        },
    )
    .await;
    let z = insert(&inbox, &dead("t/c", "z", hours(2))).await;
    attempt(&inbox, x, 1, Some(500), "dead_letter").await;
    let all_rows = [x, y, done, z];
    let mut before = Vec::new();
    for id in all_rows {
        before.push(state(&inbox, id).await);
    }
    let history = attempt_rows(&inbox).await;

    let dry = |sel: ReplaySelector| {
        let inbox = inbox.clone();
        async move {
            inbox
                .replay_dead_letters(&sel, t0(), Apply::DryRun)
                .await
                .unwrap()
        }
    };
    assert_eq!(dry(ReplaySelector::All).await, [x, y, z]);
    assert_eq!(dry(ReplaySelector::Ids(vec![z, done, x])).await, [x, z]);
    assert_eq!(dry(by_integration("t/a", None)).await, [x]);
    assert_eq!(dry(by_integration("t/b", Some(t0() - hours(2)))).await, [y]);
    assert_eq!(
        dry(by_integration("t/c", Some(t0() - hours(1)))).await,
        Vec::<i64>::new()
    );
    for (id, was) in all_rows.iter().zip(&before) {
        assert_eq!(&state(&inbox, *id).await, was, "dry run changed row {id}");
    }
    assert_eq!(attempt_rows(&inbox).await, history);

    assert_eq!(
        inbox
            .replay_dead_letters(&ReplaySelector::All, t0(), Apply::By(&tester()))
            .await
            .unwrap(),
        [x, y, z]
    );
    for id in [x, y, z] {
        let s = state(&inbox, id).await.unwrap();
        assert_eq!(
            (s.status.as_str(), s.attempts, s.next_attempt_at),
            ("pending", 0, Some(t0()))
        );
    }
    assert_eq!(state(&inbox, done).await, before[2]);
    assert_eq!(attempt_rows(&inbox).await, history);
    assert_eq!(dry(ReplaySelector::All).await, Vec::<i64>::new());
}

/// Purging deletes dead letters with their attempts; other rows and their attempts stay.
async fn purge_deletes_dead_letters_and_their_attempts(inbox: Inbox) {
    let p1 = insert(&inbox, &dead("t/a", "p1", hours(1))).await;
    let p2 = insert(&inbox, &dead("t/a", "p2", hours(2))).await;
    let k = insert(&inbox, &dead("t/b", "k", hours(1))).await;
    let done = insert(
        &inbox,
        &Ev {
            processed_at: Some(t0()),
            ..ev("t/a", "done", "processed")
        },
    )
    .await;
    let pending = insert(&inbox, &ev("t/a", "pending", "pending")).await;
    attempt(&inbox, p1, 1, Some(503), "retry").await;
    attempt(&inbox, p1, 2, Some(503), "dead_letter").await;
    attempt(&inbox, p2, 1, None, "dead_letter").await;
    attempt(&inbox, k, 1, Some(500), "dead_letter").await;
    attempt(&inbox, done, 1, Some(200), "processed").await;

    // Dry run: reported, nothing deleted.
    let sel = ReplaySelector::Ids(vec![p1, done, pending]);
    assert_eq!(
        inbox.purge_dead_letters(&sel, Apply::DryRun).await.unwrap(),
        [p1]
    );
    assert_eq!(event_rows(&inbox).await, [p1, p2, k, done, pending]);
    assert_eq!(attempt_rows(&inbox).await.len(), 5);

    assert_eq!(
        inbox
            .purge_dead_letters(&sel, Apply::By(&tester()))
            .await
            .unwrap(),
        [p1]
    );
    assert_eq!(event_rows(&inbox).await, [p2, k, done, pending]);
    assert_eq!(attempt_rows(&inbox).await, [(p2, 1), (k, 1), (done, 1)]);

    assert_eq!(
        inbox
            .purge_dead_letters(
                &by_integration("t/a", Some(t0() - hours(1))),
                Apply::By(&tester())
            )
            .await
            .unwrap(),
        Vec::<i64>::new()
    );
    assert_eq!(
        inbox
            .purge_dead_letters(&by_integration("t/a", None), Apply::By(&tester()))
            .await
            .unwrap(),
        [p2]
    );
    assert_eq!(attempt_rows(&inbox).await, [(k, 1), (done, 1)]);

    assert_eq!(
        inbox
            .purge_dead_letters(&ReplaySelector::All, Apply::DryRun)
            .await
            .unwrap(),
        [k]
    );
    assert_eq!(
        inbox
            .purge_dead_letters(&ReplaySelector::All, Apply::By(&tester()))
            .await
            .unwrap(),
        [k]
    );
    assert_eq!(event_rows(&inbox).await, [done, pending]);
    assert_eq!(attempt_rows(&inbox).await, [(done, 1)]);
    assert_eq!(
        inbox
            .purge_dead_letters(&ReplaySelector::All, Apply::By(&tester()))
            .await
            .unwrap(),
        Vec::<i64>::new()
    );
}

/// SQLite's ON DELETE CASCADE is in force on the pools hookgate opens (it needs `foreign_keys`).
/// PostgreSQL has no foreign key there (migration 0005, a cost on every completion): the tests of
/// retention and of the purge check that those paths delete the attempts themselves.
#[tokio::test]
async fn sqlite_deleting_an_event_cascades_to_its_attempts() {
    let (_dir, inbox) = crate::common::sqlite_inbox().await;
    let a = insert(&inbox, &dead("t/a", "a", hours(1))).await;
    let b = insert(&inbox, &dead("t/a", "b", hours(1))).await;
    attempt(&inbox, a, 1, Some(500), "dead_letter").await;
    attempt(&inbox, b, 1, Some(500), "dead_letter").await;
    on!(&inbox, pool => {
        sqlx::query("DELETE FROM inbox_events WHERE id = $1").bind(a).execute(pool).await.unwrap();
    });
    assert_eq!(attempt_rows(&inbox).await, [(b, 1)]);
}

on_both_backends!(
    list_filters_and_orders_dead_letters,
    show_returns_the_event_with_its_attempts,
    replay_by_ids_resets_only_dead_letters,
    replay_by_integration_and_since,
    replay_all_and_dry_run,
    purge_deletes_dead_letters_and_their_attempts,
);

/// Purge removes the attempts itself, so a SQLite pool opened without `foreign_keys` (where the
/// cascade does not happen) does not leave orphaned history behind either.
#[tokio::test]
async fn sqlite_purge_without_foreign_keys_leaves_no_orphans() {
    use sqlx::sqlite::{SqliteConnectOptions, SqlitePoolOptions};
    use std::str::FromStr;
    let (_dir, url, inbox) = sqlite_inbox_named("inbox.db").await;
    inbox.close().await;
    let opts = SqliteConnectOptions::from_str(&url)
        .unwrap()
        .foreign_keys(false);
    let pool = SqlitePoolOptions::new()
        .max_connections(1)
        .connect_with(opts)
        .await
        .unwrap();
    let inbox = Inbox::Sqlite(pool);
    let a = insert(&inbox, &dead("t/a", "a", hours(1))).await;
    let b = insert(&inbox, &dead("t/b", "b", hours(1))).await;
    attempt(&inbox, a, 1, Some(500), "dead_letter").await;
    attempt(&inbox, b, 1, Some(500), "dead_letter").await;
    assert_eq!(
        inbox
            .purge_dead_letters(&by_integration("t/a", None), Apply::By(&tester()))
            .await
            .unwrap(),
        [a]
    );
    assert_eq!(attempt_rows(&inbox).await, [(b, 1)]);
}

// ---------------------------------------------------------------------------------------------
// The `hookgate dlq` commands, against a SQLite file.

struct Out {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

fn hookgate(url: &str, args: &[&str]) -> Out {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_hookgate"))
        .args(args)
        .env("HOOKGATE_DATABASE_URL", url)
        .env("RUST_LOG", "warn")
        .output()
        .unwrap();
    Out {
        code: out.status.code(),
        stdout: String::from_utf8(out.stdout).unwrap(),
        stderr: String::from_utf8(out.stderr).unwrap(),
    }
}

#[tokio::test]
async fn cli_lists_shows_replays_and_purges_dead_letters() {
    let (_dir, url, inbox) = sqlite_inbox_named("cli.db").await;
    let d1 = insert(&inbox, &dead("t/a", "evt-1", hours(3))).await;
    let done = insert(
        &inbox,
        &Ev {
            processed_at: Some(t0()),
            ..ev("t/a", "evt-2", "processed")
        },
    )
    .await;
    let d2 = insert(
        &inbox,
        &Ev {
            body: vec![0xff, 0x00, 0x01],
            ..dead("t/b", "evt-3", hours(1))
        },
    )
    .await;
    attempt(&inbox, d1, 1, Some(503), "dead_letter").await;
    inbox.close().await;

    // list -o json: one array, newest dead letter first.
    let out = hookgate(&url, &["dlq", "list", "-o", "json"]);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let list: Value = serde_json::from_str(&out.stdout).unwrap();
    let list = list.as_array().unwrap();
    assert_eq!(
        list.iter()
            .map(|r| r["id"].as_i64().unwrap())
            .collect::<Vec<_>>(),
        [d2, d1]
    );
    assert_eq!(list[1]["integration"], "t/a");
    assert_eq!(list[1]["event_id"], "evt-1");
    assert_eq!(list[1]["event_type"], "invoice.paid");
    assert_eq!(list[1]["attempts"], 5);
    assert_eq!(list[1]["last_error"], "HTTP 503 from target");
    assert_eq!(list[1]["received_at"], "2026-05-31T12:00:00Z");
    assert_eq!(list[1]["dead_lettered_at"], "2026-06-01T09:00:00Z");
    let out = hookgate(&url, &["dlq", "list", "-o", "json", "--integration", "t/a"]);
    let list: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(list.as_array().unwrap().len(), 1);
    assert_eq!(list[0]["id"], d1);
    let out = hookgate(&url, &["dlq", "list", "--since", "2026-06-01T10:00:00Z"]);
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(lines.len(), 2, "{}", out.stdout);
    assert!(lines[0].starts_with("ID "), "{}", lines[0]);
    assert!(
        lines[1].starts_with(&format!("{d2} ")) && lines[1].contains("evt-3"),
        "{}",
        lines[1]
    );

    // show: the event, its headers, the body (base64 when not UTF-8) and its attempts.
    let out = hookgate(&url, &["dlq", "show", &d1.to_string()]);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(
        out.stdout.contains("content-type: application/json"),
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains("{\"id\":\"evt-1\"}"), "{}", out.stdout);
    assert!(
        out.stdout.contains("delivery attempts (1):"),
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains("attempt 1 failed"), "{}", out.stdout);
    let out = hookgate(&url, &["dlq", "show", &d2.to_string(), "-o", "json"]);
    let shown: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(
        (
            shown["id"].as_i64(),
            &shown["body"],
            &shown["body_encoding"]
        ),
        (Some(d2), &json!("/wAB"), &json!("base64"))
    );
    assert_eq!(shown["attempts"], json!([]));
    let out = hookgate(&url, &["dlq", "show", "424242"]);
    assert_eq!(out.code, Some(1));
    assert!(
        out.stderr.contains("no event with id 424242"),
        "{}",
        out.stderr
    );

    // replay --dry-run: reported, nothing changes.
    let out = hookgate(
        &url,
        &[
            "dlq",
            "replay",
            "--dry-run",
            &d2.to_string(),
            &d1.to_string(),
            &done.to_string(),
        ],
    );
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert_eq!(out.stdout, format!("would replay 2 events: {d1}, {d2}\n"));
    assert!(
        out.stderr.contains(&format!("{done}: status is processed")),
        "{}",
        out.stderr
    );
    let inbox = Inbox::connect(&url).await.unwrap();
    assert_eq!(state(&inbox, d1).await.unwrap().status, "dead_letter");
    assert_eq!(state(&inbox, d2).await.unwrap().status, "dead_letter");
    inbox.close().await;

    // A given id that does not exist fails the command before anything changes.
    let out = hookgate(&url, &["dlq", "replay", &d1.to_string(), "777"]);
    assert_eq!(out.code, Some(1));
    assert!(
        out.stderr.contains("no event with id 777"),
        "{}",
        out.stderr
    );
    let inbox = Inbox::connect(&url).await.unwrap();
    assert_eq!(state(&inbox, d1).await.unwrap().status, "dead_letter");
    inbox.close().await;

    // replay <id>: that one only.
    let out = hookgate(&url, &["dlq", "replay", &d1.to_string()]);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert_eq!(out.stdout, format!("replayed 1 event: {d1}\n"));
    let inbox = Inbox::connect(&url).await.unwrap();
    let s = state(&inbox, d1).await.unwrap();
    assert_eq!(
        (s.status.as_str(), s.attempts, s.dead_lettered_at),
        ("pending", 0, None)
    );
    assert_eq!(state(&inbox, d2).await.unwrap().status, "dead_letter");
    assert_eq!(attempt_rows(&inbox).await, [(d1, 1)]);
    inbox.close().await;

    // Exactly one selection; --since only with --integration.
    assert_eq!(hookgate(&url, &["dlq", "replay"]).code, Some(2));
    assert_eq!(
        hookgate(&url, &["dlq", "replay", "--all", &d2.to_string()]).code,
        Some(2)
    );
    assert_eq!(
        hookgate(&url, &["dlq", "purge", "--all", "--since", "2h"]).code,
        Some(2)
    );

    // purge by integration.
    let out = hookgate(
        &url,
        &["dlq", "purge", "--integration", "t/b", "--since", "36500d"],
    );
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert_eq!(out.stdout, format!("purged 1 event: {d2}\n"));
    let inbox = Inbox::connect(&url).await.unwrap();
    assert_eq!(event_rows(&inbox).await, [d1, done]);
    inbox.close().await;
}
