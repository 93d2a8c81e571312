//! Retention's forgetting of ordering versions (`Inbox::forget_versions`), on its own clock: one
//! walk of `resource_versions` for every integration, a stretch of the table a statement
//! ([`VERSIONS_PAGES`] pages, [`VERSIONS_ROWIDS`] SQLite rowids), so that a delivery taking the
//! lease of a stale resource waits for one stretch at most (round 39; until then one statement
//! per integration held every due version until it was done).

use chrono::{DateTime, Duration, TimeZone, Utc};
use hookgate::inbox::{Inbox, SKIPPED_STRETCHES_MAX, VERSIONS_PAGES, VERSIONS_ROWIDS};
use std::collections::HashSet;
use std::sync::atomic::{AtomicU32, Ordering};

fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 6, 1, 12, 0, 0).unwrap()
}

/// The dedupe window's edge: versions that have not moved since are due.
fn cutoff() -> DateTime<Utc> {
    t0() - Duration::days(30)
}

/// `n` versions of `integration`, resources `r00001`.. in key order and in the table's order:
/// every `recent_every`-th recent (none for 0), the others unchanged since a day before
/// [`cutoff`]; resource `held` leased by another worker until after [`t0`].
async fn seed(inbox: &Inbox, integration: &str, n: u64, recent_every: u64, held: u64) {
    let recent = match recent_every {
        0 => "FALSE".to_string(),
        k => format!("n % {k} = 0"),
    };
    let sql = format!(
        "WITH RECURSIVE g(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM g WHERE n < {n}) \
         INSERT INTO resource_versions \
         (integration, resource_id, version, updated_at, locked_until, lock_token) \
         SELECT '{integration}', 'r' || substr('0000' || n, -5, 5), 'i:1', \
         CASE WHEN {recent} THEN $1 ELSE $2 END, \
         CASE WHEN n = {held} THEN $3 END, CASE WHEN n = {held} THEN 'other' END FROM g"
    );
    // SQLite's substr counts a negative start from the end; PostgreSQL's does not, lpad pads.
    let sql = match inbox {
        Inbox::Postgres(_) => sql.replace("substr('0000' || n, -5, 5)", "lpad(n::text, 5, '0')"),
        Inbox::Sqlite(_) => sql,
    };
    let (recent, stale, until) = (
        t0() - Duration::days(1),
        cutoff() - Duration::days(1),
        t0() + Duration::hours(1),
    );
    on!(inbox, pool => {
        sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(recent)
            .bind(stale)
            .bind(until)
            .execute(pool)
            .await
            .unwrap();
    });
}

/// `(integration, resource)` of every version left, in key order.
async fn left(inbox: &Inbox) -> Vec<(String, String)> {
    on!(inbox, pool => {
        sqlx::query_as(
            "SELECT integration, resource_id FROM resource_versions ORDER BY integration, resource_id",
        )
        .fetch_all(pool)
        .await
        .unwrap()
    })
}

/// How many stretches a walk of the table takes now.
async fn stretches(inbox: &Inbox) -> i64 {
    match inbox {
        Inbox::Postgres(pool) => {
            let pages: i64 = sqlx::query_scalar(
                "SELECT pg_relation_size('resource_versions') / current_setting('block_size')::int8",
            )
            .fetch_one(pool)
            .await
            .unwrap();
            (pages + VERSIONS_PAGES - 1) / VERSIONS_PAGES
        }
        Inbox::Sqlite(pool) => {
            let rowids: i64 = sqlx::query_scalar("SELECT max(rowid) FROM resource_versions")
                .fetch_one(pool)
                .await
                .unwrap();
            (rowids + VERSIONS_ROWIDS - 1) / VERSIONS_ROWIDS
        }
    }
}

fn resources(integration: &str, which: impl Iterator<Item = u64>) -> Vec<(String, String)> {
    which
        .map(|i| (integration.to_string(), format!("r{i:05}")))
        .collect()
}

/// Over more than two stretches: every due version is forgotten, once, each against its own
/// integration's cutoff; the recent ones, the held one and an unlisted integration's stay.
async fn forget_versions_walks_every_stretch_against_each_integrations_cutoff(inbox: Inbox) {
    let n = 50_001;
    seed(&inbox, "v/a", n, 3, 7).await;
    seed(&inbox, "v/b", 10, 0, 0).await;
    seed(&inbox, "v/c", 10, 0, 0).await;
    assert!(
        stretches(&inbox).await > 2,
        "the walk takes several stretches"
    );
    // `v/b` keeps versions for longer: its stale rows are within its window. `v/c` is not listed.
    let cutoffs = [
        ("v/a".to_string(), cutoff()),
        ("v/b".to_string(), cutoff() - Duration::days(10)),
    ];
    let due = (1..=n).filter(|i| i % 3 != 0 && *i != 7).count() as u64;
    assert_eq!(inbox.forget_versions(&cutoffs, t0()).await.versions, due);
    let kept = [
        resources("v/a", (1..=n).filter(|i| i % 3 == 0 || *i == 7)),
        resources("v/b", 1..=10),
        resources("v/c", 1..=10),
    ]
    .concat();
    assert_eq!(left(&inbox).await, kept);
    assert_eq!(inbox.forget_versions(&cutoffs, t0()).await.versions, 0);
    assert_eq!(inbox.forget_versions(&[], t0()).await.versions, 0);
}

/// The versions in the walk's first stretch: the table's first [`VERSIONS_PAGES`] pages, or
/// SQLite's first [`VERSIONS_ROWIDS`] rowids.
async fn in_first_stretch(inbox: &Inbox) -> HashSet<(String, String)> {
    let rows: Vec<(String, String)> = match inbox {
        Inbox::Postgres(pool) => sqlx::query_as(
            "SELECT integration, resource_id FROM resource_versions \
             WHERE ctid < format('(%s,0)', $1::int8)::tid",
        )
        .bind(VERSIONS_PAGES)
        .fetch_all(pool)
        .await
        .unwrap(),
        Inbox::Sqlite(pool) => sqlx::query_as(
            "SELECT integration, resource_id FROM resource_versions WHERE rowid <= $1",
        )
        .bind(VERSIONS_ROWIDS)
        .fetch_all(pool)
        .await
        .unwrap(),
    };
    rows.into_iter().collect()
}

/// A walk asked to stop (its worker process is stopping) ends after the stretch it is on: what
/// it forgot stays forgotten, and the next walk forgets the rest. Until round 46 the walk went on
/// to the end of the table, and a stopping worker's pass could be cut off at the end of its grace
/// with its turn still taken.
async fn a_walk_asked_to_stop_ends_after_the_stretch_it_is_on(inbox: Inbox) {
    let n = 40_000;
    seed(&inbox, "v/a", n, 0, 0).await;
    assert!(stretches(&inbox).await > 2);
    let first = in_first_stretch(&inbox).await;
    assert!(!first.is_empty());
    let cutoffs = [("v/a".to_string(), cutoff())];
    let asked = AtomicU32::new(0);
    let after_one = || asked.fetch_add(1, Ordering::SeqCst) >= 1;

    let walk = inbox
        .forget_versions_until(&cutoffs, t0(), &after_one)
        .await;
    assert!(walk.failed.is_none(), "{:?}", walk.failed);
    assert_eq!(walk.versions, first.len() as u64);
    let rest: Vec<(String, String)> = resources("v/a", 1..=n)
        .into_iter()
        .filter(|r| !first.contains(r))
        .collect();
    assert_eq!(left(&inbox).await, rest);

    let stopped = inbox.forget_versions_until(&cutoffs, t0(), &|| true).await;
    assert_eq!(stopped.versions, 0);
    assert_eq!(
        inbox.forget_versions(&cutoffs, t0()).await.versions,
        rest.len() as u64
    );
    assert_eq!(left(&inbox).await, []);
}

on_both_backends!(
    forget_versions_walks_every_stretch_against_each_integrations_cutoff,
    a_walk_asked_to_stop_ends_after_the_stretch_it_is_on,
);

/// A delivery that takes the lease of a stale resource while the pass is further on does not
/// wait for the pass. Here the pass stops at the last resource, which another transaction holds;
/// the stretches before it must be forgotten (committed) by then, and the first resource's lease
/// taken at once. One statement over every resource held them all until it could finish.
#[sqlx::test(migrations = "migrations/postgres")]
async fn a_lease_on_a_stale_resource_waits_for_one_stretch_of_the_pass_at_most(pool: sqlx::PgPool) {
    let inbox = Inbox::Postgres(pool.clone());
    let n: u64 = 50_000;
    seed(&inbox, "v/a", n, 0, 0).await;
    assert!(stretches(&inbox).await > 2);
    let mut holder = pool.begin().await.unwrap();
    sqlx::query("SELECT 1 FROM resource_versions WHERE resource_id = $1 FOR UPDATE")
        .bind(format!("r{n:05}"))
        .execute(&mut *holder)
        .await
        .unwrap();

    let pass = {
        let inbox = inbox.clone();
        let cutoffs = [("v/a".to_string(), cutoff())];
        tokio::spawn(async move { inbox.forget_versions(&cutoffs, t0()).await })
    };
    let count = || async {
        sqlx::query_scalar::<_, i64>("SELECT COUNT(*) FROM resource_versions")
            .fetch_one(&pool)
            .await
            .unwrap()
    };
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(20);
    while count().await == n as i64 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "nothing the pass forgot was committed while its last resource was held"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let lease = tokio::time::timeout(
        std::time::Duration::from_secs(5),
        inbox.lock_resource("v/a", "r00001", t0(), t0() + Duration::minutes(1), "tok"),
    )
    .await
    .expect("the lease of a forgotten resource waits for nothing")
    .unwrap();
    assert_eq!(
        lease,
        Some(None),
        "a fresh lease: the version was forgotten"
    );
    assert!(!pass.is_finished(), "the pass waits on the held resource");

    holder.commit().await.unwrap();
    let walk = pass.await.unwrap();
    assert!(walk.failed.is_none(), "{:?}", walk.failed);
    assert_eq!(walk.versions, n);
    assert_eq!(left(&inbox).await, resources("v/a", [1].into_iter()));
}

/// A stretch that waits for a version another transaction holds is left for the next pass once
/// its wait reaches the statement timeout (as `lock_timeout`), and the walk goes on to the next,
/// up to [`SKIPPED_STRETCHES_MAX`] of them; the next failure ends the walk. Until round 40 the
/// first held row ended the walk, and with it the rest of the retention pass.
#[sqlx::test(migrations = "migrations/postgres")]
async fn a_stretch_behind_a_held_version_waits_for_the_next_pass_and_the_walk_goes_on(
    pool: sqlx::PgPool,
) {
    let n: u64 = 99_999;
    seed(&Inbox::Postgres(pool.clone()), "v/a", n, 0, 0).await;
    let inbox = crate::common::with_statement_timeout(&pool, "300").await;
    // Each resource's stretch: the page it lies on, VERSIONS_PAGES a stretch.
    let sql = format!(
        "SELECT resource_id, ((ctid::text::point)[0]::int8 / {VERSIONS_PAGES}) \
         FROM resource_versions ORDER BY resource_id"
    );
    let lie: Vec<(String, i64)> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .fetch_all(&pool)
        .await
        .unwrap();
    // One version held in stretch 0, and in each of the next SKIPPED_STRETCHES_MAX from 2 on:
    // 0, 2, 3 are skipped, 1 forgotten, 4 ends the walk, and the stretches after it wait.
    let max = i64::from(SKIPPED_STRETCHES_MAX);
    let held: Vec<i64> = [0].into_iter().chain(2..2 + max).collect();
    let last = lie.iter().map(|(_, s)| *s).max().unwrap();
    assert!(
        last > 1 + max,
        "a stretch after the walk's end, in {}",
        last + 1
    );
    let mut holder = pool.begin().await.unwrap();
    for s in &held {
        let first = lie.iter().find(|(_, at)| at == s).unwrap();
        sqlx::query("SELECT 1 FROM resource_versions WHERE resource_id = $1 FOR UPDATE")
            .bind(&first.0)
            .execute(&mut *holder)
            .await
            .unwrap();
    }

    let cutoffs = [("v/a".to_string(), cutoff())];
    let walk = inbox.forget_versions(&cutoffs, t0()).await;
    let stop = *held.last().unwrap();
    let forgotten = |s: i64| s < stop && !held.contains(&s);
    let kept: Vec<(String, String)> = lie
        .iter()
        .filter(|(_, s)| !forgotten(*s))
        .map(|(r, _)| ("v/a".to_string(), r.clone()))
        .collect();
    assert_eq!(walk.versions, (lie.len() - kept.len()) as u64);
    assert_eq!(left(&inbox).await, kept);
    let failed = walk.failed.expect("the held stretches failed");
    assert!(failed.is_lock_wait());
    assert!(
        failed.to_string().contains("lock timeout"),
        "the wait was given up, not a slow stretch: {failed}"
    );

    holder.commit().await.unwrap();
    let walk = inbox.forget_versions(&cutoffs, t0()).await;
    assert!(walk.failed.is_none(), "{:?}", walk.failed);
    assert_eq!(walk.versions, kept.len() as u64);
    assert_eq!(left(&inbox).await, []);
}
