//! The retention janitor's statements walk the rows they change, not the events retention keeps.
//! Until migration 0010 each of them read the whole inbox (a sequential scan: 0.5-0.6 s per
//! statement per 2 million events, docs/performance.md round 38), every pass, in every worker.

use chrono::{DateTime, Duration, Utc};
use hookgate::inbox::{
    DELETE_FINISHED_PG, FORGET_VERSIONS_PG, Inbox, PRUNE_NONCES_PG, PURGE_PG, VERSIONS_PAGES,
    WITH_FINISHED,
};
use sqlx::PgPool;

use crate::common::plans::plans;

/// 20,000 events over 20 integrations, one finished every 2 minutes from 30 days before [`now`]
/// (and 100 before that) to 2.4 days before: the 3,440 finished in the last 7 days (1 KiB each,
/// 500 pages) and 100 before that keep their body. Of each integration, the 5 oldest
/// finished more than 30 days ago and 5 with a body more than 7 days ago. 20,000 signature
/// nonces, 10 of them expired.
async fn inbox_kept_for_retention(pool: &PgPool) {
    sqlx::raw_sql(
        "INSERT INTO inbox_events (integration, event_id, scheme, key_id, headers, body, \
         body_sha256, status, received_at, processed_at, body_purged_at) \
         SELECT 't/' || (g % 20), 'e_' || g, 'stripe', 'v1', \
         ('[[\"user-agent\", \"' || repeat('x', 400) || '\"]]')::jsonb, \
         CASE WHEN g >= 16560 THEN convert_to(repeat('x', 1000), 'UTF8') ELSE '' END, \
         '\\x00', CASE WHEN g % 2 = 0 THEN 'processed' ELSE 'ignored' END, \
         t - interval '1 second', t, CASE WHEN g < 16560 THEN t + interval '7 days' END \
         FROM (SELECT g, timestamptz '2026-12-01 00:00:00Z' - interval '30 days' \
         + (g - 100) * interval '2 minutes' FROM generate_series(0, 19999) g) s(g, t); \
         INSERT INTO signature_nonces (integration, digest, expires_at) \
         SELECT 't/' || (g % 20), sha256(convert_to(g::text, 'UTF8')), \
         timestamptz '2026-12-01 00:00:00Z' + (g - 10) * interval '1 second' \
         FROM generate_series(0, 19999) g; \
         ANALYZE inbox_events; ANALYZE signature_nonces;",
    )
    .execute(pool)
    .await
    .unwrap();
}

fn now() -> DateTime<Utc> {
    "2026-12-01T00:00:00Z".parse().unwrap()
}

fn at(t: DateTime<Utc>) -> String {
    format!("timestamptz '{}'", t.to_rfc3339())
}

#[sqlx::test(migrations = "migrations/postgres")]
async fn each_retention_statement_reads_the_rows_it_changes_not_the_inbox(pool: PgPool) {
    inbox_kept_for_retention(&pool).await;
    let dedupe = at(now() - Duration::days(30));
    let payload = at(now() - Duration::days(7));
    let statements = [
        (
            "purge",
            PURGE_PG,
            format!("'', {}, 't/3', {payload}", at(now())),
        ),
        ("delete", DELETE_FINISHED_PG, format!("'t/3', {dedupe}")),
        ("integrations", WITH_FINISHED, String::new()),
        ("nonces", PRUNE_NONCES_PG, at(now())),
    ];
    let mut conn = pool.acquire().await.unwrap();
    let pages: i64 =
        sqlx::query_scalar("SELECT relpages::bigint FROM pg_class WHERE relname = 'inbox_events'")
            .fetch_one(&mut *conn)
            .await
            .unwrap();
    assert!(pages > 1500, "the inbox is {pages} pages");
    for (what, sql, args) in statements {
        // The plans run the statements: roll their changes back for the next one.
        sqlx::raw_sql("BEGIN").execute(&mut *conn).await.unwrap();
        for (read, plan) in plans(&mut conn, sql, &args).await {
            assert!(!plan.contains("Seq Scan"), "{what} scans a table: {plan}");
            // What each statement changes is on a few pages (with their index entries).
            assert!(read < 100, "{what} read {read} buffers: {plan}");
            // The batch's rows are found by their ids (or places), never by testing rows an index
            // walk finds against the whole batch, one comparison per id.
            for filter in plan.split("\"Filter\":\"").skip(1) {
                let filter = filter.split('"').next().unwrap_or_default();
                assert!(
                    !filter.contains("ANY ($"),
                    "{what} filters on the batch: {plan}"
                );
            }
        }
        sqlx::raw_sql("ROLLBACK").execute(&mut *conn).await.unwrap();
    }

    // What they changed, run for real: the pass's work, and only that.
    let inbox = Inbox::Postgres(pool.clone());
    let purged = inbox
        .purge_payloads("t/3", now() - Duration::days(7), now())
        .await
        .unwrap();
    let deleted = inbox
        .delete_finished("t/3", now() - Duration::days(30))
        .await
        .unwrap();
    let names = inbox.integrations_with_finished().await.unwrap();
    let nonces = inbox.prune_nonces(now()).await.unwrap();
    assert_eq!((purged, deleted, names.len(), nonces), (5, 5, 20, 11));
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(names, sorted, "one probe per name, in the index's order");
}

/// Ordering versions have no index by age (it would slow every version advance): each statement
/// of the walk reads its stretch of pages by their addresses, custom and generic plan alike,
/// never the table. A server without TID range scans (before PostgreSQL 14) would read the
/// whole table per stretch.
#[sqlx::test(migrations = "migrations/postgres")]
async fn each_statement_of_the_versions_walk_reads_its_stretch_of_pages(pool: PgPool) {
    sqlx::raw_sql(
        "INSERT INTO resource_versions (integration, resource_id, version, updated_at) \
         SELECT 't/' || (g % 20), 'cus_' || md5(g::text), 'i:1', \
         timestamptz '2026-12-01 00:00:00Z' - (g % 60) * interval '1 day' \
         FROM generate_series(1, 200000) g; ANALYZE resource_versions;",
    )
    .execute(&pool)
    .await
    .unwrap();
    let mut conn = pool.acquire().await.unwrap();
    let pages: i64 = sqlx::query_scalar(
        "SELECT relpages::bigint FROM pg_class WHERE relname = 'resource_versions'",
    )
    .fetch_one(&mut *conn)
    .await
    .unwrap();
    assert!(pages > 10 * VERSIONS_PAGES, "the table is {pages} pages");
    let cutoff = at(now() - Duration::days(30));
    let args = format!(
        "ARRAY['t/3', 't/4'], ARRAY[{cutoff}, {cutoff}], {}, {}, {}",
        5 * VERSIONS_PAGES,
        6 * VERSIONS_PAGES,
        at(now())
    );
    sqlx::raw_sql("BEGIN").execute(&mut *conn).await.unwrap();
    for (read, plan) in plans(&mut conn, FORGET_VERSIONS_PG, &args).await {
        assert!(plan.contains("Tid Range Scan"), "{plan}");
        assert!(!plan.contains("Seq Scan"), "{plan}");
        // Its 100 pages and a buffer per version it forgets (about 320 here, in the first plan
        // run; none left for the second), not the table's 2,000.
        assert!(read < pages / 4, "read {read} of {pages} pages: {plan}");
    }
    sqlx::raw_sql("ROLLBACK").execute(&mut *conn).await.unwrap();
}
