//! A worker process that stops during a retention pass (a rolling update, a scale-down): the pass
//! ends after the batch it is on, within the grace period, and gives its turn back, so the next
//! process to ask makes the rest at once. Until round 44 the pass was aborted mid-statement: the
//! batch under way was rolled back and the rest waited for the next period.

use crate::janitor_locks::{hold, two_finished_events};
use crate::worker::{Setup, cfg, secs};
use chrono::Utc;
use hookgate::inbox::Inbox;
use hookgate::worker::janitor::pass_if_due;
use hookgate::worker::{Worker, WorkerConfig};
use sqlx::PgPool;
use std::time::Duration;

const EVERY: Duration = hookgate::worker::defaults::JANITOR_EVERY;

/// `held` and `free` (`janitor_locks::two_finished_events`) and a stale ordering version, all due
/// for the pass; another transaction holds `held`'s row.
async fn due_with_a_held_row(
    pool: &PgPool,
    statement_timeout_ms: &str,
) -> (Setup, sqlx::Transaction<'static, sqlx::Postgres>) {
    let (s, long_ago) = two_finished_events(pool, statement_timeout_ms).await;
    sqlx::query(
        "INSERT INTO resource_versions (integration, resource_id, version, updated_at) \
         VALUES ('w/ordered', 'r1', 'i:1', $1)",
    )
    .bind(long_ago)
    .execute(pool)
    .await
    .unwrap();
    (s, hold(pool).await)
}

/// Starts `w` (its janitor asks at once) and returns once its pass waits for a held row in a
/// statement that begins with `statement`.
async fn start_until_the_pass_waits(
    pool: &PgPool,
    w: Worker,
    statement: &str,
) -> (
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<hookgate::worker::Stopped>,
) {
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let run = tokio::spawn(async move {
        w.run(async move {
            let _ = stopped.await;
        })
        .await
    });
    // This test's database only: the others' tests run beside it on the same server.
    let waiting = "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() \
         AND wait_event_type = 'Lock' AND starts_with(query, $1)";
    tokio::time::timeout(Duration::from_secs(20), async {
        while sqlx::query_scalar::<_, i64>(waiting)
            .bind(statement)
            .fetch_one(pool)
            .await
            .unwrap()
            == 0
        {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("the janitor's pass waits for the held row");
    (stop, run)
}

/// The first statement to meet `held`'s row, whichever integration the pass takes first.
const PURGE: &str = "UPDATE inbox_events";

fn with_grace(grace: Duration) -> WorkerConfig {
    WorkerConfig { grace, ..cfg() }
}

/// (purged, still there) for `held`, and whether the stale version is still there.
async fn left(pool: &PgPool) -> ((bool, bool), bool) {
    let held: Option<bool> = sqlx::query_scalar(
        "SELECT body_purged_at IS NOT NULL FROM inbox_events WHERE event_id = 'held'",
    )
    .fetch_optional(pool)
    .await
    .unwrap();
    let versions: i64 = sqlx::query_scalar("SELECT count(*) FROM resource_versions")
        .fetch_one(pool)
        .await
        .unwrap();
    ((held == Some(true), held.is_some()), versions == 1)
}

#[sqlx::test(migrations = "migrations/postgres")]
async fn a_stopping_worker_ends_its_retention_pass_after_the_batch_it_is_on(pool: PgPool) {
    // The held row's wait would reach its lock timeout (the statement timeout) only after the test.
    let (s, holder) = due_with_a_held_row(&pool, "60000").await;
    let w = s.worker_with(with_grace(Duration::from_secs(30)));
    let (stop, run) = start_until_the_pass_waits(&pool, w, PURGE).await;

    stop.send(()).unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !run.is_finished(),
        "the worker waits for the statement its pass is on"
    );
    holder.commit().await.unwrap();
    let stopped = tokio::time::timeout(Duration::from_secs(20), run)
        .await
        .expect("the worker stops once the statement ends")
        .unwrap();
    assert_eq!(stopped.held, 0);

    assert_eq!(
        left(&pool).await,
        ((true, true), true),
        "the batch under way was committed (held's body purged); nothing after it ran \
         (held's event and the stale version are still there)"
    );
    let again = pass_if_due(s.inbox(), &s.worker(), Utc::now(), EVERY)
        .await
        .unwrap()
        .expect("the turn was given back: the next process to ask makes the pass at once");
    assert!(again.failed.is_empty(), "{:?}", again.failed);
    assert!(!again.stopped);
    assert_eq!(s.event_ids().await, Vec::<String>::new());
    assert_eq!(again.swept.versions, 1);
}

/// Versions over several stretches of the table, all due, and the stretch the walk is on waits
/// for a row another transaction holds when the worker is stopped: the walk commits that
/// stretch, walks no further, and the turn given back lets the next pass forget the rest. Until
/// round 46 the walk (and the nonces' prune) went on to the end, past a stop, and a long one was
/// cut off at the end of the grace with its turn still taken.
#[sqlx::test(migrations = "migrations/postgres")]
async fn a_stopping_worker_ends_its_versions_walk_after_the_stretch_it_is_on(pool: PgPool) {
    let s = Setup::new(crate::common::with_statement_timeout(&pool, "60000").await).await;
    let n: i64 = 40_000;
    sqlx::query(
        "INSERT INTO resource_versions (integration, resource_id, version, updated_at) \
         SELECT 'w/ordered', 'r' || g, 'i:1', $2 FROM generate_series(1, $1) g",
    )
    .bind(n)
    .bind(Utc::now() - secs(31 * 86400))
    .execute(&pool)
    .await
    .unwrap();
    let pages: i64 = sqlx::query_scalar(
        "SELECT pg_relation_size('resource_versions') / current_setting('block_size')::int8",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert!(pages > 2 * hookgate::inbox::VERSIONS_PAGES, "{pages} pages");
    let mut holder = pool.begin().await.unwrap();
    sqlx::query("SELECT 1 FROM resource_versions FOR UPDATE")
        .execute(&mut *holder)
        .await
        .unwrap();
    let w = s.worker_with(with_grace(Duration::from_secs(30)));
    let (stop, run) = start_until_the_pass_waits(&pool, w, "DELETE FROM resource_versions").await;

    stop.send(()).unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !run.is_finished(),
        "the worker waits for the stretch its walk is on"
    );
    holder.commit().await.unwrap();
    tokio::time::timeout(Duration::from_secs(20), run)
        .await
        .expect("the worker stops once the stretch ends")
        .unwrap();
    let versions = || async {
        sqlx::query_scalar::<_, i64>("SELECT count(*) FROM resource_versions")
            .fetch_one(&pool)
            .await
            .unwrap()
    };
    let left = versions().await;
    assert!(
        0 < left && left < n,
        "the stretch under way was forgotten and no other: {left} of {n} left"
    );
    let again = pass_if_due(s.inbox(), &s.worker(), Utc::now(), EVERY)
        .await
        .unwrap()
        .expect("the turn was given back");
    assert!(again.failed.is_empty(), "{:?}", again.failed);
    assert_eq!(again.swept.versions, left as u64);
    assert_eq!(versions().await, 0);
}

#[sqlx::test(migrations = "migrations/postgres")]
async fn a_stopping_worker_waits_for_its_retention_pass_no_longer_than_the_grace(pool: PgPool) {
    let (s, holder) = due_with_a_held_row(&pool, "60000").await;
    let w = s.worker_with(with_grace(Duration::from_secs(1)));
    let (stop, run) = start_until_the_pass_waits(&pool, w, PURGE).await;

    stop.send(()).unwrap();
    tokio::time::timeout(Duration::from_secs(20), run)
        .await
        .expect("the worker stops after its grace though the row is still held")
        .unwrap();
    // Cut off, the pass could not give its turn back: it waits for the next period.
    let next = pass_if_due(s.inbox(), &s.worker(), Utc::now(), EVERY)
        .await
        .unwrap();
    assert!(next.is_none());
    holder.commit().await.unwrap();
}

/// A turn given back is taken by the next process to ask; a take made since is not given back.
async fn a_turn_given_back_is_taken_at_once_unless_taken_again_since(inbox: Inbox) {
    // Nanoseconds, which PostgreSQL does not keep: the give-back must still find its take.
    let t = Utc::now();
    let at = |s: i64| t + secs(s);
    assert!(inbox.take_chore("x", t, EVERY).await.unwrap());
    assert!(!inbox.take_chore("x", at(1), EVERY).await.unwrap());
    assert!(inbox.give_back_chore("x", t, EVERY).await.unwrap());
    assert!(inbox.take_chore("x", at(2), EVERY).await.unwrap());
    assert!(
        !inbox.give_back_chore("x", t, EVERY).await.unwrap(),
        "the take at t+2s is another's"
    );
    assert!(!inbox.take_chore("x", at(3), EVERY).await.unwrap());
    assert!(
        inbox.take_chore("y", at(3), EVERY).await.unwrap(),
        "chores are apart"
    );
}

on_both_backends!(a_turn_given_back_is_taken_at_once_unless_taken_again_since);
