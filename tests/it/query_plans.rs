//! The plans PostgreSQL caches for the statements that look a batch up in the inbox.
//!
//! A prepared statement's generic plan is cached on its connection until the table is next
//! analyzed. Made for an inbox that has never been analyzed (a new install, or the bench's fresh
//! inbox), the completion's plan hash-joins the batch against every leased row and the duplicate
//! lookup scans the whole inbox, so both cost more as the backlog grows; autovacuum analyzes the
//! inbox within a minute of its first 50 events, and every plan made after that walks an index
//! however large the inbox grows, and however few of its events were leased when it was analyzed
//! (docs/performance.md has the measurements, rounds 3 and 15). Claims and inserts walk an index
//! in every plan; the claims' own tests (their plan, and the buffers a busy worker's claim reads)
//! are at the end.

use chrono::{DateTime, Utc};
use sqlx::PgPool;

/// What the planner knows of the inbox when the plans are cached.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Inbox {
    /// 1,000 events, analyzed: what autovacuum leaves within a minute of the first 50 events.
    Analyzed,
    /// 1,000 events delivered, analyzed: an inbox whose workers keep up, so that the statistics
    /// know of almost no leased row, before a burst of leased events (a backlog claimed, or held
    /// by `hookgate standalone`'s hand-over).
    Settled,
    /// Never analyzed and empty: a new install, until autovacuum first analyzes it.
    New,
}

/// `inbox_events` grows by `rows` events leased until 2030.
async fn grow(pool: &PgPool, from: i64, rows: i64) {
    insert(pool, from, rows, "'processing', 1, NULL, '2030-01-01'").await
}

/// `rows` events of `status, attempts, next_attempt_at, locked_until`.
async fn insert(pool: &PgPool, from: i64, rows: i64, state: &str) {
    let sql = format!(
        "INSERT INTO inbox_events (integration, event_id, scheme, key_id, headers, body, body_sha256, \
         status, attempts, next_attempt_at, locked_until, received_at) \
         SELECT 't/stripe', 'evt_' || g, 'stripe', 'v1', '[]', convert_to(repeat('x', 1000), 'UTF8'), \
         '\\x00', {state}, now() FROM generate_series({from}, {}) g;",
        from + rows - 1
    );
    sqlx::raw_sql(sqlx::AssertSqlSafe(sql))
        .execute(pool)
        .await
        .unwrap();
}

/// The statements, each with arguments for a batch of two events (`evt_5`, `evt_7`).
fn statements() -> [(&'static str, &'static str, &'static str); 2] {
    [
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
}

/// Prepares each statement on one connection and caches its generic plan: once the inbox holds
/// 1,000 events and was analyzed, or on a new inbox. Then grows the inbox to 20,000 rows without
/// new statistics and returns, per statement, the buffers its cached plan read for a batch of two.
async fn cached_plans(pool: &PgPool, inbox: Inbox) -> Vec<(&'static str, i64, String)> {
    // Before any plan is cached: a change to the table's definition makes them all be made again.
    sqlx::raw_sql("ALTER TABLE inbox_events SET (autovacuum_enabled = false)")
        .execute(pool)
        .await
        .unwrap();
    let mut grown = 0;
    if inbox != Inbox::New {
        match inbox {
            Inbox::Settled => insert(pool, 1, 1000, "'processed', 1, NULL, NULL").await,
            _ => grow(pool, 1, 1000).await,
        }
        sqlx::raw_sql("ANALYZE inbox_events")
            .execute(pool)
            .await
            .unwrap();
        grown = 1000;
    }
    let mut conn = pool.acquire().await.unwrap();
    sqlx::raw_sql("SET plan_cache_mode = force_generic_plan")
        .execute(&mut *conn)
        .await
        .unwrap();
    for (n, (_, sql, args)) in statements().into_iter().enumerate() {
        let prepare = format!("PREPARE s{n} AS {sql}; EXPLAIN EXECUTE s{n}({args});");
        sqlx::raw_sql(sqlx::AssertSqlSafe(prepare))
            .execute(&mut *conn)
            .await
            .unwrap();
    }
    grow(pool, grown + 1, 20_000 - grown).await;
    let mut out = Vec::new();
    for (n, (name, _, args)) in statements().into_iter().enumerate() {
        let mut tx = sqlx::Connection::begin(&mut *conn).await.unwrap();
        let explain = format!("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) EXECUTE s{n}({args})");
        let plan: serde_json::Value = sqlx::query_scalar(sqlx::AssertSqlSafe(explain))
            .fetch_one(&mut *tx)
            .await
            .unwrap();
        tx.rollback().await.unwrap();
        let text = plan.to_string();
        let blocks = |k: &str| plan[0]["Plan"][k].as_i64().unwrap_or(0);
        let read = blocks("Shared Hit Blocks") + blocks("Shared Read Blocks");
        out.push((name, read, text));
    }
    out
}

/// The plans a connection caches once the inbox has statistics stay index lookups as the inbox
/// grows twentyfold without new ones.
#[sqlx::test(migrations = "migrations/postgres")]
async fn plans_cached_after_the_inbox_was_analyzed_look_the_batch_up_by_index(pool: PgPool) {
    for (name, read, plan) in cached_plans(&pool, Inbox::Analyzed).await {
        assert!(!plan.contains("Seq Scan"), "{name} scans the inbox: {plan}");
        // The inbox is ~3,000 pages; two lookups and their writes read a few dozen.
        assert!(read < 300, "{name} read {read} buffers: {plan}");
    }
}

/// Statistics that know of almost no leased row must not make the completion walk every leased
/// row for each of its batch: in round 15 a backlog of 4,000 leased events made each completion
/// take 300-400 ms that way, and the pipeline delivered a seventh of its rate.
#[sqlx::test(migrations = "migrations/postgres")]
async fn plans_cached_while_few_events_were_leased_look_the_batch_up_by_index(pool: PgPool) {
    for (name, read, plan) in cached_plans(&pool, Inbox::Settled).await {
        assert!(!plan.contains("Seq Scan"), "{name} scans the inbox: {plan}");
        assert!(read < 300, "{name} read {read} buffers: {plan}");
    }
}

/// Why the bench analyzes each step's fresh inbox after the warm-up, as autovacuum would: the same
/// plans cached before the inbox has statistics read the whole inbox for a batch of two.
#[sqlx::test(migrations = "migrations/postgres")]
async fn plans_cached_for_an_inbox_never_analyzed_read_the_whole_inbox(pool: PgPool) {
    for (name, read, plan) in cached_plans(&pool, Inbox::New).await {
        assert!(read > 1000, "{name} read only {read} buffers: {plan}");
    }
}

/// A claim walks the waiting and lease indexes and stops at its limit, whatever the backlog: the
/// earlier `OR` of both conditions made PostgreSQL scan and sort the whole inbox on every claim.
/// Finding the integrations with waiting events is one probe each, not a pass over their events.
#[sqlx::test(migrations = "migrations/postgres")]
async fn claim_walks_indexes_instead_of_scanning_the_inbox(pool: PgPool) {
    sqlx::raw_sql(
        "INSERT INTO inbox_events (integration, event_id, scheme, key_id, headers, body, body_sha256, \
         status, next_attempt_at, received_at) \
         SELECT 't/stripe-' || (g % 5), 'evt_' || g, 'stripe', 'v1', '[]', \
         convert_to(repeat('x', 1000), 'UTF8'), '\\x00', 'pending', \
         now() - interval '1 minute', now() FROM generate_series(1, 20000) g; \
         INSERT INTO inbox_events (integration, event_id, scheme, key_id, headers, body, \
         body_sha256, status, received_at, processed_at) \
         SELECT 't/quiet', 'evt_' || g, 'stripe', 'v1', '[]', '\\x00', '\\x00', 'processed', \
         now(), now() FROM generate_series(1, 20000) g; \
         ANALYZE inbox_events;",
    )
    .execute(&pool)
    .await
    .unwrap();
    let full = claim_plan(&pool, hookgate::inbox::CLAIM_PG, None, "").await;
    let names: Vec<String> = (0..5).map(|i| format!("t/stripe-{i}")).collect();
    let from = vec![Utc::now() - chrono::Duration::hours(1); 5];
    let cursor = claim_plan(
        &pool,
        hookgate::inbox::CLAIM_FROM_PG,
        Some((names, from)),
        "",
    )
    .await;
    for plan in [&full, &cursor] {
        let seq = |n: &serde_json::Value| {
            n["Node Type"] == "Seq Scan" && n["Relation Name"] == "inbox_events"
        };
        assert!(!any_node(plan, &seq), "the claim scans the inbox:\n{plan}");
        assert!(
            any_node(plan, &|n| n["Index Name"] == "inbox_events_waiting"),
            "{plan}"
        );
    }
    assert!(
        any_node(&full, &|n| n["Index Name"] == "inbox_events_leases"),
        "{full}"
    );
    // Five integrations of 4,000 waiting events each and one of 20,000 delivered, 16 claimed: a
    // few hundred pages with the claim's own writes, not the ~3,000 of the rows or the delivered
    // events' index entries and rows.
    let (_, read) = claim_buffers(&pool, hookgate::inbox::CLAIM_PG, None).await;
    assert!(read < 600, "the full claim read {read} buffers");
    // It locks the 16 rows it takes, not 16 of each integration's (80, the first version).
    let plan = claim_plan(&pool, hookgate::inbox::CLAIM_PG, None, "ANALYZE, ").await;
    let locked = locked(&plan);
    assert!((12..=20).contains(&locked), "{locked} locked: {plan}");
}

/// About the rows an analyzed plan's `FOR UPDATE` nodes locked: `EXPLAIN` gives each node's
/// rows per loop rounded, times its loops.
fn locked(node: &serde_json::Value) -> i64 {
    let own = if node["Node Type"] == "LockRows" {
        let n = |k: &str| node[k].as_i64().unwrap_or(0);
        n("Actual Rows") * n("Actual Loops")
    } else {
        0
    };
    own + node["Plans"]
        .as_array()
        .map_or(0, |p| p.iter().map(locked).sum::<i64>())
}

/// The plan of a claim, as JSON (`from`: the cursors of [`hookgate::inbox::CLAIM_FROM_PG`];
/// `options`: `EXPLAIN`'s, each followed by a comma); the claim is rolled back.
async fn claim_plan(
    pool: &PgPool,
    sql: &str,
    from: Option<(Vec<String>, Vec<DateTime<Utc>>)>,
    options: &str,
) -> serde_json::Value {
    let mut tx = pool.begin().await.unwrap();
    let explain = format!("EXPLAIN ({options}FORMAT JSON) {sql}");
    let q = sqlx::query_scalar::<_, serde_json::Value>(sqlx::AssertSqlSafe(explain))
        .bind(Utc::now() + chrono::Duration::minutes(1))
        .bind(Utc::now())
        .bind(16_i64)
        .bind(Vec::<String>::new());
    let q = match from {
        Some((names, at)) => {
            let cap = hookgate::inbox::seen_per_integration(16, names.len());
            q.bind(names).bind(at).bind(cap)
        }
        None => q,
    };
    let plan = q.fetch_one(&mut *tx).await.unwrap();
    tx.rollback().await.unwrap();
    plan[0]["Plan"].clone()
}

/// Whether `node` or a node under it is `is`.
fn any_node(node: &serde_json::Value, is: &dyn Fn(&serde_json::Value) -> bool) -> bool {
    is(node)
        || node["Plans"]
            .as_array()
            .is_some_and(|p| p.iter().any(|n| any_node(n, is)))
}

/// Shared buffers that one claim's scans of the waiting index read, and that the whole claim
/// read, from `EXPLAIN (ANALYZE, BUFFERS)`.
async fn claim_buffers(
    pool: &PgPool,
    sql: &str,
    from: Option<(Vec<String>, Vec<DateTime<Utc>>)>,
) -> (i64, i64) {
    let plan = claim_plan(pool, sql, from, "ANALYZE, BUFFERS, ").await;
    fn read(node: &serde_json::Value) -> i64 {
        let blocks = |k: &str| node[k].as_i64().unwrap_or(0);
        blocks("Shared Hit Blocks") + blocks("Shared Read Blocks")
    }
    fn waiting_scans(node: &serde_json::Value) -> i64 {
        let own = if node["Index Name"] == "inbox_events_waiting" {
            read(node)
        } else {
            0
        };
        let inner = node["Plans"]
            .as_array()
            .map_or(0, |p| p.iter().map(waiting_scans).sum());
        own + inner
    }
    (waiting_scans(&plan), read(&plan))
}

/// Events processed since the last VACUUM leave dead entries at the oldest end of each
/// integration's waiting events in the index. A full claim walks them all; the claim a busy
/// worker makes between full ones starts past them, so its cost does not grow with what was
/// delivered before it (it had made delivery collapse under a long backlog: docs/performance.md).
#[sqlx::test(migrations = "migrations/postgres")]
async fn a_busy_workers_claim_skips_the_entries_of_events_already_delivered(pool: PgPool) {
    sqlx::raw_sql(
        "ALTER TABLE inbox_events SET (autovacuum_enabled = false); \
         INSERT INTO inbox_events (integration, event_id, scheme, key_id, headers, body, body_sha256, \
         status, next_attempt_at, received_at) \
         SELECT 't/stripe', 'evt_' || g, 'stripe', 'v1', '[]', convert_to(repeat('x', 1000), 'UTF8'), \
         '\\x00', 'pending', now() - interval '1 hour' + g * interval '1 ms', now() \
         FROM generate_series(1, 60000) g; \
         ANALYZE inbox_events; \
         UPDATE inbox_events SET status = 'processed', processed_at = now() \
         WHERE event_id IN (SELECT 'evt_' || g FROM generate_series(1, 50000) g);",
    )
    .execute(&pool)
    .await
    .unwrap();
    // The oldest row still due: where the worker's last claim left its cursor.
    let from: DateTime<Utc> = sqlx::query_scalar(
        "SELECT MIN(next_attempt_at) FROM inbox_events WHERE status = 'pending'",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    // Twice each: the first pass over dead entries also marks them dead in the index.
    let full = || claim_buffers(&pool, hookgate::inbox::CLAIM_PG, None);
    let full = full().await.0.min(full().await.0);
    let at = Some((vec!["t/stripe".to_string()], vec![from]));
    let cursor = || claim_buffers(&pool, hookgate::inbox::CLAIM_FROM_PG, at.clone());
    let cursor = cursor().await.0.min(cursor().await.0);
    println!("waiting-index buffers per claim: full {full}, from the cursor {cursor}");
    assert!(
        cursor * 5 < full,
        "the cursor claim read {cursor} buffers, the full claim {full}"
    );
}
