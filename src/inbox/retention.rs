//! Retention: dropping the payloads of finished events, then the finished events themselves, and
//! forgetting signature digests once their replay window has passed. Each walks an index of the
//! rows it changes (migration 0010), so a pass costs what it removes, not what the inbox keeps,
//! and changes them in batches of [`BATCH`] rows, each its own transaction.
//!
//! "Finished" means `processed` or `ignored`; the instant it finished is `processed_at` (set for
//! both by the worker), or `received_at` for rows that never had one (ignored on arrival). Dead
//! letters and events still in the queue (`pending`, `processing`, `retry`) are never touched.

use super::Inbox;
use super::Result;
use chrono::{DateTime, Utc};

/// Rows one retention statement changes at most. Each batch commits on its own, so that a pass
/// over a backlog of finished events (ten minutes of traffic at 4,500 events/s is 2.7 million)
/// holds no transaction open for long: a long one holds back PostgreSQL's cleanup of the rows the
/// workers rewrite meanwhile, and every claim then walks their dead index entries.
pub const BATCH: u64 = 5000;

/// [`BATCH`] as the statements' text: a constant `LIMIT` lets PostgreSQL plan the walk of an
/// index in order for the generic plan too (a parameter would be planned as a tenth of the rows).
macro_rules! batch {
    () => {
        "5000"
    };
}

/// Finished events of integration `$i` that finished before `$b`: the rows retention deletes,
/// walked in the order of `inbox_events_finished`.
macro_rules! finished_before {
    ($i:literal, $b:literal) => {
        concat!(
            "integration = ",
            $i,
            " AND status IN ('processed', 'ignored') ",
            "AND COALESCE(processed_at, received_at) < ",
            $b
        )
    };
}

/// Those whose body is still there: the rows the purge changes, in `inbox_events_unpurged`.
macro_rules! unpurged_before {
    ($i:literal, $b:literal) => {
        concat!(finished_before!($i, $b), " AND body_purged_at IS NULL")
    };
}

/// The ids of the first batch of finished events matching `$filter`, oldest finished first.
macro_rules! batch_ids {
    ($filter:expr) => {
        concat!(
            "SELECT id FROM inbox_events WHERE ",
            $filter,
            " ORDER BY COALESCE(processed_at, received_at) LIMIT ",
            batch!()
        )
    };
}

/// The rows of that batch. PostgreSQL's outer statement repeats the filter, which it re-checks on
/// a row another transaction changed meanwhile. SQLite has one writer, and a repeated filter
/// would have it walk the index over the whole range instead of looking the batch up by rowid.
macro_rules! first_batch {
    (pg, $filter:expr) => {
        concat!("id = ANY(ARRAY(", batch_ids!($filter), ")) AND ", $filter)
    };
    (sqlite, $filter:expr) => {
        concat!("id IN (", batch_ids!($filter), ")")
    };
}

macro_rules! purge {
    ($backend:tt) => {
        concat!(
            "UPDATE inbox_events SET body = $1, body_purged_at = $2 WHERE ",
            first_batch!($backend, unpurged_before!("$3", "$4"))
        )
    };
}
pub const PURGE_PG: &str = purge!(pg);
const PURGE_SQLITE: &str = purge!(sqlite);

/// PostgreSQL's attempts have no foreign key (migration 0005): the attempts of exactly the events
/// this statement deletes go with them, whatever finished in the meantime.
pub const DELETE_FINISHED_PG: &str = concat!(
    "WITH gone AS (DELETE FROM inbox_events WHERE ",
    first_batch!(pg, finished_before!("$1", "$2")),
    " RETURNING id), ",
    "attempts AS (DELETE FROM delivery_attempts WHERE event_row IN (SELECT id FROM gone)) ",
    "SELECT COUNT(*) FROM gone"
);
/// The same first batch twice in one SQLite transaction: its attempts, then the events.
const DELETE_FINISHED_ATTEMPTS_SQLITE: &str = concat!(
    "DELETE FROM delivery_attempts WHERE event_row IN (",
    batch_ids!(finished_before!("$1", "$2")),
    ")"
);
const DELETE_FINISHED_SQLITE: &str = concat!(
    "DELETE FROM inbox_events WHERE ",
    first_batch!(sqlite, finished_before!("$1", "$2"))
);

/// Through `signature_nonces_expiry`, in its order: without the order, a generic plan (which
/// estimates a third of the nonces expired) reads the table until it has a batch, all of it for
/// the last batch, which finds none. PostgreSQL finds the batch's rows again by their place in the
/// table, SQLite by its rowid. A receiver may claim an expired nonce again meanwhile (its upsert
/// moves `expires_at`), so PostgreSQL's batch is locked as it is taken: the rows found are the
/// rows deleted, and a nonce just claimed again is not among them. (Re-checking `expires_at` on
/// the outer statement instead made PostgreSQL walk the index again and test each entry against
/// the whole batch: 180 ms a batch of 5,000, round 38.) Rows a receiver holds are left for the
/// next pass.
pub const PRUNE_NONCES_PG: &str = concat!(
    "DELETE FROM signature_nonces WHERE ctid = ANY(ARRAY(SELECT ctid FROM signature_nonces \
     WHERE expires_at <= $1 ORDER BY expires_at LIMIT ",
    batch!(),
    " FOR UPDATE SKIP LOCKED))"
);
const PRUNE_NONCES_SQLITE: &str = concat!(
    "DELETE FROM signature_nonces WHERE rowid IN (SELECT rowid FROM signature_nonces \
     WHERE expires_at <= $1 ORDER BY expires_at LIMIT ",
    batch!(),
    ")"
);

/// Every integration with finished events, one probe of `inbox_events_finished` each (the
/// entry past the last name found), not a walk of every finished event.
pub const WITH_FINISHED: &str = "WITH RECURSIVE names(integration) AS (\
     SELECT (SELECT integration FROM inbox_events WHERE status IN ('processed', 'ignored') \
     ORDER BY integration, COALESCE(processed_at, received_at) LIMIT 1) \
     UNION ALL SELECT (SELECT e.integration FROM inbox_events e \
     WHERE e.status IN ('processed', 'ignored') AND e.integration > n.integration \
     ORDER BY e.integration, COALESCE(e.processed_at, e.received_at) LIMIT 1) \
     FROM names n WHERE n.integration IS NOT NULL) \
     SELECT integration FROM names WHERE integration IS NOT NULL";

/// Asked before each batch of a long walk: true once its caller is stopping, and the walk ends
/// with the batches it committed (the rest waits for the next pass).
pub type Stop<'a> = &'a (dyn Fn() -> bool + Sync);

/// A walk nobody stops.
pub const NEVER: Stop<'static> = &|| false;

/// Runs `batch` until one changes fewer than [`BATCH`] rows or `stop` says so; the total changed.
async fn in_batches<F, Fut>(stop: Stop<'_>, mut batch: F) -> Result<u64>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<u64>>,
{
    let mut total = 0;
    while !stop() {
        let n = batch().await?;
        total += n;
        if n < BATCH {
            break;
        }
    }
    Ok(total)
}

impl Inbox {
    /// Replaces the body of every finished event of `integration` that finished before
    /// `finished_before` with an empty one and stamps `body_purged_at = now`, [`BATCH`] rows a
    /// transaction. The metadata, the headers, the body's SHA-256 and the delivery history stay.
    /// Returns how many bodies were purged (an already purged row is not counted again).
    pub async fn purge_payloads(
        &self,
        integration: &str,
        finished_before: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> Result<u64> {
        self.purge_payloads_until(integration, finished_before, now, NEVER)
            .await
    }

    /// [`Inbox::purge_payloads`], asking `stop` before each batch.
    pub async fn purge_payloads_until(
        &self,
        integration: &str,
        finished_before: DateTime<Utc>,
        now: DateTime<Utc>,
        stop: Stop<'_>,
    ) -> Result<u64> {
        let empty: &[u8] = &[];
        macro_rules! purge {
            ($sql:expr) => {
                sqlx::query($sql)
                    .bind(empty)
                    .bind(now)
                    .bind(integration)
                    .bind(finished_before)
            };
        }
        in_batches(stop, || async {
            match self {
                Inbox::Postgres(pool) => {
                    let mut tx = super::maintenance(pool).await?;
                    let n = purge!(PURGE_PG).execute(&mut *tx).await?.rows_affected();
                    tx.commit().await?;
                    Ok(n)
                }
                Inbox::Sqlite(pool) => {
                    Ok(purge!(PURGE_SQLITE).execute(pool).await?.rows_affected())
                }
            }
        })
        .await
    }

    /// Deletes every finished event of `integration` that finished before `finished_before`, with
    /// its delivery attempts, [`BATCH`] events a transaction. Its dedupe key goes with it: the
    /// same event id is accepted as new afterwards. Returns how many events were deleted.
    pub async fn delete_finished(
        &self,
        integration: &str,
        finished_before: DateTime<Utc>,
    ) -> Result<u64> {
        self.delete_finished_until(integration, finished_before, NEVER)
            .await
    }

    /// [`Inbox::delete_finished`], asking `stop` before each batch.
    pub async fn delete_finished_until(
        &self,
        integration: &str,
        finished_before: DateTime<Utc>,
        stop: Stop<'_>,
    ) -> Result<u64> {
        in_batches(stop, || {
            self.delete_finished_batch(integration, finished_before)
        })
        .await
    }

    async fn delete_finished_batch(
        &self,
        integration: &str,
        finished_before: DateTime<Utc>,
    ) -> Result<u64> {
        match self {
            Inbox::Postgres(pool) => {
                let mut tx = super::maintenance(pool).await?;
                let n: i64 = sqlx::query_scalar(DELETE_FINISHED_PG)
                    .bind(integration)
                    .bind(finished_before)
                    .fetch_one(&mut *tx)
                    .await?;
                tx.commit().await?;
                Ok(u64::try_from(n).unwrap_or(0))
            }
            // SQLite's foreign key cascades; deleting the attempts first also covers a connection
            // opened without `foreign_keys`. Finished rows never change status again, and SQLite
            // has one writer, so both statements select the same rows. (No statement timeout to
            // lift: SQLite's is a busy timeout.)
            Inbox::Sqlite(pool) => {
                let mut tx = pool.begin().await?;
                sqlx::query(DELETE_FINISHED_ATTEMPTS_SQLITE)
                    .bind(integration)
                    .bind(finished_before)
                    .execute(&mut *tx)
                    .await?;
                let n = sqlx::query(DELETE_FINISHED_SQLITE)
                    .bind(integration)
                    .bind(finished_before)
                    .execute(&mut *tx)
                    .await?
                    .rows_affected();
                tx.commit().await?;
                Ok(n)
            }
        }
    }

    /// Forgets signature digests whose window has passed, [`BATCH`] a statement. Returns how many
    /// were removed.
    pub async fn prune_nonces(&self, now: DateTime<Utc>) -> Result<u64> {
        self.prune_nonces_until(now, NEVER).await
    }

    /// [`Inbox::prune_nonces`], asking `stop` before each batch.
    pub async fn prune_nonces_until(&self, now: DateTime<Utc>, stop: Stop<'_>) -> Result<u64> {
        in_batches(stop, || async {
            match self {
                Inbox::Postgres(pool) => {
                    let mut tx = super::maintenance(pool).await?;
                    let n = sqlx::query(PRUNE_NONCES_PG)
                        .bind(now)
                        .execute(&mut *tx)
                        .await?
                        .rows_affected();
                    tx.commit().await?;
                    Ok(n)
                }
                Inbox::Sqlite(pool) => Ok(sqlx::query(PRUNE_NONCES_SQLITE)
                    .bind(now)
                    .execute(pool)
                    .await?
                    .rows_affected()),
            }
        })
        .await
    }

    /// Every integration that has finished events, configured or not.
    pub async fn integrations_with_finished(&self) -> Result<Vec<String>> {
        backend!(self, pool => {
            Ok(sqlx::query_scalar(WITH_FINISHED).fetch_all(pool).await?)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};

    /// Full batches until the third is asked for, when the caller has begun stopping.
    #[tokio::test]
    async fn a_walk_asked_to_stop_ends_before_its_next_batch() {
        let ran = AtomicU64::new(0);
        let stop = || ran.load(Ordering::SeqCst) == 2;
        let total = in_batches(&stop, || async {
            ran.fetch_add(1, Ordering::SeqCst);
            Ok(BATCH)
        })
        .await
        .unwrap();
        assert_eq!((ran.into_inner(), total), (2, 2 * BATCH));
    }

    #[tokio::test]
    async fn a_walk_nobody_stops_ends_at_its_first_short_batch() {
        let ran = AtomicU64::new(0);
        let total = in_batches(NEVER, || async {
            let n = ran.fetch_add(1, Ordering::SeqCst);
            Ok(if n < 3 { BATCH } else { 7 })
        })
        .await
        .unwrap();
        assert_eq!((ran.into_inner(), total), (4, 3 * BATCH + 7));
    }
}
