//! The inbox figures that run on a timer for as long as hookgate runs: the workers' gauges (every
//! 15 s in every worker process) and the controller's status (every 30 s per integration). The
//! backlog's cost must follow the events still to deliver and the dead letters, not the processed
//! events kept for retention: until round 12 (docs/performance.md) the gauges and the status each
//! read every row of the inbox.

use chrono::{DateTime, Utc};
use hookgate::inbox::{BACKLOG, CONFLICTS, Inbox, PURGES_AFTER, PURGES_RECORDED};
use sqlx::PgPool;

use crate::common::plans::plans;

/// 20,000 processed events of 1 KiB over 20 integrations (~3,000 pages), one a second from
/// [`start`], under keys `v1` and `v2`; then the backlog, per integration `t/0`..`t/9`: two
/// pending, one retry, one processing and one dead letter, under key `v3`. Three events had dedupe
/// conflicts: two of `t/3` (twice each) and one of `t/4`.
async fn inbox_with_history(pool: &PgPool) {
    sqlx::raw_sql(
        "INSERT INTO inbox_events (integration, event_id, scheme, key_id, headers, body, \
         body_sha256, status, received_at, processed_at) \
         SELECT 't/' || (g % 20), 'done_' || g, 'stripe', \
         CASE WHEN g % 40 < 20 THEN 'v1' ELSE 'v2' END, '[]', \
         convert_to(repeat('x', 1000), 'UTF8'), '\\x00', 'processed', \
         timestamptz '2026-11-01 00:00:00Z' + g * interval '1 second', now() \
         FROM generate_series(1, 20000) g; \
         INSERT INTO inbox_events (integration, event_id, scheme, key_id, headers, body, \
         body_sha256, status, received_at, next_attempt_at, locked_until, dead_lettered_at) \
         SELECT 't/' || (g % 10), 'open_' || g, 'stripe', 'v3', '[]', \
         convert_to(repeat('x', 1000), 'UTF8'), '\\x00', \
         (ARRAY['pending', 'pending', 'retry', 'processing', 'dead_letter'])[1 + g / 10], \
         now() - interval '1 minute', now(), now() + interval '1 minute', now() \
         FROM generate_series(0, 49) g; \
         UPDATE inbox_events SET dedupe_conflicts = 2 WHERE event_id IN ('done_3', 'done_43'); \
         UPDATE inbox_events SET dedupe_conflicts = 1 WHERE event_id = 'done_4'; \
         ANALYZE inbox_events;",
    )
    .execute(pool)
    .await
    .unwrap();
}

fn start() -> DateTime<Utc> {
    "2026-11-01T00:00:00Z".parse().unwrap()
}

#[sqlx::test(migrations = "migrations/postgres")]
async fn the_backlog_is_read_through_its_partial_indexes_not_the_inbox(pool: PgPool) {
    inbox_with_history(&pool).await;
    let mut conn = pool.acquire().await.unwrap();
    for integration in ["NULL", "'t/3'"] {
        for (read, plan) in plans(&mut conn, BACKLOG, integration).await {
            assert!(!plan.contains("Seq Scan"), "scans the inbox: {plan}");
            // All integrations: the three partial indexes. One: those, or the `(integration,
            // status)` index with both columns as its conditions; either reads open events only.
            if integration == "NULL" {
                for index in [
                    "inbox_events_waiting",
                    "inbox_events_leases",
                    "inbox_events_dead",
                ] {
                    assert!(plan.contains(index), "{index} not read: {plan}");
                }
            }
            // The inbox is ~3,000 pages; the 50 open events are on a few of them.
            assert!(read < 60, "read {read} buffers: {plan}");
        }
    }

    let backlog = Inbox::Postgres(pool.clone())
        .backlog(Utc::now())
        .await
        .unwrap();
    let count = |status: &str| -> i64 {
        backlog
            .iter()
            .filter(|b| b.status == status)
            .map(|b| b.count)
            .sum()
    };
    assert_eq!(
        ["pending", "retry", "processing", "dead_letter", "processed"].map(count),
        [20, 10, 10, 10, 0]
    );
    assert_eq!(backlog.len(), 40, "ten integrations, four statuses each");
    assert!(backlog.iter().all(|b| match b.status.as_str() {
        "dead_letter" => b.oldest_age_seconds.is_none(),
        _ => b.oldest_age_seconds.is_some_and(|s| (59..120).contains(&s)),
    }));
}

/// 5,000 events of 1 KiB claimed and then delivered since the last vacuum, as a busy worker
/// leaves the inbox within a lease: each left an entry in `inbox_events_leases` for a row
/// version that is gone.
async fn delivered_since_the_last_vacuum(pool: &PgPool) {
    sqlx::raw_sql(
        "ALTER TABLE inbox_events SET (autovacuum_enabled = off); \
         INSERT INTO inbox_events (integration, event_id, scheme, key_id, headers, body, \
         body_sha256, status, received_at, locked_until) \
         SELECT 't/' || (g % 20), 'moved_' || g, 'stripe', 'v3', '[]', \
         convert_to(repeat('x', 1000), 'UTF8'), '\\x00', 'processing', now(), \
         now() + interval '1 minute' FROM generate_series(1, 5000) g; \
         UPDATE inbox_events SET status = 'processed', processed_at = now(), locked_until = NULL \
         WHERE event_id LIKE 'moved_%'; \
         ANALYZE inbox_events;",
    )
    .execute(pool)
    .await
    .unwrap();
}

#[sqlx::test(migrations = "migrations/postgres")]
async fn the_backlog_visits_the_entries_of_delivered_events_once(pool: PgPool) {
    inbox_with_history(&pool).await;
    delivered_since_the_last_vacuum(&pool).await;
    let mut conn = pool.acquire().await.unwrap();
    let (first, plan) = &plans(&mut conn, BACKLOG, "NULL").await[0];
    // ~700 pages of delivered events: the first read finds each of their entries dead.
    assert!(*first > 500, "read {first} buffers: {plan}");
    // Every 15 s in production: a read after it skips them. A scan marks an entry dead only once
    // no transaction older than the delivery runs anywhere on the server (other tests' databases
    // included), so the first read to skip them may come a moment later, never with a bitmap scan.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let reads = plans(&mut conn, BACKLOG, "NULL").await;
        if reads.iter().all(|(read, _)| *read < 60) {
            break;
        }
        let (read, plan) = &reads[0];
        assert!(
            std::time::Instant::now() < deadline,
            "read {read} buffers again: {plan}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
}

/// Migrations before 0006 (`key_usage` and the conflicts index), applied from a copy of them.
async fn migrate_before_0006(pool: &PgPool) {
    let before = tempfile::tempdir().unwrap();
    for entry in std::fs::read_dir("migrations/postgres").unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_str().unwrap().to_string();
        if name.as_str() < "0006" {
            std::fs::copy(&path, before.path().join(name)).unwrap();
        }
    }
    sqlx::migrate::Migrator::new(before.path())
        .await
        .unwrap()
        .run(pool)
        .await
        .unwrap();
}

async fn index_oid(pool: &PgPool, name: &str) -> Option<i64> {
    sqlx::query_scalar("SELECT to_regclass($1)::oid::bigint")
        .bind(name)
        .fetch_one(pool)
        .await
        .unwrap()
}

/// An inbox that has history when migration 0006 comes: `key_usage` starts from each key's latest
/// event, the conflicts index is read with a few buffers, and the controller's reading of one
/// integration (backlog, keys, conflicts) holds none of another's. The conflicts index is built
/// by hand beforehand with `CREATE INDEX CONCURRENTLY`, as README's upgrade section says, and the
/// migration keeps it.
#[sqlx::test(migrations = false)]
async fn an_upgraded_inbox_gives_the_controller_its_figures_from_key_usage(pool: PgPool) {
    migrate_before_0006(&pool).await;
    inbox_with_history(&pool).await;
    sqlx::raw_sql(
        "CREATE INDEX CONCURRENTLY inbox_events_conflicts ON inbox_events (integration) \
         WHERE dedupe_conflicts > 0",
    )
    .execute(&pool)
    .await
    .unwrap();
    let built = index_oid(&pool, "inbox_events_conflicts").await;
    let inbox = Inbox::Postgres(pool.clone());
    inbox.migrate().await.unwrap();
    assert_eq!(
        index_oid(&pool, "inbox_events_conflicts").await,
        built,
        "the migration built the index again"
    );
    sqlx::raw_sql("ANALYZE inbox_events")
        .execute(&pool)
        .await
        .unwrap();

    let mut conn = pool.acquire().await.unwrap();
    for (read, plan) in plans(&mut conn, CONFLICTS, "'t/3'").await {
        assert!(plan.contains("inbox_events_conflicts"), "{plan}");
        assert!(read < 10, "read {read} buffers: {plan}");
    }

    let traffic = inbox.traffic("t/3", Utc::now()).await.unwrap();
    // t/3's events are g = 3, 23, 43, ...: g % 40 is 3 (v1) or 23 (v2); the last are 19963 and 19983.
    let after = |s: i64| start() + chrono::Duration::seconds(s);
    assert_eq!(traffic.keys_last_used.len(), 3, "{traffic:?}");
    assert_eq!(traffic.keys_last_used["v1"], after(19963));
    assert_eq!(traffic.keys_last_used["v2"], after(19983));
    assert!(
        traffic.keys_last_used["v3"] > after(19983),
        "the backlog's key"
    );
    assert_eq!(
        traffic.last_received_at(),
        Some(traffic.keys_last_used["v3"])
    );
    assert_eq!(traffic.dedupe_conflicts, 4, "t/4's conflict is not t/3's");
    assert_eq!(
        traffic
            .backlog
            .iter()
            .map(|b| (b.status.as_str(), b.count))
            .collect::<Vec<_>>(),
        [
            ("dead_letter", 1),
            ("pending", 2),
            ("processing", 1),
            ("retry", 1)
        ]
    );
    assert_eq!(
        inbox.traffic("t/none", Utc::now()).await.unwrap(),
        hookgate::inbox::Traffic::default()
    );
}

/// Every receiver reads the purges the audit trail recorded since its last look, every second,
/// for as long as it runs, and the latest purge at its first look (its memory of committed keys:
/// README "Group commit"). Both go through an index, however many replays the trail holds:
/// automated replays add a row every few minutes.
#[sqlx::test(migrations = "migrations/postgres")]
async fn the_purges_recorded_are_read_through_an_index_not_the_audit_trail(pool: PgPool) {
    let replays = |n: u32| {
        format!(
            "INSERT INTO dlq_audit (at, actor, actor_source, action, selector, event_count, events) \
             SELECT now(), 'cron', 'os_user', 'replay', 'all', 1, '[]' \
             FROM generate_series(1, {n}); ANALYZE dlq_audit;"
        )
    };
    sqlx::raw_sql(sqlx::AssertSqlSafe(replays(20_000)))
        .execute(&pool)
        .await
        .unwrap();
    let inbox = Inbox::Postgres(pool.clone());
    assert_eq!(inbox.purges_recorded().await.unwrap(), 0);

    let explain = format!("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) {PURGES_RECORDED}");
    let plan: serde_json::Value = sqlx::query_scalar(sqlx::AssertSqlSafe(explain))
        .fetch_one(&pool)
        .await
        .unwrap();
    let blocks = |k: &str| plan[0]["Plan"][k].as_i64().unwrap_or(0);
    let read = blocks("Shared Hit Blocks") + blocks("Shared Read Blocks");
    assert!(
        !plan.to_string().contains("Seq Scan"),
        "scans the trail: {plan}"
    );
    // The trail is ~150 pages of replays.
    assert!(read < 10, "read {read} buffers: {plan}");

    // A purge among the replays is the number, and it moves with the next purge only.
    let purge = "INSERT INTO dlq_audit (at, actor, actor_source, action, selector, event_count, \
         events) VALUES (now(), 'ops', 'os_user', 'purge', 'all', 1, '[]') RETURNING id";
    let first: i64 = sqlx::query_scalar(purge).fetch_one(&pool).await.unwrap();
    sqlx::raw_sql(sqlx::AssertSqlSafe(replays(100)))
        .execute(&pool)
        .await
        .unwrap();
    assert_eq!(inbox.purges_recorded().await.unwrap(), first);
    let second: i64 = sqlx::query_scalar(purge).fetch_one(&pool).await.unwrap();
    assert_eq!(inbox.purges_recorded().await.unwrap(), second);

    // What each look after the first reads: the purges since the last one seen, usually none.
    let since_first = inbox.purges_after(first).await.unwrap();
    assert_eq!(
        since_first.iter().map(|p| p.id).collect::<Vec<_>>(),
        [second]
    );
    assert!(inbox.purges_after(second).await.unwrap().is_empty());
    let mut conn = pool.acquire().await.unwrap();
    for (read, plan) in plans(&mut conn, PURGES_AFTER, &second.to_string()).await {
        assert!(!plan.contains("Seq Scan"), "scans the trail: {plan}");
        assert!(read < 10, "read {read} buffers: {plan}");
    }
}
