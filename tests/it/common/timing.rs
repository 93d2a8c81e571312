//! What the timing tests share: a lock another session holds on a table, released a fixed time
//! after a statement of this test's database started waiting for it (a transaction made slow by
//! a known amount without a sleep in the code under test), and a histogram's observations under
//! a bound.

use hookgate::metrics::histogram_buckets;
use sqlx::PgPool;
use std::time::Duration;

/// Takes `lock` (`LOCK TABLE … IN … MODE`) in a transaction of its own, and returns it with the
/// future that, once a session of this database waits for a lock, holds it `hold` longer and
/// commits. Panics when nothing waited within five seconds.
pub async fn held_lock(
    pool: &PgPool,
    lock: &'static str,
    hold: Duration,
) -> impl std::future::Future<Output = ()> + use<> {
    let mut other = pool.begin().await.unwrap();
    sqlx::query(lock).execute(&mut *other).await.unwrap();
    let pool = pool.clone();
    async move {
        // This test's database only: the tests beside it use databases of their own.
        let blocked = "SELECT count(*) FROM pg_stat_activity \
                       WHERE datname = current_database() AND wait_event_type = 'Lock'";
        for _ in 0..500 {
            let n: i64 = sqlx::query_scalar(blocked).fetch_one(&pool).await.unwrap();
            if n > 0 {
                tokio::time::sleep(hold).await;
                return other.commit().await.unwrap();
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("nothing waited for the lock");
    }
}

/// (observations in buckets bounded under `bound` seconds, all observations) of the histogram
/// `name` in the exposition `text`, summed over its labels.
pub fn under(text: &str, name: &str, bound: f64) -> (f64, f64) {
    let buckets = histogram_buckets(text, &format!("{name}_bucket"));
    let within = buckets
        .iter()
        .filter(|(le, _)| *le < bound)
        .map(|(_, n)| *n)
        .fold(0.0, f64::max);
    (within, buckets.last().map_or(0.0, |(_, n)| *n))
}
