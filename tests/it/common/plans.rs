//! PostgreSQL plans of the statements hookgate runs, for the tests that hold them to an index.

/// Prepares `sql` on `conn`, then for the plan made for these arguments and for the generic one a
/// pooled connection caches: the plan, and the buffers it read.
pub async fn plans(conn: &mut sqlx::PgConnection, sql: &str, args: &str) -> Vec<(i64, String)> {
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let name = format!(
        "s{}",
        NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    );
    let prepare = format!("PREPARE {name} AS {sql}");
    sqlx::raw_sql(sqlx::AssertSqlSafe(prepare))
        .execute(&mut *conn)
        .await
        .unwrap();
    let mut out = Vec::new();
    for mode in ["force_custom_plan", "force_generic_plan"] {
        let set = format!("SET plan_cache_mode = {mode}");
        sqlx::raw_sql(sqlx::AssertSqlSafe(set))
            .execute(&mut *conn)
            .await
            .unwrap();
        // A statement without parameters is executed without parentheses.
        let args = if args.is_empty() {
            String::new()
        } else {
            format!("({args})")
        };
        let explain = format!("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) EXECUTE {name}{args}");
        let plan: serde_json::Value = sqlx::query_scalar(sqlx::AssertSqlSafe(explain))
            .fetch_one(&mut *conn)
            .await
            .unwrap();
        let blocks = |k: &str| plan[0]["Plan"][k].as_i64().unwrap_or(0);
        let read = blocks("Shared Hit Blocks") + blocks("Shared Read Blocks");
        out.push((read, format!("{mode}: {plan}")));
    }
    out
}
