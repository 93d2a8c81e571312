//! Retention: dropping the payloads of finished events, then the finished events themselves, and
//! forgetting signature digests once their replay window has passed.
//!
//! "Finished" means `processed` or `ignored`; the instant it finished is `processed_at` (set for
//! both by the worker), or `received_at` for rows that never had one (ignored on arrival). Dead
//! letters and events still in the queue (`pending`, `processing`, `retry`) are never touched.

use super::Inbox;
use super::Result;
use chrono::{DateTime, Utc};

const PRUNE_NONCES: &str = "DELETE FROM signature_nonces WHERE expires_at <= $1";

const PURGE_PAYLOADS: &str = "UPDATE inbox_events SET body = $1, body_purged_at = $2 \
     WHERE integration = $3 AND status IN ('processed', 'ignored') AND body_purged_at IS NULL \
     AND COALESCE(processed_at, received_at) < $4";

/// Finished events of integration `$1` that finished before `$2`: the rows retention deletes.
macro_rules! finished_before {
    () => {
        "integration = $1 AND status IN ('processed', 'ignored') \
         AND COALESCE(processed_at, received_at) < $2"
    };
}

const DELETE_FINISHED_ATTEMPTS: &str = concat!(
    "DELETE FROM delivery_attempts WHERE event_row IN (SELECT id FROM inbox_events WHERE ",
    finished_before!(),
    ")"
);

const WITH_FINISHED: &str = "SELECT DISTINCT integration FROM inbox_events \
     WHERE status IN ('processed', 'ignored')";

const DELETE_FINISHED: &str = concat!("DELETE FROM inbox_events WHERE ", finished_before!());

/// PostgreSQL's attempts have no foreign key (migration 0005): the attempts of exactly the events
/// this statement deletes go with them, whatever finished in the meantime.
const DELETE_FINISHED_PG: &str = concat!(
    "WITH gone AS (DELETE FROM inbox_events WHERE ",
    finished_before!(),
    " RETURNING id), ",
    "attempts AS (DELETE FROM delivery_attempts WHERE event_row IN (SELECT id FROM gone)) ",
    "SELECT COUNT(*) FROM gone"
);

impl Inbox {
    /// Replaces the body of every finished event of `integration` that finished before
    /// `finished_before` with an empty one and stamps `body_purged_at = now`. The metadata, the
    /// headers, the body's SHA-256 and the delivery history stay. Returns how many bodies were
    /// purged (an already purged row is not counted again).
    pub async fn purge_payloads(
        &self,
        integration: &str,
        finished_before: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> Result<u64> {
        let empty: &[u8] = &[];
        let lift = super::lift_statement_timeout(self);
        backend!(self, pool => {
            // A backlog may take longer than the request-path statement timeout to purge.
            let mut tx = pool.begin().await?;
            sqlx::query(lift).execute(&mut *tx).await?;
            let n = sqlx::query(PURGE_PAYLOADS)
                .bind(empty)
                .bind(now)
                .bind(integration)
                .bind(finished_before)
                .execute(&mut *tx)
                .await?
                .rows_affected();
            tx.commit().await?;
            Ok(n)
        })
    }

    /// Deletes every finished event of `integration` that finished before `finished_before`, with
    /// its delivery attempts. Its dedupe key goes with it: the same event id is accepted as new
    /// afterwards. Returns how many events were deleted.
    pub async fn delete_finished(
        &self,
        integration: &str,
        finished_before: DateTime<Utc>,
    ) -> Result<u64> {
        match self {
            Inbox::Postgres(pool) => {
                let mut tx = pool.begin().await?;
                sqlx::query(super::lift_statement_timeout(self))
                    .execute(&mut *tx)
                    .await?;
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
                sqlx::query(DELETE_FINISHED_ATTEMPTS)
                    .bind(integration)
                    .bind(finished_before)
                    .execute(&mut *tx)
                    .await?;
                let n = sqlx::query(DELETE_FINISHED)
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

    /// Forgets signature digests whose window has passed. Returns how many were removed.
    pub async fn prune_nonces(&self, now: DateTime<Utc>) -> Result<u64> {
        backend!(self, pool => {
            Ok(sqlx::query(PRUNE_NONCES).bind(now).execute(pool).await?.rows_affected())
        })
    }

    /// Every integration that has finished events, configured or not (a walk of the
    /// `(integration, status)` index, free of the request-path statement timeout).
    pub async fn integrations_with_finished(&self) -> Result<Vec<String>> {
        let lift = super::lift_statement_timeout(self);
        backend!(self, pool => {
            let mut tx = pool.begin().await?;
            sqlx::query(lift).execute(&mut *tx).await?;
            let names = sqlx::query_scalar(WITH_FINISHED).fetch_all(&mut *tx).await?;
            tx.commit().await?;
            Ok(names)
        })
    }
}
