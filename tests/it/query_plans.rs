//! Statements that look a batch up in a table that grows are planned for each batch.
//!
//! PostgreSQL caches a prepared statement's generic plan on its connection and keeps it until the
//! table is next analyzed. A plan made while the inbox was empty (a new install, or the bench's
//! fresh inbox) joins the batch against the table by scanning it, and keeps doing so as the table
//! grows: every completion, or every batch holding a duplicate, then reads the whole backlog
//! (docs/performance.md measured completions at 1.5-1.9 ms per batch instead of 0.4 ms, and
//! delivery collapsing under it). Claims and inserts are safe: they walk an index in every plan.

use crate::common::*;
use chrono::Utc;
use hookgate::inbox::{Attempt, Completer, Completion, Inbox};
use sqlx::PgPool;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use std::time::Duration;

/// Sends a new Stripe event and a new GitHub event (whose delivery id is not signed, so its
/// signature digest is stored too), each twice, then claims and completes what is due.
async fn one_round(h: &Harness, completer: &Completer, i: usize) {
    let body = stripe_body(&format!("evt_{i}"), "invoice.paid");
    let (path, headers) = h.sign("t/stripe", &body, opts());
    for _ in 0..2 {
        assert_eq!(h.post(&path, &headers, body.clone()).await.status, 200);
    }
    let gh = format!(r#"{{"n":{i}}}"#);
    let mut github = opts();
    github.event_id = Some(format!("delivery-{i}"));
    let (path, headers) = h.sign("t/github", &gh, github);
    for _ in 0..2 {
        assert_eq!(h.post(&path, &headers, gh.clone()).await.status, 200);
    }
    let inbox = h.receiver.inbox();
    let now = Utc::now();
    let claimed = inbox
        .claim(now, now + chrono::Duration::minutes(1), 10)
        .await
        .unwrap();
    assert_eq!(claimed.len(), 2, "round {i}");
    for c in &claimed {
        let attempt = Attempt {
            started_at: now,
            duration_ms: 1,
            status_code: Some(200),
            error: None,
        };
        let done = Completion::Processed { version: None };
        assert!(
            completer
                .complete(c, done, Some(attempt), now)
                .await
                .unwrap()
        );
    }
}

/// Every statement this connection has prepared and now runs from a cached generic plan.
async fn generic_plans(pool: &PgPool) -> Vec<String> {
    sqlx::query_scalar("SELECT statement FROM pg_prepared_statements WHERE generic_plans > 0")
        .fetch_all(pool)
        .await
        .unwrap()
}

/// A statement that joins an array parameter against a table, rather than inserting it.
fn joins_a_batch(sql: &str) -> bool {
    (sql.contains("UNNEST(") || sql.contains("= ANY(")) && !sql.trim_start().starts_with("INSERT")
}

#[sqlx::test(migrations = "migrations/postgres")]
async fn statements_joining_a_batch_are_never_run_from_a_cached_plan(
    opts: PgPoolOptions,
    conn: PgConnectOptions,
) {
    // One connection: everything below is prepared where the last query looks.
    let pool = opts.max_connections(1).connect_with(conn).await.unwrap();
    let h = harness(Inbox::Postgres(pool.clone()));
    h.set_now(Utc::now());
    let completer = Completer::start(h.receiver.inbox().clone(), Duration::from_secs(5));
    // PostgreSQL tries five custom plans before it settles on a generic one.
    for i in 0..8 {
        one_round(&h, &completer, i).await;
    }
    let cached = generic_plans(&pool).await;
    assert!(
        cached.iter().any(|s| s.contains("inbox_events")),
        "the test exercised statements with cached plans: {cached:#?}"
    );
    let joining: Vec<_> = cached.iter().filter(|s| joins_a_batch(s)).collect();
    assert!(
        joining.is_empty(),
        "these join a batch against a table from a cached plan: {joining:#?}"
    );
}

/// What a statement planned for its own batch does on an inbox that grew to 20,000 rows and was
/// never analyzed: it looks the batch up through an index.
#[sqlx::test(migrations = "migrations/postgres")]
async fn a_batch_planned_for_itself_uses_the_index_on_a_grown_unanalyzed_inbox(pool: PgPool) {
    sqlx::raw_sql(
        "ALTER TABLE inbox_events SET (autovacuum_enabled = false); \
         INSERT INTO inbox_events (integration, event_id, scheme, key_id, headers, body, body_sha256, \
         status, attempts, next_attempt_at, locked_until, received_at) \
         SELECT 't/stripe', 'evt_' || g, 'stripe', 'v1', '[]', convert_to(repeat('x', 1000), 'UTF8'), \
         '\\x00', 'processing', 1, NULL, '2030-01-01', now() FROM generate_series(1, 20000) g;",
    )
    .execute(&pool)
    .await
    .unwrap();
    for (n, (name, sql, args)) in [
        (
            "completion",
            hookgate::inbox::COMPLETE_MANY_PG,
            "'{5,7}', '{1,1}', '{processed,processed}', '{NULL,NULL}', '{NULL,NULL}', \
             '{2030-01-01,2030-01-01}', '{NULL,NULL}', '{NULL,NULL}', '{2030-01-01,2030-01-01}', \
             '{1,1}', '{200,200}', '{NULL,NULL}', '{2030-01-01,2030-01-01}'",
        ),
        (
            "stored hashes",
            hookgate::inbox::STORED_HASHES_PG,
            "'{t/stripe,t/stripe}', '{evt_5,evt_7}'",
        ),
    ]
    .into_iter()
    .enumerate()
    {
        let mut tx = pool.begin().await.unwrap();
        let prepare = format!("PREPARE s{n} AS {sql}");
        sqlx::raw_sql(sqlx::AssertSqlSafe(prepare))
            .execute(&mut *tx)
            .await
            .unwrap();
        sqlx::raw_sql("SET LOCAL plan_cache_mode = force_custom_plan")
            .execute(&mut *tx)
            .await
            .unwrap();
        let explain = format!("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) EXECUTE s{n}({args})");
        let plan: serde_json::Value = sqlx::query_scalar(sqlx::AssertSqlSafe(explain))
            .fetch_one(&mut *tx)
            .await
            .unwrap();
        tx.rollback().await.unwrap();
        let text = plan.to_string();
        assert!(!text.contains("Seq Scan"), "{name} scans the inbox: {text}");
        let hit = plan[0]["Plan"]["Shared Hit Blocks"].as_i64().unwrap_or(0);
        let read = plan[0]["Plan"]["Shared Read Blocks"].as_i64().unwrap_or(0);
        // The inbox is ~3,000 pages; two lookups and their writes read a few dozen.
        assert!(
            hit + read < 300,
            "{name} read {} buffers: {text}",
            hit + read
        );
    }
}
