//! A retention pass that meets a row another transaction holds (an operator's open `psql`
//! session, a stuck migration): one tenant's held row must hold up neither the other tenants'
//! retention nor the rest of the pass, and the pass must end. PostgreSQL only: SQLite has no row
//! locks, its one writer is the busy timeout's business.

use crate::common::destination::Answer;
use crate::worker::{Setup, secs};
use chrono::{DateTime, Utc};
use hookgate::inbox::Inbox;
use hookgate::worker::janitor::Swept;
use sqlx::PgPool;
use std::time::Duration;

/// `w/orders`' event `held` and `w/fast`'s `free`, delivered and finished 31 days ago (past the
/// default retention), on an inbox whose statement timeout is `statement_timeout_ms`; and when.
pub(crate) async fn two_finished_events(
    pool: &PgPool,
    statement_timeout_ms: &str,
) -> (Setup, DateTime<Utc>) {
    let s =
        Setup::new(crate::common::with_statement_timeout(pool, statement_timeout_ms).await).await;
    let w = s.worker();
    let long_ago = Utc::now() - secs(31 * 86400);
    for (integration, id) in [("w/orders", "held"), ("w/fast", "free")] {
        s.dest.script([Answer::Status(200)]);
        s.event(integration, id, "{}").await;
        assert_eq!(w.run_once().await.unwrap(), 1);
        s.finished_at(id, long_ago).await;
    }
    (s, long_ago)
}

/// A transaction that holds `held`'s row until it ends.
pub(crate) async fn hold(pool: &PgPool) -> sqlx::Transaction<'static, sqlx::Postgres> {
    let mut holder = pool.begin().await.unwrap();
    sqlx::query("SELECT 1 FROM inbox_events WHERE event_id = 'held' FOR UPDATE")
        .execute(&mut *holder)
        .await
        .unwrap();
    holder
}

/// Due besides the events, each `long_ago`: a stale ordering version of `w/ordered`, an expired
/// nonce of `w/fast` and the key use of `w/gone`, an integration no longer configured.
async fn due_besides_events(pool: &PgPool, long_ago: DateTime<Utc>) {
    for sql in [
        "INSERT INTO resource_versions (integration, resource_id, version, updated_at) \
         VALUES ('w/ordered', 'r1', 'i:1', $1)",
        "INSERT INTO signature_nonces (integration, digest, expires_at) VALUES ('w/fast', '\\x01', $1)",
        "INSERT INTO key_usage (integration, key_id, last_used_at) VALUES ('w/gone', 'k1', $1)",
    ] {
        sqlx::query(sql).bind(long_ago).execute(pool).await.unwrap();
    }
}

/// `w/orders` has a finished event another transaction holds; `w/fast` has one nobody holds;
/// besides them a stale ordering version, an expired nonce and the key use of a gone integration
/// are due. The pass ends once the held row's wait reached the statement timeout, with all of it
/// done but `w/orders`' event, and says which steps failed; the next pass does the rest.
#[sqlx::test(migrations = "migrations/postgres")]
async fn a_row_held_by_another_transaction_holds_up_only_its_own_step(pool: PgPool) {
    let (s, long_ago) = two_finished_events(&pool, "300").await;
    let w = s.worker();
    due_besides_events(&pool, long_ago).await;
    let holder = hold(&pool).await;

    let pass = tokio::time::timeout(
        Duration::from_secs(20),
        hookgate::worker::janitor::sweep(s.inbox(), &w),
    )
    .await
    .expect("the pass ends while the row is held");
    let failed: Vec<(&str, Option<&str>)> = pass
        .failed
        .iter()
        .map(|f| (f.step.as_str(), f.integration.as_deref()))
        .collect();
    assert_eq!(
        failed,
        [("purge", Some("w/orders")), ("delete", Some("w/orders"))],
        "the held row's steps failed, and only they"
    );
    for f in &pass.failed {
        assert!(
            f.error.to_string().contains("lock timeout"),
            "a lock wait is given up, not the whole statement: {}",
            f.error
        );
    }
    assert_eq!(pass.swept.purged, 1, "w/fast's body");
    assert_eq!(pass.swept.deleted, 1, "w/fast's event");
    assert_eq!(s.event_ids().await, ["held"]);
    assert_eq!(pass.swept.versions, 1);
    assert_eq!(pass.swept.nonces, 1);
    assert_eq!(pass.swept.records, 1, "the gone integration's key use");
    let text = s.metrics.encode();
    for step in ["purge", "delete"] {
        let series = format!("hookgate_retention_failures_total{{step=\"{step}\"}} 1");
        assert!(text.contains(&series), "{series} in\n{text}");
    }

    holder.commit().await.unwrap();
    let next = hookgate::worker::janitor::sweep(s.inbox(), &w).await;
    assert!(next.failed.is_empty(), "{:?}", next.failed);
    assert_eq!(next.swept.deleted, 1);
    assert_eq!(s.event_ids().await, Vec::<String>::new());
}

/// Makes every statement that changes `table` take at least `secs` seconds (a statement-level
/// trigger): the slow statement of a loaded machine, with no lock to wait for.
async fn slow_changes(pool: &PgPool, table: &str, secs: f64) {
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "CREATE OR REPLACE FUNCTION slow_change() RETURNS trigger LANGUAGE plpgsql AS \
         $$ BEGIN PERFORM pg_sleep({secs}); RETURN NULL; END $$"
    )))
    .execute(pool)
    .await
    .unwrap();
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "CREATE TRIGGER slow_change AFTER UPDATE OR DELETE ON {table} \
         FOR EACH STATEMENT EXECUTE FUNCTION slow_change()"
    )))
    .execute(pool)
    .await
    .unwrap();
}

/// Every step's statements take longer than the statement timeout, with no row held: retention is
/// maintenance, which may take longer than a request may wait, so each step lifts the timeout for
/// its own transaction and keeps only its lock waits within it. Until round 47 the versions walk,
/// the nonces' prune and the gone integrations' records ran under the request path's timeout: a
/// stretch slow under load was left as if a row were held (CI, 2026-12-06), and a large enough
/// step failed on every pass.
#[sqlx::test(migrations = "migrations/postgres")]
async fn every_step_outlasts_the_statement_timeout_when_no_row_is_held(pool: PgPool) {
    let (s, long_ago) = two_finished_events(&pool, "200").await;
    let w = s.worker();
    due_besides_events(&pool, long_ago).await;
    for table in [
        "inbox_events",
        "resource_versions",
        "signature_nonces",
        "key_usage",
    ] {
        slow_changes(&pool, table, 0.5).await;
    }

    let pass = hookgate::worker::janitor::sweep(s.inbox(), &w).await;
    let failed: Vec<String> = pass
        .failed
        .iter()
        .map(|f| format!("{}: {}", f.step.as_str(), f.error))
        .collect();
    assert_eq!(failed, Vec::<String>::new(), "no step timed out");
    assert_eq!(
        (pass.swept.purged, pass.swept.deleted),
        (2, 2),
        "both events' bodies, then the events"
    );
    assert_eq!(s.event_ids().await, Vec::<String>::new());
    assert_eq!(pass.swept.versions, 1);
    assert_eq!(pass.swept.nonces, 1);
    assert_eq!(pass.swept.records, 1, "the gone integration's key use");
}

/// A database that cannot be reached at all ends the pass at its first step: every further step
/// would wait for a connection in vain.
async fn a_pass_on_an_unreachable_database_ends_at_its_first_failure(inbox: Inbox) {
    let s = Setup::new(inbox).await;
    let w = s.worker();
    s.inbox().close().await;
    let pass = hookgate::worker::janitor::sweep(s.inbox(), &w).await;
    let failed: Vec<&str> = pass.failed.iter().map(|f| f.step.as_str()).collect();
    assert_eq!(failed, ["integrations"]);
    assert!(pass.failed[0].error.is_unreachable());
    assert_eq!(pass.swept, Swept::default());
    let series = "hookgate_retention_failures_total{step=\"integrations\"} 1";
    assert!(s.metrics.encode().contains(series));
}

on_both_backends!(a_pass_on_an_unreachable_database_ends_at_its_first_failure);
